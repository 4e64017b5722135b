//! Raw system calls: the only `unsafe` code of this crate.
//!
//! Each function wraps one call, so its safety argument fits in the comment above it. The
//! functions used between `fork` and `exec` ([`landlock_restrict_self`], [`seccomp_set_filter`])
//! are async-signal-safe: they allocate nothing, take no lock, and only read memory prepared by
//! the parent before the fork.

use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _};
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use crate::setup::ChildSetup;

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The Landlock ABI version of the running kernel, or `None` when Landlock is unavailable.
///
/// Restricts nothing: with this flag the kernel only reports the version.
pub(crate) fn landlock_abi_version() -> Option<u32> {
    // SAFETY: with a null attribute pointer, a size of 0 and the VERSION flag, the kernel reads
    // no memory and returns the version, or -1 with errno when Landlock is unavailable.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0_usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).ok().filter(|version| *version > 0)
}

/// Whether seccomp filters that return an errno are available.
///
/// Restricts nothing: `SECCOMP_GET_ACTION_AVAIL` only asks the kernel about an action.
pub(crate) fn seccomp_filter_available() -> bool {
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 through the pointer, which points at
    // `action`, alive for the whole call; the call changes no state.
    let result = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_ACTION_AVAIL, 0_u32, &raw const action) };
    result == 0
}

/// `landlock_restrict_self(ruleset, 0)`: confine the calling thread (and what it executes).
///
/// Async-signal-safe.
pub(crate) fn landlock_restrict_self(ruleset: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: the call takes a file descriptor, borrowed and therefore open, and a flags word;
    // it reads no memory of ours.
    let result = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0_u32) };
    if result == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// `struct landlock_path_beneath_attr` (`<linux/landlock.h>`), packed as the kernel reads it.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: u32 = 1;
/// `LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR` (ABI 1).
const LANDLOCK_READ: u64 = (1 << 2) | (1 << 3);

