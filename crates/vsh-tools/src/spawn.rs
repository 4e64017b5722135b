//! The one place a command is spawned: [`Host::spawn_group`], and the
//! [`GroupChild`] that owns the new process group until supervision takes it.
//!
//! Every command is the leader of a fresh process group, with stdin on
//! `/dev/null`, stdout and stderr piped, and exactly the environment given,
//! spawned by `vsh_sandbox::ConfinedCommand`.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;

use rustix::process::{Pid, Signal};
use vsh_sandbox::{ConfinedCommand, ToolError};

use super::{ExecError, Host};

/// What to run.
#[derive(Debug)]
pub(crate) struct Launch {
    /// The program (a bare name is looked up in the `PATH` of `env`).
    pub(crate) program: PathBuf,
    /// Its arguments, passed literally.
    pub(crate) args: Vec<OsString>,
    /// Its working directory (absolute).
    pub(crate) cwd: PathBuf,
    /// Its whole environment.
    pub(crate) env: Vec<(String, String)>,
}

impl Host {
    /// Spawn `launch` as the leader of a new process group, through
    /// [`ConfinedCommand`] under the host's policy ([`SandboxPolicy::group_only`]
    /// unless a confining one is configured). Every policy denies `setsid` and
    /// `setpgid`, so the command and all its descendants stay in the group.
    ///
    /// [`SandboxPolicy::group_only`]: vsh_sandbox::SandboxPolicy::group_only
    pub(crate) fn spawn_group(&self, launch: &Launch) -> Result<GroupChild, ExecError> {
        let spawn_error = |source| ExecError::Spawn { program: launch.program.clone(), source };
        let program = launch
            .program
            .to_str()
            .ok_or_else(|| spawn_error(io::Error::new(io::ErrorKind::InvalidInput, "the program path is not UTF-8")))?;
        let mut command = ConfinedCommand::new(program)
            .sandbox_policy(Arc::clone(&self.inner.policy))
            .args(&launch.args)
            .current_dir(&launch.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .new_process_group();
        for (key, value) in &launch.env {
            command = command.env(key, value);
        }
        let child = command.spawn(&self.inner.tool_context).map_err(|error| match error {
            ToolError::Spawn { source, .. } => spawn_error(source),
            source => ExecError::Confinement { program: launch.program.clone(), source },
        })?;
        GroupChild::new(child.into_child()).map_err(spawn_error)
    }
}

/// The id of a process group we created, never 0 or 1, so signalling it can
/// never mean "every process" or "our own group".
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct GroupId(Pid);

impl GroupId {
    /// The group led by `pid`, if `pid` is a plausible leader of one.
    pub(crate) fn led_by(pid: u32) -> Option<Self> {
        let raw = i32::try_from(pid).ok()?;
        if raw <= 1 || raw == rustix::process::getpid().as_raw_nonzero().get() {
            return None;
        }
        Pid::from_raw(raw).map(Self)
    }

    /// The leader's pid.
    pub(crate) fn leader(self) -> Pid {
        self.0
    }

    /// Send `signal` to every process in the group. Errors (the group is
    /// empty, `ESRCH`) are ignored: there is nothing left to signal.
    pub(crate) fn signal(self, signal: Signal) {
        let _ = rustix::process::kill_process_group(self.0, signal);
    }
}

/// A freshly spawned group leader. Until [`GroupChild::into_parts`] hands it
/// to supervision, dropping it kills the group and reaps the leader (on a
/// helper thread, so a drop never blocks).
#[derive(Debug)]
pub(crate) struct GroupChild {
    child: Option<Child>,
    group: GroupId,
}

impl GroupChild {
    pub(crate) fn new(child: Child) -> std::io::Result<Self> {
        let Some(group) = GroupId::led_by(child.id()) else {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the child's pid cannot lead a process group"));
        };
        Ok(Self { child: Some(child), group })
    }

    /// The child and its group, now the caller's to kill and reap.
    pub(crate) fn into_parts(mut self) -> (Child, GroupId) {
        let child = self.child.take().expect("a GroupChild holds its child until into_parts");
        (child, self.group)
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The leader is not reaped yet, so the group id still names our group.
            self.group.signal(Signal::KILL);
            let _ = std::thread::Builder::new().name("vsh-host-reap".into()).spawn(move || child.wait());
        }
    }
}
