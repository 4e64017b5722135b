//! Every workload of the comparison: its fixture, its program (one text for
//! both engines, in the Python subset both run), how it is driven (preview,
//! auto, approve, commit), what is timed, and the end state asserted on disk
//! after each sample, so that neither engine can skip work.

use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::engine::{Engine, Exec, Failure, Outcome, Request, Runtime, Stages, State};
use crate::fixtures::{self, Scratch};
use crate::report::{Emitter, Sample};

/// How many samples a run takes, and where its fixtures go.
#[derive(Debug, Clone)]
pub struct Options {
    /// Timed samples.
    pub samples: usize,
    /// Untimed samples first (warm caches, a started worker).
    pub warmup: usize,
    /// Where scratch workspaces are made (one filesystem for everything).
    pub scratch: std::path::PathBuf,
    /// The unsynced burst's size, in bytes.
    pub burst_bytes: u64,
}

/// One workload: its name, what it does, and its runner.
pub struct Workload<E: Engine> {
    /// The name the command lines use.
    pub name: &'static str,
    /// One line on what it does and what is timed.
    pub about: &'static str,
    /// Run it: emit one sample per timed iteration (and any metrics).
    pub run: fn(&E, &Options, &mut Emitter) -> Result<(), Failure>,
}

/// Every workload, in the order the driver runs them.
pub fn all<E: Engine>() -> Vec<Workload<E>> {
    vec![
        Workload {
            name: "tiny-preview-inproc",
            about: "read in.txt, write OUT.txt upper-cased, print: one preview (in process), timed alone",
            run: |e, o, out| tiny_preview(e, o, out, Exec::InProcess),
        },
        Workload {
            name: "tiny-preview",
            about: "the same preview in the confined worker (production mode)",
            run: |e, o, out| tiny_preview(e, o, out, Exec::Worker),
        },
        Workload {
            name: "tiny-auto",
            about: "append one byte to log.txt in auto mode (commit at once)",
            run: tiny_auto,
        },
        Workload {
            name: "read-transform",
            about: "read 100 x 4 KiB files, write each upper-cased into out/: auto mode, approve if pending, until committed",
            run: read_transform,
        },
        Workload {
            name: "glob-10k",
            about: "vsh_glob('**/*7.txt') over 100 dirs x 100 files (1,000 matches): one preview",
            run: glob_10k,
        },
        Workload {
            name: "patch-1k",
            about: "vsh_patch one line in each of 1,000 files: preview, approve if pending, commit",
            run: patch_1k,
        },
        Workload {
            name: "remove-5050",
            about: "unlink 50 dirs x 100 files and rmdir the 50 dirs (of 100): preview, approve if pending, commit",
            run: remove_5050,
        },
        Workload {
            name: "threads-separate",
            about: "4 threads of tiny autos, each on its own workspace and runtime: per-transaction latency, tx/s",
            run: |e, o, out| threads(e, o, out, false),
        },
        Workload {
            name: "threads-shared",
            about: "4 threads of tiny autos on one workspace and one runtime, each its own file: latency, tx/s, stale retries",
            run: |e, o, out| threads(e, o, out, true),
        },
        Workload {
            name: "cold-open",
            about: "open a runtime on a fresh 20-file workspace and run the tiny preview (worker)",
            run: cold_open,
        },
        Workload {
            name: "tx-10-files",
            about: "a 1-file auto transaction (the tiny auto) in a workspace of 10 files",
            run: |e, o, out| tx_on(e, o, out, false),
        },
        Workload {
            name: "tx-100k-files",
            about: "the same 1-file auto transaction in a workspace of 100,010 files",
            run: |e, o, out| tx_on(e, o, out, true),
        },
        Workload {
            name: "commit-quiet",
            about: "commit a previewed 1-file change (only the commit call is timed) on a quiet disk (synced first)",
            run: |e, o, out| commit_after(e, o, out, Before::Nothing),
        },
        Workload {
            name: "commit-after-memory",
            about: "the same commit right after writing 2 GiB to memory, not to a file (the burst's time and cache \
                    pollution on a quiet disk: the control for commit-after-burst)",
            run: |e, o, out| commit_after(e, o, out, Before::MemoryBurst),
        },
        Workload {
            name: "commit-after-burst",
            about: "the same commit right after writing 2 GiB of unsynced data beside the workspace (synced before the burst)",
            run: |e, o, out| commit_after(e, o, out, Before::FileBurst),
        },
    ]
}

