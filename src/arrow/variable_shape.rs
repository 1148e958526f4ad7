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
//! Writing ([`variable_shape_record_batch`], [`variable_shape_column`],
//! [`variable_shape_pair_column`], selected by
//! [`TensorType::VariableShape`](super::TensorType::VariableShape)): the reverse; the canonical `data` field is
//! a 32-bit `List`, so a batch holding more than `i32::MAX` values in one
//! column is split by rows ([`split_for_list_offsets`]).

use super::tensor::{lists_from_arrow, lists_to_arrow, metadata_error, overflow};
use super::{ArrowError, ArrowOptions, DTYPE_KEY, Result, VARIABLE_SHAPE_TENSOR};
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
    let storage = Storage::of(field, array, kind)?;
    let rows = storage.array.len();
    let (ndim, metadata, shapes) = storage.shapes(rows)?;
    metadata.check(column, ndim, &shapes)?;
    let values = storage.values(options, rows, ndim, &shapes)?;
    let element = element_shape(&metadata, ndim, rows, &shapes);
    // Kept unless the export would write it anyway (lodt -> Arrow -> lodt adds no key).
    let entry = (kind == Kind::Canonical && metadata != default_metadata(element.as_deref()))
        .then(|| (format!("{METADATA_KEY_PREFIX}{column}"), metadata.to_json()));
    let tensors = match element {
        Some(element) => vec![(
            column.to_owned(),
            one_tensor(column, &values, rows, ndim, &shapes, &element)?,
        )],
        None => vec![
            (column.to_owned(), values),
            (
                format!("{column}{SHAPE_SUFFIX}"),
                shape_tensor(column, rows, ndim, &shapes)?,
            ),
        ],
    };
    Ok(Some(Imported {
        tensors,
        metadata: entry,
    }))
}

