//! `cargo xtask man`: write the man page, `docs/vsh.1`, from the command line's
//! clap grammar (`vsh man`, rendered by `clap_mangen`), so it never drifts from
//! `--help`; a vsh-cli test fails when the committed page is not the current one.

use std::process::Command;

use crate::shell::cargo_program;
use crate::{Error, Result, project_root};

pub(crate) fn run(args: &[String]) -> Result {
    crate::no_arguments("man", args)?;
    let root = project_root();
    let output = Command::new(cargo_program())
        .args(["run", "--quiet", "--locked", "-p", "vsh-cli", "--", "man"])
        .current_dir(&root)
        .output()
        .map_err(|error| Error::new(format!("cannot run cargo: {error}")))?;
    if !output.status.success() {
        return Err(Error::new(format!("vsh man failed: {}", String::from_utf8_lossy(&output.stderr))));
    }
    let target = root.join("docs/vsh.1");
    std::fs::write(&target, &output.stdout)
        .map_err(|error| Error::new(format!("cannot write {}: {error}", target.display())))?;
    println!("wrote {}", target.display());
    Ok(())
}
