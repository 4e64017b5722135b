//! The MCP clients that the command line's MCP tests drive `vsh serve` with:
//! the official Python SDK, installed with `pip` into a virtual environment
//! under `target/mcp-clients/python`, every package pinned exactly in
//! `crates/vsh-cli/tests/mcp/requirements.txt` and installed with
//! `--no-deps`, so a fresh machine gets exactly those. Reinstalled when the
//! requirements change (the environment keeps a copy of those it was made from).

use std::path::PathBuf;

use crate::shell::Step;
use crate::{Error, Result, project_root};

/// The pinned requirements, relative to the repository root.
const REQUIREMENTS: &str = "crates/vsh-cli/tests/mcp/requirements.txt";

/// The Python interpreter of the clients' environment, installing it first
/// if it is missing or stale.
pub(crate) fn python() -> Result<PathBuf> {
    let root = project_root();
    let venv = root.join("target/mcp-clients/python");
    let python = venv.join("bin/python");
    let requirements = std::fs::read(root.join(REQUIREMENTS))
        .map_err(|error| Error::new(format!("cannot read {REQUIREMENTS}: {error}")))?;
    let stamp_path = venv.join("requirements.installed");
    if python.exists() && std::fs::read(&stamp_path).is_ok_and(|found| found == requirements) {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&venv);
    let venv_arg = venv.to_string_lossy().into_owned();
    Step::program("mcp-clients: venv", "python3", &["-m", "venv", &venv_arg]).run()?;
    let pip = venv.join("bin/pip").to_string_lossy().into_owned();
    Step::program(
        "mcp-clients: pip",
        &pip,
        &["install", "--quiet", "--disable-pip-version-check", "--no-deps", "-r", REQUIREMENTS],
    )
    .run()?;
    std::fs::write(&stamp_path, &requirements)
        .map_err(|error| Error::new(format!("cannot write the stamp: {error}")))?;
    Ok(python)
}
