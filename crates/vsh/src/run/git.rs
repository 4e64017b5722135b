//! Whether a diff writes into a git repository outside `.git`: git obeys a
//! repository's `config` (`core.pager`, `core.fsmonitor`, aliases, filters:
//! programs it starts) and runs its hooks when a developer later works
//! there, so such a diff is never auto-approved
//! ([`vsh_policy::RiskFlag::GitRepository`]). Judged on the image after
//! the diff, so a repository planted over two runs, or through a
//! `commondir` that points elsewhere, is caught by the run that completes
//! or writes into it. The judgment peeks at the image (no dependency is
//! recorded for it: the run's read set stays what the program read).

use std::collections::BTreeMap;

use vsh_types::{CanonicalDiff, NodeKind, VPath};
use vsh_vfs::VirtualFs;

use crate::VshError;

/// The most bytes of a written `config` read to tell whether it is git's.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The sections of a git configuration that start programs or pull in
/// other configuration (lower case; a subsection follows a space).
const GIT_SECTIONS: [&str; 20] = [
    "core",
    "alias",
    "include",
    "includeif",
    "filter",
    "diff",
    "merge",
    "credential",
    "sequence",
    "gpg",
    "pager",
    "difftool",
    "mergetool",
    "uploadpack",
    "receive",
    "ssh",
    "http",
    "protocol",
    "url",
    "remote",
];

/// Whether `diff` writes into a git repository outside `.git` in `vfs` (the
/// image after the diff): a path written inside a directory that holds a
/// file `HEAD` and a file `config` or `commondir` or a directory `objects`,
/// or a file named `config`
/// in git's format (one of [`GIT_SECTIONS`]). What cannot be looked at
/// counts as such a write (a reviewer decides), never as a failed run.
pub(crate) fn writes_into_a_git_repository(vfs: &mut VirtualFs, diff: &CanonicalDiff) -> bool {
    judged(vfs, diff).unwrap_or(true)
}

fn judged(vfs: &mut VirtualFs, diff: &CanonicalDiff) -> Result<bool, VshError> {
    let mut repositories: BTreeMap<VPath, bool> = BTreeMap::new();
    for entry in diff.entries() {
        let Some(after) = entry.after else { continue };
        if entry.path.components().any(|name| name.eq_ignore_ascii_case(".git")) {
            // `.git` is the protection rules' to refuse.
            continue;
        }
        if after.kind == NodeKind::File
            && entry.path.file_name().is_some_and(|name| name.eq_ignore_ascii_case("config"))
            && in_gits_format(vfs, &entry.path, after.size)?
        {
            return Ok(true);
        }
        for dir in entry.path.ancestors() {
            let repository = if let Some(known) = repositories.get(&dir) {
                *known
            } else {
                let found = holds_a_repository(vfs, &dir);
                repositories.insert(dir, found);
                found
            };
            if repository {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Whether `dir` holds a file `HEAD` and a file `config` or `commondir` or
/// a directory `objects` (git takes a directory with `HEAD`, `objects` and
/// `refs` for a repository, its `config` optional).
fn holds_a_repository(vfs: &VirtualFs, dir: &VPath) -> bool {
    let is = |name: &str, kind: NodeKind| dir.child(name).is_ok_and(|path| vfs.peek_kind(&path) == Some(kind));
    is("HEAD", NodeKind::File)
        && (is("config", NodeKind::File) || is("commondir", NodeKind::File) || is("objects", NodeKind::Directory))
}

/// Whether the file at `path` (of `size` bytes) reads as a git
/// configuration: a line `[section]` or `[section "sub"]` naming one of
/// [`GIT_SECTIONS`]. A file too large to read is taken as one.
fn in_gits_format(vfs: &mut VirtualFs, path: &VPath, size: u64) -> Result<bool, VshError> {
    if size > MAX_CONFIG_BYTES {
        return Ok(true);
    }
    let bytes = vfs.read(path)?;
    Ok(String::from_utf8_lossy(&bytes).lines().any(|line| {
        let Some(header) = line.trim_start().strip_prefix('[') else { return false };
        let name: String = header
            .chars()
            .take_while(|c| !matches!(c, ']' | ' ' | '\t' | '"' | '.'))
            .collect::<String>()
            .to_ascii_lowercase();
        GIT_SECTIONS.contains(&name.as_str())
    }))
}
