//! [`NodeKind`] and [`NodeState`]: what a path holds.

use serde::{Deserialize, Serialize};

use crate::canon::{self, Canonical, DecodeError, Reader};
use crate::digest::BlobId;

/// The kind of a workspace node. Symlinks are opaque data: vsh never follows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link, kept as its target bytes.
    Symlink,
}

impl NodeKind {
    /// The canonical tag: File=1, Directory=2, Symlink=3.
    pub const fn tag(self) -> u8 {
        match self {
            Self::File => 1,
            Self::Directory => 2,
            Self::Symlink => 3,
        }
    }

    /// Decode a canonical tag.
    pub const fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            1 => Some(Self::File),
            2 => Some(Self::Directory),
            3 => Some(Self::Symlink),
            _ => None,
        }
    }

    /// A lower-case name for display.
    pub const fn name(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Directory => "directory",
            Self::Symlink => "symlink",
        }
    }
}

/// The state of one node: kind, size, permission bits and content digest.
///
/// - File: `size` is the byte length, `content` the [`BlobId`] of the bytes.
/// - Symlink: `size` is the target's length, `content` the [`BlobId`] of the target
///   bytes, `mode` is always `0o777`.
/// - Directory: `size` is 0 and `content` is `None` (a directory's state does not
///   include its children; each child has its own state).
///
/// Times, inode numbers and owners are deliberately not part of the state: two
/// nodes with equal bytes and mode are the same state.
///
/// Canonical encoding: kind tag `u8`, size `u64`, mode `u32`, then an optional
/// 32-byte content digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeState {
    /// The node's kind.
    pub kind: NodeKind,
    /// Byte length (files, symlink targets); 0 for directories.
    pub size: u64,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
    /// Digest of the content (files, symlink targets).
    pub content: Option<BlobId>,
}

/// The permission bits vsh tracks.
pub const MODE_MASK: u32 = 0o7777;

impl NodeState {
    /// A regular file.
    pub fn file(size: u64, mode: u32, content: BlobId) -> Self {
        Self { kind: NodeKind::File, size, mode: mode & MODE_MASK, content: Some(content) }
    }

    /// A regular file with the given bytes.
    pub fn file_with(bytes: &[u8], mode: u32) -> Self {
        Self::file(bytes.len() as u64, mode, BlobId::of(bytes))
    }

    /// A directory.
    pub fn directory(mode: u32) -> Self {
        Self { kind: NodeKind::Directory, size: 0, mode: mode & MODE_MASK, content: None }
    }

    /// A symlink whose target bytes are `target`.
    pub fn symlink(target: &[u8]) -> Self {
        Self { kind: NodeKind::Symlink, size: target.len() as u64, mode: 0o777, content: Some(BlobId::of(target)) }
    }

    /// Whether the two states differ only in mode.
    pub fn same_content(&self, other: &NodeState) -> bool {
        self.kind == other.kind && self.size == other.size && self.content == other.content
    }

    /// Decode the canonical form.
    pub fn decode_canonical(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let kind = NodeKind::from_tag(reader.u8()?).ok_or_else(|| reader.invalid("node kind"))?;
        let size = reader.u64()?;
        let mode = reader.u32()?;
        if mode & !MODE_MASK != 0 {
            return Err(reader.invalid("node mode"));
        }
        let content = if reader.flag("content flag")? { Some(BlobId::from_bytes(reader.array()?)) } else { None };
        let state = Self { kind, size, mode, content };
        state.check().map_err(|_| reader.invalid("node state"))?;
        Ok(state)
    }

    /// The one check of a state's shape, wherever a state comes from (a
    /// decoded record, a diff given to the committer): permission bits within
    /// [`MODE_MASK`]; a file or symlink carries its content digest; a symlink's
    /// mode is `0o777`; a directory has no content and size 0. The error says
    /// which rule the state breaks.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.mode & !MODE_MASK != 0 {
            return Err("mode has bits outside 0o7777");
        }
        match self.kind {
            NodeKind::File if self.content.is_none() => Err("a file state has no content digest"),
            NodeKind::Symlink if self.content.is_none() => Err("a symlink state has no content digest"),
            NodeKind::Symlink if self.mode != 0o777 => Err("a symlink state has a mode other than 0o777"),
            NodeKind::Directory if self.content.is_some() || self.size != 0 => Err("a directory state has content"),
            _ => Ok(()),
        }
    }
}

impl Canonical for NodeState {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u8(out, self.kind.tag());
        canon::put_u64(out, self.size);
        canon::put_u32(out, self.mode);
        canon::put_option(out, self.content.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_state_with_another_mode_does_not_decode() {
        let bad = NodeState { mode: 0o755, ..NodeState::symlink(b"target") };
        assert_eq!(bad.check(), Err("a symlink state has a mode other than 0o777"));
        let mut bytes = Vec::new();
        bad.encode_canonical(&mut bytes);
        assert!(NodeState::decode_canonical(&mut Reader::new(&bytes)).is_err());
        let good = NodeState::symlink(b"target");
        let mut bytes = Vec::new();
        good.encode_canonical(&mut bytes);
        assert_eq!(NodeState::decode_canonical(&mut Reader::new(&bytes)).unwrap(), good);
    }

    #[test]
    fn canonical_round_trip() {
        for state in [NodeState::file_with(b"hi", 0o644), NodeState::directory(0o755), NodeState::symlink(b"../x")] {
            let bytes = state.to_canonical_bytes();
            let mut reader = Reader::new(&bytes);
            assert_eq!(NodeState::decode_canonical(&mut reader).unwrap(), state);
            reader.finish().unwrap();
        }
    }

    #[test]
    fn inconsistent_states_are_rejected() {
        let mut bytes = NodeState::directory(0o755).to_canonical_bytes();
        bytes[0] = NodeKind::File.tag();
        assert!(NodeState::decode_canonical(&mut Reader::new(&bytes)).is_err());
    }
}
