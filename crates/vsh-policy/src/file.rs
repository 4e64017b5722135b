//! Policy files: a TOML document that picks a base profile and adjusts it,
//! parsed into one validated [`TransactionPolicy`].
//!
//! # Format (version 1)
//!
//! ```toml
//! version = 1                      # required; the only version this build reads
//! profile = "strict"               # base profile: balanced (default) | strict | paranoid
//!
//! [thresholds]                     # optional; each key overrides the profile's value
//! escalate_touched_paths = 200     # counts are non-negative integers
//! escalate_changed_bytes = "16MiB" # byte thresholds take integers or size strings
//! deny_touched_paths = 5000
//! deny_changed_bytes = "512MiB"    # units B, KiB, MiB, GiB, TiB (powers of 1024)
//! deny_deleted_paths = 1000
//! deny_delete_ratio = 0.5          # fractions in (0, 1], rounded to 1/10000
//! delete_ratio_min_paths = 25
//! rewrite_escalate_ratio = 0.5     # a file that loses more than this share, or is emptied, escalates
//!
//! [[protect]]                      # extra protected patterns, any number of them
//! pattern = "config/prod/**"       # the pattern language of `vsh_policy::pattern`
//! access = ["modify", "delete", "create"]
//! reason = "production config"     # optional; shown to reviewers with a denial
//!
//! [[protect]]
//! pattern = "**/*.sqlite"
//! access = "all"                   # one name, or an array of names; default "all"
//! case_sensitive = false           # default false: `DATA.SQLITE` is protected too
//!
//! [[review]]                       # paths whose changes wait for a reviewer, any number of them
//! pattern = "tests/**"
//! changes = ["delete"]             # create, modify, delete or all; default all (none with a ratio alone)
//! rewrite_escalate_ratio = 0.1     # optional: a lower content-rewrite ratio for these paths
//! reason = "tests guard the build" # optional; shown to reviewers
//!
//! [defaults]
//! secrets = true                   # keep the built-in secret rules (default true)
//! git = true                       # keep the rule that keeps `.git` unchanged (default true)
//! writable_roots = ["src", "docs"] # optional: every mutation outside these is denied
//!
//! [commands]
//! scratch = ["target", "build"]    # real commands' scratch directories (default: target, node_modules/.cache, __pycache__, .pytest_cache)
//! ```
//!
//! - **`version`** must be the integer `1`.
//! - **`profile`** names the base profile (ASCII case is ignored); its thresholds
//!   (see [`profile`](crate::profile)) and its escalation of every mutation
//!   (Strict, Paranoid) apply unless overridden.
//! - **`[thresholds]`** overrides fields of [`PolicyThresholds`]. The two ratios
//!   are written as fractions (`deny_delete_ratio` for `deny_delete_ratio_bps`,
//!   `rewrite_escalate_ratio` for `rewrite_escalate_ratio_bps`). The result must
//!   pass [`PolicyThresholds::validate`]: no zero, no escalation threshold above
//!   its denial threshold.
//! - **`[[protect]]`** adds [`RuleLabel::Custom`] rules. `access` names are `all`,
//!   `reads`, `mutations` and the kinds of [`AccessKind::name`]: `metadata-read`,
//!   `content-read`, `directory-read`, `create`, `modify`, `delete`,
//!   `rename-source`, `rename-destination`. An empty list is an error: a rule
//!   must deny something.
//! - **`[[review]]`** adds [`ReviewRule`]s (at most [`MAX_REVIEW_RULES`]):
//!   a diff that makes one of its `changes` (`create`, `modify`, `delete`,
//!   or `all`; a mode change is a `modify`) to a path its pattern covers
//!   waits for a reviewer (`review-rule`), and its `rewrite_escalate_ratio`
//!   lowers the `content-rewrite` ratio of the files it covers. `changes`
//!   defaults to `all`, or to none when the rule gives a ratio; an empty
//!   list is an error, as is a rule that gives neither.
//! - **`[defaults]`** keeps or drops the built-in secret and git rule groups
//!   ([`DefaultRules`]). The runtime-data rules cannot be dropped: there is no
//!   key for them. `writable_roots` is an allow-list of workspace-relative paths
//!   (see [`CallPolicy::with_writable_roots`]): a mutation outside every root is
//!   denied as a `ProtectedMutation` whose rule names the list. Roots are literal
//!   paths, not patterns; `..` components and the workspace root itself are
//!   rejected. An empty list makes the policy read-only.
//! - **`[commands]`** `scratch` names real commands' scratch directories:
//!   relative paths of plain names (at most 8 deep, not in `.vsh` or `.git`,
//!   at most 64 of them; `node_modules/.cache` is used only where
//!   `node_modules` is a directory, `target` (or `crate/target`) only where
//!   a `Cargo.toml` or `pom.xml` is beside it) that a command writes directly, kept
//!   between runs and never in a diff; `__pycache__` stands for Python's
//!   bytecode, which commands then write to a directory of their own
//!   (`PYTHONPYCACHEPREFIX`) instead of beside the sources. An empty list gives
//!   commands none.
//!
//! Every table rejects keys it does not know, so a misspelled key is an error
//! rather than a silently ignored setting.
//!
//! # Errors
//!
//! Each problem is a [`PolicyFileError`] that names the field as a path into the
//! document ([`PolicyFileError::field`]): `version`, `thresholds.deny_changed_bytes`,
//! `protect[2].pattern` (array indices count from 0), `protect[0].access[1]`,
//! `defaults.writable_roots[0]`. A file is read whole, at most
//! [`MAX_POLICY_FILE_BYTES`], and must be UTF-8 TOML. When several fields are
//! wrong, one error is reported, the first found: unknown top-level keys, then
//! `version`, `profile`, `thresholds`, `protect` (in array order), `review`
//! (in array order), `defaults` and `commands`.
//!
//! A policy file is operator configuration, not workspace content: it is read
//! with plain file I/O, never through the workspace's capability handle.
//!
//! # Example
//!
//! ```
//! use vsh_policy::{PolicyFile, PolicyProfile};
//!
//! let policy = PolicyFile::parse(
//!     r#"
//!     version = 1
//!     profile = "strict"
//!     [thresholds]
//!     deny_changed_bytes = "512MiB"
//!     [[protect]]
//!     pattern = "config/prod/**"
//!     access = "mutations"
//!     "#,
//! )?;
//! assert_eq!(policy.profile(), PolicyProfile::Strict);
//! assert_eq!(policy.thresholds().deny_changed_bytes, 512 << 20);
//! # Ok::<(), vsh_policy::PolicyFileError>(())
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};

use vsh_types::VPath;

use crate::access::{AccessKind, AccessSet};
use crate::pattern::{Pattern, PatternError};
use crate::profile::{MAX_RATIO_BPS, PolicyConfigError, PolicyProfile, PolicyThresholds};
use crate::review::{MAX_REVIEW_RULES, REVIEWABLE_CHANGES, ReviewRule};
use crate::rules::{CallPolicy, DefaultRules, ProtectedRule, RuleLabel};
use crate::transaction::TransactionPolicy;

/// The only policy file `version` this build reads.
pub const POLICY_FILE_VERSION: i64 = 1;

/// The largest policy file accepted, in bytes (1 MiB).
pub const MAX_POLICY_FILE_BYTES: u64 = 1 << 20;

/// The longest `reason` of a `[[protect]]` rule, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The longest key quoted in an error, in characters.
const MAX_QUOTED_KEY_CHARS: usize = 64;

const TOP_KEYS: &str = "version, profile, thresholds, protect, review, defaults, commands";
const THRESHOLD_KEYS: &str = "escalate_touched_paths, escalate_changed_bytes, deny_touched_paths, deny_changed_bytes, \
                              deny_deleted_paths, deny_delete_ratio, delete_ratio_min_paths, rewrite_escalate_ratio";
const PROTECT_KEYS: &str = "pattern, access, reason, case_sensitive";
const REVIEW_KEYS: &str = "pattern, changes, rewrite_escalate_ratio, reason, case_sensitive";
const DEFAULTS_KEYS: &str = "secrets, git, writable_roots";
const COMMANDS_KEYS: &str = "scratch";
/// The most names a scratch path has (`node_modules/.cache` has two).
const MAX_SCRATCH_DEPTH: usize = 8;
/// The most scratch directories a policy file may name.
const MAX_SCRATCH: usize = 64;

/// What to write for a missing key (a policy file's first line).
fn missing_hint(field: &str) -> &'static str {
    if field == "version" { " (a policy file starts with `version = 1`)" } else { "" }
}

/// Where a key given at the top that belongs in a table goes.
/// Where in `text` (a policy document) the field path `field` is
/// (`protect[0].access[1]`, `thresholds.deny_changed_bytes`): the line and
/// column (from 1, in characters) of its key, or of the element an index
/// names; `None` when the text has no such place (a missing key).
pub fn locate(text: &str, field: &str) -> Option<(usize, usize)> {
    use toml::de::{DeTable, DeValue};
    let document = DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let mut value: Option<&toml::Spanned<DeValue<'_>>> = None;
    let mut at = None;
    for part in field.split('.') {
        let (key, indexes) = part.split_once('[').map_or((part, ""), |(key, rest)| (key, rest));
        if !key.is_empty() {
            if let Some(DeValue::Table(inner)) = value.map(toml::Spanned::get_ref) {
                table = inner;
            } else if value.is_some() {
                return None;
            }
            let (name, found) = table.iter().find(|(name, _)| name.get_ref().as_ref() == key)?;
            at = Some(name.span().start);
            value = Some(found);
        }
        for index in indexes.split('[').filter(|index| !index.is_empty()) {
            let index: usize = index.trim_end_matches(']').parse().ok()?;
            let DeValue::Array(items) = value?.get_ref() else { return None };
            let item = items.get(index)?;
            at = Some(item.span().start);
            value = Some(item);
        }
    }
    let offset = at?;
    let before = text.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    Some((line, column))
}

/// `error`'s causes, each after `: ` (a pattern's or a threshold's reason),
/// for [`PolicyFileError::In`], which shows them in its own message.
fn causes(error: &PolicyFileError) -> String {
    let mut text = String::new();
    let mut cause = std::error::Error::source(error);
    while let Some(reason) = cause {
        text.push_str(": ");
        text.push_str(&reason.to_string());
        cause = reason.source();
    }
    text
}

/// The last key of a field path (`protect[0].acess`: `acess`).
fn last_key(field: &str) -> &str {
    field.rsplit('.').next().unwrap_or(field)
}

/// The profiles' names, for "did you mean".
const PROFILE_NAMES: &str = "balanced, strict, paranoid";

/// `" (did you mean `x`?)"` for the one of `expected` (a comma-separated
/// list) closest to `found`, when one is close ([`closest`]); empty otherwise.
pub(crate) fn did_you_mean(found: &str, expected: &str) -> String {
    closest(found, expected).map(|candidate| format!(" (did you mean `{candidate}`?)")).unwrap_or_default()
}

/// The one of `expected` (a comma-separated list) closest to `found`, when
/// one is close: a typo, a letter missing or swapped, a singular for a plural.
pub fn closest<'a>(found: &str, expected: &'a str) -> Option<&'a str> {
    let found = found.trim_matches('`');
    expected
        .split(',')
        .map(|candidate| candidate.trim().trim_matches('`'))
        .filter(|candidate| !candidate.is_empty() && *candidate != found)
        .map(|candidate| (strsim::damerau_levenshtein(found, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= 2.max(candidate.len() / 4) && *distance < candidate.len())
        .min()
        .map(|(_, candidate)| candidate)
}

/// What an unknown access name likely means: a word for one the policy
/// calls otherwise (`write`: `mutations`, ux80 L6), else the closest name.
fn access_hint(name: &str) -> String {
    let meant = match name.trim().to_ascii_lowercase().as_str() {
        "write" | "writes" | "mutate" | "mutation" | "change" | "changes" | "edit" | "edits" => {
            "mutations` (create, modify and delete) or `modify"
        }
        "read" | "read-content" | "open" => "reads` (every read) or `content-read",
        "remove" | "rm" | "unlink" | "deletion" => "delete",
        "rename" | "move" | "mv" => "rename-source` or `rename-destination",
        "list" | "ls" | "readdir" | "listing" => "directory-read",
        "stat" | "metadata" => "metadata-read",
        "any" | "everything" | "*" => "all",
        _ => return did_you_mean(name, ACCESS_NAMES),
    };
    format!(" (did you mean `{meant}`?)")
}

fn unknown_hint(field: &str) -> &'static str {
    match field {
        "writable_roots" | "secrets" | "git" => " (it belongs in the `[defaults]` table)",
        "scratch" => " (it belongs in the `[commands]` table)",
        _ => "",
    }
}

