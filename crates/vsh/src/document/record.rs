//! Transactions as JSON: a record (`vsh.pending/1`, `vsh.log/1` list
//! them) and a whole review (`vsh.show/1`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vsh_store::{RecordVersion, TransactionRecord};

use super::ReceiptDocument;
use crate::{Receipt, RunPolicy, RuntimeDecision};

schema_name!(PendingSchema, "vsh.pending/1");
schema_name!(LogSchema, "vsh.log/1");
schema_name!(ShowSchema, "vsh.show/1");
schema_name!(RecordSchema, "vsh.record/1");

/// One transaction's record, on its own: what an approval or a rejection left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecordDocument {
    /// `vsh.record/1`.
    pub schema: RecordSchema,
    /// The record.
    #[serde(flatten)]
    pub record: TransactionDocument,
    /// For a rejection: the other runs of the same work (`vsh rerun`) it
    /// rejected with it ([`crate::Runtime::reject_other_runs`]), 64 hex
    /// digits each, `[]` when none (ux77 F8: a consumer had to tell a
    /// missing key from none). Absent from any other record's document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub also_rejected: Option<Vec<String>>,
}

impl RecordDocument {
    /// The document of `record`.
    pub fn new(record: TransactionDocument) -> Self {
        Self { schema: RecordSchema, record, also_rejected: None }
    }

    /// The same, naming the other runs of the same work rejected with it.
    #[must_use]
    pub fn with_also_rejected(mut self, also: &[TransactionRecord]) -> Self {
        self.also_rejected = Some(also.iter().map(|record| record.id.to_hex()).collect());
        self
    }
}

/// A transaction's record, with what its stored receipt says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TransactionDocument {
    /// The transaction id, 64 hex digits.
    pub transaction: String,
    /// Its state (`pending-approval`, `approved`, `committed`, ...).
    pub state: String,
    /// When it was made, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When its state last changed.
    pub updated_ms: u64,
    /// Who approved it, when and until when.
    pub approval: Option<ApprovalDocument>,
    /// When it expires unless decided (pending work and durable previews).
    pub expires_ms: Option<u64>,
    /// How many paths it changes, when its receipt is stored.
    pub changed_paths: Option<u64>,
    /// Why it needs a reviewer, when it does.
    pub flags: Vec<String>,
    /// What it is for (empty if not said).
    pub intent: String,
    /// A real command's argv, for a transaction whose program is one (`vsh
    /// exec`, MCP language=command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Made under a policy the workspace has since replaced: approve and
    /// commit refuse it; only `vsh rerun` makes it again.
    #[serde(default)]
    pub policy_changed: bool,
    /// What the listings' text shows for it: its intent, else a real
    /// command's command line after `$ `, else its program's first line
    /// that does something after `# ` (empty when nothing is stored).
    #[serde(default)]
    pub label: String,
    /// Why the policy denied it (`protected-access-attempt`, ...), when it
    /// was denied and its receipt is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// The first transaction whose program this one ran again (`vsh
    /// rerun`, MCP `vsh_rerun`), and that one's in turn, when it is a rerun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<String>,
}

impl TransactionDocument {
    /// The document of `record`, with its stored receipt and intent when known.
    pub fn new(record: &TransactionRecord, receipt: Option<&Receipt>, intent: &str) -> Self {
        let flags = match receipt.map(|receipt| &receipt.decision) {
            Some(RuntimeDecision::PendingApproval(manifest)) => {
                manifest.flags.iter().map(|flag| flag.name().to_owned()).collect()
            }
            _ => Vec::new(),
        };
        Self {
            transaction: record.id.to_hex(),
            state: record.state.name().to_owned(),
            created_ms: record.created_ms,
            updated_ms: record.updated_ms,
            approval: record.approval.as_ref().map(|grant| ApprovalDocument {
                principal: grant.principal().to_hex(),
                name: None,
                issued_ms: grant.issued_ms(),
                expires_ms: grant.expires_ms(),
            }),
            expires_ms: record.pending_expires_ms,
            changed_paths: receipt.map(|receipt| receipt.changed_paths as u64),
            flags,
            intent: intent.to_owned(),
            command: None,
            policy_changed: false,
            label: intent.to_owned(),
            denied: match receipt.map(|receipt| &receipt.decision) {
                Some(RuntimeDecision::Denied(manifest)) => Some(manifest.reason.name().to_owned()),
                _ => None,
            },
            rerun_of: None,
        }
    }

    /// This document with `stored`'s command line, when it is a real command's.
    #[must_use]
    pub fn with_program(mut self, stored: Option<&crate::StoredProgram>) -> Self {
        self.command = stored.and_then(crate::StoredProgram::command_argv);
        self
    }

