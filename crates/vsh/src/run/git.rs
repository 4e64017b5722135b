//! Whether a diff writes into a git repository outside `.git`: git obeys a
//! repository's `config` (`core.pager`, `core.fsmonitor`, aliases, filters:
//! programs it starts) and runs its hooks when a developer later works
//! there, so such a diff is never auto-approved
//! ([`vsh_policy::RiskFlag::GitRepository`]). Judged on the image after
//! the diff, so a repository planted over two runs, or through a
//! `commondir` that points elsewhere, is caught by the run that completes
//! or writes into it. What the judgment looks at is recorded as the
//! transaction's dependencies (the kind of each name it asks for), so work
//! judged on a base that another commit has since completed into a
//! repository (two runs previewed from one base, each half of one) is
//! stale at its commit, never committed on the old judgment.

use std::collections::BTreeMap;

use vsh_types::{CanonicalDiff, NodeKind, VPath};
use vsh_vfs::VirtualFs;

use crate::VshError;

/// The most bytes of a written `config` read to tell whether it is git's.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The sections of a git configuration that start programs or pull in
/// other configuration (lower case; a subsection follows a space or a dot).
const GIT_SECTIONS: [&str; 32] = [
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
    "interactive",
    "tar",
    "submodule",
    "trailer",
    "browser",
    "web",
    "man",
    "guitool",
    "sendemail",
    "instaweb",
    "gui",
    "hook",
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
                let found = holds_a_repository(vfs, &dir)?;
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

/// Whether `dir` is (or is the common part of) a git repository as git
/// finds one: a `HEAD` with a `config`, a `commondir` or an `objects`
/// directory, or an `objects` and a `refs` directory (the directory a
/// `commondir` names). A symlink counts for any of them (git follows it).
fn holds_a_repository(vfs: &mut VirtualFs, dir: &VPath) -> Result<bool, VshError> {
    let mut is = |name: &str, kind: NodeKind| -> Result<bool, VshError> {
        let Ok(path) = dir.child(name) else { return Ok(false) };
        Ok(matches!(vfs.kind(&path)?, Some(found) if found == kind || found == NodeKind::Symlink))
    };
    let objects = is("objects", NodeKind::Directory)?;
    Ok((is("HEAD", NodeKind::File)? && (is("config", NodeKind::File)? || is("commondir", NodeKind::File)? || objects))
        || objects && is("refs", NodeKind::Directory)?)
}

/// Whether the file at `path` (of `size` bytes) reads as a git
/// configuration: a section header `[section]`, `[section "sub"]` or
/// `[section.sub]` naming one of [`GIT_SECTIONS`], anywhere in it (git takes
/// a header in the middle of a line, and a byte-order mark before it). A
/// file too large to read, or one that cannot be read, is taken as one.
fn in_gits_format(vfs: &mut VirtualFs, path: &VPath, size: u64) -> Result<bool, VshError> {
    if size > MAX_CONFIG_BYTES {
        return Ok(true);
    }
    let bytes = vfs.read(path)?;
    let text = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
    Ok(text.split('[').skip(1).any(|after| {
        let name: String = after.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        GIT_SECTIONS.contains(&name.as_str())
    }))
}
