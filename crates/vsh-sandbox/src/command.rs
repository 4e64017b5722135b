//! [`ConfinedCommand`], the builder, and [`ConfinedChild`], what a successful spawn returns.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Arc;

use crate::context::ToolContext;
use crate::env::{env_denylisted, malformed_name};
use crate::error::ToolError;
use crate::kernel::{self, KernelSupport};
use crate::namespace::{FuseMount, PreparedMount};
use crate::policy::SandboxPolicy;
use crate::report::EnforcementReport;
use crate::setup::ChildSetup;
use crate::sys;

/// Builder for a subprocess confined by a [`ToolContext`] and a [`SandboxPolicy`].
///
/// Like [`std::process::Command`], but: the environment starts empty (only variables added with
/// [`ConfinedCommand::env`] reach the child), and [`ConfinedCommand::spawn`] admission-checks the
/// program, applies the OS sandbox, and fails closed when a restricted axis cannot meet its
/// required enforcement floor. Standard streams are inherited unless configured, as with std.
#[derive(Debug)]
pub struct ConfinedCommand {
    program: String,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    current_dir: Option<PathBuf>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
    new_process_group: bool,
    kill_when_parent_ends: bool,
    fuse_mount: Option<FuseMount>,
    policy: Arc<SandboxPolicy>,
}

