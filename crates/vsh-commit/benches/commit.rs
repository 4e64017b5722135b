//! Commit and recovery latency on the real disk: `cargo bench -p vsh-commit --bench commit`.
//!
//! Each case commits a transaction that rewrites the content of N files (1, 100, 1,000; 100
//! files per directory) in a fresh workspace under the target directory (`CARGO_TARGET_TMPDIR`,
//! which is on the workspace's filesystem, not a tmpfs), with a ledger that `fsync`s each
//! transition like a real store. Reported: the median, minimum and maximum over several runs, and
//! the barriers one commit issues. Recovery is timed for the 1,000-file transaction stopped with
//! every operation applied (roll back) and stopped right after the ledger said Committed, its
//! commit point (roll forward). The commit after a burst of another program's unsynced data runs
//! last, so that the burst's writeback does not slow the other cases.
//!
//! The goal it tracks: 1,000 modified files in at most 220 ms (the peer spends about 2.2 ms per
//! modified file), with every crash guarantee of the protocol.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vsh_commit::{
    CommitLedger, CommitReceipt, CommitRequest, Committer, CrashAt, FaultInjector, FaultPoint, LedgerError, SyncCounts,
};
use vsh_host::CapDir;
use vsh_store::{BlobStore, DataDir};
use vsh_types::{CanonicalDiff, DiffEntry, NodeState, ReadSet, TransactionId, TransactionState, VPath};

const SIZES: [usize; 3] = [1, 100, 1000];
const RUNS: usize = 9;
const RECOVERY_RUNS: usize = 5;

/// A ledger that appends and `fsync`s one line per transition, as a durable store would.
struct DurableLedger {
    file: PathBuf,
    states: Mutex<BTreeMap<TransactionId, TransactionState>>,
}

impl DurableLedger {
    fn new(file: PathBuf, transaction: TransactionId) -> DurableLedger {
        let ledger = DurableLedger { file, states: Mutex::default() };
        ledger.set(transaction, TransactionState::Revalidating).expect("ledger");
        ledger
    }

    fn set(&self, transaction: TransactionId, state: TransactionState) -> Result<(), LedgerError> {
        let storage = |error: std::io::Error| LedgerError::Storage { source: Box::new(error) };
        let mut file = OpenOptions::new().create(true).append(true).open(&self.file).map_err(storage)?;
        file.write_all(format!("{} {}\n", transaction.to_hex(), state.name()).as_bytes()).map_err(storage)?;
        file.sync_data().map_err(storage)?;
        self.states.lock().unwrap().insert(transaction, state);
        Ok(())
    }

    fn change(&self, transaction: TransactionId, to: TransactionState) -> Result<(), LedgerError> {
        let from = self.states.lock().unwrap().get(&transaction).copied();
        match from {
            Some(state) if state.can_transition(to) => self.set(transaction, to),
            _ => Err(LedgerError::Transition { transaction, from, to }),
        }
    }
}

impl CommitLedger for DurableLedger {
    fn is_commit_point(&self) -> bool {
        true
    }

    fn committing(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.change(transaction, TransactionState::Committing)
    }

    fn committed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.change(transaction, TransactionState::Committed)
    }

    fn recovery_required(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.change(transaction, TransactionState::RecoveryRequired)
    }

    fn stale(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.change(transaction, TransactionState::Stale)
    }

    fn failed(&self, transaction: TransactionId) -> Result<(), LedgerError> {
        self.change(transaction, TransactionState::Failed)
    }

    fn state(&self, transaction: TransactionId) -> Result<Option<TransactionState>, LedgerError> {
        Ok(self.states.lock().unwrap().get(&transaction).copied())
    }
}

fn name(index: usize) -> String {
    format!("dir{:02}/file{:04}.txt", index / 100, index)
}

fn before_bytes(index: usize) -> Vec<u8> {
    format!("before {index}\n").repeat(16).into_bytes()
}

fn after_bytes(index: usize) -> Vec<u8> {
    format!("after {index}\n").repeat(16).into_bytes()
}

