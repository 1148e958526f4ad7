//! Python bindings of lodt: the native module `lodt._lodt`, wrapped by the
//! pure-Python package `lodt` (`python/lodt/`).
//!
//! | module    | what |
//! |-----------|------|
//! | `core`    | every call into lodt's slicing/gathering core (one place to adapt) |
//! | `ffi`     | all `unsafe`: zero-copy numpy arrays, Arrow C data import |
//! | `tensor`  | `LodTensor` (Paddle's `LoDTensor` API, slicing, numpy, Arrow, torch) |
//! | `nested`  | `from_nested`, `lod_from_row_offsets`: nested sequences and row offsets to LoD |
//! | `batch`   | `Batch` (a mapping of names to tensors) |
//! | `dataset` | `DatasetReader`, `DatasetLoader`: sharded datasets and their loader |
//! | `checkpoint` | `checkpoint_from_json`, ...: a rank's checkpoint, its worker rotation, consumer numbers |
//! | `mixture` | `MixtureReader`: weighted mixtures of datasets, read by `DatasetLoader` |
//! | `dataset_writer` | `DatasetWriter`, `commit_parts`, `write_index` |
//! | `parts`   | `list_parts`, `remove_parts`, `PartJob`, the object names, `is_uri` |
//! | `plan`    | `plan_reads`: Ray Data's read tasks |
//! | `file`    | `File`, `Writer`, `save`, `verify`, `recover`, `convert`, Paddle files |
//! | `ops`     | `sequence_expand`, `split`, `merge`, `pad`, `unpad`, `SortedSequences` |
//! | `arrow`   | the Arrow PyCapsule interface |
//! | `dtype`   | numpy dtypes |
//! | `error`   | lodt errors as Python exceptions |
//! | `panic`   | every Rust panic a `RuntimeError`; the internal panic probe |
#![deny(unsafe_code)]

mod arrow;
mod batch;
mod checkpoint;
mod core;
mod dataset;
mod dataset_writer;
mod dtype;
mod error;
mod ffi;
mod file;
mod loader;
mod mixture;
mod nested;
mod ops;
mod pack;
mod panic;
mod parts;
mod plan;
mod tensor;
mod versions;

use pyo3::prelude::*;

/// The native part of the `lodt` package.
#[pymodule]
fn _lodt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    panic::panics_are_runtime_errors(m.py())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<tensor::PyLodTensor>()?;
    m.add_class::<batch::PyBatch>()?;
    m.add_class::<file::PyFile>()?;
    m.add_class::<file::PyWriter>()?;
    m.add_class::<file::BatchIter>()?;
    m.add_class::<ops::PySortedSequences>()?;
    m.add_class::<ffi::StorageOwner>()?;
    m.add_class::<panic::PanicProbe>()?;
    m.add_function(wrap_pyfunction!(panic::_panic_for_tests, m)?)?;
    m.add_class::<dataset::PyDatasetReader>()?;
    m.add_class::<loader::PyDatasetLoader>()?;
    m.add_class::<loader::PyPacking>()?;
    m.add_function(wrap_pyfunction!(loader::loader, m)?)?;
    m.add_class::<mixture::PyMixtureReader>()?;
    m.add_class::<dataset_writer::PyDatasetWriter>()?;
    m.add_function(wrap_pyfunction!(dataset::merge_loader_states, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::_panic_for_test, m)?)?;
    m.add_function(wrap_pyfunction!(dataset_writer::commit_parts, m)?)?;
    m.add_function(wrap_pyfunction!(dataset_writer::write_index, m)?)?;
    m.add_function(wrap_pyfunction!(versions::dataset_log, m)?)?;
    m.add_function(wrap_pyfunction!(versions::dataset_tags, m)?)?;
    m.add_function(wrap_pyfunction!(versions::tag_dataset, m)?)?;
    m.add_class::<parts::PyPartJob>()?;
    m.add_function(wrap_pyfunction!(parts::list_parts, m)?)?;
    m.add_function(wrap_pyfunction!(parts::remove_parts, m)?)?;
    m.add_function(wrap_pyfunction!(parts::is_uri, m)?)?;
    m.add_function(wrap_pyfunction!(parts::join_location, m)?)?;
    parts::add_names(m)?;
    m.add_function(wrap_pyfunction!(tensor::_tensor_from_state, m)?)?;
    m.add_function(wrap_pyfunction!(file::open, m)?)?;
    m.add_function(wrap_pyfunction!(file::save, m)?)?;
    m.add_function(wrap_pyfunction!(file::verify, m)?)?;
    m.add_function(wrap_pyfunction!(file::recover, m)?)?;
    m.add_function(wrap_pyfunction!(file::convert, m)?)?;
    m.add_function(wrap_pyfunction!(file::read_paddle, m)?)?;
    m.add_function(wrap_pyfunction!(file::read_paddle_combined, m)?)?;
    m.add_function(wrap_pyfunction!(file::write_paddle, m)?)?;
    m.add_function(wrap_pyfunction!(ops::sequence_expand, m)?)?;
    m.add_function(wrap_pyfunction!(ops::split, m)?)?;
    m.add_function(wrap_pyfunction!(ops::merge, m)?)?;
    m.add_function(wrap_pyfunction!(ops::pad, m)?)?;
    m.add_function(wrap_pyfunction!(ops::unpad, m)?)?;
    m.add_function(wrap_pyfunction!(pack::varlen, m)?)?;
    m.add_function(wrap_pyfunction!(pack::row_cu_seqlens, m)?)?;
    checkpoint::add(m)?;
    m.add_function(wrap_pyfunction!(nested::from_nested, m)?)?;
    m.add_function(wrap_pyfunction!(nested::lod_from_row_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan_reads, m)?)?;
    Ok(())
}
