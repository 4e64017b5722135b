//! `vsh serve`: an MCP server on stdio (the official Rust SDK, `rmcp`) that
//! gives an agent the transactional workflow except approving its own work.
//!
//! Tools: `vsh_run`, `vsh_show`, `vsh_pending`, `vsh_commit`, `vsh_discard`.
//! There is no approve tool: an operator approves with `vsh approve` (pending
//! work is durable, so it works across processes), and `vsh_commit` of work
//! awaiting approval says which command the operator runs. Every result is a
//! tool result: structured content (the same `vsh.*/1` documents as the
//! command line's `--json`) and a short text an LLM reads well; a failure is
//! `isError` with a `vsh.error/1` document, never a crashed server. The
//! runtime's calls block, so each runs on tokio's blocking pool.

use std::fmt::Write as _;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt as _, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use vsh::document::{ErrorDocument, ErrorKind, PendingDocument, ReceiptDocument, RecordDocument, ShowDocument};
use vsh::{RunMode, RunRequest, Runtime, TransactionState};

/// The guest guide, which the tools' descriptions point an agent to.
const GUIDE: &str = include_str!("../../../docs/guest.md");

/// What `vsh_run` takes.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RunParams {
    /// The program: Monty, a Python subset (see the server's instructions for what works).
    code: String,
    /// `monty` (the default).
    language: Option<String>,
    /// `preview` (the default: nothing is written; commit it later with
    /// `vsh_commit`) or `auto` (commit at once if the policy auto-approves).
    mode: Option<String>,
    /// What the program is for, recorded with the transaction.
    intent: Option<String>,
    /// `compact` (the default) or `full` (every changed path with its hunks).
    detail: Option<String>,
}

/// A transaction, by id or by a unique prefix of at least 6 hex digits.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct TransactionParams {
    /// The transaction id, or a unique prefix of at least 6 hex digits.
    transaction: String,
}

/// `vsh_pending` takes nothing.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoParams {}

/// The server: one runtime on one workspace.
#[derive(Clone)]
pub(crate) struct VshServer {
    runtime: Arc<Runtime>,
    tool_router: ToolRouter<Self>,
}

/// A tool's result: `document` as structured content, `summary` as text.
fn success(document: &impl serde::Serialize, summary: String) -> CallToolResult {
    let value = serde_json::to_value(document).unwrap_or_default();
    let mut result = CallToolResult::structured(value);
    result.content = vec![ContentBlock::text(summary)];
    result
}

/// A tool's failure, as `isError` with a `vsh.error/1` document.
fn failure(document: &ErrorDocument) -> CallToolResult {
    let summary = match &document.hint {
        Some(hint) => format!("error ({:?}): {}\nnext: {hint}", document.kind, document.message),
        None => format!("error ({:?}): {}", document.kind, document.message),
    };
    let value = serde_json::to_value(document).unwrap_or_default();
    let mut result = CallToolResult::structured_error(value);
    result.content = vec![ContentBlock::text(summary)];
    result
}

/// A request the server refuses before vsh acts on it.
fn refused(message: impl Into<String>) -> CallToolResult {
    let error = std::io::Error::new(std::io::ErrorKind::InvalidInput, message.into());
    failure(&ErrorDocument::other(ErrorKind::Request, &error))
}

/// A receipt in a few lines: state, decision, paths, output, value, id.
fn receipt_summary(receipt: &vsh::Receipt) -> String {
    let document = ReceiptDocument::from(receipt);
    let mut text = format!(
        "transaction {} is {}; {} changed path{}",
        receipt.transaction.short(),
        receipt.state.name(),
        receipt.changed_paths,
        if receipt.changed_paths == 1 { "" } else { "s" }
    );
    match &receipt.decision {
        vsh::RuntimeDecision::Denied(manifest) => {
            let _ = write!(text, "\ndenied ({}): {}", manifest.reason.name(), manifest.remedy);
        }
        vsh::RuntimeDecision::PendingApproval(manifest) => {
            let flags: Vec<&str> = manifest.flags.iter().map(|flag| flag.name()).collect();
            let _ = write!(
                text,
                "\nawaiting an operator's approval (risk: {}); they run `vsh approve {}`",
                flags.join(", "),
                receipt.transaction.short()
            );
        }
        vsh::RuntimeDecision::AutoApproved if receipt.state == TransactionState::AutoApproved => {
            let _ = write!(text, "\nauto-approved: vsh_commit {} applies it", receipt.transaction.short());
        }
        vsh::RuntimeDecision::AutoApproved => {}
    }
    if !document.stdout.is_empty() {
        let _ = write!(text, "\nstdout:\n{}", document.stdout);
    }
    if !document.value.is_null() {
        let _ = write!(text, "\nvalue: {}", document.value);
    }
    text
}

