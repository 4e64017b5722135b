//! Integration tests of the data directory, blob store and transaction store
//! against real temporary directories.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Barrier};

use vsh_host::CapDir;
use vsh_store::{BlobStore, DataDir, PutOutcome, StoreError, TransactionRecord, TransactionStore};
use vsh_types::{BlobId, SnapshotId, TransactionId, TransactionState as S, VPath};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

fn data_dir(root: &Path) -> Result<DataDir> {
    let workspace = CapDir::open(root)?;
    Ok(DataDir::open_in_workspace(&workspace, &DataDir::default_relative())?)
}

fn blob_file(root: &Path, id: &BlobId) -> std::path::PathBuf {
    root.join(".vsh/data/blobs").join(BlobStore::relative_path(id).as_str())
}

fn flip_byte(path: &Path, index: usize) -> Result {
    let mut bytes = std::fs::read(path)?;
    bytes[index] ^= 0x20;
    std::fs::write(path, bytes)?;
    Ok(())
}

fn record(name: &[u8], state: S) -> TransactionRecord {
    TransactionRecord::new(TransactionId::digest(name), SnapshotId::digest(b"base"), state, 1_000)
}

#[test]
fn blob_round_trip_and_layout() -> Result {
    let dir = tempfile::tempdir()?;
    let blobs = BlobStore::open(&data_dir(dir.path())?)?;
    let id = blobs.put(b"hello blob")?;
    assert_eq!(id, BlobId::of(b"hello blob"));
    assert_eq!(blobs.get(id, 1024)?, b"hello blob");
    assert!(blobs.contains(id)?);
    assert!(!blobs.contains(BlobId::of(b"absent"))?);
    let file = blob_file(dir.path(), &id);
    assert_eq!(std::fs::read(&file)?, b"hello blob");
    assert_eq!(std::fs::metadata(&file)?.permissions().mode() & 0o777, 0o600);
    assert_eq!(file.file_name().unwrap().len(), 62);
    assert_eq!(blobs.put_with_outcome(b"hello blob")?, (id, PutOutcome::AlreadyPresent));
    // The empty blob is a blob too.
    let empty = blobs.put(b"")?;
    assert_eq!(blobs.get(empty, 0)?, b"");
    // Nothing is left in the temporary directory.
    assert_eq!(std::fs::read_dir(dir.path().join(".vsh/data/blobs/tmp"))?.count(), 0);
    Ok(())
}

#[test]
fn missing_blob_and_expected_digest() -> Result {
    let dir = tempfile::tempdir()?;
    let blobs = BlobStore::open(&data_dir(dir.path())?)?;
    let absent = BlobId::of(b"never stored");
    assert!(matches!(blobs.get(absent, 100), Err(StoreError::MissingBlob { id }) if id == absent));
    let wrong = BlobId::of(b"other");
    assert!(matches!(
        blobs.put_expected(b"bytes", wrong),
        Err(StoreError::DigestMismatch { expected, actual }) if expected == wrong && actual == BlobId::of(b"bytes")
    ));
    assert!(!blobs.contains(BlobId::of(b"bytes"))?);
    assert_eq!(blobs.put_expected(b"bytes", BlobId::of(b"bytes"))?, BlobId::of(b"bytes"));
    Ok(())
}

#[test]
fn flipped_byte_is_detected_on_get_and_repaired_on_put() -> Result {
    let dir = tempfile::tempdir()?;
    let blobs = BlobStore::open(&data_dir(dir.path())?)?;
    let id = blobs.put(b"precious content")?;
    let file = blob_file(dir.path(), &id);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
    flip_byte(&file, 3)?;
    assert!(matches!(blobs.get(id, 1024), Err(StoreError::CorruptBlob { id: bad }) if bad == id));
    assert!(matches!(blobs.contains(id), Err(StoreError::CorruptBlob { .. })));
    assert_eq!(blobs.put_with_outcome(b"precious content")?, (id, PutOutcome::Repaired));
    assert_eq!(blobs.get(id, 1024)?, b"precious content");
    assert!(blobs.contains(id)?);
    Ok(())
}

