//! An operator's restore of a transaction recovery left [`crate::Unresolved`]:
//! the workspace is put back in its before state, and whatever someone else
//! put in the way is moved aside into `<runtime dir>/recovered/<transaction
//! hex>/<path>`, never overwritten and never deleted.
//!
//! Entry by entry, deepest path first, for every entry with a left operation:
//!
//! | the entry | restore |
//! |---|---|
//! | its old node is still at `quarantine.<i>` | move the node at the path aside (if any), then move the old node back |
//! | `quarantine.<i>` holds a node that is not the old one (a writer racing the commit swapped the path between its check and the move, sec69 F1) | move that node aside; the path keeps what it holds, and unless that is the before state, the path is listed as not put back |
//! | it did not exist before | move the node at the path aside (if any) |
//! | only its mode was changed | set the before mode |
//! | it was restored, but someone changed it since (a state mismatch) | nothing can be put back: listed as changed by others |
//! | the node at its path changed after the rollback settled (its ctime is later than the settled record's mtime: a commit since landed there) | the path is left as it is, listed as changed by others; its old node, if kept, is moved aside |
//!
//! Each step is one rename or chmod, and each is decided from the disk, so a
//! crash during a restore is finished by running it again. When every entry
//! is done, the ledger moves `RecoveryRequired` → Failed and the commit
//! directory is removed (no old node is aside by then). A crash during
//! that cleanup is finished by the next restore or the next recovery, which
//! both read Failed with a settled record as "restored, not yet cleaned".
//!
//! The operator's other resolution, keep ([`crate::CommitSession::keep`]),
//! puts nothing back: every path is left as it is, the node each quarantine
//! holds is moved aside the same way, and the record ends Failed, saying so
//! ([`RestoreReport::kept`]). A restore after an interrupted keep finds the
//! quarantined nodes aside already and puts nothing back either.

use std::collections::BTreeMap;

use vsh_host::{HostError, HostKind};
use vsh_types::{TransactionId, TransactionState, VPath};

use crate::Committer;
use crate::error::CommitError;
use crate::fault::{FaultInjector, FaultPoint};
use crate::format::{Action, Journal, LeftReason, Plan, RecordKind};
use crate::ledger::CommitLedger;
use crate::recover::{RecoveryConflictReason, Resolver, check, internal, observe};
use crate::txndir::{Cleanup, Read, TxnDir};

/// What [`crate::CommitSession::restore`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The transaction (now Failed: the workspace holds its before state).
    pub transaction: Option<TransactionId>,
    /// Old nodes moved back to their paths.
    pub restored: Vec<VPath>,
    /// Nodes someone else had put in the way: (their path, where they are now),
    /// both relative to the workspace.
    pub moved_aside: Vec<(VPath, VPath)>,
    /// Paths whose before state could not be put back because someone
    /// changed them after the rollback restored them; left as they are.
    pub changed_by_others: Vec<VPath>,
    /// Paths whose before node vsh never held: a writer racing the commit
    /// put another node there between its check and its move, so the move
    /// took theirs (moved aside now, listed in `moved_aside`), and the path
    /// does not hold the before state; left as they are.
    pub never_held: Vec<VPath>,
    /// Nothing of the transaction was kept to restore from: its record was
    /// still Committing (or `RecoveryRequired`) without a directory, so its
    /// log lost how the commit ended. Its record is now Failed, as the
    /// operator asked, and nothing was put back: the workspace is as the
    /// commit left it.
    pub nothing_kept: bool,
    /// The operator kept the workspace as recovery found it
    /// ([`crate::CommitSession::keep`]): nothing was put back; the nodes
    /// the commit had taken from its paths (their before nodes, or a racing
    /// writer's) are in `moved_aside`, the paths in `left_as_found`.
    pub kept: bool,
    /// With `kept`: every path the commit left unresolved, as it is now.
    pub left_as_found: Vec<VPath>,
}

/// What every entry's restore needs besides the entry: where nodes go
/// aside, the inode each quarantine's journaled intent names, and the
/// entries whose path held, when the restore began, a node changed after
/// the rollback settled.
#[derive(Clone, Copy)]
struct EntryContext<'a> {
    aside: &'a VPath,
    moved: &'a dyn Fn(usize) -> Option<u64>,
    later: &'a std::collections::BTreeSet<u32>,
}

