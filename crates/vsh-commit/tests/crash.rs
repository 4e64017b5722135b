//! Crash injection: a transaction that creates, modifies, deletes and renames
//! files, changes modes, replaces kinds and symlinks and creates a directory
//! tree is stopped at every fault point of the commit (every per-operation
//! point included); a fresh committer then recovers, and the workspace must be
//! exactly the before tree or exactly the after tree (bytes, modes, kinds,
//! symlink targets), with the ledger agreeing: Committed if and only if after.
//! Recovery itself is then crashed at each of its steps and re-run.

mod support;

use std::sync::Arc;

use vsh_commit::{CommitError, CommitLedger, CrashAt, FaultPoint, MemoryLedger, NoLedger, RecoveryConflictReason};
use vsh_store::BlobStore;
use vsh_types::{TransactionState, VPath};
use vsh_vfs::{VfsError, VirtualFs};

use support::{Result, Run, Tree, Workspace, chmod, p, tree_difference, write};

/// Build the before tree under `root` (which exists and is empty).
fn build_before(root: &std::path::Path) {
    write(root, "a.txt", b"alpha");
    write(root, "d/b.txt", b"beta");
    write(root, "old/x", b"x");
    write(root, "old/sub/y", b"y");
    write(root, "script.sh", b"#!/bin/sh\n");
    chmod(root, "script.sh", 0o644);
    write(root, "k", b"a file that becomes a directory");
    std::fs::create_dir(root.join("z")).unwrap();
    std::fs::create_dir(root.join("keep")).unwrap();
    chmod(root, "keep", 0o755);
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("relink")).unwrap();
    write(root, "gone/1", b"one");
    write(root, "gone/deep/2", b"two");
    std::fs::create_dir(root.join("shared")).unwrap();
    chmod(root, "shared", 0o755);
    write(root, "locked.txt", b"readable");
    chmod(root, "locked.txt", 0o644);
}

/// The transaction, as a program would make it.
fn transaction(vfs: &mut VirtualFs) -> std::result::Result<(), VfsError> {
    vfs.write(&p("a.txt"), Arc::from(&b"changed"[..]))?;
    vfs.write(&p("d/new.txt"), Arc::from(&b"new"[..]))?;
    vfs.unlink(&p("d/b.txt"))?;
    vfs.rename(&p("old"), &p("moved"))?;
    vfs.mkdir_all(&p("t/u/v"), 0o750)?;
    vfs.write(&p("t/u/v/deep"), Arc::from(&b"deep"[..]))?;
    vfs.mkdir(&p("ro"), 0o555)?;
    vfs.mkdir(&p("ro/inner"), 0o500)?;
    vfs.write(&p("ro/inner/f"), Arc::from(&b"locked in"[..]))?;
    vfs.set_mode(&p("ro/inner/f"), 0o400)?;
    vfs.set_mode(&p("script.sh"), 0o755)?;
    vfs.set_mode(&p("keep"), 0o700)?;
    vfs.set_mode(&p("locked.txt"), 0o000)?;
    vfs.unlink(&p("link"))?;
    vfs.unlink(&p("relink"))?;
    vfs.symlink(&p("relink"), b"d/new.txt")?;
    vfs.symlink(&p("newlink"), b"../outside")?;
    vfs.unlink(&p("k"))?;
    vfs.mkdir(&p("k"), 0o755)?;
    vfs.write(&p("k/inside"), Arc::from(&b"inside"[..]))?;
    vfs.rmdir(&p("z"))?;
    vfs.write(&p("z"), Arc::from(&b"dir became file"[..]))?;
    vfs.remove_tree(&p("gone"))?;
    vfs.write(&p("shared/new"), Arc::from(&b"in a directory that becomes read-only"[..]))?;
    vfs.set_mode(&p("shared"), 0o555)?;
    Ok(())
}

/// A fresh workspace holding the before tree, and the run of the transaction on it.
struct Trial {
    _dir: tempfile::TempDir,
    ws: Workspace,
    run: Run,
}

impl Trial {
    fn new(blobs: &BlobStore) -> Result<Trial> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("ws");
        std::fs::create_dir(&root)?;
        build_before(&root);
        let ws = Workspace::open(&root)?;
        let run = ws.run(blobs, transaction)?;
        Ok(Trial { _dir: dir, ws, run })
    }

    /// A committer on new handles, as after a restart.
    fn reopened(&self) -> Result<Workspace> {
        Workspace::open(&self.ws.root)
    }
}

