//! Files written by PaddlePaddle 2.6.2 (tests/data/paddle, with expected.json)
//! read exactly and write back byte-identical; the golden vector of the spec.

use crate::common;

use half::f16;
use lodt::paddle::{self, PaddleReader};
use lodt::{DType, Lod, LodTensor};
use serde_json::Value;
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    common::data_dir("paddle")
}

fn expected_text() -> String {
    std::fs::read_to_string(data_dir().join("expected.json")).unwrap()
}

fn expected() -> Value {
    serde_json::from_str(&expected_text()).unwrap()
}

/// The literal text of each tensor's `values`, in file order. serde_json's
/// default float parser is not correctly rounded (it can be one ulp off), so
/// floats are parsed from their text with `str::parse`, which is.
fn raw_values() -> Vec<Vec<String>> {
    let text = expected_text();
    text.split("\"values\":")
        .skip(1)
        .map(|rest| {
            let open = rest.find('[').unwrap();
            let close = rest.find(']').unwrap();
            rest[open + 1..close]
                .split(',')
                .map(|v| v.trim().to_string())
                .collect()
        })
        .collect()
}

/// The exact floats of tensor `file`'s values.
fn exact_floats(file: &str) -> Vec<f64> {
    let expected = expected();
    let index = expected["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["file"] == file)
        .unwrap();
    raw_values()[index]
        .iter()
        .map(|v| v.parse::<f64>().unwrap())
        .collect()
}

fn u64_matrix(v: &Value) -> Vec<Vec<u64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|level| {
            level
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect()
        })
        .collect()
}

