//! The outcome of evaluating a transaction: [`Decision`], with the metrics,
//! risk flags and deny reasons that explain it.
//!
//! # Content rewrites
//!
//! [`RiskFlag::ContentRewrite`] catches a program that silently empties or cuts
//! down existing files. A diff entry is a content rewrite ([`is_content_rewrite`])
//! when it is a Modify of a file that stays a file, the file had at least one
//! byte, and either it is now empty, or its new size is below `1 - r` of the old
//! one, where `r` is `rewrite_escalate_ratio_bps / 10000` (0.5 in Balanced, 0.25
//! in Strict, 0.1 in Paranoid):
//!
//! ```text
//! after.size == 0  ||  after.size * 10000 < before.size * (10000 - rewrite_escalate_ratio_bps)
//! ```
//!
//! That is the rule on sizes alone. Where the caller measured the bytes
//! ([`PolicyInput::losses`](crate::PolicyInput::losses), a [`ContentLoss`]
//! per modified file: the runtime always does), the rule is on what was lost
//! instead, and over the file's unreviewed history: the bytes of its content
//! as a reviewer last saw it that this diff and the unreviewed commits since
//! removed ([`content_lost`]: lines, as a multiset, so a moved line is kept and
//! a line replaced is lost, whatever the sizes), against its size then:
//!
//! ```text
//! reviewed_size > 0  &&  (after.size == 0  ||  (earlier_lost + lost) * 10000 > r_bps * reviewed_size)
//! ```
//!
//! Where the caller still holds the reviewed content's bytes, the loss is
//! measured against them directly ([`ContentLoss::since_reviewed`]) and
//! replaces `earlier_lost + lost`: what an unreviewed commit added and a
//! later one removed again was never the reviewer's (a helper written,
//! then rewritten, over a refactoring session).
//!
//! With no earlier loss this is the size rule for a file cut down (a cut
//! loses at least what it removes), and it also catches a file rewritten at
//! its size; with earlier loss it catches the same cut made in steps, each
//! auto-approved alone (sec59 F1: 99% of a tree emptied in seven commits).
//! A growing file still counts toward the byte ceilings.

use std::fmt;

use serde::{Deserialize, Serialize};
use vsh_types::canon::{self, Canonical};
use vsh_types::{DiffEntry, DiffKind, NodeKind, NodeState, PolicyDigest, VPath};

use crate::access::{AccessKind, AccessSet};
use crate::profile::{MAX_RATIO_BPS, PolicyThresholds};
use crate::rules::{DeniedAccess, RuleLabel};

/// The most denials a [`DenyManifest`] lists; `denied_total` counts them all.
pub const MAX_LISTED_DENIALS: usize = 64;

/// The permission bits that make a file executable.
const EXECUTE_BITS: u32 = 0o111;

/// Measurements of a diff, reported with every decision.
///
/// `touched = created + modified + deleted + mode_changes`: every diff entry is
/// exactly one of those kinds. `rewritten` counts the modified entries that are
/// content rewrites (see the [module documentation](self#content-rewrites)).
///
/// Canonical encoding: every field in declaration order, `u64` except
/// `delete_ratio_bps` (`u32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct RiskMetrics {
    /// Diff entries (changed paths, a deleted subtree counting every path in it).
    pub touched: u64,
    /// Created paths.
    pub created: u64,
    /// Paths whose content or kind changed (but a file replaced by what is
    /// not one, counted as deleted).
    pub modified: u64,
    /// Deleted paths, and files replaced by a directory or a symlink (their
    /// bytes are gone as surely).
    pub deleted: u64,
    /// Renames the program performed (from the effect ledger).
    pub renamed: u64,
    /// Sum of the before and after sizes of every entry but mode-only changes.
    pub changed_bytes: u64,
    /// Deleted paths per 10,000 observed base nodes, at most 10,000; 0 when no
    /// base node was observed. A file deleted whose very bytes the diff
    /// creates elsewhere (moved) is no loss, and is left out.
    pub delete_ratio_bps: u32,
    /// Files whose execute bits changed, or created with an execute bit set.
    pub executable_changes: u64,
    /// Entries with a symlink before or after.
    pub symlink_changes: u64,
    /// Entries whose only change is the permission bits.
    pub mode_changes: u64,
    /// Existing files emptied, or that lost more than the rewrite ratio of
    /// the content a reviewer last saw (see [`is_lossy_rewrite`]; without a
    /// measure, shrunk beyond it).
    pub rewritten: u64,
}

/// What a modified file lost of its content, as the caller measured it
/// from the bytes (see the [module documentation](self#content-rewrites)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentLoss {
    /// The file.
    pub path: VPath,
    /// Bytes of its content before the diff that its content after does not
    /// keep ([`content_lost`]).
    pub lost: u64,
    /// Bytes that unreviewed (auto-approved) commits removed from it since
    /// a reviewer last saw it; 0 when none changed it since.
    pub earlier_lost: u64,
    /// Its size when a reviewer last saw it: its size before the diff when
    /// no unreviewed commit changed it since.
    pub reviewed_size: u64,
    /// Bytes of the content a reviewer last saw that the content after the
    /// diff does not keep, measured against that content's own bytes where
    /// the caller still has them ([`content_lost`]); `None` where it does
    /// not. When known it is the loss judged, instead of `earlier_lost +
    /// lost`: what unreviewed commits added and a later one removed again
    /// was never the reviewer's, and is no loss (ux59 5e).
    pub since_reviewed: Option<u64>,
    /// Whether the diff puts back exactly the content a reviewer last saw
    /// (a dependency tried and dropped): no rewrite, whatever the sizes.
    pub restores_reviewed: bool,
}

/// The bytes of `before` that `after` does not keep, at two grains. First
/// lines (a newline ends one; the last may have none), as a multiset: each
/// line of `before` is kept as often as an identical line is in `after`,
/// wherever it is, so a moved line is kept. Then, between the lines left on
/// each side, words (a run of letters, digits, `_` and non-ASCII bytes) the
/// same way: the changed lines lose the words no changed line keeps, and
/// their spacing and punctuation in proportion (spacing and punctuation,
/// which every program shares, keep nothing by themselves; lines of
/// nothing else are measured by them). A line edited in place (`1.0.0` to
/// `1.0.1`) loses the word it changed and its share, not the line; a line
/// broken over several (a formatter) loses nothing. A file cut by half
/// loses what was cut; one rewritten at its size with other words loses
/// them. Linear in the two sizes. What it cannot see is a rewrite that
/// keeps the words and changes only their order.
pub fn content_lost(before: &[u8], after: &[u8]) -> u64 {
    let (lost_lines, new_lines) = unmatched(lines_of(before), lines_of(after));
    // A name changed throughout (`customer` to `client`) loses the name,
    // not every line it is on (ux63 3).
    if let Some(renamed) = renamed_bytes(before, &lost_lines, &new_lines) {
        return renamed;
    }
    words_lost(lost_lines, new_lines)
}

/// [`content_lost`] without the allowance for names renamed throughout:
/// for one step of several whose total is not measured against the content
/// they started from, where renames made in steps could rename every name
/// eight at a time (sec68 F2).
pub fn content_lost_in_step(before: &[u8], after: &[u8]) -> u64 {
    let (lost_lines, new_lines) = unmatched(lines_of(before), lines_of(after));
    words_lost(lost_lines, new_lines)
}

