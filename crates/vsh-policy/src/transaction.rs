//! [`TransactionPolicy`]: profile, thresholds and protected paths, bound together
//! by one digest, and the decision procedure over a transaction's diff.
//!
//! # Decision order
//!
//! 1. Any denied access the guest attempted (even one it caught):
//!    [`DenyReason::ProtectedAccessAttempt`].
//! 2. Any diff entry whose mutation the [`CallPolicy`] refuses (Create as
//!    `Create`, Delete as `Delete`, Modify and `MetadataChange` as `Modify`),
//!    whether a rule protects the path or it lies outside the writable roots:
//!    [`DenyReason::ProtectedMutation`]. This covers callers that build a diff
//!    without going through authorized guest calls.
//! 3. Ceilings, in this order: more touched paths than `deny_touched_paths`, more
//!    changed bytes than `deny_changed_bytes`, more deletions than
//!    `deny_deleted_paths`, and, when at least `delete_ratio_min_paths` paths are
//!    deleted and some base node was observed, a delete ratio of at least
//!    `deny_delete_ratio_bps`.
//! 4. An empty diff is [`Decision::AutoApproved`].
//! 5. Risk flags; none gives [`Decision::AutoApproved`], any gives
//!    [`Decision::PendingApproval`].
//!
//! # Explaining a denial
//!
//! A [`DenyManifest`] says how the policy would have to change. Each listed
//! [`Denial`] carries its rule (pattern text, label, access set) and a remedy
//! ([`CallPolicy::remedy`]): remove or narrow a `[[protect]]` rule, turn off a
//! built-in group with `defaults.secrets = false` or `defaults.git = false`,
//! widen `defaults.writable_roots`, or nothing at all for runtime data. A
//! ceiling denial carries a [`CeilingBreach`]: the threshold passed and the
//! least value that would have allowed the diff, and the remedy says the same
//! in words (`raise thresholds.deny_touched_paths from 3 to at least 4`).

use std::fmt::Write as _;

use vsh_types::canon;
use vsh_types::{DiffEntry, DiffKind, NodeKind, PolicyDigest, VPath};

use crate::access::AccessKind;
use crate::decision::{
    CeilingBreach, ContentLoss, Decision, Denial, DenyManifest, DenyReason, MAX_LISTED_DENIALS, RiskFlag, RiskManifest,
    RiskMetrics,
};
use crate::profile::{MAX_RATIO_BPS, PolicyConfigError, PolicyProfile, PolicyThresholds};
use crate::review::{ReviewRule, canonical_review, encode_review};
use crate::rules::{CallPolicy, DeniedAccess};

/// The schema tag hashed first into every [`PolicyDigest`]. Changing how a
/// policy is encoded or evaluated changes this tag.
pub const POLICY_SCHEMA: &str = "vsh-policy-schema-2";

/// What a transaction did, as the policy sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicyInput<'a> {
    /// The canonical diff.
    pub diff: &'a [DiffEntry],
    /// Every access the call policy refused during the run, caught or not.
    pub denied: &'a [DeniedAccess],
    /// Renames the program performed (from the effect ledger).
    pub renames: u64,
    /// Base nodes the run observed: the delete ratio's denominator.
    pub observed_base_nodes: u64,
    /// Whether the diff writes into a git repository outside `.git`, as the
    /// caller found it in the image after the diff (a path inside a
    /// directory that holds a `HEAD` and a `config` or `commondir`, or a
    /// `config` in git's format): raises [`RiskFlag::GitRepository`], as
    /// does a diff that writes a `HEAD` and a `config` in one directory
    /// whatever the caller found.
    pub git_repository: bool,
    /// Whether the diff writes a file others may read (`g+r` or `o+r`) in a
    /// run that read the content of a file only its owner could (a private
    /// key or config copied out, `cp db.yml copy.yml`, or in any other form:
    /// appended, encoded, edited), as the caller found it: raises
    /// [`RiskFlag::PermissionChange`].
    pub widens_private_content: bool,
    /// What each modified file lost of its content, measured from the bytes
    /// and its unreviewed history, sorted by path: its content rewrite is
    /// judged on that ([`crate::decision::is_lossy_rewrite`]); a modified
    /// file not named here is judged on its sizes.
    pub losses: &'a [ContentLoss],
    /// Whether the diff replaces a file the run never read whose content
    /// differs from what vsh last saw of it, as the caller found it in its
    /// records: raises [`RiskFlag::UnseenChange`].
    pub unseen_changes: bool,
    /// Paths whose removal undoes what committed, auto-approved work made
    /// there, the very node it made, as a revert of that work found them
    /// (sorted): such a removal loses nothing the workspace held before
    /// that work, so it is no deletion to the [`RiskFlag::Deletion`] flag,
    /// `deny_deleted_paths` or the delete ratio (ux67 F5, sec73 F4).
    pub undone_creations: &'a [VPath],
    /// The same for committed work a reviewer approved: such a removal is
    /// still a deletion to the [`RiskFlag::Deletion`] flag (undoing
    /// reviewed work is reviewed), but to no ceiling (`deny_deleted_paths`,
    /// the delete ratio), which guard what the workspace held before: the
    /// undoing of many reviewed creations waits for a reviewer instead of
    /// being denied outright (ux75 M3).
    pub undone_reviewed_creations: &'a [VPath],
}

impl<'a> PolicyInput<'a> {
    /// An input holding only `diff`: no denials, no renames, no observed base.
    pub fn new(diff: &'a [DiffEntry]) -> Self {
        Self { diff, ..Self::default() }
    }
}

/// A complete transaction policy: profile, validated thresholds and protected
/// paths, with the digest that binds approvals to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionPolicy {
    profile: PolicyProfile,
    thresholds: PolicyThresholds,
    calls: CallPolicy,
    /// Real commands' scratch directories, when the policy names them.
    scratch: Option<Vec<String>>,
    /// Paths whose changes wait for a reviewer, sorted and merged by pattern.
    review: Vec<ReviewRule>,
    digest: PolicyDigest,
}

impl TransactionPolicy {
    /// Build a policy; fails if `thresholds` do not validate.
    pub fn new(
        profile: PolicyProfile,
        thresholds: PolicyThresholds,
        calls: CallPolicy,
    ) -> Result<Self, PolicyConfigError> {
        thresholds.validate()?;
        Ok(Self::assemble(profile, thresholds, calls))
    }

    /// The profile's own thresholds with the default protected paths
    /// ([`CallPolicy::balanced_default`]) for `data_dir`.
    pub fn from_profile(profile: PolicyProfile, data_dir: Option<&VPath>) -> Self {
        Self::assemble(profile, PolicyThresholds::for_profile(profile), CallPolicy::balanced_default(data_dir))
    }

    pub(crate) fn assemble(profile: PolicyProfile, thresholds: PolicyThresholds, calls: CallPolicy) -> Self {
        Self::assemble_with(profile, thresholds, calls, None, Vec::new())
    }

    /// [`TransactionPolicy::assemble`], naming real commands' scratch
    /// directories and the review rules. The digest covers each only when
    /// there is one, so a policy without them keeps the digest it always had.
    pub(crate) fn assemble_with(
        profile: PolicyProfile,
        thresholds: PolicyThresholds,
        calls: CallPolicy,
        scratch: Option<Vec<String>>,
        review: Vec<ReviewRule>,
    ) -> Self {
        let review = canonical_review(review);
        let mut bytes = Vec::new();
        canon::put_bytes(&mut bytes, POLICY_SCHEMA.as_bytes());
        canon::put_u8(&mut bytes, profile.tag());
        thresholds.encode_canonical(&mut bytes);
        calls.encode_canonical(&mut bytes);
        if let Some(names) = &scratch {
            canon::put_bytes(&mut bytes, b"commands.scratch");
            canon::put_u64(&mut bytes, names.len() as u64);
            for name in names {
                canon::put_bytes(&mut bytes, name.as_bytes());
            }
        }
        if !review.is_empty() {
            encode_review(&review, &mut bytes);
        }
        let digest = PolicyDigest::digest(&bytes);
        Self { profile, thresholds, calls, scratch, review, digest }
    }

    /// This policy with `rules` added to its review rules (merged by
    /// pattern; see [`crate::review`]), its digest computed anew.
    #[must_use]
    pub fn with_review(self, rules: impl IntoIterator<Item = ReviewRule>) -> Self {
        let mut review = self.review;
        review.extend(rules);
        Self::assemble_with(self.profile, self.thresholds, self.calls, self.scratch, review)
    }

    /// The review rules, sorted and merged by pattern.
    pub fn review_rules(&self) -> &[ReviewRule] {
        &self.review
    }

    /// The `content-rewrite` ratio for `path`, in basis points: the
    /// thresholds' ratio, or a covering review rule's where that is lower.
    pub fn rewrite_ratio_for(&self, path: &VPath) -> u32 {
        self.review
            .iter()
            .filter_map(|rule| rule.rewrite_ratio_bps.filter(|_| rule.covers(path)))
            .fold(self.thresholds.rewrite_escalate_ratio_bps, u32::min)
    }

