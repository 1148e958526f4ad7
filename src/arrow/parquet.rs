//! Parquet files of mini-batches, through Arrow: a writer that takes one
//! [`Batch`] at a time (one row group per batch, or row groups of a fixed
//! number of top-level rows), and a reader that yields one batch per row group.
//!
//! The Arrow schema is stored in the file (`ARROW:schema`), so `LargeList`,
//! the `arrow.fixed_shape_tensor` extension and lodt's field metadata (bfloat16,
//! 0-D) survive a round trip. The first batch's metadata becomes the schema
//! metadata and the file's key/value metadata; see
//! [`MetadataPolicy`](super::MetadataPolicy) for later batches. A batch with
//! no rows writes nothing (Parquet has no empty row groups).
//!
//! ```
//! use lodt::{arrow::{parquet::{ParquetReader, ParquetWriter}, ArrowWriteOptions}, Batch, Lod, LodTensor};
//! let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
//! let batch = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1i64, 2, 3], vec![3], lod)?)])?;
//! let mut file = tempfile::tempfile()?;
//! let mut writer = ParquetWriter::try_new(file.try_clone()?, &ArrowWriteOptions::default())?;
//! writer.write(&batch)?;
//! writer.write(&batch)?;
//! writer.finish()?;
//! let reader = ParquetReader::try_new(file, &Default::default())?;
//! assert_eq!(reader.num_row_groups(), 2);
//! assert_eq!(reader.collect::<Result<Vec<_>, _>>()?, vec![batch.clone(), batch]);
//! # Ok::<(), lodt::arrow::ArrowError>(())
//! ```

use super::batch::{BatchEncoder, record_batch_to_batch};
use super::fixed_lists::{decode_schema, restore, with_type};
use super::foreign::{
    check_parquet_metadata, check_parquet_page_headers, check_parquet_schema_depth, check_schema,
    contain, decode_error, plain_bits,
};
use super::select::projection;
use super::{ArrowOptions, ArrowWriteOptions, Error, LazyWriter, ParquetCompression, Result};
use crate::batch::{Batch, WriteStats, write_all};
use ::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use ::parquet::arrow::{ArrowWriter, ProjectionMask};
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::WriterProperties;
use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use std::fs::File;
use std::io::Write;
use std::sync::Arc;

/// Writes batches to a Parquet file. See the [module docs](self).
pub struct ParquetWriter<W: Write + Send> {
    state: LazyWriter<Box<ArrowWriter<W>>, W>,
    encoder: BatchEncoder,
    properties: WriterProperties,
    per_batch: bool,
}

impl<W: Write + Send> ParquetWriter<W> {
    /// A writer with the Parquet crate's default properties and the
    /// compression of [`ArrowWriteOptions::compression`] (Snappy, as
    /// pyarrow, when it is `None`).
    ///
    /// ```
    /// use lodt::arrow::{parquet::ParquetWriter, ArrowWriteOptions};
    /// assert!(ParquetWriter::try_new(Vec::new(), &ArrowWriteOptions::default()).is_ok());
    /// assert!(ParquetWriter::try_new(Vec::new(), &ArrowWriteOptions::default().with_row_group_rows(0)).is_err());
    /// ```
    pub fn try_new(writer: W, options: &ArrowWriteOptions) -> Result<Self> {
        let options = ArrowWriteOptions {
            compression: Some(options.compression.unwrap_or_default()),
            ..*options
        };
        Self::try_with_properties(writer, &options, WriterProperties::default())
    }

