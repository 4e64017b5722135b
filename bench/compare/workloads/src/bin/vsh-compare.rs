//! `vsh-compare`: the comparison bench's driver.
//!
//! It builds the two engine binaries (`bench/compare/ours`, `bench/compare/peer`)
//! into its own target directory, installs the peer's published worker
//! (`vsh-monty-worker` 0.6.0, pinned, `--locked`) unless `$VSH_MONTY_WORKER`
//! names one, then runs every workload in rounds that alternate the engines
//! (ours, peer, ours, peer, ...; each round a fresh process with its own
//! warm-up, started once the machine is quiet: another build running on it
//! would skew the round), and prints a table of wall-time p50 and p95 per side with the
//! ratio ours/peer, a table of the stages' p50, the derived ratios and the
//! issue's targets. Everything, raw samples included, goes to
//! `target/bench/compare.json` at the repository root.
//!
//! `--engines ours` runs our engine alone (neither the peer's package nor
//! its worker is built): a table of p50 and p95 of every stage per workload,
//! the derived ratios, and the JSON in `target/bench/workloads.json` (or
//! `--out FILE`). `cargo xtask bench` runs it so.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use serde_json::{Value, json};
use workloads::report::p50_p95;

const USAGE: &str = "usage: vsh-compare [--engines both|ours] [--samples N] [--rounds N] [--warmup N] \
                     [--burst-samples N] [--burst-mib N] [--workloads a,b,...] [--scratch DIR] \
                     [--quiet-wait SECONDS] [--round-timeout SECONDS] [--out FILE]";

/// The command line.
#[derive(Debug)]
struct Args {
    samples: usize,
    rounds: usize,
    warmup: usize,
    burst_samples: usize,
    burst_mib: u64,
    only: Option<Vec<String>>,
    scratch: Option<PathBuf>,
    quiet_wait: u64,
    /// How long one round (one engine process) may take before it is killed.
    round_timeout: u64,
    /// Run the peer too (`--engines both`, the default), or only ours
    /// (`--engines ours`: `cargo xtask bench` measures our engine alone).
    peer: bool,
    /// Where the JSON goes (default `target/bench/compare.json`, or
    /// `target/bench/workloads.json` with `--engines ours`).
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        samples: 20,
        rounds: 2,
        warmup: 3,
        burst_samples: 3,
        burst_mib: 2048,
        only: None,
        scratch: None,
        quiet_wait: 120,
        round_timeout: 900,
        peer: true,
        out: None,
    };
    let mut raw = std::env::args().skip(1);
    while let Some(flag) = raw.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_owned());
        }
        let value = raw.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = || value.parse::<usize>().map_err(|_| format!("{flag} {value}: not a number"));
        match flag.as_str() {
            "--samples" => args.samples = number()?.max(1),
            "--rounds" => args.rounds = number()?.max(1),
            "--warmup" => args.warmup = number()?,
            "--burst-samples" => args.burst_samples = number()?.max(1),
            "--burst-mib" => args.burst_mib = number()? as u64,
            "--workloads" => args.only = Some(value.split(',').map(str::to_owned).collect()),
            "--scratch" => args.scratch = Some(PathBuf::from(value)),
            "--quiet-wait" => args.quiet_wait = number()? as u64,
            "--round-timeout" => args.round_timeout = number()?.max(1) as u64,
            "--engines" => {
                args.peer = match value.as_str() {
                    "both" => true,
                    "ours" => false,
                    _ => return Err(format!("--engines {value}: `both` or `ours`\n{USAGE}")),
                }
            }
            "--out" => args.out = Some(PathBuf::from(value)),
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    Ok(args)
}

/// `bench/compare`, from where this package was built.
fn compare_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bench/compare").to_path_buf()
}

