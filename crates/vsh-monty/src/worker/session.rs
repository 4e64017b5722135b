//! One request served by one worker: send the program, answer every
//! suspension with the parent's [`Dispatcher`], collect the output, and learn
//! how the run ended, enforcing every bound on the way.
//!
//! Two clocks watch the worker. The *watchdog* allows the worker
//! `max_duration` plus the grace of running time (time the parent spends
//! answering a request is not counted: the guest's clock is paused then too);
//! the *deadline* is the request's end-to-end `max_request_duration`. Waiting
//! for a frame never outlasts either, and a per-worker watchdog thread kills
//! the worker at the deadline even if the parent is stuck writing to it.

use std::time::{Duration, Instant};

use monty_types::MontyObject;
use vsh_bash::{BashEnd, Ending};

use crate::dispatch::{Dispatcher, Stop};
use crate::drive::{Request, Service};
use crate::error::{GuestException, WorkerError};
use crate::interrupt;
use crate::limits::{ExecutionLimits, LimitExceeded, LimitKind, nanos};
use crate::output::OutputSink;
use crate::run::RunEnd;
use crate::worker::process::{Incoming, WorkerProcess, describe_exit};
use crate::worker::protocol::{
    self, BashCall, BashRequest, FrameCaps, HARD_MAX_FRAME, RunRequest, WORKER_LIMITS, WireFinish, WireLimits,
    WireReply, WireRequest, kind,
};
use crate::worker::wire::WireError;

/// The deepest value the parent rebuilds from the worker: monty's own
/// conversion stops at the recursion limit, so a little above it, but never
/// so deep that dropping the value could exhaust the parent's stack.
fn max_value_depth(limits: &ExecutionLimits) -> usize {
    limits.max_recursion_depth.saturating_add(64).min(4096)
}

/// What a session produced.
pub(crate) struct Session {
    /// How the run ended, or how the worker failed.
    pub(crate) end: Result<RunEnd, WorkerError>,
    /// The output the worker sent.
    pub(crate) stdout: String,
    /// Its size.
    pub(crate) output_bytes: u64,
    /// Whether the worker may serve another run (after a reset).
    pub(crate) reusable: bool,
}

/// Serve one request on `worker`.
pub(crate) fn serve(
    worker: &mut WorkerProcess,
    code: &str,
    dispatcher: &mut Dispatcher<'_>,
    limits: &ExecutionLimits,
    grace: Duration,
    deadline: Instant,
) -> Session {
    let mut session = Session { end: Ok(RunEnd::Aborted), stdout: String::new(), output_bytes: 0, reusable: false };
    worker.set_caps(FrameCaps::for_limits(limits));
    worker.arm(deadline);
    let end = converse(worker, code, dispatcher, limits, grace, deadline, &mut session);
    let fired = worker.fired();
    session.end = match end {
        Err(Failure::Worker(WorkerError::Crashed { .. } | WorkerError::Transport { .. })) if fired => {
            Ok(RunEnd::Limit(deadline_passed(limits, deadline)))
        }
        Err(Failure::Worker(error)) => Err(error),
        Err(Failure::Limit(limit)) => Ok(RunEnd::Limit(limit)),
        // The dispatcher holds the cause.
        Err(Failure::Cancelled) => Ok(RunEnd::Aborted),
        Ok(end) => {
            session.reusable = matches!(end, RunEnd::Value(_) | RunEnd::Exception(_));
            Ok(end)
        }
    };
    session.reusable = finish(worker, session.reusable, deadline);
    session
}

/// The run is over: read the reset's answer that follows a clean end (still
/// under the run's watchdog, so a worker that stops in the middle of it is
/// killed at the deadline), disarm, and kill the worker unless it is fit
/// for another run. Whether it is.
fn finish(worker: &mut WorkerProcess, clean: bool, deadline: Instant) -> bool {
    let fit = clean && reset_done(worker, RESET_WAIT.min(deadline.saturating_duration_since(Instant::now())));
    // Fired while the answer was read: the worker is gone.
    let fit = !worker.disarm() && fit;
    if !fit {
        worker.kill();
    }
    fit
}

