//! Retention and garbage collection: what is dropped, what is never dropped,
//! and bounded work per call.

use std::collections::BTreeSet;

use vsh_store::{
    ArtifactLimits, BlobStore, BlobSweep, PendingArtifact, RetentionConfig, TransactionRecord, TransactionStore,
};
use vsh_types::{
    BindingDigests, BlobId, CanonicalDiff, DiffEntry, ExecutionEvidenceDigest, IntentDigest, NodeState, PolicyDigest,
    ProgramDigest, ReadSet, RuntimeConfigDigest, SnapshotId, TransactionBinding, TransactionId, TransactionState as S,
    VPath,
};

use crate::Result;
use crate::common::{blobs, record, store, wall_ms};

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// Collect everything collectible: no age or count allowance, a day of grace.
fn eager() -> RetentionConfig {
    RetentionConfig { terminal_max_age_ms: Some(0), max_terminal_records: Some(0), ..RetentionConfig::default() }
}

/// Store an artifact for a pending record, with its content blobs; the
/// record's id, its artifact's blob and the content blobs.
fn pending_with_artifact(
    store: &TransactionStore,
    blobs: &BlobStore,
    name: &[u8],
    expires_ms: u64,
) -> Result<(TransactionId, BlobId, Vec<BlobId>)> {
    let mut content = name.to_vec();
    content.extend_from_slice(b" contents");
    let diff = CanonicalDiff::new(vec![
        DiffEntry::between(VPath::parse("file")?, None, Some(NodeState::file_with(&content, 0o644))).expect("a change"),
    ])?;
    let read_set = ReadSet::default();
    let intent = String::from_utf8_lossy(name).into_owned();
    let evidence = b"evidence".to_vec();
    let binding = TransactionBinding::new(BindingDigests {
        snapshot: SnapshotId::digest(b"base"),
        program: ProgramDigest::digest(b"program"),
        intent: IntentDigest::digest(intent.as_bytes()),
        read_set: read_set.digest(),
        write_set: diff.write_set_digest(),
        diff: diff.digest(),
        policy: PolicyDigest::digest(b"policy"),
        runtime_config: RuntimeConfigDigest::digest(b"config"),
        evidence: ExecutionEvidenceDigest::digest(&evidence),
    });
    let rec = TransactionRecord::new(binding.transaction(), SnapshotId::digest(b"base"), S::PendingApproval, 1_000)
        .with_pending_expiry(expires_ms);
    store.create(&rec)?;
    let artifact = PendingArtifact {
        binding,
        intent,
        program: Some("print('gc')".to_owned()),
        policy: None,
        diff,
        read_set,
        evidence,
        contents: vsh_store::InlineContents::new(),
    };
    let content_id = blobs.put(&content)?;
    let record = store.put_artifact(blobs, &artifact, &ArtifactLimits::default())?;
    Ok((rec.id, record.artifact.expect("just set"), vec![content_id]))
}

#[test]
fn gc_never_collects_pending_unexpired_records_or_referenced_blobs() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let now = wall_ms() + 2 * DAY_MS;
    let (pending, artifact, content) = pending_with_artifact(&store, &blobs, b"waiting", now + 10 * DAY_MS)?;
    let finished = record(b"finished", S::Failed);
    store.create(&finished)?;
    let garbage = blobs.put(b"nobody needs this")?;
    let kept = blobs.put(b"a commit in flight needs this")?;
    let keep = BTreeSet::from([kept]);

    let report = store.gc(&blobs, now, &eager(), &keep)?;
    assert!(report.expired.is_empty());
    assert_eq!(report.forgotten, vec![finished.id]);
    assert!(report.compacted);
    assert_eq!(report.blobs_removed, 1);
    assert_eq!(report.blob_sweep, BlobSweep::Complete);
    assert_eq!(store.get(pending)?.map(|record| record.state), Some(S::PendingApproval));
    assert_eq!(store.get(finished.id)?, None);
    for id in [artifact, content[0], kept] {
        assert!(blobs.contains(id)?, "{id:?} was collected");
    }
    assert!(!blobs.contains(garbage)?);
    // The artifact still loads: nothing it needs is gone.
    store.load_artifact(&blobs, pending, &ArtifactLimits::default())?;

    // Once the request lapses it expires, is dropped, and its blobs go.
    let later = now + 11 * DAY_MS;
    let report = store.gc(&blobs, later, &eager(), &BTreeSet::new())?;
    assert_eq!(report.expired, vec![pending]);
    assert_eq!(report.forgotten, vec![pending]);
    assert_eq!(store.get(pending)?, None);
    for id in [artifact, content[0], kept] {
        assert!(!blobs.contains(id)?, "{id:?} should be collected");
    }
    // A fresh handle agrees.
    assert!(self::store(dir.path())?.list()?.is_empty());
    Ok(())
}

