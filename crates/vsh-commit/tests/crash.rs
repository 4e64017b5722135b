//! Crash injection: a transaction that creates, modifies, deletes and renames
//! files, changes modes, replaces kinds and symlinks and creates a directory
//! tree is stopped at every fault point of the commit (every per-operation
//! point included); a fresh committer then recovers, and the workspace must be
//! exactly the before tree or exactly the after tree (bytes, modes, kinds,
//! symlink targets), with the ledger agreeing: Committed if and only if after.
//! Recovery itself is then crashed at each of its steps and re-run.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Arc;

use vsh_commit::{CommitError, CommitLedger, CrashAt, FaultPoint, MemoryLedger, NoLedger, RecoveryConflictReason};
use vsh_store::BlobStore;
use vsh_types::{TransactionState, VPath};

use support::fixture::Trial;
use support::{Result, Tree, p, tree_difference};

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
    let ledger = MemoryLedger::as_commit_point();
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
    assert!(trial.ws.no_garbage(), "crash at {point}: recovery left a discarded directory in trash/");
}

#[test]
fn a_crash_at_every_fault_point_recovers_to_exactly_before_or_after() -> Result {
    // As another user too, where locked.txt (0o000) cannot be read back and is
    // checked by its metadata.
    support::also_as_nobody("a_crash_at_every_fault_point_recovers_to_exactly_before_or_after");
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;

    // Every per-operation point is passed, in order, around the global points.
    let count = u32::try_from(reference.operations)?;
    assert!(count >= 20, "the transaction lowers to {count} operations");
    let mut expected =
        vec![FaultPoint::Staged, FaultPoint::Revalidated, FaultPoint::PlanSynced, FaultPoint::StageSynced];
    expected.extend((0..count).map(FaultPoint::IntentSynced));
    expected.push(FaultPoint::CommitStatePersisted);
    expected.extend((0..count).map(FaultPoint::OperationApplied));
    expected.extend((0..count).map(FaultPoint::DoneSynced));
    expected.extend([
        FaultPoint::Applied,
        FaultPoint::Verified,
        // The ledger is the commit point: no completion marker.
        FaultPoint::CommittedStatePersisted,
        // The directory goes to trash/ in one rename, removed off the path.
        FaultPoint::Discarded,
    ]);
    assert_eq!(reference.points, expected);

    for (index, point) in reference.points.iter().copied().enumerate() {
        let trial = Trial::new(&blobs)?;
        assert_eq!(trial.ws.tree(), reference.before);
        let ledger = MemoryLedger::as_commit_point();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let error = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(point));
        assert!(matches!(error, Err(CommitError::FaultInjected(at)) if at == point), "{point}: {error:?}");

        let restarted = trial.reopened()?;
        let report = restarted.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{point}: {:?}", report.conflicts);
        assert!(report.unresolved.is_empty(), "{point}: {:?}", report.unresolved);
        let resolved = report.rolled_forward.len() + report.rolled_back.len() + report.cleaned.len();
        // Once discarded the directory is gone: nothing is left to recover.
        let expected = usize::from(point != FaultPoint::Discarded);
        assert_eq!(resolved, expected, "{point}: {report:?}");
        // Recovering again finds nothing.
        assert!(restarted.committer.recover(&ledger)?.is_empty());
        // The committer's sweepers are done once it is dropped.
        drop(restarted);
        check_outcome(&trial, &reference, point, ledger.get(transaction));

        // Without a ledger the marker alone decides, and with a ledger that
        // is not the commit point the marker comes first (each on every
        // third point, to bound the time).
        if index % 3 == 0 {
            crash_with_the_marker(&blobs, &reference, point, false)?;
        } else if index % 3 == 1 {
            crash_with_the_marker(&blobs, &reference, point, true)?;
        }
    }
    // The marker's own point, both ways.
    crash_with_the_marker(&blobs, &reference, FaultPoint::CommitMarkerSynced, false)?;
    crash_with_the_marker(&blobs, &reference, FaultPoint::CommitMarkerSynced, true)?;
    Ok(())
}

/// Crash a commit whose commit point is the completion marker at `point`
/// (with a ledger that is not the commit point, or with none), recover, and
/// check the outcome.
fn crash_with_the_marker(blobs: &BlobStore, reference: &Reference, point: FaultPoint, ledgered: bool) -> Result {
    let trial = Trial::new(blobs)?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let chosen: &dyn CommitLedger = if ledgered { &ledger } else { &NoLedger };
    let error = trial.ws.committer.commit_with_faults(&trial.run.request(blobs), chosen, &CrashAt::new(point));
    assert!(matches!(error, Err(CommitError::FaultInjected(at)) if at == point), "{point}: {error:?}");
    let report = trial.reopened()?.committer.recover(chosen)?;
    assert!(report.is_clean(), "{point} with the marker (ledger: {ledgered}): {:?}", report.conflicts);
    let state = if ledgered { ledger.get(trial.run.transaction) } else { None };
    check_outcome(&trial, reference, point, state);
    Ok(())
}

#[test]
fn a_crash_at_every_fault_point_of_deletes_made_unread_recovers_to_exactly_before_or_after() -> Result {
    use support::fixture::{build_deletes, deletes};
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::of(&blobs, build_deletes, deletes, true)?;
    // The deleted files are known by their stamps: nothing of them was read.
    let stamped: Vec<&str> = trial
        .run
        .diff
        .entries()
        .iter()
        .filter(|entry| entry.before.is_some_and(|before| before.stamp.is_some()))
        .map(|entry| entry.path.as_str())
        .collect();
    assert_eq!(stamped, ["del/a", "del/b", "del/sub/c", "solo.txt"]);
    let before = trial.ws.tree();
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let recorder = CrashAt::recording();
    trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &recorder)?;
    let reference = Reference { before, after: trial.ws.tree(), points: recorder.seen(), operations: 0 };
    assert!(reference.points.contains(&FaultPoint::OperationApplied(0)));
    // With the marker as the commit point, and with a ledger that is (the
    // plan makes no directory: no done records are journaled).
    let cases = reference.points.iter().flat_map(|point| {
        let commit_point = (*point != FaultPoint::CommitMarkerSynced).then_some((*point, true));
        [(*point, false)].into_iter().chain(commit_point)
    });
    for (point, ledger_is_commit_point) in cases {
        let trial = Trial::of(&blobs, build_deletes, deletes, true)?;
        let ledger = if ledger_is_commit_point { MemoryLedger::as_commit_point() } else { MemoryLedger::new() };
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let error = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(point));
        assert!(matches!(error, Err(CommitError::FaultInjected(at)) if at == point), "{point}: {error:?}");
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{point}: {:?}", report.conflicts);
        // The files put back by a rollback are the files deleted: same
        // inode, size, mode and mtime (the move changed their ctime).
        assert!(report.unresolved.is_empty(), "{point}: {:?}", report.unresolved);
        check_outcome(&trial, &reference, point, ledger.get(transaction));
    }
    Ok(())
}

/// A trial whose commit crashed right after applying operation `last` (the
/// last one: every operation applied, and recovery rolls all of them back),
/// with a ledger that still says Revalidating.
fn crashed_after_applying(blobs: &BlobStore, last: u32) -> Result<(Trial, MemoryLedger)> {
    let trial = Trial::new(blobs)?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let crash = CrashAt::new(FaultPoint::OperationApplied(last));
    assert!(trial.ws.committer.commit_with_faults(&trial.run.request(blobs), &ledger, &crash).is_err());
    Ok((trial, ledger))
}

