//! Hooks for python/tests only (the `test-hooks` feature; never in a
//! wheel): a panic at the boundary, as a defect would cause.

use pyo3::prelude::*;

/// Panic inside a call the way a defect would, with the GIL released.
#[pyfunction]
pub(crate) fn _test_panic(py: Python<'_>) -> PyResult<()> {
    crate::detached(py, || panic!("a test asked for a panic"))
}
