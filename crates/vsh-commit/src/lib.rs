//! Revalidate a transaction's dependencies against the live workspace, then
//! apply its canonical diff exactly as previewed, so that a crash at any
//! instant recovers to exactly the before state or exactly the after state.
//!
//! # The commit protocol
//!
//! [`Committer::commit_with_ledger`] runs, for one [`CommitRequest`], with the
//! durable steps named by their [`FaultPoint`] in brackets:
//!
//! 1. **Validate** the diff without touching the host (strictly sorted paths,
//!    no root, nothing within the runtime or data directory, kinds that agree
//!    with the states, content digests, modes within `0o7777`, parents that
//!    are directories on both sides).
//! 2. **Lock**: `flock(LOCK_EX)` on `<runtime dir>/commit.lock`, held to the
//!    end. Every `Committer` on the workspace, in any thread or process, takes
//!    it, so revalidation and mutation are serialized. Any transaction
//!    directory an interrupted commit left is **recovered** first (see below);
//!    if one cannot be, the commit refuses ([`CommitError::RecoveryPending`]).
//! 3. **Plan**: lower the diff to operations (quarantine, create directory,
//!    install, set mode; see [`format::Action`]) and write the plan to
//!    `<runtime dir>/txn/<transaction hex>/plan`, `fsync`ed [`PlanSynced`](FaultPoint::PlanSynced).
//! 4. **Stage** every new file and symlink into `stage/<operation>`, content
//!    read from the blob store and re-hashed, then one `syncfs` makes the
//!    transaction directory and everything staged durable [`StageSynced`](FaultPoint::StageSynced).
//! 5. **Revalidate** under the lock: every facet of every read-set dependency
//!    and every diff entry's before state (see `revalidate.rs`). A conflict is
//!    [`CommitError::Stale`] naming up to `max_conflicts` paths; the
//!    transaction directory is removed and the workspace was never touched
//!    [`Revalidated`](FaultPoint::Revalidated).
//! 6. **Committing**: the ledger moves Revalidating → Committing
//!    [`CommitStatePersisted`](FaultPoint::CommitStatePersisted).
//! 7. **Journal the intents** of every operation (with the inode each acts
//!    on) in one write, `fsync`ed with its directory [`IntentSynced`](FaultPoint::IntentSynced)`(i)`.
//! 8. **Apply** each operation [`OperationApplied`](FaultPoint::OperationApplied)`(i)`: an old node is
//!    renamed into `quarantine/` (never deleted), a staged node renamed into
//!    place, directories created, modes set. Then the done records are
//!    journaled and one `syncfs` makes everything durable
//!    [`DoneSynced`](FaultPoint::DoneSynced)`(i)`, [`Applied`](FaultPoint::Applied).
//! 9. **Verify** that every diff path holds its after state [`Verified`](FaultPoint::Verified).
//! 10. **Mark complete**: write `complete`, `fsync` it and the directory
//!     [`CommitMarkerSynced`](FaultPoint::CommitMarkerSynced). From here the transaction is committed.
//! 11. **Committed**: the ledger moves to Committed [`CommittedStatePersisted`](FaultPoint::CommittedStatePersisted).
//! 12. **Clean up** the transaction directory: the quarantined nodes first
//!     [`QuarantineRemoved`](FaultPoint::QuarantineRemoved), then stage, journal, plan, marker.
//!
//! Durability costs a constant number of barriers per commit: one `fsync` of
//! the plan, one `syncfs` after staging, two `fsync`s for the intents, one
//! for the done records, one `syncfs` after applying, two for the marker, plus
//! the ledger's own. Staged files are written without a per-file `fsync`; the
//! one `syncfs` after staging covers them all.
//!
//! A host failure while applying, or a failed verification, rolls the
//! transaction back in place ([`CommitError::Apply`],
//! [`CommitError::Verification`]; the ledger holds Failed); if even that
//! fails, [`CommitError::RecoveryRequired`].
//!
//! # Recovery
//!
//! [`Committer::recover`] (under the same lock) resolves every transaction
//! directory in name order: with a valid completion marker it **rolls
//! forward** (verify the after state, ledger Committed, clean up); without it
//! it **rolls back** every operation whose intent was journaled, in reverse,
//! telling from the filesystem whether each was applied (the quarantined or
//! staged node is where the operation would have moved it from, or not), then
//! verifies the before state of what it restored and moves the ledger to
//! Failed. Anything ambiguous is a [`RecoveryConflict`], left untouched.
//! `docs/store-format.md` (*Commit protocol*) gives the byte layouts and the
//! case analysis of a crash at each step.
//!
//! Every host access goes through the workspace's [`CapDir`], which resolves
//! paths beneath it without following any symlink, so a directory swapped for
//! a symlink (in the workspace or in vsh's internal state) is refused, never
//! written through.
//!
//! # Guarantees
//!
//! - A commit that returns any error but [`CommitError::RecoveryRequired`] and
//!   [`CommitError::FaultInjected`] leaves the workspace in its before state
//!   (vsh's runtime directory aside).
//! - External changes to anything the transaction depended on, made before the
//!   lock is taken, are detected and never overwritten. Changes the
//!   transaction did not depend on (a touched mtime, an unrelated sibling) do
//!   not make it stale.
//! - A returned [`CommitReceipt`] means every changed path was verified and
//!   the completion marker is durable.
//! - A file with other hard links is replaced by rename (the aliases keep the
//!   old content); its mode is never changed in place.
//!
//! # Limitations
//!
//! - **Readers can see intermediate states**: a replaced path is briefly
//!   absent between its quarantine and its install, and a crash leaves a
//!   partial state until recovery runs.
//! - The lock is advisory: an uncooperative external writer between
//!   revalidation and apply is not stopped (an operation whose node changed
//!   under it is refused and rolled back, never written through).
//! - Renaming a directory into quarantine, or removing entries of a directory
//!   without owner write permission, needs the permissions `rename(2)` and
//!   `unlink(2)` need; vsh does not grant itself more.

