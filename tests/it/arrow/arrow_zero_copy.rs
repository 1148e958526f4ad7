//! Zero-copy conversions: Arrow buffers that lie inside lodt's storage (a
//! `TensorBuffers` over one shared storage, an owned tensor), and tensors
//! that share Arrow's values buffer.

#![cfg(feature = "arrow")]

use crate::common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, ArrayRef};
use lodt::arrow::{
    ArrowError, ArrowOptions, ListType, from_arrow, tensor_buffers_to_arrow, to_arrow,
};
use lodt::buffer::AlignedBytes;
use lodt::format::TensorBuffers;
use lodt::{DType, Lod, LodTensor};
use std::ops::Range;
use std::sync::Arc;

/// Lays out a tensor the way a `.lodt` file does: each LoD level's u64
/// offsets, then the body, each 64-aligned, after a small header.
fn file_like(t: &LodTensor, misalign_body: bool) -> TensorBuffers {
    let mut bytes = vec![0xAAu8; 64]; // a "header"
    let mut lod = Vec::new();
    for level in t.lod().levels() {
        let start = bytes.len();
        for o in level {
            bytes.extend_from_slice(&o.to_le_bytes());
        }
        lod.push(start..bytes.len());
        bytes.resize(bytes.len().div_ceil(64) * 64, 0);
    }
    if misalign_body {
        bytes.push(0);
    }
    let start = bytes.len();
    bytes.extend_from_slice(t.as_bytes());
    let body = start..bytes.len();
    bytes.extend_from_slice(&[0; 16]); // a "footer"
    TensorBuffers {
        storage: Arc::new(AlignedBytes::from_slice(&bytes)),
        dtype: t.dtype(),
        shape: t.shape().to_vec(),
        lod,
        body,
    }
}

fn inside(range: &Range<usize>, ptr: *const u8) -> bool {
    range.contains(&(ptr as usize))
}

use common::seed_frames as seed_tensor;

/// The pointers of every buffer of a LargeList<LargeList<...>> over
/// (nested) FixedSizeLists of f32.
fn buffer_ptrs(array: &ArrayRef) -> (Vec<*const u8>, *const u8) {
    let l0 = array.as_list::<i64>();
    let l1 = l0.values().as_list::<i64>();
    let mut leaf = l1.values().clone();
    while let Some(fixed) = leaf.as_fixed_size_list_opt() {
        leaf = fixed.values().clone();
    }
    let values = leaf.as_primitive::<Float32Type>();
    (
        vec![
            l0.value_offsets().as_ptr() as *const u8,
            l1.value_offsets().as_ptr() as *const u8,
        ],
        values.values().as_ptr() as *const u8,
    )
}

#[test]
fn tensor_buffers_become_arrow_buffers_inside_the_storage() {
    let t = seed_tensor();
    let parts = file_like(&t, false);
    let storage = parts.storage.bytes().as_ptr_range();
    let storage = storage.start as usize..storage.end as usize;
    let checked = tensor_buffers_to_arrow("frames", &parts, &ArrowOptions::default()).unwrap();
    // The tensor over the parts, converted: the same buffers.
    let tensor = to_arrow(
        "frames",
        &parts.to_tensor().unwrap(),
        &ArrowOptions::default(),
    )
    .unwrap();
    for (field, array) in [checked, tensor] {
        let (offsets, values) = buffer_ptrs(&array);
        for (level, ptr) in offsets.iter().enumerate() {
            assert!(inside(&storage, *ptr), "level {level} offsets were copied");
            assert_eq!(*ptr as usize - storage.start, parts.lod[level].start);
        }
        assert_eq!(
            values as usize - storage.start,
            parts.body.start,
            "values were copied"
        );
        // And the array reads back as the tensor.
        assert_eq!(
            from_arrow(&field, &array, &ArrowOptions::default()).unwrap(),
            t
        );
    }
}

#[test]
fn the_array_keeps_the_storage_alive() {
    let t = seed_tensor();
    let parts = file_like(&t, false);
    let weak = Arc::downgrade(&parts.storage);
    let (field, array) =
        tensor_buffers_to_arrow("frames", &parts, &ArrowOptions::default()).unwrap();
    drop(parts);
    assert!(weak.upgrade().is_some(), "the array holds the storage");
    assert_eq!(
        from_arrow(&field, &array, &ArrowOptions::default()).unwrap(),
        t
    );
    drop((field, array));
    assert!(weak.upgrade().is_none(), "and releases it");
}

#[test]
fn misaligned_or_list_typed_buffers_are_copied_and_still_correct() {
    let t = seed_tensor();
    let parts = file_like(&t, true);
    let storage = parts.storage.bytes().as_ptr_range();
    let storage = storage.start as usize..storage.end as usize;
    let (field, array) =
        tensor_buffers_to_arrow("frames", &parts, &ArrowOptions::default()).unwrap();
    let (offsets, values) = buffer_ptrs(&array);
    assert!(
        offsets.iter().all(|p| inside(&storage, *p)),
        "aligned offsets are shared"
    );
    assert!(
        !inside(&storage, values),
        "misaligned f32 values are copied"
    );
    assert_eq!(
        from_arrow(&field, &array, &ArrowOptions::default()).unwrap(),
        t
    );
    // List (i32) offsets are necessarily converted.
    let options = ArrowOptions::default().with_list_type(ListType::List);
    let (field, array) = tensor_buffers_to_arrow("frames", &parts, &options).unwrap();
    let list = array.as_list::<i32>();
    assert!(!inside(
        &storage,
        list.value_offsets().as_ptr() as *const u8
    ));
    assert_eq!(from_arrow(&field, &array, &options).unwrap(), t);
}