#[test]
fn a_crash_at_every_step_of_recovery_is_recovered_by_the_next_recovery() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    let last = u32::try_from(reference.operations - 1)?;

    // Every step a rollback passes: each undo, the settled record, each cleanup step.
    let (trial, ledger) = crashed_after_applying(&blobs, last)?;
    let recorder = CrashAt::recording();
    let report = trial.reopened()?.committer.recover_with_faults(&ledger, &recorder)?;
    assert_eq!(report.rolled_back, vec![trial.run.transaction]);
    assert_eq!(report.paths_of(trial.run.transaction), Some(trial.run.diff.len()), "the report counts its paths");
    let points = recorder.seen();
    let mut expected: Vec<FaultPoint> = (0..=last).rev().map(FaultPoint::Undone).collect();
    expected.push(FaultPoint::Settled);
    expected.extend((0..8).map(FaultPoint::CleanedUp));
    assert_eq!(points, expected);

    for (index, recovery_point) in points.iter().copied().enumerate() {
        let (trial, ledger) = crashed_after_applying(&blobs, last)?;
        let transaction = trial.run.transaction;
        let stopped = trial.reopened()?.committer.recover_with_faults(&ledger, &CrashAt::new(recovery_point));
        assert!(matches!(stopped, Err(CommitError::FaultInjected(at)) if at == recovery_point), "{stopped:?}");
        // The ledger says Failed only once the settled record is durable.
        let in_cleanup = matches!(recovery_point, FaultPoint::CleanedUp(_));
        let state = if in_cleanup { TransactionState::Failed } else { TransactionState::RecoveryRequired };
        assert_eq!(ledger.get(transaction), Some(state), "{recovery_point}");

        // Crash the next recovery too, at a later step of its own (each
        // resumes where the last one stopped), then finish.
        if let Some(&again) = points.get(index + 1 + index % 3) {
            let stopped = trial.reopened()?.committer.recover_with_faults(&ledger, &CrashAt::new(again));
            assert!(
                matches!(stopped, Err(CommitError::FaultInjected(at)) if at == again),
                "{recovery_point} then {again}: {stopped:?}"
            );
        }
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{recovery_point}: {:?}", report.conflicts);
        assert!(report.unresolved.is_empty(), "{recovery_point}: {:?}", report.unresolved);
        check_outcome(&trial, &reference, FaultPoint::OperationApplied(last), ledger.get(transaction));
    }
    Ok(())
}

/// A trial whose rollback (every operation applied, then recovered) stopped
/// right after its settled record was durable, with its ledger, reference
/// and transaction directory.
fn rollback_settled(blobs: &BlobStore) -> Result<(Trial, MemoryLedger, Reference, std::path::PathBuf, u32)> {
    let reference = reference(blobs)?;
    let last = u32::try_from(reference.operations - 1)?;
    let (trial, ledger) = crashed_after_applying(blobs, last)?;
    let stopped = trial.reopened()?.committer.recover_with_faults(&ledger, &CrashAt::new(FaultPoint::Settled));
    assert!(matches!(stopped, Err(CommitError::FaultInjected(FaultPoint::Settled))), "{stopped:?}");
    let txn = trial.ws.root.join(".vsh/txn").join(trial.run.transaction.to_hex());
    Ok((trial, ledger, reference, txn, last))
}

#[test]
fn a_crash_in_the_middle_of_deleting_the_stage_is_recovered() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let (trial, ledger, reference, txn, last) = rollback_settled(&blobs)?;
    // The crash came while the staged nodes were being removed: every other
    // one is gone.
    let mut staged = Vec::new();
    for entry in std::fs::read_dir(&txn)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with("stage.") {
            staged.push(entry.path());
        }
    }
    staged.sort();
    assert!(staged.len() >= 4, "{staged:?}");
    for path in staged.iter().step_by(2) {
        std::fs::remove_file(path)?;
    }
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.rolled_back, vec![trial.run.transaction], "{report:?}");
    check_outcome(&trial, &reference, FaultPoint::OperationApplied(last), ledger.get(trial.run.transaction));
    Ok(())
}

/// An operator's restore of a transaction the ledger already holds as
/// Failed finishes its cleanup; but a directory of the earlier layout whose
/// nodes could not be moved (an old node in `quarantine/`, a name vsh never
/// writes beside it) is refused, and nothing of it is removed.
#[test]
fn a_restore_never_cleans_up_around_an_earlier_layout_it_could_not_move() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let (trial, ledger) = crashed_after_applying(&blobs, 3)?;
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Failed);
    let txn = trial.ws.root.join(".vsh/txn").join(transaction.to_hex());
    std::fs::create_dir(txn.join("quarantine"))?;
    std::fs::write(txn.join("quarantine/0"), b"an old node")?;
    std::fs::create_dir(txn.join("stage"))?;
    std::fs::write(txn.join("stage/not-a-slot"), b"someone's bytes")?;
    let state = support::tree(&txn);
    let reopened = trial.reopened()?;
    let refused = reopened.committer.session(&vsh_host::LockWait::default())?.restore(transaction, &ledger);
    assert!(matches!(refused, Err(CommitError::RecoveryPending { .. })), "{refused:?}");
    assert_eq!(support::tree(&txn), state, "nothing of it is removed");
    assert_eq!(ledger.get(transaction), Some(TransactionState::Failed));
    Ok(())
}

/// The restored cleanup's first step removes nothing: it checks that no
/// old node is aside, and an entry with the old nodes' prefix whose name is
/// not even UTF-8 counts too. The evidence (plan, journal, settled record)
/// stays with it.
#[test]
fn a_finished_rollback_never_cleans_up_past_an_entry_that_may_be_an_old_node() -> Result {
    use std::os::unix::ffi::OsStrExt as _;
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let (trial, ledger, _, txn, _) = rollback_settled(&blobs)?;
    let planted = txn.join(std::ffi::OsStr::from_bytes(b"quarantine.\xff"));
    std::fs::write(&planted, b"someone's bytes")?;
    let recovered = trial.reopened()?.committer.recover(&ledger);
    assert!(recovered.as_ref().map_or(true, |report| !report.conflicts.is_empty()), "{recovered:?}");
    for evidence in ["plan", "journal", "settled"] {
        assert!(txn.join(evidence).exists(), "{evidence} stays");
    }
    assert_eq!(std::fs::read(&planted)?, b"someone's bytes");
    Ok(())
}

#[test]
fn a_crash_during_roll_forward_cleanup_is_finished_by_the_next_recovery() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    let ledger = MemoryLedger::new();
    let trial = crashed_trial(&blobs, &ledger, FaultPoint::CommitMarkerSynced)?;
    let transaction = trial.run.transaction;
    // Recovery rolls forward and discards the directory; a crash right
    // after leaves it in trash/, where the next recovery removes it.
    let stopped = trial.reopened()?.committer.recover_with_faults(&ledger, &CrashAt::new(FaultPoint::Discarded));
    assert!(matches!(stopped, Err(CommitError::FaultInjected(FaultPoint::Discarded))), "{stopped:?}");
    assert_eq!(ledger.get(transaction), Some(TransactionState::Committed));
    assert!(trial.ws.no_transaction_dirs());
    let discarded = trial.ws.root.join(".vsh/trash").join(transaction.to_hex());
    assert!(discarded.join("complete").is_file(), "the whole directory moved, marker and all");
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert!(report.is_empty(), "garbage is no transaction to recover: {report:?}");
    check_outcome(&trial, &reference, FaultPoint::CommitMarkerSynced, ledger.get(transaction));
    Ok(())
}

