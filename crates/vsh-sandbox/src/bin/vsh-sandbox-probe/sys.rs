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
