//! The test harness: a temporary workspace, its virtual image, and helpers that
//! run a program and describe its value and diff.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use tempfile::TempDir;
use vsh_host::CapDir;
use vsh_monty::{
    ExecutionError, ExecutionLimits, GuestException, LimitExceeded, MontyExecutor, MontyObject, MontyOutcome,
    WorkerConfig, execute,
};
use vsh_policy::CallPolicy;
use vsh_types::DiffKind;
use vsh_vfs::{SnapshotLimits, VirtualFs};

/// The worker binary cargo built for these tests (with the `test-hooks`
/// feature, through the package's self dev-dependency).
pub(crate) const WORKER: &str = env!("CARGO_BIN_EXE_vsh-monty-worker");

/// A worker executor with the defaults.
pub(crate) fn worker_executor(config: WorkerConfig) -> MontyExecutor {
    MontyExecutor::worker(config).expect("the worker executor starts")
}

/// One worker executor shared by every test that just needs programs run in
/// a worker.
pub(crate) fn shared_worker() -> &'static MontyExecutor {
    static SHARED: OnceLock<MontyExecutor> = OnceLock::new();
    SHARED.get_or_init(|| worker_executor(WorkerConfig::new(WORKER)))
}

/// Where a test's programs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// [`execute`], in this process.
    InProcess,
    /// The shared worker executor.
    Worker,
}

/// Both modes: tests of the guest surface run in each, proving the two
/// share their adapter code.
pub(crate) const MODES: [Mode; 2] = [Mode::InProcess, Mode::Worker];

/// A temporary workspace (inside a parent directory the guest must never
/// reach) and a virtual image over it.
pub(crate) struct Workspace {
    pub(crate) parent: TempDir,
    pub(crate) vfs: VirtualFs,
    pub(crate) mode: Mode,
}

impl Workspace {
    /// A workspace holding `files` (parents created as needed).
    pub(crate) fn with(files: &[(&str, &[u8])]) -> Workspace {
        Self::with_snapshot_limits(files, SnapshotLimits::default())
    }

    /// A workspace holding `files`, observed under `limits`.
    pub(crate) fn with_snapshot_limits(files: &[(&str, &[u8])], limits: SnapshotLimits) -> Workspace {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        for (rel, bytes) in files {
            let full = root.join(rel);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, bytes).unwrap();
        }
        let vfs = VirtualFs::new(Arc::new(CapDir::open(&root).unwrap()), vec![], limits);
        Workspace { parent, vfs, mode: Mode::InProcess }
    }

    /// The same workspace, observed afresh under `limits` once every file
    /// in it was last changed more than the settle time (100 ms) before: a
    /// file's stat then stands for its content.
    pub(crate) fn settled(mut self, limits: SnapshotLimits) -> Workspace {
        std::thread::sleep(std::time::Duration::from_millis(150));
        self.vfs = VirtualFs::new(Arc::new(CapDir::open(&self.root()).unwrap()), vec![], limits);
        self
    }

    /// The same workspace, running its programs in `mode`.
    pub(crate) fn in_mode(mut self, mode: Mode) -> Workspace {
        self.mode = mode;
        self
    }

    pub(crate) fn empty() -> Workspace {
        Self::with(&[])
    }

    /// The workspace directory on the host.
    pub(crate) fn root(&self) -> std::path::PathBuf {
        self.parent.path().join("ws")
    }

    pub(crate) fn mkdir(&self, rel: &str) {
        std::fs::create_dir_all(self.root().join(rel)).unwrap();
    }

    pub(crate) fn symlink(&self, rel: &str, target: &str) {
        std::os::unix::fs::symlink(target, self.root().join(rel)).unwrap();
    }

    /// Run with the balanced default policy and default limits.
    pub(crate) fn run(&mut self, code: &str) -> Result<MontyOutcome, ExecutionError> {
        self.run_with(code, &ExecutionLimits::default())
    }

    pub(crate) fn run_with(&mut self, code: &str, limits: &ExecutionLimits) -> Result<MontyOutcome, ExecutionError> {
        let policy = CallPolicy::balanced_default(None);
        match self.mode {
            Mode::InProcess => execute(code, &mut self.vfs, &policy, limits),
            Mode::Worker => shared_worker().execute(code, &mut self.vfs, &policy, limits),
        }
    }

    /// Run on `executor`.
    pub(crate) fn run_on(
        &mut self,
        executor: &MontyExecutor,
        code: &str,
        limits: &ExecutionLimits,
    ) -> Result<MontyOutcome, ExecutionError> {
        executor.execute(code, &mut self.vfs, &CallPolicy::balanced_default(None), limits)
    }

    /// Run a program that must complete; its value's Python repr.
    #[track_caller]
    pub(crate) fn eval(&mut self, code: &str) -> String {
        match self.run(code) {
            Ok(outcome) => outcome.value.py_repr(),
            Err(error) => panic!("program failed ({:?}): {error:?}", self.mode),
        }
    }

    /// Run `code` in process on this image and in the shared worker on a
    /// fresh image of the same workspace; both must complete with the same
    /// value, whose Python repr is returned.
    #[track_caller]
    pub(crate) fn eval_both(&mut self, code: &str) -> String {
        let policy = CallPolicy::balanced_default(None);
        let limits = ExecutionLimits::default();
        let here = match execute(code, &mut self.vfs, &policy, &limits) {
            Ok(outcome) => outcome.value.py_repr(),
            Err(error) => panic!("program failed in process: {error:?}"),
        };
        let mut fresh =
            VirtualFs::new(Arc::new(CapDir::open(&self.root()).unwrap()), vec![], SnapshotLimits::default());
        let there = match shared_worker().execute(code, &mut fresh, &policy, &limits) {
            Ok(outcome) => outcome.value.py_repr(),
            Err(error) => panic!("program failed in the worker: {error:?}"),
        };
        assert_eq!(here, there, "in process and in the worker differ");
        here
    }

    /// Run a program that must complete; the full outcome.
    #[track_caller]
    pub(crate) fn outcome(&mut self, code: &str) -> MontyOutcome {
        match self.run(code) {
            Ok(outcome) => outcome,
            Err(error) => panic!("program failed: {error:?}"),
        }
    }

    /// The canonical diff as `(path, kind)` pairs.
    pub(crate) fn diff(&mut self) -> Vec<(String, DiffKind)> {
        self.vfs.canonical_diff().unwrap().entries().iter().map(|e| (e.path.as_str().to_owned(), e.kind)).collect()
    }

    /// Host bytes of a workspace file (to prove the host is untouched).
    pub(crate) fn host_file(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.root().join(rel)).ok()
    }
}

/// The uncaught exception of a failed run.
#[track_caller]
pub(crate) fn exception(result: Result<MontyOutcome, ExecutionError>) -> GuestException {
    match result {
        Err(ExecutionError::Exception { exception, .. }) => exception,
        other => panic!("expected an uncaught exception, got {other:?}"),
    }
}

/// The limit a failed run hit, with its stdout.
#[track_caller]
pub(crate) fn limit(result: Result<MontyOutcome, ExecutionError>) -> (LimitExceeded, String) {
    match result {
        Err(ExecutionError::Limit { limit, stdout, .. }) => (limit, stdout),
        other => panic!("expected a limit, got {other:?}"),
    }
}

/// A Python str repr (`'text'`).
pub(crate) fn s(text: &str) -> String {
    MontyObject::String(text.to_owned()).py_repr()
}

/// Whether anything exists at `path` (symlinks included).
pub(crate) fn present(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}
