//! [`Runs`]: the stages of a run, from a fresh observed snapshot to a bound,
//! stored transaction: snapshot, execute, diff, policy, review, bind and
//! store (binding and storing are in [`bind`]). What happens to the result
//! (held as a preview, committed) is the runtime's.

mod bind;
mod command;
mod git;
mod gitconfig;
pub(crate) use command::command_env;

pub(crate) use bind::program_digest;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use vsh_host::CapDir;
use vsh_monty::{LimitExceeded, LimitKind, MontyExecutor};
use vsh_policy::{Decision, PolicyInput, TransactionPolicy};
use vsh_store::PendingArtifact;
use vsh_types::canon;
use vsh_types::{CanonicalDiff, DiffEntry, TransactionState, VPath};
use vsh_vfs::{Effect, ReviewLimits, SnapshotLimits, VirtualFs};

use crate::cancel::ExecutionCancellation;
use crate::evidence::{EvidenceOutput, MAX_VALUE_DEPTH, value_depth};
use crate::hook::HookConfig;
use crate::receipt::{Receipt, StageTimings};
use crate::records::Records;
use crate::request::{Language, ReceiptDetail, RunRequest};
use crate::{DurablePreviews, VshError};

/// Milliseconds since the Unix epoch by this machine's clock.
pub(crate) fn clock_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Nanoseconds since `since`, saturating.
pub(crate) fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A run's end as a transaction takes it: a Monty program that raised after
/// the policy refused it an access is decided (denied) and kept on record
/// with what it printed and raised, as a failed Bash program or command is
/// ([`EvidenceOutput::MontyRaised`]); anything else as it is. (A candidate's
/// step that raises is undone and is the step's error instead.)
fn raised_after_refusal(ran: Result<Executed, VshError>) -> Result<Executed, VshError> {
    match ran {
        Err(VshError::Execution(error)) => match *error {
            vsh_monty::ExecutionError::Exception { exception, stdout, stats, denied } if !denied.is_empty() => {
                let output = EvidenceOutput::MontyRaised { exception: exception.to_string(), stdout };
                Ok(Executed::of_output(output, stats, denied))
            }
            error => Err(VshError::Execution(Box::new(error))),
        },
        other => other,
    }
}

/// Whether `diff` writes content into a non-empty file that its group or
/// others may read, in a run that read the content of a file only its owner
/// could ([`vsh_policy::PolicyInput::widens_private_content`]): a private
/// file's mode is the one its read recorded, else the base's (recorded
/// too). Any such write, not only a copy of the very bytes: appended to
/// another file, prefixed, encoded or edited, the private bytes are as
/// readable (sec69 F3: only an exact copy waited). A file whose bytes the
/// policy never lets a program read (`unreadable`) is no such source: the
/// program could not have copied them, only guessed them, and a flag raised
/// by a right guess would tell the guess was right (the run's own append of
/// it reads its bytes, and so records a digest).
fn widens_private_content(
    vfs: &mut VirtualFs,
    diff: &CanonicalDiff,
    unreadable: &vsh_vfs::PathRule,
) -> Result<bool, VshError> {
    const READ_BY_OTHERS: u32 = 0o044;
    let readable_write = |entry: &&vsh_types::DiffEntry| {
        entry.after.is_some_and(|after| {
            after.kind == vsh_types::NodeKind::File
                && after.size > 0
                && after.mode & READ_BY_OTHERS != 0
                && entry.before.and_then(|before| before.content) != after.content
        })
    };
    if !diff.entries().iter().any(|entry| readable_write(&entry)) {
        return Ok(false);
    }
    let read: Vec<(VPath, vsh_types::Dependency)> = vfs
        .read_set()
        .entries
        .iter()
        .filter(|(path, dependency)| dependency.content.is_some() && !unreadable.holds(path))
        .map(|(path, dependency)| (path.clone(), dependency.clone()))
        .collect();
    for (path, dependency) in read {
        let mode = match dependency.size_mode {
            Some((_, mode)) => Some(mode),
            None => vfs.base_state_of(&path)?.map(|state| state.mode),
        };
        if mode.is_some_and(|mode| mode & READ_BY_OTHERS == 0) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The argv of a real command's program text, if it is a valid one.
pub(crate) fn command_argv(code: &str) -> Option<Vec<String>> {
    command::argv(code).ok().map(|command| command.argv)
}

/// The most changes of uncommitted work a [`crate::Warning::ScratchEmptied`] names.
const MAX_NAMED_CHANGES: usize = 3;

/// What the stored work `names` (transaction ids) changed, as `create
/// Cargo.lock`, at most [`MAX_NAMED_CHANGES`] and a count of the rest: for
/// a warning, so work that is not stored (any more) is left out.
fn stored_changes(records: &Records, names: &[String]) -> Vec<String> {
    let mut changes = Vec::new();
    let mut more = 0_usize;
    for name in names {
        let Ok(id) = vsh_types::TransactionId::parse_hex(name) else { continue };
        let Ok(Some(record)) = records.get(id) else { continue };
        if record.artifact.is_none() {
            continue;
        }
        let Ok(crate::records::StoredReceipt { receipt, .. }) = records.stored_receipt(id, record.state) else {
            continue;
        };
        for entry in &receipt.changes {
            if changes.len() < MAX_NAMED_CHANGES {
                changes.push(format!("{} {}", entry.kind.name(), entry.path));
            } else {
                more += 1;
            }
        }
    }
    if more > 0 {
        changes.push(format!("and {more} more"));
    }
    changes
}

/// Whether emptying the scratch directory stored as `name` is worth a
/// warning ([`crate::Warning::ScratchEmptied`]): a build's outputs are;
/// Python's bytecode and pytest's cache, rebuilt in a moment, are not.
fn worth_saying(name: &str) -> bool {
    !matches!(name, "__pycache__" | ".pytest_cache")
}

/// Directories that hold a build's output or a tool's cache: the name, and
/// the file its parent holds when it is one (`None`: the name alone says).
const BUILD_OUTPUT: [(&str, Option<&str>); 14] = [
    ("target", Some("Cargo.toml")),
    ("build", Some("Makefile")),
    ("build", Some("makefile")),
    ("build", Some("CMakeLists.txt")),
    ("build", Some("meson.build")),
    ("build", Some("pyproject.toml")),
    ("node_modules", Some("package.json")),
    (".mypy_cache", None),
    (".pytest_cache", None),
    (".ruff_cache", None),
    (".tox", None),
    (".nox", None),
    (".next", Some("package.json")),
    (".gradle", None),
];

/// The most directories a [`crate::Warning::BuildOutput`] names.
const MAX_BUILD_OUTPUT_DIRS: usize = 8;

/// The directories of [`BUILD_OUTPUT`] that `diff` creates paths under
/// (the topmost one on each path), with how many: scratch directories are
/// never in a diff, so these are not ones.
fn build_output(vfs: &mut VirtualFs, diff: &CanonicalDiff) -> Vec<(VPath, u64)> {
    let mut found: Vec<(VPath, u64)> = Vec::new();
    for entry in diff.entries().iter().filter(|entry| entry.kind == vsh_types::DiffKind::Create) {
        let Some(dir) = entry.path.ancestors().into_iter().chain([entry.path.clone()]).find(|dir| {
            let Some(name) = dir.file_name() else { return false };
            BUILD_OUTPUT.iter().any(|(build, marker)| {
                *build == name
                    && marker.is_none_or(|marker| {
                        dir.parent()
                            .and_then(|parent| parent.child(marker).ok())
                            .is_some_and(|marker| vfs.kind(&marker).ok().flatten() == Some(vsh_types::NodeKind::File))
                    })
            })
        }) else {
            continue;
        };
        if let Some((_, count)) = found.iter_mut().find(|(known, _)| *known == dir) {
            *count += 1;
        } else if found.len() < MAX_BUILD_OUTPUT_DIRS {
            found.push((dir, 1));
        }
    }
    found
}

/// `entries` as a receipt shows them to whoever ran the program: a path
/// `calls` protects from reading has no content digest (nor stamp) on
/// either side, since a digest of bytes the program may not read, or of
/// bytes made from them (a mode change, an append), would confirm its
/// guesses at them (compute the digest of a guess, compare). What is
/// committed and what a reviewer's review reads are the diff itself.
pub(crate) fn shown_changes(
    entries: &[vsh_types::DiffEntry],
    calls: &vsh_policy::CallPolicy,
) -> Vec<vsh_types::DiffEntry> {
    entries
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            if side_unreadable(&entry, calls) {
                // Nor the after state's digest: a mode change keeps the
                // bytes, an append extends them, so it is a digest of the
                // protected bytes too (a guess checked offline).
                for state in [entry.before.as_mut(), entry.after.as_mut()].into_iter().flatten() {
                    if state.kind != vsh_types::NodeKind::Directory {
                        state.content = None;
                        state.stamp = None;
                    }
                }
            }
            entry
        })
        .collect()
}

