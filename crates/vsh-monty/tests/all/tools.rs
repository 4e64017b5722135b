//! The ten `vsh_*` functions, each with its edge cases, in process and in the
//! worker.

use std::os::unix::fs::PermissionsExt as _;

use vsh_monty::{ExecutionError, ExecutionLimits, LimitKind, MONTY_VSH_TOOL_NAMES};
use vsh_types::DiffKind;

use crate::common::{MODES, Mode, Workspace, exception, limit, s};

/// A small repository-like workspace.
fn fixture(mode: Mode) -> Workspace {
    let ws = Workspace::with(&[
        ("a.txt", b"hello\nworld\n"),
        ("dos.txt", b"one\r\ntwo\r\n"),
        ("bin.dat", b"\xff\x00binary"),
        (".env", b"SECRET=hello"),
        ("src/main.py", b"print('hello')\n"),
        ("src/lib/util.py", b"def f():\n    return 'Hello'\n"),
        ("src/lib/.env", b"hello"),
        ("docs/readme.md", b"Hello world\nsay hello, hello\nnothing\n"),
        ("[ab].txt", b"brackets"),
    ])
    .in_mode(mode);
    ws.mkdir("empty");
    ws
}

/// `(type(e).__name__, str(e))` of what `statement` raised, or `'ok'`.
fn raised(ws: &mut Workspace, statement: &str) -> String {
    ws.eval(&format!(
        "try:\n    {statement}\n    r = 'ok'\nexcept Exception as e:\n    r = (type(e).__name__, str(e))\nr"
    ))
}

fn pair(type_name: &str, message: &str) -> String {
    format!("({}, {})", s(type_name), s(message))
}

#[test]
fn the_ten_names_are_callable_globals() {
    assert_eq!(
        MONTY_VSH_TOOL_NAMES,
        [
            "vsh_read",
            "vsh_write",
            "vsh_list",
            "vsh_mkdir",
            "vsh_remove",
            "vsh_move",
            "vsh_copy",
            "vsh_glob",
            "vsh_search",
            "vsh_patch"
        ]
    );
    for mode in MODES {
        let mut ws = fixture(mode);
        let code = format!("[{}]", MONTY_VSH_TOOL_NAMES.join(", "));
        let expected: Vec<String> =
            MONTY_VSH_TOOL_NAMES.iter().map(|name| format!("<function '{name}' external>")).collect();
        assert_eq!(ws.eval(&code), format!("[{}]", expected.join(", ")));
    }
}

#[test]
fn vsh_read_text_bytes_and_errors() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(ws.eval("vsh_read('a.txt')"), s("hello\nworld\n"));
        assert_eq!(ws.eval("vsh_read('/workspace/dos.txt')"), s("one\r\ntwo\r\n"), "no newline translation");
        assert_eq!(ws.eval("vsh_read('bin.dat', binary=True)"), "b'\\xff\\x00binary'");
        assert_eq!(ws.eval("from pathlib import Path\nvsh_read(Path('a.txt'), False)"), s("hello\nworld\n"));
        assert_eq!(
            raised(&mut ws, "vsh_read('missing')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'missing'")
        );
        assert_eq!(raised(&mut ws, "vsh_read('src')"), pair("IsADirectoryError", "[Errno 21] Is a directory: 'src'"));
        assert_eq!(
            raised(&mut ws, "vsh_read('bin.dat')"),
            pair("UnicodeDecodeError", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte")
        );
        assert_eq!(
            raised(&mut ws, "vsh_read('.env')"),
            pair("PermissionError", "[Errno 13] Permission denied: '.env'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_read('../outside')"),
            pair("PermissionError", "[Errno 13] Permission denied: '../outside'")
        );
        assert_eq!(raised(&mut ws, "vsh_read('a\\x00b')"), pair("ValueError", "embedded null byte"));
    }
}

