//! The tree walk every `vsh_*` walker shares (depth-first, sorted, hidden
//! paths skipped, every budget charged), and the two walkers: `vsh_glob`,
//! which steps `vsh_policy`'s one glob engine one component at a time and
//! prunes what cannot match, and `vsh_search`.

use monty_types::MontyObject;
use vsh_policy::{MatchState, Pattern};
use vsh_types::{NodeKind, VPath};
use vsh_vfs::VfsError;

use crate::guard::{ContentRead, DirectoryRead, Grant, MetadataRead};
use crate::host::{Fault, OsHost, Target, int, vfs_fault};
use crate::oserror::{self, ELOOP, ENOENT, ENOTDIR};
use crate::path;

/// What a tree walk does with one entry; `S` is what the walker keeps per
/// directory (a glob's match state, or nothing).
pub(super) enum Step<S> {
    /// Go on with the next entry.
    Skip,
    /// Walk into this directory (after its remaining siblings' turn comes
    /// later: the walk is depth-first).
    Descend(S),
    /// End the walk.
    Stop,
}

/// What a walk asks about each entry: the host, the entry's path, name and
/// kind (what its directory's granted listing shows), and the state of its
/// directory.
type OnEntry<'f, 'h, S> = dyn FnMut(&mut OsHost<'h>, &VPath, &str, Option<NodeKind>, &S) -> Result<Step<S>, Fault> + 'f;

/// One directory being walked, through the grant of its listing.
struct Frame<S> {
    dir: Grant<DirectoryRead>,
    view: vsh_vfs::ListingView,
    names: std::sync::Arc<Vec<String>>,
    /// The index of the next name in `names`.
    next: usize,
    state: S,
}

impl<'a> OsHost<'a> {
    /// Walk below the directory `root` depth-first in sorted name order,
    /// skipping hidden paths. `on_entry` decides for each child; the walk
    /// lists each directory it enters (charging the directory-entry budget),
    /// charges one evidence record per child and checks the deadline.
    pub(super) fn walk<S: Clone>(
        &mut self,
        root: Grant<DirectoryRead>,
        guest: &str,
        state: S,
        on_entry: &mut OnEntry<'_, 'a, S>,
    ) -> Result<(), Fault> {
        let fault = |error: VfsError| vfs_fault(error, guest);
        let mut stack: Vec<Frame<S>> = Vec::new();
        let names = self.read_dir_shared(&root).map_err(fault)?;
        let view = self.listing_view(&root).map_err(fault)?;
        self.meter.charge_directory_entries(names.len() as u64)?;
        stack.push(Frame { dir: root, view, names, next: 0, state });
        while let Some(frame) = stack.last_mut() {
            let names = std::sync::Arc::clone(&frame.names);
            let Some(name) = names.get(frame.next) else {
                stack.pop();
                continue;
            };
            frame.next += 1;
            let Ok(child) = frame.dir.path().child(name) else { continue };
            let state = frame.state.clone();
            self.visit(&child)?;
            let frame = stack.last().expect("the frame just read from");
            if self.is_hidden(&frame.dir, &child, guest)? {
                continue;
            }
            let kind = self.listed_kind_in(&frame.view, &child);
            let Some(kind) = self.representable_value(kind, guest)? else { continue };
            match on_entry(self, &child, name, kind, &state)? {
                Step::Skip => {}
                Step::Stop => return Ok(()),
                Step::Descend(next) => {
                    let Ok(listing) = self.authorize::<DirectoryRead>(&child, guest) else { continue };
                    let names = self.read_dir_shared(&listing);
                    let Some(names) = self.representable_value(names, guest)? else { continue };
                    let view = self.listing_view(&listing).map_err(fault)?;
                    self.meter.charge_directory_entries(names.len() as u64)?;
                    stack.push(Frame { dir: listing, view, names, next: 0, state: next });
                }
            }
        }
        Ok(())
    }

    /// Whether a walk goes on with what it found (`result` of looking at a
    /// node): a node the guest cannot be shown (see
    /// [`VfsError::is_unrepresentable`]) is skipped (`None`) and counted; any
    /// other error is the walk's.
    pub(crate) fn representable_value<T>(
        &mut self,
        result: Result<T, VfsError>,
        guest: &str,
    ) -> Result<Option<T>, Fault> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(error) if error.is_unrepresentable() => {
                self.meter.stats.skipped_nodes += 1;
                Ok(None)
            }
            Err(error) => Err(vfs_fault(error, guest)),
        }
    }

    /// The directory a walk starts at: authorized, and required to be one.
    fn walk_root(&mut self, target: &Target<'_>) -> Result<Grant<DirectoryRead>, Fault> {
        let grant = self.authorize::<DirectoryRead>(&target.path, target.guest)?;
        match self.kind(&grant).map_err(|error| vfs_fault(error, target.guest))? {
            Some(NodeKind::Directory) => Ok(grant),
            None => Err(Fault::Guest(oserror::os_error(ENOENT, target.guest))),
            Some(NodeKind::File) => Err(Fault::Guest(oserror::os_error(ENOTDIR, target.guest))),
            Some(NodeKind::Symlink) => Err(Fault::Guest(oserror::os_error(ELOOP, target.guest))),
        }
    }

    /// `vsh_glob`: the matches and whether there were more.
    pub(super) fn glob(
        &mut self,
        target: &Target<'_>,
        pattern: &Pattern,
        max_results: usize,
    ) -> Result<(Vec<MontyObject>, bool), Fault> {
        let listing = self.walk_root(target)?;
        let mut results = Vec::new();
        let mut truncated = false;
        let root = target.path.clone();
        let guest = target.guest;
        self.walk(listing, guest, pattern.start(), &mut |_, child, name, kind, state| {
            let next: MatchState = pattern.step(state, name);
            if next.is_dead() {
                return Ok(Step::Skip);
            }
            if pattern.is_match(&next) {
                if results.len() == max_results {
                    truncated = true;
                    return Ok(Step::Stop);
                }
                let relative = child.relative_to(&root).unwrap_or_default();
                results.push(MontyObject::Path(path::guest_child(guest, relative)));
            }
            if pattern.can_continue(&next) && kind == Some(NodeKind::Directory) {
                return Ok(Step::Descend(next));
            }
            Ok(Step::Skip)
        })?;
        Ok((results, truncated))
    }

    /// `vsh_search`: the hits and whether there were more.
    pub(super) fn search(
        &mut self,
        target: &Target<'_>,
        matcher: &Matcher,
        max_results: usize,
    ) -> Result<(Vec<MontyObject>, bool), Fault> {
        let looked = self.authorize::<MetadataRead>(&target.path, target.guest)?;
        let mut hits = Hits { results: Vec::new(), max_results, truncated: false };
        if self.kind(&looked).map_err(|error| vfs_fault(error, target.guest))? == Some(NodeKind::File) {
            self.search_file(&target.path, target.guest, target.guest, matcher, &mut hits, false)?;
        } else {
            let listing = self.walk_root(target)?;
            {
                let root = target.path.clone();
                let guest = target.guest;
                self.walk(listing, guest, (), &mut |host, child, _name, kind, _state| match kind {
                    Some(NodeKind::Directory) => Ok(Step::Descend(())),
                    Some(NodeKind::File) => {
                        let relative = child.relative_to(&root).unwrap_or_default();
                        let shown = path::guest_child(guest, relative);
                        let go_on = host.search_file(child, &shown, guest, matcher, &mut hits, true)?;
                        Ok(if go_on { Step::Skip } else { Step::Stop })
                    }
                    _ => Ok(Step::Skip),
                })?;
            }
        }
        Ok((hits.results, hits.truncated))
    }

    /// Search one file; `false` once the results are full. Within a walk
    /// (`walking`), a file larger than one read may take (the read-call
    /// bound, 4 MiB by default: a build's binary, a data file) is left out,
    /// as a file that is not UTF-8 text is: one such file must not end a
    /// search of a tree. Named alone, it is read (and the bound says so).
    fn search_file(
        &mut self,
        file: &VPath,
        shown: &str,
        guest: &str,
        matcher: &Matcher,
        hits: &mut Hits,
        walking: bool,
    ) -> Result<bool, Fault> {
        let grant = match self.authorize::<ContentRead>(file, guest) {
            Ok(grant) => grant,
            Err(Fault::Guest(_)) => return Ok(true),
            Err(other) => return Err(other),
        };
        let size = self.file_size(&grant).map_err(|error| vfs_fault(error, guest))?;
        if walking && size > self.meter.limits().max_io_call_bytes {
            return Ok(true);
        }
        self.meter.charge_read_call(size)?;
        // A search shows the program the lines that match, not the file:
        // it is not counted as read (sec74 F2).
        let read = self.read_unshown(&grant);
        let Some(bytes) = self.representable_value(read, guest)? else { return Ok(true) };
        let Ok(text) = std::str::from_utf8(&bytes) else { return Ok(true) };
        for (index, line) in text.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let Some(column) = matcher.find(line) else { continue };
            if hits.results.len() == hits.max_results {
                hits.truncated = true;
                return Ok(false);
            }
            hits.results.push(MontyObject::dict(vec![
                (MontyObject::String("path".to_owned()), MontyObject::String(shown.to_owned())),
                (MontyObject::String("line".to_owned()), int(index + 1)),
                (MontyObject::String("column".to_owned()), int(column)),
                (MontyObject::String("text".to_owned()), MontyObject::String(line.to_owned())),
            ]));
        }
        Ok(true)
    }
}

