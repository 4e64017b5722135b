//! [`CommitPath`]: the way from a bound, approved transaction to the
//! workspace: one commit session (recovery first, then the reservation, then
//! the journaled commit), and recovery and an operator's restore on their own.

use vsh_commit::{CommitRequest, Committer, MemoryContents, RecoveryReport, RestoreReport, StoreLedger};
use vsh_host::LockWait;
use vsh_types::{CanonicalDiff, ReadSet, TransactionId};

use crate::VshError;
use crate::config::CommitFaults;
use crate::receipt::CommitReceipt;
use crate::records::Records;

/// The committer of one workspace, how long it waits for the commit lock, and
/// what recovery did when the runtime opened.
#[derive(Debug)]
pub(crate) struct CommitPath {
    committer: Committer,
    lock_wait: LockWait,
    faults: Option<CommitFaults>,
    startup_recovery: RecoveryReport,
    /// Whether another process held the commit lock when this runtime opened,
    /// so startup recovery was left to it (or to this runtime's first commit).
    recovery_deferred: bool,
}

impl CommitPath {
    /// Recover whatever a crash interrupted, unless another process holds the
    /// commit lock right now: it is committing or recovering this workspace,
    /// and every commit recovers first anyway, so opening never waits for it.
    pub(crate) fn open(
        committer: Committer,
        lock_wait: LockWait,
        faults: Option<CommitFaults>,
        records: &Records,
        now_ms: u64,
    ) -> Result<Self, VshError> {
        let (startup_recovery, recovery_deferred) = match committer.try_session()? {
            Some(session) => (recover_and_settle(&session, records, now_ms)?, false),
            None => (RecoveryReport::default(), true),
        };
        Ok(Self { committer, lock_wait, faults, startup_recovery, recovery_deferred })
    }

    /// What recovery did when the runtime opened.
    pub(crate) fn startup_recovery(&self) -> &RecoveryReport {
        &self.startup_recovery
    }

    /// Whether startup recovery was left to another process.
    pub(crate) fn recovery_deferred(&self) -> bool {
        self.recovery_deferred
    }

    /// Whether `transaction`'s stored work could still commit on the
    /// workspace as it is (every dependency and precondition holds),
    /// waiting for the commit lock as configured; applies nothing.
    pub(crate) fn revalidate(
        &self,
        records: &Records,
        transaction: TransactionId,
        (diff, reads): (&CanonicalDiff, &ReadSet),
    ) -> Result<(), VshError> {
        let session = self.committer.session(&self.lock_wait)?;
        session.revalidate(&CommitRequest::new(transaction, diff, reads, records.blobs())).map_err(VshError::Commit)
    }

    /// `f` run while this process holds the commit lock: waiting for it as
    /// configured (`wait`, a timeout being the error), or only if no one
    /// holds it (`None` when someone does: a reader never waits for a
    /// commit, and never sees one half applied). Recovery runs first, as
    /// before a commit: a commit killed since this runtime opened left the
    /// workspace half applied (sec93 M2: a listing then recorded waiting
    /// work stale for good); `None` when it cannot leave the workspace
    /// clean (a conflict or an unresolved commit for the operator, or an
    /// error), nothing judged.
    pub(crate) fn under_lock<T>(
        &self,
        records: &Records,
        wait: bool,
        now_ms: u64,
        f: impl FnOnce() -> T,
    ) -> Result<Option<T>, VshError> {
        let session =
            if wait { Some(self.committer.session(&self.lock_wait)?) } else { self.committer.try_session()? };
        let Some(session) = session else { return Ok(None) };
        // Nor while a commit recovery could not settle is left for the
        // operator (sec94 L2: its paths half applied, a listing recorded
        // work stale for good that `vsh recover --restore` made committable).
        match recover_and_settle(&session, records, now_ms) {
            Ok(report) if report.is_clean() && report.unresolved.is_empty() => Ok(Some(f())),
            _ => Ok(None),
        }
    }

    /// [`CommitPath::revalidate`] without taking the commit lock
    /// ([`vsh_commit::Committer::revalidate_unlocked`]): for a check made
    /// while [`CommitPath::under_lock`] holds it.
    pub(crate) fn revalidate_unlocked(
        &self,
        records: &Records,
        transaction: TransactionId,
        (diff, reads): (&CanonicalDiff, &ReadSet),
    ) -> Result<(), VshError> {
        self.committer
            .revalidate_unlocked(&CommitRequest::new(transaction, diff, reads, records.blobs()))
            .map_err(VshError::Commit)
    }

