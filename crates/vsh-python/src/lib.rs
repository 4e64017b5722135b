//! `vsh._vsh`, the extension module under the Python package `vsh`
//! (`python/vsh`): a thin binding over the `vsh` facade with no engine of its
//! own. A `Runtime` runs programs (Monty or Bash) against a virtual image of
//! a workspace and commits them exactly once; receipts and errors carry the
//! same documents (`vsh.receipt/1`, `vsh.error/1`) as the command line's
//! `--json`. Every call into the runtime releases the GIL, and a Rust panic
//! is `vsh.InternalError`, never an abort of the interpreter.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use vsh::document::{ErrorDocument, ReceiptDocument, RecordDocument, TransactionDocument};
use vsh::{MontyObject, RunMode, RunRequest, TransactionState, VshError as RustError};

mod hook;
#[cfg(feature = "test-hooks")]
mod test_hooks;
mod value;

use hook::{RequestEvent, decision_of, hook_record};
use value::value_to_py;

create_exception!(vsh, VshError, PyException, "Every error vsh raises; `.document` is its vsh.error/1 document.");
create_exception!(
    vsh,
    ExecutionError,
    VshError,
    "The program failed: an uncaught exception, a budget, a failed script."
);
create_exception!(vsh, PolicyDenied, VshError, "The policy refused the program accesses; `.denied` lists them.");
create_exception!(vsh, StaleError, VshError, "The workspace changed under the commit; `.paths` are the conflicts.");
create_exception!(vsh, ApprovalError, VshError, "An approval is missing, expired, or not for this work.");
create_exception!(vsh, StoreError, VshError, "vsh's stored records or contents failed.");
create_exception!(vsh, RecoveryError, VshError, "An interrupted commit needs recovery first.");
create_exception!(vsh, ConfigurationError, VshError, "The runtime could not be opened as configured.");
create_exception!(vsh, CancelledError, VshError, "The request was cancelled before its commit entered.");
create_exception!(vsh, InternalError, VshError, "A defect in vsh (a panic at the boundary): please report it.");

/// The argument the `vsh` binary takes to serve as the confined worker.
const WORKER_ARGUMENT: &str = "__vsh-monty-worker";

/// `json` as Python objects.
fn from_json(py: Python<'_>, value: &serde_json::Value) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(value).map_err(|error| InternalError::new_err(error.to_string()))?;
    json_loads(py, &text)
}

/// JSON text as Python objects.
fn json_loads(py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// The Python exception for `error`, carrying its document.
fn py_error(py: Python<'_>, error: &RustError, remedies: &[String]) -> PyErr {
    let document = ErrorDocument::new(error, remedies);
    let value = serde_json::to_value(&document).unwrap_or_default();
    let mut message = document.message.clone();
    // A failed command's or script's message ends with the end of what it
    // said (its stderr, else its stdout: a test runner reports there), so
    // `str(error)` says why, as the CLI's and MCP's text do.
    let said = [&document.stderr, &document.stdout]
        .into_iter()
        .flatten()
        .map(|text| text.trim_end())
        .find(|text| !text.is_empty());
    if let Some(said) = said {
        let lines: Vec<&str> = said.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        message = format!("{message}\n{tail}");
    }
    // What makes the language available, in this module's words (ux78 L2:
    // the CLI and MCP name `--commands`; here it was left unsaid).
    if let RustError::LanguageUnavailable { language } = error {
        let opens = match language {
            vsh::Language::Bash => "vsh.Runtime(workspace, bash=True)",
            _ => "vsh.Runtime(workspace, commands=True) (it needs what `vsh doctor` checks: /dev/fuse, root)",
        };
        message = format!("{message}: open the runtime with {opens}");
    }
    let err = match error {
        RustError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }) => StaleError::new_err(message),
        RustError::Commit(vsh::lower::vsh_commit::CommitError::RecoveryPending { .. }) => {
            RecoveryError::new_err(message)
        }
        RustError::Cancelled => CancelledError::new_err(message),
        _ if !document.denied.is_empty() => PolicyDenied::new_err(message),
        other => match other.category() {
            vsh::ErrorCategory::Execution => ExecutionError::new_err(message),
            vsh::ErrorCategory::Approval => ApprovalError::new_err(message),
            vsh::ErrorCategory::Store => StoreError::new_err(message),
            vsh::ErrorCategory::Configuration => ConfigurationError::new_err(message),
            _ => VshError::new_err(message),
        },
    };
    if let Ok(document) = from_json(py, &value) {
        let instance = err.value(py);
        let bound = document.bind(py);
        let _ = instance.setattr("document", bound);
        for (attribute, key) in [("paths", "paths"), ("denied", "denied"), ("hint", "hint")] {
            if let Ok(item) = bound.get_item(key) {
                let _ = instance.setattr(attribute, item);
            }
        }
        // Nothing was stored: no transaction, no exception of its own.
        if instance.is_instance_of::<PolicyDenied>() {
            let _ = instance.setattr("transaction", py.None());
            let _ = instance.setattr("exception", py.None());
        }
    }
    err
}

