//! [`VPath`]: a normalized, workspace-relative path.

use std::fmt;

use crate::canon::{self, Canonical};

/// A normalized path relative to the workspace root.
///
/// Invariants (checked by [`VPath::parse`], relied on everywhere else):
/// - components are separated by a single `/` and none is empty, `.` or `..`;
/// - no NUL byte;
/// - never absolute; the root itself is the empty path, displayed as `.`.
///
/// A backslash is an ordinary character in a POSIX file name and is kept as such.
///
/// Ordering is plain byte order of the normalized string, so a directory sorts
/// before its descendants, and the descendants of `a` are exactly the range
/// `"a/" .. "a0"` (`'0'` is the byte after `'/'`).
///
/// Canonical encoding: the normalized UTF-8 string as a byte string
/// (see [`crate::canon`]).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VPath(String);

/// Why a string is not a valid [`VPath`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VPathError {
    /// The input was empty.
    #[error("path is empty")]
    Empty,
    /// The input contained a NUL byte.
    #[error("path contains a NUL byte")]
    Nul,
    /// The input was absolute.
    #[error("path is absolute: {0:?}")]
    Absolute(String),
    /// A `..` component would leave the workspace root.
    #[error("path escapes the workspace root: {0:?}")]
    EscapesRoot(String),
    /// A component was not valid UTF-8 (only from [`VPath::from_component_bytes`]).
    #[error("path component is not valid UTF-8")]
    NotUtf8,
    /// A single name was expected, but the input held a separator, `.` or `..`.
    #[error("not a single path component: {0:?}")]
    NotAComponent(String),
}

impl VPath {
    /// The workspace root.
    pub const fn root() -> Self {
        Self(String::new())
    }

