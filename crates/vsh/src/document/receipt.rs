//! `vsh.receipt/1`: a receipt as JSON.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vsh_monty::MontyObject;
use vsh_policy::{Decision, Denial, RiskMetrics};
use vsh_types::{DiffEntry, NodeState};
use vsh_vfs::{FileReview, NoHunks};

use crate::Receipt;

schema_name!(ReceiptSchema, "vsh.receipt/1");

/// A run's or commit's receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReceiptDocument {
    /// `vsh.receipt/1`.
    pub schema: ReceiptSchema,
    /// The transaction id, 64 hex digits.
    pub transaction: String,
    /// The observed snapshot the run depended on, 64 hex digits, or
    /// `withheld` when the run read, by digest, what the reader's policy
    /// protects from reading (work made under a per-run policy).
    pub base_snapshot: String,
    /// The transaction's state when the receipt was made (`auto-approved`,
    /// `pending-approval`, `denied`, `committed`, ...).
    pub state: String,
    /// The policy decision, with its evidence.
    pub decision: DecisionDocument,
    /// The canonical diff's digest, 64 hex digits; `withheld` when the diff
    /// names the before content of a path the policy protects from reading
    /// (the digest would confirm a guess at those bytes).
    pub diff: String,
    /// How many paths the diff changes.
    pub changed_paths: u64,
    /// The changed paths (with full detail, or in a review).
    pub changes: Vec<ChangeDocument>,
    /// Each changed text file's unified hunks, or why it has none.
    pub review: Vec<ReviewDocument>,
    /// The program's language: `monty`, `bash`, `command` or `session`.
    pub language: String,
    /// A Bash program's or a command's profile (`vsh-bash-bounded-v1`, ...).
    pub profile: Option<String>,
    /// A Bash program's or a command's exit status.
    pub exit_code: Option<i32>,
    /// A candidate workspace's steps, in order (only for `session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepDocument>>,
    /// The program's captured stdout, as text (invalid UTF-8 replaced).
    pub stdout: String,
    /// The stdout bytes in base64, only when they are not valid UTF-8.
    pub stdout_base64: Option<String>,
    /// A Bash program's stderr, as text (invalid UTF-8 replaced; empty for Monty).
    pub stderr: String,
    /// The stderr bytes in base64, only when they are not valid UTF-8.
    pub stderr_base64: Option<String>,
    /// The program's final value: JSON scalars, lists and string-keyed
    /// objects as themselves, anything else as `{"$repr": "..."}`.
    pub value: serde_json::Value,
    /// The exception a Monty program raised after the policy refused it an
    /// access (its work is denied), as Python prints it; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    /// Execution statistics.
    pub execution: ExecutionDocument,
    /// Nanoseconds per stage.
    pub timings_ns: TimingsDocument,
    /// What the commit applied, when it was committed.
    pub commit: Option<CommitDocument>,
    /// What the run's real commands were granted, for a run that could run
    /// any: the variables set beyond what every command gets (names, never
    /// values), the tools, the network (`none` when not granted), ports and
    /// unix sockets.
    pub grants: Option<crate::CommandGrants>,
    /// What the operator should know about a run that still succeeded.
    pub warnings: Vec<String>,
    /// The command that takes the work on (`vsh approve TX && vsh commit
    /// TX`, `vsh commit TX`, `vsh rerun TX`), as the text receipt's `next`
    /// line gives it; from `vsh serve`, the agent's tool call
    /// (`vsh_commit TX`) or the operator's command it waits for (`vsh
    /// approve TX`); `null` when there is nothing to do or the document was
    /// made by neither.
    #[serde(default)]
    pub next: Option<String>,
}

/// One step of a candidate workspace's session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepDocument {
    /// `monty`, `bash`, `command`, `restore-exported`, `restore-seeded` or `host-write`.
    pub kind: String,
    /// The program's text (a command's argv, or the paths a restore wrote, as a JSON array).
    pub program: String,
    /// The profile it ran under, if any.
    pub profile: Option<String>,
    /// Its exit status.
    pub exit_code: i32,
    /// Whether its changes are in the candidate (a failed step is undone
    /// unless its failure was accepted).
    pub kept: bool,
    /// Whether its commands were allowed to run below the sandbox's floors
    /// (unconfined where the kernel cannot confine them).
    pub unisolated: bool,
    /// A Monty program's value, as for the receipt's `value`.
    pub value: serde_json::Value,
    /// Its stdout, as text (invalid UTF-8 replaced).
    pub stdout: String,
    /// Its stderr, as text (invalid UTF-8 replaced).
    pub stderr: String,
}