/// How a conversation failed.
enum Failure {
    /// A limit the parent enforced on the worker (watchdog, deadline, output).
    Limit(LimitExceeded),
    /// The worker failed.
    Worker(WorkerError),
    /// The caller's interrupt ended the run (the worker was killed).
    Cancelled,
}

impl From<WorkerError> for Failure {
    fn from(error: WorkerError) -> Self {
        Self::Worker(error)
    }
}

fn protocol_error(reason: impl Into<String>) -> Failure {
    Failure::Worker(WorkerError::Protocol { reason: reason.into() })
}

fn wire_error(error: WireError) -> Failure {
    match error {
        WireError::TooDeep(max) => Failure::Worker(WorkerError::ValueTooDeep { max }),
        WireError::Malformed(reason) => protocol_error(reason),
    }
}

fn deadline_passed(limits: &ExecutionLimits, deadline: Instant) -> LimitExceeded {
    let started = deadline.checked_sub(limits.max_request_duration).unwrap_or(deadline);
    LimitExceeded {
        limit: LimitKind::RequestDuration,
        attempted: nanos(started.elapsed()),
        max: nanos(limits.max_request_duration),
    }
}

/// The conversation itself.
fn converse(
    worker: &mut WorkerProcess,
    code: &str,
    dispatcher: &mut Dispatcher<'_>,
    limits: &ExecutionLimits,
    grace: Duration,
    deadline: Instant,
    session: &mut Session,
) -> Result<RunEnd, Failure> {
    let request = RunRequest { code: code.to_owned(), limits: WireLimits::of(limits), bash: dispatcher.nested_bash };
    let body = protocol::encode(&request).map_err(|source| WorkerError::Transport { source })?;
    send(worker, kind::RUN, &body, limits)?;
    let mut clock = Clock::new(limits, grace, deadline);
    let max_depth = max_value_depth(limits);
    // The dispatcher's `serve` takes a sink; the parent's is unused.
    let mut unused_sink = OutputSink::new(0);
    loop {
        let (frame_kind, body) = clock.next(worker, dispatcher, limits)?;
        match frame_kind {
            kind::OUTPUT => {
                let text: String = protocol::decode(&body).map_err(protocol_error)?;
                if text.is_empty() {
                    return Err(protocol_error("empty output frame"));
                }
                let total = session.output_bytes.saturating_add(text.len() as u64);
                if total > limits.max_output_bytes {
                    return Err(Failure::Limit(LimitExceeded {
                        limit: LimitKind::OutputBytes,
                        attempted: total,
                        max: limits.max_output_bytes,
                    }));
                }
                session.output_bytes = total;
                session.stdout.push_str(&text);
            }
            kind::SUSPEND => {
                if dispatcher.stopped() {
                    return Err(protocol_error("a request after the parent ended the run"));
                }
                let wire: WireRequest = protocol::decode(&body).map_err(protocol_error)?;
                if matches!(&wire, WireRequest::Function { name, .. } if name == crate::bash::NESTED_NAME) {
                    // The worker runs nested scripts itself; the parent never does.
                    return Err(protocol_error("vsh_bash sent as a function call"));
                }
                let request = request_from_wire(wire, max_depth)?;
                let reply = match request {
                    Some(request) => dispatcher.serve(request, &mut unused_sink),
                    None => return Err(protocol_error("malformed function call")),
                };
                let wire_reply = WireReply::from(reply);
                let body = protocol::encode(&wire_reply).map_err(|source| WorkerError::Transport { source })?;
                if body.len() as u64 > HARD_MAX_FRAME {
                    return Err(Failure::Worker(WorkerError::FrameTooLarge {
                        kind: kind::REPLY,
                        len: body.len() as u64,
                        max: HARD_MAX_FRAME,
                    }));
                }
                send(worker, kind::REPLY, &body, limits)?;
            }
            kind::BASH_CALL if dispatcher.nested_bash.is_some() => {
                let call: BashCall = protocol::decode(&body).map_err(protocol_error)?;
                let answer = serve_bash_call(call, dispatcher, limits);
                let body = protocol::encode(&answer).map_err(|source| WorkerError::Transport { source })?;
                send(worker, kind::BASH_REPLY, &body, limits)?;
            }
            kind::BASH_FINISHED if dispatcher.nested_bash.is_some() => {
                let end = bash_end_from_wire(&body, dispatcher, limits)?;
                let wire_reply = WireReply::from(dispatcher.nested_bash_reply(end));
                let body = protocol::encode(&wire_reply).map_err(|source| WorkerError::Transport { source })?;
                send(worker, kind::REPLY, &body, limits)?;
            }
            kind::FINISHED => {
                let finish: WireFinish = protocol::decode(&body).map_err(protocol_error)?;
                return finish_from_wire(finish, dispatcher, limits, max_depth);
            }
            other => return Err(protocol_error(format!("frame of kind {other} during a run"))),
        }
    }
}

