//! The trusted data directory: content-addressed blobs with verified reads and
//! durable transaction records changed only by compare-and-transition.
//!
//! - [`DataDir`] opens the data directory as a capability handle, inside the
//!   workspace (default `.vsh/data`, never through a symlink) or outside it.
//! - [`BlobStore`] stores bytes under their BLAKE3 id (`blobs/<2>/<62>`),
//!   written atomically and re-hashed on every read.
//! - [`TransactionStore`] keeps one checksummed [`TransactionRecord`] per
//!   transaction (`txns/<64 hex>`), replaced atomically under an in-process
//!   mutex and a cross-process `flock`.
//!
//! # Limitations
//!
//! This is the first part of the store. There is no deletion, retention or
//! garbage collection of blobs or records; records are one file each rather
//! than a log with compaction; approvals, reservations and pending-approval
//! artifacts are not modelled yet; and there is no fault-injection backend
//! (the transaction store's I/O is confined to one private type so one can be
//! slotted in).

#![forbid(unsafe_code)]

mod blob;
mod datadir;
mod error;
mod record;
mod tempname;
mod txn;

pub use blob::{BlobStore, PutOutcome};
pub use datadir::DataDir;
pub use error::StoreError;
pub use record::{MAX_RECORD_BYTES, RECORD_MAGIC, TransactionRecord};
pub use txn::TransactionStore;
