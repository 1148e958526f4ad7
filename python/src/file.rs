//! Files: `lodt.File` (a memory-mapped `.lodt` file), `lodt.Writer`, and the
//! file functions (`save`, `verify`, `recover`, `convert`, Paddle files).
//! Every one releases the GIL while it reads, writes or checksums.

use crate::batch::{PyBatch, to_batch};
use crate::core;
use crate::error::{
    PyResult, convert as convert_err, format as format_err, paddle as paddle_err, value,
};
use crate::tensor::{PyLodTensor, normalize, to_tensor};
use lodt::format::{FileSink, LodtFile, RowIndex, RowLocation, WriteOptions, Writer};
use lodt::{Batch, LodTensor};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// A `.lodt` file, memory-mapped: `len(f)` batches, `f[k]` a `Batch` whose
/// tensors are read in place (no copy), iteration over the batches.
///
/// The map stays open while the file, or any tensor or array read from it,
/// is alive. Tensors are checked (metadata, LoD rules, LoD checksums) when
/// their batch is first read; `verify()` checks every checksum.
#[pyclass(name = "File", module = "lodt", frozen, weakref)]
pub struct PyFile {
    file: Arc<LodtFile>,
    path: PathBuf,
    mapped: bool,
    /// The top-level rows of every batch (counted on first use).
    rows: OnceLock<RowIndex>,
}

/// The crate's open options for the keywords every `open`-like call takes:
/// `mmap` (local files: memory-mapped, or positional reads), `check_bodies`,
/// and `storage_options` (object stores).
pub(crate) fn open_options(
    mmap: bool,
    check_bodies: bool,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> lodt::location::OpenOptions {
    let mut options = lodt::location::OpenOptions::default()
        .with_mmap(mmap)
        .with_check_bodies(check_bodies);
    options.remote.options = storage_options.unwrap_or_default();
    options
}

impl PyFile {
    fn open_path(
        py: Python<'_>,
        path: PathBuf,
        mmap: bool,
        check_bodies: bool,
        storage_options: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        let location = path.to_string_lossy().into_owned();
        let options = open_options(mmap, check_bodies, storage_options);
        let file = py
            .detach(move || lodt::location::open_file(&location, &options))
            .map_err(format_err)?;
        Ok(PyFile {
            file: Arc::new(file),
            mapped: mmap && !lodt::location::is_uri(&path.to_string_lossy()),
            path,
            rows: OnceLock::new(),
        })
    }

    fn batch_index(&self, k: isize) -> PyResult<usize> {
        normalize(k, self.file.num_batches(), "batch")
    }

    /// The file's row index (counted on first use).
    fn row_index(&self, py: Python<'_>) -> PyResult<&RowIndex> {
        if let Some(index) = self.rows.get() {
            return Ok(index);
        }
        let file = self.file.clone();
        let index = py.detach(move || file.row_index()).map_err(format_err)?;
        Ok(self.rows.get_or_init(|| index))
    }

    /// Where global top-level row `i` (negative: from the end) is.
    fn locate(&self, py: Python<'_>, i: isize) -> PyResult<RowLocation> {
        let index = self.row_index(py)?;
        let i = normalize(i, index.len(), "row")?;
        index.locate(i).map_err(format_err)
    }
}

/// A dict from `(key, value)` pairs.
fn dict<'py>(py: Python<'py>, items: &[(&str, Bound<'py, PyAny>)]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in items {
        d.set_item(k, v)?;
    }
    Ok(d)
}

fn verify_report<'py>(
    py: Python<'py>,
    r: lodt::format::VerifyReport,
) -> PyResult<Bound<'py, PyDict>> {
    dict(
        py,
        &[
            ("batches", r.batches.into_bound_py_any(py)?),
            ("tensors", r.tensors.into_bound_py_any(py)?),
            ("file_bytes", r.file_bytes.into_bound_py_any(py)?),
            ("body_bytes", r.body_bytes.into_bound_py_any(py)?),
        ],
    )
}

#[pymethods]
impl PyFile {
    /// File(path, *, mmap=True, storage_options=None, check_bodies=False)
    ///
    /// Opens a `.lodt` file: memory-mapped (`mmap=True`), or read by
    /// positional reads; or one at a URI (see `lodt.open`, also for
    /// `check_bodies`).
    #[new]
    #[pyo3(signature = (path, *, mmap = true, storage_options = None, check_bodies = false))]
    fn py_new(
        py: Python<'_>,
        path: PathBuf,
        mmap: bool,
        storage_options: Option<std::collections::BTreeMap<String, String>>,
        check_bodies: bool,
    ) -> PyResult<Self> {
        Self::open_path(py, path, mmap, check_bodies, storage_options)
    }

