//! [`SandboxPolicy`]: the mechanism settings of a spawn (allow-lists, limits, floors).
//!
//! A policy never grants authority to run a program; that is the [`crate::ToolContext`]'s job.
//! It says what a running child may touch, and how strongly each axis must be enforced.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::ToolError;
use crate::report::{Axis, Enforcement};

/// The system directories every confined child can read (and, with [`crate::ExecGrant::Any`],
/// execute from): what dynamically linked system programs need. Absent ones are skipped.
pub(crate) const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib64"];

/// Files in `/etc` a confined child can read: the loader cache and configuration, name-service
/// switch, user and group names, the time zone, OpenSSL's configuration file (Node.js and
/// other programs linked with OpenSSL refuse to start when it exists and cannot be read; it
/// holds settings, never keys), and the public tables libraries look things up in without a
/// network: media types (`mime.types`: Python's `mimetypes`, and so `http.server`, raises when
/// it exists and cannot be read), service ports and protocol numbers, and the public
/// certificates TLS trusts (the certificate directories only: npm, pip and git read the bundle
/// a configuration names, and fail without a word when they cannot, network or not), and the
/// distribution's name and version (`os-release` and the `*-release`/`*_version` files: pip's
/// user agent reads `/etc/debian_version` through `distro`, and crashed without it, ux65 F4), and
/// the JDK's and Maven's settings. The rest
/// of `/etc` (shadow, ssh keys, `/etc/ssl/private`, credentials) stays unreadable. Absent ones
/// are skipped.
pub(crate) const SYSTEM_ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/ssl/openssl.cnf",
    "/etc/pki/tls/openssl.cnf",
    "/etc/mime.types",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust",
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/redhat-release",
    "/etc/system-release",
    "/etc/fedora-release",
    "/etc/centos-release",
    "/etc/alpine-release",
    "/etc/arch-release",
    "/etc/SuSE-release",
    // The JDK's and Maven's configuration (`java.security`, `settings.xml`
    // templates): without it `java` and `javac` do not start (ux76 H3).
    "/etc/java",
    "/etc/java-8-openjdk",
    "/etc/java-11-openjdk",
    "/etc/java-17-openjdk",
    "/etc/java-21-openjdk",
    "/etc/java-25-openjdk",
    "/etc/maven",
];

/// Python's site configuration in `/etc` (Debian links `sitecustomize.py`
/// there from `/usr/lib/python3.X`): without it every `python3` prints an
/// error before it starts. No secrets live there. Absent ones are skipped.
pub(crate) const SYSTEM_ETC_PYTHON: &[&str] = &[
    "/etc/python3",
    "/etc/python3.8",
    "/etc/python3.9",
    "/etc/python3.10",
    "/etc/python3.11",
    "/etc/python3.12",
    "/etc/python3.13",
    "/etc/python3.14",
];

/// What a child that reaches a network reads to use it: name resolution
/// (hosts, resolver and its configuration; systemd's
/// resolver files, where `/etc/resolv.conf` points on many systems). Only with a network ([`NetworkAccess::Loopback`],
/// [`NetworkAccess::All`] or [`SandboxPolicy::allow_loopback_tcp`] ports).
/// Absent ones are skipped.
pub(crate) const NETWORK_ETC_FILES: &[&str] =
    &["/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/gai.conf", "/run/systemd/resolve"];

/// Devices a confined child can read and write. Absent ones are skipped.
pub(crate) const SYSTEM_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom"];

/// The dynamic loaders: they must be executable for any dynamically linked program to start
/// (the kernel opens the loader with the same check as the program). Absent ones are skipped.
pub(crate) const DYNAMIC_LOADERS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/ld-musl-x86_64.so.1",
    "/lib/ld-musl-aarch64.so.1",
];

