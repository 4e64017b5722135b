//! Nothing lost, nothing forged, end to end: what the record says always
//! agrees with the disk, a racing writer's bytes are never lost, a record and
//! its artifact exist together or not at all, and one corrupt blob repairs
//! itself instead of blocking work.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};

use vsh::lower::vsh_commit::{CommitError, CrashAt, FaultInjector, FaultPoint};
use vsh::{BlobId, PrincipalId, RunMode, RunRequest, Runtime, RuntimeDecision, TransactionState, VshError, Warning};
use vsh_integration_tests::{Entry, config, tree, workspace};

/// Appends to `a.txt` once, right after the commit installed its new content.
struct AppendAfterInstall {
    root: std::path::PathBuf,
    done: Mutex<bool>,
}

impl FaultInjector for AppendAfterInstall {
    fn crash_at(&self, point: FaultPoint) -> bool {
        let mut done = self.done.lock().unwrap();
        let path = self.root.join("a.txt");
        if !*done
            && matches!(point, FaultPoint::OperationApplied(_))
            && std::fs::read(&path).is_ok_and(|b| b == b"changed")
        {
            use std::io::Write;
            std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b" +theirs").unwrap();
            *done = true;
        }
        false
    }
}

fn approved(runtime: &Runtime, receipt: &vsh::Receipt) {
    if matches!(receipt.decision, RuntimeDecision::PendingApproval(_)) {
        runtime.approve(receipt.transaction, PrincipalId::digest(b"reviewer"), 1_000, u64::MAX).unwrap();
    }
}

#[test]
fn a_writer_racing_the_commit_keeps_its_bytes_and_the_record_agrees_with_the_disk() {
    let mut files: Vec<(String, String)> = (0..30).map(|i| (format!("f{i:02}.txt"), format!("old {i}\n"))).collect();
    files.push(("a.txt".to_owned(), "alpha".to_owned()));
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
    let dir = workspace(&borrowed);
    let before = tree(dir.path());
    let writer = Arc::new(AppendAfterInstall { root: dir.path().to_owned(), done: Mutex::new(false) });
    let runtime = Runtime::open(config(dir.path()).with_commit_fault_injector(writer.clone())).unwrap();
    let program = "from pathlib import Path\n\
                   Path('/workspace/a.txt').write_text('changed')\n\
                   for i in range(30):\n    Path(f'/workspace/f{i:02}.txt').write_text(f'new {i}\\n')\n";
    let receipt = runtime.preview(&RunRequest::new(program)).unwrap();
    approved(&runtime, &receipt);
    let error = runtime.commit(receipt.transaction, 2_000).unwrap_err();
    let VshError::Commit(CommitError::Unresolved { paths, .. }) = &error else { panic!("{error:?}") };
    assert!(*writer.done.lock().unwrap());
    assert!(paths.iter().all(|left| left.path.as_str() == "a.txt"), "{paths:?}");
    // The record does not claim Failed: the workspace does not hold the before state at a.txt.
    let record = runtime.transaction(receipt.transaction).unwrap().unwrap();
    assert_eq!(record.state, TransactionState::RecoveryRequired);
    // Every other file is back; a.txt holds the writer's bytes.
    let mut expected = before.clone();
    expected.insert("a.txt".to_owned(), Entry::File(b"changed +theirs".to_vec(), 0o644));
    assert_eq!(tree(dir.path()), expected);
    drop(runtime);

    // A new process sees it settled: reported, and not blocking other work.
    let runtime = Runtime::open(config(dir.path())).unwrap();
    let startup = runtime.startup_recovery();
    assert!(startup.is_clean(), "{startup:?}");
    assert_eq!(startup.unresolved.len(), 1, "{startup:?}");
    assert_eq!(startup.unresolved[0].transaction, receipt.transaction);
    let other = runtime
        .run(
            &RunRequest::new("from pathlib import Path\nPath('/workspace/new.txt').write_text('n')")
                .with_mode(RunMode::Auto),
        )
        .unwrap();
    assert_eq!(other.state, TransactionState::Committed);
    // The operator restores: a.txt back as it was, the writer's version moved aside.
    let restored = runtime.restore(receipt.transaction).unwrap();
    assert_eq!(restored.restored.iter().map(vsh::VPath::as_str).collect::<Vec<_>>(), vec!["a.txt"]);
    let (_, aside) = &restored.moved_aside[0];
    assert_eq!(std::fs::read(dir.path().join(aside.as_str())).unwrap(), b"changed +theirs");
    assert_eq!(runtime.transaction(receipt.transaction).unwrap().unwrap().state, TransactionState::Failed);
    let mut expected = before;
    expected.insert("new.txt".to_owned(), Entry::File(b"n".to_vec(), 0o644));
    assert_eq!(tree(dir.path()), expected);
}