/// Why a restore refused.
fn refused(transaction: TransactionId, reason: &'static str) -> CommitError {
    CommitError::Restore { transaction, reason }
}

impl Committer {
    /// The directory under `recovered/` for what is moved aside for `transaction`.
    pub(crate) fn aside_root(&self, transaction: TransactionId) -> VPath {
        self.runtime_dir
            .child("recovered")
            .and_then(|dir| dir.child(&transaction.to_hex()))
            .expect("valid constant names")
    }

    /// An operator's resolution of an unresolved transaction: restore the
    /// before state, or (`keep`) keep every path as it is, moving only the
    /// nodes the commit had taken aside into `recovered/` (never deleting
    /// them). Either ends the record Failed and removes the commit's
    /// directory; each step is decided from the disk, so an interrupted
    /// resolution is finished by running it again.
    pub(crate) fn restore_locked(
        &self,
        transaction: TransactionId,
        ledger: &dyn CommitLedger,
        faults: &dyn FaultInjector,
        keep: bool,
    ) -> Result<RestoreReport, CommitError> {
        let txn = TxnDir::new(&self.txn_root(), transaction);
        let mut report = RestoreReport { transaction: Some(transaction), kept: keep, ..RestoreReport::default() };
        let state = ledger.state(transaction).map_err(|source| CommitError::Ledger {
            transaction,
            step: "read the state",
            source,
        })?;
        let exists = match self.workspace.lstat(&txn.root) {
            Ok(stat) => stat.is_some(),
            Err(source) => return Err(CommitError::Host { op: "restore", path: txn.root, source }),
        };
        if !exists {
            // Nothing was kept: the operator has checked the workspace by hand.
            return match state {
                Some(TransactionState::Committing | TransactionState::RecoveryRequired) => {
                    ledger.failed(transaction).map_err(|source| CommitError::Ledger {
                        transaction,
                        step: "failed",
                        source,
                    })?;
                    report.nothing_kept = true;
                    Ok(report)
                }
                Some(TransactionState::Committed) => Err(refused(
                    transaction,
                    "it committed whole, and nothing of it is waiting for an operator (to undo its changes: vsh \
                     revert, new work that puts back what it replaced)",
                )),
                _ => Err(refused(
                    transaction,
                    "nothing of this transaction is waiting for an operator (it was resolved already, or never left unresolved)",
                )),
            };
        }
        // A directory an earlier version left is read in this layout; one
        // whose nodes could not be moved is never cleaned up around them.
        txn.migrate_earlier_layout(&self.workspace, &self.key, transaction)
            .map_err(CommitError::host("restore", &txn.root))?;
        let resolver = Resolver { committer: self, ledger, faults, transaction, txn: &txn, parents: None };
        for earlier in txn.earlier_layout() {
            let found = self.workspace.lstat(&earlier).map_err(CommitError::host("restore", &earlier))?;
            if let Some(stat) = found {
                let reason = RecoveryConflictReason::UnexpectedEntry { kind: Some(stat.kind) };
                return Err(CommitError::RecoveryPending { conflicts: vec![resolver.conflict(&earlier, reason)] });
            }
        }
        if state == Some(TransactionState::Failed) {
            // A restore that recorded Failed and was interrupted in its cleanup:
            // every entry is back; finish the cleanup.
            txn.clean(&self.workspace, Cleanup::Restored, faults)?;
            return Ok(report);
        }
        let found = resolver.read().map_err(|conflict| CommitError::RecoveryPending { conflicts: vec![conflict] })?;
        let Some(settled) = found.settled else {
            return Err(refused(transaction, "its rollback has not settled: run recovery first"));
        };
        let Read::Valid((plan, _)) = &found.plan else {
            return Err(refused(transaction, "its plan is missing or corrupt"));
        };
        if state != Some(TransactionState::RecoveryRequired) && state.is_some() {
            return Err(refused(transaction, "its record is not waiting for recovery"));
        }
        // Every entry with a left operation, deepest path first.
        let mut entries: BTreeMap<u32, Vec<(usize, LeftReason)>> = BTreeMap::new();
        for left in &settled.left {
            let index = left.operation as usize;
            let operation = plan
                .operations
                .get(index)
                .ok_or_else(|| refused(transaction, "a left operation is not in the plan"))?;
            entries.entry(operation.entry).or_default().push((index, left.reason));
        }
        let mut order: Vec<u32> = entries.keys().copied().collect();
        order.sort_by(|a, b| plan.entries[*b as usize].path.cmp(&plan.entries[*a as usize].path));
        let aside = self.aside_root(transaction);
        // What each quarantine moved, by the journal: the old node's inode.
        let witnesses = found.journal.as_ref().map(|journal| crate::recover::intents(journal, plan.operations.len()).1);
        let moved = |index: usize| witnesses.as_ref().and_then(|all| all.get(index)).map(|(ino, _)| *ino);
        let later = self.changed_since_settled(&txn, plan, &order)?;
        let context = EntryContext { aside: &aside, moved: &moved, later: &later };
        for entry_index in order {
            if keep {
                self.keep_entry(&txn, plan, entry_index, &entries[&entry_index], &aside, &mut report)?;
            } else {
                self.restore_entry(&txn, plan, entry_index, &entries[&entry_index], &context, &mut report)?;
            }
            check(faults, FaultPoint::Restored(entry_index))?;
        }
        // The renames must be durable before the record says the before state holds.
        self.workspace.syncfs().map_err(|source| CommitError::Host { op: "syncfs", path: txn.root.clone(), source })?;
        if state.is_some() {
            ledger.failed(transaction).map_err(|source| CommitError::Ledger { transaction, step: "failed", source })?;
        }
        txn.clean(&self.workspace, Cleanup::Restored, faults)?;
        Ok(report)
    }