    /// A writer with the given Parquet properties (compression, encodings,
    /// ...). The row group size is set from `options`, and so is the
    /// compression when [`ArrowWriteOptions::compression`] is `Some`.
    ///
    /// ```
    /// use parquet::{basic::Compression, file::properties::WriterProperties};
    /// use lodt::arrow::{parquet::ParquetWriter, ArrowWriteOptions};
    /// let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    /// assert!(ParquetWriter::try_with_properties(Vec::new(), &ArrowWriteOptions::default(), props).is_ok());
    /// ```
    pub fn try_with_properties(
        writer: W,
        options: &ArrowWriteOptions,
        properties: WriterProperties,
    ) -> Result<Self> {
        if options.row_group_rows == Some(0) {
            return Err(Error::InvalidArgument(
                "row_group_rows must be at least 1".into(),
            ));
        }
        let mut builder = properties
            .into_builder()
            .set_max_row_group_row_count(options.row_group_rows);
        if let Some(compression) = options.compression {
            builder = builder.set_compression(parquet_codec(compression));
        }
        let properties = builder.build();
        Ok(ParquetWriter {
            state: LazyWriter::Pending(writer),
            encoder: BatchEncoder::new(*options),
            properties,
            per_batch: options.row_group_rows.is_none(),
        })
    }

    fn open(&mut self, schema: &SchemaRef) -> Result<&mut ArrowWriter<W>> {
        let properties = &self.properties;
        let writer = self.state.open("the Parquet writer", |sink| {
            let writer = ArrowWriter::try_new(sink, schema.clone(), Some(properties.clone()))?;
            Ok(Box::new(writer))
        })?;
        Ok(writer)
    }

    /// Writes one batch: as its own row group by default, or into row groups
    /// of [`ArrowWriteOptions::row_group_rows`] top-level rows. Parquet
    /// stores levels for every row, so a tensor of more than
    /// [`MAX_ROWS_WITHOUT_BYTES`](crate::tensor::MAX_ROWS_WITHOUT_BYTES) rows
    /// of a zero-width shape is an error, before anything is written.
    ///
    /// See the [module docs](self).
    pub fn write(&mut self, batch: &Batch) -> Result<()> {
        // parquet writes levels for every row of a list, bytes or not.
        for (_, tensor) in batch.iter() {
            tensor.check_rows_without_bytes(tensor.rows(), "writing Parquet (levels per row)")?;
        }
        let per_batch = self.per_batch;
        for record_batch in self.encoder.encode(batch)? {
            let writer = self.open(&record_batch.schema())?;
            writer.write(&record_batch)?;
            if per_batch {
                writer.flush()?;
            }
        }
        Ok(())
    }

    /// What was written so far.
    ///
    /// ```
    /// let w = lodt::arrow::parquet::ParquetWriter::try_new(Vec::new(), &Default::default())?;
    /// assert_eq!(w.stats().batches, 0);
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    pub fn stats(&self) -> WriteStats {
        self.encoder.stats()
    }

    /// Writes the footer (with the file's key/value metadata) and returns the
    /// writer. A file with no batch has an empty schema. The writer is spent:
    /// another `write` or `finish` is an error.
    ///
    /// See the [module docs](self).
    pub fn finish(&mut self) -> Result<W> {
        let schema = self.encoder.schema();
        let metadata = self.encoder.metadata().clone();
        let writer = self.open(&schema)?;
        for (key, value) in metadata {
            writer.append_key_value_metadata(KeyValue::new(key, value));
        }
        Ok(self.state.take("the Parquet writer")?.into_inner()?)
    }

