//! What this kernel can enforce ([`probe`]), and the per-axis report of a policy on it.
//!
//! The probe never restricts the calling process: it asks `landlock_create_ruleset` for the
//! ABI version and `seccomp(SECCOMP_GET_ACTION_AVAIL)` whether filters can return errors.
//! [`KernelSupport::emulated`] builds the answer of another kernel, so the report can be
//! tested for every ABI on any machine.

use std::fmt::Write as _;
use std::sync::OnceLock;

use crate::policy::{Mode, NetworkAccess, ResourceLimits, SandboxPolicy};
use crate::report::{Axis, AxisReport, Enforcement, EnforcementReport};
use crate::sys;

/// The newest Landlock ABI whose rights this crate was reviewed and tested against.
///
/// The ruleset handles every right of `min(kernel ABI, this)`, never "everything the landlock
/// crate knows": a newer ABI's rights are adopted by raising this constant after testing them.
pub const NEWEST_REVIEWED_LANDLOCK_ABI: u32 = 7;

/// What the running kernel can enforce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KernelSupport {
    /// The Landlock ABI version the kernel reports, or `None` if Landlock is not built in or
    /// not enabled at boot.
    pub landlock_abi: Option<u32>,
    /// Whether seccomp filters (with `SECCOMP_RET_ERRNO`) are available.
    pub seccomp: bool,
}

/// Probe the running kernel. Cheap after the first call: the answer is cached for the life of
/// the process (a kernel does not gain or lose these features while running).
pub fn probe() -> KernelSupport {
    static SUPPORT: OnceLock<KernelSupport> = OnceLock::new();
    *SUPPORT.get_or_init(|| KernelSupport {
        landlock_abi: sys::landlock_abi_version(),
        seccomp: sys::seccomp_filter_available(),
    })
}

impl KernelSupport {
    /// The support of a hypothetical kernel, to see what a policy would get there.
    pub const fn emulated(landlock_abi: Option<u32>, seccomp: bool) -> Self {
        Self { landlock_abi, seccomp }
    }

    /// The Landlock ABI whose rights a ruleset handles here: the kernel's, capped at
    /// [`NEWEST_REVIEWED_LANDLOCK_ABI`]; `None` without Landlock.
    pub fn landlock_rights_abi(&self) -> Option<u32> {
        self.landlock_abi.filter(|abi| *abi >= 1).map(|abi| abi.min(NEWEST_REVIEWED_LANDLOCK_ABI))
    }

    /// The per-axis enforcement `policy` gets on this kernel, with the policy's floors.
    ///
    /// The report assumes the child runs as the uid [`SandboxPolicy::run_as`] names, or as the
    /// calling process's effective uid.
    pub fn report_for(&self, policy: &SandboxPolicy) -> EnforcementReport {
        let child_uid = policy.runs_as().map_or_else(|| rustix::process::geteuid().as_raw(), |(uid, _)| uid);
        report(self, policy, child_uid == 0)
    }
}

/// [`KernelSupport::report_for`] with the child's uid decided.
pub(crate) fn report(support: &KernelSupport, policy: &SandboxPolicy, child_is_root: bool) -> EnforcementReport {
    let levels = match policy.mode() {
        Mode::Confined => confined_levels(support, policy, child_is_root),
        Mode::GroupOnly => group_only_levels(support, policy, child_is_root),
    };
    let axes = Axis::ALL
        .into_iter()
        .zip(levels)
        .map(|(axis, (level, reason))| AxisReport::new(axis, level, policy.floor_of(axis), reason))
        .collect();
    let confined = policy.mode() == Mode::Confined;
    let landlock = if confined { support.landlock_rights_abi() } else { None };
    EnforcementReport::new(axes, confined, landlock, support.seccomp)
}

type Level = (Enforcement, String);

