//! [`CanonicalDiff`] and [`TransactionBinding`]: the two values a transaction
//! id is made of, each with one checked constructor and one digest formula.
//!
//! A canonical diff is a list of [`DiffEntry`] in strictly increasing path
//! order, never touching the root. Its digest is `DiffDigest` over the
//! canonical sequence (the count, then each entry); its write-set digest is
//! `WriteSetDigest` over the count, then each entry's path and optional before
//! state. [`CanonicalDiff::check_order`] is the only place the order rule is
//! written; every decoder of stored entries calls it.
//!
//! A binding is every digest a run produced (snapshot, program, intent, read
//! set, write set, diff, policy, runtime configuration, evidence) and the
//! transaction id derived from them by [`BindingDigests::derive_id`]. Stored
//! bytes become a binding only through [`TransactionBinding::verify`], so a
//! binding in memory always agrees with its id.

use crate::canon::{self, Canonical};
use crate::diff::DiffEntry;
use crate::digest::{
    BlobId, DiffDigest, ExecutionEvidenceDigest, IntentDigest, PolicyDigest, ProgramDigest, ReadSetDigest,
    RuntimeConfigDigest, SnapshotId, TransactionId, WriteSetDigest,
};
use crate::path::VPath;

/// Why entries are not a canonical diff.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiffOrderError {
    /// An entry names the workspace root, which never changes.
    #[error("the workspace root cannot be a diff entry")]
    Root,
    /// An entry's path is not strictly after the previous entry's.
    #[error("diff entry {path} is not strictly after the entry before it")]
    OutOfOrder {
        /// The entry out of place.
        path: VPath,
    },
}

/// Diff entries sorted strictly by path, none of them the root, with their
/// digest computed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalDiff {
    entries: Vec<DiffEntry>,
    digest: DiffDigest,
}

impl CanonicalDiff {
    /// The order rule: strictly increasing paths, and no entry for the root.
    pub fn check_order(entries: &[DiffEntry]) -> Result<(), DiffOrderError> {
        if entries.first().is_some_and(|entry| entry.path.is_root()) {
            return Err(DiffOrderError::Root);
        }
        match entries.windows(2).find(|pair| pair[0].path >= pair[1].path) {
            Some(pair) => Err(DiffOrderError::OutOfOrder { path: pair[1].path.clone() }),
            None => Ok(()),
        }
    }

    /// Check `entries` against [`CanonicalDiff::check_order`] and compute the digest.
    pub fn new(entries: Vec<DiffEntry>) -> Result<Self, DiffOrderError> {
        Self::check_order(&entries)?;
        let digest = diff_digest(&entries);
        Ok(Self { entries, digest })
    }

    /// The entries, sorted by path.
    pub fn entries(&self) -> &[DiffEntry] {
        &self.entries
    }

    /// The entries, by value.
    pub fn into_entries(self) -> Vec<DiffEntry> {
        self.entries
    }

    /// How many paths change.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The digest of the canonical encoding (count, then each entry).
    pub fn digest(&self) -> DiffDigest {
        self.digest
    }

    /// The write set's digest: the preconditions (path and before state) of
    /// every changed path.
    pub fn write_set_digest(&self) -> WriteSetDigest {
        let mut out = Vec::new();
        canon::put_u64(&mut out, self.entries.len() as u64);
        for entry in &self.entries {
            entry.path.encode_canonical(&mut out);
            canon::put_option(&mut out, entry.before.as_ref());
        }
        WriteSetDigest::digest(&out)
    }

    /// The blobs the after states need (file contents and symlink targets).
    pub fn content_blobs(&self) -> impl Iterator<Item = BlobId> + '_ {
        self.entries.iter().filter_map(|entry| entry.after.and_then(|state| state.content))
    }

    /// The canonical encoding's length, without encoding.
    pub fn encoded_len(&self) -> usize {
        8 + self.entries.iter().map(|entry| entry.to_canonical_bytes().len()).sum::<usize>()
    }
}

