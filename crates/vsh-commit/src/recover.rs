//! Recovery: finish or undo every transaction directory an interrupted commit
//! left behind, under the exclusive commit lock.
//!
//! For each `txn/<transaction hex>/`, in name order:
//!
//! - **A valid completion marker**: the commit was applied, synced and
//!   verified before the marker was written. Roll forward: verify every diff
//!   path holds its after state, move the ledger to Committed, clean up.
//! - **No marker**: roll back, in reverse order, every operation with a
//!   journaled intent (an operation is never applied before its intent is
//!   durable), deciding from the filesystem whether each was applied:
//!
//!   | operation | applied when | undo |
//!   |---|---|---|
//!   | quarantine | `quarantine/<i>` exists (the witness inode) | rename it back (the path must be free) |
//!   | install | `stage/<i>` is gone and the path holds the witness inode with the new content | rename it back to `stage/<i>` |
//!   | create dir | a directory is at the path (the done witness, when journaled) | remove it if empty |
//!   | set mode | the witness node has the after mode | set the before mode |
//!
//!   Each undo restores exactly the state before the operation, so a crash
//!   during recovery is recovered the same way. Then every path an undone
//!   operation touched must hold its before state; the ledger moves to Failed.
//! - Anything ambiguous (a state no interleaving of the protocol produces, a
//!   ledger that contradicts the disk, a corrupt record, a symlink or file
//!   planted where vsh keeps a directory) is a [`RecoveryConflict`]: that
//!   transaction is left untouched for an operator, and no commit runs until
//!   it is resolved.

use std::fmt;

use vsh_host::{HostError, HostKind, HostStat};
use vsh_types::{NodeKind, TransactionId, TransactionState, VPath};

use crate::Committer;
use crate::apply;
use crate::error::CommitError;
use crate::fault::{FaultInjector, FaultPoint, NoFaults};
use crate::format::{Action, FormatError, Journal, Plan, PlanDigest, RecordKind};
use crate::ledger::{CommitLedger, LedgerError};
use crate::txndir::{Read, TXN_DIR, TxnDir};

/// What [`Committer::recover`] did.
#[derive(Debug, Default)]
pub struct RecoveryReport {
    /// Transactions found complete (marker durable) and finished: Committed.
    pub rolled_forward: Vec<TransactionId>,
    /// Transactions undone to their before state: Failed.
    pub rolled_back: Vec<TransactionId>,
    /// Directories of transactions already finished (or never started) that
    /// only needed removing.
    pub cleaned: Vec<TransactionId>,
    /// What could not be decided; each is left untouched.
    pub conflicts: Vec<RecoveryConflict>,
}

impl RecoveryReport {
    /// Whether nothing needs an operator.
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
    }

    /// Whether there was nothing to recover at all.
    pub fn is_empty(&self) -> bool {
        self.rolled_forward.is_empty() && self.rolled_back.is_empty() && self.cleaned.is_empty() && self.is_clean()
    }
}

/// One transaction directory (or internal path) recovery left untouched.
#[derive(Debug)]
pub struct RecoveryConflict {
    /// The transaction, when the directory name is one.
    pub transaction: Option<TransactionId>,
    /// The path at fault, relative to the workspace.
    pub path: VPath,
    /// What is wrong.
    pub reason: RecoveryConflictReason,
}

impl fmt::Display for RecoveryConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.transaction {
            Some(transaction) => write!(f, "transaction {} at {}: {}", transaction.short(), self.path, self.reason),
            None => write!(f, "{}: {}", self.path, self.reason),
        }
    }
}

