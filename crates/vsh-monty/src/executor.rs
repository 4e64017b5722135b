//! [`MontyExecutor`]: the object a runtime holds to run Monty programs, in
//! process (trusted use and tests) or in pooled, confined worker processes
//! (untrusted programs), with the same adapter code either way.

use std::time::{Duration, Instant};

use vsh_policy::CallPolicy;
use vsh_sandbox::{Axis, SandboxPolicy};
use vsh_types::canon;
use vsh_vfs::VirtualFs;

use crate::compat::ResultCompatibility;
use crate::dispatch::Nested;
use crate::error::{ExecutionError, WorkerError};
use crate::interrupt::{Interrupt, Uninterrupted};
use crate::limits::ExecutionLimits;
use crate::run::{self, MontyOutcome};
use crate::worker::WorkerConfig;
use crate::worker::pool::{Pool, PoolStatus};

/// Version of [`MontyExecutor::config_digest`]'s encoding.
const CONFIG_ENCODING_VERSION: u8 = 2;

/// Where programs run.
#[derive(Debug)]
enum Mode {
    InProcess,
    Worker(Box<Pool>),
}

/// Runs Monty programs against a [`VirtualFs`]; `Send + Sync`, so one
/// executor serves every request of a runtime.
///
/// ```no_run
/// use vsh_monty::{MontyExecutor, WorkerConfig, default_worker_path};
///
/// let path = default_worker_path().expect("vsh-monty-worker next to this executable");
/// let executor = MontyExecutor::worker(WorkerConfig::new(path))?;
/// // executor.execute(code, &mut vfs, &policy, &limits)
/// # Ok::<(), vsh_monty::WorkerError>(())
/// ```
#[derive(Debug)]
pub struct MontyExecutor {
    mode: Mode,
    compatibility: ResultCompatibility,
    /// The interpreter budgets of `vsh_bash` inside Monty programs (`None`:
    /// the function raises `RuntimeError`).
    nested_bash: Option<vsh_bash::BashLimits>,
}

impl MontyExecutor {
    /// Run programs in this process ([`crate::execute`]). Not an isolation
    /// boundary: see its limitations.
    pub fn in_process() -> Self {
        Self { mode: Mode::InProcess, compatibility: ResultCompatibility::Native, nested_bash: None }
    }

    /// Run programs in confined worker processes. The binary at
    /// `config.path` is hashed now; a worker is spawned only from a binary
    /// with the same BLAKE3.
    ///
    /// Errors: [`WorkerError::Config`] for `max_active` 0 or a zero handshake
    /// timeout, [`WorkerError::Binary`] if the binary cannot be read, and
    /// [`WorkerError::Spawn`] if it cannot be granted for exec.
    pub fn worker(config: WorkerConfig) -> Result<Self, WorkerError> {
        Ok(Self {
            mode: Mode::Worker(Box::new(Pool::new(config)?)),
            compatibility: ResultCompatibility::Native,
            nested_bash: None,
        })
    }

    /// Which values [`MontyExecutor::execute`] accepts (default
    /// [`ResultCompatibility::Native`]).
    #[must_use]
    pub fn with_result_compatibility(mut self, compatibility: ResultCompatibility) -> Self {
        self.compatibility = compatibility;
        self
    }

    /// Let Monty programs call `vsh_bash(code)`: a Bash script on the same
    /// virtual image and budget, under these interpreter budgets.
    #[must_use]
    pub fn with_nested_bash(mut self, limits: Option<vsh_bash::BashLimits>) -> Self {
        self.nested_bash = limits;
        self
    }

    /// The result compatibility.
    pub fn result_compatibility(&self) -> ResultCompatibility {
        self.compatibility
    }

    /// Whether programs run in this process.
    pub fn is_in_process(&self) -> bool {
        matches!(self.mode, Mode::InProcess)
    }