/// Resource limits applied with `setrlimit` in the child. `None` leaves a limit as inherited.
///
/// Every value is clamped to the parent's hard limit, so an unprivileged parent never fails to
/// apply one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceLimits {
    /// `RLIMIT_CPU`, in seconds of CPU time: the soft limit (`SIGXCPU`); the hard limit
    /// (`SIGKILL`) is one second more.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS`, in bytes of virtual address space. Runtimes that reserve large ranges
    /// (JVM, Go, V8) fail under a tight value.
    pub address_space_bytes: Option<u64>,
    /// `RLIMIT_DATA`, in bytes of private writable memory per process (the heap and
    /// anonymous mappings): what one process may allocate, without counting the address
    /// space runtimes reserve and never touch, so it suits real programs where
    /// `RLIMIT_AS` does not. It bounds each process, not a process tree.
    pub data_bytes: Option<u64>,
    /// `RLIMIT_FSIZE`, the largest file the child can write, in bytes (`SIGXFSZ` beyond).
    pub file_size_bytes: Option<u64>,
    /// `RLIMIT_NOFILE`, the number of open descriptors: the hard limit. The
    /// soft limit starts at [`OPEN_FILES_SOFT`] or this, whichever is lower
    /// (above 1024 `select` fails), and a program may raise it up to this
    /// (as Go's runtime and `ulimit -n` do), as it may on a usual host.
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC`, the number of processes of the child's uid, counted system-wide.
    /// The kernel does not enforce it for uid 0: combine it with [`SandboxPolicy::run_as`].
    pub processes: Option<u64>,
}

/// The soft `RLIMIT_NOFILE` a child starts with at most: what `select` can
/// watch (`FD_SETSIZE`), as a usual Linux session starts.
pub const OPEN_FILES_SOFT: u64 = 1024;

impl ResourceLimits {
    /// No limits: every resource as inherited.
    pub const fn none() -> Self {
        Self {
            cpu_seconds: None,
            address_space_bytes: None,
            data_bytes: None,
            file_size_bytes: None,
            open_files: None,
            processes: None,
        }
    }

    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        *self != Self::none()
    }
}

impl Default for ResourceLimits {
    /// Files up to 4 GiB, 1024 open descriptors; CPU time, address space and processes as
    /// inherited (a timeout bounds time better than `RLIMIT_CPU`, a tight `RLIMIT_AS` breaks
    /// common runtimes, and `RLIMIT_NPROC` needs a dedicated uid).
    fn default() -> Self {
        Self {
            cpu_seconds: None,
            address_space_bytes: None,
            data_bytes: None,
            file_size_bytes: Some(4 << 30),
            open_files: Some(1024),
            processes: None,
        }
    }
}

/// Whether the policy confines the child or only keeps its process group killable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Confined,
    GroupOnly,
}

/// What network a confined child reaches ([`SandboxPolicy::network`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NetworkAccess {
    /// None (the default): no sockets but `socketpair` (and `AF_UNIX`
    /// sockets with [`SandboxPolicy::allow_unix_sockets`]), TCP bind and
    /// connect denied (save the [`SandboxPolicy::allow_loopback_tcp`] ports).
    #[default]
    None,
    /// A private network namespace of its own holding only a loopback
    /// interface (up): the child's servers and clients reach each other on
    /// `127.0.0.1`, nothing outside the sandbox is reachable (the host's
    /// loopback included). Needs the privilege to make a network namespace
    /// (a root parent); without it the spawn fails, closed.
    Loopback,
    /// The host's network, unrestricted (`AF_INET`, `AF_INET6` and
    /// `AF_NETLINK` sockets of any kind, no Landlock TCP rules); the network
    /// axis reports [`Enforcement::None`] and its floor is lowered to match.
    All,
}

/// Default floors, in [`Axis`] order: fs-read, fs-write, exec, network, ipc-signals, resources.
const DEFAULT_FLOORS: [Enforcement; 6] = [
    Enforcement::Kernel,
    Enforcement::Kernel,
    Enforcement::Partial,
    Enforcement::Kernel,
    Enforcement::Partial,
    Enforcement::Kernel,
];

/// What a confined child may touch, and how strongly each [`Axis`] must be enforced.
///
/// Built with [`SandboxPolicy::new`] (confined) or [`SandboxPolicy::group_only`] (not confined)
/// and the `allow_*`, [`rlimits`](SandboxPolicy::rlimits), [`run_as`](SandboxPolicy::run_as)
/// and [`floor`](SandboxPolicy::floor) builders. Allowed paths must be absolute; they are
/// checked when a command spawns.
///
/// # What a confined child gets
///
/// - **Read** beneath `/usr`, `/bin`, `/sbin`, `/lib`, `/lib64`, a few `/etc` files (loader cache
///   and configuration, `nsswitch.conf`, `passwd`, `group`, `localtime`, Python's
///   `/etc/python3*`; with a network, name resolution and the TLS certificate directories:
///   `NETWORK_ETC_FILES`), and the
///   [`allow_read`](SandboxPolicy::allow_read), write and exec roots. Not `/etc/shadow`, `/root`,
///   `/home`, `/tmp` or `/proc` (a rule on `/proc` would expose every process's entries).
/// - **Write** only beneath [`allow_write`](SandboxPolicy::allow_write) roots, plus `/dev/null`,
///   `/dev/zero` and `/dev/urandom`. Programs that need a temporary directory get a write root
///   and `TMPDIR` pointing at it.
/// - **Exec** of the programs the [`crate::ToolContext`] grants (with [`crate::ExecGrant::Any`],
///   anything beneath the system directories), the dynamic loader, and the
///   [`allow_exec`](SandboxPolicy::allow_exec) roots. Never of files beneath a write root, unless
///   the tool context grants that very file: a write root may not overlap an exec root, nor (with
///   `ExecGrant::Any`) lie beneath a system directory.
/// - **Network**: no sockets but `socketpair` (`AF_UNIX` sockets of its own only with
///   [`allow_unix_sockets`](SandboxPolicy::allow_unix_sockets)); TCP connect to the
///   [`allow_loopback_tcp`](SandboxPolicy::allow_loopback_tcp) ports.
/// - **IPC and signals**: no signals to, and no unix sockets (abstract or, without
///   [`allow_unix_sockets`](SandboxPolicy::allow_unix_sockets), pathname) of, processes outside
///   the sandbox; no ptrace, `process_vm_*`, `setsid` or `setpgid`.
/// - **Resources**: [`ResourceLimits::default`], no core dumps, `no_new_privs`, and no
///   capabilities.
/// - Floors of [`Enforcement::Kernel`] on every axis but exec and IPC/signals, whose floor is
///   [`Enforcement::Partial`]: no kernel mechanism here closes the dynamic-loader and memfd
///   routes around an exec allow-list, or (below Landlock ABI 9, with
///   [`allow_unix_sockets`](SandboxPolicy::allow_unix_sockets)) pathname unix sockets, and the
///   report says so rather than claiming more.
#[derive(Clone, Debug)]
pub struct SandboxPolicy {
    mode: Mode,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    exec: Vec<PathBuf>,
    tcp_connect: BTreeSet<u16>,
    network: NetworkAccess,
    unix_sockets: bool,
    tree_memory: Option<u64>,
    limits: ResourceLimits,
    run_as: Option<(u32, u32)>,
    floors: [Enforcement; 6],
}

impl SandboxPolicy {
    /// The confined default described on [`SandboxPolicy`].
    pub fn new() -> Self {
        Self {
            mode: Mode::Confined,
            read: Vec::new(),
            write: Vec::new(),
            exec: Vec::new(),
            tcp_connect: BTreeSet::new(),
            network: NetworkAccess::None,
            unix_sockets: false,
            tree_memory: None,
            limits: ResourceLimits::default(),
            run_as: None,
            floors: DEFAULT_FLOORS,
        }
    }

    /// A policy that does **not** confine: no Landlock, no capability drop, no limits unless
    /// [`rlimits`](SandboxPolicy::rlimits) sets some. The child only gets `no_new_privs` and a
    /// seccomp filter denying `setsid` and `setpgid`, so it and its descendants cannot leave the
    /// process group and a group kill reaches all of them.
    ///
    /// The report says [`Enforcement::None`] for the filesystem, exec and network axes and
    /// [`Enforcement::Partial`] for IPC and signals; the floors are `None` except IPC and
    /// signals (`Partial`), so a kernel without seccomp refuses the spawn. The `allow_*` grants
    /// are meaningless here and make the spawn fail with [`ToolError::InvalidPolicy`].
    pub fn group_only() -> Self {
        let mut floors = [Enforcement::None; 6];
        floors[Axis::IpcSignals.index()] = Enforcement::Partial;
        Self {
            mode: Mode::GroupOnly,
            read: Vec::new(),
            write: Vec::new(),
            exec: Vec::new(),
            tcp_connect: BTreeSet::new(),
            network: NetworkAccess::None,
            unix_sockets: true,
            tree_memory: None,
            limits: ResourceLimits::none(),
            run_as: None,
            floors,
        }
    }

    /// Allow reading files and listing directories beneath `path` (which must exist).
    #[must_use]
    pub fn allow_read(mut self, path: impl Into<PathBuf>) -> Self {
        self.read.push(path.into());
        self
    }

    /// Allow reading and every kind of write beneath `path` (which must exist): write, create,
    /// remove, rename, link, truncate. Never execute: a program written there cannot be run.
    #[must_use]
    pub fn allow_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.write.push(path.into());
        self
    }

    /// Allow reading and executing files beneath `path` (a directory or one file; it must exist).
    /// It may not overlap a write root (checked lexically at spawn): nothing is both writable and
    /// executable.
    #[must_use]
    pub fn allow_exec(mut self, path: impl Into<PathBuf>) -> Self {
        self.exec.push(path.into());
        self
    }

    /// Allow TCP connections to `port`.
    ///
    /// Landlock matches ports, not addresses, so the child can reach `port` on any host, not
    /// only on loopback. The network axis therefore reports [`Enforcement::Partial`]; lower its
    /// floor (`floor(Axis::Network, Enforcement::Partial)`) to accept that. seccomp still limits
    /// the child to `AF_UNIX` sockets and TCP stream sockets (no UDP, raw or SCTP).
    #[must_use]
    pub fn allow_loopback_tcp(mut self, port: u16) -> Self {
        self.tcp_connect.insert(port);
        self
    }

    /// Allow the child to make `AF_UNIX` sockets of its own (`socket(AF_UNIX, ..)`): to serve
    /// and connect to unix sockets, its own and, since no Landlock ABI below 9 governs
    /// connecting to one, any socket file it can name outside the sandbox (a daemon's under
    /// `/run`, say); the IPC axis then reports [`Enforcement::Partial`]. Without it (the
    /// default) a stream or seqpacket `socketpair` is the child's only unix socket (a datagram
    /// pair could `sendto` any socket file), so no socket file outside the sandbox can be
    /// reached. [`NetworkAccess::All`] implies it.
    #[must_use]
    pub fn allow_unix_sockets(mut self) -> Self {
        self.unix_sockets = true;
        self
    }

    /// Bound the memory of the child and every process it starts, together,
    /// to `bytes` (a memory cgroup of its own, v1 controller; memory plus
    /// swap too where swap is accounted): past it the kernel's OOM killer
    /// acts inside the group only. Where this host has no writable memory
    /// controller the bound is not set and the resources axis says so.
    #[must_use]
    pub fn limit_tree_memory(mut self, bytes: u64) -> Self {
        self.tree_memory = Some(bytes);
        self
    }

    /// The memory bound on the child's whole tree, if one is asked for.
    pub fn tree_memory(&self) -> Option<u64> {
        self.tree_memory
    }

    /// Whether the child may make `AF_UNIX` sockets of its own
    /// ([`allow_unix_sockets`](SandboxPolicy::allow_unix_sockets), or the host's network).
    pub fn unix_sockets_allowed(&self) -> bool {
        self.unix_sockets || self.network == NetworkAccess::All
    }

    /// What network the child reaches (see [`NetworkAccess`]; default
    /// none). [`NetworkAccess::All`] lowers the network axis's floor to
    /// [`Enforcement::None`]: nothing is enforced there, as asked.
    #[must_use]
    pub fn network(mut self, access: NetworkAccess) -> Self {
        self.network = access;
        if access == NetworkAccess::All {
            self.floors[Axis::Network.index()] = Enforcement::None;
        }
        self
    }

    /// What network the child reaches.
    pub fn network_access(&self) -> NetworkAccess {
        self.network
    }

    /// Replace the resource limits.
    #[must_use]
    pub fn rlimits(mut self, limits: ResourceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Run the child as `uid` and `gid` (supplementary groups dropped). The parent must be
    /// allowed to switch (normally: root). Needed for [`ResourceLimits::processes`] to apply.
    #[must_use]
    pub fn run_as(mut self, uid: u32, gid: u32) -> Self {
        self.run_as = Some((uid, gid));
        self
    }

    /// Require at least `level` on `axis`; a spawn below it fails with
    /// [`ToolError::BelowFloor`].
    #[must_use]
    pub fn floor(mut self, axis: Axis, level: Enforcement) -> Self {
        self.floors[axis.index()] = level;
        self
    }

    /// Whether the policy confines the child (as opposed to [`SandboxPolicy::group_only`]).
    pub fn is_confined(&self) -> bool {
        self.mode == Mode::Confined
    }

    /// The floor required on `axis`.
    pub fn floor_of(&self, axis: Axis) -> Enforcement {
        self.floors[axis.index()]
    }

    /// The resource limits.
    pub fn limits(&self) -> &ResourceLimits {
        &self.limits
    }

    /// The uid and gid the child runs as, if switched.
    pub fn runs_as(&self) -> Option<(u32, u32)> {
        self.run_as
    }

    /// The extra read roots.
    pub fn read_paths(&self) -> &[PathBuf] {
        &self.read
    }

    /// The write roots.
    pub fn write_paths(&self) -> &[PathBuf] {
        &self.write
    }

    /// The exec roots.
    pub fn exec_paths(&self) -> &[PathBuf] {
        &self.exec
    }

    /// The TCP ports the child may connect to.
    pub fn tcp_connect_ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.tcp_connect.iter().copied()
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    pub(crate) fn has_tcp_grants(&self) -> bool {
        !self.tcp_connect.is_empty()
    }

    /// Whether the child may open internet sockets of any kind (its network
    /// is a private loopback, or the host's).
    /// Whether the child reaches any network: its own loopback, the host's,
    /// or granted TCP ports.
    pub(crate) fn reaches_network(&self) -> bool {
        self.network != NetworkAccess::None || !self.tcp_connect.is_empty()
    }

    pub(crate) fn opens_inet(&self) -> bool {
        self.network != NetworkAccess::None
    }

    /// Refuse a malformed policy: relative allowed paths, or grants on a group-only policy.
    pub(crate) fn validate(&self) -> Result<(), ToolError> {
        let grants = self.read.iter().chain(&self.write).chain(&self.exec);
        if self.mode == Mode::GroupOnly
            && (grants.clone().next().is_some() || self.has_tcp_grants() || self.network != NetworkAccess::None)
        {
            return Err(ToolError::InvalidPolicy {
                reason: "a group-only policy does not confine, so it cannot carry path or port grants".to_owned(),
            });
        }
        if let Some(path) = grants.map(PathBuf::as_path).find(|path| !Path::is_absolute(path)) {
            return Err(ToolError::InvalidPolicy {
                reason: format!("allowed path {} is not absolute", path.display()),
            });
        }
        let overlapping = self.write.iter().find_map(|write| {
            self.exec.iter().find(|exec| exec.starts_with(write) || write.starts_with(exec)).map(|exec| (write, exec))
        });
        if let Some((write, exec)) = overlapping {
            return Err(ToolError::InvalidPolicy {
                reason: format!(
                    "write root {} and exec root {} overlap: nothing may be both writable and executable",
                    write.display(),
                    exec.display()
                ),
            });
        }
        Ok(())
    }
}

impl Default for SandboxPolicy {
    /// [`SandboxPolicy::new`].
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confined_default_requires_kernel_where_the_kernel_can_deliver_it() {
        let policy = SandboxPolicy::new();
        assert!(policy.is_confined());
        for axis in Axis::ALL {
            let expected = match axis {
                Axis::Exec | Axis::IpcSignals => Enforcement::Partial,
                _ => Enforcement::Kernel,
            };
            assert_eq!(policy.floor_of(axis), expected, "{axis}");
        }
        assert_eq!(policy.limits(), &ResourceLimits::default());
        policy.validate().expect("the default is valid");
    }

    #[test]
    fn group_only_requires_only_the_group_filter() {
        let policy = SandboxPolicy::group_only();
        assert!(!policy.is_confined());
        for axis in Axis::ALL {
            let expected = if axis == Axis::IpcSignals { Enforcement::Partial } else { Enforcement::None };
            assert_eq!(policy.floor_of(axis), expected, "{axis}");
        }
        assert!(!policy.limits().any());
    }

    #[test]
    fn malformed_policies_are_refused() {
        let relative = SandboxPolicy::new().allow_write("relative/dir");
        assert!(matches!(relative.validate(), Err(ToolError::InvalidPolicy { .. })));
        let group_with_grant = SandboxPolicy::group_only().allow_read("/usr");
        assert!(matches!(group_with_grant.validate(), Err(ToolError::InvalidPolicy { .. })));
        let group_with_port = SandboxPolicy::group_only().allow_loopback_tcp(80);
        assert!(matches!(group_with_port.validate(), Err(ToolError::InvalidPolicy { .. })));
        let write_and_exec = SandboxPolicy::new().allow_write("/work/out").allow_exec("/work/out/bin");
        assert!(matches!(write_and_exec.validate(), Err(ToolError::InvalidPolicy { .. })));
        let exec_above_write = SandboxPolicy::new().allow_exec("/work").allow_write("/work/out");
        assert!(matches!(exec_above_write.validate(), Err(ToolError::InvalidPolicy { .. })));
        SandboxPolicy::new().allow_write("/work/out").allow_exec("/work/outside").validate().expect("siblings");
        SandboxPolicy::group_only().rlimits(ResourceLimits::default()).validate().expect("limits are fine");
    }
}

/// The space of the filesystem holding a path, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsSpace {
    /// Bytes an unprivileged writer may still use (`f_bavail`).
    pub available: u64,
    /// The filesystem's size (`f_blocks`).
    pub size: u64,
    /// Inodes an unprivileged writer may still use (`f_favail`); 0 with
    /// `inodes` where the filesystem does not count them (btrfs).
    pub inodes_available: u64,
    /// The filesystem's inodes (`f_files`).
    pub inodes: u64,
}

/// The space of the filesystem holding `path` (`statvfs`, one syscall): what
/// a guard on a confined command's disk use reads many times a second.
///
/// # Errors
///
/// The `statvfs` error (`ENOENT`, `EACCES`).
pub fn fs_space(path: &Path) -> std::io::Result<FsSpace> {
    let stat = rustix::fs::statvfs(path)?;
    Ok(FsSpace {
        available: stat.f_bavail.saturating_mul(stat.f_frsize),
        size: stat.f_blocks.saturating_mul(stat.f_frsize),
        inodes_available: stat.f_favail,
        inodes: stat.f_files,
    })
}
