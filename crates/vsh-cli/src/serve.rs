//! `vsh serve`: an MCP server on stdio (the official Rust SDK, `rmcp`) that
//! gives an agent the transactional workflow except approving its own work.
//!
//! Tools: `vsh_run`, `vsh_rerun`, `vsh_show`, `vsh_pending`, `vsh_commit`, `vsh_discard`,
//! `vsh_revert`, `vsh_wait`.
//! There is no approve tool: an operator approves with `vsh approve` (pending
//! work is durable, so it works across processes), and `vsh_commit` of work
//! awaiting approval says which command the operator runs. Every result is a
//! tool result: structured content (the same `vsh.*/1` documents as the
//! command line's `--json`, bounded by [`TextBounds`]) and a short text an
//! LLM reads well; a failure is `isError` with a `vsh.error/1` document, never
//! a crashed server.
//!
//! One runtime serves every request, opened at the first tool call on the
//! workspace `--workspace` names, else one the client offers as a root (see
//! [`choose_root`]), else the one found from the current directory. Requests
//! run concurrently (each on tokio's blocking pool, the worker pool bounding
//! executions); `notifications/cancelled` cancels a run or a commit until the
//! commit enters, and a run whose request carries a progress token reports
//! progress every second.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, CallToolResult, ConstString as _, ContentBlock, CustomRequest,
    CustomResult, ErrorData, Implementation, ListToolsRequestMethod, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer, ServerHandler, ServiceExt as _, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use vsh::document::{
    ErrorDocument, ErrorKind, PendingDocument, ReceiptDocument, RecordDocument, ShowDocument, TextBounds,
};
use vsh::{ExecutionBudget, ExecutionCancellation, RunMode, RunRequest, Runtime, TransactionState, VshError};

/// The guest guide, which the tools' descriptions point an agent to.
const GUIDE: &str = include_str!("../../../docs/guest.md");

/// `vsh_run`'s description: what an agent needs to write a program that
/// works the first time (the whole guide is in the server's instructions,
/// which not every client shows the model).
const RUN_DESCRIPTION: &str = "Run a Monty program (a sandboxed Python 3 subset), or with language=bash a Bash \
    script (grep, sed, awk, find, ls, cat, head, tail, wc, sort, cut, tr, xargs, mkdir, rm, mv, cp, touch, chmod and \
    more; no processes, network, clock or links; any non-zero exit ends the run uncommittable), against a virtual \
    image of the workspace, mounted at /workspace (relative paths resolve there). mode=preview (default) writes nothing \
    and returns a receipt: the policy's decision (auto-approved, pending an operator's approval, or denied, with \
    the rule and remedy), every changed path with its states (detail=full adds hunks, detail=compact lists \
    none), stdout and the last expression's value; mode=auto also commits work the policy auto-approves. Each run \
    starts from the workspace as it is on disk: a later run does not see this one's changes until vsh_commit \
    applies them, so to test an edit make it and run the tests in one program (vsh_exec([...], check=True) \
    after the writes: without check it returns a failing status and does not raise; or one bash script with \
    language=command: [\"bash\", \"-c\", \"... && make test\"]). Files: pathlib.Path (read_text, write_text, \
    read_bytes, write_bytes, exists, is_file, is_dir, iterdir, mkdir, unlink, rmdir, rename, stat), open() with \
    r/w/a and their b forms, os.listdir/makedirs/remove/rename. Always there, no import: vsh_read(path, \
    binary=False), vsh_write(path, data, append=False), vsh_list(path), vsh_mkdir(path, parents=True, \
    exist_ok=True), vsh_remove(path, recursive=False, missing_ok=False), vsh_move(source, destination), \
    vsh_copy(source, destination, recursive=False, overwrite=False), vsh_glob(pattern, path, max_results=1000), \
    vsh_search(query, path, case_sensitive=True, max_results=100) -> [{path, line, column, text}], \
    vsh_patch(path, old, new, count=1), vsh_bash(code) -> (exit_code, stdout, stderr), and when the operator \
    started the server with --commands, vsh_exec(argv, timeout=None, env=None, input=None, check=False) -> (exit_code, stdout, stderr) (a real \
    command, confined, on the program's changes so far, input its stdin; language=command runs one as the whole \
    program, code being its argv as a JSON array, or {\"argv\": [...], \"cwd\": \"dir\", \"stdin\": \"text\"} \
    to start it in a directory of the workspace or give it input, each optional). Modules: json, re, math, dataclasses, datetime (no clock), sys, \
    collections, itertools. Not available: os.walk, os.path, Path.glob (use vsh_glob), % formatting, \
    generators, match, class inheritance, subprocess, network. Secrets (.env, *.pem) and vsh's data are \
    invisible; touching one raises PermissionError and denies the run. budget lowers this run's limits \
    (timeout_ms, max_os_calls, max_output_bytes, max_memory_bytes, max_read_bytes, max_write_bytes) below \
    the server's. Long texts in the result are cut, and a note says so. The full guide is in the server's \
    instructions.";

/// How often a run with a progress token reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How long the server waits for the client's `roots/list` answer.
const ROOTS_WAIT: Duration = Duration::from_secs(10);

/// What `vsh_run` takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunParams {
    /// The program: Monty, a Python subset, or a Bash script (see the
    /// server's instructions for what works); for `language` `command`, the
    /// command as a JSON array (`["cargo", "test"]`) or object (`{"argv":
    /// [...], "cwd": "...", "stdin": "..."}`), given as JSON itself or as a
    /// string holding it. An array or object given as JSON is a command
    /// whatever `language` is missing.
    code: ProgramParam,
    /// `monty` (the default), `bash` (the vsh-bash-bounded-v1 profile) or,
    /// when the server runs real commands, `command` (the program is the
    /// command's argv as a JSON array, `["cargo", "test"]`, or
    /// `{"argv": ["patch", "-p1"], "cwd": "crates/app", "stdin": "..."}`,
    /// `cwd` and `stdin` optional).
    language: Option<String>,
    /// `preview` (the default: nothing is written; commit it later with
    /// `vsh_commit`) or `auto` (commit at once if the policy auto-approves).
    mode: Option<String>,
    /// What the program is for, recorded with the transaction.
    intent: Option<String>,
    /// `changes` (the default: every changed path with its states), `full`
    /// (each with its hunks too) or `compact` (counts only).
    detail: Option<String>,
    /// Lower limits for this run than the server's (each at most the server's own).
    budget: Option<BudgetParams>,
    /// A Bash program's or a command's non-zero exit is its outcome, with
    /// what it changed kept for review (a formatter that exits 1 after
    /// fixing, a test that is meant to fail); without it such a run is an
    /// error and nothing of it is kept.
    accept_failure: Option<bool>,
}

/// `vsh_run`'s `code`: a program's text, or a real command given as JSON.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ProgramParam {
    /// Monty or Bash source, or a command's JSON as text.
    Text(String),
    /// A real command's argv (an array of strings), or an object with
    /// `argv` and optional `cwd` and `stdin`.
    Command(serde_json::Value),
}

/// A run's own limits, each at most the server's (which the operator sets
/// with `vsh serve --timeout/--max-os-calls/--max-output/--max-memory`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetParams {
    /// The longest the program may run, in milliseconds.
    timeout_ms: Option<u64>,
    /// The most file-system and `vsh_*` calls it may make.
    max_os_calls: Option<u64>,
    /// The most bytes it may print.
    max_output_bytes: Option<u64>,
    /// The most memory it may use, in bytes.
    max_memory_bytes: Option<u64>,
    /// The most bytes it may read from files.
    max_read_bytes: Option<u64>,
    /// The most bytes it may write.
    max_write_bytes: Option<u64>,
}

/// A transaction, by id or by a unique prefix of at least 6 hex digits.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TransactionParams {
    /// The transaction id, or a unique prefix of at least 6 hex digits.
    transaction: String,
}

/// What `vsh_revert` takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevertParams {
    /// The committed transaction to revert: its id, or a unique prefix of at
    /// least 6 hex digits.
    transaction: String,
    /// `preview` (the default: nothing is written; commit it later with
    /// `vsh_commit`) or `auto` (commit at once if the policy auto-approves).
    mode: Option<String>,
}

/// What `vsh_rerun` takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RerunParams {
    /// The transaction whose program runs again: its id, or a unique prefix
    /// of at least 6 hex digits.
    transaction: String,
    /// `preview` (the default: nothing is written; commit it later with
    /// `vsh_commit`) or `auto` (commit at once if the policy auto-approves).
    mode: Option<String>,
    /// `changes` (the default), `full` or `compact`, as for `vsh_run`.
    detail: Option<String>,
    /// Run it even where another run of the same work is committed or
    /// waiting (which would do that work twice).
    again: Option<bool>,
    /// As `vsh_run`'s: a Bash program's or a command's non-zero exit is its outcome.
    accept_failure: Option<bool>,
}

/// What `vsh_wait` takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitParams {
    /// The transaction waiting for an operator's approval: its id, or a
    /// unique prefix of at least 6 hex digits.
    transaction: String,
    /// The most to wait, in milliseconds (default 300000, at most 1800000).
    timeout_ms: Option<u64>,
}

/// How long `vsh_wait` waits unless told, and at most.
const WAIT_DEFAULT: Duration = Duration::from_mins(5);
const WAIT_MAX: Duration = Duration::from_mins(30);
/// How often `vsh_wait` looks at the transaction's record.
const WAIT_EVERY: Duration = Duration::from_millis(250);
/// Every how many looks `vsh_wait` revalidates the work (about every 5 s).
const WAIT_REVALIDATE_EVERY: u32 = 20;

/// What `vsh_show` takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShowParams {
    /// The transaction id, or a unique prefix of at least 6 hex digits.
    transaction: String,
    /// Review only these changed paths, a directory standing for every
    /// changed path beneath it, each up to 64 MiB (the whole review stops at
    /// 128 KiB a file and 1 MiB in all): for the files a first look lists
    /// without hunks, or a large change a directory at a time.
    paths: Option<Vec<String>>,
    /// `full` (the default: each changed path and its hunks), `changes`
    /// (each changed path with its states, no hunks: a large change's shape
    /// first) or `compact` (the outcome alone).
    detail: Option<String>,
}

/// `vsh_pending` takes nothing.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoParams {}

/// Where the server's workspace comes from.
#[derive(Debug, Clone)]
pub(crate) enum WorkspaceChoice {
    /// `--workspace`.
    Given(PathBuf),
    /// The client's roots if it offers any (see [`choose_root`]), else
    /// `found`: the workspace found from the current directory.
    FromClient {
        /// The workspace found from the current directory (or the directory itself).
        found: PathBuf,
    },
}

/// How `vsh serve` was started.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    /// Where the workspace comes from.
    pub(crate) workspace: WorkspaceChoice,
    /// Each run's budget, and the most a `vsh_run` may ask for.
    pub(crate) budget: ExecutionBudget,
    /// How much text a tool result carries.
    pub(crate) bounds: TextBounds,
    /// With `--commands`: how agents' real commands run.
    pub(crate) commands: Option<crate::CommandSettings>,
    /// The budget of a real command (`vsh_run` in language "command", and a
    /// Monty program when the server runs commands), and the most it may ask
    /// for: a command's defaults
    /// ([`ExecutionBudget::for_commands`]) with the operator's flags.
    pub(crate) command_budget: ExecutionBudget,
    /// How long a call that needs the commit lock (a commit, a rerun's
    /// check that its work is not done already) waits for it (sec91: 60 s,
    /// whatever the operator's `VSH_LOCK_TIMEOUT`).
    pub(crate) lock_wait: vsh::LockWait,
}

/// The server: one runtime on one workspace, opened at the first tool call.
#[derive(Clone)]
pub(crate) struct VshServer {
    options: Arc<ServeOptions>,
    /// The runtime, once a call opened it; opened again when the
    /// workspace's policy was recorded again since (`vsh init --force`).
    runtime: Arc<tokio::sync::Mutex<Option<Arc<Runtime>>>>,
    /// This connection's session: what its agent's programs read and its
    /// work wrote is its own view of the workspace (`unseen-change`).
    session: String,
    /// The work this server's agent discarded itself (`vsh_discard`): a
    /// rejection of its own, which does not stop it running another run of
    /// the same work again, as an operator's rejection does (the store
    /// records no rejecter). At most [`DISCARDS_KEPT`]; past that, or after
    /// a restart, its discards count as an operator's: refused, not allowed.
    discarded: Arc<std::sync::Mutex<std::collections::BTreeSet<vsh::TransactionId>>>,
    tool_router: ToolRouter<Self>,
}

/// The most discards a server remembers as its agent's own.
const DISCARDS_KEPT: usize = 4_096;

/// A tool's result: `document` as structured content, `summary` as text.
fn success(document: &impl serde::Serialize, summary: String) -> CallToolResult {
    let value = serde_json::to_value(document).unwrap_or_default();
    let mut result = CallToolResult::structured(value);
    result.content = vec![ContentBlock::text(summary)];
    result
}

/// The most characters of each stream a tool result's text carries (the
/// structured result has the whole of it, up to `--max-text`): the text
/// often goes straight into a model's context.
const MAX_TEXT_STREAM_CHARS: usize = 16 * 1024;

