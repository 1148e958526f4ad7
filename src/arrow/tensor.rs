//! One tensor <-> one Arrow array of nested lists (plus its field, which
//! carries the metadata that makes the mapping lossless): the mapping of
//! every column but the variable-shape extension's (`variable_shape.rs`,
//! which stores its values this way too).

use super::{
    ArrowBytes, ArrowError, ArrowOptions, DTYPE_KEY, FIXED_SHAPE_TENSOR, ListType, NullLists,
    Result, SCALAR_KEY,
};
use crate::buffer::{AlignedBytes, ByteStorage};
use crate::dtype::DType;
use crate::lod::Lod;
use crate::tensor::LodTensor;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, GenericListArray, OffsetSizeTrait,
    PrimitiveArray,
};
use arrow_buffer::{
    ArrowNativeType, BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer,
};
use arrow_schema::extension::{EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY};
use arrow_schema::{DataType, Field, Metadata};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

// ---------------------------------------------------------------------------
// lodt -> Arrow
// ---------------------------------------------------------------------------

/// One LoD level to convert: its raw offsets (validated, possibly a window
/// that does not start at 0) and, when the memory can be shared with Arrow, a
/// buffer over exactly those bytes.
struct LevelSource<'a> {
    raw: &'a [u64],
    shared: Option<Buffer>,
}

/// Everything needed to build the array of one tensor.
struct Source<'a> {
    dtype: DType,
    shape: &'a [usize],
    levels: Vec<LevelSource<'a>>,
    body: &'a [u8],
    body_shared: Option<Buffer>,
}

/// A buffer over `bytes` that keeps `owner` alive instead of copying.
///
/// # Safety
///
/// `bytes` must lie in memory owned by `owner` that stays valid and unchanged
/// for as long as `owner` is alive.
unsafe fn shared_buffer(owner: Arc<dyn arrow_buffer::alloc::Allocation>, bytes: &[u8]) -> Buffer {
    // A slice pointer is never null (empty slices use a dangling pointer).
    let ptr = NonNull::from(bytes).cast::<u8>();
    // SAFETY: the caller guarantees that `bytes` stays valid and unchanged
    // while `owner` lives; the Buffer holds `owner`.
    unsafe { Buffer::from_custom_allocation(ptr, bytes.len(), owner) }
}

fn is_aligned(bytes: &[u8], align: usize) -> bool {
    (bytes.as_ptr() as usize).is_multiple_of(align)
}

/// The bytes as a buffer aligned for `T`: `shared` when it is usable, a copy otherwise.
fn aligned_buffer<T: ArrowNativeType>(bytes: &[u8], shared: Option<Buffer>) -> ScalarBuffer<T> {
    let size = std::mem::size_of::<T>();
    let buffer = match shared {
        Some(b)
            if b.len() == bytes.len() && is_aligned(b.as_slice(), std::mem::align_of::<T>()) =>
        {
            b
        }
        // Arrow's own allocations are 64-byte aligned.
        _ => Buffer::from_slice_ref(bytes),
    };
    let len = buffer.len() / size;
    // In range and aligned: checked or allocated just above.
    ScalarBuffer::new(buffer, 0, len)
}

pub(super) fn overflow(column: &str, what: &'static str, value: u128, limit: u128) -> ArrowError {
    ArrowError::Overflow {
        column: column.to_owned(),
        what,
        value,
        limit,
    }
}

pub(super) fn tensor_error(column: &str) -> impl Fn(crate::Error) -> ArrowError + '_ {
    move |source| ArrowError::Tensor {
        column: column.to_owned(),
        source,
    }
}

/// The one DType ↔ Arrow table: `$bool` for [`DType::Bool`] (Arrow's
/// booleans are bit-packed, not a primitive type), else `$m!(T)` with `T`
/// the Arrow primitive type that holds the elements (bfloat16: `UInt16`,
/// marked in the field metadata). [`arrow_data_type`], [`leaf_array`],
/// [`leaf_buffer`] and the reverse lookup in [`lists_from_arrow`] all use it.
macro_rules! by_arrow_type {
    ($dtype:expr, $bool:expr, $m:ident) => {
        match $dtype {
            DType::Bool => $bool,
            DType::Int8 => $m!(Int8Type),
            DType::Int16 => $m!(Int16Type),
            DType::Int32 => $m!(Int32Type),
            DType::Int64 => $m!(Int64Type),
            DType::UInt8 => $m!(UInt8Type),
            DType::UInt16 | DType::BFloat16 => $m!(UInt16Type),
            DType::UInt32 => $m!(UInt32Type),
            DType::UInt64 => $m!(UInt64Type),
            DType::Float16 => $m!(Float16Type),
            DType::Float32 => $m!(Float32Type),
            DType::Float64 => $m!(Float64Type),
        }
    };
}

