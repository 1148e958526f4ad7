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
use super::foreign::{
    check_record_batch, check_schema, contain, decode_error, message_flatbuffer, parse_message,
};
use super::select::projection;
use super::{ArrowOptions, ArrowWriteOptions, Error, LazyWriter, Result};
use crate::batch::{Batch, WriteStats, write_all};
use arrow_array::RecordBatch;
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_ipc::Block;
use arrow_ipc::writer::{FileWriter, StreamWriter};
use arrow_schema::{Schema, SchemaRef};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

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
        for record_batch in self.encoder.encode(batch)? {
            self.open(&record_batch.schema())?.write(&record_batch)?;
        }
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
        for record_batch in self.encoder.encode(batch)? {
            let writer = self.open(&record_batch.schema())?;
            writer.write(&record_batch)?;
            writer.flush()?;
        }
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

/// The name a reader built with `try_new` gives its input in errors.
const DEFAULT_FILE_NAME: &str = "Arrow IPC file";
const DEFAULT_STREAM_NAME: &str = "Arrow IPC stream";

/// Reads the batches of an Arrow IPC file, one at a time. Each batch's
/// metadata is the schema's metadata plus the footer's custom metadata.
///
/// The file is untrusted: the footer, the schema and every record batch
/// message are checked before arrow-ipc decodes them, arrow-ipc validates the
/// arrays it builds, and a panic inside it is contained. Every such failure is
/// an [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) naming the file and section (`IPC footer`,
/// `IPC schema`, `record batch 3`); a column of a type lodt does not read is
/// an [`Error::Unsupported`] for each batch, found before decoding it.
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
    reader: R,
    name: String,
    schema: SchemaRef,
    blocks: Vec<Block>,
    next: usize,
    options: ArrowOptions,
    metadata: HashMap<String, String>,
    /// The selected columns ([`IpcFileReader::with_columns`]) and their schema.
    projection: Option<(Vec<usize>, SchemaRef)>,
}

/// What an IPC file's footer gives, checked.
struct Footer {
    schema: SchemaRef,
    blocks: Vec<Block>,
    metadata: HashMap<String, String>,
}

/// Reads an IPC file's footer and checks it: the trailer, the flatbuffer, the
/// schema, and that every block it lists lies inside the file, so that
/// reading a block allocates no more than the file holds.
fn read_footer<R: Read + Seek>(reader: &mut R, name: &str) -> Result<Footer> {
    const SECTION: &str = "IPC footer";
    let corrupt = |message: String| decode_error(name, SECTION, message);
    let len = reader.seek(SeekFrom::End(0))?;
    if len < 10 {
        return Err(corrupt(format!(
            "{len} bytes are too short for the trailer (a footer length and ARROW1)"
        )));
    }
    reader.seek(SeekFrom::End(-10))?;
    let mut trailer = [0u8; 10];
    reader.read_exact(&mut trailer)?;
    let (footer_len, magic) = trailer.split_at(4);
    if magic != b"ARROW1" {
        return Err(corrupt(format!(
            "expected the file to end with ARROW1, found {magic:?}"
        )));
    }
    let footer_len =
        i32::from_le_bytes([footer_len[0], footer_len[1], footer_len[2], footer_len[3]]);
    let footer_len = u64::try_from(footer_len)
        .ok()
        .filter(|n| n + 10 <= len)
        .ok_or_else(|| {
            corrupt(format!(
                "the footer of {footer_len} bytes does not fit in the {len}-byte file"
            ))
        })?;
    reader.seek(SeekFrom::Start(len - 10 - footer_len))?;
    let mut bytes = vec![0u8; footer_len as usize];
    reader.read_exact(&mut bytes)?;
    let footer = arrow_ipc::root_as_footer(&bytes)
        .map_err(|e| corrupt(format!("unreadable footer: {e}")))?;
    let ipc_schema = footer
        .schema()
        .ok_or_else(|| corrupt("the footer has no schema".into()))?;
    let schema = decode_schema(name, ipc_schema)?;
    let blocks: Vec<Block> = footer
        .recordBatches()
        .ok_or_else(|| corrupt("the footer has no record batch list".into()))?
        .iter()
        .copied()
        .collect();
    let dictionaries = footer.dictionaries().into_iter().flatten();
    for (i, block) in blocks.iter().chain(dictionaries).enumerate() {
        let (offset, meta, body) = (block.offset(), block.metaDataLength(), block.bodyLength());
        let end = i128::from(offset) + i128::from(meta) + i128::from(body);
        if offset < 0 || meta < 0 || body < 0 || end > i128::from(len) {
            return Err(corrupt(format!(
                "block {i} (offset {offset}, {meta} metadata bytes, {body} body bytes) lies outside the {len}-byte file"
            )));
        }
    }
    let mut metadata = HashMap::new();
    for kv in footer.custom_metadata().into_iter().flatten() {
        let (Some(key), Some(value)) = (kv.key(), kv.value()) else {
            return Err(corrupt(
                "a custom metadata entry lacks its key or value".into(),
            ));
        };
        metadata.insert(key.to_owned(), value.to_owned());
    }
    Ok(Footer {
        schema,
        blocks,
        metadata,
    })
}

