//! `lodt log DIR [--json]` and `lodt tag DIR NAME [N]`: a dataset's versions
//! and tags (see `dataset.rs`).

use crate::common::CliError;
use std::path::PathBuf;

/// `lodt log`'s arguments.
#[derive(clap::Args)]
pub struct LogArgs {
    /// The dataset (a directory or an object-store URI).
    dataset: PathBuf,
    /// Print JSON (`versions`: every version's record; `tags`) instead of text.
    #[arg(long)]
    json: bool,
}

/// `lodt tag`'s arguments.
#[derive(clap::Args)]
pub struct TagArgs {
    /// The dataset (a directory or an object-store URI).
    dataset: PathBuf,
    /// The tag's name: 1 to 64 ASCII letters, digits, '.', '_' or '-', not all digits.
    name: String,
    /// The version it names (default: the current one).
    version: Option<u64>,
}

pub fn log(args: LogArgs) -> Result<(), CliError> {
    crate::dataset::log(&args.dataset, args.json)
}

pub fn tag(args: TagArgs) -> Result<(), CliError> {
    crate::dataset::tag(&args.dataset, &args.name, args.version)
}
