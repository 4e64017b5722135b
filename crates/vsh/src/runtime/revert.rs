//! [`Runtime::revert`]: new work that puts back what a committed transaction
//! replaced, through the same diff, policy, review and commit as any run.

use std::time::Instant;

use vsh_types::{DiffEntry, NodeKind, NodeState, TransactionId, TransactionState};
use vsh_vfs::VirtualFs;

use super::Runtime;
use crate::VshError;
use crate::candidate::{SeedFile, SeedNode};
use crate::evidence::EvidenceOutput;
use crate::receipt::{Receipt, StageTimings, StepKind};
use crate::request::{Language, ReceiptDetail, RunMode, RunRequest};
use crate::run::{Concluding, Executed, elapsed_ns};

/// The most later commits a refused revert names.
const LATER_NAMED: usize = 5;

/// The most later commits a refused revert looks through.
const LATER_SCANNED: usize = 200;

impl Runtime {
    /// New work that reverts committed transaction `transaction`: every
    /// path it changed gets back what it held before (a file its bytes and
    /// mode, a directory, a symlink, or nothing), as one transaction of its
    /// own, decided by the policy, reviewed and committed like any run
    /// (`mode`: [`RunMode::Preview`] keeps it for a review or a commit,
    /// [`RunMode::Auto`] commits it at once when the policy auto-approves
    /// it). Its program is the session transcript of one `revert` step
    /// naming the transaction, and its intent says so.
    ///
    /// It never overwrites what came after: every path must still hold
    /// what the transaction left there (revalidated again at its commit).
    ///
    /// # Errors
    ///
    /// [`VshError::NotRevertible`] for work that is not committed;
    /// [`VshError::RevertChanged`] naming every path the workspace changed
    /// since (nothing is made then); [`VshError::RevertUnavailable`] for a
    /// path whose before content the store no longer holds (a commit keeps
    /// what it replaces up to 1 MiB a file, until
    /// garbage collection removes it) or never read (a file the policy
    /// protects from reading); the run's errors otherwise. The diff's
    /// entries are in path order, so parents are written before what they
    /// hold.
    pub fn revert(&self, transaction: TransactionId, mode: RunMode) -> Result<Receipt, VshError> {
        let started = Instant::now();
        let record = self.sources().record(transaction)?;
        if record.state != TransactionState::Committed {
            return Err(VshError::NotRevertible { transaction, state: record.state });
        }
        self.records.check_policy_current()?;
        // A revert of it waits already: another would do its work twice
        // (ux83 M2: five reverts of one commit waited at once).
        if let Some(revert) = self.waiting_revert_of(transaction)? {
            return Err(VshError::RevertWaiting { transaction, revert });
        }
        let diff = self.records.stored_diff(transaction)?;
        let diffing = Instant::now();
        let mut vfs = self.runs.fresh_image();
        let changed = self.changed_since(&mut vfs, &diff)?;
        if !changed.is_empty() {
            let (later, reverted_by, outside) = self.later_work(&record, &diff, &changed, &mut vfs);
            // A path the policy hides is named by the nearest directory it
            // does not (sec72 F1: a user's secrets put into a directory the
            // agent made were named to the agent).
            let calls = self.runs.policy().calls();
            let mut paths: Vec<vsh_types::VPath> = changed.into_iter().map(|path| visible(calls, path)).collect();
            paths.dedup();
            let total = u32::try_from(paths.len()).unwrap_or(u32::MAX);
            paths.truncate(crate::MAX_LISTED_REVERT_PATHS);
            return Err(VshError::RevertChanged { transaction, paths, total, later, reverted_by, outside });
        }
        // Read once; one that does not verify is its own error (sec71 F3:
        // it read as "no commit kept its bytes").
        let unread = if diff.entries().iter().any(|entry| entry.before.is_some_and(|before| before.content.is_none())) {
            self.records.unread_contents()?
        } else {
            vsh_store::UnreadContents::default()
        };
        let files = diff
            .entries()
            .iter()
            .map(|entry| self.put_back(&mut vfs, transaction, entry, &unread))
            .collect::<Result<Vec<_>, _>>()?;
        let calls = self.runs.policy().calls();
        for file in &files {
            // A refusal the agent may be told of is the policy's own, with
            // its access, rule and remedy (ux79 M4: a bare "refused by the
            // policy", exit 1, kind store); one of a path the policy hides
            // names what the program may see, as below.
            // As the diff will call it (ux80 M2: a rule denying `create`
            // let a revert be made, then denied, where one denying `delete`
            // refused it).
            let access = match (&file.node, vfs.kind(&file.path)?) {
                (None, _) => vsh_policy::AccessKind::Delete,
                (Some(_), None) => vsh_policy::AccessKind::Create,
                (Some(_), Some(_)) => vsh_policy::AccessKind::Modify,
            };
            if let Err(denied) = calls.authorize(&file.path, access)
                && visible(calls, file.path.clone()) == file.path
            {
                return Err(VshError::RevertRefused { transaction, denied: Box::new(denied) });
            }
            crate::candidate::seed::apply(&mut vfs, calls, file).map_err(|reason| VshError::RevertUnavailable {
                transaction,
                path: visible(calls, file.path.clone()),
                reason,
            })?;
        }
        let program = transaction.to_hex();
        let steps = vec![crate::candidate::session_step(
            StepKind::Revert,
            &program,
            EvidenceOutput::Bash { profile: String::new(), exit_code: 0, stdout: Vec::new(), stderr: Vec::new() },
            true,
            false,
        )];
        let transcript = crate::candidate::transcript(&steps);
        let intent = format!("revert {}", transaction.short());
        let request = RunRequest::new(&transcript)
            .with_language(Language::Session)
            .with_intent(&intent)
            .with_mode(mode)
            .with_detail(ReceiptDetail::Full);
        let canonical = vfs.canonical_diff()?;
        let timings = StageTimings { diff: elapsed_ns(diffing), ..StageTimings::default() };
        let outcome =
            Executed::of_output(EvidenceOutput::Session { steps }, vsh_monty::ExecutionStats::default(), Vec::new());
        self.promote(Concluding { request: &request, vfs: &mut vfs, diff: canonical, outcome, timings }, started)
    }