/// The Arrow type of `dtype`'s elements (from the table above).
fn arrow_data_type(dtype: DType) -> DataType {
    macro_rules! data_type {
        ($t:ty) => {
            <$t as arrow_array::types::ArrowPrimitiveType>::DATA_TYPE
        };
    }
    by_arrow_type!(dtype, DataType::Boolean, data_type)
}

/// The dtype whose elements Arrow type `data_type` holds (`bf16`: the
/// field is marked bfloat16), or `None`: the reverse of [`arrow_data_type`].
pub(super) fn dtype_of(data_type: &DataType, bf16: bool) -> Option<DType> {
    DType::ALL
        .into_iter()
        .find(|&d| arrow_data_type(d) == *data_type && (d == DType::BFloat16) == bf16)
}

/// The primitive leaf of a tensor: every element, flat.
fn leaf_array(dtype: DType, body: &[u8], shared: Option<Buffer>) -> ArrayRef {
    macro_rules! primitive {
        ($t:ty) => {
            Arc::new(PrimitiveArray::<$t>::new(
                aligned_buffer(body, shared),
                None,
            )) as ArrayRef
        };
    }
    // Arrow booleans are bit-packed: necessarily a copy.
    let bool_array = || -> ArrayRef {
        Arc::new(BooleanArray::new(
            BooleanBuffer::collect_bool(body.len(), |i| body.get(i).is_some_and(|&b| b != 0)),
            None,
        ))
    };
    by_arrow_type!(dtype, bool_array(), primitive)
}

/// `i64` offsets of one level, rebased to start at 0; shared when the level
/// already starts at 0 and its memory is shareable.
fn large_offsets(column: &str, level: &LevelSource<'_>) -> Result<OffsetBuffer<i64>> {
    let (Some(&first), Some(&last)) = (level.raw.first(), level.raw.last()) else {
        return Err(ArrowError::InvalidArgument(format!(
            "column {column:?}: a LoD level with no offsets"
        )));
    };
    // Offsets are non-decreasing (validated), so the last is the largest.
    if last > i64::MAX as u64 {
        return Err(overflow(
            column,
            "LargeList offset",
            last.into(),
            i64::MAX as u128,
        ));
    }
    if first == 0
        && let Some(shared) = &level.shared
        && shared.len() == level.raw.len() * 8
        && is_aligned(shared.as_slice(), 8)
    {
        let values = ScalarBuffer::<i64>::new(shared.clone(), 0, level.raw.len());
        // SAFETY: the buffer holds the level's offsets: at least two
        // and starting at 0 (validated by every caller), non-decreasing
        // (validated: every `Lod` is), and so all <= the last,
        // which is <= i64::MAX (checked above). They read as valid
        // non-negative, monotonically increasing i64 offsets.
        return Ok(unsafe { OffsetBuffer::new_unchecked(values) });
    }
    let values: Vec<i64> = level
        .raw
        .iter()
        .map(|&o| o.saturating_sub(first) as i64)
        .collect();
    // Validated non-empty, non-negative and non-decreasing: `new` cannot fail.
    Ok(OffsetBuffer::new(ScalarBuffer::from(values)))
}

/// `i32` offsets of one level, rebased to start at 0 (always a copy).
fn small_offsets(column: &str, level: &LevelSource<'_>) -> Result<OffsetBuffer<i32>> {
    let (Some(&first), Some(&last)) = (level.raw.first(), level.raw.last()) else {
        return Err(ArrowError::InvalidArgument(format!(
            "column {column:?}: a LoD level with no offsets"
        )));
    };
    let span = last.saturating_sub(first);
    if span > i32::MAX as u64 {
        return Err(overflow(
            column,
            "List offset (use ListType::LargeList)",
            span.into(),
            i32::MAX as u128,
        ));
    }
    let values: Vec<i32> = level
        .raw
        .iter()
        .map(|&o| o.saturating_sub(first) as i32)
        .collect();
    // Validated non-empty, non-negative and non-decreasing: `new` cannot fail.
    Ok(OffsetBuffer::new(ScalarBuffer::from(values)))
}