#[test]
fn an_intent_too_long_to_keep_is_refused_before_anything_runs_or_is_stored() {
    let dir = workspace(&[("old.txt", "old\n")]);
    let runtime = Runtime::open(config(dir.path())).unwrap();
    let intent = "x".repeat(70 * 1024);
    let program = "from pathlib import Path\nPath('/workspace/old.txt').unlink()";
    let refused = runtime.preview(&RunRequest::new(program).with_intent(&intent));
    assert!(
        matches!(refused, Err(VshError::IntentTooLarge { length, max }) if length == 70 * 1024 && max == 64 * 1024),
        "{refused:?}"
    );
    assert!(runtime.pending().unwrap().is_empty());
    // The same work with a short intent is stored whole: record and artifact together.
    let pending = runtime.preview(&RunRequest::new(program).with_intent("delete old.txt")).unwrap();
    assert_eq!(pending.state, TransactionState::PendingApproval);
    let record = runtime.transaction(pending.transaction).unwrap().unwrap();
    assert!(record.artifact.is_some());
    assert!(runtime.show(pending.transaction).unwrap().is_some());
}

#[test]
fn a_corrupt_blob_is_repaired_by_the_next_run_that_produces_the_same_bytes_and_reported_once() {
    let dir = workspace(&[("keep.txt", "keep\n")]);
    // Durable previews store their contents (a process-local one keeps them
    // in memory), in the blob store when they are too large to travel inline
    // in the artifact (64 KiB).
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    let program = "from pathlib import Path\nPath('/workspace/p.txt').write_text('payload' * 10000)";
    let payload = b"payload".repeat(10_000);
    let first = runtime.preview(&RunRequest::new(program)).unwrap();
    assert!(first.warnings.is_empty());
    let id = BlobId::of(&payload);
    let hex = id.to_hex();
    let blob = dir.path().join(".vsh/data/blobs").join(&hex[..2]).join(&hex[2..]);
    assert_eq!(std::fs::read(&blob).unwrap(), payload);
    std::fs::write(&blob, b"garbage!").unwrap();

    let second = runtime.preview(&RunRequest::new(program)).unwrap();
    assert_eq!(second.warnings, vec![Warning::BlobRepaired { id, path: std::fs::canonicalize(&blob).unwrap() }]);
    assert_eq!(std::fs::read(&blob).unwrap(), payload);
    let third = runtime.run(&RunRequest::new(program).with_mode(RunMode::Auto)).unwrap();
    assert!(third.warnings.is_empty(), "{:?}", third.warnings);
    assert_eq!(third.state, TransactionState::Committed);
    assert_eq!(std::fs::read(dir.path().join("p.txt")).unwrap(), payload);
}

#[test]
fn an_approval_forged_into_the_log_without_the_key_fails_closed() {
    use vsh::lower::vsh_store::txlog::{LogEntry, LogKey, encode_frame};
    use vsh::lower::vsh_store::{ApprovalGrant, StoreError};
    let dir = workspace(&[("old.txt", "old\n")]);
    let before = tree(dir.path());
    let key = vsh::AuthorityKey::from_bytes([3; 32]);
    let open = |key: &vsh::AuthorityKey| Runtime::open(config(dir.path()).with_authority_key(key.clone()));
    let runtime = open(&key).unwrap();
    let pending =
        runtime.preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/old.txt').unlink()")).unwrap();
    assert_eq!(pending.state, TransactionState::PendingApproval);
    let record = runtime.transaction(pending.transaction).unwrap().unwrap();
    drop(runtime);

    // Someone who can write the data directory, but holds no key, appends an
    // approval frame built exactly as the format says, sealed with the only
    // key they have (the public one).
    let log = dir.path().join(".vsh/data/txlog");
    let mut bytes = std::fs::read(&log).unwrap();
    let mut approved = record;
    approved.sequence += 1;
    approved.updated_ms += 1;
    approved.state = TransactionState::Approved;
    approved.approval = Some(ApprovalGrant::new(record.id, PrincipalId::digest(b"forger"), 1, u64::MAX).unwrap());
    let generation = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let frame =
        encode_frame(&LogKey::unauthenticated(), generation, bytes.len() as u64, &LogEntry::Version(approved).encode());
    bytes.extend_from_slice(&frame);
    std::fs::write(&log, &bytes).unwrap();

    // Fail closed: the runtime refuses the log, nothing commits.
    let refused = open(&key);
    assert!(matches!(refused, Err(VshError::Store(StoreError::CorruptLog { .. }))), "{refused:?}");
    assert_eq!(tree(dir.path()), before);
    // A runtime with another key cannot even read it.
    let other = open(&vsh::AuthorityKey::from_bytes([4; 32]));
    assert!(matches!(other, Err(VshError::Store(StoreError::WrongAuthorityKey { .. }))), "{other:?}");
}

