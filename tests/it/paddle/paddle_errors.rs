//! Every kind of bad Paddle stream is a precise error; the lenient corners of
//! the format (packed dims, unknown fields, 0-D, empty tensors) read right.

use half::bf16;
use lodt::paddle::{self, DescError, PaddleError, PaddleReader};
use lodt::{Batch, DType, Error, Lod, LodRule, LodTensor};

/// A record from its parts, exactly as the format lays them out.
fn record(levels: &[&[u64]], desc: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0u32.to_le_bytes());
    out.extend((levels.len() as u64).to_le_bytes());
    for level in levels {
        out.extend((level.len() as u64 * 8).to_le_bytes());
        for o in *level {
            out.extend(o.to_le_bytes());
        }
    }
    out.extend(0u32.to_le_bytes());
    out.extend((desc.len() as i32).to_le_bytes());
    out.extend(desc);
    out.extend(data);
    out
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// An unpacked TensorDesc, as Paddle writes it.
fn desc(data_type: i64, dims: &[i64]) -> Vec<u8> {
    let mut out = vec![0x08];
    out.extend(varint(data_type as u64));
    for &d in dims {
        out.push(0x10);
        out.extend(varint(d as u64));
    }
    out
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The golden record: f32 [5, 1] = 0..5, LoD [[0, 2, 5]].
fn golden() -> Vec<u8> {
    record(
        &[&[0, 2, 5]],
        &desc(5, &[5, 1]),
        &f32_bytes(&[0., 1., 2., 3., 4.]),
    )
}

/// Byte positions in the golden record.
const TENSOR_VERSION_AT: u64 = 4 + 8 + 8 + 24;
const DESC_LEN_AT: u64 = TENSOR_VERSION_AT + 4;
const DESC_AT: u64 = DESC_LEN_AT + 4;

#[test]
fn golden_parts_are_where_the_spec_says() {
    let bytes = golden();
    assert_eq!(bytes.len(), 78);
    assert_eq!(
        &bytes[DESC_AT as usize..DESC_AT as usize + 6],
        &[0x08, 0x05, 0x10, 0x05, 0x10, 0x01]
    );
    let t = paddle::read_tensor(&bytes).unwrap();
    assert_eq!(t.shape(), &[5, 1]);
}

#[test]
fn versions_other_than_zero_are_rejected() {
    let mut bytes = golden();
    bytes[0] = 1;
    let err = paddle::read_tensor(&bytes).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Version {
            field: "LoDTensor version",
            offset: 0,
            found: 1
        }
    ));
    let mut bytes = golden();
    bytes[TENSOR_VERSION_AT as usize + 3] = 0x80;
    let err = paddle::read_tensor(&bytes).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Version {
            field: "Tensor version",
            offset: TENSOR_VERSION_AT,
            found: 0x8000_0000
        }
    ));
    assert_eq!(
        err.to_string(),
        "unsupported Tensor version at offset 44: expected 0, found 2147483648"
    );
}

#[test]
fn negative_desc_length_is_rejected() {
    let mut bytes = golden();
    bytes[DESC_LEN_AT as usize..DESC_LEN_AT as usize + 4].copy_from_slice(&(-1i32).to_le_bytes());
    let err = paddle::read_tensor(&bytes).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::NegativeDescLength {
            offset: DESC_LEN_AT,
            found: -1
        }
    ));
}

#[test]
fn invalid_lods_are_rejected_with_the_rule_broken() {
    let d = desc(5, &[5, 1]);
    let data = f32_bytes(&[0.; 5]);
    let cases: [(&[&[u64]], Error); 4] = [
        (
            &[&[0, 3, 2, 5]],
            Error::InvalidLod {
                level: 0,
                index: 2,
                rule: LodRule::Decreasing,
                expected: 3,
                found: 2,
            },
        ),
        (
            &[&[1, 5]],
            Error::InvalidLod {
                level: 0,
                index: 0,
                rule: LodRule::DoesNotStartAtZero,
                expected: 0,
                found: 1,
            },
        ),
        (
            &[&[0, 2, 3], &[0, 1, 5]],
            Error::InvalidLod {
                level: 0,
                index: 2,
                rule: LodRule::LevelMismatch,
                expected: 2,
                found: 3,
            },
        ),
        (
            &[&[0, 5], &[0]],
            Error::InvalidLod {
                level: 1,
                index: 0,
                rule: LodRule::TooShort,
                expected: 2,
                found: 1,
            },
        ),
    ];
    for (levels, expected) in cases {
        let err = paddle::read_tensor(&record(levels, &d, &data)).unwrap_err();
        match err {
            PaddleError::Lod { offset: 4, source } => assert_eq!(source, expected),
            other => panic!("{levels:?}: {other}"),
        }
    }
    // An empty level (byte size 0) is too short too.
    let err = paddle::read_tensor(&record(&[&[]], &d, &data)).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Lod {
            source: Error::InvalidLod {
                rule: LodRule::TooShort,
                found: 0,
                ..
            },
            ..
        }
    ));
}