/// `landlock_add_rule(ruleset, PATH_BENEATH, {read files, read directories; dir})`:
/// let the ruleset read beneath `dir` (a mount the child made itself, after
/// the parent built the ruleset: its own `/proc`).
///
/// Async-signal-safe.
pub(crate) fn landlock_allow_reading(ruleset: BorrowedFd<'_>, dir: BorrowedFd<'_>) -> io::Result<()> {
    let attr = PathBeneathAttr { allowed_access: LANDLOCK_READ, parent_fd: dir.as_raw_fd() };
    // SAFETY: the call takes two borrowed (open) descriptors' numbers and a
    // pointer to `attr`, ours and alive for the call, in the layout the
    // kernel reads for PATH_BENEATH; it writes no memory of ours.
    let result = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &raw const attr,
            0_u32,
        )
    };
    if result == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, 0, program)`: install a filter on the calling thread.
///
/// Async-signal-safe. Needs `no_new_privs` (or `CAP_SYS_ADMIN`).
pub(crate) fn seccomp_set_filter(program: &[libc::sock_filter]) -> io::Result<()> {
    let Ok(len) = u16::try_from(program.len()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let fprog = libc::sock_fprog { len, filter: program.as_ptr().cast_mut() };
    // SAFETY: `fprog` points at `len` initialized instructions borrowed for the whole call; the
    // kernel copies them and never writes through the pointer.
    let result = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0_u32, &raw const fprog) };
    if result == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// The program, arguments and environment of an `execveat` by descriptor,
/// built in the parent so the child only reads them.
pub(crate) struct ExecImage {
    /// The program, opened `O_PATH | O_CLOEXEC` by the parent.
    fd: std::os::fd::OwnedFd,
    /// The program's path, for a script (see [`exec_image`]).
    path: std::ffi::CString,
    /// Owners of the strings `argv` and `envp` point into.
    _strings: Vec<std::ffi::CString>,
    /// Null-terminated pointer arrays into `_strings`.
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the raw pointers point into the `CString`s the same value owns; they are only read
// (by the child, through `execveat`), never written, and live as long as the value.
unsafe impl Send for ExecImage {}
// SAFETY: as for `Send`: shared access only reads.
unsafe impl Sync for ExecImage {}

impl ExecImage {
    /// Open `program` and lay out `argv` and `envp` (each `KEY=VALUE`);
    /// `by_name` is the path a script is executed by (see [`exec_image`]).
    pub(crate) fn new(
        program: &std::path::Path,
        by_name: &std::path::Path,
        argv: &[&std::ffi::OsStr],
        envp: &[std::ffi::OsString],
    ) -> io::Result<ExecImage> {
        use std::os::unix::ffi::OsStrExt as _;
        let fd = rustix::fs::open(
            program,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let cstring = |text: &std::ffi::OsStr| {
            std::ffi::CString::new(text.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
        };
        let path = cstring(by_name.as_os_str())?;
        let mut strings = Vec::with_capacity(argv.len() + envp.len());
        for arg in argv {
            strings.push(cstring(arg)?);
        }
        for var in envp {
            strings.push(cstring(var)?);
        }
        let mut pointers: Vec<*const libc::c_char> = strings.iter().map(|string| string.as_ptr()).collect();
        let envp_ptrs: Vec<*const libc::c_char> =
            pointers.split_off(argv.len()).into_iter().chain(std::iter::once(std::ptr::null())).collect();
        pointers.push(std::ptr::null());
        Ok(ExecImage { fd, path, _strings: strings, argv: pointers, envp: envp_ptrs })
    }
}

/// `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`: replace the calling process
/// with the program the image's descriptor names. Returns only on failure.
///
/// Async-signal-safe. Executing by descriptor needs no search permission on
/// the program's directories, so a child that dropped to another uid still
/// runs a program the parent could reach (Landlock and the file's own mode
/// still decide).
///
/// A script (`#!`) cannot run that way: the kernel hands its interpreter
/// `/dev/fd/N`, which a close-on-exec descriptor no longer names once the
/// exec happens, and the call fails with `ENOENT` (execveat(2)). Then the
/// program is executed by its path, which the interpreter opens again (a
/// tool directory's path leads to it in the child's namespace); if that
/// fails too, its error is returned, as it says more (`EACCES`).
pub(crate) fn exec_image(image: &ExecImage) -> io::Error {
    // SAFETY: the descriptor is open (owned by `image`), the path is an empty C string, and
    // `argv`/`envp` are null-terminated arrays of pointers to NUL-terminated strings owned by
    // `image`, which outlives the call; on success the call does not return.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            image.fd.as_raw_fd(),
            c"".as_ptr(),
            image.argv.as_ptr(),
            image.envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    let by_descriptor = io::Error::last_os_error();
    if by_descriptor.raw_os_error() != Some(libc::ENOENT) {
        return by_descriptor;
    }
    // SAFETY: `path` is a NUL-terminated string and `argv`/`envp` null-terminated arrays of
    // pointers to NUL-terminated strings, all owned by `image`, which outlives the call; on
    // success the call does not return.
    unsafe {
        libc::execve(image.path.as_ptr(), image.argv.as_ptr(), image.envp.as_ptr());
    }
    io::Error::last_os_error()
}

