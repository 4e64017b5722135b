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

async fn call(client: &rmcp::Peer<rmcp::RoleClient>, tool: &'static str, arguments: Value) -> Outcome {
    let params = CallToolRequestParams::new(tool).with_arguments(arguments.as_object().unwrap().clone());
    let result = client.call_tool(params).await.unwrap_or_else(|error| panic!("{tool}: {error}"));
    let document = result.structured_content.clone().unwrap_or_else(|| panic!("{tool}: no structured content"));
    let violations = schema_violations(&document);
    assert!(violations.is_empty(), "{tool}: {violations:#?}\n{document:#}");
    let text = result.content.iter().filter_map(|block| block.as_text()).map(|text| text.text.clone()).collect();
    Outcome { is_error: result.is_error == Some(true), document, text }
}

/// A commit landed, and its text is what the commit did, not the run's
/// output (`printed`) again: the structured result keeps it.
fn commit_text_leaves_out_the_output(committed: &Outcome, printed: &str) {
    assert_eq!(committed.document["state"], "committed", "{}", committed.text);
    assert!(!committed.text.contains(printed.trim_end()) && committed.text.contains("vsh_show"), "{}", committed.text);
    assert_eq!(committed.document["stdout"], printed);
    let id = committed.document["transaction"].as_str().unwrap();
    assert!(committed.text.ends_with(&format!("to undo it: vsh_revert {}", &id[..12])), "{}", committed.text);
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
    // Without the note to vsh's developers (ux49 L8), its next paragraph kept.
    let instructions = info.instructions.as_deref().unwrap_or_default();
    assert!(!instructions.contains("every_example_in_the_guest_guide_runs"), "{instructions}");
    assert!(instructions.contains("## Files: `pathlib`, `os` and `open`"), "{instructions}");
    the_tools_and_their_hints(&client).await;

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
    the_text_names_what_changed(&client, create, &preview).await;
    assert!(!ws.join("b.txt").exists());
    let id = preview.document["transaction"].as_str().unwrap().to_owned();
    let shown = call(&client, "vsh_show", json!({"transaction": &id[..8]})).await;
    assert!(shown.document["receipt"]["review"][0]["hunks"].as_str().unwrap().contains("+ALPHA"), "{}", shown.document);
    let committed = call(&client, "vsh_commit", json!({"transaction": &id[..8]})).await;
    commit_text_leaves_out_the_output(&committed, "made b\n");
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "ALPHA\n");
    committed_once(&client, &ws, &id).await;

    // Auto mode commits what the policy auto-approves.
    let auto = call(
        &client,
        "vsh_run",
        json!({"code": "from pathlib import Path\nPath('c.txt').write_text('c')", "mode": "auto"}),
    )
    .await;
    assert!(auto.document["state"] == "committed" && auto.document["next"].is_null(), "{}", auto.document);
    assert!(ws.join("c.txt").exists());

    // Work the policy escalates waits for the operator; the agent cannot commit it.
    let delete = call(&client, "vsh_run", json!({"code": "from pathlib import Path\nPath('a.txt').unlink()"})).await;
    waiting_work_names_the_operators_step(&client, &delete).await;
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
    assert_eq!(refused.document["next"], json!(format!("vsh_wait {}", &pending_id[..12])), "{}", refused.document);
    assert!(ws.join("a.txt").exists());
    the_agent_waits_for_the_operators_approval(&client, &ws, &key, &pending_id).await;
    an_agent_never_runs_again_what_the_operator_rejected(&client, &ws, &key).await;
    let landed = call(&client, "vsh_commit", json!({"transaction": &pending_id})).await;
    assert_eq!(landed.document["state"], "committed", "{}", landed.text);
    assert!(!landed.text.contains("awaiting"), "committed work awaits nothing: {}", landed.text);
    assert!(!ws.join("a.txt").exists());

    // A refusal the program let escape is denied work, naming the rule and
    // remedy and what it raised (as a failed Bash program's is), and the
    // server goes on.
    let leak = call(&client, "vsh_run", json!({"code": "from pathlib import Path\nPath('.env').read_text()"})).await;
    assert!(!leak.is_error && leak.document["state"] == "denied", "{}", leak.document);
    let denial = &leak.document["decision"]["denied"][0];
    assert_eq!(denial["path"], ".env");
    assert!(denial["remedy"].as_str().is_some_and(|remedy| !remedy.is_empty()));
    assert!(leak.text.contains("denied: content-read .env"), "the text names the denial: {}", leak.text);
    assert!(leak.text.contains("raised:\nTraceback") && leak.text.contains("PermissionError"), "{}", leak.text);
    // Its commit is refused, saying why and where to look (ux80 M1: no hint).
    let leak_id = leak.document["transaction"].as_str().unwrap().to_owned();
    let refused = call(&client, "vsh_commit", json!({"transaction": leak_id})).await;
    let hint = refused.document["hint"].as_str().unwrap_or_default();
    assert!(refused.is_error && hint.starts_with("the policy denied it (vsh_show"), "{}", refused.text);
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
    discarded_once(&client, &other_id).await;
    assert!(!ws.join("d.txt").exists());
    bash_is_one_more_language(&client, &ws).await;
    a_blind_write_over_a_change_it_never_saw_is_to_be_discarded(&client, &ws).await;
    // A tool that does not exist is a protocol error, and the server still answers.
    let unknown = client.call_tool(CallToolRequestParams::new("vsh_approve")).await;
    assert!(unknown.is_err(), "{unknown:?}");
    assert!(!call(&client, "vsh_pending", json!({})).await.is_error);
    client.cancel().await.unwrap();
}

/// The operator approves `id` from the command line, another process, a
/// moment later; the agent's `vsh_wait` returns then, approved, with
/// `vsh_commit` next (ux65 F7: it could only poll). A short wait says it is
/// still waiting; a wait past the most is refused.
async fn the_agent_waits_for_the_operators_approval(
    client: &rmcp::Peer<rmcp::RoleClient>,
    ws: &Path,
    key: &Path,
    id: &str,
) {
    let short = call(client, "vsh_wait", json!({"transaction": &id[..8], "timeout_ms": 300})).await;
    assert!(!short.is_error && short.text.starts_with("still waiting"), "{}", short.text);
    // In tenths of a second (ux84 L5: 1,500 ms read "after 1 s").
    let after = short.text.split("approval after ").nth(1).and_then(|rest| rest.split(" s;").next());
    assert!(after.is_some_and(|seconds| seconds.starts_with("0.") && seconds.len() == 3), "{}", short.text);
    // The way to its paths is a call it can make (ux75 L2: `detail`, which
    // vsh_wait does not take).
    let more = format!("vsh_show {} with detail \"changes\" names each changed path", &id[..12]);
    assert!(short.text.contains(&more), "{}", short.text);
    assert_eq!(short.document["receipt"]["state"], "pending-approval", "{}", short.document);
    let long = call(client, "vsh_wait", json!({"transaction": id, "timeout_ms": 3_600_000})).await;
    assert!(long.is_error && long.text.contains("at most 1800000"), "{}", long.text);
    // Work that waits for no one is said to (ux71 L3: "decided").
    let preview = call(client, "vsh_run", json!({"code": "vsh_write('w.txt', 'w')"})).await;
    let preview_id = preview.document["transaction"].as_str().unwrap();
    let nothing = call(client, "vsh_wait", json!({"transaction": preview_id})).await;
    assert!(nothing.text.starts_with("nothing to wait for"), "{}", nothing.text);
    assert!(!call(client, "vsh_discard", json!({"transaction": preview_id})).await.is_error);
    let (ws_owned, key_owned, approving) = (ws.to_owned(), key.to_owned(), id.to_owned());
    let operator = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(700));
        std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["approve", &approving, "--workspace"])
            .arg(&ws_owned)
            .env_clear()
            .env("VSH_AUTHORITY_KEY", &key_owned)
            .output()
            .unwrap()
    });
    let started = std::time::Instant::now();
    let waited = call(client, "vsh_wait", json!({"transaction": id})).await;
    let approved = operator.join().unwrap();
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    assert!(started.elapsed() < std::time::Duration::from_mins(1), "it returned once decided");
    assert!(!waited.is_error && waited.text.starts_with("decided after"), "{}", waited.text);
    assert_eq!(waited.document["receipt"]["state"], "approved", "{}", waited.document);
    assert_eq!(waited.document["receipt"]["next"], format!("vsh_commit {}", &id[..12]), "{}", waited.document);
    // Asked again, approved already: it says so (ux80 L1).
    let again = call(client, "vsh_wait", json!({"transaction": id})).await;
    assert!(again.text.starts_with("nothing to wait for: an operator has approved it"), "{}", again.text);
    a_lapsed_approval_waits_for_another(client, ws, key).await;
}

/// ux82 M1: an approval past its `--ttl` was shown as approved (`vsh_wait`:
/// "nothing to wait for"), and the commit it led to refused it with no hint.
/// It waits for another approval, as the agent is told.
async fn a_lapsed_approval_waits_for_another(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path, key: &Path) {
    std::fs::write(ws.join("lapse.txt"), "l\n").unwrap();
    let waiting =
        call(client, "vsh_run", json!({"code": "from pathlib import Path\nPath('lapse.txt').unlink()"})).await;
    let id = waiting.document["transaction"].as_str().unwrap().to_owned();
    let approve_briefly = || {
        let approved = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["approve", &id, "--ttl", "1", "--workspace"])
            .arg(ws)
            .env_clear()
            .env("VSH_AUTHORITY_KEY", key)
            .output()
            .unwrap();
        assert_eq!(approved.status.code(), Some(0), "{approved:?}");
        std::thread::sleep(std::time::Duration::from_millis(1200));
    };
    approve_briefly();
    let shown = call(client, "vsh_show", json!({"transaction": &id})).await;
    assert_eq!(shown.document["receipt"]["state"], "pending-approval", "{}", shown.document);
    assert_eq!(shown.document["receipt"]["next"], format!("vsh_wait {}", &id[..12]), "{}", shown.document);
    approve_briefly();
    let late = call(client, "vsh_commit", json!({"transaction": &id})).await;
    let hint = late.document["hint"].as_str().unwrap_or_default();
    assert!(late.is_error && hint.contains(&format!("vsh_wait {} waits for it", &id[..12])), "{}", late.text);
    assert_eq!(late.document["next"], format!("vsh_wait {}", &id[..12]), "{}", late.document);
    assert!(ws.join("lapse.txt").exists());
    assert!(!call(client, "vsh_discard", json!({"transaction": &id})).await.is_error);
}

