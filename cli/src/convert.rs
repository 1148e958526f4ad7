//! `lodt convert IN OUT [--columns a,b] [--batch-rows N | --batch-bytes N|auto] [--compression C] [--format-version V]
//! [--null-lists error|empty] [--metadata error|first] [--small-lists]
//! [--tensor-type nested_lists|fixed_shape|variable_shape] [--format F]
//! [--names a,b,c] [--shard-bytes N] [--from F] [--to F|dataset|parquet-dir]`.
//!
//! The flags become a [`ConvertOptions`] and the conversion is the crate's
//! ([`Conversion`], what `lodt::convert::convert` and Python's
//! `lodt.convert()` run): the same input and options give the same bytes
//! from every front end. Every batch is kept as it is unless `--batch-rows`
//! or `--batch-bytes` regroup them, and the summary says which. Type changes
//! (Arrow `list` to `large_list`, `fixed_size_list` to the tensor extension)
//! are warned about on stderr. A dataset directory is an input or output as
//! a file is ([`Endpoint`]).

use crate::common::{self, CliError, human, plural};
use indicatif::{ProgressBar, ProgressStyle};
use lodt::arrow::{MetadataPolicy, NullLists, TensorType};
use lodt::batch::rebatch::{BatchBytes, RebatchReport};
use lodt::convert::{Conversion, ConvertOptions, Converted, Endpoint, Format};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// The input: .lodt, .parquet, .arrow/.feather, .arrows, .pdtensor, .pdparams/.pdiparams,
    /// a dataset directory, or - (stdin: .lodt, .arrows or Paddle, with --format). A FIFO is
    /// read in order as stdin is (those formats only).
    input: PathBuf,
    /// The output, in the format its extension names; a dataset directory (an existing
    /// directory, a path ending in /, or a new path with no extension); a directory of Parquet
    /// files with --to parquet-dir; or - (stdout, with --format or --to).
    output: PathBuf,
    /// The format of whichever side is - (an extension: lodt, parquet, arrow, arrows, pdtensor, pdparams).
    #[arg(long, value_parser = common::parse_format)]
    format: Option<Format>,
    /// The input's format, whatever its extension (a format's extension, dataset or parquet-dir).
    #[arg(long, value_parser = parse_endpoint)]
    from: Option<Endpoint>,
    /// The output's format, whatever its extension: a format's extension, dataset (a lodt
    /// dataset directory), or parquet-dir (a new directory of Parquet files part-00000.parquet,
    /// ... of about --shard-bytes each, put in place when all are written).
    #[arg(long, value_parser = parse_endpoint)]
    to: Option<Endpoint>,
    /// Only these tensors (Arrow/Parquet columns), comma-separated, in this order.
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Names for the tensors of a Paddle input, in file order (default tensor0, tensor1, ...).
    #[arg(long, value_delimiter = ',')]
    names: Option<Vec<String>>,
    /// Regroup top-level rows into batches of N rows.
    #[arg(long, value_name = "N", conflicts_with = "batch_bytes")]
    batch_rows: Option<usize>,
    /// Regroup rows into batches of about this size (K, M, G suffixes), or `auto`: batches of
    /// 1M to 64M pass unchanged and others are split or merged to about 16M. By default every
    /// batch is kept as it is.
    #[arg(long, value_name = "BYTES|auto", value_parser = parse_batch_bytes)]
    batch_bytes: Option<BatchBytes>,
    /// Keep every batch as it is (no re-batching): the default.
    #[arg(long, conflicts_with_all = ["batch_rows", "batch_bytes"])]
    keep_batches: bool,
    /// Compression of the output: for Parquet the page codec (none, snappy: the default, as
    /// pyarrow; zstd or lz4); for .lodt files and datasets the buffer codec of format 2.0
    /// (none: the default; lz4, zstd or zstd:LEVEL, which write format 2.0).
    #[arg(long, value_name = "CODEC")]
    compression: Option<String>,
    /// .lodt output and dataset shards: the format version, 2.0 (the default: the schema once,
    /// compressed buffers on request) or 1.0 (for readers that predate 2.0; no compression).
    #[arg(long, value_name = "1.0|2.0")]
    format_version: Option<String>,
    /// What a null list in an Arrow/Parquet input becomes: error (default) or empty (an empty sequence).
    #[arg(long, value_name = "error|empty", value_parser = parse_null_lists, default_value = "error")]
    null_lists: NullLists,
    /// Arrow/Parquet output stores one metadata map: a batch whose metadata differs is an
    /// error (default), or `first` keeps the first batch's.
    #[arg(long, value_name = "error|first", value_parser = parse_metadata, default_value = "error")]
    metadata: MetadataPolicy,
    /// Write Arrow List (32-bit offsets) instead of LargeList, as pyarrow's default list type.
    #[arg(long)]
    small_lists: bool,
    /// Arrow/Parquet output: rows with an element shape as nested fixed-size lists
    /// (nested_lists, default: what awkward, HF datasets, DuckDB and Polars read), as the
    /// arrow.fixed_shape_tensor extension (fixed_shape), or 1-level tensors as
    /// arrow.variable_shape_tensor columns, one row per sequence (variable_shape).
    #[arg(long, value_name = "nested_lists|fixed_shape|variable_shape", value_parser = parse_tensor_type, default_value = "nested_lists")]
    tensor_type: TensorType,
    /// A dataset output or --to parquet-dir: shards of about this size (default 256M; K, M, G
    /// suffixes); a shard ends at a batch boundary.
    #[arg(long, value_name = "BYTES", value_parser = crate::dataset::parse_bytes)]
    shard_bytes: Option<u64>,
    /// Parquet input: the most bytes one batch may decode to (K, M, G suffixes; default 256M).
    /// A larger row group is read in several batches; a row that needs more is an error.
    #[arg(long, value_name = "BYTES", value_parser = crate::dataset::parse_bytes)]
    decode_budget: Option<u64>,
}

