//! Confine one child process with Landlock, seccomp and rlimits, and report honestly what the kernel enforces.
//!
//! [`ConfinedCommand`] is shaped like [`std::process::Command`], with three differences: the
//! environment starts empty (only [`ConfinedCommand::env`] variables cross), the program must be
//! admitted by a [`ToolContext`], and [`ConfinedCommand::spawn`] confines the child according to
//! a [`SandboxPolicy`] and fails closed when the kernel cannot meet the policy's floors.
//!
//! # Spawn order
//!
//! 1. Admission: [`ToolContext::check_exec`] resolves the program to an absolute canonical path
//!    and refuses it unless granted. The environment is checked against a denylist of
//!    loader and interpreter hijacks ([`env_denylisted`]). Nothing has run yet.
//! 2. Enforcement: [`probe`] says what this kernel can enforce; [`KernelSupport::report_for`]
//!    turns that and the policy into an [`EnforcementReport`] with one [`Enforcement`] level per
//!    [`Axis`]. If any axis is below the policy's floor, the spawn fails with
//!    [`ToolError::BelowFloor`] naming the axis, and the target never runs.
//! 3. Confinement and spawn: the Landlock ruleset and the seccomp program are built in the
//!    parent; between `fork` and `exec` the child only makes raw system calls on that prepared
//!    data (rlimits, `no_new_privs`, `landlock_restrict_self`, `capset`, `seccomp`). Any failure
//!    there aborts before `exec` and comes back as [`ToolError::Setup`] naming the step.
//!
//! # Mechanisms (Linux)
//!
//! - **Landlock**, with every filesystem right of the kernel's ABI (pinned to at most
//!   [`NEWEST_REVIEWED_LANDLOCK_ABI`]), built with `CompatLevel::HardRequirement`; TCP bind and
//!   connect (no port rules means all TCP is denied; [`SandboxPolicy::allow_loopback_tcp`] adds
//!   connect rules); the abstract-unix-socket and signal scopes.
//! - **seccomp**, one BPF program: x32 syscall numbers denied, `clone3` answered with `ENOSYS`
//!   (so libc falls back to `clone`, whose namespace flags are checked), and a deny list
//!   (`socket` for every family, `AF_UNIX` too unless [`SandboxPolicy::allow_unix_sockets`],
//!   `socketpair` for every family but `AF_UNIX`, ptrace and `process_vm_*`, the mount family,
//!   `unshare`/`setns`, `bpf`, keyrings, `io_uring`, `perf_event_open`, `userfaultfd`, kexec,
//!   modules, `setsid`/`setpgid`, terminal injection ioctls, System V IPC for a child in the
//!   host's IPC namespace (a candidate's child has its own), and more; see [`SandboxPolicy`]).
//! - **`no_new_privs`**, **rlimits**, **all capabilities dropped**, and optionally another uid
//!   and gid ([`SandboxPolicy::run_as`]).
//!
//! # Limitations
//!
//! - **Inherited file descriptors would bypass Landlock**: access is checked when a file is
//!   opened, so a descriptor the child inherits stays usable. So only the three standard streams
//!   cross, as configured: the child's setup marks every other descriptor close-on-exec
//!   (`close_range`), those the parent itself inherited from whatever started it included.
//! - Landlock does not restrict metadata: `stat`, `readlink` and `chdir` work on any path.
//! - **The exec axis limits `execve`, not code**: a granted interpreter runs whatever it can read;
//!   so does the dynamic loader, which must stay executable (`ld.so <readable ELF file>` runs a
//!   file `execve` would refuse, including any system program); and a program copied into a
//!   memfd executes through `/proc/self/fd`, because Landlock does not govern the kernel's
//!   internal mounts. None of these reaches anything the filesystem, network or IPC axes deny.
//!   Grant exec and write roots with that in mind.
//! - Connecting to *pathname* unix sockets is not governed by Landlock before ABI 9 (this crate
//!   pins at most ABI 7): by default seccomp denies the child a unix socket of its own
//!   (`socketpair` stays), so none is reachable; with [`SandboxPolicy::allow_unix_sockets`] (or
//!   the host's network) a socket file the child can name (a daemon's in `/run`, say) is. The
//!   IPC axis reason says which.
//! - `RLIMIT_NPROC` is not enforced for uid 0 and counts every process of the uid system-wide:
//!   use [`SandboxPolicy::run_as`] with a dedicated uid, one per child ([`CommandUser`] leases
//!   one machine-wide; [`FuseMount::with_idmapped_scratch`] keeps what the children store as one
//!   uid).
//! - Nothing here kills or reaps the child: lifecycle (timeouts, group kill) is the caller's job.
//!   Because `setsid` and `setpgid` are denied, a child started with
//!   [`ConfinedCommand::new_process_group`] and all its descendants stay in that group.
// vsh-sandbox resolves and checks the programs it confines by path, before any handle exists.
#![allow(clippy::disallowed_methods)]

mod cgroup;
mod command;
mod context;
mod env;
mod error;
mod kernel;
mod namespace;
mod policy;
mod report;
mod ruleset;
mod seccomp;
mod setup;
#[allow(unsafe_code)]
mod sys;
mod uids;

pub use command::{
    ConfinedChild, ConfinedCommand, input_file, kill_process_group, wait_readable, wait_readable_spinning,
};
pub use context::{EXEC_SEARCH_PATH, ExecGrant, ToolContext, find_on_path};
pub use env::{DENIED_NAMES as ENV_DENIED_NAMES, DENIED_PREFIXES as ENV_DENIED_PREFIXES, env_denylisted};
pub use error::ToolError;
pub use kernel::{KernelSupport, NEWEST_REVIEWED_LANDLOCK_ABI, probe};
pub use namespace::{CandidateMissing, FuseMount, MountWaiter, candidate_support};
pub use policy::{FsSpace, NetworkAccess, OPEN_FILES_SOFT, ResourceLimits, SandboxPolicy, fs_space};
pub use report::{Axis, AxisReport, Enforcement, EnforcementReport};
pub use uids::{COMMAND_UIDS, CommandUser};

/// The effective user id of this process: the uid a child runs as unless its
/// policy names another ([`SandboxPolicy::run_as`]).
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The effective gid of the calling process.
pub fn effective_gid() -> u32 {
    rustix::process::getegid().as_raw()
}
