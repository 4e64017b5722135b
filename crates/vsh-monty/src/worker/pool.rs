//! The worker pool: a bound on live workers, idle reuse only after a clean
//! reset, and the binary pin.
//!
//! At most `max_active` worker processes exist at any moment: a request takes
//! a slot (waiting, up to its deadline, while all are taken), reuses an idle
//! worker sized for its memory budget or spawns one, and gives the slot back
//! only after its worker is either idle again or killed and reaped. Idle
//! workers count against the bound too (an idle worker sized for another
//! memory budget is killed to make room), so the number of processes never
//! exceeds `max_active`.

// The worker binary is vsh's own program outside any workspace, pinned by its host path.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use vsh_policy::CallPolicy;
use vsh_sandbox::{ExecGrant, SandboxPolicy, ToolContext};
use vsh_vfs::VirtualFs;

use crate::dispatch::{Dispatcher, Nested};
use crate::error::{ExecutionError, WorkerError};
use crate::host::OsHost;
use crate::interrupt::{self, Interrupt};
use crate::limits::{ExecutionLimits, ExecutionStats, LimitExceeded, LimitKind, nanos};
use crate::run::{self, MontyOutcome};
use crate::worker::WorkerConfig;
use crate::worker::process::{Launch, Registry, WorkerProcess, lock};
use crate::worker::protocol;
use crate::worker::session;

/// Address space granted above `max_memory_bytes`: the binary and its
/// libraries, stacks, the allocator's headroom above the soft limit, and
/// protocol buffers.
pub(crate) const ADDRESS_SPACE_HEADROOM: u64 = 256 << 20;

/// Descriptors a worker may hold (it needs its three standard streams).
const WORKER_OPEN_FILES: u64 = 64;

/// The identity of a file as `stat` sees it (device, inode, size, and the
/// modification and change times to the nanosecond); a change means the
/// content must be hashed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BinaryStamp {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time: seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// Inode change time: seconds and nanoseconds (no call sets it to a chosen value).
    pub ctime: (i64, i64),
}

impl BinaryStamp {
    fn of(metadata: &fs::Metadata) -> Self {
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }
}

/// The BLAKE3 of a worker binary and the [`BinaryStamp`] it was computed
/// under: what [`crate::MontyExecutor::worker_binary`] reports, and what
/// [`WorkerConfig::with_known_digest`] takes back in a later process, so that
/// a binary whose identity is unchanged is not hashed again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryDigest {
    /// The binary's canonical path.
    pub path: PathBuf,
    /// Its identity when it was hashed.
    pub stamp: BinaryStamp,
    /// The BLAKE3 of its content.
    pub digest: [u8; 32],
}

/// The worker binary, pinned by its BLAKE3 when the pool was created.
#[derive(Debug)]
pub(crate) struct BinaryPin {
    path: PathBuf,
    digest: [u8; 32],
    stamp: Mutex<BinaryStamp>,
}

