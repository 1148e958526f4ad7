//! Edge cases of the Arrow bridge: sliced arrays, nulls, unsupported types,
//! extension metadata, batches whose tensors or schemas do not fit.
#![cfg(feature = "parquet")]

use arrow_array::builder::{Int32Builder, MapBuilder, StringBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, DictionaryArray, FixedSizeListArray, Float32Array, Int32Array, LargeListArray,
    ListArray, ListViewArray, StringArray, StructArray, UInt16Array,
};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields};
use lodt::arrow::ipc::{IpcFileReader, IpcFileWriter, IpcStreamWriter};
use lodt::arrow::parquet::{ParquetReader, ParquetWriter};
use lodt::arrow::{
    ArrowError, ArrowOptions, ArrowWriteOptions, DTYPE_KEY, FIXED_SHAPE_TENSOR, ListType,
    MetadataPolicy, NullLists, SCALAR_KEY, TensorType, batch_to_record_batch, from_arrow,
    record_batch_to_batch, to_arrow,
};
use lodt::{Batch, DType, Lod, LodTensor};
use std::sync::Arc;

fn read(array: &ArrayRef) -> Result<LodTensor, ArrowError> {
    read_with(array, &ArrowOptions::default())
}

fn read_with(array: &ArrayRef, options: &ArrowOptions) -> Result<LodTensor, ArrowError> {
    let field = Field::new("col", array.data_type().clone(), true);
    from_arrow(&field, array, options)
}

fn int_lists(rows: Vec<Option<Vec<Option<i32>>>>) -> ArrayRef {
    Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(rows))
}

// --- slices --------------------------------------------------------------

#[test]
fn sliced_list_arrays_are_rebased() {
    let list = int_lists(vec![
        Some(vec![Some(1), Some(2)]),
        Some(vec![Some(3)]),
        Some(vec![]),
        Some(vec![Some(4), Some(5), Some(6)]),
    ]);
    let t = read(&list.slice(1, 3)).unwrap();
    assert_eq!(t.lod().to_offsets(), [vec![0, 1, 1, 4]]);
    assert_eq!(t.as_slice::<i32>().unwrap(), &[3, 4, 5, 6]);
    assert_eq!(t.shape(), &[4]);
}

#[test]
fn offsets_that_do_not_start_at_zero_are_rebased() {
    let values: ArrayRef = Arc::new(Int32Array::from((0..10).collect::<Vec<_>>()));
    let offsets = OffsetBuffer::new(ScalarBuffer::from(vec![2i64, 4, 7]));
    let field = Arc::new(Field::new("item", DataType::Int32, false));
    let list: ArrayRef = Arc::new(LargeListArray::try_new(field, offsets, values, None).unwrap());
    let t = read(&list).unwrap();
    assert_eq!(t.lod().to_offsets(), [vec![0, 2, 5]]);
    assert_eq!(t.as_slice::<i32>().unwrap(), &[2, 3, 4, 5, 6]);
}

#[test]
fn sliced_nested_lists_are_rebased_at_every_level() {
    // [[[0,1],[2]], [[3],[],[4,5]], [[6]]] sliced to its last two rows.
    let inner = int_lists(vec![
        Some(vec![Some(0), Some(1)]),
        Some(vec![Some(2)]),
        Some(vec![Some(3)]),
        Some(vec![]),
        Some(vec![Some(4), Some(5)]),
        Some(vec![Some(6)]),
    ]);
    let field = Arc::new(Field::new("item", inner.data_type().clone(), true));
    let outer: ArrayRef = Arc::new(
        ListArray::try_new(
            field,
            OffsetBuffer::new(ScalarBuffer::from(vec![0i32, 2, 5, 6])),
            inner,
            None,
        )
        .unwrap(),
    );
    let t = read(&outer.slice(1, 2)).unwrap();
    assert_eq!(t.lod().to_offsets(), [vec![0, 3, 4], vec![0, 1, 1, 3, 4]]);
    assert_eq!(t.as_slice::<i32>().unwrap(), &[3, 4, 5, 6]);
}

