//! The entry points between one tensor and one Arrow column: [`to_arrow`],
//! [`from_arrow`] and their variants. Each decides once whether the column is
//! a variable-shape tensor (`variable_shape.rs`, `spec/ARROW.md` section 9)
//! or nested lists (`tensor.rs`), and hands it to that mapping.

use super::tensor::{lists_from_arrow, lists_to_arrow, tensor_error};
use super::variable_shape::{import, variable_shape_column};
use super::{ArrowOptions, Result, TensorType};
use crate::tensor::LodTensor;
use arrow_array::{Array, ArrayRef};
use arrow_schema::Field;

/// Converts a tensor into an Arrow array and the field describing it (named
/// `name`). See `spec/ARROW.md` for the mapping.
///
/// With [`ListType::LargeList`](super::ListType::LargeList) (the default) nothing is copied but bools: the
/// values buffer is the tensor's own buffer, and each level's offsets buffer is
/// the tensor's own offsets (read as `i64`) when the level starts at 0, which
/// it does unless the tensor is a slice (a slice's levels are rebased: a copy
/// of the offsets, values still shared). The array keeps the buffers alive, so
/// a tensor read from a memory-mapped `.lodt` file becomes an array over the
/// map in O(levels). With [`ListType::List`](super::ListType::List) the offsets are converted to
/// `i32` (a copy).
///
/// ```
/// use lodt::{arrow::{to_arrow, ArrowOptions}, Lod, LodTensor};
/// use arrow_array::{cast::AsArray, types::Float32Type};
/// let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
/// let frames = LodTensor::from_vec(vec![0f32; 3 * 4], vec![3, 4], lod)?;
/// let (field, array) = to_arrow("frames", &frames, &ArrowOptions::default())?;
/// assert_eq!(array.as_list::<i64>().value_offsets(), &[0, 2, 3]);
/// // Values are shared, not copied:
/// let values = array.as_list::<i64>().values().as_fixed_size_list().values().as_primitive::<Float32Type>();
/// assert_eq!(values.values().as_ptr(), frames.as_slice::<f32>()?.as_ptr());
///
/// // A slice: offsets rebased.
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
/// let words = LodTensor::from_vec((0..15i64).collect(), vec![15], lod)?;
/// let article2 = words.branch(&[2])?;                 // offsets [10, 12, 15]
/// let (_, array) = to_arrow("a2", &article2, &ArrowOptions::default())?;
/// assert_eq!(array.as_list::<i64>().value_offsets(), &[0, 2, 5]);
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn to_arrow(
    name: &str,
    tensor: &LodTensor,
    options: &ArrowOptions,
) -> Result<(Field, ArrayRef)> {
    if options.tensor_type == TensorType::VariableShape && tensor.lod().num_levels() == 1 {
        return variable_shape_column(name, tensor, None);
    }
    lists_to_arrow(name, tensor, options)
}

/// Checks `parts` ([`TensorBuffers::to_tensor`](crate::format::TensorBuffers::to_tensor):
/// byte ranges, alignment, LoD rules, data length) and converts the tensor
/// over them with [`to_arrow`]: with [`ListType::LargeList`](super::ListType::LargeList), no offset or
/// value is copied (a body misaligned for its type, and bools, are). The array
/// keeps the storage alive.
///
/// ```
/// use std::sync::Arc;
/// use lodt::{buffer::{AlignedBytes, ByteStorage}, format::TensorBuffers, DType};
/// use lodt::arrow::{tensor_buffers_to_arrow, ArrowOptions};
/// use arrow_array::cast::AsArray;
/// let mut bytes = Vec::new();
/// for o in [0u64, 1, 3] { bytes.extend_from_slice(&o.to_le_bytes()); }
/// bytes.extend_from_slice(&[7, 8, 9]);
/// let storage: Arc<dyn ByteStorage> = Arc::new(AlignedBytes::from_slice(&bytes));
/// let parts = TensorBuffers { storage: storage.clone(), dtype: DType::UInt8, shape: vec![3], lod: vec![0..24], body: 24..27 };
/// let (_, array) = tensor_buffers_to_arrow("x", &parts, &ArrowOptions::default())?;
/// let list = array.as_list::<i64>();
/// assert_eq!(list.value_offsets(), &[0, 1, 3]);
/// assert_eq!(list.value_offsets().as_ptr() as usize, storage.bytes().as_ptr() as usize);
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn tensor_buffers_to_arrow(
    name: &str,
    parts: &crate::format::TensorBuffers,
    options: &ArrowOptions,
) -> Result<(Field, ArrayRef)> {
    let tensor = parts.to_tensor().map_err(tensor_error(name))?;
    to_arrow(name, &tensor, options)
}

