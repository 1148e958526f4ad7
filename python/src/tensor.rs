//! `lodt.LodTensor` (alias `lodt.LoDTensor`): Paddle's Python LoDTensor API
//! plus zero-copy slicing, numpy, Arrow and PyTorch interop.

use crate::core;
use crate::dtype::{descr, from_name, tensor_from_numpy};
use crate::error::{PyResult, core as core_err, index, type_error, value};
use crate::ffi;
use lodt::{Lod, LodTensor};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PySlice, PySliceMethods, PyTuple};

/// What a `LodTensor` object holds. Paddle lets a tensor exist with no data
/// (`LoDTensor()`), and with recursive sequence lengths that do not fit its
/// rows (`set_recursive_sequence_lengths` checks only the levels; a later
/// `set` may fix it): `has_valid_recursive_sequence_lengths` tells.
#[derive(Clone)]
enum State {
    /// No data yet, maybe a LoD.
    Empty { lod: Lod },
    /// Data and a LoD that fits it.
    Ready(LodTensor),
    /// Data (held with no LoD) and a LoD whose rows differ from the data's.
    Mismatch { values: LodTensor, lod: Lod },
}

/// A LoD tensor: a dense array whose first dimension is cut into sequences,
/// recursively, by a multi-level offset index (the LoD).
///
/// Data is immutable and shared: slices (`branch`, `sequence`,
/// `slice_level`, iteration) and `numpy.asarray(t)` are views of the same
/// bytes, read-only, with no copy; a tensor read from a file is a view of the
/// file's memory map. `set`, `set_lod` and `set_recursive_sequence_lengths`
/// replace what this object holds and never change other tensors or arrays.
#[pyclass(name = "LodTensor", module = "lodt", weakref)]
pub struct PyLodTensor {
    state: State,
}

impl PyLodTensor {
    /// A Python tensor holding `t`.
    pub fn new(t: LodTensor) -> Self {
        PyLodTensor {
            state: State::Ready(t),
        }
    }

    /// The tensor, when it has data and a LoD that fits it.
    pub fn tensor(&self) -> PyResult<&LodTensor> {
        match &self.state {
            State::Ready(t) => Ok(t),
            State::Empty { .. } => Err(value("the tensor holds no data: call set(array) first")),
            State::Mismatch { values, lod } => match core::with_lod(values, lod.clone()) {
                Err(e) => Err(core_err(e)),
                Ok(_) => Err(value("internal: mismatched LoD state")),
            },
        }
    }

    /// The data (with no LoD when the LoD does not fit it).
    fn values(&self) -> PyResult<&LodTensor> {
        match &self.state {
            State::Ready(t) | State::Mismatch { values: t, .. } => Ok(t),
            State::Empty { .. } => Err(value("the tensor holds no data: call set(array) first")),
        }
    }

    fn lod_ref(&self) -> Lod {
        match &self.state {
            State::Ready(t) => t.lod().clone(),
            State::Empty { lod } | State::Mismatch { lod, .. } => lod.clone(),
        }
    }

    /// Sets data and LoD, keeping the data with no LoD when they do not fit.
    fn put(&mut self, values: LodTensor, lod: Lod) -> PyResult<()> {
        let plain = core::with_lod(&values, Lod::empty()).map_err(core_err)?;
        self.state = match core::with_lod(&plain, lod.clone()) {
            Ok(t) => State::Ready(t),
            Err(_) => State::Mismatch { values: plain, lod },
        };
        Ok(())
    }

    fn wrap(py: Python<'_>, t: LodTensor) -> PyResult<Py<PyLodTensor>> {
        Py::new(py, PyLodTensor::new(t))
    }

    fn top(&self, i: isize) -> PyResult<usize> {
        let t = self.tensor()?;
        let n = core::top_level_rows(t);
        normalize(i, n, "top-level sequence")
    }

    fn item(&self, i: isize) -> PyResult<LodTensor> {
        let t = self.tensor()?;
        let i = self.top(i)?;
        if t.shape().is_empty() {
            return Err(type_error("a 0-D tensor has no rows to index"));
        }
        if t.lod().is_empty() {
            core::row(t, i)
        } else {
            core::sequence(t, 0, i)
        }
        .map_err(core_err)
    }
}

