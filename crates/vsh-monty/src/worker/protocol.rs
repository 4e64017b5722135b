//! The worker protocol: framed postcard messages on the worker's stdin and
//! stdout.
//!
//! # Frames
//!
//! Every frame is a 5-byte header, the body length as a little-endian `u32`
//! and a kind byte, followed by the body: one postcard-encoded message of the
//! type that kind names. A reader checks the kind and the length against the
//! bound for that kind *before* allocating anything for the body, and decodes
//! the body completely (trailing bytes are an error).
//!
//! | kind | direction | body | parent's bound |
//! |---:|---|---|---|
//! | 1 | worker → parent | [`Hello`] | 4 KiB |
//! | 2 | worker → parent | output text (`String`, non-empty) | 64 KiB + 16 |
//! | 3 | worker → parent | [`WireRequest`] | `max_io_call_bytes + 2 × max_path_bytes + 64 KiB` |
//! | 4 | worker → parent | [`WireFinish`] | `max(max_result_bytes, max_exception_bytes) + 64 KiB` |
//! | 5 | worker → parent | [`ResetDone`] | 64 bytes |
//! | 6 | worker → parent | [`BashCall`] | as kind 3 |
//! | 7 | worker → parent | [`vsh_bash::BashEnd`] | `2 × max_output_bytes + 64 KiB` |
//! | 16 | parent → worker | [`RunRequest`] | (worker) 256 MiB |
//! | 17 | parent → worker | [`WireReply`] | (worker) 256 MiB |
//! | 18 | (retired: the parent's reset request of protocol 2) | |
//! | 19 | parent → worker | [`BashRequest`] | (worker) 256 MiB |
//! | 20 | parent → worker | `Option<`[`vsh_bash::FsReply`]`>` (`None`: the run is over) | (worker) 256 MiB |
//!
//! Every bound is capped at [`HARD_MAX_FRAME`].
//!
//! # Conversation
//!
//! 1. The worker starts and sends [`Hello`]: a magic string, the protocol
//!    version and its exact build identity ([`build_identity`]: crate and
//!    monty versions, protocol version, the BLAKE3 of the sources and build
//!    configuration, and whether test hooks are compiled in). The parent
//!    refuses any mismatch.
//! 2. The parent sends [`RunRequest`]. The worker compiles and runs the
//!    program; each suspension becomes one [`WireRequest`] answered by one
//!    [`WireReply`]. Printed text is sent as output frames before each
//!    request and before the end. The run ends with one [`WireFinish`].
//!    A Bash run is the same conversation in its own kinds: [`BashRequest`],
//!    then each file access one [`BashCall`] answered by one reply (kind 20),
//!    and one [`vsh_bash::BashEnd`] with both streams.
//! 3. Right after its end frame, and in the same write, the worker resets
//!    itself (clears its memory limit) and sends [`ResetDone`]; the parent
//!    reads it with the end, under the run's deadline, and never waits a
//!    round trip for it. Only a worker whose reset came, and left no more
//!    live memory than its greeting's plus a slack, serves another run.
//!
//! Anything else at any point (an unknown kind, an undecodable body, a frame
//! out of turn, an empty output frame, a request after the parent aborted the
//! run) is a protocol violation: the parent kills the worker.

use std::io::{self, Read, Write};

use monty_types::{MontyException, MontyObject};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::limits::{ExecutionLimits, LimitExceeded, LimitKind};
use crate::worker::wire::{WireOsCall, WireValue};

/// The first bytes of the worker's greeting.
pub(crate) const MAGIC: [u8; 8] = *b"VSHMONTY";

/// The protocol version; any change to a message or a frame rule changes it.
pub(crate) const PROTOCOL_VERSION: u32 = 5;

/// The digest of this package's sources and build configuration (see
/// `build.rs`).
pub(crate) const BUILD_ID: &str = env!("VSH_MONTY_BUILD_ID");

/// The frame header: body length (`u32`, little-endian) and kind.
pub(crate) const HEADER_BYTES: usize = 5;

/// The largest frame either side ever accepts.
pub(crate) const HARD_MAX_FRAME: u64 = 256 << 20;

/// How long either side checks for the other's next frame before it
/// sleeps in the kernel: most answers come within it, and a thread that
/// does not sleep is not woken (see [`vsh_sandbox::wait_readable_spinning`]).
pub(crate) const ANSWER_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// The largest chunk of output one frame carries.
pub(crate) const OUTPUT_CHUNK: usize = 64 << 10;

/// Slack on top of the budget-derived bounds, for framing and small fields.
const FRAME_SLACK: u64 = 64 << 10;

