//! Per-row tensors of different shapes: Arrow's canonical
//! `arrow.variable_shape_tensor` extension and Ray Data's
//! `ray.data.arrow_variable_shaped_tensor`, both ways (`spec/ARROW.md`,
//! section 9).
//!
//! Reading ([`import`], called by
//! [`record_batch_to_batch`](super::record_batch_to_batch) for every
//! column, and so by every Arrow IPC and Parquet reader): a column whose rows
//! vary only in their first dimension becomes one 1-level LoD tensor with the
//! other dimensions as its element shape; any other column becomes a pair,
//! the values (a 1-level LoD over flattened elements) and an int32
//! `[rows, ndim]` tensor named `<column>.shape`. The canonical extension's
//! metadata goes to the batch metadata key `lodt.variable_shape_tensor.<column>`.
//!
//! Writing ([`variable_shape_record_batches`], [`variable_shape_column`],
//! [`variable_shape_pair_column`]): the reverse; the canonical `data` field is
//! a 32-bit `List`, so a batch holding more than `i32::MAX` values in one
//! column is split by rows ([`split_for_list_offsets`]).

use super::tensor::{metadata_error, overflow};
use super::{ArrowError, ArrowOptions, DTYPE_KEY, Result, from_arrow, to_arrow};
use crate::batch::Batch;
use crate::dtype::DType;
use crate::lod::Lod;
use crate::tensor::LodTensor;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, GenericListArray, Int32Array, ListArray, OffsetSizeTrait,
    RecordBatch, RecordBatchOptions, StructArray,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::extension::{EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY};
use arrow_schema::{DataType, Field, Fields, Metadata, Schema};
use std::sync::Arc;

/// The name of Arrow's canonical variable-shape tensor extension type.
pub(crate) const VARIABLE_SHAPE_TENSOR: &str = "arrow.variable_shape_tensor";

/// The name of Ray Data's variable-shaped tensor extension type (Ray 2.x,
/// `ArrowVariableShapedTensorType`).
pub(crate) const RAY_VARIABLE_SHAPED_TENSOR: &str = "ray.data.arrow_variable_shaped_tensor";

/// The suffix of the shape tensor of a pair: column `x` reads as `x` (the
/// values) and `x.shape`.
pub(crate) const SHAPE_SUFFIX: &str = ".shape";

/// The prefix of the batch metadata key that keeps a canonical column's
/// extension metadata: `lodt.variable_shape_tensor.<column>`.
pub(crate) const METADATA_KEY_PREFIX: &str = "lodt.variable_shape_tensor.";

/// Which variable-shape extension a column field carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `arrow.variable_shape_tensor`: `struct<data: List<T>, shape:
    /// FixedSizeList<int32>[ndim]>`.
    Canonical,
    /// `ray.data.arrow_variable_shaped_tensor`: `struct<data: LargeList<T>,
    /// shape: List<int64>>`, `ndim` in the extension metadata.
    Ray,
}

/// The one place that decides whether a column field is a variable-shape
/// tensor column (by its `ARROW:extension:name`).
pub(crate) fn kind(field: &Field) -> Option<Kind> {
    match field
        .metadata()
        .get(EXTENSION_TYPE_NAME_KEY)
        .map(String::as_str)
    {
        Some(VARIABLE_SHAPE_TENSOR) => Some(Kind::Canonical),
        Some(RAY_VARIABLE_SHAPED_TENSOR) => Some(Kind::Ray),
        _ => None,
    }
}

/// The canonical extension's metadata (`ARROW:extension:metadata`), as lodt
/// reads and writes it. `permutations` (arrow-rs 60's spelling) is read as
/// `permutation` (the specification's and Arrow C++'s); absent keys are not
/// written.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct VariableShapeMetadata {
    /// A name for each dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) dim_names: Option<Vec<String>>,
    /// The logical order of the physical dimensions.
    #[serde(
        default,
        alias = "permutations",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) permutation: Option<Vec<usize>>,
    /// The dimensions every row has (`null`: varies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) uniform_shape: Option<Vec<Option<i64>>>,
}

impl VariableShapeMetadata {
    /// Parses the extension metadata of `column` (none or empty: no keys).
    pub(crate) fn parse(column: &str, json: Option<&str>) -> Result<Self> {
        match json {
            None => Ok(Self::default()),
            Some(s) if s.trim().is_empty() => Ok(Self::default()),
            Some(s) => serde_json::from_str(s).map_err(|e| {
                metadata_error(
                    column,
                    format!("bad {VARIABLE_SHAPE_TENSOR} metadata {s:?}: {e}"),
                )
            }),
        }
    }

