//! The vsh facade: run agent programs against a virtual image of a workspace,
//! decide by policy, and commit approved changes exactly once.
//!
//! The facade owns no filesystem, policy or execution logic of its own: it
//! composes [`vsh_vfs`], [`vsh_monty`], [`vsh_policy`], [`vsh_store`] and
//! [`vsh_commit`]. The project README follows.
//!
#![doc = include_str!("../../../README.md")]
#![forbid(unsafe_code)]
// Unit tests build and inspect their fixtures by path.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod cancel;
mod candidate;
mod commit_path;
mod config;
pub mod document;
mod error;
mod evidence;
mod hook;
mod hook_gate;
mod losses;
mod previews;
mod receipt;
mod records;
mod request;
mod review;
mod run;
mod runtime;
mod unseen;

pub use cancel::ExecutionCancellation;
pub use candidate::{
    CandidateCheckpoint, CandidateLabel, CandidateStateWitness, CandidateWorkspace, DEFAULT_MAX_IMAGE_BYTES,
    SESSION_PROFILE, SeedFile, SeedNode, VerifierStage, VerifierTimeouts,
};
pub use config::{BashConfig, BashProfile, DEFAULT_SCRATCH, DurablePreviews, RuntimeConfig};
pub use error::{ErrorCategory, VshError};
pub use evidence::EvidenceError;
pub use hook::{
    CommitHook, CommitPreparation, CommitResolution, HookConfig, HookDecision, HookDecisionRecord, HookId, HookScope,
    HookedRuntime, RequestEvent, ReviewContent,
};
pub use receipt::{
    BashResult, CommandGrants, CommitReceipt, ExecutionOutput, Receipt, RunPolicy, SessionStep, StageTimings, StepKind,
    StoredProgram, Warning,
};
pub use request::{Language, ReceiptDetail, RunMode, RunRequest};
pub use runtime::{FoundStale, RERUNS_SCANNED, Runtime, STALE_CHECKS_PER_LISTING, WorkDoneSoFar};

pub use vsh_commit::{KeptNode, LeftPath, RecoveryConflict, RecoveryReport, RestoreReport, Unresolved};
pub use vsh_host::LockWait;
pub use vsh_monty::{ExecutionBudget, ExecutionLimits, ExecutionStats, MontyObject, ResultCompatibility, WorkerConfig};
pub use vsh_policy::{
    AccessKind, DeniedAccess, DenyManifest, DenyReason, MAX_LISTED_DENIALS, PolicyProfile, RiskFlag, RiskManifest,
    RiskMetrics, RuleLabel,
};
pub use vsh_store::{AuthorityKeyFile, GcReport, RetentionConfig, ScratchReport, TransactionRecord};
pub use vsh_types::{
    AuthorityKey, BindingDigests, BlobId, CanonicalDiff, DiffDigest, DiffEntry, DiffKind, NodeKind, NodeState,
    PrincipalId, SnapshotId, TransactionBinding, TransactionId, TransactionState, VPath,
};
pub use vsh_vfs::{FileReview, NoHunks, ReviewLimits, SnapshotLimits};

/// The policy decision of a run.
pub type RuntimeDecision = vsh_policy::Decision;

/// The lower-level crates, for configuring the facade or processing receipts.
pub mod lower {
    pub use vsh_commit;
    pub use vsh_host;
    pub use vsh_monty;
    pub use vsh_policy;
    pub use vsh_sandbox;
    pub use vsh_store;
    pub use vsh_tools;
    pub use vsh_types;
    pub use vsh_vfs;
}

/// The vsh version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The fewest hex digits of a transaction id that [`Runtime::resolve`] accepts as a prefix.
pub const MIN_ID_PREFIX: usize = 6;

/// The most paths a refused revert ([`VshError::RevertChanged`]) lists:
/// its `total` counts them all.
pub const MAX_LISTED_REVERT_PATHS: usize = 100;

/// The most candidates [`VshError::AmbiguousTransaction`] lists.
pub const MAX_LISTED_CANDIDATES: usize = 10;

/// The engine behind this facade: always `"rust"`.
pub const fn engine_kind() -> &'static str {
    "rust"
}
