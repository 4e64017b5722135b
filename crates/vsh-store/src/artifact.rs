//! [`PendingArtifact`]: everything a pending transaction needs to be reviewed
//! and committed later, possibly by another process, in a versioned,
//! checksummed encoding whose decoder bounds every length before allocating.
//!
//! An artifact is stored as a blob and its [`BlobId`] recorded on the
//! transaction's record ([`crate::TransactionStore::put_artifact`]). Decoding
//! re-derives the diff, write-set and read-set digests from the entries it
//! carries, and the intent and evidence digests from their bytes, and refuses
//! any mismatch with the binding ([`ArtifactError::Binding`]): a tampered
//! entry cannot ride on an untouched binding. The transaction id is then
//! re-derived from the binding's digests ([`TransactionBinding::verify`]), so a
//! changed snapshot, program, policy or configuration digest is refused too, and
//! [`crate::TransactionStore::load_artifact`] checks the id against the record
//! the artifact was loaded for.
//!
//! # Layout
//!
//! ```text
//!    0   8  magic "VSHART03" (written), or "VSHART02" or "VSHART01" (still read)
//!    8   8  body length B, u64 LE (the file is 48 + B bytes)
//!   16   B  body
//! 16+B  32  BLAKE3 derive-key "vsh 2026 artifact v1" over bytes 0..16+B
//!
//! body (canonical encoding of vsh_types::canon)
//!   binding: ten 32-byte digests, in this order: transaction, snapshot,
//!            program, intent, read set, write set, diff, policy,
//!            runtime config, execution evidence
//!   intent:  byte string (u64 length + UTF-8)
//!   program: (VSHART02 only) u8 flags: bit 0 the program's text follows,
//!            bit 1 a per-run policy follows (other bits refused); then the
//!            program's text, for review and for running it again, and the
//!            policy file the run was made under when the run overrode the
//!            workspace's policy, each a byte string (UTF-8)
//!   diff:    u64 count, then each DiffEntry (paths strictly increasing, no root)
//!   reads:   ReadSet (u64 count, then path + Dependency, paths strictly increasing)
//!   evidence: byte string (opaque to the store)
//!   contents: (VSHART03 only) u64 count, then each inline content: its
//!            32-byte BlobId and a byte string whose plain BLAKE3 is that id;
//!            ids strictly increasing, each one an after state's content the
//!            diff names, each at most `max_inline_bytes`
//! ```
//!
//! Inline contents let a transaction's small new contents travel in its one
//! artifact blob instead of one blob file each: storing a pending
//! transaction of a thousand small files is one file and one barrier, not a
//! thousand. A content the artifact does not carry is in the blob store.
//!
//! The store does not interpret the evidence: the runtime encodes the decision,
//! output and statistics there, and binds them through the evidence digest.

use std::collections::BTreeMap;
use std::sync::Arc;

use vsh_types::canon::{self, Canonical, DecodeError, Reader};
use vsh_types::{
    BindingDigests, BlobId, CanonicalDiff, DiffDigest, DiffEntry, DomainHasher, ExecutionEvidenceDigest, IntentDigest,
    PolicyDigest, ProgramDigest, ReadSet, ReadSetDigest, RuntimeConfigDigest, SnapshotId, TransactionBinding,
    TransactionId, WriteSetDigest,
};

/// The first eight bytes of an artifact this build writes.
pub const ARTIFACT_MAGIC: [u8; 8] = *b"VSHART03";
/// The first eight bytes of an artifact of the second format (no inline
/// contents), which this build still reads.
pub const ARTIFACT_MAGIC_V2: [u8; 8] = *b"VSHART02";
/// The first eight bytes of an artifact of the first format (no program
/// text), which this build still reads.
pub const ARTIFACT_MAGIC_V1: [u8; 8] = *b"VSHART01";
/// The prefix every version of the artifact magic shares.
const ARTIFACT_MAGIC_FAMILY: &[u8; 6] = b"VSHART";
/// The checksum domain.
const ARTIFACT_DOMAIN: &str = "vsh 2026 artifact v1";
/// Magic, body length and checksum.
const ARTIFACT_OVERHEAD: usize = 8 + 8 + 32;
/// The encoded binding.
const BINDING_LEN: usize = 10 * 32;
/// The smallest encoded diff entry: path length, kind, two option flags.
const MIN_DIFF_ENTRY: usize = 8 + 1 + 1 + 1;
/// The smallest encoded inline content: its id and an empty byte string.
const MIN_INLINE_CONTENT: usize = 32 + 8;

/// New contents an artifact carries, by their digest.
pub type InlineContents = BTreeMap<BlobId, Arc<[u8]>>;