/// The hits of one search.
struct Hits {
    results: Vec<MontyObject>,
    max_results: usize,
    truncated: bool,
}

/// A literal query, case-sensitive or Unicode-lowercased.
pub(crate) struct Matcher {
    query: String,
    case_sensitive: bool,
}

/// `text` lowercased character by character (so every character maps to its
/// own run of bytes), with the index of the original character of each
/// output byte.
fn lowercase_with_origins(text: &str) -> (String, Vec<usize>) {
    let mut lowered = String::with_capacity(text.len());
    let mut origins = Vec::with_capacity(text.len());
    for (index, character) in text.chars().enumerate() {
        let start = lowered.len();
        lowered.extend(character.to_lowercase());
        origins.resize(origins.len() + (lowered.len() - start), index);
    }
    (lowered, origins)
}

impl Matcher {
    pub(crate) fn new(query: &str, case_sensitive: bool) -> Self {
        let query = if case_sensitive { query.to_owned() } else { lowercase_with_origins(query).0 };
        Self { query, case_sensitive }
    }

    /// The 1-based column (in characters) of the first hit in `line`.
    pub(crate) fn find(&self, line: &str) -> Option<usize> {
        if self.case_sensitive {
            line.find(&self.query).map(|offset| line[..offset].chars().count() + 1)
        } else {
            let (lowered, origins) = lowercase_with_origins(line);
            lowered.find(&self.query).map(|offset| origins[offset] + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool;

    #[test]
    fn case_insensitive_columns_map_back_to_the_original_line() {
        let matcher = Matcher::new("STRASSE", false);
        assert_eq!(matcher.find("in der Straße, strasse"), Some(16));
        let matcher = Matcher::new("i̇x", false);
        assert_eq!(matcher.find("aİX"), Some(2), "İ lowercases to two characters");
        assert_eq!(Matcher::new("b", true).find("ébc"), Some(2));
        assert_eq!(Matcher::new("B", true).find("ébc"), None);
    }

    #[test]
    fn a_walk_checks_the_request_deadline_at_every_path() {
        use std::sync::Arc;
        use std::time::{Duration, Instant};

        use vsh_policy::CallPolicy;
        use vsh_vfs::{SnapshotLimits, VirtualFs};

        use crate::limits::{ExecutionLimits, LimitKind};

        let parent = tempfile::tempdir().unwrap();
        std::fs::write(parent.path().join("a.txt"), b"a").unwrap();
        let dir = Arc::new(vsh_host::CapDir::open(parent.path()).unwrap());
        let mut vfs = VirtualFs::new(dir, vec![], SnapshotLimits::default());
        let policy = CallPolicy::balanced_default(None);
        let limits = ExecutionLimits { max_request_duration: Duration::from_millis(1), ..ExecutionLimits::default() };
        let long_ago = Instant::now().checked_sub(Duration::from_secs(1)).unwrap();
        let mut host = OsHost::new(&mut vfs, &policy, &limits, long_ago);
        // The dispatcher would refuse the call outright; called directly, the
        // walk itself must notice.
        match host.call_tool(Tool::Glob, vec![MontyObject::String("**/*".to_owned())], Vec::new()) {
            Err(Fault::Limit(limit)) => assert_eq!(limit.limit, LimitKind::RequestDuration),
            other => panic!("expected the deadline, got {other:?}"),
        }
    }
}
