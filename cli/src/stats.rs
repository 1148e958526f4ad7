//! `lodt stats FILE [--json]`: per tensor, the sequences of each LoD level
//! and how long they are (min, p50, p99, max, mean, a histogram), over every
//! batch of any readable file.

use crate::common::{self, CliError, escape_json, escape_text, human, list};
use lodt::batch::stats::{LevelStats, Stats};
use lodt::convert::{ConvertOptions, Format};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

/// Histogram buckets in the text form.
const BUCKETS: usize = 8;
/// The widest histogram bar.
const BAR: usize = 30;

#[derive(clap::Args)]
pub struct Args {
    /// The file: any format `lodt convert` reads, or - (stdin, with --format).
    file: PathBuf,
    /// The format of the file (an extension: lodt, parquet, arrows, ...); needed for -.
    #[arg(long, value_parser = common::parse_format)]
    format: Option<Format>,
    /// Only these tensors (Arrow/Parquet columns), comma-separated.
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Parquet input: the most bytes one batch may decode to (K, M, G suffixes; default 256M).
    /// A larger row group is read in several batches; a row that needs more is an error.
    #[arg(long, value_name = "BYTES", value_parser = crate::dataset::parse_bytes)]
    decode_budget: Option<u64>,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let options = ConvertOptions {
        columns: args.columns.clone(),
        decode_budget: args.decode_budget,
        ..Default::default()
    };
    let reader = common::open_batches(&args.file, args.format, &options)?;
    let bar = common::progress_count(reader.num_batches().unwrap_or(0) as u64, "reading");
    let mut stats = Stats::new();
    for batch in reader {
        stats.add(&batch.map_err(common::convert_error)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut out = common::stdout();
    if args.json {
        writeln!(out, "{}", escape_json(&to_json(&args, &stats).to_string()))?;
        return common::finish(out);
    }
    writeln!(
        out,
        "{}: {}, {}",
        common::path(&args.file),
        common::plural(stats.batches(), "batch", "batches"),
        common::plural(stats.tensors().len() as u64, "tensor", "tensors")
    )?;
    for t in stats.tensors() {
        writeln!(out)?;
        writeln!(
            out,
            "{}  {}, element shape {}, {}; {} in {}, body {}",
            escape_text(&t.name),
            t.dtype,
            list(&t.element_shape),
            match t.levels.len() {
                0 => "no LoD".to_string(),
                1 => "1 LoD level".to_string(),
                n => format!("{n} LoD levels"),
            },
            common::plural(t.rows, "row", "rows"),
            common::plural(t.batches, "batch", "batches"),
            human(t.bytes)
        )?;
        for (l, level) in t.levels.iter().enumerate() {
            let unit = if l + 1 == t.levels.len() {
                "rows"
            } else {
                "sequences"
            };
            writeln!(
                out,
                "  level {l}: {}; length in {unit}: {}",
                common::plural(level.sequences(), "sequence", "sequences"),
                summary(level)
            )?;
            histogram(&mut out, level)?;
        }
    }
    common::finish(out)
}

/// `min 1, p50 3, p99 12, max 15, mean 3.20`.
fn summary(level: &LevelStats) -> String {
    match (level.min(), level.max(), level.mean()) {
        (Some(min), Some(max), Some(mean)) => format!(
            "min {min}, p50 {}, p99 {}, max {max}, mean {mean:.2}",
            level.quantile(0.5).unwrap_or(min),
            level.quantile(0.99).unwrap_or(max),
        ),
        _ => "(no sequences)".into(),
    }
}

fn histogram(out: &mut impl Write, level: &LevelStats) -> std::io::Result<()> {
    let buckets = level.histogram(BUCKETS);
    let most = buckets.iter().map(|(_, n)| *n).max().unwrap_or(0);
    if buckets.len() < 2 || most == 0 {
        return Ok(());
    }
    let labels: Vec<String> = buckets
        .iter()
        .map(|(r, _)| {
            if r.end - r.start == 1 {
                r.start.to_string()
            } else {
                format!("{}..{}", r.start, r.end)
            }
        })
        .collect();
    let width = labels.iter().map(String::len).max().unwrap_or(0);
    for (label, (_, n)) in labels.iter().zip(&buckets) {
        let bar = ((*n as u128 * BAR as u128).div_ceil(most as u128)) as usize;
        writeln!(out, "    {label:>width$} | {:<BAR$} {n}", "#".repeat(bar))?;
    }
    Ok(())
}

fn level_json(level: &LevelStats) -> Value {
    json!({
        "sequences": level.sequences(),
        "total": level.total().to_string().parse::<u64>().unwrap_or(u64::MAX),
        "min": level.min(),
        "p50": level.quantile(0.5),
        "p99": level.quantile(0.99),
        "max": level.max(),
        "mean": level.mean(),
        "histogram": level.histogram(BUCKETS).iter().map(|(r, n)| json!({"start": r.start, "end": r.end, "count": n})).collect::<Vec<_>>(),
    })
}

fn to_json(args: &Args, stats: &Stats) -> Value {
    let tensors: Vec<Value> = stats
        .tensors()
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "dtype": t.dtype.name(),
                "element_shape": t.element_shape,
                "batches": t.batches,
                "rows": t.rows,
                "body_bytes": t.bytes,
                "levels": t.levels.iter().map(level_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "file": args.file.display().to_string(),
        "batches": stats.batches(),
        "tensors": tensors,
    })
}
