//! The one seam that touches the operating system for workspace and data paths: a capability-rooted directory handle.
