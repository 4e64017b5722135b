//! [`StoreLedger`]: the commit engine's durable state steps, kept in the
//! transaction store.
//!
//! During a commit the ledger holds the store's single-use reservation (taken
//! while the commit session is held) and moves it step by step, so no other
//! runtime can move the record meanwhile; the commit engine records every
//! outcome through it, errors included. During recovery there is no
//! reservation (the process that held it is gone) and the ledger moves records
//! by compare-and-transition along the state table.

use std::sync::{Mutex, PoisonError};

use vsh_commit::{CommitLedger, LedgerError, from_states};
use vsh_store::{CommitOutcome, CommitReservation, CommitStep, StoreError, TransactionStore};
use vsh_types::{TransactionId, TransactionState};

pub(crate) struct StoreLedger<'a> {
    store: &'a TransactionStore,
    reservation: Mutex<Option<CommitReservation>>,
    now_ms: u64,
}

fn storage(error: StoreError) -> LedgerError {
    LedgerError::Storage { source: Box::new(error) }
}

impl<'a> StoreLedger<'a> {
    /// A ledger for one commit, holding its reservation.
    pub(crate) fn reserved(store: &'a TransactionStore, reservation: CommitReservation, now_ms: u64) -> Self {
        Self { store, reservation: Mutex::new(Some(reservation)), now_ms }
    }

    /// A ledger for recovery, without a reservation.
    pub(crate) fn recovery(store: &'a TransactionStore, now_ms: u64) -> Self {
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
        let record = self.store.get(transaction).map_err(storage)?;
        let current = record.map(|record| record.state);
        match current {
            Some(state) if state == to => Ok(()),
            Some(state) if from.contains(&state) => {
                self.store.compare_and_transition(transaction, state, to, self.now_ms).map(|_| ()).map_err(storage)
            }
            from => Err(LedgerError::Transition { transaction, from, to }),
        }
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
