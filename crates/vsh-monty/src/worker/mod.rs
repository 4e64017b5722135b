//! The `vsh-monty-worker` subprocess: its configuration ([`WorkerConfig`]),
//! where to find it ([`default_worker_path`]), the protocol, the pool and the
//! process's own main loop.
//!
//! The worker runs the interpreter; the parent keeps the `VirtualFs`, the
//! policy and every budget except the ones only the interpreter's side can
//! enforce (bytecode time, heap, output as printed). A bug or a hostile
//! program in the interpreter can crash, stall or garble the worker, never
//! the parent: each such failure ends the request with a typed error, the
//! worker is killed, and the pool goes on.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use vsh_sandbox::SandboxPolicy;

use crate::worker::pool::BinaryDigest;

pub(crate) mod child;
#[cfg(feature = "test-hooks")]
pub(crate) mod hooks;
pub(crate) mod pool;
pub(crate) mod process;
pub(crate) mod protocol;
pub(crate) mod session;
pub(crate) mod wire;

/// The worker binary's file name.
pub const WORKER_BINARY_NAME: &str = "vsh-monty-worker";

/// The environment variable [`default_worker_path`] consults first.
pub const WORKER_PATH_VARIABLE: &str = "VSH_MONTY_WORKER";

/// How a worker executor finds, confines and pools its workers.
///
/// [`WorkerConfig::new`] gives the defaults; the fields can be changed
/// directly or with the `with_*` builders.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// The `vsh-monty-worker` binary. It is hashed (BLAKE3) when the executor
    /// is created, and every later spawn refuses a binary with another hash.
    pub path: PathBuf,
    /// Idle workers kept for reuse (default 4; at most `max_active`; 0
    /// disables reuse).
    pub max_idle: usize,
    /// Worker processes alive at once, busy or idle (default 4; at least 1).
    /// Requests beyond it wait for a slot, up to their
    /// `max_request_duration`.
    pub max_active: usize,
    /// Running time a worker gets beyond `max_duration` before the watchdog
    /// kills it (default 1 s): compile, value conversion, and single native
    /// operations monty's own clock cannot interrupt.
    pub wall_grace: Duration,
    /// How long a new worker may take to greet (default 10 s).
    pub handshake_timeout: Duration,
    /// Runs one worker serves before it is replaced (default 256).
    pub max_runs_per_worker: u32,
    /// The sandbox every worker runs in (default [`SandboxPolicy::new`]: no
    /// filesystem beyond the system's read-only libraries and loader, no
    /// network, no signals or abstract sockets outside, seccomp, no
    /// capabilities). Its resource limits are tightened per worker: address
    /// space at most `max_memory_bytes` plus 256 MiB, no file writes, at most
    /// 64 descriptors. Only the worker binary itself is granted for exec.
    pub sandbox: Arc<SandboxPolicy>,
    /// Arguments passed to the worker (default none). A host binary that also
    /// serves as its own worker (the `vsh` command line does) dispatches on one.
    pub args: Vec<String>,
    /// Which user the worker runs as (default [`WorkerUser::Unprivileged`]).
    pub user: WorkerUser,
    /// The binary's digest as an earlier process computed it (default none;
    /// see [`WorkerConfig::with_known_digest`]).
    pub known_digest: Option<BinaryDigest>,
}

/// Which user a worker runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WorkerUser {
    /// When the host runs as root, as `nobody` (uid and gid 65534), with a
    /// process-count limit (`RLIMIT_NPROC`, which the kernel does not apply to
    /// root); otherwise as the host's own user. The default.
    #[default]
    Unprivileged,
    /// As this uid and gid (the host must be allowed to switch to them).
    Id {
        /// The user id.
        uid: u32,
        /// The group id.
        gid: u32,
    },
    /// As the host's own user, root included (capabilities are still dropped).
    Host,
}

/// The uid and gid of `nobody`, the default unprivileged worker user.
pub const NOBODY: (u32, u32) = (65_534, 65_534);

/// The most processes the worker's user may have (`RLIMIT_NPROC`): a worker
/// needs none of its own, so this only caps what a compromised one can start.
pub const WORKER_PROCESSES: u64 = 64;

