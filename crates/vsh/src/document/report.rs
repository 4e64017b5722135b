//! Housekeeping reports as JSON: garbage collection (`vsh.gc/1`), recovery
//! (`vsh.recovery/1`) and an operator's restore (`vsh.restore/1`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vsh_types::TransactionId;

use super::KeptDocument;
use crate::{GcReport, RecoveryReport, RestoreReport};

schema_name!(GcSchema, "vsh.gc/1");
schema_name!(RecoverySchema, "vsh.recovery/1");
schema_name!(RestoreSchema, "vsh.restore/1");

fn hex(ids: &[TransactionId]) -> Vec<String> {
    ids.iter().map(TransactionId::to_hex).collect()
}

/// What garbage collection did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GcDocument {
    /// `vsh.gc/1`.
    pub schema: GcSchema,
    /// Transactions whose approval or preview lapsed, now `expired`.
    pub expired: Vec<String>,
    /// Old finished transactions dropped from the log.
    pub forgotten: Vec<String>,
    /// Whether the log was compacted.
    pub compacted: bool,
    /// Blobs looked at.
    pub blobs_examined: u64,
    /// Blobs nothing needed any more, deleted.
    pub blobs_removed: u64,
    /// Of the blobs looked at, those work on record needs (waiting work,
    /// what a revert of committed work restores, what vsh saw of files).
    #[serde(default)]
    pub blobs_in_use: u64,
    /// Of the blobs looked at, those no longer needed but kept for the
    /// grace period.
    #[serde(default)]
    pub blobs_in_grace: u64,
    /// When the first of those is past the grace (milliseconds since the
    /// Unix epoch); null when there is none.
    #[serde(default)]
    pub next_due_ms: Option<u64>,
    /// Temporary files left by interrupted writes, deleted.
    pub temporaries_removed: u64,
    /// Bytes in real commands' scratch directories, before clearing.
    pub scratch_bytes: u64,
    /// Scratch directories cleared, by their names in the policy (`node_modules/.cache`).
    pub scratch_cleared: Vec<String>,
    /// Bytes removed from them.
    pub scratch_bytes_removed: u64,
    /// A run was using the scratch directories: nothing was cleared.
    pub scratch_busy: bool,
}

impl From<&GcReport> for GcDocument {
    fn from(report: &GcReport) -> Self {
        Self {
            schema: GcSchema,
            expired: hex(&report.expired),
            forgotten: hex(&report.forgotten),
            compacted: report.compacted,
            blobs_examined: report.blobs_examined as u64,
            blobs_removed: report.blobs_removed as u64,
            blobs_in_use: report.blobs_in_use as u64,
            blobs_in_grace: report.blobs_in_grace as u64,
            next_due_ms: report.next_due_ms,
            temporaries_removed: report.temporaries_removed as u64,
            scratch_bytes: report.scratch.bytes,
            scratch_cleared: report.scratch.cleared.clone(),
            scratch_bytes_removed: report.scratch.bytes_removed,
            scratch_busy: report.scratch.busy,
        }
    }
}

/// What recovery of interrupted commits did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecoveryDocument {
    /// `vsh.recovery/1`.
    pub schema: RecoverySchema,
    /// Commits found complete and finished: committed.
    pub rolled_forward: Vec<String>,
    /// Commits undone to their before state: failed.
    pub rolled_back: Vec<String>,
    /// Finished commits whose leftovers were removed.
    pub cleaned: Vec<String>,
    /// How many paths each rolled-forward or rolled-back transaction changes.
    pub paths: Vec<PathCountDocument>,
    /// Paths of rolled-forward commits someone changed after the commit point (theirs, left alone).
    pub changed_since_commit: Vec<TransactionPathDocument>,
    /// Old nodes someone wrote to during a commit, kept aside.
    pub kept: Vec<TransactionKeptDocument>,
    /// Rollbacks settled as far as they safely could: what is left needs an operator.
    pub unresolved: Vec<UnresolvedDocument>,
    /// Commits whose record lost how they ended (a salvaged log), settled
    /// as committed: the workspace holds every change each made.
    #[serde(default)]
    pub settled_committed: Vec<String>,
    /// Such commits settled as failed: the workspace holds none of their changes.
    #[serde(default)]
    pub settled_failed: Vec<String>,
    /// Of `rolled_back`, the commits killed before they applied anything,
    /// whose work is approved (or auto-approved) again, to commit again.
    #[serde(default)]
    pub released: Vec<String>,
    /// What could not be decided; each blocks commits until resolved.
    pub conflicts: Vec<ConflictDocument>,
    /// What `vsh recover --salvage-log` did first, when it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salvage: Option<SalvageDocument>,
}

/// What a salvage of a damaged transaction log kept and lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SalvageDocument {
    /// Where the damage starts (byte offset), or none when the log was whole.
    pub damaged_at: Option<u64>,
    /// Records kept from the frames before the damage.
    pub kept: u64,
    /// The kept records whose state was changed (work that could still have
    /// been committed, voided; a commit under way, recovery-required).
    pub voided: Vec<String>,
    /// Bytes of the log from the damage on, lost.
    pub lost_bytes: u64,
    /// Where every byte of the damaged log is kept, relative to the data directory.
    pub kept_as: Option<String>,
}

impl From<&vsh_store::Salvaged> for SalvageDocument {
    fn from(salvaged: &vsh_store::Salvaged) -> Self {
        Self {
            damaged_at: salvaged.damaged_at,
            kept: salvaged.kept,
            voided: salvaged.voided.iter().map(vsh_types::TransactionId::to_hex).collect(),
            lost_bytes: salvaged.lost_bytes,
            kept_as: salvaged.kept_as.clone(),
        }
    }
}

