//! [`CommitLedger`]: the durable transaction states the committer moves a
//! transaction through, implemented by the caller over its transaction store;
//! [`MemoryLedger`] and [`NoLedger`] for tests and ledger-less callers.
//!
//! The committer never reads or writes the store itself: it calls the ledger
//! at the protocol's durable steps, and recovery asks it what it knows.
//!
//! | call | transition | when |
//! |---|---|---|
//! | [`CommitLedger::committing`] | `Revalidating` → `Committing` | after revalidation and after every intent is journaled, before the first operation (fault point `CommitStatePersisted`) |
//! | [`CommitLedger::committed`] | `Committing` or `RecoveryRequired` → `Committed` | after every operation is applied, synced and verified, and after the completion marker is synced unless the ledger is the commit point ([`CommitLedger::is_commit_point`]: no marker is written) (`CommittedStatePersisted`) |
//! | [`CommitLedger::recovery_required`] | `Committing` → `RecoveryRequired` | recovery is about to roll back, or a rollback left paths for an operator |
//! | [`CommitLedger::stale`] | `Revalidating` → `Stale` | revalidation found a conflict; nothing was written |
//! | [`CommitLedger::failed`] | `Reserved`, `Revalidating`, `Committing` or `RecoveryRequired` → `Failed` | the workspace holds the before state again (or was never touched) |
//!
//! Each call must be durable when it returns. The caller moves `Reserved` →
//! `Revalidating` before committing, *while holding the commit session*
//! ([`crate::CommitSession`]), so that recovery, which runs under the same
//! lock, may treat any `Reserved` or `Revalidating` record without a commit
//! directory as abandoned. From then on the committer owns the state: every
//! outcome of the commit, an error included, is recorded by one of the calls
//! above, and a state is never left behind that the disk contradicts
//! (`Failed` only when the workspace holds the before state, `Committed` only
//! once every operation is applied, durable and verified).

use std::collections::BTreeMap;
use std::sync::Mutex;

use vsh_types::{TransactionId, TransactionState};

