//! `cargo xtask fuzz [--seconds N]`: run every cargo-fuzz target in `fuzz/` for a fixed time.
//!
//! Each target `fuzz/fuzz_targets/<target>.rs` runs as
//! `cargo +nightly fuzz run <target> <scratch> fuzz/corpus/<target> -- -max_total_time=N`.
//! libFuzzer writes new corpus entries into the *first* corpus directory, so a scratch
//! directory under the system temp dir goes first and the committed seeds second: the
//! checkout is never modified. Crash reproducers go to `fuzz/artifacts/<target>/` (ignored by git).
//!
//! cargo-fuzz needs a nightly toolchain for its `-Z` sanitizer flags. With only a stable
//! toolchain, `RUSTC_BOOTSTRAP=1 cargo fuzz run <target>` may work, but it is not what this
//! task runs and not supported here.

use std::path::Path;

use crate::shell::Step;
use crate::{Error, Result, project_root};

const DEFAULT_SECONDS: u64 = 60;

/// Parse `--seconds N`, check the tools, then fuzz each target in turn.
pub(crate) fn run(args: &[String]) -> Result {
    let seconds = parse_seconds(args)?;
    check_tools()?;
    let fuzz_dir = project_root().join("fuzz");
    let targets = list_targets(&fuzz_dir.join("fuzz_targets"))?;
    if targets.is_empty() {
        return Err(Error::new("no fuzz targets found in fuzz/fuzz_targets"));
    }
    for target in &targets {
        let scratch = std::env::temp_dir().join("vsh-fuzz").join(format!("{target}-{}", std::process::id()));
        std::fs::create_dir_all(&scratch)
            .map_err(|error| Error::new(format!("cannot create scratch corpus {}: {error}", scratch.display())))?;
        let seeds = fuzz_dir.join("corpus").join(target);
        let scratch_arg = scratch.to_string_lossy().into_owned();
        let seeds_arg = seeds.to_string_lossy().into_owned();
        let max_time = format!("-max_total_time={seconds}");
        let mut args = vec!["+nightly", "fuzz", "run", target.as_str(), scratch_arg.as_str()];
        if seeds.is_dir() {
            args.push(&seeds_arg);
        }
        args.extend(["--", max_time.as_str()]);
        Step::program(format!("fuzz {target}"), "cargo", &args).current_dir(&fuzz_dir).run()?;
        eprintln!("new corpus entries for `{target}` (copy the useful ones into {seeds_arg}): {scratch_arg}");
    }
    Ok(())
}

fn parse_seconds(args: &[String]) -> Result<u64> {
    match args {
        [] => Ok(DEFAULT_SECONDS),
        [flag, value] if flag == "--seconds" => value
            .parse()
            .ok()
            .filter(|seconds| *seconds > 0)
            .ok_or_else(|| Error::new(format!("--seconds takes a positive whole number, got `{value}`"))),
        _ => Err(Error::new(format!("usage: cargo xtask fuzz [--seconds N], got `{}`", args.join(" ")))),
    }
}

/// Fail with install instructions unless both a nightly toolchain and cargo-fuzz are available.
fn check_tools() -> Result {
    if !Step::program("probe nightly", "cargo", &["+nightly", "--version"]).succeeds_quietly() {
        return Err(Error::new(
            "fuzzing needs a nightly toolchain through rustup: install it with `rustup toolchain install nightly`",
        ));
    }
    if !Step::program("probe cargo-fuzz", "cargo", &["+nightly", "fuzz", "--version"]).succeeds_quietly() {
        return Err(Error::new("fuzzing needs cargo-fuzz: install it with `cargo install cargo-fuzz`"));
    }
    Ok(())
}

/// The stems of `dir/*.rs`, sorted.
fn list_targets(dir: &Path) -> Result<Vec<String>> {
    let entries =
        std::fs::read_dir(dir).map_err(|error| Error::new(format!("cannot list {}: {error}", dir.display())))?;
    let mut targets = Vec::new();
    for entry in entries {
        let path = entry.map_err(|error| Error::new(format!("cannot list {}: {error}", dir.display())))?.path();
        if path.extension().is_some_and(|ext| ext == "rs")
            && let Some(stem) = path.file_stem()
        {
            targets.push(stem.to_string_lossy().into_owned());
        }
    }
    targets.sort();
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn seconds_default_and_flag() {
        assert_eq!(parse_seconds(&[]).unwrap(), DEFAULT_SECONDS);
        assert_eq!(parse_seconds(&strings(&["--seconds", "5"])).unwrap(), 5);
        assert!(parse_seconds(&strings(&["--seconds", "0"])).is_err());
        assert!(parse_seconds(&strings(&["--seconds", "x"])).is_err());
        assert!(parse_seconds(&strings(&["--seconds"])).is_err());
        assert!(parse_seconds(&strings(&["--minutes", "5"])).is_err());
    }

    #[test]
    fn every_target_has_a_seed_corpus() {
        let fuzz_dir = project_root().join("fuzz");
        let targets = list_targets(&fuzz_dir.join("fuzz_targets")).unwrap();
        assert!(!targets.is_empty(), "fuzz/fuzz_targets has no targets");
        let missing: Vec<&String> =
            targets.iter().filter(|target| !fuzz_dir.join("corpus").join(target).is_dir()).collect();
        assert!(missing.is_empty(), "fuzz targets without a seed corpus in fuzz/corpus/: {missing:?}");
    }
}