/// A transaction and how many paths it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PathCountDocument {
    /// The transaction id.
    pub transaction: String,
    /// Its diff's paths.
    pub paths: u64,
}

/// A transaction's path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TransactionPathDocument {
    /// The transaction id.
    pub transaction: String,
    /// The path.
    pub path: String,
}

/// A transaction's old node, kept aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TransactionKeptDocument {
    /// The transaction id.
    pub transaction: String,
    /// The path and where its old node is kept.
    #[serde(flatten)]
    pub kept: KeptDocument,
}

/// A rollback that left paths for an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UnresolvedDocument {
    /// The transaction id.
    pub transaction: String,
    /// Its commit directory, relative to the workspace.
    pub directory: Option<String>,
    /// Its state in the store.
    pub state: Option<String>,
    /// What was left, and why.
    pub paths: Vec<LeftPathDocument>,
}

/// One operation a rollback left as it found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeftPathDocument {
    /// The workspace path.
    pub path: String,
    /// The operation's index in the plan.
    pub operation: u32,
    /// Its action (`install`, `quarantine`, ...).
    pub action: String,
    /// Why it was left.
    pub reason: String,
    /// Where the old node is kept, if it is.
    pub kept: Option<String>,
}

/// Something recovery could not decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConflictDocument {
    /// The transaction, when known.
    pub transaction: Option<String>,
    /// The path concerned.
    pub path: String,
    /// Why, with its causes.
    pub reason: String,
}

/// An error and its sources, joined.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl From<&RecoveryReport> for RecoveryDocument {
    fn from(report: &RecoveryReport) -> Self {
        Self {
            schema: RecoverySchema,
            rolled_forward: hex(&report.rolled_forward),
            rolled_back: hex(&report.rolled_back),
            cleaned: hex(&report.cleaned),
            settled_committed: hex(&report.settled_committed),
            settled_failed: hex(&report.settled_failed),
            released: hex(&report.released),
            paths: report
                .paths
                .iter()
                .map(|(transaction, paths)| PathCountDocument {
                    transaction: transaction.to_hex(),
                    paths: *paths as u64,
                })
                .collect(),
            changed_since_commit: report
                .changed_since_commit
                .iter()
                .map(|(transaction, path)| TransactionPathDocument {
                    transaction: transaction.to_hex(),
                    path: path.to_string(),
                })
                .collect(),
            kept: report
                .kept
                .iter()
                .map(|kept| TransactionKeptDocument {
                    transaction: kept.transaction.to_hex(),
                    kept: KeptDocument { path: kept.path.to_string(), kept: kept.kept.to_string() },
                })
                .collect(),
            unresolved: report
                .unresolved
                .iter()
                .map(|unresolved| UnresolvedDocument {
                    transaction: unresolved.transaction.to_hex(),
                    directory: unresolved.directory.as_ref().map(ToString::to_string),
                    state: unresolved.state.map(|state| state.name().to_owned()),
                    paths: unresolved
                        .paths
                        .iter()
                        .map(|left| LeftPathDocument {
                            path: left.path.to_string(),
                            operation: left.operation,
                            action: left.action.to_owned(),
                            reason: left.reason.name().to_owned(),
                            kept: left.kept.as_ref().map(ToString::to_string),
                        })
                        .collect(),
                })
                .collect(),
            conflicts: report
                .conflicts
                .iter()
                .map(|conflict| ConflictDocument {
                    transaction: conflict.transaction.map(|id| id.to_hex()),
                    path: conflict.path.to_string(),
                    reason: chain(&conflict.reason),
                })
                .collect(),
            salvage: None,
        }
    }
}

/// What an operator's restore put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RestoreDocument {
    /// `vsh.restore/1`.
    pub schema: RestoreSchema,
    /// The transaction restored, if there was one to restore.
    pub transaction: Option<String>,
    /// Paths put back into their before state.
    pub restored: Vec<String>,
    /// Nodes someone else had put there, moved aside (never deleted).
    pub moved_aside: Vec<MovedDocument>,
    /// Paths someone changed after the rollback, left as they are.
    pub changed_by_others: Vec<String>,
    /// Paths whose before node vsh never held (a writer racing the commit
    /// put another node in its way, which the commit moved instead: moved
    /// aside now), and that do not hold the before state; left as they are.
    pub never_held: Vec<String>,
    /// Nothing of the transaction was kept to restore from (its log lost how
    /// its commit ended): it is marked failed, nothing was put back, and the
    /// workspace is as the commit left it.
    pub nothing_kept: bool,
    /// The operator kept the workspace as it was (`vsh recover --keep`):
    /// nothing was put back; `moved_aside` names the nodes the commit had
    /// taken from its paths (their before nodes, or a racing writer's).
    #[serde(default)]
    pub kept: bool,
    /// With `kept`: every path the commit left unresolved, as it is now.
    #[serde(default)]
    pub left_as_found: Vec<String>,
}

/// A node moved aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MovedDocument {
    /// Where it was.
    pub path: String,
    /// Where it is now.
    pub moved_to: String,
}

impl From<&RestoreReport> for RestoreDocument {
    fn from(report: &RestoreReport) -> Self {
        Self {
            schema: RestoreSchema,
            transaction: report.transaction.map(|id| id.to_hex()),
            restored: report.restored.iter().map(ToString::to_string).collect(),
            moved_aside: report
                .moved_aside
                .iter()
                .map(|(path, aside)| MovedDocument { path: path.to_string(), moved_to: aside.to_string() })
                .collect(),
            changed_by_others: report.changed_by_others.iter().map(ToString::to_string).collect(),
            never_held: report.never_held.iter().map(ToString::to_string).collect(),
            nothing_kept: report.nothing_kept,
            kept: report.kept,
            left_as_found: report.left_as_found.iter().map(ToString::to_string).collect(),
        }
    }
}
