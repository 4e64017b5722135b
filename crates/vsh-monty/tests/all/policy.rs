//! Pre-call authorization: refusals become catchable `PermissionError`s and are
//! recorded; protected names never reach the guest.

use vsh_policy::{AccessKind, RuleLabel};
use vsh_types::DiffKind;

use crate::common::{Workspace, s};

#[test]
fn a_refusal_retried_is_listed_once_and_counted_every_time() {
    let mut ws = Workspace::with(&[(".env", b"TOKEN=hunter2"), ("ok.txt", b"fine")]);
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         refused = 0\n\
         for name in ['.env', '.env', '.env', '.git/x', '.env']:\n\
         \x20   try:\n\
         \x20       Path(name).read_text() if name == '.env' else Path(name).write_text('x')\n\
         \x20   except PermissionError:\n\
         \x20       refused += 1\n\
         refused",
    );
    assert_eq!(outcome.value.py_repr(), "5");
    let listed: Vec<(&str, AccessKind)> = outcome.denied.iter().map(|d| (d.path.as_str(), d.access)).collect();
    assert_eq!(listed, vec![(".env", AccessKind::ContentRead), (".git/x", AccessKind::Create)]);
    assert_eq!(outcome.stats.denied_accesses, 5);
}

#[test]
fn a_change_to_a_protected_path_is_refused_as_the_change_not_the_look_before_it() {
    // Each operation looks at its path first (what is there decides what the
    // change is); the refusal kept is the change the program asked for.
    let mut ws = Workspace::with(&[(".env", b"TOKEN=hunter2"), ("ok.txt", b"fine")]);
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         refused = 0\n\
         attempts = [\n\
         \x20   lambda: Path('.env').write_text('x'),\n\
         \x20   lambda: open('server.pem', 'w'),\n\
         \x20   lambda: Path('keys.pem').mkdir(),\n\
         \x20   lambda: vsh_copy('ok.txt', '.env'),\n\
         \x20   lambda: vsh_remove('.env'),\n\
         ]\n\
         for attempt in attempts:\n\
         \x20   try:\n\
         \x20       attempt()\n\
         \x20   except PermissionError:\n\
         \x20       refused += 1\n\
         refused",
    );
    assert_eq!(outcome.value.py_repr(), "5");
    let listed: Vec<(&str, AccessKind)> = outcome.denied.iter().map(|d| (d.path.as_str(), d.access)).collect();
    assert_eq!(
        listed,
        vec![
            (".env", AccessKind::Modify),
            ("server.pem", AccessKind::Modify),
            ("keys.pem", AccessKind::Create),
            (".env", AccessKind::Delete),
        ],
        "a write is a modify whether or not the hidden path exists (its existence is never told); \
         the copy onto .env is the same refused modify, listed once"
    );
    assert_eq!(outcome.stats.denied_accesses, 5);
    assert_eq!(ws.diff(), vec![], "nothing changed");
}

#[test]
fn reading_a_protected_file_is_denied_and_recorded_even_when_caught() {
    let mut ws = Workspace::with(&[(".env", b"TOKEN=hunter2"), ("ok.txt", b"fine")]);
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         try:\n    leaked = Path('.env').read_text()\nexcept PermissionError as e:\n    leaked = str(e)\n\
         leaked",
    );
    assert_eq!(outcome.value.py_repr(), s("[Errno 13] Permission denied: '.env'"));
    assert_eq!(outcome.denied.len(), 1);
    let denied = &outcome.denied[0];
    assert_eq!(denied.path.as_str(), ".env");
    assert_eq!(denied.access, AccessKind::ContentRead);
    assert_eq!(denied.label, RuleLabel::Secret);
    assert_eq!(denied.rule, "**/.env*/**");
    assert_eq!(outcome.stats.denied_accesses, 1);
    assert_eq!(outcome.stats.read_bytes, 0, "nothing of the secret was read");
}

#[test]
fn listings_hide_protected_children_but_charge_them() {
    let mut ws = Workspace::with(&[(".env", b"x"), ("a.txt", b"a"), ("key.pem", b"k"), ("sub/.env.local", b"y")]);
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         import os\n\
         (sorted(p.name for p in Path('.').iterdir()), sorted(os.listdir('sub')))",
    );
    assert_eq!(outcome.value.py_repr(), "(['a.txt', 'sub'], [])");
    assert_eq!(outcome.stats.directory_entries, 5);
    assert!(outcome.denied.is_empty(), "hiding is not a denial");
}

