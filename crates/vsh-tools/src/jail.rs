//! Path resolution for [`Host`]: `~` expansion, joining to the working
//! directory, lexical `.`/`..`, and, under [`PathPolicy::Jailed`], the kernel
//! check that the result is beneath the root without a symbolic link.
//!
//! The jail check is not a string comparison alone. The lexical path must lie
//! under the root (that is how the workspace-relative [`VPath`] is found), and
//! then the deepest existing ancestor is opened through the root's
//! [`crate::CapDir`] (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or
//! the `O_NOFOLLOW` walk), so a symlink anywhere in the existing part of the
//! path, the leaf included, is refused by the kernel. Components that do not
//! exist yet cannot be links, so a new leaf (or a new subtree) is allowed.
//!
//! Resolution is advisory for what happens later: every file operation resolves
//! again, and the operation itself goes through the same handle, so a directory
//! swapped for a symlink after resolution is refused when the path is used.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use vsh_types::VPath;

use super::{EscapeReason, Host, PathError, PathPolicy, blocking};
use vsh_host::{CapDir, HostError, HostKind, WritableDir};

/// Where a file operation acts: a workspace path beneath a directory handle.
pub(crate) struct Target {
    /// The handle: the workspace root (jailed), or a directory opened by path
    /// with ambient authority (unrestricted).
    pub(crate) dir: TargetDir,
    /// The path beneath `dir`.
    pub(crate) rel: VPath,
    /// The absolute path, for results and messages.
    pub(crate) abs: PathBuf,
}

/// The directory handle of a [`Target`].
pub(crate) enum TargetDir {
    /// The workspace root's handle; symlinks met through it are escapes.
    Jail,
    /// The parent directory of an unrestricted path, opened by path.
    Ambient(WritableDir),
}

impl Host {
    /// Resolve `candidate` (absolute, or relative to `cwd`) to a concrete
    /// absolute path.
    ///
    /// Steps: `~` and `~/…` expand to the configured home (never `$HOME`; with
    /// no home configured, or for `~user`, `~` is an ordinary name); a relative
    /// path is joined to `cwd` (itself joined to the root when relative); `.`
    /// and `..` are resolved lexically (`..` at `/` stays at `/`).
    ///
    /// Under [`PathPolicy::Unrestricted`] that is all. Under
    /// [`PathPolicy::Jailed`] the result must lie under the root (the
    /// canonical root, or the root as it was configured), otherwise
    /// [`PathError::Escape`] with [`EscapeReason::OutsideRoot`]; then the
    /// existing part of the path is opened beneath the root's handle by the
    /// kernel without following links, and a symbolic link in it, the leaf
    /// included, is [`PathError::Escape`] with [`EscapeReason::Symlink`]. A
    /// leaf (or several trailing components) that does not exist yet is
    /// allowed; a regular file used as a directory is left for the operation
    /// to report. The result is under [`Host::workspace_root`].
    pub async fn resolve_in_jail(&self, cwd: &Path, candidate: &Path) -> Result<PathBuf, PathError> {
        let (host, cwd, candidate) = (self.clone(), cwd.to_owned(), candidate.to_owned());
        blocking(move || host.resolve_in_jail_sync(&cwd, &candidate)).await
    }

    /// [`Host::resolve_in_jail`], synchronously.
    pub fn resolve_in_jail_sync(&self, cwd: &Path, candidate: &Path) -> Result<PathBuf, PathError> {
        let abs = self.lexical(cwd, candidate);
        match self.inner.path_policy {
            PathPolicy::Unrestricted => Ok(abs),
            PathPolicy::Jailed => {
                let rel = self.jail(&abs)?;
                Ok(self.under_root(&rel))
            }
        }
    }

    /// The absolute, lexically normalized form of `candidate`.
    pub(crate) fn lexical(&self, cwd: &Path, candidate: &Path) -> PathBuf {
        let expanded = match &self.inner.home {
            Some(home) => expand_tilde(candidate, home),
            None => candidate.to_path_buf(),
        };
        let joined = if expanded.is_absolute() {
            expanded
        } else {
            let base = if cwd.is_absolute() { cwd.to_path_buf() } else { self.inner.root.join(cwd) };
            base.join(expanded)
        };
        normalize(&joined)
    }

    /// The workspace path of the absolute, normalized `abs`, checked beneath
    /// the root by the kernel.
    pub(crate) fn jail(&self, abs: &Path) -> Result<VPath, PathError> {
        let inner = &*self.inner;
        let rest = abs
            .strip_prefix(&inner.root)
            .or_else(|_| abs.strip_prefix(&inner.root_as_given))
            .map_err(|_| PathError::Escape { path: abs.to_path_buf(), reason: EscapeReason::OutsideRoot })?;
        let rel = to_vpath(rest).map_err(|source| PathError::Invalid { path: abs.to_path_buf(), source })?;
        // One lstat through the handle opens the parent beneath the root without
        // following links (a missing ancestor ends the walk first, with nothing
        // after it to follow), then looks at the leaf without following it.
        let kind = match &inner.dir {
            super::Root::Dir(dir) => dir.lstat(&rel).map(|stat| stat.map(|stat| stat.kind)),
            super::Root::Image(image) => image.lstat(&rel).map(|stat| stat.map(|stat| stat.kind)),
        };
        let image = matches!(inner.dir, super::Root::Image(_));
        match kind {
            Ok(Some(HostKind::Symlink)) => Err(self.symlink_escape(abs, &rel)),
            Ok(_) | Err(HostError::NotADirectory { .. }) => Ok(rel),
            // An image's policy refuses the look at a path it hides, which
            // is no denial; the operation itself is then refused, and
            // recorded as the denial it is (an image never follows a link
            // out of itself, whatever the look said).
            Err(refused) if image && refused.errno() == Some(13) => Ok(rel),
            Err(HostError::SymlinkInPath { path }) => Err(self.symlink_escape(abs, &path)),
            Err(source) => Err(PathError::Io { path: abs.to_path_buf(), source }),
        }
    }

