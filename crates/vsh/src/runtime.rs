//! [`Runtime`]: composes the stages of a run and of a commit.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use vsh_commit::{CommitRequest, Committer, RecoveryReport, RestoreReport};
use vsh_host::{CapDir, LockWait};
use vsh_monty::{ExecutionBudget, LimitExceeded, LimitKind, MontyExecutor, WorkerConfig, default_worker_path};
use vsh_policy::{Decision, PolicyInput, TransactionPolicy};
use vsh_store::{
    ApprovalGrant, ArtifactBinding, ArtifactLimits, BlobStore, CommitStep, DataDir, GcReport, PendingArtifact,
    RetentionConfig, TransactionRecord, TransactionStore,
};
use vsh_types::canon::{self, Canonical};
use vsh_types::{
    BlobId, DiffEntry, ExecutionEvidenceDigest, IntentDigest, NodeKind, PrincipalId, ProgramDigest, ReadSet,
    RuntimeConfigDigest, TransactionId, TransactionState, VPath,
};
use vsh_vfs::{CanonicalDiff, ReviewLimits, SnapshotLimits, VirtualFs};

use crate::cancel::ExecutionCancellation;
use crate::config::{Authority, Execution};
use crate::evidence::{Evidence, MAX_VALUE_DEPTH, derive_transaction_id, value_depth};
use crate::hook::{
    CommitPreparation, CommitResolution, HookConfig, HookDecision, HookDecisionRecord, RequestEvent, ReviewContent,
};
use crate::ledger::StoreLedger;
use crate::receipt::{CommitReceipt, ExecutionOutput, Receipt, StageTimings};
use crate::request::{Language, ReceiptDetail, RunMode, RunRequest};
use crate::{RuntimeConfig, VshError};

/// vsh's own directory inside the workspace: the commit lock, journal and staging area.
const RUNTIME_DIR: &str = ".vsh";
/// The default data directory, inside [`RUNTIME_DIR`].
const DEFAULT_DATA_DIR: &str = ".vsh/data";
/// Process-local previews kept for a later commit (fail closed beyond this).
const MAX_PREPARED: usize = 64;
/// Bytes of process-local previews (approximate: diff entries, dependencies and stdout).
const MAX_PREPARED_BYTES: u64 = 128 << 20;

/// An auto-approved preview held by this live runtime until it is committed or discarded.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub(crate) artifact: PendingArtifact,
    pub(crate) receipt: Receipt,
    bytes: u64,
}

/// A transaction ready to commit: what to apply and the receipt to complete.
struct Committable {
    diff: Vec<DiffEntry>,
    reads: ReadSet,
    receipt: Receipt,
}

