//! Protected-path rules and pre-call authorization: [`CallPolicy`].
//!
//! A [`CallPolicy`] is a canonical list of deny rules. Every guest operation asks
//! [`CallPolicy::authorize`] for each path and access kind *before* it touches the
//! virtual image, so the names and bytes of protected paths never reach a guest.
//!
//! # Default rules
//!
//! [`CallPolicy::balanced_default`] installs the rules below. Because `**` matches
//! zero or more components, `**/x/**` covers `x` at the root, `x` at any depth and
//! everything beneath each, so one rule does the work of four.
//!
//! | pattern | access | label | protects |
//! |---|---|---|---|
//! | `**/.env/**` | all | secret | `.env`, `config/.env`, `.env/inner`, ... |
//! | `**/.env.*/**` | all | secret | `.env.local`, `a/.env.prod`, and beneath either |
//! | `**/*.pem`, `**/*.key` | all | secret | key material at any depth |
//! | `**/.ssh/**` | all | secret | `.ssh` directories and their contents |
//! | `**/secrets/**` | all | secret | `secrets` directories and their contents |
//! | `**/credentials.json`, `**/*_credentials.json` | all | secret | credential files |
//! | `**/id_rsa`, `**/id_rsa.pub`, `**/id_ed25519` | all | secret | SSH keys |
//! | `.vsh/**` (and the configured data directory's subtree) | all | runtime-data | vsh's own state |
//! | `**/.git/**` | mutations | git | repository metadata: readable, never changed |
//!
//! `.env.*` requires the name to *start* with `.env.`: `env.txt`, `my.env.bak` and
//! `.envrc` are not protected. `*` is a wildcard only in rules, so a file
//! literally named `*.key` is protected by `**/*.key` like any other `.key` file.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use vsh_types::VPath;
use vsh_types::canon::{self, Canonical};

use crate::access::{AccessKind, AccessSet};
use crate::pattern::Pattern;

/// The data directory's default location inside the workspace.
pub const DEFAULT_DATA_DIR: &str = ".vsh";

/// Secret patterns of the default policy (all access denied).
const DEFAULT_SECRET_PATTERNS: [&str; 11] = [
    "**/.env/**",
    "**/.env.*/**",
    "**/*.pem",
    "**/*.key",
    "**/.ssh/**",
    "**/secrets/**",
    "**/credentials.json",
    "**/*_credentials.json",
    "**/id_rsa",
    "**/id_rsa.pub",
    "**/id_ed25519",
];

/// Runtime-data patterns of the default policy (all access denied).
const DEFAULT_RUNTIME_PATTERNS: [&str; 1] = [".vsh/**"];

/// Repository-metadata patterns of the default policy (mutations denied).
const DEFAULT_GIT_PATTERNS: [&str; 1] = ["**/.git/**"];

/// Why a rule exists; reported with every denial.
///
/// The declaration order is also the precedence when two rules with the same
/// pattern are merged: the earlier label wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RuleLabel {
    /// Credentials and key material.
    Secret,
    /// vsh's own data directory.
    RuntimeData,
    /// Repository metadata (`.git`).
    Git,
    /// A rule supplied by the operator.
    Custom,
}

impl RuleLabel {
    /// The canonical tag: Secret=1, `RuntimeData`=2, Git=3, Custom=4.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Secret => 1,
            Self::RuntimeData => 2,
            Self::Git => 3,
            Self::Custom => 4,
        }
    }

    /// A lower-case, hyphenated name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::RuntimeData => "runtime-data",
            Self::Git => "git",
            Self::Custom => "custom",
        }
    }
}

impl fmt::Display for RuleLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One deny rule: the accesses in `access` are refused for every path that
/// matches `pattern`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProtectedRule {
    /// Which paths the rule covers.
    pub pattern: Pattern,
    /// Which accesses it denies.
    pub access: AccessSet,
    /// Why it exists.
    pub label: RuleLabel,
}

impl ProtectedRule {
    /// Bundle a rule.
    pub fn new(pattern: Pattern, access: AccessSet, label: RuleLabel) -> Self {
        Self { pattern, access, label }
    }
}