/// The storage of a variable-shape column: its struct array, checked to be
/// `struct<data, shape>` of the field's type with no null row.
struct Storage<'a> {
    column: &'a str,
    kind: Kind,
    field: &'a Field,
    array: &'a StructArray,
    data: (usize, &'a Field),
    shape: (usize, &'a Field),
}

impl<'a> Storage<'a> {
    /// Checks `array`, described by `field` (a column of extension `kind`).
    fn of(field: &'a Field, array: &'a dyn Array, kind: Kind) -> Result<Self> {
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
        Ok(Storage {
            column,
            kind,
            field,
            array: storage,
            data: (data_index, data_field.as_ref()),
            shape: (shape_index, shape_field.as_ref()),
        })
    }

    /// The error for a storage that is not the extension's.
    fn bad(&self) -> ArrowError {
        storage_error(self.column, self.kind, self.field.data_type())
    }

    /// The number of dimensions, the extension metadata (canonical: parsed;
    /// Ray: none) and the `rows` rows' shapes (flat, `ndim` per row).
    fn shapes(&self, rows: usize) -> Result<(usize, VariableShapeMetadata, Vec<u64>)> {
        let column = self.column;
        let extension = self
            .field
            .metadata()
            .get(EXTENSION_TYPE_METADATA_KEY)
            .map(String::as_str);
        let shape_array = self.array.column(self.shape.0);
        let shape_type = self.shape.1.data_type();
        match self.kind {
            Kind::Canonical => {
                let DataType::FixedSizeList(item, ndim) = shape_type else {
                    return Err(self.bad());
                };
                let ndim = usize::try_from(*ndim).map_err(|_| self.bad())?;
                if item.data_type() != &DataType::Int32 {
                    return Err(self.bad());
                }
                check_ndim(column, ndim)?;
                let metadata = VariableShapeMetadata::parse(column, extension)?;
                let shapes = canonical_shapes(column, shape_array, rows, ndim)?;
                Ok((ndim, metadata, shapes))
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
                check_ndim(column, ndim)?;
                let shapes = match shape_type {
                    DataType::List(item) if item.data_type() == &DataType::Int64 => {
                        ray_shapes::<i32>(column, shape_array, ndim)?
                    }
                    DataType::LargeList(item) if item.data_type() == &DataType::Int64 => {
                        ray_shapes::<i64>(column, shape_array, ndim)?
                    }
                    _ => return Err(self.bad()),
                };
                Ok((ndim, VariableShapeMetadata::default(), shapes))
            }
        }
    }

    /// The values: the data list as a 1-level tensor (bfloat16 marked on
    /// the column), one sequence per row, each holding as many values as
    /// its shape (`shapes`, `ndim` per row) says.
    fn values(
        &self,
        options: &ArrowOptions,
        rows: usize,
        ndim: usize,
        shapes: &[u64],
    ) -> Result<LodTensor> {
        let column = self.column;
        let mut data_metadata = Metadata::new();
        if let Some(dtype) = self.field.metadata().get(DTYPE_KEY) {
            data_metadata.insert(DTYPE_KEY, dtype.as_str());
        }
        let data_field =
            Field::new(column, self.data.1.data_type().clone(), true).with_metadata(data_metadata);
        let values = lists_from_arrow(
            &data_field,
            self.array.column(self.data.0).as_ref(),
            options,
        )?;
        let offsets = match values.lod().raw_level(0) {
            Some(offsets)
                if values.lod().num_levels() == 1
                    && values.element_shape().is_empty()
                    && offsets.len() == rows + 1 =>
            {
                offsets
            }
            _ => return Err(self.bad()),
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
        Ok(values)
    }
}

/// The one tensor of a column whose rows vary only in their first
/// dimension: the `values` with element shape `element`, a LoD of one
/// sequence per row (`rows` of them, of `shapes[row * ndim]` rows each).
fn one_tensor(
    column: &str,
    values: &LodTensor,
    rows: usize,
    ndim: usize,
    shapes: &[u64],
    element: &[u64],
) -> Result<LodTensor> {
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
    for &d in element {
        shape.push(usize_of(column, d)?);
    }
    // `[0]` for no rows: an empty level, as `from_arrow` reads one.
    let lod = Lod::try_from_stored(vec![lod]).map_err(tensor_error(column))?;
    LodTensor::try_from_parts(values.dtype(), shape, values.buffer().clone(), lod)
        .map_err(tensor_error(column))
}

/// The shape tensor of a pair: int32 `[rows, ndim]`, no LoD.
fn shape_tensor(column: &str, rows: usize, ndim: usize, shapes: &[u64]) -> Result<LodTensor> {
    let mut dims = Vec::new();
    dims.try_reserve_exact(shapes.len())
        .map_err(|_| overflow(column, "rows", rows as u128, usize::MAX as u128))?;
    for &d in shapes {
        dims.push(
            i32::try_from(d)
                .map_err(|_| overflow(column, "dimension", d.into(), i32::MAX as u128))?,
        );
    }
    LodTensor::from_vec(dims, vec![rows, ndim], Lod::empty()).map_err(tensor_error(column))
}

/// Refuses a variable-shape tensor of more dimensions than a tensor may
/// have ([`MAX_DIMS`](crate::format::MAX_DIMS), 64): found on import, before
/// anything is sized by `ndim`, and on export.
fn check_ndim(column: &str, ndim: usize) -> Result<()> {
    if ndim > crate::format::MAX_DIMS {
        return Err(metadata_error(
            column,
            format!(
                "a variable-shape tensor of {ndim} dimensions; a tensor has at most {}",
                crate::format::MAX_DIMS
            ),
        ));
    }
    Ok(())
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
    // Not sized by `ndim`: Ray's comes from metadata (and no row may exist).
    let mut element = Vec::new();
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
    // At most the dimensions present (`ndim` is metadata).
    let mut shapes = Vec::new();
    shapes
        .try_reserve_exact(list.len().saturating_mul(ndim).min(values.len()))
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
fn assemble(
    name: &str,
    tensor: &LodTensor,
    offsets: OffsetBuffer<i32>,
    ndim: usize,
    shapes: &[u64],
    metadata: &VariableShapeMetadata,
) -> Result<(Field, ArrayRef)> {
    check_ndim(name, ndim)?;
    metadata.check(name, ndim, shapes)?;
    let flat = LodTensor::try_from_parts(
        tensor.dtype(),
        vec![tensor.numel()],
        tensor.buffer().clone(),
        Lod::empty(),
    )
    .map_err(tensor_error(name))?;
    let (leaf_field, leaf) = lists_to_arrow(name, &flat, &ArrowOptions::default())?;
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

/// `batch` as one record batch whose 1-level tensors are
/// `arrow.variable_shape_tensor` columns: a pair `x` + `x.shape`
/// ([`variable_shape_pair_column`]) as one column `x`, every other 1-level
/// tensor by [`variable_shape_column`], the rest by [`to_arrow`](super::to_arrow) with
/// `options`. The metadata key `lodt.variable_shape_tensor.<column>` gives
/// a column's extension metadata and leaves the schema metadata. More than
/// `i32::MAX` values in a column is an overflow: the file writers split the
/// batch with [`split_for_list_offsets`] first.
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
            let converted = lists_to_arrow(name, tensor, options)?;
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
mod tests;