    /// Parse and normalize a workspace-relative path.
    ///
    /// `.` components and repeated slashes are dropped; `..` removes the previous
    /// component and is an error if there is none. `"."` is the root.
    pub fn parse(input: &str) -> Result<Self, VPathError> {
        if input.is_empty() {
            return Err(VPathError::Empty);
        }
        if input.contains('\0') {
            return Err(VPathError::Nul);
        }
        if input.starts_with('/') {
            return Err(VPathError::Absolute(input.to_owned()));
        }
        if is_canonical(input) {
            return Ok(Self(input.to_owned()));
        }
        let mut parts: Vec<&str> = Vec::new();
        for component in input.split('/') {
            match component {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(VPathError::EscapesRoot(input.to_owned()));
                    }
                }
                name => parts.push(name),
            }
        }
        Ok(Self(parts.join("/")))
    }

    /// Build a path of one component. Fails for empty names, `.`, `..`, or names
    /// that contain `/` or NUL.
    pub fn from_component(name: &str) -> Result<Self, VPathError> {
        Self::root().child(name)
    }

    /// Build a one-component path from raw bytes (a directory entry name).
    pub fn from_component_bytes(name: &[u8]) -> Result<Self, VPathError> {
        let name = std::str::from_utf8(name).map_err(|_| VPathError::NotUtf8)?;
        Self::from_component(name)
    }

    /// The normalized string; empty for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the workspace root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The parent directory, or `None` for the root.
    pub fn parent(&self) -> Option<VPath> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(index) => Self(self.0[..index].to_owned()),
            None => Self::root(),
        })
    }

    /// The last component, or `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(index) => &self.0[index + 1..],
            None => &self.0,
        })
    }

    /// Append one component.
    pub fn child(&self, name: &str) -> Result<VPath, VPathError> {
        if name.is_empty() {
            return Err(VPathError::Empty);
        }
        if name.contains('\0') {
            return Err(VPathError::Nul);
        }
        if name.contains('/') || name == "." || name == ".." {
            return Err(VPathError::NotAComponent(name.to_owned()));
        }
        Ok(self.child_unchecked(name))
    }

    fn child_unchecked(&self, name: &str) -> VPath {
        if self.is_root() {
            Self(name.to_owned())
        } else {
            let mut joined = String::with_capacity(self.0.len() + 1 + name.len());
            joined.push_str(&self.0);
            joined.push('/');
            joined.push_str(name);
            Self(joined)
        }
    }

    /// Join a relative path (which may contain `..`, but must not leave the root).
    pub fn join(&self, relative: &str) -> Result<VPath, VPathError> {
        if relative.starts_with('/') {
            return Err(VPathError::Absolute(relative.to_owned()));
        }
        if self.is_root() {
            return Self::parse(relative);
        }
        let mut combined = String::with_capacity(self.0.len() + 1 + relative.len());
        combined.push_str(&self.0);
        combined.push('/');
        combined.push_str(relative);
        Self::parse(&combined)
    }

    /// The components, root first. The root has none.
    pub fn components(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.0.split('/').filter(|part| !part.is_empty())
    }

    /// Number of components (0 for the root).
    pub fn depth(&self) -> usize {
        if self.is_root() { 0 } else { self.0.bytes().filter(|byte| *byte == b'/').count() + 1 }
    }

    /// Every proper ancestor, root first (the root included, `self` excluded).
    pub fn ancestors(&self) -> Vec<VPath> {
        let mut out = Vec::with_capacity(self.depth());
        let mut current = self.parent();
        while let Some(path) = current {
            current = path.parent();
            out.push(path);
        }
        out.reverse();
        out
    }

    /// Whether `self` equals `base` or lies beneath it.
    pub fn is_within(&self, base: &VPath) -> bool {
        base.is_root()
            || self.0 == base.0
            || (self.0.len() > base.0.len() && self.0.starts_with(&base.0) && self.0.as_bytes()[base.0.len()] == b'/')
    }

    /// Whether `self` lies strictly beneath `base`.
    pub fn is_strictly_within(&self, base: &VPath) -> bool {
        self != base && self.is_within(base)
    }

    /// The part of `self` below `base`, or `None` if `self` is not within it.
    pub fn relative_to(&self, base: &VPath) -> Option<&str> {
        if !self.is_within(base) {
            return None;
        }
        if base.is_root() {
            return Some(&self.0);
        }
        if self.0.len() == base.0.len() { Some("") } else { Some(&self.0[base.0.len() + 1..]) }
    }

    /// Move `self` from under `from` to under `to`; `None` if not within `from`.
    pub fn rebase(&self, from: &VPath, to: &VPath) -> Option<VPath> {
        let rest = self.relative_to(from)?;
        if rest.is_empty() {
            return Some(to.clone());
        }
        if to.is_root() {
            return Some(Self(rest.to_owned()));
        }
        Some(Self(format!("{}/{}", to.0, rest)))
    }

    /// The exclusive upper bound of the descendants of `self` in byte order,
    /// for `BTreeMap::range((Excluded(self), Excluded(upper)))`-style queries.
    /// For the root every non-root path is a descendant and `None` is returned.
    pub fn descendants_upper_bound(&self) -> Option<VPath> {
        if self.is_root() {
            return None;
        }
        let mut upper = self.0.clone();
        upper.push('0');
        Some(Self(upper))
    }

    /// The inclusive lower bound of the strict descendants of `self`.
    #[must_use]
    pub fn descendants_lower_bound(&self) -> VPath {
        if self.is_root() {
            return Self::root();
        }
        let mut lower = self.0.clone();
        lower.push('/');
        Self(lower)
    }
}

/// Fast path: is the input already in normalized form?
fn is_canonical(input: &str) -> bool {
    !input.is_empty()
        && !input.ends_with('/')
        && input.split('/').all(|component| !matches!(component, "" | "." | ".."))
}

impl fmt::Display for VPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() { f.write_str(".") } else { f.write_str(&self.0) }
    }
}

impl fmt::Debug for VPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VPath({self})")
    }
}

impl std::str::FromStr for VPath {
    type Err = VPathError;
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        Self::parse(input)
    }
}

impl AsRef<str> for VPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Canonical for VPath {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_bytes(out, self.0.as_bytes());
    }
}

