//! The Arrow IPC and Parquet side of the
//! [`BatchReader`] / [`BatchWriter`] contract, built on the readers' and
//! writers' public API. (`ParquetReader`'s is in `parquet.rs`: its batch
//! count comes from the footer's row counts.)

use super::ArrowError;
use super::ipc::{IpcFileReader, IpcFileWriter, IpcStreamReader, IpcStreamWriter};
use crate::batch::{Batch, BatchReader, BatchWriter, WriteStats};
use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};

fn sorted<'a>(
    metadata: impl Iterator<Item = (&'a String, &'a String)>,
) -> BTreeMap<String, String> {
    metadata.map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The file's metadata is its schema's (which lodt's writers set to the
/// first batch's metadata); the batch count comes from the footer.
///
/// ```
/// use lodt::arrow::ipc::{write_ipc_file, IpcFileReader};
/// use lodt::batch::BatchReader;
/// let mut batch = lodt::Batch::new();
/// batch.metadata_mut().insert("split".into(), "train".into());
/// let (bytes, _) = write_ipc_file(Vec::new(), [Ok::<_, lodt::Error>(batch)], &Default::default())?;
/// let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &Default::default())?;
/// assert_eq!(BatchReader::metadata(&reader)["split"], "train");
/// assert_eq!(BatchReader::num_batches(&reader), Some(1)); // the inherent one gives 1
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
impl<R: Read + Seek> BatchReader for IpcFileReader<R> {
    type Error = ArrowError;

    fn metadata(&self) -> BTreeMap<String, String> {
        sorted(self.schema().metadata().iter())
    }

    fn num_batches(&self) -> Option<usize> {
        Some(IpcFileReader::num_batches(self))
    }
}

/// The stream's metadata is its schema's; the batch count is not known up
/// front.
///
/// ```
/// use lodt::arrow::ipc::{write_ipc_stream, IpcStreamReader};
/// use lodt::batch::BatchReader;
/// let (bytes, _) = write_ipc_stream(Vec::new(), [Ok::<_, lodt::Error>(lodt::Batch::new())], &Default::default())?;
/// let reader = IpcStreamReader::try_new(&bytes[..], &Default::default())?;
/// assert_eq!((reader.metadata().len(), reader.num_batches()), (0, None));
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
impl<R: Read> BatchReader for IpcStreamReader<R> {
    type Error = ArrowError;

    fn metadata(&self) -> BTreeMap<String, String> {
        sorted(self.schema().metadata().iter())
    }
}

/// See [`IpcFileWriter`]: `finish` writes the footer and returns the sink.
///
/// ```
/// use lodt::{arrow::ipc::IpcFileWriter, batch::BatchWriter};
/// let mut w = IpcFileWriter::new(Vec::new(), &Default::default());
/// BatchWriter::write(&mut w, &lodt::Batch::new())?;
/// assert!(BatchWriter::finish(&mut w)?.ends_with(b"ARROW1"));
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
impl<W: Write> BatchWriter for IpcFileWriter<W> {
    type Error = ArrowError;
    type Output = W;

    fn write(&mut self, batch: &Batch) -> Result<(), ArrowError> {
        IpcFileWriter::write(self, batch)
    }

    fn stats(&self) -> WriteStats {
        IpcFileWriter::stats(self)
    }

    fn finish(&mut self) -> Result<W, ArrowError> {
        IpcFileWriter::finish(self)
    }
}

/// See [`IpcStreamWriter`]: `finish` writes the end-of-stream marker and
/// returns the sink.
///
/// ```
/// use lodt::{arrow::ipc::IpcStreamWriter, batch::BatchWriter};
/// let mut w = IpcStreamWriter::new(Vec::new(), &Default::default());
/// assert!(!BatchWriter::finish(&mut w)?.is_empty());
/// assert!(BatchWriter::write(&mut w, &lodt::Batch::new()).is_err()); // finished
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
impl<W: Write> BatchWriter for IpcStreamWriter<W> {
    type Error = ArrowError;
    type Output = W;

    fn write(&mut self, batch: &Batch) -> Result<(), ArrowError> {
        IpcStreamWriter::write(self, batch)
    }

    fn stats(&self) -> WriteStats {
        IpcStreamWriter::stats(self)
    }

    fn finish(&mut self) -> Result<W, ArrowError> {
        IpcStreamWriter::finish(self)
    }
}

#[cfg(feature = "parquet")]
mod parquet_io {
    use super::*;
    use crate::arrow::parquet::ParquetWriter;

    /// See [`ParquetWriter`]: `finish` writes the footer and returns the sink.
    ///
    /// ```
    /// use lodt::{arrow::parquet::ParquetWriter, batch::BatchWriter};
    /// let mut w = ParquetWriter::try_new(Vec::new(), &Default::default())?;
    /// assert!(BatchWriter::finish(&mut w)?.ends_with(b"PAR1"));
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    impl<W: Write + Send> BatchWriter for ParquetWriter<W> {
        type Error = ArrowError;
        type Output = W;

        fn write(&mut self, batch: &Batch) -> Result<(), ArrowError> {
            ParquetWriter::write(self, batch)
        }

        fn stats(&self) -> WriteStats {
            ParquetWriter::stats(self)
        }

        fn finish(&mut self) -> Result<W, ArrowError> {
            ParquetWriter::finish(self)
        }
    }
}
