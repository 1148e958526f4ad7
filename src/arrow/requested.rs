//! Arrow output in a type the consumer asks for (the Arrow PyCapsule
//! interface's `requested_schema`; `spec/ARROW.md`, section 5): one of
//! lodt's own mappings when the requested type is one, else a cast that
//! arrow-rs can do, else an error that says what lodt can produce.

use super::{ArrowError, ArrowOptions, ListType, Result, TensorType};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_cast::{CastOptions, can_cast_types, cast_with_options};
use arrow_schema::{DataType, Field, Schema};

/// `options` adjusted to what `requested` asks for: its [`TensorType`]
/// ([`TensorType::requested_by`]) and, when its outermost type is a list,
/// that list's [`ListType`].
///
/// ```
/// use arrow_schema::{DataType, Field};
/// use lodt::arrow::{requested_options, ArrowOptions, ListType};
/// let item = Field::new("item", DataType::Int64, true);
/// let requested = Field::new("x", DataType::List(item.into()), true);
/// assert_eq!(requested_options(&requested, &ArrowOptions::default()).list_type, ListType::List);
/// ```
pub fn requested_options(requested: &Field, options: &ArrowOptions) -> ArrowOptions {
    let list_type = match requested.data_type() {
        DataType::List(_) => ListType::List,
        DataType::LargeList(_) => ListType::LargeList,
        _ => options.list_type,
    };
    options
        .with_tensor_type(TensorType::requested_by(requested))
        .with_list_type(list_type)
}

/// The column `requested` asks for, from `produce` (which converts the
/// tensor with the options it is given, e.g. [`to_arrow`](super::to_arrow)):
/// produced with [`requested_options`], then, when its type is not exactly
/// the requested one (field names, nullability, extension metadata, list
/// kinds or value types differ), cast with arrow-rs. The cast must be
/// lossless: a value the requested type does not hold exactly (an overflow,
/// to infinity too; a rounded float or integer, such as float64 `0.1` to
/// float32 or `2^53 + 1` to a float; a fraction to an integer; a number other
/// than 0 and 1 to bool) is an [`ArrowError::InvalidArgument`] naming the
/// column, the value and both types, never a changed value or a null. The
/// field returned is `requested`.
///
/// A cast must keep the tensor: the requested type nests lists and
/// fixed-size lists (of the same sizes) as the produced one does, over
/// values lodt reads (section 4 of `spec/ARROW.md`). Anything else (a struct,
/// a list of another depth, strings, which arrow-rs can cast lists to) is an
/// [`ArrowError::InvalidArgument`] naming the column, the requested type and
/// the type lodt produces.
///
/// ```
/// use arrow_array::cast::AsArray;
/// use arrow_schema::{DataType, Field};
/// use lodt::arrow::{to_arrow, to_requested, ArrowOptions};
/// use lodt::{Lod, LodTensor};
/// let t = LodTensor::from_vec(vec![1i32, 2, 3], vec![3], Lod::try_from_lengths(&[vec![2, 1]])?)?;
/// let item = Field::new("element", DataType::Int64, true);
/// let requested = Field::new("x", DataType::List(item.into()), true);
/// let (field, array) = to_requested(&requested, &ArrowOptions::default(), |o| to_arrow("x", &t, o))?;
/// assert_eq!(field, requested);
/// assert_eq!(array.as_list::<i32>().value_offsets(), &[0, 2, 3]);
/// let utf8 = Field::new("x", DataType::Utf8, true);
/// assert!(to_requested(&utf8, &ArrowOptions::default(), |o| to_arrow("x", &t, o)).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_requested(
    requested: &Field,
    options: &ArrowOptions,
    produce: impl Fn(&ArrowOptions) -> Result<(Field, ArrayRef)>,
) -> Result<(Field, ArrayRef)> {
    let asked = requested_options(requested, options);
    let (field, array) = produce(&asked)?;
    if asked.tensor_type != TensorType::FixedShape
        && !same_tensor_layout(array.data_type(), requested.data_type())
    {
        // pyarrow asks for an extension type's storage (`pa.array(x,
        // type=pa.fixed_shape_tensor(...))` requests a bare
        // `fixed_size_list<item>[prod(S)]`): lodt's fixed_shape mapping
        // has that layout.
        let fixed = asked.with_tensor_type(TensorType::FixedShape);
        if let Ok((f, a)) = produce(&fixed)
            && same_tensor_layout(a.data_type(), requested.data_type())
        {
            return cast_to_requested(requested, &f, a);
        }
    }
    cast_to_requested(requested, &field, array)
}