/// Whether `entries` name a digest of the content of a path `calls`
/// protects from reading (see [`crate::Receipt::diff_withheld`]).
pub(crate) fn names_unreadable_content(entries: &[vsh_types::DiffEntry], calls: &vsh_policy::CallPolicy) -> bool {
    // The before state of such a path is known by its stamp, never its
    // digest, but an after state may be made from the protected bytes (a
    // mode change keeps them, an append extends them), and nothing in the
    // diff tells it from one made of the program's own bytes: any digest on
    // either side withholds it.
    entries.iter().any(|entry| {
        side_unreadable(entry, calls)
            && [entry.before, entry.after].into_iter().flatten().any(|state| state.content.is_some())
    })
}

/// Whether `entry` has a state, before or after, whose content (a
/// directory has none) `calls` protects from reading: a file the run made
/// there is that path's protected content to whoever reads the receipt.
fn side_unreadable(entry: &vsh_types::DiffEntry, calls: &vsh_policy::CallPolicy) -> bool {
    [entry.before, entry.after].into_iter().flatten().any(|state| state.kind != vsh_types::NodeKind::Directory)
        && content_unreadable(&entry.path, calls)
}

/// Whether `calls` refuses a program reading the bytes at `path`.
fn content_unreadable(path: &VPath, calls: &vsh_policy::CallPolicy) -> bool {
    calls.authorize(path, vsh_policy::AccessKind::ContentRead).is_err()
}

/// A Bash script's or a command's failure as the facade's error: a
/// cancellation, or a terminal failure with what it changed so far (for
/// diagnosis only).
fn bash_failure(error: vsh_monty::ExecutionError, vfs: &mut VirtualFs, calls: &vsh_policy::CallPolicy) -> VshError {
    use vsh_monty::ExecutionError;
    match error {
        ExecutionError::Cancelled { .. } => VshError::Cancelled,
        error @ ExecutionError::Bash { .. } => {
            let diff = vfs.canonical_diff();
            let changes_complete = diff.is_ok();
            let changes = diff.map(|diff| shown_changes(diff.entries(), calls)).unwrap_or_default();
            VshError::Bash { source: Box::new(error), changes, changes_complete }
        }
        error => VshError::Execution(Box::new(error)),
    }
}

/// A Monty program's failure as the facade's error: an uncaught exception
/// or a budget that ran out, after the program changed the image, with what
/// it had changed ([`VshError::Raised`], for diagnosis only: nothing is
/// kept); any other failure, or one that changed nothing, as it is.
fn monty_failure(error: vsh_monty::ExecutionError, vfs: &mut VirtualFs, calls: &vsh_policy::CallPolicy) -> VshError {
    use vsh_monty::ExecutionError;
    if !matches!(error, ExecutionError::Exception { .. } | ExecutionError::Limit { .. }) || vfs.effects().is_empty() {
        return VshError::Execution(Box::new(error));
    }
    let diff = vfs.canonical_diff();
    let changes_complete = diff.is_ok();
    let changes = diff.map(|diff| shown_changes(diff.entries(), calls)).unwrap_or_default();
    if changes.is_empty() && changes_complete {
        // Changes it undid itself (a file made and removed): none.
        return VshError::Execution(Box::new(error));
    }
    VshError::Raised { source: Box::new(error), changes, changes_complete }
}

/// How a Bash program or a real command ended, as the facade takes it: its
/// outcome; with `accept_failure`, a non-zero exit status too (recorded);
/// a non-zero exit after the policy refused it an access too, so the
/// refusal is decided (denied: never committable) and kept on record for
/// the operator (`vsh log`); anything else a failure.
fn script_end(
    ran: Result<vsh_monty::BashOutcome, vsh_monty::ExecutionError>,
    profile: &str,
    accept_failure: bool,
    (vfs, calls): (&mut VirtualFs, &vsh_policy::CallPolicy),
) -> Result<Executed, VshError> {
    match ran {
        Ok(outcome) => Ok(Executed::of_script(profile, outcome)),
        Err(vsh_monty::ExecutionError::Bash {
            failure: vsh_monty::BashFailure::Exit(_) | vsh_monty::BashFailure::Signal(_),
            exit_code,
            stdout,
            stderr,
            stats,
            denied,
        }) if accept_failure || !denied.is_empty() => Ok(Executed {
            output: EvidenceOutput::Bash { profile: profile.to_owned(), exit_code, stdout, stderr },
            stats,
            denied,
            scratch_emptied: Vec::new(),
            scratch_cleared: 0,
            scratch_regranted: None,
            scratch_limit: 0,
            waited_ns: 0,
        }),
        Err(error) => Err(bash_failure(error, vfs, calls)),
    }
}

/// What the stages after the diff work on ([`Runs::conclude`]).
pub(crate) struct Concluding<'r, 'a> {
    /// What is bound: the program (or a candidate's transcript), its
    /// language, intent, budget, mode and receipt detail.
    pub(crate) request: &'r RunRequest<'a>,
    /// The image the diff is of.
    pub(crate) vfs: &'r mut VirtualFs,
    /// The diff to decide, bind and store.
    pub(crate) diff: CanonicalDiff,
    /// What the program (or the candidate's steps) produced.
    pub(crate) outcome: Executed,
    /// The stages timed so far.
    pub(crate) timings: StageTimings,
}

