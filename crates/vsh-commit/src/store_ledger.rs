//! [`StoreLedger`]: the [`CommitLedger`] over vsh-store's
//! [`TransactionStore`], the one every runtime commits and recovers with.
//!
//! During a commit the ledger holds the store's single-use reservation (taken
//! while the commit session is held) and moves it step by step, so no other
//! runtime can move the record meanwhile; the commit engine records every
//! outcome through it, errors included. During recovery there is no
//! reservation (the process that held it is gone) and the ledger moves records
//! by compare-and-transition along the state table.

use std::sync::{Mutex, PoisonError};

use vsh_store::{CommitOutcome, CommitReservation, CommitStep, StoreError, TransactionStore};
use vsh_types::{TransactionId, TransactionState};

use crate::ledger::{CommitLedger, LedgerError, from_states, permitted_move};

/// The durable states of a commit, kept in a [`TransactionStore`].
pub struct StoreLedger<'a> {
    store: &'a TransactionStore,
    reservation: Mutex<Option<CommitReservation>>,
    now_ms: u64,
}

fn storage(error: StoreError) -> LedgerError {
    LedgerError::Storage { source: Box::new(error) }
}

impl<'a> StoreLedger<'a> {
    /// A ledger for one commit, holding its reservation.
    pub fn reserved(store: &'a TransactionStore, reservation: CommitReservation, now_ms: u64) -> Self {
        Self { store, reservation: Mutex::new(Some(reservation)), now_ms }
    }

    /// A ledger for recovery, without a reservation.
    pub fn recovery(store: &'a TransactionStore, now_ms: u64) -> Self {
        Self { store, reservation: Mutex::new(None), now_ms }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<CommitReservation>> {
        self.reservation.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Move without a reservation: from any of `from` to `to`.
    fn transition(
        &self,
        transaction: TransactionId,
        from: &[TransactionState],
        to: TransactionState,
    ) -> Result<(), LedgerError> {
        let current = self.store.get(transaction).map_err(storage)?.map(|record| record.state);
        if current == Some(to) {
            // Already there (a recovery that repeats a move it made before a crash).
            return Ok(());
        }
        let state = permitted_move(transaction, current, from, to)?;
        self.store.compare_and_transition(transaction, state, to, self.now_ms).map(|_| ()).map_err(storage)
    }

    fn step(
        &self,
        transaction: TransactionId,
        step: CommitStep,
        from: &[TransactionState],
        to: TransactionState,
    ) -> Result<(), LedgerError> {
        let mut held = self.held();
        match held.as_mut() {
            Some(reservation) if reservation.transaction() == transaction => {
                self.store.advance(reservation, step, self.now_ms).map(|_| ()).map_err(storage)
            }
            _ => {
                drop(held);
                self.transition(transaction, from, to)
            }
        }
    }

    fn end(
        &self,
        transaction: TransactionId,
        outcome: CommitOutcome,
        from: &[TransactionState],
        to: TransactionState,
    ) -> Result<(), LedgerError> {
        let mut held = self.held();
        if held.as_ref().is_some_and(|reservation| reservation.transaction() == transaction) {
            let reservation = held.take().expect("checked above");
            return self.store.finish(reservation, outcome, self.now_ms).map(|_| ()).map_err(storage);
        }
        drop(held);
        self.transition(transaction, from, to)
    }
}

impl CommitLedger for StoreLedger<'_> {
    /// The transaction store's log is durable and survives a crash: its
    /// `Committed` is the commit point, no completion marker is written.
    fn is_commit_point(&self) -> bool {
        true
    }

    fn committing(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.step(transaction, CommitStep::Committing, from_states::COMMITTING, TransactionState::Committing)
    }

    fn committed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.end(transaction, CommitOutcome::Committed, from_states::COMMITTED, TransactionState::Committed)
    }

    fn recovery_required(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.step(
            transaction,
            CommitStep::RecoveryRequired,
            from_states::RECOVERY_REQUIRED,
            TransactionState::RecoveryRequired,
        )
    }

