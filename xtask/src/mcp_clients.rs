//! The MCP clients that the command line's MCP tests drive `vsh serve` with:
//!
//! - the official Python SDK, installed with `pip` into a virtual environment
//!   under `target/mcp-clients/python`, every package pinned exactly in
//!   `crates/vsh-cli/tests/mcp/requirements.txt` and installed with
//!   `--no-deps`, so a fresh machine gets exactly those;
//! - the official TypeScript SDK, installed with `npm ci` (the exact versions
//!   and integrity hashes of `crates/vsh-cli/tests/mcp/typescript/package-lock.json`,
//!   no install scripts) into `target/mcp-clients/typescript`.
//!
//! Each is reinstalled when its pins change (the install keeps a copy of the
//! pins it was made from).

use std::path::PathBuf;

use crate::shell::Step;
use crate::{Error, Result, project_root};

/// The pinned requirements, relative to the repository root.
const REQUIREMENTS: &str = "crates/vsh-cli/tests/mcp/requirements.txt";

/// The TypeScript client's package and lock, relative to the repository root.
const PACKAGE: [&str; 2] =
    ["crates/vsh-cli/tests/mcp/typescript/package.json", "crates/vsh-cli/tests/mcp/typescript/package-lock.json"];

/// The Python interpreter of the clients' environment, installing it first
/// if it is missing or stale.
pub(crate) fn python() -> Result<PathBuf> {
    pinned_venv("target/mcp-clients/python", REQUIREMENTS, "mcp-clients")
}

/// A virtual environment at `dir` (relative to the repository root) holding
/// exactly the packages `requirements` pins (installed with `--no-deps`),
/// made again when the requirements change; its Python interpreter.
pub(crate) fn pinned_venv(dir: &str, requirements: &str, label: &str) -> Result<PathBuf> {
    let root = project_root();
    let venv = root.join(dir);
    let python = venv.join("bin/python");
    let pins = std::fs::read(root.join(requirements))
        .map_err(|error| Error::new(format!("cannot read {requirements}: {error}")))?;
    let stamp_path = venv.join("requirements.installed");
    if python.exists() && std::fs::read(&stamp_path).is_ok_and(|found| found == pins) {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&venv);
    let venv_arg = venv.to_string_lossy().into_owned();
    Step::program(format!("{label}: venv"), "python3", &["-m", "venv", &venv_arg]).run()?;
    let pip = venv.join("bin/pip").to_string_lossy().into_owned();
    Step::program(
        format!("{label}: pip"),
        &pip,
        &["install", "--quiet", "--disable-pip-version-check", "--no-deps", "-r", requirements],
    )
    .run()?;
    std::fs::write(&stamp_path, &pins).map_err(|error| Error::new(format!("cannot write the stamp: {error}")))?;
    Ok(python)
}

/// The directory holding the TypeScript SDK's `node_modules`, installing it
/// first if it is missing or stale.
pub(crate) fn typescript() -> Result<PathBuf> {
    let root = project_root();
    let dir = root.join("target/mcp-clients/typescript");
    let mut pins = Vec::new();
    for file in PACKAGE {
        let bytes =
            std::fs::read(root.join(file)).map_err(|error| Error::new(format!("cannot read {file}: {error}")))?;
        pins.extend_from_slice(&bytes);
        pins.push(0);
    }
    let stamp_path = dir.join("package.installed");
    if dir.join("node_modules").is_dir() && std::fs::read(&stamp_path).is_ok_and(|found| found == pins) {
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|error| Error::new(format!("cannot make {}: {error}", dir.display())))?;
    for file in PACKAGE {
        let name = std::path::Path::new(file).file_name().unwrap_or_default();
        std::fs::copy(root.join(file), dir.join(name))
            .map_err(|error| Error::new(format!("cannot copy {file}: {error}")))?;
    }
    let prefix = dir.to_string_lossy().into_owned();
    Step::program(
        "mcp-clients: npm ci",
        "npm",
        &["ci", "--prefix", &prefix, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
    )
    .run()?;
    std::fs::write(&stamp_path, &pins).map_err(|error| Error::new(format!("cannot write the stamp: {error}")))?;
    Ok(dir)
}
