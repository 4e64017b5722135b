//! Writers that ignore the commit lock, racing a commit while it applies.
//!
//! The lock is advisory: an editor, a build tool or another program can
//! change a path between revalidation and the commit's end. Whatever the
//! moment, the outcome must be one of three, with the record agreeing:
//!
//! - **Committed**: every path holds its after state, except the writer's;
//! - **Failed** (or **Stale**, when the write came before revalidation):
//!   every path holds its before state, except the writer's;
//! - **Unresolved** (the ledger in `RecoveryRequired`): every path holds its
//!   before state except the writer's, which are named, with their old nodes kept.
//!
//! and the writer's bytes are never overwritten or deleted: they are at their
//! path, or (for an old node they wrote to after it was checked) moved aside
//! and reported. The deterministic tests put the writer at the two moments
//! the issue names (right after an install, while the old node is
//! quarantined); the randomized one at every kind of moment, with every kind
//! of write, over 150 seeded trials, a third of them crashed and recovered.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use vsh_commit::{CommitError, CrashAt, FaultInjector, FaultPoint, MemoryLedger};
use vsh_host::LockWait;
use vsh_store::BlobStore;
use vsh_types::TransactionState;

use support::fixture::Trial;
use support::random::{Rng, WRITES, Write};
use support::{Node, Result, Tree, p, tree_difference, without};

/// When a writer acts: at the first fault point for which this is true (given
/// the full path of its target).
type Moment = Box<dyn Fn(FaultPoint, &Path) -> bool + Send + Sync>;

/// What became of a writer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Acted {
    /// Its moment has not come.
    Waiting,
    /// Its moment came, and no write applied to the path's state.
    Nothing,
    /// It made this write and left this node at its path.
    Wrote(Write, Node),
}

/// A writer that acts once, at its moment.
struct Writer {
    root: PathBuf,
    path: &'static str,
    write: Write,
    when: Moment,
    wrote: Mutex<Acted>,
    /// A crash to inject after the writer acted (for the recovery trials).
    crash_after: Option<FaultPoint>,
}

impl Writer {
    /// The write it made, if any.
    fn made(&self) -> Option<(Write, Node)> {
        match self.wrote.lock().unwrap().clone() {
            Acted::Wrote(write, node) => Some((write, node)),
            Acted::Waiting | Acted::Nothing => None,
        }
    }

    /// Make the writer's write, or, if the path is not in a state it applies
    /// to, the first of the others that applies.
    fn act(&self) -> Option<(Write, Node)> {
        let first = WRITES.iter().position(|write| *write == self.write).unwrap_or(0);
        (0..WRITES.len()).map(|offset| WRITES[(first + offset) % WRITES.len()]).find_map(|write| {
            let node = self.try_write(write)?;
            Some((write, node))
        })
    }

    fn try_write(&self, write: Write) -> Option<Node> {
        let full = self.root.join(self.path);
        let meta = std::fs::symlink_metadata(&full).ok();
        let is_file = meta.as_ref().is_some_and(std::fs::Metadata::is_file);
        let parent_is_dir = full.parent().is_some_and(|parent| {
            std::fs::symlink_metadata(parent).is_ok_and(|meta| meta.is_dir() && meta.permissions().mode() & 0o200 != 0)
        });
        match write {
            Write::Append if is_file => {
                use std::io::Write as _;
                let mut file = std::fs::OpenOptions::new().append(true).open(&full).ok()?;
                file.write_all(b" +theirs").ok()?;
            }
            Write::Replace if parent_is_dir => {
                let temp = full.with_file_name(".editor-swap");
                std::fs::write(&temp, b"their saved version").ok()?;
                std::fs::rename(&temp, &full).ok()?;
            }
            Write::Create if meta.is_none() && parent_is_dir => std::fs::write(&full, b"their new file").ok()?,
            Write::Chmod if is_file => {
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o604)).ok()?;
            }
            _ => return None,
        }
        support::node_at(&full)
    }
}

impl FaultInjector for Writer {
    fn crash_at(&self, point: FaultPoint) -> bool {
        let mut wrote = self.wrote.lock().unwrap();
        if *wrote == Acted::Waiting && (self.when)(point, &self.root.join(self.path)) {
            *wrote = match self.act() {
                Some((made, node)) => Acted::Wrote(made, node),
                None => Acted::Nothing,
            };
            return false;
        }
        *wrote != Acted::Waiting && self.crash_after == Some(point)
    }
}

