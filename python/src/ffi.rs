//! The crate's only `unsafe` code: handing tensor bytes to numpy with no
//! copy, and taking Arrow C data interface structures out of PyCapsules.
//!
//! Zero copy to numpy: [`readonly_array`] makes a numpy array whose data
//! pointer is the tensor's bytes and whose `base` is a [`StorageOwner`]
//! holding an `Arc` of the tensor's storage (an aligned buffer, or the memory
//! map of a `.lodt` file). numpy keeps the base alive while any array (or view
//! of one) refers to it, so the bytes outlive every array; the array is
//! read-only because lodt storages are shared and never written in place.

#![allow(unsafe_code)]

use crate::error::{PyResult, value};
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::{ArrayStreamReader, FFI_ArrowArrayStream};
use arrow_data::ArrayData;
use arrow_schema::Field;
use lodt::buffer::Buffer;
use numpy::npyffi::{NpyTypes, PY_ARRAY_API, PyArrayObject, get_type_object, npy_intp};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};
use std::ffi::CStr;

/// Keeps a tensor's bytes (a window of a shared storage) alive for as long as
/// numpy arrays use them (the `base` of every array lodt hands out).
#[pyclass(frozen, module = "lodt._lodt", name = "_StorageOwner")]
pub struct StorageOwner {
    buffer: Buffer,
}

#[pymethods]
impl StorageOwner {
    /// The address and length of the bytes kept alive.
    fn span(&self) -> (usize, usize) {
        let bytes = self.buffer.as_slice();
        (bytes.as_ptr() as usize, bytes.len())
    }
}

/// A read-only numpy array of `shape` and dtype `descr` over the bytes of
/// `buffer`, with no copy; the array keeps the buffer's storage alive.
pub fn readonly_array<'py>(
    py: Python<'py>,
    buffer: &Buffer,
    descr: Bound<'py, PyArrayDescr>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = buffer.as_slice();
    let itemsize = descr.itemsize();
    let numel = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if numel.and_then(|n| n.checked_mul(itemsize)) != Some(bytes.len()) {
        return Err(value(format!(
            "cannot view {} bytes as shape {shape:?} of {itemsize}-byte items",
            bytes.len()
        )));
    }
    if !(bytes.as_ptr() as usize).is_multiple_of(descr.alignment().max(1)) {
        return Err(value("tensor bytes are misaligned for their dtype"));
    }
    let mut dims = shape
        .iter()
        .map(|&d| npy_intp::try_from(d).map_err(|_| value("dimension too large for numpy")))
        .collect::<PyResult<Vec<npy_intp>>>()?;
    let nd = std::ffi::c_int::try_from(dims.len()).map_err(|_| value("too many dimensions"))?;
    let owner = Bound::new(
        py,
        StorageOwner {
            buffer: buffer.clone(),
        },
    )?;
    // SAFETY: `PyArray_NewFromDescr` is called attached to the interpreter
    // with numpy's array type, a descriptor reference it steals, `nd` dims,
    // no strides (C order), and a data pointer to `bytes`, which holds exactly
    // prod(shape) × itemsize bytes (checked above), aligned for the dtype
    // (checked above). Flags 0: the array does not own the data and is not
    // writeable (lodt storages are shared and must not be written). It
    // returns a new reference or null with a Python error set.
    let array = unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            get_type_object(py, NpyTypes::PyArray_Type),
            descr.into_dtype_ptr(),
            nd,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            bytes.as_ptr() as *mut std::ffi::c_void,
            0,
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, ptr)?
    };
    // SAFETY: `array` is the numpy array just made; `PyArray_SetBaseObject`
    // steals the reference to `owner` (also on failure), which keeps the
    // buffer's storage, and so the bytes the array points at, alive until
    // numpy drops the array and every view whose base chain leads to it.
    // Storages never move or change their bytes while shared (the
    // `ByteStorage` contract).
    let status = unsafe {
        PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            array.as_ptr().cast::<PyArrayObject>(),
            owner.into_ptr(),
        )
    };
    if status != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(array)
}

/// The name of Arrow C data interface capsules.
pub const SCHEMA_CAPSULE: &CStr = c"arrow_schema";
/// The name of Arrow C data interface capsules.
pub const ARRAY_CAPSULE: &CStr = c"arrow_array";
/// The name of Arrow C stream interface capsules.
pub const STREAM_CAPSULE: &CStr = c"arrow_array_stream";

