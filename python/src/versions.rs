//! A dataset's versions and tags (`spec/DATASET.md` section 3.3):
//! `_lodt.dataset_log`, `_lodt.dataset_tags` and `_lodt.tag_dataset`, each
//! the crate's `Dataset::versions_in`, `tags_in` and `tag_in` with the GIL
//! released, answering JSON text that `lodt/_versions.py` parses.

use crate::error::{guard, value};
use lodt::dataset::Dataset;
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn json(text: serde_json::Result<String>) -> PyResult<String> {
    text.map_err(|e| value(e.to_string()))
}

/// dataset_log(path, storage_options=None) -> str
///
/// Every version's commit record, oldest first, as a JSON array.
#[pyfunction]
#[pyo3(signature = (path, storage_options = None))]
pub fn dataset_log(
    py: Python<'_>,
    path: PathBuf,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<String> {
    py.detach(move || {
        guard("reading a dataset's versions", || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&path, &options)?;
            json(serde_json::to_string(
                &Dataset::versions_in(store).map_err(crate::error::dataset)?,
            ))
        })
    })
}

/// dataset_tags(path, storage_options=None) -> str
///
/// The dataset's tags, by name, as a JSON array.
#[pyfunction]
#[pyo3(signature = (path, storage_options = None))]
pub fn dataset_tags(
    py: Python<'_>,
    path: PathBuf,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<String> {
    py.detach(move || {
        guard("reading a dataset's tags", || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&path, &options)?;
            json(serde_json::to_string(
                &Dataset::tags_in(store).map_err(crate::error::dataset)?,
            ))
        })
    })
}

/// tag_dataset(path, name, version=None, storage_options=None) -> str
///
/// Names version `version` (default: the current one) `name`, for good;
/// the tag as a JSON object.
#[pyfunction]
#[pyo3(signature = (path, name, version = None, storage_options = None))]
pub fn tag_dataset(
    py: Python<'_>,
    path: PathBuf,
    name: String,
    version: Option<u64>,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<String> {
    py.detach(move || {
        guard("tagging a dataset's version", || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&path, &options)?;
            json(serde_json::to_string(
                &Dataset::tag_in(store, &name, version).map_err(crate::error::dataset)?,
            ))
        })
    })
}
