"""An agent's tool loop over vsh, runnable without network access.

``vsh_tool`` is the function an LLM framework registers as a tool: it runs
the model's program as a preview and returns a summary the model reads (the
decision, the changed paths, the output). The loop commits what the policy
auto-approves and leaves the rest for a human (``vsh approve``). The "model"
here is a scripted list of programs, so the example needs no API key.

Run: ``python examples/python/agent_loop.py /path/to/workspace``.
"""

from __future__ import annotations

import sys
from typing import Any

import vsh


def vsh_tool(runtime: vsh.Runtime, code: str, language: str = "monty", intent: str | None = None) -> dict[str, Any]:
    """Preview ``code``; what the model should know about the result."""
    try:
        receipt = runtime.preview(code, language=language, intent=intent, detail="full")  # type: ignore[arg-type]
    except vsh.PolicyDenied as denied:
        return {"ok": False, "error": str(denied).splitlines()[-1], "denied": denied.denied}
    except vsh.VshError as error:
        return {"ok": False, "error": str(error).splitlines()[-1]}
    return {
        "ok": True,
        "transaction": receipt.transaction,
        "state": receipt.state,
        "decision": receipt.decision["kind"],
        "changed": [change["path"] for change in receipt.changes],
        "stdout": receipt.stdout,
    }


def run_agent(workspace: str, programs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Run each (language, program) the model proposes: review, then commit
    what needs no human; a stale commit is run again on the new workspace."""
    runtime = vsh.Runtime(workspace)
    transcript = []
    for language, code in programs:
        result = vsh_tool(runtime, code, language=language, intent="scripted agent")
        if result["ok"] and result["state"] == "auto-approved":
            try:
                result["state"] = runtime.commit(result["transaction"]).state
            except vsh.StaleError as stale:
                result["state"] = "stale"
                result["conflicts"] = stale.paths
        transcript.append(result)
    return transcript


SCRIPTED_MODEL = [
    ("monty", "from pathlib import Path\nPath('TODO.md').write_text('- [ ] write the docs\\n')\nprint('planned')"),
    ("bash", "sed -i 's/\\[ \\]/[x]/' TODO.md && cat TODO.md"),
    ("bash", "rm TODO.md"),  # a deletion: it waits for a human
    ("monty", "from pathlib import Path\nPath('.env').read_text()"),  # a secret: denied
]


def main(argv: list[str]) -> int:
    workspace = argv[1] if len(argv) > 1 else "."
    for step in run_agent(workspace, SCRIPTED_MODEL):
        print(step)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
