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
//! | `**/.env*/**`, `**/?*.env` | all | secret | `.env` and every name that starts with it (`.env.local`, `.envrc`, `.env~`, `.env-prod`) at any depth, and beneath each; `prod.env` |
//! | `**/*.pem`, `**/*.key`, `**/*.p12`, `**/*.pfx`, `**/*.jks`, `**/*.keystore`, `**/*.ppk` | all | secret | key material and key stores at any depth |
//! | `**/*.tfstate`, `**/*.tfstate.backup` | all | secret | Terraform state (it holds the secrets it provisioned) |
//! | `**/.ssh/**`, `**/.gnupg/**`, `**/.aws/**`, `**/.azure/**`, `**/.config/gcloud/**` | all | secret | SSH, GPG and cloud credential directories and their contents |
//! | `**/secrets/**` | all | secret | `secrets` directories and their contents |
//! | `**/credentials.json`, `**/*_credentials.json`, `**/.git-credentials`, `**/.netrc`, `**/_netrc`, `**/.pgpass`, `**/.my.cnf`, `**/.pypirc`, `**/.s3cfg`, `**/.vault-token`, `**/.dockercfg`, `**/.docker/config.json`, `**/.kube/config*` | all | secret | credential files |
//! | `**/id_rsa`, `**/id_rsa.pub`, `**/id_dsa`, `**/id_ecdsa`, `**/id_ecdsa_sk`, `**/id_ed25519`, `**/id_ed25519_sk` | all | secret | SSH keys |
//! | `**/.vsh/**` (and the configured data directory's subtree) | all | runtime-data | vsh's own state, at any depth |
//! | `**/.git/**` | mutations | git | repository metadata: readable, never changed |
//!
//! `.env*` requires the name to *start* with `.env`: `env.txt` and `my.env.example`
//! are not protected. Nor are public certificate bundles (`cacert.pem`,
//! `cacerts.pem`, `ca-bundle.pem`, `ca-certificates.pem`, any case) by
//! `**/*.pem`: certifi's, which pip vendors, is in every virtualenv. A project's `.npmrc` is not protected (npm reads it for its
//! settings, and a refused read would fail every npm command in a candidate); name
//! it in a policy file's rules where it holds a token. Every built-in rule ignores case (`.ENV`,
//! `SECRETS/`, `ID_RSA`, `.GIT/config` are protected like their lower-case
//! forms): on a case-insensitive filesystem they are the same files. `*` is a wildcard only in rules, so a file
//! literally named `*.key` is protected by `**/*.key` like any other `.key` file.
//!
//! # Copies
//!
//! A copy of a protected path is protected like it, by the names backup tools,
//! editors, package managers and people give copies (`crate::copies`): a
//! path one of whose names is another's followed by `~`, by a separator and
//! a word of backup (`bak`, `old`, `orig`, `copy`, `swp`, `rpmsave`,
//! `dpkg-old` and the like, any case, digits may follow), or by a separator
//! and a number or date; preceded by `Copy of `; an Emacs `#name#`; a Vim
//! `.name.swp`; or such a suffix before an extension (`credentials
//! copy.json`, `credentials (1).json`), is refused what the rules refuse its
//! original if they refuse any read of it: `.aws.bak/credentials`,
//! `secrets - Copy/`, `.ssh.~1~`, `prod.env.2026-12-01` (sec72 F4, sec78 F2).
//! A rule that refuses only changes (`.git`) does not reach copies. The
//! denial names the original's rule; its remedy says which original.
//!
//! [`CallPolicy::with_defaults`] chooses the groups: the secret and git rules may
//! be left out ([`DefaultRules`]); the runtime-data rules never can.
//!
//! # Writable roots
//!
//! Beside its deny rules, a policy may carry an allow-list of *writable roots*
//! ([`CallPolicy::with_writable_roots`]): every mutation of a path that is not a
//! root or beneath one is refused, with [`RuleLabel::WritableRoots`] and a rule
//! text naming the list (`writable_roots = ["docs", "src"]`). Roots are literal
//! paths, not patterns. A root's ancestors are not writable either, so a root
//! whose parent directory does not exist cannot be populated. Deny rules still
//! apply inside the roots, and are reported first when both refuse an access.
//!
//! # Recursive operations
//!
//! A recursive remove, copy or move must not change anything if one path of the
//! tree is protected. [`CallPolicy::authorize_tree`] checks the root and every
//! descendant before the operation starts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};
use vsh_types::VPath;
use vsh_types::canon::{self, Canonical};

use crate::access::{AccessKind, AccessSet};
use crate::pattern::{Pattern, fold};

/// Secret patterns of the default policy (all access denied).
const DEFAULT_SECRET_PATTERNS: [&str; 48] = [
    "**/.env*/**",
    "**/?*.env",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/*.jks",
    "**/*.keystore",
    "**/*.ppk",
    "**/*.tfstate",
    "**/*.tfstate.backup",
    "**/.ssh/**",
    "**/.gnupg/**",
    "**/.aws/**",
    "**/.azure/**",
    "**/.config/gcloud/**",
    "**/secrets/**",
    "**/credentials.json*",
    "**/*_credentials.json*",
    "**/.git-credentials*",
    "**/.netrc*",
    "**/_netrc*",
    "**/.pgpass*",
    "**/.my.cnf*",
    "**/.pypirc*",
    "**/.s3cfg*",
    "**/.vault-token*",
    "**/.dockercfg*",
    "**/.docker/config.json",
    "**/.kube/config*",
    "**/kubeconfig*",
    "**/*.kubeconfig*",
    // Registries' and tools' token stores (sec69 F2).
    "**/.cargo/credentials",
    "**/.cargo/credentials.toml",
    "**/.config/gh/hosts.*",
    "**/.gem/credentials",
    "**/.terraformrc*",
    "**/terraform.rc",
    "**/.terraform.d/credentials.tfrc.json",
    "**/.htpasswd*",
    "**/.boto",
    "**/.databrickscfg*",
    "**/*service[-_]account*.json*",
    "**/*serviceaccount*.json*",
    // Key files with any suffix (`.pub`, `_sk`, an editor's `~`, `.bak`).
    "**/id_rsa*",
    "**/id_dsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
];

/// The runtime-data pattern of the default policy (all access denied): vsh's
/// runtime directory at any depth, `**/.vsh/**`.
fn default_runtime_pattern() -> String {
    format!("**/{}/**", vsh_types::RUNTIME_DIR_NAME)
}

/// Repository-metadata patterns of the default policy (mutations denied).
const DEFAULT_GIT_PATTERNS: [&str; 1] = ["**/.git/**"];

/// The names public certificate bundles go by, which the built-in `**/*.pem`
/// rule leaves readable (see `Split::covered_by`).
const PUBLIC_CERTIFICATE_BUNDLES: [&str; 4] = ["cacert.pem", "cacerts.pem", "ca-bundle.pem", "ca-certificates.pem"];

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
    /// The allow-list of writable roots: the path is outside every root.
    WritableRoots,
    /// The path leaves the workspace (`..` above it, an absolute path
    /// elsewhere, a symlink or a mount point leading out): never reachable.
    OutsideWorkspace,
}

impl RuleLabel {
    /// The canonical tag: Secret=1, `RuntimeData`=2, Git=3, Custom=4,
    /// `WritableRoots`=5, `OutsideWorkspace`=6.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Secret => 1,
            Self::RuntimeData => 2,
            Self::Git => 3,
            Self::Custom => 4,
            Self::WritableRoots => 5,
            Self::OutsideWorkspace => 6,
        }
    }

    /// A lower-case, hyphenated name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::RuntimeData => "runtime-data",
            Self::Git => "git",
            Self::Custom => "custom",
            Self::WritableRoots => "writable-roots",
            Self::OutsideWorkspace => "outside-workspace",
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
    /// The operator's explanation, shown to reviewers with a denial.
    pub reason: Option<String>,
}

impl ProtectedRule {
    /// Bundle a rule without a reason.
    pub fn new(pattern: Pattern, access: AccessSet, label: RuleLabel) -> Self {
        Self { pattern, access, label, reason: None }
    }

    /// This rule with `reason` attached.
    #[must_use]
    pub fn with_reason(self, reason: impl Into<String>) -> Self {
        Self { reason: Some(reason.into()), ..self }
    }
}

impl fmt::Display for ProtectedRule {
    /// `` `**/*.key` denies all (secret) ``, or with a reason
    /// `` `config/prod/**` denies modify+delete (custom: production config) ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` denies {} ({}", self.pattern, self.access, self.label)?;
        if let Some(reason) = &self.reason {
            write!(f, ": {reason}")?;
        }
        f.write_str(")")
    }
}