struct Reference {
    before: Tree,
    after: Tree,
    points: Vec<FaultPoint>,
    operations: usize,
}

/// Commit once without faults, recording every fault point passed.
fn reference(blobs: &BlobStore) -> Result<Reference> {
    let trial = Trial::new(blobs)?;
    let before = trial.ws.tree();
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let recorder = CrashAt::recording();
    let receipt = trial.ws.committer.commit_with_faults(&trial.run.request(blobs), &ledger, &recorder)?;
    assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::Committed));
    assert!(trial.ws.no_transaction_dirs());
    let after = trial.ws.tree();
    assert_ne!(before, after);
    Ok(Reference { before, after, points: recorder.seen(), operations: receipt.operations as usize })
}

fn check_outcome(trial: &Trial, reference: &Reference, point: FaultPoint, state: Option<TransactionState>) {
    let tree = trial.ws.tree();
    let expect_after = point >= FaultPoint::CommitMarkerSynced;
    let (expected, name) = if expect_after { (&reference.after, "after") } else { (&reference.before, "before") };
    assert!(
        tree == *expected,
        "crash at {point}: expected the {name} tree, differs at {:?}",
        tree_difference(&tree, expected)
    );
    if let Some(state) = state {
        let want = if expect_after { TransactionState::Committed } else { TransactionState::Failed };
        assert_eq!(state, want, "crash at {point}: ledger");
    }
    assert!(trial.ws.no_transaction_dirs(), "crash at {point}: transaction directory left");
}

#[test]
fn a_crash_at_every_fault_point_recovers_to_exactly_before_or_after() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;

    // Every per-operation point is passed, in order, around the global points.
    let count = u32::try_from(reference.operations)?;
    assert!(count >= 20, "the transaction lowers to {count} operations");
    let mut expected = vec![
        FaultPoint::PlanSynced,
        FaultPoint::StageSynced,
        FaultPoint::Revalidated,
        FaultPoint::CommitStatePersisted,
    ];
    expected.extend((0..count).map(FaultPoint::IntentSynced));
    expected.extend((0..count).map(FaultPoint::OperationApplied));
    expected.extend((0..count).map(FaultPoint::DoneSynced));
    expected.extend([
        FaultPoint::Applied,
        FaultPoint::Verified,
        FaultPoint::CommitMarkerSynced,
        FaultPoint::CommittedStatePersisted,
        FaultPoint::QuarantineRemoved,
    ]);
    assert_eq!(reference.points, expected);

    for (index, point) in reference.points.iter().copied().enumerate() {
        let trial = Trial::new(&blobs)?;
        assert_eq!(trial.ws.tree(), reference.before);
        let ledger = MemoryLedger::new();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let error = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(point));
        assert!(matches!(error, Err(CommitError::FaultInjected(at)) if at == point), "{point}: {error:?}");

        let restarted = trial.reopened()?;
        let report = restarted.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{point}: {:?}", report.conflicts);
        let resolved = report.rolled_forward.len() + report.rolled_back.len() + report.cleaned.len();
        assert_eq!(resolved, 1, "{point}: {report:?}");
        check_outcome(&trial, &reference, point, ledger.get(transaction));
        // Recovering again finds nothing.
        assert!(restarted.committer.recover(&ledger)?.is_empty());

        // Without a ledger the marker alone decides (every third point, to bound the time).
        if index % 3 == 0 {
            let trial = Trial::new(&blobs)?;
            let error =
                trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &NoLedger, &CrashAt::new(point));
            assert!(matches!(error, Err(CommitError::FaultInjected(_))), "{point}: {error:?}");
            let report = trial.reopened()?.committer.recover(&NoLedger)?;
            assert!(report.is_clean(), "{point} without a ledger: {:?}", report.conflicts);
            check_outcome(&trial, &reference, point, None);
        }
    }
    Ok(())
}

