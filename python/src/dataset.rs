//! Sharded datasets (`spec/DATASET.md`): `_lodt.DatasetReader` (an open
//! dataset: manifest, random access, verify), `_lodt.DatasetLoader` (the
//! Rust loader: shuffled, partitioned, resumable mini-batches) and
//! `_lodt.merge_loader_states`. The pure-Python `lodt.Dataset` wraps them.
//! Every call releases the GIL while it reads, and turns a Rust panic into
//! a `RuntimeError`.

use crate::batch::PyBatch;
use crate::error::{PyResult, dataset as dataset_err, guard, value};
use lodt::dataset::{
    Batching, Dataset, Loader, LoaderOptions, LoaderState, MiniBatch, PackOptions, PackedLoader,
    Remainder, ShuffleOptions,
};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// An open sharded dataset (reads the manifest only; shards are opened and
/// checked against it when first touched).
#[pyclass(name = "DatasetReader", module = "lodt._lodt", frozen)]
pub struct PyDatasetReader {
    dataset: Arc<Dataset>,
    path: PathBuf,
}

impl PyDatasetReader {
    /// The open dataset.
    pub(crate) fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }
}

fn state_json(text: &str) -> PyResult<LoaderState> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| value(format!("a loader state is a JSON object: {e}")))?;
    LoaderState::from_json(&json).map_err(dataset_err)
}

fn remainder(name: &str) -> PyResult<Remainder> {
    match name {
        "keep" => Ok(Remainder::Keep),
        "drop" => Ok(Remainder::Drop),
        "repeat" => Ok(Remainder::Repeat),
        other => Err(value(format!(
            "remainder must be \"keep\", \"drop\" or \"repeat\", found {other:?}"
        ))),
    }
}

/// The store of the dataset at `path` (a local directory or a URI), opened
/// as `options` say.
pub(crate) fn store_at(
    path: &std::path::Path,
    options: &lodt::location::OpenOptions,
) -> PyResult<Arc<dyn lodt::dataset::DatasetStore>> {
    lodt::location::open_store(&path.to_string_lossy(), options).map_err(dataset_err)
}

#[pymethods]
impl PyDatasetReader {
    /// DatasetReader(path, *, mmap=True, storage_options=None, check_bodies=False)
    ///
    /// Opens the dataset in directory `path`, or at a URI (`s3://`, `az://`,
    /// `gs://`, `http(s)://`; `storage_options` configure the store): its
    /// manifest only. `mmap=False` reads local shards with positional reads
    /// instead of memory maps; `check_bodies=True` checks a mapped batch's
    /// bodies on its first read (batches read otherwise are always checked).
    #[new]
    #[pyo3(signature = (path, *, mmap = true, storage_options = None, check_bodies = false))]
    fn py_new(
        py: Python<'_>,
        path: PathBuf,
        mmap: bool,
        storage_options: Option<BTreeMap<String, String>>,
        check_bodies: bool,
    ) -> PyResult<Self> {
        let p = path.clone();
        let options = crate::file::open_options(mmap, check_bodies, storage_options);
        let dataset = py.detach(move || {
            guard("opening a dataset", || {
                let store = store_at(&p, &options)?;
                Dataset::open_in(store).map_err(dataset_err)
            })
        })?;
        Ok(PyDatasetReader {
            dataset: Arc::new(dataset),
            path,
        })
    }