impl fmt::Display for ProtectedRule {
    /// `` `**/*.key` denies all (secret) ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` denies {} ({})", self.pattern, self.access, self.label)
    }
}

/// One refused access, as reported to the guest, the decision and the reviewer.
///
/// Canonical encoding: path, access tag `u8`, rule text as a byte string, label
/// tag `u8`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeniedAccess {
    /// The path that was refused.
    pub path: VPath,
    /// The access that was refused.
    pub access: AccessKind,
    /// The text of the pattern of the rule that refused it.
    pub rule: String,
    /// Why that rule exists.
    pub label: RuleLabel,
}

impl fmt::Display for DeniedAccess {
    /// `` content-read of .env denied by rule `**/.env/**` (secret) ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} denied by rule `{}` ({})", self.access, self.path, self.rule, self.label)
    }
}

impl Canonical for DeniedAccess {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        self.path.encode_canonical(out);
        canon::put_u8(out, self.access.tag());
        canon::put_bytes(out, self.rule.as_bytes());
        canon::put_u8(out, self.label.tag());
    }
}

/// The protected-path rules of a policy, in canonical form: sorted by pattern
/// text, one rule per pattern, no rule with an empty access set.
///
/// See the [module documentation](self) for the default rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallPolicy {
    rules: Vec<ProtectedRule>,
}

impl CallPolicy {
    /// Default protected paths (see the [module documentation](self)).
    ///
    /// `data_dir` is the vsh data directory's path inside the workspace if it lies
    /// there (`.vsh` by default, which is always protected). It and everything
    /// beneath it are protected for all accesses with [`RuleLabel::RuntimeData`].
    /// A data directory at the workspace root itself protects every path: the
    /// guest could otherwise reach the store, so the policy fails closed.
    pub fn balanced_default(data_dir: Option<&VPath>) -> CallPolicy {
        let parse = |text: &str| Pattern::parse(text).expect("default patterns are valid");
        let mut rules = Vec::with_capacity(DEFAULT_SECRET_PATTERNS.len() + 3);
        for text in DEFAULT_SECRET_PATTERNS {
            rules.push(ProtectedRule::new(parse(text), AccessSet::ALL, RuleLabel::Secret));
        }
        for text in DEFAULT_RUNTIME_PATTERNS {
            rules.push(ProtectedRule::new(parse(text), AccessSet::ALL, RuleLabel::RuntimeData));
        }
        if let Some(dir) = data_dir {
            rules.push(ProtectedRule::new(Pattern::subtree(dir), AccessSet::ALL, RuleLabel::RuntimeData));
        }
        for text in DEFAULT_GIT_PATTERNS {
            rules.push(ProtectedRule::new(parse(text), AccessSet::MUTATIONS, RuleLabel::Git));
        }
        Self::new(rules)
    }

    /// Canonicalize `rules`: sort by pattern text, merge rules with the same
    /// pattern (their access sets are united; the earliest [`RuleLabel`] in
    /// declaration order is kept), and drop rules that deny nothing.
    ///
    /// The result does not depend on the order of `rules`.
    pub fn new(rules: Vec<ProtectedRule>) -> CallPolicy {
        let mut merged: BTreeMap<Pattern, (AccessSet, RuleLabel)> = BTreeMap::new();
        for rule in rules {
            if rule.access.is_empty() {
                continue;
            }
            merged
                .entry(rule.pattern)
                .and_modify(|(access, label)| {
                    *access = access.union(rule.access);
                    *label = (*label).min(rule.label);
                })
                .or_insert((rule.access, rule.label));
        }
        let rules =
            merged.into_iter().map(|(pattern, (access, label))| ProtectedRule::new(pattern, access, label)).collect();
        Self { rules }
    }

    /// This policy with `extra` rules added (and the result re-canonicalized).
    #[must_use]
    pub fn with_rules(self, extra: impl IntoIterator<Item = ProtectedRule>) -> CallPolicy {
        let mut rules = self.rules;
        rules.extend(extra);
        Self::new(rules)
    }

    /// The canonical rules.
    pub fn rules(&self) -> &[ProtectedRule] {
        &self.rules
    }

