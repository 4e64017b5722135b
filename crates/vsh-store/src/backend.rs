//! [`StoreBackend`]: the only I/O seam of the store, and [`CapDirBackend`], its
//! implementation over a capability-rooted [`CapDir`].
//!
//! Every byte the blob store and the transaction log read or write goes
//! through this trait, so tests can swap in [`crate::FaultyBackend`] and fail
//! the Nth write, fsync or rename. The operations are the few the store needs,
//! each one durable step or one observation; ordering them (temporary file,
//! fsync, rename, directory fsync) is the store's job, not the backend's.
//!
//! Paths are [`VPath`]s relative to the data directory. No operation follows a
//! symbolic link.
//!
//! This module does not decide what a missing or corrupt file means: it
//! reports [`BackendError::NotFound`], [`BackendError::NotAFile`] and the like,
//! and the caller maps them to [`crate::StoreError`] variants.

use std::any::Any;
use std::fmt;

use vsh_host::{HostError, HostKind, LockGuard, WritableDir};
use vsh_types::{BlobId, VPath};

/// Mode of every file the real backend creates.
const FILE_MODE: u32 = 0o600;
/// Mode of every directory the real backend creates.
const DIR_MODE: u32 = 0o700;

/// What [`StoreBackend::stat`] reports about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// Length in bytes.
    pub len: u64,
    /// Last modification, milliseconds since the Unix epoch (0 if before it).
    pub modified_ms: u64,
    /// Whether it is a regular file (anything else, a symlink included, is not).
    pub is_file: bool,
}

/// A held lock from [`StoreBackend::lock`]; dropping it releases the lock.
#[must_use = "dropping the lock releases it at once"]
pub struct BackendLock {
    _held: Box<dyn Any + Send>,
}

impl BackendLock {
    /// Wrap whatever value keeps a backend's lock held until it drops.
    pub fn new(held: impl Any + Send) -> Self {
        Self { _held: Box::new(held) }
    }
}

impl fmt::Debug for BackendLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BackendLock")
    }
}

/// Which kind of durable step an injected fault hit (see [`crate::FaultyBackend`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Writing bytes: creating, appending to, truncating or removing a file, or creating a directory.
    Write,
    /// Making bytes or directory entries durable.
    Fsync,
    /// Renaming a directory entry.
    Rename,
}

impl FaultKind {
    /// A lower-case name for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Fsync => "fsync",
            Self::Rename => "rename",
        }
    }
}

/// An error from a [`StoreBackend`] operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The path, or one of its ancestors, does not exist.
    #[error("no such file or directory: {path}")]
    NotFound {
        /// The requested path.
        path: VPath,
    },
    /// Something already exists where a new file or directory was to be created.
    #[error("already exists: {path}")]
    AlreadyExists {
        /// The requested path.
        path: VPath,
    },
    /// A regular file was expected and something else (a symlink included) is there.
    #[error("not a regular file: {path}")]
    NotAFile {
        /// The requested path.
        path: VPath,
    },
    /// The file is larger than the caller's bound; nothing was allocated for it.
    #[error("{path} is {size} bytes, over the limit of {max}")]
    TooLarge {
        /// The requested path.
        path: VPath,
        /// The size found.
        size: u64,
        /// The caller's bound.
        max: u64,
    },
    /// The file changed while it was being read.
    #[error("{path} changed while it was being read")]
    Unstable {
        /// The requested path.
        path: VPath,
    },
    /// Any other failure reported by the host.
    #[error("{op} failed on {path}")]
    Io {
        /// The backend operation, e.g. `"append"`.
        op: &'static str,
        /// The requested path.
        path: VPath,
        /// What the host reported.
        #[source]
        source: HostError,
    },
    /// A fault injected by [`crate::FaultyBackend`].
    #[error("injected {} fault during {op} on {path}", .fault.name())]
    Injected {
        /// The kind of step that was failed.
        fault: FaultKind,
        /// The backend operation.
        op: &'static str,
        /// The requested path.
        path: VPath,
    },
}

impl BackendError {
    /// Map a host error, keeping the semantic variants the store acts on.
    pub fn from_host(op: &'static str, path: &VPath, source: HostError) -> Self {
        match source {
            HostError::NotFound { .. } => Self::NotFound { path: path.clone() },
            HostError::AlreadyExists { .. } => Self::AlreadyExists { path: path.clone() },
            HostError::NotAFile { .. } | HostError::IsASymlink { .. } => Self::NotAFile { path: path.clone() },
            HostError::TooLarge { size, max, .. } => Self::TooLarge { path: path.clone(), size, max },
            HostError::Unstable { .. } => Self::Unstable { path: path.clone() },
            source => Self::Io { op, path: path.clone(), source },
        }
    }

    /// Whether this is a failure of the storage itself (an I/O error or an
    /// injected fault), after which the store stops ([`crate::StoreError::Poisoned`]),
    /// rather than a fact about a path (missing, wrong kind, too large).
    pub fn is_io_failure(&self) -> bool {
        matches!(self, Self::Io { .. } | Self::Injected { .. })
    }
}