    /// The dataset's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
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
        self.dataset.manifest().num_batches()
    }

    /// The size of every shard, in bytes (from the manifest).
    #[getter]
    fn num_bytes(&self) -> u64 {
        self.dataset.manifest().num_bytes()
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

    /// loader(*, batch_size=32, max_rows=None, rows_of=None, drop_last=False,
    ///        seed=None, shuffle_buffer=16384, rank=0, world_size=1, worker=0,
    ///        num_workers=1, remainder="keep", prefetch=2, epoch=0, state=None)
    ///        -> DatasetLoader
    ///
    /// A loader of consumer `(rank, worker)`: `batch_size` sequences per
    /// mini-batch, or as many as fit in `max_rows` rows of tensor `rows_of`;
    /// shuffled when `seed` is given. It starts at epoch `epoch`, or resumes
    /// from `state` (a loader state's JSON text). `pack_tokens`: packed
    /// mini-batches (`spec/DATASET.md` 7.4) of at most that many rows of
    /// `rows_of` per bin, `pack_rows` bins each, best-fit from windows of
    /// `pack_buffer` sequences; `pack_equal`: as many mini-batches on every
    /// consumer (`None`: when `world_size > 1`); `pack_truncate`: cut a
    /// sequence longer than `pack_tokens` to its first `pack_tokens` rows
    /// (reported in the batch's metadata `lodt.pack.truncated`).
    #[pyo3(signature = (*, batch_size = 32, max_rows = None, rows_of = None, drop_last = false,
        seed = None, shuffle_buffer = 16384, rank = 0, world_size = 1, worker = 0,
        num_workers = 1, remainder = "keep", prefetch = 2, epoch = 0, state = None,
        pack_tokens = None, pack_rows = None, pack_buffer = 1000, pack_equal = None,
        pack_truncate = false))]
    #[allow(clippy::too_many_arguments)]
    fn loader(
        &self,
        py: Python<'_>,
        batch_size: usize,
        max_rows: Option<usize>,
        rows_of: Option<String>,
        drop_last: bool,
        seed: Option<u64>,
        shuffle_buffer: usize,
        rank: usize,
        world_size: usize,
        worker: usize,
        num_workers: usize,
        remainder: &str,
        prefetch: usize,
        epoch: u64,
        state: Option<&str>,
        pack_tokens: Option<usize>,
        pack_rows: Option<usize>,
        pack_buffer: usize,
        pack_equal: Option<bool>,
        pack_truncate: bool,
    ) -> PyResult<PyDatasetLoader> {
        let pack = pack_options(
            max_rows,
            rows_of.as_deref(),
            (pack_tokens, pack_rows, pack_buffer),
            pack_equal,
            pack_truncate,
        )?;
        // When packing, `rows_of` names the tensor whose rows fill a bin.
        let options = loader_options(
            batch_size,
            max_rows,
            if pack.is_some() { None } else { rows_of },
            drop_last,
            seed,
            shuffle_buffer,
            (rank, world_size, worker, num_workers),
            remainder,
            prefetch,
        )?;
        let dataset = self.dataset.clone();
        let start = move |o: LoaderOptions, s: Option<&LoaderState>| match (&pack, s) {
            (None, Some(s)) => Loader::resume(dataset.clone(), o, s).map(AnyLoader::plain),
            (None, None) => Loader::new(dataset.clone(), o).map(AnyLoader::plain),
            (Some(p), Some(s)) => {
                PackedLoader::resume(dataset.clone(), o, p.clone(), s).map(AnyLoader::packed)
            }
            (Some(p), None) => {
                PackedLoader::at_epoch(dataset.clone(), o, p.clone(), 0).map(AnyLoader::packed)
            }
        };
        start_loader(py, start, options, epoch, state)
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

/// The options of `DatasetReader.loader` and `MixtureReader.loader`;
/// `consumer` is `(rank, world_size, worker, num_workers)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn loader_options(
    batch_size: usize,
    max_rows: Option<usize>,
    rows_of: Option<String>,
    drop_last: bool,
    seed: Option<u64>,
    shuffle_buffer: usize,
    consumer: (usize, usize, usize, usize),
    remainder: &str,
    prefetch: usize,
) -> PyResult<LoaderOptions> {
    let (rank, world_size, worker, num_workers) = consumer;
    let batching = match max_rows {
        Some(max_rows) => Batching::Rows {
            max_rows,
            tensor: rows_of,
        },
        None if rows_of.is_some() => {
            return Err(value(
                "rows_of names the tensor whose rows max_rows counts: give max_rows too",
            ));
        }
        None => Batching::Sequences(batch_size),
    };
    Ok(LoaderOptions {
        batching,
        drop_last,
        shuffle: seed.map(|seed| ShuffleOptions {
            seed,
            buffer: shuffle_buffer,
        }),
        rank,
        world_size,
        worker,
        num_workers,
        remainder: self::remainder(remainder)?,
        prefetch,
        // The loader's batch cache: its default byte budget (not a Python
        // option yet).
        ..Default::default()
    })
}

