//! `lodt show FILE [--batch N] [--tensor NAME] [--branch I,J,...[,A..B]] [--head N] [--json]`.

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
pub const MAX_VALUES: usize = 12;
/// Offsets printed per LoD level in the text form, first and last.
const EDGE_OFFSETS: usize = 6;

#[derive(clap::Args)]
pub struct Args {
    /// The file: .lodt (read in place), any format `lodt convert` reads, or - (stdin, with --format).
    file: PathBuf,
    /// The format of the file (an extension: lodt, parquet, arrows, ...); needed for -.
    #[arg(long, value_parser = common::parse_format)]
    format: Option<Format>,
    /// The batch.
    #[arg(long, default_value_t = 0)]
    batch: usize,
    /// The tensor (may be left out when the batch has only one).
    #[arg(long)]
    tensor: Option<String>,
    /// A branch slice: one sequence index per LoD level from the top (e.g. `2,0`), optionally
    /// ending with a range of sequences (or rows, past the last level): `0..10`, `3,0..5`.
    #[arg(long, value_parser = parse_branch)]
    branch: Option<Branch>,
    /// Only the first N sequences of the top level (rows, for a tensor with no LoD); with --json too.
    #[arg(long, value_name = "N")]
    head: Option<usize>,
    /// Print exactly {"name","dtype","shape","lod","values"} as one line of JSON.
    #[arg(long)]
    json: bool,
    /// Parquet input: the most bytes one batch may decode to (K, M, G suffixes; default 256M).
    /// A larger row group is read in several batches; a row that needs more is an error.
    #[arg(long, value_name = "BYTES", value_parser = crate::dataset::parse_bytes)]
    decode_budget: Option<u64>,
    #[command(flatten)]
    read: common::ReadArgs,
}

/// A `--branch` path: indices from the top, then optionally a range.
#[derive(Clone, Debug)]
pub struct Branch {
    path: Vec<usize>,
    range: Option<Range<usize>>,
}

impl std::fmt::Display for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self.path.iter().map(|i| i.to_string()).collect();
        if let Some(r) = &self.range {
            parts.push(format!("{}..{}", r.start, r.end));
        }
        f.write_str(&parts.join(","))
    }
}

fn parse_branch(s: &str) -> Result<Branch, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let mut branch = Branch {
        path: Vec::new(),
        range: None,
    };
    let index = |p: &str| {
        p.parse::<usize>().map_err(|_| {
            format!("expected sequence indices like 2,0 (the last may be a range like 0..10); found {p:?}")
        })
    };
    for (n, part) in parts.iter().enumerate() {
        match part.split_once("..") {
            Some((a, b)) if n + 1 == parts.len() => {
                let start = if a.is_empty() { 0 } else { index(a)? };
                let end = index(b)?;
                if end < start {
                    return Err(format!("the range {part:?} ends before it starts"));
                }
                branch.range = Some(start..end);
            }
            Some(_) => return Err(format!("only the last part may be a range; found {part:?}")),
            None => branch.path.push(index(part)?),
        }
    }
    Ok(branch)
}

