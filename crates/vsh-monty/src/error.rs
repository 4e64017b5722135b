//! [`ExecutionError`]: why a run produced no value; [`WorkerError`]: how the
//! worker subprocess failed; [`CompatibilityError`]: why a value has no Python
//! projection; and [`GuestException`], the bounded text of an uncaught guest
//! exception.

use std::fmt;
use std::io;
use std::path::PathBuf;

use monty_types::MontyException;
use vsh_policy::DeniedAccess;
use vsh_vfs::VfsError;

use crate::limits::{ExecutionStats, LimitExceeded};

/// Appended to a field of a [`GuestException`] that was cut to fit
/// [`crate::ExecutionLimits::max_exception_bytes`].
pub const TRUNCATION_MARKER: &str = "…[truncated by vsh]";

/// An uncaught guest exception, as text.
///
/// `message` plus `traceback` stay within
/// [`crate::ExecutionLimits::max_exception_bytes`] (unless that limit is shorter
/// than twice [`TRUNCATION_MARKER`]); a field that was cut ends with the marker.
/// When both must be cut, the traceback keeps up to half of the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestException {
    /// The Python type name (`FileNotFoundError`).
    pub type_name: String,
    /// The message (`str(exc)`), empty if there was none.
    pub message: String,
    /// The traceback as Python prints it, without the final `Type: message`
    /// line; empty when the exception has no frames (a `SyntaxError` has one).
    pub traceback: String,
}

impl GuestException {
    /// The text of `exception`, bounded by `max_bytes`.
    pub(crate) fn bounded(exception: &MontyException, max_bytes: u64) -> Self {
        let type_name = exception.exc_type().to_string();
        let message = exception.message().unwrap_or_default();
        let summary = exception.summary();
        let full = exception.to_string();
        let traceback = full.strip_suffix(summary.as_str()).unwrap_or(&full);
        let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        // When both do not fit, the traceback keeps up to half the budget and
        // the message gets the rest; whatever the message leaves unused goes
        // back to the traceback.
        let message_budget =
            if message.len().saturating_add(traceback.len()) <= max { max } else { max - traceback.len().min(max / 2) };
        let message = bound_text(message, message_budget);
        let traceback = bound_text(traceback, max.saturating_sub(message.len()));
        Self { type_name, message, traceback }
    }
}

impl fmt::Display for GuestException {
    /// The traceback followed by `Type: message`, as Python prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceback)?;
        if self.message.is_empty() {
            f.write_str(&self.type_name)
        } else {
            write!(f, "{}: {}", self.type_name, self.message)
        }
    }
}

/// A signal's name (`SIGSEGV`), or `unknown signal` for a number Linux
/// does not name.
fn signal_name(signal: i32) -> &'static str {
    nix::sys::signal::Signal::try_from(signal).map_or("unknown signal", nix::sys::signal::Signal::as_str)
}

/// `text` if it fits in `budget` bytes, otherwise its longest prefix (on a
/// character boundary) that leaves room for the marker, then the marker.
fn bound_text(text: &str, budget: usize) -> String {
    if text.len() <= budget {
        return text.to_owned();
    }
    let mut keep = budget.saturating_sub(TRUNCATION_MARKER.len());
    while !text.is_char_boundary(keep) {
        keep -= 1;
    }
    let mut out = String::with_capacity(keep + TRUNCATION_MARKER.len());
    out.push_str(&text[..keep]);
    out.push_str(TRUNCATION_MARKER);
    out
}

