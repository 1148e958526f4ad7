//! Acceptance tests of the LoD model: the design docs' and the user guide's
//! examples with their exact values, and one test per bad-input error.

use crate::common;

use lodt::ops::pad::{pad, unpad};
use lodt::ops::{SortedSequences, merge, sequence_expand, split};
use lodt::tensor::nested::Nested::{self, Rows, Seqs};
use lodt::{DType, Error, Lod, LodRule, LodTensor};

/// Labels `a`, `b`, ... as one-column i64 rows (`a` = 0).
fn labels(s: &str) -> Vec<i64> {
    s.split_whitespace()
        .map(|l| i64::from(l.as_bytes()[0] - b'a'))
        .collect()
}

fn rows(s: &str, lod: Lod) -> LodTensor {
    let v = labels(s);
    let n = v.len();
    LodTensor::from_vec(v, vec![n, 1], lod).unwrap()
}

fn offsets(levels: &[&[u64]]) -> Lod {
    Lod::try_from_offsets(levels.iter().map(|l| l.to_vec()).collect()).unwrap()
}

use common::{seed_lod, seed_tensor};

// --- offsets and lengths -------------------------------------------------------

#[test]
fn lengths_and_offsets_of_the_design_doc() {
    let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    assert_eq!(
        lod.to_offsets(),
        [vec![0, 3, 4, 6], vec![0, 3, 5, 9, 10, 12, 15]]
    );
    let back = Lod::try_from_offsets(vec![vec![0, 3, 4, 6], vec![0, 3, 5, 9, 10, 12, 15]])
        .unwrap()
        .to_lengths();
    assert_eq!(back, vec![vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]);
    assert_eq!(lod.num_rows(), Some(15));
    assert_eq!(lod.to_string(), "{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}");
}

// --- branch slices ----------------------------------------------------------------