    fn stale(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.end(transaction, CommitOutcome::Stale, from_states::STALE, TransactionState::Stale)
    }

    fn failed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.end(transaction, CommitOutcome::Failed, from_states::FAILED, TransactionState::Failed)
    }

    /// Durable work goes back to its approval, to commit again; work whose
    /// contents were never durable fails ([`TransactionStore::release_reservation`]).
    /// A reservation this ledger holds is its commit's own, which fails it.
    fn released(&self, transaction: TransactionId) -> Result<TransactionState, LedgerError> {
        if self.held().as_ref().is_some_and(|reservation| reservation.transaction() == transaction) {
            return self.failed(transaction).map(|()| TransactionState::Failed);
        }
        match self.store.get(transaction).map_err(storage)?.map(|record| record.state) {
            Some(TransactionState::Reserved | TransactionState::Revalidating) => {
                Ok(self.store.release_reservation(transaction, self.now_ms).map_err(storage)?.state)
            }
            _ => self.failed(transaction).map(|()| TransactionState::Failed),
        }
    }

    fn state(&self, transaction: TransactionId) -> Result<Option<TransactionState>, LedgerError> {
        Ok(self.store.get(transaction).map_err(storage)?.map(|record| record.state))
    }

    fn open_transactions(&self) -> Result<Vec<(TransactionId, TransactionState)>, LedgerError> {
        Ok(self
            .store
            .list()
            .map_err(storage)?
            .into_iter()
            .filter(|record| from_states::OPEN.contains(&record.state))
            .map(|record| (record.id, record.state))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use vsh_store::{ApprovalGrant, DataDir, TransactionRecord};
    use vsh_types::{AuthorityKey, PrincipalId, SnapshotId};

    use super::*;

    fn store(dir: &std::path::Path) -> TransactionStore {
        let data = DataDir::open_external(dir).unwrap();
        TransactionStore::open(&data, &AuthorityKey::from_bytes([7; 32])).unwrap()
    }

    fn created(store: &TransactionStore, byte: u8, state: TransactionState) -> TransactionId {
        let id = TransactionId::from_bytes([byte; 32]);
        store.create(&TransactionRecord::new(id, SnapshotId::from_bytes([1; 32]), state, 10)).unwrap();
        id
    }

    /// One of the ledger's moves.
    type Move = fn(&dyn CommitLedger, TransactionId) -> Result<(), LedgerError>;

    fn state(store: &TransactionStore, id: TransactionId) -> Option<TransactionState> {
        store.get(id).unwrap().map(|record| record.state)
    }

    /// A reserved ledger for a fresh auto-approved transaction, moved to Revalidating.
    fn reserved(store: &TransactionStore, byte: u8) -> (TransactionId, StoreLedger<'_>) {
        let id = created(store, byte, TransactionState::AutoApproved);
        let mut reservation = store.reserve(id, 20).unwrap();
        store.advance(&mut reservation, CommitStep::Revalidating, 20).unwrap();
        (id, StoreLedger::reserved(store, reservation, 30))
    }

    #[test]
    fn a_reserved_ledger_moves_its_own_record_through_the_reservation() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let (id, ledger) = reserved(&store, 1);
        ledger.committing(id).unwrap();
        assert_eq!(state(&store, id), Some(TransactionState::Committing));
        assert_eq!(ledger.state(id).unwrap(), Some(TransactionState::Committing));
        assert_eq!(ledger.open_transactions().unwrap(), vec![(id, TransactionState::Committing)]);
        ledger.committed(id).unwrap();
        assert_eq!(state(&store, id), Some(TransactionState::Committed));
        assert_eq!(store.get(id).unwrap().unwrap().updated_ms, 30, "stamped with the ledger's clock");
        assert!(ledger.open_transactions().unwrap().is_empty());
        // The reservation is consumed: the same outcome again is a no-op
        // through the state table, another one is refused.
        ledger.committed(id).unwrap();
        assert!(matches!(ledger.failed(id), Err(LedgerError::Transition { .. })));

        for (byte, end, expected) in [
            (2, (|ledger, id| ledger.stale(id)) as Move, TransactionState::Stale),
            (3, |ledger, id| ledger.failed(id), TransactionState::Failed),
            (4, |ledger, id| ledger.recovery_required(id), TransactionState::RecoveryRequired),
        ] {
            let (id, ledger) = reserved(&store, byte);
            if expected == TransactionState::RecoveryRequired {
                ledger.committing(id).unwrap();
            }
            end(&ledger, id).unwrap();
            assert_eq!(state(&store, id), Some(expected));
        }
    }

    #[test]
    fn a_recovery_ledger_moves_records_along_the_table_by_compare_and_transition() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let ledger = StoreLedger::recovery(&store, 40);
        let committing = created(&store, 1, TransactionState::AutoApproved);
        let mut reservation = store.reserve(committing, 20).unwrap();
        store.advance(&mut reservation, CommitStep::Revalidating, 20).unwrap();
        store.advance(&mut reservation, CommitStep::Committing, 20).unwrap();
        drop(reservation);
        let pending = created(&store, 2, TransactionState::PendingApproval);
        assert_eq!(ledger.open_transactions().unwrap(), vec![(committing, TransactionState::Committing)]);

        ledger.recovery_required(committing).unwrap();
        assert_eq!(state(&store, committing), Some(TransactionState::RecoveryRequired));
        ledger.recovery_required(committing).unwrap();
        ledger.committed(committing).unwrap();
        assert_eq!(state(&store, committing), Some(TransactionState::Committed));
        assert_eq!(store.get(committing).unwrap().unwrap().updated_ms, 40);

        // A record outside the edge's sources is refused and stays as it is.
        let refused: [Move; 3] =
            [|ledger, id| ledger.committing(id), |ledger, id| ledger.stale(id), |ledger, id| ledger.failed(id)];
        for refused in refused {
            let error = refused(&ledger, pending).unwrap_err();
            assert!(
                matches!(error, LedgerError::Transition { from: Some(TransactionState::PendingApproval), .. }),
                "{error:?}"
            );
        }
        assert_eq!(state(&store, pending), Some(TransactionState::PendingApproval));
        let unknown = TransactionId::from_bytes([9; 32]);
        assert!(matches!(ledger.failed(unknown), Err(LedgerError::Transition { from: None, .. })));
        assert_eq!(ledger.state(unknown).unwrap(), None);
    }

    #[test]
    fn a_reserved_ledger_moves_other_records_like_a_recovery_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let (mine, ledger) = reserved(&store, 1);
        let other = created(&store, 2, TransactionState::PendingApproval);
        let grant = ApprovalGrant::new(other, PrincipalId::digest(b"op"), 10, 1_000).unwrap();
        store.approve(other, &grant).unwrap();
        let mut reservation = store.reserve(other, 20).unwrap();
        store.advance(&mut reservation, CommitStep::Revalidating, 20).unwrap();
        drop(reservation);
        // Not the reservation's transaction: moved by compare-and-transition.
        ledger.stale(other).unwrap();
        assert_eq!(state(&store, other), Some(TransactionState::Stale));
        let third = created(&store, 3, TransactionState::AutoApproved);
        let mut reservation = store.reserve(third, 20).unwrap();
        store.advance(&mut reservation, CommitStep::Revalidating, 20).unwrap();
        store.advance(&mut reservation, CommitStep::Committing, 20).unwrap();
        drop(reservation);
        ledger.recovery_required(third).unwrap();
        assert_eq!(state(&store, third), Some(TransactionState::RecoveryRequired));
        assert_eq!(state(&store, mine), Some(TransactionState::Revalidating), "the reservation's own is untouched");
        // Its own still goes through the reservation afterwards.
        ledger.committing(mine).unwrap();
        ledger.failed(mine).unwrap();
        assert_eq!(state(&store, mine), Some(TransactionState::Failed));
    }
}