/// A Monty program that raised after the policy refused it an access: its
/// work is stored as denied (`vsh log` has it), and in Python the run
/// raises, as the program did: `PolicyDenied`, carrying the receipt as its
/// `document`, its refusals as `denied` (each with its remedy), its
/// transaction, and the exception's text as `exception`.
fn raised_after_refusal(py: Python<'_>, receipt: &vsh::Receipt) -> Option<PyErr> {
    let exception = receipt.output.exception()?;
    let document = serde_json::to_value(ReceiptDocument::from(receipt)).unwrap_or_default();
    let last = exception.lines().last().unwrap_or_default();
    let err = PolicyDenied::new_err(format!(
        "policy denied transaction {}: the program raised {last}",
        receipt.transaction.short()
    ));
    if let Ok(bound) = from_json(py, &document) {
        let instance = err.value(py);
        let bound = bound.bind(py);
        let _ = instance.setattr("document", bound);
        if let Ok(denied) = bound.get_item("decision").and_then(|decision| decision.get_item("denied")) {
            let _ = instance.setattr("denied", denied);
        }
        let _ = instance.setattr("transaction", receipt.transaction.to_hex());
        let _ = instance.setattr("exception", exception);
    }
    Some(err)
}

/// Run `work` without the GIL; a panic inside it is `InternalError`.
fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
        .map_err(|_| InternalError::new_err("vsh panicked; the runtime may be unusable"))
}

/// A document (`vsh.receipt/1`, `vsh.request-event/1`) held as JSON text
/// and made into Python objects on first use: most callers read only a
/// receipt's state and id.
struct Document {
    json: String,
    objects: PyOnceLock<Py<PyAny>>,
}

impl Document {
    fn new(document: &impl serde::Serialize) -> PyResult<Self> {
        let json = serde_json::to_string(document).map_err(|error| InternalError::new_err(error.to_string()))?;
        Ok(Self { json, objects: PyOnceLock::new() })
    }

    /// One top-level field.
    fn field(&self, py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
        let objects = self.objects.get_or_try_init(py, || json_loads(py, &self.json))?;
        Ok(objects.bind(py).get_item(key)?.unbind())
    }

    /// The whole document, a new dict each call.
    fn to_dict(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        json_loads(py, &self.json)
    }
}

/// What a run or a commit did: the `vsh.receipt/1` document, and the
/// program's value as a Python object.
#[pyclass(frozen, module = "vsh")]
struct Receipt {
    document: Document,
    /// The program's value, converted on first use.
    monty: Option<MontyObject>,
    value: PyOnceLock<Py<PyAny>>,
    transaction: String,
    state: String,
    changed_paths: u64,
    hook: Option<Py<PyAny>>,
}

impl Receipt {
    fn new(_py: Python<'_>, receipt: &vsh::Receipt) -> PyResult<Self> {
        let document = ReceiptDocument::from(receipt);
        Ok(Self {
            document: Document::new(&document)?,
            monty: receipt.output.monty_value().cloned(),
            value: PyOnceLock::new(),
            transaction: document.transaction,
            state: document.state,
            changed_paths: document.changed_paths,
            hook: None,
        })
    }

