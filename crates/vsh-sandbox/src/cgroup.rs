//! A memory bound on a confined child's whole process tree: a cgroup (v1
//! memory controller) of its own, which the child joins before anything
//! else of its setup, so every process it forks is in it. An rlimit bounds
//! one process; 256 processes of 8 GiB each are not bounded by it, and the
//! host's OOM killer would pick its victim anywhere. Past the group's limit
//! the kernel's OOM killer acts inside the group only.
//!
//! Groups live under `/sys/fs/cgroup/memory/vsh/`, named by process id, pid
//! namespace, a counter and the time; each is removed when its child is
//! done. One that still held a process then is removed by the next group
//! this process makes, and one a process that is gone left (it crashed, or
//! was killed outright) by the next any process of the same pid namespace
//! makes, what still runs in it killed first: never a live process's group,
//! which may be one made a moment ago that its child has not joined yet.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the v1 memory controller is mounted.
const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";
/// vsh's own directory beneath it.
const VSH_GROUPS: &str = "vsh";

/// This process's groups that still held a process when they were dropped.
static LEFT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// One child's memory group, removed when dropped (once its processes are gone).
#[derive(Debug)]
pub(crate) struct MemoryGroup {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing: the child writes `0` to join.
    procs: OwnedFd,
}

impl MemoryGroup {
    /// Whether this host has the v1 memory controller, writable.
    pub(crate) fn available() -> bool {
        Path::new(MEMORY_ROOT).join("memory.limit_in_bytes").exists()
            && rustix::fs::access(MEMORY_ROOT, rustix::fs::Access::WRITE_OK).is_ok()
    }

    /// A new group whose processes together may use at most `bytes` of
    /// memory (and of memory plus swap, where swap is accounted).
    ///
    /// # Errors
    ///
    /// The file system's error: no memory controller, no privilege.
    pub(crate) fn create(bytes: u64) -> io::Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let parent = Path::new(MEMORY_ROOT).join(VSH_GROUPS);
        match std::fs::create_dir(&parent) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => remove_left_groups(&parent),
            Err(error) => return Err(error),
        }
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos());
        let name =
            format!("{}-{}-{}-{nanos:x}", std::process::id(), pid_namespace(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let dir = parent.join(name);
        std::fs::create_dir(&dir)?;
        let made = || -> io::Result<OwnedFd> {
            std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string())?;
            let swap = dir.join("memory.memsw.limit_in_bytes");
            if swap.exists() {
                std::fs::write(swap, bytes.to_string())?;
            }
            let procs = std::fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs"))?;
            Ok(OwnedFd::from(procs))
        };
        match made() {
            Ok(procs) => Ok(Self { dir, procs }),
            Err(error) => {
                let _ = std::fs::remove_dir(&dir);
                Err(error)
            }
        }
    }

    /// Move the calling process into the group. Runs in the child between
    /// `fork` and `exec`: one `write`, async-signal-safe.
    pub(crate) fn join_self(&self) -> io::Result<()> {
        rustix::io::write(&self.procs, b"0").map(|_| ()).map_err(io::Error::from)
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        // Fails while a process is still in it: the next group made removes it then.
        if std::fs::remove_dir(&self.dir).is_err() {
            LEFT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(self.dir.clone());
        }
    }
}

/// Remove what this process's groups left, and the groups of processes
/// that are gone: a vsh killed outright (`SIGKILL`) supervised nothing to
/// the end, so what its commands left running is killed first.
fn remove_left_groups(parent: &Path) {
    LEFT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|dir| std::fs::remove_dir(dir).is_err());
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let ours = pid_namespace().to_string();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let fields: Vec<&str> = name.to_str().unwrap_or_default().split('-').collect();
        let owner = fields.first().and_then(|pid| pid.parse::<i32>().ok()).and_then(rustix::process::Pid::from_raw);
        // Asked of the kernel in this process's own pid namespace (a `/proc`
        // mounted for another namespace would answer for other processes).
        let gone = owner.is_some_and(|pid| {
            rustix::process::test_kill_process(pid).is_err_and(|errno| errno == rustix::io::Errno::SRCH)
        });
        if !gone || !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        // A process id means something only in the namespace it was taken
        // in: a group another namespace's vsh made (another container on
        // the same host) is never judged from here. (A group named before
        // the namespace was, pid-counter-time, is removed if empty.)
        if fields.len() == 4 && fields[1] == ours {
            kill_members(&entry.path());
        }
        if fields.len() == 3 || fields.len() == 4 && fields[1] == ours {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The inode of this process's pid namespace (0 if it cannot be read).
fn pid_namespace() -> u64 {
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |meta| std::os::unix::fs::MetadataExt::ino(&meta))
}

