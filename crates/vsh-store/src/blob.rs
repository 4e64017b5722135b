//! [`BlobStore`]: content-addressed blobs with verified reads.
//!
//! Layout, relative to the data directory:
//!
//! ```text
//! blobs/<first 2 hex digits of the id>/<remaining 62 hex digits>
//! blobs/tmp/<pid>-<seq>-<time>.tmp      (files being written)
//! ```
//!
//! A blob is written to a fresh temporary file (created exclusively, mode
//! `0o600`, fsynced), renamed into its shard and the shard directory is
//! fsynced, so a blob path either does not exist or holds complete bytes.
//! [`BlobStore::put_expected_deferred`] skips those barriers for content whose
//! durability nobody needs yet (a process-local preview's): the blob is made
//! durable by [`BlobStore::make_durable`] before anything durable refers to
//! it (the artifact writers call it), and a copy a crash tore is found by the
//! re-hash below and repaired by the next store of the same bytes.
//! Every read re-hashes the bytes: a blob that does not match its id is
//! [`StoreError::CorruptBlob`] and its bytes are never returned. Writing the
//! same content again repairs a corrupt blob by atomically replacing it.
//!
//! All I/O goes through a [`StoreBackend`]. After a storage failure the blob
//! store is fail-stop: every later call is [`StoreError::Poisoned`] until it
//! is reopened. Blobs are deleted only by garbage collection
//! ([`crate::TransactionStore::gc`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use vsh_types::{BlobId, VPath};

use crate::backend::{BackendError, StoreBackend};
use crate::datadir::DataDir;
use crate::error::StoreError;
use crate::tempname;

/// A stored copy older than this (by its modification time) is rewritten when
/// the same bytes are stored again, so garbage collection's grace period
/// counts from the latest store, not the first.
pub const REFRESH_AFTER_MS: u64 = 10 * 60 * 1000;

/// What [`BlobStore::put_with_outcome`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The blob was not stored; it is now.
    Written,
    /// An intact copy was already stored (it was re-hashed to check).
    AlreadyPresent,
    /// A stored copy was corrupt (or not a regular file) and was replaced.
    Repaired,
}

/// What [`BlobStore::status`] found for one blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobStatus {
    /// Stored, and its bytes hash to its id.
    Intact,
    /// Not stored.
    Missing,
    /// Stored, but its bytes do not hash to its id (or it is not a regular
    /// file); storing the same bytes again repairs it.
    Corrupt {
        /// Where its file is, for the operator.
        path: std::path::PathBuf,
    },
}

/// The content-addressed blob store of one data directory.
#[derive(Debug)]
pub struct BlobStore {
    backend: Arc<dyn StoreBackend>,
    poisoned: AtomicBool,
    /// The data directory's host path, for messages only.
    display: std::path::PathBuf,
    /// What deferred writes left not yet durable.
    deferred: Mutex<Deferred>,
    /// Whether this handle has made sure `blobs/` and `blobs/tmp/` exist
    /// ([`BlobStore::ensure_dirs`]). A mutex, not a flag: a second writer
    /// waits until the first one's barriers returned.
    dirs: Mutex<Dirs>,
}

/// `blobs/` and `blobs/tmp/`, as this handle knows them.
#[derive(Debug, Default, PartialEq, Eq)]
enum Dirs {
    /// Not yet looked at.
    #[default]
    Unknown,
    /// There, but the entries of those this handle made are not yet durable:
    /// these parents still need their barrier (a deferred write made them).
    Unsynced(Vec<VPath>),
    /// There, and durable.
    Durable,
}

/// Blobs written without their barriers, and shards made for them.
#[derive(Debug, Default)]
struct Deferred {
    blobs: BTreeSet<BlobId>,
    new_shards: BTreeSet<VPath>,
}

/// Whether a write makes its blob durable before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    Now,
    Deferred,
}

impl BlobStore {
    /// Open the blob store of a data directory, with the real backend.
    /// Nothing is made until a blob is stored: `blobs/` and `blobs/tmp/`
    /// appear with the first one (a data directory that never stores a blob,
    /// as when every content rides in its artifact, never pays their
    /// barriers).
    pub fn open(data: &DataDir) -> Result<BlobStore, StoreError> {
        let mut store = Self::open_with(data.backend()?)?;
        data.dir().display_path().clone_into(&mut store.display);
        Ok(store)
    }

    /// Open the blob store over `backend`, whose root is the data directory.
    pub fn open_with(backend: Arc<dyn StoreBackend>) -> Result<BlobStore, StoreError> {
        let store = BlobStore {
            backend,
            poisoned: AtomicBool::new(false),
            display: std::path::PathBuf::new(),
            deferred: Mutex::default(),
            dirs: Mutex::default(),
        };
        Ok(store)
    }

