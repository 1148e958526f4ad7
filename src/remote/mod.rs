//! Files and datasets in object stores: `s3://`, `az://` (also `abfs://`,
//! `azure://`), `gs://` and `http(s)://` URIs, through the `object_store`
//! crate (feature `remote`).
//!
//! Files, stores and datasets are opened by URI through
//! [`location`](crate::location) (the one place that tells a URI from a local
//! path), with [`RemoteOptions`] in its
//! [`OpenOptions`](crate::location::OpenOptions):
//!
//! - [`location::open_file`](crate::location::open_file) opens a `.lodt` file
//!   at a URI for random access: [`ObjectSource`] is the
//!   [`RangeSource`](crate::format::RangeSource) behind it.
//! - [`location::open_store`](crate::location::open_store) gives the
//!   [`DatasetStore`] of a dataset at a URI ([`ObjectDatasetStore`]), for
//!   [`Dataset::open_in`](crate::dataset::Dataset::open_in),
//!   [`DatasetWriter::create_in`](crate::dataset::DatasetWriter::create_in)
//!   and the rest; [`location::open_dataset`](crate::location::open_dataset)
//!   opens one.
//!
//! ## Requests
//!
//! - **Opening a file** costs at most two requests: a suffix read of the
//!   last [`RemoteOptions::suffix_bytes`] bytes (256 KiB by default), which
//!   also tells the object's size and ETag, then one ranged read of the
//!   file's start (header and file metadata). The footer and index of a file
//!   of up to about 10,000 batches (24 bytes of index each, plus the footer's
//!   fixed part) fit in the default suffix, so they come with the first
//!   request; a larger footer costs one more read. A file smaller than the
//!   suffix is read whole by the first request, and opening costs one.
//!   Azure Blob has no suffix reads: there the size comes from a `HEAD`
//!   first, so opening costs one request more.
//! - **One batch** is one ranged GET of the batch's section, the first time
//!   the batch is touched; later touches of the same batch reuse the
//!   reader's bytes only if the caller keeps them (a [`LodtFile`] does not
//!   cache sections), or the disk cache ([`RemoteOptions::cache_dir`]).
//! - Several ranges asked at once are fetched concurrently, at most
//!   [`RemoteOptions::max_concurrency`] at a time.
//! - Every ranged read after opening carries the ETag seen at open
//!   (`If-Match`): a file rewritten while it is read gives an error, never
//!   a mix of two versions.
//! - **A dataset** opens with one request (the manifest); a shard is opened
//!   (two requests) when first touched.
//!
//! ## Credentials and configuration
//!
//! As `object_store` reads them from the environment: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` (an
//! S3-compatible server), `AWS_ALLOW_HTTP`; `AZURE_STORAGE_ACCOUNT_NAME`,
//! `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_USE_EMULATOR`;
//! `GOOGLE_SERVICE_ACCOUNT`; and so on. [`RemoteOptions::options`] adds or
//! overrides configuration keys (`object_store`'s names, such as
//! `aws_endpoint` or `allow_http`).
//!
//! ## Failures
//!
//! Transient failures (connection errors, 5xx answers, timeouts) are retried
//! by `object_store`'s client with exponential backoff, at most
//! [`RemoteOptions::max_retries`] times. A missing object, a truncated one
//! (a range past its end) or one rewritten since it was opened is an error
//! naming the URI. Every batch read (from the store or the disk cache) is
//! checked against its checksum table, bodies included, before any tensor
//! of it is handed out: a byte damaged in the store, on the way or in the
//! cache is an error naming the URI and the batch, never data; a damaged
//! cache entry is dropped and the batch fetched again, once.
//!
//! ## Processes
//!
//! Files, stores and datasets opened by URI may be used in a child process
//! made by `fork` (PyTorch's `DataLoader` workers, `multiprocessing`), as
//! well as with `spawn` or `forkserver`: each process makes its own client
//! and I/O runtime on its first request, and never uses the connections or
//! threads of the process it was forked from (which do not exist in the
//! child). A store built outside lodt and passed in (an
//! `Arc<dyn ObjectStore>` given to [`ObjectSource::open`] or
//! [`ObjectDatasetStore::new`]) is used as it is: make it again in each
//! process.
//!
//! ## Writing
//!
//! Datasets are written to S3, Azure and local directories. Shards are
//! uploaded first (in parts of [`PART_BYTES`], as a multipart upload
//! completed only when the shard is whole, so no reader ever sees half a
//! shard); the manifest is written last with a conditional put
//! (`If-None-Match: *` for a new dataset, `If-Match: <ETag>` when it
//! replaces the manifest the writer read), so two writers cannot silently
//! overwrite each other's manifest: the loser gets
//! [`DatasetError::ManifestChanged`](crate::dataset::DatasetError::ManifestChanged).
//!
//! A conditional put is not idempotent, and its failure does not say
//! whether it was applied: `object_store` retries it after a 5xx answer or
//! a connection closed before the answer (at most
//! [`RemoteOptions::max_retries`] times, within 60 s), and a retry whose
//! first attempt was applied is refused (412); after a timeout (the
//! client's `timeout` option, 30 s by default) it is not retried. So the
//! writer never takes a failed put at its word: it reads the manifest again
//! and reports success if the manifest lists the write's commit id (see
//! [`DatasetWriter`](crate::dataset::DatasetWriter) and `spec/DATASET.md`
//! section 5.3). A manifest is read only if its size is at most
//! [`MAX_MANIFEST_BYTES`](crate::dataset::MAX_MANIFEST_BYTES).
//!
//! ```no_run
//! use lodt::location::{open_file, OpenOptions};
//! let file = open_file("s3://bucket/train/batches.lodt", &OpenOptions::default())?;
//! let words = file.batch(0)?.tensor("words")?;
//! # let _ = words;
//! # Ok::<(), lodt::format::FormatError>(())
//! ```

