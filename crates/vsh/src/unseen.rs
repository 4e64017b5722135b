//! Files a run replaced or removed without reading them, whose content
//! differs from what vsh last saw of them: changed since, outside vsh or
//! by other work, so the run dropped a change nobody showed it
//! ([`vsh_policy::RiskFlag::UnseenChange`]).
//!
//! ux64 F3: an agent reads a file in one transaction, the user edits it,
//! and the agent's next transaction writes the whole file from what it
//! read before. The run's own read set cannot tell (it never read the
//! file); the workspace's record of what vsh last saw of each file can
//! ([`vsh_store::SeenContents`]): every run notes what it read
//! ([`sightings_of_run`], read-only runs included, which keep no other
//! record) and every commit what it left, or that it removed a file
//! ([`sightings_of_commit`]). A file
//! whose content now differs from that was changed since, and a run that
//! replaces it unread waits for a reviewer, who is told who saw it last
//! ([`crate::Warning::UnseenChanges`]).
//!
//! Judged only where the record says something: a file vsh never saw (an
//! agent that reads through tools of its own), or saw so long ago that the
//! record's [`vsh_store::MAX_SEEN_ENTRIES`] newer paths pushed it out, is
//! not judged.

use std::collections::BTreeSet;

use vsh_store::{SeenContents, Sighting};
use vsh_types::{BlobId, DiffEntry, DiffKind, NodeKind, ReadSet, TransactionId, VPath};
use vsh_vfs::VirtualFs;

use crate::records::Records;

/// The most sightings one run adds to the record: a run that reads a whole
/// tree (a `grep -r`) does not push out every other file's.
const NOTED_PER_RUN: usize = 128;

/// The most files a note lists.
const LISTED: usize = 5;

/// A file the run replaced or removed unread, whose content differs from
/// what vsh last saw there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnseenChange {
    path: VPath,
    removed: bool,
    last: Sighting,
}

impl UnseenChange {
    /// The line a reviewer reads.
    fn line(&self) -> String {
        let what = if self.removed { "removed" } else { "replaced" };
        let path = &self.path;
        match (self.last.committed_by, self.last.content) {
            (None, _) => format!("{path} (changed since a run read it; {what} unread)"),
            (Some(by), Some(_)) => format!("{path} (changed since {} committed it; {what} unread)", by.short()),
            (Some(by), None) => format!("{path} (made again since {} removed it; {what} unread)", by.short()),
        }
    }
}

/// The files `entries` replace or remove whose content the run never read
/// (`shown`: [`vsh_vfs::VirtualFs::shown_contents`]; the read set records
/// the content of a file a run only replaced too, as its commit's
/// precondition) and whose content before differs from what `seen` says
/// vsh last saw there; in `entries`' order.
fn at_run(shown: &BTreeSet<VPath>, entries: &[DiffEntry], seen: &SeenContents) -> Vec<UnseenChange> {
    entries
        .iter()
        .filter(|entry| matches!(entry.kind, DiffKind::Modify | DiffKind::Delete))
        .filter_map(|entry| {
            let before = entry.before.filter(|before| before.kind == NodeKind::File)?;
            let content: BlobId = before.content?;
            if shown.contains(&entry.path) {
                return None;
            }
            let last = seen.get(&entry.path)?;
            (last.content != Some(content)).then(|| UnseenChange {
                path: entry.path.clone(),
                removed: entry.kind == DiffKind::Delete,
                last,
            })
        })
        .collect()
}

/// What a run saw: the content of each file of `shown` it read (at most
/// [`NOTED_PER_RUN`] of [`vsh_vfs::VirtualFs::shown_contents`]), by the
/// digest its read set `reads` records. Not what it only replaced, nor what
/// it found absent (a write's precondition looks as well).
fn sightings_of_run(shown: Vec<VPath>, reads: &ReadSet) -> impl Iterator<Item = (VPath, Sighting)> + '_ {
    shown.into_iter().filter_map(|path| {
        let content = reads.entries.get(&path)?.content?;
        Some((path, Sighting { content: Some(content), committed_by: None }))
    })
}

/// What the commit of `transaction`, which changed `entries`, left: each
/// file's content where its diff knows it, and each path it removed.
pub(crate) fn sightings_of_commit(
    entries: &[DiffEntry],
    transaction: TransactionId,
) -> impl Iterator<Item = (VPath, Sighting)> + '_ {
    entries.iter().filter_map(move |entry| {
        let content = match entry.after {
            None => None,
            Some(after) if after.kind == NodeKind::File => Some(after.content?),
            Some(_) => return None,
        };
        Some((entry.path.clone(), Sighting { content, committed_by: Some(transaction) }))
    })
}

/// The files `entries` replace or remove unread that changed since vsh
/// last saw them ([`at_run`], against the workspace's record in
/// `records`); what the program in `vfs` read is recorded as seen, for the
/// runs after it ([`sightings_of_run`]): written to the store when `write`
/// (a runtime whose previews are durable), else kept in the process until
/// its next commit (a process-local preview writes nothing).
pub(crate) fn judge(vfs: &mut VirtualFs, entries: &[DiffEntry], records: &Records, write: bool) -> Vec<UnseenChange> {
    let seen = records.seen_contents();
    let unseen = at_run(vfs.shown_contents(), entries, &seen);
    let shown = vfs.shown_contents().iter().take(NOTED_PER_RUN).cloned().collect();
    records.note_sightings(seen, sightings_of_run(shown, vfs.read_set()), write);
    unseen
}

/// What a reviewer is told of `changes`, as [`crate::Warning::UnseenChanges`].
pub(crate) fn note(changes: &[UnseenChange]) -> Option<crate::Warning> {
    let total = changes.len();
    let files = changes.iter().take(LISTED).map(UnseenChange::line).collect();
    (total > 0).then_some(crate::Warning::UnseenChanges { files, total })
}
