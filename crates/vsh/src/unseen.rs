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
//! ([`noted_of_run`], read-only runs included, which keep no other
//! record) and every commit what it left, or that it removed a file
//! ([`noted_of_commit`]). A file
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
    /// What vsh last saw there; `None` when its record did not verify.
    last: Option<Sighting>,
}

impl UnseenChange {
    /// The line a reviewer reads.
    fn line(&self) -> String {
        let what = if self.removed { "removed" } else { "replaced" };
        let path = &self.path;
        let Some(last) = self.last else {
            return format!("{path} (vsh's record of what it saw does not verify; {what} unread)");
        };
        match (last.committed_by, last.content) {
            (None, _) => format!("{path} (changed since a run read it; {what} unread)"),
            (Some(by), Some(_)) => format!("{path} (changed since {} committed it; {what} unread)", by.short()),
            (Some(by), None) => format!("{path} (made again since {} removed it; {what} unread)", by.short()),
        }
    }
}

/// The most bytes of a file removed unread (known by its stamp alone)
/// hashed to tell whether it changed since vsh saw it.
const HASHED_UNREAD_BYTES: u64 = 16 << 20;

/// The files `entries` replace or remove whose content the run never read
/// (`shown`: [`vsh_vfs::VirtualFs::shown_contents`]; the read set records
/// the content of a file a run only replaced too, as its commit's
/// precondition) and whose content before differs from what `seen` says
/// was last seen there: by the `session`, where it saw the file at all (any
/// content it ever read or wrote there passes), else by any run; in
/// `entries`' order. A file removed unread is known by its stamp alone:
/// where vsh saw it, its bytes are hashed from `workspace` (while they
/// still match the stamp, within [`HASHED_UNREAD_BYTES`]), unless
/// `unreadable` holds it (ux69 H3: a removal was never judged).
fn at_run(
    shown: &BTreeSet<VPath>,
    entries: &[DiffEntry],
    (seen, session): (&SeenContents, Option<&str>),
    workspace: &vsh_host::CapDir,
    unreadable: &vsh_vfs::PathRule,
) -> Vec<UnseenChange> {
    entries
        .iter()
        .filter(|entry| matches!(entry.kind, DiffKind::Modify | DiffKind::Delete))
        .filter_map(|entry| {
            let before = entry.before.filter(|before| before.kind == NodeKind::File)?;
            if shown.contains(&entry.path) {
                return None;
            }
            // The session's own view first (ux69 H1: another's commit, or
            // any run's read, made a change count as seen), else any run's.
            let own = session.and_then(|session| seen.get_for(Some(session), &entry.path).map(|last| (session, last)));
            let last = match own {
                Some((_, last)) => last,
                None => seen.get(&entry.path)?,
            };
            let content: BlobId = match before.content {
                Some(content) => content,
                None if before.size <= HASHED_UNREAD_BYTES && !unreadable.holds(&entry.path) => {
                    BlobId::of(&vsh_vfs::live_content_if_unchanged(workspace, &entry.path, &before)?)
                }
                None => return None,
            };
            let known = match own {
                Some((session, _)) => seen.knows(session, &entry.path, &content),
                None => last.content == Some(content),
            };
            (!known).then(|| UnseenChange {
                path: entry.path.clone(),
                removed: entry.kind == DiffKind::Delete,
                last: Some(last),
            })
        })
        .collect()
}

/// The files `entries` replace or remove whose content the run never read
/// (`shown`), each as an [`UnseenChange`] that vsh's record could not
/// judge (it did not verify).
fn unread_replacements(shown: &BTreeSet<VPath>, entries: &[DiffEntry]) -> Vec<UnseenChange> {
    entries
        .iter()
        .filter(|entry| matches!(entry.kind, DiffKind::Modify | DiffKind::Delete))
        .filter(|entry| entry.before.is_some_and(|before| before.kind == NodeKind::File))
        .filter(|entry| !shown.contains(&entry.path))
        .map(|entry| UnseenChange { path: entry.path.clone(), removed: entry.kind == DiffKind::Delete, last: None })
        .collect()
}

/// What a run or a commit adds to the workspace's record of what vsh saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Noted {
    /// What was seen at a path (a run's read, a commit's after state).
    Seen(VPath, Sighting),
    /// Content the session's own work wrote at a path (not on disk yet):
    /// content the session saw there, no sighting of what is there.
    Wrote(VPath, BlobId),
}

