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

use std::collections::{BTreeMap, BTreeSet};

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
/// ([`HOOKS`]) anywhere or what a hook manager runs ([`runs_at_hooks`]), a
/// file a hook of the workspace's repository runs through a symlink, or
/// any file holding git configuration that starts a program
/// ([`super::gitconfig::starts_programs`]). What cannot be looked at
/// counts as such a write (a reviewer decides), never as a failed run.
pub(crate) fn writes_into_a_git_repository(
    vfs: &mut VirtualFs,
    diff: &CanonicalDiff,
    unreadable: &vsh_vfs::PathRule,
) -> bool {
    judged(vfs, diff, unreadable).unwrap_or(true)
}

fn judged(vfs: &mut VirtualFs, diff: &CanonicalDiff, unreadable: &vsh_vfs::PathRule) -> Result<bool, VshError> {
    let mut repositories: BTreeMap<VPath, bool> = BTreeMap::new();
    let mut hook_targets: Option<BTreeSet<VPath>> = None;
    for entry in diff.entries() {
        let Some(after) = entry.after else { continue };
        if entry.path.components().any(|name| name.eq_ignore_ascii_case(".git")) {
            // `.git` is the protection rules' to refuse.
            continue;
        }
        let name = entry.path.file_name().unwrap_or_default();
        // A hook wherever it is (a `core.hooksPath` can name any directory,
        // a `hooks` symlink lead anywhere), as a file or a symlink (git
        // follows it), and what hook managers run from every hook.
        if matches!(after.kind, NodeKind::File | NodeKind::Symlink)
            && (HOOKS.contains(&name) || runs_at_hooks(&entry.path))
        {
            return Ok(true);
        }
        // A file whose bytes the policy keeps from the program is judged
        // without reading them: as one that may start programs, whatever it
        // holds (sec53: reading them answered whether they parse as git
        // configuration, and in which section they end).
        if after.kind == NodeKind::File && unreadable.holds(&entry.path) {
            return Ok(true);
        }
        if after.kind == NodeKind::File {
            if name.eq_ignore_ascii_case("config") && in_gits_format(vfs, &entry.path, after.size)? {
                return Ok(true);
            }
            // Git's configuration under any name: an `include.path` can
            // name any file, a `config` symlink lead anywhere.
            if starts_programs(vfs, &entry.path, after.size)? {
                return Ok(true);
            }
            // What a hook of the workspace's own repository runs through a symlink.
            let targets = match &hook_targets {
                Some(targets) => targets,
                None => hook_targets.insert(self::hook_targets(vfs)?),
            };
            if targets.contains(&entry.path) {
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

/// The most bytes of any other written file read to tell whether it holds
/// git configuration that starts programs; a larger one is taken as one (a
/// reviewer decides).
const MAX_SCANNED_BYTES: u64 = 256 << 20;

/// Whether `path` is something a hook manager runs (or reads the commands
/// it runs from) at every hook it installed: husky's runner (`.husky/_/`)
/// and its legacy configuration (`.huskyrc*`, `husky.config.js`),
/// pre-commit's `.pre-commit-config.yaml`, lefthook's configuration
/// (`lefthook.yml`, `.lefthook-local.toml`, ... in any of its formats) and
/// script folders (`.lefthook/`, `.lefthook-local/`).
fn runs_at_hooks(path: &VPath) -> bool {
    let name = path.file_name().unwrap_or_default();
    let bare = name.trim_start_matches('.');
    let lefthook_config = (bare.starts_with("lefthook.") || bare.starts_with("lefthook-local."))
        && [".yml", ".yaml", ".toml", ".json", ".jsonc"].iter().any(|format| bare.ends_with(format));
    path.as_str().starts_with(".husky/_/")
        || bare.starts_with("huskyrc")
        || name == "husky.config.js"
        || name == ".pre-commit-config.yaml"
        || lefthook_config
        || path.components().any(|part| part == ".lefthook" || part == ".lefthook-local")
}

/// Whether the file at `path` (of `size` bytes), whatever its name, holds
/// git configuration that starts a program, as git would read it
/// ([`super::gitconfig::starts_programs`]).
fn starts_programs(vfs: &mut VirtualFs, path: &VPath, size: u64) -> Result<bool, VshError> {
    if size > MAX_SCANNED_BYTES {
        return Ok(true);
    }
    let bytes = vfs.read(path)?;
    // Most files hold no header at all: nothing to parse.
    Ok(bytes.contains(&b'[') && super::gitconfig::starts_programs(&bytes))
}

/// The files git runs as hooks of the workspace's own repository through a
/// symlink: each hook-named symlink in `.git/hooks` and in the directory
/// `core.hooksPath` names, resolved within the workspace.
fn hook_targets(vfs: &mut VirtualFs) -> Result<BTreeSet<VPath>, VshError> {
    // A worktree's `.git` is a file naming a directory outside the
    // workspace: it has no hooks here, and nothing below it.
    if vfs.kind(&VPath::parse(".git").expect("a plain name"))? != Some(NodeKind::Directory) {
        return Ok(BTreeSet::new());
    }
    let mut dirs: Vec<VPath> = VPath::parse(".git/hooks").into_iter().collect();
    if let Ok(config) = VPath::parse(".git/config")
        && vfs.kind(&config)? == Some(NodeKind::File)
        && vfs.file_size(&config)? <= MAX_CONFIG_BYTES
        && let Some(settings) = super::gitconfig::parse(&vfs.read(&config)?)
    {
        let named = settings
            .iter()
            .filter(|setting| setting.section == "core" && setting.key == "hookspath")
            .filter_map(|setting| setting.value.as_deref());
        dirs.extend(named.filter_map(|dir| VPath::parse(dir.trim_start_matches("./")).ok()));
    }
    let mut targets = BTreeSet::new();
    for dir in dirs {
        if vfs.kind(&dir)? != Some(NodeKind::Directory) {
            continue;
        }
        for name in vfs.read_dir(&dir)? {
            let Ok(hook) = dir.child(&name) else { continue };
            if !HOOKS.contains(&name.as_str()) || vfs.kind(&hook)? != Some(NodeKind::Symlink) {
                continue;
            }
            let target = String::from_utf8_lossy(&vfs.read_link(&hook)?).into_owned();
            if let Some(resolved) = resolve_within(&dir, &target) {
                targets.insert(resolved);
            }
        }
    }
    Ok(targets)
}

/// `target` (a symlink's, relative to `dir` unless absolute) as a path of
/// the workspace, when it stays within it.
fn resolve_within(dir: &VPath, target: &str) -> Option<VPath> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.components().collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    VPath::parse(&parts.join("/")).ok()
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