/// The two clocks a conversation waits under (see the module's docs).
struct Clock {
    /// The worker's running time allowed: `max_duration` plus the grace.
    watchdog: Duration,
    /// The request's end-to-end deadline.
    deadline: Instant,
    /// The worker's running time so far (time waiting for its frames).
    worker_time: Duration,
}

impl Clock {
    fn new(limits: &ExecutionLimits, grace: Duration, deadline: Instant) -> Self {
        Self { watchdog: limits.max_duration.saturating_add(grace), deadline, worker_time: Duration::ZERO }
    }

    /// The worker's next frame, waiting no longer than either clock allows
    /// and looking at the caller's interrupt every [`interrupt::POLL`]; a
    /// worker past a clock, or interrupted, is killed.
    fn next(
        &mut self,
        worker: &mut WorkerProcess,
        dispatcher: &mut Dispatcher<'_>,
        limits: &ExecutionLimits,
    ) -> Result<(u8, Vec<u8>), Failure> {
        loop {
            let now = Instant::now();
            let to_deadline = self.deadline.saturating_duration_since(now);
            let to_watchdog = self.watchdog.saturating_sub(self.worker_time);
            let wait = to_deadline.min(to_watchdog);
            let slice = wait.min(interrupt::POLL);
            let incoming = worker.recv(slice);
            self.worker_time += now.elapsed();
            match incoming {
                Ok(Incoming::Frame(frame_kind, body)) => return Ok((frame_kind, body)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if dispatcher.interrupted() => {
                    worker.kill();
                    let _abort = dispatcher.end(Stop::Cancelled, "cancelled");
                    return Err(Failure::Cancelled);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if slice < wait => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    worker.kill();
                    if to_watchdog <= to_deadline {
                        return Err(Failure::Limit(LimitExceeded {
                            limit: LimitKind::Duration,
                            attempted: nanos(self.worker_time),
                            max: nanos(limits.max_duration),
                        }));
                    }
                    return Err(Failure::Limit(deadline_passed(limits, self.deadline)));
                }
                Ok(Incoming::TooLarge { kind, len, max }) => {
                    return Err(Failure::Worker(WorkerError::FrameTooLarge { kind, len, max }));
                }
                Ok(Incoming::UnknownKind(other)) => {
                    return Err(protocol_error(format!("frame of unknown kind {other}")));
                }
                Ok(Incoming::Closed) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ended(worker, limits));
                }
            }
        }
    }
}

/// What a Bash session produced: the interpreter's end, or a limit the
/// parent enforced on the worker; or how the worker failed.
pub(crate) struct BashSession {
    pub(crate) end: Result<Result<BashEnd, LimitExceeded>, WorkerError>,
    /// Whether the worker may serve another run (after a reset).
    pub(crate) reusable: bool,
}