#[test]
fn an_authority_key_file_inside_the_workspace_is_refused() {
    let dir = workspace(&[("a.txt", "a\n"), ("keys/README", "keys go here\n")]);
    let inside = dir.path().join("keys/authority.key");
    let refused = Runtime::open(config(dir.path()).with_authority_key_file(&inside));
    assert!(matches!(&refused, Err(VshError::AuthorityKeyInWorkspace(path)) if path.as_str() == "keys"), "{refused:?}");
    assert!(!inside.exists(), "no key was written inside the workspace");
    // Nor is a directory for it made there.
    let deeper = dir.path().join("new/vsh/authority.key");
    let refused = Runtime::open(config(dir.path()).with_authority_key_file(&deeper));
    assert!(matches!(&refused, Err(VshError::AuthorityKeyInWorkspace(_))), "{refused:?}");
    assert!(!dir.path().join("new").exists(), "no directory was made inside the workspace");
    // Outside it, the file is made and used.
    let outside = tempfile::tempdir().unwrap();
    let key_file = outside.path().join("vsh/authority.key");
    let runtime = Runtime::open(config(dir.path()).with_authority_key_file(&key_file)).unwrap();
    assert!(key_file.exists());
    assert!(runtime.preview(&RunRequest::new("1")).is_ok());
}

#[test]
fn a_run_that_needs_an_old_stored_copy_restarts_its_grace_period() {
    let dir = workspace(&[("a.txt", "a\n")]);
    // Durable previews store their contents (a process-local one keeps them
    // in memory), in the blob store when they are too large to travel inline
    // in the artifact (64 KiB).
    let runtime = Runtime::open(config(dir.path()).with_durable_previews(vsh::DurablePreviews::default())).unwrap();
    let program = "from pathlib import Path\nPath('/workspace/new.txt').write_text('shared bytes' * 6000)";
    let shared = b"shared bytes".repeat(6000);
    runtime.preview(&RunRequest::new(program)).unwrap();
    let id = BlobId::of(&shared).to_hex();
    let blob = dir.path().join(".vsh/data/blobs").join(&id[..2]).join(&id[2..]);
    let eleven_minutes_ago = std::time::SystemTime::now() - std::time::Duration::from_mins(11);
    std::fs::File::options().write(true).open(&blob).unwrap().set_modified(eleven_minutes_ago).unwrap();
    // A second run producing the same bytes keeps the copy fresh for garbage collection.
    runtime.preview(&RunRequest::new(program)).unwrap();
    let modified = std::fs::metadata(&blob).unwrap().modified().unwrap();
    assert!(modified > eleven_minutes_ago + std::time::Duration::from_mins(5), "the copy was refreshed");
    assert_eq!(std::fs::read(&blob).unwrap(), shared);
}

/// The worker-digest record of `docs/store-format.md`, built from that
/// layout here (not by the code under test), with its MAC under `key`.
fn worker_digest_record(key: &vsh::AuthorityKey, path: &std::path::Path, digest: [u8; 32]) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).unwrap();
    let mut out = b"VSHWDG01".to_vec();
    let name = path.as_os_str().as_bytes();
    out.extend_from_slice(&(name.len() as u64).to_le_bytes());
    out.extend_from_slice(name);
    for value in [meta.dev(), meta.ino(), meta.size()] {
        out.extend_from_slice(&value.to_le_bytes());
    }
    for value in [meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec()] {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.extend_from_slice(&digest);
    let tag = key.mac("vsh 2026 worker digest v1").update(&out).finalize();
    out.extend_from_slice(&tag);
    out
}

