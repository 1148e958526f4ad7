//! Read planning for Ray Data (`lodt.ray.read_lodt`): the crate's
//! `lodt::dataset::plan_reads` over a manifest given as its JSON text.

use crate::error::{PyResult, dataset as dataset_err};
use lodt::dataset::{Manifest, plan_reads as plan};
use pyo3::prelude::*;

/// One read task: `([(shard name, [batch, ...]), ...], sequences, bytes)`.
type Task = (Vec<(String, Vec<usize>)>, u64, u64);

/// plan_reads(manifest_json, parallelism) -> list[tuple[list[tuple[str, list[int]]], int, int]]
///
/// The dataset's batches (its manifest, JSON text) cut into at most
/// `parallelism` contiguous read tasks of about equal sequence counts: per
/// task the shards' names with their batch indices, its sequences and its
/// share of the shards' bytes.
#[pyfunction]
pub fn plan_reads(manifest_json: &str, parallelism: usize) -> PyResult<Vec<Task>> {
    let manifest =
        Manifest::from_json_bytes(manifest_json.as_bytes(), "manifest").map_err(dataset_err)?;
    Ok(plan(&manifest.shards, parallelism)
        .into_iter()
        .map(|task| {
            let shards = task
                .shards
                .into_iter()
                .map(|(s, batches)| (manifest.shards[s].name.clone(), batches))
                .collect();
            (shards, task.sequences, task.bytes)
        })
        .collect())
}
