//! The virtual image of a workspace: an observed snapshot and a copy-on-write overlay with a canonical diff.