/// Check one raced commit's outcome (see the module docs); returns which of
/// the three it was.
fn check_outcome(trial: &Trial, fixture: &Fixture, writer: &Writer, raced: &Raced, label: &str) -> &'static str {
    let (before, after) = (&fixture.before, &fixture.after);
    let (state, kept, unresolved) = (raced.state, &raced.kept, &raced.left);
    let now = trial.ws.tree();
    let made = writer.made();
    let wrote = made.as_ref().map(|(_, node)| node.clone());
    let (now_cmp, before_cmp, after_cmp) = match &wrote {
        Some(_) => (without(&now, writer.path), without(before, writer.path), without(after, writer.path)),
        None => (now.clone(), before.clone(), after.clone()),
    };
    let outcome = match state {
        Some(TransactionState::Committed) => {
            assert!(now_cmp == after_cmp, "{label}: committed but {:?} differ", tree_difference(&now_cmp, &after_cmp));
            "committed"
        }
        Some(state @ (TransactionState::Failed | TransactionState::Stale)) => {
            assert!(
                now_cmp == before_cmp,
                "{label}: {state:?} but {:?} differ",
                tree_difference(&now_cmp, &before_cmp)
            );
            if state == TransactionState::Stale { "stale" } else { "failed" }
        }
        Some(TransactionState::RecoveryRequired) => {
            assert!(
                now_cmp == before_cmp,
                "{label}: unresolved but {:?} differ",
                tree_difference(&now_cmp, &before_cmp)
            );
            assert!(wrote.is_some(), "{label}: unresolved without a writer");
            for left in unresolved {
                let left = left.path.as_str();
                let related = left == writer.path
                    || left.starts_with(&format!("{}/", writer.path))
                    || writer.path.starts_with(&format!("{left}/"));
                assert!(related, "{label}: left {left}, which the writer ({}) did not touch", writer.path);
            }
            "unresolved"
        }
        other => panic!("{label}: the record says {other:?}"),
    };
    // The writer's bytes are at their path, or kept aside and reported. (A
    // mode set on a node the committed transaction then replaced carries no
    // bytes: the replacement supersedes it, as any later write would.)
    let superseded = made.as_ref().is_some_and(|(write, _)| *write == Write::Chmod)
        && outcome == "committed"
        && before.get(writer.path) != after.get(writer.path);
    // A rollback puts back the modes the transaction set, on the writer's
    // node too when the writer changed only its bytes (locked.txt appended
    // to after its chmod to 0o000 was applied): their bytes stay, with the
    // mode from before the transaction.
    let rolled_back = outcome != "committed";
    let mode_restored = |node: &support::Node| match (node, now.get(writer.path), before.get(writer.path)) {
        (
            Node::File { bytes, .. },
            Some(Node::File { bytes: now_bytes, mode: now_mode }),
            Some(Node::File { mode: before_mode, .. }),
        ) => {
            rolled_back
                && made.as_ref().is_some_and(|(write, _)| *write != Write::Chmod)
                && bytes == now_bytes
                && now_mode == before_mode
        }
        _ => false,
    };
    if let Some(node) = wrote.filter(|_| !superseded) {
        let at_path = now.get(writer.path) == Some(&node) || mode_restored(&node);
        let aside = kept.iter().any(|kept| {
            kept.path.as_str() == writer.path
                && support::node_at(&trial.ws.root.join(kept.kept.as_str())) == Some(node.clone())
        });
        assert!(
            at_path || aside,
            "{label}: the writer's {node:?} is lost (now {:?}, kept {kept:?})",
            now.get(writer.path)
        );
    }
    outcome
}

struct Fixture {
    _data: tempfile::TempDir,
    blobs: BlobStore,
    before: Tree,
    after: Tree,
}

fn fixture() -> Result<Fixture> {
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let trial = Trial::new(&blobs)?;
    let before = trial.ws.tree();
    trial.ws.committer.commit(&trial.run.request(&blobs))?;
    let after = trial.ws.tree();
    Ok(Fixture { _data: data, blobs, before, after })
}

/// How a raced commit ended.
struct Raced {
    /// The ledger's state.
    state: Option<TransactionState>,
    /// Old nodes kept aside.
    kept: Vec<vsh_commit::KeptNode>,
    /// Operations a rollback left.
    left: Vec<vsh_commit::LeftPath>,
}

