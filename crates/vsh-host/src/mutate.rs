//! [`WritableDir`]: the mutating capability over a [`CapDir`], with the
//! mutation primitives used by the commit engine and the store, and advisory
//! locks ([`LockGuard`]).
//!
//! A [`CapDir`] only observes. Changing what a directory holds takes a
//! [`WritableDir`], which wraps a shared [`CapDir`] (every observation is
//! reached through it). Only vsh-commit and vsh-store name it, and the seed
//! `Host` of vsh-tools for its own direct writes; the tidy test
//! `only_the_commit_engine_and_the_store_name_the_writable_handle` checks it.
//!
//! Each primitive is one step: it creates, renames, removes, changes a mode or
//! syncs exactly one thing, resolving paths like every other [`CapDir`] method
//! (beneath the handle, never following a symlink in any component or at the
//! leaf). Each call counts one write, whether or not it succeeds. Ordering and
//! durability across steps are the caller's job.

use std::fs::File;
use std::io::Write;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{self as rfs, AtFlags, FlockOperation, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use vsh_types::{MODE_MASK, VPath};

use crate::capdir::{CapDir, fstat};
use crate::error::HostError;
use crate::resolve::{Failure, retry_intr};
use crate::stat::{HostKind, HostStat};

/// Mode given to a new file before its exact mode is set with `fchmod`.
const INITIAL_FILE_MODE: u32 = 0o600;

/// Mode of a lock file created by [`WritableDir::lock_exclusive`] or [`WritableDir::lock_shared`].
const LOCK_FILE_MODE: u32 = 0o600;

/// A directory handle that may change what it holds: the read-only [`CapDir`]
/// it wraps (reached by `Deref`), plus every mutation primitive and lock.
#[derive(Debug, Clone)]
pub struct WritableDir {
    dir: Arc<CapDir>,
}

impl Deref for WritableDir {
    type Target = CapDir;

    fn deref(&self) -> &CapDir {
        &self.dir
    }
}

/// The unit [`write_keeping_holes`] leaves unwritten when it is all zeros:
/// a page, the block size of the filesystems vsh meets.
const HOLE_BLOCK: usize = 4096;

/// Write `bytes` into the new, empty `file` from its start, leaving every
/// aligned [`HOLE_BLOCK`] of zeros unwritten: the file reads back the same
/// bytes, but a sparse file (a disk image, a file a process extended with
/// `truncate` or a seek) stays sparse instead of being allocated in full.
/// The runs of other blocks are written whole, one `pwrite` each, and the
/// length is set last (a hole at the end is a `ftruncate`).
fn write_keeping_holes(file: &mut File, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    if bytes.len() < 2 * HOLE_BLOCK {
        return file.write_all(bytes);
    }
    let mut run_start = None;
    for (index, block) in bytes.chunks(HOLE_BLOCK).enumerate() {
        let at = index * HOLE_BLOCK;
        let zeros = block.len() == HOLE_BLOCK && block.iter().all(|byte| *byte == 0);
        match (zeros, run_start) {
            (false, None) => run_start = Some(at),
            (true, Some(start)) => {
                file.write_all_at(&bytes[start..at], start as u64)?;
                run_start = None;
            }
            _ => {}
        }
    }
    if let Some(start) = run_start {
        file.write_all_at(&bytes[start..], start as u64)?;
    }
    file.set_len(bytes.len() as u64)
}

impl WritableDir {
    /// The mutating capability over `dir`.
    pub fn new(dir: Arc<CapDir>) -> Self {
        Self { dir }
    }

    /// The read-only handle, shared.
    pub fn read_only(&self) -> &Arc<CapDir> {
        &self.dir
    }

    /// Open (creating if needed, mode `0o700`) a directory at a host path, as a
    /// writable handle: the part of the path that exists is canonicalized once,
    /// then every component is opened from `/` with `O_NOFOLLOW | O_DIRECTORY`
    /// and missing ones are made with `mkdirat`. A symlink met on that walk is
    /// [`HostError::SymlinkInPath`], a non-directory
    /// [`HostError::NotADirectory`], a `..` below the existing prefix or a
    /// non-UTF-8 component [`HostError::InvalidRoot`].
    ///
    /// # Ambient authority
    ///
    /// This reaches the host filesystem by path.
    pub fn open_or_create_trusted(path: &Path) -> Result<WritableDir, HostError> {
        CapDir::open_or_create_trusted(path).map(|dir| Self::new(Arc::new(dir)))
    }

    /// Open the subdirectory at `path` beneath this handle, creating missing
    /// components with mode `0o700` (narrowed by the umask) one at a time with
    /// `O_NOFOLLOW`; otherwise as [`CapDir::open_subdir`]. Creating directories
    /// here does not count as a write.
    pub fn open_or_create_subdir(&self, path: &VPath) -> Result<WritableDir, HostError> {
        self.dir.open_subdir_creating(path).map(|dir| Self::new(Arc::new(dir)))
    }
    /// Create a directory at `path` with exactly `mode` (permission bits only):
    /// `mkdirat`, then a chmod that the umask does not narrow.
    ///
    /// Anything already at `path`, a symlink included, is
    /// [`HostError::AlreadyExists`]; a missing parent is [`HostError::NotFound`].
    /// Those, and a parent that is not a directory, mean nothing was made;
    /// once the directory is made, any failure is [`HostError::Io`] (the
    /// directory exists, or did: someone may have moved it meanwhile).
    pub fn create_dir(&self, path: &VPath, mode: u32) -> Result<(), HostError> {
        self.counters.write();
        if path.is_root() {
            return Err(HostError::AlreadyExists { path: path.clone() });
        }
        let (parent, leaf) = self.open_parent(path).map_err(|failure| failure.into_error("open", path))?;
        match retry_intr(|| rfs::mkdirat(&parent, leaf, Mode::from_raw_mode(mode & MODE_MASK))) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(HostError::AlreadyExists { path: path.clone() }),
            Err(Errno::NOENT) => return Err(HostError::NotFound { path: path.clone() }),
            Err(errno) => return Err(HostError::io("mkdirat", path, errno)),
        }
        // Reopen the new directory by name without following anything: if it was
        // swapped for a symlink in between, this fails instead of chmodding the target.
        let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = retry_intr(|| rfs::openat(&parent, leaf, dir_flags, Mode::empty()))
            .map_err(|errno| HostError::io("reopen the new directory", path, errno))?;
        chmod_opened(fd.as_fd(), mode).map_err(|errno| HostError::io("chmod", path, errno))
    }

    /// Create a new regular file at `path` holding `bytes`, with exactly `mode`
    /// (permission bits only), and `fsync` it. Returns its metadata after the sync.
    ///
    /// The file is opened `O_CREAT | O_EXCL | O_NOFOLLOW`, so anything already at
    /// `path`, a dangling symlink included, is [`HostError::AlreadyExists`] and
    /// nothing is created at a symlink's target. The parent directory is not
    /// synced (see [`WritableDir::sync_dir`]). If writing fails part-way, the partial
    /// file is left for the caller to remove.
    pub fn create_file_exclusive(&self, path: &VPath, bytes: &[u8], mode: u32) -> Result<HostStat, HostError> {
        self.create_file_exclusive_with(path, bytes, mode, true, None).map(|(stat, _)| stat)
    }

    /// [`WritableDir::create_file_exclusive`] without the `fsync`: for callers that
    /// create many files and then make them durable together with one
    /// [`WritableDir::syncfs`] (a constant number of barriers instead of one per
    /// file). Until that barrier the data may be lost in a crash.
    ///
    /// Returns the file's inode generation too (see [`CapDir::generation`]),
    /// read from the descriptor it was written through, so it is known even
    /// when `mode` denies this process reading the file.
    pub fn create_file_exclusive_unsynced(
        &self,
        path: &VPath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(HostStat, Option<u32>), HostError> {
        let (stat, generation, _) = self.create_file_exclusive_open(path, bytes, mode)?;
        Ok((stat, generation))
    }

    /// [`WritableDir::create_file_exclusive_unsynced`], handing back the file
    /// still open, so the caller makes it durable when it chooses
    /// ([`WritableDir::sync_opened`]): a commit stages many files, then syncs
    /// each of them, and pays for its own bytes only (a `syncfs` would flush
    /// every program's dirty data on the filesystem).
    pub fn create_file_exclusive_open(
        &self,
        path: &VPath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(HostStat, Option<u32>, File), HostError> {
        let mut generation = None;
        let (stat, file) = self.create_file_exclusive_with(path, bytes, mode, false, Some(&mut generation))?;
        Ok((stat, generation, file))
    }

    /// `fsync` a file this handle created and handed back open (see
    /// [`WritableDir::create_file_exclusive_open`]); `path` names it in errors.
    pub fn sync_opened(&self, file: &File, path: &VPath) -> Result<(), HostError> {
        self.counters.write();
        retry_intr(|| rfs::fsync(file)).map_err(|errno| HostError::io("fsync", path, errno))
    }

    fn create_file_exclusive_with(
        &self,
        path: &VPath,
        bytes: &[u8],
        mode: u32,
        sync: bool,
        generation: Option<&mut Option<u32>>,
    ) -> Result<(HostStat, File), HostError> {
        self.counters.write();
        if path.is_root() {
            return Err(HostError::AlreadyExists { path: path.clone() });
        }
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
        let fd = self.open_beneath(path, flags, Mode::from_raw_mode(INITIAL_FILE_MODE)).map_err(|failure| {
            failure.leaf_symlink_as(path, || HostError::AlreadyExists { path: path.clone() }, "open")
        })?;
        let mut file = File::from(fd);
        write_keeping_holes(&mut file, bytes).map_err(|source| HostError::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
        rfs::fchmod(&file, Mode::from_raw_mode(mode & MODE_MASK))
            .map_err(|errno| HostError::io("fchmod", path, errno))?;
        if sync {
            retry_intr(|| rfs::fsync(&file)).map_err(|errno| HostError::io("fsync", path, errno))?;
        }
        if let Some(generation) = generation {
            *generation = crate::capdir::generation_of(file.as_fd());
        }
        Ok((fstat(file.as_fd(), path)?, file))
    }

    /// Append `bytes` to the existing regular file at `path` (`O_APPEND`), then
    /// fsync it; returns the file's new length. Used for append-only logs: a crash
    /// part-way leaves a torn tail, which the log's reader detects and truncates.
    ///
    /// A missing file is [`HostError::NotFound`]; a symlink, directory, FIFO or
    /// device at `path` is [`HostError::NotAFile`] (opened non-blocking, so a FIFO
    /// cannot hang the call).
    pub fn append(&self, path: &VPath, bytes: &[u8]) -> Result<u64, HostError> {
        self.append_then(path, bytes, true)
    }

    /// [`WritableDir::append`] without the fsync: the bytes reach every
    /// reader of the file at once, and the disk with the file's next fsync
    /// (which makes every earlier byte of it durable) or whenever the kernel
    /// writes them back. A crash of the machine before then may keep any
    /// prefix of them, a torn tail as for [`WritableDir::append`].
    pub fn append_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<u64, HostError> {
        self.append_then(path, bytes, false)
    }

    fn append_then(&self, path: &VPath, bytes: &[u8], sync: bool) -> Result<u64, HostError> {
        self.counters.write();
        let mut file = self.open_regular_for_write(path, OFlags::APPEND)?;
        file.write_all(bytes).map_err(|source| HostError::Io { op: "write", path: path.clone(), source })?;
        if sync {
            retry_intr(|| rfs::fsync(&file)).map_err(|errno| HostError::io("fsync", path, errno))?;
        }
        Ok(fstat(file.as_fd(), path)?.size)
    }

    /// Replace the bytes of the existing regular file at `path` with `bytes`
    /// in place (truncated, then written; no `fsync`), never through a
    /// symlink: for a file that cannot be replaced by a rename (its
    /// directory refuses new entries). Not atomic: a reader, or a crash, may
    /// see it empty or cut short, which the file's own checks must refuse.
    /// Errors as for [`WritableDir::append`].
    pub fn overwrite_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<(), HostError> {
        self.counters.write();
        let mut file = self.open_regular_for_write(path, OFlags::TRUNC)?;
        file.write_all(bytes).map_err(|source| HostError::Io { op: "write", path: path.clone(), source })
    }

    /// Cut the existing regular file at `path` to `len` bytes (no-op when it is
    /// already that short) and fsync it. Errors as for [`WritableDir::append`].
    pub fn truncate(&self, path: &VPath, len: u64) -> Result<(), HostError> {
        self.counters.write();
        let file = self.open_regular_for_write(path, OFlags::empty())?;
        if fstat(file.as_fd(), path)?.size > len {
            retry_intr(|| rfs::ftruncate(&file, len)).map_err(|errno| HostError::io("ftruncate", path, errno))?;
            retry_intr(|| rfs::fsync(&file)).map_err(|errno| HostError::io("fsync", path, errno))?;
        }
        Ok(())
    }

    /// Ask the filesystem to place the directories later made in the
    /// directory `path` apart from each other, each in a block group of its
    /// own choosing (`FS_TOPDIR_FL`, which ext2/3/4 honour: such a directory
    /// is the top of independent hierarchies). Only a hint: a filesystem
    /// that keeps no such flag is [`HostError::Io`] (`ENOTTY`,
    /// `EOPNOTSUPP`), which callers may ignore.
    pub fn spread_subdirectories(&self, path: &VPath) -> Result<(), HostError> {
        self.counters.write();
        let fd = self
            .open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|failure| failure.into_error("open", path))?;
        let flags = rfs::ioctl_getflags(&fd).map_err(|errno| HostError::io("ioctl(FS_IOC_GETFLAGS)", path, errno))?;
        if flags.contains(rfs::IFlags::TOPDIR) {
            return Ok(());
        }
        rfs::ioctl_setflags(&fd, flags | rfs::IFlags::TOPDIR)
            .map_err(|errno| HostError::io("ioctl(FS_IOC_SETFLAGS)", path, errno))
    }

    /// Open an existing regular file for writing, never through a symlink.
    fn open_regular_for_write(&self, path: &VPath, extra: OFlags) -> Result<File, HostError> {
        if path.is_root() {
            return Err(HostError::NotAFile { path: path.clone() });
        }
        let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOCTTY | extra;
        let fd = match self.open_beneath(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            // A directory, or a FIFO with no reader (ENXIO under O_NONBLOCK).
            Err(Failure::Errno(Errno::ISDIR | Errno::NXIO)) => return Err(HostError::NotAFile { path: path.clone() }),
            Err(failure) => {
                return Err(failure.leaf_symlink_as(path, || HostError::NotAFile { path: path.clone() }, "open"));
            }
        };
        let file = File::from(fd);
        if fstat(file.as_fd(), path)?.kind != HostKind::File {
            return Err(HostError::NotAFile { path: path.clone() });
        }
        Ok(file)
    }

    /// Create a symbolic link at `path` pointing at `target` (stored verbatim,
    /// never resolved). Anything already at `path` is [`HostError::AlreadyExists`].
    pub fn create_symlink(&self, path: &VPath, target: &[u8]) -> Result<(), HostError> {
        self.counters.write();
        if path.is_root() {
            return Err(HostError::AlreadyExists { path: path.clone() });
        }
        let (parent, leaf) = self.open_parent(path).map_err(|failure| failure.into_error("open", path))?;
        match retry_intr(|| rfs::symlinkat(target, &parent, leaf)) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(HostError::AlreadyExists { path: path.clone() }),
            Err(Errno::NOENT) => Err(HostError::NotFound { path: path.clone() }),
            Err(errno) => Err(HostError::io("symlinkat", path, errno)),
        }
    }

    /// Rename `from` to `to` (`renameat`), replacing a file, symlink or empty
    /// directory at `to` as `rename(2)` does. Symlinks are moved, never followed.
    ///
    /// A missing `from` is [`HostError::NotFound`] naming `from`; a non-empty
    /// directory at `to` is [`HostError::DirectoryNotEmpty`] naming `to`.
    pub fn rename(&self, from: &VPath, to: &VPath) -> Result<(), HostError> {
        self.counters.write();
        self.rename_with(from, to, RenameFlags::empty(), "renameat")
    }

    /// Rename `from` to `to` only if nothing exists at `to` (`renameat2` with
    /// `RENAME_NOREPLACE`); otherwise [`HostError::AlreadyExists`] naming `to`.
    pub fn rename_noreplace(&self, from: &VPath, to: &VPath) -> Result<(), HostError> {
        self.counters.write();
        self.rename_with(from, to, RenameFlags::NOREPLACE, "renameat2")
    }

    /// Move the entry `raw` of the directory `from` (a handle beneath this
    /// one) to this directory's own entry `to`, never replacing anything
    /// ([`HostError::AlreadyExists`] then): so a tree of any depth is emptied
    /// by lifting what is deep up, never by descending into it.
    pub(crate) fn hoist_entry(&self, from: &WritableDir, raw: &[u8], to: &VPath) -> Result<(), HostError> {
        use std::os::unix::ffi::OsStrExt as _;
        self.counters.write();
        let leaf = std::ffi::OsStr::new(to.as_str());
        match retry_intr(|| {
            rfs::renameat_with(
                &from.dir.fd,
                std::ffi::OsStr::from_bytes(raw),
                &self.dir.fd,
                leaf,
                RenameFlags::NOREPLACE,
            )
        }) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(HostError::AlreadyExists { path: to.clone() }),
            Err(errno) => Err(HostError::io("renameat2", to, errno)),
        }
    }

    /// Give the entry `raw` of this directory itself (a name no [`VPath`] can
    /// spell: not UTF-8) the name `to`, never replacing anything: so a tree
    /// someone else wrote can be emptied whatever its names.
    pub(crate) fn rename_raw_entry(&self, raw: &[u8], to: &VPath) -> Result<(), HostError> {
        use std::os::unix::ffi::OsStrExt as _;
        self.counters.write();
        let (to_parent, to_leaf) = self.open_parent(to).map_err(|failure| failure.into_error("open", to))?;
        let from = std::ffi::OsStr::from_bytes(raw);
        match retry_intr(|| rfs::renameat_with(&self.dir.fd, from, &to_parent, to_leaf, RenameFlags::NOREPLACE)) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(HostError::AlreadyExists { path: to.clone() }),
            Err(errno) => Err(HostError::io("renameat2", to, errno)),
        }
    }

    fn rename_with(&self, from: &VPath, to: &VPath, flags: RenameFlags, op: &'static str) -> Result<(), HostError> {
        if from.is_root() || to.is_root() {
            return Err(HostError::IsRoot { op: "rename" });
        }
        let (from_parent, from_leaf) = self.open_parent(from).map_err(|failure| failure.into_error("open", from))?;
        let (to_parent, to_leaf) = self.open_parent(to).map_err(|failure| failure.into_error("open", to))?;
        match retry_intr(|| rfs::renameat_with(&from_parent, from_leaf, &to_parent, to_leaf, flags)) {
            Ok(()) => Ok(()),
            Err(Errno::NOENT) => Err(HostError::NotFound { path: from.clone() }),
            Err(Errno::EXIST) if flags.contains(RenameFlags::NOREPLACE) => {
                Err(HostError::AlreadyExists { path: to.clone() })
            }
            Err(Errno::NOTEMPTY | Errno::EXIST) => Err(HostError::DirectoryNotEmpty { path: to.clone() }),
            Err(errno) => Err(HostError::io(op, from, errno)),
        }
    }

    /// Remove the file, symlink (the link itself) or other non-directory at
    /// `path` (`unlinkat`). A directory is [`HostError::NotAFile`].
    pub fn remove_file(&self, path: &VPath) -> Result<(), HostError> {
        self.counters.write();
        if path.is_root() {
            return Err(HostError::IsRoot { op: "remove" });
        }
        let (parent, leaf) = self.open_parent(path).map_err(|failure| failure.into_error("open", path))?;
        match retry_intr(|| rfs::unlinkat(&parent, leaf, AtFlags::empty())) {
            Ok(()) => Ok(()),
            Err(Errno::NOENT) => Err(HostError::NotFound { path: path.clone() }),
            Err(Errno::ISDIR) => Err(HostError::NotAFile { path: path.clone() }),
            Err(errno) => Err(HostError::io("unlinkat", path, errno)),
        }
    }

    /// Remove the empty directory at `path` (`unlinkat` with `AT_REMOVEDIR`).
    /// A non-empty one is [`HostError::DirectoryNotEmpty`]; a non-directory
    /// (a symlink included) is [`HostError::NotADirectory`].
    pub fn remove_dir(&self, path: &VPath) -> Result<(), HostError> {
        self.counters.write();
        if path.is_root() {
            return Err(HostError::IsRoot { op: "remove" });
        }
        let (parent, leaf) = self.open_parent(path).map_err(|failure| failure.into_error("open", path))?;
        match retry_intr(|| rfs::unlinkat(&parent, leaf, AtFlags::REMOVEDIR)) {
            Ok(()) => Ok(()),
            Err(Errno::NOENT) => Err(HostError::NotFound { path: path.clone() }),
            Err(Errno::NOTEMPTY | Errno::EXIST) => Err(HostError::DirectoryNotEmpty { path: path.clone() }),
            Err(Errno::NOTDIR) => Err(HostError::NotADirectory { path: path.clone() }),
            Err(errno) => Err(HostError::io("unlinkat", path, errno)),
        }
    }

    /// Set the permission bits of the file or directory at `path` (the root
    /// included) to exactly `mode & 0o7777`. A symlink at `path` is
    /// [`HostError::IsASymlink`] and is left alone; its target is never touched.
    ///
    /// How: `path` is opened `O_PATH | O_NOFOLLOW`, which yields a descriptor
    /// for the object itself, symlink or not; `fstat` on it refuses symlinks;
    /// then the mode is set through `/proc/self/fd/N`, which names exactly that
    /// inode. The alternatives do not work here: `fchmod` refuses `O_PATH`
    /// descriptors (`EBADF`), opening the object for reading needs read
    /// permission and has side effects on FIFOs and devices, `fchmodat` without
    /// a working `AT_SYMLINK_NOFOLLOW` follows a symlink raced in at the leaf,
    /// and `fchmodat2` (Linux 6.6+, which has it) has no binding in rustix 1.1
    /// and would need `unsafe`. The `/proc` route works on every Linux with
    /// procfs mounted at `/proc`, Linux 6.18 included; without it this fails
    /// with [`HostError::Io`].
    pub fn set_mode(&self, path: &VPath, mode: u32) -> Result<(), HostError> {
        self.counters.write();
        let fd =
            self.open_beneath(path, OFlags::PATH, Mode::empty()).map_err(|failure| failure.into_error("open", path))?;
        if fstat(fd.as_fd(), path)?.kind == HostKind::Symlink {
            return Err(HostError::IsASymlink { path: path.clone() });
        }
        chmod_opened(fd.as_fd(), mode).map_err(|errno| HostError::io("chmod", path, errno))
    }

    /// `fsync` the directory at `path` (the root included), making entries
    /// created, renamed or removed in it durable.
    pub fn sync_dir(&self, path: &VPath) -> Result<(), HostError> {
        self.counters.write();
        let fd = self
            .open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|failure| failure.into_error("open", path))?;
        retry_intr(|| rfs::fsync(&fd)).map_err(|errno| HostError::io("fsync", path, errno))
    }

    /// `fsync` the regular file at `path`; anything else, a symlink included, is
    /// [`HostError::NotAFile`].
    pub fn sync_file(&self, path: &VPath) -> Result<(), HostError> {
        self.counters.write();
        let (file, _) = self.open_regular(path)?;
        retry_intr(|| rfs::fsync(&file)).map_err(|errno| HostError::io("fsync", path, errno))
    }

    /// `syncfs(2)` on the filesystem holding this directory.
    pub fn syncfs(&self) -> Result<(), HostError> {
        self.counters.write();
        retry_intr(|| rfs::syncfs(&self.fd)).map_err(|errno| HostError::io("syncfs", &VPath::root(), errno))
    }

    /// Take an exclusive advisory lock (`flock(LOCK_EX)`) on the lock file at
    /// `path`, creating it with mode `0o600` if missing (`O_NOFOLLOW`). Blocks
    /// until the lock is granted; it is released when the guard drops.
    ///
    /// The lock belongs to the open file description, so two calls in one
    /// process exclude each other like two processes do. Anything but a regular
    /// file at `path`, a symlink included, is [`HostError::NotAFile`]. Counts one write.
    pub fn lock_exclusive(&self, path: &VPath) -> Result<LockGuard, HostError> {
        self.lock(path, FlockOperation::LockExclusive)
    }

    /// Take a shared advisory lock (`flock(LOCK_SH)`); otherwise as
    /// [`WritableDir::lock_exclusive`].
    pub fn lock_shared(&self, path: &VPath) -> Result<LockGuard, HostError> {
        self.lock(path, FlockOperation::LockShared)
    }

    /// Take the exclusive lock at `path` if no one holds it; `Ok(None)` if
    /// someone does. Never blocks; otherwise as [`WritableDir::lock_exclusive`].
    pub fn try_lock_exclusive(&self, path: &VPath) -> Result<Option<LockGuard>, HostError> {
        match self.lock(path, FlockOperation::NonBlockingLockExclusive) {
            Ok(guard) => Ok(Some(guard)),
            Err(HostError::Io { source, .. }) if source.raw_os_error() == Some(Errno::WOULDBLOCK.raw_os_error()) => {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// Take the exclusive lock at `path`, waiting at most `wait.timeout`.
    ///
    /// While the lock is held elsewhere, a thread of its own waits for it in
    /// the kernel (`flock` blocks until the holder lets go, so the lock
    /// passes on the moment it is free, to this process's threads as to
    /// another process's); once the call has waited `wait.notice_after`, it
    /// calls `wait.notice` once, so a command line can say what it is waiting
    /// for. Past the timeout it is [`HostError::LockTimeout`], and a lock the
    /// waiting thread is granted later is let go at once.
    pub fn lock_exclusive_within(&self, path: &VPath, wait: &LockWait) -> Result<LockGuard, HostError> {
        if let Some(guard) = self.try_lock_exclusive(path)? {
            return Ok(guard);
        }
        let started = std::time::Instant::now();
        let fd = self.open_lock_file(path)?;
        let (granted, grant) = std::sync::mpsc::sync_channel(1);
        let waited_for = path.clone();
        std::thread::Builder::new()
            .name("vsh-lock-wait".to_owned())
            .spawn(move || {
                let locked = retry_intr(|| rfs::flock(&fd, FlockOperation::LockExclusive))
                    .map(|()| LockGuard { fd })
                    .map_err(|errno| HostError::io("flock", &waited_for, errno));
                // A caller that gave up dropped the receiver: the guard, and
                // with it the lock, goes here.
                let _ = granted.send(locked);
            })
            .map_err(|source| HostError::Io { op: "spawn a lock waiter", path: path.clone(), source })?;
        let mut noticed = false;
        loop {
            let waited = started.elapsed();
            if waited >= wait.timeout {
                return Err(HostError::LockTimeout { path: path.clone(), waited_ms: waited.as_millis() as u64 });
            }
            let until_notice = if noticed { wait.timeout } else { wait.notice_after.max(waited) };
            let slice = until_notice.min(wait.timeout).saturating_sub(waited).max(std::time::Duration::from_millis(1));
            match grant.recv_timeout(slice) {
                Ok(locked) => return locked,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(HostError::Io {
                        op: "wait for a lock",
                        path: path.clone(),
                        source: std::io::Error::other("the lock waiter ended without an answer"),
                    });
                }
            }
            let waited = started.elapsed();
            if !noticed && waited >= wait.notice_after {
                noticed = true;
                if let Some(notice) = &wait.notice {
                    notice(waited);
                }
            }
        }
    }

    fn lock(&self, path: &VPath, operation: FlockOperation) -> Result<LockGuard, HostError> {
        let fd = self.open_lock_file(path)?;
        retry_intr(|| rfs::flock(&fd, operation)).map_err(|errno| HostError::io("flock", path, errno))?;
        Ok(LockGuard { fd })
    }

    /// Open (or create) the lock file at `path`, a regular file. Counts one write.
    fn open_lock_file(&self, path: &VPath) -> Result<OwnedFd, HostError> {
        self.counters.write();
        let flags = OFlags::RDONLY | OFlags::CREATE | OFlags::NONBLOCK | OFlags::NOCTTY;
        let not_a_file = || HostError::NotAFile { path: path.clone() };
        let fd =
            self.open_beneath(path, flags, Mode::from_raw_mode(LOCK_FILE_MODE)).map_err(|failure| match failure {
                // O_CREAT on an existing directory (the root included) fails with EISDIR.
                Failure::Errno(Errno::ISDIR) => not_a_file(),
                other => other.leaf_symlink_as(path, not_a_file, "open"),
            })?;
        if fstat(fd.as_fd(), path)?.kind != HostKind::File {
            return Err(HostError::NotAFile { path: path.clone() });
        }
        Ok(fd)
    }
}

/// Set the mode of the object behind an `O_PATH` descriptor (see [`WritableDir::set_mode`]).
fn chmod_opened(fd: BorrowedFd<'_>, mode: u32) -> rustix::io::Result<()> {
    let magic = format!("/proc/self/fd/{}", fd.as_raw_fd());
    retry_intr(|| rfs::chmod(magic.as_str(), Mode::from_raw_mode(mode & MODE_MASK)))
}

/// How long [`WritableDir::lock_exclusive_within`] waits, and whom it tells.
#[derive(Clone)]
pub struct LockWait {
    /// Give up after this long (default 60 s).
    pub timeout: std::time::Duration,
    /// Call `notice` once after waiting this long (default 1 s).
    pub notice_after: std::time::Duration,
    /// Told how long the wait has lasted so far.
    pub notice: Option<std::sync::Arc<dyn Fn(std::time::Duration) + Send + Sync>>,
}

impl Default for LockWait {
    fn default() -> Self {
        Self {
            timeout: std::time::Duration::from_mins(1),
            notice_after: std::time::Duration::from_secs(1),
            notice: None,
        }
    }
}

impl LockWait {
    /// Wait at most `timeout`, telling nobody.
    pub fn within(timeout: std::time::Duration) -> Self {
        Self { timeout, ..Self::default() }
    }

    /// Also call `notice` once the wait has lasted `after`.
    #[must_use]
    pub fn with_notice(
        mut self,
        after: std::time::Duration,
        notice: impl Fn(std::time::Duration) + Send + Sync + 'static,
    ) -> Self {
        self.notice_after = after;
        self.notice = Some(std::sync::Arc::new(notice));
        self
    }
}

impl std::fmt::Debug for LockWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockWait")
            .field("timeout", &self.timeout)
            .field("notice_after", &self.notice_after)
            .field("notice", &self.notice.is_some())
            .finish()
    }
}

/// A held advisory lock from [`WritableDir::lock_exclusive`] or [`WritableDir::lock_shared`].
///
/// Dropping the guard unlocks and closes the lock file.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock"]
pub struct LockGuard {
    fd: OwnedFd,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Closing the descriptor would release the lock too; unlocking first
        // releases it even if the descriptor was duplicated elsewhere.
        let _ = rfs::flock(&self.fd, FlockOperation::Unlock);
    }
}