/// `array` (of `field`, as lodt produced it) as `requested` asks: itself
/// when the types are equal, else cast as [`to_requested`] casts (lossless
/// only, keeping the tensor's layout and element shape), for an export that
/// holds its array already.
///
/// ```
/// use arrow_schema::{DataType, Field};
/// use lodt::arrow::{cast_to_requested, to_arrow, ArrowOptions};
/// let t = lodt::LodTensor::from_vec(vec![1i32, 2], vec![2], Default::default())?;
/// let (field, array) = to_arrow("x", &t, &ArrowOptions::default())?;
/// let wide = Field::new("y", DataType::Int64, true);
/// let (f, a) = cast_to_requested(&wide, &field, array.clone())?;
/// assert_eq!((f.name().as_str(), a.data_type()), ("y", &DataType::Int64));
/// let narrow = Field::new("y", DataType::Boolean, true);
/// assert!(cast_to_requested(&narrow, &field, array).unwrap_err().to_string().contains("loses value 2"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cast_to_requested(
    requested: &Field,
    field: &Field,
    array: ArrayRef,
) -> Result<(Field, ArrayRef)> {
    let shapes_agree = same_element_shapes(field, requested);
    if field.data_type() == requested.data_type() && shapes_agree {
        return Ok((requested.clone(), array));
    }
    let refuse = |why: String| {
        ArrowError::InvalidArgument(format!(
            "column {:?}: cannot produce the requested Arrow type {}: lodt produces {} (tensor types {}){why}",
            field.name(),
            requested.data_type(),
            field.data_type(),
            TensorType::ALL.map(TensorType::name).join(", "),
        ))
    };
    if !shapes_agree {
        return Err(refuse(
            ": its arrow.fixed_shape_tensor element shape is not the tensor's".into(),
        ));
    }
    if !same_tensor_layout(array.data_type(), requested.data_type()) {
        return Err(refuse(
            ", and a cast to it would not keep the tensor's levels and element shape".into(),
        ));
    }
    if !can_cast_types(array.data_type(), requested.data_type()) {
        return Err(refuse(", and arrow-rs cannot cast it".into()));
    }
    // A value the cast cannot carry becomes a null here (never an error
    // without the value), and the check below names it.
    let nulls = CastOptions {
        safe: true,
        ..Default::default()
    };
    let cast = cast_with_options(&array, requested.data_type(), &nulls)
        .map_err(|e| refuse(format!(", and casting it failed: {e}")))?;
    if cast.data_type() != requested.data_type() {
        return Err(refuse(format!(", and a cast gives {}", cast.data_type())));
    }
    check_lossless(field.name(), &array, &cast)?;
    Ok((requested.clone(), cast))
}

