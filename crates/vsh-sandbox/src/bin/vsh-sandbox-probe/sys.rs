//! The raw system calls of the probe: the only `unsafe` code of this test tool.
//!
//! Each function makes one attempt the sandbox must refuse, and cleans up after itself when the
//! attempt succeeds (the baseline run).

#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

fn check(result: libc::c_long) -> io::Result<libc::c_long> {
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(result) }
}

/// `ptrace(PTRACE_TRACEME)`: harmless for a process nobody traces.
pub(crate) fn ptrace_traceme() -> io::Result<()> {
    // SAFETY: PTRACE_TRACEME ignores the pid, address and data arguments and touches no memory
    // of ours.
    let result = unsafe {
        libc::ptrace(
            libc::PTRACE_TRACEME,
            0,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    check(result).map(drop)
}

/// `unshare(CLONE_NEWUSER)`: this single-threaded process enters a new user namespace.
pub(crate) fn unshare_user() -> io::Result<()> {
    // SAFETY: unshare takes a flags word and reads no memory; the probe is single-threaded, as
    // CLONE_NEWUSER requires, and exits right after.
    let result = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
    check(result.into()).map(drop)
}

/// `clone(CLONE_NEWUSER | SIGCHLD)` with no new stack: fork into a new user namespace; the
/// child exits at once and is reaped.
pub(crate) fn clone_newuser() -> io::Result<()> {
    let flags = libc::c_ulong::from((libc::CLONE_NEWUSER | libc::SIGCHLD).cast_unsigned());
    // SAFETY: with a null stack the child runs on a copy of this stack, like fork; this process
    // is single-threaded, and the child does nothing but `_exit`.
    let pid = check(unsafe { libc::syscall(libc::SYS_clone, flags, 0_usize, 0_usize, 0_usize, 0_usize) })?;
    if pid == 0 {
        // SAFETY: `_exit` ends the child without running any of the parent's state teardown.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `status` is a valid out-pointer for the call; the pid is our own child.
    check(unsafe { libc::waitpid(pid, &raw mut status, 0) }.into()).map(drop)
}

/// Mount a tmpfs on `dir` and unmount it right away.
pub(crate) fn mount_tmpfs(dir: &Path) -> io::Result<()> {
    let target = CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: every pointer is a NUL-terminated string alive for the call; no data argument.
    let result = unsafe { libc::mount(c"none".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) };
    check(result.into())?;
    // SAFETY: `target` is a NUL-terminated string alive for the call.
    check(unsafe { libc::umount2(target.as_ptr(), 0) }.into()).map(drop)
}

/// Open and close a netlink route socket.
pub(crate) fn netlink_socket() -> io::Result<()> {
    // SAFETY: socket takes three integers and touches no memory of ours.
    let fd = check(
        unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) }.into(),
    )?;
    close(fd);
    Ok(())
}

/// Set up (and close) an `io_uring` with one entry.
pub(crate) fn io_uring_setup() -> io::Result<()> {
    // `struct io_uring_params` is 120 bytes; zeroed means "no flags".
    let mut params = [0_u8; 120];
    // SAFETY: the kernel reads and writes at most the 120 bytes of `params`, alive for the call.
    let fd = check(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1_u32, params.as_mut_ptr()) })?;
    close(fd);
    Ok(())
}

fn close(fd: libc::c_long) {
    if let Ok(fd) = libc::c_int::try_from(fd) {
        // SAFETY: `fd` was just returned to us by the kernel and is closed exactly once.
        unsafe { libc::close(fd) };
    }
}

/// A path that exists nowhere, for calls that must fail at path lookup.
const NOWHERE: &std::ffi::CStr = c"/nonexistent-vsh-probe/x";

