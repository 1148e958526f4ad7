//! [`DatasetWriter`]: writes batches into shards of a target size and the
//! manifest last, atomically.

use super::commit::{Committed, Evidence, commit_id_or_new, commit_manifest};
use super::error::{DatasetError, Result};
use super::manifest::{Manifest, ManifestVersion, Schema, ShardEntry, TensorCounts, footer_crc};
use super::names::{
    MAIN_SHARD_PREFIX, MANIFEST_NAME, SHARD_SUFFIX, part_manifest_name, part_shard_prefix,
    shard_name, valid_writer_id,
};
use super::reader::{read_manifest, read_manifest_versioned};
use super::store::{DatasetStore, LocalStore, ObjectVersion, ShardSink, StoreLock};
use crate::batch::Batch;
use crate::format;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The default target size of a shard: 256 MiB.
///
/// ```
/// assert_eq!(lodt::dataset::DEFAULT_SHARD_BYTES, 256 << 20);
/// ```
pub const DEFAULT_SHARD_BYTES: u64 = 256 << 20;

/// How a [`DatasetWriter`] writes.
///
/// ```
/// let options = lodt::dataset::DatasetWriterOptions { shard_bytes: 64 << 20, ..Default::default() };
/// assert!(options.schema.is_none());
/// ```
#[derive(Debug, Clone)]
pub struct DatasetWriterOptions {
    /// The target size of a shard in bytes: a shard is closed before a batch
    /// that would take it past this size (a batch is never split, so a shard
    /// of one large batch may be larger). Default [`DEFAULT_SHARD_BYTES`].
    pub shard_bytes: u64,
    /// Metadata to set on the dataset (added to, or replacing keys of, an
    /// existing dataset's metadata).
    pub metadata: BTreeMap<String, String>,
    /// The schema. `None`: the existing dataset's, or the first batch's.
    pub schema: Option<Schema>,
    /// The write's commit id (its idempotency key, see
    /// [`DatasetWriter::commit_id`]): 1 to 128 ASCII letters, digits, `.`,
    /// `_` or `-`. `None`: a new random one. A write retried with the id of
    /// a committed write writes nothing ([`DatasetWriter::already_committed`]).
    pub commit_id: Option<String>,
    /// The `.lodt` format version of the shards written: `None` (the
    /// default) writes 2.0, `Some(version)` writes `version` (1.0 for
    /// readers that predate 2.0), also when appending to a dataset whose
    /// shards have another version: every shard is a file of its own, and a
    /// dataset may hold shards of both versions (the manifest records each
    /// shard's).
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, DatasetWriterOptions};
    /// use lodt::format::Version;
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let batch = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?;
    /// let mut w = DatasetWriter::create(dir.path(), DatasetWriterOptions::default())?; // 2.0 shards
    /// w.write(&batch)?;
    /// w.finish()?;
    /// let v1 = DatasetWriterOptions { format_version: Some(Version { major: 1, minor: 0 }), ..Default::default() };
    /// let mut w = DatasetWriter::append(dir.path(), v1)?; // a 1.0 shard beside them
    /// w.write(&batch)?;
    /// w.finish()?;
    /// let versions: Vec<String> = Dataset::open(dir.path())?.manifest().shards.iter()
    ///     .map(|s| s.expected_format_version().unwrap().to_string()).collect();
    /// assert_eq!(versions, ["2.0", "1.0"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub format_version: Option<format::Version>,
    /// How the shards' buffers are compressed (format 2.0 only; none by
    /// default).
    pub compression: format::Compression,
    /// The time the new version records (`spec/DATASET.md` section 3.3):
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`. `None` (the default): the time of the
    /// commit. For outputs that must be reproducible byte for byte (the
    /// spec's test vector).
    ///
    /// ```
    /// use lodt::dataset::{DatasetWriter, DatasetWriterOptions};
    /// # let dir = tempfile::tempdir()?;
    /// let options = DatasetWriterOptions { commit_time: Some("2026-12-01T00:00:00Z".into()), ..Default::default() };
    /// let manifest = DatasetWriter::create(dir.path(), options)?.finish()?;
    /// assert_eq!(manifest.commit.unwrap().time.as_deref(), Some("2026-12-01T00:00:00Z"));
    /// let bad = DatasetWriterOptions { commit_time: Some("yesterday".into()), ..Default::default() };
    /// assert!(DatasetWriter::create(dir.path().join("b"), bad).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub commit_time: Option<String>,
}

