//! [`CandidateWorkspace`]: the seed's candidate workspace
//! (`candidate-workspace.txt`) over one long-lived virtual image.
//!
//! A candidate is a transaction that is built step by step: Monty and Bash
//! programs and real commands ([`CandidateWorkspace::run`],
//! [`CandidateWorkspace::verify`]) run one after another against the same
//! image, each seeing what the earlier ones changed; files exported from an
//! earlier candidate come back ([`CandidateWorkspace::restore_exported`]) or
//! are inherited without becoming this candidate's work
//! ([`CandidateWorkspace::restore_seeded`]); the image can be checkpointed
//! and restored exactly. Nothing reaches the workspace until
//! [`CandidateWorkspace::promote`], which is a run's last stages over the
//! accumulated image: the diff of the paths the steps changed, the policy,
//! the binding (the session's transcript is its program, every step's
//! output its evidence), and the commit through the runtime's one commit
//! path (vsh-commit's journaled writer), or pending approval.
//!
//! The seed's perspt-specific types map as follows: `source_root` is the
//! runtime's workspace (a candidate is made from a [`crate::Runtime`]);
//! `node_id`, `generation` and `graph_revision` are a [`CandidateLabel`],
//! bound into the transaction as its intent; `SeedFile` is [`SeedFile`]
//! (its pre-image is the [`NodeState`] the workspace held, not bytes);
//! `promote`'s list of written paths is the receipt's changes;
//! `CandidateCheckpoint` is [`CandidateCheckpoint`]; `CandidateStateWitness`
//! is [`CandidateStateWitness`]; the seed's tool registry
//! (`set_tool_handlers`, `apply`) is the step API ([`CandidateWorkspace::run`]);
//! `overlay_root` is where commands see the candidate, the workspace's own
//! path (the candidate is mounted there in each command's private
//! namespace; nothing is copied anywhere).

mod host;
pub(crate) mod seed;

pub use seed::{SeedFile, SeedNode};

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use vsh_monty::ExecutionStats;
use vsh_policy::DeniedAccess;
use vsh_types::{CanonicalDiff, DiffDigest, DiffEntry, VPath};
use vsh_vfs::{ImageCheckpoint, ReviewLimits, VirtualFs};

use crate::cancel::ExecutionCancellation;
use crate::evidence::EvidenceOutput;
use crate::receipt::{Receipt, SessionStep, StageTimings, StepKind};
use crate::request::{Language, ReceiptDetail, RunMode, RunRequest};
use crate::run::{Concluding, Executed};
use crate::{ExecutionBudget, Runtime, VshError};

/// The profile a candidate's promotion is bound under.
pub const SESSION_PROFILE: &str = "vsh-candidate-session-v1";

/// The most steps one candidate records.
pub(crate) const MAX_STEPS: usize = 16_384;

/// The most bytes a candidate's image holds in memory by default (see
/// [`CandidateWorkspace::with_max_image_bytes`]).
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 1 << 30;

/// Who a candidate is for, as the seed names it: a node of an agent's task
/// graph, the node's generation, and the graph's revision. Bound into the
/// promoted transaction (as its intent), never interpreted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateLabel {
    /// The node.
    pub node_id: String,
    /// The node's generation.
    pub generation: u32,
    /// The graph's revision.
    pub graph_revision: String,
}

impl CandidateLabel {
    /// The intent a promotion binds.
    fn intent(&self) -> String {
        format!("candidate {} generation {} of graph {}", self.node_id, self.generation, self.graph_revision)
    }
}

/// A verifier's stage, each with its own timeout ([`VerifierTimeouts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VerifierStage {
    /// A syntax or type check.
    Syntax,
    /// A build.
    Build,
    /// A test run.
    Test,
    /// A linter.
    Lint,
    /// A formatter.
    Format,
}

impl VerifierStage {
    /// `syntax`, `build`, `test`, `lint` or `format`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Syntax => "syntax",
            Self::Build => "build",
            Self::Test => "test",
            Self::Lint => "lint",
            Self::Format => "format",
        }
    }
}

/// How long each verifier stage may run: a default (180 s) and optional
/// per-stage overrides, each at least [`VerifierTimeouts::MIN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifierTimeouts {
    /// Every stage without an override.
    pub default: Duration,
    /// [`VerifierStage::Syntax`].
    pub syntax: Option<Duration>,
    /// [`VerifierStage::Build`].
    pub build: Option<Duration>,
    /// [`VerifierStage::Test`].
    pub test: Option<Duration>,
    /// [`VerifierStage::Lint`].
    pub lint: Option<Duration>,
    /// [`VerifierStage::Format`].
    pub format: Option<Duration>,
}

