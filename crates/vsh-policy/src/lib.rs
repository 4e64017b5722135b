//! Protected-path rules and the transaction decision: denied, auto-approved or
//! pending approval.
//!
//! Two layers, and a file format for both:
//!
//! - **Pre-call authorization.** A [`CallPolicy`] is a canonical list of
//!   [`ProtectedRule`]s, each a [`Pattern`] (see [`pattern`] for the glob
//!   language: `*`, `?`, character classes and `**`; [`rules`] for the defaults)
//!   with the [`AccessSet`] it denies. Guest operations call [`CallPolicy::authorize`]
//!   before touching the virtual image, so protected names and bytes never reach
//!   a guest; listings drop [`CallPolicy::is_hidden`] children; recursive
//!   operations preflight the whole tree with [`CallPolicy::authorize_tree`].
//!   An optional allow-list of writable roots refuses every mutation outside
//!   it.
//! - **The transaction decision.** A [`TransactionPolicy`] (profile, validated
//!   [`PolicyThresholds`] and the call policy, bound by one [`PolicyDigest`])
//!   evaluates a run's diff, its denied accesses and its renames into a
//!   [`Decision`]: [`Decision::Denied`] with a [`DenyManifest`],
//!   [`Decision::AutoApproved`], or [`Decision::PendingApproval`] with a
//!   [`RiskManifest`]. [`transaction`] documents the decision order and
//!   [`profile`] the thresholds of each profile. A [`DenyManifest`] names, for
//!   every denial, the rule and how the policy would have to change.
//! - **Policy files.** [`PolicyFile`] reads a TOML document (base profile,
//!   threshold overrides, extra protected patterns, review rules
//!   ([`ReviewRule`]: paths whose changes wait for a reviewer), built-in rule
//!   groups, writable roots) into the same validated [`TransactionPolicy`]; every bad
//!   field is a [`PolicyFileError`] that names it. [`file`](mod@file) documents
//!   the format.
//!
//! Every type is re-exported at the crate root; the modules carry the reference
//! documentation.
//!
//! [`PolicyDigest`]: vsh_types::PolicyDigest
// Unit tests build and inspect their fixtures by path.
#![cfg_attr(test, allow(clippy::disallowed_methods))]
#![forbid(unsafe_code)]

pub mod access;
mod copies;
pub mod decision;
pub mod file;
pub mod pattern;
pub mod profile;
pub mod review;
pub mod rules;
pub mod transaction;

pub use access::{AccessKind, AccessSet};
pub use decision::{
    CeilingBreach, ContentLoss, Decision, Denial, DenyManifest, DenyReason, MAX_LISTED_DENIALS, RiskFlag, RiskManifest,
    RiskMetrics, UNCOUNTED_LOSS_BYTES, content_lost, content_lost_in_step, is_content_rewrite, is_lossy_rewrite,
    replaces_a_file,
};
pub use file::{
    MAX_POLICY_FILE_BYTES, MAX_REASON_BYTES, POLICY_FILE_VERSION, PolicyFile, PolicyFileError, closest, parse_size,
    render_policy,
};
pub use pattern::{MAX_PATTERN_BYTES, MatchState, Pattern, PatternError};
pub use profile::{MAX_RATIO_BPS, PolicyConfigError, PolicyProfile, PolicyThresholds};
pub use review::{MAX_REVIEW_RULES, REVIEWABLE_CHANGES, ReviewRule};
pub use rules::{CallPolicy, DefaultRules, DeniedAccess, ProtectedRule, RuleLabel};
pub use transaction::{POLICY_SCHEMA, PolicyInput, TransactionPolicy};