/// The tiny preview: reads a file, writes one, prints.
pub const TINY: &str = "from pathlib import Path\n\
text = Path('/workspace/in.txt').read_text()\n\
Path('/workspace/OUT.txt').write_text(text.upper())\n\
print(len(text))\n\
text[:5]\n";

/// The tiny auto: `{file}` grows by one byte.
pub const TINY_AUTO: &str = "from pathlib import Path\n\
p = Path('/workspace/{file}')\n\
p.write_text(p.read_text() + 'x')\n";

/// Read 100 files, write each transformed into a new directory.
pub const READ_TRANSFORM: &str = "from pathlib import Path\n\
Path('/workspace/out').mkdir()\n\
total = 0\n\
for i in range(100):\n    \
    name = str(1000 + i)[1:] + '.txt'\n    \
    text = Path('/workspace/src/f' + name).read_text()\n    \
    Path('/workspace/out/f' + name).write_text(text.upper())\n    \
    total += len(text)\n\
print(total)\n";

/// A glob over the whole tree.
pub const GLOB: &str = "found = vsh_glob('**/*7.txt', max_results=5000)\nprint(len(found))\n";

/// Patch one line of 1,000 files from `version = {a}` to `version = {b}`.
pub const PATCH: &str = "n = 0\n\
for i in range(1000):\n    \
    n += vsh_patch('/workspace/p/f' + str(10000 + i)[1:] + '.txt', 'version = {a}\\n', 'version = {b}\\n')\n\
print(n)\n";

/// Remove 50 directories of 100 files each, file by file.
pub const REMOVE: &str = "from pathlib import Path\n\
for d in range(50):\n    \
    dn = '/workspace/r/d' + str(1000 + d)[1:]\n    \
    for f in range(100):\n        \
        Path(dn + '/f' + str(1000 + f)[1:] + '.txt').unlink()\n    \
    Path(dn).rmdir()\n\
print('removed')\n";

fn other(message: impl Into<String>) -> Failure {
    Failure::Other(message.into())
}

fn io(error: std::io::Error) -> Failure {
    Failure::Other(format!("fixture: {error}"))
}

/// Untimed setup's end: what the fixture wrote is on disk before anything
/// is timed, so no engine pays for the fixture's writeback.
fn settled() -> Result<(), Failure> {
    fixtures::settle_disk().map_err(io)
}

fn ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A request intent no other request of this process uses.
fn intent(workload: &str, engine: &str, index: usize) -> String {
    format!("compare {workload} {engine} {} {index}", std::process::id())
}

/// Fail unless `actual == expected`.
fn check<T: std::fmt::Debug + PartialEq>(what: &str, actual: &T, expected: &T) -> Result<(), Failure> {
    if actual == expected { Ok(()) } else { Err(other(format!("{what}: expected {expected:?}, got {actual:?}"))) }
}

/// The engine stages of a run's receipt (without `total`, which a flow
/// replaces by its own wall time).
fn run_stages(stages: Option<Stages>, into: &mut Vec<(String, u64)>) {
    if let Some(stages) = stages {
        for (name, value) in stages.named() {
            if name != "total" && (name != "commit" || value > 0) {
                into.push((name.to_owned(), value));
            }
        }
        into.push(("engine_total".to_owned(), stages.total));
    }
}

