//! The transaction log: records through the store, torn tails truncated at
//! every byte offset, every flipped bit detected, compaction and stale
//! handles, legacy migration and newer formats.

use std::collections::BTreeSet;
use std::path::Path;

use vsh_store::txlog::{HEADER_LEN, LogHeader, LogKey, LogState};
use vsh_store::{StoreError, TransactionRecord, TransactionStore, TxStoreConfig};
use vsh_types::{BlobId, TransactionId, TransactionState as S};

use crate::Result;
use crate::common::{data_path, log_file, record, store, store_with};

/// Build a store with a few records; return the records before the last
/// change, the log before it, and the log after it.
fn history(root: &Path) -> Result<(Vec<TransactionRecord>, Vec<u8>, Vec<u8>)> {
    let store = store(root)?;
    let first = record(b"first", S::PendingApproval);
    store.create(&first)?;
    store.create(&record(b"second", S::AutoApproved))?;
    store.set_artifact(first.id, BlobId::of(b"artifact"))?;
    let before_records = store.list()?;
    let before = std::fs::read(log_file(root))?;
    store.compare_and_transition(first.id, S::PendingApproval, S::Rejected, 2_000)?;
    let after = std::fs::read(log_file(root))?;
    assert!(after.len() > before.len() && after.starts_with(&before));
    Ok((before_records, before, after))
}

#[test]
fn records_round_trip_through_the_log() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let first = record(b"one", S::Created);
    store.create(&first)?;
    assert_eq!(store.get(first.id)?, Some(first));
    assert_eq!(store.get(TransactionId::digest(b"absent"))?, None);
    let moved = store.compare_and_transition(first.id, S::Created, S::Running, 2_000)?;
    assert_eq!((moved.state, moved.sequence), (S::Running, 1));
    assert_eq!((moved.created_ms, moved.updated_ms), (1_000, 2_000));
    let artifact = BlobId::of(b"artifact");
    assert_eq!(store.set_artifact(first.id, artifact)?.artifact, Some(artifact));
    assert_eq!(store.set_artifact(first.id, artifact)?.sequence, 2, "setting the same artifact is a no-op");
    assert!(matches!(
        store.set_artifact(first.id, BlobId::of(b"another")),
        Err(StoreError::ArtifactConflict { existing, .. }) if existing == artifact
    ));
    let second = record(b"two", S::Created);
    store.create(&second)?;
    // A fresh handle replays the same durable state.
    let reopened = self::store(dir.path())?;
    let listed = reopened.list()?;
    let mut expected = vec![store.get(first.id)?.unwrap(), second];
    expected.sort_by_key(|record| record.id);
    assert_eq!(listed, expected);
    let stats = reopened.stats()?;
    assert_eq!((stats.generation, stats.frames, stats.live_records), (1, 4, 2));
    assert_eq!(stats.bytes, std::fs::metadata(log_file(dir.path()))?.len());
    Ok(())
}

#[test]
fn duplicate_and_invalid_creations_are_refused() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let rec = record(b"dup", S::Created);
    store.create(&rec)?;
    let mut changed = rec;
    changed.state = S::Running;
    assert!(matches!(store.create(&changed), Err(StoreError::Duplicate { id }) if id == rec.id));
    assert_eq!(store.get(rec.id)?, Some(rec));
    for state in [S::Approved, S::Reserved, S::Committing, S::Committed] {
        let invalid = record(b"skips the approval", state);
        assert!(matches!(store.create(&invalid), Err(StoreError::InvalidRecord { .. })), "{state:?}");
    }
    assert_eq!(store.list()?.len(), 1);
    Ok(())
}

#[test]
fn cas_conflicts_and_illegal_transitions_are_typed() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let rec = record(b"cas", S::PendingApproval);
    store.create(&rec)?;
    assert!(matches!(
        store.compare_and_transition(rec.id, S::AutoApproved, S::Reserved, 2),
        Err(StoreError::StateConflict { id, expected: S::AutoApproved, actual: S::PendingApproval }) if id == rec.id
    ));
    assert!(matches!(
        store.compare_and_transition(rec.id, S::PendingApproval, S::Reserved, 2),
        Err(StoreError::Transition { id, source }) if id == rec.id && source.to == S::Reserved
    ));
    assert!(matches!(
        store.compare_and_transition(rec.id, S::PendingApproval, S::Approved, 2),
        Err(StoreError::WrongState { .. })
    ));
    let missing = TransactionId::digest(b"missing");
    assert!(matches!(
        store.compare_and_transition(missing, S::Created, S::Running, 2),
        Err(StoreError::NotFound { id }) if id == missing
    ));
    assert_eq!(store.get(rec.id)?, Some(rec));
    assert_eq!(store.stats()?.frames, 1, "refused changes append nothing");
    Ok(())
}

