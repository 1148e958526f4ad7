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
}

pub fn run(args: Args) -> Result<(), CliError> {
    if common::is_dataset(&args.file) {
        return crate::dataset::verify(&args.file, !args.read.no_mmap);
    }
    if let Some(e) = common::not_lodt(&args.file, "verify") {
        return Err(e);
    }
    let file = args.read.open(&args.file)?;
    let bar = common::progress(file.file_size(), "verifying");
    let report = file.verify_with_progress(&mut |done, _| bar.set_position(done));
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