    /// The paths at which the workspace no longer holds what committed
    /// transaction `transaction` left there, each named by the nearest
    /// directory the policy does not hide: what a [`Runtime::revert`] of
    /// it would refuse now ([`VshError::RevertChanged`]); empty when one
    /// could be made. For what to say of a revert gone stale, whose
    /// original can only be reverted again once nothing stands in the way
    /// (ux74 M3: the step named was refused every time).
    ///
    /// # Errors
    ///
    /// [`VshError::NotRevertible`] for work that is not committed; the
    /// store's and the workspace's errors.
    pub fn revert_blocked_at(&self, transaction: TransactionId) -> Result<Vec<vsh_types::VPath>, VshError> {
        let record = self.sources().record(transaction)?;
        if record.state != TransactionState::Committed {
            return Err(VshError::NotRevertible { transaction, state: record.state });
        }
        let diff = self.records.stored_diff(transaction)?;
        let changed = self.changed_since(&mut self.runs.fresh_image(), &diff)?;
        let calls = self.runs.policy().calls();
        let mut paths: Vec<vsh_types::VPath> = changed.into_iter().map(|path| visible(calls, path)).collect();
        paths.dedup();
        Ok(paths)
    }

    /// Whether the workspace holds now, at every path transaction
    /// `transaction` changes (it changes some), what it would leave there,
    /// and everything else it read is as it read it: work gone stale
    /// because its very changes were made since, by other work that made
    /// the same ones or by hand, which a commit can never make and a rerun
    /// would make twice (ux81 M1: an agent's retry, committed, and its
    /// first run's `next` was `vsh rerun`). Work that read something that
    /// changed since (a rerun would compute its changes anew) is not;
    /// neither is work that changes or read a path the policy hides now
    /// (nothing is said of what it holds).
    ///
    /// Checked under the commit lock, so that no commit is seen half
    /// applied (sec90 L2): a review or a listing (`wait` false) never
    /// waits for it, and while a commit holds it the answer is `false`
    /// (nothing is said); a rerun (`wait` true) waits for it as the
    /// runtime's lock wait allows.
    ///
    /// # Errors
    ///
    /// The store's (the work's artifact) and the workspace's errors;
    /// with `wait`, [`vsh_commit::CommitError::LockTimeout`] past the lock
    /// wait (sec89 M1: read as "not held", and the work was done twice).
    pub fn holds_its_changes(&self, transaction: TransactionId, wait: bool) -> Result<bool, VshError> {
        // Under whatever policy made it (work made under one since
        // replaced is what is asked of most).
        let artifact = self.records.load_bound(transaction)?;
        let diff = &artifact.diff;
        let calls = self.runs.policy().calls();
        // Nothing is said of what the policy hides now, changed or read
        // (sec89 L2: whether a file hidden since had changed).
        let hidden = diff.entries().iter().map(|entry| &entry.path).chain(artifact.read_set.entries.keys());
        if diff.entries().is_empty() || hidden.into_iter().any(|path| calls.is_hidden(path)) {
            return Ok(false);
        }
        // What it changes, as it would leave it; what else it read, as it
        // read it: both under the lock.
        let changed: std::collections::BTreeSet<&vsh_types::VPath> =
            diff.entries().iter().map(|entry| &entry.path).collect();
        let mut others = artifact.read_set.clone();
        others.entries.retain(|path, _| !changed.contains(path));
        let check = || -> Result<bool, VshError> {
            let mut vfs = self.runs.fresh_image();
            for entry in diff.entries() {
                if !vfs.base_holds(&entry.path, entry.after.as_ref())? {
                    return Ok(false);
                }
            }
            match self.commits.revalidate_unlocked(
                &self.records,
                transaction,
                (&vsh_types::CanonicalDiff::default(), &others),
            ) {
                Ok(()) => Ok(true),
                Err(VshError::Commit(vsh_commit::CommitError::Stale { .. })) => Ok(false),
                Err(error) => Err(error),
            }
        };
        // Held by a commit, a review or a listing says nothing.
        self.commits.under_lock(&self.records, wait, super::clock_ms(), check)?.unwrap_or(Ok(false))
    }