    /// What in the review rules does nothing, or not what it may seem to
    /// (for `vsh policy check`, ux66 F6): a rule that makes no change wait
    /// and whose ratio is not below the thresholds' (a rule cannot raise
    /// it); two rules that cover the same paths, their patterns differing
    /// only in case where both ignore it (they are two rules, not one).
    pub fn review_notes(&self) -> Vec<String> {
        let global = self.thresholds.rewrite_escalate_ratio_bps;
        let mut notes = Vec::new();
        for rule in &self.review {
            if rule.changes.is_empty() && rule.rewrite_ratio_bps.is_some_and(|bps| bps >= global) {
                notes.push(format!(
                    "review rule `{}` has no effect: its rewrite_escalate_ratio {} is not below \
                     thresholds.rewrite_escalate_ratio {} (a rule can only lower it)",
                    rule.pattern,
                    fraction(u64::from(rule.rewrite_ratio_bps.unwrap_or(global))),
                    fraction(u64::from(global))
                ));
            }
        }
        for (index, rule) in self.review.iter().enumerate() {
            for other in &self.review[index + 1..] {
                if rule.pattern.is_case_insensitive()
                    && other.pattern.is_case_insensitive()
                    && rule.pattern.as_str().eq_ignore_ascii_case(other.pattern.as_str())
                {
                    notes.push(format!(
                        "review rules `{}` and `{}` cover the same paths (both ignore case): each applies as written",
                        rule.pattern, other.pattern
                    ));
                }
            }
        }
        notes
    }

    /// The entries of `diff` a review rule makes wait for a reviewer, each
    /// with the first such rule (in pattern order).
    pub fn waiting_by_rule<'d>(&self, diff: &'d [DiffEntry]) -> Vec<(&'d DiffEntry, &ReviewRule)> {
        if self.review.is_empty() {
            return Vec::new();
        }
        diff.iter()
            .filter_map(|entry| self.review.iter().find(|rule| rule.waits_for(entry)).map(|rule| (entry, rule)))
            .collect()
    }

    /// Real commands' scratch directories as the policy names them
    /// (`[commands] scratch` in a policy file), or `None` for the runtime's
    /// default.
    pub fn command_scratch(&self) -> Option<&[String]> {
        self.scratch.as_deref()
    }

    /// The profile.
    pub fn profile(&self) -> PolicyProfile {
        self.profile
    }

    /// The thresholds.
    pub fn thresholds(&self) -> &PolicyThresholds {
        &self.thresholds
    }

    /// The protected-path rules.
    pub fn calls(&self) -> &CallPolicy {
        &self.calls
    }

    /// The digest over [`POLICY_SCHEMA`], the profile tag, every threshold
    /// (including the rewrite ratio) and the canonical call policy (rules with
    /// their access sets, labels and reasons, and the writable roots). Pending
    /// approvals are bound to it.
    pub fn digest(&self) -> PolicyDigest {
        self.digest
    }

    /// Decide on a transaction (see the [module documentation](self) for the order).
    pub fn evaluate(&self, input: &PolicyInput<'_>) -> Decision {
        let ratio_of = |path: &VPath| self.rewrite_ratio_for(path);
        let metrics = RiskMetrics::measure_judged(
            input.diff,
            input.renames,
            input.observed_base_nodes,
            &ratio_of,
            input.losses,
            input.undone_creations,
        );
        if !input.denied.is_empty() {
            let listed = input.denied.iter().take(MAX_LISTED_DENIALS).map(|denied| self.explain(denied)).collect();
            return self.deny_protected(DenyReason::ProtectedAccessAttempt, listed, input.denied.len() as u64, metrics);
        }
        let mut listed = Vec::new();
        let mut total: u64 = 0;
        // Directories the diff leaves as symlinks: a path below one that it
        // removes reads, after the change, whatever the link leads to.
        let linked: std::collections::BTreeSet<&VPath> = input
            .diff
            .iter()
            .filter(|entry| entry.after.is_some_and(|after| after.kind == vsh_types::NodeKind::Symlink))
            .map(|entry| &entry.path)
            .collect();
        for entry in input.diff {
            // Removed from under a directory made a link: its name reads
            // other content now, a modify of it (sec92 L1: `rm -r conf; ln
            // -s c2 conf` passed a rule denying `modify` of conf/app.yml).
            let relinked = (entry.after.is_none()
                && !linked.is_empty()
                && entry.path.ancestors().iter().any(|ancestor| linked.contains(ancestor)))
            .then_some(AccessKind::Modify);
            let refused = accesses_of(entry)
                .into_iter()
                .chain([relinked])
                .flatten()
                .find_map(|access| self.calls.authorize(&entry.path, access).err());
            if let Some(denial) = refused {
                total += 1;
                if listed.len() < MAX_LISTED_DENIALS {
                    listed.push(self.explain(&denial));
                }
            }
        }
        if total > 0 {
            return self.deny_protected(DenyReason::ProtectedMutation, listed, total, metrics);
        }
        if let Some(denied) = deny_setuid_files(input.diff, metrics, self.digest) {
            return denied;
        }
        // The ceilings count no undone creation, reviewed or not.
        let ceiling_metrics = if input.undone_reviewed_creations.is_empty() {
            metrics
        } else {
            let mut undone = [input.undone_creations, input.undone_reviewed_creations].concat();
            undone.sort_unstable();
            RiskMetrics::measure_judged(
                input.diff,
                input.renames,
                input.observed_base_nodes,
                &ratio_of,
                input.losses,
                &undone,
            )
        };
        if let Some((reason, ceiling, remedy)) = self.ceiling(&ceiling_metrics, input.observed_base_nodes) {
            return Decision::Denied(DenyManifest {
                reason,
                denied: Vec::new(),
                denied_total: 0,
                ceiling: Some(ceiling),
                remedy,
                metrics: ceiling_metrics,
                policy: self.digest,
            });
        }
        if input.diff.is_empty() {
            return Decision::AutoApproved;
        }
        let mut flags = self.flags(&metrics);
        let widens = input.widens_private_content || input.diff.iter().any(crate::decision::changes_permissions);
        if metrics.mode_changes == 0 && widens {
            flags.push(RiskFlag::PermissionChange);
            flags.sort_unstable();
        }
        if input.git_repository || writes_a_git_repository(input.diff) {
            flags.push(RiskFlag::GitRepository);
        }
        if self.review.iter().any(|rule| input.diff.iter().any(|entry| rule.waits_for(entry))) {
            flags.push(RiskFlag::ReviewRule);
        }
        if input.unseen_changes {
            flags.push(RiskFlag::UnseenChange);
        }
        if flags.is_empty() {
            Decision::AutoApproved
        } else {
            Decision::PendingApproval(RiskManifest { metrics, flags, policy: self.digest })
        }
    }

    /// The first ceiling `metrics` passes, with the breach and its remedy.
    fn ceiling(&self, metrics: &RiskMetrics, observed_base_nodes: u64) -> Option<(DenyReason, CeilingBreach, String)> {
        let limits = &self.thresholds;
        let counted = [
            (
                DenyReason::TooManyTouchedPaths,
                "deny_touched_paths",
                limits.deny_touched_paths,
                metrics.touched,
                "touches",
                "paths",
            ),
            (
                DenyReason::TooManyChangedBytes,
                "deny_changed_bytes",
                limits.deny_changed_bytes,
                metrics.changed_bytes,
                "changes",
                "bytes",
            ),
            (
                DenyReason::TooManyDeletions,
                "deny_deleted_paths",
                limits.deny_deleted_paths,
                metrics.deleted,
                "deletes",
                "paths",
            ),
        ];
        for (reason, name, limit, value, verb, unit) in counted {
            if value > limit {
                let threshold = format!("thresholds.{name}");
                let remedy =
                    format!("raise {threshold} from {limit} to at least {value} (the diff {verb} {value} {unit})");
                return Some((reason, CeilingBreach { threshold, limit, value, allowing: value }, remedy));
            }
        }
        if observed_base_nodes == 0
            || metrics.deleted < limits.delete_ratio_min_paths
            || metrics.delete_ratio_bps < limits.deny_delete_ratio_bps
        {
            return None;
        }
        let ratio = u64::from(metrics.delete_ratio_bps);
        let limit = u64::from(limits.deny_delete_ratio_bps);
        let min_paths = limits.delete_ratio_min_paths;
        let above_deleted = metrics.deleted.saturating_add(1);
        let share = format!(
            "the diff deletes {} paths, {} of the {observed_base_nodes} observed base nodes",
            metrics.deleted,
            fraction(ratio)
        );
        let (breach, remedy) = if ratio < u64::from(MAX_RATIO_BPS) {
            let threshold = "thresholds.deny_delete_ratio".to_owned();
            let remedy = format!(
                "raise {threshold} from {} to at least {} ({share}), or thresholds.delete_ratio_min_paths from \
                 {min_paths} to at least {above_deleted}",
                fraction(limit),
                fraction(ratio + 1)
            );
            (CeilingBreach { threshold, limit, value: ratio, allowing: ratio + 1 }, remedy)
        } else {
            // No ratio can exceed 100%: only the minimum path count can let it pass.
            let threshold = "thresholds.delete_ratio_min_paths".to_owned();
            let remedy = format!("raise {threshold} from {min_paths} to at least {above_deleted} ({share})");
            let breach = CeilingBreach { threshold, limit: min_paths, value: metrics.deleted, allowing: above_deleted };
            (breach, remedy)
        };
        Some((DenyReason::DeleteRatio, breach, remedy))
    }

    fn flags(&self, metrics: &RiskMetrics) -> Vec<RiskFlag> {
        let limits = &self.thresholds;
        let candidates = [
            (RiskFlag::Mutation, self.profile.escalates_every_mutation() && metrics.touched > 0),
            (RiskFlag::Deletion, metrics.deleted > 0),
            (RiskFlag::Rename, metrics.renamed > 0),
            (RiskFlag::ExecutableChange, metrics.executable_changes > 0),
            (RiskFlag::SymlinkChange, metrics.symlink_changes > 0),
            (RiskFlag::LargeTouchedSet, metrics.touched >= limits.escalate_touched_paths),
            (RiskFlag::LargeByteChange, metrics.changed_bytes >= limits.escalate_changed_bytes),
            (RiskFlag::PermissionChange, metrics.mode_changes > 0),
            (RiskFlag::ContentRewrite, metrics.rewritten > 0),
        ];
        let mut flags: Vec<RiskFlag> =
            candidates.into_iter().filter_map(|(flag, raised)| raised.then_some(flag)).collect();
        flags.sort_unstable();
        flags.dedup();
        flags
    }

    fn explain(&self, denied: &DeniedAccess) -> Denial {
        Denial::new(denied, self.calls.remedy(denied))
    }

    /// A protected-access denial; its remedy lists the distinct remedies of the
    /// listed denials in order.
    fn deny_protected(
        &self,
        reason: DenyReason,
        denied: Vec<Denial>,
        denied_total: u64,
        metrics: RiskMetrics,
    ) -> Decision {
        let mut remedies: Vec<&str> = Vec::new();
        for denial in &denied {
            if !remedies.contains(&denial.remedy.as_str()) {
                remedies.push(&denial.remedy);
            }
        }
        let mut remedy = remedies.join("; ");
        let unlisted = denied_total.saturating_sub(denied.len() as u64);
        if unlisted > 0 {
            let _ = write!(remedy, "; and {unlisted} more denials not listed");
        }
        Decision::Denied(DenyManifest {
            reason,
            denied,
            denied_total,
            ceiling: None,
            remedy,
            metrics,
            policy: self.digest,
        })
    }
}

