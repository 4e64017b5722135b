//! [`LossHistory`]: what unreviewed commits took from each file since a
//! reviewer last saw it, so that a cut made in auto-approved steps is judged
//! as the one cut it adds up to (sec59 F1).
//!
//! A workspace keeps one, in the settings file [`LOSS_HISTORY_FILE`] of its
//! data directory (format in `docs/store-format.md`, "Loss history"). An
//! entry names a file, the content an unreviewed commit left there, its size
//! when a reviewer last saw it and the bytes lost since. It speaks for the
//! file only while the file holds that content: a change made anywhere else
//! (the user's editor, `git checkout`) is someone's own, and starts afresh.
//! Commits write it after they land, under the commit lock; runs read it.

use std::collections::BTreeMap;

use vsh_types::{AuthorityKey, BlobId, VPath};

use crate::{DataDir, StoreError};

/// The settings file that holds a workspace's loss history.
pub const LOSS_HISTORY_FILE: &str = "loss-history";

/// The most files a history holds.
pub const MAX_LOSS_ENTRIES: usize = 100_000;

/// The longest a path in it may be, in bytes.
const MAX_PATH_BYTES: usize = 4_096;

/// The largest file a history may be: every entry at its longest.
pub const MAX_LOSS_HISTORY_BYTES: u64 = (HEADER + TAG + MAX_LOSS_ENTRIES * (ENTRY_FIXED + MAX_PATH_BYTES)) as u64;

const MAGIC: &[u8; 8] = b"VSHLOS01";
const MAC_DOMAIN: &str = "vsh 2026 loss history v1";
/// Magic and entry count.
const HEADER: usize = 8 + 4;
/// Path length, content, reviewed content, reviewed size, lost bytes.
const ENTRY_FIXED: usize = 2 + 32 + 32 + 8 + 8;
const TAG: usize = 32;

/// What unreviewed commits took from one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnreviewedLoss {
    /// The content the last unreviewed commit left in the file.
    pub content: BlobId,
    /// The file's content when a reviewer last saw it (its digest).
    pub reviewed: BlobId,
    /// The file's size when a reviewer last saw it.
    pub reviewed_size: u64,
    /// Bytes of that content the unreviewed commits since removed.
    pub lost: u64,
}

/// A workspace's loss history: for each file an auto-approved commit
/// modified, what the unreviewed commits since a reviewer last saw it took.
/// An entry speaks for its file only while the file holds the content it
/// names. Kept in [`LOSS_HISTORY_FILE`], MAC'd under the authority key
/// (format in `docs/store-format.md`, "Loss history").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LossHistory {
    entries: BTreeMap<VPath, UnreviewedLoss>,
}

impl LossHistory {
    /// What unreviewed commits took from `path`, if it still holds `content`,
    /// the content the last of them left there.
    pub fn get(&self, path: &VPath, content: BlobId) -> Option<UnreviewedLoss> {
        self.entries.get(path).filter(|loss| loss.content == content).copied()
    }

    /// Whether it holds an entry for `path`, whatever its content.
    pub fn contains(&self, path: &VPath) -> bool {
        self.entries.contains_key(path)
    }

    /// Record `loss` for `path`, replacing what it held.
    pub fn set(&mut self, path: VPath, loss: UnreviewedLoss) {
        self.entries.insert(path, loss);
    }

    /// Forget `path` (a reviewer saw what it holds now, or it is gone).
    pub fn remove(&mut self, path: &VPath) {
        self.entries.remove(path);
    }

