//! The Arrow PyCapsule interface: tensors and batches as Arrow arrays and
//! record batches, files as Arrow streams, and back, with the mapping of
//! `spec/ARROW.md`. Buffers are shared, not copied.

use crate::error::{PyResult, arrow as arrow_err, arrow_rs, core as core_err, value};
use crate::ffi;
use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{
    Array, ArrayRef, RecordBatch, RecordBatchIterator, RecordBatchOptions, RecordBatchReader,
    StructArray, make_array, new_empty_array,
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use lodt::arrow::{
    ArrowOptions, TensorType, batch_to_record_batch, batch_to_requested_record_batch, from_arrow,
    lodt_tensor_to_arrow, record_batch_to_batch, to_arrow,
};
use lodt::format::LodtFile;
use lodt::{Batch, LodTensor};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};
use std::collections::HashMap;
use std::sync::Arc;

/// The column name a lone tensor gets in Arrow.
const TENSOR_FIELD: &str = "tensor";

fn schema_capsule<'py>(py: Python<'py>, schema: FFI_ArrowSchema) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyCapsule::new_with_value(py, schema, ffi::SCHEMA_CAPSULE)?.into_any())
}

fn array_pair<'py>(
    py: Python<'py>,
    schema: FFI_ArrowSchema,
    array: &dyn Array,
) -> PyResult<Bound<'py, PyTuple>> {
    let ffi_array = arrow_array::ffi::FFI_ArrowArray::new(&array.to_data());
    let schema = schema_capsule(py, schema)?;
    let array = PyCapsule::new_with_value(py, ffi_array, ffi::ARRAY_CAPSULE)?;
    PyTuple::new(py, [schema, array.into_any()])
}

/// The options of an export: the default mapping, or `tensor_type`'s.
pub fn export_options(tensor_type: &str) -> PyResult<ArrowOptions> {
    let tensor_type: TensorType = tensor_type
        .parse()
        .map_err(|e: lodt::arrow::ArrowError| value(format!("tensor_type: {e}")))?;
    Ok(ArrowOptions::default().with_tensor_type(tensor_type))
}

/// The field a `requested_schema` capsule describes (`None`: none requested).
pub fn requested(capsule: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Field>> {
    capsule
        .filter(|c| !c.is_none())
        .map(ffi::read_schema)
        .transpose()
}

/// A requested record batch schema: the fields of a struct.
fn requested_schema(field: &Field) -> PyResult<Schema> {
    match field.data_type() {
        DataType::Struct(fields) => Ok(Schema::new_with_metadata(
            fields.clone(),
            field.metadata().clone(),
        )),
        other => Err(value(format!(
            "requested_schema: expected a struct (a record batch schema), found {other}"
        ))),
    }
}

/// The tensor as Arrow: as `requested` asks (its name and type), else with `options`.
fn tensor_to_arrow(
    t: &LodTensor,
    options: &ArrowOptions,
    requested: Option<&Field>,
) -> PyResult<(Field, ArrayRef)> {
    match requested {
        Some(field) => lodt::arrow::to_requested(field, options, |o| to_arrow(field.name(), t, o)),
        None => to_arrow(TENSOR_FIELD, t, options),
    }
    .map_err(arrow_err)
}

/// `LodTensor.__arrow_c_schema__`.
pub fn tensor_schema<'py>(py: Python<'py>, t: &LodTensor) -> PyResult<Bound<'py, PyAny>> {
    let (field, _) = tensor_to_arrow(t, &ArrowOptions::default(), None)?;
    schema_capsule(py, FFI_ArrowSchema::try_from(&field).map_err(arrow_rs)?)
}

/// `LodTensor.__arrow_c_array__` (with `options`: `to_arrow`).
pub fn tensor_array<'py>(
    py: Python<'py>,
    t: &LodTensor,
    options: &ArrowOptions,
    requested: Option<&Field>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (field, array) = tensor_to_arrow(t, options, requested)?;
    let schema = FFI_ArrowSchema::try_from(&field).map_err(arrow_rs)?;
    array_pair(py, schema, array.as_ref())
}

fn record_batch(
    batch: &Batch,
    options: &ArrowOptions,
    requested: Option<&Field>,
) -> PyResult<RecordBatch> {
    match requested {
        Some(field) => batch_to_requested_record_batch(batch, options, &requested_schema(field)?),
        None => batch_to_record_batch(batch, options),
    }
    .map_err(arrow_err)
}