#[test]
fn blobs_younger_than_the_grace_period_survive() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let young = blobs.put(b"written a moment ago")?;
    let report = store.gc(&blobs, wall_ms(), &eager(), &BTreeSet::new())?;
    assert_eq!((report.blobs_examined, report.blobs_removed), (1, 0));
    assert!(blobs.contains(young)?);
    let report = store.gc(&blobs, wall_ms() + DAY_MS + 60_000, &eager(), &BTreeSet::new())?;
    assert_eq!(report.blobs_removed, 1);
    assert!(!blobs.contains(young)?);
    Ok(())
}

#[test]
fn terminal_records_beyond_the_count_go_oldest_first() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let mut terminal = Vec::new();
    for index in 0..5_u64 {
        let rec = record(&index.to_le_bytes(), S::AutoApproved);
        store.create(&rec)?;
        // Updated at 10, 20, ..., 50: the first ones are the oldest.
        store.compare_and_transition(rec.id, S::AutoApproved, S::Rejected, (index + 1) * 10)?;
        terminal.push(rec.id);
    }
    let live = record(b"still running", S::Running);
    store.create(&live)?;
    let config =
        RetentionConfig { terminal_max_age_ms: None, max_terminal_records: Some(2), ..RetentionConfig::default() };
    let report = store.gc(&blobs, 100, &config, &BTreeSet::new())?;
    let mut expected = terminal[..3].to_vec();
    expected.sort();
    assert_eq!(report.forgotten, expected);
    let remaining: Vec<_> = store.list()?.into_iter().map(|record| record.id).collect();
    let mut wanted = vec![terminal[3], terminal[4], live.id];
    wanted.sort();
    assert_eq!(remaining, wanted);
    // Only the latest version of each live record is left on disk.
    assert_eq!(store.stats()?.frames, 3);
    // Nothing more to do.
    let again = store.gc(&blobs, 100, &config, &BTreeSet::new())?;
    assert!(again.forgotten.is_empty() && !again.compacted);
    // A dropped id can be used again from scratch.
    store.create(&record(&0_u64.to_le_bytes(), S::Created))?;
    Ok(())
}

#[test]
fn the_age_bound_drops_only_old_terminal_records() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let old = record(b"old", S::Denied);
    let mut recent = record(b"recent", S::Denied);
    recent.created_ms = 9_000;
    recent.updated_ms = 9_000;
    store.create(&old)?;
    store.create(&recent)?;
    let config =
        RetentionConfig { terminal_max_age_ms: Some(5_000), max_terminal_records: None, ..RetentionConfig::default() };
    // At 10,000: the old one is 9,000 ms old (dropped), the recent one 1,000 ms (kept).
    assert_eq!(store.gc(&blobs, 10_000, &config, &BTreeSet::new())?.forgotten, vec![old.id]);
    // At exactly 14,000 the recent one reaches the bound and goes too.
    assert_eq!(store.gc(&blobs, 14_000, &config, &BTreeSet::new())?.forgotten, vec![recent.id]);
    Ok(())
}