/// The end of `stream` for a result's text (where a failure's reason is),
/// saying how much was left out.
fn text_tail(stream: &str) -> std::borrow::Cow<'_, str> {
    let total = stream.chars().count();
    if total <= MAX_TEXT_STREAM_CHARS {
        return std::borrow::Cow::Borrowed(stream);
    }
    let cut = stream.char_indices().nth(total - MAX_TEXT_STREAM_CHARS).map_or(stream.len(), |(at, _)| at);
    // From the start of a line: the text never begins mid-line.
    let start = stream[cut..].find('\n').map_or(cut, |newline| cut + newline + 1);
    let skipped = stream[..start].chars().count();
    std::borrow::Cow::Owned(format!(
        "[... {skipped} characters before these are left out of this text; the structured result has the \
         stream (cut to the server's --max-text, head and tail, when longer) ...]\n{}",
        &stream[start..]
    ))
}

/// A program's text as a result's text carries it: line by line, each
/// control character (an escape sequence, a carriage return) and each
/// character that reorders text written as an escape, as the command
/// line shows it; the structured result keeps the bytes.
fn readable(text: &str) -> String {
    text.split('\n').map(|line| crate::render::shown(line, true)).collect::<Vec<_>>().join("\n")
}

/// A tool's failure, as `isError` with a `vsh.error/1` document.
fn failure(document: &ErrorDocument) -> CallToolResult {
    let mut summary = format!("error ({:?}): {}", document.kind, document.message);
    // A stale commit: what changed at each path, as the command line says it.
    for (path, change) in document.paths.iter().zip(&document.path_changes) {
        let _ = write!(summary, "\nchanged: {}  {change}", crate::render::shown(path, false));
    }
    for denial in &document.denied {
        let _ = write!(summary, "\ndenied: {} {} ({}: {})", denial.access, denial.path, denial.rule, denial.label);
        if let Some(remedy) = &denial.remedy {
            let _ = write!(summary, "; {remedy}");
        }
    }
    // What a failed command or Bash program printed: the reason it failed
    // is there (a test's assertion, a compiler's error), and many hosts
    // give the model the text alone.
    if let Some(status) = document.status {
        let _ = write!(summary, "\nexit status: {status}");
    }
    if let Some(stdout) = document.stdout.as_deref().filter(|stdout| !stdout.is_empty()) {
        let _ = write!(summary, "\nstdout:\n{}", readable(&text_tail(stdout)));
    }
    if let Some(stderr) = document.stderr.as_deref().filter(|stderr| !stderr.is_empty()) {
        let _ = write!(summary, "\nstderr:\n{}", readable(&text_tail(stderr)));
    }
    // What the failed program had changed: nothing of it is kept, unless a
    // Bash program or a command (it has an exit status) runs again with
    // accept_failure; a Monty program that raised keeps nothing (ux65 F6).
    if !document.changes.is_empty() {
        let why = if document.status.is_some() {
            "not kept; accept_failure=true keeps a failing run's work"
        } else {
            "not kept: a Monty program that fails (an exception it does not catch, or a budget it runs out of) \
             keeps nothing; fix it and run it again"
        };
        let _ = write!(summary, "\nit had changed ({why}):");
        for change in document.changes.iter().take(50) {
            let _ = write!(summary, "\n  {:<6} {}", change.kind, crate::render::shown(&change.path, false));
        }
        if document.changes.len() > 50 {
            let _ = write!(summary, "\n  ... and {} more", document.changes.len() - 50);
        }
    }
    for warning in &document.warnings {
        let _ = write!(summary, "\nnote: {}", readable(warning));
    }
    if let Some(hint) = &document.hint {
        let _ = write!(summary, "\nnext: {hint}");
    }
    let value = serde_json::to_value(document).unwrap_or_default();
    let mut result = CallToolResult::structured_error(value);
    result.content = vec![ContentBlock::text(summary)];
    result
}

/// What an agent can do with work made under another policy than the
/// server's: work its operator made under a policy given to that run alone
/// is the operator's to decide (sec58 4: an agent was told it could never be
/// committed, and discarded it); work made under a policy since replaced it
/// runs again with `vsh_rerun`.
fn policy_replaced_advice(runtime: &Runtime, id: vsh::TransactionId) -> String {
    if operators_own(runtime, id) {
        return format!(
            "it was made under a policy its operator gave that run, not this workspace's: only the operator \
             reviews, approves and commits it, on the command line (vsh show {0}); leave it to them",
            id.short()
        );
    }
    format!(
        "the workspace's policy changed since it was made: it can never be approved or committed; run its \
         program again with vsh_rerun {0}, and vsh_discard {0} drops this one",
        id.short()
    )
}

/// Whether `id` is work its operator made under a policy given to that run
/// alone (`vsh run --profile`, `--policy`): the operator's to decide.
fn operators_own(runtime: &Runtime, id: vsh::TransactionId) -> bool {
    runtime.run_policy(id).ok().flatten().is_some_and(|policy| policy.digest != runtime.policy().digest())
}

/// A request the server refuses before vsh acts on it.
fn refused(message: impl Into<String>) -> CallToolResult {
    let error = std::io::Error::new(std::io::ErrorKind::InvalidInput, message.into());
    failure(&ErrorDocument::other(ErrorKind::Request, &error))
}

/// A receipt's document bounded for the reader, and its summary in a few
/// lines: state, decision, paths, output, value, id, what was cut.
fn bounded_receipt(receipt: &vsh::Receipt, bounds: TextBounds) -> (ReceiptDocument, String) {
    let mut document = ReceiptDocument::from(receipt);
    document.bound(bounds);
    document.next = agent_next(receipt);
    let summary = receipt_summary(receipt, &document, None);
    (document, summary)
}

/// What takes `receipt`'s work on from here, for the structured result's
/// `next` (ux60 3: always `null`), always one of the agent's own tools with
/// the transaction (ux65 F7): `vsh_commit` of work it may commit, `vsh_wait`
/// for the operator's approval of work waiting for one (`vsh_discard` where
/// approving would drop a change it never saw), `vsh_rerun` of work gone
/// stale or expired (`vsh_revert` of a revert's original); `None` when
/// nothing does (committed, denied, rejected, or nothing changed).
fn agent_next(receipt: &vsh::Receipt) -> Option<String> {
    let short = receipt.transaction.short();
    match receipt.state {
        TransactionState::AutoApproved
            if receipt.changed_paths > 0 || receipt.warnings.contains(&vsh::Warning::Withheld) =>
        {
            Some(format!("vsh_commit {short}"))
        }
        TransactionState::Approved => Some(format!("vsh_commit {short}")),
        // Its approval would drop a change the agent never saw: discard
        // it and write again from what it reads (ux70 F6).
        TransactionState::PendingApproval
            if matches!(&receipt.decision, vsh::RuntimeDecision::PendingApproval(manifest)
                if manifest.flags.contains(&vsh::RiskFlag::UnseenChange)) =>
        {
            Some(format!("vsh_discard {short}"))
        }
        // The agent's own step: wait for the operator's `vsh approve` (ux65
        // F7: `next` named a command only the operator runs).
        TransactionState::PendingApproval => Some(format!("vsh_wait {short}")),
        // Work that can never commit as it is: its program, run again (ux63
        // 5); a revert has none, it is reverted again (sec73 F2).
        TransactionState::Stale | TransactionState::Expired => {
            Some(crate::render::reverted_by(receipt).map_or_else(
                || format!("vsh_rerun {short}"),
                |of| format!("vsh_revert {}", of.get(..12).unwrap_or(of)),
            ))
        }
        _ => None,
    }
}

/// A commit's receipt bounded for the reader, and its summary without
/// the run's output (the agent read it when it ran; the structured result
/// still holds it): a commit's text is what the commit did.
fn committed_receipt(receipt: &vsh::Receipt, bounds: TextBounds) -> (ReceiptDocument, String) {
    let mut document = ReceiptDocument::from(receipt);
    document.bound(bounds);
    let mut quiet = document.clone();
    let had_output = !(quiet.stdout.is_empty() && quiet.stderr.is_empty());
    quiet.stdout.clear();
    quiet.stderr.clear();
    let mut summary = receipt_summary(receipt, &quiet, None);
    if had_output {
        let _ = write!(
            summary,
            "\n(the run's output is in the structured result, and vsh_show {} gives it)",
            receipt.transaction.short()
        );
    }
    // How to undo it, as the command line's receipt says (ux71 L7).
    if receipt.changed_paths > 0 {
        let _ = write!(summary, "\nto undo it: vsh_revert {}", receipt.transaction.short());
    }
    (document, summary)
}

/// What `receipt`'s decision and state leave to do, for
/// [`receipt_summary`]'s text.
fn decision_text(text: &mut String, receipt: &vsh::Receipt) {
    match &receipt.decision {
        // Work that can never commit as it is says what to do (ux64 nit,
        // ux65 F8: its review said only its state).
        _ if matches!(receipt.state, TransactionState::Stale | TransactionState::Expired) => {
            let why = if receipt.state == TransactionState::Stale {
                "the workspace changed under what it read or changed since it was made"
            } else {
                "its approval or preview lapsed"
            };
            let again = match crate::render::reverted_by(receipt) {
                // A revert has no program: it is made again (ux73 H2).
                Some(of) => format!("revert it again with vsh_revert {}", of.get(..12).unwrap_or(of)),
                None => format!("run its program again with vsh_rerun {}", receipt.transaction.short()),
            };
            let _ = write!(
                text,
                "
it can never be committed ({why}): {again}, a new transaction on the workspace as it is now"
            );
        }
        vsh::RuntimeDecision::Denied(manifest) => {
            let _ = write!(text, "\ndenied ({}): {}", manifest.reason.name(), manifest.remedy);
            // Each refused access, as a failed run's text names them.
            for denial in &manifest.denied {
                let _ = write!(text, "\ndenied: {} {} ({}: {})", denial.access, denial.path, denial.rule, denial.label);
            }
        }
        vsh::RuntimeDecision::PendingApproval(_) if receipt.state == TransactionState::Approved => {
            let _ = write!(text, "\napproved by an operator: vsh_commit {} applies it", receipt.transaction.short());
        }
        vsh::RuntimeDecision::PendingApproval(manifest) if receipt.state == TransactionState::PendingApproval => {
            let flags: Vec<&str> = manifest.flags.iter().map(|flag| flag.name()).collect();
            let short = receipt.transaction.short();
            let _ = write!(
                text,
                "\nawaiting an operator's approval (risk: {}); they run `vsh approve {short}`, and vsh_wait {short} \
                 waits for it",
                flags.join(", ")
            );
            if manifest.flags.contains(&vsh::RiskFlag::UnseenChange) {
                let _ = write!(
                    text,
                    "\napproving it may drop a change this connection never saw (unseen-change above): vsh_discard \
                     {short}, then vsh_run a program that reads each file and writes from what it read (or runs \
                     the command after reading them)"
                );
            }
        }
        vsh::RuntimeDecision::AutoApproved
            if receipt.state == TransactionState::AutoApproved
                && receipt.changed_paths == 0
                && !receipt.warnings.contains(&vsh::Warning::Withheld) =>
        {
            text.push_str("\nit changes nothing: there is nothing to commit (and nothing is kept of it)");
        }
        vsh::RuntimeDecision::AutoApproved if receipt.state == TransactionState::AutoApproved => {
            let _ = write!(text, "\nauto-approved: vsh_commit {} applies it", receipt.transaction.short());
        }
        vsh::RuntimeDecision::AutoApproved | vsh::RuntimeDecision::PendingApproval(_) => {}
    }
}

/// [`bounded_receipt`]'s summary; `replaced`: the work was made under a
/// policy the workspace has since replaced, so it is never approved nor
/// committed, and the agent is told what it can do instead.
fn receipt_summary(receipt: &vsh::Receipt, document: &ReceiptDocument, replaced: Option<&str>) -> String {
    let mut text = format!(
        "transaction {} is {}; {} changed path{}",
        receipt.transaction.short(),
        receipt.state.name(),
        receipt.changed_paths,
        if receipt.changed_paths == 1 { "" } else { "s" }
    );
    if let Some(advice) = replaced {
        let _ = write!(text, "\n{advice}");
    }
    if replaced.is_none() {
        decision_text(&mut text, receipt);
    }
    // The changes as the reader asked for them: each path with its states
    // (as many as the document lists), then, at the end, the hunks.
    let listed = document.changes.len();
    if listed > 0 {
        text.push_str("\nchanges:");
        for entry in receipt.changes.iter().take(listed) {
            let _ = write!(
                text,
                "\n  {:<6} {}  [{} -> {}]",
                entry.kind.name(),
                crate::render::shown(entry.path.as_str(), false),
                crate::render::state_text(entry.before.as_ref()),
                crate::render::state_text(entry.after.as_ref())
            );
        }
        if receipt.changes.len() > listed {
            let _ = write!(
                text,
                "\n  ... and {} more paths: vsh_show {} with paths=[\"a/dir\"] lists those under a directory",
                receipt.changes.len() - listed,
                receipt.transaction.short()
            );
        }
    } else if receipt.changed_paths > 0 {
        // Named as a call every tool's reader can make (ux75 L2: `vsh_wait`
        // said to pass `detail`, which it does not take).
        let _ = write!(
            text,
            "\n(vsh_show {} with detail \"changes\" names each changed path; \"full\" adds its hunks)",
            receipt.transaction.short()
        );
    }
    if let Some(code) = document.exit_code {
        let _ = write!(text, "\nexit status: {code}");
    }
    if !document.stdout.is_empty() {
        let _ = write!(text, "\nstdout:\n{}", readable(&text_tail(&document.stdout)));
    }
    if !document.stderr.is_empty() {
        let _ = write!(text, "\nstderr:\n{}", readable(&text_tail(&document.stderr)));
    }
    if !document.value.is_null() {
        let _ = write!(text, "\nvalue: {}", document.value);
    }
    if let Some(exception) = &document.exception {
        let _ = write!(text, "\nraised:\n{}", readable(&text_tail(exception)));
    }
    for warning in &document.warnings {
        let _ = write!(text, "\nnote: {}", readable(warning));
    }
    for review in &document.review {
        if let Some(hunks) = &review.hunks {
            text.push('\n');
            text.push_str(hunks);
        }
    }
    text
}