impl Default for VerifierTimeouts {
    fn default() -> Self {
        Self { default: Duration::from_mins(3), syntax: None, build: None, test: None, lint: None, format: None }
    }
}

impl VerifierTimeouts {
    /// The shortest timeout a stage may have.
    pub const MIN: Duration = Duration::from_secs(1);

    /// The timeout of `stage`, never below [`VerifierTimeouts::MIN`].
    pub fn of(&self, stage: VerifierStage) -> Duration {
        let chosen = match stage {
            VerifierStage::Syntax => self.syntax,
            VerifierStage::Build => self.build,
            VerifierStage::Test => self.test,
            VerifierStage::Lint => self.lint,
            VerifierStage::Format => self.format,
        };
        chosen.unwrap_or(self.default).max(Self::MIN)
    }
}

/// A candidate's image at one moment ([`CandidateWorkspace::checkpoint`]).
#[derive(Debug, Clone)]
pub struct CandidateCheckpoint {
    image: ImageCheckpoint,
    touched: BTreeSet<VPath>,
    seeded: BTreeSet<VPath>,
    steps: usize,
    /// The candidate it belongs to.
    owner: usize,
}

/// What a candidate holds now ([`CandidateWorkspace::state_witness`]): the
/// digest of its promotable diff, the paths it would write, and the steps
/// recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateStateWitness {
    /// The promotable diff's digest.
    pub diff: DiffDigest,
    /// The paths promotion would change, sorted.
    pub changed: Vec<VPath>,
    /// The steps recorded so far.
    pub steps: usize,
}

/// The image and what the steps left, behind the candidate's lock.
struct State {
    vfs: VirtualFs,
    steps: Vec<SessionStep>,
    denied: Vec<DeniedAccess>,
    stats: ExecutionStats,
    /// Paths the steps (and restored exports) changed: the promotable set.
    touched: BTreeSet<VPath>,
    /// Paths inherited by [`CandidateWorkspace::restore_seeded`], promotable
    /// only once a step touches them.
    seeded: BTreeSet<VPath>,
    /// Promoted: no more steps.
    promoted: bool,
    /// The most bytes the image may hold in memory ([`VirtualFs::overlay_bytes`]).
    max_image_bytes: u64,
}

impl State {
    /// Refuse an image grown past its bound, putting back `before`.
    fn check_image(&mut self, before: &vsh_vfs::ImageCheckpoint) -> Result<(), VshError> {
        let bytes = self.vfs.overlay_bytes();
        if bytes > self.max_image_bytes {
            self.vfs.restore(before);
            return Err(VshError::CandidateImageFull { bytes, max: self.max_image_bytes });
        }
        Ok(())
    }
}

/// A candidate workspace (see the module documentation).
pub struct CandidateWorkspace {
    runtime: Arc<Runtime>,
    label: CandidateLabel,
    unisolated: bool,
    timeouts: VerifierTimeouts,
    root: PathBuf,
    state: Mutex<State>,
}

impl std::fmt::Debug for CandidateWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandidateWorkspace")
            .field("label", &self.label)
            .field("root", &self.root)
            .field("unisolated", &self.unisolated)
            .finish_non_exhaustive()
    }
}

/// Add `step`'s counters to `total`.
fn add_stats(total: &mut ExecutionStats, step: &ExecutionStats) {
    total.os_calls += step.os_calls;
    total.read_bytes += step.read_bytes;
    total.write_bytes += step.write_bytes;
    total.directory_entries += step.directory_entries;
    total.evidence_records += step.evidence_records;
    total.evidence_bytes += step.evidence_bytes;
    total.output_bytes += step.output_bytes;
    total.denied_accesses += step.denied_accesses;
    total.hidden_looks += step.hidden_looks;
    for path in &step.hidden_paths {
        if total.hidden_paths.len() < vsh_monty::MAX_HIDDEN_PATHS && !total.hidden_paths.contains(path) {
            total.hidden_paths.push(path.clone());
        }
    }
    total.result_bytes += step.result_bytes;
    total.truncated_results += step.truncated_results;
    total.skipped_nodes += step.skipped_nodes;
    total.duration_ns += step.duration_ns;
}