#[test]
fn arguments_bind_like_cpython() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(
            raised(&mut ws, "vsh_read()"),
            pair("TypeError", "vsh_read() missing 1 required positional argument: 'path'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_patch('a.txt')"),
            pair("TypeError", "vsh_patch() missing 2 required positional arguments: 'old' and 'new'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_read('a', False, 3)"),
            pair("TypeError", "vsh_read() takes from 1 to 2 positional arguments but 3 were given")
        );
        assert_eq!(
            raised(&mut ws, "vsh_move('a', 'b', 'c')"),
            pair("TypeError", "vsh_move() takes 2 positional arguments but 3 were given")
        );
        assert_eq!(
            raised(&mut ws, "vsh_read('a.txt', mode='r')"),
            pair("TypeError", "vsh_read() got an unexpected keyword argument 'mode'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_read('a.txt', path='b')"),
            pair("TypeError", "vsh_read() got multiple values for argument 'path'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_read(1)"),
            pair("TypeError", "vsh_read() argument 'path' must be str or Path, not int")
        );
        assert_eq!(
            raised(&mut ws, "vsh_read('a.txt', binary=1)"),
            pair("TypeError", "vsh_read() argument 'binary' must be bool, not int")
        );
        assert_eq!(
            raised(&mut ws, "vsh_glob('*', '/workspace', 10, True)"),
            pair("TypeError", "vsh_glob() takes from 1 to 3 positional arguments but 4 were given"),
            "report_truncation is keyword-only"
        );
        assert_eq!(ws.eval("vsh_read(path='a.txt', binary=False)"), s("hello\nworld\n"));
    }
}

#[test]
fn vsh_write_counts_and_appends() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(ws.eval("vsh_write('new.txt', 'héllo')"), "5");
        assert_eq!(ws.eval("vsh_write('new.bin', b'\\x00\\x01\\x02')"), "3");
        assert_eq!(ws.eval("vsh_write('new.txt', ' again', append=True)\nvsh_read('new.txt')"), s("héllo again"));
        assert_eq!(ws.eval("vsh_write('fresh.txt', 'x', True)\nvsh_read('fresh.txt')"), s("x"), "append creates");
        assert_eq!(
            raised(&mut ws, "vsh_write('nodir/x.txt', 'x')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'nodir/x.txt'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_write('empty', 'x')"),
            pair("IsADirectoryError", "[Errno 21] Is a directory: 'empty'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_write('x.txt', 3)"),
            pair("TypeError", "vsh_write() argument 'data' must be str or bytes, not int")
        );
        let diff = ws.diff();
        assert!(diff.contains(&("new.txt".to_owned(), DiffKind::Create)), "{diff:?}");
        assert_eq!(ws.host_file("new.txt"), None, "the host is untouched");
    }
}

#[test]
fn vsh_list_hides_protected_children() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(
            ws.eval("[str(p) for p in vsh_list()]"),
            "['/workspace/[ab].txt', '/workspace/a.txt', '/workspace/bin.dat', '/workspace/docs', '/workspace/dos.txt', '/workspace/empty', '/workspace/src']"
        );
        assert_eq!(ws.eval("vsh_list('src/lib')"), "[PosixPath('src/lib/util.py')]");
        assert_eq!(ws.eval("vsh_list('empty')"), "[]");
        assert_eq!(
            raised(&mut ws, "vsh_list('a.txt')"),
            pair("NotADirectoryError", "[Errno 20] Not a directory: 'a.txt'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_list('nope')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'nope'")
        );
    }
}

#[test]
fn vsh_mkdir_defaults_to_parents_and_exist_ok() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(ws.eval("vsh_mkdir('x/y/z')\nvsh_mkdir('x/y/z')\nvsh_list('x/y')"), "[PosixPath('x/y/z')]");
        assert_eq!(
            raised(&mut ws, "vsh_mkdir('empty', exist_ok=False)"),
            pair("FileExistsError", "[Errno 17] File exists: 'empty'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_mkdir('p/q', parents=False)"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'p/q'")
        );
        assert_eq!(raised(&mut ws, "vsh_mkdir('a.txt')"), pair("FileExistsError", "[Errno 17] File exists: 'a.txt'"));
        assert_eq!(ws.eval("vsh_mkdir('solo', False, False)"), "None");
    }
}

