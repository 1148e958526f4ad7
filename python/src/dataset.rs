//! Sharded datasets (`spec/DATASET.md`): `_lodt.DatasetReader` (an open
//! dataset: manifest, random access, verify) and
//! `_lodt.merge_loader_states`; the loader is `loader.rs`. The pure-Python `lodt.Dataset` wraps them.
//! Every call releases the GIL while it reads, and turns a Rust panic into
//! a `RuntimeError`.

use crate::batch::PyBatch;
use crate::dtype::descr;
use crate::error::{PyResult, dataset as dataset_err, guard, value};
use lodt::dataset::{Dataset, LoaderState, OrderCursor};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// An open sharded dataset (reads the manifest only; shards are opened and
/// checked against it when first touched).
#[pyclass(name = "DatasetReader", module = "lodt._lodt", frozen)]
pub struct PyDatasetReader {
    dataset: Arc<Dataset>,
    path: PathBuf,
    /// The keys of `sequence_arrays`' dicts, made once: per schema tensor,
    /// its name, then `"<name>.lod1"`, ... for its inner LoD levels.
    keys: Vec<Vec<Py<PyString>>>,
}

impl PyDatasetReader {
    /// The open dataset.
    pub(crate) fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }
}

pub(crate) fn state_json(text: &str) -> PyResult<LoaderState> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| value(format!("a loader state is a JSON object: {e}")))?;
    LoaderState::from_json(&json).map_err(dataset_err)
}

/// The store of the dataset at `path` (a local directory or a URI), opened
/// as `options` say.
pub(crate) fn store_at(
    path: &std::path::Path,
    options: &lodt::location::OpenOptions,
) -> PyResult<Arc<dyn lodt::dataset::DatasetStore>> {
    lodt::location::open_store(&path.to_string_lossy(), options).map_err(dataset_err)
}

/// `cache_dir=`: a directory, or `False` (no disk cache); `None` is the
/// node cache.
enum CacheDir {
    At(PathBuf),
    Off,
}

fn cache_dir_of(ob: &Bound<'_, PyAny>) -> PyResult<CacheDir> {
    if ob.is_instance_of::<pyo3::types::PyBool>() {
        if !ob.is_truthy()? {
            return Ok(CacheDir::Off);
        }
        return Err(pyo3::exceptions::PyValueError::new_err(
            "cache_dir is a directory, None (the node cache) or False (no disk cache), found True",
        ));
    }
    Ok(CacheDir::At(ob.extract::<PathBuf>()?))
}