/// `requested` within the server's `ceiling`: the run's own limits, or why not.
fn budget_within(ceiling: &ExecutionBudget, requested: Option<&BudgetParams>) -> Result<ExecutionBudget, String> {
    let mut budget = ceiling.clone();
    let Some(requested) = requested else { return Ok(budget) };
    let check = |name: &str, asked: Option<u64>, most: u64, flag: Option<&str>| -> Result<Option<u64>, String> {
        match asked {
            None => Ok(None),
            Some(0) => Err(format!("budget.{name} must be positive")),
            Some(asked) if asked > most => Err(match flag {
                Some(flag) => format!(
                    "budget.{name} {asked} is above this server's {most}; the operator raises it with `vsh serve \
                     {flag}`"
                ),
                None => {
                    format!("budget.{name} {asked} is above {most}, the most any run here may have (no flag raises it)")
                }
            }),
            Some(asked) => Ok(Some(asked)),
        }
    };
    let most_ms = u64::try_from(ceiling.max_duration.as_millis()).unwrap_or(u64::MAX);
    if let Some(ms) = check("timeout_ms", requested.timeout_ms, most_ms, Some("--timeout"))? {
        budget.max_duration = Duration::from_millis(ms);
    }
    if let Some(calls) = check("max_os_calls", requested.max_os_calls, ceiling.max_os_calls, Some("--max-os-calls"))? {
        budget.max_os_calls = calls;
    }
    if let Some(bytes) =
        check("max_output_bytes", requested.max_output_bytes, ceiling.max_output_bytes, Some("--max-output"))?
    {
        budget.max_output_bytes = bytes;
    }
    if let Some(bytes) =
        check("max_memory_bytes", requested.max_memory_bytes, ceiling.max_memory_bytes, Some("--max-memory"))?
    {
        budget.max_memory_bytes = bytes;
    }
    if let Some(bytes) = check("max_read_bytes", requested.max_read_bytes, ceiling.max_read_bytes, None)? {
        budget.max_read_bytes = bytes;
    }
    if let Some(bytes) = check("max_write_bytes", requested.max_write_bytes, ceiling.max_write_bytes, None)? {
        budget.max_write_bytes = bytes;
    }
    Ok(budget)
}

/// The directory a `file://` URI names (`None` for any other URI).
fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(rest).decode_utf8().ok()?;
    Some(PathBuf::from(decoded.as_ref()))
}

/// Refuse a root the client chose (`chosen`) that is not yet a workspace of
/// this user, unless the operator started the server in it (`found` is it,
/// or the current directory `cwd` lies within it): opening it would make a
/// workspace there, and an agent's client must not make vsh write in a
/// directory the operator never named (`/etc`, `~/.ssh`: sec51 F3).
pub(crate) fn made_here_or_already(chosen: &Path, found: &Path, cwd: Option<&Path>) -> Result<(), String> {
    let chosen_canonical = chosen.canonicalize().unwrap_or_else(|_| chosen.to_path_buf());
    let operators = found.canonicalize().is_ok_and(|found| found == chosen_canonical)
        || cwd.and_then(|cwd| cwd.canonicalize().ok()).is_some_and(|cwd| cwd.starts_with(&chosen_canonical));
    if operators || crate::args::is_own_workspace(&chosen_canonical) {
        return Ok(());
    }
    Err(format!(
        "the client offers {} as the workspace, and it is no vsh workspace yet: vsh serve makes none where a \
         client says, only where its operator does; run `vsh init --workspace {}` first, or start vsh serve there \
         (or with --workspace DIR)",
        chosen.display(),
        chosen.display()
    ))
}

/// The workspace among the directories the client offers as roots: the one
/// found from the current directory if it lies within a root, else the only
/// root, else the root holding the current directory. Never a directory
/// outside every root; several roots and no way to choose is an error that
/// names `--workspace`. No usable root leaves `found`.
pub(crate) fn choose_root(roots: &[PathBuf], found: &Path, cwd: Option<&Path>) -> Result<PathBuf, String> {
    let roots: Vec<PathBuf> = roots.iter().filter_map(|root| root.canonicalize().ok()).filter(|r| r.is_dir()).collect();
    if roots.is_empty() {
        return Ok(found.to_path_buf());
    }
    let found_canonical = found.canonicalize().ok();
    if let Some(found) = &found_canonical
        && roots.iter().any(|root| found.starts_with(root))
    {
        return Ok(found.clone());
    }
    if let [only] = roots.as_slice() {
        return Ok(only.clone());
    }
    let cwd = cwd.and_then(|cwd| cwd.canonicalize().ok());
    if let Some(cwd) = &cwd
        && let Some(root) = roots.iter().filter(|root| cwd.starts_with(root)).max_by_key(|root| root.as_os_str().len())
    {
        return Ok(root.clone());
    }
    let listed: Vec<String> = roots.iter().map(|root| root.display().to_string()).collect();
    Err(format!(
        "the client offers {} roots ({}) and none holds the current directory; start vsh serve with \
         --workspace DIR to choose one",
        roots.len(),
        listed.join(", ")
    ))
}

/// What a progress report is of: a run, or a wait for an operator.
#[derive(Debug, Clone, Copy)]
enum Progress {
    /// A run; with the program's own (guest) time limit when it is not the
    /// run's (a Monty program that may run commands, on `--commands`).
    Run(Option<Duration>),
    Wait,
}

/// Report a run's (or a wait's) progress every [`PROGRESS_EVERY`] until aborted.
fn report_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    deadline: Duration,
    of: Progress,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            ticks.tick().await;
            let elapsed = started.elapsed().as_secs_f64();
            // In tenths under ten seconds (ux85: a 1,500 ms wait "gives up
            // after 2 s"); a wait is not a run (ux82 L4: "running for 1 s").
            let (took, limit) = (waited_for(started.elapsed().as_millis()), waited_for(deadline.as_millis()));
            let message = match of {
                Progress::Run(None) => format!("running for {took} (its time limit is {limit})"),
                // ux86 L1: "its time limit is 600 s" of a program stopped at 1 s.
                Progress::Run(Some(own)) => format!(
                    "running for {took} (the program's own time limit is {}, its commands' time not counted; \
                     each command it runs has {limit})",
                    waited_for(own.as_millis())
                ),
                Progress::Wait => format!("waiting for an operator for {took} (gives up after {limit})"),
            };
            let param = ProgressNotificationParam::new(token.clone(), elapsed)
                .with_total(deadline.as_secs_f64())
                .with_message(message);
            if peer.notify_progress(param).await.is_err() {
                return;
            }
        }
    })
}

/// Cancel `cancel` when the client cancels the request.
fn follow_cancellation(
    context: &RequestContext<RoleServer>,
    cancel: &ExecutionCancellation,
) -> tokio::task::JoinHandle<()> {
    let (token, cancel) = (context.ct.clone(), cancel.clone());
    tokio::spawn(async move {
        token.cancelled().await;
        cancel.cancel();
    })
}

impl VshServer {
    /// The server `options` describe.
    pub(crate) fn new(options: ServeOptions) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Self {
            options: Arc::new(options),
            runtime: Arc::new(tokio::sync::Mutex::new(None)),
            // `VSH_SESSION` in the server's environment keeps one view across
            // restarts of the client (ux70 F1); else one of its own.
            session: std::env::var("VSH_SESSION")
                .ok()
                .filter(|session| !session.is_empty())
                .unwrap_or_else(|| format!("serve-{}-{nanos:x}", std::process::id())),
            discarded: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// The server's runtime, opened at the first call that needs it, and
    /// again at a call after a storage failure stopped it, or after the
    /// operator recorded the workspace's policy
    /// again (`vsh init --force`): every call works under the policy
    /// recorded now, as every vsh command does (what the old runtime held
    /// in memory, previews made under the replaced policy, is dropped with
    /// it). A failure to open is the call's error, and the next call tries
    /// again.
    async fn runtime(&self, peer: &Peer<RoleServer>) -> Result<Arc<Runtime>, CallToolResult> {
        let mut held = self.runtime.lock().await;
        if let Some(runtime) = held.as_ref() {
            match runtime.check_policy_current() {
                Err(VshError::WorkspacePolicyReplaced) => *held = None,
                // A storage failure stopped it (a full disk, a read-only
                // data directory): the next call gets a runtime that reads
                // the disk afresh, not the stopped one's error forever.
                _ if runtime.is_stopped() => *held = None,
                _ => return Ok(Arc::clone(runtime)),
            }
        }
        let workspace = self.workspace(peer).await.map_err(refused)?;
        let commands = self.options.commands.clone();
        let session = self.session.clone();
        let lock_wait = self.options.lock_wait.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let mut config = crate::runtime_config(&workspace)
                .map_err(|error| failure(&ErrorDocument::other(ErrorKind::Configuration, error.as_ref())))?
                .with_session(session)
                .with_lock_wait(lock_wait);
            if let Some(commands) = &commands {
                config = commands.apply(config).with_commands();
            }
            crate::open(config).map_err(|error| {
                failure(&match error.downcast_ref::<VshError>() {
                    Some(error) => ErrorDocument::new(error, &[]),
                    None => ErrorDocument::other(ErrorKind::Configuration, error.as_ref()),
                })
            })
        })
        .await
        .map_err(|error| failure(&ErrorDocument::other(ErrorKind::Other, &error)))??;
        let opened = Arc::new(opened);
        *held = Some(Arc::clone(&opened));
        Ok(opened)
    }

    /// The workspace directory for this server's runtime.
    #[expect(
        deprecated,
        reason = "roots are deprecated by SEP-2577, but the clients agents use today still offer them, and they \
                  are how a client says which directory the server may work in"
    )]
    async fn workspace(&self, peer: &Peer<RoleServer>) -> Result<PathBuf, String> {
        let found = match &self.options.workspace {
            WorkspaceChoice::Given(dir) => return Ok(dir.clone()),
            WorkspaceChoice::FromClient { found } => found,
        };
        let offers_roots = peer.peer_info().is_some_and(|info| info.capabilities.roots.is_some());
        if !offers_roots {
            return Ok(found.clone());
        }
        let listed = match tokio::time::timeout(ROOTS_WAIT, peer.list_roots()).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(error)) => return Err(format!("the client's roots/list failed: {error}")),
            Err(_) => return Err(format!("the client did not answer roots/list within {} s", ROOTS_WAIT.as_secs())),
        };
        let roots: Vec<PathBuf> = listed.roots.iter().filter_map(|root| file_uri_path(&root.uri)).collect();
        let cwd = std::env::current_dir().ok();
        let chosen = choose_root(&roots, found, cwd.as_deref())?;
        made_here_or_already(&chosen, found, cwd.as_deref())?;
        say!("vsh serve: workspace {}", chosen.display());
        Ok(chosen)
    }

    /// Run `work` with the runtime on the blocking pool.
    async fn blocking(
        &self,
        peer: &Peer<RoleServer>,
        work: impl FnOnce(&Runtime) -> CallToolResult + Send + 'static,
    ) -> CallToolResult {
        let runtime = match self.runtime(peer).await {
            Ok(runtime) => runtime,
            Err(result) => return result,
        };
        match tokio::task::spawn_blocking(move || work(&runtime)).await {
            Ok(result) => result,
            Err(error) => failure(&ErrorDocument::other(ErrorKind::Other, &error)),
        }
    }

    /// Run a program (`work`: `vsh_run`'s, `vsh_rerun`'s) on the blocking
    /// pool, cancelled by the client's `notifications/cancelled` and
    /// reporting progress until `deadline` when the request carries a
    /// token (`own_time`: the program's own time limit, when it is not
    /// `deadline`); a cancelled run's result says it was stopped.
    async fn cancellable_run(
        &self,
        context: &RequestContext<RoleServer>,
        tool: &'static str,
        (deadline, own_time): (Duration, Option<Duration>),
        work: impl FnOnce(&Runtime, &ExecutionCancellation) -> CallToolResult + Send + 'static,
    ) -> CallToolResult {
        let cancel = ExecutionCancellation::new();
        let watcher = follow_cancellation(context, &cancel);
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| report_progress(context.peer.clone(), token, deadline, Progress::Run(own_time)));
        let run_cancel = cancel.clone();
        let result = self.blocking(&context.peer, move |runtime| work(runtime, &run_cancel)).await;
        watcher.abort();
        if let Some(progress) = progress {
            progress.abort();
        }
        if cancel.is_cancelled() {
            return cancelled(context, tool, "the run was stopped and nothing was stored");
        }
        result
    }
}

