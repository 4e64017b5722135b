//! Real commands in a candidate against the same commands run natively.
//!
//! - `/bin/true` through `execute_command` (namespace, FUSE mount, Landlock,
//!   seccomp, the image served) against a plain spawn of `/bin/true`: the
//!   per-command overhead (target: at most 10 ms p50 over the plain spawn);
//! - the same on a workspace of 10 and of 100,000 files: a candidate copies
//!   nothing, so its creation must not depend on the workspace's size;
//! - `cat` of 10,000 small files in the candidate against natively on the
//!   same files (target: at most 2x);
//! - a clean `cargo build` of a small crate (no dependencies, twenty
//!   modules) in the candidate, `target` a scratch directory, against
//!   natively (target: at most 2x).
//!
//! Needs root and `/dev/fuse` (it says so and exits otherwise). Run with
//! `cargo bench -p vsh-monty --bench command`; `VSH_BENCH_ITERATIONS`
//! overrides the iteration count (default 50); `VSH_BENCH_ONLY=spawn`,
//! `cat` or `cargo` runs one part.
// Benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vsh_host::CapDir;
use vsh_monty::{CommandConfig, ExecutionLimits, MontyExecutor, Uninterrupted};
use vsh_policy::CallPolicy;
use vsh_vfs::{SnapshotLimits, VirtualFs};

fn percentile(samples: &mut [Duration], fraction: f64) -> Duration {
    samples.sort_unstable();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let index = ((samples.len() as f64 * fraction) as usize).min(samples.len() - 1);
    samples[index]
}