    /// The JSON written as `ARROW:extension:metadata`.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// Checks the metadata against `ndim` and the rows' `shapes` (`ndim`
    /// dimensions per row, flat).
    fn check(&self, column: &str, ndim: usize, shapes: &[u64]) -> Result<()> {
        let bad = |what: &str, len: usize| {
            metadata_error(
                column,
                format!(
                    "{VARIABLE_SHAPE_TENSOR} {what} has {len} entries, the tensors {ndim} dimensions"
                ),
            )
        };
        if let Some(names) = &self.dim_names
            && names.len() != ndim
        {
            return Err(bad("dim_names", names.len()));
        }
        if let Some(p) = &self.permutation {
            if p.len() != ndim {
                return Err(bad("permutation", p.len()));
            }
            let mut sorted = p.clone();
            sorted.sort_unstable();
            if sorted.iter().enumerate().any(|(i, &v)| i != v) {
                return Err(metadata_error(
                    column,
                    format!(
                        "{VARIABLE_SHAPE_TENSOR} permutation {p:?} is not a permutation of 0..{ndim}"
                    ),
                ));
            }
        }
        if let Some(uniform) = &self.uniform_shape {
            if uniform.len() != ndim {
                return Err(bad("uniform_shape", uniform.len()));
            }
            for (k, dim) in uniform.iter().enumerate() {
                let Some(dim) = *dim else { continue };
                if !(0..=i64::from(i32::MAX)).contains(&dim) {
                    return Err(metadata_error(
                        column,
                        format!(
                            "{VARIABLE_SHAPE_TENSOR} uniform_shape[{k}] = {dim} is not a dimension"
                        ),
                    ));
                }
                if let Some(row) = (0..shapes.len() / ndim.max(1))
                    .find(|&r| shapes.get(r * ndim + k) != Some(&(dim as u64)))
                {
                    return Err(metadata_error(
                        column,
                        format!(
                            "row {row} has dimension {k} = {}, the {VARIABLE_SHAPE_TENSOR} uniform_shape says {dim}",
                            shapes.get(row * ndim + k).copied().unwrap_or_default()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Arrow -> lodt
// ---------------------------------------------------------------------------

/// What one variable-shape column reads as: one tensor, or the values and
/// `<column>.shape`; and the batch metadata entry keeping the canonical
/// extension's metadata.
#[derive(Debug)]
pub(crate) struct Imported {
    /// The tensors, named, in order.
    pub(crate) tensors: Vec<(String, LodTensor)>,
    /// `(lodt.variable_shape_tensor.<column>, metadata JSON)` for the canonical extension.
    pub(crate) metadata: Option<(String, String)>,
}

impl Imported {
    /// The one tensor of a column of the first-dimension form; a pair is an
    /// error (it needs a batch).
    pub(crate) fn into_tensor(self, column: &str) -> Result<LodTensor> {
        let mut tensors = self.tensors;
        match (tensors.pop(), tensors.is_empty()) {
            (Some((_, tensor)), true) => Ok(tensor),
            _ => Err(ArrowError::InvalidArgument(format!(
                "column {column:?}: its rows vary in more than their first dimension, so it reads as two tensors, {column:?} and \"{column}{SHAPE_SUFFIX}\": read it into a batch (record_batch_to_batch; Python: Batch.from_arrow)"
            ))),
        }
    }
}

fn storage_error(column: &str, kind: Kind, found: &DataType) -> ArrowError {
    let expected = match kind {
        Kind::Canonical => {
            "struct<data: List<T>, shape: FixedSizeList<Int32>[ndim]> (data may be a LargeList)"
        }
        Kind::Ray => "struct<data: LargeList<T>, shape: List<Int64>> (data may be a List)",
    };
    let name = match kind {
        Kind::Canonical => VARIABLE_SHAPE_TENSOR,
        Kind::Ray => RAY_VARIABLE_SHAPED_TENSOR,
    };
    metadata_error(
        column,
        format!("{name} expects the storage {expected}, found {found}"),
    )
}

/// Reads `array` (described by `field`) when `field` is a variable-shape
/// tensor column ([`kind`]); `None` for any other column.
pub(crate) fn import(
    field: &Field,
    array: &dyn Array,
    options: &ArrowOptions,
) -> Result<Option<Imported>> {
    let Some(kind) = kind(field) else {
        return Ok(None);
    };
    let column = field.name().as_str();
    let DataType::Struct(children) = field.data_type() else {
        return Err(storage_error(column, kind, field.data_type()));
    };
    let (Some((data_index, data_field)), Some((shape_index, shape_field))) =
        (children.find("data"), children.find("shape"))
    else {
        return Err(storage_error(column, kind, field.data_type()));
    };
    if !field.data_type().equals_datatype(array.data_type()) {
        return Err(ArrowError::InvalidArgument(format!(
            "column {column:?}: the field's type {} is not the array's type {}",
            field.data_type(),
            array.data_type()
        )));
    }
    let storage = array
        .as_struct_opt()
        .ok_or_else(|| storage_error(column, kind, array.data_type()))?;
    if let Some(nulls) = storage.nulls().filter(|n| n.null_count() > 0)
        && let Some(row) = (0..storage.len()).find(|&i| nulls.is_null(i))
    {
        return Err(ArrowError::NullList {
            column: column.to_owned(),
            level: 0,
            index: row,
        });
    }
    let rows = storage.len();
    let extension = field
        .metadata()
        .get(EXTENSION_TYPE_METADATA_KEY)
        .map(String::as_str);
    let shape_array = storage.column(shape_index);
    let (ndim, metadata, shapes) = match kind {
        Kind::Canonical => {
            let DataType::FixedSizeList(item, ndim) = shape_field.data_type() else {
                return Err(storage_error(column, kind, field.data_type()));
            };
            let ndim = usize::try_from(*ndim)
                .map_err(|_| storage_error(column, kind, field.data_type()))?;
            if item.data_type() != &DataType::Int32 {
                return Err(storage_error(column, kind, field.data_type()));
            }
            let metadata = VariableShapeMetadata::parse(column, extension)?;
            let shapes = canonical_shapes(column, shape_array, rows, ndim)?;
            (ndim, metadata, shapes)
        }
        Kind::Ray => {
            let ndim: usize = extension
                .and_then(|s| serde_json::from_str(s).ok())
                .ok_or_else(|| {
                    metadata_error(
                        column,
                        format!(
                            "{RAY_VARIABLE_SHAPED_TENSOR} metadata {extension:?} is not a number of dimensions"
                        ),
                    )
                })?;
            let shapes = match shape_field.data_type() {
                DataType::List(item) if item.data_type() == &DataType::Int64 => {
                    ray_shapes::<i32>(column, shape_array, ndim)?
                }
                DataType::LargeList(item) if item.data_type() == &DataType::Int64 => {
                    ray_shapes::<i64>(column, shape_array, ndim)?
                }
                _ => return Err(storage_error(column, kind, field.data_type())),
            };
            (ndim, VariableShapeMetadata::default(), shapes)
        }
    };
    metadata.check(column, ndim, &shapes)?;
    // The values: the data list as a 1-level tensor (bfloat16 marked on the column).
    let mut data_metadata = Metadata::new();
    if let Some(dtype) = field.metadata().get(DTYPE_KEY) {
        data_metadata.insert(DTYPE_KEY, dtype.as_str());
    }
    let data_field =
        Field::new(column, data_field.data_type().clone(), true).with_metadata(data_metadata);
    let values = from_arrow(&data_field, storage.column(data_index).as_ref(), options)?;
    let offsets = match values.lod().raw_level(0) {
        Some(offsets)
            if values.lod().num_levels() == 1
                && values.element_shape().is_empty()
                && offsets.len() == rows + 1 =>
        {
            offsets
        }
        _ => return Err(storage_error(column, kind, field.data_type())),
    };
    for row in 0..rows {
        let dims = &shapes[row * ndim..(row + 1) * ndim];
        let held = offsets[row + 1] - offsets[row];
        let product = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        if product != Some(held) {
            return Err(metadata_error(
                column,
                format!("row {row} has shape {dims:?}, its data holds {held} values"),
            ));
        }
    }
    let element = element_shape(&metadata, ndim, rows, &shapes);
    // Kept unless the export would write it anyway (lodt -> Arrow -> lodt adds no key).
    let entry = (kind == Kind::Canonical && metadata != default_metadata(element.as_deref()))
        .then(|| (format!("{METADATA_KEY_PREFIX}{column}"), metadata.to_json()));
    let tensors = match element {
        Some(element) => {
            let mut lod = Vec::new();
            lod.try_reserve_exact(rows + 1)
                .map_err(|_| overflow(column, "rows", rows as u128, usize::MAX as u128))?;
            lod.push(0u64);
            let mut total = 0u64;
            for row in 0..rows {
                total = total
                    .checked_add(shapes[row * ndim])
                    .ok_or_else(|| overflow(column, "rows", u128::MAX, u64::MAX as u128))?;
                lod.push(total);
            }
            let mut shape = vec![usize_of(column, total)?];
            for &d in &element {
                shape.push(usize_of(column, d)?);
            }
            // `[0]` for no rows: an empty level, as `from_arrow` reads one.
            let lod = Lod::try_from_stored(vec![lod]).map_err(tensor_error(column))?;
            let tensor =
                LodTensor::try_from_parts(values.dtype(), shape, values.buffer().clone(), lod)
                    .map_err(tensor_error(column))?;
            vec![(column.to_owned(), tensor)]
        }
        None => {
            let mut dims = Vec::new();
            dims.try_reserve_exact(shapes.len())
                .map_err(|_| overflow(column, "rows", rows as u128, usize::MAX as u128))?;
            for &d in &shapes {
                dims.push(
                    i32::try_from(d)
                        .map_err(|_| overflow(column, "dimension", d.into(), i32::MAX as u128))?,
                );
            }
            let shape = LodTensor::from_vec(dims, vec![rows, ndim], Lod::empty())
                .map_err(tensor_error(column))?;
            vec![
                (column.to_owned(), values),
                (format!("{column}{SHAPE_SUFFIX}"), shape),
            ]
        }
    };
    Ok(Some(Imported {
        tensors,
        metadata: entry,
    }))
}

fn tensor_error(column: &str) -> impl Fn(crate::Error) -> ArrowError + '_ {
    move |source| ArrowError::Tensor {
        column: column.to_owned(),
        source,
    }
}

fn usize_of(column: &str, d: u64) -> Result<usize> {
    usize::try_from(d).map_err(|_| overflow(column, "dimension", d.into(), usize::MAX as u128))
}

/// The element shape when the rows vary in their first dimension only:
/// every later dimension fixed by `uniform_shape` or the same in every row
/// (`None`: the column reads as a pair). Rows were checked against
/// `uniform_shape` already.
fn element_shape(
    metadata: &VariableShapeMetadata,
    ndim: usize,
    rows: usize,
    shapes: &[u64],
) -> Option<Vec<u64>> {
    if ndim == 0 {
        return None;
    }
    let uniform = metadata.uniform_shape.as_deref();
    let mut element = Vec::with_capacity(ndim - 1);
    for k in 1..ndim {
        let fixed = match uniform.and_then(|u| u.get(k).copied().flatten()) {
            Some(d) => d as u64,
            None if rows > 0 => shapes[k],
            None => return None,
        };
        if (0..rows).any(|r| shapes[r * ndim + k] != fixed) {
            return None;
        }
        element.push(fixed);
    }
    Some(element)
}

/// The extension metadata lodt writes when the batch keeps none: for a
/// tensor of element shape `S` (`Some(S)`), `uniform_shape = [null, S...]`;
/// for a pair (`None`), no key.
fn default_metadata(element: Option<&[u64]>) -> VariableShapeMetadata {
    VariableShapeMetadata {
        uniform_shape: element.map(|element| {
            std::iter::once(None)
                .chain(element.iter().map(|&d| Some(d as i64)))
                .collect()
        }),
        ..Default::default()
    }
}

/// The canonical `shape` child: `rows * ndim` non-negative int32 dimensions.
fn canonical_shapes(column: &str, array: &ArrayRef, rows: usize, ndim: usize) -> Result<Vec<u64>> {
    let list: &FixedSizeListArray = array
        .as_fixed_size_list_opt()
        .ok_or_else(|| storage_error(column, Kind::Canonical, array.data_type()))?;
    let values = list
        .values()
        .as_primitive_opt::<Int32Type>()
        .ok_or_else(|| storage_error(column, Kind::Canonical, array.data_type()))?;
    let null_row = |row: usize| ArrowError::NullValue {
        column: format!("{column}{SHAPE_SUFFIX}"),
        row,
    };
    let mut shapes = Vec::new();
    shapes
        .try_reserve_exact(rows.saturating_mul(ndim))
        .map_err(|_| overflow(column, "rows", rows as u128, usize::MAX as u128))?;
    for row in 0..rows {
        if list.is_null(row) {
            return Err(null_row(row));
        }
        let start = list.value_offset_at(row);
        for k in 0..ndim {
            let i = start + k;
            if i >= values.len() || values.is_null(i) {
                return Err(null_row(row));
            }
            let d = values.value(i);
            shapes.push(u64::try_from(d).map_err(|_| {
                metadata_error(column, format!("row {row} has a negative dimension {d}"))
            })?);
        }
    }
    Ok(shapes)
}

/// Ray's `shape` child: one list of `ndim` non-negative int64 per row.
fn ray_shapes<O: OffsetSizeTrait>(column: &str, array: &ArrayRef, ndim: usize) -> Result<Vec<u64>> {
    let list: &GenericListArray<O> = array
        .as_list_opt::<O>()
        .ok_or_else(|| storage_error(column, Kind::Ray, array.data_type()))?;
    let values = list
        .values()
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| storage_error(column, Kind::Ray, array.data_type()))?;
    let mut shapes = Vec::new();
    shapes
        .try_reserve_exact(list.len().saturating_mul(ndim))
        .map_err(|_| overflow(column, "rows", list.len() as u128, usize::MAX as u128))?;
    let offsets = list.value_offsets();
    for row in 0..list.len() {
        if list.is_null(row) {
            return Err(ArrowError::NullValue {
                column: format!("{column}{SHAPE_SUFFIX}"),
                row,
            });
        }
        let (start, end) = (offsets[row].as_usize(), offsets[row + 1].as_usize());
        if end - start != ndim {
            return Err(metadata_error(
                column,
                format!(
                    "row {row} has a shape of {} dimensions, the {RAY_VARIABLE_SHAPED_TENSOR} {ndim}",
                    end - start
                ),
            ));
        }
        for i in start..end {
            if i >= values.len() || values.is_null(i) {
                return Err(ArrowError::NullValue {
                    column: format!("{column}{SHAPE_SUFFIX}"),
                    row,
                });
            }
            let d = values.value(i);
            shapes.push(u64::try_from(d).map_err(|_| {
                metadata_error(column, format!("row {row} has a negative dimension {d}"))
            })?);
        }
    }
    Ok(shapes)
}

// ---------------------------------------------------------------------------
// lodt -> Arrow
// ---------------------------------------------------------------------------

/// The 32-bit offsets of the `data` list: `offsets` (a LoD level, possibly
/// not starting at 0) rebased and times `per_row` values.
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
fn data_offsets(name: &str, offsets: &[u64], per_row: u64) -> Result<OffsetBuffer<i32>> {
    let first = offsets.first().copied().unwrap_or(0);
    let mut out = Vec::new();
    out.try_reserve_exact(offsets.len())
        .map_err(|_| overflow(name, "rows", offsets.len() as u128, usize::MAX as u128))?;
    for &o in offsets {
        let value = u128::from(o - first) * u128::from(per_row);
        let value = i32::try_from(value).map_err(|_| {
            overflow(
                name,
                "variable_shape_tensor data offset (more than 2^31 - 1 values in one batch: split it by rows)",
                value,
                i32::MAX as u128,
            )
        })?;
        out.push(value);
    }
    if out.is_empty() {
        out.push(0);
    }
    // From non-decreasing offsets: non-negative and non-decreasing.
    Ok(OffsetBuffer::new(ScalarBuffer::from(out)))
}

/// Builds the column from its parts: the `tensor`'s values (shared, as a
/// flat leaf), the data list's `offsets`, `ndim` dimensions per row
/// (`shapes`, flat) and the extension metadata (checked against them).
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
fn assemble(
    name: &str,
    tensor: &LodTensor,
    offsets: OffsetBuffer<i32>,
    ndim: usize,
    shapes: &[u64],
    metadata: &VariableShapeMetadata,
) -> Result<(Field, ArrayRef)> {
    metadata.check(name, ndim, shapes)?;
    let flat = LodTensor::try_from_parts(
        tensor.dtype(),
        vec![tensor.numel()],
        tensor.buffer().clone(),
        Lod::empty(),
    )
    .map_err(tensor_error(name))?;
    let (leaf_field, leaf) = to_arrow(name, &flat, &ArrowOptions::default())?;
    let item = Arc::new(Field::new("item", leaf.data_type().clone(), false));
    let data: ArrayRef = Arc::new(ListArray::try_new(item, offsets, leaf, None)?);
    let mut dims = Vec::new();
    dims.try_reserve_exact(shapes.len())
        .map_err(|_| overflow(name, "rows", shapes.len() as u128, usize::MAX as u128))?;
    for &d in shapes {
        dims.push(
            i32::try_from(d)
                .map_err(|_| overflow(name, "dimension", d.into(), i32::MAX as u128))?,
        );
    }
    let ndim_i32 =
        i32::try_from(ndim).map_err(|_| overflow(name, "ndim", ndim as u128, i32::MAX as u128))?;
    let rows = data.len();
    let shape: ArrayRef = Arc::new(FixedSizeListArray::try_new_with_length(
        Arc::new(Field::new("item", DataType::Int32, false)),
        ndim_i32,
        Arc::new(Int32Array::from(dims)),
        None,
        rows,
    )?);
    let fields = Fields::from(vec![
        Field::new("data", data.data_type().clone(), false),
        Field::new("shape", shape.data_type().clone(), false),
    ]);
    let storage = StructArray::try_new_with_length(fields, vec![data, shape], None, rows)?;
    let mut column_metadata = Metadata::new()
        .with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR)
        .with(EXTENSION_TYPE_METADATA_KEY, metadata.to_json());
    if let Some(dtype) = leaf_field.metadata().get(DTYPE_KEY) {
        column_metadata.insert(DTYPE_KEY, dtype.as_str());
    }
    let field = Field::new(name, storage.data_type().clone(), false).with_metadata(column_metadata);
    Ok((field, Arc::new(storage)))
}

/// A 1-level LoD tensor with element shape `S` as an
/// `arrow.variable_shape_tensor` column named `name` of `ndim = 1 + len(S)`:
/// one row per sequence, of shape `[sequence length, S...]`, the values
/// shared with the tensor (bools copied), the `data` offsets computed (32
/// bits: more than `i32::MAX` values is an [`ArrowError::Overflow`]; split
/// the batch with [`split_for_list_offsets`] first). `metadata` (checked
/// against the rows) is the extension's; `None` writes `uniform_shape =
/// [null, S...]`.
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn variable_shape_column(
    name: &str,
    tensor: &LodTensor,
    metadata: Option<&VariableShapeMetadata>,
) -> Result<(Field, ArrayRef)> {
    let levels = tensor.lod().num_levels();
    let Some(offsets) = tensor.lod().raw_level(0).filter(|_| levels == 1) else {
        return Err(ArrowError::InvalidArgument(format!(
            "column {name:?}: an {VARIABLE_SHAPE_TENSOR} column is written from a tensor of 1 LoD level, this one has {levels}"
        )));
    };
    let element = tensor.element_shape();
    let ndim = 1 + element.len();
    let per_row = tensor.row_numel() as u64;
    let rows = offsets.len().saturating_sub(1);
    let mut shapes = Vec::new();
    shapes
        .try_reserve_exact(rows.saturating_mul(ndim))
        .map_err(|_| overflow(name, "rows", rows as u128, usize::MAX as u128))?;
    for w in offsets.windows(2) {
        shapes.push(w[1] - w[0]);
        shapes.extend(element.iter().map(|&d| d as u64));
    }
    let element: Vec<u64> = element.iter().map(|&d| d as u64).collect();
    let default = default_metadata(Some(&element));
    let metadata = metadata.unwrap_or(&default);
    let offsets = data_offsets(name, offsets, per_row)?;
    assemble(name, tensor, offsets, ndim, &shapes, metadata)
}

/// The pair `values` (1 LoD level over flattened elements, no element shape)
/// and `shape` (int32 `[rows, ndim]`, no LoD) as one
/// `arrow.variable_shape_tensor` column named `name`: row `r` holds the
/// values of sequence `r`, of shape `shape[r]`, whose product must be the
/// sequence's length. `metadata` (checked) is the extension's; `None` writes
/// `{}`.
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn variable_shape_pair_column(
    name: &str,
    values: &LodTensor,
    shape: &LodTensor,
    metadata: Option<&VariableShapeMetadata>,
) -> Result<(Field, ArrayRef)> {
    let levels = values.lod().num_levels();
    let offsets = match values.lod().raw_level(0) {
        Some(offsets) if levels == 1 && values.element_shape().is_empty() => offsets,
        _ => {
            return Err(ArrowError::InvalidArgument(format!(
                "column {name:?}: the values of an {VARIABLE_SHAPE_TENSOR} pair are a tensor of 1 LoD level and no element shape, found shape {:?} with {levels} levels",
                values.shape()
            )));
        }
    };
    let rows = offsets.len().saturating_sub(1);
    let (ndim, dims) = match (shape.dtype(), shape.shape(), shape.lod().num_levels()) {
        (DType::Int32, &[r, ndim], 0) if r == rows => {
            (ndim, shape.as_slice::<i32>().map_err(tensor_error(name))?)
        }
        _ => {
            return Err(ArrowError::InvalidArgument(format!(
                "column {name:?}: the shape tensor of an {VARIABLE_SHAPE_TENSOR} pair is int32 [{rows}, ndim] with no LoD, found {} {:?} with {} levels",
                shape.dtype().name(),
                shape.shape(),
                shape.lod().num_levels()
            )));
        }
    };
    let mut shapes = Vec::new();
    shapes
        .try_reserve_exact(dims.len())
        .map_err(|_| overflow(name, "rows", rows as u128, usize::MAX as u128))?;
    for (row, w) in offsets.windows(2).enumerate() {
        let row_dims = &dims[row * ndim..(row + 1) * ndim];
        let mut product = 1u64;
        for &d in row_dims {
            let d = u64::try_from(d).map_err(|_| {
                metadata_error(name, format!("row {row} has a negative dimension {d}"))
            })?;
            product = product.saturating_mul(d);
            shapes.push(d);
        }
        if product != w[1] - w[0] {
            return Err(metadata_error(
                name,
                format!(
                    "row {row} has shape {row_dims:?}, its sequence holds {} values",
                    w[1] - w[0]
                ),
            ));
        }
    }
    let default = default_metadata(None);
    let offsets = data_offsets(name, offsets, 1)?;
    assemble(
        name,
        values,
        offsets,
        ndim,
        &shapes,
        metadata.unwrap_or(&default),
    )
}

/// Whether `batch` holds, beside `name`, the shape tensor of a pair.
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
fn pair_shape<'a>(batch: &'a Batch, name: &str, tensor: &LodTensor) -> Option<&'a LodTensor> {
    let shape = batch.get(&format!("{name}{SHAPE_SUFFIX}"))?;
    let is_pair = tensor.lod().num_levels() == 1
        && tensor.element_shape().is_empty()
        && shape.dtype() == DType::Int32
        && shape.lod().num_levels() == 0
        && shape.shape().len() == 2;
    is_pair.then_some(shape)
}

/// Splits `batch` by top-level rows into batches whose 1-level tensors each
/// hold at most `limit` values (`i32::MAX` for the canonical `data` list),
/// with no copy (slices); one batch when it fits. A single sequence of more
/// than `limit` values is an [`ArrowError::Overflow`].
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn split_for_list_offsets(batch: &Batch, limit: u64) -> Result<Vec<Batch>> {
    let lists: Vec<(&str, &[u64], u64)> = batch
        .iter()
        .filter_map(|(name, t)| {
            let offsets = t.lod().raw_level(0).filter(|_| t.lod().num_levels() == 1)?;
            Some((name, offsets, t.row_numel() as u64))
        })
        .collect();
    let rows = batch.iter().next().map_or(0, |(_, t)| t.top_level_rows());
    let mut cuts = vec![0usize];
    let mut start = 0usize;
    for row in 0..rows {
        let values = |offsets: &[u64], per_row: u64, from: usize| {
            (offsets[row + 1] - offsets[from]).saturating_mul(per_row)
        };
        for &(name, offsets, per_row) in &lists {
            let one = values(offsets, per_row, row);
            if one > limit {
                return Err(overflow(
                    name,
                    "values in one variable_shape_tensor row",
                    one.into(),
                    limit.into(),
                ));
            }
        }
        if lists
            .iter()
            .any(|&(_, offsets, per_row)| values(offsets, per_row, start) > limit)
        {
            cuts.push(row);
            start = row;
        }
    }
    cuts.push(rows);
    if cuts.len() == 2 {
        return Ok(vec![batch.clone()]);
    }
    let mut out = Vec::with_capacity(cuts.len() - 1);
    for w in cuts.windows(2) {
        let mut piece = Batch::new();
        for (name, t) in batch.iter() {
            piece
                .push(name, t.slice_top(w[0], w[1]).map_err(tensor_error(name))?)
                .map_err(tensor_error(name))?;
        }
        *piece.metadata_mut() = batch.metadata().clone();
        out.push(piece);
    }
    Ok(out)
}

/// `batch` as record batches whose 1-level tensors are
/// `arrow.variable_shape_tensor` columns: a pair `x` + `x.shape`
/// ([`variable_shape_pair_column`]) as one column `x`, every other 1-level
/// tensor by [`variable_shape_column`], the rest by [`to_arrow`] with
/// `options`. The metadata key `lodt.variable_shape_tensor.<column>` gives
/// a column's extension metadata and leaves the schema metadata. More than
/// `i32::MAX` values in a column splits the batch by rows
/// ([`split_for_list_offsets`]).
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn variable_shape_record_batches(
    batch: &Batch,
    options: &ArrowOptions,
) -> Result<Vec<RecordBatch>> {
    split_for_list_offsets(batch, i32::MAX as u64)?
        .iter()
        .map(|piece| variable_shape_record_batch(piece, options))
        .collect()
}

/// One piece of [`variable_shape_record_batches`] (an overflow is an error).
// Until the Arrow export's tensor type option calls it (see the module docs).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn variable_shape_record_batch(
    batch: &Batch,
    options: &ArrowOptions,
) -> Result<RecordBatch> {
    let mut metadata: arrow_schema::Metadata = batch
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut fields = Vec::with_capacity(batch.len());
    let mut columns = Vec::with_capacity(batch.len());
    let mut skip = Vec::new();
    let mut rows = None;
    for (name, tensor) in batch.iter() {
        if skip.iter().any(|s| s == name) {
            continue;
        }
        let key = format!("{METADATA_KEY_PREFIX}{name}");
        let stored = batch.metadata().get(&key);
        let parsed = stored
            .map(|json| VariableShapeMetadata::parse(name, Some(json)))
            .transpose()?;
        let (field, array) = if let Some(shape) = pair_shape(batch, name, tensor) {
            skip.push(format!("{name}{SHAPE_SUFFIX}"));
            variable_shape_pair_column(name, tensor, shape, parsed.as_ref())?
        } else if tensor.lod().num_levels() == 1 {
            variable_shape_column(name, tensor, parsed.as_ref())?
        } else {
            let converted = to_arrow(name, tensor, options)?;
            rows.get_or_insert(tensor.top_level_rows());
            fields.push(converted.0);
            columns.push(converted.1);
            continue;
        };
        if stored.is_some() {
            metadata.remove(&key);
        }
        rows.get_or_insert(array.len());
        fields.push(field);
        columns.push(array);
    }
    let schema = Arc::new(Schema::new_with_metadata(fields, metadata));
    let options = RecordBatchOptions::new().with_row_count(Some(rows.unwrap_or(0)));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow::record_batch_to_batch;
    use arrow_array::types::Float32Type;
    use arrow_array::{Float32Array, Int64Array, LargeListArray};
    use arrow_schema::extension::VariableShapeTensor;

    fn opts() -> ArrowOptions {
        ArrowOptions::default()
    }

    /// A record batch of one column.
    fn record_batch(field: Field, array: ArrayRef) -> RecordBatch {
        RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![array]).unwrap()
    }

    /// The canonical storage of rows of `shapes`, values 0, 1, 2, ...
    fn canonical(shapes: &[&[i32]]) -> (ArrayRef, usize) {
        let ndim = shapes.first().map_or(0, |s| s.len());
        let mut offsets = vec![0i32];
        for s in shapes {
            offsets.push(offsets.last().unwrap() + s.iter().product::<i32>());
        }
        let n = *offsets.last().unwrap() as usize;
        let data = ListArray::try_new(
            Arc::new(Field::new("item", DataType::Float32, false)),
            OffsetBuffer::new(offsets.into()),
            Arc::new(Float32Array::from_iter_values((0..n).map(|v| v as f32))),
            None,
        )
        .unwrap();
        let dims: Vec<i32> = shapes.iter().flat_map(|s| s.iter().copied()).collect();
        let shape = FixedSizeListArray::try_new_with_length(
            Arc::new(Field::new("item", DataType::Int32, false)),
            ndim as i32,
            Arc::new(Int32Array::from(dims)),
            None,
            shapes.len(),
        )
        .unwrap();
        let fields = Fields::from(vec![
            Field::new("data", data.data_type().clone(), false),
            Field::new("shape", shape.data_type().clone(), false),
        ]);
        let storage =
            StructArray::try_new(fields, vec![Arc::new(data), Arc::new(shape)], None).unwrap();
        (Arc::new(storage), ndim)
    }

    /// The column field of `array` with arrow-rs's own `VariableShapeTensor` extension.
    fn arrow_rs_field(array: &ArrayRef, extension: VariableShapeTensor) -> Field {
        let mut field = Field::new("x", array.data_type().clone(), false);
        field.try_with_extension_type(extension).unwrap();
        field
    }

    #[test]
    fn rows_varying_in_their_first_dimension_read_as_one_tensor_with_the_values_shared() {
        let (array, ndim) = canonical(&[&[2, 3], &[1, 3], &[0, 3]]);
        // arrow-rs writes every key (null ones too) and spells permutation "permutations".
        let ext = VariableShapeTensor::try_new(
            DataType::Float32,
            ndim,
            Some(vec!["time".into(), "feature".into()]),
            Some(vec![0, 1]),
            None,
        )
        .unwrap();
        let field = arrow_rs_field(&array, ext);
        let batch = record_batch_to_batch(&record_batch(field, array.clone()), &opts()).unwrap();
        let x = batch.get("x").unwrap();
        assert_eq!(x.shape(), &[3, 3]);
        assert_eq!(x.lod().to_offsets(), vec![vec![0, 2, 3, 3]]);
        assert_eq!(
            x.as_slice::<f32>().unwrap(),
            &[0., 1., 2., 3., 4., 5., 6., 7., 8.]
        );
        // No copy of the values.
        let data = array
            .as_struct()
            .column(0)
            .as_list::<i32>()
            .values()
            .clone();
        let values = data.as_primitive::<Float32Type>().values();
        assert_eq!(x.as_slice::<f32>().unwrap().as_ptr(), values.as_ptr());
        assert_eq!(batch.len(), 1);
        assert_eq!(
            batch.metadata()["lodt.variable_shape_tensor.x"],
            r#"{"dim_names":["time","feature"],"permutation":[0,1]}"#
        );
    }

    #[test]
    fn rows_varying_in_more_dimensions_read_as_the_values_and_a_shape_tensor() {
        let (array, _) = canonical(&[&[2, 3], &[1, 2]]);
        let field = Field::new("img", array.data_type().clone(), false).with_metadata(
            Metadata::new()
                .with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR)
                .with(EXTENSION_TYPE_METADATA_KEY, r#"{"dim_names":["H","W"]}"#),
        );
        let batch = record_batch_to_batch(&record_batch(field, array), &opts()).unwrap();
        assert_eq!(batch.names().collect::<Vec<_>>(), ["img", "img.shape"]);
        let img = batch.get("img").unwrap();
        assert_eq!(
            (img.shape(), img.lod().to_offsets()),
            (&[8][..], vec![vec![0, 6, 8]])
        );
        let shape = batch.get("img.shape").unwrap();
        assert_eq!(shape.shape(), &[2, 2]);
        assert_eq!(shape.as_slice::<i32>().unwrap(), &[2, 3, 1, 2]);
    }

    #[test]
    fn uniform_shape_fixes_the_element_shape_and_is_checked() {
        // One row: its inner dims are observed; uniform_shape may also fix them
        // for no rows at all.
        let (array, ndim) = canonical(&[]);
        let _ = ndim;
        let empty = FixedSizeListArray::try_new_with_length(
            Arc::new(Field::new("item", DataType::Int32, false)),
            3,
            Arc::new(Int32Array::from(Vec::<i32>::new())),
            None,
            0,
        )
        .unwrap();
        let storage = array.as_struct();
        let fields = Fields::from(vec![
            Field::new("data", storage.column(0).data_type().clone(), false),
            Field::new("shape", empty.data_type().clone(), false),
        ]);
        let array: ArrayRef = Arc::new(
            StructArray::try_new(
                fields,
                vec![storage.column(0).clone(), Arc::new(empty)],
                None,
            )
            .unwrap(),
        );
        let ext = VariableShapeTensor::try_new(
            DataType::Float32,
            3,
            None,
            None,
            Some(vec![None, Some(4), Some(2)]),
        )
        .unwrap();
        let field = arrow_rs_field(&array, ext);
        let batch = record_batch_to_batch(&record_batch(field, array), &opts()).unwrap();
        assert_eq!(batch.get("x").unwrap().shape(), &[0, 4, 2]);
        // A row against uniform_shape.
        let (array, _) = canonical(&[&[2, 3], &[1, 2]]);
        let field = Field::new("x", array.data_type().clone(), false).with_metadata(
            Metadata::new()
                .with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR)
                .with(EXTENSION_TYPE_METADATA_KEY, r#"{"uniform_shape":[null,3]}"#),
        );
        let err = record_batch_to_batch(&record_batch(field, array), &opts()).unwrap_err();
        assert_eq!(
            err.to_string(),
            ArrowError::Metadata {
                column: "x".into(),
                message: "row 1 has dimension 1 = 2, the arrow.variable_shape_tensor uniform_shape says 3".into()
            }
            .to_string()
        );
    }

    #[test]
    fn a_shape_that_does_not_hold_its_values_and_a_null_row_are_refused() {
        let (array, _) = canonical(&[&[2, 3], &[1, 2]]);
        let storage = array.as_struct();
        let bad_shape: ArrayRef = Arc::new(
            FixedSizeListArray::try_new_with_length(
                Arc::new(Field::new("item", DataType::Int32, false)),
                2,
                Arc::new(Int32Array::from(vec![2, 3, 2, 2])),
                None,
                2,
            )
            .unwrap(),
        );
        let with = |shape: ArrayRef, nulls| -> RecordBatch {
            let fields = Fields::from(vec![
                Field::new("data", storage.column(0).data_type().clone(), false),
                Field::new("shape", shape.data_type().clone(), false),
            ]);
            let array: ArrayRef = Arc::new(
                StructArray::try_new(fields, vec![storage.column(0).clone(), shape], nulls)
                    .unwrap(),
            );
            let field = Field::new("x", array.data_type().clone(), true).with_metadata(
                Metadata::new().with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR),
            );
            record_batch(field, array)
        };
        let err = record_batch_to_batch(&with(bad_shape, None), &opts()).unwrap_err();
        assert!(
            err.to_string()
                .contains("row 1 has shape [2, 2], its data holds 2 values"),
            "{err}"
        );
        let nulls = Some(vec![true, false].into());
        let err =
            record_batch_to_batch(&with(storage.column(1).clone(), nulls), &opts()).unwrap_err();
        assert!(
            matches!(
                err,
                ArrowError::NullList {
                    level: 0,
                    index: 1,
                    ..
                }
            ),
            "{err}"
        );
    }