/// What a run's result is told with: the server's bounds, whether it runs
/// real commands, and the budget the server allows a run and this one was given.
struct RunReport {
    bounds: TextBounds,
    runs_commands: bool,
    allowed: ExecutionBudget,
    given: ExecutionBudget,
    /// When the run began (milliseconds since the epoch): a stale commit's
    /// record is looked for among those made since.
    since_ms: u64,
}

/// When the agent's own budget, lower than the server's, is what ended a
/// run (`kind`): the advice to raise it, naming `budget`'s parameter (ux53
/// for the time; ux74 M2: memory and output were sent to the operator).
fn own_limit_advice(
    kind: vsh::lower::vsh_monty::LimitKind,
    given: &ExecutionBudget,
    allowed: &ExecutionBudget,
) -> Option<String> {
    use vsh::lower::vsh_monty::LimitKind as K;
    let bytes = |given: u64, allowed: u64, name: &str| {
        (given < allowed).then(|| {
            format!("the budget this call gave ({given} bytes) ended it; this server allows up to {allowed}: raise budget.{name}")
        })
    };
    match kind {
        K::Duration if given.max_duration < allowed.max_duration => Some(format!(
            "the budget this call gave ({:.1} s) ended it; this server allows up to {:.1} s: raise budget.timeout_ms",
            given.max_duration.as_secs_f64(),
            allowed.max_duration.as_secs_f64()
        )),
        K::Memory => bytes(given.max_memory_bytes, allowed.max_memory_bytes, "max_memory_bytes"),
        K::OutputBytes => bytes(given.max_output_bytes, allowed.max_output_bytes, "max_output_bytes"),
        K::ReadBytes => bytes(given.max_read_bytes, allowed.max_read_bytes, "max_read_bytes"),
        K::WriteBytes => bytes(given.max_write_bytes, allowed.max_write_bytes, "max_write_bytes"),
        K::OsCalls if given.max_os_calls < allowed.max_os_calls => Some(format!(
            "the budget this call gave ({} calls) ended it; this server allows up to {}: raise budget.max_os_calls",
            given.max_os_calls, allowed.max_os_calls
        )),
        _ => None,
    }
}

/// A run's (`vsh_run`, `vsh_rerun`) tool result: its bounded receipt, or
/// its failure with the advice an agent can act on.
fn ran_result(
    runtime: &Runtime,
    request: &RunRequest<'_>,
    ran: Result<vsh::Receipt, VshError>,
    report: RunReport,
) -> CallToolResult {
    let RunReport { bounds, runs_commands, allowed, given, since_ms } = report;
    let error = match ran {
        Ok(receipt) => {
            let (document, summary) = bounded_receipt(&receipt, bounds);
            return success(&document, summary);
        }
        Err(error) => error,
    };
    let mut document = ErrorDocument::new(&error, &runtime.remedies(&error));
    // What the command line advises, for the agent to pass on
    // to its operator (a tool directory, a longer timeout);
    // a time the agent's own budget set is the agent's to raise.
    let mut advice = crate::failure::advice_for(&error);
    advice.extend(crate::failure::shown_advice(&error, runtime.policy().calls()));
    // The agent keeps a failing run's changes itself (ux61 5:
    // it was sent to the operator for a flag serve has not).
    let acceptable = crate::failure::failure_keeps_changes(&error);
    advice.retain(|line| line != crate::failure::ACCEPT_FAILURE_ADVICE);
    let own_limit = error.exceeded_limit().and_then(|kind| own_limit_advice(kind, &given, &allowed));
    let stale = matches!(error, VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))
        .then(|| crate::failure::stale_record(runtime, request, since_ms))
        .flatten();
    if let Some((done, call)) = stale.and_then(|stale| work_done_advice(runtime, stale)) {
        // What it would change is there already (ux81 M1).
        document.hint = Some(format!("the workspace changed under its commit: {done}"));
        document.next = call;
    } else if let Some(stale) = stale {
        // Its auto commit found the workspace changed (ux75 M1: no record,
        // no next step was named).
        let call = format!("vsh_rerun {}", stale.short());
        document.hint = Some(format!(
            "the workspace changed under its commit: its record, {}, is stale; {call} runs the program again on \
             the workspace as it is now",
            stale.short()
        ));
        document.next = Some(call);
    } else if let Some(instead) = crate::failure::monty_instead(&error) {
        // The agent's own program: the agent can fix it.
        document.hint = Some(format!(
            "this Monty has no {instead}; this server's instructions list what else to use \
                     instead"
        ));
    } else if acceptable && advice.is_empty() {
        document.hint = Some(
            "pass \"accept_failure\": true to keep a failing run's changes as its outcome, \
                     for review"
                .to_owned(),
        );
    } else if runs_commands && advice.iter().any(|line| line.contains(crate::failure::BOUNDED_BASH)) {
        // The agent may run real bash here itself (ux68 M5:
        // it was sent to the operator).
        document.hint = Some(
            "this server runs real commands: vsh_run with \"language\": \"command\" and \
                     \"code\": [\"bash\", \"-c\", SCRIPT] runs the script in real bash, confined in a \
                     candidate of the workspace"
                .to_owned(),
        );
    } else if let Some(own) = own_limit {
        document.hint = Some(own);
    } else if document.hint.is_none() && !advice.is_empty() {
        document.hint =
            Some(format!("for the operator, who starts vsh serve: {}", advice.join("; ").replace("\nvsh:   ", "; ")));
    }
    document.bound(bounds);
    failure(&document)
}

/// A cancelled request's result (the client no longer waits for it), logged
/// on stderr for the operator.
fn cancelled(context: &RequestContext<RoleServer>, tool: &str, what: &str) -> CallToolResult {
    say!("vsh serve: request {} ({tool}) was cancelled by the client; {what}", context.id);
    failure(&ErrorDocument::new(&VshError::Cancelled, &[]))
}

#[tool_router]
impl VshServer {
    /// Run a program against a virtual image of the workspace.
    #[tool(
        description = RUN_DESCRIPTION,
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn vsh_run(
        &self,
        Parameters(params): Parameters<RunParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (mode, detail) = match run_and_detail(params.mode.as_deref(), params.detail.as_deref()) {
            Ok(chosen) => chosen,
            Err(refusal) => return refusal,
        };
        let (code, given_as_json) = match &params.code {
            ProgramParam::Text(text) => (text.clone(), false),
            ProgramParam::Command(value @ (serde_json::Value::Array(_) | serde_json::Value::Object(_))) => {
                (value.to_string(), true)
            }
            ProgramParam::Command(other) => {
                return refused(format!(
                    "code is {other}: give a program as a string, or for language \"command\" the argv as an array"
                ));
            }
        };
        let language = match params.language.as_deref() {
            Some("monty" | "bash") if given_as_json => {
                return refused(
                    "code given as a JSON array or object is a real command: give language \"command\" (or none)"
                        .to_owned(),
                );
            }
            None if given_as_json && self.options.commands.is_some() => vsh::Language::Command,
            None if given_as_json => {
                return refused(
                    "code given as a JSON array or object is a real command, and this server runs no real commands \
                     (its operator starts it with --commands)"
                        .to_owned(),
                );
            }
            // A string that holds a command's argv as JSON would only build
            // a list as Python and change nothing (ux54 #7): say how it runs.
            None if looks_like_argv(&code) => {
                return refused(
                    "code is a string holding a JSON array of strings (or an object with \"argv\"): as a Monty \
                     program that only builds a value and changes nothing. To run it as a real command, give code \
                     as the array itself, or language \"command\""
                        .to_owned(),
                );
            }
            None | Some("monty") => vsh::Language::Monty,
            Some("bash") => vsh::Language::Bash,
            Some("command") if self.options.commands.is_some() => vsh::Language::Command,
            Some("command") => {
                return refused(
                    "language \"command\": this server runs no real commands (its operator starts it with --commands)"
                        .to_owned(),
                );
            }
            Some(other) => return refused(format!("language {other:?}: give monty, bash or command")),
        };
        // A real command gets a command's budget, as `vsh exec` does; a
        // Monty program that may run commands (`vsh_exec`, on a server
        // started with --commands) too, but for its own time, which stays a
        // program's (ux85 M1: a loop with no vsh_exec ran for 600 s).
        let ceiling = run_ceiling(language, &self.options);
        let ceiling = &ceiling;
        let budget = match budget_within(ceiling, params.budget.as_ref()) {
            Ok(budget) => budget,
            Err(message) => return refused(message),
        };
        let bounds = self.options.bounds;
        let runs_commands = self.options.commands.is_some();
        // What the server would have given: the agent's own budget may be what ended the run.
        let (allowed, given) = (ceiling.clone(), budget.clone());
        let deadline = budget.max_duration.max(budget.command_duration());
        let own_time = (budget.max_duration != deadline).then_some(budget.max_duration);
        self.cancellable_run(&context, "vsh_run", (deadline, own_time), move |runtime, run_cancel| {
            let mut request = RunRequest::new(&code).with_mode(mode).with_detail(detail).with_language(language);
            request = request.with_budget(budget);
            if let Some(intent) = &params.intent {
                request = request.with_intent(intent);
            }
            if params.accept_failure == Some(true) {
                request = request.with_failure_accepted();
            }
            let since_ms = crate::now_ms();
            let ran = runtime.run_cancellable(&request, run_cancel);
            ran_result(runtime, &request, ran, RunReport { bounds, runs_commands, allowed, given, since_ms })
        })
        .await
    }