/// Asserts dtype, shape, LoD (offsets and lengths) and every value.
fn assert_matches(t: &LodTensor, e: &Value) {
    let file = e["file"].as_str().unwrap();
    let dtype: DType = e["dtype"].as_str().unwrap().parse().unwrap();
    assert_eq!(t.dtype(), dtype, "{file}");
    let shape: Vec<usize> = e["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(t.shape(), &shape[..], "{file}");
    assert_eq!(t.lod().to_offsets(), u64_matrix(&e["lod"]), "{file}");
    assert_eq!(
        t.lod().to_lengths(),
        u64_matrix(&e["recursive_sequence_lengths"]),
        "{file}"
    );
    let values = e["values"].as_array().unwrap();
    assert_eq!(values.len(), t.numel(), "{file}");
    let floats = || {
        let exact = exact_floats(file);
        assert_eq!(exact.len(), values.len(), "{file}");
        exact
    };
    match dtype {
        DType::Float32 => {
            let got = t.as_slice::<f32>().unwrap();
            for (g, v) in got.iter().zip(floats()) {
                // The JSON decimal is the exact value of the stored f32.
                assert_eq!(f64::from(*g), v, "{file}");
            }
        }
        DType::Float64 => {
            let got = t.as_slice::<f64>().unwrap();
            for (g, v) in got.iter().zip(floats()) {
                assert_eq!(*g, v, "{file}");
            }
        }
        DType::Float16 => {
            let got = t.as_slice::<f16>().unwrap();
            for (g, v) in got.iter().zip(floats()) {
                assert_eq!(g.to_f64(), v, "{file}");
            }
        }
        DType::Int64 => {
            let got = t.as_slice::<i64>().unwrap();
            let want: Vec<i64> = values.iter().map(|v| v.as_i64().unwrap()).collect();
            assert_eq!(got, &want[..], "{file}");
        }
        DType::Int32 => {
            let got = t.as_slice::<i32>().unwrap();
            let want: Vec<i32> = values
                .iter()
                .map(|v| i32::try_from(v.as_i64().unwrap()).unwrap())
                .collect();
            assert_eq!(got, &want[..], "{file}");
        }
        DType::UInt8 => {
            let got = t.as_slice::<u8>().unwrap();
            let want: Vec<u8> = values
                .iter()
                .map(|v| u8::try_from(v.as_u64().unwrap()).unwrap())
                .collect();
            assert_eq!(got, &want[..], "{file}");
        }
        DType::Bool => {
            let got = t.as_slice::<bool>().unwrap();
            let want: Vec<bool> = values.iter().map(|v| v.as_bool().unwrap()).collect();
            assert_eq!(got, &want[..], "{file}");
        }
        other => panic!("{file}: no fixture of dtype {other}"),
    }
}

#[test]
fn every_fixture_reads_exactly_and_writes_back_byte_identical() {
    let expected = expected();
    assert_eq!(expected["paddle_version"], "2.6.2");
    let tensors = expected["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 8);
    for e in tensors {
        let path = data_dir().join(e["file"].as_str().unwrap());
        let bytes = std::fs::read(&path).unwrap();
        let t = paddle::read_tensor(&bytes).unwrap();
        assert_matches(&t, e);
        assert_eq!(paddle::to_bytes(&t).unwrap(), bytes, "{}", path.display());
        let mut written = Vec::new();
        paddle::write_tensor(&t, &mut written).unwrap();
        assert_eq!(written, bytes);
        // The same tensor through every reader.
        assert_eq!(paddle::read_tensor_file(&path).unwrap(), t);
        assert_eq!(paddle::read_tensor_from(&bytes[..]).unwrap(), t);
        assert_eq!(paddle::read_combined(&bytes).unwrap(), vec![t.clone()]);
    }
}

#[test]
fn combined_file_reads_in_order_and_writes_back_byte_identical() {
    let expected = expected();
    let order: Vec<&str> = expected["combined"]["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let path = data_dir().join(expected["combined"]["file"].as_str().unwrap());
    let bytes = std::fs::read(&path).unwrap();
    let tensors = paddle::read_combined(&bytes).unwrap();
    assert_eq!(tensors.len(), order.len());
    for (t, file) in tensors.iter().zip(&order) {
        let e = expected["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["file"] == *file)
            .unwrap();
        assert_matches(t, e);
    }
    assert_eq!(paddle::combined_to_bytes(&tensors).unwrap(), bytes);
    assert_eq!(paddle::read_combined_file(&path).unwrap(), tensors);
    assert_eq!(paddle::read_combined_from(&bytes[..]).unwrap(), tensors);
    let streamed: Vec<LodTensor> = PaddleReader::open(&path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(streamed, tensors);

    // The combined file is the single files, concatenated.
    let mut concatenated = Vec::new();
    for file in &order {
        concatenated.extend(std::fs::read(data_dir().join(file)).unwrap());
    }
    assert_eq!(concatenated, bytes);

    // Named, through a batch, and back.
    let names: Vec<&str> = order
        .iter()
        .map(|f| f.trim_end_matches(".pdtensor"))
        .collect();
    let batch = paddle::read_batch(&bytes, Some(&names)).unwrap();
    assert_eq!(batch.names().collect::<Vec<_>>(), names);
    assert_eq!(
        batch.get("int32_3level").unwrap().lod().to_lengths(),
        vec![vec![2, 1], vec![1, 2, 2], vec![3, 1, 2, 2, 2]]
    );
    assert_eq!(paddle::batch_to_bytes(&batch).unwrap(), bytes);
    let unnamed = paddle::read_batch_file(&path, None).unwrap();
    assert_eq!(
        unnamed.names().collect::<Vec<_>>(),
        (0..8).map(|i| format!("tensor{i}")).collect::<Vec<_>>()
    );
    let err = paddle::read_batch(&bytes, Some(&names[..7])).unwrap_err();
    assert!(matches!(
        err,
        paddle::PaddleError::NameCount {
            tensors: 8,
            names: 7
        }
    ));
}

const GOLDEN_HEX: &str = "00000000 0100000000000000 1800000000000000 0000000000000000 0200000000000000 0500000000000000 00000000 06000000 080510051001 00000000 0000803f 00000040 00004040 00008040";

fn golden_bytes() -> Vec<u8> {
    let hex: String = GOLDEN_HEX.split_whitespace().collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn golden_vector_f32_5x1_with_one_level() {
    let lod = Lod::try_from_offsets(vec![vec![0, 2, 5]]).unwrap();
    let t = LodTensor::from_vec(vec![0f32, 1., 2., 3., 4.], vec![5, 1], lod).unwrap();
    let golden = golden_bytes();
    assert_eq!(golden.len(), 78);
    assert_eq!(paddle::to_bytes(&t).unwrap(), golden);
    let back = paddle::read_tensor(&golden).unwrap();
    assert_eq!(back, t);
    assert_eq!(back.as_slice::<f32>().unwrap(), &[0., 1., 2., 3., 4.]);
    assert_eq!(back.lod().to_lengths(), vec![vec![2, 3]]);
}

#[test]
fn slices_write_as_their_owned_copy() {
    let bytes = std::fs::read(data_dir().join("seed_2level_int64.pdtensor")).unwrap();
    let t = paddle::read_tensor(&bytes).unwrap();
    for path in [&[0][..], &[2], &[0, 2], &[2, 1]] {
        let view = t.branch(path).unwrap();
        let mut out = Vec::new();
        paddle::write_tensor(&view, &mut out).unwrap();
        assert_eq!(out, paddle::to_bytes(&view.to_owned()).unwrap());
        assert_eq!(paddle::read_tensor(&out).unwrap(), view.to_owned());
    }
    let article2 = paddle::read_tensor(&{
        let mut out = Vec::new();
        paddle::write_tensor(&t.branch(&[2]).unwrap(), &mut out).unwrap();
        out
    })
    .unwrap();
    assert_eq!(article2.as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
    assert_eq!(article2.lod().to_offsets(), [vec![0, 2, 5]]);
}
