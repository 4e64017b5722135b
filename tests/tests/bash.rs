//! Bash programs through the whole facade: the same diff, policy, binding,
//! approvals and journaled commit as Monty, with precise dependencies and
//! terminal failures. The runs use the real confined worker.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use vsh::{
    BashConfig, DiffKind, ExecutionOutput, Language, ReceiptDetail, RunMode, RunRequest, Runtime, RuntimeDecision,
    TransactionState, VshError,
};
use vsh_integration_tests::{config, put, tree, workspace};

fn runtime(dir: &tempfile::TempDir) -> Runtime {
    Runtime::open(config(dir.path()).with_bash(BashConfig::new())).unwrap()
}

fn bash(code: &str) -> RunRequest<'_> {
    RunRequest::new(code).with_language(Language::Bash)
}

fn fixture() -> tempfile::TempDir {
    workspace(&[
        ("README.md", "# demo\nhello world\n"),
        ("src/app.py", "def greet():\n    return 'hello'\n"),
        ("src/util.py", "HELLO = 'hello'\n"),
        ("config/settings.ini", "debug = true\nport = 8080\n"),
        (".env", "TOKEN=secret\n"),
    ])
}

#[test]
fn a_bash_preview_changes_nothing_and_its_commit_lands_exactly_once() {
    let dir = fixture();
    let runtime = runtime(&dir);
    let before = tree(dir.path());
    let script = "sed -i 's/hello/goodbye/g' src/app.py\ngrep -rl goodbye src\necho done >&2";
    let receipt = runtime.preview(&bash(script).with_detail(ReceiptDetail::Full)).unwrap();
    assert_eq!(tree(dir.path()), before, "a preview writes nothing");
    assert_eq!(receipt.state, TransactionState::AutoApproved);
    match &receipt.output {
        ExecutionOutput::Bash(result) => {
            assert_eq!(result.profile, "vsh-bash-bounded-v1");
            assert_eq!(
                (result.exit_code, result.stdout.as_slice(), result.stderr.as_slice()),
                (0, &b"src/app.py\n"[..], &b"done\n"[..])
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(receipt.output.language(), Language::Bash);
    assert_eq!(
        receipt.changes.iter().map(|c| (c.path.as_str(), c.kind)).collect::<Vec<_>>(),
        [("src/app.py", DiffKind::Modify)]
    );
    let committed = runtime.commit(receipt.transaction, 1).unwrap();
    assert_eq!(committed.state, TransactionState::Committed);
    assert_eq!(std::fs::read_to_string(dir.path().join("src/app.py")).unwrap(), "def greet():\n    return 'goodbye'\n");
}

#[test]
fn pending_bash_work_is_durable_approvable_and_keeps_its_language() {
    let dir = fixture();
    let id = {
        let runtime = runtime(&dir);
        let receipt = runtime.preview(&bash("rm config/settings.ini").with_intent("drop the settings")).unwrap();
        assert_eq!(receipt.state, TransactionState::PendingApproval);
        receipt.transaction
    };
    let runtime = runtime(&dir);
    let stored = runtime.stored_program(id).unwrap().unwrap();
    assert_eq!((stored.language, stored.code.as_str()), (Language::Bash, "rm config/settings.ini"));
    let shown = runtime.show(id).unwrap().unwrap();
    assert_eq!(shown.output.language(), Language::Bash);
    runtime.approve(id, vsh::PrincipalId::digest(b"alice"), 1, u64::MAX).unwrap();
    runtime.commit(id, 2).unwrap();
    assert!(!dir.path().join("config/settings.ini").exists());
}

#[test]
fn a_failing_script_is_terminal_stores_nothing_and_says_what_it_changed() {
    let dir = fixture();
    let runtime = runtime(&dir);
    let before = tree(dir.path());
    for (script, expected) in [
        ("echo partial > new.txt; echo oops >&2; exit 4", "exit status 4"),
        ("echo x > new.txt; curl http://example.com || true", "curl"),
        ("echo x > new.txt; for i in $(seq 1 20000); do :; done", "limit exceeded"),
    ] {
        match runtime.run(&bash(script).with_mode(RunMode::Auto)) {
            Err(VshError::Bash { source, changes, changes_complete }) => {
                assert!(source.to_string().contains(expected), "{script}: {source}");
                assert!(changes_complete);
                assert_eq!(changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(), ["new.txt"], "{script}");
            }
            other => panic!("{script}: {other:?}"),
        }
    }
    assert_eq!(tree(dir.path()), before);
    assert!(runtime.transactions().unwrap().is_empty(), "nothing was recorded");
}

#[test]
fn a_caught_refusal_still_denies_and_secrets_never_show() {
    let dir = fixture();
    let runtime = runtime(&dir);
    for script in [
        "cat .env 2>/dev/null || true",
        "cp .env stolen.txt 2>/dev/null || true; echo ok",
        "ls -a; cat ../../etc/hostname 2>/dev/null || true",
        "cat /proc/self/environ 2>/dev/null || true",
        "echo hi > /dev/tcp/127.0.0.1/80 2>/dev/null || true",
    ] {
        let receipt = runtime.preview(&bash(script)).unwrap_or_else(|error| panic!("{script}: {error:?}"));
        let stdout = String::from_utf8_lossy(receipt.output.stdout_bytes()).into_owned();
        assert!(!stdout.contains("secret") && !stdout.contains(".env"), "{script}: {stdout}");
        if !script.starts_with("echo") {
            assert!(matches!(receipt.decision, RuntimeDecision::Denied(_)), "{script}: {:?}", receipt.decision);
        }
    }
    // Links are not in the profile: making one ends the run.
    match runtime.preview(&bash("ln -s /etc/passwd p 2>/dev/null; cat p 2>/dev/null || true")) {
        Err(VshError::Bash { source, .. }) => assert!(source.to_string().contains("ln"), "{source}"),
        other => panic!("{other:?}"),
    }
    assert!(!dir.path().join("p").exists());
}

#[test]
fn bash_dependencies_are_precise_an_unrelated_edit_is_no_conflict() {
    let dir = fixture();
    let runtime = runtime(&dir);
    let receipt = runtime.preview(&bash("grep -c hello README.md > count.txt")).unwrap();
    put(dir.path(), "src/util.py", "HELLO = 'changed'\n");
    put(dir.path(), "src/new.py", "x = 1\n");
    assert_eq!(runtime.commit(receipt.transaction, 1).unwrap().state, TransactionState::Committed);
    let receipt = runtime.preview(&bash("grep -c hello README.md > count2.txt")).unwrap();
    put(dir.path(), "README.md", "# demo\nhello again\nhello\n");
    match runtime.commit(receipt.transaction, 2) {
        Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { conflicts, .. })) => {
            assert_eq!(conflicts.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(), ["README.md"]);
        }
        other => panic!("{other:?}"),
    }
    // A plain `ls` depends on the names, not on a listed file's size.
    let receipt = runtime.preview(&bash("ls src > listing.txt")).unwrap();
    put(dir.path(), "src/app.py", "def greet():\n    return 'resized well beyond'\n");
    assert_eq!(runtime.commit(receipt.transaction, 3).unwrap().state, TransactionState::Committed);
}

/// Ten changes an agent makes, each as a Bash script and as a Monty program:
/// the canonical diffs are identical.
#[test]
fn bash_and_monty_equivalents_make_identical_diffs() {
    let pairs = [
        ("echo hi > a.txt", "from pathlib import Path\nPath('a.txt').write_text('hi\\n')"),
        ("printf 'x' >> README.md", "with open('README.md', 'a') as f:\n    f.write('x')"),
        ("mkdir -p out/deep", "vsh_mkdir('out/deep')"),
        ("rm src/util.py", "from pathlib import Path\nPath('src/util.py').unlink()"),
        ("mv src/app.py src/main.py", "from pathlib import Path\nPath('src/app.py').rename('src/main.py')"),
        ("cp config/settings.ini config/backup.ini", "vsh_copy('config/settings.ini', 'config/backup.ini')"),
        ("sed -i 's/8080/9090/' config/settings.ini", "vsh_patch('config/settings.ini', '8080', '9090')"),
        ("rm -r config", "vsh_remove('config', recursive=True)"),
        (
            "tr a-z A-Z < README.md > UPPER.md",
            "from pathlib import Path\nPath('UPPER.md').write_text(Path('README.md').read_text().upper())",
        ),
        ("chmod 600 src/app.py", "import os\nos.chmod('src/app.py', 0o600)"),
    ];
    for (script, program) in pairs {
        let dir = fixture();
        // A file deleted unread is known by its stamp once the stamp has
        // settled (100 ms after its last change) and by its digest before:
        // wait, so both previews see it the same way.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let runtime = runtime(&dir);
        let from_bash = runtime
            .preview(&bash(script).with_detail(ReceiptDetail::Full))
            .unwrap_or_else(|e| panic!("{script}: {e:?}"));
        let from_monty = match runtime.preview(&RunRequest::new(program).with_detail(ReceiptDetail::Full)) {
            Ok(receipt) => receipt,
            // Monty has no chmod: compare with the change the script described.
            Err(_) if script.starts_with("chmod") => {
                let change = &from_bash.changes[0];
                assert_eq!((change.path.as_str(), change.kind), ("src/app.py", DiffKind::MetadataChange), "{change:?}");
                assert_eq!(change.after.unwrap().mode & 0o777, 0o600);
                continue;
            }
            Err(error) => panic!("{program}: {error:?}"),
        };
        assert_eq!(from_bash.changes, from_monty.changes, "{script} vs {program}");
        assert_eq!(from_bash.diff, from_monty.diff, "{script}: the canonical diff digests agree");
    }
}

#[test]
fn vsh_bash_inside_monty_joins_the_same_transaction() {
    let dir = fixture();
    let runtime = runtime(&dir);
    let program = "vsh_write('notes.txt', 'start\\n')\n\
                   code, out, err = vsh_bash(\"sed -i 's/8080/9090/' config/settings.ini; echo bash >> notes.txt; grep -c port config/settings.ini\")\n\
                   (code, out.strip())";
    let receipt = runtime.preview(&RunRequest::new(program).with_detail(ReceiptDetail::Full)).unwrap();
    assert_eq!(receipt.output.monty_value().unwrap().py_repr(), "(0, '1')");
    let paths: Vec<&str> = receipt.changes.iter().map(|change| change.path.as_str()).collect();
    assert_eq!(paths, ["config/settings.ini", "notes.txt"]);
    runtime.commit(receipt.transaction, 1).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "start\nbash\n");
    assert!(std::fs::read_to_string(dir.path().join("config/settings.ini")).unwrap().contains("9090"));
    // A runtime without Bash offers no vsh_bash.
    let plain = Runtime::open(config(dir.path())).unwrap();
    match plain.preview(&RunRequest::new("vsh_bash('echo hi')")) {
        Err(VshError::Execution(error)) => assert!(error.to_string().contains("uncaught"), "{error}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_confined_bash_program_is_real_bash_through_the_same_pipeline() {
    if !vsh_integration_tests::candidates_available() {
        return;
    }
    let dir = fixture();
    let runtime = Runtime::open(config(dir.path()).with_bash(BashConfig::confined())).unwrap();
    let before = tree(dir.path());
    // Real bash: arrays and a program (python3) the bounded profile has neither of.
    let script = "names=(app util)\nfor n in \"${names[@]}\"; do python3 -c \"import sys; p='src/'+sys.argv[1]+'.py'; t=open(p).read(); open(p,'w').write(t.replace('hello','bye'))\" \"$n\"; done\necho ${#names[@]}";
    let receipt = runtime.preview(&bash(script).with_detail(ReceiptDetail::Full)).unwrap();
    assert_eq!(tree(dir.path()), before, "a preview writes nothing");
    match &receipt.output {
        ExecutionOutput::Bash(result) => {
            assert_eq!(result.profile, "vsh-bash-confined-v1");
            assert_eq!((result.exit_code, result.stdout.as_slice()), (0, &b"2\n"[..]), "{result:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        receipt.changes.iter().map(|c| (c.path.as_str(), c.kind)).collect::<Vec<_>>(),
        [("src/app.py", DiffKind::Modify), ("src/util.py", DiffKind::Modify)]
    );
    assert_eq!(receipt.state, TransactionState::AutoApproved, "{:?}", receipt.decision);
    runtime.commit(receipt.transaction, 1).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("src/app.py")).unwrap(), "def greet():\n    return 'bye'\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("src/util.py")).unwrap(), "HELLO = 'bye'\n");
    // A secret stays invisible to real bash too: it is refused at its
    // lookup, which learns nothing and is no denial, and the receipt warns.
    let looked = runtime.preview(&bash("cat .env || echo refused; test -e .env || echo absent")).unwrap();
    assert_eq!(looked.state, TransactionState::AutoApproved, "{:?}", looked.decision);
    assert_eq!(String::from_utf8_lossy(looked.output.stdout_bytes()), "refused\nabsent\n");
    assert!(
        looked.warnings.iter().any(|w| matches!(w, vsh::Warning::HiddenLooks { looks: 2, paths }
            if paths.iter().map(vsh::VPath::as_str).collect::<Vec<_>>() == [".env"])),
        "{:?}",
        looked.warnings
    );
}
