//! Review rules: paths whose changes wait for a reviewer, or are judged by a
//! stricter rewrite ratio, whatever the rest of the policy would decide.
//!
//! A [`ReviewRule`] never denies and never lets anything through that would
//! wait otherwise: it only adds [`RiskFlag::ReviewRule`](crate::RiskFlag) to a
//! diff that changes a path it covers in one of its [`ReviewRule::changes`],
//! and lowers the `content-rewrite` ratio of the files it covers to its
//! [`ReviewRule::rewrite_ratio_bps`] (never raises it: the smallest of the
//! thresholds' ratio and every covering rule's applies). So `tests/**` can
//! wait for a reviewer at every deletion, or at a cut of a tenth of a test
//! file, while the rest of the workspace keeps the profile's judgment.
//!
//! A diff's changes are named as the diff has them: `create` (a path the
//! workspace did not hold, a rename's destination), `modify` (an existing
//! path's content, kind or mode) and `delete` (a path removed, a rename's
//! source, every path under a directory removed).

use std::collections::BTreeMap;
use std::fmt;

use vsh_types::canon;
use vsh_types::{DiffEntry, VPath};

use crate::access::{AccessKind, AccessSet};
use crate::pattern::Pattern;

/// The most review rules a policy holds: each covering rule is matched
/// against every path a diff touches.
pub const MAX_REVIEW_RULES: usize = 64;

/// The changes a review rule can name: create, modify, delete.
pub const REVIEWABLE_CHANGES: AccessSet =
    AccessSet::NONE.with(AccessKind::Create).with(AccessKind::Modify).with(AccessKind::Delete);

/// Paths whose changes wait for a reviewer (see the [module
/// documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReviewRule {
    /// Which paths the rule covers.
    pub pattern: Pattern,
    /// Which changes of a covered path wait for a reviewer: a subset of
    /// [`REVIEWABLE_CHANGES`] (others are ignored), possibly empty when the
    /// rule only sets a ratio.
    pub changes: AccessSet,
    /// The `content-rewrite` ratio for the files it covers, in basis points,
    /// when the rule sets one (it applies only where it is below the
    /// thresholds' and every other covering rule's).
    pub rewrite_ratio_bps: Option<u32>,
    /// The operator's explanation, shown to reviewers.
    pub reason: Option<String>,
}

impl ReviewRule {
    /// Whether `entry` is a change this rule makes wait for a reviewer.
    pub fn waits_for(&self, entry: &DiffEntry) -> bool {
        self.changes.contains(crate::transaction::mutation_of(entry.kind)) && self.pattern.matches(&entry.path)
    }

    /// Whether this rule covers `path` (whatever the change).
    pub fn covers(&self, path: &VPath) -> bool {
        self.pattern.matches(path)
    }
}

impl fmt::Display for ReviewRule {
    /// `` `tests/**` reviews create+modify+delete ``, with the ratio
    /// (`, rewrite ratio 0.1`) and the reason (`: tests guard the build`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` reviews ", self.pattern)?;
        let changes = self.changes.intersection(REVIEWABLE_CHANGES);
        if changes.is_empty() {
            f.write_str("rewrites")?;
        } else {
            write!(f, "{changes}")?;
        }
        if let Some(bps) = self.rewrite_ratio_bps {
            write!(f, ", rewrite ratio {}", crate::transaction::fraction(u64::from(bps)))?;
        }
        if let Some(reason) = &self.reason {
            write!(f, ": {reason}")?;
        }
        Ok(())
    }
}

/// Sort and merge rules by pattern (changes united, the smallest ratio,
/// distinct reasons sorted and joined with `; `), so a policy's digest does
/// not depend on the order its file lists them in; a rule that neither makes
/// a change wait nor sets a ratio is dropped.
pub(crate) fn canonical_review(rules: Vec<ReviewRule>) -> Vec<ReviewRule> {
    let mut merged: BTreeMap<Pattern, ReviewRule> = BTreeMap::new();
    for mut rule in rules {
        rule.changes = rule.changes.intersection(REVIEWABLE_CHANGES);
        if rule.changes.is_empty() && rule.rewrite_ratio_bps.is_none() {
            continue;
        }
        match merged.get_mut(&rule.pattern) {
            None => {
                merged.insert(rule.pattern.clone(), rule);
            }
            Some(kept) => {
                kept.changes = kept.changes.union(rule.changes);
                kept.rewrite_ratio_bps = match (kept.rewrite_ratio_bps, rule.rewrite_ratio_bps) {
                    (Some(one), Some(other)) => Some(one.min(other)),
                    (one, other) => one.or(other),
                };
                kept.reason = match (kept.reason.take(), rule.reason) {
                    (Some(one), Some(other)) if one != other => {
                        let mut reasons: Vec<&str> = one.split("; ").chain(other.split("; ")).collect();
                        reasons.sort_unstable();
                        reasons.dedup();
                        Some(reasons.join("; "))
                    }
                    (one, other) => one.or(other),
                };
            }
        }
    }
    merged.into_values().collect()
}