/// Serve one Bash request on `worker`.
pub(crate) fn serve_bash(
    worker: &mut WorkerProcess,
    request: &BashRequest,
    dispatcher: &mut Dispatcher<'_>,
    limits: &ExecutionLimits,
    grace: Duration,
    deadline: Instant,
) -> BashSession {
    worker.set_caps(FrameCaps::for_limits(limits));
    worker.arm(deadline);
    let end = converse_bash(worker, request, dispatcher, limits, grace, deadline);
    let fired = worker.fired();
    let mut reusable = false;
    let end = match end {
        Err(Failure::Worker(WorkerError::Crashed { .. } | WorkerError::Transport { .. })) if fired => {
            Ok(Err(deadline_passed(limits, deadline)))
        }
        Err(Failure::Worker(error)) => Err(error),
        Err(Failure::Limit(limit)) => Ok(Err(limit)),
        // The dispatcher holds the cause.
        Err(Failure::Cancelled) => {
            Ok(Ok(BashEnd { exit_code: 1, stdout: Vec::new(), stderr: Vec::new(), ending: Ending::Stopped }))
        }
        Ok(end) => {
            reusable = end.ending != Ending::Stopped;
            Ok(Ok(end))
        }
    };
    let reusable = finish(worker, reusable, deadline);
    BashSession { end, reusable }
}

fn converse_bash(
    worker: &mut WorkerProcess,
    request: &BashRequest,
    dispatcher: &mut Dispatcher<'_>,
    limits: &ExecutionLimits,
    grace: Duration,
    deadline: Instant,
) -> Result<BashEnd, Failure> {
    let body = protocol::encode(request).map_err(|source| WorkerError::Transport { source })?;
    send(worker, kind::RUN_BASH, &body, limits)?;
    let mut clock = Clock::new(limits, grace, deadline);
    loop {
        let (frame_kind, body) = clock.next(worker, dispatcher, limits)?;
        match frame_kind {
            kind::BASH_CALL => {
                let call: BashCall = protocol::decode(&body).map_err(protocol_error)?;
                let answer = serve_bash_call(call, dispatcher, limits);
                let body = protocol::encode(&answer).map_err(|source| WorkerError::Transport { source })?;
                send(worker, kind::BASH_REPLY, &body, limits)?;
            }
            kind::BASH_FINISHED => return bash_end_from_wire(&body, dispatcher, limits),
            other => return Err(protocol_error(format!("frame of kind {other} during a bash run"))),
        }
    }
}

/// The answer to a Bash script's file access (`None`: the run is over).
fn serve_bash_call(
    call: BashCall,
    dispatcher: &mut Dispatcher<'_>,
    limits: &ExecutionLimits,
) -> Option<vsh_bash::FsReply> {
    match call {
        BashCall::Fs(request) => vsh_bash::FsHost::serve(dispatcher, request).ok(),
        BashCall::Oversized { bytes } => {
            let limit =
                LimitExceeded { limit: LimitKind::WriteCallBytes, attempted: bytes, max: limits.max_io_call_bytes };
            let _abort = dispatcher.end(Stop::Limit(limit), "budget exhausted");
            None
        }
    }
}

/// A Bash script's end as the worker reports it, checked against what the
/// parent knows (what it stopped, the output budget).
fn bash_end_from_wire(body: &[u8], dispatcher: &Dispatcher<'_>, limits: &ExecutionLimits) -> Result<BashEnd, Failure> {
    let end: BashEnd = protocol::decode(body).map_err(protocol_error)?;
    if dispatcher.stopped() != (end.ending == Ending::Stopped) {
        return Err(protocol_error("the bash run's end disagrees with what the parent ended"));
    }
    if end.stdout.len() as u64 > limits.max_output_bytes || end.stderr.len() as u64 > limits.max_output_bytes {
        return Err(protocol_error("bash output larger than its budget"));
    }
    Ok(end)
}

/// Why a worker that stopped talking did: exit code 65 is its allocator's
/// memory ceiling, anything else a crash.
fn ended(worker: &WorkerProcess, limits: &ExecutionLimits) -> Failure {
    let (code, signal) = describe_exit(worker.exit_status());
    if code == Some(monty_types::OOM_EXIT_CODE) {
        return Failure::Limit(LimitExceeded {
            limit: LimitKind::Memory,
            attempted: limits.max_memory_bytes.saturating_add(1),
            max: limits.max_memory_bytes,
        });
    }
    Failure::Worker(WorkerError::Crashed { code, signal })
}