fn hash_file(path: &Path) -> Result<([u8; 32], BinaryStamp), WorkerError> {
    let failed = |source: io::Error| WorkerError::Binary { path: path.to_owned(), source };
    let file = fs::File::open(path).map_err(failed)?;
    let metadata = file.metadata().map_err(failed)?;
    if !metadata.is_file() {
        return Err(failed(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")));
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(&file).map_err(failed)?;
    Ok((*hasher.finalize().as_bytes(), BinaryStamp::of(&metadata)))
}

fn hex(bytes: &[u8; 32]) -> String {
    vsh_types::hex::encode(bytes)
}

/// The digests this process computed, by path, with the `stat` identity
/// each was computed under: a pool made again on a binary whose identity is
/// unchanged reuses the digest rather than hashing tens of megabytes again
/// (the trust [`BinaryPin::verify`] already places in the identity).
static PINNED: Mutex<Vec<(PathBuf, BinaryStamp, [u8; 32])>> = Mutex::new(Vec::new());

/// The most binaries [`PINNED`] remembers.
const MAX_PINNED: usize = 16;

impl BinaryPin {
    /// Pin the file at `path` (canonicalized). `known` is a digest an earlier
    /// process computed: it is taken when it names the same canonical path
    /// and the file's identity is still the one it was computed under (the
    /// trust [`BinaryPin::verify`] places in the identity).
    pub(crate) fn new(path: &Path, known: Option<&BinaryDigest>) -> Result<Self, WorkerError> {
        let canonical =
            fs::canonicalize(path).map_err(|source| WorkerError::Binary { path: path.to_owned(), source })?;
        let metadata =
            fs::metadata(&canonical).map_err(|source| WorkerError::Binary { path: canonical.clone(), source })?;
        let current = BinaryStamp::of(&metadata);
        let pinned = lock(&PINNED)
            .iter()
            .find(|(known, stamp, _)| *known == canonical && *stamp == current)
            .map(|(_, _, digest)| *digest);
        if let Some(digest) = pinned {
            return Ok(Self { path: canonical, digest, stamp: Mutex::new(current) });
        }
        let (digest, stamp) = match known {
            Some(known) if known.path == canonical && known.stamp == current => (known.digest, current),
            _ => hash_file(&canonical)?,
        };
        let mut pinned = lock(&PINNED);
        pinned.retain(|(known, _, _)| *known != canonical);
        if pinned.len() >= MAX_PINNED {
            pinned.remove(0);
        }
        pinned.push((canonical.clone(), stamp, digest));
        drop(pinned);
        Ok(Self { path: canonical, digest, stamp: Mutex::new(stamp) })
    }

    /// The pinned digest.
    pub(crate) fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// The pinned digest with the path and the identity it was last verified under.
    pub(crate) fn describe(&self) -> BinaryDigest {
        BinaryDigest { path: self.path.clone(), stamp: *lock(&self.stamp), digest: self.digest }
    }

    /// The canonical path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Refuse the binary if it is no longer the pinned one. Its content is
    /// hashed again whenever its `stat` identity changed.
    pub(crate) fn verify(&self) -> Result<(), WorkerError> {
        let metadata =
            fs::metadata(&self.path).map_err(|source| WorkerError::Binary { path: self.path.clone(), source })?;
        let mut stamp = lock(&self.stamp);
        if BinaryStamp::of(&metadata) == *stamp {
            return Ok(());
        }
        let (digest, fresh) = hash_file(&self.path)?;
        if digest != self.digest {
            return Err(WorkerError::BinaryChanged {
                path: self.path.clone(),
                expected: hex(&self.digest),
                found: hex(&digest),
            });
        }
        *stamp = fresh;
        Ok(())
    }
}

/// A snapshot of a pool's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStatus {
    /// Workers serving a request (or being spawned for one).
    pub active: usize,
    /// Workers waiting, reset, for the next request.
    pub idle: usize,
    /// Workers spawned since the pool was created.
    pub spawned: u64,
    /// Workers killed (crashed, timed out, over a limit, broke the protocol,
    /// failed a reset, or surplus).
    pub discarded: u64,
    /// The most requests that ever held a slot at once.
    pub peak_active: usize,
}

#[derive(Debug, Default)]
struct PoolState {
    idle: Vec<WorkerProcess>,
    active: usize,
    spawned: u64,
    discarded: u64,
    peak_active: usize,
}

/// The pool behind a worker executor.
#[derive(Debug)]
pub(crate) struct Pool {
    config: WorkerConfig,
    pin: BinaryPin,
    context: ToolContext,
    identity: String,
    state: Mutex<PoolState>,
    freed: Condvar,
    pids: Registry,
}

/// A taken slot; dropping it gives the slot back.
struct Slot<'p> {
    pool: &'p Pool,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.pool.state);
        state.active -= 1;
        self.pool.freed.notify_one();
    }
}

impl Pool {
    pub(crate) fn new(mut config: WorkerConfig) -> Result<Self, WorkerError> {
        if config.max_active == 0 {
            return Err(WorkerError::Config { reason: "max_active must be at least 1".to_owned() });
        }
        if config.handshake_timeout.is_zero() {
            return Err(WorkerError::Config { reason: "handshake_timeout must be positive".to_owned() });
        }
        config.max_idle = config.max_idle.min(config.max_active);
        let pin = BinaryPin::new(&config.path, config.known_digest.as_ref())?;
        let context = ToolContext::try_new(ExecGrant::Only(vec![pin.path().to_owned()]))
            .map_err(|source| WorkerError::Spawn { source })?;
        Ok(Self {
            config,
            pin,
            context,
            identity: protocol::build_identity(),
            state: Mutex::new(PoolState::default()),
            freed: Condvar::new(),
            pids: Registry::default(),
        })
    }

    pub(crate) fn config(&self) -> &WorkerConfig {
        &self.config
    }

