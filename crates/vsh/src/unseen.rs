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
    /// The run made the file where someone removed it since it was seen.
    made: bool,
    /// The run's reads were a real command's or a Bash script's, which are
    /// not its program's reading (ux72 L3: the line did not say so).
    by_commands: bool,
    /// What vsh last saw there; `None` when its record did not verify.
    last: Option<Sighting>,
}

impl UnseenChange {
    /// The line a reviewer reads: the path, and why in parentheses.
    fn line(&self) -> String {
        // What a script or a command read for itself is not the program's:
        // it may have read the change and kept it otherwise than in place
        // (a formatter's), which only its hunks tell (ux83 M3: it read
        // "replaced unread ... lost" of a change black had kept).
        if self.by_commands && !self.made {
            return format!(
                "{} ({}; by a command or a Bash script, which may have read it: vsh cannot tell whether it kept \
                 that change, reformatted or moved, so check its hunks before approving)",
                self.path,
                self.reason(if self.removed { "removed" } else { "rewritten" })
            );
        }
        format!("{} ({})", self.path, self.reason(if self.removed { "removed unread" } else { "replaced unread" }))
    }

    /// Why it waits, without who read what: `what` the run did to it.
    fn reason(&self, what: &str) -> String {
        if self.made {
            return "removed since it was last seen; made again unread".to_owned();
        }
        let Some(last) = self.last else {
            return format!("vsh's record of what it saw does not verify; {what}");
        };
        match (last.committed_by, last.content) {
            (None, _) => format!("changed since a run read it; {what}"),
            (Some(by), Some(_)) => format!("changed since {} committed it; {what}", by.short()),
            (Some(by), None) => format!("made again since {} removed it; {what}", by.short()),
        }
    }
}

/// The most bytes of a file removed unread (known by its stamp alone)
/// hashed to tell whether it changed since vsh saw it.
const HASHED_UNREAD_BYTES: u64 = 16 << 20;

/// The most bytes of each of the three versions of a file
/// [`keeps_the_change`] compares.
const KEPT_CHECK_BYTES: u64 = 1 << 20;

/// How long [`keeps_in_place`]'s two line diffs may take before they settle
/// for an edit script that is not the shortest (larger changes: the check
/// then says "not kept" more often, never less).
const KEPT_CHECK_TIME: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether `after`, written over `before`, keeps in place every change
/// made to the file since it held `last` (ux80 M5, ux81 M5: a formatter
/// run after a hand edit kept the edit, and waited for a reviewer told
/// that a change would be lost). Line by line: no change of the run
/// (`before` to `after`) is in or at the edge of a change `last` to
/// `before`, blank lines included; and no line those added is fewer in
/// `after`, nor one they removed more, than in `before` (an edit script can
/// line up equal lines more than one way: a line added next to its twin,
/// then written over with the old text, would otherwise pass). Anything
/// else, or nothing changed since, is "not kept". It judges whether the
/// edit's lines stand as they were, not what they mean: a change of the
/// run's elsewhere that alters their effect (an `alias exit=true` lines
/// above an `exit 1`) is the run's own change, in its diff.
pub(crate) fn keeps_in_place(last: &[u8], before: &[u8], after: &[u8]) -> bool {
    use similar::{Algorithm, DiffTag, capture_diff_slices_deadline};
    let lines = |bytes: &[u8]| bytes.split_inclusive(|byte| *byte == b'\n').map(<[u8]>::to_vec).collect::<Vec<_>>();
    let (last, before, after) = (lines(last), lines(before), lines(after));
    let deadline = Some(std::time::Instant::now() + KEPT_CHECK_TIME);
    let since: Vec<similar::DiffOp> = capture_diff_slices_deadline(Algorithm::Myers, &last, &before, deadline)
        .into_iter()
        .filter(|op| op.tag() != DiffTag::Equal)
        .collect();
    if since.is_empty() {
        return false;
    }
    let run: Vec<similar::DiffOp> = capture_diff_slices_deadline(Algorithm::Myers, &before, &after, deadline)
        .into_iter()
        .filter(|op| op.tag() != DiffTag::Equal)
        .collect();
    // Any change that reaches it, or its edges, touches it (sec90 M1: a
    // line moved from beside an edit past it undid it; sec91 M1: a blank
    // line added beside one, before a shebang's flag or inside a `\`
    // continuation, undid it too: no line is harmless everywhere).
    let touches = |kept: &std::ops::Range<usize>| {
        // The run's changes are in order: those that start at most at its end.
        let from = run.partition_point(|change| change.old_range().end < kept.start);
        run.get(from).is_some_and(|change| change.old_range().start <= kept.end)
    };
    if since.iter().any(|op| touches(&op.new_range())) {
        return false;
    }
    let count = |text: &[Vec<u8>], line: &Vec<u8>| text.iter().filter(|other| *other == line).count();
    since.iter().all(|op| {
        before[op.new_range()].iter().all(|line| count(&after, line) >= count(&before, line))
            && last[op.old_range()].iter().all(|line| count(&after, line) <= count(&before, line))
    })
}