/// A vsh runtime over one workspace.
///
/// Runs are independent: each captures a fresh observed snapshot. Commits are
/// serialized per workspace by the commit engine's lock, across runtimes and
/// processes. Pending approvals are durable; auto-approved previews are held in
/// this runtime's memory and must be committed by it.
#[derive(Debug)]
pub struct Runtime {
    workspace: Arc<CapDir>,
    excluded: Vec<VPath>,
    blobs: BlobStore,
    transactions: TransactionStore,
    committer: Committer,
    policy: TransactionPolicy,
    snapshot_limits: SnapshotLimits,
    artifact_limits: ArtifactLimits,
    prepared: Mutex<HashMap<TransactionId, Prepared>>,
    nonce: AtomicU64,
    startup_recovery: RecoveryReport,
    /// Whether another process held the commit lock when this runtime opened,
    /// so startup recovery was left to it (or to this runtime's first commit).
    recovery_deferred: bool,
    lock_wait: LockWait,
    faults: Option<crate::config::CommitFaults>,
    hook: Option<HookConfig>,
    executor: MontyExecutor,
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn clock_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Runtime {
    /// Open the workspace and vsh's data directory, then recover any commit a
    /// crash interrupted (see [`Runtime::startup_recovery`]).
    pub fn open(config: RuntimeConfig) -> Result<Self, VshError> {
        let RuntimeConfig {
            workspace_root,
            data_directory,
            policy_profile,
            policy_file,
            snapshot_limits,
            hook,
            execution,
            max_idle_workers,
            result_compatibility,
            lock_wait,
            faults,
            authority,
            allowed_mounts,
        } = config;
        let executor = Self::executor(execution, max_idle_workers)?.with_result_compatibility(result_compatibility);
        let workspace =
            Arc::new(CapDir::open(&workspace_root).map_err(VshError::Workspace)?.with_allowed_mounts(allowed_mounts));
        let runtime_dir = VPath::parse(RUNTIME_DIR).expect("constant path");
        let mut excluded = vec![runtime_dir.clone()];
        let data = match &data_directory {
            None => DataDir::open_in_workspace(&workspace, &VPath::parse(DEFAULT_DATA_DIR).expect("constant path"))
                .map_err(VshError::DataDirectory)?,
            Some(path) => {
                let data = DataDir::open_external(path).map_err(VshError::DataDirectory)?;
                // Decided by device and inode through the handles, never by a path string.
                match data.dir().location_within(&workspace).map_err(VshError::Workspace)? {
                    Some(inside) if inside.is_root() => {
                        return Err(VshError::DataDirectory(vsh_store::StoreError::DataDirIsRoot));
                    }
                    Some(inside) => excluded.push(inside),
                    None => {}
                }
                data
            }
        };
        let protected_data = excluded.get(1).cloned();
        let policy = match &policy_file {
            None => TransactionPolicy::from_profile(policy_profile, protected_data.as_ref()),
            Some(path) => TransactionPolicy::from_file_with_data_dir(path, protected_data.as_ref())
                .map_err(VshError::PolicyFile)?,
        };
        let key = Self::authority_key(&authority, &workspace)?;
        let blobs = BlobStore::open(&data)?;
        let transactions = TransactionStore::open(&data, &key)?;
        let mut committer = Committer::new(Arc::clone(&workspace), runtime_dir)?
            .with_authority(key)
            .with_protection(policy.calls().clone());
        if let Some(inside) = &protected_data {
            committer = committer.with_excluded(inside.clone());
        }
        // Recovery needs the commit lock. If another process holds it, it is
        // committing or recovering this workspace right now, and every commit
        // recovers first anyway: opening never waits for it.
        let (startup_recovery, recovery_deferred) = match committer.try_session()? {
            Some(session) => (session.recover(&StoreLedger::recovery(&transactions, clock_ms()))?, false),
            None => (RecoveryReport::default(), true),
        };
        Ok(Self {
            workspace,
            excluded,
            blobs,
            transactions,
            committer,
            policy,
            snapshot_limits,
            artifact_limits: ArtifactLimits::default(),
            prepared: Mutex::new(HashMap::new()),
            nonce: AtomicU64::new(0),
            startup_recovery,
            recovery_deferred,
            lock_wait,
            faults,
            hook,
            executor,
        })
    }

    /// The authority key, from the application or a key file outside the workspace.
    fn authority_key(authority: &Authority, workspace: &CapDir) -> Result<vsh_types::AuthorityKey, VshError> {
        let file = match authority {
            Authority::Key(key) => return Ok(key.clone()),
            Authority::File(path) => vsh_store::AuthorityKeyFile::at(path),
            Authority::DefaultFile => vsh_store::AuthorityKeyFile::default_location().map_err(VshError::Authority)?,
        };
        // Refuse a key inside the workspace before creating anything there:
        // first where its directory would be made, then the directory itself.
        let inside = |directory: CapDir| {
            directory.location_within(workspace).map_err(|source| {
                VshError::Authority(vsh_store::StoreError::AuthorityKeyIo { path: file.path().to_owned(), source })
            })
        };
        let steps: [&dyn Fn() -> Result<CapDir, vsh_store::StoreError>; 2] =
            [&|| file.nearest_existing_directory(), &|| file.directory()];
        for directory in steps {
            if let Some(inside) = inside(directory().map_err(VshError::Authority)?)? {
                return Err(VshError::AuthorityKeyInWorkspace(inside));
            }
        }
        file.load_or_create().map_err(VshError::Authority)
    }

    fn executor(execution: Execution, max_idle: Option<usize>) -> Result<MontyExecutor, VshError> {
        let mut worker = match execution {
            Execution::InProcess => return Ok(MontyExecutor::in_process()),
            Execution::Worker(worker) => worker,
            Execution::DefaultWorker => WorkerConfig::new(default_worker_path().ok_or(VshError::WorkerNotFound)?),
        };
        if let Some(max_idle) = max_idle {
            worker.max_idle = max_idle;
        }
        MontyExecutor::worker(worker).map_err(VshError::Worker)
    }

    /// Whether programs run in this process rather than the confined worker.
    pub fn is_in_process(&self) -> bool {
        self.executor.is_in_process()
    }

    /// What recovery did when this runtime opened: commits a crash interrupted
    /// are rolled forward (past their completion marker) or back (before it).
    /// Conflicts are left untouched and block further commits until resolved.
    pub fn startup_recovery(&self) -> &RecoveryReport {
        &self.startup_recovery
    }

    /// Whether startup recovery was left to the other process that held the
    /// commit lock when this runtime opened ([`Runtime::startup_recovery`] is
    /// then empty; [`Runtime::recover`] waits for the lock).
    pub fn recovery_deferred(&self) -> bool {
        self.recovery_deferred
    }

    /// Run recovery again (for example after an operator resolved a
    /// conflict), waiting for the commit lock as configured
    /// ([`RuntimeConfig::with_lock_wait`]).
    pub fn recover(&self) -> Result<RecoveryReport, VshError> {
        let session = self.committer.session(&self.lock_wait)?;
        Ok(session.recover(&StoreLedger::recovery(&self.transactions, clock_ms()))?)
    }

    /// An operator's decision for a transaction whose rollback recovery left
    /// unresolved (someone else changed some of its paths during the commit):
    /// put the workspace back in the before state. Whatever is in the way is
    /// moved aside into vsh's runtime directory (`.vsh/recovered/<tx>/`),
    /// never deleted; the transaction becomes Failed.
    pub fn restore(&self, transaction: TransactionId) -> Result<RestoreReport, VshError> {
        let session = self.committer.session(&self.lock_wait)?;
        let ledger = StoreLedger::recovery(&self.transactions, clock_ms());
        let report = session.recover(&ledger)?;
        if !report.is_clean() {
            return Err(VshError::Commit(vsh_commit::CommitError::RecoveryPending { conflicts: report.conflicts }));
        }
        Ok(session.restore(transaction, &ledger)?)
    }

    /// The active policy.
    pub fn policy(&self) -> &TransactionPolicy {
        &self.policy
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
        // Cancellation, and the end-to-end deadline: the executor enforces it during
        // the run; the stages after it (diff, policy, review) are checked here.
        let deadline = request.budget.max_request_duration;
        let check = || {
            if cancel.is_cancelled() {
                return Err(VshError::Cancelled);
            }
            let elapsed = started.elapsed();
            if elapsed > deadline {
                return Err(VshError::RequestDeadline(LimitExceeded {
                    limit: LimitKind::RequestDuration,
                    attempted: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
                    max: u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX),
                }));
            }
            Ok(())
        };
        check()?;
        let intent_length = request.intent.map_or(0, str::len);
        if intent_length as u64 > self.artifact_limits.max_intent_bytes {
            return Err(VshError::IntentTooLarge { length: intent_length, max: self.artifact_limits.max_intent_bytes });
        }
        let mut timings = StageTimings::default();

        let stage_start = Instant::now();
        let mut vfs = VirtualFs::new(Arc::clone(&self.workspace), self.excluded.clone(), self.snapshot_limits);
        timings.snapshot = elapsed_ns(stage_start);

        let stage_start = Instant::now();
        let outcome = match request.language {
            Language::Monty => self
                .executor
                .execute(request.code, &mut vfs, self.policy.calls(), &request.budget)
                .map_err(|error| VshError::Execution(Box::new(error)))?,
        };
        timings.execute = elapsed_ns(stage_start);
        check()?;
        let depth = value_depth(&outcome.value);
        if depth > MAX_VALUE_DEPTH {
            return Err(VshError::ResultNesting { depth, max: MAX_VALUE_DEPTH });
        }

        let stage_start = Instant::now();
        let diff = vfs.canonical_diff()?;
        timings.diff = elapsed_ns(stage_start);
        check()?;

        let stage_start = Instant::now();
        let base_nodes = self.base_nodes_for_ratio(diff.entries())?;
        let decision = self.policy.evaluate(&PolicyInput {
            diff: diff.entries(),
            denied: &outcome.denied,
            renames: vfs.renames(),
            observed_base_nodes: base_nodes,
        });
        timings.policy = elapsed_ns(stage_start);

        check()?;
        let review = match request.detail {
            ReceiptDetail::Full => vfs.review(diff.entries(), ReviewLimits::default())?,
            ReceiptDetail::Compact => Vec::new(),
        };
        check()?;

        let stage_start = Instant::now();
        let state = match &decision {
            Decision::Denied(_) => TransactionState::Denied,
            Decision::AutoApproved => TransactionState::AutoApproved,
            Decision::PendingApproval(_) => TransactionState::PendingApproval,
        };
        let (artifact, warnings) = self.bind_and_store(request, &mut vfs, &diff, state, &decision, &outcome)?;
        let (transaction, snapshot) = (artifact.binding.transaction, artifact.binding.snapshot);
        timings.bind_and_store = elapsed_ns(stage_start);

        let mut receipt = Receipt {
            transaction,
            base_snapshot: snapshot,
            state,
            decision,
            diff: diff.digest(),
            changed_paths: diff.len(),
            changes: match request.detail {
                ReceiptDetail::Full => diff.entries().to_vec(),
                ReceiptDetail::Compact => Vec::new(),
            },
            review,
            output: ExecutionOutput::Monty { value: outcome.value, stdout: outcome.stdout },
            execution: outcome.stats,
            timings,
            commit: None,
            warnings,
        };

        if state == TransactionState::AutoApproved {
            self.keep_prepared(artifact, receipt.clone())?;
        }
        if cancel.is_cancelled() {
            self.discard_cancelled(transaction)?;
            return Err(VshError::Cancelled);
        }
        if request.mode == RunMode::Auto && state == TransactionState::AutoApproved {
            let committed = self.commit_cancellable(transaction, clock_ms(), cancel)?;
            receipt.state = committed.state;
            receipt.commit = committed.commit;
            receipt.timings.commit = committed.timings.commit;
        }
        receipt.timings.total = elapsed_ns(started);
        Ok(receipt)
    }

