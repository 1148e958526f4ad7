//! Converting datasets between file formats, batch by batch: what
//! `lodt convert IN OUT` does.
//!
//! [`Format`] is the one list of the formats lodt reads and writes: it tells a
//! file's format by its extension, opens a [`BatchReader`] or creates a
//! [`BatchWriter`] for it, and says what the format can hold
//! ([`Capabilities`]). A conversion is: open a reader, create a writer, copy.
//! Adding a format touches [`Format`] and the format's own module only.
//!
//! | extension                   | format                                   | [`Format`] |
//! |-----------------------------|------------------------------------------|------------|
//! | `.lodt`                     | lodt's own format (`spec/FORMAT.md`)     | [`Format::Lodt`] |
//! | `.parquet`                  | Parquet, one row group per batch         | [`Format::Parquet`] |
//! | `.arrow`, `.feather`        | Arrow IPC file                           | [`Format::ArrowFile`] |
//! | `.arrows`                   | Arrow IPC stream                         | [`Format::ArrowStream`] |
//! | `.pdtensor`                 | one PaddlePaddle tensor (`SerializeToStream`) | [`Format::PaddleTensor`] |
//! | `.pdparams`, `.pdiparams`   | PaddlePaddle `save_combine` file         | [`Format::PaddleCombined`] |
//!
//! ```text
//!  IN ──open_reader──▶ Batch, Batch, … ──[rebatch to N rows]──▶ create_writer ──▶ OUT
//! ```
//!
//! Only one batch is in memory at a time (two while re-batching). A `.lodt`
//! input is read sequentially with every body checksum checked. Paddle files
//! hold one unnamed set of tensors: reading one gives a single batch whose
//! tensors are named from [`ConvertOptions::names`] (or `tensor0`, `tensor1`,
//! …); writing one takes a single batch (a `.pdtensor`, a single tensor).
//!
//! ```
//! use lodt::batch::copy;
//! use lodt::convert::{ConvertOptions, Format};
//! let dir = tempfile::tempdir()?;
//! let (input, output) = ("tests/data/paddle/combined.pdparams", dir.path().join("params.lodt"));
//! let options = ConvertOptions::default();
//! let reader = Format::from_path(input)?.open_reader(input, &options)?;
//! let writer = Format::from_path(&output)?.create_writer(&output, reader.metadata(), &options)?;
//! let ((), stats) = copy(reader, writer, |_| {})?;
//! assert_eq!((stats.batches, stats.tensors), (1, 8));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::atomic::{AtomicError, AtomicFile};
use crate::batch::rebatch::{BatchBytes, rebatch, rebatch_bytes};
use crate::batch::{
    Batch, BatchReader, BatchWriter, BoxBatchReader, BoxBatchWriter, WriteStats, copy,
};
use crate::format::{self, FileSink, StreamReader};
use crate::paddle::{self, PaddleBatchReader, PaddleBatchWriter, PaddleFile};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

/// A file format lodt converts from and to: the one list of them.
///
/// ```
/// use lodt::convert::Format;
/// assert_eq!(Format::from_path("a/b.parquet")?, Format::Parquet);
/// assert_eq!(Format::from_path("x.PDPARAMS")?, Format::PaddleCombined);
/// assert!(Format::from_path("x.csv").is_err());
/// assert_eq!(Format::ALL.len(), 6);
/// # Ok::<(), lodt::convert::ConvertError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// `.lodt`.
    Lodt,
    /// `.parquet`.
    Parquet,
    /// `.arrow` / `.feather` (Arrow IPC file).
    ArrowFile,
    /// `.arrows` (Arrow IPC stream).
    ArrowStream,
    /// `.pdtensor` (one Paddle tensor).
    PaddleTensor,
    /// `.pdparams` / `.pdiparams` (Paddle `save_combine`).
    PaddleCombined,
}

/// Where a format keeps batch metadata ([`Batch::metadata`]).
///
/// ```
/// use lodt::convert::{Format, MetadataScope};
/// assert_eq!(Format::Lodt.capabilities().batch_metadata, MetadataScope::PerBatch);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataScope {
    /// Each batch keeps its own.
    PerBatch,
    /// One map per file, the first batch's: every batch read back carries
    /// it, and a later batch whose metadata differs is an error.
    PerFile,
    /// Not stored: batches read back have none.
    Dropped,
}

