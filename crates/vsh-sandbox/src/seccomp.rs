//! The seccomp program of a spawn, compiled once per kind in the parent into one BPF program.
//!
//! Every filter installed costs the child time, and so does every instruction: when a filter is
//! attached, the kernel runs it once per syscall number to precompute which numbers are always
//! allowed. A linear deny list of some 60 syscalls made that cost about 0.4 ms per spawn. So the
//! program is one binary search on the syscall number ([`search_tree`]):
//!
//! - it starts by killing the process on a foreign architecture (e.g. `int 0x80` on x86-64);
//! - ranges of consecutive denied numbers return `EPERM` in a leaf of two comparisons;
//! - on x86-64, x32 syscall numbers (`nr >= 0x40000000`) are one such range: they would
//!   otherwise reach the same kernel functions under numbers a deny list does not name;
//! - for confined children, `clone3` returns `ENOSYS`: its flags sit in a struct seccomp cannot
//!   read, and libc falls back to `clone`, whose namespace flags are checked;
//! - the few syscalls judged by their arguments (`socket`, `socketpair`, `clone`, `ioctl`,
//!   `personality`) are leaves compiled by seccompiler from [`SeccompRule`]s.
//!
//! For a [`crate::SandboxPolicy::group_only`] child the program denies only `setsid` and
//! `setpgid`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// What the filter must allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(clippy::struct_excessive_bools, reason = "five independent switches, one bit each of the program's slot")]
pub(crate) struct FilterSpec {
    /// The full deny list (confined), or only what keeps the process group killable.
    pub(crate) confined: bool,
    /// Whether TCP stream sockets are allowed (a TCP connect grant exists).
    pub(crate) tcp: bool,
    /// Whether `AF_INET`, `AF_INET6` and `AF_NETLINK` sockets of any kind
    /// are allowed (a private loopback network, or the host's).
    pub(crate) inet: bool,
    /// Whether `AF_UNIX` sockets may be made with `socket` (`socketpair` always may).
    pub(crate) unix: bool,
    /// Whether the child shares the host's System V IPC namespace (it has
    /// no namespaces of its own: no candidate): then its System V IPC calls are
    /// refused, or its segments and queues would outlive it on the host and
    /// carry what it put there to anyone (sec80 F1).
    pub(crate) shared_ipc: bool,
}

// Classic BPF opcodes (`<linux/bpf_common.h>`) for the hand-written search tree.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JMP_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_JMP_JGT_K: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
const BPF_JMP_JA: u16 = 0x05; // BPF_JMP | BPF_JA
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// Offsets into `struct seccomp_data`.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;

/// `__X32_SYSCALL_BIT`.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `AUDIT_ARCH_*` of the build target.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0x3e | 0x8000_0000 | 0x4000_0000; // EM_X86_64 | 64-bit | little-endian
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xb7 | 0x8000_0000 | 0x4000_0000; // EM_AARCH64 | 64-bit | little-endian

#[cfg(target_arch = "x86_64")]
const TARGET: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const TARGET: TargetArch = TargetArch::aarch64;

/// `open_tree_attr` (Linux 6.15) is not in the libc crate yet; it is a mount-API call.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// The `CLONE_NEW*` flags that `clone` can carry (`CLONE_NEWTIME` only exists for `clone3` and
/// `unshare`, both denied outright).
const CLONE_NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// Denied for a confined child whatever the arguments.
const DENIED_ALWAYS: &[libc::c_long] = &[
    // Another process's memory.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    // Mounts, old and new API, and root changes.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    SYS_OPEN_TREE_ATTR,
    // Namespaces.
    libc::SYS_unshare,
    libc::SYS_setns,
    // Kernel attack surface a tool has no use for.
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_fanotify_init,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    // The machine: kernel images, modules, power, swap, clock, names, accounting, log.
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_acct,
    libc::SYS_syslog,
    libc::SYS_vhangup,
];

/// x86-64 only: port I/O, LDT changes and other legacy interfaces.
#[cfg(target_arch = "x86_64")]
const DENIED_ALWAYS_ARCH: &[libc::c_long] = &[
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_modify_ldt,
    libc::SYS_uselib,
    libc::SYS_lookup_dcookie,
    libc::SYS_nfsservctl,
];
#[cfg(not(target_arch = "x86_64"))]
const DENIED_ALWAYS_ARCH: &[libc::c_long] = &[];