#[test]
fn sliced_primitive_and_fixed_size_arrays_are_rebased() {
    let flat: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5]));
    let t = read(&flat.slice(3, 2)).unwrap();
    assert_eq!(
        (t.shape(), t.as_slice::<i32>().unwrap()),
        (&[2][..], &[4, 5][..])
    );
    assert_eq!(t.lod().num_levels(), 0);

    let values = Arc::new(Float32Array::from(
        (0..8).map(|i| i as f32).collect::<Vec<_>>(),
    ));
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let fsl: ArrayRef = Arc::new(FixedSizeListArray::try_new(item, 2, values, None).unwrap());
    let t = read(&fsl.slice(1, 2)).unwrap();
    assert_eq!(t.shape(), &[2, 2]);
    assert_eq!(t.as_slice::<f32>().unwrap(), &[2.0, 3.0, 4.0, 5.0]);
}

// --- nulls -----------------------------------------------------------------

#[test]
fn a_null_list_is_an_error_naming_column_level_and_row() {
    let list = int_lists(vec![Some(vec![Some(1)]), Some(vec![]), None]);
    let err = read(&list).unwrap_err();
    assert!(
        matches!(&err, ArrowError::NullList { column, level: 0, index: 2 } if column == "col"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("\"col\"") && message.contains("index 2"),
        "{message}"
    );
}

#[test]
fn null_lists_can_be_read_as_empty_sequences() {
    let list = int_lists(vec![
        Some(vec![Some(1)]),
        None,
        Some(vec![Some(2), Some(3)]),
    ]);
    let options = ArrowOptions::default().with_null_lists(NullLists::Empty);
    let t = read_with(&list, &options).unwrap();
    assert_eq!(t.lod().to_offsets(), [vec![0, 1, 1, 3]]);
    assert_eq!(t.as_slice::<i32>().unwrap(), &[1, 2, 3]);
}

#[test]
fn a_null_list_over_a_non_empty_range_drops_that_range() {
    // Arrow lets a null slot cover values; read as empty, they are skipped.
    let values: ArrayRef = Arc::new(Int32Array::from(vec![10, 11, 12, 13, 14, 15]));
    let field = Arc::new(Field::new("item", DataType::Int32, false));
    let list: ArrayRef = Arc::new(
        ListArray::try_new(
            field,
            OffsetBuffer::new(ScalarBuffer::from(vec![0i32, 2, 5, 6])),
            values,
            Some(NullBuffer::from(vec![true, false, true])),
        )
        .unwrap(),
    );
    assert!(matches!(
        read(&list),
        Err(ArrowError::NullList { index: 1, .. })
    ));
    let options = ArrowOptions::default().with_null_lists(NullLists::Empty);
    let t = read_with(&list, &options).unwrap();
    assert_eq!(t.lod().to_offsets(), [vec![0, 2, 2, 3]]);
    assert_eq!(t.as_slice::<i32>().unwrap(), &[10, 11, 15]);
}

#[test]
fn a_null_inner_list_names_its_level() {
    let inner = int_lists(vec![Some(vec![Some(1)]), None, Some(vec![Some(2)])]);
    let field = Arc::new(Field::new("item", inner.data_type().clone(), true));
    let outer: ArrayRef = Arc::new(
        ListArray::try_new(
            field,
            OffsetBuffer::new(ScalarBuffer::from(vec![0i32, 1, 3])),
            inner,
            None,
        )
        .unwrap(),
    );
    assert!(matches!(
        read(&outer),
        Err(ArrowError::NullList {
            level: 1,
            index: 1,
            ..
        })
    ));
    let options = ArrowOptions::default().with_null_lists(NullLists::Empty);
    let t = read_with(&outer, &options).unwrap();
    assert_eq!(t.lod().to_offsets(), [vec![0, 1, 3], vec![0, 1, 1, 2]]);
}

#[test]
fn a_null_value_is_an_error_naming_its_row() {
    let list = int_lists(vec![
        Some(vec![Some(1), Some(2)]),
        Some(vec![Some(3), None]),
    ]);
    for options in [
        ArrowOptions::default(),
        ArrowOptions::default().with_null_lists(NullLists::Empty),
    ] {
        let err = read_with(&list, &options).unwrap_err();
        assert!(
            matches!(&err, ArrowError::NullValue { row: 3, .. }),
            "{err:?}"
        );
    }
    // A null fixed-size list (one tensor row) is a null value too.
    let values = Arc::new(Float32Array::from(vec![0.0; 6]));
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let nulls = Some(NullBuffer::from(vec![true, true, false]));
    let fsl: ArrayRef = Arc::new(FixedSizeListArray::try_new(item, 2, values, nulls).unwrap());
    assert!(matches!(
        read(&fsl),
        Err(ArrowError::NullValue { row: 2, .. })
    ));
}

// --- unsupported types --------------------------------------------------------

fn assert_unsupported(array: ArrayRef, type_name: &str) {
    let err = read(&array).unwrap_err();
    match &err {
        ArrowError::Unsupported { column, data_type } => {
            assert_eq!(column, "col");
            assert!(
                data_type.contains(type_name),
                "{data_type} should name {type_name}"
            );
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(err.to_string().contains("unsupported Arrow type"), "{err}");
}

#[test]
fn unsupported_types_are_clear_errors() {
    assert_unsupported(Arc::new(StringArray::from(vec!["a", "b"])), "Utf8");
    let list_of_strings = ListArray::try_new(
        Arc::new(Field::new("item", DataType::Utf8, true)),
        OffsetBuffer::new(ScalarBuffer::from(vec![0i32, 1])),
        Arc::new(StringArray::from(vec!["x"])),
        None,
    )
    .unwrap();
    assert_unsupported(Arc::new(list_of_strings), "Utf8");
    let dict: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
    assert_unsupported(Arc::new(dict), "Dictionary");
    let strukt = StructArray::try_new(
        Fields::from(vec![Field::new("a", DataType::Int32, false)]),
        vec![Arc::new(Int32Array::from(vec![1]))],
        None,
    )
    .unwrap();
    assert_unsupported(Arc::new(strukt), "Struct");
    let view = ListViewArray::try_new(
        Arc::new(Field::new("item", DataType::Int32, true)),
        ScalarBuffer::from(vec![0i32]),
        ScalarBuffer::from(vec![1i32]),
        Arc::new(Int32Array::from(vec![1])),
        None,
    )
    .unwrap();
    assert_unsupported(Arc::new(view), "ListView");
    let mut map = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
    map.keys().append_value("k");
    map.values().append_value(1);
    map.append(true).unwrap();
    assert_unsupported(Arc::new(map.finish()), "Map");
}

// --- element shapes and field metadata ---------------------------------------

fn tensor_field(name: &str, array: &ArrayRef, shape: &str) -> Field {
    let mut field = Field::new(name, array.data_type().clone(), false);
    let metadata = [
        (
            "ARROW:extension:name".to_string(),
            FIXED_SHAPE_TENSOR.to_string(),
        ),
        ("ARROW:extension:metadata".to_string(), shape.to_string()),
    ];
    field.set_metadata(metadata.into_iter().collect::<arrow_schema::Metadata>());
    field
}

#[test]
fn the_tensor_extension_shape_wins_over_the_storage_size() {
    let values = Arc::new(Float32Array::from(
        (0..12).map(|i| i as f32).collect::<Vec<_>>(),
    ));
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let fsl: ArrayRef = Arc::new(FixedSizeListArray::try_new(item, 6, values, None).unwrap());
    let options = ArrowOptions::default();
    let t = from_arrow(
        &tensor_field("t", &fsl, r#"{"shape":[2,3]}"#),
        &fsl,
        &options,
    )
    .unwrap();
    assert_eq!(t.shape(), &[2, 2, 3]);
    // Optional keys of the canonical metadata are accepted.
    let with_names = r#"{"shape":[3,2],"dim_names":["H","W"],"permutation":[0,1]}"#;
    let t = from_arrow(&tensor_field("t", &fsl, with_names), &fsl, &options).unwrap();
    assert_eq!(t.shape(), &[2, 3, 2]);
    // Without the extension, the FixedSizeList size is the element shape.
    assert_eq!(read(&fsl).unwrap().shape(), &[2, 6]);
    // A shape that does not hold the storage, or bad metadata, is an error.
    for bad in [
        r#"{"shape":[4]}"#,
        "not json",
        r#"{"shape":[4294967296,4294967296,4294967296]}"#,
    ] {
        let err = from_arrow(&tensor_field("t", &fsl, bad), &fsl, &options).unwrap_err();
        assert!(matches!(err, ArrowError::Metadata { .. }), "{bad}: {err:?}");
    }
    let flat: ArrayRef = Arc::new(Float32Array::from(vec![1.0]));
    let err = from_arrow(
        &tensor_field("t", &flat, r#"{"shape":[1]}"#),
        &flat,
        &options,
    );
    assert!(matches!(err, Err(ArrowError::Metadata { .. })));
}

#[test]
fn nested_fixed_size_lists_make_a_multi_dimensional_element_shape() {
    let values = Arc::new(Int32Array::from((0..12).collect::<Vec<_>>()));
    let inner_item = Arc::new(Field::new("item", DataType::Int32, true));
    let inner: ArrayRef =
        Arc::new(FixedSizeListArray::try_new(inner_item, 3, values, None).unwrap());
    let outer_item = Arc::new(Field::new("item", inner.data_type().clone(), true));
    let outer: ArrayRef =
        Arc::new(FixedSizeListArray::try_new(outer_item, 2, inner, None).unwrap());
    let t = read(&outer).unwrap();
    assert_eq!(t.shape(), &[2, 2, 3]);
    assert_eq!(
        t.as_slice::<i32>().unwrap(),
        &(0..12).collect::<Vec<_>>()[..]
    );
}

#[test]
fn written_tensor_extension_metadata_is_canonical() {
    let lod = Lod::try_from_lengths(&[vec![1, 1]]).unwrap();
    let t = LodTensor::from_vec(vec![0f32; 12], vec![2, 2, 3], lod).unwrap();
    // The extension is written on request (the default is nested lists).
    let options = ArrowOptions::default().with_tensor_type(TensorType::FixedShape);
    let (field, _) = to_arrow("t", &t, &options).unwrap();
    let DataType::LargeList(item) = field.data_type() else {
        panic!("{field:?}")
    };
    assert_eq!(item.extension_type_name(), Some(FIXED_SHAPE_TENSOR));
    assert_eq!(item.extension_type_metadata(), Some(r#"{"shape":[2,3]}"#));
    let DataType::FixedSizeList(value, 6) = item.data_type() else {
        panic!("{item:?}")
    };
    // Nullable, as Arrow C++ / pyarrow define the extension's storage.
    assert!(value.is_nullable());
    assert!(!item.is_nullable() && !field.is_nullable());
}

#[test]
fn bfloat16_and_zero_d_tensors_are_marked_on_the_column_field() {
    let bf =
        LodTensor::from_vec(vec![half::bf16::from_f32(1.5); 2], vec![2], Lod::empty()).unwrap();
    let (field, array) = to_arrow("b", &bf, &ArrowOptions::default()).unwrap();
    assert_eq!(
        field.metadata().get(DTYPE_KEY).map(String::as_str),
        Some("bfloat16")
    );
    assert_eq!(array.data_type(), &DataType::UInt16);
    assert_eq!(
        from_arrow(&field, &array, &ArrowOptions::default()).unwrap(),
        bf
    );
    // Without the marker it reads as uint16.
    assert_eq!(read(&array).unwrap().dtype(), DType::UInt16);
    // The marker on anything but UInt16 values is an error.
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![1]));
    let mut bad = Field::new("i", DataType::Int32, false);
    bad.set_metadata([(DTYPE_KEY, "bfloat16")]);
    assert!(matches!(
        from_arrow(&bad, &ints, &ArrowOptions::default()),
        Err(ArrowError::Metadata { .. })
    ));

    let scalar = LodTensor::from_vec(vec![7i64], vec![], Lod::empty()).unwrap();
    let (field, array) = to_arrow("s", &scalar, &ArrowOptions::default()).unwrap();
    assert_eq!(array.len(), 1);
    assert_eq!(
        field.metadata().get(SCALAR_KEY).map(String::as_str),
        Some("true")
    );
    let back = from_arrow(&field, &array, &ArrowOptions::default()).unwrap();
    assert_eq!(
        (back.shape(), back.as_slice::<i64>().unwrap()),
        (&[][..], &[7][..])
    );
    let two: ArrayRef = Arc::new(UInt16Array::from(vec![1, 2]));
    let mut scalar_field = Field::new("s", DataType::UInt16, false);
    scalar_field.set_metadata([(SCALAR_KEY, "true")]);
    assert!(matches!(
        from_arrow(&scalar_field, &two, &ArrowOptions::default()),
        Err(ArrowError::Metadata { .. })
    ));
}

#[test]
fn list_type_option_chooses_list_or_large_list() {
    let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 0, 2]]).unwrap();
    let t = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], lod).unwrap();
    let options = ArrowOptions::default().with_list_type(ListType::List);
    let (field, array) = to_arrow("t", &t, &options).unwrap();
    assert_eq!(
        field.data_type().to_string(),
        "List(non-null List(non-null UInt8))"
    );
    assert_eq!(
        array
            .as_any()
            .downcast_ref::<ListArray>()
            .unwrap()
            .value_offsets(),
        &[0, 2, 3]
    );
    assert_eq!(from_arrow(&field, &array, &options).unwrap(), t);
}

