//! Arrow IPC files (`.arrow`, random access, with a footer) and streams
//! (`.arrows`) of mini-batches: writers take one [`Batch`] at a time, readers
//! are iterators of batches, so memory stays bounded by one batch.
//!
//! A file has one schema, taken from the first batch: later batches must have
//! the same tensors with the same dtypes, element shapes and number of LoD
//! levels ([`ArrowError::SchemaMismatch`](super::ArrowError::SchemaMismatch)
//! otherwise). The first batch's metadata becomes the schema metadata (and,
//! for files, the footer's custom metadata); see
//! [`MetadataPolicy`](super::MetadataPolicy) for later batches.
//!
//! ```
//! use lodt::{arrow::ipc::{IpcFileReader, IpcFileWriter}, arrow::ArrowWriteOptions, Batch, Lod, LodTensor};
//! let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
//! let batch = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1i64, 2, 3], vec![3], lod)?)])?;
//! let mut writer = IpcFileWriter::new(Vec::new(), &ArrowWriteOptions::default());
//! writer.write(&batch)?;
//! writer.write(&batch)?;
//! let bytes = writer.finish()?;
//! let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &Default::default())?;
//! let batches = reader.collect::<Result<Vec<_>, _>>()?;
//! assert_eq!(batches, vec![batch.clone(), batch]);
//! # Ok::<(), lodt::arrow::ArrowError>(())
//! ```

use super::batch::{BatchEncoder, record_batch_to_batch};
use super::{ArrowOptions, ArrowWriteOptions, Error, LazyWriter, Result};
use crate::batch::{Batch, WriteStats, write_all};
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_ipc::writer::{FileWriter, StreamWriter};
use arrow_schema::{Schema, SchemaRef};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

fn unwrap_buffer<W: Write>(writer: BufWriter<W>) -> Result<W> {
    writer.into_inner().map_err(|e| Error::Io(e.into_error()))
}

/// Writes batches to an Arrow IPC file (`.arrow`). See the [module docs](self).
///
/// ```
/// use lodt::{arrow::{ipc::IpcFileWriter, ArrowWriteOptions}, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![1.5f32], vec![1], Default::default())?)])?;
/// let mut writer = IpcFileWriter::new(Vec::new(), &ArrowWriteOptions::default());
/// writer.write(&batch)?;
/// let bytes = writer.finish()?;
/// assert_eq!(&bytes[..6], b"ARROW1");
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub struct IpcFileWriter<W: Write> {
    state: LazyWriter<FileWriter<BufWriter<W>>, W>,
    encoder: BatchEncoder,
}

impl<W: Write> IpcFileWriter<W> {
    /// A writer to `writer` (buffered internally).
    ///
    /// See the [type-level example](IpcFileWriter).
    pub fn new(writer: W, options: &ArrowWriteOptions) -> Self {
        IpcFileWriter {
            state: LazyWriter::Pending(writer),
            encoder: BatchEncoder::new(*options),
        }
    }

    fn open(&mut self, schema: &Schema) -> Result<&mut FileWriter<BufWriter<W>>> {
        self.state.open("the IPC file writer", |sink| {
            Ok(FileWriter::try_new(BufWriter::new(sink), schema)?)
        })
    }

    /// Writes one batch.
    ///
    /// See the [type-level example](IpcFileWriter).
    pub fn write(&mut self, batch: &Batch) -> Result<()> {
        let record_batch = self.encoder.encode(batch)?;
        self.open(&record_batch.schema())?.write(&record_batch)?;
        Ok(())
    }

    /// What was written so far.
    ///
    /// ```
    /// let w = lodt::arrow::ipc::IpcFileWriter::new(Vec::new(), &Default::default());
    /// assert_eq!(w.stats().batches, 0);
    /// ```
    pub fn stats(&self) -> WriteStats {
        self.encoder.stats()
    }

    /// Writes the footer (with the file's metadata) and returns the writer.
    /// A file with no batch has an empty schema. The writer is spent: another
    /// `write` or `finish` is an error.
    ///
    /// See the [type-level example](IpcFileWriter).
    pub fn finish(&mut self) -> Result<W> {
        let schema = self.encoder.schema();
        let metadata = self.encoder.metadata().clone();
        let writer = self.open(&schema)?;
        for (key, value) in metadata {
            writer.write_metadata(key, value);
        }
        unwrap_buffer(self.state.take("the IPC file writer")?.into_inner()?)
    }
}

/// Writes batches to an Arrow IPC stream (`.arrows`). See the [module docs](self).
///
/// ```
/// use lodt::{arrow::{ipc::{IpcStreamReader, IpcStreamWriter}, ArrowWriteOptions}, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![7u8, 8], vec![2], Default::default())?)])?;
/// let mut writer = IpcStreamWriter::new(Vec::new(), &ArrowWriteOptions::default());
/// writer.write(&batch)?;
/// let bytes = writer.finish()?;
/// let back: Vec<_> = IpcStreamReader::try_new(&bytes[..], &Default::default())?.collect::<Result<_, _>>()?;
/// assert_eq!(back, vec![batch]);
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub struct IpcStreamWriter<W: Write> {
    state: LazyWriter<StreamWriter<BufWriter<W>>, W>,
    encoder: BatchEncoder,
}

