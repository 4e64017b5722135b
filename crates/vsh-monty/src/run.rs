//! The in-process executor ([`execute`]) and the conclusion both executors
//! share: turning how a run ended, the dispatcher's record and the captured
//! output into a [`MontyOutcome`] or an [`ExecutionError`].

use std::time::Instant;

use monty_types::MontyObject;
use vsh_bash::{BashEnd, BashLimits, BashRun, Ending};
use vsh_policy::{CallPolicy, DeniedAccess};
use vsh_vfs::VirtualFs;

use crate::dispatch::{Dispatcher, Nested, Stop};
use crate::drive::{self, DriveOptions, Ended};
use crate::error::{BashFailure, ExecutionError, GuestException, WorkerError};
use crate::host::OsHost;
use crate::interrupt::{Interrupt, Uninterrupted};
use crate::limits::{ExecutionLimits, ExecutionStats, LimitExceeded, LimitKind, nanos};
use crate::output::OutputSink;
use crate::tools::GUEST_FUNCTION_NAMES;
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

/// A Bash program that ran to its end with status 0: what it wrote and used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashOutcome {
    /// Standard output, as written.
    pub stdout: Vec<u8>,
    /// Standard error, as written.
    pub stderr: Vec<u8>,
    /// What the run used (`output_bytes` is stdout and stderr together).
    pub stats: ExecutionStats,
    /// Accesses the policy refused; the script went on past each one, but the
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
    run_local(code, vfs, policy, limits, Instant::now(), &Uninterrupted, Nested::default())
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
    nested: Nested<'_>,
) -> Result<MontyOutcome, ExecutionError> {
    check_program(code, limits, started)?;
    let mut dispatcher = Dispatcher::new(OsHost::new(vfs, policy, limits, started), interrupt).with_nested(nested);
    let mut sink = OutputSink::new(limits.max_output_bytes);
    let options = DriveOptions { functions: &GUEST_FUNCTION_NAMES, memory_armed: false };
    let result = drive::run_program(code, &mut dispatcher, &mut sink, limits, options);
    let end = RunEnd::from_drive(result, limits);
    let output_bytes = sink.len();
    conclude(end, &mut dispatcher, sink.take_text(), output_bytes, limits, started)
}

/// The interpreter's request for a Bash program under `limits`.
pub(crate) fn bash_run(code: &str, limits: &ExecutionLimits, bash: &BashLimits) -> BashRun {
    BashRun {
        script: code.to_owned(),
        limits: *bash,
        timeout: limits.max_duration,
        max_output_bytes: limits.max_output_bytes,
        max_depth: limits.max_recursion_depth as u64,
    }
}

/// [`crate::MontyExecutor::execute_bash`] in this process.
#[expect(clippy::result_large_err, reason = "see `execute`")]
pub(crate) fn run_bash_local(
    code: &str,
    vfs: &mut VirtualFs,
    policy: &CallPolicy,
    limits: &ExecutionLimits,
    bash: &BashLimits,
    started: Instant,
    interrupt: &dyn Interrupt,
) -> Result<BashOutcome, ExecutionError> {
    check_program(code, limits, started)?;
    let mut dispatcher = Dispatcher::new(OsHost::new(vfs, policy, limits, started), interrupt);
    let end = vsh_bash::run(&bash_run(code, limits, bash), &mut dispatcher);
    conclude_bash(Ok(end), &mut dispatcher, limits, started)
}

/// The outcome of a Bash run: its end as the interpreter reported it (or a
/// limit the parent enforced on the worker), checked against what the
/// parent's dispatcher ended.
#[expect(clippy::result_large_err, reason = "see `execute`")]
pub(crate) fn conclude_bash(
    end: Result<BashEnd, LimitExceeded>,
    dispatcher: &mut Dispatcher<'_>,
    limits: &ExecutionLimits,
    started: Instant,
) -> Result<BashOutcome, ExecutionError> {
    let host = &mut dispatcher.host;
    let mut stats = std::mem::take(&mut host.meter.stats);
    stats.denied_accesses = host.denied.attempts();
    stats.skipped_nodes += host.unlisted_names();
    stats.result_bytes = 4;
    let denied = std::mem::take(&mut host.denied).into_list();
    stats.duration_ns = nanos(started.elapsed());
    let (exit_code, stdout, stderr, ending) = match end {
        Ok(BashEnd { exit_code, stdout, stderr, ending }) => (exit_code, stdout, stderr, Some(ending)),
        Err(limit) => {
            return Err(ExecutionError::Limit { limit, stdout: String::new(), stats, denied });
        }
    };
    stats.output_bytes = (stdout.len() + stderr.len()) as u64;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    if let Some(stop) = dispatcher.take_stop() {
        return Err(match stop {
            Stop::Limit(limit) => ExecutionError::Limit { limit, stdout: text(&stdout), stats, denied },
            Stop::Vfs(source) => ExecutionError::Vfs { source },
            Stop::Unsupported(what) => ExecutionError::UnsupportedSuspension { what },
            Stop::Cancelled => ExecutionError::Cancelled { stdout: text(&stdout), stats, denied },
            Stop::Bash(failure) => ExecutionError::Bash { failure, exit_code, stdout, stderr, stats, denied },
            Stop::Candidate(error) => *error,
        });
    }
    if stats.output_bytes > limits.max_output_bytes {
        let limit = LimitExceeded {
            limit: LimitKind::OutputBytes,
            attempted: stats.output_bytes,
            max: limits.max_output_bytes,
        };
        return Err(ExecutionError::Limit { limit, stdout: text(&stdout), stats, denied });
    }
    let failure = match ending {
        Some(Ending::Completed) if exit_code == 0 => return Ok(BashOutcome { stdout, stderr, stats, denied }),
        Some(Ending::Completed) => BashFailure::Exit(exit_code),
        Some(Ending::Signalled(signal)) => BashFailure::Signal(signal),
        Some(Ending::Limit(what)) => BashFailure::Limit(what),
        Some(Ending::Unsupported(name)) => BashFailure::Unsupported(name),
        Some(Ending::Parse(message)) => BashFailure::Parse(message),
        Some(Ending::Failed(message)) => BashFailure::Interpreter(message),
        Some(Ending::Stopped) | None => {
            return Err(ExecutionError::Worker {
                source: WorkerError::Protocol {
                    reason: "the bash run ended as stopped, but the parent stopped nothing".to_owned(),
                },
            });
        }
    };
    Err(ExecutionError::Bash { failure, exit_code, stdout, stderr, stats, denied })
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
    stats.denied_accesses = host.denied.attempts();
    stats.skipped_nodes += host.unlisted_names();
    let denied = std::mem::take(&mut host.denied).into_list();
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
            Some(Stop::Candidate(error)) => Err(*error),
            Some(Stop::Bash(failure)) => Err(ExecutionError::Bash {
                failure,
                exit_code: 1,
                stdout: stdout.into_bytes(),
                stderr: Vec::new(),
                stats,
                denied,
            }),
            None => Err(ExecutionError::Worker {
                source: WorkerError::Protocol {
                    reason: "the run ended as aborted, but the parent ended nothing".to_owned(),
                },
            }),
        },
    }
}
