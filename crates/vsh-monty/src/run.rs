//! The in-process executor: compile, run and drive one Monty program to
//! completion, serving its suspensions from an [`OsHost`].
//!
//! Every suspension is charged to [`ExecutionLimits::max_os_calls`] before it
//! is served. A budget that runs out, a terminal VFS error or an unsupported
//! suspension ends the run: the suspended program is aborted with an exception
//! the guest cannot catch, and the run is reported as failed. Output overflow is
//! the one limit that surfaces *inside* the guest (as a `MemoryError` from
//! `print`); it is remembered, so the run still ends at its next step however
//! the guest reacts.

use std::time::{Duration, Instant};

use monty::{MontyRun, RunProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult, OsFunctionCall,
    PrintWriter, ResourceLimits, ResourceTracker,
};
use vsh_policy::{CallPolicy, DeniedAccess};
use vsh_vfs::VirtualFs;

use crate::error::{ExecutionError, GuestException};
use crate::host::{Fault, OsHost};
use crate::limits::{ExecutionLimits, ExecutionStats, LimitExceeded, LimitKind};
use crate::output::OutputSink;
use crate::value;

/// The file name guest tracebacks show.
const SCRIPT_NAME: &str = "<vsh>";

/// Message prefix of monty's own time-limit error (`ResourceError::Time`).
const TIME_LIMIT_PREFIX: &str = "time limit exceeded";

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

/// Why the drive loop stopped without a value.
enum Stop {
    Limit(LimitExceeded),
    Exception(MontyException),
    Vfs(vsh_vfs::VfsError),
    Unsupported(String),
}

/// Run `code` against `vfs`, authorizing every path through `policy` and
/// charging `limits`.
///
/// The program sees the workspace at [`crate::VIRTUAL_ROOT`] (also its working
/// directory) and a synthetic environment; it cannot reach the host. Its
/// changes stay in `vfs` (see `VirtualFs::canonical_diff`).
///
/// Errors: [`ExecutionError::Exception`] for an uncaught guest exception
/// (including a `SyntaxError`), [`ExecutionError::Limit`] when a budget ran
/// out, [`ExecutionError::Vfs`] for a terminal virtual-filesystem failure, and
/// [`ExecutionError::UnsupportedSuspension`] for external function calls and
/// futures, which this executor does not serve yet.
///
/// # Limitations
///
/// **In-process execution is not an isolation boundary.** `max_memory_bytes`
/// is not enforced here, a single native operation can overshoot
/// `max_duration`, and a crash inside the interpreter takes the calling process
/// with it. Untrusted programs belong in the worker subprocess.
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
    let started = Instant::now();
    let program_bytes = code.len() as u64;
    if program_bytes > limits.max_program_bytes {
        let limit =
            LimitExceeded { limit: LimitKind::ProgramBytes, attempted: program_bytes, max: limits.max_program_bytes };
        let stats = ExecutionStats { duration_ns: elapsed_ns(started), ..ExecutionStats::default() };
        return Err(ExecutionError::Limit { limit, stdout: String::new(), stats, denied: Vec::new() });
    }
    let mut host = OsHost::new(vfs, policy, limits);
    let mut sink = OutputSink::new(limits.max_output_bytes);
    let result = match MontyRun::new(code.to_owned(), SCRIPT_NAME, Vec::new(), CompileOptions::default()) {
        Ok(runner) => drive(runner, &mut host, &mut sink, limits),
        Err(exception) => Err(Stop::Exception(exception)),
    };
    let mut stats = std::mem::take(&mut host.meter.stats);
    stats.output_bytes = sink.len();
    stats.denied_accesses = host.denied.len() as u64;
    let denied = std::mem::take(&mut host.denied);
    let stdout = sink.take_text();
    let outcome = match result {
        Ok(value) => match value::measure(&value, limits.max_result_bytes) {
            Ok(size) => {
                stats.result_bytes = size;
                Ok(value)
            }
            Err(attempted) => Err(Stop::Limit(LimitExceeded {
                limit: LimitKind::ResultBytes,
                attempted,
                max: limits.max_result_bytes,
            })),
        },
        Err(stop) => Err(stop),
    };
    stats.duration_ns = elapsed_ns(started);
    match outcome {
        Ok(value) => Ok(MontyOutcome { value, stdout, stats, denied }),
        Err(Stop::Limit(limit)) => Err(ExecutionError::Limit { limit, stdout, stats, denied }),
        Err(Stop::Exception(exception)) => Err(ExecutionError::Exception {
            exception: GuestException::bounded(&exception, limits.max_exception_bytes),
            stdout,
            stats,
            denied,
        }),
        Err(Stop::Vfs(source)) => Err(ExecutionError::Vfs { source }),
        Err(Stop::Unsupported(what)) => Err(ExecutionError::UnsupportedSuspension { what }),
    }
}