/// `.vsh/trash` made unusable (a regular file), so that a committed
/// transaction's directory is cleaned up in place, in the committed order.
fn block_trash(trial: &Trial) -> Result {
    std::fs::write(trial.ws.root.join(".vsh/trash"), b"not a directory")?;
    Ok(())
}

#[test]
fn without_a_usable_trash_the_committed_cleanup_runs_in_place_and_a_crash_at_each_step_recovers() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    let trial = Trial::new(&blobs)?;
    block_trash(&trial)?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let recorder = CrashAt::recording();
    trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &recorder)?;
    assert!(trial.ws.no_transaction_dirs());
    assert_eq!(trial.ws.tree(), reference.after);
    // Every cleanup step: quarantine, stage, journal.next, journal, plan,
    // settled, marker, the directory itself.
    let seen = recorder.seen();
    let start = seen.iter().position(|point| *point == FaultPoint::CommittedStatePersisted).expect("committed");
    let mut expected = vec![FaultPoint::QuarantineRemoved];
    expected.extend((1..8).map(FaultPoint::CleanedUp));
    assert_eq!(seen[start + 1..], expected[..]);

    for point in expected {
        let trial = Trial::new(&blobs)?;
        block_trash(&trial)?;
        let ledger = MemoryLedger::new();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let error = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(point));
        assert!(matches!(error, Err(CommitError::FaultInjected(at)) if at == point), "{point}: {error:?}");
        // The next recovery finds trash/ still blocked and cleans up in place too.
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{point}: {:?}", report.conflicts);
        let resolved = report.rolled_forward.len() + report.cleaned.len();
        assert_eq!(resolved, usize::from(point != FaultPoint::CleanedUp(7)), "{point}: {report:?}");
        check_outcome(&trial, &reference, point, ledger.get(transaction));
    }
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
    for planted in ["journal", "plan"] {
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
    // An old node's slot replaced by a symlink: the node there is not the
    // one quarantined, so it is neither followed nor moved into the
    // workspace, and the path is left for an operator.
    let (trial, ledger) = crashed_after_applying(&blobs, 3)?;
    let txn = trial.ws.root.join(".vsh/txn").join(trial.run.transaction.to_hex());
    let slot = std::fs::read_dir(&txn)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<Vec<_>>>()?
        .into_iter()
        .find(|path| path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("quarantine.")))
        .expect("the crash left an old node in quarantine");
    std::fs::rename(&slot, trial.ws.root.parent().unwrap().join("saved-slot"))?;
    std::os::unix::fs::symlink(&outside, &slot)?;
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.unresolved.len() + report.conflicts.len(), 1, "{report:?}");
    assert_eq!(std::fs::read_dir(&outside)?.count(), 0);
    assert!(std::fs::symlink_metadata(&slot)?.file_type().is_symlink(), "the planted symlink stays where it was");
    assert!(
        !trial.ws.tree().values().any(|node| format!("{node:?}").contains("outside")),
        "the symlink is not put into the workspace"
    );
    Ok(())
}

/// Put a transaction directory of this layout into the earlier one: the
/// staged and old nodes into `stage/` and `quarantine/`, the plan under its
/// earlier magic (`VSHPLN02`, sealed again) and the journal naming that plan.
/// Returns how many nodes moved.
fn into_earlier_layout(txn: &std::path::Path) -> Result<usize> {
    use vsh_commit::format::{Journal, PLAN_DOMAIN, PLAN_MAGIC_EARLIER_LAYOUT, PlanDigest};
    let key = vsh_types::AuthorityKey::unauthenticated();
    let mut moved = 0;
    for earlier in ["stage", "quarantine"] {
        std::fs::create_dir(txn.join(earlier))?;
        for entry in std::fs::read_dir(txn)? {
            let name = entry?.file_name().into_string().expect("vsh's names are UTF-8");
            if let Some(slot) = name.strip_prefix(&format!("{earlier}.")) {
                std::fs::rename(txn.join(&name), txn.join(earlier).join(slot))?;
                moved += 1;
            }
        }
    }
    let plan = std::fs::read(txn.join("plan"))?;
    let mut body = plan[..plan.len() - 32].to_vec();
    body[..8].copy_from_slice(&PLAN_MAGIC_EARLIER_LAYOUT);
    let digest = key.mac(PLAN_DOMAIN).update(&body).finalize();
    body.extend_from_slice(&digest);
    std::fs::write(txn.join("plan"), &body)?;
    let mut journal = Journal::decode(&std::fs::read(txn.join("journal"))?, &key)?;
    journal.plan = PlanDigest(digest);
    std::fs::write(txn.join("journal"), journal.encode(&key))?;
    Ok(moved)
}

/// A transaction directory an earlier version left (its nodes in `stage/`
/// and `quarantine/`, its plan `VSHPLN02`) is moved into this layout and
/// recovered as if this version had written it: an unresolved or crashed
/// transaction of the old version neither blocks commits nor is misread.
#[test]
fn a_transaction_directory_of_the_earlier_layout_is_moved_into_this_one_and_recovered() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    let last = u32::try_from(reference.operations - 1)?;
    // Early, most nodes are still staged; at the end, only old nodes are aside.
    for applied in [0, last] {
        let (trial, ledger) = crashed_after_applying(&blobs, applied)?;
        let transaction = trial.run.transaction;
        let txn = trial.ws.root.join(".vsh/txn").join(transaction.to_hex());
        let staged = std::fs::read_dir(&txn)?
            .filter(|entry| entry.as_ref().is_ok_and(|entry| entry.file_name().to_string_lossy().starts_with("stage.")))
            .count();
        let quarantined = quarantine_of(&trial);
        let moved = into_earlier_layout(&txn)?;
        assert!(moved > 0 && moved >= staged, "{applied}: staged and old nodes moved");
        assert!(staged > 0 || !quarantined.is_empty(), "{applied}");
        assert!(quarantine_of(&trial).is_empty(), "{applied}");
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert_eq!(report.rolled_back, vec![transaction], "{applied}: {report:?}");
        check_outcome(&trial, &reference, FaultPoint::OperationApplied(applied), ledger.get(transaction));
        assert!(!txn.exists(), "{applied}: cleaned up");
    }
    Ok(())
}

