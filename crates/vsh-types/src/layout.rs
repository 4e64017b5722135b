//! [`VshLayout`]: where vsh keeps its own files relative to a workspace.
//!
//! vsh's runtime directory is [`RUNTIME_DIR_NAME`] (`.vsh`) at the workspace
//! root: the commit lock, the journal and the staging area. Its data
//! directory (blobs and transaction records) is `.vsh/data` by default, or an
//! external directory; an external one may still lie inside the workspace,
//! found by device and inode, never by a path string. Every crate asks this
//! one value where those directories are, instead of naming them itself.

use crate::path::VPath;

/// The name of vsh's runtime directory, at the root of a workspace and (as
/// runtime data protected at any depth) below it.
pub const RUNTIME_DIR_NAME: &str = ".vsh";

/// The default data directory's name inside the runtime directory.
const DATA_DIR_NAME: &str = "data";

/// Where the data directory is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataPlacement {
    /// `.vsh/data`, inside the runtime directory.
    Default,
    /// An external directory outside the workspace.
    Outside,
    /// An external directory that lies inside the workspace, at this path
    /// (never the root, never within the runtime directory's protection by
    /// accident: it is excluded and protected in its own right).
    Within(VPath),
}

/// The runtime directory and the data directory of one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VshLayout {
    runtime: VPath,
    data: DataPlacement,
}

impl VshLayout {
    /// The layout with the data directory at `data`.
    pub fn new(data: DataPlacement) -> Self {
        Self { runtime: VPath::parse(RUNTIME_DIR_NAME).expect("a valid constant name"), data }
    }

    /// The runtime directory: `.vsh`.
    pub fn runtime(&self) -> &VPath {
        &self.runtime
    }

    /// The default data directory: `.vsh/data`.
    pub fn default_data() -> VPath {
        VPath::parse(RUNTIME_DIR_NAME).and_then(|runtime| runtime.child(DATA_DIR_NAME)).expect("valid constant names")
    }

    /// Where the data directory is.
    pub fn data(&self) -> &DataPlacement {
        &self.data
    }

    /// The data directory's path inside the workspace, if it is inside.
    pub fn data_in_workspace(&self) -> Option<VPath> {
        match &self.data {
            DataPlacement::Default => Some(Self::default_data()),
            DataPlacement::Outside => None,
            DataPlacement::Within(path) => Some(path.clone()),
        }
    }

    /// A data directory inside the workspace but not inside the runtime
    /// directory: it needs its own exclusion from runs and its own protection.
    pub fn separate_data(&self) -> Option<&VPath> {
        match &self.data {
            DataPlacement::Within(path) if !path.is_within(&self.runtime) => Some(path),
            _ => None,
        }
    }

    /// Every directory no run may see or change: the runtime directory, and a
    /// separate data directory.
    pub fn excluded(&self) -> Vec<VPath> {
        let mut out = vec![self.runtime.clone()];
        out.extend(self.separate_data().cloned());
        out
    }
}

impl Default for VshLayout {
    fn default() -> Self {
        Self::new(DataPlacement::Default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> VPath {
        VPath::parse(text).unwrap()
    }

    #[test]
    fn each_placement_names_its_directories() {
        let default = VshLayout::default();
        assert_eq!(default.runtime(), &p(".vsh"));
        assert_eq!(VshLayout::default_data(), p(".vsh/data"));
        assert_eq!(default.data_in_workspace(), Some(p(".vsh/data")));
        assert_eq!(default.separate_data(), None);
        assert_eq!(default.excluded(), vec![p(".vsh")]);

        let outside = VshLayout::new(DataPlacement::Outside);
        assert_eq!(outside.data_in_workspace(), None);
        assert_eq!(outside.excluded(), vec![p(".vsh")]);

        let within = VshLayout::new(DataPlacement::Within(p("state/data")));
        assert_eq!(within.data_in_workspace(), Some(p("state/data")));
        assert_eq!(within.separate_data(), Some(&p("state/data")));
        assert_eq!(within.excluded(), vec![p(".vsh"), p("state/data")]);

        // An external directory that happens to be inside `.vsh` is covered by it.
        let nested = VshLayout::new(DataPlacement::Within(p(".vsh/elsewhere")));
        assert_eq!(nested.separate_data(), None);
        assert_eq!(nested.excluded(), vec![p(".vsh")]);
    }
}
