//! Paths outside the workspace are refused before anything is looked up, and
//! nothing outside is ever touched.

use crate::common::{Workspace, present, s};

#[test]
fn escapes_raise_permission_error_the_guest_can_catch() {
    let mut ws = Workspace::with(&[("in.txt", b"inside")]);
    std::fs::write(ws.parent.path().join("outside.txt"), b"secret outside").unwrap();
    let value = ws.eval(
        "from pathlib import Path\n\
         out = []\n\
         for p in ['/etc/passwd', '../outside.txt', '/workspace/../outside.txt', '/workspace/../etc/passwd', '/']:\n    \
             try:\n        Path(p).read_text()\n        out.append('READ')\n    \
             except PermissionError as e:\n        out.append(str(e))\n\
         out",
    );
    assert_eq!(
        value,
        format!(
            "[{}, {}, {}, {}, {}]",
            s("[Errno 13] Permission denied: '/etc/passwd'"),
            s("[Errno 13] Permission denied: '../outside.txt'"),
            s("[Errno 13] Permission denied: '/workspace/../outside.txt'"),
            s("[Errno 13] Permission denied: '/workspace/../etc/passwd'"),
            s("[Errno 13] Permission denied: '/'")
        )
    );
}

#[test]
fn outside_mutations_are_refused_and_nothing_outside_changes() {
    let mut ws = Workspace::empty();
    let outside = ws.parent.path().join("outside.txt");
    std::fs::write(&outside, b"keep").unwrap();
    let value = ws.eval(
        "from pathlib import Path\n\
         import os\n\
         marks = []\n\
         def attempt(f):\n    \
             try:\n        f()\n        marks.append('done')\n    \
             except PermissionError:\n        marks.append('denied')\n\
         attempt(lambda: Path('../outside.txt').write_text('x'))\n\
         attempt(lambda: Path('../new.txt').write_text('x'))\n\
         attempt(lambda: Path('../outside.txt').unlink())\n\
         attempt(lambda: os.rename('../outside.txt', 'stolen.txt'))\n\
         attempt(lambda: os.rename('x', '/tmp/x'))\n\
         attempt(lambda: Path('/tmp/vsh-monty-escape').mkdir())\n\
         attempt(lambda: open('../outside.txt', 'w'))\n\
         attempt(lambda: os.listdir('..'))\n\
         marks",
    );
    assert_eq!(value, "['denied', 'denied', 'denied', 'denied', 'denied', 'denied', 'denied', 'denied']");
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    assert!(!present(&ws.parent.path().join("new.txt")));
    assert!(!present(std::path::Path::new("/tmp/vsh-monty-escape")));
    assert_eq!(ws.diff(), vec![]);
}

#[test]
fn a_symlink_out_of_the_workspace_is_refused() {
    let mut ws = Workspace::empty();
    std::fs::write(ws.parent.path().join("outside.txt"), b"secret outside").unwrap();
    ws.symlink("out", "../outside.txt");
    ws.symlink("abs", "/etc/passwd");
    let value = ws.eval(
        "from pathlib import Path\n\
         out = [Path('out').exists(), Path('abs').is_file()]\n\
         for p in ['out', 'abs']:\n    \
             try:\n        Path(p).read_text()\n        out.append('READ')\n    \
             except PermissionError as e:\n        out.append(str(e))\n\
         out",
    );
    assert_eq!(
        value,
        format!(
            "[False, False, {}, {}]",
            s("[Errno 13] Permission denied: 'out'"),
            s("[Errno 13] Permission denied: 'abs'")
        )
    );
}

#[test]
fn nul_in_a_path_is_a_value_error() {
    let mut ws = Workspace::empty();
    let value = ws.eval(
        "from pathlib import Path\n\
         import os\n\
         out = [Path('a\\x00b').exists()]\n\
         try:\n    Path('a\\x00b').read_text()\nexcept ValueError as e:\n    out.append(str(e))\n\
         try:\n    os.rename('a', 'b\\x00')\nexcept ValueError as e:\n    out.append(str(e))\n\
         out",
    );
    assert_eq!(value, "[False, 'embedded null byte', 'rename: embedded null character in dst']");
}
