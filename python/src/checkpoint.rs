//! A rank's checkpoint (`spec/DATASET.md` 7.5), the object of
//! `lodt.Dataset.state_dict()`: read and written by the crate's
//! `lodt::dataset::Checkpoint`, with its worker rotation and the consumer
//! numbering (`lodt::dataset::consumer`). Checkpoints cross as JSON text;
//! `lodt.Dataset` converts them from and to dicts.

use crate::error::{PyResult, dataset as dataset_err, value};
use lodt::dataset::{Checkpoint, LoaderState};
use pyo3::prelude::*;

fn parse(text: &str) -> PyResult<Checkpoint> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| value(format!("a dataset state is a JSON object: {e}")))?;
    Checkpoint::from_json(&json).map_err(dataset_err)
}

fn dump(checkpoint: &Checkpoint) -> PyResult<String> {
    serde_json::to_string(&checkpoint.to_json()).map_err(|e| value(e.to_string()))
}

/// checkpoint_from_json(text) -> str
///
/// Reads a checkpoint (JSON text of `Dataset.state_dict()`, or of a bare
/// loader state) and gives it back as a checkpoint object (JSON text); a
/// `ValueError` says what is wrong with it.
#[pyfunction]
pub fn checkpoint_from_json(text: &str) -> PyResult<String> {
    dump(&parse(text)?)
}

/// checkpoint_to_json(loader, next_worker) -> str
///
/// The checkpoint (JSON text) of a loader state (JSON text) whose next
/// mini-batch comes from local worker `next_worker`.
#[pyfunction]
pub fn checkpoint_to_json(loader: &str, next_worker: u64) -> PyResult<String> {
    let json: serde_json::Value = serde_json::from_str(loader)
        .map_err(|e| value(format!("a loader state is a JSON object: {e}")))?;
    let loader = LoaderState::from_json(&json).map_err(dataset_err)?;
    dump(&Checkpoint::new(loader, next_worker))
}

/// inspect_state(text, dataset=None, storage_options=None) -> str
///
/// The facts of a checkpoint or loader state (JSON text) as JSON text
/// (`lodt::dataset::StateReport`), with `"dataset_mismatch"`: why the
/// dataset at `dataset` is not the one it was saved on, or null (absent
/// when no dataset is given).
#[pyfunction]
#[pyo3(signature = (text, dataset = None, storage_options = None))]
pub fn inspect_state(
    py: Python<'_>,
    text: &str,
    dataset: Option<std::path::PathBuf>,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<String> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| value(format!("a dataset state is a JSON object: {e}")))?;
    let report = lodt::dataset::StateReport::of_json(&json).map_err(dataset_err)?;
    let mut out = serde_json::to_value(&report).map_err(|e| value(e.to_string()))?;
    if let Some(path) = dataset {
        let mismatch = py.detach(move || {
            crate::error::guard("opening the dataset", || {
                let options = crate::file::open_options(true, false, storage_options);
                let store = crate::dataset::store_at(&path, &options)?;
                let dataset = lodt::dataset::Dataset::open_in(store).map_err(dataset_err)?;
                Ok(report.mismatch(&dataset))
            })
        })?;
        out["dataset_mismatch"] = serde_json::json!(mismatch);
    }
    serde_json::to_string(&out).map_err(|e| value(e.to_string()))
}

/// check_state(text, dataset, world_size=None, workers=None, storage_options=None) -> str
///
/// A dry run of the rest of a checkpoint's or loader state's (JSON text)
/// epoch on the dataset at `dataset`, ids only, as JSON text
/// (`lodt::dataset::ResumeCheck`); the GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (text, dataset, world_size = None, workers = None, storage_options = None))]
pub fn check_state(
    py: Python<'_>,
    text: &str,
    dataset: std::path::PathBuf,
    world_size: Option<u64>,
    workers: Option<u64>,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<String> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| value(format!("a dataset state is a JSON object: {e}")))?;
    let report = py.detach(move || {
        crate::error::guard("checking the state", || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&dataset, &options)?;
            let dataset = lodt::dataset::Dataset::open_in(store).map_err(dataset_err)?;
            lodt::dataset::ResumeCheck::of_json(dataset, &json, world_size, workers)
                .map_err(dataset_err)
        })
    })?;
    serde_json::to_string(&report).map_err(|e| value(e.to_string()))
}

/// merge_checkpoints(texts) -> str
///
/// Merges the checkpoints (JSON texts) of every rank into one complete
/// checkpoint (JSON text) that resumes with worker 0.
#[pyfunction]
pub fn merge_checkpoints(texts: Vec<String>) -> PyResult<String> {
    let checkpoints = texts
        .iter()
        .map(|t| parse(t))
        .collect::<PyResult<Vec<_>>>()?;
    dump(&Checkpoint::merge(&checkpoints).map_err(dataset_err)?)
}

/// checkpoint_workers(text, world_size) -> int
///
/// The workers per rank the checkpoint was taken with (1 when its
/// consumers are not a multiple of `world_size`); a `ValueError` when its
/// `next_worker` is not one of them.
#[pyfunction]
pub fn checkpoint_workers(text: &str, world_size: u64) -> PyResult<u64> {
    parse(text)?.workers(world_size).map_err(dataset_err)
}

/// checkpoint_first_worker(text, world_size, workers) -> int
///
/// The local consumer that worker 0 serves when resuming from the
/// checkpoint with `workers` workers per rank.
#[pyfunction]
pub fn checkpoint_first_worker(text: &str, world_size: u64, workers: u64) -> PyResult<u64> {
    Ok(parse(text)?.first_worker(world_size, workers))
}

/// served_worker(worker, first, workers) -> int
///
/// The local consumer worker process `worker` serves when worker 0 serves
/// `first`.
#[pyfunction]
pub fn served_worker(worker: u64, first: u64, workers: u64) -> u64 {
    lodt::dataset::served_worker(worker, first, workers)
}

/// next_worker(last, first, workers) -> int
///
/// The checkpoint's `next_worker`: the local consumer after `last` (the one
/// that delivered last), or `first` when none delivered.
#[pyfunction]
#[pyo3(signature = (last, first, workers))]
pub fn next_worker(last: Option<u64>, first: u64, workers: u64) -> u64 {
    lodt::dataset::next_worker(last, first, workers)
}

/// consumer(rank, world_size, worker, num_workers) -> (int, int)
///
/// The number of consumers and the index of local worker `worker` of rank
/// `rank`: `(world_size * num_workers, rank * num_workers + worker)`.
#[pyfunction]
pub fn consumer(
    rank: usize,
    world_size: usize,
    worker: usize,
    num_workers: usize,
) -> PyResult<(u64, u64)> {
    lodt::dataset::consumer(rank, world_size, worker, num_workers).map_err(dataset_err)
}

/// Registers the functions and `CHECKPOINT_VERSION`.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CHECKPOINT_VERSION", lodt::dataset::CHECKPOINT_VERSION)?;
    m.add_function(wrap_pyfunction!(checkpoint_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint_to_json, m)?)?;
    m.add_function(wrap_pyfunction!(merge_checkpoints, m)?)?;
    m.add_function(wrap_pyfunction!(inspect_state, m)?)?;
    m.add_function(wrap_pyfunction!(check_state, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint_workers, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint_first_worker, m)?)?;
    m.add_function(wrap_pyfunction!(served_worker, m)?)?;
    m.add_function(wrap_pyfunction!(next_worker, m)?)?;
    m.add_function(wrap_pyfunction!(consumer, m)?)?;
    Ok(())
}
