//! [`HostError`]: every way a [`crate::CapDir`] operation can fail.
//!
//! Semantic variants (missing path, symlink in the way, wrong kind, size limit)
//! are separate from raw I/O failures, so callers never parse messages or match
//! on errno for the common cases. [`HostError::errno`] gives the number a caller
//! needs to raise a matching Python `OSError`.

use std::io;
use std::path::PathBuf;

use vsh_types::VPath;

/// An error from a host filesystem operation.
///
/// Paths in the variants are relative to the [`crate::CapDir`] the operation ran
/// on. Where a proper ancestor is at fault (a symlink or a non-directory in the
/// middle of the path), `path` names that ancestor, not the requested path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// A root directory could not be opened (missing, not a directory, no permission).
    #[error("cannot open {} as a directory root", path.display())]
    InvalidRoot {
        /// The host path as given or as canonicalized.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Resolution met a symbolic link, or the kernel refused an escape from the
    /// root (`EXDEV` from `RESOLVE_BENEATH`, which a `..`-free path only meets
    /// through a symlink, so it is reported the same way).
    ///
    /// `path` is the first component, counted from the root, that is a symlink.
    /// It is the requested path itself when an operation needs to traverse it as
    /// a directory (`list_dir`, `open_subdir`, `sync_dir`).
    #[error("symbolic link in path at {path}")]
    SymlinkInPath {
        /// The offending component (a prefix of the requested path).
        path: VPath,
    },
    /// Resolution would cross a mount point inside the root (a bind mount,
    /// say) that the handle was not allowed to cross: its files are not the
    /// workspace's. `path` names the mount point.
    #[error("{path} is a mount point; paths do not cross it")]
    CrossesMount {
        /// The mount point (a prefix of, or equal to, the requested path).
        path: VPath,
    },
    /// A component that must be a directory is not one.
    #[error("not a directory: {path}")]
    NotADirectory {
        /// The offending component (a prefix of, or equal to, the requested path).
        path: VPath,
    },
    /// The operation needs a regular file and found something else.
    #[error("not a regular file: {path}")]
    NotAFile {
        /// The requested path.
        path: VPath,
    },
    /// `read_link` on something that is not a symbolic link.
    #[error("not a symbolic link: {path}")]
    NotASymlink {
        /// The requested path.
        path: VPath,
    },
    /// The operation refuses to act on a symbolic link (`set_mode`).
    #[error("refusing to act on a symbolic link: {path}")]
    IsASymlink {
        /// The requested path.
        path: VPath,
    },
    /// The object is larger than the caller's limit; nothing was allocated for it.
    #[error("{path} is {size} bytes, over the limit of {max}")]
    TooLarge {
        /// The requested path.
        path: VPath,
        /// The size found (for a symlink target read past the limit, a lower bound).
        size: u64,
        /// The caller's limit.
        max: u64,
    },
    /// The file changed while it was being read or hashed.
    #[error("{path} changed while it was being read")]
    Unstable {
        /// The requested path.
        path: VPath,
    },
    /// Something already exists where the operation would create an entry.
    #[error("already exists: {path}")]
    AlreadyExists {
        /// The requested path (for renames, the destination).
        path: VPath,
    },
    /// A directory to remove or replace is not empty.
    #[error("directory not empty: {path}")]
    DirectoryNotEmpty {
        /// The requested path (for renames, the destination).
        path: VPath,
    },
    /// The path, or one of its ancestors, does not exist.
    #[error("no such file or directory: {path}")]
    NotFound {
        /// The requested path (for renames, the source).
        path: VPath,
    },
    /// The operation cannot act on the root of the handle itself.
    #[error("cannot {op} the root directory")]
    IsRoot {
        /// The operation, e.g. `"rename"`.
        op: &'static str,
    },
    /// Another process held the lock for longer than the caller would wait.
    #[error("gave up waiting for the lock {path} after {waited_ms} ms: another vsh process holds it")]
    LockTimeout {
        /// The lock file.
        path: VPath,
        /// How long the call waited.
        waited_ms: u64,
    },
    /// Any other operating-system error.
    #[error("{op} failed on {path}")]
    Io {
        /// The system call or step that failed, e.g. `"openat2"`, `"renameat"`.
        op: &'static str,
        /// The requested path.
        path: VPath,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl HostError {
    /// The operating-system error number behind this error, if there is one.
    ///
    /// `Io` and `InvalidRoot` give the raw error of their source. Semantic
    /// variants give the number the kernel reports for the same condition:
    /// `NotFound` is `ENOENT`, `AlreadyExists` `EEXIST`, `DirectoryNotEmpty`
    /// `ENOTEMPTY`, `NotADirectory` `ENOTDIR`, `SymlinkInPath` and `IsASymlink`
    /// `ELOOP`, `NotASymlink` `EINVAL` (as `readlink(2)`) and `TooLarge` `EFBIG`.
    /// `NotAFile` (which may be a directory, a symlink or a device), `Unstable`
    /// and `IsRoot` have no single errno and give `None`.
    pub fn errno(&self) -> Option<i32> {
        use rustix::io::Errno;
        let errno = match self {
            Self::InvalidRoot { source, .. } | Self::Io { source, .. } => return source.raw_os_error(),
            Self::NotFound { .. } => Errno::NOENT,
            Self::AlreadyExists { .. } => Errno::EXIST,
            Self::DirectoryNotEmpty { .. } => Errno::NOTEMPTY,
            Self::NotADirectory { .. } => Errno::NOTDIR,
            Self::SymlinkInPath { .. } | Self::IsASymlink { .. } => Errno::LOOP,
            Self::NotASymlink { .. } => Errno::INVAL,
            Self::TooLarge { .. } => Errno::FBIG,
            Self::NotAFile { .. } | Self::Unstable { .. } | Self::IsRoot { .. } => return None,
            Self::LockTimeout { .. } => Errno::WOULDBLOCK,
            Self::CrossesMount { .. } => Errno::XDEV,
        };
        Some(errno.raw_os_error())
    }

    /// Build an `Io` error from a rustix errno.
    pub(crate) fn io(op: &'static str, path: &VPath, errno: rustix::io::Errno) -> Self {
        Self::Io { op, path: path.clone(), source: io::Error::from(errno) }
    }
}