/// Run `code` (as a preview, or in auto mode) and carry it until committed,
/// as an operator would: commit an auto-approved preview; approve a pending
/// transaction, then commit it. Everything is in the sample's wall time;
/// `run`, `approve` and `commit_call` are the calls' own wall times, the
/// others the engine's stages.
fn until_committed<R: Runtime>(runtime: &R, request: &Request<'_>) -> Result<(Outcome<R::Tx>, Sample), Failure> {
    let auto = request.auto;
    let started = Instant::now();
    let first = runtime.run(request)?;
    let mut sample = Sample::default();
    sample.stages.push(("run".to_owned(), ns(started.elapsed())));
    run_stages(first.stages, &mut sample.stages);
    let path = match first.state {
        State::Committed => "auto",
        State::AutoApproved => {
            let at = Instant::now();
            let committed = runtime.commit(first.tx)?;
            check("commit state", &committed.state, &State::Committed)?;
            sample.stages.push(("commit_call".to_owned(), ns(at.elapsed())));
            if let Some(stages) = committed.stages {
                sample.stages.push(("commit".to_owned(), stages.commit));
            }
            "preview+commit"
        }
        State::PendingApproval => {
            let at = Instant::now();
            runtime.approve(first.tx)?;
            sample.stages.push(("approve".to_owned(), ns(at.elapsed())));
            let at = Instant::now();
            let committed = runtime.commit(first.tx)?;
            check("commit state", &committed.state, &State::Committed)?;
            sample.stages.push(("commit_call".to_owned(), ns(at.elapsed())));
            if let Some(stages) = committed.stages {
                sample.stages.push(("commit".to_owned(), stages.commit));
            }
            if auto { "auto+approve+commit" } else { "preview+approve+commit" }
        }
        state => return Err(other(format!("unexpected state {state} after the run"))),
    };
    sample.wall_ns = ns(started.elapsed());
    sample.path = Some(path);
    Ok((first, sample))
}

/// Run `body(index)` for the warm-up and the timed samples, emitting the
/// timed ones.
fn repeat(
    options: &Options,
    out: &mut Emitter,
    mut body: impl FnMut(usize) -> Result<Sample, Failure>,
) -> Result<(), Failure> {
    for index in 0..options.warmup + options.samples {
        let sample = body(index)?;
        if index >= options.warmup {
            out.sample(&sample);
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|error| other(format!("{}: {error}", path.display())))
}

fn tiny_preview<E: Engine>(engine: &E, options: &Options, out: &mut Emitter, exec: Exec) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "tiny-preview").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::tiny(&ws, 0).map_err(io)?;
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), exec)?;
    repeat(options, out, |index| {
        let intent = intent(&workload, engine.name(), index);
        let started = Instant::now();
        let receipt = runtime.run(&Request::new(TINY, &intent, false))?;
        let wall = ns(started.elapsed());
        check("state", &receipt.state, &State::AutoApproved)?;
        check("changed paths", &receipt.changed_paths, &1)?;
        check("stdout", &receipt.stdout.as_str(), &"12\n")?;
        runtime.discard(receipt.tx)?;
        check("nothing written", &ws.join("OUT.txt").exists(), &false)?;
        let mut sample = Sample { wall_ns: wall, path: Some("preview"), ..Sample::default() };
        run_stages(receipt.stages, &mut sample.stages);
        Ok(sample)
    })
}

fn tiny_auto<E: Engine>(engine: &E, options: &Options, out: &mut Emitter) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "tiny-auto").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::tiny(&ws, 0).map_err(io)?;
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
    let code = TINY_AUTO.replace("{file}", "log.txt");
    repeat(options, out, |index| {
        let intent = intent(&workload, engine.name(), index);
        let started = Instant::now();
        let receipt = runtime.run(&Request::new(&code, &intent, true))?;
        let wall = ns(started.elapsed());
        check("state", &receipt.state, &State::Committed)?;
        check("log.txt", &read(&ws.join("log.txt"))?.len(), &(index + 1))?;
        let mut sample = Sample { wall_ns: wall, path: Some("auto"), ..Sample::default() };
        run_stages(receipt.stages, &mut sample.stages);
        Ok(sample)
    })
}

