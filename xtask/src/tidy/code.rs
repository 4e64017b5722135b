//! A rough Rust lexer for tidy: blank out comments and literals so patterns match only code.
//!
//! [`strip`] keeps every line break, so a line number in the stripped text is a line number
//! in the file. It knows line and nested block comments, string, byte and C string literals
//! (raw or not), char literals and lifetimes. It does not know macros or token trees; that is
//! enough for "is there an `unsafe {` outside a comment".

/// The source with comments and the contents of string and char literals replaced by spaces.
///
/// Line breaks are kept everywhere, and the quotes of literals stay, so `"unsafe {"` becomes `"         "`.
pub(super) fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = skip_block_comment(&chars, i, &mut out);
        } else if c == '"' {
            i = skip_string(&chars, i, &mut out);
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            i = skip_raw_string(&chars, i, hashes, &mut out);
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i, &mut out);
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether `c` can be part of an identifier.
pub(super) fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Push a blanked-out character: line breaks stay, everything else becomes a space.
fn blank(out: &mut String, c: char) {
    out.push(if c == '\n' { '\n' } else { ' ' });
}

/// Skip a (possibly nested) block comment starting at `start`; returns the index after it.
fn skip_block_comment(chars: &[char], start: usize, out: &mut String) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            out.push_str("  ");
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            out.push_str("  ");
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            blank(out, chars[i]);
            i += 1;
        }
    }
    i
}

/// Skip a `"..."` literal whose opening quote is at `start`, honouring `\` escapes.
fn skip_string(chars: &[char], start: usize, out: &mut String) -> usize {
    out.push('"');
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                blank(out, chars[i]);
                if let Some(&escaped) = chars.get(i + 1) {
                    blank(out, escaped);
                }
                i += 2;
            }
            '"' => {
                out.push('"');
                return i + 1;
            }
            other => {
                blank(out, other);
                i += 1;
            }
        }
    }
    i
}

/// If a raw string (`r"`, `r#"`, `br##"`, `cr"`...) has its `r` at `i`, the number of `#`s.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if chars[i] != 'r' {
        return None;
    }
    // The `r` starts a token, or follows a `b`/`c` prefix that does.
    let starts_token = |at: usize| at == 0 || !is_ident_char(chars[at - 1]);
    let prefixed = i >= 1 && matches!(chars[i - 1], 'b' | 'c') && starts_token(i - 1);
    if !starts_token(i) && !prefixed {
        return None;
    }
    let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
    (chars.get(i + 1 + hashes) == Some(&'"')).then_some(hashes)
}

/// Skip a raw string whose `r` is at `start` and which is closed by `"` and `hashes` `#`s.
fn skip_raw_string(chars: &[char], start: usize, hashes: usize, out: &mut String) -> usize {
    let mut i = start + 1 + hashes + 1;
    out.push('r');
    out.extend(std::iter::repeat_n('#', hashes));
    out.push('"');
    while i < chars.len() {
        let closes = chars[i] == '"'
            && chars.len() - (i + 1) >= hashes
            && chars[i + 1..i + 1 + hashes].iter().all(|c| *c == '#');
        if closes {
            out.push('"');
            out.extend(std::iter::repeat_n('#', hashes));
            return i + 1 + hashes;
        }
        blank(out, chars[i]);
        i += 1;
    }
    i
}

/// Skip a char literal (`'a'`, `'\n'`, `'\u{1F600}'`) at `start`, or copy a lifetime or label.
fn skip_char_or_lifetime(chars: &[char], start: usize, out: &mut String) -> usize {
    let next = chars.get(start + 1).copied();
    let is_char_literal = next == Some('\\') || chars.get(start + 2) == Some(&'\'');
    if !is_char_literal {
        out.push('\'');
        return start + 1;
    }
    out.push('\'');
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                out.push_str("  ");
                i += 2;
            }
            '\'' => {
                out.push('\'');
                return i + 1;
            }
            other => {
                blank(out, other);
                i += 1;
            }
        }
    }
    i
}

/// What follows an `unsafe` keyword.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum UnsafeKind {
    /// `unsafe { ... }`.
    Block,
    /// `unsafe fn`, `unsafe impl`, `unsafe trait`, `unsafe extern` or `unsafe(...)` in an attribute.
    Item,
}

