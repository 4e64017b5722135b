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

/// Remove everything inside the directory `dir`.
///
/// Files go first, on a few threads when there are many: most of an unlink's
/// cost is freeing the inode's blocks, which happens outside the directory's
/// lock, so unlinks in one directory overlap. Directories (and anything the
/// listing could not classify) are then removed one at a time.
fn empty(dir: &WritableDir) -> Result<(), HostError> {
    let mut files: Vec<VPath> = Vec::new();
    let mut others: Vec<VPath> = Vec::new();
    for (index, entry) in dir.list_dir(&VPath::root())?.into_iter().enumerate() {
        // A name no path can spell (not UTF-8, written there by someone
        // else) is renamed to one first, then removed as any other.
        let name = if let Ok(name) = VPath::from_component_bytes(&entry.name) {
            name
        } else {
            let spelled = VPath::from_component(&format!(".vsh-unspellable-{}-{index}", std::process::id()))
                .expect("a plain component");
            dir.rename_raw_entry(&entry.name, &spelled)?;
            spelled
        };
        match entry.kind {
            Some(HostKind::File | HostKind::Symlink | HostKind::Other) => files.push(name),
            Some(HostKind::Directory) | None => others.push(name),
        }
    }
    // `unlinkat` without `AT_REMOVEDIR` never removes (or enters) a
    // directory, so a stale kind fails safe: that name takes the full walk.
    let unlink = |names: &[VPath]| -> Vec<VPath> {
        names
            .iter()
            .filter(|name| !matches!(dir.remove_file(name), Ok(()) | Err(HostError::NotFound { .. })))
            .cloned()
            .collect()
    };
    let workers = files.len().div_ceil(UNLINKS_PER_WORKER).clamp(1, MAX_UNLINK_WORKERS);
    let failed: Vec<VPath> = if workers == 1 {
        unlink(&files)
    } else {
        let chunk = files.len().div_ceil(workers);
        std::thread::scope(|scope| {
            let handles: Vec<_> = files.chunks(chunk).map(|names| scope.spawn(move || unlink(names))).collect();
            handles.into_iter().flat_map(|handle| handle.join().expect("an unlinking thread panicked")).collect()
        })
    };
    for name in failed.iter().chain(&others) {
        dir.remove_tree(name)?;
    }
    Ok(())
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
}