mod cache;
mod open;
mod options;
mod pending;
mod process;
mod runtime;
mod source;
mod store;
mod throttle;
mod uri;

pub use crate::location::is_uri;
pub use cache::DiskCache;
pub(crate) use open::{object_store_for, open_object};
pub use options::RemoteOptions;
pub use source::{ObjectSource, default_cache_dir};
pub use store::{ObjectDatasetStore, PART_BYTES};
pub use uri::ResolvedLocation;

use crate::dataset::DatasetStore;
use crate::format::{FormatError, LodtFile};
use std::sync::Arc;

/// Opens the `.lodt` file at `location` (a URI, or a local path, then
/// memory-mapped): [`location::open_file`](crate::location::open_file) with
/// these remote options and the default local ones.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("a.lodt");
/// # lodt::format::save_batch(&path, &lodt::Batch::new())?;
/// let file = lodt::remote::open_file(path.to_str().unwrap(), &Default::default())?;
/// assert_eq!(file.num_batches(), 1);
/// assert!(lodt::remote::open_file("s3://", &Default::default()).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_file(location: &str, options: &RemoteOptions) -> Result<LodtFile, FormatError> {
    crate::location::open_file(location, &with_remote(options))
}

/// The [`DatasetStore`] of the dataset at `location` (a URI or a local
/// directory): [`location::open_store`](crate::location::open_store) with
/// these remote options and the default local ones.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let store = lodt::remote::store_for(dir.path().to_str().unwrap(), &Default::default())?;
/// lodt::dataset::DatasetWriter::create_in(store.clone(), Default::default())?.finish()?;
/// assert_eq!(lodt::dataset::Dataset::open_in(store)?.num_shards(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn store_for(
    location: &str,
    options: &RemoteOptions,
) -> Result<Arc<dyn DatasetStore>, crate::dataset::DatasetError> {
    crate::location::open_store(location, &with_remote(options))
}

/// Opens the dataset at `location` (a URI or a local directory):
/// [`location::open_dataset`](crate::location::open_dataset) with these
/// remote options and the default local ones.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
/// let dataset = lodt::remote::open_dataset(dir.path().to_str().unwrap(), &Default::default())?;
/// assert_eq!(dataset.num_sequences(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_dataset(
    location: &str,
    options: &RemoteOptions,
) -> Result<crate::dataset::Dataset, crate::dataset::DatasetError> {
    crate::location::open_dataset(location, &with_remote(options))
}

fn with_remote(options: &RemoteOptions) -> crate::location::OpenOptions {
    crate::location::OpenOptions {
        remote: options.clone(),
        ..Default::default()
    }
}

/// The old name of [`ResolvedLocation`], which collided with the
/// [`location`](crate::location) module and [`format::Location`](crate::format::ErrorSite).
///
/// ```
/// #![allow(deprecated)]
/// use lodt::remote::{Location, RemoteOptions};
/// assert!(matches!(Location::parse("data/train", &RemoteOptions::default())?, Location::Local(_)));
/// # Ok::<(), std::io::Error>(())
/// ```
#[deprecated(note = "renamed ResolvedLocation (the location module and format::ErrorSite)")]
pub type Location = ResolvedLocation;
