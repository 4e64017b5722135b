//! Lowering a validated diff to the operations of a [`Plan`], in an order that
//! is always valid to apply and to undo in reverse.
//!
//! 1. **Grants**: mode changes of existing directories to modes that keep the
//!    owner's write and search bits, shallowest first, so later steps can
//!    change entries inside them.
//! 2. **Quarantines**, in path order: every existing node the diff deletes,
//!    replaces (content or kind change) or turns into another kind is moved
//!    into the transaction directory (`quarantine.<i>`), never deleted, so a
//!    rollback can move it back. A deleted directory moves with its whole
//!    subtree in one rename; the deletions below it are subsumed.
//! 3. **Creations**, shallowest first: new directories (made with the owner's
//!    write and search bits at least), staged files and symlinks renamed into
//!    place (the name is free: anything there was quarantined), and mode
//!    changes of files.
//! 4. **Restrictions**, deepest first: the final modes of directories that
//!    lack the owner's write or search bit, so their children could still be
//!    created before.

use std::collections::BTreeSet;

use vsh_types::{DiffEntry, DiffKind, NodeKind, NodeState, TransactionId, VPath};

use crate::format::{Action, Operation, Plan};

/// Owner write and search bits: what creating or removing entries needs.
const OWNER_WRITE_SEARCH: u32 = 0o300;

/// Lower a validated diff (sorted by path, at most `u32::MAX` entries).
pub(crate) fn lower(transaction: TransactionId, diff: &[DiffEntry]) -> Plan {
    let mut grants = Vec::new();
    let mut quarantines = Vec::new();
    let mut creations = Vec::new();
    let mut restrictions = Vec::new();
    let mut quarantined_dirs: BTreeSet<&VPath> = BTreeSet::new();
    let is_dir = |state: &NodeState| state.kind == NodeKind::Directory;
    for (index, entry) in diff.iter().enumerate() {
        let entry_index = u32::try_from(index).expect("validated diffs have at most u32::MAX entries");
        let op = |action| Operation { entry: entry_index, action };
        if let Some(before) = &entry.before {
            let replaced = match &entry.after {
                None => true,
                Some(after) => entry.kind == DiffKind::Modify || before.kind != after.kind,
            };
            let subsumed = entry.path.ancestors().iter().any(|ancestor| quarantined_dirs.contains(ancestor));
            if replaced && !subsumed {
                quarantines.push(op(Action::Quarantine));
                if is_dir(before) {
                    quarantined_dirs.insert(&entry.path);
                }
            }
        }
        let Some(after) = &entry.after else { continue };
        match after.kind {
            NodeKind::Directory if entry.before.as_ref().is_some_and(is_dir) => {
                let before = entry.before.expect("checked above").mode;
                let action = Action::SetDirMode { before, after: after.mode };
                if after.mode & OWNER_WRITE_SEARCH == OWNER_WRITE_SEARCH {
                    grants.push(op(action));
                } else {
                    restrictions.push(op(action));
                }
            }
            NodeKind::Directory => {
                let workable = after.mode | OWNER_WRITE_SEARCH;
                creations.push(op(Action::CreateDir { mode: workable }));
                if workable != after.mode {
                    restrictions.push(op(Action::SetDirMode { before: workable, after: after.mode }));
                }
            }
            NodeKind::File if entry.kind == DiffKind::MetadataChange => {
                let before = entry.before.expect("a metadata change has a before state").mode;
                creations.push(op(Action::SetFileMode { before, after: after.mode }));
            }
            NodeKind::File | NodeKind::Symlink => creations.push(op(Action::Install)),
        }
    }
    let mut operations = grants;
    operations.extend(quarantines);
    operations.extend(creations);
    operations.extend(restrictions.into_iter().rev());
    Plan { transaction, entries: diff.to_vec(), operations }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(path: &str) -> VPath {
        VPath::parse(path).unwrap()
    }

    fn entry(path: &str, before: Option<NodeState>, after: Option<NodeState>) -> DiffEntry {
        DiffEntry::between(p(path), before, after).unwrap()
    }

    #[test]
    fn order_is_grants_quarantines_creations_then_restrictions_deepest_first() {
        let file = NodeState::file_with(b"x", 0o644);
        let link = NodeState::symlink(b"target");
        let diff = vec![
            entry("a", Some(NodeState::directory(0o555)), Some(NodeState::directory(0o755))),
            entry("a/old", Some(NodeState::directory(0o755)), None),
            entry("a/old/f", Some(file), None),
            entry("k", Some(file), Some(NodeState::directory(0o500))),
            entry("k/inner", None, Some(file)),
            entry("l", Some(file), Some(link)),
            entry("m", Some(file), Some(NodeState::file_with(b"x", 0o600))),
            entry("n", Some(file), Some(NodeState::file_with(b"y", 0o644))),
            entry("r", Some(NodeState::directory(0o755)), Some(NodeState::directory(0o500))),
        ];
        let plan = lower(TransactionId::digest(b"t"), &diff);
        let ops: Vec<(&str, Action)> =
            plan.operations.iter().map(|op| (diff[op.entry as usize].path.as_str(), op.action)).collect();
        assert_eq!(
            ops,
            vec![
                ("a", Action::SetDirMode { before: 0o555, after: 0o755 }),
                ("a/old", Action::Quarantine),
                ("k", Action::Quarantine),
                ("l", Action::Quarantine),
                ("n", Action::Quarantine),
                ("k", Action::CreateDir { mode: 0o700 }),
                ("k/inner", Action::Install),
                ("l", Action::Install),
                ("m", Action::SetFileMode { before: 0o644, after: 0o600 }),
                ("n", Action::Install),
                ("r", Action::SetDirMode { before: 0o755, after: 0o500 }),
                ("k", Action::SetDirMode { before: 0o700, after: 0o500 }),
            ]
        );
        // The encoding accepts every lowered plan.
        let key = vsh_types::AuthorityKey::unauthenticated();
        assert_eq!(crate::format::Plan::decode(&plan.encode(&key), &key).unwrap().0, plan);
    }
}
