//! The fault campaign: real processes killed with `SIGKILL` at random
//! instants while they commit and while they recover, with a writer that
//! ignores the commit lock racing them in some trials. Seeded and bounded, so
//! a failing trial replays from its number (`VSH_CAMPAIGN_SEED` changes the
//! seed; the default is fixed).
//!
//! Each trial commits the shared transaction (every kind of operation) in a
//! child process that is killed either by the parent after a random delay or
//! by itself at a random fault point; in half the trials a recovery child is
//! then killed the same way; finally the parent recovers. Whatever happened:
//!
//! - the record agrees with the disk: Committed means every path holds its
//!   after state, Failed or Stale every path its before state, and
//!   `RecoveryRequired` (unresolved) every path its before state except the
//!   racing writer's, named; nothing else is a final state;
//! - no partial workspace: outside the writer's path the tree is exactly the
//!   before or the after tree;
//! - no lost bytes: what the writer wrote is at its path, kept under
//!   `.vsh/recovered/`, or in a quarantine entry recovery names; for an
//!   unresolved trial, the operator's restore gives back the before tree;
//! - recovery never reports a conflict, and a second recovery finds nothing.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use vsh_commit::{CommitError, CrashAt, FaultInjector, FaultPoint, MemoryLedger, RecoveryReport};
use vsh_host::LockWait;
use vsh_types::TransactionState;

use support::child::{DATA, ROLE, TRIAL, spawn, spawn_with, wait_exit, wait_ready};
use support::fixture::{build_before, transaction};
use support::ledger::FileLedger;
use support::random::{Rng, WRITES, Write, phase_of};
use support::{Result, Tree, Workspace, tree, tree_difference, without};

const TEST: &str = "sigkill_campaign_of_commits_and_recoveries_with_racing_writers";
const TRIALS: u64 = 220;
/// Where a child finds the fault point to kill itself at (absent: run on).
const KILL_AT: &str = "VSH_COMMIT_TEST_KILL_AT";

/// Kills its own process with `SIGKILL` at the `n`-th fault point it sees:
/// no unwinding, no cleanup, no flushing, exactly as a crash.
struct KillAt {
    n: Option<usize>,
    seen: AtomicUsize,
}

impl FaultInjector for KillAt {
    fn crash_at(&self, _point: FaultPoint) -> bool {
        let index = self.seen.fetch_add(1, Ordering::SeqCst);
        if Some(index) == self.n {
            let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
            std::thread::sleep(Duration::from_mins(1));
        }
        false
    }
}

fn kill_at_from_env() -> KillAt {
    KillAt { n: std::env::var(KILL_AT).ok().and_then(|n| n.parse().ok()), seen: AtomicUsize::new(0) }
}

/// If this process is a child, play its role and exit.
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let trial = PathBuf::from(std::env::var_os(TRIAL).expect("the trial directory"));
    let data = PathBuf::from(std::env::var_os(DATA).expect("the data directory"));
    let ws = Workspace::open(&trial.join("ws")).expect("open the workspace");
    let ledger = FileLedger::open(&trial.join("ledger"));
    let faults = kill_at_from_env();
    let code = match role.as_str() {
        "campaign-commit" => {
            let blobs = support::external_blobs(&data).expect("open the blob store");
            let run = ws.run(&blobs, transaction).expect("run the transaction");
            ledger.insert(run.transaction, TransactionState::Revalidating);
            std::fs::write(trial.join("ready"), b"").expect("signal ready");
            match ws.committer.commit_with_faults(&run.request(&blobs), &ledger, &faults) {
                Ok(_) => 0,
                Err(CommitError::Stale { .. }) => 3,
                Err(CommitError::Unresolved { .. }) => 4,
                // A racing writer took a path first: the commit rolled itself back.
                Err(CommitError::Apply { .. }) => 6,
                Err(error) => {
                    eprintln!("campaign child: commit failed: {error}");
                    2
                }
            }
        }
        "campaign-recover" => {
            std::fs::write(trial.join("recovering"), b"").expect("signal recovering");
            match ws.committer.recover_with_faults(&ledger, &faults) {
                Ok(report) if report.is_clean() => 0,
                Ok(report) => {
                    eprintln!("campaign child: recovery conflicts {:?}", report.conflicts);
                    5
                }
                Err(error) => {
                    eprintln!("campaign child: recovery failed: {error}");
                    2
                }
            }
        }
        other => panic!("unknown role {other}"),
    };
    std::process::exit(code);
}

