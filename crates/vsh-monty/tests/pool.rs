//! The active-worker bound under load: 32 concurrent runs on one executor
//! never have more worker processes alive than `max_active`.
//!
//! This is its own test binary (its own process), so every `vsh-monty-worker`
//! child of this process belongs to the executor under test; a sampling
//! thread counts them in `/proc` (zombies included: a worker counts until it
//! has been reaped) for as long as the runs go on.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::result_large_err, reason = "the test passes `ExecutionError` through unchanged")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use vsh_host::CapDir;
use vsh_monty::{ExecutionLimits, MontyExecutor, WorkerConfig};
use vsh_policy::CallPolicy;
use vsh_vfs::{SnapshotLimits, VirtualFs};

/// The live `vsh-monty-worker` children of this process (the kernel keeps
/// the first 15 bytes of the command name).
fn live_workers() -> usize {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().bytes().all(|byte| byte.is_ascii_digit()))
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter(|stat| {
            // `pid (comm) state ppid ...`; comm may hold spaces, so split at the last ')'.
            let Some((head, tail)) = stat.rsplit_once(") ") else { return false };
            let comm = head.split_once(" (").map_or("", |(_, comm)| comm);
            let ppid = tail.split_whitespace().nth(1).unwrap_or("");
            comm == "vsh-monty-worke" && ppid == me
        })
        .count()
}

#[test]
fn thirty_two_concurrent_runs_never_exceed_the_active_bound() {
    const MAX_ACTIVE: usize = 3;
    let executor = MontyExecutor::worker(
        WorkerConfig::new(env!("CARGO_BIN_EXE_vsh-monty-worker")).with_max_active(MAX_ACTIVE).with_max_idle(2),
    )
    .unwrap();
    let parent = tempfile::tempdir().unwrap();
    std::fs::write(parent.path().join("in.txt"), b"payload").unwrap();
    let dir = Arc::new(CapDir::open(parent.path()).unwrap());
    let done = AtomicBool::new(false);
    let peak = AtomicUsize::new(0);
    let samples = AtomicUsize::new(0);
    let limits = ExecutionLimits { max_request_duration: Duration::from_mins(2), ..ExecutionLimits::default() };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(live_workers(), Ordering::Relaxed);
                samples.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let runs: Vec<_> = (0..32)
            .map(|index| {
                let (executor, dir, limits) = (&executor, Arc::clone(&dir), &limits);
                scope.spawn(move || {
                    let mut vfs = VirtualFs::new(dir, vec![], SnapshotLimits::default());
                    // Every fourth run ends in a limit, so workers are also
                    // discarded and replaced under load.
                    let code = if index % 4 == 3 {
                        "vsh_test_hook('sleep', 20)\nwhile True:\n    vsh_list()".to_owned()
                    } else {
                        format!("vsh_test_hook('sleep', 20)\nvsh_write('out{index}.txt', vsh_read('in.txt'))\n{index}")
                    };
                    let run_limits = ExecutionLimits { max_os_calls: 50, ..limits.clone() };
                    let result = executor.execute(&code, &mut vfs, &CallPolicy::balanced_default(None), &run_limits);
                    (index, result)
                })
            })
            .collect();
        for run in runs {
            let (index, result) = run.join().unwrap();
            match result {
                Ok(outcome) => {
                    assert_ne!(index % 4, 3);
                    assert_eq!(outcome.value.py_repr(), index.to_string());
                }
                Err(vsh_monty::ExecutionError::Limit { limit, .. }) => {
                    assert_eq!(index % 4, 3);
                    assert_eq!(limit.limit, vsh_monty::LimitKind::OsCalls);
                }
                Err(other) => panic!("run {index} failed: {other:?}"),
            }
        }
        done.store(true, Ordering::Relaxed);
    });
    let status = executor.pool_status().unwrap();
    assert!(peak.load(Ordering::Relaxed) <= MAX_ACTIVE, "{} workers alive at once", peak.load(Ordering::Relaxed));
    assert!(peak.load(Ordering::Relaxed) >= 1 && samples.load(Ordering::Relaxed) > 0);
    assert!(status.peak_active <= MAX_ACTIVE, "{status:?}");
    assert!(status.spawned >= 8, "each limit discards its worker: {status:?}");
    assert_eq!(status.active, 0);
    assert!(status.idle <= 2);
    assert_eq!(executor.worker_pids().len(), status.idle);
    assert_eq!(live_workers(), status.idle, "only the idle workers are left");
}