/// What is not provably the earlier layout's stays exactly as it is, with
/// its subdirectory: a name vsh never writes, or slots in a directory whose
/// plan is not an earlier-layout plan (`VSHPLN02`) of the transaction (here
/// this layout's own `VSHPLN03`: someone planted `stage/` or `quarantine/`).
/// The directory is a conflict, and nothing in the workspace or the
/// directory moves.
#[test]
fn an_earlier_layout_directory_holding_a_name_vsh_never_writes_is_a_conflict_and_nothing_moves() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let cases = [("stage", "not-a-slot"), ("quarantine", "not-a-slot"), ("stage", "0"), ("quarantine", "1")];
    for (earlier, name) in cases {
        let (trial, ledger) = crashed_after_applying(&blobs, 3)?;
        let transaction = trial.run.transaction;
        let txn = trial.ws.root.join(".vsh/txn").join(transaction.to_hex());
        std::fs::create_dir(txn.join(earlier))?;
        std::fs::write(txn.join(earlier).join(name), b"someone's bytes")?;
        let partial = trial.ws.tree();
        let state = support::tree(&txn);
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert_eq!(report.conflicts.len(), 1, "{earlier}/{name}: {report:?}");
        assert!(report.conflicts[0].path.as_str().ends_with(earlier), "{earlier}/{name}: {report:?}");
        assert!(report.conflicts[0].to_string().contains("a directory"), "{earlier}/{name}: {}", report.conflicts[0]);
        assert_eq!(trial.ws.tree(), partial, "{earlier}/{name}");
        assert_eq!(support::tree(&txn), state, "{earlier}/{name}");
        assert_eq!(ledger.get(transaction), Some(TransactionState::Committing), "{earlier}/{name}");
    }
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
fn an_external_write_during_apply_is_kept_and_everything_else_is_rolled_back() -> Result {
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
    let before = trial.ws.tree();
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let error = trial
        .ws
        .committer
        .commit_with_faults(&trial.run.request(&blobs), &ledger, &Recreate(&trial.ws.root))
        .unwrap_err();
    // Verification fails on d/b.txt; putting the old d/b.txt back would need
    // the path someone else's work now holds, so that one operation is left,
    // and every other one is undone.
    let CommitError::Unresolved { paths, source, .. } = &error else { panic!("{error:?}") };
    assert!(matches!(**source, CommitError::Verification { .. }), "{source:?}");
    assert!(error.workspace_may_be_changed());
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert_eq!(paths[0].path, p("d/b.txt"));
    let kept = paths[0].kept.clone().expect("the old d/b.txt is kept");
    assert_eq!(std::fs::read(trial.ws.root.join(kept.as_str()))?, b"beta");
    assert_eq!(ledger.get(transaction), Some(TransactionState::RecoveryRequired));
    let mut expected = before.clone();
    expected.insert("d/b.txt".to_owned(), support::file(b"someone else's new work", 0o644));
    assert_eq!(trial.ws.tree(), expected, "{:?}", tree_difference(&trial.ws.tree(), &expected));

    // Recovery finds it settled: reported, not a conflict, and nothing changes.
    let restarted = trial.reopened()?;
    let report = restarted.committer.recover(&ledger)?;
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    assert_eq!(report.unresolved[0].paths, *paths);
    assert_eq!(trial.ws.tree(), expected);
    assert_eq!(std::fs::read(trial.ws.root.join(kept.as_str()))?, b"beta");

    // Other work still commits.
    let other = restarted.run(&blobs, |vfs| vfs.write(&p("unrelated"), Arc::from(&b"u"[..])))?;
    ledger.insert(other.transaction, TransactionState::Revalidating);
    restarted.committer.commit_with_ledger(&other.request(&blobs), &ledger)?;
    assert_eq!(ledger.get(other.transaction), Some(TransactionState::Committed));
    expected.insert("unrelated".to_owned(), support::file(b"u", 0o644));

    // The operator restores: their file moves aside, the old one comes back.
    let restored = restarted.committer.session(&vsh_host::LockWait::default())?.restore(transaction, &ledger)?;
    assert_eq!(restored.transaction, Some(transaction));
    assert_eq!(restored.restored, vec![p("d/b.txt")]);
    assert_eq!(restored.moved_aside.len(), 1);
    let (from, aside) = &restored.moved_aside[0];
    assert_eq!(*from, p("d/b.txt"));
    assert_eq!(aside.as_str(), format!(".vsh/recovered/{}/d/b.txt", transaction.to_hex()), "under its own name");
    assert_eq!(std::fs::read(trial.ws.root.join(aside.as_str()))?, b"someone else's new work");
    assert_eq!(ledger.get(transaction), Some(TransactionState::Failed));
    let mut back = before;
    back.insert("unrelated".to_owned(), support::file(b"u", 0o644));
    assert_eq!(trial.ws.tree(), back, "{:?}", tree_difference(&trial.ws.tree(), &back));
    assert!(trial.ws.no_transaction_dirs());
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

/// The names and bytes of every old node a transaction keeps
/// (`quarantine.<i>` in its directory, and everything below each).
fn quarantine_of(trial: &Trial) -> Tree {
    let mut all = support::tree(&trial.ws.root.join(".vsh/txn").join(trial.run.transaction.to_hex()));
    all.retain(|path, _| path.starts_with("quarantine."));
    all
}

#[test]
fn a_journal_deleted_or_cut_back_after_a_crash_is_a_conflict_and_deletes_nothing() -> Result {
    use vsh_commit::format::{JOURNAL_HEADER_BYTES, Journal};
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let key = vsh_types::AuthorityKey::unauthenticated();
    for tamper in ["deleted", "cut to its header", "cut and resealed"] {
        let trial = Trial::new(&blobs)?;
        let ledger = MemoryLedger::new();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let crash = CrashAt::new(FaultPoint::OperationApplied(8));
        assert!(trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).is_err());
        let partial = trial.ws.tree();
        let quarantined = quarantine_of(&trial);
        assert!(!quarantined.is_empty(), "the crash left old nodes in quarantine");
        let path = trial.ws.root.join(".vsh/txn").join(transaction.to_hex()).join("journal");
        let saved = std::fs::read(&path)?;
        match tamper {
            "deleted" => std::fs::remove_file(&path)?,
            "cut to its header" => std::fs::write(&path, &saved[..JOURNAL_HEADER_BYTES])?,
            _ => {
                // Whoever holds the key (here the public one) could write a
                // valid, shorter journal: the evidence still contradicts it.
                let mut journal = Journal::decode(&saved, &key)?;
                journal.records.truncate(2);
                std::fs::write(&path, journal.encode(&key))?;
            }
        }
        for ledger in [&ledger as &dyn CommitLedger, &NoLedger] {
            let report = trial.reopened()?.committer.recover(ledger)?;
            assert_eq!(report.conflicts.len(), 1, "{tamper}: {report:?}");
            let reason = &report.conflicts[0].reason;
            assert!(
                matches!(
                    reason,
                    RecoveryConflictReason::JournalContradicted { .. } | RecoveryConflictReason::Journal { .. }
                ),
                "{tamper}: {reason:?}"
            );
            assert!(report.rolled_back.is_empty() && report.cleaned.is_empty(), "{tamper}: {report:?}");
            // Nothing moved, nothing deleted: every old node is still there.
            assert_eq!(trial.ws.tree(), partial, "{tamper}");
            assert_eq!(quarantine_of(&trial), quarantined, "{tamper}");
        }
        assert_eq!(ledger.get(transaction), Some(TransactionState::Committing), "{tamper}");
        // No commit runs meanwhile.
        let restarted = trial.reopened()?;
        let other = restarted.run(&blobs, |vfs| vfs.write(&p("unrelated"), Arc::from(&b"u"[..])))?;
        ledger.insert(other.transaction, TransactionState::Revalidating);
        let refused = restarted.committer.commit_with_ledger(&other.request(&blobs), &ledger);
        assert!(matches!(refused, Err(CommitError::RecoveryPending { .. })), "{tamper}: {refused:?}");
        assert_eq!(ledger.get(other.transaction), Some(TransactionState::Failed), "{tamper}");
        // With the journal back, recovery rolls back as it should.
        std::fs::write(&path, &saved)?;
        let report = restarted.committer.recover(&ledger)?;
        assert_eq!(report.rolled_back, vec![transaction], "{tamper}: {report:?}");
        check_outcome(&trial, &reference_before(&blobs)?, FaultPoint::OperationApplied(8), ledger.get(transaction));
    }
    Ok(())
}