impl Default for DatasetWriterOptions {
    fn default() -> Self {
        DatasetWriterOptions {
            shard_bytes: DEFAULT_SHARD_BYTES,
            metadata: BTreeMap::new(),
            schema: None,
            commit_id: None,
            format_version: None,
            compression: format::Compression::None,
            commit_time: None,
        }
    }
}

/// How shards are cut and written, taken from [`DatasetWriterOptions`] before its
/// schema and metadata move into the manifest.
#[derive(Clone, Copy)]
struct ShardSettings {
    bytes: u64,
    file: format::WriteOptions,
}

impl ShardSettings {
    fn of(options: &DatasetWriterOptions) -> Self {
        ShardSettings {
            bytes: options.shard_bytes,
            file: format::WriteOptions {
                format_version: options.format_version,
                compression: options.compression,
                ..Default::default()
            },
        }
    }
}

/// A shard being written.
struct OpenShard {
    name: String,
    writer: format::Writer<Box<dyn ShardSink>>,
    batch_sequences: Vec<u64>,
    tensors: Vec<TensorCounts>,
}

/// Writes a sharded dataset: batches go into `.lodt` shards of about
/// [`DatasetWriterOptions::shard_bytes`] each; [`DatasetWriter::finish`] writes the
/// manifest, last and atomically, so readers see the dataset as it was
/// before or with every new shard, never a shard half-listed.
///
/// - [`DatasetWriter::create`]: a new dataset (refused if one exists).
/// - [`DatasetWriter::append`]: more shards for an existing dataset.
/// - [`DatasetWriter::create_part`]: one of several writers (processes,
///   machines), each with its own id, writing shards `ID-shard-NNNNNN.lodt`
///   and a partial manifest; [`Dataset::commit_parts`](super::Dataset::commit_parts)
///   merges them.
///
/// Every batch must match the dataset's schema (the first batch sets it for
/// a new dataset); a batch that does not is refused with
/// [`DatasetError::SchemaMismatch`] and nothing of it is written. `create`
/// and `append` hold the dataset's writer lock until `finish` (or drop).
/// Dropped without `finish`, the shard being written is deleted and the
/// manifest is unchanged; shards closed before are left unlisted
/// ([`Dataset::unlisted`](super::Dataset::unlisted) finds them).
///
/// Every write has a **commit id** ([`DatasetWriterOptions::commit_id`], or a new
/// one: [`DatasetWriter::commit_id`]), which `finish` lists in the manifest
/// (the last [`COMMIT_HISTORY`](super::COMMIT_HISTORY) ids are kept). If
/// writing the manifest fails, the outcome is unknown (in an object store,
/// the answer of a write the store carried out can be lost): the writer
/// reads the manifest again and returns success if its id is there,
/// [`DatasetError::ManifestChanged`] if another writer's commit is there
/// instead, [`DatasetError::NotCommitted`] if the manifest is unchanged, and
/// [`DatasetError::CommitUnknown`] if it cannot be read. A writer started
/// with the id of a committed write is
/// [`already_committed`](DatasetWriter::already_committed): it writes
/// nothing, so retrying a write with its id never adds its data twice.
/// (Checkpoints, [`DatasetWriter::flush`], are decided by their shards and
/// record no id: a write retried after a failed checkpoint writes again
/// what earlier checkpoints committed.)
///
/// ```
/// use lodt::dataset::{Dataset, DatasetWriter, DatasetWriterOptions};
/// use lodt::{Batch, Lod, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let options = DatasetWriterOptions { shard_bytes: 1024, ..Default::default() };
/// let mut writer = DatasetWriter::create(dir.path(), options)?;
/// for k in 0..10i64 {
///     let lod = Lod::try_from_lengths(&[vec![3, 2]])?;
///     let words = LodTensor::from_vec((0..5).map(|i| k * 10 + i).collect(), vec![5], lod)?;
///     writer.write(&Batch::try_from_tensors([("words", words)])?)?;
/// }
/// let manifest = writer.finish()?;
/// assert!(manifest.num_shards() > 1);
/// let dataset = Dataset::open(dir.path())?;
/// assert_eq!(dataset.num_sequences(), 20);
/// assert_eq!(dataset.sequence(3)?.get("words").unwrap().as_slice::<i64>()?, &[13, 14]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DatasetWriter {
    store: Arc<dyn DatasetStore>,
    /// The manifest object this writer replaces (the main or a partial one).
    target: String,
    /// Shard names are `{prefix}{index:06}.lodt`.
    prefix: String,
    next_index: u64,
    manifest: Manifest,
    batches: u64,
    current: Option<OpenShard>,
    shard_bytes: u64,
    /// How shards are written (format version, compression).
    file: format::WriteOptions,
    _lock: Option<StoreLock>,
    /// The version of the target manifest this writer read (`None`: there
    /// was none), which its next write must replace (see
    /// [`DatasetStore::write_if`]).
    base: Option<ObjectVersion>,
    /// This write's commit id.
    commit_id: String,
    /// The target already lists `commit_id`: nothing is written.
    committed: bool,
    /// The shards closed since the manifest was last written.
    uncommitted: Vec<String>,
    /// Whether the dataset had no manifest when this writer started (its
    /// final commit makes version 1, a `create`).
    fresh: bool,
    /// The time the version records (`None`: the commit's).
    commit_time: Option<String>,
}

