//! Durable previews: an auto-approved preview stored with its artifact, so a
//! later runtime (another process) commits it, revalidated as always, bounded
//! in count and bytes, and only until it expires.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use vsh::{DurablePreviews, PolicyProfile, RunRequest, Runtime, RuntimeConfig, TransactionState, VshError};
use vsh_integration_tests::{config, put, tree, workspace};

const WRITE: &str =
    "from pathlib import Path\nPath('/workspace/b.txt').write_text(Path('/workspace/a.txt').read_text() + '!')";

fn durable(dir: &tempfile::TempDir, limits: DurablePreviews) -> RuntimeConfig {
    config(dir.path()).with_durable_previews(limits)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis().try_into().unwrap()
}

#[test]
fn a_durable_preview_is_committed_once_by_a_later_runtime() {
    let dir = workspace(&[("a.txt", "a")]);
    let preview = {
        let runtime = Runtime::open(durable(&dir, DurablePreviews::default())).unwrap();
        runtime.preview(&RunRequest::new(WRITE)).unwrap()
    };
    assert_eq!(preview.state, TransactionState::AutoApproved);
    assert!(!dir.path().join("b.txt").exists(), "a preview writes nothing");
    // Another runtime, as another process would open it (durable or not: the artifact is stored).
    let later = Runtime::open(config(dir.path())).unwrap();
    assert_eq!(later.show(preview.transaction).unwrap().map(|receipt| receipt.changed_paths), Some(1));
    let waiting: Vec<_> = later.pending().unwrap().into_iter().map(|record| record.id).collect();
    assert_eq!(waiting, [preview.transaction], "a durable preview waits for its commit");
    let committed = later.commit(preview.transaction, now_ms()).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "a!");
    assert!(matches!(
        later.commit(preview.transaction, now_ms()),
        Err(VshError::NotCommittable { state: TransactionState::Committed, .. })
    ));
    assert!(later.pending().unwrap().is_empty());
}

#[test]
fn without_the_opt_in_a_preview_stays_in_its_runtime_and_writes_no_record() {
    let dir = workspace(&[("a.txt", "a")]);
    let log = dir.path().join(".vsh/data/txlog");
    let runtime = Runtime::open(config(dir.path())).unwrap();
    let log_before = std::fs::read(&log).unwrap();
    let store_before = tree(&dir.path().join(".vsh"));
    let preview = runtime.preview(&RunRequest::new(WRITE).with_detail(vsh::ReceiptDetail::Full)).unwrap();
    let second =
        runtime.preview(&RunRequest::new("from pathlib import Path\nPath('c.txt').write_text('never kept')")).unwrap();
    assert_eq!(std::fs::read(&log).unwrap(), log_before, "a process-local preview touches no transaction log");
    assert_eq!(tree(&dir.path().join(".vsh")), store_before, "nor the blob store: its contents stay in memory");
    // Its review shows its own bytes, from memory.
    let review = runtime.review(preview.transaction).unwrap();
    assert!(review.iter().any(|file| file.hunks.as_ref().is_ok_and(|hunks| hunks.contains("+a!"))), "{review:?}");
    // Its own runtime still knows it by record, history and prefix.
    assert_eq!(runtime.transaction(preview.transaction).unwrap().unwrap().state, TransactionState::AutoApproved);
    assert_eq!(runtime.history(preview.transaction).unwrap().len(), 1);
    assert_eq!(runtime.resolve(&preview.transaction.to_hex()[..10]).unwrap(), preview.transaction);
    let later = Runtime::open(config(dir.path())).unwrap();
    assert!(later.pending().unwrap().is_empty(), "a preview held in memory waits for nothing here");
    assert!(matches!(
        later.commit(preview.transaction, now_ms()),
        Err(VshError::UnknownTransaction(id)) if id == preview.transaction
    ));
    assert!(!dir.path().join("b.txt").exists());
    // Committing writes its record first, then commits it exactly once.
    let committed = runtime.commit(preview.transaction, now_ms()).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(later.transaction(preview.transaction).unwrap().unwrap().state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "a!");
    let states: Vec<_> = runtime.history(preview.transaction).unwrap().iter().map(|v| v.record.state).collect();
    assert_eq!(states.first(), Some(&TransactionState::AutoApproved), "its record begins where the preview was");
    // A discarded one is recorded rejected, never committable by any runtime.
    assert!(runtime.discard_preview(second.transaction).unwrap());
    assert_eq!(later.transaction(second.transaction).unwrap().unwrap().state, TransactionState::Rejected);
    // Neither the commit (which staged the contents from memory) nor the
    // discard (after which nothing needs them) wrote a blob.
    assert_eq!(blob_files(dir.path()), Vec::<String>::new());
}