/// ux73 H1: after the operator rejected auto-approved work, the agent was
/// told to run it again, and `vsh_rerun` in auto mode committed it. Now
/// the hint says the operator rejected it, and `vsh_rerun` refuses.
async fn an_agent_never_runs_again_what_the_operator_rejected(
    client: &rmcp::Peer<rmcp::RoleClient>,
    ws: &Path,
    key: &Path,
) {
    let made = call(client, "vsh_run", json!({"code": "vsh_write('danger.txt', 'x')"})).await;
    assert_eq!(made.document["state"], "auto-approved", "{}", made.text);
    let id = made.document["transaction"].as_str().unwrap();
    operator_rejects(ws, key, id);
    let commit = call(client, "vsh_commit", json!({"transaction": id})).await;
    let hint = commit.document["hint"].as_str().unwrap_or_default();
    assert!(
        commit.is_error && hint.contains("an operator rejected it") && !hint.contains("vsh_rerun"),
        "{}",
        commit.text
    );
    for mode in ["auto", "preview"] {
        let again = call(client, "vsh_rerun", json!({"transaction": id, "mode": mode, "again": true})).await;
        assert!(again.is_error && again.text.contains("rejected by an operator"), "{}", again.text);
    }
    assert!(!ws.join("danger.txt").exists());
    a_rejection_covers_every_run_of_the_work(client, ws, key).await;
    // A wait for it says why there is nothing to wait for (ux74 L7).
    let waited = call(client, "vsh_wait", json!({"transaction": id})).await;
    assert!(waited.text.starts_with("nothing to wait for: an operator rejected it"), "{}", waited.text);
    // Work the workspace moves under while it waits ends the wait, stale
    // (ux74 M1: the wait ran out its time).
    std::fs::write(ws.join("s.txt"), "s\n").unwrap();
    std::fs::write(ws.join("gone.txt"), "g\n").unwrap();
    let program = "from pathlib import Path\nvsh_write('s2.txt', vsh_read('s.txt'))\nPath('gone.txt').unlink()";
    let waiting = call(client, "vsh_run", json!({"code": program})).await;
    assert_eq!(waiting.document["state"], "pending-approval", "{}", waiting.text);
    std::fs::write(ws.join("s.txt"), "s, edited\n").unwrap();
    let started = std::time::Instant::now();
    let waited =
        call(client, "vsh_wait", json!({"transaction": waiting.document["transaction"], "timeout_ms": 20_000})).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "it ended once stale: {}", waited.text);
    assert_eq!(waited.document["receipt"]["state"], "stale", "{}", waited.text);
    assert!(!waited.text.starts_with("still waiting"), "{}", waited.text);
}

/// The operator's `vsh reject ID`, from the command line: what it printed.
fn operator_rejects(ws: &Path, key: &Path, id: &str) -> String {
    let rejected = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["reject", id, "--workspace"])
        .arg(ws)
        .env_clear()
        .env("VSH_AUTHORITY_KEY", key)
        .output()
        .unwrap();
    assert_eq!(rejected.status.code(), Some(0), "{}", String::from_utf8_lossy(&rejected.stderr));
    String::from_utf8_lossy(&rejected.stdout).into_owned()
}

/// sec79 F2: an operator's rejection covered the one transaction named,
/// and a run of the same work the agent had made before it
/// (`again=true`) committed afterwards; so could a run made after it from
/// an earlier, committed run. The rejection rejects every run that could
/// still commit, and `vsh_rerun` refuses work any run of which was rejected.
async fn a_rejection_covers_every_run_of_the_work(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path, key: &Path) {
    let program = "from pathlib import Path\np = Path('log.txt')\np.write_text((p.read_text() if p.exists() else '') + 'entry\\n')";
    let first = call(client, "vsh_run", json!({"code": program})).await;
    let first = first.document["transaction"].as_str().unwrap().to_owned();
    assert!(!call(client, "vsh_commit", json!({"transaction": first})).await.is_error);
    let rerun = |again: bool| {
        let first = first.clone();
        async move { call(client, "vsh_rerun", json!({"transaction": first, "again": again})).await }
    };
    let second = rerun(true).await;
    assert_eq!(second.document["state"], "auto-approved", "{}", second.text);
    let second = second.document["transaction"].as_str().unwrap().to_owned();
    let third = rerun(true).await.document["transaction"].as_str().unwrap().to_owned();
    let said = operator_rejects(ws, key, &second);
    assert!(said.contains(&format!("{third}  rejected with it")), "{said}");
    let commit = call(client, "vsh_commit", json!({"transaction": third})).await;
    assert!(commit.is_error, "{}", commit.text);
    let again = rerun(true).await;
    assert!(
        again.is_error && again.text.contains(&format!("another run of the work of {}", &first[..12])),
        "{}",
        again.text
    );
    assert!(again.text.contains("was rejected by an operator"), "{}", again.text);
    assert_eq!(std::fs::read_to_string(ws.join("log.txt")).unwrap(), "entry\n");
    // Nor is a revert an operator rejected made again (sec81 6).
    let revert = call(client, "vsh_revert", json!({"transaction": first})).await;
    assert!(!revert.is_error, "{}", revert.text);
    operator_rejects(ws, key, revert.document["transaction"].as_str().unwrap());
    let again = call(client, "vsh_revert", json!({"transaction": first, "mode": "auto"})).await;
    assert!(again.is_error && again.text.contains("a revert of"), "{}", again.text);
    assert!(again.text.contains("was rejected by an operator"), "{}", again.text);
    assert_eq!(std::fs::read_to_string(ws.join("log.txt")).unwrap(), "entry\n");
}

/// This connection reads `u.txt`; the user edits it; a whole-file write
/// from the earlier read waits (`unseen-change`), and what comes next is
/// to discard it and write from a fresh read, not the operator's approval
/// (ux70 F6: it named `vsh approve`, which drops the edit).
async fn a_blind_write_over_a_change_it_never_saw_is_to_be_discarded(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path) {
    std::fs::write(ws.join("u.txt"), "one\n").unwrap();
    let read = call(client, "vsh_run", json!({"code": "vsh_read('u.txt')"})).await;
    assert!(!read.is_error, "{}", read.text);
    std::fs::write(ws.join("u.txt"), "one\nmine\n").unwrap();
    let blind = call(client, "vsh_run", json!({"code": "vsh_write('u.txt', 'one\\nagent\\n')"})).await;
    let id = blind.document["transaction"].as_str().unwrap();
    assert_eq!(blind.document["next"], format!("vsh_discard {}", &id[..12]), "{}", blind.document);
    assert!(blind.text.contains("u.txt (changed since a run read it; replaced unread)"), "{}", blind.text);
    assert!(blind.text.contains("approving it may drop a change this connection never saw"), "{}", blind.text);
    assert!(!call(client, "vsh_discard", json!({"transaction": id})).await.is_error);
}

/// The seven tools (none approves), each with the hints a host uses to let
/// the read-only ones run unasked.
async fn the_tools_and_their_hints(client: &rmcp::Peer<rmcp::RoleClient>) {
    let listed = client.list_all_tools().await.unwrap();
    let mut tools: Vec<String> = listed.iter().map(|tool| tool.name.to_string()).collect();
    tools.sort();
    assert_eq!(
        tools,
        ["vsh_commit", "vsh_discard", "vsh_pending", "vsh_rerun", "vsh_revert", "vsh_run", "vsh_show", "vsh_wait"]
    );
    for tool in &listed {
        let hints = tool.annotations.as_ref().unwrap_or_else(|| panic!("{} has no annotations", tool.name));
        let read_only = ["vsh_show", "vsh_pending", "vsh_wait"].contains(&tool.name.as_ref());
        assert_eq!(hints.read_only_hint, Some(read_only), "{}", tool.name);
        assert_eq!(hints.destructive_hint, (!read_only).then_some(true), "{}", tool.name);
        // Asking again changes nothing more for commit and discard; a run is new work each time.
        if ["vsh_commit", "vsh_discard"].contains(&tool.name.as_ref()) {
            assert_eq!(hints.idempotent_hint, Some(true), "{}", tool.name);
        }
        // A run and a revert are new work each time.
        if ["vsh_run", "vsh_rerun", "vsh_revert"].contains(&tool.name.as_ref()) {
            assert_eq!(hints.idempotent_hint, Some(false), "{}", tool.name);
        }
    }
}

/// Discarding `id` rejects it; a retry (after a lost answer) is told it is
/// done, not an error; it can never be committed.
async fn discarded_once(client: &rmcp::Peer<rmcp::RoleClient>, id: &str) {
    let discarded = call(client, "vsh_discard", json!({"transaction": id})).await;
    assert_eq!(discarded.document["state"], "rejected");
    let again = call(client, "vsh_discard", json!({"transaction": id})).await;
    assert!(!again.is_error && again.text.contains("already rejected"), "{}", again.text);
    assert_eq!(again.document["state"], "rejected");
    assert!(call(client, "vsh_commit", json!({"transaction": id})).await.is_error);
}

/// A retry of `id`'s commit after a lost answer is told it landed, not
/// that it failed; committed work cannot be discarded, and says so.
/// Work waiting for approval names the agent's `vsh_wait` as what
/// comes next, in the run's structured result and in `vsh_show`'s.
async fn waiting_work_names_the_operators_step(client: &rmcp::Peer<rmcp::RoleClient>, waiting: &Outcome) {
    assert_eq!(waiting.document["state"], "pending-approval", "{}", waiting.text);
    let id = waiting.document["transaction"].as_str().unwrap();
    assert_eq!(waiting.document["next"], format!("vsh_wait {}", &id[..12]), "{}", waiting.document);
    assert!(waiting.text.contains(&format!("they run `vsh approve {}`", &id[..12])), "{}", waiting.text);
    let shown = call(client, "vsh_show", json!({"transaction": &id[..8]})).await;
    assert_eq!(shown.document["receipt"]["next"], waiting.document["next"], "{}", shown.document);
}

/// A revert of `id` gone stale (`revert`, of a commit that made `b.txt`)
/// is reverted again: it has no program to run again (sec73 F2).
async fn a_stale_revert_is_reverted_again(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path, id: &str, revert: &str) {
    std::fs::write(ws.join("b.txt"), "ALPHA\nedited\n").unwrap();
    // Undoing auto-approved work's creation is auto-approved (ux67 F5); its
    // commit finds the workspace changed.
    let refused = call(client, "vsh_commit", json!({"transaction": &revert[..8]})).await;
    // A revert has no program: it is reverted again (ux73 H2: the hint
    // and the review's text sent the agent to vsh_rerun, which refuses it).
    // While the edit that made it stale stands in the way of any revert,
    // it is not sent there (ux74 M3: that step was refused every time).
    let hint = refused.document["hint"].as_str().unwrap_or_default();
    assert!(
        refused.is_error && hint.contains(&format!("no revert of {} can be made now", &id[..12])),
        "{}",
        refused.text
    );
    assert!(hint.contains("changed at b.txt") && !hint.contains("vsh_rerun"), "{}", refused.text);
    assert_eq!(refused.document["next"], json!(null), "{}", refused.document);
    let blocked = call(client, "vsh_show", json!({"transaction": &revert[..8]})).await;
    assert!(blocked.text.contains("change them back by new work instead (vsh_run)"), "{}", blocked.text);
    assert_eq!(blocked.document["receipt"]["next"], json!(null), "{}", blocked.document);
    let refused = call(client, "vsh_revert", json!({"transaction": &id[..8]})).await;
    assert!(refused.is_error, "{}", refused.text);
    // Once the path holds what the work left again, it is reverted again.
    std::fs::write(ws.join("b.txt"), "ALPHA\n").unwrap();
    let again = format!("vsh_revert {}", &id[..12]);
    let asked_again = call(client, "vsh_commit", json!({"transaction": &revert[..8]})).await;
    let hint = asked_again.document["hint"].as_str().unwrap_or_default();
    assert!(hint.contains(&again) && !hint.contains("vsh_rerun"), "{}", asked_again.text);
    let stale = call(client, "vsh_show", json!({"transaction": &revert[..8]})).await;
    assert!(stale.text.contains(&again) && !stale.text.contains("vsh_rerun"), "{}", stale.text);
    assert_eq!(stale.document["receipt"]["state"], "stale", "{}", stale.document);
    assert_eq!(stale.document["receipt"]["next"], format!("vsh_revert {}", &id[..12]), "{}", stale.document);
}

