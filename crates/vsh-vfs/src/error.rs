//! [`VfsError`]: why a virtual filesystem operation failed.

use vsh_host::HostError;
use vsh_types::VPath;

/// A failed [`crate::VirtualFs`] operation.
///
/// Errors split in two classes (see [`VfsError::is_terminal`]): *guest errors*
/// describe the virtual image (a missing file, a non-empty directory) and become
/// ordinary, catchable exceptions in the guest; *terminal errors* mean the image
/// itself can no longer be trusted or bounded (host I/O failed, the base changed
/// under the run, a snapshot limit was reached) and end the run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VfsError {
    /// The path does not exist.
    #[error("no such file or directory: {path}")]
    NotFound {
        /// The missing path.
        path: VPath,
    },
    /// The path already exists.
    #[error("file exists: {path}")]
    AlreadyExists {
        /// The existing path.
        path: VPath,
    },
    /// A directory was required (or a path continued below a non-directory).
    #[error("not a directory: {path}")]
    NotADirectory {
        /// The offending path.
        path: VPath,
    },
    /// A non-directory was required.
    #[error("is a directory: {path}")]
    IsADirectory {
        /// The offending path.
        path: VPath,
    },
    /// The directory has entries.
    #[error("directory not empty: {path}")]
    DirectoryNotEmpty {
        /// The directory.
        path: VPath,
    },
    /// A path continues below a symlink; vsh never follows symlinks.
    #[error("path goes through a symlink, which is never followed: {path}")]
    SymlinkInPath {
        /// The symlink.
        path: VPath,
    },
    /// The operation is not valid for these arguments (for example moving a
    /// directory into itself).
    #[error("invalid operation on {path}: {reason}")]
    InvalidOperation {
        /// The path involved.
        path: VPath,
        /// What was wrong.
        reason: &'static str,
    },
    /// The workspace root cannot be removed, renamed or replaced.
    #[error("the workspace root cannot be changed")]
    RootMutation,
    /// The base holds a node vsh does not model (a FIFO, socket or device).
    #[error("unsupported special file: {path}")]
    SpecialFile {
        /// The path.
        path: VPath,
    },
    /// A directory entry name is not valid UTF-8 and cannot be named by a guest.
    #[error("directory {path} holds a name that is not valid UTF-8")]
    NonUtf8Name {
        /// The directory.
        path: VPath,
    },
    /// The path crosses a mount point inside the workspace (a bind mount of
    /// something outside it, say): what lies beyond is not the workspace's.
    /// A guest error (`EACCES`), refused like any way out.
    #[error("{path} is a mount point; paths do not cross it")]
    CrossesMount {
        /// The mount point.
        path: VPath,
    },
    /// The host refused to show a node (`EACCES`, `EPERM`: its mode or its
    /// directory's mode forbids this process), or its name is too long for
    /// the host (`ENAMETOOLONG`). A guest error with that errno, as `CPython`
    /// raises it; the run goes on.
    #[error("{path}: the host refused access (errno {errno})")]
    Inaccessible {
        /// The node.
        path: VPath,
        /// The host's errno.
        errno: i32,
    },
    /// A base file changed between two observations in the same run.
    #[error("base changed during the run: {path}")]
    BaseChanged {
        /// The path.
        path: VPath,
    },
    /// A file whose bytes the policy never lets a program read changed so
    /// shortly before the run (less than 100 ms) that its stamp does not yet
    /// stand for its content, and the run changed it: its before state could
    /// be known only by its digest, and a digest would tell whether the run
    /// wrote its very bytes. Refused whatever the file and the run hold (so
    /// the refusal tells nothing either); a run a moment later finds it settled.
    #[error(
        "{path} changed less than 100 ms before the run, and its bytes are protected from reading: what it held \
         cannot be known without them yet; run again in a moment"
    )]
    UnsettledUnreadable {
        /// The path.
        path: VPath,
    },
    /// A symlink whose target the policy never lets a program read was
    /// replaced by the run: its before state is its target's digest, so
    /// the diff would tell whether the run wrote its very target. Refused
    /// whatever the run wrote; deleting it is allowed.
    #[error(
        "{path} is a symlink whose target is protected from reading: a run may delete it, not replace it (what it \
         pointed to could be told only by its target)"
    )]
    UnreadableSymlinkReplaced {
        /// The path.
        path: VPath,
    },
    /// A snapshot limit was reached.
    #[error("snapshot limit {limit} exceeded at {path}: {attempted} > {max}")]
    SnapshotLimit {
        /// Which limit.
        limit: &'static str,
        /// The path being observed.
        path: VPath,
        /// What the operation needed.
        attempted: u64,
        /// The limit.
        max: u64,
    },
    /// Host I/O failed.
    #[error("host I/O failed")]
    Host(#[source] HostError),
}

impl From<HostError> for VfsError {
    /// Per-node refusals of the host (permissions, a name too long, a mount
    /// point) describe the node, not a failure of the image: they become
    /// guest errors. Every other host error is terminal.
    fn from(error: HostError) -> Self {
        const EPERM: i32 = 1;
        const EACCES: i32 = 13;
        const ENAMETOOLONG: i32 = 36;
        match error {
            HostError::CrossesMount { path } => Self::CrossesMount { path },
            HostError::Io { path, source, .. }
                if matches!(source.raw_os_error(), Some(EPERM | EACCES | ENAMETOOLONG)) =>
            {
                Self::Inaccessible { path, errno: source.raw_os_error().unwrap_or(EACCES) }
            }
            other => Self::Host(other),
        }
    }
}

impl VfsError {
    /// Whether the error ends the run (the guest must not see or catch it).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::BaseChanged { .. }
                | Self::UnsettledUnreadable { .. }
                | Self::UnreadableSymlinkReplaced { .. }
                | Self::SnapshotLimit { .. }
                | Self::Host(_)
        )
    }

    /// Whether the error names a node the guest cannot be shown (a special
    /// file, a name that is not UTF-8, one the host refuses, a mount point):
    /// a walk over a tree skips such nodes instead of failing.
    pub fn is_unrepresentable(&self) -> bool {
        matches!(
            self,
            Self::SpecialFile { .. } | Self::NonUtf8Name { .. } | Self::Inaccessible { .. } | Self::CrossesMount { .. }
        )
    }

    /// The POSIX errno a guest sees for a guest error, `None` for terminal errors.
    pub fn errno(&self) -> Option<i32> {
        Some(match self {
            Self::NotFound { .. } => 2,
            Self::AlreadyExists { .. } => 17,
            Self::NotADirectory { .. } => 20,
            Self::IsADirectory { .. } => 21,
            Self::InvalidOperation { .. } => 22,
            Self::DirectoryNotEmpty { .. } => 39,
            Self::SymlinkInPath { .. } => 40,
            Self::RootMutation | Self::SpecialFile { .. } | Self::NonUtf8Name { .. } | Self::CrossesMount { .. } => 13,
            Self::Inaccessible { errno, .. } => *errno,
            Self::BaseChanged { .. }
            | Self::UnsettledUnreadable { .. }
            | Self::UnreadableSymlinkReplaced { .. }
            | Self::SnapshotLimit { .. }
            | Self::Host(_) => {
                return None;
            }
        })
    }
}