/// The paths `effects` changed (a removal or a rename: everything beneath too).
fn effect_paths(effects: &[vsh_vfs::Effect], into: &mut BTreeSet<VPath>) {
    use vsh_vfs::Effect;
    for effect in effects {
        match effect {
            Effect::Write(path) | Effect::Mkdir(path) | Effect::Remove(path) | Effect::SetMode(path) => {
                into.insert(path.clone());
            }
            Effect::Rename { from, to } => {
                into.insert(from.clone());
                into.insert(to.clone());
            }
        }
    }
}

/// Whether `path` is one of `roots` or lies beneath one.
fn covered(roots: &BTreeSet<VPath>, path: &VPath) -> bool {
    roots.contains(path) || path.ancestors().iter().any(|ancestor| roots.contains(ancestor))
}

/// The part of `diff` that is the candidate's own work: what the steps
/// touched, never what was only inherited, and the directories the kept
/// entries need made.
fn promotable(
    diff: &CanonicalDiff,
    touched: &BTreeSet<VPath>,
    seeded: &BTreeSet<VPath>,
) -> Result<CanonicalDiff, VshError> {
    let own = |entry: &DiffEntry| covered(touched, &entry.path) || !covered(seeded, &entry.path);
    let mut kept: BTreeSet<VPath> = diff.entries().iter().filter(|entry| own(entry)).map(|e| e.path.clone()).collect();
    let needed: Vec<VPath> = kept.iter().flat_map(VPath::ancestors).collect();
    kept.extend(needed);
    let entries = diff.entries().iter().filter(|entry| kept.contains(&entry.path)).cloned().collect();
    CanonicalDiff::new(entries).map_err(|_| {
        VshError::Vfs(vsh_vfs::VfsError::InvalidOperation { path: VPath::root(), reason: "diff entries out of order" })
    })
}

/// One step's program, as the transcript names it.
#[derive(serde::Serialize)]
struct TranscriptStep<'s> {
    kind: &'static str,
    program: &'s str,
    exit_code: i32,
    kept: bool,
    unisolated: bool,
}

impl CandidateWorkspace {
    /// A candidate of `runtime`'s workspace for the node `label` names,
    /// whose commands run only under the kernel confinement real commands
    /// get (see [`CandidateWorkspace::create_with_policy`]).
    ///
    /// # Errors
    ///
    /// [`VshError::CandidateUnavailable`] when this host cannot make
    /// candidates (no FUSE device, no privilege to mount): creation fails
    /// closed, naming what is missing.
    pub fn create(runtime: Arc<Runtime>, label: CandidateLabel) -> Result<Self, VshError> {
        Self::create_with_policy(runtime, label, false)
    }

    /// [`CandidateWorkspace::create`]; with `allow_unisolated_verifiers`,
    /// commands still run where the kernel cannot confine them (no Landlock
    /// or seccomp): every sandbox axis's floor is lowered to none instead of
    /// failing closed, and every such step says `unisolated` in the
    /// transcript, the evidence and the receipt. The candidate itself (the
    /// private FUSE mount) is required either way: without it no command
    /// could be observed.
    ///
    /// # Errors
    ///
    /// As [`CandidateWorkspace::create`].
    pub fn create_with_policy(
        runtime: Arc<Runtime>,
        label: CandidateLabel,
        allow_unisolated_verifiers: bool,
    ) -> Result<Self, VshError> {
        vsh_sandbox::candidate_support().map_err(VshError::CandidateUnavailable)?;
        let vfs = runtime.runs().fresh_image();
        let root = runtime.runs().workspace().display_path().to_path_buf();
        Ok(Self {
            runtime,
            label,
            unisolated: allow_unisolated_verifiers,
            timeouts: VerifierTimeouts::default(),
            root,
            state: Mutex::new(State {
                vfs,
                steps: Vec::new(),
                denied: Vec::new(),
                stats: ExecutionStats::default(),
                touched: BTreeSet::new(),
                seeded: BTreeSet::new(),
                promoted: false,
                max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
            }),
        })
    }

    /// Bound the bytes the candidate's image holds in memory (written
    /// files and symlink targets; content still read from the workspace is
    /// not counted) to `bytes` instead of [`DEFAULT_MAX_IMAGE_BYTES`] (1 GiB).
    /// Each step, host write and restore is checked once it is done: one
    /// that leaves the image past the bound is undone and is
    /// [`VshError::CandidateImageFull`]. Build outputs belong in scratch
    /// directories, which are not in the image.
    #[must_use]
    pub fn with_max_image_bytes(self, bytes: u64) -> Self {
        self.lock().max_image_bytes = bytes;
        self
    }