/// System V IPC: denied to a confined child in the host's IPC namespace.
const SYSV_IPC: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

/// Denied for every child: leaving the process group, so a group kill always reaches it.
const GROUP_ESCAPES: &[libc::c_long] = &[libc::SYS_setsid, libc::SYS_setpgid];

/// The program for `spec`, compiled on first use and then copied: there are only thirty-two.
pub(crate) fn program(spec: FilterSpec) -> Result<Vec<libc::sock_filter>, seccompiler::BackendError> {
    static PROGRAMS: [OnceLock<Vec<libc::sock_filter>>; 32] = [const { OnceLock::new() }; 32];
    let slot = &PROGRAMS[usize::from(spec.shared_ipc) * 16
        + usize::from(spec.confined) * 8
        + usize::from(spec.tcp) * 4
        + usize::from(spec.inet) * 2
        + usize::from(spec.unix)];
    if let Some(program) = slot.get() {
        return Ok(program.clone());
    }
    let program = build(spec)?;
    Ok(slot.get_or_init(|| program).clone())
}

/// Compile the filter for `spec` into instructions ready for `seccomp(SECCOMP_SET_MODE_FILTER)`.
fn build(spec: FilterSpec) -> Result<Vec<libc::sock_filter>, seccompiler::BackendError> {
    let mut program = arch_check().to_vec();
    program.push(statement(BPF_LD_W_ABS, DATA_NR));
    program.extend(search_tree(&entries(spec)?)?);
    Ok(program)
}

/// What the filter does with a range of syscall numbers.
#[derive(Clone, Debug)]
enum Verdict {
    /// Return this action (an errno) for every number in the range.
    Return(u32),
    /// One syscall judged by its arguments: seccompiler compiles the rules (any match: `EPERM`).
    Check(Vec<SeccompRule>),
}

/// A range of syscall numbers (`first..=last`) with one verdict; numbers in no entry are allowed.
#[derive(Clone, Debug)]
struct Entry {
    first: u32,
    last: u32,
    verdict: Verdict,
}

/// The sorted, disjoint entries of `spec`, consecutive denied numbers merged into ranges.
fn entries(spec: FilterSpec) -> Result<Vec<Entry>, seccompiler::BackendError> {
    let mut entries: Vec<Entry> = Vec::new();
    let number = |nr: i64| u32::try_from(nr).expect("syscall numbers are small and positive");
    let mut numbered: BTreeMap<u32, Verdict> = deny_rules(spec)?
        .into_iter()
        .map(|(nr, rules)| {
            let verdict = if rules.is_empty() { Verdict::Return(errno(libc::EPERM)) } else { Verdict::Check(rules) };
            (number(nr), verdict)
        })
        .collect();
    if spec.confined {
        numbered.insert(number(libc::SYS_clone3), Verdict::Return(errno(libc::ENOSYS)));
    }
    for (nr, verdict) in numbered {
        if let (Some(previous), Verdict::Return(action)) = (entries.last_mut(), &verdict)
            && matches!(previous.verdict, Verdict::Return(previous_action) if previous_action == *action)
            && previous.last + 1 == nr
        {
            previous.last = nr;
            continue;
        }
        entries.push(Entry { first: nr, last: nr, verdict });
    }
    #[cfg(target_arch = "x86_64")]
    entries.push(Entry { first: X32_SYSCALL_BIT, last: u32::MAX, verdict: Verdict::Return(errno(libc::EPERM)) });
    Ok(entries)
}

/// A binary search over `entries` (sorted, disjoint), with the syscall number in the accumulator.
fn search_tree(entries: &[Entry]) -> Result<Vec<libc::sock_filter>, seccompiler::BackendError> {
    match entries {
        [] => Ok(vec![statement(BPF_RET_K, libc::SECCOMP_RET_ALLOW)]),
        [entry] => leaf(entry),
        _ => {
            let (lower, upper) = entries.split_at(entries.len() / 2);
            let lower = search_tree(lower)?;
            let skip_lower = u32::try_from(lower.len()).expect("programs are shorter than 4096 instructions");
            // nr >= split: fall into the jump over the lower half; otherwise skip that jump.
            let mut program = vec![jump(BPF_JMP_JGE_K, upper[0].first, 0, 1), statement(BPF_JMP_JA, skip_lower)];
            program.extend(lower);
            program.extend(search_tree(upper)?);
            Ok(program)
        }
    }
}