    /// Run recovery, waiting for the commit lock as configured.
    pub(crate) fn recover(&self, records: &Records, now_ms: u64) -> Result<RecoveryReport, VshError> {
        let session = self.committer.session(&self.lock_wait)?;
        recover_and_settle(&session, records, now_ms)
    }

    /// An operator's restore of a transaction recovery left unresolved (or,
    /// with `keep`, its keeping of the workspace as it is), after a recovery
    /// that must come out clean.
    pub(crate) fn restore(
        &self,
        records: &Records,
        transaction: TransactionId,
        now_ms: u64,
        keep: bool,
    ) -> Result<RestoreReport, VshError> {
        let session = self.committer.session(&self.lock_wait)?;
        let report = recover_and_settle(&session, records, now_ms)?;
        let ledger = StoreLedger::recovery(records.transactions(), now_ms);
        if !report.is_clean() {
            return Err(VshError::Commit(vsh_commit::CommitError::RecoveryPending { conflicts: report.conflicts }));
        }
        Ok(if keep { session.keep(transaction, &ledger)? } else { session.restore(transaction, &ledger)? })
    }

    /// Reserve, revalidate and apply a bound transaction, moving its record
    /// through the state table. Everything happens in one commit session:
    /// recovery first, then the reservation, so that recovery (which holds
    /// the same lock) may settle any reservation it finds as abandoned. From
    /// the move to Revalidating on, the commit engine records every outcome.
    /// `unwritten` is the record of a process-local preview, created in the
    /// same append as its reservation; `contents` are new contents held in
    /// memory (a process-local preview's), staged before the blob store's.
    /// `guard` runs in the session, after recovery and before the
    /// reservation: its error is the commit's, nothing written. `landed`
    /// runs once the commit has landed, still in the session (no other
    /// commit can change the workspace meanwhile).
    pub(crate) fn commit(
        &self,
        records: &Records,
        transaction: TransactionId,
        (diff, reads, contents): (&CanonicalDiff, &ReadSet, &MemoryContents),
        unwritten: Option<&vsh_store::TransactionRecord>,
        now: u64,
        (guard, landed): (&dyn Fn() -> Result<(), VshError>, &dyn Fn()),
    ) -> Result<CommitReceipt, VshError> {
        let transactions = records.transactions();
        let session = self.committer.session(&self.lock_wait)?;
        let report = recover_and_settle(&session, records, now)?;
        if !report.is_clean() {
            return Err(VshError::Commit(vsh_commit::CommitError::RecoveryPending { conflicts: report.conflicts }));
        }
        guard()?;
        // Reserved and Revalidating (and a preview's record) in one append.
        let reservation = transactions.reserve_revalidating(transaction, now, unwritten)?;
        let ledger = StoreLedger::reserved(transactions, reservation, now);
        let request = CommitRequest::new(transaction, diff, reads, records.blobs()).with_contents(contents);
        let receipt = match &self.faults {
            Some(faults) => session.commit_with_faults(&request, &ledger, faults.0.as_ref())?,
            None => session.commit(&request, &ledger)?,
        };
        landed();
        Ok(receipt)
    }
}

/// Recovery in `session`, then each commit whose record lost how it ended
/// (unresolved with nothing kept, as a salvaged log leaves one) settled by
/// what the workspace holds against its stored diff
/// ([`vsh_commit::CommitSession::settle`]): landed, Committed; never written,
/// Failed; the rest stays unresolved for the operator. A diff that cannot be
/// loaded leaves its transaction unresolved too.
fn recover_and_settle(
    session: &vsh_commit::CommitSession<'_>,
    records: &Records,
    now_ms: u64,
) -> Result<RecoveryReport, VshError> {
    let ledger = StoreLedger::recovery(records.transactions(), now_ms);
    let mut report = session.recover(&ledger)?;
    let mut unresolved = Vec::with_capacity(report.unresolved.len());
    for left in std::mem::take(&mut report.unresolved) {
        if left.directory.is_some() {
            unresolved.push(left);
            continue;
        }
        let Ok(diff) = records.stored_diff(left.transaction) else {
            unresolved.push(left);
            continue;
        };
        match session.settle(left.transaction, diff.entries(), &ledger)? {
            vsh_commit::Settled::Committed => report.settled_committed.push(left.transaction),
            vsh_commit::Settled::Failed => report.settled_failed.push(left.transaction),
            vsh_commit::Settled::NotLost | vsh_commit::Settled::Neither(_) => unresolved.push(left),
        }
    }
    report.unresolved = unresolved;
    Ok(report)
}