fn report(name: &str, samples: &mut [Duration]) -> Duration {
    let p50 = percentile(samples, 0.5);
    let p95 = percentile(samples, 0.95);
    println!("{name:<52} p50 {:>9.2} ms   p95 {:>9.2} ms   (n = {})", ms(p50), ms(p95), samples.len());
    p50
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// A workspace of `files` small files, 1,000 per directory.
fn workspace(files: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a workspace");
    for index in 0..files {
        let sub = dir.path().join(format!("d{}", index / 1000));
        if index % 1000 == 0 {
            std::fs::create_dir(&sub).expect("a directory");
        }
        std::fs::write(sub.join(format!("f{index}.txt")), format!("file {index}\n")).expect("a file");
    }
    dir
}

/// Run `argv` in a candidate of `root` once; its wall time.
fn in_candidate(root: &Path, argv: &[&str]) -> Duration {
    in_candidate_with(root, argv, &CommandConfig::new(root))
}

/// Run `argv` in a candidate of `root` configured by `config` once; its wall time.
fn in_candidate_with(root: &Path, argv: &[&str], config: &CommandConfig) -> Duration {
    let cap = Arc::new(CapDir::open(root).expect("the workspace"));
    let mut vfs = VirtualFs::new(cap, vec![], SnapshotLimits::default());
    let argv: Vec<String> = argv.iter().map(|arg| (*arg).to_owned()).collect();
    let policy = CallPolicy::balanced_default(None);
    let limits = ExecutionLimits {
        max_os_calls: u64::MAX / 2,
        max_duration: Duration::from_mins(2),
        max_request_duration: Duration::from_mins(3),
        ..ExecutionLimits::default()
    };
    let started = Instant::now();
    let outcome =
        MontyExecutor::in_process().execute_command(&argv, &mut vfs, &policy, &limits, config, &Uninterrupted);
    let elapsed = started.elapsed();
    outcome.unwrap_or_else(|error| panic!("{argv:?}: {error:?}"));
    elapsed
}

fn native(root: &Path, argv: &[&str]) -> Duration {
    native_with(root, argv, &[])
}

fn native_with(root: &Path, argv: &[&str], env: &[(String, String)]) -> Duration {
    let started = Instant::now();
    let status = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(root)
        .envs(env.iter().map(|(key, value)| (key, value)))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("spawn");
    let elapsed = started.elapsed();
    assert!(status.success());
    elapsed
}

fn main() {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"));
    if !root || !Path::new("/dev/fuse").exists() {
        println!("command bench: needs root and /dev/fuse; skipped");
        return;
    }
    let iterations: usize = std::env::var("VSH_BENCH_ITERATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
    let only = std::env::var("VSH_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "spawn" {
        spawn_overhead(iterations);
    }
    if only.is_empty() || only == "cat" {
        cat(iterations);
    }
    if only.is_empty() || only == "cargo" {
        cargo_build(iterations);
    }
}

/// `/bin/true` in a candidate of 10 and of 100,000 files against a plain spawn.
fn spawn_overhead(iterations: usize) {
    let small = workspace(10);
    let large = workspace(100_000);
    let mut plain = Vec::new();
    let mut small_runs = Vec::new();
    let mut large_runs = Vec::new();
    for _ in 0..3 {
        in_candidate(small.path(), &["/bin/true"]);
    }
    for _ in 0..iterations {
        plain.push(native(small.path(), &["/bin/true"]));
        small_runs.push(in_candidate(small.path(), &["/bin/true"]));
        large_runs.push(in_candidate(large.path(), &["/bin/true"]));
    }
    let plain = report("/bin/true, plain spawn", &mut plain);
    let small = report("/bin/true in a candidate, 10 files", &mut small_runs);
    let large = report("/bin/true in a candidate, 100,000 files", &mut large_runs);
    println!(
        "overhead over a plain spawn: {:.2} ms (target <= 10 ms); 100,000 vs 10 files: {:.2}x",
        ms(small.saturating_sub(plain)),
        large.as_secs_f64() / small.as_secs_f64()
    );
}

/// `cat` of 10,000 files in a candidate against natively.
fn cat(iterations: usize) {
    let many = workspace(10_000);
    let cat = ["/bin/sh", "-c", "cat d*/*.txt > /dev/null"];
    let mut native_cat = Vec::new();
    let mut candidate_cat = Vec::new();
    for _ in 0..(iterations / 5).max(3) {
        native_cat.push(native(many.path(), &cat));
        candidate_cat.push(in_candidate(many.path(), &cat));
    }
    let native_cat = report("cat of 10,000 files, natively", &mut native_cat);
    let candidate_cat = report("cat of 10,000 files in a candidate", &mut candidate_cat);
    let mut image_only = Vec::new();
    for _ in 0..(iterations / 5).max(3) {
        image_only.push(image_work(many.path(), 10_000));
    }
    let image_only = report("the image's own work for them (no kernel, no process)", &mut image_only);
    println!(
        "cat's floor in a candidate: {:.2}x native (native plus the image's own work)",
        (native_cat + image_only).as_secs_f64() / native_cat.as_secs_f64()
    );
    println!(
        "cat of 10,000 files: {:.2}x native (target <= 2x)",
        candidate_cat.as_secs_f64() / native_cat.as_secs_f64()
    );
}

/// What serving `cat` of the `files` files of [`workspace`] costs the image
/// alone, without a kernel round trip or a process: each file's metadata
/// read (the lookup) and its content read (the first read), the host's
/// `fstatat`, `open`, `read` and the content's hash, in a fresh image as
/// each candidate's is. The part of a candidate's `cat` no protocol can
/// remove while every content read is recorded by its digest.
fn image_work(root: &Path, files: usize) -> Duration {
    let cap = Arc::new(CapDir::open(root).expect("the workspace"));
    let mut vfs = VirtualFs::new(cap, vec![], SnapshotLimits::default());
    let started = Instant::now();
    for index in 0..files {
        let path = vsh_types::VPath::parse(&format!("d{}/f{index}.txt", index / 1000)).expect("a path");
        vfs.metadata(&path).expect("a file");
        std::hint::black_box(vfs.read(&path).expect("its content"));
    }
    started.elapsed()
}

/// The toolchain's directory (`rustc --print sysroot`).
fn sysroot() -> std::path::PathBuf {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(rustc).args(["--print", "sysroot"]).output().expect("rustc runs");
    std::path::PathBuf::from(String::from_utf8(out.stdout).expect("a path").trim())
}

/// A crate of twenty modules with a few functions each, no dependencies.
fn small_crate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a crate");
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"small\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("a manifest");
    std::fs::create_dir(dir.path().join("src")).expect("src");
    let mut lib = String::new();
    for module in 0..20 {
        writeln!(lib, "pub mod m{module};").expect("a string");
        let mut text = String::new();
        for function in 0..20 {
            writeln!(
                text,
                "pub fn f{function}(values: &[u64]) -> u64 {{\n    values.iter().map(|v| v.wrapping_mul({function} + {module})).fold(0, |a, b| a ^ b.rotate_left({function}))\n}}"
            )
            .expect("a string");
        }
        std::fs::write(dir.path().join(format!("src/m{module}.rs")), text).expect("a module");
    }
    std::fs::write(dir.path().join("src/lib.rs"), lib).expect("lib.rs");
    dir
}

/// Empty `dir` (a target directory), keeping it.
fn empty(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("a directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) }.expect("removed");
    }
}

/// A clean `cargo build` of a small crate in a candidate against natively.
fn cargo_build(iterations: usize) {
    let sysroot = sysroot();
    let path = format!("{}/bin:/usr/bin:/bin", sysroot.display());
    let krate = small_crate();
    let native_target = tempfile::tempdir().expect("a target");
    let scratch = tempfile::tempdir().expect("a scratch target");
    // The command's user writes it (as the store makes its scratch directories).
    std::fs::set_permissions(scratch.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("mode");
    let argv = ["cargo", "build", "--offline", "-q"];
    let native_env = [
        ("PATH".to_owned(), path.clone()),
        ("CARGO_TARGET_DIR".to_owned(), native_target.path().display().to_string()),
    ];
    let config = || {
        let mut config = CommandConfig::new(krate.path());
        config.tools.push(sysroot.clone());
        config.scratch.push(("target".to_owned(), scratch.path().to_owned()));
        config.env.retain(|(key, _)| key != "PATH");
        config.env.push(("PATH".to_owned(), path.clone()));
        config
    };
    let mut native_builds = Vec::new();
    let mut candidate_builds = Vec::new();
    for round in 0..=(iterations / 5).max(3) {
        empty(native_target.path());
        empty(scratch.path());
        let native = native_with(krate.path(), &argv, &native_env);
        let candidate = in_candidate_with(krate.path(), &argv, &config());
        // The first round warms the page cache with the toolchain.
        if round > 0 {
            native_builds.push(native);
            candidate_builds.push(candidate);
        }
    }
    let native = report("clean cargo build of a small crate, natively", &mut native_builds);
    let candidate = report("clean cargo build of a small crate in a candidate", &mut candidate_builds);
    println!("cargo build: {:.2}x native (target <= 2x)", candidate.as_secs_f64() / native.as_secs_f64());
}