/// Converts an Arrow array (with the field describing it) into an owned LoD
/// tensor. See `spec/ARROW.md` for the mapping; in short, `List` and
/// `LargeList` levels become LoD levels, `FixedSizeList`s (or the
/// `arrow.fixed_shape_tensor` extension, whose shape wins) the element shape.
///
/// An `arrow.variable_shape_tensor` (or Ray variable-shaped tensor) column
/// whose rows vary only in their first dimension reads as its one tensor
/// (without the extension metadata a batch would keep); one that reads as
/// a pair is an [`ArrowError::InvalidArgument`](super::ArrowError::InvalidArgument) pointing to
/// [`record_batch_to_batch`](super::record_batch_to_batch).
///
/// Slices are rebased. When the selected values are one contiguous run of
/// non-boolean values (no null lists read as empty in between), the tensor
/// shares Arrow's values buffer ([`ArrowBytes`](super::ArrowBytes)) instead of copying it; the
/// LoD offsets are copied (rebased).
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, LargeListArray, types::Int32Type};
/// use arrow_schema::Field;
/// use lodt::arrow::{from_arrow, ArrowOptions};
/// let array: ArrayRef = Arc::new(LargeListArray::from_iter_primitive::<Int32Type, _, _>(
///     vec![Some(vec![Some(1), Some(2)]), Some(vec![]), Some(vec![Some(3)])]));
/// let field = Field::new("x", array.data_type().clone(), true);
/// let t = from_arrow(&field, &array, &ArrowOptions::default())?;
/// assert_eq!(t.lod().to_offsets(), [vec![0, 2, 2, 3]]);
/// assert_eq!(t.as_slice::<i32>()?, &[1, 2, 3]);
/// // A slice is rebased:
/// let t = from_arrow(&field, &array.slice(1, 2), &ArrowOptions::default())?;
/// assert_eq!((t.lod().to_offsets(), t.as_slice::<i32>()?), (vec![vec![0, 0, 1]], &[3][..]));
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn from_arrow(field: &Field, array: &dyn Array, options: &ArrowOptions) -> Result<LodTensor> {
    // A variable-shape tensor column (spec/ARROW.md, section 9), when it
    // reads as one tensor.
    if let Some(imported) = import(field, array, options)? {
        return imported.into_tensor(field.name());
    }
    lists_from_arrow(field, array, options)
}

/// [`from_arrow`] for an array without a field: the column is named `"array"`
/// and there is no field metadata (so no bfloat16, 0-D or extension marker).
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float32Array};
/// let array: ArrayRef = Arc::new(Float32Array::from(vec![1.0, 2.0]));
/// let t = lodt::arrow::from_arrow_array(&array, &Default::default())?;
/// assert_eq!((t.shape(), t.lod().num_levels()), (&[2][..], 0));
/// # Ok::<(), lodt::arrow::ArrowError>(())
/// ```
pub fn from_arrow_array(array: &dyn Array, options: &ArrowOptions) -> Result<LodTensor> {
    let field = Field::new("array", array.data_type().clone(), true);
    from_arrow(&field, array, options)
}
