//! PaddlePaddle's own binary LoDTensor serialization, read and written exactly,
//! without Paddle.
//!
//! This is the format of Paddle's `SerializeToStream` / `TensorToStream`: what
//! the `save` op writes for one tensor (`core.save_lod_tensor`,
//! `paddle.save(..., use_binary_format=True)`), and, concatenated with no names
//! and no count, what the `save_combine` op writes for many (the `.pdiparams`
//! of inference models). The normative layout is in `spec/PADDLE.md`.
//!
//! ```text
//!  offset  size    field
//!  0       4       u32  LoDTensor version = 0
//!  4       8       u64  LoD level count L
//!          L x     u64  level byte size (8 x number of offsets)
//!                  u64  offsets ...
//!          4       u32  Tensor version = 0
//!          4       i32  TensorDesc length N
//!          N       TensorDesc (protobuf: data_type, dims)
//!          ...     data: numel x element size, little-endian, no length field
//! ```
//!
//! ```
//! use lodt::{paddle, Lod, LodTensor};
//! let lod = Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
//! let t = LodTensor::from_vec(vec![0f32, 1., 2., 3., 4.], vec![5, 1], lod)?;
//! let bytes = paddle::to_bytes(&t)?;
//! assert_eq!(bytes.len(), 78);
//! assert_eq!(paddle::read_tensor(&bytes)?, t);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Decisions where Paddle is silent or lenient:
//! - Input Paddle accepts but cannot use is rejected: an invalid LoD, dims whose
//!   byte size overflows, negative dims, data shorter than the dims claim, a
//!   level byte size that is not a multiple of 8, bool bytes other than 0 and 1,
//!   and (for single-tensor reads) bytes after the tensor.
//! - `COMPLEX64` / `COMPLEX128` tensors are rejected ([`PaddleError::ComplexDType`]);
//!   lodt's `uint16`/`uint32`/`uint64` cannot be written ([`PaddleError::UnsupportedDType`]).
//! - The `TensorDesc` decoder accepts packed and unpacked dims and skips
//!   unknown fields (see [`desc`]); the writer always writes what Paddle writes.
//! - Combined files are written in the order given. Paddle's savers sort the
//!   variables by name and its loaders pair tensors with names by position, so
//!   to write a file Paddle will load, give the tensors in that order.
//! - An empty combined stream is zero tensors.
//!
//! As one batch of tensors, a file is read by [`PaddleBatchReader`] and
//! written by [`PaddleBatchWriter`], lodt's
//! [`BatchReader`](crate::batch::BatchReader) and
//! [`BatchWriter`](crate::batch::BatchWriter) for Paddle files.

mod batch_io;
pub mod desc;
pub mod error;
mod reader;
mod writer;

pub use batch_io::{PaddleBatchReader, PaddleBatchWriter, PaddleFile};
pub use desc::{DescError, PaddleDType, TensorDesc};
pub use error::PaddleError;
pub use reader::PaddleReader;

use crate::atomic::{AtomicError, AtomicFile};
use crate::batch::Batch;
use crate::tensor::LodTensor;
use reader::{Input, open, read_all, read_single};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Reads one tensor that fills `bytes` exactly (a `.pdtensor`-style file).
///
/// ```
/// use lodt::{paddle, DType};
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/seed_1level_float32.pdtensor");
/// let t = paddle::read_tensor(&std::fs::read(path)?)?;
/// assert_eq!((t.dtype(), t.shape()), (DType::Float32, &[4, 1][..]));
/// assert_eq!(t.lod().to_lengths(), vec![vec![1, 3]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_tensor(bytes: &[u8]) -> Result<LodTensor, PaddleError> {
    read_single(Input::new(bytes, Some(bytes.len() as u64)))
}

/// Reads one tensor from `reader`, which must end right after it. Lengths are
/// checked as bytes arrive: a hostile length costs at most one 64 KiB chunk.
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let t = LodTensor::from_vec(vec![1i32, 2, 3], vec![3], Default::default())?;
/// let bytes = paddle::to_bytes(&t)?;
/// assert_eq!(paddle::read_tensor_from(std::io::Cursor::new(bytes))?, t);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_tensor_from<R: Read>(reader: R) -> Result<LodTensor, PaddleError> {
    read_single(Input::new(BufReader::new(reader), None))
}