/// Frame kinds.
pub(crate) mod kind {
    /// Worker → parent: [`super::Hello`].
    pub(crate) const HELLO: u8 = 1;
    /// Worker → parent: printed text.
    pub(crate) const OUTPUT: u8 = 2;
    /// Worker → parent: [`super::WireRequest`].
    pub(crate) const SUSPEND: u8 = 3;
    /// Worker → parent: [`super::WireFinish`].
    pub(crate) const FINISHED: u8 = 4;
    /// Worker → parent: [`super::ResetDone`].
    pub(crate) const RESET_DONE: u8 = 5;
    /// Parent → worker: [`super::RunRequest`].
    pub(crate) const RUN: u8 = 16;
    /// Parent → worker: [`super::WireReply`].
    pub(crate) const REPLY: u8 = 17;
    /// Worker → parent: [`super::BashCall`].
    pub(crate) const BASH_CALL: u8 = 6;
    /// Worker → parent: [`vsh_bash::BashEnd`].
    pub(crate) const BASH_FINISHED: u8 = 7;
    /// Parent → worker: [`super::BashRequest`].
    pub(crate) const RUN_BASH: u8 = 19;
    /// Parent → worker: the answer to a [`super::BashCall`].
    pub(crate) const BASH_REPLY: u8 = 20;
}

/// The identity both sides compare in the handshake.
pub(crate) fn build_identity() -> String {
    format!(
        "vsh-monty {} monty {} bash {} bashkit {} protocol {} build {} test-hooks {}",
        env!("CARGO_PKG_VERSION"),
        monty_types::MONTY_VERSION,
        vsh_bash::PROFILE,
        vsh_bash::BASHKIT_VERSION,
        PROTOCOL_VERSION,
        BUILD_ID,
        cfg!(feature = "test-hooks"),
    )
}

/// The worker's greeting.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Hello {
    /// [`MAGIC`].
    pub(crate) magic: [u8; 8],
    /// [`PROTOCOL_VERSION`].
    pub(crate) protocol: u32,
    /// [`build_identity`].
    pub(crate) identity: String,
    /// Bytes the worker's allocator counts live before any run.
    pub(crate) live_bytes: u64,
}

/// The budgets the worker enforces itself; the parent enforces the rest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireLimits {
    duration_ns: u64,
    recursion_depth: u64,
    memory_bytes: u64,
    os_calls: u64,
    output_bytes: u64,
    result_bytes: u64,
    exception_bytes: u64,
    io_call_bytes: u64,
    path_bytes: u64,
}

impl WireLimits {
    pub(crate) fn of(limits: &ExecutionLimits) -> Self {
        Self {
            duration_ns: crate::limits::nanos(limits.max_duration),
            recursion_depth: limits.max_recursion_depth as u64,
            memory_bytes: limits.max_memory_bytes,
            os_calls: limits.max_os_calls,
            output_bytes: limits.max_output_bytes,
            result_bytes: limits.max_result_bytes,
            exception_bytes: limits.max_exception_bytes,
            io_call_bytes: limits.max_io_call_bytes,
            path_bytes: limits.max_path_bytes,
        }
    }

    /// The limits as the worker's drive loop reads them (the fields the
    /// parent enforces keep their defaults and are not consulted).
    pub(crate) fn to_limits(&self) -> ExecutionLimits {
        ExecutionLimits {
            max_duration: std::time::Duration::from_nanos(self.duration_ns),
            max_recursion_depth: usize::try_from(self.recursion_depth).unwrap_or(usize::MAX),
            max_memory_bytes: self.memory_bytes,
            max_os_calls: self.os_calls,
            max_output_bytes: self.output_bytes,
            max_result_bytes: self.result_bytes,
            max_exception_bytes: self.exception_bytes,
            max_io_call_bytes: self.io_call_bytes,
            max_path_bytes: self.path_bytes,
            ..ExecutionLimits::default()
        }
    }
}

/// A program to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunRequest {
    /// The program text.
    pub(crate) code: String,
    /// Its budgets.
    pub(crate) limits: WireLimits,
    /// The interpreter budgets of `vsh_bash`, when the host enabled it: the
    /// worker runs a nested script itself, its file accesses as kind 6
    /// frames, then its end as kind 7, answered by one [`WireReply`].
    pub(crate) bash: Option<vsh_bash::BashLimits>,
}

