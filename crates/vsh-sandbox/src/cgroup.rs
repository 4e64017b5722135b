//! A memory bound on a confined child's whole process tree: a cgroup (v1
//! memory controller) of its own, which the child joins before anything
//! else of its setup, so every process it forks is in it. An rlimit bounds
//! one process; 256 processes of 8 GiB each are not bounded by it, and the
//! host's OOM killer would pick its victim anywhere. Past the group's limit
//! the kernel's OOM killer acts inside the group only.
//!
//! Groups live under `/sys/fs/cgroup/memory/vsh/`, named by process id, a
//! counter and the time; each is removed when its child is done, and any
//! empty one a crashed process left is removed when the next is made.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the v1 memory controller is mounted.
const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";
/// vsh's own directory beneath it.
const VSH_GROUPS: &str = "vsh";

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
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => remove_empty_groups(&parent),
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
        // Fails while a process is still in it; the next group made removes it then.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Remove every group under `parent` that no process is in any more.
fn remove_empty_groups(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
