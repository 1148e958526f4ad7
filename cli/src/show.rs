//! `lodt show FILE [--batch N] [--tensor NAME] [--branch I,J,...] [--json]`.

use crate::common::{self, CliError, escape_json, escape_text, list};
use lodt::batch::BatchReader;
use lodt::convert::{ConvertOptions, Format};
use lodt::{Lod, LodTensor};
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;

/// Sequences printed in the text form; `--json` prints everything.
const MAX_LINES: usize = 40;
/// Values printed per sequence in the text form.
const MAX_VALUES: usize = 12;

#[derive(clap::Args)]
pub struct Args {
    /// The file: .lodt (read in place), or any format `lodt convert` reads.
    file: PathBuf,
    /// The batch.
    #[arg(long, default_value_t = 0)]
    batch: usize,
    /// The tensor (may be left out when the batch has only one).
    #[arg(long)]
    tensor: Option<String>,
    /// A branch slice: one sequence index per LoD level from the top, e.g. `2,0`.
    #[arg(long, value_parser = parse_branch)]
    branch: Option<Branch>,
    /// Print exactly {"name","dtype","shape","lod","values"} as one line of JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    read: common::ReadArgs,
}

/// The indices of a `--branch` path.
#[derive(Clone, Debug)]
pub struct Branch(Vec<usize>);

