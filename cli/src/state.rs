//! `lodt state show STATE [--dataset D] [--json]`: what a saved loader state
//! or checkpoint says (the crate's `StateReport`); `lodt state check STATE
//! --dataset D [--world-size W --workers K] [--json]`: a dry run of the rest
//! of its epoch (the crate's `ResumeCheck`), exit 1 unless it holds.

use crate::common::{self, CliError};
use lodt::dataset::{Dataset, ResumeCheck, StateReport};
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
    /// Dry-run the rest of the state's epoch on a dataset (ids only, no tensor bytes): exit 1 unless every remaining sequence is delivered exactly once and none delivered before again.
    Check(CheckArgs),
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The state: a JSON file (a merged `Dataset.state_dict()`, or a complete loader state).
    state: PathBuf,
    /// The dataset it was saved on (a directory or URI).
    #[arg(long)]
    dataset: PathBuf,
    /// The ranks to resume on (default: the world the state was saved at).
    #[arg(long)]
    world_size: Option<u64>,
    /// The workers (consumers) per rank (default 1, or the state's consumers split into ranks of this many without --world-size).
    #[arg(long)]
    workers: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
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
    match args.command {
        Command::Show(args) => show(args),
        Command::Check(args) => check(args),
    }
}

/// The JSON of the state file at `path`.
fn read_json(path: &std::path::Path) -> Result<serde_json::Value, CliError> {
    let text = std::fs::read(path)
        .map_err(|e| CliError::failure(format!("{}: {e}", common::path(path))))?;
    serde_json::from_slice(&text)
        .map_err(|e| CliError::failure(format!("{}: not JSON: {e}", common::path(path))))
}

fn check(args: CheckArgs) -> Result<(), CliError> {
    let json = read_json(&args.state)?;
    let store = common::dataset_store(&args.dataset, true).map_err(CliError::failure)?;
    let dataset = Dataset::open_in(store).map_err(CliError::failure)?;
    let report = ResumeCheck::of_json(dataset, &json, args.world_size, args.workers)
        .map_err(|e| CliError::failure(format!("{}: {e}", common::path(&args.state))))?;
    let mut out = common::stdout();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_value(&report).map_err(CliError::failure)?
        )?;
    } else {
        write_check(&mut out, &report)?;
    }
    common::finish(out)?;
    verdict(&report, &args.state)
}

/// Exit 1, naming the first offending sequence, unless the check holds.
fn verdict(report: &ResumeCheck, state: &std::path::Path) -> Result<(), CliError> {
    match &report.first_offence {
        None => Ok(()),
        Some(o) => Err(CliError::failure(format!(
            "{}: the resume does not hold: {o} ({} repeated, {} skipped)",
            common::path(state),
            report.repeated,
            report.skipped
        ))),
    }
}

fn write_check(out: &mut impl Write, r: &ResumeCheck) -> std::io::Result<()> {
    writeln!(
        out,
        "{} partition, epoch {}: saved by {} consumers, resumed on {} ranks × {} workers",
        r.partition, r.epoch, r.state_consumers, r.world_size, r.workers
    )?;
    writeln!(
        out,
        "{} sequences of the epoch: {} delivered before, {} remaining",
        r.sequences, r.delivered_before, r.remaining
    )?;
    for (c, n) in r.per_consumer.iter().enumerate() {
        writeln!(out, "consumer {c}: {n} delivered")?;
    }
    writeln!(
        out,
        "delivered by the dry run: {}; repeated {}, skipped {}; dropped (drop) {}, repeats (repeat) {}",
        r.delivered, r.repeated, r.skipped, r.dropped, r.repeats
    )?;
    let verdict = if r.holds {
        "holds: every remaining sequence delivered once, none delivered before again"
    } else {
        "does not hold"
    };
    writeln!(out, "{verdict} ({:.3} s)", r.seconds)
}

fn show(args: ShowArgs) -> Result<(), CliError> {
    let json = read_json(&args.state)?;
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
        for (k, s) in m.sources.iter().enumerate() {
            let drawn = m
                .delivered
                .as_ref()
                .and_then(|d| d.get(k))
                .map_or(String::new(), |d| format!(", {d} of its draws delivered"));
            writeln!(
                out,
                "  source {k}: {} sequences, fingerprint {:#010x}, weight {}{drawn}",
                s.sequences,
                s.fingerprint,
                m.weights.get(k).copied().unwrap_or(0.0)
            )?;
        }
        if let Some(e) = &m.evolved {
            writeln!(
                out,
                "  continues a change of parameters made after {} positions of epoch {} ({} sources removed since)",
                e.delivered,
                e.epoch,
                e.removed.len()
            )?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use lodt::dataset::{Fault, Offence};

    /// A report of a run that delivers sequence 17 again: the text says so
    /// and the exit is 1, naming it (a loader whose dealing is right never
    /// gives one, so the binary's tests cannot make it).
    #[test]
    fn a_check_that_does_not_hold_exits_1_naming_the_sequence() {
        let report = ResumeCheck {
            epoch: 2,
            partition: "round_robin".into(),
            sequences: 10,
            state_consumers: 2,
            world_size: 2,
            workers: 1,
            delivered_before: 4,
            remaining: 6,
            per_consumer: vec![3, 3],
            delivered: 6,
            repeated: 1,
            skipped: 1,
            dropped: 0,
            repeats: 0,
            first_offence: Some(Offence {
                id: 17,
                fault: Fault::Again,
                consumer: Some(1),
            }),
            holds: false,
            seconds: 0.25,
        };
        let mut text = Vec::new();
        write_check(&mut text, &report).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("10 sequences of the epoch: 4 delivered before, 6 remaining\nconsumer 0: 3 delivered\nconsumer 1: 3 delivered\n"),
            "{text}"
        );
        assert!(text.ends_with("does not hold (0.250 s)\n"), "{text}");
        let err = verdict(&report, std::path::Path::new("s.json")).unwrap_err();
        let message = format!("{err:?}");
        assert!(
            message.contains("s.json: the resume does not hold: sequence 17 was delivered before the state and is delivered again (the second time by consumer 1) (1 repeated, 1 skipped)"),
            "{message}"
        );
        assert!(message.contains("code: 1"), "{message}");
    }
}
