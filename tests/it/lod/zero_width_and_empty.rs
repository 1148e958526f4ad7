//! Regressions from the robustness review: tensors whose rows are zero bytes
//! wide (legal, and storable in a tiny file) may claim 2^40 rows; levels of
//! zero sequences (what slicing an empty range gives) must flow through every
//! operation; nothing may abort, panic or allocate what a count merely claims.

use lodt::ops::pad;
use lodt::{Batch, DType, Error, Lod, LodTensor, ops, paddle};

/// A float32 tensor of `rows` rows of shape [0]: zero bytes in all.
fn zero_width(rows: usize, lod: Lod) -> LodTensor {
    LodTensor::from_bytes(DType::Float32, vec![rows, 0], &[], lod).unwrap()
}

#[test]
fn sequence_expand_compares_counts_before_building_offsets() {
    let x = zero_width(1 << 40, Lod::empty());
    let y = Lod::try_from_lengths(&[vec![1u64]]).unwrap();
    let err = ops::sequence_expand(&x, &y, 0).unwrap_err();
    assert_eq!(
        err,
        Error::Mismatch {
            what: "rows of x (no LoD) against sequences of y's reference level",
            expected: 1,
            found: 1 << 40,
        }
    );
}

#[test]
fn sort_batching_with_2_pow_40_steps_is_an_error_not_an_abort() {
    let rows = 1u64 << 40;
    let lod = Lod::try_from_offsets(vec![vec![0, rows]]).unwrap();
    let x = zero_width(rows as usize, lod.clone());
    let sorted = ops::SortedSequences::try_new(&lod, 0).unwrap();
    assert_eq!(sorted.num_steps(), rows);
    // Refused by the count of rows without bytes, before any allocation.
    let err = sorted.segment_inputs(&x).unwrap_err().to_string();
    assert!(
        err.contains("segment_inputs (one tensor per time step): 1099511627776 rows")
            && err.contains("MAX_ROWS_WITHOUT_BYTES"),
        "{err}"
    );
}

#[test]
fn splitting_an_empty_batch_into_usize_max_parts_is_an_error() {
    let empty = LodTensor::from_vec(Vec::<f32>::new(), vec![0], Lod::empty()).unwrap();
    assert!(matches!(
        ops::split(&empty, usize::MAX),
        Err(Error::Overflow {
            what: "split parts"
        })
    ));
    // 2^40 parts fit in an allocation's size, but not in memory: out of
    // memory, not an overflow.
    let wide = zero_width(1 << 40, Lod::empty());
    assert!(matches!(
        ops::split(&wide, 1 << 40),
        Err(Error::OutOfMemory {
            what: "split parts",
            ..
        })
    ));
    assert_eq!(ops::split(&wide, 3).unwrap().len(), 3);
}

#[test]
fn element_shapes_whose_product_overflows_do_not_panic() {
    for shape in [vec![0, 1 << 32, 1 << 32], vec![0, 1 << 32, 1 << 32, 0]] {
        let x = LodTensor::from_bytes(DType::Float32, shape.clone(), &[], Lod::empty()).unwrap();
        assert_eq!(x.row_numel(), 0);
        let lod = Lod::try_from_offsets(vec![vec![0, 0]]).unwrap();
        let x = LodTensor::from_bytes(DType::Float32, shape, &[], lod).unwrap();
        let padded = pad::pad(&x, 0f32).unwrap();
        assert_eq!(padded.tensor().numel(), 0);
        assert!(x.to_nested::<f32>().is_ok());
    }
}

#[test]
fn rebatching_keeps_empty_articles_and_empty_slices() {
    // Article 0 is empty: LoD lengths [[0, 1], [5]].
    let lod = Lod::try_from_lengths(&[vec![0, 1], vec![5]]).unwrap();
    let words = LodTensor::from_vec((0..5i64).collect(), vec![5], lod).unwrap();
    let batch = Batch::try_from_tensors([("words", words)]).unwrap();
    let out: Vec<Batch> = lodt::rebatch::rebatch([Ok::<_, Error>(batch)], 1)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(out.len(), 2);
    let first = out[0].get("words").unwrap();
    assert_eq!(first.lod().to_offsets(), [vec![0, 0], vec![0]]);
    assert_eq!(first.rows(), 0);
    let second = out[1].get("words").unwrap();
    assert_eq!(second.lod().to_lengths(), vec![vec![1], vec![5]]);
    assert_eq!(second.as_slice::<i64>().unwrap(), &[0, 1, 2, 3, 4]);
}

