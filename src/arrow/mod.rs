//! Arrow and Parquet interop: LoD tensors as nested Arrow lists, mini-batches
//! as `RecordBatch`es, and Arrow IPC and Parquet files of many batches.
//!
//! The normative mapping is `spec/ARROW.md`. In short, a tensor with `k >= 1`
//! LoD levels and element shape `S` is an array with one row per top-level
//! sequence: `k` nested `LargeList`s (or `List`s), outermost = level 0, over a
//! leaf that is the primitive type (`S` empty) or, by default, nested
//! `FixedSizeList`s of the element shape (or, with
//! [`TensorType::FixedShape`], one `FixedSizeList<T, prod(S)>` carrying the
//! canonical `arrow.fixed_shape_tensor` extension with shape `S`):
//!
//! ```text
//!  words: int64 [15], lod {{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}
//!
//!  LargeList           offsets [0, 3, 4, 6]                 (level 0, 3 rows)
//!   └ LargeList        offsets [0, 3, 5, 9, 10, 12, 15]     (level 1)
//!      └ Int64         values  [w0 w1 ... w14]              (the tensor body)
//! ```
//!
//! Both the offsets and the body are shared with Arrow, not copied, wherever
//! their layout allows it ([`to_arrow`], [`from_arrow`]); a tensor read from a
//! memory-mapped `.lodt` file becomes an array over the map.
//!
//! | what                         | API |
//! |------------------------------|-----|
//! | tensor <-> array             | [`to_arrow`], [`from_arrow`], [`lodt_tensor_to_arrow`], [`tensor_buffers_to_arrow`] |
//! | [`Batch`](crate::Batch) <-> `RecordBatch` | [`batch_to_record_batch`], [`record_batch_to_batch`] |
//! | Arrow IPC files and streams  | [`ipc`] |
//! | Parquet files (feature `parquet`) | `parquet` |
//! | regrouping rows into batches | [`crate::batch::rebatch`] |
//!
//! The IPC and Parquet readers and writers implement lodt's
//! [`BatchReader`](crate::batch::BatchReader) and
//! [`BatchWriter`](crate::batch::BatchWriter), like every format's.
//!
//! ```
//! use lodt::{arrow::{from_arrow, to_arrow, ArrowOptions}, Lod, LodTensor};
//! let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
//! let words = LodTensor::from_vec((0..15i64).collect(), vec![15], lod)?;
//! let (field, array) = to_arrow("words", &words, &ArrowOptions::default())?;
//! assert_eq!(array.len(), 3); // one Arrow row per top-level sequence
//! assert_eq!(field.data_type().to_string(), "LargeList(non-null LargeList(non-null Int64))");
//! let back = from_arrow(&field, &array, &ArrowOptions::default())?;
//! assert_eq!(back, words);
//! # Ok::<(), lodt::arrow::ArrowError>(())
//! ```

mod batch;
mod batch_io;
mod changes;
mod column;
mod error;
mod file;
#[cfg(feature = "parquet")]
mod fixed_lists;
mod foreign;
pub mod ipc;
mod option_names;
#[cfg(feature = "parquet")]
pub mod parquet;
mod requested;
mod select;
mod tensor;
mod tensor_type;
mod variable_shape;

pub use batch::{batch_to_record_batch, batch_to_requested_record_batch, record_batch_to_batch};
pub use changes::{TypeChange, type_changes};
pub use column::{from_arrow, from_arrow_array, tensor_buffers_to_arrow, to_arrow};
/// The module's error under its short name, for the IPC and Parquet files.
pub(crate) use error::ArrowError as Error;
pub use error::{ArrowError, Result};
pub use file::lodt_tensor_to_arrow;
pub use requested::{cast_to_requested, check_requested_columns, requested_options, to_requested};
pub use tensor_type::TensorType;

use crate::buffer::ByteStorage;
use arrow_buffer::Buffer;

/// Field metadata key that marks a `UInt16` leaf as bfloat16 (value
/// `"bfloat16"`); Arrow has no bfloat16 type.
///
/// ```
/// assert_eq!(lodt::arrow::DTYPE_KEY, "lodt.dtype");
/// ```
pub const DTYPE_KEY: &str = "lodt.dtype";

