//! `FileLedger`: a [`CommitLedger`] kept in an append-only text file, one
//! `fsync`ed line per transition, so the state a killed process reached is
//! what the next process reads back.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use vsh_commit::{CommitLedger, LedgerError};
use vsh_types::{TransactionId, TransactionState};

/// Bytes of one line: 64 hex digits, a space, two decimal digits, a newline.
const LINE: usize = 64 + 1 + 2 + 1;

pub struct FileLedger {
    path: PathBuf,
    states: Mutex<BTreeMap<TransactionId, TransactionState>>,
}

impl FileLedger {
    /// Open (or start) the ledger at `path`, replaying every complete line.
    pub fn open(path: &Path) -> FileLedger {
        let bytes = std::fs::read(path).unwrap_or_default();
        let mut states = BTreeMap::new();
        for line in bytes.chunks_exact(LINE) {
            let text = std::str::from_utf8(line).expect("ledger lines are ASCII");
            let transaction = TransactionId::parse_hex(&text[..64]).expect("ledger id");
            let tag: u8 = text[65..67].parse().expect("ledger tag");
            states.insert(transaction, TransactionState::from_tag(tag).expect("ledger state"));
        }
        FileLedger { path: path.to_owned(), states: Mutex::new(states) }
    }

    /// Record `transaction` in `state`, durably.
    pub fn insert(&self, transaction: TransactionId, state: TransactionState) {
        self.append(transaction, state).expect("append to the test ledger");
        self.states.lock().unwrap().insert(transaction, state);
    }

    pub fn get(&self, transaction: TransactionId) -> Option<TransactionState> {
        self.states.lock().unwrap().get(&transaction).copied()
    }

    /// Every transaction and its state.
    pub fn all(&self) -> Vec<(TransactionId, TransactionState)> {
        self.states.lock().unwrap().iter().map(|(id, state)| (*id, *state)).collect()
    }

    fn append(&self, transaction: TransactionId, state: TransactionState) -> std::io::Result<()> {
        let mut file: File = OpenOptions::new().create(true).append(true).open(&self.path)?;
        file.write_all(format!("{} {:02}\n", transaction.to_hex(), state.tag()).as_bytes())?;
        file.sync_data()
    }

    fn transition(
        &self,
        transaction: TransactionId,
        from: &[TransactionState],
        to: TransactionState,
    ) -> Result<(), LedgerError> {
        let mut states = self.states.lock().unwrap();
        vsh_commit::permitted_move(transaction, states.get(&transaction).copied(), from, to)?;
        self.append(transaction, to).map_err(|error| LedgerError::Storage { source: Box::new(error) })?;
        states.insert(transaction, to);
        Ok(())
    }
}

impl CommitLedger for FileLedger {
    fn is_commit_point(&self) -> bool {
        true
    }

    fn committing(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, vsh_commit::from_states::COMMITTING, TransactionState::Committing)
    }

    fn committed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, vsh_commit::from_states::COMMITTED, TransactionState::Committed)
    }

    fn recovery_required(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, vsh_commit::from_states::RECOVERY_REQUIRED, TransactionState::RecoveryRequired)
    }

    fn stale(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, vsh_commit::from_states::STALE, TransactionState::Stale)
    }

    fn failed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.transition(transaction, vsh_commit::from_states::FAILED, TransactionState::Failed)
    }

    fn state(&self, transaction: TransactionId) -> Result<Option<TransactionState>, LedgerError> {
        Ok(self.get(transaction))
    }

    fn open_transactions(&self) -> Result<Vec<(TransactionId, TransactionState)>, LedgerError> {
        Ok(self.all().into_iter().filter(|(_, state)| vsh_commit::from_states::OPEN.contains(state)).collect())
    }
}
