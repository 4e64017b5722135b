//! [`Spares`]: the old versions of files a commit replaced, emptied and
//! kept in `<runtime>/spares/`, so that a later commit stages a new file in
//! one of them instead of creating one (see `vsh_host`'s `make_spare` for
//! why: on an `ext4` without a journal, freeing a thousand inodes makes each
//! of the next thousand creations walk past all of them).
//!
//! - After a commit, its sweeper makes every regular file of the discarded
//!   `quarantine/` that is nobody else's a spare (emptied, mode `0o600`) and
//!   moves it to `spares/<transaction hex>-<operation>`, while this
//!   committer counts fewer than [`MAX_SPARES`]; the rest is removed as
//!   before.
//! - A commit that stages at least [`SPARES_FROM`] files moves spares into
//!   `stage/` (`renameat2(RENAME_NOREPLACE)`: among committers sharing the
//!   directory, one takes each) and fills them there; the checks are made
//!   again, and a spare that fails them is removed and the file created.
//!   Smaller commits create their files: moving a spare changes `spares/`,
//!   whose entry must then be made durable with the staged files, one
//!   barrier more.
//!
//! Nothing reads a spare's bytes. A crash leaves a spare in `spares/`, in a
//! transaction's `stage/` (a staged file like any other) or in `trash/`
//! (garbage), and `spares/` may be removed whole at any time.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use vsh_host::{HostError, HostKind, HostStat, WritableDir};
use vsh_types::VPath;

use crate::txndir::PRIVATE_DIR_MODE;

/// The name of the directory spares wait in, in the runtime directory.
pub(crate) const SPARES_DIR: &str = "spares";

/// The most spares a committer keeps (as it counts them: another process's
/// takes and adds are not seen, so the directory may hold up to this many
/// per process). Each is an empty inode.
pub(crate) const MAX_SPARES: usize = 4096;

/// The fewest staged files for which a commit takes spares.
pub(crate) const SPARES_FROM: usize = 32;

/// A committer's spares: where they are, and how many it counts there.
#[derive(Debug)]
pub(crate) struct Spares {
    /// `<runtime>/spares`.
    root: VPath,
    /// A handle on it, opened (and the directory created) at first use;
    /// `None` when that failed.
    dir: OnceLock<Option<WritableDir>>,
    /// How many spares wait, as this committer counts them (listed once, at
    /// first use, then counted as it adds and takes).
    count: OnceLock<AtomicUsize>,
}

impl Spares {
    pub(crate) fn new(runtime_dir: &VPath) -> Arc<Self> {
        let root = runtime_dir.child(SPARES_DIR).expect("a valid constant name");
        Arc::new(Self { root, dir: OnceLock::new(), count: OnceLock::new() })
    }

    /// `<runtime>/spares`.
    pub(crate) fn root(&self) -> &VPath {
        &self.root
    }

    fn dir(&self, workspace: &WritableDir) -> Option<&WritableDir> {
        self.dir
            .get_or_init(|| match workspace.create_dir(&self.root, PRIVATE_DIR_MODE) {
                Ok(()) | Err(HostError::AlreadyExists { .. }) => {
                    workspace.open_subdir(&self.root).ok().map(|dir| WritableDir::new(Arc::new(dir)))
                }
                Err(_) => None,
            })
            .as_ref()
    }

    fn count(&self, dir: &WritableDir) -> &AtomicUsize {
        self.count.get_or_init(|| AtomicUsize::new(dir.list_dir(&VPath::root()).map_or(0, |entries| entries.len())))
    }

    /// Keep the regular files of a discarded transaction's `quarantine` as
    /// spares named `<prefix>-<name>`, while fewer than [`MAX_SPARES`] are
    /// counted. Best effort: what is not kept stays for the caller to remove.
    pub(crate) fn keep(&self, workspace: &WritableDir, quarantine: &VPath, prefix: &str) {
        let Ok(entries) = workspace.list_dir(quarantine) else { return };
        let mut files =
            entries.into_iter().filter(|entry| matches!(entry.kind, Some(HostKind::File) | None)).peekable();
        if files.peek().is_none() {
            return;
        }
        let Some(dir) = self.dir(workspace) else { return };
        let count = self.count(dir);
        for entry in files {
            if count.load(Ordering::Relaxed) >= MAX_SPARES {
                return;
            }
            let Some(name) = std::str::from_utf8(&entry.name).ok() else { continue };
            let (Ok(path), Ok(spare)) = (quarantine.child(name), VPath::from_component(&format!("{prefix}-{name}")))
            else {
                continue;
            };
            if matches!(workspace.make_spare(&path), Ok(true))
                && workspace.move_noreplace_to(&path, dir, &spare).is_ok()
            {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Up to `wanted` spares for one staging, when it stages at least
    /// [`SPARES_FROM`] files and any are there.
    pub(crate) fn take(&self, workspace: &WritableDir, wanted: usize) -> Option<Taken<'_>> {
        if wanted < SPARES_FROM {
            return None;
        }
        let dir = self.dir(workspace)?;
        let names: Vec<VPath> = dir
            .list_dir(&VPath::root())
            .ok()?
            .into_iter()
            .filter(|entry| matches!(entry.kind, Some(HostKind::File) | None))
            .filter_map(|entry| std::str::from_utf8(&entry.name).ok().and_then(|name| VPath::from_component(name).ok()))
            .take(wanted)
            .collect();
        (!names.is_empty()).then(|| Taken { spares: self, dir, names, moved: AtomicBool::new(false) })
    }
}

/// The spares one staging may use: the `index`th file it stages takes the
/// `index`th ([`Taken::fill`]).
#[derive(Debug)]
pub(crate) struct Taken<'a> {
    spares: &'a Spares,
    dir: &'a WritableDir,
    names: Vec<VPath>,
    /// Whether any spare was moved out of `spares/`: its entry must then be
    /// made durable with the staged files.
    moved: AtomicBool,
}

impl Taken<'_> {
    /// Stage `bytes` with `mode` as `name` in `stage_dir`, in the `index`th
    /// spare: move it there, check and fill it. `None` when there is no such
    /// spare, another committer took it, or it is no longer one (then it is
    /// removed, and the caller creates the file).
    pub(crate) fn fill(
        &self,
        index: usize,
        stage_dir: &WritableDir,
        name: &VPath,
        bytes: &[u8],
        mode: u32,
    ) -> Option<(HostStat, Option<u32>, std::fs::File)> {
        let spare = self.names.get(index)?;
        self.dir.move_noreplace_to(spare, stage_dir, name).ok()?;
        self.moved.store(true, Ordering::Relaxed);
        if let Some(count) = self.spares.count.get() {
            // Saturating: another process's spares are not counted.
            let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |count| count.checked_sub(1));
        }
        if let Ok(Some(filled)) = stage_dir.fill_spare_open(name, bytes, mode) {
            return Some(filled);
        }
        // No longer a spare, or filling it failed: removed, and the caller
        // creates the file. A failed removal leaves the name taken: creating
        // the file there then fails, and the commit with it.
        let _ = stage_dir.remove_file(name);
        None
    }

    /// Whether any spare left `spares/`.
    pub(crate) fn moved(&self) -> bool {
        self.moved.load(Ordering::Relaxed)
    }
}