#[test]
fn log_truncated_at_every_offset_of_its_last_frame_reopens_to_the_previous_state() -> Result {
    let dir = tempfile::tempdir()?;
    let (before_records, before, after) = history(dir.path())?;
    for cut in before.len()..after.len() {
        std::fs::write(log_file(dir.path()), &after[..cut])?;
        let reopened = store(dir.path())?;
        assert_eq!(reopened.list()?, before_records, "cut at {cut}");
        assert_eq!(std::fs::read(log_file(dir.path()))?, before, "cut at {cut}: the torn tail is gone on disk");
        // The log goes on from there.
        reopened.create(&record(b"after the crash", S::Created))?;
        assert_eq!(store(dir.path())?.list()?.len(), before_records.len() + 1);
    }
    // A zero-filled tail (a filesystem that extended the file before the data landed) is torn too.
    let mut zeroed = before.clone();
    zeroed.resize(after.len(), 0);
    std::fs::write(log_file(dir.path()), &zeroed)?;
    assert_eq!(store(dir.path())?.list()?, before_records);
    assert_eq!(std::fs::read(log_file(dir.path()))?, before);
    Ok(())
}

#[test]
fn every_flipped_bit_of_a_small_log_is_detected() -> Result {
    let dir = tempfile::tempdir()?;
    // A header and two frames: every bit is flipped in turn, each time through a real open.
    let rec = record(b"small", S::Created);
    let small = store(dir.path())?;
    small.create(&rec)?;
    small.compare_and_transition(rec.id, S::Created, S::Running, 2)?;
    drop(small);
    let log = std::fs::read(log_file(dir.path()))?;
    for bit in 0..log.len() * 8 {
        let mut flipped = log.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(log_file(dir.path()), &flipped)?;
        match TransactionStore::open(&crate::common::data_dir(dir.path())?, &crate::common::key()) {
            Err(StoreError::CorruptLog { offset, .. }) => assert!(offset as usize <= bit / 8, "bit {bit}: {offset}"),
            // A flip in the version digits of the magic reads as a newer format: refused too.
            Err(StoreError::UpgradeRequired { .. }) => assert!((6..8).contains(&(bit / 8)), "bit {bit}"),
            // A flip in the header's key id reads as another key: refused too.
            Err(StoreError::WrongAuthorityKey { .. }) => assert!((24..56).contains(&(bit / 8)), "bit {bit}"),
            Err(other) => panic!("bit {bit}: unexpected {other:?}"),
            Ok(_) => panic!("bit {bit}: a flipped bit was accepted"),
        }
        assert_eq!(std::fs::read(log_file(dir.path()))?, flipped, "bit {bit}: a corrupt log is never rewritten");
    }
    Ok(())
}