/// Bounds applied before anything is allocated while decoding (and checked
/// before encoding). The defaults are the peer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// Largest encoded artifact (default 128 MiB).
    pub max_total_bytes: u64,
    /// Most diff entries (default 100,000).
    pub max_entries: u64,
    /// Most read-set dependencies (default 250,000).
    pub max_dependencies: u64,
    /// Longest path in bytes (default 16 KiB).
    pub max_path_bytes: u64,
    /// Longest intent in bytes (default 64 KiB).
    pub max_intent_bytes: u64,
    /// Largest evidence section (default 16 MiB).
    pub max_evidence_bytes: u64,
    /// Longest program text (default 1 MiB, the runtime's program bound).
    pub max_program_bytes: u64,
    /// Longest per-run policy file (default 1 MiB, a policy file's bound).
    pub max_policy_bytes: u64,
    /// Largest content carried inline (default 64 KiB; larger ones are in
    /// the blob store).
    pub max_inline_bytes: u64,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        Self {
            max_total_bytes: 128 << 20,
            max_entries: 100_000,
            max_dependencies: 250_000,
            max_path_bytes: 16 << 10,
            max_intent_bytes: 64 << 10,
            max_evidence_bytes: 16 << 20,
            max_program_bytes: 1 << 20,
            max_policy_bytes: 1 << 20,
            max_inline_bytes: 64 << 10,
        }
    }
}

/// A pending transaction's artifact: its binding and what the binding covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingArtifact {
    /// The transaction id and the digests it derives from.
    pub binding: TransactionBinding,
    /// The caller's intent text.
    pub intent: String,
    /// The program's text (`None` in an artifact of the first format). The
    /// store keeps it opaque: the runtime checks it against the binding's
    /// program digest.
    pub program: Option<String>,
    /// The policy file (TOML) the transaction was made under, when its run
    /// overrode the workspace's policy, so that later commands review,
    /// approve and commit it under that policy. The store keeps it opaque:
    /// the runtime checks that it parses to the binding's policy digest.
    pub policy: Option<String>,
    /// The canonical diff.
    pub diff: CanonicalDiff,
    /// What the run depended on.
    pub read_set: ReadSet,
    /// Opaque evidence (decision, output, statistics) as the runtime encoded it.
    pub evidence: Vec<u8>,
    /// New contents carried in the artifact itself (empty in an artifact of
    /// an earlier format): each one an after state's content the diff names,
    /// its bytes hashing to its id. The others are in the blob store.
    pub contents: InlineContents,
}

