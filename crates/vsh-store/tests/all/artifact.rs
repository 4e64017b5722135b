//! Pending-approval artifacts: round trip through the store, tampering of
//! every part refused, and bounds enforced before allocation.

use vsh_store::{ArtifactError, ArtifactLimits, InlineContents, PendingArtifact, StoreError, TransactionRecord};
use vsh_types::canon::{self, Canonical, DecodeError};
use vsh_types::{
    BindingDigests, BlobId, CanonicalDiff, Dependency, DiffEntry, DiffOrderError, DomainHasher,
    ExecutionEvidenceDigest, IntentDigest, NodeKind, NodeState, PolicyDigest, ProgramDigest, ReadSet,
    RuntimeConfigDigest, SnapshotId, TransactionBinding, TransactionState as S, VPath,
};

use crate::Result;
use crate::common::{blobs, store};

fn path(text: &str) -> VPath {
    VPath::parse(text).expect("a valid test path")
}

/// The digests of `diff`, `read_set`, `intent` and `evidence`, over `program`.
fn digests(program: &[u8], diff: &CanonicalDiff, read_set: &ReadSet, intent: &str, evidence: &[u8]) -> BindingDigests {
    BindingDigests {
        snapshot: SnapshotId::digest(b"base"),
        program: ProgramDigest::digest(program),
        intent: IntentDigest::digest(intent.as_bytes()),
        read_set: read_set.digest(),
        write_set: diff.write_set_digest(),
        diff: diff.digest(),
        policy: PolicyDigest::digest(b"balanced"),
        runtime_config: RuntimeConfigDigest::digest(b"config"),
        evidence: ExecutionEvidenceDigest::digest(evidence),
    }
}

/// The sample's diff entries, sorted.
fn entries() -> Vec<DiffEntry> {
    vec![
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
    ]
}

/// A correctly bound artifact of `program`.
fn sample_of(program: &[u8]) -> PendingArtifact {
    let diff = CanonicalDiff::new(entries()).expect("sorted");
    let mut read_set = ReadSet::default();
    read_set.entries.insert(
        path("config/app.toml"),
        Dependency { kind: Some(Some(NodeKind::File)), content: Some(BlobId::of(b"old")), ..Dependency::default() },
    );
    read_set.entries.insert(path("config/new.txt"), Dependency { kind: Some(None), ..Dependency::default() });
    let intent = "tidy the configuration".to_owned();
    let evidence = b"decision: pending; stdout: done".to_vec();
    let binding = TransactionBinding::new(digests(program, &diff, &read_set, &intent, &evidence));
    let policy = Some("version = 1\nprofile = \"strict\"\n".to_owned());
    PendingArtifact {
        binding,
        intent,
        program: Some("print('hi')".to_owned()),
        policy,
        diff,
        read_set,
        evidence,
        contents: InlineContents::new(),
    }
}

fn sample() -> PendingArtifact {
    sample_of(b"print('hi')")
}

/// `artifact` with its binding's digests changed by `change` (the id derived again).
fn rebound(mut artifact: PendingArtifact, change: impl FnOnce(&mut BindingDigests)) -> PendingArtifact {
    let mut digests = *artifact.binding.digests();
    change(&mut digests);
    artifact.binding = TransactionBinding::new(digests);
    artifact
}

/// The pending record `artifact` belongs to.
fn record_of(artifact: &PendingArtifact) -> TransactionRecord {
    TransactionRecord::new(artifact.binding.transaction(), SnapshotId::digest(b"base"), S::PendingApproval, 1_000)
}

/// Wrap `body` in a magic, length and valid checksum.
fn seal(body: &[u8]) -> Vec<u8> {
    seal_as(*b"VSHART03", body)
}