/// Reads the one tensor of the file at `path`.
///
/// ```
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/bool_1level.pdtensor");
/// let t = lodt::paddle::read_tensor_file(path)?;
/// assert_eq!(t.as_slice::<bool>()?, &[true, false, false, true]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_tensor_file(path: impl AsRef<Path>) -> Result<LodTensor, PaddleError> {
    read_single(open(path.as_ref())?)
}

/// Reads every tensor of a combined stream (records back to back, as
/// `save_combine` writes), in order. A single-tensor file is a combined
/// stream of one tensor.
///
/// ```
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/combined.pdparams");
/// let tensors = lodt::paddle::read_combined(&std::fs::read(path)?)?;
/// assert_eq!(tensors.len(), 8);
/// assert_eq!(tensors[0].lod().to_string(), "{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_combined(bytes: &[u8]) -> Result<Vec<LodTensor>, PaddleError> {
    read_all(Input::new(bytes, Some(bytes.len() as u64)))
}

/// Reads every tensor of a combined stream from `reader` (see [`PaddleReader`]
/// to take them one at a time).
///
/// ```
/// let tensors = lodt::paddle::read_combined_from(std::io::empty())?;
/// assert!(tensors.is_empty());
/// # Ok::<(), lodt::paddle::PaddleError>(())
/// ```
pub fn read_combined_from<R: Read>(reader: R) -> Result<Vec<LodTensor>, PaddleError> {
    read_all(Input::new(BufReader::new(reader), None))
}

/// Reads every tensor of the combined file at `path`.
///
/// ```
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/combined.pdparams");
/// assert_eq!(lodt::paddle::read_combined_file(path)?.len(), 8);
/// # Ok::<(), lodt::paddle::PaddleError>(())
/// ```
pub fn read_combined_file(path: impl AsRef<Path>) -> Result<Vec<LodTensor>, PaddleError> {
    read_all(open(path.as_ref())?)
}

/// Names tensors read from a combined stream: `names` in stream order, or
/// `tensor0`, `tensor1`, ... without names. A name count that differs from
/// the tensor count is an error ([`PaddleError::NameCount`]), as are empty or
/// repeated names.
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let t = LodTensor::from_vec(vec![1u8], vec![1], Default::default())?;
/// let batch = paddle::into_batch(vec![t.clone(), t.clone()], None)?;
/// assert_eq!(batch.names().collect::<Vec<_>>(), ["tensor0", "tensor1"]);
/// let batch = paddle::into_batch(vec![t.clone()], Some(&["fc_0.w_0"]))?;
/// assert_eq!(batch.names().collect::<Vec<_>>(), ["fc_0.w_0"]);
/// assert!(paddle::into_batch(vec![t], Some(&["a", "b"])).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn into_batch(tensors: Vec<LodTensor>, names: Option<&[&str]>) -> Result<Batch, PaddleError> {
    let mut batch = Batch::new();
    match names {
        Some(names) => {
            if names.len() != tensors.len() {
                return Err(PaddleError::NameCount {
                    tensors: tensors.len(),
                    names: names.len(),
                });
            }
            for (name, tensor) in names.iter().zip(tensors) {
                batch.push(*name, tensor)?;
            }
        }
        None => {
            for (i, tensor) in tensors.into_iter().enumerate() {
                batch.push(format!("tensor{i}"), tensor)?;
            }
        }
    }
    Ok(batch)
}

/// Reads a combined stream into a [`Batch`], named as [`into_batch`] does.
///
/// ```
/// use lodt::paddle;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/combined.pdparams");
/// let batch = paddle::read_batch(&std::fs::read(path)?, None)?;
/// assert_eq!(batch.get("tensor3").unwrap().shape(), &[5, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_batch(bytes: &[u8], names: Option<&[&str]>) -> Result<Batch, PaddleError> {
    into_batch(read_combined(bytes)?, names)
}

