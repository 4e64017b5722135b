//! The trusted data directory: content-addressed blobs with verified reads, a
//! durable transaction log changed only along the state table, approvals,
//! single-use commit reservations, pending-approval artifacts, and retention.
//!
//! - [`DataDir`] opens the data directory as a capability handle, inside the
//!   workspace (default `.vsh/data`, never through a symlink) or outside it.
//! - [`StoreBackend`] is the only I/O seam: [`CapDirBackend`] is the real one,
//!   [`FaultyBackend`] fails the Nth write, fsync or rename for tests.
//! - [`BlobStore`] stores bytes under their BLAKE3 id (`blobs/<2>/<62>`),
//!   written atomically and re-hashed on every read.
//! - [`TransactionStore`] keeps every [`TransactionRecord`] version in one
//!   append-only, checksummed log (`txlog`, format in [`txlog`]) under an
//!   in-process mutex and a cross-process `flock`: compare-and-transition,
//!   approvals ([`ApprovalGrant`]) with exclusive expiry, single-use
//!   [`CommitReservation`]s, compaction, and retention with blob garbage
//!   collection ([`TransactionStore::gc`]).
//! - [`PendingArtifact`] is what a pending transaction needs to be reviewed and
//!   committed later: versioned, checksummed, bounded before allocation, with
//!   its binding re-derived on decode.
//!
//! After any storage failure a store is fail-stop ([`StoreError::Poisoned`])
//! until it is reopened; reopening replays the durable state, which is the
//! state before or after the failed operation. `docs/store-format.md` draws
//! every on-disk record.
//!
//! # Limitations
//!
//! - **Appends can tear**: [`CapDirBackend`] appends each frame in place
//!   (`O_APPEND`, then `fsync`), so a crash can leave a partial frame at the
//!   tail, which replay truncates (see `docs/store-format.md`). The log is
//!   compacted at 8 MiB by default.
//! - Times are the caller's clock; a principal is an opaque digest whose
//!   authentication is the host's job.
//! - Garbage collection knows only the blobs that stored artifacts name; blobs
//!   of runs in flight must be passed in its keep-set (see [`TransactionStore::gc`]).
// Unit tests build and inspect their fixtures by path.
#![cfg_attr(test, allow(clippy::disallowed_methods))]
#![forbid(unsafe_code)]

mod artifact;
mod authority;
mod backend;
pub mod blob;
mod datadir;
mod error;
mod faulty;
mod gc;
mod history;
mod index;
mod kept;
mod legacy;
mod principals;
mod record;
mod rejections;
mod scratch;
mod seen;
mod tempname;
pub mod txlog;
mod txn;

pub use artifact::{
    ARTIFACT_MAGIC, ARTIFACT_MAGIC_V1, ARTIFACT_MAGIC_V2, ArtifactError, ArtifactLimits, InlineContents,
    PendingArtifact,
};
pub use authority::{AUTHORITY_KEY_ENV, AuthorityKeyFile};
pub use backend::{BackendError, BackendLock, CapDirBackend, Ends, FaultKind, FileMeta, StoreBackend};
pub use blob::{BlobStatus, BlobStore, PutOutcome, REFRESH_AFTER_MS};
pub use datadir::{DataDir, SCRATCH};
pub use error::StoreError;
pub use faulty::{FaultCounts, FaultPlan, FaultyBackend};
pub use gc::{BlobSweep, GcReport, RetentionConfig};
pub use history::{LOSS_HISTORY_FILE, LossHistory, MAX_LOSS_ENTRIES, MAX_LOSS_HISTORY_BYTES, UnreviewedLoss};
pub use kept::{MAX_UNREAD_CONTENTS_BYTES, MAX_UNREAD_ENTRIES, UNREAD_CONTENTS_FILE, UnreadContents};
pub use principals::{
    MAX_PRINCIPAL_NAME_BYTES, MAX_PRINCIPAL_NAMES, MAX_PRINCIPAL_NAMES_BYTES, PRINCIPAL_NAMES_FILE, PrincipalNames,
};
pub use record::{ApprovalGrant, CommitReservation, TransactionRecord};
pub use rejections::{
    MAX_REJECTION_SCOPES, MAX_REJECTION_SCOPES_BYTES, REJECTION_SCOPES_FILE, RejectionScope, RejectionScopes,
};
pub use scratch::{Regranted, ScratchLock, ScratchReport};
pub use seen::{MAX_SEEN_CONTENTS_BYTES, MAX_SEEN_ENTRIES, SEEN_CONTENTS_FILE, SeenContents, Sighting};
pub use txn::{
    CommitOutcome, CommitStep, EXPIRE_BATCH, LogStats, RecordVersion, Salvaged, TransactionStore, TxStoreConfig,
};