/// A fresh workspace of `files` files holding their before content.
fn workspace(parent: &Path, files: usize) -> PathBuf {
    let root = parent.join("ws");
    if root.exists() {
        std::fs::remove_dir_all(&root).expect("remove the old workspace");
    }
    for index in 0..files {
        let path = root.join(name(index));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, before_bytes(index)).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    }
    root
}

/// The diff rewriting every file; the new contents go into `blobs`.
fn diff(files: usize, blobs: &BlobStore) -> CanonicalDiff {
    let mut entries: Vec<DiffEntry> = (0..files)
        .map(|index| {
            let after = after_bytes(index);
            blobs.put(&after).expect("store a blob");
            DiffEntry::between(
                VPath::parse(&name(index)).unwrap(),
                Some(NodeState::file_with(&before_bytes(index), 0o644)),
                Some(NodeState::file_with(&after, 0o644)),
            )
            .unwrap()
        })
        .collect();
    entries.sort_by(|left, right| left.path.cmp(&right.path));
    CanonicalDiff::new(entries).expect("sorted")
}

struct Setup {
    committer: Committer,
    ledger: DurableLedger,
    transaction: TransactionId,
}

fn setup(scratch: &Path, files: usize, run: usize) -> Setup {
    let root = workspace(scratch, files);
    let committer = Committer::new(Arc::new(CapDir::open(&root).unwrap()), VPath::parse(".vsh").unwrap()).unwrap();
    let transaction = TransactionId::digest(format!("bench {files} {run}").as_bytes());
    let ledger = DurableLedger::new(scratch.join(format!("ledger-{files}-{run}")), transaction);
    Setup { committer, ledger, transaction }
}

/// Records when the commit passes each global fault point (never stops it).
struct Phases {
    start: Instant,
    seen: Mutex<Vec<(FaultPoint, Duration)>>,
}

impl FaultInjector for Phases {
    fn crash_at(&self, point: FaultPoint) -> bool {
        // The plan, the staged nodes and the intents become durable in one
        // batch: their points follow one another, the plan's is kept.
        let global = !matches!(
            point,
            FaultPoint::StageSynced
                | FaultPoint::IntentSynced(_)
                | FaultPoint::OperationApplied(_)
                | FaultPoint::DoneSynced(_)
        );
        if global {
            self.seen.lock().unwrap().push((point, self.start.elapsed()));
        }
        false
    }
}

/// Where the time of a commit of `entries` goes, phase by phase: the median
/// of each phase over `runs` commits.
/// With `burst` bytes, each commit comes right after another program wrote
/// that much unsynced data on the same filesystem (everything synced first).
fn phases(scratch: &Path, files: usize, entries: &CanonicalDiff, blobs: &BlobStore, runs: usize, burst: usize) {
    let reads = ReadSet::default();
    let mut per_phase: Vec<Vec<Duration>> = Vec::new();
    let mut points: Vec<FaultPoint> = Vec::new();
    let mut totals = Vec::new();
    let other = scratch.join("other-program-output.bin");
    for run in 0..runs {
        let setup = setup(scratch, files, 1000 + run);
        let request = CommitRequest::new(setup.transaction, entries, &reads, blobs);
        if burst > 0 {
            unsynced_burst(&other, burst);
        }
        let phases = Phases { start: Instant::now(), seen: Mutex::default() };
        setup.committer.commit_with_faults(&request, &setup.ledger, &phases).expect("commit");
        let total = phases.start.elapsed();
        let _ = std::fs::remove_file(&other);
        let seen = phases.seen.into_inner().unwrap();
        let mut previous = Duration::ZERO;
        for (index, (point, at)) in seen.iter().enumerate() {
            if per_phase.len() <= index {
                per_phase.push(Vec::new());
                points.push(*point);
            }
            per_phase[index].push(at.saturating_sub(previous));
            previous = *at;
        }
        if per_phase.len() <= seen.len() {
            per_phase.push(Vec::new());
        }
        per_phase[seen.len()].push(total.saturating_sub(previous));
        totals.push(total);
    }
    let (total, _, _) = median(totals);
    let after = if burst > 0 { format!(", each after {burst} bytes of unsynced data") } else { String::new() };
    println!("a {files}-file commit, phase by phase (medians of {runs}{after}; {:.2} ms in all):", ms(total));
    for (index, samples) in per_phase.into_iter().enumerate() {
        let (phase, _, _) = median(samples);
        let name = points.get(index).map_or_else(|| "rest of the cleanup".to_owned(), |point| format!("until {point}"));
        println!("  {:>7.3} ms  {name}", ms(phase));
    }
}