#[test]
fn flipped_bits_in_a_torn_tail_are_truncated_or_refused_never_misread() -> Result {
    let dir = tempfile::tempdir()?;
    let (before_records, before, after) = history(dir.path())?;
    let torn = &after[..after.len() - 5];
    for bit in before.len() * 8..torn.len() * 8 {
        let mut flipped = torn.to_vec();
        flipped[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(log_file(dir.path()), &flipped)?;
        match TransactionStore::open(&crate::common::data_dir(dir.path())?, &crate::common::key()) {
            Ok(reopened) => {
                assert_eq!(reopened.list()?, before_records, "bit {bit}");
                assert_eq!(std::fs::read(log_file(dir.path()))?, before, "bit {bit}");
            }
            Err(StoreError::CorruptLog { offset, .. }) => assert_eq!(offset as usize, before.len(), "bit {bit}"),
            Err(other) => panic!("bit {bit}: unexpected {other:?}"),
        }
    }
    Ok(())
}

#[test]
fn a_complete_frame_with_a_bad_checksum_fails_closed_even_at_the_end() -> Result {
    let dir = tempfile::tempdir()?;
    let (_, before, mut after) = history(dir.path())?;
    let last = after.len() - 1;
    after[last] ^= 0x80;
    std::fs::write(log_file(dir.path()), &after)?;
    let error = store(dir.path()).unwrap_err();
    assert!(
        matches!(error.downcast_ref::<StoreError>(), Some(StoreError::CorruptLog { offset, reason: "frame checksum mismatch" }) if *offset == before.len() as u64),
        "{error:?}"
    );
    Ok(())
}

#[test]
fn a_damaged_log_is_salvaged_to_the_records_before_the_damage_with_approvals_voided() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let pending = record(b"pending", S::PendingApproval);
    let previewed = record(b"previewed", S::AutoApproved);
    let approved = record(b"approved", S::PendingApproval);
    let committing = record(b"committing", S::AutoApproved);
    for made in [&pending, &previewed, &approved, &committing] {
        store.create(made)?;
    }
    // A commit under way when the rest is lost: it may have finished since.
    let _reserved = store.reserve(committing.id, 1_200)?;
    let principal = vsh_types::PrincipalId::from_bytes([7; 32]);
    store.approve(approved.id, &vsh_store::ApprovalGrant::new(approved.id, principal, 1_000, 60_000)?)?;
    let whole = std::fs::read(log_file(dir.path()))?;
    store.create(&record(b"lost", S::Created))?;
    drop(store);
    // A whole log is left as it is.
    let salvage = || -> Result<vsh_store::Salvaged> {
        let backend = crate::common::backend(dir.path())?;
        Ok(TransactionStore::salvage_with(backend, TxStoreConfig::default(), &crate::common::key())?)
    };
    assert_eq!(salvage()?, vsh_store::Salvaged::default());
    // One flipped bit in the last frame: every command fails.
    let mut damaged = std::fs::read(log_file(dir.path()))?;
    let last = damaged.len() - 3;
    damaged[last] ^= 0x10;
    std::fs::write(log_file(dir.path()), &damaged)?;
    assert!(self::store(dir.path()).is_err());
    // An earlier salvage's copy (of a log moved aside since) is never overwritten.
    std::fs::write(data_path(dir.path()).join("txlog.damaged.1"), b"earlier")?;
    let salvaged = salvage()?;
    assert_eq!(salvaged.damaged_at, Some(whole.len() as u64));
    assert_eq!((salvaged.kept, salvaged.voided.len()), (4, 4));
    assert_eq!(salvaged.kept_as.as_deref(), Some("txlog.damaged.1.1"));
    assert_eq!(std::fs::read(data_path(dir.path()).join("txlog.damaged.1"))?, b"earlier");
    assert_eq!(salvaged.lost_bytes, (damaged.len() - whole.len()) as u64);
    // Every byte of the damaged log is kept beside it; the store opens again.
    assert_eq!(std::fs::read(data_path(dir.path()).join("txlog.damaged.1.1"))?, damaged);
    let reopened = self::store(dir.path())?;
    let state = |made: &TransactionRecord| reopened.get(made.id).map(|found| found.map(|found| found.state));
    assert_eq!(state(&pending)?, Some(S::Rejected), "work a lost frame may have rejected");
    assert_eq!(state(&previewed)?, Some(S::Rejected), "a preview a lost frame may have committed");
    assert_eq!(state(&approved)?, Some(S::Expired), "an approval a lost frame may have used");
    assert_eq!(state(&committing)?, Some(S::RecoveryRequired), "a commit a lost frame may have finished");
    assert_eq!(reopened.list()?.len(), 4);
    // And it goes on: a new record, a new generation.
    reopened.create(&record(b"after", S::Created))?;
    assert_eq!(reopened.stats()?.generation, 2);
    // A log under another key is never salvaged away.
    let other = vsh_types::AuthorityKey::from_bytes([9; 32]);
    assert!(matches!(
        TransactionStore::salvage_with(crate::common::backend(dir.path())?, TxStoreConfig::default(), &other),
        Err(StoreError::WrongAuthorityKey { .. })
    ));
    assert_eq!(self::store(dir.path())?.list()?.len(), 5);
    Ok(())
}

