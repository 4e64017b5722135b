//! `cargo xtask schemas`: write the JSON Schema of every `--json` document
//! into `docs/json/` (`vsh schema --write`, generated from the very types that
//! serialize the documents), replacing what was there; a vsh-cli test fails
//! when the committed schemas are not the current ones.

use std::process::Command;

use crate::shell::cargo_program;
use crate::{Error, Result, project_root};

pub(crate) fn run(args: &[String]) -> Result {
    crate::no_arguments("schemas", args)?;
    let root = project_root();
    let dir = root.join("docs/json");
    std::fs::create_dir_all(&dir).map_err(|error| Error::new(format!("cannot create {}: {error}", dir.display())))?;
    let entries =
        std::fs::read_dir(&dir).map_err(|error| Error::new(format!("cannot list {}: {error}", dir.display())))?;
    for entry in entries {
        let path = entry.map_err(|error| Error::new(format!("cannot list {}: {error}", dir.display())))?.path();
        if path.to_string_lossy().ends_with(".schema.json") {
            std::fs::remove_file(&path)
                .map_err(|error| Error::new(format!("cannot remove {}: {error}", path.display())))?;
        }
    }
    let status = Command::new(cargo_program())
        .args(["run", "--quiet", "--locked", "-p", "vsh-cli", "--", "schema", "--write"])
        .arg(&dir)
        .current_dir(&root)
        .status()
        .map_err(|error| Error::new(format!("cannot run cargo: {error}")))?;
    if !status.success() {
        return Err(Error::new("vsh schema --write failed"));
    }
    println!("wrote the schemas into {}", dir.display());
    Ok(())
}