impl std::fmt::Debug for DatasetWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetWriter")
            .field("store", &self.store)
            .field("target", &self.target)
            .field("shards", &self.manifest.shards.len())
            .field("batches", &self.batches)
            .finish()
    }
}

impl DatasetWriter {
    /// Starts a new dataset in directory `dir` (created if missing). Refused
    /// with [`DatasetError::AlreadyExists`] if `dir` holds a manifest.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let train = dir.path().join("train");
    /// lodt::dataset::DatasetWriter::create(&train, Default::default())?.finish()?;
    /// assert!(train.join("lodt-dataset.json").exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(dir: impl AsRef<Path>, options: DatasetWriterOptions) -> Result<Self> {
        Self::create_in(Arc::new(LocalStore::new(dir)), options)
    }

    /// [`DatasetWriter::create`] in any store.
    ///
    /// ```
    /// use lodt::dataset::{DatasetWriter, LocalStore, DatasetWriterOptions};
    /// # let dir = tempfile::tempdir()?;
    /// let store = std::sync::Arc::new(LocalStore::new(dir.path()).with_fsync(false));
    /// DatasetWriter::create_in(store.clone(), DatasetWriterOptions::default())?.finish()?;
    /// assert!(DatasetWriter::create_in(store, DatasetWriterOptions::default()).is_err()); // exists
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_in(store: Arc<dyn DatasetStore>, options: DatasetWriterOptions) -> Result<Self> {
        let commit_id = commit_id_or_new(options.commit_id.as_deref())?;
        let commit_time = options.commit_time.clone();
        if let Some(t) = &commit_time {
            super::commit_record::check_time(t)?;
        }
        let shards = ShardSettings::of(&options);
        store.prepare()?;
        let lock = store.lock()?;
        let (manifest, base, committed) = match read_manifest_versioned(&*store, MANIFEST_NAME)? {
            // This create was committed before (its answer lost).
            Some((manifest, version)) if manifest.has_commit(&commit_id) => {
                (manifest, Some(version), true)
            }
            Some(_) => {
                return Err(DatasetError::AlreadyExists {
                    path: store.location(),
                });
            }
            None => {
                let schema = options.schema.unwrap_or_default();
                if !schema.is_empty() {
                    schema.check_self("the schema given")?;
                }
                (Manifest::new(schema, options.metadata), None, false)
            }
        };
        let start = Start {
            target: MANIFEST_NAME.to_owned(),
            prefix: shard_prefix(&*store),
            manifest,
            lock: Some(lock),
            base,
            commit_id,
            committed,
        };
        Self::start(store, start, shards).map(|mut w| {
            w.commit_time = commit_time;
            w
        })
    }

    /// Adds shards to the dataset in directory `dir`. Its schema applies
    /// (an [`DatasetWriterOptions::schema`] given must equal it);
    /// [`DatasetWriterOptions::metadata`] is added to its metadata.
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, DatasetWriterOptions};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let batch = |v: Vec<f32>| Batch::try_from_tensors([("x", LodTensor::from_vec(v.clone(), vec![v.len()], Default::default())?)]);
    /// let mut w = DatasetWriter::create(dir.path(), DatasetWriterOptions::default())?;
    /// w.write(&batch(vec![1.0, 2.0])?)?;
    /// w.finish()?;
    /// let mut w = DatasetWriter::append(dir.path(), DatasetWriterOptions::default())?;
    /// w.write(&batch(vec![3.0])?)?;
    /// w.finish()?;
    /// let dataset = Dataset::open(dir.path())?;
    /// assert_eq!((dataset.num_shards(), dataset.num_sequences()), (2, 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append(dir: impl AsRef<Path>, options: DatasetWriterOptions) -> Result<Self> {
        Self::append_in(Arc::new(LocalStore::new(dir)), options)
    }

    /// [`DatasetWriter::append`] in any store.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// let err = lodt::dataset::DatasetWriter::append_in(store, Default::default()).unwrap_err();
    /// assert!(matches!(err, lodt::dataset::DatasetError::NotADataset { .. }));
    /// let missing = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path().join("none")));
    /// let err = lodt::dataset::DatasetWriter::append_in(missing, Default::default()).unwrap_err();
    /// assert!(matches!(err, lodt::dataset::DatasetError::NotADataset { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_in(store: Arc<dyn DatasetStore>, options: DatasetWriterOptions) -> Result<Self> {
        let commit_id = commit_id_or_new(options.commit_id.as_deref())?;
        let commit_time = options.commit_time.clone();
        if let Some(t) = &commit_time {
            super::commit_record::check_time(t)?;
        }
        let shards = ShardSettings::of(&options);
        let lock = match store.lock() {
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                return Err(DatasetError::NotADataset {
                    path: store.location(),
                });
            }
            r => r?,
        };
        let (mut manifest, base) =
            read_manifest_versioned(&*store, MANIFEST_NAME)?.ok_or_else(|| {
                DatasetError::NotADataset {
                    path: store.location(),
                }
            })?;
        let committed = manifest.has_commit(&commit_id);
        if !committed {
            adopt_schema(&mut manifest, options.schema)?;
            manifest.metadata.extend(options.metadata);
        }
        let prefix = shard_prefix(&*store);
        let start = Start {
            target: MANIFEST_NAME.to_owned(),
            prefix,
            manifest,
            lock: Some(lock),
            base: Some(base),
            commit_id,
            committed,
        };
        Self::start(store, start, shards).map(|mut w| {
            w.commit_time = commit_time;
            w
        })
    }

    /// Starts (or continues) the part of writer `writer_id` in directory
    /// `dir`: shards named `ID-shard-NNNNNN.lodt`, listed in the partial
    /// manifest `lodt-dataset.part.ID.json` (see
    /// [`part_manifest_name`](super::part_manifest_name)), which `finish`
    /// writes. Many writers, with distinct ids, may write parts of one
    /// dataset at once (on one machine or on several sharing the
    /// directory); [`Dataset::commit_parts`](super::Dataset::commit_parts)
    /// then merges the parts into the manifest. If the dataset already has a
    /// manifest, its schema applies (so a mismatch is refused at once);
    /// otherwise the parts' schemas are compared when merged.
    ///
    /// Two writers must not share an id (their shards would collide).
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, DatasetWriterOptions};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let batch = |v: i32| Batch::try_from_tensors([("x", LodTensor::from_vec(vec![v], vec![1], Default::default())?)]);
    /// let mut a = DatasetWriter::create_part(dir.path(), "a", DatasetWriterOptions::default())?;
    /// let mut b = DatasetWriter::create_part(dir.path(), "b", DatasetWriterOptions::default())?;
    /// a.write(&batch(1)?)?;
    /// b.write(&batch(2)?)?;
    /// a.finish()?;
    /// b.finish()?;
    /// let manifest = Dataset::commit_parts(dir.path())?;
    /// assert_eq!(manifest.shards[1].name, "b-shard-000000.lodt");
    /// assert_eq!(Dataset::open(dir.path())?.num_sequences(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_part(
        dir: impl AsRef<Path>,
        writer_id: &str,
        options: DatasetWriterOptions,
    ) -> Result<Self> {
        Self::create_part_in(Arc::new(LocalStore::new(dir)), writer_id, options)
    }

    /// [`DatasetWriter::create_part`] in any store.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// assert!(lodt::dataset::DatasetWriter::create_part_in(store, "../x", Default::default()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_part_in(
        store: Arc<dyn DatasetStore>,
        writer_id: &str,
        options: DatasetWriterOptions,
    ) -> Result<Self> {
        if !valid_writer_id(writer_id) {
            return Err(DatasetError::InvalidArgument(format!(
                "writer id {writer_id:?}: expected 1 to 64 ASCII letters, digits, '_' or '-'"
            )));
        }
        let commit_id = commit_id_or_new(options.commit_id.as_deref())?;
        let commit_time = options.commit_time.clone();
        if let Some(t) = &commit_time {
            super::commit_record::check_time(t)?;
        }
        let shards = ShardSettings::of(&options);
        store.prepare()?;
        let name = part_manifest_name(writer_id);
        let part = read_manifest_versioned(&*store, &name)?;
        let main = read_manifest(&*store)?;
        // Committed before: listed by the part, or by the manifest a merge
        // took the part into.
        let committed = part.as_ref().is_some_and(|(m, _)| m.has_commit(&commit_id))
            || main.as_ref().is_some_and(|m| m.has_commit(&commit_id));
        let (mut manifest, base) = match part {
            Some((manifest, version)) => (manifest, Some(version)),
            None => {
                let schema = main.map(|m| m.schema).unwrap_or_default();
                (Manifest::new(schema, BTreeMap::new()), None)
            }
        };
        if !committed {
            adopt_schema(&mut manifest, options.schema)?;
            manifest.metadata.extend(options.metadata);
        }
        let start = Start {
            target: name,
            prefix: part_shard_prefix(writer_id),
            manifest,
            lock: None,
            base,
            commit_id,
            committed,
        };
        Self::start(store, start, shards).map(|mut w| {
            w.commit_time = commit_time;
            w
        })
    }

    fn start(store: Arc<dyn DatasetStore>, start: Start, shards: ShardSettings) -> Result<Self> {
        let ShardSettings {
            bytes: shard_bytes,
            file,
        } = shards;
        let Start {
            target,
            prefix,
            manifest,
            lock,
            base,
            commit_id,
            committed,
        } = start;
        if shard_bytes == 0 {
            return Err(DatasetError::InvalidArgument(
                "shard_bytes must be at least 1".into(),
            ));
        }
        // Never reuse the name of an existing object, listed or not (a shard
        // of a merged part, or one left by an interrupted writer).
        let index_of = |name: &str| -> Option<u64> {
            let digits = name
                .strip_prefix(prefix.as_str())?
                .strip_suffix(SHARD_SUFFIX)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse::<u64>().ok()
        };
        let fresh = base.is_none();
        let existing = store.list()?;
        let next_index = existing
            .iter()
            .map(String::as_str)
            .chain(manifest.shards.iter().map(|s| s.name.as_str()))
            .filter_map(index_of)
            .max()
            .map_or(0, |i| i.saturating_add(1));
        Ok(DatasetWriter {
            store,
            target,
            prefix,
            next_index,
            manifest,
            batches: 0,
            current: None,
            shard_bytes,
            file,
            _lock: lock,
            base,
            commit_id,
            fresh,
            commit_time: None,
            committed,
            uncommitted: Vec::new(),
        })
    }

    /// This write's commit id: [`DatasetWriterOptions::commit_id`], or a new one.
    /// `finish` lists it in the manifest; keep it to retry the write after
    /// an error ([`DatasetError::CommitUnknown`]) without writing its data
    /// twice.
    ///
    /// ```
    /// use lodt::dataset::{DatasetWriter, DatasetWriterOptions};
    /// # let dir = tempfile::tempdir()?;
    /// let options = DatasetWriterOptions { commit_id: Some("load-2026-11-26".into()), ..Default::default() };
    /// let w = DatasetWriter::create(dir.path(), options)?;
    /// assert_eq!(w.commit_id(), "load-2026-11-26");
    /// let manifest = w.finish()?;
    /// assert!(manifest.has_commit("load-2026-11-26"));
    /// assert_eq!(DatasetWriter::create(dir.path().join("b"), Default::default())?.commit_id().len(), 32);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn commit_id(&self) -> &str {
        &self.commit_id
    }

    /// Whether the dataset already lists this writer's commit id (the same
    /// write was committed before, and its answer lost): then `write`
    /// discards its batches, `flush` does nothing and `finish` returns the
    /// manifest as it is, so the data is not written twice.
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, DatasetWriterOptions};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let batch = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![7u8], vec![1], Default::default())?)])?;
    /// let options = DatasetWriterOptions { commit_id: Some("job-1".into()), ..Default::default() };
    /// for _ in 0..2 {
    ///     // The same append run twice (say, retried after an error).
    ///     let mut w = DatasetWriter::create(dir.path(), options.clone())?;
    ///     w.write(&batch)?;
    ///     w.finish()?;
    /// }
    /// let w = DatasetWriter::append(dir.path(), options)?;
    /// assert!(w.already_committed());
    /// assert_eq!(Dataset::open(dir.path())?.num_sequences(), 1); // once
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn already_committed(&self) -> bool {
        self.committed
    }

    /// The manifest as [`DatasetWriter::finish`] would write it now (the
    /// shards closed so far; not the one being written).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// assert_eq!(w.manifest().num_shards(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The number of batches written by this writer.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// assert_eq!(w.batches_written(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn batches_written(&self) -> u64 {
        self.batches
    }

    /// Writes one batch (to the current shard, or to a new one if it would
    /// take the current one past the target size). A batch that does not
    /// match the schema is refused, and nothing of it is written.
    ///
    /// ```
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// let x = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1f32], vec![1], Default::default())?)])?;
    /// let y = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1f64], vec![1], Default::default())?)])?;
    /// w.write(&x)?;
    /// let err = w.write(&y).unwrap_err();
    /// assert!(err.to_string().contains("float32"), "{err}");
    /// assert_eq!(w.batches_written(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(&mut self, batch: &Batch) -> Result<()> {
        if self.committed {
            self.batches += 1;
            return Ok(());
        }
        let context = || {
            format!(
                "batch {} written to {}",
                self.batches,
                self.store.location()
            )
        };
        if self.manifest.schema.is_empty() {
            self.manifest.schema = Schema::of_batch(batch).map_err(|e| match e {
                DatasetError::SchemaMismatch {
                    what,
                    expected,
                    found,
                    ..
                } => DatasetError::SchemaMismatch {
                    context: context(),
                    what,
                    expected,
                    found,
                },
                e => e,
            })?;
        }
        let sequences = self.manifest.schema.check_batch(batch, &context())?;
        let estimate = estimate_bytes(batch);
        if let Some(current) = &self.current {
            let footer = 192 + 24 * (current.batch_sequences.len() as u64 + 1);
            let after = current
                .writer
                .bytes_written()
                .saturating_add(estimate)
                .saturating_add(footer);
            if !current.batch_sequences.is_empty() && after > self.shard_bytes {
                self.close_shard()?;
            }
        }
        let current = match self.current.take() {
            Some(c) => c,
            None => self.open_shard()?,
        };
        let current = self.current.insert(current);
        let shard = &current.name;
        let location = || self.store.object_location(shard);
        current
            .writer
            .write(batch)
            .map_err(|source| DatasetError::shard(location(), source))?;
        current.batch_sequences.push(sequences);
        for (counts, t) in current
            .tensors
            .iter_mut()
            .zip(&self.manifest.schema.tensors)
        {
            if let Some(tensor) = batch.get(&t.name) {
                counts.add(tensor);
            }
        }
        self.batches += 1;
        Ok(())
    }

    fn open_shard(&mut self) -> Result<OpenShard> {
        let name = shard_name(&self.prefix, self.next_index);
        self.next_index += 1;
        let sink = self.store.create_shard(&name)?;
        let writer = format::Writer::try_new_with(sink, BTreeMap::new(), self.file)
            .map_err(|source| DatasetError::shard(self.store.object_location(&name), source))?;
        let tensors = self
            .manifest
            .schema
            .tensors
            .iter()
            .map(|t| TensorCounts {
                levels: vec![0; t.lod_levels],
                rows: 0,
            })
            .collect();
        Ok(OpenShard {
            name,
            writer,
            batch_sequences: Vec::new(),
            tensors,
        })
    }

    /// Finishes the current shard: commits it and records it in the
    /// manifest (in memory).
    fn close_shard(&mut self) -> Result<()> {
        let Some(mut shard) = self.current.take() else {
            return Ok(());
        };
        let location = self.store.object_location(&shard.name);
        let sink = shard
            .writer
            .finish()
            .map_err(|source| DatasetError::shard(location.clone(), source))?;
        sink.commit()?;
        let file = self.store.open_shard(&shard.name)?;
        let batches = shard.batch_sequences.len() as u64;
        if file.num_batches() as u64 != batches {
            return Err(DatasetError::mismatch(
                location,
                "batch count",
                batches,
                file.num_batches(),
            ));
        }
        self.uncommitted.push(shard.name.clone());
        self.manifest.shards.push(ShardEntry {
            name: shard.name,
            bytes: file.file_size(),
            footer_crc: footer_crc(&file, &location)?,
            batches,
            sequences: shard.batch_sequences.iter().sum(),
            batch_sequences: shard.batch_sequences,
            tensors: shard.tensors,
            format_version: Some(file.version()),
        });
        Ok(())
    }

    /// Closes the current shard and writes the manifest: everything written
    /// so far becomes visible to readers (a checkpoint of a long write). The
    /// writer goes on with a new shard.
    ///
    /// ```
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// w.flush()?;
    /// assert_eq!(lodt::dataset::Dataset::open(dir.path())?.num_sequences(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flush(&mut self) -> Result<()> {
        self.commit(false)
    }

    /// Closes the current shard and writes the manifest: a checkpoint
    /// (decided by its shards), or the final commit (`last`: lists the
    /// commit id, decided by it). See [`commit_manifest`].
    fn commit(&mut self, last: bool) -> Result<()> {
        if self.committed {
            return Ok(());
        }
        self.close_shard()?;
        // Written by this crate: its version (an appended 1.0 manifest
        // becomes 1.1, with commit ids).
        self.manifest.version = ManifestVersion::CURRENT;
        if self.target == MANIFEST_NAME {
            let operation = if self.fresh { "create" } else { "append" };
            super::versions::prepare_commit(
                &*self.store,
                &mut self.manifest,
                !self.fresh,
                last.then_some((operation, self.commit_id.as_str())),
                self.commit_time.as_deref(),
            )?;
        }
        let evidence = if last {
            self.manifest.record_commit(&self.commit_id);
            Evidence::Id
        } else {
            Evidence::Shards(&self.uncommitted)
        };
        let committed = commit_manifest(
            &*self.store,
            &self.target,
            &self.manifest,
            self.base.as_ref(),
            &self.commit_id,
            evidence,
        )?;
        match committed {
            Committed::AsWritten(version) => self.base = Some(version),
            Committed::Found(manifest, version) => {
                // Go on from the manifest as it is (later commits of others
                // included), so a later checkpoint loses none of them.
                self.manifest = manifest;
                self.base = Some(version);
            }
        }
        self.uncommitted.clear();
        if last {
            self.committed = true;
        }
        Ok(())
    }

    /// Closes the current shard and writes the manifest (atomically, last),
    /// then returns it.
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)])?)?;
    /// let manifest = w.finish()?;
    /// assert_eq!((manifest.num_shards(), manifest.num_sequences()), (1, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish(mut self) -> Result<Manifest> {
        self.commit(true)?;
        Ok(std::mem::replace(
            &mut self.manifest,
            Manifest::new(Schema::default(), BTreeMap::new()),
        ))
    }
}

