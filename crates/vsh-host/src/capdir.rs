//! [`CapDir`]: a directory opened once and used as the root of every later
//! path, together with its observation operations.
//!
//! A `CapDir` holds a descriptor, never a path string (the display path is for
//! messages only). Every operation takes a [`VPath`], which cannot be absolute
//! or contain `..`, and resolves it beneath the descriptor without following a
//! symbolic link anywhere, leaf included (see [`crate::resolve`]). Mutation
//! primitives live in [`crate::mutate`].

use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{self as rfs, AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use vsh_types::{BlobId, VPath};

use crate::counters::HostCounters;
use crate::error::HostError;
use crate::resolve::{self, Failure, Mounts, Strategy, retry_intr};
use crate::stat::{FileContent, FileIdentity, HostDirEntry, HostKind, HostSpace, HostStat};

/// Buffer size for streaming hashes.
const HASH_CHUNK: usize = 64 * 1024;

/// The longest symlink target Linux stores (`PATH_MAX` including the NUL).
const LINK_TARGET_MAX: u64 = 4096;

/// A capability-rooted directory handle.
///
/// Every path given to a method is relative to this directory and is resolved
/// beneath it in the kernel (`openat2` with `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, or an `O_NOFOLLOW` walk where
/// `openat2` is unavailable). No method follows a symbolic link, at the leaf or
/// in any ancestor, so a symlink pointing outside is never a way out; a
/// directory swapped for a symlink between two calls is refused by the second.
///
/// Observation methods bump [`HostCounters`]; see [`CapDir::counters`].
pub struct CapDir {
    /// The directory, opened `O_RDONLY | O_DIRECTORY`.
    pub(crate) fd: OwnedFd,
    /// Shared with every handle opened from this one by [`CapDir::open_subdir`].
    pub(crate) counters: Arc<HostCounters>,
    /// For messages only; never used to reach the directory.
    display: PathBuf,
    /// How paths are resolved (tests force one strategy).
    strategy: Strategy,
    /// The mount points below this handle its paths may cross.
    mounts: Mounts,
}

impl fmt::Debug for CapDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapDir")
            .field("fd", &self.fd.as_raw_fd())
            .field("display", &self.display)
            .finish_non_exhaustive()
    }
}

impl CapDir {
    /// Open an existing directory as a capability root.
    ///
    /// `path` is canonicalized first, so symlinks in it are resolved once, here.
    /// A missing path or one that is not a directory is
    /// [`HostError::InvalidRoot`].
    ///
    /// # Ambient authority
    ///
    /// This reaches the host filesystem by path; it is how a handle is first made.
    pub fn open(path: &Path) -> Result<CapDir, HostError> {
        let canonical =
            std::fs::canonicalize(path).map_err(|source| HostError::InvalidRoot { path: path.to_owned(), source })?;
        let fd = rfs::open(&canonical, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| HostError::InvalidRoot { path: canonical.clone(), source: errno.into() })?;
        Ok(Self::from_parts(fd, Arc::default(), canonical, Strategy::Auto))
    }

