//! Where data is, and how it is opened: the one place that tells a local path
//! from a URI of an object store, and the one open-options type
//! ([`OpenOptions`]). Every entry point — the Rust API, the CLI, the Python
//! package — opens files, stores and datasets through [`open_file`],
//! [`open_store`] and [`open_dataset`].
//!
//! | location | file | dataset |
//! |----------|------|---------|
//! | a local path | memory-mapped ([`ReadOptions::mmap`]), or read by positional reads | a [`LocalStore`] |
//! | `s3://`, `gs://`, `az://` (`abfs://`, `abfss://`, `azure://`), `http(s)://` | ranged reads ([`remote`](crate::remote), feature `remote`) | an object store |
//!
//! A URI opened by a build without the `remote` feature is an error that
//! says so.
//!
//! ```
//! use lodt::location::{self, OpenOptions};
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("a.lodt");
//! # lodt::format::save_batch(&path, &lodt::Batch::new())?;
//! let path = path.to_str().unwrap();
//! assert!(!location::is_uri(path));
//! let pread = OpenOptions::default().with_mmap(false);
//! assert_eq!(location::open_file(path, &pread)?.num_batches(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::dataset::{Dataset, DatasetError, DatasetStore, LocalStore};
use crate::format::{FormatError, LodtFile, ReadOptions};
use std::path::Path;
use std::sync::Arc;

mod scheme;

pub use scheme::{SCHEMES, is_uri};

/// The location of object `name` of the dataset at `location`: `name`
/// joined to a local directory, or appended to a URI after one `/`.
///
/// ```
/// use lodt::location::join;
/// assert_eq!(join("s3://bucket/train/", "shard-000000.lodt"), "s3://bucket/train/shard-000000.lodt");
/// assert_eq!(join("data/train", "shard-000000.lodt"), "data/train/shard-000000.lodt");
/// ```
pub fn join(location: &str, name: &str) -> String {
    if is_uri(location) {
        return format!("{}/{name}", location.trim_end_matches('/'));
    }
    Path::new(location)
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Whether `location` names a dataset rather than a `.lodt` file: a local
/// directory, or a URI that does not end in `.lodt` (object stores have no
/// directories to test).
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// assert!(lodt::location::is_dataset(dir.path().to_str().unwrap()));
/// assert!(lodt::location::is_dataset("s3://bucket/train/"));
/// assert!(!lodt::location::is_dataset("s3://bucket/train/a.lodt"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn is_dataset(location: &str) -> bool {
    if is_uri(location) {
        return !location.trim_end_matches('/').ends_with(".lodt");
    }
    Path::new(location).is_dir()
}

/// How files and datasets are opened, wherever they are: how local files are
/// read, and how object stores are reached.
///
/// ```
/// use lodt::location::OpenOptions;
/// let o = OpenOptions::default().with_mmap(false).with_check_bodies(true);
/// assert!(!o.read.mmap && o.read.check_bodies);
/// ```
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Local files: memory-mapped (the default) or read by positional reads
    /// (`mmap: false`), access hints, and whether the bodies of a mapped
    /// batch are checked on first touch. Batches of object stores, of
    /// positional reads and of the disk cache are always checked.
    pub read: ReadOptions,
    /// Local datasets written: whether files are synced to disk before they
    /// are renamed into place (on by default; see
    /// [`LocalStore::with_fsync`]).
    pub fsync: bool,
    /// Object stores: configuration keys (credentials, endpoints), the
    /// first read's size, concurrency, retries and the disk cache.
    #[cfg(feature = "remote")]
    pub remote: crate::remote::RemoteOptions,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            read: ReadOptions::default(),
            fsync: true,
            #[cfg(feature = "remote")]
            remote: Default::default(),
        }
    }
}

impl OpenOptions {
    /// These options with local writes synced (`true`, the default) or not.
    ///
    /// ```
    /// assert!(!lodt::location::OpenOptions::default().with_fsync(false).fsync);
    /// ```
    pub fn with_fsync(mut self, fsync: bool) -> Self {
        self.fsync = fsync;
        self
    }

    /// These options with local files memory-mapped (`true`) or read by
    /// positional reads (`false`).
    ///
    /// ```
    /// assert!(!lodt::location::OpenOptions::default().with_mmap(false).read.mmap);
    /// ```
    pub fn with_mmap(mut self, mmap: bool) -> Self {
        self.read.mmap = mmap;
        self
    }

    /// These options with the bodies of a memory-mapped batch checked on its
    /// first touch ([`ReadOptions::check_bodies`]).
    ///
    /// ```
    /// assert!(lodt::location::OpenOptions::default().with_check_bodies(true).read.check_bodies);
    /// ```
    pub fn with_check_bodies(mut self, check: bool) -> Self {
        self.read.check_bodies = check;
        self
    }
}

/// Opens the `.lodt` file at `location`: a local path (as
/// [`LodtFile::open_with`] with `options.read`) or a URI (ranged reads).
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("a.lodt");
/// # lodt::format::save_batch(&path, &lodt::Batch::new())?;
/// let file = lodt::location::open_file(path.to_str().unwrap(), &Default::default())?;
/// assert_eq!(file.num_batches(), 1);
/// assert!(lodt::location::open_file("s3://", &Default::default()).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_file(location: &str, options: &OpenOptions) -> Result<LodtFile, FormatError> {
    if !is_uri(location) {
        return LodtFile::open_with(location, &options.read);
    }
    #[cfg(feature = "remote")]
    {
        crate::remote::open_object(location, &options.remote)
    }
    #[cfg(not(feature = "remote"))]
    {
        Err(FormatError::Io {
            context: format!("opening {location}"),
            source: without_remote(),
        })
    }
}

/// The [`DatasetStore`] of the dataset at `location`: a [`LocalStore`] for a
/// local directory (reading shards as `options.read` says), an object store
/// for a URI.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let store = lodt::location::open_store(dir.path().to_str().unwrap(), &Default::default())?;
/// lodt::dataset::DatasetWriter::create_in(store.clone(), Default::default())?.finish()?;
/// assert_eq!(lodt::dataset::Dataset::open_in(store)?.num_shards(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_store(
    location: &str,
    options: &OpenOptions,
) -> Result<Arc<dyn DatasetStore>, DatasetError> {
    if !is_uri(location) {
        return Ok(Arc::new(
            LocalStore::new(location)
                .with_fsync(options.fsync)
                .with_read_options(options.read),
        ));
    }
    #[cfg(feature = "remote")]
    {
        crate::remote::object_store_for(location, &options.remote)
    }
    #[cfg(not(feature = "remote"))]
    {
        Err(DatasetError::Io {
            action: "opening",
            path: location.to_owned(),
            source: without_remote(),
        })
    }
}

/// Opens the dataset at `location` (a local directory or a URI): one read,
/// of the manifest.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
/// let dataset = lodt::location::open_dataset(dir.path().to_str().unwrap(), &Default::default())?;
/// assert_eq!(dataset.num_sequences(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_dataset(location: &str, options: &OpenOptions) -> Result<Dataset, DatasetError> {
    Dataset::open_in(open_store(location, options)?)
}

#[cfg(not(feature = "remote"))]
fn without_remote() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "this build of lodt has no object-store support (the crate's `remote` feature)",
    )
}