    /// The number of workspace nodes the delete-ratio ceiling divides by.
    ///
    /// An observed snapshot does not know the workspace's size, and counting it
    /// on every run would make every run cost O(workspace). So the count happens
    /// only when the rule can apply (at least `delete_ratio_min_paths` deletions)
    /// and stops as soon as it proves the ratio below the ceiling: the walk is
    /// bounded by `deleted × 10,000 / deny_delete_ratio_bps` nodes, proportional
    /// to the deletion itself. Returns 0 (rule inactive) below the minimum.
    fn base_nodes_for_ratio(&self, diff: &[DiffEntry]) -> Result<u64, VshError> {
        let thresholds = self.policy.thresholds();
        let deleted = diff.iter().filter(|entry| entry.after.is_none()).count() as u64;
        if deleted < thresholds.delete_ratio_min_paths || thresholds.deny_delete_ratio_bps == 0 {
            return Ok(0);
        }
        // With more than `enough` nodes the ratio is certainly below the ceiling.
        let enough = deleted.saturating_mul(10_000) / u64::from(thresholds.deny_delete_ratio_bps) + 1;
        let mut count = 0u64;
        let mut stack = vec![VPath::root()];
        while let Some(dir) = stack.pop() {
            let entries = match self.workspace.list_dir(&dir) {
                Ok(entries) => entries,
                // A directory that vanished or is not listable holds nothing countable.
                Err(vsh_host::HostError::NotFound { .. } | vsh_host::HostError::NotADirectory { .. }) => continue,
                Err(error) => return Err(VshError::Workspace(error)),
            };
            for entry in entries {
                let Ok(child) =
                    std::str::from_utf8(&entry.name).map_err(drop).and_then(|name| dir.child(name).map_err(drop))
                else {
                    count += 1;
                    continue;
                };
                if self.excluded.iter().any(|excluded| child.is_within(excluded)) {
                    continue;
                }
                count += 1;
                if count > enough {
                    return Ok(count);
                }
                let kind = match entry.kind {
                    Some(kind) => Some(kind),
                    None => self.workspace.lstat(&child).map_err(VshError::Workspace)?.map(|stat| stat.kind),
                };
                if kind == Some(vsh_host::HostKind::Directory) {
                    stack.push(child);
                }
            }
        }
        Ok(count)
    }

