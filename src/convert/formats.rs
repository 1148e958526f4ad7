//! [`Format`]: the one list of the formats lodt converts, what each can
//! hold ([`Capabilities`]), and how each is opened and created.

use super::*;

/// A file format lodt converts from and to: the one list of them.
///
/// ```
/// use lodt::convert::Format;
/// assert_eq!(Format::from_path("a/b.parquet")?, Format::Parquet);
/// assert_eq!(Format::from_path("x.PDPARAMS")?, Format::PaddleCombined);
/// assert!(Format::from_path("x.csv").is_err());
/// assert_eq!(Format::ALL.len(), 7);
/// assert_eq!(Format::from_path("corpus_text_document.idx")?, Format::Megatron);
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
    /// `.idx` / `.bin`: a Megatron indexed dataset, the pair `PREFIX.idx` +
    /// `PREFIX.bin` (see [`crate::megatron`]).
    Megatron,
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
    /// stream), Arrow IPC streams and Paddle files. Every format but a Megatron dataset (two files) can be
    /// written to a pipe ([`Format::create_stream_writer`]).
    pub streamable: bool,
    /// Whether a tensor's rows may have an element shape (`[N, 2]`): a
    /// Megatron dataset holds scalar tokens only.
    pub element_shapes: bool,
    /// Whether a file read back gives the batches written, one for one: a
    /// Megatron dataset keeps documents, not batches (its reader groups
    /// whole documents into batches of up to
    /// [`megatron::BATCH_BYTES`](crate::megatron::BATCH_BYTES)).
    pub keeps_batches: bool,
}

impl Format {
    /// Every format, in the order of the [module docs](super).
    ///
    /// See the [type-level example](Format).
    pub const ALL: [Format; 7] = [
        Format::Lodt,
        Format::Parquet,
        Format::ArrowFile,
        Format::ArrowStream,
        Format::PaddleTensor,
        Format::PaddleCombined,
        Format::Megatron,
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
            Format::Megatron => &["idx", "bin"],
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
            Format::Megatron => "Megatron indexed dataset",
        }
    }

    /// The name a reader of this format gives tensor `i` of a batch when
    /// [`ConvertOptions::names`] gives none, for the formats that store no
    /// names ([`Capabilities::tensor_names`]): `tokens` for a Megatron
    /// dataset (its one tensor), `tensor0`, `tensor1`, … otherwise.
    ///
    /// ```
    /// use lodt::convert::Format;
    /// assert_eq!(Format::Megatron.unnamed_tensor(0), "tokens");
    /// assert_eq!(Format::PaddleCombined.unnamed_tensor(2), "tensor2");
    /// ```
    pub fn unnamed_tensor(self, i: usize) -> String {
        match self {
            Format::Megatron => "tokens".into(),
            _ => format!("tensor{i}"),
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
            element_shapes: true,
            keeps_batches: true,
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
            // One unnamed token tensor of one dtype, in whole documents.
            Format::Megatron => Capabilities {
                tensors_per_batch: Some(1),
                tensor_names: false,
                batch_metadata: MetadataScope::Dropped,
                all_dtypes: false,
                mixed_schemas: false,
                streamable: false,
                empty_batches: false,
                element_shapes: false,
                keeps_batches: false,
                ..any
            },
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
            Format::Lodt | Format::PaddleTensor | Format::PaddleCombined | Format::Megatron => None,
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
            Format::Lodt | Format::PaddleTensor | Format::PaddleCombined | Format::Megatron => true,
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
            Format::Megatron => {
                let reader = crate::megatron::MegatronReader::open(path)?;
                let name = match names.and_then(|n| n.first().copied()) {
                    Some(name) => name.to_owned(),
                    None => self.unnamed_tensor(0),
                };
                Box::new(reader.with_name(name).err_into())
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
    pub(super) fn check_reader(
        self,
        name: &str,
        options: &ConvertOptions,
    ) -> Result<(), ConvertError> {
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
    pub(super) fn finish_reader(
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
            Format::Lodt => {
                self.checked(format::Writer::create_with(path, metadata, options.lodt)?)
            }
            Format::PaddleTensor => {
                self.checked(PaddleBatchWriter::new(sink(path)?, PaddleFile::Tensor))
            }
            Format::PaddleCombined => {
                self.checked(PaddleBatchWriter::new(sink(path)?, PaddleFile::Combined))
            }
            Format::ArrowFile | Format::ArrowStream | Format::Parquet => {
                arrow_side::create_writer(self, sink(path)?, options)?
            }
            Format::Megatron => self.checked(crate::megatron::MegatronWriter::create(path)?),
        })
    }

    /// Creates a writer of this format to `sink` (a pipe, stdout): the
    /// bytes go out as they are written, and `finish` flushes them. Every
    /// format can be written in order (Parquet and Arrow IPC files put their
    /// footer last), but a Megatron dataset, which is two files. Options as
    /// for [`Format::create_writer`].
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
            Format::Lodt => {
                self.checked(format::Writer::try_new_with(sink, metadata, options.lodt)?)
            }
            Format::PaddleTensor => self.checked(PaddleBatchWriter::new(sink, PaddleFile::Tensor)),
            Format::PaddleCombined => {
                self.checked(PaddleBatchWriter::new(sink, PaddleFile::Combined))
            }
            Format::ArrowFile | Format::ArrowStream | Format::Parquet => {
                arrow_side::create_writer(self, sink, options)?
            }
            Format::Megatron => {
                return Err(ConvertError::Unsupported(
                    "a Megatron dataset is two files (PREFIX.bin and PREFIX.idx): it cannot be written to a pipe; give an output path".into(),
                ));
            }
        })
    }

    /// Refuses options that do not apply to writing this format.
    pub(super) fn check_writer(self, options: &ConvertOptions) -> Result<(), ConvertError> {
        if !self.is_available() {
            return Err(missing(self));
        }
        #[cfg(feature = "arrow")]
        if self != Format::Parquet
            && let Some(c) = options.compression
            && c != crate::arrow::ParquetCompression::None
        {
            return Err(ConvertError::Unsupported(format!(
                "compression ({c}) applies to Parquet output; a {} file is written uncompressed",
                self.extension()
            )));
        }
        if self != Format::Lodt && options.lodt.compression != format::Compression::None {
            return Err(ConvertError::Unsupported(format!(
                "compression ({}) applies to .lodt output; a {} file is written by its own rules",
                options.lodt.compression,
                self.extension()
            )));
        }
        Ok(())
    }

    /// `writer`, boxed, refusing what the format cannot hold, and
    /// committing its output when it finishes.
    pub(super) fn checked<W>(self, writer: W) -> BoxBatchWriter<'static, ConvertError>
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
    pub(super) fn extension(self) -> String {
        format!(
            ".{}",
            self.extensions().first().copied().unwrap_or_default()
        )
    }
}

/// Every known extension, for error messages: `.lodt, …, .pdparams or .pdiparams`.
pub(super) fn known_extensions() -> String {
    let all: Vec<String> = Format::ALL
        .iter()
        .flat_map(|f| f.extensions().iter().map(|e| format!(".{e}")))
        .collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => all.join(""),
    }
}