fn parse_branch(s: &str) -> Result<Branch, String> {
    s.split(',')
        .map(|p| {
            p.trim().parse::<usize>().map_err(|_| {
                format!("expected comma-separated sequence indices like 2,0; found {p:?}")
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Branch)
}

pub fn run(args: Args) -> Result<(), CliError> {
    // .lodt (and anything without a known extension) is read in place;
    // the other formats `lodt convert` knows are read through it.
    match Format::from_path(&args.file) {
        Ok(format) if format != Format::Lodt => {
            let options = ConvertOptions::default();
            let mut reader = format
                .open_reader(&args.file, &options)
                .map_err(CliError::failure)?;
            let batch = match reader.num_batches() {
                Some(n) if args.batch >= n => None,
                _ => reader
                    .read_batch(args.batch)
                    .or_else(|| reader.nth(args.batch)),
            };
            let batch = batch
                .transpose()
                .map_err(CliError::failure)?
                .ok_or_else(|| {
                    CliError::usage(format!(
                        "{} has no batch {}",
                        common::path(&args.file),
                        args.batch
                    ))
                })?;
            let names: Vec<&str> = batch.names().collect();
            let name = choose(&args, &names)?;
            let tensor = batch
                .get(&name)
                .ok_or_else(|| CliError::usage(no_such(&args, &name, &names)))?;
            print(&args, &name, tensor.clone())
        }
        _ => {
            let file = args.read.open(&args.file)?;
            let batch = file.batch(args.batch)?;
            let names: Vec<&str> = batch.names().collect();
            let name = choose(&args, &names)?;
            print(&args, &name, batch.tensor(&name)?)
        }
    }
}

/// The tensor to show: `--tensor`, or the batch's only one.
fn choose(args: &Args, names: &[&str]) -> Result<String, CliError> {
    match (&args.tensor, names) {
        (Some(name), _) => Ok(name.clone()),
        (None, [only]) => Ok((*only).to_owned()),
        (None, _) => Err(CliError::usage(format!(
            "batch {} has {} tensors; choose one with --tensor: {}",
            args.batch,
            names.len(),
            common::names(names.iter().copied())
        ))),
    }
}

fn no_such(args: &Args, name: &str, names: &[&str]) -> String {
    format!(
        "batch {} has no tensor {name:?}; it has: {}",
        args.batch,
        common::names(names.iter().copied())
    )
}

/// Prints `whole`, or its `--branch` slice, as JSON or text.
fn print(args: &Args, name: &str, whole: LodTensor) -> Result<(), CliError> {
    let view = match &args.branch {
        None => whole,
        Some(Branch(path)) => whole
            .branch(path)
            .map_err(|e| CliError::usage(format!("--branch {}: {e}", list(path))))?,
    };
    let mut out = common::stdout();
    if args.json {
        let json = lodt::tensor::tensor_json(name, &view).map_err(CliError::failure)?;
        writeln!(out, "{}", escape_json(&json))?;
    } else {
        text(&mut out, args, name, &view)?;
    }
    common::finish(out)
}

/// The readable form: a header, then one line per innermost sequence.
fn text(out: &mut impl Write, args: &Args, name: &str, v: &LodTensor) -> Result<(), CliError> {
    let what = match &args.branch {
        Some(Branch(path)) => format!(
            "branch <{}> of ",
            path.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => String::new(),
    };
    writeln!(
        out,
        "tensor  {} ({what}batch {})",
        escape_text(name),
        args.batch
    )?;
    writeln!(out, "dtype   {}", v.dtype())?;
    writeln!(out, "shape   {}", list(v.shape()))?;
    writeln!(out, "lod     {}", v.lod())?;
    let per_row = v.row_numel();
    let (lines, total) = sequences(v.lod(), v.rows() as u64, MAX_LINES);
    writeln!(
        out,
        "values  {}",
        if v.lod().is_empty() {
            "(all rows)".to_string()
        } else {
            "(one line per sequence of the last level: <path> rows)".to_string()
        }
    )?;
    for (path, rows) in &lines {
        let start = rows.start as usize * per_row;
        let end = rows.end as usize * per_row;
        let count = end - start;
        let shown: Vec<String> = (start..end.min(start + MAX_VALUES))
            .map(|e| value(v, e))
            .collect();
        let more = if count > MAX_VALUES {
            format!(" ... ({count} values)")
        } else {
            String::new()
        };
        let label = if path.is_empty() {
            String::new()
        } else {
            format!(
                "<{}> ",
                path.iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        writeln!(
            out,
            "  {label}rows {}..{}: {}{more}",
            rows.start,
            rows.end,
            shown.join(" ")
        )?;
    }
    if total > lines.len() {
        writeln!(
            out,
            "  ... {} more sequences (--json prints everything)",
            total - lines.len()
        )?;
    }
    Ok(())
}

/// One printed sequence: its path from the top, and its rows.
type Line = (Vec<usize>, Range<u64>);

/// The first `limit` sequences of the last level, each with its path from the
/// top and its rows, and how many there are in all. Each level's offsets are
/// read once, and the walk stops at `limit`, so a huge LoD costs no more than
/// its size.
fn sequences(lod: &Lod, rows: u64, limit: usize) -> (Vec<Line>, usize) {
    fn walk(
        levels: &[Vec<u64>],
        level: usize,
        seqs: Range<u64>,
        path: &mut Vec<usize>,
        out: &mut Vec<Line>,
        limit: usize,
    ) {
        let Some(offsets) = levels.get(level) else {
            return;
        };
        for (n, s) in (seqs.start as usize..seqs.end as usize).enumerate() {
            if out.len() >= limit {
                return;
            }
            let (Some(&a), Some(&b)) = (offsets.get(s), offsets.get(s + 1)) else {
                return;
            };
            path.push(n);
            if level + 1 == levels.len() {
                out.push((path.clone(), a..b));
            } else {
                walk(levels, level + 1, a..b, path, out, limit);
            }
            path.pop();
        }
    }
    let levels: Vec<Vec<u64>> = (0..lod.num_levels())
        .filter_map(|l| lod.offsets(l).ok().map(Iterator::collect))
        .collect();
    let Some(last) = levels.len().checked_sub(1) else {
        return (vec![(Vec::new(), 0..rows)], 1);
    };
    let total = lod.num_sequences(last).unwrap_or(0);
    let mut out = Vec::new();
    let top = lod.num_sequences(0).unwrap_or(0) as u64;
    walk(&levels, 0, 0..top, &mut Vec::new(), &mut out, limit);
    (out, total)
}

/// Element `i` of `v` as text (bounds come from the tensor's own shape).
fn value(v: &LodTensor, i: usize) -> String {
    lodt::with_element!(v.dtype(), T => {
        v.as_slice::<T>()
            .ok()
            .and_then(|s| s.get(i))
            .map_or_else(|| "?".into(), |x| x.to_string())
    })
}
