//! [`CommitError`], [`Conflict`] and [`ConflictReason`]: why a commit refused
//! or failed, and which live paths no longer match what the transaction saw.

use vsh_host::HostError;
use vsh_store::StoreError;
use vsh_types::{NodeKind, TransactionId, VPath};

use crate::fault::FaultPoint;
use crate::ledger::LedgerError;
use crate::recover::RecoveryConflict;

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

impl std::fmt::Display for ConflictReason {
    /// What changed, for whoever must decide what to do about it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = |kind: Option<NodeKind>| kind.map_or("nothing", NodeKind::name);
        match self {
            Self::Kind { expected, actual } => write!(f, "was {}, is {}", kind(*expected), kind(*actual)),
            Self::Metadata => f.write_str("size or mode changed since the run looked at it"),
            Self::Content => f.write_str("content changed since the run read it"),
            // Only the names' digest is kept: which name it was is not known.
            Self::Listing => f.write_str(
                "the names in it changed: a file was created, removed or renamed there since the run listed it \
                 (an editor's save, which writes a new file and renames it over the old, is one)",
            ),
            Self::Precondition => f.write_str("no longer its state before the change"),
            Self::Unreadable => f.write_str("can no longer be reached or read"),
        }
    }
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
/// Unless the variant says otherwise, **nothing in the workspace was changed**
/// (vsh's own runtime directory aside) and the ledger records Stale or Failed.
/// [`CommitError::Apply`] and [`CommitError::Verification`] mean the
/// workspace changed part-way and was rolled back (the ledger holds Failed).
/// [`CommitError::Unresolved`] means it was rolled back except for paths
/// someone else changed meanwhile. [`CommitError::RecoveryRequired`] and
/// [`CommitError::FaultInjected`] mean the workspace may hold a partial state
/// until recovery runs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The runtime directory cannot be the workspace root.
    #[error("the runtime directory cannot be the workspace root")]
    RuntimeDirIsRoot,
    /// The workspace changed under the transaction; nothing was written.
    /// `conflicts` holds at most `max_conflicts` entries in path order;
    /// `total` counts every conflicting path.
    #[error(
        "workspace changed under the transaction: {total} conflicting path{}, first {}",
        if *total == 1 { "" } else { "s" },
        first_path(.conflicts)
    )]
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
    /// The diff changes a protected path (a secret, `.git`, vsh's data at any
    /// depth, a custom rule's path, or a nested vsh data directory); nothing
    /// was written.
    #[error("refusing to change protected path {path}: rule `{rule}` ({label})")]
    Protected {
        /// The path.
        path: VPath,
        /// The rule that protects it.
        rule: String,
        /// Why the rule exists.
        label: vsh_policy::RuleLabel,
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
    /// The ledger refused or failed a transition before the workspace was
    /// changed; nothing was written.
    #[error("the ledger refused to move {transaction} to {step}")]
    Ledger {
        /// The transaction.
        transaction: TransactionId,
        /// The state it was to move to, e.g. `"committing"`.
        step: &'static str,
        /// What the ledger reported.
        #[source]
        source: LedgerError,
    },
    /// A directory for this transaction already exists in the runtime
    /// directory (an earlier attempt that recovery could not finish).
    #[error("transaction {transaction} already has a commit directory")]
    TransactionDirExists {
        /// The transaction.
        transaction: TransactionId,
    },
    /// A host operation failed while applying. Everything applied was rolled
    /// back: the workspace holds the before state and the ledger Failed.
    #[error("applying failed at {path} after {applied} operations; rolled back")]
    Apply {
        /// The path being changed.
        path: VPath,
        /// How many operations had completed.
        applied: u64,
        /// What the host reported.
        #[source]
        source: HostError,
    },
    /// After applying, a path did not hold its expected final state. The
    /// transaction was rolled back: the workspace holds the before state and
    /// the ledger Failed.
    #[error("after applying, {path} did not hold its expected state; rolled back")]
    Verification {
        /// The path.
        path: VPath,
    },
    /// The commit stopped after the workspace began to change and could not
    /// be finished or rolled back in place; its journal is kept and
    /// [`crate::Committer::recover`] decides (forward if the completion marker
    /// is durable, back otherwise).
    #[error("commit of {transaction} was interrupted and needs recovery")]
    RecoveryRequired {
        /// The transaction.
        transaction: TransactionId,
        /// What stopped it.
        #[source]
        source: Box<CommitError>,
    },
    /// The commit stopped part-way because someone else changed paths it had
    /// already changed, and was rolled back in place except for those: each
    /// is left exactly as found (their bytes kept, the old node kept in the
    /// commit directory, `quarantine.<i>`), everything independent of them was
    /// undone. The ledger holds `RecoveryRequired` until an operator restores
    /// the transaction ([`crate::CommitSession::restore`]); other commits go on.
    #[error("commit of {transaction} was rolled back except for {} paths someone else changed meanwhile, first: {}", .paths.len(), first_left(.paths))]
    Unresolved {
        /// The transaction.
        transaction: TransactionId,
        /// What was left, and where each old node is kept.
        paths: Vec<crate::recover::LeftPath>,
        /// What stopped the commit.
        #[source]
        source: Box<CommitError>,
    },
    /// An operator's restore refused: the transaction is not one recovery
    /// left unresolved, or its evidence is incomplete. Nothing was changed.
    #[error("cannot restore {transaction}: {reason}")]
    Restore {
        /// The transaction.
        transaction: TransactionId,
        /// Why.
        reason: &'static str,
    },
    /// Earlier interrupted transactions could not be recovered; no commit runs
    /// until an operator resolves them.
    #[error("{} interrupted transactions need an operator, first: {}", .conflicts.len(), first_conflict(.conflicts))]
    RecoveryPending {
        /// What recovery could not decide.
        conflicts: Vec<RecoveryConflict>,
    },
    /// Another process held the workspace's commit lock (it is committing or
    /// recovering) for longer than the caller's [`vsh_host::LockWait`]
    /// allowed; nothing was done.
    #[error("another vsh process is committing or recovering this workspace; gave up after {waited_ms} ms")]
    LockTimeout {
        /// How long the call waited.
        waited_ms: u64,
    },
    /// A [`crate::FaultInjector`] stopped the commit here; the disk is as a
    /// crash at this point would leave it.
    #[error("fault injected at {0}")]
    FaultInjected(FaultPoint),
}