/// A run that reached its decision, bound and stored.
pub(crate) struct Ran {
    pub(crate) artifact: PendingArtifact,
    pub(crate) receipt: Receipt,
    /// For a process-local preview, the new contents its diff names (not
    /// written to the blob store until something acts on the preview).
    pub(crate) contents: vsh_commit::MemoryContents,
}

/// Why the scratch directories were emptied before a run's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScratchRegrant {
    /// The commands that built them were granted otherwise.
    Grants,
    /// The workspace's policy lets commands read or write otherwise now.
    Policy,
}

/// What a program produced, in either language.
pub(crate) struct Executed {
    pub(crate) output: EvidenceOutput,
    pub(crate) stats: vsh_monty::ExecutionStats,
    pub(crate) denied: Vec<vsh_policy::DeniedAccess>,
    /// The earlier runs whose uncommitted work made the scratch directories
    /// be emptied before this run's commands (see [`crate::Warning::ScratchEmptied`]).
    pub(crate) scratch_emptied: Vec<String>,
    /// How long it waited for the scratch directories before it ran.
    pub(crate) waited_ns: u64,
    /// The bytes the scratch directories held past their bound after its
    /// commands, when they were cleared for it (see
    /// [`crate::Warning::ScratchCleared`]); 0 when they were not.
    pub(crate) scratch_cleared: u64,
    /// The scratch directories held a build that was emptied first, since
    /// the commands that made it were granted otherwise or ran under other
    /// rules (see [`crate::Warning::ScratchRegranted`]).
    pub(crate) scratch_regranted: Option<ScratchRegrant>,
    /// The bound the scratch directories were measured against, when they were.
    pub(crate) scratch_limit: u64,
}

impl Executed {
    /// A run that produced `output`, with its statistics and the accesses
    /// the policy refused it, and no scratch directories to tell of.
    pub(crate) fn of_output(
        output: EvidenceOutput,
        stats: vsh_monty::ExecutionStats,
        denied: Vec<vsh_policy::DeniedAccess>,
    ) -> Self {
        Self {
            output,
            stats,
            denied,
            scratch_emptied: Vec::new(),
            scratch_cleared: 0,
            scratch_regranted: None,
            scratch_limit: 0,
            waited_ns: 0,
        }
    }

    /// A Bash script's or a command's successful end under `profile`.
    fn of_script(profile: &str, outcome: vsh_monty::BashOutcome) -> Self {
        let output = EvidenceOutput::Bash {
            profile: profile.to_owned(),
            exit_code: 0,
            stdout: outcome.stdout,
            stderr: outcome.stderr,
        };
        Self::of_output(output, outcome.stats, outcome.denied)
    }
}

/// What every run of a runtime is made with.
#[derive(Debug)]
pub(crate) struct Runs {
    workspace: Arc<CapDir>,
    /// Paths hidden from runs: the runtime directory and a data directory inside the workspace.
    excluded: Vec<VPath>,
    snapshot_limits: SnapshotLimits,
    executor: MontyExecutor,
    policy: TransactionPolicy,
    /// Counts runs, for each run's nonce.
    nonce: AtomicU64,
    /// The hook configuration's part of the configuration digest.
    hook_encoding: Vec<u8>,
    /// Whether (and within which bounds) auto-approved previews are stored durably.
    durable_previews: Option<DurablePreviews>,
    /// The policy file of the active policy when it overrides the workspace's,
    /// stored with every transaction made under it.
    run_policy: Option<String>,
    /// The interpreter's budgets, when Bash programs are enabled.
    bash: Option<crate::BashConfig>,
    /// Whether real commands are enabled.
    commands: bool,
    /// The environment real commands get.
    command_env: Vec<(String, String)>,
    /// The host directories real commands may read and execute from.
    command_tools: Vec<std::path::PathBuf>,
    /// Real commands' scratch directories: `(name, host directory)`.
    scratch: Vec<(String, std::path::PathBuf)>,
    /// The scratch directories' lock and taints: held while a run's
    /// commands may write them (`scratch` is not empty), so no other run
    /// builds there meanwhile and garbage collection never clears them under
    /// a build; and asked by every commit to lift its taint (a runtime
    /// without commands commits what one with them previewed).
    scratch_lock: Option<vsh_store::ScratchLock>,
    /// How long a run waits for another run's commands to leave the scratch
    /// directories (the runtime's lock wait, notice included).
    scratch_wait: vsh_host::LockWait,
    /// The most bytes the scratch directories keep after a run whose
    /// commands wrote much there.
    scratch_bound: u64,
    /// What network real commands reach.
    command_network: vsh_sandbox::NetworkAccess,
    /// The TCP ports real commands may connect to.
    command_ports: Vec<u16>,
    /// Whether real commands may make unix sockets of their own.
    command_unix_sockets: bool,
    /// The key the values of commands' variables are hashed under wherever
    /// a digest of them is kept (the binding, the scratch grants): a
    /// low-entropy secret cannot be guessed back from a stored digest
    /// without the authority key.
    env_key: vsh_types::MacKey,
    /// Whether this runtime decides under a policy of its own, not the
    /// workspace's (whether or not the policy's text could be recorded).
    own_policy: bool,
    /// The names the policy hides from programs (see [`Runs::fresh_image`]).
    hidden_names: vsh_vfs::PathRule,
    /// The files whose bytes the policy never lets a program read (see
    /// [`Runs::fresh_image`]).
    unreadable: vsh_vfs::PathRule,
}

impl Runs {
    pub(crate) fn new(
        workspace: Arc<CapDir>,
        excluded: Vec<VPath>,
        snapshot_limits: SnapshotLimits,
        executor: MontyExecutor,
        policy: TransactionPolicy,
        hook: Option<&HookConfig>,
        durable_previews: Option<DurablePreviews>,
    ) -> Self {
        let mut hook_encoding = Vec::new();
        canon::put_option(&mut hook_encoding, hook);
        let calls = policy.calls().clone();
        let hidden_names = vsh_vfs::PathRule::new(move |path| calls.is_hidden(path));
        let calls = policy.calls().clone();
        let unreadable = vsh_vfs::PathRule::new(move |path| content_unreadable(path, &calls));
        Self {
            workspace,
            excluded,
            snapshot_limits,
            executor,
            policy,
            nonce: AtomicU64::new(0),
            hook_encoding,
            durable_previews,
            run_policy: None,
            bash: None,
            commands: false,
            command_env: Vec::new(),
            command_tools: Vec::new(),
            scratch: Vec::new(),
            scratch_lock: None,
            scratch_wait: vsh_host::LockWait::default(),
            scratch_bound: vsh_types::space::MAX_SCRATCH_BYTES,
            command_network: vsh_sandbox::NetworkAccess::None,
            command_ports: Vec::new(),
            command_unix_sockets: false,
            env_key: vsh_types::AuthorityKey::unauthenticated().mac_key(ENV_KEY_DOMAIN),
            own_policy: false,
            hidden_names,
            unreadable,
        }
    }

