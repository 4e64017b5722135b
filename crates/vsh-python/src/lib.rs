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
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyList, PySet, PyTuple};
use vsh::document::{ErrorDocument, ReceiptDocument, RecordDocument, TransactionDocument};
use vsh::{MontyObject, RunMode, RunRequest, VshError as RustError};

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

/// `json` text as Python objects.
fn from_json(py: Python<'_>, value: &serde_json::Value) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(value).map_err(|error| InternalError::new_err(error.to_string()))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// The Python exception for `error`, carrying its document.
fn py_error(py: Python<'_>, error: &RustError, remedies: &[String]) -> PyErr {
    let document = ErrorDocument::new(error, remedies);
    let value = serde_json::to_value(&document).unwrap_or_default();
    let message = document.message.clone();
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
    }
    err
}

/// Run `work` without the GIL; a panic inside it is `InternalError`.
fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
        .map_err(|_| InternalError::new_err("vsh panicked; the runtime may be unusable"))
}

/// A Monty value as the Python object it stands for (`ResultCompatibility::Python`):
/// what has no Python counterpart here is its `repr` text.
fn value_to_py(py: Python<'_>, value: &MontyObject) -> PyResult<Py<PyAny>> {
    Ok(match value {
        MontyObject::None => py.None(),
        MontyObject::Ellipsis => py.Ellipsis(),
        MontyObject::Bool(flag) => flag.into_pyobject(py)?.to_owned().into_any().unbind(),
        MontyObject::Int(number) => number.into_pyobject(py)?.into_any().unbind(),
        MontyObject::BigInt(number) => py.import("builtins")?.getattr("int")?.call1((number.to_string(),))?.unbind(),
        MontyObject::Float(number) => number.into_pyobject(py)?.into_any().unbind(),
        MontyObject::String(text) => text.into_pyobject(py)?.into_any().unbind(),
        MontyObject::Bytes(bytes) => PyBytes::new(py, bytes).into_any().unbind(),
        MontyObject::Path(path) => py.import("pathlib")?.getattr("PurePosixPath")?.call1((path,))?.unbind(),
        MontyObject::List(items) => PyList::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::Tuple(items) => PyTuple::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::Set(items) => PySet::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::FrozenSet(items) => PyFrozenSet::new(py, values_to_py(py, items)?)?.into_any().unbind(),
        MontyObject::Dict(pairs) => {
            let dict = PyDict::new(py);
            for (key, item) in pairs {
                dict.set_item(value_to_py(py, key)?, value_to_py(py, item)?)?;
            }
            dict.into_any().unbind()
        }
        other => other.py_repr().into_pyobject(py)?.into_any().unbind(),
    })
}

/// Each of `values` as a Python object.
fn values_to_py(py: Python<'_>, values: &[MontyObject]) -> PyResult<Vec<Py<PyAny>>> {
    values.iter().map(|value| value_to_py(py, value)).collect()
}

/// What a run or a commit did: the `vsh.receipt/1` document, and the
/// program's value as a Python object.
#[pyclass(frozen, module = "vsh")]
struct Receipt {
    document: Py<PyAny>,
    value: Py<PyAny>,
    transaction: String,
    state: String,
    changed_paths: u64,
}

impl Receipt {
    fn new(py: Python<'_>, receipt: &vsh::Receipt) -> PyResult<Self> {
        let document = ReceiptDocument::from(receipt);
        let json = serde_json::to_value(&document).map_err(|error| InternalError::new_err(error.to_string()))?;
        let value = match receipt.output.monty_value() {
            Some(value) => value_to_py(py, value)?,
            None => py.None(),
        };
        Ok(Self {
            document: from_json(py, &json)?,
            value,
            transaction: document.transaction,
            state: document.state,
            changed_paths: document.changed_paths,
        })
    }

    fn field(&self, py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
        Ok(self.document.bind(py).get_item(key)?.unbind())
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
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.value.clone_ref(py)
    }

    /// The changed paths (with `detail="full"`), each with its before and after state.
    #[getter]
    fn changes(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "changes")
    }

    /// The receipt as the `vsh.receipt/1` document (a new dict each call).
    fn to_dict(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(py.import("copy")?.call_method1("deepcopy", (self.document.bind(py),))?.unbind())
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

/// A run's own limits (`budget=`): the defaults with what the dict gives.
fn budget_of(budget: Option<&Bound<'_, PyDict>>) -> PyResult<vsh::ExecutionBudget> {
    let mut limits = vsh::ExecutionBudget::default();
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
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("language {other:?}: give monty or bash")));
        }
    };
    let detail = match detail {
        "compact" => vsh::ReceiptDetail::Compact,
        "full" => vsh::ReceiptDetail::Full,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("detail {other:?}: give compact or full")));
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
        let outcome = detached(py, || runtime.run_cancellable(request, &handle))?;
        match outcome {
            Ok(receipt) => Receipt::new(py, &receipt),
            Err(error) => Err(py_error(py, &error, &self.inner.remedies(&error))),
        }
    }
}

#[pymethods]
impl Runtime {
    /// Open a runtime on `workspace`.
    #[new]
    #[pyo3(signature = (workspace, *, data_dir=None, profile=None, policy_file=None, worker=None, in_process=false, bash=true))]
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
    ) -> PyResult<Self> {
        let mut config = vsh::RuntimeConfig::new(workspace).with_result_compatibility(vsh::ResultCompatibility::Python);
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
        match detached(py, || vsh::Runtime::open(config))? {
            Ok(runtime) => Ok(Self { inner: Arc::new(runtime) }),
            Err(error) => Err(py_error(py, &error, &[])),
        }
    }

    /// Run `code` against a virtual image of the workspace and decide; write nothing.
    #[pyo3(signature = (code, *, language="monty", intent=None, detail="compact", budget=None, cancel=None))]
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
        let request = request(code, language, intent, detail, RunMode::Preview)?.with_budget(budget_of(budget)?);
        self.run_request(py, &request, cancel)
    }

    /// Run `code` and, in mode `auto` (the default), commit it if the policy auto-approves.
    #[pyo3(signature = (code, *, language="monty", intent=None, detail="compact", mode="auto", budget=None, cancel=None))]
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
        let request = request(code, language, intent, detail, mode)?.with_budget(budget_of(budget)?);
        self.run_request(py, &request, cancel)
    }

    /// Commit an auto-approved or approved transaction (an id or a unique prefix).
    fn commit(&self, py: Python<'_>, transaction: &str) -> PyResult<Receipt> {
        let id = self.resolve(py, transaction)?;
        let runtime = Arc::clone(&self.inner);
        match detached(py, || runtime.commit(id, now_ms()))? {
            Ok(receipt) => Receipt::new(py, &receipt),
            Err(error) => Err(py_error(py, &error, &[])),
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

    /// Reject a transaction: it can never be committed. The record, as a dict.
    fn reject(&self, py: Python<'_>, transaction: &str) -> PyResult<Py<PyAny>> {
        let id = self.resolve(py, transaction)?;
        let runtime = Arc::clone(&self.inner);
        match detached(py, || runtime.reject(id, now_ms()))? {
            Ok(record) => record_dict(py, &record),
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

    /// A stored transaction's receipt, or `None` when vsh keeps none.
    fn show(&self, py: Python<'_>, transaction: &str) -> PyResult<Option<Receipt>> {
        let id = self.resolve(py, transaction)?;
        let runtime = Arc::clone(&self.inner);
        match detached(py, || runtime.show(id))? {
            Ok(Some(receipt)) => Ok(Some(Receipt::new(py, &receipt)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(py_error(py, &error, &[])),
        }
    }
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
