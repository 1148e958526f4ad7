//! [`PaddleError`]: everything that can go wrong reading or writing Paddle's
//! binary LoDTensor format.

use super::desc::DescError;
use crate::DType;

/// An error reading or writing Paddle's binary LoDTensor format.
///
/// Offsets are byte positions in the whole stream (for a combined file, from
/// the start of the file), so a message is enough to find the bad bytes:
///
/// ```
/// use lodt::paddle::{read_tensor, PaddleError};
/// let err = read_tensor(&[1, 0, 0, 0]).unwrap_err();
/// assert!(matches!(err, PaddleError::Version { offset: 0, found: 1, .. }));
/// assert_eq!(err.to_string(), "unsupported LoDTensor version at offset 0: expected 0, found 1");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PaddleError {
    /// An error of the core LoD model (for example building a [`crate::Batch`]).
    #[error(transparent)]
    Core(#[from] crate::Error),
    /// An I/O error of the underlying reader or writer.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The input ends before a field is complete.
    #[error(
        "truncated Paddle stream: {field} at offset {offset} needs {needed} bytes, found {available}"
    )]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Where the field starts.
        offset: u64,
        /// How many bytes it needs.
        needed: u64,
        /// How many bytes were left (or could be read).
        available: u64,
    },
    /// A version field that is not 0 (the only version Paddle writes and reads).
    #[error("unsupported {field} at offset {offset}: expected 0, found {found}")]
    Version {
        /// `"LoDTensor version"` or `"Tensor version"`.
        field: &'static str,
        /// Where the field starts.
        offset: u64,
        /// The version found.
        found: u32,
    },
    /// A LoD level byte size that is not a whole number of `u64` offsets.
    #[error("LoD level {level} byte size at offset {offset} is not a multiple of 8: found {found}")]
    LevelByteSize {
        /// The level (0 is the top level).
        level: usize,
        /// Where the size field starts.
        offset: u64,
        /// The byte size found.
        found: u64,
    },
    /// A LoD level count above lodt's limit,
    /// [`MAX_LOD_LEVELS`](crate::lod::MAX_LOD_LEVELS) (64, as in `.lodt`
    /// files; Arrow IPC and Parquet files hold at most
    /// 32, `lodt::arrow::MAX_LOD_LEVELS`). Paddle sets no limit, but no
    /// Paddle program uses more than a few levels, and no other format lodt
    /// writes could hold such a tensor.
    ///
    /// ```
    /// use lodt::paddle::{read_tensor, PaddleError};
    /// let mut bytes = vec![0u8; 4];
    /// bytes.extend(100u64.to_le_bytes());
    /// bytes.extend(vec![0u8; 4096]);
    /// let err = read_tensor(&bytes).unwrap_err();
    /// assert!(matches!(err, PaddleError::TooManyLevels { offset: 4, found: 100, max: 64 }));
    /// ```
    #[error(
        "LoD level count at offset {offset}: {found} levels exceed lodt's limit of {max} (spec/PADDLE.md, section 3)"
    )]
    TooManyLevels {
        /// Where the level count starts.
        offset: u64,
        /// The level count found.
        found: u64,
        /// The limit.
        max: u64,
    },
    /// LoD offsets that break a `CheckLoD` rule (the core error says which).
    #[error("invalid LoD in the levels starting at offset {offset}: {source}")]
    Lod {
        /// Where the LoD level count starts.
        offset: u64,
        /// The rule broken.
        source: crate::Error,
    },
    /// A tensor whose LoD Paddle's `CheckLoD` would reject, so Paddle could
    /// not read it back: a level of zero sequences (`[0]`), which lodt allows
    /// only as the result of slicing an empty range.
    #[error("cannot write to Paddle's format, whose CheckLoD rejects this LoD: {source}")]
    LodNotWritable {
        /// The rule Paddle's `CheckLoD` applies.
        source: crate::Error,
    },
    /// A negative `TensorDesc` length.
    #[error("negative TensorDesc length at offset {offset}: expected >= 0, found {found}")]
    NegativeDescLength {
        /// Where the length field starts.
        offset: u64,
        /// The length found.
        found: i32,
    },
    /// A `TensorDesc` that is not a valid message.
    #[error("malformed TensorDesc at offset {offset}: {source}")]
    Desc {
        /// Where the message starts.
        offset: u64,
        /// What is wrong with it (with a position inside the message).
        source: DescError,
    },
    /// A `data_type` that is not a Paddle tensor data type.
    #[error(
        "unknown Paddle data type {found} in the TensorDesc at offset {offset}: expected one of BOOL=0, INT16=1, INT32=2, INT64=3, FP16=4, FP32=5, FP64=6, UINT8=20, INT8=21, BF16=22"
    )]
    UnknownDType {
        /// Where the `TensorDesc` starts.
        offset: u64,
        /// The enum value found.
        found: i64,
    },
    /// A complex tensor (`COMPLEX64`, `COMPLEX128`), which lodt cannot hold.
    #[error(
        "Paddle data type {found} in the TensorDesc at offset {offset} is not supported: lodt has no complex dtypes"
    )]
    ComplexDType {
        /// Where the `TensorDesc` starts.
        offset: u64,
        /// `"COMPLEX64"` or `"COMPLEX128"`.
        found: &'static str,
    },
    /// A negative dimension.
    #[error(
        "negative dimension in the TensorDesc at offset {offset}: dims[{index}] expected >= 0, found {found}"
    )]
    NegativeDim {
        /// Where the `TensorDesc` starts.
        offset: u64,
        /// Which dim.
        index: usize,
        /// The value found.
        found: i64,
    },
    /// Dims whose byte size (product × element size) overflows.
    #[error("dims {dims:?} of {dtype} in the TensorDesc at offset {offset}: byte size overflows")]
    DimsOverflow {
        /// Where the `TensorDesc` starts.
        offset: u64,
        /// The element type.
        dtype: DType,
        /// The dims found.
        dims: Vec<i64>,
    },
    /// A tensor whose dims and LoD (or bool bytes) disagree.
    #[error("tensor at offset {offset} is inconsistent: {source}")]
    Tensor {
        /// Where the record starts.
        offset: u64,
        /// What disagrees.
        source: crate::Error,
    },
    /// Bytes after the tensor where the input should end.
    #[error("unexpected bytes after the tensor at offset {offset}: expected end of input, found {}", match .count { Some(n) => format!("{n} more bytes"), None => "more bytes".to_string() })]
    TrailingBytes {
        /// Where the extra bytes start.
        offset: u64,
        /// How many there are, when known (not counted for `Read` sources).
        count: Option<u64>,
    },
    /// A lodt dtype with no Paddle data type (`uint16`, `uint32`, `uint64`).
    #[error(
        "{dtype} has no PaddlePaddle data type: Paddle tensors hold bool, int8, int16, int32, int64, uint8, float16, bfloat16, float32 or float64"
    )]
    UnsupportedDType {
        /// The dtype.
        dtype: DType,
    },
    /// A value too large for its field in the Paddle format.
    #[error("{what} does not fit the Paddle format: {found} exceeds {max}")]
    TooLarge {
        /// What is written.
        what: &'static str,
        /// The value.
        found: u64,
        /// The largest value the field holds.
        max: u64,
    },
    /// Names given for a combined file that do not match its tensor count.
    #[error("name count mismatch: the stream holds {tensors} tensors, {names} names given")]
    NameCount {
        /// The number of tensors in the stream.
        tensors: usize,
        /// The number of names given.
        names: usize,
    },
    /// An error in one tensor of a combined stream.
    #[error("tensor {index} of the combined stream: {source}")]
    InTensor {
        /// The tensor's position in the stream (0-based).
        index: usize,
        /// The error.
        source: Box<PaddleError>,
    },
    /// An error of a safe write (see [`crate::atomic`]): the file could not
    /// be created, written or renamed into place.
    #[error(transparent)]
    Atomic(#[from] crate::atomic::AtomicError),
    /// A second batch for a [`PaddleBatchWriter`](super::PaddleBatchWriter):
    /// a Paddle file holds one set of tensors.
    #[error(
        "a Paddle file holds one set of tensors: batch {batch} cannot be written after the first"
    )]
    TooManyBatches {
        /// The index of the refused batch (0 is the first).
        batch: u64,
    },
    /// A single-tensor file ([`PaddleFile::Tensor`](super::PaddleFile::Tensor))
    /// given a batch of some other number of tensors (or no batch at all).
    #[error(
        "a Paddle tensor file holds exactly one tensor, the batch has {found} ({names}); write a combined file instead"
    )]
    TensorCount {
        /// The number of tensors given.
        found: usize,
        /// Their names, escaped, comma-separated (capped at 32).
        names: String,
    },
    /// A write or `finish` after [`PaddleBatchWriter::finish`](super::PaddleBatchWriter::finish).
    #[error("the Paddle writer is finished")]
    Finished,
}

impl PaddleError {
    /// The innermost error: for [`PaddleError::InTensor`], the error inside it.
    ///
    /// ```
    /// use lodt::paddle::{read_combined, PaddleError};
    /// let err = read_combined(&[0, 0, 0, 0]).unwrap_err();
    /// assert!(matches!(err, PaddleError::InTensor { index: 0, .. }));
    /// assert!(matches!(err.root(), PaddleError::Truncated { field: "LoD level count", .. }));
    /// ```
    pub fn root(&self) -> &PaddleError {
        match self {
            PaddleError::InTensor { source, .. } => source.root(),
            other => other,
        }
    }
}