/// The access names a `[[protect]]` rule takes.
const ACCESS_NAMES: &str = "all, reads, mutations, metadata-read, content-read, directory-read, create, modify, delete, \
                            rename-source, rename-destination";

/// Why a policy file was refused. Every variant about the document's content
/// names the field ([`PolicyFileError::field`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyFileError {
    /// A refusal of a policy file's content, with the file and where in it
    /// (the key or value the refusal names, when it can be found).
    #[error("{error}{}\n  at {}{}", causes(error), path.display(), at.map_or_else(String::new, |(line, column)| format!(", line {line}, column {column}")))]
    In {
        /// The file.
        path: PathBuf,
        /// The line and column (from 1, in characters) of what is refused.
        at: Option<(usize, usize)>,
        /// The refusal (whose own cause, a pattern's or a threshold's, is
        /// this error's: ux77 4 found it dropped).
        error: Box<PolicyFileError>,
    },
    /// The file could not be opened or read.
    #[error("cannot read the policy file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The path is a directory, device or other non-regular file.
    #[error("the policy file {} is not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The document is larger than [`MAX_POLICY_FILE_BYTES`].
    #[error("the policy file is {size} bytes, more than the limit of {limit}")]
    TooLarge {
        /// The size found (for a file that grows while read, at least this).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("the policy file is not UTF-8 text")]
    NotUtf8,
    /// The document is not TOML.
    #[error("the policy file is not valid TOML at line {line}, column {column}: {message}")]
    Syntax {
        /// The line of the error, from 1.
        line: usize,
        /// The column of the error, in characters from 1.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// A required key is missing.
    #[error("`{field}` is missing{}", missing_hint(field))]
    MissingField {
        /// The missing field.
        field: String,
    },
    /// A key that the table does not define.
    #[error(
        "`{field}` is not a known key{}; expected one of: {expected}{}",
        did_you_mean(last_key(field), expected),
        unknown_hint(field)
    )]
    UnknownField {
        /// The unknown key, as a path.
        field: String,
        /// The keys this table accepts.
        expected: &'static str,
    },
    /// A value of the wrong TOML type.
    #[error("`{field}` must be {expected}, found {found}")]
    WrongType {
        /// The field.
        field: String,
        /// What it must be.
        expected: &'static str,
        /// The TOML type found.
        found: &'static str,
    },
    /// A `version` this build does not read.
    #[error("`{field}` is {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// The field (`version`).
        field: String,
        /// The version found.
        found: i64,
        /// The version supported ([`POLICY_FILE_VERSION`]).
        supported: i64,
    },
    /// A `profile` that is not balanced, strict or paranoid.
    #[error("`{field}` is {name:?}{}; expected balanced, strict or paranoid", did_you_mean(.name, PROFILE_NAMES))]
    UnknownProfile {
        /// The field (`profile`).
        field: String,
        /// The name found (at most 64 characters of it).
        name: String,
    },
    /// A negative count or size.
    #[error("`{field}` must not be negative, found {value}")]
    Negative {
        /// The field.
        field: String,
        /// The value found.
        value: i64,
    },
    /// A size string that does not parse.
    #[error("`{field}` is {value:?}, not a byte size: {problem}")]
    InvalidSize {
        /// The field.
        field: String,
        /// The string found (at most 64 characters of it).
        value: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A ratio outside `(0, 1]`.
    #[error("`{field}` is {value}; a ratio must be greater than 0 and at most 1 (at least 0.0001)")]
    InvalidRatio {
        /// The field.
        field: String,
        /// The value found, as written by Rust's float formatting.
        value: String,
    },
    /// The thresholds, once the overrides are applied, fail validation.
    #[error("`{field}` is not a valid threshold")]
    Threshold {
        /// The threshold field the validation named.
        field: String,
        /// The validation failure.
        #[source]
        source: PolicyConfigError,
    },
    /// A `[[protect]]` pattern that does not parse.
    #[error("`{field}` is not a valid pattern")]
    Pattern {
        /// The field (`protect[N].pattern`).
        field: String,
        /// Why the pattern is invalid.
        #[source]
        source: PatternError,
    },
    /// An access name that is not known.
    #[error(
        "`{field}` is {name:?}{}; expected all, reads, mutations, metadata-read, content-read, directory-read, \
         create, modify, delete, rename-source or rename-destination",
        access_hint(name)
    )]
    UnknownAccess {
        /// The field (`protect[N].access` or `protect[N].access[M]`).
        field: String,
        /// The name found (at most 64 characters of it).
        name: String,
    },
    /// An empty access list.
    #[error("`{field}` is empty; a rule must deny at least one access")]
    EmptyAccess {
        /// The field (`protect[N].access`).
        field: String,
    },
    /// A `[[review]]` change name that is not known.
    #[error(
        "`{field}` is {name:?}{}; expected all, create, modify or delete",
        did_you_mean(name, "all, create, modify, delete")
    )]
    UnknownChange {
        /// The field (`review[N].changes` or `review[N].changes[M]`).
        field: String,
        /// The name found (at most 64 characters of it).
        name: String,
    },
    /// A `[[review]]` rule that makes no change wait and sets no ratio.
    #[error(
        "`{field}` is empty; name the changes that wait for a reviewer (all, create, modify, delete), or leave \
         it out: every change waits"
    )]
    EmptyChanges {
        /// The field (`review[N].changes`).
        field: String,
    },
    /// More `[[review]]` rules than [`MAX_REVIEW_RULES`].
    #[error("`{field}` has {count} rules, more than the limit of {limit}")]
    TooManyReviewRules {
        /// The field (`review`).
        field: String,
        /// How many the file gives.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A `reason` longer than [`MAX_REASON_BYTES`].
    #[error("`{field}` is {length} bytes, more than the limit of {limit}")]
    ReasonTooLong {
        /// The field (`protect[N].reason`).
        field: String,
        /// Its length in bytes.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// A writable root that is not a valid relative path.
    #[error("`{field}` is {value:?}, not a valid writable root: {problem}")]
    InvalidRoot {
        /// The field (`defaults.writable_roots[N]`).
        field: String,
        /// The string found (at most 64 characters of it).
        value: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A `[commands] scratch` entry that is not a relative path of plain
    /// names, or too many.
    #[error("`{field}` is {value:?}, not a valid scratch directory: {problem}")]
    InvalidScratch {
        /// The field (`commands.scratch[N]`, or `commands.scratch`).
        field: String,
        /// The string found (at most 64 characters of it).
        value: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl PolicyFileError {
    /// The offending field as a path into the document (`protect[2].pattern`),
    /// or `None` for errors about the file as a whole (reading, size, encoding,
    /// syntax).
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::In { error, .. } => error.field(),
            Self::Read { .. } | Self::NotAFile { .. } | Self::TooLarge { .. } | Self::NotUtf8 | Self::Syntax { .. } => {
                None
            }
            Self::MissingField { field }
            | Self::UnknownField { field, .. }
            | Self::WrongType { field, .. }
            | Self::UnsupportedVersion { field, .. }
            | Self::UnknownProfile { field, .. }
            | Self::Negative { field, .. }
            | Self::InvalidSize { field, .. }
            | Self::InvalidRatio { field, .. }
            | Self::Threshold { field, .. }
            | Self::Pattern { field, .. }
            | Self::UnknownAccess { field, .. }
            | Self::EmptyAccess { field }
            | Self::UnknownChange { field, .. }
            | Self::EmptyChanges { field }
            | Self::TooManyReviewRules { field, .. }
            | Self::ReasonTooLong { field, .. }
            | Self::InvalidRoot { field, .. }
            | Self::InvalidScratch { field, .. } => Some(field),
        }
    }
}

/// A validated policy file: everything in it, checked, before it is combined
/// with a data directory into a [`TransactionPolicy`] ([`PolicyFile::policy`]).
///
/// See the [module documentation](self) for the format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFile {
    profile: PolicyProfile,
    thresholds: PolicyThresholds,
    protect: Vec<ProtectedRule>,
    review: Vec<ReviewRule>,
    defaults: DefaultRules,
    writable_roots: Option<Vec<VPath>>,
    scratch: Option<Vec<String>>,
}

impl PolicyFile {
    /// Parse and validate a policy document into the policy it describes, with
    /// the default data directory (see [`PolicyFile::policy`]).
    pub fn parse(text: &str) -> Result<TransactionPolicy, PolicyFileError> {
        Ok(Self::from_toml(text)?.policy(None))
    }

    /// Parse and validate a policy document, keeping its parts.
    pub fn from_toml(text: &str) -> Result<PolicyFile, PolicyFileError> {
        let size = text.len() as u64;
        if size > MAX_POLICY_FILE_BYTES {
            return Err(PolicyFileError::TooLarge { size, limit: MAX_POLICY_FILE_BYTES });
        }
        let document: toml::Table = text.parse().map_err(|error: toml::de::Error| syntax_error(text, &error))?;
        Self::from_table(&document)
    }

    /// Read the file at `path` (at most [`MAX_POLICY_FILE_BYTES`], checked before
    /// and while reading) and validate it.
    ///
    /// # Ambient authority
    ///
    /// The policy file is an operator's file outside any workspace, named by
    /// path; it is read by path (never written).
    #[allow(clippy::disallowed_methods)]
    pub fn read(path: &Path) -> Result<PolicyFile, PolicyFileError> {
        let read_error = |source| PolicyFileError::Read { path: path.to_owned(), source };
        // Refuse directories, FIFOs and devices before opening: opening a FIFO
        // would block.
        let metadata = std::fs::metadata(path).map_err(read_error)?;
        if !metadata.is_file() {
            return Err(PolicyFileError::NotAFile { path: path.to_owned() });
        }
        let file = std::fs::File::open(path).map_err(read_error)?;
        let metadata = file.metadata().map_err(read_error)?;
        if !metadata.is_file() {
            return Err(PolicyFileError::NotAFile { path: path.to_owned() });
        }
        if metadata.len() > MAX_POLICY_FILE_BYTES {
            return Err(PolicyFileError::TooLarge { size: metadata.len(), limit: MAX_POLICY_FILE_BYTES });
        }
        let mut bytes = Vec::with_capacity(metadata.len() as usize);
        file.take(MAX_POLICY_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(read_error)?;
        if bytes.len() as u64 > MAX_POLICY_FILE_BYTES {
            return Err(PolicyFileError::TooLarge { size: bytes.len() as u64, limit: MAX_POLICY_FILE_BYTES });
        }
        let text = String::from_utf8(bytes).map_err(|_| PolicyFileError::NotUtf8)?;
        Self::from_toml_at(&text, path)
    }

    /// [`PolicyFile::from_toml`] of `text`, read from `path`: a refusal of its
    /// content names the file and where in it ([`PolicyFileError::In`]).
    pub fn from_toml_at(text: &str, path: &Path) -> Result<PolicyFile, PolicyFileError> {
        Self::from_toml(text).map_err(|error| {
            let at = error.field().and_then(|field| locate(text, field));
            PolicyFileError::In { path: path.to_owned(), at, error: Box::new(error) }
        })
    }

    /// The policy this file describes: its profile and thresholds, the chosen
    /// built-in rule groups with the runtime-data rules for `data_dir` (see
    /// [`CallPolicy::balanced_default`]), its `[[protect]]` rules, its
    /// writable roots and its `[[review]]` rules.
    pub fn policy(&self, data_dir: Option<&VPath>) -> TransactionPolicy {
        let mut calls = CallPolicy::with_defaults(data_dir, self.defaults).with_rules(self.protect.iter().cloned());
        if let Some(roots) = &self.writable_roots {
            calls = calls.with_writable_roots(roots.iter().cloned());
        }
        TransactionPolicy::assemble_with(
            self.profile,
            self.thresholds,
            calls,
            self.scratch.clone(),
            self.review.clone(),
        )
    }

    /// The base profile.
    pub fn profile(&self) -> PolicyProfile {
        self.profile
    }

    /// The thresholds: the profile's, with the file's overrides (validated).
    pub fn thresholds(&self) -> &PolicyThresholds {
        &self.thresholds
    }

    /// The `[[protect]]` rules, in file order, each labelled [`RuleLabel::Custom`].
    pub fn protect(&self) -> &[ProtectedRule] {
        &self.protect
    }

    /// The `[[review]]` rules, in file order.
    pub fn review(&self) -> &[ReviewRule] {
        &self.review
    }

    /// The built-in rule groups kept.
    pub fn defaults(&self) -> DefaultRules {
        self.defaults
    }

    /// The writable roots as written (normalized), or `None` when the file sets
    /// none.
    pub fn writable_roots(&self) -> Option<&[VPath]> {
        self.writable_roots.as_deref()
    }

    /// Real commands' scratch directories (`[commands] scratch`), or `None`
    /// when the file names none.
    pub fn command_scratch(&self) -> Option<&[String]> {
        self.scratch.as_deref()
    }

    fn from_table(document: &toml::Table) -> Result<PolicyFile, PolicyFileError> {
        for key in document.keys() {
            if !["version", "profile", "thresholds", "protect", "review", "defaults", "commands"]
                .contains(&key.as_str())
            {
                return Err(unknown(&field_of("", key), TOP_KEYS));
            }
        }
        match document.get("version") {
            None => return Err(PolicyFileError::MissingField { field: "version".to_owned() }),
            Some(toml::Value::Integer(POLICY_FILE_VERSION)) => {}
            Some(toml::Value::Integer(found)) => {
                return Err(PolicyFileError::UnsupportedVersion {
                    field: "version".to_owned(),
                    found: *found,
                    supported: POLICY_FILE_VERSION,
                });
            }
            Some(other) => return Err(wrong_type("version", "an integer", other)),
        }
        let profile = match document.get("profile") {
            None => PolicyProfile::default(),
            Some(toml::Value::String(name)) => name
                .parse()
                .map_err(|_| PolicyFileError::UnknownProfile { field: "profile".to_owned(), name: shorten(name) })?,
            Some(other) => return Err(wrong_type("profile", "a string", other)),
        };
        let mut thresholds = PolicyThresholds::for_profile(profile);
        if let Some(value) = document.get("thresholds") {
            thresholds = parse_thresholds(table_of("thresholds", value)?, thresholds)?;
        }
        let protect = match document.get("protect") {
            None => Vec::new(),
            Some(toml::Value::Array(entries)) => entries
                .iter()
                .enumerate()
                .map(|(index, entry)| parse_protect(&format!("protect[{index}]"), entry))
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(wrong_type("protect", "an array of tables ([[protect]])", other)),
        };
        let review = match document.get("review") {
            None => Vec::new(),
            Some(toml::Value::Array(entries)) if entries.len() > MAX_REVIEW_RULES => {
                return Err(PolicyFileError::TooManyReviewRules {
                    field: "review".to_owned(),
                    count: entries.len(),
                    limit: MAX_REVIEW_RULES,
                });
            }
            Some(toml::Value::Array(entries)) => entries
                .iter()
                .enumerate()
                .map(|(index, entry)| parse_review(&format!("review[{index}]"), entry))
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(wrong_type("review", "an array of tables ([[review]])", other)),
        };
        let (defaults, writable_roots) = match document.get("defaults") {
            None => (DefaultRules::default(), None),
            Some(value) => parse_defaults(table_of("defaults", value)?)?,
        };
        let scratch = match document.get("commands") {
            None => None,
            Some(value) => parse_commands(table_of("commands", value)?)?,
        };
        Ok(PolicyFile { profile, thresholds, protect, review, defaults, writable_roots, scratch })
    }
}

impl TransactionPolicy {
    /// Read and validate the policy file at `path` (see [`crate::file`]), with
    /// the default data directory.
    pub fn from_file(path: impl AsRef<Path>) -> Result<TransactionPolicy, PolicyFileError> {
        Self::from_file_with_data_dir(path, None)
    }

    /// [`TransactionPolicy::from_file`], protecting `data_dir` as runtime data
    /// as [`TransactionPolicy::from_profile`] does.
    pub fn from_file_with_data_dir(
        path: impl AsRef<Path>,
        data_dir: Option<&VPath>,
    ) -> Result<TransactionPolicy, PolicyFileError> {
        Ok(PolicyFile::read(path.as_ref())?.policy(data_dir))
    }
}

/// `policy` as a policy file (version 1), every threshold written out (the
/// profile's defaults included), so an operator can start a file from it;
/// built-in rules are listed as comments. Parsing the text gives a policy with
/// the same digest, for a policy made without a data directory.
pub fn render_policy(policy: &TransactionPolicy) -> String {
    let mut document = toml::Table::new();
    document.insert("version".into(), toml::Value::Integer(POLICY_FILE_VERSION));
    document.insert("profile".into(), toml::Value::String(policy.profile().name().to_owned()));
    let t = policy.thresholds();
    let count = |value: u64| toml::Value::Integer(i64::try_from(value).unwrap_or(i64::MAX));
    let ratio = |bps: u32| toml::Value::Float(f64::from(bps) / f64::from(MAX_RATIO_BPS));
    let mut thresholds = toml::Table::new();
    for (key, value) in [
        ("escalate_touched_paths", count(t.escalate_touched_paths)),
        ("escalate_changed_bytes", count(t.escalate_changed_bytes)),
        ("deny_touched_paths", count(t.deny_touched_paths)),
        ("deny_changed_bytes", count(t.deny_changed_bytes)),
        ("deny_deleted_paths", count(t.deny_deleted_paths)),
        ("deny_delete_ratio", ratio(t.deny_delete_ratio_bps)),
        ("delete_ratio_min_paths", count(t.delete_ratio_min_paths)),
        ("rewrite_escalate_ratio", ratio(t.rewrite_escalate_ratio_bps)),
    ] {
        thresholds.insert(key.into(), value);
    }
    document.insert("thresholds".into(), toml::Value::Table(thresholds));
    let rules = policy.calls().rules();
    let mut protect = Vec::new();
    let mut built_in = Vec::new();
    for rule in rules {
        if rule.label != RuleLabel::Custom {
            built_in.push(rule.to_string());
            continue;
        }
        let mut table = toml::Table::new();
        table.insert("pattern".into(), toml::Value::String(rule.pattern.as_str().to_owned()));
        let access = if rule.access == AccessSet::ALL {
            toml::Value::String("all".into())
        } else {
            toml::Value::Array(rule.access.iter().map(|kind| toml::Value::String(kind.name().into())).collect())
        };
        table.insert("access".into(), access);
        if let Some(reason) = &rule.reason {
            table.insert("reason".into(), toml::Value::String(reason.clone()));
        }
        table.insert("case_sensitive".into(), toml::Value::Boolean(!rule.pattern.is_case_insensitive()));
        protect.push(toml::Value::Table(table));
    }
    if !protect.is_empty() {
        document.insert("protect".into(), toml::Value::Array(protect));
    }
    let review: Vec<toml::Value> = policy.review_rules().iter().map(|rule| review_table(rule, ratio)).collect();
    if !review.is_empty() {
        document.insert("review".into(), toml::Value::Array(review));
    }
    let mut defaults = toml::Table::new();
    let has = |label: RuleLabel| rules.iter().any(|rule| rule.label == label);
    defaults.insert("secrets".into(), toml::Value::Boolean(has(RuleLabel::Secret)));
    defaults.insert("git".into(), toml::Value::Boolean(has(RuleLabel::Git)));
    if let Some(roots) = policy.calls().writable_roots() {
        let roots = roots.iter().map(|root| toml::Value::String(root.as_str().to_owned())).collect();
        defaults.insert("writable_roots".into(), toml::Value::Array(roots));
    }
    document.insert("defaults".into(), toml::Value::Table(defaults));
    if let Some(names) = policy.command_scratch() {
        let mut commands = toml::Table::new();
        commands.insert(
            "scratch".into(),
            toml::Value::Array(names.iter().map(|name| toml::Value::String(name.clone())).collect()),
        );
        document.insert("commands".into(), toml::Value::Table(commands));
    }
    let mut out = String::from(
        "# The effective policy (vsh policy show). Built-in rules, which the [defaults]\n# keys keep or drop:\n",
    );
    for rule in built_in {
        out.push_str("#   ");
        out.push_str(&rule);
        out.push('\n');
    }
    let mut text = toml::to_string(&document).unwrap_or_default();
    if policy.calls().writable_roots().is_none() {
        // In its table, so uncommenting it there is all it takes.
        let example =
            "[defaults]\n# Let programs write only below these directories:\n# writable_roots = [\"src\", \"tests\"]\n";
        if text.starts_with("[defaults]\n") {
            text = text.replacen("[defaults]\n", example, 1);
        } else {
            text = text.replacen("\n[defaults]\n", &format!("\n{example}"), 1);
        }
    }
    out.push_str(&text);
    out.push_str(&unset_sections(policy));
    out
}

/// A review rule as its `[[review]]` table (`changes` left out of a rule
/// that only sets a ratio, as the file would).
fn review_table(rule: &ReviewRule, ratio: impl Fn(u32) -> toml::Value) -> toml::Value {
    let mut table = toml::Table::new();
    table.insert("pattern".into(), toml::Value::String(rule.pattern.as_str().to_owned()));
    if rule.changes == REVIEWABLE_CHANGES {
        table.insert("changes".into(), toml::Value::String("all".into()));
    } else if !rule.changes.is_empty() {
        let names = rule.changes.iter().map(|kind| toml::Value::String(kind.name().into())).collect();
        table.insert("changes".into(), toml::Value::Array(names));
    }
    if let Some(bps) = rule.rewrite_ratio_bps {
        table.insert("rewrite_escalate_ratio".into(), ratio(bps));
    }
    if let Some(reason) = &rule.reason {
        table.insert("reason".into(), toml::Value::String(reason.clone()));
    }
    table.insert("case_sensitive".into(), toml::Value::Boolean(!rule.pattern.is_case_insensitive()));
    toml::Value::Table(table)
}

/// Commented examples of the sections `policy` leaves unset, so the text
/// `vsh policy show` prints is a file to start from (docs/policy.md says
/// what each key does).
fn unset_sections(policy: &TransactionPolicy) -> String {
    let mut out = String::new();
    if !policy.calls().rules().iter().any(|rule| rule.label == RuleLabel::Custom) {
        out.push_str(
            "\n# Refuse accesses to paths of your own (access: all, reads, mutations, or\n\
             # any of create, modify, delete, rename-source, rename-destination,\n\
             # content-read, directory-read, metadata-read):\n\
             # [[protect]]\n# pattern = \"migrations/**\"\n# access = [\"modify\", \"delete\"]\n\
             # reason = \"applied migrations are history; add a new one instead\"\n",
        );
    }
    if policy.review_rules().is_empty() {
        out.push_str(
            "\n# Have changes to paths of your own wait for a reviewer (changes: all, or any\n\
             # of create, modify, delete), or judge their rewrites by a lower ratio:\n\
             # [[review]]\n# pattern = \"tests/**\"\n# changes = [\"delete\"]\n\
             # rewrite_escalate_ratio = 0.1\n\
             # reason = \"tests guard the build: removing one is a reviewer's call\"\n",
        );
    }
    if policy.command_scratch().is_none() {
        out.push_str(
            "\n# Directories real commands write outside the transaction (build outputs,\n\
             # caches), kept between runs; the list replaces the defaults, so keep the\n\
             # ones you want (a nested crate's or package's is named whole):\n# [commands]\n\
             # scratch = [\"target\", \"node_modules/.cache\", \"__pycache__\", \".pytest_cache\", \"crates/app/target\"]\n",
        );
    }
    out
}

/// `[thresholds]`: the profile's values with the overrides applied, validated.
fn parse_thresholds(table: &toml::Table, base: PolicyThresholds) -> Result<PolicyThresholds, PolicyFileError> {
    let mut thresholds = base;
    for (key, value) in table {
        let field = field_of("thresholds", key);
        match key.as_str() {
            "escalate_touched_paths" => thresholds.escalate_touched_paths = count(&field, value)?,
            "escalate_changed_bytes" => thresholds.escalate_changed_bytes = bytes(&field, value)?,
            "deny_touched_paths" => thresholds.deny_touched_paths = count(&field, value)?,
            "deny_changed_bytes" => thresholds.deny_changed_bytes = bytes(&field, value)?,
            "deny_deleted_paths" => thresholds.deny_deleted_paths = count(&field, value)?,
            "deny_delete_ratio" => thresholds.deny_delete_ratio_bps = ratio(&field, value)?,
            "delete_ratio_min_paths" => thresholds.delete_ratio_min_paths = count(&field, value)?,
            "rewrite_escalate_ratio" => thresholds.rewrite_escalate_ratio_bps = ratio(&field, value)?,
            _ => return Err(unknown(&field, THRESHOLD_KEYS)),
        }
    }
    thresholds.validate().map_err(|source| {
        let named = match &source {
            // Name the field the file set: lowering a denial threshold below the
            // profile's escalation threshold is a problem with the denial one.
            PolicyConfigError::EscalateAboveDeny { field, limit_field, .. }
                if !table.contains_key(file_key(field)) && table.contains_key(file_key(limit_field)) =>
            {
                limit_field
            }
            _ => source.field().unwrap_or("thresholds"),
        };
        PolicyFileError::Threshold { field: format!("thresholds.{}", file_key(named)), source }
    })?;
    Ok(thresholds)
}

/// The policy file's key for a [`PolicyThresholds`] field (ratios drop `_bps`).
fn file_key(field: &str) -> &str {
    field.strip_suffix("_bps").unwrap_or(field)
}

/// One `[[protect]]` entry.
fn parse_protect(prefix: &str, value: &toml::Value) -> Result<ProtectedRule, PolicyFileError> {
    let table = table_of(prefix, value)?;
    for key in table.keys() {
        if !["pattern", "access", "reason", "case_sensitive"].contains(&key.as_str()) {
            return Err(unknown(&field_of(prefix, key), PROTECT_KEYS));
        }
    }
    let pattern = rule_pattern(prefix, table)?;
    let access_field = format!("{prefix}.access");
    let access = match table.get("access") {
        None => AccessSet::ALL,
        Some(value) => names_in(&access_field, value, &access_named, |field| PolicyFileError::EmptyAccess { field })?,
    };
    let mut rule = ProtectedRule::new(pattern, access, RuleLabel::Custom);
    if let Some(reason) = rule_reason(prefix, table)? {
        rule = rule.with_reason(reason);
    }
    Ok(rule)
}

/// One `[[review]]` entry.
fn parse_review(prefix: &str, value: &toml::Value) -> Result<ReviewRule, PolicyFileError> {
    let table = table_of(prefix, value)?;
    for key in table.keys() {
        if !["pattern", "changes", "rewrite_escalate_ratio", "reason", "case_sensitive"].contains(&key.as_str()) {
            return Err(unknown(&field_of(prefix, key), REVIEW_KEYS));
        }
    }
    let pattern = rule_pattern(prefix, table)?;
    let ratio_field = format!("{prefix}.rewrite_escalate_ratio");
    let rewrite_ratio_bps = table.get("rewrite_escalate_ratio").map(|value| ratio(&ratio_field, value)).transpose()?;
    let changes_field = format!("{prefix}.changes");
    let changes = match table.get("changes") {
        // A rule that only sets a ratio makes nothing else wait.
        None if rewrite_ratio_bps.is_some() => AccessSet::NONE,
        None => REVIEWABLE_CHANGES,
        Some(value) => names_in(&changes_field, value, &change_named, |field| PolicyFileError::EmptyChanges { field })?,
    };
    let reason = rule_reason(prefix, table)?;
    Ok(ReviewRule { pattern, changes, rewrite_ratio_bps, reason })
}

/// A rule's `pattern`, ignoring case unless `case_sensitive = true` (on a
/// case-insensitive filesystem `Config/Prod` is `config/prod`).
fn rule_pattern(prefix: &str, table: &toml::Table) -> Result<Pattern, PolicyFileError> {
    let pattern_field = format!("{prefix}.pattern");
    let pattern = match table.get("pattern") {
        None => return Err(PolicyFileError::MissingField { field: pattern_field }),
        Some(toml::Value::String(text)) => {
            Pattern::parse(text).map_err(|source| PolicyFileError::Pattern { field: pattern_field, source })?
        }
        Some(other) => return Err(wrong_type(&pattern_field, "a string", other)),
    };
    let case_field = format!("{prefix}.case_sensitive");
    match table.get("case_sensitive") {
        None | Some(toml::Value::Boolean(false)) => Ok(pattern.case_insensitive()),
        Some(toml::Value::Boolean(true)) => Ok(pattern),
        Some(other) => Err(wrong_type(&case_field, "a boolean", other)),
    }
}

/// A rule's optional `reason`, at most [`MAX_REASON_BYTES`].
fn rule_reason(prefix: &str, table: &toml::Table) -> Result<Option<String>, PolicyFileError> {
    let reason_field = format!("{prefix}.reason");
    match table.get("reason") {
        None => Ok(None),
        Some(toml::Value::String(reason)) if reason.len() > MAX_REASON_BYTES => {
            Err(PolicyFileError::ReasonTooLong { field: reason_field, length: reason.len(), limit: MAX_REASON_BYTES })
        }
        Some(toml::Value::String(reason)) => Ok(Some(reason.clone())),
        Some(other) => Err(wrong_type(&reason_field, "a string", other)),
    }
}

/// A name or a non-empty array of names (`access`, `changes`), each read by
/// `read_one`, united; `empty` is the error for an empty array.
fn names_in(
    field: &str,
    value: &toml::Value,
    read_one: &dyn Fn(&str, &str) -> Result<AccessSet, PolicyFileError>,
    empty: fn(String) -> PolicyFileError,
) -> Result<AccessSet, PolicyFileError> {
    match value {
        toml::Value::String(name) => read_one(field, name),
        toml::Value::Array(names) => {
            if names.is_empty() {
                return Err(empty(field.to_owned()));
            }
            let mut set = AccessSet::NONE;
            for (index, name) in names.iter().enumerate() {
                let item = format!("{field}[{index}]");
                match name {
                    toml::Value::String(name) => set = set.union(read_one(&item, name)?),
                    other => return Err(wrong_type(&item, "a string", other)),
                }
            }
            Ok(set)
        }
        other => Err(wrong_type(field, "a string or an array of strings", other)),
    }
}

/// A change name of a review rule: `all`, `create`, `modify` or `delete`.
fn change_named(field: &str, name: &str) -> Result<AccessSet, PolicyFileError> {
    match name {
        "all" => Ok(REVIEWABLE_CHANGES),
        "create" => Ok(AccessSet::single(AccessKind::Create)),
        "modify" => Ok(AccessSet::single(AccessKind::Modify)),
        "delete" => Ok(AccessSet::single(AccessKind::Delete)),
        _ => Err(PolicyFileError::UnknownChange { field: field.to_owned(), name: shorten(name) }),
    }
}

/// An access name: a group (`all`, `reads`, `mutations`) or one kind.
fn access_named(field: &str, name: &str) -> Result<AccessSet, PolicyFileError> {
    match name {
        "all" => Ok(AccessSet::ALL),
        "reads" => Ok(AccessSet::READS),
        "mutations" => Ok(AccessSet::MUTATIONS),
        _ => AccessKind::from_name(name)
            .map(AccessSet::single)
            .ok_or_else(|| PolicyFileError::UnknownAccess { field: field.to_owned(), name: shorten(name) }),
    }
}

/// `[defaults]`: the rule groups kept and the writable roots.
fn parse_defaults(table: &toml::Table) -> Result<(DefaultRules, Option<Vec<VPath>>), PolicyFileError> {
    let mut defaults = DefaultRules::default();
    let mut roots = None;
    for (key, value) in table {
        let field = field_of("defaults", key);
        match (key.as_str(), value) {
            ("secrets", toml::Value::Boolean(keep)) => defaults.secrets = *keep,
            ("git", toml::Value::Boolean(keep)) => defaults.git = *keep,
            ("secrets" | "git", other) => return Err(wrong_type(&field, "a boolean", other)),
            ("writable_roots", toml::Value::Array(items)) => {
                let parsed = items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| writable_root(&format!("{field}[{index}]"), item))
                    .collect::<Result<Vec<_>, _>>()?;
                roots = Some(parsed);
            }
            ("writable_roots", other) => return Err(wrong_type(&field, "an array of strings", other)),
            _ => return Err(unknown(&field, DEFAULTS_KEYS)),
        }
    }
    Ok((defaults, roots))
}

/// `[commands]`: the scratch directories, if named.
fn parse_commands(table: &toml::Table) -> Result<Option<Vec<String>>, PolicyFileError> {
    let mut scratch = None;
    for (key, value) in table {
        let field = field_of("commands", key);
        match (key.as_str(), value) {
            ("scratch", toml::Value::Array(items)) => {
                if items.len() > MAX_SCRATCH {
                    return Err(PolicyFileError::InvalidScratch {
                        field,
                        value: format!("{} names", items.len()),
                        problem: format!("at most {MAX_SCRATCH} scratch directories"),
                    });
                }
                let names = items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| scratch_name(&format!("{field}[{index}]"), item))
                    .collect::<Result<Vec<_>, _>>()?;
                scratch = Some(names);
            }
            ("scratch", other) => return Err(wrong_type(&field, "an array of strings", other)),
            _ => return Err(unknown(&field, COMMANDS_KEYS)),
        }
    }
    Ok(scratch)
}

