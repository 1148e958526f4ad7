//! Paddle files as a [`BatchReader`] and a [`BatchWriter`]: a Paddle file
//! holds one unnamed set of tensors, so a reader yields one batch and a writer
//! takes one.

use super::{PaddleError, into_batch, read_combined_from, read_tensor_from, write_batch};
use crate::batch::{Batch, BatchReader, BatchWriter, WriteStats};
use crate::error::name_list;
use std::io::{Read, Write};
use std::path::Path;

/// Which of Paddle's files: one tensor, or a `save_combine` stream of many.
///
/// ```
/// use lodt::paddle::PaddleFile;
/// assert_ne!(PaddleFile::Tensor, PaddleFile::Combined);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaddleFile {
    /// One tensor, `SerializeToStream` (`.pdtensor`): bytes after it are an
    /// error, and a batch written to it must hold exactly one tensor.
    Tensor,
    /// Tensors back to back, `save_combine` (`.pdparams`, `.pdiparams`).
    Combined,
}

/// Reads a Paddle file as one batch: a [`BatchReader`] of one batch, with
/// random access. The tensors are named from `names`, in file order, or
/// `tensor0`, `tensor1`, … (see [`into_batch`](super::into_batch)).
///
/// ```
/// use lodt::batch::BatchReader;
/// use lodt::paddle::{PaddleBatchReader, PaddleFile};
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paddle/combined.pdparams");
/// let mut reader = PaddleBatchReader::open(path, PaddleFile::Combined, None)?;
/// assert_eq!(reader.num_batches(), Some(1));
/// assert_eq!(reader.read_batch(0).transpose()?.map(|b| b.len()), Some(8));
/// let batch = reader.next().transpose()?.unwrap();
/// assert_eq!(batch.get("tensor3").unwrap().shape(), &[5, 2]);
/// assert!(reader.next().is_none());
/// # Ok::<(), lodt::paddle::PaddleError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PaddleBatchReader {
    batch: Batch,
    done: bool,
}

impl PaddleBatchReader {
    /// Reads a whole Paddle file from `reader`, which must end with it.
    ///
    /// ```
    /// use lodt::{paddle::{self, PaddleBatchReader, PaddleFile}, LodTensor};
    /// let t = LodTensor::from_vec(vec![1f32, 2.0], vec![2], Default::default())?;
    /// let bytes = paddle::to_bytes(&t)?;
    /// let mut reader = PaddleBatchReader::try_new(&bytes[..], PaddleFile::Tensor, Some(&["w"]))?;
    /// assert_eq!(reader.next().transpose()?.unwrap().get("w"), Some(&t));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_new<R: Read>(
        reader: R,
        kind: PaddleFile,
        names: Option<&[&str]>,
    ) -> Result<Self, PaddleError> {
        let tensors = match kind {
            PaddleFile::Tensor => vec![read_tensor_from(reader)?],
            PaddleFile::Combined => read_combined_from(reader)?,
        };
        Ok(PaddleBatchReader {
            batch: into_batch(tensors, names)?,
            done: false,
        })
    }

    /// Reads the Paddle file at `path`.
    ///
    /// See the [type-level example](PaddleBatchReader).
    pub fn open(
        path: impl AsRef<Path>,
        kind: PaddleFile,
        names: Option<&[&str]>,
    ) -> Result<Self, PaddleError> {
        let batch = match kind {
            PaddleFile::Tensor => into_batch(vec![super::read_tensor_file(path)?], names)?,
            PaddleFile::Combined => super::read_batch_file(path, names)?,
        };
        Ok(PaddleBatchReader { batch, done: false })
    }
}

impl Iterator for PaddleBatchReader {
    type Item = Result<Batch, PaddleError>;

    fn next(&mut self) -> Option<Self::Item> {
        if std::mem::replace(&mut self.done, true) {
            return None;
        }
        Some(Ok(self.batch.clone()))
    }
}

impl BatchReader for PaddleBatchReader {
    type Error = PaddleError;

    fn num_batches(&self) -> Option<usize> {
        Some(1)
    }

    fn random_access(&self) -> bool {
        true
    }

    fn read_batch(&mut self, index: usize) -> Option<Result<Batch, PaddleError>> {
        Some(match index {
            0 => Ok(self.batch.clone()),
            _ => Err(PaddleError::Core(crate::Error::OutOfRange {
                what: "batch",
                index: index as u64,
                len: 1,
            })),
        })
    }
}

