//! Commits in separate processes: the test binary re-executes itself with
//! `VSH_COMMIT_TEST_ROLE` naming a child role.
//!
//! - A child commits a sizeable transaction while the parent `SIGKILL`s it
//!   after a delay that sweeps the commit's duration; recovery in the parent
//!   must always find exactly the before or exactly the after tree, with the
//!   file-backed ledger agreeing.
//! - Two children commit overlapping transactions at once: exactly one wins,
//!   the other is Stale, and an external edit made before either commits is
//!   never overwritten.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vsh_commit::{CommitError, FaultInjector, FaultPoint};
use vsh_types::{TransactionId, TransactionState};
use vsh_vfs::{VfsError, VirtualFs};

use support::child::{DATA, ROLE, TRIAL, spawn, wait_exit, wait_for, wait_ready, wait_signal};
use support::ledger::FileLedger;
use support::random::phase_of;
use support::{Result, Tree, Workspace, p, tree_difference, write};

/// Exit codes of a committing child.
const COMMITTED: i32 = 0;
const STALE: i32 = 3;
const FAILED: i32 = 2;

/// If this process is a child, play its role and exit.
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let trial = PathBuf::from(std::env::var_os(TRIAL).expect("the trial directory"));
    let data = PathBuf::from(std::env::var_os(DATA).expect("the data directory"));
    let code = match role.as_str() {
        "kill-commit" => commit_child(&trial, &data, big_transaction, None),
        "overlap-left" => commit_child(&trial, &data, |vfs| bump(vfs, "left"), Some("left")),
        "overlap-right" => commit_child(&trial, &data, |vfs| bump(vfs, "right"), Some("right")),
        other => panic!("unknown role {other}"),
    };
    std::process::exit(code);
}

/// Run `ops`, record the transaction as Revalidating, signal `ready[-who]`,
/// wait for `go` when `who` is set, then commit.
fn commit_child(
    trial: &Path,
    data: &Path,
    ops: impl FnOnce(&mut VirtualFs) -> std::result::Result<(), VfsError>,
    who: Option<&str>,
) -> i32 {
    let ws = Workspace::open(&trial.join("ws")).expect("open the workspace");
    let blobs = support::external_blobs(data).expect("open the blob store");
    let run = ws.run(&blobs, ops).expect("run the transaction");
    let ledger = FileLedger::open(&trial.join(format!("ledger{}", who.map_or(String::new(), |who| format!("-{who}")))));
    ledger.insert(run.transaction, TransactionState::Revalidating);
    // The transaction's id, for the parent to look up in the ledger: a run
    // that deleted settled files unread names them by their stamps, so the
    // id differs from one trial's tree to the next.
    std::fs::write(trial.join("transaction"), run.transaction.as_bytes()).expect("record the transaction");
    let ready = trial.join(who.map_or_else(|| "ready".to_owned(), |who| format!("ready-{who}")));
    std::fs::write(ready, b"").expect("signal ready");
    if who.is_some() {
        wait_for(|| trial.join("go").exists(), "the go signal");
    }
    let timeline = Timeline { start: Instant::now(), trial: trial.to_owned() };
    match ws.committer.commit_with_faults(&run.request(&blobs), &ledger, &timeline) {
        Ok(_) => COMMITTED,
        Err(CommitError::Stale { .. }) => STALE,
        Err(error) => {
            eprintln!("child commit failed: {error}");
            FAILED
        }
    }
}

/// Records, without stopping anything, when the commit passes the start of
/// its apply phase and its commit point (the ledger's Committed) (microseconds after `start`, in
/// `timeline`), and signals each by creating `applying` and `marked` in the
/// trial directory, so the parent can aim its kill at a phase.
struct Timeline {
    start: Instant,
    trial: PathBuf,
}

impl FaultInjector for Timeline {
    fn crash_at(&self, point: FaultPoint) -> bool {
        let signal = match point {
            FaultPoint::CommitStatePersisted => "applying",
            // The ledger is the commit point: no marker is written.
            FaultPoint::CommittedStatePersisted => "marked",
            _ => return false,
        };
        let line = format!("{} {}\n", point, self.start.elapsed().as_micros());
        let mut file =
            std::fs::OpenOptions::new().create(true).append(true).open(self.trial.join("timeline")).expect("timeline");
        std::io::Write::write_all(&mut file, line.as_bytes()).expect("timeline");
        std::fs::write(self.trial.join(signal), b"").expect("signal a phase");
        false
    }
}