/// Paths of the shared transaction's before or after tree (and one outside
/// it) a writer may pick.
const PATHS: [&str; 10] =
    ["a.txt", "d/b.txt", "d/new.txt", "script.sh", "locked.txt", "k", "z", "moved/x", "t/u/v/deep", "unrelated.txt"];

/// The bytes a writer left, as read back through its own descriptor: they
/// must survive somewhere the operator is told about.
#[derive(Debug, Clone)]
struct Wrote {
    write: Write,
    bytes: Option<Vec<u8>>,
}

fn write_once(root: &Path, path: &str, write: Write, marker: &str) -> Option<Wrote> {
    let full = root.join(path);
    let meta = std::fs::symlink_metadata(&full).ok();
    let is_file = meta.as_ref().is_some_and(std::fs::Metadata::is_file);
    let bytes = match write {
        Write::Append if is_file => {
            let mut file = std::fs::OpenOptions::new().read(true).append(true).open(&full).ok()?;
            file.write_all(marker.as_bytes()).ok()?;
            // Read back what this inode holds now, wherever vsh moves it.
            file.rewind().ok()?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).ok()?;
            Some(bytes)
        }
        Write::Replace if meta.is_some() && !meta.as_ref().is_some_and(std::fs::Metadata::is_dir) => {
            let temp = full.with_file_name(".editor-swap");
            let bytes = format!("their saved version{marker}").into_bytes();
            std::fs::write(&temp, &bytes).ok()?;
            if std::fs::rename(&temp, &full).is_err() {
                let _ = std::fs::remove_file(&temp);
                return None;
            }
            Some(bytes)
        }
        Write::Create if meta.is_none() => {
            let bytes = format!("their new file{marker}").into_bytes();
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&full).ok()?;
            file.write_all(&bytes).ok()?;
            Some(bytes)
        }
        Write::Chmod if is_file => {
            std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o604)).ok()?;
            None
        }
        _ => return None,
    };
    Some(Wrote { write, bytes })
}

/// Every regular file's bytes under `dir`, recursively.
fn files_under(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            files_under(&path, out);
        } else if meta.is_file() {
            // A 0000 file is still readable by root; as another user, make it readable first.
            let _ = std::fs::read(&path).map(|bytes| out.push((path.clone(), bytes)));
        }
    }
}

