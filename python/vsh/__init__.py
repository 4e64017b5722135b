"""vsh: let AI agents change real workspaces safely and exactly once.

A :class:`Runtime` runs a program (Monty, a sandboxed Python subset, or a
Bash script) against a virtual image of a workspace: nothing it does touches
the real files. The result is a :class:`Receipt`: the canonical diff's
digest, the policy's decision (auto-approved, pending a human's approval, or
denied) and the program's output. Approved work is revalidated against the
live workspace and committed exactly once. Every error is a :class:`VshError`.

A runtime opened with ``hook=`` puts a Python callable in the commit path:
it receives a :class:`RequestEvent` and returns a :class:`Decision` (or a
``(Decision, reason)`` pair).
"""

import enum

from ._vsh import (
    VERSION,
    ApprovalError,
    Cancellation,
    CancelledError,
    ConfigurationError,
    ExecutionError,
    InternalError,
    PolicyDenied,
    Receipt,
    RequestEvent,
    RecoveryError,
    Runtime,
    StaleError,
    StoreError,
    VshError,
)

__version__ = VERSION


class Decision(enum.Enum):
    """What a commit hook decides about a :class:`RequestEvent`."""

    #: Do what the policy says: commit auto-approved or approved work, leave
    #: pending work pending.
    FOLLOW_POLICY = "follow-policy"
    #: Approve (pending work gets the hook's grant) and commit.
    APPROVE = "approve"
    #: Send to human review: auto-approved work becomes pending approval.
    REVIEW = "review"
    #: Reject: the transaction can never commit.
    REJECT = "reject"

__all__ = [
    "VERSION",
    "ApprovalError",
    "Cancellation",
    "CancelledError",
    "ConfigurationError",
    "Decision",
    "ExecutionError",
    "InternalError",
    "PolicyDenied",
    "Receipt",
    "RequestEvent",
    "RecoveryError",
    "Runtime",
    "StaleError",
    "StoreError",
    "VshError",
]
