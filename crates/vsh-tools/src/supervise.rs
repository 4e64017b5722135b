//! Supervision of one command: wait for it under a deadline and a cancellation
//! token, read its output within caps, and make sure its whole process group is
//! gone before returning.
//!
//! Three parts run together:
//!
//! - **The waiter**, a blocking thread that owns the [`Child`]. It waits for
//!   the leader to exit *without reaping it* (`waitid(P_PID, WEXITED |
//!   WNOWAIT)`), reports that, and then waits to be released. Only then does it
//!   send the group a last `SIGKILL` and reap the leader. While the leader is an
//!   unreaped zombie its pid, which is also the group id, cannot be reused, so
//!   every `killpg` in this module reaches our group and nothing else.
//! - **The controller** (this task): it waits for the leader's exit, the
//!   deadline or the token. On a deadline or cancellation it sends the group
//!   `SIGTERM`, waits up to the kill grace for the leader, then sends `SIGKILL`
//!   to the group whether or not the leader is still there. In every case it
//!   then releases the waiter, which kills the group once more (background jobs
//!   of a command that exited normally die here) and reaps.
//! - **The readers** of stdout and stderr, async pipe reads into capped
//!   buffers. They run until both pipes close, but once the controller is done
//!   (the group is dead) they get at most [`OUTPUT_DRAIN`]: a process that left
//!   the group and kept a pipe open cannot delay the result.
//!
//! If the supervising future is dropped half-way, a guard kills the group and
//! releases the waiter, which reaps the leader on its own.
//!
//! # Why the group holds: seccomp, not a subreaper
//!
//! A process group can be left with `setsid` or `setpgid`, and a process that
//! did so would survive `killpg`. Every command is therefore spawned through
//! `vsh_sandbox::ConfinedCommand`, whose seccomp filter (with `no_new_privs`)
//! denies both calls in every policy, `SandboxPolicy::group_only` included: no
//! descendant can leave, so the group kill reaches the whole tree.
//!
//! `PR_SET_CHILD_SUBREAPER` is deliberately not used as a second line. It is an
//! attribute of the whole host process, not of one run: every orphan of every
//! child the embedding application has (other `Host` runs, unrelated
//! subprocesses, other tests in the same binary) would be re-parented to it, and
//! reaping those orphans needs `waitpid(-1)`, which would steal the exit status
//! of children owned by other `Child` handles. A per-run subreaper needs a
//! per-run supervisor process (a re-exec trampoline), which a library cannot
//! install in its host's `main`. Should a descendant still escape (a sandbox
//! policy that allowed it), the readers' drain bound keeps this call from
//! hanging; the escaped process is then not killed.
//!
//! # Cost
//!
//! The waiter occupies one thread of tokio's blocking pool for the lifetime of
//! the command (waiting on a pidfd instead would need tokio's `net` feature).

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{Signal, WaitId, WaitIdOptions};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::Capture;
use super::spawn::{GroupChild, GroupId};
use super::{ExecError, ExecLimits, ExecOutput};

/// How long the readers may keep reading once the group is dead.
pub(crate) const OUTPUT_DRAIN: Duration = Duration::from_millis(500);

/// How long the leader gets to die after `SIGKILL` (it can only be slower in
/// uninterruptible sleep); past it the call returns without an exit status.
const DEATH_AFTER_KILL: Duration = Duration::from_secs(5);

/// The read buffer of each output pipe.
const READ_CHUNK: usize = 16 * 1024;

/// What a supervision is bounded by.
pub(crate) struct Plan {
    /// The program, for errors.
    pub(crate) program: std::path::PathBuf,
    /// When the command times out.
    pub(crate) deadline: Instant,
    /// Caps and grace.
    pub(crate) limits: ExecLimits,
    /// When the request started, for [`ExecOutput::duration`].
    pub(crate) started: std::time::Instant,
}

/// `timeout` from now, or a century from now if that overflows.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_hours(100 * 365 * 24))
}

/// How the command ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ending {
    Exited,
    TimedOut,
    Cancelled,
}

