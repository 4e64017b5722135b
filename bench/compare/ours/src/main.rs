//! The comparison bench's engine binary for our vsh: the shared workloads
//! (`vsh-compare-workloads`) over `crates/vsh` of this repository.
//!
//! Production mode runs programs in our confined Monty worker. As the `vsh`
//! command line does, this binary serves as its own worker when started with
//! [`WORKER_ARGUMENT`]: cargo builds parent and worker in one invocation from
//! the same sources, so the worker's build identity always matches.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vsh::lower::vsh_commit::CommitError;
use vsh::{PrincipalId, Receipt, RunMode, RunRequest, RuntimeConfig, TransactionId, TransactionState, VshError};
use workloads::{Engine, Exec, Failure, Outcome, Request, Stages, State};

/// The argument that makes this binary serve as its own confined Monty worker.
const WORKER_ARGUMENT: &str = "__vsh-compare-monty-worker";

// The worker's memory budget is enforced by monty's limited allocator; in the
// bench's own process (no limit set) it only counts, as in the `vsh` binary.
#[global_allocator]
static ALLOCATOR: monty_alloc::LimitedAllocator = monty_alloc::LimitedAllocator;

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|argument| argument == WORKER_ARGUMENT) {
        return vsh::lower::vsh_monty::worker_process::worker_main();
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            eprintln!("cannot find this executable: {error}");
            return ExitCode::FAILURE;
        }
    };
    workloads::engine_main(&Ours { exe })
}

/// Our engine: `vsh::Runtime` with default configuration but for the data
/// directory and the worker.
struct Ours {
    /// This executable, which is also the worker.
    exe: PathBuf,
}

impl Engine for Ours {
    type Runtime = OursRuntime;

    fn name(&self) -> &'static str {
        "ours"
    }

    fn describe(&self) -> String {
        format!(
            "vsh {} (crates/vsh of this checkout), policy Balanced, process-local previews; worker: {} {WORKER_ARGUMENT}",
            vsh::VERSION,
            self.exe.display()
        )
    }

    fn open(&self, workspace: &Path, data: &Path, exec: Exec) -> Result<OursRuntime, Failure> {
        let config = RuntimeConfig::new(workspace).with_data_directory(data);
        let config = match exec {
            Exec::InProcess => config.with_in_process_execution(),
            Exec::Worker => config.with_worker(vsh::WorkerConfig::new(&self.exe).with_args([WORKER_ARGUMENT])),
        };
        let runtime = vsh::Runtime::open(config).map_err(failure)?;
        if (exec == Exec::InProcess) != runtime.is_in_process() {
            return Err(Failure::Other(format!(
                "asked for {exec:?}, the runtime runs in_process={}",
                runtime.is_in_process()
            )));
        }
        Ok(OursRuntime(runtime))
    }
}

/// An open runtime of ours.
struct OursRuntime(vsh::Runtime);

impl workloads::Runtime for OursRuntime {
    type Tx = TransactionId;

    fn run(&self, request: &Request<'_>) -> Result<Outcome<TransactionId>, Failure> {
        let mode = if request.auto { RunMode::Auto } else { RunMode::Preview };
        let mut run = RunRequest::new(request.code).with_intent(request.intent).with_mode(mode);
        if let Some(max_duration) = request.max_duration {
            run = run.with_budget(vsh::ExecutionBudget { max_duration, ..vsh::ExecutionBudget::default() });
        }
        self.0.run(&run).map(outcome).map_err(failure)
    }

    fn approve(&self, tx: TransactionId) -> Result<(), Failure> {
        let now = workloads::engine::now_ms();
        let principal = PrincipalId::digest(workloads::engine::OPERATOR.as_bytes());
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
            snapshot: t.snapshot,
            execute: t.execute,
            diff: t.diff,
            policy: t.policy,
            bind_and_store: t.bind_and_store,
            commit: t.commit,
            total: t.total,
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