impl ConfinedCommand {
    /// Start building a confined spawn of `program` (no inherited environment), under
    /// [`SandboxPolicy::new`] until [`ConfinedCommand::sandbox_policy`] says otherwise.
    ///
    /// `program` is an absolute path or a bare name looked up in
    /// [`crate::EXEC_SEARCH_PATH`]; see [`ToolContext::check_exec`].
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            envs: Vec::new(),
            current_dir: None,
            stdin: None,
            stdout: None,
            stderr: None,
            new_process_group: false,
            kill_when_parent_ends: false,
            fuse_mount: None,
            policy: Arc::new(SandboxPolicy::new()),
        }
    }

    /// Set the sandbox policy the OS backend enforces. It never adds authority to execute: that
    /// comes from the [`ToolContext`] given to [`ConfinedCommand::spawn`].
    #[must_use]
    pub fn sandbox_policy(mut self, policy: Arc<SandboxPolicy>) -> Self {
        self.policy = policy;
        self
    }

    /// Append a single argument.
    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Append several arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Grant one environment variable to the child. This is the only way a variable reaches the
    /// child: there is no ambient inheritance, not even `PATH`.
    ///
    /// A name on the loader/interpreter-hijack denylist ([`crate::env_denylisted`]) makes
    /// [`ConfinedCommand::spawn`] fail with [`ToolError::EnvDenied`]; a malformed name (empty,
    /// containing `=` or NUL) with [`ToolError::InvalidPolicy`].
    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> Self {
        self.envs.push((key.as_ref().to_owned(), val.as_ref().to_owned()));
        self
    }

    /// Set the child's working directory. Landlock does not restrict `chdir`; what the child can
    /// do there is still limited by the policy.
    #[must_use]
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.current_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Configure the child's stdin (e.g. [`Stdio::piped`] for an MCP server).
    #[must_use]
    pub fn stdin(mut self, cfg: Stdio) -> Self {
        self.stdin = Some(cfg);
        self
    }

    /// Configure the child's stdout.
    #[must_use]
    pub fn stdout(mut self, cfg: Stdio) -> Self {
        self.stdout = Some(cfg);
        self
    }

    /// Configure the child's stderr.
    #[must_use]
    pub fn stderr(mut self, cfg: Stdio) -> Self {
        self.stderr = Some(cfg);
        self
    }

    /// Start the child as leader of a fresh process group (`setpgid(0, 0)`), so a supervisor can
    /// signal the child and every descendant together. `setsid` and `setpgid` are denied inside
    /// the sandbox, so no descendant can leave the group.
    #[must_use]
    pub fn new_process_group(mut self) -> Self {
        self.new_process_group = true;
        self
    }

    /// Kill the child (`SIGKILL`) when the thread that spawns it ends, and so
    /// when the parent process dies, however it dies (`PR_SET_PDEATHSIG`):
    /// for a supervisor that spawns and waits on one thread, so its child
    /// never outlives it. (Its descendants are not; a memory group's
    /// leftovers are killed by the next group made on the host.)
    #[must_use]
    pub fn kill_when_parent_ends(mut self) -> Self {
        self.kill_when_parent_ends = true;
        self
    }

    /// Give the child a private mount namespace with `mount`'s FUSE
    /// filesystem mounted in it (see [`FuseMount`]), made before anything
    /// else; the working directory (given with
    /// [`ConfinedCommand::current_dir`]) is entered after mounting, so it
    /// may lie inside the mount. Start the server (on the
    /// [`crate::MountWaiter`]) before spawning: entering the directory waits
    /// for it.
    #[must_use]
    pub fn private_fuse_mount(mut self, mount: FuseMount) -> Self {
        self.fuse_mount = Some(mount);
        self
    }

    /// Admission-check, confine, and spawn the child.
    ///
    /// Order: (1) `cx.check_exec(program)` and the environment denylist, before anything else;
    /// (2) the per-axis [`EnforcementReport`] of the policy on this kernel, refusing with
    /// [`ToolError::BelowFloor`] if a restricted axis cannot meet its floor; (3) the Landlock
    /// ruleset and seccomp program are prepared here, applied by the child between `fork` and
    /// `exec`, and the program is executed inside that boundary.
    ///
    /// The program runs as its canonical path, with `argv[0]` as given.
    ///
    /// # Errors
    ///
    /// Every variant of [`ToolError`]; only with [`ToolError::Spawn`] can `execve` have been
    /// attempted, and even then the sandbox was already in place.
    pub fn spawn(mut self, cx: &ToolContext) -> Result<ConfinedChild, ToolError> {
        let program_path = cx.check_exec(&self.program)?;
        self.check_env()?;
        self.policy.validate()?;

        let support: KernelSupport = kernel::probe();
        let report = support.report_for(&self.policy);
        if let Some(below) = report.first_below_floor() {
            return Err(ToolError::BelowFloor {
                axis: below.axis(),
                required: below.floor(),
                available: below.level(),
                reason: below.reason().to_owned(),
            });
        }

        // The candidate and a private /tmp are written beneath the roots of
        // detached mounts, which no path names yet.
        let mount = match self.fuse_mount.take() {
            Some(mount) => {
                let shown = crate::namespace::shown_paths(&self.policy, cx);
                Some(PreparedMount::new(mount, self.current_dir.as_deref(), self.policy.runs_as(), shown)?)
            }
            None => None,
        };
        let granted = mount.as_ref().map(PreparedMount::grants).unwrap_or_default();
        let (mut setup, stage_reader) = ChildSetup::prepare(&self.policy, cx, &support, &granted, mount.is_some())?;
        drop(granted);
        if self.policy.runs_as().is_some() {
            // The new uid may not be able to search the program's directories
            // (a binary under /root, say): the child executes it by descriptor.
            let mut argv: Vec<&std::ffi::OsStr> = vec![std::ffi::OsStr::new(self.program.as_str())];
            argv.extend(self.args.iter().map(std::ffi::OsString::as_os_str));
            let envp: Vec<std::ffi::OsString> = self
                .envs
                .iter()
                .map(|(key, value)| {
                    let mut var = key.clone();
                    var.push("=");
                    var.push(value);
                    var
                })
                .collect();
            // A script is executed again by the name it was given (its
            // interpreter's `$0`), which leads to the same file.
            let named = std::path::Path::new(self.program.as_str());
            let by_name = if named.is_absolute() { named } else { program_path.as_path() };
            let image = crate::sys::ExecImage::new(&program_path, by_name, &argv, &envp)
                .map_err(|source| ToolError::Spawn { program: self.program.clone(), source })?;
            setup.exec_by_descriptor(image);
        }
        let mut command = Command::new(&program_path);
        command.arg0(&self.program).args(&self.args).env_clear();
        command.envs(self.envs.iter().map(|(key, value)| (key, value)));
        let mounting = mount.is_some();
        if let Some(mount) = mount {
            // The child mounts, then enters its directory and changes ids itself.
            setup.mount_first(mount);
        } else if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        if let Some(stdin) = self.stdin {
            command.stdin(stdin);
        }
        if let Some(stdout) = self.stdout {
            command.stdout(stdout);
        }
        if let Some(stderr) = self.stderr {
            command.stderr(stderr);
        }
        if self.new_process_group {
            command.process_group(0);
        }
        if let Some((uid, gid)) = self.policy.runs_as()
            && !mounting
        {
            command.uid(uid).gid(gid);
        }
        if self.kill_when_parent_ends {
            setup.kill_when_parent_ends();
        }
        let memory = setup.memory_group();
        sys::set_pre_exec(&mut command, setup);
        let spawned = command.spawn();
        // Dropping the command closes the parent's copies of the setup's descriptors, including
        // the status pipe's write end, so the read below sees only what the child wrote.
        drop(command);
        match spawned {
            Ok(child) => Ok(ConfinedChild { child, report, _memory: memory }),
            Err(source) => match stage_reader.failed_stage() {
                Some(stage) => Err(ToolError::Setup { stage, source }),
                None => Err(ToolError::Spawn { program: self.program, source }),
            },
        }
    }

    /// Refuse malformed or denylisted environment variable names.
    fn check_env(&self) -> Result<(), ToolError> {
        for (key, _) in &self.envs {
            if let Some(reason) = malformed_name(key) {
                return Err(ToolError::InvalidPolicy { reason: reason.to_owned() });
            }
            if env_denylisted(key) {
                return Err(ToolError::EnvDenied { name: key.to_string_lossy().into_owned() });
            }
        }
        Ok(())
    }
}