impl<W: Write> IpcStreamWriter<W> {
    /// A writer to `writer` (buffered internally).
    ///
    /// See the [type-level example](IpcStreamWriter).
    pub fn new(writer: W, options: &ArrowWriteOptions) -> Self {
        IpcStreamWriter {
            state: LazyWriter::Pending(writer),
            encoder: BatchEncoder::new(*options),
        }
    }

    fn open(&mut self, schema: &Schema) -> Result<&mut StreamWriter<BufWriter<W>>> {
        self.state.open("the IPC stream writer", |sink| {
            Ok(StreamWriter::try_new(BufWriter::new(sink), schema)?)
        })
    }

    /// Writes one batch (it is flushed to the underlying writer).
    ///
    /// See the [type-level example](IpcStreamWriter).
    pub fn write(&mut self, batch: &Batch) -> Result<()> {
        let record_batch = self.encoder.encode(batch)?;
        let writer = self.open(&record_batch.schema())?;
        writer.write(&record_batch)?;
        writer.flush()?;
        Ok(())
    }

    /// What was written so far.
    ///
    /// ```
    /// let w = lodt::arrow::ipc::IpcStreamWriter::new(Vec::new(), &Default::default());
    /// assert_eq!(w.stats().rows, 0);
    /// ```
    pub fn stats(&self) -> WriteStats {
        self.encoder.stats()
    }

    /// Writes the end-of-stream marker and returns the writer. A stream with
    /// no batch has an empty schema. The writer is spent: another `write` or
    /// `finish` is an error.
    ///
    /// See the [type-level example](IpcStreamWriter).
    pub fn finish(&mut self) -> Result<W> {
        let schema = self.encoder.schema();
        self.open(&schema)?;
        unwrap_buffer(self.state.take("the IPC stream writer")?.into_inner()?)
    }
}

/// Writes every batch of `batches` to an Arrow IPC file and returns the writer
/// and what was written. Stops at the first error (of the source or of the
/// writer); memory stays bounded by one batch.
///
/// ```
/// use lodt::{arrow::{ipc::write_ipc_file, ArrowWriteOptions}, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![1i32], vec![1], Default::default())?)])?;
/// let batches = vec![Ok::<_, lodt::Error>(batch.clone()), Ok(batch)];
/// let (bytes, stats) = write_ipc_file(Vec::new(), batches, &ArrowWriteOptions::default())?;
/// assert_eq!((stats.batches, stats.rows), (2, 2));
/// assert!(bytes.ends_with(b"ARROW1"));
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn write_ipc_file<W, I, E>(
    writer: W,
    batches: I,
    options: &ArrowWriteOptions,
) -> Result<(W, WriteStats)>
where
    W: Write,
    I: IntoIterator<Item = std::result::Result<Batch, E>>,
    Error: From<E>,
{
    write_all(IpcFileWriter::new(writer, options), batches)
}

/// Writes every batch of `batches` to an Arrow IPC stream and returns the
/// writer and what was written (see [`write_ipc_file`]).
///
/// ```
/// use lodt::{arrow::{ipc::write_ipc_stream, ArrowWriteOptions}, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![1i32], vec![1], Default::default())?)])?;
/// let (_, stats) = write_ipc_stream(Vec::new(), [Ok::<_, lodt::Error>(batch)], &ArrowWriteOptions::default())?;
/// assert_eq!(stats.batches, 1);
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn write_ipc_stream<W, I, E>(
    writer: W,
    batches: I,
    options: &ArrowWriteOptions,
) -> Result<(W, WriteStats)>
where
    W: Write,
    I: IntoIterator<Item = std::result::Result<Batch, E>>,
    Error: From<E>,
{
    write_all(IpcStreamWriter::new(writer, options), batches)
}

