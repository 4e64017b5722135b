//! `vsh serve` driven by a real MCP client: the official Rust SDK's
//! (`rmcp`, client side), spawning the built binary over stdio.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt as _, TokioChildProcess};
use serde_json::{Value, json};

/// Every way `json` fails the committed schema its `schema` field names.
fn schema_violations(json: &Value) -> Vec<String> {
    let name = json["schema"].as_str().unwrap_or_else(|| panic!("a document names its schema: {json}"));
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/json")
        .join(format!("{}.schema.json", name.replace('/', "-")));
    let schema: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator.iter_errors(json).map(|error| format!("{error} at {}", error.instance_path())).collect()
}

/// A tool call's outcome: whether it is an error, its structured content
/// (checked against its schema) and its text.
struct Outcome {
    is_error: bool,
    document: Value,
    text: String,
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    arguments: Value,
) -> Outcome {
    let params = CallToolRequestParams::new(tool).with_arguments(arguments.as_object().unwrap().clone());
    let result = client.call_tool(params).await.unwrap_or_else(|error| panic!("{tool}: {error}"));
    let document = result.structured_content.clone().unwrap_or_else(|| panic!("{tool}: no structured content"));
    let violations = schema_violations(&document);
    assert!(violations.is_empty(), "{tool}: {violations:#?}\n{document:#}");
    let text = result.content.iter().filter_map(|block| block.as_text()).map(|text| text.text.clone()).collect();
    Outcome { is_error: result.is_error == Some(true), document, text }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_previews_commits_and_cannot_approve_its_own_work_over_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    let key = dir.path().join("authority.key");
    let transport = TokioChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_vsh")).configure(|cmd| {
        cmd.args(["serve", "--workspace"]).arg(&ws).env_clear().env("VSH_AUTHORITY_KEY", &key);
    }))
    .unwrap();
    let client = ().serve(transport).await.unwrap();

    // The tools, and no way to approve.
    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(info.server_info.as_ref().map(|server| server.name.as_str()), Some("vsh"));
    assert!(info.instructions.as_deref().is_some_and(|text| text.contains("vsh_read")), "the guide rides along");
    let mut tools: Vec<String> =
        client.list_all_tools().await.unwrap().into_iter().map(|tool| tool.name.to_string()).collect();
    tools.sort();
    assert_eq!(tools, ["vsh_commit", "vsh_discard", "vsh_pending", "vsh_run", "vsh_show"]);

    // A preview writes nothing; committing it does, exactly once.
    let create =
        "from pathlib import Path\nPath('b.txt').write_text(Path('a.txt').read_text().upper())\nprint('made b')";
    let preview = call(&client, "vsh_run", json!({"code": create, "intent": "make b"})).await;
    assert!(!preview.is_error, "{}", preview.text);
    assert_eq!(
        (preview.document["schema"].as_str(), preview.document["state"].as_str()),
        (Some("vsh.receipt/1"), Some("auto-approved"))
    );
    assert!(preview.text.contains("made b") && preview.text.contains("vsh_commit"), "{}", preview.text);
    assert!(!ws.join("b.txt").exists());
    let id = preview.document["transaction"].as_str().unwrap().to_owned();
    let shown = call(&client, "vsh_show", json!({"transaction": &id[..8]})).await;
    assert!(shown.document["receipt"]["review"][0]["hunks"].as_str().unwrap().contains("+ALPHA"), "{}", shown.document);
    let committed = call(&client, "vsh_commit", json!({"transaction": &id[..8]})).await;
    assert_eq!(committed.document["state"], "committed", "{}", committed.text);
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "ALPHA\n");

    // Auto mode commits what the policy auto-approves.
    let auto = call(
        &client,
        "vsh_run",
        json!({"code": "from pathlib import Path\nPath('c.txt').write_text('c')", "mode": "auto"}),
    )
    .await;
    assert_eq!(auto.document["state"], "committed");
    assert!(ws.join("c.txt").exists());

    // Work the policy escalates waits for the operator; the agent cannot commit it.
    let delete = call(&client, "vsh_run", json!({"code": "from pathlib import Path\nPath('a.txt').unlink()"})).await;
    assert_eq!(delete.document["state"], "pending-approval", "{}", delete.text);
    let pending_id = delete.document["transaction"].as_str().unwrap().to_owned();
    let pending = call(&client, "vsh_pending", json!({})).await;
    assert!(
        pending.document["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["transaction"] == pending_id.as_str())
    );
    let refused = call(&client, "vsh_commit", json!({"transaction": &pending_id})).await;
    assert!(refused.is_error);
    assert_eq!(refused.document["schema"], "vsh.error/1");
    assert!(
        refused.document["hint"].as_str().unwrap().contains(&format!("vsh approve {}", &pending_id[..12])),
        "{}",
        refused.document
    );
    assert!(ws.join("a.txt").exists());
    // The operator approves from the command line, another process.
    let approved = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["approve", &pending_id, "--workspace"])
        .arg(&ws)
        .env_clear()
        .env("VSH_AUTHORITY_KEY", &key)
        .output()
        .unwrap();
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    let landed = call(&client, "vsh_commit", json!({"transaction": &pending_id})).await;
    assert_eq!(landed.document["state"], "committed", "{}", landed.text);
    assert!(!ws.join("a.txt").exists());

    // A denial is a structured error naming the rule and remedy, and the server goes on.
    let leak = call(&client, "vsh_run", json!({"code": "from pathlib import Path\nPath('.env').read_text()"})).await;
    assert!(leak.is_error);
    assert_eq!(leak.document["denied"][0]["path"], ".env");
    assert!(leak.document["denied"][0]["remedy"].as_str().is_some_and(|remedy| !remedy.is_empty()));
    let caught = "from pathlib import Path\ntry:\n    Path('.env').read_text()\nexcept PermissionError:\n    pass";
    let denied = call(&client, "vsh_run", json!({"code": caught})).await;
    assert_eq!(denied.document["decision"]["kind"], "denied", "a caught refusal still denies");
    let bad = call(&client, "vsh_run", json!({"code": "1", "mode": "sideways"})).await;
    assert!(bad.is_error && bad.document["kind"] == "request", "{}", bad.document);
    let missing = call(&client, "vsh_show", json!({"transaction": "ffffffffffff"})).await;
    assert!(missing.is_error);
    // A discarded preview can never be committed.
    let other =
        call(&client, "vsh_run", json!({"code": "from pathlib import Path\nPath('d.txt').write_text('d')"})).await;
    let other_id = other.document["transaction"].as_str().unwrap().to_owned();
    let discarded = call(&client, "vsh_discard", json!({"transaction": &other_id})).await;
    assert_eq!(discarded.document["state"], "rejected");
    assert!(call(&client, "vsh_commit", json!({"transaction": &other_id})).await.is_error);
    assert!(!ws.join("d.txt").exists());
    // A tool that does not exist is a protocol error, and the server still answers.
    let unknown = client.call_tool(CallToolRequestParams::new("vsh_approve")).await;
    assert!(unknown.is_err(), "{unknown:?}");
    assert!(!call(&client, "vsh_pending", json!({})).await.is_error);
    client.cancel().await.unwrap();
}

/// The Python interpreter with the official MCP Python SDK (`cargo xtask ci`
/// installs it, pinned, and names it in `VSH_MCP_PYTHON`); `None` when this run
/// may go without it.
fn python_client() -> Option<String> {
    match std::env::var("VSH_MCP_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ if std::env::var_os("VSH_REQUIRE_MCP_CLIENTS").is_some() => {
            panic!("VSH_REQUIRE_MCP_CLIENTS is set but VSH_MCP_PYTHON names no interpreter")
        }
        _ => {
            eprintln!("skipped: no MCP Python client (cargo xtask ci installs one)");
            None
        }
    }
}

#[test]
fn the_official_python_sdk_client_runs_an_agent_session() {
    let Some(python) = python_client() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python_client.py");
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_vsh"))
        .arg(&ws)
        .env_clear()
        .env("VSH_AUTHORITY_KEY", dir.path().join("authority.key"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim_end().ends_with("ok"),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!ws.join("a.txt").exists(), "the approved deletion landed");
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "ALPHA\n");
}
