//! The outcome of evaluating a transaction: [`Decision`], with the metrics,
//! risk flags and deny reasons that explain it.

use std::fmt;

use serde::{Deserialize, Serialize};
use vsh_types::canon::{self, Canonical};
use vsh_types::{DiffEntry, DiffKind, NodeKind, NodeState, PolicyDigest};

use crate::profile::MAX_RATIO_BPS;
use crate::rules::DeniedAccess;

/// The most denials a [`DenyManifest`] lists; `denied_total` counts them all.
pub const MAX_LISTED_DENIALS: usize = 64;

/// The permission bits that make a file executable.
const EXECUTE_BITS: u32 = 0o111;

/// Measurements of a diff, reported with every decision.
///
/// `touched = created + modified + deleted + mode_changes`: every diff entry is
/// exactly one of those kinds.
///
/// Canonical encoding: every field in declaration order, `u64` except
/// `delete_ratio_bps` (`u32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct RiskMetrics {
    /// Diff entries (changed paths, a deleted subtree counting every path in it).
    pub touched: u64,
    /// Created paths.
    pub created: u64,
    /// Paths whose content or kind changed.
    pub modified: u64,
    /// Deleted paths.
    pub deleted: u64,
    /// Renames the program performed (from the effect ledger).
    pub renamed: u64,
    /// Sum of the before and after sizes of every entry but mode-only changes.
    pub changed_bytes: u64,
    /// Deleted paths per 10,000 observed base nodes, at most 10,000; 0 when no
    /// base node was observed.
    pub delete_ratio_bps: u32,
    /// Files whose execute bits changed, or created with an execute bit set.
    pub executable_changes: u64,
    /// Entries with a symlink before or after.
    pub symlink_changes: u64,
    /// Entries whose only change is the permission bits.
    pub mode_changes: u64,
}

impl RiskMetrics {
    /// Measure `diff`, given the rename count and the number of observed base
    /// nodes (the delete ratio's denominator).
    pub fn measure(diff: &[DiffEntry], renamed: u64, observed_base_nodes: u64) -> Self {
        let mut metrics = Self { renamed, ..Self::default() };
        for entry in diff {
            metrics.touched += 1;
            match entry.kind {
                DiffKind::Create => metrics.created += 1,
                DiffKind::Delete => metrics.deleted += 1,
                DiffKind::Modify => metrics.modified += 1,
                DiffKind::MetadataChange => metrics.mode_changes += 1,
            }
            if entry.kind != DiffKind::MetadataChange {
                let sizes = size_of(entry.before.as_ref()).saturating_add(size_of(entry.after.as_ref()));
                metrics.changed_bytes = metrics.changed_bytes.saturating_add(sizes);
            }
            if is_executable_change(entry) {
                metrics.executable_changes += 1;
            }
            let is_symlink = |state: Option<&NodeState>| state.is_some_and(|state| state.kind == NodeKind::Symlink);
            if is_symlink(entry.before.as_ref()) || is_symlink(entry.after.as_ref()) {
                metrics.symlink_changes += 1;
            }
        }
        if observed_base_nodes > 0 {
            let ratio = u128::from(metrics.deleted) * u128::from(MAX_RATIO_BPS) / u128::from(observed_base_nodes);
            metrics.delete_ratio_bps = u32::try_from(ratio.min(u128::from(MAX_RATIO_BPS))).unwrap_or(MAX_RATIO_BPS);
        }
        metrics
    }
}

fn size_of(state: Option<&NodeState>) -> u64 {
    state.map_or(0, |state| state.size)
}

/// A file whose execute bits differ from before, or that became a file with an
/// execute bit set (created, or replacing a directory or symlink). Directories'
/// search bits and symlinks' fixed mode are not executables.
fn is_executable_change(entry: &DiffEntry) -> bool {
    let Some(after) = entry.after.as_ref().filter(|after| after.kind == NodeKind::File) else {
        return false;
    };
    match entry.before.as_ref().filter(|before| before.kind == NodeKind::File) {
        Some(before) => (before.mode ^ after.mode) & EXECUTE_BITS != 0,
        None => after.mode & EXECUTE_BITS != 0,
    }
}

