//! The parts of a parallel write and the names of a dataset's objects:
//! `_lodt.list_parts`, `_lodt.remove_parts`, `_lodt.PartJob` (the ids and
//! clean-up of a job of retried tasks, for `lodt.ray`), the naming constants
//! and `is_uri` / `join_location`. Argument conversion, GIL release and
//! error mapping only: the logic is `lodt::dataset::{Dataset::list_parts,
//! Dataset::remove_parts, PartJob}` and `lodt::location`.

use crate::dataset_writer::summary;
use crate::error::{PyResult, dataset as dataset_err, guard};
use lodt::dataset::{Dataset, Part, PartJob};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

type Options = Option<BTreeMap<String, String>>;

/// Runs `f` on the store of the dataset at `path`, without the GIL.
fn with_store<T: Send>(
    py: Python<'_>,
    what: &'static str,
    path: PathBuf,
    storage_options: Options,
    f: impl FnOnce(&dyn lodt::dataset::DatasetStore) -> lodt::dataset::Result<T> + Send,
) -> PyResult<T> {
    py.detach(move || {
        guard(what, || {
            let options = crate::file::open_options(true, false, storage_options);
            let store = crate::dataset::store_at(&path, &options)?;
            f(&*store).map_err(dataset_err)
        })
    })
}

/// A part as a dict: `{"writer_id", "name", "shards", "batches",
/// "sequences", "bytes", "commit_id"` (the last commit recorded, or None),
/// `"commits"}`.
fn part_dict(py: Python<'_>, part: &Part) -> PyResult<Py<PyDict>> {
    let last = part.manifest.commits.last().cloned().unwrap_or_default();
    let d = summary(py, &part.manifest, &last)?;
    let b = d.bind(py);
    if last.is_empty() {
        b.set_item("commit_id", py.None())?;
    }
    b.set_item("writer_id", &part.writer_id)?;
    b.set_item("name", &part.name)?;
    b.set_item("commits", part.manifest.commits.clone())?;
    Ok(d)
}

/// list_parts(path, storage_options=None) -> list[dict]
///
/// The parts of parallel writers waiting for `commit_parts` in the dataset
/// at `path` (a directory or a URI), in the order a merge takes them: per
/// part `{"writer_id", "name", "shards", "batches", "sequences", "bytes",
/// "commit_id", "commits"}`.
#[pyfunction]
#[pyo3(signature = (path, storage_options = None))]
pub fn list_parts(
    py: Python<'_>,
    path: PathBuf,
    storage_options: Options,
) -> PyResult<Vec<Py<PyDict>>> {
    let parts = with_store(py, "listing parts", path, storage_options, |store| {
        Dataset::list_parts(store)
    })?;
    parts.iter().map(|p| part_dict(py, p)).collect()
}

/// remove_parts(path, writer_ids, storage_options=None) -> list[str]
///
/// Deletes the partial manifests of the part writers `writer_ids`, then
/// their shards that the manifest does not list (never a listed one), under
/// the dataset's writer lock; returns the names deleted.
#[pyfunction]
#[pyo3(signature = (path, writer_ids, storage_options = None))]
pub fn remove_parts(
    py: Python<'_>,
    path: PathBuf,
    writer_ids: Vec<String>,
    storage_options: Options,
) -> PyResult<Vec<String>> {
    let ids: HashSet<String> = writer_ids.into_iter().collect();
    with_store(py, "removing parts", path, storage_options, move |store| {
        Dataset::remove_parts(store, &|id: &str| ids.contains(id))
    })
}

/// is_uri(location) -> bool
///
/// Whether `location` is a URI of an object store lodt reads (`s3://`,
/// `gs://`, `az://`, `abfs(s)://`, `azure://`, `http(s)://`) rather than a
/// local path.
#[pyfunction]
pub fn is_uri(location: PathBuf) -> bool {
    lodt::location::is_uri(&location.to_string_lossy())
}

/// join_location(location, name) -> str
///
/// The location of object `name` of the dataset at `location` (a local
/// directory or a URI).
#[pyfunction]
pub fn join_location(location: PathBuf, name: &str) -> String {
    lodt::location::join(&location.to_string_lossy(), name)
}

/// PartJob(family="ray", id=None)
///
/// The ids of a parallel write run as one job of numbered tasks whose
/// attempts may be retried (`lodt.ray.write_lodt`), and its clean-up: a new
/// job of `family`, or the job `id` (`FAMILY-` and 12 hex digits). Task
/// `T`'s attempts write parts `JOB-TTTTTT-AAAAAAAA`, committed under
/// `JOB-TTTTTT`; the merge's commit id is the job's id. Picklable.
#[pyclass(name = "PartJob", module = "lodt._lodt", frozen)]
pub struct PyPartJob {
    job: PartJob,
}

