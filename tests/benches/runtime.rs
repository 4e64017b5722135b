//! Whole-facade workloads of issue 15, through `Runtime` as an application
//! uses it: a tiny preview (of the same output each time, and of new bytes
//! each time) and a tiny auto-commit, in process and through the
//! confined worker, with the median and 95th percentile of every stage the
//! receipt times (snapshot, execute, diff, policy, bind and store, commit,
//! total) and of the wall time around the call.
//!
//! Run with `cargo bench -p vsh-integration-tests --bench runtime` (`cargo
//! xtask bench` runs every benchmark). `VSH_BENCH_ITERATIONS` overrides the
//! iteration count (default 200); `VSH_BENCH_ONLY=in-process` or `worker`
//! runs one executor's workloads.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use vsh::{RunMode, RunRequest, Runtime, StageTimings};

/// An auto-commit that changes one file each time (it grows by a byte).
const TINY_AUTO: &str = "from pathlib import Path\n\
                         p = Path('log.txt')\n\
                         p.write_text((p.read_text() if p.exists() else '') + 'x')";

/// Reads a file, writes one, prints: the peer's "tiny" workload.
const TINY: &str = "from pathlib import Path\n\
                    text = Path('in.txt').read_text()\n\
                    Path('out.txt').write_text(text.upper())\n\
                    print(len(text))\n\
                    text[:5]";

fn percentile(samples: &mut [u64], fraction: f64) -> f64 {
    samples.sort_unstable();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let index = ((samples.len() as f64 - 1.0) * fraction).round() as usize;
    #[allow(clippy::cast_precision_loss)]
    let micros = samples[index] as f64 / 1e3;
    micros
}

/// One run's stage timings and the wall time around it.
type Sample = (StageTimings, Duration);

/// A column of the report: its name and how to read it from a sample.
type Column = (&'static str, fn(&Sample) -> u64);

fn report(name: &str, runs: &[Sample]) {
    let columns: [Column; 8] = [
        ("snapshot", |(t, _)| t.snapshot),
        ("execute", |(t, _)| t.execute),
        ("diff", |(t, _)| t.diff),
        ("policy", |(t, _)| t.policy),
        ("bind+store", |(t, _)| t.bind_and_store),
        ("commit", |(t, _)| t.commit),
        ("total", |(t, _)| t.total),
        ("wall", |(_, wall)| u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX)),
    ];
    println!("{name} (n = {}), µs p50 / p95:", runs.len());
    for (column, value) in columns {
        let mut samples: Vec<u64> = runs.iter().map(value).collect();
        println!("  {column:<11} {:>9.1} / {:>9.1}", percentile(&mut samples, 0.5), percentile(&mut samples, 0.95));
    }
}

/// A preview that writes bytes it never wrote before (`{n}` is the run's number).
const TINY_NEW: &str = "from pathlib import Path\n\
                        Path('out.txt').write_text('run {n}: ' + Path('in.txt').read_text())";

fn workload(name: &str, runtime: &Runtime, mode: RunMode, program: &str, iterations: usize) {
    let counter = std::cell::Cell::new(0_u64);
    let run = || {
        counter.set(counter.get() + 1);
        let code = program.replace("{n}", &counter.get().to_string());
        let started = Instant::now();
        let receipt = runtime.run(&RunRequest::new(&code).with_mode(mode)).expect("the run succeeds");
        if mode == RunMode::Auto {
            assert_eq!(receipt.state, vsh::TransactionState::Committed);
        }
        let wall = started.elapsed();
        if mode == RunMode::Preview {
            assert_eq!(receipt.state, vsh::TransactionState::AutoApproved, "{name}");
            // Process-local previews are bounded: let each one go.
            runtime.discard_preview(receipt.transaction).expect("discard");
        }
        (receipt.timings, wall)
    };
    for _ in 0..iterations.div_ceil(10) {
        run();
    }
    let runs: Vec<_> = (0..iterations).map(|_| run()).collect();
    report(name, &runs);
}

fn main() {
    let iterations = std::env::var("VSH_BENCH_ITERATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    // `VSH_BENCH_ONLY=in-process` or `worker` runs one executor's workloads (to profile one).
    let only = std::env::var("VSH_BENCH_ONLY").unwrap_or_default();
    for (label, in_process) in [("in process", true), ("confined worker", false)] {
        if (only == "in-process" && !in_process) || (only == "worker" && in_process) {
            continue;
        }
        let dir = tempfile::tempdir().expect("a workspace");
        std::fs::write(dir.path().join("in.txt"), "hello world\n").expect("a file");
        let mut config = vsh_integration_tests::config(dir.path());
        if in_process {
            config = config.with_in_process_execution();
        }
        let runtime = Runtime::open(config).expect("a runtime");
        workload(&format!("tiny preview, {label}"), &runtime, RunMode::Preview, TINY, iterations);
        workload(&format!("tiny preview of new bytes, {label}"), &runtime, RunMode::Preview, TINY_NEW, iterations);
        workload(&format!("tiny auto, {label}"), &runtime, RunMode::Auto, TINY_AUTO, iterations / 4);
    }
}
