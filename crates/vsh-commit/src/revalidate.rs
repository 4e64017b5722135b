//! Revalidation: under the commit lock, check every dependency of the read set
//! and every before state of the diff against the live workspace.
//!
//! Each facet a run recorded is compared exactly and nothing else is, so a
//! touched mtime or an unrelated new sibling is not a conflict:
//!
//! | facet | live check |
//! |---|---|
//! | `kind` | `lstat`: kind, or absence |
//! | `size_mode` | `lstat` size and mode (directories: mode only; symlinks: size) |
//! | `content` | streamed BLAKE3 of the file, or of the symlink target |
//! | `names` | sorted child names (runtime directory left out), digested |
//!
//! A path below a symlink or a non-directory is unreachable: a conflict only if
//! the dependency says the path existed. Each diff entry's `before` state must
//! equal the live state exactly (kind, size, mode, content; for a file deleted
//! unread, its stamp: device, inode, mtime and ctime). Beyond those,
//! revalidation checks what applying needs: a directory to be removed holds
//! no child the diff does not remove, and the parent of every created path is
//! a live directory unless the diff creates it.

use std::collections::{BTreeMap, BTreeSet};

use vsh_types::{Dependency, ReadSet};
use vsh_types::{DiffEntry, DiffKind, NodeKind, VPath};

use crate::error::{CommitError, Conflict, ConflictReason};
use vsh_host::HostStat;

use crate::live::{Live, LiveView, node_kind};

/// What revalidation established.
pub(crate) struct Revalidated {
    /// Dependencies plus preconditions checked.
    pub(crate) checked: u64,
    /// The live node of every diff entry with a before state, as checked.
    pub(crate) before: BTreeMap<VPath, HostStat>,
}

/// Check `reads` and the preconditions of `diff`. Returns how many
/// dependencies were checked and the nodes the before states were checked
/// on; any conflict is [`CommitError::Stale`] with at most `max_conflicts`
/// entries listed.
pub(crate) fn revalidate(
    view: &LiveView<'_>,
    diff: &[DiffEntry],
    reads: &ReadSet,
    max_conflicts: usize,
) -> Result<Revalidated, CommitError> {
    let mut before: BTreeMap<VPath, HostStat> = BTreeMap::new();
    let mut conflicts: BTreeMap<VPath, ConflictReason> = BTreeMap::new();
    let changed: BTreeSet<&VPath> = diff.iter().map(|entry| &entry.path).collect();
    // A changed path's dependency and its precondition are checked on one
    // `lstat` (both under the lock): a run that deleted 5,000 files it had
    // looked at costs 5,000 observations here, not 10,000.
    let mut observed: std::collections::HashMap<&VPath, Live> = std::collections::HashMap::new();
    for (path, dependency) in &reads.entries {
        let live = view.observe(path)?;
        if let Some(reason) = check_dependency_on(view, path, dependency, &live)? {
            conflicts.entry(path.clone()).or_insert(reason);
        }
        if changed.contains(path) {
            observed.insert(path, live);
        }
    }
    let mut refusal = None;
    let mut parents_checked: BTreeSet<VPath> = BTreeSet::new();
    for entry in diff {
        let live = match observed.remove(&entry.path) {
            Some(live) => live,
            None => view.observe(&entry.path)?,
        };
        match check_precondition(view, entry, live, &changed)? {
            Precondition::Holds(stat) => {
                if let Some(stat) = stat {
                    before.insert(entry.path.clone(), stat);
                }
            }
            Precondition::Conflict(reason) => {
                conflicts.entry(entry.path.clone()).or_insert(reason);
                continue;
            }
            Precondition::HardLinked(links) => {
                refusal.get_or_insert(CommitError::HardLinked { path: entry.path.clone(), links });
            }
        }
        if let Some(reason) = check_removed_directory(view, entry, &changed)? {
            conflicts.entry(entry.path.clone()).or_insert(reason);
        }
        if entry.before.is_none()
            && let Some(parent) = entry.path.parent()
            && !parent.is_root()
            && !changed.contains(&parent)
            && parents_checked.insert(parent.clone())
            && let Some(reason) = check_parent_directory(view, &parent)?
        {
            conflicts.entry(parent).or_insert(reason);
        }
    }
    if !conflicts.is_empty() {
        let total = conflicts.len();
        let conflicts =
            conflicts.into_iter().take(max_conflicts).map(|(path, reason)| Conflict { path, reason }).collect();
        return Err(CommitError::Stale { conflicts, total });
    }
    if let Some(refusal) = refusal {
        return Err(refusal);
    }
    Ok(Revalidated { checked: (reads.len() + diff.len()) as u64, before })
}

