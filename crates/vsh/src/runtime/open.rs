//! Opening a [`Runtime`]: the workspace, vsh's data directory, the policy,
//! the authority key, the executor, and startup recovery.

use std::sync::Arc;

use vsh_commit::Committer;
use vsh_host::CapDir;
use vsh_monty::{MontyExecutor, WorkerConfig, default_worker_path};
use vsh_policy::TransactionPolicy;
use vsh_store::{BlobStore, DataDir, TransactionStore};
use vsh_types::{DataPlacement, VshLayout};

use super::Runtime;
use crate::commit_path::CommitPath;
use crate::config::{Authority, Execution};
use crate::hook_gate::HookGate;
use crate::previews::Previews;
use crate::records::Records;
use crate::run::{Runs, clock_ms};
use crate::{RuntimeConfig, VshError};

impl Runtime {
    /// Open the workspace and vsh's data directory, then recover any commit a
    /// crash interrupted (see [`Runtime::startup_recovery`]).
    pub fn open(config: RuntimeConfig) -> Result<Self, VshError> {
        let RuntimeConfig {
            workspace_root,
            data_directory,
            policy_profile,
            policy_file,
            policy_text,
            snapshot_limits,
            hook,
            execution,
            max_idle_workers,
            result_compatibility,
            lock_wait,
            faults,
            authority,
            allowed_mounts,
            durable_previews,
            bash,
            commands,
            command_env,
            command_tools,
            scratch,
            scratch_bound,
            command_network,
            command_ports,
            command_unix_sockets,
            session,
        } = config;
        let command_env = crate::run::command_env(command_env)?;
        let worker = worker_config(execution, max_idle_workers)?;
        let workspace =
            Arc::new(CapDir::open(&workspace_root).map_err(VshError::Workspace)?.with_allowed_mounts(allowed_mounts));
        // A runtime directory holds the commit lock, or the data directory.
        let markers = ["commit.lock", "txn", "data"];
        if workspace.lies_within_entry_named(vsh_types::RUNTIME_DIR_NAME, &markers).map_err(VshError::Workspace)? {
            return Err(VshError::WorkspaceInsideRuntime);
        }
        let (data, layout) = data_directory_of(&workspace, data_directory.as_deref())?;
        let protected_data = layout.separate_data().cloned();
        let key = authority_key(&authority, &workspace)?;
        let explicit = match (&policy_text, &policy_file, policy_profile) {
            (Some(text), _, _) => Some(
                vsh_policy::PolicyFile::from_toml(text).map_err(VshError::PolicyFile)?.policy(protected_data.as_ref()),
            ),
            (None, Some(path), _) => Some(
                TransactionPolicy::from_file_with_data_dir(path, protected_data.as_ref())
                    .map_err(VshError::PolicyFile)?,
            ),
            (None, None, Some(profile)) => Some(TransactionPolicy::from_profile(profile, protected_data.as_ref())),
            (None, None, None) => None,
        };
        // `None`: a recorded policy that cannot be taken, with an explicit one.
        let workspace_policy = workspace_policy(&data, &key, explicit.is_some(), protected_data.as_ref())?;
        let (policy, run_policy, own_policy) = deciding_policy(explicit, workspace_policy, protected_data.as_ref());
        let executor = executor(worker, &data, &key)?
            .with_result_compatibility(result_compatibility)
            .with_nested_bash(bash.map(|bash| bash.limits));
        let blobs = BlobStore::open(&data)?;
        let transactions = TransactionStore::open(&data, &key)?;
        let mut committer = Committer::new(Arc::clone(&workspace), layout.runtime().clone())?
            .with_authority(key.clone())
            .with_protection(policy.calls().clone());
        if let Some(inside) = &protected_data {
            committer = committer.with_excluded(inside.clone());
        }
        let mut records =
            Records::new(transactions, blobs, data, policy.digest(), protected_data, key.clone()).with_session(session);
        if !own_policy {
            records = records.watching_policy()?;
        }
        let commits = CommitPath::open(committer, lock_wait.clone(), faults, &records, clock_ms())?;
        let confined_bash = bash.is_some_and(|bash| bash.profile == crate::BashProfile::Confined);
        let scratch = scratch
            .or_else(|| policy.command_scratch().map(<[String]>::to_vec))
            .unwrap_or_else(|| crate::config::DEFAULT_SCRATCH.iter().map(|name| (*name).to_owned()).collect());
        let scratch_dirs = if commands || confined_bash { scratch_dirs(records.data(), scratch)? } else { Vec::new() };
        let scratch_lock = records.data().scratch_lock();
        let runs =
            Runs::new(workspace, layout.excluded(), snapshot_limits, executor, policy, hook.as_ref(), durable_previews)
                .with_run_policy(run_policy)
                .with_authority(&key, own_policy)
                .with_bash(bash)
                .with_commands(commands, command_env)
                .with_command_dirs(command_tools, scratch_dirs, scratch_lock, lock_wait)
                .with_scratch_bound(scratch_bound)
                .with_command_network(command_network, command_ports, command_unix_sockets);
        Ok(Self { runs, records, previews: Previews::default(), commits, gate: HookGate::new(hook) })
    }
}