/// Merges file-level metadata into a batch's (the schema's keys win).
fn with_file_metadata(mut batch: Batch, file: &HashMap<String, String>) -> Batch {
    for (key, value) in file {
        batch
            .metadata_mut()
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
    batch
}

/// Reads the batches of an Arrow IPC file, one at a time. Each batch's
/// metadata is the schema's metadata plus the footer's custom metadata.
///
/// ```
/// use lodt::{arrow::{ipc::{write_ipc_file, IpcFileReader}, ArrowWriteOptions}, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![true, false], vec![2], Default::default())?)])?;
/// let (bytes, _) = write_ipc_file(Vec::new(), [Ok::<_, lodt::Error>(batch.clone())], &ArrowWriteOptions::default())?;
/// let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &Default::default())?;
/// assert_eq!(reader.num_batches(), 1);
/// assert_eq!(reader.collect::<Result<Vec<_>, _>>()?, vec![batch]);
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub struct IpcFileReader<R: Read + Seek> {
    inner: FileReader<BufReader<R>>,
    options: ArrowOptions,
    metadata: HashMap<String, String>,
}

/// Checks that every block of an IPC file's footer lies inside the file, so
/// that reading a block allocates no more than the file holds (and arrow-ipc,
/// which trusts these lengths, never sees a negative one).
fn check_footer<R: Read + Seek>(reader: &mut R) -> Result<()> {
    let len = reader.seek(SeekFrom::End(0))?;
    if len < 10 {
        return Err(Error::Corrupt(format!(
            "an Arrow IPC file of {len} bytes is too short for its trailer"
        )));
    }
    reader.seek(SeekFrom::End(-10))?;
    let mut trailer = [0u8; 10];
    reader.read_exact(&mut trailer)?;
    let footer_len = arrow_ipc::reader::read_footer_length(trailer)? as u64;
    if footer_len + 10 > len {
        return Err(Error::Corrupt(format!(
            "the Arrow IPC footer of {footer_len} bytes does not fit in the {len}-byte file"
        )));
    }
    reader.seek(SeekFrom::End(-10 - footer_len as i64))?;
    let mut footer = vec![0u8; footer_len as usize];
    reader.read_exact(&mut footer)?;
    let footer = arrow_ipc::root_as_footer(&footer)
        .map_err(|e| Error::Corrupt(format!("unreadable Arrow IPC footer: {e}")))?;
    let blocks = footer
        .recordBatches()
        .into_iter()
        .flatten()
        .chain(footer.dictionaries().into_iter().flatten());
    for (i, block) in blocks.enumerate() {
        let (offset, meta, body) = (block.offset(), block.metaDataLength(), block.bodyLength());
        let end = i128::from(offset) + i128::from(meta) + i128::from(body);
        if offset < 0 || meta < 0 || body < 0 || end > i128::from(len) {
            return Err(Error::Corrupt(format!(
                "Arrow IPC block {i} (offset {offset}, {meta} metadata bytes, {body} body bytes) lies outside the {len}-byte file"
            )));
        }
    }
    reader.seek(SeekFrom::Start(0))?;
    Ok(())
}

impl<R: Read + Seek> IpcFileReader<R> {
    /// Opens a file (reads its footer, and checks that every block it lists
    /// lies inside the file).
    ///
    /// See the [type-level example](IpcFileReader).
    pub fn try_new(mut reader: R, options: &ArrowOptions) -> Result<Self> {
        check_footer(&mut reader)?;
        let inner = FileReader::try_new_buffered(reader, None)?;
        let metadata = inner.custom_metadata().clone();
        Ok(IpcFileReader {
            inner,
            options: *options,
            metadata,
        })
    }

    /// The number of batches in the file.
    ///
    /// See the [type-level example](IpcFileReader).
    pub fn num_batches(&self) -> usize {
        self.inner.num_batches()
    }

    /// The file's Arrow schema.
    ///
    /// ```
    /// use lodt::arrow::ipc::{IpcFileReader, IpcFileWriter};
    /// let bytes = IpcFileWriter::new(Vec::new(), &Default::default()).finish()?;
    /// let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &Default::default())?;
    /// assert!(reader.schema().fields().is_empty());
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

impl<R: Read + Seek> Iterator for IpcFileReader<R> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        let record_batch = self.inner.next()?;
        Some(
            record_batch
                .map_err(Error::from)
                .and_then(|rb| record_batch_to_batch(&rb, &self.options))
                .map(|b| with_file_metadata(b, &self.metadata)),
        )
    }
}

/// Reads the batches of an Arrow IPC stream, one at a time. Each batch's
/// metadata is the schema's metadata.
///
/// ```
/// use lodt::{arrow::{ipc::{write_ipc_stream, IpcStreamReader}, ArrowWriteOptions}, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![1u64], vec![1], Default::default())?)])?;
/// let (bytes, _) = write_ipc_stream(Vec::new(), [Ok::<_, lodt::Error>(batch.clone())], &ArrowWriteOptions::default())?;
/// let reader = IpcStreamReader::try_new(&bytes[..], &Default::default())?;
/// assert_eq!(reader.collect::<Result<Vec<_>, _>>()?, vec![batch]);
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub struct IpcStreamReader<R: Read> {
    inner: StreamReader<BufReader<R>>,
    options: ArrowOptions,
}

impl<R: Read> IpcStreamReader<R> {
    /// Opens a stream (reads its schema message).
    ///
    /// See the [type-level example](IpcStreamReader).
    pub fn try_new(reader: R, options: &ArrowOptions) -> Result<Self> {
        Ok(IpcStreamReader {
            inner: StreamReader::try_new_buffered(reader, None)?,
            options: *options,
        })
    }

    /// The stream's Arrow schema.
    ///
    /// ```
    /// use lodt::arrow::ipc::{IpcStreamReader, IpcStreamWriter};
    /// let bytes = IpcStreamWriter::new(Vec::new(), &Default::default()).finish()?;
    /// let reader = IpcStreamReader::try_new(&bytes[..], &Default::default())?;
    /// assert!(reader.schema().fields().is_empty());
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

impl<R: Read> Iterator for IpcStreamReader<R> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        let record_batch = self.inner.next()?;
        Some(
            record_batch
                .map_err(Error::from)
                .and_then(|rb| record_batch_to_batch(&rb, &self.options)),
        )
    }
}