impl From<&crate::SessionStep> for StepDocument {
    fn from(step: &crate::SessionStep) -> Self {
        Self {
            kind: step.kind.name().to_owned(),
            program: step.program.clone(),
            profile: (!step.profile.is_empty()).then(|| step.profile.clone()),
            exit_code: step.exit_code,
            kept: step.kept,
            unisolated: step.unisolated,
            value: step.value.as_ref().map_or(serde_json::Value::Null, value_json),
            stdout: String::from_utf8_lossy(&step.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&step.stderr).into_owned(),
        }
    }
}

/// The policy's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DecisionDocument {
    /// Refused; final.
    Denied {
        /// The first rule of the decision order that failed (`protected-access-attempt`, ...).
        reason: String,
        /// The first refused accesses or mutations, each with its rule and remedy.
        denied: Vec<DenialDocument>,
        /// How many there were in all.
        denied_total: u64,
        /// For the ceiling reasons, the threshold passed and the setting that would allow the diff.
        ceiling: Option<CeilingDocument>,
        /// How the policy would have to change, in one line.
        remedy: String,
        /// Measurements of the diff.
        metrics: MetricsDocument,
    },
    /// Small and non-destructive: may be committed without a reviewer.
    AutoApproved,
    /// Needs a reviewer's approval.
    PendingApproval {
        /// Why (`mutation`, `deletion`, `large-touched-set`, ...).
        flags: Vec<String>,
        /// Measurements of the diff.
        metrics: MetricsDocument,
    },
}

/// One refused access or mutation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DenialDocument {
    /// The path that was refused.
    pub path: String,
    /// The access (`content-read`, `modify`, ...).
    pub access: String,
    /// The refusing rule's pattern (for writable roots, the allow-list).
    pub rule: String,
    /// Why that rule exists (`secret`, `vcs`, `custom`, ...).
    pub label: String,
    /// How the policy would have to change to allow it, when known.
    pub remedy: Option<String>,
}

impl DenialDocument {
    /// A refused access, explained by `remedy` when one is known.
    pub fn of(denied: &vsh_policy::DeniedAccess, remedy: Option<String>) -> Self {
        Self {
            path: denied.path.to_string(),
            access: denied.access.name().to_owned(),
            rule: denied.rule.clone(),
            label: denied.label.name().to_owned(),
            remedy,
        }
    }

    fn from_denial(denial: &Denial) -> Self {
        Self::of(&denial.denied_access(), Some(denial.remedy.clone()))
    }
}

/// A ceiling a denied diff went through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CeilingDocument {
    /// The threshold as a policy file names it (`thresholds.deny_touched_paths`).
    pub threshold: String,
    /// Its value in the policy that decided.
    pub limit: u64,
    /// What the diff measured.
    pub value: u64,
    /// The least setting that would have allowed the diff on this ceiling.
    pub allowing: u64,
}

/// Measurements of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetricsDocument {
    /// Changed paths (a deleted subtree counting every path in it).
    pub touched: u64,
    /// Created paths.
    pub created: u64,
    /// Paths whose content or kind changed.
    pub modified: u64,
    /// Deleted paths.
    pub deleted: u64,
    /// Renames the program performed.
    pub renamed: u64,
    /// Sum of before and after sizes of the changed entries.
    pub changed_bytes: u64,
    /// Deleted paths per 10,000 observed base nodes.
    pub delete_ratio_bps: u32,
    /// Files whose execute bits changed or were created executable.
    pub executable_changes: u64,
    /// Entries with a symlink before or after.
    pub symlink_changes: u64,
    /// Entries whose only change is the permission bits.
    pub mode_changes: u64,
    /// Existing files emptied, or that lost more than the rewrite ratio of
    /// the content a reviewer last saw.
    pub rewritten: u64,
}

