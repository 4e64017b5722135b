//! Commands on the host: [`Host::exec`] (through a shell) and
//! [`Host::run_capture`] (explicit argv, no shell), with their request, limit
//! and output types.
//!
//! Both start the program in a fresh process group, with stdin on `/dev/null`,
//! piped stdout and stderr, and an environment that starts **empty**: only
//! `PATH=/usr/bin:/bin` ([`FIXED_PATH`]) and, for `exec`, the request's own
//! variables reach it. Supervision (timeout, cancellation, output caps and the
//! kill of the whole process tree) is in `supervise`; the spawn itself, under
//! the sandbox, in `spawn`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::capture::Capture;
use super::image::{ImageCommand, ImageLaunch};
use super::spawn::Launch;
use super::{ExecError, Host, PathPolicy, blocking, supervise};

/// The `PATH` every command starts with. A request may override it.
pub const FIXED_PATH: &str = "/usr/bin:/bin";

/// Timeouts, output caps and kill grace of commands.
///
/// Defaults: 10 s timeout, at most 10 min, 30 000 bytes per stream, 2 s grace.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct ExecLimits {
    /// The timeout of a request that names none.
    pub default_timeout: Duration,
    /// The longest timeout; longer requested (and default) timeouts are clamped to it.
    pub max_timeout: Duration,
    /// Bytes kept per stream (stdout and stderr separately): the first half
    /// and the last half of the stream.
    pub max_output_bytes: usize,
    /// After a timeout or cancellation, how long the group has between
    /// `SIGTERM` and `SIGKILL` (cut short when the leader exits).
    pub kill_grace: Duration,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(10),
            max_timeout: Duration::from_mins(10),
            max_output_bytes: 30_000,
            kill_grace: Duration::from_secs(2),
        }
    }
}

impl ExecLimits {
    /// Set the default timeout.
    #[must_use]
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// Set the maximum timeout.
    #[must_use]
    pub fn with_max_timeout(mut self, timeout: Duration) -> Self {
        self.max_timeout = timeout;
        self
    }

    /// Set the bytes kept per stream.
    #[must_use]
    pub fn with_max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Set the kill grace.
    #[must_use]
    pub fn with_kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// The timeout a request gets: its own, or the default, clamped to the maximum.
    pub fn effective_timeout(&self, requested: Option<Duration>) -> Duration {
        requested.unwrap_or(self.default_timeout).min(self.max_timeout)
    }
}

/// The shell [`Host::exec`] runs a command line with.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct ShellSpec {
    /// The shell's absolute path.
    pub program: PathBuf,
    /// Run as a login shell (`-lc`, which sources profile files) instead of `-c`.
    pub login: bool,
}

impl Default for ShellSpec {
    /// `/bin/sh -c`.
    fn default() -> Self {
        Self::sh()
    }
}

impl ShellSpec {
    /// A non-login shell at `program`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self { program: program.into(), login: false }
    }

    /// `/bin/sh -c`.
    pub fn sh() -> Self {
        Self::new("/bin/sh")
    }

    /// `/bin/bash -c`.
    pub fn bash() -> Self {
        Self::new("/bin/bash")
    }

    /// Run as a login shell (`-lc`) or not (`-c`).
    #[must_use]
    pub fn with_login(mut self, login: bool) -> Self {
        self.login = login;
        self
    }

    fn flag(&self) -> &'static str {
        if self.login { "-lc" } else { "-c" }
    }
}

/// A command line for [`Host::exec`].
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct ExecRequest {
    /// The command line, given to the shell as one argument.
    pub command: String,
    /// The working directory (relative: to the workspace root). Jailed hosts
    /// refuse one outside the jail.
    pub cwd: PathBuf,
    /// The timeout; `None` for [`ExecLimits::default_timeout`]. Clamped to
    /// [`ExecLimits::max_timeout`].
    pub timeout: Option<Duration>,
    /// Environment variables granted to the command, after `PATH` (so a
    /// request can override it). Nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// The shell; `None` for the host's [`super::HostConfig::shell`].
    pub shell: Option<ShellSpec>,
}

impl ExecRequest {
    /// Run `command` in `cwd` with the default timeout, shell and no extra variables.
    pub fn new(command: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Self { command: command.into(), cwd: cwd.into(), timeout: None, env: Vec::new(), shell: None }
    }