fn parse_null_lists(text: &str) -> Result<NullLists, String> {
    text.parse()
        .map_err(|e: lodt::arrow::ArrowError| e.to_string())
}

fn parse_tensor_type(text: &str) -> Result<TensorType, String> {
    text.parse()
        .map_err(|e: lodt::arrow::ArrowError| e.to_string())
}

fn parse_metadata(text: &str) -> Result<MetadataPolicy, String> {
    text.parse()
        .map_err(|e: lodt::arrow::ArrowError| e.to_string())
}

fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    Endpoint::from_name(text).map_err(|e| e.to_string())
}

fn parse_batch_bytes(text: &str) -> Result<BatchBytes, String> {
    text.parse().map_err(|e: lodt::Error| e.to_string())
}

fn bar(total: Option<usize>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => ProgressBar::new(n as u64),
        None => ProgressBar::no_length(),
    };
    let template = if total.is_some() {
        "converting [{bar:30}] {pos}/{len} batches {eta}"
    } else {
        "converting {pos} batches {elapsed}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// The options the flags ask for: each flag is one field.
fn options(args: &Args) -> ConvertOptions {
    ConvertOptions {
        names: args.names.clone(),
        columns: args.columns.clone(),
        // --keep-batches excludes both (clap refuses them together).
        batch_rows: args.batch_rows.filter(|_| !args.keep_batches),
        batch_bytes: args.batch_bytes.filter(|_| !args.keep_batches),
        shard_bytes: args.shard_bytes,
        small_lists: args.small_lists,
        null_lists: args.null_lists,
        metadata_policy: args.metadata,
        tensor_type: args.tensor_type,
        decode_budget: args.decode_budget,
        ..Default::default()
    }
}

/// Where one side of the conversion is: `--from`/`--to`, or `--format` for
/// `-`, or what the crate makes of the path.
fn endpoint(
    path: &Path,
    explicit: Option<Endpoint>,
    dash_format: Option<Format>,
    place: fn(&Path) -> Result<Endpoint, CliError>,
) -> Result<Endpoint, CliError> {
    let dash = common::is_dash(path);
    match (explicit, dash) {
        (Some(Endpoint::File(format)), _) => Ok(Endpoint::File(format)),
        (Some(other), true) => Err(CliError::usage(format!(
            "- (stdin or stdout) is a stream, and a {} is a directory: give a path",
            other.name()
        ))),
        (Some(other), false) => Ok(other),
        (None, true) => common::format_of(path, dash_format).map(Endpoint::File),
        (None, false) => place(path),
    }
}

pub fn run(args: Args) -> Result<(), CliError> {
    let from = endpoint(&args.input, args.from, args.format, |p| {
        Endpoint::input(p).map_err(common::convert_error)
    })?;
    let to = endpoint(&args.output, args.to, args.format, |p| {
        Endpoint::output(p).map_err(common::convert_error)
    })?;
    let mut options = options(&args);
    let written = to.file_format().unwrap_or(Format::Lodt);
    options
        .set_output_codec(
            written,
            args.format_version.as_deref(),
            args.compression.as_deref(),
        )
        .map_err(|e| CliError::usage(e.to_string()))?;
    let (stdin, stdout) = (common::is_dash(&args.input), common::is_dash(&args.output));
    // Warn before converting: a type that changes is not silent.
    let mut notes = std::io::stderr();
    if let (Endpoint::File(f), Some(t), false) = (from, to.file_format(), stdin) {
        for change in &lodt::convert::type_changes(&args.input, f, t, &options)
            .map_err(common::convert_error)?
        {
            let hint = if change.to.contains("large_list") {
                " (--small-lists keeps 32-bit lists)"
            } else {
                ""
            };
            writeln!(
                notes,
                "warning: {}{hint}",
                common::escape_text(&change.to_string())
            )?;
        }
    }
    let conversion = open(&args, from, to, &options)?;
    let progress = bar(conversion.num_batches());
    let done = conversion.run(|s| progress.set_position(s.batches));
    progress.finish_and_clear();
    let input = (!stdin).then_some(args.input.as_path());
    let done =
        done.map_err(|e| crate::suggest::convert_error(e, input, args.columns.as_deref()))?;
    // The summary goes to stdout, unless stdout is the output.
    let mut out: Box<dyn Write> = if stdout {
        Box::new(notes)
    } else {
        Box::new(common::stdout())
    };
    writeln!(out, "{}", wrote(&args, from, to, &options, &done)?)?;
    writeln!(out, "{}", batching(&args, &done))?;
    out.flush()?;
    Ok(())
}

/// The conversion: between two paths, or with stdin or stdout on one side.
fn open(
    args: &Args,
    from: Endpoint,
    to: Endpoint,
    options: &ConvertOptions,
) -> Result<Conversion, CliError> {
    let (stdin, stdout) = (common::is_dash(&args.input), common::is_dash(&args.output));
    if !stdin && !stdout {
        return Conversion::open_as(&args.input, from, &args.output, to, options)
            .map_err(common::convert_error);
    }
    let reading = options.without_batching();
    let reader = match from {
        Endpoint::File(format) if stdin => format.open_stream(std::io::stdin(), "stdin", &reading),
        _ => from.open_reader(&args.input, &reading),
    }
    .map_err(common::convert_error)?;
    let metadata = reader.metadata();
    let writer = match to {
        Endpoint::File(format) if stdout => {
            format.create_stream_writer(std::io::stdout(), metadata, options)
        }
        _ => to.create_writer(&args.output, metadata, options),
    }
    .map_err(common::convert_error)?;
    Conversion::from_parts(reader, writer, options).map_err(common::convert_error)
}

/// The first line of the summary: what was written, from what.
fn wrote(
    args: &Args,
    from: Endpoint,
    to: Endpoint,
    options: &ConvertOptions,
    done: &Converted,
) -> Result<String, CliError> {
    let source = match (common::is_dash(&args.input), from) {
        (true, _) => "stdin".to_string(),
        (false, Endpoint::Dataset) => format!("the dataset {}", common::path(&args.input)),
        (false, Endpoint::Layout(layout)) => {
            format!("the {} {}", layout.name(), common::path(&args.input))
        }
        (false, Endpoint::File(_)) => common::path(&args.input),
    };
    let stats = &done.stats;
    let format = match to {
        Endpoint::Dataset => {
            let dataset = lodt::dataset::Dataset::open(&args.output).map_err(CliError::failure)?;
            let m = dataset.manifest();
            return Ok(format!(
                "wrote the dataset {} ({}, {}, {}, {}) from {source}",
                common::path(&args.output),
                plural(m.num_shards() as u64, "shard", "shards"),
                plural(m.num_batches(), "batch", "batches"),
                plural(m.num_sequences(), "sequence", "sequences"),
                human(m.num_bytes()),
            ));
        }
        Endpoint::Layout(layout) => {
            let files = layout.files(&args.output).map_err(common::convert_error)?;
            let bytes: u64 = files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum();
            return Ok(format!(
                "wrote the {} {} ({}, {}: {}, {}, {}, {}) from {source}",
                layout.name(),
                common::path(&args.output),
                plural(files.len() as u64, "file", "files"),
                options.compression.unwrap_or_default(),
                plural(stats.batches, "batch", "batches"),
                plural(stats.tensors, "tensor", "tensors"),
                plural(stats.rows, "top-level row", "top-level rows"),
                human(bytes),
            ));
        }
        Endpoint::File(format) => format,
    };
    let stdout = common::is_dash(&args.output);
    let codec = match format {
        Format::Parquet => format!(", {}", options.compression.unwrap_or_default()),
        Format::Lodt if options.lodt.compression != lodt::format::Compression::None => {
            format!(", {}", options.lodt.compression)
        }
        _ => String::new(),
    };
    let size = std::fs::metadata(&args.output)
        .ok()
        .filter(|m| m.is_file() && !stdout)
        .map(|m| format!(", {}", human(m.len())))
        .unwrap_or_default();
    Ok(format!(
        "wrote {} ({}{codec}: {}, {}, {}{size}) from {source}",
        if stdout {
            "stdout".into()
        } else {
            common::path(&args.output)
        },
        format.name(),
        plural(stats.batches, "batch", "batches"),
        plural(stats.tensors, "tensor", "tensors"),
        plural(stats.rows, "top-level row", "top-level rows"),
    ))
}

/// The second line of the summary: how the batches were regrouped.
fn batching(args: &Args, done: &Converted) -> String {
    match (args.batch_rows, args.batch_bytes, done.rebatch) {
        (Some(rows), _, _) => format!(
            "re-batched to {} per batch (--batch-rows; never across a metadata change)",
            plural(rows as u64, "top-level row", "top-level rows")
        ),
        (None, Some(bytes), Some(report)) => describe(report, bytes),
        _ => "kept every input batch as it is (the default; --batch-rows or --batch-bytes regroup them)".to_string(),
    }
}

/// What size-based re-batching did, in a line.
fn describe(r: RebatchReport, bytes: BatchBytes) -> String {
    let range = if bytes == BatchBytes::DEFAULT {
        format!(
            "--batch-bytes auto: batches of {} to {} pass and others are split or merged to about {}",
            human(bytes.min),
            human(bytes.max),
            human(bytes.target)
        )
    } else {
        format!("batches of about {} (--batch-bytes)", human(bytes.target))
    };
    if r.split == 0 && r.merged == 0 {
        return format!(
            "kept the input's {} as {} ({range})",
            plural(r.passed, "batch", "batches"),
            if r.passed == 1 { "it is" } else { "they are" }
        );
    }
    let mut did = Vec::new();
    if r.passed > 0 {
        did.push(format!("kept {}", plural(r.passed, "batch", "batches")));
    }
    if r.split > 0 {
        did.push(format!(
            "split {} into pieces of about {}",
            plural(r.split, "larger batch", "larger batches"),
            human(bytes.target)
        ));
    }
    if r.merged > 0 {
        did.push(format!(
            "merged {} (up to {} each, never across a metadata change)",
            plural(r.merged, "smaller batch", "smaller batches"),
            human(bytes.target)
        ));
    }
    format!(
        "re-batched {} into {}: {} ({range})",
        plural(r.input, "input batch", "input batches"),
        r.output,
        did.join(", ")
    )
}
