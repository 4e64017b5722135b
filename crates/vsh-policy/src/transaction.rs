//! [`TransactionPolicy`]: profile, thresholds and protected paths, bound together
//! by one digest, and the decision procedure over a transaction's diff.
//!
//! # Decision order
//!
//! 1. Any denied access the guest attempted (even one it caught):
//!    [`DenyReason::ProtectedAccessAttempt`].
//! 2. Any diff entry whose mutation the [`CallPolicy`] refuses (Create as
//!    `Create`, Delete as `Delete`, Modify and `MetadataChange` as `Modify`):
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

use vsh_types::canon;
use vsh_types::{DiffEntry, DiffKind, PolicyDigest, VPath};

use crate::access::AccessKind;
use crate::decision::{Decision, DenyManifest, DenyReason, MAX_LISTED_DENIALS, RiskFlag, RiskManifest, RiskMetrics};
use crate::profile::{PolicyConfigError, PolicyProfile, PolicyThresholds};
use crate::rules::{CallPolicy, DeniedAccess};

/// The schema tag hashed first into every [`PolicyDigest`]. Changing how a
/// policy is encoded or evaluated changes this tag.
pub const POLICY_SCHEMA: &str = "vsh-policy-schema-1";

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

    fn assemble(profile: PolicyProfile, thresholds: PolicyThresholds, calls: CallPolicy) -> Self {
        let mut bytes = Vec::new();
        canon::put_bytes(&mut bytes, POLICY_SCHEMA.as_bytes());
        canon::put_u8(&mut bytes, profile.tag());
        thresholds.encode_canonical(&mut bytes);
        calls.encode_canonical(&mut bytes);
        let digest = PolicyDigest::digest(&bytes);
        Self { profile, thresholds, calls, digest }
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

    /// The digest over [`POLICY_SCHEMA`], the profile tag, the thresholds and the
    /// canonical rules. Pending approvals are bound to it.
    pub fn digest(&self) -> PolicyDigest {
        self.digest
    }

    /// Decide on a transaction (see the [module documentation](self) for the order).
    pub fn evaluate(&self, input: &PolicyInput<'_>) -> Decision {
        let metrics = RiskMetrics::measure(input.diff, input.renames, input.observed_base_nodes);
        if !input.denied.is_empty() {
            let listed = input.denied.iter().take(MAX_LISTED_DENIALS).cloned().collect();
            return self.deny(DenyReason::ProtectedAccessAttempt, listed, input.denied.len() as u64, metrics);
        }
        let mut listed = Vec::new();
        let mut total: u64 = 0;
        for entry in input.diff {
            if let Err(denial) = self.calls.authorize(&entry.path, mutation_of(entry.kind)) {
                total += 1;
                if listed.len() < MAX_LISTED_DENIALS {
                    listed.push(denial);
                }
            }
        }
        if total > 0 {
            return self.deny(DenyReason::ProtectedMutation, listed, total, metrics);
        }
        if let Some(reason) = self.ceiling(&metrics, input.observed_base_nodes) {
            return self.deny(reason, Vec::new(), 0, metrics);
        }
        if input.diff.is_empty() {
            return Decision::AutoApproved;
        }
        let flags = self.flags(&metrics);
        if flags.is_empty() {
            Decision::AutoApproved
        } else {
            Decision::PendingApproval(RiskManifest { metrics, flags, policy: self.digest })
        }
    }

    fn ceiling(&self, metrics: &RiskMetrics, observed_base_nodes: u64) -> Option<DenyReason> {
        let limits = &self.thresholds;
        if metrics.touched > limits.deny_touched_paths {
            Some(DenyReason::TooManyTouchedPaths)
        } else if metrics.changed_bytes > limits.deny_changed_bytes {
            Some(DenyReason::TooManyChangedBytes)
        } else if metrics.deleted > limits.deny_deleted_paths {
            Some(DenyReason::TooManyDeletions)
        } else if observed_base_nodes > 0
            && metrics.deleted >= limits.delete_ratio_min_paths
            && metrics.delete_ratio_bps >= limits.deny_delete_ratio_bps
        {
            Some(DenyReason::DeleteRatio)
        } else {
            None
        }
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
        ];
        let mut flags: Vec<RiskFlag> =
            candidates.into_iter().filter_map(|(flag, raised)| raised.then_some(flag)).collect();
        flags.sort_unstable();
        flags.dedup();
        flags
    }

    fn deny(&self, reason: DenyReason, denied: Vec<DeniedAccess>, denied_total: u64, metrics: RiskMetrics) -> Decision {
        Decision::Denied(DenyManifest { reason, denied, denied_total, metrics, policy: self.digest })
    }
}

impl Default for TransactionPolicy {
    /// Balanced, with the default protected paths.
    fn default() -> Self {
        Self::from_profile(PolicyProfile::Balanced, None)
    }
}

/// The access a diff entry exercises.
fn mutation_of(kind: DiffKind) -> AccessKind {
    match kind {
        DiffKind::Create => AccessKind::Create,
        DiffKind::Delete => AccessKind::Delete,
        DiffKind::Modify | DiffKind::MetadataChange => AccessKind::Modify,
    }
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
        assert_eq!(manifest.denied, vec![attempt]);
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

    #[test]
    fn denial_lists_are_capped_but_counted() {
        let policy = policy(PolicyProfile::Balanced);
        let diff: Vec<DiffEntry> = (0..100).map(|index| create(&format!("k{index:03}.key"), b"k")).collect();
        let decision = policy.evaluate(&PolicyInput::new(&diff));
        let manifest = denied(&decision);
        assert_eq!(manifest.denied.len(), MAX_LISTED_DENIALS);
        assert_eq!(manifest.denied_total, 100);
        assert_eq!(manifest.denied[0].path, p("k000.key"));
        let attempts = vec![manifest.denied[0].clone(); 70];
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
            CallPolicy::balanced_default(None).with_rules([ProtectedRule { label: RuleLabel::Secret, ..extra }]),
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

    #[test]
    fn new_rejects_invalid_thresholds() {
        let bad = PolicyThresholds { deny_deleted_paths: 0, ..PolicyThresholds::default() };
        let error = TransactionPolicy::new(PolicyProfile::Strict, bad, CallPolicy::balanced_default(None)).unwrap_err();
        assert_eq!(error.field(), Some("deny_deleted_paths"));
    }
}
