//! `cargo xtask mutants [--package P]... [--shard K/N] [--file PATH]... [--iterate] [--jobs N] [--nextest]`: mutation testing with
//! cargo-mutants over the crates whose tests guard data and authority.
//!
//! Each crate is run on its own (`cargo mutants --package P`), so a mutant counts as caught only
//! when that crate's own tests catch it; the results go to `target/mutants/<package>/mutants.out`
//! (`caught.txt`, `missed.txt`, `timeout.txt`, `unviable.txt`). `docs/testing.md` records the
//! counts and a test or a reason for every missed mutant.
//!
//! cargo-mutants is installed with cargo, pinned to [`VERSION`], when it is missing or another
//! version. A full run is long (some 2,500 mutants); `--shard K/N` runs the K-th of N slices, so a
//! run can be split across sessions or machines, and `--iterate` re-tests only what the previous
//! run of a crate did not catch, and `--jobs N` builds and tests N mutants at once (each in its own
//! copy of the tree; the sandbox and race tests are timing-tolerant enough for 2 on 2 cores). Not
//! part of `cargo xtask ci`. `--nextest` runs each mutant's tests with cargo-nextest (installed
//! pinned to [`NEXTEST_VERSION`]), every test binary at once, stopping at the first failure.

use crate::shell::Step;
use crate::{Error, Result, project_root};

/// The cargo-mutants release this task is written against.
const VERSION: &str = "27.1.0";

/// The cargo-nextest release `--nextest` installs when another is there.
const NEXTEST_VERSION: &str = "0.9.143";

/// The crates mutated by default.
const PACKAGES: [&str; 4] = ["vsh-commit", "vsh-store", "vsh-policy", "vsh-host"];

#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    packages: Vec<String>,
    shard: Option<String>,
    files: Vec<String>,
    iterate: bool,
    /// Mutants built and tested at once (cargo-mutants' `--jobs`); 1 when not given.
    jobs: Option<u8>,
    /// Run each mutant's tests with cargo-nextest (all test binaries at once).
    nextest: bool,
}

pub(crate) fn run(args: &[String]) -> Result {
    let options = parse(args)?;
    ensure_installed("cargo-mutants", "mutants", VERSION)?;
    if options.nextest {
        ensure_installed("cargo-nextest", "nextest", NEXTEST_VERSION)?;
    }
    let packages: Vec<String> = if options.packages.is_empty() {
        PACKAGES.iter().map(|package| (*package).to_owned()).collect()
    } else {
        options.packages.clone()
    };
    for package in &packages {
        let output = project_root().join("target").join("mutants").join(package);
        std::fs::create_dir_all(&output)
            .map_err(|error| Error::new(format!("cannot create {}: {error}", output.display())))?;
        let output = output.to_string_lossy().into_owned();
        let jobs = options.jobs.unwrap_or(1).to_string();
        let mut args = vec![
            "mutants",
            "--package",
            package.as_str(),
            "--output",
            output.as_str(),
            "--no-shuffle",
            "--jobs",
            jobs.as_str(),
            "--timeout-multiplier",
            "3",
        ];
        if let Some(shard) = &options.shard {
            args.extend(["--shard", shard.as_str()]);
        }
        for file in &options.files {
            args.extend(["--file", file.as_str()]);
        }
        if options.iterate {
            args.push("--iterate");
        }
        if options.nextest {
            args.extend(["--test-tool", "nextest"]);
        }
        // cargo-mutants exits non-zero when a mutant survives: that is a result, not a failure
        // of this task, and the summary it prints says so.
        let step = Step::cargo(format!("mutants {package}"), &args).env("VSH_REQUIRE_SANDBOX", "1");
        if let Err(error) = step.run() {
            eprintln!("{error} (missed mutants are listed in {output}/mutants.out/missed.txt)");
        }
    }
    Ok(())
}

fn parse(args: &[String]) -> Result<Options> {
    let mut options = Options::default();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let mut value = || {
            iter.next().cloned().ok_or_else(|| Error::new(format!("`{flag}` needs a value; see `cargo xtask help`")))
        };
        match flag.as_str() {
            "--package" | "-p" => options.packages.push(value()?),
            "--shard" => {
                let shard = value()?;
                let valid = shard.split_once('/').is_some_and(|(k, n)| {
                    k.parse::<u32>().ok().zip(n.parse::<u32>().ok()).is_some_and(|(k, n)| n > 0 && k < n)
                });
                if !valid {
                    return Err(Error::new(format!("--shard takes K/N with K < N, got `{shard}`")));
                }
                options.shard = Some(shard);
            }
            "--file" | "-f" => options.files.push(value()?),
            "--iterate" => options.iterate = true,
            "--nextest" => options.nextest = true,
            "--jobs" | "-j" => {
                let jobs = value()?;
                match jobs.parse::<u8>() {
                    Ok(count @ 1..=8) => options.jobs = Some(count),
                    _ => return Err(Error::new(format!("--jobs takes a count from 1 to 8, got `{jobs}`"))),
                }
            }
            other => return Err(Error::new(format!("unknown option `{other}` for `cargo xtask mutants`"))),
        }
    }
    Ok(options)
}

/// Install `krate` at `version` unless `cargo <subcommand> --version` already reports it.
fn ensure_installed(krate: &str, subcommand: &str, version: &str) -> Result {
    let installed = std::process::Command::new(crate::shell::cargo_program())
        .args([subcommand, "--version"])
        .output()
        .is_ok_and(|output| output.status.success() && String::from_utf8_lossy(&output.stdout).contains(version));
    if installed {
        return Ok(());
    }
    Step::cargo(format!("install {krate}"), &["install", krate, "--locked", "--version", version]).run()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_parse() {
        assert_eq!(parse(&[]).unwrap(), Options::default());
        let options = parse(&strings(&["-p", "vsh-host", "--shard", "2/8", "--file", "crates/vsh-host/src/lib.rs"]));
        assert_eq!(
            options.unwrap(),
            Options {
                packages: vec!["vsh-host".into()],
                shard: Some("2/8".into()),
                files: vec!["crates/vsh-host/src/lib.rs".into()],
                iterate: false,
                jobs: None,
                nextest: false,
            }
        );
        assert_eq!(
            parse(&strings(&["--iterate", "-j", "2"])).unwrap(),
            Options { iterate: true, jobs: Some(2), ..Options::default() }
        );
        assert_eq!(parse(&strings(&["--nextest"])).unwrap(), Options { nextest: true, ..Options::default() });
        for bad in
            [&["--shard", "8/8"][..], &["--shard", "x"], &["--package"], &["--jobs", "0"], &["--jobs", "9"], &["-j"]]
        {
            assert!(parse(&strings(bad)).is_err(), "{bad:?}");
        }
    }
}
