//! Text reads: strict UTF-8 and `CPython`'s universal newlines.

use crate::common::{Workspace, exception, s};

#[test]
fn crlf_and_cr_become_newlines_in_text_reads_only() {
    let mut ws = Workspace::with(&[("dos.txt", b"one\r\ntwo\rthree\n")]);
    let value = ws.eval(
        "from pathlib import Path\n\
         with open('dos.txt') as f:\n    lines = f.readlines()\n\
         with open('dos.txt') as f:\n    whole = f.read()\n\
         (Path('dos.txt').read_text(), whole, lines, Path('dos.txt').read_bytes())",
    );
    assert_eq!(
        value,
        "('one\\ntwo\\nthree\\n', 'one\\ntwo\\nthree\\n', ['one\\n', 'two\\n', 'three\\n'], b'one\\r\\ntwo\\rthree\\n')"
    );
}

#[test]
fn invalid_utf8_raises_unicode_decode_error() {
    let mut ws = Workspace::with(&[("bin.dat", b"ok\xff\xfe")]);
    let value = ws.eval(
        "from pathlib import Path\n\
         try:\n    Path('bin.dat').read_text()\n    r = 'decoded'\nexcept UnicodeDecodeError as e:\n    r = str(e)\n\
         try:\n    Path('bin.dat').read_text()\nexcept ValueError:\n    r2 = 'caught as ValueError'\n\
         (r, r2, Path('bin.dat').read_bytes())",
    );
    assert_eq!(
        value,
        format!(
            "({}, 'caught as ValueError', b'ok\\xff\\xfe')",
            s("'utf-8' codec can't decode byte 0xff in position 2: invalid start byte")
        )
    );
    let error = exception(ws.run("open('bin.dat').read()"));
    assert_eq!(error.type_name, "UnicodeDecodeError");
}
