//! The in-process executor ([`execute`]) and the conclusion both executors
//! share: turning how a run ended, the dispatcher's record and the captured
//! output into a [`MontyOutcome`] or an [`ExecutionError`].

use std::time::Instant;

use monty_types::MontyObject;
use vsh_policy::{CallPolicy, DeniedAccess};
use vsh_vfs::VirtualFs;

use crate::dispatch::{Dispatcher, Stop};
use crate::drive::{self, DriveOptions, Ended};
use crate::error::{ExecutionError, GuestException, WorkerError};
use crate::host::OsHost;
use crate::interrupt::{Interrupt, Uninterrupted};
use crate::limits::{ExecutionLimits, ExecutionStats, LimitExceeded, LimitKind, nanos};
use crate::output::OutputSink;
use crate::tools::MONTY_VSH_TOOL_NAMES;
use crate::value;

/// A finished run: the program's value and what it printed and used.
#[derive(Debug, Clone, PartialEq)]
pub struct MontyOutcome {
    /// The value of the program's last expression (`None` if there is none).
    pub value: MontyObject,
    /// Captured standard output.
    pub stdout: String,
    /// What the run used.
    pub stats: ExecutionStats,
    /// Accesses the policy refused; the guest caught each one it saw, but the
    /// transaction policy denies any run that has them.
    pub denied: Vec<DeniedAccess>,
}

/// How a run ended, as the parent learned it.
#[derive(Debug)]
pub(crate) enum RunEnd {
    /// The program's value.
    Value(MontyObject),
    /// An uncaught exception, already bounded.
    Exception(GuestException),
    /// A limit the interpreter's side (or the parent's watchdog) enforced.
    Limit(LimitExceeded),
    /// The run ended because the dispatcher asked; it holds the cause.
    Aborted,
}

impl RunEnd {
    /// How an in-process drive ended.
    pub(crate) fn from_drive(result: Result<MontyObject, Ended>, limits: &ExecutionLimits) -> Self {
        match result {
            Ok(value) => Self::Value(value),
            Err(Ended::Exception(exception)) => {
                Self::Exception(GuestException::bounded(&exception, limits.max_exception_bytes))
            }
            Err(Ended::Limit(limit)) => Self::Limit(limit),
            Err(Ended::Aborted) => Self::Aborted,
        }
    }
}

/// Refuse a program larger than its budget, before anything else is done.
#[expect(clippy::result_large_err, reason = "see `execute`")]
pub(crate) fn check_program(code: &str, limits: &ExecutionLimits, started: Instant) -> Result<(), ExecutionError> {
    let program_bytes = code.len() as u64;
    if program_bytes > limits.max_program_bytes {
        let limit =
            LimitExceeded { limit: LimitKind::ProgramBytes, attempted: program_bytes, max: limits.max_program_bytes };
        let stats = ExecutionStats { duration_ns: nanos(started.elapsed()), ..ExecutionStats::default() };
        return Err(ExecutionError::Limit { limit, stdout: String::new(), stats, denied: Vec::new() });
    }
    Ok(())
}

/// Run `code` against `vfs`, authorizing every path through `policy` and
/// charging `limits`.
///
/// The program sees the workspace at [`crate::VIRTUAL_ROOT`] (also its working
/// directory), a synthetic environment and the `vsh_*` functions
/// ([`crate::MONTY_VSH_TOOL_NAMES`]); it cannot reach the host. Its changes
/// stay in `vfs` (see `VirtualFs::canonical_diff`).
///
/// Errors: [`ExecutionError::Exception`] for an uncaught guest exception
/// (including a `SyntaxError`), [`ExecutionError::Limit`] when a budget ran
/// out, [`ExecutionError::Vfs`] for a terminal virtual-filesystem failure, and
/// [`ExecutionError::UnsupportedSuspension`] for method calls on host objects
/// and futures. Calling an unknown function is a `NameError`.
///
/// # Limitations
///
/// **In-process execution is not an isolation boundary.** `max_memory_bytes`
/// is not enforced here, a single native operation can overshoot
/// `max_duration` and `max_request_duration` (the deadline is checked only at
/// the guest's calls), and a crash inside the interpreter takes the calling
/// process with it. Untrusted programs belong in the worker subprocess
/// ([`crate::MontyExecutor::worker`]).
#[expect(
    clippy::result_large_err,
    reason = "the error carries the run's stdout, stats and denials by contract; it is returned once per run"
)]
pub fn execute(
    code: &str,
    vfs: &mut VirtualFs,
    policy: &CallPolicy,
    limits: &ExecutionLimits,
) -> Result<MontyOutcome, ExecutionError> {
    run_local(code, vfs, policy, limits, Instant::now(), &Uninterrupted)
}

