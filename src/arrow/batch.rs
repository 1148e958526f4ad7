//! A mini-batch ([`Batch`]) <-> an Arrow `RecordBatch`, one column per tensor.

use super::{ArrowError, ArrowOptions, Result, TensorType, from_arrow, to_arrow, variable_shape};
use crate::LodTensor;
use crate::batch::{Batch, WriteStats};
use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::Schema;
use std::sync::Arc;

/// Converts a batch into a `RecordBatch`: one column per tensor, in order,
/// named after it ([`to_arrow`]; no copy but bools), and the batch's metadata
/// as the schema's metadata.
///
/// Every tensor must have the same number of [top-level rows](crate::LodTensor::top_level_rows):
/// for example a 0-level `labels` tensor of N rows fits beside a `words` tensor
/// of N top-level sequences. Anything else is an [`ArrowError::RowCount`].
///
/// With [`TensorType::VariableShape`], 1-level tensors (and pairs `x` +
/// `x.shape`) become `arrow.variable_shape_tensor` columns (`spec/ARROW.md`
/// 9.2), whose 32-bit offsets hold at most `i32::MAX` values per column
/// (more is an [`ArrowError::Overflow`]; the IPC and Parquet writers split
/// such a batch by rows instead).
///
/// ```
/// use lodt::{arrow::{batch_to_record_batch, ArrowOptions}, Batch, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
/// let mut batch = Batch::new();
/// batch.push("words", LodTensor::from_vec(vec![1i64, 2, 3], vec![3], lod)?)?;
/// batch.push("labels", LodTensor::from_vec(vec![0i64, 1], vec![2], Lod::empty())?)?;
/// batch.metadata_mut().insert("split".into(), "train".into());
/// let rb = batch_to_record_batch(&batch, &ArrowOptions::default())?;
/// assert_eq!((rb.num_rows(), rb.num_columns()), (2, 2));
/// assert_eq!(rb.schema().metadata()["split"], "train");
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn batch_to_record_batch(batch: &Batch, options: &ArrowOptions) -> Result<RecordBatch> {
    if options.tensor_type == TensorType::VariableShape {
        return variable_shape::variable_shape_record_batch(batch, options);
    }
    let metadata: arrow_schema::Metadata = batch
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    columns_to_record_batch(batch, metadata, |_, name, tensor| {
        to_arrow(name, tensor, options)
    })
}

/// [`batch_to_record_batch`] in the schema a consumer requested (the Arrow
/// PyCapsule `requested_schema`): the same columns, in order
/// ([`check_requested_columns`](super::check_requested_columns)), each
/// converted by [`to_requested`](super::to_requested); the schema, its
/// metadata included, is `requested`.
///
/// ```
/// use lodt::arrow::{batch_to_record_batch, batch_to_requested_record_batch, ArrowOptions, TensorType};
/// use lodt::{Batch, Lod, LodTensor};
/// let frames = LodTensor::from_vec(vec![0f32; 8], vec![2, 2, 2], Lod::try_from_lengths(&[vec![1, 1]])?)?;
/// let batch = Batch::try_from_tensors([("frames", frames)])?;
/// // A consumer that asks for the tensor extension gets it.
/// let fixed = ArrowOptions::default().with_tensor_type(TensorType::FixedShape);
/// let wanted = batch_to_record_batch(&batch, &fixed)?.schema();
/// let rb = batch_to_requested_record_batch(&batch, &ArrowOptions::default(), &wanted)?;
/// assert_eq!(rb.schema(), wanted);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn batch_to_requested_record_batch(
    batch: &Batch,
    options: &ArrowOptions,
    requested: &Schema,
) -> Result<RecordBatch> {
    super::check_requested_columns(requested, batch.iter().map(|(name, _)| name))?;
    columns_to_record_batch(batch, requested.metadata().clone(), |i, name, tensor| {
        super::to_requested(requested.field(i), options, |o| to_arrow(name, tensor, o))
    })
}