    /// The bytes handed to the current file's sink so far: every row group
    /// written (by default one per batch, flushed as it is written), not the
    /// footer. `0` before the first batch of a file.
    ///
    /// ```
    /// use lodt::{arrow::parquet::ParquetWriter, Batch, LodTensor};
    /// let mut w = ParquetWriter::try_new(Vec::new(), &Default::default())?;
    /// assert_eq!(w.bytes_written(), 0);
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![7u32; 100], vec![100], Default::default())?)])?)?;
    /// let one = w.bytes_written();
    /// assert!(one > 0); // the row group is written as the batch is
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![8u32; 100], vec![100], Default::default())?)])?)?;
    /// assert!(w.bytes_written() > one);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes_written(&self) -> u64 {
        match &self.state {
            LazyWriter::Open(writer) => writer.bytes_written() as u64,
            _ => 0,
        }
    }

    /// Finishes the current file as [`ParquetWriter::finish`] does and
    /// returns its sink, then goes on writing to `next`: the files are
    /// shards of one dataset. Every file has the first batch's schema and
    /// metadata, checked across the files as within one (a batch that
    /// differs is refused, numbered from the first file's first batch), and
    /// [`ParquetWriter::stats`] counts them all.
    ///
    /// ```
    /// use lodt::{arrow::parquet::{ParquetReader, ParquetWriter}, Batch, LodTensor};
    /// let x = |v: i64| Batch::try_from_tensors([("x", LodTensor::from_vec(vec![v], vec![1], Default::default()).unwrap())]).unwrap();
    /// let (a, b) = (tempfile::tempfile()?, tempfile::tempfile()?);
    /// let mut w = ParquetWriter::try_new(a.try_clone()?, &Default::default())?;
    /// w.write(&x(1))?;
    /// w.finish_file(b.try_clone()?)?;
    /// w.write(&x(2))?;
    /// let y = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![3i64], vec![1], Default::default())?)])?;
    /// assert!(w.write(&y).is_err()); // another schema than the first file's
    /// w.finish()?;
    /// assert_eq!(w.stats().batches, 2);
    /// let read = |f: &std::fs::File| -> Vec<Batch> {
    ///     ParquetReader::try_new(f.try_clone().unwrap(), &Default::default()).unwrap().map(|b| b.unwrap()).collect()
    /// };
    /// assert_eq!((read(&a), read(&b)), (vec![x(1)], vec![x(2)]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish_file(&mut self, next: W) -> Result<W> {
        let done = self.finish()?;
        self.state = LazyWriter::Pending(next);
        Ok(done)
    }
}

/// The Parquet codec of `compression` (zstd at level 1, pyarrow's default level).
fn parquet_codec(compression: ParquetCompression) -> ::parquet::basic::Compression {
    use ::parquet::basic::Compression as Codec;
    match compression {
        ParquetCompression::None => Codec::UNCOMPRESSED,
        ParquetCompression::Snappy => Codec::SNAPPY,
        ParquetCompression::Zstd => Codec::ZSTD(::parquet::basic::ZstdLevel::default()),
        ParquetCompression::Lz4 => Codec::LZ4_RAW,
    }
}

/// Writes every batch of `batches` to a Parquet file and returns the writer
/// and what was written. Stops at the first error; memory stays bounded by one
/// row group.
///
/// ```
/// use lodt::{arrow::{parquet::write_parquet, ArrowWriteOptions}, Batch, LodTensor};
/// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default())?)])?;
/// let (bytes, stats) = write_parquet(Vec::new(), [Ok::<_, lodt::Error>(batch)], &ArrowWriteOptions::default())?;
/// assert_eq!((stats.batches, stats.rows), (1, 2));
/// assert!(bytes.ends_with(b"PAR1"));
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn write_parquet<W, I, E>(
    writer: W,
    batches: I,
    options: &ArrowWriteOptions,
) -> Result<(W, WriteStats)>
where
    W: Write + Send,
    I: IntoIterator<Item = std::result::Result<Batch, E>>,
    Error: From<E>,
{
    write_all(ParquetWriter::try_new(writer, options)?, batches)
}

/// The most top-level rows [`ParquetReader`] reads into one batch by default.
/// Parquet readers preallocate by batch size and a row group's row count is
/// read from the file, so it is capped: a larger row group is read as several
/// batches.
///
/// ```
/// assert_eq!(lodt::arrow::parquet::MAX_BATCH_ROWS, 1 << 20);
/// ```
pub const MAX_BATCH_ROWS: usize = 1 << 20;