    /// Ray's storage: `struct<data: large_list<f32>, shape: list<int64>>`.
    fn ray(shapes: &[&[i64]], ndim: &str) -> RecordBatch {
        let mut offsets = vec![0i64];
        for s in shapes {
            offsets.push(offsets.last().unwrap() + s.iter().product::<i64>());
        }
        let n = *offsets.last().unwrap() as usize;
        let data = LargeListArray::try_new(
            Arc::new(Field::new("item", DataType::Float32, true)),
            OffsetBuffer::new(offsets.into()),
            Arc::new(Float32Array::from_iter_values((0..n).map(|v| v as f32))),
            None,
        )
        .unwrap();
        let mut shape_offsets = vec![0i32];
        for s in shapes {
            shape_offsets.push(shape_offsets.last().unwrap() + s.len() as i32);
        }
        let shape = ListArray::try_new(
            Arc::new(Field::new("item", DataType::Int64, true)),
            OffsetBuffer::new(shape_offsets.into()),
            Arc::new(Int64Array::from(
                shapes
                    .iter()
                    .flat_map(|s| s.iter().copied())
                    .collect::<Vec<_>>(),
            )),
            None,
        )
        .unwrap();
        let fields = Fields::from(vec![
            Field::new("data", data.data_type().clone(), true),
            Field::new("shape", shape.data_type().clone(), true),
        ]);
        let array: ArrayRef = Arc::new(
            StructArray::try_new(fields, vec![Arc::new(data), Arc::new(shape)], None).unwrap(),
        );
        let field = Field::new("t", array.data_type().clone(), true).with_metadata(
            Metadata::new()
                .with(EXTENSION_TYPE_NAME_KEY, RAY_VARIABLE_SHAPED_TENSOR)
                .with(EXTENSION_TYPE_METADATA_KEY, ndim),
        );
        record_batch(field, array)
    }

