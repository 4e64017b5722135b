"""An agent's session with `vsh serve`, driven by the official MCP Python SDK.

Run by crates/vsh-cli/tests/mcp.rs as `python python_client.py VSH WORKSPACE`
(with VSH_AUTHORITY_KEY in the environment, shared with the operator's
`vsh approve`). Every check raises on failure; the last line printed is "ok".
"""

import asyncio
import os
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def check(condition, message):
    if not condition:
        raise AssertionError(message)


async def call(session, tool, arguments):
    result = await session.call_tool(tool, arguments)
    document = result.structured_content
    check(isinstance(document, dict) and "schema" in document, f"{tool}: no structured document: {result}")
    text = "".join(getattr(block, "text", "") for block in result.content)
    return bool(result.is_error), document, text


FOREVER = "from pathlib import Path\nPath('late.txt').write_text('late')\nwhile True:\n    pass"


async def wait_for_line(log, needle):
    """Wait (up to 30 s) until the server's stderr holds `needle`."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        log.flush()
        with open(log.name, encoding="utf-8") as f:
            if needle in f.read():
                return
        await asyncio.sleep(0.1)
    with open(log.name, encoding="utf-8") as f:
        raise AssertionError(f"the server never logged {needle!r}: {f.read()}")


async def session_of(vsh, workspace, log):
    env = {"VSH_AUTHORITY_KEY": os.environ["VSH_AUTHORITY_KEY"]}
    args = ["serve", "--workspace", workspace, "--timeout", "1m"]
    server = StdioServerParameters(command=vsh, args=args, env=env)
    async with stdio_client(server, errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "vsh", f"server name: {init.server_info}")
            tools = sorted(tool.name for tool in (await session.list_tools()).tools)
            check(tools == ["vsh_commit", "vsh_discard", "vsh_pending", "vsh_rerun", "vsh_revert", "vsh_run", "vsh_show", "vsh_wait"], f"tools: {tools}")

            code = "from pathlib import Path\nPath('b.txt').write_text(Path('a.txt').read_text().upper())"
            error, preview, _ = await call(session, "vsh_run", {"code": code})
            check(not error and preview["state"] == "auto-approved", f"preview: {preview}")
            check(not os.path.exists(os.path.join(workspace, "b.txt")), "a preview wrote")
            error, committed, _ = await call(session, "vsh_commit", {"transaction": preview["transaction"][:8]})
            check(not error and committed["state"] == "committed", f"commit: {committed}")

            code = "from pathlib import Path\nPath('c.txt').write_text('c')"
            _, auto, _ = await call(session, "vsh_run", {"code": code, "mode": "auto"})
            check(auto["state"] == "committed", f"auto: {auto}")

            code = "from pathlib import Path\nPath('a.txt').unlink()"
            _, pending, _ = await call(session, "vsh_run", {"code": code})
            check(pending["state"] == "pending-approval", f"pending: {pending}")
            transaction = pending["transaction"]
            _, listed, _ = await call(session, "vsh_pending", {})
            check(any(row["transaction"] == transaction for row in listed["transactions"]), f"pending list: {listed}")
            error, refused, text = await call(session, "vsh_commit", {"transaction": transaction})
            check(error and "vsh approve" in (refused.get("hint") or ""), f"unapproved commit: {refused}")
            subprocess.run([vsh, "approve", transaction, "--workspace", workspace], check=True, capture_output=True)
            error, landed, _ = await call(session, "vsh_commit", {"transaction": transaction})
            check(not error and landed["state"] == "committed", f"approved commit: {landed}")
            check(not os.path.exists(os.path.join(workspace, "a.txt")), "the approved deletion did not land")

            error, leak, _ = await call(session, "vsh_run", {"code": "from pathlib import Path\nPath('.env').read_text()"})
            check(not error and leak["state"] == "denied" and leak["decision"]["denied"][0]["path"] == ".env", f"denial: {leak}")
            error, shown, _ = await call(session, "vsh_show", {"transaction": transaction[:10]})
            check(not error and shown["schema"] == "vsh.show/1", f"show: {shown}")

            # A long run reports progress, once a second.
            seen = []

            async def on_progress(progress, total, message):
                seen.append((progress, total, message))

            spin = {"code": "while True:\n    pass", "budget": {"timeout_ms": 2500}}
            result = await session.call_tool("vsh_run", spin, progress_callback=on_progress)
            check(result.is_error and result.structured_content["kind"] == "execution", f"spin: {result}")
            check(len(seen) >= 2 and seen[0][2].startswith("running"), f"progress: {seen}")
            check(all(a[0] < b[0] for a, b in zip(seen, seen[1:])), f"progress grows: {seen}")

            # Abandoning a run sends notifications/cancelled: the server stops
            # it (it would have run for its minute) and stores nothing.
            try:
                await asyncio.wait_for(session.call_tool("vsh_run", {"code": FOREVER, "mode": "auto"}), 0.6)
                raise AssertionError("the endless run returned")
            except (asyncio.TimeoutError, TimeoutError):
                pass
            await wait_for_line(log, "(vsh_run) was cancelled by the client; the run was stopped")
            check(not os.path.exists(os.path.join(workspace, "late.txt")), "the cancelled run wrote")
            _, listed, _ = await call(session, "vsh_pending", {})
            check(listed["transactions"] == [], f"after the cancel: {listed}")
    print("ok")


async def main(vsh, workspace):
    with tempfile.NamedTemporaryFile("w+", encoding="utf-8", suffix=".log") as log:
        await session_of(vsh, workspace, log)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
