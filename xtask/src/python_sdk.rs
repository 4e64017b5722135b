//! The Python SDK (`crates/vsh-python`, the package in `python/`): its CI
//! steps and `cargo xtask wheel`.
//!
//! The extension and the worker it spawns must be the same build of
//! vsh-monty (the worker handshake compares build identities), so both are
//! built into `target/python` with the same profile and features: the `vsh`
//! binary serves as the worker. CI builds them in the dev profile and runs
//! pytest and `mypy --strict` over `python/` in a virtual environment with
//! exactly the packages `python/requirements-dev.txt` pins; `cargo xtask
//! wheel` builds both in release (stripped: the wheel carries no debug
//! information), bundles the binary as `vsh/_bin/vsh`, and writes the wheel
//! into `target/wheels`. CI then builds the wheel the same way, installs it
//! into a new, empty virtual environment and runs the README's Python
//! example with it (`python/tools/check_wheel.py`).

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
    let mut steps = vec![
        Step::cargo("python: worker", &["build", "-p", "vsh-cli", "--locked"]).env("CARGO_TARGET_DIR", &target),
        Step::program("python: extension", &maturin, &["develop", "--locked", "--quiet", "--features", "test-hooks"])
            .current_dir(root.join("python"))
            .env("VIRTUAL_ENV", &venv)
            .env("CARGO_TARGET_DIR", &target),
        Step::program("python: pytest", &python_text, &["-m", "pytest", "-q", "tests"])
            .current_dir(root.join("python"))
            .env("VSH_WORKER", &worker),
        Step::program(
            "python: mypy",
            &python_text,
            &["-m", "mypy", "--strict", "vsh", "tests", "tools", "../examples/python"],
        )
        .current_dir(root.join("python")),
    ];
    steps.extend(wheel_steps(&python)?);
    steps.extend(fresh_install_steps("wheel", &root.join("target/wheel-check")));
    Ok(steps)
}

/// A new, empty virtual environment at `env` (cleared each time), and the
/// wheel installed into it and checked by running the README's example.
fn fresh_install_steps(label: &str, env: &std::path::Path) -> [Step; 2] {
    let root = project_root();
    let env_python = env.join("bin/python").to_string_lossy().into_owned();
    [
        Step::program(format!("{label}: venv"), "python3", &["-m", "venv", "--clear", &env.to_string_lossy()]),
        Step::program(
            format!("{label}: README example"),
            &env_python,
            &[
                &root.join("python/tools/check_wheel.py").to_string_lossy(),
                &root.join(WHEELS).to_string_lossy(),
                &root.join("README.md").to_string_lossy(),
            ],
        )
        .current_dir(env),
    ]
}

/// Where the wheel is written.
const WHEELS: &str = "target/wheels";

/// The release wheel's steps: the worker and the extension, both stripped,
/// the worker bundled as `vsh/_bin/vsh`, the wheel alone in `target/wheels`.
fn wheel_steps(python: &std::path::Path) -> Result<Vec<Step>> {
    let root = project_root();
    let target = root.join(TARGET);
    let wheels = root.join(WHEELS);
    // Only this build's wheel is left there (CI installs "the" wheel).
    match std::fs::remove_dir_all(&wheels) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(Error::new(format!("cannot clear {}: {error}", wheels.display()))),
    }
    let maturin = python.with_file_name("maturin").to_string_lossy().into_owned();
    let worker = target.join("release/vsh").to_string_lossy().into_owned();
    let bundled = root.join("python/vsh/_bin/vsh").to_string_lossy().into_owned();
    let out = wheels.to_string_lossy().into_owned();
    let stripped = |step: Step| {
        step.env("CARGO_TARGET_DIR", &target)
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
            .env("CARGO_PROFILE_RELEASE_STRIP", "symbols")
    };
    Ok(vec![
        stripped(Step::cargo("wheel: worker", &["build", "--release", "-p", "vsh-cli", "--locked"])),
        Step::program("wheel: bundle", "install", &["-D", "-m", "755", &worker, &bundled]),
        stripped(
            Step::program("wheel: maturin", &maturin, &["build", "--release", "--locked", "--out", &out])
                .current_dir(root.join("python")),
        ),
    ])
}

/// The Python SDK's benchmark (`python/bench/tiny_preview.py`): the release
/// wheel installed into its own environment, then a tiny preview from
/// Python against the same call from Rust, written to
/// `target/bench/python-tiny-preview.json`.
pub(crate) fn bench_steps() -> Result<Vec<Step>> {
    let python = pinned_venv("target/python-env", REQUIREMENTS, "python")?;
    let root = project_root();
    let mut steps = wheel_steps(&python)?;
    let env = root.join("target/bench-python");
    let env_python = env.join("bin/python").to_string_lossy().into_owned();
    let out = root.join("target/bench/python-tiny-preview.json").to_string_lossy().into_owned();
    steps.extend(fresh_install_steps("bench: python", &env));
    steps.push(
        Step::program(
            "bench: python tiny preview",
            &env_python,
            &[&root.join("python/bench/tiny_preview.py").to_string_lossy(), &out],
        )
        .current_dir(&env),
    );
    Ok(steps)
}

/// `cargo xtask wheel`: the release wheel, with the worker bundled.
pub(crate) fn wheel(args: &[String]) -> Result {
    no_arguments("wheel", args)?;
    let python = pinned_venv("target/python-env", REQUIREMENTS, "python")?;
    for step in wheel_steps(&python)? {
        step.run()?;
    }
    println!("the wheel is in {}", project_root().join(WHEELS).display());
    Ok(())
}