impl Canonical for RiskMetrics {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.touched);
        canon::put_u64(out, self.created);
        canon::put_u64(out, self.modified);
        canon::put_u64(out, self.deleted);
        canon::put_u64(out, self.renamed);
        canon::put_u64(out, self.changed_bytes);
        canon::put_u32(out, self.delete_ratio_bps);
        canon::put_u64(out, self.executable_changes);
        canon::put_u64(out, self.symlink_changes);
        canon::put_u64(out, self.mode_changes);
    }
}

/// Why a diff needs a reviewer. Manifests list flags sorted and without
/// duplicates, in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RiskFlag {
    /// The profile escalates every mutation (Strict, Paranoid).
    Mutation,
    /// The diff deletes a path.
    Deletion,
    /// The program renamed a path.
    Rename,
    /// A file's execute bits changed, or a file was created executable.
    ExecutableChange,
    /// A symlink was created, deleted or changed.
    SymlinkChange,
    /// The diff touches at least the escalation number of paths.
    LargeTouchedSet,
    /// The diff changes at least the escalation number of bytes.
    LargeByteChange,
    /// A path's permission bits changed.
    PermissionChange,
}

impl RiskFlag {
    /// The canonical tag: `Mutation`=1 through `PermissionChange`=8.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Mutation => 1,
            Self::Deletion => 2,
            Self::Rename => 3,
            Self::ExecutableChange => 4,
            Self::SymlinkChange => 5,
            Self::LargeTouchedSet => 6,
            Self::LargeByteChange => 7,
            Self::PermissionChange => 8,
        }
    }

    /// A lower-case, hyphenated name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Mutation => "mutation",
            Self::Deletion => "deletion",
            Self::Rename => "rename",
            Self::ExecutableChange => "executable-change",
            Self::SymlinkChange => "symlink-change",
            Self::LargeTouchedSet => "large-touched-set",
            Self::LargeByteChange => "large-byte-change",
            Self::PermissionChange => "permission-change",
        }
    }
}

impl fmt::Display for RiskFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a transaction was denied. A denial is final: no reviewer can approve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DenyReason {
    /// The program tried a protected access (even if it caught the error).
    ProtectedAccessAttempt,
    /// The diff changes a protected path.
    ProtectedMutation,
    /// The diff touches more paths than the denial threshold.
    TooManyTouchedPaths,
    /// The diff changes more bytes than the denial threshold.
    TooManyChangedBytes,
    /// The diff deletes more paths than the denial threshold.
    TooManyDeletions,
    /// The diff deletes too large a share of the observed base.
    DeleteRatio,
}

impl DenyReason {
    /// The canonical tag: `ProtectedAccessAttempt`=1 through `DeleteRatio`=6.
    pub const fn tag(self) -> u8 {
        match self {
            Self::ProtectedAccessAttempt => 1,
            Self::ProtectedMutation => 2,
            Self::TooManyTouchedPaths => 3,
            Self::TooManyChangedBytes => 4,
            Self::TooManyDeletions => 5,
            Self::DeleteRatio => 6,
        }
    }

    /// A lower-case, hyphenated name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ProtectedAccessAttempt => "protected-access-attempt",
            Self::ProtectedMutation => "protected-mutation",
            Self::TooManyTouchedPaths => "too-many-touched-paths",
            Self::TooManyChangedBytes => "too-many-changed-bytes",
            Self::TooManyDeletions => "too-many-deletions",
            Self::DeleteRatio => "delete-ratio",
        }
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a reviewer sees for a transaction that needs approval.
///
/// Canonical encoding: metrics, a `u64` flag count and each flag's tag, the
/// policy digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RiskManifest {
    /// Measurements of the diff.
    pub metrics: RiskMetrics,
    /// Why it needs a reviewer (sorted, no duplicates, never empty).
    pub flags: Vec<RiskFlag>,
    /// The policy that decided.
    pub policy: PolicyDigest,
}

