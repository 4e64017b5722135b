//! [`StoreError`]: every way a data-directory, blob or transaction-record
//! operation can fail.
//!
//! Corruption is always an error naming the blob or transaction, never data:
//! a blob whose bytes do not hash to its id and a record whose checksum, magic,
//! state tag or length is wrong are refused before anything is returned.

use vsh_host::HostError;
use vsh_types::{BlobId, TransactionId, TransactionState, TransitionError, VPath};

/// An error from the trusted data directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The data directory could not be opened or created safely (a symlink or a
    /// non-directory in its path, or an I/O error).
    #[error("cannot open the data directory at {path}")]
    DataDir {
        /// The data directory, relative to the workspace (`.` for an external one).
        path: VPath,
        /// What the host reported.
        #[source]
        source: HostError,
    },
    /// The data directory would be the workspace root itself.
    #[error("the data directory cannot be the workspace root")]
    DataDirIsRoot,
    /// Host I/O inside the data directory failed.
    #[error("i/o failed in the data directory during {op}")]
    Host {
        /// The step that failed, e.g. `"write blob"`.
        op: &'static str,
        /// What the host reported (it names the path).
        #[source]
        source: HostError,
    },
    /// A stored blob's bytes do not hash to its id (or it is not a regular file).
    #[error("blob {id} is corrupt")]
    CorruptBlob {
        /// The blob's id.
        id: BlobId,
    },
    /// No blob with this id is stored.
    #[error("blob {id} is missing")]
    MissingBlob {
        /// The blob's id.
        id: BlobId,
    },
    /// A blob is larger than the caller's limit; nothing was allocated for it.
    #[error("blob {id} is {size} bytes, over the limit of {max}")]
    TooLarge {
        /// The blob's id.
        id: BlobId,
        /// Its stored size.
        size: u64,
        /// The caller's limit.
        max: u64,
    },
    /// Bytes given with an expected id hash to a different id.
    #[error("bytes hash to {actual}, expected {expected}")]
    DigestMismatch {
        /// The id the caller expected.
        expected: BlobId,
        /// The id of the bytes given.
        actual: BlobId,
    },
    /// No unique temporary name could be found after many attempts.
    #[error("no free temporary name under {path}")]
    TempNames {
        /// The temporary directory, relative to the data directory.
        path: VPath,
    },
    /// A stored transaction record failed its checks.
    #[error("transaction record {id} is corrupt: {reason}")]
    CorruptRecord {
        /// The transaction the record belongs to (from its file name).
        id: TransactionId,
        /// Which check failed.
        reason: &'static str,
    },
    /// A record for this transaction already exists.
    #[error("transaction {id} already exists")]
    Duplicate {
        /// The transaction.
        id: TransactionId,
    },
    /// No record for this transaction exists.
    #[error("transaction {id} not found")]
    NotFound {
        /// The transaction.
        id: TransactionId,
    },
    /// A compare-and-transition found a different current state.
    #[error("transaction {id} is {}, expected {}", .actual.name(), .expected.name())]
    StateConflict {
        /// The transaction.
        id: TransactionId,
        /// The state the caller expected.
        expected: TransactionState,
        /// The state on record.
        actual: TransactionState,
    },
    /// The state table does not allow the requested transition.
    #[error("transaction {id} cannot move from {} to {}", .source.from.name(), .source.to.name())]
    Transition {
        /// The transaction.
        id: TransactionId,
        /// The refused edge.
        #[source]
        source: TransitionError,
    },
    /// The transaction already records a different artifact.
    #[error("transaction {id} already has artifact {existing}, refusing {requested}")]
    ArtifactConflict {
        /// The transaction.
        id: TransactionId,
        /// The artifact on record.
        existing: BlobId,
        /// The artifact the caller tried to set.
        requested: BlobId,
    },
}

impl StoreError {
    pub(crate) fn host(op: &'static str) -> impl FnOnce(HostError) -> StoreError {
        move |source| StoreError::Host { op, source }
    }
}
