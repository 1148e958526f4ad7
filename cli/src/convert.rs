//! `lodt convert IN OUT [--columns a,b] [--batch-rows N | --batch-bytes N] [--compression C] [--format-version V]
//! [--null-lists error|empty] [--metadata error|first] [--small-lists]
//! [--tensor-type nested_lists|fixed_shape|variable_shape] [--format F]
//! [--names a,b,c] [--shard-bytes N]`.
//!
//! By default batches of 1 MiB to 64 MiB pass unchanged, larger ones are
//! split and runs of smaller ones merged (to about 16 MiB; never across a
//! metadata change), and the summary says which. Type changes (Arrow `list`
//! to `large_list`, `fixed_size_list` to the tensor extension) are warned
//! about on stderr.
//! Rows with an element shape are written as nested fixed-size lists (what
//! awkward, HF datasets, DuckDB and Polars read), or with `--tensor-type
//! fixed_shape` as the `arrow.fixed_shape_tensor` extension (`variable_shape`:
//! 1-level tensors as `arrow.variable_shape_tensor` columns).

use crate::common::{self, CliError, human, plural};
use indicatif::{ProgressBar, ProgressStyle};
use lodt::arrow::{MetadataPolicy, NullLists, TensorType};
use lodt::batch::rebatch::{BatchBytes, RebatchReport, rebatch, rebatch_bytes};
use lodt::batch::{BatchReader, copy};
use lodt::convert::{ConvertOptions, Format};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The input: .lodt, .parquet, .arrow/.feather, .arrows, .pdtensor, .pdparams/.pdiparams,
    /// a dataset directory, or - (stdin: .lodt, .arrows or Paddle, with --format). A FIFO is
    /// read in order as stdin is (those formats only).
    input: PathBuf,
    /// The output, in the format its extension names, or - (stdout, with --format or --to).
    output: PathBuf,
    /// The format of whichever side is - (an extension: lodt, parquet, arrow, arrows, pdtensor, pdparams).
    #[arg(long, value_parser = common::parse_format)]
    format: Option<Format>,
    /// The input's format, whatever its extension.
    #[arg(long, value_parser = common::parse_format)]
    from: Option<Format>,
    /// The output's format, whatever its extension.
    #[arg(long, value_parser = common::parse_format)]
    to: Option<Format>,
    /// Only these tensors (Arrow/Parquet columns), comma-separated, in this order.
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Names for the tensors of a Paddle input, in file order (default tensor0, tensor1, ...).
    #[arg(long, value_delimiter = ',')]
    names: Option<Vec<String>>,
    /// Regroup top-level rows into batches of N rows.
    #[arg(long, value_name = "N", conflicts_with = "batch_bytes")]
    batch_rows: Option<usize>,
    /// Regroup rows into batches of about this size (K, M, G suffixes). By default batches of
    /// 1M to 64M pass unchanged and others are split or merged to about 16M.
    #[arg(long, value_name = "BYTES", value_parser = crate::dataset::parse_bytes)]
    batch_bytes: Option<u64>,
    /// Keep every batch as it is (no re-batching).
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
    /// Write a sharded dataset (the output is a directory: end it with /) with shards of about
    /// this size (default 256M; K, M, G suffixes).
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

/// How the batches are regrouped, as the CLI asked.
enum Batching {
    Keep,
    Rows(usize),
    Bytes(BatchBytes, bool),
}