impl Canonical for RiskManifest {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        self.metrics.encode_canonical(out);
        canon::put_u64(out, self.flags.len() as u64);
        for flag in &self.flags {
            canon::put_u8(out, flag.tag());
        }
        self.policy.encode_canonical(out);
    }
}

/// Why a transaction was denied, with the evidence.
///
/// Canonical encoding: reason tag, the listed denials as a sequence, the total,
/// metrics, policy digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DenyManifest {
    /// The first rule of the decision order that failed.
    pub reason: DenyReason,
    /// The first [`MAX_LISTED_DENIALS`] protected accesses or mutations (empty
    /// for the ceiling reasons).
    pub denied: Vec<DeniedAccess>,
    /// How many there were in all.
    pub denied_total: u64,
    /// Measurements of the diff.
    pub metrics: RiskMetrics,
    /// The policy that decided.
    pub policy: PolicyDigest,
}

impl Canonical for DenyManifest {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u8(out, self.reason.tag());
        canon::put_seq(out, self.denied.iter());
        canon::put_u64(out, self.denied_total);
        self.metrics.encode_canonical(out);
        self.policy.encode_canonical(out);
    }
}

/// The policy's verdict on a transaction.
///
/// Canonical encoding: tag `1` and the deny manifest, tag `2`, or tag `3` and
/// the risk manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Decision {
    /// Refused; final.
    Denied(DenyManifest),
    /// Small and non-destructive: may be committed without a reviewer.
    AutoApproved,
    /// Needs a reviewer's approval.
    PendingApproval(RiskManifest),
}

impl Decision {
    /// `denied`, `auto-approved` or `pending-approval`.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Denied(_) => "denied",
            Self::AutoApproved => "auto-approved",
            Self::PendingApproval(_) => "pending-approval",
        }
    }

    /// Whether the transaction was denied.
    pub const fn is_denied(&self) -> bool {
        matches!(self, Self::Denied(_))
    }

    /// Whether the transaction may be committed without a reviewer.
    pub const fn is_auto_approved(&self) -> bool {
        matches!(self, Self::AutoApproved)
    }

    /// Whether the transaction waits for a reviewer.
    pub const fn is_pending_approval(&self) -> bool {
        matches!(self, Self::PendingApproval(_))
    }
}