/// Commit `trial` with `writer` racing it (and recover, if it crashed).
fn race(fixture: &Fixture, trial: &Trial, writer: &Writer) -> Result<Raced> {
    let ledger = MemoryLedger::new();
    let transaction = trial.run.transaction;
    ledger.insert(transaction, TransactionState::Revalidating);
    let result = trial.ws.committer.commit_with_faults(&trial.run.request(&fixture.blobs), &ledger, writer);
    let (mut kept, mut left) = (Vec::new(), Vec::new());
    match result {
        Ok(receipt) => kept = receipt.kept,
        Err(CommitError::Unresolved { paths, .. }) => left = paths,
        Err(CommitError::FaultInjected(_)) => {
            let report = trial.reopened()?.committer.recover(&ledger)?;
            assert!(report.is_clean(), "{:?}", report.conflicts);
            kept = report.kept;
            left = report.unresolved.into_iter().flat_map(|unresolved| unresolved.paths).collect();
        }
        Err(error) => assert!(!error.workspace_may_be_changed(), "{error:?}"),
    }
    // Recovery afterwards finds nothing new to do, and never blocks commits.
    let report = trial.reopened()?.committer.recover(&ledger)?;
    assert!(report.is_clean() && report.rolled_back.is_empty() && report.rolled_forward.is_empty(), "{report:?}");
    Ok(Raced { state: ledger.get(transaction), kept, left })
}

fn writer(
    trial: &Trial,
    path: &'static str,
    write: Write,
    when: impl Fn(FaultPoint, &Path) -> bool + Send + Sync + 'static,
) -> Writer {
    Writer {
        root: trial.ws.root.clone(),
        path,
        write,
        when: Box::new(when),
        wrote: Mutex::new(Acted::Waiting),
        crash_after: None,
    }
}

#[test]
fn a_writer_appending_right_after_the_install_keeps_its_bytes_and_everything_else_rolls_back() -> Result {
    let fixture = fixture()?;
    let trial = Trial::new(&fixture.blobs)?;
    // Right after the operation that installed the new a.txt.
    let writer = writer(&trial, "a.txt", Write::Append, |point, path| {
        matches!(point, FaultPoint::OperationApplied(_)) && std::fs::read(path).is_ok_and(|bytes| bytes == b"changed")
    });
    let raced = race(&fixture, &trial, &writer)?;
    let outcome = check_outcome(&trial, &fixture, &writer, &raced, "append");
    let left = raced.left;
    assert_eq!(outcome, "unresolved");
    assert_eq!(std::fs::read(trial.ws.root.join("a.txt"))?, b"changed +theirs");
    // Both of a.txt's operations are left; the old a.txt is kept.
    let names: BTreeSet<&str> = left.iter().map(|left| left.action).collect();
    assert_eq!(names, BTreeSet::from(["install", "quarantine"]), "{left:?}");
    let old = left.iter().find_map(|left| left.kept.clone()).expect("the old node is kept");
    assert_eq!(std::fs::read(trial.ws.root.join(old.as_str()))?, b"alpha");

    // An operator's restore puts a.txt back, their version aside.
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::RecoveryRequired);
    let restored = trial.ws.committer.session(&LockWait::default())?.restore(trial.run.transaction, &ledger)?;
    assert_eq!(restored.restored, vec![p("a.txt")]);
    assert_eq!(std::fs::read(trial.ws.root.join(restored.moved_aside[0].1.as_str()))?, b"changed +theirs");
    assert_eq!(trial.ws.tree(), fixture.before, "{:?}", tree_difference(&trial.ws.tree(), &fixture.before));
    assert!(trial.ws.no_transaction_dirs());
    Ok(())
}

#[test]
fn a_writer_taking_the_path_while_the_old_node_is_quarantined_keeps_its_file() -> Result {
    let fixture = fixture()?;
    let trial = Trial::new(&fixture.blobs)?;
    // a.txt is absent exactly between its quarantine and its install.
    let writer = writer(&trial, "a.txt", Write::Create, |point, path| {
        matches!(point, FaultPoint::OperationApplied(_)) && std::fs::symlink_metadata(path).is_err()
    });
    let raced = race(&fixture, &trial, &writer)?;
    let outcome = check_outcome(&trial, &fixture, &writer, &raced, "create");
    let left = raced.left;
    assert_eq!(outcome, "unresolved");
    assert_eq!(std::fs::read(trial.ws.root.join("a.txt"))?, b"their new file");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!((left[0].path.as_str(), left[0].action), ("a.txt", "quarantine"));
    assert_eq!(std::fs::read(trial.ws.root.join(left[0].kept.as_ref().expect("kept").as_str()))?, b"alpha");
    Ok(())
}

