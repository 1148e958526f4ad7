//! Sequence operations: `sequence_expand`, `split`, `merge`, `pad`, `unpad`,
//! and `SortedSequences` (length-sorted time steps for RNNs).

use crate::core;
use crate::dtype::{descr, tensor_from_numpy};
use crate::error::{PyResult, core as core_err, type_error, value};
use crate::ffi;
use crate::tensor::{PyLodTensor, to_tensor};
use lodt::ops::SortedSequences;
use lodt::{DType, Lod, LodTensor};
use pyo3::prelude::*;

/// A LoD from Python: a `LodTensor` (its LoD) or a list of offset levels.
fn to_lod(obj: &Bound<'_, PyAny>) -> PyResult<Lod> {
    if let Ok(t) = obj.cast::<PyLodTensor>() {
        let b = t.borrow();
        return Ok(b.tensor()?.lod().clone());
    }
    let levels: Vec<Vec<u64>> = obj.extract().map_err(|_| {
        type_error("expected a LodTensor or a LoD (a list of offset levels, e.g. [[0, 1, 4]])")
    })?;
    Lod::try_from_offsets(levels).map_err(core_err)
}

fn wrap(py: Python<'_>, t: LodTensor) -> PyResult<Py<PyLodTensor>> {
    Py::new(py, PyLodTensor::new(t))
}

/// sequence_expand(x, y, ref_level=-1) -> LodTensor
///
/// Paddle's `sequence_expand`: repeats each sequence of `x` (each row, when
/// `x` has no LoD) as many times as level `ref_level` of `y`'s LoD says
/// (-1: the last level). `y` is a `LodTensor` (only its LoD is used) or a LoD
/// given as offsets. `x` needs rank >= 2 and at most one LoD level.
#[pyfunction]
#[pyo3(signature = (x, y, ref_level = -1), text_signature = "(x, y, ref_level=-1)")]
pub fn sequence_expand(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    ref_level: i64,
) -> PyResult<Py<PyLodTensor>> {
    let x = to_tensor(x)?;
    let y = to_lod(y)?;
    let out = py.detach(move || core::sequence_expand(&x, &y, ref_level));
    wrap(py, out.map_err(core_err)?)
}

/// split(x, n) -> list[LodTensor]
///
/// Paddle's `SplitLoDTensor`: `x`'s top-level sequences (rows, with no LoD)
/// cut into at most `n` parts of near-equal counts, sharing `x`'s data.
#[pyfunction]
pub fn split(py: Python<'_>, x: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<Py<PyLodTensor>>> {
    let x = to_tensor(x)?;
    core::split(&x, n)
        .map_err(core_err)?
        .into_iter()
        .map(|t| wrap(py, t))
        .collect()
}

/// merge(parts) -> LodTensor
///
/// Paddle's `MergeLoDTensor`: parts concatenated along their top level (rows
/// concatenated, each LoD level appended). Parts must agree on dtype,
/// element shape and number of levels.
#[pyfunction]
pub fn merge(py: Python<'_>, parts: &Bound<'_, PyAny>) -> PyResult<Py<PyLodTensor>> {
    let parts = parts
        .try_iter()?
        .map(|p| to_tensor(&p?))
        .collect::<PyResult<Vec<_>>>()?;
    let out = py.detach(move || core::merge(&parts));
    wrap(py, out.map_err(core_err)?)
}

/// `value` as an element of `dtype`, for padding.
fn pad_with(
    x: &LodTensor,
    pad_value: Option<&Bound<'_, PyAny>>,
) -> PyResult<(LodTensor, Vec<Vec<u64>>)> {
    macro_rules! int {
        ($t:ty) => {{
            let v: $t = match pad_value {
                None => 0,
                Some(v) => v.extract().map_err(|_| {
                    value(format!("pad_value {} does not fit {}", v, x.dtype().name()))
                })?,
            };
            core::pad(x, v)
        }};
    }
    let float = |v: Option<&Bound<'_, PyAny>>| -> PyResult<f64> {
        v.map_or(Ok(0.0), |v| {
            v.extract::<f64>()
                .map_err(|_| type_error("pad_value must be a number"))
        })
    };
    let out = match x.dtype() {
        DType::Bool => core::pad(x, pad_value.map_or(Ok(false), |v| v.is_truthy())?),
        DType::Int8 => int!(i8),
        DType::Int16 => int!(i16),
        DType::Int32 => int!(i32),
        DType::Int64 => int!(i64),
        DType::UInt8 => int!(u8),
        DType::UInt16 => int!(u16),
        DType::UInt32 => int!(u32),
        DType::UInt64 => int!(u64),
        DType::Float16 => core::pad(x, half::f16::from_f64(float(pad_value)?)),
        DType::BFloat16 => core::pad(x, half::bf16::from_f64(float(pad_value)?)),
        DType::Float32 => core::pad(x, float(pad_value)? as f32),
        DType::Float64 => core::pad(x, float(pad_value)?),
    };
    out.map_err(core_err)
}

