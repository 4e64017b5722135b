//! Real commands ([`crate::Language::Command`]): the argv a program text
//! stands for, and each run's own directory in the data directory, which
//! holds the candidate's mount point (`candidates/run-…/root`) and is
//! removed when the run ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use vsh_host::{HostError, WritableDir};
use vsh_types::VPath;

use crate::VshError;

/// The data directory's subdirectory of run directories.
pub(crate) const CANDIDATES: &str = "candidates";

/// The most arguments a command may have.
const MAX_ARGUMENTS: usize = 4096;
/// The most bytes the program text of a command may have.
const MAX_COMMAND_BYTES: usize = 1 << 20;

/// The argv `code` stands for: a JSON array of strings.
pub(crate) fn argv(code: &str) -> Result<Vec<String>, VshError> {
    let invalid = |reason: &str| VshError::InvalidCommand { reason: reason.to_owned() };
    if code.len() > MAX_COMMAND_BYTES {
        return Err(invalid("longer than 1 MiB"));
    }
    let argv: Vec<String> =
        serde_json::from_str(code).map_err(|_| invalid("the program text must be a JSON array of strings"))?;
    if argv.is_empty() || argv[0].is_empty() {
        return Err(invalid("no program"));
    }
    if argv.len() > MAX_ARGUMENTS {
        return Err(invalid("more than 4096 arguments"));
    }
    if argv.iter().any(|arg| arg.contains('\0')) {
        return Err(invalid("an argument contains a NUL byte"));
    }
    Ok(argv)
}

/// The run directories of one runtime.
#[derive(Debug)]
pub(crate) struct Candidates {
    dir: WritableDir,
    next: AtomicU64,
}

/// A run's directory, removed (with its empty mount point) on drop.
pub(crate) struct RunDir<'a> {
    dir: &'a WritableDir,
    name: VPath,
    /// Its path on the host, for the mount and the child's Landlock rule.
    pub(crate) path: PathBuf,
}

impl Candidates {
    pub(crate) fn new(dir: WritableDir) -> Self {
        Self { dir, next: AtomicU64::new(0) }
    }

    /// A new run directory with an empty `root` in it.
    pub(crate) fn make(&self) -> Result<RunDir<'_>, VshError> {
        for _ in 0..64 {
            let number = self.next.fetch_add(1, Ordering::Relaxed);
            let name = VPath::parse(&format!("run-{}-{number}", std::process::id()))
                .expect("a run directory's name is one plain component");
            match self.dir.create_dir(&name, 0o700) {
                Ok(()) => {}
                Err(HostError::AlreadyExists { .. }) => continue,
                Err(error) => return Err(VshError::Workspace(error)),
            }
            let root = name.child("root").expect("root is one plain component");
            let run = RunDir { dir: &self.dir, path: self.dir.display_path().join(name.as_str()), name };
            self.dir.create_dir(&root, 0o755).map_err(VshError::Workspace)?;
            return Ok(run);
        }
        let name = VPath::parse(CANDIDATES).expect("a plain component");
        Err(VshError::Workspace(HostError::AlreadyExists { path: name }))
    }
}

impl Drop for RunDir<'_> {
    fn drop(&mut self) {
        if let Ok(root) = self.name.child("root") {
            let _ = self.dir.remove_dir(&root);
        }
        let _ = self.dir.remove_dir(&self.name);
    }
}
