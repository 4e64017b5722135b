//! One live worker process as the parent holds it: its pipes, framed on the
//! parent's own thread as it asks for the next frame (every header checked
//! against the current bounds before allocating; no reader thread, so a
//! frame costs no hop between threads: on a machine whose idle CPUs halt,
//! each hop is a wake-up of tens of microseconds), and a watchdog thread that
//! kills it at a wall-clock deadline even while the parent is blocked reading
//! from or writing to it.
//!
//! Dropping a [`WorkerProcess`] kills the process and reaps it before
//! returning, so a discarded worker is gone by the time its pool slot is
//! released. The watchdog is not joined: it ends on its own when told.

use std::collections::BTreeSet;
use std::io::{self, BufReader, BufWriter};
use std::os::fd::AsFd as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use vsh_sandbox::{ConfinedCommand, SandboxPolicy, ToolContext};

use crate::error::WorkerError;
use crate::worker::protocol::{self, FrameCaps, Hello, MAGIC, PROTOCOL_VERSION, kind};

/// How long the parent waits for a worker that closed its stdout to exit
/// before it kills it.
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// Stack size of the helper threads (they only copy bytes and wait).
const HELPER_STACK: usize = 128 << 10;

/// Lock, recovering from poisoning (the data stays consistent: every
/// critical section here is a few assignments).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What reading the worker's stdout gives.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A frame within its bound.
    Frame(u8, Vec<u8>),
    /// A frame announced larger than its bound; reading stopped.
    TooLarge {
        /// Its kind.
        kind: u8,
        /// Its announced length.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// A frame of a kind the worker never sends; reading stopped.
    UnknownKind(u8),
    /// The stream ended (cleanly, or inside a frame); reading stopped.
    Closed,
}

/// The watchdog's shared state.
#[derive(Debug, Default)]
struct WatchState {
    deadline: Option<Instant>,
    fired: bool,
    shutdown: bool,
    /// How long the watchdog thread sleeps, if it does: arming it wakes it
    /// only when it would otherwise sleep past the new deadline.
    asleep: Asleep,
}

/// Whether and until when the watchdog thread sleeps.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Asleep {
    /// It is not asleep: it reads the state before it sleeps again.
    #[default]
    Awake,
    /// Until it is woken.
    Forever,
    /// Until this instant, or until it is woken.
    Until(Instant),
}

#[derive(Debug, Default)]
struct Watchdog {
    state: Mutex<WatchState>,
    changed: Condvar,
}

/// The process ids of a pool's live workers.
pub(crate) type Registry = Arc<Mutex<BTreeSet<u32>>>;

/// A running, greeted worker.
#[derive(Debug)]
pub(crate) struct WorkerProcess {
    child: Arc<Mutex<Child>>,
    pid: u32,
    registry: Registry,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Reading stopped (a closed stream, a frame out of bounds): every
    /// later read is `Disconnected`.
    ended: bool,
    caps: FrameCaps,
    watchdog: Arc<Watchdog>,
    /// The `max_memory_bytes` its address-space limit was sized for.
    pub(crate) memory_class: u64,
    /// Live allocator bytes it reported before any run.
    pub(crate) baseline_live: u64,
    /// Runs it has served.
    pub(crate) runs: u32,
}

/// The worker binary and the arguments it is started with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Launch<'a> {
    /// The binary.
    pub(crate) program: &'a Path,
    /// Its arguments.
    pub(crate) args: &'a [String],
}

/// Run `job` on the one thread workers are spawned from, which lives as
/// long as the process: `PR_SET_PDEATHSIG` fires when the thread that
/// forked a child ends, and a pool spawns from whichever thread asks (a
/// server's request threads come and go), while a worker must die with the
/// process and only then.
fn on_spawner_thread<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Result<T, WorkerError> {
    type Job = Box<dyn FnOnce() + Send>;
    static SPAWNER: std::sync::OnceLock<Option<Mutex<std::sync::mpsc::Sender<Job>>>> = std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        thread::Builder::new()
            .name("vsh-monty-spawner".to_owned())
            .stack_size(HELPER_STACK)
            .spawn(move || {
                for job in queue {
                    job();
                }
            })
            .ok()
            .map(|_| Mutex::new(jobs))
    });
    let unavailable = || WorkerError::Transport { source: io::Error::other("the worker spawner thread is gone") };
    let spawner = spawner.as_ref().ok_or_else(unavailable)?;
    let (done, result) = std::sync::mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = done.send(job());
    });
    lock(spawner).send(job).map_err(|_| unavailable())?;
    result.recv().map_err(|_| unavailable())
}