/// Converts an IPC schema (of a file footer or a stream's first message).
fn decode_schema(name: &str, ipc_schema: arrow_ipc::Schema<'_>) -> Result<SchemaRef> {
    const SECTION: &str = "IPC schema";
    if !ipc_schema.endianness().equals_to_target_endianness() {
        return Err(decode_error(
            name,
            SECTION,
            "the data is big-endian; lodt reads little-endian Arrow data",
        ));
    }
    let schema = contain(
        "arrow-ipc",
        name,
        || SECTION.into(),
        || {
            arrow_ipc::convert::try_fb_to_schema(ipc_schema)
                .map_err(|e| decode_error(name, SECTION, format!("arrow-ipc: {e}")))
        },
    )?;
    Ok(Arc::new(schema))
}

/// Decodes one record batch message (its encapsulated metadata and its body):
/// checks it against the schema and the body, then lets arrow-ipc build the
/// (validated) arrays, inside the boundary.
fn decode_record_batch(
    name: &str,
    section: &str,
    metadata: &[u8],
    body: &Buffer,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let corrupt = |message: String| decode_error(name, section, message);
    let message = parse_message(message_flatbuffer(metadata).map_err(corrupt)?).map_err(corrupt)?;
    let batch = message.header_as_record_batch().ok_or_else(|| {
        corrupt(format!(
            "expected a record batch message, found {:?}",
            message.header_type()
        ))
    })?;
    check_record_batch(&batch, body.len(), schema).map_err(corrupt)?;
    contain(
        "arrow-ipc",
        name,
        || section.to_owned(),
        || {
            arrow_ipc::reader::read_record_batch(
                body,
                batch,
                schema.clone(),
                &HashMap::new(),
                None,
                &message.version(),
            )
            .map_err(|e| decode_error(name, section, format!("arrow-ipc: {e}")))
        },
    )
}

impl<R: Read + Seek> IpcFileReader<R> {
    /// Opens a file (reads its footer and schema, and checks that every block
    /// the footer lists lies inside the file). Errors name the input
    /// `Arrow IPC file`; see [`IpcFileReader::try_new_named`].
    ///
    /// See the [type-level example](IpcFileReader).
    pub fn try_new(reader: R, options: &ArrowOptions) -> Result<Self> {
        Self::try_new_named(reader, DEFAULT_FILE_NAME, options)
    }

    /// Like [`IpcFileReader::try_new`], with the name errors give the file
    /// (its path, usually).
    ///
    /// ```
    /// use lodt::arrow::{ipc::IpcFileReader, ArrowError};
    /// let bytes = b"ARROW1\0\0not an Arrow file".to_vec();
    /// let err = IpcFileReader::try_new_named(std::io::Cursor::new(bytes), "in.arrow", &Default::default()).err().unwrap();
    /// assert!(err.to_string().starts_with("in.arrow: IPC footer: "), "{err}");
    /// ```
    pub fn try_new_named(
        mut reader: R,
        name: impl Into<String>,
        options: &ArrowOptions,
    ) -> Result<Self> {
        let name = name.into();
        let footer = read_footer(&mut reader, &name)?;
        Ok(IpcFileReader {
            reader,
            name,
            schema: footer.schema,
            blocks: footer.blocks,
            next: 0,
            options: *options,
            metadata: footer.metadata,
            projection: None,
        })
    }

