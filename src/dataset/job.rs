//! A parallel write run as one job of numbered tasks whose attempts may be
//! retried (Ray Data's `write_lodt` is one): the ids of its writers and
//! commits, the part a task's earlier attempt committed, and the clean-up
//! before the merge (or after a failure).
//!
//! | what | id |
//! |------|----|
//! | the job | `FAMILY-JJJJJJJJJJJJ` (12 random hex digits): [`PartJob::id`], the merge's default commit id |
//! | task `T` | commit id `JOB-TTTTTT` ([`PartJob::task_commit_id`]), the same for every attempt |
//! | an attempt of task `T` | writer id `JOB-TTTTTT-AAAAAAAA` ([`PartJob::new_writer_id`]), new per attempt |
//!
//! An attempt first asks whether an earlier attempt of its task committed
//! its part ([`PartJob::committed_attempt`]: a part lists the task's commit
//! id) and writes nothing if so; retries are idempotent even when the
//! answer to a part's commit was lost. Before merging, the driver keeps one
//! part per task of its job and deletes every other part of the family
//! (other attempts, other jobs that failed) with [`PartJob::clean`].

use super::commit::new_commit_id;
use super::error::{DatasetError, Result};
use super::names::part_writer_id;
use super::parts::{Part, names, read_part, remove_parts_locked};
use super::reader::Dataset;
use super::store::DatasetStore;
use std::collections::{BTreeMap, HashSet};

/// The random hex digits of a job id.
const JOB_DIGITS: usize = 12;
/// The random hex digits of an attempt's writer id.
const ATTEMPT_DIGITS: usize = 8;
/// The least number of digits of a task's index in an id.
const TASK_DIGITS: usize = 6;
/// The longest family name.
const MAX_FAMILY: usize = 16;

/// The ids of one parallel write job and the clean-up of its parts (module
/// docs).
///
/// ```
/// use lodt::dataset::PartJob;
/// let job = PartJob::try_from_id("ray-0123456789ab")?;
/// assert_eq!(job.task_commit_id(7), "ray-0123456789ab-000007");
/// let writer = job.new_writer_id(7);
/// assert!(writer.starts_with("ray-0123456789ab-000007-"));
/// assert_eq!(job.task_of(&writer), Some(7));
/// assert_eq!(PartJob::new("ray")?.family(), "ray");
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartJob {
    id: String,
    family: String,
}

/// What [`PartJob::clean`] kept and deleted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobCleanup {
    /// One part per task of the job (the first by name), in task order.
    pub kept: Vec<(u64, Part)>,
    /// The objects deleted: partial manifests, then shards.
    pub removed: Vec<String>,
}

impl JobCleanup {
    /// The top-level sequences of the parts kept.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::JobCleanup::default().sequences(), 0);
    /// ```
    pub fn sequences(&self) -> u64 {
        self.kept
            .iter()
            .map(|(_, p)| p.manifest.num_sequences())
            .sum()
    }
}

