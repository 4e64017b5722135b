//! The names copies of files are given, so that a copy of a protected path
//! is protected like it ([`crate::CallPolicy`]): backup tools', editors',
//! package managers' and people's.
//!
//! Every function here works on `&str` by character boundaries only (a name
//! is any UTF-8: sec78 F1, a byte index inside `é` panicked), and allocates
//! only for a name that is a copy's.

/// The words a copy's name adds after its original's name (`secrets.bak`,
/// `.aws_old`, `id_rsa-backup2`, `secrets - Copy`, `config.dpkg-old`,
/// `.id_rsa.swp`), compared ignoring case.
const COPY_WORDS: [&str; 68] = [
    "bak",
    "backup",
    "old",
    "orig",
    "original",
    "save",
    "sav",
    "copy",
    "prev",
    "previous",
    "tmp",
    "new",
    "dist",
    "rpmsave",
    "rpmnew",
    "rpmorig",
    "dpkg",
    "ucf",
    "swp",
    "swo",
    "swn",
    "swx",
    "swa",
    "un",
    "autosave",
    "bkp",
    "bk",
    "back",
    "saved",
    "archive",
    "last",
    "keep",
    "disabled",
    // Sync tools and merges (sec79 F1): Dropbox, OneDrive, git mergetool.
    "conflict",
    "conflicted",
    "local",
    "remote",
    "base",
    "merged",
    "mine",
    "theirs",
    "desktop",
    "laptop",
    // Snapshots and archives of the original.
    "before",
    "pre",
    "snapshot",
    "stash",
    "trash",
    "deleted",
    "moved",
    "og",
    "gz",
    "tar",
    "tgz",
    "zip",
    "bz2",
    "xz",
    "7z",
    // Other languages' "copy" (Explorer, Finder, GNOME in their locales).
    "kopie",
    "copie",
    "copia",
    "kopia",
    "cópia",
    "копия",
    "コピー",
    "のコピー",
    "副本",
    "복사본",
];

/// Prefixes a copy's name puts before its original's (`Copy of secrets`),
/// compared ignoring case.
const COPY_PREFIXES: [&str; 10] = [
    "copy of ",
    "copy_of_",
    "copy-of-",
    "backup of ",
    "kopie von ",
    "copie de ",
    "copia de ",
    "copia di ",
    "cópia de ",
    "kopia ",
];

/// Words inside a parenthesis that make it a copy's mark, wherever in it
/// (`credentials (John's conflicted copy 2026-01-01).json`,
/// `.ssh (Case Conflict)`), compared ignoring case.
const PARENTHESIZED: [&str; 8] = ["copy", "conflict", "kopie", "copie", "copia", "backup", "副本", "コピー"];

/// Markers a sync tool puts between a copy's original name and the rest
/// (Syncthing's `.sync-conflict-DATE-TIME-DEVICE`, `OneDrive`'s `-DESKTOP-ID`).
const SYNC_MARKERS: [&str; 3] = [".sync-conflict-", "-DESKTOP-", "-LAPTOP-"];

/// Words a copy's name puts before its original's, then a separator
/// (`old-secrets`, `backup_id_rsa`, `old.ssh` of `.ssh`).
const PREFIX_WORDS: [&str; 8] = ["old", "backup", "bak", "bkp", "copy", "orig", "prev", "saved"];

/// A character that separates a copy's suffix from its original's name.
fn is_separator(c: char) -> bool {
    matches!(c, '.' | '_' | '-' | ' ' | '~' | '(' | ')' | '[' | ']' | '+' | '@' | ',')
}

/// Whether `text` equals `word`, ignoring case (any script's).
fn same_word(text: &str, word: &str) -> bool {
    text.eq_ignore_ascii_case(word) || (!word.is_ascii() && text.to_lowercase() == word.to_lowercase())
}

