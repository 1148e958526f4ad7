//! [`Endpoint`]: one side of a conversion, a file in a [`Format`] or a
//! sharded dataset directory, and how a path is placed as one.

use super::*;
use crate::dataset::{Dataset, DatasetWriter, DatasetWriterOptions};

/// One side of a conversion: a file in one of the [`Format`]s, or a sharded
/// dataset directory (`spec/DATASET.md`), read batch by batch in dataset
/// order and written as `.lodt` shards.
///
/// [`Endpoint::input`] and [`Endpoint::output`] place a path; the CLI's
/// `lodt convert` and Python's `lodt.convert()` place their paths with them,
/// so the same paths mean the same thing from every front end.
///
/// ```
/// use lodt::convert::{Endpoint, Format};
/// let dir = tempfile::tempdir()?;
/// assert_eq!(Endpoint::output(dir.path().join("out.parquet"))?, Endpoint::File(Format::Parquet));
/// assert_eq!(Endpoint::output(dir.path().join("train"))?, Endpoint::Dataset); // new, no extension
/// assert_eq!(Endpoint::input(dir.path())?, Endpoint::Dataset); // an existing directory
/// assert!(Endpoint::output(dir.path().join("out.csv")).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A file in this format.
    File(Format),
    /// A sharded dataset directory.
    Dataset,
    /// A directory in another tool's layout, read as one input; as an
    /// output, a directory of Parquet shards ([`Layout::ParquetFiles`],
    /// asked for by name: [`Endpoint::from_name`]); the other layouts are
    /// inputs only.
    Layout(Layout),
}

impl Endpoint {
    /// Places an input path: a directory in another tool's layout
    /// ([`Layout::detect`]), a dataset when it names one
    /// ([`crate::location::is_dataset`]: another local directory), else a
    /// file in the format its extension names ([`Format::from_path`]).
    ///
    /// ```
    /// use lodt::convert::{Endpoint, Format};
    /// assert_eq!(Endpoint::input("tests/data/arrow/batch0.parquet")?, Endpoint::File(Format::Parquet));
    /// let err = Endpoint::input("in.csv").unwrap_err().to_string();
    /// assert!(err.contains("cannot tell the format of in.csv") && err.contains("a dataset directory"), "{err}");
    /// # Ok::<(), lodt::convert::ConvertError>(())
    /// ```
    pub fn input(path: impl AsRef<Path>) -> Result<Endpoint, ConvertError> {
        let path = path.as_ref();
        if let Some(layout) = Layout::detect(path) {
            return Ok(Endpoint::Layout(layout));
        }
        if crate::location::is_dataset(&path.to_string_lossy()) {
            return Ok(Endpoint::Dataset);
        }
        Format::from_path(path).map(Endpoint::File)
    }

