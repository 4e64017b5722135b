//! The comparison bench's engine binary for the peer: the shared workloads
//! (`vsh-compare-workloads`) over the crates.io `vsh` 0.6.0.
//!
//! Production mode runs programs in the peer's published worker,
//! `vsh-monty-worker` 0.6.0, which the driver installs pinned and names in
//! `$VSH_MONTY_WORKER`, the variable the peer itself reads
//! (`RuntimeConfig::new` falls back to `vsh-monty-worker` on PATH); this
//! binary passes it on with `with_worker_path`. The peer checks the
//! worker's `--version` (it must end in `0.0.22`) when a runtime opens.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vsh::{
    CommitError, PrincipalId, Receipt, RunMode, RunRequest, RuntimeConfig, TransactionId, TransactionState, VshError,
};
use workloads::{Engine, Exec, Failure, Outcome, Request, Stages, State};

fn main() -> ExitCode {
    let worker = std::env::var_os("VSH_MONTY_WORKER").filter(|path| !path.is_empty()).map(PathBuf::from);
    workloads::engine_main(&Peer { worker })
}

/// The peer engine: `vsh::Runtime` 0.6.0 with default configuration but for
/// the data directory and the worker.
struct Peer {
    /// The worker binary (`$VSH_MONTY_WORKER`), if named.
    worker: Option<PathBuf>,
}

impl Engine for Peer {
    type Runtime = PeerRuntime;

    fn name(&self) -> &'static str {
        "peer"
    }

    fn describe(&self) -> String {
        let worker = self
            .worker
            .as_deref()
            .map_or_else(|| "vsh-monty-worker on PATH".to_owned(), |path| path.display().to_string());
        format!("crates.io vsh {} (engine {}), policy Balanced; worker: {worker}", vsh::VERSION, vsh::engine_kind())
    }

    fn open(&self, workspace: &Path, data: &Path, exec: Exec) -> Result<PeerRuntime, Failure> {
        let config = RuntimeConfig::new(workspace).with_data_directory(data);
        let config = match (exec, &self.worker) {
            (Exec::InProcess, _) => config.with_in_process_execution(),
            (Exec::Worker, Some(worker)) => config.with_worker_path(worker),
            (Exec::Worker, None) => config,
        };
        if (exec == Exec::InProcess) != config.worker_path().is_none() {
            return Err(Failure::Other(format!(
                "asked for {exec:?}, the configuration says {:?}",
                config.worker_path()
            )));
        }
        vsh::Runtime::open(config).map(PeerRuntime).map_err(failure)
    }
}

/// An open runtime of the peer's.
struct PeerRuntime(vsh::Runtime);

impl workloads::Runtime for PeerRuntime {
    type Tx = TransactionId;

    fn run(&self, request: &Request<'_>) -> Result<Outcome<TransactionId>, Failure> {
        let mode = if request.auto { RunMode::Auto } else { RunMode::Preview };
        let mut run = RunRequest::new(request.code).with_intent(request.intent).with_mode(mode);
        if let Some(max_duration) = request.max_duration {
            run = run.with_budget(vsh::ExecutionBudget { max_duration, ..vsh::ExecutionBudget::default() });
        }
        self.0.run(run).map(outcome).map_err(failure)
    }

    fn approve(&self, tx: TransactionId) -> Result<(), Failure> {
        let now = workloads::engine::now_ms();
        let principal = PrincipalId::digest_label(workloads::engine::OPERATOR);
        self.0.approve(tx, principal, now, now + workloads::engine::APPROVAL_TTL_MS).map(drop).map_err(failure)
    }

    fn commit(&self, tx: TransactionId) -> Result<Outcome<TransactionId>, Failure> {
        self.0.commit(tx, workloads::engine::now_ms()).map(outcome).map_err(failure)
    }

    fn discard(&self, tx: TransactionId) -> Result<(), Failure> {
        self.0.discard_preview(tx).map(drop).map_err(failure)
    }
}

fn outcome(receipt: Receipt) -> Outcome<TransactionId> {
    let state = match receipt.state {
        TransactionState::AutoApproved => State::AutoApproved,
        TransactionState::PendingApproval => State::PendingApproval,
        TransactionState::Approved => State::Approved,
        TransactionState::Committed => State::Committed,
        TransactionState::Denied => State::Denied,
        TransactionState::Stale => State::Stale,
        _ => State::Other,
    };
    let t = receipt.timings;
    Outcome {
        tx: receipt.transaction,
        state,
        changed_paths: receipt.changed_paths,
        stdout: String::from_utf8_lossy(receipt.output.stdout_bytes()).into_owned(),
        stages: Some(Stages {
            snapshot: t.snapshot_ns,
            execute: t.execute_ns,
            diff: t.diff_ns,
            policy: t.policy_ns,
            bind_and_store: t.bind_and_store_ns,
            commit: t.commit_ns,
            total: t.total_ns,
        }),
    }
}

/// The error and its sources, one line; a revalidation conflict is `Stale`.
fn failure(error: VshError) -> Failure {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    match error {
        VshError::Commit(CommitError::Stale { .. }) => Failure::Stale(message),
        _ => Failure::Other(message),
    }
}