#[test]
fn the_blob_sweep_is_bounded_and_resumes_where_it_stopped() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let mut garbage = BTreeSet::new();
    for index in 0..5_u8 {
        garbage.insert(blobs.put(&[index; 3])?);
    }
    let config = RetentionConfig { max_blobs_per_call: 2, ..eager() };
    let now = wall_ms() + 2 * DAY_MS;
    let mut removed = 0;
    let mut calls = 0;
    loop {
        let report = store.gc(&blobs, now, &config, &BTreeSet::new())?;
        assert!(report.blobs_examined <= 2);
        removed += report.blobs_removed;
        calls += 1;
        if report.blob_sweep == BlobSweep::Complete {
            break;
        }
        assert!(matches!(report.blob_sweep, BlobSweep::Partial { .. }));
        assert!(calls < 10, "the sweep must finish");
    }
    assert_eq!((removed, calls), (5, 3));
    for id in garbage {
        assert!(!blobs.contains(id)?);
    }
    Ok(())
}

#[test]
fn an_unreadable_live_artifact_stops_the_blob_sweep() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let rec = record(b"artifact lost", S::PendingApproval);
    store.create(&rec)?;
    store.set_artifact(rec.id, BlobId::of(b"never stored"))?;
    let garbage = blobs.put(b"maybe needed by the lost artifact")?;
    let report = store.gc(&blobs, wall_ms() + 2 * DAY_MS, &eager(), &BTreeSet::new())?;
    assert!(matches!(report.blob_sweep, BlobSweep::Skipped { transaction, .. } if transaction == rec.id));
    assert_eq!(report.blobs_removed, 0);
    assert!(blobs.contains(garbage)?);
    Ok(())
}

#[test]
fn stale_temporary_blob_files_are_removed() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    // No blob stored yet: no temporary directory, nothing to remove.
    assert_eq!(store.gc(&blobs, wall_ms() + 2 * DAY_MS, &eager(), &BTreeSet::new())?.temporaries_removed, 0);
    blobs.put(b"a blob")?;
    let temp = crate::common::data_path(dir.path()).join("blobs/tmp/1-2-3.tmp");
    std::fs::write(&temp, b"half a blob")?;
    assert_eq!(store.gc(&blobs, wall_ms(), &eager(), &BTreeSet::new())?.temporaries_removed, 0);
    assert!(temp.exists());
    assert_eq!(store.gc(&blobs, wall_ms() + 2 * DAY_MS, &eager(), &BTreeSet::new())?.temporaries_removed, 1);
    assert!(!temp.exists());
    Ok(())
}

/// The modification time of `path`, in milliseconds since the epoch.
fn mtime_ms(path: &std::path::Path) -> u64 {
    let modified = std::fs::metadata(path).and_then(|meta| meta.modified()).expect("a modification time");
    u64::try_from(modified.duration_since(std::time::UNIX_EPOCH).expect("after the epoch").as_millis()).expect("fits")
}

fn set_mtime(path: &std::path::Path, ms: u64) {
    let file = std::fs::File::options().write(true).open(path).expect("open to set the time");
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).expect("set the time");
}

#[test]
fn the_grace_period_is_exact_for_blobs_and_temporary_files() -> Result {
    // At least the refresh age (a copy is rewritten at most that often).
    let grace = vsh_store::REFRESH_AFTER_MS + 60_000;
    let written = 1_000_000_000;
    // A fresh store each time: the sweep resumes after what it examined.
    for (now, removed) in [(written + grace - 1, 0), (written + grace, 1), (written + 10 * DAY_MS, 1)] {
        let dir = tempfile::tempdir()?;
        let store = store(dir.path())?;
        let blobs = blobs(dir.path())?;
        let config = RetentionConfig { blob_grace_ms: grace, ..eager() };
        let id = blobs.put(b"unreferenced")?;
        let data = crate::common::data_path(dir.path());
        let blob = data.join("blobs").join(&id.to_hex()[..2]).join(&id.to_hex()[2..]);
        let temp = data.join("blobs/tmp/9-9-9.tmp");
        std::fs::write(&temp, b"half")?;
        set_mtime(&blob, written);
        set_mtime(&temp, written);
        let report = store.gc(&blobs, now, &config, &BTreeSet::new())?;
        assert_eq!((report.blobs_removed, report.temporaries_removed), (removed, removed), "at {now}");
        assert_eq!((blob.exists(), temp.exists()), (removed == 0, removed == 0), "at {now}");
    }
    Ok(())
}

