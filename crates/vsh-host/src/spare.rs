//! Spare inodes: a regular file the commit engine no longer needs (the old
//! version of a file it replaced), emptied and kept, so that a later commit
//! writes a new file into it instead of creating one.
//!
//! Why: an `ext4` without a journal (this project's test machines) skips
//! every inode freed in the last minute (five with its table block dirty)
//! when it allocates one, checking each in turn, and starts that search
//! from the group's first inode every time. A commit that replaces 1,000
//! files frees 1,000 inodes, so the next one's 1,000 creations each walk
//! past them all: the staging of a 1,000-file commit took 240 ms after one
//! such commit and 400 ms after eight, against 125 ms when nothing is freed
//! (`bench/compare`, `patch-1k`). Reusing the inode frees nothing and
//! allocates nothing.
//!
//! A spare must be nobody else's: a regular file with one link, owned by
//! this process's user, without extended attributes (an ACL, a security
//! label, file capabilities would carry over to the new file), and open
//! nowhere: not by another process (a reader of the old version keeps
//! reading it, unchanged), not mapped, not running. The last is asked of
//! the kernel with a write lease (`F_SETLEASE`), which is granted only when
//! no other descriptor of the file is open; it is released at once. Every
//! check is made when the file becomes a spare and again when it is reused.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsFd;

use rustix::fs::{self as rfs, Mode, OFlags};
use vsh_types::{MODE_MASK, VPath};

use crate::capdir::fstat;
use crate::error::HostError;
use crate::mutate::WritableDir;
use crate::resolve::retry_intr;
use crate::stat::{HostKind, HostStat};

/// The mode of a spare while it waits.
const SPARE_MODE: u32 = 0o600;

/// Whether no descriptor of the file other than `file` is open anywhere:
/// a write lease is granted only then (`fcntl(F_SETLEASE, F_WRLCK)`, which
/// counts every open file of the inode, a mapping's and a running
/// program's included). The lease is released before this returns. A
/// filesystem or a user that cannot take leases (leases disabled, a file
/// of another owner without `CAP_LEASE`) answers `false`.
#[allow(unsafe_code)]
fn open_only_here(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: F_SETLEASE takes an integer argument and reads and writes no
    // memory of ours; `fd` is borrowed from a live `File` for both calls.
    let taken = unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) } == 0;
    if taken {
        // SAFETY: as above; F_UNLCK releases the lease just taken.
        unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
    }
    taken
}

/// Whether the open file `file`, of metadata `stat`, may be rewritten as
/// another file: see the module's documentation.
fn is_nobody_elses(file: &File, stat: &HostStat) -> bool {
    stat.kind == HostKind::File
        && stat.nlink == 1
        && stat.uid == crate::effective_uid()
        && rfs::flistxattr_query(file.as_fd()).is_ok_and(|len| len == 0)
        && open_only_here(file)
}

impl WritableDir {
    /// Make the regular file at `path` a spare: check that it is nobody
    /// else's (one link, this user's, no extended attributes, open nowhere
    /// else), then empty it and give it mode `0o600`. The caller moves it
    /// where spares wait. `Ok(false)`, changing nothing, when it cannot be
    /// one (including when it is not a regular file).
    ///
    /// # Errors
    ///
    /// [`HostError::Io`] when emptying it fails, or opening it fails for
    /// another reason than what is there.
    pub fn make_spare(&self, path: &VPath) -> Result<bool, HostError> {
        self.counters.write();
        let file = match self.open_regular_for_write(path, OFlags::empty()) {
            Ok(file) => file,
            Err(HostError::NotAFile { .. }) => return Ok(false),
            Err(error) => return Err(error),
        };
        if !is_nobody_elses(&file, &fstat(file.as_fd(), path)?) {
            return Ok(false);
        }
        retry_intr(|| rfs::ftruncate(&file, 0)).map_err(|errno| HostError::io("ftruncate", path, errno))?;
        rfs::fchmod(&file, Mode::from_raw_mode(SPARE_MODE)).map_err(|errno| HostError::io("fchmod", path, errno))?;
        Ok(true)
    }

