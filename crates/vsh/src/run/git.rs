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
/// in git's format (one of [`GIT_SECTIONS`]), a git hook by its name
/// ([`HOOKS`]) anywhere, or any file holding git configuration that starts
/// a program ([`PROGRAM_KEYS`]). What cannot be looked at
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
        if after.kind == NodeKind::File {
            let name = entry.path.file_name().unwrap_or_default();
            if name.eq_ignore_ascii_case("config") && in_gits_format(vfs, &entry.path, after.size)? {
                return Ok(true);
            }
            // A hook wherever it is (a `core.hooksPath` can name any
            // directory, a `hooks` symlink lead anywhere), and git's
            // configuration under any name (an `include.path` can name any
            // file, a `config` symlink lead anywhere).
            if HOOKS.contains(&name) || starts_programs(vfs, &entry.path, after.size)? {
                return Ok(true);
            }
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

/// The hooks git runs on a developer's own commands (a commit, a
/// checkout, a merge, a push, a rebase), by their file names.
const HOOKS: [&str; 19] = [
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "post-rewrite",
    "pre-auto-gc",
    "fsmonitor-watchman",
    "post-index-change",
    "reference-transaction",
    "push-to-checkout",
    "sendemail-validate",
];

/// The keys of a git configuration that make git run a program, write
/// where they say, or read more configuration, as `section.key` in lower
/// case (a subsection between them does not matter). Every key of a
/// `pager` section and an `alias` whose value starts with `!` do too.
const PROGRAM_KEYS: [&str; 38] = [
    "core.pager",
    "core.editor",
    "core.fsmonitor",
    "core.sshcommand",
    "core.hookspath",
    "core.askpass",
    "core.gitproxy",
    "core.alternaterefscommand",
    "include.path",
    "includeif.path",
    "filter.clean",
    "filter.smudge",
    "filter.process",
    "diff.textconv",
    "diff.command",
    "diff.external",
    "merge.driver",
    "credential.helper",
    "gpg.program",
    "sequence.editor",
    "difftool.cmd",
    "difftool.path",
    "mergetool.cmd",
    "mergetool.path",
    "uploadpack.packobjectshook",
    "remote.uploadpack",
    "remote.receivepack",
    "trailer.command",
    "trailer.cmd",
    "browser.cmd",
    "man.cmd",
    "tar.command",
    "guitool.cmd",
    "hook.command",
    "trace2.eventtarget",
    "trace2.normaltarget",
    "trace2.perftarget",
    "init.templatedir",
];

/// The most bytes of any other written file read to tell whether it holds
/// git configuration that starts programs; a larger one is not looked at
/// (git reads a configuration of any size: see docs/guarantees.md).
const MAX_SCANNED_BYTES: u64 = 16 << 20;

/// Whether the file at `path` (of `size` bytes), whatever its name, holds
/// git configuration that starts a program ([`PROGRAM_KEYS`]), read as git
/// reads it: `[section]`, `[section "sub"]` or `[section.sub]` headers (also
/// in the middle of a line), `key = value` lines, `#` and `;` comments.
fn starts_programs(vfs: &mut VirtualFs, path: &VPath, size: u64) -> Result<bool, VshError> {
    if size > MAX_SCANNED_BYTES {
        return Ok(false);
    }
    let bytes = vfs.read(path)?;
    // Most files hold no header at all: nothing to parse.
    if !bytes.contains(&b'[') {
        return Ok(false);
    }
    let text = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
    let mut section = String::new();
    for line in text.lines() {
        let mut rest = line.trim_start_matches('\u{feff}');
        // Headers, each possibly followed by a key on the same line.
        while let Some(open) = rest.trim_start().strip_prefix('[') {
            let Some(close) = open.find(']') else { break };
            let header = open[..close].trim();
            let name: String = header.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            section = name;
            rest = &open[close + 1..];
        }
        let rest = rest.trim_start();
        if rest.starts_with(['#', ';']) || section.is_empty() {
            continue;
        }
        let key: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        if key.is_empty() {
            continue;
        }
        let value = rest[key.len()..].trim_start().strip_prefix('=').map(str::trim_start);
        let dangerous = section == "pager"
            || (section == "alias" && value.is_some_and(|value| value.trim_start_matches('"').starts_with('!')))
            || PROGRAM_KEYS.contains(&format!("{section}.{key}").as_str());
        if dangerous {
            return Ok(true);
        }
    }
    Ok(false)
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
