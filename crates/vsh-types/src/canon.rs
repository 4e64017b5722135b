//! The canonical byte encoding used for everything vsh hashes or persists.
//!
//! The encoding is deliberately simple and fixed-width so that it is trivially
//! deterministic and can be decoded with bounds checked before any allocation:
//!
//! | value | bytes |
//! |---|---|
//! | `u8` / tag | 1 byte |
//! | `u32` | 4 bytes, little endian |
//! | `u64` | 8 bytes, little endian |
//! | byte string | `u64` length, then the bytes |
//! | `Option<T>` | `0`, or `1` followed by `T` |
//! | sequence | `u64` count, then each element |
//!
//! Types with a canonical form implement [`Canonical`].

/// A value with a canonical, deterministic byte encoding.
pub trait Canonical {
    /// Append the canonical encoding of `self` to `out`.
    fn encode_canonical(&self, out: &mut Vec<u8>);

    /// The canonical encoding as a fresh vector.
    fn to_canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_canonical(&mut out);
        out
    }
}

/// Append one byte.
pub fn put_u8(out: &mut Vec<u8>, value: u8) {
    out.push(value);
}

/// Append a little-endian `u32`.
pub fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Append a little-endian `u64`.
pub fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Append a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u64(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Append an optional value: `0`, or `1` and the value.
pub fn put_option<T: Canonical>(out: &mut Vec<u8>, value: Option<&T>) {
    match value {
        None => put_u8(out, 0),
        Some(inner) => {
            put_u8(out, 1);
            inner.encode_canonical(out);
        }
    }
}

/// Append a counted sequence.
pub fn put_seq<'a, T: Canonical + 'a>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = &'a T>) {
    put_u64(out, items.len() as u64);
    for item in items {
        item.encode_canonical(out);
    }
}

/// Errors from [`Reader`]: the input ended early or held an invalid value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before the value was complete.
    #[error("input truncated: needed {needed} more bytes at offset {offset}")]
    Truncated {
        /// Offset where the read started.
        offset: usize,
        /// Bytes that were missing.
        needed: usize,
    },
    /// A length field asked for more than the remaining input or the caller's bound.
    #[error("length {length} at offset {offset} exceeds the bound {bound}")]
    LengthOutOfBounds {
        /// Offset of the length field.
        offset: usize,
        /// The declared length.
        length: u64,
        /// The largest length that was acceptable.
        bound: u64,
    },
    /// A tag or field held a value outside its domain.
    #[error("invalid {what} at offset {offset}")]
    Invalid {
        /// What was being decoded.
        what: &'static str,
        /// Offset of the invalid field.
        offset: usize,
    },
    /// Bytes were left over after the value.
    #[error("{remaining} trailing bytes after the value")]
    Trailing {
        /// Bytes left over.
        remaining: usize,
    },
}

/// A bounds-checked cursor over canonical bytes. Every length is checked against
/// the remaining input before anything is allocated.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    /// Start reading at the beginning of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, offset: 0 }
    }

    /// The current offset.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    /// Fail unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            remaining => Err(DecodeError::Trailing { remaining }),
        }
    }

    /// Take exactly `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated { offset: self.offset, needed: n - self.remaining() });
        }
        let slice = &self.bytes[self.offset..self.offset + n];
        self.offset += n;
        Ok(slice)
    }

    /// Take a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// Read one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// Read a little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// Read a little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Read a length field and check it against `bound` and the remaining input
    /// (each element needs at least `min_element_bytes`).
    pub fn length(&mut self, bound: u64, min_element_bytes: usize) -> Result<usize, DecodeError> {
        let offset = self.offset;
        let length = self.u64()?;
        let by_input = (self.remaining() / min_element_bytes.max(1)) as u64;
        let limit = bound.min(by_input);
        if length > limit {
            return Err(DecodeError::LengthOutOfBounds { offset, length, bound: limit });
        }
        Ok(length as usize)
    }

    /// Read a length-prefixed byte string of at most `bound` bytes.
    pub fn bytes(&mut self, bound: u64) -> Result<&'a [u8], DecodeError> {
        let length = self.length(bound, 1)?;
        self.take(length)
    }

    /// Read an option flag: `false` for `0`, `true` for `1`.
    pub fn flag(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        let offset = self.offset;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid { what, offset }),
        }
    }

    /// An `Invalid` error at the current offset.
    pub fn invalid(&self, what: &'static str) -> DecodeError {
        DecodeError::Invalid { what, offset: self.offset }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_bounded_by_input_before_allocation() {
        let mut bytes = Vec::new();
        put_u64(&mut bytes, u64::MAX);
        bytes.extend_from_slice(b"abc");
        let mut reader = Reader::new(&bytes);
        assert_eq!(
            reader.bytes(u64::MAX),
            Err(DecodeError::LengthOutOfBounds { offset: 0, length: u64::MAX, bound: 3 })
        );
    }

    #[test]
    fn round_trip_and_trailing_bytes() {
        let mut bytes = Vec::new();
        put_u8(&mut bytes, 7);
        put_u32(&mut bytes, 0x0102_0304);
        put_bytes(&mut bytes, b"hello");
        bytes.push(0xff);
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.u8(), Ok(7));
        assert_eq!(reader.u32(), Ok(0x0102_0304));
        assert_eq!(reader.bytes(16), Ok(&b"hello"[..]));
        assert_eq!(reader.finish(), Err(DecodeError::Trailing { remaining: 1 }));
        assert!(matches!(reader.u64(), Err(DecodeError::Truncated { .. })));
    }
}