/// The record batch of `batch`'s tensors, each converted by `convert` (given
/// its position and name), the schema carrying `metadata`. Checks that every
/// tensor has as many top-level rows.
fn columns_to_record_batch(
    batch: &Batch,
    metadata: arrow_schema::Metadata,
    mut convert: impl FnMut(
        usize,
        &str,
        &LodTensor,
    ) -> Result<(arrow_schema::Field, arrow_array::ArrayRef)>,
) -> Result<RecordBatch> {
    let mut fields = Vec::with_capacity(batch.len());
    let mut columns = Vec::with_capacity(batch.len());
    let mut first: Option<(&str, usize)> = None;
    for (i, (name, tensor)) in batch.iter().enumerate() {
        let rows = tensor.top_level_rows();
        match first {
            None => first = Some((name, rows)),
            Some((first_column, expected)) if expected != rows => {
                return Err(ArrowError::RowCount {
                    first_column: first_column.to_owned(),
                    expected,
                    column: name.to_owned(),
                    found: rows,
                });
            }
            Some(_) => {}
        }
        let (field, array) = convert(i, name, tensor)?;
        fields.push(field);
        columns.push(array);
    }
    let schema = Arc::new(Schema::new_with_metadata(fields, metadata));
    let rows = first.map_or(0, |(_, rows)| rows);
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

/// Converts a `RecordBatch` into a batch: one tensor per column
/// ([`from_arrow`]), named after it, and the schema's metadata as the batch's.
///
/// ```
/// use lodt::{arrow::{batch_to_record_batch, record_batch_to_batch, ArrowOptions}, Batch, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
/// let batch = Batch::try_from_tensors([("words", LodTensor::from_vec(vec![1i64, 2, 3], vec![3], lod)?)])?;
/// let rb = batch_to_record_batch(&batch, &ArrowOptions::default())?;
/// assert_eq!(record_batch_to_batch(&rb, &ArrowOptions::default())?, batch);
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn record_batch_to_batch(record_batch: &RecordBatch, options: &ArrowOptions) -> Result<Batch> {
    let schema = record_batch.schema();
    let mut batch = Batch::new();
    let mut extensions = Vec::new();
    for (field, column) in schema.fields().iter().zip(record_batch.columns()) {
        // Variable-shape tensor columns (one tensor, or two) first.
        if let Some(imported) = variable_shape::import(field, column, options)? {
            for (name, tensor) in imported.tensors {
                batch.push(name, tensor)?;
            }
            extensions.extend(imported.metadata);
            continue;
        }
        let tensor = from_arrow(field, column, options)?;
        batch.push(field.name().clone(), tensor)?;
    }
    batch.metadata_mut().extend(
        schema
            .metadata()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    batch.metadata_mut().extend(extensions);
    Ok(batch)
}

/// Converts the batches written to one file, checking that they share the
/// file's schema (taken from the first batch) and metadata.
pub(crate) struct BatchEncoder {
    options: super::ArrowWriteOptions,
    schema: Option<arrow_schema::SchemaRef>,
    metadata: std::collections::BTreeMap<String, String>,
    stats: WriteStats,
}

fn describe(schema: &Schema) -> String {
    let fields: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{:?}: {}", f.name(), f.data_type()))
        .collect();
    format!("[{}]", fields.join(", "))
}

impl BatchEncoder {
    pub(crate) fn new(options: super::ArrowWriteOptions) -> Self {
        BatchEncoder {
            options,
            schema: None,
            metadata: Default::default(),
            stats: WriteStats::default(),
        }
    }

    /// The file's schema: the first batch's, or an empty one when no batch
    /// was encoded (a file with no batch still needs a schema).
    pub(crate) fn schema(&self) -> arrow_schema::SchemaRef {
        self.schema
            .clone()
            .unwrap_or_else(|| Arc::new(arrow_schema::Schema::empty()))
    }

    /// The file's metadata (the first batch's).
    pub(crate) fn metadata(&self) -> &std::collections::BTreeMap<String, String> {
        &self.metadata
    }

    /// What was encoded so far.
    pub(crate) fn stats(&self) -> WriteStats {
        self.stats
    }

    /// Converts `batch`; its record batch carries the file's schema. Refuses
    /// tensors deeper than [`MAX_LOD_LEVELS`](super::MAX_LOD_LEVELS), which
    /// no reader could read back from the file.
    pub(crate) fn encode(&mut self, batch: &Batch) -> Result<Vec<RecordBatch>> {
        for (name, tensor) in batch.iter() {
            let levels = tensor.lod().num_levels();
            if levels > super::MAX_LOD_LEVELS {
                return Err(ArrowError::TooManyLevels {
                    column: name.to_owned(),
                    levels,
                    limit: super::MAX_LOD_LEVELS,
                });
            }
            let element = tensor.element_shape().len();
            let depth = levels
                + match self.options.arrow.tensor_type {
                    TensorType::FixedShape => usize::from(element > 0),
                    TensorType::VariableShape if levels == 1 => 1,
                    _ => element,
                };
            if depth > super::MAX_NESTED_LISTS {
                return Err(ArrowError::TooDeep {
                    column: name.to_owned(),
                    depth,
                    levels,
                    limit: super::MAX_NESTED_LISTS,
                });
            }
        }
        if self.options.arrow.tensor_type == TensorType::VariableShape {
            // 32-bit `data` offsets: a batch of more values per column is
            // written as several record batches, split by rows.
            return variable_shape::split_for_list_offsets(batch, i32::MAX as u64)?
                .iter()
                .map(|piece| self.encode_one(piece))
                .collect();
        }
        Ok(vec![self.encode_one(batch)?])
    }

    /// [`Self::encode`] of a batch that fits one record batch.
    fn encode_one(&mut self, batch: &Batch) -> Result<RecordBatch> {
        let record_batch = batch_to_record_batch(batch, &self.options.arrow)?;
        let record_batch = match &self.schema {
            None => {
                self.schema = Some(record_batch.schema());
                self.metadata = batch.metadata().clone();
                record_batch
            }
            Some(schema) => {
                if schema.fields() != record_batch.schema().fields() {
                    return Err(ArrowError::SchemaMismatch {
                        batch: self.stats.batches,
                        expected: describe(schema),
                        found: describe(&record_batch.schema()),
                    });
                }
                if self.options.metadata == super::MetadataPolicy::Error {
                    let differing = self
                        .metadata
                        .iter()
                        .find(|(k, v)| batch.metadata().get(*k) != Some(*v))
                        .map(|(k, _)| k)
                        .or_else(|| {
                            batch
                                .metadata()
                                .keys()
                                .find(|k| !self.metadata.contains_key(*k))
                        });
                    if let Some(key) = differing {
                        return Err(ArrowError::MetadataMismatch {
                            batch: self.stats.batches,
                            key: key.clone(),
                        });
                    }
                }
                let rows = RecordBatchOptions::new().with_row_count(Some(record_batch.num_rows()));
                RecordBatch::try_new_with_options(
                    schema.clone(),
                    record_batch.columns().to_vec(),
                    &rows,
                )?
            }
        };
        self.stats.add(batch);
        Ok(record_batch)
    }
}
