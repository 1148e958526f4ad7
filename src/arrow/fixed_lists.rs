//! Fixed-size lists read from Parquet without trusting their size.
//!
//! Parquet stores a `FixedSizeList` as a plain list; only the Arrow schema
//! embedded in the file (`ARROW:schema`) gives its size. parquet's
//! fixed-size list reader fills every null slot with `size` null values, so
//! a file claiming a size of 2^30 over a few null slots made it allocate
//! tens of gigabytes (found by the `parquet_reader` fuzz target). lodt
//! therefore has parquet decode such a column as a `LargeList` (its memory
//! in proportion to the levels and values in the file), then checks that
//! every slot holds exactly `size` values and none is null (a LoD tensor has
//! no nulls), and rebuilds the `FixedSizeList` over the same values without
//! copying them.

use super::{Error, Result};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, GenericListArray, LargeListArray, OffsetSizeTrait,
    StructArray,
};
use arrow_schema::{DataType, Field, FieldRef, Schema};
use std::sync::Arc;

/// `schema` with every `FixedSizeList` (at any depth) read as a `LargeList`
/// of the same child; `None` when it has none.
pub(crate) fn decode_schema(schema: &Schema) -> Option<Schema> {
    if !schema.fields().iter().any(|f| has_fixed(f.data_type())) {
        return None;
    }
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|f| {
            Arc::new(
                f.as_ref()
                    .clone()
                    .with_data_type(decode_type(f.data_type())),
            )
        })
        .collect();
    Some(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Whether `data_type` holds a `FixedSizeList` at any depth.
fn has_fixed(data_type: &DataType) -> bool {
    match data_type {
        DataType::FixedSizeList(..) => true,
        DataType::List(child) | DataType::LargeList(child) => has_fixed(child.data_type()),
        DataType::Struct(children) => children.iter().any(|c| has_fixed(c.data_type())),
        _ => false,
    }
}

fn decode_type(data_type: &DataType) -> DataType {
    let child = |f: &FieldRef| {
        Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(decode_type(f.data_type())),
        )
    };
    match data_type {
        DataType::FixedSizeList(f, _) | DataType::LargeList(f) => DataType::LargeList(child(f)),
        DataType::List(f) => DataType::List(child(f)),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(child).collect()),
        other => other.clone(),
    }
}

/// `array`, decoded with [`decode_schema`]'s type, as `target` (the file's
/// type). Errors name `column`: a null slot is an [`Error::NullValue`], a
/// slot of the wrong length an [`Error::InvalidArgument`] (which the reader
/// reports as an [`Error::Decode`] of its row group).
pub(crate) fn restore(column: &str, array: &ArrayRef, target: &DataType) -> Result<ArrayRef> {
    if !has_fixed(target) {
        return Ok(array.clone());
    }
    restore_in(column, array, target, 1)
}

/// [`restore`], for an array whose `per_row` slots make one tensor row.
fn restore_in(
    column: &str,
    array: &ArrayRef,
    target: &DataType,
    per_row: usize,
) -> Result<ArrayRef> {
    let mismatch = || {
        Error::InvalidArgument(format!(
            "column {column:?}: decoded as {}, expected the list type of {target}",
            array.data_type()
        ))
    };
    match target {
        DataType::FixedSizeList(field, size) => {
            let list: &LargeListArray = array.as_any().downcast_ref().ok_or_else(mismatch)?;
            let width = usize::try_from(*size).map_err(|_| {
                Error::InvalidArgument(format!("column {column:?}: FixedSizeList size {size}"))
            })?;
            if let Some(nulls) = list.nulls().filter(|n| n.null_count() > 0)
                && let Some(slot) = (0..list.len()).find(|&i| nulls.is_null(i))
            {
                return Err(Error::NullValue {
                    column: column.to_owned(),
                    row: slot / per_row,
                });
            }
            let offsets = list.value_offsets();
            if let Some(slot) = offsets
                .windows(2)
                .position(|w| usize::try_from(w[1] - w[0]).ok() != Some(width))
            {
                return Err(Error::InvalidArgument(format!(
                    "column {column:?}: a fixed-size list of tensor row {} holds {} values, not the {width} of its type {target}",
                    slot / per_row,
                    offsets[slot + 1] - offsets[slot]
                )));
            }
            // Offsets within the values: checked by `validate_full`, which
            // every decoded array passes first; checked again here.
            let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
            let (Ok(start), Ok(end)) = (usize::try_from(first), usize::try_from(last)) else {
                return Err(mismatch());
            };
            if end > list.values().len() {
                return Err(mismatch());
            }
            let values = list.values().slice(start, end - start);
            let child = restore_in(
                column,
                &values,
                field.data_type(),
                per_row.saturating_mul(width.max(1)),
            )?;
            Ok(Arc::new(
                // With its length: that of a list of size 0 is not in its values.
                FixedSizeListArray::try_new_with_length(
                    field.clone(),
                    *size,
                    child,
                    None,
                    list.len(),
                )
                .map_err(|e| Error::InvalidArgument(format!("column {column:?}: {e}")))?,
            ))
        }
        DataType::LargeList(field) => {
            restore_list::<i64>(column, array, field).ok_or_else(mismatch)?
        }
        DataType::List(field) => restore_list::<i32>(column, array, field).ok_or_else(mismatch)?,
        // A variable-shape tensor column: its children restored, one entry per row.
        DataType::Struct(fields) => {
            let strukt: &StructArray = array.as_any().downcast_ref().ok_or_else(mismatch)?;
            let children = strukt
                .columns()
                .iter()
                .zip(fields.iter())
                .map(|(child, field)| restore_in(column, child, field.data_type(), per_row))
                .collect::<Result<Vec<_>>>()?;
            Ok(Arc::new(
                StructArray::try_new_with_length(
                    fields.clone(),
                    children,
                    strukt.nulls().cloned(),
                    strukt.len(),
                )
                .map_err(|e| Error::InvalidArgument(format!("column {column:?}: {e}")))?,
            ))
        }
        _ => Ok(array.clone()),
    }
}

