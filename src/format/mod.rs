//! The `.lodt` file format (versions 1.0 and 2.0): a stream of mini-batches
//! of named LoD tensors, with a footer index for random access;
//! memory-mappable, with every uncompressed buffer 64-byte aligned so tensors
//! are read in place. Writers write 2.0 by default (the schema once per file,
//! a compact batch head, compressed buffers on request) and 1.0 when
//! [`WriteOptions::format_version`] asks for it; readers read both.
//!
//! The normative description is `spec/FORMAT.md`; [`layout`] mirrors it.
//!
//! ```text
//!  +-------------+------------------+---------+---------+-----+--------+---------+
//!  | file header | file metadata    | batch 0 | batch 1 | ... | footer | trailer |
//!  | magic, ver. | JSON             |         |         |     | index  |         |
//!  +-------------+------------------+---------+---------+-----+--------+---------+
//!  1.0 batch: | header | metadata JSON | LoD/body buffers (64-aligned) | CRC table |
//!  2.0 batch: | head (counts, codecs, CRCs; the schema once) | buffers |
//! ```
//!
//! - Write: [`save_tensor`], [`save_batch`], or a streaming [`Writer`]
//!   (atomic file creation, appending, or any `Write`).
//! - Read: [`LodtFile`] (memory map or in memory, zero-copy views, owned
//!   tensors over the map; [`LodtFile::into_reader`] makes it a
//!   [`BatchReader`](crate::batch::BatchReader) with random access), or
//!   [`StreamReader`] (any `Read`, in order).
//! - [`Writer`] is a [`BatchWriter`](crate::batch::BatchWriter) and
//!   [`StreamReader`] a [`BatchReader`](crate::batch::BatchReader), like every
//!   format's writer and reader.
//! - Check and repair: [`verify`], [`recover`].
//!
//! ```
//! use lodt::{Batch, Lod, LodTensor, format};
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("batch.lodt");
//! let lod = Lod::try_from_lengths(&[vec![2, 1], vec![3, 2, 4]])?;
//! let words = LodTensor::from_vec((0..9i64).collect(), vec![9, 1], lod)?;
//! let labels = LodTensor::from_vec(vec![1i64, 0], vec![2], Lod::empty())?;
//! format::save_batch(&path, &Batch::try_from_tensors([("words", words), ("labels", labels)])?)?;
//!
//! let file = format::LodtFile::open(&path)?;
//! let batch = file.batch(0)?;
//! assert_eq!(batch.tensor("words")?.branch(&[1, 0])?.as_slice::<i64>()?, &[5, 6, 7, 8]);
//! assert_eq!(format::verify(&path)?.batches, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aligned;
mod batch_io;
mod batch_meta;
mod buffers;
mod error;
mod gather;
// Test hooks: public (doc-hidden) with the `test-hooks` feature only.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod hooks;
#[cfg(not(feature = "test-hooks"))]
mod hooks;
pub mod layout;
mod pattern;
mod reader;
mod recover;
mod regular;
mod row_index;
mod rows;
mod schema;
mod section;
mod shuffle;
mod source;
mod storage;
mod stream;
mod summary;
mod v2;
mod verify;
mod writer;

pub use batch_io::LodtFileReader;
pub use buffers::TensorBuffers;
pub use error::{ErrorSite, FilePart, FormatError, Result};
pub use layout::{
    ALIGN, MAGIC, MAJOR_VERSION, MAX_DIMS, MAX_LOD_LEVELS, MAX_MAJOR_VERSION, MAX_METADATA_LEN,
    MINOR_VERSION,
};
pub use pattern::Pattern;
pub use reader::{Advice, BatchView, LodtFile, ReadOptions};
pub use recover::{RecoverOptions, RecoverReport, recover, recover_with, recover_with_options};
pub use regular::open_regular;
pub use row_index::{RowIndex, RowLocation};
pub use source::{MemorySource, MmapSource, OpenHint, PreadSource, RangeSource};
pub use storage::MappedFile;
pub use stream::StreamReader;
pub use summary::{BatchSummary, BatchTensor, FileSummary, TensorTotals};
pub use v2::{Compression, MAX_DECODED_BATCH};
pub use verify::{VerifyReport, verify};
pub use writer::{FileSink, WriteOptions, Writer};

