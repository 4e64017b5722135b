//! The Monty worker the end-to-end tests run programs in.
//!
//! It is this package's own binary, so cargo builds it in the same invocation
//! as the tests, with the same features, and its build identity always matches
//! theirs: `cargo test -p vsh-integration-tests` alone and `cargo test
//! --workspace` both pass, whatever was built before.
#![forbid(unsafe_code)]

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: monty_alloc::LimitedAllocator = monty_alloc::LimitedAllocator;

fn main() -> ExitCode {
    vsh::lower::vsh_monty::worker_process::worker_main()
}