/// One trial's plan, drawn from the generator.
#[derive(Debug)]
struct Plan {
    /// Kill the commit at this fault point (else: after `commit_delay`).
    commit_point: Option<usize>,
    commit_delay: Duration,
    /// Then kill a recovery: at this fault point, or after this delay.
    recovery: Option<(Option<usize>, Duration)>,
    /// A racing writer: its path, its write, and when it acts (after `ready`).
    writer: Option<(&'static str, Write, Duration)>,
}

struct Campaign {
    _scratch: tempfile::TempDir,
    scratch: PathBuf,
    data: PathBuf,
    before: Tree,
    after: Tree,
    points: usize,
    commit_time: Duration,
}

fn campaign() -> Result<Campaign> {
    let scratch = tempfile::tempdir()?;
    let path = scratch.path().to_owned();
    let data = path.join("data");
    // The reference after tree, from an in-process commit that also fills the
    // shared blob store and counts the commit's fault points.
    let reference = path.join("reference/ws");
    std::fs::create_dir_all(&reference)?;
    build_before(&reference);
    let ws = Workspace::open(&reference)?;
    let before = ws.tree();
    let blobs = support::external_blobs(&data)?;
    let run = ws.run(&blobs, transaction)?;
    let recorder = CrashAt::recording();
    let ledger = MemoryLedger::new();
    ledger.insert(run.transaction, TransactionState::Revalidating);
    ws.committer.commit_with_faults(&run.request(&blobs), &ledger, &recorder)?;
    let after = ws.tree();
    // How long a child's commit takes, from `ready` to its exit.
    let trial = new_trial(&path, "calibration")?;
    let mut child = spawn(TEST, "campaign-commit", &trial, &data)?;
    wait_ready(&mut child, &trial.join("ready"))?;
    let started = Instant::now();
    let status = wait_exit(&mut child)?;
    assert_eq!(status.code(), Some(0), "the calibration commit");
    Ok(Campaign {
        _scratch: scratch,
        scratch: path,
        data,
        before,
        after,
        points: recorder.seen().len(),
        commit_time: started.elapsed(),
    })
}

fn new_trial(parent: &Path, name: &str) -> Result<PathBuf> {
    let trial = parent.join(name);
    std::fs::create_dir_all(trial.join("ws"))?;
    build_before(&trial.join("ws"));
    Ok(trial)
}

fn draw(rng: &mut Rng, campaign: &Campaign) -> Plan {
    let window = campaign.commit_time.mul_f64(1.2);
    let delay = |rng: &mut Rng| window.mul_f64(f64::from(u32::try_from(rng.below(1000)).expect("below 1000")) / 1000.0);
    let commit_point = rng.chance(1, 2).then(|| rng.below(campaign.points as u64 + 2) as usize);
    let commit_delay = delay(rng);
    let recovery = rng.chance(1, 2).then(|| (rng.chance(1, 2).then(|| rng.below(14) as usize), delay(rng)));
    let writer = rng.chance(1, 2).then(|| {
        let path = PATHS[rng.index(PATHS.len())];
        let write = WRITES[rng.index(WRITES.len())];
        (path, write, delay(rng))
    });
    Plan { commit_point, commit_delay, recovery, writer }
}

/// Run one child, killing it at its fault point (it does so itself) or after
/// `delay`; returns whether it was killed.
fn run_killed(role: &str, trial: &Path, campaign: &Campaign, point: Option<usize>, delay: Duration) -> Result<bool> {
    let point_text = point.map(|point| point.to_string());
    let env: Vec<(&str, &str)> = point_text.iter().map(|point| (KILL_AT, point.as_str())).collect();
    let mut child = spawn_with(TEST, role, trial, &campaign.data, &env)?;
    let signal = if role == "campaign-commit" { "ready" } else { "recovering" };
    wait_ready(&mut child, &trial.join(signal))?;
    if point.is_none() {
        let started = Instant::now();
        while started.elapsed() < delay {
            if child.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        let _ = child.kill();
    }
    let status = wait_exit(&mut child)?;
    let killed = status.code().is_none();
    assert!(
        killed || matches!(status.code(), Some(0 | 3 | 4 | 6)),
        "{role} exited {status} (not a kill, a commit outcome or a clean recovery)"
    );
    Ok(killed)
}

#[derive(Default, Debug)]
struct Tally {
    outcomes: std::collections::BTreeMap<&'static str, u32>,
    commit_phases: [u32; 4],
    commits_killed: u32,
    recoveries_killed: u32,
    writers_acted: u32,
}

#[test]
fn sigkill_campaign_of_commits_and_recoveries_with_racing_writers() -> Result {
    child_role();
    let seed = std::env::var("VSH_CAMPAIGN_SEED").ok().and_then(|seed| seed.parse().ok()).unwrap_or(0x00c0_ffee_5eed);
    let mut rng = Rng(seed);
    let campaign = campaign()?;
    let mut tally = Tally::default();
    // VSH_CAMPAIGN_ONLY=N replays trial N alone (with the same draws).
    let only: Option<u64> = std::env::var("VSH_CAMPAIGN_ONLY").ok().and_then(|only| only.parse().ok());
    // Kills land by time, so on a loaded machine an outcome can be missed in
    // the first TRIALS: up to as many more trials (the same seeded draws, in
    // order) run until every outcome and phase has been seen.
    let covered = |tally: &Tally| {
        ["committed", "failed", "unresolved"].iter().all(|outcome| tally.outcomes.get(*outcome).is_some_and(|n| *n > 0))
            && tally.commit_phases[1..].iter().all(|count| *count > 0)
    };
    let mut index = 0;
    while index < TRIALS || (only.is_none() && !covered(&tally) && index < 2 * TRIALS) {
        let plan = draw(&mut rng, &campaign);
        let index_now = index;
        index += 1;
        let index = index_now;
        if only.is_some_and(|only| only != index) {
            continue;
        }
        let label = format!("seed {seed:#x} trial {index}: {plan:?}");
        let trial = new_trial(&campaign.scratch, &format!("trial{index:03}"))?;
        let root = trial.join("ws");
        let marker = format!(" +theirs {index}");

        // The writer races the commit (and a recovery) from a thread of its own.
        let wrote = std::thread::scope(|scope| -> Result<Option<(&str, Wrote)>> {
            let writer = plan.writer.map(|(path, write, delay)| {
                let (root, marker, ready) = (root.clone(), marker.clone(), trial.join("ready"));
                scope.spawn(move || {
                    let started = Instant::now();
                    while !ready.exists() && started.elapsed() < Duration::from_secs(30) {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    std::thread::sleep(delay);
                    write_once(&root, path, write, &marker).map(|wrote| (path, wrote))
                })
            });
            if run_killed("campaign-commit", &trial, &campaign, plan.commit_point, plan.commit_delay)? {
                tally.commits_killed += 1;
                tally.commit_phases[phase_of(&root, &trial.join("ledger"))] += 1;
            }
            if let Some((point, delay)) = plan.recovery
                && run_killed("campaign-recover", &trial, &campaign, point, delay)?
            {
                tally.recoveries_killed += 1;
            }
            Ok(writer.and_then(|writer| writer.join().expect("the writer thread")))
        })?;
        if wrote.is_some() {
            tally.writers_acted += 1;
        }
        let outcome = check_trial(&campaign, &trial, wrote.as_ref(), &label)?;
        *tally.outcomes.entry(outcome).or_default() += 1;
        std::fs::remove_dir_all(&trial)?;
    }
    eprintln!("campaign seed {seed:#x}, {index} trials over a {:?} commit: {tally:?}", campaign.commit_time);
    if only.is_some() {
        return Ok(());
    }
    for outcome in ["committed", "failed", "unresolved"] {
        assert!(tally.outcomes.get(outcome).copied().unwrap_or(0) > 0, "no trial ended {outcome}: {tally:?}");
    }
    // Killed while preparing (no journal), while applying (journal, before
    // the commit point), and after the commit point (the ledger's Committed).
    assert!(tally.commit_phases[1..].iter().all(|count| *count > 0), "a commit phase was never killed: {tally:?}");
    assert!(tally.recoveries_killed >= TRIALS as u32 / 10, "too few recoveries killed: {tally:?}");
    assert!(tally.writers_acted >= TRIALS as u32 / 8, "too few writers acted: {tally:?}");
    Ok(())
}

/// Recover in this process (twice), then check every invariant of the module
/// docs; returns the outcome's name.
fn check_trial(campaign: &Campaign, trial: &Path, wrote: Option<&(&str, Wrote)>, label: &str) -> Result<&'static str> {
    let root = trial.join("ws");
    let ledger = FileLedger::open(&trial.join("ledger"));
    let ws = Workspace::open(&root)?;
    let report = ws.committer.recover(&ledger)?;
    assert!(report.is_clean(), "{label}: conflicts {:?}", report.conflicts);
    let again = Workspace::open(&root)?.committer.recover(&ledger)?;
    assert!(
        again.is_clean() && again.rolled_back.is_empty() && again.rolled_forward.is_empty(),
        "{label}: a second recovery acted: {again:?}"
    );
    let records = ledger.all();
    assert_eq!(records.len(), 1, "{label}: {records:?}");
    let (transaction, state) = records[0];

    let now = tree(&root);
    let (now_cmp, before_cmp, after_cmp) = match wrote {
        Some((path, _)) => (without(&now, path), without(&campaign.before, path), without(&campaign.after, path)),
        None => (now.clone(), campaign.before.clone(), campaign.after.clone()),
    };
    let outcome = match state {
        TransactionState::Committed => {
            assert!(now_cmp == after_cmp, "{label}: committed but {:?} differ", tree_difference(&now_cmp, &after_cmp));
            "committed"
        }
        TransactionState::Failed | TransactionState::Stale => {
            assert!(
                now_cmp == before_cmp,
                "{label}: {state:?} but {:?} differ",
                tree_difference(&now_cmp, &before_cmp)
            );
            if state == TransactionState::Stale { "stale" } else { "failed" }
        }
        TransactionState::RecoveryRequired => {
            assert!(
                now_cmp == before_cmp,
                "{label}: unresolved but {:?} differ",
                tree_difference(&now_cmp, &before_cmp)
            );
            let (path, _) = wrote.unwrap_or_else(|| panic!("{label}: unresolved without a writer"));
            let unresolved = unresolved_of(&report, transaction);
            assert!(!unresolved.is_empty(), "{label}: unresolved, but recovery names nothing");
            for left in &unresolved {
                let left = left.path.as_str();
                let related =
                    left == *path || left.starts_with(&format!("{path}/")) || path.starts_with(&format!("{left}/"));
                assert!(related, "{label}: left {left}, which the writer ({path}) did not touch");
            }
            "unresolved"
        }
        other => panic!("{label}: the record says {other:?} after recovery {report:?}"),
    };
    if let Some((path, Wrote { write, bytes: Some(bytes) })) = wrote {
        assert_kept(&root, &report, transaction, bytes, &format!("{label}: {write:?} {path}"));
    }
    if outcome == "unresolved" {
        // The operator's restore gives back exactly the before tree, their
        // bytes moved aside, never deleted.
        let restored = ws.committer.session(&LockWait::default())?.restore(transaction, &ledger)?;
        let path = wrote.map_or("", |(path, _)| path);
        let now = tree(&root);
        assert!(
            without(&now, path) == without(&campaign.before, path),
            "{label}: after the restore {:?} differ ({restored:?})",
            tree_difference(&now, &campaign.before)
        );
        assert_eq!(ledger.get(transaction), Some(TransactionState::Failed), "{label}");
        if let Some((_, Wrote { bytes: Some(bytes), .. })) = wrote {
            assert_kept(&root, &RecoveryReport::default(), transaction, bytes, &format!("{label}: after the restore"));
        }
    }
    if outcome != "unresolved" {
        let mut left = Vec::new();
        files_under(&root.join(".vsh/txn"), &mut left);
        let left: Vec<&PathBuf> = left.iter().map(|(path, _)| path).collect();
        assert!(
            ws.no_transaction_dirs(),
            "{label}: a transaction directory is left ({outcome}, {state:?}): {left:?} {report:?}"
        );
    }
    Ok(outcome)
}

fn unresolved_of(report: &RecoveryReport, transaction: vsh_types::TransactionId) -> Vec<vsh_commit::LeftPath> {
    report
        .unresolved
        .iter()
        .filter(|unresolved| unresolved.transaction == transaction)
        .flat_map(|u| u.paths.clone())
        .collect()
}

/// `bytes` are in the workspace, under `.vsh/recovered/`, or in a kept node
/// recovery names.
#[track_caller]
fn assert_kept(root: &Path, report: &RecoveryReport, transaction: vsh_types::TransactionId, bytes: &[u8], label: &str) {
    let mut files = Vec::new();
    files_under(root, &mut files);
    let told = |path: &Path| {
        let relative = path.strip_prefix(root).expect("under the root");
        let relative = relative.to_str().expect("UTF-8 test paths");
        !relative.starts_with(".vsh/")
            || relative.starts_with(".vsh/recovered/")
            || unresolved_of(report, transaction)
                .iter()
                .any(|left| left.kept.as_ref().is_some_and(|kept| kept.as_str() == relative))
    };
    assert!(
        files.iter().any(|(path, content)| content == bytes && told(path)),
        "{label}: their {} bytes are lost; found only at {:?}",
        bytes.len(),
        files.iter().filter(|(_, content)| content == bytes).map(|(path, _)| path).collect::<Vec<_>>()
    );
}