#[pymethods]
impl PyPartJob {
    #[new]
    #[pyo3(signature = (family = "ray", id = None))]
    fn py_new(family: &str, id: Option<&str>) -> PyResult<Self> {
        let job = match id {
            None => PartJob::new(family),
            Some(id) => PartJob::try_from_id(id),
        }
        .map_err(dataset_err)?;
        if job.family() != family {
            return Err(crate::error::value(format!(
                "job id {:?} is of family {:?}, not {family:?}",
                job.id(),
                job.family()
            )));
        }
        Ok(PyPartJob { job })
    }

    /// The job's id (the default commit id of its merge).
    #[getter]
    fn id(&self) -> String {
        self.job.id().to_owned()
    }

    /// The job's family (the start of its id).
    #[getter]
    fn family(&self) -> String {
        self.job.family().to_owned()
    }

    /// task_commit_id(task) -> str
    ///
    /// The commit id of task `task`'s part, the same for every attempt.
    fn task_commit_id(&self, task: u64) -> String {
        self.job.task_commit_id(task)
    }

    /// new_writer_id(task) -> str
    ///
    /// A new writer id for an attempt of task `task`.
    fn new_writer_id(&self, task: u64) -> String {
        self.job.new_writer_id(task)
    }

    /// task_of(writer_id) -> int | None
    ///
    /// The task of `writer_id` if it is an attempt's of this job.
    fn task_of(&self, writer_id: &str) -> Option<u64> {
        self.job.task_of(writer_id)
    }

    /// committed_attempt(path, task, storage_options=None) -> str | None
    ///
    /// The writer id of an attempt of task `task` whose part is committed
    /// (lists the task's commit id) in the dataset at `path`, if any.
    #[pyo3(signature = (path, task, storage_options = None))]
    fn committed_attempt(
        &self,
        py: Python<'_>,
        path: PathBuf,
        task: u64,
        storage_options: Options,
    ) -> PyResult<Option<String>> {
        let job = self.job.clone();
        with_store(
            py,
            "looking for a committed part",
            path,
            storage_options,
            move |store| job.committed_attempt(store, task),
        )
    }

    /// clean(path, keep=True, storage_options=None) -> dict
    ///
    /// Under the dataset's writer lock: with `keep`, keeps one part per task
    /// of this job (the first by name) and deletes every other object of
    /// this family's writers; without, deletes all of them. Never a shard
    /// the manifest lists. Returns `{"kept": [part dicts, in task order],
    /// "removed": [names], "sequences": the kept parts' sequences}`.
    #[pyo3(signature = (path, keep = true, storage_options = None))]
    fn clean(
        &self,
        py: Python<'_>,
        path: PathBuf,
        keep: bool,
        storage_options: Options,
    ) -> PyResult<Py<PyDict>> {
        let job = self.job.clone();
        let cleanup = with_store(
            py,
            "cleaning up parts",
            path,
            storage_options,
            move |store| job.clean(store, keep),
        )?;
        let d = PyDict::new(py);
        let kept = cleanup
            .kept
            .iter()
            .map(|(_, p)| part_dict(py, p))
            .collect::<PyResult<Vec<_>>>()?;
        d.set_item("kept", kept)?;
        d.set_item("removed", cleanup.removed.clone())?;
        d.set_item("sequences", cleanup.sequences())?;
        Ok(d.unbind())
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> (Py<PyType>, (String, String)) {
        let job = &slf.get().job;
        (
            slf.get_type().unbind(),
            (job.family().to_owned(), job.id().to_owned()),
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "PartJob(family={:?}, id={:?})",
            self.job.family(),
            self.job.id()
        )
    }
}

/// Adds the naming constants: `MANIFEST_NAME`, `PART_PREFIX`,
/// `SHARD_SUFFIX`, `DEFAULT_SHARD_BYTES`.
pub fn add_names(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MANIFEST_NAME", lodt::dataset::MANIFEST_NAME)?;
    m.add("PART_PREFIX", lodt::dataset::names::PART_PREFIX)?;
    m.add("SHARD_SUFFIX", lodt::dataset::names::SHARD_SUFFIX)?;
    m.add("DEFAULT_SHARD_BYTES", lodt::dataset::DEFAULT_SHARD_BYTES)?;
    Ok(())
}
