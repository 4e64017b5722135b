//! Removing a whole tree through a [`WritableDir`]: the commit's cleanup of
//! its transaction directories and the store's clearing of scratch
//! directories share it.

use std::sync::Arc;

use vsh_types::VPath;

use crate::{HostError, HostKind, WritableDir};

/// The owner bits a directory needs to be listed and emptied.
const OWNER_ACCESS: u32 = 0o700;
/// At most this many threads unlink the files of one directory.
const MAX_UNLINK_WORKERS: usize = 4;
/// A thread is started per this many files (so small directories are emptied inline).
const UNLINKS_PER_WORKER: usize = 64;

impl WritableDir {
    /// Remove `path` and, if it is a directory, everything below it. Symlinks
    /// are removed, never followed; a directory without owner access is
    /// opened up first. A missing `path` is success.
    ///
    /// # Errors
    ///
    /// The first removal that fails. An entry whose name is not a valid path
    /// component (not UTF-8) is renamed to one first, then removed.
    pub fn remove_tree(&self, path: &VPath) -> Result<(), HostError> {
        let Some(stat) = self.lstat(path)? else { return Ok(()) };
        if stat.kind != HostKind::Directory {
            return match self.remove_file(path) {
                Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
                Err(error) => Err(error),
            };
        }
        self.empty_opened_up(path, stat.mode)?;
        match self.remove_dir(path) {
            Ok(()) | Err(HostError::NotFound { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Remove everything inside the directory `path`, which stays (opened up
    /// to its owner first if it was not), as [`WritableDir::remove_tree`]
    /// removes it.
    ///
    /// # Errors
    ///
    /// [`HostError::NotADirectory`] when `path` is not a directory (a
    /// symlink included), [`HostError::NotFound`] when it is absent, and
    /// as [`WritableDir::remove_tree`].
    pub fn empty_dir(&self, path: &VPath) -> Result<(), HostError> {
        match self.lstat(path)? {
            Some(stat) if stat.kind == HostKind::Directory => self.empty_opened_up(path, stat.mode),
            Some(_) => Err(HostError::NotADirectory { path: path.clone() }),
            None => Err(HostError::NotFound { path: path.clone() }),
        }
    }

    fn empty_opened_up(&self, path: &VPath, mode: u32) -> Result<(), HostError> {
        if mode & OWNER_ACCESS != OWNER_ACCESS {
            self.set_mode(path, mode | OWNER_ACCESS)?;
        }
        // Entries are removed by name through a handle on the directory itself
        // (opened without following a symlink), one short resolution each.
        empty(&WritableDir::new(Arc::new(self.open_subdir(path)?)))
    }
}

/// Remove everything inside the directory `dir`, however deep.
///
/// Never recursive, and never more than two directories open: each pass
/// unlinks the files at the top, then empties each directory there of its
/// own files and lifts what else it holds (directories, names no path can
/// spell) up to the top under a fresh name, and removes it. So a tree a
/// command built 30,000 levels deep costs one pass a level, never a stack
/// frame or a descriptor a level, nor a path longer than two names.
///
/// Files are unlinked on a few threads when there are many: most of an
/// unlink's cost is freeing the inode's blocks, which happens outside the
/// directory's lock, so unlinks in one directory overlap.
fn empty(dir: &WritableDir) -> Result<(), HostError> {
    let mut lifted = 0_u64;
    loop {
        let others = unlink_files(dir)?;
        if others.is_empty() {
            return Ok(());
        }
        for raw in others {
            // Under a name a path can spell, at the top (a name that is not
            // UTF-8, someone else's, is lifted to one in place).
            let name = match VPath::from_component_bytes(&raw) {
                Ok(name) => name,
                Err(_) => fresh_name(&mut lifted, |to| dir.rename_raw_entry(&raw, to))?,
            };
            let Some(stat) = dir.lstat(&name)? else { continue };
            if stat.kind != HostKind::Directory {
                match dir.remove_file(&name) {
                    Ok(()) | Err(HostError::NotFound { .. }) => continue,
                    Err(error) => return Err(error),
                }
            }
            if stat.mode & OWNER_ACCESS != OWNER_ACCESS {
                dir.set_mode(&name, stat.mode | OWNER_ACCESS)?;
            }
            let inner = WritableDir::new(Arc::new(dir.open_subdir(&name)?));
            for raw in unlink_files(&inner)? {
                fresh_name(&mut lifted, |to| dir.hoist_entry(&inner, &raw, to))?;
            }
            drop(inner);
            match dir.remove_dir(&name) {
                Ok(()) | Err(HostError::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
    }
}

/// Unlink the files (and symlinks, and what else is not a directory) `dir`
/// holds under names a path can spell; the raw names of what is left: its
/// directories and whatever has a name no path can spell.
fn unlink_files(dir: &WritableDir) -> Result<Vec<Vec<u8>>, HostError> {
    let mut files: Vec<VPath> = Vec::new();
    let mut others: Vec<Vec<u8>> = Vec::new();
    for entry in dir.list_dir(&VPath::root())? {
        match (entry.kind, VPath::from_component_bytes(&entry.name)) {
            (Some(HostKind::File | HostKind::Symlink | HostKind::Other), Ok(name)) => files.push(name),
            _ => others.push(entry.name),
        }
    }
    // `unlinkat` without `AT_REMOVEDIR` never removes (or enters) a
    // directory, so a stale kind fails safe: that name is emptied as one.
    others.extend(unlink_all(dir, &files).into_iter().map(|name| name.as_str().as_bytes().to_vec()));
    Ok(others)
}

/// Unlink each of `names` in `dir`, on a few threads when there are many;
/// the names that could not be unlinked (a directory listed as a file).
fn unlink_all(dir: &WritableDir, names: &[VPath]) -> Vec<VPath> {
    let unlink = |names: &[VPath]| -> Vec<VPath> {
        names
            .iter()
            .filter(|name| !matches!(dir.remove_file(name), Ok(()) | Err(HostError::NotFound { .. })))
            .cloned()
            .collect()
    };
    let workers = names.len().div_ceil(UNLINKS_PER_WORKER).clamp(1, MAX_UNLINK_WORKERS);
    if workers == 1 {
        return unlink(names);
    }
    let chunk = names.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let handles: Vec<_> = names.chunks(chunk).map(|names| scope.spawn(move || unlink(names))).collect();
        handles.into_iter().flat_map(|handle| handle.join().expect("an unlinking thread panicked")).collect()
    })
}

/// Put an entry at a fresh name with `place` (which never replaces
/// anything), trying the next name while one is taken; the name it took.
fn fresh_name(lifted: &mut u64, mut place: impl FnMut(&VPath) -> Result<(), HostError>) -> Result<VPath, HostError> {
    loop {
        let name =
            VPath::from_component(&format!(".vsh-lifted-{}-{lifted}", std::process::id())).expect("a plain component");
        *lifted += 1;
        match place(&name) {
            Ok(()) => return Ok(name),
            Err(HostError::AlreadyExists { .. }) => {}
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn p(path: &str) -> VPath {
        VPath::parse(path).unwrap()
    }

    #[test]
    fn emptying_keeps_the_directory_removes_links_as_links_and_refuses_what_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, b"keep").unwrap();
        std::fs::create_dir_all(root.join("d/sealed")).unwrap();
        std::fs::write(root.join("d/sealed/f"), b"x").unwrap();
        std::fs::set_permissions(root.join("d/sealed"), std::fs::Permissions::from_mode(0o500)).unwrap();
        for index in 0..200 {
            std::fs::write(root.join(format!("d/f{index}")), b"x").unwrap();
        }
        std::os::unix::fs::symlink(&outside, root.join("d/link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("dirlink")).unwrap();
        std::fs::write(root.join("file"), b"x").unwrap();
        let writable = WritableDir::open_or_create_trusted(&root).unwrap();
        writable.empty_dir(&p("d")).unwrap();
        assert!(root.join("d").is_dir());
        assert_eq!(std::fs::read_dir(root.join("d")).unwrap().count(), 0);
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        // A symlink to a directory, or a file, is not emptied; nothing is not either.
        assert!(matches!(writable.empty_dir(&p("dirlink")), Err(HostError::NotADirectory { .. })));
        assert!(matches!(writable.empty_dir(&p("file")), Err(HostError::NotADirectory { .. })));
        assert!(matches!(writable.empty_dir(&p("gone")), Err(HostError::NotFound { .. })));
        assert!(dir.path().join("outside.txt").exists());
        // A tree goes whole; a link goes as a link; a missing path is success.
        writable.remove_tree(&p("d")).unwrap();
        writable.remove_tree(&p("dirlink")).unwrap();
        writable.remove_tree(&p("gone")).unwrap();
        assert!(!root.join("d").exists() && !root.join("dirlink").exists());
        assert!(dir.path().join("outside.txt").exists());
    }

    #[test]
    fn a_name_no_path_can_spell_is_emptied_too() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let unspellable = std::ffi::OsStr::from_bytes(b"bad\xffname");
        std::fs::create_dir_all(root.join("scratch").join(unspellable).join("deeper")).unwrap();
        std::fs::write(root.join("scratch").join(unspellable).join("deeper").join(unspellable), b"x").unwrap();
        std::fs::write(root.join("scratch").join(unspellable).join("f"), b"x").unwrap();
        std::fs::write(root.join("scratch/plain"), b"x").unwrap();
        let writable = WritableDir::open_or_create_trusted(&root).unwrap();
        writable.empty_dir(&p("scratch")).unwrap();
        assert_eq!(std::fs::read_dir(root.join("scratch")).unwrap().count(), 0);
        // Under a name that is one, too.
        std::fs::write(root.join("scratch").join(unspellable), b"x").unwrap();
        writable.remove_tree(&p("scratch")).unwrap();
        assert!(!root.join("scratch").exists());
    }

    /// sec55 F1: a command built a chain of directories thousands deep in
    /// a scratch directory, and emptying it (one stack frame and one open
    /// directory a level) aborted vsh, run after run. It is emptied on a
    /// small stack, a directory without owner access and a name already
    /// taken by what it lifts among it, and nothing outside is touched.
    #[test]
    fn a_tree_thousands_deep_is_emptied_on_a_small_stack() {
        use rustix::fs::{Mode, OFlags, mkdirat, openat};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("scratch")).unwrap();
        std::fs::write(dir.path().join("outside.txt"), b"keep").unwrap();
        // A name the emptying would lift to, taken already.
        std::fs::create_dir(root.join("scratch").join(format!(".vsh-lifted-{}-0", std::process::id()))).unwrap();
        let mut at =
            openat(rustix::fs::CWD, root.join("scratch"), OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
        for level in 0..6_000 {
            mkdirat(&at, "d", Mode::from_raw_mode(0o755)).unwrap();
            if level % 1_000 == 0 {
                let file = openat(&at, "f", OFlags::CREATE | OFlags::WRONLY, Mode::from_raw_mode(0o644)).unwrap();
                drop(file);
                rustix::fs::symlinkat("/", &at, "up").unwrap();
            }
            let next = openat(&at, "d", OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
            if level == 3_000 {
                rustix::fs::chmodat(&at, "d", Mode::from_raw_mode(0o500), rustix::fs::AtFlags::empty()).unwrap();
            }
            at = next;
        }
        drop(at);
        let writable = WritableDir::open_or_create_trusted(&root).unwrap();
        std::thread::Builder::new()
            .stack_size(128 << 10)
            .spawn(move || {
                writable.empty_dir(&p("scratch")).unwrap();
                writable.remove_tree(&p("scratch")).unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(!root.join("scratch").exists());
        assert_eq!(std::fs::read(dir.path().join("outside.txt")).unwrap(), b"keep");
    }
}
