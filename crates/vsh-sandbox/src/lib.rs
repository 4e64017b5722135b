//! Confine one child process with Landlock, seccomp and rlimits, and report honestly what the kernel enforces.