/// A writer that swaps `a.txt` for a symlink out of the workspace once the
/// intents are durable (its file kept at `a.bak`), so the commit's
/// quarantine moves the symlink; once the commit has installed its new
/// `a.txt`, it removes that, and puts its file back when `puts_back`
/// (sec69 F1).
struct SwapForASymlink {
    root: PathBuf,
    puts_back: bool,
    step: Mutex<u8>,
}

impl FaultInjector for SwapForASymlink {
    fn crash_at(&self, point: FaultPoint) -> bool {
        let (path, theirs) = (self.root.join("a.txt"), self.root.join("a.bak"));
        let mut step = self.step.lock().unwrap();
        match (*step, point) {
            (0, FaultPoint::CommitStatePersisted) => {
                std::fs::rename(&path, &theirs).unwrap();
                std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
                *step = 1;
            }
            (1, FaultPoint::OperationApplied(_))
                if std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file()) =>
            {
                std::fs::remove_file(&path).unwrap();
                if self.puts_back {
                    std::fs::rename(&theirs, &path).unwrap();
                }
                *step = 2;
            }
            _ => {}
        }
        false
    }
}

/// A restore never puts back a node the commit's quarantine took from a
/// racing writer (it is not the before node): it moves it aside as theirs,
/// and says so when the path does not hold the before state (sec69 F1: it
/// put a symlink out of the workspace back and said the before state was
/// restored).
#[test]
fn a_restore_moves_aside_a_node_a_racing_writer_had_quarantined_and_never_calls_it_the_before_state() -> Result {
    let fixture = fixture()?;
    for puts_back in [true, false] {
        let trial = Trial::new(&fixture.blobs)?;
        let ledger = MemoryLedger::new();
        let transaction = trial.run.transaction;
        ledger.insert(transaction, TransactionState::Revalidating);
        let writer = SwapForASymlink { root: trial.ws.root.clone(), puts_back, step: Mutex::new(0) };
        let result = trial.ws.committer.commit_with_faults(&trial.run.request(&fixture.blobs), &ledger, &writer);
        assert_eq!(*writer.step.lock().unwrap(), 2, "the writer acted twice");
        assert!(matches!(result, Err(CommitError::Unresolved { .. })), "{result:?}");
        assert_eq!(ledger.get(transaction), Some(TransactionState::RecoveryRequired));
        let report = trial.ws.committer.session(&LockWait::default())?.restore(transaction, &ledger)?;
        let a = p("a.txt");
        assert!(!report.restored.contains(&a), "{report:?}");
        let (_, aside) = report.moved_aside.iter().find(|(path, _)| *path == a).expect("the symlink moved aside");
        assert_eq!(std::fs::read_link(trial.ws.root.join(aside.as_str()))?, Path::new("/etc/hostname"));
        let now = trial.ws.tree();
        if puts_back {
            // The path holds the before state (the writer's own file back).
            assert!(report.never_held.is_empty(), "{report:?}");
            assert_eq!(now, fixture.before, "{:?}", tree_difference(&now, &fixture.before));
        } else {
            // Nothing holds the before node but the writer's copy: the path
            // is named, left as it is, and no bytes are lost.
            assert_eq!(report.never_held, vec![a.clone()], "{report:?}");
            assert!(!now.contains_key("a.txt"));
            assert_eq!(std::fs::read(trial.ws.root.join("a.bak"))?, b"alpha");
            assert!(without(&without(&now, "a.bak"), "a.txt") == without(&fixture.before, "a.txt"));
        }
        assert_eq!(ledger.get(transaction), Some(TransactionState::Failed));
        assert!(trial.ws.no_transaction_dirs(), "{report:?}");
    }
    Ok(())
}