/// Writes one batch as a Paddle file, its tensors in the batch's order (the
/// names are not stored: the format has none): a [`BatchWriter`] that takes
/// one batch. A second batch is [`PaddleError::TooManyBatches`]; for
/// [`PaddleFile::Tensor`], a batch of other than one tensor (or none at all)
/// is [`PaddleError::TensorCount`]. A combined file of no batch is empty
/// (zero tensors).
///
/// ```
/// use lodt::paddle::{self, PaddleBatchWriter, PaddleFile};
/// use lodt::{Batch, LodTensor};
/// let t = LodTensor::from_vec(vec![1i64, 2], vec![2], Default::default())?;
/// let batch = Batch::try_from_tensors([("w", t.clone()), ("b", t)])?;
/// let mut writer = PaddleBatchWriter::new(Vec::new(), PaddleFile::Combined);
/// writer.write(&batch)?;
/// assert!(writer.write(&batch).is_err()); // one set of tensors per file
/// let bytes = writer.finish()?;
/// assert_eq!(bytes, paddle::batch_to_bytes(&batch)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct PaddleBatchWriter<W: Write> {
    sink: Option<W>,
    kind: PaddleFile,
    stats: WriteStats,
}

impl<W: Write> PaddleBatchWriter<W> {
    /// A writer of a `kind` file to `sink`.
    ///
    /// See the [type-level example](PaddleBatchWriter).
    pub fn new(sink: W, kind: PaddleFile) -> Self {
        PaddleBatchWriter {
            sink: Some(sink),
            kind,
            stats: WriteStats::default(),
        }
    }

    /// Writes the batch's tensors, in order; every dtype is checked before
    /// anything is written.
    ///
    /// See the [type-level example](PaddleBatchWriter).
    pub fn write(&mut self, batch: &Batch) -> Result<(), PaddleError> {
        let sink = self.sink.as_mut().ok_or(PaddleError::Finished)?;
        if self.stats.batches > 0 {
            return Err(PaddleError::TooManyBatches {
                batch: self.stats.batches,
            });
        }
        if self.kind == PaddleFile::Tensor && batch.len() != 1 {
            return Err(PaddleError::TensorCount {
                found: batch.len(),
                names: name_list(batch.names()),
            });
        }
        write_batch(batch, sink)?;
        self.stats.add(batch);
        Ok(())
    }

    /// What was written so far.
    ///
    /// ```
    /// use lodt::paddle::{PaddleBatchWriter, PaddleFile};
    /// assert_eq!(PaddleBatchWriter::new(Vec::new(), PaddleFile::Combined).stats().batches, 0);
    /// ```
    pub fn stats(&self) -> WriteStats {
        self.stats
    }

    /// Flushes and returns the sink. The writer is spent: another `write` or
    /// `finish` is [`PaddleError::Finished`].
    ///
    /// ```
    /// use lodt::paddle::{PaddleBatchWriter, PaddleError, PaddleFile};
    /// let mut empty = PaddleBatchWriter::new(Vec::new(), PaddleFile::Combined);
    /// assert!(empty.finish()?.is_empty()); // zero tensors
    /// assert!(matches!(empty.finish(), Err(PaddleError::Finished)));
    /// let mut none = PaddleBatchWriter::new(Vec::new(), PaddleFile::Tensor);
    /// assert!(matches!(none.finish(), Err(PaddleError::TensorCount { found: 0, .. })));
    /// # Ok::<(), PaddleError>(())
    /// ```
    pub fn finish(&mut self) -> Result<W, PaddleError> {
        if self.kind == PaddleFile::Tensor && self.stats.batches == 0 && self.sink.is_some() {
            return Err(PaddleError::TensorCount {
                found: 0,
                names: String::new(),
            });
        }
        let mut sink = self.sink.take().ok_or(PaddleError::Finished)?;
        sink.flush()?;
        Ok(sink)
    }
}

/// See [`PaddleBatchWriter`].
///
/// ```
/// use lodt::batch::{write_all, BatchWriter};
/// use lodt::paddle::{PaddleBatchWriter, PaddleFile};
/// let t = lodt::LodTensor::from_vec(vec![1u8], vec![1], Default::default())?;
/// let batch = lodt::Batch::try_from_tensors([("x", t)])?;
/// let writer = PaddleBatchWriter::new(Vec::new(), PaddleFile::Tensor);
/// let (bytes, stats) = write_all(writer, [Ok::<_, lodt::Error>(batch)])?;
/// assert_eq!((stats.tensors, bytes.is_empty()), (1, false));
/// # Ok::<(), lodt::paddle::PaddleError>(())
/// ```
impl<W: Write> BatchWriter for PaddleBatchWriter<W> {
    type Error = PaddleError;
    type Output = W;

    fn write(&mut self, batch: &Batch) -> Result<(), PaddleError> {
        PaddleBatchWriter::write(self, batch)
    }

    fn stats(&self) -> WriteStats {
        PaddleBatchWriter::stats(self)
    }

    fn finish(&mut self) -> Result<W, PaddleError> {
        PaddleBatchWriter::finish(self)
    }
}