#[test]
fn storing_the_same_bytes_again_refreshes_an_old_copy_and_leaves_a_recent_one() -> Result {
    let dir = tempfile::tempdir()?;
    let blobs = blobs(dir.path())?;
    let id = blobs.put(b"shared")?;
    let blob = crate::common::data_path(dir.path()).join("blobs").join(&id.to_hex()[..2]).join(&id.to_hex()[2..]);
    let now = wall_ms();
    // The documented refresh age is ten minutes.
    assert_eq!(vsh_store::REFRESH_AFTER_MS, 10 * 60 * 1000);
    // Eleven minutes old: rewritten, so the grace period starts again.
    set_mtime(&blob, now - 11 * 60 * 1000);
    blobs.put(b"shared")?;
    assert!(mtime_ms(&blob) + 60_000 >= now, "refreshed");
    // Five minutes old: left alone (no rewrite on every store).
    let recent = now - 5 * 60 * 1000;
    set_mtime(&blob, recent);
    blobs.put(b"shared")?;
    assert_eq!(mtime_ms(&blob), recent);
    Ok(())
}

#[test]
fn names_in_the_blob_directory_that_are_not_blobs_are_never_collected() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    let root = crate::common::data_path(dir.path()).join("blobs");
    let name = "a".repeat(62);
    // A three-letter "shard", a shard with an upper-case digit, a name one digit short.
    let strays = [root.join("abc").join(&name), root.join("aB").join(&name), root.join("ab").join(&name[1..])];
    for stray in &strays {
        std::fs::create_dir_all(stray.parent().unwrap())?;
        std::fs::write(stray, b"not a blob")?;
    }
    let report = store.gc(&blobs, wall_ms() + 2 * DAY_MS, &eager(), &BTreeSet::new())?;
    assert_eq!(report.blobs_removed, 0);
    assert!(strays.iter().all(|stray| stray.exists()));
    Ok(())
}

#[test]
fn a_bounded_sweep_resumes_inside_the_shard_where_it_stopped() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let blobs = blobs(dir.path())?;
    // Two unreferenced blobs in the same shard (same first byte of the id).
    let mut by_shard: std::collections::BTreeMap<u8, Vec<Vec<u8>>> = std::collections::BTreeMap::new();
    let pair = (0_u32..)
        .find_map(|index| {
            let bytes = format!("blob {index}").into_bytes();
            let shard = BlobId::of(&bytes).as_bytes()[0];
            let same = by_shard.entry(shard).or_default();
            same.push(bytes);
            (same.len() == 2).then(|| same.clone())
        })
        .expect("two ids share a first byte");
    for bytes in &pair {
        blobs.put(bytes)?;
    }
    let config = RetentionConfig { max_blobs_per_call: 1, ..eager() };
    let later = wall_ms() + 2 * DAY_MS;
    let first = store.gc(&blobs, later, &config, &BTreeSet::new())?;
    let second = store.gc(&blobs, later, &config, &BTreeSet::new())?;
    assert_eq!((first.blobs_removed, second.blobs_removed), (1, 1), "{first:?} {second:?}");
    assert!(pair.iter().all(|bytes| blobs.get(BlobId::of(bytes), 1024).is_err()), "both are gone");
    Ok(())
}