    /// The number of batches.
    fn __len__(&self) -> usize {
        self.file.num_batches()
    }

    /// `f[k]`: batch `k` (negative from the end) as a `Batch` read in place.
    fn __getitem__(&self, py: Python<'_>, k: isize) -> PyResult<PyBatch> {
        let k = self.batch_index(k)?;
        let file = self.file.clone();
        let batch = py
            .detach(move || core::file_batch(&file, k))
            .map_err(format_err)?;
        Ok(PyBatch::new(batch))
    }

    /// Iterates over the batches, in order.
    fn __iter__(slf: Bound<'_, Self>) -> PyResult<BatchIter> {
        Ok(BatchIter {
            file: slf.get().file.clone(),
            next: Mutex::new(0),
        })
    }

    /// The file's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Whether the file is memory-mapped (else it is read by positional
    /// reads, or by ranged requests from a URI).
    #[getter]
    fn mmap(&self) -> bool {
        self.mapped
    }

    /// The file-level metadata (a new dict of str to str).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.file.metadata() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The format version, `(major, minor)`.
    #[getter]
    fn version(&self) -> (u16, u16) {
        let v = self.file.version();
        (v.major, v.minor)
    }

    /// The file's size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.file.file_size()
    }

    /// The total number of top-level rows (sequences, or rows of tensors with
    /// no LoD) over every batch: what `row`, `take` and `lodt.torch.FileDataset` index.
    #[getter]
    fn num_rows(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.row_index(py)?.len())
    }

    /// batch_rows(k) -> int
    ///
    /// The number of top-level rows of batch `k`.
    fn batch_rows(&self, py: Python<'_>, k: isize) -> PyResult<usize> {
        let k = self.batch_index(k)?;
        Ok(self.row_index(py)?.batch_rows(k).unwrap_or(0))
    }

    /// row(i) -> Batch
    ///
    /// Global top-level row `i` (counting over every batch): a batch whose
    /// tensors hold that one sequence (or row) each, read in place (no copy).
    fn row(&self, py: Python<'_>, i: isize) -> PyResult<PyBatch> {
        let at = self.locate(py, i)?;
        let file = self.file.clone();
        let batch = py.detach(move || file.row(at)).map_err(format_err)?;
        Ok(PyBatch::new(batch))
    }

    /// take(indices) -> Batch
    ///
    /// Global top-level rows `indices` gathered, in that order, into one new
    /// batch (a copy) with the tensors of the first row's batch.
    fn take(&self, py: Python<'_>, indices: Vec<isize>) -> PyResult<PyBatch> {
        let rows = indices
            .iter()
            .map(|&i| self.locate(py, i))
            .collect::<PyResult<Vec<_>>>()?;
        let file = self.file.clone();
        let batch = py.detach(move || file.take(&rows)).map_err(format_err)?;
        Ok(PyBatch::new(batch))
    }

    /// verify() -> dict
    ///
    /// Checks every checksum, padding byte and rule of the file; raises
    /// ValueError at the first damage (naming the part, batch and tensor).
    /// Returns `{"batches", "tensors", "file_bytes", "body_bytes"}`.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let file = self.file.clone();
        let report = py.detach(move || file.verify()).map_err(format_err)?;
        verify_report(py, report)
    }

    /// The address and length of the file's bytes in memory (for tests of
    /// zero-copy reads: every tensor read from the file lies inside).
    fn _map_span(&self) -> (usize, usize) {
        self.file
            .storage()
            .map_or((0, 0), |s| (s.bytes().as_ptr() as usize, s.bytes().len()))
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Does nothing: the map closes when no file, tensor or array uses it.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "File({:?}, batches={}, version={})",
            self.path.display().to_string(),
            self.file.num_batches(),
            self.file.version()
        )
    }

    /// Pickles by path: unpickling reopens the file.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cls = py.import("lodt")?.getattr("File")?;
        (cls, (self.path.clone(),)).into_bound_py_any(py)
    }

    /// __arrow_c_stream__(requested_schema=None) -> PyCapsule
    ///
    /// The file as an Arrow stream: one record batch per batch, over the
    /// file's own bytes (no copy). The schema is the first batch's, with the
    /// file's and the first batch's metadata. A `requested_schema` (same
    /// columns, in order) is produced as by `Batch.__arrow_c_stream__`.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let requested = crate::arrow::requested(requested_schema)?;
        crate::arrow::file_stream(py, &self.file, requested)
    }
}