#[test]
fn a_crash_during_rollback_is_recovered_by_the_next_recovery() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    let last = u32::try_from(reference.operations - 1)?;
    // Stop the commit with every operation applied, then stop the rollback
    // after each undo in turn (and during its cleanup).
    let mut recovery_points: Vec<FaultPoint> = (0..=last).rev().map(FaultPoint::Undone).collect();
    recovery_points.push(FaultPoint::QuarantineRemoved);
    for recovery_point in recovery_points {
        let trial = Trial::new(&blobs)?;
        let ledger = MemoryLedger::new();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let crash = CrashAt::new(FaultPoint::OperationApplied(last));
        assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());

        let first = trial.reopened()?;
        let stopped = first.committer.recover_with_faults(&ledger, &CrashAt::new(recovery_point));
        assert!(matches!(stopped, Err(CommitError::FaultInjected(at)) if at == recovery_point), "{stopped:?}");
        let in_cleanup = recovery_point == FaultPoint::QuarantineRemoved;
        let state = if in_cleanup { TransactionState::Failed } else { TransactionState::RecoveryRequired };
        assert_eq!(ledger.get(transaction), Some(state), "{recovery_point}");

        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{recovery_point}: {:?}", report.conflicts);
        let resolved = if in_cleanup { &report.cleaned } else { &report.rolled_back };
        assert_eq!(resolved, &vec![transaction], "{recovery_point}: {report:?}");
        check_outcome(&trial, &reference, FaultPoint::OperationApplied(last), ledger.get(transaction));
    }
    Ok(())
}

#[test]
fn a_crash_during_roll_forward_cleanup_is_finished_by_the_next_recovery() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let crash = CrashAt::new(FaultPoint::CommitMarkerSynced);
    assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());
    let stopped =
        trial.reopened()?.committer.recover_with_faults(&ledger, &CrashAt::new(FaultPoint::QuarantineRemoved));
    assert!(matches!(stopped, Err(CommitError::FaultInjected(FaultPoint::QuarantineRemoved))));
    assert_eq!(ledger.get(transaction), Some(TransactionState::Committed));
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.cleaned, vec![transaction]);
    check_outcome(&trial, &reference, FaultPoint::CommitMarkerSynced, ledger.get(transaction));
    Ok(())
}

#[test]
fn an_interrupted_commit_is_recovered_by_the_next_commit() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let before = trial.ws.tree();
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let crash = CrashAt::new(FaultPoint::OperationApplied(5));
    assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());
    assert_ne!(trial.ws.tree(), before, "the crash left a partial state");

    // An unrelated commit first rolls the interrupted one back.
    let restarted = trial.reopened()?;
    let other = restarted.run(&blobs, |vfs| vfs.write(&p("unrelated"), Arc::from(&b"u"[..])))?;
    ledger.insert(other.transaction, TransactionState::Revalidating);
    restarted.committer.commit_with_ledger(&other.request(&blobs), &ledger)?;
    assert_eq!(ledger.get(transaction), Some(TransactionState::Failed));
    assert_eq!(ledger.get(other.transaction), Some(TransactionState::Committed));
    let mut expected = before;
    expected.insert("unrelated".to_owned(), support::file(b"u", 0o644));
    assert_eq!(trial.ws.tree(), expected);
    Ok(())
}

#[test]
fn a_symlink_planted_in_internal_state_is_refused_and_reported() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let crash = CrashAt::new(FaultPoint::OperationApplied(3));
    assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());
    let partial = trial.ws.tree();

    // The transaction directory is replaced by a symlink to a copy elsewhere.
    let txn = trial.ws.root.join(".vsh/txn").join(transaction.to_hex());
    let elsewhere = trial.ws.root.parent().unwrap().join("elsewhere");
    std::fs::rename(&txn, &elsewhere)?;
    std::os::unix::fs::symlink(&elsewhere, &txn)?;
    let elsewhere_before = support::tree(&elsewhere);

    let restarted = trial.reopened()?;
    let report = restarted.committer.recover(&ledger)?;
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    let conflict = &report.conflicts[0];
    assert_eq!(conflict.transaction, Some(transaction));
    assert!(matches!(conflict.reason, RecoveryConflictReason::UnexpectedEntry { .. }), "{conflict}");
    assert!(report.rolled_back.is_empty() && report.rolled_forward.is_empty());
    // Nothing was followed, changed or removed.
    assert_eq!(trial.ws.tree(), partial);
    assert_eq!(support::tree(&elsewhere), elsewhere_before);
    assert!(std::fs::symlink_metadata(&txn)?.file_type().is_symlink());
    assert_eq!(ledger.get(transaction), Some(TransactionState::Committing));

    // No commit runs while the conflict stands.
    let other = restarted.run(&blobs, |vfs| vfs.write(&p("unrelated"), Arc::from(&b"u"[..])))?;
    ledger.insert(other.transaction, TransactionState::Revalidating);
    let refused = restarted.committer.commit_with_ledger(&other.request(&blobs), &ledger);
    assert!(matches!(refused, Err(CommitError::RecoveryPending { .. })), "{refused:?}");

    // Put the directory back and recovery rolls back.
    std::fs::remove_file(&txn)?;
    std::fs::rename(&elsewhere, &txn)?;
    let report = restarted.committer.recover(&ledger)?;
    assert_eq!(report.rolled_back, vec![transaction], "{report:?}");
    assert_eq!(ledger.get(transaction), Some(TransactionState::Failed));
    Ok(())
}