/// Whether the dependency records that the path existed.
fn says_existed(dependency: &Dependency) -> bool {
    matches!(dependency.kind, Some(Some(_)))
        || dependency.size_mode.is_some()
        || dependency.content.is_some()
        || dependency.names.is_some()
}

/// The first facet of `dependency` that no longer holds at `path`.
#[cfg(test)]
fn check_dependency(
    view: &LiveView<'_>,
    path: &VPath,
    dependency: &Dependency,
) -> Result<Option<ConflictReason>, CommitError> {
    check_dependency_on(view, path, dependency, &view.observe(path)?)
}

/// The first facet of `dependency` that does not hold at `path`, which
/// holds `live`.
fn check_dependency_on(
    view: &LiveView<'_>,
    path: &VPath,
    dependency: &Dependency,
    live: &Live,
) -> Result<Option<ConflictReason>, CommitError> {
    let stat = match live {
        Live::Unreachable { .. } => {
            return Ok(says_existed(dependency).then_some(ConflictReason::Unreadable));
        }
        Live::Absent => {
            return Ok(match dependency.kind {
                Some(Some(expected)) => Some(ConflictReason::Kind { expected: Some(expected), actual: None }),
                None if dependency.size_mode.is_some() => Some(ConflictReason::Metadata),
                None if dependency.content.is_some() => Some(ConflictReason::Content),
                None if dependency.names.is_some() => Some(ConflictReason::Listing),
                Some(None) | None => None,
            });
        }
        Live::Present(stat) => stat,
    };
    let Some(kind) = node_kind(stat.kind) else {
        // A FIFO, socket or device: no run can have seen one.
        return Ok(Some(ConflictReason::Unreadable));
    };
    if let Some(expected) = dependency.kind
        && expected != Some(kind)
    {
        return Ok(Some(ConflictReason::Kind { expected, actual: Some(kind) }));
    }
    if let Some((size, mode)) = dependency.size_mode {
        let holds = match kind {
            NodeKind::File => stat.size == size && stat.mode == mode,
            NodeKind::Directory => stat.mode == mode,
            NodeKind::Symlink => stat.size == size,
        };
        if !holds {
            return Ok(Some(ConflictReason::Metadata));
        }
    }
    if let Some(expected) = dependency.content {
        match view.content(path, kind, ConflictReason::Content)? {
            Ok(digest) if digest == expected => {}
            Ok(_) => return Ok(Some(ConflictReason::Content)),
            Err(reason) => return Ok(Some(reason)),
        }
    }
    if let Some(expected) = dependency.names {
        if kind != NodeKind::Directory {
            return Ok(Some(ConflictReason::Listing));
        }
        match view.names(path, ConflictReason::Listing)? {
            Ok(digest) if digest == expected => {}
            Ok(_) => return Ok(Some(ConflictReason::Listing)),
            Err(reason) => return Ok(Some(reason)),
        }
    }
    Ok(None)
}

enum Precondition {
    /// The before state holds (on this node, when there is one).
    Holds(Option<HostStat>),
    Conflict(ConflictReason),
    /// The before state holds, but a mode change would reach other hard links.
    HardLinked(u64),
}

/// Whether the live state at the entry's path (`live`) equals its before state.
fn check_precondition(
    view: &LiveView<'_>,
    entry: &DiffEntry,
    live: Live,
    changed: &BTreeSet<&VPath>,
) -> Result<Precondition, CommitError> {
    let Some(before) = entry.before else {
        return Ok(match live {
            Live::Absent => Precondition::Holds(None),
            // Below a node the diff itself replaces (a file becoming a
            // directory, say): that node's own precondition covers it.
            Live::Unreachable { at } if changed.contains(&at) => Precondition::Holds(None),
            Live::Unreachable { .. } => Precondition::Conflict(ConflictReason::Unreadable),
            Live::Present(_) => Precondition::Conflict(ConflictReason::Precondition),
        });
    };
    let stat = match live {
        Live::Present(stat) => stat,
        Live::Absent => return Ok(Precondition::Conflict(ConflictReason::Precondition)),
        Live::Unreachable { .. } => return Ok(Precondition::Conflict(ConflictReason::Unreadable)),
    };
    match view.matches_state(&entry.path, &stat, &before)? {
        Ok(true) => {}
        Ok(false) => return Ok(Precondition::Conflict(ConflictReason::Precondition)),
        Err(reason) => return Ok(Precondition::Conflict(reason)),
    }
    if entry.kind == DiffKind::MetadataChange && before.kind == NodeKind::File && stat.nlink > 1 {
        return Ok(Precondition::HardLinked(stat.nlink));
    }
    Ok(Precondition::Holds(Some(stat)))
}