/// The two ends of a file ([`StoreBackend::read_ends`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ends {
    /// Its first bytes.
    pub head: Vec<u8>,
    /// Its length.
    pub len: u64,
    /// Its bytes from the offset asked for on.
    pub tail: Vec<u8>,
}

/// The storage operations of the store. Every path is relative to the data directory.
///
/// Implementations must make each durable operation durable before returning
/// `Ok`: [`StoreBackend::create_new`], [`StoreBackend::append`] and
/// [`StoreBackend::truncate`] fsync the file, [`StoreBackend::sync_dir`] fsyncs
/// a directory. Renames and removals are made durable by a later
/// [`StoreBackend::sync_dir`] of the parent.
pub trait StoreBackend: Send + Sync + fmt::Debug {
    /// The whole content of the regular file at `path`, or `None` if it does
    /// not exist. A file over `max_bytes` is [`BackendError::TooLarge`], found
    /// before anything is allocated.
    fn read(&self, path: &VPath, max_bytes: u64) -> Result<Option<Vec<u8>>, BackendError>;

    /// The first `head` bytes of the regular file at `path`, its length, and
    /// its bytes from offset `from` on, or `None` if it does not exist: for
    /// an append-only file whose reader holds what lies between. A file over
    /// `max_bytes` is [`BackendError::TooLarge`]. By default, from the whole
    /// content ([`StoreBackend::read`]).
    fn read_ends(&self, path: &VPath, head: u64, from: u64, max_bytes: u64) -> Result<Option<Ends>, BackendError> {
        Ok(self.read(path, max_bytes)?.map(|bytes| {
            let cut = |at: u64| usize::try_from(at).unwrap_or(usize::MAX).min(bytes.len());
            Ends { head: bytes[..cut(head)].to_vec(), len: bytes.len() as u64, tail: bytes[cut(from)..].to_vec() }
        }))
    }

    /// The BLAKE3 id of the regular file at `path` (streamed, no size bound),
    /// or `None` if it does not exist.
    fn hash(&self, path: &VPath) -> Result<Option<BlobId>, BackendError>;

    /// Metadata of `path` without following a symlink, or `None` if it does not exist.
    fn stat(&self, path: &VPath) -> Result<Option<FileMeta>, BackendError>;