async fn committed_once(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path, id: &str) {
    let again = call(client, "vsh_commit", json!({"transaction": &id[..8]})).await;
    assert!(!again.is_error && again.text.starts_with("already committed"), "{}", again.text);
    assert_eq!(again.document["state"], "committed", "{}", again.text);
    let discard = call(client, "vsh_discard", json!({"transaction": &id[..8]})).await;
    assert!(discard.is_error && discard.text.contains("committed: there is nothing to discard"), "{}", discard.text);
    // And how to undo it instead (ux56 #6): a revert, new work.
    assert!(discard.text.contains(&format!("vsh_revert {} makes new work", &id[..12])), "{}", discard.text);
    let reverted = call(client, "vsh_revert", json!({"transaction": &id[..8]})).await;
    assert!(!reverted.is_error, "{}", reverted.text);
    // Work of its own, undoing what the commit changed.
    assert_ne!(reverted.document["transaction"], json!(id), "{}", reverted.text);
    assert!(reverted.document["changes"].as_array().is_some_and(|changes| !changes.is_empty()), "{}", reverted.text);
    assert_eq!(reverted.document["state"], "auto-approved", "{}", reverted.text);
    let twice = call(client, "vsh_revert", json!({"transaction": &id[..8], "mode": "sideways"})).await;
    assert!(twice.is_error && twice.text.contains("give preview or auto"), "{}", twice.text);
    a_stale_revert_is_reverted_again(client, ws, id, reverted.document["transaction"].as_str().unwrap()).await;
}

/// The text names what changed (what many hosts show the model): each
/// path by default (`preview`, of `create`), its hunks too with full, none
/// with compact.
async fn the_text_names_what_changed(client: &rmcp::Peer<rmcp::RoleClient>, create: &str, preview: &Outcome) {
    assert!(preview.text.contains("\nchanges:\n  create b.txt  [- -> file "), "{}", preview.text);
    // What comes next, in the structured result too (ux60 3: always null).
    let short = &preview.document["transaction"].as_str().unwrap()[..12];
    assert_eq!(preview.document["next"], format!("vsh_commit {short}"), "{}", preview.document);
    let full = call(client, "vsh_run", json!({"code": create, "detail": "full"})).await;
    assert!(full.text.contains("+ALPHA") && full.text.contains("create b.txt"), "{}", full.text);
    let compact = call(client, "vsh_run", json!({"code": create, "detail": "compact"})).await;
    assert!(!compact.text.contains("b.txt") && compact.text.contains("\"full\" adds its hunks"), "{}", compact.text);
}

/// A Bash script over MCP: its streams and status in the receipt; a failing
/// one is a tool error with its status and diagnostic diff, nothing written.
async fn bash_is_one_more_language(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path) {
    let script = json!({"code": "grep -c ALPHA b.txt; echo note >&2", "language": "bash"});
    let bash = call(client, "vsh_run", script).await;
    assert!(!bash.is_error, "{}", bash.text);
    assert_eq!(
        (bash.document["language"].as_str(), bash.document["exit_code"].as_i64(), bash.document["stderr"].as_str()),
        (Some("bash"), Some(0), Some("note\n")),
        "{}",
        bash.document
    );
    let failed = call(client, "vsh_run", json!({"code": "echo half > h.txt; exit 9", "language": "bash"})).await;
    assert!(failed.is_error && failed.document["status"] == 9, "{}", failed.document);
    assert_eq!(failed.document["changes"][0]["path"], "h.txt", "the diagnostic diff: {}", failed.document);
    assert!(
        failed.text.contains("it had changed (not kept;") && failed.text.contains("\n  create h.txt"),
        "{}",
        failed.text
    );
    assert!(!ws.join("h.txt").exists());
    // The agent keeps them itself: no flag of serve's to ask the operator
    // for (ux61 5: `vsh serve --accept-failure` does not exist).
    assert_eq!(
        failed.document["hint"],
        "pass \"accept_failure\": true to keep a failing run's changes as its outcome, for review",
        "{}",
        failed.document
    );
    assert!(!failed.text.contains("--accept-failure"), "{}", failed.text);
    // What a program printed reaches the text with its control characters
    // escaped (the structured result keeps the bytes).
    let drawn = call(client, "vsh_run", json!({"code": "printf 'a\\033[2Jb\\r\\n'", "language": "bash"})).await;
    assert!(drawn.text.contains("a\\x1b[2Jb\\r") && !drawn.text.contains(['\u{1b}', '\r']), "{:?}", drawn.text);
    assert_eq!(drawn.document["stdout"], "a\u{1b}[2Jb\r\n");
    // Kept for review when the agent accepts the failure.
    let accepted = json!({"code": "echo half > h.txt; exit 9", "language": "bash", "accept_failure": true});
    let kept = call(client, "vsh_run", accepted).await;
    assert!(!kept.is_error && kept.document["exit_code"] == 9, "{}", kept.document);
    assert!(kept.text.contains("exit status: 9") && kept.text.contains("create h.txt"), "{}", kept.text);
}

/// What `cargo xtask ci` installed for a client (pinned) and names in `var`:
/// the Python interpreter with the official Python SDK (`VSH_MCP_PYTHON`), the
/// directory holding the TypeScript SDK (`VSH_MCP_TYPESCRIPT`); `None` when
/// this run may go without it.
fn installed_client(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ if std::env::var_os("VSH_REQUIRE_MCP_CLIENTS").is_some() => {
            panic!("VSH_REQUIRE_MCP_CLIENTS is set but {var} names no client")
        }
        _ => {
            eprintln!("skipped: {var} names no MCP client (cargo xtask ci installs it)");
            None
        }
    }
}

/// A workspace for a client's session: `a.txt` and a secret `.env`.
fn session_workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    (dir, ws)
}

/// Run a client's session script (`program script VSH WORKSPACE`) and check
/// it ended with "ok" and left the workspace as the session made it.
fn run_session(mut command: std::process::Command, dir: &Path, ws: &Path) {
    let output = command
        .arg(env!("CARGO_BIN_EXE_vsh"))
        .arg(ws)
        .env_clear()
        .env("VSH_AUTHORITY_KEY", dir.join("authority.key"))
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
    assert!(!ws.join("late.txt").exists(), "the cancelled run wrote nothing");
}

#[test]
fn the_official_python_sdk_client_runs_an_agent_session() {
    let Some(python) = installed_client("VSH_MCP_PYTHON") else { return };
    let (dir, ws) = session_workspace();
    let mut command = std::process::Command::new(python);
    command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python_client.py"));
    run_session(command, dir.path(), &ws);
}

#[test]
fn the_official_typescript_sdk_client_runs_an_agent_session() {
    let Some(modules) = installed_client("VSH_MCP_TYPESCRIPT") else { return };
    let (dir, ws) = session_workspace();
    // Node resolves the SDK from the script's own directory.
    let script = Path::new(&modules).join("client.mjs");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/typescript/client.mjs"), &script).unwrap();
    let mut command = std::process::Command::new("node");
    command.arg(script);
    run_session(command, dir.path(), &ws);
}

/// A client that records the server's progress notifications and offers
/// `roots` as its roots (none: it does not declare the capability).
#[derive(Clone, Default)]
struct Recorder {
    progress: std::sync::Arc<std::sync::Mutex<Vec<rmcp::model::ProgressNotificationParam>>>,
    roots: Option<Vec<String>>,
}

impl rmcp::ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    #[expect(deprecated, reason = "the server still reads roots, which clients still offer")]
    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        let roots = self.roots.clone().unwrap_or_default();
        Ok(rmcp::model::ListRootsResult::new(
            roots.into_iter().map(|uri| serde_json::from_value(json!({"uri": uri})).expect("a root")).collect(),
        ))
    }

    #[expect(deprecated, reason = "the server still reads roots, which clients still offer")]
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        if self.roots.is_some() {
            capabilities = rmcp::model::ClientCapabilities::builder().enable_roots().build();
        }
        rmcp::model::ClientConfig::new(capabilities, rmcp::model::Implementation::new("vsh-test", "0"))
    }
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, Recorder>;

/// `vsh serve ARGS` in `cwd` (stderr collected in the returned buffer), with `handler` as its client.
async fn serve_with(
    handler: Recorder,
    args: &[&str],
    cwd: &Path,
    key: &Path,
) -> (Client, std::sync::Arc<std::sync::Mutex<String>>) {
    let (transport, stderr) =
        TokioChildProcess::builder(tokio::process::Command::new(env!("CARGO_BIN_EXE_vsh")).configure(|cmd| {
            cmd.arg("serve").args(args).current_dir(cwd).env_clear().env("VSH_AUTHORITY_KEY", key);
        }))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    if let Some(mut stderr) = stderr {
        let log = std::sync::Arc::clone(&log);
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let mut buffer = [0_u8; 4096];
            while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
                log.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        });
    }
    (handler.serve(transport).await.unwrap(), log)
}

/// Whether the tests run as root (effective uid 0).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status.lines().any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(2) == Some("0"))
    })
}

/// A scratch directory holding an empty workspace `ws`, and the path of an
/// authority key beside it.
fn scratch() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let key = dir.path().join("authority.key");
    (dir, ws, key)
}