#[test]
fn vsh_remove_files_directories_and_trees() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(ws.eval("vsh_remove('a.txt')\nvsh_list('.')[0]"), "PosixPath('[ab].txt')");
        assert_eq!(
            raised(&mut ws, "vsh_remove('a.txt')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'a.txt'")
        );
        assert_eq!(ws.eval("vsh_remove('a.txt', missing_ok=True)"), "None");
        assert_eq!(ws.eval("vsh_remove('empty')"), "None", "an empty directory needs no recursion");
        assert_eq!(raised(&mut ws, "vsh_remove('docs')"), pair("OSError", "[Errno 39] Directory not empty: 'docs'"));
        assert!(!ws.eval("vsh_remove('docs', recursive=True)\n[str(p) for p in vsh_list()]").contains("docs"));
        assert_eq!(
            raised(&mut ws, "vsh_remove('src', recursive=True)"),
            pair("PermissionError", "[Errno 13] Permission denied: 'src'"),
            "src/lib/.env is protected, so nothing of src may go"
        );
        assert_eq!(ws.eval("vsh_read('src/main.py')"), s("print('hello')\n"));
        assert_eq!(
            raised(&mut ws, "vsh_remove('/workspace', recursive=True)"),
            pair("PermissionError", "[Errno 13] Permission denied: '/workspace'")
        );
        let diff = ws.diff();
        assert!(diff.contains(&("docs/readme.md".to_owned(), DiffKind::Delete)), "{diff:?}");
        assert!(!diff.iter().any(|(path, _)| path.starts_with("src")), "{diff:?}");
    }
}

#[test]
fn vsh_move_renames_with_full_authorization() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(ws.eval("vsh_move('a.txt', 'b.txt')"), "PosixPath('/workspace/b.txt')");
        assert_eq!(
            ws.eval("from pathlib import Path\n(Path('a.txt').exists(), Path('b.txt').read_text())"),
            format!("(False, {})", s("hello\nworld\n"))
        );
        assert_eq!(ws.eval("vsh_move('docs', 'manual')\nvsh_list('manual')"), "[PosixPath('manual/readme.md')]");
        assert_eq!(
            raised(&mut ws, "vsh_move('manual', 'manual/inner')"),
            pair("OSError", "[Errno 22] Invalid argument: 'manual' -> 'manual/inner'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_move('missing', 'x')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'missing' -> 'x'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_move('b.txt', 'secrets/b.txt')"),
            pair("PermissionError", "[Errno 13] Permission denied: 'b.txt' -> 'secrets/b.txt'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_move('src', 'code')"),
            pair("PermissionError", "[Errno 13] Permission denied: 'src' -> 'code'"),
            "a protected descendant blocks the move"
        );
    }
}