    /// The paths of `diff` at which `vfs`'s base no longer holds what it
    /// left, or else the names added since under a directory it made (it
    /// holds only what it made, and a name added since would go with it:
    /// sec70 F1, a later file was deleted).
    fn changed_since(
        &self,
        vfs: &mut VirtualFs,
        diff: &vsh_types::CanonicalDiff,
    ) -> Result<Vec<vsh_types::VPath>, VshError> {
        let mut changed = Vec::new();
        for entry in diff.entries() {
            if !vfs.base_holds(&entry.path, entry.after.as_ref())? {
                changed.push(entry.path.clone());
            }
        }
        if changed.is_empty() {
            changed = added_since(vfs, self.runs.policy().calls(), diff)?;
        }
        Ok(changed)
    }

    /// The committed work after `record` (whose diff is `diff`) that changed
    /// any of `paths` (what stands in a revert's way, ux66 F2), oldest
    /// first: at most [`LATER_NAMED`], of the [`LATER_SCANNED`] commits
    /// after it; the one among them that is a revert of `record` itself, if
    /// any; and whether any of `paths` was edited outside vsh: it holds what
    /// none of them left (ux67 F2), or a later work found it other than the
    /// work before it left it (ux68 M1: an edit between two commits, which
    /// reverting the later work, or reverting anything, never clears).
    fn later_work(
        &self,
        record: &vsh_store::TransactionRecord,
        diff: &vsh_types::CanonicalDiff,
        paths: &[vsh_types::VPath],
        vfs: &mut VirtualFs,
    ) -> (Vec<TransactionId>, Option<TransactionId>, bool) {
        let Ok(mut records) = self.records.transactions().list() else { return (Vec::new(), None, true) };
        records.retain(|other| {
            other.state == TransactionState::Committed && other.id != record.id && other.updated_ms >= record.updated_ms
        });
        records.sort_by_key(|other| (other.updated_ms, other.sequence));
        let mut later = Vec::new();
        let mut reverted_by = None;
        let mut outside = false;
        // Each path's state as the newest work left it: the reverted work
        // first (absent, for a name added under a directory it made).
        let mut left: std::collections::BTreeMap<&vsh_types::VPath, Option<NodeState>> = paths
            .iter()
            .map(|path| {
                let entry = diff.entries().binary_search_by(|entry| entry.path.cmp(path)).ok();
                (path, entry.and_then(|at| diff.entries()[at].after))
            })
            .collect();
        for other in records.iter().take(LATER_SCANNED) {
            let Ok(diff) = self.records.stored_diff(other.id) else { continue };
            let mut touched = false;
            for entry in diff.entries() {
                if let Some(path) = paths.iter().find(|path| **path == entry.path) {
                    let before = left.insert(path, entry.after).flatten();
                    outside |= !same_node(before.as_ref(), entry.before.as_ref());
                    touched = true;
                }
            }
            if !touched {
                continue;
            }
            if reverted_by.is_none() && self.reverts(other.id) == Some(record.id) {
                reverted_by = Some(other.id);
            }
            if later.len() < LATER_NAMED {
                later.push(other.id);
            }
        }
        outside |= paths.iter().any(|path| {
            let state = left.get(path).copied().flatten();
            !vfs.base_holds(path, state.as_ref()).unwrap_or(false)
        });
        (later, reverted_by, outside)
    }

