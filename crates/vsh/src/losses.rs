//! What modified files lose of their content, measured from the bytes, and
//! the workspace's [`LossHistory`] of what unreviewed commits took: a run's
//! decision judges each modified file's loss with the loss since a reviewer
//! last saw it ([`at_run`], [`vsh_policy::is_lossy_rewrite`]), and a commit
//! that lands records it ([`record`]), so that a cut made in auto-approved
//! steps escalates as the one cut it adds up to (sec59 F1).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use vsh_host::CapDir;
use vsh_policy::ContentLoss;
use vsh_store::{LossHistory, UnreviewedLoss};
use vsh_types::{DiffEntry, DiffKind, NodeKind, NodeState, VPath};
use vsh_vfs::{ContentSource, VirtualFs};

use crate::VshError;

/// The largest file whose loss is measured from its bytes, before the
/// change; a file may grow to [`MEASURED_AFTER_BYTES`] and still be
/// measured (a small file padded into a large one is).
pub(crate) const MEASURED_FILE_BYTES: u64 = 16 << 20;

/// The largest a measured file may be after the change.
pub(crate) const MEASURED_AFTER_BYTES: u64 = 64 << 20;

/// The most bytes (both sides) measured for one transaction.
pub(crate) const MEASURED_BYTES: u64 = 128 << 20;

/// Whether a change from `before` to `after` is measured from its bytes,
/// with `budget` bytes left to measure (taken from it when it is).
fn within_bounds(before: &NodeState, after: &NodeState, budget: &mut u64) -> bool {
    let sides = before.size.saturating_add(after.size);
    let within = before.size <= MEASURED_FILE_BYTES && after.size <= MEASURED_AFTER_BYTES && sides <= *budget;
    if within {
        *budget -= sides;
    }
    within
}

/// The bytes of a content a reviewer saw, by its digest, where the store
/// still holds them (a commit keeps what it replaces, and garbage
/// collection keeps what the loss history names): verified against the
/// digest, `None` when missing, damaged or larger than asked.
pub(crate) type ReviewedBytes<'a> = dyn Fn(vsh_types::BlobId, u64) -> Option<Vec<u8>> + 'a;

/// The reviewed content `loss` names, from `reviewed_bytes`, when its size
/// is within `budget` (taken from it when it is).
fn reviewed_within(reviewed_bytes: &ReviewedBytes<'_>, loss: &UnreviewedLoss, budget: &mut u64) -> Option<Vec<u8>> {
    if loss.reviewed_size > MEASURED_FILE_BYTES || loss.reviewed_size > *budget {
        return None;
    }
    let bytes = reviewed_bytes(loss.reviewed, loss.reviewed_size)?;
    *budget -= loss.reviewed_size;
    Some(bytes)
}

/// The before and after states of `entry` when it changes a file's content
/// and both sides are known by their digests (a file the program may not
/// read is known by its stamp alone, and judged on its sizes).
fn measured(entry: &DiffEntry) -> Option<(NodeState, NodeState)> {
    let (before, after) = (entry.before?, entry.after?);
    (entry.kind == DiffKind::Modify
        && before.kind == NodeKind::File
        && after.kind == NodeKind::File
        && before.content.is_some()
        && after.content.is_some()
        && before.content != after.content)
        .then_some((before, after))
}