/// Wait (up to 30 s) until `log` holds `needle`.
async fn logged(log: &std::sync::Mutex<String>, needle: &str) -> bool {
    for _ in 0..300 {
        if log.lock().unwrap().contains(needle) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

const FOREVER: &str = "from pathlib import Path\nPath('late.txt').write_text('late')\nwhile True:\n    pass";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_stops_and_concurrent_requests_do_not_wait_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let key = dir.path().join("authority.key");
    let ws_arg = ws.to_str().unwrap();
    let (client, log) =
        serve_with(Recorder::default(), &["--workspace", ws_arg, "--timeout", "1m"], dir.path(), &key).await;

    // A run that would go on for its minute, cancelled after a moment: the
    // future is dropped, and the SDK sends notifications/cancelled.
    let arguments = json!({"code": FOREVER, "mode": "auto"}).as_object().unwrap().clone();
    let endless = client.call_tool(CallToolRequestParams::new("vsh_run").with_arguments(arguments));
    assert!(tokio::time::timeout(std::time::Duration::from_millis(600), endless).await.is_err(), "it runs on");
    assert!(
        logged(&log, "(vsh_run) was cancelled by the client; the run was stopped").await,
        "{}",
        log.lock().unwrap()
    );
    assert!(!ws.join("late.txt").exists());
    assert!(call(&client, "vsh_pending", json!({})).await.document["transactions"].as_array().unwrap().is_empty());

    // A long run and a quick one at once: the quick one answers first.
    let slow_arguments =
        json!({"code": "while True:\n    pass", "budget": {"timeout_ms": 3000}}).as_object().unwrap().clone();
    let slow = client.call_tool(CallToolRequestParams::new("vsh_run").with_arguments(slow_arguments));
    let quick = call(&client, "vsh_run", json!({"code": "from pathlib import Path\nPath('a.txt').read_text()"}));
    let order = std::sync::Mutex::new(Vec::new());
    let (slow, quick) = tokio::join!(
        async {
            let result = slow.await.unwrap();
            order.lock().unwrap().push("slow");
            result
        },
        async {
            let outcome = quick.await;
            order.lock().unwrap().push("quick");
            outcome
        }
    );
    assert_eq!(order.into_inner().unwrap(), ["quick", "slow"]);
    assert_eq!(quick.document["value"], "alpha\n");
    assert_eq!(slow.is_error, Some(true), "the slow run ends at its own 3 s limit");
    let slow_document = slow.structured_content.unwrap();
    assert_eq!(slow_document["kind"], "execution", "{slow_document}");
    client.cancel().await.unwrap();
}

/// sec81 2: an operator's rejection given while the agent's `vsh_rerun`
/// of the work ran did not cover the run, recorded after it, which the
/// agent then committed. The rerun finds the rejection when it ends: its
/// run is rejected with the work, in preview and in auto mode, and a
/// commit of any such run is refused.
async fn a_rejection_given_while_a_rerun_runs_covers_it(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path, key: &Path) {
    let program = "vsh_exec(['sleep', '4'])\nvsh_write('slow.txt', 'slow')";
    let first = call(client, "vsh_run", json!({"code": program})).await;
    assert_eq!(first.document["state"], "auto-approved", "{}", first.text);
    let first = first.document["transaction"].as_str().unwrap().to_owned();
    for mode in ["preview", "auto"] {
        let (at, key, rejecting) = (ws.to_owned(), key.to_owned(), first.clone());
        let operator = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            operator_rejects(&at, &key, &rejecting)
        });
        let rerun = call(client, "vsh_rerun", json!({"transaction": first, "again": true, "mode": mode})).await;
        operator.await.unwrap();
        assert!(rerun.is_error && rerun.text.contains("was rejected by an operator"), "{mode}: {}", rerun.text);
        assert!(!ws.join("slow.txt").exists(), "{mode}");
    }
    let pending = call(client, "vsh_pending", json!({})).await;
    assert!(!pending.text.contains(&first[..12]), "{}", pending.text);
}

/// A program that raised after writing names what it had changed, kept
/// nowhere, and not `accept_failure`, which is for Bash and commands (ux65 F6).
async fn a_failed_program_names_what_it_had_changed(client: &rmcp::Peer<rmcp::RoleClient>) {
    let raised = call(
        client,
        "vsh_run",
        json!({"code": "from pathlib import Path\nPath('half.txt').write_text('h')\nraise ValueError('no')"}),
    )
    .await;
    assert!(raised.is_error && raised.document["changes"][0]["path"] == "half.txt", "{}", raised.document);
    assert!(
        raised.text.contains(
            "a Monty program that fails (an exception it does not catch, or a budget it runs out of) keeps nothing"
        ) && raised.text.contains("half.txt")
            && !raised.text.contains("accept_failure"),
        "{}",
        raised.text
    );
}

/// A stale commit says what changed at each path (ux56), and what to do.
async fn a_stale_commit_says_what_changed_and_runs_again(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path) {
    std::fs::write(ws.join("src.txt"), "one\n").unwrap();
    let read = call(client, "vsh_run", json!({"code": "vsh_write('out.txt', vsh_read('src.txt'))"})).await;
    std::fs::write(ws.join("src.txt"), "two, longer\n").unwrap();
    let stale =
        call(client, "vsh_commit", json!({"transaction": read.document["transaction"].as_str().unwrap()})).await;
    // (Its size changed: 4 bytes, then 12.)
    assert!(stale.is_error && stale.text.contains("changed: src.txt  size or mode changed"), "{}", stale.text);
    assert_eq!(
        stale.document["path_changes"],
        json!(["size or mode changed since the run looked at it"]),
        "{}",
        stale.document
    );
    // Asked again, it says what stale means and what to do (ux58 5: no hint at all).
    let again =
        call(client, "vsh_commit", json!({"transaction": read.document["transaction"].as_str().unwrap()})).await;
    let hint = again.document["hint"].as_str().unwrap_or_default();
    let stale_id = read.document["transaction"].as_str().unwrap();
    let rerun_it = format!("vsh_rerun {}", &stale_id[..12]);
    assert!(again.is_error && hint.contains(&rerun_it), "{}", again.text);
    // Where it differs, as the first said (ux82 L8: no path the second time).
    assert_eq!(again.document["paths"], stale.document["paths"], "{}", again.document);
    assert_eq!(again.document["paths"], json!(["src.txt"]), "{}", again.document);
    // As one call too, as a receipt's `next` (ux73 M1).
    assert_eq!((&stale.document["next"], &again.document["next"]), (&json!(rerun_it), &json!(rerun_it)));
    // Its review names the same next step (ux63 5: null).
    let shown = call(client, "vsh_show", json!({"transaction": stale_id})).await;
    assert_eq!(shown.document["receipt"]["next"], rerun_it, "{}", shown.document);
    // And its text (ux65 F8: it said only "is stale").
    assert!(
        shown.text.contains("can never be committed (the workspace changed") && shown.text.contains(&rerun_it),
        "{}",
        shown.text
    );
    stale_work_runs_again(client, ws, stale_id).await;
}

/// ux81 M1: an agent's retry made the same change as its first run; one
/// committed, the other went stale, and its `next` was `vsh_rerun`, which
/// made the change twice. Nothing is left to do, and a rerun is refused.
async fn a_retry_whose_twin_is_committed_is_done(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path) {
    let program = "vsh_write('retry.txt', 'once\\n')";
    let first = call(client, "vsh_run", json!({"code": program})).await;
    let second = call(client, "vsh_run", json!({"code": program})).await;
    let id = |outcome: &Outcome| outcome.document["transaction"].as_str().unwrap().to_owned();
    assert!(!call(client, "vsh_commit", json!({"transaction": id(&first)})).await.is_error);
    let stale = call(client, "vsh_commit", json!({"transaction": id(&second)})).await;
    let hint = stale.document["hint"].as_str().unwrap_or_default();
    assert!(
        stale.is_error && hint.contains("nothing is left to do: the workspace holds every change"),
        "{}",
        stale.text
    );
    assert_eq!(stale.document["next"], Value::Null, "{}", stale.document);
    let shown = call(client, "vsh_show", json!({"transaction": id(&second)})).await;
    assert!(shown.text.contains("nothing is left to do") && !shown.text.contains("vsh_rerun"), "{}", shown.text);
    assert_eq!(shown.document["receipt"]["next"], Value::Null, "{}", shown.document);
    let rerun = call(client, "vsh_rerun", json!({"transaction": id(&second)})).await;
    assert!(rerun.is_error && rerun.text.contains("again=true runs it anyway"), "{}", rerun.text);
    // While a commit holds the lock, the server waits its --lock-timeout
    // (sec91: 60 s whatever the operator set), then refuses, running nothing.
    let lock = std::fs::File::open(ws.join(".vsh/commit.lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let started = std::time::Instant::now();
    let held = call(client, "vsh_rerun", json!({"transaction": id(&second)})).await;
    let waited = started.elapsed();
    drop(lock);
    assert!(held.is_error && held.text.contains("cannot be told now"), "{}", held.text);
    assert!(waited < std::time::Duration::from_secs(30), "{waited:?}");
}

/// ux75 M1: an auto run whose commit found the workspace changed was an
/// error with no record named and no next step. It names its stale record
/// and `vsh_rerun` of it. (The program reads, then sleeps in a command for
/// a few seconds, while the file it read is edited.)
async fn an_auto_run_gone_stale_names_its_record(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path) {
    std::fs::write(ws.join("cfg.txt"), "v1\n").unwrap();
    let edited = ws.join("cfg.txt");
    let editor = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        std::fs::write(edited, "v2, edited meanwhile\n").unwrap();
    });
    let program = "c = vsh_read('cfg.txt')\nvsh_exec(['sleep', '4'])\nvsh_write('cfg.out', c)";
    let ran = call(client, "vsh_run", json!({"code": program, "mode": "auto"})).await;
    editor.await.unwrap();
    assert!(ran.is_error, "{}", ran.text);
    let next = ran.document["next"].as_str().unwrap_or_default().to_owned();
    let stale = next.strip_prefix("vsh_rerun ").unwrap_or_else(|| panic!("{}", ran.document));
    let hint = ran.document["hint"].as_str().unwrap_or_default();
    assert!(hint.contains(&format!("its record, {stale}, is stale")), "{}", ran.document);
    let shown = call(client, "vsh_show", json!({"transaction": stale})).await;
    assert_eq!(shown.document["receipt"]["state"], "stale", "{}", shown.document);
    assert!(!ws.join("cfg.out").exists());
}