/// One scratch directory: a relative path of plain names, not in `.vsh` or
/// `.git` (`__pycache__` stands for Python's bytecode, wherever it goes).
fn scratch_name(field: &str, value: &toml::Value) -> Result<String, PolicyFileError> {
    let toml::Value::String(text) = value else {
        return Err(wrong_type(field, "a string", value));
    };
    // A directory written as one (`build/`, as .gitignore has it) is that directory.
    let name = text.strip_suffix('/').unwrap_or(text);
    let components: Vec<&str> = name.split('/').collect();
    let plain = components.iter().all(|component| VPath::from_component(component).is_ok());
    // Not vsh's data or a repository's, at any depth, in any case.
    let reserved = components.iter().any(|name| name.eq_ignore_ascii_case(".vsh") || name.eq_ignore_ascii_case(".git"));
    // A path, never a pattern: `*` or `**/target` would match nothing and
    // leave every build output in the diff.
    let pattern = text.contains(['*', '?', '[', ']']);
    if !plain || components.len() > MAX_SCRATCH_DEPTH || reserved || pattern {
        return Err(PolicyFileError::InvalidScratch {
            field: field.to_owned(),
            value: shorten(text),
            problem: format!(
                "a scratch directory is a relative path of at most {MAX_SCRATCH_DEPTH} plain names \
                 (not in .vsh or .git, no pattern: each one names one directory, such as \
                 crates/app/target), or __pycache__"
            ),
        });
    }
    Ok(name.to_owned())
}

