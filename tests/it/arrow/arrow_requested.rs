//! `requested_schema` (`lodt::arrow::to_requested`): the requests pyarrow
//! makes for `pa.fixed_shape_tensor` columns (a schema pyarrow wrote,
//! `tests/data/arrow/requested/`, made by its `make.py`) are produced, and
//! every cast that would change a value is an error naming the column, the
//! value and the types, never a silently different value.
#![cfg(feature = "arrow")]

use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, Field, Schema};
use lodt::arrow::{ArrowOptions, from_arrow, to_arrow, to_requested};
use lodt::{Lod, LodTensor};
use std::path::Path;

fn pyarrow_schema() -> Schema {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/arrow/requested/requested_schemas.arrow");
    let file = std::fs::File::open(path).unwrap();
    let reader = arrow_ipc::reader::FileReader::try_new(file, None).unwrap();
    reader.schema().as_ref().clone()
}

fn produce(t: &LodTensor, requested: &Field) -> lodt::arrow::Result<(Field, ArrayRef)> {
    to_requested(requested, &ArrowOptions::default(), |o| {
        to_arrow(requested.name(), t, o)
    })
}

/// 3 elements of shape [2, 4] of float32, with or without one LoD level.
fn frames(lod: bool) -> LodTensor {
    let lod = if lod {
        Lod::try_from_lengths(&[vec![2, 1]]).unwrap()
    } else {
        Lod::empty()
    };
    LodTensor::from_vec(
        (0..24).map(|i| i as f32 * 0.5).collect(),
        vec![3, 2, 4],
        lod,
    )
    .unwrap()
}

#[test]
fn pyarrow_fixed_shape_tensor_requests_of_the_right_shape_are_produced() {
    let schema = pyarrow_schema();
    for (name, lod) in [
        ("plain", false),
        ("large", true),
        ("list", true),
        ("float64", true),
    ] {
        let requested = schema.field_with_name(name).unwrap();
        let t = frames(lod);
        let (field, array) = produce(&t, requested).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&field, requested, "{name}");
        assert_eq!(array.data_type(), requested.data_type(), "{name}");
        let back = from_arrow(&field, &array, &Default::default()).unwrap();
        assert_eq!(back.shape(), t.shape(), "{name}");
        assert_eq!(back.lod(), t.lod(), "{name}");
        if name != "float64" {
            assert_eq!(back, t, "{name}");
        }
    }
    // What `pa.array(x, type=pa.fixed_shape_tensor(...))` passes: the bare
    // storage, `fixed_size_list<item: float>[8]` (pyarrow adds the extension
    // back): produced as the fixed_shape mapping's storage.
    let requested = schema.field_with_name("storage").unwrap();
    assert!(requested.metadata().is_empty());
    let t = frames(false);
    let (field, array) = produce(&t, requested).unwrap();
    assert_eq!(&field, requested);
    let back = from_arrow(&field, &array, &Default::default()).unwrap();
    assert_eq!(back.shape(), &[3, 8]);
    assert_eq!(
        back.as_slice::<f32>().unwrap(),
        t.as_slice::<f32>().unwrap()
    );
    // Another element shape is refused, saying why.
    let requested = schema.field_with_name("other_shape").unwrap();
    let err = produce(&frames(true), requested).unwrap_err().to_string();
    assert!(
        err.contains("cannot produce the requested Arrow type"),
        "{err}"
    );
}

fn leaf(field: &str, dtype: DataType) -> Field {
    Field::new(field, dtype, true)
}

/// Whether casting `t` to `to` succeeds; its error otherwise.
fn cast(t: &LodTensor, to: DataType) -> Result<ArrayRef, String> {
    produce(t, &leaf("x", to))
        .map(|(_, a)| a)
        .map_err(|e| e.to_string())
}