/// `Batch.__arrow_c_schema__`.
pub fn batch_schema<'py>(py: Python<'py>, batch: &Batch) -> PyResult<Bound<'py, PyAny>> {
    let rb = record_batch(batch, &ArrowOptions::default(), None)?;
    schema_capsule(
        py,
        FFI_ArrowSchema::try_from(rb.schema().as_ref()).map_err(arrow_rs)?,
    )
}

/// `Batch.__arrow_c_array__`: a struct array (a record batch) whose schema
/// carries the batch's metadata.
pub fn batch_array<'py>(
    py: Python<'py>,
    batch: &Batch,
    options: &ArrowOptions,
    requested: Option<&Field>,
) -> PyResult<Bound<'py, PyTuple>> {
    let rb = record_batch(batch, options, requested)?;
    let schema = FFI_ArrowSchema::try_from(rb.schema().as_ref()).map_err(arrow_rs)?;
    let array = StructArray::from(rb);
    array_pair(py, schema, &array)
}

fn stream_capsule<'py>(
    py: Python<'py>,
    reader: Box<dyn RecordBatchReader + Send>,
) -> PyResult<Bound<'py, PyAny>> {
    let stream = FFI_ArrowArrayStream::new(reader);
    Ok(PyCapsule::new_with_value(py, stream, ffi::STREAM_CAPSULE)?.into_any())
}

/// `Batch.__arrow_c_stream__`: a stream of one record batch.
pub fn batch_stream<'py>(
    py: Python<'py>,
    batch: &Batch,
    requested: Option<&Field>,
) -> PyResult<Bound<'py, PyAny>> {
    let rb = record_batch(batch, &ArrowOptions::default(), requested)?;
    let schema = rb.schema();
    stream_capsule(py, Box::new(RecordBatchIterator::new([Ok(rb)], schema)))
}

/// What `to_arrow` hands to pyarrow: one exported array (a tensor's) or
/// record batch (a batch's), through the PyCapsule interface.
#[pyclass(module = "lodt._lodt", frozen)]
pub struct ArrowExport {
    field: Field,
    array: ArrayRef,
}

#[pymethods]
impl ArrowExport {
    /// __arrow_c_schema__() -> PyCapsule
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        schema_capsule(
            py,
            FFI_ArrowSchema::try_from(&self.field).map_err(arrow_rs)?,
        )
    }

    /// __arrow_c_array__(requested_schema=None) -> (PyCapsule, PyCapsule)
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        // A request for another spelling of this export's type (pyarrow's
        // own field names, a `pa.fixed_shape_tensor` of the same shape, a
        // lossless value cast) is honoured; another tensor type is refused
        // (with what lodt produces).
        if let Some(r) = requested(requested_schema)?.filter(|r| *r != self.field) {
            let (field, array) =
                lodt::arrow::cast_to_requested(&r, &self.field, self.array.clone())
                    .map_err(arrow_err)?;
            let schema = FFI_ArrowSchema::try_from(&field).map_err(arrow_rs)?;
            return array_pair(py, schema, array.as_ref());
        }
        let schema = FFI_ArrowSchema::try_from(&self.field).map_err(arrow_rs)?;
        array_pair(py, schema, self.array.as_ref())
    }
}

fn pyarrow(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("pyarrow")
        .map_err(|_| crate::dtype::missing_extra("to_arrow", "pyarrow", "arrow"))
}

/// `LodTensor.to_arrow(tensor_type)`: a `pyarrow.Array`.
pub fn tensor_to_pyarrow<'py>(
    py: Python<'py>,
    t: &LodTensor,
    tensor_type: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let (field, array) = tensor_to_arrow(t, &export_options(tensor_type)?, None)?;
    let export = Bound::new(py, ArrowExport { field, array })?;
    pyarrow(py)?.call_method1("array", (export,))
}

/// `Batch.to_arrow(tensor_type)`: a `pyarrow.RecordBatch`.
pub fn batch_to_pyarrow<'py>(
    py: Python<'py>,
    batch: &Batch,
    tensor_type: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let rb = record_batch(batch, &export_options(tensor_type)?, None)?;
    let field = Field::new_struct("", rb.schema().fields().clone(), false)
        .with_metadata(rb.schema().metadata().clone());
    let array: ArrayRef = Arc::new(StructArray::from(rb));
    let export = Bound::new(py, ArrowExport { field, array })?;
    pyarrow(py)?.call_method1("record_batch", (export,))
}