#[test]
fn corruption_seen_by_an_open_handle_is_refused_and_never_returned() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let rec = record(b"victim", S::Created);
    store.create(&rec)?;
    // Another writer's frame arrives damaged.
    let mut log = std::fs::read(log_file(dir.path()))?;
    let other = self::store(dir.path())?;
    other.create(&record(b"second", S::Created))?;
    let full = std::fs::read(log_file(dir.path()))?;
    log.extend_from_slice(&full[log.len()..]);
    let index = log.len() - 40;
    log[index] ^= 1;
    std::fs::write(log_file(dir.path()), &log)?;
    assert!(matches!(store.get(rec.id), Err(StoreError::CorruptLog { .. })));
    assert!(matches!(store.list(), Err(StoreError::CorruptLog { .. })));
    assert!(matches!(
        store.compare_and_transition(rec.id, S::Created, S::Running, 5),
        Err(StoreError::CorruptLog { .. })
    ));
    assert_eq!(std::fs::read(log_file(dir.path()))?, log, "nothing was appended after the corruption");
    Ok(())
}

#[test]
fn compaction_preserves_every_live_record_and_stale_handles_replay_the_new_generation() -> Result {
    let dir = tempfile::tempdir()?;
    let writer = store(dir.path())?;
    let reader = store(dir.path())?;
    for index in 0..20_u8 {
        let rec = record(&[b'c', index], S::Created);
        writer.create(&rec)?;
        writer.compare_and_transition(rec.id, S::Created, S::Running, 2_000)?;
        writer.compare_and_transition(rec.id, S::Running, S::VirtualComplete, 3_000)?;
    }
    let expected = writer.list()?;
    assert_eq!(reader.list()?, expected);
    let before = writer.stats()?;
    let after = writer.compact()?;
    assert_eq!(after.generation, before.generation + 1);
    assert_eq!((after.frames, after.live_records), (20, 20));
    assert!(after.bytes < before.bytes);
    // The reader cached generation 1; it notices and replays from scratch.
    assert_eq!(reader.list()?, expected);
    assert_eq!(reader.stats()?, after);
    // Both keep working on the new generation, in either order.
    let first = expected[0].id;
    reader.compare_and_transition(first, S::VirtualComplete, S::AutoApproved, 4_000)?;
    writer.compare_and_transition(first, S::AutoApproved, S::Rejected, 5_000)?;
    assert_eq!(store(dir.path())?.get(first)?.map(|record| (record.state, record.sequence)), Some((S::Rejected, 4)));
    assert!(!data_path(dir.path()).join("txlog.next").exists());
    Ok(())
}

#[test]
fn compaction_runs_by_itself_once_the_log_is_long_and_mostly_superseded() -> Result {
    let dir = tempfile::tempdir()?;
    let config = TxStoreConfig { compact_at_bytes: 4_096, ..TxStoreConfig::default() };
    let store = store_with(dir.path(), config)?;
    let mut generations = BTreeSet::new();
    for index in 0..30_u64 {
        let rec = record(&index.to_le_bytes(), S::Created);
        store.create(&rec)?;
        for (from, to) in [(S::Created, S::Running), (S::Running, S::VirtualComplete), (S::VirtualComplete, S::Denied)]
        {
            store.compare_and_transition(rec.id, from, to, index)?;
        }
        generations.insert(store.stats()?.generation);
    }
    assert!(generations.len() > 1, "the log was compacted: {generations:?}");
    let stats = store.stats()?;
    assert!(stats.bytes < 8_192, "{stats:?}");
    assert_eq!(stats.live_records, 30);
    assert_eq!(self::store(dir.path())?.list()?, store.list()?);
    Ok(())
}