pub fn run(args: Args) -> Result<(), CliError> {
    let batching = match (args.batch_rows, args.batch_bytes, args.keep_batches) {
        (_, _, true) => Batching::Keep,
        (Some(rows), _, _) => Batching::Rows(rows),
        (None, Some(bytes), _) => {
            Batching::Bytes(BatchBytes::about(bytes).map_err(CliError::usage)?, true)
        }
        (None, None, false) => Batching::Bytes(BatchBytes::DEFAULT, false),
    };
    let mut options = ConvertOptions {
        names: args.names.clone(),
        columns: args.columns.clone(),
        small_lists: args.small_lists,
        null_lists: args.null_lists,
        metadata_policy: args.metadata,
        tensor_type: args.tensor_type,
        decode_budget: args.decode_budget,
        ..Default::default()
    };
    let compress = |options: &mut ConvertOptions, to: Format| {
        options
            .set_output_codec(
                to,
                args.format_version.as_deref(),
                args.compression.as_deref(),
            )
            .map_err(|e| CliError::usage(e.to_string()))
    };
    // A dataset directory on either side (see dataset.rs).
    if crate::dataset::involved(&args.input, &args.output, args.shard_bytes) {
        let to = if crate::dataset::wants_dataset(&args.output) {
            Format::Lodt
        } else {
            common::format_of(&args.output, args.to)?
        };
        compress(&mut options, to)?;
        let options = ConvertOptions {
            batch_rows: args.batch_rows,
            batch_bytes: args
                .batch_bytes
                .map(BatchBytes::about)
                .transpose()
                .map_err(CliError::usage)?,
            ..options
        };
        return crate::dataset::convert(&args.input, &args.output, &options, args.shard_bytes);
    }
    let side = |path: &std::path::Path, explicit: Option<Format>| {
        let format = explicit.or(if common::is_dash(path) {
            args.format
        } else {
            None
        });
        common::format_of(path, format)
    };
    let from = side(&args.input, args.from)?;
    let to = side(&args.output, args.to)?;
    compress(&mut options, to)?;
    let (stdin, stdout) = (common::is_dash(&args.input), common::is_dash(&args.output));
    if !stdin && !stdout {
        // Before anything is opened for writing: never write over the input.
        lodt::atomic::ensure_distinct(&args.input, &args.output)
            .map_err(|e| common::convert_error(e.into()))?;
    }
    // Warn before converting: a type that changes is not silent.
    let mut notes = std::io::stderr();
    if !stdin {
        let changes = lodt::convert::type_changes(&args.input, from, to, &options)
            .map_err(common::convert_error)?;
        for change in &changes {
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
    let reader = if stdin {
        from.open_stream(std::io::stdin(), "stdin", &options)
    } else {
        from.open_reader(&args.input, &options)
    }
    .map_err(common::convert_error)?;
    let metadata = reader.metadata();
    let input_batches = reader.num_batches();
    let progress = bar(input_batches);
    let writer = if stdout {
        to.create_stream_writer(std::io::stdout(), metadata, &options)
    } else {
        to.create_writer(&args.output, metadata, &options)
    }
    .map_err(common::convert_error)?;
    let tick = |s: &lodt::batch::WriteStats| progress.set_position(s.batches);
    let mut report = None;
    let stats = match &batching {
        Batching::Keep => copy(reader, writer, tick),
        Batching::Rows(rows) => copy(
            rebatch(reader, *rows).map_err(CliError::usage)?,
            writer,
            tick,
        ),
        Batching::Bytes(bytes, _) => {
            let mut regrouped = rebatch_bytes(reader, *bytes).map_err(CliError::usage)?;
            let stats = copy(&mut regrouped, writer, tick);
            report = Some(regrouped.report());
            stats
        }
    };
    progress.finish_and_clear();
    let input = (!stdin).then_some(args.input.as_path());
    let columns = args.columns.as_deref();
    let ((), stats) = stats.map_err(|e| crate::suggest::convert_error(e, input, columns))?;
    // The summary goes to stdout, unless stdout is the output.
    let mut out: Box<dyn Write> = if stdout {
        Box::new(notes)
    } else {
        Box::new(common::stdout())
    };
    let codec = match to {
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
    writeln!(
        out,
        "wrote {} ({}{codec}: {}, {}, {}{size}) from {}",
        if stdout {
            "stdout".into()
        } else {
            common::path(&args.output)
        },
        to.name(),
        plural(stats.batches, "batch", "batches"),
        plural(stats.tensors, "tensor", "tensors"),
        plural(stats.rows, "top-level row", "top-level rows"),
        if stdin {
            "stdin".into()
        } else {
            common::path(&args.input)
        }
    )?;
    let line = match (&batching, report) {
        (Batching::Keep, _) => "kept every input batch as it is (--keep-batches)".to_string(),
        (Batching::Rows(rows), _) => format!(
            "re-batched to {} per batch (--batch-rows; never across a metadata change)",
            plural(*rows as u64, "top-level row", "top-level rows")
        ),
        (Batching::Bytes(bytes, asked), Some(r)) => describe(r, *bytes, *asked),
        (Batching::Bytes(..), None) => String::new(),
    };
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// What size-based re-batching did, in a line.
fn describe(r: RebatchReport, bytes: BatchBytes, asked: bool) -> String {
    let range = if asked {
        format!("batches of about {} (--batch-bytes)", human(bytes.target))
    } else {
        format!(
            "by default batches of {} to {} pass and others are split or merged to about {}; --batch-bytes, --batch-rows or --keep-batches choose",
            human(bytes.min),
            human(bytes.max),
            human(bytes.target)
        )
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