impl Canonical for Decision {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        match self {
            Self::Denied(manifest) => {
                canon::put_u8(out, 1);
                manifest.encode_canonical(out);
            }
            Self::AutoApproved => canon::put_u8(out, 2),
            Self::PendingApproval(manifest) => {
                canon::put_u8(out, 3);
                manifest.encode_canonical(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use vsh_types::VPath;

    use super::*;

    fn entry(path: &str, before: Option<NodeState>, after: Option<NodeState>) -> DiffEntry {
        DiffEntry::between(VPath::parse(path).unwrap(), before, after).unwrap()
    }

    #[test]
    fn measure_counts_each_kind_and_bytes() {
        let old = NodeState::file_with(b"hello", 0o644);
        let new = NodeState::file_with(b"hello world", 0o644);
        let diff = vec![
            entry("a", None, Some(new)),
            entry("b", Some(old), None),
            entry("c", Some(old), Some(new)),
            entry("d", Some(old), Some(NodeState::file_with(b"hello", 0o600))),
            entry("e", None, Some(NodeState::directory(0o755))),
        ];
        let metrics = RiskMetrics::measure(&diff, 2, 10);
        assert_eq!(
            metrics,
            RiskMetrics {
                touched: 5,
                created: 2,
                modified: 1,
                deleted: 1,
                renamed: 2,
                changed_bytes: 11 + 5 + (5 + 11),
                delete_ratio_bps: 1_000,
                executable_changes: 0,
                symlink_changes: 0,
                mode_changes: 1,
            }
        );
    }

    #[test]
    fn executable_and_symlink_changes() {
        let plain = NodeState::file_with(b"x", 0o644);
        let exec = NodeState::file_with(b"x", 0o755);
        let exec_other = NodeState::file_with(b"y", 0o711);
        let link = NodeState::symlink(b"target");
        let cases = [
            (entry("created-exec", None, Some(exec)), true),
            (entry("created-plain", None, Some(plain)), false),
            (entry("chmod-plus-x", Some(plain), Some(exec)), true),
            (entry("chmod-minus-x", Some(exec), Some(plain)), true),
            (entry("same-bits", Some(exec), Some(exec_other)), false),
            (entry("dir-created", None, Some(NodeState::directory(0o755))), false),
            (entry("dir-to-exec-file", Some(NodeState::directory(0o755)), Some(exec)), true),
            (entry("deleted-exec", Some(exec), None), false),
            (entry("link-created", None, Some(link)), false),
        ];
        for (diff_entry, expected) in cases {
            let metrics = RiskMetrics::measure(std::slice::from_ref(&diff_entry), 0, 0);
            assert_eq!(metrics.executable_changes, u64::from(expected), "{}", diff_entry.path);
        }
        let links =
            [entry("l1", None, Some(link)), entry("l2", Some(link), None), entry("l3", Some(plain), Some(link))];
        assert_eq!(RiskMetrics::measure(&links, 0, 0).symlink_changes, 3);
    }

    #[test]
    fn delete_ratio_is_capped_and_needs_a_base() {
        let file = NodeState::file_with(b"x", 0o644);
        let deletes: Vec<DiffEntry> = (0..4).map(|index| entry(&format!("f{index}"), Some(file), None)).collect();
        assert_eq!(RiskMetrics::measure(&deletes, 0, 0).delete_ratio_bps, 0);
        assert_eq!(RiskMetrics::measure(&deletes, 0, 8).delete_ratio_bps, 5_000);
        assert_eq!(RiskMetrics::measure(&deletes, 0, 3).delete_ratio_bps, 10_000);
        assert_eq!(RiskMetrics::measure(&deletes, 0, u64::MAX).delete_ratio_bps, 0);
    }

    #[test]
    fn names_tags_and_canonical_forms() {
        let flags = [
            RiskFlag::Mutation,
            RiskFlag::Deletion,
            RiskFlag::Rename,
            RiskFlag::ExecutableChange,
            RiskFlag::SymlinkChange,
            RiskFlag::LargeTouchedSet,
            RiskFlag::LargeByteChange,
            RiskFlag::PermissionChange,
        ];
        for (index, flag) in flags.iter().enumerate() {
            assert_eq!(usize::from(flag.tag()), index + 1);
        }
        assert!(flags.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(RiskFlag::ExecutableChange.to_string(), "executable-change");
        assert_eq!(DenyReason::DeleteRatio.to_string(), "delete-ratio");
        assert_eq!(DenyReason::ProtectedAccessAttempt.tag(), 1);
        let policy = PolicyDigest::digest(b"p");
        let pending = Decision::PendingApproval(RiskManifest {
            metrics: RiskMetrics::default(),
            flags: vec![RiskFlag::Deletion],
            policy,
        });
        let denied = Decision::Denied(DenyManifest {
            reason: DenyReason::TooManyDeletions,
            denied: Vec::new(),
            denied_total: 0,
            metrics: RiskMetrics::default(),
            policy,
        });
        let encodings = [&pending, &denied, &Decision::AutoApproved].map(Canonical::to_canonical_bytes);
        assert_ne!(encodings[0], encodings[1]);
        assert_eq!(encodings[2], vec![2]);
        assert_eq!(pending.name(), "pending-approval");
        assert!(pending.is_pending_approval() && denied.is_denied() && Decision::AutoApproved.is_auto_approved());
    }
}