#[test]
fn paddle_refuses_lods_its_own_reader_would_reject() {
    let lod = Lod::try_from_offsets(vec![vec![0, 0, 2], vec![0, 1, 3]]).unwrap();
    let t = LodTensor::from_vec(vec![1f32, 2., 3.], vec![3], lod).unwrap();
    let empty_article = t.branch(&[0]).unwrap().to_owned();
    assert_eq!(empty_article.lod().to_offsets(), [vec![0u64]]);
    let err = paddle::to_bytes(&empty_article).unwrap_err();
    assert!(
        matches!(err, paddle::PaddleError::LodNotWritable { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("CheckLoD"), "{err}");
    // Everything else still round-trips.
    let bytes = paddle::to_bytes(&t).unwrap();
    assert_eq!(paddle::read_tensor(&bytes).unwrap(), t);
}

#[cfg(feature = "arrow")]
#[test]
fn arrow_round_trips_levels_of_zero_sequences() {
    use lodt::arrow::{ArrowOptions, from_arrow, to_arrow};
    let lod = Lod::try_from_offsets(vec![vec![0, 0, 2], vec![0, 1, 3]]).unwrap();
    let t = LodTensor::from_vec(vec![1f32, 2., 3.], vec![3], lod).unwrap();
    let empty = t.branch(&[0]).unwrap().to_owned();
    let (field, array) = to_arrow("x", &empty, &ArrowOptions::default()).unwrap();
    assert_eq!(array.len(), 0);
    assert_eq!(
        from_arrow(&field, &array, &ArrowOptions::default()).unwrap(),
        empty
    );
}

#[test]
fn segment_inputs_of_many_steps_without_bytes_is_refused_under_the_limit_too() {
    // 2^24 + 1 steps of no bytes: would allocate 2^24 tensors; refused.
    let rows = (lodt::tensor::MAX_ROWS_WITHOUT_BYTES + 1) as u64;
    let lod = Lod::try_from_offsets(vec![vec![0, rows]]).unwrap();
    let x = zero_width(rows as usize, lod.clone());
    let sorted = ops::SortedSequences::try_new(&lod, 0).unwrap();
    assert!(sorted.segment_inputs(&x).is_err());
    // At a few steps it works, and each step holds one row of no bytes.
    let lod = Lod::try_from_offsets(vec![vec![0, 3]]).unwrap();
    let x = zero_width(3, lod.clone());
    let steps = ops::SortedSequences::try_new(&lod, 0)
        .unwrap()
        .segment_inputs(&x)
        .unwrap();
    assert_eq!(
        steps.iter().map(|s| s.shape().to_vec()).collect::<Vec<_>>(),
        vec![vec![1, 0]; 3]
    );
}

#[test]
fn row_json_of_rows_without_bytes_is_bounded() {
    let rows = 1u64 << 40;
    let lod = Lod::try_from_offsets(vec![vec![0, 2, rows]]).unwrap();
    let x = zero_width(rows as usize, lod);
    // The first top-level row has 2 rows: printed.
    assert_eq!(lodt::tensor::row_json(&x, 0).unwrap(), "[[],[]]");
    // The second has 2^40 - 2: refused, not allocated.
    let err = lodt::tensor::row_json(&x, 1).unwrap_err().to_string();
    assert!(
        err.contains("1099511627774 rows of element shape [0] hold no bytes"),
        "{err}"
    );
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_refuses_rows_without_bytes_past_the_limit() {
    let rows = 1usize << 40;
    let lod = Lod::try_from_offsets(vec![vec![0, rows as u64]]).unwrap();
    let batch = lodt::Batch::try_from_tensors([("x", zero_width(rows, lod))]).unwrap();
    let mut w =
        lodt::arrow::parquet::ParquetWriter::try_new(Vec::new(), &Default::default()).unwrap();
    let err = w.write(&batch).unwrap_err().to_string();
    assert!(
        err.contains("writing Parquet (levels per row): 1099511627776 rows"),
        "{err}"
    );
    // Arrow IPC holds them in O(1) bytes.
    let (bytes, _) = lodt::arrow::ipc::write_ipc_file(
        Vec::new(),
        [Ok::<_, lodt::Error>(batch)],
        &Default::default(),
    )
    .unwrap();
    assert!(bytes.len() < 4096);
}
