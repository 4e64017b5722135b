//! [`PolicyProfile`] and [`PolicyThresholds`]: how much change a transaction may
//! make before it escalates to a reviewer or is denied outright.
//!
//! | profile | escalate: paths / bytes | deny: paths / bytes / deletes / ratio (min paths) | rewrite ratio | every mutation escalates |
//! |---|---|---|---|---|
//! | Balanced | 500 / 64 MiB | 50,000 / 1 GiB / 10,000 / 75% (100) | 0.5 | no |
//! | Strict | 100 / 8 MiB | 10,000 / 256 MiB / 2,000 / 50% (25) | 0.25 | yes |
//! | Paranoid | 25 / 1 MiB | 5,000 / 128 MiB / 500 / 25% (10) | 0.1 | yes |
//!
//! The rewrite ratio drives [`RiskFlag::ContentRewrite`]: an existing file that
//! loses more than `ratio` of the content a reviewer last saw (in one diff or
//! over unreviewed commits), or is emptied, escalates (see
//! [`is_content_rewrite`]).
//!
//! [`RiskFlag::ContentRewrite`]: crate::RiskFlag::ContentRewrite
//! [`is_content_rewrite`]: crate::decision::is_content_rewrite

use std::fmt;

use serde::{Deserialize, Serialize};
use vsh_types::canon;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// The largest delete ratio, in basis points (100%).
pub const MAX_RATIO_BPS: u32 = 10_000;

/// A named policy profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum PolicyProfile {
    /// Small, non-destructive edits auto-approve.
    #[default]
    Balanced,
    /// Every mutation escalates to a reviewer.
    Strict,
    /// Every mutation escalates, and the ceilings are tighter.
    Paranoid,
}

impl PolicyProfile {
    /// Every profile, loosest first.
    pub const ALL: [PolicyProfile; 3] = [Self::Balanced, Self::Strict, Self::Paranoid];

    /// The canonical tag: Balanced=1, Strict=2, Paranoid=3.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Balanced => 1,
            Self::Strict => 2,
            Self::Paranoid => 3,
        }
    }

    /// The lower-case name (`balanced`, `strict`, `paranoid`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Balanced => "balanced",
            Self::Strict => "strict",
            Self::Paranoid => "paranoid",
        }
    }

    /// Whether every non-empty diff escalates with the `Mutation` flag.
    pub const fn escalates_every_mutation(self) -> bool {
        !matches!(self, Self::Balanced)
    }
}

impl fmt::Display for PolicyProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PolicyProfile {
    type Err = PolicyConfigError;
    /// Parse a profile name, ignoring ASCII case.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|profile| profile.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| PolicyConfigError::UnknownProfile { name: name.chars().take(64).collect() })
    }
}

/// An invalid policy configuration. Every variant about thresholds names the
/// offending field (see [`PolicyConfigError::field`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyConfigError {
    /// A threshold was zero.
    #[error("policy threshold `{field}` must be greater than zero")]
    ZeroThreshold {
        /// The field's name.
        field: &'static str,
    },
    /// An escalation threshold was above the matching denial threshold.
    #[error("policy threshold `{field}` ({value}) exceeds `{limit_field}` ({limit})")]
    EscalateAboveDeny {
        /// The escalation field's name.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The denial field it must not exceed.
        limit_field: &'static str,
        /// That field's value.
        limit: u64,
    },
    /// A ratio in basis points was outside `1..=10000`.
    #[error("policy threshold `{field}` must be within 1..=10000 basis points, got {value}")]
    RatioOutOfRange {
        /// The field's name.
        field: &'static str,
        /// The rejected value.
        value: u32,
    },
    /// A profile name was not recognized.
    #[error("unknown policy profile {name:?}; expected balanced, strict or paranoid")]
    UnknownProfile {
        /// The rejected name (at most 64 characters of it).
        name: String,
    },
}

impl PolicyConfigError {
    /// The name of the offending threshold field, if the error is about one.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::ZeroThreshold { field }
            | Self::EscalateAboveDeny { field, .. }
            | Self::RatioOutOfRange { field, .. } => Some(field),
            Self::UnknownProfile { .. } => None,
        }
    }
}