/// A `DatasetLoader` at the start of `epoch`, or resumed from `state` (a
/// state's JSON text); `start` makes the Rust loader (new, or resumed from a
/// state). Started with the GIL released.
pub(crate) fn start_loader(
    py: Python<'_>,
    start: impl Fn(LoaderOptions, Option<&LoaderState>) -> lodt::dataset::Result<AnyLoader> + Send,
    options: LoaderOptions,
    epoch: u64,
    state: Option<&str>,
) -> PyResult<PyDatasetLoader> {
    let state = state.map(state_json).transpose()?;
    let loader = py.detach(move || {
        guard("starting a loader", || {
            build_loader(&start, options, epoch, state.as_ref()).map_err(dataset_err)
        })
    })?;
    Ok(PyDatasetLoader {
        loader: Mutex::new(Some(ForkSafe::new(loader))),
    })
}

/// The packing options of `loader()`'s arguments (`None`: not packing).
pub(crate) fn pack_options(
    max_rows: Option<usize>,
    rows_of: Option<&str>,
    (pack_tokens, pack_rows, pack_buffer): (Option<usize>, Option<usize>, usize),
    pack_equal: Option<bool>,
    pack_truncate: bool,
) -> PyResult<Option<PackOptions>> {
    match pack_tokens {
        Some(capacity) => {
            if max_rows.is_some() {
                return Err(value(
                    "give max_rows (a row budget, in order) or pack_tokens (packed), not both",
                ));
            }
            Ok(Some(PackOptions {
                capacity,
                rows: pack_rows,
                buffer: pack_buffer,
                tensor: rows_of.map(str::to_string),
                equal_batches: pack_equal,
                truncate: pack_truncate,
            }))
        }
        None if pack_truncate => Err(value(
            "pack_truncate needs pack_tokens (the length to cut to)",
        )),
        None if pack_rows.is_some() => Err(value("pack_rows needs pack_tokens (the row length L)")),
        None => Ok(None),
    }
}

/// A plain or a packing loader.
pub(crate) enum AnyLoader {
    Plain(Box<Loader>),
    Packed(Box<PackedLoader>),
}

impl AnyLoader {
    /// A plain loader.
    pub(crate) fn plain(loader: Loader) -> Self {
        AnyLoader::Plain(Box::new(loader))
    }

    /// A packing loader.
    pub(crate) fn packed(loader: PackedLoader) -> Self {
        AnyLoader::Packed(Box::new(loader))
    }

    fn next(&mut self) -> Option<lodt::dataset::Result<MiniBatch>> {
        match self {
            AnyLoader::Plain(l) => l.next(),
            AnyLoader::Packed(l) => l.next().map(|b| b.map(|b| b.batch)),
        }
    }

    fn state(&self) -> LoaderState {
        match self {
            AnyLoader::Plain(l) => l.state(),
            AnyLoader::Packed(l) => l.state(),
        }
    }

    fn epoch(&self) -> u64 {
        match self {
            AnyLoader::Plain(l) => l.epoch(),
            AnyLoader::Packed(l) => l.epoch(),
        }
    }

    fn remaining(&self) -> u64 {
        match self {
            AnyLoader::Plain(l) => l.remaining(),
            AnyLoader::Packed(l) => l.remaining(),
        }
    }

    fn set_epoch(&mut self, epoch: u64) -> lodt::dataset::Result<()> {
        match self {
            AnyLoader::Plain(l) => l.set_epoch(epoch),
            AnyLoader::Packed(l) => l.set_epoch(epoch),
        }
    }
}

/// A loader (plain or packing, as `start` makes it) at the start of
/// `epoch`, or resumed from `state`.
fn build_loader(
    start: &dyn Fn(LoaderOptions, Option<&LoaderState>) -> lodt::dataset::Result<AnyLoader>,
    options: LoaderOptions,
    epoch: u64,
    state: Option<&LoaderState>,
) -> lodt::dataset::Result<AnyLoader> {
    if state.is_some() || epoch == 0 {
        return start(options, state);
    }
    // The start of `epoch`: the state of a fresh loader moved to that epoch
    // (spec/DATASET.md 7.3: the same consumers, nothing consumed). Built
    // without a prefetch thread, so nothing of epoch 0 is read.
    let mut probe = start(
        LoaderOptions {
            prefetch: 0,
            ..options.clone()
        },
        None,
    )?;
    probe.set_epoch(epoch)?;
    let first = probe.state();
    drop(probe);
    start(options, Some(&first))
}