/// A 1-file commit on a quiet disk, and right after another program left
/// `DIRTY_BYTES` of unsynced data on the same filesystem (a build writing its
/// `target/`): the commit should pay for its own bytes only.
fn dirty_disk(scratch: &Path, blobs: &BlobStore) {
    const DIRTY_BYTES: usize = 1 << 30;
    const DIRTY_RUNS: usize = 5;
    let reads = ReadSet::default();
    let entries = diff(1, blobs);
    let (mut quiet, mut dirty) = (Vec::new(), Vec::new());
    for run in 0..DIRTY_RUNS {
        for (samples, burst_bytes) in [(&mut quiet, 0), (&mut dirty, DIRTY_BYTES)] {
            let setup = setup(scratch, 1, 200 + run * 2 + usize::from(burst_bytes > 0));
            let request = CommitRequest::new(setup.transaction, &entries, &reads, blobs);
            let other = scratch.join("other-program-output.bin");
            if burst_bytes == 0 {
                let _ = std::fs::remove_file(&other);
                rustix::fs::sync();
            } else {
                unsynced_burst(&other, burst_bytes);
            }
            let started = Instant::now();
            setup.committer.commit_with_ledger(&request, &setup.ledger).expect("commit");
            samples.push(started.elapsed());
        }
    }
    let _ = std::fs::remove_file(scratch.join("other-program-output.bin"));
    let (quiet, _, _) = median(quiet);
    let (dirty, min, max) = median(dirty);
    println!(
        "1-file commit: quiet disk median {:.1} ms; after 1 GiB of another program's unsynced data median {:.1} ms \
         (min {:.1}, max {:.1}); ratio {:.2}",
        ms(quiet),
        ms(dirty),
        ms(min),
        ms(max),
        dirty.as_secs_f64() / quiet.as_secs_f64()
    );
}

/// Sync everything, then write `bytes` to `path` without syncing: another
/// program's burst of dirty pages. `VSH_BENCH_BURST_INTO` makes it a control
/// instead: `memory` writes the bytes to memory (the burst's time and cache
/// pollution, no dirty page; freed before the commit), `idle:<ms>` only waits.
fn unsynced_burst(path: &Path, bytes: usize) {
    use std::io::Write as _;
    let _ = std::fs::remove_file(path);
    rustix::fs::sync();
    let into = std::env::var("VSH_BENCH_BURST_INTO").unwrap_or_default();
    if let Some(idle) = into.strip_prefix("idle:") {
        std::thread::sleep(Duration::from_millis(idle.parse().expect("idle:<milliseconds>")));
        return;
    }
    if into == "memory" {
        let mut memory = vec![0u8; bytes];
        for (at, byte) in memory.iter_mut().enumerate().step_by(64) {
            *byte = at as u8;
        }
        std::hint::black_box(&memory);
        return;
    }
    let chunk = vec![0x5a_u8; 1 << 20];
    let mut file = std::fs::File::create(path).unwrap();
    for _ in 0..bytes / chunk.len() {
        file.write_all(&chunk).unwrap();
    }
}

