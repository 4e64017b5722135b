//! [`DiffEntry`] and [`DiffKind`]: one path's change.

use serde::{Deserialize, Serialize};

use crate::canon::{self, Canonical, DecodeError, Reader};
use crate::node::NodeState;
use crate::path::VPath;

/// How one path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DiffKind {
    /// The path did not exist and now does.
    Create,
    /// The path existed and no longer does.
    Delete,
    /// The kind or content changed (the mode may too).
    Modify,
    /// Only the permission bits changed.
    MetadataChange,
}

impl DiffKind {
    /// The canonical tag: Create=1, Delete=2, Modify=3, MetadataChange=4.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Create => 1,
            Self::Delete => 2,
            Self::Modify => 3,
            Self::MetadataChange => 4,
        }
    }

    /// A lower-case name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Delete => "delete",
            Self::Modify => "modify",
            Self::MetadataChange => "mode",
        }
    }
}

/// One changed path with its before and after states.
///
/// Constructed only through [`DiffEntry::between`], so the kind always agrees with
/// the states and an entry always records a real change.
///
/// Canonical encoding: path, kind tag, optional before state, optional after state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DiffEntry {
    /// The changed path.
    pub path: VPath,
    /// The kind of change.
    pub kind: DiffKind,
    /// The state before, if the path existed.
    pub before: Option<NodeState>,
    /// The state after, if the path exists.
    pub after: Option<NodeState>,
}

impl DiffEntry {
    /// Classify a change, or `None` when nothing changed.
    pub fn between(path: VPath, before: Option<NodeState>, after: Option<NodeState>) -> Option<Self> {
        let kind = match (&before, &after) {
            (None, None) => return None,
            (None, Some(_)) => DiffKind::Create,
            (Some(_), None) => DiffKind::Delete,
            (Some(old), Some(new)) if old == new => return None,
            (Some(old), Some(new)) if old.same_content(new) => DiffKind::MetadataChange,
            (Some(_), Some(_)) => DiffKind::Modify,
        };
        Some(Self { path, kind, before, after })
    }

    /// Decode the canonical form, re-checking that the kind matches the states.
    pub fn decode_canonical(reader: &mut Reader<'_>, max_path_bytes: u64) -> Result<Self, DecodeError> {
        let raw = reader.bytes(max_path_bytes)?;
        let text = std::str::from_utf8(raw).map_err(|_| reader.invalid("diff path utf-8"))?;
        let path = if text.is_empty() {
            VPath::root()
        } else {
            VPath::parse(text).map_err(|_| reader.invalid("diff path"))?
        };
        if path.as_str() != text {
            return Err(reader.invalid("non-canonical diff path"));
        }
        let tag = reader.u8()?;
        let before = if reader.flag("before flag")? { Some(NodeState::decode_canonical(reader)?) } else { None };
        let after = if reader.flag("after flag")? { Some(NodeState::decode_canonical(reader)?) } else { None };
        let entry = Self::between(path, before, after).ok_or_else(|| reader.invalid("empty diff entry"))?;
        if entry.kind.tag() != tag {
            return Err(reader.invalid("diff kind"));
        }
        Ok(entry)
    }
}

impl Canonical for DiffEntry {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        self.path.encode_canonical(out);
        canon::put_u8(out, self.kind.tag());
        canon::put_option(out, self.before.as_ref());
        canon::put_option(out, self.after.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let path = VPath::parse("a").unwrap();
        let file = NodeState::file_with(b"x", 0o644);
        let exec = NodeState::file_with(b"x", 0o755);
        let other = NodeState::file_with(b"y", 0o644);
        assert_eq!(DiffEntry::between(path.clone(), None, None), None);
        assert_eq!(DiffEntry::between(path.clone(), Some(file), Some(file)), None);
        assert_eq!(DiffEntry::between(path.clone(), None, Some(file)).unwrap().kind, DiffKind::Create);
        assert_eq!(DiffEntry::between(path.clone(), Some(file), None).unwrap().kind, DiffKind::Delete);
        assert_eq!(DiffEntry::between(path.clone(), Some(file), Some(exec)).unwrap().kind, DiffKind::MetadataChange);
        let modify = DiffEntry::between(path, Some(file), Some(other)).unwrap();
        assert_eq!(modify.kind, DiffKind::Modify);
        let bytes = modify.to_canonical_bytes();
        let mut reader = Reader::new(&bytes);
        assert_eq!(DiffEntry::decode_canonical(&mut reader, 4096).unwrap(), modify);
        let mut tampered = bytes.clone();
        tampered[9] = DiffKind::Create.tag();
        assert!(DiffEntry::decode_canonical(&mut Reader::new(&tampered), 4096).is_err());
    }
}
