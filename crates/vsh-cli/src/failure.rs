//! How a failed command tells the operator (stderr) or a program (`--json`,
//! on stdout, as `vsh.error/1`) what went wrong and what to do about it.

use std::fmt::Write as _;

use serde_json::{Value, json};
use vsh::VshError;
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
    let remedies: Vec<String> = match denied_of(&error) {
        Some((denied, _)) => denied.iter().map(|denied| runtime.policy().calls().remedy(denied)).collect(),
        None => Vec::new(),
    };
    if remedies.is_empty() { Box::new(error) } else { Box::new(DeniedRun { source: error, remedies }) }
}

/// The refused accesses and captured output of a failed run.
fn denied_of(error: &VshError) -> Option<(&[vsh::DeniedAccess], &str)> {
    use vsh::lower::vsh_monty::ExecutionError;
    match error {
        VshError::Execution(execution) => match execution.as_ref() {
            ExecutionError::Exception { denied, stdout, .. } | ExecutionError::Limit { denied, stdout, .. } => {
                Some((denied.as_slice(), stdout.as_str()))
            }
            _ => None,
        },
        _ => None,
    }
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
            if let Some((denied, stdout)) = denied_of(other) {
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

/// The error as `vsh.error/1` JSON: its category, message and causes, and
/// what it is about (conflicting paths, candidates, refusals with remedies).
pub(crate) fn json(error: &(dyn std::error::Error + 'static), code: u8) -> Value {
    let (vsh_error, remedies) = unwrap(error);
    let mut causes = Vec::new();
    let mut cause = error.source();
    while let Some(next) = cause {
        causes.push(next.to_string());
        cause = next.source();
    }
    let category = vsh_error.map_or("usage", |error| match error.category() {
        vsh::ErrorCategory::Execution => "execution",
        vsh::ErrorCategory::Policy => "policy",
        vsh::ErrorCategory::Store => "store",
        vsh::ErrorCategory::Commit => "commit",
        vsh::ErrorCategory::Approval => "approval",
        vsh::ErrorCategory::Configuration => "configuration",
        _ => "other",
    });
    let mut value = json!({
        "schema": "vsh.error/1",
        "kind": category,
        "message": error.to_string(),
        "causes": causes,
        "exit_code": code,
    });
    match vsh_error {
        Some(VshError::Commit(CommitError::Stale { conflicts, total })) => {
            value["paths"] = json!(conflicts.iter().map(|conflict| conflict.path.as_str()).collect::<Vec<_>>());
            value["total_conflicts"] = json!(total);
        }
        Some(VshError::AmbiguousTransaction { candidates, total, .. }) => {
            value["candidates"] = json!(candidates.iter().map(vsh::TransactionId::to_hex).collect::<Vec<_>>());
            value["total_candidates"] = json!(total);
        }
        Some(other) => {
            if let Some((denied, stdout)) = denied_of(other) {
                value["stdout"] = json!(stdout);
                value["denied"] = json!(
                    denied
                        .iter()
                        .enumerate()
                        .map(|(index, denied)| json!({
                            "path": denied.path.as_str(),
                            "access": denied.access.name(),
                            "rule": denied.rule,
                            "label": format!("{:?}", denied.label),
                            "remedy": remedies.get(index),
                        }))
                        .collect::<Vec<_>>()
                );
            }
        }
        None => {}
    }
    value
}