/// The loss of each file `entries` modify, sorted by path, for the
/// policy: its bytes as `vfs` holds them after the run against the
/// workspace's before them (read through `workspace`, not recorded: the
/// commit checks that state anyway), with what `history` says unreviewed
/// commits took from it earlier. A file whose before bytes the disk no
/// longer holds loses all it held. Where the history names the content a
/// reviewer last saw and `reviewed_bytes` still has it, the file's loss
/// since is measured against those bytes too ([`ContentLoss::since_reviewed`]:
/// what unreviewed commits added and took again is none of it). A file too large to measure loses
/// nothing when the change appends to it, and all it held otherwise. Where the history has no
/// room for every file this run would add to it, each of those loses all
/// its reviewed content (its loss could not be recorded).
pub(crate) fn at_run(
    vfs: &mut VirtualFs,
    workspace: &CapDir,
    entries: &[DiffEntry],
    history: &LossHistory,
    reviewed_bytes: &ReviewedBytes<'_>,
) -> Result<Vec<ContentLoss>, VshError> {
    let mut budget = MEASURED_BYTES;
    let mut losses = Vec::new();
    let mut new_paths = 0_usize;
    for entry in entries {
        let Some((before, after)) = measured(entry) else { continue };
        let earlier = before.content.and_then(|content| history.get(&entry.path, content));
        if !history.contains(&entry.path) {
            new_paths += 1;
        }
        let mut since_reviewed = None;
        let lost = if within_bounds(&before, &after, &mut budget) {
            let after_bytes = match vfs.content_source(&entry.path)? {
                Some(ContentSource::Bytes(bytes)) => Some(bytes.to_vec()),
                // Moved or copied from another base file, unread.
                Some(ContentSource::Base(origin)) => vsh_vfs::live_content_if_unchanged(workspace, &origin, &after),
                None => None,
            };
            match (vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &before), after_bytes) {
                (Some(old), Some(new)) => {
                    since_reviewed = earlier
                        .and_then(|loss| reviewed_within(reviewed_bytes, &loss, &mut budget))
                        .map(|reviewed| vsh_policy::content_lost(&reviewed, &new));
                    // One step of several, summed: no allowance for names
                    // renamed, which steps could take eight at a time (sec68 F2).
                    if earlier.is_some() && since_reviewed.is_none() {
                        vsh_policy::content_lost_in_step(&old, &new)
                    } else {
                        vsh_policy::content_lost(&old, &new)
                    }
                }
                _ => before.size,
            }
        } else {
            // Too large to hold both sides: an append (a log, a CSV grown by
            // rows) loses nothing; anything else counts as losing all it held
            // (sec62 G1: a 17 MiB file overwritten with junk of its size).
            let appended = match vfs.content_source(&entry.path)? {
                Some(ContentSource::Bytes(bytes)) => appends_to(workspace, &entry.path, &before, &bytes),
                _ => false,
            };
            if appended { 0 } else { before.size }
        };
        let (earlier_lost, reviewed_size) = earlier.map_or((0, before.size), |loss| (loss.lost, loss.reviewed_size));
        // Back to exactly what a reviewer saw (ux59 4: a dependency tried, then dropped).
        let restores_reviewed = earlier.is_some_and(|loss| after.content == Some(loss.reviewed));
        losses.push(ContentLoss {
            path: entry.path.clone(),
            lost,
            earlier_lost,
            reviewed_size,
            since_reviewed,
            restores_reviewed,
        });
    }
    if history.len().saturating_add(new_paths) > vsh_store::MAX_LOSS_ENTRIES {
        for loss in &mut losses {
            if !history.contains(&loss.path) {
                loss.earlier_lost = loss.reviewed_size;
            }
        }
    }
    // Diff entries are in path order already; sorted again for the policy's search.
    losses.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(losses)
}

/// Whether `after` begins with the content `before` describes of the file
/// at `path` in `workspace`, read a MiB at a time (never held whole) and
/// checked against its digest as it is read.
pub(crate) fn appends_to(workspace: &CapDir, path: &VPath, before: &NodeState, after: &[u8]) -> bool {
    const PIECE: u32 = 1 << 20;
    let Some(expected) = before.content else { return false };
    if (after.len() as u64) < before.size {
        return false;
    }
    let mut hasher = vsh_types::BlobId::plain_hasher();
    let mut offset = 0_u64;
    while offset < before.size {
        let Ok(read) = workspace.read_file_range(path, offset, PIECE) else { return false };
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let same = start
            .checked_add(read.bytes.len())
            .and_then(|end| after.get(start..end))
            .is_some_and(|prefix| prefix == read.bytes.as_slice());
        if read.bytes.is_empty() || !same {
            return false;
        }
        hasher.update(&read.bytes);
        offset += read.bytes.len() as u64;
    }
    offset == before.size && vsh_types::BlobId::from_plain_hasher(&hasher) == expected
}

