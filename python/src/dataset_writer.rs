//! Writing sharded datasets: `_lodt.DatasetWriter` (create, append, or one
//! part of a parallel write) and `_lodt.commit_parts`. The pure-Python
//! `lodt.write_dataset` wraps them.

use crate::batch::{metadata, to_batch};
use crate::error::{PyResult, dataset as dataset_err, guard, value};
use lodt::dataset::{DEFAULT_SHARD_BYTES, Dataset, DatasetWriter, Manifest, WriterOptions};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Mutex;

/// Writes a sharded dataset batch by batch: shards of about `shard_bytes`
/// each, the manifest last and atomically (on `close`).
///
/// `mode` is `"create"` (a new dataset; refused if one exists), `"append"`
/// (more shards for an existing dataset, under its writer lock) or
/// `"part"` (one of several parallel writers, with `writer_id`; join the
/// parts with `commit_parts`). Leaving a `with` block on an exception
/// abandons the write: the manifest is unchanged.
#[pyclass(name = "DatasetWriter", module = "lodt", frozen)]
pub struct PyDatasetWriter {
    writer: Mutex<Option<DatasetWriter>>,
    path: PathBuf,
}

/// A manifest's summary: `{"shards", "batches", "sequences", "bytes"}`.
fn summary(py: Python<'_>, m: &Manifest) -> PyResult<Py<pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    d.set_item("shards", m.num_shards())?;
    d.set_item("batches", m.num_batches())?;
    d.set_item("sequences", m.num_sequences())?;
    d.set_item("bytes", m.num_bytes())?;
    Ok(d.unbind())
}

impl PyDatasetWriter {
    fn take(&self) -> PyResult<Option<DatasetWriter>> {
        Ok(self
            .writer
            .lock()
            .map_err(|_| value("writer poisoned"))?
            .take())
    }
}

#[pymethods]
impl PyDatasetWriter {
    /// DatasetWriter(path, *, mode="create", shard_bytes=256 MiB, metadata=None,
    ///               writer_id=None, fsync=True, storage_options=None)
    ///
    /// `path` may be a URI of S3, Azure or GCS (`storage_options` configure
    /// the store): shards are uploaded, and the manifest is committed by a
    /// conditional put (a concurrent writer's commit makes `close` raise).
    #[new]
    #[pyo3(signature = (path, *, mode = "create", shard_bytes = DEFAULT_SHARD_BYTES,
        metadata = None, writer_id = None, fsync = true, storage_options = None))]
    // Python's keyword arguments, one parameter each.
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        path: PathBuf,
        mode: &str,
        shard_bytes: u64,
        metadata: Option<&Bound<'_, PyAny>>,
        writer_id: Option<String>,
        fsync: bool,
        storage_options: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        if shard_bytes == 0 {
            return Err(value("shard_bytes must be at least 1"));
        }
        let options = WriterOptions {
            shard_bytes,
            metadata: self::metadata(metadata)?,
            schema: None,
        };
        match (mode, &writer_id) {
            ("create" | "append", None) | ("part", Some(_)) => {}
            ("part", None) => return Err(value("mode=\"part\" needs a writer_id")),
            ("create" | "append", Some(_)) => {
                return Err(value(
                    "writer_id is for mode=\"part\" (parallel writers); create and append write the dataset's own shards",
                ));
            }
            (other, _) => {
                return Err(value(format!(
                    "mode must be \"create\", \"append\" or \"part\", found {other:?}"
                )));
            }
        }
        let mode = mode.to_owned();
        let p = path.clone();
        let writer = py.detach(move || {
            guard("starting a dataset writer", || {
                let open =
                    crate::file::open_options(true, false, storage_options).with_fsync(fsync);
                let store = crate::dataset::store_at(&p, &open)?;
                match (mode.as_str(), writer_id) {
                    ("append", _) => DatasetWriter::append_in(store, options),
                    ("part", Some(id)) => DatasetWriter::create_part_in(store, &id, options),
                    _ => DatasetWriter::create_in(store, options),
                }
                .map_err(dataset_err)
            })
        })?;
        Ok(PyDatasetWriter {
            writer: Mutex::new(Some(writer)),
            path,
        })
    }

    /// write(batch)
    ///
    /// Writes one batch (a `Batch` or a mapping of names to tensors or
    /// arrays); every batch must match the dataset's schema (the first one
    /// sets it for a new dataset): a batch that does not is refused with
    /// ValueError and nothing of it is written.
    fn write(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<()> {
        let batch = to_batch(batch)?;
        py.detach(|| {
            guard("writing a batch", || {
                let mut slot = self.writer.lock().map_err(|_| value("writer poisoned"))?;
                let w = slot
                    .as_mut()
                    .ok_or_else(|| value("the dataset writer is closed"))?;
                w.write(&batch).map_err(dataset_err)
            })
        })
    }

    /// flush()
    ///
    /// Closes the shard being written and replaces the manifest: everything
    /// written so far becomes visible (a checkpoint of a long write).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            guard("flushing a dataset writer", || {
                let mut slot = self.writer.lock().map_err(|_| value("writer poisoned"))?;
                let w = slot
                    .as_mut()
                    .ok_or_else(|| value("the dataset writer is closed"))?;
                w.flush().map_err(dataset_err)
            })
        })
    }

    /// The number of batches written by this writer.
    #[getter]
    fn batches_written(&self) -> PyResult<u64> {
        let slot = self.writer.lock().map_err(|_| value("writer poisoned"))?;
        Ok(slot.as_ref().map_or(0, DatasetWriter::batches_written))
    }

    /// The dataset's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// close() -> dict | None
    ///
    /// Closes the last shard and writes the manifest; returns the dataset's
    /// (or the part's) totals `{"shards", "batches", "sequences", "bytes"}`
    /// (None when already closed).
    fn close(&self, py: Python<'_>) -> PyResult<Option<Py<pyo3::types::PyDict>>> {
        let Some(w) = self.take()? else {
            return Ok(None);
        };
        let manifest =
            py.detach(move || guard("finishing a dataset", || w.finish().map_err(dataset_err)))?;
        Ok(Some(summary(py, &manifest)?))
    }

    /// abort()
    ///
    /// Stops writing without replacing the manifest (shards closed so far
    /// stay unlisted).
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(w) = self.take()? {
            py.detach(move || drop(w));
        }
        Ok(())
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type, _exc_value = None, _traceback = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|e| !e.is_none()) {
            self.abort(py)?;
        } else {
            self.close(py)?;
        }
        Ok(false)
    }
}

/// commit_parts(path, storage_options=None) -> dict
///
/// Merges the partial manifests of parallel writers (`mode="part"`) into
/// the dataset's manifest, under its writer lock; returns the dataset's
/// totals. Conflicting schemas or metadata raise ValueError and change
/// nothing.
#[pyfunction]
#[pyo3(signature = (path, storage_options = None))]
pub fn commit_parts(
    py: Python<'_>,
    path: PathBuf,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<Py<pyo3::types::PyDict>> {
    let manifest = py.detach(move || {
        guard("merging partial manifests", || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&path, &options)?;
            Dataset::commit_parts_in(store).map_err(dataset_err)
        })
    })?;
    summary(py, &manifest)
}
