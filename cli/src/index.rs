//! `lodt index DIR`: (re)writes a dataset's shard index (see `dataset.rs`).

use crate::common::CliError;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The dataset (a directory or an object-store URI).
    dataset: PathBuf,
}

pub fn run(args: Args) -> Result<(), CliError> {
    crate::dataset::index(&args.dataset)
}