    /// A stored transaction's review.
    #[tool(
        description = "Show a transaction's review: its receipt with every changed path's text hunks, \
        its state history, and its program. The transaction is its id or a unique prefix of 6+ hex digits; \
        paths narrows it (a directory: what is beneath it), detail=changes lists the paths without hunks.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn vsh_show(
        &self,
        Parameters(params): Parameters<ShowParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let bounds = self.options.bounds;
        if let Some(other) =
            params.detail.as_deref().filter(|detail| !matches!(*detail, "full" | "changes" | "compact"))
        {
            return refused(format!("detail {other:?}: give full, changes or compact"));
        }
        self.blocking(&context.peer, move |runtime| match show(runtime, &params, bounds) {
            Ok((document, summary)) => success(&document, summary),
            Err(error) => transaction_failure(&error),
        })
        .await
    }

    /// Work waiting for a decision or a commit.
    #[tool(
        description = "List the transactions waiting for an operator's approval or for a commit.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn vsh_pending(
        &self,
        Parameters(_): Parameters<NoParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        self.blocking(&context.peer, move |runtime| match runtime.pending_and_stale() {
            Ok((mut records, stale)) => {
                // Newest first: an agent looks for the run it just made.
                records.sort_by_key(|record| std::cmp::Reverse(record.created_ms));
                let now = crate::now_ms();
                let mut lines = Vec::with_capacity(records.len());
                let rows: Vec<_> = records
                    .iter()
                    .map(|record| {
                        let receipt = runtime.listed_receipt(record.id).ok().flatten();
                        let stored = runtime.stored_program(record.id).ok().flatten();
                        let replaced = runtime.decided_under_another_policy(record.id);
                        let document = vsh::document::TransactionDocument::new(
                            record,
                            receipt.as_ref(),
                            stored.as_ref().map_or("", |stored| stored.intent.as_str()),
                        )
                        .with_program(stored.as_ref())
                        .with_policy_changed(replaced);
                        // As `vsh pending` shows it: the intent, else the command line that ran.
                        let mut row = crate::render::PendingRow::new(*record, receipt, stored.as_ref());
                        // A rerun names the work it ran again, as `vsh pending` does (ux74 L2).
                        let origin = runtime.rerun_origin(record.id).ok().filter(|origin| *origin != record.id);
                        if let Some(origin) = origin {
                            let _ = write!(row.label, " (rerun of {})", origin.short());
                        }
                        let mut document = document;
                        document.label.clone_from(&row.label);
                        document.rerun_of = origin.map(|origin| origin.to_hex());
                        let paths = row.receipt.as_ref().map_or(0, |receipt| receipt.changed_paths);
                        lines.push(format!(
                            "{} {} {}, made {}: {}{}",
                            record.id.short(),
                            record.state.name(),
                            crate::render::counted(paths as u64, "path"),
                            crate::render::relative(record.created_ms, now),
                            if row.label.is_empty() { "(no intent given)" } else { &row.label },
                            if !replaced {
                                ""
                            } else if operators_own(runtime, record.id) {
                                // The operator's own work: theirs to decide (sec59 F4).
                                " (made under a policy its operator gave that run: the operator decides it)"
                            } else if crate::failure::work_done(runtime, record.id).is_some() {
                                // Nothing to run again (ux81 M4).
                                " (made under a policy since replaced, and its work is done already: vsh_show says \
                                 why; vsh_discard drops it)"
                            } else {
                                " (made under a policy since replaced: never committed; run it again with vsh_rerun)"
                            }
                        ));
                        document
                    })
                    .collect();
                // What went stale is said, with what changed (ux63 1).
                for found in &stale {
                    lines.push(crate::render::found_stale_text(found, &make_again(runtime, found.transaction).0));
                }
                let summary = if lines.is_empty() { "nothing is waiting".to_owned() } else { lines.join("\n") };
                success(&PendingDocument::new(rows), summary)
            }
            Err(error) => failure(&ErrorDocument::new(&error, &[])),
        })
        .await
    }

    /// Commit auto-approved or operator-approved work.
    #[tool(
        description = "Commit a transaction that the policy auto-approved or an operator approved: it is \
        revalidated against the live workspace first (work someone else's edit made stale is refused and \
        names the conflicting paths). Work awaiting approval is not committed: the result names the command \
        the operator runs. Committing work that already landed says so and writes nothing again.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn vsh_commit(
        &self,
        Parameters(params): Parameters<TransactionParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let cancel = ExecutionCancellation::new();
        let watcher = follow_cancellation(&context, &cancel);
        let bounds = self.options.bounds;
        let commit_cancel = cancel.clone();
        let discarded = Arc::clone(&self.discarded);
        let result = self
            .blocking(&context.peer, move |runtime| {
                let own = discarded.lock().map(|set| set.clone()).unwrap_or_default();
                commit(runtime, &params.transaction, &commit_cancel, bounds, &own)
            })
            .await;
        watcher.abort();
        if cancel.is_cancelled() {
            return cancelled(&context, "vsh_commit", "nothing was committed");
        }
        result
    }

    /// Undo committed work, as new work.
    #[tool(
        description = "Revert committed work: new work that puts back what the transaction replaced (each \
        path's bytes and mode; files it deleted come back, files it made go), decided by the policy like any \
        run. mode preview (the default) leaves it for vsh_commit, or for an operator's approval where the policy \
        asks for one; auto commits it when the policy auto-approves it. Refused, making nothing, where later \
        work changed those paths (the result names it: revert that first) or the bytes it replaced are no \
        longer kept.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn vsh_revert(
        &self,
        Parameters(params): Parameters<RevertParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let bounds = self.options.bounds;
        let discarded = Arc::clone(&self.discarded);
        self.blocking(&context.peer, move |runtime| {
            let mode = match run_mode(params.mode.as_deref()) {
                Ok(mode) => mode,
                Err(refusal) => return refusal,
            };
            let id = match runtime.resolve(&params.transaction) {
                Ok(id) => id,
                Err(error) => return transaction_failure(&error),
            };
            let own = discarded.lock().map(|set| set.clone()).unwrap_or_default();
            if let Some(rejected) = rejected_revert_of(runtime, id, &own) {
                return refused(format!(
                    "a revert of {0}, {1}, was rejected by an operator: {0} is not to be reverted again by an agent; \
                     ask the operator (who can with vsh revert {0})",
                    id.short(),
                    rejected.short()
                ));
            }
            match runtime.revert(id, mode) {
                Ok(receipt) => {
                    let (document, summary) = bounded_receipt(&receipt, bounds);
                    success(&document, summary)
                }
                Err(error) => {
                    let mut document = ErrorDocument::new(&error, &runtime.remedies(&error));
                    // The revert there is already, by the agent's own tool
                    // (the document's hint names the command line's).
                    match &error {
                        VshError::RevertWaiting { revert, .. }
                        | VshError::RevertChanged { reverted_by: Some(revert), .. } => {
                            let call = format!("vsh_show {}", revert.short());
                            document.hint = Some(format!("{call} shows it"));
                            document.next = Some(call);
                        }
                        _ => {}
                    }
                    // A revert the policy refuses says why and what can be
                    // done (ux80 M1: its hint was null).
                    if document.hint.is_none() {
                        let advice = crate::failure::advice_for(&error);
                        document.hint = (!advice.is_empty()).then(|| advice.join("; "));
                    }
                    failure(&document)
                }
            }
        })
        .await
    }

    /// Run a transaction's program again as new work.
    #[tool(
        description = "Run a transaction's stored program again, with its intent, as a new transaction \
        decided by the policy in force now: for work gone stale (the workspace changed under it), expired, \
        denied or made under a policy since replaced. mode, detail and accept_failure as for \
        vsh_run; the run gets this server's limits. Refused, running nothing, for work an operator rejected, \
        a revert (vsh_revert makes it again), a real command on a server that runs none, and work another run of which is committed or \
        waiting (again=true runs it anyway).",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn vsh_rerun(
        &self,
        Parameters(params): Parameters<RerunParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (mode, detail) = match run_and_detail(params.mode.as_deref(), params.detail.as_deref()) {
            Ok(chosen) => chosen,
            Err(refusal) => return refusal,
        };
        let (budget, command_budget) = (self.options.budget.clone(), self.options.command_budget.clone());
        let longest = budget.max_duration.max(command_budget.max_duration);
        let bounds = self.options.bounds;
        let runs_commands = self.options.commands.is_some();
        let discarded = Arc::clone(&self.discarded);
        self.cancellable_run(&context, "vsh_rerun", (longest, None), move |runtime, run_cancel| {
            let id = match runtime.resolve(&params.transaction) {
                Ok(id) => id,
                Err(error) => return transaction_failure(&error),
            };
            let stored = match runtime.program_to_run_again(id) {
                Ok(stored) => stored,
                Err(error) => return transaction_failure(&error),
            };
            // What of its work is committed now, before the check: a run of
            // it committed from here on refuses this one's commit (sec92 M1).
            let so_far = match runtime.work_done_so_far(id) {
                Ok(so_far) => so_far,
                Err(error) => return transaction_failure(&error),
            };
            let own = discarded.lock().map(|set| set.clone()).unwrap_or_default();
            let asked = Rerun { runs_commands, again: params.again == Some(true), discarded: &own };
            if let Some(why) = rerun_refusal(runtime, id, stored.as_ref(), &asked) {
                return refused(why);
            }
            let Some(stored) = stored else { return refused("no stored program".to_owned()) };
            // The budget `vsh_run` gives a run of the same kind.
            let budget = match stored.language {
                vsh::Language::Command => command_budget,
                vsh::Language::Monty if runs_commands => command_budget.with_guest_duration(budget.max_duration),
                _ => budget,
            };
            // Run as a preview, then committed here when asked: a
            // rejection of the work given while it ran covers it (sec81 2).
            let mut request = RunRequest::new(&stored.code)
                .with_language(stored.language)
                .with_mode(RunMode::Preview)
                .with_detail(detail)
                .with_budget(budget.clone())
                .with_rerun_of(id)
                .with_done_so_far(so_far.clone());
            if !stored.intent.is_empty() {
                request = request.with_intent(&stored.intent);
            }
            if params.accept_failure == Some(true) {
                request = request.with_failure_accepted();
            }
            let since_ms = crate::now_ms();
            let mut ran = runtime.run_cancellable(&request, run_cancel);
            if let Ok(receipt) = &ran {
                if let Some(refusal) = rejected_with_its_work(runtime, receipt.transaction, &own) {
                    return refusal;
                }
                if mode == RunMode::Auto && receipt.state == TransactionState::AutoApproved {
                    ran = if receipt.changed_paths == 0 {
                        // Nothing to write: done, as an auto run says.
                        let mut done = receipt.clone();
                        done.state = TransactionState::Committed;
                        Ok(done)
                    } else {
                        runtime.commit_rerun_cancellable(receipt.transaction, crate::now_ms(), run_cancel, &so_far)
                    };
                }
            }
            let report = RunReport { bounds, runs_commands, allowed: budget.clone(), given: budget, since_ms };
            ran_result(runtime, &request, ran, report)
        })
        .await
    }

    /// Wait for an operator's decision on work waiting for one.
    #[tool(
        description = "Wait until a transaction waiting for an operator's approval is decided (approved, \
        rejected, or found stale or expired), or until timeout_ms (default 300000, at most 1800000) passes: \
        instead of polling vsh_show. Returns the transaction's review as vsh_show with detail=compact does, \
        its state and what comes next (vsh_commit once approved); reports progress while it waits, and a \
        cancelled request stops waiting.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn vsh_wait(
        &self,
        Parameters(params): Parameters<WaitParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let limit = match params.timeout_ms.map(Duration::from_millis) {
            Some(asked) if asked > WAIT_MAX => {
                return refused(format!(
                    "timeout_ms {}: at most {} (wait again for longer)",
                    asked.as_millis(),
                    WAIT_MAX.as_millis()
                ));
            }
            Some(asked) => asked,
            None => WAIT_DEFAULT,
        };
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| report_progress(context.peer.clone(), token, limit, Progress::Wait));
        let started = Instant::now();
        let transaction = params.transaction.clone();
        let mut first_look = None;
        let mut looks = 0_u32;
        let waited = loop {
            let asked = transaction.clone();
            // Every few seconds the work is revalidated, as a review does, so
            // work the workspace moved under ends the wait as stale (ux74 M1:
            // the wait ran out its time and then showed it stale).
            let revalidate = looks % WAIT_REVALIDATE_EVERY == WAIT_REVALIDATE_EVERY - 1;
            looks += 1;
            let state = self
                .blocking(&context.peer, move |runtime| {
                    let found = runtime.resolve(&asked).and_then(|id| {
                        if revalidate {
                            runtime.show(id)?;
                        }
                        runtime.transaction(id)?.ok_or(VshError::UnknownTransaction(id))
                    });
                    match found {
                        // Made under a policy since replaced, it can never be
                        // approved: no wait for it (ux80 M4: the wait ran out).
                        Ok(record) if runtime.policy_since_replaced(record.id) => {
                            success(&POLICY_REPLACED, String::new())
                        }
                        Ok(record) => success(&record.state.name(), String::new()),
                        Err(error) => transaction_failure(&error),
                    }
                })
                .await;
            if state.is_error == Some(true) {
                break Err(state);
            }
            let name = state.structured_content.as_ref().and_then(serde_json::Value::as_str).unwrap_or_default();
            let waiting = name == TransactionState::PendingApproval.name();
            // A commit under way ends in a moment: its outcome is the answer
            // (ux71 M3: "committing", with nothing next).
            let moving = [TransactionState::Reserved, TransactionState::Revalidating, TransactionState::Committing]
                .iter()
                .any(|state| state.name() == name);
            if first_look.is_none() {
                first_look = Some(waiting || moving);
            }
            if !(waiting || moving) || started.elapsed() >= limit {
                break Ok(waiting || moving);
            }
            tokio::select! {
                () = context.ct.cancelled() => break Ok(true),
                () = tokio::time::sleep(WAIT_EVERY.min(limit.saturating_sub(started.elapsed()))) => {}
            }
        };
        if let Some(progress) = progress {
            progress.abort();
        }
        let still = match waited {
            Ok(still) => still,
            Err(result) => return result,
        };
        if context.ct.is_cancelled() {
            return cancelled(&context, "vsh_wait", "the wait was stopped; the transaction is as it was");
        }
        let bounds = self.options.bounds;
        let show_params =
            ShowParams { transaction: params.transaction, paths: None, detail: Some("compact".to_owned()) };
        let waited_ms = started.elapsed().as_millis();
        self.blocking(&context.peer, move |runtime| match show(runtime, &show_params, bounds) {
            Ok((document, summary)) => {
                let head = if still {
                    format!(
                        "still waiting for an operator's approval after {}; vsh_wait again to go on waiting\n",
                        waited_for(waited_ms)
                    )
                } else if let Some(id) = runtime
                    .resolve(&show_params.transaction)
                    .ok()
                    .filter(|id| first_look == Some(false) && runtime.policy_since_replaced(*id))
                {
                    match work_done_advice(runtime, id) {
                        Some((done, _)) => {
                            format!("nothing to wait for: it was made under a policy since replaced; {done}\n")
                        }
                        None => format!(
                            "nothing to wait for: it was made under a policy since replaced, and can never be \
                             approved; vsh_rerun {} makes it again under the policy now\n",
                            id.short()
                        ),
                    }
                } else if let Some(id) = runtime.resolve(&show_params.transaction).ok().filter(|_| {
                    first_look == Some(false)
                        && document
                            .record
                            .as_ref()
                            .is_some_and(|record| record.state == TransactionState::Rejected.name())
                }) {
                    // ux74 L7: it said only that it was not waiting; ux80 M3:
                    // by whom, and what that means for the agent.
                    format!("nothing to wait for: {}\n", rejected_hint(runtime, id))
                } else if first_look == Some(false)
                    && document.record.as_ref().is_some_and(|record| record.state == TransactionState::Approved.name())
                {
                    // ux80 L1: approved already, it had been waiting.
                    "nothing to wait for: an operator has approved it\n".to_owned()
                } else if first_look == Some(false) {
                    // ux71 L3: nothing waited for a decision.
                    "nothing to wait for: it was not waiting for an operator's approval\n".to_owned()
                } else {
                    format!("decided after {} s\n", waited_ms / 1000)
                };
                success(&document, format!("{head}{summary}"))
            }
            Err(error) => transaction_failure(&error),
        })
        .await
    }

    /// Drop work that should not be committed.
    #[tool(
        description = "Discard a transaction: a preview or pending work becomes rejected and can never be \
            committed.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn vsh_discard(
        &self,
        Parameters(params): Parameters<TransactionParams>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let discarded = Arc::clone(&self.discarded);
        self.blocking(&context.peer, move |runtime| {
            let id = match runtime.resolve(&params.transaction) {
                Ok(id) => id,
                Err(error) => return transaction_failure(&error),
            };
            // Work its operator made under a policy given to that run alone
            // is theirs to decide, not an agent's (sec58 4).
            if operators_own(runtime, id) {
                return refused(policy_replaced_advice(runtime, id));
            }
            if let Ok(Some(record)) = runtime.transaction(id) {
                match record.state {
                    TransactionState::Committed => {
                        return refused(format!(
                            "transaction {0} is committed: there is nothing to discard, its changes are on disk; to \
                             undo them, vsh_revert {0} makes new work that puts back what it replaced, decided and \
                             reviewed like any change",
                            id.short()
                        ));
                    }
                    // Discarding twice, or work that can never commit
                    // anyway, changes nothing and says so (a retry after a
                    // lost answer is no error).
                    TransactionState::Rejected
                    | TransactionState::Denied
                    | TransactionState::Expired
                    | TransactionState::Stale
                    | TransactionState::Failed => {
                        let stored = runtime.stored_program(id).ok().flatten();
                        let document = crate::render::record_document(&record, None, stored.as_ref());
                        let summary = format!(
                            "transaction {} is already {}: it can never be committed; nothing changed",
                            record.id.short(),
                            record.state.name()
                        );
                        return success(&RecordDocument::new(document), summary);
                    }
                    _ => {}
                }
            }
            match runtime.reject(id, crate::now_ms()) {
                Ok(record) => {
                    // Kept in the store too: another server, or this one
                    // restarted, knows it for the agent's own.
                    runtime.record_rejection_scope(id, vsh::lower::vsh_store::RejectionScope::Discarded);
                    if let Ok(mut own) = discarded.lock()
                        && own.len() < DISCARDS_KEPT
                    {
                        own.insert(id);
                    }
                    let stored = runtime.stored_program(id).ok().flatten();
                    let document = crate::render::record_document(&record, None, stored.as_ref());
                    let summary = format!("transaction {} is {}", record.id.short(), record.state.name());
                    success(&RecordDocument::new(document), summary)
                }
                Err(error) => failure(&ErrorDocument::new(&error, &[])),
            }
        })
        .await
    }
}