/// A child spawned by [`ConfinedCommand::spawn`], with the report it was spawned under.
///
/// Dropping it neither kills nor waits for the child, exactly like [`std::process::Child`].
#[must_use = "the child keeps running; wait for it or kill it"]
#[derive(Debug)]
pub struct ConfinedChild {
    child: Child,
    report: EnforcementReport,
    /// The memory group bounding its tree, removed once it is done.
    _memory: Option<std::sync::Arc<crate::cgroup::MemoryGroup>>,
}

impl ConfinedChild {
    /// The child's process id (also its process group id with
    /// [`ConfinedCommand::new_process_group`]).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The underlying [`std::process::Child`], to wait, kill or take streams.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Give up the report and keep the [`std::process::Child`].
    pub fn into_child(self) -> Child {
        self.child
    }

    /// `SIGKILL` the child's whole process group (the child started with
    /// [`ConfinedCommand::new_process_group`]: no descendant can leave it, as
    /// `setsid` and `setpgid` are denied). A group that is already gone is
    /// not an error.
    ///
    /// # Errors
    ///
    /// When the signal cannot be sent for another reason.
    pub fn kill_group(&self) -> io::Result<()> {
        kill_process_group(self.child.id())
    }

    /// What was enforced on each axis for this child.
    pub fn report(&self) -> &EnforcementReport {
        &self.report
    }

    /// Take the child's stdin, if it was piped.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Take the child's stdout, if it was piped.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Take the child's stderr, if it was piped.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Wait for the child to exit ([`std::process::Child::wait`]).
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait()
    }
}

/// `SIGKILL` the process group `group` (a [`ConfinedChild::id`] of a child
/// started with [`ConfinedCommand::new_process_group`]). A group that is
/// already gone is not an error.
///
/// # Errors
///
/// When the signal cannot be sent for another reason.
pub fn kill_process_group(group: u32) -> io::Result<()> {
    let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(group).unwrap_or(i32::MAX)) else {
        return Ok(());
    };
    match rustix::process::kill_process_group(pid, rustix::process::Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

/// Wait until `fd` (a child's pipe, say) has something to read, or its
/// writer closed it, at most `timeout`: whether it is ready. A supervisor
/// that reads its child's frames on its own thread waits here between
/// frames, so a deadline or a cancellation is looked at while nothing comes.
///
/// # Errors
///
/// When `poll` fails (an interruption is retried within the timeout).
pub fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout: std::time::Duration) -> io::Result<bool> {
    wait_readable_spinning(fd, std::time::Duration::ZERO, timeout)
}