#[test]
fn branch_2_is_rows_10_to_15_with_one_level() {
    let t = seed_tensor();
    let b = t.branch(&[2]).unwrap();
    assert_eq!(b.as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
    assert_eq!(b.lod().to_offsets(), [vec![0, 2, 5]]);
    // The window still reads the original offsets 10, 12, 15.
    assert_eq!(b.lod().raw_level(0), Some(&[10, 12, 15][..]));
}

#[test]
fn branch_2_0_is_rows_10_to_12_with_no_level() {
    let t = seed_tensor();
    let b = t.branch(&[2, 0]).unwrap();
    assert_eq!(b.as_slice::<i64>().unwrap(), &[10, 11]);
    assert_eq!(b.lod().num_levels(), 0);
    // Slicing the slice gives the same thing.
    assert_eq!(t.branch(&[2]).unwrap().branch(&[0]).unwrap(), b);
}

#[test]
fn branch_0_2_is_rows_5_to_9() {
    let t = seed_tensor();
    let b = t.branch(&[0, 2]).unwrap();
    assert_eq!(b.as_slice::<i64>().unwrap(), &[5, 6, 7, 8]);
    assert_eq!(b.lod().num_levels(), 0);
    let (_, rows) = seed_lod().branch(&[0, 2]).unwrap();
    assert_eq!(rows, 5..9);
}

#[test]
fn slice_in_level_and_sub_lod_with_absolute_offset() {
    let lod = Lod::try_from_offsets(vec![
        vec![0, 3, 4, 8],
        vec![0, 9, 10, 11, 13, 17, 19, 22, 24],
    ])
    .unwrap();
    let (sub, range) = lod.sub_lod_and_absolute_range(0, 1, 3).unwrap();
    assert_eq!(sub.to_lengths(), vec![vec![1, 4], vec![2, 4, 2, 3, 2]]);
    assert_eq!(range, 11..24);
    assert_eq!(
        seed_lod().slice_in_level(0, 1, 3).unwrap().to_offsets(),
        [vec![0, 1, 3], vec![0, 1, 3, 6]]
    );
}

// --- CheckLoD -----------------------------------------------------------------------

#[test]
fn check_lod_accepts_on_five_rows() {
    for levels in [vec![vec![0, 5]], vec![vec![0, 2, 2, 5]], vec![]] {
        let lod = Lod::try_from_offsets(levels.clone()).unwrap();
        lod.check_rows(5).unwrap();
        LodTensor::from_vec(vec![0f32; 5], vec![5], lod).unwrap();
    }
}

#[test]
fn check_lod_rejects_on_five_rows() {
    let invalid = |level: usize, index: usize, rule, expected, found| Error::InvalidLod {
        level,
        index,
        rule,
        expected,
        found,
    };
    // [[0,2,4]]: valid alone, but its last offset is not the 5 rows.
    let lod = Lod::try_from_offsets(vec![vec![0, 2, 4]]).unwrap();
    assert_eq!(
        lod.check_rows(5).unwrap_err(),
        invalid(0, 2, LodRule::RowMismatch, 5, 4)
    );
    assert_eq!(
        LodTensor::from_vec(vec![0f32; 5], vec![5], lod).unwrap_err(),
        Error::ShapeMismatch {
            what: "rows against the LoD's last offset",
            expected: vec![4],
            found: vec![5]
        }
    );
    assert_eq!(
        Lod::try_from_offsets(vec![vec![1, 2, 5]]).unwrap_err(),
        invalid(0, 0, LodRule::DoesNotStartAtZero, 0, 1)
    );
    assert_eq!(
        Lod::try_from_offsets(vec![vec![0, 3, 2, 5]]).unwrap_err(),
        invalid(0, 2, LodRule::Decreasing, 3, 2)
    );
    assert_eq!(
        Lod::try_from_offsets(vec![vec![0]]).unwrap_err(),
        invalid(0, 0, LodRule::TooShort, 2, 1)
    );
    assert_eq!(
        Lod::try_from_offsets(vec![vec![0, 2, 3], vec![0, 1, 5]]).unwrap_err(),
        invalid(0, 2, LodRule::LevelMismatch, 2, 3)
    );
    assert_eq!(
        lodt::lod::check_levels(&[&[0u64, 2, 4][..]], Some(5)).unwrap_err(),
        invalid(0, 2, LodRule::RowMismatch, 5, 4)
    );
}

// --- sequence_expand ----------------------------------------------------------------

#[test]
fn sequence_expand_repeats_x_sequences() {
    let x = rows("a b c d", offsets(&[&[0, 2, 4]]));
    let y = offsets(&[&[0, 2, 4], &[0, 3, 6, 7, 8]]);
    let out = sequence_expand(&x, &y, 0).unwrap();
    assert_eq!(
        out.as_slice::<i64>().unwrap(),
        &labels("a b a b c d c d")[..]
    );
    assert_eq!(out.lod().to_offsets(), [vec![0, 2, 4, 6, 8]]);
    assert_eq!(out.shape(), &[8, 1]);
}

#[test]
fn sequence_expand_uneven_x_sequences() {
    let x = rows("a b c d", offsets(&[&[0, 1, 4]]));
    let y = offsets(&[&[0, 2, 4], &[0, 3, 6, 6, 8]]);
    let out = sequence_expand(&x, &y, 0).unwrap();
    assert_eq!(
        out.as_slice::<i64>().unwrap(),
        &labels("a a b c d b c d")[..]
    );
    assert_eq!(out.lod().to_offsets(), [vec![0, 1, 2, 5, 8]]);
}

#[test]
fn sequence_expand_rows_of_x_without_lod() {
    let x = rows("a b c", Lod::empty());
    let y = offsets(&[&[0, 2, 3, 6]]);
    let out = sequence_expand(&x, &y, -1).unwrap();
    assert_eq!(out.as_slice::<i64>().unwrap(), &labels("a a b c c c")[..]);
    assert_eq!(out.lod().num_levels(), 0);
    // -1 is the last level: the same as 0 here.
    assert_eq!(sequence_expand(&x, &y, 0).unwrap(), out);
}

#[test]
fn sequence_expand_user_guide_example() {
    let x = LodTensor::from_vec(
        vec![1.1f32, 2.2, 3.3, 4.4],
        vec![4, 1],
        Lod::try_from_lengths(&[vec![1, 3]]).unwrap(),
    )
    .unwrap();
    let y = Lod::try_from_lengths(&[vec![1, 3], vec![1, 2, 1, 2]]).unwrap();
    let out = sequence_expand(&x, &y, 0).unwrap();
    assert_eq!(
        out.as_slice::<f32>().unwrap(),
        &[1.1, 2.2, 3.3, 4.4, 2.2, 3.3, 4.4, 2.2, 3.3, 4.4]
    );
    assert_eq!(out.lod().to_lengths(), vec![vec![1, 3, 3, 3]]);
    assert_eq!(out.shape(), &[10, 1]);
}

#[test]
fn sequence_expand_errors() {
    let x = rows("a b c d", offsets(&[&[0, 2, 4]]));
    let y = offsets(&[&[0, 2, 4], &[0, 3, 6, 7, 8]]);
    for bad in [2, 5, -2] {
        assert_eq!(
            sequence_expand(&x, &y, bad).unwrap_err(),
            Error::BadRefLevel {
                ref_level: bad,
                levels: 2
            }
        );
    }
    assert_eq!(
        sequence_expand(&x, &Lod::empty(), -1).unwrap_err(),
        Error::BadRefLevel {
            ref_level: -1,
            levels: 0
        }
    );
    // Level 1 of y has 4 sequences; x has 2.
    assert_eq!(
        sequence_expand(&x, &y, 1).unwrap_err(),
        Error::Mismatch {
            what: "sequences of x against sequences of y's reference level",
            expected: 4,
            found: 2
        }
    );
    let plain = rows("a b c", Lod::empty());
    assert_eq!(
        sequence_expand(&plain, &y, 0).unwrap_err(),
        Error::Mismatch {
            what: "rows of x (no LoD) against sequences of y's reference level",
            expected: 2,
            found: 3
        }
    );
    let rank1 = LodTensor::from_vec(vec![1i64, 2], vec![2], offsets(&[&[0, 1, 2]])).unwrap();
    assert!(matches!(
        sequence_expand(&rank1, &y, 0).unwrap_err(),
        Error::Mismatch {
            expected: 2,
            found: 1,
            ..
        }
    ));
    let two_levels = LodTensor::from_vec(vec![1i64; 4], vec![4, 1], y.clone()).unwrap_err();
    assert!(matches!(two_levels, Error::ShapeMismatch { .. }));
    let deep = LodTensor::from_vec(
        vec![1i64; 8],
        vec![8, 1],
        offsets(&[&[0, 2, 4], &[0, 3, 6, 7, 8]]),
    )
    .unwrap();
    assert_eq!(
        sequence_expand(&deep, &y, 0).unwrap_err(),
        Error::Mismatch {
            what: "LoD levels of sequence_expand's x (at most)",
            expected: 1,
            found: 2
        }
    );
}

// --- split / merge ------------------------------------------------------------------

#[test]
fn split_spreads_the_batch_over_parts() {
    let t = seed_tensor();
    let parts = split(&t, 2).unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(
        parts[0].lod().to_offsets(),
        [vec![0, 3, 4], vec![0, 3, 5, 9, 10]]
    );
    assert_eq!(
        parts[0].as_slice::<i64>().unwrap(),
        &(0..10).collect::<Vec<_>>()[..]
    );
    assert_eq!(parts[1].lod().to_offsets(), [vec![0, 2], vec![0, 2, 5]]);
    // Views: no copy.
    let whole = t.as_bytes().as_ptr_range();
    assert!(parts.iter().all(|p| whole.contains(&p.as_bytes().as_ptr())));
    // Batch 3 in 4 parts: step 1, three parts; in 3: three parts of one.
    assert_eq!(split(&t, 4).unwrap().len(), 3);
    let lens: Vec<usize> = split(&t, 3).unwrap().iter().map(|p| p.rows()).collect();
    assert_eq!(lens, vec![9, 1, 5]);
    assert_eq!(merge(&parts).unwrap(), t);
    assert_eq!(merge(split(&t, 3).unwrap()).unwrap(), t);
}

#[test]
fn merge_errors() {
    let a = LodTensor::from_vec(vec![1f32, 2.], vec![2, 1], offsets(&[&[0, 2]])).unwrap();
    let b64 = LodTensor::from_vec(vec![1f64, 2.], vec![2, 1], offsets(&[&[0, 2]])).unwrap();
    assert_eq!(
        merge([&a, &b64]).unwrap_err(),
        Error::DTypeMismatch {
            expected: DType::Float32,
            found: DType::Float64
        }
    );
    let wide = LodTensor::from_vec(vec![1f32; 4], vec![2, 2], offsets(&[&[0, 2]])).unwrap();
    assert_eq!(
        merge([&a, &wide]).unwrap_err(),
        Error::ShapeMismatch {
            what: "element shape of a merged part",
            expected: vec![1],
            found: vec![2]
        }
    );
    let flat = LodTensor::from_vec(vec![1f32, 2.], vec![2, 1], Lod::empty()).unwrap();
    assert_eq!(
        merge([&a, &flat]).unwrap_err(),
        Error::Mismatch {
            what: "LoD levels of a merged part",
            expected: 1,
            found: 0
        }
    );
    assert!(matches!(split(&a, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        merge(Vec::<LodTensor>::new()),
        Err(Error::InvalidArgument(_))
    ));
}

// --- sort-batching (seed 004) -----------------------------------------------------

#[test]
fn sort_by_length_segment_and_concat() {
    // Sequences of lengths 4, 2, 3 (rows 0..4, 4..6, 6..9).
    let x = LodTensor::from_vec(
        (0..9i64).collect(),
        vec![9, 1],
        Lod::try_from_lengths(&[vec![4, 2, 3]]).unwrap(),
    )
    .unwrap();
    let sorted = SortedSequences::try_new(x.lod(), 0).unwrap();
    assert_eq!(sorted.sorted_lengths(), &[4, 3, 2]);
    assert_eq!(sorted.order(), &[0, 2, 1]);
    assert_eq!(sorted.num_steps(), 4);
    assert_eq!(sorted.batch_sizes().collect::<Vec<_>>(), vec![3, 3, 2, 1]);
    let steps = sorted.segment_inputs(&x).unwrap();
    let batches: Vec<usize> = steps.iter().map(|s| s.rows()).collect();
    assert_eq!(batches, vec![3, 3, 2, 1]);
    let values: Vec<&[i64]> = steps.iter().map(|s| s.as_slice::<i64>().unwrap()).collect();
    assert_eq!(values, vec![&[0, 6, 4][..], &[1, 7, 5], &[2, 8], &[3]]);
    let restored = sorted.concat_outputs(&steps).unwrap();
    assert_eq!(restored, x);
    assert_eq!(restored.lod().to_lengths(), vec![vec![4, 2, 3]]);
}

#[test]
fn sort_is_stable_and_works_on_higher_levels() {
    let lod = Lod::try_from_lengths(&[vec![1, 3, 3, 0]]).unwrap();
    let s = SortedSequences::try_new(&lod, 0).unwrap();
    assert_eq!(s.order(), &[1, 2, 0, 3]);
    // Articles of sentences: sort the articles, steps are sentences.
    let t = seed_tensor();
    let s = SortedSequences::try_new(t.lod(), 0).unwrap();
    assert_eq!(s.order(), &[0, 2, 1]);
    let steps = s.segment_inputs(&t).unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0].lod().to_lengths(), vec![vec![3, 2, 1]]);
    assert_eq!(steps[0].as_slice::<i64>().unwrap(), &[0, 1, 2, 10, 11, 9]);
    assert_eq!(steps[2].as_slice::<i64>().unwrap(), &[5, 6, 7, 8]);
    assert_eq!(s.concat_outputs(&steps).unwrap(), t);
}