#[test]
fn log_full_and_record_limit_are_refused_without_changing_anything() -> Result {
    let dir = tempfile::tempdir()?;
    // Automatic compaction is off, so the log fills.
    let config = TxStoreConfig { max_log_bytes: 1_024, compact_at_bytes: u64::MAX, max_records: 3 };
    let store = store_with(dir.path(), config)?;
    let ids: Vec<TransactionId> = (0..3_u8).map(|index| record(&[index], S::Created).id).collect();
    for index in 0..3_u8 {
        store.create(&record(&[index], S::Created))?;
    }
    assert!(matches!(store.create(&record(b"fourth", S::Created)), Err(StoreError::RecordLimit { max: 3 })));
    let mut refused = None;
    'steps: for (from, to) in [(S::Created, S::Running), (S::Running, S::VirtualComplete)] {
        for id in &ids {
            let before = store.list()?;
            if let Err(error) = store.compare_and_transition(*id, from, to, 7) {
                assert_eq!(store.list()?, before);
                refused = Some((error, *id, from, to));
                break 'steps;
            }
        }
    }
    let Some((error, id, from, to)) = refused else { panic!("the log never filled") };
    assert!(matches!(error, StoreError::LogFull { max: 1_024, .. }), "{error:?}");
    assert!(std::fs::metadata(log_file(dir.path()))?.len() <= 1_024);
    assert_eq!(self::store_with(dir.path(), config)?.list()?, store.list()?);
    // Compacting makes room again.
    store.compact()?;
    store.compare_and_transition(id, from, to, 8)?;
    Ok(())
}

#[test]
fn an_interrupted_compaction_leaves_the_old_log_and_its_leftover_is_removed() -> Result {
    let dir = tempfile::tempdir()?;
    let (_, _, log) = history(dir.path())?;
    // A crash after writing the next generation but before renaming it.
    let (state, _) = LogState::parse(&log, &LogKey::new(&crate::common::key()))?;
    let records: Vec<TransactionRecord> = state.records().values().copied().collect();
    std::fs::write(data_path(dir.path()).join("txlog.next"), state.compacted())?;
    let reopened = store(dir.path())?;
    assert_eq!(reopened.list()?, records);
    assert_eq!(reopened.stats()?.generation, 1);
    assert!(!data_path(dir.path()).join("txlog.next").exists());
    Ok(())
}

#[test]
fn a_newer_log_format_requires_an_upgrade() -> Result {
    let dir = tempfile::tempdir()?;
    drop(store(dir.path())?);
    let mut log = std::fs::read(log_file(dir.path()))?;
    log[..8].copy_from_slice(b"VSHTXL03");
    std::fs::write(log_file(dir.path()), &log)?;
    let error = store(dir.path()).unwrap_err();
    assert!(
        matches!(error.downcast_ref::<StoreError>(), Some(StoreError::UpgradeRequired { file: "txlog", found }) if found == b"VSHTXL03"),
        "{error:?}"
    );
    Ok(())
}

#[test]
fn legacy_record_files_are_migrated_into_the_log() -> Result {
    let dir = tempfile::tempdir()?;
    let legacy = data_path(dir.path()).join("txns");
    std::fs::create_dir_all(legacy.join("tmp"))?;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-txns");
    for entry in std::fs::read_dir(&fixtures)? {
        let entry = entry?;
        std::fs::copy(entry.path(), legacy.join(entry.file_name()))?;
    }
    let store = store(dir.path())?;
    let pending = TransactionId::digest(b"legacy pending");
    let committed = TransactionId::digest(b"legacy committed");
    let records = store.list()?;
    assert_eq!(records.len(), 2);
    let pending = store.get(pending)?.expect("migrated");
    assert_eq!(pending.state, S::PendingApproval);
    assert_eq!(pending.artifact, Some(BlobId::of(b"legacy artifact")));
    assert_eq!((pending.created_ms, pending.updated_ms, pending.sequence), (1_700_000_000_000, 1_700_000_000_500, 0));
    assert_eq!(store.get(committed)?.map(|record| record.state), Some(S::Committed));
    assert!(!legacy.exists());
    assert!(data_path(dir.path()).join("txns.migrated").is_dir());
    let header = LogHeader::decode(&std::fs::read(log_file(dir.path()))?, &LogKey::new(&crate::common::key()))?;
    assert_eq!(header, LogHeader { generation: 1, checkpoints: 2 });
    // Migrated records go on along the table.
    store.compare_and_transition(pending.id, S::PendingApproval, S::Rejected, 1_700_000_001_000)?;
    assert_eq!(self::store(dir.path())?.get(pending.id)?.map(|record| record.sequence), Some(1));
    Ok(())
}

