//! `lodt.Batch`: a mini-batch, a read-only mapping of names to tensors plus
//! string metadata.

use crate::error::{PyResult, core as core_err, type_error};
use crate::tensor::{PyLodTensor, normalize, to_tensor};
use lodt::Batch;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyTuple};
use std::collections::BTreeMap;

/// A mini-batch: named tensors in order (a read-only mapping, as a `dict`
/// of names to `LodTensor`s) and string key/value metadata.
///
/// `Batch({"words": words, "labels": labels}, metadata={"split": "train"})`
/// takes `LodTensor`s or arrays (copied, with no LoD).
#[pyclass(name = "Batch", module = "lodt", frozen, weakref)]
pub struct PyBatch {
    batch: Batch,
}

impl PyBatch {
    /// A Python batch holding `batch`.
    pub fn new(batch: Batch) -> Self {
        PyBatch { batch }
    }

    /// The batch.
    pub fn batch(&self) -> &Batch {
        &self.batch
    }
}

/// Metadata from Python: a mapping of str to str.
pub fn metadata(obj: Option<&Bound<'_, PyAny>>) -> PyResult<BTreeMap<String, String>> {
    match obj {
        None => Ok(BTreeMap::new()),
        Some(m) if m.is_none() => Ok(BTreeMap::new()),
        Some(m) => m
            .extract::<BTreeMap<String, String>>()
            .map_err(|_| type_error("metadata is a mapping of str to str")),
    }
}