/// Column field metadata key that marks a one-row column as a 0-D tensor
/// (value `"true"`).
///
/// ```
/// assert_eq!(lodt::arrow::SCALAR_KEY, "lodt.scalar");
/// ```
pub const SCALAR_KEY: &str = "lodt.scalar";

/// The name of Arrow's canonical fixed-shape tensor extension type.
///
/// ```
/// assert_eq!(lodt::arrow::FIXED_SHAPE_TENSOR, "arrow.fixed_shape_tensor");
/// ```
pub const FIXED_SHAPE_TENSOR: &str = "arrow.fixed_shape_tensor";

/// The canonical variable-shape tensor extension's name (`spec/ARROW.md`
/// section 9).
pub(crate) const VARIABLE_SHAPE_TENSOR: &str = "arrow.variable_shape_tensor";

/// The most LoD levels a tensor may have to be written to an Arrow IPC file
/// or stream or a Parquet file: 32.
///
/// Each level is one nested list, and readers limit nesting: arrow-rs 60
/// reads at most 60 nested lists (with an element shape, whose
/// `FixedSizeList` is one more, 59 levels) in IPC and in Parquet's
/// `ARROW:schema`, pyarrow 26 at most 63 in IPC and 49 in Parquet. Deeper
/// files would be written without complaint and could not be read back, so
/// the writers refuse them ([`ArrowError::TooManyLevels`]). The limit leaves room
/// for readers with smaller limits and for tools that wrap a column (measured
/// figures: `spec/ARROW.md`, section 6). Conversions in memory ([`to_arrow`])
/// have no limit.
///
/// ```
/// use lodt::{arrow::{ipc::IpcStreamWriter, ArrowError, MAX_LOD_LEVELS}, Batch, BatchWriter, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&vec![vec![1]; MAX_LOD_LEVELS + 1])?;
/// let deep = LodTensor::from_vec(vec![1i64], vec![1], lod)?;
/// let mut writer = IpcStreamWriter::new(Vec::new(), &Default::default());
/// let err = writer.write(&Batch::try_from_tensors([("deep", deep)])?).unwrap_err();
/// assert!(matches!(err, ArrowError::TooManyLevels { levels: 33, limit: 32, .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const MAX_LOD_LEVELS: usize = 32;

/// The most lists a column may nest to be written to an Arrow IPC file or
/// stream or a Parquet file: 48, its LoD levels (at most [`MAX_LOD_LEVELS`])
/// and, written as nested lists, one `FixedSizeList` per element dimension
/// (a fixed-shape tensor column nests one for its whole element shape).
/// pyarrow 26 reads at most 49 nested lists back from Parquet (its Thrift
/// schema depth limit of 100, two schema nodes per list); a deeper column is
/// refused ([`ArrowError::TooDeep`]) rather than written unreadable.
///
/// ```
/// assert_eq!(lodt::arrow::MAX_NESTED_LISTS, 48);
/// ```
pub const MAX_NESTED_LISTS: usize = 48;

/// Which Arrow list type LoD levels become.
///
/// ```
/// assert_eq!(lodt::arrow::ListType::default(), lodt::arrow::ListType::LargeList);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ListType {
    /// `List`, with `i32` offsets (copied and checked against `i32::MAX`).
    List,
    /// `LargeList`, with `i64` offsets: lodt's `u64` offsets are shared as
    /// they are, with no copy.
    #[default]
    LargeList,
}

/// What reading does with a null list slot.
///
/// ```
/// assert_eq!(lodt::arrow::NullLists::default(), lodt::arrow::NullLists::Error);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NullLists {
    /// A null list is an [`ArrowError::NullList`] naming the column, level and index.
    #[default]
    Error,
    /// A null list is read as an empty sequence.
    Empty,
}