/// `vsh_rerun` runs stale work's program again as new work, on the
/// workspace as it is now, and it commits (ux65 F8: there was no rerun tool).
async fn stale_work_runs_again(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path, stale_id: &str) {
    let waiting = call(client, "vsh_rerun", json!({"transaction": &stale_id[..8]})).await;
    let listed = call(client, "vsh_pending", json!({})).await;
    let row = listed.document["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["transaction"] == waiting.document["transaction"])
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["rerun_of"], stale_id, "{}", listed.document);
    assert!(listed.text.contains(&format!("(rerun of {})", &stale_id[..12])), "{}", listed.text);
    // That run waits: it is the next step, and the text no longer also says
    // to run the work again (ux75 M5).
    let waiting_id = waiting.document["transaction"].as_str().unwrap();
    let (state, next) = match waiting.document["state"].as_str() {
        Some("pending-approval") => ("pending-approval", "vsh_wait"),
        _ => ("auto-approved", "vsh_commit"),
    };
    assert_eq!(waiting.document["state"], state, "{}", waiting.text);
    let shown = call(client, "vsh_show", json!({"transaction": stale_id})).await;
    assert_eq!(shown.document["receipt"]["next"], json!(format!("{next} {}", &waiting_id[..12])), "{}", shown.text);
    assert!(!shown.text.contains("vsh_rerun"), "{}", shown.text);
    assert!(
        shown.text.contains(&format!("another run of this work, {}, is {state}", &waiting_id[..12])),
        "{}",
        shown.text
    );
    assert!(!call(client, "vsh_discard", json!({"transaction": waiting_id})).await.is_error);
    let rerun = call(client, "vsh_rerun", json!({"transaction": &stale_id[..8], "mode": "auto"})).await;
    assert!(!rerun.is_error && rerun.document["state"] == "committed", "{}", rerun.text);
    assert_ne!(rerun.document["transaction"], stale_id);
    assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "two, longer\n");
    // Once more would do that work twice: refused, unless asked again.
    let twice = call(client, "vsh_rerun", json!({"transaction": stale_id})).await;
    assert!(twice.is_error && twice.text.contains("again=true") && twice.text.contains("committed"), "{}", twice.text);
    // The stale work's review now points at the run that landed, not at a
    // rerun it would refuse (ux73 L7).
    let shown = call(client, "vsh_show", json!({"transaction": stale_id})).await;
    let landed = rerun.document["transaction"].as_str().unwrap();
    assert_eq!(shown.document["receipt"]["next"], json!(format!("vsh_show {}", &landed[..12])), "{}", shown.document);
    assert!(
        shown.text.contains(&format!("another run of this work, {}, is committed", &landed[..12])),
        "{}",
        shown.text
    );
    // Nor is work that is itself committed run again (sec78 F4).
    let made_id = rerun.document["transaction"].as_str().unwrap();
    let itself = call(client, "vsh_rerun", json!({"transaction": made_id})).await;
    assert!(itself.is_error && itself.text.contains("is committed itself"), "{}", itself.text);
    let forced = call(client, "vsh_rerun", json!({"transaction": stale_id, "again": true})).await;
    assert!(!forced.is_error && forced.document["state"] == "auto-approved", "{}", forced.text);
    // A revert has no program: it is reverted again instead.
    let revert = call(client, "vsh_revert", json!({"transaction": made_id})).await;
    let of_revert = call(client, "vsh_rerun", json!({"transaction": revert.document["transaction"]})).await;
    assert!(
        of_revert.is_error && of_revert.text.contains(&format!("vsh_revert {}", &made_id[..12])),
        "{}",
        of_revert.text
    );
    // A run with no such id says so; a bad mode is refused before anything runs.
    let missing = call(client, "vsh_rerun", json!({"transaction": "abcdef12"})).await;
    assert!(missing.is_error, "{}", missing.text);
    let sideways = call(client, "vsh_rerun", json!({"transaction": stale_id, "mode": "sideways"})).await;
    assert!(sideways.is_error, "{}", sideways.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_stay_within_the_servers_and_long_texts_are_cut_with_a_note() {
    let (dir, ws, key) = scratch();
    let ws_arg = ws.to_str().unwrap();
    let (client, _log) = serve_with(
        Recorder::default(),
        &["--workspace", ws_arg, "--max-text", "400", "--lock-timeout", "1"],
        dir.path(),
        &key,
    )
    .await;

    // Above the server's ceiling: refused, naming the operator's flag.
    let above = call(&client, "vsh_run", json!({"code": "1", "budget": {"timeout_ms": 5000}})).await;
    assert!(above.is_error && above.document["kind"] == "request", "{}", above.document);
    assert!(above.document["message"].as_str().unwrap().contains("--timeout"), "{}", above.document);
    // Arguments that do not fit the tool's input schema (an unknown budget
    // field) are a tool error the agent can correct, naming the field.
    let malformed = json!({"code": "1", "budget": {"max_wishes": 3}}).as_object().unwrap().clone();
    let unknown = client.call_tool(CallToolRequestParams::new("vsh_run").with_arguments(malformed)).await.unwrap();
    assert_eq!(unknown.is_error, Some(true));
    assert!(format!("{:?}", unknown.content).contains("max_wishes"), "{unknown:?}");
    // What this Monty lacks gets the alternative, addressed to the agent
    // that wrote the program, not to the operator (ux57).
    let walked = call(&client, "vsh_run", json!({"code": "import os\nfor r, d, f in os.walk('.'):\n    pass"})).await;
    let hint = walked.document["hint"].as_str().unwrap_or_default();
    assert!(hint.starts_with("this Monty has no os.walk: vsh_glob") && !hint.contains("operator"), "{}", walked.text);
    // A tool it does not have is an error naming those it has, and where a
    // Monty function of the same name belongs (ux55 #9).
    let params =
        CallToolRequestParams::new("vsh_exec").with_arguments(json!({"argv": ["ls"]}).as_object().unwrap().clone());
    let unknown = client.call_tool(params).await.unwrap_err().to_string();
    assert!(unknown.contains("vsh_run, ") && unknown.contains("a function a vsh_run program calls"), "{unknown}");
    a_stale_commit_says_what_changed_and_runs_again(&client, &ws).await;
    a_retry_whose_twin_is_committed_is_done(&client, &ws).await;
    // An id never found (a run that changed nothing is not kept, once its
    // server is gone) says so.
    for tool in ["vsh_commit", "vsh_show", "vsh_discard"] {
        let missing = call(&client, tool, json!({"transaction": "abcdef12"})).await;
        let hint = missing.document["hint"].as_str().unwrap_or_default();
        assert!(missing.is_error && hint.contains("changes nothing is not kept"), "{tool}: {}", missing.text);
    }
    // Below it: the run's own, lower limit applies.
    let lower = call(&client, "vsh_run", json!({"code": "print('x' * 100)", "budget": {"max_output_bytes": 10}})).await;
    assert!(lower.is_error && lower.document["kind"] == "execution", "{}", lower.document);
    assert!(lower.document["message"].as_str().unwrap().contains("output"), "{}", lower.document);
    // Its own budget is the agent's to raise, not the operator's (ux74 M2).
    let hint = lower.document["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("raise budget.max_output_bytes") && !hint.contains("operator"), "{}", lower.text);
    a_failed_program_names_what_it_had_changed(&client).await;
    // A run its own budget's time ended is the agent's to give more (ux53).
    let short = call(&client, "vsh_run", json!({"code": "while True:\n    pass", "budget": {"timeout_ms": 300}})).await;
    let hint = short.document["hint"].as_str().unwrap_or_default();
    assert!(
        short.is_error && hint.contains("raise budget.timeout_ms") && !hint.contains("--timeout"),
        "{}",
        short.text
    );

    // Long stdout, a long value and long hunks are cut, and the result says so.
    let program =
        "from pathlib import Path\nPath('big.txt').write_text('line\\n' * 2000)\nprint('o' * 3000)\n'v' * 3000";
    let run = call(&client, "vsh_run", json!({"code": program, "detail": "full"})).await;
    assert!(!run.is_error, "{}", run.text);
    let stdout = run.document["stdout"].as_str().unwrap();
    assert!(stdout.chars().count() < 500 && stdout.contains("characters cut"), "{stdout}");
    assert!(stdout.starts_with("oooo") && stdout.ends_with("o\n"), "head and tail are kept: {stdout}");
    assert!(run.document["value"]["$repr"].as_str().is_some_and(|text| text.contains("characters cut")));
    assert_eq!(run.document["review"][0]["no_hunks"], "budget-spent", "{}", run.document["review"]);
    let warnings: Vec<&str> =
        run.document["warnings"].as_array().unwrap().iter().map(|warning| warning.as_str().unwrap()).collect();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings.iter().any(|warning| warning.starts_with("stdout (3001 characters)")), "{warnings:?}");
    assert!(run.text.len() < 2_000 && run.text.contains("note: stdout"), "{}", run.text);
    let id = run.document["transaction"].as_str().unwrap().to_owned();
    let shown = call(&client, "vsh_show", json!({"transaction": id})).await;
    assert_eq!(shown.document["program"], program, "a program that fits is whole");
    assert_eq!(shown.document["receipt"]["review"][0]["no_hunks"], "budget-spent");
    // ux55 #1: the path lists are bounded too, in characters as well as in
    // paths, and a directory reviews what is beneath it.
    let many = "from pathlib import Path\nPath('many').mkdir()\nfor n in range(60):\n    \
                Path(f'many/f{n:02}.txt').write_text('x')\nPath('other.txt').write_text('o')";
    let run = call(&client, "vsh_run", json!({"code": many, "detail": "full"})).await;
    let listed = run.document["changes"].as_array().unwrap().len();
    let reviewed = run.document["review"].as_array().unwrap().len();
    assert!((1..10).contains(&listed) && (1..20).contains(&reviewed), "{listed} {reviewed}: {}", run.document);
    let serialized = run.document.to_string().len();
    assert!(serialized < 8 * 400 + 4_000, "{serialized}: {}", run.document);
    let notes = run.document["warnings"].to_string();
    assert!(notes.contains(&format!("changes lists the first {listed} of 62 paths")), "{notes}");
    assert!(run.text.contains(&format!("... and {} more paths: vsh_show", 62 - listed)), "{}", run.text);
    let id = run.document["transaction"].as_str().unwrap().to_owned();
    let below = call(&client, "vsh_show", json!({"transaction": id, "paths": ["many", "gone"]})).await;
    let notes = below.document["receipt"]["warnings"].to_string();
    assert!(notes.contains("of 61 paths"), "many/ and its 60 files: {notes}");
    assert!(below.text.contains("not changed by this transaction: \"gone\""), "{}", below.text);
    let changes = below.document["receipt"]["changes"].as_array().unwrap();
    assert!(changes.iter().all(|entry| entry["path"].as_str().unwrap().starts_with("many")), "{changes:?}");
    // A large change's shape first, without hunks; or the outcome alone (ux56 #2).
    let shape = call(&client, "vsh_show", json!({"transaction": id, "detail": "changes"})).await;
    assert!(shape.document["receipt"]["review"].as_array().unwrap().is_empty(), "{}", shape.document);
    assert!(!shape.document["receipt"]["changes"].as_array().unwrap().is_empty());
    let outcome = call(&client, "vsh_show", json!({"transaction": id, "detail": "compact"})).await;
    assert!(outcome.document["receipt"]["changes"].as_array().unwrap().is_empty(), "{}", outcome.document);
    let wrong = call(&client, "vsh_show", json!({"transaction": id, "detail": "hunks"})).await;
    assert!(wrong.is_error && wrong.text.contains("give full, changes or compact"), "{}", wrong.text);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_says_what_it_left_without_hunks_and_reviews_those_paths_when_asked() {
    let (dir, ws, key) = scratch();
    let lines: String = (0..20_000).map(|index| format!("line {index}\n")).collect::<Vec<_>>().concat();
    std::fs::write(ws.join("big.txt"), &lines).unwrap();
    std::fs::write(ws.join("small.txt"), "small\n").unwrap();
    let ws_arg = ws.to_str().unwrap();
    let (client, _log) = serve_with(Recorder::default(), &["--workspace", ws_arg], dir.path(), &key).await;
    let edit = "from pathlib import Path\nfor name in ['big.txt', 'small.txt']:\n    p = Path(name)\n    \
                p.write_text(p.read_text().replace('line 5\\n', 'LINE FIVE\\n', 1) + 'end\\n')";
    let run = call(&client, "vsh_run", json!({"code": edit})).await;
    let id = run.document["transaction"].as_str().unwrap().to_owned();
    let shown = call(&client, "vsh_show", json!({"transaction": id})).await;
    assert!(shown.text.contains("+end") && !shown.text.contains("+LINE FIVE"), "{}", shown.text);
    assert!(shown.text.contains("note: 1 changed path left without hunks") && shown.text.contains("[\"big.txt\"]"));
    let asked = call(&client, "vsh_show", json!({"transaction": id, "paths": ["big.txt", "nope.txt"]})).await;
    assert!(asked.text.contains("+LINE FIVE") && !asked.text.contains("left without hunks"), "{}", asked.text);
    assert!(asked.text.contains("not changed by this transaction: \"nope.txt\""), "{}", asked.text);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_reports_progress() {
    let (dir, ws, key) = scratch();
    let handler = Recorder::default();
    let progress = std::sync::Arc::clone(&handler.progress);
    let ws_arg = ws.to_str().unwrap();
    let (client, _log) = serve_with(handler, &["--workspace", ws_arg, "--timeout", "10s"], dir.path(), &key).await;
    let mut params = CallToolRequestParams::new("vsh_run").with_arguments(
        json!({"code": "while True:\n    pass", "budget": {"timeout_ms": 2500}}).as_object().unwrap().clone(),
    );
    params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::String("run-1".into()),
    )));
    let result = client.call_tool(params).await.unwrap();
    assert_eq!(result.is_error, Some(true), "it ends at its limit");
    let seen = progress.lock().unwrap().clone();
    assert!(seen.len() >= 2, "one notification a second: {seen:?}");
    // (The SDK gives every request a progress token of its own.)
    assert!(seen.iter().all(|note| note.progress_token == seen[0].progress_token), "{seen:?}");
    assert!(seen.windows(2).all(|pair| pair[0].progress < pair[1].progress), "progress grows: {seen:?}");
    assert!(seen[0].message.as_deref().is_some_and(|message| message.contains("running")), "{seen:?}");
    // The total is the run's own time limit (the budget's 2.5 s), not the request's outer bound.
    assert!(seen.iter().all(|note| note.total == Some(2.5)), "{seen:?}");
    // A quick run sends none.
    let before = progress.lock().unwrap().len();
    let mut quick =
        CallToolRequestParams::new("vsh_run").with_arguments(json!({"code": "1"}).as_object().unwrap().clone());
    quick.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::String("run-2".into()),
    )));
    assert_ne!(client.call_tool(quick).await.unwrap().is_error, Some(true));
    assert_eq!(progress.lock().unwrap().len(), before);
    // A wait reports as a wait, not as a run (ux82 L4).
    std::fs::write(ws.join("w.txt"), "w\n").unwrap();
    let waiting = call(&client, "vsh_run", json!({"code": "from pathlib import Path\nPath('w.txt').unlink()"})).await;
    let mut wait = CallToolRequestParams::new("vsh_wait").with_arguments(
        json!({"transaction": waiting.document["transaction"], "timeout_ms": 2500}).as_object().unwrap().clone(),
    );
    wait.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::String("wait-1".into()),
    )));
    assert_ne!(client.call_tool(wait).await.unwrap().is_error, Some(true));
    let seen = progress.lock().unwrap()[before..].to_vec();
    assert!(!seen.is_empty(), "{seen:?}");
    assert!(seen.iter().all(|note| note.message.as_deref().is_some_and(|m| m.starts_with("waiting for an operator"))));
    // Its limit in tenths of a second (ux85: 2,500 ms was "3 s").
    assert!(seen.iter().all(|note| note.message.as_deref().is_some_and(|m| m.ends_with("(gives up after 2.5 s)"))));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_workspace_the_server_works_in_the_root_the_client_offers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    let key = dir.path().join("authority.key");
    let uri = format!("file://{}", root.canonicalize().unwrap().display());
    let handler =
        Recorder { roots: Some(vec![uri, "https://example.com/not-a-directory".to_owned()]), ..Recorder::default() };
    let program = json!({"code": "from pathlib import Path\nPath('made.txt').write_text('here')", "mode": "auto"});
    // Not yet a workspace, and the server was started elsewhere: the client
    // makes none there (sec51 F3: a client offered /etc), and says how.
    let (client, _log) = serve_with(handler.clone(), &[], &elsewhere, &key).await;
    let refused = call(&client, "vsh_run", program.clone()).await;
    assert!(refused.is_error && refused.text.contains("vsh init --workspace"), "{}", refused.text);
    assert!(!root.join(".vsh").exists() && !root.join("made.txt").exists());
    client.cancel().await.unwrap();
    // Once the operator made it one, the client's root is the workspace.
    let init = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["init", "--workspace"])
        .arg(&root)
        .env_clear()
        .env("VSH_AUTHORITY_KEY", &key)
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let (client, _log) = serve_with(handler, &[], &elsewhere, &key).await;
    let run = call(&client, "vsh_run", program).await;
    assert_eq!(run.document["state"], "committed", "{}", run.text);
    assert_eq!(std::fs::read_to_string(root.join("made.txt")).unwrap(), "here");
    assert!(!elsewhere.join("made.txt").exists() && !elsewhere.join(".vsh").exists());
    client.cancel().await.unwrap();

    // Two roots and no way to choose: a tool error naming --workspace, and nothing made.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let uris = [&root, &other].map(|dir| format!("file://{}", dir.canonicalize().unwrap().display())).to_vec();
    let handler = Recorder { roots: Some(uris), ..Recorder::default() };
    let (client, _log) = serve_with(handler, &[], &elsewhere, &key).await;
    let refused = call(&client, "vsh_run", json!({"code": "1"})).await;
    assert!(
        refused.is_error && refused.document["message"].as_str().unwrap().contains("--workspace"),
        "{}",
        refused.text
    );
    assert!(!other.join(".vsh").exists() && !elsewhere.join(".vsh").exists());
    client.cancel().await.unwrap();
}