    /// Bind the run into its transaction id and store what a commit will need:
    /// the record, the final contents, and for pending work the durable artifact.
    fn bind_and_store(
        &self,
        request: &RunRequest<'_>,
        vfs: &mut VirtualFs,
        diff: &CanonicalDiff,
        state: TransactionState,
        decision: &Decision,
        outcome: &vsh_monty::MontyOutcome,
    ) -> Result<(PendingArtifact, Vec<crate::Warning>), VshError> {
        let evidence = Evidence::new(
            self.next_nonce(),
            decision.clone(),
            outcome.value.clone(),
            outcome.stdout.clone(),
            &outcome.stats,
            vfs.effects().to_vec(),
        );
        let evidence_bytes = evidence.encode();
        let intent = request.intent.unwrap_or("");
        let binding = ArtifactBinding {
            transaction: TransactionId::from_bytes([0; 32]),
            snapshot: vfs.snapshot_id(),
            program: Self::program_digest(request),
            intent: IntentDigest::digest(intent.as_bytes()),
            read_set: vfs.read_set().digest(),
            write_set: diff.write_set_digest(),
            diff: diff.digest(),
            policy: self.policy.digest(),
            runtime_config: self.config_digest(&request.budget),
            evidence: ExecutionEvidenceDigest::digest(&evidence_bytes),
        };
        let transaction = derive_transaction_id(&binding);
        let binding = ArtifactBinding { transaction, ..binding };
        let mut warnings = Vec::new();
        if state != TransactionState::Denied {
            self.store_contents(vfs, diff, &mut warnings)?;
        }
        let now = clock_ms();
        let record = TransactionRecord::new(transaction, binding.snapshot, state, now);
        let artifact = PendingArtifact {
            binding,
            intent: intent.to_owned(),
            diff: diff.entries().to_vec(),
            read_set: vfs.read_set().clone(),
            evidence: evidence_bytes,
        };
        if state == TransactionState::PendingApproval {
            // The record and its artifact appear together or not at all.
            self.transactions.create_with_artifact(&self.blobs, &record, &artifact, &self.artifact_limits)?;
        } else {
            self.transactions.create(&record)?;
        }
        Ok((artifact, warnings))
    }

    /// Approve a pending transaction on behalf of `principal` (an opaque label's
    /// digest: vsh binds it, authenticating it is the host's job), valid from
    /// `issued_ms` until `expires_ms` (exclusive, milliseconds since the Unix
    /// epoch). The transaction must have been made under the active policy.
    pub fn approve(
        &self,
        transaction: TransactionId,
        principal: PrincipalId,
        issued_ms: u64,
        expires_ms: u64,
    ) -> Result<TransactionRecord, VshError> {
        self.load_verified(transaction)?;
        let grant = ApprovalGrant::new(transaction, principal, issued_ms, expires_ms)?;
        Ok(self.transactions.approve(transaction, &grant)?)
    }

    /// Reject a pending, approved or auto-approved transaction: it can never be committed.
    pub fn reject(&self, transaction: TransactionId, now_ms: u64) -> Result<TransactionRecord, VshError> {
        self.lock_prepared().remove(&transaction);
        Ok(self.transactions.reject(transaction, now_ms)?)
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
        let record = self.transactions.get(transaction)?.ok_or(VshError::UnknownTransaction(transaction))?;
        if let Some(hook) = &self.hook
            && hook.applies_to(record.state)
        {
            let event = self.request_event(hook, transaction, record.state)?;
            return Err(VshError::HookRequired(Box::new(event)));
        }
        self.commit_unhooked(transaction, record.state, now_ms, cancel)
    }