    /// Make `blobs/` and `blobs/tmp/` if missing, before this handle's first
    /// blob. The parent of each one made is fsynced now, or, for a deferred
    /// write, by the next durable write or [`BlobStore::make_durable`]: a
    /// blob is durable only once the entries leading to it are.
    fn ensure_dirs(&self, durability: Durability) -> Result<(), StoreError> {
        let mut dirs = self.dirs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *dirs == Dirs::Unknown {
            let mut made = Vec::new();
            for (dir, parent) in [(blobs_dir(), VPath::root()), (tmp_dir(), blobs_dir())] {
                if self.create_dir(&dir)? {
                    made.push(parent);
                }
            }
            *dirs = Dirs::Unsynced(made);
        }
        if durability == Durability::Now {
            self.sync_dirs(&mut dirs)?;
        }
        Ok(())
    }

    /// Make durable the entries of the blob directories this handle made;
    /// whether `blobs/` itself was synced for it.
    fn sync_dirs(&self, dirs: &mut Dirs) -> Result<bool, StoreError> {
        let mut synced_blobs = false;
        if let Dirs::Unsynced(parents) = dirs {
            for parent in parents.iter() {
                self.io("make blob store", self.backend.sync_dir(parent))?;
                synced_blobs |= *parent == blobs_dir();
            }
            *dirs = Dirs::Durable;
        }
        Ok(synced_blobs)
    }

    /// The path of a blob relative to `blobs/`: `<2 hex>/<62 hex>`.
    pub fn relative_path(id: &BlobId) -> VPath {
        let hex = id.to_hex();
        VPath::parse(&format!("{}/{}", &hex[..2], &hex[2..])).expect("hex digits form a valid path")
    }

    /// The path of a blob relative to the data directory.
    fn path(id: &BlobId) -> VPath {
        blobs_dir().join(Self::relative_path(id).as_str()).expect("a relative path joins")
    }

    /// The host path of blob `id`'s file, for messages only.
    pub fn display_path(&self, id: &BlobId) -> std::path::PathBuf {
        self.display.join(Self::path(id).as_str())
    }