/// pad(x, pad_value=0) -> (numpy.ndarray, list[list[int]])
///
/// Pads `x` into a dense array `[n_top, max_0, ..., max_(k-1), *element_shape]`
/// (Paddle's `sequence_pad`), cells past a sequence's end holding
/// `pad_value`; returns it (read-only, no further copy) with the
/// recursive sequence lengths that `unpad` takes back.
#[pyfunction]
#[pyo3(signature = (x, pad_value = None))]
pub fn pad<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    pad_value: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, Vec<Vec<u64>>)> {
    let x = to_tensor(x)?;
    let (padded, lengths) = pad_with(&x, pad_value)?;
    let array = ffi::readonly_array(
        py,
        padded.buffer(),
        descr(py, padded.dtype())?,
        padded.shape(),
    )?;
    Ok((array, lengths))
}

/// unpad(padded, lengths) -> LodTensor
///
/// The inverse of `pad` (Paddle's `sequence_unpad`): a dense array (or
/// `LodTensor` with no LoD) `[n_top, d_0, ..., d_(k-1), ...]` and the
/// lengths of every level.
#[pyfunction]
pub fn unpad(
    py: Python<'_>,
    padded: &Bound<'_, PyAny>,
    lengths: Vec<Vec<u64>>,
) -> PyResult<Py<PyLodTensor>> {
    let padded = if padded.cast::<PyLodTensor>().is_ok() {
        to_tensor(padded)?
    } else {
        tensor_from_numpy(padded, Lod::empty())?
    };
    let out = py.detach(move || core::unpad(&padded, &lengths));
    wrap(py, out.map_err(core_err)?)
}

/// The sequences of one LoD level sorted by length, longest first (stable),
/// for RNN time steps (Paddle's `SortBySeqLen`, `SegmentInputs`,
/// `ConcatOutputs`): step `t` holds item `t` of every sequence longer than
/// `t`, so no padding is needed.
///
/// `s = SortedSequences(x, level=0)`; `steps = s.segment_inputs(x)`; run a
/// step function on each; `s.concat_outputs(outputs)` restores the order and LoD.
#[pyclass(name = "SortedSequences", module = "lodt", frozen)]
pub struct PySortedSequences {
    sorted: SortedSequences,
}

#[pymethods]
impl PySortedSequences {
    /// SortedSequences(lod, level=0)
    ///
    /// Sorts the sequences of level `level` of `lod` (a `LodTensor`, or
    /// offset levels) by length.
    #[new]
    #[pyo3(signature = (lod, level = 0))]
    fn py_new(lod: &Bound<'_, PyAny>, level: usize) -> PyResult<Self> {
        let lod = to_lod(lod)?;
        Ok(PySortedSequences {
            sorted: core::sort(&lod, level).map_err(core_err)?,
        })
    }

    /// The sorted level.
    #[getter]
    fn level(&self) -> usize {
        self.sorted.level()
    }

    /// `order[k]`: the original index of the `k`-th sequence after sorting.
    #[getter]
    fn order(&self) -> Vec<usize> {
        self.sorted.order().to_vec()
    }

    /// The lengths in sorted order (non-increasing).
    #[getter]
    fn sorted_lengths(&self) -> Vec<u64> {
        self.sorted.sorted_lengths().to_vec()
    }

    /// The number of time steps (the longest length).
    #[getter]
    fn num_steps(&self) -> u64 {
        self.sorted.num_steps()
    }

    /// The number of sequences still running at each step, as a list: for
    /// at most `MAX_ROWS_WITHOUT_BYTES` (2**24) steps, a `ValueError`
    /// beyond (a LoD's lengths are free to claim; `batch_size(step)` answers
    /// for any step).
    #[getter]
    fn batch_sizes(&self) -> PyResult<Vec<usize>> {
        let steps = self.sorted.num_steps();
        let limit = lodt::tensor::MAX_ROWS_WITHOUT_BYTES;
        if steps > limit as u64 {
            return Err(value(format!(
                "batch_sizes: {steps} time steps, and the list is built for at most {limit} \
                 (MAX_ROWS_WITHOUT_BYTES); use batch_size(step) and num_steps"
            )));
        }
        Ok(self.sorted.batch_sizes().collect())
    }

    /// batch_size(step) -> int
    ///
    /// The number of sequences still running at time step `step` (0 past
    /// the last step).
    fn batch_size(&self, step: u64) -> usize {
        self.sorted.batch_size(step)
    }

    fn __len__(&self) -> usize {
        self.sorted.num_sequences()
    }

    /// segment_inputs(x) -> list[LodTensor]
    ///
    /// `x` cut into one tensor per time step, in sorted order.
    fn segment_inputs(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Py<PyLodTensor>>> {
        let x = to_tensor(x)?;
        core::segment_inputs(&self.sorted, &x)
            .map_err(core_err)?
            .into_iter()
            .map(|t| wrap(py, t))
            .collect()
    }

    /// concat_outputs(steps) -> LodTensor
    ///
    /// One output per step (in sorted order) restored to the original order
    /// and LoD.
    fn concat_outputs(
        &self,
        py: Python<'_>,
        steps: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyLodTensor>> {
        let steps = steps
            .try_iter()?
            .map(|s| to_tensor(&s?))
            .collect::<PyResult<Vec<_>>>()?;
        wrap(
            py,
            core::concat_outputs(&self.sorted, &steps).map_err(core_err)?,
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "SortedSequences(level={}, order={:?}, sorted_lengths={:?})",
            self.sorted.level(),
            self.sorted.order(),
            self.sorted.sorted_lengths()
        )
    }
}
