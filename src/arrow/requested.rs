//! Arrow output in a type the consumer asks for (the Arrow PyCapsule
//! interface's `requested_schema`; `spec/ARROW.md`, section 5): one of
//! lodt's own mappings when the requested type is one, else a cast that
//! arrow-rs can do, else an error that says what lodt can produce.

use super::{ArrowError, ArrowOptions, ListType, Result, TensorType};
use arrow_array::ArrayRef;
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
/// kinds or value types differ), cast with arrow-rs (overflowing values are
/// an error, never nulls). The field returned is `requested`.
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
    produce: impl FnOnce(&ArrowOptions) -> Result<(Field, ArrayRef)>,
) -> Result<(Field, ArrayRef)> {
    let (field, array) = produce(&requested_options(requested, options))?;
    if field.data_type() == requested.data_type() {
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
    if !same_tensor_layout(array.data_type(), requested.data_type()) {
        return Err(refuse(
            ", and a cast to it would not keep the tensor's levels and element shape".into(),
        ));
    }
    if !can_cast_types(array.data_type(), requested.data_type()) {
        return Err(refuse(", and arrow-rs cannot cast it".into()));
    }
    let safe = CastOptions {
        safe: false,
        ..Default::default()
    };
    let cast = cast_with_options(&array, requested.data_type(), &safe)
        .map_err(|e| refuse(format!(", and casting it failed: {e}")))?;
    if cast.data_type() != requested.data_type() {
        return Err(refuse(format!(", and a cast gives {}", cast.data_type())));
    }
    Ok((requested.clone(), cast))
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
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
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
        assert!(err.contains("casting it failed"), "{err}");
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
