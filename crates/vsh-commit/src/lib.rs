//! Revalidate a transaction's dependencies against the live workspace, then
//! apply its canonical diff exactly as previewed, so that a crash at any
//! instant recovers to exactly the before state or exactly the after state.
//!
//! # The commit protocol
//!
//! [`Committer::commit_with_ledger`] runs, for one [`CommitRequest`] and
//! under the commit lock ([`CommitSession`]): recovery of anything an
//! interrupted commit left; validation of the diff; a plan written and
//! every new file and symlink staged, none synced yet; revalidation of every
//! dependency and before state (a conflict is [`CommitError::Stale`] and
//! nothing was touched); the intents journaled, made durable with the plan
//! and the staged nodes in one batch of barriers; the ledger to Committing;
//! the operations applied (old nodes quarantined, never deleted); the done
//! records journaled; verification; the completion marker (the commit point,
//! written only when the ledger is not one: a durable ledger's Committed is
//! the commit point, [`CommitLedger::is_commit_point`]); the ledger to
//! Committed; cleanup. Each durable step is a [`FaultPoint`],
//! and a commit costs a constant number of barriers whatever its size.
//! `docs/commit-protocol.md` is the one numbered list of these steps, with
//! the syscall that makes each durable and the case analysis of a crash at
//! each; `docs/store-format.md` gives the bytes of every file.
//!
//! A host failure while applying, or a failed verification, rolls the
//! transaction back in place ([`CommitError::Apply`],
//! [`CommitError::Verification`]; the ledger holds Failed). If someone else
//! changed a path the commit had already changed, that operation is left as
//! it is (their bytes are never overwritten or removed, the old node stays in
//! `quarantine.<i>`), every independent one is still undone, and the error is
//! [`CommitError::Unresolved`] naming what was left (the ledger holds
//! `RecoveryRequired`). If the rollback cannot finish at all,
//! [`CommitError::RecoveryRequired`].
//!
//! # Recovery
//!
//! [`CommitSession::recover`] (under the same lock) resolves every transaction
//! directory in name order: with a valid completion marker it **rolls
//! forward** (ledger Committed, clean up); without it it **rolls back** every
//! operation whose intent was journaled, in reverse, telling from the
//! filesystem whether each was applied (the quarantined or staged node is
//! where the operation would have moved it from, or not), leaving any
//! operation someone else's change is in the way of, verifies the before
//! state of what it restored, writes a durable settled record, and only then
//! moves the ledger (Failed, or `RecoveryRequired` with [`Unresolved`] paths)
//! and cleans up. A journal the evidence contradicts, or anything else that
//! cannot be decided, is a [`RecoveryConflict`], left untouched.
//! `docs/store-format.md` (*Recovery*) gives its decisions case by case, and
//! `docs/commit-protocol.md` the analysis of a crash at each step.
//!
//! Every host access goes through the workspace's [`CapDir`], which resolves
//! paths beneath it without following any symlink, so a directory swapped for
//! a symlink (in the workspace or in vsh's internal state) is refused, never
//! written through.
//!
//! # Guarantees
//!
//! - A commit that returns any error but [`CommitError::RecoveryRequired`],
//!   [`CommitError::Unresolved`] and [`CommitError::FaultInjected`] leaves
//!   the workspace in its before state (vsh's runtime directory aside), and
//!   the ledger says so (Stale or Failed).
//! - Nothing is ever deleted that is not vsh's own or the transaction's
//!   committed effect: old nodes leave `quarantine.<i>` only after the commit
//!   point, or by being moved back.
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
// Unit tests build and inspect their fixtures by path.
#![cfg_attr(test, allow(clippy::disallowed_methods))]
#![forbid(unsafe_code)]

mod apply;
mod error;
mod fault;
pub mod format;
mod ledger;
mod live;
mod plan;
mod recover;
mod restore;
mod revalidate;
mod settle;
mod store_ledger;
mod txndir;
mod validate;

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use vsh_host::{CapDir, HostError, LockGuard, LockWait, WritableDir};
use vsh_store::BlobStore;
use vsh_types::{AuthorityKey, CanonicalDiff, ReadSet, TransactionId, VPath};

pub use error::{CommitError, Conflict, ConflictReason};
pub use fault::{CrashAt, FaultInjector, FaultPoint, NoFaults};
pub use format::{Left, LeftReason};
pub use ledger::{CommitLedger, LedgerError, MemoryLedger, NoLedger, from_states, permitted_move};
pub use recover::{KeptNode, LeftPath, RecoveryConflict, RecoveryConflictReason, RecoveryReport, Unresolved};
pub use restore::RestoreReport;
pub use settle::Settled;
pub use store_ledger::StoreLedger;

use apply::{ApplyFailure, Syncs};
use format::{Action, Journal, JournalRecord, Marker, Plan, PlanDigest, RecordKind};
use live::LiveView;
use recover::{Outcome, check};
use txndir::{Cleanup, PRIVATE_DIR_MODE, TRASH_DIR, TXN_DIR, TxnDir};