#[test]
fn a_corrupt_legacy_record_stops_the_migration() -> Result {
    let dir = tempfile::tempdir()?;
    let legacy = data_path(dir.path()).join("txns");
    std::fs::create_dir_all(&legacy)?;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-txns");
    let name = TransactionId::digest(b"legacy committed").to_hex();
    let mut bytes = std::fs::read(fixtures.join(&name))?;
    bytes[80] ^= 4;
    std::fs::write(legacy.join(&name), bytes)?;
    let error = store(dir.path()).unwrap_err();
    assert!(matches!(error.downcast_ref::<StoreError>(), Some(StoreError::CorruptRecord { .. })), "{error:?}");
    assert!(!log_file(dir.path()).exists(), "no log is created from a corrupt legacy directory");
    assert!(legacy.exists());
    Ok(())
}

#[test]
fn the_header_is_the_documented_88_bytes() -> Result {
    let dir = tempfile::tempdir()?;
    drop(store(dir.path())?);
    let log = std::fs::read(log_file(dir.path()))?;
    assert_eq!(log.len(), HEADER_LEN);
    assert_eq!(HEADER_LEN, 88);
    assert_eq!(&log[..8], b"VSHTXL02");
    assert_eq!(u64::from_le_bytes(log[8..16].try_into()?), 1);
    assert_eq!(u64::from_le_bytes(log[16..24].try_into()?), 0);
    assert_eq!(log[24..56], crate::common::key().id());
    // The MAC is keyed: the public derive-key checksum of the same bytes is not it.
    let public = vsh_types::DomainHasher::new("vsh 2026 txlog header v2").update(&log[..56]).finalize();
    assert_ne!(log[56..88], public);
    assert_eq!(log[56..88], crate::common::key().mac("vsh 2026 txlog header v2").update(&log[..56]).finalize());
    Ok(())
}

/// One frame of the log format, built here from the documented layout: length,
/// its complement, the payload, and a 32-byte checksum over generation,
/// offset, length and payload made by `seal`.
fn frame(offset: u64, generation: u64, payload: &[u8], seal: impl Fn(&[u8]) -> [u8; 32]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).expect("small payload");
    let mut covered = generation.to_le_bytes().to_vec();
    covered.extend_from_slice(&offset.to_le_bytes());
    covered.extend_from_slice(&length.to_le_bytes());
    covered.extend_from_slice(payload);
    let mut out = length.to_le_bytes().to_vec();
    out.extend_from_slice(&(!length).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&seal(&covered));
    out
}

/// A way to seal a frame's checksum.
type Seal = Box<dyn Fn(&[u8]) -> [u8; 32]>;

#[test]
fn a_forged_or_replayed_frame_fails_closed_and_nothing_it_says_is_believed() -> Result {
    use vsh_store::txlog::LogEntry;
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let pending = record(b"pending", S::PendingApproval);
    store.create(&pending)?;
    let good = std::fs::read(log_file(dir.path()))?;
    let end = good.len() as u64;
    // A forger who can write the data directory but does not hold the key
    // appends an approval, sealed every way they can: the public key, the
    // first format's checksum, a key of their own.
    let mut approved = pending;
    approved.sequence = 1;
    approved.updated_ms = 2_000;
    approved.state = S::Approved;
    approved.approval =
        Some(vsh_store::ApprovalGrant::new(pending.id, vsh_types::PrincipalId::digest(b"me"), 2_000, u64::MAX)?);
    let payload = LogEntry::Version(approved).encode();
    let seals: [(&str, Seal); 3] = [
        (
            "public key",
            Box::new(|bytes| {
                vsh_types::AuthorityKey::unauthenticated().mac("vsh 2026 txlog frame v2").update(bytes).finalize()
            }),
        ),
        (
            "first format",
            Box::new(|bytes| vsh_types::DomainHasher::new("vsh 2026 txlog frame v1").update(bytes).finalize()),
        ),
        (
            "own key",
            Box::new(|bytes| {
                vsh_types::AuthorityKey::from_bytes([7; 32]).mac("vsh 2026 txlog frame v2").update(bytes).finalize()
            }),
        ),
    ];
    for (how, seal) in &seals {
        let mut forged = good.clone();
        forged.extend_from_slice(&frame(end, 1, &payload, seal));
        std::fs::write(log_file(dir.path()), &forged)?;
        let error = self::store(dir.path()).unwrap_err();
        assert!(
            matches!(error.downcast_ref::<StoreError>(), Some(StoreError::CorruptLog { offset, .. }) if *offset == end),
            "{how}: {error:?}"
        );
        // An open handle refuses too, and changes nothing.
        assert!(matches!(store.get(pending.id), Err(StoreError::CorruptLog { .. })), "{how}");
        assert!(matches!(store.reserve(pending.id, 3_000), Err(StoreError::CorruptLog { .. })), "{how}");
        assert_eq!(std::fs::read(log_file(dir.path()))?, forged, "{how}");
    }
    // A genuine frame copied to the end (a replay) fails its offset binding.
    std::fs::write(log_file(dir.path()), &good)?;
    let first_frame = good[HEADER_LEN..].to_vec();
    let mut replayed = good.clone();
    replayed.extend_from_slice(&first_frame);
    std::fs::write(log_file(dir.path()), &replayed)?;
    let error = self::store(dir.path()).unwrap_err();
    assert!(matches!(error.downcast_ref::<StoreError>(), Some(StoreError::CorruptLog { .. })), "{error:?}");
    // Put back, the log is whole again.
    std::fs::write(log_file(dir.path()), &good)?;
    assert_eq!(self::store(dir.path())?.get(pending.id)?, Some(pending));
    Ok(())
}