#[pymethods]
impl PyDatasetReader {
    /// DatasetReader(path, *, mmap=True, storage_options=None, check_bodies=False, cache_bytes=None, cache_dir=None, disk_cache_bytes=None, version=None)
    ///
    /// Opens the dataset in directory `path`, or at a URI (`s3://`, `az://`,
    /// `gs://`, `http(s)://`; `storage_options` configure the store): its
    /// manifest only. `mmap=False` reads local shards with positional reads
    /// instead of memory maps; `check_bodies=True` checks a mapped batch's
    /// bodies on its first read (batches read otherwise are always checked).
    /// `cache_bytes`: the budget of the random-access cache of batches
    /// (default 256 MiB; 0 turns it off). `cache_dir`: for a dataset at a
    /// URI, the disk cache of the ranges read: `None` for the node cache
    /// shared by the machine's processes (under the system's temporary
    /// directory, `$LODT_CACHE_DIR` if set), a directory, or `False` for
    /// none; `disk_cache_bytes` its size limit (default 1 GiB). `version`:
    /// a version's number (an int) or a tag's name (a str) to open instead
    /// of the current manifest (`spec/DATASET.md` section 3.3).
    #[new]
    #[pyo3(signature = (path, *, mmap = true, storage_options = None, check_bodies = false, cache_bytes = None, cache_dir = None, disk_cache_bytes = None, version = None))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        path: PathBuf,
        mmap: bool,
        storage_options: Option<BTreeMap<String, String>>,
        check_bodies: bool,
        cache_bytes: Option<usize>,
        cache_dir: Option<Bound<'_, PyAny>>,
        disk_cache_bytes: Option<u64>,
        version: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let p = path.clone();
        let at: Option<String> = match &version {
            None => None,
            Some(v) if v.is_instance_of::<PyString>() => Some(v.extract::<String>()?),
            Some(v) if v.is_instance_of::<pyo3::types::PyBool>() => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "version is a version number (int) or a tag name (str), found a bool",
                ));
            }
            Some(v) => match v.extract::<u64>() {
                Ok(n) => Some(n.to_string()),
                Err(_) => {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "version is a version number (an int >= 0) or a tag name (str), found {}",
                        v.repr()?
                    )));
                }
            },
        };
        let mut options = crate::file::open_options(mmap, check_bodies, storage_options);
        if let Some(bytes) = disk_cache_bytes {
            options.remote.cache_bytes = bytes;
        }
        match cache_dir.as_ref().map(cache_dir_of).transpose()? {
            None => {}
            Some(CacheDir::Off) => options.remote = options.remote.without_cache(),
            Some(CacheDir::At(dir)) => {
                let bytes = options.remote.cache_bytes;
                options.remote = options.remote.with_cache(dir, bytes);
            }
        }
        let dataset = py.detach(move || {
            guard("opening a dataset", || {
                let store = store_at(&p, &options)?;
                let dataset = match &at {
                    None => Dataset::open_in(store),
                    Some(at) => Dataset::open_at_in(store, at),
                }
                .map_err(dataset_err)?;
                Ok(match cache_bytes {
                    Some(bytes) => dataset.with_cache_bytes(bytes),
                    None => dataset,
                })
            })
        })?;
        let keys = dataset
            .schema()
            .tensors
            .iter()
            .map(|t| {
                let inner = (1..t.lod_levels).map(|l| format!("{}.lod{l}", t.name));
                std::iter::once(t.name.clone())
                    .chain(inner)
                    .map(|k| PyString::intern(py, &k).unbind())
                    .collect()
            })
            .collect();
        Ok(PyDatasetReader {
            dataset: Arc::new(dataset),
            path,
            keys,
        })
    }

    /// The dataset's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The number of the version this reader opened (`None`: a manifest
    /// written before versions).
    #[getter]
    fn version(&self) -> Option<u64> {
        self.dataset.commit_record().map(|r| r.version)
    }

    /// The record of the commit that made the version opened, as JSON
    /// text (`None`: written before versions).
    fn commit_json(&self) -> Option<String> {
        self.dataset
            .commit_record()
            .and_then(|r| serde_json::to_string(r).ok())
    }

    /// The manifest, as its JSON text.
    fn manifest_json(&self) -> PyResult<String> {
        String::from_utf8(self.dataset.manifest().to_json_bytes())
            .map_err(|e| value(format!("manifest is not UTF-8: {e}")))
    }

    /// The number of top-level sequences.
    #[getter]
    fn num_sequences(&self) -> u64 {
        self.dataset.num_sequences()
    }

    /// The number of shards (from the manifest).
    #[getter]
    fn num_shards(&self) -> usize {
        self.dataset.num_shards()
    }

    /// The number of stored batches, over every shard (from the manifest).
    #[getter]
    fn num_batches(&self) -> u64 {
        self.dataset.num_batches()
    }

    /// The size of every shard, in bytes (from the manifest).
    #[getter]
    fn num_bytes(&self) -> u64 {
        self.dataset.num_bytes()
    }

    /// The dataset's fingerprint (what a loader state is checked against).
    #[getter]
    fn fingerprint(&self) -> u32 {
        self.dataset.fingerprint()
    }

    /// sequence(id) -> Batch
    ///
    /// Sequence `id` (dataset order) as a batch of one top-level sequence per
    /// tensor, read in place (no copy).
    fn sequence(&self, py: Python<'_>, id: u64) -> PyResult<PyBatch> {
        let dataset = self.dataset.clone();
        let batch = py.detach(move || {
            guard("reading a sequence", || {
                dataset.sequence(id).map_err(dataset_err)
            })
        })?;
        Ok(PyBatch::new(batch))
    }

    /// The budget of the random-access cache, in bytes.
    #[getter]
    fn cache_bytes(&self) -> usize {
        self.dataset.cache_bytes()
    }

    /// sequence_arrays(id) -> dict[str, numpy.ndarray]
    ///
    /// Sequence `id` with no Batch built: per tensor, its rows of the
    /// sequence (a read-only zero-copy view of a mapped, uncompressed shard;
    /// a copy of just those rows otherwise) and, for a tensor of L >= 2 LoD
    /// levels, `"<name>.lod1"` ... `"<name>.lod<L-1>"`: the sequence's inner
    /// offsets, rebased to 0 (int64).
    fn sequence_arrays<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Bound<'py, PyDict>> {
        let dataset = &*self.dataset;
        let arrays = py.detach(|| {
            guard("reading a sequence", || {
                dataset.sequence_arrays(id).map_err(dataset_err)
            })
        })?;
        let d = PyDict::new(py);
        for (keys, a) in self.keys.iter().zip(&arrays) {
            let v = &a.values;
            let array =
                crate::ffi::readonly_array(py, v.buffer(), descr(py, v.dtype())?, v.shape())?;
            let mut keys = keys.iter();
            let name = keys.next().ok_or_else(|| value("a tensor without a key"))?;
            d.set_item(name.bind(py), array)?;
            for (key, offsets) in keys.zip(&a.inner_offsets) {
                let offsets = offsets
                    .iter()
                    .map(|&o| i64::try_from(o).map_err(|_| value("an offset does not fit int64")))
                    .collect::<PyResult<Vec<i64>>>()?;
                d.set_item(key.bind(py), numpy::PyArray1::from_vec(py, offsets))?;
            }
        }
        Ok(d)
    }

    /// take(ids) -> Batch
    ///
    /// Sequences `ids`, in that order, gathered into one batch (a copy).
    fn take(&self, py: Python<'_>, ids: Vec<u64>) -> PyResult<PyBatch> {
        let dataset = self.dataset.clone();
        let batch = py.detach(move || {
            guard("gathering sequences", || {
                dataset.take(&ids).map_err(dataset_err)
            })
        })?;
        Ok(PyBatch::new(batch))
    }

    /// join_appended(text) -> str
    ///
    /// A checkpoint (JSON text, `spec/DATASET.md` 7.5) saved before shards
    /// were appended, as one whose epoch takes in the appended sequences
    /// after the rest (`Dataset::join_appended`, 7.3 "Joining now"), JSON
    /// text; its next worker is kept.
    fn join_appended(&self, py: Python<'_>, text: &str) -> PyResult<String> {
        let json: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| crate::error::value(format!("a dataset state is a JSON object: {e}")))?;
        let checkpoint = lodt::dataset::Checkpoint::from_json(&json).map_err(dataset_err)?;
        let dataset = self.dataset.clone();
        let joined = py.detach(move || {
            guard("joining appended shards", || {
                dataset
                    .join_appended(&checkpoint.loader)
                    .map_err(dataset_err)
            })
        })?;
        let out = lodt::dataset::Checkpoint::new(joined, checkpoint.next_worker);
        serde_json::to_string(&out.to_json()).map_err(|e| crate::error::value(e.to_string()))
    }

    /// verify() -> dict
    ///
    /// Checks every shard completely (sizes, footer CRCs, every checksum, the
    /// schema, the manifest's counts); raises ValueError naming the first
    /// damaged shard. Returns `{"shards", "bytes", "batches", "sequences"}`.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dataset = self.dataset.clone();
        let report = py.detach(move || {
            guard("verifying a dataset", || {
                dataset.verify().map_err(dataset_err)
            })
        })?;
        let d = PyDict::new(py);
        d.set_item("shards", report.shards)?;
        d.set_item("bytes", report.bytes)?;
        d.set_item("batches", report.batches)?;
        d.set_item("sequences", report.sequences)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "DatasetReader({:?}, shards={}, sequences={})",
            self.path.display().to_string(),
            self.dataset.num_shards(),
            self.dataset.num_sequences()
        )
    }
}