/// Options of the conversions between lodt and Arrow.
///
/// ```
/// use lodt::arrow::{ArrowOptions, ListType, NullLists, TensorType};
/// let o = ArrowOptions::default().with_list_type(ListType::List).with_null_lists(NullLists::Empty);
/// assert_eq!((o.list_type, o.null_lists), (ListType::List, NullLists::Empty));
/// assert_eq!(o.tensor_type, TensorType::NestedLists);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ArrowOptions {
    /// The list type written for LoD levels (reading accepts both).
    pub list_type: ListType,
    /// How rows with an element shape are written (reading accepts every
    /// [`TensorType`]).
    pub tensor_type: TensorType,
    /// What reading does with null lists.
    pub null_lists: NullLists,
    /// The most bytes a reader may decode into one batch
    /// ([`DEFAULT_DECODE_BUDGET`] by default). A Parquet reader cuts a row
    /// group into batches of as many rows as fit (see
    /// [`ParquetReader`](parquet::ParquetReader)); a batch that needs more —
    /// even one row — is an [`ArrowError::Decode`] that gives the budget and
    /// what the batch needed.
    pub decode_budget: u64,
}

/// The default of [`ArrowOptions::decode_budget`]: 256 MiB.
///
/// ```
/// assert_eq!(lodt::arrow::DEFAULT_DECODE_BUDGET, 256 << 20);
/// assert_eq!(lodt::arrow::ArrowOptions::default().decode_budget, 256 << 20);
/// ```
pub const DEFAULT_DECODE_BUDGET: u64 = 256 << 20;

impl Default for ArrowOptions {
    fn default() -> Self {
        ArrowOptions {
            list_type: ListType::default(),
            tensor_type: TensorType::default(),
            null_lists: NullLists::default(),
            decode_budget: DEFAULT_DECODE_BUDGET,
        }
    }
}

impl ArrowOptions {
    /// Sets [`ArrowOptions::list_type`].
    ///
    /// ```
    /// use lodt::arrow::{ArrowOptions, ListType};
    /// assert_eq!(ArrowOptions::default().with_list_type(ListType::List).list_type, ListType::List);
    /// ```
    pub fn with_list_type(mut self, list_type: ListType) -> Self {
        self.list_type = list_type;
        self
    }

    /// Sets [`ArrowOptions::tensor_type`].
    ///
    /// ```
    /// use lodt::arrow::{ArrowOptions, TensorType};
    /// let o = ArrowOptions::default().with_tensor_type(TensorType::FixedShape);
    /// assert_eq!(o.tensor_type, TensorType::FixedShape);
    /// ```
    pub fn with_tensor_type(mut self, tensor_type: TensorType) -> Self {
        self.tensor_type = tensor_type;
        self
    }

    /// Sets [`ArrowOptions::null_lists`].
    ///
    /// ```
    /// use lodt::arrow::{ArrowOptions, NullLists};
    /// assert_eq!(ArrowOptions::default().with_null_lists(NullLists::Empty).null_lists, NullLists::Empty);
    /// ```
    pub fn with_null_lists(mut self, null_lists: NullLists) -> Self {
        self.null_lists = null_lists;
        self
    }

    /// Sets [`ArrowOptions::decode_budget`] (bytes; at least 1).
    ///
    /// ```
    /// use lodt::arrow::ArrowOptions;
    /// assert_eq!(ArrowOptions::default().with_decode_budget(1 << 20).decode_budget, 1 << 20);
    /// ```
    pub fn with_decode_budget(mut self, bytes: u64) -> Self {
        self.decode_budget = bytes.max(1);
        self
    }
}

/// What a file writer does with a batch whose metadata differs from the first
/// batch's (an Arrow IPC or Parquet file stores one metadata map).
///
/// ```
/// assert_eq!(lodt::arrow::MetadataPolicy::default(), lodt::arrow::MetadataPolicy::Error);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MetadataPolicy {
    /// A differing batch is an [`ArrowError::MetadataMismatch`].
    #[default]
    Error,
    /// The file keeps the first batch's metadata; later batches' is dropped.
    KeepFirst,
}

/// The compression codec of a Parquet file's pages.
///
/// ```
/// use lodt::arrow::ParquetCompression;
/// assert_eq!(ParquetCompression::default(), ParquetCompression::Snappy); // as pyarrow writes
/// assert_eq!("zstd".parse::<ParquetCompression>()?, ParquetCompression::Zstd);
/// assert_eq!(ParquetCompression::Lz4.name(), "lz4");
/// assert!("gzip".parse::<ParquetCompression>().is_err());
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParquetCompression {
    /// Uncompressed pages.
    None,
    /// Snappy: fast, moderate ratio; pyarrow's default.
    #[default]
    Snappy,
    /// Zstandard (level 1): a better ratio at a similar speed.
    Zstd,
    /// LZ4 (the `LZ4_RAW` codec, which pyarrow reads and writes as `lz4`).
    Lz4,
}