#[test]
fn a_log_written_under_another_key_is_refused_as_such() -> Result {
    let dir = tempfile::tempdir()?;
    store(dir.path())?.create(&record(b"a", S::PendingApproval))?;
    let other = vsh_types::AuthorityKey::from_bytes([1; 32]);
    let error = TransactionStore::open(&crate::common::data_dir(dir.path())?, &other).unwrap_err();
    assert!(
        matches!(&error, StoreError::WrongAuthorityKey { found, expected } if *found == crate::common::key().id() && *expected == other.id()),
        "{error:?}"
    );
    Ok(())
}

#[test]
fn a_first_format_log_is_migrated_with_every_approval_voided() -> Result {
    let dir = tempfile::tempdir()?;
    drop(store(dir.path())?);
    // A first-format log, built from its documented layout.
    let legacy_header = |generation: u64, checkpoints: u64| {
        let mut out = b"VSHTXL01".to_vec();
        out.extend_from_slice(&generation.to_le_bytes());
        out.extend_from_slice(&checkpoints.to_le_bytes());
        let sum = vsh_types::DomainHasher::new("vsh 2026 txlog header v1").update(&out).finalize();
        out.extend_from_slice(&sum);
        out
    };
    let seal = |bytes: &[u8]| vsh_types::DomainHasher::new("vsh 2026 txlog frame v1").update(bytes).finalize();
    let pending = record(b"pending", S::PendingApproval);
    let auto = record(b"auto", S::AutoApproved);
    let mut approved = record(b"approved", S::PendingApproval);
    approved.sequence = 1;
    approved.updated_ms = 2_000;
    approved.state = S::Approved;
    approved.approval =
        Some(vsh_store::ApprovalGrant::new(approved.id, vsh_types::PrincipalId::digest(b"r"), 2_000, u64::MAX)?);
    let records = [pending, auto, approved];
    let mut log = legacy_header(4, 3);
    for checkpoint in &records {
        let payload = vsh_store::txlog::LogEntry::Checkpoint(*checkpoint).encode();
        let offset = log.len() as u64;
        log.extend_from_slice(&frame(offset, 4, &payload, seal));
    }
    std::fs::write(log_file(dir.path()), &log)?;
    let store = store(dir.path())?;
    assert_eq!(store.get(pending.id)?.map(|record| record.state), Some(S::PendingApproval));
    assert_eq!(store.get(auto.id)?.map(|record| record.state), Some(S::Rejected));
    let voided = store.get(approved.id)?.expect("migrated");
    assert_eq!(voided.state, S::Expired);
    assert!(matches!(store.reserve(approved.id, 3_000), Err(StoreError::NotReservable { .. })));
    let migrated = std::fs::read(log_file(dir.path()))?;
    assert_eq!(&migrated[..8], b"VSHTXL02");
    assert_eq!(LogHeader::decode(&migrated, &LogKey::new(&crate::common::key()))?.generation, 5);
    Ok(())
}