/// What a format can hold, so that conversions (and tests) know what
/// survives a round trip.
///
/// ```
/// use lodt::convert::Format;
/// let paddle = Format::PaddleTensor.capabilities();
/// assert_eq!((paddle.max_batches, paddle.tensors_per_batch, paddle.tensor_names), (Some(1), Some(1), false));
/// assert!(!Format::Parquet.capabilities().empty_batches); // Parquet has no empty row groups
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Capabilities {
    /// The most batches a file holds (`None`: any number).
    pub max_batches: Option<usize>,
    /// `Some(n)`: every batch holds exactly `n` tensors.
    pub tensors_per_batch: Option<usize>,
    /// Whether tensor names are stored. Without them, a reader names the
    /// tensors from [`ConvertOptions::names`] (or `tensor0`, `tensor1`, …).
    pub tensor_names: bool,
    /// Where batch metadata is kept.
    pub batch_metadata: MetadataScope,
    /// Whether a file has key/value metadata of its own, apart from its
    /// batches' ([`BatchReader::metadata`]); a writer of such a file is
    /// given the input's.
    pub file_metadata: bool,
    /// Whether a batch with no top-level rows is stored (Parquet writes no
    /// empty row groups; Paddle refuses a LoD level of no sequences).
    pub empty_batches: bool,
    /// Whether every lodt dtype is stored (Paddle has no `uint16`,
    /// `uint32`, `uint64`).
    pub all_dtypes: bool,
    /// Whether the tensors of one batch may have different numbers of
    /// top-level rows (an Arrow `RecordBatch` has one row count).
    pub ragged_batches: bool,
    /// Whether batches of one file may hold different tensors, dtypes or
    /// shapes of rows (an Arrow or Parquet file has one schema).
    pub mixed_schemas: bool,
    /// Whether the format is read in order, with no seeking, so that it can
    /// come from a pipe ([`Format::open_stream`]): `.lodt` (read as a
    /// stream), Arrow IPC streams and Paddle files. Every format can be
    /// written to a pipe ([`Format::create_stream_writer`]).
    pub streamable: bool,
}

impl Format {
    /// Every format, in the order of the [module docs](self).
    ///
    /// See the [type-level example](Format).
    pub const ALL: [Format; 6] = [
        Format::Lodt,
        Format::Parquet,
        Format::ArrowFile,
        Format::ArrowStream,
        Format::PaddleTensor,
        Format::PaddleCombined,
    ];