    /// This document saying whether it was made under a policy the workspace
    /// has since replaced ([`crate::Runtime::decided_under_another_policy`]).
    #[must_use]
    pub fn with_policy_changed(mut self, changed: bool) -> Self {
        self.policy_changed = changed;
        self
    }

    /// The same, its approval naming `name` as its approver's (where the
    /// workspace recorded it: [`crate::Runtime::principal_name`]).
    #[must_use]
    pub fn with_approver_name(mut self, name: Option<String>) -> Self {
        if let Some(approval) = &mut self.approval {
            approval.name = name;
        }
        self
    }
}

/// An approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalDocument {
    /// The approving principal's digest, 64 hex digits.
    pub principal: String,
    /// The name it digests, where the workspace recorded it (the command
    /// line records the name `vsh approve` digested); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When it was given, milliseconds since the Unix epoch.
    pub issued_ms: u64,
    /// When it lapses.
    pub expires_ms: u64,
}

/// Work waiting for a decision or a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingDocument {
    /// `vsh.pending/1`.
    pub schema: PendingSchema,
    /// The waiting transactions.
    pub transactions: Vec<TransactionDocument>,
}

impl PendingDocument {
    /// The list of `transactions`.
    pub fn new(transactions: Vec<TransactionDocument>) -> Self {
        Self { schema: PendingSchema, transactions }
    }
}

/// Finished work, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogDocument {
    /// `vsh.log/1`.
    pub schema: LogSchema,
    /// The finished transactions, newest first.
    pub transactions: Vec<TransactionDocument>,
    /// How many finished transactions there are (of the state asked for):
    /// more than `transactions` holds when the list stopped at its limit.
    #[serde(default)]
    pub total: u64,
}

impl LogDocument {
    /// The list of `transactions`, the first of `total`.
    pub fn new(transactions: Vec<TransactionDocument>, total: u64) -> Self {
        Self { schema: LogSchema, transactions, total }
    }
}

/// One state a transaction entered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryDocument {
    /// The state.
    pub state: String,
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The approving principal's digest, for an approval.
    pub principal: Option<String>,
    /// Whether the log was compacted here, so earlier states are gone.
    pub carried_over: bool,
}

impl HistoryDocument {
    /// The states a history of record versions shows, oldest first: a version
    /// that kept its state (an artifact attached, an expiry refreshed) is not
    /// a new state, unless compaction carried it over.
    pub fn states(history: &[RecordVersion]) -> Vec<HistoryDocument> {
        let mut states: Vec<HistoryDocument> = Vec::new();
        for version in history {
            let entry = HistoryDocument::from(version);
            if !entry.carried_over && states.last().is_some_and(|last| last.state == entry.state) {
                continue;
            }
            states.push(entry);
        }
        states
    }
}

impl From<&RecordVersion> for HistoryDocument {
    fn from(version: &RecordVersion) -> Self {
        let record = &version.record;
        Self {
            state: record.state.name().to_owned(),
            at_ms: record.updated_ms,
            principal: match (&record.approval, record.state) {
                (Some(grant), vsh_types::TransactionState::Approved) => Some(grant.principal().to_hex()),
                _ => None,
            },
            carried_over: version.carried_over,
        }
    }
}

/// The per-run policy a transaction was made under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunPolicyDocument {
    /// The profile it starts from.
    pub profile: String,
    /// Its digest, 64 hex digits.
    pub digest: String,
    /// The policy file.
    pub text: String,
}

impl From<&RunPolicy> for RunPolicyDocument {
    fn from(policy: &RunPolicy) -> Self {
        Self { profile: policy.profile.name().to_owned(), digest: policy.digest.to_hex(), text: policy.text.clone() }
    }
}

/// A stored transaction's review: its receipt with every changed path's
/// hunks, its record and state history, the policy it was made under when
/// that was not the workspace's, and its program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShowDocument {
    /// `vsh.show/1`.
    pub schema: ShowSchema,
    /// The receipt.
    pub receipt: ReceiptDocument,
    /// The record, when the store holds one.
    pub record: Option<TransactionDocument>,
    /// The states it entered, oldest first (every change the log still holds,
    /// states repeated only where compaction carried one over).
    pub history: Vec<HistoryDocument>,
    /// The per-run policy it was made under, if any.
    pub policy: Option<RunPolicyDocument>,
    /// The program's text, when stored.
    pub program: Option<String>,
}

impl ShowDocument {
    /// The review of a transaction from its parts.
    pub fn new(
        receipt: &Receipt,
        record: Option<TransactionDocument>,
        history: &[RecordVersion],
        policy: Option<&RunPolicy>,
        program: Option<String>,
    ) -> Self {
        Self {
            schema: ShowSchema,
            receipt: receipt.into(),
            record,
            history: HistoryDocument::states(history),
            policy: policy.map(Into::into),
            program,
        }
    }
}
