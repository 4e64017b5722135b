//! Recovery: finish or undo every transaction directory an interrupted commit
//! left behind, under the exclusive commit lock.
//!
//! For each `txn/<transaction hex>/`, in name order:
//!
//! - **A valid completion marker**, or a ledger that says Committed (a
//!   ledger that is the commit point writes no marker): the commit was
//!   applied, synced and verified before either was written. Roll forward:
//!   move the ledger to Committed, clean up (paths someone changed since are
//!   reported, never touched).
//! - **A valid settled record**: an earlier rollback finished its pass; only
//!   its ledger step and cleanup may be left. Nothing is undone twice.
//! - **Neither**: roll back. First the evidence is checked against the
//!   journal: an operation without a journaled intent must show no sign of
//!   having been applied (no old node at `quarantine.<i>`, no new node at its
//!   path), and a ledger in Committing needs a journal; a journal that
//!   contradicts the evidence is a conflict, never read as "nothing ran".
//!   Then every operation with a journaled intent is undone if it was
//!   applied, in reverse order, deciding from the filesystem:
//!
//!   | operation | applied when | undo |
//!   |---|---|---|
//!   | quarantine | `quarantine.<i>` exists (the witness inode) | rename it back (the path must be free) |
//!   | install | `stage.<i>` is gone and the path holds the witness inode with the new content | rename it back to `stage.<i>` |
//!   | create dir | a directory is at the path (the done witness, when journaled) | remove it if empty |
//!   | set mode | the witness node has the after mode | set the before mode |
//!
//!   An operation someone else got in the way of (the installed file was
//!   edited, the path of a quarantined node was taken, the new directory
//!   holds their files) is **left** exactly as found, and the pass goes on
//!   with every operation independent of it; the old node of a left
//!   quarantine stays at `quarantine.<i>`. Every path an undone operation
//!   touched must then hold its before state (a path that does not is left
//!   too). The pass ends with a durable [`Settled`] record naming what was
//!   left, and only then does cleanup begin.
//!
//!   With nothing left the ledger moves to Failed (the workspace holds the
//!   before state) and the directory is removed, only if no old node is
//!   left aside. With something left the ledger stays in `RecoveryRequired`, only
//!   vsh's own new bytes (`stage.<i>`) are removed, and the transaction is
//!   reported as [`Unresolved`] with every left path and where its old node
//!   is kept, until an operator restores it ([`crate::CommitSession::restore`]).
//!   A settled transaction no longer blocks other commits: recovery will
//!   never act on it again by itself.
//!
//! A ledger record still in Reserved or Revalidating whose transaction has no
//! directory was abandoned before the workspace was touched (reservations are
//! taken under the commit lock, so its holder is gone): it moves to Failed.
//! One in Committing or `RecoveryRequired` without a directory has lost its
//! evidence: it is reported as unresolved.
//!
//! Anything else that cannot be decided (a corrupt or contradicted record, a
//! symlink or file planted where vsh keeps a directory, a host error) is a
//! [`RecoveryConflict`]: that transaction is left untouched for an operator,
//! and no commit runs until it is resolved, because recovery still has work
//! to do there.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use vsh_host::{HostError, HostKind, HostStat};
use vsh_types::{NodeKind, TransactionId, TransactionState, VPath};

use crate::Committer;
use crate::apply;
use crate::error::CommitError;
use crate::fault::{FaultInjector, FaultPoint};
use crate::format::{Action, FormatError, Journal, Left, LeftReason, Plan, PlanDigest, RecordKind, Settled};
use crate::ledger::{CommitLedger, LedgerError};
use crate::txndir::{Cleanup, Read, TXN_DIR, TxnDir};

/// What [`crate::CommitSession::recover`] did.
#[derive(Debug, Default)]
pub struct RecoveryReport {
    /// Transactions found complete (marker durable) and finished: Committed.
    pub rolled_forward: Vec<TransactionId>,
    /// Transactions undone to their before state, or abandoned before they
    /// touched the workspace: Failed.
    pub rolled_back: Vec<TransactionId>,
    /// Directories of transactions already finished (or never started) that
    /// only needed removing.
    pub cleaned: Vec<TransactionId>,
    /// Rollbacks settled as far as they safely could: what is left needs an
    /// operator, but recovery will not act on it again, so commits go on.
    pub unresolved: Vec<Unresolved>,
    /// Commits whose record lost how they ended (nothing of them kept),
    /// settled by the workspace holding every change they made: Committed
    /// (see [`crate::CommitSession::settle`]; the caller settles them, with
    /// their diffs, which recovery does not have).
    pub settled_committed: Vec<TransactionId>,
    /// Such commits settled by the workspace holding none of their changes:
    /// Failed.
    pub settled_failed: Vec<TransactionId>,
    /// Of `rolled_back`, the commits killed before they applied anything
    /// whose ledger gave the work back to commit again (`AutoApproved` or
    /// `Approved`, see [`CommitLedger::released`]).
    pub released: Vec<TransactionId>,
    /// Paths of rolled-forward transactions that someone changed after the
    /// commit point; theirs, and left alone.
    pub changed_since_commit: Vec<(TransactionId, VPath)>,
    /// Old nodes of rolled-forward transactions that someone wrote to after
    /// revalidation: kept, not deleted.
    pub kept: Vec<KeptNode>,
    /// What could not be decided; each is left untouched and blocks commits.
    pub conflicts: Vec<RecoveryConflict>,
    /// How many paths the diff of each rolled-forward or rolled-back
    /// transaction changes (or, rolled back, would have changed), from its
    /// plan; a transaction abandoned before its plan was written has none.
    pub paths: Vec<(TransactionId, usize)>,
}

impl RecoveryReport {
    /// How many paths `transaction`'s diff changes, when recovery read its plan.
    pub fn paths_of(&self, transaction: TransactionId) -> Option<usize> {
        self.paths.iter().find(|(id, _)| *id == transaction).map(|(_, count)| *count)
    }

    /// Whether commits may run: no conflict blocks them.
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
    }

    /// Whether an operator has something to look at.
    pub fn needs_attention(&self) -> bool {
        !self.conflicts.is_empty() || !self.unresolved.is_empty()
    }

    /// Whether there was nothing to recover at all.
    pub fn is_empty(&self) -> bool {
        self.rolled_forward.is_empty()
            && self.rolled_back.is_empty()
            && self.cleaned.is_empty()
            && self.changed_since_commit.is_empty()
            && self.kept.is_empty()
            && !self.needs_attention()
    }
}

