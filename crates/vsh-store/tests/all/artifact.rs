//! Pending-approval artifacts: round trip through the store, tampering of
//! every part refused, and bounds enforced before allocation.

use vsh_store::{
    ArtifactBinding, ArtifactError, ArtifactLimits, PendingArtifact, StoreError, diff_digest, write_set_digest,
};
use vsh_types::canon::{self, DecodeError};
use vsh_types::{
    BlobId, Dependency, DiffEntry, DomainHasher, ExecutionEvidenceDigest, IntentDigest, NodeKind, NodeState,
    PolicyDigest, ProgramDigest, ReadSet, RuntimeConfigDigest, SnapshotId, TransactionId, TransactionState as S, VPath,
};

use crate::Result;
use crate::common::{blobs, record, store};

fn path(text: &str) -> VPath {
    VPath::parse(text).expect("a valid test path")
}

/// Bind `diff`, `read_set`, `intent` and `evidence` correctly.
fn bind(
    transaction: TransactionId,
    diff: &[DiffEntry],
    read_set: &ReadSet,
    intent: &str,
    evidence: &[u8],
) -> ArtifactBinding {
    ArtifactBinding {
        transaction,
        snapshot: SnapshotId::digest(b"base"),
        program: ProgramDigest::digest(b"print('hi')"),
        intent: IntentDigest::digest(intent.as_bytes()),
        read_set: read_set.digest(),
        write_set: write_set_digest(diff),
        diff: diff_digest(diff),
        policy: PolicyDigest::digest(b"balanced"),
        runtime_config: RuntimeConfigDigest::digest(b"config"),
        evidence: ExecutionEvidenceDigest::digest(evidence),
    }
}

fn sample(transaction: TransactionId) -> PendingArtifact {
    let diff = vec![
        DiffEntry::between(
            path("config/app.toml"),
            Some(NodeState::file_with(b"old", 0o644)),
            Some(NodeState::file_with(b"new", 0o644)),
        )
        .expect("a change"),
        DiffEntry::between(path("config/new.txt"), None, Some(NodeState::file_with(b"created", 0o600)))
            .expect("a change"),
        DiffEntry::between(path("link"), None, Some(NodeState::symlink(b"config/new.txt"))).expect("a change"),
        DiffEntry::between(path("old.log"), Some(NodeState::file_with(b"gone", 0o644)), None).expect("a change"),
    ];
    let mut read_set = ReadSet::default();
    read_set.entries.insert(
        path("config/app.toml"),
        Dependency { kind: Some(Some(NodeKind::File)), content: Some(BlobId::of(b"old")), ..Dependency::default() },
    );
    read_set.entries.insert(path("config/new.txt"), Dependency { kind: Some(None), ..Dependency::default() });
    let intent = "tidy the configuration".to_owned();
    let evidence = b"decision: pending; stdout: done".to_vec();
    let binding = bind(transaction, &diff, &read_set, &intent, &evidence);
    PendingArtifact { binding, intent, diff, read_set, evidence }
}

fn tx() -> TransactionId {
    record(b"pending", S::PendingApproval).id
}

/// Wrap `body` in a magic, length and valid checksum.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = b"VSHART01".to_vec();
    canon::put_u64(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    let sum = DomainHasher::new("vsh 2026 artifact v1").update(&out).finalize();
    out.extend_from_slice(&sum);
    out
}

/// The body of an encoded artifact.
fn body(encoded: &[u8]) -> Vec<u8> {
    encoded[16..encoded.len() - 32].to_vec()
}

fn decode(bytes: &[u8]) -> std::result::Result<PendingArtifact, ArtifactError> {
    PendingArtifact::decode(bytes, &ArtifactLimits::default())
}

#[test]
fn default_limits_are_the_peers() {
    let limits = ArtifactLimits::default();
    assert_eq!(limits.max_total_bytes, 128 * 1024 * 1024);
    assert_eq!((limits.max_entries, limits.max_dependencies), (100_000, 250_000));
    assert_eq!((limits.max_path_bytes, limits.max_intent_bytes), (16 * 1024, 64 * 1024));
    assert_eq!(limits.max_evidence_bytes, 16 * 1024 * 1024);
}

#[test]
fn artifact_round_trips_and_content_blobs_are_the_after_states() -> Result {
    let artifact = sample(tx());
    artifact.verify(&ArtifactLimits::default())?;
    let bytes = artifact.encode();
    assert_eq!(&bytes[..8], b"VSHART01");
    assert_eq!(decode(&bytes)?, artifact);
    assert_eq!(decode(&bytes)?.encode(), bytes, "the encoding is canonical");
    let content: Vec<BlobId> = artifact.content_blobs().collect();
    assert_eq!(content, vec![BlobId::of(b"new"), BlobId::of(b"created"), BlobId::of(b"config/new.txt")]);
    Ok(())
}