/// Whether `change`'s new content keeps what changed in the file since vsh
/// last saw it ([`keeps_in_place`]), where the store still holds what it
/// saw (content a commit left, in a blob or in that commit's artifact: a
/// run's reads are not kept) and each version is at most
/// [`KEPT_CHECK_BYTES`].
fn keeps_the_change(
    change: &UnseenChange,
    entries: &[DiffEntry],
    vfs: &mut VirtualFs,
    (workspace, records): (&vsh_host::CapDir, &Records),
) -> bool {
    if change.removed || change.made {
        return false;
    }
    let Some(last) = change.last.and_then(|last| last.content) else { return false };
    let Ok(at) = entries.binary_search_by(|entry| entry.path.cmp(&change.path)) else { return false };
    let Some(before) = entries[at].before.filter(|before| before.size <= KEPT_CHECK_BYTES) else { return false };
    let Ok(Some(vsh_vfs::ContentSource::Bytes(after))) = vfs.content_source(&change.path) else { return false };
    if after.len() as u64 > KEPT_CHECK_BYTES {
        return false;
    }
    // The store's blob, else the bytes the commit that left it carried.
    let seen = records.blobs().get(last, KEPT_CHECK_BYTES).ok().or_else(|| {
        let artifact = records.load_bound(change.last?.committed_by?).ok()?;
        artifact.contents.get(&last).map(|bytes| bytes.to_vec())
    });
    let Some(seen) = seen.filter(|seen| BlobId::of(seen) == last) else { return false };
    let Some(held) = vsh_vfs::live_content_if_unchanged(workspace, &change.path, &before) else { return false };
    keeps_in_place(&seen, &held, &after)
}

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
    read: &BTreeSet<VPath>,
    entries: &[DiffEntry],
    (seen, session): (&SeenContents, Option<&str>),
    workspace: &vsh_host::CapDir,
    unreadable: &vsh_vfs::PathRule,
) -> Vec<UnseenChange> {
    // A file removed with its content put elsewhere (a move, a rename)
    // drops nothing (ux70 F4).
    let moved_away: BTreeSet<&VPath> = moves(entries).into_values().collect();
    entries
        .iter()
        .filter(|entry| matches!(entry.kind, DiffKind::Modify | DiffKind::Delete))
        .filter_map(|entry| {
            let before = entry.before.filter(|before| before.kind == NodeKind::File)?;
            if read.contains(&entry.path) {
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
            } || moved_away.contains(&entry.path);
            (!known).then(|| UnseenChange {
                path: entry.path.clone(),
                removed: entry.kind == DiffKind::Delete,
                made: false,
                by_commands: false,
                last: Some(last),
            })
        })
        .chain(made_again(entries, seen))
        .collect()
}

/// The files `entries` make where any run last saw one that is gone:
/// removed since outside vsh (a commit's removal is seen), and a run that
/// writes it whole from an earlier read undoes that removal unseen (ux71
/// M1).
fn made_again<'a>(entries: &'a [DiffEntry], seen: &'a SeenContents) -> impl Iterator<Item = UnseenChange> + 'a {
    entries.iter().filter(|entry| entry.kind == DiffKind::Create).filter_map(move |entry| {
        entry.after.filter(|after| after.kind == NodeKind::File)?;
        let last = seen.get(&entry.path)?;
        last.content.is_some().then(|| UnseenChange {
            path: entry.path.clone(),
            removed: false,
            made: true,
            by_commands: false,
            last: Some(last),
        })
    })
}

/// The files `entries` replace or remove whose content the run never read
/// (`shown`), each as an [`UnseenChange`] that vsh's record could not
/// judge (it did not verify).
fn unread_replacements(read: &BTreeSet<VPath>, entries: &[DiffEntry]) -> Vec<UnseenChange> {
    entries
        .iter()
        .filter(|entry| matches!(entry.kind, DiffKind::Modify | DiffKind::Delete))
        .filter(|entry| entry.before.is_some_and(|before| before.kind == NodeKind::File))
        .filter(|entry| !read.contains(&entry.path))
        .map(|entry| UnseenChange {
            path: entry.path.clone(),
            removed: entry.kind == DiffKind::Delete,
            made: false,
            by_commands: false,
            last: None,
        })
        .collect()
}

