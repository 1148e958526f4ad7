//! [`DatasetError`]: what can go wrong writing, opening, checking or loading a
//! sharded dataset. Every variant names the dataset, manifest or shard it is
//! about, and says what was expected and what was found.

use crate::atomic::AtomicError;
use crate::format::FormatError;

/// A `Result` whose error is [`DatasetError`].
///
/// ```
/// fn shards(dir: &std::path::Path) -> lodt::dataset::Result<usize> {
///     Ok(lodt::dataset::Dataset::open(dir)?.num_shards())
/// }
/// assert!(shards(std::path::Path::new("/no/such/dataset")).is_err());
/// ```
pub type Result<T, E = DatasetError> = std::result::Result<T, E>;

/// An error of a sharded dataset.
///
/// ```
/// use lodt::dataset::{Dataset, DatasetError};
/// let dir = tempfile::tempdir()?;
/// let err = Dataset::open(dir.path()).unwrap_err();
/// assert!(matches!(err, DatasetError::NotADataset { .. }));
/// assert!(err.to_string().contains("lodt-dataset.json"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// The location holds no manifest: it is not a dataset (yet).
    #[error(
        "{path} is not a lodt dataset: it has no manifest lodt-dataset.json (write one with DatasetWriter::create or `lodt convert IN DIR/`)"
    )]
    NotADataset {
        /// The dataset's location.
        path: String,
    },
    /// [`DatasetWriter::create`](super::DatasetWriter::create) found a
    /// dataset already there.
    #[error(
        "{path} already holds a lodt dataset (its manifest exists); add to it with DatasetWriter::append"
    )]
    AlreadyExists {
        /// The dataset's location.
        path: String,
    },
    /// Another process holds the dataset's writer lock (an append or a merge
    /// of partial manifests is running).
    #[error(
        "the dataset {path} is being written by another process (it holds the dataset's writer lock: an append or a merge is running); try again when it has finished"
    )]
    Locked {
        /// The dataset's location.
        path: String,
    },
    /// An operating-system error, with what was being done to which object.
    #[error("I/O error {action} {path}: {source}")]
    Io {
        /// What was being done (`"reading"`, `"listing"`, ...).
        action: &'static str,
        /// The object's location.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An error of a safe write (see [`crate::atomic`]).
    #[error(transparent)]
    Atomic(#[from] AtomicError),
    /// A manifest that is not valid JSON, or breaks a rule of
    /// `spec/DATASET.md`.
    #[error("bad dataset manifest {path}: {reason}")]
    BadManifest {
        /// The manifest's location.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A manifest of a major version this crate does not read.
    #[error(
        "dataset manifest {path} has format version {found}; this lodt reads major version {supported}"
    )]
    UnsupportedVersion {
        /// The manifest's location.
        path: String,
        /// The version found (`major.minor`).
        found: String,
        /// The major version this crate reads.
        supported: u16,
    },
    /// A shard that cannot be read as a `.lodt` file (missing, truncated,
    /// damaged).
    #[error("shard {shard}: {source}")]
    Shard {
        /// The shard's location.
        shard: String,
        /// The error of the `.lodt` reader.
        #[source]
        source: Box<FormatError>,
    },
    /// A shard that is not what the manifest says (its size, batch count,
    /// footer CRC, sequence or row counts).
    #[error(
        "shard {shard} does not match the manifest: {what}: the manifest says {expected}, the shard has {found}"
    )]
    ShardMismatch {
        /// The shard's location.
        shard: String,
        /// What differs (`"byte size"`, `"footer CRC"`, ...).
        what: String,
        /// What the manifest records.
        expected: String,
        /// What the shard holds.
        found: String,
    },
    /// A batch whose tensors do not match the dataset's schema (refused when
    /// written, an error when read).
    #[error(
        "{context} does not match the dataset schema: {what}: expected {expected}, found {found}"
    )]
    SchemaMismatch {
        /// Which batch (`"batch 3 of shard …"`, `"batch 7 written to …"`).
        context: String,
        /// What differs (`"tensor \"words\" dtype"`, `"tensor names"`, ...).
        what: String,
        /// What the schema says.
        expected: String,
        /// What the batch holds.
        found: String,
    },
    /// Manifests that cannot be merged: different schemas, a metadata key
    /// with two values, one shard name with two descriptions.
    #[error("cannot merge the manifests: {what}: {detail}")]
    Conflict {
        /// What conflicts (`"schema"`, `"metadata key \"source\""`, ...).
        what: String,
        /// The two sides.
        detail: String,
    },
    /// A loader state that does not fit this dataset or these options.
    #[error("cannot resume from this loader state: {reason}")]
    BadState {
        /// Why.
        reason: String,
    },
    /// A store refused a conditional write ([`DatasetStore::write_if`](super::DatasetStore::write_if)):
    /// the object is not at the version expected (an HTTP 412, or it exists
    /// when it should not). What that means for a write is decided by
    /// reading the manifest again (it may be this writer's own earlier
    /// attempt): writers report [`DatasetError::ManifestChanged`] or success.
    #[error(
        "the conditional write of {path} was refused: it is not at the version this writer read"
    )]
    PreconditionFailed {
        /// The object's location.
        path: String,
    },
    /// A conditional write of a manifest failed, and the manifest, read
    /// again, shows another writer's commit and not this one's: nothing of
    /// this writer was committed; its shards are left unlisted.
    #[error(
        "{path} was changed by another writer since this writer read it, and it does not list \
         this write's commit id {commit_id:?}: this writer's shards were not committed \
         (reopen the dataset and write again)"
    )]
    ManifestChanged {
        /// The manifest's location.
        path: String,
        /// The id of the write that was not committed.
        commit_id: String,
    },
    /// Writing a manifest failed, and the manifest, read again, is the one
    /// this writer replaced and does not list its commit id: nothing of this
    /// write is in the dataset. Writing again with the same commit id cannot
    /// add the data twice (if the failed write still lands first, the retry
    /// finds its id and writes nothing).
    #[error(
        "committing {path} failed ({cause}); the manifest, read again, is unchanged and does not \
         list this write's commit id {commit_id:?}: nothing of this write is in the dataset. \
         Writing again with commit id {commit_id:?} is safe (it cannot add the data twice)"
    )]
    NotCommitted {
        /// The manifest's location.
        path: String,
        /// The id of the write.
        commit_id: String,
        /// Why the write failed.
        cause: String,
    },
    /// Writing a manifest failed in a way that leaves its outcome unknown
    /// (a lost answer, a timeout, a server error), and the manifest could
    /// not be read again to find out. The write may or may not be
    /// committed: its commit id, listed in the manifest's `commits`, tells.
    #[error(
        "the outcome of committing {path} is unknown: the write failed ({cause}) and the manifest \
         could not be read again to check ({check}). The write is committed if the manifest's \
         \"commits\" lists commit id {commit_id:?} (`lodt info --json` shows them). To make sure \
         it is, retry it with the same commit id {commit_id:?}: a retry of a committed write \
         writes nothing, so the data cannot end up in the dataset twice"
    )]
    CommitUnknown {
        /// The manifest's location.
        path: String,
        /// The id of the write.
        commit_id: String,
        /// Why the write failed.
        cause: String,
        /// Why the manifest could not be read again.
        check: String,
    },
    /// A version of the dataset that does not exist (`spec/DATASET.md`
    /// section 3.3).
    #[error(
        "{path} has no version {version} (its latest is version {latest}; `lodt log` lists them)"
    )]
    NoSuchVersion {
        /// The dataset's location.
        path: String,
        /// The version asked for.
        version: u64,
        /// The dataset's current version.
        latest: u64,
    },
    /// A tag that does not exist.
    #[error("{path} has no tag {tag:?} (`lodt tag DIR NAME` makes one)")]
    NoSuchTag {
        /// The dataset's location.
        path: String,
        /// The tag asked for.
        tag: String,
    },
    /// A tag that names another version already: tags never move.
    #[error(
        "tag {tag:?} of {path} names version {version} already, not {requested}: a tag never moves (choose another name)"
    )]
    TagExists {
        /// The dataset's location.
        path: String,
        /// The tag.
        tag: String,
        /// The version it names.
        version: u64,
        /// The version asked for.
        requested: u64,
    },
    /// An argument that is not valid (a zero batch size, a rank not below the
    /// world size, a bad writer id, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An index outside what exists.
    #[error("{what} out of range: {index} is not below {len}")]
    OutOfRange {
        /// What was indexed (`"sequence"`, `"shard"`, `"batch"`).
        what: &'static str,
        /// The index asked for.
        index: u64,
        /// How many exist.
        len: u64,
    },
    /// An error of the LoD model while slicing or merging sequences.
    #[error("{context}: {source}")]
    Tensor {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: crate::Error,
    },
    /// The loader's background reader stopped without an answer (it
    /// panicked, or could not be started).
    #[error("the loader's background reader failed: {0}")]
    Loader(String),
}