/// Why the ledger refused or failed a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The transaction is not in a state the call can move it from.
    #[error("transaction {transaction} cannot move from {from:?} to {to:?}")]
    Transition {
        /// The transaction.
        transaction: TransactionId,
        /// Its current state (`None`: unknown to the ledger).
        from: Option<TransactionState>,
        /// The requested state.
        to: TransactionState,
    },
    /// The ledger's storage failed.
    #[error("the transaction ledger failed")]
    Storage {
        /// What the storage reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The states each [`CommitLedger`] call may move a transaction from: one table
/// for every implementation.
pub mod from_states {
    use vsh_types::TransactionState as S;

    /// [`super::CommitLedger::committing`] moves from these.
    pub const COMMITTING: &[S] = &[S::Revalidating];
    /// [`super::CommitLedger::committed`] moves from these.
    pub const COMMITTED: &[S] = &[S::Committing, S::RecoveryRequired];
    /// [`super::CommitLedger::recovery_required`] moves from these.
    pub const RECOVERY_REQUIRED: &[S] = &[S::Committing];
    /// [`super::CommitLedger::stale`] moves from these.
    pub const STALE: &[S] = &[S::Revalidating];
    /// [`super::CommitLedger::failed`] moves from these.
    pub const FAILED: &[S] = &[S::Reserved, S::Revalidating, S::Committing, S::RecoveryRequired];
    /// The states of a commit that began and has not ended, which
    /// [`super::CommitLedger::open_transactions`] lists.
    pub const OPEN: &[S] = &[S::Reserved, S::Revalidating, S::Committing, S::RecoveryRequired];
}

/// The rule every ledger applies to moving `transaction`, now in `current`,
/// to `to`: only from one of `from` (see [`from_states`]) and only along
/// [`TransactionState::can_transition`]. Returns the state it moves from.
pub fn permitted_move(
    transaction: TransactionId,
    current: Option<TransactionState>,
    from: &[TransactionState],
    to: TransactionState,
) -> Result<TransactionState, LedgerError> {
    match current {
        Some(state) if from.contains(&state) && state.can_transition(to) => Ok(state),
        current => Err(LedgerError::Transition { transaction, from: current, to }),
    }
}

/// The caller's durable record of each transaction's state.
///
/// See the module docs for when each method is called. Implementations move
/// the state with a compare-and-transition along
/// [`TransactionState::can_transition`] and return only once the new state is
/// durable.
pub trait CommitLedger {
    /// Revalidation passed; the workspace is about to change
    /// (`Revalidating` → `Committing`).
    fn committing(&self, transaction: TransactionId) -> Result<(), LedgerError>;

    /// Every operation is applied, durable and verified (and, unless the
    /// ledger is the commit point, the completion marker is durable): the
    /// transaction is committed (`Committing` or `RecoveryRequired` →
    /// `Committed`).
    fn committed(&self, transaction: TransactionId) -> Result<(), LedgerError>;

    /// The commit stopped part-way and will be rolled back by recovery
    /// (`Committing` → `RecoveryRequired`).
    fn recovery_required(&self, transaction: TransactionId) -> Result<(), LedgerError>;

    /// Revalidation found that the workspace changed under the transaction;
    /// nothing was written (`Revalidating` → `Stale`).
    fn stale(&self, transaction: TransactionId) -> Result<(), LedgerError>;

    /// The workspace holds the transaction's before state (`Reserved`,
    /// `Revalidating`, `Committing` or `RecoveryRequired` → `Failed`).
    fn failed(&self, transaction: TransactionId) -> Result<(), LedgerError>;

    /// A recovery found the commit killed before it applied anything
    /// (`Reserved` or `Revalidating`): the ledger may give the work back to
    /// commit again (to `AutoApproved` or `Approved`), or fail it; returns
    /// the state it moved to. The default fails it.
    fn released(&self, transaction: TransactionId) -> Result<TransactionState, LedgerError> {
        self.failed(transaction).map(|()| TransactionState::Failed)
    }

    /// The transaction's current state, `None` if the ledger does not know it.
    fn state(&self, transaction: TransactionId) -> Result<Option<TransactionState>, LedgerError>;

    /// Whether this ledger's `Committed` can be the commit point: its calls
    /// are durable when they return and it keeps its states across a crash
    /// (a transaction store on disk). The committer then writes no
    /// completion marker, and recovery rolls forward on `Committed`. The
    /// default (and [`NoLedger`]) is no: the marker is the commit point.
    fn is_commit_point(&self) -> bool {
        false
    }

    /// Every transaction in one of [`from_states::OPEN`], so that recovery
    /// settles those whose commit directory is gone (or was never made).
    /// Ledgers that cannot list return none.
    fn open_transactions(&self) -> Result<Vec<(TransactionId, TransactionState)>, LedgerError> {
        Ok(Vec::new())
    }
}

/// A ledger that records nothing and knows nothing: recovery then decides by
/// the completion marker alone. What [`crate::Committer::commit`] uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLedger;

impl CommitLedger for NoLedger {
    fn committing(&self, _: TransactionId) -> Result<(), LedgerError> {
        Ok(())
    }

    fn committed(&self, _: TransactionId) -> Result<(), LedgerError> {
        Ok(())
    }

    fn recovery_required(&self, _: TransactionId) -> Result<(), LedgerError> {
        Ok(())
    }

    fn stale(&self, _: TransactionId) -> Result<(), LedgerError> {
        Ok(())
    }

    fn failed(&self, _: TransactionId) -> Result<(), LedgerError> {
        Ok(())
    }

    fn state(&self, _: TransactionId) -> Result<Option<TransactionState>, LedgerError> {
        Ok(None)
    }
}

/// An in-memory ledger with the checked state table, for tests: every call is
/// a compare-and-transition, and an unknown transaction is refused.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    states: Mutex<BTreeMap<TransactionId, TransactionState>>,
    commit_point: bool,
}

impl MemoryLedger {
    /// An empty ledger; the completion marker stays the commit point.
    pub fn new() -> MemoryLedger {
        MemoryLedger::default()
    }

    /// An empty ledger standing for a durable one that is the commit point
    /// ([`CommitLedger::is_commit_point`]): a test that keeps it across a
    /// simulated crash sees what a transaction store would keep.
    pub fn as_commit_point() -> MemoryLedger {
        MemoryLedger { commit_point: true, ..MemoryLedger::default() }
    }

