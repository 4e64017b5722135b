//! Revalidate a bound transaction against the live workspace and apply it exactly once.
