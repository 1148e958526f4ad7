//! Column selection of the IPC and Parquet readers (`with_columns`): which
//! top-level fields of a file's schema to read, by name.

use super::{ArrowError, Result};
use arrow_schema::{Schema, SchemaRef};
use std::sync::Arc;

/// The indices of `columns` in `schema`, in the order given, and the schema
/// of just those fields (what the reader checks and reads). A name the
/// schema lacks, or a name given twice, is an error naming the columns the
/// file has.
pub(crate) fn projection<S: AsRef<str>>(
    schema: &Schema,
    columns: &[S],
) -> Result<(Vec<usize>, SchemaRef)> {
    let mut indices = Vec::with_capacity(columns.len());
    for column in columns {
        let column = column.as_ref();
        let index = schema
            .fields()
            .iter()
            .position(|f| f.name() == column)
            .ok_or_else(|| ArrowError::NoSuchColumn {
                column: column.to_owned(),
                available: crate::error::name_list(
                    schema.fields().iter().map(|f| f.name().as_str()),
                ),
            })?;
        if indices.contains(&index) {
            return Err(ArrowError::InvalidArgument(format!(
                "column {column:?} is selected twice"
            )));
        }
        indices.push(index);
    }
    let projected = schema.project(&indices)?;
    Ok((indices, Arc::new(projected)))
}