/// Why [`crate::execute`] or [`crate::MontyExecutor::execute`] returned no
/// value.
///
/// Only [`ExecutionError::Exception`] is the guest's own doing in the usual
/// sense; every other variant ended the run from outside the guest, and none
/// of them can be caught by it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutionError {
    /// The guest raised an exception it did not catch (including a
    /// `SyntaxError` at compile time).
    #[error("uncaught guest exception: {exception}")]
    Exception {
        /// The exception.
        exception: GuestException,
        /// Standard output captured before it.
        stdout: String,
        /// What the run used.
        stats: ExecutionStats,
        /// Accesses the policy refused (the guest may have caught them).
        denied: Vec<DeniedAccess>,
    },
    /// A budget ran out. The run was ended; the guest could not catch this.
    #[error("{limit}")]
    Limit {
        /// Which budget, and by how much.
        limit: LimitExceeded,
        /// Standard output captured before it.
        stdout: String,
        /// What the run used.
        stats: ExecutionStats,
        /// Accesses the policy refused before it.
        denied: Vec<DeniedAccess>,
    },
    /// The virtual image failed in a way the guest must not see: host I/O, a
    /// base that changed under the run, or a snapshot limit.
    #[error("virtual filesystem failed")]
    Vfs {
        /// The terminal error.
        source: VfsError,
    },
    /// The guest suspended in a way no executor serves (a method call on a
    /// host object, or awaiting host futures).
    #[error("unsupported guest suspension: {what}")]
    UnsupportedSuspension {
        /// What the guest asked for.
        what: String,
    },
    /// A real command could not start: its program was not found or not
    /// granted, or its candidate or sandbox could not be set up. Nothing of
    /// it ran.
    #[error("the command could not start")]
    Command {
        /// Why.
        #[source]
        source: vsh_sandbox::ToolError,
    },
    /// The worker subprocess failed: it could not be started, crashed, broke
    /// the protocol, or is not the binary the executor was created with. The
    /// worker was discarded; the executor stays usable.
    #[error("monty worker failed")]
    Worker {
        /// How.
        #[source]
        source: WorkerError,
    },
    /// A Bash program failed: a non-zero exit status, an interpreter budget,
    /// a command outside the profile, a parse error or an interpreter
    /// failure. Terminal: its work is not committable.
    #[error("{failure}")]
    Bash {
        /// How.
        failure: BashFailure,
        /// Its exit status.
        exit_code: i32,
        /// Standard output, as written.
        stdout: Vec<u8>,
        /// Standard error, as written.
        stderr: Vec<u8>,
        /// What the run used.
        stats: ExecutionStats,
        /// Accesses the policy refused before it.
        denied: Vec<DeniedAccess>,
    },
    /// The caller's [`crate::Interrupt`] ended the run (a cancellation); the
    /// guest could not catch it.
    #[error("the run was cancelled")]
    Cancelled {
        /// Standard output captured before it.
        stdout: String,
        /// What the run used.
        stats: ExecutionStats,
        /// Accesses the policy refused before it.
        denied: Vec<DeniedAccess>,
    },
    /// The run completed, but its value has no projection under
    /// [`crate::ResultCompatibility::Python`].
    #[error("result is not compatible: {source}")]
    Incompatible {
        /// Why.
        #[source]
        source: CompatibilityError,
        /// Standard output of the run.
        stdout: String,
        /// What the run used.
        stats: ExecutionStats,
        /// Accesses the policy refused.
        denied: Vec<DeniedAccess>,
    },
}

/// How a Bash program failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BashFailure {
    /// It exited with a non-zero status.
    #[error("exit status {0}")]
    Exit(i32),
    /// A signal ended it (its exit status is `128 +` the signal).
    #[error("killed by signal {0} ({name})", name = signal_name(*.0))]
    Signal(i32),
    /// An interpreter budget ran out (commands, loop iterations, parser
    /// operations, work units, input, intermediate bytes, depth, time).
    #[error("limit exceeded: {0}")]
    Limit(String),
    /// It ran a command outside the profile.
    #[error("{0}: command not available in the {profile} profile", profile = vsh_bash::PROFILE)]
    Unsupported(String),
    /// It does not parse.
    #[error("{0}")]
    Parse(String),
    /// The interpreter failed.
    #[error("interpreter failed: {0}")]
    Interpreter(String),
}