    /// The entries (of `order`) whose path changed after the rollback
    /// settled: later work (a commit since), never undone by a restore.
    /// Judged before a restore moves anything: moving a node aside changes
    /// its directory's ctime too.
    fn changed_since_settled(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        order: &[u32],
    ) -> Result<std::collections::BTreeSet<u32>, CommitError> {
        let transaction = plan.transaction;
        let settled_at = self
            .workspace
            .lstat(&txn.settled())
            .map_err(CommitError::host("restore", &txn.settled()))?
            .map_or(i128::MAX, |stat| stat.mtime_ns);
        let mut later = std::collections::BTreeSet::new();
        for &entry_index in order {
            let path = &plan.entries[entry_index as usize].path;
            let found = observe(&self.workspace, path).map_err(|reason| restore_error(transaction, path, reason))?;
            // A path found empty whose directory changed since is work since
            // too (a later commit deleted or renamed it, sec71 F1): the
            // directory's ctime says its names changed after the rollback.
            let changed = match found {
                Some(stat) => stat.ctime_ns > settled_at,
                None => path.parent().is_some_and(|parent| {
                    observe(&self.workspace, &parent).ok().flatten().is_some_and(|stat| stat.ctime_ns > settled_at)
                }),
            };
            if changed {
                later.insert(entry_index);
            }
        }
        Ok(later)
    }

    /// Keep one entry with left operations as it is: the node the commit's
    /// quarantine holds for it, if any (its before node, or a racing
    /// writer's), goes aside; the path is not touched.
    fn keep_entry(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        entry_index: u32,
        lefts: &[(usize, LeftReason)],
        aside: &VPath,
        report: &mut RestoreReport,
    ) -> Result<(), CommitError> {
        let entry = &plan.entries[entry_index as usize];
        for (index, _) in lefts {
            if plan.operations[*index].action != Action::Quarantine {
                continue;
            }
            let slot = txn.quarantine_slot(*index);
            let held =
                internal(&self.workspace, &slot).map_err(|reason| restore_error(plan.transaction, &slot, reason))?;
            if held.is_some() {
                let to = self.move_to_aside(aside, &entry.path, &slot)?;
                report.moved_aside.push((entry.path.clone(), to));
            }
        }
        report.left_as_found.push(entry.path.clone());
        Ok(())
    }

