//! `lodt info FILE [--json]`.

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

pub fn run(args: Args) -> Result<(), CliError> {
    if args.file.is_dir() {
        return crate::dataset::info(&args.file, args.json);
    }
    let file = args.read.open(&args.file)?;
    let mut out = common::stdout();
    if args.json {
        let v = to_json(&args, &file)?;
        writeln!(out, "{}", escape_json(&v.to_string()))?;
        return common::finish(out);
    }
    let mut body = 0;
    let mut lines = Vec::new();
    let n = file.num_batches();
    for k in 0..n {
        let b = file.batch(k)?;
        body += b.body_bytes();
        if n > SHOWN && k == SHOWN - 2 {
            lines.push(format!(
                "... {} more batches (lodt info --json lists every one)",
                n - SHOWN + 1
            ));
        }
        if n > SHOWN && (SHOWN - 2..n - 1).contains(&k) {
            continue;
        }
        let r = b.byte_range();
        lines.push(format!(
            "batch {k}: {} tensors, {} at offset {}, metadata {}",
            b.len(),
            human(r.end - r.start),
            r.start,
            pairs(b.metadata())
        ));
        for t in b.tensors() {
            let (name, v) = t?;
            lines.push(format!(
                "  {:<12} {:<8} shape {:<16} lod {} levels  rows {:<8} body {}",
                escape_text(name),
                v.dtype().name(),
                list(v.shape()),
                v.lod().num_levels(),
                v.rows(),
                human(v.as_bytes().len() as u64),
            ));
        }
    }
    writeln!(out, "file      {}", common::path(&args.file))?;
    writeln!(out, "format    .lodt {}", file.version())?;
    writeln!(
        out,
        "size      {} ({} bytes); tensor bodies {}",
        human(file.file_size()),
        file.file_size(),
        human(body)
    )?;
    writeln!(out, "batches   {n}")?;
    writeln!(out, "metadata  {}", pairs(file.metadata()))?;
    for line in lines {
        writeln!(out, "{line}")?;
    }
    common::finish(out)
}

fn to_json(args: &Args, file: &LodtFile) -> Result<Value, CliError> {
    let mut batches = Vec::new();
    let mut body = 0;
    for k in 0..file.num_batches() {
        let b = file.batch(k)?;
        body += b.body_bytes();
        let mut tensors = Vec::new();
        for t in b.tensors() {
            let (name, v) = t?;
            tensors.push(json!({
                "name": name,
                "dtype": v.dtype().name(),
                "shape": v.shape(),
                "lod_levels": v.lod().num_levels(),
                "rows": v.rows(),
                "body_bytes": v.as_bytes().len(),
            }));
        }
        let r = b.byte_range();
        batches.push(json!({
            "index": k,
            "offset": r.start,
            "length": r.end - r.start,
            "body_bytes": b.body_bytes(),
            "metadata": b.metadata(),
            "tensors": tensors,
        }));
    }
    Ok(json!({
        "file": args.file.display().to_string(),
        "version": file.version().to_string(),
        "file_size": file.file_size(),
        "body_bytes": body,
        "num_batches": file.num_batches(),
        "metadata": file.metadata(),
        "batches": batches,
    }))
}