/// What the changed lines `lost_lines` lose, becoming `new_lines` (see
/// [`content_lost`]).
fn words_lost(lost_lines: Vec<&[u8]>, new_lines: Vec<&[u8]>) -> u64 {
    let changed: u64 = lost_lines.iter().map(|line| line.len() as u64).sum();
    let (old_tokens, new_tokens) = (tokens_in(lost_lines), tokens_in(new_lines));
    let bytes = |tokens: &[&[u8]]| tokens.iter().map(|token| token.len() as u64).sum::<u64>();
    let old_words: Vec<&[u8]> = old_tokens.iter().copied().filter(|token| is_word(token)).collect();
    let new_words: Vec<&[u8]> = new_tokens.iter().copied().filter(|token| is_word(token)).collect();
    let words = bytes(&old_words);
    if words == 0 {
        // Only spacing and punctuation changed: measured by those alone.
        return bytes(&unmatched(old_tokens, new_tokens).0);
    }
    // The changed lines lose their words that no changed line keeps, and
    // the spacing and punctuation between them in proportion: spacing and
    // punctuation alone keep nothing (ux62 2: a module replaced by
    // unrelated code kept most of its bytes as the spaces, parentheses and
    // colons every program has).
    let lost_words = bytes(&unmatched(old_words, new_words).0);
    u64::try_from(u128::from(changed) * u128::from(lost_words) / u128::from(words)).unwrap_or(u64::MAX)
}

/// The longest part of an identifier taken for a name.
const MAX_NAME_BYTES: usize = 64;

/// The most names one change may rename and be judged a renaming.
const MAX_RENAMED_NAMES: usize = 8;

/// When the changed lines of `before` (`lost`) become the new ones
/// (`new`), line for line, by nothing but a few names changed throughout
/// (parts of identifiers: `add_customer` to `add_client`, `getCustomer` to
/// `getClient`), each always into the same new name, no two into one, and
/// none into a name `before` already has: the bytes of those names, once
/// each. Such a change can be undone by naming them back, so it loses the
/// names, not the lines they are on. `None` for anything else.
fn renamed_bytes(before: &[u8], lost: &[&[u8]], new: &[&[u8]]) -> Option<u64> {
    // By parts of identifiers (`customer` in `add_customer`), else by whole
    // words (ux64 F1: `balance_cents` to `balance` drops a part).
    renamed_by(name_parts, before, lost, new).or_else(|| renamed_by(tokens_of, before, lost, new))
}

