//! Writing sharded datasets: `_lodt.DatasetWriter` (create, append, or one
//! part of a parallel write) and `_lodt.commit_parts`. The pure-Python
//! `lodt.write_dataset` wraps them.

use crate::batch::{metadata, to_batch};
use crate::error::{PyResult, dataset as dataset_err, guard, value};
use lodt::dataset::{
    DEFAULT_SHARD_BYTES, Dataset, DatasetError, DatasetWriter, DatasetWriterOptions, Manifest,
};
use pyo3::exceptions::{PyBlockingIOError, PyOSError};
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
    commit_id: String,
    already_committed: bool,
}

/// A manifest's summary: `{"shards", "batches", "sequences", "bytes",
/// "commit_id"}` (the id of the write that returns it).
pub(crate) fn summary(
    py: Python<'_>,
    m: &Manifest,
    commit_id: &str,
) -> PyResult<Py<pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    d.set_item("shards", m.num_shards())?;
    d.set_item("batches", m.num_batches())?;
    d.set_item("sequences", m.num_sequences())?;
    d.set_item("bytes", m.num_bytes())?;
    d.set_item("commit_id", commit_id)?;
    Ok(d.unbind())
}

/// The Python exception of a failed commit, with attributes `commit_id`
/// and `outcome` (`"conflict"`: another writer's commit is there instead,
/// BlockingIOError; `"not committed"`: the manifest is unchanged, OSError;
/// `"unknown"`: the manifest could not be read to check, OSError); other
/// errors as `dataset_err`.
fn commit_err(err: DatasetError) -> PyErr {
    let outcome = match &err {
        DatasetError::ManifestChanged { .. } => "conflict",
        DatasetError::NotCommitted { .. } => "not committed",
        DatasetError::CommitUnknown { .. } => "unknown",
        _ => return dataset_err(err),
    };
    let id = err.commit_id().unwrap_or_default().to_owned();
    let e = if outcome == "conflict" {
        PyBlockingIOError::new_err(err.to_string())
    } else {
        PyOSError::new_err(err.to_string())
    };
    Python::attach(|py| {
        let v = e.value(py);
        // Setting attributes on a fresh OSError cannot fail.
        let _ = v.setattr("commit_id", id);
        let _ = v.setattr("outcome", outcome);
    });
    e
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
    ///               writer_id=None, fsync=True, storage_options=None, commit_id=None,
    ///               format_version=None, compression="none")
    ///
    /// `path` may be a URI of S3, Azure or GCS (`storage_options` configure
    /// the store): shards are uploaded, and the manifest is committed by a
    /// conditional put (a concurrent writer's commit makes `close` raise).
    ///
    /// `commit_id` (1 to 128 of `A-Z a-z 0-9 . _ -`; default: a new random
    /// one, see the `commit_id` attribute) is the write's idempotency key:
    /// the manifest lists it once the write is committed. If the answer to
    /// the manifest's write is lost, `close` reads the manifest again and
    /// succeeds if the id is there; if the store cannot be read, it raises
    /// OSError with `outcome == "unknown"` and `commit_id`. A writer opened
    /// with the id of a committed write has `already_committed` set and
    /// writes nothing: retrying a write with its id never adds it twice.
    ///
    /// `format_version` ("2.0", the default, or "1.0") and `compression`
    /// ("none", "lz4", "zstd", "zstd:LEVEL": format 2.0) are the new shards',
    /// with `mode="append"` too (each shard is a file of its own): a dataset
    /// may hold shards of both versions.
    #[new]
    #[pyo3(signature = (path, *, mode = "create", shard_bytes = DEFAULT_SHARD_BYTES,
        metadata = None, writer_id = None, fsync = true, storage_options = None,
        commit_id = None, format_version = None, compression = "none"))]
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
        commit_id: Option<String>,
        format_version: Option<&str>,
        compression: &str,
    ) -> PyResult<Self> {
        let codec = lodt::format::WriteOptions::for_codec(format_version, compression)
            .map_err(|e| value(e.to_string()))?;
        if shard_bytes == 0 {
            return Err(value("shard_bytes must be at least 1"));
        }
        let options = DatasetWriterOptions {
            shard_bytes,
            metadata: self::metadata(metadata)?,
            schema: None,
            commit_id,
            format_version: codec.format_version,
            compression: codec.compression,
            commit_time: None,
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
            commit_id: writer.commit_id().to_owned(),
            already_committed: writer.already_committed(),
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
                w.flush().map_err(commit_err)
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

    /// This write's commit id (the one given, or a new one): keep it to
    /// retry the write after an error without writing its data twice.
    #[getter]
    fn commit_id(&self) -> String {
        self.commit_id.clone()
    }

    /// Whether the dataset already listed this commit id when the writer
    /// was opened (the same write was committed before): batches written
    /// are discarded and `close` changes nothing.
    #[getter]
    fn already_committed(&self) -> bool {
        self.already_committed
    }

    /// close() -> dict | None
    ///
    /// Closes the last shard and writes the manifest; returns the dataset's
    /// (or the part's) totals `{"shards", "batches", "sequences", "bytes"}`
    /// and the `"commit_id"` (None when already closed). A failed commit
    /// raises BlockingIOError (another writer's commit is there instead) or
    /// OSError (`outcome` "not committed" or "unknown"), with `commit_id`.
    fn close(&self, py: Python<'_>) -> PyResult<Option<Py<pyo3::types::PyDict>>> {
        let Some(w) = self.take()? else {
            return Ok(None);
        };
        let manifest =
            py.detach(move || guard("finishing a dataset", || w.finish().map_err(commit_err)))?;
        Ok(Some(summary(py, &manifest, &self.commit_id)?))
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

/// write_index(path, storage_options=None) -> bool
///
/// Writes the dataset's shard index (`spec/DATASET.md` 3.2) if its manifest
/// names none that agrees with it: a dataset written before lodt wrote
/// indexes, or whose index is missing or damaged. Returns whether it wrote
/// one. (Every write of a dataset writes its index.)
#[pyfunction]
#[pyo3(signature = (path, storage_options = None))]
pub fn write_index(
    py: Python<'_>,
    path: PathBuf,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<bool> {
    py.detach(move || {
        guard("writing the shard index", || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&path, &options)?;
            Dataset::write_index_in(store).map_err(commit_err)
        })
    })
}

/// commit_parts(path, storage_options=None, commit_id=None) -> dict
///
/// Merges the partial manifests of parallel writers (`mode="part"`) into
/// the dataset's manifest, under its writer lock; returns the dataset's
/// totals and the merge's `"commit_id"`. Conflicting schemas or metadata
/// raise ValueError and change nothing. `commit_id` (default: a new one) is
/// the merge's idempotency key, as for `DatasetWriter`: a merge whose id the
/// manifest lists already writes nothing.
#[pyfunction]
#[pyo3(signature = (path, storage_options = None, commit_id = None))]
pub fn commit_parts(
    py: Python<'_>,
    path: PathBuf,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
    commit_id: Option<String>,
) -> PyResult<Py<pyo3::types::PyDict>> {
    let (manifest, id) = py.detach(move || {
        guard("merging partial manifests", || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&path, &options)?;
            let id = match commit_id {
                Some(id) => id,
                None => lodt::dataset::new_commit_id(),
            };
            let manifest = Dataset::commit_parts_with(store, Some(&id)).map_err(commit_err)?;
            Ok((manifest, id))
        })
    })?;
    summary(py, &manifest, &id)
}