/// The calibration child's times (from `ready`) of the apply phase's start
/// and of the completion marker.
fn read_timeline(trial: &Path) -> Result<(Duration, Duration)> {
    let text = std::fs::read_to_string(trial.join("timeline"))?;
    let mut times = text.lines().map(|line| {
        let micros: u64 = line.split(' ').nth(1).and_then(|field| field.parse().ok()).expect("a timeline line");
        Duration::from_micros(micros)
    });
    let applying = times.next().ok_or("no timeline")?;
    let marked = times.next().ok_or("no marker in the timeline")?;
    Ok((applying, marked))
}

/// 10 directories of 20 files, each with distinct content and a mode.
fn build_before(root: &Path) {
    for dir in 0..10 {
        for index in 0..20 {
            let name = format!("dir{dir:02}/file{index:02}.txt");
            write(root, &name, format!("before {dir} {index}\n").repeat(8).as_bytes());
            support::chmod(root, &name, 0o644);
        }
    }
}

/// Every file is modified, deleted, made private or renamed (by `index % 4`),
/// and a new tree of 100 files is created: about 300 changed paths.
fn big_transaction(vfs: &mut VirtualFs) -> std::result::Result<(), VfsError> {
    for dir in 0..10 {
        for index in 0..20 {
            let path = p(&format!("dir{dir:02}/file{index:02}.txt"));
            match index % 4 {
                0 => vfs.write(&path, Arc::from(format!("after {dir} {index}\n").into_bytes()))?,
                1 => vfs.unlink(&path)?,
                2 => vfs.set_mode(&path, 0o600)?,
                _ => vfs.rename(&path, &p(&format!("dir{dir:02}/renamed{index:02}.txt")))?,
            }
        }
    }
    for dir in 0..5 {
        vfs.mkdir_all(&p(&format!("new/sub{dir}")), 0o755)?;
        for index in 0..20 {
            let path = p(&format!("new/sub{dir}/created{index:02}.txt"));
            vfs.write(&path, Arc::from(format!("created {dir} {index}\n").into_bytes()))?;
        }
    }
    Ok(())
}

/// The transaction the child of `trial` committed.
fn transaction_of(trial: &Path) -> Result<TransactionId> {
    let bytes: [u8; 32] = std::fs::read(trial.join("transaction"))?.try_into().map_err(|_| "a 32-byte id")?;
    Ok(TransactionId::from_bytes(bytes))
}

/// A fresh trial directory holding `ws/` with the before tree.
fn new_trial(parent: &Path, name: &str) -> Result<PathBuf> {
    let trial = parent.join(name);
    std::fs::create_dir_all(trial.join("ws"))?;
    build_before(&trial.join("ws"));
    Ok(trial)
}

#[test]
fn sigkill_at_any_moment_of_a_commit_never_leaves_a_partial_state() -> Result {
    const TEST: &str = "sigkill_at_any_moment_of_a_commit_never_leaves_a_partial_state";
    const TRIALS: u32 = 30;
    child_role();
    let scratch = tempfile::tempdir()?;
    let data = scratch.path().join("data");

    // The reference: the after tree, from an in-process commit (which also
    // fills the shared blob store, so children only re-hash).
    let reference = new_trial(scratch.path(), "reference")?;
    let ws = Workspace::open(&reference.join("ws"))?;
    let before: Tree = ws.tree();
    let blobs = support::external_blobs(&data)?;
    let run = ws.run(&blobs, big_transaction)?;
    assert!(run.diff.len() >= 250, "{} changed paths", run.diff.len());
    ws.committer.commit(&run.request(&blobs))?;
    let after: Tree = ws.tree();

    // Calibrate: how long a child's commit takes from `ready` to exit.
    let trial = new_trial(scratch.path(), "calibration")?;
    let mut child = spawn(TEST, "kill-commit", &trial, &data)?;
    wait_ready(&mut child, &trial.join("ready"))?;
    let started = Instant::now();
    let status = wait_exit(&mut child)?;
    let commit_time = started.elapsed();
    assert_eq!(status.code(), Some(COMMITTED));
    assert_eq!(support::tree(&trial.join("ws")), after);
    let (applying, marked) = read_timeline(&trial)?;

    // Kill children at moments sweeping each phase of the commit: a third of
    // the trials while it prepares (a delay after `ready`), a third while it
    // applies (a delay after `applying`), a third after its marker.
    let windows = [applying, marked.saturating_sub(applying), commit_time.saturating_sub(marked)];
    let (mut saw_before, mut saw_after) = (0, 0);
    let mut phases = [0_u32; 4];
    for index in 0..TRIALS {
        let trial = new_trial(scratch.path(), &format!("trial{index:02}"))?;
        let phase = (index % 3) as usize;
        let step = f64::from(index / 3) / f64::from(TRIALS / 3 - 1);
        let delay = windows[phase].mul_f64(step);
        let mut child = spawn(TEST, "kill-commit", &trial, &data)?;
        wait_ready(&mut child, &trial.join("ready"))?;
        let signal = ["ready", "applying", "marked"][phase];
        if wait_signal(&mut child, &trial.join(signal))? {
            std::thread::sleep(delay);
        }
        child.kill()?;
        let status = wait_exit(&mut child)?;

        phases[phase_of(&trial.join("ws"), &trial.join("ledger"))] += 1;
        let ws = Workspace::open(&trial.join("ws"))?;
        let ledger = FileLedger::open(&trial.join("ledger"));
        let report = ws.committer.recover(&ledger)?;
        assert!(report.is_clean(), "trial {index}: {:?}", report.conflicts);
        let tree = ws.tree();
        let state = ledger.get(transaction_of(&trial)?);
        if tree == after {
            saw_after += 1;
            assert_eq!(state, Some(TransactionState::Committed), "trial {index}");
        } else {
            saw_before += 1;
            assert!(
                tree == before,
                "trial {index} (killed after {delay:?}, {status}): partial state at {:?}",
                tree_difference(&tree, &before)
            );
            assert_ne!(state, Some(TransactionState::Committed), "trial {index}");
        }
        assert!(ws.no_transaction_dirs(), "trial {index}");
        std::fs::remove_dir_all(&trial)?;
    }
    assert!(saw_before > 0 && saw_after > 0, "both outcomes: {saw_before} before, {saw_after} after");
    // Before the journal (with or without a directory), while applying, after the marker.
    assert!(
        phases[0] + phases[1] > 0 && phases[2] > 0 && phases[3] > 0,
        "every phase of the commit was killed: {phases:?}"
    );
    eprintln!(
        "{TRIALS} trials over a {commit_time:?} commit of {} paths (applying from {applying:?}, marker at \
         {marked:?}): {saw_before} before, {saw_after} after; killed with no transaction directory {}, while preparing {}, while applying {}, after the marker {}",
        run.diff.len(),
        phases[0],
        phases[1],
        phases[2],
        phases[3],
    );
    Ok(())
}

