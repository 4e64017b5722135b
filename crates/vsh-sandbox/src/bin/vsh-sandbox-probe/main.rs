//! `vsh-sandbox-probe`: a test tool of the sandbox-capability suite, not a product binary.
//!
//! It performs one named attempt (a system call, a connection, a fork loop, an allocation) and
//! prints one line: `ok <detail>` (exit 0) when the attempt succeeded, `denied <ERRNO> <n>`
//! (exit 1) when the kernel refused it, or `error <message>` (exit 2) for bad usage.
//! `tests/capabilities.rs` runs it once unconfined (the baseline, which must print `ok`) and
//! once confined (which must print `denied`). Run it without arguments for the list.
// The probe tries the host by path on purpose, inside the sandbox it reports on.
#![allow(clippy::disallowed_methods)]

mod sys;

use std::io;
use std::net::{TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: vsh-sandbox-probe <attempt> [arguments]
attempts:
  tcp-connect ADDR        connect a TCP stream to ADDR (host:port)
  udp-send ADDR           send one UDP datagram to ADDR
  abstract-connect NAME   connect to the abstract unix socket NAME
  unix-connect PATH       connect to the unix socket at PATH
  memfd-exec              copy /bin/true into a memfd and execute it through /proc/self/fd
  signal PID              send signal 0 to PID
  ptrace                  ptrace(PTRACE_TRACEME)
  unshare-user            unshare(CLONE_NEWUSER)
  clone-newuser           clone(CLONE_NEWUSER | SIGCHLD)
  mount DIR               mount a tmpfs on DIR, then unmount it
  netlink                 socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)
  io-uring                io_uring_setup(1, ..)
  setsid                  setsid()
  syscall NAME            make the system call NAME with arguments that fail harmlessly (or change
                          nothing) unconfined, even as root
  escape PIDFILE          start a grandchild that calls setsid(), writes \"<pid> <result>\" to PIDFILE
                          and sleeps 30 s; print what it wrote
  spawn N                 start N sleeping copies of this probe; report how many started
  alloc BYTES             reserve BYTES of memory
  sleep SECONDS           sleep";

/// The outcome of one attempt.
enum Outcome {
    Ok(String),
    Denied(io::Error),
    Usage(String),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["tcp-connect", addr] => attempt(TcpStream::connect(addr).map(|_| "connected".to_owned())),
        ["udp-send", addr] => attempt(udp_send(addr)),
        ["abstract-connect", name] => attempt(abstract_connect(name)),
        ["unix-connect", path] => attempt(UnixStream::connect(path).map(|_| "connected".to_owned())),
        ["memfd-exec"] => attempt(memfd_exec()),
        ["signal", pid] => match pid.parse::<i32>().ok().and_then(rustix::process::Pid::from_raw) {
            Some(pid) => attempt(
                rustix::process::test_kill_process(pid).map_err(io::Error::from).map(|()| "signalled".to_owned()),
            ),
            None => Outcome::Usage(format!("not a pid: {pid}")),
        },
        ["ptrace"] => attempt(sys::ptrace_traceme().map(|()| "traced".to_owned())),
        ["unshare-user"] => attempt(sys::unshare_user().map(|()| "unshared".to_owned())),
        ["clone-newuser"] => attempt(sys::clone_newuser().map(|()| "cloned".to_owned())),
        ["mount", dir] => attempt(sys::mount_tmpfs(Path::new(dir)).map(|()| "mounted and unmounted".to_owned())),
        ["netlink"] => attempt(sys::netlink_socket().map(|()| "opened".to_owned())),
        ["io-uring"] => attempt(sys::io_uring_setup().map(|()| "set up".to_owned())),
        ["syscall", name] => match sys::harmless_call(name) {
            Some(result) => attempt(result.map(|value| format!("returned {value}"))),
            None => Outcome::Usage(format!("no harmless form of {name} is known")),
        },
        ["setsid"] => attempt(rustix::process::setsid().map_err(io::Error::from).map(|_| "new session".to_owned())),
        ["escape", pidfile] => escape(Path::new(pidfile)),
        ["grandchild", pidfile] => grandchild(Path::new(pidfile)),
        ["spawn", count] => match count.parse::<usize>() {
            Ok(count) => spawn_copies(count),
            Err(_) => Outcome::Usage(format!("not a count: {count}")),
        },
        ["alloc", bytes] => match bytes.parse::<usize>() {
            Ok(bytes) => alloc(bytes),
            Err(_) => Outcome::Usage(format!("not a size: {bytes}")),
        },
        ["sleep", seconds] => match seconds.parse::<u64>() {
            Ok(seconds) => {
                std::thread::sleep(Duration::from_secs(seconds));
                Outcome::Ok("slept".to_owned())
            }
            Err(_) => Outcome::Usage(format!("not a number: {seconds}")),
        },
        _ => Outcome::Usage(USAGE.to_owned()),
    };
    match outcome {
        Outcome::Ok(detail) => {
            println!("ok {detail}");
            ExitCode::SUCCESS
        }
        Outcome::Denied(error) => {
            println!("denied {}", errno_name(&error));
            ExitCode::from(1)
        }
        Outcome::Usage(message) => {
            println!("error {message}");
            ExitCode::from(2)
        }
    }
}