    /// The content a reviewer last saw of each file it holds (what garbage
    /// collection keeps, for runs to measure against).
    pub fn reviewed_contents(&self) -> impl Iterator<Item = BlobId> + '_ {
        self.entries.values().map(|loss| loss.reviewed)
    }

    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether it holds [`MAX_LOSS_ENTRIES`] files: no more can be added.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= MAX_LOSS_ENTRIES
    }

    /// The file's bytes: the magic, the count, each entry in path order
    /// (path length `u16`, path, content, reviewed content, reviewed size
    /// `u64`, lost `u64`, little-endian), then the MAC under `key` over all
    /// of it.
    pub fn encode(&self, key: &AuthorityKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + TAG + self.entries.len() * (ENTRY_FIXED + 32));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for (path, loss) in &self.entries {
            let name = path.as_str().as_bytes();
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(loss.content.as_bytes());
            out.extend_from_slice(loss.reviewed.as_bytes());
            out.extend_from_slice(&loss.reviewed_size.to_le_bytes());
            out.extend_from_slice(&loss.lost.to_le_bytes());
        }
        let tag = key.mac(MAC_DOMAIN).update(&out).finalize();
        out.extend_from_slice(&tag);
        out
    }

    /// Decode and verify a history [`LossHistory::encode`] wrote under `key`;
    /// anything else is [`StoreError::CorruptLossHistory`].
    pub fn decode(bytes: &[u8], key: &AuthorityKey) -> Result<Self, StoreError> {
        let corrupt = |reason| StoreError::CorruptLossHistory { reason };
        if bytes.len() < HEADER + TAG || bytes.len() as u64 > MAX_LOSS_HISTORY_BYTES {
            return Err(corrupt("its length is out of bounds"));
        }
        let (body, tag) = bytes.split_at(bytes.len() - TAG);
        if !key.mac(MAC_DOMAIN).update(body).verify(tag) {
            return Err(corrupt("its MAC under the authority key does not verify"));
        }
        let mut reader = Reader { bytes: body };
        if reader.take(8) != Some(&MAGIC[..]) {
            return Err(corrupt("its magic is not VSHLOS01"));
        }
        let count = reader.u32().ok_or(corrupt("it is cut short"))? as usize;
        if count > MAX_LOSS_ENTRIES {
            return Err(corrupt("it holds more entries than a history may"));
        }
        let mut history = Self::default();
        let mut previous: Option<VPath> = None;
        for _ in 0..count {
            let length = usize::from(reader.u16().ok_or(corrupt("it is cut short"))?);
            let name = reader.take(length).ok_or(corrupt("it is cut short"))?;
            // Spelled as the path spells itself: one file, one spelling.
            let path = std::str::from_utf8(name)
                .ok()
                .filter(|_| length <= MAX_PATH_BYTES)
                .and_then(|name| VPath::parse(name).ok().filter(|path| path.as_str() == name))
                .filter(|path| !path.is_root())
                .ok_or(corrupt("an entry's path is not a workspace path"))?;
            if previous.as_ref().is_some_and(|previous| *previous >= path) {
                return Err(corrupt("its entries are not in strictly increasing path order"));
            }
            let content = BlobId::from_bytes(reader.array().ok_or(corrupt("it is cut short"))?);
            let reviewed = BlobId::from_bytes(reader.array().ok_or(corrupt("it is cut short"))?);
            let reviewed_size = reader.u64().ok_or(corrupt("it is cut short"))?;
            let lost = reader.u64().ok_or(corrupt("it is cut short"))?;
            history.entries.insert(path.clone(), UnreviewedLoss { content, reviewed, reviewed_size, lost });
            previous = Some(path);
        }
        if !reader.bytes.is_empty() {
            return Err(corrupt("bytes follow its last entry"));
        }
        Ok(history)
    }

    /// The history `data` holds (an empty one where it holds none).
    pub fn read(data: &DataDir, key: &AuthorityKey) -> Result<Self, StoreError> {
        match data.read_setting(LOSS_HISTORY_FILE, MAX_LOSS_HISTORY_BYTES)? {
            Some(bytes) => Self::decode(&bytes, key),
            None => Ok(Self::default()),
        }
    }

    /// Replace the history `data` holds with this one, whole and unsynced
    /// ([`DataDir::write_setting_unsynced`]: a commit pays no `fsync` for
    /// it; after a machine crash the file may be the one before, or fail its
    /// MAC and be refused), or, where the directory refuses the replacement,
    /// written over in place ([`DataDir::overwrite_setting_unsynced`]: a
    /// reader or a crash meanwhile may find it cut short, and refuse it). An
    /// empty history is written too. On failure, the replacement's error.
    pub fn write(&self, data: &DataDir, key: &AuthorityKey) -> Result<(), StoreError> {
        let bytes = self.encode(key);
        // Kept even when empty, so that a directory that later refuses new
        // entries (made immutable, out of inodes) still has a file to write
        // over in place (sec65 L1: the update was lost, and the next cut
        // started afresh).
        match data.write_setting_unsynced(LOSS_HISTORY_FILE, &bytes) {
            Ok(()) => Ok(()),
            Err(error) => data.overwrite_setting_unsynced(LOSS_HISTORY_FILE, &bytes).map_err(|_| error),
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < count {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        Some(taken)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> AuthorityKey {
        AuthorityKey::from_bytes([byte; 32])
    }

    fn sample() -> LossHistory {
        let mut history = LossHistory::default();
        let loss = |seed: &[u8], reviewed_size, lost| UnreviewedLoss {
            content: BlobId::of(seed),
            reviewed: BlobId::of(&[seed, b" as reviewed"].concat()),
            reviewed_size,
            lost,
        };
        history.set(VPath::parse("src/b.py").unwrap(), loss(b"b", 1_500, 749));
        history.set(VPath::parse("src/a.py").unwrap(), loss(b"a", 10, 3));
        history.set(VPath::parse("caf\u{e9}/\u{1f600}").unwrap(), loss(b"c", u64::MAX, u64::MAX));
        history
    }

    #[test]
    fn a_history_round_trips_and_speaks_only_for_the_content_it_names() {
        let history = sample();
        let bytes = history.encode(&key(1));
        assert_eq!(&bytes[..8], b"VSHLOS01");
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 3);
        // The documented layout: the first entry (in path order) follows the count.
        let first = "caf\u{e9}/\u{1f600}".as_bytes();
        assert_eq!(u16::from_le_bytes(bytes[12..14].try_into().unwrap()) as usize, first.len());
        assert_eq!(&bytes[14..14 + first.len()], first);
        assert_eq!(bytes.len(), HEADER + TAG + 3 * ENTRY_FIXED + first.len() + 2 * "src/a.py".len());
        let decoded = LossHistory::decode(&bytes, &key(1)).unwrap();
        assert_eq!(decoded, history);
        let path = VPath::parse("src/b.py").unwrap();
        assert_eq!(decoded.get(&path, BlobId::of(b"b")).map(|loss| loss.lost), Some(749));
        assert_eq!(decoded.get(&path, BlobId::of(b"changed since")), None, "another content starts afresh");
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        let bytes = sample().encode(&key(1));
        for at in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[at / 8] ^= 1 << (at % 8);
            assert!(
                matches!(LossHistory::decode(&flipped, &key(1)), Err(StoreError::CorruptLossHistory { .. })),
                "bit {at}"
            );
        }
        for length in 0..bytes.len() {
            assert!(LossHistory::decode(&bytes[..length], &key(1)).is_err(), "cut at {length}");
        }
        assert!(LossHistory::decode(&bytes, &key(2)).is_err(), "another key's history is not this one's");
    }

    #[test]
    fn entries_out_of_order_or_with_bad_paths_are_refused_even_under_the_key() {
        let sealed = |body: Vec<u8>| {
            let mut bytes = body;
            let tag = key(1).mac(MAC_DOMAIN).update(&bytes).finalize();
            bytes.extend_from_slice(&tag);
            bytes
        };
        let entry = |name: &str| {
            let mut out = (name.len() as u16).to_le_bytes().to_vec();
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&[0; 80]);
            out
        };
        let body = |names: &[&str]| {
            let mut out = MAGIC.to_vec();
            out.extend_from_slice(&(names.len() as u32).to_le_bytes());
            for name in names {
                out.extend(entry(name));
            }
            out
        };
        assert!(LossHistory::decode(&sealed(body(&["a", "b"])), &key(1)).is_ok());
        for names in [&["b", "a"][..], &["a", "a"], &["../x"], &["/abs"], &[""], &["a//b"]] {
            assert!(LossHistory::decode(&sealed(body(names)), &key(1)).is_err(), "{names:?}");
        }
        let mut trailing = body(&["a"]);
        trailing.push(0);
        assert!(LossHistory::decode(&sealed(trailing), &key(1)).is_err());
    }

    #[test]
    fn a_history_is_read_back_from_the_data_directory_and_an_empty_one_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open_external(dir.path()).unwrap();
        assert!(LossHistory::read(&data, &key(1)).unwrap().is_empty());
        sample().write(&data, &key(1)).unwrap();
        assert_eq!(LossHistory::read(&data, &key(1)).unwrap(), sample());
        // Kept, empty: a file to write over in place later (sec65 L1).
        LossHistory::default().write(&data, &key(1)).unwrap();
        assert!(dir.path().join(LOSS_HISTORY_FILE).is_file());
        assert!(LossHistory::read(&data, &key(1)).unwrap().is_empty());
        std::fs::write(dir.path().join(LOSS_HISTORY_FILE), b"planted").unwrap();
        assert!(matches!(LossHistory::read(&data, &key(1)), Err(StoreError::CorruptLossHistory { .. })));
    }
}
