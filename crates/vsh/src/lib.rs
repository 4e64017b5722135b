//! The vsh facade: run agent programs against a virtual workspace image and commit approved changes exactly once.
