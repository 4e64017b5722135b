//! What modified files lose of their content, measured from the bytes, and
//! the workspace's [`LossHistory`] of what unreviewed commits took: a run's
//! decision judges each modified file's loss with the loss since a reviewer
//! last saw it ([`at_run`], [`vsh_policy::is_lossy_rewrite`]), and a commit
//! that lands records it ([`record`]), so that a cut made in auto-approved
//! steps escalates as the one cut it adds up to (sec59 F1).

use std::collections::BTreeMap;

use vsh_host::CapDir;
use vsh_policy::ContentLoss;
use vsh_store::{LossHistory, UnreviewedLoss};
use vsh_types::{DiffEntry, DiffKind, NodeKind, NodeState, VPath};
use vsh_vfs::{ContentSource, VirtualFs};

use crate::VshError;

/// The largest file whose loss is measured from its bytes (either side): a
/// larger one counts as losing all it held.
pub(crate) const MEASURED_FILE_BYTES: u64 = 16 << 20;

/// The most bytes (both sides) measured for one transaction; past it, a
/// file counts as losing all it held.
pub(crate) const MEASURED_BYTES: u64 = 128 << 20;

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
/// commits took from it earlier. A file too large to measure, or whose
/// before bytes the disk no longer holds, loses all it held. With a
/// history that has no room left, a file it does not hold yet that loses
/// anything loses all its reviewed content (its loss could not be recorded).
pub(crate) fn at_run(
    vfs: &mut VirtualFs,
    workspace: &CapDir,
    entries: &[DiffEntry],
    history: &LossHistory,
) -> Result<Vec<ContentLoss>, VshError> {
    let mut budget = MEASURED_BYTES;
    let mut losses = Vec::new();
    for entry in entries {
        let Some((before, after)) = measured(entry) else { continue };
        let sides = before.size.saturating_add(after.size);
        let lost = if before.size <= MEASURED_FILE_BYTES && after.size <= MEASURED_FILE_BYTES && sides <= budget {
            budget -= sides;
            let after_bytes = match vfs.content_source(&entry.path)? {
                Some(ContentSource::Bytes(bytes)) => Some(bytes.to_vec()),
                // Moved or copied from another base file, unread.
                Some(ContentSource::Base(origin)) => vsh_vfs::live_content_if_unchanged(workspace, &origin, &after),
                None => None,
            };
            match (vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &before), after_bytes) {
                (Some(old), Some(new)) => vsh_policy::content_lost(&old, &new),
                _ => before.size,
            }
        } else {
            before.size
        };
        let earlier = before.content.and_then(|content| history.get(&entry.path, content));
        let (mut earlier_lost, reviewed_size) =
            earlier.map_or((0, before.size), |loss| (loss.lost, loss.reviewed_size));
        if earlier.is_none() && history.is_full() && lost > 0 {
            earlier_lost = reviewed_size;
        }
        losses.push(ContentLoss { path: entry.path.clone(), lost, earlier_lost, reviewed_size });
    }
    // Diff entries are in path order already; sorted again for the policy's search.
    losses.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(losses)
}

/// The before bytes of the files `entries` modify, read from `workspace`
/// while it holds them (before a commit), within the measuring bounds.
pub(crate) fn befores(workspace: &CapDir, entries: &[DiffEntry]) -> BTreeMap<VPath, Vec<u8>> {
    let mut budget = MEASURED_BYTES;
    let mut read = BTreeMap::new();
    for entry in entries {
        let Some((before, after)) = measured(entry) else { continue };
        let sides = before.size.saturating_add(after.size);
        if before.size > MEASURED_FILE_BYTES || after.size > MEASURED_FILE_BYTES || sides > budget {
            continue;
        }
        budget -= sides;
        if let Some(bytes) = vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &before) {
            read.insert(entry.path.clone(), bytes);
        }
    }
    read
}

/// Record in `history` what a commit of `entries` that has landed took:
/// after a reviewed commit (a person approved it) every path it changed
/// starts afresh; after an unreviewed one each modified file's loss (its
/// `befores` against what `workspace` holds now) adds to what earlier
/// unreviewed commits took since it was reviewed, and every other path it
/// changed starts afresh (made or deleted: no reviewed content of its own
/// is left to lose). A mode change alone changes nothing. Returns whether
/// `history` changed.
pub(crate) fn record(
    history: &mut LossHistory,
    workspace: &CapDir,
    entries: &[DiffEntry],
    reviewed: bool,
    befores: &BTreeMap<VPath, Vec<u8>>,
) -> bool {
    let mut changed = false;
    for entry in entries {
        if entry.kind == DiffKind::MetadataChange {
            continue;
        }
        let measured = measured(entry).filter(|_| !reviewed);
        let Some((before, after)) = measured else {
            changed |= history.contains(&entry.path);
            history.remove(&entry.path);
            continue;
        };
        let lost = match (befores.get(&entry.path), vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &after))
        {
            (Some(old), Some(new)) => vsh_policy::content_lost(old, &new),
            _ => before.size,
        };
        let earlier = before.content.and_then(|content| history.get(&entry.path, content));
        let (earlier_lost, reviewed_size) = earlier.map_or((0, before.size), |loss| (loss.lost, loss.reviewed_size));
        let total = earlier_lost.saturating_add(lost);
        let Some(content) = after.content else { continue };
        if total == 0 || reviewed_size == 0 {
            changed |= history.contains(&entry.path);
            history.remove(&entry.path);
        } else if history.contains(&entry.path) || !history.is_full() {
            history.set(entry.path.clone(), UnreviewedLoss { content, reviewed_size, lost: total });
            changed = true;
        }
    }
    changed
}
