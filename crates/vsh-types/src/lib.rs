//! Values shared by every vsh crate: workspace paths, domain-separated digests,
//! node states, diff entries and the transaction state machine.
//!
//! This crate owns no I/O and depends on no other vsh crate. Everything here is a
//! plain value with a documented canonical encoding (see [`canon`]), so two hosts
//! that agree on the values agree on every digest derived from them.
// Unit tests build and inspect their fixtures by path.
#![cfg_attr(test, allow(clippy::disallowed_methods))]
#![forbid(unsafe_code)]

mod authority;
mod binding;
pub mod canon;
mod diff;
mod digest;
pub mod fsproto;
pub mod hex;
mod layout;
mod node;
mod path;
mod readset;
pub mod space;
mod state;

pub use authority::{AuthorityKey, Mac, MacKey};
pub use binding::{BindingDigests, BindingMismatch, CanonicalDiff, DiffOrderError, TransactionBinding};
pub use diff::{DiffEntry, DiffKind};
pub use digest::{
    BlobId, DiffDigest, DigestParseError, DomainHasher, ExecutionEvidenceDigest, IntentDigest, PolicyDigest,
    PrincipalId, ProgramDigest, ReadSetDigest, RuntimeConfigDigest, SnapshotId, TransactionId, WriteSetDigest,
};
pub use layout::{DataPlacement, RUNTIME_DIR_NAME, VshLayout};
pub use node::{FileStamp, MODE_MASK, NodeKind, NodeState};
pub use path::{VPath, VPathError};
pub use readset::{Dependency, ReadSet, names_digest};
pub use state::{TransactionState, TransitionError};