    /// Hash commands' variable values under `key`'s subkey (see `env_key`),
    /// and say whether the policy is not the workspace's.
    pub(crate) fn with_authority(mut self, key: &vsh_types::AuthorityKey, own_policy: bool) -> Self {
        self.env_key = key.mac_key(ENV_KEY_DOMAIN);
        self.own_policy = own_policy;
        self
    }

    /// Whether `value` is the variable value whose keyed digest
    /// ([`env_value_mac`]) is `digest` (compared in constant time).
    pub(crate) fn is_env_value(&self, digest: &[u8; 32], value: &str) -> bool {
        blake3::Hash::from_bytes(*digest) == blake3::Hash::from_bytes(env_value_mac(&self.env_key, value))
    }

    /// Give real commands these tool directories and scratch directories,
    /// whose lock and taints `scratch_lock` holds.
    pub(crate) fn with_command_dirs(
        mut self,
        tools: Vec<std::path::PathBuf>,
        scratch: Vec<(String, std::path::PathBuf)>,
        scratch_lock: vsh_store::ScratchLock,
        scratch_wait: vsh_host::LockWait,
    ) -> Self {
        self.command_tools = tools;
        self.scratch = scratch;
        self.scratch_lock = Some(scratch_lock);
        self.scratch_wait = scratch_wait;
        self
    }

    /// Keep at most `max_bytes` in the scratch directories after a run whose
    /// commands wrote much there (see [`crate::RuntimeConfig::with_scratch_bound`]).
    pub(crate) fn with_scratch_bound(mut self, max_bytes: u64) -> Self {
        self.scratch_bound = max_bytes;
        self
    }

    /// Let real commands reach `access`.
    pub(crate) fn with_command_network(
        mut self,
        access: vsh_sandbox::NetworkAccess,
        ports: Vec<u16>,
        unix_sockets: bool,
    ) -> Self {
        self.command_network = access;
        self.command_ports = ports;
        self.command_unix_sockets = unix_sockets;
        self
    }

    /// Enable real commands (or not), with the environment `env`.
    pub(crate) fn with_commands(mut self, enabled: bool, env: Vec<(String, String)>) -> Self {
        self.commands = enabled;
        self.command_env = env;
        self
    }

    /// Enable Bash programs with these interpreter budgets.
    pub(crate) fn with_bash(mut self, bash: Option<crate::BashConfig>) -> Self {
        self.bash = bash;
        self
    }

    /// Store `text`, the active policy's file, with every transaction: the
    /// active policy overrides the workspace's.
    pub(crate) fn with_run_policy(mut self, text: Option<String>) -> Self {
        self.run_policy = text;
        self
    }

    /// The bounds a run's result is stored durably within, when it is
    /// auto-approved work that changes something and durable previews are on
    /// (a preview to commit later, or auto-mode work about to commit, whose
    /// changes stay on record after it). Without durable previews, such work
    /// lives in the runtime's memory.
    pub(crate) fn durable_preview(&self, state: TransactionState, changed_paths: usize) -> Option<DurablePreviews> {
        // A preview that changes nothing has nothing to commit later: it is
        // never stored, so it never waits in `pending` for its expiry. Work
        // committed at once (auto mode) is stored too, so what it changed
        // stays on record (`vsh show`, `vsh log`) after its commit.
        self.durable_previews.filter(|_| state == TransactionState::AutoApproved && changed_paths > 0)
    }

    /// A new image of the workspace, with nothing observed yet; the names
    /// the policy hides from programs are left out of its listings' names
    /// digests, as the commit engine (given the same rules) leaves them out;
    /// a file whose bytes the policy never lets a program read enters a diff
    /// by its stamp, never its digest (an identical overwrite is a change).
    pub(crate) fn fresh_image(&self) -> VirtualFs {
        VirtualFs::new(Arc::clone(&self.workspace), self.excluded.clone(), self.snapshot_limits)
            .with_hidden_names(self.hidden_names.clone())
            .with_unreadable_contents(self.unreadable.clone())
    }

