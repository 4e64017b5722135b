// An agent's session with `vsh serve`, driven by the official MCP TypeScript
// SDK (@modelcontextprotocol/sdk, pinned in package.json and package-lock.json).
//
// Run by crates/vsh-cli/tests/mcp.rs as `node client.mjs VSH WORKSPACE` from
// the directory `cargo xtask ci` installed the SDK into (VSH_AUTHORITY_KEY in
// the environment, shared with the operator's `vsh approve`). Every check
// throws on failure; the last line printed is "ok".

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [vsh, workspace] = process.argv.slice(2);

function check(condition, message) {
  if (!condition) {
    throw new Error(message);
  }
}

async function call(client, name, args, options) {
  const result = await client.callTool({ name, arguments: args }, undefined, options);
  const document = result.structuredContent;
  check(document && typeof document.schema === "string", `${name}: no structured document: ${JSON.stringify(result)}`);
  const text = result.content.map((block) => block.text ?? "").join("");
  return { error: result.isError === true, document, text };
}

const transport = new StdioClientTransport({
  command: vsh,
  args: ["serve", "--workspace", workspace, "--timeout", "1m"],
  env: { VSH_AUTHORITY_KEY: process.env.VSH_AUTHORITY_KEY },
  stderr: "pipe",
});
let log = "";
transport.stderr.on("data", (chunk) => {
  log += chunk.toString();
});
const client = new Client({ name: "vsh-typescript-test", version: "0" });
await client.connect(transport);

check(client.getServerVersion().name === "vsh", `server: ${JSON.stringify(client.getServerVersion())}`);
const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
check(
  JSON.stringify(tools) === JSON.stringify(["vsh_commit", "vsh_discard", "vsh_pending", "vsh_rerun", "vsh_revert", "vsh_run", "vsh_show", "vsh_wait"]),
  `tools: ${tools}`,
);

// A preview writes nothing; its commit does.
let code = "from pathlib import Path\nPath('b.txt').write_text(Path('a.txt').read_text().upper())";
const preview = await call(client, "vsh_run", { code });
check(!preview.error && preview.document.state === "auto-approved", `preview: ${preview.text}`);
check(!existsSync(join(workspace, "b.txt")), "a preview wrote");
const committed = await call(client, "vsh_commit", { transaction: preview.document.transaction.slice(0, 8) });
check(!committed.error && committed.document.state === "committed", `commit: ${committed.text}`);

// Auto mode.
const auto = await call(client, "vsh_run", { code: "from pathlib import Path\nPath('c.txt').write_text('c')", mode: "auto" });
check(auto.document.state === "committed" && existsSync(join(workspace, "c.txt")), `auto: ${auto.text}`);

// Pending work: the agent cannot commit it; the operator approves from the CLI.
const pending = await call(client, "vsh_run", { code: "from pathlib import Path\nPath('a.txt').unlink()" });
check(pending.document.state === "pending-approval", `pending: ${pending.text}`);
const transaction = pending.document.transaction;
const listed = await call(client, "vsh_pending", {});
check(listed.document.transactions.some((row) => row.transaction === transaction), `listed: ${listed.text}`);
const refused = await call(client, "vsh_commit", { transaction });
check(refused.error && (refused.document.hint ?? "").includes("vsh approve"), `unapproved: ${refused.text}`);
execFileSync(vsh, ["approve", transaction, "--workspace", workspace], { env: process.env, stdio: "pipe" });
const landed = await call(client, "vsh_commit", { transaction });
check(!landed.error && landed.document.state === "committed", `approved commit: ${landed.text}`);
check(!existsSync(join(workspace, "a.txt")), "the approved deletion did not land");

// A structured denial.
const leak = await call(client, "vsh_run", { code: "from pathlib import Path\nPath('.env').read_text()" });
check(!leak.error && leak.document.state === "denied" && leak.document.decision.denied[0].path === ".env", `denial: ${leak.text}`);

// A long run reports progress.
const seen = [];
const spin = await call(
  client,
  "vsh_run",
  { code: "while True:\n    pass", budget: { timeout_ms: 2500 } },
  { onprogress: (progress) => seen.push(progress) },
);
check(spin.error && spin.document.kind === "execution", `spin: ${spin.text}`);
check(seen.length >= 2 && seen[0].message.startsWith("running"), `progress: ${JSON.stringify(seen)}`);

// Aborting a run sends notifications/cancelled: the server stops it.
const controller = new AbortController();
const endless = call(
  client,
  "vsh_run",
  { code: "from pathlib import Path\nPath('late.txt').write_text('late')\nwhile True:\n    pass", mode: "auto" },
  { signal: controller.signal },
);
await new Promise((resolve) => setTimeout(resolve, 600));
controller.abort("the agent changed its mind");
let aborted = false;
try {
  await endless;
} catch {
  aborted = true;
}
check(aborted, "the aborted call resolved");
const needle = "(vsh_run) was cancelled by the client; the run was stopped";
for (let waited = 0; !log.includes(needle) && waited < 300; waited += 1) {
  await new Promise((resolve) => setTimeout(resolve, 100));
}
check(log.includes(needle), `the server never logged the cancel: ${log}`);
check(!existsSync(join(workspace, "late.txt")), "the cancelled run wrote");
const after = await call(client, "vsh_pending", {});
check(after.document.transactions.length === 0, `after the cancel: ${after.text}`);

await client.close();
console.log("ok");