/// A list of `field`s, its child restored (`None`: `array` is not such a list).
fn restore_list<O: OffsetSizeTrait>(
    column: &str,
    array: &ArrayRef,
    field: &FieldRef,
) -> Option<Result<ArrayRef>> {
    let list: &GenericListArray<O> = array.as_any().downcast_ref()?;
    Some(
        restore_in(column, list.values(), field.data_type(), 1).and_then(|child| {
            let offsets = list.offsets().clone();
            GenericListArray::<O>::try_new(field.clone(), offsets, child, list.nulls().cloned())
                .map(|l| Arc::new(l) as ArrayRef)
                .map_err(|e| Error::InvalidArgument(format!("column {column:?}: {e}")))
        }),
    )
}

/// The field `field` with `data_type` (the decoded batch's field, restored).
pub(crate) fn with_type(field: &FieldRef, data_type: &DataType) -> Field {
    field.as_ref().clone().with_data_type(data_type.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int8Array;
    use arrow_buffer::OffsetBuffer;

    fn large(offsets: Vec<i64>, values: Vec<i8>) -> ArrayRef {
        let item = Arc::new(Field::new("item", DataType::Int8, false));
        Arc::new(
            LargeListArray::try_new(
                item,
                OffsetBuffer::new(offsets.into()),
                Arc::new(Int8Array::from(values)),
                None,
            )
            .unwrap(),
        )
    }

    #[test]
    fn only_fixed_size_lists_are_decoded_as_large_lists() {
        let item = Arc::new(Field::new("item", DataType::Int8, false));
        let fixed = DataType::FixedSizeList(item.clone(), 3);
        let schema = Schema::new(vec![
            Field::new(
                "a",
                DataType::List(Arc::new(Field::new("item", fixed, true))),
                true,
            ),
            Field::new("b", DataType::List(item.clone()), true),
        ]);
        let decoded = decode_schema(&schema).unwrap();
        assert_eq!(
            decoded.field(0).data_type(),
            &DataType::List(Arc::new(Field::new(
                "item",
                DataType::LargeList(item.clone()),
                true
            )))
        );
        assert_eq!(decoded.field(1), schema.field(1));
        let plain = Schema::new(vec![schema.field(1).clone()]);
        assert!(decode_schema(&plain).is_none());
    }

    #[test]
    fn uniform_lists_become_fixed_size_lists_over_the_same_values() {
        let item = Arc::new(Field::new("item", DataType::Int8, false));
        let target = DataType::FixedSizeList(item, 2);
        let decoded = large(vec![1, 3, 5], vec![9, 1, 2, 3, 4]);
        let restored = restore("x", &decoded, &target).unwrap();
        let fixed = restored
            .as_any()
            .downcast_ref::<FixedSizeListArray>()
            .unwrap();
        assert_eq!(fixed.len(), 2);
        let values = fixed.values().as_any().downcast_ref::<Int8Array>().unwrap();
        assert_eq!(values.values().as_ref(), &[1, 2, 3, 4]);
    }

    #[test]
    fn a_slot_of_another_length_or_a_null_slot_is_refused() {
        let item = Arc::new(Field::new("item", DataType::Int8, false));
        let target = DataType::FixedSizeList(item.clone(), 2);
        let e = restore("x", &large(vec![0, 2, 5], vec![1, 2, 3, 4, 5]), &target).unwrap_err();
        assert!(
            e.to_string()
                .contains("tensor row 1 holds 3 values, not the 2"),
            "{e}"
        );
        // Nested: [2, 2] per row; the second row's second inner slot is short.
        let inner = Arc::new(Field::new("item", target.clone(), false));
        let outer = DataType::FixedSizeList(inner, 2);
        let nested: ArrayRef = Arc::new(
            LargeListArray::try_new(
                Arc::new(Field::new("item", DataType::LargeList(item.clone()), false)),
                OffsetBuffer::new(vec![0i64, 2, 4].into()),
                large(vec![0, 2, 4, 6, 7], vec![1, 2, 3, 4, 5, 6, 7]),
                None,
            )
            .unwrap(),
        );
        let e = restore("x", &nested, &outer).unwrap_err();
        assert!(e.to_string().contains("tensor row 1 holds 1 values"), "{e}");
        let null: ArrayRef = Arc::new(
            LargeListArray::try_new(
                item,
                OffsetBuffer::new(vec![0i64, 2, 2].into()),
                Arc::new(Int8Array::from(vec![1, 2])),
                Some(vec![true, false].into()),
            )
            .unwrap(),
        );
        let e = restore("x", &null, &target).unwrap_err();
        assert!(matches!(e, Error::NullValue { row: 1, .. }), "{e}");
    }
}