fn confined_levels(support: &KernelSupport, policy: &SandboxPolicy, child_is_root: bool) -> [Level; 6] {
    let abi = support.landlock_rights_abi();
    let seccomp = support.seccomp;
    let no_landlock = || (Enforcement::None, "Landlock unavailable: not restricted".to_owned());

    let fs_read = abi.map_or_else(no_landlock, |abi| {
        (Enforcement::Kernel, format!("Landlock ABI {abi}: reads only beneath the system, read, write and exec roots"))
    });
    let fs_write = match abi {
        Some(abi) if abi >= 3 => (
            Enforcement::Kernel,
            format!(
                "Landlock ABI {abi}: writes, creations, removals, renames and truncation only beneath the write roots"
            ),
        ),
        Some(abi) => (Enforcement::Partial, format!("Landlock ABI {abi}: truncate(2) is not governed before ABI 3")),
        None => no_landlock(),
    };
    // Partial, not Kernel: Landlock governs execve(2) of files, but a readable ELF
    // still runs through the dynamic loader, a memfd can be executed, and a granted
    // interpreter runs whatever it is given. Claiming Kernel would overstate it.
    let exec = abi.map_or_else(no_landlock, |abi| {
        (
            Enforcement::Partial,
            format!(
                "Landlock ABI {abi}: execve only of granted programs and beneath the exec roots; \
                 not covered: code run by a granted interpreter, by the dynamic loader run directly, or from a memfd"
            ),
        )
    });
    let network = network_level(abi, seccomp, policy);
    let ipc = ipc_level(abi, seccomp, policy.unix_sockets_allowed());
    let (level, reason) = resources_level(policy.limits(), policy.runs_as(), child_is_root, true);
    let resources = match policy.tree_memory() {
        Some(bytes) if crate::cgroup::MemoryGroup::available() => {
            (level, format!("{reason}; the whole tree's memory at most {bytes} bytes (a memory cgroup of its own)"))
        }
        Some(_) => (
            level,
            format!("{reason}; the whole tree's memory is not bounded (no writable cgroup v1 memory controller)"),
        ),
        None => (level, reason),
    };
    [fs_read, fs_write, exec, network, ipc, resources]
}

fn network_level(abi: Option<u32>, seccomp: bool, policy: &SandboxPolicy) -> Level {
    let tcp_abi = abi.filter(|abi| *abi >= 4);
    let unix = if policy.unix_sockets_allowed() { "AF_UNIX and " } else { "" };
    match policy.network_access() {
        NetworkAccess::None => {}
        NetworkAccess::Loopback => {
            return (
                Enforcement::Kernel,
                "a private network namespace holding only its own loopback interface: nothing outside the \
                 sandbox is reachable, the host's loopback included"
                    .to_owned(),
            );
        }
        NetworkAccess::All => return (Enforcement::None, "the host's network, unrestricted (as granted)".to_owned()),
    }
    if policy.has_tcp_grants() {
        let mut ports = String::new();
        for (index, port) in policy.tcp_connect_ports().enumerate() {
            let separator = if index == 0 { "" } else { ", " };
            let _ = write!(ports, "{separator}{port}");
        }
        return match (seccomp, tcp_abi) {
            (false, None) => (Enforcement::None, "neither seccomp nor Landlock TCP rules (ABI 4) available".to_owned()),
            (true, Some(abi)) => (
                Enforcement::Partial,
                format!(
                    "TCP connect allowed to port {ports} on any address (Landlock ABI {abi} matches ports, not addresses); \
                     seccomp: sockets only {unix}TCP streams"
                ),
            ),
            (true, None) => (
                Enforcement::Partial,
                format!("seccomp: sockets only {unix}TCP streams; TCP connect unrestricted without Landlock ABI 4"),
            ),
            (false, Some(abi)) => (
                Enforcement::Partial,
                format!(
                    "Landlock ABI {abi}: TCP connect only to port {ports}; UDP, raw and netlink sockets open without seccomp"
                ),
            ),
        };
    }
    let sockets = if policy.unix_sockets_allowed() {
        "socket() only for AF_UNIX"
    } else {
        "no socket() (stream socketpairs only)"
    };
    match (seccomp, tcp_abi) {
        (true, Some(abi)) => {
            (Enforcement::Kernel, format!("seccomp: {sockets}; Landlock ABI {abi}: every TCP bind and connect denied"))
        }
        (true, None) => (Enforcement::Kernel, format!("seccomp: {sockets} (Landlock TCP rules need ABI 4)")),
        (false, Some(abi)) => (
            Enforcement::Partial,
            format!(
                "Landlock ABI {abi}: TCP bind and connect denied; UDP, raw and netlink sockets open without seccomp"
            ),
        ),
        (false, None) => (Enforcement::None, "neither seccomp nor Landlock TCP rules (ABI 4) available".to_owned()),
    }
}