/// The target directory this driver was built into (`<target>/release/vsh-compare`).
fn target_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|error| format!("cannot find this executable: {error}"))?;
    exe.parent().and_then(Path::parent).map(Path::to_path_buf).ok_or_else(|| "no target directory".to_owned())
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Build one engine package (its committed lockfile, `--locked`) into
/// `target` and return its binary.
fn build(package: &str, target: &Path) -> Result<PathBuf, String> {
    let manifest = compare_dir().join(package).join("Cargo.toml");
    eprintln!("building {} ...", manifest.display());
    let output = cargo()
        .args(["build", "--release", "--locked", "--message-format=json-render-diagnostics", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target)
        .current_dir(compare_dir())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !output.status.success() {
        return Err(format!("building {package} failed"));
    }
    let wanted = format!("vsh-compare-{package}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact" && message["target"]["name"] == wanted.as_str())
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| format!("cargo built no {wanted}"))
}

/// The peer's worker: `$VSH_MONTY_WORKER`, else the pinned release installed
/// under `target/peer-worker` (installed now if missing). Its `--version`
/// must be the one the peer checks for.
fn peer_worker(target: &Path) -> Result<PathBuf, String> {
    let worker = match std::env::var_os("VSH_MONTY_WORKER").filter(|path| !path.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => {
            let root = target.join("peer-worker");
            let worker = root.join("bin/vsh-monty-worker");
            if !worker.is_file() {
                eprintln!("installing vsh-monty-worker 0.6.0 into {} ...", root.display());
                let status = cargo()
                    .args(["install", "vsh-monty-worker", "--version", "=0.6.0", "--locked", "--root"])
                    .arg(&root)
                    .env("CARGO_TARGET_DIR", target.join("peer-worker-build"))
                    .status()
                    .map_err(|error| format!("cannot run cargo install: {error}"))?;
                if !status.success() {
                    return Err("installing vsh-monty-worker 0.6.0 failed".to_owned());
                }
            }
            worker
        }
    };
    let output = Command::new(&worker)
        .arg("--version")
        .output()
        .map_err(|error| format!("cannot run {}: {error}", worker.display()))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if version != "vsh-monty-worker 0.0.22" {
        return Err(format!(
            "{} says {version:?}, not the 0.6.0 release's `vsh-monty-worker 0.0.22`",
            worker.display()
        ));
    }
    Ok(worker)
}

/// The machine's busy share over half a second (0 idle, 1 every core busy),
/// from `/proc/stat`; `None` where there is none.
fn busy() -> Option<f64> {
    let sample = || -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
        let idle = fields.get(3)? + fields.get(4).unwrap_or(&0);
        Some((fields.iter().sum(), idle))
    };
    let (total, idle) = sample()?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (total2, idle2) = sample()?;
    let elapsed = total2.saturating_sub(total);
    #[allow(clippy::cast_precision_loss)]
    (elapsed > 0).then(|| 1.0 - idle2.saturating_sub(idle) as f64 / elapsed as f64)
}

/// Wait (at most `seconds`) until the machine is quiet (under a quarter busy:
/// another build would skew the round), and say how busy it was at the start.
fn wait_for_quiet(seconds: u64) -> Option<f64> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let mut told = false;
    loop {
        let now = busy()?;
        if now < 0.25 || std::time::Instant::now() >= deadline {
            return Some(now);
        }
        if !told {
            eprintln!("  the machine is {:.0}% busy: waiting up to {seconds} s for it to quiet down", now * 100.0);
            told = true;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// What one engine produced for one workload over every round.
#[derive(Debug, Default)]
struct Side {
    samples: Vec<Value>,
    metrics: Vec<Value>,
    describe: Option<String>,
    failure: Option<String>,
    /// How busy the machine was as each round started.
    busy: Vec<f64>,
}

/// Run `binary run workload` for one round and collect its lines into `side`.
fn run_round(binary: &Path, worker: Option<&Path>, workload: &str, flags: &[String], args: &Args, side: &mut Side) {
    let (quiet_wait, round_timeout) = (args.quiet_wait, std::time::Duration::from_secs(args.round_timeout));
    if side.failure.is_some() {
        return;
    }
    if let Some(busy) = wait_for_quiet(quiet_wait) {
        side.busy.push(busy);
    }
    let mut command = Command::new(binary);
    command.args(["run", workload]).args(flags).stdin(Stdio::null());
    if let Some(worker) = worker {
        command.env("VSH_MONTY_WORKER", worker);
    }
    let output = match output_within(&mut command, round_timeout) {
        Ok(output) => output,
        Err(error) => {
            side.failure = Some(format!("{}: {error}", binary.display()));
            eprintln!("  {workload}: {}", side.failure.as_deref().unwrap_or_default());
            return;
        }
    };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(value) = serde_json::from_str::<Value>(line) else { continue };
        match value["type"].as_str() {
            Some("sample") => side.samples.push(value),
            Some("metric") => side.metrics.push(value),
            Some("info") => side.describe = value["describe"].as_str().map(str::to_owned),
            _ => {}
        }
    }
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        eprintln!("  {}: {stderr}", binary.display());
        side.failure = Some(stderr);
    }
}