/// A suspension, as the worker reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum WireRequest {
    /// A typed OS call.
    Os(WireOsCall),
    /// An external function call: positional arguments as one list value,
    /// keyword arguments as one dict value.
    Function {
        /// The function's name.
        name: String,
        /// A list.
        args: WireValue,
        /// A dict.
        kwargs: WireValue,
    },
    /// A method call on a host object.
    Method {
        /// The method's name.
        name: String,
    },
    /// An undefined name.
    Lookup {
        /// The name.
        name: String,
    },
    /// Waiting on host futures.
    Futures {
        /// How many.
        pending: u64,
    },
    /// A request too large to frame: the worker sends its encoded size
    /// instead, and the parent charges it as one write call that size.
    Oversized {
        /// The encoded size of the request.
        bytes: u64,
    },
}

/// The parent's answer to a [`WireRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum WireReply {
    /// Resume with this value.
    Return(MontyObject),
    /// Raise this exception.
    Raise(MontyException),
    /// The name is undefined.
    Undefined,
    /// End the run; the guest cannot catch it.
    Abort(String),
}

impl From<crate::drive::Reply> for WireReply {
    fn from(reply: crate::drive::Reply) -> Self {
        use crate::drive::Reply;
        match reply {
            Reply::Return(value) => Self::Return(value),
            Reply::Raise(exception) => Self::Raise(exception),
            Reply::Undefined => Self::Undefined,
            Reply::Abort(reason) => Self::Abort(reason),
        }
    }
}

impl From<WireReply> for crate::drive::Reply {
    fn from(reply: WireReply) -> Self {
        match reply {
            WireReply::Return(value) => Self::Return(value),
            WireReply::Raise(exception) => Self::Raise(exception),
            WireReply::Undefined => Self::Undefined,
            WireReply::Abort(reason) => Self::Abort(reason),
        }
    }
}

/// How the run ended, as the worker reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum WireFinish {
    /// The program's value.
    Value(WireValue),
    /// An uncaught exception, already bounded by `max_exception_bytes`.
    Exception {
        /// Its Python type name.
        type_name: String,
        /// Its message.
        message: String,
        /// Its traceback.
        traceback: String,
    },
    /// A limit the worker enforced (output, duration, memory, result size).
    Limit {
        /// [`LimitKind`]'s tag.
        tag: u8,
        /// What the run needed.
        attempted: u64,
        /// The limit.
        max: u64,
    },
    /// The run ended because the parent answered [`WireReply::Abort`].
    Aborted,
}

impl WireFinish {
    pub(crate) fn limit(limit: LimitExceeded) -> Self {
        Self::Limit { tag: limit.limit.tag(), attempted: limit.attempted, max: limit.max }
    }
}

/// A Bash program to run, with the memory budget the worker's allocator applies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BashRequest {
    /// The run.
    pub(crate) run: vsh_bash::BashRun,
    /// `max_memory_bytes`.
    pub(crate) memory_bytes: u64,
    /// `max_io_call_bytes`: a write larger than this is sent as its size.
    pub(crate) io_call_bytes: u64,
}

/// A Bash program's file access, as the worker reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum BashCall {
    /// The access.
    Fs(vsh_bash::FsRequest),
    /// A write or append of this many bytes, too large to frame: the parent
    /// charges it as one write call that size.
    Oversized {
        /// The data's size.
        bytes: u64,
    },
}

/// The worker's answer to a reset.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ResetDone {
    /// Bytes its allocator counts live after the reset.
    pub(crate) live_bytes: u64,
}

/// The limit kinds a worker may report in [`WireFinish::Limit`]; anything
/// else is the parent's to decide.
pub(crate) const WORKER_LIMITS: [LimitKind; 4] =
    [LimitKind::OutputBytes, LimitKind::Duration, LimitKind::Memory, LimitKind::ResultBytes];

/// The parent's bound for each kind of frame the worker sends, for one
/// request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameCaps {
    pub(crate) suspend: u64,
    pub(crate) finished: u64,
    pub(crate) bash_finished: u64,
}

impl FrameCaps {
    /// The bounds for a request under `limits`.
    pub(crate) fn for_limits(limits: &ExecutionLimits) -> Self {
        let suspend = limits
            .max_io_call_bytes
            .saturating_add(limits.max_path_bytes.saturating_mul(2))
            .saturating_add(FRAME_SLACK)
            .min(HARD_MAX_FRAME);
        let finished =
            limits.max_result_bytes.max(limits.max_exception_bytes).saturating_add(FRAME_SLACK).min(HARD_MAX_FRAME);
        let bash_finished = limits.max_output_bytes.saturating_mul(2).saturating_add(FRAME_SLACK).min(HARD_MAX_FRAME);
        Self { suspend, finished, bash_finished }
    }

    /// Before any request: only the handshake.
    pub(crate) fn idle() -> Self {
        Self { suspend: 0, finished: 0, bash_finished: 0 }
    }