/// Mark every descriptor above the standard streams close-on-exec
/// (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`, Linux 5.11), so the exec
/// closes each one the setup does not need until then. Where the kernel
/// lacks the flag, each descriptor below the open-files limit is marked one
/// by one. Async-signal-safe: system calls only.
pub(crate) fn close_inherited_on_exec() -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on the
    // calling process's descriptors; it closes none, so no descriptor the
    // setup still uses goes away before the exec.
    let done = unsafe { libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if done == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if !matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) {
        return Err(error);
    }
    // Up to the hard limit: a descriptor above the soft one may still be open.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum.unwrap_or(1 << 20);
    let last = libc::c_int::try_from(limit).unwrap_or(libc::c_int::MAX);
    for fd in 3..last {
        // SAFETY: F_SETFD on a descriptor number only changes that
        // descriptor's flags, and fails harmlessly (EBADF) where none is open.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// Put the command into a new pid namespace under a tiny init of vsh's
/// own: this process forks the namespace's first process (pid 1 there),
/// which forks the command (pid 2) and returns in it; this process stays
/// outside as the supervisor vsh waits on. Never returns in the supervisor
/// or in the init.
///
/// - The init only reaps: every orphan of the command's tree is reparented
///   to it and reaped at once (no zombie ever counts against the process
///   limit), and when the command ends it reports how and exits, upon
///   which the kernel kills every process left in the namespace.
/// - The supervisor closes every descriptor, waits for the init, and ends
///   as the command ended: the same exit status, or the same signal
///   (without a core dump), so vsh sees the command's own end.
/// - The command is an ordinary process (not an init): its signals, its
///   CPU and file-size limits' signals, act as anywhere.
///
/// The supervisor and the init each die with their parent (the init
/// checks, through a pipe, that the supervisor still lived when the
/// setting took effect), so a vsh killed outright takes the whole tree
/// with it. No process inside sees or can signal one outside (`kill(pid,
/// 0)` of a host pid is `ESRCH`).
///
/// Needs `CAP_SYS_ADMIN` (vsh runs commands as root). Async-signal-safe:
/// system calls only (runs between `fork` and `exec`).
pub(crate) fn enter_pid_namespace() -> io::Result<()> {
    // SAFETY: CLONE_NEWPID changes only which namespace this process's
    // later children are born into; CLONE_NEWIPC gives this process (and
    // so the command) a System V IPC namespace of its own, empty, which
    // the kernel destroys with every segment, queue and semaphore in it
    // when the last process in it ends (sec80 F1: a command's segments
    // stayed on the host and passed a granted secret to a later run). No
    // memory of the calling process changes.
    if unsafe { libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWIPC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // `alive`: the supervisor holds its write end while it lives.
    // `report`: the init writes the signal that ended the command there.
    let alive = pipe()?;
    let report = pipe()?;
    let init = fork()?;
    if init != 0 {
        leave_the_commands_group();
        close_all_but(&[alive[1], report[0]]);
        supervise(init, report[0]);
    }
    // The namespace's init, until the command is forked: only the
    // supervisor may hold the write end it watches.
    // SAFETY: closes this process's copies of two pipe ends it never uses.
    unsafe {
        libc::close(alive[1]);
        libc::close(report[0]);
    }
    // SAFETY: prctl on this process only: SIGKILL when its parent (the
    // supervisor) ends.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) };
    if !lives(alive[0]) {
        // SAFETY: _exit ends this process at once, running nothing.
        unsafe { libc::_exit(127) };
    }
    let command = fork()?;
    if command == 0 {
        // The command: the rest of the setup, then its program.
        for fd in [alive[0], report[1]] {
            // SAFETY: closes this process's copies of the two pipe ends it inherited.
            unsafe { libc::close(fd) };
        }
        return Ok(());
    }
    close_all_but(&[report[1]]);
    reap(command, report[1])
}

/// A close-on-exec pipe's two ends.
fn pipe() -> io::Result<[libc::c_int; 2]> {
    let mut ends = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the two-element array.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ends)
}

/// `fork`: the child's pid in the parent, 0 in the child.
fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: forking a single-threaded process between fork and exec; both
    // sides make only async-signal-safe system calls afterwards.
    let pid = unsafe { libc::fork() };
    if pid < 0 { Err(io::Error::last_os_error()) } else { Ok(pid) }
}

/// Whether the write end of the pipe whose read end is `fd` is still open
/// somewhere (a zero-timeout `poll`, retried when interrupted).
fn lives(fd: libc::c_int) -> bool {
    loop {
        let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: poll on one valid pollfd the call may write into; a zero
        // timeout never blocks.
        let ready = unsafe { libc::poll(&raw mut poll, 1, 0) };
        if ready < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return ready == 0 || (ready > 0 && poll.revents & (libc::POLLHUP | libc::POLLERR) == 0);
    }
}