/// How many conflicts a stale commit lists by default.
pub const DEFAULT_MAX_CONFLICTS: usize = 128;

/// One transaction to commit.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The transaction (names its staging directory and its receipt).
    pub transaction: TransactionId,
    /// The canonical diff (sorted by path by construction).
    pub diff: &'a CanonicalDiff,
    /// Everything the run depended on.
    pub reads: &'a ReadSet,
    /// Where the new content of every file and symlink is stored, unless
    /// `contents` holds it.
    pub blobs: &'a BlobStore,
    /// New contents held in memory (a process-local preview's, or those an
    /// artifact carries), by digest: taken from here before the blob store,
    /// and re-hashed like a blob read.
    pub contents: Option<&'a MemoryContents>,
    /// How many conflicts a stale result lists (the total is always counted).
    pub max_conflicts: usize,
}

/// New contents by their digest, held in memory rather than in the blob store.
pub type MemoryContents = std::collections::BTreeMap<vsh_types::BlobId, std::sync::Arc<[u8]>>;

impl<'a> CommitRequest<'a> {
    /// A request listing up to [`DEFAULT_MAX_CONFLICTS`] conflicts.
    pub fn new(transaction: TransactionId, diff: &'a CanonicalDiff, reads: &'a ReadSet, blobs: &'a BlobStore) -> Self {
        Self { transaction, diff, reads, blobs, contents: None, max_conflicts: DEFAULT_MAX_CONFLICTS }
    }

    /// Take new contents from `contents` first, then from the blob store.
    #[must_use]
    pub fn with_contents(mut self, contents: &'a MemoryContents) -> Self {
        self.contents = Some(contents);
        self
    }
}

/// What a successful commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Old nodes someone wrote to after revalidation checked them: moved
    /// aside under the runtime directory instead of deleted (usually none).
    pub kept: Vec<KeptNode>,
}

/// Durability barriers issued by one commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncCounts {
    /// `fsync` of one of the commit's own files (the plan, the journal, the
    /// marker), of each staged file, and of each file whose mode changed.
    pub file_fsyncs: u64,
    /// `fsync` of a directory.
    pub dir_fsyncs: u64,
    /// `syncfs` of the workspace's filesystem: none on the normal path; one
    /// when a changed node cannot be opened to sync it.
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
    /// The commit engine is one of the two parts that may change the
    /// workspace: it holds the mutating capability over the shared handle.
    workspace: WritableDir,
    runtime_dir: VPath,
    /// The runtime directory first, then any other hidden directory.
    excluded: Vec<VPath>,
    /// Authenticates the plan, journal and markers (see [`Committer::with_authority`]).
    key: AuthorityKey,
    /// The protected-path rules every diff is checked against (see [`Committer::with_protection`]).
    protection: Option<vsh_policy::CallPolicy>,
    /// Discarded transaction directories being removed off the commit's
    /// path, each by a thread of its own (joined on drop).
    sweeping: Mutex<Vec<(VPath, std::thread::JoinHandle<()>)>>,
    /// Whether this committer has made `txn/`'s own entry in the runtime
    /// directory durable (synced the runtime directory while `txn/` existed,
    /// and has not created it since): later commits skip that barrier.
    txn_root_synced: std::sync::atomic::AtomicBool,
}

impl Drop for Committer {
    fn drop(&mut self) {
        let sweeping = std::mem::take(self.sweeping.get_mut().unwrap_or_else(PoisonError::into_inner));
        for (_, sweeper) in sweeping {
            // A sweeper that panicked left garbage the next recovery removes.
            let _ = sweeper.join();
        }
    }
}

/// Ask the filesystem to give each transaction directory made in `txn_root`
/// a block group of its own choosing (ext4's `TOPDIR` flag; a hint other
/// filesystems refuse, which is ignored). Staged files take their inodes in
/// their directory's group, so a commit's new files then stay away from the
/// inodes earlier commits freed: an ext4 without a journal checks every
/// inode of the group freed in the last minute, one by one from the group's
/// first, before it allocates one, and 1,000 staged files after a commit
/// that freed 1,000 walked past all of them (the patch of 1,000 files:
/// 490 ms a sample, rising, against 173 ms flat; see docs/performance.md).
fn spread_transactions(workspace: &WritableDir, txn_root: &VPath) {
    let _ = workspace.spread_subdirectories(txn_root);
}

