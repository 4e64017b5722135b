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

/// Which version of a file a state means, when its bytes were never read: the
/// file's identity (device and inode) and its modification and status-change
/// times, as `lstat` reported them.
///
/// A delete of a file the run never read records this instead of a content
/// digest (BRIEF §3), so removing a tree does not read and hash every file in
/// it. The status-change time moves on every write, truncate, chmod, link and
/// rename and cannot be set by a program, so a live file with the same stamp
/// (and size and mode) is the version that was observed, provided the stamp
/// was taken once the clock had moved past the file's last change: the
/// virtual filesystem records a stamp only then (see `vsh_vfs`), and hashes
/// the file otherwise.
///
/// Canonical encoding: `dev` `u64`, `ino` `u64`, `mtime_ns` and `ctime_ns`
/// as `i64` (two's complement, little-endian), 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileStamp {
    /// `st_dev` of the file.
    pub dev: u64,
    /// `st_ino` of the file.
    pub ino: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Status-change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
}

impl FileStamp {
    fn encode(&self, out: &mut Vec<u8>) {
        canon::put_u64(out, self.dev);
        canon::put_u64(out, self.ino);
        canon::put_u64(out, self.mtime_ns.cast_unsigned());
        canon::put_u64(out, self.ctime_ns.cast_unsigned());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            dev: reader.u64()?,
            ino: reader.u64()?,
            mtime_ns: reader.u64()?.cast_signed(),
            ctime_ns: reader.u64()?.cast_signed(),
        })
    }
}

/// The state of one node: kind, size, permission bits and content digest.
///
/// - File: `size` is the byte length, `content` the [`BlobId`] of the bytes;
///   or, for the before state of a file deleted without being read, no
///   digest but a [`FileStamp`] naming the version that was deleted.
/// - Symlink: `size` is the target's length, `content` the [`BlobId`] of the target
///   bytes, `mode` is always `0o777`.
/// - Directory: `size` is 0 and `content` is `None` (a directory's state does not
///   include its children; each child has its own state).
///
/// Times, inode numbers and owners are deliberately not part of a state that
/// carries a digest: two nodes with equal bytes and mode are the same state.
///
/// Canonical encoding: kind tag `u8`, size `u64`, mode `u32`, then a tag `u8`:
/// 0 nothing, 1 a 32-byte content digest, 2 a [`FileStamp`] (32 bytes). States
/// with a digest or with nothing encode exactly as before stamps existed.
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
    /// The version of a file whose content was not read (then `content` is
    /// `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp: Option<FileStamp>,
}

/// The permission bits vsh tracks.
pub const MODE_MASK: u32 = 0o7777;

impl NodeState {
    /// A regular file.
    pub fn file(size: u64, mode: u32, content: BlobId) -> Self {
        Self { kind: NodeKind::File, size, mode: mode & MODE_MASK, content: Some(content), stamp: None }
    }

    /// A regular file known by its [`FileStamp`], its bytes unread.
    pub fn unread_file(size: u64, mode: u32, stamp: FileStamp) -> Self {
        Self { kind: NodeKind::File, size, mode: mode & MODE_MASK, content: None, stamp: Some(stamp) }
    }

    /// A regular file with the given bytes.
    pub fn file_with(bytes: &[u8], mode: u32) -> Self {
        Self::file(bytes.len() as u64, mode, BlobId::of(bytes))
    }

    /// A directory.
    pub fn directory(mode: u32) -> Self {
        Self { kind: NodeKind::Directory, size: 0, mode: mode & MODE_MASK, content: None, stamp: None }
    }

    /// A symlink whose target bytes are `target`.
    pub fn symlink(target: &[u8]) -> Self {
        Self {
            kind: NodeKind::Symlink,
            size: target.len() as u64,
            mode: 0o777,
            content: Some(BlobId::of(target)),
            stamp: None,
        }
    }

    /// Whether the two states have the same kind and content (they may
    /// differ in mode). Two unread files have the same content only if they
    /// are the same version of the same file (equal stamps).
    pub fn same_content(&self, other: &NodeState) -> bool {
        self.kind == other.kind && self.size == other.size && self.content == other.content && self.stamp == other.stamp
    }

    /// Decode the canonical form.
    pub fn decode_canonical(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let kind = NodeKind::from_tag(reader.u8()?).ok_or_else(|| reader.invalid("node kind"))?;
        let size = reader.u64()?;
        let mode = reader.u32()?;
        if mode & !MODE_MASK != 0 {
            return Err(reader.invalid("node mode"));
        }
        let (content, stamp) = match reader.u8()? {
            0 => (None, None),
            1 => (Some(BlobId::from_bytes(reader.array()?)), None),
            2 => (None, Some(FileStamp::decode(reader)?)),
            _ => return Err(reader.invalid("content tag")),
        };
        let state = Self { kind, size, mode, content, stamp };
        state.check().map_err(|_| reader.invalid("node state"))?;
        Ok(state)
    }

