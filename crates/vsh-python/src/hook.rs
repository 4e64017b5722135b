//! Commit hooks as Python callables: the `RequestEvent` a hook is handed,
//! the `vsh.Decision` it returns, and the record of what it decided.
//!
//! A runtime opened with `hook=` asks the callable, with the GIL held and no
//! vsh lock held, whenever the hook is in scope for work about to commit
//! (`Runtime.run` in auto mode, `Runtime.commit`). The callable returns a
//! `vsh.Decision` member or a `(Decision, reason)` pair. If it raises or
//! returns anything else, the failure is recorded (`fail_hook`: auto-approved
//! work falls back to pending review, nothing commits) and the exception
//! propagates.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use vsh::document::RequestEventDocument;

use crate::Document;

/// What a hook reviews: the transaction, its binding digests, the policy
/// decision, the canonical diff, the effects and, when the runtime was opened
/// with `hook_content_bytes`, the before and after contents.
#[pyclass(frozen, module = "vsh")]
pub(crate) struct RequestEvent {
    document: Document,
    contents: Py<PyAny>,
    transaction: String,
    state: String,
}

impl RequestEvent {
    pub(crate) fn new(py: Python<'_>, event: &vsh::RequestEvent) -> PyResult<Self> {
        let document = RequestEventDocument::from(event);
        let contents = PyList::empty(py);
        for content in &event.contents {
            let item = PyDict::new(py);
            item.set_item("path", content.path.to_string())?;
            item.set_item("after", content.after)?;
            item.set_item("blob", content.blob.to_hex())?;
            item.set_item("bytes", PyBytes::new(py, &content.bytes))?;
            contents.append(item)?;
        }
        Ok(Self {
            document: Document::new(&document)?,
            contents: contents.into_any().unbind(),
            transaction: document.transaction,
            state: document.state,
        })
    }

    fn field(&self, py: Python<'_>, key: &str) -> PyResult<Py<PyAny>> {
        self.document.field(py, key)
    }
}

#[pymethods]
impl RequestEvent {
    /// The transaction id, 64 hex digits.
    #[getter]
    fn transaction(&self) -> &str {
        &self.transaction
    }

    /// The transaction's state: `auto-approved` or `pending-approval`.
    #[getter]
    fn state(&self) -> &str {
        &self.state
    }

    /// The delivery id (the same for the same transaction, hook and state).
    #[getter]
    fn event_id(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "event_id")
    }

    /// The policy's decision, as in a receipt.
    #[getter]
    fn decision(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "decision")
    }

    /// Every digest the transaction id derives from.
    #[getter]
    fn binding(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "binding")
    }

    /// The intent text.
    #[getter]
    fn intent(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "intent")
    }

    /// The canonical diff: each changed path with its before and after state.
    #[getter]
    fn changes(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "changes")
    }

    /// What the program did, in order (a rename is one effect).
    #[getter]
    fn effects(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "effects")
    }

    /// The program's stdout.
    #[getter]
    fn stdout(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "stdout")
    }

    /// Before and after contents: `{"path", "after", "blob", "bytes"}` each
    /// (empty unless the runtime was opened with `hook_content_bytes`).
    #[getter]
    fn contents(&self, py: Python<'_>) -> Py<PyAny> {
        self.contents.clone_ref(py)
    }

    /// Whether the structural evidence (diff, digests, decision) is complete.
    #[getter]
    fn evidence_complete(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "evidence_complete")
    }

    /// Whether every changed file's before and after content is in `contents`.
    #[getter]
    fn content_complete(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.field(py, "content_complete")
    }

    /// The event as the `vsh.request-event/1` document (a new dict each call).
    fn to_dict(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.document.to_dict(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "RequestEvent(transaction='{}', state='{}')",
            &self.transaction[..12.min(self.transaction.len())],
            self.state
        )
    }
}

/// The hook's answer as a [`vsh::HookDecision`]: a `vsh.Decision` member, or
/// a `(Decision, reason)` pair.
pub(crate) fn decision_of(answer: &Bound<'_, PyAny>) -> PyResult<vsh::HookDecision> {
    let py = answer.py();
    let kind = py.import("vsh")?.getattr("Decision")?;
    let (member, reason) = match answer.cast::<PyTuple>() {
        Ok(pair) if pair.len() == 2 => (pair.get_item(0)?, pair.get_item(1)?.extract::<String>()?),
        _ => (answer.clone(), String::new()),
    };
    if !member.is_instance(&kind)? {
        return Err(PyTypeError::new_err(format!(
            "a hook returns a vsh.Decision or a (vsh.Decision, reason) pair, not {}",
            answer.repr()?
        )));
    }
    let value: String = member.getattr("value")?.extract()?;
    Ok(match value.as_str() {
        "follow-policy" => vsh::HookDecision::FollowPolicy,
        "approve" => vsh::HookDecision::Approve { reason },
        "review" => vsh::HookDecision::Review { feedback: reason },
        "reject" => vsh::HookDecision::Reject { reason },
        other => return Err(PyTypeError::new_err(format!("unknown vsh.Decision value {other:?}"))),
    })
}

/// What the hook decided, as `{"decision", "reason", "event_id"}`.
pub(crate) fn hook_record(py: Python<'_>, record: &vsh::HookDecisionRecord) -> PyResult<Py<PyAny>> {
    let (decision, reason) = match &record.decision {
        vsh::HookDecision::FollowPolicy => ("follow-policy", ""),
        vsh::HookDecision::Approve { reason } => ("approve", reason.as_str()),
        vsh::HookDecision::Review { feedback } => ("review", feedback.as_str()),
        vsh::HookDecision::Reject { reason } => ("reject", reason.as_str()),
    };
    let dict = PyDict::new(py);
    dict.set_item("decision", decision)?;
    dict.set_item("reason", reason)?;
    dict.set_item("event_id", vsh::lower::vsh_types::hex::encode(&record.event_id))?;
    Ok(dict.into_any().unbind())
}
