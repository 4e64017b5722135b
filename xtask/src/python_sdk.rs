//! The Python SDK (`crates/vsh-python`, the package in `python/`): its CI
//! steps and `cargo xtask wheel`.
//!
//! The extension and the worker it spawns must be the same build of
//! vsh-monty (the worker handshake compares build identities), so both are
//! built into `target/python` with the same profile and features: the `vsh`
//! binary serves as the worker. CI builds them in the dev profile and runs
//! pytest and `mypy --strict` over `python/` in a virtual environment with
//! exactly the packages `python/requirements-dev.txt` pins; `cargo xtask
//! wheel` builds both in release, bundles the binary as `vsh/_bin/vsh`, and
//! writes the wheel into `target/wheels`.

use std::path::PathBuf;

use crate::mcp_clients::pinned_venv;
use crate::shell::Step;
use crate::{Error, Result, no_arguments, project_root};

/// The SDK's development requirements, relative to the repository root.
const REQUIREMENTS: &str = "python/requirements-dev.txt";

/// The target directory both builds share.
const TARGET: &str = "target/python";

/// The CI steps: the worker, the extension in the environment, the tests
/// and the type check.
pub(crate) fn ci_steps() -> Result<Vec<Step>> {
    let python = pinned_venv("target/python-env", REQUIREMENTS, "python")?;
    let root = project_root();
    let venv = python.parent().and_then(std::path::Path::parent).map(PathBuf::from).unwrap_or_default();
    let target = root.join(TARGET);
    let worker = target.join("debug/vsh");
    let maturin = venv.join("bin/maturin").to_string_lossy().into_owned();
    let python_text = python.to_string_lossy().into_owned();
    Ok(vec![
        Step::cargo("python: worker", &["build", "-p", "vsh-cli", "--locked"]).env("CARGO_TARGET_DIR", &target),
        Step::program("python: extension", &maturin, &["develop", "--locked", "--quiet"])
            .current_dir(root.join("python"))
            .env("VIRTUAL_ENV", &venv)
            .env("CARGO_TARGET_DIR", &target),
        Step::program("python: pytest", &python_text, &["-m", "pytest", "-q", "tests"])
            .current_dir(root.join("python"))
            .env("VSH_WORKER", &worker),
        Step::program("python: mypy", &python_text, &["-m", "mypy", "--strict", "vsh", "tests", "../examples/python"])
            .current_dir(root.join("python")),
    ])
}

/// `cargo xtask wheel`: the release wheel, with the worker bundled.
pub(crate) fn wheel(args: &[String]) -> Result {
    no_arguments("wheel", args)?;
    let python = pinned_venv("target/python-env", REQUIREMENTS, "python")?;
    let root = project_root();
    let target = root.join(TARGET);
    Step::cargo("wheel: worker", &["build", "--release", "-p", "vsh-cli", "--locked"])
        .env("CARGO_TARGET_DIR", &target)
        .run()?;
    let bin = root.join("python/vsh/_bin");
    std::fs::create_dir_all(&bin).map_err(|error| Error::new(format!("cannot make {}: {error}", bin.display())))?;
    std::fs::copy(target.join("release/vsh"), bin.join("vsh"))
        .map_err(|error| Error::new(format!("cannot bundle the worker: {error}")))?;
    let maturin = python.with_file_name("maturin").to_string_lossy().into_owned();
    let out = root.join("target/wheels").to_string_lossy().into_owned();
    Step::program("wheel: maturin", &maturin, &["build", "--release", "--locked", "--out", &out])
        .current_dir(root.join("python"))
        .env("CARGO_TARGET_DIR", &target)
        .run()?;
    println!("the wheel is in {out}");
    Ok(())
}
