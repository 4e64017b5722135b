//! [`Capture`]: one output stream kept in O(cap) memory, as its first and last
//! bytes.
//!
//! The first half of the cap is kept from the start of the stream and the
//! second half from its end (a ring of the most recent bytes), so both the
//! command's opening lines and its final errors survive truncation. What was
//! dropped in between is replaced by a marker naming the number of bytes.

use std::collections::VecDeque;
use std::fmt::Write as _;

/// A capped capture of one output stream.
#[derive(Debug)]
pub(crate) struct Capture {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

/// What a [`Capture`] kept, rendered as text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Captured {
    /// Lossy UTF-8; with a truncation marker between head and tail when truncated.
    pub(crate) text: String,
    /// Whether bytes were dropped.
    pub(crate) truncated: bool,
    /// How many bytes the stream produced in all.
    pub(crate) total: u64,
}

impl Capture {
    /// A capture keeping at most `cap` bytes: `cap - cap / 2` from the head and
    /// `cap / 2` from the tail.
    pub(crate) fn new(cap: usize) -> Self {
        let tail_cap = cap / 2;
        let head_cap = cap - tail_cap;
        // Memory grows with what arrives, up to the caps; nothing is reserved up front.
        Self { head_cap, tail_cap, head: Vec::new(), tail: VecDeque::new(), total: 0 }
    }

    /// Append bytes read from the stream.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let to_head = bytes.len().min(self.head_cap - self.head.len());
        self.head.extend_from_slice(&bytes[..to_head]);
        let rest = &bytes[to_head..];
        if rest.is_empty() || self.tail_cap == 0 {
            return;
        }
        if rest.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.tail_cap..]);
        } else {
            let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(rest);
        }
    }

    /// Render what was kept. When bytes were dropped, the head is cut back to
    /// end on a whole UTF-8 character and the tail to start on one (the bytes
    /// cut are counted as dropped), and the marker
    /// `"\n[… N bytes truncated …]\n"` joins them.
    pub(crate) fn finish(self) -> Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if kept == self.total {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            return Captured { text: String::from_utf8_lossy(&all).into_owned(), truncated: false, total: self.total };
        }
        let head_end = complete_prefix_len(&self.head);
        let tail_start = leading_continuations(&tail);
        let dropped = self.total - head_end as u64 - (tail.len() - tail_start) as u64;
        let mut text = String::from_utf8_lossy(&self.head[..head_end]).into_owned();
        let _ = write!(text, "\n[… {dropped} bytes truncated …]\n");
        text.push_str(&String::from_utf8_lossy(&tail[tail_start..]));
        Captured { text, truncated: true, total: self.total }
    }
}

/// The length of `bytes` without a UTF-8 sequence left incomplete at its end.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    // A sequence is at most four bytes, so only the last three can start an incomplete one.
    for back in 1..=bytes.len().min(3) {
        let index = bytes.len() - back;
        let byte = bytes[index];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue;
        }
        let needed = match byte {
            0b1100_0000..=0b1101_1111 => 2,
            0b1110_0000..=0b1110_1111 => 3,
            0b1111_0000..=0b1111_0111 => 4,
            _ => 1,
        };
        return if needed > back { index } else { bytes.len() };
    }
    bytes.len()
}

/// How many continuation bytes (at most three) start `bytes`: the rest of a
/// character whose first bytes were dropped.
fn leading_continuations(bytes: &[u8]) -> usize {
    bytes.iter().take(3).take_while(|byte| **byte & 0b1100_0000 == 0b1000_0000).count()
}

#[cfg(test)]
mod tests {
    use super::{Capture, complete_prefix_len, leading_continuations};

    fn capture(cap: usize, chunks: &[&[u8]]) -> super::Captured {
        let mut capture = Capture::new(cap);
        for chunk in chunks {
            capture.push(chunk);
        }
        capture.finish()
    }

    #[test]
    fn output_within_the_cap_is_kept_whole() {
        let captured = capture(10, &[b"abc", b"defgh", b"ij"]);
        assert_eq!(captured.text, "abcdefghij");
        assert!(!captured.truncated);
        assert_eq!(captured.total, 10);
        assert_eq!(capture(10, &[]).text, "");
    }

    #[test]
    fn output_over_the_cap_keeps_head_and_tail_whatever_the_chunking() {
        let stream: Vec<u8> = (b'a'..=b'z').collect();
        let expected = "abcde\n[… 16 bytes truncated …]\nvwxyz";
        for chunk_size in [1, 2, 3, 7, 26] {
            let chunks: Vec<&[u8]> = stream.chunks(chunk_size).collect();
            let captured = capture(10, &chunks);
            assert_eq!(captured.text, expected, "chunk size {chunk_size}");
            assert!(captured.truncated);
            assert_eq!(captured.total, 26);
        }
    }

    #[test]
    fn odd_and_tiny_caps() {
        assert_eq!(capture(3, &[b"abcdef"]).text, "ab\n[… 3 bytes truncated …]\nf");
        assert_eq!(capture(1, &[b"abc"]).text, "a\n[… 2 bytes truncated …]\n");
        assert_eq!(capture(0, &[b"abc"]).text, "\n[… 3 bytes truncated …]\n");
        assert_eq!(capture(0, &[]).text, "");
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // "é" is two bytes (C3 A9). With a cap of 4, the head keeps "a\xC3" and the
        // tail "\xA9b": both halves of a split character are dropped and counted.
        let captured = capture(4, &["aé".as_bytes(), b"xyz", "éb".as_bytes()]);
        assert_eq!(captured.text, "a\n[… 7 bytes truncated …]\nb");
        assert_eq!(captured.total, 9);
        assert_eq!(complete_prefix_len("a€".as_bytes()), 4);
        assert_eq!(complete_prefix_len(&"a€".as_bytes()[..3]), 1);
        assert_eq!(complete_prefix_len(&[0xf0, 0x9f, 0x98]), 0);
        assert_eq!(leading_continuations(&"€".as_bytes()[1..]), 2);
        assert_eq!(leading_continuations(b"abc"), 0);
    }
}
