//! Hostile length fields: clear errors, and no allocation sized by them.
//!
//! A counting global allocator records, per thread, the largest single
//! allocation made while a read runs.

use crate::tracking;
use lodt::paddle::{self, PaddleError, PaddleReader};
use std::io::Read;

/// Runs `f` and returns its result with the largest allocation it made.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    tracking::reset_largest();
    let result = f();
    (result, tracking::largest())
}

/// Far below any hostile length, above the reader's 64 KiB chunk and buffers.
const BOUND: usize = 1 << 20;

fn header_with_level_count(count: u64) -> Vec<u8> {
    let mut out = 0u32.to_le_bytes().to_vec();
    out.extend(count.to_le_bytes());
    out
}

fn header_with_desc_len(len: i32) -> Vec<u8> {
    let mut out = header_with_level_count(0);
    out.extend(0u32.to_le_bytes());
    out.extend(len.to_le_bytes());
    out
}

fn record_with_dims(data_type: u8, dims: &[u64], data: &[u8]) -> Vec<u8> {
    let mut desc = vec![0x08, data_type];
    for &d in dims {
        desc.push(0x10);
        let mut v = d;
        while v >= 0x80 {
            desc.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        desc.push(v as u8);
    }
    let mut out = header_with_desc_len(desc.len() as i32);
    out.extend(desc);
    out.extend(data);
    out
}

#[test]
fn level_count_of_2_pow_60() {
    let mut bytes = header_with_level_count(1 << 60);
    bytes.extend([0u8; 64]);
    let (result, largest) = largest_allocation(|| paddle::read_tensor(&bytes));
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            PaddleError::TooManyLevels {
                offset: 4,
                found: 0x1000_0000_0000_0000,
                max: 64
            }
        ),
        "{err}"
    );
    assert!(largest < BOUND, "largest allocation {largest}");

    // A stream of unknown length: refused at the count as well.
    let stream = std::io::Cursor::new(header_with_level_count(1 << 60)).chain(std::io::repeat(0));
    let (result, largest) = largest_allocation(|| paddle::read_tensor_from(stream));
    assert!(matches!(
        result.unwrap_err(),
        PaddleError::TooManyLevels {
            found: 0x1000_0000_0000_0000,
            ..
        }
    ));
    assert!(largest < BOUND, "largest allocation {largest}");

    // A count within the limit is checked against the input's size.
    let mut bytes = header_with_level_count(64);
    bytes.extend([0u8; 64]);
    let err = paddle::read_tensor(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            PaddleError::Truncated {
                field: "LoD levels",
                offset: 12,
                needed: 512,
                available: 64
            }
        ),
        "{err}"
    );
    // And on a stream, levels are read one by one; the first (all-zero)
    // level is too short and ends the read.
    let stream = std::io::Cursor::new(header_with_level_count(64)).chain(std::io::repeat(0));
    let (result, largest) = largest_allocation(|| paddle::read_tensor_from(stream));
    assert!(matches!(result.unwrap_err(), PaddleError::Lod { .. }));
    assert!(largest < BOUND, "largest allocation {largest}");
}

#[test]
fn level_byte_size_of_2_pow_63() {
    let mut bytes = header_with_level_count(1);
    bytes.extend((1u64 << 63).to_le_bytes());
    bytes.extend([0u8; 32]);
    let (result, largest) = largest_allocation(|| paddle::read_tensor(&bytes));
    assert!(matches!(
        result.unwrap_err(),
        PaddleError::Truncated {
            field: "LoD level offsets",
            offset: 20,
            needed: 0x8000_0000_0000_0000,
            available: 32
        }
    ));
    let (result, largest_stream) = largest_allocation(|| paddle::read_tensor_from(&bytes[..]));
    assert!(matches!(
        result.unwrap_err(),
        PaddleError::Truncated {
            field: "LoD level offsets",
            available: 32,
            ..
        }
    ));
    assert!(largest.max(largest_stream) < BOUND);
}

#[test]
fn desc_length_of_2_pow_31_minus_1() {
    let mut bytes = header_with_desc_len(i32::MAX);
    bytes.extend([0x08, 0x05, 0x10, 0x01]);
    let (result, largest) = largest_allocation(|| paddle::read_tensor(&bytes));
    let err = result.unwrap_err();
    assert!(matches!(
        err,
        PaddleError::Truncated {
            field: "TensorDesc",
            offset: 20,
            needed: 2_147_483_647,
            available: 4
        }
    ));
    assert_eq!(
        err.to_string(),
        "truncated Paddle stream: TensorDesc at offset 20 needs 2147483647 bytes, found 4"
    );
    assert!(largest < BOUND, "largest allocation {largest}");
    let (result, largest) =
        largest_allocation(|| PaddleReader::new(&bytes[..]).next().unwrap().map(|_| ()));
    assert!(matches!(
        result.unwrap_err().root(),
        PaddleError::Truncated {
            field: "TensorDesc",
            available: 4,
            ..
        }
    ));
    assert!(largest < BOUND, "largest allocation {largest}");
}

#[test]
fn dims_of_2_pow_62() {
    // float32: the byte size overflows before any read.
    let bytes = record_with_dims(5, &[1 << 62], &[0; 16]);
    let (result, largest) = largest_allocation(|| paddle::read_tensor(&bytes));
    assert!(matches!(
        result.unwrap_err(),
        PaddleError::DimsOverflow { .. }
    ));
    assert!(largest < BOUND);
    // uint8: 2^62 bytes claimed, 16 present.
    let bytes = record_with_dims(20, &[1 << 62], &[0; 16]);
    let (result, largest) = largest_allocation(|| paddle::read_tensor(&bytes));
    assert!(matches!(
        result.unwrap_err(),
        PaddleError::Truncated {
            field: "tensor data",
            needed: 0x4000_0000_0000_0000,
            available: 16,
            ..
        }
    ));
    assert!(largest < BOUND, "largest allocation {largest}");
    let (result, largest) = largest_allocation(|| paddle::read_tensor_from(&bytes[..]));
    assert!(matches!(
        result.unwrap_err(),
        PaddleError::Truncated {
            field: "tensor data",
            available: 16,
            ..
        }
    ));
    assert!(largest < BOUND, "largest allocation {largest}");
    // Many dims whose product overflows even with a zero among the last.
    let bytes = record_with_dims(20, &[1 << 62, 1 << 62, 0], &[]);
    assert!(matches!(
        paddle::read_tensor(&bytes).unwrap_err(),
        PaddleError::DimsOverflow { .. }
    ));
}

#[test]
fn a_real_read_is_not_bounded_by_the_tracker() {
    // The tracker does see large allocations: a 4 MiB tensor allocates it.
    let t =
        lodt::LodTensor::from_vec(vec![1f32; 1 << 20], vec![1 << 20], Default::default()).unwrap();
    let bytes = paddle::to_bytes(&t).unwrap();
    let (result, largest) = largest_allocation(|| paddle::read_tensor(&bytes));
    assert_eq!(result.unwrap(), t);
    assert!(largest >= 4 << 20, "largest allocation {largest}");
}