    /// Commit without asking a hook (the caller already did, or none applies).
    fn commit_unhooked(
        &self,
        transaction: TransactionId,
        state: TransactionState,
        now_ms: u64,
        cancel: &ExecutionCancellation,
    ) -> Result<Receipt, VshError> {
        let started = Instant::now();
        let committable = match state {
            TransactionState::AutoApproved => {
                let prepared = self.lock_prepared().get(&transaction).cloned();
                match prepared {
                    Some(prepared) => Committable {
                        diff: prepared.artifact.diff,
                        reads: prepared.artifact.read_set,
                        receipt: prepared.receipt,
                    },
                    None => return Err(VshError::NotCommittable { transaction, state }),
                }
            }
            TransactionState::Approved => self.committable_from_artifact(transaction, state)?,
            state => return Err(VshError::NotCommittable { transaction, state }),
        };
        if !cancel.enter_commit() {
            return Err(VshError::Cancelled);
        }
        let result = self.commit_bound(transaction, &committable.diff, &committable.reads, now_ms);
        // The reservation was consumed whatever the outcome: the preview cannot be committed again.
        self.lock_prepared().remove(&transaction);
        let commit = result?;
        let mut receipt = committable.receipt;
        receipt.state = TransactionState::Committed;
        receipt.commit = Some(commit);
        receipt.timings =
            StageTimings { commit: elapsed_ns(started), total: elapsed_ns(started), ..StageTimings::default() };
        Ok(receipt)
    }

