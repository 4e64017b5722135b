//! The comparison bench's shared half: the [`Engine`] and [`Runtime`] traits
//! the two engine binaries implement (ours over `crates/vsh`, the peer over
//! the crates.io `vsh` 0.6.0), every workload (the same program on the same
//! fixture for both, with its end state asserted), the fixture builders, the
//! statistics, and [`engine_main`], the command line both binaries share.
//!
//! Each engine is built in its own package because the two dependency graphs
//! cannot be one (the peer pins `rustix = "=1.1.4"`); the driver
//! (`vsh-compare`) runs the two binaries alternately and compares them.

pub mod engine;
pub mod fixtures;
pub mod report;
pub mod workloads;

use std::path::PathBuf;
use std::process::ExitCode;

pub use engine::{Engine, Exec, Failure, Outcome, Request, Runtime, Stages, State};
pub use report::{Emitter, Sample};
pub use workloads::{Options, Workload};

/// The usage both engine binaries print.
const USAGE: &str = "usage: ENGINE list | describe | run WORKLOAD [--samples N] [--warmup N] [--round N] \
                     [--scratch DIR] [--burst-mib N]";

/// The command line of an engine binary: `list` the workloads, `describe`
/// the engine, or `run` one workload, printing JSON lines on stdout.
pub fn engine_main<E: Engine>(engine: &E) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("list") => {
            for workload in workloads::all::<E>() {
                println!("{}\t{}", workload.name, workload.about);
            }
            ExitCode::SUCCESS
        }
        Some("describe") => {
            println!("{}", engine.describe());
            ExitCode::SUCCESS
        }
        Some("run") if args.len() >= 2 => match run(engine, &args[1], &args[2..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{} {}: {error}", engine.name(), args[1]);
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run<E: Engine>(engine: &E, name: &str, flags: &[String]) -> Result<(), Failure> {
    let mut options = Options { samples: 20, warmup: 3, scratch: std::env::temp_dir(), burst_bytes: 2048 << 20 };
    let mut round = 0;
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        let value = flags.next().ok_or_else(|| Failure::Other(format!("{flag} needs a value\n{USAGE}")))?;
        let number = || value.parse::<u64>().map_err(|_| Failure::Other(format!("{flag} {value}: not a number")));
        match flag.as_str() {
            "--samples" => options.samples = usize::try_from(number()?).unwrap_or(usize::MAX),
            "--warmup" => options.warmup = usize::try_from(number()?).unwrap_or(usize::MAX),
            "--round" => round = number()?,
            "--scratch" => options.scratch = PathBuf::from(value),
            "--burst-mib" => options.burst_bytes = number()? << 20,
            _ => return Err(Failure::Other(format!("unknown flag {flag}\n{USAGE}"))),
        }
    }
    let workloads = workloads::all::<E>();
    let workload = workloads
        .iter()
        .find(|workload| workload.name == name)
        .ok_or_else(|| Failure::Other(format!("no workload {name} (see `list`)")))?;
    std::fs::create_dir_all(&options.scratch).map_err(|error| Failure::Other(format!("scratch: {error}")))?;
    let mut out = Emitter::new(engine.name(), name, round);
    out.info(&engine.describe());
    (workload.run)(engine, &options, &mut out)
}