/// Wrap `body` in `magic`, a length and a valid checksum.
fn seal_as(magic: [u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = magic.to_vec();
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

/// `artifact` verified, encoded in the third format and decoded: equal, and
/// encoded again to the same bytes (the encoding is canonical).
fn round_trip(artifact: &PendingArtifact) -> Result<PendingArtifact> {
    artifact.verify(&ArtifactLimits::default())?;
    let bytes = artifact.encode();
    assert_eq!(&bytes[..8], b"VSHART03");
    let read = decode(&bytes)?;
    assert_eq!(&read, artifact);
    assert_eq!(read.encode(), bytes, "the encoding is canonical");
    Ok(read)
}

#[test]
fn artifact_round_trips_and_content_blobs_are_the_after_states() -> Result {
    let artifact = sample();
    round_trip(&artifact)?;
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
    let artifact = sample();
    let rec = record_of(&artifact);
    assert!(matches!(store.put_artifact(&blobs, &artifact, &limits), Err(StoreError::NotFound { .. })));
    store.create(&rec)?;
    assert!(matches!(store.load_artifact(&blobs, rec.id, &limits), Err(StoreError::NoArtifact { .. })));
    let updated = store.put_artifact(&blobs, &artifact, &limits)?;
    assert_eq!(updated.artifact, Some(BlobId::of(&artifact.encode())));
    let reopened = self::store(dir.path())?;
    assert_eq!(reopened.load_artifact(&self::blobs(dir.path())?, rec.id, &limits)?, artifact);
    // An artifact over a different base is refused before anything is stored.
    let wrong = rebound(sample(), |digests| digests.snapshot = SnapshotId::digest(b"elsewhere"));
    store.create(&record_of(&wrong))?;
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
    let victim = record_of(&sample());
    store.create(&victim)?;
    // Bytes of a valid artifact for another transaction, attached to the victim.
    let foreign = sample_of(b"someone else's program");
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
    let artifact = sample();
    let encoded = artifact.encode();
    // Digest position in the binding, and what decoding says about a change to it.
    // The id (0) and the digests that cannot be re-derived from the content
    // (snapshot 1, program 2, policy 7, configuration 8) fail the id's derivation.
    let derived = [
        (0, "transaction"),
        (1, "transaction"),
        (2, "transaction"),
        (3, "intent"),
        (4, "read set"),
        (5, "write set"),
        (6, "diff"),
        (7, "transaction"),
        (8, "transaction"),
        (9, "evidence"),
    ];
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
    let original = sample();
    let limits = ArtifactLimits::default();
    let with_entries = |change: &dyn Fn(&mut Vec<DiffEntry>)| {
        let mut entries = entries();
        change(&mut entries);
        PendingArtifact { diff: CanonicalDiff::new(entries).expect("still sorted"), ..original.clone() }
    };
    let mode = with_entries(&|entries| entries[1].after = Some(NodeState::file_with(b"created", 0o755)));
    let before = with_entries(&|entries| entries[0].before = Some(NodeState::file_with(b"older", 0o644)));
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
    let write_set = rebound(original, |digests| digests.write_set = vsh_types::WriteSetDigest::digest(b"else"));
    assert_eq!(decode(&write_set.encode()), Err(ArtifactError::Binding { field: "write set" }));
}

#[test]
fn trailing_bytes_truncations_and_flipped_bits_are_refused() {
    let encoded = sample().encode();
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
    // An unsorted diff cannot be built in memory; bytes that hold one are refused.
    let mut swapped = entries();
    swapped.swap(0, 1);
    let second = swapped[1].path.clone();
    assert_eq!(CanonicalDiff::new(swapped.clone()), Err(DiffOrderError::OutOfOrder { path: second.clone() }));
    let mut unsorted = body_with(&[]);
    canon::put_seq(&mut unsorted, swapped.iter());
    let original = sample();
    original.read_set.encode_canonical(&mut unsorted);
    canon::put_bytes(&mut unsorted, &original.evidence);
    assert_eq!(decode(&seal(&unsorted)), Err(ArtifactError::DiffOrder(DiffOrderError::OutOfOrder { path: second })));
    let mut future = sample().encode();
    future[7] = b'4';
    assert_eq!(decode(&future), Err(ArtifactError::UpgradeRequired { found: *b"VSHART04" }));
    future[0] = b'X';
    assert_eq!(decode(&future), Err(ArtifactError::BadMagic));
}

/// A body whose binding and intent are valid and which holds no program,
/// followed by `rest`.
fn body_with(rest: &[u8]) -> Vec<u8> {
    let encoded = sample().encode();
    let mut out = body(&encoded)[..10 * 32].to_vec();
    canon::put_bytes(&mut out, b"tidy the configuration");
    canon::put_u8(&mut out, 0);
    out.extend_from_slice(rest);
    out
}

#[test]
fn a_first_format_artifact_still_reads_without_its_program_and_the_program_is_bounded() {
    let current = sample();
    // The first format: the same body without the program field.
    let mut first = body(&current.encode())[..10 * 32].to_vec();
    canon::put_bytes(&mut first, current.intent.as_bytes());
    current.diff.encode_canonical(&mut first);
    current.read_set.encode_canonical(&mut first);
    canon::put_bytes(&mut first, &current.evidence);
    let read = decode(&seal_as(*b"VSHART01", &first)).expect("a first-format artifact decodes");
    assert_eq!(read, PendingArtifact { program: None, policy: None, ..current.clone() });
    assert_eq!(&read.encode()[..8], b"VSHART03", "and is written in the current format");
    // A flag with a bit other than the program's and the policy's, or a
    // program that is not UTF-8, is refused.
    for unknown in [4, 0x80, 0xff] {
        let mut flag = body_with(&[]);
        let at = flag.len() - 1;
        flag[at] = unknown;
        current.diff.encode_canonical(&mut flag);
        assert!(matches!(decode(&seal(&flag)), Err(ArtifactError::Malformed(_))), "{unknown:#x}");
    }
    let mut text = body_with(&[]);
    let at = text.len() - 1;
    text[at] = 1;
    canon::put_bytes(&mut text, b"\xff\xfe");
    current.diff.encode_canonical(&mut text);
    current.read_set.encode_canonical(&mut text);
    canon::put_bytes(&mut text, &current.evidence);
    assert_eq!(decode(&seal(&text)), Err(ArtifactError::ProgramEncoding));
    // The program is bounded like every other field.
    let tight = ArtifactLimits { max_program_bytes: 4, ..ArtifactLimits::default() };
    assert!(matches!(current.verify(&tight), Err(ArtifactError::LimitExceeded { what: "program length", .. })));
    assert!(matches!(
        PendingArtifact::decode(&current.encode(), &tight),
        Err(ArtifactError::LimitExceeded { what: "program length", .. })
    ));
}

#[test]
fn a_per_run_policy_is_kept_with_the_program_bounded_and_checked_as_text() {
    let current = sample();
    assert!(current.policy.is_some());
    let read = decode(&current.encode()).expect("decodes");
    assert_eq!(read.policy, current.policy, "the policy round-trips");
    for (program, policy) in [(false, false), (true, false), (false, true)] {
        let artifact = PendingArtifact {
            program: current.program.clone().filter(|_| program),
            policy: current.policy.clone().filter(|_| policy),
            ..current.clone()
        };
        assert_eq!(decode(&artifact.encode()).expect("decodes"), artifact, "program {program}, policy {policy}");
    }
    // Flag 2 alone: a policy follows, and it must be UTF-8.
    let mut text = body_with(&[]);
    let at = text.len() - 1;
    text[at] = 2;
    canon::put_bytes(&mut text, b"profile = \"\xff\"");
    current.diff.encode_canonical(&mut text);
    current.read_set.encode_canonical(&mut text);
    canon::put_bytes(&mut text, &current.evidence);
    assert_eq!(decode(&seal(&text)), Err(ArtifactError::PolicyEncoding));
    let tight = ArtifactLimits { max_policy_bytes: 8, ..ArtifactLimits::default() };
    assert!(matches!(current.verify(&tight), Err(ArtifactError::LimitExceeded { what: "policy length", .. })));
    assert!(matches!(
        PendingArtifact::decode(&current.encode(), &tight),
        Err(ArtifactError::LimitExceeded { what: "policy length", .. })
    ));
}

#[test]
fn oversized_counts_and_lengths_are_refused_before_allocation() {
    let limits = ArtifactLimits::default();
    // The total size comes first: nothing is even looked at.
    let small = ArtifactLimits { max_total_bytes: 64, ..limits };
    let encoded = sample().encode();
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
    assert!(matches!(sample().verify(&tight), Err(ArtifactError::LimitExceeded { what: "path length", .. })));
    let few = ArtifactLimits { max_entries: 3, ..limits };
    assert_eq!(sample().verify(&few), Err(ArtifactError::LimitExceeded { what: "diff entry count", value: 4, max: 3 }));
}

#[test]
fn put_artifact_refuses_an_artifact_over_the_limits() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let rec = record_of(&sample());
    store.create(&rec)?;
    let few = ArtifactLimits { max_entries: 1, ..ArtifactLimits::default() };
    assert!(matches!(
        store.put_artifact(&blobs, &sample(), &few),
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
    let mut long = sample();
    long.intent = "x".repeat(70 * 1024);
    let long = rebound(long, |digests| digests.intent = IntentDigest::digest("x".repeat(70 * 1024).as_bytes()));
    let refused = store.create_with_artifact(&blobs, &record_of(&long), &long, &limits);
    assert!(
        matches!(
            refused,
            Err(StoreError::Artifact { source: ArtifactError::LimitExceeded { what: "intent length", .. }, .. })
        ),
        "{refused:?}"
    );
    assert!(store.get(long.binding.transaction())?.is_none());
    // Whole: created with its artifact in one frame.
    let rec = record_of(&sample());
    let blob = store.create_with_artifact(&blobs, &rec, &sample(), &limits)?;
    assert_eq!(store.get(rec.id)?.and_then(|record| record.artifact), Some(blob));
    assert_eq!(store.load_artifact(&blobs, rec.id, &limits)?, sample());

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
        store.create_with_artifact(&blobs, &rec, &sample(), &limits)?;
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
                && store.create_with_artifact(&blobs, &rec, &sample(), &limits).is_err()
            {
                failures += 1;
            }
            let reopened = self::store(dir.path())?;
            match reopened.get(rec.id)? {
                None => {}
                Some(found) => {
                    assert!(found.artifact.is_some(), "{kind:?} {nth}: a record without its artifact");
                    assert_eq!(reopened.load_artifact(&self::blobs(dir.path())?, rec.id, &limits)?, sample());
                }
            }
        }
    }
    assert!(failures > 0, "some injected fault made the call fail");
    Ok(())
}

#[test]
fn an_artifact_of_exactly_the_size_limit_is_accepted_and_one_byte_less_is_not() {
    let artifact = sample();
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

#[test]
fn an_artifact_is_written_only_after_the_contents_it_refers_to_are_durable() -> Result {
    let limits = ArtifactLimits::default();
    for create in [true, false] {
        let dir = tempfile::tempdir()?;
        let counting = std::sync::Arc::new(vsh_store::FaultyBackend::new(crate::common::backend(dir.path())?, None));
        let shared: std::sync::Arc<dyn vsh_store::StoreBackend> = counting.clone();
        let store = vsh_store::TransactionStore::open_with(
            std::sync::Arc::clone(&shared),
            vsh_store::TxStoreConfig::default(),
            &crate::common::key(),
        )?;
        let blobs = vsh_store::BlobStore::open_with(shared)?;
        // The after states, stored as a process-local preview stores them.
        for content in [&b"new"[..], b"created", b"config/new.txt"] {
            blobs.put_expected_deferred(content, BlobId::of(content))?;
        }
        let artifact = sample();
        let rec = record_of(&artifact);
        if create {
            store.create_with_artifact(&blobs, &rec, &artifact, &limits)?;
        } else {
            store.create(&rec)?;
            store.put_artifact(&blobs, &artifact, &limits)?;
        }
        // Nothing is left to make durable: the writer did it first.
        let synced = counting.counts().fsyncs;
        blobs.make_durable(artifact.content_blobs())?;
        assert_eq!(counting.counts().fsyncs, synced, "create {create}");
    }
    Ok(())
}

/// The sample with the file contents its diff names carried inline.
fn with_inline_contents() -> PendingArtifact {
    let mut artifact = sample();
    for bytes in [&b"new"[..], &b"created"[..]] {
        artifact.contents.insert(BlobId::of(bytes), std::sync::Arc::from(bytes));
    }
    artifact
}

#[test]
fn inline_contents_round_trip_in_the_third_format_and_are_not_stored_contents() -> Result {
    let artifact = with_inline_contents();
    let read = round_trip(&artifact)?;
    assert_eq!(read.contents.get(&BlobId::of(b"created")).map(|bytes| &bytes[..]), Some(&b"created"[..]));
    // Every content is still a content of the artifact; only the one it does
    // not carry (the symlink's target) is the blob store's.
    assert_eq!(read.content_blobs().count(), 3);
    assert_eq!(read.stored_content_blobs().collect::<Vec<_>>(), vec![BlobId::of(b"config/new.txt")]);
    // A second-format artifact reads with no inline contents.
    let mut second = body(&sample().encode());
    second.truncate(second.len() - 8);
    assert_eq!(decode(&seal_as(*b"VSHART02", &second))?, sample());
    Ok(())
}

#[test]
fn forged_inline_contents_are_refused() {
    let limits = ArtifactLimits::default();
    let artifact = with_inline_contents();
    let encoded = artifact.encode();
    // Bytes changed under their id (checksum resealed): the last byte of the body
    // belongs to the last inline content.
    let mut changed = body(&encoded);
    let last = changed.len() - 1;
    changed[last] ^= 1;
    assert!(matches!(
        decode(&seal(&changed)),
        Err(ArtifactError::InlineContent { reason: "its bytes do not hash to it", .. })
    ));
    // A content the diff does not name, in memory and in bytes.
    let mut stranger = artifact.clone();
    stranger.contents.insert(BlobId::of(b"gone"), std::sync::Arc::from(&b"gone"[..]));
    let expected = ArtifactError::InlineContent { id: BlobId::of(b"gone"), reason: "not a content the diff names" };
    assert_eq!(stranger.verify(&limits), Err(expected.clone()));
    assert_eq!(decode(&stranger.encode()), Err(expected));
    // Out of order: the two contents swapped.
    let mut tail = Vec::new();
    let mut sorted: Vec<(&BlobId, &std::sync::Arc<[u8]>)> = artifact.contents.iter().collect();
    sorted.reverse();
    canon::put_u64(&mut tail, 2);
    for (id, bytes) in sorted {
        tail.extend_from_slice(id.as_bytes());
        canon::put_bytes(&mut tail, bytes);
    }
    let mut swapped = body(&sample().encode());
    swapped.truncate(swapped.len() - 8);
    swapped.extend_from_slice(&tail);
    assert!(matches!(
        decode(&seal(&swapped)),
        Err(ArtifactError::InlineContent { reason: "out of order or repeated", .. })
    ));
    // Lengths and counts over their bounds are refused before allocation.
    let mut long = body(&sample().encode());
    long.truncate(long.len() - 8);
    canon::put_u64(&mut long, 1);
    long.extend_from_slice(BlobId::of(b"new").as_bytes());
    canon::put_u64(&mut long, u64::MAX);
    assert_eq!(
        decode(&seal(&long)),
        Err(ArtifactError::LimitExceeded { what: "inline content length", value: u64::MAX, max: 64 << 10 })
    );
    let mut many = body(&sample().encode());
    many.truncate(many.len() - 8);
    canon::put_u64(&mut many, u64::MAX);
    assert_eq!(
        decode(&seal(&many)),
        Err(ArtifactError::LimitExceeded { what: "inline content count", value: u64::MAX, max: 100_000 })
    );
    let tight = ArtifactLimits { max_inline_bytes: 4, ..limits };
    assert_eq!(
        artifact.verify(&tight),
        Err(ArtifactError::LimitExceeded { what: "inline content length", value: 7, max: 4 })
    );
    assert!(matches!(PendingArtifact::decode(&encoded, &tight), Err(ArtifactError::LimitExceeded { .. })));
}

#[test]
fn a_pending_record_whose_contents_are_inline_needs_no_content_blob() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    // Everything the diff names, inline: nothing in the blob store but the artifact.
    let mut artifact = with_inline_contents();
    artifact.contents.insert(BlobId::of(b"config/new.txt"), std::sync::Arc::from(&b"config/new.txt"[..]));
    assert_eq!(artifact.stored_content_blobs().count(), 0);
    let record = record_of(&artifact);
    store.create_with_artifact(&blobs, &record, &artifact, &ArtifactLimits::default())?;
    for id in artifact.content_blobs() {
        assert!(!blobs.contains(id)?, "{id} is carried, not stored");
    }
    let loaded = store.load_artifact(&blobs, record.id, &ArtifactLimits::default())?;
    assert_eq!(loaded.contents, artifact.contents);
    Ok(())
}
