//! The worker process: greets the parent, then runs programs it is sent,
//! forwarding every suspension to the parent and printing nothing of its own.
//!
//! The worker has no workspace, no environment and (confined by the parent's
//! sandbox) no filesystem or network access: everything a program does to
//! files is a request the parent's `VirtualFs` answers. Its global allocator
//! (`monty_alloc::LimitedAllocator`, installed by the binary) enforces the
//! memory budget; past the hard ceiling it exits with code 65, which the
//! parent reports as the memory limit.
//!
//! Exit codes: 0 when the parent closes stdin, 3 on an I/O error talking to
//! the parent, 4 when the limited allocator is not installed, 76 when the
//! parent broke the protocol, 65 past the memory ceiling.

use std::borrow::BorrowMut;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Stdin};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use monty_types::{DictPairs, MontyObject};
use vsh_bash::{FsReply, FsRequest};

use crate::drive::{self, DriveOptions, Ended, Reply, Request, Service};
use crate::error::GuestException;
use crate::limits::{LimitExceeded, LimitKind};
use crate::output::OutputSink;
use crate::tools::GUEST_FUNCTION_NAMES;
use crate::value;
use crate::worker::protocol::{
    self, BashCall, BashRequest, FrameCaps, HARD_MAX_FRAME, Hello, MAGIC, OUTPUT_CHUNK, PROTOCOL_VERSION, ResetDone,
    RunRequest, WireFinish, WireReply, WireRequest, kind,
};
use crate::worker::wire::{WireOsCall, WireValue};

/// Exit code: talking to the parent failed.
const EXIT_IO: u8 = 3;
/// Exit code: the limited allocator is not the global allocator.
const EXIT_ALLOCATOR: u8 = 4;
/// Exit code: the parent sent something out of protocol.
const EXIT_PROTOCOL: u8 = 76;

/// The worker's two pipes. Frames go out through a descriptor of its own
/// on the stdout pipe, not `Stdout`, whose line buffering would cut a frame
/// at every byte 10 in it into writes of their own; each flush is then one
/// write of whole frames.
pub(crate) struct Link {
    input: BufReader<Stdin>,
    pub(crate) output: BufWriter<File>,
}

/// How much of the outgoing frames the worker gathers before writing.
const OUTPUT_BUFFER: usize = 128 << 10;

impl Link {
    /// The next frame from the parent, or `None` when it closed the pipe.
    pub(crate) fn recv(&mut self) -> io::Result<Option<(u8, Vec<u8>)>> {
        if self.input.buffer().is_empty() {
            // Check for the parent's answer a moment before sleeping on it.
            let _ =
                vsh_sandbox::wait_readable_spinning(io::stdin().as_fd(), protocol::ANSWER_SPIN, protocol::ANSWER_SPIN);
        }
        let Some((frame_kind, len)) = protocol::read_header(&mut self.input)? else { return Ok(None) };
        if len > HARD_MAX_FRAME {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "frame larger than the protocol allows"));
        }
        Ok(Some((frame_kind, protocol::read_body(&mut self.input, len)?)))
    }
}

/// The entry point of the `vsh-monty-worker` binary. Not for other use: it
/// takes over the process's stdin and stdout.
pub fn worker_main() -> ExitCode {
    // The unlocked handles (their lock is taken per call, uncontended): a
    // Bash run moves the link onto the interpreter's filesystem.
    let Ok(stdout) = io::stdout().as_fd().try_clone_to_owned() else { return ExitCode::from(EXIT_IO) };
    let mut link = Link {
        input: BufReader::new(io::stdin()),
        output: BufWriter::with_capacity(OUTPUT_BUFFER, File::from(stdout)),
    };
    let hello = Hello {
        magic: MAGIC,
        protocol: PROTOCOL_VERSION,
        identity: protocol::build_identity(),
        live_bytes: monty_types::LIVE_MEMORY.load(Ordering::Relaxed) as u64,
    };
    if protocol::send(&mut link.output, kind::HELLO, &hello).is_err() {
        return ExitCode::from(EXIT_IO);
    }
    loop {
        let (frame_kind, body) = match link.recv() {
            Ok(Some(frame)) => frame,
            Ok(None) => return ExitCode::SUCCESS,
            Err(_) => return ExitCode::from(EXIT_IO),
        };
        match frame_kind {
            kind::RUN => {
                let Ok(request) = protocol::decode::<RunRequest>(&body) else { return ExitCode::from(EXIT_PROTOCOL) };
                if let Err(code) = run(&mut link, &request).and_then(|()| reset(&mut link)) {
                    return ExitCode::from(code);
                }
            }
            kind::RUN_BASH => {
                let Ok(request) = protocol::decode::<BashRequest>(&body) else { return ExitCode::from(EXIT_PROTOCOL) };
                let (outcome, back) = run_bash(link, &request);
                link = back;
                if let Err(code) = outcome.and_then(|()| reset(&mut link)) {
                    return ExitCode::from(code);
                }
            }
            _ => return ExitCode::from(EXIT_PROTOCOL),
        }
    }
}