    /// Where commands see the candidate: the workspace's own path (the
    /// candidate covers it in each command's private namespace).
    pub fn overlay_root(&self) -> &Path {
        &self.root
    }

    /// Replace the verifier timeouts ([`CandidateWorkspace::verify`]).
    pub fn set_verifier_timeouts(&mut self, timeouts: VerifierTimeouts) {
        self.timeouts = timeouts;
    }

    /// The verifier timeouts.
    pub fn verifier_timeouts(&self) -> VerifierTimeouts {
        self.timeouts
    }

    /// The node generation this candidate was made for.
    pub fn node_generation(&self) -> u32 {
        self.label.generation
    }

    /// Who the candidate is for.
    pub fn label(&self) -> &CandidateLabel {
        &self.label
    }

    /// Whether commands may run unconfined ([`CandidateWorkspace::create_with_policy`]).
    pub fn allows_unisolated_verifiers(&self) -> bool {
        self.unisolated
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, unless the candidate was promoted.
    fn open(&self) -> Result<MutexGuard<'_, State>, VshError> {
        let state = self.lock();
        if state.promoted {
            return Err(VshError::CandidatePromoted);
        }
        Ok(state)
    }

    /// Whether any step changed anything (the promotable set is not empty).
    pub fn has_mutated(&self) -> bool {
        !self.lock().touched.is_empty()
    }

    /// The paths the steps and restored exports changed, sorted: the only
    /// ones [`CandidateWorkspace::promote`] may write. What was only read,
    /// or only inherited, is never among them.
    pub fn touched_paths(&self) -> Vec<String> {
        self.lock().touched.iter().map(ToString::to_string).collect()
    }

    /// Run one step against the candidate: a Monty or Bash program, or a
    /// real command (`request.language`, with its budget; its mode, intent
    /// and detail are not used). It sees what the earlier steps changed.
    ///
    /// A step that ran to its end is recorded and returned whatever its
    /// exit status; one that exited with another status than 0 is undone
    /// (the candidate is as before it) unless `request.accept_failure`.
    /// Accesses the policy refused are kept whatever happened: they deny
    /// the promotion.
    ///
    /// # Errors
    ///
    /// A step that could not run to its end (an uncaught exception, a
    /// budget, a cancellation, a program the candidate cannot start) is
    /// undone and is the error; [`VshError::CandidatePromoted`] after a
    /// promotion; [`VshError::LanguageUnavailable`] for
    /// [`Language::Session`] or a language the runtime does not run.
    pub fn run(&self, request: &RunRequest<'_>) -> Result<SessionStep, VshError> {
        self.run_cancellable(request, &ExecutionCancellation::new())
    }

    /// [`CandidateWorkspace::run`] with a cancellation handle.
    ///
    /// # Errors
    ///
    /// As [`CandidateWorkspace::run`]; a cancellation is [`VshError::Cancelled`].
    pub fn run_cancellable(
        &self,
        request: &RunRequest<'_>,
        cancel: &ExecutionCancellation,
    ) -> Result<SessionStep, VshError> {
        let Some(kind) = StepKind::of(request.language) else {
            return Err(VshError::LanguageUnavailable { language: request.language });
        };
        let mut state = self.open()?;
        if state.steps.len() >= MAX_STEPS {
            return Err(VshError::CandidateSteps { max: MAX_STEPS });
        }
        let state = &mut *state;
        let before = state.vfs.checkpoint();
        let effects_before = state.vfs.effects().len();
        let runs = self.runtime.runs();
        let mut commands = runs.command_config();
        commands.unisolated = self.unisolated;
        let profile = runs.profile_of(request.language);
        let ran = runs.execute_with(request, &mut state.vfs, cancel, &commands, &crate::run::provisional_taint());
        let (executed, kept) = match ran {
            Ok(executed) => (executed, true),
            Err(error) => match failed_script(error, profile) {
                Ok(executed) if request.accept_failure => (executed, true),
                Ok(executed) => (executed, false),
                Err((error, denied)) => {
                    state.vfs.restore(&before);
                    state.denied.extend(denied);
                    return Err(error);
                }
            },
        };
        if kept {
            state.check_image(&before)?;
            effect_paths(&state.vfs.effects()[effects_before..], &mut state.touched);
        } else {
            state.vfs.restore(&before);
        }
        add_stats(&mut state.stats, &executed.stats);
        state.denied.extend(executed.denied);
        let unisolated = self.unisolated && runs.may_run_commands(request.language);
        let step = session_step(kind, request.code, executed.output, kept, unisolated);
        state.steps.push(step.clone());
        Ok(step)
    }

