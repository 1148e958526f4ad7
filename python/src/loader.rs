//! The loader: `_lodt.Packing` (packing's options, `PackOptions`),
//! `_lodt.loader()` (the one constructor, for a `DatasetReader` or a
//! `MixtureReader`) and `_lodt.DatasetLoader` (the Rust `Loader`: shuffled,
//! partitioned, resumable, packed or not). Conversion, GIL release and error
//! mapping only: the loader is `lodt::dataset::Loader`.

use crate::batch::PyBatch;
use crate::dataset::{PyDatasetReader, state_json};
use crate::error::{PyResult, dataset as dataset_err, guard, value};
use crate::mixture::PyMixtureReader;
use lodt::dataset::{
    Batching, Feed, Loader, LoaderOptions, PackOptions, Partition, ShuffleOptions,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::Mutex;

/// Packing(tokens, *, rows=None, buffer=1000, equal=None, truncate=False)
///
/// Packed mini-batches (`spec/DATASET.md` 7.4): whole sequences best-fit
/// into bins of at most `tokens` rows, chosen from windows of `buffer`
/// sequences; `rows`: that many bins per mini-batch (an `[R, L]` shape);
/// `equal`: as many mini-batches on every consumer (`None`: when
/// `world_size > 1`); `truncate`: cut a sequence longer than `tokens` to
/// its first `tokens` rows.
#[pyclass(name = "Packing", module = "lodt._lodt", frozen, eq)]
#[derive(Debug, Clone, PartialEq)]
pub struct PyPacking {
    options: PackOptions,
}

#[pymethods]
impl PyPacking {
    #[new]
    #[pyo3(signature = (tokens, *, rows = None, buffer = 1000, equal = None, truncate = false))]
    fn py_new(
        tokens: usize,
        rows: Option<usize>,
        buffer: usize,
        equal: Option<bool>,
        truncate: bool,
    ) -> Self {
        PyPacking {
            options: PackOptions {
                capacity: tokens,
                rows,
                buffer,
                tensor: None,
                equal_batches: equal,
                truncate,
            },
        }
    }

    /// The bin's capacity in rows (the token budget, or the row length).
    #[getter]
    fn tokens(&self) -> usize {
        self.options.capacity
    }

    /// Bins per mini-batch (`None`: one).
    #[getter]
    fn rows(&self) -> Option<usize> {
        self.options.rows
    }

    /// The window, in sequences, packed at once.
    #[getter]
    fn buffer(&self) -> usize {
        self.options.buffer
    }

    /// Equal mini-batch counts per consumer (`None`: when `world_size > 1`).
    #[getter]
    fn equal(&self) -> Option<bool> {
        self.options.equal_batches
    }

    /// Cut sequences longer than `tokens`.
    #[getter]
    fn truncate(&self) -> bool {
        self.options.truncate
    }

    /// The arguments `pickle` makes it again from (a `Dataset` with its
    /// options goes to `DataLoader` workers by pickle under spawn).
    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let o = &self.options;
        let kwargs = PyDict::new(py);
        kwargs.set_item("rows", o.rows)?;
        kwargs.set_item("buffer", o.buffer)?;
        kwargs.set_item("equal", o.equal_batches)?;
        kwargs.set_item("truncate", o.truncate)?;
        Ok((PyTuple::new(py, [o.capacity])?, kwargs))
    }

    fn __repr__(&self) -> String {
        let o = &self.options;
        let py_bool = |b: bool| if b { "True" } else { "False" };
        format!(
            "Packing(tokens={}, rows={}, buffer={}, equal={}, truncate={})",
            o.capacity,
            o.rows.map_or("None".to_string(), |r| r.to_string()),
            o.buffer,
            o.equal_batches.map_or("None", py_bool),
            py_bool(o.truncate)
        )
    }
}

/// What a loader reads: a `DatasetReader` or a `MixtureReader`.
fn feed_of(source: &Bound<'_, PyAny>) -> PyResult<Feed> {
    if let Ok(d) = source.cast::<PyDatasetReader>() {
        return Ok(Feed::from(d.get().dataset().clone()));
    }
    if let Ok(m) = source.cast::<PyMixtureReader>() {
        return Ok(Feed::from(m.get().mixture().clone()));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "a loader reads a DatasetReader or a MixtureReader, found {}",
        source.get_type().name()?
    )))
}