#[test]
fn truncated_blob_and_non_file_blob_are_corrupt() -> Result {
    let dir = tempfile::tempdir()?;
    let blobs = BlobStore::open(&data_dir(dir.path())?)?;
    let id = blobs.put(b"0123456789")?;
    let file = blob_file(dir.path(), &id);
    std::fs::write(&file, b"01234")?;
    assert!(matches!(blobs.get(id, 1024), Err(StoreError::CorruptBlob { .. })));
    // A symlink planted at a blob path is never followed.
    let other = BlobId::of(b"target bytes");
    let planted = blob_file(dir.path(), &other);
    std::fs::create_dir_all(planted.parent().unwrap())?;
    std::fs::write(dir.path().join("outside"), b"target bytes")?;
    std::os::unix::fs::symlink(dir.path().join("outside"), &planted)?;
    assert!(matches!(blobs.get(other, 1024), Err(StoreError::CorruptBlob { .. })));
    assert_eq!(blobs.put_with_outcome(b"target bytes")?, (other, PutOutcome::Repaired));
    assert!(std::fs::symlink_metadata(&planted)?.is_file());
    Ok(())
}

#[test]
fn oversized_get_is_refused_before_reading() -> Result {
    let dir = tempfile::tempdir()?;
    let blobs = BlobStore::open(&data_dir(dir.path())?)?;
    let bytes = vec![7_u8; 10_000];
    let id = blobs.put(&bytes)?;
    assert!(matches!(
        blobs.get(id, 9_999),
        Err(StoreError::TooLarge { id: big, size: 10_000, max: 9_999 }) if big == id
    ));
    // A blob grown on disk to a terabyte (sparse) is refused from its size at
    // once: neither allocated nor read.
    let file = blob_file(dir.path(), &id);
    std::fs::OpenOptions::new().write(true).open(&file)?.set_len(1 << 40)?;
    assert!(matches!(blobs.get(id, 1 << 20), Err(StoreError::TooLarge { size, .. }) if size == 1 << 40));
    Ok(())
}

#[test]
fn symlink_planted_at_runtime_dir_is_refused_and_nothing_is_written_through_it() -> Result {
    let dir = tempfile::tempdir()?;
    let workspace = dir.path().join("ws");
    let target = dir.path().join("elsewhere");
    std::fs::create_dir(&workspace)?;
    std::fs::create_dir(&target)?;
    std::os::unix::fs::symlink(&target, workspace.join(".vsh"))?;
    let handle = CapDir::open(&workspace)?;
    let error = DataDir::open_in_workspace(&handle, &DataDir::default_relative()).unwrap_err();
    assert!(matches!(error, StoreError::DataDir { .. }), "{error:?}");
    assert_eq!(std::fs::read_dir(&target)?.count(), 0);

    // A symlink at `.vsh/data` (with a real `.vsh`) is refused as well.
    std::fs::remove_file(workspace.join(".vsh"))?;
    std::fs::create_dir(workspace.join(".vsh"))?;
    std::os::unix::fs::symlink(&target, workspace.join(".vsh/data"))?;
    let error = DataDir::open_in_workspace(&handle, &DataDir::default_relative()).unwrap_err();
    assert!(matches!(error, StoreError::DataDir { .. }), "{error:?}");
    assert_eq!(std::fs::read_dir(&target)?.count(), 0);
    Ok(())
}

#[test]
fn data_dir_is_created_private_and_external_dirs_work() -> Result {
    let dir = tempfile::tempdir()?;
    let data = data_dir(dir.path())?;
    let meta = std::fs::metadata(dir.path().join(".vsh/data"))?;
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o077, 0);
    drop(data);
    assert!(matches!(
        DataDir::open_in_workspace(&CapDir::open(dir.path())?, &VPath::root()),
        Err(StoreError::DataDirIsRoot)
    ));
    let external = DataDir::open_external(&dir.path().join("ext/data"))?;
    let blobs = BlobStore::open(&external)?;
    let id = blobs.put(b"x")?;
    assert!(dir.path().join("ext/data/blobs").join(BlobStore::relative_path(&id).as_str()).is_file());
    Ok(())
}

#[test]
fn record_round_trip_through_the_store() -> Result {
    let dir = tempfile::tempdir()?;
    let store = TransactionStore::open(&data_dir(dir.path())?)?;
    let first = record(b"one", S::Created);
    store.create(&first)?;
    assert_eq!(store.get(first.id)?, Some(first));
    assert_eq!(store.get(TransactionId::digest(b"absent"))?, None);
    let moved = store.compare_and_transition(first.id, S::Created, S::Running, 2_000)?;
    assert_eq!(moved.state, S::Running);
    assert_eq!((moved.created_ms, moved.updated_ms), (1_000, 2_000));
    let artifact = BlobId::of(b"artifact");
    assert_eq!(store.set_artifact(first.id, artifact)?.artifact, Some(artifact));
    assert_eq!(store.set_artifact(first.id, artifact)?.artifact, Some(artifact));
    assert!(matches!(
        store.set_artifact(first.id, BlobId::of(b"another")),
        Err(StoreError::ArtifactConflict { existing, .. }) if existing == artifact
    ));
    let second = record(b"two", S::Created);
    store.create(&second)?;
    // A fresh handle sees the same durable state.
    let reopened = TransactionStore::open(&data_dir(dir.path())?)?;
    let listed = reopened.list()?;
    let mut expected = vec![store.get(first.id)?.unwrap(), second];
    expected.sort_by_key(|record| record.id);
    assert_eq!(listed, expected);
    assert!(listed.iter().any(|record| record.id == first.id && record.state == S::Running));
    Ok(())
}