    /// Refuse `access` to `path` if a rule denies it; the error names the first
    /// such rule in canonical order.
    pub fn authorize(&self, path: &VPath, access: AccessKind) -> Result<(), DeniedAccess> {
        match self.first_rule(path, AccessSet::single(access)) {
            None => Ok(()),
            Some(rule) => Err(DeniedAccess {
                path: path.clone(),
                access,
                rule: rule.pattern.as_str().to_owned(),
                label: rule.label,
            }),
        }
    }

    /// Whether a listing should hide this child: some read access to it is denied.
    pub fn is_hidden(&self, path: &VPath) -> bool {
        self.first_rule(path, AccessSet::READS).is_some()
    }

    /// Every access denied for `path` (the union over all matching rules).
    pub fn denied_accesses(&self, path: &VPath) -> AccessSet {
        with_components(path, |components| {
            self.rules
                .iter()
                .filter(|rule| rule.pattern.matches_split(path.as_str(), components))
                .fold(AccessSet::NONE, |denied, rule| denied.union(rule.access))
        })
    }

    /// The first rule (canonical order) that matches `path` and denies one of `access`.
    fn first_rule(&self, path: &VPath, access: AccessSet) -> Option<&ProtectedRule> {
        with_components(path, |components| {
            self.rules
                .iter()
                .filter(|rule| rule.access.intersects(access))
                .find(|rule| rule.pattern.matches_split(path.as_str(), components))
        })
    }

    /// Append the canonical encoding: a `u64` rule count, then per rule the pattern
    /// text as a byte string, the access bits as a `u32` and the label tag `u8`.
    pub fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.rules.len() as u64);
        for rule in &self.rules {
            canon::put_bytes(out, rule.pattern.as_str().as_bytes());
            canon::put_u32(out, u32::from(rule.access.bits()));
            canon::put_u8(out, rule.label.tag());
        }
    }
}

/// Call `f` with the components of `path`, without allocating for paths of up to
/// 32 components (authorization runs on every guest call).
fn with_components<R>(path: &VPath, f: impl FnOnce(&[&str]) -> R) -> R {
    const INLINE: usize = 32;
    let mut inline = [""; INLINE];
    let mut count = 0;
    for component in path.components() {
        if count == INLINE {
            let all: Vec<&str> = path.components().collect();
            return f(&all);
        }
        inline[count] = component;
        count += 1;
    }
    f(&inline[..count])
}

impl Canonical for CallPolicy {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        CallPolicy::encode_canonical(self, out);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn p(text: &str) -> VPath {
        VPath::parse(text).unwrap()
    }

    fn rule(pattern: &str, access: AccessSet, label: RuleLabel) -> ProtectedRule {
        ProtectedRule::new(Pattern::parse(pattern).unwrap(), access, label)
    }

    #[test]
    fn defaults_deny_secrets_runtime_data_and_git_writes() {
        let policy = CallPolicy::balanced_default(None);
        for denied in [
            ".env",
            ".env.local",
            ".env/inner",
            ".env.prod/inner/deeper",
            "config/.env",
            "config/.env.local",
            "a/b/server.pem",
            "top.key",
            "*.key",
            "x/.ssh/id",
            ".ssh",
            "home/.ssh",
            "secrets/a",
            "secrets",
            "deep/secrets",
            "deep/secrets/x/y",
            "credentials.json",
            "a/credentials.json",
            "gcp_credentials.json",
            "id_rsa",
            "home/u/id_rsa.pub",
            "k/id_ed25519",
            ".vsh",
            ".vsh/anything",
            ".vsh/store/blobs/x",
        ] {
            for access in AccessKind::ALL {
                let error = policy.authorize(&p(denied), access).expect_err(denied);
                assert_eq!(error.path, p(denied));
                assert_eq!(error.access, access);
            }
            assert!(policy.is_hidden(&p(denied)), "{denied}");
            assert_eq!(policy.denied_accesses(&p(denied)), AccessSet::ALL, "{denied}");
        }
        for allowed in ["src/main.rs", "env.txt", "my.env.bak", ".envrc", "README.md", "secrets.txt", "a/key", "pem"] {
            for access in AccessKind::ALL {
                assert_eq!(policy.authorize(&p(allowed), access), Ok(()), "{allowed} {access}");
            }
            assert!(!policy.is_hidden(&p(allowed)), "{allowed}");
        }
        assert_eq!(policy.authorize(&VPath::root(), AccessKind::DirectoryRead), Ok(()));
        // Paths deeper than the inline component buffer take the allocating route.
        let deep = vec!["d"; 40].join("/");
        assert!(policy.is_hidden(&p(&format!("{deep}/.env"))));
        assert!(policy.is_hidden(&p(&format!("{deep}/secrets/{deep}/x"))));
        assert_eq!(policy.denied_accesses(&p(&format!("{deep}/.git/{deep}"))), AccessSet::MUTATIONS);
        assert!(!policy.is_hidden(&p(&format!("{deep}/ok.txt"))));
    }