/// merge_loader_states(states, cursors=None) -> str
///
/// Merges the states (JSON texts) of every consumer of one checkpoint into
/// one complete state, to resume on another world size. `cursors`, one per
/// state (JSON text or None), is each state's cursor when the state was
/// saved without it (`Loader::progress`): given, it replaces the state's.
#[pyfunction]
#[pyo3(signature = (states, cursors = None))]
pub fn merge_loader_states(
    states: Vec<String>,
    cursors: Option<Vec<Option<String>>>,
) -> PyResult<String> {
    let mut states = states
        .iter()
        .map(|s| state_json(s))
        .collect::<PyResult<Vec<_>>>()?;
    for (state, cursor) in states.iter_mut().zip(cursors.unwrap_or_default()) {
        if let Some(text) = cursor {
            let cursor: OrderCursor = serde_json::from_str(&text)
                .map_err(|e| value(format!("not a cursor (spec/DATASET.md 7.3): {e}")))?;
            state.cursor = Some(cursor);
        }
    }
    let merged = LoaderState::merge(&states).map_err(dataset_err)?;
    serde_json::to_string(&merged).map_err(|e| value(e.to_string()))
}

/// _panic_for_test()
///
/// Panics inside the guard every dataset call runs in: the test that a Rust
/// panic reaches Python as a `RuntimeError`.
#[pyfunction]
pub fn _panic_for_test() -> PyResult<()> {
    guard("testing the panic guard", || -> PyResult<()> {
        panic!("a deliberate panic")
    })
}