    /// This receipt, noting what the hook decided on the way.
    fn with_hook(mut self, py: Python<'_>, record: &vsh::HookDecisionRecord) -> PyResult<Self> {
        self.hook = Some(hook_record(py, record)?);
        Ok(self)
    }

    fn field(&self, py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
        self.document.field(py, key)
    }
}

#[pymethods]
impl Receipt {
    /// The transaction id, 64 hex digits.
    #[getter]
    fn transaction(&self) -> &str {
        &self.transaction
    }

    /// `auto-approved`, `pending-approval`, `denied`, `committed`, ...
    #[getter]
    fn state(&self) -> &str {
        &self.state
    }

    /// How many paths the diff changes.
    #[getter]
    fn changed_paths(&self) -> u64 {
        self.changed_paths
    }

    /// The policy's decision: `{"kind": "auto-approved" | "pending-approval" | "denied", ...}`.
    #[getter]
    fn decision(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "decision")
    }

    /// The program's standard output, as text.
    #[getter]
    fn stdout(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "stdout")
    }

    /// A Bash program's standard error, as text (empty for Monty).
    #[getter]
    fn stderr(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "stderr")
    }

    /// The value of a Monty program's last expression, as a Python object.
    #[getter]
    fn value(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let value = self.value.get_or_try_init(py, || match &self.monty {
            Some(value) => value_to_py(py, value),
            None => Ok(py.None()),
        })?;
        Ok(value.clone_ref(py))
    }

    /// The changed paths (with `detail="changes"` or `"full"`), each with its before and after state.
    #[getter]
    fn changes(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "changes")
    }

    /// What the commit hook decided (`{"decision", "reason", "event_id"}`),
    /// or `None` when no hook was asked.
    #[getter]
    fn hook(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.hook.as_ref().map(|hook| hook.clone_ref(py))
    }

    /// The receipt as the `vsh.receipt/1` document (a new dict each call).
    fn to_dict(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.document.to_dict(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "Receipt(transaction='{}', state='{}', changed_paths={})",
            &self.transaction[..12.min(self.transaction.len())],
            self.state,
            self.changed_paths
        )
    }
}

/// The confined worker to run programs in: `worker`, else `$VSH_WORKER`,
/// else the `vsh` binary bundled in the package (`vsh/_bin/vsh`).
fn worker_path(py: Python<'_>, worker: Option<PathBuf>) -> PyResult<PathBuf> {
    if let Some(path) = worker.or_else(|| std::env::var_os("VSH_WORKER").map(PathBuf::from)) {
        return Ok(path);
    }
    let package: PathBuf = py.import("vsh")?.getattr("__file__")?.extract()?;
    Ok(package.with_file_name("_bin").join("vsh"))
}

/// A request's cancellation handle, shared with the thread that runs it:
/// `cancel()` from any thread ends the run (the worker is killed) unless its
/// commit has entered; then the commit's own outcome stands.
#[pyclass(frozen, module = "vsh")]
struct Cancellation {
    inner: vsh::ExecutionCancellation,
}

#[pymethods]
impl Cancellation {
    #[new]
    fn new() -> Self {
        Self { inner: vsh::ExecutionCancellation::new() }
    }

    /// Cancel; `False` once the commit has entered (its outcome stands).
    fn cancel(&self) -> bool {
        self.inner.cancel()
    }

    /// Whether the request was cancelled.
    #[getter]
    fn cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }
}

/// A run's own limits (`budget=`): `base` (the request's language's default
/// budget) with what the dict gives.
fn budget_of(base: vsh::ExecutionBudget, budget: Option<&Bound<'_, PyDict>>) -> PyResult<vsh::ExecutionBudget> {
    let mut limits = base;
    let Some(budget) = budget else { return Ok(limits) };
    for (key, value) in budget {
        let key: String = key.extract()?;
        match key.as_str() {
            "timeout" => {
                let seconds: f64 = value.extract()?;
                if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
                    return Err(pyo3::exceptions::PyValueError::new_err(
                        "budget timeout: give seconds, more than 0, at most a day",
                    ));
                }
                limits.max_duration = std::time::Duration::from_secs_f64(seconds);
                limits.max_request_duration =
                    limits.max_request_duration.max(limits.max_duration + std::time::Duration::from_secs(1));
            }
            "max_os_calls" => limits.max_os_calls = value.extract()?,
            "max_output_bytes" => limits.max_output_bytes = value.extract()?,
            "max_memory_bytes" => limits.max_memory_bytes = value.extract()?,
            "max_read_bytes" => limits.max_read_bytes = value.extract()?,
            "max_write_bytes" => limits.max_write_bytes = value.extract()?,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "budget {other:?}: give timeout, max_os_calls, max_output_bytes, max_memory_bytes, \
                     max_read_bytes or max_write_bytes"
                )));
            }
        }
    }
    Ok(limits)
}