/// Why an artifact was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// The encoding is larger than the limit; nothing was decoded.
    #[error("artifact is {size} bytes, over the limit of {max}")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The bytes end before the artifact does, or its length field disagrees with them.
    #[error("artifact is truncated")]
    Truncated,
    /// Bytes follow the artifact or its last field.
    #[error("{remaining} trailing bytes in the artifact")]
    Trailing {
        /// How many.
        remaining: u64,
    },
    /// Not an artifact.
    #[error("bad artifact magic")]
    BadMagic,
    /// An artifact of a newer format version.
    #[error("artifact format {} is newer than this build", String::from_utf8_lossy(.found))]
    UpgradeRequired {
        /// The magic found.
        found: [u8; 8],
    },
    /// The checksum trailer does not match.
    #[error("artifact checksum mismatch")]
    Checksum,
    /// A count or length is over its limit (checked before allocating).
    #[error("artifact {what} is {value}, over the limit of {max}")]
    LimitExceeded {
        /// Which count or length.
        what: &'static str,
        /// The value found.
        value: u64,
        /// The limit.
        max: u64,
    },
    /// A field failed to decode.
    #[error("artifact field is malformed")]
    Malformed(#[from] DecodeError),
    /// Diff entries out of order, duplicated, or touching the root.
    #[error("artifact diff entries are not canonical: {0}")]
    DiffOrder(#[from] vsh_types::DiffOrderError),
    /// The intent is not UTF-8.
    #[error("artifact intent is not UTF-8")]
    IntentEncoding,
    /// The program text is not UTF-8.
    #[error("artifact program is not UTF-8")]
    ProgramEncoding,
    /// The per-run policy is not UTF-8.
    #[error("artifact policy is not UTF-8")]
    PolicyEncoding,
    /// A digest re-derived from the content differs from the binding.
    #[error("artifact binding does not match its {field}")]
    Binding {
        /// Which digest.
        field: &'static str,
    },
    /// An inline content is out of order, not named by the diff, or not the
    /// bytes of its id.
    #[error("artifact inline content {id}: {reason}")]
    InlineContent {
        /// Its id.
        id: BlobId,
        /// What is wrong.
        reason: &'static str,
    },
}

impl PendingArtifact {
    /// The encoding (see the module docs). It does not check anything; use
    /// [`PendingArtifact::verify`] first, or let
    /// [`crate::TransactionStore::put_artifact`] do it.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let binding = self.binding.digests();
        for digest in [
            self.binding.transaction().as_bytes(),
            binding.snapshot.as_bytes(),
            binding.program.as_bytes(),
            binding.intent.as_bytes(),
            binding.read_set.as_bytes(),
            binding.write_set.as_bytes(),
            binding.diff.as_bytes(),
            binding.policy.as_bytes(),
            binding.runtime_config.as_bytes(),
            binding.evidence.as_bytes(),
        ] {
            body.extend_from_slice(digest);
        }
        canon::put_bytes(&mut body, self.intent.as_bytes());
        canon::put_u8(&mut body, u8::from(self.program.is_some()) | u8::from(self.policy.is_some()) << 1);
        for text in [&self.program, &self.policy].into_iter().flatten() {
            canon::put_bytes(&mut body, text.as_bytes());
        }
        self.diff.encode_canonical(&mut body);
        self.read_set.encode_canonical(&mut body);
        canon::put_bytes(&mut body, &self.evidence);
        canon::put_u64(&mut body, self.contents.len() as u64);
        for (id, bytes) in &self.contents {
            body.extend_from_slice(id.as_bytes());
            canon::put_bytes(&mut body, bytes);
        }
        let mut out = Vec::with_capacity(body.len() + ARTIFACT_OVERHEAD);
        out.extend_from_slice(&ARTIFACT_MAGIC);
        canon::put_u64(&mut out, body.len() as u64);
        out.extend_from_slice(&body);
        let sum = checksum(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// Decode and verify an artifact: the size bound first, then magic,
    /// length and checksum, then every field with its count or length checked
    /// against `limits` and the remaining bytes before any allocation, then
    /// the re-derived digests against the binding, then the transaction id
    /// against the digests.
    pub fn decode(bytes: &[u8], limits: &ArtifactLimits) -> Result<Self, ArtifactError> {
        let size = bytes.len() as u64;
        if size > limits.max_total_bytes {
            return Err(ArtifactError::TooLarge { size, max: limits.max_total_bytes });
        }
        let version = match bytes.get(..8) {
            Some(magic) if magic == ARTIFACT_MAGIC => 3,
            Some(magic) if magic == ARTIFACT_MAGIC_V2 => 2,
            _ => 1,
        };
        if bytes.len() >= 8 && version == 1 && bytes[..8] != ARTIFACT_MAGIC_V1 {
            if bytes[..6] == *ARTIFACT_MAGIC_FAMILY {
                let mut found = [0_u8; 8];
                found.copy_from_slice(&bytes[..8]);
                return Err(ArtifactError::UpgradeRequired { found });
            }
            return Err(ArtifactError::BadMagic);
        }
        if bytes.len() < ARTIFACT_OVERHEAD {
            return Err(ArtifactError::Truncated);
        }
        let body_len = u64::from_le_bytes(bytes[8..16].try_into().expect("eight bytes"));
        let actual = (bytes.len() - ARTIFACT_OVERHEAD) as u64;
        if body_len > actual {
            return Err(ArtifactError::Truncated);
        }
        if body_len < actual {
            return Err(ArtifactError::Trailing { remaining: actual - body_len });
        }
        let (sealed, sum) = bytes.split_at(bytes.len() - 32);
        if checksum(sealed) != sum {
            return Err(ArtifactError::Checksum);
        }
        Self::decode_body(&sealed[16..], limits, version)
    }

    fn decode_body(body: &[u8], limits: &ArtifactLimits, version: u8) -> Result<Self, ArtifactError> {
        let with_program = version >= 2;
        let mut reader = Reader::new(body);
        if body.len() < BINDING_LEN {
            return Err(ArtifactError::Truncated);
        }
        let transaction = TransactionId::from_bytes(reader.array()?);
        let digests = BindingDigests {
            snapshot: SnapshotId::from_bytes(reader.array()?),
            program: ProgramDigest::from_bytes(reader.array()?),
            intent: IntentDigest::from_bytes(reader.array()?),
            read_set: ReadSetDigest::from_bytes(reader.array()?),
            write_set: WriteSetDigest::from_bytes(reader.array()?),
            diff: DiffDigest::from_bytes(reader.array()?),
            policy: PolicyDigest::from_bytes(reader.array()?),
            runtime_config: RuntimeConfigDigest::from_bytes(reader.array()?),
            evidence: ExecutionEvidenceDigest::from_bytes(reader.array()?),
        };
        check_limit("intent length", peek_u64(&reader)?, limits.max_intent_bytes)?;
        let intent = reader.bytes(limits.max_intent_bytes)?;
        let intent = String::from_utf8(intent.to_vec()).map_err(|_| ArtifactError::IntentEncoding)?;
        let flags = if with_program { reader.u8()? } else { 0 };
        if flags & !0b11 != 0 {
            return Err(ArtifactError::Malformed(reader.invalid("program presence flag")));
        }
        let mut text = |present: bool, what: &'static str, max: u64, error: ArtifactError| {
            if !present {
                return Ok(None);
            }
            check_limit(what, peek_u64(&reader)?, max)?;
            let text = reader.bytes(max)?;
            String::from_utf8(text.to_vec()).map(Some).map_err(|_| error)
        };
        let program = text(flags & 1 != 0, "program length", limits.max_program_bytes, ArtifactError::ProgramEncoding)?;
        let policy = text(flags & 2 != 0, "policy length", limits.max_policy_bytes, ArtifactError::PolicyEncoding)?;
        let count = peek_u64(&reader)?;
        check_limit("diff entry count", count, limits.max_entries)?;
        let count = reader.length(limits.max_entries, MIN_DIFF_ENTRY)?;
        let mut entries: Vec<DiffEntry> = Vec::with_capacity(count);
        for _ in 0..count {
            entries.push(DiffEntry::decode_canonical(&mut reader, limits.max_path_bytes)?);
        }
        let diff = CanonicalDiff::new(entries)?;
        check_limit("dependency count", peek_u64(&reader)?, limits.max_dependencies)?;
        // The decoder bounds the count by the remaining bytes too, before allocating.
        let read_set = ReadSet::decode_canonical(&mut reader, limits.max_dependencies, limits.max_path_bytes)?;
        check_limit("evidence length", peek_u64(&reader)?, limits.max_evidence_bytes)?;
        let evidence = reader.bytes(limits.max_evidence_bytes)?.to_vec();
        let contents = if version >= 3 { decode_contents(&mut reader, limits)? } else { InlineContents::new() };
        if reader.remaining() != 0 {
            return Err(ArtifactError::Trailing { remaining: reader.remaining() as u64 });
        }
        check_digests(&digests, &intent, &diff, &read_set, &evidence)?;
        check_contents(&contents, &diff, limits)?;
        let binding = TransactionBinding::verify(transaction, digests)
            .map_err(|_| ArtifactError::Binding { field: "transaction" })?;
        Ok(Self { binding, intent, program, policy, diff, read_set, evidence, contents })
    }

    /// Check this artifact as [`PendingArtifact::decode`] would: limits and
    /// every re-derivable digest of the binding (the diff's order and the
    /// binding's id are held by their types).
    pub fn verify(&self, limits: &ArtifactLimits) -> Result<(), ArtifactError> {
        check_limit("intent length", self.intent.len() as u64, limits.max_intent_bytes)?;
        check_limit("program length", self.program.as_ref().map_or(0, String::len) as u64, limits.max_program_bytes)?;
        check_limit("policy length", self.policy.as_ref().map_or(0, String::len) as u64, limits.max_policy_bytes)?;
        check_limit("diff entry count", self.diff.len() as u64, limits.max_entries)?;
        check_limit("dependency count", self.read_set.len() as u64, limits.max_dependencies)?;
        check_limit("evidence length", self.evidence.len() as u64, limits.max_evidence_bytes)?;
        let longest = self
            .diff
            .entries()
            .iter()
            .map(|entry| entry.path.as_str().len())
            .chain(self.read_set.entries.keys().map(|path| path.as_str().len()))
            .max()
            .unwrap_or(0);
        check_limit("path length", longest as u64, limits.max_path_bytes)?;
        check_digests(self.binding.digests(), &self.intent, &self.diff, &self.read_set, &self.evidence)?;
        check_limit("inline content count", self.contents.len() as u64, limits.max_entries)?;
        check_contents(&self.contents, &self.diff, limits)?;
        let size = self.encoded_len();
        if size > limits.max_total_bytes {
            return Err(ArtifactError::TooLarge { size, max: limits.max_total_bytes });
        }
        Ok(())
    }

    /// The encoded length, without encoding.
    fn encoded_len(&self) -> u64 {
        let diff = self.diff.encoded_len();
        let reads = self.read_set.to_canonical_bytes().len();
        let program = 1 + [&self.program, &self.policy].into_iter().flatten().map(|text| 8 + text.len()).sum::<usize>();
        let contents = 8 + self.contents.values().map(|bytes| MIN_INLINE_CONTENT + bytes.len()).sum::<usize>();
        (ARTIFACT_OVERHEAD
            + BINDING_LEN
            + 8
            + self.intent.len()
            + program
            + diff
            + reads
            + 8
            + self.evidence.len()
            + contents) as u64
    }

    /// The contents the diff's after states need (file contents and symlink
    /// targets), inline or not.
    pub fn content_blobs(&self) -> impl Iterator<Item = BlobId> + '_ {
        self.diff.content_blobs()
    }

    /// The contents the diff's after states need that the artifact does not
    /// carry: what a commit reads from the blob store, and what must be
    /// durable there before the artifact is. A mode change keeps the
    /// workspace's bytes (its commit sets the mode, and reads no content), so
    /// its after state's content is none of them.
    pub fn stored_content_blobs(&self) -> impl Iterator<Item = BlobId> + '_ {
        self.diff
            .entries()
            .iter()
            .filter(|entry| entry.kind != vsh_types::DiffKind::MetadataChange)
            .filter_map(|entry| entry.after.and_then(|state| state.content))
            .filter(|id| !self.contents.contains_key(id))
    }
}

