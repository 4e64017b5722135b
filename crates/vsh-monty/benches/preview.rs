//! A tiny preview through the worker against the same program in process.
//!
//! Each iteration builds a fresh virtual image of a small workspace, runs a
//! program that reads a file, writes one, globs and prints, and takes the
//! canonical diff: what a preview costs without the store. Reported are the
//! median and the 90th percentile of:
//!
//! - in process ([`MontyExecutor::in_process`]);
//! - through a warm worker pool (the worker is reused after each reset);
//! - through a cold worker (`max_idle = 0`: spawn, confine, handshake, run,
//!   kill on every iteration).
//!
//! Run with `cargo bench -p vsh-monty --bench preview` (`cargo xtask bench`
//! runs every benchmark). `VSH_BENCH_ITERATIONS` overrides the iteration
//! count (default 200).
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::result_large_err, reason = "the benchmark passes `ExecutionError` through unchanged")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use vsh_host::CapDir;
use vsh_monty::{ExecutionLimits, MontyExecutor, WorkerConfig};
use vsh_policy::CallPolicy;
use vsh_vfs::{SnapshotLimits, VirtualFs};

const PROGRAM: &str = "from pathlib import Path\n\
                       text = Path('in.txt').read_text()\n\
                       vsh_write('out.txt', text.upper())\n\
                       print(len(vsh_glob('*.txt')))\n\
                       text[:5]";

fn measure(name: &str, executor: &MontyExecutor, dir: &Arc<CapDir>, iterations: usize) -> Duration {
    let policy = CallPolicy::balanced_default(None);
    let limits = ExecutionLimits::default();
    let run = || {
        let mut vfs = VirtualFs::new(Arc::clone(dir), vec![], SnapshotLimits::default());
        let started = Instant::now();
        let outcome = executor.execute(PROGRAM, &mut vfs, &policy, &limits).expect("the preview runs");
        let diff = vfs.canonical_diff().expect("a diff");
        let elapsed = started.elapsed();
        assert_eq!(outcome.value.py_repr(), "'hello'");
        assert_eq!(diff.len(), 1);
        elapsed
    };
    for _ in 0..iterations.div_ceil(20) {
        run();
    }
    let mut samples: Vec<Duration> = (0..iterations).map(|_| run()).collect();
    samples.sort_unstable();
    let median = samples[samples.len() / 2];
    let p90 = samples[samples.len() * 9 / 10];
    println!("{name:<28} median {:>10.1} µs   p90 {:>10.1} µs   (n = {iterations})", micros(median), micros(p90));
    median
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn main() {
    let iterations: usize =
        std::env::var("VSH_BENCH_ITERATIONS").ok().and_then(|value| value.parse().ok()).unwrap_or(200).max(1);
    let workspace = tempfile::tempdir().expect("a temporary workspace");
    std::fs::write(workspace.path().join("in.txt"), b"hello, preview\n").expect("a file");
    std::fs::write(workspace.path().join("other.txt"), b"other\n").expect("a file");
    let dir = Arc::new(CapDir::open(workspace.path()).expect("the workspace opens"));
    let worker = env!("CARGO_BIN_EXE_vsh-monty-worker");

    println!("tiny preview: read, write, glob, print, canonical diff");
    let in_process = measure("in process", &MontyExecutor::in_process(), &dir, iterations);
    let warm = MontyExecutor::worker(WorkerConfig::new(worker)).expect("a worker executor");
    let warm_median = measure("worker, warm pool", &warm, &dir, iterations);
    let cold = MontyExecutor::worker(WorkerConfig::new(worker).with_max_idle(0)).expect("a worker executor");
    let cold_median = measure("worker, spawned per run", &cold, &dir, iterations.div_ceil(4));
    println!(
        "worker overhead: warm {:.1} µs ({:.1}x), cold {:.1} µs",
        micros(warm_median.saturating_sub(in_process)),
        warm_median.as_secs_f64() / in_process.as_secs_f64().max(f64::MIN_POSITIVE),
        micros(cold_median.saturating_sub(in_process)),
    );
}
