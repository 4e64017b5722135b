//! Bash workloads of issue 12 through `Runtime`, each beside its Monty
//! equivalent, through the confined worker: a no-op script warm, `grep -rn`
//! over 10,000 files against `vsh_search`, and `sed -i` over 1,000 files
//! against a `vsh_patch` loop. Reports the median and 95th percentile of the
//! receipt's execute stage and of the wall time around each preview.
//!
//! Run with `cargo bench -p vsh-integration-tests --bench bash` (`cargo xtask
//! bench` runs every benchmark). `VSH_BENCH_ITERATIONS` overrides the count of
//! the no-op runs (default 200; the big workloads run a tenth as often).
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use vsh::{BashConfig, Language, RunRequest, Runtime};

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort_unstable();
    let at = |fraction: f64| {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        let index = ((samples.len() as f64 - 1.0) * fraction).round() as usize;
        micros(samples[index])
    };
    (at(0.5), at(0.95))
}

/// Preview `code` in `language` `iterations` times after a warm-up; print
/// the execute stage and the wall time, p50 and p95.
fn measure(name: &str, runtime: &Runtime, language: Language, code: &str, iterations: usize) -> f64 {
    // Room for a host call per file (the default budget is 10,000 calls).
    let budget = vsh::ExecutionBudget {
        max_os_calls: 1_000_000,
        max_duration: Duration::from_mins(1),
        max_request_duration: Duration::from_mins(2),
        ..vsh::ExecutionBudget::default()
    };
    let request = RunRequest::new(code).with_language(language).with_budget(budget);
    let mut execute = Vec::with_capacity(iterations);
    let mut wall = Vec::with_capacity(iterations);
    for round in 0..iterations + iterations.div_ceil(10) {
        let started = Instant::now();
        let receipt = runtime.preview(&request).unwrap_or_else(|error| panic!("{name}: {error:?}"));
        let elapsed = started.elapsed();
        runtime.reject(receipt.transaction, 1).expect("let the preview go");
        if round >= iterations.div_ceil(10) {
            execute.push(Duration::from_nanos(receipt.timings.execute));
            wall.push(elapsed);
        }
    }
    let (execute_p50, execute_p95) = percentiles(execute);
    let (wall_p50, wall_p95) = percentiles(wall);
    println!(
        "  {name:<34} execute {execute_p50:>10.1} / {execute_p95:>10.1} µs   wall {wall_p50:>10.1} / {wall_p95:>10.1} µs"
    );
    wall_p50
}

fn main() {
    let iterations: usize = std::env::var("VSH_BENCH_ITERATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let worker = vsh_integration_tests::test_worker();
    let open = |root: &std::path::Path| {
        Runtime::open(vsh::RuntimeConfig::new(root).with_worker_path(&worker).with_bash(BashConfig::new()))
            .expect("the runtime opens")
    };
    println!("bash workloads through the confined worker (p50 / p95), n = {iterations} and {}:", iterations / 10);

    let tiny = tempfile::tempdir().unwrap();
    std::fs::write(tiny.path().join("in.txt"), "hello\n").unwrap();
    let runtime = open(tiny.path());
    let bash_noop = measure("no-op, bash (true)", &runtime, Language::Bash, "true", iterations);
    let monty_noop = measure("no-op, monty (None)", &runtime, Language::Monty, "None", iterations);
    println!("  no-op ratio bash / monty: {:.2}", bash_noop / monty_noop);

    // 10,000 files in 100 directories, one in a hundred holding the needle.
    let many = tempfile::tempdir().unwrap();
    for dir in 0..100 {
        let path = many.path().join(format!("d{dir:02}"));
        std::fs::create_dir(&path).unwrap();
        for file in 0..100 {
            let text = if file == 7 { "alpha\nthe needle is here\nomega\n" } else { "alpha\nnothing\nomega\n" };
            std::fs::write(path.join(format!("f{file:02}.txt")), text).unwrap();
        }
    }
    let runtime = open(many.path());
    let rounds = (iterations / 10).max(5);
    let bash_grep =
        measure("grep -rn over 10,000 files, bash", &runtime, Language::Bash, "grep -rn needle . > /dev/null", rounds);
    let monty_grep = measure(
        "vsh_search over 10,000 files, monty",
        &runtime,
        Language::Monty,
        "len(vsh_search('needle', max_results=1000))",
        rounds,
    );
    println!("  grep ratio bash / monty: {:.2}", bash_grep / monty_grep);

    // 1,000 files edited in place.
    let edits = tempfile::tempdir().unwrap();
    std::fs::create_dir(edits.path().join("src")).unwrap();
    for file in 0..1000 {
        std::fs::write(edits.path().join(format!("src/m{file:03}.txt")), "version = 1\nname = demo\n").unwrap();
    }
    let runtime = open(edits.path());
    let bash_sed = measure(
        "sed -i over 1,000 files, bash",
        &runtime,
        Language::Bash,
        "for f in src/*.txt; do sed -i 's/version = 1/version = 2/' \"$f\"; done",
        rounds,
    );
    let monty_sed = measure(
        "vsh_patch over 1,000 files, monty",
        &runtime,
        Language::Monty,
        "for p in vsh_list('src'):\n    vsh_patch(p, 'version = 1', 'version = 2')",
        rounds,
    );
    println!("  sed ratio bash / monty: {:.2}", bash_sed / monty_sed);
}