/// Close every descriptor of this process but those in `keep`: with
/// `close_range` between them, else one by one up to the hard limit.
fn close_all_but(keep: &[libc::c_int]) {
    let mut sorted = [libc::c_int::MAX; 4];
    let count = keep.len().min(sorted.len());
    sorted[..count].copy_from_slice(&keep[..count]);
    sorted[..count].sort_unstable();
    let mut from: u32 = 0;
    let mut ranged = true;
    for &fd in &sorted[..count] {
        let fd = u32::try_from(fd).unwrap_or(0);
        if fd > from {
            // SAFETY: closes descriptors of this process that it never uses again.
            ranged &= unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0_u32) } == 0;
        }
        from = fd.saturating_add(1);
    }
    // SAFETY: as above.
    ranged &= unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0_u32) } == 0;
    if !ranged {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum.unwrap_or(1 << 20);
        let last = libc::c_int::try_from(limit).unwrap_or(libc::c_int::MAX);
        for fd in (0..last).filter(|fd| !sorted[..count].contains(fd)) {
            // SAFETY: closing a descriptor number this process does not
            // keep; fails harmlessly (EBADF) where none is open.
            unsafe { libc::close(fd) };
        }
    }
}

/// The init's part of [`enter_pid_namespace`]: reap every child until the
/// command (`command`) ends; a command ended by a signal writes it to
/// `report`; exit with the command's status (0 after a signal).
fn reap(command: libc::pid_t, report: libc::c_int) -> ! {
    let status = wait_for(command, -1);
    if libc::WIFSIGNALED(status) {
        let signal = [u8::try_from(libc::WTERMSIG(status)).unwrap_or(0)];
        // SAFETY: one write of one byte from a live buffer.
        unsafe { libc::write(report, signal.as_ptr().cast(), 1) };
        // SAFETY: _exit ends this process at once.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: _exit ends this process at once with the command's status.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
}

/// `waitpid(which)` until `target` has ended (reaping any other child that
/// ends meanwhile when `which` is -1); its status. A wait that fails for
/// good ends this process (127).
fn wait_for(target: libc::pid_t, which: libc::pid_t) -> libc::c_int {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes the status of a child of this process into `status`.
        let waited = unsafe { libc::waitpid(which, &raw mut status, 0) };
        if waited == target {
            return status;
        }
        if waited < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: _exit ends this process at once, running nothing.
            unsafe { libc::_exit(127) };
        }
    }
}

