//! What the randomized and multi-process tests share: the kinds of write a
//! lock-ignoring writer makes, a seeded generator, and where a killed commit
//! stopped.

use std::path::Path;

/// What a racing writer does to its path, through the path, as another
/// program would (the commit lock is advisory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Open, append, close (`>>`, or an editor writing in place).
    Append,
    /// Write a new file beside it and rename it over the path (how editors save).
    Replace,
    /// Create the file if the path is free.
    Create,
    /// Change the file's mode.
    Chmod,
}

pub const WRITES: [Write; 4] = [Write::Append, Write::Replace, Write::Create, Write::Chmod];

/// A small deterministic generator, so every trial replays from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    /// An index into a collection of `len` items.
    pub fn index(&mut self, len: usize) -> usize {
        (self.next() % len.max(1) as u64) as usize
    }

    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }
}

/// Where a killed commit stopped: 0 no transaction directory, 1 no journal
/// yet, 2 journal before the commit point, 3 past the commit point (a
/// marker, or the ledger at `ledger`, a `FileLedger`, saying Committed).
pub fn phase_of(ws: &Path, ledger: &Path) -> usize {
    let Some(Ok(dir)) = std::fs::read_dir(ws.join(".vsh/txn")).ok().and_then(|mut entries| entries.next()) else {
        return 0;
    };
    let dir = dir.path();
    let committed = format!(" {:02}", vsh_types::TransactionState::Committed.tag());
    let recorded =
        std::fs::read_to_string(ledger).is_ok_and(|text| text.lines().any(|line| line.ends_with(&committed)));
    if dir.join("complete").exists() || recorded {
        3
    } else if dir.join("journal").exists() {
        2
    } else {
        1
    }
}
