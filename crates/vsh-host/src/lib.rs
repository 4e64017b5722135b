//! The one seam that touches the operating system for workspace and data paths:
//! a capability-rooted directory handle, and the [`Host`] of agent tools built on it.
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
//! [`Host`] is the seed API for agent tools (`host.txt`): path resolution in a
//! jail ([`Host::resolve_in_jail`]), file operations carried out through the
//! root's `CapDir` ([`Host::read_file`], [`Host::write_file`], [`Host::stat`],
//! [`Host::read_dir`]; async on tokio, with `*_sync` twins), and supervised
//! commands ([`Host::exec`], [`Host::run_capture`]) spawned through
//! `vsh_sandbox::ConfinedCommand` with timeouts, output caps, cancellation and a
//! kill of the whole process tree.
//!
//! This crate is Linux-only. It does not decide policy, order commit steps or
//! cache anything: each call is one observation or one change of the host.

mod capdir;
mod counters;
mod error;
mod host;
mod mutate;
mod resolve;
mod stat;

#[cfg(test)]
mod tests;

pub use capdir::CapDir;
pub use counters::{CounterSnapshot, HostCounters};
pub use error::HostError;
pub use host::{
    DEFAULT_MAX_READ_BYTES, DirEntry, EscapeReason, ExecError, ExecLimits, ExecOutput, ExecRequest, FIXED_PATH,
    FileRead, FileStat, FsError, Host, HostConfig, PathError, PathPolicy, ShellSpec,
};
pub use mutate::{LockGuard, LockWait};
pub use stat::{FileContent, FileIdentity, HostDirEntry, HostKind, HostStat};
/// The cooperative-cancellation token of [`Host::exec`] and [`Host::run_capture`].
///
/// It is tokio-util's type because the seed signature names it, and because it
/// is the cancellation primitive tokio code already shares: cheap clones, child
/// tokens for scoped cancellation, and an async `cancelled()` that the exec
/// supervisor selects on next to the deadline. It is re-exported here so callers
/// need not depend on tokio-util themselves.
pub use tokio_util::sync::CancellationToken;

/// The effective user id of this process (who owns what it creates).
pub fn effective_uid() -> u32 {
    vsh_sandbox::effective_uid()
}