/// On a server with `--commands`, the budgets its instructions state: a
/// command's for a command and for each command a Monty program runs, and a
/// program's own running time for the program (ux85 M1).
async fn budgets_of_programs_and_commands(
    client: &rmcp::Peer<rmcp::RoleClient>,
    progress: &std::sync::Mutex<Vec<rmcp::model::ProgressNotificationParam>>,
) {
    // The instructions state both budgets: a program's, and a command's.
    let instructions = client.peer_info().and_then(|info| info.instructions.clone()).unwrap_or_default();
    assert!(instructions.contains("a real command (language=command) 600000 ms of running time"), "{instructions}");
    assert!(
        instructions.contains("a Monty program, which may run commands with vsh_exec, a real command's limits but 1000 ms of its own running time"),
        "{instructions}"
    );
    // A command, and a command a program runs, get a command's time.
    let argv = json!(["/bin/sh", "-c", "sleep 1.2; echo slow"]).to_string();
    let slow = call(client, "vsh_run", json!({"code": argv, "language": "command"})).await;
    assert!(!slow.is_error, "{}", slow.document);
    assert_eq!(slow.document["stdout"], "slow\n", "{}", slow.document);
    let before = progress.lock().unwrap().len();
    let slow = call(client, "vsh_run", json!({"code": "vsh_exec(['sleep', '1.5'])"})).await;
    assert!(!slow.is_error, "{}", slow.document);
    assert_eq!(slow.document["value"], json!([0, "", ""]), "{}", slow.document);
    // Its progress says both limits (ux86 L1: "its time limit is 600 s").
    let seen = progress.lock().unwrap()[before..].to_vec();
    let own = "the program's own time limit is 1.0 s, its commands' time not counted; each command it runs has 600 s";
    assert!(seen.iter().any(|note| note.message.as_deref().is_some_and(|m| m.contains(own))), "{seen:?}");
    // A program's own time stays a program's (ux85 M1: a loop ran 600 s).
    let looping = call(client, "vsh_run", json!({"code": "while True:\n    pass"})).await;
    assert!(looping.is_error, "{}", looping.document);
    assert!(looping.text.contains("duration limit 1 s exceeded"), "{}", looping.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_commands_reach_agents_only_when_the_operator_serves_them() {
    let available = is_root() && Path::new("/dev/fuse").exists();
    assert!(available || std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "needs root and /dev/fuse");
    if !available {
        return;
    }
    let (dir, ws, key) = scratch();
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let ws_arg = ws.to_str().unwrap();
    // Without --commands: an agent can neither run a command nor call vsh_exec.
    let (plain, _log) = serve_with(Recorder::default(), &["--workspace", ws_arg], dir.path(), &key).await;
    let refused = call(&plain, "vsh_run", json!({"code": "[\"cat\", \"notes.txt\"]", "language": "command"})).await;
    assert!(
        refused.is_error && refused.document["message"].as_str().unwrap().contains("--commands"),
        "{}",
        refused.document
    );
    let nested = call(&plain, "vsh_run", json!({"code": "vsh_exec(['true'])"})).await;
    assert!(nested.is_error, "{}", nested.document);
    let bash = call(&plain, "vsh_run", json!({"code": "make test", "language": "bash"})).await;
    assert!(
        bash.document["hint"].as_str().is_some_and(|hint| hint.contains("vsh run --confined")),
        "{}",
        bash.document
    );
    plain.cancel().await.unwrap();
    // With it: a command is a run like any, and so is a program's vsh_exec, with the operator's environment.
    let serve_args = ["--workspace", ws_arg, "--commands", "--env", "GREETING=hi"];
    let recorder = Recorder::default();
    let progress = std::sync::Arc::clone(&recorder.progress);
    let (client, _log) = serve_with(recorder, &serve_args, dir.path(), &key).await;
    budgets_of_programs_and_commands(&client, &progress).await;
    let argv = json!(["/bin/sh", "-c", "echo $GREETING > out.txt; tr a-z A-Z < notes.txt"]).to_string();
    let run = call(&client, "vsh_run", json!({"code": argv, "language": "command", "mode": "auto"})).await;
    assert!(!run.is_error, "{}", run.document);
    assert_eq!(run.document["language"], "command");
    assert_eq!(run.document["stdout"], "HELLO\n");
    assert_eq!(run.document["state"], "committed", "{}", run.document);
    assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "hi\n");
    // The argv as JSON itself, as a model naturally sends it: a command,
    // with or without `language`; an object too. Not as a Monty program.
    let as_array = json!({"code": ["/bin/sh", "-c", "echo array > array.txt"], "mode": "auto"});
    let run = call(&client, "vsh_run", as_array).await;
    assert_eq!(
        (run.document["language"].as_str(), run.document["state"].as_str()),
        (Some("command"), Some("committed"))
    );
    assert_eq!(std::fs::read_to_string(ws.join("array.txt")).unwrap(), "array\n");
    let as_object = json!({"code": {"argv": ["cat"], "stdin": "in\n"}, "language": "command"});
    assert_eq!(call(&client, "vsh_run", as_object).await.document["stdout"], "in\n");
    let as_monty = call(&client, "vsh_run", json!({"code": ["true"], "language": "monty"})).await;
    assert!(as_monty.is_error && as_monty.text.contains("language \"command\""), "{}", as_monty.text);
    // ux54 #7: the argv as a string, no language: refused, not a Monty list that "changes nothing".
    for code in ["[\"rm\", \"notes.txt\"]", " {\"argv\": [\"rm\", \"notes.txt\"]}\n"] {
        let as_text = call(&client, "vsh_run", json!({"code": code, "mode": "auto"})).await;
        assert!(as_text.is_error && as_text.text.contains("language \"command\""), "{}", as_text.text);
    }
    assert!(ws.join("notes.txt").exists());
    // A Monty program that builds a list of other values is still one.
    let listed = call(&client, "vsh_run", json!({"code": "[1, 'a']"})).await;
    assert!(!listed.is_error, "{}", listed.text);
    let program = "from pathlib import Path\nPath('notes.txt').write_text('edited\\n')\nvsh_exec(['cat', 'notes.txt'])";
    let nested = call(&client, "vsh_run", json!({"code": program})).await;
    assert!(!nested.is_error, "{}", nested.document);
    assert_eq!(nested.document["value"], json!([0, "edited\n", ""]), "{}", nested.document);
    // An agent gives a command its input in the program text, and a program
    // gives vsh_exec its own.
    let fed = json!({"argv": ["/bin/sh", "-c", "tr a-z A-Z > shout.txt"], "stdin": "quiet\n"}).to_string();
    let run = call(&client, "vsh_run", json!({"code": fed, "language": "command", "mode": "auto"})).await;
    assert_eq!(run.document["state"], "committed", "{}", run.document);
    assert_eq!(std::fs::read_to_string(ws.join("shout.txt")).unwrap(), "QUIET\n");
    let nested = call(&client, "vsh_run", json!({"code": "vsh_exec(['wc', '-c'], input='four')"})).await;
    assert_eq!(nested.document["value"], json!([0, "4\n", ""]), "{}", nested.document);
    // A failing command's text says why it failed: what it printed on each stream.
    let argv = json!(["/bin/sh", "-c", "echo ran 3 tests; echo 'AssertionError: 1 != 2' >&2; exit 1"]).to_string();
    let failed = call(&client, "vsh_run", json!({"code": argv, "language": "command"})).await;
    assert!(failed.is_error, "{}", failed.document);
    for line in ["exit status: 1", "stdout:\nran 3 tests", "stderr:\nAssertionError: 1 != 2"] {
        assert!(failed.text.contains(line), "{line}: {}", failed.text);
    }
    // One that failed for want of a hidden file says so, naming it.
    let hidden = call(&client, "vsh_run", json!({"code": ["cat", ".env.test"], "language": "command"})).await;
    assert!(
        hidden.is_error && hidden.text.contains("note: the program looked 1 time at paths hidden from it (.env.test;"),
        "{}",
        hidden.text
    );
    // A program not found: what the command line advises, for the operator (ux51).
    let missing = call(&client, "vsh_run", json!({"code": ["cargo-nowhere"], "language": "command"})).await;
    let hint = missing.document["hint"].as_str().unwrap_or_default();
    assert!(hint.starts_with("for the operator") && hint.contains("--tool DIR"), "{}", missing.text);
    // Kept to its last 16 KiB in the text (the structured result has more).
    let argv = json!(["/bin/sh", "-c", "yes x | head -c 40000 >&2; echo last line >&2; exit 1"]).to_string();
    let long = call(&client, "vsh_run", json!({"code": argv, "language": "command"})).await;
    assert!(long.text.contains("characters before these are left out") && long.text.ends_with("last line\n"));
    assert!(long.text.len() < 20_000, "{}", long.text.len());
    assert!(long.document["stderr"].as_str().unwrap().len() > 40_000);
    // A passing one's too, and a run that changes nothing has nothing to commit.
    let argv = json!(["/bin/sh", "-c", "echo warned >&2"]).to_string();
    let quiet = call(&client, "vsh_run", json!({"code": argv, "language": "command"})).await;
    assert!(quiet.text.contains("exit status: 0") && quiet.text.contains("stderr:\nwarned"), "{}", quiet.text);
    assert!(quiet.text.contains("nothing to commit") && !quiet.text.contains("vsh_commit"), "{}", quiet.text);
    while_commands_run(&client, &ws, &key).await;
    client.cancel().await.unwrap();
}

/// What a server that runs commands does while they run (they sleep).
async fn while_commands_run(client: &rmcp::Peer<rmcp::RoleClient>, ws: &Path, key: &Path) {
    pending_names_the_command(client).await;
    bash_that_needs_programs_is_pointed_at_commands(client).await;
    an_auto_run_gone_stale_names_its_record(client, ws).await;
    a_rejection_given_while_a_rerun_runs_covers_it(client, ws, key).await;
}

/// A Bash program that calls an installed program fails in the bounded
/// interpreter; on a server that runs real commands the agent is told how
/// to run it in real bash itself (ux68 M5: it was sent to the operator).
async fn bash_that_needs_programs_is_pointed_at_commands(client: &rmcp::Peer<rmcp::RoleClient>) {
    let bash = call(client, "vsh_run", json!({"code": "make test", "language": "bash"})).await;
    let hint = bash.document["hint"].as_str().unwrap_or_default();
    assert!(bash.is_error && hint.contains("\"code\": [\"bash\", \"-c\", SCRIPT]"), "{}", bash.document);
    assert!(!hint.contains("for the operator"), "{hint}");
}

/// `vsh_pending`'s text says what each preview of a command ran, as `vsh
/// pending` does, and how many paths it changes.
async fn pending_names_the_command(client: &rmcp::Peer<rmcp::RoleClient>) {
    let argv = json!(["/bin/sh", "-c", "echo p > p.txt"]).to_string();
    let preview = call(client, "vsh_run", json!({"code": argv, "language": "command"})).await;
    let id = preview.document["transaction"].as_str().unwrap().to_owned();
    let pending = call(client, "vsh_pending", json!({})).await;
    let first = pending.text.lines().next().unwrap_or_default();
    assert!(first.starts_with(&format!("{} auto-approved 1 path, made ", &id[..12])), "newest first: {}", pending.text);
    assert!(first.ends_with(" ago: $ /bin/sh -c 'echo p > p.txt'"), "{}", pending.text);
}

/// Every line a client sends gets an answer: a request over the line limit
/// is refused with its id (rmcp alone drops it without a word, and the
/// client waits forever), a line that is not JSON is a parse error, and the
/// server goes on answering.
#[test]
fn an_oversized_or_unparsable_line_is_answered_and_the_server_goes_on() {
    use std::io::{BufRead as _, Write as _};
    let (_dir, ws, key) = scratch();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["serve", "--workspace"])
        .arg(&ws)
        .env_clear()
        .env("VSH_AUTHORITY_KEY", &key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    // Lines are read on a thread of their own, so a request left without an
    // answer fails the test after a while instead of hanging it.
    let (lines, answers) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            if lines.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let answer = || {
        let line = answers.recv_timeout(std::time::Duration::from_mins(1)).expect("an answer within a minute");
        serde_json::from_str::<Value>(&line).unwrap_or_else(|error| panic!("{error}: {line:?}"))
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    assert_eq!(answer()["id"], 1);
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    // 20 MiB of program: past any limit a line may have.
    let huge = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "vsh_run", "arguments": {"code": "x".repeat(20 << 20)}}});
    writeln!(stdin, "{huge}").unwrap();
    let refused = answer();
    assert_eq!((refused["id"].clone(), refused["error"]["code"].clone()), (json!(7), json!(-32600)), "{refused}");
    writeln!(stdin, "{{not json").unwrap();
    let parse = answer();
    assert_eq!((parse["id"].clone(), parse["error"]["code"].clone()), (Value::Null, json!(-32700)), "{parse}");
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 8, "method": "ping"})).unwrap();
    let pong = answer();
    assert_eq!((pong["id"].clone(), pong.get("error")), (json!(8), None), "{pong}");
    // A known method with params that do not fit it is -32602 (invalid
    // params), naming what does not fit; an unknown method -32601.
    let unfit = [
        (9, "tools/call", json!({"name": "vsh_run", "arguments": "print(1)"}), -32602),
        (10, "tools/call", json!({"arguments": {}}), -32602),
        (11, "tools/call", json!(["vsh_run"]), -32602),
        (12, "tools/list", json!("all of them"), -32602),
        (13, "tools/unheard-of", json!({}), -32601),
    ];
    for (id, method, params, code) in unfit {
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        let refused = answer();
        assert_eq!((refused["id"].clone(), refused["error"]["code"].clone()), (json!(id), json!(code)), "{refused}");
        if code == -32602 {
            let message = refused["error"]["message"].as_str().unwrap_or_default();
            assert!(message.starts_with(&format!("invalid params for {method}: ")), "{refused}");
        }
    }
    // Params that fit are served as before.
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 14, "method": "tools/list", "params": {}})).unwrap();
    let tools = answer();
    assert_eq!(tools["id"], 14, "{tools}");
    assert!(tools["result"]["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{tools}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A new user tightened the policy (`vsh init --force --profile strict`)
/// while an agent was connected, and the agent went on auto-approving and
/// committing under the old one (ux50, High). Each call now works under the
/// policy recorded at that moment: the server opens its runtime again, and
/// what it held under the replaced policy is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_works_under_the_policy_the_operator_records_while_it_runs() {
    let (dir, ws, key) = scratch();
    std::fs::write(ws.join("keep.txt"), "keep\n").unwrap();
    let ws_arg = ws.to_str().unwrap();
    let init = |profile: &str| {
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["init", "-q", "--force", "--profile", profile, "--workspace", ws_arg])
            .env_clear()
            .env("VSH_AUTHORITY_KEY", &key)
            .status()
            .unwrap();
        assert!(status.success());
    };
    init("balanced");
    let (client, _log) = serve_with(Recorder::default(), &["--workspace", ws_arg], dir.path(), &key).await;
    let before = call(&client, "vsh_run", json!({"code": "vsh_write('before.txt', 'x')"})).await;
    assert_eq!(before.document["state"], "auto-approved", "{}", before.text);
    let before_id = before.document["transaction"].as_str().unwrap().to_owned();
    init("strict");
    // Work made under the replaced policy is not committed.
    let commit = call(&client, "vsh_commit", json!({"transaction": before_id})).await;
    assert!(commit.is_error, "{}", commit.text);
    assert!(!ws.join("before.txt").exists(), "committed under the replaced policy");
    // The agent is told so, and what it can do (its tool, not the command
    // line's `vsh rerun`): in the commit's hint, its review and the pending
    // list (ux51).
    let hint = commit.document["hint"].as_str().unwrap_or_default();
    assert_eq!(commit.document["next"], json!(format!("vsh_rerun {}", &before_id[..12])), "{}", commit.document);
    assert!(
        hint.contains(&format!("vsh_rerun {}", &before_id[..12])) && !hint.contains("vsh rerun"),
        "{}",
        commit.text
    );
    let shown = call(&client, "vsh_show", json!({"transaction": before_id})).await;
    assert_eq!(shown.document["record"]["policy_changed"], true, "{}", shown.text);
    assert!(shown.text.contains("policy changed") && !shown.text.contains("vsh_commit"), "{}", shown.text);
    let pending = call(&client, "vsh_pending", json!({})).await;
    let rows = pending.document["transactions"].as_array().unwrap();
    assert!(rows.iter().any(|row| row["policy_changed"] == true), "{}", pending.text);
    assert!(pending.text.contains("policy since replaced"), "{}", pending.text);
    // New work is decided under the policy recorded now: strict holds it.
    let after = call(&client, "vsh_run", json!({"code": "vsh_write('after.txt', 'y')"})).await;
    assert_eq!(after.document["state"], "pending-approval", "{}", after.text);
    let after_id = after.document["transaction"].as_str().unwrap().to_owned();
    assert!(call(&client, "vsh_commit", json!({"transaction": after_id})).await.is_error);
    assert!(!ws.join("after.txt").exists());
    // Pending work whose policy is then replaced is never approved: its
    // commit's hint says what the agent can do, not "await approval" (ux52).
    init("balanced");
    let pending = call(&client, "vsh_commit", json!({"transaction": after_id})).await;
    let hint = pending.document["hint"].as_str().unwrap_or_default();
    assert!(pending.is_error && hint.contains("vsh_rerun") && !hint.contains("vsh approve"), "{}", pending.text);
    // A wait for it ends at once, saying why (ux80 M4: it waited its time out).
    let started = std::time::Instant::now();
    let waited = call(&client, "vsh_wait", json!({"transaction": after_id, "timeout_ms": 20_000})).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{}", waited.text);
    assert!(
        waited.text.starts_with("nothing to wait for: it was made under a policy since replaced"),
        "{}",
        waited.text
    );
    // Run again, it is decided under the policy in force now.
    let again = call(&client, "vsh_rerun", json!({"transaction": after_id})).await;
    assert_eq!(again.document["state"], "auto-approved", "{}", again.text);
    // Work its operator made under a policy given to that run alone is the
    // operator's: the agent is told so, and cannot discard it (sec58 4).
    let mut operator = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["run", "--json", "--profile", "strict", "--workspace", ws_arg, "-"])
        .env_clear()
        .env("VSH_AUTHORITY_KEY", &key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut operator.stdin.take().unwrap(), b"vsh_write('ops.txt', 'o')").unwrap();
    let made: Value = serde_json::from_slice(&operator.wait_with_output().unwrap().stdout).unwrap();
    let ops_id = made["transaction"].as_str().unwrap().to_owned();
    let shown = call(&client, "vsh_show", json!({"transaction": ops_id})).await;
    assert!(shown.text.contains("only the operator reviews, approves and commits it"), "{}", shown.text);
    // It waits for its operator, whose policy it was made under: no "never
    // approved" (sec85 F3).
    let waited = call(&client, "vsh_wait", json!({"transaction": ops_id, "timeout_ms": 1_000})).await;
    assert!(waited.text.starts_with("still waiting"), "{}", waited.text);
    let discard = call(&client, "vsh_discard", json!({"transaction": ops_id})).await;
    assert!(discard.is_error && discard.text.contains("leave it to them"), "{}", discard.text);
    // Nor run it again, which would give its program (sec78 F3: a rerun's
    // error and stored program did, where vsh_show does not).
    let rerun = call(&client, "vsh_rerun", json!({"transaction": ops_id, "again": true})).await;
    assert!(rerun.is_error && rerun.text.contains("only the operator runs it again"), "{}", rerun.text);
    assert!(!rerun.text.contains("ops.txt"), "{}", rerun.text);
    let still = call(&client, "vsh_pending", json!({})).await;
    assert!(still.document["transactions"].to_string().contains(&ops_id), "{}", still.text);
    assert!(still.text.contains("the operator decides it"), "{}", still.text);
    client.cancel().await.unwrap();
}