/// The numeric limits of a policy.
///
/// A diff escalates when it touches at least `escalate_touched_paths` paths or
/// changes at least `escalate_changed_bytes` bytes, and is denied when it touches
/// more than `deny_touched_paths`, changes more than `deny_changed_bytes`, deletes
/// more than `deny_deleted_paths`, or deletes at least `delete_ratio_min_paths`
/// paths amounting to at least `deny_delete_ratio_bps` of the observed base.
/// An existing file rewritten smaller than `1 - rewrite_escalate_ratio_bps /
/// 10000` of its size escalates with [`RiskFlag::ContentRewrite`].
///
/// Canonical encoding: the six `u64` fields and the two `u32` ratios, in
/// declaration order.
///
/// [`RiskFlag::ContentRewrite`]: crate::RiskFlag::ContentRewrite
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyThresholds {
    /// Touched paths at which a diff escalates.
    pub escalate_touched_paths: u64,
    /// Changed bytes at which a diff escalates.
    pub escalate_changed_bytes: u64,
    /// Touched paths above which a diff is denied.
    pub deny_touched_paths: u64,
    /// Changed bytes above which a diff is denied.
    pub deny_changed_bytes: u64,
    /// Deleted paths above which a diff is denied.
    pub deny_deleted_paths: u64,
    /// Deleted share of the observed base (basis points) at which a diff is denied.
    pub deny_delete_ratio_bps: u32,
    /// Fewest deleted paths for which the delete ratio applies.
    pub delete_ratio_min_paths: u64,
    /// Share of an existing file's size (basis points) that a rewrite may cut
    /// before it escalates with [`RiskFlag::ContentRewrite`].
    ///
    /// [`RiskFlag::ContentRewrite`]: crate::RiskFlag::ContentRewrite
    pub rewrite_escalate_ratio_bps: u32,
}

impl PolicyThresholds {
    /// The thresholds of `profile` (see the [module documentation](self)).
    pub const fn for_profile(profile: PolicyProfile) -> Self {
        match profile {
            PolicyProfile::Balanced => Self {
                escalate_touched_paths: 500,
                escalate_changed_bytes: 64 * MIB,
                deny_touched_paths: 50_000,
                deny_changed_bytes: GIB,
                deny_deleted_paths: 10_000,
                deny_delete_ratio_bps: 7_500,
                delete_ratio_min_paths: 100,
                rewrite_escalate_ratio_bps: 5_000,
            },
            PolicyProfile::Strict => Self {
                escalate_touched_paths: 100,
                escalate_changed_bytes: 8 * MIB,
                deny_touched_paths: 10_000,
                deny_changed_bytes: 256 * MIB,
                deny_deleted_paths: 2_000,
                deny_delete_ratio_bps: 5_000,
                delete_ratio_min_paths: 25,
                rewrite_escalate_ratio_bps: 2_500,
            },
            PolicyProfile::Paranoid => Self {
                escalate_touched_paths: 25,
                escalate_changed_bytes: MIB,
                deny_touched_paths: 5_000,
                deny_changed_bytes: 128 * MIB,
                deny_deleted_paths: 500,
                deny_delete_ratio_bps: 2_500,
                delete_ratio_min_paths: 10,
                rewrite_escalate_ratio_bps: 1_000,
            },
        }
    }

    /// How many workspace nodes must be counted to judge the delete ratio of
    /// a diff that deletes `deleted` paths. `None` when the rule cannot apply
    /// (fewer than `delete_ratio_min_paths` deletions, or no ratio set): then
    /// nothing needs counting. Otherwise the count past which the ratio is
    /// certainly below the ceiling, `deleted × 10,000 / deny_delete_ratio_bps + 1`:
    /// a count may stop there, so judging the ratio costs in proportion to the
    /// deletion, never to the workspace.
    pub fn delete_ratio_count_bound(&self, deleted: u64) -> Option<u64> {
        if deleted < self.delete_ratio_min_paths || self.deny_delete_ratio_bps == 0 {
            return None;
        }
        Some(deleted.saturating_mul(MAX_RATIO_BPS.into()) / u64::from(self.deny_delete_ratio_bps) + 1)
    }

