//! The Python features of the peer's defect list (open modes, file iteration,
//! `unlink(missing_ok=...)`, `Path.rename`'s value) as monty 0.0.23 and this host
//! serve them. Features monty itself lacks are pinned by `monty_lacks_*` tests
//! asserting today's refusal, so an upgrade that adds them shows up here.

use vsh_types::DiffKind;

use crate::common::{Workspace, s};

#[test]
fn open_w_truncates_at_open_and_writes_accumulate() {
    let mut ws = Workspace::with(&[("t.txt", b"old content")]);
    let value = ws.eval(
        "f = open('t.txt', 'w')\n\
         empty_now = open('t.txt').read()\n\
         f.write('ab')\nf.write('cd')\nf.close()\n\
         with open('new.txt', 'w') as g:\n    g.write('fresh')\n\
         (empty_now, open('t.txt').read(), open('new.txt').read())",
    );
    assert_eq!(value, "('', 'abcd', 'fresh')");
    assert_eq!(ws.diff(), vec![("new.txt".into(), DiffKind::Create), ("t.txt".into(), DiffKind::Modify)]);
}

#[test]
fn open_w_without_writing_still_truncates() {
    let mut ws = Workspace::with(&[("t.txt", b"old")]);
    ws.eval("open('t.txt', 'w').close()");
    let diff = ws.vfs.canonical_diff().unwrap();
    assert_eq!(diff.entries()[0].after.as_ref().map(|state| state.size), Some(0));
}

#[test]
fn open_a_appends_and_creates() {
    let mut ws = Workspace::with(&[("log.txt", b"1\n")]);
    let value = ws.eval(
        "with open('log.txt', 'a') as f:\n    start = f.tell()\n    f.write('2\\n')\n    f.write('3\\n')\n\
         with open('made.txt', 'a') as f:\n    f.write('m')\n\
         (start, open('log.txt').read(), open('made.txt').read())",
    );
    assert_eq!(value, "(2, '1\\n2\\n3\\n', 'm')");
}

#[test]
fn open_binary_modes() {
    let mut ws = Workspace::with(&[("b.bin", b"\x00\x01\r\n")]);
    let value = ws.eval(
        "with open('b.bin', 'rb') as f:\n    data = f.read()\n\
         with open('c.bin', 'wb') as f:\n    f.write(data + b'!')\n\
         (data, open('c.bin', 'rb').read())",
    );
    assert_eq!(value, "(b'\\x00\\x01\\r\\n', b'\\x00\\x01\\r\\n!')");
}

#[test]
fn open_r_on_a_missing_file_is_file_not_found() {
    let mut ws = Workspace::empty();
    let value =
        ws.eval("try:\n    open('nope.txt')\n    r = 'opened'\nexcept FileNotFoundError as e:\n    r = str(e)\nr");
    assert_eq!(value, s("[Errno 2] No such file or directory: 'nope.txt'"));
}

#[test]
fn path_rename_returns_the_new_path() {
    let mut ws = Workspace::with(&[("a.txt", b"a")]);
    let value = ws.eval(
        "from pathlib import Path\n\
         p = Path('a.txt').rename('b.txt')\n\
         (p, p.read_text(), p.exists())",
    );
    assert_eq!(value, "(PosixPath('b.txt'), 'a', True)");
}

#[test]
fn readlines_is_the_way_to_iterate_lines() {
    let mut ws = Workspace::with(&[("l.txt", b"x\ny\n")]);
    let value = ws.eval("with open('l.txt') as f:\n    lines = [line.strip() for line in f.readlines()]\nlines");
    assert_eq!(value, "['x', 'y']");
}

/// `type(e).__name__` and `str(e)` of what `statement` raised.
fn refusal(ws: &mut Workspace, statement: &str) -> String {
    ws.eval(&format!(
        "from pathlib import Path\ntry:\n    {statement}\n    r = 'supported'\nexcept Exception as e:\n    r = (type(e).__name__, str(e))\nr"
    ))
}

#[test]
fn monty_lacks_update_and_exclusive_open_modes() {
    let mut ws = Workspace::with(&[("f.txt", b"f")]);
    for mode in ["r+", "w+", "a+", "rb+"] {
        assert_eq!(
            refusal(&mut ws, &format!("open('f.txt', '{mode}')")),
            format!("({}, {})", s("ValueError"), s("update modes ('+') are not yet supported")),
            "{mode}"
        );
    }
    assert_eq!(
        refusal(&mut ws, "open('new.txt', 'x')"),
        format!("({}, {})", s("ValueError"), s("exclusive creation mode is not supported"))
    );
    assert_eq!(ws.diff(), vec![]);
}

#[test]
fn monty_lacks_iteration_over_a_file_object() {
    let mut ws = Workspace::with(&[("l.txt", b"x\ny\n")]);
    let value = refusal(&mut ws, "[line for line in open('l.txt')]");
    assert_eq!(value, format!("({}, {})", s("TypeError"), s("'_io.TextIOWrapper' object is not iterable")));
}

#[test]
fn monty_lacks_unlink_missing_ok() {
    let mut ws = Workspace::with(&[("f.txt", b"f")]);
    let value = refusal(&mut ws, "Path('missing').unlink(missing_ok=True)");
    assert_eq!(value, format!("({}, {})", s("TypeError"), s("unlink() takes no keyword arguments")));
    assert_eq!(ws.diff(), vec![], "the refused call never reached the host");
}

#[test]
fn backslashes_in_str_paths_are_ordinary_name_characters() {
    let mut ws = Workspace::empty();
    let value = ws.eval(
        "import os\n\
         with open('a\\\\b.txt', 'w') as f:\n    f.write('x')\n\
         os.listdir('.')",
    );
    assert_eq!(value, "['a\\\\b.txt']");
    assert_eq!(ws.diff(), vec![("a\\b.txt".into(), DiffKind::Create)]);
}

#[test]
fn monty_lacks_backslashes_in_path_objects() {
    let mut ws = Workspace::empty();
    assert_eq!(ws.eval("from pathlib import Path\nstr(Path('a\\\\b.txt'))"), s("a/b.txt"));
}

/// Compiled programs are kept per process (`drive.rs`): running the same
/// text again starts from scratch, sees the workspace as it is now, and a
/// program that does not compile fails every time.
#[test]
fn the_same_program_run_again_starts_fresh_and_reads_the_workspace_anew() {
    let program = "from pathlib import Path\nseen = []\nseen.append(len(seen))\n(seen, Path('x').read_text())";
    for content in ["a", "b", "c"] {
        let mut ws = Workspace::with(&[("x", content.as_bytes())]);
        for _ in 0..3 {
            assert_eq!(ws.eval(program), format!("([0], '{content}')"));
        }
    }
    let mut ws = Workspace::with(&[]);
    for _ in 0..2 {
        assert_eq!(crate::common::exception(ws.run("def broken(:\n    pass")).type_name, "SyntaxError");
    }
}