/// A storage failure stopped the server's runtime for good: its blob store,
/// poisoned by a write the data directory refused, made every later call
/// fail until the server was restarted. The next call opens a runtime
/// that reads the disk afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_a_storage_failure_stopped_is_opened_again() {
    if !is_root() {
        assert!(std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(), "needs root for chattr +i");
        return;
    }
    let (dir, ws, key) = scratch();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let ws_arg = ws.to_str().unwrap();
    let (client, _log) = serve_with(Recorder::default(), &["--workspace", ws_arg], dir.path(), &key).await;
    // Opened, with no blob stored yet.
    let first = call(&client, "vsh_pending", json!({})).await;
    assert!(!first.is_error && !ws.join(".vsh/data/blobs").exists(), "{}", first.text);
    let data = ws.join(".vsh/data");
    let chattr = |flag: &str| std::process::Command::new("chattr").args([flag, data.to_str().unwrap()]).status();
    assert!(chattr("+i").is_ok_and(|status| status.success()), "chattr +i");
    // Storing its contents needs a new directory there, which the data
    // directory refuses: the blob store stops.
    let edit = json!({"code": "vsh_write('a.txt', 'a, edited\\n')", "mode": "auto"});
    let edited = call(&client, "vsh_run", edit).await;
    assert!(chattr("-i").is_ok_and(|status| status.success()), "chattr -i");
    assert!(edited.is_error && edited.text.contains("create blob directory"), "{}", edited.text);
    let after = call(&client, "vsh_run", json!({"code": "vsh_write('c.txt', 'c')", "mode": "auto"})).await;
    assert!(!after.is_error && after.document["state"] == "committed", "{}", after.text);
    assert_eq!(std::fs::read_to_string(ws.join("c.txt")).unwrap(), "c");
    client.cancel().await.unwrap();
}