fn ipc_level(abi: Option<u32>, seccomp: bool, unix_sockets: bool) -> Level {
    let scope_abi = abi.filter(|abi| *abi >= 6);
    let filter = "seccomp denies ptrace, process_vm_*, setsid, setpgid and terminal injection";
    match (scope_abi, seccomp) {
        // Pathname unix sockets outside the roots stay reachable until Landlock ABI 9, unless
        // seccomp keeps the child from making a unix socket at all.
        (Some(abi), true) if !unix_sockets => (
            Enforcement::Kernel,
            format!(
                "Landlock ABI {abi}: signals and abstract unix sockets scoped to the sandbox; {filter}; \
                 seccomp denies socket(AF_UNIX) and datagram socketpairs (stream pairs only), so no socket file \
                 outside is reachable"
            ),
        ),
        (Some(abi), true) => (
            if abi >= 9 { Enforcement::Kernel } else { Enforcement::Partial },
            format!(
                "Landlock ABI {abi}: signals and abstract unix sockets scoped to the sandbox; {filter}; \
                 not covered: connecting to pathname unix sockets (needs Landlock ABI 9)"
            ),
        ),
        (Some(abi), false) => (
            Enforcement::Partial,
            format!(
                "Landlock ABI {abi}: signals and abstract unix sockets scoped; no seccomp, so setsid and ptrace stay open"
            ),
        ),
        (None, true) => (
            Enforcement::Partial,
            format!("{filter}; signals and abstract unix sockets not scoped (needs Landlock ABI 6)"),
        ),
        (None, false) => (Enforcement::None, "neither seccomp nor Landlock scopes (ABI 6) available".to_owned()),
    }
}

fn resources_level(limits: &ResourceLimits, runs_as: Option<(u32, u32)>, child_is_root: bool, confined: bool) -> Level {
    let mut set = String::new();
    let named = [
        ("CPU", limits.cpu_seconds, "s"),
        ("AS", limits.address_space_bytes, " bytes"),
        ("DATA", limits.data_bytes, " bytes"),
        ("FSIZE", limits.file_size_bytes, " bytes"),
        ("NOFILE", limits.open_files, ""),
        ("NPROC", limits.processes, ""),
    ];
    for (name, value, unit) in named {
        if let Some(value) = value {
            let separator = if set.is_empty() { "" } else { ", " };
            let _ = write!(set, "{separator}{name} {value}{unit}");
        }
    }
    if confined {
        let separator = if set.is_empty() { "" } else { ", " };
        let _ = write!(set, "{separator}CORE 0");
    }
    if set.is_empty() {
        return (Enforcement::None, "no rlimits set".to_owned());
    }
    let user = match runs_as {
        Some((uid, gid)) => format!("; runs as uid {uid} gid {gid}"),
        None => format!("; runs as the caller's uid {}", rustix::process::geteuid().as_raw()),
    };
    let extras = if confined {
        format!("; no_new_privs; all capabilities dropped{user}")
    } else {
        format!("; no_new_privs{user}")
    };
    if limits.processes.is_some() && child_is_root {
        return (
            Enforcement::Partial,
            format!("rlimits: {set}{extras}; RLIMIT_NPROC is not enforced for uid 0 (use run_as)"),
        );
    }
    (Enforcement::Kernel, format!("rlimits: {set}{extras}"))
}