#![forbid(unsafe_code)]

mod apply;
mod error;
mod fault;
pub mod format;
mod ledger;
mod live;
mod plan;
mod recover;
mod revalidate;
mod txndir;
mod validate;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use vsh_host::{CapDir, HostError, LockGuard};
use vsh_store::BlobStore;
use vsh_types::{DiffEntry, ReadSet, TransactionId, VPath};

pub use error::{CommitError, Conflict, ConflictReason};
pub use fault::{CrashAt, FaultInjector, FaultPoint, NoFaults};
pub use ledger::{CommitLedger, LedgerError, MemoryLedger, NoLedger, from_states};
pub use recover::{RecoveryConflict, RecoveryConflictReason, RecoveryReport};

use apply::{ApplyFailure, Syncs};
use format::{Action, Journal, JournalRecord, Marker, Plan, PlanDigest, RecordKind};
use live::LiveView;
use recover::check;
use txndir::{PRIVATE_DIR_MODE, TxnDir};

/// How many conflicts a stale commit lists by default.
pub const DEFAULT_MAX_CONFLICTS: usize = 128;

/// The default runtime directory, relative to the workspace.
pub const DEFAULT_RUNTIME_DIR: &str = ".vsh";

/// One transaction to commit.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The transaction (names its staging directory and its receipt).
    pub transaction: TransactionId,
    /// The canonical diff, sorted by path.
    pub diff: &'a [DiffEntry],
    /// Everything the run depended on.
    pub reads: &'a ReadSet,
    /// Where the new content of every file and symlink is stored.
    pub blobs: &'a BlobStore,
    /// How many conflicts a stale result lists (the total is always counted).
    pub max_conflicts: usize,
}

impl<'a> CommitRequest<'a> {
    /// A request listing up to [`DEFAULT_MAX_CONFLICTS`] conflicts.
    pub fn new(transaction: TransactionId, diff: &'a [DiffEntry], reads: &'a ReadSet, blobs: &'a BlobStore) -> Self {
        Self { transaction, diff, reads, blobs, max_conflicts: DEFAULT_MAX_CONFLICTS }
    }
}

/// What a successful commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitReceipt {
    /// The committed transaction.
    pub transaction: TransactionId,
    /// Host operations applied to the workspace (quarantines, creations,
    /// installs, mode changes).
    pub operations: u64,
    /// Diff paths verified after applying.
    pub verified_paths: u64,
    /// Read-set dependencies plus diff preconditions revalidated under the lock.
    pub revalidated_dependencies: u64,
    /// The durability barriers the commit issued (the ledger's own aside).
    pub syncs: SyncCounts,
}

/// Durability barriers issued by one commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncCounts {
    /// `fsync` of a file: the plan, each journal version, the marker, and each
    /// staged file (see the crate docs' *Limitations*).
    pub file_fsyncs: u64,
    /// `fsync` of a directory.
    pub dir_fsyncs: u64,
    /// `syncfs` of the workspace's filesystem.
    pub syncfs: u64,
}