/// An iterator over the batches of a `File`.
#[pyclass(module = "lodt._lodt", frozen)]
pub struct BatchIter {
    file: Arc<LodtFile>,
    next: Mutex<usize>,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyBatch>> {
        let k = {
            let mut next = self.next.lock().map_err(|_| value("iterator poisoned"))?;
            let k = *next;
            *next += 1;
            k
        };
        if k >= self.file.num_batches() {
            return Ok(None);
        }
        let file = self.file.clone();
        let batch = py
            .detach(move || core::file_batch(&file, k))
            .map_err(format_err)?;
        Ok(Some(PyBatch::new(batch)))
    }
}

/// open(path, *, mmap=True, storage_options=None, check_bodies=False) -> File
///
/// Opens a `.lodt` file (memory-mapped by default; `mmap=False` reads each
/// batch with positional reads when it is touched, for files that other
/// programs may change, as `Dataset` and the CLI's `--no-mmap` do). `path`
/// (a `str` or an `os.PathLike`) may be a URI
/// (`s3://`, `az://`, `gs://`, `http(s)://`): the file is then read by
/// ranged requests (two to open it, one per batch first touched), with
/// credentials from the environment and `storage_options` (object_store's
/// configuration keys, such as `aws_endpoint`).
///
/// A batch read from a URI or by positional reads is checked against its checksums,
/// bodies included, before any tensor of it is returned (a damaged byte is a
/// ValueError naming the file and batch). A memory-mapped batch's bodies are
/// checked only with `check_bodies=True`, the first time the batch is read
/// (one pass over its bodies, once); `verify()` checks every byte.
#[pyfunction]
#[pyo3(signature = (path, *, mmap = true, storage_options = None, check_bodies = false))]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    mmap: bool,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
    check_bodies: bool,
) -> PyResult<PyFile> {
    PyFile::open_path(py, path, mmap, check_bodies, storage_options)
}

/// Writes a `.lodt` file batch by batch: atomically (a new file appears at
/// `path` only when closed), or appending to an existing file.
///
/// `with lodt.Writer(path, metadata={...}) as w: w.write({"x": t})` — leaving
/// the block closes the file, or, on an exception, discards a new file.
#[pyclass(name = "Writer", module = "lodt", frozen)]
pub struct PyWriter {
    writer: Mutex<Option<Writer<FileSink>>>,
    path: PathBuf,
    written: Mutex<usize>,
}

impl PyWriter {
    fn take(&self) -> PyResult<Option<Writer<FileSink>>> {
        Ok(self
            .writer
            .lock()
            .map_err(|_| value("writer poisoned"))?
            .take())
    }
}