    /// The file extensions of the format, lowercase, without the dot; the
    /// first is the one to write.
    ///
    /// ```
    /// assert_eq!(lodt::convert::Format::ArrowFile.extensions(), &["arrow", "feather"]);
    /// ```
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Lodt => &["lodt"],
            Format::Parquet => &["parquet"],
            Format::ArrowFile => &["arrow", "feather"],
            Format::ArrowStream => &["arrows"],
            Format::PaddleTensor => &["pdtensor"],
            Format::PaddleCombined => &["pdparams", "pdiparams"],
        }
    }

    /// A short name of the format.
    ///
    /// ```
    /// assert_eq!(lodt::convert::Format::ArrowStream.name(), "Arrow IPC stream");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Format::Lodt => "lodt",
            Format::Parquet => "Parquet",
            Format::ArrowFile => "Arrow IPC file",
            Format::ArrowStream => "Arrow IPC stream",
            Format::PaddleTensor => "Paddle tensor",
            Format::PaddleCombined => "Paddle combined parameters",
        }
    }

    /// What the format can hold.
    ///
    /// See [`Capabilities`].
    pub fn capabilities(self) -> Capabilities {
        let any = Capabilities {
            max_batches: None,
            tensors_per_batch: None,
            tensor_names: true,
            batch_metadata: MetadataScope::PerBatch,
            file_metadata: false,
            empty_batches: true,
            all_dtypes: true,
            ragged_batches: true,
            mixed_schemas: true,
            streamable: true,
        };
        let arrow = Capabilities {
            batch_metadata: MetadataScope::PerFile,
            ragged_batches: false,
            mixed_schemas: false,
            ..any
        };
        let arrow_file = Capabilities {
            streamable: false,
            ..arrow
        };
        let paddle = Capabilities {
            max_batches: Some(1),
            tensor_names: false,
            batch_metadata: MetadataScope::Dropped,
            empty_batches: false,
            all_dtypes: false,
            ..any
        };
        match self {
            Format::Lodt => Capabilities {
                file_metadata: true,
                ..any
            },
            Format::ArrowFile => arrow_file,
            Format::ArrowStream => arrow,
            Format::Parquet => Capabilities {
                empty_batches: false,
                ..arrow_file
            },
            Format::PaddleTensor => Capabilities {
                tensors_per_batch: Some(1),
                ..paddle
            },
            Format::PaddleCombined => paddle,
        }
    }

    /// The cargo feature the format needs, if any.
    ///
    /// ```
    /// use lodt::convert::Format;
    /// assert_eq!((Format::Lodt.feature(), Format::Parquet.feature()), (None, Some("parquet")));
    /// ```
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Format::Lodt | Format::PaddleTensor | Format::PaddleCombined => None,
            Format::ArrowFile | Format::ArrowStream => Some("arrow"),
            Format::Parquet => Some("parquet"),
        }
    }

    /// Whether this build reads and writes the format (has its
    /// [feature](Format::feature)).
    ///
    /// ```
    /// assert!(lodt::convert::Format::Lodt.is_available());
    /// ```
    pub fn is_available(self) -> bool {
        match self {
            Format::Lodt | Format::PaddleTensor | Format::PaddleCombined => true,
            Format::ArrowFile | Format::ArrowStream => cfg!(feature = "arrow"),
            Format::Parquet => cfg!(feature = "parquet"),
        }
    }

    /// The format an extension names (case-insensitive, without the dot).
    ///
    /// ```
    /// use lodt::convert::Format;
    /// assert_eq!(Format::from_extension("Feather"), Some(Format::ArrowFile));
    /// assert_eq!(Format::from_extension("csv"), None);
    /// ```
    pub fn from_extension(extension: &str) -> Option<Format> {
        let extension = extension.to_ascii_lowercase();
        Format::ALL
            .into_iter()
            .find(|f| f.extensions().contains(&extension.as_str()))
    }

    /// The format of `path`, by its extension (case-insensitive).
    ///
    /// ```
    /// use lodt::convert::Format;
    /// assert_eq!(Format::from_path("d.lodt")?, Format::Lodt);
    /// # Ok::<(), lodt::convert::ConvertError>(())
    /// ```
    pub fn from_path(path: impl AsRef<Path>) -> Result<Format, ConvertError> {
        let path = path.as_ref();
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(Format::from_extension)
            .ok_or_else(|| ConvertError::UnknownExtension {
                path: path.display().to_string(),
            })
    }

    /// Opens the file at `path`, in this format, as a reader of batches.
    ///
    /// A path that is a FIFO or a device is read in order, as
    /// [`Format::open_stream`] reads a pipe, in the
    /// [streamable](Capabilities::streamable) formats (`.lodt`, Arrow IPC
    /// streams, Paddle files); the others (Parquet, Arrow IPC files) need a
    /// regular file and refuse it with a clear error.
    ///
    /// [`ConvertOptions::names`] names the tensors of a format that stores
    /// none (an error for the others); [`ConvertOptions::batch_rows`]
    /// regroups the rows (see [`rebatch`]). The reader knows the number of
    /// batches up front where the format tells it (and no rebatching is
    /// asked), for progress bars.
    ///
    /// ```
    /// use lodt::convert::{ConvertOptions, Format};
    /// let options = ConvertOptions { names: Some(vec!["w".into()]), ..Default::default() };
    /// let path = "tests/data/paddle/seed_2level_int64.pdtensor";
    /// let mut reader = Format::PaddleTensor.open_reader(path, &options)?;
    /// assert_eq!(reader.num_batches(), Some(1));
    /// assert_eq!(reader.next().transpose()?.unwrap().get("w").unwrap().shape(), &[15, 1]);
    /// # Ok::<(), lodt::convert::ConvertError>(())
    /// ```
    pub fn open_reader(
        self,
        path: impl AsRef<Path>,
        options: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        let path = path.as_ref();
        self.check_reader(&path.display().to_string(), options)?;
        let name = path.display().to_string();
        // A path that is not there is "No such file", whatever its extension.
        if let Err(source) = std::fs::metadata(path) {
            return Err(ConvertError::Io { path: name, source });
        }
        // A pipe or a device (a FIFO, /dev/stdin) is read as a stream.
        if !is_regular(path) {
            if !self.capabilities().streamable {
                return Err(not_streamable(self, &name));
            }
            return self.open_stream(open(path)?, &name, options);
        }
        let names = paddle_names(options);
        let names = names.as_deref();
        let reader: BoxBatchReader<'static, ConvertError> = match self {
            Format::Lodt => {
                // The footer gives the count; the stream checks every checksum.
                let total = format::LodtFile::open(path)?.num_batches();
                let stream = StreamReader::try_new(BufReader::new(open(path)?))?;
                Box::new(Counted {
                    inner: stream.err_into(),
                    total,
                })
            }
            Format::PaddleTensor => {
                Box::new(PaddleBatchReader::open(path, PaddleFile::Tensor, names)?.err_into())
            }
            Format::PaddleCombined => {
                Box::new(PaddleBatchReader::open(path, PaddleFile::Combined, names)?.err_into())
            }
            Format::ArrowFile | Format::ArrowStream | Format::Parquet => {
                arrow_side::open_reader(self, open(path)?, name, options)?
            }
        };
        self.finish_reader(reader, options)
    }

    /// Reads the format from `reader` in order (a pipe, stdin, a socket),
    /// for the [streamable](Capabilities::streamable) formats; `name` names
    /// the input in errors. Options as for [`Format::open_reader`].
    ///
    /// ```
    /// use lodt::convert::{ConvertOptions, Format};
    /// let bytes = std::fs::read("tests/data/paddle/seed_2level_int64.pdtensor")?;
    /// let mut reader = Format::PaddleTensor.open_stream(std::io::Cursor::new(bytes), "stdin", &ConvertOptions::default())?;
    /// assert_eq!(reader.next().transpose()?.unwrap().get("tensor0").unwrap().shape(), &[15, 1]);
    /// let err = Format::Parquet.open_stream(std::io::empty(), "stdin", &ConvertOptions::default()).err().unwrap();
    /// assert!(err.to_string().contains("needs a seekable file"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_stream(
        self,
        reader: impl std::io::Read + Send + 'static,
        name: &str,
        options: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        self.check_reader(name, options)?;
        if !self.capabilities().streamable {
            return Err(not_streamable(self, name));
        }
        let names = paddle_names(options);
        let names = names.as_deref();
        let reader = BufReader::new(reader);
        let reader: BoxBatchReader<'static, ConvertError> = match self {
            Format::Lodt => Box::new(StreamReader::try_new(reader)?.err_into()),
            Format::PaddleTensor => {
                Box::new(PaddleBatchReader::try_new(reader, PaddleFile::Tensor, names)?.err_into())
            }
            Format::PaddleCombined => Box::new(
                PaddleBatchReader::try_new(reader, PaddleFile::Combined, names)?.err_into(),
            ),
            _ => arrow_side::open_stream(self, Box::new(reader), name.to_owned(), options)?,
        };
        self.finish_reader(reader, options)
    }

    /// Refuses options that do not apply to reading this format.
    fn check_reader(self, name: &str, options: &ConvertOptions) -> Result<(), ConvertError> {
        if !self.is_available() {
            return Err(missing(self));
        }
        if options.names.is_some() && self.capabilities().tensor_names {
            return Err(ConvertError::Unsupported(format!(
                "--names applies to Paddle inputs, which have no tensor names; {name} holds names of its own"
            )));
        }
        if options.batch_rows.is_some() && options.batch_bytes.is_some() {
            return Err(ConvertError::Unsupported(
                "batch rows and batch bytes exclude each other: give one".into(),
            ));
        }
        Ok(())
    }

    /// `reader` with the column selection (of formats whose reader has
    /// none) and the re-batching of `options`.
    fn finish_reader(
        self,
        reader: BoxBatchReader<'static, ConvertError>,
        options: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        let reader: BoxBatchReader<'static, ConvertError> = match &options.columns {
            Some(columns)
                if !matches!(
                    self,
                    Format::ArrowFile | Format::ArrowStream | Format::Parquet
                ) =>
            {
                Box::new(Selected {
                    inner: reader,
                    columns: columns.clone(),
                    index: 0,
                })
            }
            _ => reader,
        };
        Ok(match (options.batch_rows, options.batch_bytes) {
            (Some(rows), _) => Box::new(rebatch(reader, rows)?),
            (None, Some(bytes)) => Box::new(rebatch_bytes(reader, bytes)?),
            (None, None) => reader,
        })
    }

    /// Creates a writer of this format to `path`, replaced atomically when
    /// the writer finishes (see [`AtomicFile`]): a writer dropped unfinished,
    /// or one that fails, leaves what was at `path` untouched.
    ///
    /// `metadata` is the file's own key/value metadata, for a format that
    /// has some ([`Capabilities::file_metadata`]; ignored otherwise);
    /// [`ConvertOptions::small_lists`] is for Arrow and Parquet. The writer
    /// refuses, with [`ConvertError::Unsupported`], what the format cannot
    /// hold ([`Capabilities::max_batches`], [`Capabilities::tensors_per_batch`]).
    /// If the batches are read from a file, check first that `path` is not
    /// that file ([`crate::atomic::ensure_distinct`], which [`convert`] does).
    ///
    /// ```
    /// use lodt::convert::{ConvertError, Format};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("x.pdtensor");
    /// let mut writer = Format::PaddleTensor.create_writer(&path, Default::default(), &Default::default())?;
    /// let err = writer.write(&lodt::Batch::new()).unwrap_err();
    /// assert!(matches!(err, ConvertError::Unsupported(_)));
    /// drop(writer);
    /// assert!(!path.exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_writer(
        self,
        path: impl AsRef<Path>,
        metadata: BTreeMap<String, String>,
        options: &ConvertOptions,
    ) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
        let path = path.as_ref();
        self.check_writer(options)?;
        // A pipe or a device (a FIFO, /dev/stdout) is written as a stream:
        // renaming a file over it would replace it.
        if path.exists() && !is_regular(path) {
            let sink = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|source| ConvertError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
            return self.create_stream_writer(sink, metadata, options);
        }
        let metadata = if self.capabilities().file_metadata {
            metadata
        } else {
            BTreeMap::new()
        };
        Ok(match self {
            Format::Lodt => self.checked(format::Writer::create(path, metadata)?),
            Format::PaddleTensor => {
                self.checked(PaddleBatchWriter::new(sink(path)?, PaddleFile::Tensor))
            }
            Format::PaddleCombined => {
                self.checked(PaddleBatchWriter::new(sink(path)?, PaddleFile::Combined))
            }
            Format::ArrowFile | Format::ArrowStream | Format::Parquet => {
                arrow_side::create_writer(self, sink(path)?, options)?
            }
        })
    }

    /// Creates a writer of this format to `sink` (a pipe, stdout): the
    /// bytes go out as they are written, and `finish` flushes them. Every
    /// format can be written in order (Parquet and Arrow IPC files put their
    /// footer last). Options as for [`Format::create_writer`].
    ///
    /// ```
    /// use lodt::{batch::copy, convert::{ConvertOptions, Format}};
    /// let options = ConvertOptions::default();
    /// let reader = Format::PaddleTensor.open_reader("tests/data/paddle/seed_2level_int64.pdtensor", &options)?;
    /// let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    /// struct Sink(std::sync::mpsc::Sender<Vec<u8>>);
    /// impl std::io::Write for Sink {
    ///     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.send(b.to_vec()).ok(); Ok(b.len()) }
    ///     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
    /// }
    /// let writer = Format::ArrowStream.create_stream_writer(Sink(tx), Default::default(), &options)?;
    /// copy(reader, writer, |_| {})?;
    /// let bytes: Vec<u8> = rx.try_iter().flatten().collect();
    /// let back = Format::ArrowStream.open_stream(std::io::Cursor::new(bytes), "pipe", &options)?;
    /// assert_eq!(back.count(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_stream_writer(
        self,
        sink: impl std::io::Write + Send + 'static,
        metadata: BTreeMap<String, String>,
        options: &ConvertOptions,
    ) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
        self.check_writer(options)?;
        let metadata = if self.capabilities().file_metadata {
            metadata
        } else {
            BTreeMap::new()
        };
        let sink = StreamSink(BufWriter::new(Box::new(sink)));
        Ok(match self {
            Format::Lodt => self.checked(format::Writer::try_new(sink, metadata)?),
            Format::PaddleTensor => self.checked(PaddleBatchWriter::new(sink, PaddleFile::Tensor)),
            Format::PaddleCombined => {
                self.checked(PaddleBatchWriter::new(sink, PaddleFile::Combined))
            }
            Format::ArrowFile | Format::ArrowStream | Format::Parquet => {
                arrow_side::create_writer(self, sink, options)?
            }
        })
    }

    /// Refuses options that do not apply to writing this format.
    fn check_writer(self, options: &ConvertOptions) -> Result<(), ConvertError> {
        if !self.is_available() {
            return Err(missing(self));
        }
        #[cfg(feature = "arrow")]
        if self != Format::Parquet
            && let Some(c) = options.compression
            && c != crate::arrow::Compression::None
        {
            return Err(ConvertError::Unsupported(format!(
                "compression ({c}) applies to Parquet output; a {} file is written uncompressed",
                self.extension()
            )));
        }
        let _ = options;
        Ok(())
    }

    /// `writer`, boxed, refusing what the format cannot hold, and
    /// committing its output when it finishes.
    fn checked<W>(self, writer: W) -> BoxBatchWriter<'static, ConvertError>
    where
        W: BatchWriter + Send + 'static,
        W::Output: Commit,
        ConvertError: From<W::Error>,
    {
        Box::new(Checked {
            inner: writer,
            format: self,
        })
    }

    /// The format's first extension, with its dot.
    fn extension(self) -> String {
        format!(
            ".{}",
            self.extensions().first().copied().unwrap_or_default()
        )
    }
}