/// A restore never undoes work that landed after the rollback settled
/// (sec70 F2: other commits went on writing a path an unresolved
/// transaction had left, and its restore put an old version back over
/// them): that path stays as it is, named, and the old node is kept aside.
#[test]
fn a_restore_leaves_a_path_changed_after_the_rollback_and_keeps_the_old_node_aside() -> Result {
    let fixture = fixture()?;
    // Later work lands on the path (as a commit installs: a new file
    // renamed over it), or deletes it (sec71 F1: the old file came back).
    for deletes in [false, true] {
        let trial = Trial::new(&fixture.blobs)?;
        let writer = writer(&trial, "a.txt", Write::Create, |point, path| {
            matches!(point, FaultPoint::OperationApplied(_)) && std::fs::symlink_metadata(path).is_err()
        });
        let raced = race(&fixture, &trial, &writer)?;
        assert_eq!(check_outcome(&trial, &fixture, &writer, &raced, "create"), "unresolved");
        std::thread::sleep(std::time::Duration::from_millis(20));
        if deletes {
            std::fs::remove_file(trial.ws.root.join("a.txt"))?;
        } else {
            let later = trial.ws.root.join(".later");
            std::fs::write(&later, b"a later commit")?;
            std::fs::rename(&later, trial.ws.root.join("a.txt"))?;
        }
        let ledger = MemoryLedger::new();
        ledger.insert(trial.run.transaction, TransactionState::RecoveryRequired);
        let report = trial.ws.committer.session(&LockWait::default())?.restore(trial.run.transaction, &ledger)?;
        let a = p("a.txt");
        let now = std::fs::read(trial.ws.root.join("a.txt")).ok();
        assert_eq!(now, (!deletes).then(|| b"a later commit".to_vec()), "{report:?}");
        assert_eq!(report.changed_by_others, vec![a.clone()]);
        assert!(!report.restored.contains(&a), "{report:?}");
        let (_, aside) = report.moved_aside.iter().find(|(path, _)| *path == a).expect("the old node kept aside");
        assert_eq!(std::fs::read(trial.ws.root.join(aside.as_str()))?, b"alpha");
        assert!(trial.ws.no_transaction_dirs(), "{report:?}");
    }
    Ok(())
}

/// ux66 F5: an unresolved transaction had no resolution but a restore, so an
/// operator who had set the workspace right by hand could only put the
/// before state back over it. Keep leaves every path as it is, moves the
/// nodes the commit had taken aside (never deleting them), ends the record
/// Failed and removes the commit's directory; a crash at any step of it is
/// finished by running it again.
#[test]
fn keep_leaves_the_workspace_as_it_is_and_moves_aside_what_the_commit_took() -> Result {
    let fixture = fixture()?;
    for crash_at in [None, Some(0_u32)] {
        let trial = Trial::new(&fixture.blobs)?;
        let writer = writer(&trial, "a.txt", Write::Create, |point, path| {
            matches!(point, FaultPoint::OperationApplied(_)) && std::fs::symlink_metadata(path).is_err()
        });
        let raced = race(&fixture, &trial, &writer)?;
        assert_eq!(check_outcome(&trial, &fixture, &writer, &raced, "create"), "unresolved");
        let found = trial.ws.tree();
        let ledger = MemoryLedger::new();
        ledger.insert(trial.run.transaction, TransactionState::RecoveryRequired);
        let session = trial.ws.committer.session(&LockWait::default())?;
        if let Some(step) = crash_at {
            let crashed =
                session.keep_with_faults(trial.run.transaction, &ledger, &CrashAt::new(FaultPoint::Restored(step)));
            assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{crashed:?}");
            assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::RecoveryRequired));
        }
        let report = session.keep(trial.run.transaction, &ledger)?;
        assert!(report.kept && report.restored.is_empty(), "{report:?}");
        assert!(report.left_as_found.contains(&p("a.txt")), "{report:?}");
        assert_eq!(trial.ws.tree(), found, "{:?}", tree_difference(&trial.ws.tree(), &found));
        // The before node the commit had quarantined is aside, whole.
        let aside: Vec<Vec<u8>> = report
            .moved_aside
            .iter()
            .filter(|(path, _)| *path == p("a.txt"))
            .map(|(_, aside)| std::fs::read(trial.ws.root.join(aside.as_str())).unwrap())
            .collect();
        if crash_at.is_none() {
            assert_eq!(aside, vec![b"alpha".to_vec()], "{report:?}");
        }
        assert_eq!(ledger.get(trial.run.transaction), Some(TransactionState::Failed));
        assert!(trial.ws.no_transaction_dirs(), "{report:?}");
        let recovered = walk_files(&trial.ws.root.join(".vsh/recovered"));
        assert!(recovered.iter().any(|bytes| bytes == b"alpha"), "nothing is deleted: {recovered:?}");
        // Nothing is left to resolve.
        assert!(session.keep(trial.run.transaction, &ledger).is_err());
    }
    Ok(())
}

/// Every file's bytes beneath `root`.
fn walk_files(root: &Path) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk_files(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push(bytes);
        }
    }
    found
}