fn elapsed_ns(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The exception an aborted run is ended with (the guest cannot catch it).
fn abort_exception(reason: &str) -> MontyException {
    MontyException::new(ExcType::RuntimeError, Some(format!("vsh ended the run: {reason}")))
}

/// One suspended program, whichever way it suspended.
enum Suspended {
    Os(monty::OsCall),
    Function(monty::FunctionCall),
    Lookup(monty::NameLookup),
    Futures(monty::ResolveFutures),
}

impl Suspended {
    /// End the program with an uncatchable exception; what it returns (always
    /// an error, per monty) no longer matters.
    fn abort(self, reason: &str, print: PrintWriter<'_>) {
        let exception = abort_exception(reason);
        let _ended = match self {
            Self::Os(call) => call.abort(exception, print),
            Self::Function(call) => call.abort(exception, print),
            Self::Lookup(lookup) => lookup.abort(exception, print),
            Self::Futures(futures) => futures.abort(exception, print),
        };
    }
}

/// Drive the program until it completes or must stop.
///
/// The sink's overflow record is the run's sticky terminal flag: it is checked
/// at every step, so once output was refused the next suspension, the
/// completion or the final error all end the run with the output limit. Every
/// other limit aborts the program and returns at once.
///
/// `guest_time` adds up the time spent inside monty (compile excluded), which
/// bounds what monty's own clock can have measured.
fn drive(
    runner: MontyRun,
    host: &mut OsHost<'_>,
    sink: &mut OutputSink,
    limits: &ExecutionLimits,
) -> Result<MontyObject, Stop> {
    let resource_limits = ResourceLimits::default()
        .max_duration(limits.max_duration)
        .max_recursion_depth(limits.max_recursion_depth)
        .max_suspensions(usize::try_from(limits.max_os_calls).unwrap_or(usize::MAX));
    let mut guest_time = Duration::ZERO;
    let mut clock = Instant::now();
    let mut progress = runner.start(Vec::new(), ResourceTracker::new(resource_limits), PrintWriter::Callback(sink));
    loop {
        guest_time += clock.elapsed();
        let step = match progress {
            Ok(step) => step,
            Err(exception) => return Err(classify_error(exception, sink, guest_time, limits)),
        };
        let suspended = match step {
            RunProgress::Complete(value) => {
                // The sticky terminal flag: a guest that caught the output
                // overflow still does not finish.
                return match sink.overflow() {
                    Some(limit) => Err(Stop::Limit(limit)),
                    None => Ok(value),
                };
            }
            RunProgress::OsCall(call) => Suspended::Os(call),
            RunProgress::FunctionCall(call) => Suspended::Function(call),
            RunProgress::NameLookup(lookup) => Suspended::Lookup(lookup),
            RunProgress::ResolveFutures(futures) => Suspended::Futures(futures),
        };
        if let Some(limit) = sink.overflow() {
            suspended.abort("output limit exceeded", PrintWriter::Callback(sink));
            return Err(Stop::Limit(limit));
        }
        if let Err(limit) = host.meter.charge_os_call() {
            suspended.abort("too many host calls", PrintWriter::Callback(sink));
            return Err(Stop::Limit(limit));
        }
        clock = Instant::now();
        progress = match suspended {
            Suspended::Os(mut call) => {
                let function_call = std::mem::replace(&mut call.function_call, OsFunctionCall::GetEnviron);
                let served = host.handle(function_call);
                clock = Instant::now();
                match served {
                    Ok(value) => call.resume(ExtFunctionResult::Return(value), PrintWriter::Callback(sink)),
                    Err(Fault::Guest(exception)) => {
                        call.resume(ExtFunctionResult::Error(exception), PrintWriter::Callback(sink))
                    }
                    Err(Fault::Limit(limit)) => {
                        Suspended::Os(call).abort("budget exhausted", PrintWriter::Callback(sink));
                        return Err(Stop::Limit(limit));
                    }
                    Err(Fault::Vfs(error)) => {
                        Suspended::Os(call).abort("virtual filesystem failed", PrintWriter::Callback(sink));
                        return Err(Stop::Vfs(error));
                    }
                }
            }
            Suspended::Lookup(lookup) => lookup.resume(NameLookupResult::Undefined, PrintWriter::Callback(sink)),
            Suspended::Function(call) => {
                let what = match call.object_id {
                    Some(_) => format!("method call `{}` on a host object", call.function_name),
                    None => format!("external function call `{}`", call.function_name),
                };
                Suspended::Function(call).abort("unsupported suspension", PrintWriter::Callback(sink));
                return Err(Stop::Unsupported(what));
            }
            Suspended::Futures(futures) => {
                let what = format!("waiting on {} host futures", futures.pending_call_ids().len());
                Suspended::Futures(futures).abort("unsupported suspension", PrintWriter::Callback(sink));
                return Err(Stop::Unsupported(what));
            }
        };
    }
}

/// Map the error a run ended with: a remembered output overflow first, then
/// monty's own time limit, otherwise the guest's uncaught exception.
fn classify_error(
    exception: MontyException,
    sink: &OutputSink,
    guest_time: Duration,
    limits: &ExecutionLimits,
) -> Stop {
    if let Some(limit) = sink.overflow() {
        return Stop::Limit(limit);
    }
    let timed_out = exception.exc_type() == ExcType::TimeoutError
        && exception.message().is_some_and(|message| message.starts_with(TIME_LIMIT_PREFIX))
        && guest_time >= limits.max_duration;
    if timed_out {
        let nanos = |duration: Duration| u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        return Stop::Limit(LimitExceeded {
            limit: LimitKind::Duration,
            attempted: nanos(guest_time),
            max: nanos(limits.max_duration),
        });
    }
    Stop::Exception(exception)
}