impl SyncCounts {
    fn of(syncs: &Syncs) -> SyncCounts {
        SyncCounts {
            file_fsyncs: syncs.file_fsyncs.load(Ordering::Relaxed),
            dir_fsyncs: syncs.dir_fsyncs.load(Ordering::Relaxed),
            syncfs: syncs.syncfs.load(Ordering::Relaxed),
        }
    }
}

/// Applies transactions to one workspace.
#[derive(Debug)]
pub struct Committer {
    workspace: Arc<CapDir>,
    runtime_dir: VPath,
    /// The runtime directory first, then any other hidden directory.
    excluded: Vec<VPath>,
}

/// How the journaled apply stopped.
enum Stop {
    /// An injected crash: return at once.
    Fault(FaultPoint),
    /// A failure to roll back in place; operations at `limit` and beyond were
    /// never applied.
    Abort { error: CommitError, limit: Option<usize> },
}

impl From<CommitError> for Stop {
    fn from(error: CommitError) -> Stop {
        match error {
            CommitError::FaultInjected(point) => Stop::Fault(point),
            error => Stop::Abort { error, limit: None },
        }
    }
}

impl Committer {
    /// A committer for `workspace`.
    ///
    /// `runtime_dir` is vsh's own directory inside the workspace (default
    /// [`DEFAULT_RUNTIME_DIR`]), used for `commit.lock` and `txn/`; it is
    /// created (mode `0o700`, never through a symlink) if missing. The caller
    /// must exclude it from snapshots; diffs may not touch it. Call
    /// [`Committer::recover`] before relying on the workspace's state.
    pub fn new(workspace: Arc<CapDir>, runtime_dir: VPath) -> Result<Committer, CommitError> {
        if runtime_dir.is_root() {
            return Err(CommitError::RuntimeDirIsRoot);
        }
        workspace.open_subdir(&runtime_dir, true).map_err(CommitError::host("open runtime directory", &runtime_dir))?;
        let excluded = vec![runtime_dir.clone()];
        Ok(Committer { workspace, runtime_dir, excluded })
    }

    /// Also hide `path` (a data directory placed inside the workspace) from
    /// revalidation and refuse diffs that touch it, exactly as runs do.
    #[must_use]
    pub fn with_excluded(mut self, path: VPath) -> Committer {
        if !path.is_root() && !self.excluded.contains(&path) {
            self.excluded.push(path);
        }
        self
    }

    /// Every path hidden from runs and commits.
    pub fn excluded(&self) -> &[VPath] {
        &self.excluded
    }

    /// The runtime directory, relative to the workspace.
    pub fn runtime_dir(&self) -> &VPath {
        &self.runtime_dir
    }

    /// Take the workspace's commit lock (blocking until it is free).
    fn lock(&self) -> Result<LockGuard, CommitError> {
        let runtime = self
            .workspace
            .open_subdir(&self.runtime_dir, true)
            .map_err(CommitError::host("open runtime directory", &self.runtime_dir))?;
        let lock = VPath::from_component("commit.lock").expect("a valid constant name");
        runtime.lock_exclusive(&lock).map_err(CommitError::host("lock", &self.runtime_dir))
    }