impl Runtime {
    /// Salvage the workspace's damaged transaction log, which stops every
    /// runtime from opening ([`vsh_store::StoreError::CorruptLog`]): keep the
    /// records the frames before the damage hold, approvals voided, and every
    /// byte of the damaged log in `txlog.damaged` beside it
    /// ([`TransactionStore::salvage_with`]). A whole log is left as it is.
    /// Only the workspace, the data directory and the authority key of
    /// `config` are used; open the runtime afterwards.
    pub fn salvage_log(config: &RuntimeConfig) -> Result<vsh_store::Salvaged, VshError> {
        let workspace = CapDir::open(&config.workspace_root).map_err(VshError::Workspace)?;
        let (data, _) = data_directory_of(&workspace, config.data_directory.as_deref())?;
        let key = authority_key(&config.authority, &workspace)?;
        let backend = data.backend().map_err(VshError::DataDirectory)?;
        Ok(TransactionStore::salvage_with(backend, vsh_store::TxStoreConfig::default(), &key)?)
    }
}

/// vsh's data directory for `workspace`: its `.vsh/data`, or `external`
/// (refused when it is the workspace itself), and the layout that follows.
fn data_directory_of(workspace: &CapDir, external: Option<&std::path::Path>) -> Result<(DataDir, VshLayout), VshError> {
    Ok(match external {
        None => (
            DataDir::open_in_workspace(workspace, &VshLayout::default_data()).map_err(VshError::DataDirectory)?,
            VshLayout::default(),
        ),
        Some(path) => {
            let data = DataDir::open_external(path).map_err(VshError::DataDirectory)?;
            // Decided by device and inode through the handles, never by a path string.
            let placement = match data.dir().location_within(workspace).map_err(VshError::Workspace)? {
                Some(inside) if inside.is_root() => {
                    return Err(VshError::DataDirectory(vsh_store::StoreError::DataDirIsRoot));
                }
                Some(inside) => DataPlacement::Within(inside),
                None => DataPlacement::Outside,
            };
            (data, VshLayout::new(placement))
        }
    })
}

/// The policy the workspace recorded (`Runtime::record_workspace_policy`),
/// else the default profile. One that cannot be taken (its MAC does not
/// verify, or it does not parse) stops only a runtime that would decide
/// under it: with a policy of its own (`explicit`: `vsh init` recording a
/// new one, a run given `--profile`) the runtime opens, and this is `None`.
fn workspace_policy(
    data: &DataDir,
    key: &vsh_types::AuthorityKey,
    explicit: bool,
    protected_data: Option<&vsh_types::VPath>,
) -> Result<Option<TransactionPolicy>, VshError> {
    let recorded = crate::records::recorded_policy(data, key).and_then(|text| {
        text.map(|text| vsh_policy::PolicyFile::from_toml(&text).map_err(VshError::PolicyFile)).transpose()
    });
    match recorded {
        Ok(Some(recorded)) => Ok(Some(recorded.policy(protected_data))),
        Ok(None) => Ok(Some(default_policy(protected_data))),
        Err(_) if explicit => Ok(None),
        Err(error) => Err(error),
    }
}

/// The default profile's policy.
fn default_policy(protected_data: Option<&vsh_types::VPath>) -> TransactionPolicy {
    TransactionPolicy::from_profile(vsh_policy::PolicyProfile::default(), protected_data)
}