// --- conversions ------------------------------------------------------------------

#[test]
fn nested_vectors_round_trip() {
    let n: Nested<i64> = Seqs(vec![
        Seqs(vec![
            Rows(vec![0, 1, 2]),
            Rows(vec![3, 4]),
            Rows(vec![5, 6, 7, 8]),
        ]),
        Seqs(vec![Rows(vec![9])]),
        Seqs(vec![Rows(vec![10, 11]), Rows(vec![12, 13, 14])]),
    ]);
    let t = LodTensor::from_nested(&n, &[1]).unwrap();
    assert_eq!(t, seed_tensor());
    assert_eq!(t.to_nested::<i64>().unwrap(), n);
    assert_eq!(
        t.branch(&[2]).unwrap().to_nested::<i64>().unwrap(),
        Seqs(vec![Rows(vec![10, 11]), Rows(vec![12, 13, 14])])
    );
    assert_eq!(
        t.to_nested::<f32>().unwrap_err(),
        Error::DTypeMismatch {
            expected: DType::Float32,
            found: DType::Int64
        }
    );
}

#[test]
fn pad_and_unpad_one_level() {
    let t = LodTensor::from_vec(
        vec![1.1f32, 2.2, 3.3, 4.4],
        vec![4, 1],
        Lod::try_from_lengths(&[vec![1, 3]]).unwrap(),
    )
    .unwrap();
    let p = pad(&t, 0f32).unwrap();
    assert_eq!(p.tensor().shape(), &[2, 3, 1]);
    assert_eq!(
        p.tensor().as_slice::<f32>().unwrap(),
        &[1.1, 0., 0., 2.2, 3.3, 4.4]
    );
    assert_eq!(p.lengths(), &[vec![1, 3]]);
    assert_eq!(unpad(p.tensor(), p.lengths()).unwrap(), t);
    assert_eq!(
        unpad(p.tensor(), &[vec![1, 2, 1]]).unwrap_err(),
        Error::ShapeMismatch {
            what: "padded dimensions against the lengths (batch, then at least each level's longest)",
            expected: vec![3, 2],
            found: vec![2, 3]
        }
    );
}