    fn view(&self) -> LiveView<'_> {
        LiveView { dir: &self.workspace, excluded: &self.excluded }
    }

    /// Revalidate only: validate the diff, take the lock, check every
    /// dependency and precondition, and apply nothing.
    pub fn revalidate(&self, request: &CommitRequest<'_>) -> Result<(), CommitError> {
        validate::validate(request.diff, &self.excluded)?;
        let _lock = self.lock()?;
        revalidate::revalidate(&self.view(), request.diff, request.reads, request.max_conflicts).map(|_| ())
    }

    /// Commit without a ledger ([`NoLedger`]): recovery then decides by the
    /// completion marker alone. See [`Committer::commit_with_ledger`].
    pub fn commit(&self, request: &CommitRequest<'_>) -> Result<CommitReceipt, CommitError> {
        self.commit_with_faults(request, &NoLedger, &NoFaults)
    }

    /// Apply the transaction's diff to the workspace, exactly as previewed,
    /// moving it through `ledger` (see the crate docs for the protocol and
    /// [`CommitError`] for what each failure leaves).
    ///
    /// The ledger must hold the transaction in Revalidating (the caller moved
    /// it there); on success it holds Committed.
    pub fn commit_with_ledger(
        &self,
        request: &CommitRequest<'_>,
        ledger: &dyn CommitLedger,
    ) -> Result<CommitReceipt, CommitError> {
        self.commit_with_faults(request, ledger, &NoFaults)
    }

    /// [`Committer::commit_with_ledger`], asking `faults` at every
    /// [`FaultPoint`]: a crash there returns [`CommitError::FaultInjected`]
    /// and leaves the disk as the crash would.
    pub fn commit_with_faults(
        &self,
        request: &CommitRequest<'_>,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<CommitReceipt, CommitError> {
        validate::validate(request.diff, &self.excluded)?;
        if request.diff.len() as u64 > format::MAX_PLAN_ENTRIES {
            let path = request.diff[0].path.clone();
            return Err(CommitError::InvalidDiff { path, reason: "the diff has more entries than a plan holds" });
        }
        let _lock = self.lock()?;
        let report = self.recover_locked(ledger, &NoFaults)?;
        if !report.is_clean() {
            return Err(CommitError::RecoveryPending { conflicts: report.conflicts });
        }
        let transaction = request.transaction;
        let plan = plan::lower(transaction, request.diff);
        let encoded = plan.encode();
        let mut digest = [0_u8; 32];
        digest.copy_from_slice(&encoded[encoded.len() - 32..]);
        let digest = PlanDigest(digest);
        let txn = self.create_txn_dir(transaction)?;
        let syncs = Syncs::default();

        // Until the ledger holds Committing, the workspace is untouched and a
        // failure only removes the transaction directory.
        let (witnesses, revalidated) = match self.prepare(&txn, &plan, &encoded, request, faults, &syncs) {
            Ok(prepared) => prepared,
            Err(CommitError::FaultInjected(point)) => return Err(CommitError::FaultInjected(point)),
            Err(error) => {
                let _ = txn.remove(&self.workspace, || Ok(()));
                return Err(error);
            }
        };
        if let Err(source) = ledger.committing(transaction) {
            let _ = txn.remove(&self.workspace, || Ok(()));
            return Err(CommitError::Ledger { transaction, step: "committing", source });
        }
        check(faults, FaultPoint::CommitStatePersisted)?;

        // From here the workspace changes: a failure rolls back in place.
        match self.apply_journaled(&txn, &plan, digest, &witnesses, faults, &syncs) {
            Ok(()) => {}
            Err(Stop::Fault(point)) => return Err(CommitError::FaultInjected(point)),
            Err(Stop::Abort { error, limit }) => return Err(self.abort(ledger, transaction, &txn, error, limit)),
        }

        let interrupted = |source| CommitError::RecoveryRequired { transaction, source: Box::new(source) };
        let marker = Marker { transaction, plan: digest };
        txn.write_marker(&self.workspace, &marker)
            .map_err(|source| interrupted(CommitError::host("write marker", &txn.marker())(source)))?;
        syncs.file();
        self.workspace
            .sync_dir(&txn.root)
            .map_err(|source| interrupted(CommitError::host("sync marker", &txn.root)(source)))?;
        syncs.dir();
        check(faults, FaultPoint::CommitMarkerSynced)?;

        ledger
            .committed(transaction)
            .map_err(|source| interrupted(CommitError::Ledger { transaction, step: "committed", source }))?;
        check(faults, FaultPoint::CommittedStatePersisted)?;

        // The transaction is committed; a directory that cannot be removed
        // now is removed by the next recovery.
        if let Err(CommitError::FaultInjected(point)) =
            txn.remove(&self.workspace, || check(faults, FaultPoint::QuarantineRemoved))
        {
            return Err(CommitError::FaultInjected(point));
        }
        Ok(CommitReceipt {
            transaction,
            operations: plan.operations.len() as u64,
            verified_paths: plan.entries.len() as u64,
            revalidated_dependencies: revalidated,
            syncs: SyncCounts::of(&syncs),
        })
    }

    /// Create `txn/<transaction hex>/` with `stage/` and `quarantine/`.
    fn create_txn_dir(&self, transaction: TransactionId) -> Result<TxnDir, CommitError> {
        let root = self.txn_root();
        match self.workspace.create_dir(&root, PRIVATE_DIR_MODE) {
            Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
            Err(source) => return Err(CommitError::Host { op: "create transaction directory", path: root, source }),
        }
        let txn = TxnDir::new(&root, transaction);
        match txn.create(&self.workspace) {
            Ok(()) => Ok(txn),
            Err(HostError::AlreadyExists { path }) if path == txn.root => {
                Err(CommitError::TransactionDirExists { transaction })
            }
            Err(source) => {
                let _ = txn.remove(&self.workspace, || Ok(()));
                Err(CommitError::Host { op: "create transaction directory", path: txn.root, source })
            }
        }
    }

    /// Plan, stage and revalidate. Returns every operation's intent witness
    /// and the number of dependencies revalidated.
    fn prepare(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        encoded: &[u8],
        request: &CommitRequest<'_>,
        faults: &dyn FaultInjector,
        syncs: &Syncs,
    ) -> Result<(Vec<u64>, u64), CommitError> {
        let ws = &*self.workspace;
        txn.write_plan(ws, encoded).map_err(CommitError::host("write plan", &txn.plan()))?;
        syncs.file();
        check(faults, FaultPoint::PlanSynced)?;
        let staged = apply::stage(ws, txn, plan, request.blobs)?;
        ws.syncfs().map_err(CommitError::host("sync stage", &txn.root))?;
        syncs.filesystem();
        check(faults, FaultPoint::StageSynced)?;
        let revalidated = revalidate::revalidate(&self.view(), request.diff, request.reads, request.max_conflicts)?;
        let witnesses = apply::intent_witnesses(ws, plan, &staged)?;
        check(faults, FaultPoint::Revalidated)?;
        Ok((witnesses, revalidated))
    }

    /// Journal the intents, apply every operation, journal the done records,
    /// sync, verify.
    fn apply_journaled(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        digest: PlanDigest,
        witnesses: &[u64],
        faults: &dyn FaultInjector,
        syncs: &Syncs,
    ) -> Result<(), Stop> {
        let ws = &*self.workspace;
        let count = plan.operations.len();
        let index32 = |index: usize| u32::try_from(index).expect("a plan has at most u32::MAX operations");
        let mut journal = Journal::new(plan.transaction, digest);
        journal.records = (0..count)
            .map(|index| JournalRecord {
                kind: RecordKind::Intent,
                operation: index32(index),
                witness: witnesses[index],
            })
            .collect();
        let nothing_applied = |error| Stop::Abort { error, limit: Some(0) };
        txn.write_journal(ws, &journal)
            .map_err(|source| nothing_applied(CommitError::host("write journal", &txn.journal())(source)))?;
        syncs.file();
        ws.sync_dir(&txn.root)
            .map_err(|source| nothing_applied(CommitError::host("sync journal", &txn.root)(source)))?;
        syncs.dir();
        for index in 0..count {
            check(faults, FaultPoint::IntentSynced(index32(index)))?;
        }
        for (index, witness) in witnesses.iter().copied().enumerate() {
            let done = apply::apply_one(ws, txn, plan, index, witness).map_err(|failure| {
                let operation = plan.operations[index];
                let path = plan.entries[operation.entry as usize].path.clone();
                let error = match failure {
                    ApplyFailure::Host(source) => CommitError::Apply { path, applied: index as u64, source },
                    ApplyFailure::HardLinked(links) => CommitError::HardLinked { path, links },
                    ApplyFailure::Changed => apply::stale(&path, ConflictReason::Precondition),
                };
                // Creating a directory is two steps; the first may have happened.
                let maybe_applied = matches!(operation.action, Action::CreateDir { .. });
                Stop::Abort { error, limit: Some(index + usize::from(maybe_applied)) }
            })?;
            journal.records.push(JournalRecord { kind: RecordKind::Done, operation: index32(index), witness: done });
            check(faults, FaultPoint::OperationApplied(index32(index)))?;
        }
        txn.write_journal(ws, &journal).map_err(|source| CommitError::host("write journal", &txn.journal())(source))?;
        syncs.file();
        ws.syncfs().map_err(|source| CommitError::host("sync", &VPath::root())(source))?;
        syncs.filesystem();
        for index in 0..count {
            check(faults, FaultPoint::DoneSynced(index32(index)))?;
        }
        check(faults, FaultPoint::Applied)?;
        let installed = apply::installed_identities(plan, witnesses);
        if let Some(path) = apply::verify_after(&self.view(), plan, &installed)? {
            return Err(Stop::Abort { error: CommitError::Verification { path }, limit: None });
        }
        check(faults, FaultPoint::Verified)?;
        Ok(())
    }

    /// Roll a failed commit back in place; if that cannot finish, the
    /// transaction needs recovery.
    fn abort(
        &self,
        ledger: &dyn CommitLedger,
        transaction: TransactionId,
        txn: &TxnDir,
        error: CommitError,
        limit: Option<usize>,
    ) -> CommitError {
        if let Ok(Ok(_)) = self.recover_one(ledger, &NoFaults, transaction, txn, limit) {
            return error;
        }
        if ledger.state(transaction).ok().flatten() == Some(vsh_types::TransactionState::Committing) {
            let _ = ledger.recovery_required(transaction);
        }
        CommitError::RecoveryRequired { transaction, source: Box::new(error) }
    }
}
