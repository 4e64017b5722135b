//! [`Runtime`]: the facade over one workspace, composed of owned parts, each
//! with one job:
//!
//! - [`Runs`]: the stages of a run, up to a bound, stored transaction;
//! - [`Records`]: transaction records, durable artifacts and blobs;
//! - [`Previews`]: auto-approved previews held in this process, and the one
//!   way off the auto-approved path ([`Previews::demote`]);
//! - [`CommitPath`]: commit sessions, recovery and restore;
//! - [`HookGate`]: the commit hook's prepare, resolve and fail.
//!
//! The runtime decides only what crosses parts: what a run's result becomes,
//! and whether a commit needs the hook first. Opening is in [`open`].

mod open;
pub(crate) mod revert;
mod worker_digest;

use std::time::Instant;

use vsh_commit::{RecoveryReport, RestoreReport};
use vsh_policy::TransactionPolicy;
use vsh_store::{ApprovalGrant, GcReport, RetentionConfig, TransactionRecord};
use vsh_types::{PrincipalId, ReadSet, TransactionId, TransactionState};

use crate::VshError;
use crate::cancel::ExecutionCancellation;
use crate::commit_path::CommitPath;
use crate::hook::{CommitPreparation, CommitResolution, HookDecision, HookDecisionRecord, RequestEvent};
use crate::hook_gate::{HookGate, Sources, Verdict};
use crate::previews::Previews;
use crate::receipt::{Receipt, StageTimings, StoredProgram};
use crate::records::{Committable, Records};
use crate::request::{RunMode, RunRequest};
use crate::run::{Concluding, Ran, Runs, clock_ms, elapsed_ns};

/// The most bytes of one file a commit keeps of what it replaces, for the
/// review of committed work ([`Runtime::show`]).
pub(crate) const KEPT_BEFORE_FILE_BYTES: u64 = 1 << 20;

/// Whether work in `state` is waiting for its decision or its commit, so
/// that a listing or a review that finds the workspace moved under it
/// records it stale ([`vsh_store::TransactionStore::mark_stale`]).
fn may_go_stale(state: TransactionState) -> bool {
    matches!(state, TransactionState::PendingApproval | TransactionState::AutoApproved | TransactionState::Approved)
}

/// The runs of one transaction's work committed at one moment
/// ([`Runtime::work_done_so_far`]): a rerun decided then commits only while
/// no other is committed ([`Runtime::commit_rerun_cancellable`],
/// [`RunRequest::with_done_so_far`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkDoneSoFar {
    /// The transaction whose work it is (the one run again).
    work: TransactionId,
    /// Its runs committed then.
    committed: std::collections::BTreeSet<TransactionId>,
}

/// Pending work [`Runtime::pending_and_stale`] found stale, and recorded so.
#[derive(Debug)]
pub struct FoundStale {
    /// The transaction.
    pub transaction: TransactionId,
    /// What its revalidation found: [`vsh_commit::CommitError::Stale`],
    /// naming each path that changed.
    pub stale: vsh_commit::CommitError,
}

/// The most pending transactions one [`Runtime::pending`] revalidates.
pub const STALE_CHECKS_PER_LISTING: usize = 200;

/// The most records, the latest made since a transaction, whose artifacts
/// [`Runtime::reruns_of`] reads.
pub const RERUNS_SCANNED: usize = 1_000;

/// The most bytes in all a commit keeps of what it replaces.
pub(crate) const KEPT_BEFORE_BYTES: u64 = 16 << 20;

/// A vsh runtime over one workspace.
///
/// Runs are independent: each captures a fresh observed snapshot. Commits are
/// serialized per workspace by the commit engine's lock, across runtimes and
/// processes. Pending approvals are durable; auto-approved previews are held in
/// this runtime's memory and must be committed by it.
#[derive(Debug)]
pub struct Runtime {
    runs: Runs,
    records: Records,
    previews: Previews,
    commits: CommitPath,
    gate: HookGate,
}

