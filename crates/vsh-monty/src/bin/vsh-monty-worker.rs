//! `vsh-monty-worker`: runs Monty programs for a parent `vsh-monty` executor,
//! speaking the framed protocol of `vsh_monty` on stdin and stdout. It is
//! spawned confined by `vsh-sandbox` and has no access to the workspace: every
//! file operation is a request the parent answers.
//!
//! The limited allocator is the global allocator, so the parent's memory
//! budget is enforced here.

#![forbid(unsafe_code)]

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: monty_alloc::LimitedAllocator = monty_alloc::LimitedAllocator;

fn main() -> ExitCode {
    vsh_monty::worker_process::worker_main()
}
