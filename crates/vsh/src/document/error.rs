//! `vsh.error/1`: why a request failed, and what it is about.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ChangeDocument, DenialDocument};
use crate::{ErrorCategory, VshError};

schema_name!(ErrorSchema, "vsh.error/1");

/// Which kind of failure, by the category of its cause; `request` for a
/// request vsh could not act on (a file that cannot be read, a bad value),
/// `other` for a category this version does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The program or the run around it.
    Execution,
    /// The policy.
    Policy,
    /// vsh's own records.
    Store,
    /// Applying approved work.
    Commit,
    /// The way to a commit.
    Approval,
    /// Opening a runtime.
    Configuration,
    /// The request itself.
    Request,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// The kind of `error`.
    pub fn of(error: &VshError) -> Self {
        match error.category() {
            ErrorCategory::Execution => Self::Execution,
            ErrorCategory::Policy => Self::Policy,
            ErrorCategory::Store => Self::Store,
            ErrorCategory::Commit => Self::Commit,
            ErrorCategory::Approval => Self::Approval,
            ErrorCategory::Configuration => Self::Configuration,
        }
    }
}

/// A failed request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDocument {
    /// `vsh.error/1`.
    pub schema: ErrorSchema,
    /// Which kind of failure.
    pub kind: ErrorKind,
    /// The error with its causes, in one line (`commit failed: ...`).
    pub message: String,
    /// Its causes, outermost first.
    pub causes: Vec<String>,
    /// The exit code of the vsh command line that failed (vsh's own, see its
    /// `--help`), not the program's: a failed Bash program's or real
    /// command's status is `status`. Absent where no vsh process exits (MCP).
    pub exit_code: Option<u8>,
    /// A stale commit's conflicting paths (the first ones, in path order).
    pub paths: Vec<String>,
    /// What changed at each of `paths`, in the same order (`content
    /// changed`, `was nothing, is file`, ...).
    #[serde(default)]
    pub path_changes: Vec<String>,
    /// How many paths conflict in all.
    pub total_conflicts: Option<u64>,
    /// The transactions an ambiguous prefix names (the first ones).
    pub candidates: Vec<String>,
    /// How many it names in all.
    pub total_candidates: Option<u64>,
    /// For a refused revert: the committed work since that changed its
    /// paths, oldest first (the first few; none when an edit made outside
    /// vsh did).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub later_work: Vec<String>,
    /// A failed run's captured stdout (an uncaught exception, a budget that ran out).
    pub stdout: Option<String>,
    /// A failed Bash program's or real command's stderr (invalid UTF-8 replaced).
    pub stderr: Option<String>,
    /// A failed Bash program's or real command's exit status (a receipt's
    /// `exit_code`; `128 +` the signal when one ended it).
    pub status: Option<i32>,
    /// The signal that ended a failed real command (`status` is `128 +` it),
    /// absent when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// What a failed program (a Bash program, a real command, or a Monty
    /// program that raised or ran out of a budget) had changed in its image
    /// before it failed, for diagnosis only: none of it was kept, stored
    /// or committable.
    pub changes: Vec<ChangeDocument>,
    /// The accesses the policy refused a run, each with its rule and remedy
    /// (the first [`vsh_policy::MAX_LISTED_DENIALS`] distinct ones).
    pub denied: Vec<DenialDocument>,
    /// How many distinct refusals there were in all (more than `denied`
    /// lists when the run met more than it shows).
    pub denied_total: Option<u64>,
    /// What to do next: the next command when there is one (`vsh rerun
    /// 0123abcd...`), else the advice the text gives, as sentences (raise a
    /// limit with its option, give a program's directory with `--tool`).
    pub hint: Option<String>,
    /// The next step as one call, where there is one: over MCP the agent's
    /// own tool with the transaction (`vsh_rerun 0123abcd...`, `vsh_wait
    /// ...`), as a receipt's `next` (ux73 M1: only `hint`'s prose said it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// What the operator should know about the failed run, as a receipt's
    /// warnings (its looks at paths the policy hides, which may be why it
    /// failed).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// The first [`vsh_policy::MAX_LISTED_DENIALS`] of a failed run's refusals,
/// each with its remedy, and how many there were in all (a run that ended
/// on its evidence budget may have met a quarter of a million).
fn listed_denials(denied: &[vsh_policy::DeniedAccess], remedies: &[String]) -> (Vec<DenialDocument>, Option<u64>) {
    let listed = denied
        .iter()
        .take(vsh_policy::MAX_LISTED_DENIALS)
        .enumerate()
        .map(|(index, denied)| DenialDocument::of(denied, remedies.get(index).cloned()))
        .collect();
    (listed, Some(denied.len() as u64))
}

/// The causes of `error`, outermost first.
fn causes(error: &dyn std::error::Error) -> Vec<String> {
    let mut causes = Vec::new();
    let mut cause = error.source();
    while let Some(next) = cause {
        causes.push(next.to_string());
        cause = next.source();
    }
    causes
}