/// One writable root: a workspace-relative path without `..`, not the root.
fn writable_root(field: &str, value: &toml::Value) -> Result<VPath, PolicyFileError> {
    let toml::Value::String(text) = value else {
        return Err(wrong_type(field, "a string", value));
    };
    let invalid =
        |problem: String| PolicyFileError::InvalidRoot { field: field.to_owned(), value: shorten(text), problem };
    let path = VPath::parse(text).map_err(|error| invalid(error.to_string()))?;
    if text.split('/').any(|component| component == "..") {
        return Err(invalid("`..` components are not allowed".to_owned()));
    }
    if path.is_root() {
        return Err(invalid(
            "it is the workspace root; leave out defaults.writable_roots to allow every path".to_owned(),
        ));
    }
    Ok(path)
}

/// A non-negative integer.
fn count(field: &str, value: &toml::Value) -> Result<u64, PolicyFileError> {
    match value {
        toml::Value::Integer(number) => {
            u64::try_from(*number).map_err(|_| PolicyFileError::Negative { field: field.to_owned(), value: *number })
        }
        other => Err(wrong_type(field, "an integer", other)),
    }
}

/// A non-negative integer or a size string (`512MiB`).
fn bytes(field: &str, value: &toml::Value) -> Result<u64, PolicyFileError> {
    match value {
        toml::Value::String(text) => parse_size(text).map_err(|problem| PolicyFileError::InvalidSize {
            field: field.to_owned(),
            value: shorten(text),
            problem,
        }),
        toml::Value::Integer(_) => count(field, value),
        other => Err(wrong_type(field, "an integer or a size string such as \"512MiB\"", other)),
    }
}