/// What a run or a commit adds to the workspace's record of what vsh saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Noted {
    /// What a run's program read at a path.
    Seen(VPath, Sighting),
    /// Content the session's own work wrote at a path, where it wrote from
    /// what it knew (a file it made, or read): content the session saw
    /// there, no sighting of what is there.
    Wrote(VPath, BlobId),
    /// What a commit left at a path (`sighting`), over what it found there
    /// (`over`, when its diff knows it): any run's newest sighting, when
    /// the commit was `reviewed`, made the path, or found what was last
    /// seen there; a commit of work that changed a file unseen (an append,
    /// judged no loss) would otherwise make the change it kept count as
    /// seen (sec75 F2). Never a session's.
    Left { path: VPath, sighting: Sighting, over: Option<BlobId>, trusted: bool },
    /// A commit moved a file from one path to another (its content removed
    /// at `from`, made at `to`): what was last seen at `from` is what was
    /// last seen at `to`, and `from` is gone (`removed`). A reviewer of a
    /// move sees no content, so its commit makes none seen (ux72 H: an
    /// approved rename made a change it carried count as seen).
    Moved { from: VPath, to: VPath, removed: Sighting },
}

impl Noted {
    /// Put it in `seen`, as `session`'s too where there is one; whether
    /// that changed anything.
    pub(crate) fn apply(&self, seen: &mut SeenContents, session: Option<&str>) -> bool {
        match self {
            Self::Seen(path, sighting) => seen.insert_for(session, path, *sighting),
            Self::Wrote(path, content) => session.is_some_and(|session| seen.know(session, path, content)),
            Self::Left { path, sighting, over, trusted } => {
                let follows = *trusted || seen.get(path).is_none_or(|last| over.is_some() && last.content == *over);
                follows && seen.insert(path, *sighting)
            }
            Self::Moved { from, to, removed } => {
                let carried = seen.get(from);
                let mut changed = seen.insert(from, *removed);
                if let Some(carried) = carried {
                    changed |= seen.insert(to, carried);
                }
                changed
            }
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
fn noted_of_run(
    shown: Vec<VPath>,
    reads: &ReadSet,
    entries: &[DiffEntry],
    (read, losses): (&BTreeSet<VPath>, &[vsh_policy::ContentLoss]),
) -> Vec<Noted> {
    let seen = shown.into_iter().filter_map(|path| {
        let content = reads.entries.get(&path)?.content?;
        Some(Noted::Seen(path, Sighting { content: Some(content), committed_by: None }))
    });
    // Written from what it knew: a file it made, one it read, or one it
    // wrote whole, keeping nothing of what it held (sec75 F2: a blind
    // append's result holds a change it never saw).
    let whole = |entry: &DiffEntry| {
        entry.before.is_some_and(|before| {
            losses.binary_search_by(|loss| loss.path.cmp(&entry.path)).is_ok_and(|at| losses[at].lost >= before.size)
        })
    };
    let wrote = entries
        .iter()
        .filter(|entry| entry.before.is_none() || read.contains(&entry.path) || whole(entry))
        .take(NOTED_PER_RUN)
        .filter_map(|entry| {
            let after = entry.after.filter(|after| after.kind == NodeKind::File)?;
            Some(Noted::Wrote(entry.path.clone(), after.content?))
        });
    seen.chain(wrote).collect()
}

/// The moves in `entries`: each file written with the content of a file
/// removed (known by its digest), by the path it went to, from the path it
/// left; each removed file goes to one path at most.
fn moves(entries: &[DiffEntry]) -> std::collections::BTreeMap<&VPath, &VPath> {
    let mut removed: std::collections::BTreeMap<BlobId, &VPath> = entries
        .iter()
        .filter(|entry| entry.kind == DiffKind::Delete)
        .filter_map(|entry| Some((entry.before.filter(|before| before.kind == NodeKind::File)?.content?, &entry.path)))
        .collect();
    let mut moved = std::collections::BTreeMap::new();
    for entry in entries.iter().filter(|entry| matches!(entry.kind, DiffKind::Create | DiffKind::Modify)) {
        if let Some(content) = entry.after.filter(|after| after.kind == NodeKind::File).and_then(|after| after.content)
            && let Some(from) = removed.remove(&content)
        {
            moved.insert(&entry.path, from);
        }
    }
    moved
}

/// What the commit of `transaction`, which changed `entries`, left: each
/// file's content where its diff knows it, and each path it removed.
pub(crate) fn noted_of_commit(entries: &[DiffEntry], transaction: TransactionId, reviewed: bool) -> Vec<Noted> {
    let moved = moves(entries);
    let gone = Sighting { content: None, committed_by: Some(transaction) };
    let carried =
        moved.iter().map(|(to, from)| Noted::Moved { from: (*from).clone(), to: (*to).clone(), removed: gone });
    let sources: BTreeSet<&VPath> = moved.values().copied().collect();
    let rest: Vec<Noted> = entries
        .iter()
        .filter(|entry| !moved.contains_key(&entry.path) && !sources.contains(&entry.path))
        .filter_map(move |entry| {
            let content = match entry.after {
                None => None,
                Some(after) if after.kind == NodeKind::File => Some(after.content?),
                Some(_) => return None,
            };
            Some(Noted::Left {
                path: entry.path.clone(),
                sighting: Sighting { content, committed_by: Some(transaction) },
                over: entry.before.and_then(|before| before.content),
                trusted: reviewed || entry.before.is_none(),
            })
        })
        .collect();
    carried.chain(rest).collect()
}

/// How a run is judged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judging {
    /// Write what the run saw to the store now (a runtime whose previews
    /// are durable), else keep it in the process until its next commit.
    pub(crate) write: bool,
    /// The run is a revert, which checks its paths for itself.
    pub(crate) revert: bool,
    /// The run's reads are its program's: a Monty program's, not a Bash
    /// script's nor a real command's, whose reads (a `grep -q`, a test
    /// suite, `: < f`) show the program nothing it could write back from
    /// (sec76 H1, H2, M1).
    pub(crate) program_reads: bool,
}

/// The files the run read: its Monty program's own reads (never a real
/// command's, `vsh_exec` or `vsh exec`, nor a Bash script's: a search or a
/// test run reads files it shows nobody, and reading them cannot tell a
/// stale rewrite from an edit in place: sec75 F1, sec76 H1).
fn read_by_run(vfs: &VirtualFs, judging: Judging) -> BTreeSet<VPath> {
    if judging.program_reads { vfs.seen_contents().clone() } else { BTreeSet::new() }
}

/// The files `entries` change whose new content is an edit in place's (a
/// patch's, [`VirtualFs::edited_in_place`]): it kept all it did not
/// replace, so it drops no one's change, though it read none of the file.
fn edited_in_place(vfs: &VirtualFs, entries: &[DiffEntry]) -> BTreeSet<VPath> {
    entries
        .iter()
        .filter(|entry| {
            let edited = vfs.edited_in_place().get(&entry.path);
            edited.is_some() && entry.after.and_then(|after| after.content).as_ref() == edited
        })
        .map(|entry| entry.path.clone())
        .collect()
}

/// Whether `change` keeps every byte the file held, in front (an append),
/// as `vfs` holds its new bytes and `workspace` its old: no loss of anyone's.
fn appends(change: &UnseenChange, entries: &[DiffEntry], vfs: &mut VirtualFs, workspace: &vsh_host::CapDir) -> bool {
    if change.removed {
        return false;
    }
    let Ok(at) = entries.binary_search_by(|entry| entry.path.cmp(&change.path)) else { return false };
    let Some(before) = entries[at].before else { return false };
    match vfs.content_source(&change.path) {
        Ok(Some(vsh_vfs::ContentSource::Bytes(bytes))) => {
            crate::losses::appends_to(workspace, &change.path, &before, &bytes)
        }
        _ => false,
    }
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
    judging: Judging,
) -> Vec<UnseenChange> {
    let read = read_by_run(vfs, judging);
    let shown = read.iter().take(NOTED_PER_RUN).cloned().collect();
    let mut noted = noted_of_run(shown, vfs.read_set(), entries, (&read, losses));
    // Not judged as replaced unread, nor known for it: an edit in place.
    let program_read = read.clone();
    let edited = edited_in_place(vfs, entries);
    // A session's edit in place of content it knew is content it knows.
    let known_edits = records.session().is_some() && !edited.is_empty();
    let mut read = read;
    read.extend(edited);
    // What only a session keeps, without one is nothing to note.
    noted.retain(|noted| records.session().is_some() || matches!(noted, Noted::Seen(..)));
    // A revert puts back what a commit replaced, where the workspace holds
    // what it left (checked before): its own judgment (ux70 F5).
    let candidates = if judging.revert { Vec::new() } else { unread_replacements(&read, entries) };
    let creates = !judging.revert && entries.iter().any(|entry| entry.kind == DiffKind::Create);
    // Nothing to judge and nothing to note (most runs): the record is not read.
    if noted.is_empty() && candidates.is_empty() && !creates && !known_edits {
        return Vec::new();
    }
    let (seen, corrupt) = records.seen_contents_verified();
    let workspace = std::sync::Arc::clone(vfs.host());
    let mut unseen = if candidates.is_empty() && !creates {
        Vec::new()
    } else if corrupt {
        // What vsh saw cannot be told: every file replaced unread waits
        // (sec74 F3: a damaged record let them all through).
        candidates
    } else {
        at_run(&read, entries, (&seen, records.session()), &workspace, unreadable)
    };
    // A change that keeps every byte the file held, in front (an append),
    // drops nothing of anyone's (a line put back where one was deleted
    // does: sec75 F3).
    unseen.retain(|change| !appends(change, entries, vfs, &workspace));
    // Nor does one that keeps, in place, what changed since (ux81 M5).
    unseen.retain(|change| !keeps_the_change(change, entries, vfs, (&workspace, records)));
    for change in &mut unseen {
        change.by_commands = !judging.program_reads;
    }
    // Content the session knew, written over blind, is written from what it knew.
    if let Some(session) = records.session() {
        for entry in entries.iter().filter(|entry| !program_read.contains(&entry.path)) {
            let (Some(before), Some(after)) = (entry.before, entry.after) else { continue };
            if let (Some(was), Some(now)) = (before.content, after.content)
                && after.kind == NodeKind::File
                && seen.knows(session, &entry.path, &was)
            {
                noted.push(Noted::Wrote(entry.path.clone(), now));
            }
        }
    }
    if judging.write {
        keep_what_was_read(&noted, &workspace, records);
    }
    records.note_sightings(seen, noted, judging.write);
    unseen
}

/// The most files a run's reads keep the bytes of ([`keep_what_was_read`]).
const KEPT_READS_PER_RUN: usize = 16;

/// The largest file whose read bytes are kept.
const KEPT_READ_BYTES: u64 = 256 << 10;

/// Keep in the store the bytes of what the run's program read (at most
/// [`KEPT_READS_PER_RUN`] files of at most [`KEPT_READ_BYTES`], where the
/// workspace still holds them), so that a later run's rewrite of one
/// changed since can be judged by what it keeps ([`keeps_the_change`];
/// ux82 M4: a rerun's `sed -i` after a hand edit waited, the file last
/// seen by a run's read, whose bytes nothing kept). Best effort and not
/// made durable: a blob lost is a file judged as before.
fn keep_what_was_read(noted: &[Noted], workspace: &vsh_host::CapDir, records: &Records) {
    let read = noted.iter().filter_map(|noted| match noted {
        Noted::Seen(path, Sighting { content: Some(content), committed_by: None }) => Some((path, *content)),
        _ => None,
    });
    for (path, content) in read.take(KEPT_READS_PER_RUN) {
        if records.blobs().contains(content).unwrap_or(true) {
            continue;
        }
        let Ok(file) = workspace.read_file(path, KEPT_READ_BYTES) else { continue };
        if BlobId::of(&file.bytes) == content {
            let _ = records.blobs().put_expected_deferred(&file.bytes, content);
        }
    }
}

/// What a reviewer is told of `changes`, as [`crate::Warning::UnseenChanges`].
pub(crate) fn note(changes: &[UnseenChange]) -> Option<crate::Warning> {
    let total = changes.len();
    let files = changes.iter().take(LISTED).map(UnseenChange::line).collect();
    (total > 0).then_some(crate::Warning::UnseenChanges { files, total })
}

#[cfg(test)]
mod tests {
    use super::keeps_in_place;

    const LAST: &str = "import os\n\ndef add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n";

    /// `LAST` with a hand edit: a function added at the end.
    fn edited() -> String {
        format!("{LAST}def div(a,b):\n    return a/b\n")
    }

    #[test]
    fn a_change_elsewhere_keeps_the_edit_in_place() {
        // A formatter's: a blank line added between functions, the edit untouched.
        let formatted = edited().replacen("\ndef add", "\n\ndef add", 1);
        assert!(keeps_in_place(LAST.as_bytes(), edited().as_bytes(), formatted.as_bytes()));
        // A line added one line away from the edit leaves it as it was.
        let near = edited().replacen("\ndef mul", "\n# near\ndef mul", 1);
        assert!(keeps_in_place(LAST.as_bytes(), edited().as_bytes(), near.as_bytes()));
    }

    #[test]
    fn a_change_at_the_edge_of_the_edit_is_not_kept() {
        // sec90 M1: a line added before another, moved past it: both lines
        // are there, the edit's effect is gone.
        let last = "setup\nrm -rf /data\n";
        let guarded = "setup\nexit 1\nrm -rf /data\n";
        assert!(!keeps_in_place(last.as_bytes(), guarded.as_bytes(), b"setup\nrm -rf /data\nexit 1\n"));
        // A line that is not blank, added at its edge, may change what it means.
        assert!(!keeps_in_place(last.as_bytes(), guarded.as_bytes(), b"setup\nexit 1\n\"\"\"\nrm -rf /data\n"));
        let after_it = format!("{}# end\n", edited());
        assert!(!keeps_in_place(LAST.as_bytes(), edited().as_bytes(), after_it.as_bytes()));
        // Nor are blank lines harmless at its edges (sec91 M1): one before a
        // shebang's flag, or inside a `\` continuation, undoes it.
        assert!(!keeps_in_place(last.as_bytes(), guarded.as_bytes(), b"setup\n\nexit 1\n\nrm -rf /data\n"));
        assert!(!keeps_in_place(b"#!/bin/sh\nrun\n", b"#!/bin/sh -e\nrun\n", b"\n#!/bin/sh -e\nrun\n"));
        assert!(!keeps_in_place(b"a\nb\n", b"a\nx\ny\nb\n", b"a\nx\n\ny\nb\n"));
    }

    #[test]
    fn a_rewrite_from_what_was_seen_drops_the_edit() {
        // Written whole from what was seen, with a change of its own.
        let stale = LAST.replace("a * b", "b * a");
        assert!(!keeps_in_place(LAST.as_bytes(), edited().as_bytes(), stale.as_bytes()));
        // The edit's own lines rewritten (a formatter's of the edit) is not kept either.
        let reformatted = edited().replace("def div(a,b):", "def div(a, b):");
        assert!(!keeps_in_place(LAST.as_bytes(), edited().as_bytes(), reformatted.as_bytes()));
        // Nothing changed since: nothing to keep, nothing said to be kept.
        assert!(!keeps_in_place(LAST.as_bytes(), LAST.as_bytes(), LAST.as_bytes()));
    }

    #[test]
    fn a_removal_put_back_is_not_kept() {
        // Removed by hand since; the run puts the line back where it was.
        let removed = LAST.replace("import os\n", "");
        assert!(!keeps_in_place(LAST.as_bytes(), removed.as_bytes(), LAST.as_bytes()));
        // Or elsewhere: one more of that line than the file held.
        let elsewhere = format!("{removed}import os\n");
        assert!(!keeps_in_place(LAST.as_bytes(), removed.as_bytes(), elsewhere.as_bytes()));
    }

    #[test]
    fn a_line_added_beside_its_twin_and_dropped_is_not_kept() {
        // The twin line an edit script can line up either way: counted.
        let last = "a\nx\nb\n";
        let twice = "a\nx\nx\nb\n";
        assert!(!keeps_in_place(last.as_bytes(), twice.as_bytes(), last.as_bytes()));
        assert!(!keeps_in_place(last.as_bytes(), twice.as_bytes(), "a\nx\nb\nc\n".as_bytes()));
        // Which of the twins the run changed cannot be told: not kept.
        assert!(!keeps_in_place(b"x\n", b"x\nx\n", b"y\nx\n"));
    }

    #[test]
    fn an_edit_reordered_or_touched_beside_a_removal_is_not_kept() {
        // The added lines reordered: every line is there, not as written.
        assert!(!keeps_in_place(b"a\nb\n", b"a\np\nq\nb\n", b"a\nq\np\nb\n"));
        // A change right beside lines removed since may be them, changed.
        assert!(!keeps_in_place(b"a\nb\nc\n", b"a\nc\n", b"a\nC\n"));
        // Away from the removal, it is kept.
        assert!(keeps_in_place(b"a\nb\nc\nd\ne\n", b"a\nc\nd\ne\n", b"a\nc\nd\nE\n"));
    }
}