/// Makes the directory at its path 0o711 once the intents are durable.
struct ChmodKeep(std::path::PathBuf);
impl FaultInjector for ChmodKeep {
    fn crash_at(&self, point: FaultPoint) -> bool {
        if point == FaultPoint::IntentSynced(0) {
            std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o711)).unwrap();
        }
        false
    }
}

#[test]
fn a_mode_someone_sets_after_revalidation_is_not_overwritten_and_survives_the_rollback() -> Result {
    let fixture = fixture()?;
    let trial = Trial::new(&fixture.blobs)?;
    // The transaction makes script.sh 0o755 (from 0o644); the writer makes
    // it 0o604 once the intents are durable, before the mode is applied.
    let writer = writer(&trial, "script.sh", Write::Chmod, |point, _| point == FaultPoint::IntentSynced(0));
    let raced = race(&fixture, &trial, &writer)?;
    let outcome = check_outcome(&trial, &fixture, &writer, &raced, "chmod");
    assert_ne!(outcome, "committed");
    assert!(raced.left.is_empty(), "{:?}", raced.left);
    let mode = std::fs::symlink_metadata(trial.ws.root.join("script.sh"))?.permissions().mode() & 0o7777;
    assert_eq!(mode, 0o604, "their mode stays");
    // Everything else is back to the before tree.
    let mut expected = fixture.before.clone();
    if let Some(Node::File { mode, .. }) = expected.get_mut("script.sh") {
        *mode = 0o604;
    }
    assert_eq!(trial.ws.tree(), expected);

    // The same for a directory: the transaction makes keep/ 0o700 (from
    // 0o755); someone makes it 0o711 after revalidation.
    let trial = Trial::new(&fixture.blobs)?;
    let ledger = MemoryLedger::new();
    ledger.insert(trial.run.transaction, TransactionState::Revalidating);
    let chmod = ChmodKeep(trial.ws.root.join("keep"));
    let result = trial.ws.committer.commit_with_faults(&trial.run.request(&fixture.blobs), &ledger, &chmod);
    assert!(matches!(result, Err(CommitError::Stale { .. })), "{result:?}");
    let mut expected = fixture.before.clone();
    expected.insert("keep".to_owned(), Node::Dir { mode: 0o711 });
    assert_eq!(trial.ws.tree(), expected);
    Ok(())
}

#[test]
fn a_write_to_an_old_node_after_revalidation_is_kept_when_the_commit_succeeds() -> Result {
    let fixture = fixture()?;
    let trial = Trial::new(&fixture.blobs)?;
    // d/b.txt is deleted by the transaction: the writer appends to it after it
    // was checked and before it was moved away; the commit still succeeds.
    let writer = writer(&trial, "d/b.txt", Write::Append, |point, _| point == FaultPoint::Revalidated);
    let Raced { state, kept, left } = race(&fixture, &trial, &writer)?;
    assert_eq!(state, Some(TransactionState::Committed));
    assert!(left.is_empty());
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].path, p("d/b.txt"));
    assert_eq!(std::fs::read(trial.ws.root.join(kept[0].kept.as_str()))?, b"beta +theirs");
    // The workspace is exactly the after tree.
    assert_eq!(trial.ws.tree(), fixture.after);
    Ok(())
}