/// Why recovery could not decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoveryConflictReason {
    /// Not what vsh keeps there: a symlink, a file where a directory belongs
    /// (or the reverse), or a name vsh never writes. It was not followed.
    #[error("unexpected entry in vsh's internal state (kind {kind:?}); not followed")]
    UnexpectedEntry {
        /// What is there (`None`: could not be told).
        kind: Option<HostKind>,
    },
    /// The plan is missing or corrupt although the journal says operations
    /// may have been applied (or the marker needs it).
    #[error("plan is missing or corrupt")]
    Plan {
        /// The decoding error (`None`: missing or mismatched).
        #[source]
        source: Option<FormatError>,
    },
    /// The journal is corrupt or belongs to another plan.
    #[error("journal is corrupt or belongs to another plan")]
    Journal {
        /// The decoding error (`None`: mismatched).
        #[source]
        source: Option<FormatError>,
    },
    /// The completion marker is corrupt or names another plan.
    #[error("completion marker is corrupt or names another plan")]
    Marker {
        /// The decoding error (`None`: mismatched).
        #[source]
        source: Option<FormatError>,
    },
    /// The ledger's state contradicts what is on disk.
    #[error("the ledger says {state:?}, which the disk contradicts")]
    LedgerDisagrees {
        /// The ledger's state.
        state: Option<TransactionState>,
    },
    /// The ledger failed.
    #[error("the ledger failed")]
    Ledger(#[source] LedgerError),
    /// An operation's effect is neither clearly applied nor clearly not:
    /// something outside vsh changed the path or the transaction's state.
    #[error("cannot tell whether operation {operation} ({action}) was applied")]
    Ambiguous {
        /// The operation's index in the plan.
        operation: u32,
        /// Its action's name.
        action: &'static str,
    },
    /// After rolling forward (or back), the path does not hold the after (or
    /// before) state.
    #[error("does not hold its {} state", if *.after { "after" } else { "before" })]
    StateMismatch {
        /// Whether the after state was expected.
        after: bool,
    },
    /// A host operation failed.
    #[error("host operation failed")]
    Host(#[source] HostError),
}

/// How one transaction directory was resolved.
pub(crate) enum Outcome {
    RolledForward,
    RolledBack,
    Cleaned,
}

pub(crate) type Resolved = Result<Outcome, RecoveryConflict>;

/// What an undo found.
enum Undo {
    Undone,
    NotApplied,
}

impl Committer {
    /// Recover every interrupted commit on this workspace (see the module
    /// docs of `recover.rs`, summarized in the crate docs). Takes the commit
    /// lock; a commit also does this first, and refuses to run if any
    /// conflict remains.
    pub fn recover(&self, ledger: &dyn CommitLedger) -> Result<RecoveryReport, CommitError> {
        self.recover_with_faults(ledger, &NoFaults)
    }

    /// [`Committer::recover`], asking `faults` at every undo
    /// ([`FaultPoint::Undone`]) and at cleanup, to test that a crash during
    /// recovery is itself recoverable.
    pub fn recover_with_faults(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<RecoveryReport, CommitError> {
        let _lock = self.lock()?;
        self.recover_locked(ledger, faults)
    }

    pub(crate) fn txn_root(&self) -> VPath {
        self.runtime_dir.child(TXN_DIR).expect("a valid constant name")
    }

    /// Recovery with the lock held.
    pub(crate) fn recover_locked(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<RecoveryReport, CommitError> {
        let mut report = RecoveryReport::default();
        let root = self.txn_root();
        let refuse = |kind| RecoveryConflict {
            transaction: None,
            path: root.clone(),
            reason: RecoveryConflictReason::UnexpectedEntry { kind },
        };
        match self.workspace.lstat(&root) {
            Ok(None) => return Ok(report),
            Ok(Some(stat)) if stat.kind == HostKind::Directory => {}
            Ok(Some(stat)) => {
                report.conflicts.push(refuse(Some(stat.kind)));
                return Ok(report);
            }
            Err(HostError::SymlinkInPath { .. } | HostError::NotADirectory { .. }) => {
                report.conflicts.push(refuse(None));
                return Ok(report);
            }
            Err(source) => return Err(CommitError::Host { op: "recover", path: root, source }),
        }
        let mut names: Vec<Vec<u8>> = match self.workspace.list_dir(&root) {
            Ok(entries) => entries.into_iter().map(|entry| entry.name).collect(),
            Err(source) => return Err(CommitError::Host { op: "recover", path: root, source }),
        };
        names.sort();
        for name in names {
            let Some((transaction, path)) = std::str::from_utf8(&name).ok().and_then(|name| {
                let transaction = TransactionId::parse_hex(name).ok().filter(|id| id.to_hex() == name)?;
                Some((transaction, root.child(name).ok()?))
            }) else {
                let path = std::str::from_utf8(&name).ok().and_then(|name| root.child(name).ok());
                report.conflicts.push(RecoveryConflict {
                    transaction: None,
                    path: path.unwrap_or_else(|| root.clone()),
                    reason: RecoveryConflictReason::UnexpectedEntry { kind: None },
                });
                continue;
            };
            let conflict = |reason| RecoveryConflict { transaction: Some(transaction), path: path.clone(), reason };
            match self.workspace.lstat(&path) {
                Ok(Some(stat)) if stat.kind == HostKind::Directory => {}
                Ok(stat) => {
                    let kind = stat.map(|stat| stat.kind);
                    report.conflicts.push(conflict(RecoveryConflictReason::UnexpectedEntry { kind }));
                    continue;
                }
                Err(source) => {
                    report.conflicts.push(conflict(RecoveryConflictReason::Host(source)));
                    continue;
                }
            }
            let txn = TxnDir::new(&root, transaction);
            match self.recover_one(ledger, faults, transaction, &txn, None)? {
                Ok(Outcome::RolledForward) => report.rolled_forward.push(transaction),
                Ok(Outcome::RolledBack) => report.rolled_back.push(transaction),
                Ok(Outcome::Cleaned) => report.cleaned.push(transaction),
                Err(conflict) => report.conflicts.push(conflict),
            }
        }
        Ok(report)
    }

    /// Resolve one transaction directory. Operations at index `limit` and
    /// beyond are known not to have been applied (a commit rolling itself
    /// back in place says so); recovery passes `None`.
    ///
    /// The outer error is only [`CommitError::FaultInjected`].
    pub(crate) fn recover_one(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
        transaction: TransactionId,
        txn: &TxnDir,
        limit: Option<usize>,
    ) -> Result<Resolved, CommitError> {
        let resolver = Resolver { committer: self, ledger, faults, transaction, txn };
        let found = match resolver.read() {
            Ok(found) => found,
            Err(conflict) => return Ok(Err(conflict)),
        };
        if found.marker_valid { resolver.roll_forward(found) } else { resolver.roll_back(found, limit) }
    }
}

/// What a transaction directory holds, read and cross-checked.
struct Found {
    /// The ledger's state.
    state: Option<TransactionState>,
    /// Whether a valid completion marker for this plan is durable.
    marker_valid: bool,
    plan: Read<(Plan, PlanDigest)>,
    journal: Option<Journal>,
}

/// Resolves one transaction directory.
struct Resolver<'a> {
    committer: &'a Committer,
    ledger: &'a dyn CommitLedger,
    faults: &'a dyn FaultInjector,
    transaction: TransactionId,
    txn: &'a TxnDir,
}

impl Resolver<'_> {
    fn conflict(&self, path: &VPath, reason: RecoveryConflictReason) -> RecoveryConflict {
        RecoveryConflict { transaction: Some(self.transaction), path: path.clone(), reason }
    }

    fn host(&self, path: &VPath) -> impl FnOnce(HostError) -> RecoveryConflict + '_ {
        let path = path.clone();
        move |source| self.conflict(&path, RecoveryConflictReason::Host(source))
    }

    /// Read the ledger state, the marker, the plan and the journal, and check
    /// that they belong together.
    fn read(&self) -> Result<Found, RecoveryConflict> {
        let (txn, workspace, transaction) = (self.txn, &*self.committer.workspace, self.transaction);
        let unexpected = |path: &VPath| self.conflict(path, RecoveryConflictReason::UnexpectedEntry { kind: None });
        let state = self
            .ledger
            .state(transaction)
            .map_err(|error| self.conflict(&txn.root, RecoveryConflictReason::Ledger(error)))?;
        let marker_path = txn.marker();
        let marker = match txn.read_marker(workspace).map_err(self.host(&marker_path))? {
            Read::Unexpected => return Err(unexpected(&marker_path)),
            marker => marker,
        };
        let plan_path = txn.plan();
        let plan = match txn.read_plan(workspace).map_err(self.host(&plan_path))? {
            Read::Unexpected => return Err(unexpected(&plan_path)),
            Read::Valid((plan, _)) if plan.transaction != transaction => {
                return Err(self.conflict(&plan_path, RecoveryConflictReason::Plan { source: None }));
            }
            plan => plan,
        };
        let plan_digest = match &plan {
            Read::Valid((_, digest)) => Some(*digest),
            _ => None,
        };
        let journal_path = txn.journal();
        let journal = match txn.read_journal(workspace).map_err(self.host(&journal_path))? {
            Read::Unexpected => return Err(unexpected(&journal_path)),
            Read::Invalid(error) => {
                return Err(self.conflict(&journal_path, RecoveryConflictReason::Journal { source: Some(error) }));
            }
            Read::Valid(journal)
                if journal.transaction != transaction || plan_digest.is_some_and(|digest| digest != journal.plan) =>
            {
                return Err(self.conflict(&journal_path, RecoveryConflictReason::Journal { source: None }));
            }
            Read::Valid(journal) => Some(journal),
            Read::Absent => None,
        };
        let marker_valid = match marker {
            Read::Valid(marker) => {
                if marker.transaction != transaction || plan_digest.is_some_and(|digest| digest != marker.plan) {
                    return Err(self.conflict(&marker_path, RecoveryConflictReason::Marker { source: None }));
                }
                true
            }
            Read::Invalid(error) if state == Some(TransactionState::Committed) => {
                return Err(self.conflict(&marker_path, RecoveryConflictReason::Marker { source: Some(error) }));
            }
            // A marker that does not decode was never synced: the crash came
            // while it was being written.
            Read::Invalid(_) | Read::Absent | Read::Unexpected => false,
        };
        Ok(Found { state, marker_valid, plan, journal })
    }

    /// Remove the transaction directory and report `outcome`.
    fn finish(&self, outcome: Outcome) -> Result<Resolved, CommitError> {
        let workspace = &*self.committer.workspace;
        match self.txn.remove(workspace, || check(self.faults, FaultPoint::QuarantineRemoved)) {
            Ok(()) => Ok(Ok(outcome)),
            Err(CommitError::Host { path, source, .. }) => {
                Ok(Err(self.conflict(&path, RecoveryConflictReason::Host(source))))
            }
            Err(other) => Err(other),
        }
    }

    fn ledger_conflict(&self, error: LedgerError) -> RecoveryConflict {
        self.conflict(&self.txn.root, RecoveryConflictReason::Ledger(error))
    }

    fn plan_conflict(&self, plan: Read<(Plan, PlanDigest)>) -> RecoveryConflict {
        let source = match plan {
            Read::Invalid(error) => Some(error),
            _ => None,
        };
        self.conflict(&self.txn.plan(), RecoveryConflictReason::Plan { source })
    }

    fn disagrees(&self, state: Option<TransactionState>) -> RecoveryConflict {
        self.conflict(&self.txn.root, RecoveryConflictReason::LedgerDisagrees { state })
    }

    /// The marker is durable: verify the after state, record Committed, clean up.
    fn roll_forward(&self, found: Found) -> Result<Resolved, CommitError> {
        let state = found.state;
        match state {
            Some(TransactionState::Committed) => return self.finish(Outcome::Cleaned),
            None | Some(TransactionState::Committing | TransactionState::RecoveryRequired) => {}
            Some(_) => return Ok(Err(self.disagrees(state))),
        }
        let Read::Valid((plan, _)) = found.plan else {
            // Cleanup removes the plan only after the ledger holds Committed;
            // without a ledger the marker is the record.
            return if state.is_none() {
                self.finish(Outcome::Cleaned)
            } else {
                Ok(Err(self.plan_conflict(found.plan)))
            };
        };
        let installed = found
            .journal
            .as_ref()
            .map(|journal| apply::installed_identities(&plan, &intents(journal, plan.operations.len()).1))
            .unwrap_or_default();
        match apply::verify_after(&self.committer.view(), &plan, &installed) {
            Ok(None) => {}
            Ok(Some(path)) => {
                return Ok(Err(self.conflict(&path, RecoveryConflictReason::StateMismatch { after: true })));
            }
            Err(error) => return Ok(Err(self.conflict(&self.txn.root, from_commit_error(error)))),
        }
        if state.is_some()
            && let Err(error) = self.ledger.committed(self.transaction)
        {
            return Ok(Err(self.ledger_conflict(error)));
        }
        self.finish(Outcome::RolledForward)
    }

    /// No marker: undo every journaled operation that was applied, verify
    /// what was restored, record Failed, clean up.
    fn roll_back(&self, found: Found, limit: Option<usize>) -> Result<Resolved, CommitError> {
        let state = found.state;
        if state == Some(TransactionState::Committed) {
            // Cleanup of a committed transaction removes the journal and the
            // plan before the marker; anything else contradicts the ledger.
            let leftover = found.journal.is_none() && matches!(found.plan, Read::Absent);
            return if leftover { self.finish(Outcome::Cleaned) } else { Ok(Err(self.disagrees(state))) };
        }
        let open = matches!(
            state,
            Some(TransactionState::Revalidating | TransactionState::Committing | TransactionState::RecoveryRequired)
        );
        let (intended, witnesses) = match &found.journal {
            Some(journal) => intents(journal, limit.unwrap_or(usize::MAX)),
            None => (Vec::new(), Vec::new()),
        };
        if intended.is_empty() {
            // No operation was ever allowed to run: the workspace is untouched.
            if open && let Err(error) = self.ledger.failed(self.transaction) {
                return Ok(Err(self.ledger_conflict(error)));
            }
            return self.finish(if open { Outcome::RolledBack } else { Outcome::Cleaned });
        }
        let Read::Valid((plan, _)) = found.plan else { return Ok(Err(self.plan_conflict(found.plan))) };
        if intended.iter().any(|index| *index >= plan.operations.len()) {
            return Ok(Err(self.conflict(&self.txn.journal(), RecoveryConflictReason::Journal { source: None })));
        }
        if state == Some(TransactionState::Committing)
            && let Err(error) = self.ledger.recovery_required(self.transaction)
        {
            return Ok(Err(self.ledger_conflict(error)));
        }
        let done =
            found.journal.as_ref().map(|journal| done_witnesses(journal, plan.operations.len())).unwrap_or_default();
        let mut touched: Vec<usize> = Vec::new();
        for &index in intended.iter().rev() {
            match self.committer.undo(self.txn, &plan, index, witnesses[index], done.get(index).copied().flatten()) {
                Ok(Undo::Undone) => {
                    touched.push(index);
                    check(self.faults, FaultPoint::Undone(index as u32))?;
                }
                Ok(Undo::NotApplied) => {}
                Err(reason) => {
                    let path = &plan.entries[plan.operations[index].entry as usize].path;
                    return Ok(Err(self.conflict(path, reason)));
                }
            }
        }
        let view = self.committer.view();
        for entry_index in touched_entries(&plan, &touched) {
            let entry = &plan.entries[entry_index];
            match apply::holds(&view, &entry.path, entry.before.as_ref(), None) {
                Ok(true) => {}
                Ok(false) => {
                    return Ok(Err(self.conflict(&entry.path, RecoveryConflictReason::StateMismatch { after: false })));
                }
                Err(error) => return Ok(Err(self.conflict(&entry.path, from_commit_error(error)))),
            }
        }
        if open && let Err(error) = self.ledger.failed(self.transaction) {
            return Ok(Err(self.ledger_conflict(error)));
        }
        self.finish(if open || !touched.is_empty() { Outcome::RolledBack } else { Outcome::Cleaned })
    }
}

