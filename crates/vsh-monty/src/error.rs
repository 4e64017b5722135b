//! [`ExecutionError`]: why a run produced no value, and [`GuestException`], the
//! bounded text of an uncaught guest exception.

use std::fmt;

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

/// Why [`crate::execute`] returned no value.
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
    /// The guest suspended in a way this executor does not serve (an external
    /// function call or awaiting host futures).
    #[error("unsupported guest suspension: {what}")]
    UnsupportedSuspension {
        /// What the guest asked for.
        what: String,
    },
}

#[cfg(test)]
mod tests {
    use monty_types::ExcType;

    use super::*;

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