/// The batches of a `.lodt` file as Arrow record batches over the file's
/// own bytes (no copy), in order. The schema is the first batch's, with the
/// file's metadata and the first batch's (batch keys win), or the requested
/// one; later batches must have the same columns and types (else the stream
/// reports an error).
struct FileBatches {
    file: Arc<LodtFile>,
    next: usize,
    schema: SchemaRef,
    requested: bool,
}

/// Batch `k` of `file` as a record batch: with `schema` (a later batch: the
/// stream's; `requested`: the consumer's, which each column is converted to),
/// or its own.
fn file_record_batch(
    file: &LodtFile,
    k: usize,
    schema: Option<&SchemaRef>,
    requested: bool,
) -> Result<RecordBatch, lodt::arrow::ArrowError> {
    let view = file.batch(k)?;
    let options = ArrowOptions::default();
    if let Some(schema) = schema.filter(|_| requested) {
        lodt::arrow::check_requested_columns(schema, view.names())?;
    }
    let mut fields = Vec::with_capacity(view.len());
    let mut columns = Vec::with_capacity(view.len());
    for (i, name) in view.names().enumerate() {
        let produce = |o: &ArrowOptions| lodt_tensor_to_arrow(file, k, name, o);
        let (field, array) = match schema.filter(|_| requested) {
            Some(schema) => lodt::arrow::to_requested(schema.field(i), &options, produce)?,
            None => produce(&options)?,
        };
        fields.push(field);
        columns.push(array);
    }
    let schema = match schema {
        Some(s) => s.clone(),
        None => {
            let mut metadata: HashMap<String, String> =
                file.metadata().clone().into_iter().collect();
            metadata.extend(view.metadata().clone());
            Arc::new(Schema::new_with_metadata(fields, metadata))
        }
    };
    let rows = columns.first().map_or(0, |c| c.len());
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

impl Iterator for FileBatches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.file.num_batches() {
            return None;
        }
        let k = self.next;
        self.next += 1;
        Some(
            file_record_batch(&self.file, k, Some(&self.schema), self.requested)
                .map_err(|e| ArrowError::ExternalError(Box::new(e))),
        )
    }
}

impl RecordBatchReader for FileBatches {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// `File.__arrow_c_stream__`: every batch, in lodt's default mapping or as
/// `requested` (a struct of the columns) asks. A requested schema is checked
/// against the first batch before the stream is returned.
pub fn file_stream<'py>(
    py: Python<'py>,
    file: &Arc<LodtFile>,
    requested: Option<Field>,
) -> PyResult<Bound<'py, PyAny>> {
    let requested = requested
        .map(|f| requested_schema(&f))
        .transpose()?
        .map(Arc::new);
    let schema = match (&requested, file.num_batches()) {
        (Some(schema), 0) => schema.clone(),
        (Some(schema), _) => file_record_batch(file, 0, Some(schema), true)
            .map_err(arrow_err)?
            .schema(),
        (None, 0) => {
            let metadata: HashMap<String, String> = file.metadata().clone().into_iter().collect();
            Arc::new(Schema::new_with_metadata(Vec::<Field>::new(), metadata))
        }
        (None, _) => file_record_batch(file, 0, None, false)
            .map_err(arrow_err)?
            .schema(),
    };
    let reader = FileBatches {
        file: file.clone(),
        next: 0,
        schema,
        requested: requested.is_some(),
    };
    stream_capsule(py, Box::new(reader))
}

/// What an object exporting the Arrow PyCapsule interface gives: a field
/// (a struct for record batches) and its arrays (one, or a stream's).
struct Imported {
    field: Field,
    arrays: Vec<ArrayRef>,
}