fn group_only_levels(support: &KernelSupport, policy: &SandboxPolicy, child_is_root: bool) -> [Level; 6] {
    let not_confined = || (Enforcement::None, "not confined (group-only policy)".to_owned());
    let ipc = if support.seccomp {
        (
            Enforcement::Partial,
            "seccomp denies setsid and setpgid, so the process group stays killable; \
             signals, sockets and ptrace are not restricted"
                .to_owned(),
        )
    } else {
        (Enforcement::None, "seccomp unavailable: the child can leave its process group".to_owned())
    };
    [
        not_confined(),
        not_confined(),
        not_confined(),
        not_confined(),
        ipc,
        resources_level(policy.limits(), policy.runs_as(), child_is_root, false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(report: &EnforcementReport) -> Vec<Enforcement> {
        report.axes().iter().map(AxisReport::level).collect()
    }

    #[test]
    fn rights_are_pinned_to_the_newest_reviewed_abi() {
        assert_eq!(KernelSupport::emulated(Some(10), true).landlock_rights_abi(), Some(NEWEST_REVIEWED_LANDLOCK_ABI));
        assert_eq!(KernelSupport::emulated(Some(3), true).landlock_rights_abi(), Some(3));
        assert_eq!(KernelSupport::emulated(Some(0), true).landlock_rights_abi(), None);
        assert_eq!(KernelSupport::emulated(None, true).landlock_rights_abi(), None);
    }

    #[test]
    fn confined_policy_per_emulated_kernel() {
        use Enforcement::{Kernel, None as No, Partial};
        // Exec is never Kernel (loader, memfd). IPC is Kernel from the scopes of ABI 6 with
        // seccomp denying the child a unix socket of its own; with unix sockets allowed, only
        // from ABI 9 (pathname unix sockets), newer than the rights reviewed here.
        let sockets = SandboxPolicy::new().allow_unix_sockets();
        for abi in [7, 6] {
            let support = KernelSupport::emulated(Some(abi), true);
            let without = report(&support, &SandboxPolicy::new(), true);
            assert_eq!(levels(&without), [Kernel, Kernel, Partial, Kernel, Kernel, Kernel], "landlock {abi}");
            let with = report(&support, &sockets, true);
            assert_eq!(levels(&with), [Kernel, Kernel, Partial, Kernel, Partial, Kernel], "landlock {abi}");
        }
        let policy = SandboxPolicy::new();
        let cases = [
            (Some(5), true, [Kernel, Kernel, Partial, Kernel, Partial, Kernel]),
            (Some(3), true, [Kernel, Kernel, Partial, Kernel, Partial, Kernel]),
            (Some(2), true, [Kernel, Partial, Partial, Kernel, Partial, Kernel]),
            (Some(7), false, [Kernel, Kernel, Partial, Partial, Partial, Kernel]),
            (None, true, [No, No, No, Kernel, Partial, Kernel]),
            (None, false, [No, No, No, No, No, Kernel]),
        ];
        for (abi, seccomp, expected) in cases {
            let report = report(&KernelSupport::emulated(abi, seccomp), &policy, true);
            assert_eq!(levels(&report), expected, "landlock {abi:?}, seccomp {seccomp}");
        }
    }

    #[test]
    fn a_tcp_grant_is_partial_because_landlock_matches_ports_only() {
        let policy = SandboxPolicy::new().allow_loopback_tcp(8080);
        let report = report(&KernelSupport::emulated(Some(7), true), &policy, true);
        let network = report.axis(Axis::Network);
        assert_eq!(network.level(), Enforcement::Partial);
        assert!(network.reason().contains("8080"), "{}", network.reason());
        assert_eq!(report.first_below_floor().map(AxisReport::axis), Some(Axis::Network));
    }

    #[test]
    fn nproc_for_root_is_partial_and_fine_for_another_uid() {
        let limits = ResourceLimits { processes: Some(10), ..ResourceLimits::default() };
        let policy = SandboxPolicy::new().rlimits(limits);
        let support = KernelSupport::emulated(Some(7), true);
        assert_eq!(report(&support, &policy, true).level(Axis::Resources), Enforcement::Partial);
        assert_eq!(report(&support, &policy, false).level(Axis::Resources), Enforcement::Kernel);
        let as_nobody = policy.run_as(65534, 65534);
        assert_eq!(support.report_for(&as_nobody).level(Axis::Resources), Enforcement::Kernel);
    }

    #[test]
    fn group_only_reports_none_except_the_group_filter() {
        use Enforcement::{None as No, Partial};
        let policy = SandboxPolicy::group_only();
        let with_seccomp = report(&KernelSupport::emulated(Some(7), true), &policy, true);
        assert_eq!(levels(&with_seccomp), [No, No, No, No, Partial, No]);
        assert!(with_seccomp.first_below_floor().is_none());
        assert_eq!(with_seccomp.landlock_abi(), None);
        let without = report(&KernelSupport::emulated(Some(7), false), &policy, true);
        assert_eq!(without.first_below_floor().map(AxisReport::axis), Some(Axis::IpcSignals));
    }

    #[test]
    fn the_probe_does_not_restrict_the_caller() {
        let before = rustix::thread::no_new_privs().expect("prctl works");
        let _ = (sys::landlock_abi_version(), sys::seccomp_filter_available(), probe());
        assert_eq!(rustix::thread::no_new_privs().expect("prctl works"), before, "probing must not set no_new_privs");
        assert!(std::fs::read_dir("/").is_ok());
    }
}