#[test]
fn vsh_copy_files_and_trees() {
    for mode in MODES {
        let mut ws = fixture(mode);
        std::fs::set_permissions(ws.root().join("docs"), std::fs::Permissions::from_mode(0o750)).unwrap();
        std::fs::write(ws.root().join("private.txt"), b"old").unwrap();
        std::fs::set_permissions(ws.root().join("private.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(ws.eval("vsh_copy('a.txt', 'c.txt')"), "PosixPath('/workspace/c.txt')");
        assert_eq!(ws.eval("vsh_read('c.txt')"), s("hello\nworld\n"));
        assert_eq!(
            raised(&mut ws, "vsh_copy('a.txt', 'c.txt')"),
            pair("FileExistsError", "[Errno 17] File exists: 'c.txt'")
        );
        assert_eq!(
            ws.eval("from pathlib import Path\nvsh_copy('a.txt', 'private.txt', overwrite=True)\n(vsh_read('private.txt'), oct(Path('private.txt').stat().st_mode & 0o777))"),
            format!("({}, '0o600')", s("hello\nworld\n")),
            "an overwritten file keeps its mode"
        );
        assert_eq!(
            raised(&mut ws, "vsh_copy('docs', 'docs2')"),
            pair("IsADirectoryError", "[Errno 21] Is a directory: 'docs'")
        );
        assert_eq!(
            ws.eval("from pathlib import Path\nvsh_copy('docs', 'docs2', recursive=True)\n(vsh_list('docs2'), oct(Path('docs2').stat().st_mode & 0o777))"),
            "([PosixPath('docs2/readme.md')], '0o750')"
        );
        assert_eq!(
            raised(&mut ws, "vsh_copy('docs', 'docs2', recursive=True, overwrite=True)"),
            pair("FileExistsError", "[Errno 17] File exists: 'docs2'"),
            "no directory merge"
        );
        assert_eq!(
            raised(&mut ws, "vsh_copy('docs', 'docs/inner', recursive=True)"),
            pair("ValueError", "vsh_copy() cannot copy a directory into itself")
        );
        assert_eq!(
            raised(&mut ws, "vsh_copy('src', 'src2', recursive=True)"),
            pair("PermissionError", "[Errno 13] Permission denied: 'src'"),
            "a protected file in the tree blocks the copy"
        );
        assert_eq!(ws.eval("from pathlib import Path\nPath('src2').exists()"), "False", "nothing was created");
        assert_eq!(
            raised(&mut ws, "vsh_copy('a.txt', 'a.txt', overwrite=True)"),
            pair("ValueError", "vsh_copy() source and destination are the same file")
        );
        assert_eq!(
            raised(&mut ws, "vsh_copy('missing', 'x')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'missing'")
        );
    }
}

#[test]
fn vsh_copy_refuses_symlinks_before_creating_anything() {
    for mode in MODES {
        let mut ws = fixture(mode);
        ws.mkdir("tree/sub");
        std::fs::write(ws.root().join("tree/file"), b"x").unwrap();
        ws.symlink("tree/sub/link", "../file");
        ws.symlink("alink", "a.txt");
        assert_eq!(
            raised(&mut ws, "vsh_copy('tree', 'tree2', recursive=True)"),
            pair("ValueError", "vsh_copy() cannot copy a symlink: 'tree/sub/link'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_copy('alink', 'b')"),
            pair("ValueError", "vsh_copy() cannot copy a symlink: 'alink'")
        );
        assert_eq!(ws.diff(), vec![]);
    }
}

#[test]
fn vsh_glob_matches_in_order_and_reports_truncation() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(
            ws.eval("[str(p) for p in vsh_glob('**/*.py')]"),
            "['/workspace/src/lib/util.py', '/workspace/src/main.py']"
        );
        assert_eq!(ws.eval("vsh_glob('*.txt', 'src')"), "[]");
        assert_eq!(ws.eval("vsh_glob('*.py', 'src')"), "[PosixPath('src/main.py')]");
        // One glob dialect with the policy's rules: `[ab]` is a class, `[[]` a literal bracket.
        assert_eq!(ws.eval("vsh_glob('[ab].txt')"), "[PosixPath('/workspace/a.txt')]", "a class");
        assert_eq!(ws.eval("vsh_glob('[!a].txt')"), "[]", "a negated class");
        assert_eq!(ws.eval("vsh_glob('[[]ab].txt')"), "[PosixPath('/workspace/[ab].txt')]", "a literal bracket");
        assert_eq!(
            ws.eval("[str(p) for p in vsh_glob('src/**')]"),
            "['/workspace/src', '/workspace/src/lib', '/workspace/src/lib/util.py', '/workspace/src/main.py']",
            "`**` matches zero components too"
        );
        assert_eq!(ws.eval("vsh_glob('?.txt')"), "[PosixPath('/workspace/a.txt')]");
        assert_eq!(ws.eval("vsh_glob('**/.env')"), "[]", "protected files never match");
        assert_eq!(
            ws.eval("vsh_glob('**/*', max_results=2, report_truncation=True)"),
            "([PosixPath('/workspace/[ab].txt'), PosixPath('/workspace/a.txt')], True)"
        );
        assert_eq!(
            ws.eval("vsh_glob('**/*.py', report_truncation=True, max_results=2)[1]"),
            "False",
            "exactly full is not truncated"
        );
        assert_eq!(ws.eval("vsh_glob('**/*.py', max_results=0, report_truncation=True)"), "([], True)");
        // Truncation is counted for the host even when the guest does not ask.
        assert_eq!(
            ws.outcome("vsh_glob('**/*', max_results=1)\nvsh_search('hello', max_results=1)").stats.truncated_results,
            2
        );
        assert_eq!(ws.outcome("vsh_glob('**/*.py')").stats.truncated_results, 0);
        assert_eq!(ws.eval("vsh_glob('*.none', max_results=0, report_truncation=True)"), "([], False)");
        assert_eq!(
            raised(&mut ws, "vsh_glob('/etc/*')"),
            pair(
                "ValueError",
                "vsh_glob() pattern \"/etc/*\" is absolute; patterns are relative to the workspace root"
            )
        );
        assert_eq!(
            raised(&mut ws, "vsh_glob('../*')"),
            pair("ValueError", "vsh_glob() pattern \"../*\" has a \"..\" component")
        );
        assert_eq!(
            raised(&mut ws, "vsh_glob('src//*')"),
            pair("ValueError", "vsh_glob() pattern \"src//*\" has an empty component")
        );
        assert_eq!(
            raised(&mut ws, "vsh_glob('[z-a]')"),
            pair("ValueError", "vsh_glob() pattern \"[z-a]\" has a reversed range 'z'-'a'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_glob('*', max_results=-1)"),
            pair("ValueError", "vsh_glob() max_results must not be negative")
        );
        assert_eq!(
            raised(&mut ws, "vsh_glob('*', 'a.txt')"),
            pair("NotADirectoryError", "[Errno 20] Not a directory: 'a.txt'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_glob('*', 'nope')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'nope'")
        );
        assert_eq!(ws.eval("vsh_write('src/new.py', '')\nlen(vsh_glob('**/*.py'))"), "3", "glob sees the overlay");
    }
}