impl Default for CanonicalDiff {
    /// The empty diff.
    fn default() -> Self {
        Self { entries: Vec::new(), digest: diff_digest(&[]) }
    }
}

impl Canonical for CanonicalDiff {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_seq(out, self.entries.iter());
    }
}

fn diff_digest(entries: &[DiffEntry]) -> DiffDigest {
    let mut out = Vec::new();
    canon::put_seq(&mut out, entries.iter());
    DiffDigest::digest(&out)
}

/// Every digest a transaction id is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BindingDigests {
    /// The observed base.
    pub snapshot: SnapshotId,
    /// The program.
    pub program: ProgramDigest,
    /// The intent text (`IntentDigest::digest` of its UTF-8 bytes).
    pub intent: IntentDigest,
    /// The read set.
    pub read_set: ReadSetDigest,
    /// The write set ([`CanonicalDiff::write_set_digest`]).
    pub write_set: WriteSetDigest,
    /// The diff ([`CanonicalDiff::digest`]).
    pub diff: DiffDigest,
    /// The policy in force.
    pub policy: PolicyDigest,
    /// The security-relevant runtime configuration.
    pub runtime_config: RuntimeConfigDigest,
    /// The execution evidence (`ExecutionEvidenceDigest::digest` of its bytes).
    pub evidence: ExecutionEvidenceDigest,
}

impl BindingDigests {
    /// The transaction id: `TransactionId` over the program, intent, snapshot,
    /// read set, write set, diff, policy, runtime configuration and evidence
    /// digests, in that order.
    pub fn derive_id(&self) -> TransactionId {
        let mut hasher = TransactionId::hasher();
        hasher
            .update_canonical(&self.program)
            .update_canonical(&self.intent)
            .update_canonical(&self.snapshot)
            .update_canonical(&self.read_set)
            .update_canonical(&self.write_set)
            .update_canonical(&self.diff)
            .update_canonical(&self.policy)
            .update_canonical(&self.runtime_config)
            .update_canonical(&self.evidence);
        TransactionId::from_hasher(&hasher)
    }
}

/// A stored transaction id does not derive from the digests beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("transaction id {claimed} does not derive from its binding")]
pub struct BindingMismatch {
    /// The id the bytes claimed.
    pub claimed: TransactionId,
}

/// A transaction id with the digests it was derived from. Constructed only by
/// deriving the id ([`TransactionBinding::new`]) or by checking a claimed one
/// ([`TransactionBinding::verify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransactionBinding {
    transaction: TransactionId,
    digests: BindingDigests,
}

impl TransactionBinding {
    /// Derive the id of `digests`.
    pub fn new(digests: BindingDigests) -> Self {
        Self { transaction: digests.derive_id(), digests }
    }

    /// Accept `claimed` only if it derives from `digests` (for stored bytes).
    pub fn verify(claimed: TransactionId, digests: BindingDigests) -> Result<Self, BindingMismatch> {
        let binding = Self::new(digests);
        if binding.transaction == claimed { Ok(binding) } else { Err(BindingMismatch { claimed }) }
    }

    /// The transaction id.
    pub fn transaction(&self) -> TransactionId {
        self.transaction
    }