pub fn run(args: Args) -> Result<(), CliError> {
    // .lodt (and anything without a known extension) is read in place;
    // the other formats `lodt convert` knows are read through it.
    let format = match args.format {
        Some(f) => Ok(f),
        None if common::is_dash(&args.file) => common::format_of(&args.file, None),
        None => Ok(Format::from_path(&args.file).unwrap_or(Format::Lodt)),
    }?;
    let remote = lodt::location::is_uri(&args.file.to_string_lossy());
    if format == Format::Lodt && !common::is_dash(&args.file) && (remote || args.file.is_file()) {
        let file = args.read.open(&args.file)?;
        let batch = file.batch(args.batch)?;
        let names: Vec<&str> = batch.names().collect();
        let name = choose(&args, &names)?;
        return print(&args, &name, batch.tensor(&name)?);
    }
    let options = ConvertOptions {
        decode_budget: args.decode_budget,
        ..Default::default()
    };
    let mut reader = common::open_batches(&args.file, Some(format), &options)?;
    let batch = match reader.num_batches() {
        Some(n) if args.batch >= n => None,
        _ => reader
            .read_batch(args.batch)
            .or_else(|| reader.nth(args.batch)),
    };
    let batch = batch
        .transpose()
        .map_err(common::convert_error)?
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

/// The part of `whole` that `--branch` and `--head` select.
fn select(args: &Args, name: &str, whole: LodTensor) -> Result<LodTensor, CliError> {
    let levels = whole.lod().num_levels();
    let mut view = whole;
    if let Some(branch) = &args.branch {
        let usage = |e: String| CliError::usage(format!("--branch {branch}: {e}"));
        if branch.path.len() > levels {
            let what = match levels {
                0 => format!(
                    "tensor {name:?} has no LoD (a plain tensor of {} rows), so --branch takes no index; a range of rows like --branch 0..10 or --head N shows some",
                    view.rows()
                ),
                n => format!(
                    "tensor {name:?} has {n} LoD level{}, so --branch takes at most {n} index{} (then optionally a range)",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "" } else { "es" }
                ),
            };
            return Err(usage(what));
        }
        view = view
            .branch(&branch.path)
            .map_err(|e| usage(e.to_string()))?;
        if let Some(range) = &branch.range {
            view = view
                .slice_top(range.start, range.end)
                .map_err(|e| usage(e.to_string()))?;
        }
    }
    if let Some(n) = args.head {
        let top = view.top_level_rows();
        view = view
            .slice_top(0, n.min(top))
            .map_err(|e| CliError::usage(format!("--head {n}: {e}")))?;
    }
    Ok(view)
}

/// Prints `whole`, or its `--branch`/`--head` slice, as JSON or text.
fn print(args: &Args, name: &str, whole: LodTensor) -> Result<(), CliError> {
    let total = whole.top_level_rows();
    let view = select(args, name, whole)?;
    let mut out = common::stdout();
    if args.json {
        let json = lodt::tensor::tensor_json(name, &view).map_err(CliError::failure)?;
        writeln!(out, "{}", escape_json(&json))?;
    } else {
        text(&mut out, args, name, &view, total)?;
    }
    common::finish(out)
}

/// One LoD level's offsets, capped: the first and last few, and the count.
fn offsets_line(lod: &Lod, level: usize) -> String {
    let Some(offsets) = lod.level(level) else {
        return String::new();
    };
    let n = offsets.len();
    if n <= 2 * EDGE_OFFSETS {
        return list(offsets.iter());
    }
    let first: Vec<String> = offsets
        .iter()
        .take(EDGE_OFFSETS)
        .map(|o| o.to_string())
        .collect();
    let last: Vec<String> = (n - EDGE_OFFSETS..n)
        .filter_map(|i| offsets.get(i))
        .map(|o| o.to_string())
        .collect();
    format!(
        "[{}, ... {}] ({n} offsets, {} sequences)",
        first.join(", "),
        last.join(", "),
        n - 1
    )
}

/// The readable form: a header, then one line per innermost sequence.
fn text(
    out: &mut impl Write,
    args: &Args,
    name: &str,
    v: &LodTensor,
    total: usize,
) -> Result<(), CliError> {
    let mut what = match &args.branch {
        Some(branch) => format!("branch <{branch}> of "),
        None => String::new(),
    };
    if let Some(n) = args.head {
        what = format!(
            "first {} of {total} top-level, {what}",
            n.min(v.top_level_rows())
        );
    }
    writeln!(
        out,
        "tensor  {} ({what}batch {})",
        escape_text(name),
        args.batch
    )?;
    writeln!(out, "dtype   {}", v.dtype())?;
    writeln!(out, "shape   {}", list(v.shape()))?;
    match v.lod().num_levels() {
        0 => writeln!(out, "lod     (none)")?,
        levels => {
            for l in 0..levels {
                let label = if l == 0 { "lod" } else { "" };
                writeln!(out, "{label:<7} level {l}: {}", offsets_line(v.lod(), l))?;
            }
        }
    }
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
            "  ... {} more sequences (--head N or --branch A..B shows others; --json prints everything)",
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
