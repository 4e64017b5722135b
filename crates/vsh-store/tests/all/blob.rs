//! The data directory and the blob store: layout, verified reads, repair,
//! size bounds, symlink refusal, and fail-stop after a storage fault.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use vsh_host::CapDir;
use vsh_store::{BlobStatus, BlobStore, DataDir, FaultKind, FaultPlan, FaultyBackend, PutOutcome, StoreError};
use vsh_types::{BlobId, VPath};

use crate::Result;
use crate::common::{backend, data_dir};

fn blob_file(root: &Path, id: &BlobId) -> std::path::PathBuf {
    root.join(".vsh/data/blobs").join(BlobStore::relative_path(id).as_str())
}

fn flip_byte(path: &Path, index: usize) -> Result {
    let mut bytes = std::fs::read(path)?;
    bytes[index] ^= 0x20;
    std::fs::write(path, bytes)?;
    Ok(())
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
    // Reported with its id and the file's path.
    assert!(matches!(blobs.get(id, 1024), Err(StoreError::CorruptBlob { id: bad, path }) if bad == id && path == file));
    assert!(matches!(blobs.contains(id), Err(StoreError::CorruptBlob { .. })));
    assert_eq!(blobs.status(id)?, BlobStatus::Corrupt { path: file.clone() });
    assert_eq!(blobs.put_expected_with_outcome(b"precious content", id)?, PutOutcome::Repaired);
    assert_eq!(blobs.status(id)?, BlobStatus::Intact);
    assert_eq!(blobs.put_with_outcome(b"precious content")?, (id, PutOutcome::AlreadyPresent));
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
    let error = DataDir::open_in_workspace(&handle, &vsh_types::VshLayout::default_data()).unwrap_err();
    assert!(matches!(error, StoreError::DataDir { .. }), "{error:?}");
    assert_eq!(std::fs::read_dir(&target)?.count(), 0);

    // A symlink at `.vsh/data` (with a real `.vsh`) is refused as well.
    std::fs::remove_file(workspace.join(".vsh"))?;
    std::fs::create_dir(workspace.join(".vsh"))?;
    std::os::unix::fs::symlink(&target, workspace.join(".vsh/data"))?;
    let error = DataDir::open_in_workspace(&handle, &vsh_types::VshLayout::default_data()).unwrap_err();
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
fn failed_blob_write_poisons_and_leaves_no_torn_blob() -> Result {
    let content = b"bytes that must arrive whole".as_slice();
    let id = BlobId::of(content);
    // A data directory whose blob store exists already, as in every iteration below.
    let prepared = || -> Result<tempfile::TempDir> {
        let dir = tempfile::tempdir()?;
        BlobStore::open(&data_dir(dir.path())?)?;
        Ok(dir)
    };
    for kind in [FaultKind::Write, FaultKind::Fsync, FaultKind::Rename] {
        // Count the steps of opening the store and of one put.
        let dir = prepared()?;
        let counting = Arc::new(FaultyBackend::new(backend(dir.path())?, None));
        let blobs = BlobStore::open_with(counting.clone())?;
        let opening = counting.counts().of(kind);
        blobs.put(content)?;
        let total = counting.counts().of(kind);
        assert!(kind == FaultKind::Rename || total > opening, "{kind:?}: a put writes and syncs");
        for nth in opening + 1..=total {
            let dir = prepared()?;
            let faulty = Arc::new(FaultyBackend::new(backend(dir.path())?, Some(FaultPlan::fail_nth(kind, nth))));
            let blobs = BlobStore::open_with(faulty)?;
            let error = blobs.put(content).expect_err("the planned fault fails the put");
            assert!(matches!(error, StoreError::Io { .. }), "{kind:?} {nth}: {error:?}");
            assert!(blobs.is_poisoned());
            assert!(matches!(blobs.get(id, 1024), Err(StoreError::Poisoned)));
            assert!(matches!(blobs.put(b"other"), Err(StoreError::Poisoned)));
            // Reopened, the blob is either absent or whole, never torn.
            let reopened = BlobStore::open(&data_dir(dir.path())?)?;
            match reopened.get(id, 1024) {
                Ok(bytes) => assert_eq!(bytes, content),
                Err(StoreError::MissingBlob { .. }) => {}
                Err(other) => panic!("{kind:?} {nth}: {other:?}"),
            }
            assert_eq!(reopened.put(content)?, id);
            assert_eq!(reopened.get(id, 1024)?, content);
        }
    }
    Ok(())
}

#[test]
fn a_fact_about_a_path_never_stops_the_store() -> Result {
    let dir = tempfile::tempdir()?;
    let blobs = BlobStore::open(&data_dir(dir.path())?)?;
    // A directory where a blob belongs: the path is wrong, the storage is fine.
    let id = BlobId::of(b"a directory sits here");
    let path = blob_file(dir.path(), &id);
    std::fs::create_dir_all(&path)?;
    assert!(blobs.get(id, 1024).is_err());
    assert!(!blobs.is_poisoned(), "a wrong kind of node is not a storage failure");
    blobs.put(b"other bytes")?;
    // A directory of the store that someone removed: missing is a fact too.
    std::fs::remove_dir(dir.path().join(".vsh/data/blobs/tmp"))?;
    let store =
        vsh_store::TransactionStore::open(&data_dir(dir.path())?, &vsh_types::AuthorityKey::from_bytes([3; 32]))?;
    let swept =
        store.gc(&blobs, u64::MAX / 2, &vsh_store::RetentionConfig::default(), &std::collections::BTreeSet::new());
    assert!(swept.is_err());
    assert!(!blobs.is_poisoned(), "a missing directory is not a storage failure");
    Ok(())
}

#[test]
fn the_backend_tells_files_from_other_nodes() -> Result {
    use vsh_store::StoreBackend as _;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("file"), b"12345")?;
    std::fs::create_dir(dir.path().join("dir"))?;
    let backend = vsh_store::CapDirBackend::new(vsh_host::WritableDir::new(std::sync::Arc::new(
        vsh_host::CapDir::open(dir.path())?,
    )));
    let file = backend.stat(&vsh_types::VPath::parse("file")?)?.expect("the file");
    assert!(file.is_file && file.len == 5);
    let directory = backend.stat(&vsh_types::VPath::parse("dir")?)?.expect("the directory");
    assert!(!directory.is_file);
    assert!(backend.stat(&vsh_types::VPath::parse("absent")?)?.is_none());
    Ok(())
}