impl ParquetCompression {
    /// Every codec, in the order of the variants.
    ///
    /// ```
    /// assert_eq!(lodt::arrow::ParquetCompression::ALL.len(), 4);
    /// ```
    pub const ALL: [ParquetCompression; 4] = [
        ParquetCompression::None,
        ParquetCompression::Snappy,
        ParquetCompression::Zstd,
        ParquetCompression::Lz4,
    ];

    /// The codec's name as the CLI and Python take it: `none`, `snappy`,
    /// `zstd`, `lz4`.
    ///
    /// ```
    /// assert_eq!(lodt::arrow::ParquetCompression::None.name(), "none");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ParquetCompression::None => "none",
            ParquetCompression::Snappy => "snappy",
            ParquetCompression::Zstd => "zstd",
            ParquetCompression::Lz4 => "lz4",
        }
    }
}

impl std::fmt::Display for ParquetCompression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ParquetCompression {
    type Err = ArrowError;

    /// A codec by [name](ParquetCompression::name), case-insensitive
    /// (`uncompressed` is `none`).
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        if lower == "uncompressed" {
            return Ok(ParquetCompression::None);
        }
        ParquetCompression::ALL
            .into_iter()
            .find(|c| c.name() == lower)
            .ok_or_else(|| {
                ArrowError::InvalidArgument(format!(
                    "unknown compression {s:?}: expected none, snappy, zstd or lz4"
                ))
            })
    }
}

/// The old name of [`ParquetCompression`], which collided with
/// [`format::Compression`](crate::format::Compression) (the codec of a
/// `.lodt` file's buffers).
///
/// ```
/// #![allow(deprecated)]
/// assert_eq!(lodt::arrow::Compression::Zstd, lodt::arrow::ParquetCompression::Zstd);
/// ```
#[deprecated(note = "renamed ParquetCompression (format::Compression is the .lodt buffer codec)")]
pub type Compression = ParquetCompression;

/// Options of the IPC and Parquet file writers.
///
/// ```
/// use lodt::arrow::{ParquetCompression, MetadataPolicy, ArrowWriteOptions};
/// let o = ArrowWriteOptions::default().with_row_group_rows(1024).with_metadata_policy(MetadataPolicy::KeepFirst);
/// assert_eq!(o.row_group_rows, Some(1024));
/// assert_eq!(o.with_compression(ParquetCompression::Zstd).compression, Some(ParquetCompression::Zstd));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ArrowWriteOptions {
    /// How tensors become arrays.
    pub arrow: ArrowOptions,
    /// What to do with batches whose metadata differs from the first's.
    pub metadata: MetadataPolicy,
    /// Parquet only: `None` writes one row group per batch; `Some(n)` cuts row
    /// groups of `n` top-level rows regardless of batch boundaries.
    pub row_group_rows: Option<usize>,
    /// Parquet only: the page compression. `None` keeps the default:
    /// [`ParquetCompression::Snappy`] for [`ParquetWriter::try_new`](crate::arrow::parquet::ParquetWriter::try_new),
    /// the given properties' codec for `try_with_properties`. The IPC writers
    /// ignore it: they write uncompressed bodies (lodt's IPC reader refuses
    /// compressed ones; [`crate::convert`] refuses a codec for IPC output).
    pub compression: Option<ParquetCompression>,
}

impl ArrowWriteOptions {
    /// Sets [`ArrowWriteOptions::arrow`].
    ///
    /// ```
    /// use lodt::arrow::{ArrowOptions, ListType, ArrowWriteOptions};
    /// let o = ArrowWriteOptions::default().with_arrow(ArrowOptions::default().with_list_type(ListType::List));
    /// assert_eq!(o.arrow.list_type, ListType::List);
    /// ```
    pub fn with_arrow(mut self, arrow: ArrowOptions) -> Self {
        self.arrow = arrow;
        self
    }