/// Checks that `cast` (of `array`) holds every value of `array` exactly: cast
/// back, each leaf value is the one it was (NaN for NaN). The first value
/// that is not (an overflow to infinity or to a null, a rounded float or
/// integer, a float that became a bool) is an error naming the column, the
/// value and both types.
fn check_lossless(column: &str, array: &ArrayRef, cast: &ArrayRef) -> Result<()> {
    let from = leaf_of(array);
    let to = leaf_of(cast);
    let lossy = |i: usize| {
        let show = |a: &ArrayRef| {
            if a.is_null(i) {
                return "null".to_owned();
            }
            ArrayFormatter::try_new(a.as_ref(), &FormatOptions::default())
                .map(|f| f.value(i).to_string())
                .unwrap_or_else(|_| "?".into())
        };
        ArrowError::InvalidArgument(format!(
            "column {column:?}: casting {} to the requested {} loses value {} (element {i} would be {}): \
             lodt casts only values the requested type holds exactly",
            from.data_type(),
            to.data_type(),
            show(&from),
            show(&to),
        ))
    };
    if from.len() != to.len() {
        return Err(lossy(from.len().min(to.len())));
    }
    if to.null_count() > from.null_count()
        && let Some(i) = (0..to.len()).find(|&i| to.is_null(i) && !from.is_null(i))
    {
        return Err(lossy(i));
    }
    let back = cast_with_options(
        &to,
        from.data_type(),
        &CastOptions {
            safe: true,
            ..Default::default()
        },
    )
    .map_err(|e| {
        ArrowError::InvalidArgument(format!(
            "column {column:?}: casting {} to the requested {} cannot be checked: {e}",
            from.data_type(),
            to.data_type()
        ))
    })?;
    match first_difference(from.as_ref(), back.as_ref()) {
        Some(i) => Err(lossy(i)),
        None => Ok(()),
    }
}

/// The leaf values of nested `List`/`LargeList`/`FixedSizeList` arrays.
fn leaf_of(array: &ArrayRef) -> ArrayRef {
    let mut a = array.clone();
    loop {
        let next = match a.data_type() {
            DataType::List(_) => a.as_list::<i32>().values().clone(),
            DataType::LargeList(_) => a.as_list::<i64>().values().clone(),
            DataType::FixedSizeList(..) => a.as_fixed_size_list().values().clone(),
            _ => return a,
        };
        a = next;
    }
}

/// The first index at which `a` and `b` (of one type) differ: another value,
/// a null on one side only (NaN equals NaN).
fn first_difference(a: &dyn Array, b: &dyn Array) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    let nulls = (0..a.len()).find(|&i| a.is_null(i) != b.is_null(i));
    macro_rules! compare {
        ($($t:ty),*) => {$(
            if let (Some(x), Some(y)) = (a.as_primitive_opt::<$t>(), b.as_primitive_opt::<$t>()) {
                let values = x
                    .values()
                    .iter()
                    .zip(y.values().iter())
                    .enumerate()
                    .position(|(i, (p, q))| !a.is_null(i) && !same(*p, *q));
                return [nulls, values].into_iter().flatten().min();
            }
        )*};
    }
    compare!(
        Int8Type,
        Int16Type,
        Int32Type,
        Int64Type,
        UInt8Type,
        UInt16Type,
        UInt32Type,
        UInt64Type,
        Float16Type,
        Float32Type,
        Float64Type
    );
    if let (Some(x), Some(y)) = (a.as_boolean_opt(), b.as_boolean_opt()) {
        let values = (0..x.len()).position(|i| !a.is_null(i) && x.value(i) != y.value(i));
        return [nulls, values].into_iter().flatten().min();
    }
    // Another leaf type: compared as Arrow data.
    (a.to_data() != b.to_data()).then_some(nulls.unwrap_or(0))
}

/// Whether two values are the same (NaN is NaN; `-0.0` is `0.0`).
fn same<T: PartialEq + Copy + NotANumber>(a: T, b: T) -> bool {
    a == b || (a.nan() && b.nan())
}

/// Whether a value is a NaN (never, for integers).
trait NotANumber {
    fn nan(&self) -> bool;
}

macro_rules! never_nan {
    ($($t:ty),*) => {$(
        impl NotANumber for $t {
            fn nan(&self) -> bool {
                false
            }
        }
    )*};
}
never_nan!(i8, i16, i32, i64, u8, u16, u32, u64);

impl NotANumber for f32 {
    fn nan(&self) -> bool {
        f32::is_nan(*self)
    }
}

impl NotANumber for f64 {
    fn nan(&self) -> bool {
        f64::is_nan(*self)
    }
}