/// A value that is leaked instead of dropped in a process forked from the
/// one that made it: a loader's prefetch thread does not exist in the child
/// (a `DataLoader` worker), and joining it there would hang.
struct ForkSafe<T> {
    value: Option<T>,
    pid: u32,
}

impl<T> ForkSafe<T> {
    fn new(value: T) -> Self {
        ForkSafe {
            value: Some(value),
            pid: std::process::id(),
        }
    }

    /// The value, in the process that made it only.
    fn get(&mut self) -> PyResult<&mut T> {
        if self.pid != std::process::id() {
            return Err(value(
                "this loader was started in another process (before a fork): start a new one",
            ));
        }
        self.value
            .as_mut()
            .ok_or_else(|| value("the loader is closed"))
    }
}

impl<T> Drop for ForkSafe<T> {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            std::mem::forget(self.value.take());
        }
    }
}

/// The Rust loader: `next()` gives mini-batches, `state()` where it is.
#[pyclass(name = "DatasetLoader", module = "lodt._lodt", frozen)]
pub struct PyDatasetLoader {
    loader: Mutex<Option<ForkSafe<AnyLoader>>>,
}

impl PyDatasetLoader {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&mut AnyLoader) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            guard(what, || {
                let mut slot = self.loader.lock().map_err(|_| value("loader poisoned"))?;
                let loader = slot
                    .as_mut()
                    .ok_or_else(|| value("the loader is closed"))?
                    .get()?;
                f(loader)
            })
        })
    }
}

#[pymethods]
impl PyDatasetLoader {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The next mini-batch as a `Batch`.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyBatch>> {
        Ok(self.next_with_ids(py)?.map(|(_, b)| b))
    }

    /// next_with_ids() -> tuple[list[int], Batch] | None
    ///
    /// The next mini-batch and the ids of its sequences; None at the end of
    /// the epoch.
    fn next_with_ids(&self, py: Python<'_>) -> PyResult<Option<(Vec<u64>, PyBatch)>> {
        let item = self.with(py, "loading a mini-batch", |l| {
            l.next().transpose().map_err(dataset_err)
        })?;
        Ok(item.map(|m| (m.ids, PyBatch::new(m.batch))))
    }

    /// state() -> str
    ///
    /// Where the loader is (what it has delivered), as the JSON text of
    /// `spec/DATASET.md` section 7.2.
    fn state(&self, py: Python<'_>) -> PyResult<String> {
        let state = self.with(py, "saving a loader state", |l| Ok(l.state()))?;
        serde_json::to_string(&state).map_err(|e| value(e.to_string()))
    }

    /// The epoch.
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, "reading the epoch", |l| Ok(l.epoch()))
    }

    /// The sequences this loader will still deliver in this epoch.
    #[getter]
    fn remaining(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, "counting", |l| Ok(l.remaining()))
    }

    /// set_epoch(epoch)
    ///
    /// Starts epoch `epoch` from its beginning.
    fn set_epoch(&self, py: Python<'_>, epoch: u64) -> PyResult<()> {
        self.with(py, "starting an epoch", |l| {
            l.set_epoch(epoch).map_err(dataset_err)
        })
    }

    /// close()
    ///
    /// Stops the prefetch thread (a no-op when closed).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self
            .loader
            .lock()
            .map_err(|_| value("loader poisoned"))?
            .take();
        py.detach(move || drop(taken));
        Ok(())
    }
}

/// merge_loader_states(states) -> str
///
/// Merges the states (JSON texts) of every consumer of one checkpoint into
/// one complete state, to resume on another world size.
#[pyfunction]
pub fn merge_loader_states(states: Vec<String>) -> PyResult<String> {
    let states = states
        .iter()
        .map(|s| state_json(s))
        .collect::<PyResult<Vec<_>>>()?;
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