/// Kill every process in the group at `dir` (`SIGKILL`), again while any
/// is left (one may have forked meanwhile), for at most a second.
fn kill_members(dir: &Path) {
    for _ in 0..100 {
        let Ok(listed) = std::fs::read_to_string(dir.join("cgroup.procs")) else { return };
        let members: Vec<i32> = listed.lines().filter_map(|line| line.trim().parse().ok()).collect();
        if members.is_empty() {
            return;
        }
        for pid in members.into_iter().filter_map(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static ALONE: Mutex<()> = Mutex::new(());

    /// The id of a process that is gone (one this test started and reaped).
    fn gone_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().expect("a process");
        child.wait().expect("reaped");
        child.id()
    }

    /// Two commands started at once each make a group: the second's cleanup
    /// never removes the first's, which its child has not joined yet (it did,
    /// and the first command failed with "memory cgroup: No such file").
    #[test]
    fn making_a_group_never_removes_one_a_live_process_just_made() {
        if !MemoryGroup::available() {
            assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "no writable cgroup v1 memory controller");
            return;
        }
        // One at a time: each makes groups, and making one sweeps the others'.
        let _alone = ALONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = MemoryGroup::create(64 << 20).expect("a group");
        let second = MemoryGroup::create(64 << 20).expect("another");
        assert!(first.dir.join("cgroup.procs").exists(), "the first group is still there");
        // A group a process that is gone left is removed.
        let stale = Path::new(MEMORY_ROOT).join(VSH_GROUPS).join(format!("{}-{}-0-0", gone_pid(), pid_namespace()));
        std::fs::create_dir(&stale).expect("a stale group");
        let third = MemoryGroup::create(64 << 20).expect("a third");
        assert!(!stale.exists(), "a gone process's group is removed");
        let dirs = [first.dir.clone(), second.dir.clone(), third.dir.clone()];
        drop((first, second, third));
        assert!(dirs.iter().all(|dir| !dir.exists()), "each is removed once dropped");
    }

    /// A vsh killed outright leaves its command's processes running in their
    /// group: the next group made kills them and removes the group.
    #[test]
    fn what_a_killed_vsh_left_running_is_killed_by_the_next_group_made() {
        if !MemoryGroup::available() {
            assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "no writable cgroup v1 memory controller");
            return;
        }
        // One at a time: each makes groups, and making one sweeps the others'.
        let _alone = ALONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let parent = Path::new(MEMORY_ROOT).join(VSH_GROUPS);
        let _ = std::fs::create_dir(&parent);
        let gone = gone_pid();
        let orphaned = parent.join(format!("{gone}-{}-0-0", pid_namespace()));
        // Another namespace's group is never judged from here.
        let foreign = parent.join(format!("{gone}-1-0-0"));
        std::fs::create_dir(&foreign).expect("another namespace's group");
        let mut left = std::process::Command::new("sleep").arg("60").spawn().expect("a process");
        // Another test's child setup may sweep the empty group before the
        // process is in it: make it again until it holds the process (from
        // then on, whoever sweeps kills it, which is what is tested).
        for attempt in 0.. {
            let _ = std::fs::create_dir(&orphaned);
            match std::fs::write(orphaned.join("cgroup.procs"), left.id().to_string()) {
                Ok(()) => break,
                Err(error) if attempt < 100 && error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => panic!("moved into the group: {error}"),
            }
        }
        let made = MemoryGroup::create(64 << 20).expect("a group");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(status) = left.try_wait().expect("waitable") {
                break status;
            }
            assert!(std::time::Instant::now() < deadline, "the process left running was not killed");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
        assert!(!orphaned.exists(), "and its group removed");
        assert!(foreign.exists(), "another namespace's group is left alone");
        std::fs::remove_dir(&foreign).expect("removed by the test");
        drop(made);
    }
}
