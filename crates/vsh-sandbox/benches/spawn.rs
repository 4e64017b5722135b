//! Spawn cost of `/bin/true`: plain `std::process::Command` against `ConfinedCommand`.
//!
//! Each variant spawns and waits for `/bin/true` [`RUNS`] times after [`WARM_UP`] unmeasured
//! runs; the variants take turns, one spawn each, so load that comes and goes on the machine
//! weighs on all of them alike. The table gives the median, the 95th percentile, the ratio to
//! plain and the time added. The goal for the confined default is at most 0.3 ms added per
//! spawn. Run with `cargo bench -p vsh-sandbox --bench spawn` (or `cargo xtask bench`).
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vsh_sandbox::{ConfinedCommand, ExecGrant, SandboxPolicy, ToolContext, probe};

const WARM_UP: usize = 20;
const RUNS: usize = 200;
const PROGRAM: &str = "/bin/true";

/// One way of spawning the program.
struct Variant {
    name: &'static str,
    spawn: Box<dyn Fn()>,
    samples: Vec<Duration>,
}

fn main() {
    let kernel = probe();
    println!("kernel: Landlock ABI {:?}, seccomp filters {}", kernel.landlock_abi, kernel.seccomp);
    let only_true = Arc::new(ToolContext::new(ExecGrant::Only(vec![PathBuf::from(PROGRAM)])));
    let any = Arc::new(ToolContext::new(ExecGrant::Any));
    let confined = Arc::new(SandboxPolicy::new());
    let group_only = Arc::new(SandboxPolicy::group_only());

    let mut variants = vec![variant("plain std::process::Command", || {
        let status = Command::new(PROGRAM).stdin(Stdio::null()).status().expect("spawn /bin/true");
        assert!(status.success());
    })];
    if ConfinedCommand::new(PROGRAM).sandbox_policy(Arc::clone(&confined)).spawn(&only_true).is_ok() {
        variants
            .push(variant("confined, SandboxPolicy::new(), ExecGrant::Only", confined_spawn(&confined, &only_true)));
        variants.push(variant("confined, SandboxPolicy::new(), ExecGrant::Any", confined_spawn(&confined, &any)));
    } else {
        println!("confined variants skipped: this kernel cannot meet the default floors");
    }
    variants.push(variant("group only, SandboxPolicy::group_only()", confined_spawn(&group_only, &any)));

    for round in 0..WARM_UP + RUNS {
        for variant in &mut variants {
            let start = Instant::now();
            (variant.spawn)();
            if round >= WARM_UP {
                variant.samples.push(start.elapsed());
            }
        }
    }

    println!("spawn + wait of {PROGRAM}, {RUNS} runs per variant after {WARM_UP} warm-up runs, interleaved");
    println!("{:<50} {:>10} {:>10} {:>8} {:>12}", "variant", "median", "p95", "ratio", "added");
    let plain_median = percentile(&mut variants[0].samples, 50);
    for variant in &mut variants {
        let median = percentile(&mut variant.samples, 50);
        let p95 = percentile(&mut variant.samples, 95);
        println!(
            "{:<50} {:>10} {:>10} {:>7.2}x {:>12}",
            variant.name,
            millis(median),
            millis(p95),
            median.as_secs_f64() / plain_median.as_secs_f64(),
            format!("{:+.3} ms", (median.as_secs_f64() - plain_median.as_secs_f64()) * 1e3),
        );
    }
}

fn variant(name: &'static str, spawn: impl Fn() + 'static) -> Variant {
    Variant { name, spawn: Box::new(spawn), samples: Vec::with_capacity(RUNS) }
}

/// Spawn and wait for the program under `policy` and `context`.
fn confined_spawn(policy: &Arc<SandboxPolicy>, context: &Arc<ToolContext>) -> impl Fn() + 'static {
    let (policy, context) = (Arc::clone(policy), Arc::clone(context));
    move || {
        let mut child = ConfinedCommand::new(PROGRAM)
            .sandbox_policy(Arc::clone(&policy))
            .stdin(Stdio::null())
            .spawn(&context)
            .expect("confined spawn of /bin/true");
        assert!(child.wait().expect("wait").success());
    }
}

fn percentile(samples: &mut [Duration], percent: usize) -> Duration {
    samples.sort();
    samples[(samples.len() * percent / 100).min(samples.len() - 1)]
}

fn millis(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1e3)
}