    /// The profile a failing Bash program or command in `language` ran
    /// under (empty for Monty).
    pub(crate) fn profile_of(&self, language: Language) -> &'static str {
        match language {
            Language::Command => vsh_monty::COMMAND_PROFILE,
            Language::Bash => self.bash.map_or("", |bash| bash.profile.name()),
            Language::Monty | Language::Session => "",
        }
    }

    /// Whether a program in `language` may run real commands here.
    pub(crate) fn may_run_commands(&self, language: Language) -> bool {
        match language {
            Language::Command | Language::Monty => self.commands,
            Language::Bash => self.bash.is_some_and(|bash| bash.profile == crate::BashProfile::Confined),
            Language::Session => false,
        }
    }

    /// The workspace handle runs observe.
    pub(crate) fn workspace(&self) -> &CapDir {
        &self.workspace
    }

    /// The active policy.
    pub(crate) fn policy(&self) -> &TransactionPolicy {
        &self.policy
    }

    /// Whether programs run in this process rather than the confined worker.
    pub(crate) fn is_in_process(&self) -> bool {
        self.executor.is_in_process()
    }

    /// The pinned worker binary (`None` in process).
    pub(crate) fn worker_binary(&self) -> Option<vsh_monty::BinaryDigest> {
        self.executor.worker_binary()
    }

    /// Run `request` through every stage up to a stored, bound transaction.
    /// `cancel` and the request's end-to-end deadline are checked between
    /// stages (the executor enforces the deadline during execution).
    pub(crate) fn run(
        &self,
        request: &RunRequest<'_>,
        cancel: &ExecutionCancellation,
        records: &Records,
        started: Instant,
    ) -> Result<Ran, VshError> {
        let deadline = request.budget.max_request_duration;
        let check = || still_wanted(cancel, started, deadline);
        check()?;
        let intent_length = request.intent.map_or(0, str::len);
        let max_intent = records.limits().max_intent_bytes;
        if intent_length as u64 > max_intent {
            return Err(VshError::IntentTooLarge { length: intent_length, max: max_intent });
        }
        let mut timings = StageTimings::default();

        let stage_start = Instant::now();
        let mut vfs = self.fresh_image();
        timings.snapshot = elapsed_ns(stage_start);

        let stage_start = Instant::now();
        // Only a run whose commands build in the scratch directories pays
        // for a taint's name and, below, for comparing its changes with the diff.
        let taint = if self.scratch.is_empty() { String::new() } else { provisional_taint() };
        let outcome =
            match raised_after_refusal(self.execute_with(request, &mut vfs, cancel, &self.command_config(), &taint)) {
                Err(VshError::Execution(error)) if request.language == Language::Monty => {
                    return Err(monty_failure(*error, &mut vfs, self.policy.calls()));
                }
                outcome => outcome?,
            };
        timings.wait = outcome.waited_ns;
        timings.execute = elapsed_ns(stage_start).saturating_sub(outcome.waited_ns);
        check()?;

        let stage_start = Instant::now();
        let diff = vfs.canonical_diff()?;
        timings.diff = elapsed_ns(stage_start);
        check()?;
        // Whether committing the diff puts every change the commands saw on
        // disk (a change undone within the run is in no diff: its path keeps
        // its old time, older than what was built from the change).
        let liftable = !self.scratch.is_empty() && diff_holds_every_change(&vfs, &diff);
        let ran = self.conclude(Concluding { request, vfs: &mut vfs, diff, outcome, timings }, records, &check)?;
        // The scratch directories' taint is the transaction's from now, when
        // its commit lifts it; otherwise, and for a run that failed before
        // here, the provisional one stays, and the next run's commands clear.
        if liftable
            && let Some(lock) = &self.scratch_lock
            && lock.is_tainted_by(&taint).map_err(VshError::DataDirectory)?
        {
            lock.taint(&ran.receipt.transaction.to_hex()).map_err(VshError::DataDirectory)?;
            lock.untaint(&taint).map_err(VshError::DataDirectory)?;
        }
        Ok(ran)
    }

    /// What each file `entries` modify loses, with its unreviewed history
    /// ([`crate::losses::at_run`]), and what that history took before this
    /// run, for its reviewer ([`crate::losses::earlier`]).
    fn losses(
        &self,
        vfs: &mut VirtualFs,
        entries: &[vsh_types::DiffEntry],
        records: &Records,
    ) -> Result<(Vec<vsh_policy::ContentLoss>, Option<crate::Warning>), VshError> {
        if !entries.iter().any(|entry| entry.kind == vsh_types::DiffKind::Modify) {
            return Ok((Vec::new(), None));
        }
        let history = records.loss_history()?;
        let reviewed = |id, max| records.blobs().get(id, max).ok();
        let losses = crate::losses::at_run(vfs, self.workspace(), entries, &history, &reviewed)?;
        let ratio_of = |path: &VPath| self.policy.rewrite_ratio_for(path);
        let earlier = crate::losses::earlier(&history, entries, Some(&losses), &ratio_of);
        Ok((losses, earlier))
    }

    /// [`Runs::losses`], and the files `entries` replace unread that changed
    /// since vsh saw them ([`crate::unseen::judge`], which notes what the
    /// program read).
    #[allow(clippy::type_complexity)]
    fn losses_and_unseen(
        &self,
        vfs: &mut VirtualFs,
        entries: &[vsh_types::DiffEntry],
        records: &Records,
        (outcome, language): (&Executed, Language),
    ) -> Result<(Vec<vsh_policy::ContentLoss>, Option<crate::Warning>, Vec<crate::unseen::UnseenChange>), VshError>
    {
        let (losses, earlier) = self.losses(vfs, entries, records)?;
        let judging = crate::unseen::Judging {
            write: self.durable_previews.is_some(),
            revert: matches!(&outcome.output, EvidenceOutput::Session { steps }
                if steps.iter().any(|step| step.kind == crate::receipt::StepKind::Revert)),
            program_reads: !matches!(language, Language::Bash | Language::Command),
        };
        let unseen = crate::unseen::judge(vfs, (entries, &losses), records, &self.unreadable, judging);
        Ok((losses, earlier, unseen))
    }

    /// What the reviewer of pending work is told of its decision
    /// (auto-approved work is nobody's to approve: ux59 5): what earlier
    /// commits took (`earlier`), which files were judged rewritten, by how
    /// much (ux63 4, ux64 F2: a first escalation said neither), which
    /// review rules hold it, and which files it replaced unseen; kept in its evidence, so that every review
    /// tells the same (ux65 F1).
    fn decision_notes(
        &self,
        earlier: Option<crate::Warning>,
        entries: &[vsh_types::DiffEntry],
        losses: &[vsh_policy::ContentLoss],
        unseen: &[crate::unseen::UnseenChange],
    ) -> Vec<crate::Warning> {
        let ratio_of = |path: &VPath| self.policy.rewrite_ratio_for(path);
        earlier
            .into_iter()
            .chain(crate::losses::rewritten(entries, losses, &ratio_of))
            .chain(crate::receipt::by_review_rules(&self.policy, entries))
            .chain(crate::unseen::note(unseen))
            .collect()
    }

    /// The policy's decision on `diff`, with what the image and the records
    /// tell of it: the observed base, a git repository written into, private
    /// content widened, a revert's undone creations, and (`judged`) the
    /// files' losses and whether any replaced a change never seen.
    fn decide(
        &self,
        vfs: &mut VirtualFs,
        diff: &CanonicalDiff,
        outcome: &Executed,
        records: &Records,
        (losses, unseen_changes): (&[vsh_policy::ContentLoss], bool),
    ) -> Result<Decision, VshError> {
        let base_nodes = self.base_nodes_for_ratio(vfs, diff.entries())?;
        let git_repository = git::writes_into_a_git_repository(vfs, diff, &self.unreadable);
        let widens_private_content = widens_private_content(vfs, diff, &self.unreadable)?;
        let (undone, reviewed) = crate::runtime::revert::undone_creations(outcome, diff.entries(), records);
        let (undone_creations, undone_reviewed_creations) =
            if reviewed { (Vec::new(), undone) } else { (undone, Vec::new()) };
        Ok(self.policy.evaluate(&PolicyInput {
            diff: diff.entries(),
            denied: &outcome.denied,
            renames: vfs.renames(),
            observed_base_nodes: base_nodes,
            git_repository,
            widens_private_content,
            losses,
            unseen_changes,
            undone_creations: &undone_creations,
            undone_reviewed_creations: &undone_reviewed_creations,
        }))
    }

    /// The stages after the diff, for a run or a candidate's promotion:
    /// policy, review, bind and store. `check` is called between stages.
    pub(crate) fn conclude(
        &self,
        concluding: Concluding<'_, '_>,
        records: &Records,
        check: &dyn Fn() -> Result<(), VshError>,
    ) -> Result<Ran, VshError> {
        let Concluding { request, vfs, diff, outcome, mut timings } = concluding;
        let stage_start = Instant::now();
        // Before anything below reads the image for its own ends (the git
        // judgment reads `HEAD` and `config` files).
        let (losses, earlier_losses, unseen) =
            self.losses_and_unseen(vfs, diff.entries(), records, (&outcome, request.language))?;
        let decision = self.decide(vfs, &diff, &outcome, records, (&losses, !unseen.is_empty()))?;
        timings.policy = elapsed_ns(stage_start);

        check()?;
        let review = match request.detail {
            ReceiptDetail::Full => {
                let calls = self.policy.calls();
                let unreadable = |path: &VPath| content_unreadable(path, calls);
                vfs.review(diff.entries(), ReviewLimits::default(), &unreadable)?
            }
            ReceiptDetail::Changes | ReceiptDetail::Compact => Vec::new(),
        };
        check()?;

        let stage_start = Instant::now();
        let state = match &decision {
            Decision::Denied(_) => TransactionState::Denied,
            Decision::AutoApproved => TransactionState::AutoApproved,
            Decision::PendingApproval(_) => TransactionState::PendingApproval,
        };
        let notes = if state == TransactionState::PendingApproval {
            self.decision_notes(earlier_losses, diff.entries(), &losses, &unseen)
        } else {
            Vec::new()
        };
        let (artifact, mut warnings, contents) =
            self.bind_and_store(records, request, vfs, &diff, state, &decision, &outcome, &notes)?;
        if outcome.stats.truncated_results > 0 {
            warnings.push(crate::Warning::ResultsCut { lists: outcome.stats.truncated_results });
        }
        warnings.extend(notes);
        warnings.extend(crate::receipt::renamed(&decision, vfs.effects()));
        if outcome.stats.hidden_looks > 0 {
            warnings.push(crate::Warning::HiddenLooks {
                looks: outcome.stats.hidden_looks,
                paths: outcome.stats.hidden_paths.clone(),
            });
        }
        if !outcome.scratch_emptied.is_empty() {
            let changes = stored_changes(records, &outcome.scratch_emptied);
            // This run made one of those changes again (a build writes its
            // lock file each time): committing this one is what ends it.
            let again = state != TransactionState::Denied
                && diff
                    .entries()
                    .iter()
                    .any(|entry| changes.contains(&format!("{} {}", entry.kind.name(), entry.path)));
            warnings.push(crate::Warning::ScratchEmptied {
                uncommitted: outcome.scratch_emptied.clone(),
                changes,
                again: again.then(|| artifact.binding.transaction().to_hex()),
            });
        }
        match outcome.scratch_regranted {
            Some(ScratchRegrant::Grants) => warnings.push(crate::Warning::ScratchRegranted),
            Some(ScratchRegrant::Policy) => warnings.push(crate::Warning::ScratchRepolicied),
            None => {}
        }
        if outcome.scratch_cleared > 0 {
            warnings
                .push(crate::Warning::ScratchCleared { bytes: outcome.scratch_cleared, max: outcome.scratch_limit });
        }
        // After the binding: what it looks at here is no dependency.
        let built = build_output(vfs, &diff);
        if !built.is_empty() {
            warnings.push(crate::Warning::BuildOutput { dirs: built });
        }
        timings.bind_and_store = elapsed_ns(stage_start);

        let receipt = Receipt {
            transaction: artifact.binding.transaction(),
            base_snapshot: artifact.binding.digests().snapshot,
            state,
            decision,
            diff: diff.digest(),
            diff_withheld: names_unreadable_content(diff.entries(), self.policy.calls()),
            snapshot_withheld: false,
            changed_paths: diff.len(),
            changes: match request.detail {
                ReceiptDetail::Full | ReceiptDetail::Changes => shown_changes(diff.entries(), self.policy.calls()),
                ReceiptDetail::Compact => Vec::new(),
            },
            review,
            output: outcome.output.to_output(),
            execution: outcome.stats,
            timings,
            commit: None,
            grants: self.command_grants(request),
            warnings,
        };
        Ok(Ran { artifact, receipt, contents })
    }

    /// Run the request's program against `vfs` in its language, real
    /// commands as `commands` says. Commands that may write the scratch
    /// directories hold them alone until the run is over (waiting for
    /// another run's within the request's deadline), find them emptied first
    /// if a run left a taint or their last commands were granted otherwise,
    /// and leave the taint `taint` if this run changed its image (see
    /// `vsh_store::ScratchLock`).
    pub(crate) fn execute_with(
        &self,
        request: &RunRequest<'_>,
        vfs: &mut VirtualFs,
        cancel: &ExecutionCancellation,
        commands: &vsh_monty::CommandConfig,
        taint: &str,
    ) -> Result<Executed, VshError> {
        let scratch = match &self.scratch_lock {
            Some(lock) if !commands.scratch.is_empty() => {
                let waiting = Instant::now();
                let held = hold_scratch(lock, request, cancel, &self.scratch_wait)?;
                let waited_ns = elapsed_ns(waiting);
                // Asked for a build from nothing: emptied as a taint empties them.
                if request.fresh_scratch {
                    lock.taint(FRESH_SCRATCH).map_err(VshError::DataDirectory)?;
                }
                let mut emptied = lock.clear_if_tainted(&held, &worth_saying).map_err(VshError::DataDirectory)?;
                emptied.retain(|name| name != FRESH_SCRATCH);
                let grants = command_grants(commands, &self.env_key);
                let access = command_access(self.policy.calls());
                let regranted = lock
                    .clear_unless_granted(&held, &access, &grants, &worth_saying)
                    .map_err(VshError::DataDirectory)?
                    .filter(|regranted| regranted.held);
                // Recorded before anything runs, so a run that never ends
                // (vsh killed, a panic) leaves it: the next run clears.
                lock.taint(taint).map_err(VshError::DataDirectory)?;
                Some((lock, held, emptied, waited_ns, regranted))
            }
            _ => None,
        };
        let mut executed = self.execute_language(request, vfs, cancel, commands);
        if let Some((lock, held, emptied, waited_ns, regranted)) = scratch {
            // Once their filesystem lost much since they were last measured
            // (this run's commands, or earlier runs' a little at a time),
            // the directories keep no more than their bound for the next
            // run; measured only then: a walk of a large `target/` is not
            // every run's cost.
            let available = lock.available();
            // 1 GiB, or less on a disk that has less to lose.
            let past = SCRATCH_MEASURED_PAST.min(self.scratch_bound).min(available.unwrap_or(0) / 4);
            let due = match available {
                Some(now) => lock.due_for_bound(&held, now, past).map_err(VshError::DataDirectory)?,
                None => false,
            };
            let mut limit = self.scratch_bound;
            let cleared = if let Some(now) = available.filter(|_| due) {
                let report = lock.bound_within(&held, self.scratch_bound, now).map_err(VshError::DataDirectory)?;
                limit = limit.min(now.saturating_add(report.bytes) / 2);
                if let Some(now) = lock.available() {
                    lock.measured(&held, now).map_err(VshError::DataDirectory)?;
                }
                report
            } else {
                vsh_store::ScratchReport::default()
            };
            if let Ok(executed) = &mut executed {
                executed.scratch_emptied = emptied;
                executed.waited_ns = waited_ns;
                executed.scratch_cleared = cleared.bytes_removed;
                executed.scratch_limit = limit;
                executed.scratch_regranted = regranted.map(|regranted| {
                    if regranted.access_changed { ScratchRegrant::Policy } else { ScratchRegrant::Grants }
                });
            }
            if filled_the_disk(&executed) {
                // A command stopped for the disk space it took: what it wrote
                // is freed now, not at the next run (its taint empties them).
                lock.clear_if_tainted(&held, &worth_saying).map_err(VshError::DataDirectory)?;
            } else if vfs.effects().is_empty() {
                // The image is the workspace's: what was built is of its code.
                lock.untaint(taint).map_err(VshError::DataDirectory)?;
            }
        }
        executed
    }

    fn execute_language(
        &self,
        request: &RunRequest<'_>,
        vfs: &mut VirtualFs,
        cancel: &ExecutionCancellation,
        commands: &vsh_monty::CommandConfig,
    ) -> Result<Executed, VshError> {
        use vsh_monty::ExecutionError;
        match request.language {
            Language::Monty => {
                let ran = if self.commands {
                    self.executor.execute_with_commands(
                        request.code,
                        vfs,
                        self.policy.calls(),
                        &request.budget,
                        commands,
                        cancel,
                    )
                } else {
                    self.executor.execute_interruptible(request.code, vfs, self.policy.calls(), &request.budget, cancel)
                };
                let outcome = ran.map_err(|error| match error {
                    ExecutionError::Cancelled { .. } => VshError::Cancelled,
                    error => VshError::Execution(Box::new(error)),
                })?;
                let depth = value_depth(&outcome.value);
                if depth > MAX_VALUE_DEPTH {
                    return Err(VshError::ResultNesting { depth, max: MAX_VALUE_DEPTH });
                }
                Ok(Executed {
                    output: EvidenceOutput::Monty { value: outcome.value, stdout: outcome.stdout },
                    stats: outcome.stats,
                    denied: outcome.denied,
                    scratch_emptied: Vec::new(),
                    scratch_cleared: 0,
                    scratch_regranted: None,
                    scratch_limit: 0,
                    waited_ns: 0,
                })
            }
            language @ Language::Bash => {
                let Some(bash) = &self.bash else { return Err(VshError::LanguageUnavailable { language }) };
                let ran = match bash.profile {
                    crate::BashProfile::Bounded => self.executor.execute_bash(
                        request.code,
                        vfs,
                        self.policy.calls(),
                        &request.budget,
                        &bash.limits,
                        cancel,
                    ),
                    crate::BashProfile::Confined => {
                        let argv = ["/bin/bash".to_owned(), "-c".to_owned(), request.code.to_owned()];
                        self.executor.execute_command(
                            &argv,
                            vfs,
                            self.policy.calls(),
                            &request.budget,
                            commands,
                            cancel,
                        )
                    }
                };
                script_end(ran, bash.profile.name(), request.accept_failure, (vfs, self.policy.calls()))
            }
            language @ Language::Session => Err(VshError::LanguageUnavailable { language }),
            language @ Language::Command => {
                if !self.commands {
                    return Err(VshError::LanguageUnavailable { language });
                }
                let command = command::argv(request.code)?;
                let ran = self.executor.execute_command_in(
                    command.line(),
                    vfs,
                    self.policy.calls(),
                    &request.budget,
                    commands,
                    cancel,
                );
                script_end(ran, vsh_monty::COMMAND_PROFILE, request.accept_failure, (vfs, self.policy.calls()))
            }
        }
    }

    /// A transaction's commit lifts its scratch taint (see `execute_with`).
    pub(crate) fn scratch_committed(&self, transaction: vsh_types::TransactionId) -> Result<(), VshError> {
        match &self.scratch_lock {
            Some(lock) => lock.untaint(&transaction.to_hex()).map_err(VshError::DataDirectory),
            None => Ok(()),
        }
    }

    /// How a real command runs: its candidate where the workspace is.
    pub(crate) fn command_config(&self) -> vsh_monty::CommandConfig {
        let mut config = vsh_monty::CommandConfig::new(self.workspace.display_path());
        config.env.clone_from(&self.command_env);
        config.tools.clone_from(&self.command_tools);
        config.scratch.clone_from(&self.scratch);
        config.network = self.command_network;
        config.connect_ports.clone_from(&self.command_ports);
        config.unix_sockets = self.command_unix_sockets;
        config
    }

    /// The number of workspace nodes the delete-ratio ceiling divides by: 0
    /// (the rule inactive) unless the policy says the diff's deletions need a
    /// count, and then counted only up to the policy's bound (see
    /// `PolicyThresholds::delete_ratio_count_bound`), so no run pays for the
    /// workspace's size.
    fn base_nodes_for_ratio(&self, vfs: &VirtualFs, diff: &[DiffEntry]) -> Result<u64, VshError> {
        // A file replaced by a directory or a symlink counts as deleted, as the policy counts it.
        let deleted =
            diff.iter().filter(|entry| entry.after.is_none() || vsh_policy::replaces_a_file(entry)).count() as u64;
        match self.policy.thresholds().delete_ratio_count_bound(deleted) {
            None => Ok(0),
            Some(enough) => Ok(vfs.count_base_nodes(enough)?),
        }
    }
}