/// A reference whose before tree is the fixture's (for `check_outcome` on a rollback).
fn reference_before(blobs: &BlobStore) -> Result<Reference> {
    let trial = Trial::new(blobs)?;
    let before = trial.ws.tree();
    Ok(Reference { before: before.clone(), after: before, points: Vec::new(), operations: 0 })
}

#[test]
fn open_records_without_a_commit_directory_are_settled_by_recovery() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let before = trial.ws.tree();
    let ledger = MemoryLedger::new();
    // Killed right after the reservation, or after the move to Revalidating:
    // no directory was made, the workspace was never touched.
    let reserved = vsh_types::TransactionId::digest(b"reserved");
    let revalidating = vsh_types::TransactionId::digest(b"revalidating");
    // Past the point of no return, with its evidence gone.
    let committing = vsh_types::TransactionId::digest(b"committing");
    ledger.insert(reserved, TransactionState::Reserved);
    ledger.insert(revalidating, TransactionState::Revalidating);
    ledger.insert(committing, TransactionState::Committing);
    ledger.insert(vsh_types::TransactionId::digest(b"pending"), TransactionState::PendingApproval);
    let report = trial.ws.committer.recover(&ledger)?;
    let mut rolled_back = report.rolled_back.clone();
    rolled_back.sort();
    let mut expected = vec![reserved, revalidating];
    expected.sort();
    assert_eq!(rolled_back, expected, "{report:?}");
    assert_eq!(ledger.get(reserved), Some(TransactionState::Failed));
    assert_eq!(ledger.get(revalidating), Some(TransactionState::Failed));
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    assert_eq!(report.unresolved[0].transaction, committing);
    assert_eq!(report.unresolved[0].directory, None);
    assert_eq!(ledger.get(committing), Some(TransactionState::Committing));
    assert_eq!(ledger.get(vsh_types::TransactionId::digest(b"pending")), Some(TransactionState::PendingApproval));
    // Commits go on; the operator acknowledges the one without evidence.
    trial.ws.committer.commit(&trial.run.request(&blobs))?;
    let restored = trial.ws.committer.session(&vsh_host::LockWait::default())?.restore(committing, &ledger)?;
    assert!(restored.restored.is_empty() && restored.moved_aside.is_empty());
    assert!(restored.nothing_kept, "the report says nothing was there to restore");
    assert_eq!(ledger.get(committing), Some(TransactionState::Failed));
    assert_ne!(trial.ws.tree(), before);
    Ok(())
}

#[test]
fn a_ledger_that_contradicts_the_disk_is_a_conflict_and_changes_nothing() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    // A durable marker, but the ledger says the transaction went stale; and
    // no marker, with intents journaled and some operations applied but not
    // done, but the ledger says committed.
    // (With a done record for every operation a Committed ledger is the
    // commit point a crash came after: see
    // `a_committed_record_without_a_marker_rolls_forward_once_every_operation_is_done`.)
    for (point, lie) in [
        (FaultPoint::CommitMarkerSynced, TransactionState::Stale),
        (FaultPoint::OperationApplied(3), TransactionState::Committed),
    ] {
        let trial = Trial::new(&blobs)?;
        let ledger = MemoryLedger::new();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        assert!(
            trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(point)).is_err()
        );
        let partial = trial.ws.tree();
        ledger.insert(transaction, lie);
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert_eq!(report.conflicts.len(), 1, "{point}: {report:?}");
        assert!(
            matches!(report.conflicts[0].reason, RecoveryConflictReason::LedgerDisagrees { state: Some(state) } if state == lie),
            "{point}: {:?}",
            report.conflicts[0]
        );
        assert_eq!(trial.ws.tree(), partial, "{point}");
        assert_eq!(ledger.get(transaction), Some(lie));
        assert!(!trial.ws.no_transaction_dirs());
    }
    Ok(())
}

#[test]
fn a_crash_before_committing_leaves_someone_elses_later_edits_theirs_and_fails_cleanly() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let before = trial.ws.tree();
    // Killed with every intent durable, before the ledger moved to Committing:
    // nothing was applied.
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let crash = CrashAt::new(FaultPoint::IntentSynced(5));
    let error = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash).unwrap_err();
    assert!(matches!(error, CommitError::FaultInjected(_)), "{error:?}");
    // Then someone edits paths the plan would have changed, differently.
    support::write(&trial.ws.root, "a.txt", b"their a");
    support::chmod(&trial.ws.root, "locked.txt", 0o604);
    let mut theirs = before.clone();
    theirs.insert("a.txt".to_owned(), support::file(b"their a", 0o644));
    theirs.insert("locked.txt".to_owned(), support::file(b"readable", 0o604));

    // Recovery (crashed once after settling, then run again) fails the
    // transaction and leaves their edits alone: nothing to leave for an operator.
    let crash_after_settling = CrashAt::new(FaultPoint::Settled);
    let interrupted = trial.reopened()?.committer.recover_with_faults(&ledger, &crash_after_settling);
    assert!(matches!(interrupted, Err(CommitError::FaultInjected(FaultPoint::Settled))), "{interrupted:?}");
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert!(report.is_clean() && report.unresolved.is_empty(), "{report:?}");
    assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::Failed));
    assert!(trial.ws.tree() == theirs, "{:?}", tree_difference(&trial.ws.tree(), &theirs));
    assert!(trial.ws.no_transaction_dirs());
    Ok(())
}

#[test]
fn a_stale_commit_crashed_in_its_cleanup_is_cleaned_even_if_someone_made_the_same_change() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    // Someone edits a path the transaction deletes: revalidation fails.
    support::write(&trial.ws.root, "d/b.txt", b"their b");
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let recorder = CrashAt::recording();
    let stale = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &recorder).unwrap_err();
    assert!(matches!(stale, CommitError::Stale { .. }), "{stale:?}");
    let cleanup: Vec<FaultPoint> =
        recorder.seen().into_iter().filter(|point| matches!(point, FaultPoint::CleanedUp(_))).collect();
    assert!(!cleanup.is_empty(), "a stale commit cleans up its directory");
    for point in cleanup {
        let trial = Trial::new(&blobs)?;
        support::write(&trial.ws.root, "d/b.txt", b"their b");
        let ledger = MemoryLedger::new();
        ledger.insert(trial.run.transaction, TransactionState::Revalidating);
        let crashed = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(point));
        assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{point}: {crashed:?}");
        assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::Stale));
        // Then someone makes some of the planned changes themselves.
        support::write(&trial.ws.root, "a.txt", b"changed");
        support::chmod(&trial.ws.root, "script.sh", 0o755);
        std::fs::create_dir(trial.ws.root.join("t"))?;
        let before = trial.ws.tree();
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert!(report.is_clean() && report.unresolved.is_empty(), "{point}: {report:?}");
        assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::Stale), "{point}");
        assert_eq!(trial.ws.tree(), before, "{point}: recovery changed nothing in the workspace");
        assert!(trial.ws.no_transaction_dirs(), "{point}");
    }
    Ok(())
}

