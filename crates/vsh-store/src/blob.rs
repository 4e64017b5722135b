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
//! `0o600`, `fsync`ed), renamed into its shard and the shard directory is
//! `fsync`ed, so a blob path either does not exist or holds complete bytes.
//! Every read re-hashes the bytes: a blob that does not match its id is
//! [`StoreError::CorruptBlob`] and its bytes are never returned. Writing the
//! same content again repairs a corrupt blob by atomically replacing it.
//!
//! There is no deletion yet; retention and garbage collection come later.

use vsh_host::{CapDir, HostError};
use vsh_types::{BlobId, VPath};

use crate::datadir::DataDir;
use crate::error::StoreError;
use crate::tempname;

/// Mode of stored blob files.
const BLOB_MODE: u32 = 0o600;
/// Mode of shard directories.
const SHARD_MODE: u32 = 0o700;

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

/// The content-addressed blob store of one data directory.
#[derive(Debug)]
pub struct BlobStore {
    /// `blobs/` in the data directory.
    dir: CapDir,
}

impl BlobStore {
    /// Open (creating `blobs/` and `blobs/tmp/` if needed) the blob store.
    pub fn open(data: &DataDir) -> Result<BlobStore, StoreError> {
        let dir = data.subdir(&blobs_dir())?;
        let tmp = tmp_dir();
        if dir.lstat(&tmp).map_err(StoreError::host("open blob store"))?.is_none() {
            match dir.create_dir(&tmp, SHARD_MODE) {
                Ok(()) | Err(HostError::AlreadyExists { .. }) => {}
                Err(source) => return Err(StoreError::Host { op: "open blob store", source }),
            }
            dir.sync_dir(&VPath::root()).map_err(StoreError::host("open blob store"))?;
        }
        Ok(BlobStore { dir })
    }

    /// The path of a blob relative to `blobs/`: `<2 hex>/<62 hex>`.
    pub fn relative_path(id: &BlobId) -> VPath {
        let hex = id.to_hex();
        VPath::parse(&format!("{}/{}", &hex[..2], &hex[2..])).expect("hex digits form a valid path")
    }

    /// Store `bytes` and return their id. An intact copy is left alone; a
    /// corrupt one is replaced atomically.
    pub fn put(&self, bytes: &[u8]) -> Result<BlobId, StoreError> {
        self.put_with_outcome(bytes).map(|(id, _)| id)
    }

    /// Store `bytes`, which must hash to `expected`
    /// ([`StoreError::DigestMismatch`] otherwise, and nothing is written).
    pub fn put_expected(&self, bytes: &[u8], expected: BlobId) -> Result<BlobId, StoreError> {
        let actual = BlobId::of(bytes);
        if actual != expected {
            return Err(StoreError::DigestMismatch { expected, actual });
        }
        self.store(bytes, actual).map(|_| actual)
    }

    /// Store `bytes` and say whether they were written, already present, or
    /// replaced a corrupt copy.
    pub fn put_with_outcome(&self, bytes: &[u8]) -> Result<(BlobId, PutOutcome), StoreError> {
        let id = BlobId::of(bytes);
        self.store(bytes, id).map(|outcome| (id, outcome))
    }

    fn store(&self, bytes: &[u8], id: BlobId) -> Result<PutOutcome, StoreError> {
        let path = Self::relative_path(&id);
        let outcome = match self.verify(&path, id)? {
            Verified::Intact => return Ok(PutOutcome::AlreadyPresent),
            Verified::Missing => PutOutcome::Written,
            Verified::Corrupt => PutOutcome::Repaired,
        };
        self.write_new(&path, bytes)?;
        Ok(outcome)
    }

    /// Re-hash the stored copy at `path`, if any.
    fn verify(&self, path: &VPath, id: BlobId) -> Result<Verified, StoreError> {
        match self.dir.hash_file(path) {
            Ok((digest, _)) if digest == id => Ok(Verified::Intact),
            Ok(_) | Err(HostError::NotAFile { .. } | HostError::Unstable { .. }) => Ok(Verified::Corrupt),
            Err(HostError::NotFound { .. }) => Ok(Verified::Missing),
            Err(source) => Err(StoreError::Host { op: "verify blob", source }),
        }
    }