#[test]
fn a_symlink_planted_inside_a_transaction_directory_is_never_followed() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let crash = CrashAt::new(FaultPoint::OperationApplied(3));
    assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());
    let partial = trial.ws.tree();
    let txn = trial.ws.root.join(".vsh/txn").join(transaction.to_hex());
    let outside = trial.ws.root.parent().unwrap().join("outside");
    std::fs::create_dir(&outside)?;
    for planted in ["quarantine", "plan"] {
        let moved = trial.ws.root.parent().unwrap().join(format!("saved-{planted}"));
        std::fs::rename(txn.join(planted), &moved)?;
        std::os::unix::fs::symlink(&outside, txn.join(planted))?;
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert_eq!(report.conflicts.len(), 1, "{planted}: {report:?}");
        assert_eq!(trial.ws.tree(), partial, "{planted}");
        assert_eq!(std::fs::read_dir(&outside)?.count(), 0, "{planted}");
        std::fs::remove_file(txn.join(planted))?;
        std::fs::rename(&moved, txn.join(planted))?;
    }
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.rolled_back, vec![transaction]);
    Ok(())
}

#[test]
fn a_runtime_txn_directory_replaced_by_a_symlink_is_reported() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let outside = trial.ws.root.parent().unwrap().join("outside");
    std::fs::create_dir(&outside)?;
    std::os::unix::fs::symlink(&outside, trial.ws.root.join(".vsh/txn"))?;
    let report = trial.ws.committer.recover(&NoLedger)?;
    assert_eq!(report.conflicts.len(), 1);
    assert_eq!(report.conflicts[0].path, VPath::parse(".vsh/txn")?);
    let before = trial.ws.tree();
    let refused = trial.ws.committer.commit(&trial.run.request(&blobs));
    assert!(matches!(refused, Err(CommitError::RecoveryPending { .. })), "{refused:?}");
    assert_eq!(trial.ws.tree(), before);
    assert_eq!(std::fs::read_dir(&outside)?.count(), 0);
    Ok(())
}

#[test]
fn a_parent_swapped_for_a_symlink_after_revalidation_is_refused_and_rolled_back() -> Result {
    struct Swap<'a> {
        root: &'a std::path::Path,
        target: &'a std::path::Path,
    }
    impl vsh_commit::FaultInjector for Swap<'_> {
        fn crash_at(&self, point: FaultPoint) -> bool {
            if point == FaultPoint::CommitStatePersisted {
                std::fs::rename(self.root.join("d"), self.root.join("d.moved")).unwrap();
                std::os::unix::fs::symlink(self.target, self.root.join("d")).unwrap();
            }
            false
        }
    }
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let target = trial.ws.root.parent().unwrap().join("outside-target");
    std::fs::create_dir(&target)?;
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let swap = Swap { root: &trial.ws.root, target: &target };
    let error = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &swap).unwrap_err();
    assert!(matches!(error, CommitError::Apply { .. }), "{error:?}");
    assert!(!error.workspace_may_be_changed());
    assert_eq!(ledger.state(transaction)?, Some(TransactionState::Failed));
    // Nothing was written through the symlink, and everything else is as before.
    assert_eq!(std::fs::read_dir(&target)?.count(), 0);
    let mut expected = Trial::new(&blobs)?.ws.tree();
    let moved: Vec<(String, support::Node)> = expected
        .iter()
        .filter(|(path, _)| path.as_str() == "d" || path.starts_with("d/"))
        .map(|(path, node)| (path.replacen('d', "d.moved", 1), node.clone()))
        .collect();
    expected.retain(|path, _| path.as_str() != "d" && !path.starts_with("d/"));
    expected.extend(moved);
    expected.insert("d".to_owned(), support::Node::Link { target: target.into_os_string().into_encoded_bytes() });
    assert_eq!(trial.ws.tree(), expected, "{:?}", tree_difference(&trial.ws.tree(), &expected));
    assert!(trial.ws.no_transaction_dirs());
    Ok(())
}

