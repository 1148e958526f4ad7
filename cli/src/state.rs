//! `lodt state show STATE [--dataset D] [--json]`: what a saved loader state
//! or checkpoint says (the crate's `StateReport`).

use crate::common::{self, CliError};
use lodt::dataset::{Dataset, StateReport};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Print a loader state's or checkpoint's epoch, partition, consumers and each one's delivered and remaining sequences.
    Show(ShowArgs),
}

#[derive(clap::Args)]
struct ShowArgs {
    /// The state: a JSON file (`Dataset.state_dict()`, a merged one, or a loader state).
    state: PathBuf,
    /// Also check it against this dataset (a directory or URI); exit 1 if it is not the one the state was saved on.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let Command::Show(args) = args.command;
    let text = std::fs::read(&args.state)
        .map_err(|e| CliError::failure(format!("{}: {e}", common::path(&args.state))))?;
    let json: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| CliError::failure(format!("{}: not JSON: {e}", common::path(&args.state))))?;
    let report = StateReport::of_json(&json)
        .map_err(|e| CliError::failure(format!("{}: {e}", common::path(&args.state))))?;
    let mismatch = match &args.dataset {
        None => None,
        Some(dir) => {
            let store = common::dataset_store(dir, true).map_err(CliError::failure)?;
            let dataset = Dataset::open_in(store).map_err(CliError::failure)?;
            Some(report.mismatch(&dataset))
        }
    };
    let mut out = common::stdout();
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(CliError::failure)?;
        if let Some(m) = &mismatch {
            value["dataset_mismatch"] = serde_json::json!(m);
        }
        writeln!(out, "{value}")?;
    } else {
        write_text(&mut out, &report, mismatch.as_ref())?;
    }
    common::finish(out)?;
    match mismatch.flatten() {
        Some(why) => Err(CliError::failure(format!(
            "{}: not a state of {}: {why}",
            common::path(&args.state),
            args.dataset
                .as_deref()
                .map(common::path)
                .unwrap_or_default()
        ))),
        None => Ok(()),
    }
}

fn write_text(
    out: &mut impl Write,
    r: &StateReport,
    mismatch: Option<&Option<String>>,
) -> std::io::Result<()> {
    writeln!(
        out,
        "loader state version {}, {} partition, epoch {}",
        r.state_version, r.partition, r.epoch
    )?;
    writeln!(
        out,
        "{} sequences: {} delivered, {} remaining; {} consumers ({})",
        r.sequences,
        r.delivered,
        r.remaining,
        r.consumers,
        if r.complete {
            "every count: resumes on any world size".to_string()
        } else {
            format!("{} of them counted", r.per_consumer.len())
        }
    )?;
    // The rule's name as the state writes it.
    let remainder = serde_json::to_value(r.remainder)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    match &r.shuffle {
        Some(s) => writeln!(
            out,
            "shuffle: seed {}, buffer {}; remainder {remainder}",
            s.seed, s.buffer
        )?,
        None => writeln!(out, "no shuffle; remainder {remainder}")?,
    }
    for c in &r.per_consumer {
        writeln!(
            out,
            "consumer {}: {} of {} delivered, {} remaining",
            c.consumer, c.delivered, c.share, c.remaining
        )?;
    }
    if let Some(w) = r.packing_windows {
        writeln!(out, "packing: {w} consumer windows")?;
    }
    if let Some(m) = &r.mixture {
        writeln!(
            out,
            "mixture of {} sources: weights {:?}, seed {}, stop {}",
            m.sources.len(),
            m.weights,
            m.seed,
            m.stop
        )?;
    }
    if let Some(w) = r.next_worker {
        writeln!(out, "next worker: {w}")?;
    }
    if let Some(m) = mismatch {
        match m {
            None => writeln!(out, "dataset: the one it was saved on")?,
            Some(why) => writeln!(out, "dataset: not the one it was saved on: {why}")?,
        }
    }
    Ok(())
}