#[pymethods]
impl PyWriter {
    /// Writer(path, metadata=None, *, append=False, fsync=True,
    ///        format_version=None, compression="none")
    ///
    /// Starts a new file at `path` with file-level `metadata` (written to a
    /// temporary file renamed over `path` on `close`), or, with
    /// `append=True`, adds batches to the existing file (its metadata and
    /// version are kept). `fsync` makes `close` flush to disk first.
    /// `format_version` is "2.0" (the default: `None`; the schema once,
    /// compressed buffers on request) or "1.0" (for readers that predate
    /// 2.0); `compression` compresses a 2.0 file's buffers: "none" (the
    /// default), "lz4", "zstd" or "zstd:LEVEL". An append writes the file's
    /// own version: with `format_version=None` whatever it is, and with an
    /// explicit `format_version` only if it is that one (another raises
    /// ValueError, and the file is left as it was).
    #[new]
    #[pyo3(signature = (path, metadata = None, *, append = false, fsync = true,
                        format_version = None, compression = "none"))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        path: PathBuf,
        metadata: Option<&Bound<'_, PyAny>>,
        append: bool,
        fsync: bool,
        format_version: Option<&str>,
        compression: &str,
    ) -> PyResult<Self> {
        let meta = crate::batch::metadata(metadata)?;
        if append && !meta.is_empty() {
            return Err(value(
                "an appending writer keeps the file's metadata: give none",
            ));
        }
        let options = WriteOptions {
            fsync,
            ..WriteOptions::for_codec(format_version, compression).map_err(format_err)?
        };
        let p = path.clone();
        let writer = py
            .detach(move || {
                if append {
                    Writer::append_with(&p, options)
                } else {
                    Writer::create_with(&p, meta, options)
                }
            })
            .map_err(format_err)?;
        Ok(PyWriter {
            writer: Mutex::new(Some(writer)),
            path,
            written: Mutex::new(0),
        })
    }

    /// write(batch, metadata=None)
    ///
    /// Writes one batch: a `Batch` or a mapping of names to tensors (or
    /// arrays), with batch `metadata` (which replaces a `Batch`'s own).
    #[pyo3(signature = (batch, metadata = None))]
    fn write(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyAny>,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut batch = to_batch(batch)?;
        if metadata.is_some_and(|m| !m.is_none()) {
            *batch.metadata_mut() = crate::batch::metadata(metadata)?;
        }
        py.detach(|| -> PyResult<()> {
            let mut guard = self.writer.lock().map_err(|_| value("writer poisoned"))?;
            let w = guard
                .as_mut()
                .ok_or_else(|| value("the writer is closed"))?;
            w.write(&batch).map_err(format_err)
        })?;
        if let Ok(mut n) = self.written.lock() {
            *n += 1;
        }
        Ok(())
    }

    /// The number of batches written by this writer.
    #[getter]
    fn batches_written(&self) -> usize {
        self.written.lock().map_or(0, |n| *n)
    }

    /// The destination path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// close()
    ///
    /// Writes the footer and commits the file (a no-op when closed).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(mut w) = self.take()? {
            py.detach(move || w.finish()).map_err(format_err)?;
        }
        Ok(())
    }

    /// abort()
    ///
    /// Stops writing: a new file is discarded (nothing appears at `path`);
    /// an appended file keeps the batches written so far.
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

/// Batches from Python: one `Batch` or mapping, or an iterable of them.
fn batches(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Batch>> {
    if obj.cast::<PyBatch>().is_ok() || obj.cast::<PyMapping>().is_ok() {
        return Ok(vec![to_batch(obj)?]);
    }
    obj.try_iter()?.map(|b| to_batch(&b?)).collect()
}

/// save(path, batches, metadata=None, *, format_version=None, compression="none")
///
/// Writes a `.lodt` file atomically: `batches` is one `Batch` (or mapping
/// of names to tensors) or an iterable of them; `metadata` is the file's.
/// `format_version` and `compression` are as in `Writer` (format 2.0 by
/// default; "1.0" for readers that predate 2.0).
#[pyfunction]
#[pyo3(signature = (path, batches, metadata = None, *, format_version = None, compression = "none"))]
pub fn save(
    py: Python<'_>,
    path: PathBuf,
    batches: &Bound<'_, PyAny>,
    metadata: Option<&Bound<'_, PyAny>>,
    format_version: Option<&str>,
    compression: &str,
) -> PyResult<()> {
    let meta = crate::batch::metadata(metadata)?;
    let batches = self::batches(batches)?;
    let options = WriteOptions::for_codec(format_version, compression).map_err(format_err)?;
    py.detach(move || {
        let mut w = Writer::create_with(&path, meta, options)?;
        for b in &batches {
            w.write(b)?;
        }
        w.finish().map(drop)
    })
    .map_err(format_err)
}

/// verify(path) -> dict
///
/// Maps the file at `path` and checks every byte of it (see `File.verify`).
#[pyfunction]
pub fn verify<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let report = py
        .detach(move || lodt::format::verify(&path))
        .map_err(format_err)?;
    verify_report(py, report)
}

/// recover(path) -> dict
///
/// Rebuilds the footer of a file whose writer was interrupted, keeping every
/// complete batch (atomically). Returns `{"batches", "kept_bytes",
/// "dropped_bytes", "rewritten", "reason"}`.
#[pyfunction]
pub fn recover<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let r = py
        .detach(move || lodt::format::recover(&path))
        .map_err(format_err)?;
    dict(
        py,
        &[
            ("batches", r.batches.into_bound_py_any(py)?),
            ("kept_bytes", r.kept_bytes.into_bound_py_any(py)?),
            ("dropped_bytes", r.dropped_bytes.into_bound_py_any(py)?),
            ("rewritten", r.rewritten.into_bound_py_any(py)?),
            ("reason", r.reason.into_bound_py_any(py)?),
        ],
    )
}