impl From<&RiskMetrics> for MetricsDocument {
    fn from(m: &RiskMetrics) -> Self {
        Self {
            touched: m.touched,
            created: m.created,
            modified: m.modified,
            deleted: m.deleted,
            renamed: m.renamed,
            changed_bytes: m.changed_bytes,
            delete_ratio_bps: m.delete_ratio_bps,
            executable_changes: m.executable_changes,
            symlink_changes: m.symlink_changes,
            mode_changes: m.mode_changes,
            rewritten: m.rewritten,
        }
    }
}

impl From<&Decision> for DecisionDocument {
    fn from(decision: &Decision) -> Self {
        match decision {
            Decision::Denied(manifest) => Self::Denied {
                reason: manifest.reason.name().to_owned(),
                denied: manifest.denied.iter().map(DenialDocument::from_denial).collect(),
                denied_total: manifest.denied_total,
                ceiling: manifest.ceiling.as_ref().map(|ceiling| CeilingDocument {
                    threshold: ceiling.threshold.clone(),
                    limit: ceiling.limit,
                    value: ceiling.value,
                    allowing: ceiling.allowing,
                }),
                remedy: manifest.remedy.clone(),
                metrics: (&manifest.metrics).into(),
            },
            Decision::AutoApproved => Self::AutoApproved,
            Decision::PendingApproval(manifest) => Self::PendingApproval {
                flags: manifest.flags.iter().map(|flag| flag.name().to_owned()).collect(),
                metrics: (&manifest.metrics).into(),
            },
        }
    }
}

/// A node's state before or after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeDocument {
    /// `file`, `dir` or `symlink`.
    pub kind: String,
    /// Bytes (a file's length, a symlink target's length, 0 for a directory).
    pub size: u64,
    /// Permission bits, in octal (`"644"`).
    pub mode: String,
    /// The content's digest, 64 hex digits (files and symlinks); none for a
    /// file deleted without being read, which has a `stamp` instead, and
    /// none for the before state of a path the policy protects from
    /// reading (a digest would confirm a guess at its bytes).
    pub content: Option<String>,
    /// For a file deleted without being read: the version deleted, by
    /// identity and times (the commit checks it instead of the bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp: Option<StampDocument>,
}

/// Which version of a file was deleted unread: what `lstat` reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StampDocument {
    /// The device (`st_dev`).
    pub dev: u64,
    /// The inode (`st_ino`).
    pub ino: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Status-change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
}

impl From<&NodeState> for NodeDocument {
    fn from(state: &NodeState) -> Self {
        Self {
            kind: state.kind.name().to_owned(),
            size: state.size,
            mode: format!("{:o}", state.mode),
            content: state.content.map(|id| id.to_hex()),
            stamp: state.stamp.map(|stamp| StampDocument {
                dev: stamp.dev,
                ino: stamp.ino,
                mtime_ns: stamp.mtime_ns,
                ctime_ns: stamp.ctime_ns,
            }),
        }
    }
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeDocument {
    /// The path, relative to the workspace root.
    pub path: String,
    /// `create`, `modify`, `delete`, ...
    pub kind: String,
    /// Its state before (none if created).
    pub before: Option<NodeDocument>,
    /// Its state after (none if deleted).
    pub after: Option<NodeDocument>,
}

impl From<&DiffEntry> for ChangeDocument {
    fn from(entry: &DiffEntry) -> Self {
        Self {
            path: entry.path.to_string(),
            kind: entry.kind.name().to_owned(),
            before: entry.before.as_ref().map(Into::into),
            after: entry.after.as_ref().map(Into::into),
        }
    }
}

/// One changed path's review text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewDocument {
    /// The path.
    pub path: String,
    /// Unified hunks (`--- a/...`, `+++ b/...`), when there are any.
    pub hunks: Option<String>,
    /// Why there are none: `not-file-content`, `binary`, `too-large`,
    /// `budget-spent`, `unavailable`, `protected`, `renamed` (deleted as the source of
    /// a rename: the review of the path it moved to shows the change).
    pub no_hunks: Option<String>,
}

