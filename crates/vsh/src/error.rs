//! [`VshError`]: every way a runtime call can fail, as typed variants.

use vsh_types::{TransactionId, TransactionState};

/// A failed [`crate::Runtime`] call. Match the variants you handle and keep a
/// fallback arm, or match [`VshError::category`] to handle a whole kind of
/// failure at once; never parse the display text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VshError {
    /// The workspace could not be opened.
    #[error("cannot open the workspace")]
    Workspace(#[source] vsh_host::HostError),
    /// The data directory could not be opened or is unsafe.
    #[error("cannot use the data directory")]
    DataDirectory(#[source] vsh_store::StoreError),
    /// The authority key could not be loaded, or its file lies inside the
    /// workspace (where whoever can write the workspace could read it).
    #[error("cannot use the authority key")]
    Authority(#[source] vsh_store::StoreError),
    /// The workspace is, or lies inside, a vsh runtime directory (`.vsh`):
    /// work there would change another workspace's commit state (its
    /// transaction directories, its lock), which no policy protects from
    /// inside it. Open the workspace that holds it instead.
    #[error("the workspace is inside a vsh runtime directory (.vsh): open the workspace that holds it instead")]
    WorkspaceInsideRuntime,
    /// The authority key file lies inside the workspace at this path: anyone
    /// who can read the workspace could approve its work. Keep it outside.
    #[error("the authority key file is inside the workspace at {0}")]
    AuthorityKeyInWorkspace(vsh_types::VPath),
    /// The policy file could not be read or is invalid.
    #[error("invalid policy file")]
    PolicyFile(#[source] vsh_policy::PolicyFileError),
    /// The policy the workspace recorded does not carry a MAC under this
    /// runtime's authority key, or its MAC does not verify: someone who can
    /// write the data directory changed or planted it (or a crash cut
    /// `vsh init` short). Nothing runs under it; recording a policy again
    /// (`vsh init`) replaces it, and a run given a policy of its own is not
    /// stopped by it.
    #[error(
        "the workspace's recorded policy {0}: record your policy again with `vsh init --force --policy FILE` (or \
         --profile P; without either, the default profile replaces it)"
    )]
    WorkspacePolicyForged(&'static str),
    /// The workspace's policy was recorded again (`vsh init --force`) since
    /// this runtime opened under the one recorded before: a runtime that
    /// decides under the workspace's policy neither runs, approves nor
    /// commits under one the operator has replaced. Open a runtime again
    /// (a new vsh command; `vsh serve` does so itself) to work under it.
    #[error(
        "the workspace's policy was recorded again since this runtime opened: it no longer runs, approves or \
         commits under the old one; open it again to work under the policy recorded now"
    )]
    WorkspacePolicyReplaced,
    /// The store (blobs, transaction records) failed, or refused a step
    /// (an approval that expired, a state that does not allow it): its own
    /// message heads the error, each says what failed.
    #[error(transparent)]
    Store(#[from] vsh_store::StoreError),
    /// The program failed: an uncaught exception, a budget limit, or a terminal
    /// virtual-filesystem error.
    #[error("execution failed")]
    Execution(#[source] Box<vsh_monty::ExecutionError>),
    /// A Monty program raised an exception it did not catch, or ran out of
    /// a budget, after it had changed the virtual image: terminal, no
    /// transaction, as [`VshError::Execution`]. `changes` is what it had
    /// changed by then, for diagnosis only: none of it is kept (ux65 F6);
    /// `changes_complete` is false if even that could not be computed.
    #[error("execution failed")]
    Raised {
        /// The exception or the budget, with the program's output.
        #[source]
        source: Box<vsh_monty::ExecutionError>,
        /// The diagnostic diff.
        changes: Vec<vsh_types::DiffEntry>,
        /// Whether `changes` is the whole diagnostic diff.
        changes_complete: bool,
    },
    /// The virtual image failed while computing the diff.
    #[error("virtual filesystem error")]
    Vfs(#[from] vsh_vfs::VfsError),
    /// The commit failed; `Stale` means the workspace changed and nothing
    /// was written. Said "not committed" where the commit never began
    /// (stale, the lock not had), "commit failed" otherwise (ux85 L6: a
    /// stale commit read as an error of vsh's).
    #[error("{}", commit_head(.0))]
    Commit(#[from] vsh_commit::CommitError),
    /// No transaction with this id is known to this runtime.
    #[error("no such transaction {0}")]
    UnknownTransaction(TransactionId),
    /// No transaction's id starts with this prefix (see [`crate::Runtime::resolve`]).
    #[error("no such transaction {0}")]
    NoSuchTransaction(String),
    /// More than one transaction's id starts with this prefix.
    #[error("transaction prefix {prefix} is ambiguous: {total} transactions match")]
    AmbiguousTransaction {
        /// The prefix given.
        prefix: String,
        /// The first matching ids, sorted (at most [`crate::MAX_LISTED_CANDIDATES`]).
        candidates: Vec<TransactionId>,
        /// How many match in all.
        total: usize,
    },
    /// The text is not a transaction id or a prefix of one.
    #[error("{0:?} does not name a transaction: give its id or at least {min} of its hex digits", min = crate::MIN_ID_PREFIX)]
    TransactionName(String),
    /// The transaction is in a state that cannot be committed.
    #[error("transaction {transaction} cannot be committed from state {}", state.name())]
    NotCommittable {
        /// The transaction.
        transaction: TransactionId,
        /// Its state.
        state: TransactionState,
    },
    /// Only committed work can be reverted ([`crate::Runtime::revert`]).
    #[error("transaction {transaction} is {}: only committed work can be reverted", state.name())]
    NotRevertible {
        /// The transaction.
        transaction: TransactionId,
        /// Its state.
        state: TransactionState,
    },
    /// A rerun's commit refused: another run of the same work was committed
    /// since the rerun was decided ([`crate::WorkDoneSoFar`]), so committing
    /// it too would do the work twice (sec92 M1: two `vsh rerun --mode
    /// auto` of one stale transaction, started together, both committed).
    /// Nothing was written.
    #[error(
        "transaction {} is not to be committed: {}, another run of the same work, was committed after it \
         was made, and committing both would do the work twice; nothing was written (vsh show {})",
        transaction.short(),
        by.short(),
        by.short()
    )]
    DoneMeanwhile {
        /// The rerun not committed.
        transaction: TransactionId,
        /// The run of the same work committed meanwhile.
        by: TransactionId,
    },
    /// A revert of the transaction waits already (pending, approved, or an
    /// auto-approved preview): another would be its work twice (ux83 M2).
    /// Nothing was made.
    #[error(
        "a revert of {} waits already: {} (vsh show {}; commit it, approving it first if it waits for a \
         review, or reject it to make another)",
        transaction.short(),
        revert.short(),
        revert.short()
    )]
    RevertWaiting {
        /// The transaction to revert.
        transaction: TransactionId,
        /// The revert of it that waits.
        revert: TransactionId,
    },
    /// The workspace no longer holds what the transaction to revert left at
    /// these paths: a revert would overwrite what came after. Nothing was made.
    #[error("{}", revert_changed(*.transaction, .paths, *.total as usize, .later, *.reverted_by, *.outside))]
    RevertChanged {
        /// The transaction to revert.
        transaction: TransactionId,
        /// The first paths changed since (at most
        /// [`crate::MAX_LISTED_REVERT_PATHS`]).
        paths: Vec<vsh_types::VPath>,
        /// How many paths changed since.
        total: u32,
        /// Committed work since that changed them, oldest first (a few):
        /// none when the change was made outside vsh.
        later: Vec<TransactionId>,
        /// The committed work among them that reverts this transaction
        /// already.
        reverted_by: Option<TransactionId>,
        /// Whether some path holds what no later work left: an edit made
        /// outside vsh, which reverting later work would not undo.
        outside: bool,
    },
    /// The policy refuses the change that would put back what the
    /// transaction to revert replaced at a path (a rule that denies deleting
    /// what it created, say). Nothing was made.
    #[error(
        "cannot revert {} at {}: the policy refuses its {} ({})",
        transaction.short(),
        denied.path,
        denied.access.name(),
        denied.rule
    )]
    RevertRefused {
        /// The transaction to revert.
        transaction: TransactionId,
        /// The refusal.
        denied: Box<vsh_policy::DeniedAccess>,
    },
    /// What the transaction to revert replaced at `path` cannot be put back.
    /// Nothing was made.
    #[error("cannot revert {} at {path}: {reason}", transaction.short())]
    RevertUnavailable {
        /// The transaction to revert.
        transaction: TransactionId,
        /// The path.
        path: vsh_types::VPath,
        /// Why.
        reason: String,
    },
    /// The transaction is in a state that cannot be approved: only work
    /// pending approval can (denied work never; committed work needs none).
    #[error("transaction {transaction} cannot be approved: it is {}, and only pending-approval work is approved", state.name())]
    NotApprovable {
        /// The transaction.
        transaction: TransactionId,
        /// Its state.
        state: TransactionState,
    },
    /// An approval found that the workspace changed under the work since its
    /// run (`source` is the [`vsh_commit::CommitError::Stale`] naming what
    /// changed): it can never commit, and its record is `Stale` now.
    #[error(
        "transaction {transaction} cannot be approved: the workspace changed under it since its run, so it can never be committed (it is stale now)"
    )]
    ApprovalStale {
        /// The transaction.
        transaction: TransactionId,
        /// What revalidation found.
        #[source]
        source: Box<vsh_commit::CommitError>,
    },
    /// A stored artifact's binding does not derive its transaction id: it was
    /// tampered with or belongs to another transaction. Nothing was committed.
    #[error("the artifact of transaction {0} does not bind to it")]
    ArtifactBinding(TransactionId),
    /// The transaction was made under a different policy than the active one; it
    /// needs a fresh preview.
    #[error("transaction {0} was made under a different policy")]
    PolicyChanged(TransactionId),
    /// Stored execution evidence could not be decoded.
    #[error("the execution evidence of transaction {transaction} is invalid")]
    Evidence {
        /// The transaction.
        transaction: TransactionId,
        /// Why.
        #[source]
        source: crate::evidence::EvidenceError,
    },
    /// The program's result nests deeper than vsh records.
    #[error("the result nests {depth} levels deep, more than {max}")]
    ResultNesting {
        /// Its depth.
        depth: usize,
        /// The limit.
        max: usize,
    },
    /// No Monty worker binary was found (set one with
    /// `RuntimeConfig::with_worker_path`, or choose in-process execution).
    #[error("no vsh-monty-worker binary found ($VSH_MONTY_WORKER, or next to the executable)")]
    WorkerNotFound,
    /// The Monty worker could not be set up.
    #[error("cannot set up the Monty worker")]
    Worker(#[source] vsh_monty::WorkerError),
    /// The request's end-to-end deadline (`max_request_duration`) passed after
    /// the program ran (while diffing, deciding or rendering the review); nothing
    /// was stored or committed.
    #[error("request deadline exceeded: {0}")]
    RequestDeadline(vsh_monty::LimitExceeded),
    /// The request's intent is longer than a durable record keeps; nothing
    /// ran and nothing was stored.
    #[error("the intent is {length} bytes, more than {max}")]
    IntentTooLarge {
        /// Its length in bytes.
        length: usize,
        /// The limit (`ArtifactLimits::max_intent_bytes`).
        max: u64,
    },
    /// The request asked for a language this runtime was not configured to
    /// run (Bash needs explicit host configuration). Nothing ran.
    #[error("language {} is not available in this runtime", .language.name())]
    LanguageUnavailable {
        /// The language asked for.
        language: crate::Language,
    },
    /// A Bash program or a real command failed (a non-zero exit status, an
    /// interpreter budget, a command outside the profile, a parse error):
    /// terminal, no transaction. `changes` is what the script had changed by then, for
    /// diagnosis only (`changes_complete` false if even that could not be
    /// computed).
    #[error("the program failed")]
    Bash {
        /// The failure, with the script's streams.
        #[source]
        source: Box<vsh_monty::ExecutionError>,
        /// The diagnostic diff.
        changes: Vec<vsh_types::DiffEntry>,
        /// Whether `changes` is the whole diagnostic diff.
        changes_complete: bool,
    },
    /// A real command's program text is not its argv: a JSON array of 1 to
    /// 4,096 strings without NUL bytes, the first one not empty (or an object
    /// `{"argv": [...], "cwd": "dir", "stdin": "text"}`, `cwd` and `stdin`
    /// optional, whose `cwd` is a relative path of plain components), at
    /// most 1 MiB in all. Nothing ran.
    #[error("invalid command: {reason}")]
    InvalidCommand {
        /// What is wrong with it.
        reason: String,
    },
    /// This host cannot make candidate workspaces (see
    /// [`crate::CandidateWorkspace::create`]): what is missing, and
    /// [`vsh_sandbox::CandidateMissing::remedy`] says how to get it.
    #[error("cannot make a candidate workspace: {0}")]
    CandidateUnavailable(#[source] vsh_sandbox::CandidateMissing),
    /// The candidate workspace was promoted: it takes no more steps.
    #[error("the candidate workspace was promoted; make a new one")]
    CandidatePromoted,
    /// A step, host write or restore would leave the candidate's image
    /// holding more bytes in memory than its bound; it was undone.
    #[error(
        "the candidate's image would hold {bytes} bytes of written content, more than its {max} \
         (CandidateWorkspace::with_max_image_bytes); the change was undone"
    )]
    CandidateImageFull {
        /// What the image would have held.
        bytes: u64,
        /// The bound.
        max: u64,
    },
    /// The candidate workspace recorded as many steps as it keeps.
    #[error("the candidate workspace has recorded {max} steps, as many as it keeps")]
    CandidateSteps {
        /// The limit.
        max: usize,
    },
    /// A verifier ran past its stage's timeout; its process tree was killed
    /// and nothing it changed was kept.
    #[error("the {} verifier ran past its timeout of {} s (VerifierTimeouts)", .stage.name(), .timeout.as_secs_f64())]
    VerifierTimeout {
        /// The stage.
        stage: crate::VerifierStage,
        /// Its timeout.
        timeout: std::time::Duration,
    },
    /// The checkpoint belongs to another candidate workspace.
    #[error("the checkpoint belongs to another candidate workspace")]
    ForeignCheckpoint,
    /// Restoring exported or inherited files: the workspace no longer holds
    /// what it held when they were exported, at these paths. Nothing was
    /// written.
    #[error("the workspace changed since the files were exported: {}", display_paths(.paths))]
    SeedChanged {
        /// Every changed path.
        paths: Vec<vsh_types::VPath>,
    },
    /// A restored file cannot be written into the candidate (a protected
    /// path, or what is in the image refuses it); nothing of the restore was kept.
    #[error("cannot restore {path}: {reason}")]
    InvalidSeed {
        /// The path.
        path: vsh_types::VPath,
        /// Why.
        reason: String,
    },
    /// The request was cancelled before its commit entered; nothing was committed.
    #[error("the request was cancelled")]
    Cancelled,
    /// A configured commit hook applies to this transaction: commit through
    /// `prepare_commit` and `resolve_commit` (or `HookedRuntime`).
    #[error("a commit hook must review transaction {}", .0.transaction())]
    HookRequired(Box<crate::RequestEvent>),
    /// No commit hook is configured.
    #[error("no commit hook is configured")]
    NoHook,
    /// The hook's handler failed; auto-approved work fell back to pending review.
    #[error("the commit hook's handler failed")]
    HookHandler(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The transaction changed since the event was made (its state or evidence).
    #[error("transaction {0} changed since the hook event was made")]
    HookEventMismatch(TransactionId),
    /// The handler's reason or feedback is longer than the hook allows.
    #[error("hook reason is {length} bytes, more than {max}")]
    HookReasonLimit {
        /// Its length.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// An Approve decision needs complete structural evidence.
    #[error("the hook cannot approve transaction {0}: its evidence is incomplete")]
    IncompleteHookEvidence(TransactionId),
    /// The process-local table of previews is full; commit or discard some first.
    #[error("process-local preview capacity reached ({entries} previews, {bytes} bytes)")]
    EphemeralCapacity {
        /// Previews held.
        entries: usize,
        /// Bytes held.
        bytes: u64,
    },
    /// The durable previews waiting for a commit are at their bound (see
    /// [`crate::DurablePreviews`]); commit or discard some first. The new
    /// preview was rejected.
    #[error("durable preview capacity reached ({entries} previews, {bytes} bytes waiting for a commit)")]
    DurablePreviewCapacity {
        /// Previews waiting.
        entries: usize,
        /// Bytes their artifacts occupy.
        bytes: u64,
    },
    /// Another run's real commands held this workspace's scratch
    /// directories (one run builds there at a time) for longer than the
    /// runtime's lock wait ([`crate::RuntimeConfig::with_lock_wait`]);
    /// nothing ran.
    #[error(
        "another vsh run's commands are using this workspace's scratch directories (the policy's build outputs and caches: vsh policy show lists them); \
         gave up after {waited_ms} ms"
    )]
    ScratchBusy {
        /// How long the run waited.
        waited_ms: u64,
    },
    /// Storing the run's contents for a later commit would take more than
    /// half the space left on the data directory's disk, or leave it less
    /// than its reserve (2 % of its size, at most 64 MiB): nothing was stored
    /// and the run was not kept, so work kept waiting (pending approval, a
    /// durable preview) never fills the disk. Commit, reject or discard what
    /// waits and run `vsh gc`, or free space on that disk.
    #[error(
        "storing this run's {needed} bytes of contents would leave the data directory's disk too little: \
         {available} bytes are available, a run may take at most half of them and leave {reserve} bytes"
    )]
    StoreSpace {
        /// Bytes of contents the run would store.
        needed: u64,
        /// Bytes available on the data directory's disk.
        available: u64,
        /// Bytes the disk keeps available whatever runs store.
        reserve: u64,
    },
}

