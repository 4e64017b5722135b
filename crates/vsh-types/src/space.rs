//! How much of a filesystem's free space vsh lets one run take: the one
//! rule the store (contents kept for a later commit) and the command guard
//! (what a real command writes in its scratch directories) share.
//!
//! A run may take half of what is available, and never past a reserve of
//! 2 % of the filesystem's size, capped: the cap keeps the reserve from
//! refusing every run on a large disk that is merely busy (a 252 GB disk
//! with 250 MB free still takes a 7-byte change), and the half keeps one run
//! from taking the rest.

/// The most bytes the reserve holds back: a commit's journal and a small
/// run's contents fit well inside it.
pub const MAX_RESERVE_BYTES: u64 = 64 << 20;

/// The most inodes the reserve holds back.
pub const MAX_RESERVE_NODES: u64 = 100_000;

/// The most bytes real commands' scratch directories (build outputs and
/// caches kept between runs) may hold: one run's commands may add no more
/// than this while they run, and a run after which they hold more clears
/// them, as `vsh gc` does (its default bound).
pub const MAX_SCRATCH_BYTES: u64 = 20 << 30;

/// The units (bytes or inodes) a filesystem of `total` units keeps
/// available whatever runs take: 2 % of it, at most `max_reserve`.
#[must_use]
pub fn reserve(total: u64, max_reserve: u64) -> u64 {
    (total / 50).min(max_reserve)
}

/// The units one run may take of a filesystem with `available` of `total`
/// units: half of what is available, and never past [`reserve`] (nothing,
/// when less than the reserve is available already).
#[must_use]
pub fn may_take(available: u64, total: u64, max_reserve: u64) -> u64 {
    let floor = reserve(total, max_reserve).max(available.div_ceil(2)).min(available);
    available - floor
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;
    const MB: u64 = 1_000_000;

    #[test]
    fn a_run_takes_at_most_half_of_what_is_available() {
        assert_eq!(may_take(100 * GB, 200 * GB, MAX_RESERVE_BYTES), 50 * GB);
        assert_eq!(may_take(7, 10, MAX_RESERVE_BYTES), 3, "half, rounded down");
    }

    #[test]
    fn a_busy_large_disk_still_takes_a_small_run() {
        // 250 MB free of 252 GB: 2 % would be 5 GB; the cap keeps 64 MiB.
        let took = may_take(250 * MB, 252 * GB, MAX_RESERVE_BYTES);
        assert_eq!(took, 125 * MB);
        assert!(took >= 7);
    }

    #[test]
    fn the_reserve_is_two_percent_of_a_small_disk_and_capped_on_a_large_one() {
        assert_eq!(reserve(40 * MB, MAX_RESERVE_BYTES), 800_000);
        assert_eq!(reserve(252 * GB, MAX_RESERVE_BYTES), 64 << 20);
        // 1 MB free of a 40 MB disk: less than half would be left above the
        // reserve of 800 kB; the run may take what lies above the reserve.
        assert_eq!(may_take(MB, 40 * MB, MAX_RESERVE_BYTES), 200_000);
        // Below the reserve already: nothing.
        assert_eq!(may_take(500_000, 40 * MB, MAX_RESERVE_BYTES), 0);
    }
}