/// A transaction whose rollback left something for an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The transaction.
    pub transaction: TransactionId,
    /// Its commit directory (which holds the evidence), relative to the
    /// workspace; `None` when it has none.
    pub directory: Option<VPath>,
    /// The ledger's state (`RecoveryRequired`, or Committing for a record whose
    /// directory is gone).
    pub state: Option<TransactionState>,
    /// Every operation left as found; empty when the directory is gone and
    /// nothing can be told.
    pub paths: Vec<LeftPath>,
}

/// An old node a committed transaction replaced or deleted, which someone
/// wrote to after revalidation checked it: moved aside instead of deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptNode {
    /// The transaction.
    pub transaction: TransactionId,
    /// The workspace path the node had.
    pub path: VPath,
    /// Where it is now, relative to the workspace.
    pub kept: VPath,
}

/// One operation a rollback left as it found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftPath {
    /// The workspace path.
    pub path: VPath,
    /// The operation's index in the plan.
    pub operation: u32,
    /// Its action's name.
    pub action: &'static str,
    /// Why it was left.
    pub reason: LeftReason,
    /// Where the path's old node is kept, relative to the workspace (for a
    /// left quarantine: `quarantine.<i>` in the commit directory).
    pub kept: Option<VPath>,
}

impl fmt::Display for LeftPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.path, self.action, self.reason.name())?;
        if let Some(kept) = &self.kept {
            write!(f, "; the old node is kept at {kept}")?;
        }
        Ok(())
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

/// What an unexpected entry is, for people.
fn entry_kind(kind: Option<HostKind>) -> &'static str {
    match kind {
        Some(HostKind::File) => "a regular file",
        Some(HostKind::Directory) => "a directory",
        Some(HostKind::Symlink) => "a symlink",
        Some(HostKind::Other) => "a FIFO, socket or device",
        None => "an entry of a kind that could not be told",
    }
}

/// Why recovery could not decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoveryConflictReason {
    /// Not what vsh keeps there: a symlink, a file where a directory belongs
    /// (or the reverse), or a name vsh never writes. It was not followed.
    #[error(
        "unexpected entry in vsh's internal state ({}); not followed: remove it or move it out of vsh's \
         runtime directory to let commits go on",
        entry_kind(*kind)
    )]
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
    /// The journal is missing or lists fewer operations than the evidence
    /// shows were applied (an old node at `quarantine.<i>`, a new node at its
    /// path, a ledger in Committing). Nothing was deleted.
    #[error("the journal is missing or contradicted: operation {operation:?} shows signs of having been applied")]
    JournalContradicted {
        /// The operation whose effect was found (`None`: the ledger's state
        /// needs a journal that is not there).
        operation: Option<u32>,
    },
    /// The completion marker or settled record is corrupt or names another plan.
    #[error("completion marker or settled record is corrupt or names another plan")]
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
    /// A host operation failed.
    #[error("host operation failed")]
    Host(#[source] HostError),
}

/// How one transaction directory was resolved.
pub(crate) enum Outcome {
    RolledForward { changed: Vec<VPath>, kept: Vec<KeptNode> },
    RolledBack,
    Cleaned,
    Unresolved(Unresolved),
}

pub(crate) type Resolved = Result<Outcome, RecoveryConflict>;

/// What an undo found.
enum Undo {
    /// It was applied and is undone now.
    Undone,
    /// It was never applied (or was undone before).
    NotApplied,
    /// Someone else's change is in the way: leave it as it is.
    Left,
}

/// The ledger states of a commit that has begun and not ended.
const OPEN: [TransactionState; 4] = [
    TransactionState::Reserved,
    TransactionState::Revalidating,
    TransactionState::Committing,
    TransactionState::RecoveryRequired,
];

impl Committer {
    pub(crate) fn txn_root(&self) -> VPath {
        self.runtime_dir.child(TXN_DIR).expect("a valid constant name")
    }