fn import(obj: &Bound<'_, PyAny>) -> PyResult<Imported> {
    if obj.hasattr("__arrow_c_array__")? {
        let pair = obj.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>()?;
        if pair.len() != 2 {
            return Err(value(
                "__arrow_c_array__ must return (schema capsule, array capsule)",
            ));
        }
        let schema = ffi::take_schema(&pair.get_item(0)?)?;
        let field = Field::try_from(&schema).map_err(arrow_rs)?;
        let data = ffi::take_array(&pair.get_item(1)?, &schema)?;
        return Ok(Imported {
            field,
            arrays: vec![make_array(data)],
        });
    }
    if obj.hasattr("__arrow_c_stream__")? {
        let capsule = obj.call_method0("__arrow_c_stream__")?;
        let (field, reader) = ffi::take_stream(&capsule)?;
        let arrays = obj
            .py()
            .detach(move || reader.collect::<Result<Vec<_>, _>>())
            .map_err(arrow_rs)?;
        return Ok(Imported { field, arrays });
    }
    Err(crate::error::type_error(format!(
        "expected an object exporting the Arrow PyCapsule interface (__arrow_c_array__ or \
         __arrow_c_stream__), found {}",
        obj.get_type().name()?
    )))
}

/// A tensor from an Arrow array, or from a stream of arrays (concatenated).
/// A one-column record batch or table gives its column.
pub fn tensor_from_arrow(obj: &Bound<'_, PyAny>) -> PyResult<LodTensor> {
    let options = ArrowOptions::default();
    let Imported { field, arrays } = import(obj)?;
    let (field, arrays) = match field.data_type() {
        DataType::Struct(fields) if fields.len() == 1 && field.name().is_empty() => {
            let column = fields[0].as_ref().clone();
            let arrays = arrays
                .iter()
                .map(|a| {
                    a.as_any()
                        .downcast_ref::<StructArray>()
                        .map(|s| s.column(0).clone())
                        .ok_or_else(|| value("a struct stream yielded a non-struct array"))
                })
                .collect::<PyResult<Vec<_>>>()?;
            (column, arrays)
        }
        _ => (field, arrays),
    };
    let parts = arrays
        .iter()
        .map(|a| from_arrow(&field, a, &options).map_err(arrow_err))
        .collect::<PyResult<Vec<_>>>()?;
    concat(parts, || {
        let empty = new_empty_array(field.data_type());
        from_arrow(&field, &empty, &options).map_err(arrow_err)
    })
}

fn concat(
    mut parts: Vec<LodTensor>,
    empty: impl FnOnce() -> PyResult<LodTensor>,
) -> PyResult<LodTensor> {
    match parts.len() {
        0 => empty(),
        1 => parts.pop().ok_or_else(|| value("no part")),
        _ => crate::core::merge(&parts).map_err(core_err),
    }
}

/// A batch from an Arrow record batch (a struct array with a schema), or
/// from a stream of them (concatenated column by column).
pub fn batch_from_arrow(obj: &Bound<'_, PyAny>) -> PyResult<Batch> {
    let options = ArrowOptions::default();
    let Imported { field, arrays } = import(obj)?;
    let DataType::Struct(fields) = field.data_type() else {
        return Err(crate::error::type_error(format!(
            "a batch from Arrow needs a struct array (a record batch), found {}",
            field.data_type()
        )));
    };
    let schema = Arc::new(Schema::new_with_metadata(
        fields.clone(),
        field.metadata().clone(),
    ));
    let batches = arrays
        .iter()
        .map(|a| {
            let structs = a
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or_else(|| value("a struct stream yielded a non-struct array"))?;
            RecordBatch::try_new_with_options(
                schema.clone(),
                structs.columns().to_vec(),
                &RecordBatchOptions::new().with_row_count(Some(structs.len())),
            )
            .map_err(arrow_rs)
        })
        .collect::<PyResult<Vec<_>>>()?;
    // A stream of no batch reads as one empty batch. The tensors and the
    // metadata are the converted batches' (a variable-shape tensor column
    // can read as two tensors, and adds a metadata key).
    let batches = if batches.is_empty() {
        vec![RecordBatch::new_empty(schema.clone())]
    } else {
        batches
    };
    let converted = batches
        .iter()
        .map(|rb| record_batch_to_batch(rb, &options).map_err(arrow_err))
        .collect::<PyResult<Vec<_>>>()?;
    let first = converted.first().ok_or_else(|| value("no record batch"))?;
    let mut out = Batch::new();
    *out.metadata_mut() = first.metadata().clone();
    for name in first.names() {
        let parts = converted
            .iter()
            .map(|b| {
                b.get(name)
                    .cloned()
                    .ok_or_else(|| value(format!("a record batch lacks tensor {name:?}")))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let tensor = concat(parts, || Err(value("no part")))?;
        out.push(name, tensor).map_err(core_err)?;
    }
    Ok(out)
}