    /// The bound for a frame of `kind`, or `None` for a kind the worker never
    /// sends.
    pub(crate) fn bound(&self, frame_kind: u8) -> Option<u64> {
        match frame_kind {
            kind::HELLO => Some(4 << 10),
            kind::OUTPUT => Some(OUTPUT_CHUNK as u64 + 16),
            kind::SUSPEND | kind::BASH_CALL => Some(self.suspend),
            kind::FINISHED => Some(self.finished),
            kind::BASH_FINISHED => Some(self.bash_finished),
            kind::RESET_DONE => Some(64),
            _ => None,
        }
    }
}

/// Encode a message body.
pub(crate) fn encode<T: Serialize>(message: &T) -> io::Result<Vec<u8>> {
    postcard::to_allocvec(message).map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error.to_string()))
}

/// Write one frame of an already encoded body, and flush.
pub(crate) fn write_frame(out: &mut impl Write, frame_kind: u8, body: &[u8]) -> io::Result<()> {
    queue_frame(out, frame_kind, body)?;
    out.flush()
}

/// Write one frame of an already encoded body into `out`'s buffer, without
/// flushing: for a frame that needs no answer (printed text), which then
/// goes out with the next frame in one write.
pub(crate) fn queue_frame(out: &mut impl Write, frame_kind: u8, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|len| u64::from(*len) <= HARD_MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame larger than the protocol allows"))?;
    let mut header = [0u8; HEADER_BYTES];
    header[..4].copy_from_slice(&len.to_le_bytes());
    header[4] = frame_kind;
    out.write_all(&header)?;
    out.write_all(body)
}

/// Encode `message` and write it as one frame.
pub(crate) fn send<T: Serialize>(out: &mut impl Write, frame_kind: u8, message: &T) -> io::Result<()> {
    write_frame(out, frame_kind, &encode(message)?)
}

/// One frame's header: its kind and body length. `None` at a clean end of
/// stream (no byte of a new frame).
pub(crate) fn read_header(input: &mut impl Read) -> io::Result<Option<(u8, u64)>> {
    let mut header = [0u8; HEADER_BYTES];
    let mut filled = 0;
    while filled < HEADER_BYTES {
        match input.read(&mut header[filled..]) {
            Ok(0) if filled == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "stream ended inside a frame header")),
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    Ok(Some((header[4], u64::from(len))))
}

/// Read a body of `len` bytes (already checked against its bound).
pub(crate) fn read_body(input: &mut impl Read, len: u64) -> io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "frame too large"))?;
    let mut body = vec![0u8; len];
    input.read_exact(&mut body)?;
    Ok(body)
}

/// Decode a whole body as `T`.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    match postcard::take_from_bytes::<T>(body) {
        Ok((message, [])) => Ok(message),
        Ok((_, rest)) => Err(format!("{} trailing bytes after the message", rest.len())),
        Err(error) => Err(format!("undecodable message: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_headers_come_first() {
        let mut buffer = Vec::new();
        send(&mut buffer, kind::OUTPUT, &"hello".to_owned()).unwrap();
        let mut reader = buffer.as_slice();
        let (frame_kind, len) = read_header(&mut reader).unwrap().unwrap();
        assert_eq!(frame_kind, kind::OUTPUT);
        let body = read_body(&mut reader, len).unwrap();
        assert_eq!(decode::<String>(&body).unwrap(), "hello");
        assert!(read_header(&mut reader).unwrap().is_none(), "clean end");
        assert!(read_header(&mut &[1u8, 0][..]).is_err(), "a cut header is an error");
        assert!(decode::<u8>(&[1, 2]).unwrap_err().contains("trailing"));
    }

    #[test]
    fn bounds_follow_the_budgets_and_unknown_kinds_have_none() {
        let limits = ExecutionLimits::default();
        let caps = FrameCaps::for_limits(&limits);
        assert_eq!(caps.bound(kind::SUSPEND), Some((4 << 20) + (32 << 10) + (64 << 10)));
        assert_eq!(caps.bound(kind::FINISHED), Some((1 << 20) + (64 << 10)));
        assert_eq!(caps.bound(kind::RUN), None);
        assert_eq!(caps.bound(0), None);
        let huge = ExecutionLimits { max_io_call_bytes: u64::MAX, ..ExecutionLimits::default() };
        assert_eq!(FrameCaps::for_limits(&huge).suspend, HARD_MAX_FRAME);
        let identity = build_identity();
        assert!(identity.contains(BUILD_ID) && identity.contains("monty 0.0.23"), "{identity}");
    }
}