    /// Restore one entry with left operations (see the module docs).
    fn restore_entry(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        entry_index: u32,
        lefts: &[(usize, LeftReason)],
        context: &EntryContext<'_>,
        report: &mut RestoreReport,
    ) -> Result<(), CommitError> {
        let EntryContext { aside, moved, later } = *context;
        let transaction = plan.transaction;
        let entry = &plan.entries[entry_index as usize];
        if lefts.iter().all(|(_, reason)| *reason == LeftReason::StateMismatch) {
            report.changed_by_others.push(entry.path.clone());
            return Ok(());
        }
        let quarantine =
            lefts.iter().map(|(index, _)| *index).find(|index| plan.operations[*index].action == Action::Quarantine);
        let kept = match quarantine {
            Some(index) => {
                let slot = txn.quarantine_slot(index);
                internal(&self.workspace, &slot)
                    .map_err(|reason| restore_error(transaction, &slot, reason))?
                    .map(|stat| (slot, stat))
            }
            None => None,
        };
        // The node kept is the old one only if it is the node the intent
        // named, or (no inode known) one that holds the before state.
        let foreign = match (&kept, quarantine) {
            (Some((slot, stat)), Some(index)) => match moved(index).filter(|ino| *ino != 0) {
                Some(ino) => stat.identity.ino != ino,
                None => !crate::apply::holds(&self.view(), slot, entry.before.as_ref(), None)?,
            },
            _ => false,
        };
        if foreign && let Some((slot, _)) = &kept {
            // A racing writer's node, never the before state: moved aside
            // as theirs; what the path holds stays, and is the before state
            // or is listed as not put back.
            let to = self.move_to_aside(aside, &entry.path, slot)?;
            report.moved_aside.push((entry.path.clone(), to));
            if !crate::apply::holds(&self.view(), &entry.path, entry.before.as_ref(), None)? {
                report.never_held.push(entry.path.clone());
            }
            return Ok(());
        }
        let kept = kept.map(|(slot, _)| slot);
        let mode_only = lefts.iter().all(|(index, _)| {
            matches!(plan.operations[*index].action, Action::SetDirMode { .. } | Action::SetFileMode { .. })
        });
        if mode_only {
            if let Some(before) = entry.before {
                self.workspace.set_mode(&entry.path, before.mode).map_err(|source| CommitError::Host {
                    op: "restore mode",
                    path: entry.path.clone(),
                    source,
                })?;
                report.restored.push(entry.path.clone());
            }
            return Ok(());
        }
        if kept.is_none() && entry.before.is_some() {
            // The old node is already back (a restore interrupted after it).
            return Ok(());
        }
        let occupied =
            observe(&self.workspace, &entry.path).map_err(|reason| restore_error(transaction, &entry.path, reason))?;
        if later.contains(&entry_index) && (kept.is_some() || occupied.is_some()) {
            // Changed after the rollback settled: work since (another
            // commit landed there), which a restore of this transaction
            // never undoes (sec70 F2: it put an old version back over two
            // later commits). The old node is kept aside; the path is left.
            if let Some(slot) = &kept {
                let to = self.move_to_aside(aside, &entry.path, slot)?;
                report.moved_aside.push((entry.path.clone(), to));
            }
            report.changed_by_others.push(entry.path.clone());
            return Ok(());
        }
        if occupied.is_some() {
            let to = self.move_aside(aside, &entry.path)?;
            report.moved_aside.push((entry.path.clone(), to));
        }
        if let Some(slot) = kept {
            self.workspace.rename_noreplace(&slot, &entry.path).map_err(|source| CommitError::Host {
                op: "restore",
                path: entry.path.clone(),
                source,
            })?;
            report.restored.push(entry.path.clone());
        }
        Ok(())
    }

    /// Move the node at `path` to `aside/<path>` (with a numeric suffix if
    /// that name is taken), creating the directories on the way.
    fn move_aside(&self, aside: &VPath, path: &VPath) -> Result<VPath, CommitError> {
        self.move_to_aside(aside, path, path)
    }