/// The blob files of the workspace's data directory (not the temporary ones;
/// none when no blob was ever stored, and `blobs/` was never made).
fn blob_files(workspace: &std::path::Path) -> Vec<String> {
    let blobs = workspace.join(".vsh/data/blobs");
    if !blobs.exists() {
        return Vec::new();
    }
    tree(&blobs).into_keys().filter(|path| path.len() > 3 && !path.starts_with("tmp")).collect()
}

#[test]
fn a_durable_preview_is_revalidated_and_refused_under_another_policy() {
    let dir = workspace(&[("a.txt", "a")]);
    let runtime = Runtime::open(durable(&dir, DurablePreviews::default())).unwrap();
    let stale = runtime.preview(&RunRequest::new(WRITE)).unwrap();
    let other_policy = runtime.preview(&RunRequest::new(WRITE)).unwrap();
    drop(runtime);
    put(dir.path(), "a.txt", "edited meanwhile");
    let before = tree(dir.path());
    let strict = Runtime::open(config(dir.path()).with_policy_profile(PolicyProfile::Strict)).unwrap();
    assert!(matches!(strict.commit(other_policy.transaction, now_ms()), Err(VshError::PolicyChanged(_))));
    let later = Runtime::open(config(dir.path())).unwrap();
    let refused = later.commit(stale.transaction, now_ms());
    assert!(matches!(refused, Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))), "{refused:?}");
    assert_eq!(tree(dir.path()), before);
    assert_eq!(later.transaction(stale.transaction).unwrap().unwrap().state, TransactionState::Stale);
}