/// One convention's step back toward the original: `name` less one copy
/// prefix or suffix, or `None` when it has none.
fn step(name: &str) -> Option<&str> {
    // Emacs: an autosave `#name#`, a lock `.#name`.
    if name.len() > 2 && name.starts_with('#') && name.ends_with('#') {
        return name.get(1..name.len() - 1);
    }
    if let Some(rest) = name.strip_prefix(".#") {
        return Some(rest);
    }
    for prefix in COPY_PREFIXES {
        if name.len() > prefix.len() && name.get(..prefix.len()).is_some_and(|head| same_word(head, prefix)) {
            return name.get(prefix.len()..);
        }
    }
    // `Copy (2) of name`.
    if name.get(..6).is_some_and(|head| head.eq_ignore_ascii_case("copy ("))
        && let Some(close) = name.find(") of ")
        && name[6..close].bytes().all(|b| b.is_ascii_digit())
    {
        return name.get(close + 5..).filter(|rest| !rest.is_empty());
    }
    for marker in SYNC_MARKERS {
        if let Some(at) = name.find(marker).filter(|at| *at > 0) {
            return Some(&name[..at]);
        }
    }
    // A parenthesis that says it is a copy: ` (John's conflicted copy 2026-01-01)`.
    if name.ends_with(')')
        && let Some(open) = name.rfind('(').filter(|open| *open > 0)
        && PARENTHESIZED.iter().any(|word| name[open..].to_lowercase().contains(&word.to_lowercase()))
    {
        return Some(name[..open].trim_end_matches(is_separator)).filter(|stem| !stem.is_empty());
    }
    for word in PREFIX_WORDS {
        let Some(head) = name.get(..word.len()) else { continue };
        let Some(separator) = name[word.len()..].chars().next() else { continue };
        if head.eq_ignore_ascii_case(word) && matches!(separator, '.' | '_' | '-' | ' ') {
            // A dot is the original's own (`old.ssh` of `.ssh`).
            let from = if separator == '.' { word.len() } else { word.len() + 1 };
            return name.get(from..).filter(|rest| !rest.is_empty() && *rest != ".");
        }
    }
    if let Some(rest) = name.strip_suffix('~') {
        return Some(rest);
    }
    // Separators alone at the end (`.ssh.`, `secrets_`).
    let bare = name.trim_end_matches(['.', '_', '-', ' ']);
    if bare.len() < name.len() && !bare.is_empty() {
        return Some(bare);
    }
    // A number or a date after a separator: `.1`, `.~1~` (less its `~`),
    // `-2026-12-01`, ` (2)`, `.2026-01-01T10:00:00Z`.
    let without_number =
        name.trim_end_matches(|c: char| c.is_ascii_digit() || is_separator(c) || matches!(c, ':' | 'T' | 'Z'));
    let number = &name[without_number.len()..];
    if number.bytes().any(|b| b.is_ascii_digit()) && number.starts_with(is_separator) {
        return Some(without_number);
    }
    // A word after a separator, digits and separators after it: `.bak2`,
    // ` - Copy (2)`, `.dpkg-old`.
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit() || is_separator(c));
    COPY_WORDS.iter().find_map(|word| {
        let cut = trimmed.len().checked_sub(word.len())?;
        if !same_word(trimmed.get(cut..)?, word) {
            return None;
        }
        let stem = trimmed.get(..cut)?.strip_suffix(is_separator)?;
        Some(stem.trim_end_matches(is_separator))
    })
}

/// `name` less every copy prefix and suffix it has, or `None` when it has
/// none, or nothing would be left.
fn stripped(name: &str) -> Option<&str> {
    let mut at = name;
    while let Some(next) = step(at) {
        if next.is_empty() {
            return None;
        }
        if next.len() >= at.len() {
            break;
        }
        at = next;
    }
    (at.len() < name.len()).then_some(at)
}

/// Whether `name` is a Vim swap or undo file's (`.name.swp`, `.name.un~`).
fn is_swap(name: &str) -> bool {
    name.len() > 4
        && ["swp", "swo", "swn", "swx", "swa", "un~"]
            .iter()
            .any(|ext| name.get(name.len() - 3..).is_some_and(|end| end.eq_ignore_ascii_case(ext)))
}