    /// Serve one file request on the image as a step's own access is
    /// served (for the seed `Host` over the candidate): refusals are kept
    /// (they deny the promotion), and what a write changes is the
    /// candidate's own work, recorded in the transcript as a host write.
    pub(crate) fn serve(
        &self,
        request: vsh_types::fsproto::FsRequest,
    ) -> Result<vsh_types::fsproto::FsReply, VshError> {
        let mut state = self.open()?;
        let state = &mut *state;
        let effects_before = state.vfs.effects().len();
        let before = state.vfs.checkpoint();
        let policy = self.runtime.runs().policy().calls();
        let served = vsh_monty::serve_request(&mut state.vfs, policy, &ExecutionBudget::default(), request)
            .map_err(|error| VshError::Execution(Box::new(error)))?;
        state.check_image(&before)?;
        add_stats(&mut state.stats, &served.stats);
        state.denied.extend(served.denied);
        let mut changed = BTreeSet::new();
        effect_paths(&state.vfs.effects()[effects_before..], &mut changed);
        if !changed.is_empty() {
            if state.steps.len() >= MAX_STEPS {
                return Err(VshError::CandidateSteps { max: MAX_STEPS });
            }
            let paths: Vec<&str> = changed.iter().map(VPath::as_str).collect();
            let program = serde_json::to_string(&paths).expect("paths serialize");
            let output =
                EvidenceOutput::Bash { profile: String::new(), exit_code: 0, stdout: Vec::new(), stderr: Vec::new() };
            state.steps.push(session_step(StepKind::HostWrite, &program, output, true, false));
            state.touched.extend(changed);
        }
        Ok(served.reply)
    }

    /// Run `argv` as a verifier of `stage`: a real command in the candidate
    /// whose time is the stage's timeout ([`VerifierTimeouts`]); its other
    /// budgets are the defaults. Recorded and undone on failure as any step
    /// ([`CandidateWorkspace::run`]; `accept_failure` keeps what a failing
    /// verifier changed).
    ///
    /// # Errors
    ///
    /// [`VshError::VerifierTimeout`] naming the stage when the timeout
    /// passed (the command's whole process tree is killed, and nothing it
    /// changed is kept); otherwise as [`CandidateWorkspace::run`].
    pub fn verify(&self, stage: VerifierStage, argv: &[String], accept_failure: bool) -> Result<SessionStep, VshError> {
        let timeout = self.timeouts.of(stage);
        let code = serde_json::to_string(argv)
            .map_err(|_| VshError::InvalidCommand { reason: "the argv cannot be written as JSON".to_owned() })?;
        let mut budget = ExecutionBudget::default();
        budget.max_duration = timeout;
        budget.max_request_duration = budget.max_request_duration.max(timeout + Duration::from_secs(5));
        let mut request = RunRequest::new(&code).with_language(Language::Command).with_budget(budget);
        request.accept_failure = accept_failure;
        match self.run(&request) {
            Err(VshError::Execution(error)) if is_duration_limit(&error) => {
                Err(VshError::VerifierTimeout { stage, timeout })
            }
            outcome => outcome,
        }
    }