/// A trial whose commit, recorded in `ledger` from Revalidating, crashed at `point`.
fn crashed_trial(blobs: &BlobStore, ledger: &MemoryLedger, point: FaultPoint) -> Result<Trial> {
    let trial = Trial::new(blobs)?;
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let crashed = trial.ws.committer.commit_with_faults(&trial.run.request(blobs), ledger, &CrashAt::new(point));
    assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
    Ok(trial)
}

#[test]
fn after_the_commit_point_a_replaced_install_is_someone_elses_even_with_the_same_bytes() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let ledger = MemoryLedger::new();
    let trial = crashed_trial(&blobs, &ledger, FaultPoint::CommitMarkerSynced)?;
    // Someone saves a.txt again with exactly the bytes and mode vsh installed:
    // a new file, not the one the commit put there, even with its inode number.
    let path = trial.ws.root.join("a.txt");
    let bytes = std::fs::read(&path)?;
    let reused = support::replace_with_same_bytes(&trial.ws.root, "a.txt");
    eprintln!("the new a.txt reused the inode number: {reused}");
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.rolled_forward, vec![trial.run.transaction]);
    let changed: Vec<&str> = report.changed_since_commit.iter().map(|(_, path)| path.as_str()).collect();
    assert_eq!(changed, vec!["a.txt"], "{report:?}");
    assert_eq!(report.paths_of(trial.run.transaction), Some(trial.run.diff.len()));
    assert_eq!(std::fs::read(&path)?, bytes, "their file is left alone");
    Ok(())
}

#[test]
fn after_the_commit_point_an_unreadable_file_someone_rewrote_is_reported_by_its_metadata() -> Result {
    // As an unprivileged user, for whom locked.txt (made 0o000 by the
    // commit) cannot be read back: only its kind, size and mode tell.
    if !support::also_as_nobody("after_the_commit_point_an_unreadable_file_someone_rewrote_is_reported_by_its_metadata")
        || rustix::process::geteuid().is_root()
    {
        return Ok(());
    }
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let ledger = MemoryLedger::new();
    let trial = crashed_trial(&blobs, &ledger, FaultPoint::CommitMarkerSynced)?;
    // Its owner rewrites it (a different size) and locks it again.
    support::chmod(&trial.ws.root, "locked.txt", 0o600);
    std::fs::write(trial.ws.root.join("locked.txt"), b"rewritten, longer than before")?;
    support::chmod(&trial.ws.root, "locked.txt", 0o000);
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.rolled_forward, vec![trial.run.transaction]);
    let changed: Vec<&str> = report.changed_since_commit.iter().map(|(_, path)| path.as_str()).collect();
    assert_eq!(changed, vec!["locked.txt"], "{report:?}");
    Ok(())
}

#[test]
fn a_rollback_never_takes_a_file_someone_saved_over_an_install_even_with_its_inode_number() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    // Everything applied, nothing committed: recovery rolls back.
    let crashed =
        trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(FaultPoint::Verified));
    assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
    let installed = std::fs::read(trial.ws.root.join("a.txt"))?;
    let reused = support::replace_with_same_bytes(&trial.ws.root, "a.txt");
    eprintln!("the new a.txt reused the inode number: {reused}");
    let report = trial.reopened()?.committer.recover(&ledger)?;
    // Their a.txt is not the node the commit installed: it stays where they
    // saved it, and only that path is left for the operator (its install,
    // and the old a.txt, which cannot go back while their file is there).
    assert_eq!(std::fs::read(trial.ws.root.join("a.txt"))?, installed, "their file is left alone: {report:?}");
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    let left = &report.unresolved[0].paths;
    assert!(!left.is_empty() && left.iter().all(|left| left.path == p("a.txt")), "{report:?}");
    let kept = left.iter().find_map(|left| left.kept.clone()).expect("the old a.txt is kept");
    assert_eq!(std::fs::read(trial.ws.root.join(kept.as_str()))?, b"alpha");
    // The crash came while the ledger said Committing: the report says what
    // the ledger says now.
    assert_eq!(report.unresolved[0].state, Some(TransactionState::RecoveryRequired));
    assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::RecoveryRequired));
    Ok(())
}

#[test]
fn a_directory_someone_makes_first_fails_the_commit_and_every_earlier_operation_is_undone() -> Result {
    /// Makes the directory `t` once every intent is durable, before any operation runs.
    struct MakeDir<'a>(&'a std::path::Path);
    impl vsh_commit::FaultInjector for MakeDir<'_> {
        fn crash_at(&self, point: FaultPoint) -> bool {
            if point == FaultPoint::CommitStatePersisted {
                std::fs::create_dir(self.0.join("t")).unwrap();
            }
            false
        }
    }
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let before = trial.ws.tree();
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let error = trial
        .ws
        .committer
        .commit_with_faults(&trial.run.request(&blobs), &ledger, &MakeDir(&trial.ws.root))
        .unwrap_err();
    // Creating `t` failed after earlier operations were applied: all of them
    // are undone; `t` is theirs and stays.
    assert!(matches!(error, CommitError::Apply { .. }), "{error:?}");
    assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::Failed));
    let mut expected = before;
    let mode = support::mode_of(&trial.ws.root, "t");
    expected.insert("t".to_owned(), support::Node::Dir { mode });
    assert!(trial.ws.tree() == expected, "{:?}", tree_difference(&trial.ws.tree(), &expected));
    assert!(trial.ws.no_transaction_dirs());
    Ok(())
}

#[test]
fn files_of_another_transaction_planted_in_a_commit_directory_are_conflicts() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    let only_dir = || -> std::path::PathBuf {
        let mut dirs: Vec<_> =
            std::fs::read_dir(trial.ws.root.join(".vsh/txn")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.pop().unwrap()
    };
    // Transaction A: everything applied, then its rollback stopped right
    // after its settled record. Its plan, journal and settled record are kept.
    let a = trial.run.transaction;
    ledger.insert(a, TransactionState::Revalidating);
    let crashed =
        trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(FaultPoint::Verified));
    assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
    let dir_a = only_dir();
    let plan_a = std::fs::read(dir_a.join("plan"))?;
    let journal_a = std::fs::read(dir_a.join("journal"))?;
    let stopped = trial.reopened()?.committer.recover_with_faults(&ledger, &CrashAt::new(FaultPoint::Settled));
    assert!(matches!(stopped, Err(CommitError::FaultInjected(FaultPoint::Settled))), "{stopped:?}");
    let settled_a = std::fs::read(dir_a.join("settled"))?;
    assert!(trial.reopened()?.committer.recover(&ledger)?.is_clean());

    // Transaction B: another change, stopped with everything applied.
    let other = trial.ws.run(&blobs, |vfs| vfs.write(&p("b-only.txt"), Arc::from(&b"b"[..])))?;
    ledger.insert(other.transaction, TransactionState::Revalidating);
    let crashed =
        trial.ws.committer.commit_with_faults(&other.request(&blobs), &ledger, &CrashAt::new(FaultPoint::Verified));
    assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
    let dir_b = only_dir();
    assert_ne!(dir_a, dir_b);
    let tree = trial.ws.tree();
    // Records that name A but B's plan, made with the key (as whoever holds
    // it could): only their transaction tells them apart.
    let key = vsh_types::AuthorityKey::unauthenticated();
    let plan_b = std::fs::read(dir_b.join("plan"))?;
    let digest_b = vsh_commit::format::PlanDigest(plan_b[plan_b.len() - 32..].try_into()?);
    let settled_forged = vsh_commit::format::Settled { transaction: a, plan: digest_b, left: Vec::new() }.encode(&key);
    let mut journal_forged = vsh_commit::format::Journal::decode(&std::fs::read(dir_b.join("journal"))?, &key)?;
    journal_forged.transaction = a;
    let journal_forged = journal_forged.encode(&key);
    let marker_forged = vsh_commit::format::Marker { transaction: a, plan: digest_b }.encode(&key);
    // Each of these in B's directory is someone else's record: a conflict
    // naming it, and nothing is touched.
    for (file, planted) in [
        ("plan", &plan_a),
        ("journal", &journal_a),
        ("settled", &settled_a),
        ("settled", &settled_forged),
        ("journal", &journal_forged),
        ("complete", &marker_forged),
    ] {
        let original = std::fs::read(dir_b.join(file)).ok();
        std::fs::write(dir_b.join(file), planted)?;
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert_eq!(report.conflicts.len(), 1, "{file}: {report:?}");
        assert!(report.conflicts[0].path.as_str().ends_with(file), "{file}: {report:?}");
        assert_eq!(trial.ws.tree(), tree, "{file}");
        match original {
            Some(bytes) => std::fs::write(dir_b.join(file), bytes)?,
            None => std::fs::remove_file(dir_b.join(file))?,
        }
    }
    // A marker that does not decode, where the ledger says Committed, is not
    // a crash while writing it: a conflict too.
    std::fs::write(dir_b.join("complete"), b"torn")?;
    ledger.insert(other.transaction, TransactionState::Committed);
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert!(report.conflicts[0].path.as_str().ends_with("complete"), "{report:?}");
    assert_eq!(trial.ws.tree(), tree);
    Ok(())
}