#[test]
fn the_worker_binary_is_hashed_once_and_a_recorded_digest_is_taken_only_with_the_key_and_the_same_file() {
    // Copies of the worker: new inodes that no runtime of this process has pinned.
    let bin = tempfile::tempdir().unwrap();
    let copy = |name: &str| {
        let path = bin.path().join(name);
        std::fs::copy(vsh_integration_tests::test_worker(), &path).unwrap();
        std::fs::canonicalize(path).unwrap()
    };
    let key = vsh::AuthorityKey::from_bytes([5; 32]);
    let open = |dir: &tempfile::TempDir, worker: &std::path::Path| {
        Runtime::open(vsh::RuntimeConfig::new(dir.path()).with_worker_path(worker).with_authority_key(key.clone()))
            .unwrap()
    };
    let record_at = |dir: &tempfile::TempDir| dir.path().join(".vsh/data/worker-digest");

    // Hashed when nothing is recorded, and recorded as the format says.
    let first = copy("first");
    let real = *blake3::hash(&std::fs::read(&first).unwrap()).as_bytes();
    let dir = workspace(&[("a.txt", "a\n")]);
    let binary = open(&dir, &first).worker_binary().unwrap();
    assert_eq!((binary.path.as_path(), binary.digest), (first.as_path(), real));
    assert_eq!(std::fs::read(record_at(&dir)).unwrap(), worker_digest_record(&key, &first, real));

    // A record under the key for the same file and identity is taken as it
    // is (its digest is deliberately not the file's, to see it was not hashed).
    let second = copy("second");
    let dir = workspace(&[("a.txt", "a\n")]);
    std::fs::create_dir_all(dir.path().join(".vsh/data")).unwrap();
    std::fs::write(record_at(&dir), worker_digest_record(&key, &second, [9; 32])).unwrap();
    assert_eq!(open(&dir, &second).worker_binary().unwrap().digest, [9; 32]);

    // Under another key, or for another file, the binary is hashed.
    for (name, record_key, recorded_for) in
        [("third", vsh::AuthorityKey::from_bytes([6; 32]), None), ("fourth", key.clone(), Some(&second))]
    {
        let worker = copy(name);
        let dir = workspace(&[("a.txt", "a\n")]);
        std::fs::create_dir_all(dir.path().join(".vsh/data")).unwrap();
        let record = worker_digest_record(&record_key, recorded_for.unwrap_or(&worker), [9; 32]);
        std::fs::write(record_at(&dir), record).unwrap();
        assert_eq!(open(&dir, &worker).worker_binary().unwrap().digest, real, "{name}");
        assert_eq!(
            std::fs::read(record_at(&dir)).unwrap(),
            worker_digest_record(&key, &worker, real),
            "{name}: the record is replaced by the file's own"
        );
    }

    // A binary changed in place after it was recorded is hashed again.
    let fifth = copy("fifth");
    let dir = workspace(&[("a.txt", "a\n")]);
    std::fs::create_dir_all(dir.path().join(".vsh/data")).unwrap();
    std::fs::write(record_at(&dir), worker_digest_record(&key, &fifth, [9; 32])).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut bytes = std::fs::read(&fifth).unwrap();
    bytes.extend_from_slice(b"\0appended");
    std::fs::write(&fifth, &bytes).unwrap();
    let changed = *blake3::hash(&bytes).as_bytes();
    assert_eq!(open(&dir, &fifth).worker_binary().unwrap().digest, changed);
}