/// Which built-in rule groups [`CallPolicy::with_defaults`] installs. The
/// runtime-data rules are not optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DefaultRules {
    /// The secret rules (key material, `.env`, credentials).
    pub secrets: bool,
    /// The rule that keeps `.git` from being changed.
    pub git: bool,
}

impl Default for DefaultRules {
    /// Every group.
    fn default() -> Self {
        Self { secrets: true, git: true }
    }
}

/// One refused access, as reported to the guest, the decision and the reviewer.
///
/// Canonical encoding: path, access tag `u8`, rule text as a byte string, label
/// tag `u8`, the rule's access bits as a `u32`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeniedAccess {
    /// The path that was refused.
    pub path: VPath,
    /// The access that was refused.
    pub access: AccessKind,
    /// The text of the pattern of the rule that refused it; for
    /// [`RuleLabel::WritableRoots`], the allow-list (`writable_roots = ["src"]`).
    pub rule: String,
    /// Why that rule exists.
    pub label: RuleLabel,
    /// Every access that rule denies.
    pub rule_access: AccessSet,
}

impl fmt::Display for DeniedAccess {
    /// `` content-read of .env denied by rule `**/.env/**` (secret) ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} denied by rule `{}` ({})",
            self.access,
            subject(&self.path, self.label),
            self.rule,
            self.label
        )
    }
}

/// What a denial names as its subject: the path, or, for an attempt outside
/// the workspace recorded at the root (the rule quotes what was tried),
/// "a path outside the workspace" rather than `.`.
pub(crate) fn subject(path: &VPath, label: RuleLabel) -> String {
    if label == RuleLabel::OutsideWorkspace && path.is_root() {
        "a path outside the workspace".to_owned()
    } else {
        path.to_string()
    }
}

/// The longest guest path an outside-the-workspace denial quotes, in bytes.
pub const MAX_OUTSIDE_QUOTE: usize = 256;

impl DeniedAccess {
    /// The refusal of an attempt to reach `attempt` (a guest path, or a
    /// description such as `mount point at mnt`), which lies outside the
    /// workspace: recorded like a protected access, so a program that probes
    /// such paths and catches the errors is still denied. The rule text quotes
    /// the attempt, cut at [`MAX_OUTSIDE_QUOTE`] bytes.
    pub fn outside(attempt: &str, at: VPath, access: AccessKind) -> DeniedAccess {
        let mut end = attempt.len().min(MAX_OUTSIDE_QUOTE);
        while !attempt.is_char_boundary(end) {
            end -= 1;
        }
        let quoted = if end < attempt.len() { format!("{:?}...", &attempt[..end]) } else { format!("{attempt:?}") };
        DeniedAccess {
            path: at,
            access,
            rule: format!("outside the workspace: {quoted}"),
            label: RuleLabel::OutsideWorkspace,
            rule_access: AccessSet::ALL,
        }
    }
}

impl Canonical for DeniedAccess {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        self.path.encode_canonical(out);
        canon::put_u8(out, self.access.tag());
        canon::put_bytes(out, self.rule.as_bytes());
        canon::put_u8(out, self.label.tag());
        canon::put_u32(out, u32::from(self.rule_access.bits()));
    }
}

/// The protected-path rules of a policy, in canonical form: sorted by pattern
/// text, one rule per pattern, no rule with an empty access set; and the
/// optional allow-list of writable roots.
///
/// See the [module documentation](self) for the default rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallPolicy {
    rules: Vec<ProtectedRule>,
    writable: Option<WritableRoots>,
    /// Which rules a path may match (made from `rules`).
    index: RuleIndex,
}

/// The rules a path may match, told from its components before any rule is
/// tried: authorization asks for every path a program touches and for every
/// entry of a walk, and trying each rule in turn was most of a 10,000-entry
/// glob's policy time. A rule whose pattern requires a component
/// ([`Pattern::required_component`], such as `.env` in `**/.env/**`) is a
/// candidate only for a path that has that component; the others are
/// candidates for every path. Candidates are a bit set over the rules in
/// canonical order, so the first rule that matches is still the first in
/// order; a policy of more than 64 rules tries every rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct RuleIndex {
    /// Required components of case-sensitive rules, sorted, with the rules
    /// that require each.
    sensitive: Vec<(String, u64)>,
    /// The same for case-insensitive rules, by folded component.
    insensitive: Vec<(String, u64)>,
    /// Rules that require no component.
    always: u64,
    /// Whether the rules fit the bit sets (at most 64).
    usable: bool,
}

impl RuleIndex {
    fn new(rules: &[ProtectedRule]) -> Self {
        let mut index = RuleIndex { usable: rules.len() <= 64, ..RuleIndex::default() };
        if !index.usable {
            return index;
        }
        for (number, rule) in rules.iter().enumerate() {
            let bit = 1_u64 << number;
            let Some(component) = rule.pattern.required_component() else {
                index.always |= bit;
                continue;
            };
            let table = if rule.pattern.is_case_insensitive() { &mut index.insensitive } else { &mut index.sensitive };
            match table.binary_search_by(|(known, _)| known.as_str().cmp(component)) {
                Ok(at) => table[at].1 |= bit,
                Err(at) => table.insert(at, (component.to_owned(), bit)),
            }
        }
        index
    }

    /// The rules `split` may match, as a bit set (none when the index is
    /// not usable: the caller tries every rule then).
    fn candidates(&self, split: &Split<'_>) -> u64 {
        if !self.usable {
            return 0;
        }
        let look = |table: &[(String, u64)], name: &str| {
            table.binary_search_by(|(known, _)| known.as_str().cmp(name)).map_or(0, |at| table[at].1)
        };
        let mut found = self.always;
        if !self.sensitive.is_empty() {
            for name in split.components {
                found |= look(&self.sensitive, name);
            }
        }
        if !self.insensitive.is_empty() {
            match split.folded() {
                None => {
                    for name in split.components {
                        found |= look(&self.insensitive, name);
                    }
                }
                Some((_, components)) => {
                    for name in components {
                        found |= look(&self.insensitive, name);
                    }
                }
            }
        }
        found
    }
}

/// The allow-list in canonical form: sorted, no root beneath another, never the
/// workspace root; with the rule text its denials report.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WritableRoots {
    roots: Vec<VPath>,
    rule: String,
}

/// How many roots a writable-roots rule text names before it abbreviates.
const LISTED_ROOTS: usize = 8;

impl WritableRoots {
    /// Canonicalize `roots`; `None` when one of them is the workspace root (then
    /// every path is writable).
    fn new(roots: impl IntoIterator<Item = VPath>) -> Option<Self> {
        let mut sorted: Vec<VPath> = roots.into_iter().collect();
        if sorted.iter().any(VPath::is_root) {
            return None;
        }
        sorted.sort();
        sorted.dedup();
        let mut kept: Vec<VPath> = Vec::with_capacity(sorted.len());
        for root in sorted {
            // A root beneath another is redundant; test every kept root, since
            // `a-b` sorts between `a` and `a/x`.
            if !kept.iter().any(|outer| root.is_within(outer)) {
                kept.push(root);
            }
        }
        let mut rule = String::from("writable_roots = [");
        for (index, root) in kept.iter().take(LISTED_ROOTS).enumerate() {
            if index > 0 {
                rule.push_str(", ");
            }
            let _ = write!(rule, "{:?}", root.as_str());
        }
        if kept.len() > LISTED_ROOTS {
            let _ = write!(rule, ", ... {} more", kept.len() - LISTED_ROOTS);
        }
        rule.push(']');
        Some(Self { roots: kept, rule })
    }

    /// Whether `path` is a root or beneath one: one lookup per ancestor.
    fn contains(&self, path: &VPath) -> bool {
        let text = path.as_str();
        let mut end = 0;
        for component in path.components() {
            end += component.len();
            let prefix = &text[..end];
            if self.roots.binary_search_by(|root| root.as_str().cmp(prefix)).is_ok() {
                return true;
            }
            end += 1;
        }
        false
    }
}

impl CallPolicy {
    /// Default protected paths (see the [module documentation](self)).
    ///
    /// `data_dir` is the vsh data directory's path inside the workspace if it lies
    /// there (`.vsh/data` by default, inside the runtime directory, which is always protected). It and everything
    /// beneath it are protected for all accesses with [`RuleLabel::RuntimeData`].
    /// A data directory at the workspace root itself protects every path: the
    /// guest could otherwise reach the store, so the policy fails closed.
    pub fn balanced_default(data_dir: Option<&VPath>) -> CallPolicy {
        Self::with_defaults(data_dir, DefaultRules::default())
    }