#[test]
fn a_rollback_reports_rolled_back_only_when_it_undid_something() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    // Without a ledger, the outcome says what recovery did to the workspace.
    for (point, undid) in [(FaultPoint::Applied, true), (FaultPoint::IntentSynced(0), false)] {
        let trial = Trial::new(&blobs)?;
        let crashed =
            trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &NoLedger, &CrashAt::new(point));
        assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
        let report = trial.reopened()?.committer.recover(&NoLedger)?;
        let id = vec![trial.run.transaction];
        let (rolled_back, cleaned) = if undid { (id, Vec::new()) } else { (Vec::new(), id) };
        assert_eq!((report.rolled_back, report.cleaned), (rolled_back, cleaned), "{point}");
    }
    Ok(())
}

#[test]
fn a_committed_record_whose_directory_lost_its_plan_but_not_its_journal_disagrees() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    // Committed cleanup removes the journal before the plan, and the plan
    // before the marker: a directory without the marker whose ledger says
    // Committed may hold both (a ledger that is the commit point writes no
    // marker), the plan alone, or neither; never the journal without the plan.
    for (ledger, removed) in
        [(MemoryLedger::new(), &["complete", "plan"][..]), (MemoryLedger::as_commit_point(), &["plan"][..])]
    {
        let trial = Trial::new(&blobs)?;
        ledger.insert(trial.run.transaction, TransactionState::Revalidating);
        let crashed = trial.ws.committer.commit_with_faults(
            &trial.run.request(&blobs),
            &ledger,
            &CrashAt::new(FaultPoint::CommittedStatePersisted),
        );
        assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
        let dir = std::fs::read_dir(trial.ws.root.join(".vsh/txn"))?.next().unwrap()?.path();
        for file in removed {
            std::fs::remove_file(dir.join(file))?;
        }
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert_eq!(report.conflicts.len(), 1, "{removed:?}: {report:?}");
        assert!(
            matches!(report.conflicts[0].reason, RecoveryConflictReason::LedgerDisagrees { .. }),
            "{removed:?}: {report:?}"
        );
    }
    Ok(())
}

#[test]
fn a_committed_record_without_a_marker_rolls_forward_once_every_operation_is_done() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    // A ledger that is the commit point: Committed, no marker ever written;
    // the crash came before cleanup. Then the in-place cleanup's states:
    // the journal gone, then the plan too.
    for removed in [&[][..], &["journal"][..], &["journal", "plan"][..]] {
        let trial = Trial::new(&blobs)?;
        let ledger = MemoryLedger::as_commit_point();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let crash = CrashAt::new(FaultPoint::CommittedStatePersisted);
        let crashed = trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &crash);
        assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
        let dir = std::fs::read_dir(trial.ws.root.join(".vsh/txn"))?.next().unwrap()?.path();
        assert!(!dir.join("complete").exists(), "no marker is written");
        for file in removed {
            std::fs::remove_file(dir.join(file))?;
        }
        let report = trial.reopened()?.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{removed:?}: {report:?}");
        // Before any cleanup the commit is finished as after a marker (its
        // paths checked and counted); once cleanup began, only cleanup is left.
        if removed.is_empty() {
            assert_eq!(report.rolled_forward, vec![transaction], "{report:?}");
            assert_eq!(report.paths_of(transaction), Some(trial.run.diff.len()));
            assert!(report.changed_since_commit.is_empty(), "{report:?}");
        } else {
            assert_eq!(report.cleaned, vec![transaction], "{removed:?}: {report:?}");
        }
        check_outcome(&trial, &reference, FaultPoint::CommittedStatePersisted, ledger.get(transaction));
    }
    Ok(())
}

#[test]
fn an_old_node_someone_wrote_to_is_kept_when_the_crash_came_after_the_ledger_said_committed() -> Result {
    /// Appends to a.txt once the commit is recorded Committing (after
    /// revalidation checked it), and crashes once it is recorded Committed.
    struct AppendThenCrash<'a>(&'a std::path::Path);
    impl vsh_commit::FaultInjector for AppendThenCrash<'_> {
        fn crash_at(&self, point: FaultPoint) -> bool {
            if point == FaultPoint::CommitStatePersisted {
                use std::io::Write as _;
                let mut file = std::fs::OpenOptions::new().append(true).open(self.0.join("a.txt")).unwrap();
                file.write_all(b" and their words").unwrap();
            }
            point == FaultPoint::CommittedStatePersisted
        }
    }
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let crashed =
        trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &AppendThenCrash(&trial.ws.root));
    assert!(matches!(crashed, Err(CommitError::FaultInjected(FaultPoint::CommittedStatePersisted))), "{crashed:?}");
    assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::Committed));
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert_eq!(report.kept.len(), 1, "{report:?}");
    assert_eq!(report.kept[0].path, p("a.txt"));
    assert_eq!(std::fs::read(trial.ws.root.join(report.kept[0].kept.as_str()))?, b"alpha and their words");
    Ok(())
}

