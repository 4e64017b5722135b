//! What the child does between `fork` and `exec`, prepared in the parent.
//!
//! [`ChildSetup::prepare`] does all the work that allocates or can fail in interesting ways (the
//! Landlock ruleset, the seccomp program, the clamped rlimits, a status pipe).
//! [`ChildSetup::apply`] then runs in the child and only makes raw system calls on that data.
//! If a step fails, the child writes the step's number into the status pipe and returns the
//! errno; std then reports the errno from `spawn` and never executes the target, and the
//! parent reads the step from the pipe ([`StageReader`]).

use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};

use rustix::pipe::PipeFlags;
use rustix::process::{Resource, Rlimit};
use rustix::thread::{CapabilitySet, CapabilitySets};

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::kernel::KernelSupport;
use crate::namespace::PreparedMount;
use crate::policy::{Mode, ResourceLimits, SandboxPolicy};
use crate::seccomp::{self, FilterSpec};
use crate::{ruleset, sys};

/// A step of the child's setup, as written into the status pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Rlimits = 1,
    NoNewPrivs = 2,
    Landlock = 3,
    Capabilities = 4,
    Seccomp = 5,
    Exec = 6,
    Mount = 7,
    Ids = 8,
    Network = 9,
    MemoryGroup = 10,
    Descriptors = 11,
    ParentDeath = 12,
    PidNamespace = 13,
}

impl Stage {
    const ALL: [Stage; 13] = [
        Stage::Rlimits,
        Stage::NoNewPrivs,
        Stage::Landlock,
        Stage::Capabilities,
        Stage::Seccomp,
        Stage::Exec,
        Stage::Network,
        Stage::Mount,
        Stage::Ids,
        Stage::MemoryGroup,
        Stage::Descriptors,
        Stage::ParentDeath,
        Stage::PidNamespace,
    ];

    fn byte(self) -> u8 {
        self as u8
    }

    /// The name used in [`ToolError::Setup`].
    fn name(self) -> &'static str {
        match self {
            Stage::Rlimits => "setrlimit",
            Stage::NoNewPrivs => "no_new_privs",
            Stage::Landlock => "landlock_restrict_self",
            Stage::Capabilities => "capset",
            Stage::Seccomp => "seccomp",
            Stage::Exec => "execveat",
            Stage::Network => "private loopback network (unshare, bring lo up)",
            Stage::Mount => "private FUSE mount (unshare, mount)",
            Stage::Ids => "setresuid",
            Stage::MemoryGroup => "join the memory cgroup",
            Stage::Descriptors => "close inherited descriptors (close_range)",
            Stage::ParentDeath => "die with the parent (PR_SET_PDEATHSIG)",
            Stage::PidNamespace => "own pid namespace (unshare, fork its first process)",
        }
    }
}

/// The parent's end of the status pipe.
pub(crate) struct StageReader {
    fd: OwnedFd,
}

impl StageReader {
    /// The step that failed in the child, if it reported one. Call after `spawn` failed and the
    /// [`ChildSetup`] (the pipe's write end) was dropped; never blocks.
    pub(crate) fn failed_stage(&self) -> Option<&'static str> {
        let mut byte = [0_u8; 1];
        match rustix::io::read(&self.fd, &mut byte) {
            Ok(1) => Stage::ALL.into_iter().find(|stage| stage.byte() == byte[0]).map(Stage::name),
            _ => None,
        }
    }
}

/// Everything the child applies to itself before `exec`, ready to use without allocating.
pub(crate) struct ChildSetup {
    limits: Vec<(Resource, Rlimit)>,
    landlock: Option<OwnedFd>,
    drop_capabilities: bool,
    seccomp: Option<Vec<libc::sock_filter>>,
    /// When set, the child executes this image by descriptor itself, last
    /// (a child that changed uid may not be able to search the program's path).
    exec: Option<sys::ExecImage>,
    /// A private mount namespace with a FUSE mount, made first.
    mount: Option<PreparedMount>,
    /// A private network namespace with only a loopback interface, made first.
    private_loopback: bool,
    /// Whether a namespaced child (one with a mount of its own) gets an
    /// empty network namespace: it has no network, and its `/proc/net`
    /// shows none of the host's sockets, routes or interfaces (sec82 1).
    no_network: bool,
    /// The memory group the child joins first, bounding its whole tree.
    memory: Option<std::sync::Arc<crate::cgroup::MemoryGroup>>,
    /// The parent's process id, when the child is killed as its parent
    /// thread ends (see [`crate::ConfinedCommand::kill_when_parent_ends`]).
    parent: Option<rustix::process::Pid>,
    status: OwnedFd,
}