    pub(crate) fn pin(&self) -> &BinaryPin {
        &self.pin
    }

    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    /// The process ids of the live workers (spawned and not yet reaped).
    pub(crate) fn pids(&self) -> Vec<u32> {
        lock(&self.pids).iter().copied().collect()
    }

    pub(crate) fn status(&self) -> PoolStatus {
        let state = lock(&self.state);
        PoolStatus {
            active: state.active,
            idle: state.idle.len(),
            spawned: state.spawned,
            discarded: state.discarded,
            peak_active: state.peak_active,
        }
    }

    /// The sandbox policy of a worker sized for `max_memory_bytes`: the
    /// configured policy with its address space capped at the budget plus
    /// [`ADDRESS_SPACE_HEADROOM`], no file writes, and few descriptors.
    pub(crate) fn sandbox_for(&self, max_memory_bytes: u64) -> SandboxPolicy {
        let policy: SandboxPolicy = self.config.effective_sandbox();
        let mut limits = policy.limits().clone();
        let address_space = max_memory_bytes.saturating_add(ADDRESS_SPACE_HEADROOM);
        limits.address_space_bytes =
            Some(limits.address_space_bytes.map_or(address_space, |set| set.min(address_space)));
        limits.file_size_bytes = Some(0);
        limits.open_files = Some(limits.open_files.map_or(WORKER_OPEN_FILES, |set| set.min(WORKER_OPEN_FILES)));
        policy.rlimits(limits)
    }

    /// Take a slot (waiting until `deadline`, or until `interrupt` says stop),
    /// with an idle worker sized for `memory` if there is one.
    fn acquire(
        &self,
        memory: u64,
        deadline: Instant,
        interrupt: &dyn Interrupt,
    ) -> Option<(Slot<'_>, Option<WorkerProcess>)> {
        let mut state = lock(&self.state);
        loop {
            if state.active < self.config.max_active {
                state.active += 1;
                state.peak_active = state.peak_active.max(state.active);
                let reused = state
                    .idle
                    .iter()
                    .position(|worker| worker.memory_class == memory)
                    .map(|index| state.idle.swap_remove(index));
                // An idle worker that sent anything since its reset is not
                // trusted with another run.
                let reused = match reused {
                    Some(mut worker) => {
                        if worker.is_quiet() {
                            Some(worker)
                        } else {
                            drop(worker);
                            state.discarded += 1;
                            None
                        }
                    }
                    None => None,
                };
                if reused.is_none() && state.active + state.idle.len() > self.config.max_active {
                    // Make room: an idle worker sized for another budget goes,
                    // killed and reaped before anything new is spawned.
                    drop(state.idle.pop());
                    state.discarded += 1;
                }
                return Some((Slot { pool: self }, reused));
            }
            let now = Instant::now();
            if now >= deadline || interrupt.interrupted() {
                return None;
            }
            let wait = (deadline - now).min(interrupt::POLL);
            state = self.freed.wait_timeout(state, wait).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Give a worker back: idle if it reset cleanly (`reusable`, see
    /// [`session::serve`]) and there is room, otherwise killed. Either way
    /// before its slot is released.
    fn release(&self, worker: WorkerProcess, reusable: bool) {
        let keep = reusable && worker.runs < self.config.max_runs_per_worker;
        let mut state = lock(&self.state);
        if keep && state.idle.len() < self.config.max_idle {
            state.idle.push(worker);
        } else {
            state.discarded += 1;
            drop(state);
            drop(worker);
        }
    }

    fn spawn(&self, memory: u64, deadline: Instant) -> Result<WorkerProcess, WorkerError> {
        self.pin.verify()?;
        let wait = self.config.handshake_timeout.min(deadline.saturating_duration_since(Instant::now()));
        let worker = WorkerProcess::spawn(
            &self.pids,
            Launch { program: self.pin.path(), args: &self.config.args },
            &self.context,
            Arc::new(self.sandbox_for(memory)),
            memory,
            wait.max(Duration::from_millis(1)),
            &self.identity,
        )?;
        lock(&self.state).spawned += 1;
        Ok(worker)
    }

    /// A worker for a request under `limits` that began at `started`: a slot
    /// (waiting for one until the deadline) and an idle worker or a new one.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    fn checkout(
        &self,
        limits: &ExecutionLimits,
        started: Instant,
        interrupt: &dyn Interrupt,
    ) -> Result<(Slot<'_>, WorkerProcess), ExecutionError> {
        let deadline = crate::limits::deadline_after(started, limits.max_request_duration);
        let Some((slot, idle)) = self.acquire(limits.max_memory_bytes, deadline, interrupt) else {
            if interrupt.interrupted() {
                return Err(cancelled_error(started));
            }
            return Err(deadline_error(limits, started));
        };
        let mut worker = match idle {
            Some(worker) => worker,
            None => match self.spawn(limits.max_memory_bytes, deadline) {
                Ok(worker) => worker,
                Err(source) => {
                    drop(slot);
                    if Instant::now() >= deadline {
                        // The deadline cut the spawn or its handshake short.
                        return Err(deadline_error(limits, started));
                    }
                    return Err(ExecutionError::Worker { source });
                }
            },
        };
        worker.runs += 1;
        Ok((slot, worker))
    }

    /// Serve one Bash request.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    #[expect(
        clippy::too_many_arguments,
        reason = "the request's parts, as `execute` takes them, and the interpreter's budgets"
    )]
    pub(crate) fn execute_bash(
        &self,
        code: &str,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        bash: &vsh_bash::BashLimits,
        started: Instant,
        interrupt: &dyn Interrupt,
    ) -> Result<crate::BashOutcome, ExecutionError> {
        run::check_program(code, limits, started)?;
        let (slot, mut worker) = self.checkout(limits, started, interrupt)?;
        let deadline = crate::limits::deadline_after(started, limits.max_request_duration);
        let mut dispatcher = Dispatcher::new(OsHost::new(vfs, policy, limits, started), interrupt);
        let request = protocol::BashRequest {
            run: run::bash_run(code, limits, bash),
            memory_bytes: limits.max_memory_bytes,
            io_call_bytes: limits.max_io_call_bytes,
        };
        let outcome =
            session::serve_bash(&mut worker, &request, &mut dispatcher, limits, self.config.wall_grace, deadline);
        self.release(worker, outcome.reusable);
        drop(slot);
        match outcome.end {
            Ok(end) => run::conclude_bash(end, &mut dispatcher, limits, started),
            Err(source) => Err(ExecutionError::Worker { source }),
        }
    }