#[test]
fn a_workspace_that_is_or_lies_inside_a_vsh_runtime_directory_is_refused() {
    let dir = workspace(&[("a.txt", "a"), ("sub/b.txt", "b")]);
    // The runtime directory exists once a runtime opened the workspace.
    drop(Runtime::open(config(dir.path())).unwrap());
    let runtime = dir.path().join(".vsh");
    let linked = dir.path().join("sub/link-to-runtime");
    std::os::unix::fs::symlink(&runtime, &linked).unwrap();
    for root in [runtime.clone(), runtime.join("data"), runtime.join("txn"), linked] {
        std::fs::create_dir_all(&root).unwrap();
        let opened = Runtime::open(config(&root));
        assert!(matches!(opened, Err(VshError::WorkspaceInsideRuntime)), "{}: {:?}", root.display(), opened.err());
    }
    // Nothing was made there: its commit state is as the workspace's left it.
    assert!(!runtime.join(".vsh").exists() && !runtime.join("data/.vsh").exists());
    // A directory of the workspace, or one merely named like it elsewhere,
    // is a workspace of its own.
    assert!(Runtime::open(config(&dir.path().join("sub"))).is_ok());
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir(elsewhere.path().join("vsh")).unwrap();
    assert!(Runtime::open(config(&elsewhere.path().join("vsh"))).is_ok());
    // A directory named .vsh that is no runtime directory (no commit lock,
    // no transactions, no data) is a workspace like any other.
    std::fs::create_dir_all(elsewhere.path().join("dotfiles/.vsh/notes")).unwrap();
    assert!(Runtime::open(config(&elsewhere.path().join("dotfiles/.vsh/notes"))).is_ok());
}

/// ux66 F4: a commit killed before it changed anything ended Failed, and
/// reviewed work had to be run and approved again. Recovery now gives the
/// work back to commit again (`Approved` with its grant, or `AutoApproved`), and
/// it commits; work whose contents were never durable (a process-local
/// preview) still fails, having nothing to commit from.
#[test]
fn a_commit_killed_before_it_changed_anything_is_released_to_commit_again() {
    for (point, durable) in [
        (FaultPoint::PlanSynced, true),
        (FaultPoint::StageSynced, true),
        (FaultPoint::Revalidated, true),
        (FaultPoint::PlanSynced, false),
    ] {
        let dir = workspace(&[("a.txt", "one\n"), ("b.txt", "bee\n")]);
        let before = tree(dir.path());
        let base = || {
            let config = config(dir.path());
            if durable { config.with_durable_previews(vsh::DurablePreviews::default()) } else { config }
        };
        let killed = Runtime::open(base().with_commit_fault_injector(Arc::new(CrashAt::new(point)))).unwrap();
        // Reviewed work (a deletion waits for a reviewer); without durable
        // previews, auto-approved work, whose record its commit makes.
        let program = if durable {
            "from pathlib import Path\nPath('/workspace/a.txt').write_text('two\\n')\nPath('/workspace/b.txt').unlink()"
        } else {
            "from pathlib import Path\nPath('/workspace/a.txt').write_text('two\\n')"
        };
        let receipt = killed.preview(&RunRequest::new(program)).unwrap();
        let waits = if durable { TransactionState::PendingApproval } else { TransactionState::AutoApproved };
        assert_eq!(receipt.state, waits, "{:?}", receipt.decision);
        approved(&killed, &receipt);
        let error = killed.commit(receipt.transaction, 2_000).unwrap_err();
        assert!(matches!(error, VshError::Commit(CommitError::FaultInjected(_))), "{point:?}: {error:?}");
        drop(killed);
        assert_eq!(tree(dir.path()), before, "{point:?}: nothing was applied");
        // The next process's recovery releases it: approved again, to commit.
        let runtime = Runtime::open(base()).unwrap();
        let report = runtime.startup_recovery();
        let state = runtime.transaction(receipt.transaction).unwrap().map(|record| record.state);
        if !durable {
            assert_eq!(state, Some(TransactionState::Failed), "{point:?}: {report:?}");
            assert!(report.released.is_empty(), "{report:?}");
            continue;
        }
        assert_eq!(state, Some(TransactionState::Approved), "{point:?}: {report:?}");
        assert_eq!(report.released, vec![receipt.transaction], "{point:?}: {report:?}");
        let committed = runtime.commit(receipt.transaction, 3_000).unwrap();
        assert_eq!(committed.state, TransactionState::Committed, "{point:?}");
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "two\n");
        assert!(!dir.path().join("b.txt").exists());
    }
}