    /// Record `transaction` in `state` (as the caller's store would before
    /// committing, typically [`TransactionState::Revalidating`]).
    pub fn insert(&self, transaction: TransactionId, state: TransactionState) {
        self.lock().insert(transaction, state);
    }

    /// The current state of `transaction`.
    pub fn get(&self, transaction: TransactionId) -> Option<TransactionState> {
        self.lock().get(&transaction).copied()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<TransactionId, TransactionState>> {
        // A panic elsewhere cannot leave the map half-updated: each update is one insert.
        self.states.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn transition(
        &self,
        transaction: TransactionId,
        from: &[TransactionState],
        to: TransactionState,
    ) -> Result<(), LedgerError> {
        let mut states = self.lock();
        permitted_move(transaction, states.get(&transaction).copied(), from, to)?;
        states.insert(transaction, to);
        Ok(())
    }
}

impl CommitLedger for MemoryLedger {
    fn is_commit_point(&self) -> bool {
        self.commit_point
    }

    fn committing(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, from_states::COMMITTING, TransactionState::Committing)
    }

    fn committed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, from_states::COMMITTED, TransactionState::Committed)
    }

    fn recovery_required(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, from_states::RECOVERY_REQUIRED, TransactionState::RecoveryRequired)
    }

    fn stale(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, from_states::STALE, TransactionState::Stale)
    }

    fn failed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, from_states::FAILED, TransactionState::Failed)
    }

    fn state(&self, transaction: TransactionId) -> Result<Option<TransactionState>, LedgerError> {
        Ok(self.get(transaction))
    }

    fn open_transactions(&self) -> Result<Vec<(TransactionId, TransactionState)>, LedgerError> {
        Ok(self
            .lock()
            .iter()
            .filter(|(_, state)| from_states::OPEN.contains(state))
            .map(|(transaction, state)| (*transaction, *state))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_is_permitted_only_from_the_listed_states_and_along_the_table() {
        use TransactionState as S;
        let id = TransactionId::from_bytes([5; 32]);
        let refusal = |result: Result<S, LedgerError>| match result {
            Err(LedgerError::Transition { transaction, from, to }) if transaction == id => Some((from, to)),
            _ => None,
        };
        assert!(matches!(
            permitted_move(id, Some(S::Committing), from_states::COMMITTED, S::Committed),
            Ok(S::Committing)
        ));
        // Not in the list, unknown, or listed but not a move the state table allows.
        assert_eq!(
            refusal(permitted_move(id, Some(S::Revalidating), from_states::COMMITTED, S::Committed)),
            Some((Some(S::Revalidating), S::Committed))
        );
        assert_eq!(refusal(permitted_move(id, None, from_states::COMMITTED, S::Committed)), Some((None, S::Committed)));
        assert_eq!(
            refusal(permitted_move(id, Some(S::Created), &[S::Created], S::Committed)),
            Some((Some(S::Created), S::Committed))
        );
    }

    #[test]
    fn memory_ledger_follows_the_table() {
        let ledger = MemoryLedger::new();
        let tx = TransactionId::digest(b"t");
        assert!(matches!(ledger.committing(tx), Err(LedgerError::Transition { from: None, .. })));
        ledger.insert(tx, TransactionState::Revalidating);
        ledger.committing(tx).unwrap();
        assert!(ledger.committing(tx).is_err());
        ledger.recovery_required(tx).unwrap();
        ledger.committed(tx).unwrap();
        assert!(ledger.failed(tx).is_err());
        assert_eq!(ledger.state(tx).unwrap(), Some(TransactionState::Committed));
        // The table allows AutoApproved -> Failed, but a commit's failure
        // never moves a record that is not in one of the commit's states.
        let other = TransactionId::digest(b"other");
        ledger.insert(other, TransactionState::AutoApproved);
        assert!(matches!(
            ledger.failed(other),
            Err(LedgerError::Transition { from: Some(TransactionState::AutoApproved), .. })
        ));
        assert_eq!(ledger.get(other), Some(TransactionState::AutoApproved));
        // A ledger that cannot list has nothing open.
        assert!(NoLedger.open_transactions().unwrap().is_empty());
    }
}