#[test]
fn artifact_is_stored_as_a_blob_bound_to_its_record_and_survives_reopen() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let limits = ArtifactLimits::default();
    let rec = record(b"pending", S::PendingApproval);
    let artifact = sample(rec.id);
    assert!(matches!(store.put_artifact(&blobs, &artifact, &limits), Err(StoreError::NotFound { .. })));
    store.create(&rec)?;
    assert!(matches!(store.load_artifact(&blobs, rec.id, &limits), Err(StoreError::NoArtifact { .. })));
    let updated = store.put_artifact(&blobs, &artifact, &limits)?;
    assert_eq!(updated.artifact, Some(BlobId::of(&artifact.encode())));
    let reopened = self::store(dir.path())?;
    assert_eq!(reopened.load_artifact(&self::blobs(dir.path())?, rec.id, &limits)?, artifact);
    // An artifact over a different base is refused before anything is stored.
    let other = record(b"other base", S::PendingApproval);
    store.create(&other)?;
    let mut wrong = sample(other.id);
    wrong.binding.snapshot = SnapshotId::digest(b"elsewhere");
    assert!(matches!(
        store.put_artifact(&blobs, &wrong, &limits),
        Err(StoreError::Artifact { source: ArtifactError::Binding { field: "snapshot" }, .. })
    ));
    assert!(!blobs.contains(BlobId::of(&wrong.encode()))?);
    Ok(())
}

#[test]
fn an_artifact_attached_to_another_transaction_is_refused_on_load() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let victim = record(b"victim", S::PendingApproval);
    store.create(&victim)?;
    // Bytes of a valid artifact for another transaction, attached to the victim.
    let foreign = sample(TransactionId::digest(b"someone else"));
    let blob = blobs.put(&foreign.encode())?;
    store.set_artifact(victim.id, blob)?;
    assert!(matches!(
        store.load_artifact(&blobs, victim.id, &ArtifactLimits::default()),
        Err(StoreError::Artifact { source: ArtifactError::Binding { field: "transaction" }, .. })
    ));
    Ok(())
}

#[test]
fn tampered_binding_fields_are_refused() {
    let artifact = sample(tx());
    let encoded = artifact.encode();
    // Digest position in the binding, and what decoding says about a change to it.
    let derived = [(3, "intent"), (4, "read set"), (5, "write set"), (6, "diff"), (9, "evidence")];
    for (index, field) in derived {
        let mut tampered = body(&encoded);
        tampered[index * 32] ^= 1;
        assert_eq!(decode(&seal(&tampered)), Err(ArtifactError::Binding { field }), "{field}");
    }
    // Without resealing, the checksum catches any change at all.
    let mut unsealed = encoded.clone();
    unsealed[16] ^= 1;
    assert_eq!(decode(&unsealed), Err(ArtifactError::Checksum));
}

#[test]
fn tampered_content_under_an_untouched_binding_is_refused() {
    let original = sample(tx());
    let limits = ArtifactLimits::default();
    let mut mode = original.clone();
    mode.diff[1].after = Some(NodeState::file_with(b"created", 0o755));
    let mut before = original.clone();
    before.diff[0].before = Some(NodeState::file_with(b"older", 0o644));
    let mut reads = original.clone();
    reads.read_set.entries.remove(&path("config/new.txt"));
    let mut intent = original.clone();
    intent.intent.push('!');
    let mut evidence = original.clone();
    evidence.evidence.push(b'!');
    for (tampered, field) in
        [(mode, "diff"), (before, "diff"), (reads, "read set"), (intent, "intent"), (evidence, "evidence")]
    {
        assert_eq!(decode(&tampered.encode()), Err(ArtifactError::Binding { field }), "{field}");
        assert_eq!(tampered.verify(&limits), Err(ArtifactError::Binding { field }), "{field}");
    }
    let mut write_set = original;
    write_set.binding.write_set = vsh_types::WriteSetDigest::digest(b"something else");
    assert_eq!(decode(&write_set.encode()), Err(ArtifactError::Binding { field: "write set" }));
}

#[test]
fn trailing_bytes_truncations_and_flipped_bits_are_refused() {
    let encoded = sample(tx()).encode();
    let mut trailing = encoded.clone();
    trailing.push(0);
    assert_eq!(decode(&trailing), Err(ArtifactError::Trailing { remaining: 1 }));
    trailing.extend_from_slice(&[0; 4]);
    assert_eq!(decode(&trailing), Err(ArtifactError::Trailing { remaining: 5 }));
    let mut inner = body(&encoded);
    inner.extend_from_slice(b"xyz");
    assert_eq!(decode(&seal(&inner)), Err(ArtifactError::Trailing { remaining: 3 }));
    for len in 0..encoded.len() {
        assert!(decode(&encoded[..len]).is_err(), "truncated to {len}");
    }
    for bit in 0..encoded.len() * 8 {
        let mut flipped = encoded.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(decode(&flipped).is_err(), "bit {bit}");
    }
}