impl NotANumber for half::f16 {
    fn nan(&self) -> bool {
        half::f16::is_nan(*self)
    }
}

/// Whether every `arrow.fixed_shape_tensor` field of `requested` (at any
/// depth) has the element shape of `produced`'s field at that depth (equal
/// `FixedSizeList` sizes are not enough: `[4, 2]` is not `[2, 4]`).
fn same_element_shapes(produced: &Field, requested: &Field) -> bool {
    let shape = |f: &Field| -> Option<serde_json::Value> {
        let meta = f
            .metadata()
            .get(arrow_schema::extension::EXTENSION_TYPE_METADATA_KEY)?;
        serde_json::from_str::<serde_json::Value>(meta)
            .ok()?
            .get("shape")
            .cloned()
    };
    let is_fixed = |f: &Field| {
        f.metadata()
            .get(arrow_schema::extension::EXTENSION_TYPE_NAME_KEY)
            .is_some_and(|n| n == super::FIXED_SHAPE_TENSOR)
    };
    if is_fixed(requested) && (!is_fixed(produced) || shape(produced) != shape(requested)) {
        return false;
    }
    match (produced.data_type(), requested.data_type()) {
        (
            DataType::List(a) | DataType::LargeList(a) | DataType::FixedSizeList(a, _),
            DataType::List(b) | DataType::LargeList(b) | DataType::FixedSizeList(b, _),
        ) => same_element_shapes(a, b),
        _ => true,
    }
}

/// Whether `to` nests `List`/`LargeList` levels and `FixedSizeList`s of the
/// same sizes as `from`, over a leaf lodt reads: a cast keeps the tensor.
fn same_tensor_layout(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (
            DataType::List(a) | DataType::LargeList(a),
            DataType::List(b) | DataType::LargeList(b),
        ) => same_tensor_layout(a.data_type(), b.data_type()),
        (DataType::FixedSizeList(a, n), DataType::FixedSizeList(b, m)) => {
            n == m && same_tensor_layout(a.data_type(), b.data_type())
        }
        (DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..), _)
        | (_, DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)) => false,
        (_, leaf) => super::tensor::dtype_of(leaf, false).is_some(),
    }
}

