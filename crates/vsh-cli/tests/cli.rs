//! The `vsh` binary: exit codes, output forms and the demo.

use std::path::Path;
use std::process::{Command, Output};

fn vsh(args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vsh"));
    command.args(args).env_clear();
    if let Some(input) = stdin {
        use std::io::Write;
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        return child.wait_with_output().unwrap();
    }
    command.output().unwrap()
}

fn write(root: &Path, relative: &str, contents: &str) {
    std::fs::create_dir_all(root.join(relative).parent().unwrap()).unwrap();
    std::fs::write(root.join(relative), contents).unwrap();
}

#[test]
fn exit_codes_distinguish_every_outcome() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    write(dir.path(), "old.txt", "old\n");
    write(dir.path(), ".env", "SECRET=1\n");
    let ws = dir.path().to_str().unwrap();
    let create = "from pathlib import Path\nPath('/workspace/b.txt').write_text('b')";

    let preview = vsh(&["run", "--workspace", ws, "-"], Some(create));
    assert_eq!(preview.status.code(), Some(3), "{}", String::from_utf8_lossy(&preview.stderr));
    assert!(!dir.path().join("b.txt").exists());

    let committed = vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(create));
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "b");

    let delete = "from pathlib import Path\nPath('/workspace/old.txt').unlink()";
    let pending = vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(delete));
    assert_eq!(pending.status.code(), Some(4));
    assert!(dir.path().join("old.txt").exists());

    let secret = "from pathlib import Path\ntry:\n    Path('/workspace/.env').write_text('x')\nexcept PermissionError:\n    pass";
    let denied = vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(secret));
    assert_eq!(denied.status.code(), Some(5));
    assert_eq!(std::fs::read_to_string(dir.path().join(".env")).unwrap(), "SECRET=1\n");

    let broken = vsh(&["run", "--workspace", ws, "-"], Some("raise ValueError('no')"));
    assert_eq!(broken.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&broken.stderr).contains("ValueError"));

    assert_eq!(vsh(&["run", "--mode", "sideways", "x.py"], None).status.code(), Some(2));
}

#[test]
fn json_receipt_is_machine_readable() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "n.txt", "41");
    let program_path = dir.path().join("program.py");
    std::fs::write(&program_path, "from pathlib import Path\nint(Path('/workspace/n.txt').read_text()) + 1").unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::rename(dir.path().join("n.txt"), workspace.join("n.txt")).unwrap();
    let output = vsh(
        &["run", "--workspace", workspace.to_str().unwrap(), "--json", "--full", program_path.to_str().unwrap()],
        None,
    );
    assert_eq!(output.status.code(), Some(3));
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["value"], serde_json::json!(42));
    assert_eq!(value["state"], "auto-approved");
    assert_eq!(value["decision"]["kind"], "auto-approved");
    assert_eq!(value["changed_paths"], 0);
    assert_eq!(value["transaction"].as_str().unwrap().len(), 64);
}

#[test]
fn demo_runs_twice_and_reports_both_receipts() {
    for _ in 0..2 {
        let output = vsh(&["demo"], None);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains("== preview receipt"), "{stdout}");
        assert!(stdout.contains("== commit receipt"), "{stdout}");
        assert!(stdout.contains("state        committed"), "{stdout}");
        assert!(stdout.contains("3 open items"), "{stdout}");
        assert!(stdout.contains("decision     denied"), "{stdout}");
    }
}

#[test]
fn review_of_a_multi_file_change_matches_the_golden_file() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "src/lib.txt", "alpha\nbeta\ngamma\ndelta\n");
    write(&ws, "notes.txt", "keep this line\nand remove this one\n");
    std::fs::write(ws.join("old.bin"), [0u8, 159, 146, 150]).unwrap();
    let program = r"
from pathlib import Path
root = Path('/workspace')
lib = (root / 'src' / 'lib.txt').read_text()
(root / 'src' / 'lib.txt').write_text(lib.replace('beta', 'BETA').replace('delta', 'delta\nepsilon'))
(root / 'notes.txt').write_text('keep this line\n')
(root / 'docs').mkdir()
(root / 'docs' / 'NEW.md').write_text('# New\n\nA new page.\n')
(root / 'old.bin').unlink()
";
    let output = vsh(&["run", "--workspace", ws.to_str().unwrap(), "--full", "-"], Some(program));
    assert_eq!(output.status.code(), Some(4), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let review = &stdout[stdout.find("review\n").expect("a review block")..];
    let golden_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/review.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden_path, review).unwrap();
    }
    let golden = std::fs::read_to_string(&golden_path).expect("golden file (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(review, golden);
}