/// Reads a Parquet file one row group at a time, a row group as one batch or,
/// when it is large, as several consecutive batches (row groups with no rows
/// are skipped). A batch holds at most [`ParquetReader::with_max_batch_rows`]
/// rows ([`MAX_BATCH_ROWS`] by default) and at most as many as fit in
/// [`ArrowOptions::decode_budget`] (256 MiB by default): the footer's value
/// counts give the bytes a row group decodes to (each value its plain width
/// plus 4 bytes of levels, or the column chunk's uncompressed size if more),
/// and a batch takes `budget × rows ÷ bytes` rows of it, so reading the first
/// row never decodes the whole row group. A row group one row of which needs
/// more than the budget, or a batch that decodes to more than it anyway (a
/// footer that understates its counts, rows of very different sizes), is an
/// [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) giving the budget
/// and what was needed. Each batch's metadata is the file's (Arrow schema
/// metadata and key/value metadata).
///
/// The file is untrusted: the nesting depth of the footer's schema (at most
/// 128 groups) is checked before parquet decodes the footer, its row counts
/// and column chunk ranges before parquet uses them, the page headers of a
/// row group before parquet reads it (no Thrift list of booleans, no
/// dictionary-encoded page without a dictionary), a `FixedSizeList` is
/// decoded as a `LargeList` and its slots checked before it is rebuilt (so
/// the size claimed by the file's Arrow schema sizes no allocation), the
/// arrays parquet decodes are validated (`ArrayData::validate_full`), and a
/// panic inside parquet is contained. Every such failure is an [`ArrowError::Decode`](crate::arrow::ArrowError::Decode) naming the file and
/// section (`Parquet footer`, `row group 2`, `row group 2 column "x"`), and
/// an error inside a row group ends that row group (the next one is read
/// next). A column of a type lodt does not read is an [`Error::Unsupported`]
/// for each row group, found before decoding it.
///
/// See the [module docs](self) for an example.
pub struct ParquetReader {
    file: File,
    name: String,
    metadata: ArrowReaderMetadata,
    /// What parquet decodes with: `metadata` with every `FixedSizeList`
    /// read as a `LargeList` (see `fixed_lists.rs`).
    decode: ArrowReaderMetadata,
    options: ArrowOptions,
    max_batch_rows: usize,
    /// The selected columns ([`ParquetReader::with_columns`]) and their schema.
    projection: Option<(Vec<usize>, SchemaRef)>,
    next_row_group: usize,
    current: Option<(usize, ParquetRecordBatchReader)>,
}

impl ParquetReader {
    /// Opens a file (reads its footer and Arrow schema, and checks the
    /// footer's schema depth, row counts and column chunk ranges). Errors name the input
    /// `Parquet file`; see [`ParquetReader::try_new_named`].
    ///
    /// See the [module docs](self).
    pub fn try_new(file: File, options: &ArrowOptions) -> Result<Self> {
        Self::try_new_named(file, "Parquet file", options)
    }