    /// Set the timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Grant one environment variable.
    #[must_use]
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Use `shell` instead of the host's.
    #[must_use]
    pub fn with_shell(mut self, shell: ShellSpec) -> Self {
        self.shell = Some(shell);
        self
    }
}

/// What a command did. A command that failed, timed out or was cancelled is
/// still an `ExecOutput`, with the fields below telling which.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
// The flags are the seed's fields, each read on its own; an enum would not fit
// (a stream can be truncated in a command that also timed out).
#[allow(clippy::struct_excessive_bools)]
pub struct ExecOutput {
    /// The exit code, if the command exited (rather than being killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that ended the command, if one did (`SIGTERM` or `SIGKILL`
    /// after a timeout or cancellation).
    pub signal: Option<i32>,
    /// Standard output (lossy UTF-8), head and tail kept when over the cap.
    pub stdout: String,
    /// Standard error, likewise.
    pub stderr: String,
    /// Whether either stream was truncated.
    pub truncated: bool,
    /// Whether stdout was truncated.
    pub stdout_truncated: bool,
    /// Whether stderr was truncated.
    pub stderr_truncated: bool,
    /// The bytes stdout produced in all (read before the pipes closed or the
    /// reading deadline passed).
    pub stdout_bytes: u64,
    /// The bytes stderr produced in all.
    pub stderr_bytes: u64,
    /// The timeout ended the command.
    pub timed_out: bool,
    /// The cancellation token ended the command (or was cancelled before it started).
    pub cancelled: bool,
    /// From just before the spawn until the process tree was gone and the
    /// output collected.
    pub duration: Duration,
}

impl ExecOutput {
    /// Exited with code 0, neither timed out nor cancelled.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.cancelled
    }

    /// The output of a command cancelled before it was started.
    pub(crate) fn cancelled_before_start() -> Self {
        Self {
            exit_code: None,
            signal: None,
            stdout: String::new(),
            stderr: String::new(),
            truncated: false,
            stdout_truncated: false,
            stderr_truncated: false,
            stdout_bytes: 0,
            stderr_bytes: 0,
            timed_out: false,
            cancelled: true,
            duration: Duration::ZERO,
        }
    }
}

impl Host {
    /// Run `req.command` through the shell (`<shell> -c <command>`, never a
    /// login shell unless asked), capturing output under the host's limits and
    /// honoring cooperative cancellation.
    ///
    /// The command gets stdin `/dev/null`, an empty environment plus `PATH`
    /// and `req.env`, and its own process group, and it is spawned under the
    /// host's sandbox policy (by default only the part that keeps the group
    /// whole: `setsid` and `setpgid` are denied, see below).
    ///
    /// **Termination.** On timeout or cancellation the group gets `SIGTERM`,
    /// then, once the leader exits or [`ExecLimits::kill_grace`] passes,
    /// `SIGKILL`, whether or not the leader is still there. After a normal
    /// exit the group gets `SIGKILL` too, so background jobs never outlive the
    /// command. The leader is reaped only after the last signal, so the group
    /// id cannot be reused by an unrelated process while it is being
    /// signalled. A descendant cannot leave the group: the sandbox's seccomp
    /// filter denies `setsid` and `setpgid`. Output is read until the pipes
    /// close, but at most a short drain period after the group is gone, so a
    /// process still holding a pipe cannot keep this call waiting.
    ///
    /// A command that fails, times out or is cancelled is `Ok`, with
    /// [`ExecOutput`]'s fields set. A token already cancelled starts nothing.
    ///
    /// # Limitations
    ///
    /// **The path jail does not apply to what a command does.** Under the
    /// default policy a command can read and write anything its user can; only
    /// a confining [`super::HostConfig::confinement`] (Landlock, seccomp,
    /// rlimits) limits it. The jail check of the working directory catches
    /// mistakes; the directory is entered by path when the process starts.
    ///
    /// [`ExecError::Spawn`] if the shell cannot be started; [`ExecError::Cwd`]
    /// if a jailed host refuses the working directory.
    pub async fn exec(&self, req: ExecRequest, cancel: &CancellationToken) -> Result<ExecOutput, ExecError> {
        let shell = req.shell.unwrap_or_else(|| self.inner.shell.clone());
        let mut env = vec![("PATH".to_owned(), FIXED_PATH.to_owned())];
        env.extend(req.env);
        let args = vec![OsString::from(shell.flag()), OsString::from(req.command)];
        self.run(shell.program, args, req.cwd, env, req.timeout, cancel).await
    }

