//! [`TransactionStore`]: one durable record per transaction, changed only by
//! compare-and-transition under a cross-process lock.
//!
//! Layout, relative to the data directory:
//!
//! ```text
//! txns.lock               advisory lock file (flock), held by every mutation
//! txns/<64 hex>           one record per transaction (see crate::record)
//! txns/tmp/<name>.tmp     records being written
//! ```
//!
//! A record is replaced atomically: the new encoding is written to a fresh
//! temporary file (created exclusively, `fsync`ed), renamed over the old one,
//! and `txns/` is `fsync`ed. Every mutation holds an in-process mutex and an
//! exclusive `flock` on `txns.lock`, reads the current record under them, and
//! writes at most one new record, so concurrent handles (threads or processes)
//! serialize and a compare-and-transition has exactly one winner. Reads take no
//! lock: a rename is atomic, so a reader sees the old or the new record.
//!
//! All file I/O goes through the private `RecordFiles` type, the seam where a
//! log-structured backend (with compaction and fault injection) will slot in.

use std::sync::{Mutex, MutexGuard, PoisonError};

use vsh_host::{CapDir, HostError, LockGuard};
use vsh_types::{BlobId, TransactionId, TransactionState, VPath};

use crate::blob::write_temp;
use crate::datadir::DataDir;
use crate::error::StoreError;
use crate::record::{MAX_RECORD_BYTES, TransactionRecord};

/// Mode of record files.
const RECORD_MODE: u32 = 0o600;

/// The transaction records of one data directory.
#[derive(Debug)]
pub struct TransactionStore {
    files: RecordFiles,
    mutex: Mutex<()>,
}

/// Both locks held by a mutation; dropped in reverse order of acquisition.
struct Held<'a> {
    _file: LockGuard,
    _mutex: MutexGuard<'a, ()>,
}

impl TransactionStore {
    /// Open (creating `txns/` if needed) the transaction store, and remove
    /// temporary files left by writers that stopped part-way.
    pub fn open(data: &DataDir) -> Result<TransactionStore, StoreError> {
        let files = RecordFiles::open(data)?;
        let store = TransactionStore { files, mutex: Mutex::new(()) };
        {
            let _held = store.lock()?;
            store.files.remove_stale_temporaries()?;
        }
        Ok(store)
    }