#[test]
fn the_store_makes_its_directories_with_its_first_blob_and_their_barriers_before_that_blob_is_durable() -> Result {
    let dir = tempfile::tempdir()?;
    let data = crate::common::data_path(dir.path());
    let counting = Arc::new(FaultyBackend::new(backend(dir.path())?, None));
    let blobs = BlobStore::open_with(counting.clone())?;
    // Opening makes nothing and costs no barrier.
    assert!(!data.join("blobs").exists());
    assert_eq!(counting.counts().fsyncs, 0);
    assert!(!blobs.contains(BlobId::of(b"x"))?, "a store without blobs/ holds nothing");
    // A deferred write makes them without a barrier ...
    let content = b"the first blob";
    let id = BlobId::of(content);
    assert_eq!(blobs.put_expected_deferred(content, id)?, PutOutcome::Written);
    assert!(data.join("blobs/tmp").is_dir());
    assert_eq!(counting.counts().fsyncs, 0, "no barrier for a deferred write, nor for the directories it made");
    // ... and making it durable makes every entry leading to it durable:
    // the file, its shard, `blobs/` (its entries: `tmp/` and the shard) and
    // the data directory (its entry: `blobs/`).
    blobs.make_durable([id])?;
    assert_eq!(counting.counts().fsyncs, 4, "file, shard, blobs/ and the data directory");
    // The next durable write pays only its own barriers.
    let before = counting.counts().fsyncs;
    blobs.put(b"a second blob")?;
    assert_eq!(counting.counts().fsyncs, before + 3, "its temporary file, its new shard and blobs/ for the shard");
    // A durable first write makes the directories durable before it returns.
    let fresh = tempfile::tempdir()?;
    let counting = Arc::new(FaultyBackend::new(backend(fresh.path())?, None));
    BlobStore::open_with(counting.clone())?.put(content)?;
    assert_eq!(
        counting.counts().fsyncs,
        2 + 3,
        "the data directory and blobs/ for the store's directories, then the blob's"
    );
    Ok(())
}