fn list_array<O: OffsetSizeTrait>(
    child: Field,
    offsets: OffsetBuffer<O>,
    values: ArrayRef,
) -> Result<ArrayRef> {
    Ok(Arc::new(GenericListArray::<O>::try_new(
        Arc::new(child),
        offsets,
        values,
        None,
    )?))
}

fn build(name: &str, src: Source<'_>, options: &ArrowOptions) -> Result<(Field, ArrayRef)> {
    let (rows, element_shape, scalar) = match src.shape.split_first() {
        Some((&rows, rest)) => (rows, rest, false),
        None => (1, src.shape, true),
    };
    let mut metadata = Metadata::new();
    let mut array = leaf_array(src.dtype, src.body, src.body_shared);
    if !element_shape.is_empty() {
        (array, metadata) = options
            .tensor_type
            .element_array(name, array, element_shape, rows)?;
    }
    for level in src.levels.iter().rev() {
        let child = Field::new("item", array.data_type().clone(), false).with_metadata(metadata);
        metadata = Metadata::new();
        array = match options.list_type {
            ListType::LargeList => list_array(child, large_offsets(name, level)?, array)?,
            ListType::List => list_array(child, small_offsets(name, level)?, array)?,
        };
    }
    // Column-level markers: tools keep a column field's metadata even where
    // they drop nested fields' (pyarrow rebuilds extension storage types).
    if src.dtype == DType::BFloat16 {
        metadata.insert(DTYPE_KEY, DType::BFloat16.name());
    }
    if scalar {
        metadata.insert(SCALAR_KEY, "true");
    }
    let field = Field::new(name, array.data_type().clone(), false).with_metadata(metadata);
    Ok((field, array))
}

/// [`to_arrow`](super::to_arrow) for a column of nested lists (or a fixed-shape
/// tensor's `FixedSizeList`s, as `options.tensor_type` says), never the
/// variable-shape extension.
pub(super) fn lists_to_arrow(
    name: &str,
    tensor: &LodTensor,
    options: &ArrowOptions,
) -> Result<(Field, ArrayRef)> {
    let levels = tensor
        .lod()
        .levels()
        .map(|level| LevelSource {
            raw: level.raw(),
            shared: tensor
                .lod()
                .storage()
                .map(|s| level_arrow_buffer(s, level.raw())),
        })
        .collect();
    build(
        name,
        Source {
            dtype: tensor.dtype(),
            shape: tensor.shape(),
            levels,
            body: tensor.as_bytes(),
            body_shared: Some(arrow_buffer_of(tensor.buffer())),
        },
        options,
    )
}

/// An Arrow buffer over the bytes of `buf`, keeping its storage alive.
/// An Arrow buffer over `raw`, the raw offsets of a level of a LoD whose
/// block is `storage` ([`Lod::storage`](crate::Lod::storage)), sharing the
/// storage (no copy).
fn level_arrow_buffer(storage: &Arc<dyn crate::buffer::ByteStorage>, raw: &[u64]) -> Buffer {
    use zerocopy::IntoBytes;
    // SAFETY: a LoD's levels are windows of its block's bytes
    // (`Lod::storage`), so `raw` lies in `storage.bytes()`. The owner is a
    // clone of the storage's Arc, so the storage outlives the Arrow buffer;
    // `ByteStorage` is an unsafe trait whose implementations promise that a
    // shared storage's bytes stay where they are, unchanged, while it lives.
    unsafe { shared_buffer(Arc::new(storage.clone()), raw.as_bytes()) }
}

fn arrow_buffer_of(buf: &crate::buffer::Buffer) -> Buffer {
    let bytes = buf.as_slice();
    // SAFETY: `bytes` are `buf.storage().bytes()[buf.range()]`. The owner is a
    // clone of the storage's Arc, so the storage outlives the Arrow buffer;
    // `ByteStorage` is an unsafe trait whose implementations promise that a
    // shared storage's bytes stay where they are, unchanged, while it lives.
    unsafe { shared_buffer(Arc::new(buf.storage().clone()), bytes) }
}

