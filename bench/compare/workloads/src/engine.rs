//! What an engine under comparison offers the workloads: open a runtime on a
//! workspace and a data directory, run a program as a preview or in auto
//! mode, approve, commit, discard. Each engine's package implements these two
//! traits over its own crate; nothing here names either crate.

use std::fmt;
use std::path::Path;

/// Where programs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exec {
    /// In the runtime's own process (trusted programs and tests).
    InProcess,
    /// In the engine's confined worker process (production mode).
    Worker,
}

/// A transaction's state as the workloads need to tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The policy approved it; not committed yet.
    AutoApproved,
    /// It waits for an operator's approval.
    PendingApproval,
    /// An operator approved it; not committed yet.
    Approved,
    /// It is committed.
    Committed,
    /// The policy denied it.
    Denied,
    /// The workspace changed under it; nothing was written.
    Stale,
    /// Any other state.
    Other,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The stage timings an engine's receipt reports, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages {
    /// Taking the snapshot (virtual image).
    pub snapshot: u64,
    /// Running the program.
    pub execute: u64,
    /// Computing the diff.
    pub diff: u64,
    /// Evaluating the policy.
    pub policy: u64,
    /// Binding and storing the transaction.
    pub bind_and_store: u64,
    /// Reserving, revalidating, applying and verifying the commit.
    pub commit: u64,
    /// End to end, as the engine timed it.
    pub total: u64,
}

impl Stages {
    /// The stages by name, in pipeline order.
    pub fn named(&self) -> [(&'static str, u64); 7] {
        [
            ("snapshot", self.snapshot),
            ("execute", self.execute),
            ("diff", self.diff),
            ("policy", self.policy),
            ("bind_and_store", self.bind_and_store),
            ("commit", self.commit),
            ("total", self.total),
        ]
    }
}

/// What a run or a commit returned.
#[derive(Debug, Clone)]
pub struct Outcome<T> {
    /// The transaction.
    pub tx: T,
    /// Its state in the receipt.
    pub state: State,
    /// How many paths the diff changes.
    pub changed_paths: usize,
    /// The program's printed output (empty for a commit's receipt, whatever
    /// the engine keeps there).
    pub stdout: String,
    /// The receipt's stage timings, when the engine reports them.
    pub stages: Option<Stages>,
}

/// Why a call failed.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The commit found the workspace changed under the transaction (a
    /// revalidation conflict): nothing was written, the work may be run again.
    Stale(String),
    /// Anything else.
    Other(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stale(message) => write!(f, "stale: {message}"),
            Self::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Failure {}

/// One run of a program.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The program.
    pub code: &'a str,
    /// The intent: unique per request (an engine may refuse a request
    /// identical to an earlier one).
    pub intent: &'a str,
    /// Commit at once when the policy auto-approves.
    pub auto: bool,
    /// The guest's time budget, when not the engine's default (the same for
    /// both engines; both default to 1 s).
    pub max_duration: Option<std::time::Duration>,
}

impl<'a> Request<'a> {
    /// A request with the engine's default budget.
    pub fn new(code: &'a str, intent: &'a str, auto: bool) -> Self {
        Self { code, intent, auto, max_duration: None }
    }
}

/// One engine under comparison.
pub trait Engine: Sync {
    /// An open runtime.
    type Runtime: Runtime;

    /// The engine's short name (`ours`, `peer`).
    fn name(&self) -> &'static str;

    /// What exactly is measured: crate version, worker, build facts.
    fn describe(&self) -> String;

    /// Open a runtime on `workspace`, keeping the engine's data in `data`
    /// (outside the workspace), running programs as `exec` says.
    fn open(&self, workspace: &Path, data: &Path, exec: Exec) -> Result<Self::Runtime, Failure>;
}

/// An open runtime: shareable between threads, as a server shares one.
pub trait Runtime: Send + Sync {
    /// The engine's transaction id.
    type Tx: Copy + Send + fmt::Debug;

    /// Run a request's program (with `auto`, commit at once when the policy
    /// auto-approves).
    fn run(&self, request: &Request<'_>) -> Result<Outcome<Self::Tx>, Failure>;

    /// Approve a pending transaction as an operator would: a named principal,
    /// valid from now for ten minutes.
    fn approve(&self, tx: Self::Tx) -> Result<(), Failure>;

    /// Commit an auto-approved preview or an approved transaction, now.
    fn commit(&self, tx: Self::Tx) -> Result<Outcome<Self::Tx>, Failure>;

    /// Let an uncommitted auto-approved preview go.
    fn discard(&self, tx: Self::Tx) -> Result<(), Failure>;
}

/// Milliseconds since the Unix epoch, as the engines' approval and commit
/// calls take the time.
pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The principal every approval names.
pub const OPERATOR: &str = "bench-operator";

/// How long every approval is valid, in milliseconds.
pub const APPROVAL_TTL_MS: u64 = 10 * 60 * 1000;