/// A directory the diff removes (or turns into a non-directory) must hold no
/// live child that the diff does not remove too.
fn check_removed_directory(
    view: &LiveView<'_>,
    entry: &DiffEntry,
    changed: &BTreeSet<&VPath>,
) -> Result<Option<ConflictReason>, CommitError> {
    let removes_directory = entry.before.is_some_and(|before| before.kind == NodeKind::Directory)
        && entry.after.is_none_or(|after| after.kind != NodeKind::Directory);
    if !removes_directory {
        return Ok(None);
    }
    let children = match view.children(&entry.path, ConflictReason::Listing)? {
        Ok(children) => children,
        Err(reason) => return Ok(Some(reason)),
    };
    // An entry no run could see (or name) would be removed with the directory.
    if children.unlisted > 0 {
        return Ok(Some(ConflictReason::Listing));
    }
    for name in children.names {
        let Ok(child) = entry.path.child(&name) else { return Ok(Some(ConflictReason::Listing)) };
        if !changed.contains(&child) {
            return Ok(Some(ConflictReason::Listing));
        }
    }
    Ok(None)
}

/// The parent of a created path, when the diff does not create it, must be a
/// live directory.
fn check_parent_directory(view: &LiveView<'_>, parent: &VPath) -> Result<Option<ConflictReason>, CommitError> {
    let expected = Some(NodeKind::Directory);
    Ok(match view.observe(parent)? {
        Live::Present(stat) if stat.kind == vsh_host::HostKind::Directory => None,
        Live::Present(stat) => Some(ConflictReason::Kind { expected, actual: node_kind(stat.kind) }),
        Live::Absent => Some(ConflictReason::Kind { expected, actual: None }),
        Live::Unreachable { .. } => Some(ConflictReason::Unreadable),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use vsh_host::CapDir;
    use vsh_types::BlobId;

    use super::*;

    /// A dependency with one facet and no kind, as only a hand-built read set has.
    fn facets() -> [(Dependency, ConflictReason); 3] {
        [
            (Dependency { size_mode: Some((1, 0o644)), ..Dependency::default() }, ConflictReason::Metadata),
            (Dependency { content: Some(BlobId::of(b"x")), ..Dependency::default() }, ConflictReason::Content),
            (Dependency { names: Some([0; 32]), ..Dependency::default() }, ConflictReason::Listing),
        ]
    }

    #[test]
    fn a_dependency_that_says_the_path_existed_conflicts_when_it_is_gone_or_unreachable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"f").unwrap();
        let workspace = Arc::new(CapDir::open(dir.path()).unwrap());
        let view = LiveView::new(&workspace, &[], None);
        let gone = VPath::parse("gone").unwrap();
        let below_a_file = VPath::parse("file/below").unwrap();
        for (dependency, reason) in facets() {
            assert!(says_existed(&dependency), "{dependency:?}");
            assert_eq!(check_dependency(&view, &gone, &dependency).unwrap(), Some(reason), "{dependency:?}");
            assert_eq!(
                check_dependency(&view, &below_a_file, &dependency).unwrap(),
                Some(ConflictReason::Unreadable),
                "{dependency:?}"
            );
        }
        // A dependency on the path's absence still holds where nothing is.
        let absent = Dependency { kind: Some(None), ..Dependency::default() };
        assert!(!says_existed(&absent));
        assert_eq!(check_dependency(&view, &gone, &absent).unwrap(), None);
        assert_eq!(check_dependency(&view, &below_a_file, &absent).unwrap(), None);
        // One that records nothing about the path holds wherever it is.
        assert_eq!(check_dependency(&view, &gone, &Dependency::default()).unwrap(), None);
    }

    /// A file hashed for a dependency is not read again for the
    /// precondition while it is the same version; a new version is.
    #[test]
    fn a_view_hashes_one_version_of_a_file_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"one").unwrap();
        let workspace = Arc::new(CapDir::open(dir.path()).unwrap());
        let view = LiveView::new(&workspace, &[], None);
        let path = VPath::parse("file").unwrap();
        let read = Dependency { content: Some(BlobId::of(b"one")), ..Dependency::default() };
        assert_eq!(check_dependency(&view, &path, &read).unwrap(), None);
        let state = vsh_types::NodeState::file_with(b"one", 0o644);
        let stat = workspace.lstat(&path).unwrap().unwrap();
        let reads = workspace.counters().snapshot().reads;
        assert_eq!(view.matches_state(&path, &stat, &state).unwrap(), Ok(true));
        assert_eq!(workspace.counters().snapshot().reads, reads, "the same version: not read again");
        // Written anew at the same size: another version, read and told apart.
        std::fs::remove_file(dir.path().join("file")).unwrap();
        std::fs::write(dir.path().join("file"), b"two").unwrap();
        let stat = workspace.lstat(&path).unwrap().unwrap();
        assert_eq!(view.matches_state(&path, &stat, &state).unwrap(), Ok(false));
        assert_eq!(workspace.counters().snapshot().reads, reads + 1);
    }
}