/// Every `unsafe` keyword in stripped code: its 0-based line and what it introduces.
///
/// An `unsafe` followed by anything else (such a thing is not valid Rust) is not reported.
pub(super) fn find_unsafe(stripped: &str) -> Vec<(usize, UnsafeKind)> {
    let mut found = Vec::new();
    let mut search_from = 0;
    while let Some(offset) = stripped[search_from..].find("unsafe") {
        let at = search_from + offset;
        let end = at + "unsafe".len();
        search_from = end;
        let before_ok = stripped[..at].chars().next_back().is_none_or(|c| !is_ident_char(c));
        let after_ok = stripped[end..].chars().next().is_none_or(|c| !is_ident_char(c));
        if !before_ok || !after_ok {
            continue;
        }
        let rest = stripped[end..].trim_start();
        let next_word: String = rest.chars().take_while(|c| is_ident_char(*c)).collect();
        let kind = if rest.starts_with('{') {
            UnsafeKind::Block
        } else if rest.starts_with('(') || matches!(next_word.as_str(), "fn" | "impl" | "trait" | "extern") {
            UnsafeKind::Item
        } else {
            continue;
        };
        let line = stripped[..at].matches('\n').count();
        found.push((line, kind));
    }
    found
}

/// The 0-based lines of `stripped` where `word` occurs as a whole identifier.
pub(super) fn find_word(stripped: &str, word: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for (at, _) in stripped.match_indices(word) {
        let before_ok = stripped[..at].chars().next_back().is_none_or(|c| !is_ident_char(c));
        let after_ok = stripped[at + word.len()..].chars().next().is_none_or(|c| !is_ident_char(c));
        if before_ok && after_ok {
            lines.push(stripped[..at].matches('\n').count());
        }
    }
    lines
}

/// Whether `word` occurs in `line` with no identifier character right before it.
pub(super) fn contains_token(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| line[..at].chars().next_back().is_none_or(|c| !is_ident_char(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_comments_and_literals_but_keeps_lines() {
        let source = "a // unsafe {\n/* x /* nested */ unsafe { */ b\n\"unsafe {\" 'u' '\\'' 'a: loop {}\n";
        let stripped = strip(source);
        assert_eq!(stripped.lines().count(), source.lines().count());
        assert!(!stripped.contains("unsafe"), "{stripped}");
        assert!(stripped.contains("'a: loop {}"), "{stripped}");
        assert!(stripped.contains(" b"), "{stripped}");
    }

    #[test]
    fn strips_raw_strings() {
        let stripped = strip("let s = r#\"unsafe { \"quoted\" }\"#; unsafe { x }\nlet b = br\"dbg!(\";");
        assert_eq!(find_unsafe(&stripped), vec![(0, UnsafeKind::Block)]);
        assert!(!stripped.contains("dbg"));
        // A raw identifier is not a raw string.
        assert_eq!(strip("r#type"), "r#type");
    }

    #[test]
    fn finds_unsafe_kinds() {
        let code = "#![deny(unsafe_code)]\nunsafe fn f() {}\nlet x = unsafe\n{ 1 };\nunsafe impl Send for X {}\n#[unsafe(no_mangle)]\nnot_unsafe { }";
        assert_eq!(
            find_unsafe(code),
            vec![(1, UnsafeKind::Item), (2, UnsafeKind::Block), (4, UnsafeKind::Item), (5, UnsafeKind::Item)]
        );
    }

    #[test]
    fn tokens_need_a_boundary() {
        assert!(contains_token("    dbg!(x)", "dbg!("));
        assert!(contains_token("std::dbg!(x)", "dbg!("));
        assert!(!contains_token("my_dbg!(x)", "dbg!("));
    }

    #[test]
    fn words_need_a_boundary_on_both_sides() {
        let code = "use vsh_host::WritableDir;\nlet a = NotWritableDir;\nlet b = WritableDirs;\nWritableDir::new(x)";
        assert_eq!(find_word(code, "WritableDir"), vec![0, 3]);
    }
}
