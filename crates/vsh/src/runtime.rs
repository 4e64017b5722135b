//! [`Runtime`]: composes the stages of a run and of a commit.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use vsh_commit::{CommitRequest, Committer};
use vsh_host::CapDir;
use vsh_monty::ExecutionBudget;
use vsh_policy::{Decision, PolicyInput, TransactionPolicy};
use vsh_store::{BlobStore, DataDir, TransactionRecord, TransactionStore};
use vsh_types::canon::{self, Canonical};
use vsh_types::{
    DiffEntry, ExecutionEvidenceDigest, IntentDigest, NodeKind, ProgramDigest, RuntimeConfigDigest, TransactionId,
    TransactionState, VPath,
};
use vsh_vfs::{CanonicalDiff, ReadSet, ReviewLimits, SnapshotLimits, VirtualFs};

use crate::receipt::{CommitReceipt, ExecutionOutput, Receipt, StageTimings};
use crate::request::{Language, ReceiptDetail, RunMode, RunRequest};
use crate::{RuntimeConfig, VshError};

/// vsh's own directory inside the workspace: the commit lock and staging area.
const RUNTIME_DIR: &str = ".vsh";
/// The default data directory, inside [`RUNTIME_DIR`].
const DEFAULT_DATA_DIR: &str = ".vsh/data";
/// Process-local previews kept for a later commit (fail closed beyond this).
const MAX_PREPARED: usize = 64;
/// Bytes of process-local previews (approximate: diff entries and stdout).
const MAX_PREPARED_BYTES: u64 = 128 << 20;

/// A transaction bound and kept by this live runtime until it is committed or discarded.
#[derive(Debug, Clone)]
struct Prepared {
    diff: Vec<DiffEntry>,
    reads: ReadSet,
    receipt: Receipt,
    bytes: u64,
}