fn median(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], samples[0], samples[samples.len() - 1])
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("vsh-commit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let blobs = BlobStore::open(&DataDir::open_external(&scratch.join("data")).unwrap()).unwrap();
    let reads = ReadSet::default();
    // `VSH_BENCH_ONLY=phases` runs only the phase breakdown of a 1-file
    // commit, with `VSH_BENCH_RUNS` commits (default 41): the A/B measure of
    // a change to the protocol's barriers.
    let phase_runs: usize = std::env::var("VSH_BENCH_RUNS").ok().and_then(|runs| runs.parse().ok()).unwrap_or(41);
    // `VSH_BENCH_FILES` sets the commit's file count (default 1).
    let phase_files: usize = std::env::var("VSH_BENCH_FILES").ok().and_then(|files| files.parse().ok()).unwrap_or(1);
    // `VSH_BENCH_BURST` makes each of those commits follow that many bytes
    // of another program's unsynced data (default 0; `VSH_BENCH_BURST_INTO`
    // picks a control, see `unsynced_burst`).
    let phase_burst: usize = std::env::var("VSH_BENCH_BURST").ok().and_then(|bytes| bytes.parse().ok()).unwrap_or(0);
    if std::env::var("VSH_BENCH_ONLY").is_ok_and(|only| only == "phases") {
        phases(&scratch, phase_files, &diff(phase_files, &blobs), &blobs, phase_runs, phase_burst);
        std::fs::remove_dir_all(&scratch).unwrap();
        return;
    }
    println!("commit benchmark in {} ({RUNS} runs per size; ledger fsyncs each transition)", scratch.display());
    println!(
        "{:>6}  {:>10}  {:>10}  {:>10}  {:>9}  barriers per commit",
        "files", "median ms", "min ms", "max ms", "ms/file"
    );
    for files in SIZES {
        let entries = diff(files, &blobs);
        let mut samples = Vec::new();
        let mut syncs = SyncCounts::default();
        for run in 0..RUNS {
            let setup = setup(&scratch, files, run);
            let request = CommitRequest::new(setup.transaction, &entries, &reads, &blobs);
            let started = Instant::now();
            let receipt: CommitReceipt = setup.committer.commit_with_ledger(&request, &setup.ledger).expect("commit");
            samples.push(started.elapsed());
            syncs = receipt.syncs;
        }
        let (median, min, max) = median(samples);
        println!(
            "{files:>6}  {:>10.1}  {:>10.1}  {:>10.1}  {:>9.3}  {} file fsyncs, {} dir fsyncs, {} syncfs, 2 ledger fsyncs (whatever the file count)",
            ms(median),
            ms(min),
            ms(max),
            ms(median) / f64::from(u32::try_from(files).expect("a small size")),
            syncs.file_fsyncs,
            syncs.dir_fsyncs,
            syncs.syncfs,
        );
    }

    let entries = diff(1, &blobs);
    phases(&scratch, 1, &entries, &blobs, phase_runs, 0);
    let files = 1000;
    let entries = diff(files, &blobs);
    phases(&scratch, files, &entries, &blobs, 3, 0);
    for (label, point) in [
        ("roll back (every operation applied)", FaultPoint::OperationApplied(2 * files as u32 - 1)),
        ("roll forward (the ledger said committed)", FaultPoint::CommittedStatePersisted),
    ] {
        let mut samples = Vec::new();
        for run in 0..RECOVERY_RUNS {
            let setup = setup(&scratch, files, 100 + run);
            let request = CommitRequest::new(setup.transaction, &entries, &reads, &blobs);
            let crashed = setup.committer.commit_with_faults(&request, &setup.ledger, &CrashAt::new(point));
            assert!(crashed.is_err(), "the commit stops at {point}");
            let started = Instant::now();
            let report = setup.committer.recover(&setup.ledger).expect("recover");
            samples.push(started.elapsed());
            assert!(report.is_clean() && report.rolled_back.len() + report.rolled_forward.len() == 1);
        }
        let (median, min, max) = median(samples);
        println!(
            "recovery of {files} files, {label}: median {:.1} ms (min {:.1}, max {:.1})",
            ms(median),
            ms(min),
            ms(max)
        );
    }
    dirty_disk(&scratch, &blobs);
    std::fs::remove_dir_all(&scratch).unwrap();
}