/// A vsh runtime on one workspace.
#[pyclass(frozen, module = "vsh")]
struct Runtime {
    inner: Arc<vsh::Runtime>,
    /// The commit hook's callable, when the runtime was opened with one.
    hook: Option<Py<PyAny>>,
}

/// `hook_scope`, parsed.
fn parse_hook_scope(scope: &str) -> PyResult<vsh::HookScope> {
    match scope {
        "review-required" => Ok(vsh::HookScope::ReviewRequired),
        "all-requests" => Ok(vsh::HookScope::AllRequests),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "hook_scope {other:?}: give review-required or all-requests"
        ))),
    }
}

/// How a commit through the hook ended.
enum Hooked {
    /// Committed (with the hook's record when it was asked).
    Committed(Box<vsh::Receipt>, Option<vsh::HookDecisionRecord>),
    /// No hook applied and the work is not auto-approved: nothing to commit.
    Ready(TransactionState),
    /// The hook was asked and the work did not commit: its state now.
    Settled(TransactionState, vsh::HookDecisionRecord),
}

/// `preview` or `run`'s request, parsed.
fn request<'a>(
    code: &'a str,
    language: &str,
    intent: Option<&'a str>,
    detail: &str,
    mode: RunMode,
) -> PyResult<RunRequest<'a>> {
    let language = match language {
        "monty" => vsh::Language::Monty,
        "bash" => vsh::Language::Bash,
        "command" => vsh::Language::Command,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "language {other:?}: give monty, bash or command"
            )));
        }
    };
    let detail = match detail {
        "compact" => vsh::ReceiptDetail::Compact,
        "full" => vsh::ReceiptDetail::Full,
        "changes" => vsh::ReceiptDetail::Changes,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "detail {other:?}: give compact, changes or full"
            )));
        }
    };
    let mut request = RunRequest::new(code).with_language(language).with_detail(detail).with_mode(mode);
    if let Some(intent) = intent {
        request = request.with_intent(intent);
    }
    Ok(request)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

impl Runtime {
    fn resolve(&self, py: Python<'_>, transaction: &str) -> PyResult<vsh::TransactionId> {
        self.inner.resolve(transaction).map_err(|error| py_error(py, &error, &[]))
    }

    fn run_request(
        &self,
        py: Python<'_>,
        request: &RunRequest<'_>,
        cancel: Option<&Cancellation>,
    ) -> PyResult<Receipt> {
        let runtime = Arc::clone(&self.inner);
        let handle = cancel.map_or_else(vsh::ExecutionCancellation::new, |cancel| cancel.inner.clone());
        let Some(hook) = &self.hook else {
            let outcome = detached(py, || runtime.run_cancellable(request, &handle))?;
            return match outcome {
                Ok(receipt) => match raised_after_refusal(py, &receipt) {
                    Some(raised) => Err(raised),
                    None => Receipt::new(py, &receipt),
                },
                Err(error) => Err(py_error(py, &error, &self.inner.remedies(&error))),
            };
        };
        // With a hook, the run only previews; the commit goes through the hook.
        let preview = request.clone().with_mode(RunMode::Preview);
        let mut receipt = match detached(py, || runtime.run_cancellable(&preview, &handle))? {
            Ok(receipt) => receipt,
            Err(error) => return Err(py_error(py, &error, &self.inner.remedies(&error))),
        };
        if let Some(raised) = raised_after_refusal(py, &receipt) {
            return Err(raised);
        }
        if request.mode == RunMode::Preview || receipt.state == TransactionState::Denied {
            return Receipt::new(py, &receipt);
        }
        match self.commit_hooked(py, hook, receipt.transaction, &handle, false)? {
            Hooked::Committed(committed, record) => {
                receipt.state = committed.state;
                receipt.commit = committed.commit;
                receipt.timings.commit = committed.timings.commit;
                let made = Receipt::new(py, &receipt)?;
                match record {
                    Some(record) => made.with_hook(py, &record),
                    None => Ok(made),
                }
            }
            Hooked::Ready(state) => {
                receipt.state = state;
                Receipt::new(py, &receipt)
            }
            Hooked::Settled(state, record) => {
                receipt.state = state;
                Receipt::new(py, &receipt)?.with_hook(py, &record)
            }
        }
    }