    /// Open, creating missing components with mode `0o700`, a trusted directory
    /// such as the data directory.
    ///
    /// `path` may be relative (to the current directory). The longest prefix of
    /// it that exists is canonicalized (resolving symlinks in it once); from
    /// there every component of the whole path, starting at `/`, is opened with
    /// `O_NOFOLLOW | O_DIRECTORY` relative to its parent descriptor, and missing
    /// ones are created with `mkdirat(0o700)` (the umask can only narrow that).
    /// A symlink met during that walk, for example a dangling symlink or a
    /// symlink planted after canonicalization, is
    /// [`HostError::SymlinkInPath`]; a non-directory is
    /// [`HostError::NotADirectory`]. In both, `path` is the offending component
    /// relative to `/`. A `..` below the existing prefix, a non-UTF-8 component
    /// and other I/O errors are [`HostError::InvalidRoot`].
    ///
    /// # Ambient authority
    ///
    /// This reaches the host filesystem by path.
    pub(crate) fn open_or_create_trusted(path: &Path) -> Result<CapDir, HostError> {
        let invalid = |source: io::Error| HostError::InvalidRoot { path: path.to_owned(), source };
        let absolute = std::path::absolute(path).map_err(invalid)?;
        let mut existing = absolute.as_path();
        let mut missing: Vec<&OsStr> = Vec::new();
        let canonical = loop {
            match std::fs::canonicalize(existing) {
                Ok(canonical) => break canonical,
                Err(error) => match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        missing.push(name);
                        existing = parent;
                    }
                    _ => return Err(invalid(error)),
                },
            }
        };
        let mut full = canonical;
        for name in missing.iter().rev() {
            full.push(name);
        }
        let mut names = Vec::new();
        for component in full.components() {
            match component {
                std::path::Component::RootDir => {}
                std::path::Component::Normal(name) => match name.to_str() {
                    Some(name) => names.push(name),
                    None => return Err(invalid(io::Error::new(io::ErrorKind::InvalidInput, "path is not UTF-8"))),
                },
                _ => {
                    return Err(invalid(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "path has a `..` component below its existing prefix",
                    )));
                }
            }
        }
        let root = rfs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| invalid(errno.into()))?;
        let fd = resolve::open_or_create_dirs(root.as_fd(), &names).map_err(|failure| match failure {
            Failure::Symlink(at) => HostError::SymlinkInPath { path: at },
            Failure::Mount(at) => HostError::CrossesMount { path: at },
            Failure::NotDir(at) => HostError::NotADirectory { path: at },
            Failure::Errno(errno) => HostError::InvalidRoot { path: full.clone(), source: errno.into() },
        })?;
        Ok(Self::from_parts(fd, Arc::default(), full, Strategy::Auto))
    }

    /// Open a subdirectory beneath `self` as its own handle, sharing `self`'s
    /// counters. Symlinks are never followed, the leaf included.
    ///
    /// A symlink at `path` or in an ancestor is [`HostError::SymlinkInPath`]; a
    /// non-directory is [`HostError::NotADirectory`]; a missing component is
    /// [`HostError::NotFound`] (creating it takes
    /// [`crate::WritableDir::open_or_create_subdir`]).
    pub fn open_subdir(&self, path: &VPath) -> Result<CapDir, HostError> {
        self.open_subdir_with(path, false)
    }

    /// [`CapDir::open_subdir`], creating missing components (for
    /// [`crate::WritableDir::open_or_create_subdir`]).
    pub(crate) fn open_subdir_creating(&self, path: &VPath) -> Result<CapDir, HostError> {
        self.open_subdir_with(path, true)
    }

    fn open_subdir_with(&self, path: &VPath, create: bool) -> Result<CapDir, HostError> {
        let fd = match self.open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()) {
            Ok(fd) => fd,
            Err(Failure::Errno(Errno::NOENT)) if create => {
                let names: Vec<&str> = path.components().collect();
                resolve::open_or_create_dirs(self.fd.as_fd(), &names)
                    .map_err(|failure| failure.into_error("mkdirat", path))?
            }
            Err(failure) => return Err(failure.into_error("open", path)),
        };
        let display = if path.is_root() { self.display.clone() } else { self.display.join(path.as_str()) };
        let mut dir = Self::from_parts(fd, Arc::clone(&self.counters), display, self.strategy);
        dir.mounts = self.mounts.below(path);
        Ok(dir)
    }

    /// Let paths cross the mount points at `mounts` (relative to this
    /// handle). Every other mount point inside the directory is refused, at
    /// any depth, as [`HostError::CrossesMount`]: a bind mount of a directory
    /// outside the workspace is no way out. Crossing a mount point listed here
    /// is allowed, and so is anything beneath it.
    #[must_use]
    pub fn with_allowed_mounts(mut self, mounts: impl IntoIterator<Item = VPath>) -> Self {
        let allowed: Vec<VPath> = mounts.into_iter().filter(|mount| !mount.is_root()).collect();
        self.mounts = Mounts { allowed: allowed.into() };
        self
    }

    /// The mount points this handle may cross.
    pub fn allowed_mounts(&self) -> &[VPath] {
        &self.mounts.allowed
    }

    /// The same directory with counters of its own, so operations on it (for
    /// example vsh's data directory inside a workspace) are not counted as
    /// operations on the handle it was opened from.
    #[must_use]
    pub fn with_own_counters(mut self) -> Self {
        self.counters = Arc::default();
        self
    }

    fn from_parts(fd: OwnedFd, counters: Arc<HostCounters>, display: PathBuf, strategy: Strategy) -> Self {
        Self { fd, counters, display, strategy, mounts: Mounts::default() }
    }

    /// Force a resolution strategy (tests only), for this handle and the
    /// subdirectories opened from it.
    #[cfg(test)]
    pub(crate) fn with_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The host path this handle was opened at, for messages only. It may be
    /// stale (the directory can be renamed) and must never be used to reach it.
    pub fn display_path(&self) -> &Path {
        &self.display
    }

    /// The operation counters, shared with every handle opened from this one.
    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    /// The space of the filesystem holding this directory (`fstatvfs` on
    /// the handle, no path resolved): what an unprivileged writer may
    /// still use, and the filesystem's size, in bytes.
    pub fn space(&self) -> Result<HostSpace, HostError> {
        let stat = rfs::fstatvfs(&self.fd).map_err(|errno| HostError::io("fstatvfs", &VPath::root(), errno))?;
        Ok(HostSpace {
            available: stat.f_bavail.saturating_mul(stat.f_frsize),
            size: stat.f_blocks.saturating_mul(stat.f_frsize),
        })
    }

    /// Device and inode of the opened directory itself.
    pub fn identity(&self) -> Result<FileIdentity, HostError> {
        let stat = rfs::fstat(&self.fd).map_err(|errno| HostError::io("fstat", &VPath::root(), errno))?;
        Ok(HostStat::from_raw(&stat).identity)
    }

    /// Where this directory lies within `root`: the path from `root` down to
    /// it (the root itself for the same directory), or `None` if it is not
    /// inside `root` at all. Decided by device and inode, walking up through
    /// `..` from this handle (so neither symlinks nor a display path can
    /// mislead it) and naming each step by the parent's entry that has the
    /// child's identity.
    pub fn location_within(&self, root: &CapDir) -> Result<Option<VPath>, HostError> {
        let root_identity = root.identity()?;
        let here = VPath::root();
        let open_dir = |at: BorrowedFd<'_>, name: &str| {
            rfs::openat(at, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
                .map_err(|errno| HostError::io("open ..", &here, errno))
        };
        // Walk up by identity only; the chain is this directory, then each parent.
        let mut chain: Vec<(OwnedFd, FileIdentity)> = Vec::new();
        let mut current = open_dir(self.fd.as_fd(), ".")?;
        // Bounded: a path has at most PATH_MAX / 2 components.
        for _ in 0..2048 {
            let identity = fstat(current.as_fd(), &here)?.identity;
            if identity == root_identity {
                return Self::name_chain(&chain).map(Some);
            }
            let parent = open_dir(current.as_fd(), "..")?;
            if fstat(parent.as_fd(), &here)?.identity == identity {
                // The filesystem root: `root` was never passed.
                return Ok(None);
            }
            chain.push((current, identity));
            current = parent;
        }
        Err(HostError::Io {
            op: "locate",
            path: here,
            source: io::Error::new(io::ErrorKind::InvalidData, "too many levels walking up"),
        })
    }

    /// Whether this directory is, or lies inside, a directory called `name`
    /// that holds one of `markers`: walking up through `..` from this
    /// handle, whether some directory on the way is its parent's entry
    /// `name` (by device and inode, so neither a symlink nor a display path
    /// can mislead it) and holds a marker (so a directory merely named so is
    /// not taken for one). Directories are opened `O_PATH`, so a parent this
    /// process may pass through but not list is no obstacle; one it may not
    /// even pass through ends the walk: `false`, as far as can be told.
    pub fn lies_within_entry_named(&self, name: &str, markers: &[&str]) -> Result<bool, HostError> {
        let here = VPath::root();
        let open_dir = |at: BorrowedFd<'_>, name: &str| {
            rfs::openat(at, name, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        };
        let mut current = open_dir(self.fd.as_fd(), ".").map_err(|errno| HostError::io("open .", &here, errno))?;
        // Bounded: a path has at most PATH_MAX / 2 components.
        for _ in 0..2048 {
            let identity = fstat(current.as_fd(), &here)?.identity;
            let parent = match open_dir(current.as_fd(), "..") {
                Ok(parent) => parent,
                Err(Errno::ACCESS | Errno::PERM) => return Ok(false),
                Err(errno) => return Err(HostError::io("open ..", &here, errno)),
            };
            if fstat(parent.as_fd(), &here)?.identity == identity {
                // The filesystem root.
                return Ok(false);
            }
            let named = rfs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| HostStat::from_raw(&stat).identity == identity);
            let marked =
                || markers.iter().any(|marker| rfs::statat(&current, *marker, AtFlags::SYMLINK_NOFOLLOW).is_ok());
            if named && marked() {
                return Ok(true);
            }
            current = parent;
        }
        Err(HostError::Io {
            op: "locate",
            path: here,
            source: io::Error::new(io::ErrorKind::InvalidData, "too many levels walking up"),
        })
    }

    /// The path down `chain` (each directory and its identity, deepest first,
    /// the last one a child of the root looked for): each step named by the
    /// parent's entry with the child's identity.
    fn name_chain(chain: &[(OwnedFd, FileIdentity)]) -> Result<VPath, HostError> {
        let here = VPath::root();
        let unnamed = || HostError::Io {
            op: "locate",
            path: VPath::root(),
            source: io::Error::new(io::ErrorKind::InvalidData, "a directory on the way has no valid name"),
        };
        let mut names: Vec<String> = Vec::with_capacity(chain.len());
        for (fd, identity) in chain {
            let parent = rfs::openat(fd, "..", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
                .map_err(|errno| HostError::io("open ..", &here, errno))?;
            let name = Dir::read_from(&parent)
                .map_err(|errno| HostError::io("opendir", &here, errno))?
                .filter_map(Result::ok)
                .find(|entry| {
                    let name = entry.file_name().to_bytes();
                    name != b"."
                        && name != b".."
                        && entry.ino() == identity.ino
                        && rfs::statat(&parent, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                            .is_ok_and(|stat| HostStat::from_raw(&stat).identity == *identity)
                })
                .and_then(|entry| entry.file_name().to_str().ok().map(str::to_owned))
                .ok_or_else(unnamed)?;
            names.push(name);
        }
        if names.is_empty() {
            // The directory is the root itself.
            return Ok(VPath::root());
        }
        names.reverse();
        VPath::parse(&names.join("/")).map_err(|_| unnamed())
    }

    /// Metadata of `path` without following a symlink at the leaf (a symlink
    /// reports [`HostKind::Symlink`]). Counts one stat.
    ///
    /// `Ok(None)` when `path` or an ancestor does not exist. A symlink ancestor
    /// is [`HostError::SymlinkInPath`] and a non-directory ancestor
    /// [`HostError::NotADirectory`], each naming that ancestor. The root path
    /// stats the directory itself.
    pub fn lstat(&self, path: &VPath) -> Result<Option<HostStat>, HostError> {
        self.counters.stat();
        if path.is_root() {
            let stat = rfs::fstat(&self.fd).map_err(|errno| HostError::io("fstat", path, errno))?;
            return Ok(Some(HostStat::from_raw(&stat)));
        }
        let (parent, leaf) = match self.open_parent(path) {
            Ok(found) => found,
            Err(Failure::Errno(Errno::NOENT)) => return Ok(None),
            Err(failure) => return Err(failure.into_error("open", path)),
        };
        match rfs::statat(&parent, leaf, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let stat = HostStat::from_raw(&stat);
                // A directory at a mount point describes the mounted filesystem:
                // its metadata is no more the workspace's than its content.
                if stat.kind == HostKind::Directory && self.is_mount_root(&parent, leaf, path)? {
                    return Err(HostError::CrossesMount { path: path.clone() });
                }
                Ok(Some(stat))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(errno) => Err(HostError::io("fstatat", path, errno)),
        }
    }

    /// Whether the directory `leaf` in `parent` is the root of a mount this
    /// handle may not cross.
    fn is_mount_root(&self, parent: &ParentDir<'_>, leaf: &str, path: &VPath) -> Result<bool, HostError> {
        if self.mounts.allowed.iter().any(|mount| path.is_within(mount)) {
            return Ok(false);
        }
        match rfs::statx(parent, leaf, AtFlags::SYMLINK_NOFOLLOW, rfs::StatxFlags::empty()) {
            Ok(statx) if statx.stx_attributes_mask.contains(rfs::StatxAttributes::MOUNT_ROOT) => {
                Ok(statx.stx_attributes.contains(rfs::StatxAttributes::MOUNT_ROOT))
            }
            // A kernel that cannot tell: opening it tells (RESOLVE_NO_XDEV).
            Ok(_) | Err(Errno::NOSYS) => match self.open_beneath(path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
            {
                Err(Failure::Mount(_)) => Ok(true),
                _ => Ok(false),
            },
            Err(Errno::NOENT) => Ok(false),
            Err(errno) => Err(HostError::io("statx", path, errno)),
        }
    }

    /// The inode generation number of the regular file or directory at `path`
    /// (`FS_IOC_GETVERSION`). It tells a node from a later one that reuses its
    /// inode number (ext4 frees an inode number for reuse the moment its file
    /// is deleted): ext4, XFS and Btrfs give every new inode a fresh
    /// generation. Counts one stat.
    ///
    /// `Ok(None)` when it cannot be known: nothing at `path`, a symlink or a
    /// node that is neither a file nor a directory, a node this process may
    /// not open (its mode), or a filesystem that keeps no generation (tmpfs).
    /// The node is opened like [`CapDir::read_file`] opens a file
    /// (`O_RDONLY | O_NOFOLLOW | O_NONBLOCK`), so a FIFO does not block;
    /// nothing is read.
    pub fn generation(&self, path: &VPath) -> Result<Option<u32>, HostError> {
        self.counters.stat();
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = match self.open_beneath(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Failure::Symlink(at)) if at == *path => return Ok(None),
            Err(Failure::Errno(Errno::NOENT | Errno::ACCESS | Errno::PERM | Errno::NXIO | Errno::NODEV)) => {
                return Ok(None);
            }
            Err(failure) => return Err(failure.into_error("open", path)),
        };
        let kind = fstat(fd.as_fd(), path)?.kind;
        if !matches!(kind, HostKind::File | HostKind::Directory) {
            return Ok(None);
        }
        Ok(generation_of(fd.as_fd()))
    }

    /// The whole content of the regular file at `path`. Counts one read.
    ///
    /// The file is opened `O_RDONLY | O_NOFOLLOW | O_NONBLOCK` (so a FIFO does
    /// not block) and checked with `fstat`: anything but a regular file,
    /// including a symlink, is [`HostError::NotAFile`]. A size over `max_bytes`
    /// is [`HostError::TooLarge`], found before anything is allocated. If the
    /// file's size, mtime, ctime or inode differ after the read, or it yields
    /// more or fewer bytes than its size, the result is [`HostError::Unstable`].
    pub fn read_file(&self, path: &VPath, max_bytes: u64) -> Result<FileContent, HostError> {
        self.counters.read();
        let (file, stat) = self.open_regular(path)?;
        if stat.size > max_bytes {
            return Err(HostError::TooLarge { path: path.clone(), size: stat.size, max: max_bytes });
        }
        let size = usize::try_from(stat.size).map_err(|_| HostError::TooLarge {
            path: path.clone(),
            size: stat.size,
            max: max_bytes,
        })?;
        let mut bytes = Vec::with_capacity(size);
        // One byte past the size shows growth without reading the rest.
        (&file).take(stat.size + 1).read_to_end(&mut bytes).map_err(|source| HostError::Io {
            op: "read",
            path: path.clone(),
            source,
        })?;
        if bytes.len() != size {
            return Err(HostError::Unstable { path: path.clone() });
        }
        check_stable(&file, path, &stat)?;
        Ok(FileContent { bytes, stat })
    }

    /// The two ends of the regular file at `path`: its first `head` bytes (all
    /// of it, if shorter) and every byte from offset `from` on (nothing when
    /// `from` is at or past its end), with its metadata, in one open. For a
    /// file that only grows at its end (an append-only log) whose reader
    /// already holds what lies between. Counts one read.
    ///
    /// Opening, kind check, size bound and stability check are as for
    /// [`CapDir::read_file`]; `max_bytes` bounds the whole file's size.
    pub fn read_file_ends(
        &self,
        path: &VPath,
        head: u64,
        from: u64,
        max_bytes: u64,
    ) -> Result<(Vec<u8>, Vec<u8>, HostStat), HostError> {
        self.counters.read();
        let (file, stat) = self.open_regular(path)?;
        if stat.size > max_bytes {
            return Err(HostError::TooLarge { path: path.clone(), size: stat.size, max: max_bytes });
        }
        let head = read_exactly_at(&file, path, 0, head.min(stat.size))?;
        let tail = read_exactly_at(&file, path, from.min(stat.size), stat.size.saturating_sub(from))?;
        check_stable(&file, path, &stat)?;
        Ok((head, tail, stat))
    }

    /// Up to `length` bytes of the regular file at `path` from `offset` (fewer
    /// at its end, none past it), with the metadata they were read under, so
    /// a caller that froze the file earlier can tell it is still the same
    /// one. For a reader that takes a large file piece by piece without
    /// holding it whole. Counts one read.
    ///
    /// Opening, kind check and stability check are as for
    /// [`CapDir::read_file`]; `length` bounds what is allocated.
    pub fn read_file_range(&self, path: &VPath, offset: u64, length: u32) -> Result<FileContent, HostError> {
        self.counters.read();
        let (file, stat) = self.open_regular(path)?;
        let bytes = read_exactly_at(&file, path, offset, stat.size.saturating_sub(offset).min(u64::from(length)))?;
        check_stable(&file, path, &stat)?;
        Ok(FileContent { bytes, stat })
    }

    /// The BLAKE3 [`BlobId`] of the regular file at `path`, streamed in 64 KiB
    /// chunks, with the metadata it was read under. Counts one read.
    ///
    /// Opening, kind check and stability check are as for [`CapDir::read_file`];
    /// there is no size limit because nothing but the buffer is allocated.
    pub fn hash_file(&self, path: &VPath) -> Result<(BlobId, HostStat), HostError> {
        self.counters.read();
        let (mut file, stat) = self.open_regular(path)?;
        let mut hasher = BlobId::plain_hasher();
        let mut buffer = vec![0_u8; HASH_CHUNK];
        let mut total: u64 = 0;
        loop {
            let count = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(count) => count,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(HostError::Io { op: "read", path: path.clone(), source }),
            };
            total += count as u64;
            if total > stat.size {
                return Err(HostError::Unstable { path: path.clone() });
            }
            hasher.update(&buffer[..count]);
        }
        if total != stat.size {
            return Err(HostError::Unstable { path: path.clone() });
        }
        check_stable(&file, path, &stat)?;
        Ok((BlobId::from_plain_hasher(&hasher), stat))
    }

    /// The target of the symbolic link at `path` (the link itself, never
    /// followed), read with `readlinkat` on the parent directory. Counts one read.
    ///
    /// Anything but a symlink is [`HostError::NotASymlink`]; a target longer
    /// than `max_bytes` is [`HostError::TooLarge`].
    pub fn read_link(&self, path: &VPath, max_bytes: u64) -> Result<Vec<u8>, HostError> {
        self.counters.read();
        if path.is_root() {
            return Err(HostError::NotASymlink { path: path.clone() });
        }
        let (parent, leaf) = self.open_parent(path).map_err(|failure| failure.into_error("open", path))?;
        let stat = match rfs::statat(&parent, leaf, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => HostStat::from_raw(&stat),
            Err(Errno::NOENT) => return Err(HostError::NotFound { path: path.clone() }),
            Err(errno) => return Err(HostError::io("fstatat", path, errno)),
        };
        if stat.kind != HostKind::Symlink {
            return Err(HostError::NotASymlink { path: path.clone() });
        }
        if stat.size > max_bytes {
            return Err(HostError::TooLarge { path: path.clone(), size: stat.size, max: max_bytes });
        }
        // One byte more than allowed tells an over-long target from one that fits.
        let capacity = max_bytes.min(LINK_TARGET_MAX) as usize + 1;
        let mut target = vec![0_u8; capacity];
        let length = match retry_intr(|| rfs::readlinkat_raw(&parent, leaf, &mut target[..])) {
            Ok(length) => length,
            Err(Errno::NOENT) => return Err(HostError::NotFound { path: path.clone() }),
            Err(Errno::INVAL) => return Err(HostError::NotASymlink { path: path.clone() }),
            Err(errno) => return Err(HostError::io("readlinkat", path, errno)),
        };
        if length as u64 > max_bytes {
            return Err(HostError::TooLarge { path: path.clone(), size: length as u64, max: max_bytes });
        }
        target.truncate(length);
        Ok(target)
    }

    /// The entries of the directory at `path`, excluding `.` and `..`, **in the
    /// order the filesystem returns them** (not sorted). Counts one list.
    ///
    /// A symlink at `path` is not followed: it is [`HostError::SymlinkInPath`]
    /// naming `path`. A non-directory is [`HostError::NotADirectory`].
    pub fn list_dir(&self, path: &VPath) -> Result<Vec<HostDirEntry>, HostError> {
        self.counters.list();
        let fd = self
            .open_beneath(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|failure| failure.into_error("open", path))?;
        let dir = Dir::new(fd).map_err(|errno| HostError::io("opendir", path, errno))?;
        let mut entries = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|errno| HostError::io("getdents64", path, errno))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => None,
                known => Some(HostKind::from_file_type(known)),
            };
            entries.push(HostDirEntry { name: name.to_vec(), kind });
        }
        Ok(entries)
    }

    /// Resolve `path` beneath this handle with this handle's strategy.
    pub(crate) fn open_beneath(&self, path: &VPath, flags: OFlags, mode: Mode) -> Result<OwnedFd, Failure> {
        resolve::open_beneath(self.fd.as_fd(), path, flags, mode, self.strategy, &self.mounts)
    }

    /// Open the parent of a non-root `path` as an `O_PATH` directory and return
    /// it with the leaf name, for `*at` calls that must not follow the leaf.
    /// The parent of a path at the top of the workspace is this handle's own
    /// directory, lent, not opened again: two system calls fewer for each
    /// such path (a program's files are often there).
    pub(crate) fn open_parent<'path>(&self, path: &'path VPath) -> Result<(ParentDir<'_>, &'path str), Failure> {
        let (Some(parent), Some(leaf)) = (path.parent(), path.file_name()) else {
            return Err(Failure::Errno(Errno::INVAL));
        };
        if parent.is_root() {
            return Ok((ParentDir::Root(self.fd.as_fd()), leaf));
        }
        let fd = self.open_beneath(&parent, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())?;
        Ok((ParentDir::Opened(fd), leaf))
    }

    /// Open `path` read-only as a regular file and stat it.
    pub(crate) fn open_regular(&self, path: &VPath) -> Result<(File, HostStat), HostError> {
        let fd = self
            .open_beneath(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY, Mode::empty())
            .map_err(|failure| failure.leaf_symlink_as(path, || HostError::NotAFile { path: path.clone() }, "open"))?;
        let stat = fstat(fd.as_fd(), path)?;
        if stat.kind != HostKind::File {
            return Err(HostError::NotAFile { path: path.clone() });
        }
        Ok((File::from(fd), stat))
    }
}