/// The names `name` may be a copy of, by the conventions above: less its
/// copy prefixes and suffixes (`secrets.old` of `secrets`), a Vim swap file
/// of a name with or without its leading dot (`.id_rsa.swp` of `id_rsa` and
/// `.id_rsa`), a copy's suffix before an extension (`credentials copy.json`,
/// `credentials (1).json` of `credentials.json`). Empty when it is no copy's.
pub(crate) fn originals(name: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut add = |candidate: &str| {
        if !candidate.is_empty() && candidate != name && !found.iter().any(|known| known == candidate) {
            found.push(candidate.to_owned());
        }
    };
    if let Some(whole) = stripped(name) {
        add(whole);
        if is_swap(name)
            && let Some(undotted) = whole.strip_prefix('.')
        {
            add(undotted);
        }
    }
    if let Some((stem, extension)) = before_extension(name)
        && let Some(original) = stripped(stem)
    {
        add(&format!("{original}.{extension}"));
    }
    found
}

/// `name`'s stem and plain extension (1 to 10 ASCII letters and digits, no
/// copy word), where a copy's suffix may stand before it (`credentials
/// copy.json`); `None` for a name without one.
fn before_extension(name: &str) -> Option<(&str, &str)> {
    let dot = name.rfind('.').filter(|dot| *dot > 0)?;
    let (stem, extension) = (&name[..dot], &name[dot + 1..]);
    // A dot after a separator begins a dotfile's name (`Copy of .ssh`), no extension.
    let plain = (1..=10).contains(&extension.len())
        && extension.bytes().all(|b| b.is_ascii_alphanumeric())
        && !stem.ends_with([' ', '.', '_', '-'])
        && !COPY_WORDS.iter().any(|word| extension.eq_ignore_ascii_case(word));
    plain.then_some((stem, extension))
}

/// Whether `name` is a copy's ([`originals`] not empty), allocating nothing:
/// what every authorization asks of each name first.
pub(crate) fn is_copy(name: &str) -> bool {
    stripped(name).is_some() || before_extension(name).is_some_and(|(stem, _)| stripped(stem).is_some())
}

