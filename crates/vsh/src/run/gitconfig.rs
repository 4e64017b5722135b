//! Git's configuration file syntax, read as git reads it, to tell whether a
//! file would make git start a program ([`starts_programs`]).
//!
//! The reader follows git's own parser (`config.c`): a byte stream, not
//! lines; an optional byte-order mark; `#` and `;` comments; headers
//! `[section]`, `[section.sub]` and `[section "sub"]` (with `\"` and `\\`
//! escapes, a `]` inside the quotes being part of the name), each possibly
//! followed on the same line by another header or a key; `key = value` or a
//! bare `key`; values with quotes, escapes, comments outside quotes, and a
//! backslash before a newline joining the next line. A file git would
//! refuse (a bad line) holds no configuration git obeys: git stops with an
//! error, also when it includes the file.

/// One setting: its section (lower case), subsection (as written; lower
/// case for the dotted form), key (lower case) and value (`None` for a bare
/// key).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Setting {
    pub(crate) section: String,
    pub(crate) subsection: Option<String>,
    pub(crate) key: String,
    pub(crate) value: Option<String>,
}

/// The settings `bytes` holds, or `None` when git would refuse the file.
pub(crate) fn parse(bytes: &[u8]) -> Option<Vec<Setting>> {
    let mut reader = Reader { bytes: bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes), at: 0 };
    let mut settings = Vec::new();
    let mut base: Option<(String, Option<String>)> = None;
    let mut comment = false;
    loop {
        let Some(c) = reader.next() else { return Some(settings) };
        if c == b'\n' {
            comment = false;
            continue;
        }
        if comment || c.is_ascii_whitespace() {
            continue;
        }
        if c == b'#' || c == b';' {
            comment = true;
            continue;
        }
        if c == b'[' {
            base = Some(reader.header()?);
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return None;
        }
        let (section, subsection) = base.clone()?;
        let (key, value) = reader.setting(c)?;
        settings.push(Setting { section, subsection, key, value });
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// The next byte, a carriage return before a newline dropped.
    fn next(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.at)?;
        self.at += 1;
        if c == b'\r' && self.bytes.get(self.at) == Some(&b'\n') {
            self.at += 1;
            return Some(b'\n');
        }
        Some(c)
    }

    /// A header after its `[`: the section and subsection.
    fn header(&mut self) -> Option<(String, Option<String>)> {
        let mut name = String::new();
        loop {
            let c = self.next()?;
            if c == b']' {
                return Some(match name.split_once('.') {
                    Some((section, sub)) => (section.to_owned(), Some(sub.to_owned())),
                    None => (name, None),
                });
            }
            if c.is_ascii_whitespace() {
                return self.quoted_subsection(name);
            }
            if !(c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
                return None;
            }
            name.push(char::from(c.to_ascii_lowercase()));
        }
    }

    /// `[section "sub"]` after the section's name and a space.
    fn quoted_subsection(&mut self, section: String) -> Option<(String, Option<String>)> {
        let mut c = self.next()?;
        while c.is_ascii_whitespace() && c != b'\n' {
            c = self.next()?;
        }
        if c != b'"' {
            return None;
        }
        let mut sub = Vec::new();
        loop {
            let mut c = self.next()?;
            match c {
                b'\n' => return None,
                b'"' => break,
                b'\\' => {
                    c = self.next()?;
                    if c == b'\n' {
                        return None;
                    }
                }
                _ => {}
            }
            sub.push(c);
        }
        (self.next()? == b']').then(|| (section, Some(String::from_utf8_lossy(&sub).into_owned())))
    }

    /// A key from its first letter `first`, and its value.
    fn setting(&mut self, first: u8) -> Option<(String, Option<String>)> {
        let mut key = String::from(char::from(first.to_ascii_lowercase()));
        let mut c = loop {
            match self.next() {
                Some(c) if c.is_ascii_alphanumeric() || c == b'-' => key.push(char::from(c.to_ascii_lowercase())),
                Some(c) => break c,
                None => return Some((key, None)),
            }
        };
        while c == b' ' || c == b'\t' {
            match self.next() {
                Some(next) => c = next,
                None => return Some((key, None)),
            }
        }
        if c == b'\n' {
            return Some((key, None));
        }
        if c != b'=' {
            return None;
        }
        Some((key, Some(self.value()?)))
    }

    /// A value after its `=`, to the end of its (joined) line.
    fn value(&mut self) -> Option<String> {
        let mut value = Vec::new();
        let (mut quote, mut comment, mut spaces) = (false, false, 0_usize);
        loop {
            let Some(c) = self.next() else {
                return (!quote).then(|| String::from_utf8_lossy(&value).into_owned());
            };
            if c == b'\n' {
                return (!quote).then(|| String::from_utf8_lossy(&value).into_owned());
            }
            if comment {
                continue;
            }
            if c.is_ascii_whitespace() && !quote {
                if !value.is_empty() {
                    spaces += 1;
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            value.extend(std::iter::repeat_n(b' ', std::mem::take(&mut spaces)));
            match c {
                // git reads the end of the file as a newline: a backslash
                // there continues the value onto nothing (`get_next_char`).
                b'\\' => match self.next() {
                    None | Some(b'\n') => {}
                    Some(b't') => value.push(b'\t'),
                    Some(b'b') => value.push(0x08),
                    Some(b'n') => value.push(b'\n'),
                    Some(escaped @ (b'\\' | b'"')) => value.push(escaped),
                    Some(_) => return None,
                },
                b'"' => quote = !quote,
                other => value.push(other),
            }
        }
    }
}

/// The keys of a git configuration that make git run a program, write
/// where they say, or read more configuration, as `section.key` in lower
/// case (a subsection between them does not matter). See git's
/// `Documentation/config/*.txt`; [`starts_programs`] judges more.
const PROGRAM_KEYS: [&str; 53] = [
    "core.pager",
    "core.editor",
    "core.fsmonitor",
    "core.sshcommand",
    "core.hookspath",
    "core.askpass",
    "core.gitproxy",
    "core.alternaterefscommand",
    "core.worktree",
    "include.path",
    "includeif.path",
    "filter.clean",
    "filter.smudge",
    "filter.process",
    "diff.textconv",
    "diff.command",
    "diff.external",
    "merge.driver",
    "credential.helper",
    "gpg.program",
    "gpg.defaultkeycommand",
    "sequence.editor",
    "difftool.cmd",
    "difftool.path",
    "mergetool.cmd",
    "mergetool.path",
    "uploadpack.packobjectshook",
    "remote.uploadpack",
    "remote.receivepack",
    "remote.vcs",
    "trailer.command",
    "trailer.cmd",
    "browser.cmd",
    "browser.path",
    "man.cmd",
    "man.path",
    "tar.command",
    "guitool.cmd",
    "hook.command",
    "trace2.eventtarget",
    "trace2.normaltarget",
    "trace2.perftarget",
    "init.templatedir",
    "interactive.difffilter",
    "sendemail.sendmailcmd",
    "sendemail.smtpserver",
    "sendemail.tocmd",
    "sendemail.cccmd",
    "sendemail.headercmd",
    "imap.tunnel",
    "instaweb.httpd",
    "http.cookiefile",
    "ssh.variant",
];

/// Whether `bytes`, read as git reads a configuration, makes git start a
/// program, write where it says or read more configuration: a key of
/// [`PROGRAM_KEYS`], any key of a `pager` section, an alias or a
/// submodule's `update` that starts with `!`, a URL rewrite or a remote's
/// or submodule's URL through the `ext::` or `fd::` transports (which run
/// programs), or a `protocol.allow` of `always`. A file git would refuse
/// starts nothing.
pub(crate) fn starts_programs(bytes: &[u8]) -> bool {
    let Some(settings) = parse(bytes) else { return false };
    settings.iter().any(|setting| {
        let value = setting.value.as_deref().unwrap_or("").trim_start();
        let runs_a_transport = |text: &str| {
            let text = text.trim_start().to_ascii_lowercase();
            text.starts_with("ext::") || text.starts_with("fd::")
        };
        let (section, key) = (setting.section.as_str(), setting.key.as_str());
        PROGRAM_KEYS.contains(&format!("{section}.{key}").as_str())
            || section == "pager"
            || ((section == "alias" || (section == "submodule" && key == "update")) && value.starts_with('!'))
            || (section == "url"
                && (key == "insteadof" || key == "pushinsteadof")
                && setting.subsection.as_deref().is_some_and(runs_a_transport))
            || (matches!((section, key), ("remote", "url" | "pushurl") | ("submodule", "url"))
                && runs_a_transport(value))
            || (section == "protocol" && key == "allow" && value.eq_ignore_ascii_case("always"))
    })
}

#[cfg(test)]
mod tests {
    use super::{Setting, parse, starts_programs};

    fn setting(section: &str, subsection: Option<&str>, key: &str, value: Option<&str>) -> Setting {
        Setting {
            section: section.to_owned(),
            subsection: subsection.map(str::to_owned),
            key: key.to_owned(),
            value: value.map(str::to_owned),
        }
    }

    #[test]
    fn settings_are_read_as_git_reads_them() {
        let text = "\u{feff}# a comment\n[Core]\n\tPager = less -R ; a comment\n[x \"]\"] [core] editor=\"vi\"\n\
                    [alias]\n\tst = \\\n!echo joined\r\n[remote.Origin]\n\tprune\n";
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            [
                setting("core", None, "pager", Some("less -R")),
                setting("core", None, "editor", Some("vi")),
                setting("alias", None, "st", Some("!echo joined")),
                setting("remote", Some("origin"), "prune", None),
            ]
        );
        // A quoted subsection's escapes: \" and \\ are the characters themselves.
        assert_eq!(
            parse(b"[remote \"o\\\"x\\\\\"]\n\turl = y\n").unwrap(),
            [setting("remote", Some("o\"x\\"), "url", Some("y"))]
        );
        // The end of the file is a newline to git, after a backslash too.
        assert_eq!(parse(b"[core]\n\tpager = less \\").unwrap(), [setting("core", None, "pager", Some("less "))]);
        // What git refuses: a stray line, a key before any section, an open quote.
        for bad in ["# Setup\n```ini\n[core]\n", "pager = less\n", "[core]\n\tpager = \"less\n", "[co re]\n"] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn what_starts_programs_is_told_from_what_does_not() {
        let starting = [
            "[core]\n\tpager = echo PWNED; cat\n",
            "[x \"]\"] [core]\n\tfsmonitor = evil\n",
            "[core]\n\tcomment = x\\\n[user]\n\tfsmonitor = evil\n",
            "[alias]\n\tst = \\\n!echo PWNED\n",
            "[protocol]\n\tallow = always\n[url \"ext::sh -c evil\"]\n\tinsteadOf = https://\n",
            "[remote \"origin\"]\n\turl = ext::sh -c evil\n",
            "[interactive]\n\tdiffFilter = evil\n",
            "[gpg \"ssh\"]\n\tdefaultKeyCommand = evil\n",
            "[submodule \"m\"]\n\tupdate = !evil\n",
            "[include]\n\tpath = ../settings.ini\n",
            "[pager]\n\tlog = evil\n",
            // A backslash at the very end continues onto the end of the
            // file, which git reads as a newline: the key is set.
            "[core]\n\tfsmonitor = touch /tmp/x \\",
            "[alias]\n\tst = !cmd \\",
            "[include]\n\tpath = other.cfg\\",
        ];
        for text in starting {
            assert!(starts_programs(text.as_bytes()), "{text:?}");
        }
        let ordinary = [
            "[alias]\nb = \"build\"\n[http]\nproxy = \"x\"\n[core]\nthreads = 4\n",
            "[metadata]\nname = x\n[options]\npackages = find:\n",
            "# Setup\n\n```ini\n[core]\n    pager = delta\n```\n",
            "config = {'core': '[core]\\n pager = x'}\n",
            "[url \"git@github.com:\"]\n\tinsteadOf = https://github.com/\n",
            "[user]\n\tname = x\n",
        ];
        for text in ordinary {
            assert!(!starts_programs(text.as_bytes()), "{text:?}");
        }
    }
}