    /// Check the thresholds: no zero, both ratios within `1..=10000` basis points,
    /// and no escalation threshold above its denial threshold. The error names
    /// the field.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        let counts = [
            ("escalate_touched_paths", self.escalate_touched_paths),
            ("escalate_changed_bytes", self.escalate_changed_bytes),
            ("deny_touched_paths", self.deny_touched_paths),
            ("deny_changed_bytes", self.deny_changed_bytes),
            ("deny_deleted_paths", self.deny_deleted_paths),
            ("delete_ratio_min_paths", self.delete_ratio_min_paths),
        ];
        if let Some((field, _)) = counts.iter().find(|(_, value)| *value == 0) {
            return Err(PolicyConfigError::ZeroThreshold { field });
        }
        let ratios = [
            ("deny_delete_ratio_bps", self.deny_delete_ratio_bps),
            ("rewrite_escalate_ratio_bps", self.rewrite_escalate_ratio_bps),
        ];
        if let Some((field, value)) = ratios.into_iter().find(|(_, value)| !(1..=MAX_RATIO_BPS).contains(value)) {
            return Err(PolicyConfigError::RatioOutOfRange { field, value });
        }
        let pairs = [
            ("escalate_touched_paths", self.escalate_touched_paths, "deny_touched_paths", self.deny_touched_paths),
            ("escalate_changed_bytes", self.escalate_changed_bytes, "deny_changed_bytes", self.deny_changed_bytes),
        ];
        for (field, value, limit_field, limit) in pairs {
            if value > limit {
                return Err(PolicyConfigError::EscalateAboveDeny { field, value, limit_field, limit });
            }
        }
        Ok(())
    }

    /// Append the canonical encoding (see the type's documentation).
    pub fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.escalate_touched_paths);
        canon::put_u64(out, self.escalate_changed_bytes);
        canon::put_u64(out, self.deny_touched_paths);
        canon::put_u64(out, self.deny_changed_bytes);
        canon::put_u64(out, self.deny_deleted_paths);
        canon::put_u32(out, self.deny_delete_ratio_bps);
        canon::put_u64(out, self.delete_ratio_min_paths);
        canon::put_u32(out, self.rewrite_escalate_ratio_bps);
    }
}