    /// Reads only `columns`, in that order: the other columns are neither
    /// checked nor converted (a file with a `string` column reads with the
    /// others selected). A name the file lacks is an
    /// [`ArrowError::NoSuchColumn`](crate::arrow::ArrowError::NoSuchColumn).
    ///
    /// ```
    /// use lodt::{arrow::ipc::{write_ipc_file, IpcFileReader}, Batch, LodTensor};
    /// let t = |v: u8| LodTensor::from_vec(vec![v], vec![1], Default::default());
    /// let batch = Batch::try_from_tensors([("a", t(1)?), ("b", t(2)?), ("c", t(3)?)])?;
    /// let (bytes, _) = write_ipc_file(Vec::new(), [Ok::<_, lodt::Error>(batch)], &Default::default())?;
    /// let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &Default::default())?.with_columns(&["c", "a"])?;
    /// let batch = reader.into_iter().next().unwrap()?;
    /// assert_eq!(batch.names().collect::<Vec<_>>(), ["c", "a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_columns<S: AsRef<str>>(mut self, columns: &[S]) -> Result<Self> {
        self.projection = Some(projection(&self.schema, columns)?);
        Ok(self)
    }

    /// The number of batches in the file.
    ///
    /// See the [type-level example](IpcFileReader).
    pub fn num_batches(&self) -> usize {
        self.blocks.len()
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
        self.schema.clone()
    }

    /// Reads record batch `index` (its block was checked to lie inside the file).
    fn read_batch(&mut self, index: usize, block: Block) -> Result<Batch> {
        check_schema(self.projection.as_ref().map_or(&self.schema, |(_, s)| s))?;
        let section = format!("record batch {index}");
        let corrupt = |message: String| decode_error(&self.name, &section, message);
        let meta_len =
            usize::try_from(block.metaDataLength()).map_err(|e| corrupt(e.to_string()))?;
        let body_len = usize::try_from(block.bodyLength()).map_err(|e| corrupt(e.to_string()))?;
        let offset = u64::try_from(block.offset()).map_err(|e| corrupt(e.to_string()))?;
        let total = meta_len
            .checked_add(body_len)
            .ok_or_else(|| corrupt("the block's size overflows".into()))?;
        let mut bytes = MutableBuffer::try_from_len_zeroed(total)
            .map_err(|e| corrupt(format!("cannot allocate the {total}-byte block: {e}")))?;
        self.reader.seek(SeekFrom::Start(offset))?;
        self.reader.read_exact(bytes.as_slice_mut())?;
        let bytes = Buffer::from(bytes);
        let body = bytes.slice(meta_len);
        let record_batch = decode_record_batch(
            &self.name,
            &section,
            &bytes.as_slice()[..meta_len],
            &body,
            &self.schema,
        )?;
        let record_batch = match &self.projection {
            Some((indices, _)) => record_batch.project(indices)?,
            None => record_batch,
        };
        let batch = record_batch_to_batch(&record_batch, &self.options)?;
        Ok(with_file_metadata(batch, &self.metadata))
    }
}

impl<R: Read + Seek> Iterator for IpcFileReader<R> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        let index = self.next;
        let block = *self.blocks.get(index)?;
        self.next += 1;
        Some(self.read_batch(index, block))
    }
}

/// Reads the batches of an Arrow IPC stream, one at a time. Each batch's
/// metadata is the schema's metadata.
///
/// The stream is untrusted, and checked as [`IpcFileReader`] checks a file;
/// in addition, no allocation is sized by a length the stream gives before
/// that many bytes have arrived. After an error that breaks the framing (a
/// message cut short or unreadable, an I/O error) the iterator ends.
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
    reader: BufReader<R>,
    name: String,
    schema: SchemaRef,
    options: ArrowOptions,
    /// The selected columns ([`IpcStreamReader::with_columns`]) and their schema.
    projection: Option<(Vec<usize>, SchemaRef)>,
    messages: usize,
    done: bool,
}