/// loader(source, *, batch_size=32, max_rows=None, rows_of=None,
///        drop_last=False, seed=None, shuffle_buffer=16384, rank=0,
///        world_size=1, worker=0, num_workers=1, remainder="keep",
///        prefetch=2, epoch=0, state=None, packing=None,
///        partition=None) -> DatasetLoader
///
/// A loader of consumer `(rank, worker)` of `source` (a `DatasetReader` or
/// a `MixtureReader`): `batch_size` sequences per mini-batch, or as many as
/// fit in `max_rows` rows of tensor `rows_of`; shuffled when `seed` is
/// given (a mixture: each source's order); packed when `packing` (a
/// `Packing`) is given, counting the rows of `rows_of`. It starts at epoch
/// `epoch`, or resumes from `state` (a loader state's JSON text).
/// `partition` is `"round_robin"`, `"locality"` or `None` (the crate's
/// default: the state's, else locality for one remote dataset unpacked).
#[pyfunction]
#[pyo3(signature = (source, *, batch_size = 32, max_rows = None, rows_of = None,
    drop_last = false, seed = None, shuffle_buffer = 16384, rank = 0, world_size = 1,
    worker = 0, num_workers = 1, remainder = "keep", prefetch = 2, epoch = 0, state = None,
    packing = None, partition = None))]
#[allow(clippy::too_many_arguments)]
pub fn loader(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
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
    packing: Option<PyRef<'_, PyPacking>>,
    partition: Option<&str>,
) -> PyResult<PyDatasetLoader> {
    let feed = feed_of(source)?;
    let batching = match (max_rows, &packing) {
        (Some(_), Some(_)) => {
            return Err(value(
                "give max_rows (a row budget, in order) or packing (packed), not both",
            ));
        }
        (Some(max_rows), None) => Batching::Rows {
            max_rows,
            tensor: rows_of.clone(),
        },
        (None, None) if rows_of.is_some() => {
            return Err(value(
                "rows_of names the tensor whose rows max_rows (or packing) counts: give max_rows or packing too",
            ));
        }
        (None, _) => Batching::Sequences(batch_size),
    };
    let options = LoaderOptions {
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
        remainder: remainder.parse().map_err(dataset_err)?,
        prefetch,
        // When packing, `rows_of` names the tensor whose rows fill a bin.
        packing: packing.map(|p| pack_options(&p, rows_of)),
        partition: partition
            .map(str::parse::<Partition>)
            .transpose()
            .map_err(dataset_err)?,
        // The batch cache: its default byte budget (not a Python option yet).
        ..Default::default()
    };
    let state = state.map(state_json).transpose()?;
    let loader = py.detach(move || {
        guard("starting a loader", || {
            match &state {
                Some(state) => Loader::resume(feed, options, state),
                None => Loader::at_epoch(feed, options, epoch),
            }
            .map_err(dataset_err)
        })
    })?;
    Ok(PyDatasetLoader {
        loader: Mutex::new(Some(ForkSafe::new(loader))),
    })
}

/// The crate's packing options of `packing`, counting the rows of
/// `rows_of` (None: the schema's first tensor).
pub(crate) fn pack_options(packing: &PyPacking, rows_of: Option<String>) -> PackOptions {
    PackOptions {
        tensor: rows_of,
        ..packing.options.clone()
    }
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
    loader: Mutex<Option<ForkSafe<Loader>>>,
}

impl PyDatasetLoader {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&mut Loader) -> PyResult<T> + Send,
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

    /// progress() -> tuple[str, int | None]
    ///
    /// The state without its cursor (JSON text) and the cursor's position:
    /// cheap enough for every mini-batch (`Loader::progress`).
    fn progress(&self, py: Python<'_>) -> PyResult<(String, Option<u64>)> {
        let (state, at) = self.with(py, "saving a loader state", |l| Ok(l.progress()))?;
        let text = serde_json::to_string(&state).map_err(|e| value(e.to_string()))?;
        Ok((text, at))
    }

    /// cursor() -> str | None
    ///
    /// The cursor of the loader's state (JSON text), if it has one
    /// (`spec/DATASET.md` 7.3).
    fn cursor(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let cursor = self.with(py, "saving a loader state", |l| Ok(l.cursor()))?;
        cursor
            .map(|c| serde_json::to_string(&c).map_err(|e| value(e.to_string())))
            .transpose()
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