/// `vsh_commit`: commit the transaction `name` names unless `cancel` wins first.
fn commit(
    runtime: &Runtime,
    name: &str,
    cancel: &ExecutionCancellation,
    bounds: TextBounds,
    discarded: &std::collections::BTreeSet<vsh::TransactionId>,
) -> CallToolResult {
    let id = match runtime.resolve(name) {
        Ok(id) => id,
        Err(error) => return transaction_failure(&error),
    };
    if let Some(refusal) = rejected_with_its_work(runtime, id, discarded) {
        return refusal;
    }
    match runtime.commit_cancellable(id, crate::now_ms(), cancel) {
        Ok(receipt) => {
            let (document, summary) = committed_receipt(&receipt, bounds);
            success(&document, summary)
        }
        // Exactly once, and a retry after a lost answer is told so: the
        // commit landed (as the command line's `vsh commit` says, exit 0).
        Err(VshError::NotCommittable { state: TransactionState::Committed, .. })
            if let Ok(Some(receipt)) = runtime.show(id) =>
        {
            let (document, summary) = committed_receipt(&receipt, bounds);
            success(&document, format!("already committed: nothing was written again\n{summary}"))
        }
        Err(error) => {
            let mut document = ErrorDocument::new(&error, &[]);
            document.bound(bounds);
            match &error {
                // Made under a policy since replaced, whatever it waits for.
                _ if runtime.decided_under_another_policy(id) || matches!(error, VshError::PolicyChanged(_)) => {
                    if let Some((done, call)) = work_done_advice(runtime, id) {
                        document.hint = Some(done);
                        document.next = call;
                    } else {
                        document.hint = Some(policy_replaced_advice(runtime, id));
                        if !operators_own(runtime, id) {
                            document.next = Some(format!("vsh_rerun {}", id.short()));
                        }
                    }
                }
                VshError::NotCommittable { state: TransactionState::PendingApproval, .. } => {
                    document.hint = Some(format!(
                        "awaiting approval: the operator runs `vsh approve {0}`; vsh_wait {0} waits for it",
                        id.short()
                    ));
                    document.next = Some(format!("vsh_wait {}", id.short()));
                }
                // Its approval lapsed first: it waits for another (ux82 M1:
                // no hint, and the text named the operator's command).
                VshError::Store(vsh::lower::vsh_store::StoreError::ApprovalLapsed { .. }) => {
                    document.hint = Some(format!(
                        "its approval lapsed before this commit: it waits for the operator's approval again \
                         (`vsh approve {0}`); vsh_wait {0} waits for it",
                        id.short()
                    ));
                    document.next = Some(format!("vsh_wait {}", id.short()));
                }
                VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }) => {
                    let (again, call) = make_again(runtime, id);
                    document.hint = Some(format!("the workspace changed: {again}"));
                    document.next = call;
                }
                // Asked again after it went stale, or after it lapsed (ux58 5).
                VshError::NotCommittable { state: TransactionState::Stale, .. } => {
                    let (again, call) = make_again(runtime, id);
                    document.hint = Some(format!(
                        "it went stale: the workspace changed under what it read or changed since it was made, so \
                         it can never be committed: {again}"
                    ));
                    document.next = call;
                }
                // The operator said no: theirs to decide again, not the
                // agent's to run again (ux73 H1: following the hint, an
                // agent committed rejected work in auto mode).
                VshError::NotCommittable { state: TransactionState::Rejected, .. } => {
                    document.hint = Some(rejected_hint(runtime, id));
                }
                // The policy said no (ux80 M1: no hint reached the agent).
                VshError::NotCommittable { state: TransactionState::Denied, .. } => {
                    document.hint = Some(format!(
                        "the policy denied it (vsh_show {} names each denial, its rule and reason): it is never \
                         committed; do the work again so that it leaves the protected paths alone, or ask the \
                         operator",
                        id.short()
                    ));
                }
                VshError::NotCommittable { state: TransactionState::Expired | TransactionState::Failed, .. } => {
                    let (again, call) = make_again(runtime, id);
                    document.hint = Some(format!("it can never be committed now: {again}"));
                    document.next = call;
                }
                _ => {}
            }
            failure(&document)
        }
    }
}

/// The state `vsh_wait` reads for pending work made under a policy since
/// replaced: it waits for no approval.
const POLICY_REPLACED: &str = "policy-replaced";

/// What the agent is told of its rejected run `id`, by what the rejection
/// said no to (ux80 M3: the tools disagreed after `vsh reject --only`).
fn rejected_hint(runtime: &Runtime, id: vsh::TransactionId) -> String {
    use vsh::lower::vsh_store::RejectionScope;
    let short = id.short();
    match runtime.rejection_scope(id) {
        RejectionScope::Discarded => {
            format!(
                "it was discarded with vsh_discard: it is never committed; vsh_rerun {short} runs its program again as new work"
            )
        }
        RejectionScope::ThisRun => format!(
            "an operator rejected this run alone, not its work: it is never committed; vsh_rerun {short} runs its \
             program again as new work, for the operator to decide"
        ),
        RejectionScope::Work => "an operator rejected it: it is not to be committed; ask the operator before doing \
                                 that work again"
            .to_owned(),
    }
}

/// For work whose `next` would run it again: the other run of the same
/// work that is committed or waiting, as the agent's next call and what to
/// tell it.
fn other_run(runtime: &Runtime, id: vsh::TransactionId, next: Option<&str>) -> Option<(String, String)> {
    // Work another run of which is committed or waiting is not run again:
    // that run is what to look at (ux73 L7: `next` said vsh_rerun, refused).
    let done = next
        .is_some_and(|next| next.starts_with("vsh_rerun "))
        .then(|| crate::failure::live_rerun(runtime, id))
        .flatten()?;
    // What takes that other run on is the agent's next step (ux75 M5: an
    // operator's rerun waits, and the agent was told to look at it, and in
    // the same text to run the work again).
    let short = done.id.short();
    let (call, what) = match done.state {
        TransactionState::PendingApproval => (format!("vsh_wait {short}"), "vsh_wait {0} waits for its approval"),
        TransactionState::Approved | TransactionState::AutoApproved => {
            (format!("vsh_commit {short}"), "vsh_commit {0} commits it")
        }
        _ => (format!("vsh_show {short}"), "vsh_show {0} shows it"),
    };
    let text = format!(
        "it can never be committed: another run of this work, {short}, is {}: running it again would do that \
         work twice; {}",
        done.state.name(),
        what.replace("{0}", &short)
    );
    Some((call, text))
}

/// The review of the transaction `name` names, bounded for the reader.
fn show(runtime: &Runtime, params: &ShowParams, bounds: TextBounds) -> Result<(ShowDocument, String), VshError> {
    let id = runtime.resolve(&params.transaction)?;
    let detail = match params.detail.as_deref() {
        Some("changes") => vsh::ReceiptDetail::Changes,
        Some("compact") => vsh::ReceiptDetail::Compact,
        // Anything else was refused before (`vsh_show`).
        _ => vsh::ReceiptDetail::Full,
    };
    let mut receipt = runtime.show(id)?.ok_or(VshError::UnknownTransaction(id))?;
    let mut not_changed = Vec::new();
    if let Some(paths) = &params.paths {
        // A path asks for itself and, a directory, for every changed path beneath it.
        let named: Vec<vsh::VPath> = paths.iter().filter_map(|path| vsh::VPath::parse(path).ok()).collect();
        let selects = |asked: &vsh::VPath, path: &vsh::VPath| path.is_within(asked);
        let asked: std::collections::BTreeSet<vsh::VPath> = receipt
            .changes
            .iter()
            .filter(|entry| named.iter().any(|asked| selects(asked, &entry.path)))
            .map(|entry| entry.path.clone())
            .collect();
        let limits = vsh::ReviewLimits { max_file_bytes: 64 << 20, max_total_bytes: 256 << 20 };
        receipt.review = runtime.review_paths(id, limits, &asked)?;
        receipt.changes.retain(|entry| asked.contains(&entry.path));
        not_changed = paths
            .iter()
            .filter(|path| {
                vsh::VPath::parse(path)
                    .map_or(true, |named| !receipt.changes.iter().any(|entry| selects(&named, &entry.path)))
            })
            .cloned()
            .collect();
    } else if receipt.review.is_empty() && detail == vsh::ReceiptDetail::Full {
        receipt.review = runtime.review(id)?;
    }
    match detail {
        vsh::ReceiptDetail::Full => {}
        vsh::ReceiptDetail::Changes => receipt.review.clear(),
        vsh::ReceiptDetail::Compact => {
            receipt.review.clear();
            receipt.changes.clear();
        }
    }
    let record = runtime.transaction(id)?;
    let stored = runtime.stored_program(id)?;
    let mut document = ShowDocument::new(
        &receipt,
        record.as_ref().map(|record| crate::render::record_document(record, Some(&receipt), stored.as_ref())),
        &runtime.history(id)?,
        runtime.run_policy(id)?.as_ref(),
        stored.map(|stored| stored.code),
    );
    document.bound(bounds);
    let replaced = runtime.decided_under_another_policy(id);
    if let Some(record) = document.record.as_mut() {
        record.policy_changed = replaced;
    }
    // Work made under a replaced policy is never committed: nothing is next.
    document.receipt.next = agent_next(&receipt).filter(|_| !replaced);
    let other = other_run(runtime, id, document.receipt.next.as_deref());
    if let Some((call, _)) = &other {
        document.receipt.next = Some(call.clone());
    }
    let blocked = blocked_revert(runtime, &receipt);
    if blocked.is_some() {
        document.receipt.next = None;
    }
    // Work done already is not to run again (ux81 M1, M4); a run of it
    // that landed or waits is named as above.
    let finished =
        matches!(receipt.state, TransactionState::Stale | TransactionState::Expired | TransactionState::Failed)
            || replaced;
    let done = (finished && other.is_none()).then(|| work_done_advice(runtime, id)).flatten();
    if let Some((_, call)) = &done {
        document.receipt.next.clone_from(call);
    }
    let advice = done
        .map(|(text, _)| text)
        .or_else(|| replaced.then(|| policy_replaced_advice(runtime, id)))
        .or_else(|| blocked.map(|again| format!("it can never be committed: {again}")))
        .or_else(|| other.map(|(_, text)| text));
    let mut summary = receipt_summary(&receipt, &document.receipt, advice.as_deref());
    note_left_out(&mut summary, &document);
    if !not_changed.is_empty() {
        let named: Vec<String> = not_changed.iter().map(|path| format!("{path:?}")).collect();
        let _ = write!(summary, "\nnote: not changed by this transaction: {}", named.join(", "));
    }
    Ok((document, summary))
}