#[test]
fn profiles_and_policy_files_change_the_decision() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "a.txt", "a\n");
    let ws_arg = ws.to_str().unwrap();
    let create = "from pathlib import Path\nPath('/workspace/b.txt').write_text('b')";
    assert_eq!(vsh(&["run", "--workspace", ws_arg, "-"], Some(create)).status.code(), Some(3));
    assert_eq!(vsh(&["run", "--workspace", ws_arg, "--profile", "strict", "-"], Some(create)).status.code(), Some(4));

    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "version = 1\n[[protect]]\npattern = \"b.txt\"\naccess = \"create\"\nreason = \"test\"\n")
        .unwrap();
    let denied =
        vsh(&["run", "--workspace", ws_arg, "--policy", policy.to_str().unwrap(), "--mode", "auto", "-"], Some(create));
    assert_eq!(denied.status.code(), Some(1), "an uncaught PermissionError is an execution error");
    assert!(String::from_utf8_lossy(&denied.stderr).contains("PermissionError"));
    assert!(!ws.join("b.txt").exists());

    std::fs::write(&policy, "version = 1\n[thresholds]\ndeny_touched_paths = \"lots\"\n").unwrap();
    let bad = vsh(&["run", "--workspace", ws_arg, "--policy", policy.to_str().unwrap(), "-"], Some(create));
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("thresholds.deny_touched_paths"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn pending_work_is_listed_approved_and_committed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let delete = "from pathlib import Path\nPath('/workspace/old.txt').unlink()";
    let run = vsh(&["run", "--workspace", ws, "--json", "-"], Some(delete));
    assert_eq!(run.status.code(), Some(4));
    let receipt: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let id = receipt["transaction"].as_str().unwrap().to_owned();

    let pending = vsh(&["pending", "--workspace", ws], None);
    assert_eq!(String::from_utf8_lossy(&pending.stdout), format!("{id}  pending-approval\n"));
    let shown = vsh(&["show", &id, "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("old.txt"));

    let early = vsh(&["commit", &id, "--workspace", ws], None);
    assert_eq!(early.status.code(), Some(1), "not approved yet");
    assert!(dir.path().join("old.txt").exists());

    let approved = vsh(&["approve", &id, "--workspace", ws, "--principal", "ann", "--ttl", "60"], None);
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    let committed = vsh(&["commit", &id, "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert!(!dir.path().join("old.txt").exists());
    assert_eq!(
        String::from_utf8_lossy(&vsh(&["pending", "--workspace", ws], None).stdout),
        "no pending transactions\n"
    );
    let recover = vsh(&["recover", "--workspace", ws], None);
    assert_eq!(String::from_utf8_lossy(&recover.stdout), "rolled forward 0, rolled back 0, cleaned 0, conflicts 0\n");

    let again = vsh(
        &["run", "--workspace", ws, "--json", "-"],
        Some(
            "from pathlib import Path\nPath('/workspace/x').write_text('x')\nPath('/workspace/x').unlink()\nPath('/workspace/y').unlink()",
        ),
    );
    assert_eq!(again.status.code(), Some(1), "FileNotFoundError is uncaught");
}

#[test]
fn a_denial_review_names_the_rule_and_how_to_allow_it() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".env", "S=1\n");
    let ws = dir.path().to_str().unwrap();
    let program = "from pathlib import Path\ntry:\n    Path('/workspace/.env').read_text()\nexcept PermissionError:\n    pass\nPath('/workspace/a.txt').write_text('a')";
    let output = vsh(&["run", "--workspace", ws, "--full", "-"], Some(program));
    assert_eq!(output.status.code(), Some(5));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("decision: denied (ProtectedAccessAttempt)"), "{stdout}");
    assert!(stdout.contains("content-read of .env denied by rule"), "{stdout}");
    assert!(stdout.contains("to allow it: "), "{stdout}");
}