    /// The committed revert of `transaction`, if one of the 200 commits
    /// after it is one (ux66 F7: a review of reverted work never said so);
    /// none, reading no other record, while the workspace holds all it left.
    ///
    /// # Errors
    ///
    /// When the transaction records cannot be read.
    pub fn reverted_by(&self, transaction: TransactionId) -> Result<Option<TransactionId>, VshError> {
        let Some(record) = self.records.get(transaction)? else { return Ok(None) };
        if record.state != TransactionState::Committed {
            return Ok(None);
        }
        // While the workspace holds all it left, nothing reverted it: no
        // record is read (a review of committed work is the common case).
        let Ok(diff) = self.records.stored_diff(transaction) else { return Ok(None) };
        let mut vfs = self.runs.fresh_image();
        let mut holds = true;
        for entry in diff.entries() {
            holds &= vfs.base_holds(&entry.path, entry.after.as_ref()).unwrap_or(false);
            if !holds {
                break;
            }
        }
        if holds {
            return Ok(None);
        }
        let mut records = self.records.transactions().list()?;
        records.retain(|other| {
            other.state == TransactionState::Committed
                && other.id != transaction
                && other.updated_ms >= record.updated_ms
        });
        records.sort_by_key(|other| (other.updated_ms, other.sequence));
        Ok(records.iter().take(LATER_SCANNED).map(|other| other.id).find(|id| self.reverts(*id) == Some(transaction)))
    }

    /// The transaction stored work `id` reverts, when it is a revert.
    /// A revert of `transaction` that waits (pending, approved, or an
    /// auto-approved preview), among every waiting record (sec91 L1: the
    /// newest 200 alone let 201 previews hide one). Not atomic with the
    /// revert's own making: two made at the same moment may both wait, and
    /// the second to commit finds the workspace changed under it unless the
    /// workspace holds what it saw.
    fn waiting_revert_of(&self, transaction: TransactionId) -> Result<Option<TransactionId>, VshError> {
        let mut waiting = self.records.pending()?;
        waiting.retain(|record| {
            matches!(
                record.state,
                TransactionState::PendingApproval | TransactionState::Approved | TransactionState::AutoApproved
            )
        });
        waiting.sort_by_key(|record| std::cmp::Reverse((record.created_ms, record.id)));
        Ok(waiting.iter().map(|record| record.id).find(|id| self.reverts(*id) == Some(transaction)))
    }

    fn reverts(&self, id: TransactionId) -> Option<TransactionId> {
        let record = self.records.get(id).ok()??;
        let stored = self.records.stored_receipt(id, record.state).ok()?;
        let crate::ExecutionOutput::Session { steps } = &stored.receipt.output else { return None };
        let step = steps.iter().find(|step| step.kind == StepKind::Revert)?;
        TransactionId::parse_hex(&step.program).ok()
    }