    /// Fill the spare at `path` with `bytes` and give it `mode`, as
    /// [`WritableDir::create_file_exclusive_open`] makes a new file: checked
    /// again to be nobody else's, emptied if it is not empty, written,
    /// handed back open and not synced, with its metadata and inode
    /// generation. `Ok(None)`, having written nothing, when it is no longer
    /// a spare: the caller removes it and creates the file instead.
    ///
    /// # Errors
    ///
    /// [`HostError::Io`] when emptying or writing it fails; the file is then
    /// partly written, for the caller to remove.
    pub fn fill_spare_open(
        &self,
        path: &VPath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<Option<(HostStat, Option<u32>, File)>, HostError> {
        self.counters.write();
        let mut file = match self.open_regular_for_write(path, OFlags::empty()) {
            Ok(file) => file,
            Err(HostError::NotAFile { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        let stat = fstat(file.as_fd(), path)?;
        if !is_nobody_elses(&file, &stat) {
            return Ok(None);
        }
        if stat.size != 0 {
            retry_intr(|| rfs::ftruncate(&file, 0)).map_err(|errno| HostError::io("ftruncate", path, errno))?;
        }
        file.write_all(bytes).map_err(|source| HostError::Io { op: "write", path: path.clone(), source })?;
        rfs::fchmod(&file, Mode::from_raw_mode(mode & MODE_MASK))
            .map_err(|errno| HostError::io("fchmod", path, errno))?;
        let generation = crate::capdir::generation_of(file.as_fd());
        Ok(Some((fstat(file.as_fd(), path)?, generation, file)))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::sync::Arc;

    use super::*;
    use crate::CapDir;

    fn dir() -> (tempfile::TempDir, WritableDir) {
        let temp = tempfile::tempdir().expect("a directory");
        let handle = WritableDir::new(Arc::new(CapDir::open(temp.path()).expect("a handle")));
        (temp, handle)
    }

    fn path(name: &str) -> VPath {
        VPath::from_component(name).expect("a name")
    }

    #[test]
    fn a_plain_file_becomes_an_empty_private_spare_and_is_filled_in_place() {
        let (temp, handle) = dir();
        std::fs::write(temp.path().join("old"), b"old bytes").expect("written");
        std::fs::set_permissions(temp.path().join("old"), std::fs::Permissions::from_mode(0o755)).expect("mode");
        let inode = std::fs::metadata(temp.path().join("old")).expect("stat").ino();
        assert!(handle.make_spare(&path("old")).expect("made"));
        let spare = std::fs::metadata(temp.path().join("old")).expect("stat");
        assert_eq!((spare.len(), spare.mode() & 0o7777, spare.ino()), (0, 0o600, inode));

        let (stat, _, file) = handle.fill_spare_open(&path("old"), b"new", 0o640).expect("filled").expect("a spare");
        drop(file);
        assert_eq!(std::fs::read(temp.path().join("old")).expect("read"), b"new");
        let filled = std::fs::metadata(temp.path().join("old")).expect("stat");
        assert_eq!((filled.ino(), filled.mode() & 0o7777, stat.size), (inode, 0o640, 3));
    }

    #[test]
    fn a_file_linked_twice_open_elsewhere_or_with_attributes_is_never_a_spare_and_keeps_its_bytes() {
        let (temp, handle) = dir();
        for name in ["linked", "open", "mapped", "labelled"] {
            std::fs::write(temp.path().join(name), b"theirs").expect("written");
        }
        std::fs::hard_link(temp.path().join("linked"), temp.path().join("other")).expect("linked");
        let reader = std::fs::File::open(temp.path().join("open")).expect("opened");
        let mapped = std::fs::File::open(temp.path().join("mapped")).expect("opened");
        // SAFETY: (test) a private read-only mapping of 6 bytes of a live
        // file, unmapped below; nothing reads through it.
        #[allow(unsafe_code)]
        let map = unsafe {
            use std::os::fd::AsRawFd as _;
            libc::mmap(std::ptr::null_mut(), 6, libc::PROT_READ, libc::MAP_PRIVATE, mapped.as_raw_fd(), 0)
        };
        assert_ne!(map, libc::MAP_FAILED);
        drop(mapped);
        let labelled = temp.path().join("labelled");
        let has_xattr = rfs::setxattr(&labelled, "user.vsh", b"1", rfs::XattrFlags::empty()).is_ok();
        for name in ["linked", "open", "mapped"].into_iter().chain(has_xattr.then_some("labelled")) {
            assert!(!handle.make_spare(&path(name)).expect("asked"), "{name} became a spare");
            assert!(handle.fill_spare_open(&path(name), b"ours", 0o644).expect("asked").is_none(), "{name} was filled");
            assert_eq!(std::fs::read(temp.path().join(name)).expect("read"), b"theirs", "{name}");
        }
        drop(reader);
        // SAFETY: (test) the mapping made above, of 6 bytes, unused since.
        #[allow(unsafe_code)]
        let unmapped = unsafe { libc::munmap(map, 6) };
        assert_eq!(unmapped, 0);
        // Once nobody holds it, the same file may become a spare.
        assert!(handle.make_spare(&path("open")).expect("made"));
        assert!(handle.make_spare(&path("mapped")).expect("made"));
    }

    #[test]
    fn a_symlink_a_directory_or_a_fifo_is_never_a_spare() {
        let (temp, handle) = dir();
        std::fs::write(temp.path().join("target"), b"theirs").expect("written");
        std::os::unix::fs::symlink(temp.path().join("target"), temp.path().join("link")).expect("a symlink");
        std::fs::create_dir(temp.path().join("dir")).expect("a directory");
        rfs::mknodat(rfs::CWD, temp.path().join("fifo"), rfs::FileType::Fifo, Mode::from_raw_mode(0o600), 0)
            .expect("a fifo");
        for name in ["link", "dir", "fifo"] {
            assert!(!handle.make_spare(&path(name)).expect("asked"), "{name}");
            assert!(handle.fill_spare_open(&path(name), b"ours", 0o644).expect("asked").is_none(), "{name}");
        }
        assert_eq!(std::fs::read(temp.path().join("target")).expect("read"), b"theirs");
    }
}