    /// The candidate's own changes as unified text: hunks for text files,
    /// one line for any other change (a directory, a symlink, a mode, a
    /// binary or large file). For reading; promotion decides on the
    /// structural diff.
    ///
    /// # Errors
    ///
    /// The image's error, if the diff cannot be computed.
    pub fn realized_diff(&self) -> Result<String, VshError> {
        let mut state = self.lock();
        let state = &mut *state;
        let diff = promotable(&state.vfs.canonical_diff()?, &state.touched, &state.seeded)?;
        let limits = ReviewLimits { max_file_bytes: 4 << 20, max_total_bytes: 64 << 20 };
        let calls = self.runtime.runs().policy().calls();
        let unreadable = |path: &VPath| calls.authorize(path, vsh_policy::AccessKind::ContentRead).is_err();
        let reviews = state.vfs.review(diff.entries(), limits, &unreadable)?;
        let mut text = String::new();
        for (entry, review) in diff.entries().iter().zip(&reviews) {
            match &review.hunks {
                Ok(hunks) => text.push_str(hunks),
                Err(why) => {
                    let why = match why {
                        vsh_vfs::NoHunks::NotFileContent => "not a file's content or a link's target",
                        vsh_vfs::NoHunks::Binary => "binary",
                        vsh_vfs::NoHunks::TooLarge => "too large",
                        vsh_vfs::NoHunks::BudgetSpent => "review budget spent",
                        vsh_vfs::NoHunks::Unavailable => "before state no longer on disk",
                        vsh_vfs::NoHunks::Protected => "protected",
                        vsh_vfs::NoHunks::Renamed => "renamed: shown at the path it moved to",
                    };
                    let _ = writeln!(
                        text,
                        "--- a/{path}\n+++ b/{path}\n# {kind:?}: no text hunks ({why})",
                        path = entry.path,
                        kind = entry.kind
                    );
                }
            }
        }
        Ok(text)
    }

    /// The candidate's image as it is now, to go back to exactly with
    /// [`CandidateWorkspace::restore`].
    pub fn checkpoint(&self) -> CandidateCheckpoint {
        let state = self.lock();
        CandidateCheckpoint {
            image: state.vfs.checkpoint(),
            touched: state.touched.clone(),
            seeded: state.seeded.clone(),
            steps: state.steps.len(),
            owner: std::ptr::from_ref(self) as usize,
        }
    }

    /// Put the candidate back exactly as it was at `checkpoint`: files made
    /// since are gone, changed ones are as they were, the promotable and
    /// inherited sets are the checkpoint's. The steps run since stay in the
    /// transcript (marked not kept) and refused accesses stay refused.
    ///
    /// # Errors
    ///
    /// [`VshError::ForeignCheckpoint`] for another candidate's checkpoint;
    /// [`VshError::CandidatePromoted`] after a promotion.
    pub fn restore(&self, checkpoint: &CandidateCheckpoint) -> Result<(), VshError> {
        if checkpoint.owner != std::ptr::from_ref(self) as usize {
            return Err(VshError::ForeignCheckpoint);
        }
        let mut state = self.open()?;
        state.vfs.restore(&checkpoint.image);
        state.touched.clone_from(&checkpoint.touched);
        state.seeded.clone_from(&checkpoint.seeded);
        let since = checkpoint.steps.min(state.steps.len());
        for step in &mut state.steps[since..] {
            step.kept = false;
        }
        Ok(())
    }

    /// A witness of what the candidate holds now.
    ///
    /// # Errors
    ///
    /// The image's error, if the diff cannot be computed.
    pub fn state_witness(&self) -> Result<CandidateStateWitness, VshError> {
        let mut state = self.lock();
        let state = &mut *state;
        let diff = promotable(&state.vfs.canonical_diff()?, &state.touched, &state.seeded)?;
        Ok(CandidateStateWitness {
            diff: diff.digest(),
            changed: diff.entries().iter().map(|entry| entry.path.clone()).collect(),
            steps: state.steps.len(),
        })
    }

    /// Promote the candidate's own work: decide, bind and store it as one
    /// transaction (its program is the session's transcript, its evidence
    /// every step's output), and commit it through the runtime's commit
    /// path if the policy auto-approves (a configured commit hook decides
    /// first, as for any commit). Work that needs approval is stored
    /// pending, for [`Runtime::approve`] and [`Runtime::commit`]; denied
    /// work is recorded and changes nothing. Only what the steps touched is
    /// written; revalidation makes a workspace changed under what the steps
    /// read or write stale, and nothing is written then.
    ///
    /// The candidate takes no more steps once a promotion returned a receipt.
    ///
    /// # Errors
    ///
    /// As a run and a commit ([`VshError::Commit`] with `Stale` among them).
    pub fn promote(&self) -> Result<Receipt, VshError> {
        let started = Instant::now();
        let mut state = self.open()?;
        let state = &mut *state;
        let diffing = Instant::now();
        let diff = promotable(&state.vfs.canonical_diff().map_err(stale_if_changed)?, &state.touched, &state.seeded)?;
        let timings = StageTimings { diff: crate::run::elapsed_ns(diffing), ..StageTimings::default() };
        let transcript = transcript(&state.steps);
        let intent = self.label.intent();
        let request = RunRequest::new(&transcript)
            .with_language(Language::Session)
            .with_intent(&intent)
            .with_mode(RunMode::Auto)
            .with_detail(ReceiptDetail::Full);
        let outcome = Executed::of_output(
            EvidenceOutput::Session { steps: state.steps.clone() },
            state.stats.clone(),
            state.denied.clone(),
        );
        let concluding = Concluding { request: &request, vfs: &mut state.vfs, diff, outcome, timings };
        let receipt = self.runtime.promote(concluding, started).map_err(|error| match error {
            VshError::Vfs(error) => stale_if_changed(error),
            error => error,
        })?;
        state.promoted = true;
        Ok(receipt)
    }
}