impl ChildSetup {
    /// Prepare the setup of a child under `policy` on a kernel with `support`
    /// (`own_namespaces`: it will have a candidate, and namespaces of its own).
    ///
    /// A mechanism the kernel lacks is left out; the caller has already checked that the
    /// resulting levels meet the policy's floors.
    pub(crate) fn prepare(
        policy: &SandboxPolicy,
        context: &ToolContext,
        support: &KernelSupport,
        granted: &[(BorrowedFd<'_>, crate::namespace::Grant)],
        own_namespaces: bool,
    ) -> Result<(Self, StageReader), ToolError> {
        let confined = policy.mode() == Mode::Confined;
        let landlock = match support.landlock_rights_abi() {
            Some(abi) if confined => Some(ruleset::build(abi, policy, context, granted)?),
            _ => None,
        };
        let seccomp = if support.seccomp {
            let spec = FilterSpec {
                confined,
                tcp: policy.has_tcp_grants(),
                inet: policy.opens_inet(),
                unix: policy.unix_sockets_allowed(),
                // A child with a candidate has a System V IPC namespace of
                // its own (`sys::enter_pid_namespace`); one without shares
                // the host's, where its calls are refused.
                shared_ipc: confined && !own_namespaces,
            };
            let program = seccomp::program(spec)
                .map_err(|error| ToolError::Setup { stage: "seccomp filter", source: io::Error::other(error) })?;
            Some(program)
        } else {
            None
        };
        let (reader, writer) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)
            .map_err(|errno| ToolError::Setup { stage: "status pipe", source: errno.into() })?;
        let setup = Self {
            limits: clamped_limits(policy.limits(), confined),
            landlock,
            drop_capabilities: confined,
            seccomp,
            exec: None,
            mount: None,
            private_loopback: confined && policy.network_access() == crate::NetworkAccess::Loopback,
            // (Granted ports are the host's loopback's: its namespace stays.)
            no_network: confined
                && policy.network_access() == crate::NetworkAccess::None
                && policy.tcp_connect_ports().next().is_none(),
            memory: match policy.tree_memory() {
                Some(bytes) if confined && crate::cgroup::MemoryGroup::available() => Some(std::sync::Arc::new(
                    crate::cgroup::MemoryGroup::create(bytes)
                        .map_err(|source| ToolError::Setup { stage: "memory cgroup", source })?,
                )),
                _ => None,
            },
            parent: None,
            status: writer,
        };
        Ok((setup, StageReader { fd: reader }))
    }

    /// Mount `mount` in a private namespace first (and change ids and
    /// directory after it, not std).
    pub(crate) fn mount_first(&mut self, mount: PreparedMount) {
        self.mount = Some(mount);
    }

    /// Have the child killed (`SIGKILL`) when the thread that spawns it
    /// ends, the parent process's death included.
    pub(crate) fn kill_when_parent_ends(&mut self) {
        self.parent = Some(rustix::process::getpid());
    }

    /// The memory group the child joins, for the parent to keep until the
    /// child is done (it is removed when dropped).
    pub(crate) fn memory_group(&self) -> Option<std::sync::Arc<crate::cgroup::MemoryGroup>> {
        self.memory.clone()
    }

    /// Execute `image` by descriptor at the end of the setup instead of
    /// letting std execute the program by path.
    pub(crate) fn exec_by_descriptor(&mut self, image: sys::ExecImage) {
        self.exec = Some(image);
    }

    /// Apply the setup to the calling process. Runs in the child between `fork` and `exec`.
    ///
    /// This is async-signal-safe code, and must stay so: the parent may have had other threads
    /// holding the allocator's or stdio's locks at the moment of `fork`, so allocating, printing,
    /// reading the environment, taking any lock, or panicking here can deadlock or corrupt the
    /// child. Every line below is one raw system call (through rustix's raw backend or
    /// [`sys`]) on data prepared by [`ChildSetup::prepare`]; errors are bare errno values, which
    /// `io::Error` holds without allocating. Review any change to this function with that rule.
    ///
    /// The order matters: a private FUSE mount first, if any (it needs the
    /// parent's privilege; the uid changes right after it), then limits, then `no_new_privs` (needed by the
    /// unprivileged forms of the next two steps), Landlock, the capability drop, and seccomp last
    /// so the filter never sees the setup's own calls. `execve` itself stays allowed.
    pub(crate) fn apply(&self) -> io::Result<()> {
        // Nothing but the three standard streams crosses the exec: a
        // descriptor vsh itself inherited without close-on-exec (a file
        // outside every root, a connected socket) would otherwise reach
        // the child, and Landlock and seccomp govern only what it opens.
        sys::close_inherited_on_exec().map_err(|error| self.fail(Stage::Descriptors, error))?;
        // A candidate's command is the second process of a pid namespace of
        // its own, under a tiny init, this process staying outside as its
        // supervisor (each dies with its parent, so the whole tree dies
        // with vsh). Only the command joins the memory group below.
        let namespaced = self.mount.is_some();
        if namespaced {
            if let Some(parent) = self.parent {
                self.die_with(parent)?;
            }
            sys::enter_pid_namespace().map_err(|error| self.fail(Stage::PidNamespace, error))?;
        }
        if let Some(group) = &self.memory {
            group.join_self().map_err(|error| self.fail(Stage::MemoryGroup, error))?;
        }
        if self.private_loopback {
            sys::private_loopback().map_err(|error| self.fail(Stage::Network, error))?;
        } else if self.no_network && namespaced {
            sys::private_network().map_err(|error| self.fail(Stage::Network, error))?;
        }
        let mut own_proc = None;
        if let Some(mount) = &self.mount {
            own_proc = Some(mount.apply().map_err(|error| self.fail(Stage::Mount, error))?);
            mount.change_ids().map_err(|error| self.fail(Stage::Ids, error))?;
        }
        match (namespaced, self.parent) {
            // After the ids changed (which clears the setting), checked
            // against an init already gone (the command's parent is pid 1).
            (true, Some(_)) => {
                rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                    .map_err(|errno| self.fail(Stage::ParentDeath, errno.into()))?;
                if rustix::process::getppid() != rustix::process::Pid::from_raw(1) {
                    return Err(self.fail(Stage::ParentDeath, io::Error::from_raw_os_error(libc::ESRCH)));
                }
            }
            (false, Some(parent)) => self.die_with(parent)?,
            (_, None) => {}
        }
        for (resource, limit) in &self.limits {
            rustix::process::setrlimit(*resource, *limit).map_err(|errno| self.fail(Stage::Rlimits, errno.into()))?;
        }
        rustix::thread::set_no_new_privs(true).map_err(|errno| self.fail(Stage::NoNewPrivs, errno.into()))?;
        if let Some(ruleset) = &self.landlock {
            // Its own /proc (its processes, nothing of the host's: a pid
            // namespace of its own, `hidepid=invisible`, every entry but
            // `PROC_SHOWN` covered) is readable: `ps`, psutil, a sanitizer's
            // look at its own maps, `free` (ux76).
            if let Some(proc) = &own_proc {
                sys::landlock_allow_reading(ruleset.as_fd(), proc.as_fd())
                    .map_err(|error| self.fail(Stage::Landlock, error))?;
            }
            sys::landlock_restrict_self(ruleset.as_fd()).map_err(|error| self.fail(Stage::Landlock, error))?;
        }
        if self.drop_capabilities {
            let none = CapabilitySet::empty();
            let sets = CapabilitySets { effective: none, permitted: none, inheritable: none };
            rustix::thread::set_capabilities(None, sets)
                .map_err(|errno| self.fail(Stage::Capabilities, errno.into()))?;
        }
        if let Some(program) = &self.seccomp {
            sys::seccomp_set_filter(program).map_err(|error| self.fail(Stage::Seccomp, error))?;
        }
        if let Some(image) = &self.exec {
            // Returns only if the exec failed.
            return Err(self.fail(Stage::Exec, sys::exec_image(image)));
        }
        Ok(())
    }

    /// Be killed when `parent` (the thread that spawned this process) ends,
    /// checked against a parent already gone before the setting took
    /// effect. Async-signal-safe: two system calls.
    fn die_with(&self, parent: rustix::process::Pid) -> io::Result<()> {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
            .map_err(|errno| self.fail(Stage::ParentDeath, errno.into()))?;
        if rustix::process::getppid() != Some(parent) {
            return Err(self.fail(Stage::ParentDeath, io::Error::from_raw_os_error(libc::ESRCH)));
        }
        Ok(())
    }

    /// Report `stage` to the parent and pass `error` on. Async-signal-safe: one `write`.
    fn fail(&self, stage: Stage, error: io::Error) -> io::Error {
        let _ = rustix::io::write(&self.status, &[stage.byte()]);
        error
    }
}

/// The rlimits to set, each clamped to the current hard limit so that lowering never fails.
/// Confined children also get `RLIMIT_CORE` 0: a core dump would copy their memory to disk.
fn clamped_limits(limits: &ResourceLimits, confined: bool) -> Vec<(Resource, Rlimit)> {
    let mut wanted: Vec<(Resource, u64, u64)> = Vec::new();
    if let Some(seconds) = limits.cpu_seconds {
        // Soft below hard: SIGXCPU first, SIGKILL a second later.
        wanted.push((Resource::Cpu, seconds, seconds.saturating_add(1)));
    }
    let exact = [
        (Resource::As, limits.address_space_bytes),
        (Resource::Data, limits.data_bytes),
        (Resource::Fsize, limits.file_size_bytes),
        (Resource::Nproc, limits.processes),
    ];
    wanted.extend(exact.into_iter().filter_map(|(resource, value)| value.map(|value| (resource, value, value))));
    if let Some(open_files) = limits.open_files {
        wanted.push((Resource::Nofile, open_files.min(crate::OPEN_FILES_SOFT), open_files));
    }
    if confined {
        wanted.push((Resource::Core, 0, 0));
    }
    wanted
        .into_iter()
        .map(|(resource, soft, hard)| {
            let ceiling = rustix::process::getrlimit(resource).maximum.unwrap_or(u64::MAX);
            let hard = hard.min(ceiling);
            (resource, Rlimit { current: Some(soft.min(hard)), maximum: Some(hard) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_clamped_and_cpu_soft_is_below_hard() {
        let limits = ResourceLimits { cpu_seconds: Some(5), open_files: Some(u64::MAX - 1), ..ResourceLimits::none() };
        let clamped = clamped_limits(&limits, true);
        let cpu = clamped.iter().find(|(resource, _)| *resource == Resource::Cpu).expect("cpu limit").1;
        let cpu_ceiling = rustix::process::getrlimit(Resource::Cpu).maximum.unwrap_or(u64::MAX);
        assert_eq!(cpu.maximum, Some(6.min(cpu_ceiling)));
        assert_eq!(cpu.current, Some(5.min(cpu_ceiling)));
        let nofile = clamped.iter().find(|(resource, _)| *resource == Resource::Nofile).expect("nofile limit").1;
        assert_eq!(
            nofile.maximum,
            Some((u64::MAX - 1).min(rustix::process::getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX)))
        );
        assert!(clamped.iter().any(|(resource, limit)| *resource == Resource::Core && limit.maximum == Some(0)));
        assert!(clamped_limits(&ResourceLimits::none(), false).is_empty());
    }

    #[test]
    fn a_failed_stage_reaches_the_parent_through_the_pipe() {
        let context = ToolContext::new(crate::ExecGrant::Any);
        let support = KernelSupport::emulated(None, false);
        let (setup, reader) =
            ChildSetup::prepare(&SandboxPolicy::new(), &context, &support, &[], false).expect("prepare");
        assert_eq!(reader.failed_stage(), None, "nothing reported yet");
        let error = setup.fail(Stage::Landlock, io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(error.raw_os_error(), Some(libc::EPERM));
        drop(setup);
        assert_eq!(reader.failed_stage(), Some("landlock_restrict_self"));
    }

    #[test]
    fn stages_round_trip_through_their_byte() {
        for stage in Stage::ALL {
            assert_eq!(Stage::ALL.into_iter().find(|other| other.byte() == stage.byte()), Some(stage));
        }
    }
}