// ---------------------------------------------------------------------------
// Arrow -> lodt
// ---------------------------------------------------------------------------

/// Appends `run` to `runs`, merging it with the last run when adjacent.
fn push_run(runs: &mut Vec<Range<usize>>, run: Range<usize>) {
    if run.is_empty() {
        return;
    }
    match runs.last_mut() {
        Some(last) if last.end == run.start => last.end = run.end,
        _ => runs.push(run),
    }
}

fn runs_len(runs: &[Range<usize>]) -> usize {
    runs.iter().map(|r| r.len()).sum()
}

/// Reads one list level: appends its (rebased) offsets to a new LoD level and
/// returns the runs of child entries it selects.
fn read_list_level<O: OffsetSizeTrait>(
    column: &str,
    list: &GenericListArray<O>,
    runs: &[Range<usize>],
    level: usize,
    options: &ArrowOptions,
    out: &mut Vec<u64>,
) -> Result<Vec<Range<usize>>> {
    let offsets = list.value_offsets();
    let nulls = list.nulls().filter(|n| n.null_count() > 0);
    let values_len = list.values().len();
    let bad_offset = || {
        ArrowError::InvalidArgument(format!(
            "column {column:?}: list offsets at level {level} are not valid for {values_len} values"
        ))
    };
    out.reserve(runs_len(runs) + 1);
    out.push(0);
    let mut total = 0u64;
    let mut child_runs = Vec::new();
    let mut index = 0usize;
    for run in runs {
        for i in run.clone() {
            let is_null = nulls.is_some_and(|n| n.is_null(i));
            if is_null {
                match options.null_lists {
                    NullLists::Error => {
                        return Err(ArrowError::NullList {
                            column: column.to_owned(),
                            level,
                            index,
                        });
                    }
                    NullLists::Empty => {
                        out.push(total);
                        index += 1;
                        continue;
                    }
                }
            }
            let start = offsets.get(i).and_then(|o| o.to_usize());
            let end = offsets.get(i + 1).and_then(|o| o.to_usize());
            let (Some(start), Some(end)) = (start, end) else {
                return Err(bad_offset());
            };
            if end < start || end > values_len {
                return Err(bad_offset());
            }
            total = total
                .checked_add((end - start) as u64)
                .ok_or_else(bad_offset)?;
            out.push(total);
            push_run(&mut child_runs, start..end);
            index += 1;
        }
    }
    Ok(child_runs)
}

/// The `arrow.fixed_shape_tensor` extension metadata, parsed by lodt itself
/// (sizes are checked, never trusted).
#[derive(serde::Deserialize)]
struct TensorExtension {
    shape: Vec<u64>,
}

pub(super) fn metadata_error(column: &str, message: String) -> ArrowError {
    ArrowError::Metadata {
        column: column.to_owned(),
        message,
    }
}

/// A column whose elements have `what` (more dimensions than a tensor of
/// [`MAX_DIMS`](crate::format::MAX_DIMS) dimensions, its rows' included).
fn too_many_dims(column: &str, what: &str) -> ArrowError {
    metadata_error(
        column,
        format!(
            "{what}: a tensor has at most {} dimensions, its rows' included",
            crate::format::MAX_DIMS
        ),
    )
}

/// The element shape named by a field's `arrow.fixed_shape_tensor` extension, if any.
fn extension_shape(column: &str, metadata: &Metadata) -> Result<Option<Vec<u64>>> {
    if metadata.get(EXTENSION_TYPE_NAME_KEY).map(String::as_str) != Some(FIXED_SHAPE_TENSOR) {
        return Ok(None);
    }
    let json = metadata
        .get(EXTENSION_TYPE_METADATA_KEY)
        .ok_or_else(|| metadata_error(column, "the extension has no metadata".into()))?;
    let ext: TensorExtension = serde_json::from_str(json)
        .map_err(|e| metadata_error(column, format!("bad metadata {json:?}: {e}")))?;
    Ok(Some(ext.shape))
}

/// The shape of `arrow.fixed_shape_tensor` extension metadata (`None`: unparsable).
pub(super) fn extension_dims(json: &str) -> Option<Vec<u64>> {
    serde_json::from_str::<TensorExtension>(json)
        .ok()
        .map(|e| e.shape)
}

