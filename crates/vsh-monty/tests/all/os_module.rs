//! `os` module equivalents, the synthetic environment and the refused clock.

use vsh_types::DiffKind;

use crate::common::{Workspace, exception, s};

#[test]
fn listdir_remove_rename_makedirs() {
    let mut ws = Workspace::with(&[("a.txt", b"a"), ("b.txt", b"b"), ("d/c.txt", b"c")]);
    let value = ws.eval(
        "import os\n\
         before = sorted(os.listdir('/workspace'))\n\
         cwd = sorted(os.listdir())\n\
         os.remove('a.txt')\n\
         os.rename('b.txt', 'd/b2.txt')\n\
         os.makedirs('x/y/z')\n\
         os.makedirs('x/y', exist_ok=True)\n\
         os.mkdir('x/w')\n\
         os.rmdir('x/w')\n\
         os.replace('d/c.txt', 'x/c.txt')\n\
         (before, cwd, sorted(os.listdir('d')), sorted(os.listdir('x')), os.stat('x/c.txt').st_size)",
    );
    assert_eq!(value, "(['a.txt', 'b.txt', 'd'], ['a.txt', 'b.txt', 'd'], ['b2.txt'], ['c.txt', 'y'], 1)");
    assert_eq!(
        ws.diff(),
        vec![
            ("a.txt".into(), DiffKind::Delete),
            ("b.txt".into(), DiffKind::Delete),
            ("d/b2.txt".into(), DiffKind::Create),
            ("d/c.txt".into(), DiffKind::Delete),
            ("x".into(), DiffKind::Create),
            ("x/c.txt".into(), DiffKind::Create),
            ("x/y".into(), DiffKind::Create),
            ("x/y/z".into(), DiffKind::Create)
        ]
    );
}

#[test]
fn makedirs_without_exist_ok_refuses_an_existing_directory() {
    let mut ws = Workspace::empty();
    ws.mkdir("d");
    let error = exception(ws.run("import os\nos.makedirs('d')"));
    assert_eq!(error.type_name, "FileExistsError");
    assert_eq!(error.message, "[Errno 17] File exists: 'd'");
}

#[test]
fn environment_is_synthetic() {
    let mut ws = Workspace::empty();
    assert!(std::env::var_os("CARGO").is_some(), "cargo sets CARGO for tests");
    let value = ws.eval(
        "import os\n\
         (os.getenv('HOME'), os.getenv('PWD'), os.getenv('PATH'), os.getenv('LANG'),\n\
          os.getenv('CARGO'), os.getenv('CARGO', 'fallback'), sorted(os.environ.keys()), os.environ['HOME'])",
    );
    assert_eq!(
        value,
        "('/home/vsh', '/workspace', '/usr/bin:/bin', 'C.UTF-8', None, 'fallback', ['HOME', 'LANG', 'PATH', 'PWD'], '/home/vsh')"
    );
}

#[test]
fn the_clock_is_refused() {
    let mut ws = Workspace::empty();
    let value = ws.eval(
        "from datetime import date, datetime\n\
         out = []\n\
         try:\n    date.today()\n    out.append('clock')\nexcept RuntimeError as e:\n    out.append(str(e))\n\
         try:\n    datetime.now()\n    out.append('clock')\nexcept RuntimeError as e:\n    out.append(str(e))\n\
         out",
    );
    assert_eq!(
        value,
        format!(
            "[{}, {}]",
            s("date.today() is not available in vsh: guest programs have no clock"),
            s("datetime.now() is not available in vsh: guest programs have no clock")
        )
    );
    let error = exception(ws.run("from datetime import datetime\ndatetime.now()"));
    assert_eq!(error.type_name, "RuntimeError");
}