use crate::{Batch, LodTensor};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// A format version: `major.minor`.
///
/// ```
/// let v = lodt::format::Version { major: 1, minor: 0 };
/// assert_eq!(v.to_string(), "1.0");
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(into = "String", try_from = "String")]
pub struct Version {
    /// Incompatible changes.
    pub major: u16,
    /// Compatible additions that older readers ignore.
    pub minor: u16,
}

/// Serialized as its text, `"2.0"` (dataset manifests record each shard's).
impl From<Version> for String {
    fn from(v: Version) -> String {
        v.to_string()
    }
}

impl TryFrom<String> for Version {
    type Error = FormatError;
    fn try_from(text: String) -> Result<Version> {
        text.parse()
    }
}

impl std::str::FromStr for Version {
    type Err = FormatError;

    /// Parses `MAJOR.MINOR` (`"1.0"`, `"2.0"`), or `MAJOR` alone (minor 0).
    ///
    /// ```
    /// use lodt::format::Version;
    /// assert_eq!("2.0".parse::<Version>()?, Version { major: 2, minor: 0 });
    /// assert_eq!("1".parse::<Version>()?, Version { major: 1, minor: 0 });
    /// assert!("two".parse::<Version>().is_err());
    /// # Ok::<(), lodt::format::FormatError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self> {
        let (major, minor) = s.split_once('.').unwrap_or((s, "0"));
        match (major.parse(), minor.parse()) {
            (Ok(major), Ok(minor)) => Ok(Version { major, minor }),
            _ => Err(FormatError::Unwritable(format!(
                "expected a format version such as 1.0 or 2.0, found {s:?}"
            ))),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Saves one tensor as a file of one batch holding it under `name`
/// (atomically: see [`Writer::create`]).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("t.lodt");
/// let t = lodt::LodTensor::from_vec(vec![1i16, 2], vec![2], Default::default())?;
/// lodt::format::save_tensor(&path, "t", &t)?;
/// assert_eq!(lodt::format::LodtFile::open(&path)?.read_batch(0)?.get("t"), Some(&t));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_tensor(path: impl AsRef<Path>, name: &str, tensor: &LodTensor) -> Result<()> {
    save_batch(path, &Batch::try_from_tensors([(name, tensor.clone())])?)
}

/// Saves one batch as a file (atomically: see [`Writer::create`]).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("b.lodt");
/// lodt::format::save_batch(&path, &lodt::Batch::new())?;
/// assert_eq!(lodt::format::LodtFile::open(&path)?.num_batches(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_batch(path: impl AsRef<Path>, batch: &Batch) -> Result<()> {
    let mut w = Writer::create(path, BTreeMap::new())?;
    w.write(batch)?;
    w.finish()?;
    Ok(())
}

/// The bytes of a file holding `batches`, with file metadata `metadata`.
///
/// ```
/// let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
/// assert!(bytes.starts_with(&lodt::format::MAGIC));
/// # Ok::<(), lodt::format::FormatError>(())
/// ```
pub fn to_bytes<'a>(
    batches: impl IntoIterator<Item = &'a Batch>,
    metadata: BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut w = Writer::try_new(Vec::new(), metadata)?;
    for b in batches {
        w.write(b)?;
    }
    w.finish()
}

/// The old name of [`FilePart`], which collided with
/// [`dataset::Part`](crate::dataset::Part) (a writer's uncommitted part).
///
/// ```
/// #![allow(deprecated)]
/// assert_eq!(lodt::format::Part::Trailer, lodt::format::FilePart::Trailer);
/// ```
#[deprecated(note = "renamed FilePart (dataset::Part is a writer's uncommitted part)")]
pub type Part = FilePart;

/// The old name of [`ErrorSite`], which collided with the
/// [`location`](crate::location) module (where data is, local or remote).
///
/// ```
/// #![allow(deprecated)]
/// let at: lodt::format::Location = lodt::format::ErrorSite::file(lodt::format::FilePart::Trailer);
/// assert_eq!(at.to_string(), "trailer");
/// ```
#[deprecated(note = "renamed ErrorSite (the location module says where data is)")]
pub type Location = ErrorSite;