    /// The default rule groups chosen by `groups`, and always the runtime-data
    /// rules for `data_dir` (see [`CallPolicy::balanced_default`]).
    pub fn with_defaults(data_dir: Option<&VPath>, groups: DefaultRules) -> CallPolicy {
        // Built-in rules ignore case: on a case-insensitive filesystem `.ENV` is `.env`.
        let parse = |text: &str| Pattern::parse(text).expect("default patterns are valid").case_insensitive();
        let mut rules = Vec::with_capacity(DEFAULT_SECRET_PATTERNS.len() + 3);
        if groups.secrets {
            for text in DEFAULT_SECRET_PATTERNS {
                rules.push(ProtectedRule::new(parse(text), AccessSet::ALL, RuleLabel::Secret));
            }
        }
        let runtime: Vec<Pattern> = vec![parse(&default_runtime_pattern())];
        // A data directory the built-in rules already cover (`.vsh/data`, say) adds nothing.
        if let Some(dir) = data_dir.filter(|dir| !runtime.iter().any(|pattern| pattern.matches(dir))) {
            rules.push(ProtectedRule::new(
                Pattern::subtree(dir).case_insensitive(),
                AccessSet::ALL,
                RuleLabel::RuntimeData,
            ));
        }
        for pattern in runtime {
            rules.push(ProtectedRule::new(pattern, AccessSet::ALL, RuleLabel::RuntimeData));
        }
        if groups.git {
            for text in DEFAULT_GIT_PATTERNS {
                rules.push(ProtectedRule::new(parse(text), AccessSet::MUTATIONS, RuleLabel::Git));
            }
        }
        Self::new(rules)
    }

    /// Canonicalize `rules`: sort by pattern text, merge rules with the same
    /// pattern (their access sets are united; the earliest [`RuleLabel`] in
    /// declaration order is kept; distinct reasons are sorted and joined with
    /// `"; "`), and drop rules that deny nothing. The policy has no writable
    /// roots.
    ///
    /// The result does not depend on the order of `rules`.
    pub fn new(rules: Vec<ProtectedRule>) -> CallPolicy {
        Self::of(canonical_rules(rules), None)
    }

    /// The policy of canonical `rules` and `writable` roots, indexed.
    fn of(rules: Vec<ProtectedRule>, writable: Option<WritableRoots>) -> CallPolicy {
        let index = RuleIndex::new(&rules);
        Self { rules, writable, index }
    }

    /// This policy with `extra` rules added (and the result re-canonicalized).
    /// Writable roots are kept.
    #[must_use]
    pub fn with_rules(self, extra: impl IntoIterator<Item = ProtectedRule>) -> CallPolicy {
        let mut rules = self.rules;
        rules.extend(extra);
        Self::of(canonical_rules(rules), self.writable)
    }

    /// This policy with mutations limited to `roots` and the paths beneath them
    /// (see the [module documentation](self#writable-roots)), replacing any
    /// earlier list.
    ///
    /// The list is canonicalized: sorted, duplicates and roots beneath another
    /// root dropped. A list holding the workspace root allows every path (as
    /// if there were no list); an empty list allows no mutation at all.
    #[must_use]
    pub fn with_writable_roots(self, roots: impl IntoIterator<Item = VPath>) -> CallPolicy {
        Self { writable: WritableRoots::new(roots), ..self }
    }

    /// The canonical rules.
    pub fn rules(&self) -> &[ProtectedRule] {
        &self.rules
    }

    /// The rule whose pattern text is `pattern`, if any.
    pub fn rule(&self, pattern: &str) -> Option<&ProtectedRule> {
        self.rules.binary_search_by(|rule| rule.pattern.as_str().cmp(pattern)).ok().map(|index| &self.rules[index])
    }

    /// The canonical writable roots, or `None` when every path is writable.
    pub fn writable_roots(&self) -> Option<&[VPath]> {
        self.writable.as_ref().map(|writable| writable.roots.as_slice())
    }

    /// Refuse `access` to `path` if a rule denies it, or if it is a mutation
    /// outside the writable roots; the error names the first such rule in
    /// canonical order, and the allow-list only when no rule refuses.
    pub fn authorize(&self, path: &VPath, access: AccessKind) -> Result<(), DeniedAccess> {
        if let Some(rule) = self.first_rule(path, denied_with(access)) {
            return Err(DeniedAccess {
                path: path.clone(),
                access,
                rule: rule.pattern.as_str().to_owned(),
                label: rule.label,
                rule_access: rule.access,
            });
        }
        match &self.writable {
            Some(writable) if access.is_mutation() && !writable.contains(path) => Err(DeniedAccess {
                path: path.clone(),
                access,
                rule: writable.rule.clone(),
                label: RuleLabel::WritableRoots,
                rule_access: AccessSet::MUTATIONS,
            }),
            _ => Ok(()),
        }
    }