/// Append the canonical encoding of `rules` (already canonical): the tag
/// `review`, a `u64` count, then per rule the pattern text as a byte string,
/// whether it ignores case (`u8`), the change bits as a `u32`, the ratio
/// (flag `u8`, then a `u32`) and the reason (flag `u8`, then a byte string).
pub(crate) fn encode_review(rules: &[ReviewRule], out: &mut Vec<u8>) {
    canon::put_bytes(out, b"review");
    canon::put_u64(out, rules.len() as u64);
    for rule in rules {
        canon::put_bytes(out, rule.pattern.as_str().as_bytes());
        canon::put_u8(out, u8::from(rule.pattern.is_case_insensitive()));
        canon::put_u32(out, u32::from(rule.changes.bits()));
        match rule.rewrite_ratio_bps {
            None => canon::put_u8(out, 0),
            Some(bps) => {
                canon::put_u8(out, 1);
                canon::put_u32(out, bps);
            }
        }
        match &rule.reason {
            None => canon::put_u8(out, 0),
            Some(reason) => {
                canon::put_u8(out, 1);
                canon::put_bytes(out, reason.as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use vsh_types::NodeState;

    use super::*;

    fn rule(pattern: &str, changes: AccessSet, ratio: Option<u32>, reason: Option<&str>) -> ReviewRule {
        ReviewRule {
            pattern: Pattern::parse(pattern).unwrap().case_insensitive(),
            changes,
            rewrite_ratio_bps: ratio,
            reason: reason.map(str::to_owned),
        }
    }

    fn entry(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> DiffEntry {
        let state = |bytes: &[u8]| NodeState::file_with(bytes, 0o644);
        DiffEntry::between(VPath::parse(path).unwrap(), before.map(state), after.map(state)).unwrap()
    }

    #[test]
    fn a_rule_waits_for_the_changes_it_names_on_the_paths_it_covers() {
        let deletions = rule("tests/**", AccessSet::single(AccessKind::Delete), None, None);
        assert!(deletions.waits_for(&entry("tests/test_a.py", Some(b"x"), None)));
        assert!(deletions.waits_for(&entry("TESTS/deep/test_b.py", Some(b"x"), None)));
        assert!(!deletions.waits_for(&entry("tests/test_a.py", Some(b"x"), Some(b"y"))));
        assert!(!deletions.waits_for(&entry("src/a.py", Some(b"x"), None)));
        let all = rule("tests/**", REVIEWABLE_CHANGES, None, None);
        assert!(all.waits_for(&entry("tests/new.py", None, Some(b"y"))));
        assert!(all.waits_for(&entry("tests/a.py", Some(b"x"), Some(b"y"))));
        let mode = DiffEntry::between(
            VPath::parse("tests/a.py").unwrap(),
            Some(NodeState::file_with(b"x", 0o644)),
            Some(NodeState::file_with(b"x", 0o600)),
        )
        .unwrap();
        assert!(all.waits_for(&mode), "a mode change is a modify");
        assert!(!deletions.waits_for(&mode));
        let ratio_only = rule("tests/**", AccessSet::NONE, Some(1_000), None);
        assert!(!ratio_only.waits_for(&entry("tests/a.py", Some(b"x"), None)));
    }

    #[test]
    fn rules_merge_by_pattern_whatever_their_order() {
        let one = vec![
            rule("tests/**", AccessSet::single(AccessKind::Delete), Some(2_000), Some("b")),
            rule("docs/**", AccessSet::NONE, None, None),
            rule("tests/**", AccessSet::single(AccessKind::Modify), Some(1_000), Some("a")),
        ];
        let mut other = one.clone();
        other.reverse();
        let merged = canonical_review(one);
        assert_eq!(merged, canonical_review(other));
        assert_eq!(merged.len(), 1, "a rule that does nothing is dropped: {merged:?}");
        let tests = &merged[0];
        assert_eq!(tests.changes, AccessSet::single(AccessKind::Delete).with(AccessKind::Modify));
        assert_eq!(tests.rewrite_ratio_bps, Some(1_000));
        assert_eq!(tests.reason.as_deref(), Some("a; b"));
        assert_eq!(tests.to_string(), "`tests/**` reviews modify+delete, rewrite ratio 0.1: a; b");
    }

    #[test]
    fn the_encoding_names_every_part() {
        let base = rule("tests/**", AccessSet::single(AccessKind::Delete), Some(1_000), Some("r"));
        let encoded = |rule: &ReviewRule| {
            let mut out = Vec::new();
            encode_review(std::slice::from_ref(rule), &mut out);
            out
        };
        let variants = [
            ReviewRule { pattern: Pattern::parse("tests/**").unwrap(), ..base.clone() },
            ReviewRule { changes: AccessSet::single(AccessKind::Modify), ..base.clone() },
            ReviewRule { rewrite_ratio_bps: Some(999), ..base.clone() },
            ReviewRule { rewrite_ratio_bps: None, ..base.clone() },
            ReviewRule { reason: None, ..base.clone() },
        ];
        for variant in &variants {
            assert_ne!(encoded(variant), encoded(&base), "{variant:?}");
        }
    }
}