/// The paths `components` (a path's names) may be a copy of: each name that
/// is a copy's taken as each of its originals, or as itself, the path itself
/// left out; at most 16, joined by `/`. Empty when no name is a copy's.
pub(crate) fn original_paths(components: &[&str]) -> Vec<String> {
    const MOST: usize = 16;
    let options: Vec<Vec<String>> = components.iter().map(|name| originals(name)).collect();
    if options.iter().all(Vec::is_empty) {
        return Vec::new();
    }
    let mut paths: Vec<Vec<&str>> = vec![Vec::new()];
    for (name, originals) in components.iter().zip(&options) {
        let mut next = Vec::new();
        for path in &paths {
            for choice in originals.iter().map(String::as_str).chain(std::iter::once(*name)) {
                if next.len() < MOST * 2 {
                    let mut longer = path.clone();
                    longer.push(choice);
                    next.push(longer);
                }
            }
        }
        paths = next;
    }
    let itself = components.join("/");
    let mut joined: Vec<String> = paths.into_iter().map(|path| path.join("/")).filter(|path| *path != itself).collect();
    joined.truncate(MOST);
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_named_after_its_original_by_the_conventions_people_and_tools_use() {
        for (copy, expected) in [
            ("secrets.bak", &["secrets"][..]),
            (".aws.bak", &[".aws"]),
            (".ssh~", &[".ssh"]),
            (".gnupg_old", &[".gnupg"]),
            ("secrets-backup2", &["secrets"]),
            ("Secrets.BAK", &["Secrets"]),
            ("secrets copy 2", &["secrets"]),
            (".aws.1", &[".aws"]),
            (".aws-2026-12-01", &[".aws"]),
            (".aws.bak.old~", &[".aws"]),
            ("secrets.orig.", &["secrets"]),
            // sec78 F2: numbered backups, Windows, GNOME and macOS copies,
            // editor swap and autosave files, package managers, timestamps.
            (".ssh.~1~", &[".ssh"]),
            ("secrets - Copy", &["secrets"]),
            ("secrets - Copy (2)", &["secrets"]),
            ("Copy of .ssh", &[".ssh"]),
            (".ssh (copy)", &[".ssh"]),
            (".ssh (1)", &[".ssh"]),
            ("credentials (1).json", &["credentials.json"]),
            ("credentials copy.json", &["credentials.json"]),
            ("config copy.json", &["config.json"]),
            (".id_rsa.swp", &[".id_rsa", "id_rsa"]),
            (".prod.env.swp", &[".prod.env", "prod.env"]),
            ("#credentials.json#", &["credentials.json"]),
            (".#credentials.json", &["credentials.json"]),
            ("credentials.json.rpmsave", &["credentials.json"]),
            (".netrc.dpkg-old", &[".netrc"]),
            ("secrets.2026-01-01T10:00:00Z", &["secrets"]),
            // sec79 F1: other locales, sync tools, merges, undo files, more words.
            ("secrets - Kopie", &["secrets"]),
            ("secrets - Копия", &["secrets"]),
            ("secrets - 副本", &["secrets"]),
            ("credentials のコピー.json", &["credentials.json"]),
            ("Kopie von secrets", &["secrets"]),
            ("Copie de secrets", &["secrets"]),
            ("credentials (John's conflicted copy 2026-01-01).json", &["credentials.json"]),
            (".ssh (Case Conflict)", &[".ssh"]),
            ("credentials.sync-conflict-20260101-120000-ABCDEFG.json", &["credentials", "credentials.json"]),
            (".ssh.sync-conflict-20260101-120000-ABCDEFG", &[".ssh"]),
            (".credentials.json.un~", &[".credentials.json", "credentials.json"]),
            (".id_rsa.swx", &[".id_rsa", "id_rsa"]),
            ("credentials_LOCAL_1234.json", &["credentials.json"]),
            ("credentials-DESKTOP-ABC123.json", &["credentials", "credentials.json"]),
            ("Copy (2) of id_rsa", &["id_rsa"]),
            ("Backup of credentials.json", &["credentials.json"]),
            (".ssh.bak.gz", &[".ssh"]),
            (".ssh[1]", &[".ssh"]),
            (".ssh+bak", &[".ssh"]),
            ("secrets.zip", &["secrets"]),
            // Names that are no copy's.
            (".bak", &[]),
            ("~", &[]),
            ("#", &[]),
            (".aws-sam", &[]),
            ("secrets", &[]),
            ("python3.11", &[]),
            ("bakery", &[]),
            ("notes.txt", &[]),
            ("file-", &["file"]),
            (".ssh.", &[".ssh"]),
            (".ssh..bak", &[".ssh"]),
            (".ssh.bkp", &[".ssh"]),
            (".ssh.disabled", &[".ssh"]),
            ("old.ssh", &[".ssh"]),
            ("old-secrets", &["secrets"]),
            ("backup_id_rsa", &["id_rsa"]),
            ("credentials.bak.json", &["credentials.json"]),
            ("credentials_old.json", &["credentials.json"]),
            ("credentials-2026.json", &["credentials.json"]),
            ("secrets.bak (2)", &["secrets"]),
            ("oldies", &[]),
            ("backups", &[]),
            ("api.key.md", &[]),
            // Any UTF-8, never cut inside a character (sec78 F1).
            ("café.txt", &[]),
            ("résumé.md", &[]),
            ("数据.csv", &[]),
            ("é", &[]),
            ("秘密.bak", &["秘密"]),
            ("naïve copy.txt", &["naïve.txt"]),
        ] {
            assert_eq!(originals(copy), expected.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>(), "{copy}");
            assert_eq!(is_copy(copy), !expected.is_empty(), "{copy}");
        }
    }

    #[test]
    fn a_path_may_be_a_copy_at_any_of_its_names() {
        assert_eq!(original_paths(&["src", "main.rs"]), Vec::<String>::new());
        assert_eq!(original_paths(&[".aws.bak", "credentials"]), vec![".aws/credentials".to_owned()]);
        assert_eq!(
            original_paths(&["secrets.old", "db.bak"]),
            ["secrets/db", "secrets/db.bak", "secrets.old/db"].map(str::to_owned).to_vec()
        );
        // Bounded, however many names are copies.
        let many = vec![".ssh.swp"; 12];
        assert!(original_paths(&many).len() <= 16);
    }

    proptest::proptest! {
        /// No name makes it panic, and every original is shorter than the copy.
        #[test]
        fn any_name_is_judged_without_a_panic(name in "\\PC{0,24}") {
            for original in originals(&name) {
                proptest::prop_assert!(original.len() < name.len(), "{} of {}", original, name);
            }
        }
    }
}