/// Every known extension, for error messages: `.lodt, …, .pdparams or .pdiparams`.
fn known_extensions() -> String {
    let all: Vec<String> = Format::ALL
        .iter()
        .flat_map(|f| f.extensions().iter().map(|e| format!(".{e}")))
        .collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => all.join(""),
    }
}

/// How to convert.
///
/// ```
/// let options = lodt::convert::ConvertOptions { batch_rows: Some(32), ..Default::default() };
/// assert!(options.names.is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Names for the tensors of an input whose format stores none (Paddle),
    /// in file order (default `tensor0`, `tensor1`, …). An error for other
    /// inputs.
    pub names: Option<Vec<String>>,
    /// Regroup the top-level rows into batches of this many rows.
    pub batch_rows: Option<usize>,
    /// Write Arrow `List` (32-bit offsets) instead of `LargeList`.
    pub small_lists: bool,
    /// Regroup the rows by size (see [`BatchBytes`]); excludes
    /// [`ConvertOptions::batch_rows`].
    pub batch_bytes: Option<BatchBytes>,
    /// Read only these tensors (Arrow and Parquet columns), in this order.
    /// For Arrow and Parquet inputs the other columns are not decoded, so a
    /// file with columns lodt cannot read (strings) converts with the others
    /// selected.
    pub columns: Option<Vec<String>>,
    /// Parquet output: the page compression (`None`: Snappy, as pyarrow).
    /// Other outputs refuse a codec other than `Compression::None`.
    #[cfg(feature = "arrow")]
    pub compression: Option<crate::arrow::Compression>,
    /// Arrow and Parquet input: what to do with null lists.
    #[cfg(feature = "arrow")]
    pub null_lists: crate::arrow::NullLists,
    /// Parquet input: the most bytes one batch may decode to
    /// ([`ArrowOptions::decode_budget`](crate::arrow::ArrowOptions::decode_budget);
    /// `None`: [`DEFAULT_DECODE_BUDGET`](crate::arrow::DEFAULT_DECODE_BUDGET)).
    #[cfg(feature = "arrow")]
    pub decode_budget: Option<u64>,
    /// Arrow and Parquet output: what to do with batches whose metadata
    /// differs from the first batch's.
    #[cfg(feature = "arrow")]
    pub metadata_policy: crate::arrow::MetadataPolicy,
}