/// The name of a reason for no hunks.
pub(crate) fn no_hunks_name(reason: NoHunks) -> &'static str {
    match reason {
        NoHunks::NotFileContent => "not-file-content",
        NoHunks::Binary => "binary",
        NoHunks::TooLarge => "too-large",
        NoHunks::BudgetSpent => "budget-spent",
        NoHunks::Unavailable => "unavailable",
        NoHunks::Protected => "protected",
        NoHunks::Renamed => "renamed",
    }
}

impl From<&FileReview> for ReviewDocument {
    fn from(review: &FileReview) -> Self {
        let (hunks, no_hunks) = match &review.hunks {
            Ok(text) => (Some(text.clone()), None),
            Err(reason) => (None, Some(no_hunks_name(*reason).to_owned())),
        };
        Self { path: review.path.to_string(), hunks, no_hunks }
    }
}

/// Execution statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExecutionDocument {
    /// Filesystem operations the program made.
    pub os_calls: u64,
    /// File bytes it read.
    pub read_bytes: u64,
    /// File bytes it wrote.
    pub write_bytes: u64,
    /// Directory entries it listed.
    pub directory_entries: u64,
    /// Output bytes it printed.
    pub output_bytes: u64,
    /// Accesses the policy refused, each retry counted (`denied` names each
    /// distinct refusal once).
    pub denied_accesses: u64,
    /// Looks at paths hidden from the program (the policy hides them, or a
    /// symlink there leads out of the workspace: `exists()`, `stat`, a command's
    /// lookup of a name), answered as unreadable and not denials; 0 in a
    /// receipt rebuilt from a stored transaction, whose evidence does not
    /// keep them.
    #[serde(default)]
    pub hidden_looks: u64,
    /// Result lists cut at their bound.
    pub truncated_results: u64,
    /// Guest running time, nanoseconds.
    pub duration_ns: u64,
}

/// Nanoseconds per stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TimingsDocument {
    /// Opening the virtual image.
    pub snapshot: u64,
    /// Waiting for another run's commands to leave the scratch directories.
    #[serde(default)]
    pub wait: u64,
    /// Running the program.
    pub execute: u64,
    /// Computing the canonical diff.
    pub diff: u64,
    /// Evaluating the policy.
    pub policy: u64,
    /// Binding and storing the transaction.
    pub bind_and_store: u64,
    /// The commit.
    pub commit: u64,
    /// End to end.
    pub total: u64,
}

/// What a commit applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommitDocument {
    /// Operations applied.
    pub operations: u64,
    /// Changed paths verified on disk afterwards.
    pub verified_paths: u64,
    /// Dependencies revalidated under the writer lock.
    pub revalidated_dependencies: u64,
    /// Files `fsync`ed.
    pub file_fsyncs: u64,
    /// Directories `fsync`ed.
    pub dir_fsyncs: u64,
    /// Old nodes someone wrote to during the commit, kept aside.
    pub kept: Vec<KeptDocument>,
}

/// An old node kept aside instead of deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KeptDocument {
    /// The path it had.
    pub path: String,
    /// Where it is kept.
    pub kept: String,
}

/// A Monty value as JSON: scalars, lists, tuples and string-keyed dicts map
/// directly; anything else (and a float JSON cannot hold) is
/// `{"$repr": "..."}` with its Python representation.
pub fn value_json(value: &MontyObject) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    match value {
        MontyObject::None => Value::Null,
        MontyObject::Bool(flag) => Value::Bool(*flag),
        MontyObject::Int(number) => json!(number),
        MontyObject::Float(number) => {
            serde_json::Number::from_f64(*number).map_or_else(|| json!({"$repr": value.py_repr()}), Value::Number)
        }
        MontyObject::String(text) | MontyObject::Path(text) => Value::String(text.clone()),
        MontyObject::List(items) | MontyObject::Tuple(items) => Value::Array(items.iter().map(value_json).collect()),
        MontyObject::Dict(pairs) => {
            let mut object = Map::new();
            for (key, item) in pairs {
                match key {
                    MontyObject::String(key) => {
                        object.insert(key.clone(), value_json(item));
                    }
                    _ => return json!({"$repr": value.py_repr()}),
                }
            }
            Value::Object(object)
        }
        _ => json!({"$repr": value.py_repr()}),
    }
}