fn first_conflict(conflicts: &[RecoveryConflict]) -> String {
    conflicts.first().map_or_else(|| "(none listed)".to_owned(), ToString::to_string)
}

fn first_left(paths: &[crate::recover::LeftPath]) -> String {
    paths.first().map_or_else(|| "(none listed)".to_owned(), ToString::to_string)
}

fn first_path(conflicts: &[Conflict]) -> String {
    conflicts.first().map_or_else(
        || "(none listed)".to_owned(),
        |conflict| {
            if conflict.path.is_root() {
                "the workspace's root (a name in it came or went)".to_owned()
            } else {
                conflict.path.to_string()
            }
        },
    )
}

impl CommitError {
    /// Whether the workspace may hold a partial state of this attempt until
    /// recovery runs.
    pub fn workspace_may_be_changed(&self) -> bool {
        matches!(self, Self::RecoveryRequired { .. } | Self::Unresolved { .. } | Self::FaultInjected(_))
    }

    pub(crate) fn host(op: &'static str, path: &VPath) -> impl FnOnce(HostError) -> CommitError {
        let path = path.clone();
        move |source| CommitError::Host { op, path, source }
    }
}

#[cfg(test)]
mod tests {
    use vsh_host::HostKind;

    use super::*;
    use crate::recover::{LeftPath, RecoveryConflictReason};

    fn path(text: &str) -> vsh_types::VPath {
        vsh_types::VPath::parse(text).unwrap()
    }

    #[test]
    fn messages_name_the_first_path_or_say_none_is_listed() {
        let stale = CommitError::Stale {
            conflicts: vec![
                Conflict { path: path("src/a.rs"), reason: ConflictReason::Precondition },
                Conflict { path: path("src/b.rs"), reason: ConflictReason::Precondition },
            ],
            total: 7,
        };
        assert_eq!(stale.to_string(), "workspace changed under the transaction: 7 conflicting paths, first src/a.rs");
        let root = CommitError::Stale {
            conflicts: vec![Conflict { path: VPath::root(), reason: ConflictReason::Listing }],
            total: 1,
        };
        assert_eq!(
            root.to_string(),
            "workspace changed under the transaction: 1 conflicting path, first the workspace's root (a name in it \
             came or went)"
        );
        let none = CommitError::Stale { conflicts: Vec::new(), total: 0 };
        assert!(none.to_string().ends_with("first (none listed)"), "{none}");

        let transaction = TransactionId::from_bytes([0xab; 32]);
        let left = LeftPath {
            path: path("a.txt"),
            operation: 1,
            action: "install",
            reason: crate::LeftReason::Ambiguous,
            kept: None,
        };
        let unresolved = CommitError::Unresolved {
            transaction,
            paths: vec![left.clone()],
            source: Box::new(CommitError::FaultInjected(FaultPoint::Applied)),
        };
        let message = unresolved.to_string();
        assert!(
            message.ends_with(&format!("except for 1 paths someone else changed meanwhile, first: {left}")),
            "{message}"
        );
        assert!(message.contains("a.txt (install): changed by someone else during the commit"), "{message}");
        assert_eq!(crate::LeftReason::StateMismatch.name(), "does not hold its before state after the rollback");

        let conflict = RecoveryConflict {
            transaction: None,
            path: path(".vsh/txn"),
            reason: RecoveryConflictReason::UnexpectedEntry { kind: Some(HostKind::Symlink) },
        };
        let expected = format!("1 interrupted transactions need an operator, first: {conflict}");
        let pending = CommitError::RecoveryPending { conflicts: vec![conflict] };
        assert_eq!(pending.to_string(), expected);
        assert!(pending.to_string().contains(".vsh/txn: unexpected entry"), "{pending}");
        let empty = CommitError::RecoveryPending { conflicts: Vec::new() };
        assert!(empty.to_string().ends_with("first: (none listed)"), "{empty}");
    }
}
