//! How a failed command tells the operator (stderr) or a program (`--json`,
//! on stdout, as `vsh.error/1`) what went wrong and what to do about it.

use std::fmt::Write as _;

use vsh::VshError;
use vsh::document::{ErrorDocument, ErrorKind};
use vsh::lower::vsh_commit::CommitError;

use crate::render;

/// A run that failed after the policy refused accesses (the program may have
/// let the `PermissionError` escape): the error, with the remedy for each
/// refusal, which only the runtime that ran it can name.
#[derive(Debug)]
pub(crate) struct DeniedRun {
    pub(crate) source: VshError,
    pub(crate) remedies: Vec<String>,
}

impl std::fmt::Display for DeniedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for DeniedRun {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.source)
    }
}

/// Attach the remedies of `runtime`'s policy to a run's error, when the run
/// was refused accesses.
pub(crate) fn with_remedies(runtime: &vsh::Runtime, error: VshError) -> Box<dyn std::error::Error> {
    let remedies = runtime.remedies(&error);
    if remedies.is_empty() { Box::new(error) } else { Box::new(DeniedRun { source: error, remedies }) }
}

/// The `VshError` inside a command's error, and the remedies attached to it.
pub(crate) fn unwrap<'e>(error: &'e (dyn std::error::Error + 'static)) -> (Option<&'e VshError>, &'e [String]) {
    match error.downcast_ref::<DeniedRun>() {
        Some(run) => (Some(&run.source), run.remedies.as_slice()),
        None => (error.downcast_ref::<VshError>(), &[]),
    }
}

/// What to print on stderr beyond the error chain: conflicting paths, the
/// candidates of an ambiguous prefix, the command that re-evaluates work made
/// under an old policy, and a refused run's output, refusals and remedies.
pub(crate) fn advice(error: Option<&VshError>, remedies: &[String]) -> String {
    let mut text = String::new();
    match error {
        Some(VshError::Commit(CommitError::Stale { conflicts, total })) => {
            text.push_str(&render::stale_text(conflicts, *total));
        }
        Some(VshError::AmbiguousTransaction { candidates, total, .. }) => {
            text.push_str(&render::candidates_text(candidates, *total));
        }
        Some(VshError::PolicyChanged(id)) => {
            let _ = writeln!(
                text,
                "vsh: the workspace's policy changed since it was made; `vsh rerun {}` runs its program again \
                 under the policy in force now, as a new transaction",
                id.short()
            );
        }
        Some(other) => {
            if let Some((denied, stdout)) = other.refused_run() {
                for line in stdout.lines() {
                    let _ = writeln!(text, "vsh: program output | {line}");
                }
                for (index, denied) in denied.iter().enumerate() {
                    let _ = writeln!(text, "vsh: denied: {denied}");
                    if let Some(remedy) = remedies.get(index) {
                        let _ = writeln!(text, "vsh:   to allow it: {remedy}");
                    }
                }
            }
        }
        None => {}
    }
    text
}

/// The error as a `vsh.error/1` document: its kind, message and causes,
/// and what it is about (conflicting paths, candidates, refusals with their
/// remedies). An error that is not vsh's is about the request (`usage`).
pub(crate) fn document(error: &(dyn std::error::Error + 'static)) -> ErrorDocument {
    match unwrap(error) {
        (Some(vsh_error), remedies) => ErrorDocument::new(vsh_error, remedies),
        (None, _) => ErrorDocument::other(ErrorKind::Usage, error),
    }
}