/// `bytes` in base64 when they are not valid UTF-8 (their text form then
/// loses bytes).
fn base64_unless_text(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).is_err().then(|| base64::engine::general_purpose::STANDARD.encode(bytes))
}

impl From<&Receipt> for ReceiptDocument {
    fn from(receipt: &Receipt) -> Self {
        let stdout = receipt.output.stdout_bytes();
        let stats = &receipt.execution;
        let t = &receipt.timings;
        Self {
            schema: ReceiptSchema,
            transaction: receipt.transaction.to_hex(),
            base_snapshot: if receipt.snapshot_withheld {
                "withheld".to_owned()
            } else {
                receipt.base_snapshot.to_hex()
            },
            state: receipt.state.name().to_owned(),
            decision: (&receipt.decision).into(),
            diff: if receipt.diff_withheld { "withheld".to_owned() } else { receipt.diff.to_hex() },
            changed_paths: receipt.changed_paths as u64,
            changes: receipt.changes.iter().map(Into::into).collect(),
            review: receipt.review.iter().map(Into::into).collect(),
            language: receipt.output.language().name().to_owned(),
            profile: match &receipt.output {
                crate::ExecutionOutput::Bash(result) => Some(result.profile.clone()),
                crate::ExecutionOutput::Session { .. } => Some(crate::candidate::SESSION_PROFILE.to_owned()),
                _ => None,
            },
            exit_code: match &receipt.output {
                // Withheld from this reader with the rest of the output.
                _ if receipt.output_withheld() => None,
                crate::ExecutionOutput::Bash(result) => Some(result.exit_code),
                _ => None,
            },
            steps: match &receipt.output {
                crate::ExecutionOutput::Session { steps } => Some(steps.iter().map(Into::into).collect()),
                _ => None,
            },
            stdout: String::from_utf8_lossy(stdout).into_owned(),
            stdout_base64: base64_unless_text(stdout),
            stderr: String::from_utf8_lossy(receipt.output.stderr_bytes()).into_owned(),
            stderr_base64: base64_unless_text(receipt.output.stderr_bytes()),
            value: receipt.output.monty_value().map_or(serde_json::Value::Null, value_json),
            exception: receipt.output.exception().map(str::to_owned),
            execution: ExecutionDocument {
                os_calls: stats.os_calls,
                read_bytes: stats.read_bytes,
                write_bytes: stats.write_bytes,
                directory_entries: stats.directory_entries,
                output_bytes: stats.output_bytes,
                denied_accesses: stats.denied_accesses,
                hidden_looks: stats.hidden_looks,
                truncated_results: stats.truncated_results,
                duration_ns: stats.duration_ns,
            },
            timings_ns: TimingsDocument {
                snapshot: t.snapshot,
                wait: t.wait,
                execute: t.execute,
                diff: t.diff,
                policy: t.policy,
                bind_and_store: t.bind_and_store,
                commit: t.commit,
                total: t.total,
            },
            commit: receipt.commit.as_ref().map(|commit| CommitDocument {
                operations: commit.operations,
                verified_paths: commit.verified_paths,
                revalidated_dependencies: commit.revalidated_dependencies,
                file_fsyncs: commit.syncs.file_fsyncs,
                dir_fsyncs: commit.syncs.dir_fsyncs,
                kept: commit
                    .kept
                    .iter()
                    .map(|kept| KeptDocument { path: kept.path.to_string(), kept: kept.kept.to_string() })
                    .collect(),
            }),
            grants: receipt.grants.clone(),
            warnings: receipt
                .warnings
                .iter()
                .map(ToString::to_string)
                // A cut at --max-output, said where the document is read
                // (ux59 3: an agent was told only of its own reader's cut).
                .chain(
                    (vsh_monty::capture_was_cut(stdout) || vsh_monty::capture_was_cut(receipt.output.stderr_bytes()))
                        .then(|| {
                            "the program printed more than --max-output allows: the middle of its output was left \
                             out (marked in it where it was), and the sizes here are of what was kept"
                                .to_owned()
                        }),
                )
                .collect(),
            next: None,
        }
    }
}