impl Noted {
    /// Put it in `seen`, as `session`'s too where there is one; whether
    /// that changed anything.
    pub(crate) fn apply(&self, seen: &mut SeenContents, session: Option<&str>) -> bool {
        match self {
            Self::Seen(path, sighting) => seen.insert_for(session, path, *sighting),
            Self::Wrote(path, content) => session.is_some_and(|session| seen.know(session, path, content)),
        }
    }
}

/// What a run's program saw: the content of each file of `shown` it read
/// itself (at most [`NOTED_PER_RUN`] of
/// [`vsh_vfs::VirtualFs::seen_contents`]), by the digest its read set
/// `reads` records. Not what a real command it ran read (a test run reads
/// sources it never shows: ux69 H2), what it only replaced, nor what it
/// found absent (a write's precondition looks as well). With what it wrote
/// (`entries`' after states), for its session.
fn noted_of_run(shown: Vec<VPath>, reads: &ReadSet, entries: &[DiffEntry]) -> Vec<Noted> {
    let seen = shown.into_iter().filter_map(|path| {
        let content = reads.entries.get(&path)?.content?;
        Some(Noted::Seen(path, Sighting { content: Some(content), committed_by: None }))
    });
    let wrote = entries.iter().take(NOTED_PER_RUN).filter_map(|entry| {
        let after = entry.after.filter(|after| after.kind == NodeKind::File)?;
        Some(Noted::Wrote(entry.path.clone(), after.content?))
    });
    seen.chain(wrote).collect()
}

/// What the commit of `transaction`, which changed `entries`, left: each
/// file's content where its diff knows it, and each path it removed.
pub(crate) fn noted_of_commit(entries: &[DiffEntry], transaction: TransactionId) -> Vec<Noted> {
    entries
        .iter()
        .filter_map(move |entry| {
            let content = match entry.after {
                None => None,
                Some(after) if after.kind == NodeKind::File => Some(after.content?),
                Some(_) => return None,
            };
            Some(Noted::Seen(entry.path.clone(), Sighting { content, committed_by: Some(transaction) }))
        })
        .collect()
}

/// The files `entries` replace or remove unread that changed since vsh
/// last saw them, losing some of their content (`losses`, sorted by path:
/// an append is no loss), ([`at_run`], against the workspace's record in
/// `records`); what the program in `vfs` read is recorded as seen, for the
/// runs after it ([`noted_of_run`]): written to the store when `write`
/// (a runtime whose previews are durable), else kept in the process until
/// its next commit (a process-local preview writes nothing).
pub(crate) fn judge(
    vfs: &mut VirtualFs,
    (entries, losses): (&[DiffEntry], &[vsh_policy::ContentLoss]),
    records: &Records,
    unreadable: &vsh_vfs::PathRule,
    write: bool,
) -> Vec<UnseenChange> {
    let shown = vfs.seen_contents().iter().take(NOTED_PER_RUN).cloned().collect();
    let mut noted = noted_of_run(shown, vfs.read_set(), entries);
    // What only a session keeps, without one is nothing to note.
    noted.retain(|noted| records.session().is_some() || matches!(noted, Noted::Seen(..)));
    // Nothing to judge and nothing to note (most runs): the record is not read.
    if noted.is_empty() && unread_replacements(vfs.shown_contents(), entries).is_empty() {
        return Vec::new();
    }
    let (seen, corrupt) = records.seen_contents_verified();
    let workspace = std::sync::Arc::clone(vfs.host());
    let mut unseen = if corrupt {
        // What vsh saw cannot be told: every file replaced unread waits
        // (sec74 F3: a damaged record let them all through).
        unread_replacements(vfs.shown_contents(), entries)
    } else {
        at_run(vfs.shown_contents(), entries, (&seen, records.session()), &workspace, unreadable)
    };
    // A change that keeps every byte of the file (an append) drops nothing
    // of anyone's: only a loss is judged.
    unseen.retain(|change| {
        change.removed
            || losses.binary_search_by(|loss| loss.path.cmp(&change.path)).map_or(true, |at| losses[at].lost > 0)
    });
    records.note_sightings(seen, noted, write);
    unseen
}

/// What a reviewer is told of `changes`, as [`crate::Warning::UnseenChanges`].
pub(crate) fn note(changes: &[UnseenChange]) -> Option<crate::Warning> {
    let total = changes.len();
    let files = changes.iter().take(LISTED).map(UnseenChange::line).collect();
    (total > 0).then_some(crate::Warning::UnseenChanges { files, total })
}