/// [`renamed_bytes`] with names cut from lines by `cut`.
fn renamed_by<'a>(
    cut: fn(&'a [u8]) -> Vec<&'a [u8]>,
    before: &'a [u8],
    lost: &[&'a [u8]],
    new: &[&'a [u8]],
) -> Option<u64> {
    if lost.is_empty() || lost.len() != new.len() {
        return None;
    }
    let mut renames: std::collections::HashMap<&[u8], &[u8]> = std::collections::HashMap::new();
    for (old_line, new_line) in lost.iter().zip(new) {
        let (old_parts, new_parts) = (cut(old_line), cut(new_line));
        if old_parts.len() != new_parts.len() {
            return None;
        }
        for (old, new) in old_parts.into_iter().zip(new_parts) {
            if old == new {
                continue;
            }
            // A name is a word, and short: a long run (a minified line, a
            // base64 blob) is no name, and is measured by its chunks.
            // Nor is a number: digits are values (prices, ids), and a value
            // changed throughout is no renaming (sec68 F1).
            let name = |part: &[u8]| {
                is_word(part) && part.len() <= MAX_NAME_BYTES && !part.first().is_some_and(u8::is_ascii_digit)
            };
            if !name(old) || !name(new) || *renames.entry(old).or_insert(new) != new {
                return None;
            }
        }
    }
    let targets: std::collections::HashSet<&[u8]> = renames.values().copied().collect();
    if renames.is_empty() || renames.len() > MAX_RENAMED_NAMES || targets.len() != renames.len() {
        return None;
    }
    let existing: std::collections::HashSet<&[u8]> = lines_of(before).into_iter().flat_map(cut).collect();
    if targets.iter().any(|target| existing.contains(target)) {
        return None;
    }
    Some(renames.keys().map(|name| name.len() as u64).sum())
}

/// `line`'s tokens ([`tokens_of`]) with each word cut into the parts of an
/// identifier: at `_`, where lower case turns upper (`getCustomer`), and
/// where letters and digits meet.
fn name_parts(line: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    for token in tokens_of(line) {
        if !is_word(token) {
            parts.push(token);
            continue;
        }
        let mut start = 0;
        for at in 1..=token.len() {
            let ends = at == token.len() || {
                let (previous, next) = (token[at - 1], token[at]);
                previous == b'_'
                    || next == b'_'
                    || (previous.is_ascii_lowercase() && next.is_ascii_uppercase())
                    || (previous.is_ascii_digit() != next.is_ascii_digit()
                        && previous.is_ascii_alphanumeric()
                        && next.is_ascii_alphanumeric())
            };
            if ends {
                parts.push(&token[start..at]);
                start = at;
            }
        }
    }
    parts
}

/// Whether `token` is a word's (or a long word's chunk): its first byte a
/// letter, a digit, `_` or non-ASCII.
fn is_word(token: &[u8]) -> bool {
    token.first().is_some_and(|byte| byte.is_ascii_alphanumeric() || *byte == b'_' || *byte >= 0x80)
}

fn lines_of(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|byte| *byte == b'\n').collect()
}

fn tokens_in(parts: Vec<&[u8]>) -> Vec<&[u8]> {
    parts.into_iter().flat_map(tokens_of).flat_map(chunks_of).collect()
}

/// A token longer than 64 bytes (a minified line's word, a base64 blob, a
/// binary file's run) cut where its content says: after a byte where a
/// rolling hash of the bytes before it has its low six bits clear (every 64
/// bytes on average), and at most every 256. A byte changed or put in
/// changes the chunks around it, not the token's: a one-byte edit to a
/// megabyte word loses a chunk or two, not the megabyte.
fn chunks_of(token: &[u8]) -> Vec<&[u8]> {
    const SHORT: usize = 64;
    const LONGEST: usize = 256;
    if token.len() <= SHORT {
        return vec![token];
    }
    let mut chunks = Vec::with_capacity(token.len() / SHORT + 1);
    let (mut start, mut hash) = (0, 0_u64);
    for (at, byte) in token.iter().enumerate() {
        hash = (hash << 1).wrapping_add(gear(*byte));
        if hash.trailing_zeros() >= 6 || at + 1 - start == LONGEST {
            chunks.push(&token[start..=at]);
            start = at + 1;
            hash = 0;
        }
    }
    if start < token.len() {
        chunks.push(&token[start..]);
    }
    chunks
}

/// A fixed pseudo-random 64-bit value per byte (`SplitMix64` of it), the
/// rolling hash's table.
fn gear(byte: u8) -> u64 {
    let mut value = u64::from(byte).wrapping_add(0x9e37_79b9_7f4a_7c15);
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// The parts of `before` no equal part of `after` keeps, and the parts of
/// `after` that keep none, each side in its order (parts as a multiset).
fn unmatched<'a>(before: Vec<&'a [u8]>, after: Vec<&'a [u8]>) -> (Vec<&'a [u8]>, Vec<&'a [u8]>) {
    let mut left: std::collections::HashMap<&[u8], u64> = std::collections::HashMap::new();
    for part in &after {
        *left.entry(part).or_default() += 1;
    }
    let mut lost = Vec::new();
    for part in before {
        match left.get_mut(part) {
            Some(count) if *count > 0 => *count -= 1,
            _ => lost.push(part),
        }
    }
    let mut fresh = Vec::new();
    for part in after {
        if let Some(count) = left.get_mut(part).filter(|count| **count > 0) {
            *count -= 1;
            fresh.push(part);
        }
    }
    (lost, fresh)
}

/// `line`'s tokens: runs of word bytes (letters, digits, `_`, non-ASCII),
/// runs of whitespace, and every other byte alone.
fn tokens_of(line: &[u8]) -> Vec<&[u8]> {
    #[derive(PartialEq, Clone, Copy)]
    enum Class {
        Word,
        Space,
        Other,
    }
    let class = |byte: u8| {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80 {
            Class::Word
        } else if byte.is_ascii_whitespace() {
            Class::Space
        } else {
            Class::Other
        }
    };
    let mut tokens = Vec::new();
    let mut start = 0;
    for at in 1..=line.len() {
        let ends = at == line.len() || {
            let (previous, next) = (class(line[at - 1]), class(line[at]));
            previous != next || previous == Class::Other
        };
        if ends {
            tokens.push(&line[start..at]);
            start = at;
        }
    }
    tokens
}

impl RiskMetrics {
    /// Measure `diff`, given the rename count and the number of observed base
    /// nodes (the delete ratio's denominator), counting content rewrites with
    /// the Balanced rewrite ratio. [`RiskMetrics::measure_with_ratio`] takes the
    /// ratio of a policy.
    pub fn measure(diff: &[DiffEntry], renamed: u64, observed_base_nodes: u64) -> Self {
        let ratio = PolicyThresholds::default().rewrite_escalate_ratio_bps;
        Self::measure_with_ratio(diff, renamed, observed_base_nodes, ratio)
    }

    /// [`RiskMetrics::measure`] with content rewrites judged by
    /// `rewrite_escalate_ratio_bps` (see [`is_content_rewrite`]).
    pub fn measure_with_ratio(
        diff: &[DiffEntry],
        renamed: u64,
        observed_base_nodes: u64,
        rewrite_escalate_ratio_bps: u32,
    ) -> Self {
        Self::measure_with_losses(diff, renamed, observed_base_nodes, rewrite_escalate_ratio_bps, &[])
    }

    /// [`RiskMetrics::measure_with_ratio`], with the content rewrites of the
    /// modified files `losses` names (sorted by path) judged on what they
    /// lost ([`is_lossy_rewrite`]) rather than on their sizes.
    pub fn measure_with_losses(
        diff: &[DiffEntry],
        renamed: u64,
        observed_base_nodes: u64,
        rewrite_escalate_ratio_bps: u32,
        losses: &[ContentLoss],
    ) -> Self {
        Self::measure_judged(diff, renamed, observed_base_nodes, &|_| rewrite_escalate_ratio_bps, losses, &[])
    }

    /// [`RiskMetrics::measure_with_losses`], each modified file's rewrite
    /// judged by its own ratio (`ratio_of`: a review rule may lower it);
    /// the removals at `undone` (sorted: see
    /// [`crate::PolicyInput::undone_creations`]) are no deletions, and
    /// count toward neither `deleted` nor the delete ratio.
    pub fn measure_judged(
        diff: &[DiffEntry],
        renamed: u64,
        observed_base_nodes: u64,
        ratio_of: &dyn Fn(&VPath) -> u32,
        losses: &[ContentLoss],
        undone: &[VPath],
    ) -> Self {
        let is_undone = |entry: &DiffEntry| entry.kind == DiffKind::Delete && undone.binary_search(&entry.path).is_ok();
        let loss_of =
            |path: &VPath| losses.binary_search_by(|loss| loss.path.cmp(path)).ok().and_then(|index| losses.get(index));
        let mut metrics = Self { renamed, ..Self::default() };
        // A file deleted whose very bytes the diff creates elsewhere (a move,
        // a directory renamed) loses nothing: the delete ratio, which guards
        // against losing what the workspace held, leaves it out.
        // Each created file excuses one deleted file of its bytes, never
        // more: one copy kept of a hundred identical files loses ninety-nine
        // (sec57 F3).
        let mut created: std::collections::HashMap<vsh_types::BlobId, u64> = std::collections::HashMap::new();
        for content in diff.iter().filter(|entry| entry.kind == DiffKind::Create).filter_map(|entry| {
            entry.after.filter(|state| state.kind == NodeKind::File).and_then(|state| state.content)
        }) {
            *created.entry(content).or_default() += 1;
        }
        let mut moved = 0_u64;
        for entry in diff {
            if entry.kind == DiffKind::Delete
                && !is_undone(entry)
                && let Some(left) = entry
                    .before
                    .filter(|state| state.kind == NodeKind::File)
                    .and_then(|state| state.content)
                    .and_then(|content| created.get_mut(&content))
                && *left > 0
            {
                *left -= 1;
                moved += 1;
            }
            metrics.touched += 1;
            match entry.kind {
                DiffKind::Create => metrics.created += 1,
                // It undoes a creation: nothing the workspace held is lost.
                DiffKind::Delete if is_undone(entry) => {}
                DiffKind::Delete => metrics.deleted += 1,
                // A file replaced by a directory or a symlink is as lost as
                // one deleted, and counted so (sec58 1: replacing every file
                // with an empty directory was auto-approved).
                DiffKind::Modify if replaces_a_file(entry) => metrics.deleted += 1,
                DiffKind::Modify => metrics.modified += 1,
                DiffKind::MetadataChange => metrics.mode_changes += 1,
            }
            // Only a modified file can be rewritten: its ratio is asked for
            // no other entry.
            let rewritten = entry.kind == DiffKind::Modify
                && match loss_of(&entry.path) {
                    Some(loss) => is_lossy_rewrite(entry, loss, ratio_of(&entry.path)),
                    None => is_content_rewrite(entry, ratio_of(&entry.path)),
                };
            if rewritten {
                metrics.rewritten += 1;
            }
            if entry.kind != DiffKind::MetadataChange {
                let sizes = size_of(entry.before.as_ref()).saturating_add(size_of(entry.after.as_ref()));
                metrics.changed_bytes = metrics.changed_bytes.saturating_add(sizes);
            }
            if is_executable_change(entry) {
                metrics.executable_changes += 1;
            }
            let is_symlink = |state: Option<&NodeState>| state.is_some_and(|state| state.kind == NodeKind::Symlink);
            if is_symlink(entry.before.as_ref()) || is_symlink(entry.after.as_ref()) {
                metrics.symlink_changes += 1;
            }
        }
        if observed_base_nodes > 0 {
            let lost = metrics.deleted.saturating_sub(moved);
            let ratio = u128::from(lost) * u128::from(MAX_RATIO_BPS) / u128::from(observed_base_nodes);
            metrics.delete_ratio_bps = u32::try_from(ratio.min(u128::from(MAX_RATIO_BPS))).unwrap_or(MAX_RATIO_BPS);
        }
        metrics
    }
}

/// Whether `entry` rewrites an existing file's content beyond the ratio: a
/// Modify of a file that stays a file and had at least one byte, leaving it
/// empty or smaller than `1 - rewrite_escalate_ratio_bps / 10000` of its old
/// size (see the [module documentation](self#content-rewrites)). A ratio above
/// 10,000 counts as 10,000.
pub fn is_content_rewrite(entry: &DiffEntry, rewrite_escalate_ratio_bps: u32) -> bool {
    if entry.kind != DiffKind::Modify {
        return false;
    }
    let (Some(before), Some(after)) = (entry.before.as_ref(), entry.after.as_ref()) else {
        return false;
    };
    // A file replaced by what is not one is counted as deleted instead.
    if before.kind != NodeKind::File || after.kind != NodeKind::File || before.size == 0 {
        return false;
    }
    let kept = u128::from(MAX_RATIO_BPS - rewrite_escalate_ratio_bps.min(MAX_RATIO_BPS));
    after.size == 0 || u128::from(after.size) * u128::from(MAX_RATIO_BPS) < u128::from(before.size) * kept
}

/// Whether `entry`, a change to a file that `loss` measured, rewrites the
/// content a reviewer last saw beyond the ratio: a Modify of a file that
/// stays a file, whose reviewed size was not 0, leaving it empty or having
/// lost, with the unreviewed commits before it, more than
/// `rewrite_escalate_ratio_bps / 10000` of that size (see the [module
/// documentation](self#content-rewrites)).
pub fn is_lossy_rewrite(entry: &DiffEntry, loss: &ContentLoss, rewrite_escalate_ratio_bps: u32) -> bool {
    if entry.kind != DiffKind::Modify {
        return false;
    }
    let (Some(before), Some(after)) = (entry.before.as_ref(), entry.after.as_ref()) else {
        return false;
    };
    if before.kind != NodeKind::File || after.kind != NodeKind::File || loss.restores_reviewed {
        return false;
    }
    if is_content_rewrite(entry, rewrite_escalate_ratio_bps) {
        return true;
    }
    let total = match loss.since_reviewed {
        Some(since) => u128::from(since),
        None => u128::from(loss.earlier_lost) + u128::from(loss.lost),
    };
    let ratio = u128::from(rewrite_escalate_ratio_bps.min(MAX_RATIO_BPS));
    // A ratio of 1 asks for emptied files only: what a file lost never is.
    ratio < u128::from(MAX_RATIO_BPS)
        && loss.reviewed_size > 0
        && total > u128::from(UNCOUNTED_LOSS_BYTES)
        && total * u128::from(MAX_RATIO_BPS) > ratio * u128::from(loss.reviewed_size)
}

/// A loss of at most this many bytes (over a file's unreviewed history) is
/// no rewrite by what it lost, whatever the file's size: a small file's
/// value changed (`"old"` to `"new"`) is an edit. The rule on sizes still
/// holds for it: cut below the ratio, or emptied, it is one.
pub const UNCOUNTED_LOSS_BYTES: u64 = 64;

/// Whether `entry` replaces a file by what is not one (a directory, a
/// symlink): its bytes are gone as surely as a deleted file's.
pub fn replaces_a_file(entry: &DiffEntry) -> bool {
    entry.kind == DiffKind::Modify
        && entry.before.is_some_and(|state| state.kind == NodeKind::File)
        && entry.after.is_some_and(|state| state.kind != NodeKind::File)
}

fn size_of(state: Option<&NodeState>) -> u64 {
    state.map_or(0, |state| state.size)
}

/// A file whose execute bits differ from before, or that became a file with an
/// execute bit set (created, or replacing a directory or symlink). Directories'
/// search bits and symlinks' fixed mode are not executables.
fn is_executable_change(entry: &DiffEntry) -> bool {
    let Some(after) = entry.after.as_ref().filter(|after| after.kind == NodeKind::File) else {
        return false;
    };
    match entry.before.as_ref().filter(|before| before.kind == NodeKind::File) {
        Some(before) => (before.mode ^ after.mode) & EXECUTE_BITS != 0,
        None => after.mode & EXECUTE_BITS != 0,
    }
}

/// Whether `entry` changes what users may do with a path beyond what
/// [`RiskMetrics::mode_changes`] counts: a file or directory that stays one
/// with other permission bits and a changed content too (a mode-only change
/// is counted there), or one that becomes writable by every user (`o+w`: a
/// sticky directory too, where every local user may still add files). What
/// raises [`RiskFlag::PermissionChange`] with it.
pub fn changes_permissions(entry: &DiffEntry) -> bool {
    const OTHERS_WRITE: u32 = 0o002;
    let Some(after) = entry.after.as_ref().filter(|after| after.kind != NodeKind::Symlink) else {
        return false;
    };
    let before = entry.before.as_ref().filter(|before| before.kind == after.kind);
    let world_writable = |state: &NodeState| state.mode & OTHERS_WRITE != 0;
    let rebits = entry.kind == DiffKind::Modify && before.is_some_and(|before| before.mode != after.mode);
    rebits || (world_writable(after) && !before.is_some_and(world_writable))
}

impl Canonical for RiskMetrics {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.touched);
        canon::put_u64(out, self.created);
        canon::put_u64(out, self.modified);
        canon::put_u64(out, self.deleted);
        canon::put_u64(out, self.renamed);
        canon::put_u64(out, self.changed_bytes);
        canon::put_u32(out, self.delete_ratio_bps);
        canon::put_u64(out, self.executable_changes);
        canon::put_u64(out, self.symlink_changes);
        canon::put_u64(out, self.mode_changes);
        canon::put_u64(out, self.rewritten);
    }
}

