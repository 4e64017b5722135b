//! [`RuntimeConfig`]: where the workspace and vsh's own data live, and which policy applies.

use std::path::{Path, PathBuf};

use vsh_host::LockWait;
use vsh_policy::PolicyProfile;
use vsh_vfs::SnapshotLimits;

use vsh_monty::{ResultCompatibility, WorkerConfig};

use crate::HookConfig;

/// Configuration of a [`crate::Runtime`].
///
/// ```
/// use vsh::{PolicyProfile, RuntimeConfig};
/// let config = RuntimeConfig::new("/srv/repo")
///     .with_data_directory("/var/lib/vsh/repo")
///     .with_policy_profile(PolicyProfile::Strict);
/// assert_eq!(config.policy_profile(), PolicyProfile::Strict);
/// ```
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub(crate) workspace_root: PathBuf,
    pub(crate) data_directory: Option<PathBuf>,
    pub(crate) policy_profile: Option<PolicyProfile>,
    pub(crate) policy_file: Option<PathBuf>,
    pub(crate) policy_text: Option<String>,
    pub(crate) snapshot_limits: SnapshotLimits,
    pub(crate) hook: Option<HookConfig>,
    pub(crate) execution: Execution,
    pub(crate) max_idle_workers: Option<usize>,
    pub(crate) result_compatibility: ResultCompatibility,
    pub(crate) lock_wait: LockWait,
    pub(crate) faults: Option<CommitFaults>,
    pub(crate) authority: Authority,
    pub(crate) allowed_mounts: Vec<vsh_types::VPath>,
    pub(crate) durable_previews: Option<DurablePreviews>,
    pub(crate) bash: Option<BashConfig>,
    pub(crate) commands: bool,
    pub(crate) command_env: Vec<(String, String)>,
    pub(crate) command_tools: Vec<std::path::PathBuf>,
    pub(crate) scratch: Option<Vec<String>>,
    pub(crate) scratch_bound: u64,
    pub(crate) command_network: vsh_sandbox::NetworkAccess,
    pub(crate) command_ports: Vec<u16>,
    pub(crate) command_unix_sockets: bool,
    pub(crate) session: Option<String>,
}

/// The scratch directories real commands get by default
/// ([`RuntimeConfig::with_scratch`]).
pub const DEFAULT_SCRATCH: [&str; 4] = ["target", "node_modules/.cache", "__pycache__", ".pytest_cache"];

/// Bash programs ([`crate::Language::Bash`]), enabled by
/// [`RuntimeConfig::with_bash`]: by default the `vsh-bash-bounded-v1`
/// profile (vsh's own interpreter) with these interpreter budgets, on top of
/// each run's [`crate::ExecutionBudget`]; with [`BashConfig::confined`], real
/// `/bin/bash` in a candidate workspace (`vsh-bash-confined-v1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BashConfig {
    /// The interpreter's own budgets (commands, loop iterations, parser
    /// operations, work units, input, intermediate bytes); also those of a
    /// Monty program's `vsh_bash`, which always runs in the interpreter.
    pub limits: vsh_monty::BashLimits,
    /// Which Bash runs a [`crate::Language::Bash`] program.
    pub profile: BashProfile,
}

/// Which Bash runs a [`crate::Language::Bash`] program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BashProfile {
    /// `vsh-bash-bounded-v1`: vsh's own interpreter, every file access an
    /// access of the image, the builtins and the commands it implements and
    /// nothing else, bounded by [`BashConfig::limits`].
    #[default]
    Bounded,
    /// `vsh-bash-confined-v1`: real `/bin/bash -c PROGRAM`, run as a real
    /// command in a candidate workspace (see [`RuntimeConfig::with_commands`]
    /// for what it gets and needs): any program on the system, confined.
    Confined,
}

impl BashProfile {
    /// The profile's name, as receipts show it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bounded => vsh_monty::BASH_PROFILE,
            Self::Confined => vsh_monty::BASH_CONFINED_PROFILE,
        }
    }
}

impl BashConfig {
    /// The bounded profile with the default budgets.
    pub fn new() -> Self {
        Self::default()
    }

    /// The confined profile: real `/bin/bash` in a candidate workspace.
    pub fn confined() -> Self {
        Self { profile: BashProfile::Confined, ..Self::default() }
    }