    #[test]
    fn git_is_readable_but_never_mutated() {
        let policy = CallPolicy::balanced_default(None);
        for path in [".git", ".git/HEAD", ".git/objects/ab/cd", "vendor/lib/.git/config"] {
            for access in AccessSet::READS.iter() {
                assert_eq!(policy.authorize(&p(path), access), Ok(()), "{path} {access}");
            }
            for access in AccessSet::MUTATIONS.iter() {
                let error = policy.authorize(&p(path), access).expect_err(path);
                assert_eq!(error.label, RuleLabel::Git);
            }
            assert!(!policy.is_hidden(&p(path)));
            assert_eq!(policy.denied_accesses(&p(path)), AccessSet::MUTATIONS);
        }
        let error = policy.authorize(&p(".git/x"), AccessKind::Create).unwrap_err();
        assert_eq!(error.rule, "**/.git/**");
        assert_eq!(policy.authorize(&p(".gitignore"), AccessKind::Modify), Ok(()));
    }

    #[test]
    fn configured_data_dir_is_runtime_data() {
        let dir = p("state/vsh-data");
        let policy = CallPolicy::balanced_default(Some(&dir));
        for path in ["state/vsh-data", "state/vsh-data/blobs/ab", ".vsh/x"] {
            let error = policy.authorize(&p(path), AccessKind::MetadataRead).unwrap_err();
            assert_eq!(error.label, RuleLabel::RuntimeData, "{path}");
        }
        assert_eq!(policy.authorize(&p("state/other"), AccessKind::Create), Ok(()));
        assert_eq!(policy.authorize(&p("state"), AccessKind::DirectoryRead), Ok(()));
        // The default directory merges with the built-in rule.
        let default_dir = CallPolicy::balanced_default(Some(&p(DEFAULT_DATA_DIR)));
        assert_eq!(default_dir, CallPolicy::balanced_default(None));
        // A data directory with wildcard characters protects only itself.
        let odd = CallPolicy::balanced_default(Some(&p("d*")));
        assert!(odd.is_hidden(&p("d*/x")));
        assert!(!odd.is_hidden(&p("dx")));
        // The workspace root as the data directory fails closed.
        let root = CallPolicy::balanced_default(Some(&VPath::root()));
        assert!(root.is_hidden(&p("src/main.rs")));
    }

    #[test]
    fn denial_display_names_access_path_rule_and_label() {
        let policy = CallPolicy::new(vec![rule(".env*", AccessSet::ALL, RuleLabel::Secret)]);
        let error = policy.authorize(&p(".env"), AccessKind::ContentRead).unwrap_err();
        assert_eq!(error.to_string(), "content-read of .env denied by rule `.env*` (secret)");
        assert_eq!(
            DeniedAccess { label: RuleLabel::RuntimeData, access: AccessKind::RenameDestination, ..error }.to_string(),
            "rename-destination of .env denied by rule `.env*` (runtime-data)"
        );
        assert_eq!(policy.rules()[0].to_string(), "`.env*` denies all (secret)");
    }