#[test]
fn a_log_may_grow_to_exactly_its_limit_and_compact_into_exactly_it() -> Result {
    // The same three records, written once without a limit to learn the size.
    let write = |root: &Path, config: TxStoreConfig| -> std::result::Result<TransactionStore, StoreError> {
        let store = store_with(root, config).map_err(|_| StoreError::LogFull { size: 0, max: 0 })?;
        for index in 0..3_u8 {
            store.create(&record(&[index], S::Created))?;
        }
        Ok(store)
    };
    let unlimited = TxStoreConfig { max_log_bytes: u64::MAX, compact_at_bytes: u64::MAX, max_records: 100 };
    let dir = tempfile::tempdir()?;
    write(dir.path(), unlimited)?;
    let size = std::fs::metadata(log_file(dir.path()))?.len();

    let exact = tempfile::tempdir()?;
    let store = write(exact.path(), TxStoreConfig { max_log_bytes: size, ..unlimited })?;
    assert_eq!(std::fs::metadata(log_file(exact.path()))?.len(), size);
    // Compaction's image of the same records fits the same limit.
    store.compact()?;
    let short = tempfile::tempdir()?;
    let refused = write(short.path(), TxStoreConfig { max_log_bytes: size - 1, ..unlimited });
    assert!(matches!(refused, Err(StoreError::LogFull { .. })), "{:?}", refused.err());
    Ok(())
}

#[test]
fn a_legacy_approved_record_is_migrated_with_its_approval_voided() -> Result {
    let dir = tempfile::tempdir()?;
    let legacy = data_path(dir.path()).join("txns");
    std::fs::create_dir_all(&legacy)?;
    // A first-format record (VSHTXR01) of an approved transaction, written by hand.
    let id = TransactionId::digest(b"legacy approved");
    let mut bytes = b"VSHTXR01".to_vec();
    bytes.extend_from_slice(id.as_bytes());
    bytes.extend_from_slice(vsh_types::SnapshotId::digest(b"base").as_bytes());
    bytes.push(S::Approved.tag());
    bytes.push(0);
    bytes.extend_from_slice(&1_700_000_000_000_u64.to_le_bytes());
    bytes.extend_from_slice(&1_700_000_000_500_u64.to_le_bytes());
    let sum = *blake3::hash(&bytes).as_bytes();
    bytes.extend_from_slice(&sum);
    std::fs::write(legacy.join(id.to_hex()), &bytes)?;
    let store = store(dir.path())?;
    assert_eq!(store.get(id)?.map(|record| (record.state, record.approval)), Some((S::Expired, None)));
    Ok(())
}

#[test]
fn a_records_history_lists_every_version_oldest_first_and_starts_at_the_checkpoint_after_compaction() -> Result {
    let dir = tempfile::tempdir()?;
    let store = store(dir.path())?;
    let rec = record(b"history", S::Created);
    store.create(&rec)?;
    store.create(&record(b"another", S::Created))?;
    store.compare_and_transition(rec.id, S::Created, S::Running, 2_000)?;
    store.compare_and_transition(rec.id, S::Running, S::VirtualComplete, 3_000)?;
    store.compare_and_transition(rec.id, S::VirtualComplete, S::PendingApproval, 4_000)?;
    let steps = |store: &TransactionStore| -> Result<Vec<(S, u64, bool)>> {
        Ok(store
            .history(rec.id)?
            .into_iter()
            .map(|version| (version.record.state, version.record.updated_ms, version.carried_over))
            .collect())
    };
    let expected = vec![
        (S::Created, 1_000, false),
        (S::Running, 2_000, false),
        (S::VirtualComplete, 3_000, false),
        (S::PendingApproval, 4_000, false),
    ];
    assert_eq!(steps(&store)?, expected);
    assert_eq!(steps(&self::store(dir.path())?)?, expected, "a fresh handle reads the same history");
    assert!(store.history(TransactionId::digest(b"absent"))?.is_empty());
    // Compaction keeps the latest version only; later changes follow it.
    store.compact()?;
    store.compare_and_transition(rec.id, S::PendingApproval, S::Rejected, 5_000)?;
    assert_eq!(steps(&store)?, vec![(S::PendingApproval, 4_000, true), (S::Rejected, 5_000, false)]);
    // A damaged log is refused, not read around.
    let mut bytes = std::fs::read(log_file(dir.path()))?;
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(log_file(dir.path()), &bytes)?;
    assert!(matches!(store.history(rec.id), Err(StoreError::CorruptLog { .. })), "{:?}", store.history(rec.id));
    Ok(())
}
