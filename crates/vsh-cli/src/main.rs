//! The vsh command line.

fn main() {}
