//! [`ToolError`]: every way admitting, confining or spawning a child can fail.
//!
//! The variants follow the spawn order: admission (`ExecDenied`, `EnvDenied`), policy checks
//! (`InvalidPolicy`, `AllowedPath`), the floor check (`BelowFloor`), confinement (`Setup`), and
//! the spawn itself (`Spawn`). In every case but `Spawn` the target program never ran.

use std::io;
use std::path::PathBuf;

use crate::report::{Axis, Enforcement};

/// An error from [`crate::ConfinedCommand::spawn`] or [`crate::ToolContext::check_exec`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool context does not grant the program (or the program is a relative path).
    #[error("exec of `{program}` is not granted")]
    ExecDenied {
        /// The program as given to the command.
        program: String,
    },
    /// An environment variable on the loader/interpreter-hijack denylist was granted.
    #[error("environment variable `{name}` is refused: it can change what code the child loads")]
    EnvDenied {
        /// The variable's name, lossily converted to UTF-8.
        name: String,
    },
    /// A restricted axis cannot be enforced as strongly as the policy requires.
    #[error("{axis} enforcement is {available}, below the required {required}: {reason}")]
    BelowFloor {
        /// The first axis (in report order) below its floor.
        axis: Axis,
        /// The policy's floor for the axis.
        required: Enforcement,
        /// What this kernel can enforce for the policy.
        available: Enforcement,
        /// Why the level is what it is.
        reason: String,
    },
    /// The policy or the command is malformed (a relative allowed path, grants on a policy that
    /// does not confine, an empty or malformed environment variable name).
    #[error("invalid sandbox policy: {reason}")]
    InvalidPolicy {
        /// What is wrong.
        reason: String,
    },
    /// A path the policy allows could not be opened to build the Landlock ruleset.
    #[error("cannot open allowed path {}", path.display())]
    AllowedPath {
        /// The path as given to the policy.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Preparing the sandbox in the parent, or applying it in the child before `exec`, failed.
    #[error("sandbox setup failed at {stage}")]
    Setup {
        /// The step that failed, e.g. `landlock ruleset` or `landlock_restrict_self`.
        stage: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The program could not be found or started (`execve` failed, or the program is missing).
    #[error("cannot spawn `{program}`")]
    Spawn {
        /// The program as given to the command.
        program: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
