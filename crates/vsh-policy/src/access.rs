//! [`AccessKind`] and [`AccessSet`]: what a guest operation does to a path.
//!
//! Every guest operation is authorized per path and per access kind before it
//! reaches the virtual image. Reads are split three ways so a policy can, for
//! example, allow listing a directory while hiding a file's bytes; mutations are
//! split five ways so renames can be judged at both ends.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One kind of access to one path.
///
/// The declaration order is the bit order of [`AccessSet`] and the canonical
/// tag order (see [`AccessKind::tag`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AccessKind {
    /// Existence, kind, size or mode (`exists()`, `stat()`).
    MetadataRead,
    /// The bytes of a file or the target of a symlink.
    ContentRead,
    /// The names in a directory.
    DirectoryRead,
    /// Creating a path that does not exist.
    Create,
    /// Changing an existing path's content, kind or mode.
    Modify,
    /// Removing a path.
    Delete,
    /// The path a rename moves away from.
    RenameSource,
    /// The path a rename moves to.
    RenameDestination,
}

impl AccessKind {
    /// Every kind, in declaration order.
    pub const ALL: [AccessKind; 8] = [
        Self::MetadataRead,
        Self::ContentRead,
        Self::DirectoryRead,
        Self::Create,
        Self::Modify,
        Self::Delete,
        Self::RenameSource,
        Self::RenameDestination,
    ];

    /// The bit of this kind in an [`AccessSet`].
    pub const fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// The canonical tag: `MetadataRead`=1 through `RenameDestination`=8.
    pub const fn tag(self) -> u8 {
        self as u8 + 1
    }

    /// Decode a canonical tag.
    pub const fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            1..=8 => Some(Self::ALL[(tag - 1) as usize]),
            _ => None,
        }
    }

    /// A lower-case, hyphenated name for display (`content-read`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::MetadataRead => "metadata-read",
            Self::ContentRead => "content-read",
            Self::DirectoryRead => "directory-read",
            Self::Create => "create",
            Self::Modify => "modify",
            Self::Delete => "delete",
            Self::RenameSource => "rename-source",
            Self::RenameDestination => "rename-destination",
        }
    }

    /// The kind named `name` (the inverse of [`AccessKind::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Whether this kind only reads.
    pub const fn is_read(self) -> bool {
        AccessSet::READS.contains(self)
    }

    /// Whether this kind changes the workspace.
    pub const fn is_mutation(self) -> bool {
        AccessSet::MUTATIONS.contains(self)
    }
}

impl fmt::Display for AccessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`AccessKind`]s, one bit per kind.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct AccessSet(u16);

impl AccessSet {
    /// No access at all.
    pub const NONE: AccessSet = AccessSet(0);
    /// `MetadataRead`, `ContentRead` and `DirectoryRead`.
    pub const READS: AccessSet =
        AccessSet(AccessKind::MetadataRead.bit() | AccessKind::ContentRead.bit() | AccessKind::DirectoryRead.bit());
    /// `Create`, `Modify`, `Delete`, `RenameSource` and `RenameDestination`.
    pub const MUTATIONS: AccessSet = AccessSet(
        AccessKind::Create.bit()
            | AccessKind::Modify.bit()
            | AccessKind::Delete.bit()
            | AccessKind::RenameSource.bit()
            | AccessKind::RenameDestination.bit(),
    );
    /// Every kind.
    pub const ALL: AccessSet = AccessSet(Self::READS.0 | Self::MUTATIONS.0);

    /// The set holding exactly `kind`.
    pub const fn single(kind: AccessKind) -> AccessSet {
        AccessSet(kind.bit())
    }

    /// Whether `kind` is in the set.
    pub const fn contains(self, kind: AccessKind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// The set with `kind` added.
    #[must_use]
    pub const fn with(self, kind: AccessKind) -> AccessSet {
        AccessSet(self.0 | kind.bit())
    }

    /// The union of both sets.
    #[must_use]
    pub const fn union(self, other: AccessSet) -> AccessSet {
        AccessSet(self.0 | other.0)
    }

    /// The kinds in both sets.
    #[must_use]
    pub const fn intersection(self, other: AccessSet) -> AccessSet {
        AccessSet(self.0 & other.0)
    }

    /// Whether the sets share a kind.
    pub const fn intersects(self, other: AccessSet) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The raw bits (bit `n` is the kind with tag `n + 1`).
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Rebuild a set from [`AccessSet::bits`]; `None` if an unknown bit is set.
    pub const fn from_bits(bits: u16) -> Option<AccessSet> {
        if bits & !Self::ALL.0 == 0 { Some(AccessSet(bits)) } else { None }
    }

    /// The kinds in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = AccessKind> {
        AccessKind::ALL.into_iter().filter(move |kind| self.contains(*kind))
    }
}