    /// Recovery with the lock held.
    pub(crate) fn recover_locked(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<RecoveryReport, CommitError> {
        self.recover_locked_except(ledger, faults, None)
    }

    /// Recovery with the lock held, treating `current` (a transaction the
    /// caller moved to Revalidating in this session) as live, not abandoned.
    pub(crate) fn recover_locked_except(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
        current: Option<TransactionId>,
    ) -> Result<RecoveryReport, CommitError> {
        let mut report = RecoveryReport::default();
        let mut visited: BTreeSet<TransactionId> = current.into_iter().collect();
        self.recover_directories(ledger, faults, &mut report, &mut visited)?;
        self.recover_orphans(ledger, &visited, &mut report);
        self.sweep_trash();
        Ok(report)
    }

    fn recover_directories(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
        report: &mut RecoveryReport,
        visited: &mut BTreeSet<TransactionId>,
    ) -> Result<(), CommitError> {
        let root = self.txn_root();
        let refuse = |kind| RecoveryConflict {
            transaction: None,
            path: root.clone(),
            reason: RecoveryConflictReason::UnexpectedEntry { kind },
        };
        match self.workspace.lstat(&root) {
            Ok(None) => return Ok(()),
            Ok(Some(stat)) if stat.kind == HostKind::Directory => {}
            Ok(Some(stat)) => {
                report.conflicts.push(refuse(Some(stat.kind)));
                return Ok(());
            }
            Err(HostError::SymlinkInPath { .. } | HostError::NotADirectory { .. }) => {
                report.conflicts.push(refuse(None));
                return Ok(());
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
                let kind =
                    path.as_ref().and_then(|path| self.workspace.lstat(path).ok().flatten()).map(|stat| stat.kind);
                report.conflicts.push(RecoveryConflict {
                    transaction: None,
                    path: path.unwrap_or_else(|| root.clone()),
                    reason: RecoveryConflictReason::UnexpectedEntry { kind },
                });
                continue;
            };
            visited.insert(transaction);
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
            let (resolved, paths) = self.recover_counted(ledger, faults, transaction, &txn, None, None)?;
            if let (Ok(Outcome::RolledForward { .. } | Outcome::RolledBack), Some(paths)) = (&resolved, paths) {
                report.paths.push((transaction, paths));
            }
            match resolved {
                Ok(Outcome::RolledForward { changed, kept }) => {
                    report.rolled_forward.push(transaction);
                    report.changed_since_commit.extend(changed.into_iter().map(|path| (transaction, path)));
                    report.kept.extend(kept);
                }
                Ok(Outcome::RolledBack) => {
                    report.rolled_back.push(transaction);
                    if matches!(
                        ledger.state(transaction),
                        Ok(Some(TransactionState::AutoApproved | TransactionState::Approved))
                    ) {
                        report.released.push(transaction);
                    }
                }
                Ok(Outcome::Cleaned) => report.cleaned.push(transaction),
                Ok(Outcome::Unresolved(unresolved)) => report.unresolved.push(unresolved),
                Err(conflict) => report.conflicts.push(conflict),
            }
        }
        Ok(())
    }

    /// Settle every open ledger record whose transaction has no directory.
    fn recover_orphans(
        &self,
        ledger: &dyn CommitLedger,
        visited: &BTreeSet<TransactionId>,
        report: &mut RecoveryReport,
    ) {
        let open = match ledger.open_transactions() {
            Ok(open) => open,
            Err(error) => {
                report.conflicts.push(RecoveryConflict {
                    transaction: None,
                    path: self.txn_root(),
                    reason: RecoveryConflictReason::Ledger(error),
                });
                return;
            }
        };
        for (transaction, state) in open {
            if visited.contains(&transaction) {
                continue;
            }
            match state {
                // Reservations are taken under the commit lock this recovery
                // holds: the committer that took this one is gone, and it never
                // created a directory, so it never touched the workspace.
                TransactionState::Reserved | TransactionState::Revalidating => match ledger.released(transaction) {
                    Ok(state) => {
                        report.rolled_back.push(transaction);
                        if state != TransactionState::Failed {
                            report.released.push(transaction);
                        }
                    }
                    Err(error) => report.conflicts.push(RecoveryConflict {
                        transaction: Some(transaction),
                        path: self.txn_root(),
                        reason: RecoveryConflictReason::Ledger(error),
                    }),
                },
                _ => report.unresolved.push(Unresolved {
                    transaction,
                    directory: None,
                    state: Some(state),
                    paths: Vec::new(),
                }),
            }
        }
    }

    /// Recover one transaction as the commit's own rollback, which knows
    /// the directories it wrote into ([`Parents`]).
    pub(crate) fn roll_back_in_place(
        &self,
        ledger: &dyn CommitLedger,
        transaction: TransactionId,
        txn: &TxnDir,
        limit: Option<usize>,
        parents: &Parents,
    ) -> Result<Resolved, CommitError> {
        self.recover_counted(ledger, &crate::NoFaults, transaction, txn, limit, Some(parents))
            .map(|(resolved, _)| resolved)
    }

    /// Resolve one transaction directory, and say how many paths the plan it
    /// read changes (none when it read no valid plan). Operations at index
    /// `limit` and beyond are known not to have been applied (a commit
    /// rolling itself back in place says so); recovery passes `None`, and
    /// no `parents` (only the commit's own process knows them).
    ///
    /// The outer error is only [`CommitError::FaultInjected`].
    fn recover_counted(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
        transaction: TransactionId,
        txn: &TxnDir,
        limit: Option<usize>,
        parents: Option<&Parents>,
    ) -> Result<(Resolved, Option<usize>), CommitError> {
        let resolver = Resolver { committer: self, ledger, faults, transaction, txn, parents };
        if let Err(error) = txn.migrate_earlier_layout(&self.workspace, &self.key, transaction) {
            return Ok((Err(resolver.conflict(&txn.root, RecoveryConflictReason::Host(error))), None));
        }
        let found = match resolver.read() {
            Ok(found) => found,
            Err(conflict) => return Ok((Err(conflict), None)),
        };
        let paths = match &found.plan {
            Read::Valid((plan, _)) => Some(plan.entries.len()),
            _ => None,
        };
        let outcome =
            if found.marker_valid { resolver.roll_forward(&found) } else { resolver.roll_back(&found, limit) }?;
        Ok((outcome, paths))
    }
}

/// What a transaction directory holds, read and cross-checked.
pub(crate) struct Found {
    /// The ledger's state.
    pub(crate) state: Option<TransactionState>,
    /// Whether a valid completion marker for this plan is durable.
    marker_valid: bool,
    pub(crate) plan: Read<(Plan, PlanDigest)>,
    pub(crate) journal: Option<Journal>,
    pub(crate) settled: Option<Settled>,
}

/// Resolves one transaction directory.
pub(crate) struct Resolver<'a> {
    pub(crate) committer: &'a Committer,
    pub(crate) ledger: &'a dyn CommitLedger,
    pub(crate) faults: &'a dyn FaultInjector,
    pub(crate) transaction: TransactionId,
    pub(crate) txn: &'a TxnDir,
    /// For a rollback in the commit's own process: the directories it wrote
    /// into, as they were before its first operation ([`Parents`]).
    pub(crate) parents: Option<&'a Parents>,
}

/// The identity of each existing directory a commit's operations write
/// into (the parent of each of its paths), taken before the first
/// operation. A rollback in the same process undoes an operation only
/// through the same directory: one moved away or replaced meanwhile (a
/// rename of a parent while the commit ran) would make what its path shows
/// say nothing of the operation's node, so the operation is left for an
/// operator ([`LeftReason::Moved`]) instead of taken as never applied.
#[derive(Debug, Default)]
pub(crate) struct Parents(BTreeMap<VPath, vsh_host::FileIdentity>);

impl Parents {
    /// The parents of `plan`'s paths as `workspace` holds them now (a parent
    /// the plan creates has none yet, and is judged by its own parent).
    pub(crate) fn of(workspace: &vsh_host::CapDir, plan: &Plan) -> Self {
        let mut parents = BTreeMap::new();
        for entry in &plan.entries {
            let Some(parent) = entry.path.parent().filter(|parent| !parent.is_root()) else { continue };
            if parents.contains_key(&parent) {
                continue;
            }
            if let Ok(Some(stat)) = workspace.lstat(&parent)
                && stat.kind == HostKind::Directory
            {
                parents.insert(parent, stat.identity);
            }
        }
        Self(parents)
    }