fn read_transform<E: Engine>(engine: &E, options: &Options, out: &mut Emitter) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "read-transform").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::read_transform(&ws).map_err(io)?;
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
    let expected = fixtures::text_4k(42).to_ascii_uppercase();
    repeat(options, out, |index| {
        // Untimed: the previous sample's output goes, so each sample creates it anew.
        let output = ws.join("out");
        if output.exists() {
            std::fs::remove_dir_all(&output).map_err(io)?;
            settled()?;
        }
        let intent = intent(&workload, engine.name(), index);
        let (first, sample) = until_committed(&runtime, &Request::new(READ_TRANSFORM, &intent, true))?;
        check("changed paths", &first.changed_paths, &101)?;
        check("stdout", &first.stdout.as_str(), &"409600\n")?;
        check("out/f042.txt", &read(&output.join("f042.txt"))?, &expected)?;
        Ok(sample)
    })
}

fn glob_10k<E: Engine>(engine: &E, options: &Options, out: &mut Emitter) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "glob").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::tree(&ws, "g", 0..100, 100).map_err(io)?;
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
    repeat(options, out, |index| {
        let intent = intent(&workload, engine.name(), index);
        let started = Instant::now();
        let receipt = runtime.run(&Request::new(GLOB, &intent, false))?;
        let wall = ns(started.elapsed());
        check("state", &receipt.state, &State::AutoApproved)?;
        check("changed paths", &receipt.changed_paths, &0)?;
        check("stdout", &receipt.stdout.as_str(), &"1000\n")?;
        runtime.discard(receipt.tx)?;
        let mut sample = Sample { wall_ns: wall, path: Some("preview"), ..Sample::default() };
        run_stages(receipt.stages, &mut sample.stages);
        Ok(sample)
    })
}

fn patch_1k<E: Engine>(engine: &E, options: &Options, out: &mut Emitter) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "patch").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::patch(&ws).map_err(io)?;
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
    repeat(options, out, |index| {
        // Sample `index` moves every file from version `index` to `index + 1`.
        let code = PATCH.replace("{a}", &index.to_string()).replace("{b}", &(index + 1).to_string());
        let intent = intent(&workload, engine.name(), index);
        // The peer's worker is killed at its wall deadline (guest budget +
        // 1 s), which 1,000 patches pass with the default 1 s budget: both
        // engines get a 60 s budget here.
        let request = Request { max_duration: Some(Duration::from_secs(60)), ..Request::new(&code, &intent, false) };
        let (first, sample) = until_committed(&runtime, &request)?;
        check("changed paths", &first.changed_paths, &1000)?;
        check("stdout", &first.stdout.as_str(), &"1000\n")?;
        let after = String::from_utf8_lossy(&read(&ws.join("p/f0500.txt"))?).into_owned();
        check("p/f0500.txt", &after, &fixtures::patch_text(500, index + 1))?;
        Ok(sample)
    })
}

fn remove_5050<E: Engine>(engine: &E, options: &Options, out: &mut Emitter) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "remove").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::tree(&ws, "r", 0..100, 100).map_err(io)?;
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
    repeat(options, out, |index| {
        // Untimed: put back what the previous sample removed.
        if index > 0 {
            fixtures::tree(&ws, "r", 0..50, 100).map_err(io)?;
            settled()?;
        }
        let intent = intent(&workload, engine.name(), index);
        let (first, sample) = until_committed(&runtime, &Request::new(REMOVE, &intent, false))?;
        check("changed paths", &first.changed_paths, &5050)?;
        check("stdout", &first.stdout.as_str(), &"removed\n")?;
        check("r/d000 removed", &ws.join("r/d000").exists(), &false)?;
        check("r/d049 removed", &ws.join("r/d049").exists(), &false)?;
        check("r/d050/f099.txt kept", &ws.join("r/d050/f099.txt").exists(), &true)?;
        Ok(sample)
    })
}