#[test]
fn a_node_left_in_quarantine_that_no_left_operation_keeps_is_a_conflict_and_survives() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    // Without a ledger, and with one that still says Revalidating (nothing
    // can have been applied); "1" is the slot of a.txt's quarantine.
    for (planted, with_ledger) in [("200", false), ("not-a-slot", false), ("1", true)] {
        let trial = Trial::new(&blobs)?;
        let memory = MemoryLedger::new();
        memory.insert(trial.run.transaction, TransactionState::Revalidating);
        let ledger: &dyn CommitLedger = if with_ledger { &memory } else { &NoLedger };
        let crashed = trial.ws.committer.commit_with_faults(
            &trial.run.request(&blobs),
            ledger,
            &CrashAt::new(FaultPoint::IntentSynced(0)),
        );
        assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
        // Nothing was applied, so the rollback moves no old node back:
        // whatever is kept in the directory is no node of this transaction's.
        let dir = std::fs::read_dir(trial.ws.root.join(".vsh/txn"))?.next().unwrap()?.path();
        let name = format!("quarantine.{planted}");
        std::fs::write(dir.join(&name), b"someone's bytes")?;
        let report = trial.reopened()?.committer.recover(ledger)?;
        assert_eq!(report.conflicts.len(), 1, "{planted}: {report:?}");
        assert!(report.conflicts[0].path.as_str().ends_with(&name), "{planted}: {report:?}");
        assert_eq!(std::fs::read(dir.join(&name))?, b"someone's bytes");
        // Decided before anything is recorded: no settled record, and the
        // ledger still says what it said.
        assert!(!dir.join("settled").exists(), "{planted}");
        if with_ledger {
            assert_eq!(memory.get(trial.run.transaction), Some(TransactionState::Revalidating));
        }
    }
    Ok(())
}

#[test]
fn a_journal_with_intents_but_no_plan_is_a_conflict_even_when_nothing_else_is_left() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let crashed = trial.ws.committer.commit_with_faults(
        &trial.run.request(&blobs),
        &NoLedger,
        &CrashAt::new(FaultPoint::IntentSynced(0)),
    );
    assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
    // The plan is synced before anything is staged or journaled: intents
    // without it, even in an otherwise empty directory, are unexplained.
    let dir = std::fs::read_dir(trial.ws.root.join(".vsh/txn"))?.next().unwrap()?.path();
    std::fs::remove_file(dir.join("plan"))?;
    for staged in std::fs::read_dir(&dir)? {
        let staged = staged?;
        if staged.file_name().to_string_lossy().starts_with("stage.") {
            std::fs::remove_file(staged.path())?;
        }
    }
    let report = trial.reopened()?.committer.recover(&NoLedger)?;
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert!(dir.join("journal").exists(), "the evidence stays");
    Ok(())
}

/// A machine crash can lose a commit's reservation (the store appends it
/// without an fsync of its own) but not what was made durable after it with
/// one: recovery may find the directory of a transaction, intents journaled,
/// that the ledger holds as approved again. Committing was never durable, so
/// nothing was applied: the directory goes, nothing in the workspace is
/// touched (not even a path someone changed since), the record stays
/// approved, and the transaction commits afterwards.
#[test]
fn a_commit_whose_reservation_a_machine_crash_lost_is_cleaned_and_can_commit_again() -> Result {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let reference = reference(&blobs)?;
    let last_intent = FaultPoint::IntentSynced(u32::try_from(reference.operations - 1)?);
    for (approved, someone_writes) in [(TransactionState::Approved, false), (TransactionState::AutoApproved, true)] {
        let trial = Trial::new(&blobs)?;
        let ledger = MemoryLedger::as_commit_point();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let error =
            trial.ws.committer.commit_with_faults(&trial.run.request(&blobs), &ledger, &CrashAt::new(last_intent));
        assert!(matches!(error, Err(CommitError::FaultInjected(at)) if at == last_intent), "{error:?}");
        assert!(!trial.ws.no_transaction_dirs());
        // The machine crash: the reservation's append is lost, the intents are not.
        ledger.insert(transaction, approved);
        if someone_writes {
            // a.txt is a file the plan rewrites; d/b.txt one it deletes.
            std::fs::write(trial.ws.root.join("a.txt"), b"someone else's")?;
            std::fs::remove_file(trial.ws.root.join("d/b.txt"))?;
        }
        let expected = trial.ws.tree();

        let restarted = trial.reopened()?;
        let report = restarted.committer.recover(&ledger)?;
        assert!(report.is_clean(), "{approved:?}: {:?}", report.conflicts);
        assert!(report.unresolved.is_empty(), "{approved:?}: {:?}", report.unresolved);
        assert_eq!(report.cleaned, [transaction], "{approved:?}: {report:?}");
        assert!(report.rolled_back.is_empty() && report.rolled_forward.is_empty(), "{approved:?}: {report:?}");
        assert_eq!(ledger.get(transaction), Some(approved));
        drop(restarted);
        assert!(trial.ws.no_transaction_dirs());
        let tree = trial.ws.tree();
        assert!(tree == expected, "{approved:?}: the workspace changed at {:?}", tree_difference(&tree, &expected));

        if !someone_writes {
            // Reserved again, as a runtime does, it commits.
            ledger.insert(transaction, TransactionState::Revalidating);
            let restarted = trial.reopened()?;
            restarted.committer.commit_with_ledger(&trial.run.request(&blobs), &ledger)?;
            assert_eq!(ledger.get(transaction), Some(TransactionState::Committed));
            drop(restarted);
            let tree = trial.ws.tree();
            assert!(tree == reference.after, "differs at {:?}", tree_difference(&tree, &reference.after));
        }
    }
    Ok(())
}

/// A commit whose record lost how it ended (left Committing or
/// `RecoveryRequired` with nothing kept, as a salvaged log leaves one) is
/// settled by what the workspace holds against its diff: none of its
/// changes, Failed; all of them, Committed; anything else, left alone.
#[test]
fn a_commit_whose_record_lost_how_it_ended_is_settled_by_the_workspace() -> Result {
    use vsh_commit::Settled;
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let wait = vsh_host::LockWait::default();
    // Nothing written: failed.
    let trial = Trial::new(&blobs)?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::RecoveryRequired);
    let entries = trial.run.diff.entries();
    let settled = trial.ws.committer.session(&wait)?.settle(trial.run.transaction, entries, &ledger)?;
    assert_eq!((settled, ledger.get(trial.run.transaction)), (Settled::Failed, Some(TransactionState::Failed)));
    // Landed (committed under a ledger that then lost it): committed.
    let trial = Trial::new(&blobs)?;
    trial.ws.committer.commit(&trial.run.request(&blobs))?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Committing);
    let entries = trial.run.diff.entries();
    let settled = trial.ws.committer.session(&wait)?.settle(trial.run.transaction, entries, &ledger)?;
    assert_eq!((settled, ledger.get(trial.run.transaction)), (Settled::Committed, Some(TransactionState::Committed)));
    // Landed, then one of its paths changed by hand: neither, left alone.
    let trial = Trial::new(&blobs)?;
    trial.ws.committer.commit(&trial.run.request(&blobs))?;
    let changed = trial
        .run
        .diff
        .entries()
        .iter()
        .find(|entry| entry.after.is_some_and(|after| after.kind == vsh_types::NodeKind::File))
        .unwrap();
    std::fs::write(trial.ws.root.join(changed.path.as_str()), b"by hand")?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::RecoveryRequired);
    let entries = trial.run.diff.entries();
    let settled = trial.ws.committer.session(&wait)?.settle(trial.run.transaction, entries, &ledger)?;
    assert_eq!(settled, Settled::Neither(vec![changed.path.clone()]));
    assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::RecoveryRequired));
    // A record in any other state is not one to settle.
    ledger.insert(trial.run.transaction, TransactionState::Approved);
    let settled = trial.ws.committer.session(&wait)?.settle(trial.run.transaction, entries, &ledger)?;
    assert_eq!(settled, Settled::NotLost);
    Ok(())
}