/// ux53: one file larger than a read may take (a build's binary, a data
/// file) ended a search of the whole tree, uncatchably; a walk leaves it
/// out, as it leaves out a file that is not text. Named alone, it is read,
/// and the bound says so.
#[test]
fn vsh_search_of_a_tree_leaves_out_a_file_larger_than_one_read() {
    let big = format!("needle\n{}", "x".repeat(5 << 20));
    let mut ws = Workspace::with(&[("src/a.txt", b"a needle\n"), ("data/big.csv", big.as_bytes())]);
    assert_eq!(ws.eval("[h['path'] for h in vsh_search('needle')]"), "['/workspace/src/a.txt']");
    let alone = ws.run("vsh_search('needle', 'data/big.csv')").unwrap_err();
    assert!(format!("{alone:?}").contains("ReadCallBytes"), "{alone:?}");
}

#[test]
fn vsh_search_lines_columns_and_truncation() {
    for mode in MODES {
        let mut ws = fixture(mode);
        assert_eq!(
            ws.eval("[(h['path'], h['line'], h['column'], h['text']) for h in vsh_search('hello')]"),
            "[('/workspace/a.txt', 1, 1, 'hello'), ('/workspace/docs/readme.md', 2, 5, 'say hello, hello'), ('/workspace/src/main.py', 1, 8, \"print('hello')\")]",
            "first hit per line; .env files and non-UTF-8 files are skipped"
        );
        assert_eq!(
            ws.eval("[(h['path'], h['line'], h['column']) for h in vsh_search('HELLO', 'docs', case_sensitive=False)]"),
            "[('docs/readme.md', 1, 1), ('docs/readme.md', 2, 5)]"
        );
        assert_eq!(
            ws.eval("[(h['line'], h['column']) for h in vsh_search('Hello', 'src/lib/util.py')]"),
            "[(2, 13)]",
            "a file can be searched alone"
        );
        assert_eq!(
            ws.eval(
                "vsh_write('u.txt', 'ßtraße STRASSE')\n[h['column'] for h in vsh_search('strasse', 'u.txt', False)]"
            ),
            "[8]"
        );
        assert_eq!(ws.eval("len(vsh_search('hello', max_results=2))"), "2");
        assert_eq!(ws.eval("vsh_search('hello', max_results=2, report_truncation=True)[1]"), "True");
        assert_eq!(ws.eval("vsh_search('nothing', report_truncation=True)[1]"), "False");
        assert_eq!(ws.eval("vsh_search('hello', max_results=0, report_truncation=True)"), "([], True)");
        assert_eq!(raised(&mut ws, "vsh_search('')"), pair("ValueError", "vsh_search() query must not be empty"));
        assert_eq!(
            raised(&mut ws, "vsh_search('x', 'missing')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'missing'")
        );
    }
}