impl serde::Serialize for VPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.is_root() { serializer.serialize_str(".") } else { serializer.serialize_str(&self.0) }
    }
}

impl<'de> serde::Deserialize<'de> for VPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        VPath::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(input: &str) -> VPath {
        VPath::parse(input).unwrap()
    }

    #[test]
    fn rejects_bad_inputs() {
        assert_eq!(VPath::parse(""), Err(VPathError::Empty));
        assert_eq!(VPath::parse("a\0b"), Err(VPathError::Nul));
        assert!(matches!(VPath::parse("/etc/passwd"), Err(VPathError::Absolute(_))));
        assert!(matches!(VPath::parse(".."), Err(VPathError::EscapesRoot(_))));
        assert!(matches!(VPath::parse("a/../../x"), Err(VPathError::EscapesRoot(_))));
        assert!(matches!(VPath::parse("../x"), Err(VPathError::EscapesRoot(_))));
    }

    #[test]
    fn normalizes() {
        assert_eq!(p("./a//b/./c/").as_str(), "a/b/c");
        assert_eq!(p("a/b/../c").as_str(), "a/c");
        assert!(p(".").is_root());
        assert!(p("a/..").is_root());
        assert_eq!(p("a\\b").as_str(), "a\\b");
        assert_eq!(p(".").to_string(), ".");
    }

    #[test]
    fn relations() {
        let a = p("a");
        let ab = p("a/b");
        let a_dash = p("a-b");
        assert!(ab.is_within(&a));
        assert!(!a_dash.is_within(&a));
        assert!(a.is_within(&VPath::root()));
        assert_eq!(ab.parent(), Some(a.clone()));
        assert_eq!(a.parent(), Some(VPath::root()));
        assert_eq!(VPath::root().parent(), None);
        assert_eq!(ab.file_name(), Some("b"));
        assert_eq!(ab.rebase(&a, &p("x/y")), Some(p("x/y/b")));
        assert_eq!(ab.rebase(&a, &VPath::root()), Some(p("b")));
        assert_eq!(p("a/b/c").ancestors(), vec![VPath::root(), p("a"), p("a/b")]);
        assert_eq!(p("a/b/c").depth(), 3);
        assert!(a < ab && ab < a.descendants_upper_bound().unwrap());
        assert!(a_dash < ab);
        assert!(matches!(a.child("x/y"), Err(VPathError::NotAComponent(_))));
        assert!(matches!(a.child(".."), Err(VPathError::NotAComponent(_))));
        assert_eq!(a.join("../b").unwrap(), p("b"));
        assert!(a.join("../..").is_err());
    }

    proptest::proptest! {
        #[test]
        fn parse_matches_a_stack_oracle(parts in proptest::collection::vec(
            proptest::sample::select(vec!["a", "b", "ab", ".", "..", "", "c\\d"]), 1..8)) {
            let input = parts.join("/");
            let mut stack: Vec<&str> = Vec::new();
            let mut escaped = false;
            for part in &parts {
                match *part {
                    "" | "." => {}
                    ".." => if stack.pop().is_none() { escaped = true; break; },
                    other => stack.push(other),
                }
            }
            match VPath::parse(&input) {
                Ok(path) => {
                    proptest::prop_assert!(!escaped);
                    proptest::prop_assert!(!input.is_empty());
                    proptest::prop_assert_eq!(path.as_str(), stack.join("/"));
                    // Parsing the normalized form is the identity.
                    if !path.is_root() {
                        proptest::prop_assert_eq!(VPath::parse(path.as_str()).unwrap(), path);
                    }
                }
                Err(VPathError::Empty) => proptest::prop_assert!(input.is_empty()),
                Err(VPathError::Absolute(_)) => proptest::prop_assert!(input.starts_with('/')),
                Err(VPathError::EscapesRoot(_)) => proptest::prop_assert!(escaped),
                Err(other) => proptest::prop_assert!(false, "unexpected {other:?}"),
            }
        }
    }
}
