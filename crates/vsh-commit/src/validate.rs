//! Static checks of a diff before anything is observed or written.
//!
//! A diff that passes describes a set of changes that can be applied in the
//! order `crate::plan` lowers it to, provided the live workspace matches every
//! before state (which revalidation checks under the lock).

use std::collections::BTreeMap;

use vsh_types::{DiffEntry, NodeKind, NodeState, VPath};

use crate::error::CommitError;

/// Check `diff` against the rules in the crate docs; the first violation is
/// [`CommitError::InvalidDiff`]. The entries' order is held by
/// [`vsh_types::CanonicalDiff`], which every caller's diff is.
pub(crate) fn validate(diff: &[DiffEntry], excluded: &[VPath]) -> Result<(), CommitError> {
    let invalid = |path: &VPath, reason: &'static str| CommitError::InvalidDiff { path: path.clone(), reason };
    let by_path: BTreeMap<&VPath, &DiffEntry> = diff.iter().map(|entry| (&entry.path, entry)).collect();
    for entry in diff {
        let path = &entry.path;
        if path.is_root() {
            return Err(invalid(path, "the workspace root cannot change"));
        }
        if excluded.iter().any(|excluded| path.is_within(excluded)) {
            return Err(invalid(path, "path is within vsh's runtime or data directory"));
        }
        if excluded.iter().any(|excluded| excluded.is_strictly_within(path))
            && entry.after.is_none_or(|after| after.kind != NodeKind::Directory)
        {
            return Err(invalid(path, "would remove an ancestor of vsh's runtime or data directory"));
        }
        match DiffEntry::between(path.clone(), entry.before, entry.after) {
            Some(classified) if classified.kind == entry.kind => {}
            Some(_) => return Err(invalid(path, "change kind does not match the before and after states")),
            None => return Err(invalid(path, "entry records no change")),
        }
        for state in [entry.before, entry.after].into_iter().flatten() {
            check_state(&state).map_err(|reason| invalid(path, reason))?;
        }
        if entry.after.is_some_and(|after| after.kind == NodeKind::File && after.mode & 0o6000 != 0) {
            return Err(invalid(path, "a file would be left with its setuid or setgid bit: vsh never writes one"));
        }
        if let Some(parent) = path.parent().and_then(|parent| by_path.get(&parent).copied()) {
            if entry.after.is_some() && parent.after.is_none_or(|after| after.kind != NodeKind::Directory) {
                return Err(invalid(path, "parent is not a directory after the change"));
            }
            if entry.before.is_some() && parent.before.is_none_or(|before| before.kind != NodeKind::Directory) {
                return Err(invalid(path, "parent was not a directory before the change"));
            }
        }
    }
    Ok(())
}

fn check_state(state: &NodeState) -> Result<(), &'static str> {
    state.check()
}

/// Refuse a diff that changes a protected path: one the policy's rules deny
/// mutating, or one in a nested vsh data directory of the live workspace
/// (a directory holding `txlog` and `txlog.lock`).
pub(crate) fn check_protected(
    diff: &[DiffEntry],
    policy: &vsh_policy::CallPolicy,
    view: &crate::live::LiveView<'_>,
) -> Result<(), CommitError> {
    use vsh_policy::AccessKind;
    let mut stores: BTreeMap<VPath, bool> = BTreeMap::new();
    for entry in diff {
        let access = match (entry.before, entry.after) {
            (None, _) => AccessKind::Create,
            (_, None) => AccessKind::Delete,
            _ => AccessKind::Modify,
        };
        if let Err(denied) = policy.authorize(&entry.path, access) {
            return Err(CommitError::Protected { path: entry.path.clone(), rule: denied.rule, label: denied.label });
        }
        // A new node, or one that changes kind (a `txlog` symlink or
        // directory beside a lock, replaced by a file).
        let made = access == AccessKind::Create
            || entry.before.zip(entry.after).is_some_and(|(before, after)| before.kind != after.kind);
        if made && completes_store_magic(diff, view, &entry.path)? {
            return Err(CommitError::Protected {
                path: entry.path.clone(),
                rule: "vsh data directory made by a program (store magic: txlog beside txlog.lock)".to_owned(),
                label: vsh_policy::RuleLabel::RuntimeData,
            });
        }
        let mut dirs = entry.path.ancestors();
        dirs.push(entry.path.clone());
        for dir in dirs.into_iter().filter(|dir| !dir.is_root()) {
            let store = if let Some(store) = stores.get(&dir) {
                *store
            } else {
                let store = view.is_store_dir(&dir)?;
                stores.insert(dir.clone(), store);
                store
            };
            if store {
                return Err(CommitError::Protected {
                    path: entry.path.clone(),
                    rule: format!("vsh data directory at {dir} (store magic)"),
                    label: vsh_policy::RuleLabel::RuntimeData,
                });
            }
        }
    }
    Ok(())
}

/// Whether creating `path` would give its directory (not the root) vsh's
/// store magic after `diff`: a `txlog` beside a `txlog.lock`, the other one
/// made by the diff too or already in the live workspace (and not removed
/// by the diff). Every later run would take the directory for another
/// workspace's trusted state.
fn completes_store_magic(
    diff: &[DiffEntry],
    view: &crate::live::LiveView<'_>,
    path: &VPath,
) -> Result<bool, CommitError> {
    let other = match path.file_name() {
        Some("txlog") => "txlog.lock",
        Some("txlog.lock") => "txlog",
        _ => return Ok(false),
    };
    let Some(parent) = path.parent().filter(|parent| !parent.is_root()) else { return Ok(false) };
    let Ok(sibling) = parent.child(other) else { return Ok(false) };
    if let Some(entry) = diff.iter().find(|entry| entry.path == sibling) {
        return Ok(entry.after.is_some());
    }
    Ok(matches!(view.observe(&sibling)?, crate::live::Live::Present(_)))
}

#[cfg(test)]
mod tests {
    use vsh_types::{BlobId, NodeState};

    use super::check_state;

    #[test]
    fn each_malformed_node_state_is_refused_with_its_reason() {
        let link = NodeState::symlink(b"target");
        let dir = NodeState::directory(0o755);
        let cases = [
            (NodeState { content: None, ..NodeState::file_with(b"f", 0o644) }, "a file state has no content digest"),
            (NodeState { content: None, ..link }, "a symlink state has no content digest"),
            (NodeState { mode: 0o755, ..link }, "a symlink state has a mode other than 0o777"),
            (NodeState { content: Some(BlobId::of(b"x")), ..dir }, "a directory state has content"),
            (NodeState { size: 3, ..dir }, "a directory state has content"),
            (NodeState { mode: 0o10_755, ..dir }, "mode has bits outside 0o7777"),
        ];
        for (state, reason) in cases {
            assert_eq!(check_state(&state), Err(reason), "{state:?}");
        }
        for state in [link, dir, NodeState::file_with(b"f", 0o4755)] {
            assert_eq!(check_state(&state), Ok(()), "{state:?}");
        }
    }
}