#[test]
fn a_durable_preview_expires_and_then_never_commits() {
    let dir = workspace(&[("a.txt", "a")]);
    let limits = DurablePreviews { ttl_ms: 1, ..DurablePreviews::default() };
    let preview = Runtime::open(durable(&dir, limits)).unwrap().preview(&RunRequest::new(WRITE)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let later = Runtime::open(config(dir.path())).unwrap();
    let refused = later.commit(preview.transaction, now_ms());
    assert!(
        matches!(refused, Err(VshError::Store(vsh::lower::vsh_store::StoreError::PreviewExpired { .. }))),
        "{refused:?}"
    );
    assert_eq!(later.transaction(preview.transaction).unwrap().unwrap().state, TransactionState::Expired);
    assert!(!dir.path().join("b.txt").exists());
}

#[test]
fn durable_previews_are_bounded_in_count_and_bytes() {
    let dir = workspace(&[("a.txt", "a")]);
    let one = DurablePreviews { max_count: 1, ..DurablePreviews::default() };
    let runtime = Runtime::open(durable(&dir, one)).unwrap();
    let first = runtime.preview(&RunRequest::new(WRITE)).unwrap();
    let refused = runtime.preview(&RunRequest::new(WRITE));
    assert!(matches!(refused, Err(VshError::DurablePreviewCapacity { entries: 1, .. })), "{refused:?}");
    // Committing the first frees its place.
    runtime.commit(first.transaction, now_ms()).unwrap();
    runtime.preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/c.txt').write_text('c')")).unwrap();
    // A byte bound below one artifact's size refuses the very first.
    let other = workspace(&[("a.txt", "a")]);
    let tiny = DurablePreviews { max_bytes: 1, ..DurablePreviews::default() };
    let runtime = Runtime::open(durable(&other, tiny)).unwrap();
    runtime.preview(&RunRequest::new(WRITE)).unwrap();
    assert!(matches!(runtime.preview(&RunRequest::new(WRITE)), Err(VshError::DurablePreviewCapacity { .. })));
}

#[test]
fn a_preview_that_changes_nothing_is_never_stored_to_wait_for_a_commit() {
    let dir = workspace(&[("a.txt", "a")]);
    let runtime = Runtime::open(durable(&dir, DurablePreviews::default())).unwrap();
    let read =
        runtime.preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/a.txt').read_text()")).unwrap();
    assert_eq!((read.state, read.changed_paths), (TransactionState::AutoApproved, 0));
    // Nothing waits for it: not in this runtime's list, not in another's.
    assert!(runtime.pending().unwrap().is_empty());
    let later = Runtime::open(config(dir.path())).unwrap();
    assert!(later.pending().unwrap().is_empty(), "{:?}", later.pending());
    // Work that changes something still waits.
    let write = runtime.preview(&RunRequest::new(WRITE)).unwrap();
    let waiting: Vec<_> = later.pending().unwrap().into_iter().map(|record| record.id).collect();
    assert_eq!(waiting, [write.transaction]);
}

#[test]
fn work_kept_for_a_later_commit_never_takes_more_than_half_the_disk_left() {
    // Mounting needs root, as real commands do.
    if !vsh_integration_tests::candidates_available() {
        return;
    }
    let disk = vsh_integration_tests::SmallDisk::mount("40m");
    put(disk.path(), "a.txt", "a");
    let runtime = Runtime::open(config(disk.path()).with_durable_previews(DurablePreviews::default())).unwrap();
    // Files of 4 MiB (one write call's most) of distinct bytes each.
    let files = |count: usize| {
        format!(
            "from pathlib import Path\nfor i in range({count}):\n    \
             Path(f'/workspace/big{{i}}.bin').write_text(str(i) * (4 << 20))"
        )
    };
    // 12 MiB of about 40 available: kept.
    let kept = runtime.preview(&RunRequest::new(&files(3))).unwrap();
    assert_eq!(kept.state, TransactionState::AutoApproved);
    // Eight files, of which the store holds three: 20 MiB of the 28 or so
    // left, more than half of it: refused, nothing stored.
    let before = tree(&disk.path().join(".vsh/data/blobs"));
    let refused = runtime.preview(&RunRequest::new(&files(8)));
    let Err(VshError::StoreSpace { needed, available, .. }) = refused else { panic!("{refused:?}") };
    assert_eq!(needed, 5 * (4 << 20), "what the store does not hold yet");
    assert!(needed > available / 2, "{needed} of {available}");
    assert_eq!(tree(&disk.path().join(".vsh/data/blobs")), before);
    // What was kept still commits.
    runtime.commit(kept.transaction, now_ms()).unwrap();
    assert!(disk.path().join("big2.bin").is_file());
    // Small contents (carried inside the artifact) count too: 70 files of
    // 60 KiB, 4.1 MiB, on a disk of 8 MiB.
    let small = vsh_integration_tests::SmallDisk::mount("8m");
    put(small.path(), "a.txt", "a");
    let runtime = Runtime::open(config(small.path()).with_durable_previews(DurablePreviews::default())).unwrap();
    let many = "from pathlib import Path\nfor i in range(70):\n    Path(f'/workspace/s{i}.txt').write_text(str(i % 10) * (60 << 10) + str(i))";
    let refused = runtime.preview(&RunRequest::new(many));
    let Err(VshError::StoreSpace { needed, .. }) = refused else { panic!("{refused:?}") };
    assert!(needed > 70 * (60 << 10), "{needed}");
}