/// After a run's end frame (queued, not yet written): clear the memory
/// limit and report the live bytes left, both frames in one write, so the
/// parent finds the reset's answer with the run's end and never waits for it.
fn reset(link: &mut Link) -> Result<(), u8> {
    monty_alloc::set_limit(None, false).map_err(|_| EXIT_ALLOCATOR)?;
    let done = ResetDone { live_bytes: monty_types::LIVE_MEMORY.load(Ordering::Relaxed) as u64 };
    protocol::send(&mut link.output, kind::RESET_DONE, &done).map_err(|_| EXIT_IO)
}

/// The external functions a worker's programs see.
fn functions() -> Vec<&'static str> {
    let names = GUEST_FUNCTION_NAMES.to_vec();
    #[cfg(feature = "test-hooks")]
    let names = {
        let mut names = names;
        names.push(crate::worker::hooks::HOOK_NAME);
        names
    };
    names
}

/// Run one program and report how it ended; `Err` is the exit code for a
/// failure to talk to the parent.
fn run(link: &mut Link, request: &RunRequest) -> Result<(), u8> {
    let limits = request.limits.to_limits();
    let memory = usize::try_from(limits.max_memory_bytes).unwrap_or(usize::MAX);
    monty_alloc::set_limit(Some(memory), false).map_err(|_| EXIT_ALLOCATOR)?;
    let caps = FrameCaps::for_limits(&limits);
    let mut sink = OutputSink::new(limits.max_output_bytes);
    let names = functions();
    let mut remote = Remote { link, caps, failed: None, bash: request.bash, limits: limits.clone() };
    let result = drive::run_program(
        &request.code,
        &mut remote,
        &mut sink,
        &limits,
        DriveOptions { functions: &names, memory_armed: true },
    );
    if let Some(code) = remote.failed {
        return Err(code);
    }
    flush_output(link, &mut sink)?;
    let finish = match result {
        Ok(value) => match value::measure(&value, limits.max_result_bytes) {
            Ok(_) => WireFinish::Value(WireValue::flatten(&value)),
            Err(attempted) => WireFinish::limit(LimitExceeded {
                limit: LimitKind::ResultBytes,
                attempted,
                max: limits.max_result_bytes,
            }),
        },
        Err(Ended::Exception(exception)) => {
            let bounded = GuestException::bounded(&exception, limits.max_exception_bytes);
            WireFinish::Exception {
                type_name: bounded.type_name,
                message: bounded.message,
                traceback: bounded.traceback,
            }
        }
        Err(Ended::Limit(limit)) => WireFinish::limit(limit),
        Err(Ended::Aborted) => WireFinish::Aborted,
    };
    let mut body = protocol::encode(&finish).map_err(|_| EXIT_IO)?;
    if body.len() as u64 > caps.finished {
        let limit =
            LimitExceeded { limit: LimitKind::ResultBytes, attempted: body.len() as u64, max: limits.max_result_bytes };
        body = protocol::encode(&WireFinish::limit(limit)).map_err(|_| EXIT_IO)?;
    }
    // Written with the reset's answer (`reset`).
    protocol::queue_frame(&mut link.output, kind::FINISHED, &body).map_err(|_| EXIT_IO)
}