/// The session's transcript: every step's kind, program, exit status,
/// whether it was kept and whether it ran unisolated, as JSON.
pub(crate) fn transcript(steps: &[SessionStep]) -> String {
    let steps: Vec<TranscriptStep<'_>> = steps
        .iter()
        .map(|step| TranscriptStep {
            kind: step.kind.name(),
            program: &step.program,
            exit_code: step.exit_code,
            kept: step.kept,
            unisolated: step.unisolated,
        })
        .collect();
    serde_json::to_string(&steps).expect("a transcript serializes")
}

/// A Bash program's or a command's non-zero exit, as what it produced;
/// anything else back as the error, with the accesses it had refused.
#[expect(clippy::result_large_err, reason = "the error is the caller's to return")]
fn failed_script(error: VshError, profile: &str) -> Result<Executed, (VshError, Vec<DeniedAccess>)> {
    use vsh_monty::{BashFailure, ExecutionError};
    let VshError::Bash { source, changes, changes_complete } = error else {
        let denied = error.refused_run().map(|(denied, _)| denied.to_vec()).unwrap_or_default();
        return Err((error, denied));
    };
    match *source {
        ExecutionError::Bash {
            failure: BashFailure::Exit(_) | BashFailure::Signal(_),
            exit_code,
            stdout,
            stderr,
            stats,
            denied,
        } => Ok(Executed {
            output: EvidenceOutput::Bash { profile: profile.to_owned(), exit_code, stdout, stderr },
            stats,
            denied,
            scratch_emptied: Vec::new(),
            scratch_cleared: 0,
            scratch_regranted: None,
            scratch_limit: 0,
            waited_ns: 0,
        }),
        other => {
            let denied = match &other {
                ExecutionError::Bash { denied, .. } => denied.clone(),
                _ => Vec::new(),
            };
            Err((VshError::Bash { source: Box::new(other), changes, changes_complete }, denied))
        }
    }
}

/// The workspace changed under a node a step observed (found while the
/// promotion diffs or reviews it): the work is stale before any transaction
/// is made of it. Any other image error as it is.
fn stale_if_changed(error: vsh_vfs::VfsError) -> VshError {
    use vsh_commit::{CommitError, Conflict, ConflictReason};
    match error {
        vsh_vfs::VfsError::BaseChanged { path } => {
            let conflicts = vec![Conflict { path, reason: ConflictReason::Precondition }];
            VshError::Commit(CommitError::Stale { conflicts, total: 1 })
        }
        error => VshError::Vfs(error),
    }
}

/// Whether `error` is the run's time running out.
fn is_duration_limit(error: &vsh_monty::ExecutionError) -> bool {
    matches!(error, vsh_monty::ExecutionError::Limit { limit, .. } if limit.limit == vsh_monty::LimitKind::Duration)
}

/// A step's record from what it produced.
pub(crate) fn session_step(
    kind: StepKind,
    program: &str,
    output: EvidenceOutput,
    kept: bool,
    unisolated: bool,
) -> SessionStep {
    let (profile, exit_code, value, stdout, stderr) = match output {
        EvidenceOutput::Monty { value, stdout } => (String::new(), 0, Some(value), stdout.into_bytes(), Vec::new()),
        EvidenceOutput::Bash { profile, exit_code, stdout, stderr } => (profile, exit_code, None, stdout, stderr),
        EvidenceOutput::Session { .. } => (String::new(), 0, None, Vec::new(), Vec::new()),
        // What it raised, as its error stream.
        EvidenceOutput::MontyRaised { exception, stdout } => {
            (String::new(), 1, None, stdout.into_bytes(), exception.into_bytes())
        }
    };
    SessionStep { kind, program: program.to_owned(), profile, exit_code, value, stdout, stderr, kept, unisolated }
}
