//! `lodt info FILE [--json]`: the schema once, one line per batch (capped),
//! and totals (sequences per level, rows, bytes, overhead).

use crate::common::{self, CliError, escape_json, escape_text, human, list, pairs};
use lodt::format::{FileSummary, LodtFile};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

/// Batches listed in full in the text form; beyond, the middle is elided.
const SHOWN: usize = 12;

#[derive(clap::Args)]
pub struct Args {
    /// The .lodt file, or a dataset directory.
    file: PathBuf,
    /// Print JSON (every batch and tensor) instead of text.
    #[arg(long)]
    json: bool,
    /// A dataset's version: its number, or a tag's name (`lodt log DIR`
    /// lists them). Default: the current one.
    #[arg(long, value_name = "N|TAG")]
    version: Option<String>,
    #[command(flatten)]
    read: common::ReadArgs,
}

/// Everything `info` reports, gathered in one pass over the batches
/// ([`LodtFile::summarize`]): the batches as JSON values or as the lines
/// of the text form (capped).
struct Summary {
    file: FileSummary,
    batches: Vec<Value>,
    lines: Vec<String>,
}

fn summarize(file: &LodtFile, keep_json: bool) -> Result<Summary, CliError> {
    let n = file.num_batches();
    let (mut batches, mut lines) = (Vec::new(), Vec::new());
    let summary = file.summarize(|b| {
        let k = b.index;
        let r = &b.byte_range;
        if keep_json {
            let tensors: Vec<Value> = b
                .tensors
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "dtype": t.dtype.name(),
                        "shape": t.shape,
                        "lod_levels": t.sequences.len(),
                        "sequences": t.sequences,
                        "rows": t.rows,
                        "body_bytes": t.body_bytes,
                        "lod_bytes": t.lod_bytes,
                    })
                })
                .collect();
            batches.push(json!({
                "index": k,
                "offset": r.start,
                "length": r.end - r.start,
                "body_bytes": b.body_bytes,
                "top_level_rows": b.top_level_rows,
                "metadata": b.metadata,
                "tensors": tensors,
            }));
            return;
        }
        if n > SHOWN && k == SHOWN - 2 {
            lines.push(format!(
                "  ... {} more batches (lodt info --json lists every one)",
                n - SHOWN + 1
            ));
        }
        if n > SHOWN && (SHOWN - 2..n - 1).contains(&k) {
            return;
        }
        lines.push(format!(
            "  batch {k}: {}, {}, {} at offset {}, metadata {}",
            common::plural(b.top_level_rows as u64, "top-level row", "top-level rows"),
            common::plural(b.tensors.len() as u64, "tensor", "tensors"),
            human(r.end - r.start),
            r.start,
            pairs(&b.metadata)
        ));
    })?;
    Ok(Summary {
        file: summary,
        batches,
        lines,
    })
}

pub fn run(args: Args) -> Result<(), CliError> {
    if common::is_dataset(&args.file) {
        return crate::dataset::info(&args.file, args.json, args.version.as_deref());
    }
    if args.version.is_some() {
        return Err(CliError::usage(format!(
            "--version names a dataset's version; {} is not a dataset",
            common::path(&args.file)
        )));
    }
    if let Some(e) = common::not_lodt(&args.file, "info") {
        return Err(e);
    }
    let file = args.read.open(&args.file)?;
    let summary = summarize(&file, args.json)?;
    let mut out = common::stdout();
    let size = file.file_size();
    let (body, lod) = (summary.file.body_bytes, summary.file.lod_bytes);
    let overhead = size.saturating_sub(body + lod);
    let share = |bytes: u64| {
        if size == 0 {
            0.0
        } else {
            100.0 * bytes as f64 / size as f64
        }
    };
    if args.json {
        let v = to_json(&args, &file, &summary, overhead);
        writeln!(out, "{}", escape_json(&v.to_string()))?;
        return common::finish(out);
    }
    writeln!(out, "file      {}", common::path(&args.file))?;
    writeln!(out, "format    .lodt {}", file.version())?;
    writeln!(out, "size      {} ({size} bytes)", human(size))?;
    writeln!(out, "metadata  {}", pairs(file.metadata()))?;
    writeln!(
        out,
        "schema    {}",
        common::plural(summary.file.tensors.len() as u64, "tensor", "tensors")
    )?;
    let width = summary
        .file
        .tensors
        .iter()
        .map(|l| escape_text(&l.name).chars().count())
        .max()
        .unwrap_or(0)
        .clamp(6, 32);
    for l in &summary.file.tensors {
        writeln!(
            out,
            "  {:<width$}  {:<8} element shape {:<12} {}",
            escape_text(&l.name),
            l.dtype.name(),
            list(&l.element_shape),
            match l.lod_levels {
                0 => "no LoD".to_string(),
                1 => "1 LoD level".to_string(),
                n => format!("{n} LoD levels"),
            }
        )?;
    }
    writeln!(out, "batches   {}", file.num_batches())?;
    for line in &summary.lines {
        writeln!(out, "{line}")?;
    }
    writeln!(
        out,
        "totals    over {}",
        common::plural(file.num_batches() as u64, "batch", "batches")
    )?;
    for t in &summary.file.tensors {
        let seqs = if t.sequences.is_empty() {
            String::new()
        } else {
            format!("sequences per level {}, ", list(&t.sequences))
        };
        writeln!(
            out,
            "  {:<width$}  {seqs}rows {}, body {}, LoD {}",
            escape_text(&t.name),
            t.rows,
            human(t.body_bytes),
            human(t.lod_bytes)
        )?;
    }
    let decoded = body + lod;
    if decoded > size {
        // Compressed (format 2.0): the decoded bytes outweigh the file.
        writeln!(
            out,
            "  bytes     bodies {}, LoD {} decoded: {:.2}× the file's {} (compressed)",
            human(body),
            human(lod),
            decoded as f64 / size.max(1) as f64,
            human(size)
        )?;
        return common::finish(out);
    }
    writeln!(
        out,
        "  bytes     bodies {} ({:.1}%), LoD {} ({:.1}%), overhead {} ({:.1}%: headers, metadata, padding, index)",
        human(body),
        share(body),
        human(lod),
        share(lod),
        human(overhead),
        share(overhead)
    )?;
    common::finish(out)
}

fn to_json(args: &Args, file: &LodtFile, s: &Summary, overhead: u64) -> Value {
    let schema: Vec<Value> = s
        .file
        .tensors
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "dtype": t.dtype.name(),
                "element_shape": t.element_shape,
                "lod_levels": t.lod_levels,
                "sequences": t.sequences,
                "rows": t.rows,
                "body_bytes": t.body_bytes,
                "lod_bytes": t.lod_bytes,
            })
        })
        .collect();
    json!({
        "file": args.file.display().to_string(),
        "version": file.version().to_string(),
        "file_size": file.file_size(),
        "body_bytes": s.file.body_bytes,
        "lod_bytes": s.file.lod_bytes,
        "overhead_bytes": overhead,
        "num_batches": file.num_batches(),
        "metadata": file.metadata(),
        "schema": schema,
        "batches": s.batches,
    })
}
