"""An agent's session with `vsh serve`, driven by the official MCP Python SDK.

Run by crates/vsh-cli/tests/mcp.rs as `python python_client.py VSH WORKSPACE`
(with VSH_AUTHORITY_KEY in the environment, shared with the operator's
`vsh approve`). Every check raises on failure; the last line printed is "ok".
"""

import asyncio
import os
import subprocess
import sys

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


async def session_of(vsh, workspace):
    env = {"VSH_AUTHORITY_KEY": os.environ["VSH_AUTHORITY_KEY"]}
    server = StdioServerParameters(command=vsh, args=["serve", "--workspace", workspace], env=env)
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "vsh", f"server name: {init.server_info}")
            tools = sorted(tool.name for tool in (await session.list_tools()).tools)
            check(tools == ["vsh_commit", "vsh_discard", "vsh_pending", "vsh_run", "vsh_show"], f"tools: {tools}")

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
            check(error and leak["schema"] == "vsh.error/1" and leak["denied"][0]["path"] == ".env", f"denial: {leak}")
            error, shown, _ = await call(session, "vsh_show", {"transaction": transaction[:10]})
            check(not error and shown["schema"] == "vsh.show/1", f"show: {shown}")
    print("ok")


if __name__ == "__main__":
    asyncio.run(session_of(sys.argv[1], sys.argv[2]))