    /// Clean up after a request whose receipt was never delivered: a process-local
    /// preview is dropped (rejected); durable auto-approved work moves to pending
    /// review. Returns whether anything changed.
    pub fn discard_cancelled(&self, transaction: TransactionId) -> Result<bool, VshError> {
        if self.lock_prepared().remove(&transaction).is_some() {
            let record = self.transactions.get(transaction)?;
            if let Some(record) = record.filter(|record| record.state == TransactionState::AutoApproved) {
                if record.artifact.is_some() {
                    self.transactions.compare_and_transition(
                        transaction,
                        TransactionState::AutoApproved,
                        TransactionState::PendingApproval,
                        clock_ms(),
                    )?;
                } else {
                    self.transactions.reject(transaction, clock_ms())?;
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Ask whether a hook must decide before `transaction` commits. Makes a
    /// process-local preview durable first (so a hook's Review or a failed
    /// handler can move it to pending review). Runs no handler code.
    pub fn prepare_commit(&self, transaction: TransactionId) -> Result<CommitPreparation, VshError> {
        let record = self.transactions.get(transaction)?.ok_or(VshError::UnknownTransaction(transaction))?;
        if !matches!(
            record.state,
            TransactionState::AutoApproved | TransactionState::PendingApproval | TransactionState::Approved
        ) {
            return Err(VshError::NotCommittable { transaction, state: record.state });
        }
        let Some(hook) = self.hook.as_ref().filter(|hook| hook.applies_to(record.state)) else {
            return Ok(CommitPreparation::Ready { transaction, state: record.state });
        };
        if record.artifact.is_none() {
            let artifact = self
                .lock_prepared()
                .get(&transaction)
                .map(|prepared| prepared.artifact.clone())
                .ok_or(VshError::NotCommittable { transaction, state: record.state })?;
            self.transactions.put_artifact(&self.blobs, &artifact, &self.artifact_limits)?;
        }
        Ok(CommitPreparation::Review(Box::new(self.request_event(hook, transaction, record.state)?)))
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
        let hook = self.hook.as_ref().ok_or(VshError::NoHook)?;
        let transaction = event.transaction;
        let record = self.transactions.get(transaction)?.ok_or(VshError::UnknownTransaction(transaction))?;
        if record.state != event.state || self.request_event(hook, transaction, record.state)? != *event {
            return Err(VshError::HookEventMismatch(transaction));
        }
        let text = match &decision {
            HookDecision::FollowPolicy => "",
            HookDecision::Approve { reason } | HookDecision::Reject { reason } => reason,
            HookDecision::Review { feedback } => feedback,
        };
        if text.len() > hook.max_reason_bytes() {
            return Err(VshError::HookReasonLimit { length: text.len(), max: hook.max_reason_bytes() });
        }
        let record_of =
            |decision: HookDecision| HookDecisionRecord { event_id: event.event_id, hook: event.hook, decision };
        let (state, receipt) = match (&decision, record.state) {
            (HookDecision::Reject { .. }, _) => {
                self.lock_prepared().remove(&transaction);
                (self.transactions.reject(transaction, now_ms)?.state, None)
            }
            (HookDecision::Review { .. }, TransactionState::AutoApproved) => {
                self.lock_prepared().remove(&transaction);
                let moved = self.transactions.compare_and_transition(
                    transaction,
                    TransactionState::AutoApproved,
                    TransactionState::PendingApproval,
                    now_ms,
                )?;
                (moved.state, None)
            }
            (HookDecision::Review { .. } | HookDecision::FollowPolicy, TransactionState::PendingApproval) => {
                (record.state, None)
            }
            (HookDecision::Approve { .. }, TransactionState::PendingApproval) => {
                if !event.evidence_complete {
                    return Err(VshError::IncompleteHookEvidence(transaction));
                }
                let principal = PrincipalId::digest(&event.hook.0);
                let grant = ApprovalGrant::new(transaction, principal, now_ms, now_ms + hook.approval_ttl_ms())?;
                self.transactions.approve(transaction, &grant)?;
                let receipt = self.commit_unhooked(transaction, TransactionState::Approved, now_ms, cancel)?;
                (receipt.state, Some(receipt))
            }
            (HookDecision::Approve { .. } | HookDecision::FollowPolicy, state) => {
                if matches!(decision, HookDecision::Approve { .. }) && !event.evidence_complete {
                    return Err(VshError::IncompleteHookEvidence(transaction));
                }
                let receipt = self.commit_unhooked(transaction, state, now_ms, cancel)?;
                (receipt.state, Some(receipt))
            }
            (HookDecision::Review { .. }, state) => (state, None),
        };
        Ok(CommitResolution { state, receipt, hook: record_of(decision) })
    }

    /// The handler failed (an error, a timeout, a cancellation): auto-approved
    /// work falls back to pending review; nothing commits.
    pub fn fail_hook(&self, event: &RequestEvent, now_ms: u64) -> Result<TransactionState, VshError> {
        let transaction = event.transaction;
        let record = self.transactions.get(transaction)?.ok_or(VshError::UnknownTransaction(transaction))?;
        if record.state == TransactionState::AutoApproved && record.artifact.is_some() {
            self.lock_prepared().remove(&transaction);
            let moved = self.transactions.compare_and_transition(
                transaction,
                TransactionState::AutoApproved,
                TransactionState::PendingApproval,
                now_ms,
            )?;
            return Ok(moved.state);
        }
        Ok(record.state)
    }

    /// The event a hook sees for `transaction`, regenerated from what is stored.
    fn request_event(
        &self,
        hook: &HookConfig,
        transaction: TransactionId,
        state: TransactionState,
    ) -> Result<RequestEvent, VshError> {
        let prepared = self.lock_prepared().get(&transaction).map(|prepared| prepared.artifact.clone());
        let artifact = match prepared {
            Some(artifact) => artifact,
            None => self.load_verified(transaction)?.0,
        };
        let evidence =
            Evidence::decode(&artifact.evidence).map_err(|source| VshError::Evidence { transaction, source })?;
        let (contents, content_complete) = self.content_evidence(&artifact.diff, hook.max_content_bytes())?;
        let binding = &artifact.binding;
        Ok(RequestEvent {
            event_id: RequestEvent::derive_id(transaction, hook.id(), state),
            hook: hook.id(),
            transaction,
            state,
            decision: evidence.decision,
            snapshot: binding.snapshot,
            program: binding.program,
            intent: (binding.intent, artifact.intent.clone()),
            read_set: binding.read_set,
            write_set: binding.write_set,
            diff_digest: binding.diff,
            policy: binding.policy,
            runtime_config: binding.runtime_config,
            evidence: binding.evidence,
            diff: artifact.diff,
            effects: evidence.effects,
            stdout: evidence.stdout,
            contents,
            evidence_complete: true,
            content_complete,
        })
    }

    /// Before and after contents of changed files, from hash-verified bytes
    /// only: after-states from the blob store, before-states from the workspace
    /// when (and only when) the live bytes still hash to the recorded state.
    fn content_evidence(&self, diff: &[DiffEntry], budget: u64) -> Result<(Vec<ReviewContent>, bool), VshError> {
        let mut contents = Vec::new();
        let mut complete = true;
        let mut spent = 0u64;
        for entry in diff {
            for (after, state) in [(false, entry.before), (true, entry.after)] {
                let Some(state) = state.filter(|state| state.kind == NodeKind::File) else { continue };
                let Some(blob) = state.content else { continue };
                if budget == 0 || spent.saturating_add(state.size) > budget {
                    complete = false;
                    continue;
                }
                let bytes = if after {
                    // A missing or corrupt blob is a store failure, never "not reviewed".
                    Some(self.blobs.get(blob, state.size)?)
                } else {
                    self.workspace
                        .read_file(&entry.path, state.size)
                        .ok()
                        .map(|read| read.bytes)
                        .filter(|bytes| BlobId::of(bytes) == blob)
                };
                match bytes {
                    Some(bytes) => {
                        spent += state.size;
                        contents.push(ReviewContent { path: entry.path.clone(), after, blob, bytes });
                    }
                    None => complete = false,
                }
            }
        }
        Ok((contents, complete))
    }

    /// The receipt of a stored transaction, rebuilt from its durable artifact
    /// (pending and approved transactions), or from this runtime's memory
    /// (auto-approved previews). `None` for transactions without either.
    pub fn show(&self, transaction: TransactionId) -> Result<Option<Receipt>, VshError> {
        if let Some(prepared) = self.lock_prepared().get(&transaction) {
            return Ok(Some(prepared.receipt.clone()));
        }
        let Some(record) = self.transactions.get(transaction)? else { return Ok(None) };
        if record.artifact.is_none() {
            return Ok(None);
        }
        Ok(Some(self.committable_from_artifact(transaction, record.state)?.receipt))
    }

    /// Transactions waiting for a decision or a commit: `PendingApproval` and `Approved`.
    pub fn pending(&self) -> Result<Vec<TransactionRecord>, VshError> {
        Ok(self
            .transactions
            .list()?
            .into_iter()
            .filter(|record| matches!(record.state, TransactionState::PendingApproval | TransactionState::Approved))
            .collect())
    }

    /// Forget an auto-approved preview without committing it (it becomes
    /// `Rejected`). Returns whether this runtime held it.
    pub fn discard_preview(&self, transaction: TransactionId) -> Result<bool, VshError> {
        let removed = self.lock_prepared().remove(&transaction).is_some();
        if removed {
            self.transactions.reject(transaction, clock_ms())?;
        }
        Ok(removed)
    }

    /// The durable record of a transaction.
    pub fn transaction(&self, transaction: TransactionId) -> Result<Option<TransactionRecord>, VshError> {
        Ok(self.transactions.get(transaction)?)
    }

    /// Expire lapsed approvals, drop old finished transactions and delete
    /// unreferenced blobs, within `retention`'s bounds. Pending approvals are
    /// never collected before they expire, and content held for this runtime's
    /// previews is kept.
    pub fn collect_garbage(&self, now_ms: u64, retention: &RetentionConfig) -> Result<GcReport, VshError> {
        let keep: BTreeSet<BlobId> = self
            .lock_prepared()
            .values()
            .flat_map(|prepared| {
                prepared.artifact.diff.iter().filter_map(|entry| entry.after.and_then(|after| after.content))
            })
            .collect();
        Ok(self.transactions.gc(&self.blobs, now_ms, retention, &keep)?)
    }

    /// What the workspace handle has done so far (stats, reads, listings, writes):
    /// evidence that a run's cost follows what it touched, not the workspace's size.
    pub fn host_counters(&self) -> vsh_host::CounterSnapshot {
        self.workspace.counters().snapshot()
    }

    /// The dependencies (read set) of an auto-approved preview this runtime holds.
    pub fn dependencies(&self, transaction: TransactionId) -> Option<ReadSet> {
        self.lock_prepared().get(&transaction).map(|prepared| prepared.artifact.read_set.clone())
    }

    fn lock_prepared(&self) -> std::sync::MutexGuard<'_, HashMap<TransactionId, Prepared>> {
        self.prepared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn keep_prepared(&self, artifact: PendingArtifact, receipt: Receipt) -> Result<(), VshError> {
        let transaction = artifact.binding.transaction;
        let bytes = (artifact.diff.len() as u64).saturating_mul(256)
            + (artifact.read_set.len() as u64).saturating_mul(128)
            + artifact.evidence.len() as u64
            + receipt.output.stdout_bytes().len() as u64;
        let mut prepared = self.lock_prepared();
        let held: u64 = prepared.values().map(|entry| entry.bytes).sum();
        if prepared.len() >= MAX_PREPARED || held.saturating_add(bytes) > MAX_PREPARED_BYTES {
            let entries = prepared.len();
            drop(prepared);
            // Nobody can commit it now: close it rather than leave it reservable.
            self.transactions.reject(transaction, clock_ms())?;
            return Err(VshError::EphemeralCapacity { entries, bytes: held });
        }
        prepared.insert(transaction, Prepared { artifact, receipt, bytes });
        Ok(())
    }

    /// Load a stored artifact and check it still binds: its id re-derives from its
    /// binding, and it was made under the active policy.
    fn load_verified(&self, transaction: TransactionId) -> Result<(PendingArtifact, Evidence), VshError> {
        let artifact = self.transactions.load_artifact(&self.blobs, transaction, &self.artifact_limits)?;
        if derive_transaction_id(&artifact.binding) != transaction {
            return Err(VshError::ArtifactBinding(transaction));
        }
        if artifact.binding.policy != self.policy.digest() {
            return Err(VshError::PolicyChanged(transaction));
        }
        let evidence =
            Evidence::decode(&artifact.evidence).map_err(|source| VshError::Evidence { transaction, source })?;
        Ok((artifact, evidence))
    }

    fn committable_from_artifact(
        &self,
        transaction: TransactionId,
        state: TransactionState,
    ) -> Result<Committable, VshError> {
        let (artifact, evidence) = self.load_verified(transaction)?;
        let execution = evidence.stats.clone();
        let receipt = Receipt {
            transaction,
            base_snapshot: artifact.binding.snapshot,
            state,
            decision: evidence.decision,
            diff: artifact.binding.diff,
            changed_paths: artifact.diff.len(),
            changes: artifact.diff.clone(),
            review: Vec::new(),
            output: ExecutionOutput::Monty { value: evidence.value, stdout: evidence.stdout },
            execution,
            timings: StageTimings::default(),
            commit: None,
            warnings: Vec::new(),
        };
        Ok(Committable { diff: artifact.diff, reads: artifact.read_set, receipt })
    }

    /// Reserve, revalidate and apply a bound transaction, moving its record
    /// through the state table. Everything happens in one commit session:
    /// recovery first, then the reservation, so that recovery (which holds
    /// the same lock) may settle any reservation it finds as abandoned. From
    /// the move to Revalidating on, the commit engine records every outcome.
    fn commit_bound(
        &self,
        transaction: TransactionId,
        diff: &[DiffEntry],
        reads: &ReadSet,
        now: u64,
    ) -> Result<CommitReceipt, VshError> {
        let session = self.committer.session(&self.lock_wait)?;
        let report = session.recover(&StoreLedger::recovery(&self.transactions, now))?;
        if !report.is_clean() {
            return Err(VshError::Commit(vsh_commit::CommitError::RecoveryPending { conflicts: report.conflicts }));
        }
        let mut reservation = self.transactions.reserve(transaction, now)?;
        self.transactions.advance(&mut reservation, CommitStep::Revalidating, now)?;
        let ledger = StoreLedger::reserved(&self.transactions, reservation, now);
        let request = CommitRequest { transaction, diff, reads, blobs: &self.blobs, max_conflicts: 128 };
        let receipt = match &self.faults {
            Some(faults) => session.commit_with_faults(&request, &ledger, faults.0.as_ref())?,
            None => session.commit(&request, &ledger)?,
        };
        Ok(CommitReceipt {
            transaction,
            operations: receipt.operations,
            verified_paths: receipt.verified_paths,
            revalidated_dependencies: receipt.revalidated_dependencies,
            kept: receipt.kept,
        })
    }

    /// Put every final file and symlink content into the blob store, checked
    /// against the digest the diff promised.
    ///
    /// A stored copy that is corrupt is replaced by this run's identical
    /// bytes (and reported in `warnings`), never an obstacle to the run.
    fn store_contents(
        &self,
        vfs: &mut VirtualFs,
        diff: &CanonicalDiff,
        warnings: &mut Vec<crate::Warning>,
    ) -> Result<(), VshError> {
        for entry in diff.entries() {
            let Some(after) = entry.after else { continue };
            if after.kind == NodeKind::Directory || entry.before.is_some_and(|before| before.content == after.content) {
                continue;
            }
            let expected = after.content.expect("files and symlinks carry a digest");
            // Bytes the store holds are not read again, unless the copy is old
            // enough that rewriting it must restart the GC grace period (this
            // run's preview depends on it until it commits).
            if self.blobs.status(expected)? == vsh_store::BlobStatus::Intact && !self.blobs.refresh_due(expected)? {
                continue;
            }
            let source = vfs.content_source(&entry.path)?.expect("a file or symlink has content");
            let bytes = vfs.materialize(&source)?;
            if self.blobs.put_expected_with_outcome(&bytes, expected)? == vsh_store::PutOutcome::Repaired {
                warnings.push(crate::Warning::BlobRepaired { id: expected, path: self.blobs.display_path(&expected) });
            }
        }
        Ok(())
    }

    fn program_digest(request: &RunRequest<'_>) -> ProgramDigest {
        let mut program = Vec::new();
        canon::put_u8(&mut program, 1);
        canon::put_bytes(&mut program, request.code.as_bytes());
        ProgramDigest::digest(&program)
    }

    /// 16 bytes that differ for every run of every runtime: a counter, the clock and the process.
    fn next_nonce(&self) -> [u8; 16] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.nonce.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        hasher.update(&SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()).to_le_bytes());
        hasher.update(&std::process::id().to_le_bytes());
        hasher.update(&(std::ptr::from_ref(self) as usize).to_le_bytes());
        let mut nonce = [0; 16];
        nonce.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
        nonce
    }

    fn config_digest(&self, budget: &ExecutionBudget) -> RuntimeConfigDigest {
        let mut out = Vec::new();
        canon::put_bytes(&mut out, crate::VERSION.as_bytes());
        canon::put_bytes(&mut out, vsh_monty::VIRTUAL_ROOT.as_bytes());
        out.extend_from_slice(&self.executor.config_digest());
        budget.encode_canonical(&mut out);
        canon::put_u64(&mut out, self.snapshot_limits.max_materialized_bytes);
        canon::put_u64(&mut out, self.snapshot_limits.max_materialized_file_bytes);
        canon::put_u64(&mut out, self.snapshot_limits.max_observations);
        canon::put_u64(&mut out, self.excluded.len() as u64);
        for path in &self.excluded {
            path.encode_canonical(&mut out);
        }
        canon::put_seq(&mut out, self.workspace.allowed_mounts().iter());
        match &self.hook {
            None => canon::put_u8(&mut out, 0),
            Some(hook) => {
                canon::put_u8(&mut out, 1);
                hook.encode_canonical(&mut out);
            }
        }
        RuntimeConfigDigest::digest(&out)
    }
}