/// An error converting a dataset.
///
/// ```
/// let err = lodt::convert::Format::from_path("x.txt").unwrap_err();
/// assert!(err.to_string().contains("x.txt"));
/// assert!(err.to_string().ends_with(".pdparams or .pdiparams"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The extension names no supported format.
    #[error("cannot tell the format of {path}: expected {}", known_extensions())]
    UnknownExtension {
        /// The path.
        path: String,
    },
    /// The format needs a cargo feature this build lacks.
    #[error("{format} needs lodt built with the `{feature}` feature")]
    FeatureMissing {
        /// The format.
        format: &'static str,
        /// The feature.
        feature: &'static str,
    },
    /// The conversion cannot be expressed in the output format.
    #[error("{0}")]
    Unsupported(String),
    /// An error of the `.lodt` format.
    #[error(transparent)]
    Format(#[from] format::FormatError),
    /// An error of the Paddle format.
    #[error(transparent)]
    Paddle(#[from] paddle::PaddleError),
    /// An error of Arrow, Parquet or their mapping.
    #[cfg(feature = "arrow")]
    #[error(transparent)]
    Arrow(#[from] crate::arrow::ArrowError),
    /// An error of the LoD model.
    #[error(transparent)]
    Core(#[from] crate::Error),
    /// An I/O error.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// An error of a safe write (see [`crate::atomic`]): among them
    /// [`AtomicError::SameFile`], an output that is the input, and
    /// [`AtomicError::Locked`], an output another process is writing.
    #[error(transparent)]
    Atomic(#[from] AtomicError),
}

/// Converts `input` to `output`, each in the format its extension names
/// ([`Format::from_path`]): opens a reader, creates a writer, and copies,
/// calling `progress` after each batch. Returns what was written.
///
/// `output` is replaced atomically (a failed conversion leaves what was
/// there untouched), and is refused with [`AtomicError::SameFile`], before
/// anything is written, when it is `input` itself (also through a symbolic
/// or hard link). A `.lodt` output keeps the input's file metadata.
///
/// ```
/// use lodt::convert::{convert, ConvertOptions};
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("params.lodt");
/// let names = "a,b,c,d,e,f,g,h".split(',').map(String::from).collect();
/// let options = ConvertOptions { names: Some(names), ..Default::default() };
/// let stats = convert("tests/data/paddle/combined.pdparams", &out, &options, |_| {})?;
/// assert_eq!(stats.tensors, 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn convert(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    options: &ConvertOptions,
    progress: impl FnMut(&WriteStats),
) -> Result<WriteStats, ConvertError> {
    let (input, output) = (input.as_ref(), output.as_ref());
    let (from, to) = (Format::from_path(input)?, Format::from_path(output)?);
    crate::atomic::ensure_distinct(input, output)?;
    let reader = from.open_reader(input, options)?;
    let writer = to.create_writer(output, reader.metadata(), options)?;
    let ((), stats) = copy(reader, writer, progress)?;
    Ok(stats)
}

/// What converting `input` (in format `from`) to `to` changes in the
/// Arrow column types (see [`crate::arrow::TypeChange`]), for an Arrow or
/// Parquet file converted to Arrow or Parquet; empty otherwise (and for an
/// input that is not a regular file). Only [`ConvertOptions::columns`] are
/// considered.
///
/// ```
/// use lodt::convert::{type_changes, ConvertOptions, Format};
/// let input = "tests/data/arrow/batch0.parquet"; // written by pyarrow
/// let changes = type_changes(input, Format::Parquet, Format::ArrowFile, &ConvertOptions::default())?;
/// assert_eq!(changes[0].to_string(), "words: list<list<int64>> becomes large_list<large_list<int64>>");
/// let small = ConvertOptions { small_lists: true, ..Default::default() };
/// let changes = type_changes(input, Format::Parquet, Format::Parquet, &small)?;
/// assert_eq!(changes.len(), 1);
/// assert_eq!(changes[0].to_string(), "frames: list<fixed_size_list<float, 4>> becomes list<arrow.fixed_shape_tensor<float, [4]>>");
/// # Ok::<(), lodt::convert::ConvertError>(())
/// ```
#[cfg(feature = "arrow")]
pub fn type_changes(
    input: impl AsRef<Path>,
    from: Format,
    to: Format,
    options: &ConvertOptions,
) -> Result<Vec<crate::arrow::TypeChange>, ConvertError> {
    let arrow = |f: Format| matches!(f, Format::ArrowFile | Format::ArrowStream | Format::Parquet);
    let input = input.as_ref();
    if !arrow(from) || !arrow(to) || !is_regular(input) || !from.is_available() {
        return Ok(Vec::new());
    }
    let schema = arrow_side::schema(from, open(input)?, input.display().to_string())?;
    let list_type = if options.small_lists {
        crate::arrow::ListType::List
    } else {
        crate::arrow::ListType::LargeList
    };
    let mut changes = crate::arrow::type_changes(&schema, list_type);
    if let Some(columns) = &options.columns {
        changes.retain(|c| columns.contains(&c.column));
    }
    Ok(changes)
}

/// Whether `path` is a regular file (following links): not a pipe, a
/// socket or a device.
fn is_regular(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The error for a format read from a pipe that needs to seek.
fn not_streamable(format: Format, name: &str) -> ConvertError {
    let streamable: Vec<String> = Format::ALL
        .iter()
        .filter(|f| f.capabilities().streamable)
        .map(|f| f.extension())
        .collect();
    ConvertError::Unsupported(format!(
        "{name} is a pipe or a device, and the {} format needs a seekable file (its footer is at the end); the formats read from a pipe are {}",
        format.name(),
        streamable.join(", ")
    ))
}

/// The tensor names of [`ConvertOptions::names`], borrowed.
fn paddle_names(options: &ConvertOptions) -> Option<Vec<&str>> {
    options
        .names
        .as_ref()
        .map(|n| n.iter().map(String::as_str).collect())
}

/// A reader that keeps only some tensors of each batch, in a given order.
struct Selected<R> {
    inner: R,
    columns: Vec<String>,
    index: usize,
}

impl<R: BatchReader<Error = ConvertError>> Iterator for Selected<R> {
    type Item = Result<Batch, ConvertError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = match self.inner.next()? {
            Ok(batch) => batch,
            Err(e) => return Some(Err(e)),
        };
        let index = self.index;
        self.index += 1;
        let mut out = Batch::new();
        *out.metadata_mut() = batch.metadata().clone();
        for column in &self.columns {
            let Some(tensor) = batch.get(column) else {
                return Some(Err(ConvertError::Unsupported(format!(
                    "batch {index} has no tensor {column:?}; it has: {}",
                    crate::error::name_list(batch.names())
                ))));
            };
            if let Err(e) = out.push(column.clone(), tensor.clone()) {
                return Some(Err(e.into()));
            }
        }
        Some(Ok(out))
    }
}

impl<R: BatchReader<Error = ConvertError>> BatchReader for Selected<R> {
    type Error = ConvertError;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.inner.metadata()
    }

    fn num_batches(&self) -> Option<usize> {
        self.inner.num_batches()
    }
}

/// A pipe or stdout, buffered; [`Commit`] flushes it.
struct StreamSink(BufWriter<Box<dyn std::io::Write + Send>>);

impl std::io::Write for StreamSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Commit for StreamSink {
    fn commit(mut self) -> Result<(), ConvertError> {
        std::io::Write::flush(&mut self).map_err(|source| ConvertError::Io {
            path: "the output stream".into(),
            source,
        })
    }
}

fn open(path: &Path) -> Result<File, ConvertError> {
    File::open(path).map_err(|source| ConvertError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// A new file at `path`, buffered, renamed into place by [`Commit`].
fn sink(path: &Path) -> Result<BufWriter<AtomicFile>, ConvertError> {
    Ok(BufWriter::new(AtomicFile::create(path)?))
}

/// What a file writer's output needs once the writer is finished.
trait Commit {
    /// Puts the file in place.
    fn commit(self) -> Result<(), ConvertError>;
}

/// The `.lodt` writer renames its file itself, in `finish`.
impl Commit for FileSink {
    fn commit(self) -> Result<(), ConvertError> {
        Ok(())
    }
}

impl Commit for BufWriter<AtomicFile> {
    fn commit(self) -> Result<(), ConvertError> {
        let file = self.into_inner().map_err(|e| {
            let (source, sink) = e.into_parts();
            AtomicError::Io {
                action: "writing",
                path: sink.get_ref().temp_path().to_path_buf(),
                source,
            }
        })?;
        file.commit()?;
        Ok(())
    }
}

/// A file writer that refuses what its format cannot hold and commits its
/// output when it finishes.
struct Checked<W> {
    inner: W,
    format: Format,
}

impl<W> Checked<W> {
    fn one_tensor_error(&self, found: &str) -> ConvertError {
        ConvertError::Unsupported(format!(
            "a {} file holds exactly one tensor, {found}",
            self.format.extension()
        ))
    }
}

impl<W> BatchWriter for Checked<W>
where
    W: BatchWriter,
    W::Output: Commit,
    ConvertError: From<W::Error>,
{
    type Error = ConvertError;
    type Output = ();

    fn write(&mut self, batch: &Batch) -> Result<(), ConvertError> {
        let capabilities = self.format.capabilities();
        if let Some(max) = capabilities.max_batches
            && self.inner.stats().batches >= max as u64
        {
            return Err(ConvertError::Unsupported(format!(
                "a {} file holds {}, but the input has more",
                self.format.extension(),
                match max {
                    1 => "one set of tensors (one batch)".to_string(),
                    n => format!("{n} batches"),
                }
            )));
        }
        match capabilities.tensors_per_batch {
            Some(1) if batch.len() != 1 => {
                return Err(self.one_tensor_error(&format!(
                    "the input batch has {} ({})",
                    batch.len(),
                    crate::error::name_list(batch.names())
                )));
            }
            Some(n) if batch.len() != n => {
                return Err(ConvertError::Unsupported(format!(
                    "a {} file holds exactly {n} tensors, the input batch has {}",
                    self.format.extension(),
                    batch.len()
                )));
            }
            _ => {}
        }
        Ok(self.inner.write(batch)?)
    }

    fn stats(&self) -> WriteStats {
        self.inner.stats()
    }

    fn finish(&mut self) -> Result<(), ConvertError> {
        if self.format.capabilities().tensors_per_batch.is_some() && self.stats().batches == 0 {
            return Err(self.one_tensor_error("the input has no batch"));
        }
        self.inner.finish()?.commit()
    }
}

/// A reader whose batch count is known from elsewhere (a `.lodt` footer read
/// beside the stream).
struct Counted<R> {
    inner: R,
    total: usize,
}

impl<R: BatchReader> Iterator for Counted<R> {
    type Item = R::Item;

    fn next(&mut self) -> Option<R::Item> {
        self.inner.next()
    }
}

impl<R: BatchReader> BatchReader for Counted<R> {
    type Error = R::Error;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.inner.metadata()
    }

    fn num_batches(&self) -> Option<usize> {
        Some(self.total)
    }
}

/// The Arrow IPC and Parquet side of [`Format`].
#[cfg(feature = "arrow")]
mod arrow_side {
    use super::{Commit, ConvertError, ConvertOptions, Format};
    use crate::arrow::ipc::{IpcFileReader, IpcFileWriter, IpcStreamReader, IpcStreamWriter};
    use crate::arrow::{ArrowOptions, ArrowWriteOptions, ListType};
    use crate::batch::{BatchReader, BoxBatchReader, BoxBatchWriter};
    use arrow_schema::SchemaRef;
    use std::fs::File;
    use std::io::{Read, Write};

    fn read_options(options: &ConvertOptions) -> ArrowOptions {
        let budget = options
            .decode_budget
            .unwrap_or(crate::arrow::DEFAULT_DECODE_BUDGET);
        ArrowOptions::default()
            .with_null_lists(options.null_lists)
            .with_decode_budget(budget)
    }

    /// The reader of `file`, whose errors name it `name` (with the section).
    pub(super) fn open_reader(
        format: Format,
        file: File,
        name: String,
        options: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        let arrow = read_options(options);
        let columns = options.columns.as_deref();
        Ok(match format {
            Format::ArrowFile => {
                let reader = IpcFileReader::try_new_named(file, name, &arrow)?;
                match columns {
                    Some(c) => Box::new(reader.with_columns(c)?.err_into()),
                    None => Box::new(reader.err_into()),
                }
            }
            Format::ArrowStream => open_stream(format, Box::new(file), name, options)?,
            _ => parquet_reader(file, name, &arrow, columns)?,
        })
    }

    /// The reader of an IPC stream read from `reader`.
    pub(super) fn open_stream(
        format: Format,
        reader: Box<dyn Read + Send>,
        name: String,
        options: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        debug_assert_eq!(format, Format::ArrowStream);
        let reader = IpcStreamReader::try_new_named(reader, name, &read_options(options))?;
        Ok(match options.columns.as_deref() {
            Some(c) => Box::new(reader.with_columns(c)?.err_into()),
            None => Box::new(reader.err_into()),
        })
    }

    /// The Arrow schema of `file`.
    pub(super) fn schema(
        format: Format,
        file: File,
        name: String,
    ) -> Result<SchemaRef, ConvertError> {
        let options = ArrowOptions::default();
        Ok(match format {
            Format::ArrowFile => IpcFileReader::try_new_named(file, name, &options)?.schema(),
            Format::ArrowStream => IpcStreamReader::try_new_named(file, name, &options)?.schema(),
            _ => parquet_schema(file, name)?,
        })
    }

    pub(super) fn create_writer<W>(
        format: Format,
        sink: W,
        options: &ConvertOptions,
    ) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError>
    where
        W: Write + Send + Commit + 'static,
    {
        let list_type = if options.small_lists {
            ListType::List
        } else {
            ListType::LargeList
        };
        let mut write = ArrowWriteOptions::default()
            .with_arrow(ArrowOptions::default().with_list_type(list_type))
            .with_metadata_policy(options.metadata_policy);
        write.compression = options.compression;
        Ok(match format {
            Format::ArrowFile => format.checked(IpcFileWriter::new(sink, &write)),
            Format::ArrowStream => format.checked(IpcStreamWriter::new(sink, &write)),
            _ => parquet_writer(format, sink, &write)?,
        })
    }

    #[cfg(feature = "parquet")]
    fn parquet_reader(
        file: File,
        name: String,
        options: &ArrowOptions,
        columns: Option<&[String]>,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        let reader = crate::arrow::parquet::ParquetReader::try_new_named(file, name, options)?;
        Ok(match columns {
            Some(c) => Box::new(reader.with_columns(c)?.err_into()),
            None => Box::new(reader.err_into()),
        })
    }

    #[cfg(feature = "parquet")]
    fn parquet_schema(file: File, name: String) -> Result<SchemaRef, ConvertError> {
        let reader =
            crate::arrow::parquet::ParquetReader::try_new_named(file, name, &Default::default())?;
        Ok(reader.schema().clone())
    }

    #[cfg(feature = "parquet")]
    fn parquet_writer<W>(
        format: Format,
        sink: W,
        options: &ArrowWriteOptions,
    ) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError>
    where
        W: Write + Send + Commit + 'static,
    {
        let writer = crate::arrow::parquet::ParquetWriter::try_new(sink, options)?;
        Ok(format.checked(writer))
    }

    #[cfg(not(feature = "parquet"))]
    fn parquet_reader(
        _: File,
        _: String,
        _: &ArrowOptions,
        _: Option<&[String]>,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        Err(super::missing(Format::Parquet))
    }

    #[cfg(not(feature = "parquet"))]
    fn parquet_schema(_: File, _: String) -> Result<SchemaRef, ConvertError> {
        Err(super::missing(Format::Parquet))
    }

    #[cfg(not(feature = "parquet"))]
    fn parquet_writer<W>(
        format: Format,
        _: W,
        _: &ArrowWriteOptions,
    ) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
        Err(super::missing(format))
    }
}

/// Without the `arrow` feature, Arrow and Parquet files are refused.
#[cfg(not(feature = "arrow"))]
mod arrow_side {
    use super::{ConvertError, ConvertOptions, Format, missing};
    use crate::batch::{BoxBatchReader, BoxBatchWriter};
    use std::fs::File;
    use std::io::Read;

    pub(super) fn open_reader(
        format: Format,
        _: File,
        _: String,
        _: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        Err(missing(format))
    }

    pub(super) fn open_stream(
        format: Format,
        _: Box<dyn Read + Send>,
        _: String,
        _: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        Err(missing(format))
    }

    pub(super) fn create_writer<W>(
        format: Format,
        _: W,
        _: &ConvertOptions,
    ) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
        Err(missing(format))
    }
}

/// The error for a format this build lacks.
fn missing(format: Format) -> ConvertError {
    ConvertError::FeatureMissing {
        format: format.name(),
        feature: format.feature().unwrap_or_default(),
    }
}