/// `VSH_SESSION` in a server's environment keeps its agent's view across
/// restarts (ux70 F1: a restarted client was a new session, judged by
/// what any run last saw, so another's commit counted as seen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_named_by_vsh_session_keeps_its_view_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("u.txt"), "one\n").unwrap();
    let key = dir.path().join("authority.key");
    let start = || {
        TokioChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_vsh")).configure(|cmd| {
            cmd.args(["serve", "--workspace"])
                .arg(&ws)
                .env_clear()
                .env("VSH_AUTHORITY_KEY", &key)
                .env("VSH_SESSION", "agent-1");
        }))
        .unwrap()
    };
    let first = ().serve(start()).await.unwrap();
    assert!(!call(&first, "vsh_run", json!({"code": "vsh_read('u.txt')"})).await.is_error);
    first.cancel().await.unwrap();
    // Someone else edits it through vsh, reading it first.
    let mut edit = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["run", "--mode", "auto", "--workspace"])
        .arg(&ws)
        .arg("-")
        .env_clear()
        .env("VSH_AUTHORITY_KEY", &key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut edit.stdin.take().unwrap(), b"vsh_write('u.txt', vsh_read('u.txt') + 'theirs\\n')")
        .unwrap();
    assert!(edit.wait().unwrap().success());
    let second = ().serve(start()).await.unwrap();
    let blind = call(&second, "vsh_run", json!({"code": "vsh_write('u.txt', 'one\\nagent\\n')"})).await;
    let id = blind.document["transaction"].as_str().unwrap();
    assert_eq!(blind.document["next"], format!("vsh_discard {}", &id[..12]), "{}", blind.document);
    assert_eq!(std::fs::read_to_string(ws.join("u.txt")).unwrap(), "one\ntheirs\n");
    second.cancel().await.unwrap();
}

/// ux77: what a rejection said no to was known only to the server that
/// discarded its own run, for its life; an operator's `vsh reject --only`
/// (that run alone: its reruns stand) was taken for a refusal of the work,
/// and a restarted server took its agent's own discards for an operator's.
/// The store records each rejection's scope: another server lets the agent
/// run again what it discarded itself, and what an operator rejected alone,
/// and still refuses work an operator rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejections_scope_outlives_the_server_that_knew_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let key = dir.path().join("authority.key");
    let ws_arg = ws.to_str().unwrap();
    let program = |name: &str| format!("vsh_write('{name}.txt', 'x')");
    let (first_server, _log) = serve_with(Recorder::default(), &["--workspace", ws_arg], dir.path(), &key).await;
    let made = |client: &Client, name: &str| {
        let code = program(name);
        let client = client.peer().clone();
        async move {
            let made = call(&client, "vsh_run", json!({"code": code})).await;
            made.document["transaction"].as_str().unwrap().to_owned()
        }
    };
    let discarded = made(&first_server, "own").await;
    assert!(!call(first_server.peer(), "vsh_discard", json!({"transaction": discarded})).await.is_error);
    let alone = made(&first_server, "alone").await;
    let rejected = made(&first_server, "refused").await;
    first_server.cancel().await.unwrap();
    let operator = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(args)
            .args(["--workspace", ws_arg])
            .env_clear()
            .env("VSH_AUTHORITY_KEY", &key)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    };
    operator(&["reject", "--only", &alone]);
    operator(&["reject", &rejected]);
    // Another server: its agent's own discard and the run rejected alone
    // are work it may run again; the work an operator rejected is not.
    let (second_server, _log) = serve_with(Recorder::default(), &["--workspace", ws_arg], dir.path(), &key).await;
    for id in [&discarded, &alone] {
        let again = call(second_server.peer(), "vsh_rerun", json!({"transaction": id, "again": true})).await;
        assert!(!again.is_error, "{id}: {}", again.text);
    }
    // Each tool tells it so (ux80 M3: they disagreed after `--only`).
    let waited = call(second_server.peer(), "vsh_wait", json!({"transaction": alone})).await;
    assert!(waited.text.starts_with("nothing to wait for: an operator rejected this run alone"), "{}", waited.text);
    let commit = call(second_server.peer(), "vsh_commit", json!({"transaction": alone})).await;
    let hint = commit.document["hint"].as_str().unwrap_or_default();
    assert!(hint.contains(&format!("vsh_rerun {} runs its program again", &alone[..12])), "{}", commit.text);
    let commit = call(second_server.peer(), "vsh_commit", json!({"transaction": discarded})).await;
    assert!(
        commit.document["hint"].as_str().is_some_and(|hint| hint.contains("discarded with vsh_discard")),
        "{}",
        commit.text
    );
    let again = call(second_server.peer(), "vsh_rerun", json!({"transaction": rejected, "again": true})).await;
    assert!(again.is_error && again.text.contains("was rejected by an operator"), "{}", again.text);
    // An operator's later rejection of the work the agent discarded holds,
    // on the very server that remembers the discard too (sec84 F1).
    operator(&["reject", &discarded]);
    let again = call(second_server.peer(), "vsh_rerun", json!({"transaction": discarded, "again": true})).await;
    assert!(again.is_error && again.text.contains("rejected by an operator"), "{}", again.text);
    let own = made(&second_server, "own2").await;
    assert!(!call(second_server.peer(), "vsh_discard", json!({"transaction": own})).await.is_error);
    operator(&["reject", &own]);
    let again = call(second_server.peer(), "vsh_rerun", json!({"transaction": own, "again": true})).await;
    assert!(again.is_error && again.text.contains("rejected by an operator"), "{}", again.text);
    second_server.cancel().await.unwrap();
}