/// Run the tiny auto on `file` until it commits, retrying stale attempts
/// (each a new transaction); returns the sample and the number of retries.
fn auto_retrying<R: Runtime>(runtime: &R, code: &str, intent: &str) -> Result<(Sample, u64), Failure> {
    let started = Instant::now();
    let mut retries = 0;
    loop {
        match runtime.run(&Request::new(code, &format!("{intent} try {retries}"), true)) {
            Ok(receipt) => {
                check("state", &receipt.state, &State::Committed)?;
                let mut sample = Sample { wall_ns: ns(started.elapsed()), path: Some("auto"), ..Sample::default() };
                run_stages(receipt.stages, &mut sample.stages);
                return Ok((sample, retries));
            }
            Err(Failure::Stale(_)) if retries < 1000 => retries += 1,
            Err(error) => return Err(error),
        }
    }
}

const THREADS: usize = 4;

fn threads<E: Engine>(engine: &E, options: &Options, out: &mut Emitter, shared: bool) -> Result<(), Failure> {
    let label = if shared { "threads-shared" } else { "threads-separate" };
    let workload = out.workload().to_owned();
    let barrier = Barrier::new(THREADS);
    // One thread's transactions: warm up, meet the others, then the timed run.
    let drive = |runtime: &E::Runtime, ws: &Path, file: &str, thread: usize| {
        let code = TINY_AUTO.replace("{file}", file);
        let mut samples = Vec::new();
        let mut retries = 0;
        for index in 0..options.warmup {
            retries += auto_retrying(runtime, &code, &intent(&workload, engine.name(), thread * 1_000_000 + index))?.1;
        }
        barrier.wait();
        let started = Instant::now();
        for index in options.warmup..options.warmup + options.samples {
            let (sample, stale) =
                auto_retrying(runtime, &code, &intent(&workload, engine.name(), thread * 1_000_000 + index))?;
            samples.push(sample);
            retries += stale;
        }
        let elapsed = started.elapsed();
        check(file, &read(&ws.join(file))?.len(), &(options.warmup + options.samples))?;
        Ok::<_, Failure>((samples, retries, elapsed))
    };
    let results: Vec<Result<_, Failure>> = if shared {
        let scratch = Scratch::new(&options.scratch, label).map_err(io)?;
        let ws = scratch.workspace();
        fixtures::tiny(&ws, 0).map_err(io)?;
        for thread in 0..THREADS {
            fixtures::put(&ws, &format!("t{thread}.txt"), b"").map_err(io)?;
        }
        settled()?;
        let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let (runtime, ws, drive) = (&runtime, &ws, &drive);
                    scope.spawn(move || drive(runtime, ws, &format!("t{thread}.txt"), thread))
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().expect("a bench thread panicked")).collect()
        })
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let drive = &drive;
                    scope.spawn(move || {
                        let scratch = Scratch::new(&options.scratch, label).map_err(io)?;
                        let ws = scratch.workspace();
                        fixtures::tiny(&ws, 0).map_err(io)?;
                        settled()?;
                        let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
                        drive(&runtime, &ws, "log.txt", thread)
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().expect("a bench thread panicked")).collect()
        })
    };
    let mut longest = Duration::ZERO;
    let mut retries = 0;
    let mut count = 0;
    for result in results {
        let (samples, stale, elapsed) = result?;
        for sample in &samples {
            out.sample(sample);
        }
        count += samples.len();
        retries += stale;
        longest = longest.max(elapsed);
    }
    #[allow(clippy::cast_precision_loss)]
    let throughput = count as f64 / longest.as_secs_f64();
    out.metric("tx_per_s", throughput, "median");
    #[allow(clippy::cast_precision_loss)]
    out.metric("stale_retries", retries as f64, "sum");
    Ok(())
}