#[test]
fn randomized_writers_racing_commits_never_leave_a_partial_workspace_or_lose_a_byte() -> Result {
    const TRIALS: usize = 150;
    const PATHS: [&str; 10] = [
        "a.txt",
        "d/b.txt",
        "d/new.txt",
        "script.sh",
        "t/u/v/deep",
        "t/u/v/extra",
        "k/inside",
        "moved/x",
        "locked.txt",
        "unrelated.txt",
    ];
    let fixture = fixture()?;
    let operations = {
        let trial = Trial::new(&fixture.blobs)?;
        let recorder = CrashAt::recording();
        trial.ws.committer.commit_with_faults(&trial.run.request(&fixture.blobs), &vsh_commit::NoLedger, &recorder)?;
        recorder.seen()
    };
    let moments: Vec<FaultPoint> =
        operations.iter().copied().filter(|point| *point <= FaultPoint::CommitMarkerSynced).collect();
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let mut outcomes: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let mut acted = 0;
    for index in 0..TRIALS {
        let trial = Trial::new(&fixture.blobs)?;
        let path = PATHS[rng.index(PATHS.len())];
        let write = WRITES[rng.index(WRITES.len())];
        let moment = moments[rng.index(moments.len())];
        // A third of the trials also crash a few steps after the writer.
        let crash_after = (rng.index(3) == 0).then(|| {
            let later: Vec<FaultPoint> = operations.iter().copied().filter(|point| *point > moment).collect();
            later[rng.index(later.len().max(1)).min(later.len().saturating_sub(1))]
        });
        let mut writer = writer(&trial, path, write, move |point, _| point == moment);
        writer.crash_after = crash_after;
        let label = format!("trial {index}: {write:?} {path} at {moment}, crash after {crash_after:?}");
        let raced = race(&fixture, &trial, &writer)?;
        let outcome = check_outcome(&trial, &fixture, &writer, &raced, &label);
        *outcomes.entry(outcome).or_default() += 1;
        if writer.made().is_some() {
            acted += 1;
        }
        // An unresolved transaction restores to exactly the before tree, their
        // bytes moved aside.
        if outcome == "unresolved" {
            let ledger = MemoryLedger::new();
            ledger.insert(trial.run.transaction, TransactionState::RecoveryRequired);
            let restored = trial.ws.committer.session(&LockWait::default())?.restore(trial.run.transaction, &ledger)?;
            let now = trial.ws.tree();
            assert!(
                without(&now, path) == without(&fixture.before, path),
                "{label}: after the restore {:?} differ",
                tree_difference(&now, &fixture.before)
            );
            assert!(trial.ws.no_transaction_dirs(), "{label}: {restored:?}");
        }
    }
    // The trials covered every outcome, and most writers found something to do.
    for outcome in ["committed", "failed", "unresolved"] {
        assert!(outcomes.get(outcome).copied().unwrap_or(0) > 0, "no trial ended {outcome}: {outcomes:?}");
    }
    assert!(acted * 3 > TRIALS * 2, "only {acted} of {TRIALS} writers acted");
    eprintln!("{TRIALS} trials, {acted} writers acted: {outcomes:?}");
    Ok(())
}

#[test]
fn a_restore_crashed_at_any_step_is_finished_by_the_next_restore_or_recovery() -> Result {
    let fixture = fixture()?;
    // Every step a restore takes: the entries it puts back, then its cleanup.
    let steps = {
        let trial = unresolved_trial(&fixture)?;
        let ledger = MemoryLedger::new();
        ledger.insert(trial.run.transaction, TransactionState::RecoveryRequired);
        let recorder = CrashAt::recording();
        trial.ws.committer.session(&LockWait::default())?.restore_with_faults(
            trial.run.transaction,
            &ledger,
            &recorder,
        )?;
        recorder.seen()
    };
    assert!(steps.iter().any(|point| matches!(point, FaultPoint::Restored(_))), "{steps:?}");
    assert!(steps.iter().any(|point| matches!(point, FaultPoint::CleanedUp(_))), "{steps:?}");
    for point in steps {
        for finish_by_recovery in [false, true] {
            let trial = unresolved_trial(&fixture)?;
            let transaction = trial.run.transaction;
            let ledger = MemoryLedger::new();
            ledger.insert(transaction, TransactionState::RecoveryRequired);
            let crashed = trial.ws.committer.session(&LockWait::default())?.restore_with_faults(
                transaction,
                &ledger,
                &CrashAt::new(point),
            );
            assert!(matches!(crashed, Err(CommitError::FaultInjected(_))), "{point}: {crashed:?}");
            let label = format!(
                "restore crashed at {point}, finished by {}",
                if finish_by_recovery { "recovery" } else { "restore" }
            );
            let restarted = trial.reopened()?;
            if finish_by_recovery {
                let report = restarted.committer.recover(&ledger)?;
                assert!(report.is_clean(), "{label}: {report:?}");
            }
            // Whatever recovery did, an operator's restore (again) ends it.
            if !restarted.no_transaction_dirs() {
                let session = restarted.committer.session(&LockWait::default())?;
                session.restore(transaction, &ledger).unwrap_or_else(|error| panic!("{label}: {error}"));
            }
            assert_eq!(ledger.get(transaction), Some(TransactionState::Failed), "{label}");
            let now = restarted.tree();
            assert!(
                without(&now, "a.txt") == without(&fixture.before, "a.txt")
                    && now.get("a.txt") == fixture.before.get("a.txt"),
                "{label}: {:?}",
                tree_difference(&now, &fixture.before)
            );
            assert!(restarted.no_transaction_dirs(), "{label}");
            // Their bytes are kept aside, not lost.
            let mut kept = Vec::new();
            collect_files(&trial.ws.root.join(".vsh/recovered"), &mut kept);
            assert!(kept.iter().any(|bytes| bytes == b"changed +theirs"), "{label}");
            let report = restarted.committer.recover(&ledger)?;
            assert!(report.is_empty(), "{label}: {report:?}");
        }
    }
    Ok(())
}

