//! The one seam that touches the operating system for workspace and data paths:
//! a capability-rooted directory handle.
//!
//! [`CapDir`] is an opened directory. Every path given to it is a
//! [`vsh_types::VPath`] resolved beneath that directory in the kernel
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS`, or an `O_NOFOLLOW` component walk where `openat2` is
//! unavailable), so no symlink is ever followed and nothing outside the
//! directory can be reached through it. Observation (`lstat`, `read_file`,
//! `hash_file`, `read_link`, `list_dir`) is counted in [`HostCounters`] so tests
//! can prove what a run touched; mutation primitives (create, rename, remove,
//! chmod, sync, lock) are single steps for the commit engine and the store.
//!
//! The seed API for agent tools (`host.txt`: jailed file operations and
//! supervised commands) is the crate `vsh-tools`, built on this handle; it is
//! apart so that its async runtime and command supervisor never compile into
//! the crates that only need the handle.
//!
//! This crate is Linux-only. It does not decide policy, order commit steps or
//! cache anything: each call is one observation or one change of the host.
// vsh-host builds the capability handles, so it is where the host is reached by path.
#![allow(clippy::disallowed_methods)]

mod barriers;
mod capdir;
mod counters;
mod error;
mod mutate;
mod resolve;
mod stat;
mod tree;

#[cfg(test)]
mod tests;

pub use barriers::{MAX_BARRIER_THREADS, MIN_CONCURRENT_BARRIERS, concurrently, set_owner, start_writeback};
pub use capdir::CapDir;
pub use counters::{CounterSnapshot, HostCounters};
pub use error::HostError;
pub use mutate::{LockGuard, LockWait, WritableDir};
pub use stat::{FileContent, FileIdentity, HostDirEntry, HostKind, HostSpace, HostStat};

/// The effective user id of this process (who owns what it creates).
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}