    /// Whether the nearest recorded directory above `path` is no longer
    /// the one recorded at its place (moved, replaced, gone).
    fn moved(&self, workspace: &vsh_host::CapDir, path: &VPath) -> bool {
        let Some((dir, identity)) = path.ancestors().into_iter().rev().find_map(|dir| self.0.get_key_value(&dir))
        else {
            return false;
        };
        !matches!(workspace.lstat(dir), Ok(Some(stat)) if stat.kind == HostKind::Directory && stat.identity == *identity)
    }
}

impl Resolver<'_> {
    pub(crate) fn conflict(&self, path: &VPath, reason: RecoveryConflictReason) -> RecoveryConflict {
        RecoveryConflict { transaction: Some(self.transaction), path: path.clone(), reason }
    }

    fn host(&self, path: &VPath) -> impl FnOnce(HostError) -> RecoveryConflict + '_ {
        let path = path.clone();
        move |source| self.conflict(&path, RecoveryConflictReason::Host(source))
    }

    /// Read the ledger state, the marker, the settled record, the plan and
    /// the journal, and check that they belong together.
    pub(crate) fn read(&self) -> Result<Found, RecoveryConflict> {
        let (txn, workspace, transaction, key) =
            (self.txn, &*self.committer.workspace, self.transaction, &self.committer.key);
        let unexpected = |path: &VPath| {
            // What is there, for the operator (not followed: an lstat).
            let kind = workspace.lstat(path).ok().flatten().map(|stat| stat.kind);
            self.conflict(path, RecoveryConflictReason::UnexpectedEntry { kind })
        };
        let state = self
            .ledger
            .state(transaction)
            .map_err(|error| self.conflict(&txn.root, RecoveryConflictReason::Ledger(error)))?;
        // A directory of an earlier layout keeps its nodes where this one
        // never looks: it is left, untouched, for an operator.
        for earlier in txn.earlier_layout() {
            if workspace.lstat(&earlier).map_err(self.host(&earlier))?.is_some() {
                return Err(unexpected(&earlier));
            }
        }
        let marker_path = txn.marker();
        let marker = match txn.read_marker(workspace, key).map_err(self.host(&marker_path))? {
            Read::Unexpected => return Err(unexpected(&marker_path)),
            marker => marker,
        };
        let settled_path = txn.settled();
        let settled = match txn.read_settled(workspace, key).map_err(self.host(&settled_path))? {
            Read::Unexpected => return Err(unexpected(&settled_path)),
            // A settled record that does not decode was never synced: the
            // crash came while it was written, and the rollback pass runs again.
            Read::Invalid(_) | Read::Absent => None,
            Read::Valid(settled) if settled.transaction != transaction => {
                return Err(self.conflict(&settled_path, RecoveryConflictReason::Marker { source: None }));
            }
            Read::Valid(settled) => Some(settled),
        };
        let plan_path = txn.plan();
        let plan = match txn.read_plan(workspace, key).map_err(self.host(&plan_path))? {
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
        if let Some(settled) = &settled
            && plan_digest.is_some_and(|digest| digest != settled.plan)
        {
            return Err(self.conflict(&settled_path, RecoveryConflictReason::Marker { source: None }));
        }
        let journal_path = txn.journal();
        let journal = match txn.read_journal(workspace, key).map_err(self.host(&journal_path))? {
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
                if settled.is_some() {
                    // A commit point and a finished rollback exclude each other.
                    return Err(self.conflict(&settled_path, RecoveryConflictReason::Marker { source: None }));
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
        Ok(Found { state, marker_valid, plan, journal, settled })
    }

    /// Remove what `cleanup` names and report `outcome`.
    fn finish(&self, cleanup: Cleanup, outcome: Outcome) -> Result<Resolved, CommitError> {
        match self.committer.clean(self.txn, cleanup, self.faults) {
            Ok(()) => Ok(Ok(outcome)),
            Err(CommitError::Host { path, source, .. }) => {
                Ok(Err(self.conflict(&path, RecoveryConflictReason::Host(source))))
            }
            Err(other) => Err(other),
        }
    }

    pub(crate) fn ledger_conflict(&self, error: LedgerError) -> RecoveryConflict {
        self.conflict(&self.txn.root, RecoveryConflictReason::Ledger(error))
    }

    fn plan_conflict(&self, plan: &Read<(Plan, PlanDigest)>) -> RecoveryConflict {
        let source = match plan {
            Read::Invalid(error) => Some(error.clone()),
            _ => None,
        };
        self.conflict(&self.txn.plan(), RecoveryConflictReason::Plan { source })
    }

    fn disagrees(&self, state: Option<TransactionState>) -> RecoveryConflict {
        self.conflict(&self.txn.root, RecoveryConflictReason::LedgerDisagrees { state })
    }

    /// The marker is durable: record Committed, clean up. Paths that do not
    /// hold their after state were changed by someone after the commit
    /// point; they are reported and left alone.
    fn roll_forward(&self, found: &Found) -> Result<Resolved, CommitError> {
        let state = found.state;
        // A ledger that is the commit point said Committed, and the crash came
        // before the commit's own cleanup (no marker, plan and journal whole):
        // the commit is finished here, as after a marker.
        let interrupted_at_commit_point = state == Some(TransactionState::Committed)
            && !found.marker_valid
            && found.journal.is_some()
            && matches!(found.plan, Read::Valid(_));
        match state {
            Some(TransactionState::Committed) if !interrupted_at_commit_point => {
                // Only cleanup was left; it still keeps old nodes someone wrote to.
                let kept = match (&found.plan, &found.journal) {
                    (Read::Valid((plan, _)), Some(journal)) => match self.keep(plan, journal) {
                        Ok(kept) => kept,
                        Err(conflict) => return Ok(Err(conflict)),
                    },
                    _ => Vec::new(),
                };
                let outcome = if kept.is_empty() {
                    Outcome::Cleaned
                } else {
                    Outcome::RolledForward { changed: Vec::new(), kept }
                };
                return self.finish(Cleanup::Committed, outcome);
            }
            None
            | Some(TransactionState::Committing | TransactionState::RecoveryRequired | TransactionState::Committed) => {
            }
            Some(_) => return Ok(Err(self.disagrees(state))),
        }
        let Read::Valid((plan, _)) = &found.plan else {
            // Cleanup removes the plan only after the ledger holds Committed;
            // without a ledger the marker is the record.
            return if state.is_none() {
                self.finish(Cleanup::Committed, Outcome::Cleaned)
            } else {
                Ok(Err(self.plan_conflict(&found.plan)))
            };
        };
        let installed = found
            .journal
            .as_ref()
            .map(|journal| apply::installed_identities(plan, &intents(journal, plan.operations.len()).1))
            .unwrap_or_default();
        let changed = match apply::paths_not_after(&self.committer.view(), plan, &installed) {
            Ok(changed) => changed,
            Err(error) => return Ok(Err(self.conflict(&self.txn.root, from_commit_error(error)))),
        };
        if state.is_some_and(|state| state != TransactionState::Committed)
            && let Err(error) = self.ledger.committed(self.transaction)
        {
            return Ok(Err(self.ledger_conflict(error)));
        }
        let kept = match &found.journal {
            Some(journal) => match self.keep(plan, journal) {
                Ok(kept) => kept,
                Err(conflict) => return Ok(Err(conflict)),
            },
            None => Vec::new(),
        };
        self.finish(Cleanup::Committed, Outcome::RolledForward { changed, kept })
    }

    /// Move aside every old node of this committed transaction that someone
    /// wrote to after revalidation.
    fn keep(&self, plan: &Plan, journal: &Journal) -> Result<Vec<KeptNode>, RecoveryConflict> {
        let kept = self
            .committer
            .keep_changed_originals(self.txn, plan, journal)
            .map_err(|error| self.conflict(&self.txn.root, from_commit_error(error)))?;
        Ok(kept.into_iter().map(|(path, kept)| KeptNode { transaction: self.transaction, path, kept }).collect())
    }

    /// The ledger says Committed and no valid marker is there.
    fn committed_without_marker(&self, found: &Found) -> Result<Resolved, CommitError> {
        // A ledger that is the commit point moved to Committed once every
        // operation was applied, durable and verified, and no marker was
        // written: roll forward. The journal of a plan that makes a
        // directory, while it is there (the committed cleanup removes it
        // first, then the plan), must show it: a done record for every
        // operation. A journal without its plan, such a journal short of
        // done records, or a settled rollback contradicts the ledger.
        let done_everything = match (&found.plan, &found.journal) {
            (Read::Valid((plan, _)), Some(journal)) => {
                !crate::journals_done(plan)
                    || done_witnesses(journal, plan.operations.len()).iter().all(Option::is_some)
            }
            (_, None) => true,
            (_, Some(_)) => false,
        };
        if done_everything && found.settled.is_none() {
            self.roll_forward(found)
        } else {
            Ok(Err(self.disagrees(found.state)))
        }
    }

    /// No marker: check the evidence, undo every journaled operation that was
    /// applied, settle, record the outcome, clean up.
    fn roll_back(&self, found: &Found, limit: Option<usize>) -> Result<Resolved, CommitError> {
        let state = found.state;
        if state == Some(TransactionState::Committed) {
            return self.committed_without_marker(found);
        }
        if let Some(settled) = &found.settled {
            let plan = match &found.plan {
                Read::Valid((plan, _)) => Some(plan),
                _ => None,
            };
            return self.finish_settled(state, settled, plan, false);
        }
        let Read::Valid((plan, digest)) = &found.plan else { return self.without_plan(found) };
        let (journaled, witnesses) = match &found.journal {
            Some(journal) => intents(journal, usize::MAX),
            None => (Vec::new(), Vec::new()),
        };
        if journaled.iter().any(|index| *index >= plan.operations.len()) {
            return Ok(Err(self.conflict(&self.txn.journal(), RecoveryConflictReason::Journal { source: None })));
        }
        // Intents are durable before the ledger moves to Committing.
        if journaled.is_empty()
            && matches!(state, Some(TransactionState::Committing | TransactionState::RecoveryRequired))
        {
            return Ok(Err(
                self.conflict(&self.txn.journal(), RecoveryConflictReason::JournalContradicted { operation: None })
            ));
        }
        // No operation is applied before the ledger holds Committing (which it
        // does only after every intent is durable): a transaction the ledger
        // still holds before that point touched nothing in the workspace, even
        // with intents journaled, and whatever differs there now is someone
        // else's. Only an old node in quarantine would say otherwise.
        if matches!(state, Some(TransactionState::Reserved | TransactionState::Revalidating | TransactionState::Stale))
        {
            if let Err(conflict) = self.check_quarantine(plan, &[]) {
                return Ok(Err(conflict));
            }
            let settled = Settled { transaction: self.transaction, plan: *digest, left: Vec::new() };
            return self.settle(state, &settled, plan, false);
        }
        if let Err(conflict) = self.check_evidence(plan, &journaled) {
            return Ok(Err(conflict));
        }
        if state == Some(TransactionState::Committing)
            && let Err(error) = self.ledger.recovery_required(self.transaction)
        {
            return Ok(Err(self.ledger_conflict(error)));
        }
        let done =
            found.journal.as_ref().map(|journal| done_witnesses(journal, plan.operations.len())).unwrap_or_default();
        let applicable = journaled.iter().copied().filter(|index| limit.is_none_or(|limit| *index < limit));
        let mut touched: Vec<usize> = Vec::new();
        let mut left: Vec<Left> = Vec::new();
        let moved = |index: usize| {
            let path = &plan.entries[plan.operations[index].entry as usize].path;
            self.parents.is_some_and(|parents| parents.moved(&self.committer.workspace, path))
        };
        for index in applicable.rev() {
            if moved(index) {
                left.push(Left { operation: index as u32, reason: LeftReason::Moved });
                continue;
            }
            match self.committer.undo(self.txn, plan, index, witnesses[index], done.get(index).copied().flatten()) {
                Ok(Undo::Undone) => {
                    touched.push(index);
                    check(self.faults, FaultPoint::Undone(index as u32))?;
                }
                Ok(Undo::NotApplied) => {}
                Ok(Undo::Left) => left.push(Left { operation: index as u32, reason: LeftReason::Ambiguous }),
                Err(reason) => {
                    let path = &plan.entries[plan.operations[index].entry as usize].path;
                    return Ok(Err(self.conflict(path, reason)));
                }
            }
        }
        // A directory moved while the undo pass ran may have taken an undo
        // somewhere else: what went through it is left too.
        for &index in &touched {
            if moved(index) {
                left.push(Left { operation: index as u32, reason: LeftReason::Moved });
            }
        }
        if let Err(conflict) = self.check_quarantine(plan, &left) {
            return Ok(Err(conflict));
        }
        if let Err(conflict) = self.verify_undone(plan, &touched, &mut left) {
            return Ok(Err(conflict));
        }
        left.sort_by_key(|left| left.operation);
        left.dedup_by_key(|left| left.operation);
        let settled = Settled { transaction: self.transaction, plan: *digest, left };
        self.settle(state, &settled, plan, !touched.is_empty())
    }

    /// After the undo pass: every entry an undone operation touched must
    /// hold its before state (one that does not is left,
    /// [`LeftReason::StateMismatch`]), except beneath what is left already.
    fn verify_undone(&self, plan: &Plan, touched: &[usize], left: &mut Vec<Left>) -> Result<(), RecoveryConflict> {
        let view = self.committer.view();
        let left_paths: Vec<VPath> = left
            .iter()
            .map(|left| plan.entries[plan.operations[left.operation as usize].entry as usize].path.clone())
            .collect();
        for &index in touched {
            for entry_index in touched_entries(plan, &[index]) {
                let entry = &plan.entries[entry_index];
                if left_paths.iter().any(|path| entry.path.is_within(path)) {
                    continue;
                }
                match apply::holds(&view, &entry.path, entry.before.as_ref(), None) {
                    Ok(true) => {}
                    Ok(false) => {
                        left.push(Left { operation: index as u32, reason: LeftReason::StateMismatch });
                        break;
                    }
                    Err(error) => return Err(self.conflict(&entry.path, from_commit_error(error))),
                }
            }
        }
        Ok(())
    }

    /// Make the rollback's outcome durable (the settled record), so that a
    /// crash during what follows repeats only that, then record it and clean up.
    fn settle(
        &self,
        state: Option<TransactionState>,
        settled: &Settled,
        plan: &Plan,
        undid: bool,
    ) -> Result<Resolved, CommitError> {
        // What the undo pass moved must be durable before the record that says
        // it is done (the ledger may be on another filesystem).
        if undid && let Err(error) = self.committer.workspace.syncfs() {
            return Ok(Err(self.conflict(&self.txn.root, RecoveryConflictReason::Host(error))));
        }
        if let Err(error) = self.txn.write_settled(&self.committer.workspace, settled, &self.committer.key) {
            return Ok(Err(self.conflict(&self.txn.settled(), RecoveryConflictReason::Host(error))));
        }
        check(self.faults, FaultPoint::Settled)?;
        let state =
            if state == Some(TransactionState::Committing) { Some(TransactionState::RecoveryRequired) } else { state };
        self.finish_settled(state, settled, Some(plan), undid)
    }

    /// Every operation without a journaled intent must show no sign of having
    /// been applied: otherwise the journal is contradicted by the evidence.
    fn check_evidence(&self, plan: &Plan, journaled: &[usize]) -> Result<(), RecoveryConflict> {
        let journaled: BTreeSet<usize> = journaled.iter().copied().collect();
        for index in (0..plan.operations.len()).filter(|index| !journaled.contains(index)) {
            match self.committer.shows_applied(self.txn, plan, index) {
                Ok(false) => {}
                Ok(true) => {
                    let operation = Some(index as u32);
                    return Err(
                        self.conflict(&self.txn.journal(), RecoveryConflictReason::JournalContradicted { operation })
                    );
                }
                Err(reason) => {
                    let path = &plan.entries[plan.operations[index].entry as usize].path;
                    return Err(self.conflict(path, reason));
                }
            }
        }
        Ok(())
    }

    /// After the undo pass, every old node still aside (`quarantine.<i>`) must be one
    /// that a left quarantine keeps.
    fn check_quarantine(&self, plan: &Plan, left: &[Left]) -> Result<(), RecoveryConflict> {
        let kept: BTreeSet<usize> = left
            .iter()
            .map(|left| left.operation as usize)
            .filter(|index| plan.operations[*index].action == Action::Quarantine)
            .collect();
        let slots = self
            .txn
            .quarantined(&self.committer.workspace)
            .map_err(|error| self.conflict(&self.txn.root, RecoveryConflictReason::Host(error)))?;
        for (path, slot) in slots {
            match slot {
                Some(index) if kept.contains(&index) => {}
                Some(index) => {
                    let operation = Some(index as u32);
                    return Err(self.conflict(&path, RecoveryConflictReason::JournalContradicted { operation }));
                }
                None => return Err(self.conflict(&path, RecoveryConflictReason::UnexpectedEntry { kind: None })),
            }
        }
        Ok(())
    }

    /// The rollback pass is over (now or before a crash): record the outcome
    /// and clean up what may go.
    fn finish_settled(
        &self,
        state: Option<TransactionState>,
        settled: &Settled,
        plan: Option<&Plan>,
        undid: bool,
    ) -> Result<Resolved, CommitError> {
        let open = state.is_some_and(|state| OPEN.contains(&state));
        if state == Some(TransactionState::Failed) && !settled.left.is_empty() {
            // Only an operator's restore fails a rollback that left paths, and
            // only once it has put every one back: its cleanup is all that remains.
            return self.finish(Cleanup::Restored, Outcome::Cleaned);
        }
        if settled.left.is_empty() {
            if open && let Err(error) = self.fail_or_release(state) {
                return Ok(Err(self.ledger_conflict(error)));
            }
            let outcome = if open || undid { Outcome::RolledBack } else { Outcome::Cleaned };
            return self.finish(Cleanup::Restored, outcome);
        }
        let Some(plan) = plan else {
            // The plan is kept with anything left; without it nothing can be named.
            return Ok(Err(self.conflict(&self.txn.plan(), RecoveryConflictReason::Plan { source: None })));
        };
        if state == Some(TransactionState::Committing)
            && let Err(error) = self.ledger.recovery_required(self.transaction)
        {
            return Ok(Err(self.ledger_conflict(error)));
        }
        let unresolved = Unresolved {
            transaction: self.transaction,
            directory: Some(self.txn.root.clone()),
            state: if state == Some(TransactionState::Committing) {
                Some(TransactionState::RecoveryRequired)
            } else {
                state
            },
            paths: left_paths(self.txn, plan, &settled.left),
        };
        self.finish(Cleanup::KeepEvidence, Outcome::Unresolved(unresolved))
    }

    /// The end of a rollback that leaves the before state: a commit killed
    /// before it applied anything (its record still `Reserved` or
    /// `Revalidating`) is released, to commit again where the ledger allows
    /// ([`CommitLedger::released`], ux66 F4); any other fails.
    fn fail_or_release(&self, state: Option<TransactionState>) -> Result<(), crate::ledger::LedgerError> {
        match state {
            Some(TransactionState::Reserved | TransactionState::Revalidating) => {
                self.ledger.released(self.transaction).map(drop)
            }
            _ => self.ledger.failed(self.transaction),
        }
    }

    /// No valid plan: nothing can have been journaled or staged (the plan is
    /// synced first), so anything else in the directory is unexplained.
    fn without_plan(&self, found: &Found) -> Result<Resolved, CommitError> {
        if found.journal.as_ref().is_some_and(|journal| !journal.records.is_empty())
            || matches!(found.state, Some(TransactionState::Committing | TransactionState::RecoveryRequired))
        {
            return Ok(Err(self.plan_conflict(&found.plan)));
        }
        match self.txn.holds_nodes(&self.committer.workspace) {
            Ok(false) => {}
            Ok(true) => return Ok(Err(self.plan_conflict(&found.plan))),
            Err(error) => return Ok(Err(self.conflict(&self.txn.root, RecoveryConflictReason::Host(error)))),
        }
        let open = found.state.is_some_and(|state| OPEN.contains(&state));
        if open && let Err(error) = self.fail_or_release(found.state) {
            return Ok(Err(self.ledger_conflict(error)));
        }
        self.finish(Cleanup::Restored, if open { Outcome::RolledBack } else { Outcome::Cleaned })
    }
}

/// The operations `left` names, as paths with where each old node is kept.
pub(crate) fn left_paths(txn: &TxnDir, plan: &Plan, left: &[Left]) -> Vec<LeftPath> {
    left.iter()
        .filter_map(|left| {
            let operation = plan.operations.get(left.operation as usize)?;
            let entry = plan.entries.get(operation.entry as usize)?;
            let kept = (operation.action == Action::Quarantine).then(|| txn.quarantine_slot(left.operation as usize));
            Some(LeftPath {
                path: entry.path.clone(),
                operation: left.operation,
                action: operation.action.name(),
                reason: left.reason,
                kept,
            })
        })
        .collect()
}

impl Committer {
    /// Undo operation `index` if it was applied (see the module docs). An
    /// operation someone else's change is in the way of is [`Undo::Left`];
    /// the error is a host failure or something planted in vsh's own state.
    fn undo(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        index: usize,
        (witness, stamp): (u64, u64),
        done: Option<u64>,
    ) -> Result<Undo, RecoveryConflictReason> {
        let operation = plan.operations[index];
        let entry = &plan.entries[operation.entry as usize];
        let path = &entry.path;
        let ws = &self.workspace;
        let at_path = observe(ws, path)?;
        match operation.action {
            Action::Quarantine => {
                let slot = txn.quarantine_slot(index);
                let Some(quarantined) = internal(ws, &slot)? else {
                    // Never moved, or moved back: nothing of ours to restore.
                    return Ok(Undo::NotApplied);
                };
                if witness != 0 && quarantined.identity.ino != witness {
                    // Not the node this transaction moved there: keep it, touch nothing.
                    return Ok(Undo::Left);
                }
                if at_path.is_some() {
                    // Someone took the path meanwhile: their node stays, ours is kept.
                    return Ok(Undo::Left);
                }
                match ws.rename_noreplace(&slot, path) {
                    Ok(()) => Ok(Undo::Undone),
                    // Someone took the path, or its parent is gone or became
                    // something else: their change, left as it is.
                    Err(
                        HostError::AlreadyExists { .. }
                        | HostError::NotFound { .. }
                        | HostError::NotADirectory { .. }
                        | HostError::SymlinkInPath { .. },
                    ) => Ok(Undo::Left),
                    Err(error) => Err(RecoveryConflictReason::Host(error)),
                }
            }
            Action::Install => {
                let slot = txn.stage_slot(index);
                // Ours by inode number and generation: a number alone may be
                // a new file's that took it after ours was unlinked.
                let ours = apply::Installed { ino: witness, generation: stamp };
                if let Some(staged) = internal(ws, &slot)? {
                    if ours.is(ws, &slot, staged.identity.ino).map_err(from_commit_error)? {
                        return Ok(Undo::NotApplied);
                    }
                    // Not our staged node: someone's, which an undo interrupted
                    // in the instant between telling the node at the path was
                    // ours and moving it here carried in. It goes back, never
                    // to be cleaned up with the stage.
                    return give_back(ws, &slot, path);
                }
                // The intent was journaled after staging, so the node left
                // `stage.<i>`: it was installed. Someone has since replaced it at
                // the path (their node stays) or removed it (nothing of ours
                // is left to move back; the old node can be restored).
                let Some(stat) = at_path else { return Ok(Undo::NotApplied) };
                // The inode number alone could be a new file that took the
                // number of ours after someone deleted it: the generation
                // (the intent's stamp) tells.
                if !ours.is(ws, path, stat.identity.ino).map_err(from_commit_error)? {
                    return Ok(Undo::Left);
                }
                // The installed node must still hold the new content: a node
                // edited since is someone's work and is not moved away.
                let unchanged =
                    apply::holds(&self.view(), path, entry.after.as_ref(), Some(ours)).map_err(from_commit_error)?;
                if !unchanged {
                    return Ok(Undo::Left);
                }
                match ws.rename_noreplace(path, &slot) {
                    Ok(()) => {}
                    Err(error) => return Err(RecoveryConflictReason::Host(error)),
                }
                // Someone may have replaced it between the check and the move:
                // what was moved must be ours, or it goes back.
                let moved = internal(ws, &slot)?;
                let is_ours = match moved {
                    Some(moved) => ours.is(ws, &slot, moved.identity.ino).map_err(from_commit_error)?,
                    None => false,
                };
                if is_ours { Ok(Undo::Undone) } else { give_back(ws, &slot, path) }
            }
            Action::CreateDir { .. } => match at_path {
                Some(stat) if stat.kind == HostKind::Directory => {
                    if done.is_some_and(|inode| inode != stat.identity.ino) {
                        // A directory, but not the one this transaction made.
                        return Ok(Undo::Left);
                    }
                    match ws.remove_dir(path) {
                        Ok(()) => Ok(Undo::Undone),
                        Err(HostError::DirectoryNotEmpty { .. }) => Ok(Undo::Left),
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
                    _ => return Ok(Undo::Left),
                };
                if stat.mode == after && before != after {
                    ws.set_mode(path, before).map_err(RecoveryConflictReason::Host)?;
                    Ok(Undo::Undone)
                } else if stat.mode == before {
                    Ok(Undo::NotApplied)
                } else {
                    Ok(Undo::Left)
                }
            }
        }
    }

    /// Whether operation `index`, which has no journaled intent, shows signs
    /// of having been applied: its old node at `quarantine.<i>`, its new node at
    /// the path, its directory made, its mode set.
    fn shows_applied(&self, txn: &TxnDir, plan: &Plan, index: usize) -> Result<bool, RecoveryConflictReason> {
        let operation = plan.operations[index];
        let entry = &plan.entries[operation.entry as usize];
        let ws = &self.workspace;
        Ok(match operation.action {
            Action::Quarantine => internal(ws, &txn.quarantine_slot(index))?.is_some(),
            Action::Install => {
                internal(ws, &txn.stage_slot(index))?.is_none()
                    && apply::holds(&self.view(), &entry.path, entry.after.as_ref(), None).map_err(from_commit_error)?
            }
            Action::CreateDir { .. } => {
                observe(ws, &entry.path)?.is_some_and(|stat| stat.kind == HostKind::Directory)
                    && entry.before.is_none_or(|before| before.kind != NodeKind::Directory)
            }
            Action::SetDirMode { before, after } | Action::SetFileMode { before, after } => {
                before != after && observe(ws, &entry.path)?.is_some_and(|stat| stat.mode == after)
            }
        })
    }
}

/// Ask the injector; a crash is [`CommitError::FaultInjected`].
pub(crate) fn check(faults: &dyn FaultInjector, point: FaultPoint) -> Result<(), CommitError> {
    if faults.crash_at(point) { Err(CommitError::FaultInjected(point)) } else { Ok(()) }
}

/// `lstat` a workspace path: `None` when absent or below a non-directory.
pub(crate) fn observe(workspace: &vsh_host::CapDir, path: &VPath) -> Result<Option<HostStat>, RecoveryConflictReason> {
    match workspace.lstat(path) {
        Ok(stat) => Ok(stat),
        Err(HostError::SymlinkInPath { .. } | HostError::NotADirectory { .. }) => Ok(None),
        Err(error) => Err(RecoveryConflictReason::Host(error)),
    }
}

/// `lstat` a path in vsh's internal state, refusing a symlink in its way.
pub(crate) fn internal(workspace: &vsh_host::CapDir, path: &VPath) -> Result<Option<HostStat>, RecoveryConflictReason> {
    match workspace.lstat(path) {
        Ok(stat) => Ok(stat),
        Err(HostError::SymlinkInPath { .. } | HostError::NotADirectory { .. }) => {
            Err(RecoveryConflictReason::UnexpectedEntry { kind: Some(HostKind::Symlink) })
        }
        Err(error) => Err(RecoveryConflictReason::Host(error)),
    }
}

/// Move someone's node that an undo carried into the stage slot `slot` back
/// to `path`, where it was: it stays theirs ([`Undo::Left`]). When `path` is
/// taken again, nothing is moved and the conflict keeps the transaction's
/// directory (and their node in it) for an operator.
fn give_back(ws: &vsh_host::WritableDir, slot: &VPath, path: &VPath) -> Result<Undo, RecoveryConflictReason> {
    match ws.rename_noreplace(slot, path) {
        Ok(()) => Ok(Undo::Left),
        Err(error) => Err(RecoveryConflictReason::Host(error)),
    }
}

/// The operations with an intent below `limit`, ascending, and each
/// operation's intent witness and stamp (indexed by operation; zeros when none).
pub(crate) fn intents(journal: &Journal, limit: usize) -> (Vec<usize>, Vec<(u64, u64)>) {
    let mut witnesses: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    for record in &journal.records {
        let index = record.operation as usize;
        if record.kind == RecordKind::Intent && index < limit {
            witnesses.insert(index, (record.witness, record.stamp));
        }
    }
    let size = witnesses.keys().next_back().map_or(0, |last| last + 1);
    let mut by_index = vec![(0, 0); size];
    for (index, witness) in &witnesses {
        by_index[*index] = *witness;
    }
    (witnesses.into_keys().collect(), by_index)
}

/// Each operation's done witness, when journaled (indexed by operation).
pub(crate) fn done_witnesses(journal: &Journal, operations: usize) -> Vec<Option<u64>> {
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

pub(crate) fn from_commit_error(error: CommitError) -> RecoveryConflictReason {
    match error {
        CommitError::Host { source, .. } => RecoveryConflictReason::Host(source),
        _ => RecoveryConflictReason::LedgerDisagrees { state: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_empty_only_when_every_list_is_and_needs_attention_for_conflicts_and_unresolved_work() {
        let empty = RecoveryReport::default();
        assert!(empty.is_empty() && empty.is_clean() && !empty.needs_attention());
        let id = TransactionId::from_bytes([4; 32]);
        let path = VPath::parse("a.txt").unwrap();
        let fills: [fn(&mut RecoveryReport, TransactionId, &VPath); 7] = [
            |report, id, _| report.rolled_forward.push(id),
            |report, id, _| report.rolled_back.push(id),
            |report, id, _| report.cleaned.push(id),
            |report, id, path| report.changed_since_commit.push((id, path.clone())),
            |report, id, path| {
                report.kept.push(KeptNode { transaction: id, path: path.clone(), kept: path.clone() });
            },
            |report, id, _| {
                report.unresolved.push(Unresolved { transaction: id, directory: None, state: None, paths: Vec::new() });
            },
            |report, id, path| {
                report.conflicts.push(RecoveryConflict {
                    transaction: Some(id),
                    path: path.clone(),
                    reason: RecoveryConflictReason::Plan { source: None },
                });
            },
        ];
        for (index, fill) in fills.into_iter().enumerate() {
            let mut report = RecoveryReport::default();
            fill(&mut report, id, &path);
            assert!(!report.is_empty(), "list {index}");
            // Only the last two (unresolved work, conflicts) need an operator.
            assert_eq!(report.needs_attention(), index >= 5, "list {index}");
            assert_eq!(report.is_clean(), index != 6, "list {index}");
        }
    }
}