/// A trial whose commit a writer left unresolved at a.txt (as in the test above).
fn unresolved_trial(fixture: &Fixture) -> Result<Trial> {
    let trial = Trial::new(&fixture.blobs)?;
    let writer = writer(&trial, "a.txt", Write::Append, |point, path| {
        matches!(point, FaultPoint::OperationApplied(_)) && std::fs::read(path).is_ok_and(|bytes| bytes == b"changed")
    });
    let raced = race(fixture, &trial, &writer)?;
    assert_eq!(check_outcome(&trial, fixture, &writer, &raced, "append"), "unresolved");
    Ok(trial)
}

fn collect_files(dir: &Path, out: &mut Vec<Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push(bytes);
        }
    }
}

/// Exchanges a directory of the workspace with an empty one at one moment
/// of a commit (a sync tool or an editor moving it aside), once.
struct Mover {
    root: PathBuf,
    dir: &'static str,
    at: FaultPoint,
    moved: std::sync::atomic::AtomicBool,
}

impl FaultInjector for Mover {
    fn crash_at(&self, point: FaultPoint) -> bool {
        if point == self.at && !self.moved.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let (dir, away) = (self.root.join(self.dir), self.root.join(format!("{}.away", self.dir)));
            std::fs::rename(&dir, &away).unwrap();
            std::fs::create_dir(&dir).unwrap();
        }
        false
    }
}

#[test]
fn a_directory_moved_aside_while_the_commit_applies_is_never_rolled_back_through_its_stand_in() -> Result {
    // What the commit made in `sub` went away with it; a rollback looking
    // at the empty directory in its place saw nothing of its nodes and
    // recorded the before state restored, while they came back with `sub`.
    let data = tempfile::tempdir()?;
    let blobs = support::external_blobs(data.path())?;
    let dir = tempfile::tempdir()?;
    support::write(dir.path(), "sub/keep.txt", b"keep\n");
    let ws = support::Workspace::open(dir.path())?;
    let run = ws.run(&blobs, |vfs| {
        vfs.write(&p("sub/new.txt"), std::sync::Arc::from(&b"new\n"[..]))?;
        vfs.mkdir(&p("sub/made"), 0o755)?;
        vfs.write(&p("sub/made/inner.txt"), std::sync::Arc::from(&b"inner\n"[..]))
    })?;
    let ledger = MemoryLedger::new();
    ledger.insert(run.transaction, TransactionState::Revalidating);
    let last = u32::try_from(run.diff.len() - 1).unwrap();
    let mover = Mover {
        root: dir.path().to_owned(),
        dir: "sub",
        at: FaultPoint::OperationApplied(last),
        moved: std::sync::atomic::AtomicBool::new(false),
    };
    let result = ws.committer.commit_with_faults(&run.request(&blobs), &ledger, &mover);
    assert!(mover.moved.load(std::sync::atomic::Ordering::SeqCst), "the move happened");
    // `sub` comes back, with what the commit made in it.
    std::fs::remove_dir(dir.path().join("sub"))?;
    std::fs::rename(dir.path().join("sub.away"), dir.path().join("sub"))?;
    let Err(CommitError::Unresolved { paths, .. }) = &result else { panic!("{result:?}") };
    let named: BTreeSet<&str> = paths.iter().map(|left| left.path.as_str()).collect();
    for path in ["sub/new.txt", "sub/made", "sub/made/inner.txt"] {
        assert!(named.contains(path), "{path} is named: {paths:?}");
        assert!(dir.path().join(path).exists(), "{path} is on disk, as the record says it may be");
    }
    assert!(paths.iter().all(|left| left.reason == vsh_commit::LeftReason::Moved), "{paths:?}");
    assert_eq!(ledger.get(run.transaction), Some(TransactionState::RecoveryRequired));
    // The operator's restore then puts the before state back, keeping the nodes aside.
    let restored = ws.committer.session(&LockWait::default())?.restore(run.transaction, &ledger)?;
    assert!(!dir.path().join("sub/new.txt").exists() && !dir.path().join("sub/made").exists(), "{restored:?}");
    assert_eq!(std::fs::read(dir.path().join("sub/keep.txt"))?, b"keep\n");
    assert_eq!(ledger.get(run.transaction), Some(TransactionState::Failed));
    Ok(())
}