/// Reads the combined file at `path` into a [`Batch`], named as [`into_batch`] does.
///
/// ```
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/seed_2level_int64.pdtensor");
/// let batch = lodt::paddle::read_batch_file(path, Some(&["words"]))?;
/// assert_eq!(batch.get("words").unwrap().lod().num_levels(), 2);
/// # Ok::<(), lodt::paddle::PaddleError>(())
/// ```
pub fn read_batch_file(
    path: impl AsRef<Path>,
    names: Option<&[&str]>,
) -> Result<Batch, PaddleError> {
    into_batch(read_combined_file(path)?, names)
}

/// Writes one tensor as Paddle does. Nothing is written when the dtype has
/// no Paddle data type. A slice of a larger tensor is written with its LoD
/// rebased, as Paddle would write a copy of it.
///
/// ```
/// use lodt::{paddle, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
/// let t = LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod)?;
/// let article = t.branch(&[2])?;
/// let mut out = Vec::new();
/// paddle::write_tensor(&article, &mut out)?;
/// assert_eq!(paddle::read_tensor(&out)?, article);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// ```
/// use lodt::{paddle, DType, LodTensor};
/// let t = LodTensor::from_vec(vec![2.5f64], vec![], Default::default())?; // 0-D
/// let mut out = Vec::new();
/// paddle::write_tensor(&t, &mut out)?;
/// assert_eq!(out.len(), 4 + 8 + 4 + 4 + 2 + 8);
/// let u = LodTensor::from_vec(vec![1u32], vec![1], Default::default())?;
/// assert!(paddle::write_tensor(&u, &mut out).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_tensor<W: Write + ?Sized>(
    tensor: &LodTensor,
    writer: &mut W,
) -> Result<(), PaddleError> {
    let header = writer::header(tensor)?;
    writer::write_record(&header, tensor, writer)
}

/// Writes tensors back to back, in the order given (a `save_combine` file).
/// Every dtype is checked before anything is written.
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let a = LodTensor::from_vec(vec![1f32], vec![1], Default::default())?;
/// let b = LodTensor::from_vec(vec![2i64, 3], vec![2], Default::default())?;
/// let mut out = Vec::new();
/// paddle::write_combined([&a, &b], &mut out)?;
/// assert_eq!(paddle::read_combined(&out)?, vec![a, b]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_combined<'a, W: Write + ?Sized>(
    tensors: impl IntoIterator<Item = &'a LodTensor>,
    writer: &mut W,
) -> Result<(), PaddleError> {
    let records = prepare(tensors)?;
    write_records(&records, writer)
}

/// Every record's header, computed (and every dtype checked) before any write.
fn prepare<'a>(
    tensors: impl IntoIterator<Item = &'a LodTensor>,
) -> Result<Vec<(Vec<u8>, &'a LodTensor)>, PaddleError> {
    tensors
        .into_iter()
        .map(|t| writer::header(t).map(|h| (h, t)))
        .collect()
}

fn write_records<W: Write + ?Sized>(
    records: &[(Vec<u8>, &LodTensor)],
    writer: &mut W,
) -> Result<(), PaddleError> {
    for (header, view) in records {
        writer::write_record(header, view, writer)?;
    }
    Ok(())
}

/// Writes a batch's tensors back to back, in the batch's order (names are
/// not stored: the format has none). Paddle's own savers sort by name; this
/// does not reorder.
///
/// ```
/// use lodt::{paddle, Batch, LodTensor};
/// let t = LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
/// let batch = Batch::try_from_tensors([("w", t.clone()), ("b", t)])?;
/// let mut out = Vec::new();
/// paddle::write_batch(&batch, &mut out)?;
/// assert_eq!(paddle::read_batch(&out, Some(&["w", "b"]))?, batch);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_batch<W: Write + ?Sized>(batch: &Batch, writer: &mut W) -> Result<(), PaddleError> {
    write_combined(batch.iter().map(|(_, t)| t), writer)
}