#[test]
fn vsh_patch_returns_the_exact_count() {
    for mode in MODES {
        let mut ws = Workspace::with(&[("p.txt", b"a-a-a\r\nend"), ("bin.dat", b"\xff")]).in_mode(mode);
        assert_eq!(ws.eval("vsh_patch('p.txt', 'a', 'b')"), "1");
        assert_eq!(ws.eval("vsh_read('p.txt')"), s("b-a-a\r\nend"), "line endings are kept");
        assert_eq!(ws.eval("vsh_patch('p.txt', 'a', 'c', count=5)"), "2", "fewer occurrences than count");
        assert_eq!(ws.eval("vsh_write('q.txt', 'xxxx')\nvsh_patch('q.txt', 'xx', 'y', 3)"), "2");
        assert_eq!(ws.eval("vsh_patch('q.txt', 'y', 'zz', 2)"), "2");
        assert_eq!(ws.eval("vsh_read('q.txt')"), s("zzzz"));
        assert_eq!(
            raised(&mut ws, "vsh_patch('p.txt', 'missing', 'x')"),
            pair("ValueError", "vsh_patch() text not found in 'p.txt'")
        );
        assert_eq!(
            raised(&mut ws, "vsh_patch('p.txt', '', 'x')"),
            pair("ValueError", "vsh_patch() old must not be empty")
        );
        assert_eq!(
            raised(&mut ws, "vsh_patch('p.txt', 'b', 'x', 0)"),
            pair("ValueError", "vsh_patch() count must be positive")
        );
        assert_eq!(
            raised(&mut ws, "vsh_patch('bin.dat', 'a', 'b')"),
            pair("UnicodeDecodeError", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte")
        );
        assert_eq!(
            raised(&mut ws, "vsh_patch('none.txt', 'a', 'b')"),
            pair("FileNotFoundError", "[Errno 2] No such file or directory: 'none.txt'")
        );
    }
}

#[test]
fn pathlib_and_vsh_functions_share_one_overlay_and_each_call_is_one_os_call() {
    for mode in MODES {
        let mut ws = fixture(mode);
        let outcome = ws.outcome(
            "from pathlib import Path\n\
             Path('p.txt').write_text('from pathlib')\n\
             a = vsh_read('p.txt')\n\
             vsh_write('v.txt', 'from vsh')\n\
             b = Path('v.txt').read_text()\n\
             (a, b)",
        );
        assert_eq!(outcome.value.py_repr(), "('from pathlib', 'from vsh')");
        assert_eq!(outcome.stats.os_calls, 4);
    }
}

#[test]
fn vsh_calls_are_charged_to_the_budgets() {
    for mode in MODES {
        let mut ws = fixture(mode);
        let tight = ExecutionLimits { max_io_call_bytes: 4, ..ExecutionLimits::default() };
        assert_eq!(limit(ws.run_with("vsh_read('a.txt')", &tight)).0.limit, LimitKind::ReadCallBytes);
        assert_eq!(limit(ws.run_with("vsh_write('x', 'abcdef')", &tight)).0.limit, LimitKind::WriteCallBytes);
        assert_eq!(limit(ws.run_with("vsh_copy('a.txt', 'x')", &tight)).0.limit, LimitKind::ReadCallBytes);
        let few = ExecutionLimits { max_directory_entries: 3, ..ExecutionLimits::default() };
        assert_eq!(limit(ws.run_with("vsh_glob('**/*')", &few)).0.limit, LimitKind::DirectoryEntries);
        let calls = ExecutionLimits { max_os_calls: 2, ..ExecutionLimits::default() };
        let result = ws.run_with(
            "try:\n    for i in range(5):\n        vsh_list()\nexcept BaseException:\n    pass\n'caught'",
            &calls,
        );
        assert_eq!(limit(result).0.limit, LimitKind::OsCalls);
        let result = ws.run("vsh_frobnicate()");
        assert!(matches!(result, Err(ExecutionError::Exception { .. })), "unknown names are NameErrors: {result:?}");
        let error = exception(ws.run("vsh_frobnicate()"));
        assert_eq!(error.type_name, "NameError");
    }
}

#[test]
fn vsh_glob_means_what_a_policy_rule_of_the_same_text_means() {
    // Every path the guest can see (protected `.env` files are hidden from both).
    let visible = [
        "[ab].txt",
        "a.txt",
        "bin.dat",
        "docs",
        "docs/readme.md",
        "dos.txt",
        "empty",
        "src",
        "src/lib",
        "src/lib/util.py",
        "src/main.py",
    ];
    let patterns =
        ["src/[an]*.py", "src/[lm]*", "**/*.py", "src/**/[!u]*", "*", "**/[a-c]*.txt", "**", "d*/**", "[[]*", "*.??"];
    for mode in MODES {
        let mut ws = fixture(mode);
        for text in patterns {
            let rule = vsh_policy::Pattern::parse(text).unwrap();
            let expected: Vec<String> = visible
                .iter()
                .filter(|path| rule.matches(&vsh_types::VPath::parse(path).unwrap()))
                .map(|path| format!("/workspace/{path}"))
                .collect();
            let found = ws.eval(&format!("sorted(str(p) for p in vsh_glob({}))", s(text)));
            let expected = format!("[{}]", expected.iter().map(|path| s(path)).collect::<Vec<_>>().join(", "));
            assert_eq!(found, expected, "{text} ({mode:?})");
        }
    }
}
