//! Converting datasets between file formats, batch by batch: what
//! `lodt convert IN OUT` does.
//!
//! The format of each side is chosen by the file's extension ([`FileKind`]):
//!
//! | extension                   | format                                   | reads | writes |
//! |-----------------------------|------------------------------------------|-------|--------|
//! | `.lodt`                     | lodt's own format (`spec/FORMAT.md`)     | yes   | yes    |
//! | `.parquet`                  | Parquet, one row group per batch         | yes   | yes    |
//! | `.arrow`, `.feather`        | Arrow IPC file                           | yes   | yes    |
//! | `.arrows`                   | Arrow IPC stream                         | yes   | yes    |
//! | `.pdtensor`                 | one PaddlePaddle tensor (`SerializeToStream`) | yes | yes  |
//! | `.pdparams`, `.pdiparams`   | PaddlePaddle `save_combine` file         | yes   | yes    |
//!
//! ```text
//!  IN ──read──▶ Batch, Batch, … ──[rebatch to N rows]──▶ write ──▶ OUT
//! ```
//!
//! Only one batch is in memory at a time (two while re-batching). A `.lodt`
//! input is read sequentially with every body checksum checked. Paddle files
//! hold one unnamed set of tensors: reading one gives a single batch whose
//! tensors are named from [`ConvertOptions::names`] (or `tensor0`, `tensor1`,
//! …); writing one takes a single batch (a `.pdtensor`, a single tensor).

use crate::batch::Batch;
use crate::format::{self, StreamReader, Writer};
use crate::paddle;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// A file format, chosen by extension.
///
/// ```
/// use lodt::convert::FileKind;
/// assert_eq!(FileKind::from_path("a/b.parquet").unwrap(), FileKind::Parquet);
/// assert_eq!(FileKind::from_path("x.PDPARAMS").unwrap(), FileKind::PaddleCombined);
/// assert!(FileKind::from_path("x.csv").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
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

impl FileKind {
    /// The kind of `path`, by its extension (case-insensitive).
    ///
    /// ```
    /// use lodt::convert::FileKind;
    /// assert_eq!(FileKind::from_path("d.lodt").unwrap(), FileKind::Lodt);
    /// ```
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, ConvertError> {
        let path = path.as_ref();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        Ok(match ext.as_str() {
            "lodt" => FileKind::Lodt,
            "parquet" => FileKind::Parquet,
            "arrow" | "feather" => FileKind::ArrowFile,
            "arrows" => FileKind::ArrowStream,
            "pdtensor" => FileKind::PaddleTensor,
            "pdparams" | "pdiparams" => FileKind::PaddleCombined,
            _ => {
                return Err(ConvertError::UnknownExtension {
                    path: path.display().to_string(),
                });
            }
        })
    }

    /// A short name of the format.
    ///
    /// ```
    /// assert_eq!(lodt::convert::FileKind::ArrowStream.name(), "Arrow IPC stream");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Lodt => "lodt",
            FileKind::Parquet => "Parquet",
            FileKind::ArrowFile => "Arrow IPC file",
            FileKind::ArrowStream => "Arrow IPC stream",
            FileKind::PaddleTensor => "Paddle tensor",
            FileKind::PaddleCombined => "Paddle combined parameters",
        }
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
    /// Names for the tensors of a Paddle input, in file order (default
    /// `tensor0`, `tensor1`, …). An error for other inputs.
    pub names: Option<Vec<String>>,
    /// Regroup the top-level rows into batches of this many rows.
    pub batch_rows: Option<usize>,
    /// Write Arrow `List` (32-bit offsets) instead of `LargeList`.
    pub small_lists: bool,
}

/// What a conversion did.
///
/// ```
/// let stats = lodt::convert::ConvertStats::default();
/// assert_eq!(stats.batches, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConvertStats {
    /// Batches written.
    pub batches: usize,
    /// Tensors written, over all batches.
    pub tensors: usize,
}

