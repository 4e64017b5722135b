//! A memory bound on a confined child's whole process tree: a cgroup (v1
//! memory controller) of its own, which the child joins before anything
//! else of its setup, so every process it forks is in it. An rlimit bounds
//! one process; 256 processes of 8 GiB each are not bounded by it, and the
//! host's OOM killer would pick its victim anywhere. Past the group's limit
//! the kernel's OOM killer acts inside the group only.
//!
//! Groups live under `/sys/fs/cgroup/memory/vsh/`, named by process id, a
//! counter and the time; each is removed when its child is done. One that
//! still held a process then is removed by the next group this process
//! makes, and one a process that is gone left (it crashed) by the next any
//! process makes: never a live process's group, which may be one made a
//! moment ago that its child has not joined yet.

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
        let name = format!("{}-{}-{nanos:x}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
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

/// Remove what this process's groups left, and the empty groups of
/// processes that are gone.
fn remove_left_groups(parent: &Path) {
    LEFT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|dir| std::fs::remove_dir(dir).is_err());
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name.to_str().and_then(|name| name.split('-').next()).and_then(|pid| pid.parse::<u32>().ok());
        let gone = owner.is_some_and(|pid| !Path::new("/proc").join(pid.to_string()).exists());
        if gone && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two commands started at once each make a group: the second's cleanup
    /// never removes the first's, which its child has not joined yet (it did,
    /// and the first command failed with "memory cgroup: No such file").
    #[test]
    fn making_a_group_never_removes_one_a_live_process_just_made() {
        if !MemoryGroup::available() {
            assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "no writable cgroup v1 memory controller");
            return;
        }
        let first = MemoryGroup::create(64 << 20).expect("a group");
        let second = MemoryGroup::create(64 << 20).expect("another");
        assert!(first.dir.join("cgroup.procs").exists(), "the first group is still there");
        // A group a process that is gone left is removed.
        let stale = Path::new(MEMORY_ROOT).join(VSH_GROUPS).join(format!("{}-0-0", u32::MAX - 7));
        std::fs::create_dir(&stale).expect("a stale group");
        let third = MemoryGroup::create(64 << 20).expect("a third");
        assert!(!stale.exists(), "a gone process's group is removed");
        let dirs = [first.dir.clone(), second.dir.clone(), third.dir.clone()];
        drop((first, second, third));
        assert!(dirs.iter().all(|dir| !dir.exists()), "each is removed once dropped");
    }
}
