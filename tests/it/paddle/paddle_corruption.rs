//! Truncating and flipping the bytes of every Paddle fixture: always an error
//! or a consistent tensor, never a panic.

use lodt::LodTensor;
use lodt::paddle::{self, PaddleError};
use std::path::PathBuf;

const FIXTURES: [&str; 8] = [
    "seed_2level_int64.pdtensor",
    "seed_1level_float32.pdtensor",
    "video_like_float32.pdtensor",
    "plain_0level_float64.pdtensor",
    "int32_3level.pdtensor",
    "uint8_1level.pdtensor",
    "float16_1level.pdtensor",
    "bool_1level.pdtensor",
];

fn read(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paddle");
    std::fs::read(dir.join(name)).unwrap()
}

/// What a byte of a well-formed record is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Part {
    /// Versions, the level count, level byte sizes, the desc length.
    Fixed,
    /// A LoD offset.
    Offset,
    /// The TensorDesc.
    Desc,
    /// Tensor data.
    Data,
}

fn layout(bytes: &[u8]) -> Vec<Part> {
    let t = paddle::read_tensor(bytes).unwrap();
    let mut parts = vec![Part::Fixed; 12];
    for level in t.lod().levels() {
        parts.extend([Part::Fixed; 8]);
        parts.extend(vec![Part::Offset; 8 * level.len()]);
    }
    parts.extend([Part::Fixed; 8]);
    let data_at = bytes.len() - t.as_bytes().len();
    parts.resize(data_at, Part::Desc);
    parts.resize(bytes.len(), Part::Data);
    parts
}

/// A successful read of corrupted bytes must be a real, consistent tensor:
/// different from the original, and stable under write + read.
fn check_consistent(t: &LodTensor, original: &LodTensor, what: &str) {
    assert_ne!(t, original, "{what}: corrupted bytes read as the original");
    let bytes = paddle::to_bytes(t).unwrap();
    assert_eq!(&paddle::read_tensor(&bytes).unwrap(), t, "{what}");
}

#[test]
fn every_truncation_of_a_single_tensor_is_an_error() {
    for name in FIXTURES {
        let bytes = read(name);
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let err = paddle::read_tensor(cut).unwrap_err();
            assert!(
                matches!(err, PaddleError::Truncated { .. }),
                "{name}[..{len}]: {err}"
            );
            assert!(paddle::read_tensor_from(cut).is_err(), "{name}[..{len}]");
            // As a combined stream: empty is zero tensors, any other cut an error.
            match paddle::read_combined(cut) {
                Ok(tensors) => assert!(len == 0 && tensors.is_empty(), "{name}[..{len}]"),
                Err(err) => assert!(matches!(
                    err.root(),
                    PaddleError::Truncated { .. } | PaddleError::Lod { .. }
                )),
            }
        }
    }
}

#[test]
fn combined_truncations_succeed_exactly_at_record_boundaries() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paddle");
    let bytes = std::fs::read(dir.join("combined.pdparams")).unwrap();
    let singles: Vec<LodTensor> = FIXTURES
        .iter()
        .map(|f| paddle::read_tensor(&read(f)).unwrap())
        .collect();
    let mut boundaries = vec![0];
    for f in FIXTURES {
        boundaries.push(boundaries.last().unwrap() + read(f).len());
    }
    assert_eq!(*boundaries.last().unwrap(), bytes.len());
    for len in 0..=bytes.len() {
        let result = paddle::read_combined(&bytes[..len]);
        match boundaries.iter().position(|&b| b == len) {
            Some(count) => assert_eq!(result.unwrap(), singles[..count], "[..{len}]"),
            None => {
                let err = result.unwrap_err();
                let PaddleError::InTensor { index, .. } = &err else {
                    panic!("[..{len}]: {err}");
                };
                // The error is in the record the cut falls in.
                assert!(boundaries[*index + 1] > len, "[..{len}]: {err}");
                assert!(boundaries[*index] < len);
            }
        }
    }
}

#[test]
fn flipping_any_bit_of_any_fixture_never_panics() {
    let mut total = 0;
    let mut accepted = 0;
    let mut header_accepted = 0;
    for name in FIXTURES {
        let bytes = read(name);
        let original = paddle::read_tensor(&bytes).unwrap();
        let parts = layout(&bytes);
        for i in 0..bytes.len() {
            for mask in [0x01u8, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff] {
                let mut corrupted = bytes.clone();
                corrupted[i] ^= mask;
                let what = format!("{name} byte {i} ^ {mask:#04x}");
                total += 1;
                let result = paddle::read_tensor(&corrupted);
                // The same verdict from a stream source.
                assert_eq!(
                    paddle::read_tensor_from(&corrupted[..]).is_ok(),
                    result.is_ok(),
                    "{what}"
                );
                let part = parts[i];
                match result {
                    Ok(t) => {
                        accepted += 1;
                        header_accepted += usize::from(part != Part::Data);
                        check_consistent(&t, &original, &what);
                        // Without a checksum, some flips describe another valid
                        // tensor; each kind changes only what its bytes encode.
                        match part {
                            Part::Fixed => {
                                panic!("{what}: a flipped length or version was accepted")
                            }
                            Part::Offset => {
                                // An inner offset that stays ordered.
                                assert_ne!(t.lod(), original.lod(), "{what}");
                                assert_eq!(t.shape(), original.shape(), "{what}");
                                assert_eq!(t.as_bytes(), original.as_bytes(), "{what}");
                            }
                            Part::Desc => {
                                // A dtype of the same size (UINT8 <-> INT8), or a dim
                                // of 1 whose key became an unknown field.
                                assert_eq!(t.lod(), original.lod(), "{what}");
                                assert_eq!(t.as_bytes(), original.as_bytes(), "{what}");
                                assert_eq!(t.dtype().size(), original.dtype().size(), "{what}");
                                assert_eq!(t.numel(), original.numel(), "{what}");
                                if std::env::var("FLIPDBG").is_ok() {
                                    eprintln!("{what}: {} {:?}", t.dtype(), t.shape());
                                }
                            }
                            Part::Data => {
                                assert_eq!(t.shape(), original.shape(), "{what}");
                                assert_eq!(t.lod(), original.lod(), "{what}");
                            }
                        }
                    }
                    Err(err) => {
                        if i < 4 {
                            assert!(matches!(err, PaddleError::Version { .. }), "{what}: {err}");
                        }
                        // Data flips only fail where data has a rule: bools.
                        if part == Part::Data {
                            assert_eq!(original.dtype(), lodt::DType::Bool, "{what}: {err}");
                            assert!(matches!(err, PaddleError::Tensor { .. }), "{what}: {err}");
                        }
                        assert!(!err.to_string().is_empty());
                    }
                }
            }
        }
    }
    eprintln!(
        "{accepted} of {total} single-byte corruptions read as a (different) valid tensor, \
         {header_accepted} of them outside the data"
    );
}

#[test]
fn flipping_header_bytes_of_the_combined_file_never_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/paddle");
    let bytes = std::fs::read(dir.join("combined.pdparams")).unwrap();
    let original = paddle::read_combined(&bytes).unwrap();
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut corrupted = bytes.clone();
            corrupted[i] ^= mask;
            match paddle::read_combined(&corrupted) {
                Ok(tensors) => {
                    assert_ne!(tensors, original, "byte {i} ^ {mask:#04x}");
                    let again = paddle::combined_to_bytes(&tensors).unwrap();
                    assert_eq!(paddle::read_combined(&again).unwrap(), tensors);
                }
                Err(err) => assert!(matches!(err, PaddleError::InTensor { .. })),
            }
        }
    }
}