/// An error converting a dataset.
///
/// ```
/// let err = lodt::convert::FileKind::from_path("x.txt").unwrap_err();
/// assert!(err.to_string().contains("x.txt"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The extension names no supported format.
    #[error(
        "cannot tell the format of {path}: expected .lodt, .parquet, .arrow, .feather, .arrows, .pdtensor, .pdparams or .pdiparams"
    )]
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
    Arrow(#[from] crate::arrow::Error),
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
}

/// A source of batches, with their number when the format tells it up front.
pub struct BatchSource {
    /// The number of batches, when known before reading them.
    pub total: Option<usize>,
    /// The batches, in order.
    pub batches: Box<dyn Iterator<Item = Result<Batch, ConvertError>>>,
}

fn open(path: &Path) -> Result<File, ConvertError> {
    File::open(path).map_err(|source| ConvertError::Io {
        path: path.display().to_string(),
        source,
    })
}

#[cfg_attr(not(feature = "arrow"), allow(dead_code))]
fn create(path: &Path) -> Result<File, ConvertError> {
    File::create(path).map_err(|source| ConvertError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Opens `path` as a source of batches, in the format its extension names.
///
/// ```
/// use lodt::convert::{read_batches, ConvertOptions};
/// let names = Some(vec!["w".to_string()]);
/// let options = ConvertOptions { names, ..Default::default() };
/// let source = read_batches("tests/data/paddle/seed_2level_int64.pdtensor", &options).unwrap();
/// let batches: Vec<_> = source.batches.collect::<Result<_, _>>().unwrap();
/// assert_eq!(batches[0].get("w").unwrap().shape(), &[15, 1]);
/// ```
pub fn read_batches(
    path: impl AsRef<Path>,
    options: &ConvertOptions,
) -> Result<BatchSource, ConvertError> {
    let path = path.as_ref();
    let kind = FileKind::from_path(path)?;
    if options.names.is_some() && !matches!(kind, FileKind::PaddleTensor | FileKind::PaddleCombined)
    {
        return Err(ConvertError::Unsupported(format!(
            "--names applies to Paddle inputs, which have no tensor names; {} holds names of its own",
            path.display()
        )));
    }
    let source = match kind {
        FileKind::Lodt => {
            let total = format::LodtFile::open(path)?.num_batches();
            let reader = StreamReader::new(BufReader::new(open(path)?))?;
            BatchSource {
                total: Some(total),
                batches: Box::new(reader.map(|b| b.map_err(ConvertError::from))),
            }
        }
        FileKind::PaddleTensor | FileKind::PaddleCombined => {
            let names: Option<Vec<&str>> = options
                .names
                .as_ref()
                .map(|n| n.iter().map(String::as_str).collect());
            let batch = if kind == FileKind::PaddleTensor {
                let tensor = paddle::read_tensor_file(path)?;
                paddle::into_batch(vec![tensor], names.as_deref())?
            } else {
                paddle::read_batch_file(path, names.as_deref())?
            };
            BatchSource {
                total: Some(1),
                batches: Box::new(std::iter::once(Ok(batch))),
            }
        }
        FileKind::Parquet | FileKind::ArrowFile | FileKind::ArrowStream => {
            arrow_side::read(kind, path)?
        }
    };
    match options.batch_rows {
        None => Ok(source),
        Some(rows) => Ok(BatchSource {
            total: None,
            batches: Box::new(crate::rebatch::rebatch(source.batches, rows)?),
        }),
    }
}

/// Writes `batches` to `path`, in the format its extension names, and calls
/// `progress` after each batch. A `.lodt` output is written atomically.
///
/// ```
/// use lodt::convert::{read_batches, write_batches, ConvertOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let out = dir.path().join("seed.lodt");
/// let source = read_batches("tests/data/paddle/seed_1level_float32.pdtensor", &Default::default()).unwrap();
/// let stats = write_batches(&out, source.batches, &ConvertOptions::default(), |_| {}).unwrap();
/// assert_eq!((stats.batches, stats.tensors), (1, 1));
/// let file = lodt::LodtFile::open(&out).unwrap();
/// assert_eq!(file.batch(0).unwrap().tensor("tensor0").unwrap().rows(), 4);
/// ```
pub fn write_batches(
    path: impl AsRef<Path>,
    batches: impl IntoIterator<Item = Result<Batch, ConvertError>>,
    options: &ConvertOptions,
    mut progress: impl FnMut(&ConvertStats),
) -> Result<ConvertStats, ConvertError> {
    let path = path.as_ref();
    let kind = FileKind::from_path(path)?;
    let mut stats = ConvertStats::default();
    let mut count = |stats: &mut ConvertStats, batch: &Batch| {
        stats.batches += 1;
        stats.tensors += batch.len();
        progress(stats);
    };
    match kind {
        FileKind::Lodt => {
            let mut writer = Writer::create(path, BTreeMap::new())?;
            for batch in batches {
                let batch = batch?;
                writer.write_batch(&batch)?;
                count(&mut stats, &batch);
            }
            writer.finish()?;
        }
        FileKind::PaddleTensor | FileKind::PaddleCombined => {
            let mut iter = batches.into_iter();
            let batch = iter.next().transpose()?.unwrap_or_default();
            if iter.next().is_some() {
                return Err(ConvertError::Unsupported(format!(
                    "{} holds one set of tensors, but the input has more than one batch",
                    kind.name()
                )));
            }
            if kind == FileKind::PaddleTensor && batch.len() != 1 {
                return Err(ConvertError::Unsupported(format!(
                    "a .pdtensor file holds exactly one tensor, the input batch has {} ({}); write a .pdparams file instead",
                    batch.len(),
                    batch.names().collect::<Vec<_>>().join(", ")
                )));
            }
            paddle::write_batch_file(path, &batch)?;
            count(&mut stats, &batch);
        }
        FileKind::Parquet | FileKind::ArrowFile | FileKind::ArrowStream => {
            arrow_side::write(kind, path, batches, options, |b| count(&mut stats, b))?;
        }
    }
    Ok(stats)
}

/// Converts `input` to `output`, each in the format its extension names.
///
/// ```
/// use lodt::convert::{convert, ConvertOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let out = dir.path().join("params.lodt");
/// let names = "a,b,c,d,e,f,g,h".split(',').map(String::from).collect();
/// let options = ConvertOptions { names: Some(names), ..Default::default() };
/// let stats = convert("tests/data/paddle/combined.pdparams", &out, &options, |_| {}).unwrap();
/// assert_eq!(stats.tensors, 8);
/// ```
pub fn convert(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    options: &ConvertOptions,
    progress: impl FnMut(&ConvertStats),
) -> Result<ConvertStats, ConvertError> {
    let source = read_batches(input, options)?;
    write_batches(output, source.batches, options, progress)
}

/// The Arrow IPC and Parquet side of a conversion.
#[cfg(feature = "arrow")]
mod arrow_side {
    use super::{BatchSource, ConvertError, ConvertOptions, FileKind, create, open};
    use crate::arrow::ipc::{IpcFileReader, IpcFileWriter, IpcStreamReader, IpcStreamWriter};
    use crate::arrow::{ArrowOptions, BatchWriter, ListType, WriteOptions};
    use crate::batch::Batch;
    use std::io::BufWriter;
    use std::path::Path;

    pub(super) fn read(kind: FileKind, path: &Path) -> Result<BatchSource, ConvertError> {
        let options = ArrowOptions::default();
        let file = open(path)?;
        let name = path.display().to_string();
        Ok(match kind {
            FileKind::ArrowFile => {
                let reader = IpcFileReader::try_new_named(file, name, &options)?;
                BatchSource {
                    total: Some(reader.num_batches()),
                    batches: Box::new(reader.map(|b| b.map_err(ConvertError::from))),
                }
            }
            FileKind::ArrowStream => {
                let reader = IpcStreamReader::try_new_named(file, name, &options)?;
                BatchSource {
                    total: None,
                    batches: Box::new(reader.map(|b| b.map_err(ConvertError::from))),
                }
            }
            _ => read_parquet(file, name)?,
        })
    }

    #[cfg(feature = "parquet")]
    fn read_parquet(file: std::fs::File, name: String) -> Result<BatchSource, ConvertError> {
        let reader = crate::arrow::parquet::ParquetReader::try_new_named(
            file,
            name,
            &ArrowOptions::default(),
        )?;
        Ok(BatchSource {
            total: Some(reader.num_row_groups()),
            batches: Box::new(reader.map(|b| b.map_err(ConvertError::from))),
        })
    }

    #[cfg(not(feature = "parquet"))]
    fn read_parquet(_: std::fs::File, _: String) -> Result<BatchSource, ConvertError> {
        Err(ConvertError::FeatureMissing {
            format: "Parquet",
            feature: "parquet",
        })
    }

    pub(super) fn write(
        kind: FileKind,
        path: &Path,
        batches: impl IntoIterator<Item = Result<Batch, ConvertError>>,
        options: &ConvertOptions,
        written: impl FnMut(&Batch),
    ) -> Result<(), ConvertError> {
        let list_type = if options.small_lists {
            ListType::List
        } else {
            ListType::LargeList
        };
        let write_options =
            WriteOptions::default().with_arrow(ArrowOptions::default().with_list_type(list_type));
        let sink = BufWriter::new(create(path)?);
        match kind {
            FileKind::ArrowFile => {
                drain(IpcFileWriter::new(sink, &write_options), batches, written)
            }
            FileKind::ArrowStream => {
                drain(IpcStreamWriter::new(sink, &write_options), batches, written)
            }
            _ => write_parquet(sink, batches, &write_options, written),
        }
    }

    /// Writes every batch with `writer`, reporting each, then ends the file.
    fn drain<B: BatchWriter>(
        mut writer: B,
        batches: impl IntoIterator<Item = Result<Batch, ConvertError>>,
        mut written: impl FnMut(&Batch),
    ) -> Result<(), ConvertError> {
        for batch in batches {
            let batch = batch?;
            writer.write_batch(&batch)?;
            written(&batch);
        }
        writer.finish_file()?;
        Ok(())
    }

    #[cfg(feature = "parquet")]
    fn write_parquet(
        sink: BufWriter<std::fs::File>,
        batches: impl IntoIterator<Item = Result<Batch, ConvertError>>,
        options: &WriteOptions,
        written: impl FnMut(&Batch),
    ) -> Result<(), ConvertError> {
        let writer = crate::arrow::parquet::ParquetWriter::try_new(sink, options)?;
        drain(writer, batches, written)
    }

    #[cfg(not(feature = "parquet"))]
    fn write_parquet(
        _: BufWriter<std::fs::File>,
        _: impl IntoIterator<Item = Result<Batch, ConvertError>>,
        _: &WriteOptions,
        _: impl FnMut(&Batch),
    ) -> Result<(), ConvertError> {
        Err(ConvertError::FeatureMissing {
            format: "Parquet",
            feature: "parquet",
        })
    }
}

/// Without the `arrow` feature, Arrow and Parquet files are refused.
#[cfg(not(feature = "arrow"))]
mod arrow_side {
    use super::{BatchSource, ConvertError, ConvertOptions, FileKind};
    use crate::batch::Batch;
    use std::path::Path;

    fn missing(kind: FileKind) -> ConvertError {
        ConvertError::FeatureMissing {
            format: kind.name(),
            feature: if kind == FileKind::Parquet {
                "parquet"
            } else {
                "arrow"
            },
        }
    }

    pub(super) fn read(kind: FileKind, _: &Path) -> Result<BatchSource, ConvertError> {
        Err(missing(kind))
    }

    pub(super) fn write(
        kind: FileKind,
        _: &Path,
        _: impl IntoIterator<Item = Result<Batch, ConvertError>>,
        _: &ConvertOptions,
        _: impl FnMut(&Batch),
    ) -> Result<(), ConvertError> {
        Err(missing(kind))
    }
}
