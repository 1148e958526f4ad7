//! `lodt verify FILE` (or a dataset directory: see `dataset.rs`).

use crate::common::{self, CliError, human};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The .lodt file, or a dataset directory.
    file: PathBuf,
    #[command(flatten)]
    read: common::ReadArgs,
    /// Show progress by batches on stderr even when it is not a terminal
    /// (a line per batch; on a terminal a bar is shown anyway).
    #[arg(long)]
    progress: bool,
}

pub fn run(args: Args) -> Result<(), CliError> {
    if common::is_dataset(&args.file) {
        return crate::dataset::verify(&args.file, !args.read.no_mmap, args.progress);
    }
    if let Some(e) = common::not_lodt(&args.file, "verify") {
        return Err(e);
    }
    let file = args.read.open(&args.file)?;
    // By batches: a compressed batch of a few KiB may decode to 1 GiB, so
    // bytes of the file say little of the time left.
    let ends = common::batch_ends(&file);
    let mut bar = common::BatchProgress::new(ends.len() as u64, "verifying", args.progress);
    let report = file
        .verify_with_progress(&mut |done, _| bar.set(ends.partition_point(|&e| e <= done) as u64));
    bar.finish_and_clear();
    let report =
        report.map_err(|e| CliError::failure(format!("{}: {e}", common::path(&args.file))))?;
    let mut out = common::stdout();
    writeln!(
        out,
        "ok: {}, {}, {} checked (every checksum, padding byte and LoD rule)",
        common::plural(report.batches as u64, "batch", "batches"),
        common::plural(report.tensors as u64, "tensor", "tensors"),
        human(report.file_bytes)
    )?;
    common::finish(out)
}
