//! Nodes a guest cannot be shown as they are: files and directories the host
//! refuses (mode 0000, as an unprivileged user), names too long for the host,
//! FIFOs, sockets, device nodes and names that are not UTF-8. Each is a guest
//! error naming the node (the run goes on, as `CPython`'s would), or is
//! skipped and counted by listings and walks; none ends the run.
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;

use vsh::{RunMode, RunRequest, Runtime, TransactionState, VshError};
use vsh_integration_tests::{config, put, workspace};

fn value(receipt: &vsh::Receipt) -> String {
    receipt.output.monty_value().map(vsh::MontyObject::py_repr).unwrap_or_default()
}

#[test]
fn host_refusals_are_catchable_oserrors_and_the_run_goes_on() {
    if !vsh_integration_tests::as_unprivileged_user("host_refusals_are_catchable_oserrors_and_the_run_goes_on") {
        return;
    }
    let dir = workspace(&[("ok.txt", "ok\n"), ("closed/inside.txt", "hidden\n"), ("locked.txt", "locked\n")]);
    std::fs::set_permissions(dir.path().join("locked.txt"), std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(dir.path().join("closed"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let runtime = Runtime::open(config(dir.path())).unwrap();
    let long = "x".repeat(300);
    let program = format!(
        r"
from pathlib import Path
import os
seen = []
for attempt in [lambda: Path('/workspace/locked.txt').read_text(),
                lambda: os.listdir('/workspace/closed'),
                lambda: Path('/workspace/closed/inside.txt').stat(),
                lambda: Path('/workspace/{long}').read_text()]:
    try:
        attempt()
        seen.append('read')
    except OSError as error:
        seen.append(str(error).split(']')[0][7:])
Path('/workspace/after.txt').write_text(','.join(seen))
seen
"
    );
    let receipt = runtime.run(&RunRequest::new(&program).with_mode(RunMode::Auto)).unwrap();
    assert_eq!(value(&receipt), "['13', '13', '13', '36']");
    assert_eq!(receipt.state, TransactionState::Committed, "host refusals are not policy denials");
    assert_eq!(std::fs::read_to_string(dir.path().join("after.txt")).unwrap(), "13,13,13,36");

    // A run that relied on a refusal is stale once the mode changes.
    let relied = "from pathlib import Path\ntry:\n    Path('/workspace/locked.txt').read_text()\n    r = 'read'\nexcept PermissionError:\n    r = 'refused'\nPath('/workspace/r.txt').write_text(r)";
    let preview = runtime.preview(&RunRequest::new(relied)).unwrap();
    std::fs::set_permissions(dir.path().join("locked.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let stale = runtime.commit(preview.transaction, 1);
    assert!(matches!(stale, Err(VshError::Commit(vsh::lower::vsh_commit::CommitError::Stale { .. }))), "{stale:?}");
    std::fs::set_permissions(dir.path().join("closed"), std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn special_files_and_unspellable_names_are_skipped_by_walks_and_named_when_touched() {
    use std::os::unix::ffi::OsStrExt;
    let dir = workspace(&[("a.txt", "needle\n"), ("sub/b.txt", "needle too\n"), ("odd/keep.txt", "k\n")]);
    let status = std::process::Command::new("mkfifo").arg(dir.path().join("pipe")).status().unwrap();
    assert!(status.success());
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("sub/sock")).unwrap();
    std::fs::write(dir.path().join(std::ffi::OsStr::from_bytes(b"odd/bad\xffname")), b"x").unwrap();
    let root = vsh_integration_tests::is_root();
    if root {
        let status =
            std::process::Command::new("mknod").arg(dir.path().join("sub/null")).args(["c", "1", "3"]).status();
        assert!(status.is_ok_and(|status| status.success()));
    }
    put(dir.path(), "z.txt", "z\n");
    let runtime = Runtime::open(config(dir.path())).unwrap();

    let receipt = runtime.preview(&RunRequest::new("sorted(str(p) for p in vsh_glob('**'))")).unwrap();
    assert_eq!(
        value(&receipt),
        "['/workspace/a.txt', '/workspace/odd', '/workspace/odd/keep.txt', '/workspace/sub', '/workspace/sub/b.txt', '/workspace/z.txt']"
    );
    let skipped = receipt.execution.skipped_nodes;
    assert!(skipped >= 3 + u64::from(root), "{skipped} skipped");
    let receipt = runtime.preview(&RunRequest::new("[hit['path'] for hit in vsh_search('needle')]")).unwrap();
    assert_eq!(value(&receipt), "['/workspace/a.txt', '/workspace/sub/b.txt']");
    let receipt = runtime
        .preview(&RunRequest::new("from pathlib import Path\nsorted(p.name for p in Path('/workspace/odd').iterdir())"))
        .unwrap();
    assert_eq!(value(&receipt), "['keep.txt']");
    assert_eq!(receipt.execution.skipped_nodes, 1);

    // Touched directly, the error names the node.
    for (program, named) in [
        ("Path('/workspace/pipe').read_text()", "/workspace/pipe"),
        ("Path('/workspace/sub/sock').stat()", "/workspace/sub/sock"),
        ("vsh_remove('/workspace/odd', recursive=True)", "/workspace/odd"),
        ("Path('/workspace/odd').rename('/workspace/even')", "/workspace/odd"),
    ] {
        let program = format!(
            "from pathlib import Path\ntry:\n    {program}\n    r = 'done'\nexcept OSError as error:\n    r = str(error)\nr"
        );
        let receipt = runtime.preview(&RunRequest::new(&program)).unwrap();
        let text = value(&receipt);
        assert!(text.contains(named) && !text.contains("'/workspace'"), "{program}: {text}");
        assert_eq!(receipt.changed_paths, 0, "{program}");
    }
    // An empty-looking directory that holds an unspellable name is not empty.
    let receipt = runtime
        .preview(&RunRequest::new("from pathlib import Path\nPath('/workspace/odd/keep.txt').unlink()\ntry:\n    Path('/workspace/odd').rmdir()\n    r = 'removed'\nexcept OSError as error:\n    r = str(error)\nr"))
        .unwrap();
    assert!(value(&receipt).contains("[Errno 39]"), "{}", value(&receipt));
}