impl VshServer {
    /// The server for `runtime`.
    pub(crate) fn new(runtime: Runtime) -> Self {
        Self { runtime: Arc::new(runtime), tool_router: Self::tool_router() }
    }

    /// Run `work` with the runtime on the blocking pool.
    async fn blocking(&self, work: impl FnOnce(&Runtime) -> CallToolResult + Send + 'static) -> CallToolResult {
        let runtime = Arc::clone(&self.runtime);
        match tokio::task::spawn_blocking(move || work(&runtime)).await {
            Ok(result) => result,
            Err(error) => failure(&ErrorDocument::other(ErrorKind::Other, &error)),
        }
    }
}

#[tool_router]
impl VshServer {
    /// Run a program against a virtual image of the workspace.
    #[tool(description = "Run a Monty program (a Python subset) against a virtual image of the workspace \
        (the workspace is /workspace, relative paths resolve there). mode=preview (default) writes nothing \
        and returns a receipt: the policy's decision (auto-approved, pending an operator's approval, or \
        denied, with the rule and remedy), every changed path, stdout and the last expression's value; \
        mode=auto also commits work the policy auto-approves. The guest guide is in the server's \
        instructions.")]
    async fn vsh_run(&self, Parameters(params): Parameters<RunParams>) -> CallToolResult {
        let mode = match params.mode.as_deref() {
            None | Some("preview") => RunMode::Preview,
            Some("auto") => RunMode::Auto,
            Some(other) => return refused(format!("mode {other:?}: give preview or auto")),
        };
        let detail = match params.detail.as_deref() {
            None | Some("compact") => vsh::ReceiptDetail::Compact,
            Some("full") => vsh::ReceiptDetail::Full,
            Some(other) => return refused(format!("detail {other:?}: give compact or full")),
        };
        let language = match params.language.as_deref() {
            None | Some("monty") => vsh::Language::Monty,
            Some("bash") => vsh::Language::Bash,
            Some(other) => return refused(format!("language {other:?}: give monty")),
        };
        self.blocking(move |runtime| {
            let mut request = RunRequest::new(&params.code).with_mode(mode).with_detail(detail).with_language(language);
            if let Some(intent) = &params.intent {
                request = request.with_intent(intent);
            }
            match runtime.run(&request) {
                Ok(receipt) => success(&ReceiptDocument::from(&receipt), receipt_summary(&receipt)),
                Err(error) => failure(&ErrorDocument::new(&error, &runtime.remedies(&error))),
            }
        })
        .await
    }

    /// A stored transaction's review.
    #[tool(description = "Show a transaction's review: its receipt with every changed path's text hunks, \
        its state history, and its program. The transaction is its id or a unique prefix of 6+ hex digits.")]
    async fn vsh_show(&self, Parameters(params): Parameters<TransactionParams>) -> CallToolResult {
        self.blocking(move |runtime| match show(runtime, &params.transaction) {
            Ok((document, summary)) => success(&document, summary),
            Err(error) => failure(&ErrorDocument::new(&error, &[])),
        })
        .await
    }

    /// Work waiting for a decision or a commit.
    #[tool(description = "List the transactions waiting for an operator's approval or for a commit.")]
    async fn vsh_pending(&self, Parameters(_): Parameters<NoParams>) -> CallToolResult {
        self.blocking(move |runtime| match runtime.pending() {
            Ok(records) => {
                let rows: Vec<_> = records
                    .iter()
                    .map(|record| {
                        let receipt = runtime.show(record.id).ok().flatten();
                        let intent = runtime.stored_program(record.id).ok().flatten().map(|p| p.intent);
                        vsh::document::TransactionDocument::new(
                            record,
                            receipt.as_ref(),
                            intent.as_deref().unwrap_or(""),
                        )
                    })
                    .collect();
                let summary = if rows.is_empty() {
                    "nothing is waiting".to_owned()
                } else {
                    rows.iter()
                        .map(|row| format!("{} {} {}", &row.transaction[..12], row.state, row.intent))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                success(&PendingDocument::new(rows), summary)
            }
            Err(error) => failure(&ErrorDocument::new(&error, &[])),
        })
        .await
    }

    /// Commit auto-approved or operator-approved work.
    #[tool(description = "Commit a transaction that the policy auto-approved or an operator approved: it is \
        revalidated against the live workspace first (work someone else's edit made stale is refused and \
        names the conflicting paths). Work awaiting approval is not committed: the result names the command \
        the operator runs.")]
    async fn vsh_commit(&self, Parameters(params): Parameters<TransactionParams>) -> CallToolResult {
        self.blocking(move |runtime| {
            let id = match runtime.resolve(&params.transaction) {
                Ok(id) => id,
                Err(error) => return failure(&ErrorDocument::new(&error, &[])),
            };
            match runtime.commit(id, crate::now_ms()) {
                Ok(receipt) => success(&ReceiptDocument::from(&receipt), receipt_summary(&receipt)),
                Err(error) => {
                    let mut document = ErrorDocument::new(&error, &[]);
                    match &error {
                        vsh::VshError::NotCommittable { state: TransactionState::PendingApproval, .. } => {
                            document.hint =
                                Some(format!("awaiting approval: the operator runs `vsh approve {}`", id.short()));
                        }
                        vsh::VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }) => {
                            document.hint =
                                Some("the workspace changed: run the program again with vsh_run".to_owned());
                        }
                        _ => {}
                    }
                    failure(&document)
                }
            }
        })
        .await
    }

    /// Drop work that should not be committed.
    #[tool(description = "Discard a transaction: a preview or pending work becomes rejected and can never \
        be committed.")]
    async fn vsh_discard(&self, Parameters(params): Parameters<TransactionParams>) -> CallToolResult {
        self.blocking(move |runtime| {
            let outcome = runtime.resolve(&params.transaction).and_then(|id| runtime.reject(id, crate::now_ms()));
            match outcome {
                Ok(record) => {
                    let document = vsh::document::TransactionDocument::new(&record, None, "");
                    let summary = format!("transaction {} is {}", record.id.short(), record.state.name());
                    success(&RecordDocument::new(document), summary)
                }
                Err(error) => failure(&ErrorDocument::new(&error, &[])),
            }
        })
        .await
    }
}