/// Run `command` to its end with stdout and stderr captured, killing it
/// once `timeout` has passed (an engine that hangs must not stall the bench:
/// the round is recorded as failed).
fn output_within(command: &mut Command, timeout: std::time::Duration) -> Result<std::process::Output, String> {
    use std::io::Read;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run: {error}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|error| format!("cannot wait: {error}"))? {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("killed after {} s (see --round-timeout)", timeout.as_secs()));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok(std::process::Output { status, stdout, stderr })
}

/// p50 and p95 (milliseconds) of a number in every sample.
fn stat(samples: &[Value], get: impl Fn(&Value) -> Option<f64>) -> Option<(f64, f64)> {
    let values: Vec<f64> = samples.iter().filter_map(get).map(|ns| ns / 1e6).collect();
    p50_p95(&values)
}

fn wall(samples: &[Value]) -> Option<(f64, f64)> {
    stat(samples, |sample| sample["wall_ns"].as_f64())
}

/// A metric over the rounds: the median, or the sum.
fn metric(side: &Side, name: &str) -> Option<f64> {
    let rows: Vec<&Value> = side.metrics.iter().filter(|metric| metric["name"] == name).collect();
    let values: Vec<f64> = rows.iter().filter_map(|metric| metric["value"].as_f64()).collect();
    if rows.first().is_some_and(|metric| metric["combine"] == "sum") {
        return Some(values.iter().sum());
    }
    workloads::report::percentile(&values, 0.5)
}

/// The stage names of `samples`, in first-seen order.
fn stage_names(samples: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for sample in samples {
        if let Some(stages) = sample["stages"].as_object() {
            for name in stages.keys() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
    }
    names
}

/// The paths the samples took (`auto`, `preview+approve+commit`, ...), with counts.
fn paths(samples: &[Value]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for sample in samples {
        if let Some(path) = sample["path"].as_str() {
            *counts.entry(path.to_owned()).or_default() += 1;
        }
    }
    counts.into_iter().map(|(path, count)| format!("{path} x{count}")).collect::<Vec<_>>().join(", ")
}

fn summary(side: &Side) -> Value {
    let stages: serde_json::Map<String, Value> = stage_names(&side.samples)
        .into_iter()
        .filter_map(|name| {
            let (p50, p95) = stat(&side.samples, |sample| sample["stages"][&name].as_f64())?;
            Some((name, json!({"p50_ms": p50, "p95_ms": p95})))
        })
        .collect();
    let metrics: serde_json::Map<String, Value> = side
        .metrics
        .iter()
        .filter_map(|metric| metric["name"].as_str())
        .map(|name| (name.to_owned(), json!(metric(side, name))))
        .collect();
    json!({
        "describe": side.describe,
        "failure": side.failure,
        "n": side.samples.len(),
        "wall_p50_ms": wall(&side.samples).map(|(p50, _)| p50),
        "wall_p95_ms": wall(&side.samples).map(|(_, p95)| p95),
        "stages": stages,
        "metrics": metrics,
        "paths": paths(&side.samples),
        "busy_at_round_start": side.busy,
        "samples": side.samples,
    })
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ms| if ms < 10.0 { format!("{ms:.3}") } else { format!("{ms:.1}") })
}

