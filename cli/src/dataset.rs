//! Sharded datasets in the CLI: `lodt info DIR` and `lodt verify DIR` (the
//! other subcommands call in here when a path is a dataset), and the byte
//! counts of `--shard-bytes` and the like. `lodt convert` reads and writes
//! datasets through the crate (`lodt::convert::Endpoint`).

use crate::common::{self, CliError, escape_json, escape_text, human, list, pairs};
use lodt::dataset::{Dataset, DatasetError};
use serde_json::json;
use std::io::Write;
use std::path::Path;

/// Shards listed in full in `info`'s text; beyond, the middle is elided.
const SHOWN: usize = 12;

fn failure(e: DatasetError) -> CliError {
    match e {
        DatasetError::InvalidArgument(_) | DatasetError::AlreadyExists { .. } => CliError::usage(e),
        e => CliError::failure(e),
    }
}

/// Parses a byte count (`lodt::batch::rebatch::parse_byte_count`: a number
/// with an optional suffix `K`, `M`, `G`, `T`, powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    lodt::batch::rebatch::parse_byte_count(text).map_err(|e| e.to_string())
}

/// `lodt info DIR [--json] [--version N|TAG]`: the manifest's summary (no
/// shard is read), of the current version or the one named.
pub fn info(dir: &Path, as_json: bool, version: Option<&str>) -> Result<(), CliError> {
    let store = common::dataset_store(dir, true).map_err(failure)?;
    let dataset = match version {
        None => Dataset::open_in(store),
        Some(at) => Dataset::open_at_in(store, at),
    }
    .map_err(failure)?;
    let record = dataset.commit_record().cloned();
    let m = dataset.manifest();
    let unlisted = dataset.unlisted().map_err(failure)?;
    let totals = m.totals();
    let mut out = common::stdout();
    if as_json {
        let v = json!({
            "dataset": dir.display().to_string(),
            "version": format!("{}.{}", m.version.major, m.version.minor),
            "bytes": m.num_bytes(),
            "num_shards": m.num_shards(),
            "num_batches": m.num_batches(),
            "num_sequences": m.num_sequences(),
            "schema": m.schema,
            "metadata": m.metadata,
            "commits": m.commits,
            "dataset_version": record.as_ref().map(|r| r.version),
            "commit": record,
            "totals": totals,
            "shards": m.shards,
            "unlisted": unlisted,
        });
        writeln!(out, "{}", escape_json(&v.to_string()))?;
        return common::finish(out);
    }
    writeln!(out, "dataset   {}", common::path(dir))?;
    writeln!(
        out,
        "format    lodt-dataset {}.{}",
        m.version.major, m.version.minor
    )?;
    writeln!(
        out,
        "size      {} in {}; {}; {}",
        human(m.num_bytes()),
        common::plural(m.num_shards() as u64, "shard", "shards"),
        common::plural(m.num_batches(), "batch", "batches"),
        common::plural(m.num_sequences(), "sequence", "sequences")
    )?;
    if let Some(r) = &record {
        writeln!(
            out,
            "version   {} ({}, {}, commit {})",
            r.version,
            r.operation,
            r.time.as_deref().unwrap_or("-"),
            escape_text(r.commit_id.as_deref().unwrap_or("-"))
        )?;
    }
    writeln!(out, "metadata  {}", pairs(&m.metadata))?;
    if m.schema.is_empty() {
        writeln!(out, "schema    - (no batch written yet)")?;
    }
    for (i, (t, total)) in m.schema.tensors.iter().zip(&totals).enumerate() {
        let counts = if t.lod_levels == 0 {
            common::plural(total.rows, "row", "rows")
        } else {
            format!(
                "sequences per level {}, {}",
                list(&total.levels),
                common::plural(total.rows, "row", "rows")
            )
        };
        writeln!(
            out,
            "{} {:<12} {:<8} element {:<10} lod {:<9} {}",
            if i == 0 { "schema   " } else { "         " },
            escape_text(&t.name),
            t.dtype.name(),
            list(&t.element_shape),
            common::plural(t.lod_levels as u64, "level", "levels"),
            counts
        )?;
    }
    let n = m.shards.len();
    for (k, s) in m.shards.iter().enumerate() {
        if n > SHOWN && k == SHOWN - 2 {
            writeln!(
                out,
                "... {} more shards (lodt info --json lists every one)",
                n - SHOWN + 1
            )?;
        }
        if n > SHOWN && (SHOWN - 2..n - 1).contains(&k) {
            continue;
        }
        writeln!(
            out,
            "shard {k}: {:<24} {:>10}  {}  {}  footer CRC {:#010x}",
            escape_text(&s.name),
            human(s.bytes),
            common::plural(s.batches, "batch", "batches"),
            common::plural(s.sequences, "sequence", "sequences"),
            s.footer_crc
        )?;
    }
    if !unlisted.is_empty() {
        writeln!(
            out,
            "unlisted  {} (not part of the dataset: left by interrupted writers, or parts to merge)",
            common::names(unlisted.iter().map(String::as_str))
        )?;
    }
    common::finish(out)
}