/// The directory a path's leaf is in ([`CapDir::open_parent`]): the
/// workspace's own (lent by its handle) or one opened beneath it.
#[derive(Debug)]
pub(crate) enum ParentDir<'a> {
    /// The workspace root: the handle's descriptor.
    Root(BorrowedFd<'a>),
    /// A directory below it, opened `O_PATH`.
    Opened(OwnedFd),
}

impl AsFd for ParentDir<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Root(fd) => *fd,
            Self::Opened(fd) => fd.as_fd(),
        }
    }
}

/// The inode generation of the open node `fd` (`FS_IOC_GETVERSION`), or
/// `None` when its filesystem keeps none. One of the two `unsafe` calls of
/// this crate (with [`crate::start_writeback`]): rustix has no safe wrapper
/// for this request.
#[allow(unsafe_code)]
pub(crate) fn generation_of(fd: BorrowedFd<'_>) -> Option<u32> {
    /// `FS_IOC_GETVERSION`: `_IOR('v', 1, long)`.
    const GET_VERSION: rustix::ioctl::Opcode = rustix::ioctl::opcode::read::<std::ffi::c_long>(b'v', 1);
    // Filesystems write an `int` at the argument (ext4, XFS and Btrfs all
    // `put_user` the 32-bit `i_generation`), though the request names a
    // `long`: a zeroed buffer of the named size takes either, and its first
    // 32 bits are the value.
    let mut value = [0_u32; 2];
    // SAFETY: GET_VERSION is the kernel's FS_IOC_GETVERSION request, which
    // writes at most `sizeof(long)` bytes at the pointer; `value` is that
    // size, initialised, and lives across the call.
    let done = unsafe { rustix::ioctl::ioctl(fd, rustix::ioctl::Updater::<GET_VERSION, [u32; 2]>::new(&mut value)) };
    done.ok().map(|()| value[0])
}