    /// Like [`ParquetReader::try_new`], with the name errors give the file
    /// (its path, usually).
    ///
    /// ```
    /// use lodt::arrow::parquet::ParquetReader;
    /// let mut file = tempfile::tempfile()?;
    /// std::io::Write::write_all(&mut file, b"PAR1 not Parquet PAR1")?;
    /// let err = ParquetReader::try_new_named(file, "in.parquet", &Default::default()).err().unwrap();
    /// assert!(err.to_string().starts_with("in.parquet: Parquet footer: "), "{err}");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_new_named(
        file: File,
        name: impl Into<String>,
        options: &ArrowOptions,
    ) -> Result<Self> {
        const SECTION: &str = "Parquet footer";
        let name = name.into();
        let file_len = file.metadata()?.len();
        check_parquet_schema_depth(&name, &file)?;
        let metadata = contain(
            "parquet",
            &name,
            || SECTION.into(),
            || {
                ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
                    .map_err(|e| decode_error(&name, SECTION, format!("parquet: {e}")))
            },
        )?;
        check_parquet_metadata(&name, metadata.metadata(), file_len)?;
        let decode = match decode_schema(metadata.schema()) {
            None => metadata.clone(),
            Some(schema) => contain(
                "parquet",
                &name,
                || SECTION.into(),
                || {
                    let options = ArrowReaderOptions::new().with_schema(Arc::new(schema));
                    ArrowReaderMetadata::try_new(metadata.metadata().clone(), options)
                        .map_err(|e| decode_error(&name, SECTION, format!("parquet: {e}")))
                },
            )?,
        };
        Ok(ParquetReader {
            file,
            name,
            metadata,
            decode,
            options: *options,
            max_batch_rows: MAX_BATCH_ROWS,
            projection: None,
            next_row_group: 0,
            current: None,
        })
    }

    /// Opens the file at `path` (errors name the file by its path). A Parquet
    /// file is read from its footer, at the end: a FIFO or a device is
    /// refused with a clear error ([`open_regular`](crate::format::open_regular)).
    ///
    /// ```no_run
    /// let reader = lodt::arrow::parquet::ParquetReader::open("batches.parquet", &Default::default())?;
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    pub fn open(path: impl AsRef<std::path::Path>, options: &ArrowOptions) -> Result<Self> {
        let path = path.as_ref();
        let file = crate::format::open_regular(path)?;
        Self::try_new_named(file, path.display().to_string(), options)
    }

    /// Reads at most `rows` top-level rows into one batch (at least 1).
    ///
    /// ```
    /// use lodt::{arrow::parquet::{write_parquet, ParquetReader}, Batch, LodTensor};
    /// let batch = Batch::try_from_tensors([("y", LodTensor::from_vec(vec![1i32, 2, 3], vec![3], Default::default())?)])?;
    /// let file = tempfile::tempfile()?;
    /// write_parquet(file.try_clone()?, [Ok::<_, lodt::Error>(batch)], &Default::default())?;
    /// let reader = ParquetReader::try_new(file, &Default::default())?.with_max_batch_rows(2);
    /// let rows: Vec<usize> = reader.map(|b| b.map(|b| b.get("y").unwrap().rows())).collect::<Result<_, _>>()?;
    /// assert_eq!(rows, vec![2, 1]);
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    pub fn with_max_batch_rows(mut self, rows: usize) -> Self {
        self.max_batch_rows = rows.max(1);
        self
    }

    /// Reads only `columns`, in that order: the other columns are neither
    /// decoded nor checked (a file with a `string` column reads with the
    /// others selected). A name the file lacks is an
    /// [`ArrowError::NoSuchColumn`](crate::arrow::ArrowError::NoSuchColumn).
    ///
    /// ```
    /// use lodt::{arrow::parquet::{write_parquet, ParquetReader}, Batch, LodTensor};
    /// let t = |v: u8| LodTensor::from_vec(vec![v], vec![1], Default::default());
    /// let batch = Batch::try_from_tensors([("a", t(1)?), ("b", t(2)?), ("c", t(3)?)])?;
    /// let file = tempfile::tempfile()?;
    /// write_parquet(file.try_clone()?, [Ok::<_, lodt::Error>(batch)], &Default::default())?;
    /// let mut reader = ParquetReader::try_new(file, &Default::default())?.with_columns(&["c", "a"])?;
    /// let batch = reader.next().unwrap()?;
    /// assert_eq!(batch.names().collect::<Vec<_>>(), ["c", "a"]);
    /// assert_eq!(batch.get("c").unwrap().as_slice::<u8>()?, &[3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_columns<S: AsRef<str>>(mut self, columns: &[S]) -> Result<Self> {
        self.projection = Some(projection(self.metadata.schema(), columns)?);
        Ok(self)
    }

    /// The number of row groups.
    ///
    /// See the [module docs](self).
    pub fn num_row_groups(&self) -> usize {
        self.metadata.metadata().num_row_groups()
    }

    /// The file's Arrow schema.
    ///
    /// ```
    /// use lodt::arrow::parquet::{ParquetReader, ParquetWriter};
    /// let mut file = tempfile::tempfile()?;
    /// ParquetWriter::try_new(file.try_clone()?, &Default::default())?.finish()?;
    /// assert!(ParquetReader::try_new(file, &Default::default())?.schema().fields().is_empty());
    /// # Ok::<(), lodt::arrow::ArrowError>(())
    /// ```
    pub fn schema(&self) -> &SchemaRef {
        self.metadata.schema()
    }

    /// The bytes a row of row group `index` decodes to, on average, by the
    /// footer: for each column chunk read (the projection's), its value
    /// count (a list's values, one per leaf slot) times the value's width
    /// (its plain encoding, at least a byte) plus 4 bytes of levels, or its
    /// uncompressed size where that is more (strings), over the row count.
    /// Returns the chunk's total bytes and the column that needs the most.
    fn decoded_bytes(&self, index: usize) -> (u128, String) {
        let metadata = self.metadata.metadata();
        let Some(row_group) = metadata.row_groups().get(index) else {
            return (0, String::new());
        };
        let descr = metadata.file_metadata().schema_descr();
        let mut total = 0u128;
        let mut widest = (0u128, String::new());
        for (leaf, column) in row_group.columns().iter().enumerate() {
            if let Some((indices, _)) = &self.projection
                && !indices.contains(&descr.get_column_root_idx(leaf))
            {
                continue;
            }
            let values = u128::try_from(column.num_values()).unwrap_or(0);
            let width = u128::from(plain_bits(column.column_descr()).div_ceil(8)) + 4;
            let uncompressed = u128::try_from(column.uncompressed_size()).unwrap_or(0);
            let bytes = (values * width).max(uncompressed);
            total += bytes;
            if bytes >= widest.0 {
                widest = (bytes, column.column_path().string());
            }
        }
        (total, widest.1)
    }

    /// How many rows of row group `index` one batch reads: at most
    /// [`ParquetReader::with_max_batch_rows`], and as many as fit in
    /// [`ArrowOptions::decode_budget`] by [`Self::decoded_bytes`]. A row
    /// group one row of which needs more than the budget is an
    /// [`Error::Decode`] that says so.
    fn batch_rows(&self, index: usize) -> Result<usize> {
        let Some(row_group) = self.metadata.metadata().row_groups().get(index) else {
            return Ok(self.max_batch_rows);
        };
        let rows = u128::try_from(row_group.num_rows()).map_err(|_| {
            decode_error(
                &self.name,
                &format!("row group {index}"),
                format!("negative row count {}", row_group.num_rows()),
            )
        })?;
        if rows == 0 {
            // No batch: a row group of no rows is skipped (pyarrow writes
            // one for an empty table).
            return Ok(self.max_batch_rows);
        }
        let (bytes, column) = self.decoded_bytes(index);
        let budget = u128::from(self.options.decode_budget);
        let fit = budget
            .saturating_mul(rows)
            .checked_div(bytes)
            .unwrap_or(rows);
        if fit == 0 {
            return Err(decode_error(
                &self.name,
                &format!("row group {index}"),
                format!(
                    "one row decodes to about {} bytes (the row group's {rows} rows to {bytes}, \
                     most of them column {column:?}), more than the decode budget of {budget} \
                     bytes per batch; raise it (ArrowOptions::decode_budget, --decode-budget, \
                     decode_budget=) to read this file",
                    bytes.div_ceil(rows)
                ),
            ));
        }
        Ok(usize::try_from(fit.min(rows))
            .unwrap_or(usize::MAX)
            .min(self.max_batch_rows))
    }

    /// Starts reading the next row group with rows; `None` after the last.
    fn open_next_row_group(&mut self) -> Option<Result<(usize, ParquetRecordBatchReader)>> {
        loop {
            let index = self.next_row_group;
            let row_group = self.metadata.metadata().row_groups().get(index)?;
            self.next_row_group += 1;
            if row_group.num_rows() == 0 {
                continue;
            }
            let batch_rows = match self.batch_rows(index) {
                Ok(rows) => rows,
                Err(e) => return Some(Err(e)),
            };
            let checked = self
                .projection
                .as_ref()
                .map_or(self.metadata.schema(), |(_, schema)| schema);
            if let Err(e) = check_schema(checked) {
                return Some(Err(e));
            }
            if let Err(e) =
                check_parquet_page_headers(&self.name, &self.file, self.metadata.metadata(), index)
            {
                return Some(Err(e));
            }
            let mask = self.projection.as_ref().map(|(indices, _)| {
                let parquet_schema = self.metadata.metadata().file_metadata().schema_descr();
                ProjectionMask::roots(parquet_schema, indices.iter().copied())
            });
            let name = self.name.as_str();
            let section = || format!("row group {index}");
            let reader = self.file.try_clone().map_err(Error::from).and_then(|file| {
                contain("parquet", name, section, || {
                    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
                        PageSource(file),
                        self.decode.clone(),
                    )
                    .with_row_groups(vec![index])
                    .with_batch_size(batch_rows);
                    if let Some(mask) = mask {
                        builder = builder.with_projection(mask);
                    }
                    builder
                        .build()
                        .map_err(|e| decode_error(name, &section(), format!("parquet: {e}")))
                })
            });
            return Some(reader.map(|reader| (index, reader)));
        }
    }

    /// Reads the next record batch of row group `index` with `reader`, and
    /// validates its arrays (parquet builds some without validation), inside
    /// the boundary.
    fn read_next(
        name: &str,
        index: usize,
        reader: &mut ParquetRecordBatchReader,
        budget: u64,
    ) -> Result<Option<RecordBatch>> {
        let section = || format!("row group {index}");
        contain("parquet", name, section, || {
            let Some(record_batch) = reader.next() else {
                return Ok(None);
            };
            let record_batch = record_batch
                .map_err(|e| decode_error(name, &section(), format!("parquet: {e}")))?;
            // The footer's counts cut the batch; what was decoded is checked
            // too (counts that understate, or rows of very different sizes).
            let decoded = record_batch.get_array_memory_size() as u64;
            if decoded > budget {
                return Err(decode_error(
                    name,
                    &section(),
                    format!(
                        "a batch of {} rows decoded to {decoded} bytes, more than the decode \
                         budget of {budget} bytes per batch; raise it (ArrowOptions::decode_budget, \
                         --decode-budget, decode_budget=) to read this file",
                        record_batch.num_rows()
                    ),
                ));
            }
            for column in record_batch.columns() {
                column
                    .to_data()
                    .validate_full()
                    .map_err(|e| decode_error(name, &section(), format!("invalid array: {e}")))?;
            }
            Ok(Some(record_batch))
        })
    }

    /// `record_batch` (decoded with `self.decode`, columns in the order
    /// asked) with the file's `FixedSizeList` types back.
    /// A slot of the wrong length is an [`Error::Decode`] of row group `index`.
    fn restore_fixed(&self, index: usize, record_batch: RecordBatch) -> Result<RecordBatch> {
        if self.decode.schema() == self.metadata.schema() {
            return Ok(record_batch);
        }
        let file_schema = match &self.projection {
            Some((_, schema)) => schema,
            None => self.metadata.schema(),
        };
        let decoded = record_batch.schema();
        let mut fields = Vec::with_capacity(decoded.fields().len());
        let mut columns = Vec::with_capacity(decoded.fields().len());
        // Column by column: the decoded batch has the file schema's (or the
        // projection's) columns, in its order.
        let columns_of_file = file_schema.fields().iter();
        for ((field, array), file_field) in decoded
            .fields()
            .iter()
            .zip(record_batch.columns())
            .zip(columns_of_file)
        {
            let target = file_field.data_type();
            let restored = restore(field.name(), array, target).map_err(|e| match e {
                Error::InvalidArgument(message) => {
                    decode_error(&self.name, &format!("row group {index}"), message)
                }
                other => other,
            })?;
            columns.push(restored);
            fields.push(with_type(field, target));
        }
        let schema = Schema::new_with_metadata(fields, decoded.metadata().clone());
        Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
    }

    fn convert(&self, index: usize, record_batch: RecordBatch) -> Result<Batch> {
        // A projection reads the columns in file order: put them in the order asked.
        let record_batch = match &self.projection {
            Some((indices, _)) => {
                let mut sorted = indices.clone();
                sorted.sort_unstable();
                let order: Vec<usize> = indices
                    .iter()
                    .filter_map(|i| sorted.binary_search(i).ok())
                    .collect();
                record_batch.project(&order)?
            }
            None => record_batch,
        };
        let record_batch = self.restore_fixed(index, record_batch)?;
        let mut batch = record_batch_to_batch(&record_batch, &self.options)?;
        for (key, value) in self.metadata.schema().metadata().iter() {
            batch
                .metadata_mut()
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
        Ok(batch)
    }
}