impl WorkerConfig {
    /// The defaults, with the worker at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            max_idle: 4,
            max_active: 4,
            wall_grace: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(10),
            max_runs_per_worker: 256,
            sandbox: Arc::new(SandboxPolicy::new()),
            args: Vec::new(),
            user: WorkerUser::default(),
            known_digest: None,
        }
    }

    /// Take `known` (what [`crate::MontyExecutor::worker_binary`] reported in
    /// an earlier process) as the binary's digest instead of hashing the
    /// binary again, when it names the same canonical path and the file still
    /// has the [`crate::BinaryStamp`] it was hashed under; otherwise the binary is
    /// hashed as usual. The caller vouches for where `known` was kept: the
    /// digest is recorded as the evidence of which worker ran a program.
    #[must_use]
    pub fn with_known_digest(mut self, known: Option<BinaryDigest>) -> Self {
        self.known_digest = known;
        self
    }

    /// Set [`WorkerConfig::user`].
    #[must_use]
    pub fn with_user(mut self, user: WorkerUser) -> Self {
        self.user = user;
        self
    }

    /// The sandbox a worker runs in: [`WorkerConfig::sandbox`] with the user
    /// [`WorkerConfig::user`] decides (a uid the sandbox names itself wins)
    /// and the process-count limit.
    pub(crate) fn effective_sandbox(&self) -> SandboxPolicy {
        let mut policy = (*self.sandbox).clone();
        if policy.runs_as().is_none() {
            let user = match self.user {
                WorkerUser::Unprivileged if vsh_sandbox::effective_uid() == 0 => Some(NOBODY),
                WorkerUser::Id { uid, gid } => Some((uid, gid)),
                WorkerUser::Unprivileged | WorkerUser::Host => None,
            };
            if let Some((uid, gid)) = user {
                policy = policy.run_as(uid, gid);
            }
        }
        let mut limits = policy.limits().clone();
        limits.processes = Some(limits.processes.map_or(WORKER_PROCESSES, |set| set.min(WORKER_PROCESSES)));
        policy.rlimits(limits)
    }

    /// What a worker's sandbox gets on this kernel, axis by axis with each
    /// axis's floor (before a run's own limits tighten it): a worker does not
    /// start, failing closed, where [`vsh_sandbox::EnforcementReport::first_below_floor`]
    /// names an axis. For diagnostics (`vsh doctor`).
    pub fn enforcement(&self) -> vsh_sandbox::EnforcementReport {
        vsh_sandbox::probe().report_for(&self.effective_sandbox())
    }

    /// Pass `args` to every worker process.
    #[must_use]
    pub fn with_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Set [`WorkerConfig::max_idle`].
    #[must_use]
    pub fn with_max_idle(mut self, max_idle: usize) -> Self {
        self.max_idle = max_idle;
        self
    }

    /// Set [`WorkerConfig::max_active`].
    #[must_use]
    pub fn with_max_active(mut self, max_active: usize) -> Self {
        self.max_active = max_active;
        self
    }

    /// Set [`WorkerConfig::wall_grace`].
    #[must_use]
    pub fn with_wall_grace(mut self, grace: Duration) -> Self {
        self.wall_grace = grace;
        self
    }

    /// Set [`WorkerConfig::handshake_timeout`].
    #[must_use]
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Set [`WorkerConfig::max_runs_per_worker`].
    #[must_use]
    pub fn with_max_runs_per_worker(mut self, runs: u32) -> Self {
        self.max_runs_per_worker = runs;
        self
    }

    /// Set [`WorkerConfig::sandbox`].
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: Arc<SandboxPolicy>) -> Self {
        self.sandbox = sandbox;
        self
    }
}

/// Where the worker binary is, by default:
///
/// 1. `$VSH_MONTY_WORKER`, if it is an absolute path naming an existing file
///    (a relative value is ignored: it would depend on the working
///    directory);
/// 2. otherwise `vsh-monty-worker` in the directory of the current
///    executable, or in its parent directory when the executable lives in a
///    directory named `deps` (cargo's layout for test binaries), if such a
///    file exists.
///
/// `None` if neither names an existing file. The `PATH` is never searched.
pub fn default_worker_path() -> Option<PathBuf> {
    if let Some(value) = std::env::var_os(WORKER_PATH_VARIABLE) {
        let path = PathBuf::from(value);
        if path.is_absolute() && path.is_file() {
            return Some(path);
        }
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let beside = dir.join(WORKER_BINARY_NAME);
    if beside.is_file() {
        return Some(beside);
    }
    if dir.file_name().is_some_and(|name| name == "deps") {
        let above = dir.parent()?.join(WORKER_BINARY_NAME);
        if above.is_file() {
            return Some(above);
        }
    }
    None
}
