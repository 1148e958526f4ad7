//! The pyarrow 26 fixtures in tests/data/arrow read back exactly: every
//! column's LoD, element shape, dtype and values, from Parquet and Arrow IPC.

#![cfg(feature = "parquet")]

use crate::common;

use lodt::arrow::ArrowOptions;
use lodt::arrow::ipc::IpcFileReader;
use lodt::arrow::parquet::ParquetReader;
use lodt::{Batch, DType, LodTensor};
use serde_json::Value;
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    common::data_dir("arrow")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(data_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn check_tensor(file: &str, column: &Value, tensor: &LodTensor) {
    let name = column["column"].as_str().unwrap();
    let ctx = format!("{file}: column {name}");
    let dtype: DType = column["dtype"].as_str().unwrap().parse().unwrap();
    assert_eq!(tensor.dtype(), dtype, "{ctx}");
    let lod: Vec<Vec<u64>> = serde_json::from_value(column["lod"].clone()).unwrap();
    assert_eq!(tensor.lod().to_offsets(), lod, "{ctx}");
    let element_shape: Vec<usize> =
        serde_json::from_value(column["element_shape"].clone()).unwrap();
    assert_eq!(tensor.element_shape(), &element_shape[..], "{ctx}");
    let values = column["values"].as_array().unwrap();
    assert_eq!(tensor.numel(), values.len(), "{ctx}");
    match dtype {
        DType::Int64 => {
            let want: Vec<i64> = values.iter().map(|v| v.as_i64().unwrap()).collect();
            assert_eq!(tensor.as_slice::<i64>().unwrap(), &want[..], "{ctx}");
        }
        DType::Float32 => {
            // pyarrow wrote each f32 widened to f64; narrowing gives it back.
            let want: Vec<f32> = values.iter().map(|v| v.as_f64().unwrap() as f32).collect();
            assert_eq!(tensor.as_slice::<f32>().unwrap(), &want[..], "{ctx}");
        }
        other => panic!("{ctx}: the fixtures hold no {other} column"),
    }
}

fn check_batch(file: &str, spec: &Value, batch: &Batch) {
    let columns = spec["columns"].as_array().unwrap();
    let names: Vec<&str> = columns
        .iter()
        .map(|c| c["column"].as_str().unwrap())
        .collect();
    assert_eq!(batch.names().collect::<Vec<_>>(), names, "{file}");
    for column in columns {
        let tensor = batch.get(column["column"].as_str().unwrap()).unwrap();
        check_tensor(file, column, tensor);
    }
}

#[test]
fn pyarrow_parquet_fixtures_read_back_exactly() {
    let expected = expected();
    let files = expected["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    for spec in files {
        let file = spec["parquet"].as_str().unwrap();
        let reader = ParquetReader::open(data_dir().join(file), &ArrowOptions::default()).unwrap();
        let batches: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
        assert_eq!(batches.len(), 1, "{file}: one row group");
        check_batch(file, spec, &batches[0]);
    }
}

#[test]
fn pyarrow_ipc_fixtures_read_back_exactly() {
    let expected = expected();
    for spec in expected["files"].as_array().unwrap() {
        let file = spec["arrow_ipc"].as_str().unwrap();
        let f = std::fs::File::open(data_dir().join(file)).unwrap();
        let reader = IpcFileReader::try_new(f, &ArrowOptions::default()).unwrap();
        let batches: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
        assert_eq!(batches.len(), 1, "{file}: one record batch");
        check_batch(file, spec, &batches[0]);
    }
}

#[test]
fn pyarrow_fixture_types_are_what_expected_json_says() {
    // The fixtures use List (i32 offsets), a FixedSizeList without the tensor
    // extension, and nullable fields: check lodt reads that variety.
    let expected = expected();
    let spec = &expected["files"][0];
    let f = std::fs::File::open(data_dir().join(spec["arrow_ipc"].as_str().unwrap())).unwrap();
    let reader = IpcFileReader::try_new(f, &ArrowOptions::default()).unwrap();
    let schema = reader.schema();
    for column in spec["columns"].as_array().unwrap() {
        let field = schema
            .field_with_name(column["column"].as_str().unwrap())
            .unwrap();
        let arrow_type = column["arrow_type"].as_str().unwrap();
        assert!(arrow_type.starts_with("list<"), "{arrow_type}");
        assert!(matches!(field.data_type(), arrow_schema::DataType::List(_)));
    }
}