/// The requests this server serves whose params it checks.
pub(crate) const SERVED_METHODS: [&str; 2] = [CallToolRequestMethod::VALUE, ListToolsRequestMethod::VALUE];

/// The message of a -32602 answer: `method`'s params do not fit it, `why`.
pub(crate) fn invalid_params(method: &str, why: &str) -> String {
    format!("invalid params for {method}: {why}")
}

/// The answer to a request whose params fit no MCP request's shape (rmcp
/// hands such a request over as a custom one, and would answer -32601,
/// "method not found", even for `tools/call`): a method this server serves
/// (`tools/call`, `tools/list`) with params that do not fit it is -32602,
/// "invalid params", naming what does not fit; any other method is -32601.
fn unfit_request(request: &CustomRequest) -> ErrorData {
    let method = request.method.as_str();
    let unfit = |why: String| ErrorData::invalid_params(invalid_params(method, &why), None);
    if method == CallToolRequestMethod::VALUE {
        return match request.params_as::<CallToolRequestParams>() {
            Err(error) => unfit(error.to_string()),
            Ok(None) => unfit("the params (the tool's name and its arguments) are missing".to_owned()),
            Ok(Some(_)) => unfit("they do not fit the request".to_owned()),
        };
    }
    if method == ListToolsRequestMethod::VALUE {
        return match request.params_as::<PaginatedRequestParams>() {
            Err(error) => unfit(error.to_string()),
            Ok(_) => unfit("they do not fit the request".to_owned()),
        };
    }
    ErrorData::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for VshServer {
    /// The router's call, with an unknown tool's error naming the tools
    /// there are (an agent takes `vsh_exec`, a Monty function, for one).
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            let tools: Vec<String> =
                self.tool_router.list_all().into_iter().map(|tool| tool.name.into_owned()).collect();
            return Err(ErrorData::invalid_params(unknown_tool(&request.name, &tools), None));
        }
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CustomResult, ErrorData>> + rmcp::service::MaybeSendFuture + '_ {
        std::future::ready(Err(unfit_request(&request)))
    }

    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::from_build_env();
        "vsh".clone_into(&mut implementation.name);
        vsh::VERSION.clone_into(&mut implementation.version);
        let limits = |budget: &ExecutionBudget| {
            format!(
                "{} ms of running time, {} host calls, {} bytes of output, {} bytes of memory",
                budget.max_duration.as_millis(),
                budget.max_os_calls,
                budget.max_output_bytes,
                budget.max_memory_bytes
            )
        };
        // A run that may reach real commands (language=command, or a Monty
        // program with vsh_exec) gets a command's budget, a Monty program's
        // own running time excepted (`run_ceiling`).
        let per_run = match &self.options.commands {
            Some(_) => format!(
                "a Bash program {}; a real command (language=command) {}; a Monty program, which may run \
                 commands with vsh_exec, a real command's limits but {} ms of its own running time (each \
                 command it runs gets a command's)",
                limits(&self.options.budget),
                limits(&self.options.command_budget),
                self.options.budget.max_duration.as_millis()
            ),
            None => limits(&self.options.budget),
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(format!(
                "vsh runs your programs against a virtual image of the workspace and commits their changes \
                 exactly once, under the workspace's policy. Preview with vsh_run, read the receipt, commit \
                 with vsh_commit. You cannot approve your own work: an operator does.\n\nThis server's limits \
                 per run: {per_run}; a tool result carries at most {} characters of each text.\n\n{}",
                self.options.bounds.max_chars,
                guide_for_agents(),
            ))
    }
}

/// The most a run of `language` may have on a server with `options`: a
/// real command a command's budget; a Monty program on a server that runs
/// commands a command's budget too, but for its own (guest) time, a
/// program's; anything else a program's.
fn run_ceiling(language: vsh::Language, options: &ServeOptions) -> ExecutionBudget {
    match language {
        vsh::Language::Command => options.command_budget.clone(),
        vsh::Language::Monty if options.commands.is_some() => {
            options.command_budget.clone().with_guest_duration(options.budget.max_duration)
        }
        _ => options.budget.clone(),
    }
}

/// The guest guide as an agent reads it: without the note to vsh's own
/// developers on which test runs its examples.
fn guide_for_agents() -> String {
    let note_start = GUIDE.find("Every example below is run by the test");
    match note_start.and_then(|start| GUIDE[start..].find("\n\n").map(|end| (start, start + end + 2))) {
        Some((start, end)) => format!("{}{}", &GUIDE[..start], &GUIDE[end..]),
        None => GUIDE.to_owned(),
    }
}