    /// What `entry`'s path held before `transaction`, as a file to write
    /// back: its bytes from the store (those a commit kept), or, for a
    /// change of mode alone, from the workspace.
    fn put_back(
        &self,
        vfs: &mut VirtualFs,
        transaction: TransactionId,
        entry: &DiffEntry,
        unread: &vsh_store::UnreadContents,
    ) -> Result<SeedFile, VshError> {
        let unavailable = |reason: &str| VshError::RevertUnavailable {
            transaction,
            path: visible(self.runs.policy().calls(), entry.path.clone()),
            reason: reason.to_owned(),
        };
        let node = match entry.before {
            None => None,
            Some(NodeState { kind: NodeKind::Directory, mode, .. }) => Some(SeedNode::Directory { mode }),
            Some(before) => {
                // Removed or replaced unread: its bytes are named by the
                // state its diff recorded, where its commit kept them.
                let Some(content) = before.content.or_else(|| unread.get(&entry.path, &before)) else {
                    let protected =
                        self.runs.policy().calls().authorize(&entry.path, vsh_policy::AccessKind::ContentRead).is_err();
                    return Err(unavailable(if protected {
                        "its content was never read (the policy protects it from reading), so vsh never kept it"
                    } else if before.size > super::KEPT_BEFORE_FILE_BYTES {
                        "it was larger than the 1 MiB of a file a commit keeps, so vsh never kept it"
                    } else {
                        "the work removed or replaced it unread, and its commit did not keep its bytes (a commit \
                         keeps up to 1 MiB a file and 16 MiB in all, until vsh gc removes them)"
                    }));
                };
                let bytes =
                    if entry.after.is_some_and(|after| after.kind == before.kind && after.content == Some(content)) {
                        // Only its mode changed: the bytes are the workspace's.
                        crate::candidate::seed::content(vfs, &entry.path)?
                    } else {
                        self.records.blobs().get(content, before.size).map_err(|_| {
                            unavailable(if before.size > super::KEPT_BEFORE_FILE_BYTES {
                                "it was larger than the 1 MiB of a file a commit keeps, so vsh never kept it"
                            } else {
                                "what it replaced is not stored (a commit keeps up to 1 MiB a file and 16 MiB in \
                                 all, until vsh gc removes them)"
                            })
                        })?
                    };
                Some(match before.kind {
                    NodeKind::Symlink => SeedNode::Symlink { target: bytes },
                    _ => SeedNode::File { bytes, mode: before.mode },
                })
            }
        };
        Ok(SeedFile { path: entry.path.clone(), node, before: entry.after })
    }
}

/// The paths in directories `diff` made (or made of what was not a
/// directory) that `diff` did not make: added since, they would go with
/// the directory a revert removes.
/// Python's bytecode cache beside what it imported: one added since to a
/// directory a revert removes goes with it, rebuilt at the next import
/// (ux67 F4: an import blocked the undo of a package), when it is one
/// ([`is_cache`]). The tools' caches (`.pytest_cache` and the like) are
/// not taken along: their layouts hold what they hold (sec72 F2).
const CACHES: [&str; 1] = ["__pycache__"];

fn added_since(
    vfs: &mut VirtualFs,
    calls: &vsh_policy::CallPolicy,
    diff: &vsh_types::CanonicalDiff,
) -> Result<Vec<vsh_types::VPath>, VshError> {
    let made: std::collections::BTreeSet<&vsh_types::VPath> = diff.entries().iter().map(|entry| &entry.path).collect();
    let is_dir = |state: &NodeState| state.kind == NodeKind::Directory;
    let mut added = Vec::new();
    for entry in diff.entries() {
        if !entry.after.is_some_and(|after| is_dir(&after)) || entry.before.is_some_and(|before| is_dir(&before)) {
            continue;
        }
        for name in vfs.read_dir(&entry.path)? {
            let child = entry.path.child(&name).unwrap_or_else(|_| entry.path.clone());
            let cache = CACHES.contains(&name.as_str()) && is_cache(vfs, calls, &child, &name)?;
            if !made.contains(&child) && !cache {
                added.push(child);
            }
        }
    }
    Ok(added)
}

