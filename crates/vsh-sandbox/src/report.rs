//! The six axes a policy restricts, the three enforcement levels, and the per-axis report.
//!
//! This module only holds values: what each level means for each axis is decided in
//! `kernel.rs`, from what the kernel offers and what the policy asks for.

use std::cmp::Ordering;
use std::fmt;

/// One thing a sandbox restricts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Axis {
    /// Which files and directories the child can read or list.
    FsRead,
    /// Where the child can write, create, remove, rename or truncate.
    FsWrite,
    /// Which files the child can `execve`.
    Exec,
    /// Which sockets the child can open and where it can connect.
    Network,
    /// Signals, abstract unix sockets and tracing across the sandbox boundary, and whether the
    /// child can leave its process group.
    IpcSignals,
    /// Resource limits (CPU time, address space, file size, open files, processes).
    Resources,
}

impl Axis {
    /// Every axis, in report order.
    pub const ALL: [Axis; 6] =
        [Axis::FsRead, Axis::FsWrite, Axis::Exec, Axis::Network, Axis::IpcSignals, Axis::Resources];

    /// The short name used in tables and messages, e.g. `fs-read`.
    pub fn name(self) -> &'static str {
        match self {
            Axis::FsRead => "fs-read",
            Axis::FsWrite => "fs-write",
            Axis::Exec => "exec",
            Axis::Network => "network",
            Axis::IpcSignals => "ipc-signals",
            Axis::Resources => "resources",
        }
    }

    /// The position of the axis in [`Axis::ALL`].
    pub(crate) fn index(self) -> usize {
        match self {
            Axis::FsRead => 0,
            Axis::FsWrite => 1,
            Axis::Exec => 2,
            Axis::Network => 3,
            Axis::IpcSignals => 4,
            Axis::Resources => 5,
        }
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How strongly an axis is enforced. Ordered `None < Partial < Kernel`.
///
/// The order is written by hand, not derived, so that reordering the variants can never turn a
/// floor check upside down (a derived order on a reversed declaration would fail open).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Enforcement {
    /// Nothing restricts the axis.
    None,
    /// The kernel enforces part of what the policy asks; the reason says which part is missing.
    Partial,
    /// The kernel enforces what the policy asks (within the documented limitations).
    Kernel,
}

impl Enforcement {
    /// The strength as a number: higher is stronger.
    fn rank(self) -> u8 {
        match self {
            Enforcement::None => 0,
            Enforcement::Partial => 1,
            Enforcement::Kernel => 2,
        }
    }

    /// The lowercase name used in tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            Enforcement::None => "none",
            Enforcement::Partial => "partial",
            Enforcement::Kernel => "kernel",
        }
    }
}

impl Ord for Enforcement {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for Enforcement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The enforcement of one axis: level, the floor the policy requires, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisReport {
    axis: Axis,
    level: Enforcement,
    floor: Enforcement,
    reason: String,
}

impl AxisReport {
    pub(crate) fn new(axis: Axis, level: Enforcement, floor: Enforcement, reason: String) -> Self {
        Self { axis, level, floor, reason }
    }

    /// The axis.
    pub fn axis(&self) -> Axis {
        self.axis
    }

    /// What the kernel enforces on this axis.
    pub fn level(&self) -> Enforcement {
        self.level
    }

    /// The least the policy accepts.
    pub fn floor(&self) -> Enforcement {
        self.floor
    }

    /// Whether the level meets the floor.
    pub fn meets_floor(&self) -> bool {
        self.level >= self.floor
    }

    /// A human explanation: the mechanism (Landlock ABI, seccomp, rlimits) and what it leaves out.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Per-axis enforcement of a policy on this kernel, with the mechanisms used.
///
/// [`crate::KernelSupport::report_for`] computes it before a spawn; [`crate::ConfinedChild::report`]
/// is the report the child was spawned under. `Display` renders a table.
#[must_use = "an enforcement report says what actually holds; inspect it"]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnforcementReport {
    axes: Vec<AxisReport>,
    confined: bool,
    landlock_abi: Option<u32>,
    seccomp: bool,
}

impl EnforcementReport {
    /// `axes` must hold one entry per axis, in [`Axis::ALL`] order.
    pub(crate) fn new(axes: Vec<AxisReport>, confined: bool, landlock_abi: Option<u32>, seccomp: bool) -> Self {
        debug_assert!(axes.iter().map(AxisReport::axis).eq(Axis::ALL), "one report per axis, in order");
        Self { axes, confined, landlock_abi, seccomp }
    }