/// Why a diff needs a reviewer. Manifests list flags sorted and without
/// duplicates, in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RiskFlag {
    /// The profile escalates every mutation (Strict, Paranoid).
    Mutation,
    /// The diff deletes a path.
    Deletion,
    /// The program renamed a path.
    Rename,
    /// A file's execute bits changed, or a file was created executable.
    ExecutableChange,
    /// A symlink was created, deleted or changed.
    SymlinkChange,
    /// The diff touches at least the escalation number of paths.
    LargeTouchedSet,
    /// The diff changes at least the escalation number of bytes.
    LargeByteChange,
    /// A path's permission bits changed (alone or with its content), or a
    /// file or directory was made writable by every user (`o+w`).
    PermissionChange,
    /// An existing file was emptied, or lost more than the rewrite ratio of
    /// the content a reviewer last saw, in this diff and the unreviewed
    /// commits since (without a measure of its bytes: shrunk by more than it)
    /// (see the [module documentation](self#content-rewrites)).
    ContentRewrite,
    /// The diff writes both a `HEAD` and a `config` file in one directory:
    /// a git repository's layout (a bare one, or one made outside `.git`,
    /// which the `.git` rule does not cover), whose `config` git obeys when
    /// it runs there (`core.pager`, `core.fsmonitor`: programs it starts).
    GitRepository,
    /// The diff makes a change a review rule of the policy names (`[[review]]`
    /// in a policy file: `tests/**` deleted or modified), whatever else it
    /// does (see [`crate::review`]).
    ReviewRule,
    /// The diff replaces a file the run never read whose content differs
    /// from what vsh last saw of it (read by earlier work, or left by a
    /// commit): it was changed since, outside vsh or by other work, and this
    /// run overwrote that change without seeing it (ux64 F3: an agent that
    /// writes a whole file from an earlier read drops the user's edit).
    UnseenChange,
}

impl RiskFlag {
    /// The canonical tag: `Mutation`=1 through `UnseenChange`=12.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Mutation => 1,
            Self::Deletion => 2,
            Self::Rename => 3,
            Self::ExecutableChange => 4,
            Self::SymlinkChange => 5,
            Self::LargeTouchedSet => 6,
            Self::LargeByteChange => 7,
            Self::PermissionChange => 8,
            Self::ContentRewrite => 9,
            Self::GitRepository => 10,
            Self::ReviewRule => 11,
            Self::UnseenChange => 12,
        }
    }

    /// A lower-case, hyphenated name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Mutation => "mutation",
            Self::Deletion => "deletion",
            Self::Rename => "rename",
            Self::ExecutableChange => "executable-change",
            Self::SymlinkChange => "symlink-change",
            Self::LargeTouchedSet => "large-touched-set",
            Self::LargeByteChange => "large-byte-change",
            Self::PermissionChange => "permission-change",
            Self::ContentRewrite => "content-rewrite",
            Self::GitRepository => "git-repository",
            Self::ReviewRule => "review-rule",
            Self::UnseenChange => "unseen-change",
        }
    }
}

impl fmt::Display for RiskFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a transaction was denied. A denial is final: no reviewer can approve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DenyReason {
    /// The program tried a protected access (even if it caught the error).
    ProtectedAccessAttempt,
    /// The diff changes a protected path.
    ProtectedMutation,
    /// The diff touches more paths than the denial threshold.
    TooManyTouchedPaths,
    /// The diff changes more bytes than the denial threshold.
    TooManyChangedBytes,
    /// The diff deletes more paths than the denial threshold.
    TooManyDeletions,
    /// The diff deletes too large a share of the observed base.
    DeleteRatio,
    /// The diff leaves a file with its setuid or setgid bit set. vsh never
    /// writes one, under any profile: the committed file belongs to the
    /// committer or to the owner of what it replaces, never to the confined
    /// program's user, so the program could otherwise make a program that
    /// runs as someone else.
    SetuidFile,
}

