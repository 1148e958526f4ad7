//! Packing's variable-length views (`lodt::dataset::varlen`,
//! `row_cu_seqlens`) as numpy arrays (the vectors move into numpy, no copy).

use crate::error::{PyResult, dataset as dataset_err};
use crate::tensor::to_tensor;
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

/// An int32 and an int64 numpy vector.
type Int32<'py> = Bound<'py, PyArray1<i32>>;
type Int64<'py> = Bound<'py, PyArray1<i64>>;

/// varlen(x, level) -> tuple[numpy.ndarray, int, numpy.ndarray]
///
/// Level `level` (0: outermost) of `x` as `(cu_seqlens, max_seqlen,
/// position_ids)`: int32 row offsets relative to `x`'s first row (first 0;
/// an outer level measured in rows), the longest sequence in rows, and per
/// row its int64 position in its sequence.
#[pyfunction]
pub fn varlen<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    level: usize,
) -> PyResult<(Int32<'py>, usize, Int64<'py>)> {
    let x = to_tensor(x)?;
    let v = py
        .detach(|| lodt::dataset::varlen(&x, level))
        .map_err(dataset_err)?;
    Ok((
        v.cu_seqlens.into_pyarray(py),
        v.max_seqlen,
        v.position_ids.into_pyarray(py),
    ))
}

/// row_cu_seqlens(x, level, bins) -> tuple[numpy.ndarray, numpy.ndarray]
///
/// Per row `r` of a packed `[R, L]` batch (top-level sequences
/// `bins[r]..bins[r + 1]`), the int32 `cu_seqlens` of level `level`
/// relative to the row's start, concatenated, and the int64 index where each
/// row's list starts (`R + 1` entries).
#[pyfunction]
pub fn row_cu_seqlens<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    level: usize,
    bins: Vec<usize>,
) -> PyResult<(Int32<'py>, Int64<'py>)> {
    let x = to_tensor(x)?;
    let (cu, starts) = py
        .detach(|| lodt::dataset::row_cu_seqlens(&x, level, &bins))
        .map_err(dataset_err)?;
    let starts: Vec<i64> = starts.into_iter().map(|s| s as i64).collect();
    Ok((cu.into_pyarray(py), starts.into_pyarray(py)))
}