#[test]
fn corrupt_record_file_is_detected_never_returned() -> Result {
    let dir = tempfile::tempdir()?;
    let store = TransactionStore::open(&data_dir(dir.path())?)?;
    let rec = record(b"victim", S::Created);
    store.create(&rec)?;
    let file = dir.path().join(".vsh/data/txns").join(rec.id.to_hex());
    flip_byte(&file, 80)?;
    assert!(matches!(store.get(rec.id), Err(StoreError::CorruptRecord { id, .. }) if id == rec.id));
    assert!(matches!(store.list(), Err(StoreError::CorruptRecord { .. })));
    assert!(matches!(
        store.compare_and_transition(rec.id, S::Created, S::Running, 5),
        Err(StoreError::CorruptRecord { .. })
    ));
    // A record copied under another transaction's name is refused too.
    let other = TransactionId::digest(b"other");
    store.create(&record(b"source", S::Created))?;
    let source = dir.path().join(".vsh/data/txns").join(TransactionId::digest(b"source").to_hex());
    std::fs::copy(&source, dir.path().join(".vsh/data/txns").join(other.to_hex()))?;
    assert!(matches!(store.get(other), Err(StoreError::CorruptRecord { id, .. }) if id == other));
    Ok(())
}

#[test]
fn duplicate_create_is_refused() -> Result {
    let dir = tempfile::tempdir()?;
    let store = TransactionStore::open(&data_dir(dir.path())?)?;
    let rec = record(b"dup", S::Created);
    store.create(&rec)?;
    let mut changed = rec;
    changed.state = S::Running;
    assert!(matches!(store.create(&changed), Err(StoreError::Duplicate { id }) if id == rec.id));
    assert_eq!(store.get(rec.id)?, Some(rec));
    assert_eq!(std::fs::read_dir(dir.path().join(".vsh/data/txns/tmp"))?.count(), 0);
    Ok(())
}

#[test]
fn cas_conflicts_and_illegal_transitions_are_typed() -> Result {
    let dir = tempfile::tempdir()?;
    let store = TransactionStore::open(&data_dir(dir.path())?)?;
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
    let missing = TransactionId::digest(b"missing");
    assert!(matches!(
        store.compare_and_transition(missing, S::Created, S::Running, 2),
        Err(StoreError::NotFound { id }) if id == missing
    ));
    // Nothing changed.
    assert_eq!(store.get(rec.id)?, Some(rec));
    Ok(())
}

#[test]
fn two_handles_racing_one_cas_have_exactly_one_winner() -> Result {
    let dir = tempfile::tempdir()?;
    let setup = TransactionStore::open(&data_dir(dir.path())?)?;
    for round in 0..20_u8 {
        let rec = record(&[b'r', round], S::AutoApproved);
        setup.create(&rec)?;
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let root = dir.path().to_owned();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let store = TransactionStore::open(&data_dir(&root).unwrap()).unwrap();
                    barrier.wait();
                    store.compare_and_transition(rec.id, S::AutoApproved, S::Reserved, 9)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|handle| handle.join().unwrap()).collect();
        let winners = results.iter().filter(|result| result.is_ok()).count();
        assert_eq!(winners, 1, "round {round}: {results:?}");
        assert!(results.iter().any(|result| matches!(
            result,
            Err(StoreError::StateConflict { expected: S::AutoApproved, actual: S::Reserved, .. })
        )));
        assert_eq!(setup.get(rec.id)?.map(|record| record.state), Some(S::Reserved));
    }
    Ok(())
}

#[test]
fn stale_temporary_records_are_removed_on_open() -> Result {
    let dir = tempfile::tempdir()?;
    drop(TransactionStore::open(&data_dir(dir.path())?)?);
    let stale = dir.path().join(".vsh/data/txns/tmp/123-0-0.tmp");
    std::fs::write(&stale, b"half a record")?;
    let store = TransactionStore::open(&data_dir(dir.path())?)?;
    assert!(!stale.exists());
    assert!(store.list()?.is_empty());
    Ok(())
}