    /// The pool's counters (`None` in process).
    pub fn pool_status(&self) -> Option<PoolStatus> {
        match &self.mode {
            Mode::InProcess => None,
            Mode::Worker(pool) => Some(pool.status()),
        }
    }

    /// The process ids of the live workers (empty in process): every worker
    /// spawned and not yet killed and reaped, busy or idle.
    pub fn worker_pids(&self) -> Vec<u32> {
        match &self.mode {
            Mode::InProcess => Vec::new(),
            Mode::Worker(pool) => pool.pids(),
        }
    }

    /// What the kernel enforces on a worker of this executor, axis by axis,
    /// with the user it runs as and its process-count limit in the resources
    /// axis (`None` in process: nothing is confined).
    pub fn worker_enforcement(&self) -> Option<vsh_sandbox::EnforcementReport> {
        match &self.mode {
            Mode::InProcess => None,
            Mode::Worker(pool) => Some(vsh_sandbox::probe().report_for(&pool.sandbox_for(0))),
        }
    }

    /// The user a worker of this executor runs as, `(uid, gid)` (`None` in
    /// process, or when it runs as the host's own user).
    pub fn worker_user(&self) -> Option<(u32, u32)> {
        match &self.mode {
            Mode::InProcess => None,
            Mode::Worker(pool) => pool.config().effective_sandbox().runs_as(),
        }
    }

    /// The BLAKE3 of the pinned worker binary (`None` in process).
    pub fn worker_digest(&self) -> Option<[u8; 32]> {
        match &self.mode {
            Mode::InProcess => None,
            Mode::Worker(pool) => Some(pool.pin().digest()),
        }
    }

    /// The pinned worker binary: its canonical path, the identity it was last
    /// verified under and its BLAKE3 (`None` in process), for a later
    /// process's [`WorkerConfig::with_known_digest`].
    pub fn worker_binary(&self) -> Option<crate::BinaryDigest> {
        match &self.mode {
            Mode::InProcess => None,
            Mode::Worker(pool) => Some(pool.pin().describe()),
        }
    }

    /// Run `code` against `vfs`, authorizing every path through `policy` and
    /// charging `limits`; see [`crate::execute`] for the guest's view and the
    /// errors. The end-to-end deadline
    /// ([`ExecutionLimits::max_request_duration`]) starts now. A worker
    /// failure is [`ExecutionError::Worker`] (the worker is discarded, the
    /// executor stays usable); a value the result compatibility refuses is
    /// [`ExecutionError::Incompatible`].
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    pub fn execute(
        &self,
        code: &str,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
    ) -> Result<MontyOutcome, ExecutionError> {
        self.execute_interruptible(code, vfs, policy, limits, &Uninterrupted)
    }