/// The bytes Paddle writes for one tensor.
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let t = LodTensor::from_vec(vec![true, false], vec![2], Default::default())?;
/// let bytes = paddle::to_bytes(&t)?;
/// assert_eq!(&bytes[bytes.len() - 2..], &[1, 0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_bytes(tensor: &LodTensor) -> Result<Vec<u8>, PaddleError> {
    let header = writer::header(tensor)?;
    let mut out = Vec::with_capacity(header.len() + tensor.as_bytes().len());
    out.extend_from_slice(&header);
    out.extend_from_slice(tensor.as_bytes());
    Ok(out)
}

/// The bytes of a combined stream of `tensors`, in order.
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let t = LodTensor::from_vec(vec![1u8], vec![1], Default::default())?;
/// let bytes = paddle::combined_to_bytes([&t, &t])?;
/// assert_eq!(bytes.len(), 2 * paddle::to_bytes(&t)?.len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn combined_to_bytes<'a>(
    tensors: impl IntoIterator<Item = &'a LodTensor>,
) -> Result<Vec<u8>, PaddleError> {
    let mut out = Vec::new();
    write_combined(tensors, &mut out)?;
    Ok(out)
}

/// The bytes of a combined stream of a batch's tensors, in the batch's order.
///
/// ```
/// use lodt::{paddle, Batch, LodTensor};
/// let t = LodTensor::from_vec(vec![1u8], vec![1], Default::default())?;
/// let batch = Batch::try_from_tensors([("x", t.clone())])?;
/// assert_eq!(paddle::batch_to_bytes(&batch)?, paddle::to_bytes(&t)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn batch_to_bytes(batch: &Batch) -> Result<Vec<u8>, PaddleError> {
    let mut out = Vec::new();
    write_batch(batch, &mut out)?;
    Ok(out)
}

/// Writes one tensor to a new file at `path` (replacing it atomically: see
/// [`AtomicFile`]; a failed write leaves what was there untouched).
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("x.pdtensor");
/// let t = LodTensor::from_vec(vec![1i16, -2], vec![2], Default::default())?;
/// paddle::write_tensor_file(&path, &t)?;
/// assert_eq!(paddle::read_tensor_file(&path)?, t);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_tensor_file(path: impl AsRef<Path>, tensor: &LodTensor) -> Result<(), PaddleError> {
    write_combined_file(path, [tensor])
}

/// Writes a batch's tensors, in the batch's order, to a new combined file at
/// `path` (replacing it atomically: see [`AtomicFile`]). Every dtype is
/// checked before the file is created.
///
/// ```
/// use lodt::{paddle, Batch, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("params.pdiparams");
/// let t = LodTensor::from_vec(vec![0.5f32; 4], vec![2, 2], Default::default())?;
/// let batch = Batch::try_from_tensors([("fc.b", t.clone()), ("fc.w", t)])?;
/// paddle::write_batch_file(&path, &batch)?;
/// assert_eq!(paddle::read_batch_file(&path, Some(&["fc.b", "fc.w"]))?, batch);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_batch_file(path: impl AsRef<Path>, batch: &Batch) -> Result<(), PaddleError> {
    write_combined_file(path, batch.iter().map(|(_, t)| t))
}

/// Writes tensors, in order, to a new combined file at `path` (replacing it
/// atomically: see [`AtomicFile`]). Every dtype is checked before the file is
/// created.
///
/// ```
/// use lodt::{paddle, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("params.pdiparams");
/// let t = LodTensor::from_vec(vec![7u8], vec![1], Default::default())?;
/// paddle::write_combined_file(&path, [&t, &t])?;
/// assert_eq!(paddle::read_combined_file(&path)?.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_combined_file<'a>(
    path: impl AsRef<Path>,
    tensors: impl IntoIterator<Item = &'a LodTensor>,
) -> Result<(), PaddleError> {
    let records = prepare(tensors)?;
    let mut file = BufWriter::new(AtomicFile::create(path)?);
    write_records(&records, &mut file)?;
    let file = file.into_inner().map_err(|e| {
        let (source, file) = e.into_parts();
        AtomicError::Io {
            action: "writing",
            path: file.get_ref().temp_path().to_path_buf(),
            source,
        }
    })?;
    file.commit()?;
    Ok(())
}