/// A batch from a `Batch` (shared) or a mapping of names to tensor-likes.
pub fn to_batch(obj: &Bound<'_, PyAny>) -> PyResult<Batch> {
    if let Ok(b) = obj.cast::<PyBatch>() {
        return Ok(b.get().batch.clone());
    }
    if let Ok(m) = obj.cast::<PyMapping>() {
        let mut batch = Batch::new();
        for item in m.items()?.iter() {
            let (name, value): (String, Bound<'_, PyAny>) = item.extract()?;
            batch.push(name, to_tensor(&value)?).map_err(core_err)?;
        }
        return Ok(batch);
    }
    if obj.hasattr("__arrow_c_array__")? || obj.hasattr("__arrow_c_stream__")? {
        return crate::arrow::batch_from_arrow(obj);
    }
    Err(type_error(format!(
        "expected a Batch, a mapping of names to tensors, or an Arrow record batch; found {}",
        obj.get_type().name()?
    )))
}

#[pymethods]
impl PyBatch {
    /// Batch(tensors=None, metadata=None)
    ///
    /// A batch of `tensors` (a mapping or an iterable of `(name, tensor)`
    /// pairs; names non-empty and unique) with `metadata` (str to str).
    #[new]
    #[pyo3(signature = (tensors = None, metadata = None))]
    fn py_new(
        tensors: Option<&Bound<'_, PyAny>>,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut batch = match tensors {
            None => Batch::new(),
            Some(t) if t.cast::<PyMapping>().is_ok() || t.cast::<PyBatch>().is_ok() => to_batch(t)?,
            Some(t) => {
                let mut batch = Batch::new();
                for item in t.try_iter()? {
                    let (name, value): (String, Bound<'_, PyAny>) = item?.extract()?;
                    batch.push(name, to_tensor(&value)?).map_err(core_err)?;
                }
                batch
            }
        };
        if metadata.is_some() {
            *batch.metadata_mut() = crate::batch::metadata(metadata)?;
        }
        Ok(PyBatch { batch })
    }

    fn __len__(&self) -> usize {
        self.batch.len()
    }

    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyLodTensor>> {
        match self.batch.get(name) {
            Some(t) => Py::new(py, PyLodTensor::new(t.clone())),
            None => Err(PyKeyError::new_err(name.to_owned())),
        }
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        name.extract::<String>()
            .is_ok_and(|n| self.batch.get(&n).is_some())
    }

    /// Iterates over the tensor names, in order.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.batch.names())?.try_iter()?.into_any())
    }

    /// keys() -> list[str]
    ///
    /// The tensor names, in order.
    fn keys(&self) -> Vec<String> {
        self.batch.names().map(str::to_owned).collect()
    }

    /// values() -> list[LodTensor]
    ///
    /// The tensors, in order.
    fn values(&self, py: Python<'_>) -> PyResult<Vec<Py<PyLodTensor>>> {
        self.batch
            .iter()
            .map(|(_, t)| Py::new(py, PyLodTensor::new(t.clone())))
            .collect()
    }

    /// items() -> list[tuple[str, LodTensor]]
    ///
    /// `(name, tensor)` pairs, in order.
    fn items(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyLodTensor>)>> {
        self.batch
            .iter()
            .map(|(n, t)| Ok((n.to_owned(), Py::new(py, PyLodTensor::new(t.clone()))?)))
            .collect()
    }

    /// get(name, default=None)
    ///
    /// The tensor named `name`, or `default`.
    #[pyo3(signature = (name, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.batch.get(name) {
            Some(t) => PyLodTensor::new(t.clone()).into_bound_py_any(py),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// The batch's metadata (a new dict of str to str).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.batch.metadata() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The number of top-level rows (sequences, or rows of a tensor with no
    /// LoD) of the first tensor; 0 for an empty batch.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.top_level_rows()
    }

    /// take(indices) -> Batch
    ///
    /// Top-level rows `indices` of every tensor, gathered into a new batch
    /// (a copy); every tensor must have as many top-level rows.
    fn take(&self, py: Python<'_>, indices: Vec<isize>) -> PyResult<Self> {
        let n = self.num_rows();
        let indices = indices
            .iter()
            .map(|&i| normalize(i, n, "take"))
            .collect::<PyResult<Vec<_>>>()?;
        let batch = self.batch.clone();
        let out = py.detach(move || batch.take(&indices));
        Ok(PyBatch {
            batch: out.map_err(core_err)?,
        })
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyBatch>()
            .is_ok_and(|o| o.get().batch == self.batch)
    }

    /// Batches compare by value: not hashable.
    #[classattr]
    const __hash__: Option<Py<PyAny>> = None;

    fn __repr__(&self) -> String {
        let tensors: Vec<String> = self
            .batch
            .iter()
            .map(|(n, t)| {
                format!(
                    "{n}: {} {:?} lod {} levels",
                    t.dtype().name(),
                    t.shape(),
                    t.lod().num_levels()
                )
            })
            .collect();
        format!(
            "Batch({{{}}}, metadata={:?})",
            tensors.join(", "),
            self.batch.metadata()
        )
    }

    /// Pickles by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cls = py.import("lodt")?.getattr("Batch")?;
        let tensors = PyList::new(py, self.items(py)?)?;
        let args = PyTuple::new(py, [tensors.into_any(), self.metadata(py)?.into_any()])?;
        (cls, args).into_bound_py_any(py)
    }

    /// __arrow_c_schema__() -> PyCapsule
    ///
    /// The batch's Arrow schema (one field per tensor; the metadata).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::arrow::batch_schema(py, &self.batch)
    }

    /// __arrow_c_array__(requested_schema=None) -> (PyCapsule, PyCapsule)
    ///
    /// The batch as an Arrow record batch (a struct array), sharing every
    /// buffer. Every tensor must have as many top-level rows. A
    /// `requested_schema` (same columns, in order) is produced when each
    /// column's type is one of lodt's mappings or a cast arrow-rs can do;
    /// otherwise `ValueError`.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let requested = crate::arrow::requested(requested_schema)?;
        let options = lodt::arrow::ArrowOptions::default();
        crate::arrow::batch_array(py, &self.batch, &options, requested.as_ref())
    }

    /// to_arrow(tensor_type="nested_lists") -> pyarrow.RecordBatch
    ///
    /// The batch as a `pyarrow.RecordBatch` (no copy but bools), element
    /// shapes as nested fixed-size lists (`"nested_lists"`, the default), as
    /// the `arrow.fixed_shape_tensor` extension (`"fixed_shape"`), or its
    /// 1-level tensors as `arrow.variable_shape_tensor` columns
    /// (`"variable_shape"`).
    /// Needs pyarrow.
    #[pyo3(signature = (tensor_type = "nested_lists"))]
    fn to_arrow<'py>(&self, py: Python<'py>, tensor_type: &str) -> PyResult<Bound<'py, PyAny>> {
        crate::arrow::batch_to_pyarrow(py, &self.batch, tensor_type)
    }

    /// __arrow_c_stream__(requested_schema=None) -> PyCapsule
    ///
    /// The batch as an Arrow stream of one record batch (a
    /// `requested_schema` as for `__arrow_c_array__`).
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let requested = crate::arrow::requested(requested_schema)?;
        crate::arrow::batch_stream(py, &self.batch, requested.as_ref())
    }

    /// Batch.from_arrow(obj) -> Batch
    ///
    /// A batch from any object exporting the Arrow PyCapsule interface: a
    /// record batch, or a stream of them (a table), concatenated.
    #[staticmethod]
    fn from_arrow(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyBatch {
            batch: crate::arrow::batch_from_arrow(obj)?,
        })
    }
}
