//! [`KeyedIndex`]: the file layout the data directory's small keyed
//! indexes share ([`crate::UnreadContents`], [`crate::SeenContents`]): a
//! magic, an entry count, fixed-size entries oldest first (a 32-byte key and
//! a value of `V` bytes), and a MAC under the authority key over all of it.
//! Each index names its own magic, MAC domain, bound and error
//! ([`IndexFormat`]); a file that fails any check is that error.

use vsh_types::AuthorityKey;

use crate::{DataDir, StoreError};

/// What tells one index's file from another's.
pub(crate) struct IndexFormat {
    /// The settings file that holds it.
    pub(crate) file: &'static str,
    /// Its first eight bytes.
    pub(crate) magic: &'static [u8; 8],
    /// The MAC's derivation context.
    pub(crate) mac_domain: &'static str,
    /// The most entries it holds; the oldest go first.
    pub(crate) max_entries: usize,
    /// The error a file that does not verify or decode is, with why.
    pub(crate) corrupt: fn(&'static str) -> StoreError,
}

/// Magic and entry count.
const HEADER: usize = 8 + 4;
const KEY: usize = 32;
const TAG: usize = 32;

impl IndexFormat {
    /// The largest file an index of `V`-byte values may be.
    pub(crate) const fn max_bytes<const V: usize>(&self) -> u64 {
        (HEADER + self.max_entries * (KEY + V) + TAG) as u64
    }
}

/// Entries of a 32-byte key and a `V`-byte value, oldest first, one per key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyedIndex<const V: usize> {
    entries: Vec<([u8; KEY], [u8; V])>,
}

impl<const V: usize> Default for KeyedIndex<V> {
    fn default() -> Self {
        Self { entries: Vec::new() }
    }
}

impl<const V: usize> KeyedIndex<V> {
    /// The value under `key`.
    pub(crate) fn get(&self, key: &[u8; KEY]) -> Option<&[u8; V]> {
        self.entries.iter().rev().find(|(known, _)| known == key).map(|(_, value)| value)
    }

    /// Put `value` under `key` as the newest entry, dropping the oldest past
    /// `max_entries`; whether anything changed (the same value under the
    /// same key as the newest entry already changes nothing).
    pub(crate) fn insert(&mut self, key: [u8; KEY], value: [u8; V], max_entries: usize) -> bool {
        if self.entries.last().is_some_and(|(known, held)| *known == key && *held == value) {
            return false;
        }
        self.entries.retain(|(known, _)| *known != key);
        self.entries.push((key, value));
        if self.entries.len() > max_entries {
            let over = self.entries.len() - max_entries;
            self.entries.drain(..over);
        }
        true
    }

    /// How many entries it holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The values, oldest first.
    pub(crate) fn values(&self) -> impl Iterator<Item = &[u8; V]> + '_ {
        self.entries.iter().map(|(_, value)| value)
    }

    /// The file's bytes: the magic, the count (`u32`, little-endian), each
    /// entry oldest first (key, value), then the MAC under `key` over all
    /// of it.
    pub(crate) fn encode(&self, format: &IndexFormat, key: &AuthorityKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.entries.len() * (KEY + V) + TAG);
        out.extend_from_slice(format.magic);
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for (entry, value) in &self.entries {
            out.extend_from_slice(entry);
            out.extend_from_slice(value);
        }
        let tag = key.mac(format.mac_domain).update(&out).finalize();
        out.extend_from_slice(&tag);
        out
    }

    /// Decode and verify what [`KeyedIndex::encode`] wrote under `key`;
    /// anything else is the format's error.
    pub(crate) fn decode(bytes: &[u8], format: &IndexFormat, key: &AuthorityKey) -> Result<Self, StoreError> {
        let corrupt = format.corrupt;
        if bytes.len() < HEADER + TAG || bytes.len() as u64 > format.max_bytes::<V>() {
            return Err(corrupt("its length is out of bounds"));
        }
        let (body, tag) = bytes.split_at(bytes.len() - TAG);
        if !key.mac(format.mac_domain).update(body).verify(tag) {
            return Err(corrupt("its MAC under the authority key does not verify"));
        }
        let (magic, rest) = body.split_at(8);
        if magic != format.magic {
            return Err(corrupt("its magic is not this index's"));
        }
        let (count, rest) = rest.split_at(4);
        let count = u32::from_le_bytes(count.try_into().map_err(|_| corrupt("it is cut short"))?) as usize;
        if count > format.max_entries || rest.len() != count * (KEY + V) {
            return Err(corrupt("its entry count does not match its length"));
        }
        let entries = rest
            .chunks_exact(KEY + V)
            .map(|entry| {
                let (key, value) = entry.split_at(KEY);
                (key.try_into().expect("32 bytes"), value.try_into().expect("V bytes"))
            })
            .collect();
        Ok(Self { entries })
    }

    /// What `data` holds (none where it holds no file).
    pub(crate) fn read(data: &DataDir, format: &IndexFormat, key: &AuthorityKey) -> Result<Self, StoreError> {
        match data.read_setting(format.file, format.max_bytes::<V>())? {
            Some(bytes) => Self::decode(&bytes, format, key),
            None => Ok(Self::default()),
        }
    }

    /// Replace what `data` holds with this, whole and unsynced (as the loss
    /// history is written: a machine crash may leave the one before, or one
    /// whose MAC fails and is refused).
    pub(crate) fn write(&self, data: &DataDir, format: &IndexFormat, key: &AuthorityKey) -> Result<(), StoreError> {
        data.write_setting_unsynced(format.file, &self.encode(format, key))
    }
}

/// The file methods of a type that wraps a [`KeyedIndex`] of `$value`-byte
/// values in a field `index`, under the format `$format`: `len`,
/// `is_empty`, `encode`,
/// `decode` (anything else is the format's error), `read` (none where the
/// data directory holds no file) and `write` (whole and unsynced, as the
/// loss history is written: a machine crash may leave the one before, or
/// one whose MAC fails and is refused).
macro_rules! index_file {
    ($name:ident, $format:expr, $value:literal) => {
        impl $name {
            /// How many entries it holds.
            pub fn len(&self) -> usize {
                self.index.len()
            }

            /// Whether it holds none.
            pub fn is_empty(&self) -> bool {
                self.index.len() == 0
            }

            /// The file's bytes: the magic, the count (`u32`,
            /// little-endian), each entry oldest first, then the MAC under
            /// `key` over all of it (`docs/store-format.md`).
            pub fn encode(&self, key: &AuthorityKey) -> Vec<u8> {
                self.index.encode(&$format, key)
            }

            /// Decode and verify what `encode` wrote under `key`; anything
            /// else is this index's corruption error.
            pub fn decode(bytes: &[u8], key: &AuthorityKey) -> Result<Self, StoreError> {
                Ok(Self { index: crate::index::KeyedIndex::<$value>::decode(bytes, &$format, key)? })
            }

            /// What `data` holds (none where it holds no file).
            pub fn read(data: &DataDir, key: &AuthorityKey) -> Result<Self, StoreError> {
                Ok(Self { index: crate::index::KeyedIndex::<$value>::read(data, &$format, key)? })
            }

            /// Replace what `data` holds with this, whole and unsynced (a
            /// machine crash may leave the one before, or one whose MAC
            /// fails and is refused).
            pub fn write(&self, data: &DataDir, key: &AuthorityKey) -> Result<(), StoreError> {
                self.index.write(data, &$format, key)
            }
        }
    };
}
pub(crate) use index_file;