    /// Places an output path. A dataset directory: a directory that exists,
    /// a path ending in `/`, or a path with no extension that does not exist
    /// (`lodt convert demo.lodt train`). A file: a path whose extension names
    /// a [`Format`]. Anything else is [`ConvertError::UnknownExtension`],
    /// whose message names both ways.
    ///
    /// ```
    /// use lodt::convert::{Endpoint, Format};
    /// let dir = tempfile::tempdir()?;
    /// let slash = format!("{}/", dir.path().join("a.b").display());
    /// assert_eq!(Endpoint::output(&slash)?, Endpoint::Dataset); // a trailing slash
    /// assert_eq!(Endpoint::output(dir.path().join("x.Arrow"))?, Endpoint::File(Format::ArrowFile));
    /// std::fs::write(dir.path().join("notes"), b"")?;
    /// assert!(Endpoint::output(dir.path().join("notes")).is_err()); // a file without an extension
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn output(path: impl AsRef<Path>) -> Result<Endpoint, ConvertError> {
        let path = path.as_ref();
        let text = path.as_os_str().to_string_lossy();
        if path.is_dir() || text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR) {
            return Ok(Endpoint::Dataset);
        }
        if path.extension().is_none() && std::fs::symlink_metadata(path).is_err() {
            return Ok(Endpoint::Dataset);
        }
        Format::from_path(path).map(Endpoint::File)
    }

    /// The endpoint a name gives, as the CLI's `--from` and `--to` and
    /// Python's `to=` spell it: a format's extension (`parquet`, `.lodt`,
    /// `arrows`, … as [`Format::from_extension`]), `dataset` (a lodt
    /// dataset directory) or `parquet-dir` (a directory of Parquet files,
    /// [`Layout::ParquetFiles`]). Case-insensitive. An output is placed by
    /// its path ([`Endpoint::output`]) unless a name is given: a directory
    /// of Parquet files is only ever written when asked for by name.
    ///
    /// ```
    /// use lodt::convert::{Endpoint, Format, Layout};
    /// assert_eq!(Endpoint::from_name("parquet-dir")?, Endpoint::Layout(Layout::ParquetFiles));
    /// assert_eq!(Endpoint::from_name(".Parquet")?, Endpoint::File(Format::Parquet));
    /// assert_eq!(Endpoint::from_name("dataset")?, Endpoint::Dataset);
    /// let err = Endpoint::from_name("csv").unwrap_err().to_string();
    /// assert!(err.contains("unknown format \"csv\"") && err.contains("parquet-dir"), "{err}");
    /// # Ok::<(), lodt::convert::ConvertError>(())
    /// ```
    pub fn from_name(name: &str) -> Result<Endpoint, ConvertError> {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "parquet-dir" => Ok(Endpoint::Layout(Layout::ParquetFiles)),
            "dataset" => Ok(Endpoint::Dataset),
            other => Format::from_extension(other.trim_start_matches('.'))
                .map(Endpoint::File)
                .ok_or_else(|| {
                    let formats: Vec<&str> = Format::ALL
                        .iter()
                        .flat_map(|f| f.extensions().iter().copied())
                        .collect();
                    ConvertError::Unsupported(format!(
                        "unknown format {name:?}: expected {}, dataset (a lodt dataset directory) or parquet-dir (a directory of Parquet files)",
                        formats.join(", ")
                    ))
                }),
        }
    }

    /// A short name of the endpoint: the format's ([`Format::name`]), or
    /// `lodt dataset`.
    ///
    /// ```
    /// use lodt::convert::{Endpoint, Format};
    /// assert_eq!(Endpoint::Dataset.name(), "lodt dataset");
    /// assert_eq!(Endpoint::File(Format::Parquet).name(), "Parquet");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::File(format) => format.name(),
            Endpoint::Dataset => "lodt dataset",
            Endpoint::Layout(layout) => layout.name(),
        }
    }

    /// The format of the files the endpoint is made of: a file's, a
    /// dataset's shards (`.lodt`), a layout's files (none for MDS shards).
    /// An output's codec options ([`ConvertOptions::set_output_codec`]) are
    /// this format's (Parquet's for a directory of Parquet files).
    ///
    /// ```
    /// use lodt::convert::{Endpoint, Format, Layout};
    /// assert_eq!(Endpoint::Dataset.file_format(), Some(Format::Lodt));
    /// assert_eq!(Endpoint::File(Format::Parquet).file_format(), Some(Format::Parquet));
    /// assert_eq!(Endpoint::Layout(Layout::HuggingFace).file_format(), Some(Format::ArrowStream));
    /// assert_eq!(Endpoint::Layout(Layout::Mds).file_format(), None);
    /// ```
    pub fn file_format(self) -> Option<Format> {
        match self {
            Endpoint::File(format) => Some(format),
            Endpoint::Dataset => Some(Format::Lodt),
            Endpoint::Layout(layout) => layout.format(),
        }
    }

    /// Opens `path` as a reader of batches: a file as
    /// [`Format::open_reader`] does, or a dataset's batches in dataset order
    /// (its shards' body checksums checked), with the dataset's metadata as
    /// the reader's [`BatchReader::metadata`]. Options as for
    /// [`Format::open_reader`]; a dataset has tensor names of its own, so
    /// [`ConvertOptions::names`] is refused.
    ///
    /// ```
    /// use lodt::convert::{ConvertOptions, Endpoint};
    /// use lodt::{Batch, BatchReader, LodTensor};
    /// let dir = tempfile::tempdir()?;
    /// let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)])?)?;
    /// w.finish()?;
    /// let mut reader = Endpoint::Dataset.open_reader(dir.path(), &ConvertOptions::default())?;
    /// assert_eq!(reader.num_batches(), Some(1));
    /// assert_eq!(reader.next().transpose()?.unwrap().get("x").unwrap().rows(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_reader(
        self,
        path: impl AsRef<Path>,
        options: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        let path = path.as_ref();
        let format = match self {
            Endpoint::File(format) => return format.open_reader(path, options),
            Endpoint::Layout(layout) => return layout.open_reader(path, options),
            Endpoint::Dataset => Format::Lodt,
        };
        if options.names.is_some() {
            return Err(ConvertError::Unsupported(format!(
                "--names applies to Paddle inputs, which have no tensor names; the dataset {} holds names of its own",
                path.display()
            )));
        }
        format.check_reader(&path.display().to_string(), options)?;
        let reader = DatasetBatches::new(Dataset::open(path)?);
        format.finish_reader(Box::new(reader), options)
    }

    /// Creates a writer to `path`: a file as [`Format::create_writer`] does,
    /// or a new dataset directory of `.lodt` shards of about
    /// [`ConvertOptions::shard_bytes`], in the format version and buffer
    /// compression of [`ConvertOptions::lodt`], with `metadata` as the
    /// dataset's metadata. The dataset is committed when the writer
    /// finishes; one dropped unfinished commits nothing. A dataset that
    /// exists already is refused ([`crate::dataset::DatasetError::AlreadyExists`]).
    ///
    /// [`Endpoint::Layout`]`(`[`Layout::ParquetFiles`]`)` creates a new
    /// directory of Parquet shards, `part-00000.parquet`,
    /// `part-00001.parquet`, …: each file is what [`Format::create_writer`]
    /// writes for Parquet (the same columns and options; one schema and one
    /// metadata map across the shards), and a new shard starts at the first
    /// batch boundary once the current one holds
    /// [`ConvertOptions::shard_bytes`] (default
    /// [`DEFAULT_SHARD_BYTES`](crate::dataset::DEFAULT_SHARD_BYTES)) or
    /// more. The shards are written into a temporary directory beside
    /// `path`, renamed to `path` when the writer finishes
    /// ([`AtomicDir`](crate::atomic::AtomicDir)): a writer dropped
    /// unfinished, or one that fails, leaves nothing. A `path` that exists
    /// and is not an empty directory is refused
    /// ([`AtomicError::Occupied`]). The other layouts are not written.
    ///
    /// ```
    /// use lodt::convert::{ConvertOptions, Endpoint, Layout};
    /// use lodt::{Batch, BatchReader, BatchWriter, LodTensor};
    /// let dir = tempfile::tempdir()?;
    /// let out = dir.path().join("shards");
    /// let options = ConvertOptions { shard_bytes: Some(1), ..Default::default() }; // a shard per batch
    /// let to = Endpoint::from_name("parquet-dir")?;
    /// let mut writer = to.create_writer(&out, Default::default(), &options)?;
    /// for k in 0..2u8 {
    ///     writer.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![k], vec![1], Default::default())?)])?)?;
    /// }
    /// writer.finish()?;
    /// assert!(out.join("part-00000.parquet").is_file() && out.join("part-00001.parquet").is_file());
    /// assert_eq!(Endpoint::input(&out)?, Endpoint::Layout(Layout::ParquetFiles)); // read back as one input
    /// let back = Endpoint::input(&out)?.open_reader(&out, &ConvertOptions::default())?;
    /// assert_eq!(back.count(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// ```
    /// use lodt::convert::{ConvertOptions, Endpoint};
    /// use lodt::{Batch, BatchWriter, LodTensor};
    /// let dir = tempfile::tempdir()?;
    /// let out = dir.path().join("train");
    /// let mut writer = Endpoint::Dataset.create_writer(&out, Default::default(), &ConvertOptions::default())?;
    /// writer.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// writer.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::open(&out)?.num_shards(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_writer(
        self,
        path: impl AsRef<Path>,
        metadata: BTreeMap<String, String>,
        options: &ConvertOptions,
    ) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
        let path = path.as_ref();
        if let Endpoint::File(format) = self {
            if let Some(bytes) = options.shard_bytes {
                return Err(ConvertError::Unsupported(format!(
                    "a shard size ({bytes} bytes) applies to a dataset output (a directory: a new path with no extension, or one ending in /) or a directory of Parquet files (parquet-dir); {} is a {} file",
                    path.display(),
                    format.extension()
                )));
            }
            return format.create_writer(path, metadata, options);
        }
        if let Endpoint::Layout(layout) = self {
            if layout == Layout::ParquetFiles {
                Format::Parquet.check_writer(options)?;
                #[cfg(feature = "parquet")]
                return parquet_dir::create(path, options);
                #[cfg(not(feature = "parquet"))]
                return Err(missing(Format::Parquet));
            }
            return Err(ConvertError::Unsupported(format!(
                "a {} is read, not written: write {} as a lodt dataset, a directory of Parquet files (parquet-dir), or as files",
                layout.name(),
                path.display()
            )));
        }
        Format::Lodt.check_writer(options)?;
        let writer_options = DatasetWriterOptions {
            shard_bytes: options
                .shard_bytes
                .unwrap_or(crate::dataset::DEFAULT_SHARD_BYTES),
            metadata,
            format_version: options.lodt.format_version,
            compression: options.lodt.compression,
            ..Default::default()
        };
        Ok(Box::new(DatasetSink {
            writer: Some(DatasetWriter::create(path, writer_options)?),
            stats: WriteStats::default(),
        }))
    }
}