/// A ratio in basis points as the fraction a policy file writes (`0.5`, `1`,
/// `0.0001`).
pub(crate) fn fraction(bps: u64) -> String {
    let scale = u64::from(MAX_RATIO_BPS);
    let whole = bps / scale;
    let part = bps % scale;
    if part == 0 {
        return whole.to_string();
    }
    let digits = format!("{part:04}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

impl Default for TransactionPolicy {
    /// Balanced, with the default protected paths.
    fn default() -> Self {
        Self::from_profile(PolicyProfile::Balanced, None)
    }
}

/// Setuid and setgid: the bits vsh never leaves on a file it writes.
const SETID_BITS: u32 = 0o6000;

/// A denial naming the files `diff` leaves with a setuid or setgid bit, if any
/// (a file written, moved, or given a mode with either bit: the committed file
/// never belongs to the program's own user).
fn deny_setuid_files(diff: &[DiffEntry], metrics: RiskMetrics, policy: PolicyDigest) -> Option<Decision> {
    let setid = |entry: &&DiffEntry| {
        entry.after.is_some_and(|after| after.kind == NodeKind::File && after.mode & SETID_BITS != 0)
    };
    let total = diff.iter().filter(setid).count() as u64;
    if total == 0 {
        return None;
    }
    let named: Vec<String> = diff.iter().filter(setid).take(8).map(|entry| entry.path.to_string()).collect();
    let more =
        if total > named.len() as u64 { format!(" and {} more", total - named.len() as u64) } else { String::new() };
    let remedy = format!(
        "clear the setuid and setgid bits (chmod ug-s) of {}{more}: vsh never writes a file with them",
        named.join(", ")
    );
    Some(Decision::Denied(DenyManifest {
        reason: DenyReason::SetuidFile,
        denied: Vec::new(),
        denied_total: total,
        ceiling: None,
        remedy,
        metrics,
        policy,
    }))
}

/// The accesses a diff entry exercises: its kind's ([`mutation_of`]), or,
/// for a node replaced by one of another kind (a file by a directory, a
/// directory by a link), that `Modify` and a `Delete` of what was there
/// and a `Create` of what is (sec89 L1: `rm f; mkdir f` by a command, its
/// removal left to the diff, passed a rule denying `delete` as a modify;
/// sec90 L1: judged as the delete and the create alone, it passed a rule
/// denying `modify`, which the commit's own check then refused).
fn accesses_of(entry: &DiffEntry) -> [Option<AccessKind>; 3] {
    match (entry.before, entry.after) {
        (Some(before), Some(after)) if before.kind != after.kind => {
            [Some(AccessKind::Modify), Some(AccessKind::Delete), Some(AccessKind::Create)]
        }
        _ => [Some(mutation_of(entry.kind)), None, None],
    }
}

/// The access a diff entry exercises (a mode change is a `Modify`).
pub(crate) fn mutation_of(kind: DiffKind) -> AccessKind {
    match kind {
        DiffKind::Create => AccessKind::Create,
        DiffKind::Delete => AccessKind::Delete,
        DiffKind::Modify | DiffKind::MetadataChange => AccessKind::Modify,
    }
}

/// Whether `diff` leaves a file named `HEAD` and one named `config` in one
/// directory, at least one of them written by it: a git repository's
/// layout, whose `config` git obeys (see [`RiskFlag::GitRepository`]).
fn writes_a_git_repository(diff: &[DiffEntry]) -> bool {
    let written = |name: &str| {
        diff.iter()
            .filter(|entry| entry.after.is_some_and(|after| after.kind == vsh_types::NodeKind::File))
            .filter(|entry| entry.path.file_name() == Some(name))
            .filter_map(|entry| entry.path.parent())
            .collect::<std::collections::BTreeSet<_>>()
    };
    !written("HEAD").is_disjoint(&written("config"))
}

#[cfg(test)]
mod tests {
    use vsh_types::NodeState;

    use super::*;
    use crate::access::AccessSet;
    use crate::pattern::Pattern;
    use crate::rules::{ProtectedRule, RuleLabel};

    fn p(text: &str) -> VPath {
        VPath::parse(text).unwrap()
    }

    fn create(path: &str, bytes: &[u8]) -> DiffEntry {
        DiffEntry::between(p(path), None, Some(NodeState::file_with(bytes, 0o644))).unwrap()
    }

    fn create_sized(path: &str, size: u64) -> DiffEntry {
        let state = NodeState { size, ..NodeState::file_with(b"", 0o644) };
        DiffEntry::between(p(path), None, Some(state)).unwrap()
    }

    fn modify(path: &str) -> DiffEntry {
        DiffEntry::between(
            p(path),
            Some(NodeState::file_with(b"old", 0o644)),
            Some(NodeState::file_with(b"new!", 0o644)),
        )
        .unwrap()
    }

    fn delete(path: &str) -> DiffEntry {
        DiffEntry::between(p(path), Some(NodeState::file_with(b"gone", 0o644)), None).unwrap()
    }

    fn chmod(path: &str, from: u32, to: u32) -> DiffEntry {
        DiffEntry::between(p(path), Some(NodeState::file_with(b"x", from)), Some(NodeState::file_with(b"x", to)))
            .unwrap()
    }

    fn policy(profile: PolicyProfile) -> TransactionPolicy {
        TransactionPolicy::from_profile(profile, None)
    }

    fn thresholds_policy(thresholds: PolicyThresholds) -> TransactionPolicy {
        TransactionPolicy::new(PolicyProfile::Balanced, thresholds, CallPolicy::balanced_default(None)).unwrap()
    }

    fn denied(decision: &Decision) -> &DenyManifest {
        match decision {
            Decision::Denied(manifest) => manifest,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    fn flags(decision: &Decision) -> &[RiskFlag] {
        match decision {
            Decision::PendingApproval(manifest) => &manifest.flags,
            other => panic!("expected pending approval, got {other:?}"),
        }
    }

    fn review(pattern: &str, changes: AccessSet, ratio: Option<u32>) -> ReviewRule {
        ReviewRule {
            pattern: Pattern::parse(pattern).unwrap().case_insensitive(),
            changes,
            rewrite_ratio_bps: ratio,
            reason: Some("tests guard the build".into()),
        }
    }

    #[test]
    fn a_review_rule_makes_the_changes_it_names_wait_and_nothing_else() {
        let reviewed =
            policy(PolicyProfile::Balanced).with_review([review("tests/**", crate::review::REVIEWABLE_CHANGES, None)]);
        assert_ne!(reviewed.digest(), policy(PolicyProfile::Balanced).digest());
        for diff in [
            vec![modify("tests/test_a.py")],
            vec![create("tests/new.py", b"x")],
            vec![chmod("tests/a.py", 0o644, 0o600)],
        ] {
            let decision = reviewed.evaluate(&PolicyInput::new(&diff));
            assert!(flags(&decision).contains(&RiskFlag::ReviewRule), "{diff:?}: {decision:?}");
        }
        // Outside its pattern, and without it, the same change goes through.
        let elsewhere = [modify("src/a.py"), create("testsuite/a.py", b"x")];
        assert_eq!(reviewed.evaluate(&PolicyInput::new(&elsewhere)), Decision::AutoApproved);
        let plain = policy(PolicyProfile::Balanced);
        assert_eq!(plain.evaluate(&PolicyInput::new(&[modify("tests/test_a.py")])), Decision::AutoApproved);
        // Mixed: the rule names the entry that waits.
        let diff = [modify("src/a.py"), modify("tests/test_b.py")];
        let waiting = reviewed.waiting_by_rule(&diff);
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].0.path.as_str(), "tests/test_b.py");
        assert_eq!(waiting[0].1.pattern.as_str(), "tests/**");
        // Only the changes it names.
        let deletions = policy(PolicyProfile::Balanced).with_review([review(
            "tests/**",
            AccessSet::single(AccessKind::Delete),
            None,
        )]);
        assert_eq!(deletions.evaluate(&PolicyInput::new(&[modify("tests/test_a.py")])), Decision::AutoApproved);
        let decision = deletions.evaluate(&PolicyInput::new(&[delete("tests/test_a.py")]));
        assert_eq!(flags(&decision), &[RiskFlag::Deletion, RiskFlag::ReviewRule]);
        // A review rule never lets through what a deny rule refuses.
        let denying = TransactionPolicy::new(
            PolicyProfile::Balanced,
            PolicyThresholds::for_profile(PolicyProfile::Balanced),
            CallPolicy::balanced_default(None).with_rules([ProtectedRule::new(
                Pattern::parse("tests/**").unwrap(),
                AccessSet::MUTATIONS,
                RuleLabel::Custom,
            )]),
        )
        .unwrap()
        .with_review([review("tests/**", crate::review::REVIEWABLE_CHANGES, None)]);
        let decision = denying.evaluate(&PolicyInput::new(&[modify("tests/test_a.py")]));
        assert_eq!(denied(&decision).reason, DenyReason::ProtectedMutation);
    }

    #[test]
    fn an_unseen_change_waits_under_every_profile() {
        for profile in PolicyProfile::ALL {
            let policy = policy(profile);
            let diff = [modify("src/a.py")];
            let unseen = PolicyInput { unseen_changes: true, ..PolicyInput::new(&diff) };
            assert!(flags(&policy.evaluate(&unseen)).contains(&RiskFlag::UnseenChange), "{profile:?}");
            let seen = policy.evaluate(&PolicyInput::new(&diff));
            assert!(!matches!(&seen, Decision::PendingApproval(m) if m.flags.contains(&RiskFlag::UnseenChange)));
        }
    }

    #[test]
    fn review_rules_that_do_nothing_or_overlap_are_noted() {
        let reviewed = policy(PolicyProfile::Balanced).with_review([
            review("docs/**", AccessSet::NONE, Some(9_000)),
            review("src/**", AccessSet::NONE, Some(1_000)),
            review("Tests/**", AccessSet::single(AccessKind::Delete), None),
            review("tests/**", AccessSet::single(AccessKind::Modify), None),
        ]);
        let notes = reviewed.review_notes();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("`docs/**` has no effect") && notes[0].contains("0.9") && notes[0].contains("0.5"));
        assert!(notes[1].contains("`Tests/**` and `tests/**` cover the same paths"), "{notes:?}");
        assert!(policy(PolicyProfile::Balanced).review_notes().is_empty());
    }

    #[test]
    fn a_review_rule_lowers_the_rewrite_ratio_of_the_files_it_covers_only() {
        let cut = |path: &str| {
            DiffEntry::between(
                p(path),
                Some(NodeState::file_with(&[b'x'; 1000], 0o644)),
                Some(NodeState::file_with(&[b'x'; 700], 0o644)),
            )
            .unwrap()
        };
        let reviewed = policy(PolicyProfile::Balanced).with_review([
            review("tests/**", AccessSet::NONE, Some(1_000)),
            review("**/*.py", AccessSet::NONE, Some(9_000)),
        ]);
        assert_eq!(reviewed.rewrite_ratio_for(&p("tests/a.py")), 1_000, "the smallest covering ratio");
        assert_eq!(reviewed.rewrite_ratio_for(&p("src/a.py")), 5_000, "never above the thresholds'");
        assert_eq!(reviewed.rewrite_ratio_for(&p("src/a.rs")), 5_000);
        // 30% cut: past 0.1 under tests/, within 0.5 elsewhere.
        assert_eq!(flags(&reviewed.evaluate(&PolicyInput::new(&[cut("tests/a.py")]))), &[RiskFlag::ContentRewrite]);
        assert_eq!(reviewed.evaluate(&PolicyInput::new(&[cut("src/a.py")])), Decision::AutoApproved);
        // A ratio-only rule makes no other change wait.
        assert_eq!(reviewed.evaluate(&PolicyInput::new(&[modify("tests/a.py")])), Decision::AutoApproved);
    }

    #[test]
    fn a_file_left_setuid_or_setgid_is_denied_under_every_profile_and_clearing_the_bits_is_not() {
        let dir = |mode| NodeState::directory(mode);
        let diffs: [(Vec<DiffEntry>, u64); 5] = [
            (vec![chmod("tool", 0o755, 0o4755)], 1),
            (vec![chmod("tool", 0o755, 0o2755)], 1),
            (vec![DiffEntry::between(p("new"), None, Some(NodeState::file_with(b"elf", 0o6711))).unwrap()], 1),
            // New content for a file that keeps its setuid bit is a new setuid file.
            (
                vec![
                    DiffEntry::between(
                        p("a"),
                        Some(NodeState::file_with(b"old", 0o4755)),
                        Some(NodeState::file_with(b"new", 0o4755)),
                    )
                    .unwrap(),
                    chmod("b", 0o644, 0o4644),
                    create("c.txt", b"c"),
                ],
                2,
            ),
            (vec![chmod("x", 0o644, 0o7644)], 1),
        ];
        for profile in PolicyProfile::ALL {
            let policy = policy(profile);
            for (diff, count) in &diffs {
                let decision = policy.evaluate(&PolicyInput::new(diff));
                let manifest = denied(&decision);
                assert_eq!((manifest.reason, manifest.denied_total), (DenyReason::SetuidFile, *count), "{diff:?}");
                assert!(manifest.remedy.contains(diff[0].path.as_str()), "{}", manifest.remedy);
            }
            // Clearing the bits, a setgid or sticky directory, and a sticky file are not denied.
            let allowed = [
                chmod("tool", 0o4755, 0o755),
                DiffEntry::between(p("shared"), None, Some(dir(0o3775))).unwrap(),
                chmod("y", 0o644, 0o1644),
            ];
            for entry in allowed {
                let decision = policy.evaluate(&PolicyInput::new(std::slice::from_ref(&entry)));
                assert!(!decision.is_denied(), "{profile} {entry:?}: {decision:?}");
            }
        }
    }

    #[test]
    fn a_diff_that_writes_a_git_repositorys_head_and_config_needs_a_reviewer() {
        let policy = policy(PolicyProfile::Balanced);
        let decide = |diff: &[DiffEntry]| policy.evaluate(&PolicyInput { diff, ..PolicyInput::default() });
        // A bare repository planted outside .git: its config would run programs.
        let planted = [create("tools/HEAD", b"ref: refs/heads/main\n"), create("tools/config", b"[core]\n")];
        assert_eq!(flags(&decide(&planted)), [RiskFlag::GitRepository]);
        let rewritten = [modify("tools/HEAD"), modify("tools/config")];
        assert_eq!(flags(&decide(&rewritten)), [RiskFlag::GitRepository]);
        // Either file alone, or the two in different directories, is an ordinary change.
        for diff in [
            vec![create("tools/config", b"[core]\n")],
            vec![create("HEAD", b"x"), create("etc/config", b"x")],
            vec![create("a/HEAD", b"x"), create("a/config/HEAD", b"x")],
        ] {
            assert_eq!(decide(&diff), Decision::AutoApproved, "{diff:?}");
        }
    }

    #[test]
    fn caught_guest_denial_still_denies() {
        let policy = policy(PolicyProfile::Balanced);
        let attempt = policy.calls().authorize(&p(".env"), AccessKind::ContentRead).unwrap_err();
        let diff = [create("notes.txt", b"hi")];
        let denials = [attempt.clone()];
        let input = PolicyInput { diff: &diff, denied: &denials, ..PolicyInput::default() };
        let decision = policy.evaluate(&input);
        let manifest = denied(&decision);
        assert_eq!(manifest.reason, DenyReason::ProtectedAccessAttempt);
        assert_eq!(manifest.denied.iter().map(Denial::denied_access).collect::<Vec<_>>(), vec![attempt]);
        assert_eq!(manifest.denied_total, 1);
        assert_eq!(manifest.metrics.created, 1);
        assert_eq!(manifest.policy, policy.digest());
        // Even with an empty diff.
        let empty = PolicyInput { denied: &denials, ..PolicyInput::default() };
        assert_eq!(denied(&policy.evaluate(&empty)).reason, DenyReason::ProtectedAccessAttempt);
    }

    #[test]
    fn protected_mutation_from_the_diff_alone() {
        let policy = policy(PolicyProfile::Balanced);
        let diff = [
            create("a/server.pem", b"key"),
            modify(".git/HEAD"),
            delete(".vsh/store/x"),
            chmod(".git/hooks/pre-commit", 0o644, 0o755),
            create("src/ok.rs", b"fine"),
        ];
        let decision = policy.evaluate(&PolicyInput::new(&diff));
        let manifest = denied(&decision);
        assert_eq!(manifest.reason, DenyReason::ProtectedMutation);
        assert_eq!(manifest.denied_total, 4);
        let accesses: Vec<(String, AccessKind)> =
            manifest.denied.iter().map(|denial| (denial.path.to_string(), denial.access)).collect();
        assert_eq!(
            accesses,
            [
                ("a/server.pem".to_owned(), AccessKind::Create),
                (".git/HEAD".to_owned(), AccessKind::Modify),
                (".vsh/store/x".to_owned(), AccessKind::Delete),
                (".git/hooks/pre-commit".to_owned(), AccessKind::Modify),
            ]
        );
    }

    /// sec89 L1, sec90 L1: a node replaced by one of another kind is a
    /// modify, a delete of what was there and a create of what is, as a
    /// rule sees it; a rewrite of the same kind is a modify alone.
    #[test]
    fn a_node_replaced_by_another_kind_is_a_modify_a_delete_and_a_create() {
        let rule = |access| {
            let calls = CallPolicy::balanced_default(None).with_rules([ProtectedRule::new(
                Pattern::parse("keep/**").unwrap(),
                access,
                RuleLabel::Custom,
            )]);
            TransactionPolicy::new(PolicyProfile::Balanced, PolicyThresholds::default(), calls).unwrap()
        };
        let file = || Some(NodeState::file_with(b"kept", 0o644));
        let swapped = [
            DiffEntry::between(p("keep/a"), file(), Some(NodeState::directory(0o755))).unwrap(),
            DiffEntry::between(p("keep/b"), file(), Some(NodeState::symlink(b"/etc/shadow"))).unwrap(),
        ];
        for access in [AccessKind::Modify, AccessKind::Delete, AccessKind::Create] {
            let decision = rule(AccessSet::single(access)).evaluate(&PolicyInput::new(&swapped));
            let manifest = denied(&decision);
            assert_eq!(manifest.denied_total, 2, "{access:?}");
            assert!(manifest.denied.iter().all(|denial| denial.access == access), "{access:?}");
        }
        let decision = rule(AccessSet::single(AccessKind::Delete)).evaluate(&PolicyInput::new(&[modify("keep/c")]));
        assert!(!matches!(decision, Decision::Denied(_)), "{decision:?}");
    }

    /// sec92 L1: a protected file removed from under a directory the diff
    /// makes a symlink reads other content after it: a modify of it.
    #[test]
    fn a_file_removed_under_a_directory_made_a_link_is_modified() {
        let calls = CallPolicy::balanced_default(None).with_rules([ProtectedRule::new(
            Pattern::parse("conf/app.yml").unwrap(),
            AccessSet::single(AccessKind::Modify),
            RuleLabel::Custom,
        )]);
        let policy = TransactionPolicy::new(PolicyProfile::Balanced, PolicyThresholds::default(), calls).unwrap();
        let relinked = [
            DiffEntry::between(p("conf"), Some(NodeState::directory(0o755)), Some(NodeState::symlink(b"c2"))).unwrap(),
            delete("conf/app.yml"),
        ];
        let decision = policy.evaluate(&PolicyInput::new(&relinked));
        let manifest = denied(&decision);
        assert_eq!((manifest.denied_total, manifest.denied[0].access), (1, AccessKind::Modify), "{manifest:?}");
        assert_eq!(manifest.denied[0].path, p("conf/app.yml"));
        // Removed with its directory, nothing made a link: a delete, which the rule allows.
        let removed =
            [DiffEntry::between(p("conf"), Some(NodeState::directory(0o755)), None).unwrap(), delete("conf/app.yml")];
        assert!(!matches!(policy.evaluate(&PolicyInput::new(&removed)), Decision::Denied(_)));
    }

    #[test]
    fn denial_lists_are_capped_but_counted() {
        let policy = policy(PolicyProfile::Balanced);
        let diff: Vec<DiffEntry> = (0..100).map(|index| create(&format!("k{index:03}.key"), b"k")).collect();
        let decision = policy.evaluate(&PolicyInput::new(&diff));
        let manifest = denied(&decision);
        assert_eq!(manifest.denied.len(), MAX_LISTED_DENIALS);
        assert_eq!(manifest.denied_total, 100);
        assert_eq!(manifest.denied[0].path, p("k000.key"));
        let attempts = vec![manifest.denied[0].denied_access(); 70];
        let input = PolicyInput { denied: &attempts, ..PolicyInput::default() };
        let repeated = policy.evaluate(&input);
        assert_eq!(denied(&repeated).denied.len(), MAX_LISTED_DENIALS);
        assert_eq!(denied(&repeated).denied_total, 70);
    }

    #[test]
    fn ceiling_touched_paths() {
        let limits =
            PolicyThresholds { escalate_touched_paths: 2, deny_touched_paths: 3, ..PolicyThresholds::default() };
        let policy = thresholds_policy(limits);
        let three: Vec<DiffEntry> = (0..3).map(|index| create(&format!("f{index}"), b"x")).collect();
        assert_eq!(flags(&policy.evaluate(&PolicyInput::new(&three))), [RiskFlag::LargeTouchedSet]);
        let four: Vec<DiffEntry> = (0..4).map(|index| create(&format!("f{index}"), b"x")).collect();
        let decision = policy.evaluate(&PolicyInput::new(&four));
        let manifest = denied(&decision);
        assert_eq!(manifest.reason, DenyReason::TooManyTouchedPaths);
        assert!(manifest.denied.is_empty());
        assert_eq!(manifest.denied_total, 0);
        assert_eq!(manifest.metrics.touched, 4);
    }

    #[test]
    fn ceiling_changed_bytes() {
        let limits =
            PolicyThresholds { escalate_changed_bytes: 10, deny_changed_bytes: 100, ..PolicyThresholds::default() };
        let policy = thresholds_policy(limits);
        assert_eq!(
            flags(&policy.evaluate(&PolicyInput::new(&[create_sized("big", 100)]))),
            [RiskFlag::LargeByteChange]
        );
        let decision = policy.evaluate(&PolicyInput::new(&[create_sized("big", 101)]));
        assert_eq!(denied(&decision).reason, DenyReason::TooManyChangedBytes);
        // Mode-only changes carry no bytes.
        let chmods: Vec<DiffEntry> = (0..3).map(|index| chmod(&format!("m{index}"), 0o644, 0o600)).collect();
        assert_eq!(flags(&policy.evaluate(&PolicyInput::new(&chmods))), [RiskFlag::PermissionChange]);
    }

    #[test]
    fn ceiling_deletions() {
        let limits = PolicyThresholds { deny_deleted_paths: 2, ..PolicyThresholds::default() };
        let policy = thresholds_policy(limits);
        let two = [delete("a"), delete("b")];
        assert_eq!(flags(&policy.evaluate(&PolicyInput::new(&two))), [RiskFlag::Deletion]);
        let three = [delete("a"), delete("b"), delete("c")];
        assert_eq!(denied(&policy.evaluate(&PolicyInput::new(&three))).reason, DenyReason::TooManyDeletions);
    }

    /// sec58 1: replacing every file with an empty directory (or a symlink)
    /// was a modification, and auto-approved; it loses the files as surely as
    /// deleting them, and the delete ceilings judge it so.
    #[test]
    fn files_replaced_by_directories_or_links_count_as_deleted() {
        let limits =
            PolicyThresholds { deny_delete_ratio_bps: 5_000, delete_ratio_min_paths: 3, ..PolicyThresholds::default() };
        let policy = thresholds_policy(limits);
        let file = || Some(NodeState::file_with(b"source code", 0o644));
        let replaced = [
            DiffEntry::between(p("a.rs"), file(), Some(NodeState::directory(0o755))).unwrap(),
            DiffEntry::between(p("b.rs"), file(), Some(NodeState::directory(0o755))).unwrap(),
            DiffEntry::between(p("c.rs"), file(), Some(NodeState::symlink(b"/dev/null"))).unwrap(),
        ];
        let input = PolicyInput { diff: &replaced, observed_base_nodes: 4, ..PolicyInput::default() };
        let decision = policy.evaluate(&input);
        assert_eq!(denied(&decision).reason, DenyReason::DeleteRatio);
        assert_eq!((denied(&decision).metrics.deleted, denied(&decision).metrics.modified), (3, 0));
        // One alone is no ceiling, and still waits for a reviewer.
        let one = PolicyInput { diff: &replaced[..1], observed_base_nodes: 4, ..PolicyInput::default() };
        assert!(flags(&policy.evaluate(&one)).contains(&RiskFlag::Deletion));
    }

    #[test]
    fn ceiling_delete_ratio() {
        let limits =
            PolicyThresholds { deny_delete_ratio_bps: 5_000, delete_ratio_min_paths: 3, ..PolicyThresholds::default() };
        let policy = thresholds_policy(limits);
        let three = [delete("a"), delete("b"), delete("c")];
        let with_base =
            |observed_base_nodes| PolicyInput { diff: &three, observed_base_nodes, ..PolicyInput::default() };
        // 3 of 6 is exactly the threshold.
        let decision = policy.evaluate(&with_base(6));
        assert_eq!(denied(&decision).reason, DenyReason::DeleteRatio);
        assert_eq!(denied(&decision).metrics.delete_ratio_bps, 5_000);
        // 3 of 7 is below it.
        assert_eq!(flags(&policy.evaluate(&with_base(7))), [RiskFlag::Deletion]);
        // No observed base: the ratio does not apply.
        assert_eq!(flags(&policy.evaluate(&with_base(0))), [RiskFlag::Deletion]);
        // Fewer deletions than the minimum: the ratio does not apply.
        let two = [delete("a"), delete("b")];
        let input = PolicyInput { diff: &two, observed_base_nodes: 2, ..PolicyInput::default() };
        assert_eq!(flags(&policy.evaluate(&input)), [RiskFlag::Deletion]);
    }

    /// A policy denying 3 deletions or half the base (of at least 3 paths),
    /// four removals and their four paths: what the undo tests judge.
    fn four_removals() -> (TransactionPolicy, [DiffEntry; 4], Vec<VPath>) {
        let limits = PolicyThresholds {
            deny_delete_ratio_bps: 5_000,
            delete_ratio_min_paths: 3,
            deny_deleted_paths: 3,
            ..PolicyThresholds::default()
        };
        let four = [delete("a"), delete("b"), delete("c"), delete("d")];
        (thresholds_policy(limits), four, ["a", "b", "c", "d"].map(p).to_vec())
    }

    /// ux67 F5, sec73 F4: a revert that removes only what auto-approved
    /// work made waited for a reviewer (deletion), or was denied by the
    /// delete ratio; it loses nothing the workspace held before that work.
    #[test]
    fn removals_that_undo_creations_are_no_deletions() {
        let (policy, four, all) = four_removals();
        let input = |undone: &'static [&'static str]| -> Vec<VPath> { undone.iter().map(|name| p(name)).collect() };
        let undoing =
            PolicyInput { diff: &four, observed_base_nodes: 4, undone_creations: &all, ..PolicyInput::default() };
        assert!(matches!(policy.evaluate(&undoing), Decision::AutoApproved), "{:?}", policy.evaluate(&undoing));
        // Without them: too many deletions.
        let plain = PolicyInput { diff: &four, observed_base_nodes: 4, ..PolicyInput::default() };
        assert_eq!(denied(&policy.evaluate(&plain)).reason, DenyReason::TooManyDeletions);
        // Three of four undone: one deletion, flagged, under every ceiling.
        let three = input(&["a", "b", "d"]);
        let one_left =
            PolicyInput { diff: &four, observed_base_nodes: 4, undone_creations: &three, ..PolicyInput::default() };
        assert_eq!(flags(&policy.evaluate(&one_left)), [RiskFlag::Deletion]);
        // The ceilings count only what is lost: of three removals one undone
        // leaves two, under the ratio's minimum of three paths.
        let one = input(&["c"]);
        let two_lost =
            PolicyInput { diff: &four[..3], observed_base_nodes: 4, undone_creations: &one, ..PolicyInput::default() };
        let decision = policy.evaluate(&two_lost);
        assert_eq!(flags(&decision), [RiskFlag::Deletion]);
        let three_of_four = PolicyInput { diff: &four[..3], observed_base_nodes: 4, ..PolicyInput::default() };
        assert_eq!(denied(&policy.evaluate(&three_of_four)).reason, DenyReason::DeleteRatio);
        // An undone removal excuses no other: the bytes a diff makes
        // elsewhere (a move put back) excuse a removal of those bytes only
        // where that removal would count.
        let moved_back = [
            DiffEntry::between(p("a"), Some(NodeState::file_with(b"moved", 0o644)), None).unwrap(),
            delete("b"),
            delete("c"),
            delete("d"),
            create("e", b"moved"),
        ];
        let a = input(&["a"]);
        let undone_move =
            PolicyInput { diff: &moved_back, observed_base_nodes: 6, undone_creations: &a, ..PolicyInput::default() };
        assert_eq!(denied(&policy.evaluate(&undone_move)).reason, DenyReason::DeleteRatio);
        // A path named that the diff does not remove is nothing.
        let elsewhere = input(&["z"]);
        let unrelated = PolicyInput {
            diff: &four[..1],
            observed_base_nodes: 9,
            undone_creations: &elsewhere,
            ..PolicyInput::default()
        };
        assert_eq!(flags(&policy.evaluate(&unrelated)), [RiskFlag::Deletion]);
    }

    /// ux75 M3: the revert of reviewed work that made many files was
    /// denied by the delete ratio (and by `deny_deleted_paths`), a dead end
    /// no reviewer could approve. Its undone creations count toward no
    /// ceiling, and still flag a deletion: it waits for a reviewer.
    #[test]
    fn removals_that_undo_reviewed_creations_wait_for_a_reviewer() {
        let (policy, four, all) = four_removals();
        let reviewed = PolicyInput {
            diff: &four,
            observed_base_nodes: 4,
            undone_reviewed_creations: &all,
            ..PolicyInput::default()
        };
        let decision = policy.evaluate(&reviewed);
        assert_eq!(flags(&decision), [RiskFlag::Deletion], "{decision:?}");
        // The manifest still counts what it removes.
        let Decision::PendingApproval(manifest) = &decision else { unreachable!() };
        assert_eq!(manifest.metrics.deleted, 4);
        // One removal that undoes nothing of it counts toward the ceilings
        // alone: one, under them; four such are denied.
        let three: Vec<VPath> = ["a", "b", "c"].map(p).to_vec();
        let one_more = PolicyInput {
            diff: &four,
            observed_base_nodes: 4,
            undone_reviewed_creations: &three,
            ..PolicyInput::default()
        };
        assert_eq!(flags(&policy.evaluate(&one_more)), [RiskFlag::Deletion]);
        let none = PolicyInput { diff: &four, observed_base_nodes: 4, ..PolicyInput::default() };
        assert_eq!(denied(&policy.evaluate(&none)).reason, DenyReason::TooManyDeletions);
        // With auto-approved work's undone creations beside them: both excused.
        let (auto, rest) = (vec![p("a"), p("b")], vec![p("c"), p("d")]);
        let both = PolicyInput {
            diff: &four,
            observed_base_nodes: 4,
            undone_creations: &auto,
            undone_reviewed_creations: &rest,
            ..PolicyInput::default()
        };
        assert_eq!(flags(&policy.evaluate(&both)), [RiskFlag::Deletion]);
    }

    #[test]
    fn ceilings_apply_in_order() {
        let limits = PolicyThresholds {
            escalate_touched_paths: 1,
            deny_touched_paths: 1,
            escalate_changed_bytes: 1,
            deny_changed_bytes: 1,
            deny_deleted_paths: 1,
            ..PolicyThresholds::default()
        };
        let policy = thresholds_policy(limits);
        let diff = [delete("a"), delete("b")];
        assert_eq!(denied(&policy.evaluate(&PolicyInput::new(&diff))).reason, DenyReason::TooManyTouchedPaths);
    }

    #[test]
    fn empty_diff_auto_approves_in_every_profile() {
        for profile in PolicyProfile::ALL {
            let input = PolicyInput { renames: 3, observed_base_nodes: 10, ..PolicyInput::default() };
            assert_eq!(policy(profile).evaluate(&input), Decision::AutoApproved, "{profile}");
        }
    }

    #[test]
    fn balanced_auto_approves_small_creates_and_modifies() {
        let policy = policy(PolicyProfile::Balanced);
        let diff = [create("src/new.rs", b"fn main() {}"), modify("src/main.rs"), create("env.txt", b"x")];
        let input = PolicyInput { diff: &diff, observed_base_nodes: 3, ..PolicyInput::default() };
        assert_eq!(policy.evaluate(&input), Decision::AutoApproved);
        let dir = DiffEntry::between(p("new-dir"), None, Some(NodeState::directory(0o755))).unwrap();
        assert_eq!(policy.evaluate(&PolicyInput::new(&[dir])), Decision::AutoApproved);
    }

    #[test]
    fn strict_and_paranoid_escalate_every_mutation() {
        for profile in [PolicyProfile::Strict, PolicyProfile::Paranoid] {
            let diff = [create("a.txt", b"x")];
            let decision = policy(profile).evaluate(&PolicyInput::new(&diff));
            assert_eq!(flags(&decision), [RiskFlag::Mutation], "{profile}");
            let Decision::PendingApproval(manifest) = &decision else { unreachable!() };
            assert_eq!(manifest.policy, policy(profile).digest());
            assert_eq!(manifest.metrics.touched, 1);
            // A run that changes nothing needs no reviewer, even here.
            assert!(policy(profile).evaluate(&PolicyInput::new(&[])).is_auto_approved(), "{profile}");
        }
    }

    #[test]
    fn each_flag_is_raised() {
        let balanced = policy(PolicyProfile::Balanced);
        let pending = |diff: &[DiffEntry], renames: u64| -> Vec<RiskFlag> {
            let input = PolicyInput { diff, renames, ..PolicyInput::default() };
            flags(&balanced.evaluate(&input)).to_vec()
        };
        assert_eq!(pending(&[delete("a")], 0), [RiskFlag::Deletion]);
        assert_eq!(pending(&[create("b", b"x")], 1), [RiskFlag::Rename]);
        let exec = DiffEntry::between(p("run.sh"), None, Some(NodeState::file_with(b"#!", 0o755))).unwrap();
        assert_eq!(pending(&[exec], 0), [RiskFlag::ExecutableChange]);
        let link = DiffEntry::between(p("l"), None, Some(NodeState::symlink(b"/etc/passwd"))).unwrap();
        assert_eq!(pending(&[link], 0), [RiskFlag::SymlinkChange]);
        let many: Vec<DiffEntry> = (0..500).map(|index| create(&format!("f{index:03}"), b"x")).collect();
        assert_eq!(pending(&many, 0), [RiskFlag::LargeTouchedSet]);
        assert_eq!(pending_or_auto(&balanced, &many[..499]), Vec::new());
        assert_eq!(pending(&[create_sized("big.bin", 64 << 20)], 0), [RiskFlag::LargeByteChange]);
        assert_eq!(pending(&[chmod("a", 0o644, 0o600)], 0), [RiskFlag::PermissionChange]);
        assert_eq!(pending(&[chmod("a", 0o644, 0o755)], 0), [RiskFlag::ExecutableChange, RiskFlag::PermissionChange]);
        // Permission bits changed along with the content are changed all the same.
        let file = |content: &[u8], mode| Some(NodeState::file_with(content, mode));
        let opened = DiffEntry::between(p("db.yml"), file(b"pw: a", 0o600), file(b"pw: b", 0o644)).unwrap();
        assert_eq!(pending(&[opened], 0), [RiskFlag::PermissionChange]);
        let edited = DiffEntry::between(p("db.yml"), file(b"pw: a", 0o600), file(b"pw: b", 0o600)).unwrap();
        assert_eq!(pending_or_auto(&balanced, &[edited]), [], "a content change alone");
        let loosened = DiffEntry::between(p("run.sh"), file(b"#!", 0o755), file(b"#!\n", 0o777)).unwrap();
        assert_eq!(pending(&[loosened], 0), [RiskFlag::PermissionChange]);
        // A file or directory every user may write, made or made so (a
        // sticky one too: anyone may still add files to it).
        assert_eq!(
            pending(&[DiffEntry::between(p("w.txt"), None, file(b"x", 0o666)).unwrap()], 0),
            [RiskFlag::PermissionChange]
        );
        let open_dir = DiffEntry::between(p("ww"), None, Some(NodeState::directory(0o2777))).unwrap();
        assert_eq!(pending(&[open_dir], 0), [RiskFlag::PermissionChange]);
        let sticky = DiffEntry::between(p("tmp"), None, Some(NodeState::directory(0o1777))).unwrap();
        assert_eq!(pending(&[sticky], 0), [RiskFlag::PermissionChange]);
        let link = DiffEntry::between(p("l"), None, Some(NodeState::symlink(b"t"))).unwrap();
        assert_eq!(pending(&[link], 0), [RiskFlag::SymlinkChange], "a symlink's fixed mode is no permission");
        assert_eq!(
            pending_or_auto(&balanced, &[DiffEntry::between(p("ok.txt"), None, file(b"x", 0o664)).unwrap()]),
            []
        );
        // Several at once, sorted.
        let mixed = [
            delete("z"),
            chmod("y", 0o600, 0o644),
            DiffEntry::between(p("x"), None, Some(NodeState::symlink(b"t"))).unwrap(),
        ];
        let strict = policy(PolicyProfile::Strict);
        let input = PolicyInput { diff: &mixed, renames: 2, ..PolicyInput::default() };
        assert_eq!(
            flags(&strict.evaluate(&input)),
            [
                RiskFlag::Mutation,
                RiskFlag::Deletion,
                RiskFlag::Rename,
                RiskFlag::SymlinkChange,
                RiskFlag::PermissionChange
            ]
        );
    }

    fn pending_or_auto(policy: &TransactionPolicy, diff: &[DiffEntry]) -> Vec<RiskFlag> {
        match policy.evaluate(&PolicyInput::new(diff)) {
            Decision::AutoApproved => Vec::new(),
            Decision::PendingApproval(manifest) => manifest.flags,
            Decision::Denied(manifest) => panic!("unexpected denial {manifest:?}"),
        }
    }

    #[test]
    fn each_profile_uses_its_thresholds() {
        let cases = [
            (PolicyProfile::Balanced, 500_usize, 64_u64 << 20),
            (PolicyProfile::Strict, 100, 8 << 20),
            (PolicyProfile::Paranoid, 25, 1 << 20),
        ];
        for (profile, escalate_paths, escalate_bytes) in cases {
            let policy = policy(profile);
            assert_eq!(policy.profile(), profile);
            assert_eq!(*policy.thresholds(), PolicyThresholds::for_profile(profile));
            let below: Vec<DiffEntry> =
                (0..escalate_paths - 1).map(|index| create(&format!("f{index:04}"), b"x")).collect();
            let at: Vec<DiffEntry> = (0..escalate_paths).map(|index| create(&format!("f{index:04}"), b"x")).collect();
            assert!(!pending_or_auto(&policy, &below).contains(&RiskFlag::LargeTouchedSet), "{profile}");
            assert!(pending_or_auto(&policy, &at).contains(&RiskFlag::LargeTouchedSet), "{profile}");
            assert!(
                !pending_or_auto(&policy, &[create_sized("b", escalate_bytes - 1)])
                    .contains(&RiskFlag::LargeByteChange)
            );
            assert!(
                pending_or_auto(&policy, &[create_sized("b", escalate_bytes)]).contains(&RiskFlag::LargeByteChange)
            );
            let limits = policy.thresholds();
            let over_bytes = create_sized("huge", limits.deny_changed_bytes + 1);
            assert_eq!(
                denied(&policy.evaluate(&PolicyInput::new(&[over_bytes]))).reason,
                DenyReason::TooManyChangedBytes
            );
            let deletes: Vec<DiffEntry> =
                (0..=limits.deny_deleted_paths).map(|index| delete(&format!("d{index:05}"))).collect();
            assert_eq!(denied(&policy.evaluate(&PolicyInput::new(&deletes))).reason, DenyReason::TooManyDeletions);
            let ratio: Vec<DiffEntry> =
                (0..limits.delete_ratio_min_paths).map(|index| delete(&format!("r{index:05}"))).collect();
            let needed_base = limits.delete_ratio_min_paths * 10_000 / u64::from(limits.deny_delete_ratio_bps);
            let input = PolicyInput { diff: &ratio, observed_base_nodes: needed_base, ..PolicyInput::default() };
            assert_eq!(denied(&policy.evaluate(&input)).reason, DenyReason::DeleteRatio, "{profile}");
            let input = PolicyInput { diff: &ratio, observed_base_nodes: needed_base + 1, ..PolicyInput::default() };
            assert!(!policy.evaluate(&input).is_denied(), "{profile}");
        }
        let touched: Vec<DiffEntry> = (0..=5_000).map(|index| create(&format!("t{index:05}"), b"x")).collect();
        assert_eq!(
            denied(&policy(PolicyProfile::Paranoid).evaluate(&PolicyInput::new(&touched))).reason,
            DenyReason::TooManyTouchedPaths
        );
        assert!(!policy(PolicyProfile::Strict).evaluate(&PolicyInput::new(&touched)).is_denied());
    }

    #[test]
    fn digest_tracks_every_threshold_and_rule() {
        let base = TransactionPolicy::default();
        assert_eq!(base.digest(), TransactionPolicy::from_profile(PolicyProfile::Balanced, None).digest());
        assert_eq!(base.digest(), TransactionPolicy::from_profile(PolicyProfile::Balanced, Some(&p(".vsh"))).digest());
        let same = TransactionPolicy::new(
            PolicyProfile::Balanced,
            PolicyThresholds::default(),
            CallPolicy::balanced_default(None),
        )
        .unwrap();
        assert_eq!(same.digest(), base.digest());
        assert_eq!(same, base);
        let limits = PolicyThresholds::default();
        let threshold_variants = [
            PolicyThresholds { escalate_touched_paths: 499, ..limits },
            PolicyThresholds { escalate_changed_bytes: 1, ..limits },
            PolicyThresholds { deny_touched_paths: 50_001, ..limits },
            PolicyThresholds { deny_changed_bytes: (1 << 30) + 1, ..limits },
            PolicyThresholds { deny_deleted_paths: 9_999, ..limits },
            PolicyThresholds { deny_delete_ratio_bps: 7_501, ..limits },
            PolicyThresholds { delete_ratio_min_paths: 101, ..limits },
            PolicyThresholds { rewrite_escalate_ratio_bps: 4_999, ..limits },
        ];
        let mut seen = vec![base.digest()];
        for thresholds in threshold_variants {
            let changed =
                TransactionPolicy::new(PolicyProfile::Balanced, thresholds, CallPolicy::balanced_default(None))
                    .unwrap();
            assert!(!seen.contains(&changed.digest()), "{thresholds:?}");
            seen.push(changed.digest());
        }
        let extra = ProtectedRule::new(Pattern::parse("private/**").unwrap(), AccessSet::ALL, RuleLabel::Custom);
        let rule_variants = [
            CallPolicy::balanced_default(None).with_rules([extra.clone()]),
            CallPolicy::balanced_default(None)
                .with_rules([ProtectedRule { access: AccessSet::READS, ..extra.clone() }]),
            CallPolicy::balanced_default(None)
                .with_rules([ProtectedRule { label: RuleLabel::Secret, ..extra.clone() }]),
            CallPolicy::balanced_default(None).with_rules([extra.clone().with_reason("private notes")]),
            CallPolicy::balanced_default(None).with_writable_roots([p("src")]),
            CallPolicy::balanced_default(None).with_writable_roots([p("src"), p("docs")]),
            CallPolicy::balanced_default(None).with_writable_roots([]),
            CallPolicy::with_defaults(None, crate::rules::DefaultRules { secrets: false, git: true }),
            CallPolicy::with_defaults(None, crate::rules::DefaultRules { secrets: true, git: false }),
            CallPolicy::balanced_default(Some(&p("data"))),
            CallPolicy::new(Vec::new()),
        ];
        for calls in rule_variants {
            let changed = TransactionPolicy::new(PolicyProfile::Balanced, limits, calls).unwrap();
            assert!(!seen.contains(&changed.digest()), "{:?}", changed.calls());
            seen.push(changed.digest());
        }
        for profile in [PolicyProfile::Strict, PolicyProfile::Paranoid] {
            let same_limits = TransactionPolicy::new(profile, limits, CallPolicy::balanced_default(None)).unwrap();
            assert!(!seen.contains(&same_limits.digest()), "{profile}");
            seen.push(same_limits.digest());
        }
    }

    /// Diff, observed base nodes, expected reason, threshold, limit, value,
    /// allowing value, remedy, and how to set the threshold.
    type CeilingCase<'a> =
        (&'a [DiffEntry], u64, DenyReason, &'a str, u64, u64, u64, &'a str, fn(&mut PolicyThresholds, u64));

    fn resize(path: &str, before: u64, after: u64) -> DiffEntry {
        // Before and after differ in content even at equal sizes, so each is a Modify.
        let state = |size: u64, salt: &str| NodeState {
            size,
            ..NodeState::file_with(format!("{path}:{salt}:{size}").as_bytes(), 0o644)
        };
        DiffEntry::between(p(path), Some(state(before, "before")), Some(state(after, "after"))).unwrap()
    }

    #[test]
    fn content_rewrites_escalate_per_profile() {
        let balanced = policy(PolicyProfile::Balanced);
        assert_eq!(pending_or_auto(&balanced, &[resize("a.txt", 100, 60)]), Vec::new());
        assert_eq!(pending_or_auto(&balanced, &[resize("a.txt", 100, 49)]), [RiskFlag::ContentRewrite]);
        assert_eq!(pending_or_auto(&balanced, &[resize("a.txt", 100, 0)]), [RiskFlag::ContentRewrite]);
        // A same-size rewrite is invisible to this rule.
        assert_eq!(pending_or_auto(&balanced, &[modify("a.txt"), resize("b.txt", 8, 8)]), Vec::new());
        let cases = [(PolicyProfile::Strict, 75, 74), (PolicyProfile::Paranoid, 90, 89)];
        for (profile, kept, flagged) in cases {
            let policy = policy(profile);
            assert_eq!(pending_or_auto(&policy, &[resize("a", 100, kept)]), [RiskFlag::Mutation], "{profile}");
            assert_eq!(
                pending_or_auto(&policy, &[resize("a", 100, flagged)]),
                [RiskFlag::Mutation, RiskFlag::ContentRewrite],
                "{profile}"
            );
        }
        let Decision::PendingApproval(manifest) =
            balanced.evaluate(&PolicyInput::new(&[resize("a", 100, 10), resize("b", 100, 0), resize("c", 100, 90)]))
        else {
            panic!("expected pending approval")
        };
        assert_eq!(manifest.metrics.rewritten, 2);
        assert_eq!(manifest.metrics.modified, 3);
        // The policy's own ratio decides.
        let loose =
            thresholds_policy(PolicyThresholds { rewrite_escalate_ratio_bps: 10_000, ..PolicyThresholds::default() });
        assert_eq!(pending_or_auto(&loose, &[resize("a", 100, 1)]), Vec::new());
        assert_eq!(pending_or_auto(&loose, &[resize("a", 100, 0)]), [RiskFlag::ContentRewrite]);
    }

    #[test]
    fn deny_manifest_explains_each_denial() {
        let calls = CallPolicy::balanced_default(None)
            .with_rules([ProtectedRule::new(
                Pattern::parse("config/prod/**").unwrap(),
                AccessSet::MUTATIONS,
                RuleLabel::Custom,
            )
            .with_reason("production config")])
            .with_writable_roots([p("config"), p("src"), p(".git"), p(".vsh")]);
        let policy = TransactionPolicy::new(PolicyProfile::Balanced, PolicyThresholds::default(), calls).unwrap();
        let diff = [
            modify(".git/HEAD"),
            delete(".vsh/x"),
            create("Makefile", b"all:"),
            create("config/prod/db.yml", b"x"),
            create("config/prod/z.yml", b"x"),
            create("src/key.pem", b"k"),
            create("src/ok.rs", b"fine"),
        ];
        let decision = policy.evaluate(&PolicyInput::new(&diff));
        let manifest = denied(&decision);
        assert_eq!(manifest.reason, DenyReason::ProtectedMutation);
        assert_eq!(manifest.ceiling, None);
        let explained: Vec<(&str, RuleLabel, AccessSet, &str)> = manifest
            .denied
            .iter()
            .map(|denial| (denial.rule.as_str(), denial.label, denial.rule_access, denial.remedy.as_str()))
            .collect();
        let git = "built-in git rule `**/.git/**`: a run never changes .git, so change the files themselves (to restore one, \
                   read it with git show HEAD:PATH and write it, which discards its uncommitted changes; to move one, mv); the change is reviewed like any other; \
                   an operator may allow .git changes with defaults.git = false";
        let runtime = "nothing can: vsh's runtime data (rule `**/.vsh/**`) is protected whatever the policy says";
        let roots = "add a root containing `Makefile` to defaults.writable_roots (now writable_roots = [\".git\", \
                     \".vsh\", \"config\", \"src\"]), or remove defaults.writable_roots";
        let custom = "remove or narrow the `[[protect]]` rule `config/prod/**` (reason: production config), or leave \
                      `create` out of it: `access = [\"modify\", \"delete\", \"rename-source\", \
                      \"rename-destination\"]`";
        let secret = "set defaults.secrets = false (turns off the built-in secret rules, `**/*.pem` among them)";
        assert_eq!(
            explained,
            [
                ("**/.git/**", RuleLabel::Git, AccessSet::MUTATIONS, git),
                ("**/.vsh/**", RuleLabel::RuntimeData, AccessSet::ALL, runtime),
                (
                    r#"writable_roots = [".git", ".vsh", "config", "src"]"#,
                    RuleLabel::WritableRoots,
                    AccessSet::MUTATIONS,
                    roots
                ),
                ("config/prod/**", RuleLabel::Custom, AccessSet::MUTATIONS, custom),
                ("config/prod/**", RuleLabel::Custom, AccessSet::MUTATIONS, custom),
                ("**/*.pem", RuleLabel::Secret, AccessSet::ALL, secret),
            ]
        );
        // The manifest's remedy lists each distinct remedy once, in order.
        assert_eq!(manifest.remedy, [git, runtime, roots, custom, secret].join("; "));
        // Guest-reported denials are explained the same way.
        let attempt = policy.calls().authorize(&p("a/.env"), AccessKind::ContentRead).unwrap_err();
        let input = PolicyInput { denied: std::slice::from_ref(&attempt), ..PolicyInput::default() };
        let decision = policy.evaluate(&input);
        let manifest = denied(&decision);
        assert_eq!(manifest.denied[0].denied_access(), attempt);
        assert_eq!(
            manifest.remedy,
            "set defaults.secrets = false (turns off the built-in secret rules, `**/.env*/**` among them)"
        );
        // Unlisted denials are counted in the remedy.
        let many: Vec<DiffEntry> = (0..70).map(|index| create(&format!("k{index:03}.key"), b"k")).collect();
        let decision = policy.evaluate(&PolicyInput::new(&many));
        // (The secret rule is reported before the allow-list.)
        assert_eq!(
            denied(&decision).remedy,
            "set defaults.secrets = false (turns off the built-in secret rules, `**/*.key` among them); and 6 more denials not listed"
        );
    }

    #[test]
    fn ceiling_denials_name_the_threshold_and_the_allowing_value() {
        let limits = PolicyThresholds {
            escalate_touched_paths: 3,
            deny_touched_paths: 3,
            escalate_changed_bytes: 12,
            deny_changed_bytes: 12,
            deny_deleted_paths: 2,
            deny_delete_ratio_bps: 5_000,
            delete_ratio_min_paths: 2,
            ..PolicyThresholds::default()
        };
        let four: Vec<DiffEntry> = (0..4).map(|index| create(&format!("f{index}"), b"x")).collect();
        let big = [create_sized("big", 13)];
        let deletes = [delete("a"), delete("b"), delete("c")];
        let two_deletes = [delete("a"), delete("b")];
        let cases: [CeilingCase<'_>; 5] = [
            (
                &four,
                0,
                DenyReason::TooManyTouchedPaths,
                "thresholds.deny_touched_paths",
                3,
                4,
                4,
                "raise thresholds.deny_touched_paths from 3 to at least 4 (the diff touches 4 paths)",
                |limits, value| limits.deny_touched_paths = value,
            ),
            (
                &big,
                0,
                DenyReason::TooManyChangedBytes,
                "thresholds.deny_changed_bytes",
                12,
                13,
                13,
                "raise thresholds.deny_changed_bytes from 12 to at least 13 (the diff changes 13 bytes)",
                |limits, value| limits.deny_changed_bytes = value,
            ),
            (
                &deletes,
                0,
                DenyReason::TooManyDeletions,
                "thresholds.deny_deleted_paths",
                2,
                3,
                3,
                "raise thresholds.deny_deleted_paths from 2 to at least 3 (the diff deletes 3 paths)",
                |limits, value| limits.deny_deleted_paths = value,
            ),
            (
                &two_deletes,
                3,
                DenyReason::DeleteRatio,
                "thresholds.deny_delete_ratio",
                5_000,
                6_666,
                6_667,
                "raise thresholds.deny_delete_ratio from 0.5 to at least 0.6667 (the diff deletes 2 paths, 0.6666 of \
                 the 3 observed base nodes), or thresholds.delete_ratio_min_paths from 2 to at least 3",
                |limits, value| limits.deny_delete_ratio_bps = u32::try_from(value).unwrap(),
            ),
            (
                &two_deletes,
                2,
                DenyReason::DeleteRatio,
                "thresholds.delete_ratio_min_paths",
                2,
                2,
                3,
                "raise thresholds.delete_ratio_min_paths from 2 to at least 3 (the diff deletes 2 paths, 1 of the 2 \
                 observed base nodes)",
                |limits, value| limits.delete_ratio_min_paths = value,
            ),
        ];
        for (diff, observed_base_nodes, reason, threshold, limit, value, allowing, remedy, raise) in cases {
            let policy = thresholds_policy(limits);
            let input = PolicyInput { diff, observed_base_nodes, ..PolicyInput::default() };
            let decision = policy.evaluate(&input);
            let manifest = denied(&decision);
            assert_eq!(manifest.reason, reason);
            let breach = manifest.ceiling.as_ref().expect("a ceiling denial names its threshold");
            assert_eq!(
                (breach.threshold.as_str(), breach.limit, breach.value, breach.allowing),
                (threshold, limit, value, allowing),
                "{reason}"
            );
            assert_eq!(manifest.remedy, remedy);
            // The allowing value passes this ceiling; one less does not.
            let mut raised = limits;
            raise(&mut raised, allowing);
            raised.escalate_touched_paths = raised.escalate_touched_paths.min(raised.deny_touched_paths);
            let decision = thresholds_policy(raised).evaluate(&input);
            assert!(!matches!(&decision, Decision::Denied(manifest) if manifest.reason == reason), "{reason}");
            let mut short = limits;
            raise(&mut short, allowing - 1);
            if short.validate().is_ok() {
                assert_eq!(denied(&thresholds_policy(short).evaluate(&input)).reason, reason);
            }
        }
    }

    #[test]
    fn ratio_fractions_render_like_the_file() {
        for (bps, text) in [(5_000, "0.5"), (10_000, "1"), (1, "0.0001"), (6_667, "0.6667"), (2_500, "0.25"), (0, "0")]
        {
            assert_eq!(fraction(bps), text);
        }
    }

    #[test]
    fn new_rejects_invalid_thresholds() {
        let bad = PolicyThresholds { deny_deleted_paths: 0, ..PolicyThresholds::default() };
        let error = TransactionPolicy::new(PolicyProfile::Strict, bad, CallPolicy::balanced_default(None)).unwrap_err();
        assert_eq!(error.field(), Some("deny_deleted_paths"));
    }
}