// --- one test per bad-input error ---------------------------------------------------

#[test]
fn invalid_lod_is_rejected() {
    assert!(matches!(
        Lod::try_from_lengths(&[Vec::<u64>::new()]).unwrap_err(),
        Error::InvalidLod {
            rule: LodRule::TooShort,
            ..
        }
    ));
    assert!(matches!(
        Lod::try_from_offsets(vec![vec![0u64, 3, 1]]).unwrap_err(),
        Error::InvalidLod {
            rule: LodRule::Decreasing,
            index: 2,
            ..
        }
    ));
}

#[test]
fn dtype_mismatch_is_rejected() {
    let t = seed_tensor();
    assert_eq!(
        t.as_slice::<i32>().unwrap_err(),
        Error::DTypeMismatch {
            expected: DType::Int32,
            found: DType::Int64
        }
    );
    assert!(matches!(
        pad(&t, 0u8).unwrap_err(),
        Error::DTypeMismatch { .. }
    ));
}

#[test]
fn shape_mismatch_is_rejected() {
    assert_eq!(
        LodTensor::from_vec(vec![0u8; 6], vec![6], offsets(&[&[0, 5]])).unwrap_err(),
        Error::ShapeMismatch {
            what: "rows against the LoD's last offset",
            expected: vec![5],
            found: vec![6]
        }
    );
    assert_eq!(
        LodTensor::from_nested(&Seqs(vec![Rows(vec![1u8, 2, 3])]), &[2]).unwrap_err(),
        Error::ShapeMismatch {
            what: "values of a leaf against the element shape (a whole number of rows)",
            expected: vec![2],
            found: vec![3]
        }
    );
}