#[test]
fn empty_list_columns_read_as_zero_sequences_and_mismatched_fields_are_errors() {
    // A list column with no rows is a LoD level of zero sequences (LOD.md
    // §3.1): a tensor with no rows, as slicing an empty range gives.
    let empty = int_lists(vec![]);
    let t = read(&empty).unwrap();
    assert_eq!(t.lod().to_offsets(), [vec![0u64]]);
    assert_eq!(t.rows(), 0);
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![1]));
    let field = Field::new("x", DataType::Int64, false);
    assert!(matches!(
        from_arrow(&field, &ints, &ArrowOptions::default()),
        Err(ArrowError::InvalidArgument(_))
    ));
}

// --- batches ------------------------------------------------------------------

fn words_and_labels(label_rows: usize) -> Batch {
    let lod = Lod::try_from_lengths(&[vec![2, 1, 3]]).unwrap();
    let words = LodTensor::from_vec((0..6i64).collect(), vec![6], lod).unwrap();
    let labels =
        LodTensor::from_vec(vec![1i32; label_rows], vec![label_rows], Lod::empty()).unwrap();
    Batch::try_from_tensors([("words", words), ("labels", labels)]).unwrap()
}

#[test]
fn a_batch_needs_equal_top_level_rows() {
    let rb = batch_to_record_batch(&words_and_labels(3), &ArrowOptions::default()).unwrap();
    assert_eq!(rb.num_rows(), 3);
    let back = record_batch_to_batch(&rb, &ArrowOptions::default()).unwrap();
    assert_eq!(back, words_and_labels(3));
    let err = batch_to_record_batch(&words_and_labels(6), &ArrowOptions::default()).unwrap_err();
    match &err {
        ArrowError::RowCount {
            first_column,
            expected,
            column,
            found,
        } => {
            assert_eq!(
                (first_column.as_str(), *expected, column.as_str(), *found),
                ("words", 3, "labels", 6)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("\"labels\" has 6"), "{err}");
    // An empty batch is a RecordBatch with no column and no row.
    let rb = batch_to_record_batch(&Batch::new(), &ArrowOptions::default()).unwrap();
    assert_eq!((rb.num_rows(), rb.num_columns()), (0, 0));
}

#[test]
fn files_reject_batches_with_another_schema_or_metadata() {
    let mut a = words_and_labels(3);
    a.metadata_mut().insert("split".into(), "train".into());
    let mut b = a.clone();
    b.metadata_mut().insert("split".into(), "test".into());
    let lod = Lod::try_from_lengths(&[vec![1]]).unwrap();
    let other = Batch::try_from_tensors([(
        "words",
        LodTensor::from_vec(vec![1.0f32], vec![1], lod).unwrap(),
    )])
    .unwrap();

    let mut writer = IpcStreamWriter::new(Vec::new(), &ArrowWriteOptions::default());
    writer.write(&a).unwrap();
    let err = writer.write(&other).unwrap_err();
    assert!(
        matches!(err, ArrowError::SchemaMismatch { batch: 1, .. }),
        "{err:?}"
    );
    let err = writer.write(&b).unwrap_err();
    assert!(
        matches!(&err, ArrowError::MetadataMismatch { batch: 1, key } if key == "split"),
        "{err:?}"
    );

    let keep_first = ArrowWriteOptions::default().with_metadata_policy(MetadataPolicy::KeepFirst);
    let mut writer = IpcFileWriter::new(Vec::new(), &keep_first);
    writer.write(&a).unwrap();
    writer.write(&b).unwrap();
    let bytes = writer.finish().unwrap();
    let back: Vec<Batch> =
        IpcFileReader::try_new(std::io::Cursor::new(bytes), &ArrowOptions::default())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(back, vec![a.clone(), a]);
}

#[test]
fn metadata_reaches_schema_and_file_level_metadata() {
    let mut batch = words_and_labels(3);
    batch.metadata_mut().insert("split".into(), "train".into());
    let file = tempfile::tempfile().unwrap();
    let mut writer =
        ParquetWriter::try_new(file.try_clone().unwrap(), &ArrowWriteOptions::default()).unwrap();
    writer.write(&batch).unwrap();
    writer.finish().unwrap();
    let meta = parquet::file::reader::FileReader::metadata(
        &parquet::file::serialized_reader::SerializedFileReader::new(file.try_clone().unwrap())
            .unwrap(),
    )
    .file_metadata()
    .key_value_metadata()
    .cloned()
    .unwrap();
    assert!(
        meta.iter()
            .any(|kv| kv.key == "split" && kv.value.as_deref() == Some("train"))
    );
    assert!(meta.iter().any(|kv| kv.key == "ARROW:schema"));
    let reader = ParquetReader::try_new(file, &ArrowOptions::default()).unwrap();
    assert_eq!(reader.schema().metadata()["split"], "train");
    let back: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(back, vec![batch.clone()]);

    let mut writer = IpcFileWriter::new(Vec::new(), &ArrowWriteOptions::default());
    writer.write(&batch).unwrap();
    let bytes = writer.finish().unwrap();
    let reader = arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
    assert_eq!(reader.custom_metadata()["split"], "train");
    assert_eq!(reader.schema().metadata()["split"], "train");
}

#[test]
fn parquet_row_groups_per_batch_or_per_n_rows() {
    let batches: Vec<Batch> = (0..3).map(|_| words_and_labels(3)).collect();
    let file = tempfile::tempfile().unwrap();
    let options = ArrowWriteOptions::default().with_row_group_rows(4);
    let mut writer = ParquetWriter::try_new(file.try_clone().unwrap(), &options).unwrap();
    for b in &batches {
        writer.write(b).unwrap();
    }
    assert_eq!(writer.stats().rows, 9);
    writer.finish().unwrap();
    let reader = ParquetReader::try_new(file, &ArrowOptions::default()).unwrap();
    assert_eq!(reader.num_row_groups(), 3);
    let back: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
    let expected: Vec<Batch> =
        lodt::rebatch::rebatch(batches.into_iter().map(Ok::<_, lodt::Error>), 4)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(
        back.iter()
            .map(|b| b.get("labels").unwrap().rows())
            .collect::<Vec<_>>(),
        vec![4, 4, 1]
    );
    assert_eq!(back, expected);
}

#[test]
fn writers_with_no_batch_write_readable_empty_files() {
    let bytes = IpcFileWriter::new(Vec::new(), &ArrowWriteOptions::default())
        .finish()
        .unwrap();
    let reader =
        IpcFileReader::try_new(std::io::Cursor::new(bytes), &ArrowOptions::default()).unwrap();
    assert_eq!(reader.count(), 0);
    let file = tempfile::tempfile().unwrap();
    ParquetWriter::try_new(file.try_clone().unwrap(), &ArrowWriteOptions::default())
        .unwrap()
        .finish()
        .unwrap();
    let reader = ParquetReader::try_new(file, &ArrowOptions::default()).unwrap();
    assert_eq!(reader.count(), 0);
}

#[test]
fn garbage_files_are_errors_not_panics() {
    let garbage = b"ARROW1\0\0not really an arrow file at all".to_vec();
    assert!(
        IpcFileReader::try_new(std::io::Cursor::new(garbage), &ArrowOptions::default()).is_err()
    );
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, b"PAR1 garbage PAR1").unwrap();
    assert!(ParquetReader::try_new(file, &ArrowOptions::default()).is_err());
}

#[test]
fn zero_sized_element_shapes_round_trip() {
    let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
    let t = LodTensor::from_vec(Vec::<f32>::new(), vec![3, 2, 0], lod).unwrap();
    let (field, array) = to_arrow("z", &t, &ArrowOptions::default()).unwrap();
    assert_eq!(
        from_arrow(&field, &array, &ArrowOptions::default()).unwrap(),
        t
    );
    let batch = Batch::try_from_tensors([("z", t)]).unwrap();
    let file = tempfile::tempfile().unwrap();
    let mut writer =
        ParquetWriter::try_new(file.try_clone().unwrap(), &ArrowWriteOptions::default()).unwrap();
    writer.write(&batch).unwrap();
    writer.finish().unwrap();
    let back: Vec<Batch> = ParquetReader::try_new(file, &ArrowOptions::default())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(back, vec![batch]);
}

#[test]
fn an_ipc_footer_pointing_outside_the_file_is_an_error_not_a_panic() {
    let mut writer = IpcFileWriter::new(Vec::new(), &ArrowWriteOptions::default());
    writer.write(&words_and_labels(3)).unwrap();
    let good = writer.finish().unwrap();
    // Find the record batch block (offset i64, metadata length i32, padding,
    // body length i64) in the footer and corrupt its body length.
    let footer_len =
        u32::from_le_bytes(good[good.len() - 10..good.len() - 6].try_into().unwrap()) as usize;
    let footer_start = good.len() - 10 - footer_len;
    let blocks = {
        let footer = arrow_ipc::root_as_footer(&good[footer_start..good.len() - 10]).unwrap();
        let b = footer.recordBatches().unwrap().get(0);
        (b.offset(), b.metaDataLength(), b.bodyLength())
    };
    let mut pattern = Vec::new();
    pattern.extend_from_slice(&blocks.0.to_le_bytes());
    pattern.extend_from_slice(&blocks.1.to_le_bytes());
    pattern.extend_from_slice(&[0; 4]);
    pattern.extend_from_slice(&blocks.2.to_le_bytes());
    let at = footer_start
        + good[footer_start..]
            .windows(pattern.len())
            .position(|w| w == pattern)
            .unwrap();
    for body in [-1i64, 1 << 40] {
        let mut bad = good.clone();
        bad[at + 16..at + 24].copy_from_slice(&body.to_le_bytes());
        let err = IpcFileReader::try_new(std::io::Cursor::new(bad), &ArrowOptions::default())
            .err()
            .unwrap();
        assert!(
            matches!(&err, ArrowError::Decode { section, .. } if section == "IPC footer"),
            "{err:?}"
        );
        assert!(err.to_string().contains("outside"), "{err}");
    }
    for cut in [0, 5, good.len() - 12] {
        let err = IpcFileReader::try_new(
            std::io::Cursor::new(good[..cut].to_vec()),
            &ArrowOptions::default(),
        );
        assert!(err.is_err());
    }
}

#[test]
fn fixed_shape_tensors_of_more_than_64_dimensions_are_refused() {
    let options = ArrowOptions::default();
    let values = Arc::new(Float32Array::from(vec![1.0f32, 2.0]));
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let fsl: ArrayRef = Arc::new(FixedSizeListArray::try_new(item, 1, values, None).unwrap());
    // The rows' dimension and 63 of the shape: 64, the most a tensor has.
    let shape = |n: usize| format!("{{\"shape\":{:?}}}", vec![1; n]);
    let t = from_arrow(&tensor_field("t", &fsl, &shape(63)), &fsl, &options).unwrap();
    assert_eq!(t.shape().len(), 64);
    for n in [64, 65, 999, 1000] {
        let err = from_arrow(&tensor_field("t", &fsl, &shape(n)), &fsl, &options)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a tensor has at most 64 dimensions"), "{err}");
    }
    // Nested FixedSizeLists without the extension: the same bound.
    let nest = |depth: usize| {
        let mut array: ArrayRef = Arc::new(Float32Array::from(vec![1.0f32, 2.0]));
        for _ in 0..depth {
            let item = Arc::new(Field::new("item", array.data_type().clone(), true));
            array = Arc::new(FixedSizeListArray::try_new(item, 1, array, None).unwrap());
        }
        array
    };
    let ok = nest(63);
    let field = Field::new("t", ok.data_type().clone(), true);
    assert_eq!(from_arrow(&field, &ok, &options).unwrap().shape().len(), 64);
    let deep = nest(64);
    let field = Field::new("t", deep.data_type().clone(), true);
    let err = from_arrow(&field, &deep, &options).unwrap_err().to_string();
    assert!(err.contains("a tensor has at most 64 dimensions"), "{err}");
}

#[test]
fn writers_refuse_columns_nested_deeper_than_readers_read_back() {
    // A tensor of 64 dimensions (what `.lodt` allows) wrote Parquet whose
    // schema nests 128 groups: neither lodt nor pyarrow read it back. Each
    // element dimension is one nested FixedSizeList, so the writers bound
    // the lists a column nests (48: pyarrow reads 49 back from Parquet).
    let write = |dims: usize, tensor_type: TensorType| {
        let t = LodTensor::from_vec(
            vec![1.5f32, 2.5],
            [vec![2], vec![1; dims]].concat(),
            Lod::empty(),
        )
        .unwrap();
        let batch = Batch::try_from_tensors([("t", t)]).unwrap();
        let mut options = ArrowWriteOptions::default();
        options.arrow.tensor_type = tensor_type;
        let file = tempfile::tempfile().unwrap();
        lodt::arrow::parquet::write_parquet(file, [Ok::<_, lodt::Error>(batch)], &options)
            .map(|(file, _)| file)
    };
    let file = write(48, TensorType::NestedLists).unwrap();
    let back: Vec<Batch> = ParquetReader::try_new(file, &Default::default())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(back[0].get("t").unwrap().shape().len(), 49);
    for dims in [49, 50, 63] {
        let err = write(dims, TensorType::NestedLists).unwrap_err();
        assert!(
            matches!(err, ArrowError::TooDeep { depth, limit: 48, .. } if depth == dims),
            "{err}"
        );
        // One FixedSizeList with the tensor extension nests nothing more.
        let file = write(dims, TensorType::FixedShape).unwrap();
        let back: Vec<Batch> = ParquetReader::try_new(file, &Default::default())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back[0].get("t").unwrap().shape().len(), dims + 1);
    }
}