    /// The digests the id derives from.
    pub fn digests(&self) -> &BindingDigests {
        &self.digests
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeState;

    fn path(text: &str) -> VPath {
        VPath::parse(text).unwrap()
    }

    fn create(text: &str) -> DiffEntry {
        DiffEntry::between(path(text), None, Some(NodeState::file_with(b"x", 0o644))).unwrap()
    }

    #[test]
    fn the_order_rule_refuses_the_root_duplicates_and_disorder() {
        let root =
            DiffEntry::between(VPath::root(), Some(NodeState::directory(0o755)), Some(NodeState::directory(0o700)))
                .unwrap();
        assert_eq!(CanonicalDiff::new(vec![root, create("a")]), Err(DiffOrderError::Root));
        assert_eq!(
            CanonicalDiff::new(vec![create("b"), create("a")]),
            Err(DiffOrderError::OutOfOrder { path: path("a") })
        );
        assert_eq!(
            CanonicalDiff::new(vec![create("a"), create("a")]),
            Err(DiffOrderError::OutOfOrder { path: path("a") })
        );
        assert_eq!(
            CanonicalDiff::new(vec![create("a"), create("c"), create("b")]),
            Err(DiffOrderError::OutOfOrder { path: path("b") })
        );
        let diff = CanonicalDiff::new(vec![create("a"), create("a/b"), create("b")]).unwrap();
        assert_eq!(diff.len(), 3);
        assert!(CanonicalDiff::default().is_empty());
    }

    #[test]
    fn digests_follow_the_documented_formulas() {
        let diff = CanonicalDiff::new(vec![create("a")]).unwrap();
        let mut out = Vec::new();
        canon::put_u64(&mut out, 1);
        diff.entries()[0].encode_canonical(&mut out);
        assert_eq!(diff.digest(), DiffDigest::digest(&out));
        assert_eq!(diff.to_canonical_bytes(), out);
        assert_eq!(diff.encoded_len(), out.len());
        let mut out = Vec::new();
        canon::put_u64(&mut out, 1);
        diff.entries()[0].path.encode_canonical(&mut out);
        canon::put_u8(&mut out, 0);
        assert_eq!(diff.write_set_digest(), WriteSetDigest::digest(&out));
    }

    fn digests() -> BindingDigests {
        BindingDigests {
            snapshot: SnapshotId::digest(b"s"),
            program: ProgramDigest::digest(b"p"),
            intent: IntentDigest::digest(b"i"),
            read_set: ReadSetDigest::digest(b"r"),
            write_set: WriteSetDigest::digest(b"w"),
            diff: DiffDigest::digest(b"d"),
            policy: PolicyDigest::digest(b"o"),
            runtime_config: RuntimeConfigDigest::digest(b"c"),
            evidence: ExecutionEvidenceDigest::digest(b"e"),
        }
    }

    #[test]
    fn the_id_covers_every_digest_in_order_and_verify_refuses_another() {
        let base = digests();
        // The formula, written out independently of derive_id.
        let mut bytes = Vec::new();
        for digest in [
            base.program.as_bytes(),
            base.intent.as_bytes(),
            base.snapshot.as_bytes(),
            base.read_set.as_bytes(),
            base.write_set.as_bytes(),
            base.diff.as_bytes(),
            base.policy.as_bytes(),
            base.runtime_config.as_bytes(),
            base.evidence.as_bytes(),
        ] {
            bytes.extend_from_slice(digest);
        }
        assert_eq!(base.derive_id(), TransactionId::digest(&bytes));
        let binding = TransactionBinding::new(base);
        assert_eq!(TransactionBinding::verify(binding.transaction(), base), Ok(binding));
        let other = TransactionId::digest(b"other");
        assert_eq!(TransactionBinding::verify(other, base), Err(BindingMismatch { claimed: other }));
        let changed = [
            BindingDigests { snapshot: SnapshotId::digest(b"x"), ..base },
            BindingDigests { program: ProgramDigest::digest(b"x"), ..base },
            BindingDigests { intent: IntentDigest::digest(b"x"), ..base },
            BindingDigests { read_set: ReadSetDigest::digest(b"x"), ..base },
            BindingDigests { write_set: WriteSetDigest::digest(b"x"), ..base },
            BindingDigests { diff: DiffDigest::digest(b"x"), ..base },
            BindingDigests { policy: PolicyDigest::digest(b"x"), ..base },
            BindingDigests { runtime_config: RuntimeConfigDigest::digest(b"x"), ..base },
            BindingDigests { evidence: ExecutionEvidenceDigest::digest(b"x"), ..base },
        ];
        for digests in changed {
            assert_ne!(digests.derive_id(), binding.transaction(), "{digests:?}");
        }
    }
}