#[test]
fn a_lossy_cast_is_an_error_naming_the_column_value_and_types() {
    use half::f16;
    let mut lossy = 0;
    let mut exact = 0;
    let f32s = |v: Vec<f32>| LodTensor::from_vec(v.clone(), vec![v.len()], Lod::empty()).unwrap();
    let f64s = |v: Vec<f64>| LodTensor::from_vec(v.clone(), vec![v.len()], Lod::empty()).unwrap();
    let i64s = |v: Vec<i64>| LodTensor::from_vec(v.clone(), vec![v.len()], Lod::empty()).unwrap();
    let i32s = |v: Vec<i32>| LodTensor::from_vec(v.clone(), vec![v.len()], Lod::empty()).unwrap();
    let u8s = |v: Vec<u8>| LodTensor::from_vec(v.clone(), vec![v.len()], Lod::empty()).unwrap();
    let cases: Vec<(LodTensor, DataType, Option<&str>)> = vec![
        // float32 -> float16: overflow to inf, and rounding.
        (
            f32s(vec![1.0, 65504.0, 1e5]),
            DataType::Float16,
            Some("100000"),
        ),
        (f32s(vec![1.0, -7e4]), DataType::Float16, Some("-70000")),
        (f32s(vec![0.1]), DataType::Float16, Some("0.1")),
        (
            f32s(vec![1.0, 0.5, -2.0, 65504.0, f32::INFINITY, f32::NAN]),
            DataType::Float16,
            None,
        ),
        // floats -> bool: only 0 and 1 are kept.
        (f64s(vec![0.0, 1.0, 0.5]), DataType::Boolean, Some("0.5")),
        (f32s(vec![2.0]), DataType::Boolean, Some("2")),
        (f64s(vec![-1.0]), DataType::Boolean, Some("-1")),
        (f64s(vec![0.0, 1.0, 1.0]), DataType::Boolean, None),
        // int64 -> float32 / float64: integers the float cannot hold.
        (
            i64s(vec![1, (1 << 53) + 1]),
            DataType::Float32,
            Some("9007199254740993"),
        ),
        (
            i64s(vec![(1 << 24) + 1]),
            DataType::Float32,
            Some("16777217"),
        ),
        (
            i64s(vec![(1 << 53) + 1]),
            DataType::Float64,
            Some("9007199254740993"),
        ),
        (
            i64s(vec![1 << 24, -(1 << 24), 1 << 40]),
            DataType::Float32,
            None,
        ),
        (i64s(vec![1 << 53, -(1 << 53)]), DataType::Float64, None),
        (i32s(vec![16_777_217]), DataType::Float32, Some("16777217")),
        // float64 -> float32: rounding and overflow.
        (f64s(vec![0.1]), DataType::Float32, Some("0.1")),
        (f64s(vec![1e300]), DataType::Float32, Some("1e300")),
        (
            f64s(vec![0.5, 0.25, 3.0, 1e30_f32 as f64]),
            DataType::Float32,
            None,
        ),
        // floats -> integers: fractions and overflow.
        (f64s(vec![1.5]), DataType::Int32, Some("1.5")),
        (f32s(vec![3e9]), DataType::Int32, Some("3000000000")),
        (f64s(vec![-1.0]), DataType::UInt8, Some("-1")),
        (f64s(vec![f64::NAN]), DataType::Int64, Some("NaN")),
        (f64s(vec![1.0, -3.0, 1e15]), DataType::Int64, None),
        // integers -> narrower integers (overflow was already an error).
        (i64s(vec![300]), DataType::Int8, Some("300")),
        (i64s(vec![-1]), DataType::UInt64, Some("-1")),
        (i32s(vec![70_000]), DataType::Int16, Some("70000")),
        (i64s(vec![-128, 127]), DataType::Int8, None),
        (u8s(vec![255]), DataType::Int8, Some("255")),
        (u8s(vec![0, 127]), DataType::Int8, None),
        // integers -> bool: only 0 and 1.
        (i32s(vec![0, 2]), DataType::Boolean, Some("2")),
        (u8s(vec![0, 1]), DataType::Boolean, None),
        // float16 -> float32 and back are exact.
        (
            LodTensor::from_vec(vec![f16::from_f32(1.5), f16::MAX], vec![2], Lod::empty()).unwrap(),
            DataType::Float32,
            None,
        ),
        // widening casts are exact.
        (i32s(vec![i32::MIN, i32::MAX]), DataType::Int64, None),
        (f32s(vec![0.1, f32::MAX]), DataType::Float64, None),
    ];
    for (t, to, bad) in &cases {
        let from = t.dtype();
        match (cast(t, to.clone()), bad) {
            (Err(e), Some(value)) => {
                assert!(e.contains("column \"x\""), "{e}");
                assert!(e.contains(&format!("value {value}")), "{from} -> {to}: {e}");
                assert!(e.contains("loses") && e.contains(&to.to_string()), "{e}");
                lossy += 1;
            }
            (Ok(array), None) => {
                // And the values read back as they were.
                let back = from_arrow(&leaf("x", to.clone()), &array, &Default::default()).unwrap();
                assert_eq!(back.shape(), t.shape());
                exact += 1;
            }
            (got, want) => panic!("{from} -> {to}: {got:?}, expected a loss at {want:?}"),
        }
    }
    assert_eq!((lossy, exact), (21, 12));
}
