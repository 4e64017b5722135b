//! The drive loop both executors share: compile a program, run it, and hand
//! every suspension to a [`Service`].
//!
//! In process the service is the [`crate::dispatch::Dispatcher`] itself; in the
//! worker it is a proxy that forwards each suspension to the parent, where the
//! same dispatcher answers it. Either way the loop decides the same things:
//! output overflow is sticky (checked at every step, so a guest that caught the
//! `MemoryError` from `print` still cannot finish), a [`Reply::Abort`] ends the
//! program with an exception the guest cannot catch, and monty's own time and
//! memory errors become typed limits.

use std::time::{Duration, Instant};

use monty::{MontyRun, RunProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult, PrintWriter,
    ResourceLimits, ResourceTracker,
};

use crate::limits::{ExecutionLimits, LimitExceeded, LimitKind, nanos};
use crate::output::OutputSink;

/// The file name guest tracebacks show.
const SCRIPT_NAME: &str = "<vsh>";

/// Message prefix of monty's own time-limit error (`ResourceError::Time`).
const TIME_LIMIT_PREFIX: &str = "time limit exceeded";

/// Message prefix of monty's own memory-limit error (`ResourceError::Memory`):
/// `memory limit exceeded: {used} bytes > {limit} bytes`.
const MEMORY_LIMIT_PREFIX: &str = "memory limit exceeded: ";

/// What a suspended guest asks for.
#[derive(Debug, Clone)]
pub(crate) enum Request {
    /// A typed OS call (pathlib, `os`, `open`, clock).
    Os(monty_types::OsFunctionCall),
    /// A call of an external function by name (the `vsh_*` functions).
    Function {
        /// The function's name.
        name: String,
        /// Positional arguments.
        args: Vec<MontyObject>,
        /// Keyword arguments, in call order.
        kwargs: Vec<(MontyObject, MontyObject)>,
    },
    /// A method call on a host object (never served).
    Method {
        /// The method's name.
        name: String,
    },
    /// The lookup of an undefined name.
    Lookup {
        /// The name.
        name: String,
    },
    /// Waiting on host futures (never served).
    Futures {
        /// How many.
        pending: usize,
    },
    /// A request the worker could not frame because it carries more data than
    /// a request may (only from the worker): charged as one write call of
    /// `bytes`.
    Oversized {
        /// Its encoded size.
        bytes: u64,
    },
}

/// The answer to a [`Request`].
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// Resume with this value.
    Return(MontyObject),
    /// Raise this exception in the guest (it may catch it).
    Raise(MontyException),
    /// The name is not defined (only for [`Request::Lookup`]).
    Undefined,
    /// End the run; the guest cannot catch it. The reason is shown in the
    /// guest's final exception; the real cause stays with whoever decided.
    Abort(String),
}

/// Serves the suspensions of one run.
pub(crate) trait Service {
    /// Answer `request`. `sink` holds the output printed so far (the worker
    /// forwards what is pending before it asks the parent).
    fn serve(&mut self, request: Request, sink: &mut OutputSink) -> Reply;
}

/// Why a run produced no value.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The guest raised an exception it did not catch (or the program did
    /// not compile).
    Exception(MontyException),
    /// A limit the interpreter's side enforces: output, duration, memory.
    Limit(LimitExceeded),
    /// The service asked to end the run; it knows why.
    Aborted,
}

/// Options of one run that differ between the two executors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DriveOptions<'a> {
    /// The external functions passed to the program as globals.
    pub(crate) functions: &'a [&'a str],
    /// Whether the heap limit is armed (only in the worker, whose global
    /// allocator counts memory).
    pub(crate) memory_armed: bool,
}

/// Compile and run `code` to completion, serving every suspension through
/// `service` and printing into `sink`.
pub(crate) fn run_program(
    code: &str,
    service: &mut dyn Service,
    sink: &mut OutputSink,
    limits: &ExecutionLimits,
    options: DriveOptions<'_>,
) -> Result<MontyObject, Ended> {
    let runner = if options.memory_armed {
        // The worker's allocator counts every byte it holds: nothing is kept
        // across its runs.
        compile(code, options.functions)?
    } else {
        compiled(code, options.functions)?
    };
    let inputs: Vec<MontyObject> = options
        .functions
        .iter()
        .map(|name| MontyObject::Function { name: (*name).to_owned(), docstring: None })
        .collect();
    let mut resource_limits = ResourceLimits::default()
        .max_duration(limits.max_duration)
        .max_recursion_depth(limits.max_recursion_depth)
        .max_suspensions(usize::try_from(limits.max_os_calls).unwrap_or(usize::MAX));
    if options.memory_armed {
        resource_limits = resource_limits.max_memory(usize::try_from(limits.max_memory_bytes).unwrap_or(usize::MAX));
    }
    let clock = Instant::now();
    let progress = runner.start(inputs, ResourceTracker::new(resource_limits), PrintWriter::Callback(sink));
    drive(progress, clock, service, sink, limits, options.memory_armed)
}

