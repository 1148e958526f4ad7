//! [`FormatError`]: what can go wrong reading or writing a `.lodt` file, and
//! [`ErrorSite`]: where in the file it went wrong.

use std::fmt;

/// A `Result` whose error is [`FormatError`].
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

/// A part of a `.lodt` file, as named in `spec/FORMAT.md`.
///
/// ```
/// use lodt::format::{ErrorSite, FilePart};
/// let at = ErrorSite::tensor(3, "words", FilePart::Lod(1));
/// assert_eq!(at.to_string(), "batch 3, tensor \"words\", LoD level 1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FilePart {
    /// The 64-byte file header (magic, version).
    FileHeader,
    /// The file's metadata JSON.
    FileMetadata,
    /// A batch's 64-byte header.
    BatchHeader,
    /// A batch's metadata JSON (names, dtypes, shapes, buffer table).
    BatchMetadata,
    /// The offsets of one LoD level of a tensor.
    Lod(usize),
    /// A tensor's body (its values).
    Body,
    /// A buffer of a batch that no tensor uses (written by a newer minor version).
    Buffer(usize),
    /// A batch's checksum table (one CRC32 per buffer).
    ChecksumTable,
    /// Zero padding between two parts.
    Padding,
    /// The 64-byte footer header.
    FooterHeader,
    /// The footer's batch index.
    Index,
    /// The 64-byte trailer at the end of the file.
    Trailer,
}

impl fmt::Display for FilePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilePart::FileHeader => f.write_str("file header"),
            FilePart::FileMetadata => f.write_str("file metadata"),
            FilePart::BatchHeader => f.write_str("batch header"),
            FilePart::BatchMetadata => f.write_str("batch metadata"),
            FilePart::Lod(level) => write!(f, "LoD level {level}"),
            FilePart::Body => f.write_str("body"),
            FilePart::Buffer(i) => write!(f, "buffer {i}"),
            FilePart::ChecksumTable => f.write_str("checksum table"),
            FilePart::Padding => f.write_str("padding"),
            FilePart::FooterHeader => f.write_str("footer header"),
            FilePart::Index => f.write_str("footer index"),
            FilePart::Trailer => f.write_str("trailer"),
        }
    }
}

/// Where in a file an error is: the part, and the batch and tensor it belongs to.
///
/// ```
/// use lodt::format::{ErrorSite, FilePart};
/// assert_eq!(ErrorSite::file(FilePart::Trailer).to_string(), "trailer");
/// assert_eq!(ErrorSite::batch(2, FilePart::ChecksumTable).to_string(), "batch 2, checksum table");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorSite {
    /// The batch, when the part belongs to one.
    pub batch: Option<u64>,
    /// The tensor, when the part belongs to one.
    pub tensor: Option<String>,
    /// The part.
    pub part: FilePart,
}

impl ErrorSite {
    /// A part of the file outside any batch.
    ///
    /// ```
    /// use lodt::format::{ErrorSite, FilePart};
    /// assert_eq!(ErrorSite::file(FilePart::FileHeader).batch, None);
    /// ```
    pub fn file(part: FilePart) -> Self {
        ErrorSite {
            batch: None,
            tensor: None,
            part,
        }
    }

    /// A part of batch `batch`.
    ///
    /// ```
    /// use lodt::format::{ErrorSite, FilePart};
    /// assert_eq!(ErrorSite::batch(1, FilePart::BatchHeader).batch, Some(1));
    /// ```
    pub fn batch(batch: u64, part: FilePart) -> Self {
        ErrorSite {
            batch: Some(batch),
            tensor: None,
            part,
        }
    }

    /// A part of tensor `tensor` of batch `batch`.
    ///
    /// ```
    /// use lodt::format::{ErrorSite, FilePart};
    /// assert_eq!(ErrorSite::tensor(0, "x", FilePart::Body).tensor.as_deref(), Some("x"));
    /// ```
    pub fn tensor(batch: u64, tensor: &str, part: FilePart) -> Self {
        ErrorSite {
            batch: Some(batch),
            tensor: Some(tensor.to_owned()),
            part,
        }
    }
}

impl fmt::Display for ErrorSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(b) = self.batch {
            write!(f, "batch {b}, ")?;
        }
        if let Some(t) = &self.tensor {
            write!(f, "tensor {t:?}, ")?;
        }
        write!(f, "{}", self.part)
    }
}