/// Make the system call `name` with arguments chosen so that, even as root and
/// unconfined, the kernel refuses it harmlessly (a bad descriptor, a missing
/// path, an invalid flag or size) or it changes nothing (`unshare(0)`,
/// `setpgid(0, 0)`, `settimeofday(NULL, NULL)`), and never with `EPERM`, which
/// is what the filter answers. `None` for a name this table does not know.
pub(crate) fn harmless_call(name: &str) -> Option<io::Result<libc::c_long>> {
    let null = std::ptr::null::<libc::c_void>();
    let nowhere = NOWHERE.as_ptr();
    let bad_fd: libc::c_long = -1;
    let invalid_flags: libc::c_ulong = libc::c_ulong::MAX;
    // Each argument below is an integer, a null pointer, or a pointer to a
    // NUL-terminated static string.
    // SAFETY: the kernel reads at most those strings and writes nowhere: every
    // call fails before it would, and the no-op calls take no pointer at all.
    let result = unsafe {
        match name {
            "ptrace" => libc::syscall(libc::SYS_ptrace, libc::PTRACE_PEEKDATA, -1, null, null),
            "process_vm_readv" => libc::syscall(libc::SYS_process_vm_readv, -1, null, 0, null, 0, 0),
            "process_vm_writev" => libc::syscall(libc::SYS_process_vm_writev, -1, null, 0, null, 0, 0),
            "pidfd_getfd" => libc::syscall(libc::SYS_pidfd_getfd, bad_fd, bad_fd, 0),
            "mount" => libc::syscall(libc::SYS_mount, nowhere, nowhere, c"vsh-no-such-fs".as_ptr(), 0, null),
            "umount2" => libc::syscall(libc::SYS_umount2, nowhere, 0),
            "pivot_root" => libc::syscall(libc::SYS_pivot_root, nowhere, nowhere),
            "chroot" => libc::syscall(libc::SYS_chroot, nowhere),
            "fsopen" => libc::syscall(libc::SYS_fsopen, c"vsh-no-such-fs".as_ptr(), 0),
            "fsconfig" => libc::syscall(libc::SYS_fsconfig, bad_fd, 0, null, null, 0),
            "fsmount" => libc::syscall(libc::SYS_fsmount, bad_fd, 0, 0),
            "fspick" => libc::syscall(libc::SYS_fspick, libc::AT_FDCWD, nowhere, 0),
            "move_mount" => libc::syscall(libc::SYS_move_mount, libc::AT_FDCWD, nowhere, libc::AT_FDCWD, nowhere, 0),
            "open_tree" => libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, nowhere, 0),
            "mount_setattr" => libc::syscall(libc::SYS_mount_setattr, libc::AT_FDCWD, nowhere, 0, null, 0),
            "open_tree_attr" => libc::syscall(467, libc::AT_FDCWD, nowhere, 0, null, 0),
            "unshare" => libc::syscall(libc::SYS_unshare, 0),
            "setns" => libc::syscall(libc::SYS_setns, bad_fd, 0),
            "bpf" => libc::syscall(libc::SYS_bpf, -1, null, 0),
            "keyctl" => libc::syscall(libc::SYS_keyctl, -1, 0, 0, 0, 0),
            "add_key" => libc::syscall(libc::SYS_add_key, c"user".as_ptr(), null, null, 0, 0),
            "request_key" => libc::syscall(libc::SYS_request_key, c"user".as_ptr(), null, null, 0),
            "io_uring_setup" => libc::syscall(libc::SYS_io_uring_setup, 0, null),
            "io_uring_enter" => libc::syscall(libc::SYS_io_uring_enter, bad_fd, 0, 0, 0, null, 0),
            "io_uring_register" => libc::syscall(libc::SYS_io_uring_register, bad_fd, 0, null, 0),
            "perf_event_open" => libc::syscall(libc::SYS_perf_event_open, null, 0, -1, -1, 0),
            "userfaultfd" => libc::syscall(libc::SYS_userfaultfd, invalid_flags),
            "open_by_handle_at" => libc::syscall(libc::SYS_open_by_handle_at, bad_fd, null, 0),
            "fanotify_init" => libc::syscall(libc::SYS_fanotify_init, invalid_flags, 0),
            "quotactl" => libc::syscall(libc::SYS_quotactl, 0, nowhere, 0, null),
            "quotactl_fd" => libc::syscall(libc::SYS_quotactl_fd, bad_fd, 0, 0, null),
            "kexec_load" => libc::syscall(libc::SYS_kexec_load, 0, 0, null, invalid_flags),
            "kexec_file_load" => libc::syscall(libc::SYS_kexec_file_load, bad_fd, bad_fd, 0, null, invalid_flags),
            "init_module" => libc::syscall(libc::SYS_init_module, null, 0, c"".as_ptr()),
            "finit_module" => libc::syscall(libc::SYS_finit_module, bad_fd, c"".as_ptr(), 0),
            "delete_module" => libc::syscall(libc::SYS_delete_module, c"vsh_no_such_module".as_ptr(), 0),
            // No magic numbers: the kernel refuses before it looks at the command.
            "reboot" => libc::syscall(libc::SYS_reboot, 0, 0, 0, null),
            "swapon" => libc::syscall(libc::SYS_swapon, nowhere, 0),
            "swapoff" => libc::syscall(libc::SYS_swapoff, nowhere),
            "settimeofday" => libc::syscall(libc::SYS_settimeofday, null, null),
            "clock_settime" => libc::syscall(libc::SYS_clock_settime, -1, null),
            "clock_adjtime" => libc::syscall(libc::SYS_clock_adjtime, -1, null),
            "adjtimex" => libc::syscall(libc::SYS_adjtimex, null),
            "sethostname" => libc::syscall(libc::SYS_sethostname, null, -1),
            "setdomainname" => libc::syscall(libc::SYS_setdomainname, null, -1),
            "acct" => libc::syscall(libc::SYS_acct, nowhere),
            // SYSLOG_ACTION_SIZE_BUFFER: reads the log's size.
            "syslog" => libc::syscall(libc::SYS_syslog, 10, null, 0),
            // Leave any controlling terminal first, so that the call has none to hang up.
            "vhangup" => {
                libc::setsid();
                libc::syscall(libc::SYS_vhangup)
            }
            #[cfg(target_arch = "x86_64")]
            "iopl" => libc::syscall(libc::SYS_iopl, 4),
            #[cfg(target_arch = "x86_64")]
            "ioperm" => libc::syscall(libc::SYS_ioperm, 0, 0, 0),
            // Func 0 reads the (empty) LDT into a zero-length buffer.
            #[cfg(target_arch = "x86_64")]
            "modify_ldt" => libc::syscall(libc::SYS_modify_ldt, 0, null, 0),
            #[cfg(target_arch = "x86_64")]
            "uselib" => libc::syscall(libc::SYS_uselib, nowhere),
            #[cfg(target_arch = "x86_64")]
            "lookup_dcookie" => libc::syscall(libc::SYS_lookup_dcookie, 0, null, 0),
            #[cfg(target_arch = "x86_64")]
            "nfsservctl" => libc::syscall(libc::SYS_nfsservctl, 0, null, null),
            "setsid" => libc::syscall(libc::SYS_setsid),
            "setpgid" => libc::syscall(libc::SYS_setpgid, 0, 0),
            _ => return None,
        }
    };
    Some(check(result))
}