/// sec93 M2: a listing that took the commit lock after a commit was killed,
/// before any recovery ran (its runtime opened while the commit held the
/// lock), judged waiting work against the half-applied workspace and
/// recorded it stale for good. Under the lock, recovery runs first, as
/// before a commit: the waiting work is judged against the workspace put
/// back, stays waiting, and commits.
#[test]
fn a_listing_after_a_killed_commit_recovers_before_it_judges_waiting_work() {
    let dir = workspace(&[("a.txt", "one\n"), ("b.txt", "bee\n")]);
    let durable = || config(dir.path()).with_durable_previews(vsh::DurablePreviews::default());
    // The listing's runtime is open before the commit dies: its own
    // startup recovery found nothing to do.
    let lister = Runtime::open(durable()).unwrap();
    let waiting = lister
        .preview(&RunRequest::new(
            "from pathlib import Path\nPath('/workspace/c.txt').write_text(Path('/workspace/a.txt').read_text())",
        ))
        .unwrap();
    assert_eq!(waiting.state, TransactionState::AutoApproved, "{:?}", waiting.decision);
    let killed =
        Runtime::open(durable().with_commit_fault_injector(Arc::new(CrashAt::new(FaultPoint::OperationApplied(0)))))
            .unwrap();
    let dying = killed
        .preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/a.txt').write_text('two\\n')"))
        .unwrap();
    let error = killed.commit(dying.transaction, 2_000).unwrap_err();
    assert!(matches!(error, VshError::Commit(CommitError::FaultInjected(_))), "{error:?}");
    drop(killed);
    let half = std::fs::read_to_string(dir.path().join("a.txt")).ok();
    assert_ne!(half.as_deref(), Some("one\n"), "left half applied");
    let (_, found_stale) = lister.pending_and_stale().unwrap();
    assert!(found_stale.is_empty(), "nothing is stale once recovered: {found_stale:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\n", "recovered");
    let state = lister.transaction(waiting.transaction).unwrap().map(|record| record.state);
    assert_eq!(state, Some(TransactionState::AutoApproved));
    assert_eq!(lister.commit(waiting.transaction, 3_000).unwrap().state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("c.txt")).unwrap(), "one\n");
}

/// Writes to `a.txt` right after the commit installed its new content, then
/// kills the commit there: recovery cannot put `a.txt` back, the commit is
/// left unresolved for the operator.
struct TamperThenCrash {
    root: std::path::PathBuf,
}

impl FaultInjector for TamperThenCrash {
    fn crash_at(&self, point: FaultPoint) -> bool {
        let path = self.root.join("a.txt");
        if matches!(point, FaultPoint::OperationApplied(_)) && std::fs::read(&path).is_ok_and(|b| b == b"changed") {
            use std::io::Write;
            std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b" +theirs").unwrap();
            return true;
        }
        false
    }
}

/// sec94 L2: a commit killed while someone wrote to its path is left
/// unresolved, its paths half applied; a listing judged waiting work
/// against that and recorded it stale for good. A reader judges nothing
/// while a commit waits for the operator.
#[test]
fn a_listing_judges_nothing_while_a_killed_commit_waits_for_the_operator() {
    let dir = workspace(&[("a.txt", "alpha"), ("b.txt", "bee")]);
    let durable = || config(dir.path()).with_durable_previews(vsh::DurablePreviews::default());
    let lister = Runtime::open(durable()).unwrap();
    let read_a = "from pathlib import Path\nPath('/workspace/c.txt').write_text(Path('/workspace/a.txt').read_text())";
    let waiting = lister.preview(&RunRequest::new(read_a)).unwrap();
    assert_eq!(waiting.state, TransactionState::AutoApproved, "{:?}", waiting.decision);
    let injector = Arc::new(TamperThenCrash { root: dir.path().to_path_buf() });
    let killed = Runtime::open(durable().with_commit_fault_injector(injector)).unwrap();
    let dying = killed
        .preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/a.txt').write_text('changed')"))
        .unwrap();
    assert!(killed.commit(dying.transaction, 2_000).is_err());
    drop(killed);
    let (_, found_stale) = lister.pending_and_stale().unwrap();
    assert!(found_stale.is_empty(), "nothing judged while the operator's decision waits: {found_stale:?}");
    let state = lister.transaction(waiting.transaction).unwrap().map(|record| record.state);
    assert_eq!(state, Some(TransactionState::AutoApproved));
    let report = lister.recover().unwrap();
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
}
