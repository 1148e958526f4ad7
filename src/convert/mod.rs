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
//! | `.idx`, `.bin`              | Megatron indexed dataset (`PREFIX.idx` + `PREFIX.bin`, [`crate::megatron`]) | [`Format::Megatron`] |
//!
//! A sharded dataset directory is an endpoint too ([`Endpoint::Dataset`]): an
//! input that is a directory, an output that is one, ends in `/`, or is a new
//! path with no extension. An input directory that another tool wrote is read
//! as one input by its [`Layout`] ([`Endpoint::Layout`]): Hugging Face's
//! `save_to_disk` (by its `state.json`), or a directory of Parquet files.
//! A directory of Parquet files is written too, when asked for by name
//! ([`Endpoint::from_name`]: `parquet-dir`, the CLI's `--to parquet-dir`,
//! Python's `to="parquet-dir"`): shards `part-00000.parquet`, … of about
//! [`ConvertOptions::shard_bytes`], renamed into place together at the end.
//!
//! ```text
//!  IN ──open_reader──▶ Batch, Batch, … ──[rebatch, if asked]──▶ create_writer ──▶ OUT
//! ```
//!
//! At most two batches are in memory: the one written and the next, read on
//! a thread of its own meanwhile (re-batched inputs are read on the writer's
//! thread, two batches at a time). A `.lodt`
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

mod adapters;
#[cfg(feature = "arrow")]
mod arrow_side;
#[cfg(not(feature = "arrow"))]
#[path = "arrow_missing.rs"]
mod arrow_side;
mod conversion;
mod dataset_side;
mod endpoint;
mod error;
mod fit;
mod formats;
mod layout;
mod options;
#[cfg(feature = "parquet")]
mod parquet_dir;
mod sniff;

use adapters::*;
pub use conversion::{Conversion, Converted};
use dataset_side::{DatasetBatches, DatasetSink};
pub use endpoint::Endpoint;
pub use error::ConvertError;
use error::missing;
pub use fit::{ColumnFit, column_fit};
use formats::known_extensions;
pub use formats::{Capabilities, Format, MetadataScope};
pub use layout::Layout;
pub use options::ConvertOptions;

/// Converts `input` to `output`, each a file in the format its extension
/// names or a dataset directory ([`Endpoint::input`], [`Endpoint::output`]):
/// opens a reader, creates a writer, and copies, calling `progress` after
/// each batch. Returns what was written. By default every batch is kept as
/// it is; [`ConvertOptions::batch_rows`] and [`ConvertOptions::batch_bytes`]
/// regroup them. This is [`Conversion::open`] then [`Conversion::run`], what
/// the CLI's `lodt convert` and Python's `lodt.convert()` run.
///
/// `output` is replaced atomically (a failed conversion leaves what was
/// there untouched; a dataset is committed at the end, or not at all), and
/// is refused with [`AtomicError::SameFile`], before anything is written,
/// when it is `input` itself (also through a symbolic or hard link). A
/// `.lodt` or dataset output keeps the input's file (or dataset) metadata.
///
/// ```
/// use lodt::convert::{convert, ConvertOptions};
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("params.lodt");
/// let names = "a,b,c,d,e,f,g,h".split(',').map(String::from).collect();
/// let options = ConvertOptions { names: Some(names), ..Default::default() };
/// let stats = convert("tests/data/paddle/combined.pdparams", &out, &options, |_| {})?;
/// assert_eq!(stats.tensors, 8);
/// // A new path with no extension is a dataset directory.
/// let input = "tests/data/paddle/seed_2level_int64.pdtensor";
/// let stats = convert(input, dir.path().join("train"), &ConvertOptions::default(), |_| {})?;
/// assert_eq!(lodt::dataset::Dataset::open(dir.path().join("train"))?.manifest().num_batches(), stats.batches);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn convert(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    options: &ConvertOptions,
    progress: impl FnMut(&WriteStats),
) -> Result<WriteStats, ConvertError> {
    Ok(Conversion::open(input, output, options)?
        .run(progress)?
        .stats)
}

/// [`convert`] with the output's endpoint given rather than placed by its
/// path (as the CLI's `--to` and Python's `to=`): how a directory of Parquet
/// files is written (`to` = [`Endpoint::from_name`]`("parquet-dir")`, shards
/// of about [`ConvertOptions::shard_bytes`]; see
/// [`Endpoint::create_writer`]). The input is placed by its path
/// ([`Endpoint::input`]).
///
/// ```
/// use lodt::convert::{convert_to, ConvertOptions, Endpoint};
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("parquet");
/// let to = Endpoint::from_name("parquet-dir")?;
/// // The three batches' metadata differ: Parquet keeps one map, the first's.
/// let options = ConvertOptions { metadata_policy: lodt::arrow::MetadataPolicy::KeepFirst, ..Default::default() };
/// let stats = convert_to("spec/vectors/multi_batch.lodt", &out, to, &options, |_| {})?;
/// assert_eq!(stats.batches, 3);
/// assert!(out.join("part-00000.parquet").is_file()); // 256 MiB shards by default: one here
/// let back = convert_to(&out, dir.path().join("back.lodt"), Endpoint::from_name("lodt")?, &Default::default(), |_| {})?;
/// assert_eq!(back.rows, stats.rows);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn convert_to(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    to: Endpoint,
    options: &ConvertOptions,
    progress: impl FnMut(&WriteStats),
) -> Result<WriteStats, ConvertError> {
    let input = input.as_ref();
    let from = Endpoint::input(input)?;
    Ok(Conversion::open_as(input, from, output, to, options)?
        .run(progress)?
        .stats)
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
/// assert!(changes.is_empty()); // fixed-size lists stay fixed-size lists
/// let tensors = ConvertOptions { tensor_type: lodt::arrow::TensorType::FixedShape, ..small };
/// let changes = type_changes(input, Format::Parquet, Format::Parquet, &tensors)?;
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
    let mut changes = crate::arrow::type_changes(&schema, &options.arrow_write_options());
    if let Some(columns) = &options.columns {
        changes.retain(|c| columns.contains(&c.column));
    }
    Ok(changes)
}
