//! Every Rust panic reaches Python as a `RuntimeError`, whichever entry point
//! it crosses (function, constructor, method, getter, `__next__`,
//! `__getitem__`, or pyo3's own argument conversion).
//!
//! pyo3 catches a panic at every entry point and raises
//! `pyo3_runtime.PanicException`, which derives from `BaseException`, so
//! `except Exception` misses it. Wrapping each entry point would miss the ones
//! added later; instead, when the module loads, [`panics_are_runtime_errors`]
//! makes this module's `PanicException` class (pyo3 creates one per extension
//! module) derive from `RuntimeError`: every panic, wherever it is caught, is
//! then a `RuntimeError` that `except Exception` catches.
//!
//! [`PanicProbe`] (`lodt._lodt._PanicProbe`, internal, for tests only) panics
//! on request through each entry-point family.

use crate::error::PyResult;
use pyo3::PyTypeInfo;
use pyo3::exceptions::PyRuntimeError;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// Makes pyo3's `PanicException` of this module a subclass of `RuntimeError`
/// (its only base; both have `BaseException`'s layout, so Python allows the
/// change of `__bases__`).
pub fn panics_are_runtime_errors(py: Python<'_>) -> PyResult<()> {
    let panic = PanicException::type_object(py);
    let bases = PyTuple::new(py, [PyRuntimeError::type_object(py)])?;
    panic.setattr("__bases__", bases)
}

/// _PanicProbe(where="")
///
/// Internal, for tests only: panics in the entry point named by `where`
/// ("new" panics in the constructor; the method `panic()`, the getter
/// `panicking`, `__next__` and `__getitem__` always panic).
#[pyclass(module = "lodt._lodt", name = "_PanicProbe")]
pub struct PanicProbe;

#[pymethods]
impl PanicProbe {
    #[new]
    #[pyo3(signature = (r#where = ""))]
    fn py_new(r#where: &str) -> Self {
        assert!(r#where != "new", "a deliberate panic in a constructor");
        PanicProbe
    }

    /// Panics in a method.
    fn panic(&self) {
        panic!("a deliberate panic in a method")
    }

    /// Panics in a getter.
    #[getter]
    fn panicking(&self) -> bool {
        panic!("a deliberate panic in a getter")
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self) -> Option<u64> {
        panic!("a deliberate panic in __next__")
    }

    fn __getitem__(&self, _key: usize) -> u64 {
        panic!("a deliberate panic in __getitem__")
    }
}

/// _panic_for_tests()
///
/// Internal, for tests only: panics in a module function (not guarded).
#[pyfunction]
pub fn _panic_for_tests() -> PyResult<()> {
    panic!("a deliberate panic in a function")
}