/// Send one frame; a worker that no longer reads has ended (see [`ended`]).
fn send(worker: &mut WorkerProcess, frame_kind: u8, body: &[u8], limits: &ExecutionLimits) -> Result<(), Failure> {
    match worker.send(frame_kind, body) {
        Ok(()) => Ok(()),
        Err(_) => Err(ended(worker, limits)),
    }
}

/// The dispatcher's request for a wire request; `None` for a function call
/// whose arguments are not a list and a dict.
fn request_from_wire(wire: WireRequest, max_depth: usize) -> Result<Option<Request>, Failure> {
    Ok(Some(match wire {
        WireRequest::Os(call) => Request::Os(call.into_call(max_depth).map_err(wire_error)?),
        WireRequest::Function { name, args, kwargs } => {
            let args = args.rebuild(max_depth).map_err(wire_error)?;
            let kwargs = kwargs.rebuild(max_depth).map_err(wire_error)?;
            let (MontyObject::List(args), MontyObject::Dict(kwargs)) = (args, kwargs) else { return Ok(None) };
            Request::Function { name, args, kwargs: kwargs.into_iter().collect() }
        }
        WireRequest::Method { name } => Request::Method { name },
        WireRequest::Lookup { name } => Request::Lookup { name },
        WireRequest::Futures { pending } => {
            Request::Futures { pending: usize::try_from(pending).unwrap_or(usize::MAX) }
        }
        WireRequest::Oversized { bytes } => Request::Oversized { bytes },
    }))
}

/// How the run ended, checked against what the parent knows.
fn finish_from_wire(
    finish: WireFinish,
    dispatcher: &Dispatcher<'_>,
    limits: &ExecutionLimits,
    max_depth: usize,
) -> Result<RunEnd, Failure> {
    let aborted = dispatcher.stopped();
    if aborted && !matches!(finish, WireFinish::Aborted) {
        return Err(protocol_error("the run went on after the parent ended it"));
    }
    match finish {
        WireFinish::Value(value) => Ok(RunEnd::Value(value.rebuild(max_depth).map_err(wire_error)?)),
        WireFinish::Exception { type_name, message, traceback } => {
            let budget = limits.max_exception_bytes.max(2 * crate::TRUNCATION_MARKER.len() as u64);
            if type_name.len() > 256 || (message.len() + traceback.len()) as u64 > budget {
                return Err(protocol_error("an exception larger than its budget"));
            }
            Ok(RunEnd::Exception(GuestException { type_name, message, traceback }))
        }
        WireFinish::Limit { tag, attempted, max } => match LimitKind::from_tag(tag) {
            Some(limit) if WORKER_LIMITS.contains(&limit) => Ok(RunEnd::Limit(LimitExceeded { limit, attempted, max })),
            _ => Err(protocol_error(format!("a limit the worker does not enforce (tag {tag})"))),
        },
        WireFinish::Aborted if aborted => Ok(RunEnd::Aborted),
        WireFinish::Aborted => Err(protocol_error("an abort the parent did not ask for")),
    }
}

/// How long the reset's answer may take to come after a clean end (it is
/// written with the end, so it is there at once unless the end was larger
/// than the worker's output buffer).
const RESET_WAIT: Duration = Duration::from_secs(2);

/// Live allocator bytes a reset worker may hold above its first greeting's
/// before it is considered leaky and discarded.
const LEAK_SLACK: u64 = 16 << 20;

/// Whether the worker's reset answer came within `wait` and it holds no more
/// live memory than it greeted with plus [`LEAK_SLACK`].
fn reset_done(worker: &mut WorkerProcess, wait: Duration) -> bool {
    match worker.recv(wait) {
        Ok(Incoming::Frame(kind::RESET_DONE, body)) => protocol::decode::<protocol::ResetDone>(&body)
            .is_ok_and(|done| done.live_bytes <= worker.baseline_live.saturating_add(LEAK_SLACK)),
        _ => false,
    }
}