/// Paths as one comma-separated list.
/// [`VshError::Commit`]'s head: "not committed" for a commit that never
/// began (nothing was written), "commit failed" for the rest.
fn commit_head(error: &vsh_commit::CommitError) -> &'static str {
    match error {
        vsh_commit::CommitError::Stale { .. } | vsh_commit::CommitError::LockTimeout { .. } => "not committed",
        _ => "commit failed",
    }
}

/// What stands in a revert's way, for [`VshError::RevertChanged`]'s message.
fn later_work(later: &[TransactionId], outside: bool) -> String {
    let named: Vec<String> = later.iter().map(TransactionId::short).collect();
    match (named.is_empty(), outside) {
        (true, _) => " (by an edit made outside vsh: change those paths back by new work instead)".to_owned(),
        (false, false) => {
            format!(
                " (by later work {}: revert that first, newest first, or change those paths back by new work)",
                named.join(", ")
            )
        }
        (false, true) => format!(
            " (by later work {} and by edits made outside vsh since, which reverting that work would not undo: \
             change those paths back by new work instead)",
            named.join(", ")
        ),
    }
}

fn display_paths(paths: &[vsh_types::VPath]) -> String {
    paths.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// [`VshError::RevertChanged`]'s message: work reverted already says so
/// first, and nothing else (ux83 M1: 3,051 paths came before it, in one
/// line); otherwise the first paths changed since, and by what.
fn revert_changed(
    transaction: TransactionId,
    paths: &[vsh_types::VPath],
    total: usize,
    later: &[TransactionId],
    reverted_by: Option<TransactionId>,
    outside: bool,
) -> String {
    if let Some(revert) = reverted_by {
        return format!(
            "{} is reverted already, by {} (vsh show {}): nothing to do",
            transaction.short(),
            revert.short(),
            revert.short()
        );
    }
    let shown = paths.len().min(5);
    let mut listed = paths.iter().take(shown).map(ToString::to_string).collect::<Vec<_>>().join(", ");
    if total > shown {
        listed = format!("{listed} and {} more", total - shown);
    }
    format!(
        "the workspace changed since {} was committed, at {listed}{}: a revert would overwrite that",
        transaction.short(),
        later_work(later, outside)
    )
}

/// The kind of a [`VshError`], for callers that handle failures by category
/// rather than one variant at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCategory {
    /// The program or the run around it: an exception, a budget or deadline,
    /// the virtual image, an oversized intent or result, a cancellation.
    Execution,
    /// The policy: an invalid policy file, or work made under another policy.
    Policy,
    /// vsh's own records, artifacts and blobs: unreadable, corrupt or tampered.
    Store,
    /// Applying approved work: stale, refused, failed, or recovery pending;
    /// and the bound on previews held for a commit.
    Commit,
    /// The way to a commit: an unknown transaction, one not in a committable
    /// state, or a commit hook's requirements.
    Approval,
    /// Opening a runtime: the workspace, the data directory, the authority
    /// key, the worker.
    Configuration,
}