/// Checks that a requested schema names the columns `names`, in order (a
/// requested schema changes types, not columns).
///
/// ```
/// use arrow_schema::{DataType, Field, Schema};
/// let schema = Schema::new(vec![Field::new("a", DataType::Int64, true)]);
/// assert!(lodt::arrow::check_requested_columns(&schema, ["a"]).is_ok());
/// let err = lodt::arrow::check_requested_columns(&schema, ["b"]).unwrap_err();
/// assert!(err.to_string().contains(r#"columns ["a"]"#), "{err}");
/// ```
pub fn check_requested_columns<'a>(
    requested: &Schema,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let names: Vec<&str> = names.into_iter().collect();
    let wanted: Vec<&str> = requested
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    if names != wanted {
        return Err(ArrowError::InvalidArgument(format!(
            "the requested schema has columns {wanted:?}: expected lodt's columns {names:?}, in order"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow::{FIXED_SHAPE_TENSOR, from_arrow, to_arrow};
    use crate::{Lod, LodTensor};
    use arrow_array::types::Float64Type;

    fn frames() -> LodTensor {
        let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
        LodTensor::from_vec((0..24).map(|i| i as f32).collect(), vec![3, 2, 4], lod).unwrap()
    }

    fn produce(t: &LodTensor, requested: &Field) -> Result<(Field, ArrayRef)> {
        to_requested(requested, &ArrowOptions::default(), |o| to_arrow("f", t, o))
    }

    fn field_of(t: &LodTensor, tensor_type: TensorType) -> Field {
        let options = ArrowOptions::default().with_tensor_type(tensor_type);
        to_arrow("f", t, &options).unwrap().0
    }

    #[test]
    fn each_mapping_is_produced_when_requested_and_reads_back() {
        let t = frames();
        for tensor_type in TensorType::ALL {
            let requested = field_of(&t, tensor_type);
            let (field, array) = produce(&t, &requested).unwrap();
            assert_eq!(field, requested);
            assert_eq!(array.data_type(), requested.data_type());
            assert_eq!(from_arrow(&field, &array, &Default::default()).unwrap(), t);
        }
        let fixed = field_of(&t, TensorType::FixedShape);
        let DataType::LargeList(item) = fixed.data_type() else {
            panic!("{fixed:?}")
        };
        assert_eq!(item.extension_type_name(), Some(FIXED_SHAPE_TENSOR));
    }

    #[test]
    fn other_names_lists_and_value_types_are_cast() {
        let t = frames();
        // list<element: fixed_size_list<fixed_size_list<double, 4>, 2>>
        let leaf = Field::new("v", DataType::Float64, true);
        let inner = Field::new("r", DataType::FixedSizeList(leaf.into(), 4), true);
        let outer = Field::new("element", DataType::FixedSizeList(inner.into(), 2), true);
        let requested = Field::new("f", DataType::List(outer.into()), true);
        let (field, array) = produce(&t, &requested).unwrap();
        assert_eq!(field, requested);
        assert_eq!(array.as_list::<i32>().value_offsets(), &[0, 2, 3]);
        let values = array
            .as_list::<i32>()
            .values()
            .as_fixed_size_list()
            .values()
            .clone();
        let values = values
            .as_fixed_size_list()
            .values()
            .as_primitive::<Float64Type>()
            .clone();
        assert_eq!(
            values.values().to_vec(),
            (0..24).map(f64::from).collect::<Vec<_>>()
        );
        let back = from_arrow(&field, &array, &Default::default()).unwrap();
        assert_eq!(back.shape(), &[3, 2, 4]);
        // Other field names only: a cast that shares the values.
        let leaf = Field::new("v", DataType::Float32, true);
        let inner = Field::new("r", DataType::FixedSizeList(leaf.into(), 4), true);
        let outer = Field::new("element", DataType::FixedSizeList(inner.into(), 2), true);
        let requested = Field::new("f", DataType::LargeList(outer.into()), true);
        let (_, array) = produce(&t, &requested).unwrap();
        let values = array
            .as_list::<i64>()
            .values()
            .as_fixed_size_list()
            .values()
            .clone();
        let values = values.as_fixed_size_list().values().to_data();
        let pointer = values.buffers()[0].as_ptr();
        assert_eq!(pointer, t.as_bytes().as_ptr());
    }

    #[test]
    fn an_unreachable_type_or_an_overflowing_cast_is_an_error() {
        let t = frames();
        let requested = Field::new("f", DataType::Utf8, true);
        let err = produce(&t, &requested).unwrap_err().to_string();
        assert!(
            err.contains("cannot produce the requested Arrow type Utf8"),
            "{err}"
        );
        assert!(err.contains("nested_lists, fixed_shape"), "{err}");
        // A depth the tensor does not have.
        let flat = Field::new("f", DataType::Float32, true);
        assert!(produce(&t, &flat).is_err());
        // Values that do not fit are an error, not nulls.
        let big = LodTensor::from_vec(vec![300i32], vec![1], Lod::empty()).unwrap();
        let int8 = Field::new("f", DataType::Int8, true);
        let err = to_requested(&int8, &ArrowOptions::default(), |o| to_arrow("f", &big, o))
            .unwrap_err()
            .to_string();
        assert!(err.contains("loses value 300"), "{err}");
    }

    #[test]
    fn requested_columns_must_be_lodts_in_order() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int8, true),
            Field::new("b", DataType::Int8, true),
        ]);
        assert!(check_requested_columns(&schema, ["a", "b"]).is_ok());
        assert!(check_requested_columns(&schema, ["b", "a"]).is_err());
        assert!(check_requested_columns(&schema, ["a"]).is_err());
    }
}
