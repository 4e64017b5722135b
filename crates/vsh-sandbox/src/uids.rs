//! A uid of its own for each command: [`CommandUser`].
//!
//! `RLIMIT_NPROC` counts the processes of a *user*, machine-wide, not of a
//! process tree: were every command to run as one uid, a fork bomb in one
//! transaction's command would fill that count and make every other
//! command's `fork` fail until its processes were gone. A root host
//! therefore leases each command a uid of its own from [`COMMAND_UIDS`]
//! for as long as the command runs, so the limit is the command's alone.
//!
//! A lease is an exclusive `flock` on `/run/vsh/command-uids/<uid>`, a
//! directory only root may enter: machine-wide (two vsh processes never
//! hold the same uid), released by the kernel when the holder closes it or
//! dies, and out of a confined command's reach (it runs as another uid and
//! could not squat the pool). Leases rotate through the range, so a uid
//! comes back only after every other one was used: whatever a command left
//! that the kernel still counts (a zombie its reaper has not collected)
//! has long gone by then.
//!
//! A holder that dies (vsh killed by `SIGKILL`) cannot stop its command, and
//! the command's processes would run on as the uid the next holder gets.
//! So a lease marks its file while held (one byte, cleared when the lease is
//! dropped after the command's processes are gone), and the next holder
//! that finds the mark kills every process of the uid before its command
//! starts ([`reap_if_abandoned`]).
//!
//! What commands keep between runs (scratch directories: a build's
//! `target/`) belongs on disk to one *storage* uid, whatever uid wrote
//! it. Each scratch directory is shown to the command through an idmapped
//! mount ([`FuseMount::with_idmapped_scratch`]) that maps the storage uid
//! to the leased one: the command owns what an earlier run made, and what
//! it makes is stored as the storage uid again.
//!
//! [`FuseMount::with_idmapped_scratch`]: crate::FuseMount::with_idmapped_scratch

use std::collections::HashMap;
use std::ops::Range;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{FlockOperation, Mode, OFlags};

use crate::error::ToolError;

/// The uids leased to commands: 1,024 from `0x7FFF_0000`, above systemd's
/// container ranges (`0x0008_0000..0x7000_0000`) and its foreign range
/// (`0x7FFE_0000..0x7FFF_0000`), and below `2^31`, so a signed 32-bit id
/// still holds one.
pub const COMMAND_UIDS: Range<u32> = 0x7FFF_0000..0x7FFF_0400;

/// Where the leases are: a directory of root's, mode 0700.
const LEASES: &str = "/run/vsh/command-uids";

/// The next lease's place in the rotation, less this process's offset
/// ([`process_offset`]).
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Where this process's rotation starts: apart from another process's.
fn process_offset() -> u32 {
    rustix::process::getpid().as_raw_pid().unsigned_abs().wrapping_mul(2_654_435_761)
}

/// The user namespaces that map a storage uid and gid to a leased uid,
/// least recently used first: making one costs a fork (about 1.4 ms), so
/// the last [`KEPT_IDMAPS`] are kept, and a lease prefers their uids.
static IDMAPS: Mutex<Vec<(Key, Arc<OwnedFd>)>> = Mutex::new(Vec::new());

/// How many idmap namespaces a process keeps (each holds a descriptor).
const KEPT_IDMAPS: usize = 16;

/// A storage uid and gid, and the uid they are mapped to.
type Key = ((u32, u32), u32);

/// Whether a filesystem (by device number) can be idmapped, as found.
static IDMAPPABLE: Mutex<Option<HashMap<u64, bool>>> = Mutex::new(None);

/// A uid leased to one command (see the module): held until dropped.
#[derive(Debug)]
pub struct CommandUser {
    uid: u32,
    storage: (u32, u32),
    lease: OwnedFd,
}

fn setup(stage: &'static str) -> impl Fn(rustix::io::Errno) -> ToolError {
    move |errno| ToolError::Setup { stage, source: errno.into() }
}

/// When the lease file `lease` of `uid` carries the mark of a holder that
/// died holding it, kill every process running as `uid` (a shell as `uid`
/// and group `gid` sends `SIGKILL` to all it may signal: the uid's
/// processes), then clear the mark.
pub(crate) fn reap_if_abandoned(lease: &OwnedFd, uid: u32, gid: u32) -> Result<(), ToolError> {
    use std::os::unix::process::CommandExt as _;
    let stat = rustix::fs::fstat(lease).map_err(setup("command uid leases"))?;
    if stat.st_size == 0 {
        return Ok(());
    }
    let reaped = std::process::Command::new("/bin/sh")
        .args(["-c", "kill -KILL -1 2>/dev/null; exit 0"])
        .env_clear()
        .uid(uid)
        .gid(gid)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|source| ToolError::Setup { stage: "reap an abandoned command uid", source })?;
    if !reaped.success() {
        return Err(ToolError::Setup {
            stage: "reap an abandoned command uid",
            source: std::io::Error::other(format!("the reaper exited with {reaped}")),
        });
    }
    rustix::fs::ftruncate(lease, 0).map_err(setup("command uid leases"))
}