#[test]
fn probing_a_protected_path_answers_false_and_is_counted_but_no_denial() {
    let mut ws = Workspace::with(&[(".env", b"x")]);
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         (Path('.env').exists(), Path('.env').is_file(), Path('.env.local').exists(), Path('sub/.env').is_dir())",
    );
    assert_eq!(outcome.value.py_repr(), "(False, False, False, False)");
    // A look learns nothing (absent or hidden, the answer is the same): no
    // denial, each counted.
    assert!(outcome.denied.is_empty(), "{:?}", outcome.denied);
    assert_eq!((outcome.stats.denied_accesses, outcome.stats.hidden_looks), (0, 4));
    // Reading it is a denial; so is a stat through a way out of the workspace.
    let read =
        ws.outcome("from pathlib import Path\ntry:\n    Path('.env').read_text()\nexcept PermissionError:\n    pass");
    assert_eq!(read.denied.iter().map(|d| d.access).collect::<Vec<_>>(), vec![AccessKind::ContentRead]);
    let outside = ws.outcome("from pathlib import Path\nPath('/etc/passwd').exists()");
    assert_eq!(outside.denied.iter().map(|d| d.access).collect::<Vec<_>>(), vec![AccessKind::MetadataRead]);
    assert_eq!(outside.stats.hidden_looks, 0);
}

/// An outside probe walked a project whose symlinks lead out of it
/// (`outlink -> /etc/passwd`, `uplink -> ../..`, as a `.venv/bin/python ->
/// /usr/bin/python3` does) with `is_file()`: the answer was `False`, yet the
/// whole run was denied, with nothing raised for the program to notice.
/// Such a look is answered as unreadable and counted, no denial; reading
/// through the link still is one.
#[test]
fn a_look_through_a_symlink_that_leads_out_of_the_workspace_is_no_denial() {
    let mut ws = Workspace::with(&[("a.txt", b"a"), (".env", b"S=1")]);
    for (link, target) in [("outlink", "/etc/passwd"), ("uplink", "../.."), ("envlink", ".env")] {
        std::os::unix::fs::symlink(target, ws.root().join(link)).unwrap();
    }
    let outcome = ws.outcome(
        "from pathlib import Path\nimport os\n\
         files = sorted(p.name for p in Path('/workspace').iterdir() if p.is_file())\n\
         there = [Path(n).exists() for n in ['outlink', 'uplink', 'envlink']]\n\
         stats = []\n\
         for n in ['outlink', 'envlink']:\n    try:\n        os.stat(n)\n        stats.append('stat')\n    \
         except PermissionError:\n        stats.append('EACCES')\n\
         (files, there, stats, Path('outlink').is_symlink())",
    );
    assert_eq!(
        outcome.value.py_repr(),
        "(['a.txt'], [False, False, False], ['EACCES', 'EACCES'], True)",
        "unreadable, there or not"
    );
    assert!(outcome.denied.is_empty(), "a look is no denial: {:?}", outcome.denied);
    assert_eq!(outcome.stats.denied_accesses, 0);
    assert_eq!(outcome.stats.hidden_looks, 8, "each look counted: {:?}", outcome.stats.hidden_paths);
    // Reading through the link is still refused and denied.
    let read = ws
        .outcome("from pathlib import Path\ntry:\n    Path('outlink').read_text()\nexcept PermissionError:\n    pass");
    assert_eq!(read.denied.len(), 1, "{:?}", read.denied);
}

#[test]
fn git_metadata_is_readable_but_never_changed() {
    let mut ws = Workspace::with(&[(".git/config", b"[core]\n")]);
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         text = Path('.git/config').read_text()\n\
         try:\n    Path('.git/config').write_text('evil')\n    r = 'written'\nexcept PermissionError as e:\n    r = str(e)\n\
         try:\n    Path('.git/hooks').mkdir()\n    r2 = 'made'\nexcept PermissionError as e:\n    r2 = str(e)\n\
         (text, r, r2)",
    );
    assert_eq!(
        outcome.value.py_repr(),
        format!(
            "('[core]\\n', {}, {})",
            s("[Errno 13] Permission denied: '.git/config'"),
            s("[Errno 13] Permission denied: '.git/hooks'")
        )
    );
    let refused: Vec<_> = outcome.denied.iter().map(|d| (d.path.as_str().to_owned(), d.access)).collect();
    assert_eq!(refused, vec![(".git/config".into(), AccessKind::Modify), (".git/hooks".into(), AccessKind::Create)]);
    assert_eq!(ws.diff(), vec![]);
}