/// One entry: a range returning its action, or a syscall whose arguments seccompiler checks.
fn leaf(entry: &Entry) -> Result<Vec<libc::sock_filter>, seccompiler::BackendError> {
    let allow = statement(BPF_RET_K, libc::SECCOMP_RET_ALLOW);
    match &entry.verdict {
        Verdict::Return(action) if entry.first == entry.last => {
            Ok(vec![jump(BPF_JMP_JEQ_K, entry.first, 0, 1), statement(BPF_RET_K, *action), allow])
        }
        Verdict::Return(action) => Ok(vec![
            jump(BPF_JMP_JGE_K, entry.first, 0, 2),
            jump(BPF_JMP_JGT_K, entry.last, 1, 0),
            statement(BPF_RET_K, *action),
            allow,
        ]),
        Verdict::Check(rules) => {
            let compiled: BpfProgram = SeccompFilter::new(
                BTreeMap::from([(i64::from(entry.first), rules.clone())]),
                SeccompAction::Allow,
                SeccompAction::Errno(libc::EPERM.cast_unsigned()),
                TARGET,
            )?
            .try_into()?;
            let mut checked: Vec<libc::sock_filter> = compiled
                .into_iter()
                .map(|insn| libc::sock_filter { code: insn.code, jt: insn.jt, jf: insn.jf, k: insn.k })
                .collect();
            // seccompiler starts with the architecture check the program already made.
            if checked.len() > ARCH_CHECK_LEN && same_program(&checked[..ARCH_CHECK_LEN], &arch_check()) {
                checked.drain(..ARCH_CHECK_LEN);
            }
            let mut program = vec![jump(BPF_JMP_JEQ_K, entry.first, 1, 0), allow];
            program.extend(checked);
            Ok(program)
        }
    }
}

const ARCH_CHECK_LEN: usize = 3;