/// What unreviewed commits took from the files `entries` modify before
/// them, as `history` says (`path: N of its M reviewed bytes taken before
/// this run`), for a reviewer, as [`crate::Warning::EarlierLosses`]: a
/// review shows only its own diff, and approving it accepts what they took
/// too (sec61 F2). With `this_run` (the run's own measure, at run time),
/// each line adds what is lost with this run; with a rewrite ratio under
/// 1, the most that may be lost before a change waits for a review (ux62
/// 4: the reviewer had to work it out). `ratio_of` is each file's ratio
/// ([`vsh_policy::TransactionPolicy::rewrite_ratio_for`]: a review rule may
/// lower it).
pub(crate) fn earlier(
    history: &LossHistory,
    entries: &[DiffEntry],
    this_run: Option<&[ContentLoss]>,
    ratio_of: &dyn Fn(&VPath) -> u32,
) -> Option<crate::Warning> {
    const LISTED: usize = 5;
    let files: Vec<String> = entries
        .iter()
        .filter_map(|entry| {
            let (before, _) = measured(entry)?;
            let loss = history.get(&entry.path, before.content?)?;
            (loss.lost > 0 && loss.reviewed_size > 0).then(|| {
                let mut line = format!(
                    "{}: {} of its {} reviewed bytes taken before this run",
                    entry.path,
                    loss.lost.min(loss.reviewed_size),
                    loss.reviewed_size
                );
                let now = this_run
                    .and_then(|losses| losses.iter().find(|now| now.path == entry.path))
                    .map(|now| now.since_reviewed.unwrap_or(now.earlier_lost.saturating_add(now.lost)));
                if let Some(total) = now {
                    let _ = write!(line, ", {} in all with this run", total.min(loss.reviewed_size));
                }
                let ratio_bps = ratio_of(&entry.path);
                if ratio_bps < 10_000 {
                    let allowed = u128::from(loss.reviewed_size) * u128::from(ratio_bps) / 10_000;
                    // Work waiting for another reason: this is not it (ux64
                    // F5), said so in so many words (ux86 L7: "under that").
                    if now.is_some_and(|total| u128::from(total) <= allowed) {
                        let _ =
                            write!(line, " (within the {allowed} that may go without a review: not why this waits)");
                    } else {
                        let _ = write!(line, " (more than {allowed} in all waits for a review)");
                    }
                }
                line
            })
        })
        .collect();
    let total = files.len();
    (total > 0).then(|| crate::Warning::EarlierLosses { files: files.into_iter().take(LISTED).collect(), total })
}

/// The files `entries` modify that `losses` (this run's measure, sorted by
/// path) judge rewritten past `ratio_bps` of what a reviewer last saw
/// ([`vsh_policy::is_lossy_rewrite`]), with the numbers that decided it, as
/// [`crate::Warning::Rewritten`] (`path: N of its M reviewed bytes lost in
/// all with this run (more than H waits for a review)`); files whose
/// earlier losses [`earlier`] lists already are left to it.
pub(crate) fn rewritten(
    entries: &[DiffEntry],
    losses: &[ContentLoss],
    ratio_of: &dyn Fn(&VPath) -> u32,
) -> Option<crate::Warning> {
    const LISTED: usize = 5;
    let files: Vec<String> = entries
        .iter()
        .filter_map(|entry| {
            let loss = losses.binary_search_by(|loss| loss.path.cmp(&entry.path)).ok().map(|at| &losses[at])?;
            let ratio_bps = ratio_of(&entry.path);
            if loss.earlier_lost > 0 || !vsh_policy::is_lossy_rewrite(entry, loss, ratio_bps) {
                return None;
            }
            let total = loss.since_reviewed.unwrap_or(loss.lost).min(loss.reviewed_size);
            let mut line = format!(
                "{}: {total} of its {} reviewed bytes lost in all with this run",
                entry.path, loss.reviewed_size
            );
            if ratio_bps < 10_000 {
                let allowed = u128::from(loss.reviewed_size) * u128::from(ratio_bps) / 10_000;
                let _ = write!(line, " (more than {allowed} waits for a review)");
            }
            Some(line)
        })
        .collect();
    let total = files.len();
    (total > 0).then(|| crate::Warning::Rewritten { files: files.into_iter().take(LISTED).collect(), total })
}

/// The before bytes of the files `entries` modify, read from `workspace`
/// while it holds them (before a commit), within the measuring bounds.
pub(crate) fn befores(workspace: &CapDir, entries: &[DiffEntry]) -> BTreeMap<VPath, Vec<u8>> {
    let mut budget = MEASURED_BYTES;
    let mut read = BTreeMap::new();
    for entry in entries {
        let Some((before, after)) = measured(entry) else { continue };
        if !within_bounds(&before, &after, &mut budget) {
            continue;
        }
        if let Some(bytes) = vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &before) {
            read.insert(entry.path.clone(), bytes);
        }
    }
    read
}