impl DenyReason {
    /// The canonical tag: `ProtectedAccessAttempt`=1 through `SetuidFile`=7.
    pub const fn tag(self) -> u8 {
        match self {
            Self::ProtectedAccessAttempt => 1,
            Self::ProtectedMutation => 2,
            Self::TooManyTouchedPaths => 3,
            Self::TooManyChangedBytes => 4,
            Self::TooManyDeletions => 5,
            Self::DeleteRatio => 6,
            Self::SetuidFile => 7,
        }
    }

    /// A lower-case, hyphenated name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ProtectedAccessAttempt => "protected-access-attempt",
            Self::ProtectedMutation => "protected-mutation",
            Self::TooManyTouchedPaths => "too-many-touched-paths",
            Self::TooManyChangedBytes => "too-many-changed-bytes",
            Self::TooManyDeletions => "too-many-deletions",
            Self::DeleteRatio => "delete-ratio",
            Self::SetuidFile => "setuid-file",
        }
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a reviewer sees for a transaction that needs approval.
///
/// Canonical encoding: metrics, a `u64` flag count and each flag's tag, the
/// policy digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RiskManifest {
    /// Measurements of the diff.
    pub metrics: RiskMetrics,
    /// Why it needs a reviewer (sorted, no duplicates, never empty).
    pub flags: Vec<RiskFlag>,
    /// The policy that decided.
    pub policy: PolicyDigest,
}

impl Canonical for RiskManifest {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        self.metrics.encode_canonical(out);
        canon::put_u64(out, self.flags.len() as u64);
        for flag in &self.flags {
            canon::put_u8(out, flag.tag());
        }
        self.policy.encode_canonical(out);
    }
}

/// One protected access or mutation in a [`DenyManifest`]: the path, the rule
/// that refused it and how the policy would have to change to allow it.
///
/// Canonical encoding: path, access tag `u8`, rule text as a byte string, label
/// tag `u8`, the rule's access bits as a `u32`, the remedy as a byte string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Denial {
    /// The path that was refused.
    pub path: VPath,
    /// The access that was refused.
    pub access: AccessKind,
    /// The text of the refusing rule's pattern; for [`RuleLabel::WritableRoots`],
    /// the allow-list.
    pub rule: String,
    /// Why that rule exists.
    pub label: RuleLabel,
    /// Every access that rule denies.
    pub rule_access: AccessSet,
    /// How the policy would have to change to allow the access, for example
    /// ``remove or narrow the `[[protect]]` rule `config/prod/**` ``.
    pub remedy: String,
}

impl Denial {
    /// The denial `denied`, explained by `remedy`.
    pub fn new(denied: &DeniedAccess, remedy: String) -> Self {
        Self {
            path: denied.path.clone(),
            access: denied.access,
            rule: denied.rule.clone(),
            label: denied.label,
            rule_access: denied.rule_access,
            remedy,
        }
    }

    /// The refused access without its explanation.
    pub fn denied_access(&self) -> DeniedAccess {
        DeniedAccess {
            path: self.path.clone(),
            access: self.access,
            rule: self.rule.clone(),
            label: self.label,
            rule_access: self.rule_access,
        }
    }
}

impl fmt::Display for Denial {
    /// `` modify of config/prod/a denied by rule `config/prod/**` (custom, denies
    /// modify+delete); to allow: remove or narrow ... ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} denied by rule `{}` ({}, denies {}); to allow: {}",
            self.access,
            crate::rules::subject(&self.path, self.label),
            self.rule,
            self.label,
            self.rule_access,
            self.remedy
        )
    }
}

impl Canonical for Denial {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        self.path.encode_canonical(out);
        canon::put_u8(out, self.access.tag());
        canon::put_bytes(out, self.rule.as_bytes());
        canon::put_u8(out, self.label.tag());
        canon::put_u32(out, u32::from(self.rule_access.bits()));
        canon::put_bytes(out, self.remedy.as_bytes());
    }
}

/// The ceiling a denied diff went through, and the setting that would have let
/// it pass (see [`DenyManifest::ceiling`]).
///
/// Values are counts of paths or bytes; for `thresholds.deny_delete_ratio`
/// they are basis points (5,000 is the fraction 0.5 of a policy file).
///
/// Canonical encoding: the threshold name as a byte string, then `limit`,
/// `value` and `allowing` as `u64`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CeilingBreach {
    /// The threshold as a policy file names it (`thresholds.deny_touched_paths`).
    pub threshold: String,
    /// Its value in the policy that decided.
    pub limit: u64,
    /// What the diff measured.
    pub value: u64,
    /// The least setting of the threshold that would have allowed the diff (on
    /// this ceiling; a later ceiling may still apply).
    pub allowing: u64,
}

impl Canonical for CeilingBreach {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_bytes(out, self.threshold.as_bytes());
        canon::put_u64(out, self.limit);
        canon::put_u64(out, self.value);
        canon::put_u64(out, self.allowing);
    }
}

/// Why a transaction was denied, with the evidence and what it would take for
/// the policy to allow it.
///
/// Canonical encoding: reason tag, the listed denials as a sequence, the total,
/// the ceiling (flag `u8`, then the breach), the remedy as a byte string,
/// metrics, policy digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DenyManifest {
    /// The first rule of the decision order that failed.
    pub reason: DenyReason,
    /// The first [`MAX_LISTED_DENIALS`] protected accesses or mutations, each
    /// with its rule and remedy (empty for the ceiling reasons).
    pub denied: Vec<Denial>,
    /// How many there were in all.
    pub denied_total: u64,
    /// For the ceiling reasons, which threshold was passed and the value that
    /// would have allowed the diff; `None` for protected accesses.
    pub ceiling: Option<CeilingBreach>,
    /// How the policy would have to change, in one line: the distinct remedies
    /// of the listed denials, or the threshold to raise.
    pub remedy: String,
    /// Measurements of the diff.
    pub metrics: RiskMetrics,
    /// The policy that decided.
    pub policy: PolicyDigest,
}

impl Canonical for DenyManifest {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u8(out, self.reason.tag());
        canon::put_seq(out, self.denied.iter());
        canon::put_u64(out, self.denied_total);
        canon::put_option(out, self.ceiling.as_ref());
        canon::put_bytes(out, self.remedy.as_bytes());
        self.metrics.encode_canonical(out);
        self.policy.encode_canonical(out);
    }
}

/// The policy's verdict on a transaction.
///
/// Canonical encoding: tag `1` and the deny manifest, tag `2`, or tag `3` and
/// the risk manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Decision {
    /// Refused; final.
    Denied(DenyManifest),
    /// Small and non-destructive: may be committed without a reviewer.
    AutoApproved,
    /// Needs a reviewer's approval.
    PendingApproval(RiskManifest),
}

impl Decision {
    /// `denied`, `auto-approved` or `pending-approval`.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Denied(_) => "denied",
            Self::AutoApproved => "auto-approved",
            Self::PendingApproval(_) => "pending-approval",
        }
    }

    /// Whether the transaction was denied.
    pub const fn is_denied(&self) -> bool {
        matches!(self, Self::Denied(_))
    }

    /// Whether the transaction may be committed without a reviewer.
    pub const fn is_auto_approved(&self) -> bool {
        matches!(self, Self::AutoApproved)
    }

    /// Whether the transaction waits for a reviewer.
    pub const fn is_pending_approval(&self) -> bool {
        matches!(self, Self::PendingApproval(_))
    }
}

