//! [`Receipt`]: what a run or commit did.

use vsh_monty::{ExecutionStats, MontyObject};
use vsh_types::{DiffDigest, DiffEntry, SnapshotId, TransactionId, TransactionState};
use vsh_vfs::FileReview;

use crate::RuntimeDecision;

/// Nanoseconds spent in each stage, from a monotonic clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimings {
    /// Opening the virtual image.
    pub snapshot: u64,
    /// Running the program, including every file operation it made.
    pub execute: u64,
    /// Computing the canonical diff.
    pub diff: u64,
    /// Evaluating the policy.
    pub policy: u64,
    /// Binding the transaction and storing its record and contents.
    pub bind_and_store: u64,
    /// Reserving, revalidating, applying and verifying the commit.
    pub commit: u64,
    /// Everything, end to end.
    pub total: u64,
}

/// The program's output.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ExecutionOutput {
    /// A Monty program's final value and captured stdout.
    Monty {
        /// The value of the last expression.
        value: MontyObject,
        /// Captured stdout (bounded by the budget).
        stdout: String,
    },
}

impl ExecutionOutput {
    /// The Monty value, if this is Monty output.
    pub fn monty_value(&self) -> Option<&MontyObject> {
        match self {
            Self::Monty { value, .. } => Some(value),
        }
    }

    /// The captured stdout bytes.
    pub fn stdout_bytes(&self) -> &[u8] {
        match self {
            Self::Monty { stdout, .. } => stdout.as_bytes(),
        }
    }
}

/// What a commit applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitReceipt {
    /// The committed transaction.
    pub transaction: TransactionId,
    /// Host operations applied.
    pub operations: u64,
    /// Paths verified on disk after applying.
    pub verified_paths: u64,
    /// Dependencies revalidated under the writer lock.
    pub revalidated_dependencies: u64,
}

/// The result of a run or a commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    /// The transaction's id.
    pub transaction: TransactionId,
    /// The observed snapshot the run depended on.
    pub base_snapshot: SnapshotId,
    /// The transaction's state when the receipt was made.
    pub state: TransactionState,
    /// The policy decision.
    pub decision: RuntimeDecision,
    /// The canonical diff's digest.
    pub diff: DiffDigest,
    /// Number of changed paths.
    pub changed_paths: usize,
    /// The changed paths (only with [`crate::ReceiptDetail::Full`]).
    pub changes: Vec<DiffEntry>,
    /// Unified text hunks of changed text files, for human review (only with
    /// [`crate::ReceiptDetail::Full`]; bounded by [`vsh_vfs::ReviewLimits`]).
    pub review: Vec<FileReview>,
    /// The program's output.
    pub output: ExecutionOutput,
    /// Execution statistics.
    pub execution: ExecutionStats,
    /// Stage timings.
    pub timings: StageTimings,
    /// The commit, when the transaction was committed.
    pub commit: Option<CommitReceipt>,
}