/// [`execute`] for a request that began at `started`.
#[expect(clippy::result_large_err, reason = "see `execute`")]
pub(crate) fn run_local(
    code: &str,
    vfs: &mut VirtualFs,
    policy: &CallPolicy,
    limits: &ExecutionLimits,
    started: Instant,
    interrupt: &dyn Interrupt,
) -> Result<MontyOutcome, ExecutionError> {
    check_program(code, limits, started)?;
    let mut dispatcher = Dispatcher::new(OsHost::new(vfs, policy, limits, started), interrupt);
    let mut sink = OutputSink::new(limits.max_output_bytes);
    let options = DriveOptions { functions: &MONTY_VSH_TOOL_NAMES, memory_armed: false };
    let result = drive::run_program(code, &mut dispatcher, &mut sink, limits, options);
    let end = RunEnd::from_drive(result, limits);
    let output_bytes = sink.len();
    conclude(end, &mut dispatcher, sink.take_text(), output_bytes, limits, started)
}

/// The outcome of a run: the value (measured against the result budget) or
/// the error, with the stdout, stats and refusals of the run.
#[expect(clippy::result_large_err, reason = "see `execute`")]
pub(crate) fn conclude(
    end: RunEnd,
    dispatcher: &mut Dispatcher<'_>,
    stdout: String,
    output_bytes: u64,
    limits: &ExecutionLimits,
    started: Instant,
) -> Result<MontyOutcome, ExecutionError> {
    let host = &mut dispatcher.host;
    let mut stats = std::mem::take(&mut host.meter.stats);
    stats.output_bytes = output_bytes;
    stats.denied_accesses = host.denied.len() as u64;
    stats.skipped_nodes += host.unlisted_names();
    let denied = std::mem::take(&mut host.denied);
    let end = match end {
        RunEnd::Value(value) => match value::measure(&value, limits.max_result_bytes) {
            Ok(size) => {
                stats.result_bytes = size;
                RunEnd::Value(value)
            }
            Err(attempted) => {
                RunEnd::Limit(LimitExceeded { limit: LimitKind::ResultBytes, attempted, max: limits.max_result_bytes })
            }
        },
        other => other,
    };
    stats.duration_ns = nanos(started.elapsed());
    match end {
        RunEnd::Value(value) => Ok(MontyOutcome { value, stdout, stats, denied }),
        RunEnd::Exception(exception) => Err(ExecutionError::Exception { exception, stdout, stats, denied }),
        RunEnd::Limit(limit) => Err(ExecutionError::Limit { limit, stdout, stats, denied }),
        RunEnd::Aborted => match dispatcher.take_stop() {
            Some(Stop::Limit(limit)) => Err(ExecutionError::Limit { limit, stdout, stats, denied }),
            Some(Stop::Vfs(source)) => Err(ExecutionError::Vfs { source }),
            Some(Stop::Unsupported(what)) => Err(ExecutionError::UnsupportedSuspension { what }),
            Some(Stop::Cancelled) => Err(ExecutionError::Cancelled { stdout, stats, denied }),
            None => Err(ExecutionError::Worker {
                source: WorkerError::Protocol {
                    reason: "the run ended as aborted, but the parent ended nothing".to_owned(),
                },
            }),
        },
    }
}
