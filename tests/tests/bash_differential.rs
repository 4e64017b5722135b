//! The Bash profile against GNU bash: every script of
//! `tests/bash-corpus/scripts.txt` runs with `/bin/bash` in a real temporary
//! copy of a fixture and with vsh (preview, full detail) on another copy; the
//! exit status, stdout, whether stderr is empty, and the change list (path,
//! kind, final kind, size, mode and content) must agree, except for the
//! scripts `known-differences.txt` lists with a reason (and those must still
//! differ). The agreement count is printed and recorded in `docs/guest.md`.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::Path;

use vsh::{BashConfig, Language, ReceiptDetail, RunRequest, Runtime, VshError};
use vsh_integration_tests::{Entry, config, tree};

/// The project every script runs in.
const FIXTURE: &[(&str, &str)] = &[
    ("README.md", "# Demo project\n\nA small demo. TODO: write docs.\nSee src/ for the code.\n"),
    ("src/main.py", "import util\n\n# TODO: parse arguments\ndef main():\n    print(util.greet('world'))\n\nmain()\n"),
    ("src/util.py", "import os\n\ndef greet(name):\n    return 'hello ' + name\n"),
    ("src/lib/__init__.py", ""),
    ("src/lib/helpers.py", "import re\n\nWORD = re.compile(r'\\w+')\n"),
    ("tests/test_main.py", "import main\n\ndef test_main():\n    assert True\n"),
    ("config/app.ini", "# app settings\n[server]\nport = 8080\nhost = localhost\ndebug = true\n"),
    ("data/users.csv", "id,name,role\n1,alice,admin\n2,bob,user\n3,carol,user\n"),
    ("data/log.txt", "INFO start 1\nWARN slow 250\nERROR failed 3\nINFO done 4\nERROR again 5\n"),
    ("notes/todo.md", "- [ ] write docs\n- [ ] ship it\n"),
    ("notes/ideas.txt", "more tests\n"),
];

fn scripts() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("bash-corpus/scripts.txt")).unwrap();
    let mut scripts = Vec::new();
    for block in text.split("### ").skip(1) {
        let (name, script) = block.split_once('\n').unwrap();
        scripts.push((name.trim().to_owned(), script.to_owned()));
    }
    scripts
}

fn known_differences() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("bash-corpus/known-differences.txt"))
        .unwrap();
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (name, reason) = line.split_once(':').expect("NAME: reason");
            (name.trim().to_owned(), reason.trim().to_owned())
        })
        .collect()
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in FIXTURE {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    dir
}

/// A node's final state: kind, size, mode and content digest.
type State = (&'static str, u64, u32, Option<vsh::BlobId>);

/// The final state of a changed path (`None` when it is gone).
type After = Option<State>;

/// What a run produced, in the terms both sides share.
#[derive(Debug, PartialEq)]
struct Observed {
    exit: i32,
    stdout: String,
    stderr_empty: bool,
    changes: BTreeMap<String, After>,
}

fn state_of(entry: &Entry) -> State {
    match entry {
        Entry::File(bytes, mode) => ("file", bytes.len() as u64, *mode, Some(vsh::BlobId::of(bytes))),
        Entry::Dir(mode) => ("directory", 0, *mode, None),
        Entry::Link(target) => ("symlink", target.len() as u64, 0o777, Some(vsh::BlobId::of(target.as_bytes()))),
    }
}

fn gnu(script: &str) -> Observed {
    let dir = fixture();
    let before = tree(dir.path());
    let output = std::process::Command::new("/bin/bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir.path())
        .env_clear()
        .env("HOME", dir.path())
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C")
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    let after = tree(dir.path());
    let mut changes = BTreeMap::new();
    for path in before.keys().chain(after.keys()) {
        let (old, new) = (before.get(path), after.get(path));
        if old != new {
            changes.insert(path.clone(), new.map(state_of));
        }
    }
    let root = dir.path().to_string_lossy().into_owned();
    Observed {
        exit: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).replace(&root, "/workspace"),
        stderr_empty: output.stderr.is_empty(),
        changes,
    }
}

fn vsh_side(runtime: &Runtime, script: &str) -> Observed {
    let request = RunRequest::new(script).with_language(Language::Bash).with_detail(ReceiptDetail::Full);
    let (exit, stdout, stderr, entries) = match runtime.preview(&request) {
        Ok(receipt) => {
            let vsh::ExecutionOutput::Bash(result) = receipt.output else { panic!("not bash output") };
            (result.exit_code, result.stdout, result.stderr, receipt.changes)
        }
        Err(VshError::Bash { source, changes, .. }) => match *source {
            vsh::lower::vsh_monty::ExecutionError::Bash { exit_code, stdout, stderr, .. } => {
                (exit_code, stdout, stderr, changes)
            }
            other => panic!("{other:?}"),
        },
        Err(other) => panic!("{script}: {other:?}"),
    };
    let changes = entries
        .iter()
        .map(|entry| {
            let after = entry.after.map(|state| {
                let kind = match state.kind {
                    vsh::NodeKind::File => "file",
                    vsh::NodeKind::Directory => "directory",
                    vsh::NodeKind::Symlink => "symlink",
                };
                (kind, state.size, state.mode, state.content)
            });
            (entry.path.to_string(), after)
        })
        .collect();
    Observed { exit, stdout: String::from_utf8_lossy(&stdout).into_owned(), stderr_empty: stderr.is_empty(), changes }
}

#[test]
fn the_bash_profile_agrees_with_gnu_bash_on_the_corpus() {
    assert!(Path::new("/bin/bash").exists(), "GNU bash is the oracle");
    let scripts = scripts();
    assert!(scripts.len() >= 60, "{} scripts", scripts.len());
    let known = known_differences();
    let mut agreed = 0;
    let mut unexpected = Vec::new();
    let mut agreeing_known = Vec::new();
    for (name, script) in &scripts {
        let expected = gnu(script);
        let dir = fixture();
        let runtime = Runtime::open(config(dir.path()).with_bash(BashConfig::new())).unwrap();
        let observed = vsh_side(&runtime, script);
        let same = observed == expected;
        match (same, known.contains_key(name)) {
            (true, false) => agreed += 1,
            (true, true) => agreeing_known.push(name.clone()),
            (false, true) => {}
            (false, false) => unexpected.push(format!("{name}:\n  gnu: {expected:?}\n  vsh: {observed:?}")),
        }
    }
    for name in known.keys() {
        assert!(scripts.iter().any(|(script, _)| script == name), "known-differences.txt names no script {name}");
    }
    println!(
        "bash differential: {agreed} of {} scripts agree with GNU bash; {} known differences",
        scripts.len(),
        known.len()
    );
    assert!(unexpected.is_empty(), "{} scripts differ from GNU bash:\n{}", unexpected.len(), unexpected.join("\n"));
    assert!(agreeing_known.is_empty(), "these now agree; take them out of known-differences.txt: {agreeing_known:?}");
}