/// The supervisor's first step (see [`supervise`]), at once after the init
/// is forked so a kill of the command's group cannot reach it in between:
/// join its parent's process group and ignore the signals a terminal sends
/// that group.
fn leave_the_commands_group() {
    // SAFETY: setpgid, getpgid and getppid act on this process and read its
    // parent's group (same session), and signal() sets dispositions of this
    // process, which never executes anything else.
    unsafe {
        libc::setpgid(0, libc::getpgid(libc::getppid()));
        for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
}

/// The supervisor's part of [`enter_pid_namespace`]: wait for the init and
/// end as the command ended, re-raising the signal the init reported (or
/// the one that ended the init itself).
///
/// First it leaves the command's process group for its parent's: a kill of
/// that group (a timeout, a cancellation) then ends the init and the
/// command, never this process, which stays to reap the init. Killed with
/// them, it would leave the init a zombie for the host's pid 1 to reap,
/// and a pid 1 that never reaps (a container without an init) would
/// collect one per command. Outside the group, it ignores the signals a
/// terminal sends its parent's group: its parent's death (`PDEATHSIG`) or
/// the init's end is what ends it.
fn supervise(init: libc::pid_t, report: libc::c_int) -> ! {
    let status = wait_for(init, init);
    let mut signal = [0_u8];
    // SAFETY: a non-blocking-in-effect read (the writer is gone) into a one-byte buffer.
    let read = unsafe { libc::read(report, signal.as_mut_ptr().cast(), 1) };
    let signal = if read == 1 && signal[0] != 0 {
        libc::c_int::from(signal[0])
    } else if libc::WIFSIGNALED(status) {
        libc::WTERMSIG(status)
    } else {
        0
    };
    if signal != 0 {
        let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: no core file for this process (it would land in the
        // workspace); the signal's default action restored and every
        // signal unblocked, then the same signal sent to itself, so its
        // parent sees the command's own end.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &raw const no_core);
            libc::signal(signal, libc::SIG_DFL);
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&raw mut all);
            libc::sigprocmask(libc::SIG_UNBLOCK, &raw const all, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 127 };
    // SAFETY: _exit ends this process at once with the command's status.
    unsafe { libc::_exit(code) }
}

/// Make `command` run `setup` in the child between `fork` and `exec`.
pub(crate) fn set_pre_exec(command: &mut Command, setup: ChildSetup) {
    // SAFETY: the closure runs in the forked child of a possibly multi-threaded parent, where
    // only async-signal-safe work is allowed. `ChildSetup::apply` makes raw system calls on data
    // prepared before the fork and never allocates, takes a lock or panics (see setup.rs); the
    // `ChildSetup` it reads is owned by the closure, so it outlives the spawn.
    unsafe {
        command.pre_exec(move || setup.apply());
    }
}

/// Give the calling process its own copy of the mount table
/// (`unshare(CLONE_NEWNS)`). Async-signal-safe: one system call.
pub(crate) fn unshare_mount_namespace() -> io::Result<()> {
    // SAFETY: CLONE_NEWNS unshares only the mount table; the descriptor
    // table and memory stay as they are, so no thread can observe a
    // descriptor from another table (what `unshare_unsafe` asks callers to
    // rule out; the forked child has a single thread anyway).
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }.map_err(io::Error::from)
}

/// Fix glibc's mmap threshold at 8 MiB, once per process.
///
/// glibc raises the threshold whenever a mapped block is freed (up to 32 MiB), after which
/// blocks below it come from the heap and `calloc` clears them byte by byte. A FUSE server
/// allocates two zeroed 16 MiB request buffers per session (fuser's), so after the first
/// sessions each candidate paid about 10 ms clearing them; mapped, they cost only the pages
/// used. Other allocators and C libraries are left alone.
pub(crate) fn map_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt takes two integers and changes an allocator setting under the
            // allocator's own lock; it reads and writes no memory of ours, and any thread may
            // call it at any time. A value the library refuses leaves the setting unchanged.
            let _ = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 8 << 20) };
        });
    }
}

/// Give the calling process a network namespace of its own
/// (`unshare(CLONE_NEWNET)`), its loopback interface down: no network at
/// all. Async-signal-safe: one system call.
pub(crate) fn private_network() -> io::Result<()> {
    // SAFETY: CLONE_NEWNET unshares only the network namespace; no memory or
    // descriptor table changes (the forked child has a single thread).
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }.map_err(io::Error::from)
}

/// Give the calling process a network namespace of its own
/// ([`private_network`]) and bring its loopback interface up: the only
/// interface there is. Async-signal-safe: system calls on stack data only.
pub(crate) fn private_loopback() -> io::Result<()> {
    private_network()?;
    // SAFETY: socket takes three integers and returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just returned to us and nothing else owns it.
    let socket = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data (integers, byte arrays and a union of them):
    // all zeros is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = libc::c_char::from_ne_bytes([*byte]);
    }
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into the
    // ifreq we own, alive for the whole call.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut request) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `ifru_flags` (the union's active field for these calls).
    let flags = unsafe { request.ifr_ifru.ifru_flags };
    let up = libc::c_short::try_from(libc::IFF_UP | libc::IFF_RUNNING).unwrap_or(0);
    request.ifr_ifru.ifru_flags = flags | up;
    // SAFETY: SIOCSIFFLAGS reads the ifreq we own, alive for the whole call.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &raw const request) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new user namespace whose uid and gid maps are `uid_map` and `gid_map`