impl DatasetError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<String>,
        source: std::io::Error,
    ) -> Self {
        DatasetError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn bad_manifest(path: impl Into<String>, reason: impl Into<String>) -> Self {
        DatasetError::BadManifest {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn schema(
        context: impl Into<String>,
        what: impl Into<String>,
        expected: impl ToString,
        found: impl ToString,
    ) -> Self {
        DatasetError::SchemaMismatch {
            context: context.into(),
            what: what.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    pub(crate) fn mismatch(
        shard: impl Into<String>,
        what: impl Into<String>,
        expected: impl ToString,
        found: impl ToString,
    ) -> Self {
        DatasetError::ShardMismatch {
            shard: shard.into(),
            what: what.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    pub(crate) fn shard(shard: impl Into<String>, source: FormatError) -> Self {
        DatasetError::Shard {
            shard: shard.into(),
            source: Box::new(source),
        }
    }

    pub(crate) fn tensor(context: impl Into<String>, source: crate::Error) -> Self {
        DatasetError::Tensor {
            context: context.into(),
            source,
        }
    }

    /// The commit id of a write whose commit failed
    /// ([`DatasetError::ManifestChanged`], [`DatasetError::NotCommitted`],
    /// [`DatasetError::CommitUnknown`]): retrying with it is idempotent.
    ///
    /// ```
    /// let e = lodt::dataset::DatasetError::ManifestChanged { path: "m".into(), commit_id: "c1".into() };
    /// assert_eq!(e.commit_id(), Some("c1"));
    /// ```
    pub fn commit_id(&self) -> Option<&str> {
        match self {
            DatasetError::ManifestChanged { commit_id, .. }
            | DatasetError::NotCommitted { commit_id, .. }
            | DatasetError::CommitUnknown { commit_id, .. } => Some(commit_id),
            _ => None,
        }
    }

    /// The kind of the underlying I/O error, if the error is one (also inside
    /// a shard's `.lodt` error); [`std::io::ErrorKind::OutOfMemory`] for
    /// memory refused ([`crate::Error::OutOfMemory`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let err = lodt::dataset::Dataset::open(dir.path().join("missing")).unwrap_err();
    /// assert!(err.io_kind().is_none()); // "not a dataset", not an I/O error
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            DatasetError::Io { source, .. } => Some(source.kind()),
            DatasetError::Atomic(e) => e.io_kind(),
            DatasetError::Shard { source, .. } => match &**source {
                FormatError::Io { source, .. } => Some(source.kind()),
                FormatError::Atomic(e) => e.io_kind(),
                FormatError::Core(crate::Error::OutOfMemory { .. }) => {
                    Some(std::io::ErrorKind::OutOfMemory)
                }
                FormatError::BadRead { source, .. }
                    if matches!(
                        **source,
                        FormatError::Core(crate::Error::OutOfMemory { .. })
                    ) =>
                {
                    Some(std::io::ErrorKind::OutOfMemory)
                }
                _ => None,
            },
            // Memory refused: I/O-like (not damage, not a bad argument).
            DatasetError::Tensor {
                source: crate::Error::OutOfMemory { .. },
                ..
            } => Some(std::io::ErrorKind::OutOfMemory),
            _ => None,
        }
    }
}
