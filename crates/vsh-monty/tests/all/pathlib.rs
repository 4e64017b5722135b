//! `pathlib` round trips and the diff they leave.

use vsh_types::DiffKind;

use crate::common::{Workspace, s};

#[test]
fn read_write_round_trip_and_diff() {
    let mut ws = Workspace::with(&[("a.txt", b"alpha\n"), ("keep.txt", b"same")]);
    let value = ws.eval(
        "from pathlib import Path\n\
         text = Path('/workspace/a.txt').read_text()\n\
         n = Path('b.txt').write_text(text.upper())\n\
         m = Path('/workspace/c.bin').write_bytes(b'\\x00\\x01')\n\
         Path('keep.txt').write_text('same')\n\
         (text, n, m, Path('b.txt').read_text(), Path('c.bin').read_bytes())",
    );
    assert_eq!(value, "('alpha\\n', 6, 2, 'ALPHA\\n', b'\\x00\\x01')");
    assert_eq!(ws.diff(), vec![("b.txt".into(), DiffKind::Create), ("c.bin".into(), DiffKind::Create)]);
    assert_eq!(ws.host_file("b.txt"), None, "the host is never written");
}

#[test]
fn write_text_counts_characters_not_bytes() {
    let mut ws = Workspace::empty();
    assert_eq!(ws.eval("from pathlib import Path\nPath('u.txt').write_text('héllo')"), "5");
    assert_eq!(ws.eval("from pathlib import Path\nPath('u.txt').read_bytes()"), "b'h\\xc3\\xa9llo'");
}

#[test]
fn append_text_and_bytes_extend_or_create() {
    let mut ws = Workspace::with(&[("log.txt", b"one\n")]);
    let value = ws.eval(
        "from pathlib import Path\n\
         a = Path('log.txt').append_text('two\\n')\n\
         b = Path('new.bin').append_bytes(b'xy')\n\
         (a, b, Path('log.txt').read_text(), Path('new.bin').read_bytes())",
    );
    assert_eq!(value, "(4, 2, 'one\\ntwo\\n', b'xy')");
    assert_eq!(ws.diff(), vec![("log.txt".into(), DiffKind::Modify), ("new.bin".into(), DiffKind::Create)]);
}

#[test]
fn iterdir_lists_paths_spelled_like_the_argument() {
    let mut ws = Workspace::with(&[("d/x.txt", b"1"), ("d/y.txt", b"2"), ("top.txt", b"t")]);
    ws.mkdir("d/sub");
    let value = ws.eval(
        "from pathlib import Path\n\
         (sorted(str(p) for p in Path('/workspace/d').iterdir()),\n\
          sorted(str(p) for p in Path('d').iterdir()),\n\
          sorted(p.name for p in Path('.').iterdir()))",
    );
    assert_eq!(
        value,
        "(['/workspace/d/sub', '/workspace/d/x.txt', '/workspace/d/y.txt'], ['d/sub', 'd/x.txt', 'd/y.txt'], ['d', 'top.txt'])"
    );
}

#[test]
fn mkdir_parents_and_exist_ok() {
    let mut ws = Workspace::with(&[("f.txt", b"")]);
    let value = ws.eval(
        "from pathlib import Path\n\
         Path('a/b/c').mkdir(parents=True)\n\
         Path('a/b/c').mkdir(parents=True, exist_ok=True)\n\
         Path('solo').mkdir()\n\
         try:\n    Path('solo').mkdir()\n    r = 'no error'\nexcept FileExistsError as e:\n    r = str(e)\n\
         try:\n    Path('f.txt').mkdir(exist_ok=True)\n    r2 = 'no error'\nexcept FileExistsError as e:\n    r2 = str(e)\n\
         (Path('a/b/c').is_dir(), oct(Path('a/b').stat().st_mode), r, r2)",
    );
    assert_eq!(value, "(True, '0o40755', \"[Errno 17] File exists: 'solo'\", \"[Errno 17] File exists: 'f.txt'\")");
    assert_eq!(
        ws.diff(),
        vec![
            ("a".into(), DiffKind::Create),
            ("a/b".into(), DiffKind::Create),
            ("a/b/c".into(), DiffKind::Create),
            ("solo".into(), DiffKind::Create)
        ]
    );
}

#[test]
fn unlink_and_rmdir() {
    let mut ws = Workspace::with(&[("gone.txt", b"x"), ("empty/.keep", b"")]);
    ws.eval(
        "from pathlib import Path\n\
         Path('gone.txt').unlink()\n\
         Path('empty/.keep').unlink()\n\
         Path('empty').rmdir()",
    );
    assert_eq!(
        ws.diff(),
        vec![
            ("empty".into(), DiffKind::Delete),
            ("empty/.keep".into(), DiffKind::Delete),
            ("gone.txt".into(), DiffKind::Delete)
        ]
    );
    assert!(ws.root().join("gone.txt").exists(), "the host is never changed");
}