#[test]
fn unsorted_diff_entries_and_other_formats_are_refused() {
    let mut unsorted = sample(tx());
    unsorted.diff.swap(0, 1);
    unsorted.binding =
        bind(unsorted.binding.transaction, &unsorted.diff, &unsorted.read_set, &unsorted.intent, &unsorted.evidence);
    assert_eq!(decode(&unsorted.encode()), Err(ArtifactError::DiffOrder));
    assert_eq!(unsorted.verify(&ArtifactLimits::default()), Err(ArtifactError::DiffOrder));
    let mut future = sample(tx()).encode();
    future[7] = b'2';
    assert_eq!(decode(&future), Err(ArtifactError::UpgradeRequired { found: *b"VSHART02" }));
    future[0] = b'X';
    assert_eq!(decode(&future), Err(ArtifactError::BadMagic));
}

/// A body whose binding and intent are valid, followed by `rest`.
fn body_with(rest: &[u8]) -> Vec<u8> {
    let encoded = sample(tx()).encode();
    let mut out = body(&encoded)[..10 * 32].to_vec();
    canon::put_bytes(&mut out, b"tidy the configuration");
    out.extend_from_slice(rest);
    out
}

#[test]
fn oversized_counts_and_lengths_are_refused_before_allocation() {
    let limits = ArtifactLimits::default();
    // The total size comes first: nothing is even looked at.
    let small = ArtifactLimits { max_total_bytes: 64, ..limits };
    let encoded = sample(tx()).encode();
    assert_eq!(
        PendingArtifact::decode(&encoded, &small),
        Err(ArtifactError::TooLarge { size: encoded.len() as u64, max: 64 })
    );
    // Counts over the limit, declared in a tiny input.
    let mut count = Vec::new();
    canon::put_u64(&mut count, u64::MAX);
    assert_eq!(
        decode(&seal(&body_with(&count))),
        Err(ArtifactError::LimitExceeded { what: "diff entry count", value: u64::MAX, max: 100_000 })
    );
    // A count within the limit but beyond what the bytes could hold.
    let mut count = Vec::new();
    canon::put_u64(&mut count, 100_000);
    assert!(matches!(
        decode(&seal(&body_with(&count))),
        Err(ArtifactError::Malformed(DecodeError::LengthOutOfBounds { .. }))
    ));
    let mut deps = Vec::new();
    canon::put_u64(&mut deps, 0);
    canon::put_u64(&mut deps, 1 << 40);
    assert_eq!(
        decode(&seal(&body_with(&deps))),
        Err(ArtifactError::LimitExceeded { what: "dependency count", value: 1 << 40, max: 250_000 })
    );
    let mut evidence = Vec::new();
    canon::put_u64(&mut evidence, 0);
    canon::put_u64(&mut evidence, 0);
    canon::put_u64(&mut evidence, (16 << 20) + 1);
    assert_eq!(
        decode(&seal(&body_with(&evidence))),
        Err(ArtifactError::LimitExceeded { what: "evidence length", value: (16 << 20) + 1, max: 16 << 20 })
    );
    let mut intent = body(&encoded)[..10 * 32].to_vec();
    canon::put_u64(&mut intent, u64::MAX);
    assert_eq!(
        decode(&seal(&intent)),
        Err(ArtifactError::LimitExceeded { what: "intent length", value: u64::MAX, max: 64 * 1024 })
    );
    // A long path inside an entry is bounded by max_path_bytes.
    let tight = ArtifactLimits { max_path_bytes: 8, ..limits };
    assert!(matches!(PendingArtifact::decode(&encoded, &tight), Err(ArtifactError::Malformed(_))));
    assert!(matches!(sample(tx()).verify(&tight), Err(ArtifactError::LimitExceeded { what: "path length", .. })));
    let few = ArtifactLimits { max_entries: 3, ..limits };
    assert_eq!(
        sample(tx()).verify(&few),
        Err(ArtifactError::LimitExceeded { what: "diff entry count", value: 4, max: 3 })
    );
}