/// Open (making it if missing) the directory `name` beneath `parent` (shown
/// as `shown` in an error) and check it is root's own and writable by nobody
/// else.
fn private_dir(parent: impl rustix::fd::AsFd, name: &str, shown: &str) -> Result<OwnedFd, ToolError> {
    match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(errno) => return Err(setup("command uid leases")(errno)),
    }
    let dir = rustix::fs::openat(
        &parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(setup("command uid leases"))?;
    let stat = rustix::fs::fstat(&dir).map_err(setup("command uid leases"))?;
    if stat.st_uid != rustix::process::geteuid().as_raw() || stat.st_mode & 0o022 != 0 {
        return Err(ToolError::Setup {
            stage: "command uid leases",
            source: std::io::Error::other(format!(
                "{shown} must be root's and writable by no one else (owner {}, mode {:o})",
                stat.st_uid,
                stat.st_mode & 0o7777
            )),
        });
    }
    Ok(dir)
}

impl CommandUser {
    /// Lease a uid of [`COMMAND_UIDS`] no other command holds, for a
    /// command whose lasting files are stored as `storage` (uid, gid); the
    /// command runs with the storage gid.
    ///
    /// # Errors
    ///
    /// [`ToolError::Setup`] (stage `command uid leases`) when the lease
    /// directory cannot be made or is not root's alone (this needs root),
    /// or when every uid of the range is leased.
    pub fn lease(storage: (u32, u32)) -> Result<Self, ToolError> {
        let run = rustix::fs::open("/run", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(setup("command uid leases"))?;
        let vsh = private_dir(&run, "vsh", "/run/vsh")?;
        let leases = private_dir(&vsh, "command-uids", LEASES)?;
        let count = COMMAND_UIDS.end - COMMAND_UIDS.start;
        // `count` divides 2^32, so the wrapping sums below stay in step modulo it.
        let start = process_offset().wrapping_add(NEXT.load(Ordering::Relaxed));
        // The uids this process has an idmap for first, least recently used
        // first; then the rest, in rotation.
        let kept: Vec<u32> = IDMAPS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|((kept, _), _)| *kept == storage)
            .map(|((_, uid), _)| *uid)
            .collect();
        let rotation = (0..count).map(|step| COMMAND_UIDS.start + start.wrapping_add(step) % count);
        for uid in kept.into_iter().chain(rotation) {
            let file = rustix::fs::openat(
                &leases,
                uid.to_string(),
                OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(setup("command uid leases"))?;
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {
                    // The rotation goes on after this uid.
                    let after = uid.wrapping_sub(COMMAND_UIDS.start).wrapping_add(1);
                    NEXT.store(after.wrapping_sub(process_offset()), Ordering::Relaxed);
                    reap_if_abandoned(&file, uid, storage.1)?;
                    rustix::io::pwrite(&file, b"1", 0).map_err(setup("command uid leases"))?;
                    return Ok(Self { uid, storage, lease: file });
                }
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
                Err(errno) => return Err(setup("command uid leases")(errno)),
            }
        }
        Err(ToolError::Setup {
            stage: "command uid leases",
            source: std::io::Error::other(format!("all {count} command uids are leased")),
        })
    }

    /// The leased uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The gid the command runs with: the storage gid.
    pub fn gid(&self) -> u32 {
        self.storage.1
    }

    /// The uid and gid lasting files are stored as.
    pub fn storage(&self) -> (u32, u32) {
        self.storage
    }

    /// The user namespace that maps the storage uid to the leased one (and
    /// the storage gid to itself), for idmapped mounts.
    pub(crate) fn idmap(&self) -> Result<Arc<OwnedFd>, ToolError> {
        let key = (self.storage, self.uid);
        {
            let mut kept = IDMAPS.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(at) = kept.iter().position(|(known, _)| *known == key) {
                let entry = kept.remove(at);
                let userns = Arc::clone(&entry.1);
                kept.push(entry);
                return Ok(userns);
            }
        }
        let (owner, group) = self.storage;
        let userns = crate::sys::user_namespace(&format!("{owner} {} 1\n", self.uid), &format!("{group} {group} 1\n"))
            .map_err(|source| ToolError::Setup { stage: "idmap user namespace", source })?;
        let userns = Arc::new(userns);
        let mut kept = IDMAPS.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= KEPT_IDMAPS {
            kept.remove(0);
        }
        kept.push((key, Arc::clone(&userns)));
        Ok(userns)
    }

    /// Whether the filesystem of the host directory `dir` can be shown
    /// through an idmapped mount (ext4, xfs, btrfs, and tmpfs since Linux
    /// 6.3 can; a network filesystem may not), found once per filesystem.
    /// Where it cannot, a command that keeps files there must run as the
    /// storage uid itself.
    pub fn can_idmap(&self, dir: &Path) -> bool {
        let Ok(stat) = rustix::fs::stat(dir) else { return false };
        let device = stat.st_dev;
        if let Some(known) =
            IDMAPPABLE.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_default().get(&device)
        {
            return *known;
        }
        let Ok(userns) = self.idmap() else { return false };
        let Ok(clone) = crate::namespace::clone_tree(dir) else { return false };
        let can = crate::sys::idmap_mount(clone.as_fd(), userns.as_fd()).is_ok();
        IDMAPPABLE.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_default().insert(device, can);
        can
    }
}