/// Kill the process unless the syscall comes from the build target's architecture.
fn arch_check() -> [libc::sock_filter; ARCH_CHECK_LEN] {
    [
        statement(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH, 1, 0),
        statement(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
    ]
}

fn same_program(left: &[libc::sock_filter], right: &[libc::sock_filter]) -> bool {
    left.len() == right.len()
        && left.iter().zip(right).all(|(a, b)| (a.code, a.jt, a.jf, a.k) == (b.code, b.jt, b.jf, b.k))
}

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn errno(value: libc::c_int) -> u32 {
    libc::SECCOMP_RET_ERRNO | value.cast_unsigned()
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, seccompiler::BackendError> {
    // Dword compares the low 32 bits, which is what the kernel reads for these `int`/`unsigned
    // int` arguments (a value with high bits set cannot slip past a Qword compare either way).
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

fn as_u64(value: libc::c_int) -> u64 {
    u64::from(value.cast_unsigned())
}

fn deny_rules(spec: FilterSpec) -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::BackendError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in GROUP_ESCAPES {
        rules.insert(nr, Vec::new());
    }
    if !spec.confined {
        return Ok(rules);
    }
    for &nr in DENIED_ALWAYS.iter().chain(DENIED_ALWAYS_ARCH) {
        rules.insert(nr, Vec::new());
    }
    if spec.shared_ipc {
        for &nr in SYSV_IPC {
            rules.insert(nr, Vec::new());
        }
    }

    // clone(flags, ...) with any namespace flag.
    let clone_rules = CLONE_NAMESPACE_FLAGS
        .iter()
        .map(|&flag| SeccompRule::new(vec![condition(0, SeccompCmpOp::MaskedEq(as_u64(flag)), as_u64(flag))?]))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);

    rules.insert(libc::SYS_socket, socket_rules(spec.tcp, spec.inet, spec.unix)?);
    // socketpair only exists for AF_UNIX in practice; deny anything else.
    let mut pairs = vec![SeccompRule::new(vec![condition(0, SeccompCmpOp::Ne, as_u64(libc::AF_UNIX))?])?];
    if !spec.unix {
        // A datagram pair can be reconnected, or `sendto` any socket file, so
        // without unix sockets of its own a child gets stream and seqpacket
        // pairs only (connecting a connected one is EISCONN).
        pairs.push(SeccompRule::new(vec![
            condition(0, SeccompCmpOp::Eq, as_u64(libc::AF_UNIX))?,
            condition(1, SeccompCmpOp::MaskedEq(0xf), as_u64(libc::SOCK_DGRAM))?,
        ])?);
    }
    rules.insert(libc::SYS_socketpair, pairs);

    // Terminal input injection into an inherited terminal.
    let tiocsti = u64::from(u32::try_from(libc::TIOCSTI).expect("ioctl numbers fit in 32 bits"));
    let tioclinux = u64::from(u32::try_from(libc::TIOCLINUX).expect("ioctl numbers fit in 32 bits"));
    rules.insert(
        libc::SYS_ioctl,
        vec![
            SeccompRule::new(vec![condition(1, SeccompCmpOp::Eq, tiocsti)?])?,
            SeccompRule::new(vec![condition(1, SeccompCmpOp::Eq, tioclinux)?])?,
        ],
    );

    // personality() may be queried (0xffffffff) but not changed (e.g. to disable ASLR).
    rules.insert(libc::SYS_personality, vec![SeccompRule::new(vec![condition(0, SeccompCmpOp::Ne, 0xffff_ffff)?])?]);
    Ok(rules)
}

/// `socket(domain, type, protocol)`: `AF_UNIX` with `unix`; TCP streams when `tcp` is granted;
/// `AF_INET`, `AF_INET6` and `AF_NETLINK` of any kind with `inet`; nothing else.
fn socket_rules(tcp: bool, inet: bool, unix: bool) -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    // The rule that denies every family but `allowed`: no condition at all when none is.
    let other_than = |allowed: &[libc::c_int]| -> Result<SeccompRule, seccompiler::BackendError> {
        let mut families: Vec<libc::c_int> = allowed.to_vec();
        if unix {
            families.push(libc::AF_UNIX);
        }
        if families.is_empty() {
            return Err(seccompiler::BackendError::EmptyRule);
        }
        SeccompRule::new(
            families
                .into_iter()
                .map(|family| condition(0, SeccompCmpOp::Ne, as_u64(family)))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    if inet {
        return Ok(vec![other_than(&[libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK])?]);
    }
    if !tcp {
        // Every `socket` call is denied when no family is allowed: an empty rule list.
        return if unix { Ok(vec![other_than(&[])?]) } else { Ok(Vec::new()) };
    }
    let inet = [as_u64(libc::AF_INET), as_u64(libc::AF_INET6)];
    let mut rules = vec![other_than(&[libc::AF_INET, libc::AF_INET6])?];
    // The socket type is the low 4 bits of `type` (the rest are SOCK_NONBLOCK/SOCK_CLOEXEC).
    let stream = as_u64(libc::SOCK_STREAM);
    for domain in inet {
        for socket_type in (0..16).filter(|socket_type| *socket_type != stream) {
            rules.push(SeccompRule::new(vec![
                condition(0, SeccompCmpOp::Eq, domain)?,
                condition(1, SeccompCmpOp::MaskedEq(0xf), socket_type)?,
            ])?);
        }
        // A stream socket must be TCP (protocol 0 or IPPROTO_TCP), not SCTP or MPTCP.
        rules.push(SeccompRule::new(vec![
            condition(0, SeccompCmpOp::Eq, domain)?,
            condition(2, SeccompCmpOp::Ne, 0)?,
            condition(2, SeccompCmpOp::Ne, as_u64(libc::IPPROTO_TCP))?,
        ])?);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `program` on a `struct seccomp_data` the way the kernel does (only the instructions
    /// these programs use), and return the action.
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                0 => nr,
                4 => arch,
                16..=63 => {
                    let arg = args[(offset as usize - 16) / 8];
                    if offset.is_multiple_of(8) { arg as u32 } else { (arg >> 32) as u32 }
                }
                _ => panic!("load from offset {offset}"),
            }
        };
        let (mut pc, mut accumulator) = (0_usize, 0_u32);
        loop {
            let insn = program[pc];
            pc += 1;
            match insn.code {
                BPF_LD_W_ABS => accumulator = word(insn.k),
                0x54 => accumulator &= insn.k, // BPF_ALU | BPF_AND | BPF_K
                BPF_JMP_JA => pc += insn.k as usize,
                BPF_JMP_JEQ_K | BPF_JMP_JGE_K | BPF_JMP_JGT_K => {
                    let taken = match insn.code {
                        BPF_JMP_JEQ_K => accumulator == insn.k,
                        BPF_JMP_JGE_K => accumulator >= insn.k,
                        _ => accumulator > insn.k,
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
                BPF_RET_K => return insn.k,
                other => panic!("unexpected opcode {other:#x} at {}", pc - 1),
            }
        }
    }

    fn nr(number: libc::c_long) -> u32 {
        u32::try_from(number).expect("small")
    }

    fn arg(value: libc::c_int) -> u64 {
        as_u64(value)
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

    #[test]
    fn the_confined_filter_denies_exactly_the_deny_list() {
        let program = build(FilterSpec { confined: true, tcp: false, inet: false, unix: true, shared_ipc: false })
            .expect("the filter compiles");
        assert!(program.len() < 4096, "{} instructions", program.len());
        // Written from the policy's documentation, not taken from the constants above.
        let mut denied: Vec<u32> = [
            libc::SYS_setsid,
            libc::SYS_setpgid,
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_pidfd_getfd,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_chroot,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            libc::SYS_mount_setattr,
            467, // open_tree_attr
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_bpf,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_perf_event_open,
            libc::SYS_userfaultfd,
            libc::SYS_open_by_handle_at,
            libc::SYS_fanotify_init,
            libc::SYS_quotactl,
            libc::SYS_quotactl_fd,
            libc::SYS_kexec_load,
            libc::SYS_kexec_file_load,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_reboot,
            libc::SYS_swapon,
            libc::SYS_swapoff,
            libc::SYS_settimeofday,
            libc::SYS_clock_settime,
            libc::SYS_clock_adjtime,
            libc::SYS_adjtimex,
            libc::SYS_sethostname,
            libc::SYS_setdomainname,
            libc::SYS_acct,
            libc::SYS_syslog,
            libc::SYS_vhangup,
        ]
        .into_iter()
        .map(nr)
        .collect();
        #[cfg(target_arch = "x86_64")]
        denied.extend(
            [
                libc::SYS_iopl,
                libc::SYS_ioperm,
                libc::SYS_modify_ldt,
                libc::SYS_uselib,
                libc::SYS_lookup_dcookie,
                libc::SYS_nfsservctl,
            ]
            .map(nr),
        );
        let conditional =
            [libc::SYS_clone, libc::SYS_socket, libc::SYS_socketpair, libc::SYS_ioctl, libc::SYS_personality];
        for number in 0..600 {
            if conditional.iter().any(|&n| nr(n) == number) {
                continue;
            }
            let expected = if denied.contains(&number) {
                errno(libc::EPERM)
            } else if number == nr(libc::SYS_clone3) {
                errno(libc::ENOSYS)
            } else {
                ALLOW
            };
            assert_eq!(run(&program, AUDIT_ARCH, number, [0; 6]), expected, "syscall {number}");
        }
    }

    /// sec80 F1 beyond candidates: a confined child without namespaces of
    /// its own shares the host's System V IPC namespace, so its System V calls
    /// are refused; a candidate's child, in its own, keeps them.
    #[test]
    fn a_child_in_the_hosts_ipc_namespace_is_refused_system_v_ipc() {
        let shared = build(FilterSpec { confined: true, tcp: false, inet: false, unix: true, shared_ipc: true })
            .expect("the filter compiles");
        let own = build(FilterSpec { confined: true, tcp: false, inet: false, unix: true, shared_ipc: false })
            .expect("the filter compiles");
        let loose = build(FilterSpec { confined: false, tcp: false, inet: false, unix: true, shared_ipc: true })
            .expect("the filter compiles");
        for number in
            [libc::SYS_shmget, libc::SYS_shmat, libc::SYS_msgget, libc::SYS_msgsnd, libc::SYS_semget, libc::SYS_semop]
        {
            assert_eq!(run(&shared, AUDIT_ARCH, nr(number), [0; 6]), errno(libc::EPERM), "{number}");
            assert_eq!(run(&own, AUDIT_ARCH, nr(number), [0; 6]), ALLOW, "{number}");
            assert_eq!(run(&loose, AUDIT_ARCH, nr(number), [0; 6]), ALLOW, "{number}: a group-only child");
        }
    }

    #[test]
    fn the_confined_filter_checks_arguments() {
        let program = build(FilterSpec { confined: true, tcp: false, inet: false, unix: true, shared_ipc: false })
            .expect("the filter compiles");
        let call = |number: libc::c_long, args: [u64; 6]| run(&program, AUDIT_ARCH, nr(number), args);
        let eperm = errno(libc::EPERM);
        let stream = arg(libc::SOCK_STREAM | libc::SOCK_CLOEXEC);
        assert_eq!(call(libc::SYS_socket, [arg(libc::AF_UNIX), stream, 0, 0, 0, 0]), ALLOW);
        for family in [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK, libc::AF_PACKET, libc::AF_VSOCK] {
            assert_eq!(call(libc::SYS_socket, [arg(family), stream, 0, 0, 0, 0]), eperm, "family {family}");
        }
        assert_eq!(call(libc::SYS_socketpair, [arg(libc::AF_UNIX), stream, 0, 0, 0, 0]), ALLOW);
        let fork_flags = arg(libc::SIGCHLD);
        assert_eq!(call(libc::SYS_clone, [fork_flags, 0, 0, 0, 0, 0]), ALLOW);
        let thread_flags = arg(libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND | libc::CLONE_FILES);
        assert_eq!(call(libc::SYS_clone, [thread_flags, 0, 0, 0, 0, 0]), ALLOW);
        for flag in CLONE_NAMESPACE_FLAGS {
            assert_eq!(call(libc::SYS_clone, [fork_flags | arg(flag), 0, 0, 0, 0, 0]), eperm, "clone flag {flag:#x}");
        }
        let tiocsti = u64::from(u32::try_from(libc::TIOCSTI).expect("small"));
        assert_eq!(call(libc::SYS_ioctl, [0, tiocsti, 0, 0, 0, 0]), eperm);
        assert_eq!(
            call(libc::SYS_ioctl, [0, u64::from(u32::try_from(libc::TCGETS).expect("small")), 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(call(libc::SYS_personality, [0xffff_ffff, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(libc::SYS_personality, [0x0040_0000, 0, 0, 0, 0, 0]), eperm);
    }

    #[test]
    fn a_tcp_grant_allows_tcp_streams_only() {
        let program = build(FilterSpec { confined: true, tcp: true, inet: false, unix: true, shared_ipc: false })
            .expect("the filter compiles");
        let socket = |family: libc::c_int, kind: libc::c_int, protocol: libc::c_int| {
            run(&program, AUDIT_ARCH, nr(libc::SYS_socket), [arg(family), arg(kind), arg(protocol), 0, 0, 0])
        };
        let eperm = errno(libc::EPERM);
        for family in [libc::AF_INET, libc::AF_INET6] {
            assert_eq!(socket(family, libc::SOCK_STREAM, 0), ALLOW);
            assert_eq!(socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, libc::IPPROTO_TCP), ALLOW);
            assert_eq!(socket(family, libc::SOCK_DGRAM, 0), eperm);
            assert_eq!(socket(family, libc::SOCK_RAW, libc::IPPROTO_ICMP), eperm);
            assert_eq!(socket(family, libc::SOCK_STREAM, libc::IPPROTO_SCTP), eperm);
        }
        assert_eq!(socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0), ALLOW);
        assert_eq!(socket(libc::AF_NETLINK, libc::SOCK_RAW, 0), eperm);
    }

    #[test]
    fn a_network_of_its_own_allows_inet_and_netlink_sockets_and_nothing_else() {
        let program = build(FilterSpec { confined: true, tcp: false, inet: true, unix: true, shared_ipc: false })
            .expect("the filter compiles");
        let socket = |family: libc::c_int, kind: libc::c_int, protocol: libc::c_int| {
            run(&program, AUDIT_ARCH, nr(libc::SYS_socket), [arg(family), arg(kind), arg(protocol), 0, 0, 0])
        };
        let eperm = errno(libc::EPERM);
        for family in [libc::AF_INET, libc::AF_INET6] {
            assert_eq!(socket(family, libc::SOCK_STREAM, 0), ALLOW);
            assert_eq!(socket(family, libc::SOCK_DGRAM, 0), ALLOW);
        }
        assert_eq!(socket(libc::AF_NETLINK, libc::SOCK_RAW, 0), ALLOW);
        assert_eq!(socket(libc::AF_UNIX, libc::SOCK_STREAM, 0), ALLOW);
        for family in [libc::AF_PACKET, libc::AF_VSOCK, libc::AF_BLUETOOTH, libc::AF_ALG] {
            assert_eq!(socket(family, libc::SOCK_RAW, 0), eperm, "family {family}");
        }
    }

    #[test]
    fn without_unix_sockets_socket_is_denied_for_every_family_and_only_stream_pairs_stay() {
        let eperm = errno(libc::EPERM);
        for (tcp, inet) in [(false, false), (true, false), (false, true)] {
            let program = build(FilterSpec { confined: true, tcp, inet, unix: false, shared_ipc: false })
                .expect("the filter compiles");
            let call = |number: libc::c_long, family: libc::c_int, kind: libc::c_int| {
                run(&program, AUDIT_ARCH, nr(number), [arg(family), arg(kind), 0, 0, 0, 0])
            };
            for kind in [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC] {
                assert_eq!(call(libc::SYS_socket, libc::AF_UNIX, kind), eperm, "tcp {tcp} inet {inet} type {kind}");
            }
            // Stream and seqpacket pairs only: a datagram pair could `sendto` any socket file.
            for kind in [libc::SOCK_STREAM, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC] {
                assert_eq!(call(libc::SYS_socketpair, libc::AF_UNIX, kind), ALLOW, "tcp {tcp} inet {inet}");
            }
            for kind in [libc::SOCK_DGRAM, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK] {
                assert_eq!(call(libc::SYS_socketpair, libc::AF_UNIX, kind), eperm, "tcp {tcp} inet {inet}");
            }
            let inet_allowed = if tcp || inet { ALLOW } else { eperm };
            assert_eq!(call(libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM), inet_allowed, "tcp {tcp} inet {inet}");
            assert_eq!(call(libc::SYS_socket, libc::AF_PACKET, libc::SOCK_RAW), eperm);
        }
    }

    #[test]
    fn foreign_architectures_are_killed_and_x32_is_denied() {
        for confined in [false, true] {
            let program = build(FilterSpec { confined, tcp: false, inet: false, unix: false, shared_ipc: false })
                .expect("the filter compiles");
            let i386 = 0x03 | 0x4000_0000; // EM_386 | little-endian
            assert_eq!(run(&program, i386, 1, [0; 6]), libc::SECCOMP_RET_KILL_PROCESS);
            #[cfg(target_arch = "x86_64")]
            for x32 in [X32_SYSCALL_BIT, X32_SYSCALL_BIT | 1, X32_SYSCALL_BIT | nr(libc::SYS_ptrace), u32::MAX] {
                assert_eq!(run(&program, AUDIT_ARCH, x32, [0; 6]), errno(libc::EPERM), "{x32:#x}");
            }
        }
    }

    #[test]
    fn group_only_denies_only_the_group_escapes() {
        let program = build(FilterSpec { confined: false, tcp: false, inet: false, unix: true, shared_ipc: false })
            .expect("the filter compiles");
        for number in 0..600 {
            let expected = if [nr(libc::SYS_setsid), nr(libc::SYS_setpgid)].contains(&number) {
                errno(libc::EPERM)
            } else {
                ALLOW
            };
            assert_eq!(run(&program, AUDIT_ARCH, number, [0; 6]), expected, "syscall {number}");
        }
    }

    #[test]
    fn consecutive_denials_merge_into_ranges() {
        let entries = entries(FilterSpec { confined: true, tcp: false, inet: false, unix: true, shared_ipc: false })
            .expect("entries");
        let open_tree = nr(libc::SYS_open_tree);
        let mount_api =
            entries.iter().find(|entry| (entry.first..=entry.last).contains(&open_tree)).expect("open_tree");
        assert!(mount_api.last >= nr(libc::SYS_fspick), "open_tree..=fspick is one range");
        assert!(entries.windows(2).all(|pair| pair[0].last < pair[1].first), "sorted and disjoint");
    }

    #[test]
    fn cached_programs_equal_fresh_ones() {
        for spec in [
            FilterSpec { confined: true, tcp: false, inet: false, unix: true, shared_ipc: false },
            FilterSpec { confined: false, tcp: true, inet: false, unix: true, shared_ipc: false },
            FilterSpec { confined: true, tcp: false, inet: false, unix: false, shared_ipc: false },
        ] {
            let cached = program(spec).expect("compiles");
            assert!(same_program(&cached, &program(spec).expect("compiles")));
            assert!(same_program(&cached, &build(spec).expect("compiles")));
        }
    }
}