    /// Authorize every access in `access` for `root` and each of its
    /// `descendants`: the preflight of a recursive remove, copy or move, so one
    /// protected path blocks the whole operation before anything changes.
    ///
    /// The root is checked first. Otherwise the reported denial is that of the
    /// smallest denied descendant in path order, whatever order `descendants`
    /// come in; for one path, the first denied kind in [`AccessKind`] order.
    /// Every path given is checked, including any that is not beneath `root`.
    pub fn authorize_tree<'a>(
        &self,
        root: &VPath,
        descendants: impl IntoIterator<Item = &'a VPath>,
        access: impl Into<AccessSet>,
    ) -> Result<(), DeniedAccess> {
        let access = access.into();
        self.authorize_set(root, access)?;
        let mut first: Option<DeniedAccess> = None;
        for path in descendants {
            if first.as_ref().is_some_and(|denial| denial.path <= *path) {
                continue;
            }
            if let Err(denial) = self.authorize_set(path, access) {
                first = Some(denial);
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn authorize_set(&self, path: &VPath, access: AccessSet) -> Result<(), DeniedAccess> {
        access.iter().try_for_each(|kind| self.authorize(path, kind))
    }

    /// Whether `other` refuses exactly the reads this one refuses: the same
    /// rules deny a read, in the same order, each denying the same reads
    /// (what either denies of mutations, and the writable roots, aside).
    /// Work made under one read nothing the other hides.
    pub fn reads_like(&self, other: &CallPolicy) -> bool {
        let reads = |policy: &'_ CallPolicy| -> Vec<(Pattern, AccessSet)> {
            policy
                .rules
                .iter()
                .filter_map(|rule| {
                    let access = rule.access.intersection(AccessSet::READS);
                    (!access.is_empty()).then(|| (rule.pattern.clone(), access))
                })
                .collect()
        };
        reads(self) == reads(other)
    }

    /// Whether a listing should hide this child: some read access to it is denied.
    pub fn is_hidden(&self, path: &VPath) -> bool {
        self.first_rule(path, AccessSet::READS).is_some()
    }

    /// Every access denied for `path` (the union over all matching rules, and
    /// every mutation if the path is outside the writable roots).
    pub fn denied_accesses(&self, path: &VPath) -> AccessSet {
        let by_rules = with_components(path, |split| {
            self.candidate_rules(split)
                .filter(|rule| split.covered_by(rule))
                .fold(AccessSet::NONE, |denied, rule| denied.union(rule.access))
        });
        // A copy is refused what its original's read-protecting rules refuse.
        let by_rules = originals_of(path).iter().fold(by_rules, |denied, original| {
            with_split(original, |split| {
                self.candidate_rules(split)
                    .filter(|rule| rule.access.intersects(AccessSet::READS) && split.covered_by(rule))
                    .fold(denied, |denied, rule| denied.union(rule.access))
            })
        });
        // A path protected from any read may not be renamed away either.
        let by_rules = if by_rules.intersects(AccessSet::READS) {
            by_rules.union(AccessSet::single(AccessKind::RenameSource))
        } else {
            by_rules
        };
        match &self.writable {
            Some(writable) if !writable.contains(path) => by_rules.union(AccessSet::MUTATIONS),
            _ => by_rules,
        }
    }

    /// How this policy would have to change for `denied` to be allowed, for a
    /// reviewer: which rule to remove or narrow, which `[defaults]` switch turns
    /// it off, or that nothing can (runtime data).
    pub fn remedy(&self, denied: &DeniedAccess) -> String {
        let remedy = self.remedy_of_rule(denied);
        // A copy is refused by its original's rule: say so (ux73 M2).
        let remedy = match self.rule(&denied.rule) {
            Some(rule) if !with_components(&denied.path, |split| split.covered_by(rule)) => {
                let originals = originals_of(&denied.path);
                match originals.iter().find(|original| with_split(original, |split| split.covered_by(rule))) {
                    Some(original) => format!("{remedy}; it protects `{}` as a copy of `{original}`", denied.path),
                    None => remedy,
                }
            }
            _ => remedy,
        };
        // What else refuses the same access, which narrowing the
        // `[[protect]]` rule named would meet next (ux85 L1: it led to a
        // second denial, by the writable roots). The built-in rules' switches
        // turn whole families off: not followed for one path.
        if denied.label != RuleLabel::Custom {
            return remedy;
        }
        let others: Vec<String> = self
            .other_denials(denied)
            .iter()
            .take(MAX_OTHER_DENIALS)
            .map(|other| format!("also {}", self.remedy_of_rule(other)))
            .collect();
        if others.is_empty() { remedy } else { format!("{remedy}; {}", others.join("; ")) }
    }

    /// The other rules, and the writable roots, that deny `denied`'s access
    /// to its path besides the one that refused it, in the order they
    /// would be met.
    fn other_denials(&self, denied: &DeniedAccess) -> Vec<DeniedAccess> {
        let access = denied_with(denied.access);
        let of = |rule: &ProtectedRule, label: RuleLabel, rule_access: AccessSet| DeniedAccess {
            path: denied.path.clone(),
            access: denied.access,
            rule: rule.pattern.as_str().to_owned(),
            label,
            rule_access,
        };
        let mut others: Vec<DeniedAccess> = with_components(&denied.path, |split| {
            self.candidate_rules(split)
                .filter(|rule| rule.access.intersects(access) && split.covered_by(rule))
                .filter(|rule| rule.pattern.as_str() != denied.rule)
                .map(|rule| of(rule, rule.label, rule.access))
                .collect()
        });
        others.sort_by(|a, b| a.rule.cmp(&b.rule));
        if denied.label != RuleLabel::WritableRoots
            && let Some(writable) = &self.writable
            && denied.access.is_mutation()
            && !writable.contains(&denied.path)
        {
            others.push(DeniedAccess {
                path: denied.path.clone(),
                access: denied.access,
                rule: writable.rule.clone(),
                label: RuleLabel::WritableRoots,
                rule_access: AccessSet::MUTATIONS,
            });
        }
        others
    }

    fn remedy_of_rule(&self, denied: &DeniedAccess) -> String {
        let rule = &denied.rule;
        match denied.label {
            // Recorded against the path a program gave for one below it it
            // cannot see: no rule is named (see `RuleLabel::Custom` below).
            RuleLabel::Secret if self.rule(rule).is_none() => {
                "set defaults.secrets = false (turns off the built-in secret rules, the one that hides a path inside it \
                 among them)"
                    .to_owned()
            }
            RuleLabel::Secret => {
                format!("set defaults.secrets = false (turns off the built-in secret rules, `{rule}` among them)")
            }
            // git itself cannot change .git in a run (a checkout, a stash):
            // what an agent can do instead comes first (ux56).
            RuleLabel::Git if denied.access.is_mutation() => format!(
                "built-in git rule `{rule}`: a run never changes .git, so change the files themselves (to restore \
                 one, read it with git show HEAD:PATH and write it, which discards its uncommitted changes; to move one, mv); the change is reviewed like \
                 any other; an operator may allow .git changes with defaults.git = false"
            ),
            RuleLabel::Git => format!("set defaults.git = false (turns off the built-in git rules, `{rule}` among them)"),
            RuleLabel::RuntimeData => {
                format!("nothing can: vsh's runtime data (rule `{rule}`) is protected whatever the policy says")
            }
            // A refusal recorded against the path a program gave for one
            // below it that it cannot see names no rule (see vsh-monty's
            // `OsHost::as_named`).
            RuleLabel::Custom if self.rule(rule).is_none() => {
                "remove or narrow the `[[protect]]` rule that protects a \
                                                              path inside it (vsh policy show lists the rules)"
                    .to_owned()
            }
            RuleLabel::Custom => {
                let mut remedy = format!("remove or narrow the `[[protect]]` rule `{rule}`");
                if let Some(reason) = self.rule(rule).and_then(|rule| rule.reason.as_deref()) {
                    let _ = write!(remedy, " (reason: {reason})");
                }
                if !denied.rule_access.contains(denied.access) {
                    // A rename refused because the rule protects the path's
                    // reads: moving it elsewhere would read it unprotected.
                    let _ = write!(
                        remedy,
                        " (it protects the path's reads, which a rename would leave behind: its access is {})",
                        denied.rule_access
                    );
                } else if denied.rule_access != AccessSet::single(denied.access) {
                    // The access list as it would be written, whatever names
                    // the file gave it (ux82 L2: "drop `modify` from its
                    // access list" of a rule whose access is "mutations").
                    let rest: Vec<String> = denied
                        .rule_access
                        .iter()
                        .filter(|kind| *kind != denied.access)
                        .map(|kind| format!("\"{}\"", kind.name()))
                        .collect();
                    let _ =
                        write!(remedy, ", or leave `{}` out of it: `access = [{}]`", denied.access, rest.join(", "));
                }
                remedy
            }
            RuleLabel::WritableRoots => {
                let mut remedy = format!(
                    "add a root containing `{}` to defaults.writable_roots (now {rule}), or remove \
                     defaults.writable_roots",
                    denied.path
                );
                // A file made beside a root of its directory that names a
                // file (a name with an extension: `index.js`): the temporary
                // file of a tool that edits the root in place (`sed -i`,
                // `perl -pi`, an editor), named anew each run.
                let parent = denied.path.parent();
                let a_file = |root: &VPath| {
                    root.as_str()
                        .rsplit('/')
                        .next()
                        .and_then(|name| name.get(1..))
                        .is_some_and(|rest| rest.contains('.'))
                };
                let beside_a_root = self.writable_roots().is_some_and(|roots| {
                    roots.iter().any(|root| root.parent() == parent && *root != denied.path && a_file(root))
                });
                if beside_a_root && denied.access == AccessKind::Create {
                    let dir = parent
                        .filter(|dir| !dir.is_root())
                        .map_or("the workspace's top".to_owned(), |dir| format!("`{dir}`"));
                    let _ = write!(
                        remedy,
                        " (a tool that edits a file in place, sed -i or perl -pi, writes a temporary file beside it \
                         and renames it over the file: a root for the file alone refuses that; make its directory, \
                         {dir}, a root, or edit it with a program: vsh_patch)"
                    );
                }
                remedy
            }
            RuleLabel::OutsideWorkspace => {
                // Read after "to allow:"; the path is the rule's line already
                // (ux85 L6: it was said twice).
                "nothing can: a path outside the workspace is never reachable, whatever the policy says".to_owned()
            }
        }
    }

    /// The first rule (canonical order) that matches `path` and denies one of `access`.
    /// (A rule denying a read of a path also denies moving it: see [`denied_with`].)
    fn first_rule(&self, path: &VPath, access: AccessSet) -> Option<&ProtectedRule> {
        with_components(path, |split| {
            self.candidate_rules(split)
                .filter(|rule| rule.access.intersects(access))
                .find(|rule| split.covered_by(rule))
        })
        .or_else(|| {
            originals_of(path).iter().find_map(|original| {
                with_split(original, |split| {
                    self.candidate_rules(split)
                        .filter(|rule| rule.access.intersects(access) && rule.access.intersects(AccessSet::READS))
                        .find(|rule| split.covered_by(rule))
                })
            })
        })
    }

    /// The rules `split` may match ([`RuleIndex`]), in canonical order.
    fn candidate_rules<'s>(&'s self, split: &Split<'_>) -> impl Iterator<Item = &'s ProtectedRule> + 's {
        let mut candidates = self.index.candidates(split);
        // Not indexed: every rule in turn.
        let mut every = (!self.index.usable).then(|| self.rules.iter());
        std::iter::from_fn(move || {
            if let Some(every) = &mut every {
                return every.next();
            }
            if candidates == 0 {
                return None;
            }
            let number = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            self.rules.get(number)
        })
    }

    /// Append the canonical encoding: a `u64` rule count, then per rule the pattern
    /// text as a byte string, whether it ignores case (`u8`), the access bits as a `u32`, the label tag `u8` and
    /// the reason (flag `u8`, then the text as a byte string); then the writable
    /// roots (flag `u8`, then a `u64` count and each root as a path).
    pub fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.rules.len() as u64);
        for rule in &self.rules {
            canon::put_bytes(out, rule.pattern.as_str().as_bytes());
            canon::put_u8(out, u8::from(rule.pattern.is_case_insensitive()));
            canon::put_u32(out, u32::from(rule.access.bits()));
            canon::put_u8(out, rule.label.tag());
            match &rule.reason {
                None => canon::put_u8(out, 0),
                Some(reason) => {
                    canon::put_u8(out, 1);
                    canon::put_bytes(out, reason.as_bytes());
                }
            }
        }
        match &self.writable {
            None => canon::put_u8(out, 0),
            Some(writable) => {
                canon::put_u8(out, 1);
                canon::put_seq(out, writable.roots.iter());
            }
        }
    }
}