    /// Commit `transaction` through the hook: ask it if it applies, then
    /// resolve. `commit_ready` says whether work no hook applies to commits
    /// whatever its state (`Runtime.commit`) or only when auto-approved (a
    /// run in auto mode).
    fn commit_hooked(
        &self,
        py: Python<'_>,
        hook: &Py<PyAny>,
        transaction: vsh::TransactionId,
        cancel: &vsh::ExecutionCancellation,
        commit_ready: bool,
    ) -> PyResult<Hooked> {
        let runtime = Arc::clone(&self.inner);
        let fail = |error: RustError| py_error(py, &error, &[]);
        match detached(py, || runtime.prepare_commit(transaction))?.map_err(fail)? {
            vsh::CommitPreparation::Ready { state, .. } => {
                if !commit_ready && state != TransactionState::AutoApproved {
                    return Ok(Hooked::Ready(state));
                }
                let receipt =
                    detached(py, || runtime.commit_cancellable(transaction, now_ms(), cancel))?.map_err(fail)?;
                Ok(Hooked::Committed(Box::new(receipt), None))
            }
            vsh::CommitPreparation::Review(event) => {
                let asked = RequestEvent::new(py, &event)
                    .and_then(|request| hook.bind(py).call1((request,)))
                    .and_then(|answer| decision_of(&answer));
                let decision = match asked {
                    Ok(decision) => decision,
                    Err(raised) => {
                        // Nothing commits; auto-approved work falls back to review.
                        detached(py, || runtime.fail_hook(&event, now_ms()))?.map_err(fail)?;
                        return Err(raised);
                    }
                };
                let resolution =
                    detached(py, || runtime.resolve_commit_cancellable(&event, decision, now_ms(), cancel))?
                        .map_err(fail)?;
                Ok(match resolution.receipt {
                    Some(receipt) => Hooked::Committed(Box::new(receipt), Some(resolution.hook)),
                    None => Hooked::Settled(resolution.state, resolution.hook),
                })
            }
        }
    }
}