#[test]
fn put_artifact_refuses_an_artifact_over_the_limits() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let rec = record(b"pending", S::PendingApproval);
    store.create(&rec)?;
    let few = ArtifactLimits { max_entries: 1, ..ArtifactLimits::default() };
    assert!(matches!(
        store.put_artifact(&blobs, &sample(rec.id), &few),
        Err(StoreError::Artifact { source: ArtifactError::LimitExceeded { .. }, .. })
    ));
    assert_eq!(store.get(rec.id)?.and_then(|record| record.artifact), None);
    Ok(())
}

#[test]
fn a_record_and_its_artifact_appear_together_or_not_at_all() -> Result {
    use std::sync::Arc;
    use vsh_store::{BlobStore, FaultKind, FaultPlan, FaultyBackend, StoreBackend, TransactionStore};
    let limits = ArtifactLimits::default();
    // Over a bound (a 70 KB intent): refused, and no record exists.
    let dir = tempfile::tempdir()?;
    let (store, blobs) = (store(dir.path())?, blobs(dir.path())?);
    let rec = record(b"pending", S::PendingApproval);
    let mut long = sample(rec.id);
    long.intent = "x".repeat(70 * 1024);
    long.binding.intent = IntentDigest::digest(long.intent.as_bytes());
    let refused = store.create_with_artifact(&blobs, &rec, &long, &limits);
    assert!(
        matches!(
            refused,
            Err(StoreError::Artifact { source: ArtifactError::LimitExceeded { what: "intent length", .. }, .. })
        ),
        "{refused:?}"
    );
    assert!(store.get(rec.id)?.is_none());
    // Whole: created with its artifact in one frame.
    let blob = store.create_with_artifact(&blobs, &rec, &sample(rec.id), &limits)?;
    assert_eq!(store.get(rec.id)?.and_then(|record| record.artifact), Some(blob));
    assert_eq!(store.load_artifact(&blobs, rec.id, &limits)?, sample(rec.id));

    // Every failed write, fsync or rename (ENOSPC, EIO): the record is there
    // with its artifact, or not there at all.
    let counting_dir = tempfile::tempdir()?;
    let counting = Arc::new(FaultyBackend::new(crate::common::backend(counting_dir.path())?, None));
    {
        let shared: Arc<dyn StoreBackend> = counting.clone();
        let store = TransactionStore::open_with(
            Arc::clone(&shared),
            vsh_store::TxStoreConfig::default(),
            &crate::common::key(),
        )?;
        let blobs = BlobStore::open_with(shared)?;
        store.create_with_artifact(&blobs, &rec, &sample(rec.id), &limits)?;
    }
    let totals = counting.counts();
    let mut failures = 0;
    for kind in [FaultKind::Write, FaultKind::Fsync, FaultKind::Rename] {
        for nth in 1..=totals.of(kind) {
            let dir = tempfile::tempdir()?;
            let faulty =
                Arc::new(FaultyBackend::new(crate::common::backend(dir.path())?, Some(FaultPlan::fail_nth(kind, nth))));
            let shared: Arc<dyn StoreBackend> = faulty.clone();
            let opened = TransactionStore::open_with(
                Arc::clone(&shared),
                vsh_store::TxStoreConfig::default(),
                &crate::common::key(),
            )
            .and_then(|store| Ok((store, BlobStore::open_with(shared)?)));
            if let Ok((store, blobs)) = opened
                && store.create_with_artifact(&blobs, &rec, &sample(rec.id), &limits).is_err()
            {
                failures += 1;
            }
            let reopened = self::store(dir.path())?;
            match reopened.get(rec.id)? {
                None => {}
                Some(found) => {
                    assert!(found.artifact.is_some(), "{kind:?} {nth}: a record without its artifact");
                    assert_eq!(reopened.load_artifact(&self::blobs(dir.path())?, rec.id, &limits)?, sample(rec.id));
                }
            }
        }
    }
    assert!(failures > 0, "some injected fault made the call fail");
    Ok(())
}

#[test]
fn an_artifact_of_exactly_the_size_limit_is_accepted_and_one_byte_less_is_not() {
    let artifact = sample(tx());
    let size = artifact.encode().len() as u64;
    let exact = ArtifactLimits { max_total_bytes: size, ..ArtifactLimits::default() };
    let short = ArtifactLimits { max_total_bytes: size - 1, ..ArtifactLimits::default() };
    // verify computes the encoded size without encoding: it must be the real one.
    assert_eq!(artifact.verify(&exact), Ok(()));
    assert_eq!(artifact.verify(&short), Err(ArtifactError::TooLarge { size, max: size - 1 }));
    let bytes = artifact.encode();
    assert_eq!(PendingArtifact::decode(&bytes, &exact).as_ref(), Ok(&artifact));
    assert_eq!(PendingArtifact::decode(&bytes, &short), Err(ArtifactError::TooLarge { size, max: size - 1 }));
}
