//! `_lodt.MixtureReader`: a weighted mixture of open datasets
//! (`spec/DATASET.md` section 10), read by the same `_lodt.loader()` as one
//! dataset. The pure-Python `lodt.Mixture` wraps it. Conversion, GIL
//! release and error mapping only: the mixture is `lodt::dataset::Mixture`.

use crate::batch::PyBatch;
use crate::dataset::PyDatasetReader;
use crate::error::{PyResult, dataset as dataset_err, guard, value};
use lodt::dataset::{DatasetReport, Mixture, MixtureOptions, Stop};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// Several open datasets read as one stream in given proportions.
#[pyclass(name = "MixtureReader", module = "lodt._lodt", frozen)]
pub struct PyMixtureReader {
    mixture: Arc<Mixture>,
}

/// `stop`: "first_exhausted", "all_exhausted" or a number of sequences
/// (the names parsed by the crate).
fn stop_of(stop: &Bound<'_, PyAny>) -> PyResult<Stop> {
    if let Ok(name) = stop.extract::<String>() {
        return name.parse().map_err(dataset_err);
    }
    match stop.extract::<u64>() {
        Ok(n) => Ok(Stop::Sequences(n)),
        Err(_) => Err(value(format!(
            "stop must be \"first_exhausted\", \"all_exhausted\" or a number of sequences (an int >= 0), found {}",
            stop.repr()?
        ))),
    }
}

impl PyMixtureReader {
    /// The mixture.
    pub(crate) fn mixture(&self) -> &Arc<Mixture> {
        &self.mixture
    }
}

/// A report (totals) as `{"shards", "bytes", "batches", "sequences"}`.
fn report<'py>(py: Python<'py>, r: &DatasetReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("shards", r.shards)?;
    d.set_item("bytes", r.bytes)?;
    d.set_item("batches", r.batches)?;
    d.set_item("sequences", r.sequences)?;
    Ok(d)
}

#[pymethods]
impl PyMixtureReader {
    /// MixtureReader(sources, weights, *, seed=0, stop="first_exhausted")
    ///
    /// A mixture of `sources` (`DatasetReader`s with one schema), drawn with
    /// `weights` (one per source, finite, >= 0, not all 0) from the draws of
    /// `seed`; `stop` is "first_exhausted", "all_exhausted" or a number of
    /// sequences per epoch.
    #[new]
    #[pyo3(signature = (sources, weights, *, seed = 0, stop = None))]
    fn py_new(
        py: Python<'_>,
        sources: Vec<PyRef<'_, PyDatasetReader>>,
        weights: Vec<f64>,
        seed: u64,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let stop = stop.map(stop_of).transpose()?.unwrap_or_default();
        let sources: Vec<_> = sources.iter().map(|s| s.dataset().clone()).collect();
        let mixture = py.detach(move || {
            guard("making a mixture", || {
                Mixture::try_new(sources, &weights, MixtureOptions { seed, stop })
                    .map_err(dataset_err)
            })
        })?;
        Ok(PyMixtureReader {
            mixture: Arc::new(mixture),
        })
    }

    /// manifest_json() -> str
    ///
    /// A manifest of the mixture: the schema, and every source's shards in
    /// source order (the totals `lodt.Dataset`'s properties sum).
    fn manifest_json(&self) -> PyResult<String> {
        let shards: Vec<_> = self
            .mixture
            .sources()
            .iter()
            .flat_map(|s| s.manifest().shards.iter())
            .collect();
        let json = serde_json::json!({
            "schema": self.mixture.schema(),
            "metadata": {},
            "shards": shards,
        });
        serde_json::to_string(&json).map_err(|e| value(e.to_string()))
    }

    /// num_sequences(epoch=0, state=None) -> int
    ///
    /// The positions of epoch `epoch`'s stream (all consumers together);
    /// with `state` (a loader state's JSON text of this mixture), the stream
    /// that state resumes (another length in an epoch it continues under
    /// changed parameters, `spec/DATASET.md` 10.6).
    #[pyo3(signature = (epoch = 0, state = None))]
    fn num_sequences(&self, py: Python<'_>, epoch: u64, state: Option<&str>) -> PyResult<u64> {
        let mixture = self.mixture.clone();
        let state = state.map(crate::dataset::state_json).transpose()?;
        py.detach(move || {
            guard("counting", || {
                let feed = match &state {
                    Some(s) => lodt::dataset::Feed::from(mixture.clone())
                        .resumed(s)
                        .map_err(dataset_err)?,
                    None => lodt::dataset::Feed::from(mixture.clone()),
                };
                Ok(feed.num_sequences(epoch))
            })
        })
    }