    /// Create a new file holding `bytes` and fsync it. Anything already at
    /// `path` is [`BackendError::AlreadyExists`]. The parent directory is not synced.
    fn create_new(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError>;

    /// [`StoreBackend::create_new`] without the fsync: the caller makes the
    /// file durable later with [`StoreBackend::sync_file`], or never needs it
    /// to be (whoever reads it re-hashes it).
    fn create_new_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError>;

    /// Fsync the regular file at `path`.
    fn sync_file(&self, path: &VPath) -> Result<(), BackendError>;

    /// Append `bytes` to the existing regular file at `path` and fsync it.
    ///
    /// Not safe against a concurrent append to the same file: the store holds
    /// its log lock around every append.
    fn append(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError>;

    /// [`StoreBackend::append`] without the fsync: readers see the bytes at
    /// once; the file's next fsync (a later [`StoreBackend::append`]) makes
    /// them durable with it. A machine crash before then keeps any prefix.
    fn append_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError>;

    /// Cut the regular file at `path` to `len` bytes and fsync it. Like
    /// [`StoreBackend::append`], callers serialize truncations with a lock.
    fn truncate(&self, path: &VPath, len: u64) -> Result<(), BackendError>;

    /// Rename `from` to `to`, replacing a file at `to` atomically.
    fn rename(&self, from: &VPath, to: &VPath) -> Result<(), BackendError>;

    /// Fsync the directory at `dir` (the root included).
    fn sync_dir(&self, dir: &VPath) -> Result<(), BackendError>;

    /// Remove the file at `path`.
    fn remove(&self, path: &VPath) -> Result<(), BackendError>;

    /// Create the directory at `dir`; an existing one is [`BackendError::AlreadyExists`].
    fn create_dir(&self, dir: &VPath) -> Result<(), BackendError>;

    /// The names in the directory at `dir` that are valid UTF-8 single
    /// components, in no particular order. A missing directory is [`BackendError::NotFound`].
    fn list(&self, dir: &VPath) -> Result<Vec<String>, BackendError>;

    /// Take an advisory lock on the lock file at `path` (created if missing),
    /// blocking until granted. Exclusive locks exclude every other lock, in
    /// this process and in others; shared locks exclude only exclusive ones.
    fn lock(&self, path: &VPath, exclusive: bool) -> Result<BackendLock, BackendError>;
}

/// The real backend: every operation through a [`vsh_host::WritableDir`] opened on the data directory.
///
/// [`StoreBackend::append`] is one `O_APPEND` write and one fsync
/// ([`vsh_host::WritableDir::append`]); a crash part-way leaves a torn tail that log replay
/// detects and truncates. [`StoreBackend::truncate`] is `ftruncate` and fsync.
#[derive(Debug)]
pub struct CapDirBackend {
    dir: WritableDir,
}

impl CapDirBackend {
    /// Use `dir` (the data directory) as the root of every path.
    pub fn new(dir: WritableDir) -> Self {
        Self { dir }
    }
}

impl StoreBackend for CapDirBackend {
    fn read(&self, path: &VPath, max_bytes: u64) -> Result<Option<Vec<u8>>, BackendError> {
        match self.dir.read_file(path, max_bytes) {
            Ok(content) => Ok(Some(content.bytes)),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(source) => Err(BackendError::from_host("read", path, source)),
        }
    }

    fn read_ends(&self, path: &VPath, head: u64, from: u64, max_bytes: u64) -> Result<Option<Ends>, BackendError> {
        match self.dir.read_file_ends(path, head, from, max_bytes) {
            Ok((head, tail, stat)) => Ok(Some(Ends { head, len: stat.size, tail })),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(source) => Err(BackendError::from_host("read", path, source)),
        }
    }

    fn hash(&self, path: &VPath) -> Result<Option<BlobId>, BackendError> {
        match self.dir.hash_file(path) {
            Ok((id, _)) => Ok(Some(id)),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(source) => Err(BackendError::from_host("hash", path, source)),
        }
    }

    fn stat(&self, path: &VPath) -> Result<Option<FileMeta>, BackendError> {
        let stat = self.dir.lstat(path).map_err(|source| BackendError::from_host("stat", path, source))?;
        Ok(stat.map(|stat| FileMeta {
            len: stat.size,
            modified_ms: u64::try_from(stat.mtime_ns / 1_000_000).unwrap_or(0),
            is_file: stat.kind == HostKind::File,
        }))
    }

    fn create_new(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        match self.dir.create_file_exclusive(path, bytes, FILE_MODE) {
            Ok(stat) if stat.size == bytes.len() as u64 => Ok(()),
            Ok(_) => Err(BackendError::Unstable { path: path.clone() }),
            Err(source) => Err(BackendError::from_host("create", path, source)),
        }
    }

    fn create_new_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        match self.dir.create_file_exclusive_unsynced(path, bytes, FILE_MODE) {
            Ok((stat, _)) if stat.size == bytes.len() as u64 => Ok(()),
            Ok(_) => Err(BackendError::Unstable { path: path.clone() }),
            Err(source) => Err(BackendError::from_host("create", path, source)),
        }
    }

    fn sync_file(&self, path: &VPath) -> Result<(), BackendError> {
        self.dir.sync_file(path).map_err(|source| BackendError::from_host("sync file", path, source))
    }

    fn append(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        self.dir.append(path, bytes).map(|_| ()).map_err(|source| BackendError::from_host("append", path, source))
    }

    fn append_unsynced(&self, path: &VPath, bytes: &[u8]) -> Result<(), BackendError> {
        self.dir
            .append_unsynced(path, bytes)
            .map(|_| ())
            .map_err(|source| BackendError::from_host("append", path, source))
    }

    fn truncate(&self, path: &VPath, len: u64) -> Result<(), BackendError> {
        self.dir.truncate(path, len).map_err(|source| BackendError::from_host("truncate", path, source))
    }

    fn rename(&self, from: &VPath, to: &VPath) -> Result<(), BackendError> {
        self.dir.rename(from, to).map_err(|source| BackendError::from_host("rename", from, source))
    }

    fn sync_dir(&self, dir: &VPath) -> Result<(), BackendError> {
        self.dir.sync_dir(dir).map_err(|source| BackendError::from_host("sync directory", dir, source))
    }

    fn remove(&self, path: &VPath) -> Result<(), BackendError> {
        self.dir.remove_file(path).map_err(|source| BackendError::from_host("remove", path, source))
    }

    fn create_dir(&self, dir: &VPath) -> Result<(), BackendError> {
        self.dir.create_dir(dir, DIR_MODE).map_err(|source| BackendError::from_host("create directory", dir, source))
    }

    fn list(&self, dir: &VPath) -> Result<Vec<String>, BackendError> {
        let entries = self.dir.list_dir(dir).map_err(|source| BackendError::from_host("list", dir, source))?;
        Ok(entries
            .into_iter()
            .filter_map(|entry| String::from_utf8(entry.name).ok())
            .filter(|name| VPath::from_component(name).is_ok())
            .collect())
    }

    fn lock(&self, path: &VPath, exclusive: bool) -> Result<BackendLock, BackendError> {
        let guard: LockGuard = if exclusive { self.dir.lock_exclusive(path) } else { self.dir.lock_shared(path) }
            .map_err(|source| BackendError::from_host("lock", path, source))?;
        Ok(BackendLock::new(guard))
    }
}