impl Committer {
    /// Undo operation `index` if it was applied (see the module docs).
    fn undo(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        index: usize,
        witness: u64,
        done: Option<u64>,
    ) -> Result<Undo, RecoveryConflictReason> {
        let operation = plan.operations[index];
        let entry = &plan.entries[operation.entry as usize];
        let path = &entry.path;
        let ws = &*self.workspace;
        let ambiguous =
            || RecoveryConflictReason::Ambiguous { operation: index as u32, action: operation.action.name() };
        let at_path = observe(ws, path)?;
        match operation.action {
            Action::Quarantine => {
                let slot = txn.quarantine_slot(index);
                let Some(quarantined) = internal(ws, &slot)? else {
                    // Never moved, or moved back: nothing of ours to restore.
                    return Ok(Undo::NotApplied);
                };
                if (witness != 0 && quarantined.identity.ino != witness) || at_path.is_some() {
                    return Err(ambiguous());
                }
                ws.rename_noreplace(&slot, path).map_err(RecoveryConflictReason::Host)?;
                Ok(Undo::Undone)
            }
            Action::Install => {
                let slot = txn.stage_slot(index);
                if internal(ws, &slot)?.is_some_and(|staged| staged.identity.ino == witness) {
                    return Ok(Undo::NotApplied);
                }
                let Some(stat) = at_path.filter(|stat| stat.identity.ino == witness) else { return Err(ambiguous()) };
                // The installed node must still hold the new content: a node
                // edited since is someone's work and is not moved away.
                let unchanged = apply::holds(&self.view(), path, entry.after.as_ref(), Some(stat.identity.ino))
                    .map_err(from_commit_error)?;
                if !unchanged {
                    return Err(ambiguous());
                }
                ws.rename_noreplace(path, &slot).map_err(RecoveryConflictReason::Host)?;
                Ok(Undo::Undone)
            }
            Action::CreateDir { .. } => match at_path {
                Some(stat) if stat.kind == HostKind::Directory => {
                    if done.is_some_and(|inode| inode != stat.identity.ino) {
                        return Err(ambiguous());
                    }
                    match ws.remove_dir(path) {
                        Ok(()) => Ok(Undo::Undone),
                        Err(HostError::DirectoryNotEmpty { .. }) => Err(ambiguous()),
                        Err(error) => Err(RecoveryConflictReason::Host(error)),
                    }
                }
                // Creating fails on an existing name: a non-directory here
                // means the directory was never made.
                _ => Ok(Undo::NotApplied),
            },
            Action::SetDirMode { before, after } | Action::SetFileMode { before, after } => {
                let kind = if matches!(operation.action, Action::SetDirMode { .. }) {
                    HostKind::Directory
                } else {
                    HostKind::File
                };
                let stat = match at_path {
                    Some(stat) if stat.kind == kind && (witness == 0 || stat.identity.ino == witness) => stat,
                    // A directory this transaction creates, not made yet.
                    _ if witness == 0 => return Ok(Undo::NotApplied),
                    _ => return Err(ambiguous()),
                };
                if stat.mode == after && before != after {
                    ws.set_mode(path, before).map_err(RecoveryConflictReason::Host)?;
                    Ok(Undo::Undone)
                } else if stat.mode == before {
                    Ok(Undo::NotApplied)
                } else {
                    Err(ambiguous())
                }
            }
        }
    }
}

