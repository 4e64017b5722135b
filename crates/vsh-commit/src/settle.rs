//! Settling a commit whose record lost how it ended: a record left
//! `Committing` or `RecoveryRequired` with nothing kept of the commit (no
//! transaction directory: a commit removes it only once it has finished, so
//! the commit either finished or never began to write), as a salvaged
//! transaction log leaves one. The workspace decides, path by path, against
//! the transaction's diff:
//!
//! | every changed path holds | the record becomes |
//! |---|---|
//! | its after state | Committed: the commit landed |
//! | its before state | Failed: nothing of it was written |
//! | anything else | unchanged: the operator decides, told which paths hold neither |
//!
//! A diff whose after states equal its before states cannot be told apart
//! and is never settled.

use vsh_types::{DiffEntry, TransactionId, TransactionState, VPath};

use crate::Committer;
use crate::apply::holds;
use crate::error::CommitError;
use crate::ledger::CommitLedger;

/// What [`crate::CommitSession::settle`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Every changed path holds its after state: the record is Committed.
    Committed,
    /// Every changed path holds its before state: the record is Failed.
    Failed,
    /// The record is not one to settle (another state, or its commit
    /// directory is there for recovery to read): nothing changed.
    NotLost,
    /// Some paths hold neither state (listed, the first 100): nothing changed.
    Neither(Vec<VPath>),
}

impl Committer {
    pub(crate) fn settle_locked(
        &self,
        transaction: TransactionId,
        entries: &[DiffEntry],
        ledger: &dyn CommitLedger,
    ) -> Result<Settled, CommitError> {
        let step = |step| move |source| CommitError::Ledger { transaction, step, source };
        let state = ledger.state(transaction).map_err(step("read the state"))?;
        if !matches!(state, Some(TransactionState::Committing | TransactionState::RecoveryRequired)) {
            return Ok(Settled::NotLost);
        }
        let txn = crate::txndir::TxnDir::new(&self.txn_root(), transaction);
        match self.workspace.lstat(&txn.root) {
            Ok(None) => {}
            Ok(Some(_)) => return Ok(Settled::NotLost),
            Err(source) => return Err(CommitError::Host { op: "settle", path: txn.root, source }),
        }
        let view = self.view();
        let (mut after, mut before, mut neither) = (true, true, Vec::new());
        for entry in entries {
            let holds_after = holds(&view, &entry.path, entry.after.as_ref(), None)?;
            // A path holds one of its two different states at most: the
            // second look (a file hashed again) only where the first failed.
            let holds_before = !holds_after && holds(&view, &entry.path, entry.before.as_ref(), None)?;
            after &= holds_after;
            before &= holds_before;
            if !holds_after && !holds_before && neither.len() < 100 {
                neither.push(entry.path.clone());
            }
        }
        Ok(match (after, before) {
            (true, false) => {
                ledger.committed(transaction).map_err(step("committed"))?;
                Settled::Committed
            }
            (false, true) => {
                ledger.failed(transaction).map_err(step("failed"))?;
                Settled::Failed
            }
            _ => Settled::Neither(neither),
        })
    }
}