    /// Whether a storage failure has stopped this store.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.is_poisoned() { Err(StoreError::Poisoned) } else { Ok(()) }
    }

    /// Pass `result` through, poisoning the store on a storage failure.
    fn io<T>(&self, op: &'static str, result: Result<T, BackendError>) -> Result<T, StoreError> {
        result.map_err(|source| {
            if source.is_io_failure() {
                self.poisoned.store(true, Ordering::SeqCst);
            }
            StoreError::Io { op, source }
        })
    }

    /// Create a directory; `Ok(false)` if it already existed.
    fn create_dir(&self, dir: &VPath) -> Result<bool, StoreError> {
        match self.backend.create_dir(dir) {
            Ok(()) => Ok(true),
            Err(BackendError::AlreadyExists { .. }) => Ok(false),
            Err(source) => self.io("create blob directory", Err(source)),
        }
    }

    /// Store `bytes` and return their id. An intact copy is left alone; a
    /// corrupt one is replaced atomically.
    pub fn put(&self, bytes: &[u8]) -> Result<BlobId, StoreError> {
        self.put_with_outcome(bytes).map(|(id, _)| id)
    }

    /// Store `bytes`, which must hash to `expected`
    /// ([`StoreError::DigestMismatch`] otherwise, and nothing is written).
    pub fn put_expected(&self, bytes: &[u8], expected: BlobId) -> Result<BlobId, StoreError> {
        self.put_expected_with_outcome(bytes, expected).map(|_| expected)
    }

    /// [`BlobStore::put_expected`], saying whether the bytes were written,
    /// already present, or replaced a corrupt copy.
    pub fn put_expected_with_outcome(&self, bytes: &[u8], expected: BlobId) -> Result<PutOutcome, StoreError> {
        self.put_checked(bytes, expected, Durability::Now)
    }

    /// [`BlobStore::put_expected_with_outcome`] without the barriers: the
    /// blob is complete for every reader of this process at once, and made
    /// durable by [`BlobStore::make_durable`] when something durable will
    /// refer to it (a crash before may leave a torn copy, which a read's
    /// re-hash refuses and the next store of the bytes repairs).
    pub fn put_expected_deferred(&self, bytes: &[u8], expected: BlobId) -> Result<PutOutcome, StoreError> {
        self.put_checked(bytes, expected, Durability::Deferred)
    }

    fn put_checked(&self, bytes: &[u8], expected: BlobId, durability: Durability) -> Result<PutOutcome, StoreError> {
        self.check()?;
        let actual = BlobId::of(bytes);
        if actual != expected {
            return Err(StoreError::DigestMismatch { expected, actual });
        }
        self.store(bytes, actual, durability)
    }

    fn deferred(&self) -> std::sync::MutexGuard<'_, Deferred> {
        self.deferred.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Make every blob of `ids` that a deferred write left durable: the file,
    /// its shard directory and, for a shard made for it, the blob directory.
    /// Blobs written with their barriers are left alone.
    pub fn make_durable(&self, ids: impl IntoIterator<Item = BlobId>) -> Result<(), StoreError> {
        let mut deferred = self.deferred();
        let wanted: Vec<BlobId> = ids.into_iter().filter(|id| deferred.blobs.contains(id)).collect();
        if wanted.is_empty() {
            return Ok(());
        }
        self.check()?;
        // Every file and every shard holding one, all at once (the
        // filesystem's journal commits concurrent barriers together), then
        // the blob directory if a shard was made for them.
        let paths: Vec<VPath> = wanted.iter().map(Self::path).collect();
        let shards: BTreeSet<VPath> =
            paths.iter().map(|path| path.parent().expect("a blob path has a shard")).collect();
        let barriers: Vec<(&VPath, bool)> =
            paths.iter().map(|path| (path, false)).chain(shards.iter().map(|shard| (shard, true))).collect();
        vsh_host::concurrently(&barriers, |(path, is_dir)| {
            if *is_dir {
                self.io("sync blob shard", self.backend.sync_dir(path))
            } else {
                self.io("sync blob", self.backend.sync_file(path))
            }
        })?;
        let mut dirs = self.dirs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let synced_blobs = self.sync_dirs(&mut dirs)?;
        drop(dirs);
        let mut root = false;
        for shard in &shards {
            root |= deferred.new_shards.remove(shard);
        }
        if root && !synced_blobs {
            self.io("sync blob store", self.backend.sync_dir(&blobs_dir()))?;
        }
        for id in &wanted {
            deferred.blobs.remove(id);
        }
        Ok(())
    }

    /// Store `bytes` and say whether they were written, already present, or
    /// replaced a corrupt copy.
    pub fn put_with_outcome(&self, bytes: &[u8]) -> Result<(BlobId, PutOutcome), StoreError> {
        self.check()?;
        let id = BlobId::of(bytes);
        self.store(bytes, id, Durability::Now).map(|outcome| (id, outcome))
    }

    fn store(&self, bytes: &[u8], id: BlobId, durability: Durability) -> Result<PutOutcome, StoreError> {
        let path = Self::path(&id);
        let outcome = match self.verify(&path, id)? {
            Verified::Intact if !self.is_stale(&path)? => {
                // An intact copy a deferred write left is made durable when asked to be.
                if durability == Durability::Now {
                    self.make_durable([id])?;
                }
                return Ok(PutOutcome::AlreadyPresent);
            }
            // Rewritten only to refresh its modification time.
            Verified::Intact => PutOutcome::AlreadyPresent,
            Verified::Missing => PutOutcome::Written,
            Verified::Corrupt => PutOutcome::Repaired,
        };
        self.write_new(id, bytes, durability)?;
        if durability == Durability::Now {
            self.deferred().blobs.remove(&id);
        }
        Ok(outcome)
    }

    /// Whether the intact copy at `path` is older than [`REFRESH_AFTER_MS`].
    fn is_stale(&self, path: &VPath) -> Result<bool, StoreError> {
        let meta = self.io("stat blob", self.backend.stat(path))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis());
        Ok(meta.is_some_and(|meta| now.saturating_sub(u128::from(meta.modified_ms)) > u128::from(REFRESH_AFTER_MS)))
    }

    /// Re-hash the stored copy at `path`, if any.
    fn verify(&self, path: &VPath, id: BlobId) -> Result<Verified, StoreError> {
        match self.backend.hash(path) {
            Ok(Some(digest)) if digest == id => Ok(Verified::Intact),
            Ok(Some(_)) | Err(BackendError::NotAFile { .. } | BackendError::Unstable { .. }) => Ok(Verified::Corrupt),
            Ok(None) | Err(BackendError::NotFound { .. }) => Ok(Verified::Missing),
            Err(source) => self.io("verify blob", Err(source)),
        }
    }

    /// Write `bytes` to a temporary file and rename it to blob `id`'s path,
    /// replacing whatever is there; then make the new entry durable, or, when
    /// its durability is deferred, note it for [`BlobStore::make_durable`].
    fn write_new(&self, id: BlobId, bytes: &[u8], durability: Durability) -> Result<(), StoreError> {
        let path = &Self::path(&id);
        let shard = path.parent().expect("a blob path has a shard");
        self.ensure_dirs(durability)?;
        let shard_created = self.create_dir(&shard)?;
        let temp = self.write_temp(bytes, durability)?;
        if let Err(source) = self.backend.rename(&temp, path) {
            let _ = self.backend.remove(&temp);
            return self.io("rename blob", Err(source));
        }
        if durability == Durability::Deferred {
            let mut deferred = self.deferred();
            deferred.blobs.insert(id);
            if shard_created {
                deferred.new_shards.insert(shard);
            }
            return Ok(());
        }
        self.io("sync blob shard", self.backend.sync_dir(&shard))?;
        if shard_created {
            self.io("sync blob store", self.backend.sync_dir(&blobs_dir()))?;
        }
        Ok(())
    }

    /// Create a uniquely named file holding `bytes` in `blobs/tmp`, fsynced
    /// unless its durability is deferred.
    fn write_temp(&self, bytes: &[u8], durability: Durability) -> Result<VPath, StoreError> {
        let dir = tmp_dir();
        for _ in 0..tempname::ATTEMPTS {
            let temp = tempname::next(&dir);
            let created = match durability {
                Durability::Now => self.backend.create_new(&temp, bytes),
                Durability::Deferred => self.backend.create_new_unsynced(&temp, bytes),
            };
            match created {
                Ok(()) => return Ok(temp),
                Err(BackendError::AlreadyExists { .. }) => {}
                Err(source) => {
                    let _ = self.backend.remove(&temp);
                    return self.io("write temporary blob", Err(source));
                }
            }
        }
        Err(StoreError::TempNames { path: dir })
    }

    /// The bytes of blob `id`, re-hashed before they are returned.
    ///
    /// A blob over `max_bytes` is [`StoreError::TooLarge`], found from its size
    /// before anything is allocated; a missing one is
    /// [`StoreError::MissingBlob`]; one whose bytes do not hash to `id` is
    /// [`StoreError::CorruptBlob`].
    pub fn get(&self, id: BlobId, max_bytes: u64) -> Result<Vec<u8>, StoreError> {
        self.check()?;
        let bytes = match self.backend.read(&Self::path(&id), max_bytes) {
            Ok(Some(bytes)) => bytes,
            Ok(None) | Err(BackendError::NotFound { .. }) => return Err(StoreError::MissingBlob { id }),
            Err(BackendError::TooLarge { size, max, .. }) => return Err(StoreError::TooLarge { id, size, max }),
            Err(BackendError::NotAFile { .. } | BackendError::Unstable { .. }) => {
                return Err(StoreError::CorruptBlob { id, path: self.display_path(&id) });
            }
            Err(source) => return self.io("read blob", Err(source)),
        };
        if BlobId::of(&bytes) != id {
            return Err(StoreError::CorruptBlob { id, path: self.display_path(&id) });
        }
        Ok(bytes)
    }

    /// Whether blob `id` is stored. The stored copy is re-hashed: a corrupt one
    /// is [`StoreError::CorruptBlob`] (storing the bytes again repairs it; a
    /// writer that means to store them asks [`BlobStore::status`] instead).
    pub fn contains(&self, id: BlobId) -> Result<bool, StoreError> {
        match self.status(id)? {
            BlobStatus::Intact => Ok(true),
            BlobStatus::Missing => Ok(false),
            BlobStatus::Corrupt { path } => Err(StoreError::CorruptBlob { id, path }),
        }
    }

    /// Whether blob `id` is stored intact, missing, or corrupt (re-hashed).
    /// Corruption is an answer here, not an error, so a caller about to store
    /// the same bytes repairs the copy instead of failing on it.
    pub fn status(&self, id: BlobId) -> Result<BlobStatus, StoreError> {
        self.check()?;
        Ok(match self.verify(&Self::path(&id), id)? {
            Verified::Intact => BlobStatus::Intact,
            Verified::Missing => BlobStatus::Missing,
            Verified::Corrupt => BlobStatus::Corrupt { path: self.display_path(&id) },
        })
    }

    /// Whether the stored copy of `id` (which [`BlobStore::status`] found
    /// intact) is older than [`REFRESH_AFTER_MS`], so that storing its bytes
    /// again would rewrite it and restart garbage collection's grace period.
    /// A caller that skips storing bytes the store already holds must still
    /// store these. One `stat`; the bytes are not read again.
    pub fn refresh_due(&self, id: BlobId) -> Result<bool, StoreError> {
        self.check()?;
        self.is_stale(&Self::path(&id))
    }

    /// The size of the stored copy of `id` (one `stat`, not verified), or
    /// `None` when there is none: for bounding what a set of blobs occupies.
    pub fn stored_size(&self, id: BlobId) -> Result<Option<u64>, StoreError> {
        self.check()?;
        Ok(self.io("stat blob", self.backend.stat(&Self::path(&id)))?.map(|meta| meta.len))
    }

    /// The shard directory names (two lower-case hex digits), sorted.
    pub(crate) fn shards(&self) -> Result<Vec<String>, StoreError> {
        self.check()?;
        // No `blobs/` yet: no blob was ever stored.
        let mut names = match self.backend.list(&blobs_dir()) {
            Ok(names) => names,
            Err(BackendError::NotFound { .. }) => return Ok(Vec::new()),
            Err(source) => return self.io("list blob shards", Err(source)),
        };
        names.retain(|name| name.len() == 2 && is_lower_hex(name));
        names.sort_unstable();
        Ok(names)
    }

    /// The blobs in one shard (names that form a canonical id), sorted.
    pub(crate) fn ids_in_shard(&self, shard: &str) -> Result<Vec<BlobId>, StoreError> {
        self.check()?;
        let dir = blobs_dir().child(shard).expect("a shard name is one component");
        let names = match self.backend.list(&dir) {
            Ok(names) => names,
            Err(BackendError::NotFound { .. }) => return Ok(Vec::new()),
            Err(source) => return self.io("list blob shard", Err(source)),
        };
        let mut ids: Vec<BlobId> = names
            .iter()
            .filter(|name| name.len() == 62 && is_lower_hex(name))
            .filter_map(|name| BlobId::parse_hex(&format!("{shard}{name}")).ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// When blob `id` was last written (milliseconds since the Unix epoch), if it exists.
    pub(crate) fn modified_ms(&self, id: BlobId) -> Result<Option<u64>, StoreError> {
        self.check()?;
        Ok(self.io("stat blob", self.backend.stat(&Self::path(&id)))?.map(|meta| meta.modified_ms))
    }

    /// Delete blob `id`; its shard must be synced afterwards ([`BlobStore::sync_shard_of`]).
    pub(crate) fn remove(&self, id: BlobId) -> Result<(), StoreError> {
        self.check()?;
        match self.backend.remove(&Self::path(&id)) {
            Ok(()) | Err(BackendError::NotFound { .. }) => Ok(()),
            Err(source) => self.io("remove blob", Err(source)),
        }
    }

    /// Make removals in the shard of `id` durable.
    pub(crate) fn sync_shard_of(&self, id: BlobId) -> Result<(), StoreError> {
        self.check()?;
        let shard = Self::path(&id).parent().expect("a blob path has a shard");
        self.io("sync blob shard", self.backend.sync_dir(&shard))
    }

    /// Remove temporary files older than `grace_ms` at `now_ms`, at most
    /// `max` of them. Returns how many were removed.
    pub(crate) fn remove_stale_temporaries(&self, now_ms: u64, grace_ms: u64, max: usize) -> Result<usize, StoreError> {
        self.check()?;
        let dir = tmp_dir();
        // No `blobs/tmp/`: nothing is being written there.
        let mut names = match self.backend.list(&dir) {
            Ok(names) => names,
            Err(BackendError::NotFound { .. }) => return Ok(0),
            Err(source) => return self.io("list temporary blobs", Err(source)),
        };
        names.sort_unstable();
        let mut removed = 0;
        for name in names {
            if removed >= max {
                break;
            }
            let Ok(path) = dir.child(&name) else { continue };
            let Some(meta) = self.io("stat temporary blob", self.backend.stat(&path))? else { continue };
            if now_ms.saturating_sub(meta.modified_ms) < grace_ms {
                continue;
            }
            match self.backend.remove(&path) {
                Ok(()) | Err(BackendError::NotFound { .. }) => removed += 1,
                Err(source) => return self.io("remove temporary blob", Err(source)),
            }
        }
        if removed > 0 {
            self.io("sync temporary blobs", self.backend.sync_dir(&dir))?;
        }
        Ok(removed)
    }
}

enum Verified {
    Intact,
    Missing,
    Corrupt,
}

fn is_lower_hex(text: &str) -> bool {
    vsh_types::hex::is_lower(text.as_bytes())
}

fn blobs_dir() -> VPath {
    VPath::from_component("blobs").expect("a valid constant name")
}

fn tmp_dir() -> VPath {
    VPath::parse("blobs/tmp").expect("a valid constant path")
}