#[test]
fn lod_rows_must_match_the_dims() {
    let err = paddle::read_tensor(&record(
        &[&[0, 2, 4]],
        &desc(5, &[5, 1]),
        &f32_bytes(&[0.; 5]),
    ))
    .unwrap_err();
    match err {
        PaddleError::Tensor { offset: 0, source } => assert!(matches!(
            source,
            Error::ShapeMismatch {
                what: "rows against the LoD's last offset",
                ..
            }
        )),
        other => panic!("{other}"),
    }
    // A 0-D tensor cannot carry a LoD.
    let err =
        paddle::read_tensor(&record(&[&[0, 1]], &desc(5, &[]), &f32_bytes(&[0.]))).unwrap_err();
    assert!(matches!(err, PaddleError::Tensor { .. }), "{err}");
}

#[test]
fn level_byte_size_must_be_a_multiple_of_8() {
    let mut bytes = golden();
    bytes[12] = 0x14; // 20 bytes
    let err = paddle::read_tensor(&bytes).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::LevelByteSize {
            level: 0,
            offset: 12,
            found: 20
        }
    ));
}

#[test]
fn short_data_is_truncated() {
    let bytes = golden();
    let err = paddle::read_tensor(&bytes[..bytes.len() - 1]).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Truncated {
            field: "tensor data",
            offset: 58,
            needed: 20,
            available: 19
        }
    ));
    assert_eq!(
        err.to_string(),
        "truncated Paddle stream: tensor data at offset 58 needs 20 bytes, found 19"
    );
    let err = paddle::read_tensor_from(&bytes[..bytes.len() - 1]).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Truncated {
            field: "tensor data",
            needed: 20,
            available: 19,
            ..
        }
    ));
    let err = paddle::read_tensor(&[]).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Truncated {
            field: "LoDTensor version",
            offset: 0,
            needed: 4,
            available: 0
        }
    ));
}

#[test]
fn bad_dims_are_rejected() {
    let err = paddle::read_tensor(&record(&[], &desc(5, &[2, -1]), &[])).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::NegativeDim {
            offset: 20,
            index: 1,
            found: -1
        }
    ));
    let err = paddle::read_tensor(&record(&[], &desc(5, &[1 << 62, 4]), &[])).unwrap_err();
    match &err {
        PaddleError::DimsOverflow {
            dtype: DType::Float32,
            dims,
            ..
        } => assert_eq!(dims, &[1 << 62, 4]),
        other => panic!("{other}"),
    }
}

#[test]
fn unknown_and_complex_dtypes_are_rejected() {
    for code in [7i64, 19, 25, 100, -1, 1 << 40] {
        let err = paddle::read_tensor(&record(&[], &desc(code, &[1]), &[0; 8])).unwrap_err();
        assert!(
            matches!(err, PaddleError::UnknownDType { offset: 20, found } if found == code),
            "{code}: {err}"
        );
    }
    for (code, name) in [(23, "COMPLEX64"), (24, "COMPLEX128")] {
        let err = paddle::read_tensor(&record(&[], &desc(code, &[1]), &[0; 16])).unwrap_err();
        assert!(
            matches!(err, PaddleError::ComplexDType { found, .. } if found == name),
            "{err}"
        );
        assert!(err.to_string().contains("lodt has no complex dtypes"));
    }
}

#[test]
fn malformed_descs_are_rejected_with_their_position() {
    let err = paddle::read_tensor(&record(&[], &[0x08, 0x85], &[])).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Desc {
            offset: 20,
            source: DescError::Truncated {
                what: "data_type",
                at: 1,
                ..
            }
        }
    ));
    let err = paddle::read_tensor(&record(&[], &[0x10, 0x01], &[0])).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Desc {
            source: DescError::MissingDataType,
            ..
        }
    ));
    let err = paddle::read_tensor(&record(&[], &[0x08, 0x05, 0x1b], &[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "malformed TensorDesc at offset 20: unsupported wire type 3 (field 3) at byte 2: expected 0, 1, 2 or 5"
    );
}

#[test]
fn trailing_bytes_are_rejected_in_single_reads_only() {
    let mut bytes = golden();
    bytes.push(0);
    let err = paddle::read_tensor(&bytes).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::TrailingBytes {
            offset: 78,
            count: Some(1)
        }
    ));
    let err = paddle::read_tensor_from(&bytes[..]).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::TrailingBytes {
            offset: 78,
            count: None
        }
    ));
    // In a combined stream the extra byte starts a second, truncated record.
    let err = paddle::read_combined(&bytes).unwrap_err();
    assert!(matches!(err, PaddleError::InTensor { index: 1, .. }));
    assert!(matches!(
        err.root(),
        PaddleError::Truncated {
            field: "LoDTensor version",
            offset: 78,
            needed: 4,
            available: 1
        }
    ));
}