impl WorkerProcess {
    /// Spawn the worker at `program` confined by `policy`, and wait up to
    /// `handshake` for a greeting carrying `identity`. Its pid is in
    /// `registry` until it has been reaped.
    pub(crate) fn spawn(
        registry: &Registry,
        launch: Launch<'_>,
        context: &ToolContext,
        policy: Arc<SandboxPolicy>,
        memory_class: u64,
        handshake: Duration,
        identity: &str,
    ) -> Result<Self, WorkerError> {
        let Launch { program, args } = launch;
        let program_text = program.to_str().ok_or_else(|| WorkerError::Config {
            reason: format!("worker path {} is not valid UTF-8", program.display()),
        })?;
        let (program_text, args, context) = (program_text.to_owned(), args.to_vec(), context.clone());
        // Killed when the process that spawned it dies (a vsh killed
        // outright, by SIGKILL or the OOM killer), as commands are: from the
        // spawner thread, which lives as long as the process, since the
        // kernel ties the signal to the spawning thread.
        let spawned = on_spawner_thread(move || {
            ConfinedCommand::new(&program_text)
                .args(&args)
                .sandbox_policy(policy)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .current_dir("/")
                .new_process_group()
                .kill_when_parent_ends()
                .spawn(&context)
                .map(vsh_sandbox::ConfinedChild::into_child)
        })
        .and_then(|spawned| spawned.map_err(|source| WorkerError::Spawn { source }))?;
        let mut child = spawned;
        let pid = child.id();
        lock(registry).insert(pid);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            lock(registry).remove(&pid);
            return Err(WorkerError::Transport { source: io::Error::other("worker pipes missing") });
        };
        let child = Arc::new(Mutex::new(child));
        let watchdog = Arc::new(Watchdog::default());
        let mut worker = WorkerProcess {
            child: Arc::clone(&child),
            pid,
            registry: Arc::clone(registry),
            stdin: BufWriter::new(stdin),
            stdout: BufReader::new(stdout),
            ended: false,
            caps: FrameCaps::idle(),
            watchdog: Arc::clone(&watchdog),
            memory_class,
            baseline_live: 0,
            runs: 0,
        };
        let guard = thread::Builder::new()
            .name("vsh-monty-watchdog".to_owned())
            .stack_size(HELPER_STACK)
            .spawn(move || watch(&watchdog, &child));
        if let Err(source) = guard {
            return Err(WorkerError::Transport { source });
        }
        worker.baseline_live = worker.handshake(handshake, identity)?;
        Ok(worker)
    }

    /// Read and check the greeting; the worker's live allocator bytes.
    fn handshake(&mut self, wait: Duration, identity: &str) -> Result<u64, WorkerError> {
        let failed = |reason: String| WorkerError::Handshake { reason };
        let body = match self.recv(wait) {
            Ok(Incoming::Frame(kind::HELLO, body)) => body,
            Ok(Incoming::Frame(other, _)) => {
                return Err(failed(format!("expected a greeting, got a frame of kind {other}")));
            }
            Ok(Incoming::TooLarge { kind, len, max }) => return Err(WorkerError::FrameTooLarge { kind, len, max }),
            Ok(Incoming::UnknownKind(other)) => return Err(failed(format!("frame of unknown kind {other}"))),
            Ok(Incoming::Closed) | Err(RecvTimeoutError::Disconnected) => {
                return Err(failed("the worker exited before greeting".to_owned()));
            }
            Err(RecvTimeoutError::Timeout) => return Err(failed(format!("no greeting within {wait:?}"))),
        };
        let hello: Hello = protocol::decode(&body).map_err(failed)?;
        if hello.magic != MAGIC {
            return Err(failed("bad magic".to_owned()));
        }
        if hello.protocol != PROTOCOL_VERSION {
            return Err(failed(format!("protocol {} where {PROTOCOL_VERSION} was expected", hello.protocol)));
        }
        if hello.identity != identity {
            return Err(WorkerError::Identity { expected: identity.to_owned(), found: hello.identity });
        }
        Ok(hello.live_bytes)
    }

    /// Bound the frames of the coming request.
    pub(crate) fn set_caps(&mut self, caps: FrameCaps) {
        self.caps = caps;
    }

    /// Send one frame.
    pub(crate) fn send(&mut self, frame_kind: u8, body: &[u8]) -> Result<(), WorkerError> {
        protocol::write_frame(&mut self.stdin, frame_kind, body).map_err(|source| WorkerError::Transport { source })
    }

    /// The next frame, waiting at most `timeout` for it to begin (once a
    /// frame has begun, the rest is read as it comes: a worker that stops in
    /// the middle of one is ended by the watchdog). After a closed stream or
    /// a frame out of bounds, `Disconnected`.
    pub(crate) fn recv(&mut self, timeout: Duration) -> Result<Incoming, RecvTimeoutError> {
        if self.ended {
            return Err(RecvTimeoutError::Disconnected);
        }
        if self.stdout.buffer().is_empty() {
            match vsh_sandbox::wait_readable_spinning(self.stdout.get_ref().as_fd(), protocol::ANSWER_SPIN, timeout) {
                Ok(true) => {}
                Ok(false) => return Err(RecvTimeoutError::Timeout),
                Err(_) => {
                    self.ended = true;
                    return Ok(Incoming::Closed);
                }
            }
        }
        let incoming = read_frame(&mut self.stdout, &self.caps);
        self.ended = !matches!(incoming, Incoming::Frame(..));
        Ok(incoming)
    }

    /// Kill the worker at `deadline` unless disarmed first.
    pub(crate) fn arm(&self, deadline: Instant) {
        let mut state = lock(&self.watchdog.state);
        state.deadline = Some(deadline);
        state.fired = false;
        // A watchdog that wakes by this deadline anyway (a run right after
        // another, whose deadline it still sleeps toward) reads the new one
        // then: waking it now would cost a thread switch on every run.
        let wakes_in_time = match state.asleep {
            Asleep::Awake => true,
            Asleep::Until(until) => until <= deadline,
            Asleep::Forever => false,
        };
        if !wakes_in_time {
            self.watchdog.changed.notify_all();
        }
    }

    /// Whether the watchdog fired (the deadline stays armed).
    pub(crate) fn fired(&self) -> bool {
        lock(&self.watchdog.state).fired
    }

    /// Cancel the armed deadline; whether the watchdog already fired.
    pub(crate) fn disarm(&self) -> bool {
        let mut state = lock(&self.watchdog.state);
        state.deadline = None;
        state.fired
    }

    /// Whether no frame is waiting (nor the end of the stream): an idle
    /// worker has nothing to say, so one that does is not reused.
    pub(crate) fn is_quiet(&mut self) -> bool {
        if self.ended || !self.stdout.buffer().is_empty() {
            return false;
        }
        matches!(vsh_sandbox::wait_readable(self.stdout.get_ref().as_fd(), Duration::ZERO), Ok(false))
    }

    /// Kill the process now.
    pub(crate) fn kill(&self) {
        let _ = lock(&self.child).kill();
    }

    /// How the process ended: waits up to a short grace for it to exit on its
    /// own (it closed its stdout), then kills it.
    pub(crate) fn exit_status(&self) -> Option<ExitStatus> {
        let started = Instant::now();
        loop {
            let mut child = lock(&self.child);
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if started.elapsed() < EXIT_WAIT => {}
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    return child.wait().ok();
                }
            }
            drop(child);
            thread::sleep(Duration::from_millis(2));
        }
    }
}