/// The inline contents section (`VSHART03`): every count and length bounded
/// before anything is allocated, ids strictly increasing, each one's bytes
/// re-hashed.
fn decode_contents(reader: &mut Reader<'_>, limits: &ArtifactLimits) -> Result<InlineContents, ArtifactError> {
    check_limit("inline content count", peek_u64(reader)?, limits.max_entries)?;
    let count = reader.length(limits.max_entries, MIN_INLINE_CONTENT)?;
    let mut contents = InlineContents::new();
    let mut last: Option<BlobId> = None;
    for _ in 0..count {
        let id = BlobId::from_bytes(reader.array()?);
        if last.is_some_and(|last| last >= id) {
            return Err(ArtifactError::InlineContent { id, reason: "out of order or repeated" });
        }
        last = Some(id);
        check_limit("inline content length", peek_u64(reader)?, limits.max_inline_bytes)?;
        let bytes = reader.bytes(limits.max_inline_bytes)?;
        contents.insert(id, Arc::from(bytes));
    }
    Ok(contents)
}

/// Every inline content is within its bound, an after state's content the
/// diff names, and the bytes of its id.
fn check_contents(
    contents: &InlineContents,
    diff: &CanonicalDiff,
    limits: &ArtifactLimits,
) -> Result<(), ArtifactError> {
    if contents.is_empty() {
        return Ok(());
    }
    let named: std::collections::BTreeSet<BlobId> = diff.content_blobs().collect();
    for (id, bytes) in contents {
        check_limit("inline content length", bytes.len() as u64, limits.max_inline_bytes)?;
        if !named.contains(id) {
            return Err(ArtifactError::InlineContent { id: *id, reason: "not a content the diff names" });
        }
        if BlobId::of(bytes) != *id {
            return Err(ArtifactError::InlineContent { id: *id, reason: "its bytes do not hash to it" });
        }
    }
    Ok(())
}