    /// Replace the interpreter's budgets.
    #[must_use]
    pub fn with_limits(mut self, limits: vsh_monty::BashLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// Durable previews: an auto-approved preview stored with its artifact, so
/// that another process (a later `vsh commit`, a server) can commit it,
/// revalidated as always (see [`RuntimeConfig::with_durable_previews`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurablePreviews {
    /// Most durable previews waiting for a commit at once (default 256).
    pub max_count: usize,
    /// Most bytes their stored artifacts occupy together (default 256 MiB).
    pub max_bytes: u64,
    /// How long a preview may wait for its commit, in milliseconds (default
    /// one hour); after that it expires and cannot commit.
    pub ttl_ms: u64,
}

impl Default for DurablePreviews {
    fn default() -> Self {
        Self { max_count: 256, max_bytes: 256 << 20, ttl_ms: 60 * 60 * 1000 }
    }
}

/// Where the authority key comes from.
#[derive(Clone)]
pub(crate) enum Authority {
    /// The user's key file ([`vsh_store::AuthorityKeyFile::default_location`]).
    DefaultFile,
    /// A key file at this path.
    File(PathBuf),
    /// A key the application holds.
    Key(vsh_types::AuthorityKey),
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::DefaultFile => f.write_str("DefaultFile"),
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Key(key) => f.debug_tuple("Key").field(key).finish(),
        }
    }
}

/// A fault injector for commits (see [`RuntimeConfig::with_commit_fault_injector`]).
#[derive(Clone)]
pub(crate) struct CommitFaults(pub(crate) std::sync::Arc<dyn vsh_commit::FaultInjector + Send + Sync>);

impl std::fmt::Debug for CommitFaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitFaults")
    }
}

/// Where Monty programs run.
#[derive(Debug, Clone)]
pub(crate) enum Execution {
    /// The confined worker found by [`vsh_monty::default_worker_path`]; opening
    /// fails if there is none.
    DefaultWorker,
    /// The confined worker with this configuration.
    Worker(Box<WorkerConfig>),
    /// In this process (trusted programs and tests only).
    InProcess,
}