/// [`wait_readable`], first checking without blocking for up to `spin`
/// (yielding the CPU between checks): an answer that comes within it is
/// taken without the thread going to sleep and being woken, which on a
/// virtual machine whose idle CPUs halt costs tens of microseconds.
pub fn wait_readable_spinning(
    fd: std::os::fd::BorrowedFd<'_>,
    spin: std::time::Duration,
    timeout: std::time::Duration,
) -> io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let started = std::time::Instant::now();
    let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
    while started.elapsed() < spin.min(timeout) {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&zero)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => std::thread::yield_now(),
            Ok(_) => return Ok(true),
            Err(errno) => return Err(errno.into()),
        }
    }
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        let spec = Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&spec)) {
            Ok(ready) => return Ok(ready > 0),
            Err(rustix::io::Errno::INTR) if !left.is_zero() => {}
            Err(errno) => return Err(errno.into()),
        }
    }
}

/// A file that holds `bytes` and can never hold anything else, read from
/// its start: a confined command's standard input (`Stdio::from`). A sealed
/// memfd (`memfd_create`, then `F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK |
/// F_SEAL_SEAL`), not a pipe: nothing has to feed it while the command runs,
/// so a command that never reads its input cannot make the caller wait, and
/// what the command reads is exactly the bytes given. It is not executable
/// where the kernel can say so (`MFD_NOEXEC_SEAL`, Linux 6.3).
///
/// # Errors
///
/// The kernel's, when the memfd cannot be made, written or sealed.
pub fn input_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::{Seek as _, Write as _};

    use rustix::fs::{MemfdFlags, SealFlags};
    const NAME: &std::ffi::CStr = c"vsh-stdin";
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    let fd = match rustix::fs::memfd_create(NAME, flags | MemfdFlags::NOEXEC_SEAL) {
        // A kernel before 6.3 does not know the flag.
        Err(rustix::io::Errno::INVAL) => rustix::fs::memfd_create(NAME, flags)?,
        made => made?,
    };
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    rustix::fs::fcntl_add_seals(&file, SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL)?;
    file.rewind()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::time::{Duration, Instant};

    use super::{input_file, wait_readable_spinning};

    #[test]
    fn an_input_file_reads_its_bytes_from_the_start_and_refuses_any_change() {
        use std::io::{Read as _, Seek as _};
        let mut file = input_file(b"line one\nline two\n").unwrap();
        let mut read = String::new();
        file.read_to_string(&mut read).unwrap();
        assert_eq!(read, "line one\nline two\n");
        file.rewind().unwrap();
        assert!(file.write_all(b"x").is_err(), "sealed against writes");
        assert!(file.set_len(0).is_err() && file.set_len(100).is_err(), "sealed against resizing");
        assert_eq!(file.metadata().unwrap().len(), 18);
        assert!(input_file(b"").unwrap().read_to_string(&mut read).is_ok_and(|count| count == 0));
    }

    #[test]
    fn a_wait_sees_bytes_that_come_while_it_spins_or_after_and_times_out_without_them() {
        let spin = Duration::from_micros(50);
        let (reader, mut writer) = std::io::pipe().expect("a pipe");
        // Nothing comes: false once the timeout has passed, not before.
        let started = Instant::now();
        assert!(!wait_readable_spinning(reader.as_fd(), spin, Duration::from_millis(20)).unwrap());
        assert!(started.elapsed() >= Duration::from_millis(20));
        // Bytes that come after the spin are still seen (the wait then sleeps in the kernel).
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            writer.write_all(b"x").expect("write");
            writer
        });
        assert!(wait_readable_spinning(reader.as_fd(), spin, Duration::from_secs(10)).unwrap());
        let mut writer = late.join().expect("the writer");
        // Bytes already there: at once, within the spin.
        writer.write_all(b"y").expect("write");
        let started = Instant::now();
        assert!(wait_readable_spinning(reader.as_fd(), Duration::from_secs(5), Duration::from_secs(10)).unwrap());
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