/// Parse `<digits>[ ][unit]` where unit is `B`, `KiB`, `MiB`, `GiB` or `TiB`
/// (ASCII case ignored), into bytes: the size syntax of policy files and of the
/// command line's budget options.
pub fn parse_size(text: &str) -> Result<u64, &'static str> {
    let trimmed = text.trim();
    let digits = trimmed.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(trimmed.len());
    if digits == 0 {
        return Err("expected a whole number, then an optional unit B, KiB, MiB, GiB or TiB");
    }
    let number: u64 = trimmed[..digits].parse().map_err(|_| "the number is too large")?;
    let unit = trimmed[digits..].trim_start();
    if unit.starts_with(['.', ',']) {
        return Err("a size is a whole number: write 1536MiB, not 1.5GiB");
    }
    let units: [(&str, u64); 6] =
        [("", 1), ("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40)];
    let decimal = ["kB", "KB", "MB", "GB", "TB", "K", "M", "G", "T"];
    if decimal.iter().any(|name| name.eq_ignore_ascii_case(unit)) {
        return Err("decimal units are not taken: write KiB, MiB, GiB or TiB (powers of 1024)");
    }
    let (_, multiplier) = units
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))
        .ok_or("unknown unit; expected B, KiB, MiB, GiB or TiB (powers of 1024)")?;
    number.checked_mul(*multiplier).ok_or("the size is too large")
}

/// A fraction in `(0, 1]`, as basis points (rounded to the nearest).
fn ratio(field: &str, value: &toml::Value) -> Result<u32, PolicyFileError> {
    let invalid = |shown: String| PolicyFileError::InvalidRatio { field: field.to_owned(), value: shown };
    match value {
        toml::Value::Integer(1) => Ok(MAX_RATIO_BPS),
        toml::Value::Integer(number) => Err(invalid(number.to_string())),
        toml::Value::Float(fraction) => {
            if !(*fraction > 0.0 && *fraction <= 1.0) {
                return Err(invalid(fraction.to_string()));
            }
            let scaled = (fraction * f64::from(MAX_RATIO_BPS)).round();
            // `scaled` is within 0..=10000 here, so the conversion is exact.
            #[expect(clippy::cast_sign_loss, reason = "the value is checked to be positive")]
            let bps = scaled as u32;
            if bps == 0 { Err(invalid(fraction.to_string())) } else { Ok(bps) }
        }
        other => Err(wrong_type(field, "a number (a fraction such as 0.5)", other)),
    }
}

/// The table `value`, or a type error naming `field`.
fn table_of<'a>(field: &str, value: &'a toml::Value) -> Result<&'a toml::Table, PolicyFileError> {
    match value {
        toml::Value::Table(table) => Ok(table),
        other => Err(wrong_type(field, "a table", other)),
    }
}

fn wrong_type(field: &str, expected: &'static str, found: &toml::Value) -> PolicyFileError {
    PolicyFileError::WrongType { field: field.to_owned(), expected, found: found.type_str() }
}

fn unknown(field: &str, expected: &'static str) -> PolicyFileError {
    PolicyFileError::UnknownField { field: field.to_owned(), expected }
}

/// `prefix.key`, quoting a key that is not a bare TOML key, and shortening a
/// long one.
fn field_of(prefix: &str, key: &str) -> String {
    let bare = !key.is_empty() && key.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
    let key = if bare && key.len() <= MAX_QUOTED_KEY_CHARS { key.to_owned() } else { format!("{:?}", shorten(key)) };
    if prefix.is_empty() { key } else { format!("{prefix}.{key}") }
}

/// At most [`MAX_QUOTED_KEY_CHARS`] characters of `text`, for error messages.
fn shorten(text: &str) -> String {
    text.chars().take(MAX_QUOTED_KEY_CHARS).collect()
}

/// A syntax error with its line and column.
fn syntax_error(text: &str, error: &toml::de::Error) -> PolicyFileError {
    let offset = error.span().map_or(0, |span| span.start);
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    PolicyFileError::Syntax { line, column, message: error.message().trim().to_owned() }
}

#[cfg(test)]
mod tests {
    use vsh_types::{DiffEntry, NodeState};

    use super::*;
    use crate::decision::{Decision, DenyReason};
    use crate::transaction::PolicyInput;

    const EXAMPLE: &str = include_str!("../examples/policy.toml");

    fn p(text: &str) -> VPath {
        VPath::parse(text).unwrap()
    }

    fn error(text: &str) -> PolicyFileError {
        match PolicyFile::from_toml(text) {
            Ok(file) => panic!("expected an error for {text:?}, got {file:?}"),
            Err(error) => error,
        }
    }

    /// A version-1 document with `body` after the version line.
    fn v1(body: &str) -> String {
        format!("version = 1\n{body}")
    }

    fn create(path: &str) -> DiffEntry {
        DiffEntry::between(p(path), None, Some(NodeState::file_with(b"x", 0o644))).unwrap()
    }

    #[test]
    fn example_file_parses_into_its_settings() {
        let file = PolicyFile::from_toml(EXAMPLE).unwrap();
        assert_eq!(file.profile(), PolicyProfile::Balanced);
        let expected = PolicyThresholds {
            escalate_touched_paths: 200,
            escalate_changed_bytes: 16 << 20,
            deny_changed_bytes: 512 << 20,
            rewrite_escalate_ratio_bps: 5_000,
            ..PolicyThresholds::for_profile(PolicyProfile::Balanced)
        };
        assert_eq!(*file.thresholds(), expected);
        let rules: Vec<String> = file.protect().iter().map(ToString::to_string).collect();
        assert_eq!(
            rules,
            [
                "`config/prod/**` denies create+modify+delete (custom: production config)",
                "`**/*.sqlite` denies all (custom: local databases hold customer data)",
            ]
        );
        assert_eq!(file.defaults(), DefaultRules { secrets: true, git: true });
        assert_eq!(file.writable_roots(), Some(&[p("src"), p("docs"), p("config")][..]));

        let policy = file.policy(None);
        assert_eq!(PolicyFile::parse(EXAMPLE).unwrap(), policy);
        let calls = policy.calls();
        assert_eq!(calls.writable_roots(), Some(&[p("config"), p("docs"), p("src")][..]));
        assert!(calls.authorize(&p("config/prod/db.yml"), AccessKind::Modify).is_err());
        assert!(calls.authorize(&p("config/prod/db.yml"), AccessKind::ContentRead).is_ok());
        assert!(calls.is_hidden(&p("src/cache.sqlite")));
        assert!(calls.is_hidden(&p("src/.env")));
        assert_eq!(calls.authorize(&p("src/main.rs"), AccessKind::Modify), Ok(()));
        let outside = calls.authorize(&p("README.md"), AccessKind::Modify).unwrap_err();
        assert_eq!(outside.label, RuleLabel::WritableRoots);
        assert_eq!(outside.rule, r#"writable_roots = ["config", "docs", "src"]"#);
        // Balanced with the lower escalation threshold.
        let diff: Vec<DiffEntry> = (0..200).map(|index| create(&format!("src/f{index:03}"))).collect();
        assert!(policy.evaluate(&PolicyInput::new(&diff)).is_pending_approval());
        assert!(policy.evaluate(&PolicyInput::new(&diff[..199])).is_auto_approved());
    }

    #[test]
    fn from_file_reads_the_example_and_protects_the_data_dir() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policy.toml");
        let policy = TransactionPolicy::from_file(&path).unwrap();
        assert_eq!(policy, PolicyFile::parse(EXAMPLE).unwrap());
        let data_dir = p("state/vsh");
        let with_dir = TransactionPolicy::from_file_with_data_dir(&path, Some(&data_dir)).unwrap();
        assert_ne!(with_dir.digest(), policy.digest());
        let denial = with_dir.calls().authorize(&p("state/vsh/blobs"), AccessKind::MetadataRead).unwrap_err();
        assert_eq!(denial.label, RuleLabel::RuntimeData);
    }

    #[test]
    fn from_file_refuses_missing_odd_large_and_binary_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.toml");
        let error = TransactionPolicy::from_file(&missing).unwrap_err();
        assert!(matches!(&error, PolicyFileError::Read { path, .. } if *path == missing), "{error:?}");
        assert_eq!(error.field(), None);
        assert!(std::error::Error::source(&error).is_some());

        let error = TransactionPolicy::from_file(dir.path()).unwrap_err();
        assert!(matches!(error, PolicyFileError::NotAFile { .. }), "{error:?}");

        let large = dir.path().join("large.toml");
        let mut text = String::from("version = 1\n");
        text.push_str(&"#".repeat(MAX_POLICY_FILE_BYTES as usize - text.len()));
        std::fs::write(&large, &text).unwrap();
        // Exactly at the limit is fine.
        assert!(TransactionPolicy::from_file(&large).is_ok());
        text.push('#');
        std::fs::write(&large, &text).unwrap();
        let error = TransactionPolicy::from_file(&large).unwrap_err();
        assert!(
            matches!(error, PolicyFileError::TooLarge { size, limit } if size == MAX_POLICY_FILE_BYTES + 1 && limit == MAX_POLICY_FILE_BYTES),
            "{error:?}"
        );
        assert_eq!(error.to_string(), "the policy file is 1048577 bytes, more than the limit of 1048576");
        // The same cap applies to text parsed directly.
        assert!(matches!(PolicyFile::parse(&text), Err(PolicyFileError::TooLarge { .. })));