/// A vsh runtime over one workspace.
///
/// Runs are independent: each captures a fresh observed snapshot. Commits are
/// serialized per workspace by the commit engine's lock.
#[derive(Debug)]
pub struct Runtime {
    workspace: Arc<CapDir>,
    excluded: Vec<VPath>,
    blobs: BlobStore,
    transactions: TransactionStore,
    committer: Committer,
    policy: TransactionPolicy,
    snapshot_limits: SnapshotLimits,
    prepared: Mutex<HashMap<TransactionId, Prepared>>,
    nonce: AtomicU64,
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Runtime {
    /// Open the workspace and vsh's data directory.
    pub fn open(config: RuntimeConfig) -> Result<Self, VshError> {
        let RuntimeConfig { workspace_root, data_directory, policy_profile, policy_file, snapshot_limits } = config;
        let workspace = Arc::new(CapDir::open(&workspace_root).map_err(VshError::Workspace)?);
        let runtime_dir = VPath::parse(RUNTIME_DIR).expect("constant path");
        let mut excluded = vec![runtime_dir.clone()];
        let data = match &data_directory {
            None => DataDir::open_in_workspace(&workspace, &VPath::parse(DEFAULT_DATA_DIR).expect("constant path"))
                .map_err(VshError::DataDirectory)?,
            Some(path) => {
                let data = DataDir::open_external(path).map_err(VshError::DataDirectory)?;
                if let Some(inside) = Self::path_within_workspace(workspace.display_path(), data.dir().display_path()) {
                    excluded.push(inside);
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
        let blobs = BlobStore::open(&data)?;
        let transactions = TransactionStore::open(&data)?;
        let mut committer = Committer::new(Arc::clone(&workspace), runtime_dir)?;
        if let Some(inside) = &protected_data {
            committer = committer.with_excluded(inside.clone());
        }
        Ok(Self {
            workspace,
            excluded,
            blobs,
            transactions,
            committer,
            policy,
            snapshot_limits,
            prepared: Mutex::new(HashMap::new()),
            nonce: AtomicU64::new(0),
        })
    }

    /// The workspace-relative path of `inner` if it lies within `root`.
    fn path_within_workspace(root: &Path, inner: &Path) -> Option<VPath> {
        let relative = inner.strip_prefix(root).ok()?;
        VPath::parse(relative.to_str()?).ok().filter(|path| !path.is_root())
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
    pub fn run(&self, request: &RunRequest<'_>) -> Result<Receipt, VshError> {
        let started = Instant::now();
        let mut timings = StageTimings::default();

        let stage_start = Instant::now();
        let mut vfs = VirtualFs::new(Arc::clone(&self.workspace), self.excluded.clone(), self.snapshot_limits);
        timings.snapshot = elapsed_ns(stage_start);

        let stage_start = Instant::now();
        let outcome = match request.language {
            Language::Monty => vsh_monty::execute(request.code, &mut vfs, self.policy.calls(), &request.budget)
                .map_err(|error| VshError::Execution(Box::new(error)))?,
        };
        timings.execute = elapsed_ns(stage_start);

        let stage_start = Instant::now();
        let diff = vfs.canonical_diff()?;
        timings.diff = elapsed_ns(stage_start);

        let stage_start = Instant::now();
        let decision = self.policy.evaluate(&PolicyInput {
            diff: diff.entries(),
            denied: &outcome.denied,
            renames: vfs.renames(),
            // The delete-ratio ceiling needs the workspace's size, which an observed
            // snapshot deliberately does not know; 0 keeps that one rule inactive.
            // Every deletion still escalates, and the absolute ceilings apply.
            observed_base_nodes: 0,
        });
        timings.policy = elapsed_ns(stage_start);

        let review = match request.detail {
            ReceiptDetail::Full => vfs.review(diff.entries(), ReviewLimits::default())?,
            ReceiptDetail::Compact => Vec::new(),
        };

        let stage_start = Instant::now();
        let state = match &decision {
            Decision::Denied(_) => TransactionState::Denied,
            Decision::AutoApproved => TransactionState::AutoApproved,
            Decision::PendingApproval(_) => TransactionState::PendingApproval,
        };
        let transaction = self.bind(request, &vfs, &diff, &outcome, &decision);
        let base_snapshot = vfs.snapshot_id();
        if state != TransactionState::Denied {
            self.store_contents(&mut vfs, &diff)?;
        }
        let now = now_ms();
        self.transactions.create(&TransactionRecord::new(transaction, base_snapshot, state, now))?;
        timings.bind_and_store = elapsed_ns(stage_start);

        let mut receipt = Receipt {
            transaction,
            base_snapshot,
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
        };

        if state == TransactionState::Denied {
            receipt.timings.total = elapsed_ns(started);
            return Ok(receipt);
        }
        let reads = vfs.read_set().clone();
        if request.mode == RunMode::Auto && state == TransactionState::AutoApproved {
            let stage_start = Instant::now();
            let commit = self.commit_bound(transaction, TransactionState::AutoApproved, diff.entries(), &reads, now)?;
            receipt.timings.commit = elapsed_ns(stage_start);
            receipt.state = TransactionState::Committed;
            receipt.commit = Some(commit);
            receipt.timings.total = elapsed_ns(started);
            return Ok(receipt);
        }
        receipt.timings.total = elapsed_ns(started);
        self.keep_prepared(transaction, diff.entries().to_vec(), reads, receipt.clone())?;
        Ok(receipt)
    }

    /// Commit a transaction previewed by this runtime. It must be auto-approved
    /// (or approved); it is revalidated against the live workspace first, and a
    /// stale transaction writes nothing. `now_ms` (milliseconds since the Unix
    /// epoch, supplied by the host) stamps the record's transitions.
    pub fn commit(&self, transaction: TransactionId, now_ms: u64) -> Result<Receipt, VshError> {
        let started = Instant::now();
        let prepared =
            self.lock_prepared().get(&transaction).cloned().ok_or(VshError::UnknownTransaction(transaction))?;
        let record = self.transactions.get(transaction)?.ok_or(VshError::UnknownTransaction(transaction))?;
        if !matches!(record.state, TransactionState::AutoApproved | TransactionState::Approved) {
            return Err(VshError::NotCommittable { transaction, state: record.state });
        }
        let result = self.commit_bound(transaction, record.state, &prepared.diff, &prepared.reads, now_ms);
        // Whatever the outcome, the reservation was consumed.
        self.lock_prepared().remove(&transaction);
        let commit = result?;
        let mut receipt = prepared.receipt;
        receipt.state = TransactionState::Committed;
        receipt.commit = Some(commit);
        receipt.timings =
            StageTimings { commit: elapsed_ns(started), total: elapsed_ns(started), ..StageTimings::default() };
        Ok(receipt)
    }

    /// Forget a previewed transaction without committing it. Returns whether it was known.
    pub fn discard_preview(&self, transaction: TransactionId) -> Result<bool, VshError> {
        let removed = self.lock_prepared().remove(&transaction).is_some();
        if removed {
            let record = self.transactions.get(transaction)?;
            if let Some(record) = record.filter(|record| record.state == TransactionState::AutoApproved) {
                self.transactions.compare_and_transition(
                    transaction,
                    record.state,
                    TransactionState::Rejected,
                    now_ms(),
                )?;
            }
        }
        Ok(removed)
    }

    /// What the workspace handle has done so far (stats, reads, listings, writes):
    /// evidence that a run's cost follows what it touched, not the workspace's size.
    pub fn host_counters(&self) -> vsh_host::CounterSnapshot {
        self.workspace.counters().snapshot()
    }

    /// The dependencies (read set) of a transaction this runtime still holds.
    pub fn dependencies(&self, transaction: TransactionId) -> Option<ReadSet> {
        self.lock_prepared().get(&transaction).map(|prepared| prepared.reads.clone())
    }

    /// The durable record of a transaction.
    pub fn transaction(&self, transaction: TransactionId) -> Result<Option<TransactionRecord>, VshError> {
        Ok(self.transactions.get(transaction)?)
    }

    fn lock_prepared(&self) -> std::sync::MutexGuard<'_, HashMap<TransactionId, Prepared>> {
        self.prepared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn keep_prepared(
        &self,
        transaction: TransactionId,
        diff: Vec<DiffEntry>,
        reads: ReadSet,
        receipt: Receipt,
    ) -> Result<(), VshError> {
        let bytes = (diff.len() as u64).saturating_mul(256)
            + (reads.len() as u64).saturating_mul(128)
            + receipt.output.stdout_bytes().len() as u64;
        let mut prepared = self.lock_prepared();
        let held: u64 = prepared.values().map(|entry| entry.bytes).sum();
        if prepared.len() >= MAX_PREPARED || held.saturating_add(bytes) > MAX_PREPARED_BYTES {
            return Err(VshError::EphemeralCapacity { entries: prepared.len(), bytes: held });
        }
        prepared.insert(transaction, Prepared { diff, reads, receipt, bytes });
        Ok(())
    }

    /// Reserve, revalidate and apply a bound transaction, moving its record
    /// through the state table.
    fn commit_bound(
        &self,
        transaction: TransactionId,
        from: TransactionState,
        diff: &[DiffEntry],
        reads: &ReadSet,
        now: u64,
    ) -> Result<CommitReceipt, VshError> {
        let store = &self.transactions;
        store.compare_and_transition(transaction, from, TransactionState::Reserved, now)?;
        store.compare_and_transition(transaction, TransactionState::Reserved, TransactionState::Revalidating, now)?;
        let request = CommitRequest { transaction, diff, reads, blobs: &self.blobs, max_conflicts: 128 };
        match self.committer.commit(&request) {
            Ok(receipt) => {
                store.compare_and_transition(
                    transaction,
                    TransactionState::Revalidating,
                    TransactionState::Committing,
                    now,
                )?;
                store.compare_and_transition(
                    transaction,
                    TransactionState::Committing,
                    TransactionState::Committed,
                    now,
                )?;
                Ok(CommitReceipt {
                    transaction,
                    operations: receipt.operations,
                    verified_paths: receipt.verified_paths,
                    revalidated_dependencies: receipt.revalidated_dependencies,
                })
            }
            Err(error) => {
                let next = if matches!(error, vsh_commit::CommitError::Stale { .. }) {
                    TransactionState::Stale
                } else {
                    TransactionState::Failed
                };
                store.compare_and_transition(transaction, TransactionState::Revalidating, next, now)?;
                Err(VshError::Commit(error))
            }
        }
    }

    /// Put every final file and symlink content into the blob store, checked
    /// against the digest the diff promised.
    fn store_contents(&self, vfs: &mut VirtualFs, diff: &CanonicalDiff) -> Result<(), VshError> {
        for entry in diff.entries() {
            let Some(after) = entry.after else { continue };
            if after.kind == NodeKind::Directory || entry.before.is_some_and(|before| before.content == after.content) {
                continue;
            }
            let expected = after.content.expect("files and symlinks carry a digest");
            if self.blobs.contains(expected)? {
                continue;
            }
            let source = vfs.content_source(&entry.path)?.expect("a file or symlink has content");
            let bytes = vfs.materialize(&source)?;
            self.blobs.put_expected(&bytes, expected)?;
        }
        Ok(())
    }

    /// The transaction id: binds the program, intent, observed snapshot, read
    /// set, write set, diff, policy, runtime configuration, execution evidence
    /// and a per-run nonce (each run is its own transaction, so previewing the
    /// same program twice is never a duplicate).
    fn bind(
        &self,
        request: &RunRequest<'_>,
        vfs: &VirtualFs,
        diff: &CanonicalDiff,
        outcome: &vsh_monty::MontyOutcome,
        decision: &Decision,
    ) -> TransactionId {
        let mut program = Vec::new();
        canon::put_u8(&mut program, 1);
        canon::put_bytes(&mut program, request.code.as_bytes());
        let program = ProgramDigest::digest(&program);
        let intent = IntentDigest::digest(request.intent.unwrap_or("").as_bytes());
        let config = self.config_digest(&request.budget);
        let mut evidence = Vec::new();
        canon::put_bytes(&mut evidence, outcome.value.py_repr().as_bytes());
        canon::put_bytes(&mut evidence, outcome.stdout.as_bytes());
        canon::put_u64(&mut evidence, outcome.stats.os_calls);
        canon::put_u64(&mut evidence, outcome.denied.len() as u64);
        canon::put_bytes(&mut evidence, format!("{decision:?}").as_bytes());
        let evidence = ExecutionEvidenceDigest::digest(&evidence);
        let nonce = self.nonce.fetch_add(1, Ordering::Relaxed);
        let mut hasher = TransactionId::hasher();
        hasher
            .update_canonical(&program)
            .update_canonical(&intent)
            .update_canonical(&vfs.snapshot_id())
            .update_canonical(&vfs.read_set().digest())
            .update_canonical(&diff.write_set_digest())
            .update_canonical(&diff.digest())
            .update_canonical(&self.policy.digest())
            .update_canonical(&config)
            .update_canonical(&evidence);
        hasher.update(&nonce.to_le_bytes());
        hasher.update(&now_ms().to_le_bytes());
        hasher.update(&std::process::id().to_le_bytes());
        TransactionId::from_hasher(&hasher)
    }

    fn config_digest(&self, budget: &ExecutionBudget) -> RuntimeConfigDigest {
        let mut out = Vec::new();
        canon::put_bytes(&mut out, crate::VERSION.as_bytes());
        canon::put_bytes(&mut out, vsh_monty::VIRTUAL_ROOT.as_bytes());
        budget.encode_canonical(&mut out);
        canon::put_u64(&mut out, self.snapshot_limits.max_materialized_bytes);
        canon::put_u64(&mut out, self.snapshot_limits.max_materialized_file_bytes);
        canon::put_u64(&mut out, self.snapshot_limits.max_observations);
        canon::put_u64(&mut out, self.excluded.len() as u64);
        for path in &self.excluded {
            path.encode_canonical(&mut out);
        }
        RuntimeConfigDigest::digest(&out)
    }
}