/// A Python index (negative from the end) into `n` items.
pub fn normalize(i: isize, n: usize, what: &str) -> PyResult<usize> {
    let j = if i < 0 {
        i.checked_add_unsigned(n)
    } else {
        Some(i)
    };
    match j.and_then(|j| usize::try_from(j).ok()) {
        Some(j) if j < n => Ok(j),
        _ => Err(index(format!("{what} index {i} out of range for {n}"))),
    }
}

/// Offsets or lengths from Python: a list of lists of non-negative ints.
fn levels(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u64>>> {
    obj.extract::<Vec<Vec<u64>>>().map_err(|_| {
        type_error("a LoD is a list of levels, each a list of non-negative ints (e.g. [[0, 2, 5]])")
    })
}

/// Any tensor-like object as a tensor: a `LodTensor` (shared), an object
/// exporting the Arrow PyCapsule interface, or an array-like (copied, no LoD).
pub fn to_tensor(obj: &Bound<'_, PyAny>) -> PyResult<LodTensor> {
    if let Ok(t) = obj.cast::<PyLodTensor>() {
        return Ok(t.borrow().tensor()?.clone());
    }
    if obj.hasattr("__arrow_c_array__")? || obj.hasattr("__arrow_c_stream__")? {
        return crate::arrow::tensor_from_arrow(obj);
    }
    tensor_from_numpy(obj, Lod::empty())
}

/// `lodt._lodt._tensor_from_state`: unpickles a tensor.
#[pyfunction]
#[pyo3(signature = (dtype, shape, lod, data, lod_fits))]
pub fn _tensor_from_state(
    dtype: Option<String>,
    shape: Vec<usize>,
    lod: Vec<Vec<u64>>,
    data: Option<&[u8]>,
    lod_fits: bool,
) -> PyResult<PyLodTensor> {
    let lod = if lod.is_empty() {
        Lod::empty()
    } else {
        Lod::try_from_stored(lod).map_err(core_err)?
    };
    let (Some(dtype), Some(data)) = (dtype, data) else {
        return Ok(PyLodTensor {
            state: State::Empty { lod },
        });
    };
    let dtype = from_name(&dtype)?;
    let values = LodTensor::from_bytes(dtype, shape, data, Lod::empty()).map_err(core_err)?;
    if lod_fits {
        let t = core::with_lod(&values, lod).map_err(core_err)?;
        return Ok(PyLodTensor::new(t));
    }
    let mut out = PyLodTensor {
        state: State::Empty { lod: Lod::empty() },
    };
    out.put(values, lod)?;
    Ok(out)
}

#[pymethods]
impl PyLodTensor {
    /// LodTensor(data=None, recursive_seq_lens=None, *, lod=None)
    ///
    /// A tensor holding a copy of `data` (a numpy array or anything
    /// `numpy.asarray` accepts), with a LoD given as lengths
    /// (`recursive_seq_lens`, Paddle's `recursive_sequence_lengths`) or as
    /// offsets (`lod`). With no argument, an empty tensor to `set` later, as
    /// Paddle's `LoDTensor()`.
    #[new]
    #[pyo3(signature = (data = None, recursive_seq_lens = None, *, lod = None))]
    fn py_new(
        data: Option<&Bound<'_, PyAny>>,
        recursive_seq_lens: Option<&Bound<'_, PyAny>>,
        lod: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut t = PyLodTensor {
            state: State::Empty { lod: Lod::empty() },
        };
        if let Some(data) = data {
            t.set(data, None)?;
        }
        match (recursive_seq_lens, lod) {
            (Some(_), Some(_)) => {
                return Err(type_error(
                    "give the LoD as recursive_seq_lens (lengths) or lod (offsets), not both",
                ));
            }
            (Some(lens), None) => t.set_recursive_sequence_lengths(lens)?,
            (None, Some(lod)) => t.set_lod(lod)?,
            (None, None) => {}
        }
        Ok(t)
    }

    /// set(array, place=None)
    ///
    /// Replaces the data with a copy of `array` (Paddle's `LoDTensor.set`);
    /// the LoD is kept. `place` is accepted and ignored (lodt tensors live in
    /// host memory).
    #[pyo3(signature = (array, place = None))]
    fn set(&mut self, array: &Bound<'_, PyAny>, place: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let _ = place;
        let values = if let Ok(t) = array.cast::<PyLodTensor>() {
            t.borrow().values()?.clone()
        } else {
            tensor_from_numpy(array, Lod::empty())?
        };
        let lod = self.lod_ref();
        self.put(values, lod)
    }

    /// set_lod(lod)
    ///
    /// Sets the LoD from offsets, top level first (e.g. `[[0, 2, 5]]`).
    /// Raises ValueError if the offsets break a LoD rule or do not fit the
    /// rows, with the rule, level and index.
    fn set_lod(&mut self, lod: &Bound<'_, PyAny>) -> PyResult<()> {
        let lod = Lod::try_from_offsets(levels(lod)?).map_err(core_err)?;
        match &self.state {
            State::Empty { .. } => {
                self.state = State::Empty { lod };
            }
            State::Ready(t) | State::Mismatch { values: t, .. } => {
                let t = core::with_lod(t, lod).map_err(core_err)?;
                self.state = State::Ready(t);
            }
        }
        Ok(())
    }

    /// lod() -> list[list[int]]
    ///
    /// The LoD as offsets, top level first (`[]` for a plain tensor).
    fn lod(&self) -> Vec<Vec<u64>> {
        core::offsets(&self.lod_ref())
    }

    /// recursive_sequence_lengths() -> list[list[int]]
    ///
    /// The LoD as lengths, top level first (Paddle's `recursive_sequence_lengths`).
    fn recursive_sequence_lengths(&self) -> Vec<Vec<u64>> {
        self.lod_ref().to_lengths()
    }

    /// set_recursive_sequence_lengths(lengths)
    ///
    /// Sets the LoD from lengths (e.g. `[[2, 3]]`). The levels must be
    /// consistent with each other (ValueError otherwise); as in Paddle, the
    /// rows are not checked here: see `has_valid_recursive_sequence_lengths`.
    fn set_recursive_sequence_lengths(&mut self, lengths: &Bound<'_, PyAny>) -> PyResult<()> {
        let lod = Lod::try_from_lengths(&levels(lengths)?).map_err(core_err)?;
        match self.state.clone() {
            State::Empty { .. } => self.state = State::Empty { lod },
            State::Ready(values) | State::Mismatch { values, .. } => self.put(values, lod)?,
        }
        Ok(())
    }

    /// has_valid_recursive_sequence_lengths() -> bool
    ///
    /// Whether the LoD fits the data (its last level ends at the number of rows).
    fn has_valid_recursive_sequence_lengths(&self) -> bool {
        match &self.state {
            State::Ready(_) => true,
            State::Mismatch { .. } => false,
            State::Empty { lod } => lod.is_empty(),
        }
    }

    /// validate()
    ///
    /// Raises ValueError (with the rule broken) unless the tensor has data
    /// and a LoD that fits it.
    fn validate(&self) -> PyResult<()> {
        self.tensor().map(drop)
    }

    /// shape() -> list[int]
    ///
    /// The shape of the data, `[rows, ...]` (`[]` for an empty or 0-D tensor).
    fn shape(&self) -> Vec<usize> {
        self.values()
            .map(|t| t.shape().to_vec())
            .unwrap_or_default()
    }

    /// The numpy name of the element type (`"float32"`, `"bfloat16"`, ...).
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(self.values()?.dtype().name())
    }

    /// The number of dimensions of the data.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// The number of LoD levels.
    #[getter]
    fn num_levels(&self) -> usize {
        self.lod_ref().num_levels()
    }

    /// The number of rows (`shape[0]`; 1 for a 0-D tensor).
    #[getter]
    fn rows(&self) -> PyResult<usize> {
        Ok(self.values()?.rows())
    }

    /// The shape of one row (`shape[1:]`).
    #[getter]
    fn element_shape(&self) -> PyResult<Vec<usize>> {
        Ok(self.values()?.element_shape().to_vec())
    }

    /// The number of bytes of the data.
    #[getter]
    fn nbytes(&self) -> PyResult<usize> {
        Ok(self.values()?.as_bytes().len())
    }

    /// num_sequences(level=0) -> int
    ///
    /// The number of sequences of LoD level `level`.
    #[pyo3(signature = (level = 0))]
    fn num_sequences(&self, level: usize) -> PyResult<usize> {
        self.tensor()?.lod().num_sequences(level).map_err(core_err)
    }

    /// segment_ids(level=0) -> numpy.ndarray
    ///
    /// The int64 segment id of every item of LoD level `level` (of every row,
    /// for the last level): the index of the sequence holding it, as JAX's
    /// `segment_sum` and TensorFlow's `value_rowids` take a LoD. Empty
    /// sequences own no item. Raises IndexError for a level the tensor lacks.
    #[pyo3(signature = (level = 0))]
    fn segment_ids<'py>(&self, py: Python<'py>, level: usize) -> PyResult<Bound<'py, PyAny>> {
        let lod = self.lod_ref();
        let levels = lod.num_levels();
        if level >= levels {
            return Err(index(format!(
                "segment_ids(level={level}): expected a level below {levels} (the tensor's LoD levels)"
            )));
        }
        let ids = py.detach(|| lod.level(level).map(|l| l.segment_ids()));
        let ids = ids
            .unwrap_or_else(|| Ok(Vec::new()))
            .map_err(core_err)?
            .into_iter()
            .map(|id| i64::try_from(id).map_err(|_| value("segment id does not fit int64")))
            .collect::<PyResult<Vec<i64>>>()?;
        Ok(numpy::PyArray1::from_vec(py, ids).into_any())
    }

    /// numpy(*, bfloat16_as_uint16=False) -> numpy.ndarray
    ///
    /// The data as a read-only numpy array sharing the tensor's memory (no
    /// copy). bfloat16 data needs `ml_dtypes` (`pip install 'lodt[bfloat16]'`),
    /// or `bfloat16_as_uint16=True` for the raw bits.
    #[pyo3(signature = (*, bfloat16_as_uint16 = false))]
    fn numpy<'py>(&self, py: Python<'py>, bfloat16_as_uint16: bool) -> PyResult<Bound<'py, PyAny>> {
        let t = self.values()?;
        let dtype = match t.dtype() {
            lodt::DType::BFloat16 if bfloat16_as_uint16 => lodt::DType::UInt16,
            d => d,
        };
        ffi::readonly_array(py, t.buffer(), descr(py, dtype)?, t.shape())
    }

    /// The numpy array protocol: `numpy.asarray(t)` is a read-only view of the
    /// data (no copy); `numpy.array(t)` a writable copy.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut array = self.numpy(py, false)?;
        if let Some(dtype) = dtype {
            let target = numpy::PyArrayDescr::new(py, dtype)?;
            if !array.getattr("dtype")?.eq(&target)? {
                if copy == Some(false) {
                    return Err(value(format!(
                        "cannot make a {} array of a {} tensor without a copy (copy=False)",
                        target,
                        self.values()?.dtype().name()
                    )));
                }
                return array.call_method1("astype", (target,));
            }
        }
        if copy == Some(true) {
            array = array.call_method0("copy")?;
        }
        Ok(array)
    }

    /// branch(*path) -> LodTensor
    ///
    /// The `<i, j, ...>`-slice: sequence `i` of level 0, then sequence `j`
    /// within it at level 1, and so on, with the levels below. O(levels);
    /// shares the data (no copy). `t.branch(2, 0)` is `t[2, 0]`.
    #[pyo3(signature = (*path))]
    fn branch(&self, py: Python<'_>, path: Vec<isize>) -> PyResult<Py<PyLodTensor>> {
        let t = self.tensor()?;
        if path.iter().any(|&i| i < 0) {
            // Negative indices count from the end of each level in turn.
            let mut cur = t.clone();
            for &i in &path {
                let n = cur.lod().num_sequences(0).map_err(core_err)?;
                let j = normalize(i, n, "branch")?;
                cur = core::sequence(&cur, 0, j).map_err(core_err)?;
            }
            return Self::wrap(py, cur);
        }
        let path: Vec<usize> = path.iter().map(|&i| i.unsigned_abs()).collect();
        Self::wrap(py, core::branch(t, &path).map_err(core_err)?)
    }

    /// sequence(level, index) -> LodTensor
    ///
    /// Sequence `index` of LoD level `level`, with the levels below it (no
    /// copy; Paddle's `Slice(level, index)`).
    fn sequence(&self, py: Python<'_>, level: usize, index: isize) -> PyResult<Py<PyLodTensor>> {
        let t = self.tensor()?;
        let n = t.lod().num_sequences(level).map_err(core_err)?;
        let i = normalize(index, n, "sequence")?;
        Self::wrap(py, core::sequence(t, level, i).map_err(core_err)?)
    }

    /// slice_level(level, begin, end) -> LodTensor
    ///
    /// Sequences `begin..end` of level `level`, which becomes the top level
    /// (Paddle's `LODSliceShared`). No copy.
    fn slice_level(
        &self,
        py: Python<'_>,
        level: usize,
        begin: usize,
        end: usize,
    ) -> PyResult<Py<PyLodTensor>> {
        let t = self.tensor()?;
        Self::wrap(
            py,
            core::slice_level(t, level, begin, end).map_err(core_err)?,
        )
    }

    /// slice_rows(begin, end) -> LodTensor
    ///
    /// Rows `begin..end` as a tensor with no LoD (no copy).
    fn slice_rows(&self, py: Python<'_>, begin: usize, end: usize) -> PyResult<Py<PyLodTensor>> {
        let t = self.tensor()?;
        Self::wrap(py, core::slice_rows(t, begin, end).map_err(core_err)?)
    }

    /// take(indices) -> LodTensor
    ///
    /// The top-level sequences `indices` (rows, for a tensor with no LoD),
    /// gathered in that order into a new tensor (a copy), with their LoD.
    fn take(&self, py: Python<'_>, indices: Vec<isize>) -> PyResult<Py<PyLodTensor>> {
        let t = self.tensor()?;
        let n = core::top_level_rows(t);
        let indices = indices
            .iter()
            .map(|&i| normalize(i, n, "take"))
            .collect::<PyResult<Vec<_>>>()?;
        let t = t.clone();
        let out = py.detach(move || core::take(&t, &indices));
        Self::wrap(py, out.map_err(core_err)?)
    }

    /// sequences(level=0) -> list[LodTensor]
    ///
    /// Every sequence of level `level`, in order, as tensors sharing the data.
    #[pyo3(signature = (level = 0))]
    fn sequences(&self, py: Python<'_>, level: usize) -> PyResult<Vec<Py<PyLodTensor>>> {
        let t = self.tensor()?;
        let n = t.lod().num_sequences(level).map_err(core_err)?;
        (0..n)
            .map(|i| Self::wrap(py, core::sequence(t, level, i).map_err(core_err)?))
            .collect()
    }

    /// The number of top-level sequences (rows, for a tensor with no LoD).
    fn __len__(&self) -> PyResult<usize> {
        let t = self.tensor()?;
        if t.shape().is_empty() {
            return Err(type_error("len() of a 0-D tensor"));
        }
        Ok(core::top_level_rows(t))
    }

    /// `t[i]`: top-level sequence `i` (row `i` with no LoD); `t[i, j, ...]`:
    /// `t.branch(i, j, ...)`; `t[a:b]`: top-level sequences (or rows) `a..b`
    /// keeping the LoD. Every result shares the data.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyLodTensor>> {
        if let Ok(i) = key.extract::<isize>() {
            return Self::wrap(py, self.item(i)?);
        }
        if let Ok(slice) = key.cast::<PySlice>() {
            let t = self.tensor()?;
            let n = core::top_level_rows(t);
            let s = slice.indices(isize::try_from(n).map_err(|_| value("too many rows"))?)?;
            if s.step != 1 {
                return Err(value("only slices with step 1 are supported"));
            }
            let begin = s.start.max(0).unsigned_abs();
            let end = s.stop.max(s.start).max(0).unsigned_abs();
            return Self::wrap(py, core::slice_top(t, begin, end).map_err(core_err)?);
        }
        if let Ok(path) = key.cast::<PyTuple>() {
            let path: Vec<isize> = path.extract()?;
            return self.branch(py, path);
        }
        Err(type_error(
            "a tensor is indexed by an int, a slice or a tuple of ints (a branch)",
        ))
    }

    /// Iterates over the top-level sequences (rows, with no LoD), sharing the data.
    fn __iter__(slf: PyRef<'_, Self>) -> PyResult<Bound<'_, PyAny>> {
        let py = slf.py();
        let n = slf.__len__()?;
        let items = (0..n)
            .map(|i| Self::wrap(py, slf.item(i.cast_signed())?))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)?.try_iter().map(Bound::into_any)
    }

    /// tolist() -> list
    ///
    /// The data as nested Python lists, one nesting per LoD level (the user
    /// guide's `LodTensor_to_Tensor`), rows as `numpy.ndarray.tolist` gives them.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.tensor()?;
        let mut items = self.numpy(py, false)?.call_method0("tolist")?;
        for level in core::offsets(t.lod()).iter().rev() {
            let list = items.cast_into::<PyList>()?;
            let grouped = level
                .windows(2)
                .map(|w| list.get_slice(w[0] as usize, w[1] as usize))
                .collect::<Vec<_>>();
            items = PyList::new(py, grouped)?.into_any();
        }
        Ok(items)
    }

    /// copy() -> LodTensor
    ///
    /// A copy of the data and LoD in fresh memory (detached from a file).
    fn copy(&self, py: Python<'_>) -> PyResult<Py<PyLodTensor>> {
        let t = self.tensor()?;
        Self::wrap(py, core::deep_copy(t))
    }

    fn __copy__(&self) -> Self {
        PyLodTensor {
            state: self.state.clone(),
        }
    }

    #[pyo3(signature = (memo = None))]
    fn __deepcopy__(&self, memo: Option<&Bound<'_, PyAny>>) -> Self {
        let _ = memo;
        // The data is immutable: sharing it is as good as copying it.
        self.__copy__()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        let Ok(other) = other.cast::<PyLodTensor>() else {
            return false;
        };
        let other = other.borrow();
        match (&self.state, &other.state) {
            (State::Ready(a), State::Ready(b)) => a == b,
            (State::Empty { lod: a }, State::Empty { lod: b }) => a == b,
            (State::Mismatch { values: a, lod: la }, State::Mismatch { values: b, lod: lb }) => {
                a == b && la == lb
            }
            _ => false,
        }
    }

    /// Tensors compare by value and are mutable (`set`): not hashable.
    #[classattr]
    const __hash__: Option<Py<PyAny>> = None;

    fn __repr__(&self) -> String {
        match &self.state {
            State::Empty { lod } => format!("LodTensor(empty, lod={:?})", core::offsets(lod)),
            State::Ready(t) => format!(
                "LodTensor(dtype={}, shape={:?}, recursive_sequence_lengths={:?})",
                t.dtype().name(),
                t.shape(),
                t.lod().to_lengths()
            ),
            State::Mismatch { values, lod } => format!(
                "LodTensor(dtype={}, shape={:?}, recursive_sequence_lengths={:?} (invalid for the rows))",
                values.dtype().name(),
                values.shape(),
                lod.to_lengths()
            ),
        }
    }

    /// Pickles by value (a tensor of a file pickles its bytes).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let module = py.import("lodt._lodt")?;
        let ctor = module.getattr("_tensor_from_state")?;
        let lod = core::offsets(&self.lod_ref());
        let fits = matches!(self.state, State::Ready(_));
        let args = match self.values() {
            Ok(t) => (
                Some(t.dtype().name()),
                t.shape().to_vec(),
                lod,
                Some(PyBytes::new(py, t.as_bytes())),
                fits,
            )
                .into_bound_py_any(py)?,
            Err(_) => (None::<&str>, Vec::<usize>::new(), lod, None::<&[u8]>, fits)
                .into_bound_py_any(py)?,
        };
        (ctor, args).into_bound_py_any(py)
    }

    /// __arrow_c_schema__() -> PyCapsule
    ///
    /// The Arrow field of the tensor (`spec/ARROW.md`), as an Arrow PyCapsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::arrow::tensor_schema(py, self.tensor()?)
    }

    /// __arrow_c_array__(requested_schema=None) -> (PyCapsule, PyCapsule)
    ///
    /// The tensor as an Arrow array (one row per top-level sequence; nested
    /// `LargeList`s over the values; an element shape as nested
    /// `FixedSizeList`s), sharing offsets and values (no copy but bools).
    /// A `requested_schema` (an Arrow schema capsule) is produced when it is
    /// one of lodt's mappings (e.g. the `arrow.fixed_shape_tensor`
    /// extension) or a cast arrow-rs can do; otherwise `ValueError`.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let requested = crate::arrow::requested(requested_schema)?;
        let options = lodt::arrow::ArrowOptions::default();
        crate::arrow::tensor_array(py, self.tensor()?, &options, requested.as_ref())
    }

    /// to_arrow(tensor_type="nested_lists") -> pyarrow.Array
    ///
    /// The tensor as a `pyarrow.Array` (no copy but bools), its element
    /// shape as nested fixed-size lists (`"nested_lists"`, the default), as
    /// the `arrow.fixed_shape_tensor` extension (`"fixed_shape"`), or (1
    /// LoD level) as an `arrow.variable_shape_tensor` (`"variable_shape"`).
    /// Needs pyarrow.
    #[pyo3(signature = (tensor_type = "nested_lists"))]
    fn to_arrow<'py>(&self, py: Python<'py>, tensor_type: &str) -> PyResult<Bound<'py, PyAny>> {
        crate::arrow::tensor_to_pyarrow(py, self.tensor()?, tensor_type)
    }

    /// LodTensor.from_arrow(obj) -> LodTensor
    ///
    /// A tensor from any object exporting the Arrow PyCapsule interface (an
    /// array, or a stream of arrays, which are concatenated), with the
    /// mapping of `spec/ARROW.md`. Values are shared when contiguous.
    #[staticmethod]
    fn from_arrow(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyLodTensor>> {
        Self::wrap(py, crate::arrow::tensor_from_arrow(obj)?)
    }

    /// to_torch(padded=False, pad_value=0)
    ///
    /// A 1-level tensor as a `torch.nested` jagged tensor sharing its values;
    /// with `padded=True`, any tensor as `(padded, lengths)`. Needs torch
    /// (`pip install 'lodt[torch]'`).
    #[pyo3(signature = (padded = false, pad_value = None))]
    fn to_torch<'py>(
        slf: &Bound<'py, Self>,
        padded: bool,
        pad_value: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let module = slf.py().import("lodt.torch")?;
        module.call_method1("to_torch", (slf, padded, pad_value))
    }

    /// LodTensor.from_torch(tensor) -> LodTensor
    ///
    /// A tensor from a `torch.nested` jagged tensor (1 LoD level) or a dense
    /// torch tensor (no LoD). Needs torch.
    #[staticmethod]
    fn from_torch<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let module = obj.py().import("lodt.torch")?;
        module.call_method1("from_torch", (obj,))
    }

    /// to_tf() -> tf.RaggedTensor
    ///
    /// The tensor as `tf.RaggedTensor.from_nested_row_splits` over every LoD
    /// level (a dense `tf.Tensor` with no LoD); the values and row splits are
    /// copied into TensorFlow. Needs TensorFlow (`pip install 'lodt[tf]'`).
    fn to_tf<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("lodt.tf")?.call_method1("to_tf", (slf,))
    }

    /// LodTensor.from_tf(tensor) -> LodTensor
    ///
    /// A tensor from a `tf.RaggedTensor` (one LoD level per ragged dimension,
    /// int32 or int64 row splits) or a dense `tf.Tensor` (no LoD); a copy.
    /// Needs TensorFlow.
    #[staticmethod]
    fn from_tf<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        obj.py().import("lodt.tf")?.call_method1("from_tf", (obj,))
    }

    /// to_jax() -> lodt.jax.JaxLod
    ///
    /// The values, the offsets and the segment ids of every LoD level as JAX
    /// arrays (`lodt.jax.JaxLod`). Needs JAX (`pip install 'lodt[jax]'`).
    fn to_jax<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("lodt.jax")?.call_method1("to_jax", (slf,))
    }

    /// LodTensor.from_jax(values, offsets=()) -> LodTensor
    ///
    /// A tensor from JAX arrays: the values and one offsets array per LoD
    /// level, top level first (or a `lodt.jax.JaxLod`); a copy. Needs JAX.
    #[staticmethod]
    #[pyo3(signature = (values, offsets = None))]
    fn from_jax<'py>(
        values: &Bound<'py, PyAny>,
        offsets: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        values
            .py()
            .import("lodt.jax")?
            .call_method1("from_jax", (values, offsets))
    }
}