fn is_hex(s: &str, digits: usize) -> bool {
    s.len() == digits && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_family(family: &str) -> Result<()> {
    let ok = (1..=MAX_FAMILY).contains(&family.len())
        && family.bytes().all(|b| b.is_ascii_alphanumeric());
    if ok {
        return Ok(());
    }
    Err(DatasetError::InvalidArgument(format!(
        "job family {family:?}: expected 1 to {MAX_FAMILY} ASCII letters or digits"
    )))
}

impl PartJob {
    /// A new job of `family` (1 to 16 ASCII letters or digits, such as
    /// `ray`), with a random id.
    ///
    /// ```
    /// let a = lodt::dataset::PartJob::new("ray")?;
    /// assert!(a.id().starts_with("ray-") && a.id().len() == 16);
    /// assert_ne!(a, lodt::dataset::PartJob::new("ray")?);
    /// assert!(lodt::dataset::PartJob::new("r-y").is_err());
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn new(family: &str) -> Result<PartJob> {
        check_family(family)?;
        Ok(PartJob {
            id: format!("{family}-{}", &new_commit_id()[..JOB_DIGITS]),
            family: family.to_owned(),
        })
    }

    /// The job of id `id` (`FAMILY-` and 12 lowercase hex digits), as
    /// [`PartJob::id`] gave it.
    ///
    /// ```
    /// use lodt::dataset::PartJob;
    /// assert_eq!(PartJob::try_from_id("ray-0123456789ab")?.family(), "ray");
    /// assert!(PartJob::try_from_id("ray-0123").is_err());
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn try_from_id(id: &str) -> Result<PartJob> {
        let bad = || {
            DatasetError::InvalidArgument(format!(
                "job id {id:?}: expected FAMILY-HHHHHHHHHHHH (1 to {MAX_FAMILY} ASCII letters or \
                 digits, '-', {JOB_DIGITS} lowercase hex digits)"
            ))
        };
        let (family, token) = id.split_once('-').ok_or_else(bad)?;
        check_family(family).map_err(|_| bad())?;
        if !is_hex(token, JOB_DIGITS) {
            return Err(bad());
        }
        Ok(PartJob {
            id: id.to_owned(),
            family: family.to_owned(),
        })
    }

    /// The job's id: the start of its writer ids, and the commit id of its
    /// merge unless another is given.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::PartJob::try_from_id("ray-0123456789ab")?.id(), "ray-0123456789ab");
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The job's family (the start of its id).
    ///
    /// ```
    /// assert_eq!(lodt::dataset::PartJob::try_from_id("ray-0123456789ab")?.family(), "ray");
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn family(&self) -> &str {
        &self.family
    }

    /// The commit id of task `task`'s part, the same for every attempt.
    ///
    /// ```
    /// let job = lodt::dataset::PartJob::try_from_id("ray-0123456789ab")?;
    /// assert_eq!(job.task_commit_id(12), "ray-0123456789ab-000012");
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn task_commit_id(&self, task: u64) -> String {
        format!("{}-{task:0width$}", self.id, width = TASK_DIGITS)
    }

    /// A new writer id for an attempt of task `task` (random, so that every
    /// attempt writes objects of its own).
    ///
    /// ```
    /// let job = lodt::dataset::PartJob::try_from_id("ray-0123456789ab")?;
    /// let w = job.new_writer_id(3);
    /// assert!(lodt::dataset::names::valid_writer_id(&w) && w.len() == 32);
    /// assert_ne!(w, job.new_writer_id(3));
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn new_writer_id(&self, task: u64) -> String {
        format!(
            "{}-{}",
            self.task_commit_id(task),
            &new_commit_id()[..ATTEMPT_DIGITS]
        )
    }

    /// The job id and task of writer id `writer_id` if it is an attempt's
    /// of any job of this family.
    fn parse<'a>(&self, writer_id: &'a str) -> Option<(&'a str, u64)> {
        let (rest, attempt) = writer_id.rsplit_once('-')?;
        let (job, task) = rest.rsplit_once('-')?;
        let (family, token) = job.split_once('-')?;
        let ok = family == self.family
            && is_hex(token, JOB_DIGITS)
            && is_hex(attempt, ATTEMPT_DIGITS)
            && task.len() >= TASK_DIGITS
            && task.bytes().all(|b| b.is_ascii_digit());
        if !ok {
            return None;
        }
        Some((job, task.parse().ok()?))
    }

    /// The task of writer id `writer_id` if it is an attempt's of this job.
    ///
    /// ```
    /// let job = lodt::dataset::PartJob::try_from_id("ray-0123456789ab")?;
    /// assert_eq!(job.task_of("ray-0123456789ab-000004-deadbeef"), Some(4));
    /// assert_eq!(job.task_of("ray-ba9876543210-000004-deadbeef"), None); // another job
    /// assert_eq!(job.task_of("host1"), None);
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn task_of(&self, writer_id: &str) -> Option<u64> {
        self.parse(writer_id)
            .filter(|(job, _)| *job == self.id)
            .map(|(_, task)| task)
    }

    /// Whether writer id `writer_id` is an attempt's of any job of this
    /// family (this job or another).
    ///
    /// ```
    /// let job = lodt::dataset::PartJob::try_from_id("ray-0123456789ab")?;
    /// assert!(job.in_family("ray-ba9876543210-000004-deadbeef"));
    /// assert!(!job.in_family("spark-ba9876543210-000004-deadbeef"));
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn in_family(&self, writer_id: &str) -> bool {
        self.parse(writer_id).is_some()
    }

    /// The writer id of an attempt of task `task` whose part is committed
    /// (its partial manifest lists the task's commit id), if any: an attempt
    /// that finds one writes nothing.
    ///
    /// ```
    /// use lodt::dataset::{DatasetWriter, LocalStore, PartJob, DatasetWriterOptions};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let job = PartJob::new("ray")?;
    /// let store = LocalStore::new(dir.path());
    /// assert_eq!(job.committed_attempt(&store, 0)?, None);
    /// let writer_id = job.new_writer_id(0);
    /// let options = DatasetWriterOptions { commit_id: Some(job.task_commit_id(0)), ..Default::default() };
    /// let mut w = DatasetWriter::create_part(dir.path(), &writer_id, options)?;
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// w.finish()?;
    /// assert_eq!(job.committed_attempt(&store, 0)?, Some(writer_id));
    /// assert_eq!(job.committed_attempt(&store, 1)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn committed_attempt(&self, store: &dyn DatasetStore, task: u64) -> Result<Option<String>> {
        let commit_id = self.task_commit_id(task);
        for name in names(store)?.unwrap_or_default() {
            let Some(id) = part_writer_id(&name) else {
                continue;
            };
            if self.task_of(id) != Some(task) {
                continue;
            }
            // None: merged or deleted meanwhile.
            if let Some(part) = read_part(store, &name)?
                && part.manifest.has_commit(&commit_id)
            {
                return Ok(Some(part.writer_id));
            }
        }
        Ok(None)
    }

    /// Under the dataset's writer lock: with `keep`, keeps one part per task
    /// of this job (the first by name whose partial manifest can be read)
    /// and deletes every other object of this family's writers (other
    /// attempts, other jobs that failed or were abandoned); without, deletes
    /// every object of this family's writers (a failed job's clean-up).
    /// Shards the manifest lists are never deleted
    /// ([`Dataset::remove_parts`]).
    ///
    /// ```
    /// use lodt::dataset::{DatasetStore, DatasetWriter, LocalStore, PartJob, DatasetWriterOptions};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let job = PartJob::new("ray")?;
    /// let store = LocalStore::new(dir.path());
    /// // Two attempts of task 0 finished their parts.
    /// for _ in 0..2 {
    ///     let mut w = DatasetWriter::create_part(dir.path(), &job.new_writer_id(0), DatasetWriterOptions::default())?;
    ///     w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)])?)?;
    ///     w.finish()?;
    /// }
    /// let cleanup = job.clean(&store, true)?;
    /// assert_eq!((cleanup.kept.len(), cleanup.removed.len(), cleanup.sequences()), (1, 2, 2));
    /// assert_eq!(job.clean(&store, false)?.removed.len(), 2); // everything
    /// assert!(store.list()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clean(&self, store: &dyn DatasetStore, keep: bool) -> Result<JobCleanup> {
        if names(store)?.is_none() {
            return Ok(JobCleanup::default()); // nothing there, not even the directory
        }
        let _lock = store.lock()?;
        let mut kept: BTreeMap<u64, Part> = BTreeMap::new();
        if keep {
            for part in Dataset::list_parts(store)? {
                if let Some(task) = self.task_of(&part.writer_id) {
                    kept.entry(task).or_insert(part);
                }
            }
        }
        let keep_ids: HashSet<String> = kept.values().map(|p| p.writer_id.clone()).collect();
        let stale = |id: &str| self.in_family(id) && !keep_ids.contains(id);
        let removed = remove_parts_locked(store, &stale)?;
        Ok(JobCleanup {
            kept: kept.into_iter().collect(),
            removed,
        })
    }
}