/// Fail with [`HostError::Unstable`] if the open file changed since `before`.
/// `length` bytes of `file` (the file at `path`) from `offset`, all of them:
/// fewer (the file shrank since its size was taken) is
/// [`HostError::Unstable`]. The caller bounds `length` by the file's size.
fn read_exactly_at(file: &File, path: &VPath, offset: u64, length: u64) -> Result<Vec<u8>, HostError> {
    use std::os::unix::fs::FileExt as _;
    let too_large = || HostError::TooLarge { path: path.clone(), size: length, max: usize::MAX as u64 };
    let mut bytes = vec![0_u8; usize::try_from(length).map_err(|_| too_large())?];
    file.read_exact_at(&mut bytes, offset).map_err(|source| match source.kind() {
        io::ErrorKind::UnexpectedEof => HostError::Unstable { path: path.clone() },
        _ => HostError::Io { op: "read", path: path.clone(), source },
    })?;
    Ok(bytes)
}

fn check_stable(file: &File, path: &VPath, before: &HostStat) -> Result<(), HostError> {
    let after = fstat(file.as_fd(), path)?;
    if before.content_changed(&after) {
        return Err(HostError::Unstable { path: path.clone() });
    }
    Ok(())
}

/// `fstat` as a [`HostStat`].
pub(crate) fn fstat(fd: BorrowedFd<'_>, path: &VPath) -> Result<HostStat, HostError> {
    rfs::fstat(fd).map(|stat| HostStat::from_raw(&stat)).map_err(|errno| HostError::io("fstat", path, errno))
}

impl Failure {
    /// The error for an operation on `path` that failed to resolve.
    pub(crate) fn into_error(self, op: &'static str, path: &VPath) -> HostError {
        match self {
            Failure::Symlink(at) => HostError::SymlinkInPath { path: at },
            Failure::NotDir(at) => HostError::NotADirectory { path: at },
            Failure::Mount(at) => HostError::CrossesMount { path: at },
            Failure::Errno(Errno::NOENT) => HostError::NotFound { path: path.clone() },
            Failure::Errno(Errno::EXIST) => HostError::AlreadyExists { path: path.clone() },
            Failure::Errno(errno) => HostError::io(op, path, errno),
        }
    }

    /// As [`Failure::into_error`], but a symlink at `path` itself (not an
    /// ancestor) becomes `leaf_error()`.
    pub(crate) fn leaf_symlink_as(
        self,
        path: &VPath,
        leaf_error: impl FnOnce() -> HostError,
        op: &'static str,
    ) -> HostError {
        match self {
            Failure::Symlink(at) if at == *path => leaf_error(),
            other => other.into_error(op, path),
        }
    }
}