/// Reads into `buf` until it is full or the input ends; returns the bytes read.
fn read_full<R: Read>(reader: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads `len` bytes into a buffer that grows as they arrive (at most 1 MiB
/// ahead of them), so a hostile length allocates nothing it does not get.
/// `None` when the input ends first.
fn read_growing<R: Read>(reader: &mut R, len: u64) -> std::io::Result<Option<MutableBuffer>> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = MutableBuffer::new(0);
    let mut remaining = len;
    while remaining > 0 {
        let chunk = remaining.min(CHUNK) as usize;
        let start = buf.len();
        buf.resize(start + chunk, 0);
        if read_full(reader, &mut buf.as_slice_mut()[start..])? < chunk {
            return Ok(None);
        }
        remaining -= chunk as u64;
    }
    Ok(Some(buf))
}

/// Reads one encapsulated message of a stream: its metadata (with the
/// length prefix, as [`message_flatbuffer`] expects) and its body. `None` at
/// the end of the stream (an end marker, or the end of the input).
fn read_stream_message<R: Read>(
    reader: &mut R,
    name: &str,
    section: &str,
) -> Result<Option<(Vec<u8>, Buffer)>> {
    let corrupt = |message: String| decode_error(name, section, message);
    let mut word = [0u8; 4];
    match read_full(reader, &mut word)? {
        0 => return Ok(None),
        4 => {}
        n => {
            return Err(corrupt(format!(
                "the stream ends {n} bytes into a message length"
            )));
        }
    }
    let mut prefix = word.to_vec();
    if word == [0xFF; 4] {
        if read_full(reader, &mut word)? < 4 {
            return Err(corrupt("the stream ends inside a message length".into()));
        }
        prefix.extend_from_slice(&word);
    }
    let len = i32::from_le_bytes(word);
    if len == 0 {
        return Ok(None);
    }
    let len = u64::try_from(len).map_err(|_| corrupt(format!("negative message length {len}")))?;
    let flatbuffer = read_growing(reader, len)?.ok_or_else(|| {
        corrupt(format!(
            "the stream ends inside a message of {len} metadata bytes"
        ))
    })?;
    let body_len = parse_message(flatbuffer.as_slice())
        .map_err(corrupt)?
        .bodyLength();
    let body_len =
        u64::try_from(body_len).map_err(|_| corrupt(format!("negative body length {body_len}")))?;
    let body = read_growing(reader, body_len)?
        .ok_or_else(|| corrupt(format!("the stream ends inside a body of {body_len} bytes")))?;
    prefix.extend_from_slice(flatbuffer.as_slice());
    Ok(Some((prefix, body.into())))
}

impl<R: Read> IpcStreamReader<R> {
    /// Opens a stream (reads its schema message). Errors name the input
    /// `Arrow IPC stream`; see [`IpcStreamReader::try_new_named`].
    ///
    /// See the [type-level example](IpcStreamReader).
    pub fn try_new(reader: R, options: &ArrowOptions) -> Result<Self> {
        Self::try_new_named(reader, DEFAULT_STREAM_NAME, options)
    }

    /// Like [`IpcStreamReader::try_new`], with the name errors give the
    /// stream (its path, usually).
    ///
    /// ```
    /// use lodt::arrow::ipc::IpcStreamReader;
    /// let err = IpcStreamReader::try_new_named(&[0xFFu8, 0xFF, 0xFF, 0xFF, 9][..], "in.arrows", &Default::default()).err().unwrap();
    /// assert!(err.to_string().starts_with("in.arrows: IPC schema: "), "{err}");
    /// ```
    pub fn try_new_named(
        reader: R,
        name: impl Into<String>,
        options: &ArrowOptions,
    ) -> Result<Self> {
        const SECTION: &str = "IPC schema";
        let name = name.into();
        let mut reader = BufReader::new(reader);
        let (metadata, _) = read_stream_message(&mut reader, &name, SECTION)?.ok_or_else(|| {
            decode_error(
                &name,
                SECTION,
                "the stream is empty: expected a schema message",
            )
        })?;
        let corrupt = |message: String| decode_error(&name, SECTION, message);
        let message =
            parse_message(message_flatbuffer(&metadata).map_err(corrupt)?).map_err(corrupt)?;
        let ipc_schema = message.header_as_schema().ok_or_else(|| {
            corrupt(format!(
                "expected a schema message first, found {:?}",
                message.header_type()
            ))
        })?;
        let schema = decode_schema(&name, ipc_schema)?;
        Ok(IpcStreamReader {
            reader,
            name,
            schema,
            options: *options,
            projection: None,
            messages: 0,
            done: false,
        })
    }

    /// Reads only `columns`, in that order, as [`IpcFileReader::with_columns`] does.
    ///
    /// ```
    /// use lodt::{arrow::ipc::{write_ipc_stream, IpcStreamReader}, Batch, LodTensor};
    /// let t = |v: u8| LodTensor::from_vec(vec![v], vec![1], Default::default());
    /// let batch = Batch::try_from_tensors([("a", t(1)?), ("b", t(2)?)])?;
    /// let (bytes, _) = write_ipc_stream(Vec::new(), [Ok::<_, lodt::Error>(batch)], &Default::default())?;
    /// let mut reader = IpcStreamReader::try_new(&bytes[..], &Default::default())?.with_columns(&["b"])?;
    /// assert_eq!(reader.next().unwrap()?.names().collect::<Vec<_>>(), ["b"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_columns<S: AsRef<str>>(mut self, columns: &[S]) -> Result<Self> {
        self.projection = Some(projection(&self.schema, columns)?);
        Ok(self)
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
        self.schema.clone()
    }

    fn decode(&self, section: &str, metadata: &[u8], body: &Buffer) -> Result<Batch> {
        check_schema(self.projection.as_ref().map_or(&self.schema, |(_, s)| s))?;
        let record_batch = decode_record_batch(&self.name, section, metadata, body, &self.schema)?;
        let record_batch = match &self.projection {
            Some((indices, _)) => record_batch.project(indices)?,
            None => record_batch,
        };
        record_batch_to_batch(&record_batch, &self.options)
    }
}

impl<R: Read> Iterator for IpcStreamReader<R> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let section = format!("record batch {}", self.messages);
        self.messages += 1;
        match read_stream_message(&mut self.reader, &self.name, &section) {
            Ok(Some((metadata, body))) => Some(self.decode(&section, &metadata, &body)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