impl Drop for CommandUser {
    /// The command's processes are gone (the run kills and reaps them before
    /// it lets the lease go): the mark is cleared.
    fn drop(&mut self) {
        let _ = rustix::fs::ftruncate(&self.lease, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the tests that lease: one's freed uid is not another's to take
    /// meanwhile.
    static LEASING: Mutex<()> = Mutex::new(());

    /// Whether another open file description could lock `uid`'s lease now
    /// (its file made, as a lease makes it, if no lease has yet).
    fn lockable(uid: u32) -> bool {
        let path = format!("{LEASES}/{uid}");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).unwrap();
        rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok()
    }

    fn as_root() -> bool {
        let root = rustix::process::geteuid().is_root();
        assert!(root || std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "VSH_REQUIRE_SANDBOX is set: run as root");
        root
    }

    #[test]
    fn a_lease_a_dead_holder_left_marked_kills_the_uids_processes_first() {
        use std::os::unix::process::CommandExt as _;
        if !as_root() {
            return;
        }
        let _alone = LEASING.lock().unwrap_or_else(PoisonError::into_inner);
        // A lease held: its file carries the mark; dropped: cleared.
        let user = CommandUser::lease((65_533, 65_533)).unwrap();
        let path = format!("{LEASES}/{}", user.uid());
        assert_eq!(std::fs::read(&path).unwrap(), b"1");
        drop(user);
        assert!(std::fs::read(&path).unwrap().is_empty());
        // A holder that died: its mark stays, and a process of its command
        // still runs as the uid (the last of the range, as a test's own).
        let uid = COMMAND_UIDS.end - 1;
        let dir = tempfile::tempdir().unwrap();
        let lease_path = dir.path().join("lease");
        std::fs::write(&lease_path, b"1").unwrap();
        let mut left = std::process::Command::new("/bin/sleep").arg("60").uid(uid).gid(65_533).spawn().unwrap();
        let lease: OwnedFd = std::fs::OpenOptions::new().read(true).write(true).open(&lease_path).unwrap().into();
        reap_if_abandoned(&lease, uid, 65_533).unwrap();
        let status = left.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status}");
        assert!(std::fs::read(&lease_path).unwrap().is_empty(), "the mark is cleared");
        // An unmarked lease kills nothing.
        let mut kept = std::process::Command::new("/bin/sleep").arg("60").uid(uid).gid(65_533).spawn().unwrap();
        reap_if_abandoned(&lease, uid, 65_533).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(kept.try_wait().unwrap().is_none(), "still running");
        kept.kill().unwrap();
        let _ = kept.wait();
    }

    #[test]
    fn a_lease_is_exclusive_machine_wide_until_dropped() {
        if !as_root() {
            return;
        }
        let _alone = LEASING.lock().unwrap_or_else(PoisonError::into_inner);
        let first = CommandUser::lease((65_533, 65_533)).unwrap();
        let second = CommandUser::lease((65_533, 65_533)).unwrap();
        assert!(COMMAND_UIDS.contains(&first.uid()) && COMMAND_UIDS.contains(&second.uid()));
        assert_ne!(first.uid(), second.uid());
        assert_eq!((first.gid(), first.storage()), (65_533, (65_533, 65_533)));
        assert!(!lockable(first.uid()), "held: no other process may take it");
        let uid = first.uid();
        drop(first);
        assert!(lockable(uid), "dropped: free again");
        assert!(!lockable(second.uid()));
        // The rotation goes on after the last uid leased (unless another
        // process holds that one).
        let next =
            COMMAND_UIDS.start + (second.uid() - COMMAND_UIDS.start + 1) % (COMMAND_UIDS.end - COMMAND_UIDS.start);
        if lockable(next) {
            assert_eq!(CommandUser::lease((65_533, 65_533)).unwrap().uid(), next);
        }
    }

    #[test]
    fn a_lease_directory_another_user_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        if !as_root() {
            return;
        }
        let parent = tempfile::tempdir().unwrap();
        let open = || std::fs::File::open(parent.path()).unwrap();
        let dir = private_dir(open(), "vsh", "vsh").unwrap();
        assert_eq!(rustix::fs::fstat(&dir).unwrap().st_mode & 0o777, 0o700, "made root's alone");
        std::fs::set_permissions(parent.path().join("vsh"), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(private_dir(open(), "vsh", "vsh"), Err(ToolError::Setup { .. })), "world-writable");
        std::fs::set_permissions(parent.path().join("vsh"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(parent.path().join("vsh"), Some(1234), None).unwrap();
        assert!(matches!(private_dir(open(), "vsh", "vsh"), Err(ToolError::Setup { .. })), "another user's");
        std::os::unix::fs::symlink("/tmp", parent.path().join("link")).unwrap();
        assert!(
            matches!(private_dir(open(), "link", "link"), Err(ToolError::Setup { .. })),
            "a symlink is not followed"
        );
    }
}
