//! Tests of `variable_shape.rs`: arrow-rs's `VariableShapeTensor`, Ray's storage,
//! the readers, `.lodt` round trips and pyarrow reading lodt's output.

use super::*;
use crate::arrow::{from_arrow, record_batch_to_batch, to_arrow};
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
    // A slice: its own rows only, and the form they decide (one row of
    // shape [1, 2]: one tensor).
    let sliced = record_batch(field.clone(), array.slice(1, 1));
    let batch = record_batch_to_batch(&sliced, &opts()).unwrap();
    let img = batch.get("img").unwrap();
    assert_eq!(img.shape(), &[1, 2]);
    assert_eq!(img.as_slice::<f32>().unwrap(), &[6., 7.]);
    assert_eq!(batch.len(), 1);
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
            message:
                "row 1 has dimension 1 = 2, the arrow.variable_shape_tensor uniform_shape says 3"
                    .into()
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
            StructArray::try_new(fields, vec![storage.column(0).clone(), shape], nulls).unwrap(),
        );
        let field = Field::new("x", array.data_type().clone(), true)
            .with_metadata(Metadata::new().with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR));
        record_batch(field, array)
    };
    let err = record_batch_to_batch(&with(bad_shape, None), &opts()).unwrap_err();
    assert!(
        err.to_string()
            .contains("row 1 has shape [2, 2], its data holds 2 values"),
        "{err}"
    );
    let nulls = Some(vec![true, false].into());
    let err = record_batch_to_batch(&with(storage.column(1).clone(), nulls), &opts()).unwrap_err();
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
    // No rows and a huge ndim: refused (more dimensions than a tensor has),
    // nothing allocated by it.
    let err = record_batch_to_batch(&ray(&[], "1000000000000"), &opts()).unwrap_err();
    assert!(err.to_string().contains("a tensor has at most 64"), "{err}");
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
        let schema = Schema::new_with_metadata(vec![field], Metadata::new().with("split", "train"));
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
    let options = opts().with_tensor_type(crate::arrow::TensorType::VariableShape);
    let record_batches = [crate::arrow::batch_to_record_batch(&batch, &options).unwrap()];
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
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(&mut bytes, &rb.schema()).unwrap();
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
/// Needs `LODT_PYTHON` (a python with pyarrow), as `tests/it/arrow/arrow_pyarrow.rs`.
#[test]
fn pyarrow_reads_the_columns_written_as_the_extension() {
    let Ok(python) = std::env::var("LODT_PYTHON") else {
        eprintln!("SKIPPED: pyarrow not available (set LODT_PYTHON)");
        return;
    };
    let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
    let clips = LodTensor::from_vec((0..9).map(|v| v as f32).collect(), vec![3, 3], lod).unwrap();
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
        let mut writer = ::parquet::arrow::ArrowWriter::try_new(file, rb.schema(), None).unwrap();
        writer.write(&rb).unwrap();
        writer.close().unwrap();
        let reader = crate::arrow::parquet::ParquetReader::open(&path, &opts()).unwrap();
        let batches: Vec<Batch> = reader.collect::<Result<_>>().unwrap();
        assert_eq!(batches, [expected]);
    }
}