    /// [`MontyExecutor::execute`], ended with [`ExecutionError::Cancelled`]
    /// once `interrupt` says so: at the guest's next suspension, while it waits
    /// for a worker slot, and within 20 ms while a worker computes (the worker
    /// is killed). In process, a guest that computes without suspending runs
    /// on until its next suspension or its time budget.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    pub fn execute_interruptible(
        &self,
        code: &str,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        interrupt: &dyn Interrupt,
    ) -> Result<MontyOutcome, ExecutionError> {
        self.execute_monty(code, vfs, policy, limits, None, interrupt)
    }

    /// [`MontyExecutor::execute_interruptible`], where the program may also
    /// call `vsh_exec(argv, timeout=None, env=None, input=None)`: each call runs a real
    /// command in a candidate of the image as the program has changed it so
    /// far (mounted in `commands`'s run directory, with its environment plus
    /// the call's), as [`MontyExecutor::execute_command`] runs one, and
    /// returns `(exit_code, stdout, stderr)`.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    pub fn execute_with_commands(
        &self,
        code: &str,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        commands: &crate::CommandConfig,
        interrupt: &dyn Interrupt,
    ) -> Result<MontyOutcome, ExecutionError> {
        self.execute_monty(code, vfs, policy, limits, Some(commands), interrupt)
    }

    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    fn execute_monty(
        &self,
        code: &str,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        commands: Option<&crate::CommandConfig>,
        interrupt: &dyn Interrupt,
    ) -> Result<MontyOutcome, ExecutionError> {
        let started = Instant::now();
        cancelled_before_start(interrupt)?;
        let nested = Nested { bash: self.nested_bash, command: commands };
        let outcome = match &self.mode {
            Mode::InProcess => run::run_local(code, vfs, policy, limits, started, interrupt, nested)?,
            Mode::Worker(pool) => pool.execute(code, vfs, policy, limits, started, interrupt, nested)?,
        };
        match self.compatibility.check(&outcome.value) {
            Ok(()) => Ok(outcome),
            Err(source) => Err(ExecutionError::Incompatible {
                source,
                stdout: outcome.stdout,
                stats: outcome.stats,
                denied: outcome.denied,
            }),
        }
    }

    /// Run the Bash program `code` against `vfs` (the `vsh-bash-bounded-v1`
    /// profile), every file access authorized through `policy` and charged to
    /// `limits` as the Monty call that does the same would be, the
    /// interpreter's own budgets from `bash`; interrupted as
    /// [`MontyExecutor::execute_interruptible`]. Status 0 is the outcome;
    /// anything else that ends the script is [`ExecutionError::Bash`].
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    pub fn execute_bash(
        &self,
        code: &str,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        bash: &vsh_bash::BashLimits,
        interrupt: &dyn Interrupt,
    ) -> Result<crate::BashOutcome, ExecutionError> {
        let started = Instant::now();
        cancelled_before_start(interrupt)?;
        match &self.mode {
            Mode::InProcess => run::run_bash_local(code, vfs, policy, limits, bash, started, interrupt),
            Mode::Worker(pool) => pool.execute_bash(code, vfs, policy, limits, bash, started, interrupt),
        }
    }

    /// Run the real command `argv` in a candidate of `vfs` (the
    /// `vsh-command-confined-v1` profile): a confined child in its own mount
    /// namespace, every file access it makes served, authorized, charged and
    /// recorded by the same guarded image as a Monty or Bash run's, in this
    /// process whatever the executor's mode (the filesystem's server must
    /// own the image). Concluded as [`MontyExecutor::execute_bash`]: status 0
    /// is the outcome, anything else [`ExecutionError::Bash`].
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    pub fn execute_command(
        &self,
        argv: &[String],
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        config: &crate::CommandConfig,
        interrupt: &dyn Interrupt,
    ) -> Result<crate::BashOutcome, ExecutionError> {
        self.execute_command_in(
            crate::CommandLine { argv, ..crate::CommandLine::default() },
            vfs,
            policy,
            limits,
            config,
            interrupt,
        )
    }

    /// [`MontyExecutor::execute_command`] of a [`crate::CommandLine`]: started
    /// in its directory of the candidate, reading its standard input.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    pub fn execute_command_in(
        &self,
        line: crate::CommandLine<'_>,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        config: &crate::CommandConfig,
        interrupt: &dyn Interrupt,
    ) -> Result<crate::BashOutcome, ExecutionError> {
        let started = Instant::now();
        cancelled_before_start(interrupt)?;
        crate::command::run_command(line, vfs, policy, limits, config, started, interrupt)
    }

    /// The executor's identity for a runtime-configuration digest: mode,
    /// result compatibility and, for workers, the binary's BLAKE3, the build
    /// identity, pool sizes, timeouts and the sandbox policy. Domain-separated
    /// BLAKE3 (`derive_key`) of a versioned canonical encoding.
    pub fn config_digest(&self) -> [u8; 32] {
        let mut out = Vec::new();
        canon::put_u8(&mut out, CONFIG_ENCODING_VERSION);
        canon::put_u8(&mut out, self.compatibility.tag());
        match &self.nested_bash {
            None => canon::put_u8(&mut out, 0),
            Some(limits) => {
                canon::put_u8(&mut out, 1);
                canon::put_bytes(&mut out, vsh_bash::PROFILE.as_bytes());
                limits.encode_canonical(&mut out);
            }
        }
        match &self.mode {
            Mode::InProcess => canon::put_u8(&mut out, 1),
            Mode::Worker(pool) => {
                canon::put_u8(&mut out, 2);
                out.extend_from_slice(&pool.pin().digest());
                canon::put_bytes(&mut out, pool.identity().as_bytes());
                let config = pool.config();
                canon::put_u64(&mut out, config.max_idle as u64);
                canon::put_u64(&mut out, config.max_active as u64);
                put_duration(&mut out, config.wall_grace);
                put_duration(&mut out, config.handshake_timeout);
                canon::put_u32(&mut out, config.max_runs_per_worker);
                encode_sandbox(&mut out, &config.effective_sandbox());
                canon::put_u64(&mut out, config.args.len() as u64);
                for arg in &config.args {
                    canon::put_bytes(&mut out, arg.as_bytes());
                }
            }
        }
        blake3::derive_key("vsh-monty executor configuration v1", &out)
    }
}