/// The review of the transaction `name` names.
fn show(runtime: &Runtime, name: &str) -> Result<(ShowDocument, String), vsh::VshError> {
    let id = runtime.resolve(name)?;
    let mut receipt = runtime.show(id)?.ok_or(vsh::VshError::UnknownTransaction(id))?;
    if receipt.review.is_empty() {
        receipt.review = runtime.review(id)?;
    }
    let record = runtime.transaction(id)?;
    let stored = runtime.stored_program(id)?;
    let intent = stored.as_ref().map_or("", |stored| stored.intent.as_str()).to_owned();
    let document = ShowDocument::new(
        &receipt,
        record.as_ref().map(|record| vsh::document::TransactionDocument::new(record, Some(&receipt), &intent)),
        &runtime.history(id)?,
        runtime.run_policy(id)?.as_ref(),
        stored.map(|stored| stored.code),
    );
    let mut summary = receipt_summary(&receipt);
    for review in &receipt.review {
        if let Ok(hunks) = &review.hunks {
            summary.push('\n');
            summary.push_str(hunks);
        }
    }
    Ok((document, summary))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for VshServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::from_build_env();
        "vsh".clone_into(&mut implementation.name);
        vsh::VERSION.clone_into(&mut implementation.version);
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(format!(
                "vsh runs your programs against a virtual image of the workspace and commits their changes \
                 exactly once, under the workspace's policy. Preview with vsh_run, read the receipt, commit \
                 with vsh_commit. You cannot approve your own work: an operator does.\n\n{GUIDE}"
            ))
    }
}

/// `vsh serve`: serve MCP on stdin and stdout until the client closes them.
pub(crate) fn serve(workspace: &std::path::Path) -> Result<u8, Box<dyn std::error::Error>> {
    let server = VshServer::new(crate::open(crate::runtime_config(workspace)?)?);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    tokio.block_on(async move {
        let service = server.serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    Ok(crate::EXIT_OK)
}
