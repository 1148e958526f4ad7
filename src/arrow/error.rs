//! The error type of the Arrow and Parquet bridge.

/// A `Result` whose error is the Arrow bridge's [`ArrowError`].
pub type Result<T, E = ArrowError> = std::result::Result<T, E>;

/// What went wrong converting between lodt and Arrow (or Parquet).
///
/// Every variant that concerns one column names it, so a message such as
/// `column "words": null list at level 0, index 2` points at the bad entry.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, StringArray};
/// use arrow_schema::Field;
/// use lodt::arrow::{from_arrow, ArrowOptions, ArrowError};
/// let array: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
/// let field = Field::new("names", array.data_type().clone(), false);
/// let err = from_arrow(&field, &array, &ArrowOptions::default()).unwrap_err();
/// assert!(matches!(err, ArrowError::Unsupported { .. }));
/// assert!(err.to_string().contains("names"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArrowError {
    /// An error of the LoD model (an invalid LoD, a shape that does not fit, ...).
    #[error(transparent)]
    Core(#[from] crate::Error),
    /// An error reported by the Arrow crates.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// An error reported by the Parquet crate.
    #[cfg(feature = "parquet")]
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// An I/O error.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// An error reading a `.lodt` file (boxed: it is large and rare here).
    #[error(transparent)]
    Format(Box<crate::format::FormatError>),
    /// An Arrow type with no LoD tensor counterpart.
    #[error(
        "column {column:?}: unsupported Arrow type {data_type}: lodt reads List, LargeList and FixedSizeList arrays (or the arrow.fixed_shape_tensor extension) over boolean, integer and floating-point values, and struct columns of the arrow.variable_shape_tensor or ray.data.arrow_variable_shaped_tensor extension"
    )]
    Unsupported {
        /// The column.
        column: String,
        /// The offending type (at whatever depth it was found).
        data_type: String,
    },
    /// A null list slot: a LoD tensor has no nulls.
    #[error(
        "column {column:?}: null list at level {level}, index {index} (a LoD tensor has no nulls; read null lists as empty sequences with NullLists::Empty)"
    )]
    NullList {
        /// The column.
        column: String,
        /// The LoD level of the list (0 is the outermost).
        level: usize,
        /// The index of the null slot within that level (at level 0: the row).
        index: usize,
    },
    /// A null value (a null primitive, or a null fixed-size list holding one
    /// tensor row): a LoD tensor has no nulls.
    #[error("column {column:?}: null value at tensor row {row} (a LoD tensor has no nulls)")]
    NullValue {
        /// The column.
        column: String,
        /// The tensor row holding the null.
        row: usize,
    },
    /// A value that does not fit the target representation (an offset beyond
    /// `i32::MAX` for `List`, an element shape whose size overflows `i32`, ...).
    #[error("column {column:?}: {what} overflows: {value} exceeds {limit}")]
    Overflow {
        /// The column.
        column: String,
        /// What was being converted.
        what: &'static str,
        /// The value found.
        value: u128,
        /// The largest value allowed.
        limit: u128,
    },
    /// Field metadata that lodt cannot use: a bad `arrow.fixed_shape_tensor`
    /// extension (or a shape that does not match its storage), or a `lodt.*`
    /// key on a field it does not fit.
    #[error("column {column:?}: invalid field metadata: {message}")]
    Metadata {
        /// The column.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor that the LoD model rejects (for example a list column with no
    /// rows: a LoD level needs at least one sequence).
    #[error("column {column:?}: {source}")]
    Tensor {
        /// The column.
        column: String,
        /// The LoD model's error.
        #[source]
        source: crate::Error,
    },
    /// Two columns of one batch with different numbers of top-level rows.
    #[error(
        "column {column:?} has {found} top-level rows but column {first_column:?} has {expected}: every tensor of a RecordBatch needs the same number of top-level rows"
    )]
    RowCount {
        /// The first column of the batch.
        first_column: String,
        /// Its number of top-level rows.
        expected: usize,
        /// The column that differs.
        column: String,
        /// Its number of top-level rows.
        found: usize,
    },
    /// A batch whose schema differs from the schema of the file being written
    /// (an Arrow IPC or Parquet file has one schema).
    #[error(
        "batch {batch}: schema differs from the file's schema (taken from the first batch): expected {expected}, found {found}"
    )]
    SchemaMismatch {
        /// The index of the batch (0 is the first).
        batch: u64,
        /// The file's schema.
        expected: String,
        /// The batch's schema.
        found: String,
    },
    /// A batch whose metadata differs from the first batch's, written to a file
    /// that has one metadata map.
    #[error(
        "batch {batch}: metadata differs from the first batch's at key {key:?} (a file stores one metadata map; use MetadataPolicy::KeepFirst to keep the first batch's)"
    )]
    MetadataMismatch {
        /// The index of the batch (0 is the first).
        batch: u64,
        /// The first key whose value differs.
        key: String,
    },
    /// A file whose structure is broken. The readers report such damage as
    /// [`ArrowError::Decode`](crate::arrow::ArrowError::Decode), which names the file and section; this variant is
    /// kept for compatibility.
    #[error("corrupt file: {0}")]
    Corrupt(String),
    /// Arrow IPC or Parquet input that cannot be decoded: a check lodt runs
    /// before handing the bytes to arrow-rs or parquet failed (a buffer
    /// outside the message body, a negative length, a column chunk outside
    /// the file, ...), the decoder returned an error, or the decoder
    /// panicked. A panic of arrow-rs or parquet never reaches the caller: it
    /// is caught at the reader's boundary and reported here, with a
    /// `message` that starts with `arrow-ipc panicked:` or `parquet panicked:`
    /// (`spec/ARROW.md`, section 6).
    ///
    /// ```
    /// use lodt::arrow::{ipc::IpcFileReader, ArrowError};
    /// let err = IpcFileReader::try_new_named(std::io::Cursor::new(b"not arrow".to_vec()), "x.arrow", &Default::default())
    ///     .err().unwrap();
    /// assert!(matches!(&err, ArrowError::Decode { file, section, .. } if file == "x.arrow" && section == "IPC footer"));
    /// ```
    #[error("{file}: {section}: {message}")]
    Decode {
        /// The file: its path, or what the reader was named
        /// (`Arrow IPC file`, `Arrow IPC stream`, `Parquet file` by default).
        file: String,
        /// The part of the file: `IPC footer`, `IPC schema`, `record batch
        /// 3`, `Parquet footer`, `row group 2`, `row group 2 column "x"`, ...
        section: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor with more LoD levels than lodt writes to Arrow IPC and
    /// Parquet files ([`MAX_LOD_LEVELS`](super::MAX_LOD_LEVELS)): deeper
    /// nesting cannot be read back by arrow-rs or pyarrow.
    #[error(
        "column {column:?}: {levels} LoD levels exceed the limit of {limit} for Arrow IPC and Parquet files (deeper nesting cannot be read back by arrow-rs or pyarrow; spec/ARROW.md, section 6)"
    )]
    TooManyLevels {
        /// The column.
        column: String,
        /// The tensor's number of LoD levels.
        levels: usize,
        /// The limit, [`MAX_LOD_LEVELS`](super::MAX_LOD_LEVELS).
        limit: usize,
    },
    /// A tensor whose column would nest more lists than lodt writes to
    /// Arrow IPC and Parquet files ([`MAX_NESTED_LISTS`](super::MAX_NESTED_LISTS),
    /// 48): its LoD levels and, as nested lists, one `FixedSizeList` per
    /// element dimension (one in all for
    /// [`TensorType::FixedShape`](super::TensorType::FixedShape)). Deeper
    /// files cannot be read back by arrow-rs or pyarrow.
    ///
    /// ```
    /// use lodt::{arrow::{ipc::IpcStreamWriter, ArrowError}, Batch, BatchWriter, LodTensor};
    /// let t = LodTensor::from_vec(vec![1u8], vec![1; 50], Default::default())?;
    /// let mut writer = IpcStreamWriter::new(Vec::new(), &Default::default());
    /// let err = writer.write(&Batch::try_from_tensors([("t", t)])?).unwrap_err();
    /// assert!(matches!(err, ArrowError::TooDeep { depth: 49, limit: 48, .. }), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[error(
        "column {column:?}: {depth} nested lists ({levels} LoD levels and the element shape's lists) exceed the limit of {limit} for Arrow IPC and Parquet files (deeper nesting cannot be read back by arrow-rs or pyarrow; spec/ARROW.md, section 6)"
    )]
    TooDeep {
        /// The column.
        column: String,
        /// The lists the column would nest.
        depth: usize,
        /// The tensor's number of LoD levels.
        levels: usize,
        /// The limit, [`MAX_NESTED_LISTS`](super::MAX_NESTED_LISTS).
        limit: usize,
    },
    /// A selected column (`with_columns`) that the file does not have.
    ///
    /// ```
    /// use lodt::arrow::{ipc::{write_ipc_stream, IpcStreamReader}, ArrowError};
    /// let batch = lodt::Batch::try_from_tensors([("y", lodt::LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?;
    /// let (bytes, _) = write_ipc_stream(Vec::new(), [Ok::<_, lodt::Error>(batch)], &Default::default())?;
    /// let err = IpcStreamReader::try_new(&bytes[..], &Default::default())?.with_columns(&["x"]).err().unwrap();
    /// assert_eq!(err.to_string(), "no column \"x\"; the file has: y");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[error("no column {column:?}; the file has: {available}")]
    NoSuchColumn {
        /// The column asked for.
        column: String,
        /// The file's columns, comma-separated (at most 32 named).
        available: String,
    },
    /// An argument that is not valid for the operation.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An error from the source of batches handed to a writer.
    #[error("batch source: {0}")]
    Source(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl From<std::convert::Infallible> for ArrowError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl From<crate::format::FormatError> for ArrowError {
    fn from(e: crate::format::FormatError) -> Self {
        ArrowError::Format(Box::new(e))
    }
}
