//! Real commands against the image: a confined child runs `argv` in a
//! candidate workspace (vsh-candidate's FUSE filesystem, mounted only in
//! the child's namespace), and every kernel request on it is served by the
//! same guarded image as Monty's OS calls and Bash's builtins
//! ([`OsHost::serve_file_request`] through the dispatcher), on this thread:
//! so what the process reads is in the read set with Monty's facets, a
//! protected path is `EACCES` and a denial, and what it writes is in the
//! image. The child is spawned from a helper thread (its spawn returns only
//! once the child has entered the mount, which waits for this thread's
//! answers).
//!
//! The end is concluded exactly as a Bash script's: status 0 is the
//! outcome, any other status (or a signal, as `128 + signal`) is
//! [`ExecutionError::Bash`] with what the command changed; a timeout, a
//! cancellation or a budget kills the whole process group.

use std::path::PathBuf;
use std::process::{ChildStderr, ChildStdout, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::time::{Duration, Instant};

use vsh_bash::{BashEnd, Ending, FsHost as _};
use vsh_candidate::{Call, CandidateFs, ChannelBackend, Owner};
use vsh_policy::CallPolicy;
use vsh_sandbox::{ConfinedCommand, ExecGrant, FuseMount, SandboxPolicy, ToolContext, ToolError};
use vsh_types::fsproto::FsReply;
use vsh_vfs::VirtualFs;

use crate::dispatch::Dispatcher;
use crate::error::{ExecutionError, WorkerError};
use crate::host::OsHost;
use crate::interrupt::Interrupt;
use crate::limits::{ExecutionLimits, LimitExceeded, LimitKind};
use crate::run::{BashOutcome, conclude_bash};

/// The profile name of real commands in a candidate.
pub const COMMAND_PROFILE: &str = "vsh-command-confined-v1";

/// The most processes a command's user may have (`RLIMIT_NPROC`): a build
/// starts many, a fork bomb stops here. The kernel does not apply it to
/// root, so a host running as root runs commands as [`COMMAND_USER`].
pub const COMMAND_PROCESSES: u64 = 256;

/// The uid and gid a command runs as under a root host: not `nobody`, which
/// the Monty workers are, so the two never share a process count
/// (`RLIMIT_NPROC` counts per user) and a command cannot signal a worker.
pub const COMMAND_USER: (u32, u32) = (65_533, 65_533);

/// How long serving may go on after the command's process group is gone
/// (the kernel delivering the last releases) before the run is failed.
const DRAIN: Duration = Duration::from_secs(5);

/// What a command run needs besides the image: where its candidate is
/// mounted and what reaches its environment.
#[derive(Debug, Clone)]
pub struct CommandConfig {
    /// A directory of the caller's own (in vsh's data directory) that holds
    /// an empty directory `root`, the mount point, and nothing else: it is
    /// what the child's Landlock rule grants (Landlock ignores a rule on a
    /// covered mount point itself).
    pub run_dir: PathBuf,
    /// The environment: exactly these variables (`PATH` included).
    pub env: Vec<(String, String)>,
}

impl CommandConfig {
    /// A run in `run_dir`, with `PATH=/usr/local/bin:/usr/bin:/bin`,
    /// `HOME=/tmp`, `LANG=C.UTF-8` and nothing else.
    pub fn new(run_dir: impl Into<PathBuf>) -> Self {
        Self {
            run_dir: run_dir.into(),
            env: vec![
                ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
                ("HOME".to_owned(), "/tmp".to_owned()),
                ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ],
        }
    }

    /// The mount point: `root` in the run directory.
    pub fn mountpoint(&self) -> PathBuf {
        self.run_dir.join("root")
    }
}

/// `EIO`: the answer to a request the run no longer serves.
const EIO: i32 = 5;

fn tool_error(source: ToolError) -> ExecutionError {
    ExecutionError::Worker { source: WorkerError::Spawn { source } }
}

fn setup_error(stage: &'static str, source: std::io::Error) -> ExecutionError {
    tool_error(ToolError::Setup { stage, source })
}

/// Read all of `stream`, keeping at most `keep` bytes; the count is of everything.
fn capture(mut stream: impl std::io::Read, keep: u64) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut total = 0_u64;
    let mut chunk = [0_u8; 16 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => {
                total += read as u64;
                let room = usize::try_from(keep.saturating_sub(kept.len() as u64)).unwrap_or(usize::MAX);
                kept.extend_from_slice(&chunk[..read.min(room)]);
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, total)
}

/// The exit code a shell reports for `status`.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// What the supervising thread waits for.
enum Event {
    /// A kernel request on the candidate.
    Call(Call),
    /// The spawn returned: the process group and the output streams, or why not.
    Spawned(Result<(u32, ChildStdout, ChildStderr), ToolError>),
    /// The command exited.
    Exited(std::io::Result<ExitStatus>),
    /// Serving ended: the mount is gone.
    Served,
}

/// How often a running command's deadline and cancellation are checked.
const TICK: Duration = Duration::from_millis(20);

/// Run `argv` in a candidate of `vfs` (see the module documentation).
#[expect(clippy::result_large_err, reason = "see `crate::execute`")]
#[expect(clippy::too_many_lines, reason = "one supervision loop, read top to bottom")]
pub(crate) fn run_command(
    argv: &[String],
    vfs: &mut VirtualFs,
    policy: &CallPolicy,
    limits: &ExecutionLimits,
    config: &CommandConfig,
    started: Instant,
    interrupt: &dyn Interrupt,
) -> Result<BashOutcome, ExecutionError> {
    let Some((program, arguments)) = argv.split_first() else {
        return Err(tool_error(ToolError::InvalidPolicy { reason: "a command needs a program".to_owned() }));
    };
    let mountpoint = config.mountpoint();
    let (mount, mounted) = FuseMount::open(&mountpoint).map_err(tool_error)?;
    // Never root: the process-count limit would not hold, and a root process
    // needs no permission bits. The candidate's files are the command user's.
    let (uid, gid) = if vsh_sandbox::effective_uid() == 0 {
        COMMAND_USER
    } else {
        (vsh_sandbox::effective_uid(), vsh_sandbox::effective_gid())
    };
    let mut sandbox = SandboxPolicy::new().allow_write(&config.run_dir);
    if vsh_sandbox::effective_uid() == 0 {
        sandbox = sandbox.run_as(uid, gid);
    }
    let mut child_limits = sandbox.limits().clone();
    child_limits.processes = Some(COMMAND_PROCESSES);
    let sandbox = sandbox.rlimits(child_limits);
    let (events_in, events) = sync_channel::<Event>(16);
    let backend = ChannelBackend::new(events_in.clone(), Event::Call);
    let served_in = events_in.clone();
    let serving = vsh_candidate::serve_then(CandidateFs::new(backend, Owner { uid, gid }), mounted, move || {
        let _ = served_in.send(Event::Served);
    })
    .map_err(|error| setup_error("the candidate's server", error))?;
    let mut command = ConfinedCommand::new(program.clone())
        .args(arguments)
        .current_dir(&mountpoint)
        .private_fuse_mount(mount)
        // Landlock ignores a rule on a covered mount point: the run's own
        // directory, which holds only the mount point, is granted.
        .sandbox_policy(Arc::new(sandbox))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .new_process_group();
    for (key, value) in &config.env {
        command = command.env(key, value);
    }
    let mut dispatcher = Dispatcher::new(OsHost::new(vfs, policy, limits, started), interrupt);
    let keep = limits.max_output_bytes.saturating_add(1);
    let outcome = std::thread::scope(|scope| {
        // The spawn returns only once the child is in the mount, which waits
        // for this thread's answers: it is made on a thread of its own.
        scope.spawn(move || match command.spawn(&ToolContext::new(ExecGrant::Any)) {
            Ok(mut child) => {
                let streams = child.take_stdout().zip(child.take_stderr());
                let spawned = streams.map(|(out, err)| (child.id(), out, err)).ok_or_else(|| ToolError::Setup {
                    stage: "pipes",
                    source: std::io::Error::other("no output pipes"),
                });
                let _ = events_in.send(Event::Spawned(spawned));
                let _ = events_in.send(Event::Exited(child.child().wait()));
            }
            Err(error) => {
                let _ = events_in.send(Event::Spawned(Err(error)));
            }
        });
        let mut group = None;
        let mut captures = Vec::new();
        let mut status = None;
        let mut served = false;
        let mut ended: Option<Result<LimitExceeded, ()>> = None;
        let mut exited_at: Option<Instant> = None;
        let kill = |group: Option<u32>| {
            if let Some(group) = group {
                let _ = vsh_sandbox::kill_process_group(group);
            }
        };
        while !(served && status.is_some()) {
            match events.recv_timeout(TICK) {
                Ok(Event::Call(call)) => {
                    let reply = dispatcher.serve(call.request.clone());
                    if reply.is_err() && ended.is_none() {
                        // The dispatcher ended the run (a budget, a cancellation, a fault).
                        ended = Some(Err(()));
                        kill(group);
                    }
                    call.answer(reply.unwrap_or(FsReply::Failed(EIO)));
                }
                Ok(Event::Spawned(Ok((pid, out, err)))) => {
                    group = Some(pid);
                    captures.push(scope.spawn(move || capture(out, keep)));
                    captures.push(scope.spawn(move || capture(err, keep)));
                    if ended.is_some() {
                        kill(group);
                    }
                }
                Ok(Event::Spawned(Err(error))) => return Err(tool_error(error)),
                Ok(Event::Exited(exited)) => {
                    status = Some(exited.map_err(|error| setup_error("wait", error))?);
                    // The command is over: whatever it left running goes with it.
                    kill(group);
                    exited_at = Some(Instant::now());
                }
                Ok(Event::Served) => served = true,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
            if status.is_none() && ended.is_none() {
                if started.elapsed() > limits.max_duration {
                    let limit = LimitExceeded {
                        limit: LimitKind::Duration,
                        attempted: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        max: u64::try_from(limits.max_duration.as_millis()).unwrap_or(u64::MAX),
                    };
                    ended = Some(Ok(limit));
                    kill(group);
                } else if dispatcher.interrupted() {
                    ended = Some(Err(()));
                    kill(group);
                }
            }
            if exited_at.is_some_and(|at| at.elapsed() > DRAIN) {
                return Err(setup_error(
                    "unmount",
                    std::io::Error::other("the candidate stayed mounted after the command's processes were gone"),
                ));
            }
        }
        let mut streams = captures.into_iter().map(|thread| thread.join().map(|(kept, _)| kept).unwrap_or_default());
        let stdout = streams.next().unwrap_or_default();
        let stderr = streams.next().unwrap_or_default();
        Ok((status, ended, stdout, stderr))
    });
    let _ = serving.join();
    let (status, ended, stdout, stderr) = outcome?;
    let end = if let Some(Ok(limit)) = ended {
        Err(limit)
    } else {
        Ok(BashEnd { exit_code: status.map_or(-1, exit_code), stdout, stderr, ending: Ending::Completed })
    };
    conclude_bash(end, &mut dispatcher, limits, started)
}