impl RuntimeConfig {
    /// A configuration for the workspace at `workspace_root`, with vsh's data in
    /// `<workspace>/.vsh/data`, the Balanced policy and default limits.
    pub fn new(workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            workspace_root: workspace_root.into(),
            data_directory: None,
            policy_profile: None,
            policy_file: None,
            policy_text: None,
            snapshot_limits: SnapshotLimits::default(),
            hook: None,
            execution: Execution::DefaultWorker,
            max_idle_workers: None,
            result_compatibility: ResultCompatibility::Native,
            lock_wait: LockWait::default(),
            faults: None,
            authority: Authority::DefaultFile,
            allowed_mounts: Vec::new(),
            durable_previews: None,
            session: None,
            bash: None,
            commands: false,
            command_env: Vec::new(),
            command_tools: Vec::new(),
            scratch: None,
            scratch_bound: vsh_types::space::MAX_SCRATCH_BYTES,
            command_network: vsh_sandbox::NetworkAccess::None,
            command_ports: Vec::new(),
            command_unix_sockets: false,
        }
    }

    /// Let programs (and commits) cross the mount points at `mounts`
    /// (workspace-relative). By default no mount point inside the workspace
    /// is crossed: a bind mount of a directory outside it is refused like a
    /// symlink out, and counts as a denied access. Part of the configuration
    /// every transaction is bound to.
    #[must_use]
    pub fn with_allowed_mounts(mut self, mounts: impl IntoIterator<Item = vsh_types::VPath>) -> Self {
        self.allowed_mounts = mounts.into_iter().collect();
        self.allowed_mounts.sort();
        self.allowed_mounts.dedup();
        self
    }

    /// Authenticate this workspace's transaction log and commit records with
    /// `key`, which the application keeps somewhere no guest and no workspace
    /// file can reach (by default the user's key file is used, see
    /// [`vsh_store::AuthorityKeyFile`]). Whoever can write the data directory
    /// without the key cannot approve work: a frame they add fails closed.
    /// Every runtime on a workspace must use the same key.
    #[must_use]
    pub fn with_authority_key(mut self, key: vsh_types::AuthorityKey) -> Self {
        self.authority = Authority::Key(key);
        self
    }

    /// Load (or create) the authority key from the key file at `path`
    /// instead of the user's default one. It must lie outside the workspace.
    #[must_use]
    pub fn with_authority_key_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.authority = Authority::File(path.into());
        self
    }

    /// Ask `faults` at every durable step of every commit this runtime makes
    /// (see [`vsh_commit::FaultPoint`]): for crash and race tests of an
    /// application built on vsh. An injector that stops a commit leaves the
    /// disk as a crash there would; one that acts and goes on races it.
    #[doc(hidden)]
    #[must_use]
    pub fn with_commit_fault_injector(
        mut self,
        faults: std::sync::Arc<dyn vsh_commit::FaultInjector + Send + Sync>,
    ) -> Self {
        self.faults = Some(CommitFaults(faults));
        self
    }

    /// How long a commit, a recovery or a restore waits for the workspace's
    /// commit lock while another process holds it, and whom it tells once it
    /// has waited a moment (default: 60 s, nobody). Past the timeout the call
    /// fails with a typed error ([`vsh_commit::CommitError::LockTimeout`]
    /// inside [`crate::VshError::Commit`]). Opening a runtime and read-only calls
    /// never wait for it. A run whose real commands need the scratch
    /// directories while another run's commands use them waits the same way
    /// (and at most its request's deadline), then fails with
    /// [`crate::VshError::ScratchBusy`].
    #[must_use]
    pub fn with_lock_wait(mut self, wait: LockWait) -> Self {
        self.lock_wait = wait;
        self
    }

    /// Enable Bash programs ([`crate::Language::Bash`]) under `bash`; without
    /// it a Bash run is [`VshError::LanguageUnavailable`](crate::VshError::LanguageUnavailable).
    /// They run where Monty programs run (the confined worker, or in process
    /// with [`RuntimeConfig::with_in_process_execution`]). Under
    /// [`BashConfig::confined`] (real `/bin/bash` in a candidate) the
    /// snapshot limits are raised as [`RuntimeConfig::with_commands`] says.
    #[must_use]
    pub fn with_bash(mut self, bash: BashConfig) -> Self {
        if bash.profile == BashProfile::Confined {
            self.raise_snapshot_limits_for_commands();
        }
        self.bash = Some(bash);
        self
    }

    /// Snapshot limits still at their default become
    /// [`SnapshotLimits::for_commands`].
    fn raise_snapshot_limits_for_commands(&mut self) {
        if self.snapshot_limits == SnapshotLimits::default() {
            self.snapshot_limits = SnapshotLimits::for_commands();
        }
    }

    /// Enable real commands ([`crate::Language::Command`], and `vsh_exec`
    /// in Monty programs): each runs as a confined child in a candidate
    /// workspace, a FUSE filesystem served from the run's image and mounted
    /// only in the child's own mount namespace, where it covers the
    /// workspace's own path (the command finds the workspace where it is),
    /// with a private `/tmp`. Needs `/dev/fuse` and the privilege to mount
    /// (vsh as root); without them a run fails closed, naming what is
    /// missing.
    ///
    /// Snapshot limits still at their default become
    /// [`SnapshotLimits::for_commands`] (a build reads more of the workspace
    /// than an edit does); limits set with
    /// [`RuntimeConfig::with_snapshot_limits`] are kept.
    #[must_use]
    pub fn with_commands(mut self) -> Self {
        self.commands = true;
        self.raise_snapshot_limits_for_commands();
        self
    }

    /// Let real commands read and execute from these host directories (a
    /// toolchain, such as `rustc --print sysroot`), at their own paths,
    /// never write them; a directory beneath one the command's user could
    /// not search (`/root`) is still reachable (see
    /// `vsh_sandbox::FuseMount::with_tool_dir`). Put their `bin` on the
    /// commands' `PATH` with [`RuntimeConfig::with_command_env`]. Part of the
    /// binding.
    #[must_use]
    pub fn with_command_tools<P: Into<std::path::PathBuf>>(mut self, dirs: impl IntoIterator<Item = P>) -> Self {
        self.command_tools.extend(dirs.into_iter().map(Into::into));
        self
    }

    /// What network real commands reach: none by default (no socket but a
    /// stream `socketpair`, every TCP bind and connect denied, no unix
    /// socket of the host reachable); a private loopback of their own
    /// ([`vsh_sandbox::NetworkAccess::Loopback`]: a test's TCP server and
    /// client reach each other, nothing outside does; no unix sockets of
    /// their own either); or the host's network, its unix sockets included
    /// ([`vsh_sandbox::NetworkAccess::All`]). Part of the
    /// binding; each receipt's sandbox report says what the kernel enforces.
    #[must_use]
    pub fn with_command_network(mut self, access: vsh_sandbox::NetworkAccess) -> Self {
        self.command_network = access;
        self
    }

    /// Let real commands make unix sockets of their own (a test that serves
    /// on one in its `/tmp`, Python's forkserver), which, below Landlock ABI
    /// 9, also lets them connect to any socket file they can name, a host
    /// daemon's included; the IPC axis of each receipt's report says so.
    /// Off by default (the host's network implies it). Part of the binding.
    #[must_use]
    pub fn with_command_unix_sockets(mut self) -> Self {
        self.command_unix_sockets = true;
        self
    }

    /// Let real commands connect to these TCP ports (on any host: the
    /// kernel's rule matches ports, not addresses), besides what
    /// [`RuntimeConfig::with_command_network`] allows: a database or a
    /// registry a test needs. The network axis is then enforced in part
    /// (TCP streams only, connects only to these ports), as each receipt's
    /// report says. Part of the binding.
    #[must_use]
    pub fn with_command_ports(mut self, ports: impl IntoIterator<Item = u16>) -> Self {
        self.command_ports = ports.into_iter().collect();
        self.command_ports.sort_unstable();
        self.command_ports.dedup();
        self
    }

    /// The scratch directories of real commands, instead of those the policy
    /// names (`[commands] scratch` in a policy file) or, when it names none,
    /// [`DEFAULT_SCRATCH`] (`target`, `node_modules/.cache`, `__pycache__`
    /// and `.pytest_cache`). Each name (a relative path of plain names) is,
    /// for a command, a directory of its own in the data directory
    /// (`scratch/<name>`, `/` written `%2F`), bound over that path of the
    /// candidate: written directly and kept between runs (a second
    /// `cargo test` builds incrementally), never part of the image, the diff
    /// or a commit. A nested name (`node_modules/.cache`) is bound only where
    /// its parent is a directory, one whose last name is `target` only where
    /// a `Cargo.toml` or `pom.xml` is beside it (elsewhere `target` is the
    /// project's own: seen, and changed in the diff). `__pycache__` is Python's bytecode: commands
    /// get `PYTHONPYCACHEPREFIX` pointing at its directory (in their `/tmp`)
    /// instead of `PYTHONDONTWRITEBYTECODE`, so no `__pycache__` reaches a
    /// diff and the second run finds the bytecode compiled. What one command
    /// leaves there the next one finds: it is as untrusted as the commands.
    /// The names are part of the binding.
    #[must_use]
    pub fn with_scratch<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.scratch = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The most bytes the scratch directories keep for the next run
    /// (default [`vsh_types::space::MAX_SCRATCH_BYTES`], 20 GiB): a run
    /// whose commands took much of their filesystem (1 GiB, or this bound if
    /// it is less) measures them afterwards, and clears them when they hold
    /// more, with [`crate::Warning::ScratchCleared`]. While commands run, the
    /// filesystem may lose no more than 20 GiB whatever this says.
    #[must_use]
    pub fn with_scratch_bound(mut self, max_bytes: u64) -> Self {
        self.scratch_bound = max_bytes;
        self
    }

    /// Set these variables in the environment of every real command (a
    /// `vsh exec`, or a Monty program's `vsh_exec`), on top of the default
    /// `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME=/tmp`, `LANG=C.UTF-8`,
    /// `PYTHONDONTWRITEBYTECODE=1`, `GIT_OPTIONAL_LOCKS=0`;
    /// nothing else of vsh's own environment reaches a command. A later
    /// value of the same name wins. The environment is part of the
    /// configuration every such transaction is bound to. A name that is
    /// empty or holds `=` or NUL, or a value holding NUL, fails the
    /// runtime's open ([`crate::VshError::InvalidCommand`]); a variable
    /// that can change what code a program loads (`LD_PRELOAD` and the
    /// like) fails the command that would get it.
    #[must_use]
    pub fn with_command_env<K: Into<String>, V: Into<String>>(
        mut self,
        variables: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.command_env.extend(variables.into_iter().map(|(key, value)| (key.into(), value.into())));
        self
    }

    /// The session this runtime's work belongs to: one agent's connection
    /// (`vsh serve` makes one per server), or whatever label a caller gives
    /// its runs (`$VSH_SESSION` for the command line). What a session's
    /// programs read and its work wrote is its own view of the workspace: a
    /// run of it that replaces a file unread waits for a reviewer
    /// (`unseen-change`) when the file holds content the session never saw
    /// there, whoever changed it since, through vsh or not; without a
    /// session, when it differs from what any run last saw. An empty label
    /// is none.
    #[must_use]
    pub fn with_session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into()).filter(|session| !session.is_empty());
        self
    }

    /// Store auto-approved previews durably, within `limits`, instead of only
    /// in this runtime's memory (the default, as the seed facade has it): a
    /// later process can then commit them ([`crate::Runtime::commit`]),
    /// until they expire. A preview beyond the count or byte bound is
    /// [`VshError::DurablePreviewCapacity`](crate::VshError::DurablePreviewCapacity)
    /// and is rejected.
    #[must_use]
    pub fn with_durable_previews(mut self, limits: DurablePreviews) -> Self {
        self.durable_previews = Some(limits);
        self
    }

    /// Keep vsh's trusted data (blobs, transaction records) in `path` instead of
    /// `<workspace>/.vsh/data`. The directory is created if missing and is never
    /// opened through a symlink. If it lies inside the workspace it is hidden from
    /// and protected against programs like the default location.
    #[must_use]
    pub fn with_data_directory(mut self, path: impl Into<PathBuf>) -> Self {
        self.data_directory = Some(path.into());
        self
    }

    /// Choose the policy profile.
    #[must_use]
    pub fn with_policy_profile(mut self, profile: PolicyProfile) -> Self {
        self.policy_profile = Some(profile);
        self
    }

    /// Load the policy from a TOML policy file (see [`vsh_policy::PolicyFile`])
    /// instead of a built-in profile. The file names its own base profile; a bad
    /// file fails [`crate::Runtime::open`] with an error naming the field.
    #[must_use]
    pub fn with_policy_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.policy_file = Some(path.into());
        self
    }

    /// Use the policy file `text` (TOML, see [`vsh_policy::PolicyFile`]),
    /// for example a transaction's [`crate::RunPolicy`]; validated when the
    /// runtime opens. It wins over a policy file and a profile.
    #[must_use]
    pub fn with_policy_text(mut self, text: impl Into<String>) -> Self {
        self.policy_text = Some(text.into());
        self
    }

    /// The policy file, if one was set.
    pub fn policy_file(&self) -> Option<&Path> {
        self.policy_file.as_deref()
    }

    /// Bound what one run may read from the workspace into memory.
    #[must_use]
    pub fn with_snapshot_limits(mut self, limits: SnapshotLimits) -> Self {
        self.snapshot_limits = limits;
        self
    }

    /// Put a commit hook in the commit path (see [`crate::HookConfig`]). A
    /// direct [`crate::Runtime::commit`] of a transaction in the hook's scope is
    /// then refused; commit through `prepare_commit`/`resolve_commit` or
    /// [`crate::HookedRuntime`].
    #[must_use]
    pub fn with_commit_hook(mut self, hook: HookConfig) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Run programs in the confined worker binary at `path` (by default:
    /// `$VSH_MONTY_WORKER`, or `vsh-monty-worker` next to the current executable;
    /// [`crate::Runtime::open`] fails if neither exists).
    #[must_use]
    pub fn with_worker_path(self, path: impl Into<PathBuf>) -> Self {
        self.with_worker(WorkerConfig::new(path))
    }

    /// Run programs in a confined worker with this configuration (pool sizes,
    /// timeouts, sandbox, arguments).
    #[must_use]
    pub fn with_worker(mut self, worker: WorkerConfig) -> Self {
        self.execution = Execution::Worker(Box::new(worker));
        self
    }

    /// Keep at most `count` idle workers for reuse (0 disables reuse).
    #[must_use]
    pub fn with_max_idle_workers(mut self, count: usize) -> Self {
        self.max_idle_workers = Some(count);
        self
    }

    /// Run programs in this process instead of the confined worker: no crash
    /// isolation, no memory limit, no kernel confinement. For trusted programs
    /// and tests.
    #[must_use]
    pub fn with_in_process_execution(mut self) -> Self {
        self.execution = Execution::InProcess;
        self
    }

    /// Which result values are accepted (see [`ResultCompatibility`]).
    #[must_use]
    pub fn with_result_compatibility(mut self, compatibility: ResultCompatibility) -> Self {
        self.result_compatibility = compatibility;
        self
    }

    /// The workspace root as given.
    pub fn workspace_root(&self) -> &Path {
        &self.workspace_root
    }

    /// The data directory, if one was set.
    pub fn data_directory(&self) -> Option<&Path> {
        self.data_directory.as_deref()
    }

    /// The policy profile.
    pub fn policy_profile(&self) -> PolicyProfile {
        self.policy_profile.unwrap_or_default()
    }

    /// The snapshot limits.
    pub fn snapshot_limits(&self) -> SnapshotLimits {
        self.snapshot_limits
    }
}