#[test]
fn invalid_bool_bytes_are_rejected() {
    let err = paddle::read_tensor(&record(&[], &desc(0, &[3]), &[1, 0, 2])).unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Tensor {
            source: Error::InvalidBool { index: 2, found: 2 },
            ..
        }
    ));
}

#[test]
fn packed_dims_and_unknown_fields_read_and_write_back_canonical() {
    let canonical = golden();
    let data = f32_bytes(&[0., 1., 2., 3., 4.]);
    let variants: [&[u8]; 4] = [
        // packed dims
        &[0x08, 0x05, 0x12, 0x02, 0x05, 0x01],
        // dims before data_type, mixed packed and unpacked
        &[0x12, 0x01, 0x05, 0x08, 0x05, 0x10, 0x01],
        // unknown fields of every skippable wire type
        &[
            0x08, 0x05, 0x18, 0xff, 0x01, 0x10, 0x05, 0x21, 1, 2, 3, 4, 5, 6, 7, 8, 0x2a, 0x01,
            0xee, 0x35, 1, 2, 3, 4, 0x10, 0x01,
        ],
        // a repeated data_type: the last one wins
        &[0x08, 0x03, 0x10, 0x05, 0x10, 0x01, 0x08, 0x05],
    ];
    let expected = paddle::read_tensor(&canonical).unwrap();
    for d in variants {
        let bytes = record(&[&[0, 2, 5]], d, &data);
        let t = paddle::read_tensor(&bytes).unwrap();
        assert_eq!(t, expected, "{d:02x?}");
        assert_eq!(paddle::to_bytes(&t).unwrap(), canonical);
    }
}

#[test]
fn zero_d_and_empty_tensors_round_trip() {
    let scalar = LodTensor::from_vec(vec![2.5f64], vec![], Lod::empty()).unwrap();
    let bytes = paddle::to_bytes(&scalar).unwrap();
    assert_eq!(bytes, record(&[], &[0x08, 0x06], &2.5f64.to_le_bytes()));
    let back = paddle::read_tensor(&bytes).unwrap();
    assert_eq!((back.shape(), back.numel()), (&[][..], 1));
    assert_eq!(back, scalar);

    let lod = Lod::try_from_offsets(vec![vec![0, 0, 0]]).unwrap();
    let empty = LodTensor::from_vec(Vec::<i32>::new(), vec![0, 3], lod).unwrap();
    let bytes = paddle::to_bytes(&empty).unwrap();
    assert_eq!(bytes, record(&[&[0, 0, 0]], &desc(2, &[0, 3]), &[]));
    assert_eq!(paddle::read_tensor(&bytes).unwrap(), empty);
}

#[test]
fn every_lodt_dtype_with_a_paddle_twin_round_trips_with_its_code() {
    let cases: Vec<(LodTensor, i64)> = vec![
        (
            LodTensor::from_vec(vec![true, false], vec![2], Lod::empty()).unwrap(),
            0,
        ),
        (
            LodTensor::from_vec(vec![-2i16, 7], vec![2], Lod::empty()).unwrap(),
            1,
        ),
        (
            LodTensor::from_vec(vec![-2i32, 7], vec![2], Lod::empty()).unwrap(),
            2,
        ),
        (
            LodTensor::from_vec(vec![-2i64, 7], vec![2], Lod::empty()).unwrap(),
            3,
        ),
        (
            LodTensor::from_vec(vec![half::f16::from_f32(1.5); 2], vec![2], Lod::empty()).unwrap(),
            4,
        ),
        (
            LodTensor::from_vec(vec![1.5f32, -0.0], vec![2], Lod::empty()).unwrap(),
            5,
        ),
        (
            LodTensor::from_vec(vec![1.5f64, f64::MIN], vec![2], Lod::empty()).unwrap(),
            6,
        ),
        (
            LodTensor::from_vec(vec![0u8, 255], vec![2], Lod::empty()).unwrap(),
            20,
        ),
        (
            LodTensor::from_vec(vec![-128i8, 127], vec![2], Lod::empty()).unwrap(),
            21,
        ),
        (
            LodTensor::from_vec(vec![bf16::from_f32(-3.0); 2], vec![2], Lod::empty()).unwrap(),
            22,
        ),
    ];
    for (t, code) in cases {
        let bytes = paddle::to_bytes(&t).unwrap();
        assert_eq!(
            bytes,
            record(&[], &desc(code, &[2]), t.as_bytes()),
            "{}",
            t.dtype()
        );
        assert_eq!(paddle::read_tensor(&bytes).unwrap(), t);
    }
}