    /// Every axis, in [`Axis::ALL`] order.
    pub fn axes(&self) -> &[AxisReport] {
        &self.axes
    }

    /// The report of one axis.
    pub fn axis(&self, axis: Axis) -> &AxisReport {
        &self.axes[axis.index()]
    }

    /// The level of one axis.
    pub fn level(&self, axis: Axis) -> Enforcement {
        self.axis(axis).level
    }

    /// The first axis (in [`Axis::ALL`] order) whose level is below its floor.
    pub fn first_below_floor(&self) -> Option<&AxisReport> {
        self.axes.iter().find(|report| !report.meets_floor())
    }

    /// Whether the policy confines the child (Landlock, seccomp deny list, capabilities dropped),
    /// as opposed to only keeping its process group killable.
    pub fn confined(&self) -> bool {
        self.confined
    }

    /// The Landlock ABI whose rights the ruleset handles, if Landlock is used.
    pub fn landlock_abi(&self) -> Option<u32> {
        self.landlock_abi
    }

    /// Whether a seccomp filter is installed.
    pub fn seccomp(&self) -> bool {
        self.seccomp
    }
}

impl fmt::Display for EnforcementReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = if self.confined { "confined" } else { "process group only (not confined)" };
        write!(f, "sandbox: {mode}; landlock: ")?;
        match self.landlock_abi {
            Some(abi) => write!(f, "ABI {abi} rights, fully enforced")?,
            None => f.write_str("not used")?,
        }
        let seccomp = if self.seccomp { "one filter" } else { "not used" };
        writeln!(f, "; seccomp: {seccomp}")?;
        writeln!(f, "{:<12} {:<8} {:<8} why", "axis", "level", "floor")?;
        for report in &self.axes {
            let mark = if report.meets_floor() { "" } else { "  <-- below floor" };
            writeln!(
                f,
                "{:<12} {:<8} {:<8} {}{mark}",
                report.axis.name(),
                report.level.name(),
                report.floor.name(),
                report.reason
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforcement_is_ordered_none_partial_kernel() {
        assert!(Enforcement::None < Enforcement::Partial);
        assert!(Enforcement::Partial < Enforcement::Kernel);
        assert!(Enforcement::None < Enforcement::Kernel);
        assert_eq!(Enforcement::Kernel.max(Enforcement::None), Enforcement::Kernel);
        assert_eq!(Enforcement::Partial.min(Enforcement::Kernel), Enforcement::Partial);
        let mut levels = vec![Enforcement::Kernel, Enforcement::None, Enforcement::Partial];
        levels.sort();
        assert_eq!(levels, vec![Enforcement::None, Enforcement::Partial, Enforcement::Kernel]);
        assert_eq!(Enforcement::Partial.cmp(&Enforcement::Partial), Ordering::Equal);
    }

    #[test]
    fn axis_indexes_match_all() {
        for (index, axis) in Axis::ALL.into_iter().enumerate() {
            assert_eq!(axis.index(), index, "{axis}");
        }
    }

    #[test]
    fn report_finds_the_first_axis_below_floor_and_renders_it() {
        let axes = Axis::ALL
            .into_iter()
            .map(|axis| {
                let level = if axis == Axis::Network { Enforcement::Partial } else { Enforcement::Kernel };
                AxisReport::new(axis, level, Enforcement::Kernel, format!("{axis} reason"))
            })
            .collect();
        let report = EnforcementReport::new(axes, true, Some(7), true);
        let below = report.first_below_floor().expect("network is below its floor");
        assert_eq!(below.axis(), Axis::Network);
        assert_eq!(report.level(Axis::Network), Enforcement::Partial);
        let table = report.to_string();
        assert!(table.contains("network      partial  kernel   network reason  <-- below floor"), "{table}");
        assert!(table.contains("fs-read      kernel   kernel   fs-read reason\n"), "{table}");
    }
}