/// Record in `history` what a commit of `entries` that has landed took:
/// after a reviewed commit (a person approved it) every path it changed
/// starts afresh; after an unreviewed one each modified file keeps the size
/// a reviewer last saw (its size before, when none is recorded) and adds
/// its loss (its `befores` against what `workspace` holds now) to what
/// earlier unreviewed commits took, or, where `reviewed_bytes` still has
/// the content a reviewer last saw, records what is lost of that content
/// now, even a loss of nothing (sec61 F1: a
/// file padded unreviewed, then cut, was judged against its padded size);
/// a file too large to measure adds what its sizes say it lost at least
/// (its run judged it an append, or it was let through); every other path it changed
/// starts afresh (made or deleted: no reviewed content of its own is left
/// to lose). A mode change alone changes nothing. Returns whether `history`
/// changed.
pub(crate) fn record(
    history: &mut LossHistory,
    workspace: &CapDir,
    entries: &[DiffEntry],
    reviewed: bool,
    befores: &BTreeMap<VPath, Vec<u8>>,
    reviewed_bytes: &ReviewedBytes<'_>,
) -> bool {
    let mut changed = false;
    let mut budget = MEASURED_BYTES;
    for entry in entries {
        if entry.kind == DiffKind::MetadataChange {
            continue;
        }
        let forget = |history: &mut LossHistory| {
            let held = history.contains(&entry.path);
            history.remove(&entry.path);
            held
        };
        let Some((before, after)) = measured(entry).filter(|_| !reviewed) else {
            changed |= forget(history);
            continue;
        };
        let (Some(old_content), Some(content)) = (before.content, after.content) else { continue };
        let earlier = history.get(&entry.path, old_content);
        let (earlier_lost, reviewed_size) = earlier.map_or((0, before.size), |loss| (loss.lost, loss.reviewed_size));
        let lost = match befores.get(&entry.path) {
            Some(old) => match vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &after) {
                // Against the reviewed bytes, where the store still holds
                // them: what this loses of them in all (ux59 5e).
                Some(new) => match earlier.and_then(|loss| reviewed_within(reviewed_bytes, &loss, &mut budget)) {
                    Some(reviewed) => Lost::SinceReviewed(vsh_policy::content_lost(&reviewed, &new)),
                    // The first unreviewed step starts from the reviewed content.
                    None if earlier.is_none() => Lost::ThisCommit(vsh_policy::content_lost(old, &new)),
                    None => Lost::ThisCommit(vsh_policy::content_lost_in_step(old, &new)),
                },
                None => Lost::ThisCommit(before.size),
            },
            // Too large to measure: its run judged it an append or a loss of
            // all it held, and it was not approved by a person; what its
            // sizes say it lost at least is recorded.
            None => Lost::ThisCommit(before.size.saturating_sub(after.size)),
        };
        let reviewed = earlier.map_or(old_content, |loss| loss.reviewed);
        // Back to what a reviewer saw: nothing of it is lost any more.
        if reviewed_size == 0 || content == reviewed {
            changed |= forget(history);
        } else if history.contains(&entry.path) || !history.is_full() {
            let lost = match lost {
                Lost::SinceReviewed(lost) => lost,
                Lost::ThisCommit(lost) => earlier_lost.saturating_add(lost),
            };
            history.set(entry.path.clone(), UnreviewedLoss { content, reviewed, reviewed_size, lost });
            changed = true;
        }
    }
    changed
}

/// What a commit took from a file: measured against the content a reviewer
/// last saw (all that is lost of it), or against the content it replaced
/// (added to what was lost before).
enum Lost {
    SinceReviewed(u64),
    ThisCommit(u64),
}

#[cfg(test)]
mod tests {
    use vsh_store::{LossHistory, UnreviewedLoss};
    use vsh_types::{BlobId, DiffEntry, NodeState, VPath};

    use super::earlier;

    /// The earlier-losses note of work that waits for another reason says
    /// the loss is not why (ux64 F5: it read as if it decided).
    #[test]
    fn an_earlier_loss_under_the_limit_says_it_is_not_why_work_waits() {
        let path = VPath::parse("a.py").unwrap();
        let before = NodeState::file_with(b"now\n", 0o644);
        let after = NodeState::file_with(b"next\n", 0o644);
        let entry = DiffEntry::between(path.clone(), Some(before), Some(after)).unwrap();
        let mut history = LossHistory::default();
        let reviewed = BlobId::of(b"reviewed");
        let content = before.content.unwrap();
        history.set(path.clone(), UnreviewedLoss { content, reviewed, reviewed_size: 1_000, lost: 100 });
        let loss = |total| vsh_policy::ContentLoss {
            path: path.clone(),
            lost: 10,
            earlier_lost: 100,
            reviewed_size: 1_000,
            since_reviewed: Some(total),
            restores_reviewed: false,
        };
        let line = |total| match earlier(&history, std::slice::from_ref(&entry), Some(&[loss(total)]), &|_| 5_000) {
            Some(crate::Warning::EarlierLosses { files, .. }) => files[0].clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            line(110),
            "a.py: 100 of its 1000 reviewed bytes taken before this run, 110 in all with this run (within the 500 \
             that may go without a review: not why this waits)"
        );
        assert!(!line(600).contains("not why"), "{}", line(600));
    }
}