impl VshError {
    /// For a run that failed after the policy refused it accesses (the
    /// program let the `PermissionError` escape, or a budget ran out after a
    /// refusal): the refused accesses and the output it printed.
    pub fn refused_run(&self) -> Option<(&[vsh_policy::DeniedAccess], &str)> {
        use vsh_monty::ExecutionError;
        match self.execution()? {
            ExecutionError::Exception { denied, stdout, .. } | ExecutionError::Limit { denied, stdout, .. }
                if !denied.is_empty() =>
            {
                Some((denied.as_slice(), stdout.as_str()))
            }
            _ => None,
        }
    }

    /// The program's failure, for [`VshError::Execution`] and
    /// [`VshError::Raised`] (not a Bash program's: [`VshError::Bash`]).
    pub fn execution(&self) -> Option<&vsh_monty::ExecutionError> {
        match self {
            Self::Execution(execution) | Self::Raised { source: execution, .. } => Some(execution),
            _ => None,
        }
    }

    /// The budget a run ran out of, when that is what ended it.
    pub fn exceeded_limit(&self) -> Option<vsh_monty::LimitKind> {
        match self.execution()? {
            vsh_monty::ExecutionError::Limit { limit, .. } => Some(limit.limit),
            _ => None,
        }
    }

    /// The accesses the policy refused a run that failed, in order: a
    /// program's ([`VshError::refused_run`]) or a Bash program's that exited
    /// non-zero or ran out of a budget; `None` for any other error.
    pub fn refused_accesses(&self) -> Option<&[vsh_policy::DeniedAccess]> {
        if let Some((denied, _)) = self.refused_run() {
            return Some(denied);
        }
        match self {
            Self::Bash { source, .. } => match source.as_ref() {
                vsh_monty::ExecutionError::Bash { denied, .. } if !denied.is_empty() => Some(denied.as_slice()),
                _ => None,
            },
            Self::RevertRefused { denied, .. } => Some(std::slice::from_ref(denied.as_ref())),
            _ => None,
        }
    }