    /// Serve one request.
    #[expect(clippy::result_large_err, reason = "see `crate::execute`")]
    #[expect(clippy::too_many_arguments, reason = "the request's parts and what it may call besides")]
    pub(crate) fn execute(
        &self,
        code: &str,
        vfs: &mut VirtualFs,
        policy: &CallPolicy,
        limits: &ExecutionLimits,
        started: Instant,
        interrupt: &dyn Interrupt,
        nested: Nested<'_>,
    ) -> Result<MontyOutcome, ExecutionError> {
        run::check_program(code, limits, started)?;
        let (slot, mut worker) = self.checkout(limits, started, interrupt)?;
        let deadline = crate::limits::deadline_after(started, limits.max_request_duration);
        let mut dispatcher = Dispatcher::new(OsHost::new(vfs, policy, limits, started), interrupt).with_nested(nested);
        let outcome = session::serve(&mut worker, code, &mut dispatcher, limits, self.config.wall_grace, deadline);
        self.release(worker, outcome.reusable);
        drop(slot);
        match outcome.end {
            Ok(end) => run::conclude(end, &mut dispatcher, outcome.stdout, outcome.output_bytes, limits, started),
            Err(source) => Err(ExecutionError::Worker { source }),
        }
    }
}

/// The cancellation of a request that ended before it ran.
fn cancelled_error(started: Instant) -> ExecutionError {
    let stats = ExecutionStats { duration_ns: nanos(started.elapsed()), ..ExecutionStats::default() };
    ExecutionError::Cancelled { stdout: String::new(), stats, denied: Vec::new() }
}

/// The request-duration limit, for a request that ended before it ran.
fn deadline_error(limits: &ExecutionLimits, started: Instant) -> ExecutionError {
    let limit = LimitExceeded {
        limit: LimitKind::RequestDuration,
        attempted: nanos(started.elapsed()),
        max: nanos(limits.max_request_duration),
    };
    let stats = ExecutionStats { duration_ns: nanos(started.elapsed()), ..ExecutionStats::default() };
    ExecutionError::Limit { limit, stdout: String::new(), stats, denied: Vec::new() }
}
