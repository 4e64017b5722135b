//! [`CommitError`], [`Conflict`] and [`ConflictReason`]: why a commit refused
//! or failed, and which live paths no longer match what the transaction saw.

use vsh_host::HostError;
use vsh_store::StoreError;
use vsh_types::{NodeKind, VPath};

/// Why a live path no longer satisfies what the transaction depended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictReason {
    /// Existence or kind changed (`None` means absent).
    Kind {
        /// The kind the transaction saw.
        expected: Option<NodeKind>,
        /// The kind the workspace holds now.
        actual: Option<NodeKind>,
    },
    /// Size or permission bits changed.
    Metadata,
    /// The bytes of a file, or the target of a symlink, changed.
    Content,
    /// The set of names in a listed directory changed.
    Listing,
    /// A changed path's live state differs from the before state in the diff.
    Precondition,
    /// The path can no longer be reached or read as it was: a symlink or a
    /// non-directory now sits in its path, it became a special file, or it
    /// cannot be read.
    Unreadable,
}

/// One conflicting path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The path, relative to the workspace.
    pub path: VPath,
    /// What no longer holds.
    pub reason: ConflictReason,
}

/// Why a commit did not happen, or did not finish.
///
/// Every variant except [`CommitError::Apply`] and
/// [`CommitError::Verification`] means **nothing in the workspace was changed**
/// (vsh's own runtime directory aside). `Apply` and `Verification` mean the
/// workspace may hold a partial state of the transaction (see the crate docs).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The runtime directory cannot be the workspace root.
    #[error("the runtime directory cannot be the workspace root")]
    RuntimeDirIsRoot,
    /// The workspace changed under the transaction; nothing was written.
    /// `conflicts` holds at most `max_conflicts` entries in path order;
    /// `total` counts every conflicting path.
    #[error("workspace changed under the transaction: {total} conflicting paths, first {}", first_path(.conflicts))]
    Stale {
        /// The first conflicts, in path order.
        conflicts: Vec<Conflict>,
        /// How many paths conflict in all.
        total: usize,
    },
    /// The diff is malformed; nothing was written.
    #[error("invalid diff at {path}: {reason}")]
    InvalidDiff {
        /// The offending entry's path.
        path: VPath,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A mode change would apply to a file with other hard links, changing an
    /// alias the transaction never saw; nothing was written.
    #[error("refusing to change the mode of {path}: it has {links} hard links")]
    HardLinked {
        /// The file.
        path: VPath,
        /// Its link count.
        links: u64,
    },
    /// Reading new content from the blob store failed; nothing was written.
    #[error("cannot read the new content of {path} from the blob store")]
    Blob {
        /// The path whose content was being staged.
        path: VPath,
        /// What the store reported (boxed: it is large and rare).
        #[source]
        source: Box<StoreError>,
    },
    /// A host operation failed before anything in the workspace was changed.
    #[error("{op} failed at {path}")]
    Host {
        /// The step, e.g. `"lock"`, `"revalidate"`, `"stage"`.
        op: &'static str,
        /// The path being worked on.
        path: VPath,
        /// What the host reported.
        #[source]
        source: HostError,
    },
    /// A host operation failed while applying: the workspace may hold a
    /// partial state of the transaction.
    #[error("applying failed at {path} after {applied} operations; the workspace may be partially changed")]
    Apply {
        /// The path being changed.
        path: VPath,
        /// How many operations had completed.
        applied: u64,
        /// What the host reported.
        #[source]
        source: HostError,
    },
    /// After applying, a path does not hold its expected final state.
    #[error("after applying, {path} does not hold its expected state")]
    Verification {
        /// The path.
        path: VPath,
    },
}

fn first_path(conflicts: &[Conflict]) -> String {
    conflicts.first().map_or_else(|| "(none listed)".to_owned(), |conflict| conflict.path.to_string())
}

impl CommitError {
    /// Whether the workspace may have been changed (partially) by this attempt.
    pub fn workspace_may_be_changed(&self) -> bool {
        matches!(self, Self::Apply { .. } | Self::Verification { .. })
    }

    pub(crate) fn host(op: &'static str, path: &VPath) -> impl FnOnce(HostError) -> CommitError {
        let path = path.clone();
        move |source| CommitError::Host { op, path, source }
    }
}