/// Run one Bash program, every file access a request to the parent, and
/// report how it ended; `Err` is the exit code for a failure to talk to the
/// parent.
/// The interpreter runs on this thread and calls the parent itself (no hop
/// between threads per file access), so the link moves into its filesystem
/// for the run and comes back after.
fn run_bash(link: Link, request: &BashRequest) -> (Result<(), u8>, Link) {
    let memory = usize::try_from(request.memory_bytes).unwrap_or(usize::MAX);
    if monty_alloc::set_limit(Some(memory), false).is_err() {
        return (Err(EXIT_ALLOCATOR), link);
    }
    let remote = RemoteFs { link, io_call_bytes: request.io_call_bytes, failed: None };
    let (end, mut remote) = vsh_bash::run_direct(&request.run, remote);
    let outcome = match remote.failed {
        Some(code) => Err(code),
        // Written with the reset's answer (`reset`).
        None => protocol::encode(&end)
            .and_then(|body| protocol::queue_frame(&mut remote.link.output, kind::BASH_FINISHED, &body))
            .map_err(|_| EXIT_IO),
    };
    (outcome, remote.link)
}

/// A Bash program's filesystem in the worker: every access is a request to
/// the parent.
struct RemoteFs<L> {
    link: L,
    io_call_bytes: u64,
    /// Set when talking to the parent failed; the worker then exits with it.
    failed: Option<u8>,
}

impl<L: BorrowMut<Link>> RemoteFs<L> {
    fn exchange(&mut self, request: FsRequest) -> Result<Option<FsReply>, u8> {
        let call = match &request {
            FsRequest::Write { data, .. } | FsRequest::Append { data, .. }
                if data.len() as u64 > self.io_call_bytes =>
            {
                BashCall::Oversized { bytes: data.len() as u64 }
            }
            _ => BashCall::Fs(request),
        };
        let link = self.link.borrow_mut();
        protocol::send(&mut link.output, kind::BASH_CALL, &call).map_err(|_| EXIT_IO)?;
        let (frame_kind, body) = link.recv().map_err(|_| EXIT_IO)?.ok_or(EXIT_IO)?;
        if frame_kind != kind::BASH_REPLY {
            return Err(EXIT_PROTOCOL);
        }
        protocol::decode::<Option<FsReply>>(&body).map_err(|_| EXIT_PROTOCOL)
    }
}

impl<L: BorrowMut<Link>> vsh_bash::FsHost for RemoteFs<L> {
    fn serve(&mut self, request: FsRequest) -> Result<FsReply, vsh_bash::Stopped> {
        if self.failed.is_some() {
            return Err(vsh_bash::Stopped);
        }
        match self.exchange(request) {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => Err(vsh_bash::Stopped),
            Err(code) => {
                self.failed = Some(code);
                Err(vsh_bash::Stopped)
            }
        }
    }
}

/// Send the output printed since the last flush, in chunks of at most
/// [`OUTPUT_CHUNK`] bytes cut on character boundaries.
fn flush_output(link: &mut Link, sink: &mut OutputSink) -> Result<(), u8> {
    let text = sink.take_pending();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(OUTPUT_CHUNK);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        // Sent with the request or the end that always follows, in one write.
        let body = protocol::encode(&chunk.to_owned()).map_err(|_| EXIT_IO)?;
        protocol::queue_frame(&mut link.output, kind::OUTPUT, &body).map_err(|_| EXIT_IO)?;
        rest = tail;
    }
    Ok(())
}

/// The worker's [`Service`]: every suspension is a request to the parent.
struct Remote<'l> {
    link: &'l mut Link,
    caps: FrameCaps,
    /// Set when talking to the parent failed; the run is then aborted and the
    /// worker exits with this code.
    failed: Option<u8>,
    /// The interpreter budgets of `vsh_bash`, when the host enabled it.
    bash: Option<vsh_bash::BashLimits>,
    /// The run's budgets, for a nested script.
    limits: crate::limits::ExecutionLimits,
}

