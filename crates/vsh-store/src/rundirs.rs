//! [`RunDirs`]: the runtime's per-run working directories in the data
//! directory (`candidates/run-<pid>-<n>`, each holding an empty `root`, the
//! mount point of a real command's candidate workspace), made through the
//! data directory's handle and removed when the run ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use vsh_host::{HostError, WritableDir};
use vsh_types::VPath;

use crate::StoreError;

/// The data directory's subdirectory of run directories.
pub const RUN_DIRS: &str = "candidates";

/// The run directories of one runtime.
#[derive(Debug)]
pub struct RunDirs {
    dir: WritableDir,
    next: AtomicU64,
}

/// One run's directory, removed (with its mount point, which must be empty
/// again by then) on drop.
#[derive(Debug)]
pub struct RunDir<'a> {
    dir: &'a WritableDir,
    name: VPath,
    path: PathBuf,
}

impl RunDirs {
    pub(crate) fn new(dir: WritableDir) -> Self {
        Self { dir, next: AtomicU64::new(0) }
    }

    /// A new run directory (mode `0o700`) with an empty `root` (`0o755`) in it.
    ///
    /// # Errors
    ///
    /// [`StoreError::DataDir`] when the directories cannot be made.
    pub fn make(&self) -> Result<RunDir<'_>, StoreError> {
        let failed = |path: &VPath, source| StoreError::DataDir { path: path.clone(), source };
        loop {
            let number = self.next.fetch_add(1, Ordering::Relaxed);
            let name = VPath::parse(&format!("run-{}-{number}", std::process::id()))
                .expect("a run directory's name is one plain component");
            match self.dir.create_dir(&name, 0o700) {
                Ok(()) => {}
                // Left by an earlier process with the same pid: take the next name.
                Err(HostError::AlreadyExists { .. }) if number < 1 << 20 => continue,
                Err(source) => return Err(failed(&name, source)),
            }
            let root = name.child("root").expect("root is one plain component");
            let run = RunDir { dir: &self.dir, path: self.dir.display_path().join(name.as_str()), name };
            self.dir.create_dir(&root, 0o755).map_err(|source| failed(&root, source))?;
            return Ok(run);
        }
    }
}

impl RunDir<'_> {
    /// Its path on the host (for a mount and a Landlock rule, which take paths).
    pub fn path(&self) -> &std::path::Path {
        &self.path
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