/// `lodt log DIR [--json]`: one line per version, oldest first: its number,
/// time, commit id, operation, sequences and bytes added and removed, and
/// the tags that name it.
pub fn log(dir: &Path, as_json: bool) -> Result<(), CliError> {
    let store = common::dataset_store(dir, true).map_err(failure)?;
    let versions = Dataset::versions_in(store.clone()).map_err(failure)?;
    let tags = Dataset::tags_in(store).map_err(failure)?;
    let mut out = common::stdout();
    if as_json {
        let v = json!({
            "dataset": dir.display().to_string(),
            "versions": versions,
            "tags": tags,
        });
        writeln!(out, "{}", escape_json(&v.to_string()))?;
        return common::finish(out);
    }
    writeln!(
        out,
        "{:>7}  {:<20}  {:<32}  {:<10}  {:>12}  {:>10}  {:>12}  {:>10}  tags",
        "version", "time", "commit", "operation", "+sequences", "-sequences", "+bytes", "-bytes"
    )?;
    for r in &versions {
        let names: Vec<&str> = tags
            .iter()
            .filter(|t| t.version == r.version)
            .map(|t| t.name.as_str())
            .collect();
        writeln!(
            out,
            "{:>7}  {:<20}  {:<32}  {:<10}  {:>12}  {:>10}  {:>12}  {:>10}  {}",
            r.version,
            r.time.as_deref().unwrap_or("-"),
            escape_text(r.commit_id.as_deref().unwrap_or("-")),
            r.operation,
            r.sequences_added,
            r.sequences_removed,
            r.bytes_added,
            r.bytes_removed,
            if names.is_empty() {
                "-".to_owned()
            } else {
                names.join(",")
            }
        )?;
    }
    common::finish(out)
}

/// `lodt tag DIR NAME [N]`: names version `N` (default: the current one)
/// `NAME`, for good.
pub fn tag(dir: &Path, name: &str, version: Option<u64>) -> Result<(), CliError> {
    let store = common::dataset_store(dir, true).map_err(failure)?;
    let tag = Dataset::tag_in(store, name, version).map_err(failure)?;
    let mut out = common::stdout();
    writeln!(
        out,
        "tag {} names version {} of {}",
        escape_text(&tag.name),
        tag.version,
        common::path(dir)
    )?;
    common::finish(out)
}

/// `lodt verify DIR`: every shard against the manifest, every checksum;
/// one line per shard; exit 1 if any shard fails.
pub fn verify(dir: &Path, mmap: bool, progress: bool) -> Result<(), CliError> {
    let dataset =
        Dataset::open_in(common::dataset_store(dir, mmap).map_err(failure)?).map_err(failure)?;
    let m = dataset.manifest();
    // By batches (a compressed batch of a few KiB may decode to 1 GiB).
    let total: u64 = m.shards.iter().map(|s| s.batches).sum();
    let mut bar = common::BatchProgress::new(total, "verifying", progress);
    let mut out = common::stdout();
    let mut done = 0u64;
    let mut failed = Vec::new();
    for (k, s) in m.shards.iter().enumerate() {
        let ends = dataset.shard(k).map(common::batch_ends).unwrap_or_default();
        let report = dataset.verify_shard(k, &mut |bytes| {
            bar.set(done + ends.partition_point(|&e| e <= bytes) as u64)
        });
        done += s.batches;
        bar.set(done);
        let line = match report {
            Ok(r) => format!(
                "ok      {}: {}, {}, {}",
                escape_text(&r.name),
                common::plural(r.batches, "batch", "batches"),
                common::plural(r.sequences, "sequence", "sequences"),
                human(r.bytes)
            ),
            Err(e) => {
                let line = format!("FAILED  {}", common::escape_message(&e.to_string()));
                failed.push(s.name.clone());
                line
            }
        };
        bar.suspend(|| -> std::io::Result<()> {
            writeln!(out, "{line}")?;
            out.flush()
        })?;
    }
    bar.finish_and_clear();
    let unlisted = dataset.unlisted().map_err(failure)?;
    if !unlisted.is_empty() {
        writeln!(
            out,
            "note: {} unlisted (not part of the dataset): {}",
            unlisted.len(),
            common::names(unlisted.iter().map(String::as_str))
        )?;
    }
    if !failed.is_empty() {
        common::finish(out)?;
        return Err(CliError::failure(format!(
            "{} of {} shards failed: {}",
            failed.len(),
            m.num_shards(),
            common::names(failed.iter().map(String::as_str))
        )));
    }
    writeln!(
        out,
        "ok: {}, {}, {}, {} checked (the manifest, every checksum, padding byte, LoD rule and schema)",
        common::plural(m.num_shards() as u64, "shard", "shards"),
        common::plural(m.num_batches(), "batch", "batches"),
        common::plural(m.num_sequences(), "sequence", "sequences"),
        human(m.num_bytes())
    )?;
    common::finish(out)
}

/// `lodt index DIR`: writes the dataset's shard index if its manifest names
/// none that agrees with it (spec/DATASET.md 3.2).
pub fn index(dir: &Path) -> Result<(), CliError> {
    let store = common::dataset_store(dir, true).map_err(failure)?;
    let wrote = Dataset::write_index_in(store.clone()).map_err(failure)?;
    let dataset = Dataset::open_in(store).map_err(failure)?;
    let mut out = common::stdout();
    writeln!(
        out,
        "{}: {} of {}",
        if wrote {
            "wrote the shard index"
        } else {
            "the shard index is up to date"
        },
        common::plural(dataset.num_shards() as u64, "shard", "shards"),
        common::path(dir)
    )?;
    common::finish(out)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_parse_with_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("64kb"), Ok(64 << 10));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("M").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }
}
