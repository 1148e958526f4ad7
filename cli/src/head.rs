//! `lodt head FILE [-n N] [--full]` and `lodt cat FILE [--full]`: one JSON
//! object per top-level row (a key per tensor, each value that row's nested
//! lists), streamed batch by batch, for pipes (`jq`, `head`). By default each
//! value shows at most as many numbers as `lodt show` does, the rest counted
//! in a `"... (N more)"` string; `--full` prints every number.

use crate::common::{self, CliError, escape_json};
use lodt::Batch;
use lodt::convert::{ConvertOptions, Format};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The file: any format `lodt convert` reads, or - (stdin, with --format).
    file: PathBuf,
    /// The format of the file (an extension: lodt, parquet, arrows, ...); needed for -.
    #[arg(long, value_parser = common::parse_format)]
    format: Option<Format>,
    /// Only these tensors (Arrow/Parquet columns), comma-separated, in this order.
    #[arg(long, value_delimiter = ',')]
    columns: Option<Vec<String>>,
    /// Print every value (exact JSON). By default each tensor's value in a row shows its first
    /// numbers and ends each list it cuts with "... (N more)".
    #[arg(long)]
    full: bool,
    /// Parquet input: the most bytes one batch may decode to (K, M, G suffixes; default 256M).
    /// A larger row group is read in several batches; a row that needs more is an error.
    #[arg(long, value_name = "BYTES", value_parser = crate::dataset::parse_bytes)]
    decode_budget: Option<u64>,
}

#[derive(clap::Args)]
pub struct HeadArgs {
    #[command(flatten)]
    common: Args,
    /// How many rows.
    #[arg(short = 'n', long = "lines", default_value_t = 10)]
    n: u64,
}

/// `lodt head`: the first `n` rows.
pub fn head(args: HeadArgs) -> Result<(), CliError> {
    rows(&args.common, Some(args.n))
}

/// `lodt cat`: every row.
pub fn cat(args: Args) -> Result<(), CliError> {
    rows(&args, None)
}

fn rows(args: &Args, limit: Option<u64>) -> Result<(), CliError> {
    if limit == Some(0) {
        return Ok(());
    }
    let options = ConvertOptions {
        columns: args.columns.clone(),
        decode_budget: args.decode_budget,
        ..Default::default()
    };
    let reader = common::open_batches(&args.file, args.format, &options)?;
    let mut out = common::stdout();
    let mut printed = 0u64;
    for batch in reader {
        let batch = batch.map_err(common::convert_error)?;
        let keys: Vec<String> = batch
            .names()
            .map(|n| serde_json::to_string(n).unwrap_or_else(|_| "\"\"".into()))
            .collect();
        let rows = batch
            .iter()
            .map(|(_, t)| if t.is_scalar() { 1 } else { t.top_level_rows() })
            .max()
            .unwrap_or(0);
        for row in 0..rows {
            if limit.is_some_and(|n| printed >= n) {
                return common::finish(out);
            }
            let line = row_line(&batch, &keys, row, args.full)?;
            writeln!(out, "{}", escape_json(&line))?;
            printed += 1;
        }
        // Each batch reaches the pipe as soon as it is read.
        out.flush()?;
    }
    common::finish(out)
}

/// `{"a":...,"b":...}` for top-level row `row`, each value capped unless
/// `full`; a tensor with fewer rows gives null.
fn row_line(batch: &Batch, keys: &[String], row: usize, full: bool) -> Result<String, CliError> {
    let cap = if full {
        usize::MAX
    } else {
        crate::show::MAX_VALUES
    };
    let mut line = String::from("{");
    for (n, ((_, tensor), key)) in batch.iter().zip(keys).enumerate() {
        if n > 0 {
            line.push(',');
        }
        line.push_str(key);
        line.push(':');
        let has = tensor.is_scalar() || row < tensor.top_level_rows();
        if has {
            line.push_str(
                &lodt::tensor::row_json_capped(tensor, row, cap).map_err(CliError::failure)?,
            );
        } else {
            line.push_str("null");
        }
    }
    line.push('}');
    Ok(line)
}