#[test]
fn data_length_is_rejected() {
    assert_eq!(
        LodTensor::from_bytes(DType::Float32, vec![2, 2], &[0u8; 15], Lod::empty()).unwrap_err(),
        Error::DataLength {
            dtype: DType::Float32,
            shape: vec![2, 2],
            expected: 16,
            found: 15
        }
    );
}

#[test]
fn out_of_range_slices_are_rejected() {
    let t = seed_tensor();
    assert_eq!(
        t.branch(&[3]).unwrap_err(),
        Error::OutOfRange {
            what: "branch index",
            index: 3,
            len: 3
        }
    );
    assert_eq!(
        t.branch(&[1, 1]).unwrap_err(),
        Error::OutOfRange {
            what: "branch index",
            index: 1,
            len: 1
        }
    );
    assert!(matches!(
        t.branch(&[0, 0, 0]).unwrap_err(),
        Error::OutOfRange {
            what: "branch depth",
            ..
        }
    ));
    assert!(matches!(
        seed_lod().slice_in_level(0, 2, 4).unwrap_err(),
        Error::OutOfRange { .. }
    ));
    assert!(matches!(
        t.slice_rows(10, 16).unwrap_err(),
        Error::OutOfRange {
            what: "row range end",
            index: 16,
            len: 16
        }
    ));
}

#[test]
fn bad_ref_level_is_rejected() {
    let x = rows("a b", Lod::empty());
    let y = offsets(&[&[0, 1, 2]]);
    assert_eq!(
        sequence_expand(&x, &y, 1).unwrap_err(),
        Error::BadRefLevel {
            ref_level: 1,
            levels: 1
        }
    );
    assert_eq!(
        sequence_expand(&x, &y, 1).unwrap_err().to_string(),
        "bad ref_level 1: expected -1 or 0..1"
    );
}