/// The error of the `.lodt` reader and writer.
///
/// Every variant that comes from the file's bytes says where ([`ErrorSite`]),
/// what was expected and what was found.
///
/// ```
/// let err = lodt::format::LodtFile::from_bytes(b"hello, world").unwrap_err();
/// assert!(matches!(err, lodt::format::FormatError::NotLodt { .. }));
/// assert!(err.to_string().contains("not a .lodt file"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// An operating-system error while reading or writing.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the `.lodt` magic.
    #[error("not a .lodt file: {reason}")]
    NotLodt {
        /// Why, with a hint when the bytes look like a transfer-damaged `.lodt` file.
        reason: String,
    },
    /// The file's major version is not one this reader knows.
    #[error(
        "unsupported .lodt version {major}.{minor}: this reader reads major versions 1 to {supported}"
    )]
    UnsupportedVersion {
        /// The file's major version.
        major: u16,
        /// The file's minor version.
        minor: u16,
        /// The highest major version this reader reads (it reads 1 to this one).
        supported: u16,
    },
    /// A CRC32 does not match the bytes it covers.
    #[error("checksum mismatch in {at}: expected {expected:#010x}, found {found:#010x}")]
    Checksum {
        /// The part whose checksum failed.
        at: ErrorSite,
        /// The checksum recorded in the file.
        expected: u32,
        /// The checksum of the bytes found.
        found: u32,
    },
    /// The file ends before a part it announces.
    #[error("truncated file: {at} needs bytes up to offset {needed}, but the file has {available}")]
    Truncated {
        /// The part that is cut.
        at: ErrorSite,
        /// The end offset the part needs.
        needed: u64,
        /// The number of bytes available.
        available: u64,
    },
    /// The file has no valid footer (a writer was interrupted, or the file is cut).
    #[error(
        "no valid footer: {reason}; the batches may still be readable in order, and `lodt recover` rebuilds the footer"
    )]
    NoFooter {
        /// What is wrong with the end of the file.
        reason: String,
    },
    /// A structural rule of the format is broken.
    #[error("corrupt {at}: {reason}")]
    Corrupt {
        /// Where.
        at: ErrorSite,
        /// The rule broken, with what was expected and what was found.
        reason: String,
    },
    /// A metadata JSON that does not parse or lacks a required field.
    #[error("invalid JSON in {at}: {source}")]
    Json {
        /// Which metadata.
        at: ErrorSite,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A size above a limit of the format.
    #[error("{at}: {what} is {found}, above the limit of {limit}")]
    TooLarge {
        /// Where.
        at: ErrorSite,
        /// What is too large.
        what: &'static str,
        /// The limit.
        limit: u64,
        /// The value found.
        found: u64,
    },
    /// Padding that should be zero is not.
    #[error("non-zero padding in {at} at file offset {offset}: found byte {found:#04x}")]
    NonZeroPadding {
        /// The part the padding follows.
        at: ErrorSite,
        /// The file offset of the first non-zero byte.
        offset: u64,
        /// The byte found.
        found: u8,
    },
    /// A tensor that breaks the LoD tensor rules (an invalid LoD, a body of the
    /// wrong length, a bad bool, ...).
    #[error("invalid tensor in {at}: {source}")]
    Tensor {
        /// Which tensor.
        at: ErrorSite,
        /// The core error.
        #[source]
        source: crate::Error,
    },
    /// A batch index past the end.
    #[error("no batch {index}: the file has {count} batches")]
    NoSuchBatch {
        /// The index asked for.
        index: usize,
        /// The number of batches.
        count: usize,
    },
    /// A tensor name the batch does not have.
    #[error("batch {batch} has no tensor {name:?}; it has: {}", crate::error::name_list(available.iter().map(String::as_str)))]
    NoSuchTensor {
        /// The batch.
        batch: usize,
        /// The name asked for.
        name: String,
        /// The names the batch has.
        available: Vec<String>,
    },
    /// `recover` declined to rewrite a file, to avoid losing data.
    #[error("refusing to recover: {0}")]
    Refused(String),
    /// Something the writer cannot store (for example, a name too long for the
    /// metadata limit).
    #[error("cannot write: {0}")]
    Unwritable(String),
    /// Bytes of a batch read from `file` that do not pass the checks of the
    /// batch's checksum table before any tensor of it is handed out (every
    /// read of a copy: positional reads, an object store, its disk cache; the
    /// first touch with [`ReadOptions::check_bodies`](super::ReadOptions::check_bodies)):
    /// they differ from what was written (`spec/FORMAT.md` §7.1). `source`
    /// says where, and what was expected.
    ///
    /// ```
    /// use lodt::format::{FormatError, ErrorSite, FilePart};
    /// let inner = FormatError::Checksum { at: ErrorSite::tensor(3, "x", FilePart::Body), expected: 1, found: 2 };
    /// let err = FormatError::BadRead { file: "s3://b/a.lodt".into(), source: Box::new(inner) };
    /// assert!(err.to_string().starts_with("s3://b/a.lodt: checksum mismatch in batch 3, tensor \"x\", body"));
    /// assert_eq!(err.location().unwrap().batch, Some(3));
    /// ```
    #[error("{file}: {source}")]
    BadRead {
        /// The file read (a path or a URI).
        file: String,
        /// The check that failed.
        #[source]
        source: Box<FormatError>,
    },
    /// An error of the LoD tensor model.
    #[error(transparent)]
    Core(#[from] crate::Error),
    /// An error of a safe write: among them [`AtomicError::Locked`], when
    /// another process is writing the file (appending, recovering, replacing
    /// it).
    ///
    /// [`AtomicError::Locked`]: crate::atomic::AtomicError::Locked
    #[error(transparent)]
    Atomic(#[from] crate::atomic::AtomicError),
}

impl FormatError {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        FormatError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn corrupt(at: ErrorSite, reason: impl Into<String>) -> Self {
        FormatError::Corrupt {
            at,
            reason: reason.into(),
        }
    }

    /// The location in the file the error points at, when it has one.
    ///
    /// ```
    /// use lodt::format::{FormatError, FilePart};
    /// let bytes = lodt::format::to_bytes([&lodt::Batch::new()], Default::default())?;
    /// let mut bad = bytes.clone();
    /// bad[20] ^= 1; // a byte of the file header
    /// let err = lodt::format::LodtFile::from_bytes(&bad).unwrap_err();
    /// assert_eq!(err.location().unwrap().part, FilePart::FileHeader);
    /// # Ok::<(), FormatError>(())
    /// ```
    pub fn location(&self) -> Option<&ErrorSite> {
        match self {
            FormatError::Checksum { at, .. }
            | FormatError::Truncated { at, .. }
            | FormatError::Corrupt { at, .. }
            | FormatError::Json { at, .. }
            | FormatError::TooLarge { at, .. }
            | FormatError::NonZeroPadding { at, .. }
            | FormatError::Tensor { at, .. } => Some(at),
            FormatError::BadRead { source, .. } => source.location(),
            _ => None,
        }
    }
}