impl Canonical for Decision {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        match self {
            Self::Denied(manifest) => {
                canon::put_u8(out, 1);
                manifest.encode_canonical(out);
            }
            Self::AutoApproved => canon::put_u8(out, 2),
            Self::PendingApproval(manifest) => {
                canon::put_u8(out, 3);
                manifest.encode_canonical(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use vsh_types::canon::Canonical;

    fn entry(path: &str, before: Option<NodeState>, after: Option<NodeState>) -> DiffEntry {
        DiffEntry::between(VPath::parse(path).unwrap(), before, after).unwrap()
    }

    #[test]
    fn measure_counts_each_kind_and_bytes() {
        let old = NodeState::file_with(b"hello", 0o644);
        let new = NodeState::file_with(b"hello world", 0o644);
        let diff = vec![
            entry("a", None, Some(new)),
            entry("b", Some(old), None),
            entry("c", Some(old), Some(new)),
            entry("d", Some(old), Some(NodeState::file_with(b"hello", 0o600))),
            entry("e", None, Some(NodeState::directory(0o755))),
        ];
        let metrics = RiskMetrics::measure(&diff, 2, 10);
        assert_eq!(
            metrics,
            RiskMetrics {
                touched: 5,
                created: 2,
                modified: 1,
                deleted: 1,
                renamed: 2,
                changed_bytes: 11 + 5 + (5 + 11),
                delete_ratio_bps: 1_000,
                executable_changes: 0,
                symlink_changes: 0,
                mode_changes: 1,
                rewritten: 0,
            }
        );
    }

    #[test]
    fn executable_and_symlink_changes() {
        let plain = NodeState::file_with(b"x", 0o644);
        let exec = NodeState::file_with(b"x", 0o755);
        let exec_other = NodeState::file_with(b"y", 0o711);
        let link = NodeState::symlink(b"target");
        let cases = [
            (entry("created-exec", None, Some(exec)), true),
            (entry("created-plain", None, Some(plain)), false),
            (entry("chmod-plus-x", Some(plain), Some(exec)), true),
            (entry("chmod-minus-x", Some(exec), Some(plain)), true),
            (entry("same-bits", Some(exec), Some(exec_other)), false),
            (entry("dir-created", None, Some(NodeState::directory(0o755))), false),
            (entry("dir-to-exec-file", Some(NodeState::directory(0o755)), Some(exec)), true),
            (entry("deleted-exec", Some(exec), None), false),
            (entry("link-created", None, Some(link)), false),
        ];
        for (diff_entry, expected) in cases {
            let metrics = RiskMetrics::measure(std::slice::from_ref(&diff_entry), 0, 0);
            assert_eq!(metrics.executable_changes, u64::from(expected), "{}", diff_entry.path);
        }
        let links =
            [entry("l1", None, Some(link)), entry("l2", Some(link), None), entry("l3", Some(plain), Some(link))];
        assert_eq!(RiskMetrics::measure(&links, 0, 0).symlink_changes, 3);
    }

    #[test]
    fn delete_ratio_is_capped_and_needs_a_base() {
        let file = NodeState::file_with(b"x", 0o644);
        let deletes: Vec<DiffEntry> = (0..4).map(|index| entry(&format!("f{index}"), Some(file), None)).collect();
        assert_eq!(RiskMetrics::measure(&deletes, 0, 0).delete_ratio_bps, 0);
        assert_eq!(RiskMetrics::measure(&deletes, 0, 8).delete_ratio_bps, 5_000);
        assert_eq!(RiskMetrics::measure(&deletes, 0, 3).delete_ratio_bps, 10_000);
        assert_eq!(RiskMetrics::measure(&deletes, 0, u64::MAX).delete_ratio_bps, 0);
    }

    /// ux56: a directory moved read as deleting most of what the run saw.
    /// A file deleted whose very bytes are created elsewhere loses nothing;
    /// other bytes, or no digest to tell (a file protected from reading),
    /// count as lost.
    #[test]
    fn a_file_moved_whole_is_no_loss_to_the_delete_ratio() {
        let (a, b, c) =
            (NodeState::file_with(b"a", 0o644), NodeState::file_with(b"b", 0o644), NodeState::file_with(b"c", 0o644));
        let unknown = NodeState { content: None, ..NodeState::file_with(b"d", 0o644) };
        let diff = [
            entry("old/a", Some(a), None),
            entry("new/a", None, Some(a)),
            entry("old/b", Some(b), None),
            entry("new/b", None, Some(NodeState::file_with(b"b edited", 0o644))),
            entry("old/c", Some(c), None),
            entry("old/d", Some(unknown), None),
            entry("new/d", None, Some(NodeState::file_with(b"d", 0o644))),
            // One copy kept of two identical files: one is lost (sec57 F3).
            entry("old/a2", Some(a), None),
        ];
        let metrics = RiskMetrics::measure(&diff, 1, 10);
        assert_eq!(metrics.deleted, 5, "every delete is still counted as one");
        assert_eq!(metrics.delete_ratio_bps, 4 * 10_000 / 10, "b, c, d and one of the a's are lost; one a moved");
    }

    /// Name, before, after, ratio in basis points, whether it is a rewrite.
    type RewriteCase = (&'static str, Option<NodeState>, Option<NodeState>, u32, bool);

    fn sized(size: u64) -> NodeState {
        // Distinct content per size, so equal sizes still differ in content.
        NodeState { size, ..NodeState::file_with(&size.to_le_bytes(), 0o644) }
    }

    #[test]
    fn content_lost_counts_the_lines_not_kept() {
        assert_eq!(content_lost(b"", b"anything\n"), 0);
        assert_eq!(content_lost(b"a\nb\n", b"a\nb\n"), 0);
        assert_eq!(content_lost(b"a\nb\n", b"b\na\n"), 0, "a moved line is kept");
        assert_eq!(content_lost(b"a\nb\nc\n", b"a\nc\n"), 2, "b's line is lost");
        assert_eq!(content_lost(b"aaaa\n", b"bbbb\n"), 4, "a word replaced at its size: lost");
        assert_eq!(content_lost(b"x\nx\nx\n", b"x\n"), 4, "a line kept once covers one copy");
        assert_eq!(content_lost(b"last", b"last\n"), 0, "its word is kept");
        assert_eq!(content_lost(b"one\ntwo", b""), 7);
        // A line edited in place loses the words it changed, and their share
        // of its spacing and punctuation (1 of its 10 word bytes of 16; `1`
        // is no new name, the line has one); an identifier's part renamed,
        // the part.
        assert_eq!(content_lost(b"version = 1.0.0\n", b"version = 1.0.1\n"), 1);
        assert_eq!(content_lost(b"x = old_name(a, b)\n", b"x = new_name(a, b)\n"), 3);
        assert_eq!(content_lost(b"x = old_name(a, b)\n", b"x = new_name(b, a)\n"), 13, "more than names");
        // Spacing and punctuation alone keep nothing: unrelated code, with the
        // same keywords' worth of nothing in common, loses its lines (ux62 2).
        assert_eq!(content_lost(b"def area(w, h):\n    return w * h\n", b"class Row:\n    pass\n"), 33);
        // A name changed throughout loses the name once, not its lines (ux63 3).
        let module = b"def add_customer(customer_id):\n    customers[customer_id] = Customer()\n    return getCustomer(customer_id)\n";
        let renamed =
            b"def add_client(client_id):\n    clients[client_id] = Client()\n    return getClient(client_id)\n";
        assert_eq!(content_lost(module, renamed), 25, "customer, customers and Customer, once each");
        // A part dropped or added throughout is a renaming of whole words (ux64 F1).
        let cents = b"balance_cents = 0\nreturn balance_cents\n";
        assert_eq!(content_lost(cents, b"balance = 0\nreturn balance\n"), 13, "balance_cents, once");
        // Not into a word the file has: two names would become one.
        assert!(content_lost(b"balance_cents = 0\nbalance = 1\n", b"balance = 0\nbalance = 1\n") > 13);
        // Not for numbers: values changed throughout are measured as words (sec68 F1).
        let prices = b"apple 9.99\npear 9.99\nplum 9.99\n";
        assert_eq!(
            content_lost(prices, b"apple 7.95\npear 7.95\nplum 7.95\n"),
            content_lost_in_step(prices, b"apple 7.95\npear 7.95\nplum 7.95\n")
        );
        // The 9s and 99s, 9 of the lines' 22 word bytes, and that share of their 31 bytes.
        assert_eq!(content_lost(prices, b"apple 7.95\npear 7.95\nplum 7.95\n"), 12);
        // In a step of several measured alone, no allowance (sec68 F2).
        assert!(content_lost_in_step(module, renamed) > 25);
        // Not when two names become one (`a` into `b`, which the file has), nor
        // for a change of more than names.
        assert!(content_lost(b"x = a + 1\ny = b\n", b"x = b + 1\ny = b\n") > 0);
        assert_eq!(content_lost(b"x = a\ny = b\n", b"x = b\ny = b\n"), 3, "a, and its share of its line");
        assert!(content_lost(module, b"def add_client(client_id):\n    pass\n    return getClient(client_id)\n") > 25);
        // A line broken over several (a formatter) keeps its words: nothing lost.
        assert_eq!(content_lost(b"call(alpha, beta)\n", b"call(\n    alpha,\n    beta,\n)\n"), 0);
        // Spacing changed alone loses nothing; lines of punctuation alone are
        // measured by their punctuation.
        assert_eq!(content_lost(b"a  =  1\n", b"a = 1\n"), 0);
        assert_eq!(content_lost(b"{\n}\n", b"(\n}\n"), 1);
        // A cut loses what it cut, to the byte.
        let text: Vec<u8> = (0..100).flat_map(|line| format!("line {line:03} here\n").into_bytes()).collect();
        assert_eq!(content_lost(&text, &text[..700]), text.len() as u64 - 700);
        // Other words at the same size lose what they replace.
        assert_eq!(content_lost(b"alpha beta\n", b"gamma delt\n"), 9, "two names, renamed");
        // Not one name into one: beta is kept where it moved, both alphas lost with their share.
        assert_eq!(content_lost(b"alpha beta\nalpha\n", b"gamma delt\nbeta\n"), 12);
        // A byte changed in, or put into, a long word loses a chunk or two of it.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let word: Vec<u8> = (0..100_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                b"abcdefghijklmnopqrstuvwxyz0123456789"[(state % 36) as usize]
            })
            .collect();
        let mut changed = word.clone();
        changed[50_000] = b'z';
        assert!((1..=512).contains(&content_lost(&word, &changed)), "{}", content_lost(&word, &changed));
        let mut inserted = word.clone();
        inserted.insert(30_000, b'z');
        assert!((1..=512).contains(&content_lost(&word, &inserted)), "{}", content_lost(&word, &inserted));
        let uniform = vec![b'o'; 900_000];
        let mut edited = uniform.clone();
        edited[0] = b'n';
        assert!(content_lost(&uniform, &edited) <= 256, "{}", content_lost(&uniform, &edited));
        // And a long word replaced whole loses all of it.
        let other: Vec<u8> = word.iter().map(u8::to_ascii_uppercase).collect();
        assert_eq!(content_lost(&word, &other), word.len() as u64);
    }

    #[test]
    fn a_loss_is_judged_against_the_reviewed_size_over_unreviewed_commits() {
        let file = |bytes: &[u8]| NodeState::file_with(bytes, 0o644);
        let modify = entry("f", Some(file(&[b'a'; 100])), Some(file(&[b'b'; 100])));
        let loss = |lost, earlier_lost, reviewed_size| ContentLoss {
            path: VPath::parse("f").unwrap(),
            lost,
            earlier_lost,
            reviewed_size,
            since_reviewed: None,
            restores_reviewed: false,
        };
        // Balanced ratio 0.5: more than half of what the reviewer saw, lost.
        assert!(!is_lossy_rewrite(&modify, &loss(500, 0, 1_000), 5_000), "half is not more than half");
        assert!(is_lossy_rewrite(&modify, &loss(501, 0, 1_000), 5_000));
        // A same-size rewrite is one: the sizes say nothing of it.
        assert!(!is_content_rewrite(&modify, 5_000));
        assert!(is_lossy_rewrite(&modify, &loss(1_000, 0, 1_000), 5_000));
        // Earlier unreviewed losses add up: a cut in two steps is one cut.
        assert!(!is_lossy_rewrite(&modify, &loss(250, 250, 1_000), 5_000));
        assert!(is_lossy_rewrite(&modify, &loss(250, 251, 1_000), 5_000));
        // Measured against the reviewed bytes themselves, that measure is
        // judged alone: what unreviewed commits added and took again is none.
        let direct =
            |lost, earlier_lost, since| ContentLoss { since_reviewed: Some(since), ..loss(lost, earlier_lost, 1_000) };
        assert!(!is_lossy_rewrite(&modify, &direct(400, 400, 0), 5_000));
        assert!(!is_lossy_rewrite(&modify, &direct(400, 400, 500), 5_000));
        assert!(is_lossy_rewrite(&modify, &direct(0, 0, 501), 5_000));
        // What no reviewer saw (a file made empty, then filled unreviewed) is no loss.
        assert!(!is_lossy_rewrite(&modify, &loss(1_000, 0, 0), 5_000));
        // A few bytes are an edit, however small the file: its value changed.
        assert!(!is_lossy_rewrite(&modify, &loss(UNCOUNTED_LOSS_BYTES, 0, 100), 5_000));
        assert!(is_lossy_rewrite(&modify, &loss(UNCOUNTED_LOSS_BYTES, 1, 100), 5_000));
        // A ratio of 1: only emptying escalates, whatever was lost.
        assert!(!is_lossy_rewrite(&modify, &loss(5_000, 5_000, 1_000), 10_000));
        // What a reviewer last saw, put back, is none, whatever the sizes.
        let back = entry("f", Some(file(&[b'a'; 3_000])), Some(file(&[b'b'; 1_000])));
        let restored = ContentLoss { restores_reviewed: true, ..loss(2_000, 2_000, 1_000) };
        assert!(!is_lossy_rewrite(&back, &restored, 5_000));
        assert!(is_lossy_rewrite(&back, &loss(2_000, 0, 3_000), 5_000));
        // The rule on sizes still holds: a small file cut below half is one.
        let cut = entry("f", Some(file(b"0123456789")), Some(file(b"0123")));
        assert!(is_lossy_rewrite(&cut, &loss(6, 0, 10), 5_000));
        // Emptied is always one.
        let emptied = entry("f", Some(file(b"x")), Some(file(b"")));
        assert!(is_lossy_rewrite(&emptied, &loss(0, 0, 1_000), 5_000));
        // Not a file either side, or not a modify: never.
        assert!(!is_lossy_rewrite(&entry("f", Some(file(b"x")), None), &loss(1, 0, 1), 5_000));
        // The metrics use the measure for the paths it names, sizes for the rest.
        let other = entry("g", Some(file(&[b'a'; 100])), Some(file(&[b'c'; 100])));
        let diff = [modify.clone(), other];
        assert_eq!(RiskMetrics::measure_with_losses(&diff, 0, 0, 5_000, &[loss(100, 0, 100)]).rewritten, 1);
        assert_eq!(RiskMetrics::measure_with_losses(&diff, 0, 0, 5_000, &[]).rewritten, 0);
    }

    #[test]
    fn content_rewrite_rule() {
        let same_size_other_bytes = (NodeState::file_with(b"aaaa", 0o644), NodeState::file_with(b"bbbb", 0o644));
        let cases: [RewriteCase; 17] = [
            // Balanced ratio 0.5: below half the size escalates, half does not.
            ("half-minus-one", Some(sized(100)), Some(sized(49)), 5_000, true),
            ("exactly-half", Some(sized(100)), Some(sized(50)), 5_000, false),
            ("emptied", Some(sized(100)), Some(sized(0)), 5_000, true),
            ("one-byte-emptied", Some(sized(1)), Some(sized(0)), 10_000, true),
            ("grown", Some(sized(100)), Some(sized(1_000)), 5_000, false),
            ("same-size-rewrite", Some(same_size_other_bytes.0), Some(same_size_other_bytes.1), 1, false),
            ("was-empty", Some(sized(0)), Some(sized(10)), 5_000, false),
            // Strict 0.25 and Paranoid 0.1.
            ("strict-74", Some(sized(100)), Some(sized(74)), 2_500, true),
            ("strict-75", Some(sized(100)), Some(sized(75)), 2_500, false),
            ("paranoid-89", Some(sized(100)), Some(sized(89)), 1_000, true),
            ("paranoid-90", Some(sized(100)), Some(sized(90)), 1_000, false),
            // Ratio 1.0: only emptying; the smallest ratio: any shrink of a large file.
            ("ratio-one", Some(sized(100)), Some(sized(1)), 10_000, false),
            ("ratio-tiny", Some(sized(10_000)), Some(sized(9_998)), 1, true),
            ("ratio-tiny-edge", Some(sized(10_000)), Some(sized(9_999)), 1, false),
            // Not File -> File, or not a Modify.
            ("file-to-dir", Some(sized(100)), Some(NodeState::directory(0o755)), 5_000, false),
            ("file-to-link", Some(sized(100)), Some(NodeState::symlink(b"t")), 5_000, false),
            ("deleted", Some(sized(100)), None, 5_000, false),
        ];
        for (name, before, after, ratio, expected) in cases {
            let diff_entry = entry(name, before, after);
            assert_eq!(is_content_rewrite(&diff_entry, ratio), expected, "{name}");
            let metrics = RiskMetrics::measure_with_ratio(std::slice::from_ref(&diff_entry), 0, 0, ratio);
            assert_eq!(metrics.rewritten, u64::from(expected), "{name}");
        }
        // Sizes near u64::MAX do not overflow.
        let huge = entry("huge", Some(sized(u64::MAX)), Some(sized(u64::MAX / 2 - 1)));
        assert!(is_content_rewrite(&huge, 5_000));
        // A mode change alone is never a rewrite; `measure` uses the Balanced ratio.
        let chmod = entry("chmod", Some(sized(100)), Some(NodeState { mode: 0o600, ..sized(100) }));
        assert!(!is_content_rewrite(&chmod, 10_000));
        let shrink = [entry("s", Some(sized(100)), Some(sized(49))), entry("t", Some(sized(100)), Some(sized(60)))];
        assert_eq!(RiskMetrics::measure(&shrink, 0, 0).rewritten, 1);
        assert_eq!(RiskMetrics::measure_with_ratio(&shrink, 0, 0, 2_500).rewritten, 2);
    }

    #[test]
    fn denial_and_ceiling_forms() {
        let denied = DeniedAccess {
            path: VPath::parse("config/prod/a").unwrap(),
            access: AccessKind::Modify,
            rule: "config/prod/**".to_owned(),
            label: RuleLabel::Custom,
            rule_access: AccessSet::MUTATIONS,
        };
        let denial = Denial::new(&denied, "remove it".to_owned());
        assert_eq!(denial.denied_access(), denied);
        assert_eq!(
            denial.to_string(),
            "modify of config/prod/a denied by rule `config/prod/**` (custom, denies mutations); to allow: remove it"
        );
        let other_remedy = Denial { remedy: "else".to_owned(), ..denial.clone() };
        assert_ne!(other_remedy.to_canonical_bytes(), denial.to_canonical_bytes());
        let other_access = Denial { rule_access: AccessSet::ALL, ..denial.clone() };
        assert_ne!(other_access.to_canonical_bytes(), denial.to_canonical_bytes());
        let breach =
            CeilingBreach { threshold: "thresholds.deny_touched_paths".to_owned(), limit: 3, value: 4, allowing: 4 };
        let manifest = |ceiling: Option<CeilingBreach>, remedy: &str| DenyManifest {
            reason: DenyReason::TooManyTouchedPaths,
            denied: Vec::new(),
            denied_total: 0,
            ceiling,
            remedy: remedy.to_owned(),
            metrics: RiskMetrics::default(),
            policy: PolicyDigest::digest(b"p"),
        };
        let encodings = [
            manifest(Some(breach.clone()), "raise"),
            manifest(None, "raise"),
            manifest(Some(breach.clone()), "lower"),
            manifest(Some(CeilingBreach { allowing: 5, ..breach }), "raise"),
        ]
        .map(|manifest| manifest.to_canonical_bytes());
        for (index, encoding) in encodings.iter().enumerate() {
            assert!(!encodings[..index].contains(encoding), "{index}");
        }
        let with_rewrites = RiskMetrics { rewritten: 1, ..RiskMetrics::default() };
        assert_ne!(with_rewrites.to_canonical_bytes(), RiskMetrics::default().to_canonical_bytes());
    }

    #[test]
    fn names_tags_and_canonical_forms() {
        let flags = [
            RiskFlag::Mutation,
            RiskFlag::Deletion,
            RiskFlag::Rename,
            RiskFlag::ExecutableChange,
            RiskFlag::SymlinkChange,
            RiskFlag::LargeTouchedSet,
            RiskFlag::LargeByteChange,
            RiskFlag::PermissionChange,
            RiskFlag::ContentRewrite,
            RiskFlag::GitRepository,
            RiskFlag::ReviewRule,
            RiskFlag::UnseenChange,
        ];
        for (index, flag) in flags.iter().enumerate() {
            assert_eq!(usize::from(flag.tag()), index + 1);
        }
        assert!(flags.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(RiskFlag::ExecutableChange.to_string(), "executable-change");
        assert_eq!(RiskFlag::ContentRewrite.to_string(), "content-rewrite");
        assert_eq!(RiskFlag::UnseenChange.to_string(), "unseen-change");
        assert_eq!(DenyReason::DeleteRatio.to_string(), "delete-ratio");
        assert_eq!(DenyReason::ProtectedAccessAttempt.tag(), 1);
        let policy = PolicyDigest::digest(b"p");
        let pending = Decision::PendingApproval(RiskManifest {
            metrics: RiskMetrics::default(),
            flags: vec![RiskFlag::Deletion],
            policy,
        });
        let denied = Decision::Denied(DenyManifest {
            reason: DenyReason::TooManyDeletions,
            denied: Vec::new(),
            denied_total: 0,
            ceiling: None,
            remedy: String::new(),
            metrics: RiskMetrics::default(),
            policy,
        });
        let encodings = [&pending, &denied, &Decision::AutoApproved].map(Canonical::to_canonical_bytes);
        assert_ne!(encodings[0], encodings[1]);
        assert_eq!(encodings[2], vec![2]);
        assert_eq!(pending.name(), "pending-approval");
        assert!(pending.is_pending_approval() && denied.is_denied() && Decision::AutoApproved.is_auto_approved());
    }

    #[test]
    fn predicates_and_tags_tell_every_variant_apart() {
        let policy = PolicyDigest::digest(b"p");
        let manifest = |flags: Vec<RiskFlag>| RiskManifest { metrics: RiskMetrics::default(), flags, policy };
        let pending = Decision::PendingApproval(manifest(vec![RiskFlag::Deletion]));
        assert!(!pending.is_auto_approved() && !Decision::AutoApproved.is_pending_approval());
        assert!(!pending.is_denied() && !Decision::AutoApproved.is_denied());
        let reasons = [
            DenyReason::ProtectedAccessAttempt,
            DenyReason::ProtectedMutation,
            DenyReason::TooManyTouchedPaths,
            DenyReason::TooManyChangedBytes,
            DenyReason::TooManyDeletions,
            DenyReason::DeleteRatio,
            DenyReason::SetuidFile,
        ];
        assert_eq!(reasons.map(DenyReason::tag), [1, 2, 3, 4, 5, 6, 7]);
        // A manifest's encoding carries its flags and its policy.
        let one = manifest(vec![RiskFlag::Deletion]).to_canonical_bytes();
        assert_ne!(one, manifest(vec![RiskFlag::Rename]).to_canonical_bytes());
        assert_ne!(one, manifest(vec![]).to_canonical_bytes());
        let other_policy = RiskManifest { policy: PolicyDigest::digest(b"q"), ..manifest(vec![RiskFlag::Deletion]) };
        assert_ne!(one, other_policy.to_canonical_bytes());
    }
}
