//! [`ReadSet`] and [`Dependency`]: what a run used of the base, facet by facet.
//!
//! These are plain values so that every layer (the virtual filesystem that
//! records them, the store that persists them in pending artifacts, the commit
//! engine that revalidates them) shares one definition and one encoding.

use std::collections::BTreeMap;

use crate::canon::{self, Canonical, DecodeError, Reader};
use crate::{BlobId, NodeKind, ReadSetDigest, VPath};

/// What the run depended on at one base path. Each facet is compared exactly at
/// commit time; facets that were never used are never compared, so an unrelated
/// change (a touched mtime, a new sibling) is not a conflict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependency {
    /// Existence and kind: `Some(None)` means "was absent".
    pub kind: Option<Option<NodeKind>>,
    /// Size and mode (from `stat`), for the recorded kind.
    pub size_mode: Option<(u64, u32)>,
    /// Content digest of a file or symlink target that was read.
    pub content: Option<BlobId>,
    /// Digest of the sorted child names of a directory that was listed
    /// (see [`names_digest`]).
    pub names: Option<[u8; 32]>,
}

impl Canonical for Dependency {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        match self.kind {
            None => canon::put_u8(out, 0),
            Some(None) => canon::put_u8(out, 1),
            Some(Some(kind)) => {
                canon::put_u8(out, 2);
                canon::put_u8(out, kind.tag());
            }
        }
        match self.size_mode {
            None => canon::put_u8(out, 0),
            Some((size, mode)) => {
                canon::put_u8(out, 1);
                canon::put_u64(out, size);
                canon::put_u32(out, mode);
            }
        }
        canon::put_option(out, self.content.as_ref());
        match self.names {
            None => canon::put_u8(out, 0),
            Some(digest) => {
                canon::put_u8(out, 1);
                out.extend_from_slice(&digest);
            }
        }
    }
}

/// Every dependency of a run on the base, keyed by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSet {
    /// The dependencies, sorted by path.
    pub entries: BTreeMap<VPath, Dependency>,
}

impl ReadSet {
    /// The digest of the canonical encoding (count, then path and dependency per entry).
    pub fn digest(&self) -> ReadSetDigest {
        ReadSetDigest::digest(&self.to_canonical_bytes())
    }

    /// Number of paths with a dependency.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the run depended on nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The digest of a directory's child names, as recorded for a listing dependency.
/// Names are sorted bytewise; the encoding is a count then each name as a byte string.
pub fn names_digest<'a>(names: impl IntoIterator<Item = &'a str>) -> [u8; 32] {
    let mut sorted: Vec<&str> = names.into_iter().collect();
    sorted.sort_unstable();
    let mut out = Vec::new();
    canon::put_u64(&mut out, sorted.len() as u64);
    for name in sorted {
        canon::put_bytes(&mut out, name.as_bytes());
    }
    *blake3::Hasher::new_derive_key("vsh 2026 directory-names v1").update(&out).finalize().as_bytes()
}

impl Dependency {
    /// Decode the canonical form.
    pub fn decode_canonical(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let kind = match reader.u8()? {
            0 => None,
            1 => Some(None),
            2 => Some(Some(NodeKind::from_tag(reader.u8()?).ok_or_else(|| reader.invalid("dependency kind"))?)),
            _ => return Err(reader.invalid("dependency kind flag")),
        };
        let size_mode = if reader.flag("size-mode flag")? { Some((reader.u64()?, reader.u32()?)) } else { None };
        let content = if reader.flag("content flag")? { Some(BlobId::from_bytes(reader.array()?)) } else { None };
        let names = if reader.flag("names flag")? { Some(reader.array()?) } else { None };
        Ok(Self { kind, size_mode, content, names })
    }
}

impl ReadSet {
    /// Decode the canonical form written by [`ReadSet::encode_canonical`], with at
    /// most `max_entries` entries and `max_path_bytes` per path. Paths must be
    /// strictly increasing.
    pub fn decode_canonical(
        reader: &mut Reader<'_>,
        max_entries: u64,
        max_path_bytes: u64,
    ) -> Result<Self, DecodeError> {
        // Each entry needs at least a path length (8 bytes) and four flags.
        let count = reader.length(max_entries, 12)?;
        let mut entries = BTreeMap::new();
        let mut previous: Option<VPath> = None;
        for _ in 0..count {
            let raw = reader.bytes(max_path_bytes)?;
            let text = std::str::from_utf8(raw).map_err(|_| reader.invalid("read-set path utf-8"))?;
            let path = if text.is_empty() {
                VPath::root()
            } else {
                VPath::parse(text).map_err(|_| reader.invalid("read-set path"))?
            };
            if path.as_str() != text || previous.as_ref().is_some_and(|prev| *prev >= path) {
                return Err(reader.invalid("read-set path order"));
            }
            let dependency = Dependency::decode_canonical(reader)?;
            previous = Some(path.clone());
            entries.insert(path, dependency);
        }
        Ok(Self { entries })
    }
}

impl Canonical for ReadSet {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.entries.len() as u64);
        for (path, dependency) in &self.entries {
            path.encode_canonical(out);
            dependency.encode_canonical(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_set_round_trips_and_rejects_disorder() {
        let mut set = ReadSet::default();
        set.entries.insert(VPath::parse("b").unwrap(), Dependency { kind: Some(None), ..Dependency::default() });
        set.entries.insert(
            VPath::parse("a/x").unwrap(),
            Dependency {
                kind: Some(Some(NodeKind::File)),
                size_mode: Some((3, 0o644)),
                content: Some(BlobId::of(b"abc")),
                names: None,
            },
        );
        set.entries
            .insert(VPath::root(), Dependency { names: Some(names_digest(["a", "b"])), ..Dependency::default() });
        let bytes = set.to_canonical_bytes();
        let mut reader = Reader::new(&bytes);
        assert_eq!(ReadSet::decode_canonical(&mut reader, 16, 64).unwrap(), set);
        reader.finish().unwrap();
        assert!(ReadSet::decode_canonical(&mut Reader::new(&bytes), 2, 64).is_err());
        let mut swapped = Vec::new();
        canon::put_u64(&mut swapped, 2);
        VPath::parse("b").unwrap().encode_canonical(&mut swapped);
        Dependency::default().encode_canonical(&mut swapped);
        VPath::parse("a").unwrap().encode_canonical(&mut swapped);
        Dependency::default().encode_canonical(&mut swapped);
        assert!(ReadSet::decode_canonical(&mut Reader::new(&swapped), 16, 64).is_err());
    }
}