fn checked_product(dims: &[u64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// [`from_arrow`](super::from_arrow) for a column that is not a variable-shape
/// tensor: its `List`/`LargeList` levels become LoD levels, its
/// `FixedSizeList`s (or the `arrow.fixed_shape_tensor` extension) the
/// element shape, its leaf the values.
pub(super) fn lists_from_arrow(
    field: &Field,
    array: &dyn Array,
    options: &ArrowOptions,
) -> Result<LodTensor> {
    let column = field.name().as_str();
    if !field.data_type().equals_datatype(array.data_type()) {
        return Err(ArrowError::InvalidArgument(format!(
            "column {column:?}: the field's type {} is not the array's type {}",
            field.data_type(),
            array.data_type()
        )));
    }
    let mut walk = Walk {
        column,
        field,
        metadata: field.metadata(),
        ftype: field.data_type(),
        array,
        runs: Vec::new(),
    };
    push_run(&mut walk.runs, 0..array.len());
    let levels = walk.lod_levels(options)?;
    let rows = runs_len(&walk.runs);
    let (element_shape, elements_per_row) = walk.element_shape()?;
    let dtype = leaf_dtype(column, field, walk.ftype)?;
    walk.check_leaf(elements_per_row)?;
    let storage = walk.leaf_storage(dtype)?;
    let shape = tensor_shape(column, field, levels.is_empty(), &element_shape, rows)?;
    let lod = Lod::try_from_stored(levels).map_err(tensor_error(column))?;
    LodTensor::try_from_parts(
        dtype,
        shape,
        crate::buffer::Buffer::from_storage(storage),
        lod,
    )
    .map_err(tensor_error(column))
}

/// Where the walk down one column is: the field metadata and type at the
/// current depth (metadata comes from the field's type tree, structure from
/// the array), the array there, and the runs of its values that the selected
/// rows hold.
struct Walk<'a> {
    column: &'a str,
    field: &'a Field,
    metadata: &'a Metadata,
    ftype: &'a DataType,
    array: &'a dyn Array,
    runs: Vec<Range<usize>>,
}

impl<'a> Walk<'a> {
    /// The error for an array at the current depth whose type is not the field's.
    fn mismatch(&self) -> ArrowError {
        ArrowError::InvalidArgument(format!(
            "column {:?}: the array's type {} does not match the field's type {}",
            self.column,
            self.array.data_type(),
            self.field.data_type()
        ))
    }

    /// Descends through the `List`/`LargeList` levels: each level's offsets
    /// (rebased), and the runs of the values below the last one.
    fn lod_levels(&mut self, options: &ArrowOptions) -> Result<Vec<Vec<u64>>> {
        let column = self.column;
        let mut levels: Vec<Vec<u64>> = Vec::new();
        while let DataType::List(child) | DataType::LargeList(child) = self.ftype {
            let mut offsets = Vec::new();
            let level = levels.len();
            let array: &'a dyn Array = self.array;
            let (child_runs, values) = if let Some(list) = array.as_list_opt::<i32>() {
                let runs = read_list_level(column, list, &self.runs, level, options, &mut offsets)?;
                (runs, list.values())
            } else if let Some(list) = array.as_list_opt::<i64>() {
                let runs = read_list_level(column, list, &self.runs, level, options, &mut offsets)?;
                (runs, list.values())
            } else {
                return Err(self.mismatch());
            };
            levels.push(offsets);
            self.runs = child_runs;
            self.metadata = child.metadata();
            self.ftype = child.data_type();
            self.array = values.as_ref();
        }
        Ok(levels)
    }

    /// Descends through the `FixedSizeList` levels: the element shape (the
    /// `arrow.fixed_shape_tensor` extension's, checked against the lists,
    /// when the column has one) and the number of values per row.
    fn element_shape(&mut self) -> Result<(Vec<u64>, usize)> {
        let extension = extension_shape(self.column, self.metadata)?;
        let (dims, elements_per_row) = self.fixed_size_levels()?;
        let shape = match extension {
            Some(shape) => extension_element_shape(self.column, shape, &dims, elements_per_row)?,
            None => dims,
        };
        Ok((shape, elements_per_row))
    }

    /// The sizes of the `FixedSizeList` levels at the current depth, and the
    /// values per row they make; the walk ends at their values.
    fn fixed_size_levels(&mut self) -> Result<(Vec<u64>, usize)> {
        let column = self.column;
        let mut dims: Vec<u64> = Vec::new();
        let mut elements_per_row = 1usize;
        while let DataType::FixedSizeList(child, size) = self.ftype {
            let array: &'a dyn Array = self.array;
            let fsl: &FixedSizeListArray = array
                .as_fixed_size_list_opt()
                .ok_or_else(|| self.mismatch())?;
            let size = usize::try_from(*size).map_err(|_| {
                ArrowError::InvalidArgument(format!(
                    "column {column:?}: negative FixedSizeList size"
                ))
            })?;
            if dims.len() + 1 >= crate::format::MAX_DIMS {
                return Err(too_many_dims(column, "nested FixedSizeLists"));
            }
            if let Some(nulls) = fsl.nulls().filter(|n| n.null_count() > 0) {
                check_no_null(column, nulls, &self.runs, elements_per_row)?;
            }
            let too_big = || overflow(column, "element size", u128::MAX, usize::MAX as u128);
            let mut child_runs = Vec::with_capacity(self.runs.len());
            for run in &self.runs {
                let start = run.start.checked_mul(size).ok_or_else(too_big)?;
                let end = run.end.checked_mul(size).ok_or_else(too_big)?;
                push_run(&mut child_runs, start..end);
            }
            self.runs = child_runs;
            elements_per_row = elements_per_row.checked_mul(size).ok_or_else(too_big)?;
            dims.push(size as u64);
            self.ftype = child.data_type();
            self.array = fsl.values().as_ref();
        }
        Ok((dims, elements_per_row))
    }

    /// Checks the leaf's selected values: inside the array, and not null.
    fn check_leaf(&self, elements_per_row: usize) -> Result<()> {
        if self.runs.iter().any(|r| r.end > self.array.len()) {
            return Err(ArrowError::InvalidArgument(format!(
                "column {:?}: offsets point past the {} values",
                self.column,
                self.array.len()
            )));
        }
        if let Some(nulls) = self.array.logical_nulls().filter(|n| n.null_count() > 0) {
            check_no_null(self.column, &nulls, &self.runs, elements_per_row)?;
        }
        Ok(())
    }

    /// The bytes of the leaf's selected values: Arrow's own buffer when they
    /// are one run of non-boolean values, else a copy.
    fn leaf_storage(&self, dtype: DType) -> Result<Arc<dyn ByteStorage>> {
        let (array, runs) = (self.array, &self.runs);
        if dtype == DType::Bool {
            let values = array
                .as_boolean_opt()
                .ok_or_else(|| self.mismatch())?
                .values();
            let bools: Vec<bool> = runs
                .iter()
                .flat_map(|r| r.clone().map(|i| values.value(i)))
                .collect();
            return Ok(Arc::new(bools));
        }
        let buffer = leaf_buffer(array, dtype).ok_or_else(|| ArrowError::Unsupported {
            column: self.column.to_owned(),
            data_type: array.data_type().to_string(),
        })?;
        let size = dtype.size();
        let range = |r: &Range<usize>| r.start * size..r.end * size;
        Ok(match runs.as_slice() {
            [] => Arc::new(AlignedBytes::zeroed(0)),
            [run] => Arc::new(ArrowBytes::new(
                buffer.slice_with_length(run.start * size, run.len() * size),
            )),
            _ => {
                let bytes = buffer.as_slice();
                let total = runs_len(runs) * size;
                let mut out = AlignedBytes::zeroed(total);
                let mut at = 0;
                for run in runs {
                    let src = bytes.get(range(run)).unwrap_or(&[]);
                    if let Some(dst) = out.as_mut_slice().get_mut(at..at + src.len()) {
                        dst.copy_from_slice(src);
                    }
                    at += src.len();
                }
                Arc::new(out)
            }
        })
    }
}

/// An [`ArrowError::NullValue`] naming the row of the first null of `nulls`
/// among the selected values `runs` (rows of `elements_per_row` values).
fn check_no_null(
    column: &str,
    nulls: &NullBuffer,
    runs: &[Range<usize>],
    elements_per_row: usize,
) -> Result<()> {
    let mut position = 0usize;
    for run in runs {
        if let Some(i) = run.clone().find(|&i| nulls.is_null(i)) {
            return Err(ArrowError::NullValue {
                column: column.to_owned(),
                row: (position + i - run.start) / elements_per_row.max(1),
            });
        }
        position += run.len();
    }
    Ok(())
}

/// The element shape an `arrow.fixed_shape_tensor` extension gives
/// (`shape`), checked against its `FixedSizeList` storage (`dims`, holding
/// `elements_per_row` values).
fn extension_element_shape(
    column: &str,
    shape: Vec<u64>,
    dims: &[u64],
    elements_per_row: usize,
) -> Result<Vec<u64>> {
    if dims.is_empty() {
        return Err(metadata_error(
            column,
            format!("{FIXED_SHAPE_TENSOR} on a non-FixedSizeList field"),
        ));
    }
    if checked_product(&shape) != checked_product(dims) {
        return Err(metadata_error(
            column,
            format!(
                "shape {shape:?} does not hold the {elements_per_row} values of its FixedSizeList storage"
            ),
        ));
    }
    // The rows' dimension and the shape's: at most MAX_DIMS.
    if shape.len() >= crate::format::MAX_DIMS {
        return Err(too_many_dims(
            column,
            &format!("a {FIXED_SHAPE_TENSOR} shape of {} dimensions", shape.len()),
        ));
    }
    Ok(shape)
}

/// The dtype of a leaf of Arrow type `ftype`: bfloat16 when the column's
/// field says so (on `UInt16` values only).
fn leaf_dtype(column: &str, field: &Field, ftype: &DataType) -> Result<DType> {
    let is_bf16 = match field.metadata().get(DTYPE_KEY).map(String::as_str) {
        None => false,
        Some("bfloat16") if ftype == &DataType::UInt16 => true,
        Some(other) => {
            return Err(metadata_error(
                column,
                format!(
                    "{DTYPE_KEY} = {other:?} on a column of {ftype} values (lodt writes {DTYPE_KEY} = \"bfloat16\" on columns of UInt16 values only)"
                ),
            ));
        }
    };
    dtype_of(ftype, is_bf16).ok_or_else(|| ArrowError::Unsupported {
        column: column.to_owned(),
        data_type: ftype.to_string(),
    })
}

/// The tensor's shape: `rows` then the element shape, or `[]` for a column
/// the field marks 0-D (which must then be one primitive value: `no_lod`,
/// no element shape, one row).
fn tensor_shape(
    column: &str,
    field: &Field,
    no_lod: bool,
    element_shape: &[u64],
    rows: usize,
) -> Result<Vec<usize>> {
    let scalar = field.metadata().get(SCALAR_KEY).map(String::as_str) == Some("true");
    let mut shape = Vec::with_capacity(1 + element_shape.len());
    if scalar {
        if !(no_lod && element_shape.is_empty() && rows == 1) {
            return Err(metadata_error(
                column,
                format!("{SCALAR_KEY} on a column that is not one primitive value"),
            ));
        }
    } else {
        shape.push(rows);
    }
    for &d in element_shape {
        shape.push(
            usize::try_from(d)
                .map_err(|_| overflow(column, "dimension", d.into(), usize::MAX as u128))?,
        );
    }
    Ok(shape)
}

/// The values buffer of a primitive leaf (already sliced to the array).
fn leaf_buffer(array: &dyn Array, dtype: DType) -> Option<Buffer> {
    macro_rules! values {
        ($t:ty) => {
            array
                .as_primitive_opt::<$t>()
                .map(|a| a.values().inner().clone())
        };
    }
    by_arrow_type!(dtype, None, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_maps_every_dtype_there_and_back() {
        for dtype in DType::ALL {
            let data_type = arrow_data_type(dtype);
            assert_eq!(dtype_of(&data_type, dtype == DType::BFloat16), Some(dtype));
        }
        assert_eq!(arrow_data_type(DType::BFloat16), DataType::UInt16);
        assert_eq!(arrow_data_type(DType::Bool), DataType::Boolean);
        assert_eq!(dtype_of(&DataType::Int32, true), None);
        assert_eq!(dtype_of(&DataType::Utf8, false), None);
    }
}