    /// Run `program` with exactly `args` (no shell: nothing in them is
    /// expanded), capturing output under the same limits, kill and cancel
    /// machinery as [`Host::exec`]. The environment holds only `PATH`.
    ///
    /// `program` is an absolute path or a bare name, looked up in `/usr/bin`
    /// and `/bin` (the sandbox's admission resolves it; a relative path with a
    /// `/` is refused as [`ExecError::Confinement`]). [`ExecError::Spawn`] if
    /// the program cannot be started.
    pub async fn run_capture(
        &self,
        program: &Path,
        args: &[String],
        cwd: &Path,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<ExecOutput, ExecError> {
        let env = vec![("PATH".to_owned(), FIXED_PATH.to_owned())];
        let args = args.iter().map(OsString::from).collect();
        self.run(program.to_path_buf(), args, cwd.to_path_buf(), env, timeout, cancel).await
    }

    async fn run(
        &self,
        program: PathBuf,
        args: Vec<OsString>,
        cwd: PathBuf,
        env: Vec<(String, String)>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<ExecOutput, ExecError> {
        let limits = self.inner.limits;
        let timeout = limits.effective_timeout(timeout);
        if cancel.is_cancelled() {
            return Ok(ExecOutput::cancelled_before_start());
        }
        let started = std::time::Instant::now();
        if self.image().is_some() {
            let launch = ImageLaunch { program, args, cwd, env };
            return self.run_in_image(launch, timeout, limits, started, cancel).await;
        }
        let deadline = supervise::deadline_after(timeout);
        let host = self.clone();
        let launch_program = program.clone();
        let spawned = blocking(move || {
            let cwd = host.exec_cwd(&cwd)?;
            let launch = Launch { program: launch_program, args, cwd, env };
            host.spawn_group(&launch)
        })
        .await?;
        supervise::supervise(spawned, supervise::Plan { program, deadline, limits, started }, cancel).await
    }

    /// [`Host::run`] on an image: the image runs the command (blocking, on
    /// tokio's blocking pool) and kills its tree at the timeout or soon after
    /// `cancel`; the streams are capped as on a directory.
    async fn run_in_image(
        &self,
        launch: ImageLaunch,
        timeout: Duration,
        limits: ExecLimits,
        started: std::time::Instant,
        cancel: &CancellationToken,
    ) -> Result<ExecOutput, ExecError> {
        let cancelled = Arc::new(AtomicBool::new(false));
        let host = self.clone();
        let flag = Arc::clone(&cancelled);
        let work = blocking(move || {
            let image = host.image().expect("a host over an image");
            let cwd = host.exec_cwd(&launch.cwd)?;
            let command = ImageCommand {
                program: &launch.program,
                args: &launch.args,
                cwd: &cwd,
                env: &launch.env,
                timeout,
                cancelled: &flag,
            };
            image.run(&command).map_err(|source| ExecError::Spawn { program: launch.program.clone(), source })
        });
        tokio::pin!(work);
        let ran = tokio::select! {
            ran = &mut work => ran,
            () = cancel.cancelled() => {
                cancelled.store(true, Ordering::Release);
                work.await
            }
        };
        let output = ran?;
        let capped = |bytes: &[u8]| {
            let mut capture = Capture::new(limits.max_output_bytes);
            capture.push(bytes);
            capture.finish()
        };
        let (out, err) = (capped(&output.stdout), capped(&output.stderr));
        Ok(ExecOutput {
            exit_code: output.exit_code,
            signal: output.signal,
            truncated: out.truncated || err.truncated,
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            stdout_bytes: out.total,
            stderr_bytes: err.total,
            stdout: out.text,
            stderr: err.text,
            timed_out: output.timed_out,
            cancelled: output.cancelled || cancelled.load(Ordering::Acquire),
            duration: started.elapsed(),
        })
    }

    /// The working directory of a command: made absolute like any path, and
    /// under a jailed host checked to be inside the jail.
    fn exec_cwd(&self, cwd: &Path) -> Result<PathBuf, ExecError> {
        match self.inner.path_policy {
            PathPolicy::Jailed => self.resolve_in_jail_sync(&self.inner.root, cwd).map_err(ExecError::Cwd),
            PathPolicy::Unrestricted => Ok(self.lexical(&self.inner.root, cwd)),
        }
    }
}