/// Where a writer starts: the manifest it replaces and what it found there.
struct Start {
    target: String,
    prefix: String,
    manifest: Manifest,
    lock: Option<StoreLock>,
    base: Option<ObjectVersion>,
    commit_id: String,
    committed: bool,
}

/// The prefix of the shard names of a writer of the main manifest:
/// `shard-`, or `shard-TOKEN-` with a token of this writer's own in a store
/// without locks ([`DatasetStore::unique_shard_names`]).
fn shard_prefix(store: &dyn DatasetStore) -> String {
    if !store.unique_shard_names() {
        return MAIN_SHARD_PREFIX.to_owned();
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!(
        "{nanos}-{}-{}-{:p}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        &COUNTER
    );
    let a = crc32fast::hash(seed.as_bytes());
    let mut h = crc32fast::Hasher::new_with_initial(a.rotate_left(13) ^ 0x5bd1_e995);
    h.update(seed.as_bytes());
    format!("{MAIN_SHARD_PREFIX}{a:08x}{:08x}-", h.finalize())
}

/// Sets the schema of `manifest` from `given` if it has none, or checks that
/// `given` equals it.
fn adopt_schema(manifest: &mut Manifest, given: Option<Schema>) -> Result<()> {
    let Some(given) = given else {
        return Ok(());
    };
    given.check_self("the schema given")?;
    if manifest.schema.is_empty() {
        manifest.schema = given;
        return Ok(());
    }
    if manifest.schema != given {
        return Err(DatasetError::schema(
            "the schema given",
            "schema",
            super::manifest::describe_schema(&manifest.schema),
            super::manifest::describe_schema(&given),
        ));
    }
    Ok(())
}

/// About the bytes `batch` takes in a `.lodt` file (header, metadata,
/// 64-aligned buffers, checksum table).
fn estimate_bytes(batch: &Batch) -> u64 {
    let pad = |n: u64| n.div_ceil(64) * 64;
    let mut buffers = 0u64;
    // The metadata JSON: about 100 bytes per tensor, its name (escaped),
    // its dimensions and 48 per buffer, rounded up.
    let mut meta = 64u64;
    let mut data = 0u64;
    for (name, t) in batch.iter() {
        for level in t.lod().levels() {
            data += pad(8 * level.len() as u64);
            buffers += 1;
        }
        data += pad(t.as_bytes().len() as u64);
        buffers += 1;
        meta += 100
            + 2 * name.len() as u64
            + 24 * t.shape().len() as u64
            + 48 * (t.lod().num_levels() as u64 + 1);
    }
    64 + pad(meta) + data + pad(4 * (buffers + 1))
}