/// Ask the injector; a crash is [`CommitError::FaultInjected`].
pub(crate) fn check(faults: &dyn FaultInjector, point: FaultPoint) -> Result<(), CommitError> {
    if faults.crash_at(point) { Err(CommitError::FaultInjected(point)) } else { Ok(()) }
}

/// `lstat` a workspace path: `None` when absent or below a non-directory.
fn observe(workspace: &vsh_host::CapDir, path: &VPath) -> Result<Option<HostStat>, RecoveryConflictReason> {
    match workspace.lstat(path) {
        Ok(stat) => Ok(stat),
        Err(HostError::SymlinkInPath { .. } | HostError::NotADirectory { .. }) => Ok(None),
        Err(error) => Err(RecoveryConflictReason::Host(error)),
    }
}

/// `lstat` a path in vsh's internal state, refusing a symlink in its way.
fn internal(workspace: &vsh_host::CapDir, path: &VPath) -> Result<Option<HostStat>, RecoveryConflictReason> {
    match workspace.lstat(path) {
        Ok(stat) => Ok(stat),
        Err(HostError::SymlinkInPath { .. } | HostError::NotADirectory { .. }) => {
            Err(RecoveryConflictReason::UnexpectedEntry { kind: Some(HostKind::Symlink) })
        }
        Err(error) => Err(RecoveryConflictReason::Host(error)),
    }
}