#[test]
fn one_protected_child_blocks_a_whole_directory_rename() {
    let mut ws = Workspace::with(&[("proj/a.txt", b"a"), ("proj/deep/id_rsa", b"key"), ("proj/z.txt", b"z")]);
    let outcome = ws.outcome(
        "import os\n\
         try:\n    os.rename('proj', 'moved')\n    r = 'moved'\nexcept PermissionError as e:\n    r = str(e)\n\
         (r, sorted(os.listdir('proj')))",
    );
    assert_eq!(
        outcome.value.py_repr(),
        format!("({}, ['a.txt', 'deep', 'z.txt'])", s("[Errno 13] Permission denied: 'proj' -> 'moved'"))
    );
    assert_eq!(outcome.denied.len(), 1);
    // Named by the path the program gave: the secret's own name is hidden.
    assert_eq!(outcome.denied[0].path.as_str(), "proj");
    assert_eq!(outcome.denied[0].access, AccessKind::RenameSource);
    assert_eq!(ws.diff(), vec![], "no partial change");
}

#[test]
fn renaming_onto_a_protected_name_is_refused() {
    let mut ws = Workspace::with(&[("plain.txt", b"p")]);
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         try:\n    Path('plain.txt').rename('server.key')\n    r = 'renamed'\nexcept PermissionError:\n    r = 'denied'\n\
         r",
    );
    assert_eq!(outcome.value.py_repr(), s("denied"));
    assert_eq!(outcome.denied[0].access, AccessKind::RenameDestination);
    assert_eq!(ws.diff(), vec![]);
    let mut ws = Workspace::with(&[("a.txt", b"a")]);
    ws.eval("from pathlib import Path\nPath('a.txt').rename('b.txt')");
    assert_eq!(ws.diff(), vec![("a.txt".into(), DiffKind::Delete), ("b.txt".into(), DiffKind::Create)]);
}

#[test]
fn a_symlink_to_a_protected_file_is_refused_at_the_target() {
    let mut ws = Workspace::with(&[(".env", b"TOKEN=1")]);
    ws.symlink("innocent.txt", ".env");
    let outcome = ws.outcome(
        "from pathlib import Path\n\
         try:\n    r = Path('innocent.txt').read_text()\nexcept PermissionError as e:\n    r = str(e)\n\
         r",
    );
    assert_eq!(outcome.value.py_repr(), s("[Errno 13] Permission denied: 'innocent.txt'"));
    assert_eq!(outcome.denied[0].path.as_str(), ".env");
}

/// A directory that lists as empty but holds a hidden name cannot be
/// removed or replaced by a rename without that being on record: whether
/// it fails would tell what is hidden there. A truly empty one can.
#[test]
fn removing_or_replacing_a_directory_that_holds_only_hidden_names_is_refused_and_recorded() {
    let mut ws = Workspace::with(&[("deploy/.env", b"K=1"), ("empty/.keep", b""), ("a.txt", b"a")]);
    let outcome = ws.outcome(
        "import os\nos.remove('empty/.keep')\nr = []\nfor call in [lambda: os.rmdir('deploy'), lambda: os.mkdir('e'), \
         lambda: os.replace('e', 'deploy'), lambda: os.rmdir('empty')]:\n    try:\n        call()\n        \
         r.append('ok')\n    except OSError as error:\n        r.append(type(error).__name__)\n(os.listdir('deploy'), r)",
    );
    assert_eq!(outcome.value.py_repr(), "([], ['PermissionError', 'ok', 'PermissionError', 'ok'])");
    let denied: Vec<(String, AccessKind)> =
        outcome.denied.iter().map(|denied| (denied.path.to_string(), denied.access)).collect();
    assert_eq!(denied, [("deploy".to_owned(), AccessKind::Delete)], "recorded against the path given, once");
    assert!(!outcome.denied[0].rule.contains(".env"), "{:?}", outcome.denied);
}