/// The rule accesses that refuse `access`: itself, and for a rename's
/// source every read too. A path protected from reading keeps that
/// protection only where it is: renamed (the path, or a directory above it,
/// which a tree move authorizes path by path), it would be read under a name
/// no rule covers and renamed back, or reviewed as the rename's content. So a
/// rule that denies any read of a path denies moving it away as well.
/// The most other refusals of one access a remedy names
/// ([`CallPolicy::remedy`]).
const MAX_OTHER_DENIALS: usize = 3;

fn denied_with(access: AccessKind) -> AccessSet {
    match access {
        AccessKind::RenameSource => AccessSet::single(access).union(AccessSet::READS),
        _ => AccessSet::single(access),
    }
}

/// Sort, merge and filter rules (see [`CallPolicy::new`]).
fn canonical_rules(rules: Vec<ProtectedRule>) -> Vec<ProtectedRule> {
    let mut merged: BTreeMap<Pattern, (AccessSet, RuleLabel, BTreeSet<String>)> = BTreeMap::new();
    for rule in rules {
        if rule.access.is_empty() {
            continue;
        }
        let (access, label, reasons) =
            merged.entry(rule.pattern).or_insert_with(|| (AccessSet::NONE, rule.label, BTreeSet::new()));
        *access = access.union(rule.access);
        *label = (*label).min(rule.label);
        reasons.extend(rule.reason);
    }
    merged
        .into_iter()
        .map(|(pattern, (access, label, reasons))| {
            let reason = (!reasons.is_empty()).then(|| reasons.into_iter().collect::<Vec<_>>().join("; "));
            ProtectedRule { pattern, access, label, reason }
        })
        .collect()
}

/// The paths `path` may be a copy of ([`crate::copies::original_paths`]).
fn originals_of(path: &VPath) -> Vec<String> {
    // Most paths name no copy: nothing is allocated for them.
    if !path.components().any(crate::copies::is_copy) {
        return Vec::new();
    }
    let components: Vec<&str> = path.components().collect();
    crate::copies::original_paths(&components)
}