fn ratio(ours: Option<f64>, peer: Option<f64>) -> Option<f64> {
    match (ours, peer) {
        (Some(ours), Some(peer)) if peer > 0.0 => Some(ours / peer),
        _ => None,
    }
}

fn times(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.2}"))
}

fn main() -> ExitCode {
    match drive() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("vsh-compare: {error}");
            ExitCode::FAILURE
        }
    }
}

#[allow(clippy::too_many_lines)]
fn drive() -> Result<(), String> {
    let args = parse_args()?;
    let target = target_dir()?;
    let ours = build("ours", &target)?;
    let scratch = args.scratch.clone().unwrap_or_else(|| target.join("compare-scratch"));
    let chosen = choose(&ours, &args)?;
    if !args.peer {
        return ours_alone(&args, &ours, &scratch, &chosen);
    }
    let peer = build("peer", &target)?;
    let worker = peer_worker(&target)?;

    let mut results: Vec<(String, String, Side, Side)> = Vec::new();
    for (name, about) in chosen {
        let (rounds, per_round) = rounds_of(&args, &name);
        eprintln!("{name}: {rounds} rounds x {per_round} samples per engine, alternating ours/peer");
        let (mut ours_side, mut peer_side) = (Side::default(), Side::default());
        for round in 0..rounds {
            let flags = round_flags(&args, &name, &scratch, round);
            run_round(&ours, None, &name, &flags, &args, &mut ours_side);
            run_round(&peer, Some(&worker), &name, &flags, &args, &mut peer_side);
        }
        results.push((name, about, ours_side, peer_side));
    }

    // The main table: wall time per workload.
    let mut table = String::new();
    let _ = writeln!(
        table,
        "{:<21} {:>4} {:>10} {:>10} {:>10} {:>10} {:>7}  paths (ours | peer)",
        "workload (ms)", "n", "ours p50", "ours p95", "peer p50", "peer p95", "ratio"
    );
    let mut ratios = BTreeMap::new();
    let mut p50s: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for (name, _, ours_side, peer_side) in &results {
        let (o, p) = (wall(&ours_side.samples), wall(&peer_side.samples));
        let r = ratio(o.map(|s| s.0), p.map(|s| s.0));
        if let Some(r) = r {
            ratios.insert(name.as_str(), r);
        }
        if let Some((p50, _)) = o {
            p50s.insert((name.as_str(), "ours"), p50);
        }
        if let Some((p50, _)) = p {
            p50s.insert((name.as_str(), "peer"), p50);
        }
        let failed = |side: &Side| side.failure.as_ref().map(|_| " FAILED").unwrap_or_default();
        let _ = writeln!(
            table,
            "{:<21} {:>4} {:>10} {:>10} {:>10} {:>10} {:>7}  {}{} | {}{}",
            name,
            ours_side.samples.len().min(peer_side.samples.len()),
            ms(o.map(|s| s.0)),
            ms(o.map(|s| s.1)),
            ms(p.map(|s| s.0)),
            ms(p.map(|s| s.1)),
            times(r),
            paths(&ours_side.samples),
            failed(ours_side),
            paths(&peer_side.samples),
            failed(peer_side),
        );
    }

    // The stages' p50, per side.
    let mut stages = String::new();
    for (name, _, ours_side, peer_side) in &results {
        let mut names = stage_names(&ours_side.samples);
        for extra in stage_names(&peer_side.samples) {
            if !names.contains(&extra) {
                names.push(extra);
            }
        }
        let cells: Vec<String> = names
            .iter()
            .map(|stage| {
                let get = |side: &Side| stat(&side.samples, |sample| sample["stages"][stage].as_f64()).map(|s| s.0);
                format!("{stage} {}/{}", ms(get(ours_side)), ms(get(peer_side)))
            })
            .collect();
        let _ = writeln!(stages, "{name}: {}", cells.join(", "));
    }

    // Throughput and stale retries of the threaded workloads, and the derived ratios.
    let mut derived = String::new();
    let mut derived_json = serde_json::Map::new();
    for (name, _, ours_side, peer_side) in &results {
        if let (Some(o), Some(p)) = (metric(ours_side, "tx_per_s"), metric(peer_side, "tx_per_s")) {
            let _ = writeln!(
                derived,
                "{name}: throughput ours {o:.0} tx/s, peer {p:.0} tx/s, ours/peer {:.2}x; stale retries ours {}, peer {}",
                o / p,
                metric(ours_side, "stale_retries").unwrap_or(0.0),
                metric(peer_side, "stale_retries").unwrap_or(0.0),
            );
            derived_json.insert(format!("{name} throughput ours/peer"), json!(o / p));
        }
    }
    for (big, small, label) in [
        ("tx-100k-files", "tx-10-files", "1-file tx on 100,000 files / on 10 files"),
        ("commit-after-burst", "commit-quiet", "commit after a 2 GiB unsynced burst / on a quiet disk"),
        ("commit-after-burst", "commit-after-memory", "commit after a 2 GiB unsynced burst / after 2 GiB to memory"),
        ("commit-after-memory", "commit-quiet", "commit after 2 GiB to memory / on a quiet disk"),
    ] {
        for engine in ["ours", "peer"] {
            if let (Some(b), Some(s)) = (p50s.get(&(big, engine)), p50s.get(&(small, engine))) {
                let _ = writeln!(derived, "{label}, {engine}: {:.2}x", b / s);
                derived_json.insert(format!("{big}/{small} {engine}"), json!(b / s));
            }
        }
    }

    // The targets.
    let mut targets = String::new();
    let mut check = |what: String, value: Option<f64>, pass: &dyn Fn(f64) -> bool| {
        let verdict = value.map_or("n/a", |value| if pass(value) { "met" } else { "NOT met" });
        let _ = writeln!(targets, "{what}: {} ({verdict})", times(value));
    };
    for (name, r) in &ratios {
        let limit = match *name {
            "patch-1k" => 0.1,
            _ => 0.5,
        };
        if name.starts_with("threads-") {
            continue;
        }
        check(format!("{name} ours/peer p50 <= {limit}"), Some(*r), &|value| value <= limit);
    }
    for name in ["threads-separate", "threads-shared"] {
        let value = derived_json.get(&format!("{name} throughput ours/peer")).and_then(Value::as_f64);
        check(format!("{name} throughput ours/peer >= 2"), value, &|value| value >= 2.0);
    }
    if let Some((_, _, ours_side, _)) = results.iter().find(|(name, ..)| name == "threads-shared") {
        check(
            "threads-shared stale retries (false conflicts), ours = 0".to_owned(),
            metric(ours_side, "stale_retries"),
            &|value| value == 0.0,
        );
    }
    // What the other program's dirty pages cost: the commit after the burst
    // against the same commit after the same burst written to memory (the
    // same time away and cache pollution, a quiet disk). The commit right
    // after its preview is warmer than either: that ratio is printed too.
    let value = derived_json.get("commit-after-burst/commit-after-memory ours").and_then(Value::as_f64);
    check("commit after burst / after the same burst to memory (quiet disk), ours <= 1.5".to_owned(), value, &|value| {
        value <= 1.5
    });
    let value = derived_json.get("commit-after-burst/commit-quiet ours").and_then(Value::as_f64);
    check("commit after burst / quiet right after its preview, ours <= 1.5".to_owned(), value, &|value| value <= 1.5);
    check("commit after burst, ours/peer <= 1".to_owned(), ratios.get("commit-after-burst").copied(), &|value| {
        value <= 1.0
    });
    let value = derived_json.get("tx-100k-files/tx-10-files ours").and_then(Value::as_f64);
    check("1-file tx on 100,000 / on 10 files, ours <= 1.5".to_owned(), value, &|value| value <= 1.5);

    println!("\nWall time, ms (ratio = ours p50 / peer p50):\n{table}");
    println!("Stages, p50 ms ours/peer:\n{stages}");
    println!("Derived:\n{derived}");
    println!("Targets:\n{targets}");
    let busiest = results
        .iter()
        .flat_map(|(_, _, ours_side, peer_side)| ours_side.busy.iter().chain(&peer_side.busy))
        .fold(0.0_f64, |most, busy| most.max(*busy));
    if busiest >= 0.25 {
        println!(
            "Note: some rounds started on a busy machine (at most {:.0}% busy): other work skews them.\n",
            busiest * 100.0
        );
    }

    let workloads_json: Vec<Value> = results
        .iter()
        .map(|(name, about, ours_side, peer_side)| {
            json!({
                "name": name,
                "about": about,
                "ratio_p50": ratios.get(name.as_str()),
                "ours": summary(ours_side),
                "peer": summary(peer_side),
            })
        })
        .collect();
    let mut settings = settings(&args, &scratch);
    settings["peer_worker"] = json!(worker.display().to_string());
    let document = json!({
        "schema": "vsh.compare/1",
        "unix_time": unix_time(),
        "settings": settings,
        "workloads": workloads_json,
        "derived": derived_json,
        "table": table,
        "stages": stages,
        "targets": targets,
    });
    write_json(&args, "compare.json", &document)?;
    if results.iter().any(|(_, _, ours_side, peer_side)| ours_side.failure.is_some() || peer_side.failure.is_some()) {
        return Err("some runs failed (see above)".to_owned());
    }
    Ok(())
}

