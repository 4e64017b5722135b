//! Lowering a validated diff to host operations in an order that is always
//! valid to apply.
//!
//! 1. **Grants**: mode changes of existing directories to modes that keep the
//!    owner's write and search bits, shallowest first, so later steps can
//!    change entries inside them.
//! 2. **Removals**, deepest first: deleted paths, and existing nodes whose kind
//!    changes to or from a directory.
//! 3. **Creations**, shallowest first: new directories (made with the owner's
//!    write and search bits at least), staged files and symlinks renamed into
//!    place (a file or symlink replacing a file or symlink is one atomic
//!    rename), and mode changes of files.
//! 4. **Restrictions**, deepest first: the final modes of directories that
//!    lack the owner's write or search bit, so their children could still be
//!    created before.

use vsh_types::{DiffEntry, DiffKind, NodeKind, NodeState, VPath};

/// Owner write and search bits: what creating or removing entries needs.
const OWNER_WRITE_SEARCH: u32 = 0o300;

/// One host operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Set the mode of an existing or new directory.
    SetDirMode { path: VPath, mode: u32 },
    /// Remove a node (`directory`: an empty directory, else a file or symlink).
    Remove { path: VPath, directory: bool },
    /// Create a directory.
    CreateDir { path: VPath, mode: u32 },
    /// Rename staged slot `slot` to `path`, replacing a file or symlink there.
    Install { path: VPath, slot: usize },
    /// Set the mode of an existing file.
    SetFileMode { path: VPath, mode: u32 },
}

impl Op {
    pub(crate) fn path(&self) -> &VPath {
        match self {
            Self::SetDirMode { path, .. }
            | Self::Remove { path, .. }
            | Self::CreateDir { path, .. }
            | Self::Install { path, .. }
            | Self::SetFileMode { path, .. } => path,
        }
    }

    /// Whether the operation adds or removes a name in the parent directory.
    pub(crate) fn changes_parent(&self) -> bool {
        matches!(self, Self::Remove { .. } | Self::CreateDir { .. } | Self::Install { .. })
    }
}

/// A file or symlink to stage before applying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Staged {
    /// Where it will be installed.
    pub(crate) path: VPath,
    /// Its final state (kind File or Symlink, with content).
    pub(crate) state: NodeState,
}

/// The operations of one diff, in application order, and what to stage.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) ops: Vec<Op>,
    /// Indexed by slot.
    pub(crate) staged: Vec<Staged>,
}

/// Lower a validated diff (sorted by path).
pub(crate) fn lower(diff: &[DiffEntry]) -> Plan {
    let mut plan = Plan::default();
    let mut grants = Vec::new();
    let mut removals = Vec::new();
    let mut creations = Vec::new();
    let mut restrictions = Vec::new();
    for entry in diff {
        let path = &entry.path;
        let is_dir = |state: &NodeState| state.kind == NodeKind::Directory;
        if let Some(before) = &entry.before {
            let removed = match &entry.after {
                None => true,
                Some(after) => before.kind != after.kind && (is_dir(before) || is_dir(after)),
            };
            if removed {
                removals.push(Op::Remove { path: path.clone(), directory: is_dir(before) });
            }
        }
        let Some(after) = entry.after else { continue };
        match after.kind {
            NodeKind::Directory if entry.before.as_ref().is_some_and(is_dir) => {
                let op = Op::SetDirMode { path: path.clone(), mode: after.mode };
                if after.mode & OWNER_WRITE_SEARCH == OWNER_WRITE_SEARCH {
                    grants.push(op);
                } else {
                    restrictions.push(op);
                }
            }
            NodeKind::Directory => {
                let workable = after.mode | OWNER_WRITE_SEARCH;
                creations.push(Op::CreateDir { path: path.clone(), mode: workable });
                if workable != after.mode {
                    restrictions.push(Op::SetDirMode { path: path.clone(), mode: after.mode });
                }
            }
            NodeKind::File if entry.kind == DiffKind::MetadataChange => {
                creations.push(Op::SetFileMode { path: path.clone(), mode: after.mode });
            }
            NodeKind::File | NodeKind::Symlink => {
                let slot = plan.staged.len();
                plan.staged.push(Staged { path: path.clone(), state: after });
                creations.push(Op::Install { path: path.clone(), slot });
            }
        }
    }
    plan.ops.extend(grants);
    plan.ops.extend(removals.into_iter().rev());
    plan.ops.extend(creations);
    plan.ops.extend(restrictions.into_iter().rev());
    plan
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
    fn order_is_grants_removals_deepest_first_creations_then_restrictions() {
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
        ];
        let plan = lower(&diff);
        assert_eq!(
            plan.ops,
            vec![
                Op::SetDirMode { path: p("a"), mode: 0o755 },
                Op::Remove { path: p("k"), directory: false },
                Op::Remove { path: p("a/old/f"), directory: false },
                Op::Remove { path: p("a/old"), directory: true },
                Op::CreateDir { path: p("k"), mode: 0o700 },
                Op::Install { path: p("k/inner"), slot: 0 },
                Op::Install { path: p("l"), slot: 1 },
                Op::SetFileMode { path: p("m"), mode: 0o600 },
                Op::SetDirMode { path: p("k"), mode: 0o500 },
            ]
        );
        assert_eq!(plan.staged.len(), 2);
        assert_eq!(plan.staged[1].state, link);
    }
}