#[test]
fn the_variable_shape_tensor_type_selects_the_extension_for_every_export() {
    use crate::arrow::{
        ArrowWriteOptions, TensorType, batch_to_record_batch, batch_to_requested_record_batch,
        ipc::{IpcFileReader, IpcFileWriter},
    };
    let clips = LodTensor::from_vec(
        (0..12).map(|v| v as f32).collect(),
        vec![4, 3],
        Lod::try_from_lengths(&[vec![3, 1]]).unwrap(),
    )
    .unwrap();
    let words = LodTensor::from_vec(
        (0..6i64).collect(),
        vec![6],
        Lod::try_from_lengths(&[vec![1, 2], vec![2, 3, 1]]).unwrap(),
    )
    .unwrap();
    let labels = LodTensor::from_vec(vec![7i64, 8], vec![2], Lod::empty()).unwrap();
    let batch = Batch::try_from_tensors([
        ("clips", clips.clone()),
        ("words", words),
        ("labels", labels),
    ])
    .unwrap();
    let variable = opts().with_tensor_type(TensorType::VariableShape);
    // A batch: the 1-level tensor is the extension (arrow-rs accepts it),
    // the 2-level one a list column, the plain one primitive.
    let rb = batch_to_record_batch(&batch, &variable).unwrap();
    let schema = rb.schema();
    assert_eq!(kind(schema.field(0)), Some(Kind::Canonical));
    let extension = schema
        .field(0)
        .try_extension_type::<VariableShapeTensor>()
        .unwrap();
    assert_eq!(extension.value_type(), &DataType::Float32);
    let shapes = rb
        .column(0)
        .as_struct()
        .column(1)
        .as_fixed_size_list()
        .values()
        .clone();
    assert_eq!(shapes.as_primitive::<Int32Type>().values(), &[3, 3, 1, 3]);
    assert!(matches!(
        schema.field(1).data_type(),
        DataType::LargeList(_)
    ));
    assert_eq!(schema.field(2).data_type(), &DataType::Int64);
    assert_eq!(record_batch_to_batch(&rb, &opts()).unwrap(), batch);
    // One tensor.
    let (field, _) = to_arrow("clips", &clips, &variable).unwrap();
    assert_eq!(kind(&field), Some(Kind::Canonical));
    // A consumer that requests the extension gets it from the default options.
    let requested = batch_to_requested_record_batch(&batch, &opts(), &schema).unwrap();
    assert_eq!(requested.schema(), schema);
    // The IPC writer, then its reader: the same batch.
    let mut writer = IpcFileWriter::new(
        Vec::new(),
        &ArrowWriteOptions {
            arrow: variable,
            ..Default::default()
        },
    );
    writer.write(&batch).unwrap();
    let bytes = writer.finish().unwrap();
    let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &opts()).unwrap();
    assert_eq!(reader.collect::<Result<Vec<_>>>().unwrap(), [batch]);
}

#[test]
fn more_dimensions_than_a_tensor_may_have_are_refused_on_import() {
    // 64 dimensions (the format's bound) read; 65 and 1000 are refused
    // before anything is sized by them (1000 once overflowed the stack of a
    // Parquet export, and 100..999 wrote Parquet nobody reads back).
    let mut two = [1; 64];
    two[0] = 2;
    let (array, _) = canonical(&[&[1; 64], &two]);
    let field = Field::new("x", array.data_type().clone(), false)
        .with_metadata(Metadata::new().with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR));
    let batch = record_batch_to_batch(&record_batch(field, array), &opts()).unwrap();
    assert_eq!(batch.get("x").unwrap().shape().len(), 64);
    for ndim in [65usize, 100, 999, 1000] {
        let one = vec![1i32; ndim];
        let (array, _) = canonical(&[&one, &one]);
        let field = Field::new("x", array.data_type().clone(), false)
            .with_metadata(Metadata::new().with(EXTENSION_TYPE_NAME_KEY, VARIABLE_SHAPE_TENSOR));
        let err = record_batch_to_batch(&record_batch(field, array), &opts())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("{ndim} dimensions; a tensor has at most 64")),
            "{err}"
        );
        let one = vec![1i64; ndim];
        let err = record_batch_to_batch(&ray(&[&one], &ndim.to_string()), &opts())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("{ndim} dimensions; a tensor has at most 64")),
            "{err}"
        );
    }
    // Ray's ndim is metadata: a huge one is refused before any row is read.
    let err = record_batch_to_batch(&ray(&[&[1, 1]], "1000000000000"), &opts()).unwrap_err();
    assert!(err.to_string().contains("a tensor has at most 64"), "{err}");
}