    /// What changed under stale work, with how many paths did, where this
    /// error says the work went stale (a commit's revalidation, or an
    /// approval's).
    pub fn stale_conflicts(&self) -> Option<(&[vsh_commit::Conflict], usize)> {
        let commit = match self {
            Self::Commit(commit) => commit,
            Self::ApprovalStale { source, .. } => source.as_ref(),
            _ => return None,
        };
        match commit {
            vsh_commit::CommitError::Stale { conflicts, total } => Some((conflicts, *total)),
            _ => None,
        }
    }

    /// The category this error belongs to.
    pub fn category(&self) -> ErrorCategory {
        use ErrorCategory as C;
        match self {
            Self::Workspace(_)
            | Self::DataDirectory(_)
            | Self::Authority(_)
            | Self::AuthorityKeyInWorkspace(_)
            | Self::WorkspaceInsideRuntime
            | Self::WorkerNotFound
            | Self::Worker(_)
            | Self::CandidateUnavailable(_) => C::Configuration,
            Self::PolicyFile(_)
            | Self::PolicyChanged(_)
            | Self::WorkspacePolicyForged(_)
            | Self::WorkspacePolicyReplaced
            | Self::RevertRefused { .. } => C::Policy,
            Self::Execution(_)
            | Self::Raised { .. }
            | Self::Vfs(_)
            | Self::ResultNesting { .. }
            | Self::RequestDeadline(_)
            | Self::IntentTooLarge { .. }
            | Self::LanguageUnavailable { .. }
            | Self::Bash { .. }
            | Self::InvalidCommand { .. }
            | Self::CandidatePromoted
            | Self::CandidateSteps { .. }
            | Self::CandidateImageFull { .. }
            | Self::VerifierTimeout { .. }
            | Self::ForeignCheckpoint
            | Self::InvalidSeed { .. }
            | Self::ScratchBusy { .. }
            | Self::Cancelled => C::Execution,
            Self::Commit(_)
            | Self::EphemeralCapacity { .. }
            | Self::DurablePreviewCapacity { .. }
            | Self::StoreSpace { .. }
            | Self::SeedChanged { .. }
            | Self::RevertChanged { .. }
            | Self::DoneMeanwhile { .. } => C::Commit,
            Self::UnknownTransaction(_)
            | Self::NoSuchTransaction(_)
            | Self::AmbiguousTransaction { .. }
            | Self::TransactionName(_)
            | Self::NotCommittable { .. }
            | Self::NotApprovable { .. }
            | Self::NotRevertible { .. }
            | Self::RevertWaiting { .. }
            | Self::ApprovalStale { .. }
            | Self::HookRequired(_)
            | Self::NoHook
            | Self::HookHandler(_)
            | Self::HookEventMismatch(_)
            | Self::HookReasonLimit { .. }
            | Self::IncompleteHookEvidence(_)
            // The way to a commit, not vsh's records (ux70 F3).
            | Self::Store(
                vsh_store::StoreError::ApprovalLapsed { .. }
                | vsh_store::StoreError::ApprovalExpired { .. }
                | vsh_store::StoreError::PreviewExpired { .. },
            ) => C::Approval,
            Self::Store(_) | Self::ArtifactBinding(_) | Self::Evidence { .. } | Self::RevertUnavailable { .. } => {
                C::Store
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_the_category_its_cause_belongs_to() {
        let id = TransactionId::from_bytes([1; 32]);
        let cases = [
            (VshError::WorkerNotFound, ErrorCategory::Configuration),
            (VshError::AuthorityKeyInWorkspace(vsh_types::VPath::root()), ErrorCategory::Configuration),
            (VshError::PolicyChanged(id), ErrorCategory::Policy),
            (VshError::ArtifactBinding(id), ErrorCategory::Store),
            (VshError::Store(vsh_store::StoreError::DataDirIsRoot), ErrorCategory::Store),
            (
                VshError::Store(vsh_store::StoreError::ApprovalLapsed { id, expires_ms: 1, now_ms: 2 }),
                ErrorCategory::Approval,
            ),
            (VshError::Cancelled, ErrorCategory::Execution),
            (VshError::InvalidCommand { reason: "empty".into() }, ErrorCategory::Execution),
            (VshError::LanguageUnavailable { language: crate::Language::Bash }, ErrorCategory::Execution),
            (VshError::ResultNesting { depth: 300, max: 256 }, ErrorCategory::Execution),
            (VshError::IntentTooLarge { length: 9, max: 8 }, ErrorCategory::Execution),
            (VshError::EphemeralCapacity { entries: 64, bytes: 0 }, ErrorCategory::Commit),
            (VshError::SeedChanged { paths: vec![vsh_types::VPath::root()] }, ErrorCategory::Commit),
            (
                VshError::RevertChanged {
                    transaction: id,
                    paths: vec![vsh_types::VPath::root()],
                    total: 1,
                    later: Vec::new(),
                    reverted_by: None,
                    outside: true,
                },
                ErrorCategory::Commit,
            ),
            (
                VshError::RevertUnavailable { transaction: id, path: vsh_types::VPath::root(), reason: "gone".into() },
                ErrorCategory::Store,
            ),
            (VshError::NotRevertible { transaction: id, state: TransactionState::Denied }, ErrorCategory::Approval),
            (VshError::DoneMeanwhile { transaction: id, by: id }, ErrorCategory::Commit),
            (VshError::CandidatePromoted, ErrorCategory::Execution),
            (
                VshError::CandidateUnavailable(vsh_sandbox::CandidateMissing::Privilege { uid: 1000 }),
                ErrorCategory::Configuration,
            ),
            (VshError::DurablePreviewCapacity { entries: 256, bytes: 0 }, ErrorCategory::Commit),
            (VshError::StoreSpace { needed: 2, available: 3, reserve: 1 }, ErrorCategory::Commit),
            (VshError::ScratchBusy { waited_ms: 1 }, ErrorCategory::Execution),
            (
                VshError::Commit(vsh_commit::CommitError::RecoveryPending { conflicts: Vec::new() }),
                ErrorCategory::Commit,
            ),
            (VshError::UnknownTransaction(id), ErrorCategory::Approval),
            (VshError::NoSuchTransaction("abcdef".into()), ErrorCategory::Approval),
            (VshError::TransactionName("xyz".into()), ErrorCategory::Approval),
            (
                VshError::AmbiguousTransaction { prefix: "abcdef".into(), candidates: vec![id], total: 2 },
                ErrorCategory::Approval,
            ),
            (VshError::NotCommittable { transaction: id, state: TransactionState::Denied }, ErrorCategory::Approval),
            (VshError::NoHook, ErrorCategory::Approval),
            (VshError::IncompleteHookEvidence(id), ErrorCategory::Approval),
        ];
        for (error, category) in cases {
            assert_eq!(error.category(), category, "{error:?}");
        }
    }
}