impl Serialize for AccessSet {
    /// The raw bits, as a `u16`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u16(self.0)
    }
}

impl<'de> Deserialize<'de> for AccessSet {
    /// The raw bits; unknown bits are an error.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bits = u16::deserialize(deserializer)?;
        Self::from_bits(bits).ok_or_else(|| serde::de::Error::custom(format!("unknown access bits {bits:#x}")))
    }
}

impl From<AccessKind> for AccessSet {
    fn from(kind: AccessKind) -> Self {
        Self::single(kind)
    }
}

impl FromIterator<AccessKind> for AccessSet {
    fn from_iter<I: IntoIterator<Item = AccessKind>>(iter: I) -> Self {
        iter.into_iter().fold(Self::NONE, AccessSet::with)
    }
}

impl fmt::Display for AccessSet {
    /// `all`, `reads`, `mutations`, `none`, or the kinds joined by `+`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ALL => f.write_str("all"),
            Self::READS => f.write_str("reads"),
            Self::MUTATIONS => f.write_str("mutations"),
            Self::NONE => f.write_str("none"),
            set => {
                for (index, kind) in set.iter().enumerate() {
                    if index > 0 {
                        f.write_str("+")?;
                    }
                    f.write_str(kind.name())?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_sets_partition_all_kinds() {
        assert_eq!(AccessSet::READS.iter().count(), 3);
        assert_eq!(AccessSet::MUTATIONS.iter().count(), 5);
        assert!(!AccessSet::READS.intersects(AccessSet::MUTATIONS));
        assert_eq!(AccessSet::READS.union(AccessSet::MUTATIONS), AccessSet::ALL);
        assert_eq!(AccessSet::ALL.bits(), 0xff);
        assert!(AccessSet::NONE.is_empty());
        for kind in AccessKind::ALL {
            assert!(AccessSet::ALL.contains(kind));
            assert!(!AccessSet::NONE.contains(kind));
            assert_ne!(kind.is_read(), kind.is_mutation());
            assert_eq!(AccessKind::from_tag(kind.tag()), Some(kind));
            assert_eq!(AccessKind::from_name(kind.name()), Some(kind));
            assert_eq!(AccessSet::single(kind).iter().collect::<Vec<_>>(), vec![kind]);
        }
        assert_eq!(AccessKind::from_tag(0), None);
        assert_eq!(AccessKind::from_tag(9), None);
        assert_eq!(AccessKind::from_name("Create"), None);
        assert_eq!(AccessKind::from_name("all"), None);
    }

    #[test]
    fn set_operations_and_display() {
        let set = AccessSet::NONE.with(AccessKind::Create).with(AccessKind::ContentRead);
        assert!(set.contains(AccessKind::Create) && set.contains(AccessKind::ContentRead));
        assert!(!set.contains(AccessKind::Delete));
        assert_eq!(set.to_string(), "content-read+create");
        assert_eq!(set, [AccessKind::ContentRead, AccessKind::Create].into_iter().collect());
        assert_eq!(set.intersection(AccessSet::READS), AccessSet::single(AccessKind::ContentRead));
        assert_eq!(AccessSet::from_bits(set.bits()), Some(set));
        assert_eq!(AccessSet::from_bits(0x100), None);
        assert_eq!(AccessSet::ALL.to_string(), "all");
        assert_eq!(AccessSet::MUTATIONS.to_string(), "mutations");
    }

    #[test]
    fn adding_a_kind_twice_keeps_it_and_sets_deserialize_from_their_bits() {
        use serde::Deserialize as _;
        use serde::de::value::{Error, U16Deserializer};
        let read = AccessSet::NONE.with(AccessKind::ContentRead);
        assert_eq!(read.with(AccessKind::ContentRead), read);
        assert!(read.with(AccessKind::ContentRead).contains(AccessKind::ContentRead));
        let bits = AccessSet::MUTATIONS.bits();
        assert_eq!(AccessSet::deserialize(U16Deserializer::<Error>::new(bits)).unwrap(), AccessSet::MUTATIONS);
        assert!(AccessSet::deserialize(U16Deserializer::<Error>::new(0x8000)).is_err());
    }
}