impl Iterator for ParquetReader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((index, reader)) = &mut self.current {
                match Self::read_next(&self.name, *index, reader, self.options.decode_budget) {
                    Ok(Some(record_batch)) => {
                        let index = *index;
                        return Some(self.convert(index, record_batch));
                    }
                    Ok(None) => self.current = None,
                    Err(e) => {
                        // The row group reader may be midway through a page
                        // (or have panicked): drop it, go on with the next.
                        self.current = None;
                        return Some(Err(e));
                    }
                }
            }
            match self.open_next_row_group()? {
                Ok(reader) => self.current = Some(reader),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// The file's metadata is its Arrow schema's; the batch count comes from the
/// footer's row counts (row groups with no rows give no batch, larger ones
/// than [`ParquetReader::with_max_batch_rows`] several).
///
/// ```
/// use lodt::{arrow::parquet::{write_parquet, ParquetReader}, batch::BatchReader, Batch, LodTensor};
/// let y = |v: Vec<i32>| Batch::try_from_tensors([("y", LodTensor::from_vec(v.clone(), vec![v.len()], Default::default())?)]);
/// let file = tempfile::tempfile()?;
/// write_parquet(file.try_clone()?, [y(vec![]), y(vec![1, 2, 3]), y(vec![4, 5, 6])], &Default::default())?;
/// let reader = ParquetReader::try_new(file, &Default::default())?.with_max_batch_rows(2);
/// assert_eq!((reader.metadata().len(), reader.num_batches()), (0, Some(4)));
/// assert_eq!(reader.count(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl crate::batch::BatchReader for ParquetReader {
    type Error = Error;

    fn metadata(&self) -> std::collections::BTreeMap<String, String> {
        self.schema()
            .metadata()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn num_batches(&self) -> Option<usize> {
        let mut batches = 0usize;
        for (index, row_group) in self.metadata.metadata().row_groups().iter().enumerate() {
            let rows = usize::try_from(row_group.num_rows()).ok()?;
            if rows == 0 {
                continue; // skipped: no batch
            }
            // A row group over the budget is one error.
            let per_batch = self.batch_rows(index).unwrap_or(rows).max(1);
            batches = batches.checked_add(rows.div_ceil(per_batch))?;
        }
        Some(batches)
    }
}

/// The file as parquet reads a row group's pages from it: reading past its
/// end is an error (`UnexpectedEof`), not an empty read.
///
/// parquet skips the Thrift bytes of a page header it does not need with
/// `io::copy`, which stops quietly at the end of the file; a page header
/// that ends the file with a list of 2^31 doubles then cost it 2^31 empty
/// reads, a minute or more (found by the `parquet_reader` fuzz target). With
/// this reader the first read past the end fails, and so does the header.
/// A valid file is never read past its end.
struct PageSource(File);

impl ::parquet::file::reader::Length for PageSource {
    fn len(&self) -> u64 {
        ::parquet::file::reader::Length::len(&self.0)
    }
}

impl ::parquet::file::reader::ChunkReader for PageSource {
    type T = std::io::BufReader<EofIsError<File>>;

    fn get_read(&self, start: u64) -> ::parquet::errors::Result<Self::T> {
        use std::io::{Seek, SeekFrom};
        let mut file = self.0.try_clone()?;
        file.seek(SeekFrom::Start(start))?;
        Ok(std::io::BufReader::new(EofIsError(file)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> ::parquet::errors::Result<bytes::Bytes> {
        self.0.get_bytes(start, length)
    }
}

/// A reader whose end is an error (see [`PageSource`]).
struct EofIsError<R>(R);

impl<R: std::io::Read> std::io::Read for EofIsError<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        if n == 0 && !buf.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "a page header runs past the end of the file",
            ));
        }
        Ok(n)
    }
}