/// The taint a run that asks for fresh scratch directories records for
/// itself ([`RunRequest::fresh_scratch`]): not a run's work, never reported.
const FRESH_SCRATCH: &str = "fresh";

/// A name for a run's scratch taint until its transaction has an id: this
/// process's id, the time, and a count.
pub(crate) fn provisional_taint() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("run-{}-{nanos:x}-{count}", std::process::id())
}

/// Hold `lock` (the scratch directories) for `request`'s commands: wait for
/// another run's, looking every 20 ms, while the request is neither cancelled
/// nor past its end-to-end deadline.
fn hold_scratch(
    lock: &vsh_store::ScratchLock,
    request: &RunRequest<'_>,
    cancel: &ExecutionCancellation,
    wait: &vsh_host::LockWait,
) -> Result<vsh_host::LockGuard, VshError> {
    let started = Instant::now();
    let mut noticed = false;
    loop {
        if let Some(held) = lock.try_exclusive().map_err(VshError::DataDirectory)? {
            return Ok(held);
        }
        still_wanted(cancel, started, request.budget.max_request_duration)?;
        let waited = started.elapsed();
        if waited > wait.timeout {
            return Err(VshError::ScratchBusy { waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX) });
        }
        if !noticed && waited >= wait.notice_after {
            noticed = true;
            if let Some(notice) = &wait.notice {
                notice(waited);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// How much the scratch directories' filesystem must have lost since they
/// were last measured for a run to measure them against their bound after
/// its commands.
const SCRATCH_MEASURED_PAST: u64 = 1 << 30;

/// The domain of the subkey commands' variable values are hashed under.
const ENV_KEY_DOMAIN: &str = "vsh 2026 command env values v1";

/// The MAC of a command's variable value under `key` (what digests keep of it).
pub(crate) fn env_value_mac(key: &vsh_types::MacKey, value: &str) -> [u8; 32] {
    key.mac().update(value.as_bytes()).finalize()
}

/// Whether `diff` holds every path `vfs`'s effects name that the image still
/// holds: committing it then gives each of them a time newer than anything
/// built while the run had it. A path the run made and removed again (a
/// temporary file renamed over its target, as `sed -i` writes) is in no diff
/// and on no disk after the commit, so nothing built from it can pass for
/// fresh: a build tool finds it missing.
fn diff_holds_every_change(vfs: &VirtualFs, diff: &CanonicalDiff) -> bool {
    let changed: std::collections::HashSet<&VPath> = diff.entries().iter().map(|entry| &entry.path).collect();
    let holds = |path: &VPath| changed.contains(path) || vfs.absent_by_own_changes(path);
    vfs.effects().iter().all(|effect| match effect {
        Effect::Write(path) | Effect::Mkdir(path) | Effect::Remove(path) | Effect::SetMode(path) => holds(path),
        Effect::Rename { from, to } => holds(from) && holds(to),
    })
}

/// `Cancelled` once `cancel` is, `RequestDeadline` once `deadline` has passed
/// since `started`.
fn still_wanted(
    cancel: &ExecutionCancellation,
    started: Instant,
    deadline: std::time::Duration,
) -> Result<(), VshError> {
    if cancel.is_cancelled() {
        return Err(VshError::Cancelled);
    }
    let elapsed = started.elapsed();
    if elapsed > deadline {
        return Err(VshError::RequestDeadline(LimitExceeded {
            limit: LimitKind::RequestDuration,
            attempted: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            max: u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX),
        }));
    }
    Ok(())
}

/// A digest of what the policy's rules let commands read and write (its
/// protected paths and writable roots, not its thresholds): the scratch
/// directories belong to one at a time, since a build may keep what it read
/// (`vsh_store::ScratchLock::clear_unless_granted`).
fn command_access(calls: &vsh_policy::CallPolicy) -> [u8; 32] {
    use vsh_types::canon::Canonical as _;
    let mut hasher = blake3::Hasher::new_derive_key("vsh 2026 command access v1");
    hasher.update(&calls.to_canonical_bytes());
    *hasher.finalize().as_bytes()
}

/// A digest of what `commands` are granted (environment variables, network,
/// ports, tools, running unisolated): the scratch directories belong to one
/// such set at a time (`vsh_store::ScratchLock::clear_unless_granted`). The
/// per-call environment a program gives `vsh_exec` is the program's own, not
/// a grant.
fn command_grants(commands: &vsh_monty::CommandConfig, env_key: &vsh_types::MacKey) -> [u8; 32] {
    // Every field named: a new one does not compile until it is judged a grant or not.
    let vsh_monty::CommandConfig { root: _, env, tools, scratch: _, network, connect_ports, unix_sockets, unisolated } =
        commands;
    let mut hasher = blake3::Hasher::new_derive_key("vsh 2026 command grants v3");
    hasher.update(&[u8::from(*unisolated), u8::from(*unix_sockets)]);
    let mut env = env.clone();
    env.sort();
    hasher.update(&(env.len() as u64).to_le_bytes());
    for (name, value) in &env {
        // The value by its keyed MAC: the record on disk never lets it be guessed.
        for field in [name.as_bytes(), &env_value_mac(env_key, value)] {
            hasher.update(&(field.len() as u64).to_le_bytes());
            hasher.update(field);
        }
    }
    let network = format!("{network:?}");
    hasher.update(&(network.len() as u64).to_le_bytes());
    hasher.update(network.as_bytes());
    let mut ports = connect_ports.clone();
    ports.sort_unstable();
    hasher.update(&(ports.len() as u64).to_le_bytes());
    for port in ports {
        hasher.update(&port.to_le_bytes());
    }
    let mut tools = tools.clone();
    tools.sort();
    hasher.update(&(tools.len() as u64).to_le_bytes());
    for tool in &tools {
        let tool = tool.as_os_str().as_encoded_bytes();
        hasher.update(&(tool.len() as u64).to_le_bytes());
        hasher.update(tool);
    }
    *hasher.finalize().as_bytes()
}

/// Whether a run's real command was stopped for the disk space it took.
fn filled_the_disk(executed: &Result<Executed, VshError>) -> bool {
    matches!(
        executed.as_ref().err().and_then(VshError::exceeded_limit),
        Some(vsh_monty::LimitKind::DiskSpace | vsh_monty::LimitKind::DiskNodes)
    )
}

#[cfg(test)]
mod grants_tests {
    use super::{ENV_KEY_DOMAIN, command_access, command_grants, env_value_mac};

    fn key() -> vsh_types::MacKey {
        vsh_types::AuthorityKey::from_bytes([1; 32]).mac_key(ENV_KEY_DOMAIN)
    }

    #[test]
    fn what_commands_are_granted_decides_the_grants_and_nothing_else() {
        let config = || {
            let mut config = vsh_monty::CommandConfig::new(std::path::Path::new("/w"));
            config.env = vec![("A".to_owned(), "1".to_owned()), ("B".to_owned(), "2".to_owned())];
            config
        };
        let base = command_grants(&config(), &key());
        // The order the grants were given in, the root and the scratch paths are not grants.
        let mut same = config();
        same.env.reverse();
        same.root = "/elsewhere".into();
        same.scratch = vec![("target".to_owned(), "/data/scratch/target".into())];
        assert_eq!(command_grants(&same, &key()), base);
        let mut token = config();
        token.env.push(("TOKEN".to_owned(), "t".to_owned()));
        let mut value = config();
        value.env[0].1 = "other".to_owned();
        let mut network = config();
        network.network = vsh_sandbox::NetworkAccess::All;
        let mut ports = config();
        ports.connect_ports = vec![5432];
        let mut tools = config();
        tools.tools = vec!["/opt/rust".into()];
        let mut unisolated = config();
        unisolated.unisolated = true;
        let mut sockets = config();
        sockets.unix_sockets = true;
        for (what, other) in [
            ("a variable", &token),
            ("a value", &value),
            ("the network", &network),
            ("ports", &ports),
            ("tools", &tools),
            ("unisolated", &unisolated),
            ("unix sockets", &sockets),
        ] {
            assert_ne!(command_grants(other, &key()), base, "{what}");
        }
    }

    /// What the policy's rules let commands read and write decides the
    /// access digest; a threshold does not (ux54 #4).
    #[test]
    fn the_rules_of_a_policy_decide_the_command_access_and_its_thresholds_do_not() {
        let policy = |text: &str| vsh_policy::PolicyFile::parse(text).unwrap();
        let base = policy("version = 1\n");
        let threshold = policy("version = 1\n[thresholds]\nescalate_touched_paths = 7\n");
        let rule = policy("version = 1\n[[protect]]\npattern = \"config/**\"\naccess = \"reads\"\n");
        let roots = policy("version = 1\n[defaults]\nwritable_roots = [\"src\"]\n");
        assert_ne!(threshold.digest(), base.digest());
        assert_eq!(command_access(threshold.calls()), command_access(base.calls()));
        assert_ne!(command_access(rule.calls()), command_access(base.calls()));
        assert_ne!(command_access(roots.calls()), command_access(base.calls()));
    }

    /// A variable's value is kept only by its MAC under the authority key:
    /// the same grants give the same digest under one key and another under
    /// another, so a value cannot be guessed back from a stored digest
    /// without the key.
    #[test]
    fn the_digests_of_command_grants_are_keyed_by_the_authority() {
        let mut commands = vsh_monty::CommandConfig::new("/w");
        commands.env.push(("TOKEN".to_owned(), "1234".to_owned()));
        let two = vsh_types::AuthorityKey::from_bytes([2; 32]).mac_key(ENV_KEY_DOMAIN);
        assert_eq!(command_grants(&commands, &key()), command_grants(&commands, &key()));
        assert_ne!(command_grants(&commands, &key()), command_grants(&commands, &two));
        assert_ne!(env_value_mac(&key(), "1234"), env_value_mac(&two, "1234"));
    }
}