/// The operations with an intent below `limit`, ascending, and each
/// operation's intent witness (indexed by operation; 0 when none).
fn intents(journal: &Journal, limit: usize) -> (Vec<usize>, Vec<u64>) {
    let mut witnesses: Vec<u64> = Vec::new();
    let mut intended: Vec<usize> = Vec::new();
    for record in &journal.records {
        let index = record.operation as usize;
        if record.kind != RecordKind::Intent || index >= limit {
            continue;
        }
        if witnesses.len() <= index {
            witnesses.resize(index + 1, 0);
        }
        witnesses[index] = record.witness;
        intended.push(index);
    }
    intended.sort_unstable();
    intended.dedup();
    (intended, witnesses)
}

/// Each operation's done witness, when journaled (indexed by operation).
fn done_witnesses(journal: &Journal, operations: usize) -> Vec<Option<u64>> {
    let mut done = vec![None; operations];
    for record in &journal.records {
        if record.kind == RecordKind::Done
            && let Some(slot) = done.get_mut(record.operation as usize)
        {
            *slot = Some(record.witness);
        }
    }
    done
}

/// The diff entries the operations `touched` changed: each one's entry, and
/// for a quarantined directory every entry below it.
fn touched_entries(plan: &Plan, touched: &[usize]) -> Vec<usize> {
    let mut entries: Vec<usize> = Vec::new();
    for &index in touched {
        let operation = plan.operations[index];
        let entry = operation.entry as usize;
        entries.push(entry);
        let root = &plan.entries[entry];
        if operation.action == Action::Quarantine && root.before.is_some_and(|state| state.kind == NodeKind::Directory)
        {
            entries.extend(
                plan.entries
                    .iter()
                    .enumerate()
                    .filter(|(_, other)| other.path.is_strictly_within(&root.path))
                    .map(|(other, _)| other),
            );
        }
    }
    entries.sort_unstable();
    entries.dedup();
    entries
}

fn from_commit_error(error: CommitError) -> RecoveryConflictReason {
    match error {
        CommitError::Host { source, .. } => RecoveryConflictReason::Host(source),
        _ => RecoveryConflictReason::StateMismatch { after: false },
    }
}