/// The authority key, from the application or a key file outside the workspace.
fn authority_key(authority: &Authority, workspace: &CapDir) -> Result<vsh_types::AuthorityKey, VshError> {
    let file = match authority {
        Authority::Key(key) => return Ok(key.clone()),
        Authority::File(path) => vsh_store::AuthorityKeyFile::at(path),
        Authority::DefaultFile => vsh_store::AuthorityKeyFile::default_location().map_err(VshError::Authority)?,
    };
    // Refuse a key inside the workspace before creating anything there:
    // first where its directory would be made, then the directory itself.
    let inside = |directory: CapDir| {
        directory.location_within(workspace).map_err(|source| {
            VshError::Authority(vsh_store::StoreError::AuthorityKeyIo { path: file.path().to_owned(), source })
        })
    };
    let steps: [&dyn Fn() -> Result<CapDir, vsh_store::StoreError>; 2] =
        [&|| file.nearest_existing_directory(), &|| file.directory()];
    for directory in steps {
        if let Some(inside) = inside(directory().map_err(VshError::Authority)?)? {
            return Err(VshError::AuthorityKeyInWorkspace(inside));
        }
    }
    file.load_or_create().map_err(VshError::Authority)
}

/// The worker's configuration, or `None` to run programs in process.
fn worker_config(execution: Execution, max_idle: Option<usize>) -> Result<Option<WorkerConfig>, VshError> {
    let mut worker = match execution {
        Execution::InProcess => return Ok(None),
        Execution::Worker(worker) => *worker,
        Execution::DefaultWorker => WorkerConfig::new(default_worker_path().ok_or(VshError::WorkerNotFound)?),
    };
    if let Some(max_idle) = max_idle {
        worker.max_idle = max_idle;
    }
    Ok(Some(worker))
}

/// The policy a runtime decides under: `explicit` (a per-run profile, file or
/// text) when given, else the workspace's recorded one, else the default;
/// with the text a transaction records when the policy is not the
/// workspace's (or the workspace's cannot be taken), for the commands that
/// review, approve and commit it, and whether it is not the workspace's.
fn deciding_policy(
    explicit: Option<TransactionPolicy>,
    workspace_policy: Option<TransactionPolicy>,
    protected_data: Option<&vsh_types::VPath>,
) -> (TransactionPolicy, Option<String>, bool) {
    match explicit {
        Some(policy) if workspace_policy.as_ref().is_none_or(|recorded| policy.digest() != recorded.digest()) => {
            let text = vsh_policy::render_policy(&policy);
            // The rendering parses back to the same policy (tested for every
            // profile and for custom rules); were it ever not to, the
            // transaction is made without it, approvable under its policy only.
            let faithful = vsh_policy::PolicyFile::from_toml(&text)
                .is_ok_and(|file| file.policy(protected_data).digest() == policy.digest());
            (policy, faithful.then_some(text), true)
        }
        _ => (workspace_policy.unwrap_or_else(|| default_policy(protected_data)), None, false),
    }
}

/// The executor: in process, or a worker pool whose binary's digest is taken
/// from the data directory when an earlier process recorded it for the same
/// file (see `worker_digest`), and recorded there when it was hashed.
fn executor(
    worker: Option<WorkerConfig>,
    data: &DataDir,
    key: &vsh_types::AuthorityKey,
) -> Result<MontyExecutor, VshError> {
    let Some(mut worker) = worker else {
        return Ok(MontyExecutor::in_process());
    };
    if worker.known_digest.is_none() {
        worker.known_digest = super::worker_digest::load(data, key);
    }
    let known = worker.known_digest.clone();
    let executor = MontyExecutor::worker(worker).map_err(VshError::Worker)?;
    if let Some(binary) = executor.worker_binary() {
        super::worker_digest::save(data, key, known.as_ref(), &binary);
    }
    Ok(executor)
}

/// Real commands' scratch directories `names`, in the data directory (made now).
fn scratch_dirs(data: &vsh_store::DataDir, names: Vec<String>) -> Result<Vec<(String, std::path::PathBuf)>, VshError> {
    let mut dirs = Vec::with_capacity(names.len());
    for name in names {
        let dir = data.scratch_dir(&name).map_err(VshError::DataDirectory)?;
        dirs.push((name, dir));
    }
    Ok(dirs)
}