/// Read the counter, append who bumped it, and log the run.
fn bump(vfs: &mut VirtualFs, who: &str) -> std::result::Result<(), VfsError> {
    let current = vfs.read(&p("counter.txt"))?;
    let next = format!("{} +1 by {who}", String::from_utf8_lossy(&current));
    vfs.write(&p("counter.txt"), Arc::from(next.into_bytes()))?;
    vfs.write(&p(&format!("{who}.log")), Arc::from(&b"ran"[..]))
}

#[test]
fn two_processes_committing_overlapping_transactions_have_exactly_one_winner() -> Result {
    const TEST: &str = "two_processes_committing_overlapping_transactions_have_exactly_one_winner";
    child_role();
    let scratch = tempfile::tempdir()?;
    let data = scratch.path().join("data");
    for round in 0..5 {
        let trial = scratch.path().join(format!("round{round}"));
        std::fs::create_dir_all(trial.join("ws"))?;
        write(&trial.join("ws"), "counter.txt", format!("{round}").as_bytes());
        let mut children = Vec::new();
        for who in ["left", "right"] {
            let mut child = spawn(TEST, &format!("overlap-{who}"), &trial, &data)?;
            wait_ready(&mut child, &trial.join(format!("ready-{who}")))?;
            children.push(child);
        }
        // In the last round an external edit lands after both runs read the
        // counter: neither may overwrite it.
        let external = round == 4;
        if external {
            write(&trial.join("ws"), "counter.txt", b"edited by someone else");
        }
        std::fs::write(trial.join("go"), b"")?;
        let codes: Vec<Option<i32>> =
            children.iter_mut().map(|child| wait_exit(child).map(|status| status.code())).collect::<Result<_>>()?;
        let counter = std::fs::read_to_string(trial.join("ws/counter.txt"))?;
        if external {
            assert_eq!(codes, vec![Some(STALE), Some(STALE)]);
            assert_eq!(counter, "edited by someone else");
            assert!(!trial.join("ws/left.log").exists() && !trial.join("ws/right.log").exists());
            continue;
        }
        let winners: Vec<usize> = (0..2).filter(|index| codes[*index] == Some(COMMITTED)).collect();
        assert_eq!(winners.len(), 1, "round {round}: {codes:?}");
        let winner = winners[0];
        assert_eq!(codes[1 - winner], Some(STALE), "round {round}: {codes:?}");
        let (who, other) = if winner == 0 { ("left", "right") } else { ("right", "left") };
        assert_eq!(counter, format!("{round} +1 by {who}"));
        assert!(trial.join(format!("ws/{who}.log")).exists());
        assert!(!trial.join(format!("ws/{other}.log")).exists());
        let ws = Workspace::open(&trial.join("ws"))?;
        assert!(ws.no_transaction_dirs());
    }
    Ok(())
}