    /// The one check of a state's shape, wherever a state comes from (a
    /// decoded record, a diff given to the committer): permission bits within
    /// [`MODE_MASK`]; a file carries its content digest or (unread) a stamp,
    /// never both; a symlink carries its content digest and no stamp, and its
    /// mode is `0o777`; a directory has no content, no stamp and size 0. The
    /// error says which rule the state breaks.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.mode & !MODE_MASK != 0 {
            return Err("mode has bits outside 0o7777");
        }
        match self.kind {
            NodeKind::File if self.content.is_none() && self.stamp.is_none() => {
                Err("a file state has no content digest")
            }
            NodeKind::File if self.content.is_some() && self.stamp.is_some() => {
                Err("a file state has both a content digest and a stamp")
            }
            NodeKind::Symlink if self.content.is_none() => Err("a symlink state has no content digest"),
            NodeKind::Symlink if self.stamp.is_some() => Err("a symlink state has a stamp"),
            NodeKind::Symlink if self.mode != 0o777 => Err("a symlink state has a mode other than 0o777"),
            NodeKind::Directory if self.content.is_some() || self.stamp.is_some() || self.size != 0 => {
                Err("a directory state has content")
            }
            _ => Ok(()),
        }
    }
}

impl Canonical for NodeState {
    fn encode_canonical(&self, out: &mut Vec<u8>) {
        canon::put_u8(out, self.kind.tag());
        canon::put_u64(out, self.size);
        canon::put_u32(out, self.mode);
        match (&self.content, &self.stamp) {
            (Some(digest), _) => {
                canon::put_u8(out, 1);
                digest.encode_canonical(out);
            }
            (None, Some(stamp)) => {
                canon::put_u8(out, 2);
                stamp.encode(out);
            }
            (None, None) => canon::put_u8(out, 0),
        }
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

    const STAMP: FileStamp = FileStamp { dev: 0x801, ino: 42, mtime_ns: 1_700_000_000_123_456_789, ctime_ns: -5 };

    #[test]
    fn an_unread_file_round_trips_and_digest_states_keep_their_bytes() {
        let unread = NodeState::unread_file(7, 0o644, STAMP);
        assert_eq!(unread.check(), Ok(()));
        let bytes = unread.to_canonical_bytes();
        // kind, size, mode, tag 2, then dev, ino, mtime, ctime.
        assert_eq!(bytes.len(), 1 + 8 + 4 + 1 + 32);
        assert_eq!(bytes[13], 2);
        assert_eq!(&bytes[14..22], &0x801u64.to_le_bytes());
        assert_eq!(&bytes[38..46], &(-5i64).to_le_bytes());
        let mut reader = Reader::new(&bytes);
        assert_eq!(NodeState::decode_canonical(&mut reader).unwrap(), unread);
        reader.finish().unwrap();
        // A state with a digest encodes as it did before stamps: tag 1 and
        // the 32 digest bytes, so stored diffs keep their digests.
        let file = NodeState::file_with(b"hi", 0o644);
        let bytes = file.to_canonical_bytes();
        assert_eq!(bytes.len(), 1 + 8 + 4 + 1 + 32);
        assert_eq!(bytes[13], 1);
        assert_eq!(&bytes[14..], BlobId::of(b"hi").as_bytes());
        assert_eq!(NodeState::directory(0o755).to_canonical_bytes()[13..], [0]);
        // An unknown tag is refused.
        let mut bad = unread.to_canonical_bytes();
        bad[13] = 3;
        assert!(NodeState::decode_canonical(&mut Reader::new(&bad)).is_err());
    }

    #[test]
    fn a_stamp_only_belongs_to_a_file_without_a_digest() {
        let both = NodeState { stamp: Some(STAMP), ..NodeState::file_with(b"x", 0o644) };
        assert_eq!(both.check(), Err("a file state has both a content digest and a stamp"));
        let link = NodeState { stamp: Some(STAMP), ..NodeState::symlink(b"t") };
        assert_eq!(link.check(), Err("a symlink state has a stamp"));
        let dir = NodeState { stamp: Some(STAMP), ..NodeState::directory(0o755) };
        assert_eq!(dir.check(), Err("a directory state has content"));
        for bad in [link, dir] {
            let mut bytes = Vec::new();
            canon::put_u8(&mut bytes, bad.kind.tag());
            canon::put_u64(&mut bytes, bad.size);
            canon::put_u32(&mut bytes, bad.mode);
            canon::put_u8(&mut bytes, 2);
            STAMP.encode(&mut bytes);
            assert!(NodeState::decode_canonical(&mut Reader::new(&bytes)).is_err(), "{bad:?}");
        }
        // Two unread files are the same content only as the same version.
        let unread = NodeState::unread_file(7, 0o644, STAMP);
        assert!(unread.same_content(&NodeState { mode: 0o600, ..unread }));
        let other = NodeState::unread_file(7, 0o644, FileStamp { ctime_ns: 6, ..STAMP });
        assert!(!unread.same_content(&other));
    }

    #[test]
    fn inconsistent_states_are_rejected() {
        let mut bytes = NodeState::directory(0o755).to_canonical_bytes();
        bytes[0] = NodeKind::File.tag();
        assert!(NodeState::decode_canonical(&mut Reader::new(&bytes)).is_err());
    }
}