#[pymethods]
impl Runtime {
    /// Open a runtime on `workspace`.
    #[new]
    #[pyo3(signature = (
        workspace, *, data_dir=None, profile=None, policy_file=None, worker=None, in_process=false, bash=true,
        hook=None, hook_scope="review-required", hook_content_bytes=0, hook_label="python",
        commands=false, command_env=None, command_tools=None, network=None, ports=None
    ))]
    #[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools, reason = "Python keyword arguments")]
    fn new(
        py: Python<'_>,
        workspace: PathBuf,
        data_dir: Option<PathBuf>,
        profile: Option<&str>,
        policy_file: Option<PathBuf>,
        worker: Option<PathBuf>,
        in_process: bool,
        bash: bool,
        hook: Option<Py<PyAny>>,
        hook_scope: &str,
        hook_content_bytes: u64,
        hook_label: &str,
        commands: bool,
        command_env: Option<std::collections::BTreeMap<String, String>>,
        command_tools: Option<Vec<PathBuf>>,
        network: Option<&str>,
        ports: Option<Vec<u16>>,
    ) -> PyResult<Self> {
        let mut config = vsh::RuntimeConfig::new(workspace).with_result_compatibility(vsh::ResultCompatibility::Python);
        if commands {
            let network = match network {
                None | Some("none") => vsh::lower::vsh_sandbox::NetworkAccess::None,
                Some("loopback") => vsh::lower::vsh_sandbox::NetworkAccess::Loopback,
                Some("all") => vsh::lower::vsh_sandbox::NetworkAccess::All,
                Some(other) => {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "network {other:?}: give none, loopback or all"
                    )));
                }
            };
            config = config
                .with_commands()
                .with_command_env(command_env.unwrap_or_default())
                .with_command_tools(command_tools.unwrap_or_default())
                .with_command_network(network)
                .with_command_ports(ports.unwrap_or_default());
        } else if command_env.is_some() || command_tools.is_some() || network.is_some() || ports.is_some() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "command_env, command_tools, network and ports configure real commands: give commands=True too",
            ));
        }
        if let Some(dir) = data_dir {
            config = config.with_data_directory(dir);
        }
        if let Some(profile) = profile {
            let profile: vsh::PolicyProfile = profile.parse().map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "profile {profile:?}: give balanced, strict or paranoid"
                ))
            })?;
            config = config.with_policy_profile(profile);
        }
        if let Some(file) = policy_file {
            config = config.with_policy_file(file);
        }
        config = if in_process {
            config.with_in_process_execution()
        } else {
            config.with_worker(vsh::WorkerConfig::new(worker_path(py, worker)?).with_args([WORKER_ARGUMENT]))
        };
        if bash {
            config = config.with_bash(vsh::BashConfig::new());
        }
        if let Some(callable) = &hook {
            if !callable.bind(py).is_callable() {
                return Err(pyo3::exceptions::PyTypeError::new_err("hook: give a callable taking a vsh.RequestEvent"));
            }
            config = config.with_commit_hook(
                vsh::HookConfig::new(hook_label)
                    .with_scope(parse_hook_scope(hook_scope)?)
                    .with_max_content_bytes(hook_content_bytes),
            );
        }
        match detached(py, || vsh::Runtime::open(config))? {
            Ok(runtime) => Ok(Self { inner: Arc::new(runtime), hook }),
            Err(error) => Err(py_error(py, &error, &[])),
        }
    }

    /// Run `code` against a virtual image of the workspace and decide; write nothing.
    #[pyo3(signature = (code, *, language="monty", intent=None, detail="changes", budget=None, cancel=None))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn preview(
        &self,
        py: Python<'_>,
        code: &str,
        language: &str,
        intent: Option<&str>,
        detail: &str,
        budget: Option<&Bound<'_, PyDict>>,
        cancel: Option<&Cancellation>,
    ) -> PyResult<Receipt> {
        let mut request = request(code, language, intent, detail, RunMode::Preview)?;
        request.budget = budget_of(request.budget.clone(), budget)?;
        self.run_request(py, &request, cancel)
    }

    /// Run `code` and, in mode `auto` (the default), commit it if the policy auto-approves.
    #[pyo3(signature = (code, *, language="monty", intent=None, detail="changes", mode="auto", budget=None, cancel=None))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn run(
        &self,
        py: Python<'_>,
        code: &str,
        language: &str,
        intent: Option<&str>,
        detail: &str,
        mode: &str,
        budget: Option<&Bound<'_, PyDict>>,
        cancel: Option<&Cancellation>,
    ) -> PyResult<Receipt> {
        let mode = match mode {
            "auto" => RunMode::Auto,
            "preview" => RunMode::Preview,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!("mode {other:?}: give auto or preview")));
            }
        };
        let mut request = request(code, language, intent, detail, mode)?;
        request.budget = budget_of(request.budget.clone(), budget)?;
        self.run_request(py, &request, cancel)
    }

    /// Commit an auto-approved or approved transaction (an id or a unique
    /// prefix). With a hook in scope, the hook decides first; a decision that
    /// does not commit raises `ApprovalError` with `.hook` and `.state`.
    fn commit(&self, py: Python<'_>, transaction: &str) -> PyResult<Receipt> {
        let id = self.resolve(py, transaction)?;
        let runtime = Arc::clone(&self.inner);
        let Some(hook) = &self.hook else {
            return match detached(py, || runtime.commit(id, now_ms()))? {
                Ok(receipt) => Receipt::new(py, &receipt),
                // Committing twice (a retry after a lost answer) writes
                // nothing again and says what was committed, as the CLI
                // and MCP do.
                Err(vsh::VshError::NotCommittable { state: TransactionState::Committed, .. }) => {
                    match detached(py, || runtime.show(id))? {
                        Ok(Some(receipt)) => Receipt::new(py, &receipt),
                        Ok(None) => Err(py_error(
                            py,
                            &vsh::VshError::NotCommittable { transaction: id, state: TransactionState::Committed },
                            &[],
                        )),
                        Err(error) => Err(py_error(py, &error, &[])),
                    }
                }
                Err(error) => Err(py_error(py, &error, &[])),
            };
        };
        match self.commit_hooked(py, hook, id, &vsh::ExecutionCancellation::new(), true)? {
            Hooked::Committed(receipt, Some(record)) => Receipt::new(py, &receipt)?.with_hook(py, &record),
            Hooked::Committed(receipt, None) => Receipt::new(py, &receipt),
            Hooked::Ready(_) => Err(InternalError::new_err("a ready commit neither committed nor failed")),
            Hooked::Settled(state, record) => {
                let record = hook_record(py, &record)?;
                let decision: String = record.bind(py).get_item("decision")?.extract()?;
                let error = ApprovalError::new_err(format!(
                    "the hook decided {decision}: the transaction is {} and was not committed",
                    state.name()
                ));
                let instance = error.value(py);
                instance.setattr("hook", record)?;
                instance.setattr("state", state.name())?;
                Err(error)
            }
        }
    }

    /// Approve pending work for `principal`, valid for `ttl` seconds; the record, as a dict.
    #[pyo3(signature = (transaction, principal, *, ttl=900.0))]
    fn approve(&self, py: Python<'_>, transaction: &str, principal: &str, ttl: f64) -> PyResult<Py<PyAny>> {
        if !(ttl.is_finite() && ttl > 0.0 && ttl <= 30.0 * 86_400.0) {
            return Err(pyo3::exceptions::PyValueError::new_err("ttl: give seconds, more than 0 and at most 30 days"));
        }
        let id = self.resolve(py, transaction)?;
        let principal = vsh::PrincipalId::digest(principal.as_bytes());
        let now = now_ms();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "bounded above")]
        let expires = now.saturating_add((ttl * 1000.0) as u64);
        let runtime = Arc::clone(&self.inner);
        match detached(py, || runtime.approve(id, principal, now, expires))? {
            Ok(record) => record_dict(py, &record),
            Err(error) => Err(py_error(py, &error, &[])),
        }
    }

    /// Let an auto-approved preview of this runtime go without committing it
    /// (it can never be committed afterwards); `False` when this runtime does
    /// not hold it. Previews a runtime holds are bounded (64), so a caller
    /// that previews without committing discards what it will not commit.
    fn discard(&self, py: Python<'_>, transaction: &str) -> PyResult<bool> {
        let id = self.resolve(py, transaction)?;
        let runtime = Arc::clone(&self.inner);
        detached(py, || runtime.discard_preview(id))?.map_err(|error| py_error(py, &error, &[]))
    }

    /// Reject a transaction: it can never be committed, nor can any other
    /// run of the same work (`vsh rerun`) that still could: those are
    /// rejected with it, listed under `also_rejected`. The record, as a
    /// dict. Rejecting it again changes nothing else and returns the record.
    fn reject(&self, py: Python<'_>, transaction: &str) -> PyResult<Py<PyAny>> {
        let id = self.resolve(py, transaction)?;
        let runtime = Arc::clone(&self.inner);
        let rejected = detached(py, || {
            let record = match runtime.reject(id, now_ms()) {
                Ok(record) => record,
                Err(vsh::VshError::Store(vsh::lower::vsh_store::StoreError::WrongState {
                    state: TransactionState::Rejected,
                    ..
                })) => runtime.transaction(id)?.ok_or(vsh::VshError::UnknownTransaction(id))?,
                Err(error) => return Err(error),
            };
            let also = runtime.reject_other_runs(id, now_ms())?;
            Ok((record, also))
        })?;
        match rejected {
            Ok((record, also)) => {
                let document =
                    RecordDocument::new(TransactionDocument::new(&record, None, "")).with_also_rejected(&also);
                from_json(py, &serde_json::to_value(&document).unwrap_or_default())
            }
            Err(error) => Err(py_error(py, &error, &[])),
        }
    }

    /// The transactions waiting for an approval or a commit, as dicts.
    fn pending(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let runtime = Arc::clone(&self.inner);
        let records = match detached(py, || runtime.pending())? {
            Ok(records) => records,
            Err(error) => return Err(py_error(py, &error, &[])),
        };
        let rows: Vec<serde_json::Value> = records
            .iter()
            .map(|record| serde_json::to_value(TransactionDocument::new(record, None, "")).unwrap_or_default())
            .collect();
        from_json(py, &serde_json::Value::Array(rows))
    }

    /// A stored transaction's receipt, with its changed paths, or `None`
    /// when vsh keeps none; with `review=True` each changed text file's
    /// hunks too (`Receipt.to_dict()["review"]`), from verified bytes only,
    /// as `vsh show` gives them (128 KiB a file, 1 MiB in all; a file past
    /// either has none, and says why).
    #[pyo3(signature = (transaction, *, review=false))]
    fn show(&self, py: Python<'_>, transaction: &str, review: bool) -> PyResult<Option<Receipt>> {
        let id = self.resolve(py, transaction)?;
        let runtime = Arc::clone(&self.inner);
        let shown = detached(py, || {
            let Some(mut receipt) = runtime.show(id)? else { return Ok(None) };
            if review && receipt.review.is_empty() {
                receipt.review = runtime.review(id)?;
            }
            Ok(Some(receipt))
        })?;
        match shown {
            Ok(Some(receipt)) => Ok(Some(Receipt::new(py, &receipt)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(py_error(py, &error, &[])),
        }
    }
}

/// A benchmark aid (`python/bench/tiny_preview.py`): `count` previews of the
/// Monty program `code` made from Rust on `runtime`, exactly as a Rust host
/// calls [`vsh::Runtime::preview`], each call's wall time in nanoseconds
/// (each preview is discarded after its call, untimed).
/// The bench compares them with the same previews made from Python.
#[pyfunction]
fn _time_rust_previews(py: Python<'_>, runtime: &Runtime, code: &str, count: usize) -> PyResult<Vec<u64>> {
    let inner = Arc::clone(&runtime.inner);
    let timed = detached(py, || {
        let request = RunRequest::new(code);
        let mut times = Vec::with_capacity(count);
        for _ in 0..count {
            let started = std::time::Instant::now();
            let receipt = inner.preview(&request)?;
            times.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
            inner.discard_preview(receipt.transaction)?;
        }
        Ok::<_, RustError>(times)
    })?;
    timed.map_err(|error| py_error(py, &error, &[]))
}

fn record_dict(py: Python<'_>, record: &vsh::TransactionRecord) -> PyResult<Py<PyAny>> {
    let document = RecordDocument::new(TransactionDocument::new(record, None, ""));
    from_json(py, &serde_json::to_value(&document).unwrap_or_default())
}

/// The module.
#[pymodule]
fn _vsh(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<Runtime>()?;
    module.add_class::<Receipt>()?;
    module.add_class::<Cancellation>()?;
    module.add_class::<RequestEvent>()?;
    module.add_function(wrap_pyfunction!(_time_rust_previews, module)?)?;
    #[cfg(feature = "test-hooks")]
    module.add_function(wrap_pyfunction!(test_hooks::_test_panic, module)?)?;
    module.add("VERSION", vsh::VERSION)?;
    module.add("VshError", py.get_type::<VshError>())?;
    module.add("ExecutionError", py.get_type::<ExecutionError>())?;
    module.add("PolicyDenied", py.get_type::<PolicyDenied>())?;
    module.add("StaleError", py.get_type::<StaleError>())?;
    module.add("ApprovalError", py.get_type::<ApprovalError>())?;
    module.add("StoreError", py.get_type::<StoreError>())?;
    module.add("RecoveryError", py.get_type::<RecoveryError>())?;
    module.add("ConfigurationError", py.get_type::<ConfigurationError>())?;
    module.add("CancelledError", py.get_type::<CancelledError>())?;
    module.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
