//! The flags that make a failed conversion to Arrow, Parquet or a dataset
//! work, all at once: `--columns` for the tensors whose top-level row counts
//! agree with the first tensor's in every batch, and `--metadata first` when
//! batch metadata varies (worked out by `lodt::convert::column_fit`).

use lodt::arrow::ArrowError;
use lodt::convert::{ConvertError, column_fit};
use lodt::dataset::DatasetError;
use std::path::Path;

/// What a failed conversion needs: a column selection, the first batch's
/// metadata, or both.
#[derive(Clone, Copy)]
enum Need {
    /// Arrow and Parquet: one row count per batch, one metadata map.
    RowsAndMetadata,
    /// A dataset keeps each batch's metadata: only the row counts matter.
    Rows,
}

/// The flags for the `.lodt` file at `input` read with `columns` (`None`:
/// every tensor), or `None` when it cannot tell (another format, an
/// unreadable file, no tensor that fits, or nothing to change).
fn working_flags(input: &Path, columns: Option<&[String]>, need: Need) -> Option<String> {
    let fit = column_fit(input, columns)?;
    let mut flags = Vec::new();
    if fit.needs_columns() {
        if fit.agreeing.is_empty() || fit.agreeing.iter().any(|n| n.contains(',')) {
            return None;
        }
        flags.push(format!("--columns {}", fit.agreeing.join(",")));
    }
    if fit.metadata_varies && matches!(need, Need::RowsAndMetadata) {
        flags.push("--metadata first".to_string());
    }
    (!flags.is_empty()).then(|| flags.join(" "))
}

/// What `e` needs, if it is one that [`working_flags`] answers: tensors
/// with different top-level row counts, or batch metadata that differs.
fn answers(e: &ConvertError) -> Option<Need> {
    match e {
        ConvertError::Arrow(ArrowError::RowCount { .. } | ArrowError::MetadataMismatch { .. }) => {
            Some(Need::RowsAndMetadata)
        }
        ConvertError::Dataset(DatasetError::SchemaMismatch { what, .. })
            if what.starts_with("top-level sequences") =>
        {
            Some(Need::Rows)
        }
        _ => None,
    }
}

/// The CLI's error for a failed conversion of `input` (`None`: stdin), with
/// the full set of flags that make it work when [`working_flags`] knows it.
pub fn convert_error(
    e: ConvertError,
    input: Option<&Path>,
    columns: Option<&[String]>,
) -> crate::common::CliError {
    let flags = input
        .zip(answers(&e))
        .and_then(|(input, need)| working_flags(input, columns, need));
    let error = crate::common::convert_error(e);
    match flags {
        Some(flags) => error.with_hint(&format!("; to convert this input, add: {flags}")),
        None => error,
    }
}