/// The exit code and the signal of an ended process, as far as known.
pub(crate) fn describe_exit(status: Option<ExitStatus>) -> (Option<i32>, Option<i32>) {
    status.map_or((None, None), |status| (status.code(), status.signal()))
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        {
            let mut child = lock(&self.child);
            let _ = child.kill();
            let _ = child.wait();
        }
        lock(&self.registry).remove(&self.pid);
        let mut state = lock(&self.watchdog.state);
        state.shutdown = true;
        self.watchdog.changed.notify_all();
    }
}

/// Read one frame of the worker's stdout, checking its header against `caps`
/// before allocating its body.
fn read_frame(input: &mut BufReader<ChildStdout>, caps: &FrameCaps) -> Incoming {
    match protocol::read_header(input) {
        Ok(None) | Err(_) => Incoming::Closed,
        Ok(Some((frame_kind, len))) => match caps.bound(frame_kind) {
            None => Incoming::UnknownKind(frame_kind),
            Some(max) if len > max => Incoming::TooLarge { kind: frame_kind, len, max },
            Some(_) => match protocol::read_body(input, len) {
                Ok(body) => Incoming::Frame(frame_kind, body),
                Err(_) => Incoming::Closed,
            },
        },
    }
}

/// The watchdog thread: kill the child when an armed deadline passes.
fn watch(watchdog: &Watchdog, child: &Mutex<Child>) {
    let mut state = lock(&watchdog.state);
    loop {
        if state.shutdown {
            return;
        }
        match state.deadline {
            None => {
                state.asleep = Asleep::Forever;
                state = watchdog.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
            }
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    state.deadline = None;
                    state.fired = true;
                    drop(state);
                    let _ = lock(child).kill();
                    state = lock(&watchdog.state);
                } else {
                    state.asleep = Asleep::Until(deadline);
                    state =
                        watchdog.changed.wait_timeout(state, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
                }
            }
        }
        state.asleep = Asleep::Awake;
    }
}