    /// Move the node at `from` to `aside/<name>` (with a numeric suffix if
    /// that name is taken), creating the directories on the way.
    pub(crate) fn move_to_aside(&self, aside: &VPath, name: &VPath, from: &VPath) -> Result<VPath, CommitError> {
        let path = name;
        let target = aside
            .join(path.as_str())
            .map_err(|_| CommitError::InvalidDiff { path: path.clone(), reason: "path too long to move aside" })?;
        let parent = target.parent().unwrap_or_default();
        self.workspace.open_or_create_subdir(&parent).map_err(|source| CommitError::Host {
            op: "create the aside directory",
            path: parent.clone(),
            source,
        })?;
        let name = target.file_name().unwrap_or("node").to_owned();
        for attempt in 0_u32..1000 {
            let candidate = if attempt == 0 {
                target.clone()
            } else {
                parent.child(&format!("{name}~{attempt}")).map_err(|_| CommitError::InvalidDiff {
                    path: path.clone(),
                    reason: "path too long to move aside",
                })?
            };
            match self.workspace.rename_noreplace(from, &candidate) {
                Ok(()) => return Ok(candidate),
                Err(HostError::AlreadyExists { .. }) => {}
                Err(source) => return Err(CommitError::Host { op: "move aside", path: from.clone(), source }),
            }
        }
        Err(CommitError::InvalidDiff { path: path.clone(), reason: "no free name to move aside to" })
    }
}

fn restore_error(transaction: TransactionId, path: &VPath, reason: crate::RecoveryConflictReason) -> CommitError {
    CommitError::RecoveryPending {
        conflicts: vec![crate::RecoveryConflict { transaction: Some(transaction), path: path.clone(), reason }],
    }
}

impl Committer {
    /// Before a committed transaction's old nodes are deleted: move aside,
    /// into `recovered/<transaction hex>/<path>`, every one that someone
    /// changed after revalidation checked it (a file whose modification time
    /// or size differs from the journaled stamp, a directory whose names
    /// differ from what the diff deleted), so their bytes are never lost.
    /// Returns each such path and where its old node is now.
    pub(crate) fn keep_changed_originals(
        &self,
        txn: &TxnDir,
        plan: &Plan,
        journal: &Journal,
    ) -> Result<Vec<(VPath, VPath)>, CommitError> {
        let stamps: BTreeMap<usize, u64> = journal
            .records
            .iter()
            .filter(|record| record.kind == RecordKind::Intent)
            .map(|record| (record.operation as usize, record.stamp))
            .collect();
        let mut kept = Vec::new();
        for (_, slot) in txn.quarantined(&self.workspace).map_err(CommitError::host("clean up", &txn.root))? {
            let Some(index) = slot.filter(|index| *index < plan.operations.len()) else { continue };
            let entry = &plan.entries[plan.operations[index].entry as usize];
            let slot_path = txn.quarantine_slot(index);
            let Some(stat) = self.workspace.lstat(&slot_path).map_err(CommitError::host("clean up", &slot_path))?
            else {
                continue;
            };
            let changed = if stat.kind == HostKind::Directory {
                let mut found: Vec<Vec<u8>> = self
                    .workspace
                    .list_dir(&slot_path)
                    .map_err(CommitError::host("clean up", &slot_path))?
                    .into_iter()
                    .map(|entry| entry.name)
                    .collect();
                found.sort();
                let mut deleted: Vec<Vec<u8>> = plan
                    .entries
                    .iter()
                    .filter(|other| other.before.is_some() && other.path.parent().as_ref() == Some(&entry.path))
                    .filter_map(|other| other.path.file_name().map(|name| name.as_bytes().to_vec()))
                    .collect();
                deleted.sort();
                found != deleted
            } else {
                stamps.get(&index).is_some_and(|stamp| *stamp != 0 && *stamp != stamp_of(&stat))
            };
            if changed {
                let aside = self.aside_root(plan.transaction);
                let to = self.move_to_aside(&aside, &entry.path, &slot_path)?;
                kept.push((entry.path.clone(), to));
            }
        }
        Ok(kept)
    }
}

fn stamp_of(stat: &vsh_host::HostStat) -> u64 {
    crate::format::stamp(stat.mtime_ns, stat.size)
}