    /// Sets [`ArrowWriteOptions::metadata`].
    ///
    /// ```
    /// use lodt::arrow::{MetadataPolicy, ArrowWriteOptions};
    /// let o = ArrowWriteOptions::default().with_metadata_policy(MetadataPolicy::KeepFirst);
    /// assert_eq!(o.metadata, MetadataPolicy::KeepFirst);
    /// ```
    pub fn with_metadata_policy(mut self, metadata: MetadataPolicy) -> Self {
        self.metadata = metadata;
        self
    }

    /// Sets [`ArrowWriteOptions::row_group_rows`] to `Some(rows)`.
    ///
    /// ```
    /// assert_eq!(lodt::arrow::ArrowWriteOptions::default().with_row_group_rows(8).row_group_rows, Some(8));
    /// ```
    pub fn with_row_group_rows(mut self, rows: usize) -> Self {
        self.row_group_rows = Some(rows);
        self
    }

    /// Sets [`ArrowWriteOptions::compression`] to `Some(compression)`.
    ///
    /// ```
    /// use lodt::arrow::{ArrowWriteOptions, ParquetCompression};
    /// assert_eq!(ArrowWriteOptions::default().with_compression(ParquetCompression::Lz4).compression, Some(ParquetCompression::Lz4));
    /// ```
    pub fn with_compression(mut self, compression: ParquetCompression) -> Self {
        self.compression = Some(compression);
        self
    }
}

/// A file writer that can only be created once the schema is known, that
/// is, on the first batch: pending (holding the sink), open, or closed.
/// Shared by the IPC file, IPC stream and Parquet writers.
pub(crate) enum LazyWriter<T, W> {
    /// No batch yet: the sink waits for the schema.
    Pending(W),
    /// Writing.
    Open(T),
    /// Finished, or failed while opening.
    Closed,
}

impl<T, W> LazyWriter<T, W> {
    /// The open writer, created from the sink by `create` on first use.
    /// `what` names the writer in the error after it is finished.
    pub(crate) fn open(
        &mut self,
        what: &'static str,
        create: impl FnOnce(W) -> Result<T>,
    ) -> Result<&mut T> {
        if let LazyWriter::Pending(_) = self
            && let LazyWriter::Pending(sink) = std::mem::replace(self, LazyWriter::Closed)
        {
            *self = LazyWriter::Open(create(sink)?);
        }
        match self {
            LazyWriter::Open(writer) => Ok(writer),
            _ => Err(ArrowError::InvalidArgument(format!("{what} is finished"))),
        }
    }

    /// Takes the open writer out, closing this one.
    pub(crate) fn take(&mut self, what: &'static str) -> Result<T> {
        match std::mem::replace(self, LazyWriter::Closed) {
            LazyWriter::Open(writer) => Ok(writer),
            _ => Err(ArrowError::InvalidArgument(format!("{what} is finished"))),
        }
    }
}

/// An Arrow [`Buffer`] as a tensor's storage: how [`from_arrow`] keeps Arrow's
/// values with no copy.
///
/// ```
/// use arrow_buffer::Buffer;
/// use lodt::{arrow::ArrowBytes, buffer::ByteStorage};
/// let b = ArrowBytes::new(Buffer::from_vec(vec![1u16, 2]));
/// assert_eq!(b.bytes(), &[1, 0, 2, 0]);
/// ```
#[derive(Clone, Debug)]
pub struct ArrowBytes(Buffer);

impl ArrowBytes {
    /// Wraps `buffer`.
    ///
    /// ```
    /// let b = lodt::arrow::ArrowBytes::new(arrow_buffer::Buffer::from_vec(vec![7u8]));
    /// assert_eq!(b.buffer().len(), 1);
    /// ```
    pub fn new(buffer: Buffer) -> Self {
        ArrowBytes(buffer)
    }

    /// The wrapped buffer.
    ///
    /// ```
    /// let b = lodt::arrow::ArrowBytes::new(arrow_buffer::Buffer::from_vec(vec![7u8]));
    /// assert_eq!(b.buffer().as_slice(), &[7]);
    /// ```
    pub fn buffer(&self) -> &Buffer {
        &self.0
    }
}

// SAFETY: an Arrow `Buffer` is immutable and reference-counted: its bytes
// stay where they are, unchanged, for as long as this clone of it lives.
unsafe impl ByteStorage for ArrowBytes {
    fn bytes(&self) -> &[u8] {
        self.0.as_slice()
    }
}
