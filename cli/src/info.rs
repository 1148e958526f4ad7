//! `lodt info FILE [--json]`: the schema once, one line per batch (capped),
//! and totals (sequences per level, rows, bytes, overhead).

use crate::common::{self, CliError, escape_json, escape_text, human, list, pairs};
use lodt::format::LodtFile;
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
    #[command(flatten)]
    read: common::ReadArgs,
}

/// One tensor layout of the schema: name, dtype, element shape, levels.
#[derive(Clone, PartialEq, Eq)]
struct Layout {
    name: String,
    dtype: &'static str,
    element_shape: Vec<usize>,
    levels: usize,
}

/// A tensor's totals over every batch.
#[derive(Default, Clone)]
struct Totals {
    sequences: Vec<u64>,
    rows: u64,
    body: u64,
    lod: u64,
}

/// Everything `info` reports, gathered in one pass over the batches.
struct Summary {
    schema: Vec<Layout>,
    totals: Vec<Totals>,
    batches: Vec<Value>,
    lines: Vec<String>,
    body: u64,
    lod: u64,
}

fn summarize(file: &LodtFile, keep_json: bool) -> Result<Summary, CliError> {
    let mut s = Summary {
        schema: Vec::new(),
        totals: Vec::new(),
        batches: Vec::new(),
        lines: Vec::new(),
        body: 0,
        lod: 0,
    };
    let n = file.num_batches();
    for k in 0..n {
        let b = file.batch(k)?;
        let mut tensors = Vec::new();
        let mut top_rows: Option<usize> = None;
        for t in b.tensors() {
            let (name, v) = t?;
            let layout = Layout {
                name: name.to_owned(),
                dtype: v.dtype().name(),
                element_shape: v.element_shape().to_vec(),
                levels: v.lod().num_levels(),
            };
            let index = match s.schema.iter().position(|l| *l == layout) {
                Some(i) => i,
                None => {
                    s.schema.push(layout);
                    s.totals.push(Totals::default());
                    s.schema.len() - 1
                }
            };
            let lod = v.lod();
            let total = &mut s.totals[index];
            total.sequences.resize(lod.num_levels(), 0);
            let mut lod_bytes = 0u64;
            for l in 0..lod.num_levels() {
                let seqs = lod.num_sequences(l).unwrap_or(0) as u64;
                total.sequences[l] += seqs;
                lod_bytes += (seqs + 1) * 8;
            }
            let body = v.as_bytes().len() as u64;
            total.rows += v.rows() as u64;
            total.body += body;
            total.lod += lod_bytes;
            s.body += body;
            s.lod += lod_bytes;
            top_rows.get_or_insert(v.top_level_rows());
            if keep_json {
                tensors.push(json!({
                    "name": name,
                    "dtype": v.dtype().name(),
                    "shape": v.shape(),
                    "lod_levels": lod.num_levels(),
                    "sequences": (0..lod.num_levels()).map(|l| lod.num_sequences(l).unwrap_or(0)).collect::<Vec<_>>(),
                    "rows": v.rows(),
                    "body_bytes": body,
                    "lod_bytes": lod_bytes,
                }));
            }
        }
        let r = b.byte_range();
        if keep_json {
            s.batches.push(json!({
                "index": k,
                "offset": r.start,
                "length": r.end - r.start,
                "body_bytes": b.body_bytes(),
                "top_level_rows": top_rows.unwrap_or(0),
                "metadata": b.metadata(),
                "tensors": tensors,
            }));
            continue;
        }
        if n > SHOWN && k == SHOWN - 2 {
            s.lines.push(format!(
                "  ... {} more batches (lodt info --json lists every one)",
                n - SHOWN + 1
            ));
        }
        if n > SHOWN && (SHOWN - 2..n - 1).contains(&k) {
            continue;
        }
        s.lines.push(format!(
            "  batch {k}: {}, {}, {} at offset {}, metadata {}",
            common::plural(
                top_rows.unwrap_or(0) as u64,
                "top-level row",
                "top-level rows"
            ),
            common::plural(b.len() as u64, "tensor", "tensors"),
            human(r.end - r.start),
            r.start,
            pairs(b.metadata())
        ));
    }
    Ok(s)
}

pub fn run(args: Args) -> Result<(), CliError> {
    if common::is_dataset(&args.file) {
        return crate::dataset::info(&args.file, args.json);
    }
    if let Some(e) = common::not_lodt(&args.file, "info") {
        return Err(e);
    }
    let file = args.read.open(&args.file)?;
    let summary = summarize(&file, args.json)?;
    let mut out = common::stdout();
    let size = file.file_size();
    let overhead = size.saturating_sub(summary.body + summary.lod);
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
        common::plural(summary.schema.len() as u64, "tensor", "tensors")
    )?;
    let width = summary
        .schema
        .iter()
        .map(|l| escape_text(&l.name).chars().count())
        .max()
        .unwrap_or(0)
        .clamp(6, 32);
    for l in &summary.schema {
        writeln!(
            out,
            "  {:<width$}  {:<8} element shape {:<12} {}",
            escape_text(&l.name),
            l.dtype,
            list(&l.element_shape),
            match l.levels {
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
    for (l, t) in summary.schema.iter().zip(&summary.totals) {
        let seqs = if t.sequences.is_empty() {
            String::new()
        } else {
            format!("sequences per level {}, ", list(&t.sequences))
        };
        writeln!(
            out,
            "  {:<width$}  {seqs}rows {}, body {}, LoD {}",
            escape_text(&l.name),
            t.rows,
            human(t.body),
            human(t.lod)
        )?;
    }
    let decoded = summary.body + summary.lod;
    if decoded > size {
        // Compressed (format 2.0): the decoded bytes outweigh the file.
        writeln!(
            out,
            "  bytes     bodies {}, LoD {} decoded: {:.2}× the file's {} (compressed)",
            human(summary.body),
            human(summary.lod),
            decoded as f64 / size.max(1) as f64,
            human(size)
        )?;
        return common::finish(out);
    }
    writeln!(
        out,
        "  bytes     bodies {} ({:.1}%), LoD {} ({:.1}%), overhead {} ({:.1}%: headers, metadata, padding, index)",
        human(summary.body),
        share(summary.body),
        human(summary.lod),
        share(summary.lod),
        human(overhead),
        share(overhead)
    )?;
    common::finish(out)
}

fn to_json(args: &Args, file: &LodtFile, s: &Summary, overhead: u64) -> Value {
    let schema: Vec<Value> = s
        .schema
        .iter()
        .zip(&s.totals)
        .map(|(l, t)| {
            json!({
                "name": l.name,
                "dtype": l.dtype,
                "element_shape": l.element_shape,
                "lod_levels": l.levels,
                "sequences": t.sequences,
                "rows": t.rows,
                "body_bytes": t.body,
                "lod_bytes": t.lod,
            })
        })
        .collect();
    json!({
        "file": args.file.display().to_string(),
        "version": file.version().to_string(),
        "file_size": file.file_size(),
        "body_bytes": s.body,
        "lod_bytes": s.lod,
        "overhead_bytes": overhead,
        "num_batches": file.num_batches(),
        "metadata": file.metadata(),
        "schema": schema,
        "batches": s.batches,
    })
}