/// How the worker subprocess, or its configuration, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The [`crate::WorkerConfig`] is unusable.
    #[error("invalid worker configuration: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
    /// The worker binary could not be read to pin or verify it.
    #[error("cannot read the worker binary {}", path.display())]
    Binary {
        /// The binary.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The worker binary is not the one the executor pinned at creation.
    #[error("worker binary {} changed: BLAKE3 {found}, pinned {expected}", path.display())]
    BinaryChanged {
        /// The binary.
        path: PathBuf,
        /// The pinned BLAKE3 (hex).
        expected: String,
        /// The BLAKE3 found now (hex).
        found: String,
    },
    /// The sandbox refused to start the worker, or the spawn failed.
    #[error("cannot start the worker")]
    Spawn {
        /// Why.
        #[source]
        source: vsh_sandbox::ToolError,
    },
    /// The worker's greeting was missing, late or malformed.
    #[error("worker handshake failed: {reason}")]
    Handshake {
        /// What went wrong.
        reason: String,
    },
    /// The worker is a different build than this library.
    #[error(
        "the worker program is another build of vsh than this one (a VSH_WORKER, --worker or worker path naming \
         an older or newer binary?): use the worker built with it (for the Python package, unset VSH_WORKER to \
         use the one it bundles); worker {found}, expected {expected}"
    )]
    Identity {
        /// This library's build identity.
        expected: String,
        /// What the worker announced.
        found: String,
    },
    /// The worker exited or was killed in the middle of a request.
    #[error("worker crashed (exit code {code:?}, signal {signal:?})")]
    Crashed {
        /// Its exit code, if it exited.
        code: Option<i32>,
        /// The signal that killed it, if one did.
        signal: Option<i32>,
    },
    /// The worker sent something the protocol does not allow at that point.
    #[error("worker broke the protocol: {reason}")]
    Protocol {
        /// What it did.
        reason: String,
    },
    /// The worker announced a frame larger than its kind may be; nothing was
    /// allocated for it.
    #[error("worker frame of kind {kind} is {len} bytes, more than the {max} allowed")]
    FrameTooLarge {
        /// The frame's kind byte.
        kind: u8,
        /// Its announced length.
        len: u64,
        /// The most that kind may carry for this request.
        max: u64,
    },
    /// A value from the worker is nested deeper than the parent rebuilds.
    #[error("worker value nested deeper than {max} levels")]
    ValueTooDeep {
        /// The deepest nesting accepted.
        max: usize,
    },
    /// Talking to the worker failed.
    #[error("worker transport failed")]
    Transport {
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Why a value has no projection under [`crate::ResultCompatibility::Python`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompatibilityError {
    /// Containers are nested deeper than [`crate::PYTHON_MAX_DEPTH`].
    #[error("value nested deeper than {max} levels")]
    Depth {
        /// The deepest nesting accepted.
        max: usize,
    },
    /// A type object with no Python counterpart.
    #[error("type object `{type_name}` has no Python projection")]
    TypeObject {
        /// The type's name.
        type_name: String,
    },
}

#[cfg(test)]
mod tests {
    use monty_types::ExcType;

    use super::*;

    /// A worker of another build says what to do, naming the variable that
    /// usually put it there.
    #[test]
    fn a_worker_of_another_build_says_which_to_use() {
        let text = WorkerError::Identity { expected: "vsh 0.1.0 build a".into(), found: "vsh 0.1.0 build b".into() }
            .to_string();
        assert!(text.starts_with("the worker program is another build of vsh"), "{text}");
        assert!(
            text.contains("unset VSH_WORKER") && text.ends_with("worker vsh 0.1.0 build b, expected vsh 0.1.0 build a")
        );
    }

    #[test]
    fn text_is_cut_on_a_character_boundary_with_the_marker() {
        assert_eq!(bound_text("short", 10), "short");
        let long = "é".repeat(40);
        let cut = bound_text(&long, 30);
        assert!(cut.len() <= 30, "{}", cut.len());
        assert!(cut.ends_with(TRUNCATION_MARKER));
        assert!(cut.starts_with('é'));
        assert_eq!(bound_text("abcdef", 2), TRUNCATION_MARKER);
    }

    #[test]
    fn message_and_traceback_share_the_budget() {
        let exception = MontyException::new(ExcType::ValueError, Some("x".repeat(100)));
        let bounded = GuestException::bounded(&exception, 64);
        assert_eq!(bounded.type_name, "ValueError");
        assert_eq!(bounded.message.len(), 64);
        assert!(bounded.message.ends_with(TRUNCATION_MARKER));
        assert_eq!(bounded.traceback, "");
        let whole = GuestException::bounded(&exception, 1000);
        assert_eq!(whole.message, "x".repeat(100));
        assert_eq!(whole.to_string(), format!("ValueError: {}", "x".repeat(100)));
    }
}