fn cold_open<E: Engine>(engine: &E, options: &Options, out: &mut Emitter) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    repeat(options, out, |index| {
        let scratch = Scratch::new(&options.scratch, "cold").map_err(io)?;
        let ws = scratch.workspace();
        fixtures::tiny(&ws, 18).map_err(io)?;
        settled()?;
        let intent = intent(&workload, engine.name(), index);
        let started = Instant::now();
        let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
        let opened = started.elapsed();
        let receipt = runtime.run(&Request::new(TINY, &intent, false))?;
        let wall = started.elapsed();
        check("state", &receipt.state, &State::AutoApproved)?;
        check("stdout", &receipt.stdout.as_str(), &"12\n")?;
        runtime.discard(receipt.tx)?;
        drop(runtime);
        let mut sample = Sample { wall_ns: ns(wall), path: Some("open+preview"), ..Sample::default() };
        sample.stages.push(("open".to_owned(), ns(opened)));
        sample.stages.push(("first_run".to_owned(), ns(wall - opened)));
        run_stages(receipt.stages, &mut sample.stages);
        Ok(sample)
    })
}

fn tx_on<E: Engine>(engine: &E, options: &Options, out: &mut Emitter, big: bool) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "tx-on").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::tiny(&ws, 8).map_err(io)?;
    if big {
        fixtures::tree(&ws, "big", 0..100, 1000).map_err(io)?;
    }
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
    let code = TINY_AUTO.replace("{file}", "log.txt");
    repeat(options, out, |index| {
        let intent = intent(&workload, engine.name(), index);
        let started = Instant::now();
        let receipt = runtime.run(&Request::new(&code, &intent, true))?;
        let wall = ns(started.elapsed());
        check("state", &receipt.state, &State::Committed)?;
        check("log.txt", &read(&ws.join("log.txt"))?.len(), &(index + 1))?;
        let mut sample = Sample { wall_ns: wall, path: Some("auto"), ..Sample::default() };
        run_stages(receipt.stages, &mut sample.stages);
        Ok(sample)
    })
}

/// What comes between a commit workload's preview and its timed commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Before {
    /// Nothing: the commit follows the preview at once.
    Nothing,
    /// `burst_bytes` written to memory and kept until the commit returned.
    MemoryBurst,
    /// `burst_bytes` written to a file beside the workspace, never synced.
    FileBurst,
}

fn commit_after<E: Engine>(engine: &E, options: &Options, out: &mut Emitter, before: Before) -> Result<(), Failure> {
    let workload = out.workload().to_owned();
    let scratch = Scratch::new(&options.scratch, "commit-after").map_err(io)?;
    let ws = scratch.workspace();
    fixtures::tiny(&ws, 8).map_err(io)?;
    settled()?;
    let runtime = engine.open(&ws, &scratch.data(), Exec::Worker)?;
    let code = TINY_AUTO.replace("{file}", "log.txt");
    let sibling = scratch.root().join("burst");
    repeat(options, out, |index| {
        // Untimed: a quiet disk to start from (the previous workload's
        // fixture removal, the previous sample's burst, all written back).
        // Nothing is synced between the burst and the commit.
        settled()?;
        let intent = intent(&workload, engine.name(), index);
        let preview = runtime.run(&Request::new(&code, &intent, false))?;
        check("state", &preview.state, &State::AutoApproved)?;
        let mut sample = Sample::default();
        let at = Instant::now();
        let memory = match before {
            Before::Nothing => None,
            Before::MemoryBurst => Some(fixtures::memory_burst(options.burst_bytes)),
            Before::FileBurst => {
                fixtures::unsynced_burst(&sibling, options.burst_bytes).map_err(io)?;
                None
            }
        };
        if before != Before::Nothing {
            sample.stages.push(("burst_write_untimed".to_owned(), ns(at.elapsed())));
        }
        let started = Instant::now();
        let committed = runtime.commit(preview.tx)?;
        sample.wall_ns = ns(started.elapsed());
        drop(memory);
        check("state", &committed.state, &State::Committed)?;
        if let Some(stages) = committed.stages {
            sample.stages.push(("commit".to_owned(), stages.commit));
        }
        sample.path = Some("preview+commit (commit timed)");
        check("log.txt", &read(&ws.join("log.txt"))?.len(), &(index + 1))?;
        if before == Before::FileBurst {
            // Untimed: unlinking the burst drops its dirty pages for the next sample.
            std::fs::remove_file(sibling.join("burst.bin")).map_err(io)?;
        }
        Ok(sample)
    })
}