impl Default for PolicyThresholds {
    /// The Balanced thresholds.
    fn default() -> Self {
        Self::for_profile(PolicyProfile::Balanced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delete_ratio_count_bound_applies_from_the_minimum_and_proves_the_ratio_below_the_ceiling() {
        // Balanced: 100 deletions at least, a ceiling of 75%.
        let balanced = PolicyThresholds::for_profile(PolicyProfile::Balanced);
        assert_eq!(balanced.delete_ratio_count_bound(99), None);
        // 100 deletions are under 75% of any base over 133 nodes.
        assert_eq!(balanced.delete_ratio_count_bound(100), Some(134));
        let bound = balanced.delete_ratio_count_bound(1_000).unwrap();
        assert_eq!(bound, 1_334);
        // With `bound` nodes counted the ratio is below the ceiling; one fewer is not proof.
        let ratio_bps = |base: u64| 1_000 * u64::from(MAX_RATIO_BPS) / base;
        assert!(ratio_bps(bound) < u64::from(balanced.deny_delete_ratio_bps));
        assert!(ratio_bps(bound - 1) >= u64::from(balanced.deny_delete_ratio_bps));
        let off = PolicyThresholds { deny_delete_ratio_bps: 0, ..balanced };
        assert_eq!(off.delete_ratio_count_bound(1_000), None);
        assert_eq!(balanced.delete_ratio_count_bound(u64::MAX), Some(u64::MAX / 7_500 + 1));
    }

    #[test]
    fn profile_thresholds_match_the_table() {
        let balanced = PolicyThresholds::for_profile(PolicyProfile::Balanced);
        assert_eq!(
            balanced,
            PolicyThresholds {
                escalate_touched_paths: 500,
                escalate_changed_bytes: 64 << 20,
                deny_touched_paths: 50_000,
                deny_changed_bytes: 1 << 30,
                deny_deleted_paths: 10_000,
                deny_delete_ratio_bps: 7_500,
                delete_ratio_min_paths: 100,
                rewrite_escalate_ratio_bps: 5_000,
            }
        );
        let strict = PolicyThresholds::for_profile(PolicyProfile::Strict);
        assert_eq!(
            strict,
            PolicyThresholds {
                escalate_touched_paths: 100,
                escalate_changed_bytes: 8 << 20,
                deny_touched_paths: 10_000,
                deny_changed_bytes: 256 << 20,
                deny_deleted_paths: 2_000,
                deny_delete_ratio_bps: 5_000,
                delete_ratio_min_paths: 25,
                rewrite_escalate_ratio_bps: 2_500,
            }
        );
        let paranoid = PolicyThresholds::for_profile(PolicyProfile::Paranoid);
        assert_eq!(
            paranoid,
            PolicyThresholds {
                escalate_touched_paths: 25,
                escalate_changed_bytes: 1 << 20,
                deny_touched_paths: 5_000,
                deny_changed_bytes: 128 << 20,
                deny_deleted_paths: 500,
                deny_delete_ratio_bps: 2_500,
                delete_ratio_min_paths: 10,
                rewrite_escalate_ratio_bps: 1_000,
            }
        );
        for profile in PolicyProfile::ALL {
            assert_eq!(PolicyThresholds::for_profile(profile).validate(), Ok(()));
        }
        assert_eq!(PolicyThresholds::default(), balanced);
        assert!(!PolicyProfile::Balanced.escalates_every_mutation());
        assert!(PolicyProfile::Strict.escalates_every_mutation());
        assert!(PolicyProfile::Paranoid.escalates_every_mutation());
    }

    #[test]
    fn validate_names_the_offending_field() {
        let base = PolicyThresholds::default();
        let zeroed: [(&str, PolicyThresholds); 6] = [
            ("escalate_touched_paths", PolicyThresholds { escalate_touched_paths: 0, ..base }),
            ("escalate_changed_bytes", PolicyThresholds { escalate_changed_bytes: 0, ..base }),
            ("deny_touched_paths", PolicyThresholds { deny_touched_paths: 0, ..base }),
            ("deny_changed_bytes", PolicyThresholds { deny_changed_bytes: 0, ..base }),
            ("deny_deleted_paths", PolicyThresholds { deny_deleted_paths: 0, ..base }),
            ("delete_ratio_min_paths", PolicyThresholds { delete_ratio_min_paths: 0, ..base }),
        ];
        for (field, thresholds) in zeroed {
            let error = thresholds.validate().unwrap_err();
            assert_eq!(error, PolicyConfigError::ZeroThreshold { field });
            assert_eq!(error.field(), Some(field));
            assert!(error.to_string().contains(field), "{error}");
        }
        for bps in [0, MAX_RATIO_BPS + 1, u32::MAX] {
            let error = PolicyThresholds { deny_delete_ratio_bps: bps, ..base }.validate().unwrap_err();
            assert_eq!(error.field(), Some("deny_delete_ratio_bps"));
            assert!(error.to_string().contains("deny_delete_ratio_bps"), "{error}");
        }
        for bps in [0, MAX_RATIO_BPS + 1] {
            let error = PolicyThresholds { rewrite_escalate_ratio_bps: bps, ..base }.validate().unwrap_err();
            assert_eq!(error, PolicyConfigError::RatioOutOfRange { field: "rewrite_escalate_ratio_bps", value: bps });
        }
        for bps in [1, MAX_RATIO_BPS] {
            assert_eq!(PolicyThresholds { deny_delete_ratio_bps: bps, ..base }.validate(), Ok(()));
            assert_eq!(PolicyThresholds { rewrite_escalate_ratio_bps: bps, ..base }.validate(), Ok(()));
        }
        let paths = PolicyThresholds { escalate_touched_paths: 50_001, ..base }.validate().unwrap_err();
        assert_eq!(paths.field(), Some("escalate_touched_paths"));
        assert_eq!(
            paths.to_string(),
            "policy threshold `escalate_touched_paths` (50001) exceeds `deny_touched_paths` (50000)"
        );
        let bytes = PolicyThresholds { deny_changed_bytes: 1, ..base }.validate().unwrap_err();
        assert_eq!(bytes.field(), Some("escalate_changed_bytes"));
        // Equal escalation and denial thresholds are allowed.
        assert_eq!(PolicyThresholds { escalate_touched_paths: 50_000, ..base }.validate(), Ok(()));
    }

    #[test]
    fn profile_names_round_trip() {
        for profile in PolicyProfile::ALL {
            assert_eq!(profile.name().parse::<PolicyProfile>(), Ok(profile));
            assert_eq!(profile.to_string().to_uppercase().parse::<PolicyProfile>(), Ok(profile));
        }
        let error = "lenient".parse::<PolicyProfile>().unwrap_err();
        assert_eq!(error.field(), None);
        assert_eq!(error.to_string(), "unknown policy profile \"lenient\"; expected balanced, strict or paranoid");
        assert_eq!(PolicyProfile::default(), PolicyProfile::Balanced);
    }

    #[test]
    fn canonical_encoding_covers_every_field() {
        let base = PolicyThresholds::default();
        let encode = |thresholds: &PolicyThresholds| {
            let mut out = Vec::new();
            thresholds.encode_canonical(&mut out);
            out
        };
        assert_eq!(encode(&base).len(), 6 * 8 + 2 * 4);
        let variants = [
            PolicyThresholds { escalate_touched_paths: 501, ..base },
            PolicyThresholds { escalate_changed_bytes: 1, ..base },
            PolicyThresholds { deny_touched_paths: 50_001, ..base },
            PolicyThresholds { deny_changed_bytes: 1, ..base },
            PolicyThresholds { deny_deleted_paths: 1, ..base },
            PolicyThresholds { deny_delete_ratio_bps: 1, ..base },
            PolicyThresholds { delete_ratio_min_paths: 1, ..base },
            PolicyThresholds { rewrite_escalate_ratio_bps: 1, ..base },
        ];
        for variant in variants {
            assert_ne!(encode(&variant), encode(&base), "{variant:?}");
        }
    }
}