#[test]
fn dtypes_without_a_paddle_twin_write_nothing() {
    let ok = LodTensor::from_vec(vec![1u8], vec![1], Lod::empty()).unwrap();
    for t in [
        LodTensor::from_vec(vec![1u16], vec![1], Lod::empty()).unwrap(),
        LodTensor::from_vec(vec![1u32], vec![1], Lod::empty()).unwrap(),
        LodTensor::from_vec(vec![1u64], vec![1], Lod::empty()).unwrap(),
    ] {
        let mut out = Vec::new();
        let err = paddle::write_tensor(&t, &mut out).unwrap_err();
        assert!(matches!(err, PaddleError::UnsupportedDType { dtype } if dtype == t.dtype()));
        assert!(out.is_empty());
        // A bad tensor after a good one: still nothing written.
        let err = paddle::write_combined([&ok, &t], &mut out).unwrap_err();
        assert!(matches!(err, PaddleError::UnsupportedDType { .. }));
        assert!(out.is_empty());
        assert!(
            err.to_string()
                .starts_with(&format!("{} has no PaddlePaddle data type", t.dtype()))
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pdiparams");
        assert!(paddle::write_combined_file(&path, [&ok, &t]).is_err());
        assert!(!path.exists());
    }
}

#[test]
fn combined_errors_name_the_tensor_and_the_absolute_offset() {
    let first = golden();
    let mut bytes = first.clone();
    let mut second = golden();
    second[0] = 9;
    bytes.extend(&second);
    let err = paddle::read_combined(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 1 of the combined stream: unsupported LoDTensor version at offset 78: expected 0, found 9"
    );
    // The streaming reader yields the good tensor, then the error, then stops.
    let mut reader = PaddleReader::new(&bytes[..]);
    assert!(reader.next().unwrap().is_ok());
    assert!(reader.next().unwrap().is_err());
    assert!(reader.next().is_none());
    assert_eq!(reader.tensors_read(), 2);
}

#[test]
fn empty_combined_stream_is_zero_tensors() {
    assert!(paddle::read_combined(&[]).unwrap().is_empty());
    assert!(paddle::combined_to_bytes([]).unwrap().is_empty());
    assert_eq!(paddle::read_batch(&[], None).unwrap(), Batch::new());
}

#[test]
fn large_tensors_cross_chunk_boundaries_on_every_reader() {
    // 3 x 65_537 + 1 bytes of u8 data (not a multiple of 8), and 40_000 f64s.
    let n = 3 * 65_537 + 1;
    let lod = Lod::try_from_lengths(&[vec![1, (n - 1) as u64]]).unwrap();
    let bytes_t =
        LodTensor::from_vec((0..n).map(|i| (i % 251) as u8).collect(), vec![n], lod).unwrap();
    let floats = LodTensor::from_vec(
        (0..40_000).map(|i| i as f64 * 0.5).collect(),
        vec![20_000, 2],
        Lod::empty(),
    )
    .unwrap();
    let combined = paddle::combined_to_bytes([&bytes_t, &floats]).unwrap();
    let expect = vec![bytes_t.clone(), floats.clone()];
    assert_eq!(paddle::read_combined(&combined).unwrap(), expect);
    assert_eq!(paddle::read_combined_from(&combined[..]).unwrap(), expect);
    let streamed: Vec<LodTensor> = PaddleReader::new(std::io::Cursor::new(&combined))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(streamed, expect);
    let limited: Vec<LodTensor> = PaddleReader::with_len(&combined[..], combined.len() as u64)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(limited, expect);
    let single = paddle::to_bytes(&bytes_t).unwrap();
    let back = paddle::read_tensor_from(&single[..]).unwrap();
    assert_eq!(back, bytes_t);
    // Read-source storage is aligned and writable.
    let mut back = paddle::read_tensor_from(&paddle::to_bytes(&floats).unwrap()[..]).unwrap();
    back.as_mut_slice::<f64>().unwrap()[0] = 9.0;
    assert_eq!(back.as_slice::<f64>().unwrap()[..2], [9.0, 0.5]);
}

#[test]
fn with_len_stops_at_the_given_length() {
    let mut bytes = golden();
    bytes.extend([0xde, 0xad]);
    let tensors: Vec<LodTensor> = PaddleReader::with_len(&bytes[..], 78)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(tensors.len(), 1);
}