/// Parse and compile `code` with `functions` as its input names.
fn compile(code: &str, functions: &[&str]) -> Result<MontyRun, Ended> {
    let names: Vec<String> = functions.iter().map(|name| (*name).to_owned()).collect();
    MontyRun::new(code.to_owned(), SCRIPT_NAME, names, CompileOptions::default()).map_err(Ended::Exception)
}

/// Programs compiled in this process, most recently used first, at most
/// [`COMPILED_ENTRIES`] of at most [`COMPILED_MAX_CODE_BYTES`] each. An
/// agent runs the same program text again and again (a check, a
/// transformation per file); compiling is a deterministic function of the
/// text and the input names, and a compiled program is never changed by a
/// run (each run starts a clone), so a hit is invisible but for the time.
/// A dozen entries behind one lock: a crate for it would be more than the
/// code it saves.
static COMPILED: std::sync::Mutex<Vec<CompiledEntry>> = std::sync::Mutex::new(Vec::new());

/// One compiled program and what it was compiled from.
struct CompiledEntry {
    code: String,
    functions: Vec<String>,
    runner: MontyRun,
}

/// How many compiled programs a process keeps.
const COMPILED_ENTRIES: usize = 16;

/// Longer programs are compiled every time.
const COMPILED_MAX_CODE_BYTES: usize = 16 * 1024;

/// `code` compiled, from [`COMPILED`] when it holds it (a program that does
/// not compile is never kept: its error is made again).
fn compiled(code: &str, functions: &[&str]) -> Result<MontyRun, Ended> {
    if code.len() > COMPILED_MAX_CODE_BYTES {
        return compile(code, functions);
    }
    let same = |entry: &CompiledEntry| {
        entry.code == code && entry.functions.iter().map(String::as_str).eq(functions.iter().copied())
    };
    {
        let mut cache = COMPILED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = cache.iter().position(same) {
            let entry = cache.remove(index);
            let runner = entry.runner.clone();
            cache.insert(0, entry);
            return Ok(runner);
        }
    }
    let runner = compile(code, functions)?;
    let mut cache = COMPILED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !cache.iter().any(same) {
        cache.insert(
            0,
            CompiledEntry {
                code: code.to_owned(),
                functions: functions.iter().map(|name| (*name).to_owned()).collect(),
                runner: runner.clone(),
            },
        );
        cache.truncate(COMPILED_ENTRIES);
    }
    Ok(runner)
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

    /// The request this suspension makes (moving its payload out).
    fn request(&mut self) -> Request {
        match self {
            Self::Os(call) => {
                Request::Os(std::mem::replace(&mut call.function_call, monty_types::OsFunctionCall::GetEnviron))
            }
            Self::Function(call) if call.object_id.is_some() => {
                Request::Method { name: std::mem::take(&mut call.function_name) }
            }
            Self::Function(call) => Request::Function {
                name: std::mem::take(&mut call.function_name),
                args: std::mem::take(&mut call.args),
                kwargs: std::mem::take(&mut call.kwargs),
            },
            Self::Lookup(lookup) => Request::Lookup { name: lookup.name.clone() },
            Self::Futures(futures) => Request::Futures { pending: futures.pending_call_ids().len() },
        }
    }
}