        let binary = dir.path().join("binary.toml");
        std::fs::write(&binary, b"version = 1\n# \xff\xfe\n").unwrap();
        assert!(matches!(TransactionPolicy::from_file(&binary), Err(PolicyFileError::NotUtf8)));
    }

    #[test]
    fn minimal_files_are_their_profiles() {
        assert_eq!(PolicyFile::parse("version = 1").unwrap(), TransactionPolicy::default());
        for profile in PolicyProfile::ALL {
            let text = v1(&format!("profile = {:?}", profile.name().to_uppercase()));
            assert_eq!(PolicyFile::parse(&text).unwrap(), TransactionPolicy::from_profile(profile, None), "{profile}");
        }
        let explicit = v1("[thresholds]\n[defaults]\nsecrets = true\ngit = true\n");
        assert_eq!(PolicyFile::parse(&explicit).unwrap(), TransactionPolicy::default());
    }

    #[test]
    fn thresholds_accept_integers_sizes_and_fractions() {
        let text = v1(r#"
profile = "paranoid"
[thresholds]
escalate_touched_paths = 30
escalate_changed_bytes = 2048
deny_touched_paths = 6000
deny_changed_bytes = "1 GiB"
deny_deleted_paths = 700
deny_delete_ratio = 0.3333
delete_ratio_min_paths = 12
rewrite_escalate_ratio = 1
"#);
        let file = PolicyFile::from_toml(&text).unwrap();
        assert_eq!(
            *file.thresholds(),
            PolicyThresholds {
                escalate_touched_paths: 30,
                escalate_changed_bytes: 2048,
                deny_touched_paths: 6000,
                deny_changed_bytes: 1 << 30,
                deny_deleted_paths: 700,
                deny_delete_ratio_bps: 3_333,
                delete_ratio_min_paths: 12,
                rewrite_escalate_ratio_bps: 10_000,
            }
        );
        assert_eq!(file.policy(None).profile(), PolicyProfile::Paranoid);
        let rounded = PolicyFile::from_toml(&v1("[thresholds]\nrewrite_escalate_ratio = 0.00005\n")).unwrap();
        assert_eq!(rounded.thresholds().rewrite_escalate_ratio_bps, 1);
    }

    #[test]
    fn a_rendered_policy_parses_back_to_the_same_policy() {
        let texts = [
            "version = 1\n",
            "version = 1\nprofile = \"strict\"\n",
            "version = 1\nprofile = \"paranoid\"\n[thresholds]\ndeny_delete_ratio = 0.25\nrewrite_escalate_ratio = 1\n",
            concat!(
                "version = 1\n[[protect]]\npattern = \"config/prod/**\"\naccess = [\"modify\", \"delete\"]\n",
                "reason = \"production\"\n[[protect]]\npattern = \"**/*.sqlite\"\ncase_sensitive = true\n",
                "[defaults]\nsecrets = false\nwritable_roots = [\"src\", \"docs\"]\n"
            ),
            concat!(
                "version = 1\n[[review]]\npattern = \"tests/**\"\n[[review]]\npattern = \"docs/**\"\n",
                "changes = [\"delete\", \"create\"]\nrewrite_escalate_ratio = 0.2\nreason = \"docs\"\n",
                "[[review]]\npattern = \"src/*.rs\"\nrewrite_escalate_ratio = 0.05\ncase_sensitive = true\n"
            ),
        ];
        for text in texts {
            let policy = PolicyFile::parse(text).unwrap();
            let rendered = render_policy(&policy);
            let again = PolicyFile::parse(&rendered).unwrap_or_else(|error| panic!("{rendered}\n{error}"));
            assert_eq!(again.digest(), policy.digest(), "{text}\n---\n{rendered}");
        }
        let rendered = render_policy(&TransactionPolicy::from_profile(PolicyProfile::Balanced, None));
        assert!(rendered.contains("#   `**/.env*/**` denies all (secret)"), "{rendered}");
        assert!(rendered.contains("deny_touched_paths = "), "defaults included: {rendered}");
    }

    /// The commented examples `vsh policy show` ends with are valid keys:
    /// each one, uncommented where it belongs, makes a file that parses and
    /// sets what it says.
    #[test]
    fn the_rendered_policy_ends_with_examples_of_the_sections_it_leaves_unset() {
        let rendered = render_policy(&TransactionPolicy::from_profile(PolicyProfile::Balanced, None));
        let example = |first: &str| -> String {
            let start = rendered.find(first).unwrap_or_else(|| panic!("{first} in {rendered}"));
            rendered[start..]
                .lines()
                .take_while(|line| line.starts_with("# ") && !line.is_empty())
                .flat_map(|line| [&line[2..], "\n"])
                .collect()
        };
        let protect = PolicyFile::parse(&format!("{rendered}{}", example("# [[protect]]"))).unwrap();
        let rule = protect.calls().rules().iter().find(|rule| rule.label == RuleLabel::Custom).unwrap();
        assert_eq!(rule.pattern.as_str(), "migrations/**");
        let review = PolicyFile::parse(&format!("{rendered}{}", example("# [[review]]"))).unwrap();
        let rule = &review.review_rules()[0];
        assert_eq!(
            rule.to_string(),
            "`tests/**` reviews delete, rewrite ratio 0.1: tests guard the build: removing one is a reviewer's call"
        );
        let commands = PolicyFile::parse(&format!("{rendered}{}", example("# [commands]"))).unwrap();
        // Uncommented, it keeps every default (the list replaces them) and
        // names a nested crate's.
        let scratch = commands.command_scratch().unwrap();
        let defaults = ["target", "node_modules/.cache", "__pycache__", ".pytest_cache"];
        assert!(defaults.iter().all(|name| scratch.iter().any(|kept| kept == name)), "{scratch:?}");
        assert_eq!(scratch.last().map(String::as_str), Some("crates/app/target"));
        // Uncommented where it stands.
        let roots = rendered.replace("# writable_roots = ", "writable_roots = ");
        let roots = PolicyFile::parse(&roots).unwrap_or_else(|error| panic!("{error}\n{rendered}"));
        assert_eq!(roots.calls().writable_roots().unwrap().len(), 2);
        // A policy that sets them all has no examples left.
        let all = render_policy(&roots);
        let all = PolicyFile::parse(&format!("{all}{}", example("# [[protect]]"))).unwrap();
        let all = PolicyFile::parse(&format!("{}{}", render_policy(&all), example("# [commands]"))).unwrap();
        let all = PolicyFile::parse(&format!("{}{}", render_policy(&all), example("# [[review]]"))).unwrap();
        assert!(!render_policy(&all).contains("\n# [[protect]]"), "{}", render_policy(&all));
        assert!(!render_policy(&all).contains("\n# [[review]]"), "{}", render_policy(&all));
        assert!(!render_policy(&all).contains("# writable_roots"));
        assert!(!render_policy(&all).contains("# [commands]"));
    }

    #[test]
    fn review_rules_parse_with_their_defaults() {
        let file = PolicyFile::from_toml(&v1(concat!(
            "[[review]]\npattern = \"tests/**\"\n",
            "[[review]]\npattern = \"docs/**\"\nrewrite_escalate_ratio = 0.1\n",
            "[[review]]\npattern = \"src/**\"\nchanges = \"delete\"\nreason = \"kept\"\n",
            "[[review]]\npattern = \"db/**\"\nchanges = [\"create\", \"modify\"]\nrewrite_escalate_ratio = 0.3\n",
        )))
        .unwrap();
        let rules = file.review();
        assert_eq!(rules.len(), 4);
        assert_eq!(rules[0].changes, REVIEWABLE_CHANGES, "every change by default");
        assert_eq!(rules[0].rewrite_ratio_bps, None);
        assert!(rules[0].pattern.is_case_insensitive());
        assert_eq!(rules[1].changes, AccessSet::NONE, "a ratio alone makes nothing else wait");
        assert_eq!(rules[1].rewrite_ratio_bps, Some(1_000));
        assert_eq!(rules[2].changes, AccessSet::single(AccessKind::Delete));
        assert_eq!(rules[2].reason.as_deref(), Some("kept"));
        assert_eq!(rules[3].changes, AccessSet::single(AccessKind::Create).with(AccessKind::Modify));
        let policy = file.policy(None);
        assert_eq!(policy.review_rules().len(), 4);
        assert_ne!(policy.digest(), PolicyFile::parse(&v1("")).unwrap().digest());
        // A policy without review rules keeps the digest it had.
        assert_eq!(PolicyFile::parse(&v1("")).unwrap().digest(), TransactionPolicy::default().digest());
    }

    #[test]
    fn review_rule_errors_name_their_field() {
        let cases: [(&str, &str); 9] = [
            ("[[review]]\nchanges = \"all\"\n", "review[0].pattern"),
            ("[[review]]\npattern = \"a//b\"\n", "review[0].pattern"),
            ("[[review]]\npattern = \"a\"\nchanges = []\n", "review[0].changes"),
            ("[[review]]\npattern = \"a\"\nchanges = \"rename-source\"\n", "review[0].changes"),
            ("[[review]]\npattern = \"a\"\nchanges = [\"delete\", \"reads\"]\n", "review[0].changes[1]"),
            ("[[review]]\npattern = \"a\"\nrewrite_escalate_ratio = 0\n", "review[0].rewrite_escalate_ratio"),
            ("[[review]]\npattern = \"a\"\naccess = \"all\"\n", "review[0].access"),
            ("[[review]]\npattern = \"a\"\ncase_sensitive = 1\n", "review[0].case_sensitive"),
            ("review = 3\n", "review"),
        ];
        for (text, field) in cases {
            let error = PolicyFile::from_toml(&v1(text)).unwrap_err();
            assert_eq!(error.field(), Some(field), "{text}: {error}");
        }
        let many: String = (0..=MAX_REVIEW_RULES)
            .map(|index| format!("[[review]]\npattern = \"d{index}/**\"\n"))
            .collect::<Vec<_>>()
            .concat();
        let error = PolicyFile::from_toml(&v1(&many)).unwrap_err();
        assert!(
            matches!(error, PolicyFileError::TooManyReviewRules { count, .. } if count == MAX_REVIEW_RULES + 1),
            "{error}"
        );
        let most: String = (0..MAX_REVIEW_RULES)
            .map(|index| format!("[[review]]\npattern = \"d{index}/**\"\n"))
            .collect::<Vec<_>>()
            .concat();
        assert_eq!(PolicyFile::from_toml(&v1(&most)).unwrap().review().len(), MAX_REVIEW_RULES);
    }

    #[test]
    fn size_strings() {
        let cases: [(&str, u64); 9] = [
            ("0", 0),
            ("512", 512),
            ("512B", 512),
            ("1KiB", 1024),
            ("512MiB", 512 << 20),
            ("2 GiB", 2 << 30),
            (" 3gib ", 3 << 30),
            ("1TiB", 1 << 40),
            ("16777215TiB", 16_777_215 << 40),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_size(text), Ok(expected), "{text}");
        }
        for text in ["", "MiB", "-1MiB", "1.5GiB", "1MB", "1 KB", "1 MiB x", "16777216TiB", "99999999999999999999"] {
            assert!(parse_size(text).is_err(), "{text}");
        }
        // ux75 M4: each says what is wrong with it, not "unknown unit".
        assert_eq!(parse_size("1.5GiB"), Err("a size is a whole number: write 1536MiB, not 1.5GiB"));
        for text in ["2GB", "2 gb", "5M", "10k"] {
            assert_eq!(
                parse_size(text),
                Err("decimal units are not taken: write KiB, MiB, GiB or TiB (powers of 1024)"),
                "{text}"
            );
        }
    }

    /// ux75 M4: a misspelt key or name got the list of what is known and no
    /// "did you mean", and no refusal of a file's content said where in the
    /// file it is.
    #[test]
    fn a_refusal_says_where_it_is_and_what_was_likely_meant() {
        assert_eq!(did_you_mean("acess", PROTECT_KEYS), " (did you mean `access`?)");
        assert_eq!(did_you_mean("threshold", TOP_KEYS), " (did you mean `thresholds`?)");
        assert_eq!(did_you_mean("delet", ACCESS_NAMES), " (did you mean `delete`?)");
        assert_eq!(did_you_mean("modfiy", "all, create, modify, delete"), " (did you mean `modify`?)");
        // A word the policy calls otherwise gets the policy's name (ux80 L6).
        assert_eq!(access_hint("write"), " (did you mean `mutations` (create, modify and delete) or `modify`?)");
        assert_eq!(access_hint("Rename"), " (did you mean `rename-source` or `rename-destination`?)");
        assert_eq!(access_hint("delet"), " (did you mean `delete`?)");
        assert_eq!(access_hint("frobnicate"), "");
        // ux78 L8: a profile's name too.
        let profile = PolicyFile::from_toml("version = 1\nprofile = \"balaced\"\n").unwrap_err().to_string();
        assert!(profile.contains("is \"balaced\" (did you mean `balanced`?); expected balanced"), "{profile}");
        assert_eq!(did_you_mean("zebra", PROTECT_KEYS), "");
        assert_eq!(did_you_mean("x", TOP_KEYS), "");
        let text = "version = 1\n\n[[protect]]\npattern = \"a/**\"\naccess = [\"delete\"]\n\n[[protect]]\n\
                    pattern = \"b/**\"\naccess = [\"create\", \"delet\"]\n  acess = 1\n";
        assert_eq!(locate(text, "protect[1].acess"), Some((10, 3)));
        assert_eq!(locate(text, "protect[1].access[1]"), Some((9, 21)));
        assert_eq!(locate(text, "protect[0].pattern"), Some((4, 1)));
        assert_eq!(locate(text, "protect[2].pattern"), None);
        assert_eq!(locate(text, "thresholds.deny_touched_paths"), None);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, text.replace("  acess = 1\n", "")).unwrap();
        let refused = PolicyFile::read(&file).unwrap_err();
        assert_eq!(refused.field(), Some("protect[1].access[1]"));
        let said = refused.to_string();
        assert!(said.contains("is \"delet\" (did you mean `delete`?); expected all"), "{said}");
        assert!(said.ends_with(&format!("\n  at {}, line 9, column 21", file.display())), "{said}");
        std::fs::write(&file, "version = 1\n[threshold]\n").unwrap();
        let said = PolicyFile::read(&file).unwrap_err().to_string();
        assert!(
            said.starts_with("`threshold` is not a known key (did you mean `thresholds`?); expected one of"),
            "{said}"
        );
        assert!(said.ends_with("line 2, column 2"), "{said}");
        // A refusal's own cause is said with it (ux77 4: it was dropped).
        std::fs::write(&file, "version = 1\n[[protect]]\npattern = \"a/[b\"\n").unwrap();
        let said = PolicyFile::read(&file).unwrap_err().to_string();
        assert!(said.starts_with("`protect[0].pattern` is not a valid pattern: "), "{said}");
        assert!(said.contains("\n  at ") && said.ends_with("line 3, column 1"), "{said}");
    }

    #[test]
    fn custom_rules_ignore_case_unless_asked_not_to() {
        let policy = PolicyFile::parse(&v1(
            "[[protect]]\npattern = \"config/prod/**\"\n[[protect]]\npattern = \"Exact/**\"\ncase_sensitive = true",
        ))
        .unwrap();
        let calls = policy.calls();
        let path = |text: &str| VPath::parse(text).unwrap();
        assert!(calls.authorize(&path("Config/PROD/db.yml"), AccessKind::Modify).is_err());
        assert!(calls.authorize(&path("Exact/x"), AccessKind::Modify).is_err());
        assert_eq!(calls.authorize(&path("exact/x"), AccessKind::Modify), Ok(()));
        let wrong = PolicyFile::parse(&v1("[[protect]]\npattern = \"a\"\ncase_sensitive = \"yes\"")).unwrap_err();
        assert_eq!(wrong.field(), Some("protect[0].case_sensitive"));
    }

    #[test]
    fn protect_access_forms() {
        let file = PolicyFile::from_toml(&v1(r#"
[[protect]]
pattern = "a/**"
[[protect]]
pattern = "b"
access = "reads"
[[protect]]
pattern = "c"
access = ["mutations", "content-read"]
[[protect]]
pattern = "d"
access = ["rename-source", "rename-destination", "metadata-read", "directory-read"]
"#))
        .unwrap();
        let access: Vec<AccessSet> = file.protect().iter().map(|rule| rule.access).collect();
        assert_eq!(
            access,
            [
                AccessSet::ALL,
                AccessSet::READS,
                AccessSet::MUTATIONS.with(AccessKind::ContentRead),
                [
                    AccessKind::RenameSource,
                    AccessKind::RenameDestination,
                    AccessKind::MetadataRead,
                    AccessKind::DirectoryRead
                ]
                .into_iter()
                .collect(),
            ]
        );
        assert!(file.protect().iter().all(|rule| rule.label == RuleLabel::Custom && rule.reason.is_none()));
    }

    #[test]
    fn defaults_drop_secret_and_git_rules_but_never_runtime_data() {
        let policy = PolicyFile::parse(&v1("[defaults]\nsecrets = false\ngit = false\n")).unwrap();
        let calls = policy.calls();
        assert_eq!(calls.authorize(&p(".env"), AccessKind::ContentRead), Ok(()));
        assert_eq!(calls.authorize(&p(".git/HEAD"), AccessKind::Modify), Ok(()));
        assert!(calls.authorize(&p(".vsh/store"), AccessKind::ContentRead).is_err());
        assert!(calls.rules().iter().all(|rule| rule.label == RuleLabel::RuntimeData));
        // There is no key for the runtime-data rules.
        let error = error(&v1("[defaults]\nruntime_data = false\n"));
        assert_eq!(error.field(), Some("defaults.runtime_data"));
        let read_only = PolicyFile::parse(&v1("[defaults]\nwritable_roots = []\n")).unwrap();
        assert!(read_only.calls().authorize(&p("src/a"), AccessKind::Create).is_err());
        assert_eq!(read_only.calls().authorize(&p("src/a"), AccessKind::ContentRead), Ok(()));
    }

    #[test]
    fn writable_roots_outside_deny_as_protected_mutation() {
        let policy =
            PolicyFile::parse(&v1("[defaults]\nwritable_roots = [\"src/\", \"./docs\", \"src/deep\"]\n")).unwrap();
        assert_eq!(policy.calls().writable_roots(), Some(&[p("docs"), p("src")][..]));
        let inside = [create("src/a.rs"), create("docs/b.md")];
        assert!(policy.evaluate(&PolicyInput::new(&inside)).is_auto_approved());
        let outside = [create("src/a.rs"), create("Makefile")];
        let Decision::Denied(manifest) = policy.evaluate(&PolicyInput::new(&outside)) else { panic!("not denied") };
        assert_eq!(manifest.reason, DenyReason::ProtectedMutation);
        assert_eq!(manifest.denied.len(), 1);
        let denial = &manifest.denied[0];
        assert_eq!(denial.path, p("Makefile"));
        assert_eq!(denial.label, RuleLabel::WritableRoots);
        assert_eq!(denial.rule, r#"writable_roots = ["docs", "src"]"#);
        assert_eq!(denial.rule_access, AccessSet::MUTATIONS);
        assert_eq!(
            denial.remedy,
            "add a root containing `Makefile` to defaults.writable_roots (now writable_roots = [\"docs\", \"src\"]), \
             or remove defaults.writable_roots"
        );
    }

    /// Each bad field is a typed error naming it.
    #[test]
    fn every_error_names_its_field() {
        type Check = fn(&PolicyFileError) -> bool;
        let cases: Vec<(String, &str, Check)> = vec![
            // version
            ("profile = \"strict\"".to_owned(), "version", |e| matches!(e, PolicyFileError::MissingField { .. })),
            ("version = 2".to_owned(), "version", |e| {
                matches!(e, PolicyFileError::UnsupportedVersion { found: 2, supported: 1, .. })
            }),
            ("version = 0".to_owned(), "version", |e| {
                matches!(e, PolicyFileError::UnsupportedVersion { found: 0, .. })
            }),
            ("version = \"1\"".to_owned(), "version", |e| {
                matches!(e, PolicyFileError::WrongType { expected: "an integer", found: "string", .. })
            }),
            ("version = 1.0".to_owned(), "version", |e| matches!(e, PolicyFileError::WrongType { found: "float", .. })),
            // unknown keys at each level
            (v1("colour = 1"), "colour", |e| matches!(e, PolicyFileError::UnknownField { .. })),
            (v1("\"odd key\" = 1"), "\"odd key\"", |e| matches!(e, PolicyFileError::UnknownField { .. })),
            (v1("[thresholds]\ndeny_touched = 5"), "thresholds.deny_touched", |e| {
                matches!(e, PolicyFileError::UnknownField { .. })
            }),
            (v1("[thresholds]\ndeny_delete_ratio_bps = 5"), "thresholds.deny_delete_ratio_bps", |e| {
                matches!(e, PolicyFileError::UnknownField { .. })
            }),
            (v1("[[protect]]\npattern = \"a\"\nlabel = \"secret\""), "protect[0].label", |e| {
                matches!(e, PolicyFileError::UnknownField { .. })
            }),
            (v1("[defaults]\nenv = true"), "defaults.env", |e| matches!(e, PolicyFileError::UnknownField { .. })),
            // profile
            (
                v1("profile = \"lenient\""),
                "profile",
                |e| matches!(e, PolicyFileError::UnknownProfile { name, .. } if name == "lenient"),
            ),
            (v1("profile = 1"), "profile", |e| matches!(e, PolicyFileError::WrongType { found: "integer", .. })),
            // section types
            (v1("thresholds = 5"), "thresholds", |e| {
                matches!(e, PolicyFileError::WrongType { expected: "a table", .. })
            }),
            (v1("protect = \"a/**\""), "protect", |e| matches!(e, PolicyFileError::WrongType { .. })),
            (v1("protect = [\"a/**\"]"), "protect[0]", |e| {
                matches!(e, PolicyFileError::WrongType { expected: "a table", found: "string", .. })
            }),
            (v1("defaults = [1]"), "defaults", |e| matches!(e, PolicyFileError::WrongType { found: "array", .. })),
            // threshold values
            (v1("[thresholds]\ndeny_touched_paths = \"many\""), "thresholds.deny_touched_paths", |e| {
                matches!(e, PolicyFileError::WrongType { expected: "an integer", found: "string", .. })
            }),
            (v1("[thresholds]\ndeny_deleted_paths = -1"), "thresholds.deny_deleted_paths", |e| {
                matches!(e, PolicyFileError::Negative { value: -1, .. })
            }),
            (
                v1("[thresholds]\ndeny_changed_bytes = \"512XB\""),
                "thresholds.deny_changed_bytes",
                |e| matches!(e, PolicyFileError::InvalidSize { value, .. } if value == "512XB"),
            ),
            (v1("[thresholds]\ndeny_changed_bytes = true"), "thresholds.deny_changed_bytes", |e| {
                matches!(e, PolicyFileError::WrongType { found: "boolean", .. })
            }),
            (v1("[thresholds]\nescalate_changed_bytes = -5"), "thresholds.escalate_changed_bytes", |e| {
                matches!(e, PolicyFileError::Negative { value: -5, .. })
            }),
            (
                v1("[thresholds]\nrewrite_escalate_ratio = 1.5"),
                "thresholds.rewrite_escalate_ratio",
                |e| matches!(e, PolicyFileError::InvalidRatio { value, .. } if value == "1.5"),
            ),
            (v1("[thresholds]\nrewrite_escalate_ratio = 0.0"), "thresholds.rewrite_escalate_ratio", |e| {
                matches!(e, PolicyFileError::InvalidRatio { .. })
            }),
            (v1("[thresholds]\ndeny_delete_ratio = 0.00001"), "thresholds.deny_delete_ratio", |e| {
                matches!(e, PolicyFileError::InvalidRatio { .. })
            }),
            (
                v1("[thresholds]\ndeny_delete_ratio = nan"),
                "thresholds.deny_delete_ratio",
                |e| matches!(e, PolicyFileError::InvalidRatio { value, .. } if value == "NaN"),
            ),
            (
                v1("[thresholds]\ndeny_delete_ratio = 75"),
                "thresholds.deny_delete_ratio",
                |e| matches!(e, PolicyFileError::InvalidRatio { value, .. } if value == "75"),
            ),
            (v1("[thresholds]\ndeny_delete_ratio = \"75%\""), "thresholds.deny_delete_ratio", |e| {
                matches!(e, PolicyFileError::WrongType { found: "string", .. })
            }),
            // thresholds that fail validation
            (v1("[thresholds]\ndeny_touched_paths = 0"), "thresholds.deny_touched_paths", |e| {
                matches!(
                    e,
                    PolicyFileError::Threshold {
                        source: PolicyConfigError::ZeroThreshold { field: "deny_touched_paths" },
                        ..
                    }
                )
            }),
            (v1("[thresholds]\nescalate_touched_paths = 60000"), "thresholds.escalate_touched_paths", |e| {
                matches!(e, PolicyFileError::Threshold { source: PolicyConfigError::EscalateAboveDeny { .. }, .. })
            }),
            // Lowering only the denial threshold names the denial threshold.
            (v1("[thresholds]\ndeny_changed_bytes = \"1MiB\""), "thresholds.deny_changed_bytes", |e| {
                matches!(e, PolicyFileError::Threshold { source: PolicyConfigError::EscalateAboveDeny { .. }, .. })
            }),
            // protect entries
            (v1("[[protect]]\naccess = \"all\""), "protect[0].pattern", |e| {
                matches!(e, PolicyFileError::MissingField { .. })
            }),
            (
                v1(
                    "[[protect]]\npattern = \"ok/**\"\n[[protect]]\npattern = \"a\"\n[[protect]]\npattern = \"/etc/**\"",
                ),
                "protect[2].pattern",
                |e| matches!(e, PolicyFileError::Pattern { source: PatternError::Absolute { .. }, .. }),
            ),
            (v1("[[protect]]\npattern = \"a/[z-a]\""), "protect[0].pattern", |e| {
                matches!(e, PolicyFileError::Pattern { source: PatternError::ReversedRange { .. }, .. })
            }),
            (v1("[[protect]]\npattern = 7"), "protect[0].pattern", |e| matches!(e, PolicyFileError::WrongType { .. })),
            (
                v1("[[protect]]\npattern = \"a\"\naccess = \"write\""),
                "protect[0].access",
                |e| matches!(e, PolicyFileError::UnknownAccess { name, .. } if name == "write"),
            ),
            (
                v1("[[protect]]\npattern = \"a\"\naccess = [\"modify\", \"Delete\"]"),
                "protect[0].access[1]",
                |e| matches!(e, PolicyFileError::UnknownAccess { name, .. } if name == "Delete"),
            ),
            (v1("[[protect]]\npattern = \"a\"\naccess = [\"modify\", 3]"), "protect[0].access[1]", |e| {
                matches!(e, PolicyFileError::WrongType { found: "integer", .. })
            }),
            (v1("[[protect]]\npattern = \"a\"\naccess = []"), "protect[0].access", |e| {
                matches!(e, PolicyFileError::EmptyAccess { .. })
            }),
            (v1("[[protect]]\npattern = \"a\"\naccess = { all = true }"), "protect[0].access", |e| {
                matches!(e, PolicyFileError::WrongType { found: "table", .. })
            }),
            (v1("[[protect]]\npattern = \"a\"\nreason = 5"), "protect[0].reason", |e| {
                matches!(e, PolicyFileError::WrongType { .. })
            }),
            (
                v1(&format!("[[protect]]\npattern = \"a\"\nreason = \"{}\"", "r".repeat(MAX_REASON_BYTES + 1))),
                "protect[0].reason",
                |e| matches!(e, PolicyFileError::ReasonTooLong { length: 1025, limit: 1024, .. }),
            ),
            // defaults
            (v1("[defaults]\nsecrets = \"no\""), "defaults.secrets", |e| {
                matches!(e, PolicyFileError::WrongType { expected: "a boolean", .. })
            }),
            (v1("[defaults]\ngit = 0"), "defaults.git", |e| matches!(e, PolicyFileError::WrongType { .. })),
            (v1("[defaults]\nwritable_roots = \"src\""), "defaults.writable_roots", |e| {
                matches!(e, PolicyFileError::WrongType { .. })
            }),
            (v1("[defaults]\nwritable_roots = [\"src\", 1]"), "defaults.writable_roots[1]", |e| {
                matches!(e, PolicyFileError::WrongType { .. })
            }),
            (
                v1("[defaults]\nwritable_roots = [\"/etc\"]"),
                "defaults.writable_roots[0]",
                |e| matches!(e, PolicyFileError::InvalidRoot { value, .. } if value == "/etc"),
            ),
            (v1("[defaults]\nwritable_roots = [\"src\", \"../outside\"]"), "defaults.writable_roots[1]", |e| {
                matches!(e, PolicyFileError::InvalidRoot { .. })
            }),
            (
                v1("[defaults]\nwritable_roots = [\"src/../docs\"]"),
                "defaults.writable_roots[0]",
                |e| matches!(e, PolicyFileError::InvalidRoot { problem, .. } if problem.contains("..")),
            ),
            (v1("[defaults]\nwritable_roots = [\"\"]"), "defaults.writable_roots[0]", |e| {
                matches!(e, PolicyFileError::InvalidRoot { .. })
            }),
            (
                v1("[defaults]\nwritable_roots = [\".\"]"),
                "defaults.writable_roots[0]",
                |e| matches!(e, PolicyFileError::InvalidRoot { problem, .. } if problem.contains("workspace root")),
            ),
            (v1("[defaults]\nwritable_roots = [\"a\\u0000b\"]"), "defaults.writable_roots[0]", |e| {
                matches!(e, PolicyFileError::InvalidRoot { .. })
            }),
            // commands
            (v1("[commands]\nscratch = \"target\""), "commands.scratch", |e| {
                matches!(e, PolicyFileError::WrongType { .. })
            }),
            (
                v1("[commands]\nscratch = [\"target\", \"a/../b\"]"),
                "commands.scratch[1]",
                |e| matches!(e, PolicyFileError::InvalidScratch { value, .. } if value == "a/../b"),
            ),
            (v1("[commands]\nscratch = [\"/abs\"]"), "commands.scratch[0]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscratch = [\"a//b\"]"), "commands.scratch[0]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscratch = [\".vsh/cache\"]"), "commands.scratch[0]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscratch = [\"a/b/c/d/e/f/g/h/i\"]"), "commands.scratch[0]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscratch = [\"..\"]"), "commands.scratch[0]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscratch = [\".git\"]"), "commands.scratch[0]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscratch = [\"target\", \"sub/.git\"]"), "commands.scratch[1]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscratch = [\"vendor/.VSH/cache\"]"), "commands.scratch[0]", |e| {
                matches!(e, PolicyFileError::InvalidScratch { .. })
            }),
            (v1("[commands]\nscrach = []"), "commands.scrach", |e| matches!(e, PolicyFileError::UnknownField { .. })),
        ];
        for (text, field, check) in &cases {
            let error = error(text);
            assert!(check(&error), "{text:?}: unexpected {error:?}");
            assert_eq!(error.field(), Some(*field), "{text:?}: {error}");
            assert!(error.to_string().contains(&format!("`{field}`")), "{text:?}: {error}");
        }
    }

    #[test]
    fn error_messages_explain_the_problem() {
        let cases = [
            (
                v1("colour = 1"),
                "`colour` is not a known key; expected one of: version, profile, thresholds, protect, review, defaults, commands",
            ),
            ("profile = \"strict\"".to_owned(), "`version` is missing (a policy file starts with `version = 1`)"),
            (
                v1("writable_roots = [\"src\"]"),
                "`writable_roots` is not a known key; expected one of: version, profile, thresholds, protect, \
                 review, defaults, commands (it belongs in the `[defaults]` table)",
            ),
            ("version = 3".to_owned(), "`version` is 3; this build reads version 1"),
            (
                v1("[thresholds]\ndeny_changed_bytes = \"512XB\""),
                "`thresholds.deny_changed_bytes` is \"512XB\", not a byte size: unknown unit; expected B, KiB, MiB, GiB or TiB (powers of 1024)",
            ),
            (
                v1("[[protect]]\npattern = \"a\"\naccess = []"),
                "`protect[0].access` is empty; a rule must deny at least one access",
            ),
        ];
        for (text, message) in cases {
            assert_eq!(error(&text).to_string(), message);
        }
        // Sources carry the underlying cause.
        let threshold = error(&v1("[thresholds]\ndeny_touched_paths = 0"));
        let source = std::error::Error::source(&threshold).unwrap();
        assert_eq!(source.to_string(), "policy threshold `deny_touched_paths` must be greater than zero");
        let pattern = error(&v1("[[protect]]\npattern = \"\""));
        assert_eq!(std::error::Error::source(&pattern).unwrap().to_string(), "pattern is empty");
    }

    #[test]
    fn syntax_errors_carry_a_location() {
        for (text, line) in [("version = 1\nprofile = \n", 2), ("version = 1\nversion = 1\n", 2), ("[[protect]\n", 1)] {
            let error = error(text);
            let PolicyFileError::Syntax { line: found, column, message } = &error else {
                panic!("{text:?}: {error:?}")
            };
            assert_eq!(*found, line, "{text:?}: {error}");
            assert!(*column >= 1 && !message.is_empty(), "{error}");
            assert_eq!(error.field(), None);
        }
    }

    #[test]
    fn digest_tracks_every_file_setting() {
        let base = v1(r#"
profile = "balanced"
[thresholds]
escalate_touched_paths = 200
[[protect]]
pattern = "config/prod/**"
access = ["modify"]
reason = "production config"
[defaults]
writable_roots = ["src", "docs"]
"#);
        let digest = |text: &str| PolicyFile::parse(text).unwrap_or_else(|error| panic!("{text}: {error}")).digest();
        let mut seen = vec![digest(&base)];
        // Equivalent spellings share the digest.
        assert_eq!(digest(&base.replace("[\"src\", \"docs\"]", "[\"docs\", \"src/\", \"src/x\"]")), seen[0]);
        assert_eq!(digest(&base.replace("\"balanced\"", "\"Balanced\"")), seen[0]);
        let variants = [
            base.replace("\"balanced\"", "\"strict\""),
            base.replace("escalate_touched_paths = 200", "escalate_touched_paths = 201"),
            base.replace("escalate_touched_paths = 200", "escalate_changed_bytes = \"1MiB\""),
            base.replace("escalate_touched_paths = 200", "deny_touched_paths = 40000"),
            base.replace("escalate_touched_paths = 200", "deny_changed_bytes = \"900MiB\""),
            base.replace("escalate_touched_paths = 200", "deny_deleted_paths = 9000"),
            base.replace("escalate_touched_paths = 200", "deny_delete_ratio = 0.7"),
            base.replace("escalate_touched_paths = 200", "delete_ratio_min_paths = 99"),
            base.replace("escalate_touched_paths = 200", "rewrite_escalate_ratio = 0.4"),
            base.replace("config/prod/**", "config/staging/**"),
            base.replace("[\"modify\"]", "[\"modify\", \"delete\"]"),
            base.replace("production config", "prod"),
            base.replace("[\"src\", \"docs\"]", "[\"src\"]"),
            base.replace("[\"src\", \"docs\"]", "[]"),
            base.replace("writable_roots = [\"src\", \"docs\"]", ""),
            base.replace("[defaults]", "[defaults]\nsecrets = false"),
            base.replace("[defaults]", "[defaults]\ngit = false"),
        ];
        for variant in &variants {
            let changed = digest(variant);
            assert!(!seen.contains(&changed), "{variant}");
            seen.push(changed);
        }
    }

    #[test]
    fn accessors_boundaries_and_the_field_an_error_names() {
        let file = PolicyFile::from_toml(&v1("profile = \"strict\"\n[defaults]\nsecrets = false\n")).unwrap();
        assert_eq!(file.profile(), PolicyProfile::Strict);
        assert_eq!(file.defaults(), DefaultRules { secrets: false, git: true });
        // A file of exactly the largest size is read whole (its last byte matters).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        // The closing quote is the last byte: a read one byte short would not parse.
        let tail = "profile = \"paranoid\"";
        let head = "version = 1\n#";
        let padding = "x".repeat(MAX_POLICY_FILE_BYTES as usize - head.len() - tail.len() - 1);
        std::fs::write(&path, format!("{head}{padding}\n{tail}")).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), MAX_POLICY_FILE_BYTES);
        assert_eq!(PolicyFile::read(&path).unwrap().profile(), PolicyProfile::Paranoid);
        std::fs::write(&path, format!("{head}{padding}x\n{tail}")).unwrap();
        assert!(matches!(PolicyFile::read(&path), Err(PolicyFileError::TooLarge { .. })));
        // A reason of exactly the largest length is kept; one byte more is not.
        let reason =
            |length: usize| v1(&format!("[[protect]]\npattern = \"a\"\nreason = \"{}\"\n", "r".repeat(length)));
        assert!(PolicyFile::from_toml(&reason(MAX_REASON_BYTES)).is_ok());
        assert!(matches!(error(&reason(MAX_REASON_BYTES + 1)), PolicyFileError::ReasonTooLong { .. }));
        // A ratio must be above zero.
        assert!(matches!(error(&v1("[thresholds]\ndeny_delete_ratio = 0.0")), PolicyFileError::InvalidRatio { .. }));
        // Setting both sides of an inconsistent pair names the escalation side.
        let both = error(&v1("[thresholds]\nescalate_touched_paths = 100\ndeny_touched_paths = 50"));
        assert_eq!(both.field(), Some("thresholds.escalate_touched_paths"));
    }

    #[test]
    fn commands_scratch_is_read_rendered_back_and_digested_only_when_named() {
        let plain = PolicyFile::parse("version = 1\n").unwrap();
        assert_eq!(plain.command_scratch(), None);
        assert_eq!(plain.digest(), TransactionPolicy::default().digest(), "no [commands]: the digest it always had");
        let named = PolicyFile::parse("version = 1\n[commands]\nscratch = [\"build\", \"target\"]\n").unwrap();
        assert_eq!(named.command_scratch(), Some(&["build".to_owned(), "target".to_owned()][..]));
        assert_ne!(named.digest(), plain.digest());
        let nested =
            PolicyFile::parse("version = 1\n[commands]\nscratch = [\"node_modules/.cache\", \"__pycache__\"]\n")
                .unwrap();
        assert_eq!(nested.command_scratch(), Some(&["node_modules/.cache".to_owned(), "__pycache__".to_owned()][..]));
        let none = PolicyFile::parse("version = 1\n[commands]\nscratch = []\n").unwrap();
        assert_eq!(none.command_scratch(), Some(&[][..]), "an empty list gives commands none");
        assert_ne!(none.digest(), plain.digest());
        let rendered = render_policy(&named);
        assert_eq!(PolicyFile::parse(&rendered).unwrap().digest(), named.digest(), "{rendered}");
        let too_many = format!(
            "version = 1\n[commands]\nscratch = [{}]\n",
            (0..65).map(|n| format!("\"d{n}\"")).collect::<Vec<_>>().join(", ")
        );
        assert!(matches!(PolicyFile::parse(&too_many), Err(PolicyFileError::InvalidScratch { .. })));
        // Paths, never patterns: a pattern would match nothing.
        for pattern in ["*", "**/target", "crates/*/target", "build?", "[ab]"] {
            let text = format!("version = 1\n[commands]\nscratch = [\"{pattern}\"]\n");
            assert!(matches!(PolicyFile::parse(&text), Err(PolicyFileError::InvalidScratch { .. })), "{pattern}");
        }
        // ux54 #6: a directory written as .gitignore writes it is that directory; a slash alone is none.
        let slashed = PolicyFile::parse("version = 1\n[commands]\nscratch = [\"build/\", \"crates/app/target/\"]\n");
        assert_eq!(slashed.unwrap().command_scratch(), Some(&["build".to_owned(), "crates/app/target".to_owned()][..]));
        for odd in ["/", "build//", "/build", "./build"] {
            let text = format!("version = 1\n[commands]\nscratch = [\"{odd}\"]\n");
            assert!(matches!(PolicyFile::parse(&text), Err(PolicyFileError::InvalidScratch { .. })), "{odd}");
        }
    }
}
