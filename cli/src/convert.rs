//! `lodt convert IN OUT [--names a,b,c] [--batch-rows N] [--small-lists] [--shard-bytes N]`.

use crate::common::{self, CliError};
use indicatif::{ProgressBar, ProgressStyle};
use lodt::atomic::AtomicError;
use lodt::batch::{BatchReader, copy};
use lodt::convert::{ConvertError, ConvertOptions, Format};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The input: .lodt, .parquet, .arrow/.feather, .arrows, .pdtensor, .pdparams/.pdiparams.
    input: PathBuf,
    /// The output, in the format its extension names.
    output: PathBuf,
    /// Names for the tensors of a Paddle input, in file order (default tensor0, tensor1, ...).
    #[arg(long, value_delimiter = ',')]
    names: Option<Vec<String>>,
    /// Regroup top-level rows into batches of N rows.
    #[arg(long, value_name = "N")]
    batch_rows: Option<usize>,
    /// Write Arrow List (32-bit offsets) instead of LargeList.
    #[arg(long)]
    small_lists: bool,
    /// Write a sharded dataset (the output is a directory: end it with /) with shards of about
    /// this size (default 256M; K, M, G suffixes).
    #[arg(long, value_name = "BYTES", value_parser = crate::dataset::parse_bytes)]
    shard_bytes: Option<u64>,
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

fn failure(e: ConvertError) -> CliError {
    match e {
        ConvertError::UnknownExtension { .. }
        | ConvertError::Unsupported(_)
        | ConvertError::Atomic(AtomicError::SameFile { .. }) => CliError::usage(e),
        e => CliError::failure(e),
    }
}

pub fn run(args: Args) -> Result<(), CliError> {
    let options = ConvertOptions {
        names: args.names,
        batch_rows: args.batch_rows,
        small_lists: args.small_lists,
        ..Default::default()
    };
    // A dataset directory on either side (see dataset.rs).
    if crate::dataset::involved(&args.input, &args.output, args.shard_bytes) {
        return crate::dataset::convert(&args.input, &args.output, &options, args.shard_bytes);
    }
    let from = Format::from_path(&args.input).map_err(failure)?;
    let to = Format::from_path(&args.output).map_err(failure)?;
    // Before anything is opened for writing: never write over the input.
    lodt::atomic::ensure_distinct(&args.input, &args.output).map_err(|e| failure(e.into()))?;
    let reader = from.open_reader(&args.input, &options).map_err(failure)?;
    let progress = bar(reader.num_batches());
    let writer = to
        .create_writer(&args.output, reader.metadata(), &options)
        .map_err(failure)?;
    let stats = copy(reader, writer, |s| progress.set_position(s.batches));
    progress.finish_and_clear();
    let ((), stats) = stats.map_err(failure)?;
    let mut out = common::stdout();
    writeln!(
        out,
        "wrote {} ({} batches, {} tensors) from {}",
        common::path(&args.output),
        stats.batches,
        stats.tensors,
        common::path(&args.input)
    )?;
    common::finish(out)
}