/// The workspace's commit lock, held: the only way to commit or recover.
///
/// Everything a session does is serialized with every other session on the
/// workspace, in any thread or process. A caller that keeps durable states
/// moves its transaction to Revalidating while it holds the session, after
/// [`CommitSession::recover`] and before [`CommitSession::commit`], so that
/// recovery may treat a Revalidating record without a commit directory as
/// abandoned. Dropping the session releases the lock.
#[derive(Debug)]
pub struct CommitSession<'a> {
    committer: &'a Committer,
    _lock: LockGuard,
    /// Whether [`CommitSession::recover`] ran clean in this session.
    recovered: Cell<bool>,
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
    /// `runtime_dir` is vsh's own directory inside the workspace
    /// ([`vsh_types::VshLayout::runtime`]), used for `commit.lock` and `txn/`; it is
    /// created (mode `0o700`, never through a symlink) if missing. The caller
    /// must exclude it from snapshots; diffs may not touch it. Call
    /// [`Committer::recover`] before relying on the workspace's state.
    pub fn new(workspace: Arc<CapDir>, runtime_dir: VPath) -> Result<Committer, CommitError> {
        if runtime_dir.is_root() {
            return Err(CommitError::RuntimeDirIsRoot);
        }
        let workspace = WritableDir::new(workspace);
        let existed = workspace.lstat(&runtime_dir).ok().flatten().is_some();
        let runtime = workspace
            .open_or_create_subdir(&runtime_dir)
            .map_err(CommitError::host("open runtime directory", &runtime_dir))?;
        if !existed {
            // Commits sync what they change inside it; its own entry is made durable once, here.
            for ancestor in runtime_dir.ancestors() {
                workspace.sync_dir(&ancestor).map_err(CommitError::host("sync runtime directory", &ancestor))?;
            }
        }
        let txn_root = runtime_dir.child(TXN_DIR).expect("a valid constant name");
        if workspace.lstat(&txn_root).ok().flatten().is_some() {
            spread_transactions(&workspace, &txn_root);
        }
        // Keep vsh's own files out of `git status`: a `.gitignore` of `*` in the
        // runtime directory, made once and never replaced. It is a courtesy, so
        // a directory vsh may not write to (a read-only checkout) is no error.
        let ignore = VPath::from_component(".gitignore").expect("a valid constant name");
        if runtime.lstat(&ignore).ok().flatten().is_none() {
            let _ = runtime.create_file_exclusive(&ignore, b"*\n", 0o644);
        }
        let excluded = vec![runtime_dir.clone()];
        Ok(Committer {
            workspace,
            runtime_dir,
            excluded,
            key: AuthorityKey::unauthenticated(),
            protection: None,
            sweeping: Mutex::default(),
            txn_root_synced: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Authenticate the commit's own records (plan, journal, completion
    /// marker, settled record) with `key`, so that a commit directory planted
    /// by whoever can write the workspace is refused instead of recovered.
    /// Without it they carry a public checksum.
    #[must_use]
    pub fn with_authority(mut self, key: AuthorityKey) -> Committer {
        self.key = key;
        self
    }

    /// Refuse, before anything is written, any diff that changes a path the
    /// policy's protected rules deny mutating (secrets, `.git`, vsh's data at
    /// any depth, custom rules) or that lies in a nested vsh data directory
    /// (a directory holding both a `txlog` and a `txlog.lock`, as every vsh
    /// data directory does): [`CommitError::Protected`]. Runs refuse
    /// such changes already; this holds even for an artifact forged or
    /// damaged after the run.
    #[must_use]
    pub fn with_protection(mut self, policy: vsh_policy::CallPolicy) -> Committer {
        self.protection = Some(policy);
        self
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

    fn lock_path() -> VPath {
        VPath::from_component("commit.lock").expect("a valid constant name")
    }

    fn runtime(&self) -> Result<WritableDir, CommitError> {
        self.workspace
            .open_or_create_subdir(&self.runtime_dir)
            .map_err(CommitError::host("open runtime directory", &self.runtime_dir))
    }

    /// Take the workspace's commit lock, waiting as long as `wait` allows
    /// ([`CommitError::LockTimeout`] past it).
    pub fn session(&self, wait: &LockWait) -> Result<CommitSession<'_>, CommitError> {
        let lock = self.runtime()?.lock_exclusive_within(&Self::lock_path(), wait).map_err(|error| match error {
            HostError::LockTimeout { waited_ms, .. } => CommitError::LockTimeout { waited_ms },
            other => CommitError::host("lock", &self.runtime_dir)(other),
        })?;
        Ok(CommitSession { committer: self, _lock: lock, recovered: Cell::new(false) })
    }

    /// Take the commit lock if no one holds it; `None` if someone does.
    pub fn try_session(&self) -> Result<Option<CommitSession<'_>>, CommitError> {
        let lock = self
            .runtime()?
            .try_lock_exclusive(&Self::lock_path())
            .map_err(CommitError::host("lock", &self.runtime_dir))?;
        Ok(lock.map(|lock| CommitSession { committer: self, _lock: lock, recovered: Cell::new(false) }))
    }

    /// Take the commit lock, blocking until it is free.
    fn blocking_session(&self) -> Result<CommitSession<'_>, CommitError> {
        let lock =
            self.runtime()?.lock_exclusive(&Self::lock_path()).map_err(CommitError::host("lock", &self.runtime_dir))?;
        Ok(CommitSession { committer: self, _lock: lock, recovered: Cell::new(false) })
    }

    fn view(&self) -> LiveView<'_> {
        LiveView::new(&self.workspace, &self.excluded, self.protection.as_ref())
    }

    /// Revalidate only: validate the diff, take the lock, check every
    /// dependency and precondition, and apply nothing.
    pub fn revalidate(&self, request: &CommitRequest<'_>) -> Result<(), CommitError> {
        validate::validate(request.diff.entries(), &self.excluded)?;
        let _session = self.blocking_session()?;
        revalidate::revalidate(&self.view(), request.diff.entries(), request.reads, request.max_conflicts).map(drop)
    }

    /// [`Committer::revalidate`] without the commit lock: an advisory
    /// answer, for what to tell a reader (a commit running meanwhile may be
    /// seen half applied), never a commit's check, which always takes the
    /// lock. A reader never waits for a commit.
    ///
    /// # Errors
    ///
    /// As [`Committer::revalidate`], but for the lock.
    pub fn revalidate_unlocked(&self, request: &CommitRequest<'_>) -> Result<(), CommitError> {
        validate::validate(request.diff.entries(), &self.excluded)?;
        revalidate::revalidate(&self.view(), request.diff.entries(), request.reads, request.max_conflicts).map(drop)
    }

    /// [`CommitSession::revalidate`] in a session taken only if no one
    /// holds the commit lock; `None` when someone does (nothing checked).
    ///
    /// # Errors
    ///
    /// As [`CommitSession::revalidate`].
    pub fn revalidate_if_free(&self, request: &CommitRequest<'_>) -> Result<Option<()>, CommitError> {
        match self.try_session()? {
            Some(session) => session.revalidate(request).map(Some),
            None => Ok(None),
        }
    }

    /// Recover every interrupted commit on this workspace (blocking for the
    /// lock); see [`CommitSession::recover`].
    pub fn recover(&self, ledger: &dyn CommitLedger) -> Result<RecoveryReport, CommitError> {
        self.blocking_session()?.recover(ledger)
    }

    /// [`Committer::recover`], asking `faults` at every step of recovery
    /// (each undo, the settled record, each cleanup step), to test that a
    /// crash during recovery is itself recoverable.
    pub fn recover_with_faults(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<RecoveryReport, CommitError> {
        self.blocking_session()?.recover_with_faults(ledger, faults)
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
        self.blocking_session()?.commit_with_faults(request, ledger, faults)
    }

    /// The body of a commit, the lock held and recovery clean.
    fn commit_locked(
        &self,
        request: &CommitRequest<'_>,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<CommitReceipt, CommitError> {
        let transaction = request.transaction;
        // Nothing has touched the workspace yet: every failure before the
        // journal's intents is recorded as Stale or Failed and leaves no trace.
        let untouched = |error: CommitError| -> CommitError {
            let recorded = if matches!(error, CommitError::Stale { .. }) {
                ledger.stale(transaction)
            } else {
                ledger.failed(transaction)
            };
            // A ledger that cannot record it leaves Revalidating behind, which
            // the next recovery settles as abandoned (Failed): still true.
            let _ = recorded;
            error
        };
        if let Err(error) = self.check_request(request) {
            return Err(untouched(error));
        }
        let plan = plan::lower(transaction, request.diff.entries());
        let encoded = plan.encode(&self.key);
        let mut digest = [0_u8; 32];
        digest.copy_from_slice(&encoded[encoded.len() - 32..]);
        let digest = PlanDigest(digest);
        let txn = self.create_txn_dir(transaction).map_err(untouched)?;
        let syncs = Syncs::default();

        let Prepared { staged, witnesses, checked: revalidated } = match self
            .prepare(&txn, &plan, &encoded, request, faults)
        {
            Ok(prepared) => prepared,
            Err(CommitError::FaultInjected(point)) => return Err(CommitError::FaultInjected(point)),
            Err(error) => {
                // The outcome is recorded first: a crash before the directory
                // is gone leaves a terminal record and a directory recovery
                // only needs to remove.
                let error = untouched(error);
                if let Err(CommitError::FaultInjected(point)) = txn.clean(&self.workspace, Cleanup::Restored, faults) {
                    return Err(CommitError::FaultInjected(point));
                }
                return Err(error);
            }
        };

        // From the first durable intent on, a failure rolls back in place,
        // through the directories the operations write into as they are now.
        let parents = recover::Parents::of(&self.workspace, &plan);
        let mut journal = Journal::new(plan.transaction, digest);
        match self.journal_intents(&txn, &mut journal, &staged, &witnesses, faults, &syncs) {
            Ok(()) => {}
            Err(Stop::Fault(point)) => return Err(CommitError::FaultInjected(point)),
            Err(Stop::Abort { error, limit }) => {
                return Err(self.abort(ledger, transaction, &txn, error, limit, &parents));
            }
        }
        if let Err(source) = ledger.committing(transaction) {
            let error = CommitError::Ledger { transaction, step: "committing", source };
            return Err(self.abort(ledger, transaction, &txn, error, Some(0), &parents));
        }
        check(faults, FaultPoint::CommitStatePersisted)?;

        match self.apply_journaled(&txn, &plan, &mut journal, &witnesses, faults, &syncs) {
            Ok(()) => {}
            Err(Stop::Fault(point)) => return Err(CommitError::FaultInjected(point)),
            Err(Stop::Abort { error, limit }) => {
                return Err(self.abort(ledger, transaction, &txn, error, limit, &parents));
            }
        }

        // The commit point: a durable ledger's Committed, else the completion
        // marker (made durable before the ledger hears of it).
        let interrupted = |source| CommitError::RecoveryRequired { transaction, source: Box::new(source) };
        if !ledger.is_commit_point() {
            let marker = Marker { transaction, plan: digest };
            txn.write_marker(&self.workspace, &marker, &self.key)
                .map_err(|source| interrupted(CommitError::host("write marker", &txn.marker())(source)))?;
            syncs.file();
            syncs.dir();
            check(faults, FaultPoint::CommitMarkerSynced)?;
        }

        ledger
            .committed(transaction)
            .map_err(|source| interrupted(CommitError::Ledger { transaction, step: "committed", source }))?;
        check(faults, FaultPoint::CommittedStatePersisted)?;

        // The transaction is committed; a directory that cannot be removed
        // now is removed by the next recovery. An old node someone wrote to
        // after revalidation holds their bytes: it is moved aside, not deleted,
        // and if even that fails the directory stays for recovery.
        let kept = match self.keep_changed_originals(&txn, &plan, &journal) {
            Ok(kept) => kept.into_iter().map(|(path, kept)| KeptNode { transaction, path, kept }).collect(),
            Err(_) => return Ok(receipt(transaction, &plan, revalidated, &syncs, Vec::new())),
        };
        if let Err(CommitError::FaultInjected(point)) = self.clean(&txn, Cleanup::Committed, faults) {
            return Err(CommitError::FaultInjected(point));
        }
        Ok(receipt(transaction, &plan, revalidated, &syncs, kept))
    }

    /// Clean up `txn` as `cleanup` says. A committed transaction's directory
    /// is moved into `trash/` in one rename ([`FaultPoint::Discarded`]) and
    /// removed there by a thread of its own, off the commit's path; where
    /// the rename cannot be made, and for every other cleanup, its files are
    /// removed in place in the cleanup's order.
    pub(crate) fn clean(&self, txn: &TxnDir, cleanup: Cleanup, faults: &dyn FaultInjector) -> Result<(), CommitError> {
        if cleanup == Cleanup::Committed
            && let Some(discarded) = txn.discard(&self.workspace, &self.trash_root())
        {
            check(faults, FaultPoint::Discarded)?;
            self.sweep_later(discarded);
            return Ok(());
        }
        txn.clean(&self.workspace, cleanup, faults)
    }

    pub(crate) fn trash_root(&self) -> VPath {
        self.runtime_dir.child(TRASH_DIR).expect("a valid constant name")
    }

    /// Remove the discarded directory `path` on a thread of its own. Where
    /// no thread can be started it is left for the next recovery.
    fn sweep_later(&self, path: VPath) {
        let workspace = self.workspace.clone();
        let target = path.clone();
        let spawned = std::thread::Builder::new().name("vsh-sweep".to_owned()).spawn(move || {
            // Garbage: a failure leaves it for the next recovery's sweep.
            let _ = workspace.remove_tree(&target);
        });
        if let Ok(sweeper) = spawned {
            let mut sweeping = self.sweeping.lock().unwrap_or_else(PoisonError::into_inner);
            sweeping.retain(|(_, sweeper)| !sweeper.is_finished());
            sweeping.push((path, sweeper));
        }
    }

    /// Remove whatever `trash/` holds that no sweeper of this committer is
    /// removing right now (left by a process that stopped, or a sweep that
    /// failed). Best effort: garbage that cannot be removed stays, and is
    /// never read.
    pub(crate) fn sweep_trash(&self) {
        let trash = self.trash_root();
        let Ok(entries) = self.workspace.list_dir(&trash) else { return };
        let busy: Vec<VPath> = {
            let mut sweeping = self.sweeping.lock().unwrap_or_else(PoisonError::into_inner);
            sweeping.retain(|(_, sweeper)| !sweeper.is_finished());
            sweeping.iter().map(|(path, _)| path.clone()).collect()
        };
        for entry in entries {
            let Some(path) = std::str::from_utf8(&entry.name).ok().and_then(|name| trash.child(name).ok()) else {
                continue;
            };
            if !busy.contains(&path) {
                let _ = self.workspace.remove_tree(&path);
            }
        }
    }

    /// The checks of a request before anything is written: its shape, and
    /// the protected paths.
    fn check_request(&self, request: &CommitRequest<'_>) -> Result<(), CommitError> {
        // The bound first: validating a diff costs in proportion to its length.
        if request.diff.len() as u64 > format::MAX_PLAN_ENTRIES {
            let path = request.diff.entries()[0].path.clone();
            return Err(CommitError::InvalidDiff { path, reason: "the diff has more entries than a plan holds" });
        }
        validate::validate(request.diff.entries(), &self.excluded)?;
        if let Some(policy) = &self.protection {
            validate::check_protected(request.diff.entries(), policy, &self.view())?;
        }
        Ok(())
    }

    /// Create `txn/<transaction hex>/` (it holds the staged and old nodes too).
    fn create_txn_dir(&self, transaction: TransactionId) -> Result<TxnDir, CommitError> {
        let root = self.txn_root();
        match self.workspace.create_dir(&root, PRIVATE_DIR_MODE) {
            Ok(()) => {
                self.txn_root_synced.store(false, Ordering::Relaxed);
                spread_transactions(&self.workspace, &root);
            }
            Err(HostError::AlreadyExists { .. }) => {}
            Err(source) => return Err(CommitError::Host { op: "create transaction directory", path: root, source }),
        }
        let txn = TxnDir::new(&root, transaction);
        match txn.create(&self.workspace) {
            Ok(()) => Ok(txn),
            Err(HostError::AlreadyExists { path }) if path == txn.root => {
                Err(CommitError::TransactionDirExists { transaction })
            }
            Err(source) => {
                let _ = txn.clean(&self.workspace, Cleanup::Restored, &NoFaults);
                Err(CommitError::Host { op: "create transaction directory", path: txn.root, source })
            }
        }
    }

    /// Plan, stage and revalidate, writing without a barrier. Returns what
    /// was staged, every operation's intent witness and the number of
    /// dependencies revalidated.
    fn prepare(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        encoded: &[u8],
        request: &CommitRequest<'_>,
        faults: &dyn FaultInjector,
    ) -> Result<Prepared, CommitError> {
        let ws = &self.workspace;
        txn.write_plan(ws, encoded).map_err(CommitError::host("write plan", &txn.plan()))?;
        let staged = apply::stage(ws, txn, plan, (request.blobs, request.contents))?;
        check(faults, FaultPoint::Staged)?;
        let revalidated =
            revalidate::revalidate(&self.view(), request.diff.entries(), request.reads, request.max_conflicts)?;
        let witnesses = apply::intent_witnesses(ws, plan, &staged.installed, &revalidated.before)?;
        check(faults, FaultPoint::Revalidated)?;
        Ok(Prepared { staged, witnesses, checked: revalidated.checked })
    }

    /// Journal the intent of every operation in one write, and make it
    /// durable with the plan and every staged file in one batch of file
    /// barriers (the filesystem's journal commits concurrent ones together),
    /// then publish it and make every directory entry durable in a second
    /// batch: the transaction directory, `txn/` and the runtime
    /// directory.
    fn journal_intents(
        &self,
        txn: &TxnDir,
        journal: &mut Journal,
        staged: &apply::Stage,
        witnesses: &[(u64, u64)],
        faults: &dyn FaultInjector,
        syncs: &Syncs,
    ) -> Result<(), Stop> {
        let ws = &self.workspace;
        journal.records = witnesses
            .iter()
            .enumerate()
            .map(|(index, (witness, stamp))| JournalRecord {
                kind: RecordKind::Intent,
                operation: index32(index),
                witness: *witness,
                stamp: *stamp,
            })
            .collect();
        let nothing_applied = |error| Stop::Abort { error, limit: Some(0) };
        txn.write_journal_next(ws, journal, &self.key, false)
            .map_err(|source| nothing_applied(CommitError::host("write journal", &txn.journal())(source)))?;
        let mut files = vec![Durable::Own(txn.plan()), Durable::Own(txn.journal_next())];
        files.extend(staged.files.iter().map(|operation| Durable::Staged(*operation)));
        vsh_host::concurrently(&files, |file| {
            match file {
                Durable::Own(path) => ws.sync_file(path).map_err(CommitError::host("sync", path))?,
                Durable::Staged(operation) => staged.sync_file(txn, *operation)?,
            }
            syncs.file();
            Ok(())
        })
        .map_err(nothing_applied)?;
        txn.publish_journal(ws)
            .map_err(|source| nothing_applied(CommitError::host("write journal", &txn.journal())(source)))?;
        // The runtime directory holds `txn/`'s entry: synced until this
        // committer has done so once with `txn/` in place.
        let mut dirs = vec![txn.root.clone(), self.txn_root()];
        let runtime_synced = self.txn_root_synced.load(Ordering::Relaxed);
        if !runtime_synced {
            dirs.push(self.runtime_dir.clone());
        }
        vsh_host::concurrently(&dirs, |dir| {
            ws.sync_dir(dir).map_err(CommitError::host("sync journal", dir))?;
            syncs.dir();
            Ok(())
        })
        .map_err(nothing_applied)?;
        if !runtime_synced {
            self.txn_root_synced.store(true, Ordering::Relaxed);
        }
        check(faults, FaultPoint::PlanSynced)?;
        check(faults, FaultPoint::StageSynced)?;
        for index in 0..witnesses.len() {
            check(faults, FaultPoint::IntentSynced(index32(index)))?;
        }
        Ok(())
    }

    /// Apply every operation, journal the done records (a plan that makes a
    /// directory only), sync, verify.
    fn apply_journaled(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        journal: &mut Journal,
        witnesses: &[(u64, u64)],
        faults: &dyn FaultInjector,
        syncs: &Syncs,
    ) -> Result<(), Stop> {
        let ws = &self.workspace;
        let count = plan.operations.len();
        for (index, (witness, _)) in witnesses.iter().copied().enumerate() {
            let done = apply::apply_one(ws, txn, plan, index, witness).map_err(|failure| {
                let operation = plan.operations[index];
                let path = plan.entries[operation.entry as usize].path.clone();
                // Creating a directory is two steps; the first may have happened,
                // unless it is what failed because the name was taken (by
                // someone else: their directory is not ours to remove) or its
                // parent was not there to make it in.
                let maybe_applied = matches!(operation.action, Action::CreateDir { .. })
                    && !matches!(failure, ApplyFailure::NotMade(_));
                let error = match failure {
                    ApplyFailure::Host(source) | ApplyFailure::NotMade(source) => {
                        CommitError::Apply { path, applied: index as u64, source }
                    }
                    ApplyFailure::HardLinked(links) => CommitError::HardLinked { path, links },
                    ApplyFailure::Changed => apply::stale(&path, ConflictReason::Precondition),
                };
                Stop::Abort { error, limit: Some(index + usize::from(maybe_applied)) }
            })?;
            journal.records.push(JournalRecord {
                kind: RecordKind::Done,
                operation: index32(index),
                witness: done,
                stamp: 0,
            });
            check(faults, FaultPoint::OperationApplied(index32(index)))?;
        }
        // A done record tells recovery more than the intent only for a
        // directory the commit made (its inode, to tell it from one someone
        // made in its place): without one the journal is not written again
        // (one file barrier, a rename and the transaction directory's
        // barrier fewer).
        let journal_done = journals_done(plan);
        if journal_done {
            txn.write_journal(ws, journal, &self.key)
                .map_err(|source| CommitError::host("write journal", &txn.journal())(source))?;
            syncs.file();
        }
        apply::sync_applied(ws, txn, plan, journal_done, syncs)?;
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

    /// Roll a failed commit back in place. Everything undone and verified:
    /// `error` (the ledger holds Failed). Operations someone else's change is
    /// in the way of left as they are: [`CommitError::Unresolved`] (the ledger
    /// holds `RecoveryRequired`). The rollback unable to finish:
    /// [`CommitError::RecoveryRequired`], for the next recovery.
    fn abort(
        &self,
        ledger: &dyn CommitLedger,
        transaction: TransactionId,
        txn: &TxnDir,
        error: CommitError,
        limit: Option<usize>,
        parents: &recover::Parents,
    ) -> CommitError {
        match self.roll_back_in_place(ledger, transaction, txn, limit, parents) {
            Ok(Ok(Outcome::RolledBack | Outcome::Cleaned)) => error,
            Ok(Ok(Outcome::Unresolved(unresolved))) => {
                CommitError::Unresolved { transaction, paths: unresolved.paths, source: Box::new(error) }
            }
            _ => {
                if ledger.state(transaction).ok().flatten() == Some(vsh_types::TransactionState::Committing) {
                    let _ = ledger.recovery_required(transaction);
                }
                CommitError::RecoveryRequired { transaction, source: Box::new(error) }
            }
        }
    }
}

/// What planning, staging and revalidation produced.
struct Prepared {
    /// The staged nodes, not yet durable.
    staged: apply::Stage,
    /// Every operation's intent witness and stamp.
    witnesses: Vec<(u64, u64)>,
    /// The number of dependencies and preconditions revalidated.
    checked: u64,
}

/// A file the commit makes durable before its intents are published.
enum Durable {
    /// One of the transaction directory's own files: the plan, `journal.next`.
    Own(VPath),
    /// The staged file of an operation.
    Staged(usize),
}

fn receipt(
    transaction: TransactionId,
    plan: &Plan,
    revalidated: u64,
    syncs: &Syncs,
    kept: Vec<KeptNode>,
) -> CommitReceipt {
    CommitReceipt {
        transaction,
        operations: plan.operations.len() as u64,
        verified_paths: plan.entries.len() as u64,
        revalidated_dependencies: revalidated,
        syncs: SyncCounts::of(syncs),
        kept,
    }
}

/// Whether a commit of `plan` journals its done records: only a plan that
/// makes a directory does (the new directory's inode is the one done witness
/// that differs from its intent's).
pub(crate) fn journals_done(plan: &Plan) -> bool {
    plan.operations.iter().any(|operation| matches!(operation.action, Action::CreateDir { .. }))
}

fn index32(index: usize) -> u32 {
    u32::try_from(index).expect("a plan has at most u32::MAX operations")
}

impl CommitSession<'_> {
    /// [`Committer::revalidate`] in this session: validate the diff and
    /// check every dependency and precondition against the workspace as it
    /// is, applying nothing (whether approving the work could lead to a
    /// commit).
    pub fn revalidate(&self, request: &CommitRequest<'_>) -> Result<(), CommitError> {
        let committer = self.committer;
        validate::validate(request.diff.entries(), &committer.excluded)?;
        revalidate::revalidate(&committer.view(), request.diff.entries(), request.reads, request.max_conflicts)
            .map(drop)
    }

    /// Recover every interrupted commit on this workspace (see the module
    /// docs of `recover.rs`, summarized in the crate docs). A commit in this
    /// session does this first if the caller has not, and refuses to run if
    /// any conflict remains.
    pub fn recover(&self, ledger: &dyn CommitLedger) -> Result<RecoveryReport, CommitError> {
        self.recover_with_faults(ledger, &NoFaults)
    }

    /// [`CommitSession::recover`], asking `faults` at every step of recovery.
    pub fn recover_with_faults(
        &self,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<RecoveryReport, CommitError> {
        let report = self.committer.recover_locked(ledger, faults)?;
        self.recovered.set(report.is_clean());
        Ok(report)
    }

    /// Apply the transaction's diff to the workspace, exactly as previewed,
    /// moving it through `ledger` (see the crate docs for the protocol and
    /// [`CommitError`] for what each failure leaves). The ledger must hold
    /// the transaction in Revalidating (moved there in this session); every
    /// outcome is recorded by the committer.
    pub fn commit(&self, request: &CommitRequest<'_>, ledger: &dyn CommitLedger) -> Result<CommitReceipt, CommitError> {
        self.commit_with_faults(request, ledger, &NoFaults)
    }

    /// [`CommitSession::commit`], asking `faults` at every [`FaultPoint`].
    pub fn commit_with_faults(
        &self,
        request: &CommitRequest<'_>,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<CommitReceipt, CommitError> {
        if !self.recovered.get() {
            // The caller moved this transaction to Revalidating already: it is
            // this session's, not an abandoned one.
            let report = self.committer.recover_locked_except(ledger, &NoFaults, Some(request.transaction))?;
            self.recovered.set(report.is_clean());
            if !report.is_clean() {
                let error = CommitError::RecoveryPending { conflicts: report.conflicts };
                let _ = ledger.failed(request.transaction);
                return Err(error);
            }
        }
        self.committer.commit_locked(request, ledger, faults)
    }

    /// An operator's decision for a transaction recovery left unresolved:
    /// put the workspace back in the before state, moving whatever is in the
    /// way aside, never deleting it (see [`RestoreReport`]).
    pub fn restore(&self, transaction: TransactionId, ledger: &dyn CommitLedger) -> Result<RestoreReport, CommitError> {
        self.restore_with_faults(transaction, ledger, &NoFaults)
    }

    /// Settle a commit whose record lost how it ended (left Committing or
    /// `RecoveryRequired` with nothing kept, as a salvaged log leaves one)
    /// by what the workspace holds against `entries`, its diff (see
    /// [`Settled`]).
    pub fn settle(
        &self,
        transaction: TransactionId,
        entries: &[vsh_types::DiffEntry],
        ledger: &dyn CommitLedger,
    ) -> Result<Settled, CommitError> {
        self.committer.settle_locked(transaction, entries, ledger)
    }

    /// [`CommitSession::restore`], asking `faults` after each step.
    pub fn restore_with_faults(
        &self,
        transaction: TransactionId,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<RestoreReport, CommitError> {
        self.committer.restore_locked(transaction, ledger, faults, false)
    }

    /// An operator's other decision for a transaction recovery left
    /// unresolved: keep the workspace as it is. Nothing is put back; the
    /// nodes the commit had taken from its paths (in its quarantine: the
    /// before nodes, or a racing writer's) are moved aside into
    /// `recovered/<transaction>/`, never deleted; the record becomes Failed
    /// and the commit's directory is removed ([`RestoreReport::kept`]).
    pub fn keep(&self, transaction: TransactionId, ledger: &dyn CommitLedger) -> Result<RestoreReport, CommitError> {
        self.keep_with_faults(transaction, ledger, &NoFaults)
    }

    /// [`CommitSession::keep`], asking `faults` after each step.
    pub fn keep_with_faults(
        &self,
        transaction: TransactionId,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
    ) -> Result<RestoreReport, CommitError> {
        self.committer.restore_locked(transaction, ledger, faults, true)
    }
}