/// (lines of `inside outside count`, as `/proc/PID/uid_map` takes them),
/// held by a descriptor: the namespace lives as long as the descriptor,
/// with no process in it. For idmapped mounts ([`idmap_mount`]).
///
/// A namespace is made by a process, and a multi-threaded one cannot
/// `unshare(CLONE_NEWUSER)`: a forked child does, waits to be killed, and
/// the caller writes its maps (it needs `CAP_SETUID` and `CAP_SETGID`
/// over the ids it maps), opens the namespace and kills the child.
pub(crate) fn user_namespace(uid_map: &str, gid_map: &str) -> io::Result<std::os::fd::OwnedFd> {
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // SAFETY: the child of a possibly multi-threaded parent runs only
    // async-signal-safe raw calls (prctl, unshare, write, pause, _exit) on
    // stack data and a descriptor that exist before the fork; it never
    // allocates, takes a lock, unwinds or returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; the pointer passed to write is a live stack byte.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let made: u8 = u8::from(libc::unshare(libc::CLONE_NEWUSER) == 0);
            libc::write(writer.as_raw_fd(), (&raw const made).cast(), 1);
            loop {
                libc::pause();
            }
        }
    }
    drop(writer);
    let made = (|| {
        let mut byte = [0_u8; 1];
        loop {
            match rustix::io::read(&reader, &mut byte) {
                Ok(1) if byte[0] == 1 => break,
                Ok(_) => return Err(io::Error::other("the helper could not make a user namespace")),
                Err(rustix::io::Errno::INTR) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
        std::fs::write(format!("/proc/{pid}/uid_map"), uid_map)?;
        std::fs::write(format!("/proc/{pid}/gid_map"), gid_map)?;
        Ok(rustix::fs::open(
            format!("/proc/{pid}/ns/user"),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?)
    })();
    // SAFETY: kill and waitpid take integers and a null status pointer; the
    // pid is our own child, not yet reaped, so it names no other process.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        while libc::waitpid(pid, std::ptr::null_mut(), 0) < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }
    made
}

/// Make the detached mount `mount` idmapped through the user namespace
/// `userns` (`mount_setattr(MOUNT_ATTR_IDMAP)`): a file the filesystem
/// stores as owned by id `k` appears as owned by what `userns` maps `k`
/// to, and one created by such an id is stored as `k`.
pub(crate) fn idmap_mount(mount: BorrowedFd<'_>, userns: BorrowedFd<'_>) -> io::Result<()> {
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: u64::try_from(userns.as_raw_fd()).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?,
    };
    // SAFETY: the descriptor is open for the call, the path is an empty C
    // string (AT_EMPTY_PATH: the descriptor itself), and the attribute
    // struct is ours, alive for the call, with its exact size passed.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &raw const attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Make the detached mount `mount` (and, `recursive`, every mount beneath
/// it) read-only (`mount_setattr(MOUNT_ATTR_RDONLY)`): nothing is written
/// through it, not a byte nor a timestamp, whatever the permission bits.
pub(crate) fn read_only_mount(mount: BorrowedFd<'_>, recursive: bool) -> io::Result<()> {
    set_mount_attributes(mount, libc::MOUNT_ATTR_RDONLY, recursive)
}

/// Make the detached mount `mount` one whose set-user-id bits and device
/// nodes mean nothing (`MOUNT_ATTR_NOSUID`, `MOUNT_ATTR_NODEV`): what a
/// command leaves in a directory kept between runs (a scratch directory)
/// never raises a later process's privileges nor opens a device (sec82 4).
pub(crate) fn inert_mount(mount: BorrowedFd<'_>) -> io::Result<()> {
    set_mount_attributes(mount, libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV, false)
}

/// `mount_setattr` of `attr_set` on the detached mount `mount` (and,
/// `recursive`, every mount beneath it).
fn set_mount_attributes(mount: BorrowedFd<'_>, attr_set: u64, recursive: bool) -> io::Result<()> {
    let attr = libc::mount_attr { attr_set, attr_clr: 0, propagation: 0, userns_fd: 0 };
    let flags = libc::AT_EMPTY_PATH | if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: the descriptor is open for the call, the path is an empty C
    // string (AT_EMPTY_PATH: the descriptor itself), and the attribute
    // struct is ours, alive for the call, with its exact size passed.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &raw const attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}