impl Remote<'_> {
    fn exchange(&mut self, request: Request, sink: &mut OutputSink) -> Result<Reply, u8> {
        flush_output(self.link, sink)?;
        let wire = match request {
            Request::Os(call) => WireRequest::Os(WireOsCall::from_call(call)),
            Request::Function { name, args, kwargs } => WireRequest::Function {
                name,
                args: WireValue::flatten(&MontyObject::List(args)),
                kwargs: WireValue::flatten(&MontyObject::Dict(DictPairs::from(kwargs))),
            },
            Request::Method { name } => WireRequest::Method { name },
            Request::Lookup { name } => WireRequest::Lookup { name },
            Request::Futures { pending } => WireRequest::Futures { pending: pending as u64 },
            Request::Oversized { bytes } => WireRequest::Oversized { bytes },
        };
        let mut body = protocol::encode(&wire).map_err(|_| EXIT_IO)?;
        if body.len() as u64 > self.caps.suspend {
            body = protocol::encode(&WireRequest::Oversized { bytes: body.len() as u64 }).map_err(|_| EXIT_IO)?;
        }
        protocol::write_frame(&mut self.link.output, kind::SUSPEND, &body).map_err(|_| EXIT_IO)?;
        let (frame_kind, body) = self.link.recv().map_err(|_| EXIT_IO)?.ok_or(EXIT_IO)?;
        if frame_kind != kind::REPLY {
            return Err(EXIT_PROTOCOL);
        }
        Ok(protocol::decode::<WireReply>(&body).map_err(|_| EXIT_PROTOCOL)?.into())
    }
}

impl Remote<'_> {
    /// `vsh_bash(code)`: the script runs here, in the worker, each of its
    /// file accesses a request to the parent; its end goes to the parent,
    /// whose answer resumes the program.
    fn nested_bash(
        &mut self,
        args: Vec<MontyObject>,
        kwargs: Vec<(MontyObject, MontyObject)>,
        sink: &mut OutputSink,
    ) -> Result<Reply, u8> {
        let code = match crate::tools::nested_bash_code(args, kwargs) {
            Ok(code) => code,
            Err(crate::host::Fault::Guest(exception)) => return Ok(Reply::Raise(exception)),
            Err(_) => return Ok(Reply::Raise(monty_types::MontyException::new(monty_types::ExcType::TypeError, None))),
        };
        let Some(bash) = self.bash else { return Ok(Reply::Raise(crate::bash::nested_unavailable())) };
        flush_output(self.link, sink)?;
        let run = crate::run::bash_run(&code, &self.limits, &bash);
        let mut remote = RemoteFs { link: &mut *self.link, io_call_bytes: self.limits.max_io_call_bytes, failed: None };
        let end = vsh_bash::run(&run, &mut remote);
        if let Some(code) = remote.failed {
            return Err(code);
        }
        protocol::send(&mut self.link.output, kind::BASH_FINISHED, &end).map_err(|_| EXIT_IO)?;
        let (frame_kind, body) = self.link.recv().map_err(|_| EXIT_IO)?.ok_or(EXIT_IO)?;
        if frame_kind != kind::REPLY {
            return Err(EXIT_PROTOCOL);
        }
        Ok(protocol::decode::<WireReply>(&body).map_err(|_| EXIT_PROTOCOL)?.into())
    }
}

impl Service for Remote<'_> {
    fn serve(&mut self, request: Request, sink: &mut OutputSink) -> Reply {
        if self.failed.is_some() {
            return Reply::Abort("worker transport failed".to_owned());
        }
        if let Request::Function { name, args, kwargs } = request {
            if name == crate::bash::NESTED_NAME {
                return match self.nested_bash(args, kwargs, sink) {
                    Ok(reply) => reply,
                    Err(code) => {
                        self.failed = Some(code);
                        Reply::Abort("worker transport failed".to_owned())
                    }
                };
            }
            return self.serve_other(Request::Function { name, args, kwargs }, sink);
        }
        self.serve_other(request, sink)
    }
}

impl Remote<'_> {
    /// Any suspension but `vsh_bash`: a request to the parent.
    fn serve_other(&mut self, request: Request, sink: &mut OutputSink) -> Reply {
        #[cfg(feature = "test-hooks")]
        if let Request::Function { name, args, .. } = &request
            && name == crate::worker::hooks::HOOK_NAME
        {
            return crate::worker::hooks::run(self.link, args);
        }
        match self.exchange(request, sink) {
            Ok(reply) => reply,
            Err(code) => {
                self.failed = Some(code);
                Reply::Abort("worker transport failed".to_owned())
            }
        }
    }
}