/// Supervise `spawned` to the end. See the module documentation.
pub(crate) async fn supervise(
    spawned: GroupChild,
    plan: Plan,
    cancel: &CancellationToken,
) -> Result<ExecOutput, ExecError> {
    let (mut child, group) = spawned.into_parts();
    let pipes = match (child.stdout.take(), child.stderr.take()) {
        (Some(stdout), Some(stderr)) => tokio::process::ChildStdout::from_std(stdout)
            .and_then(|stdout| Ok((stdout, tokio::process::ChildStderr::from_std(stderr)?))),
        _ => Err(std::io::Error::other("the child's output is not piped")),
    };
    let (stdout, stderr) = match pipes {
        Ok(pipes) => pipes,
        Err(source) => {
            // Dropping an unreleased reaper kills the group; its waiter then reaps the leader.
            drop(GroupReaper::start(child, group));
            return Err(ExecError::Spawn { program: plan.program, source });
        }
    };

    let mut out = Capture::new(plan.limits.max_output_bytes);
    let mut err = Capture::new(plan.limits.max_output_bytes);
    let (ending, status) = {
        let readers = async {
            tokio::join!(pump(stdout, &mut out), pump(stderr, &mut err));
        };
        let control = control(GroupReaper::start(child, group), &plan, cancel);
        tokio::pin!(readers, control);
        let mut readers_done = false;
        let result = loop {
            tokio::select! {
                result = &mut control => break result,
                () = &mut readers, if !readers_done => readers_done = true,
            }
        };
        if !readers_done {
            let _ = tokio::time::timeout(OUTPUT_DRAIN, &mut readers).await;
        }
        result
    };

    let out = out.finish();
    let err = err.finish();
    Ok(ExecOutput {
        exit_code: status.and_then(|status| status.code()),
        signal: status.and_then(|status| status.signal()),
        truncated: out.truncated || err.truncated,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        stdout_bytes: out.total,
        stderr_bytes: err.total,
        stdout: out.text,
        stderr: err.text,
        timed_out: ending == Ending::TimedOut,
        cancelled: ending == Ending::Cancelled,
        duration: plan.started.elapsed(),
    })
}

/// Wait for the leader, the deadline or the token; escalate; release the
/// waiter and collect the exit status.
async fn control(mut reaper: GroupReaper, plan: &Plan, cancel: &CancellationToken) -> (Ending, Option<ExitStatus>) {
    let group = reaper.group;
    let mut exited = false;
    let ending = tokio::select! {
        biased;
        _ = &mut reaper.exited => {
            exited = true;
            Ending::Exited
        }
        () = cancel.cancelled() => Ending::Cancelled,
        () = tokio::time::sleep_until(plan.deadline) => Ending::TimedOut,
    };
    if !exited {
        group.signal(Signal::TERM);
        exited = tokio::time::timeout(plan.limits.kill_grace, &mut reaper.exited).await.is_ok();
        // The rest of the group may ignore SIGTERM, or have outlived its leader.
        group.signal(Signal::KILL);
        if !exited {
            exited = tokio::time::timeout(DEATH_AFTER_KILL, &mut reaper.exited).await.is_ok();
        }
    }
    let waiter = reaper.release();
    let status = if exited {
        match waiter.await {
            Ok(Ok(status)) => Some(status),
            Ok(Err(_)) | Err(_) => None,
        }
    } else {
        // The leader is stuck; the waiter reaps it whenever it dies.
        None
    };
    (ending, status)
}

/// Read `pipe` to its end into `capture`. A read error ends the stream.
async fn pump(mut pipe: impl AsyncRead + Unpin, capture: &mut Capture) {
    let mut buffer = vec![0_u8; READ_CHUNK];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) => return,
            Ok(count) => capture.push(&buffer[..count]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The controller's side of the waiter thread. Dropping it before
/// [`GroupReaper::release`] kills the group and lets the waiter reap alone.
struct GroupReaper {
    group: GroupId,
    /// Fires when the leader has exited (it is not reaped yet).
    exited: oneshot::Receiver<()>,
    /// Sending (or dropping) lets the waiter kill the group once more and reap.
    release: Option<oneshot::Sender<()>>,
    waiter: Option<tokio::task::JoinHandle<std::io::Result<ExitStatus>>>,
}

impl GroupReaper {
    fn start(child: Child, group: GroupId) -> Self {
        let (exited_tx, exited) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        let waiter = tokio::task::spawn_blocking(move || wait_then_reap(child, group, exited_tx, release_rx));
        Self { group, exited, release: Some(release), waiter: Some(waiter) }
    }

    /// Let the waiter finish; its handle yields the exit status.
    fn release(mut self) -> tokio::task::JoinHandle<std::io::Result<ExitStatus>> {
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
        self.waiter.take().expect("the waiter handle is taken once")
    }
}

impl Drop for GroupReaper {
    fn drop(&mut self) {
        if self.release.is_some() {
            // Abandoned mid-run: the leader is unreaped (the waiter holds it until
            // released), so the group id is still ours.
            self.group.signal(Signal::KILL);
        }
    }
}

/// The waiter thread: see the module documentation.
fn wait_then_reap(
    mut child: Child,
    group: GroupId,
    exited: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
) -> std::io::Result<ExitStatus> {
    // Returns once the leader has exited, leaving a zombie (or is gone already):
    // either way, move on. Only an interruption is retried.
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
    while let Err(Errno::INTR) = rustix::process::waitid(WaitId::Pid(group.leader()), options) {}
    let _ = exited.send(());
    // Released, or the controller is gone: both mean no more signals from it.
    let _ = release.blocking_recv();
    group.signal(Signal::KILL);
    child.wait()
}