    /// Write `bytes` to a temporary file and rename it to `path`, replacing
    /// whatever is there; then make the new entry durable.
    fn write_new(&self, path: &VPath, bytes: &[u8]) -> Result<(), StoreError> {
        let shard = path.parent().expect("a blob path has a shard");
        let shard_created = match self.dir.create_dir(&shard, SHARD_MODE) {
            Ok(()) => true,
            Err(HostError::AlreadyExists { .. }) => false,
            Err(source) => return Err(StoreError::Host { op: "create blob shard", source }),
        };
        let temp = write_temp(&self.dir, &tmp_dir(), bytes, BLOB_MODE)?;
        if let Err(source) = self.dir.rename(&temp, path) {
            let _ = self.dir.remove_file(&temp);
            return Err(StoreError::Host { op: "rename blob", source });
        }
        self.dir.sync_dir(&shard).map_err(StoreError::host("sync blob shard"))?;
        if shard_created {
            self.dir.sync_dir(&VPath::root()).map_err(StoreError::host("sync blob store"))?;
        }
        Ok(())
    }

    /// The bytes of blob `id`, re-hashed before they are returned.
    ///
    /// A blob over `max_bytes` is [`StoreError::TooLarge`], found from its size
    /// before anything is allocated; a missing one is
    /// [`StoreError::MissingBlob`]; one whose bytes do not hash to `id` is
    /// [`StoreError::CorruptBlob`].
    pub fn get(&self, id: BlobId, max_bytes: u64) -> Result<Vec<u8>, StoreError> {
        let path = Self::relative_path(&id);
        let content = match self.dir.read_file(&path, max_bytes) {
            Ok(content) => content,
            Err(HostError::TooLarge { size, max, .. }) => return Err(StoreError::TooLarge { id, size, max }),
            Err(HostError::NotFound { .. }) => return Err(StoreError::MissingBlob { id }),
            Err(HostError::NotAFile { .. } | HostError::Unstable { .. }) => return Err(StoreError::CorruptBlob { id }),
            Err(source) => return Err(StoreError::Host { op: "read blob", source }),
        };
        if BlobId::of(&content.bytes) != id {
            return Err(StoreError::CorruptBlob { id });
        }
        Ok(content.bytes)
    }

    /// Whether blob `id` is stored. The stored copy is re-hashed: a corrupt one
    /// is [`StoreError::CorruptBlob`] (storing the bytes again repairs it).
    pub fn contains(&self, id: BlobId) -> Result<bool, StoreError> {
        match self.verify(&Self::relative_path(&id), id)? {
            Verified::Intact => Ok(true),
            Verified::Missing => Ok(false),
            Verified::Corrupt => Err(StoreError::CorruptBlob { id }),
        }
    }
}

enum Verified {
    Intact,
    Missing,
    Corrupt,
}

fn blobs_dir() -> VPath {
    VPath::from_component("blobs").expect("a valid constant name")
}

fn tmp_dir() -> VPath {
    VPath::from_component("tmp").expect("a valid constant name")
}

/// Create a uniquely named, `fsync`ed file holding `bytes` in `temp_dir`
/// (relative to `dir`) and return its path.
pub(crate) fn write_temp(dir: &CapDir, temp_dir: &VPath, bytes: &[u8], mode: u32) -> Result<VPath, StoreError> {
    for _ in 0..tempname::ATTEMPTS {
        let temp = tempname::next(temp_dir);
        match dir.create_file_exclusive(&temp, bytes, mode) {
            Ok(stat) if stat.size == bytes.len() as u64 => return Ok(temp),
            Ok(_) => {
                let _ = dir.remove_file(&temp);
                return Err(StoreError::Host {
                    op: "write temporary file",
                    source: HostError::Unstable { path: temp },
                });
            }
            Err(HostError::AlreadyExists { .. }) => {}
            Err(source) => {
                let _ = dir.remove_file(&temp);
                return Err(StoreError::Host { op: "write temporary file", source });
            }
        }
    }
    Err(StoreError::TempNames { path: temp_dir.clone() })
}