/// The workloads `args` chose, by name and description, from the engine's list.
fn choose(ours: &Path, args: &Args) -> Result<Vec<(String, String)>, String> {
    let listed = Command::new(ours).arg("list").output().map_err(|error| format!("{}: {error}", ours.display()))?;
    let catalogue: Vec<(String, String)> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(name, about)| (name.to_owned(), about.to_owned()))
        .collect();
    if let Some(only) = &args.only {
        for wanted in only {
            if !catalogue.iter().any(|(name, _)| name == wanted) {
                return Err(format!("no workload {wanted}"));
            }
        }
    }
    Ok(catalogue
        .into_iter()
        .filter(|(name, _)| args.only.as_ref().is_none_or(|only| only.iter().any(|wanted| wanted == name)))
        .collect())
}

/// How many rounds a workload runs and how many samples each takes: the
/// burst writes gigabytes per sample, so its two workloads take one sample a
/// round.
fn rounds_of(args: &Args, name: &str) -> (usize, usize) {
    let burst = name.starts_with("commit-");
    let (samples, rounds) = if burst { (args.burst_samples, args.burst_samples) } else { (args.samples, args.rounds) };
    (rounds, samples.div_ceil(rounds))
}

/// The engine binary's flags for one round of `name`.
fn round_flags(args: &Args, name: &str, scratch: &Path, round: usize) -> Vec<String> {
    let burst = name.starts_with("commit-");
    let (_, per_round) = rounds_of(args, name);
    let warmup = if burst { 1 } else { args.warmup };
    [
        ("--samples", per_round.to_string()),
        ("--warmup", warmup.to_string()),
        ("--round", round.to_string()),
        ("--scratch", scratch.display().to_string()),
        ("--burst-mib", args.burst_mib.to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_owned(), value])
    .collect()
}