    fn lock(&self) -> Result<Held<'_>, StoreError> {
        // A panic while holding the mutex cannot leave a half-written record
        // (records are replaced by rename), so a poisoned mutex is still usable.
        let mutex = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        let file = self.files.lock()?;
        Ok(Held { _file: file, _mutex: mutex })
    }

    /// Store a new record. [`StoreError::Duplicate`] if one exists for its id.
    pub fn create(&self, record: &TransactionRecord) -> Result<(), StoreError> {
        let _held = self.lock()?;
        self.files.write(record, WriteMode::CreateNew)
    }

    /// The record of transaction `id`, or `None` if there is none. A record that
    /// fails its checks is [`StoreError::CorruptRecord`].
    pub fn get(&self, id: TransactionId) -> Result<Option<TransactionRecord>, StoreError> {
        self.files.read(id)
    }

    /// Move transaction `id` from `expected` to `next` atomically.
    ///
    /// The current state must equal `expected` ([`StoreError::StateConflict`]
    /// otherwise) and the state table must allow the edge
    /// ([`StoreError::Transition`]); a missing record is
    /// [`StoreError::NotFound`]. Returns the updated record, whose `updated_ms`
    /// is `now_ms`.
    pub fn compare_and_transition(
        &self,
        id: TransactionId,
        expected: TransactionState,
        next: TransactionState,
        now_ms: u64,
    ) -> Result<TransactionRecord, StoreError> {
        let _held = self.lock()?;
        let mut record = self.files.read(id)?.ok_or(StoreError::NotFound { id })?;
        if record.state != expected {
            return Err(StoreError::StateConflict { id, expected, actual: record.state });
        }
        record.state = record.state.transition(next).map_err(|source| StoreError::Transition { id, source })?;
        record.updated_ms = now_ms;
        self.files.write(&record, WriteMode::Replace)?;
        Ok(record)
    }

    /// Record the artifact blob of transaction `id`. Setting the same artifact
    /// again is a no-op; replacing a different one is
    /// [`StoreError::ArtifactConflict`] (an artifact is bound to its
    /// transaction). Returns the current record.
    pub fn set_artifact(&self, id: TransactionId, artifact: BlobId) -> Result<TransactionRecord, StoreError> {
        let _held = self.lock()?;
        let mut record = self.files.read(id)?.ok_or(StoreError::NotFound { id })?;
        match record.artifact {
            Some(existing) if existing == artifact => return Ok(record),
            Some(existing) => return Err(StoreError::ArtifactConflict { id, existing, requested: artifact }),
            None => record.artifact = Some(artifact),
        }
        self.files.write(&record, WriteMode::Replace)?;
        Ok(record)
    }

    /// Every record, sorted by id. Any corrupt record fails the whole listing.
    pub fn list(&self) -> Result<Vec<TransactionRecord>, StoreError> {
        let mut records = Vec::new();
        for id in self.files.ids()? {
            // A record cannot disappear (there is no deletion yet), but a
            // missing one is skipped rather than reported as corrupt.
            if let Some(record) = self.files.read(id)? {
                records.push(record);
            }
        }
        records.sort_by_key(|record| record.id);
        Ok(records)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum WriteMode {
    CreateNew,
    Replace,
}

/// The file backend: every host operation of the transaction store.
#[derive(Debug)]
struct RecordFiles {
    /// The data directory (for the lock file and rename paths).
    root: CapDir,
}

impl RecordFiles {
    fn open(data: &DataDir) -> Result<Self, StoreError> {
        let root = data.dir().open_subdir(&VPath::root(), false).map_err(StoreError::host("open transaction store"))?;
        let files = Self { root };
        for dir in [txns_dir(), temp_dir()] {
            if files.root.lstat(&dir).map_err(StoreError::host("open transaction store"))?.is_none() {
                match files.root.create_dir(&dir, 0o700) {
                    Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
                    Err(source) => return Err(StoreError::Host { op: "open transaction store", source }),
                }
                let parent = dir.parent().expect("not the root");
                files.root.sync_dir(&parent).map_err(StoreError::host("open transaction store"))?;
            }
        }
        Ok(files)
    }

    fn lock(&self) -> Result<LockGuard, StoreError> {
        let path = VPath::from_component("txns.lock").expect("a valid constant name");
        self.root.lock_exclusive(&path).map_err(StoreError::host("lock transaction store"))
    }

    fn record_path(id: TransactionId) -> VPath {
        txns_dir().child(&id.to_hex()).expect("hex digits form a valid name")
    }

    fn read(&self, id: TransactionId) -> Result<Option<TransactionRecord>, StoreError> {
        let path = Self::record_path(id);
        match self.root.read_file(&path, MAX_RECORD_BYTES as u64) {
            Ok(content) => TransactionRecord::decode(id, &content.bytes).map(Some),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(HostError::TooLarge { .. }) => Err(StoreError::CorruptRecord { id, reason: "record is too long" }),
            Err(HostError::NotAFile { .. }) => Err(StoreError::CorruptRecord { id, reason: "not a regular file" }),
            Err(source) => Err(StoreError::Host { op: "read transaction record", source }),
        }
    }

    fn write(&self, record: &TransactionRecord, mode: WriteMode) -> Result<(), StoreError> {
        let path = Self::record_path(record.id);
        let temp = write_temp(&self.root, &temp_dir(), &record.encode(), RECORD_MODE)?;
        let renamed = match mode {
            WriteMode::CreateNew => self.root.rename_noreplace(&temp, &path),
            WriteMode::Replace => self.root.rename(&temp, &path),
        };
        if let Err(error) = renamed {
            let _ = self.root.remove_file(&temp);
            return Err(match error {
                HostError::AlreadyExists { .. } if mode == WriteMode::CreateNew => {
                    StoreError::Duplicate { id: record.id }
                }
                source => StoreError::Host { op: "write transaction record", source },
            });
        }
        self.root.sync_dir(&txns_dir()).map_err(StoreError::host("sync transaction records"))
    }

    /// The ids of every record file (names that are exactly 64 lower-case hex digits).
    fn ids(&self) -> Result<Vec<TransactionId>, StoreError> {
        let entries = self.root.list_dir(&txns_dir()).map_err(StoreError::host("list transaction records"))?;
        let mut ids = Vec::new();
        for entry in entries {
            let Ok(name) = std::str::from_utf8(&entry.name) else { continue };
            if let Ok(id) = TransactionId::parse_hex(name)
                && id.to_hex() == name
            {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Remove every file in the temporary directory. Called with the lock held,
    /// when no writer can be part-way through.
    fn remove_stale_temporaries(&self) -> Result<(), StoreError> {
        let temp = temp_dir();
        let entries = self.root.list_dir(&temp).map_err(StoreError::host("list temporary records"))?;
        for entry in entries {
            let Ok(name) = std::str::from_utf8(&entry.name) else { continue };
            let Ok(path) = temp.child(name) else { continue };
            match self.root.remove_file(&path) {
                Ok(()) | Err(HostError::NotFound { .. }) => {}
                Err(source) => return Err(StoreError::Host { op: "remove temporary record", source }),
            }
        }
        Ok(())
    }
}

fn txns_dir() -> VPath {
    VPath::from_component("txns").expect("a valid constant name")
}

fn temp_dir() -> VPath {
    VPath::parse("txns/tmp").expect("a valid constant path")
}