#[test]
fn a_deferred_blob_is_readable_at_once_and_made_durable_only_when_asked() -> Result {
    let dir = tempfile::tempdir()?;
    // The store's directories exist (another handle stored a blob).
    BlobStore::open(&data_dir(dir.path())?)?.put(b"an earlier blob")?;
    let counting = Arc::new(FaultyBackend::new(backend(dir.path())?, None));
    let blobs = BlobStore::open_with(counting.clone())?;
    let content = b"a preview's new file";
    let id = BlobId::of(content);
    let before = counting.counts().fsyncs;
    assert_eq!(blobs.put_expected_deferred(content, id)?, PutOutcome::Written);
    assert_eq!(counting.counts().fsyncs, before, "no barrier for a deferred write");
    assert_eq!(blobs.get(id, 1024)?, content, "readable at once");
    assert!(matches!(blobs.put_expected_deferred(b"other", id), Err(StoreError::DigestMismatch { .. })));
    // Made durable once: the file, its shard (new) and the blob directory.
    blobs.make_durable([id])?;
    assert_eq!(counting.counts().fsyncs, before + 3, "file, shard and blob directory");
    blobs.make_durable([id, BlobId::of(b"never stored")])?;
    assert_eq!(counting.counts().fsyncs, before + 3, "nothing left to make durable");
    // A deferred blob that a durable writer stores again is made durable then.
    let again = b"stored for a preview, then for pending work";
    let again_id = BlobId::of(again);
    blobs.put_expected_deferred(again, again_id)?;
    let deferred = counting.counts().fsyncs;
    assert_eq!(blobs.put_expected(again, again_id)?, again_id);
    assert!(counting.counts().fsyncs > deferred, "the durable store of an intact deferred copy syncs it");
    let synced = counting.counts().fsyncs;
    blobs.make_durable([again_id])?;
    assert_eq!(counting.counts().fsyncs, synced);
    // A torn deferred copy (what a crash may leave) is refused, then repaired.
    let torn = b"torn by a crash";
    let torn_id = BlobId::of(torn);
    blobs.put_expected_deferred(torn, torn_id)?;
    std::fs::write(blob_file(dir.path(), &torn_id), b"")?;
    let reopened = BlobStore::open(&data_dir(dir.path())?)?;
    assert!(matches!(reopened.get(torn_id, 1024), Err(StoreError::CorruptBlob { .. })));
    assert_eq!(reopened.put_expected_with_outcome(torn, torn_id)?, PutOutcome::Repaired);
    assert_eq!(reopened.get(torn_id, 1024)?, torn);
    Ok(())
}

#[test]
fn scratch_directories_are_one_directory_per_name_however_deep_and_never_outside() -> Result {
    let dir = tempfile::tempdir()?;
    let data = data_dir(dir.path())?;
    let scratch = dir.path().join(".vsh/data/scratch");
    assert_eq!(data.scratch_dir("target")?, scratch.join("target"));
    // A nested name is one directory, its `/` (and `%`) encoded.
    assert_eq!(data.scratch_dir("node_modules/.cache")?, scratch.join("node_modules%2F.cache"));
    assert_eq!(data.scratch_dir("a%2Fb")?, scratch.join("a%252Fb"), "no name can pass for another");
    assert!(scratch.join("node_modules%2F.cache").is_dir());
    assert_eq!(std::fs::metadata(scratch.join("target"))?.permissions().mode() & 0o777, 0o777);
    for bad in ["..", "../x", "a/../b", "/abs", "a//b", ""] {
        assert!(matches!(data.scratch_dir(bad), Err(StoreError::DataDir { .. })), "{bad:?}");
    }
    let mut names: Vec<String> = std::fs::read_dir(&scratch)?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    names.sort();
    assert_eq!(names, ["a%252Fb", "node_modules%2F.cache", "target"]);
    Ok(())
}
