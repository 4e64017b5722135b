"""Type stubs of the extension module ``vsh._vsh`` (see ``vsh``)."""

from os import PathLike
from typing import Any, Callable, Literal, Mapping, Optional, Sequence, Tuple, TypedDict, Union

from . import Decision

VERSION: str

class VshError(Exception):
    """Every error vsh raises; ``document`` is its vsh.error/1 document."""

    document: dict[str, Any]

class ExecutionError(VshError):
    """The program failed: an uncaught exception, a budget, a failed script."""

class PolicyDenied(VshError):
    """The policy refused the program accesses; ``denied`` lists them.

    When the program raised after a refusal, its work is stored as denied:
    ``transaction`` names it, ``document`` is its receipt and ``exception``
    what it raised, as Python prints it (both ``None`` when nothing was
    stored).
    """

    denied: list[dict[str, Any]]
    transaction: Optional[str]
    exception: Optional[str]

class StaleError(VshError):
    """The workspace changed under the commit; ``paths`` are the conflicts."""

    paths: list[str]

class ApprovalError(VshError):
    """An approval is missing, expired, or not for this work.

    When a commit hook decided against committing, ``hook`` is its record
    and ``state`` the transaction's state."""

    hook: dict[str, str]
    state: str

class StoreError(VshError):
    """vsh's stored records or contents failed."""

class RecoveryError(VshError):
    """An interrupted commit needs recovery first."""

class ConfigurationError(VshError):
    """The runtime could not be opened as configured."""

class CancelledError(VshError):
    """The request was cancelled before its commit entered."""

class InternalError(VshError):
    """A defect in vsh (a panic at the boundary)."""

class Receipt:
    """What a run or a commit did (the vsh.receipt/1 document)."""

    @property
    def transaction(self) -> str:
        """The transaction id, 64 hex digits."""
    @property
    def state(self) -> str:
        """``auto-approved``, ``pending-approval``, ``denied``, ``committed``, ..."""
    @property
    def changed_paths(self) -> int:
        """How many paths the diff changes."""
    @property
    def decision(self) -> dict[str, Any]:
        """The policy's decision."""
    @property
    def stdout(self) -> str:
        """The program's standard output."""
    @property
    def stderr(self) -> str:
        """A Bash program's standard error."""
    @property
    def value(self) -> Any:
        """The value of a Monty program's last expression."""
    @property
    def changes(self) -> list[dict[str, Any]]:
        """The changed paths, with ``detail="changes"`` or ``"full"``."""
    @property
    def hook(self) -> Optional[dict[str, str]]:
        """What the commit hook decided: ``{"decision", "reason", "event_id"}``."""
    def to_dict(self) -> dict[str, Any]:
        """The receipt as its vsh.receipt/1 document."""

class Content(TypedDict):
    """One file's content as hook evidence."""

    path: str
    after: bool
    blob: str
    bytes: bytes

class RequestEvent:
    """What a commit hook reviews (the vsh.request-event/1 document)."""

    @property
    def transaction(self) -> str:
        """The transaction id, 64 hex digits."""
    @property
    def state(self) -> str:
        """``auto-approved`` or ``pending-approval``."""
    @property
    def event_id(self) -> str:
        """The delivery id (the same for the same transaction, hook and state)."""
    @property
    def decision(self) -> dict[str, Any]:
        """The policy's decision."""
    @property
    def binding(self) -> dict[str, str]:
        """Every digest the transaction id derives from."""
    @property
    def intent(self) -> str:
        """The intent text."""
    @property
    def changes(self) -> list[dict[str, Any]]:
        """The canonical diff."""
    @property
    def effects(self) -> list[dict[str, Any]]:
        """What the program did, in order."""
    @property
    def stdout(self) -> str:
        """The program's stdout."""
    @property
    def contents(self) -> list[Content]:
        """Before and after contents (with ``hook_content_bytes``)."""
    @property
    def evidence_complete(self) -> bool:
        """Whether the structural evidence is complete."""
    @property
    def content_complete(self) -> bool:
        """Whether every changed file's contents are in ``contents``."""
    def to_dict(self) -> dict[str, Any]:
        """The event as its vsh.request-event/1 document."""

def _time_rust_previews(runtime: "Runtime", code: str, count: int) -> list[int]:
    """A benchmark aid: ``count`` previews from Rust, each call's nanoseconds."""

Hook = Callable[[RequestEvent], Union[Decision, Tuple[Decision, str]]]

class Cancellation:
    """A request's cancellation handle: ``cancel()`` from any thread ends the run."""

    def __init__(self) -> None: ...
    def cancel(self) -> bool:
        """Cancel; ``False`` once the commit has entered."""
    @property
    def cancelled(self) -> bool:
        """Whether the request was cancelled."""

class Budget(TypedDict, total=False):
    """A run's own limits."""

    timeout: float
    max_os_calls: int
    max_output_bytes: int
    max_memory_bytes: int
    max_read_bytes: int
    max_write_bytes: int

_Path = Union[str, "PathLike[str]"]

class Runtime:
    """A vsh runtime on one workspace."""

    def __init__(
        self,
        workspace: _Path,
        *,
        data_dir: Optional[_Path] = None,
        profile: Optional[Literal["balanced", "strict", "paranoid"]] = None,
        policy_file: Optional[_Path] = None,
        worker: Optional[_Path] = None,
        in_process: bool = False,
        bash: bool = True,
        hook: Optional[Hook] = None,
        hook_scope: Literal["review-required", "all-requests"] = "review-required",
        hook_content_bytes: int = 0,
        hook_label: str = "python",
        commands: bool = False,
        command_env: Optional[Mapping[str, str]] = None,
        command_tools: Optional[Sequence[_Path]] = None,
        network: Optional[Literal["none", "loopback", "all"]] = None,
        ports: Optional[Sequence[int]] = None,
    ) -> None: ...
    def preview(
        self,
        code: str,
        *,
        language: Literal["monty", "bash", "command"] = "monty",
        intent: Optional[str] = None,
        detail: Literal["compact", "changes", "full"] = "changes",
        budget: Optional[Budget] = None,
        cancel: Optional[Cancellation] = None,
    ) -> Receipt:
        """Run ``code`` against a virtual image and decide; write nothing."""
    def run(
        self,
        code: str,
        *,
        language: Literal["monty", "bash", "command"] = "monty",
        intent: Optional[str] = None,
        detail: Literal["compact", "changes", "full"] = "changes",
        mode: Literal["auto", "preview"] = "auto",
        budget: Optional[Budget] = None,
        cancel: Optional[Cancellation] = None,
    ) -> Receipt:
        """Run ``code`` and commit it if the policy auto-approves."""
    def commit(self, transaction: str) -> Receipt:
        """Commit auto-approved or approved work."""
    def approve(self, transaction: str, principal: str, *, ttl: float = 900.0) -> dict[str, Any]:
        """Approve pending work for ``principal``, valid for ``ttl`` seconds."""
    def discard(self, transaction: str) -> bool:
        """Let an auto-approved preview go without committing it."""
    def reject(self, transaction: str) -> dict[str, Any]:
        """Reject a transaction: it can never be committed."""
    def pending(self) -> list[dict[str, Any]]:
        """The transactions waiting for an approval or a commit."""
    def show(self, transaction: str, *, review: bool = False) -> Optional[Receipt]:
        """A stored transaction's receipt, with its changed paths; ``review=True`` adds each text file's hunks."""