/// `vsh serve`: serve MCP on stdin and stdout until the client closes them.
pub(crate) fn serve(options: ServeOptions) -> Result<u8, Box<dyn std::error::Error>> {
    let server = VshServer::new(options);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    tokio.block_on(async move {
        // Every line goes through the gate, which answers what the service
        // would drop (see `serve_gate`); one writer keeps lines whole.
        let (service_input, gate_output) = tokio::io::duplex(1 << 20);
        let (service_output, writer_input) = tokio::io::duplex(1 << 20);
        let (answers, answered) = tokio::sync::mpsc::channel(16);
        let gate = tokio::spawn(crate::serve_gate::gate(tokio::io::stdin(), gate_output, answers));
        let writer = tokio::spawn(crate::serve_gate::writer(writer_input, answered, tokio::io::stdout()));
        let service = server.serve((service_input, service_output)).await?;
        service.waiting().await?;
        // The service is done: the gate stops reading, the writer finishes
        // the lines it has.
        gate.abort();
        let _ = gate.await;
        writer.await??;
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    Ok(crate::EXIT_OK)
}

/// A failure to find the transaction a call names: an id that is never
/// found is most often a preview that changed nothing (never kept).
fn transaction_failure(error: &VshError) -> CallToolResult {
    let mut document = ErrorDocument::new(error, &[]);
    if matches!(error, VshError::UnknownTransaction(_) | VshError::NoSuchTransaction(_)) {
        document.hint = Some(
            "a run that changes nothing is not kept, so its id is never found; vsh_pending lists the work that \
             waits"
                .to_owned(),
        );
    }
    failure(&document)
}

/// A tool's `mode`: `preview` (the default) or `auto`; anything else is
/// the call's refusal.
/// A run's `mode` and `detail` (`vsh_run`'s, `vsh_rerun`'s), or the refusal of either.
fn run_and_detail(mode: Option<&str>, detail: Option<&str>) -> Result<(RunMode, vsh::ReceiptDetail), CallToolResult> {
    Ok((run_mode(mode)?, receipt_detail(detail)?))
}

fn receipt_detail(given: Option<&str>) -> Result<vsh::ReceiptDetail, CallToolResult> {
    match given {
        Some("compact") => Ok(vsh::ReceiptDetail::Compact),
        Some("full") => Ok(vsh::ReceiptDetail::Full),
        None | Some("changes") => Ok(vsh::ReceiptDetail::Changes),
        Some(other) => Err(refused(format!("detail {other:?}: give compact, changes or full"))),
    }
}

/// How stale or lapsed work `id` is made again: its program run again with
/// `vsh_rerun`, or, for a revert (which has none), its original reverted
/// again (ux73 H2: a stale revert was sent to `vsh_rerun`, which refuses it).
/// A revert none can be made of again while the workspace stands in its
/// original's way says so, and has no call next (ux74 M3).
fn make_again(runtime: &Runtime, id: vsh::TransactionId) -> (String, Option<String>) {
    if let Some(done) = work_done_advice(runtime, id) {
        return done;
    }
    if let Some(of) = runtime.show(id).ok().flatten().as_ref().and_then(crate::render::reverted_by) {
        let short = of.get(..12).unwrap_or(of);
        if let Some(revert) = crate::failure::reverted_already(runtime, of) {
            return (format!("nothing is left to do: {short} is reverted already, by {revert}"), None);
        }
        if let Some(paths) = crate::failure::revert_blocked(runtime, of) {
            return (
                format!(
                    "no revert of {short} can be made now: the workspace changed at {paths} since {short} was \
                     committed, and a revert never overwrites that; change them back by new work instead (vsh_run)"
                ),
                None,
            );
        }
        let call = format!("vsh_revert {short}");
        (format!("revert it again with {call}"), Some(call))
    } else {
        let call = format!("vsh_rerun {}", id.short());
        (format!("run the program again with {call}"), Some(call))
    }
}

/// What the agent is told of work whose work is done already
/// ([`crate::failure::work_done`]: another run of it is committed, or the
/// workspace holds every change it makes), and its next call: nothing to
/// run again (ux81 M1, M4), and, while it waits, `vsh_discard` drops it.
fn work_done_advice(runtime: &Runtime, id: vsh::TransactionId) -> Option<(String, Option<String>)> {
    let done = crate::failure::work_done(runtime, id)?;
    let waits = runtime.transaction(id).ok().flatten().is_some_and(|record| {
        matches!(
            record.state,
            TransactionState::PendingApproval | TransactionState::Approved | TransactionState::AutoApproved
        )
    });
    Some(if waits {
        let call = format!("vsh_discard {}", id.short());
        (format!("nothing is left to do: {done}; {call} drops it"), Some(call))
    } else {
        (format!("nothing is left to do: {done}"), None)
    })
}

/// Work another run of which an operator rejected (not this server's own
/// discard), made while the rejection was being given (sec81 2: a
/// `vsh_rerun` running when the operator rejected its first run was
/// recorded after, and committed): rejected with it, and the refusal to
/// return; `None` for any other work.
fn rejected_with_its_work(
    runtime: &Runtime,
    id: vsh::TransactionId,
    discarded: &std::collections::BTreeSet<vsh::TransactionId>,
) -> Option<CallToolResult> {
    let state = runtime.transaction(id).ok().flatten()?.state;
    if !matches!(state, TransactionState::PendingApproval | TransactionState::Approved | TransactionState::AutoApproved)
    {
        return None;
    }
    // Most commits find no rejected record at all: the lineage (whose
    // artifacts are read) is looked at only when one exists.
    let records = runtime.transactions().ok()?;
    let scopes = runtime.rejection_scopes();
    let of_the_work = |record: &vsh::TransactionRecord| refuses_the_work(record, &scopes, discarded);
    if !records.iter().any(of_the_work) {
        return None;
    }
    let runs = runtime.runs_of_same_work(id).ok()?;
    let rerun = runs.iter().find(|run| run.id != id && of_the_work(run)).map(|run| run.id);
    // A revert's "runs" are the reverts of the same work (sec81 6).
    let reverting =
        runtime.show(id).ok().flatten().and_then(|receipt| {
            crate::render::reverted_by(&receipt).and_then(|original| runtime.resolve(original).ok())
        });
    let rejected = rerun.or_else(|| {
        reverting.and_then(|original| rejected_revert_of(runtime, original, discarded).filter(|other| *other != id))
    })?;
    let _ = runtime.reject(id, crate::now_ms());
    Some(refused(format!(
        "another run of this work, {}, was rejected by an operator: {} is rejected with it and is not to be \
         committed; ask the operator",
        rejected.short(),
        id.short()
    )))
}

/// Whether `record` is a rejection of its work: rejected, and what the store
/// records of it says so (an operator's `vsh reject`, also one given after
/// the agent's own discard: sec84 F1, this server's memory of the discard
/// let the agent run again work the operator then rejected), neither an
/// agent's discard nor an operator's rejection of that run alone. Where the
/// store records nothing (its record lost), this server's own discards
/// (`discarded`) are its agent's, and the rest the work's.
fn refuses_the_work(
    record: &vsh::TransactionRecord,
    scopes: &vsh::lower::vsh_store::RejectionScopes,
    discarded: &std::collections::BTreeSet<vsh::TransactionId>,
) -> bool {
    record.state == TransactionState::Rejected
        && match scopes.recorded(&record.id) {
            Some(scope) => scope.refuses_the_work(),
            None => !discarded.contains(&record.id),
        }
}

/// A revert of committed work `original` that an operator rejected (not
/// this server's own discard), made since `original` was committed, if any:
/// the operator said no to undoing it, which no agent's revert of it again
/// gets round (sec81 6). Reads the stored receipts of the rejected records
/// made since.
fn rejected_revert_of(
    runtime: &Runtime,
    original: vsh::TransactionId,
    discarded: &std::collections::BTreeSet<vsh::TransactionId>,
) -> Option<vsh::TransactionId> {
    let since = runtime.transaction(original).ok()??.updated_ms;
    let hex = original.to_hex();
    let scopes = runtime.rejection_scopes();
    runtime.transactions().ok()?.into_iter().find_map(|record| {
        (refuses_the_work(&record, &scopes, discarded) && record.created_ms >= since)
            .then(|| runtime.show(record.id).ok().flatten())
            .flatten()
            .filter(|receipt| crate::render::reverted_by(receipt) == Some(hex.as_str()))
            .map(|_| record.id)
    })
}

/// What a review left without hunks for its size, said in `summary`, with
/// how to get it.
fn note_left_out(summary: &mut String, document: &ShowDocument) {
    let left_out: Vec<&str> = document
        .receipt
        .review
        .iter()
        .filter(|review| matches!(review.no_hunks.as_deref(), Some("too-large" | "budget-spent")))
        .map(|review| review.path.as_str())
        .collect();
    if !left_out.is_empty() {
        let listed: Vec<String> = left_out.iter().take(20).map(|path| format!("{path:?}")).collect();
        let _ = write!(
            summary,
            "\nnote: {} left without hunks (too large, or past the review's or this text's budget); vsh_show \
             with paths=[...] reviews a few at a time: [{}{}]",
            crate::render::counted(left_out.len() as u64, "changed path"),
            listed.join(", "),
            if left_out.len() > 20 { ", ..." } else { "" }
        );
    }
}

/// For a revert gone stale or lapsed whose original the workspace stands
/// in the way of, why it is not reverted again (ux74 M3); `None` otherwise.
fn blocked_revert(runtime: &Runtime, receipt: &vsh::Receipt) -> Option<String> {
    (matches!(receipt.state, TransactionState::Stale | TransactionState::Expired)
        && crate::render::reverted_by(receipt).is_some())
    .then(|| make_again(runtime, receipt.transaction))
    .and_then(|(again, call)| call.is_none().then_some(again))
}

/// What a `vsh_rerun` call asks, beside the work: whether this server
/// runs real commands, whether the agent asked `again`, and the work it
/// discarded itself (its own rejections, which do not stop it).
#[derive(Clone, Copy)]
struct Rerun<'a> {
    runs_commands: bool,
    again: bool,
    discarded: &'a std::collections::BTreeSet<vsh::TransactionId>,
}

/// Why `vsh_rerun` cannot run `id`'s program again here, as the agent's
/// next step: a revert (reverted again instead), work with no program, a
/// real command or real bash on a server that runs none, or work another
/// run of which is committed or waiting (unless `again`).
fn rerun_refusal(
    runtime: &Runtime,
    id: vsh::TransactionId,
    stored: Option<&vsh::StoredProgram>,
    asked: &Rerun<'_>,
) -> Option<String> {
    let Rerun { runs_commands, again, discarded } = *asked;
    let short = id.short();
    if let Some(original) = runtime.show(id).ok().flatten().as_ref().and_then(crate::render::reverted_by) {
        let original = original.get(..12).unwrap_or(original);
        return Some(format!(
            "transaction {short} is a revert of {original}, not a program to run again: vsh_revert {original} makes it again"
        ));
    }
    let record = runtime.transaction(id).ok().flatten();
    let state = record.as_ref().map(|record| record.state);
    let scopes = runtime.rejection_scopes();
    // The operator said no to it: running it again is theirs to decide
    // (ux73 H1: an agent re-ran rejected work in auto mode and committed it).
    // Its agent's own discard (this server's or any other's, recorded) and
    // an operator's rejection of that run alone (`--only`) said nothing of
    // the work.
    if record.as_ref().is_some_and(|record| refuses_the_work(record, &scopes, discarded)) {
        return Some(format!(
            "transaction {short} was rejected by an operator: it is not to be run again by an agent; ask the \
             operator (who can run it again with vsh rerun {short})"
        ));
    }
    // So was another run of the same work: a run of this one would be that
    // work once more (sec79 F2: a rerun of the stale first run of rejected
    // work).
    if let Some(rejected) = runtime
        .runs_of_same_work(id)
        .ok()
        .and_then(|runs| runs.into_iter().rev().find(|run| refuses_the_work(run, &scopes, discarded)))
    {
        return Some(format!(
            "another run of the work of {short}, {0}, was rejected by an operator: the work is not to be run again \
             by an agent; ask the operator (who can run it again with vsh rerun {short})",
            rejected.id.short()
        ));
    }
    // Work the operator ran under a policy of their own: its program is
    // theirs, which vsh_show does not give an agent (sec78 F3: a rerun's
    // error and stored program gave it).
    if operators_own(runtime, id) {
        return Some(format!(
            "transaction {short} was made under a policy its operator gave that run: only the operator runs it \
             again (vsh rerun {short})"
        ));
    }
    // Itself committed or waiting: a run of it again would do its work
    // twice (sec78 F4: only other runs of the same work were asked).
    if !again
        && !runtime.decided_under_another_policy(id)
        && let Some(state) = state.filter(|state| {
            matches!(
                state,
                TransactionState::Committed
                    | TransactionState::PendingApproval
                    | TransactionState::Approved
                    | TransactionState::AutoApproved
                    | TransactionState::Reserved
                    | TransactionState::Revalidating
                    | TransactionState::Committing
            )
        })
    {
        return Some(format!(
            "transaction {short} is {} itself: running it again would do its work twice; again=true runs it anyway",
            state.name()
        ));
    }
    let Some(stored) = stored else {
        return Some(format!("transaction {short} has no stored program to run again"));
    };
    if stored.language == vsh::Language::Command && !runs_commands {
        return Some(format!(
            "transaction {short} is a real command, and this server runs no real commands (its operator starts it \
             with --commands); the operator can run it again with vsh rerun {short}"
        ));
    }
    if stored.language == vsh::Language::Bash && crate::ran_in_real_bash(runtime, id).unwrap_or(false) {
        return Some(format!(
            "transaction {short} ran in real bash, which this server runs only as a command: vsh_run with \
             \"language\": \"command\" and \"code\": [\"bash\", \"-c\", SCRIPT] (vsh_show {short} gives the script), \
             on a server started with --commands"
        ));
    }
    if !again && let Some(done) = crate::failure::live_rerun(runtime, id) {
        // Still waiting itself, it is dropped, not run (ux82 L1).
        let waits = matches!(
            state,
            Some(TransactionState::PendingApproval | TransactionState::Approved | TransactionState::AutoApproved)
        );
        let drop = if waits { format!(", vsh_discard {short} drops this one") } else { String::new() };
        return Some(format!(
            "another run of the work of {short}, {}, is {}: running it once more would do that work twice; \
             vsh_show {} shows that run{drop}, and again=true runs it once more anyway",
            done.id.short(),
            done.state.name(),
            done.id.short()
        ));
    }
    // What it changes is there already (ux81 M1).
    // Waiting for a commit that holds the lock (sec89 M1); past the wait,
    // refused: whether its work is done cannot be told yet.
    let holds = if again { Ok(false) } else { runtime.holds_its_changes(id, true) };
    if let Err(error) = &holds {
        return Some(format!(
            "whether the work of {short} is done already cannot be told now ({error}); call vsh_rerun again"
        ));
    }
    if holds.unwrap_or(false) {
        return Some(format!(
            "the workspace holds every change {short} makes already (other work made them since, or an edit by \
             hand): running it again would make them twice; again=true runs it anyway"
        ));
    }
    None
}

fn run_mode(given: Option<&str>) -> Result<RunMode, CallToolResult> {
    match given {
        None | Some("preview") => Ok(RunMode::Preview),
        Some("auto") => Ok(RunMode::Auto),
        Some(other) => Err(refused(format!("mode {other:?}: give preview or auto"))),
    }
}

/// The error for a call of `name`, a tool this server does not have.
fn unknown_tool(name: &str, tools: &[String]) -> String {
    let mut message = format!("no tool named {name:?}: the tools are {}", tools.join(", "));
    if matches!(name, "vsh_exec" | "vsh_bash" | "vsh_read" | "vsh_write" | "vsh_patch" | "vsh_search" | "vsh_glob") {
        let _ = write!(
            message,
            "; {name}(...) is a function a vsh_run program calls (vsh_exec on a server started with --commands; \
             vsh_run with language \"command\" runs one command as the whole program)"
        );
    }
    message
}

/// Whether a program's text is a command's argv written as JSON: a
/// non-empty array of strings, or an object with an `argv` key.
fn looks_like_argv(code: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(code.trim()) {
        Ok(serde_json::Value::Array(items)) => !items.is_empty() && items.iter().all(serde_json::Value::is_string),
        Ok(serde_json::Value::Object(fields)) => fields.contains_key("argv"),
        _ => false,
    }
}

/// How long a wait lasted, as said to an agent: tenths of a second under ten
/// seconds (ux84 L5: a wait of 1,500 ms read "after 1 s"), whole seconds past.
fn waited_for(waited_ms: u128) -> String {
    if waited_ms < 10_000 {
        format!("{}.{} s", waited_ms / 1000, waited_ms % 1000 / 100)
    } else {
        format!("{} s", waited_ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_said_in_tenths_of_a_second_under_ten_seconds() {
        let said: Vec<String> = [0, 300, 1_500, 9_999, 10_000, 12_345].into_iter().map(waited_for).collect();
        assert_eq!(said, ["0.0 s", "0.3 s", "1.5 s", "9.9 s", "10 s", "12 s"]);
    }

    #[test]
    fn the_run_description_names_every_guest_function() {
        for name in vsh::lower::vsh_monty::MONTY_VSH_TOOL_NAMES {
            assert!(RUN_DESCRIPTION.contains(&format!("{name}(")), "{name} is missing");
        }
    }

    #[test]
    fn file_uris_name_absolute_paths_only() {
        assert_eq!(file_uri_path("file:///home/a%20b/ws"), Some(PathBuf::from("/home/a b/ws")));
        assert_eq!(file_uri_path("file://localhost/srv"), Some(PathBuf::from("/srv")));
        assert_eq!(file_uri_path("https://example.com/x"), None);
        assert_eq!(file_uri_path("file://host/share"), None);
        assert_eq!(file_uri_path("file:///bad%ff"), None);
    }

    #[test]
    fn the_workspace_is_never_outside_the_roots_offered() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(a.join("inner")).unwrap();
        std::fs::create_dir(&b).unwrap();
        let (a, b) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        // One root: it, whatever the current directory found.
        assert_eq!(choose_root(std::slice::from_ref(&a), &elsewhere, None).unwrap(), a);
        // The workspace found from the current directory, inside a root.
        assert_eq!(choose_root(&[a.clone(), b.clone()], &a.join("inner"), None).unwrap(), a.join("inner"));
        // Several roots: the one holding the current directory.
        assert_eq!(choose_root(&[a.clone(), b.clone()], &elsewhere, Some(&b)).unwrap(), b);
        // Several and no way to choose.
        let error = choose_root(&[a.clone(), b], &elsewhere, Some(&elsewhere)).unwrap_err();
        assert!(error.contains("--workspace"), "{error}");
        // No usable root (missing): the directory found.
        assert_eq!(choose_root(&[dir.path().join("gone")], &elsewhere, None).unwrap(), elsewhere);
    }

    #[test]
    fn a_client_chooses_only_a_workspace_or_where_the_operator_started_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let (project, other, made) = (dir.path().join("project"), dir.path().join("etc"), dir.path().join("made"));
        for path in [project.join("src"), other.clone(), made.join(".vsh")] {
            std::fs::create_dir_all(path).unwrap();
        }
        // Started in the project (or below it): the client's root there is the operator's.
        assert!(made_here_or_already(&project, &project, Some(&project)).is_ok());
        assert!(made_here_or_already(&project, &other, Some(&project.join("src"))).is_ok());
        // A workspace vsh init made: any client may name it.
        assert!(made_here_or_already(&made, &project, Some(&project)).is_ok());
        // Anything else the client names is refused, with what to do.
        let error = made_here_or_already(&other, &project, Some(&project)).unwrap_err();
        assert!(error.contains("no vsh workspace yet") && error.contains("vsh init --workspace"), "{error}");
        assert!(!other.join(".vsh").exists(), "nothing was made");
    }

    #[test]
    fn a_run_may_lower_the_servers_limits_but_never_raise_them() {
        let ceiling = ExecutionBudget::default();
        let lower = BudgetParams { timeout_ms: Some(200), max_output_bytes: Some(10), ..BudgetParams::default() };
        let budget = budget_within(&ceiling, Some(&lower)).unwrap();
        assert_eq!((budget.max_duration, budget.max_output_bytes), (Duration::from_millis(200), 10));
        assert_eq!(budget.max_os_calls, ceiling.max_os_calls);
        let higher = BudgetParams { timeout_ms: Some(60_000), ..BudgetParams::default() };
        let error = budget_within(&ceiling, Some(&higher)).unwrap_err();
        assert!(error.contains("timeout_ms 60000") && error.contains("--timeout"), "{error}");
        let zero = BudgetParams { max_os_calls: Some(0), ..BudgetParams::default() };
        assert!(budget_within(&ceiling, Some(&zero)).is_err());
        let memory = BudgetParams { max_memory_bytes: Some(u64::MAX), ..BudgetParams::default() };
        assert!(budget_within(&ceiling, Some(&memory)).unwrap_err().contains("--max-memory"));
        // A limit no flag raises names none (sec50: it named `vsh serve (no flag)`).
        let read = BudgetParams { max_read_bytes: Some(u64::MAX), ..BudgetParams::default() };
        let error = budget_within(&ceiling, Some(&read)).unwrap_err();
        assert!(error.contains("no flag raises it") && !error.contains("vsh serve"), "{error}");
    }
}