/// A size argument: a byte count, or text the crate parses (`"16M"`, `"auto"`).
#[derive(FromPyObject)]
pub enum ByteSize {
    /// A number of bytes.
    Count(u64),
    /// A size with a unit, or a word such as `"auto"`.
    Text(String),
}

/// convert(src, dst, *, names=None, batch_rows=None, small_lists=False,
///         batch_bytes=None, columns=None, compression=None,
///         null_lists="error", metadata="error", decode_budget=None,
///         tensor_type="nested_lists", format_version=None,
///         shard_bytes=None, to=None) -> dict
///
/// Converts between formats, chosen by extension: `.lodt`, `.parquet`,
/// `.arrow`/`.feather`, `.arrows`, `.pdtensor`, `.pdparams`/`.pdiparams`
/// (as `lodt convert`). `names` names a Paddle input's tensors;
/// `batch_rows` regroups rows into batches of that many top-level rows,
/// `batch_bytes` into batches of about that many bytes (an int, a size such
/// as `"16M"`, or `"auto"`: batches of 1 to 64 MiB pass, others are split or
/// merged to about 16 MiB, as `--batch-bytes auto`; batches are kept as
/// they are when neither is given; batches whose metadata differ are never
/// merged); `columns` reads only those tensors (Arrow and Parquet columns),
/// in that order; `compression` is, for Parquet output, the page codec
/// (`"none"`, `"snappy"`, the default, `"zstd"` or `"lz4"`), for `.lodt`
/// output the buffer codec (`"none"`, the default, `"lz4"`, `"zstd"` or
/// `"zstd:LEVEL"`, which write format 2.0); `format_version` is a `.lodt`
/// output's (`"2.0"`, the default, or `"1.0"`); `null_lists="empty"` reads null lists
/// as empty sequences; `metadata="first"` lets an Arrow or Parquet output
/// keep the first batch's metadata when later batches differ;
/// `small_lists` writes Arrow `List` instead of `LargeList`;
/// `tensor_type` writes Arrow and Parquet element shapes as nested
/// fixed-size lists (`"nested_lists"`), as the `arrow.fixed_shape_tensor`
/// extension (`"fixed_shape"`), or 1-level tensors as
/// `arrow.variable_shape_tensor` columns (`"variable_shape"`);
/// `decode_budget` is the most bytes one batch of a Parquet input may decode
/// to (default 256 MiB: larger row groups are read in several batches, and a
/// row that needs more is a `ValueError` giving the budget and the need).
/// A dataset directory is an input or an output too (an existing directory,
/// a path ending in `/`, or a new path with no extension), written in
/// shards of about `shard_bytes` (default 256 MiB). `to` names the output's
/// format whatever `dst` looks like (as `--to`): an extension (`"parquet"`,
/// `"lodt"`, ...), `"dataset"`, or `"parquet-dir"`, a new directory of
/// Parquet files `part-00000.parquet`, ... of about `shard_bytes` each,
/// renamed into place when every shard is written. This is the crate's
/// `lodt::convert::convert`, as `lodt convert` runs it: the same options
/// give the same bytes.
/// Returns `{"batches", "tensors"}` written.
#[pyfunction]
#[pyo3(signature = (
    src, dst, *, names = None, batch_rows = None, small_lists = false, batch_bytes = None,
    columns = None, compression = None, null_lists = "error", metadata = "error",
    decode_budget = None, tensor_type = "nested_lists", format_version = None,
    shard_bytes = None, to = None
))]
#[allow(clippy::too_many_arguments)]
pub fn convert<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    names: Option<Vec<String>>,
    batch_rows: Option<usize>,
    small_lists: bool,
    batch_bytes: Option<ByteSize>,
    columns: Option<Vec<String>>,
    compression: Option<String>,
    null_lists: &str,
    metadata: &str,
    decode_budget: Option<u64>,
    tensor_type: &str,
    format_version: Option<&str>,
    shard_bytes: Option<u64>,
    to: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    use lodt::arrow::{ArrowError, MetadataPolicy, NullLists};
    use lodt::convert::{ConvertError, Endpoint};
    // The option names and their errors are the crate's (as the CLI's).
    let null_lists: NullLists = null_lists
        .parse()
        .map_err(|e: ArrowError| value(format!("null_lists: {e}")))?;
    let metadata_policy: MetadataPolicy = metadata
        .parse()
        .map_err(|e: ArrowError| value(format!("metadata: {e}")))?;
    let tensor_type = crate::arrow::export_options(tensor_type)?.tensor_type;
    let batch_bytes = batch_bytes
        .map(|b| match b {
            ByteSize::Count(n) => lodt::batch::rebatch::BatchBytes::about(n),
            ByteSize::Text(text) => text.parse(),
        })
        .transpose()
        .map_err(|e| value(format!("batch_bytes: {e}")))?;
    let mut options = lodt::convert::ConvertOptions {
        names,
        batch_rows,
        small_lists,
        batch_bytes,
        columns,
        compression: None,
        null_lists,
        metadata_policy,
        decode_budget,
        tensor_type,
        shard_bytes,
        lodt: WriteOptions::default(),
    };
    // The output is named by `to`, else placed by its path (as `--to`).
    let to = match to {
        Some(name) => Endpoint::from_name(name).map_err(|e| value(format!("to: {e}")))?,
        None => Endpoint::output(&dst).map_err(|e| value(e.to_string()))?,
    };
    // A dataset output is written as .lodt shards.
    let output = to.file_format().unwrap_or(lodt::convert::Format::Lodt);
    options
        .set_output_codec(output, format_version, compression.as_deref())
        .map_err(|e| value(e.to_string()))?;
    let stats = py
        .detach(move || {
            lodt::convert::convert_to(&src, &dst, to, &options, |_| {}).map_err(Box::new)
        })
        .map_err(|e| match *e {
            // Name the keyword arguments, not the Rust options.
            ConvertError::Arrow(ArrowError::NullList {
                column,
                level,
                index,
            }) => value(format!(
                "column {column:?}: null list at level {level}, index {index} (a LoD tensor has no nulls; read null lists as empty sequences with null_lists=\"empty\")"
            )),
            ConvertError::Arrow(ArrowError::MetadataMismatch { batch, key }) => value(format!(
                "batch {batch}: metadata differs from the first batch's at key {key:?} (an Arrow or Parquet file stores one metadata map; metadata=\"first\" keeps the first batch's)"
            )),
            e => convert_err(e),
        })?;
    dict(
        py,
        &[
            ("batches", stats.batches.into_bound_py_any(py)?),
            ("tensors", stats.tensors.into_bound_py_any(py)?),
        ],
    )
}