/// Whether the directory `dir` (named `name`, one of [`CACHES`]) is
/// Python's bytecode cache and holds nothing else: regular `.pyc` files,
/// none of them hidden by `calls`, none over [`super::KEPT_BEFORE_FILE_BYTES`]
/// (a revert of the revert could not put it back). A symlink or a file of
/// such a name, or one holding anything else, is not.
fn is_cache(
    vfs: &mut VirtualFs,
    calls: &vsh_policy::CallPolicy,
    dir: &vsh_types::VPath,
    name: &str,
) -> Result<bool, VshError> {
    if name != "__pycache__" || vfs.kind(dir)? != Some(NodeKind::Directory) {
        return Ok(false);
    }
    for child in vfs.read_dir(dir)? {
        let Ok(path) = dir.child(&child) else { return Ok(false) };
        let pyc = std::path::Path::new(&child).extension().is_some_and(|extension| extension == "pyc");
        let small = vfs
            .base_state_of(&path)?
            .is_some_and(|state| state.kind == NodeKind::File && state.size <= super::KEPT_BEFORE_FILE_BYTES);
        if !pyc || !small || calls.is_hidden(&path) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The paths whose removal in a revert's diff (`entries`) undoes what the
/// reverted work made there: the node it made, as it left it
/// ([`same_node`]; the revert refused to be made unless every path held
/// what the work left). Sorted, as `entries` are, and whether a reviewer
/// approved that work (`true`: a reviewed creation's undoing is reviewed
/// too, [`vsh_policy::PolicyInput::undone_reviewed_creations`]) or it was
/// auto-approved ([`vsh_policy::PolicyInput::undone_creations`]). Empty
/// for any run that is no revert, and where the reverted work's record
/// cannot be read (every removal then counts as one). `outcome` names the
/// reverted transaction in its revert step.
pub(crate) fn undone_creations(
    outcome: &Executed,
    entries: &[DiffEntry],
    records: &crate::records::Records,
) -> (Vec<vsh_types::VPath>, bool) {
    let none = (Vec::new(), false);
    let EvidenceOutput::Session { steps } = &outcome.output else { return none };
    let Some(step) = steps.iter().find(|step| step.kind == StepKind::Revert) else { return none };
    let Ok(reverted) = TransactionId::parse_hex(&step.program) else { return none };
    if !matches!(records.get(reverted), Ok(Some(record)) if record.state == TransactionState::Committed) {
        return none;
    }
    // One read of its artifact: the decision and the diff (the receipt's changes).
    let Ok(stored) = records.stored_receipt(reverted, TransactionState::Committed) else { return none };
    let reviewed = !matches!(stored.receipt.decision, vsh_policy::Decision::AutoApproved);
    let made: std::collections::HashMap<&vsh_types::VPath, &NodeState> = stored
        .receipt
        .changes
        .iter()
        .filter(|entry| entry.before.is_none())
        .filter_map(|entry| entry.after.as_ref().map(|after| (&entry.path, after)))
        .collect();
    let undone = entries
        .iter()
        .filter(|entry| entry.after.is_none())
        .filter(|entry| made.get(&entry.path).is_some_and(|after| same_node(Some(after), entry.before.as_ref())))
        .map(|entry| entry.path.clone())
        .collect();
    (undone, reviewed)
}

/// Whether `left` (what one work left at a path) and `found` (what the
/// next work found there) are the same node: kind, mode and size, and the
/// content where both know it by its digest (a state recorded by its stamp
/// alone knows none).
fn same_node(left: Option<&NodeState>, found: Option<&NodeState>) -> bool {
    match (left, found) {
        (None, None) => true,
        (Some(left), Some(found)) => {
            left.kind == found.kind
                && left.mode == found.mode
                && left.size == found.size
                && (left.content.is_none() || found.content.is_none() || left.content == found.content)
        }
        _ => false,
    }
}

/// `path`, or the nearest directory above it the policy `calls` does not
/// hide: what a refusal names (sec72 F1, sec73 F1: a hidden name reached
/// the agent through a revert's error).
fn visible(calls: &vsh_policy::CallPolicy, mut path: vsh_types::VPath) -> vsh_types::VPath {
    while calls.is_hidden(&path) {
        path = path.parent().unwrap_or_default();
    }
    path
}