#[test]
fn an_external_write_during_apply_is_never_overwritten_by_the_rollback() -> Result {
    /// Recreates a deleted file as soon as the commit has applied everything.
    struct Recreate<'a>(&'a std::path::Path);
    impl vsh_commit::FaultInjector for Recreate<'_> {
        fn crash_at(&self, point: FaultPoint) -> bool {
            if point == FaultPoint::Applied {
                std::fs::write(self.0.join("d/b.txt"), b"someone else's new work").unwrap();
            }
            false
        }
    }
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let error = trial
        .ws
        .committer
        .commit_with_faults(&trial.run.request(&blobs), &ledger, &Recreate(&trial.ws.root))
        .unwrap_err();
    // Verification fails on d/b.txt; rolling back would need to put the old
    // d/b.txt where the new work is, so the transaction is left for recovery.
    assert!(
        matches!(&error, CommitError::RecoveryRequired { source, .. }
        if matches!(**source, CommitError::Verification { .. })),
        "{error:?}"
    );
    assert!(error.workspace_may_be_changed());
    assert_eq!(ledger.get(transaction), Some(TransactionState::RecoveryRequired));
    assert_eq!(std::fs::read(trial.ws.root.join("d/b.txt"))?, b"someone else's new work");
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert_eq!(report.conflicts[0].path, p("d/b.txt"));
    assert!(matches!(report.conflicts[0].reason, RecoveryConflictReason::Ambiguous { .. }));
    assert_eq!(std::fs::read(trial.ws.root.join("d/b.txt"))?, b"someone else's new work");
    Ok(())
}

#[test]
fn a_ledger_that_refuses_committing_leaves_nothing_behind() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let before = trial.ws.tree();
    // The ledger does not know the transaction: the transition is refused.
    let ledger = MemoryLedger::new();
    let error = trial.ws.committer.commit_with_ledger(&trial.run.request(&blobs), &ledger).unwrap_err();
    assert!(matches!(error, CommitError::Ledger { step: "committing", .. }), "{error:?}");
    assert!(!error.workspace_may_be_changed());
    assert_eq!(trial.ws.tree(), before);
    assert!(trial.ws.no_transaction_dirs());
    Ok(())
}

#[test]
fn a_torn_marker_counts_as_absent_and_the_transaction_rolls_back() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let before = trial.ws.tree();
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let crash = CrashAt::new(FaultPoint::Verified);
    assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());
    let txn = trial.ws.root.join(".vsh/txn").join(transaction.to_hex());
    std::fs::write(txn.join("complete"), b"VSHDON01 torn")?;
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.rolled_back, vec![transaction], "{report:?}");
    assert_eq!(trial.ws.tree(), before);
    assert_eq!(ledger.get(transaction), Some(TransactionState::Failed));
    Ok(())
}

#[test]
fn a_corrupt_journal_or_plan_is_a_conflict_and_changes_nothing() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    for file in ["journal", "plan"] {
        let trial = Trial::new(&blobs)?;
        let ledger = MemoryLedger::new();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let crash = CrashAt::new(FaultPoint::OperationApplied(4));
        assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());
        let partial = trial.ws.tree();
        let path = trial.ws.root.join(".vsh/txn").join(transaction.to_hex()).join(file);
        let mut bytes = std::fs::read(&path)?;
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x04;
        std::fs::write(&path, &bytes)?;
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert_eq!(report.conflicts.len(), 1, "{file}: {report:?}");
        let reason = &report.conflicts[0].reason;
        let expected = match file {
            "journal" => matches!(reason, RecoveryConflictReason::Journal { source: Some(_) }),
            _ => matches!(reason, RecoveryConflictReason::Plan { source: Some(_) }),
        };
        assert!(expected, "{file}: {reason:?}");
        assert_eq!(trial.ws.tree(), partial, "{file}");
        assert_eq!(ledger.get(transaction), Some(TransactionState::Committing), "{file}");
    }
    Ok(())
}