/// read_paddle(path) -> LodTensor
///
/// Reads a tensor file written by Paddle (`SerializeToStream`: `paddle.save`
/// of one tensor, `.pdtensor`).
#[pyfunction]
pub fn read_paddle(py: Python<'_>, path: PathBuf) -> PyResult<PyLodTensor> {
    let t = py
        .detach(move || lodt::paddle::read_tensor_file(&path))
        .map_err(paddle_err)?;
    Ok(PyLodTensor::new(t))
}

/// read_paddle_combined(path, names=None) -> Batch
///
/// Reads a Paddle `save_combine` file (`.pdparams`/`.pdiparams`): its
/// tensors, in file order, named `names` (default `tensor0`, `tensor1`, ...).
#[pyfunction]
#[pyo3(signature = (path, names = None))]
pub fn read_paddle_combined(
    py: Python<'_>,
    path: PathBuf,
    names: Option<Vec<String>>,
) -> PyResult<PyBatch> {
    let batch = py
        .detach(move || {
            let names: Option<Vec<&str>> = names
                .as_ref()
                .map(|n| n.iter().map(String::as_str).collect());
            lodt::paddle::read_batch_file(&path, names.as_deref())
        })
        .map_err(paddle_err)?;
    Ok(PyBatch::new(batch))
}

/// write_paddle(path, obj)
///
/// Writes Paddle's format: a `LodTensor` as one tensor file, a `Batch` (or
/// mapping, or list of tensors) as a `save_combine` file, in order.
#[pyfunction]
pub fn write_paddle(py: Python<'_>, path: PathBuf, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    if obj.cast::<PyLodTensor>().is_ok() {
        let t = to_tensor(obj)?;
        return py
            .detach(move || lodt::paddle::write_tensor_file(&path, &t))
            .map_err(paddle_err);
    }
    let batch = if obj.cast::<PyList>().is_ok() || obj.cast::<pyo3::types::PyTuple>().is_ok() {
        let tensors = obj
            .try_iter()?
            .map(|t| to_tensor(&t?))
            .collect::<PyResult<Vec<LodTensor>>>()?;
        lodt::paddle::into_batch(tensors, None).map_err(paddle_err)?
    } else {
        to_batch(obj)?
    };
    py.detach(move || lodt::paddle::write_batch_file(&path, &batch))
        .map_err(paddle_err)
}