#[test]
fn bad_tensor_buffers_are_errors() {
    let t = seed_tensor();
    let good = file_like(&t, false);
    let len = good.storage.bytes().len();
    let cases: Vec<(&str, TensorBuffers)> = vec![
        (
            "body past the end",
            TensorBuffers {
                body: len - 8..len + 8,
                ..good.clone()
            },
        ),
        (
            "level past the end",
            TensorBuffers {
                lod: vec![good.lod[0].clone(), len..len + 8],
                ..good.clone()
            },
        ),
        (
            "misaligned level",
            TensorBuffers {
                lod: vec![
                    good.lod[0].start + 1..good.lod[0].end + 1,
                    good.lod[1].clone(),
                ],
                ..good.clone()
            },
        ),
        (
            "short body",
            TensorBuffers {
                body: good.body.start..good.body.end - 4,
                ..good.clone()
            },
        ),
        (
            "wrong rows",
            TensorBuffers {
                shape: vec![14, 2, 2],
                ..good.clone()
            },
        ),
        (
            "levels swapped",
            TensorBuffers {
                lod: vec![good.lod[1].clone(), good.lod[0].clone()],
                ..good.clone()
            },
        ),
    ];
    for (what, parts) in cases {
        let err = tensor_buffers_to_arrow("frames", &parts, &ArrowOptions::default()).unwrap_err();
        assert!(
            matches!(&err, ArrowError::Tensor { column, .. } if column == "frames"),
            "{what}: {err:?}"
        );
        // The tensor constructor is where they are caught.
        assert!(parts.to_tensor().is_err(), "{what} (to_tensor)");
    }
    // The checked variant also reads every offset.
    let mut bytes = good.storage.bytes().to_vec();
    let at = good.lod[1].start + 8 * 3; // level 1, index 3: 9 -> 2 (decreasing)
    bytes[at..at + 8].copy_from_slice(&2u64.to_le_bytes());
    let broken = TensorBuffers {
        storage: Arc::new(AlignedBytes::from_slice(&bytes)),
        ..good
    };
    let err = tensor_buffers_to_arrow("frames", &broken, &ArrowOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            ArrowError::Tensor {
                source: lodt::Error::InvalidLod {
                    level: 1,
                    index: 3,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn owned_tensors_share_their_storage_and_lod_with_arrow() {
    let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]]).unwrap();
    let t = LodTensor::from_vec((0..6i64).collect(), vec![6], lod).unwrap();
    let (field, array) = to_arrow("x", &t, &ArrowOptions::default()).unwrap();
    let l0 = array.as_list::<i64>();
    let l1 = l0.values().as_list::<i64>();
    let values = l1.values().as_primitive::<Int64Type>();
    assert_eq!(
        l0.value_offsets().as_ptr() as *const u64,
        t.lod().level(0).unwrap().raw().as_ptr()
    );
    assert_eq!(
        l1.value_offsets().as_ptr() as *const u64,
        t.lod().level(1).unwrap().raw().as_ptr()
    );
    assert_eq!(
        values.values().as_ptr(),
        t.as_slice::<i64>().unwrap().as_ptr()
    );
    // Writing to the tensor afterwards copies it first: the array is unchanged.
    let mut t2 = t.clone();
    drop(t);
    t2.as_mut_slice::<i64>().unwrap()[0] = 99;
    t2.update_lod(|l| *l = Lod::try_from_lengths(&[vec![3], vec![1, 2, 3]]).unwrap())
        .unwrap();
    assert_eq!(values.value(0), 0);
    assert_eq!(l0.value_offsets(), &[0, 2, 3]);
    let back = from_arrow(&field, &array, &ArrowOptions::default()).unwrap();
    assert_eq!(back.as_slice::<i64>().unwrap(), &[0, 1, 2, 3, 4, 5]);
}

#[test]
fn from_arrow_shares_the_values_buffer() {
    let lod = Lod::try_from_lengths(&[vec![2, 2]]).unwrap();
    let t = LodTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], vec![4], lod).unwrap();
    let (field, array) = to_arrow("x", &t, &ArrowOptions::default()).unwrap();
    let values_ptr = array
        .as_list::<i64>()
        .values()
        .as_primitive::<Float32Type>()
        .values()
        .as_ptr();
    let back = from_arrow(&field, &array, &ArrowOptions::default()).unwrap();
    assert_eq!(back.as_slice::<f32>().unwrap().as_ptr(), values_ptr);
    // A slice shares too (a window of the same buffer).
    let back = from_arrow(&field, &array.slice(1, 1), &ArrowOptions::default()).unwrap();
    assert_eq!(back.as_slice::<f32>().unwrap(), &[3.0, 4.0]);
    assert_eq!(
        back.as_slice::<f32>().unwrap().as_ptr(),
        values_ptr.wrapping_add(2)
    );
    // Bools are bit-packed in Arrow: always a copy, still exact.
    let b = LodTensor::from_vec(vec![true, false, true], vec![3], Lod::empty()).unwrap();
    let (field, array) = to_arrow("b", &b, &ArrowOptions::default()).unwrap();
    assert_eq!(
        array.as_boolean().values().iter().collect::<Vec<_>>(),
        vec![true, false, true]
    );
    assert_eq!(
        from_arrow(&field, &array, &ArrowOptions::default())
            .unwrap()
            .dtype(),
        DType::Bool
    );
}