/// Every digest of `digests` that can be re-derived from the content beside it.
fn check_digests(
    digests: &BindingDigests,
    intent: &str,
    diff: &CanonicalDiff,
    read_set: &ReadSet,
    evidence: &[u8],
) -> Result<(), ArtifactError> {
    let checks = [
        (diff.digest() == digests.diff, "diff"),
        (diff.write_set_digest() == digests.write_set, "write set"),
        (read_set.digest() == digests.read_set, "read set"),
        (IntentDigest::digest(intent.as_bytes()) == digests.intent, "intent"),
        (ExecutionEvidenceDigest::digest(evidence) == digests.evidence, "evidence"),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some((_, field)) => Err(ArtifactError::Binding { field }),
        None => Ok(()),
    }
}

fn checksum(bytes: &[u8]) -> [u8; 32] {
    DomainHasher::new(ARTIFACT_DOMAIN).update(bytes).finalize()
}

/// The next `u64` without consuming it.
fn peek_u64(reader: &Reader<'_>) -> Result<u64, ArtifactError> {
    let mut ahead = reader.clone();
    Ok(ahead.u64()?)
}

fn check_limit(what: &'static str, value: u64, max: u64) -> Result<(), ArtifactError> {
    if value > max { Err(ArtifactError::LimitExceeded { what, value, max }) } else { Ok(()) }
}