    /// evolve_checkpoint(text, *, seed=None, shuffle_buffer=16384,
    ///                   remainder="keep", packing=None, rows_of=None) -> str
    ///
    /// A checkpoint (JSON text, `spec/DATASET.md` 7.5) of a loader of
    /// another mixture (other weights, sources, seed or stop) as one of this
    /// mixture that continues its epoch (`Mixture::evolve_state`, 10.6),
    /// JSON text; the options are the loader's (`seed`: the shuffle's, None
    /// unshuffled). The checkpoint must be complete (merged).
    #[pyo3(signature = (text, *, seed = None, shuffle_buffer = 16384, remainder = "keep",
        packing = None, rows_of = None))]
    #[allow(clippy::too_many_arguments)]
    fn evolve_checkpoint(
        &self,
        py: Python<'_>,
        text: &str,
        seed: Option<u64>,
        shuffle_buffer: usize,
        remainder: &str,
        packing: Option<PyRef<'_, crate::loader::PyPacking>>,
        rows_of: Option<String>,
    ) -> PyResult<String> {
        let json: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| value(format!("a dataset state is a JSON object: {e}")))?;
        let checkpoint = lodt::dataset::Checkpoint::from_json(&json).map_err(dataset_err)?;
        let options = lodt::dataset::LoaderOptions {
            shuffle: seed.map(|seed| lodt::dataset::ShuffleOptions {
                seed,
                buffer: shuffle_buffer,
            }),
            remainder: remainder.parse().map_err(dataset_err)?,
            packing: packing.map(|p| crate::loader::pack_options(&p, rows_of)),
            ..Default::default()
        };
        let mixture = self.mixture.clone();
        let evolved = py.detach(move || {
            guard("changing a mixture's state", || {
                mixture
                    .evolve_state(&options, &checkpoint.loader)
                    .map_err(dataset_err)
            })
        })?;
        serde_json::to_string(&lodt::dataset::Checkpoint::new(evolved, 0).to_json())
            .map_err(|e| value(e.to_string()))
    }

    /// source_of(id) -> tuple[int, int] | None
    ///
    /// The source of mixture id `id` and its id there (None past the end).
    fn source_of(&self, id: u64) -> Option<(usize, u64)> {
        self.mixture.source_of(id)
    }

    /// totals() -> dict
    ///
    /// The sources' `{"shards", "bytes", "batches", "sequences"}`, summed
    /// (from their manifests; `sequences` is the id space of `take`).
    fn totals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        report(py, &self.mixture.totals())
    }

    /// take(ids) -> Batch
    ///
    /// The sequences of mixture ids `ids` (as `source_of` splits them), in
    /// that order, gathered into one batch (a copy).
    fn take(&self, py: Python<'_>, ids: Vec<u64>) -> PyResult<PyBatch> {
        let mixture = self.mixture.clone();
        let batch = py.detach(move || {
            guard("gathering sequences", || {
                mixture.take(&ids).map_err(dataset_err)
            })
        })?;
        Ok(PyBatch::new(batch))
    }

    /// verify() -> dict
    ///
    /// Verifies every source completely (as `DatasetReader.verify`); raises
    /// ValueError naming the first damaged shard. Returns the summed
    /// `{"shards", "bytes", "batches", "sequences"}`.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mixture = self.mixture.clone();
        let total = py.detach(move || {
            guard("verifying a mixture", || {
                mixture.verify().map_err(dataset_err)
            })
        })?;
        report(py, &total)
    }

    /// The offsets of the sources' ids: source `k`'s sequence `i` is id
    /// `offsets[k] + i`.
    #[getter]
    fn offsets(&self) -> Vec<u64> {
        (0..self.mixture.sources().len())
            .map(|k| {
                self.mixture.sources()[..k]
                    .iter()
                    .map(|s| s.num_sequences())
                    .sum()
            })
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "MixtureReader(sources={}, weights={:?}, stop={:?})",
            self.mixture.sources().len(),
            self.mixture.weights(),
            self.mixture.options().stop
        )
    }
}