/// Moves the schema out of an `arrow_schema` capsule (leaving it released).
pub fn take_schema(capsule: &Bound<'_, PyAny>) -> PyResult<FFI_ArrowSchema> {
    let capsule = capsule.cast::<PyCapsule>()?;
    let ptr = capsule.pointer_checked(Some(SCHEMA_CAPSULE))?;
    // SAFETY: a capsule named "arrow_schema" holds a pointer to an
    // `ArrowSchema` struct (the Arrow PyCapsule interface). `from_raw` moves
    // it out and marks the original released, so the capsule's destructor
    // does not release it a second time.
    let schema = unsafe { FFI_ArrowSchema::from_raw(ptr.as_ptr().cast()) };
    if schema.release().is_none() {
        return Err(consumed("schema"));
    }
    Ok(schema)
}

/// The field an `arrow_schema` capsule describes, read without taking it:
/// the capsule stays its owner's (a `requested_schema` belongs to the
/// consumer that passes it, which releases it).
pub fn read_schema(capsule: &Bound<'_, PyAny>) -> PyResult<Field> {
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
        crate::error::type_error("requested_schema must be an Arrow schema PyCapsule")
    })?;
    let ptr = capsule.pointer_checked(Some(SCHEMA_CAPSULE))?;
    // SAFETY: a capsule named "arrow_schema" holds a pointer to a valid
    // `ArrowSchema` struct (the Arrow PyCapsule interface) that the capsule
    // owns and keeps alive while we hold `capsule`; it is only read here,
    // not moved or released.
    let schema = unsafe { &*ptr.as_ptr().cast::<FFI_ArrowSchema>() };
    if schema.release().is_none() {
        return Err(consumed("schema"));
    }
    Field::try_from(schema).map_err(crate::error::arrow_rs)
}

/// The error of a capsule whose structure was already moved out (released):
/// a capsule can be imported once.
fn consumed(what: &str) -> PyErr {
    value(format!(
        "the Arrow {what} capsule was already consumed (released): expected a fresh capsule \
         from __arrow_c_array__/__arrow_c_stream__, found a released {what}"
    ))
}

/// Moves the array out of an `arrow_array` capsule and imports it with its
/// schema; the data is shared with the producer (no copy).
pub fn take_array(capsule: &Bound<'_, PyAny>, schema: &FFI_ArrowSchema) -> PyResult<ArrayData> {
    let capsule = capsule.cast::<PyCapsule>()?;
    let ptr = capsule.pointer_checked(Some(ARRAY_CAPSULE))?;
    // SAFETY: a capsule named "arrow_array" holds a pointer to an
    // `ArrowArray` struct (the Arrow PyCapsule interface), which `from_raw`
    // moves out, marking the original released; its release callback then
    // runs when the last imported buffer is dropped.
    let array = unsafe { FFI_ArrowArray::from_raw(ptr.as_ptr().cast()) };
    if array.is_released() {
        return Err(consumed("array"));
    }
    // SAFETY: `array` and `schema` come from one producer's
    // `__arrow_c_array__` call, which pairs an array with its schema.
    // `from_ffi` checks the buffer counts and lengths against the type and
    // realigns under-aligned buffers, and `ArrayData` is validated by the
    // caller (`validate_full`) before use.
    let data =
        unsafe { arrow_array::ffi::from_ffi(array, schema) }.map_err(crate::error::arrow_rs)?;
    data.validate_full().map_err(crate::error::arrow_rs)?;
    Ok(data)
}

/// Moves the stream out of an `arrow_array_stream` capsule; returns the
/// field it describes (a struct for a stream of record batches) and a
/// reader of its arrays.
pub fn take_stream(capsule: &Bound<'_, PyAny>) -> PyResult<(Field, ArrayStreamReader)> {
    let capsule = capsule.cast::<PyCapsule>()?;
    let ptr = capsule.pointer_checked(Some(STREAM_CAPSULE))?;
    // SAFETY: a capsule named "arrow_array_stream" holds a pointer to an
    // `ArrowArrayStream` struct (the Arrow PyCapsule interface); `from_raw`
    // moves it out, marking the original released.
    let mut stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr().cast()) };
    if stream.release().is_none() {
        return Err(consumed("stream"));
    }
    let get_schema = stream
        .get_schema()
        .ok_or_else(|| value("the Arrow stream has no get_schema callback"))?;
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: `get_schema` is the stream's own callback, called with that
    // stream (moved out of the capsule, not released) and an empty schema to
    // fill, as the C stream interface specifies; the schema is released when
    // dropped.
    let status = unsafe { get_schema(&raw mut stream, &raw mut schema) };
    if status != 0 {
        return Err(value(format!(
            "the Arrow stream failed to give its schema (error {status})"
        )));
    }
    let field = Field::try_from(&schema).map_err(crate::error::arrow_rs)?;
    let reader = ArrayStreamReader::try_new(stream).map_err(crate::error::arrow_rs)?;
    Ok((field, reader))
}