fn put_duration(out: &mut Vec<u8>, duration: Duration) {
    canon::put_u64(out, duration.as_secs());
    canon::put_u32(out, duration.subsec_nanos());
}

fn put_limit(out: &mut Vec<u8>, limit: Option<u64>) {
    match limit {
        None => canon::put_u8(out, 0),
        Some(value) => {
            canon::put_u8(out, 1);
            canon::put_u64(out, value);
        }
    }
}

/// Everything a sandbox policy says, through its public accessors.
fn encode_sandbox(out: &mut Vec<u8>, policy: &SandboxPolicy) {
    canon::put_u8(out, u8::from(policy.is_confined()));
    for axis in Axis::ALL {
        canon::put_bytes(out, policy.floor_of(axis).name().as_bytes());
    }
    let limits = policy.limits();
    for limit in [
        limits.cpu_seconds,
        limits.address_space_bytes,
        limits.data_bytes,
        limits.file_size_bytes,
        limits.open_files,
        limits.processes,
    ] {
        put_limit(out, limit);
    }
    for paths in [policy.read_paths(), policy.write_paths(), policy.exec_paths()] {
        canon::put_u64(out, paths.len() as u64);
        for path in paths {
            canon::put_bytes(out, path.as_os_str().as_encoded_bytes());
        }
    }
    let ports: Vec<u16> = policy.tcp_connect_ports().collect();
    canon::put_u64(out, ports.len() as u64);
    for port in ports {
        canon::put_u32(out, u32::from(port));
    }
    match policy.runs_as() {
        None => canon::put_u8(out, 0),
        Some((uid, gid)) => {
            canon::put_u8(out, 1);
            canon::put_u32(out, uid);
            canon::put_u32(out, gid);
        }
    }
}

/// [`ExecutionError::Cancelled`] if `interrupt` fired before the run started.
#[expect(clippy::result_large_err, reason = "see `crate::execute`")]
fn cancelled_before_start(interrupt: &dyn Interrupt) -> Result<(), ExecutionError> {
    if interrupt.interrupted() {
        return Err(ExecutionError::Cancelled {
            stdout: String::new(),
            stats: crate::ExecutionStats::default(),
            denied: Vec::new(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executor_is_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<MontyExecutor>();
        let executor = MontyExecutor::in_process();
        assert!(executor.is_in_process());
        assert_eq!(executor.pool_status(), None);
        assert!(executor.worker_pids().is_empty());
        assert_eq!(executor.worker_digest(), None);
        let python = MontyExecutor::in_process().with_result_compatibility(ResultCompatibility::Python);
        assert_ne!(executor.config_digest(), python.config_digest());
    }
}