/// Drive the program until it completes or must stop.
///
/// `guest_time` adds up the time spent inside monty (compile excluded), which
/// bounds what monty's own clock can have measured.
fn drive(
    mut progress: Result<RunProgress, MontyException>,
    mut clock: Instant,
    service: &mut dyn Service,
    sink: &mut OutputSink,
    limits: &ExecutionLimits,
    memory_armed: bool,
) -> Result<MontyObject, Ended> {
    let mut guest_time = Duration::ZERO;
    loop {
        guest_time += clock.elapsed();
        let step = match progress {
            Ok(step) => step,
            Err(exception) => return Err(classify_error(exception, sink, guest_time, limits, memory_armed)),
        };
        let mut suspended = match step {
            RunProgress::Complete(value) => {
                // The sticky terminal flag: a guest that caught the output
                // overflow still does not finish.
                return match sink.overflow() {
                    Some(limit) => Err(Ended::Limit(limit)),
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
            return Err(Ended::Limit(limit));
        }
        let reply = service.serve(suspended.request(), sink);
        clock = Instant::now();
        progress = match (suspended, reply) {
            (suspended, Reply::Abort(reason)) => {
                suspended.abort(&reason, PrintWriter::Callback(sink));
                return Err(Ended::Aborted);
            }
            (Suspended::Os(call), Reply::Return(value)) => {
                call.resume(ExtFunctionResult::Return(value), PrintWriter::Callback(sink))
            }
            (Suspended::Os(call), Reply::Raise(exception)) => {
                call.resume(ExtFunctionResult::Error(exception), PrintWriter::Callback(sink))
            }
            (Suspended::Function(call), Reply::Return(value)) => {
                call.resume(ExtFunctionResult::Return(value), PrintWriter::Callback(sink))
            }
            (Suspended::Function(call), Reply::Raise(exception)) => {
                call.resume(ExtFunctionResult::Error(exception), PrintWriter::Callback(sink))
            }
            (Suspended::Lookup(lookup), Reply::Undefined) => {
                lookup.resume(NameLookupResult::Undefined, PrintWriter::Callback(sink))
            }
            (Suspended::Lookup(lookup), Reply::Return(value)) => {
                lookup.resume(NameLookupResult::Value(value), PrintWriter::Callback(sink))
            }
            (Suspended::Lookup(lookup), Reply::Raise(exception)) => {
                lookup.resume(NameLookupResult::Error(exception), PrintWriter::Callback(sink))
            }
            (suspended @ (Suspended::Os(_) | Suspended::Function(_) | Suspended::Futures(_)), _) => {
                // A reply that does not fit the suspension (a lookup answered
                // with an exception, an OS call with "undefined"): the service
                // broke its contract, so the run ends.
                suspended.abort("mismatched host reply", PrintWriter::Callback(sink));
                return Err(Ended::Aborted);
            }
        };
    }
}

/// Map the error a run ended with: a remembered output overflow first, then
/// monty's own time and memory limits, otherwise the guest's uncaught
/// exception.
fn classify_error(
    exception: MontyException,
    sink: &OutputSink,
    guest_time: Duration,
    limits: &ExecutionLimits,
    memory_armed: bool,
) -> Ended {
    if let Some(limit) = sink.overflow() {
        return Ended::Limit(limit);
    }
    let message = exception.message().unwrap_or_default();
    let timed_out = exception.exc_type() == ExcType::TimeoutError
        && message.starts_with(TIME_LIMIT_PREFIX)
        && guest_time >= limits.max_duration;
    if timed_out {
        return Ended::Limit(LimitExceeded {
            limit: LimitKind::Duration,
            attempted: nanos(guest_time),
            max: nanos(limits.max_duration),
        });
    }
    if memory_armed
        && exception.exc_type() == ExcType::MemoryError
        && let Some(rest) = message.strip_prefix(MEMORY_LIMIT_PREFIX)
    {
        let attempted = rest
            .split_once(" bytes")
            .and_then(|(used, _)| used.parse::<u64>().ok())
            .filter(|used| *used > limits.max_memory_bytes)
            .unwrap_or(limits.max_memory_bytes.saturating_add(1));
        return Ended::Limit(LimitExceeded { limit: LimitKind::Memory, attempted, max: limits.max_memory_bytes });
    }
    Ended::Exception(exception)
}

#[cfg(test)]
mod tests {
    use super::{COMPILED, COMPILED_ENTRIES, COMPILED_MAX_CODE_BYTES, compiled};

    fn cached(code: &str) -> bool {
        COMPILED.lock().unwrap().iter().any(|entry| entry.code == code)
    }

    #[test]
    fn compiled_programs_are_kept_up_to_the_bound_and_failures_or_long_ones_never() {
        let unique = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_digit(), "");
        for index in 0..COMPILED_ENTRIES + 8 {
            compiled(&format!("x_{unique}_{index} = {index}\nx_{unique}_{index}"), &[]).map_err(|_| ()).unwrap();
            assert!(COMPILED.lock().unwrap().len() <= COMPILED_ENTRIES);
        }
        let bad = format!("def broken_{unique}(:\n");
        assert!(compiled(&bad, &[]).is_err());
        assert!(!cached(&bad), "a program that does not compile is kept");
        let long = format!("# {}\n1", "x".repeat(COMPILED_MAX_CODE_BYTES));
        compiled(&long, &[]).map_err(|_| ()).unwrap();
        assert!(!cached(&long), "a program over the size bound is kept");
    }
}