    /// The target of a file operation on `candidate`.
    ///
    /// Jailed: the root's handle and the checked workspace path. Unrestricted:
    /// the path with symlinks resolved as far as it exists (a leaf that does
    /// not exist, a dangling symlink included, is kept as it is), split into
    /// its parent, opened by path, and the leaf.
    pub(crate) fn locate(&self, cwd: &Path, candidate: &Path) -> Result<Target, super::FsError> {
        let abs = self.lexical(cwd, candidate);
        match self.inner.path_policy {
            PathPolicy::Jailed => {
                let rel = self.jail(&abs)?;
                Ok(Target { dir: TargetDir::Jail, rel, abs })
            }
            PathPolicy::Unrestricted => ambient_target(abs),
        }
    }

    /// The error for a symlink found at workspace path `at` while resolving `abs`.
    pub(crate) fn symlink_escape(&self, abs: &Path, at: &VPath) -> PathError {
        PathError::Escape { path: abs.to_path_buf(), reason: EscapeReason::Symlink { at: self.under_root(at) } }
    }

    /// The absolute path of a workspace path.
    pub(crate) fn under_root(&self, rel: &VPath) -> PathBuf {
        if rel.is_root() { self.inner.root.clone() } else { self.inner.root.join(rel.as_str()) }
    }
}

/// The unrestricted target of `abs`.
///
/// # Ambient authority
///
/// This opens a directory by path.
fn ambient_target(abs: PathBuf) -> Result<Target, super::FsError> {
    let io = |op, path: &Path, source| super::FsError::Io { op, path: path.to_path_buf(), source };
    let resolved = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
    let (parent, leaf) = match (resolved.parent(), resolved.file_name()) {
        (Some(parent), Some(leaf)) => (parent, Some(leaf)),
        _ => (resolved.as_path(), None),
    };
    let dir = CapDir::open(parent).map_err(|source| io("open", &abs, source))?;
    let rel = match leaf {
        Some(leaf) => leaf_vpath(leaf).map_err(|source| PathError::Invalid { path: abs.clone(), source })?,
        None => VPath::root(),
    };
    Ok(Target { dir: TargetDir::Ambient(WritableDir::new(std::sync::Arc::new(dir))), rel, abs })
}

/// Expand a leading `~` or `~/` to `home`; anything else (`~user`, `a/~`) is
/// returned unchanged.
fn expand_tilde(candidate: &Path, home: &Path) -> PathBuf {
    let bytes = candidate.as_os_str().as_bytes();
    if bytes == b"~" {
        home.to_path_buf()
    } else if let Some(rest) = bytes.strip_prefix(b"~/") {
        home.join(OsStr::from_bytes(rest))
    } else {
        candidate.to_path_buf()
    }
}

/// Resolve `.` and `..` lexically in an absolute path; `..` at `/` stays at `/`.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A normalized relative path (no `.`, `..` or root) as a [`VPath`].
fn to_vpath(rest: &Path) -> Result<VPath, vsh_types::VPathError> {
    if rest.as_os_str().is_empty() {
        return Ok(VPath::root());
    }
    let text = rest.to_str().ok_or(vsh_types::VPathError::NotUtf8)?;
    VPath::parse(text)
}

/// One path component as a [`VPath`].
fn leaf_vpath(leaf: &OsStr) -> Result<VPath, vsh_types::VPathError> {
    VPath::from_component_bytes(leaf.as_bytes())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::{expand_tilde, normalize};

    #[test]
    fn normalize_is_lexical_and_stops_at_the_root() {
        let cases = [
            ("/", "/"),
            ("/a/b/../c", "/a/c"),
            ("/a/./b/", "/a/b"),
            ("/../../etc/passwd", "/etc/passwd"),
            ("/a/b/../../..", "/"),
            ("//a//b", "/a/b"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize(Path::new(input)), PathBuf::from(expected), "{input}");
        }
    }

    #[test]
    fn tilde_expands_only_alone_or_before_a_slash() {
        let home = Path::new("/home/agent");
        assert_eq!(expand_tilde(Path::new("~"), home), PathBuf::from("/home/agent"));
        assert_eq!(expand_tilde(Path::new("~/notes.txt"), home), PathBuf::from("/home/agent/notes.txt"));
        assert_eq!(expand_tilde(Path::new("~user/x"), home), PathBuf::from("~user/x"));
        assert_eq!(expand_tilde(Path::new("a/~"), home), PathBuf::from("a/~"));
        assert_eq!(expand_tilde(Path::new("~~"), home), PathBuf::from("~~"));
    }
}