#[test]
fn rename_returns_the_target_path_and_moves_trees() {
    let mut ws = Workspace::with(&[("old.txt", b"o"), ("tree/a/b.txt", b"b")]);
    let value = ws.eval(
        "from pathlib import Path\n\
         r = Path('old.txt').rename('new.txt')\n\
         Path('tree').rename(Path('/workspace/moved'))\n\
         (r, str(r), Path('new.txt').read_text(), Path('moved/a/b.txt').read_text(), Path('tree').exists())",
    );
    assert_eq!(value, "(PosixPath('new.txt'), 'new.txt', 'o', 'b', False)");
    assert_eq!(
        ws.diff(),
        vec![
            ("moved".into(), DiffKind::Create),
            ("moved/a".into(), DiffKind::Create),
            ("moved/a/b.txt".into(), DiffKind::Create),
            ("new.txt".into(), DiffKind::Create),
            ("old.txt".into(), DiffKind::Delete),
            ("tree".into(), DiffKind::Delete),
            ("tree/a".into(), DiffKind::Delete),
            ("tree/a/b.txt".into(), DiffKind::Delete)
        ]
    );
}

#[test]
fn stat_reports_type_bits_size_and_mode() {
    let mut ws = Workspace::with(&[("f.txt", b"12345")]);
    std::fs::set_permissions(ws.root().join("f.txt"), std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let value = ws.eval(
        "from pathlib import Path\n\
         st = Path('f.txt').stat()\n\
         Path('n.txt').write_text('abc')\n\
         (oct(st.st_mode), st.st_size, st.st_mtime > 0, oct(Path('/workspace').stat().st_mode & 0o170000),\n\
          Path('n.txt').stat().st_size, oct(Path('n.txt').stat().st_mode))",
    );
    assert_eq!(value, "('0o100640', 5, True, '0o40000', 3, '0o100644')");
}

#[test]
fn predicates_answer_false_for_missing_and_unreachable_paths() {
    let mut ws = Workspace::with(&[("f.txt", b"x")]);
    ws.mkdir("d");
    let value = ws.eval(
        "from pathlib import Path\n\
         [Path('f.txt').exists(), Path('f.txt').is_file(), Path('f.txt').is_dir(), Path('d').is_dir(),\n\
          Path('missing').exists(), Path('f.txt/below').exists(), Path('/etc/passwd').exists(),\n\
          Path('../x').is_file(), Path('f.txt').is_symlink(), Path('/workspace').exists()]",
    );
    assert_eq!(value, "[True, True, False, True, False, False, False, False, False, True]");
}

#[test]
fn resolve_and_absolute_are_lexical() {
    let mut ws = Workspace::empty();
    let value = ws.eval(
        "from pathlib import Path\n\
         (str(Path('a/../b').resolve()), str(Path('a/../b').absolute()), str(Path('/workspace/x').resolve()))",
    );
    assert_eq!(value, "('/workspace/b', '/workspace/a/../b', '/workspace/x')");
}

#[test]
fn final_symlinks_are_followed_inside_the_workspace() {
    let mut ws = Workspace::with(&[("real.txt", b"target bytes")]);
    ws.mkdir("dir");
    ws.symlink("link.txt", "real.txt");
    ws.symlink("dangling", "nowhere");
    ws.symlink("escape", "../outside");
    ws.symlink("dirlink", "dir");
    let value = ws.eval(
        "from pathlib import Path\n\
         (Path('link.txt').read_text(), Path('link.txt').is_symlink(), Path('link.txt').is_file(),\n\
          Path('dangling').exists(), Path('dangling').is_symlink(), Path('escape').exists(),\n\
          Path('dirlink').is_dir(), Path('link.txt').stat().st_size)",
    );
    assert_eq!(value, format!("({}, True, True, False, True, False, True, 12)", s("target bytes")));
}

#[test]
fn a_path_through_a_symlink_is_errno_40() {
    let mut ws = Workspace::with(&[("dir/f.txt", b"f")]);
    ws.symlink("dirlink", "dir");
    let value = ws.eval(
        "from pathlib import Path\n\
         try:\n    Path('dirlink/f.txt').read_text()\n    r = 'read'\nexcept OSError as e:\n    r = str(e)\n\
         (r, Path('dirlink/f.txt').exists())",
    );
    assert_eq!(value, format!("({}, False)", s("[Errno 40] Too many levels of symbolic links: 'dirlink/f.txt'")));
}

#[test]
fn writes_follow_a_final_symlink_and_unlink_removes_the_link() {
    let mut ws = Workspace::with(&[("real.txt", b"old")]);
    ws.symlink("link.txt", "real.txt");
    ws.symlink("other", "real.txt");
    let value = ws.eval(
        "from pathlib import Path\n\
         n = Path('link.txt').write_text('new')\n\
         Path('other').unlink()\n\
         (n, Path('real.txt').read_text(), Path('link.txt').is_symlink(), Path('other').exists())",
    );
    assert_eq!(value, "(3, 'new', True, False)");
    assert_eq!(ws.diff(), vec![("other".into(), DiffKind::Delete), ("real.txt".into(), DiffKind::Modify)]);
}