/// Call `f` with `path` (a `/`-joined relative path) split into components.
fn with_split<R>(path: &str, f: impl FnOnce(&Split<'_>) -> R) -> R {
    let components: Vec<&str> = path.split('/').collect();
    f(&Split { path, components: &components, folded: std::cell::OnceCell::new() })
}

/// Call `f` with the components of `path`, without allocating for paths of up to
/// 32 components (authorization runs on every guest call).
fn with_components<R>(path: &VPath, f: impl FnOnce(&Split<'_>) -> R) -> R {
    const INLINE: usize = 32;
    let mut inline = [""; INLINE];
    let mut count = 0;
    for component in path.components() {
        if count == INLINE {
            let all: Vec<&str> = path.components().collect();
            return f(&Split::new(path, &all));
        }
        inline[count] = component;
        count += 1;
    }
    f(&Split::new(path, &inline[..count]))
}

/// A path split into components, and its case fold (made once, when a
/// case-insensitive pattern first asks; `None` when the path is its own fold,
/// as a path of lower-case ASCII is: nothing is allocated for it).
struct Split<'a> {
    path: &'a str,
    components: &'a [&'a str],
    folded: std::cell::OnceCell<Option<(String, Vec<std::borrow::Cow<'a, str>>)>>,
}

impl<'a> Split<'a> {
    fn new(path: &'a VPath, components: &'a [&'a str]) -> Self {
        Self { path: path.as_str(), components, folded: std::cell::OnceCell::new() }
    }

    /// Whether `rule` covers the path: its pattern matches, and the path is
    /// not a public certificate bundle the built-in `**/*.pem` rule would
    /// otherwise refuse (`cacert.pem`: certifi's, which pip vendors, so a
    /// workspace's virtualenv could not be made and its TLS clients could
    /// not read their trust store; ux76 H2). A bundle of public CA
    /// certificates holds no secret; a key named so is not one vsh guards.
    fn covered_by(&self, rule: &ProtectedRule) -> bool {
        self.matched_by(&rule.pattern) && !self.is_public_bundle_under(rule)
    }

    /// Whether the path is one of [`PUBLIC_CERTIFICATE_BUNDLES`] and `rule`
    /// the built-in secret rule for `.pem` files.
    fn is_public_bundle_under(&self, rule: &ProtectedRule) -> bool {
        rule.label == RuleLabel::Secret
            && rule.pattern.as_str() == "**/*.pem"
            && self
                .components
                .last()
                .is_some_and(|name| PUBLIC_CERTIFICATE_BUNDLES.iter().any(|bundle| bundle.eq_ignore_ascii_case(name)))
    }

    /// Whether `pattern` matches, comparing folded forms if it is case-insensitive.
    fn matched_by(&self, pattern: &Pattern) -> bool {
        if !pattern.is_case_insensitive() {
            return pattern.matches_split(self.path, self.components);
        }
        match self.folded() {
            None => pattern.matches_split(self.path, self.components),
            Some((path, components)) => pattern.matches_split(path, components),
        }
    }

    /// The path's fold and its components', once; `None` when it is its own.
    fn folded(&self) -> Option<&(String, Vec<std::borrow::Cow<'a, str>>)> {
        self.folded
            .get_or_init(|| match fold(self.path) {
                std::borrow::Cow::Borrowed(_) => None,
                std::borrow::Cow::Owned(path) => Some((path, self.components.iter().map(|name| fold(name)).collect())),
            })
            .as_ref()
    }
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
    fn copies_of_protected_paths_are_protected_like_them_and_nothing_else_is() {
        let policy = CallPolicy::balanced_default(None);
        // sec72 F4: a backup of a protected directory held its secrets in the open.
        for denied in [
            ".aws.bak/credentials",
            "home/.ssh.old/id_ed25519_work",
            "secrets.bak/db.txt",
            "deploy/secrets~/token",
            "SECRETS-backup/token",
            ".gnupg_2026-12-01/pubring.kbx",
            ".azure.orig",
            ".vsh.bak/store",
            "conf/.env.local.bak",
            // sec78 F2.
            ".ssh.~1~/id_work",
            "Copy of .aws/credentials",
            "secrets - Copy (2)/db.txt",
            "credentials (1).json",
            ".docker/config copy.json",
            ".id_rsa.swp",
            "#credentials.json#",
            "etc/.netrc.dpkg-old",
            "secrets.2026-01-01T10:00:00Z/token",
            "日本/秘密/secrets.bak/x",
            "old-secrets/token",
            ".ssh./id_work",
            "credentials_old.json",
            "terraform.tfstate.backup (1)",
        ] {
            for access in AccessKind::ALL {
                assert!(policy.authorize(&p(denied), access).is_err(), "{denied} {access:?}");
            }
            assert!(policy.is_hidden(&p(denied)), "{denied}");
            assert!(policy.denied_accesses(&p(denied)).contains(AccessKind::ContentRead), "{denied}");
        }
        let denial = policy.authorize(&p(".aws.bak/credentials"), AccessKind::ContentRead).unwrap_err();
        assert_eq!((denial.rule.as_str(), denial.label), ("**/.aws/**", RuleLabel::Secret));
        let remedy = policy.remedy(&denial);
        assert!(remedy.ends_with("; it protects `.aws.bak/credentials` as a copy of `.aws/credentials`"), "{remedy}");
        let original = policy.authorize(&p(".aws/credentials"), AccessKind::ContentRead).unwrap_err();
        assert!(!policy.remedy(&original).contains("as a copy of"), "{}", policy.remedy(&original));
        for allowed in [
            ".aws-sam/build/template.yaml",
            "secrets_manager/api.py",
            "notes.bak",
            "src/old/main.rs",
            // Any UTF-8 name is judged, never cut inside a character (sec78 F1).
            "café.txt",
            "docs/résumé.md",
            "数据.csv",
            "é",
        ] {
            for access in AccessKind::ALL {
                assert!(policy.authorize(&p(allowed), access).is_ok(), "{allowed} {access:?}");
            }
        }
        // A rule that only refuses changes (.git) does not reach copies: a
        // `.git.bak` is the agent's to clean up.
        for access in AccessKind::ALL {
            assert!(policy.authorize(&p(".git.bak/config"), access).is_ok(), "{access:?}");
        }
        assert!(policy.authorize(&p(".git/config"), AccessKind::Modify).is_err());
    }

    #[test]
    fn defaults_hide_registries_and_tools_token_stores() {
        let policy = CallPolicy::balanced_default(None);
        for denied in [
            ".cargo/credentials.toml",
            "home/.cargo/credentials",
            ".config/gh/hosts.yml",
            ".gem/credentials",
            ".terraformrc",
            "terraform.rc",
            ".terraform.d/credentials.tfrc.json",
            "web/.htpasswd",
            ".boto",
            ".databrickscfg",
            "kubeconfig",
            "ops/prod.kubeconfig",
            "gcp/service-account.json",
            "kubeconfig.yaml",
            "ops/kubeconfig.yml",
            "prod.kubeconfig.yml",
            "serviceaccount.json",
            "service-account.json~",
            "service-account.json.bak",
            ".config/gh/hosts.yaml",
            // Backup and editor copies (sec72 F4).
            ".netrc~",
            "home/id_rsa~",
            "id_ed25519.bak",
            "server.key.bak",
            "tls/server.pem~",
            "credentials.json.bak",
            ".git-credentials.old",
            ".pgpass.orig",
            "my-service_account-key.json",
        ] {
            for access in AccessKind::ALL {
                assert!(policy.authorize(&p(denied), access).is_err(), "{denied} {access:?}");
            }
            assert!(policy.is_hidden(&p(denied)), "{denied}");
        }
        for allowed in [
            ".cargo/config.toml",
            ".config/gh/config.yml",
            "service-account.yaml",
            "keyboard.py",
            "pemmican.txt",
            "docs/api.key.md",
        ] {
            assert!(policy.authorize(&p(allowed), AccessKind::ContentRead).is_ok(), "{allowed}");
        }
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
            ".envrc",
            ".env~",
            ".env-prod",
            "app/.env_local",
            "deploy/server.p12",
            "win.pfx",
            "android/release.jks",
            "release.keystore",
            ".gnupg/private-keys-v1.d/x.key",
            ".aws/credentials",
            "home/.aws/config",
            ".git-credentials",
            ".netrc",
            "_netrc",
            ".pgpass",
            ".pypirc",
            ".docker/config.json",
            "ops/.kube/config",
            "id_dsa",
            "keys/id_ecdsa",
            "deploy/prod.env",
            "putty.ppk",
            "infra/terraform.tfstate",
            "infra/terraform.tfstate.backup",
            ".azure/accessTokens.json",
            "home/.config/gcloud/credentials.db",
            ".my.cnf",
            ".s3cfg",
            ".vault-token",
            ".dockercfg",
            ".kube/config-prod",
            "id_ecdsa_sk",
            "u/id_ed25519_sk",
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
        for allowed in [
            "src/main.rs",
            "env.txt",
            "my.env.example",
            "environment/.keep",
            ".npmrc",
            "docker/config.json",
            ".kube/cache",
            "environment.ts",
            "main.tf",
            ".config/nvim/init.lua",
            "README.md",
            "secrets.txt",
            "a/key",
            "pem",
        ] {
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
    fn built_in_rules_ignore_case_and_vsh_data_is_protected_at_any_depth() {
        let policy = CallPolicy::balanced_default(None);
        for (path, access, label) in [
            (".ENV", AccessKind::ContentRead, RuleLabel::Secret),
            ("config/.Env.Local", AccessKind::ContentRead, RuleLabel::Secret),
            ("SECRETS/db.txt", AccessKind::MetadataRead, RuleLabel::Secret),
            ("tls/SERVER.PEM", AccessKind::ContentRead, RuleLabel::Secret),
            ("home/ID_RSA", AccessKind::ContentRead, RuleLabel::Secret),
            ("Credentials.JSON", AccessKind::ContentRead, RuleLabel::Secret),
            (".GIT/config", AccessKind::Modify, RuleLabel::Git),
            (".VSH/data/txlog", AccessKind::ContentRead, RuleLabel::RuntimeData),
            ("pkg/.vsh", AccessKind::MetadataRead, RuleLabel::RuntimeData),
            ("pkg/.vsh/data/txlog", AccessKind::Modify, RuleLabel::RuntimeData),
            ("a/b/.Vsh/txn", AccessKind::Create, RuleLabel::RuntimeData),
        ] {
            let error = policy.authorize(&p(path), access).unwrap_err();
            assert_eq!(error.label, label, "{path}");
        }
        assert!(policy.is_hidden(&p("pkg/.VSH")));
        assert_eq!(policy.authorize(&p(".GIT/config"), AccessKind::ContentRead), Ok(()));
        assert_eq!(policy.authorize(&p("vsh/notes"), AccessKind::Modify), Ok(()));
        assert_eq!(policy.authorize(&p("my.vsh"), AccessKind::Modify), Ok(()));
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
        let default_dir = CallPolicy::balanced_default(Some(&vsh_types::VshLayout::default_data()));
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
        // An attempt outside the workspace recorded at the root names no `.`.
        let outside = DeniedAccess::outside("/etc/passwd", VPath::root(), AccessKind::MetadataRead);
        assert_eq!(
            outside.to_string(),
            "metadata-read of a path outside the workspace denied by rule `outside the workspace: \"/etc/passwd\"` (outside-workspace)"
        );
        let through = DeniedAccess::outside("updir/x -> updir -> ../..", p("updir"), AccessKind::MetadataRead);
        assert!(through.to_string().starts_with("metadata-read of updir denied"), "{through}");
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

    /// ux76 H2: a virtualenv's `certifi/cacert.pem` (every pip has one) was
    /// refused by the built-in `**/*.pem` rule: `python3 -m venv` failed and
    /// TLS clients could not read their trust store. Public certificate
    /// bundles are left to it; keys are not, nor does an operator's own rule
    /// leave them.
    #[test]
    fn public_certificate_bundles_are_no_secret_of_the_built_in_pem_rule() {
        let policy = CallPolicy::balanced_default(None);
        let readable = |path: &str| policy.authorize(&p(path), AccessKind::ContentRead).is_ok();
        for bundle in [
            ".venv/lib/python3.11/site-packages/certifi/cacert.pem",
            "pip/_vendor/certifi/CACERT.PEM",
            "certs/ca-bundle.pem",
            "ca-certificates.pem",
            "botocore/cacert.pem.bak",
        ] {
            assert!(readable(bundle), "{bundle}");
        }
        for key in ["certs/server.pem", "cacert.pem.key", "my-cacert.pem", "tls/ca-key.pem", "cacert.pem/private.pem"] {
            assert!(!readable(key), "{key}");
        }
        let own = CallPolicy::new(vec![rule("**/*.pem", AccessSet::ALL, RuleLabel::Custom)]);
        assert!(own.authorize(&p("certifi/cacert.pem"), AccessKind::ContentRead).is_err());
        assert!(!policy.is_hidden(&p("certifi/cacert.pem")));
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

    #[test]
    fn denials_carry_the_rules_access_set() {
        let policy = CallPolicy::balanced_default(None);
        let git = policy.authorize(&p(".git/HEAD"), AccessKind::Delete).unwrap_err();
        assert_eq!(git.rule_access, AccessSet::MUTATIONS);
        let secret = policy.authorize(&p("a.pem"), AccessKind::MetadataRead).unwrap_err();
        assert_eq!(secret.rule_access, AccessSet::ALL);
        let narrow = CallPolicy::new(vec![rule("x", AccessSet::single(AccessKind::Modify), RuleLabel::Custom)]);
        let denial = narrow.authorize(&p("x"), AccessKind::Modify).unwrap_err();
        assert_eq!(denial.rule_access, AccessSet::single(AccessKind::Modify));
        // The rule's access set is part of the canonical form.
        let widened = DeniedAccess { rule_access: AccessSet::ALL, ..denial.clone() };
        assert_ne!(widened.to_canonical_bytes(), denial.to_canonical_bytes());
    }

    #[test]
    fn with_defaults_drops_groups_but_never_runtime_data() {
        let labels = |groups: DefaultRules| -> Vec<RuleLabel> {
            let mut labels: Vec<RuleLabel> =
                CallPolicy::with_defaults(None, groups).rules().iter().map(|rule| rule.label).collect();
            labels.dedup();
            labels.sort();
            labels.dedup();
            labels
        };
        assert_eq!(labels(DefaultRules::default()), [RuleLabel::Secret, RuleLabel::RuntimeData, RuleLabel::Git]);
        assert_eq!(labels(DefaultRules { secrets: false, git: true }), [RuleLabel::RuntimeData, RuleLabel::Git]);
        assert_eq!(labels(DefaultRules { secrets: true, git: false }), [RuleLabel::Secret, RuleLabel::RuntimeData]);
        let bare = CallPolicy::with_defaults(Some(&p("data")), DefaultRules { secrets: false, git: false });
        assert_eq!(labels(DefaultRules { secrets: false, git: false }), [RuleLabel::RuntimeData]);
        assert!(bare.is_hidden(&p(".vsh/x")));
        assert!(bare.is_hidden(&p("data/x")));
        assert!(!bare.is_hidden(&p(".env")));
        assert_eq!(CallPolicy::with_defaults(None, DefaultRules::default()), CallPolicy::balanced_default(None));
    }

    #[test]
    fn rules_keep_and_merge_reasons() {
        let policy = CallPolicy::new(vec![
            rule("a/**", AccessSet::single(AccessKind::Create), RuleLabel::Custom).with_reason("second"),
            rule("a/**", AccessSet::single(AccessKind::Delete), RuleLabel::Custom).with_reason("first"),
            rule("a/**", AccessSet::single(AccessKind::Modify), RuleLabel::Custom).with_reason("first"),
            rule("b", AccessSet::ALL, RuleLabel::Custom),
        ]);
        assert_eq!(policy.rule("a/**").unwrap().reason.as_deref(), Some("first; second"));
        assert_eq!(policy.rule("b").unwrap().reason, None);
        assert_eq!(policy.rule("c"), None);
        assert_eq!(
            policy.rule("a/**").unwrap().to_string(),
            "`a/**` denies create+modify+delete (custom: first; second)"
        );
        let without = CallPolicy::new(vec![rule("a/**", AccessSet::ALL, RuleLabel::Custom)]);
        let with = CallPolicy::new(vec![rule("a/**", AccessSet::ALL, RuleLabel::Custom).with_reason("why")]);
        assert_ne!(without.to_canonical_bytes(), with.to_canonical_bytes());
    }

    #[test]
    fn writable_roots_limit_mutations_only() {
        let policy = CallPolicy::balanced_default(None).with_writable_roots([p("src"), p("docs/api")]);
        assert_eq!(policy.writable_roots(), Some(&[p("docs/api"), p("src")][..]));
        for path in ["src", "src/main.rs", "src/a/b/c", "docs/api", "docs/api/x.md"] {
            for access in AccessSet::MUTATIONS.iter() {
                assert_eq!(policy.authorize(&p(path), access), Ok(()), "{path} {access}");
            }
            assert_eq!(policy.denied_accesses(&p(path)), AccessSet::NONE, "{path}");
        }
        for path in ["README.md", "srcx", "src-old/a", "docs", "docs/apix", "docs/other/x"] {
            for access in AccessSet::MUTATIONS.iter() {
                let error = policy.authorize(&p(path), access).expect_err(path);
                assert_eq!(error.label, RuleLabel::WritableRoots);
                assert_eq!(error.rule, r#"writable_roots = ["docs/api", "src"]"#);
                assert_eq!(error.rule_access, AccessSet::MUTATIONS);
            }
            for access in AccessSet::READS.iter() {
                assert_eq!(policy.authorize(&p(path), access), Ok(()), "{path} {access}");
            }
            assert!(!policy.is_hidden(&p(path)));
            assert_eq!(policy.denied_accesses(&p(path)), AccessSet::MUTATIONS, "{path}");
        }
        // Deny rules still apply inside the roots, and win outside them.
        assert_eq!(policy.authorize(&p("src/.env"), AccessKind::Create).unwrap_err().label, RuleLabel::Secret);
        assert_eq!(policy.authorize(&p("top.key"), AccessKind::Create).unwrap_err().label, RuleLabel::Secret);
        assert_eq!(policy.denied_accesses(&p("src/.env")), AccessSet::ALL);
        // `a-b` sorts between `a` and `a/x`: lookups still find the right root.
        let tricky = CallPolicy::new(Vec::new()).with_writable_roots([p("a-b"), p("a")]);
        assert_eq!(tricky.authorize(&p("a/x"), AccessKind::Create), Ok(()));
        assert_eq!(tricky.authorize(&p("a-b/x"), AccessKind::Create), Ok(()));
        assert!(tricky.authorize(&p("a-bc"), AccessKind::Create).is_err());
        assert!(tricky.authorize(&p("ab"), AccessKind::Create).is_err());
        // Rules added later keep the roots.
        let extended = policy.clone().with_rules([rule("src/gen/**", AccessSet::ALL, RuleLabel::Custom)]);
        assert_eq!(extended.writable_roots(), policy.writable_roots());
    }

    #[test]
    fn writable_roots_canonical_form() {
        let base = CallPolicy::balanced_default(None);
        let forward = base.clone().with_writable_roots([p("b"), p("a"), p("a/x"), p("b")]);
        let backward = base.clone().with_writable_roots([p("a/x"), p("b"), p("a")]);
        assert_eq!(forward, backward);
        assert_eq!(forward.writable_roots(), Some(&[p("a"), p("b")][..]));
        assert_eq!(forward.to_canonical_bytes(), backward.to_canonical_bytes());
        // The workspace root allows everything, as if there were no list.
        let everything = base.clone().with_writable_roots([p("a"), VPath::root()]);
        assert_eq!(everything, base);
        assert_eq!(everything.writable_roots(), None);
        // An empty list allows no mutation.
        let none = base.clone().with_writable_roots([]);
        assert_eq!(none.writable_roots(), Some(&[][..]));
        assert_eq!(none.authorize(&p("x"), AccessKind::Create).unwrap_err().rule, "writable_roots = []");
        let encodings = [&base, &forward, &none].map(Canonical::to_canonical_bytes);
        assert_ne!(encodings[0], encodings[1]);
        assert_ne!(encodings[0], encodings[2]);
        assert_ne!(encodings[1], encodings[2]);
        // Long lists are abbreviated in the rule text.
        let many = base.with_writable_roots((0..10).map(|index| p(&format!("r{index}"))));
        let error = many.authorize(&p("x"), AccessKind::Delete).unwrap_err();
        assert_eq!(error.rule, r#"writable_roots = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", ... 2 more]"#);
    }

    #[test]
    fn authorize_tree_preflights_every_descendant() {
        let policy = CallPolicy::balanced_default(None);
        let root = p("proj");
        let tree: Vec<VPath> =
            ["proj/src", "proj/src/main.rs", "proj/z/.env", "proj/deep/id_rsa", "proj/b.txt"].map(p).to_vec();
        let error = policy.authorize_tree(&root, &tree, AccessKind::Delete).unwrap_err();
        // The smallest denied path, whatever the order.
        assert_eq!(error.path, p("proj/deep/id_rsa"));
        assert_eq!(error.access, AccessKind::Delete);
        let reversed: Vec<VPath> = tree.iter().rev().cloned().collect();
        assert_eq!(policy.authorize_tree(&root, &reversed, AccessKind::Delete), Err(error));
        // Clean trees pass, for every access.
        let clean = [p("proj/src"), p("proj/src/main.rs")];
        assert_eq!(policy.authorize_tree(&root, &clean, AccessSet::ALL), Ok(()));
        assert_eq!(policy.authorize_tree(&root, [].iter(), AccessKind::Delete), Ok(()));
        // The root is checked first.
        let error = policy.authorize_tree(&p("secrets"), &tree, AccessKind::RenameSource).unwrap_err();
        assert_eq!(error.path, p("secrets"));
        // Several kinds: the first denied kind in declaration order for that path.
        let git = [p(".git/HEAD"), p(".git/config")];
        let error =
            policy.authorize_tree(&p(".git"), &git[..1], AccessSet::READS.union(AccessSet::MUTATIONS)).unwrap_err();
        assert_eq!((error.path, error.access), (p(".git"), AccessKind::Create));
        assert_eq!(policy.authorize_tree(&p(".git"), &git, AccessSet::READS), Ok(()));
        // Read denials hide nothing: a copy of a tree with a secret is refused.
        let error = policy.authorize_tree(&root, &tree, AccessKind::ContentRead).unwrap_err();
        assert_eq!(error.path, p("proj/deep/id_rsa"));
        // Writable roots take part too.
        let limited = CallPolicy::new(Vec::new()).with_writable_roots([p("proj/src")]);
        let error = limited.authorize_tree(&p("proj/src"), &[p("proj/src/a"), p("proj/b")], AccessKind::Delete);
        assert_eq!(error.unwrap_err().label, RuleLabel::WritableRoots);
    }

    #[test]
    fn remedy_names_the_policy_change() {
        let policy = CallPolicy::balanced_default(Some(&p("state")))
            .with_rules([
                rule("config/prod/**", AccessSet::MUTATIONS, RuleLabel::Custom).with_reason("production config"),
                rule("notes", AccessSet::single(AccessKind::Modify), RuleLabel::Custom),
                rule("LICENSE", AccessSet::single(AccessKind::Modify), RuleLabel::Custom),
                rule("LICEN*", AccessSet::MUTATIONS, RuleLabel::Custom),
            ])
            .with_writable_roots([p("config"), p("notes")]);
        let remedy = |path: &str, access| policy.remedy(&policy.authorize(&p(path), access).unwrap_err());
        assert_eq!(
            remedy("a/server.pem", AccessKind::ContentRead),
            "set defaults.secrets = false (turns off the built-in secret rules, `**/*.pem` among them)"
        );
        assert_eq!(
            remedy(".git/HEAD", AccessKind::Modify),
            "built-in git rule `**/.git/**`: a run never changes .git, so change the files themselves (to restore one, \
             read it with git show HEAD:PATH and write it, which discards its uncommitted changes; to move one, mv); the change is reviewed like any other; an \
             operator may allow .git changes with defaults.git = false"
        );
        // A read the git rule refuses (a policy that hides .git) is the operator's alone.
        let hidden =
            CallPolicy::balanced_default(None).with_rules([rule("**/.git/**", AccessSet::READS, RuleLabel::Git)]);
        assert_eq!(
            hidden.remedy(&hidden.authorize(&p(".git/HEAD"), AccessKind::ContentRead).unwrap_err()),
            "set defaults.git = false (turns off the built-in git rules, `**/.git/**` among them)"
        );
        assert_eq!(
            remedy("state/blobs", AccessKind::MetadataRead),
            "nothing can: vsh's runtime data (rule `state/**`) is protected whatever the policy says"
        );
        // Read after "to allow:", without the path its rule names already (ux85 L6).
        let outside = DeniedAccess {
            path: p("escape.txt"),
            access: AccessKind::ContentRead,
            rule: "outside the workspace: \"../escape.txt\"".to_owned(),
            label: RuleLabel::OutsideWorkspace,
            rule_access: AccessSet::ALL,
        };
        assert_eq!(
            policy.remedy(&outside),
            "nothing can: a path outside the workspace is never reachable, whatever the policy says"
        );
        assert_eq!(
            remedy("config/prod/db.yml", AccessKind::Delete),
            "remove or narrow the `[[protect]]` rule `config/prod/**` (reason: production config), or leave \
             `delete` out of it: `access = [\"create\", \"modify\", \"rename-source\", \"rename-destination\"]`"
        );
        assert_eq!(remedy("notes", AccessKind::Modify), "remove or narrow the `[[protect]]` rule `notes`");
        // What else denies it, met next once the rule named is narrowed (ux85 L1).
        assert_eq!(
            remedy("LICENSE", AccessKind::Modify),
            "remove or narrow the `[[protect]]` rule `LICEN*`, or leave `modify` out of it: `access = \
             [\"create\", \"delete\", \"rename-source\", \"rename-destination\"]`; also remove or narrow the \
             `[[protect]]` rule `LICENSE`; also add a root containing `LICENSE` to defaults.writable_roots (now writable_roots = \
             [\"config\", \"notes\"]), or remove defaults.writable_roots"
        );
        assert_eq!(
            remedy("src/x", AccessKind::Create),
            "add a root containing `src/x` to defaults.writable_roots (now writable_roots = [\"config\", \
             \"notes\"]), or remove defaults.writable_roots"
        );
        // A file made beside a file that is a root: an in-place editor's
        // temporary file, whose name changes every run (ux51); beside
        // directories only, not.
        assert!(!remedy("sedX1y2Z3", AccessKind::Create).contains("temporary file"));
        let top = CallPolicy::new(Vec::new()).with_writable_roots([p("index.js"), p("src")]);
        let temporary = top.remedy(&top.authorize(&p("sedX1y2Z3"), AccessKind::Create).unwrap_err());
        assert!(temporary.contains("writes a temporary file beside it") && temporary.contains("the workspace's top"));
        let nested = CallPolicy::new(Vec::new()).with_writable_roots([p("web/index.js")]);
        let denied = nested.authorize(&p("web/sedQ"), AccessKind::Create).unwrap_err();
        assert!(nested.remedy(&denied).contains("make its directory, `web`, a root"), "{}", nested.remedy(&denied));
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The index only leaves out rules that cannot match: the first
        /// denying rule and every denied access are those of trying every
        /// rule in canonical order with `Pattern::matches`, with and without
        /// the index (more than 64 rules), for either case.
        #[test]
        fn the_rule_index_agrees_with_trying_every_rule(
            picks in prop::collection::vec((0usize..12, 1u16..256, any::<bool>()), 0..10),
            filler in 0usize..70,
            paths in prop::collection::vec(prop::collection::vec(0usize..8, 1..5), 1..12),
        ) {
            let patterns =
                ["**/.env/**", "**/Secrets/**", "a/**", "**/b", "*.key", "c/[xy]", "**/d/**/e", "**/*.pem", "B/c", "**/A*/**", "x", "**"];
            let names = ["a", "b", "c", "d", "e", ".ENV", "secrets", "k.PEM"];
            let mut rules: Vec<ProtectedRule> = picks
                .iter()
                .map(|(pattern, bits, insensitive)| {
                    let pattern = Pattern::parse(patterns[*pattern]).unwrap();
                    let pattern = if *insensitive { pattern.case_insensitive() } else { pattern };
                    ProtectedRule::new(pattern, AccessSet::from_bits(*bits).unwrap(), RuleLabel::Custom)
                })
                .collect();
            // Rules that match nothing below, to pass the index's 64 rules.
            rules.extend((0..filler).map(|number| rule(&format!("zz{number}/**"), AccessSet::ALL, RuleLabel::Custom)));
            let policy = CallPolicy::new(rules);
            for components in &paths {
                let text: Vec<&str> = components.iter().map(|index| names[*index]).collect();
                let path = VPath::parse(&text.join("/")).unwrap();
                let matching: Vec<&ProtectedRule> =
                    policy.rules().iter().filter(|rule| rule.pattern.matches(&path)).collect();
                for access in AccessKind::ALL {
                    // A rename's source is refused by a rule that denies it
                    // or any read (a path protected from reading stays put).
                    let refuses = |rule: &&&ProtectedRule| {
                        rule.access.contains(access)
                            || (access == AccessKind::RenameSource && rule.access.intersects(AccessSet::READS))
                    };
                    let expected = matching.iter().find(refuses);
                    let refused = policy.authorize(&path, access).err().map(|denied| denied.rule);
                    prop_assert_eq!(refused, expected.map(|rule| rule.pattern.as_str().to_owned()), "{} {:?}", path, access);
                }
                let mut denied = matching.iter().fold(AccessSet::NONE, |all, rule| all.union(rule.access));
                if denied.intersects(AccessSet::READS) {
                    denied = denied.union(AccessSet::single(AccessKind::RenameSource));
                }
                prop_assert_eq!(policy.denied_accesses(&path), denied, "{}", path);
            }
        }
    }

    #[test]
    fn an_outside_attempt_is_quoted_whole_or_cut_at_a_character_boundary() {
        let at = VPath::root();
        let short = DeniedAccess::outside("../etc/passwd", at.clone(), AccessKind::ContentRead);
        assert_eq!(short.rule, "outside the workspace: \"../etc/passwd\"");
        assert_eq!(short.label, RuleLabel::OutsideWorkspace);
        let exact = "a".repeat(MAX_OUTSIDE_QUOTE);
        let whole = DeniedAccess::outside(&exact, at.clone(), AccessKind::ContentRead);
        assert_eq!(whole.rule, format!("outside the workspace: {exact:?}"));
        // A two-byte character straddles the cut: the quote stops before it.
        let long = format!("{}é{}", "b".repeat(MAX_OUTSIDE_QUOTE - 1), "c".repeat(10));
        let cut = DeniedAccess::outside(&long, at, AccessKind::ContentRead);
        assert_eq!(cut.rule, format!("outside the workspace: {:?}...", "b".repeat(MAX_OUTSIDE_QUOTE - 1)));
    }
}
