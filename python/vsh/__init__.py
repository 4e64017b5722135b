"""vsh: let AI agents change real workspaces safely and exactly once.

A :class:`Runtime` runs a program (Monty, a sandboxed Python subset, or a
Bash script) against a virtual image of a workspace: nothing it does touches
the real files. The result is a :class:`Receipt`: the canonical diff's
digest, the policy's decision (auto-approved, pending a human's approval, or
denied) and the program's output. Approved work is revalidated against the
live workspace and committed exactly once. Every error is a :class:`VshError`.
"""

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
    RecoveryError,
    Runtime,
    StaleError,
    StoreError,
    VshError,
)

__version__ = VERSION

__all__ = [
    "VERSION",
    "ApprovalError",
    "Cancellation",
    "CancelledError",
    "ConfigurationError",
    "ExecutionError",
    "InternalError",
    "PolicyDenied",
    "Receipt",
    "RecoveryError",
    "Runtime",
    "StaleError",
    "StoreError",
    "VshError",
]