    #[test]
    fn rays_variable_shaped_tensors_read_in_both_forms() {
        let batch = record_batch_to_batch(&ray(&[&[2, 2], &[1, 2]], "2"), &opts()).unwrap();
        let t = batch.get("t").unwrap();
        assert_eq!(
            (t.shape(), t.lod().to_offsets()),
            (&[3, 2][..], vec![vec![0, 2, 3]])
        );
        assert_eq!(t.as_slice::<f32>().unwrap(), &[0., 1., 2., 3., 4., 5.]);
        assert!(batch.metadata().is_empty());
        let batch = record_batch_to_batch(&ray(&[&[2, 2], &[1, 3]], "2"), &opts()).unwrap();
        assert_eq!(
            batch.get("t.shape").unwrap().as_slice::<i32>().unwrap(),
            &[2, 2, 1, 3]
        );
        let err = record_batch_to_batch(&ray(&[&[2, 2], &[1, 2]], "3"), &opts()).unwrap_err();
        assert!(
            err.to_string().contains(
                "row 0 has a shape of 2 dimensions, the ray.data.arrow_variable_shaped_tensor 3"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_tensor_with_an_element_shape_writes_a_column_arrow_rs_accepts_and_reads_back() {
        let lod = Lod::try_from_lengths(&[vec![2, 0, 3]]).unwrap();
        let t = LodTensor::from_vec((0..15).map(|v| v as f32).collect(), vec![5, 3], lod).unwrap();
        let (field, array) = variable_shape_column("x", &t, None).unwrap();
        let ext = field.try_extension_type::<VariableShapeTensor>().unwrap();
        assert_eq!(ext.dimensions(), 2);
        assert_eq!(ext.uniform_shapes(), Some(&[None, Some(3)][..]));
        let storage = array.as_struct();
        let data = storage.column(0).as_list::<i32>();
        assert_eq!(data.value_offsets(), &[0, 6, 6, 15]);
        // The values are the tensor's own buffer.
        let values = data.values().as_primitive::<Float32Type>().values();
        assert_eq!(values.as_ptr(), t.as_slice::<f32>().unwrap().as_ptr());
        let shape = storage.column(1).as_fixed_size_list();
        assert_eq!(
            shape.values().as_primitive::<Int32Type>().values().as_ref(),
            &[2, 3, 0, 3, 3, 3]
        );
        let back = record_batch_to_batch(&record_batch(field, array), &opts()).unwrap();
        assert_eq!(back.get("x"), Some(&t));
        // A slice of a tensor: offsets rebased.
        let tail = t.slice_top(1, 3).unwrap();
        let (_, array) = variable_shape_column("x", &tail, None).unwrap();
        assert_eq!(
            array.as_struct().column(0).as_list::<i32>().value_offsets(),
            &[0, 0, 9]
        );
    }

    #[test]
    fn a_canonical_column_survives_lodt_and_lodt_files_exactly() {
        for shapes in [
            &[&[2, 3][..], &[1, 3]][..],
            &[&[2, 3], &[1, 2]],
            &[&[4], &[0]],
        ] {
            let (array, ndim) = canonical(shapes);
            let json = if ndim == 2 {
                r#"{"dim_names":["H","W"],"permutation":[1,0],"uniform_shape":[null,null]}"#
            } else {
                "{}"
            };
            let field = Field::new("x", array.data_type().clone(), false).with_metadata(
                Metadata::new()
                    .with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR)
                    .with(EXTENSION_TYPE_METADATA_KEY, json),
            );
            let schema =
                Schema::new_with_metadata(vec![field], Metadata::new().with("split", "train"));
            let original = RecordBatch::try_new(Arc::new(schema), vec![array]).unwrap();
            let batch = record_batch_to_batch(&original, &opts()).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("v.lodt");
            crate::format::save_batch(&path, &batch).unwrap();
            let read = crate::format::LodtFile::open(&path)
                .unwrap()
                .read_batch(0)
                .unwrap();
            assert_eq!(read, batch);
            let back = variable_shape_record_batch(&read, &opts()).unwrap();
            assert_eq!(back, original, "{shapes:?}");
        }
    }

    #[test]
    fn a_pair_must_agree_with_itself() {
        let lod = Lod::try_from_lengths(&[vec![6, 2]]).unwrap();
        let values = LodTensor::from_vec(vec![0u8; 8], vec![8], lod).unwrap();
        let shape = LodTensor::from_vec(vec![2i32, 3, 1, 3], vec![2, 2], Lod::empty()).unwrap();
        let err = variable_shape_pair_column("x", &values, &shape, None).unwrap_err();
        assert!(
            err.to_string()
                .contains("row 1 has shape [1, 3], its sequence holds 2 values"),
            "{err}"
        );
        let shape = LodTensor::from_vec(vec![2i32, 3], vec![1, 2], Lod::empty()).unwrap();
        let err = variable_shape_pair_column("x", &values, &shape, None).unwrap_err();
        assert!(err.to_string().contains("int32 [2, ndim]"), "{err}");
    }

    #[test]
    fn more_values_than_32_bit_offsets_hold_split_the_batch() {
        // 32-bit offsets: computed, and refused past i32::MAX.
        let err = data_offsets("x", &[0, 1 << 30, 1 << 31], 1).unwrap_err();
        assert!(
            matches!(err, ArrowError::Overflow { value, .. } if value == 1 << 31),
            "{err}"
        );
        // The split, with a limit of 6 values per piece.
        let lod = Lod::try_from_lengths(&[vec![1, 2, 1, 1]]).unwrap();
        let t = LodTensor::from_vec((0..10i16).collect(), vec![5, 2], lod).unwrap();
        let labels = LodTensor::from_vec(vec![1i64, 2, 3, 4], vec![4], Lod::empty()).unwrap();
        let mut batch = Batch::try_from_tensors([("t", t.clone()), ("y", labels)]).unwrap();
        batch.metadata_mut().insert("k".into(), "v".into());
        let pieces = split_for_list_offsets(&batch, 6).unwrap();
        let rows: Vec<usize> = pieces
            .iter()
            .map(|p| p.get("t").unwrap().top_level_rows())
            .collect();
        assert_eq!(rows, [2, 2]);
        assert_eq!(
            pieces[1].get("y").unwrap().as_slice::<i64>().unwrap(),
            &[3, 4]
        );
        assert_eq!(pieces[1].metadata()["k"], "v");
        assert_eq!(
            split_for_list_offsets(&batch, 100).unwrap(),
            vec![batch.clone()]
        );
        // Under the 32-bit limit: one record batch, `t` a variable_shape_tensor column.
        let record_batches = variable_shape_record_batches(&batch, &opts()).unwrap();
        assert_eq!(record_batches.len(), 1);
        assert_eq!(
            kind(record_batches[0].schema().field(0)),
            Some(Kind::Canonical)
        );
        assert_eq!(
            record_batch_to_batch(&record_batches[0], &opts()).unwrap(),
            batch
        );
        let err = split_for_list_offsets(&batch, 3).unwrap_err();
        assert!(
            matches!(
                err,
                ArrowError::Overflow {
                    value: 4,
                    limit: 3,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn an_ipc_struct_whose_child_is_shorter_is_refused_before_decoding() {
        let (array, _) = canonical(&[&[2, 3], &[1, 2]]);
        let field = Field::new("img", array.data_type().clone(), false)
            .with_metadata(Metadata::new().with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR));
        let rb = record_batch(field, array);
        let mut bytes = Vec::new();
        let mut writer =
            arrow_ipc::writer::StreamWriter::try_new(&mut bytes, &rb.schema()).unwrap();
        writer.write(&rb).unwrap();
        writer.finish().unwrap();
        drop(writer);
        // The field nodes (length, null count): struct 2, data 2, values 8, shape 2, dims 4.
        let node = |len: i64| [len.to_le_bytes(), 0i64.to_le_bytes()].concat();
        let nodes: Vec<u8> = [2, 2, 8, 2, 4].into_iter().flat_map(node).collect();
        let at = bytes
            .windows(nodes.len())
            .position(|w| w == nodes.as_slice())
            .unwrap();
        // The shape child claims 1 row (and its values 2), the struct 2.
        bytes[at + 48..at + 56].copy_from_slice(&1i64.to_le_bytes());
        bytes[at + 64..at + 72].copy_from_slice(&2i64.to_le_bytes());
        let mut reader = crate::arrow::ipc::IpcStreamReader::try_new(&bytes[..], &opts()).unwrap();
        let err = reader.next().unwrap().unwrap_err();
        assert!(
            err.to_string()
                .contains("is a struct of 2 rows, its child \"shape\" has 1"),
            "{err}"
        );
    }

    #[test]
    fn from_arrow_reads_the_one_tensor_form_and_points_a_pair_to_a_batch() {
        let (array, _) = canonical(&[&[2, 3], &[1, 3]]);
        let ext = VariableShapeTensor::try_new(DataType::Float32, 2, None, None, None).unwrap();
        let field = arrow_rs_field(&array, ext.clone());
        let t = from_arrow(&field, array.as_ref(), &opts()).unwrap();
        assert_eq!(
            (t.shape(), t.lod().to_offsets()),
            (&[3, 3][..], vec![vec![0, 2, 3]])
        );
        let (array, _) = canonical(&[&[2, 3], &[1, 2]]);
        let field = arrow_rs_field(&array, ext);
        let err = from_arrow(&field, array.as_ref(), &opts()).unwrap_err();
        assert!(
            err.to_string()
                .contains("reads as two tensors, \"x\" and \"x.shape\": read it into a batch"),
            "{err}"
        );
    }

    #[test]
    fn bfloat16_keeps_its_marker_on_the_column() {
        let lod = Lod::try_from_lengths(&[vec![1, 2]]).unwrap();
        let t = LodTensor::from_bytes(DType::BFloat16, vec![3, 2], &[7u8; 12], lod).unwrap();
        let (field, array) = variable_shape_column("b", &t, None).unwrap();
        assert_eq!(field.metadata()[DTYPE_KEY], "bfloat16");
        let back = record_batch_to_batch(&record_batch(field, array), &opts()).unwrap();
        assert_eq!(back.get("b"), Some(&t));
    }

    /// pyarrow (Arrow C++) reads lodt's columns as its own
    /// `arrow.variable_shape_tensor`, with the metadata and values written.
    /// Needs `LODT_PYTHON` (a python with pyarrow), as `tests/arrow_pyarrow.rs`.
    #[test]
    fn pyarrow_reads_the_columns_written_as_the_extension() {
        let Ok(python) = std::env::var("LODT_PYTHON") else {
            eprintln!("SKIPPED: pyarrow not available (set LODT_PYTHON)");
            return;
        };
        let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
        let clips =
            LodTensor::from_vec((0..9).map(|v| v as f32).collect(), vec![3, 3], lod).unwrap();
        let lod = Lod::try_from_lengths(&[vec![6, 2]]).unwrap();
        let img = LodTensor::from_vec((0..8i16).collect(), vec![8], lod).unwrap();
        let shape = LodTensor::from_vec(vec![2i32, 3, 1, 2], vec![2, 2], Lod::empty()).unwrap();
        let labels = LodTensor::from_vec(vec![5i64, 6], vec![2], Lod::empty()).unwrap();
        let mut batch = Batch::try_from_tensors([
            ("clips", clips),
            ("img", img),
            ("img.shape", shape),
            ("labels", labels),
        ])
        .unwrap();
        batch.metadata_mut().insert(
            format!("{METADATA_KEY_PREFIX}clips"),
            r#"{"dim_names":["time","feature"],"uniform_shape":[null,3]}"#.into(),
        );
        let rb = variable_shape_record_batch(&batch, &opts()).unwrap();
        assert!(rb.schema().metadata().is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.arrow");
        let file = std::fs::File::create(&path).unwrap();
        let mut writer = arrow_ipc::writer::FileWriter::try_new(file, &rb.schema()).unwrap();
        writer.write(&rb).unwrap();
        writer.finish().unwrap();
        let script = r#"
import json, sys, pyarrow.ipc as ipc
t = ipc.open_file(sys.argv[1]).read_all()
out = {}
for f in t.schema:
    col = t.column(f.name).combine_chunks()
    if not hasattr(f.type, "extension_name"):
        out[f.name] = col.to_pylist()
        continue
    s = col.storage
    out[f.name] = [str(f.type), s.field("data").to_pylist(), s.field("shape").to_pylist()]
print(json.dumps(out))
"#;
        let output = std::process::Command::new(python)
            .args(["-c", script, path.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let got: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            got,
            serde_json::json!({
                "clips": [
                    "extension<arrow.variable_shape_tensor[value_type=float, ndim=2, dim_names=[time,feature], uniform_shape=[null,3]]>",
                    [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0]],
                    [[2, 3], [1, 3]]
                ],
                "img": [
                    "extension<arrow.variable_shape_tensor[value_type=int16, ndim=2]>",
                    [[0, 1, 2, 3, 4, 5], [6, 7]],
                    [[2, 3], [1, 2]]
                ],
                "labels": [5, 6]
            })
        );
    }

    #[test]
    fn files_with_the_extension_read_through_the_ipc_and_parquet_readers() {
        let (array, _) = canonical(&[&[2, 3], &[1, 2]]);
        let field = Field::new("img", array.data_type().clone(), true).with_metadata(
            Metadata::new()
                .with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR)
                .with(EXTENSION_TYPE_METADATA_KEY, r#"{"dim_names":["H","W"]}"#),
        );
        let rb = record_batch(field, array);
        let expected = record_batch_to_batch(&rb, &opts()).unwrap();
        let mut ipc = Vec::new();
        let mut writer = arrow_ipc::writer::FileWriter::try_new(&mut ipc, &rb.schema()).unwrap();
        writer.write(&rb).unwrap();
        writer.finish().unwrap();
        drop(writer);
        let reader =
            crate::arrow::ipc::IpcFileReader::try_new(std::io::Cursor::new(ipc), &opts()).unwrap();
        let batches: Vec<Batch> = reader.collect::<Result<_>>().unwrap();
        assert_eq!(batches, std::slice::from_ref(&expected));
        #[cfg(feature = "parquet")]
        {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("v.parquet");
            let file = std::fs::File::create(&path).unwrap();
            let mut writer =
                ::parquet::arrow::ArrowWriter::try_new(file, rb.schema(), None).unwrap();
            writer.write(&rb).unwrap();
            writer.close().unwrap();
            let reader = crate::arrow::parquet::ParquetReader::open(&path, &opts()).unwrap();
            let batches: Vec<Batch> = reader.collect::<Result<_>>().unwrap();
            assert_eq!(batches, [expected]);
        }
    }
}
