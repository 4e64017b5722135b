//! The errors of the seed [`crate::Host`] API: [`PathError`] (resolution),
//! [`FsError`] (filesystem operations) and [`ExecError`] (starting a command).
//!
//! A command that runs and then fails, times out or is cancelled is not an
//! error: it is an [`crate::ExecOutput`] with the matching fields set.

use std::io;
use std::path::PathBuf;

use vsh_types::VPathError;

use vsh_host::HostError;

/// Why a path could not be resolved (see [`crate::Host::resolve_in_jail`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The workspace root does not exist, is not a directory or cannot be
    /// canonicalized or opened.
    #[error("invalid workspace root {}", path.display())]
    InvalidRoot {
        /// The root as configured.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Under [`crate::PathPolicy::Jailed`], the path leaves the workspace root
    /// or could only be reached by following a symbolic link.
    #[error("path escapes the workspace root: {} ({reason})", path.display())]
    Escape {
        /// The absolute, lexically normalized path that was refused.
        path: PathBuf,
        /// How it escapes.
        reason: EscapeReason,
    },
    /// Under [`crate::PathPolicy::Jailed`], the path cannot be expressed as a
    /// workspace path (a component is not UTF-8, or holds a NUL byte).
    #[error("unsupported path {}", path.display())]
    Invalid {
        /// The absolute, lexically normalized path.
        path: PathBuf,
        /// Why it is not a valid workspace path.
        #[source]
        source: VPathError,
    },
    /// An existing ancestor of the path could not be examined (for example,
    /// permission denied on a directory).
    #[error("cannot examine {}", path.display())]
    Io {
        /// The absolute, lexically normalized path.
        path: PathBuf,
        /// The underlying error from the capability handle.
        #[source]
        source: HostError,
    },
}

/// How a jailed path escapes the workspace root.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EscapeReason {
    /// After `~` expansion, joining to the working directory and lexical
    /// resolution of `.` and `..`, the path is not under the root.
    #[error("outside the root")]
    OutsideRoot,
    /// The component at `at` (an ancestor, or the path itself) is a symbolic
    /// link. The jail never follows links, so it cannot prove where one leads;
    /// the kernel refuses them (`RESOLVE_NO_SYMLINKS`).
    #[error("symbolic link at {}", at.display())]
    Symlink {
        /// The absolute path of the symbolic link.
        at: PathBuf,
    },
}

/// Why a filesystem operation of [`crate::Host`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path could not be resolved, or escapes the jail. A symlink swapped
    /// into the path after resolution is reported here too: the kernel
    /// refused it when the path was used.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The operation itself failed: missing file or parent directory, wrong
    /// kind, permission, size limit, or any other I/O error.
    #[error("{op} failed on {}", path.display())]
    Io {
        /// The operation, e.g. `"read_file"`.
        op: &'static str,
        /// The absolute path the operation was on.
        path: PathBuf,
        /// The error from the capability handle (see [`HostError::errno`]).
        #[source]
        source: HostError,
    },
}

impl FsError {
    /// The operating-system error number behind an [`FsError::Io`], if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Io { source, .. } => source.errno(),
            Self::Path(_) => None,
        }
    }
}

/// Why a command could not be started by [`crate::Host::exec`] or
/// [`crate::Host::run_capture`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The working directory is refused by the path policy.
    #[error("working directory refused")]
    Cwd(#[source] PathError),
    /// The sandbox refused to start the program: admission denied it, or a
    /// required enforcement floor cannot be met on this kernel. Nothing ran.
    #[error("the sandbox refused to start {}", program.display())]
    Confinement {
        /// The program (the shell, for `exec`).
        program: PathBuf,
        /// The sandbox's reason.
        #[source]
        source: vsh_sandbox::ToolError,
    },
    /// The process could not be spawned (missing program, missing working
    /// directory, resource exhaustion), or its pipes could not be attached.
    #[error("cannot start {}", program.display())]
    Spawn {
        /// The program (the shell, for `exec`).
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