impl Runtime {
    fn sources(&self) -> Sources<'_> {
        Sources { records: &self.records, previews: &self.previews, workspace: self.runs.workspace() }
    }

    /// Whether programs run in this process rather than the confined worker.
    pub fn is_in_process(&self) -> bool {
        self.runs.is_in_process()
    }

    /// The worker binary every program runs in: its canonical path, its
    /// `stat` identity and its BLAKE3, which the transactions' evidence binds
    /// (`None` in process). Recorded in the data directory so that the next
    /// process on an unchanged binary does not hash it again.
    pub fn worker_binary(&self) -> Option<vsh_monty::BinaryDigest> {
        self.runs.worker_binary()
    }

    /// What recovery did when this runtime opened: commits a crash interrupted
    /// are rolled forward (past their completion marker) or back (before it).
    /// Conflicts are left untouched and block further commits until resolved.
    pub fn startup_recovery(&self) -> &RecoveryReport {
        self.commits.startup_recovery()
    }

    /// Whether startup recovery was left to the other process that held the
    /// commit lock when this runtime opened ([`Runtime::startup_recovery`] is
    /// then empty; [`Runtime::recover`] waits for the lock).
    pub fn recovery_deferred(&self) -> bool {
        self.commits.recovery_deferred()
    }

    /// Run recovery again (for example after an operator resolved a
    /// conflict), waiting for the commit lock as configured
    /// ([`crate::RuntimeConfig::with_lock_wait`]).
    pub fn recover(&self) -> Result<RecoveryReport, VshError> {
        self.commits.recover(&self.records, clock_ms())
    }

    /// An operator's decision for a transaction whose rollback recovery left
    /// unresolved (someone else changed some of its paths during the commit):
    /// put the workspace back in the before state. Whatever is in the way is
    /// moved aside into vsh's runtime directory (`.vsh/recovered/<tx>/`),
    /// never deleted; the transaction becomes Failed.
    pub fn restore(&self, transaction: TransactionId) -> Result<RestoreReport, VshError> {
        self.commits.restore(&self.records, transaction, clock_ms(), false)
    }

    /// The operator's other decision for such a transaction: keep the
    /// workspace as it is (the operator checked it, or set it right by
    /// hand). Nothing is put back; what the commit had moved aside (the
    /// before nodes, or a racing writer's) goes into `.vsh/recovered/<tx>/`,
    /// never deleted; the transaction becomes Failed, its report saying it
    /// was kept ([`RestoreReport::kept`]).
    pub fn keep_as_found(&self, transaction: TransactionId) -> Result<RestoreReport, VshError> {
        self.commits.restore(&self.records, transaction, clock_ms(), true)
    }

    /// Record `name` as the name behind its principal digest
    /// ([`PrincipalId::digest`] of its bytes), so that reviews name who
    /// approved work ([`Runtime::principal_name`]). Best effort, in the
    /// workspace's MAC'd record of names (`vsh_store::PrincipalNames`): a name
    /// over 64 bytes, or a record that cannot be written, leaves the digest
    /// alone to be shown.
    pub fn record_principal_name(&self, name: &str) {
        self.records.record_principal_name(name);
    }

    /// What the rejection of `transaction` said no to: the work (every run
    /// of it), that run alone, or nothing (its agent discarded it), as
    /// recorded by [`Runtime::record_rejection_scope`]; the work where
    /// nothing is recorded.
    pub fn rejection_scope(&self, transaction: TransactionId) -> vsh_store::RejectionScope {
        self.records.rejection_scopes().scope_of(&transaction)
    }

    /// Every recorded rejection scope, read once (see
    /// [`Runtime::rejection_scope`]).
    pub fn rejection_scopes(&self) -> vsh_store::RejectionScopes {
        self.records.rejection_scopes()
    }

    /// Record what the rejection of `transaction` said no to, in the
    /// workspace's MAC'd record (`vsh_store::RejectionScopes`), best effort:
    /// a record lost or never made reads as the work's.
    pub fn record_rejection_scope(&self, transaction: TransactionId, scope: vsh_store::RejectionScope) {
        self.records.record_rejection_scope(&transaction, scope);
    }

    /// The name recorded for `principal`, if one was and it digests to it.
    pub fn principal_name(&self, principal: &PrincipalId) -> Option<String> {
        self.records.principal_names().name_of(principal)
    }

    /// Record `text`, a policy file (see [`vsh_policy::PolicyFile`]), as this
    /// workspace's policy in its trusted data directory, where no guest can
    /// reach it: every runtime opened later without an explicit profile or
    /// policy file uses it. Validated before anything is written; written
    /// atomically. This runtime keeps the policy it opened with. Returns the
    /// recorded policy's digest (with the default data directory).
    pub fn record_workspace_policy(&self, text: &str) -> Result<vsh_types::PolicyDigest, VshError> {
        self.records.record_workspace_policy(text)
    }

    /// For a run that failed after the policy refused it accesses
    /// ([`VshError::refused_accesses`]), how this runtime's policy would have to
    /// change to allow each one, in order, for the first
    /// [`vsh_policy::MAX_LISTED_DENIALS`] (what an error lists); empty for any
    /// other error.
    pub fn remedies(&self, error: &VshError) -> Vec<String> {
        error.refused_accesses().map_or_else(Vec::new, |denied| {
            denied
                .iter()
                .take(vsh_policy::MAX_LISTED_DENIALS)
                .map(|denied| self.runs.policy().calls().remedy(denied))
                .collect()
        })
    }

    /// The text of the policy the workspace recorded
    /// ([`Runtime::record_workspace_policy`]), if it recorded one.
    pub fn workspace_policy_text(&self) -> Result<Option<String>, VshError> {
        self.records.workspace_policy_text()
    }

    /// Whether a storage failure stopped this runtime's stores (a failed
    /// write whose outcome on disk is unknown poisons them: every later
    /// call is [`vsh_store::StoreError::Poisoned`]). A long-lived host (a
    /// server) opens a new runtime instead, which reads the disk afresh.
    pub fn is_stopped(&self) -> bool {
        self.records.blobs().is_poisoned() || self.records.transactions().is_poisoned()
    }

    /// The active policy.
    pub fn policy(&self) -> &TransactionPolicy {
        self.runs.policy()
    }

    /// `Ok` unless this runtime decides under the workspace's recorded
    /// policy and that policy was recorded again (or changed) since it
    /// opened ([`VshError::WorkspacePolicyReplaced`]). Every run, approval
    /// and commit checks it first; a long-lived host (a server) asks it
    /// before each request and opens a new runtime instead.
    ///
    /// # Errors
    ///
    /// [`VshError::WorkspacePolicyReplaced`], or the data directory's error
    /// reading the file.
    pub fn check_policy_current(&self) -> Result<(), VshError> {
        self.records.check_policy_current()
    }

    /// Run a program and preview its effect, whatever the request's mode.
    pub fn preview(&self, request: &RunRequest<'_>) -> Result<Receipt, VshError> {
        self.run(&request.clone().with_mode(RunMode::Preview))
    }

    /// Run a program against a fresh virtual image of the workspace, decide, and in
    /// [`RunMode::Auto`] commit it if, and only if, the policy auto-approves.
    ///
    /// A `PendingApproval` transaction is stored durably (it survives a reopen)
    /// and waits for [`Runtime::approve`]; an auto-approved preview is held by
    /// this runtime for [`Runtime::commit`].
    pub fn run(&self, request: &RunRequest<'_>) -> Result<Receipt, VshError> {
        self.run_cancellable(request, &ExecutionCancellation::new())
    }

    /// [`Runtime::run`], and while the commit is stale (the workspace changed
    /// under the transaction), run the program again on the current workspace,
    /// at most `retries` more times: each attempt is a new transaction, the
    /// stale one stays recorded as `Stale`. `on_stale(attempt, &error)` hears of
    /// each stale attempt (1 for the first) before the next one starts. The
    /// last attempt's outcome is returned; any other outcome ends the retries.
    pub fn run_retrying_stale(
        &self,
        request: &RunRequest<'_>,
        retries: u32,
        mut on_stale: impl FnMut(u32, &VshError),
    ) -> Result<Receipt, VshError> {
        let mut attempt = 0;
        loop {
            match self.run(request) {
                Err(error @ VshError::Commit(vsh_commit::CommitError::Stale { .. })) if attempt < retries => {
                    attempt += 1;
                    on_stale(attempt, &error);
                }
                outcome => return outcome,
            }
        }
    }

    /// [`Runtime::run`] with a cancellation handle, checked between stages. A
    /// cancellation that wins before the commit enters returns
    /// [`VshError::Cancelled`] and commits nothing (a preview it left behind is
    /// discarded as by [`Runtime::discard_cancelled`]); once the commit has
    /// entered, its real outcome is returned.
    pub fn run_cancellable(
        &self,
        request: &RunRequest<'_>,
        cancel: &ExecutionCancellation,
    ) -> Result<Receipt, VshError> {
        let started = Instant::now();
        self.records.check_policy_current()?;
        let ran = self.runs.run(request, cancel, &self.records, started)?;
        self.settle(request, ran, cancel, started)
    }

    /// What a bound, stored run becomes: an auto-approved preview is kept
    /// (in memory, unless stored durably), a cancellation that won discards
    /// it, and in [`RunMode::Auto`] auto-approved work is committed.
    fn settle(
        &self,
        request: &RunRequest<'_>,
        ran: Ran,
        cancel: &ExecutionCancellation,
        started: Instant,
    ) -> Result<Receipt, VshError> {
        let Ran { artifact, mut receipt, contents } = ran;
        let (transaction, state) = (receipt.transaction, receipt.state);
        // A rerun decided before another run of its work was committed is
        // not kept to commit later (sec93 M1: it ran after that commit, on
        // what it left, and a `vsh commit` of it did the work twice). A
        // commit after this one changed what this run read or changes (its
        // before states), so its commit finds it stale.
        if let Some(so_far) = &request.done_so_far
            && matches!(state, TransactionState::AutoApproved | TransactionState::PendingApproval)
        {
            self.refuse_done_meanwhile(transaction, so_far)?;
        }
        // A durable preview is already stored with its artifact; any other
        // auto-approved preview lives in this runtime's memory, contents and all.
        if state == TransactionState::AutoApproved && self.runs.durable_preview(state, receipt.changed_paths).is_none()
        {
            self.previews.keep(artifact, receipt.clone(), contents, clock_ms())?;
        }
        if cancel.is_cancelled() {
            self.discard_cancelled(transaction)?;
            return Err(VshError::Cancelled);
        }
        if request.mode == RunMode::Auto && state == TransactionState::AutoApproved && receipt.changed_paths == 0 {
            // Nothing to write: done, and, as a preview that changes nothing,
            // kept on no record (a log row saying nothing of what ran).
            receipt.state = TransactionState::Committed;
        } else if request.mode == RunMode::Auto && state == TransactionState::AutoApproved {
            let committed = self.commit_guarded(transaction, clock_ms(), cancel, request.done_so_far.as_ref())?;
            receipt.state = committed.state;
            receipt.commit = committed.commit;
            receipt.timings.commit = committed.timings.commit;
            // What the commit itself had to say (the loss history it could
            // not record).
            receipt.warnings.extend(
                committed
                    .warnings
                    .into_iter()
                    .filter(|warning| matches!(warning, crate::Warning::LossHistoryUnrecorded { .. })),
            );
            if receipt.state == TransactionState::Committed {
                committed_as_asked(&mut receipt.warnings, transaction);
            }
        }
        receipt.timings.total = elapsed_ns(started);
        Ok(receipt)
    }

    /// A candidate workspace's promotion: decide, bind and store what
    /// `concluding` holds (its request is the session's transcript, in
    /// [`RunMode::Auto`] to commit at once what the policy auto-approves),
    /// then settle it as a run.
    pub(crate) fn promote(&self, concluding: Concluding<'_, '_>, started: Instant) -> Result<Receipt, VshError> {
        let request = concluding.request.clone();
        let cancel = ExecutionCancellation::new();
        self.records.check_policy_current()?;
        let ran = self.runs.conclude(concluding, &self.records, &|| Ok(()))?;
        self.settle(&request, ran, &cancel, started)
    }

    /// The stages of runs, for a candidate workspace's steps.
    pub(crate) fn runs(&self) -> &Runs {
        &self.runs
    }

    /// Approve a pending transaction (or approved work whose approval
    /// lapsed) on behalf of `principal` (an opaque label's
    /// digest: vsh binds it, authenticating it is the host's job), valid from
    /// `issued_ms` until `expires_ms` (exclusive, milliseconds since the Unix
    /// epoch). The transaction must have been made under the active policy,
    /// and could still commit on the workspace as it is: stale work is
    /// refused with [`VshError::ApprovalStale`] naming the paths, and its
    /// record becomes `Stale` (it can never commit: run its program again).
    pub fn approve(
        &self,
        transaction: TransactionId,
        principal: PrincipalId,
        issued_ms: u64,
        expires_ms: u64,
    ) -> Result<TransactionRecord, VshError> {
        self.records.check_policy_current()?;
        let record = self.sources().record(transaction)?;
        // Approved work whose approval lapsed waits for another: this one
        // (ux68 M6).
        if record.state != TransactionState::PendingApproval && !record.has_lapsed_approval(issued_ms) {
            return Err(VshError::NotApprovable { transaction, state: record.state });
        }
        let (artifact, _) = self.records.load_verified(transaction)?;
        // Work the workspace has moved under can never commit: approving it
        // would only send its reviewer to a stale commit (ux60: both items a
        // lead approved had gone stale under the agent's later commits).
        // Stale work is recorded so (ux61 2: it stayed pending, and every
        // hint sent its reviewer back to approve it).
        match self.commits.revalidate(&self.records, transaction, (&artifact.diff, &artifact.read_set)) {
            Err(VshError::Commit(source @ vsh_commit::CommitError::Stale { .. })) => {
                self.records.transactions().mark_stale(transaction, issued_ms)?;
                return Err(VshError::ApprovalStale { transaction, source: Box::new(source) });
            }
            result => result?,
        }
        let grant = ApprovalGrant::new(transaction, principal, issued_ms, expires_ms)?;
        Ok(self.records.transactions().approve(transaction, &grant)?)
    }

    /// Reject a pending, approved or auto-approved transaction: it can never be committed.
    pub fn reject(&self, transaction: TransactionId, now_ms: u64) -> Result<TransactionRecord, VshError> {
        let store = self.records.transactions();
        // A preview nothing wrote yet is written rejected, in one append.
        Ok(match self.previews.take_unwritten(transaction) {
            Some(record) => store.create_rejected(&record, now_ms)?,
            None => store.reject(transaction, now_ms)?,
        })
    }

    /// Reject every other run of the same work as `transaction` (its first
    /// run and every rerun of that: [`Runtime::runs_of_same_work`]) that could
    /// still be committed (`PendingApproval`, `AutoApproved`, `Approved`), and
    /// return them as they are now. An operator's rejection of work covers
    /// every run of it, not the one transaction named (sec79 F2: a rerun an
    /// agent made before the rejection committed afterwards). A run that moved
    /// on meanwhile (committed, say) is left as it is. An agent's discard of
    /// one preview is [`Runtime::reject`] alone: it may keep a newer run.
    pub fn reject_other_runs(
        &self,
        transaction: TransactionId,
        now_ms: u64,
    ) -> Result<Vec<TransactionRecord>, VshError> {
        use TransactionState as S;
        let mut rejected = Vec::new();
        for run in self.runs_of_same_work(transaction)? {
            if run.id == transaction || !matches!(run.state, S::PendingApproval | S::AutoApproved | S::Approved) {
                continue;
            }
            match self.reject(run.id, now_ms) {
                Ok(record) => rejected.push(record),
                Err(VshError::Store(vsh_store::StoreError::WrongState { .. })) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(rejected)
    }

    /// Commit a transaction: an auto-approved preview of this runtime, or an
    /// approved pending transaction (from this or an earlier runtime). It is
    /// revalidated against the live workspace first; stale work writes nothing.
    /// `now_ms` (milliseconds since the Unix epoch, supplied by the host) decides
    /// whether an approval has expired and stamps the record.
    pub fn commit(&self, transaction: TransactionId, now_ms: u64) -> Result<Receipt, VshError> {
        self.commit_cancellable(transaction, now_ms, &ExecutionCancellation::new())
    }

    /// [`Runtime::commit`] unless `cancel` wins first ([`VshError::Cancelled`]).
    /// Once the commit has entered, `cancel` returns `false` and the real commit
    /// or recovery outcome is returned.
    pub fn commit_cancellable(
        &self,
        transaction: TransactionId,
        now_ms: u64,
        cancel: &ExecutionCancellation,
    ) -> Result<Receipt, VshError> {
        self.commit_guarded(transaction, now_ms, cancel, None)
    }

    /// [`Runtime::commit_cancellable`] of a rerun (`transaction`) decided
    /// when the runs of its work committed were `so_far`
    /// ([`Runtime::work_done_so_far`]): refused with
    /// [`VshError::DoneMeanwhile`], writing nothing, when another run of
    /// the same work has been committed since, checked under the commit
    /// lock (sec92 M1: two reruns of one stale transaction, run together,
    /// both committed their append).
    ///
    /// # Errors
    ///
    /// As [`Runtime::commit_cancellable`], and [`VshError::DoneMeanwhile`].
    pub fn commit_rerun_cancellable(
        &self,
        transaction: TransactionId,
        now_ms: u64,
        cancel: &ExecutionCancellation,
        so_far: &WorkDoneSoFar,
    ) -> Result<Receipt, VshError> {
        self.commit_guarded(transaction, now_ms, cancel, Some(so_far))
    }

    /// The runs of `transaction`'s work committed now (itself, the runs
    /// of it again and theirs, [`Runtime::runs_of_same_work`]): what a
    /// rerun of it decided now may find committed at its commit
    /// ([`Runtime::commit_rerun_cancellable`], [`RunRequest::with_done_so_far`]).
    ///
    /// # Errors
    ///
    /// The store's, reading records.
    pub fn work_done_so_far(&self, transaction: TransactionId) -> Result<WorkDoneSoFar, VshError> {
        // Committed and not reverted: a run whose revert is itself reverted
        // later does its work again (sec95 M2).
        let committed = self
            .runs_of_same_work(transaction)?
            .into_iter()
            .filter(|run| run.state == TransactionState::Committed)
            .filter(|run| self.reverted_by(run.id).ok().flatten().is_none())
            .map(|run| run.id)
            .collect();
        Ok(WorkDoneSoFar { work: transaction, committed })
    }

    /// [`VshError::DoneMeanwhile`] when a run of `so_far`'s work other
    /// than `rerun` and those it knew of is committed now (and not
    /// reverted since); `rerun`, stored and waiting, is recorded failed then,
    /// so that no later commit of it does the work twice (a process-local
    /// preview is dropped with its refused commit).
    fn refuse_done_meanwhile(&self, rerun: TransactionId, so_far: &WorkDoneSoFar) -> Result<(), VshError> {
        self.refuse_done_by(rerun, so_far.work, |run| !so_far.committed.contains(&run.id))
    }

    /// [`VshError::DoneMeanwhile`] when another run of the same work as
    /// `rerun` (the work it ran again, a rerun of it, or of those) was
    /// committed since `rerun` was made at `made_ms` (and not reverted
    /// since): runs made before either was committed, each committed later
    /// (sec94 M1: work that writes a file it never read, a job file, is not
    /// stale for the other's commit; sec95 M1: the first run, waiting, after
    /// its rerun). Times are the records', the callers' clocks.
    fn refuse_done_since(&self, rerun: TransactionId, made_ms: u64) -> Result<(), VshError> {
        self.refuse_done_by(rerun, rerun, |run| run.updated_ms >= made_ms)
    }

    /// [`Runtime::refuse_done_meanwhile`]: a committed run of `work`'s
    /// lineage other than `rerun` that `new` picks.
    fn refuse_done_by(
        &self,
        rerun: TransactionId,
        work: TransactionId,
        new: impl Fn(&TransactionRecord) -> bool,
    ) -> Result<(), VshError> {
        let runs = self.runs_of_same_work(work)?;
        let reverted = |run: &TransactionRecord| self.reverted_by(run.id).ok().flatten().is_some();
        let Some(by) = runs
            .iter()
            .find(|run| run.state == TransactionState::Committed && run.id != rerun && new(run) && !reverted(run))
        else {
            return Ok(());
        };
        // Best effort: a record that cannot be moved is left as it is
        // (refused again by the same check). Approved work too (sec96 L2:
        // it stayed listed approved, its commit always refused).
        if let Ok(Some(record)) = self.records.get(rerun)
            && matches!(
                record.state,
                TransactionState::AutoApproved | TransactionState::PendingApproval | TransactionState::Approved
            )
        {
            let _ = self.records.transactions().compare_and_transition(
                rerun,
                record.state,
                TransactionState::Failed,
                clock_ms(),
            );
        }
        Err(VshError::DoneMeanwhile { transaction: rerun, by: by.id })
    }

    fn commit_guarded(
        &self,
        transaction: TransactionId,
        now_ms: u64,
        cancel: &ExecutionCancellation,
        so_far: Option<&WorkDoneSoFar>,
    ) -> Result<Receipt, VshError> {
        self.records.check_policy_current()?;
        let record = self.settle_in_flight(transaction)?;
        // Recorded stale before: where the workspace differs now, as the
        // commit that found it said (ux82 L8: a second commit's error named
        // no path), when it still does.
        if record.state == TransactionState::Stale
            && let Ok((artifact, _)) = self.records.load_verified(transaction)
            && let Err(VshError::Commit(stale @ vsh_commit::CommitError::Stale { .. })) =
                self.commits.revalidate(&self.records, transaction, (&artifact.diff, &artifact.read_set))
        {
            return Err(VshError::Commit(stale));
        }
        self.gate.check(&self.sources(), transaction, record.state)?;
        // Pending work the workspace moved under can never commit: said so
        // now, not after an approval (ux62 3). (A hook deciding it is asked
        // above, and its decision's commit finds it stale.)
        if record.state == TransactionState::PendingApproval
            && let Some(stale) = self.settle_stale(transaction)?
        {
            return Err(VshError::Commit(stale));
        }
        // Any run of work run again, the first one too (sec95 M1: the first
        // run, still waiting, committed after its rerun did the work twice).
        let made_ms = record.created_ms;
        let guard = |rerun: TransactionId| {
            if let Some(so_far) = so_far {
                self.refuse_done_meanwhile(rerun, so_far)?;
            }
            self.refuse_done_since(rerun, made_ms)
        };
        self.commit_unhooked(transaction, record.state, now_ms, cancel, &guard)
    }

    /// When another committer has `transaction` in hand (Revalidating or
    /// Committing), wait for the commit lock and recover under it: a commit
    /// holds the lock until its outcome is recorded, and one whose process
    /// died is settled by the recovery. Returns the record as it stands
    /// then (read once when nothing is in flight).
    fn settle_in_flight(&self, transaction: TransactionId) -> Result<TransactionRecord, VshError> {
        let record = self.sources().record(transaction)?;
        if !matches!(record.state, TransactionState::Revalidating | TransactionState::Committing) {
            return Ok(record);
        }
        self.commits.recover(&self.records, clock_ms())?;
        self.sources().record(transaction)
    }

    /// Commit without asking a hook (the caller already did, or none applies).
    /// `guard`, given the transaction, runs under the commit lock before
    /// the reservation: an error from it is the commit's, nothing written.
    fn commit_unhooked(
        &self,
        transaction: TransactionId,
        state: TransactionState,
        now_ms: u64,
        cancel: &ExecutionCancellation,
        guard: &dyn Fn(TransactionId) -> Result<(), VshError>,
    ) -> Result<Receipt, VshError> {
        let started = Instant::now();
        let committable_from_memory = self.previews.holds(transaction);
        let committable = match state {
            TransactionState::AutoApproved => match self.previews.get(transaction) {
                Some(preview) => Committable {
                    diff: preview.artifact.diff,
                    reads: preview.artifact.read_set,
                    contents: preview.artifact.contents,
                    receipt: preview.receipt,
                },
                // A durable preview (this process's or another's): from its
                // verified artifact, made under the active policy; the
                // reservation refuses it past its expiry.
                None if self.records.require(transaction)?.artifact.is_some() => {
                    self.records.committable(transaction, state)?
                }
                None => return Err(VshError::NotCommittable { transaction, state }),
            },
            TransactionState::Approved => self.records.committable(transaction, state)?,
            // Another committer took it between the read of its state and
            // now: its outcome, once that commit is over.
            TransactionState::Revalidating | TransactionState::Committing => {
                let state = self.settle_in_flight(transaction)?.state;
                return Err(VshError::NotCommittable { transaction, state });
            }
            state => return Err(VshError::NotCommittable { transaction, state }),
        };
        if !cancel.enter_commit() {
            return Err(VshError::Cancelled);
        }
        // The commit reserves the record in the store: a process-local
        // preview's record is written with the reservation itself (one
        // append), and its contents are staged from memory, as are those a
        // stored artifact carries.
        let (unwritten, mut contents) = self.previews.commit_parts(transaction);
        contents.extend(committable.contents);
        // Read now, while the workspace holds them; stored only once the
        // commit has landed, so they never take the room its staging needs
        // nor outlive a commit that failed (sec55 F3).
        // What it takes from each file it modifies, measured against the
        // bytes it replaces and recorded once it has landed (sec59 F1).
        let reviewed = state == TransactionState::Approved;
        let measured = if reviewed {
            std::collections::BTreeMap::new()
        } else {
            crate::losses::befores(self.runs.workspace(), committable.diff.entries())
        };
        // (Each file read once: what was measured is kept from those bytes.)
        let befores = self.read_before_contents(&committable.diff, &measured);
        let unrecorded = std::cell::RefCell::new(None);
        let record_losses = || {
            if let Err(error) = self.record_losses(committable.diff.entries(), reviewed, &measured) {
                *unrecorded.borrow_mut() = Some(error);
            }
            let left = crate::unseen::noted_of_commit(committable.diff.entries(), transaction, reviewed);
            self.records.note_sightings(self.records.seen_contents(), left, true);
        };
        let result = self.commits.commit(
            &self.records,
            transaction,
            (&committable.diff, &committable.reads, &contents),
            unwritten.as_ref(),
            now_ms,
            (&|| guard(transaction), &record_losses),
        );

        // The reservation was consumed whatever the outcome: the preview cannot be committed again.
        self.previews.forget(transaction);
        let commit = match result {
            // Another committer reserved it between the read of its state and
            // this reservation: say what became of it, as if it had been first.
            Err(error @ VshError::Store(vsh_store::StoreError::NotReservable { .. })) => {
                let now = self.settle_in_flight(transaction)?.state;
                // Refused for a reason of its own (an approval past its expiry).
                if now == state {
                    return Err(error);
                }
                return Err(VshError::NotCommittable { transaction, state: now });
            }
            result => result?,
        };
        self.keep_before_contents(befores);
        // Best effort: a taint left behind costs the next build its
        // incremental start, never its correctness.
        let _ = self.runs.scratch_committed(transaction);
        let mut receipt = committable.receipt;
        let calls = self.runs.policy().calls();
        receipt.diff_withheld = crate::run::names_unreadable_content(committable.diff.entries(), calls);
        receipt.changes = crate::run::shown_changes(&receipt.changes, calls);
        receipt.state = TransactionState::Committed;
        receipt.commit = Some(commit);
        committed_as_asked(&mut receipt.warnings, transaction);
        // Said, never dropped (sec64 F1: a data directory that refused the
        // write forgot the commit's loss, and nothing said so).
        if let Some(reason) = unrecorded.into_inner() {
            receipt.warnings.push(crate::Warning::LossHistoryUnrecorded { reason });
        }
        receipt.timings =
            StageTimings { commit: elapsed_ns(started), total: elapsed_ns(started), ..StageTimings::default() };
        if committable_from_memory {
            self.previews.remember_committed(receipt.clone());
        }
        Ok(receipt)
    }

    /// Record in the workspace's loss history what a commit of `entries`
    /// that has just landed took ([`crate::losses::record`]). The commit
    /// stands whatever happens here; a history that cannot be read stays as
    /// it is (the next run says so), and one that cannot be written is the
    /// error's text, for the receipt's warning.
    fn record_losses(
        &self,
        entries: &[vsh_types::DiffEntry],
        reviewed: bool,
        befores: &std::collections::BTreeMap<vsh_types::VPath, Vec<u8>>,
    ) -> Result<(), String> {
        let Ok(mut history) = self.records.loss_history() else { return Ok(()) };
        let reviewed_bytes = |id, max| self.records.blobs().get(id, max).ok();
        if crate::losses::record(&mut history, self.runs.workspace(), entries, reviewed, befores, &reviewed_bytes) {
            self.records.write_loss_history(&history).map_err(|error| crate::document::chain(&error))?;
        }
        Ok(())
    }

    /// The bytes a commit of `diff` is about to replace, to keep for its
    /// review afterwards (`vsh show` of committed work): each modified or
    /// deleted file the program could read, known by its digest and still
    /// holding it (from `read`, the bytes read for the same states already), at most [`KEPT_BEFORE_FILE_BYTES`] a file and
    /// [`KEPT_BEFORE_BYTES`] in all. Best effort: a file that cannot be read
    /// is left out.
    fn read_before_contents(
        &self,
        diff: &vsh_types::CanonicalDiff,
        read: &std::collections::BTreeMap<vsh_types::VPath, Vec<u8>>,
    ) -> KeptBefores {
        let calls = self.runs.policy().calls();
        let mut budget = KEPT_BEFORE_BYTES;
        let mut befores = Vec::new();
        let mut unread = Vec::new();
        for entry in diff.entries() {
            // A symlink's target is kept as a file's bytes are (ux67 F1).
            let kept_kind = |before: &vsh_types::NodeState| {
                matches!(before.kind, vsh_types::NodeKind::File | vsh_types::NodeKind::Symlink)
            };
            let Some(before) = entry.before.filter(kept_kind) else {
                continue;
            };
            // A file the work removed or replaced unread is known by its
            // stamp alone: kept by the digest of its bytes as read now, and
            // named for `vsh revert` (ux66 F1, sec70 F3: a deletion could
            // not be reverted).
            let removed_unread = before.content.is_none()
                && before.stamp.is_some()
                && entry.after.is_none_or(|after| after.kind != vsh_types::NodeKind::File || after.content.is_some());
            if before.content.is_none() && !removed_unread {
                continue;
            }
            if before.size > KEPT_BEFORE_FILE_BYTES
                || before.size > budget
                || calls.authorize(&entry.path, vsh_policy::AccessKind::ContentRead).is_err()
            {
                continue;
            }
            // Read already (to measure what the commit takes), and checked
            // against the same state then; else read now.
            let bytes = if before.kind == vsh_types::NodeKind::Symlink {
                // Its target, while the link holds the one the diff names.
                self.runs
                    .workspace()
                    .read_link(&entry.path, before.size)
                    .ok()
                    .filter(|target| before.content == Some(vsh_types::BlobId::of(target)))
            } else {
                read.get(&entry.path)
                    .filter(|bytes| bytes.len() as u64 == before.size)
                    .cloned()
                    .or_else(|| vsh_vfs::live_content_if_unchanged(self.runs.workspace(), &entry.path, &before))
            };
            if let Some(bytes) = bytes {
                budget -= before.size;
                let digest = before.content.unwrap_or_else(|| vsh_types::BlobId::of(&bytes));
                if before.content.is_none() {
                    unread.push((entry.path.clone(), before, digest));
                }
                befores.push((bytes, digest));
            }
        }
        KeptBefores { befores, unread }
    }

    /// Keep `befores` (read by [`Runtime::read_before_contents`] before a
    /// commit that has landed since) in the blob store, unsynced, each only
    /// while the store may take four times as much of its disk. No record
    /// refers to them, so garbage collection removes them once past its
    /// grace (a day by default). Best effort: one that cannot be stored is
    /// left out.
    fn keep_before_contents(&self, kept: KeptBefores) {
        let mut stored = std::collections::BTreeSet::new();
        for (bytes, digest) in kept.befores {
            if self.records.check_store_space((bytes.len() as u64).saturating_mul(4)).is_err() {
                break;
            }
            if self.records.blobs().put_expected_deferred(&bytes, digest).is_ok() {
                stored.insert(digest);
            }
        }
        let named: Vec<_> = kept.unread.into_iter().filter(|(_, _, digest)| stored.contains(digest)).collect();
        self.records.name_unread_contents(&named);
    }

    /// Clean up after a request whose receipt was never delivered: a process-local
    /// preview is dropped (rejected); durable auto-approved work moves to pending
    /// review. Returns whether anything changed.
    pub fn discard_cancelled(&self, transaction: TransactionId) -> Result<bool, VshError> {
        let durable = self.records.get(transaction)?.is_some_and(|record| {
            record.state == TransactionState::AutoApproved && record.pending_expires_ms.is_some()
        });
        if !self.previews.holds(transaction) && !durable {
            return Ok(false);
        }
        Ok(self.previews.demote(self.records.transactions(), transaction, clock_ms())?.is_some())
    }

    /// Ask whether a hook must decide before `transaction` commits. Makes a
    /// process-local preview durable first (so a hook's Review or a failed
    /// handler can move it to pending review). Runs no handler code.
    pub fn prepare_commit(&self, transaction: TransactionId) -> Result<CommitPreparation, VshError> {
        self.settle_in_flight(transaction)?;
        self.gate.prepare(&self.sources(), transaction)
    }

    /// Apply a hook's decision on `event` (see [`HookDecision`]). The event is
    /// regenerated from the stored transaction and must be identical, so the
    /// decision applies exactly to what the handler saw.
    pub fn resolve_commit(
        &self,
        event: &RequestEvent,
        decision: HookDecision,
        now_ms: u64,
    ) -> Result<CommitResolution, VshError> {
        self.resolve_commit_cancellable(event, decision, now_ms, &ExecutionCancellation::new())
    }

    /// [`Runtime::resolve_commit`] with a cancellation handle that can stop the
    /// commit until it enters.
    pub fn resolve_commit_cancellable(
        &self,
        event: &RequestEvent,
        decision: HookDecision,
        now_ms: u64,
        cancel: &ExecutionCancellation,
    ) -> Result<CommitResolution, VshError> {
        let (state, receipt) = match self.gate.resolve(&self.sources(), event, &decision, now_ms)? {
            Verdict::Settled(state) => (state, None),
            Verdict::Commit(state) => {
                self.records.check_policy_current()?;
                let receipt = self.commit_unhooked(event.transaction(), state, now_ms, cancel, &|_| Ok(()))?;
                (receipt.state, Some(receipt))
            }
        };
        let hook = HookDecisionRecord { event_id: event.event_id, hook: event.hook, decision };
        Ok(CommitResolution { state, receipt, hook })
    }

    /// The handler failed (an error, a timeout, a cancellation): auto-approved
    /// work falls back to pending review; nothing commits.
    pub fn fail_hook(&self, event: &RequestEvent, now_ms: u64) -> Result<TransactionState, VshError> {
        HookGate::fail(&self.sources(), event, now_ms)
    }

    /// The receipt of a stored transaction, rebuilt from its durable artifact
    /// (pending and approved transactions), or from this runtime's memory
    /// (auto-approved previews). `None` for transactions without either. A
    /// review: it shows work made under another policy too (its artifact must
    /// still bind), which only [`Runtime::approve`] and [`Runtime::commit`] refuse.
    /// Pending work the workspace moved under is recorded stale first
    /// ([`crate::Warning::FoundStale`]).
    pub fn show(&self, transaction: TransactionId) -> Result<Option<Receipt>, VshError> {
        self.receipt_of(transaction, true)
    }

    /// [`Runtime::show`] for a row of a listing [`Runtime::pending_and_stale`]
    /// made, which revalidated its pending work already: not again.
    pub fn listed_receipt(&self, transaction: TransactionId) -> Result<Option<Receipt>, VshError> {
        self.receipt_of(transaction, false)
    }

    fn receipt_of(&self, transaction: TransactionId, settle: bool) -> Result<Option<Receipt>, VshError> {
        if let Some(mut receipt) = self.previews.receipt(transaction) {
            // A review lists what changed, whatever detail the run asked for.
            if receipt.changes.is_empty()
                && let Some(artifact) = self.previews.artifact(transaction)
            {
                receipt.changes = crate::run::shown_changes(artifact.diff.entries(), self.runs.policy().calls());
            }
            return Ok(Some(receipt));
        }
        // Pending work the workspace moved under is shown as what it is,
        // with what changed under it.
        if settle {
            self.settle_due(transaction);
        }
        let found = if settle { self.settle_stale(transaction)? } else { None };
        let Some(record) = self.records.get(transaction)? else { return Ok(None) };
        if record.artifact.is_none() {
            // A preview this runtime committed: its commit's receipt.
            return Ok(self.previews.committed(transaction));
        }
        let crate::records::StoredReceipt { mut receipt, reads, policy, notes } =
            self.records.stored_receipt(transaction, record.state)?;
        let calls = self.runs.policy().calls();
        receipt.diff_withheld = crate::run::names_unreadable_content(&receipt.changes, calls);
        let made_under = if policy == self.runs.policy().digest() {
            None
        } else {
            let run_policy = self.run_policy(transaction)?.map(|run| run.text);
            self.made_under(policy, run_policy.as_deref())
        };
        let view = self.reader_view(&receipt.changes, &reads, policy, made_under.as_ref());
        // What its reviewer was told of the decision when it ran (ux65 F1:
        // the numbers of a rewrite, the rules that hold it), under the
        // policy it was made under. Work stored before the evidence kept
        // them, still to be decided or committed: what auto-approved commits
        // took from the files it modifies before it (sec61 F2).
        if !view.other_policy {
            receipt.warnings.extend(notes.iter().cloned());
        }
        if !view.other_policy
            && notes.is_empty()
            && matches!(record.state, TransactionState::PendingApproval | TransactionState::Approved)
            && let Ok(history) = self.records.loss_history()
            && let Some(earlier) = crate::losses::earlier(&history, &receipt.changes, None, &|path| {
                self.runs.policy().rewrite_ratio_for(path)
            })
        {
            receipt.warnings.push(earlier);
        }
        receipt.snapshot_withheld = view.snapshot_withheld;
        receipt.diff_withheld |= view.snapshot_withheld;
        if view.snapshot_withheld {
            // Its counters measured the same reads (bytes read, entries
            // listed: a hidden file's size, a directory's hidden names).
            receipt.execution = vsh_monty::ExecutionStats::default();
        }
        if view.other_policy {
            // What this policy hides from a look is not listed at all (its
            // name, size and mode), nor counted in the sizes of the decision.
            let listed = receipt.changes.len();
            receipt.changes.retain(|entry| !hides(calls, &entry.path));
            let hidden = listed - receipt.changes.len();
            if hidden > 0 {
                receipt.changed_paths = receipt.changed_paths.saturating_sub(hidden);
                withhold_metrics(&mut receipt.decision);
                receipt.warnings.push(crate::Warning::HiddenChanges);
            }
        }
        if view.tainted {
            // What it printed or returned, and the names and sizes of what
            // it made, may be what it read (sec58 2: a directory per line).
            withhold_output(&mut receipt.output);
            receipt.changes.clear();
            withhold_metrics(&mut receipt.decision);
            // How many paths it changed, and the flags its sizes raised, may
            // be what it read too (sec59 F2: one path per byte's value).
            receipt.changed_paths = 0;
            if let crate::RuntimeDecision::PendingApproval(manifest) = &mut receipt.decision {
                manifest.flags.clear();
            }
            // Nor the names its renames moved, which are paths it made.
            receipt.warnings.retain(|warning| !matches!(warning, crate::Warning::Renamed { .. }));
            receipt.warnings.push(crate::Warning::Withheld);
        }
        receipt.changes = crate::run::shown_changes(&receipt.changes, calls);
        if view.tainted {
            for entry in &mut receipt.changes {
                for state in [entry.before.as_mut(), entry.after.as_mut()].into_iter().flatten() {
                    state.content = None;
                    state.stamp = None;
                }
            }
        }
        let listed = |conflicts: &[vsh_commit::Conflict]| -> Vec<String> {
            conflicts.iter().take(5).map(|conflict| format!("{}: {}", conflict.path, conflict.reason)).collect()
        };
        if let Some(vsh_commit::CommitError::Stale { conflicts, total }) = found {
            receipt.warnings.push(crate::Warning::FoundStale { paths: listed(&conflicts), total });
        } else if settle && record.state == TransactionState::Stale && !view.other_policy {
            // Recorded stale earlier: what differs now, each time it is
            // reviewed (revalidated, applying nothing).
            // Under the commit lock only if it is free: a review never
            // waits for a commit (sec89 M2), nor sees one half applied.
            if let Ok((artifact, _)) = self.records.load_verified(transaction)
                && let Ok(Some(Err(VshError::Commit(vsh_commit::CommitError::Stale { conflicts, total })))) =
                    self.commits.under_lock(&self.records, false, clock_ms(), || {
                        self.commits.revalidate_unlocked(
                            &self.records,
                            transaction,
                            (&artifact.diff, &artifact.read_set),
                        )
                    })
            {
                receipt.warnings.push(crate::Warning::StaleAt { paths: listed(&conflicts), total });
            }
        }
        Ok(Some(receipt))
    }

    /// The policy work bound to `policy` was made under, when it is not
    /// this runtime's and the workspace knows it (`run_policy`: a per-run
    /// policy's text; see `Records::known_policy`).
    fn made_under(
        &self,
        policy: vsh_types::PolicyDigest,
        run_policy: Option<&str>,
    ) -> Option<vsh_policy::TransactionPolicy> {
        (policy != self.runs.policy().digest()).then(|| self.records.known_policy(policy, run_policy)).flatten()
    }

    /// What this runtime's policy must withhold of stored work (`entries`
    /// its diff, `reads` its read set, `policy` the digest it was bound to).
    /// Work made under a per-run policy may have read what this policy
    /// protects (a file's bytes, its size and mode, a directory's names, a
    /// hidden name among a listing's): its snapshot id hashes what it read,
    /// so the id would confirm guesses at it. And work made under another
    /// policy that touched a path this one protects from a read (a rename
    /// out of it) may carry those bytes anywhere it wrote and in its output
    /// (sec57 F1): tainted, its hunks, digests and output are withheld.
    /// Unless `made_under`, the policy it was made under, is known and
    /// refuses exactly the reads this one refuses (ux61 4: a policy that
    /// only narrowed what may change withheld every earlier review).
    fn reader_view(
        &self,
        entries: &[vsh_types::DiffEntry],
        reads: &vsh_types::ReadSet,
        policy: vsh_types::PolicyDigest,
        made_under: Option<&vsh_policy::TransactionPolicy>,
    ) -> ReaderView {
        use vsh_policy::AccessKind::{ContentRead, DirectoryRead, MetadataRead};
        let calls = self.runs.policy().calls();
        let refused = |path: &vsh_types::VPath, access| calls.authorize(path, access).is_err();
        let other_policy = policy != self.runs.policy().digest();
        // What its program could read is what a program may read now.
        let other_reads = other_policy && !made_under.is_some_and(|made| made.calls().reads_like(calls));
        let read_protected = reads.entries.iter().any(|(path, dependency)| {
            (dependency.content.is_some() && refused(path, ContentRead))
                || ((dependency.kind.is_some() || dependency.size_mode.is_some()) && refused(path, MetadataRead))
                || (dependency.names.is_some() && (other_reads || refused(path, DirectoryRead)))
        });
        let touched_protected =
            entries.iter().any(|entry| refused(&entry.path, ContentRead) || refused(&entry.path, MetadataRead));
        // Under this very policy the program could read none of it (vsh's
        // own hashing of a protected before state is no read of the
        // program's): only the snapshot id, which hashes that digest, is withheld.
        let tainted = other_reads && (read_protected || touched_protected);
        ReaderView { snapshot_withheld: read_protected || tainted, tainted, other_policy }
    }

    /// Transactions waiting for a decision or a commit: `PendingApproval`,
    /// `Approved`, and durable auto-approved previews (stored with their
    /// artifact by [`crate::RuntimeConfig::with_durable_previews`], until they expire).
    /// Work waiting for its decision or its commit that the workspace has
    /// moved under is recorded stale first, as approving or committing it
    /// would (ux62 3: it looked approvable until someone tried; ux84 L1), and
    /// is not listed; at most
    /// [`STALE_CHECKS_PER_LISTING`] are checked, the oldest first.
    pub fn pending(&self) -> Result<Vec<TransactionRecord>, VshError> {
        Ok(self.pending_and_stale()?.0)
    }

    /// [`Runtime::pending`], with the work it found stale and recorded so:
    /// each with the [`vsh_commit::CommitError::Stale`] that names what
    /// changed (ux63 1: a listing that dropped such work said nothing).
    pub fn pending_and_stale(&self) -> Result<(Vec<TransactionRecord>, Vec<FoundStale>), VshError> {
        let mut waiting = self.records.pending()?;
        // What is due now is listed as it is: an approval lapsed waits for
        // another, work past its window is expired (ux82 M1).
        let now = clock_ms();
        if waiting.iter().any(|record| record.has_lapsed_approval(now) || record.is_due_to_expire(now)) {
            let _ = self.records.transactions().expire_due(now);
            waiting = self.records.pending()?;
        }
        let mut stale = Vec::new();
        let mut oldest: Vec<&TransactionRecord> = waiting.iter().filter(|record| may_go_stale(record.state)).collect();
        oldest.sort_by_key(|record| (record.created_ms, record.id));
        for record in oldest.into_iter().take(STALE_CHECKS_PER_LISTING) {
            if let Some(found) = self.settle_stale(record.id)? {
                stale.push(FoundStale { transaction: record.id, stale: found });
            }
        }
        waiting.retain(|record| !stale.iter().any(|found| found.transaction == record.id));
        Ok((waiting, stale))
    }

    /// Settle `transaction` if something about it is due now (ux82 M1: an
    /// approval past its `--ttl` was shown as approved, its next step a
    /// commit that then refused it): an approval lapsed sends it back to
    /// waiting for one, work past its window is expired, as a commit would
    /// find. Best effort: a store that cannot be written is read as it is.
    fn settle_due(&self, transaction: TransactionId) {
        let now = clock_ms();
        let due = |record: &TransactionRecord| record.has_lapsed_approval(now) || record.is_due_to_expire(now);
        if self.records.get(transaction).ok().flatten().is_some_and(|record| due(&record)) {
            let _ = self.records.transactions().expire_due(now);
        }
    }

    /// Record `transaction` stale when the workspace has moved under it:
    /// work waiting for its decision or its commit (pending approval,
    /// approved, auto-approved: ux84 L1, a listing offered `vsh commit` for
    /// auto-approved work no commit could take), revalidated and recorded
    /// under the commit lock, applying nothing (what a commit would find).
    /// Returns the stale error naming what changed when it did. Work in any
    /// other state, or whose artifact does not load, is left as it is, and
    /// so is all of it while a commit holds the lock (sec89 M2: a listing
    /// or a review never waits for one; it is found stale another time).
    fn settle_stale(&self, transaction: TransactionId) -> Result<Option<vsh_commit::CommitError>, VshError> {
        if self.records.get(transaction)?.is_none_or(|record| !may_go_stale(record.state)) {
            return Ok(None);
        }
        let Ok((artifact, _)) = self.records.load_verified(transaction) else { return Ok(None) };
        // A look without the lock first: most work is not stale, and a
        // listing then never holds a commit up while it hashes what the
        // work read (sec91: 0.8 s a row of 400 MB). It may see a commit half
        // applied; only what it finds stale is checked again under the lock.
        let request = (&artifact.diff, &artifact.read_set);
        if !matches!(
            self.commits.revalidate_unlocked(&self.records, transaction, request),
            Err(VshError::Commit(vsh_commit::CommitError::Stale { .. }))
        ) {
            return Ok(None);
        }
        let found = self.commits.under_lock(&self.records, false, clock_ms(), || {
            match self.commits.revalidate_unlocked(&self.records, transaction, request) {
                Err(VshError::Commit(stale @ vsh_commit::CommitError::Stale { .. })) => {
                    match self.records.transactions().mark_stale(transaction, clock_ms()) {
                        Ok(_) => Ok(Some(stale)),
                        // Decided meanwhile (rejected, expired): as it is now.
                        Err(vsh_store::StoreError::WrongState { .. }) => Ok(None),
                        Err(error) => Err(VshError::from(error)),
                    }
                }
                _ => Ok(None),
            }
        })?;
        found.transpose().map(Option::flatten)
    }

    /// Where the workspace's loss history is kept (the file `loss-history`
    /// in the data directory), and how many files auto-approved commits
    /// changed since a reviewer last saw them: [`VshError::DataDirectory`]
    /// when it cannot be read, or does not verify under the authority key
    /// (`StoreError::CorruptLossHistory`). What `vsh doctor` checks.
    pub fn loss_history_files(&self) -> (std::path::PathBuf, Result<usize, VshError>) {
        let path = self.records.data().dir().display_path().join(vsh_store::LOSS_HISTORY_FILE);
        (path, self.records.loss_history().map(|history| history.len()))
    }

    /// Where the workspace's record of what vsh last saw of its files is
    /// (`seen-contents`), and how many entries it holds:
    /// [`VshError::DataDirectory`] when it cannot be read, or does not
    /// verify under the authority key (`StoreError::CorruptSeenContents`:
    /// every run that replaces a file unread waits for a reviewer, until a
    /// run starts it afresh). What `vsh doctor` checks.
    pub fn seen_contents_files(&self) -> (std::path::PathBuf, Result<usize, VshError>) {
        let path = self.records.data().dir().display_path().join(vsh_store::SEEN_CONTENTS_FILE);
        let read = vsh_store::SeenContents::read(self.records.data(), self.records.key()).map(|seen| seen.len());
        (path, read.map_err(VshError::DataDirectory))
    }

    /// Each transaction still waiting for a decision or a commit whose
    /// stored work could not be committed as it stands, with why: its
    /// artifact no longer loads or binds, or a content its commit reads from
    /// the blob store is missing or corrupt (every such blob is re-hashed,
    /// so this reads all the stored work). What `vsh doctor` checks; such
    /// work can only be rejected, or made again (`vsh rerun`).
    ///
    /// # Errors
    ///
    /// When the transaction records cannot be read.
    pub fn stored_work_faults(&self) -> Result<Vec<(TransactionId, VshError)>, VshError> {
        self.records.stored_work_faults()
    }

    /// Forget an auto-approved preview without committing it (it becomes
    /// `Rejected`). Returns whether this runtime held it.
    pub fn discard_preview(&self, transaction: TransactionId) -> Result<bool, VshError> {
        if !self.previews.holds(transaction) {
            return Ok(false);
        }
        // Recorded as rejected, so that it is never committable by any name.
        self.reject(transaction, clock_ms())?;
        Ok(true)
    }

    /// The transaction `name` names, as git names commits: its whole id, or
    /// any prefix of at least [`crate::MIN_ID_PREFIX`] hex digits that only
    /// one stored transaction's id starts with. Otherwise
    /// [`VshError::NoSuchTransaction`], [`VshError::AmbiguousTransaction`]
    /// (with the candidates) or [`VshError::TransactionName`].
    pub fn resolve(&self, name: &str) -> Result<TransactionId, VshError> {
        self.records.resolve(name, &self.previews.unwritten_ids())
    }

    /// The program text and intent a transaction was made from, for a
    /// review. `None` when nothing is stored (a denied run's record, a
    /// preview another process held in memory, an artifact of the first
    /// format), and when this runtime's policy withholds the work's review
    /// (work made under another policy that read or touched what this one
    /// protects: sec65 L2, its command line named the paths, as its output
    /// would have).
    pub fn stored_program(&self, transaction: TransactionId) -> Result<Option<StoredProgram>, VshError> {
        let Some(artifact) = self.stored_artifact(transaction)? else { return Ok(None) };
        let policy = artifact.binding.digests().policy;
        let made_under = self.made_under(policy, artifact.policy.as_deref());
        if self.reader_view(artifact.diff.entries(), &artifact.read_set, policy, made_under.as_ref()).tainted {
            return Ok(None);
        }
        Ok(Self::program_of(artifact))
    }

    /// [`Runtime::stored_program`], whatever this runtime's policy
    /// withholds: for running it again ([`crate::RunRequest::new`] with it
    /// makes a new transaction on the current workspace under the current
    /// policy), or for an operator who asked for all of it (`vsh show
    /// --protected`); never for a program or an agent.
    pub fn program_to_run_again(&self, transaction: TransactionId) -> Result<Option<StoredProgram>, VshError> {
        Ok(self.stored_artifact(transaction)?.and_then(Self::program_of))
    }

    fn program_of(artifact: vsh_store::PendingArtifact) -> Option<StoredProgram> {
        let language = crate::evidence::Evidence::decode(&artifact.evidence)
            .map_or(crate::Language::Monty, |evidence| evidence.output.language());
        artifact.program.map(|code| StoredProgram { language, code, intent: artifact.intent })
    }

    /// Whether `value` is the value variable `name` had when `transaction`'s
    /// real commands were granted it (compared by its keyed digest: vsh keeps
    /// no variable's value). `None` when the transaction's record keeps no
    /// digest of `name`: its commands were not granted it, it was stored
    /// before vsh kept them, or only its record is stored. `vsh rerun` gives
    /// a variable of its own environment again only on `Some(true)`.
    pub fn granted_value_is(
        &self,
        transaction: TransactionId,
        name: &str,
        value: &str,
    ) -> Result<Option<bool>, VshError> {
        let Some(artifact) = self.stored_artifact(transaction)? else { return Ok(None) };
        let evidence = crate::evidence::Evidence::decode(&artifact.evidence)
            .map_err(|source| VshError::Evidence { transaction, source })?;
        Ok(evidence.env_value(name).map(|digest| self.runs.is_env_value(digest, value)))
    }

    /// The review of a transaction: each changed path with its unified text
    /// hunks, or why it has none ([`vsh_vfs::NoHunks`]). Bytes are
    /// hash-verified: after-states from the blob store, before-states from the
    /// workspace only while it still holds them and the policy lets a program
    /// read them. Empty when nothing is stored (a denied run's record).
    /// Within the default [`vsh_vfs::ReviewLimits`]: [`Runtime::review_within`]
    /// takes others.
    pub fn review(&self, transaction: TransactionId) -> Result<Vec<vsh_vfs::FileReview>, VshError> {
        self.review_within(transaction, vsh_vfs::ReviewLimits::default())
    }

    /// [`Runtime::review`] within `limits`: a file over
    /// [`vsh_vfs::ReviewLimits::max_file_bytes`] on either side, or past the
    /// total, has no hunks ([`vsh_vfs::NoHunks::TooLarge`],
    /// [`vsh_vfs::NoHunks::BudgetSpent`]); the total bounds the content this
    /// call reads.
    pub fn review_within(
        &self,
        transaction: TransactionId,
        limits: vsh_vfs::ReviewLimits,
    ) -> Result<Vec<vsh_vfs::FileReview>, VshError> {
        self.review_of(transaction, limits, None)
    }

    /// The review of a stored transaction as its operator, at the host's
    /// terminal, may read it: within `limits`, with nothing the policy hides
    /// from programs withheld (what an agent writes where reads are
    /// protected, the bytes a per-run policy's work moved). The operator can
    /// read the workspace's files anyway; an agent never gets this (MCP and
    /// programs review with [`Runtime::review`]). Only bytes that still hash
    /// to the diff's states are shown, as always.
    ///
    /// # Errors
    ///
    /// As [`Runtime::review`].
    pub fn review_as_operator(
        &self,
        transaction: TransactionId,
        limits: vsh_vfs::ReviewLimits,
    ) -> Result<Vec<vsh_vfs::FileReview>, VshError> {
        let Some(artifact) = self.stored_artifact(transaction)? else { return Ok(Vec::new()) };
        let collected = self.records.get(transaction)?.is_some_and(|record| record.state.was_refused());
        crate::review::stored_review(
            &self.records,
            &self.previews,
            self.runs.workspace(),
            &vsh_policy::CallPolicy::new(Vec::new()),
            &artifact,
            collected,
            limits,
            (None, None),
        )
    }

    /// [`Runtime::review_within`] of `paths` alone (the changed paths among
    /// them): a reader pages through a large diff a few files at a time.
    pub fn review_paths(
        &self,
        transaction: TransactionId,
        limits: vsh_vfs::ReviewLimits,
        paths: &std::collections::BTreeSet<vsh_types::VPath>,
    ) -> Result<Vec<vsh_vfs::FileReview>, VshError> {
        self.review_of(transaction, limits, Some(paths))
    }

    fn review_of(
        &self,
        transaction: TransactionId,
        limits: vsh_vfs::ReviewLimits,
        only: Option<&std::collections::BTreeSet<vsh_types::VPath>>,
    ) -> Result<Vec<vsh_vfs::FileReview>, VshError> {
        let Some(artifact) = self.stored_artifact(transaction)? else { return Ok(Vec::new()) };
        let calls = self.runs.policy().calls();
        let policy = artifact.binding.digests().policy;
        let made_under = self.made_under(policy, artifact.policy.as_deref());
        let view = self.reader_view(artifact.diff.entries(), &artifact.read_set, policy, made_under.as_ref());
        if view.tainted {
            // Nothing of it is shown here, not even its paths (see `reader_view`).
            return Ok(Vec::new());
        }
        let visible: std::collections::BTreeSet<vsh_types::VPath> = artifact
            .diff
            .entries()
            .iter()
            .map(|entry| entry.path.clone())
            .filter(|path| !(view.other_policy && hides(calls, path)))
            .collect();
        // Work that can never commit: `vsh gc` may have collected its contents.
        let collected = self.records.get(transaction)?.is_some_and(|record| record.state.was_refused());
        crate::review::stored_review(
            &self.records,
            &self.previews,
            self.runs.workspace(),
            self.runs.policy().calls(),
            &artifact,
            collected,
            limits,
            (Some(&visible), only),
        )
    }

    /// What the real commands of a run in `language` are granted by this
    /// runtime (what its receipt records, see [`crate::CommandGrants`]);
    /// `None` when such a run runs none.
    pub fn command_grants(&self, language: crate::Language) -> Option<crate::CommandGrants> {
        self.runs.command_grants(&RunRequest::new("").with_language(language))
    }

    /// The policy a transaction was made under when its run overrode the
    /// workspace's policy (a runtime opened with a profile, file or text other
    /// than the one the workspace recorded), checked against its binding.
    /// Open a runtime with [`RuntimeConfig::with_policy_text`] of it to show,
    /// approve and commit that transaction under the policy that decided it.
    /// `None` when it was made under the workspace's policy or nothing is stored.
    ///
    /// [`RuntimeConfig::with_policy_text`]: crate::RuntimeConfig::with_policy_text
    pub fn run_policy(&self, transaction: TransactionId) -> Result<Option<crate::RunPolicy>, VshError> {
        let Some(artifact) = self.stored_artifact(transaction)? else { return Ok(None) };
        self.records.run_policy(&artifact)
    }

    /// Whether `transaction` waits for an approval that can never come: it
    /// was decided under the workspace's policy since replaced
    /// ([`Runtime::decided_under_another_policy`]), not under a policy its
    /// operator gave that run alone (`run --profile`, `--policy`), under
    /// which it is approved (sec85 F3, ux79 M3).
    pub fn policy_since_replaced(&self, transaction: TransactionId) -> bool {
        self.decided_under_another_policy(transaction) && !matches!(self.run_policy(transaction), Ok(Some(_)))
    }

    /// Whether `transaction` waits for a decision or a commit (pending,
    /// approved, or an auto-approved stored preview) that approving or
    /// committing would refuse because its stored work was decided under
    /// another policy than this runtime's ([`VshError::PolicyChanged`]):
    /// only `rerun` makes such work again. `false` for work that does not
    /// wait, is not stored, or is refused for another reason.
    pub fn decided_under_another_policy(&self, transaction: TransactionId) -> bool {
        let waiting = |state| {
            matches!(
                state,
                TransactionState::PendingApproval | TransactionState::Approved | TransactionState::AutoApproved
            )
        };
        self.records
            .get(transaction)
            .ok()
            .flatten()
            .is_some_and(|record| record.artifact.is_some() && waiting(record.state))
            && matches!(self.records.load_verified(transaction), Err(VshError::PolicyChanged(_)))
    }

    /// A transaction's artifact, from this process's previews or the store,
    /// its program and policy checked against its binding; `None` when only
    /// its record is stored.
    fn stored_artifact(&self, transaction: TransactionId) -> Result<Option<vsh_store::PendingArtifact>, VshError> {
        match self.previews.artifact(transaction) {
            Some(artifact) => Ok(Some(artifact)),
            None => match self.records.get(transaction)? {
                Some(record) if record.artifact.is_some() => self.records.load_bound(transaction).map(Some),
                Some(_) => Ok(None),
                None => Err(VshError::UnknownTransaction(transaction)),
            },
        }
    }

    /// The runs of `transaction`'s stored program again (`vsh rerun`,
    /// [`RunRequest::with_rerun_of`]) and theirs in turn, oldest first: each
    /// record the store holds, made since, whose evidence names it or one
    /// of them as what it ran again. Reads the artifacts of at most
    /// [`RERUNS_SCANNED`] of the latest records made since. A rerun that
    /// is committed or still waiting means running the first again would
    /// do its work twice (ux61 1).
    pub fn reruns_of(&self, transaction: TransactionId) -> Result<Vec<TransactionRecord>, VshError> {
        let Some(first) = self.records.get(transaction)? else { return Ok(Vec::new()) };
        let mut later: Vec<TransactionRecord> = self
            .transactions()?
            .into_iter()
            .filter(|record| {
                record.id != transaction && record.created_ms >= first.created_ms && record.artifact.is_some()
            })
            .collect();
        later.sort_by_key(|record| (record.created_ms, record.id));
        let skipped = later.len().saturating_sub(RERUNS_SCANNED);
        let mut linked = std::collections::BTreeSet::from([transaction]);
        let mut reruns = Vec::new();
        for record in later.into_iter().skip(skipped) {
            let Ok(artifact) = self.records.load_bound(record.id) else { continue };
            let Ok(evidence) = crate::evidence::Evidence::decode(&artifact.evidence) else { continue };
            if evidence.rerun_of.is_some_and(|of| linked.contains(&TransactionId::from_bytes(of))) {
                linked.insert(record.id);
                reruns.push(record);
            }
        }
        Ok(reruns)
    }

    /// The first transaction of the lineage `transaction` belongs to: the
    /// one whose program it ran again (`vsh rerun`), and that one's in turn,
    /// as far as the store still holds them (at most [`RERUNS_SCANNED`]
    /// steps); `transaction` itself when it is no rerun. With
    /// [`Runtime::reruns_of`] it gives every run of the same work, so that
    /// a rerun of a rerun is never the work done twice (ux62 1).
    pub fn rerun_origin(&self, transaction: TransactionId) -> Result<TransactionId, VshError> {
        let mut at = transaction;
        for _ in 0..RERUNS_SCANNED {
            let Some(artifact) = self.stored_artifact(at).ok().flatten() else { break };
            let Some(of) = crate::evidence::Evidence::decode(&artifact.evidence).ok().and_then(|e| e.rerun_of) else {
                break;
            };
            let of = TransactionId::from_bytes(of);
            if of == at || self.records.get(of)?.is_none() {
                break;
            }
            at = of;
        }
        Ok(at)
    }

    /// Whether stored transactions `first` and `second` make the same
    /// changes, byte for byte: the same paths, each found holding the same
    /// node and left holding the same node (kind, mode, size, content
    /// digest, symlink target). What `vsh rerun --approve-same` asks before
    /// it carries a review of `first` over to `second` (ux75 H1).
    ///
    /// # Errors
    ///
    /// When either's artifact cannot be read or does not verify.
    pub fn same_changes(&self, first: TransactionId, second: TransactionId) -> Result<bool, VshError> {
        let (one, other) = (self.records.stored_diff(first)?, self.records.stored_diff(second)?);
        if one == other {
            return Ok(true);
        }
        if one.entries().len() != other.entries().len() {
            return Ok(false);
        }
        // A file one run saw settled (known by its stamp) and the other
        // within its settling time (known by its digest) is the same version
        // where the workspace's file still has that stamp and those bytes
        // (a rerun of work whose first run changed files in the last 100 ms
        // was refused its carried review).
        let image = self.runs.fresh_image();
        let workspace = image.host();
        Ok(one.entries().iter().zip(other.entries()).all(|(one, other)| {
            one.path == other.path
                && one.kind == other.kind
                && one.after == other.after
                && (one.before == other.before
                    || match (one.before, other.before) {
                        (Some(a), Some(b)) => same_version(workspace, &one.path, a, b),
                        _ => false,
                    })
        }))
    }

    /// Every run of the same work as `transaction` the store holds: the first
    /// ([`Runtime::rerun_origin`]) and every rerun of it and of its reruns
    /// ([`Runtime::reruns_of`]), oldest first, `transaction` among them.
    pub fn runs_of_same_work(&self, transaction: TransactionId) -> Result<Vec<TransactionRecord>, VshError> {
        let origin = self.rerun_origin(transaction)?;
        let mut runs = self.reruns_of(origin)?;
        if let Some(first) = self.records.get(origin)? {
            runs.insert(0, first);
        }
        Ok(runs)
    }

    /// Every transaction record the store holds (garbage collection drops old
    /// terminal ones), in no particular order.
    pub fn transactions(&self) -> Result<Vec<TransactionRecord>, VshError> {
        Ok(self.records.transactions().list()?)
    }

    /// A transaction's state history: every version of its record the store's
    /// log holds, oldest first (once the log was compacted, from the version
    /// compaction carried over). Empty when the store does not know it.
    pub fn history(&self, transaction: TransactionId) -> Result<Vec<vsh_store::RecordVersion>, VshError> {
        if let Some(record) = self.previews.unwritten(transaction) {
            return Ok(vec![vsh_store::RecordVersion { record, carried_over: false }]);
        }
        Ok(self.records.transactions().history(transaction)?)
    }

    /// The record of a transaction: the store's, or, for a process-local
    /// preview whose record is not written yet, this runtime's.
    pub fn transaction(&self, transaction: TransactionId) -> Result<Option<TransactionRecord>, VshError> {
        match self.previews.unwritten(transaction) {
            Some(record) => Ok(Some(record)),
            None => self.records.get(transaction),
        }
    }

    /// Expire lapsed approvals, drop old finished transactions and delete
    /// unreferenced blobs, within `retention`'s bounds. Pending approvals are
    /// never collected before they expire, and content held for this runtime's
    /// previews is kept, as is the reviewed content the loss history names
    /// (what later runs measure a file's loss against). Real commands' scratch directories are cleared when
    /// together they hold more than [`RetentionConfig::max_scratch_bytes`],
    /// unless a run is using them ([`vsh_store::ScratchReport::busy`]).
    pub fn collect_garbage(&self, now_ms: u64, retention: &RetentionConfig) -> Result<GcReport, VshError> {
        let mut keep = self.previews.blobs();
        // A history that does not verify is refused by every run anyway.
        if let Ok(history) = self.records.loss_history() {
            keep.extend(history.reviewed_contents());
        }
        let mut report = self.records.transactions().gc(self.records.blobs(), now_ms, retention, &keep)?;
        report.scratch =
            self.records.scratch().collect(retention.max_scratch_bytes).map_err(VshError::DataDirectory)?;
        Ok(report)
    }

    /// Clear real commands' scratch directories now, whatever they hold
    /// (build outputs and caches: the next build starts from nothing), unless
    /// a run is using them, which the report says
    /// ([`vsh_store::ScratchReport::busy`]). The same as
    /// [`Runtime::collect_garbage`] with `max_scratch_bytes: Some(0)`, without
    /// the store's retention.
    pub fn clear_scratch(&self) -> Result<vsh_store::ScratchReport, VshError> {
        self.records.scratch().collect(Some(0)).map_err(VshError::DataDirectory)
    }

    /// Whether the state of real commands' scratch directories in the data
    /// directory is usable ([`vsh_store::ScratchLock::check`]): what `vsh
    /// doctor` checks, since a damaged one stops every run with commands.
    pub fn check_scratch(&self) -> Result<(), VshError> {
        self.records.scratch().check().map_err(VshError::DataDirectory)
    }

    /// What the workspace handle has done so far (stats, reads, listings, writes):
    /// evidence that a run's cost follows what it touched, not the workspace's size.
    pub fn host_counters(&self) -> vsh_host::CounterSnapshot {
        self.runs.workspace().counters().snapshot()
    }

    /// The dependencies (read set) of an auto-approved preview this runtime holds.
    pub fn dependencies(&self, transaction: TransactionId) -> Option<ReadSet> {
        self.previews.dependencies(transaction)
    }
}

/// What a reader's policy withholds of stored work (see `Runtime::reader_view`).
struct ReaderView {
    /// Its snapshot id (and the diff's digest) are withheld.
    snapshot_withheld: bool,
    /// Its output, changed paths, hunks, digests, counters and the
    /// decision's sizes are withheld too.
    tainted: bool,
    /// It was bound to another policy than the reader's.
    other_policy: bool,
}

/// Whether `calls` hides `path` from a look (its name, size and mode).
fn hides(calls: &vsh_policy::CallPolicy, path: &vsh_types::VPath) -> bool {
    calls.authorize(path, vsh_policy::AccessKind::MetadataRead).is_err()
}

/// `warnings` of `transaction`, now committed: a scratch warning that asked
/// for this very commit (it made the uncommitted change again) asks no more
/// (ux62 7: it named the transaction just committed).
fn committed_as_asked(warnings: &mut [crate::Warning], transaction: TransactionId) {
    for warning in warnings {
        if let crate::Warning::ScratchEmptied { changes, again, .. } = warning
            && again.as_deref() == Some(transaction.to_hex().as_str())
        {
            *again = None;
            changes.clear();
        }
    }
}

/// `decision` without the sizes and counts of the diff it judged.
fn withhold_metrics(decision: &mut crate::RuntimeDecision) {
    match decision {
        crate::RuntimeDecision::PendingApproval(manifest) => manifest.metrics = vsh_policy::RiskMetrics::default(),
        crate::RuntimeDecision::Denied(manifest) => manifest.metrics = vsh_policy::RiskMetrics::default(),
        crate::RuntimeDecision::AutoApproved => {}
    }
}

/// `output` with nothing a program printed or returned: the value is
/// `None`, the streams are empty, an exception is a line saying so, a
/// session's steps keep their kind and status alone.
fn withhold_output(output: &mut crate::ExecutionOutput) {
    use crate::ExecutionOutput;
    match output {
        ExecutionOutput::Monty { value, stdout } => {
            *value = vsh_monty::MontyObject::None;
            stdout.clear();
        }
        ExecutionOutput::Bash(result) => {
            result.stdout.clear();
            result.stderr.clear();
            // A status is a byte a program chose: it may be one it read
            // (sec60 N1: `exit $(od ... private/db.conf)`).
            result.exit_code = 0;
        }
        ExecutionOutput::MontyRaised { exception, stdout } => {
            "(withheld under this policy)".clone_into(exception);
            stdout.clear();
        }
        // Each step's status, and whether it was kept (a failure is
        // undone), are bytes and bits its program chose: none is shown.
        ExecutionOutput::Session { steps } => steps.clear(),
    }
}

/// The bytes a commit replaces, read before it lands
/// ([`Runtime::read_before_contents`]): each with its digest, and those of
/// files the work removed or replaced unread with their path and recorded
/// state, to name in the workspace's unread contents.
struct KeptBefores {
    befores: Vec<(Vec<u8>, vsh_types::BlobId)>,
    unread: Vec<(vsh_types::VPath, vsh_types::NodeState, vsh_types::BlobId)>,
}

/// Whether the file states `one` and `other` of `path` are one version of
/// it: the same kind, size and mode, one known by its digest and the other
/// by its stamp, where the workspace's file has that stamp still and bytes
/// with that digest.
fn same_version(
    workspace: &vsh_host::CapDir,
    path: &vsh_types::VPath,
    one: vsh_types::NodeState,
    other: vsh_types::NodeState,
) -> bool {
    if one.kind != vsh_types::NodeKind::File || (one.kind, one.size, one.mode) != (other.kind, other.size, other.mode) {
        return false;
    }
    let (digest, stamped) = match (one.content, other.content) {
        (Some(digest), None) if other.stamp.is_some() => (digest, other),
        (None, Some(digest)) if one.stamp.is_some() => (digest, one),
        _ => return false,
    };
    vsh_vfs::live_content_if_unchanged(workspace, path, &stamped)
        .is_some_and(|bytes| vsh_types::BlobId::of(&bytes) == digest)
}