impl ErrorDocument {
    /// A failure that is not a [`VshError`], of `kind`.
    pub fn other(kind: ErrorKind, error: &dyn std::error::Error) -> Self {
        let causes = causes(error);
        let mut message = error.to_string();
        for cause in &causes {
            message.push_str(": ");
            message.push_str(cause);
        }
        Self {
            schema: ErrorSchema,
            kind,
            message,
            causes,
            exit_code: None,
            paths: Vec::new(),
            path_changes: Vec::new(),
            total_conflicts: None,
            candidates: Vec::new(),
            total_candidates: None,
            later_work: Vec::new(),
            stdout: None,
            stderr: None,
            status: None,
            signal: None,
            changes: Vec::new(),
            denied: Vec::new(),
            denied_total: None,
            hint: None,
            next: None,
            warnings: Vec::new(),
        }
    }

    /// `error`, with the remedy of each access its run was refused (the
    /// runtime's policy names them: [`crate::Runtime::remedies`]).
    pub fn new(error: &VshError, remedies: &[String]) -> Self {
        let mut document = Self::other(ErrorKind::of(error), error);
        match error {
            stale if let Some((conflicts, total)) = stale.stale_conflicts() => {
                document.paths = conflicts.iter().map(|conflict| conflict.path.to_string()).collect();
                document.path_changes = conflicts.iter().map(|conflict| conflict.reason.to_string()).collect();
                document.total_conflicts = Some(total as u64);
            }
            VshError::AmbiguousTransaction { candidates, total, .. } => {
                document.candidates = candidates.iter().map(vsh_types::TransactionId::to_hex).collect();
                document.total_candidates = Some(*total as u64);
            }
            VshError::PolicyChanged(id) => document.hint = Some(format!("vsh rerun {}", id.short())),
            VshError::RevertChanged { paths, total, later, reverted_by, outside, .. } => {
                document.paths = paths.iter().map(ToString::to_string).collect();
                document.path_changes = vec!["changed since the transaction was committed".to_owned(); paths.len()];
                document.total_conflicts = Some(u64::from(*total));
                document.later_work = later.iter().map(vsh_types::TransactionId::to_hex).collect();
                document.hint = match reverted_by {
                    // Reverted already: that revert is what to look at.
                    Some(revert) => Some(format!("vsh show {}", revert.short())),
                    None if !outside => later.last().map(|newest| format!("vsh revert {}", newest.short())),
                    None => None,
                };
            }
            VshError::RevertWaiting { revert, .. } => document.hint = Some(format!("vsh show {}", revert.short())),
            VshError::Bash { source, changes, .. } => {
                if let vsh_monty::ExecutionError::Bash { exit_code, stdout, stderr, denied, failure, stats } =
                    source.as_ref()
                {
                    if stats.hidden_looks > 0 {
                        let looked = crate::Warning::HiddenLooks {
                            looks: stats.hidden_looks,
                            paths: stats.hidden_paths.clone(),
                        };
                        document.warnings.push(looked.to_string());
                    }
                    document.stdout = Some(String::from_utf8_lossy(stdout).into_owned());
                    document.stderr = Some(String::from_utf8_lossy(stderr).into_owned());
                    document.status = Some(*exit_code);
                    if let vsh_monty::BashFailure::Signal(signal) = failure {
                        document.signal = Some(*signal);
                    }
                    (document.denied, document.denied_total) = listed_denials(denied, remedies);
                }
                document.changes = changes.iter().map(Into::into).collect();
            }
            other => {
                if let Some((denied, stdout)) = other.refused_run() {
                    document.stdout = Some(stdout.to_owned());
                    (document.denied, document.denied_total) = listed_denials(denied, remedies);
                }
                if let VshError::Raised { changes, .. } = other {
                    document.changes = changes.iter().map(Into::into).collect();
                }
                if let VshError::RevertRefused { denied, .. } = other {
                    (document.denied, document.denied_total) =
                        listed_denials(std::slice::from_ref(denied.as_ref()), remedies);
                }
            }
        }
        document
    }

    /// The same document with the command's exit code.
    #[must_use]
    pub fn with_exit_code(mut self, code: u8) -> Self {
        self.exit_code = Some(code);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_runs_refusals_are_listed_up_to_the_bound_and_counted_in_all() {
        let denial = |index: usize| vsh_policy::DeniedAccess {
            path: vsh_types::VPath::parse(&format!(".git/x{index}")).expect("a valid path"),
            access: vsh_policy::AccessKind::Create,
            rule: ".git/**".to_owned(),
            label: vsh_policy::RuleLabel::Git,
            rule_access: vsh_policy::AccessSet::MUTATIONS,
        };
        let many: Vec<_> = (0..1_000).map(denial).collect();
        let remedies: Vec<String> = (0..1_000).map(|index| format!("remedy {index}")).collect();
        let (listed, total) = listed_denials(&many, &remedies);
        assert_eq!(listed.len(), vsh_policy::MAX_LISTED_DENIALS);
        assert_eq!(total, Some(1_000));
        assert_eq!(listed[3], DenialDocument::of(&many[3], Some("remedy 3".to_owned())));
        let (listed, total) = listed_denials(&many[..2], &remedies);
        assert_eq!((listed.len(), total), (2, Some(2)));
    }
}