/// The run's settings, for the JSON.
fn settings(args: &Args, scratch: &Path) -> Value {
    json!({
        "samples": args.samples, "rounds": args.rounds, "warmup": args.warmup,
        "burst_samples": args.burst_samples, "burst_mib": args.burst_mib,
        "scratch": scratch.display().to_string(), "quiet_wait_s": args.quiet_wait,
        "round_timeout_s": args.round_timeout,
    })
}

/// Seconds since the Unix epoch.
fn unix_time() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Write `document` to `--out`, else to `target/bench/<default_name>` at the
/// repository root.
fn write_json(args: &Args, default_name: &str, document: &Value) -> Result<(), String> {
    let out = match &args.out {
        Some(out) => out.clone(),
        None => {
            let root =
                compare_dir().parent().and_then(Path::parent).map(Path::to_path_buf).ok_or("no repository root")?;
            root.join("target/bench").join(default_name)
        }
    };
    if let Some(dir) = out.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(document).map_err(|error| error.to_string())?;
    std::fs::write(&out, text).map_err(|error| format!("{}: {error}", out.display()))?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// `--engines ours`: every chosen workload on our engine alone (what `cargo
/// xtask bench` runs), a table of p50 and p95 per stage, the derived ratios,
/// and the JSON (default `target/bench/workloads.json`).
fn ours_alone(args: &Args, ours: &Path, scratch: &Path, chosen: &[(String, String)]) -> Result<(), String> {
    let mut results: Vec<(String, String, Side)> = Vec::new();
    for (name, about) in chosen {
        let (rounds, per_round) = rounds_of(args, name);
        eprintln!("{name}: {rounds} rounds x {per_round} samples");
        let mut side = Side::default();
        for round in 0..rounds {
            run_round(ours, None, name, &round_flags(args, name, scratch, round), args, &mut side);
        }
        results.push((name.clone(), about.clone(), side));
    }
    let mut table = String::new();
    let _ = writeln!(table, "{:<21} {:<16} {:>4} {:>10} {:>10}", "workload", "stage (ms)", "n", "p50", "p95");
    for (name, _, side) in &results {
        let n = side.samples.len();
        let (p50, p95) = wall(&side.samples).unzip();
        let failed = if side.failure.is_some() { "  FAILED" } else { "" };
        let _ = writeln!(table, "{name:<21} {:<16} {n:>4} {:>10} {:>10}{failed}", "wall", ms(p50), ms(p95));
        for stage in stage_names(&side.samples) {
            let (p50, p95) = stat(&side.samples, |sample| sample["stages"][&stage].as_f64()).unzip();
            let _ = writeln!(table, "{:<21} {stage:<16} {n:>4} {:>10} {:>10}", "", ms(p50), ms(p95));
        }
        for name in
            side.metrics.iter().filter_map(|metric| metric["name"].as_str()).collect::<std::collections::BTreeSet<_>>()
        {
            if let Some(value) = metric(side, name) {
                let _ = writeln!(table, "{:<21} {name:<16} {:>4} {value:>10.1}", "", "");
            }
        }
    }
    let p50 = |wanted: &str| {
        results.iter().find(|(name, ..)| name == wanted).and_then(|(_, _, side)| wall(&side.samples)).map(|s| s.0)
    };
    let mut derived = String::new();
    let mut derived_json = serde_json::Map::new();
    for (big, small, label) in [
        ("tx-100k-files", "tx-10-files", "1-file tx on 100,000 files / on 10 files"),
        ("commit-after-burst", "commit-quiet", "commit after a 2 GiB unsynced burst / on a quiet disk"),
        ("commit-after-burst", "commit-after-memory", "commit after a 2 GiB unsynced burst / after 2 GiB to memory"),
        ("commit-after-memory", "commit-quiet", "commit after 2 GiB to memory / on a quiet disk"),
    ] {
        if let Some(value) = ratio(p50(big), p50(small)) {
            let _ = writeln!(derived, "{label}: {value:.2}x");
            derived_json.insert(format!("{big}/{small}"), json!(value));
        }
    }
    println!("\nOur engine alone, ms:\n{table}");
    if !derived.is_empty() {
        println!("Derived:\n{derived}");
    }
    let workloads_json: Vec<Value> = results
        .iter()
        .map(|(name, about, side)| json!({"name": name, "about": about, "ours": summary(side)}))
        .collect();
    let document = json!({
        "schema": "vsh.workloads/1",
        "unix_time": unix_time(),
        "settings": settings(args, scratch),
        "workloads": workloads_json,
        "derived": derived_json,
        "table": table,
    });
    write_json(args, "workloads.json", &document)?;
    if results.iter().any(|(_, _, side)| side.failure.is_some()) {
        return Err("some runs failed (see above)".to_owned());
    }
    Ok(())
}
