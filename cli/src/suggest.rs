//! The flags that make a failed conversion to Arrow, Parquet or a dataset
//! work, all at once: `--columns` for the tensors whose top-level row counts
//! agree with the first tensor's in every batch, and `--metadata first` when
//! batch metadata varies.

use lodt::format::LodtFile;
use std::path::Path;

/// `--columns a,b --metadata first` (either part only if needed) for the
/// `.lodt` file at `input` read with `columns` (`None`: every tensor), or
/// `None` when it cannot tell (another format, an unreadable file, no tensor
/// that fits, or nothing to change).
pub fn working_flags(input: &Path, columns: Option<&[String]>) -> Option<String> {
    let (columns_flag, metadata_varies) = needs(input, columns)?;
    let flags: Vec<String> = columns_flag
        .into_iter()
        .chain(metadata_varies.then(|| "--metadata first".to_string()))
        .collect();
    (!flags.is_empty()).then(|| flags.join(" "))
}

/// The `--columns` flag a dataset written from `input` needs (a dataset
/// keeps each batch's metadata, so only the row counts matter), or `None`.
pub fn dataset_columns(input: &Path, columns: Option<&[String]>) -> Option<String> {
    needs(input, columns)?.0
}

/// The `--columns` flag that keeps the tensors whose top-level row counts
/// agree (if some do not), and whether batch metadata varies.
fn needs(input: &Path, columns: Option<&[String]>) -> Option<(Option<String>, bool)> {
    let file = LodtFile::open(input).ok()?;
    let mut kept: Option<Vec<String>> = None;
    let mut all: Vec<String> = Vec::new();
    let mut first_metadata = None;
    let mut metadata_varies = false;
    for k in 0..file.num_batches() {
        let batch = file.batch(k).ok()?;
        match &first_metadata {
            None => first_metadata = Some(batch.metadata().clone()),
            Some(m) => metadata_varies |= m != batch.metadata(),
        }
        let mut rows = Vec::new();
        for t in batch.tensors() {
            let (name, v) = t.ok()?;
            if columns.is_some_and(|c| !c.iter().any(|n| n == name)) {
                continue;
            }
            let count = if v.is_scalar() { 1 } else { v.top_level_rows() };
            rows.push((name.to_owned(), count));
        }
        if let Some(columns) = columns {
            // In the order asked: the first column sets the count.
            rows.sort_by_key(|(name, _)| columns.iter().position(|n| n == name));
        }
        let first = rows.first()?.1;
        let agree: Vec<String> = rows
            .iter()
            .filter(|(_, n)| *n == first)
            .map(|(name, _)| name.clone())
            .collect();
        if all.is_empty() {
            all = rows.into_iter().map(|(name, _)| name).collect();
        }
        kept = Some(match kept {
            None => agree,
            Some(k) => k.into_iter().filter(|n| agree.contains(n)).collect(),
        });
    }
    let kept = kept?;
    let mut flag = None;
    if kept.len() < all.len() {
        if kept.iter().any(|n| n.contains(',')) || kept.is_empty() {
            return None;
        }
        flag = Some(format!("--columns {}", kept.join(",")));
    }
    Some((flag, metadata_varies))
}

/// The CLI's error for a failed conversion of `input` (`None`: stdin), with
/// the full set of flags that make it work when [`working_flags`] knows it.
pub fn convert_error(
    e: lodt::convert::ConvertError,
    input: Option<&Path>,
    columns: Option<&[String]>,
) -> crate::common::CliError {
    let flags = input
        .filter(|_| answers(&e))
        .and_then(|input| working_flags(input, columns));
    let error = crate::common::convert_error(e);
    match flags {
        Some(flags) => error.with_hint(&format!("; to convert this input, add: {flags}")),
        None => error,
    }
}

/// Whether `e` is one that [`working_flags`] answers: tensors with different
/// top-level row counts, or batch metadata that differs.
pub fn answers(e: &lodt::convert::ConvertError) -> bool {
    use lodt::arrow::ArrowError;
    use lodt::convert::ConvertError;
    matches!(
        e,
        ConvertError::Arrow(ArrowError::RowCount { .. } | ArrowError::MetadataMismatch { .. })
    )
}
