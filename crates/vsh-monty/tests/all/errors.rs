//! VFS errors reach the guest as `CPython`'s `OSError` subclasses, with errno and
//! the quoted path; every mapping is checked in process and in the worker.

use crate::common::{MODES, Workspace, exception, s};

/// Run `statement` (in process and in the worker) and return
/// `type(e).__name__` and `str(e)` of what it raised.
fn raised(ws: &mut Workspace, statement: &str) -> String {
    ws.eval_both(&format!(
        "from pathlib import Path\nimport os\ntry:\n    {statement}\n    r = 'no error'\nexcept OSError as e:\n    r = (type(e).__name__, str(e))\nr"
    ))
}

fn pair(type_name: &str, message: &str) -> String {
    format!("({}, {})", s(type_name), s(message))
}

fn fixture() -> Workspace {
    let ws = Workspace::with(&[("f.txt", b"f"), ("full/x", b"x"), ("other.txt", b"o")]);
    ws.mkdir("empty");
    ws
}

#[test]
fn errno_2_file_not_found() {
    let mut ws = fixture();
    assert_eq!(
        raised(&mut ws, "Path('missing.txt').read_text()"),
        pair("FileNotFoundError", "[Errno 2] No such file or directory: 'missing.txt'")
    );
    assert_eq!(
        raised(&mut ws, "Path('nodir/new.txt').write_text('x')"),
        pair("FileNotFoundError", "[Errno 2] No such file or directory: 'nodir/new.txt'")
    );
    assert_eq!(
        raised(&mut ws, "os.remove('/workspace/missing')"),
        pair("FileNotFoundError", "[Errno 2] No such file or directory: '/workspace/missing'")
    );
    assert_eq!(
        raised(&mut ws, "os.rename('missing', 'b')"),
        pair("FileNotFoundError", "[Errno 2] No such file or directory: 'missing' -> 'b'")
    );
}

#[test]
fn errno_17_file_exists() {
    let mut ws = fixture();
    assert_eq!(raised(&mut ws, "os.mkdir('empty')"), pair("FileExistsError", "[Errno 17] File exists: 'empty'"));
    assert_eq!(raised(&mut ws, "Path('f.txt').mkdir()"), pair("FileExistsError", "[Errno 17] File exists: 'f.txt'"));
}

#[test]
fn errno_20_not_a_directory() {
    let mut ws = fixture();
    assert_eq!(
        raised(&mut ws, "Path('f.txt/x').read_text()"),
        pair("NotADirectoryError", "[Errno 20] Not a directory: 'f.txt/x'")
    );
    assert_eq!(
        raised(&mut ws, "os.listdir('f.txt')"),
        pair("NotADirectoryError", "[Errno 20] Not a directory: 'f.txt'")
    );
    assert_eq!(raised(&mut ws, "os.rmdir('f.txt')"), pair("NotADirectoryError", "[Errno 20] Not a directory: 'f.txt'"));
    assert_eq!(
        raised(&mut ws, "os.rename('empty', 'f.txt')"),
        pair("NotADirectoryError", "[Errno 20] Not a directory: 'empty' -> 'f.txt'")
    );
}

#[test]
fn errno_21_is_a_directory() {
    let mut ws = fixture();
    assert_eq!(
        raised(&mut ws, "Path('empty').read_text()"),
        pair("IsADirectoryError", "[Errno 21] Is a directory: 'empty'")
    );
    assert_eq!(
        raised(&mut ws, "Path('empty').write_text('x')"),
        pair("IsADirectoryError", "[Errno 21] Is a directory: 'empty'")
    );
    assert_eq!(raised(&mut ws, "open('empty')"), pair("IsADirectoryError", "[Errno 21] Is a directory: 'empty'"));
    assert_eq!(raised(&mut ws, "os.unlink('empty')"), pair("IsADirectoryError", "[Errno 21] Is a directory: 'empty'"));
    assert_eq!(
        raised(&mut ws, "os.rename('f.txt', 'empty')"),
        pair("IsADirectoryError", "[Errno 21] Is a directory: 'f.txt' -> 'empty'")
    );
}

#[test]
fn errno_39_directory_not_empty() {
    let mut ws = fixture();
    assert_eq!(raised(&mut ws, "Path('full').rmdir()"), pair("OSError", "[Errno 39] Directory not empty: 'full'"));
    assert_eq!(
        raised(&mut ws, "os.rename('empty', 'full')"),
        pair("OSError", "[Errno 39] Directory not empty: 'empty' -> 'full'")
    );
}

#[test]
fn errno_22_invalid_rename() {
    let mut ws = fixture();
    assert_eq!(
        raised(&mut ws, "os.rename('full', 'full/inner')"),
        pair("OSError", "[Errno 22] Invalid argument: 'full' -> 'full/inner'")
    );
    assert_eq!(ws.diff(), vec![]);
}

#[test]
fn errno_13_permission_denied() {
    let mut ws = Workspace::with(&[(".env", b"SECRET=1"), ("ok.txt", b"ok")]);
    assert_eq!(
        raised(&mut ws, "Path('.env').read_text()"),
        pair("PermissionError", "[Errno 13] Permission denied: '.env'")
    );
    assert_eq!(
        raised(&mut ws, "Path('/etc/passwd').read_text()"),
        pair("PermissionError", "[Errno 13] Permission denied: '/etc/passwd'")
    );
    assert_eq!(
        raised(&mut ws, "vsh_write('.env', 'x')"),
        pair("PermissionError", "[Errno 13] Permission denied: '.env'")
    );
}

#[test]
fn invalid_utf8_is_unicode_decode_error() {
    let mut ws = Workspace::with(&[("bin.dat", b"ok\xff")]);
    let value = ws.eval_both(
        "from pathlib import Path\n\
         out = []\n\
         for read in [lambda: Path('bin.dat').read_text(), lambda: vsh_read('bin.dat'), lambda: open('bin.dat').read()]:\n    \
             try:\n        read()\n    except UnicodeDecodeError as e:\n        out.append((type(e).__name__, str(e)))\n\
         out",
    );
    let one = pair("UnicodeDecodeError", "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte");
    assert_eq!(value, format!("[{one}, {one}, {one}]"));
}

#[test]
fn uncaught_errors_end_the_run_with_a_traceback() {
    for mode in MODES {
        let mut ws = fixture().in_mode(mode);
        let error = exception(ws.run("from pathlib import Path\nx = 1\nPath('missing').read_bytes()"));
        assert_eq!(error.type_name, "FileNotFoundError");
        assert_eq!(error.message, "[Errno 2] No such file or directory: 'missing'");
        assert!(
            error.traceback.starts_with("Traceback (most recent call last):\n  File \"<vsh>\", line 3"),
            "{}",
            error.traceback
        );
        assert!(error.to_string().ends_with("FileNotFoundError: [Errno 2] No such file or directory: 'missing'"));
    }
}

#[test]
fn syntax_errors_are_exceptions() {
    for mode in MODES {
        let mut ws = fixture().in_mode(mode);
        let error = exception(ws.run("def broken(:\n    pass"));
        assert_eq!(error.type_name, "SyntaxError");
        assert!(!error.message.is_empty());
    }
}