fn attempt(result: io::Result<String>) -> Outcome {
    match result {
        Ok(detail) => Outcome::Ok(detail),
        Err(error) => Outcome::Denied(error),
    }
}

/// `EPERM 1`, `EACCES 13`, ...: the errno's symbolic name and number.
fn errno_name(error: &io::Error) -> String {
    let Some(code) = error.raw_os_error() else { return format!("other {error}") };
    let name = match code {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EFAULT => "EFAULT",
        libc::EBADF => "EBADF",
        libc::ESRCH => "ESRCH",
        libc::ENODEV => "ENODEV",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EIO => "EIO",
        libc::ENOTDIR => "ENOTDIR",
        _ => "E?",
    };
    format!("{name} {code}")
}

fn udp_send(addr: &str) -> io::Result<String> {
    let socket = UdpSocket::bind("0.0.0.0:0")?;
    socket.send_to(b"vsh-sandbox-probe", addr)?;
    Ok("sent".to_owned())
}

fn abstract_connect(name: &str) -> io::Result<String> {
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    UnixStream::connect_addr(&addr)?;
    Ok("connected".to_owned())
}

/// Start a grandchild that tries to leave the process group, wait (bounded) for its report.
fn escape(pidfile: &Path) -> Outcome {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => return Outcome::Usage(format!("cannot find myself: {error}")),
    };
    let spawned = Command::new(exe)
        .arg("grandchild")
        .arg(pidfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let _grandchild = match spawned {
        Ok(child) => child,
        Err(error) => return Outcome::Denied(error),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(report) = std::fs::read_to_string(pidfile)
            && report.ends_with('\n')
        {
            return Outcome::Ok(report.trim_end().to_owned());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Outcome::Usage("the grandchild did not report within 10 s".to_owned())
}

/// Try `setsid`, report `<pid> <result>` to `pidfile`, then sleep so a group kill has something
/// to kill.
fn grandchild(pidfile: &Path) -> Outcome {
    let result = match rustix::process::setsid() {
        Ok(_) => "escaped".to_owned(),
        Err(errno) => format!("stayed {}", errno_name(&errno.into())),
    };
    let report = format!("{} {result}\n", std::process::id());
    let partial = pidfile.with_extension("partial");
    if let Err(error) = std::fs::write(&partial, report).and_then(|()| std::fs::rename(&partial, pidfile)) {
        return Outcome::Denied(error);
    }
    std::thread::sleep(Duration::from_secs(30));
    Outcome::Ok("slept".to_owned())
}

/// Start up to `count` sleeping copies of this probe, then kill them all.
fn spawn_copies(count: usize) -> Outcome {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => return Outcome::Usage(format!("cannot find myself: {error}")),
    };
    let mut children: Vec<Child> = Vec::new();
    let mut failure = None;
    for _ in 0..count {
        let spawned = Command::new(&exe)
            .args(["sleep", "30"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => children.push(child),
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }
    let started = children.len();
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    match failure {
        None => Outcome::Ok(format!("started {started} of {count}")),
        Some(error) => {
            eprintln!("started {started} of {count}");
            Outcome::Denied(error)
        }
    }
}

fn alloc(bytes: usize) -> Outcome {
    let mut memory: Vec<u8> = Vec::new();
    match memory.try_reserve_exact(bytes) {
        Ok(()) => Outcome::Ok(format!("reserved {bytes} bytes")),
        Err(_) => Outcome::Denied(io::Error::from_raw_os_error(libc::ENOMEM)),
    }
}

/// Execute a copy of `/bin/true` that lives only in memory.
fn memfd_exec() -> io::Result<String> {
    use std::os::fd::AsRawFd as _;
    let program = std::fs::read("/bin/true")?;
    let memfd = rustix::fs::memfd_create("vsh-probe", rustix::fs::MemfdFlags::empty())?;
    rustix::io::write(&memfd, &program)?;
    let status = Command::new(format!("/proc/self/fd/{}", memfd.as_raw_fd())).status()?;
    if status.success() { Ok("executed".to_owned()) } else { Err(io::Error::other(format!("exited with {status}"))) }
}
