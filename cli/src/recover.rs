//! `lodt recover FILE`.

use crate::common::{self, CliError, human};
use lodt::format::{self, RecoverOptions, WriteOptions};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The .lodt file (rewritten atomically if its footer is missing; in place if there is no room for a copy).
    file: PathBuf,
    /// Also repair a file whose footer is valid but one of whose batches is damaged, dropping that batch and every one after it.
    #[arg(long)]
    drop_damaged: bool,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let size = std::fs::metadata(&args.file)
        .map_err(|e| CliError::failure(format!("{}: {e}", args.file.display())))?
        .len();
    let bar = common::progress(size, "scanning");
    let options = RecoverOptions {
        write: WriteOptions::default(),
        drop_damaged: args.drop_damaged,
    };
    let report =
        format::recover_with_options(&args.file, options, &mut |done, _| bar.set_position(done));
    bar.finish_and_clear();
    let report = report?;
    let mut out = common::stdout();
    if report.rewritten {
        writeln!(
            out,
            "rebuilt the footer: kept {} ({}), dropped {} after the last complete batch",
            common::plural(report.batches as u64, "batch", "batches"),
            human(report.kept_bytes),
            human(report.dropped_bytes)
        )?;
        if report.in_place {
            writeln!(out, "repaired in place: there was no room for a copy")?;
        }
        if let Some(reason) = report.reason {
            writeln!(
                out,
                "reading stopped at: {}",
                common::escape_message(&reason)
            )?;
        }
    } else {
        writeln!(
            out,
            "nothing to do: the footer is valid and {} read back",
            match report.batches {
                1 => "its 1 batch".to_string(),
                n => format!("all {n} batches"),
            }
        )?;
    }
    common::finish(out)
}
