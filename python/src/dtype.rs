//! numpy dtypes <-> lodt dtypes, and numpy arrays -> tensors.

use crate::error::{PyResult, type_error, value};
use lodt::buffer::AlignedBytes;
use lodt::{DType, Lod, LodTensor};
use numpy::{PyArray1, PyArrayDescr, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;

/// The ImportError for a missing optional dependency, naming the extra that installs it.
pub fn missing_extra(what: &str, module: &str, extra: &str) -> PyErr {
    PyImportError::new_err(format!(
        "{what} needs the optional dependency {module}: pip install 'lodt[{extra}]' (or pip install {module})"
    ))
}

/// The numpy dtype of a lodt dtype; bfloat16 is `ml_dtypes.bfloat16`.
pub fn descr(py: Python<'_>, dtype: DType) -> PyResult<Bound<'_, PyArrayDescr>> {
    if dtype == DType::BFloat16 {
        let ml = py
            .import("ml_dtypes")
            .map_err(|_| missing_extra("a bfloat16 tensor as numpy", "ml_dtypes", "bfloat16"))?;
        return PyArrayDescr::new(py, ml.getattr("bfloat16")?);
    }
    // numpy's own dtype for every other element type (the crate's one
    // dtype dispatch).
    Ok(lodt::with_element!(dtype, T => numpy::dtype::<T>(py)))
}

/// The lodt dtype of a numpy dtype name.
pub fn from_name(name: &str) -> PyResult<DType> {
    name.parse::<DType>().map_err(|_| {
        type_error(format!(
            "unsupported dtype {name}: lodt tensors hold bool, int8..int64, uint8..uint64, \
             float16, bfloat16, float32 or float64"
        ))
    })
}

/// A tensor holding a copy of a numpy array (or anything `numpy.asarray`
/// accepts: nested lists, scalars, buffers), with LoD `lod`.
pub fn tensor_from_numpy(obj: &Bound<'_, PyAny>, lod: Lod) -> PyResult<LodTensor> {
    let py = obj.py();
    let np = py.import("numpy")?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("order", "C")?;
    let mut array = np.call_method("asarray", (obj,), Some(&kwargs))?;
    let mut dtype = array.getattr("dtype")?;
    if !dtype.getattr("isnative")?.extract::<bool>()? {
        dtype = dtype.call_method1("newbyteorder", ("=",))?;
        array = array.call_method1("astype", (&dtype,))?;
    }
    let name: String = dtype.getattr("name")?.extract()?;
    let dtype = from_name(&name)?;
    let untyped = array.cast::<PyUntypedArray>()?;
    let shape = untyped.shape().to_vec();
    // Every dtype as its bytes: bools are checked by the tensor (a numpy bool
    // array may hold other bytes), bfloat16 needs no ml_dtypes here.
    let flat = array
        .call_method1("reshape", (-1,))?
        .call_method1("view", ("uint8",))?;
    let flat = flat.cast::<PyArray1<u8>>()?.readonly();
    let bytes = flat
        .as_slice()
        .map_err(|e| value(format!("reading the array's bytes: {e}")))?;
    let data = AlignedBytes::from_slice(bytes);
    LodTensor::try_new(dtype, shape, data, lod).map_err(crate::error::core)
}