    #[test]
    fn new_sorts_merges_and_drops_empty_rules() {
        let policy = CallPolicy::new(vec![
            rule("b/**", AccessSet::single(AccessKind::Create), RuleLabel::Custom),
            rule("a", AccessSet::READS, RuleLabel::Custom),
            rule("b/**", AccessSet::single(AccessKind::Delete), RuleLabel::Git),
            rule("c", AccessSet::NONE, RuleLabel::Secret),
        ]);
        let texts: Vec<&str> = policy.rules().iter().map(|rule| rule.pattern.as_str()).collect();
        assert_eq!(texts, ["a", "b/**"]);
        assert_eq!(policy.rules()[1].access, AccessSet::NONE.with(AccessKind::Create).with(AccessKind::Delete));
        assert_eq!(policy.rules()[1].label, RuleLabel::Git);
        // Reads denied only for metadata still hide the entry.
        let metadata_only =
            CallPolicy::new(vec![rule("x", AccessSet::single(AccessKind::MetadataRead), RuleLabel::Custom)]);
        assert!(metadata_only.is_hidden(&p("x")));
        let write_only = CallPolicy::new(vec![rule("x", AccessSet::single(AccessKind::Modify), RuleLabel::Custom)]);
        assert!(!write_only.is_hidden(&p("x")));
        // The first matching rule in canonical order is reported.
        let two = CallPolicy::new(vec![
            rule("z/**", AccessSet::ALL, RuleLabel::Custom),
            rule("**/f", AccessSet::ALL, RuleLabel::Secret),
        ]);
        assert_eq!(two.authorize(&p("z/f"), AccessKind::ContentRead).unwrap_err().rule, "**/f");
        let extended =
            CallPolicy::balanced_default(None).with_rules([rule("private/**", AccessSet::ALL, RuleLabel::Custom)]);
        assert!(extended.is_hidden(&p("private/notes")));
        assert!(extended.is_hidden(&p(".env")));
    }

    #[test]
    fn canonical_encoding_reflects_every_rule_field() {
        let base = CallPolicy::new(vec![rule("a/**", AccessSet::ALL, RuleLabel::Custom)]);
        let encode = |policy: &CallPolicy| policy.to_canonical_bytes();
        let variants = [
            CallPolicy::new(vec![rule("b/**", AccessSet::ALL, RuleLabel::Custom)]),
            CallPolicy::new(vec![rule("a/**", AccessSet::READS, RuleLabel::Custom)]),
            CallPolicy::new(vec![rule("a/**", AccessSet::ALL, RuleLabel::Secret)]),
            CallPolicy::new(Vec::new()),
        ];
        for variant in &variants {
            assert_ne!(encode(variant), encode(&base));
        }
        let mut inherent = Vec::new();
        base.encode_canonical(&mut inherent);
        assert_eq!(inherent, encode(&base));
    }

    proptest! {
        #[test]
        fn canonical_form_ignores_input_order(
            picks in prop::collection::vec((0usize..5, 0u16..256, 0usize..4), 0..8),
            seed in any::<u64>(),
        ) {
            let patterns = ["a", "a/**", "**/b", "*.key", "c/[xy]"];
            let labels = [RuleLabel::Secret, RuleLabel::RuntimeData, RuleLabel::Git, RuleLabel::Custom];
            let rules: Vec<ProtectedRule> = picks
                .iter()
                .map(|(pattern, bits, label)| {
                    rule(patterns[*pattern], AccessSet::from_bits(*bits).unwrap(), labels[*label])
                })
                .collect();
            let mut shuffled = rules.clone();
            // A deterministic Fisher-Yates shuffle driven by the seed.
            let mut state = seed;
            for index in (1..shuffled.len()).rev() {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let other = (state >> 33) as usize % (index + 1);
                shuffled.swap(index, other);
            }
            let forward = CallPolicy::new(rules);
            let backward = CallPolicy::new(shuffled);
            prop_assert_eq!(forward.to_canonical_bytes(), backward.to_canonical_bytes());
            prop_assert_eq!(&forward, &backward);
            for path in ["a", "a/x", "b", "q/b", "k.key", "c/x", "c/z"] {
                let path = VPath::parse(path).unwrap();
                prop_assert_eq!(
                    forward.is_hidden(&path),
                    AccessSet::READS.iter().any(|access| forward.authorize(&path, access).is_err())
                );
                let denied = forward.denied_accesses(&path);
                for access in AccessKind::ALL {
                    prop_assert_eq!(denied.contains(access), forward.authorize(&path, access).is_err());
                }
            }
        }
    }
}
