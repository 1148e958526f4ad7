//! Split a batch into parts and merge parts back (Paddle's `SplitLoDTensor`
//! and `MergeLoDTensor`, which spread a mini-batch over devices).
//!
//! The batch is the top level: its sequences, or its rows when the tensor has
//! no LoD. With `step = ceil(batch / n)`, part `p` holds batch items
//! `p*step .. min((p+1)*step, batch)`, so there may be fewer than `n` parts.
//! Each part keeps every level, rebased:
//!
//! ```text
//!  lod {{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}, n = 2  ->  step = ceil(3/2) = 2
//!
//!  part 0: top sequences 0..2   rows 0..10   lod {{0, 3, 4}{0, 3, 5, 9, 10}}
//!  part 1: top sequence  2..3   rows 10..15  lod {{0, 2}{0, 2, 5}}
//! ```

use super::{batch_size, slice_top, try_vec};
use crate::error::{Error, Result};
use crate::tensor::LodTensor;
use std::borrow::Borrow;
use std::ops::Range;

/// The batch ranges of a split of `batch` items into at most `n` parts.
fn part_ranges(batch: usize, n: usize) -> Result<Vec<Range<usize>>> {
    // `n >= 1` (checked by the callers), so `step >= 1` when `batch >= 1`.
    let step = batch.div_ceil(n).max(1);
    let parts = batch.div_ceil(step);
    let mut ranges = try_vec(parts, "split parts")?;
    ranges.extend(
        (0..parts).map(|p| p.saturating_mul(step)..(p + 1).saturating_mul(step).min(batch)),
    );
    Ok(ranges)
}

fn check_parts_arg(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidArgument(
            "cannot split into 0 parts: expected n >= 1".into(),
        ));
    }
    Ok(())
}

/// Splits `x` into at most `n` parts along its top level (Paddle's
/// `SplitLoDTensor`). Each part is a tensor that shares `x`'s data and
/// offsets: no copy.
///
/// `step = ceil(batch / n)`, where `batch` is the number of top-level
/// sequences (rows when `x` has no LoD); part `p` holds items
/// `p*step .. min((p+1)*step, batch)` with every level kept and rebased.
/// As in Paddle, an empty batch gives `n` parts that are each the whole
/// (empty) `x`. A 0-D `x` has no batch dimension and is its own single part.
/// `n == 0` is an [`Error::InvalidArgument`].
///
/// ```
/// use lodt::{ops::split, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
/// let t = LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod)?;
/// let parts = split(&t, 2)?;
/// assert_eq!(parts.len(), 2);
/// assert_eq!(parts[1].as_slice::<i64>()?, &[10, 11, 12, 13, 14]);
/// assert_eq!(parts[1].lod().to_offsets(), [vec![0, 2], vec![0, 2, 5]]);
/// let whole = t.as_bytes().as_ptr_range();
/// assert!(whole.contains(&parts[1].as_bytes().as_ptr()));
/// // Four parts of a batch of 3: step 1, so only three parts.
/// assert_eq!(split(&t, 4)?.len(), 3);
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn split(x: &LodTensor, n: usize) -> Result<Vec<LodTensor>> {
    check_parts_arg(n)?;
    let Some(batch) = batch_size(x) else {
        return Ok(vec![x.clone()]);
    };
    if batch == 0 {
        let mut parts = try_vec(n, "split parts")?;
        parts.resize(n, x.clone());
        return Ok(parts);
    }
    part_ranges(batch, n)?
        .into_iter()
        .map(|r| slice_top(x, r.start, r.end))
        .collect()
}

/// Concatenates parts along their top level into one tensor (Paddle's
/// `MergeLoDTensor`): rows are concatenated and every LoD level is appended,
/// shifted by the level's current end.
///
/// As in Paddle, dtype and element shape are checked only on the parts that
/// hold rows: each must have the dtype ([`Error::DTypeMismatch`]) and element
/// shape ([`Error::ShapeMismatch`]) of the first part that holds rows, and the
/// result takes them. A part with no rows (often made as shape `[0]`, of any
/// dtype) adds only its LoD. Every part, empty or not, must have the first
/// part's number of LoD levels ([`Error::Mismatch`]). When no part holds rows,
/// the result takes the first part's dtype and element shape. No parts at all,
/// or several parts of which one is 0-D (no batch dimension), is an error.
/// Merging parts that hold no sequences keeps levels holding the single offset
/// `[0]`.
///
/// ```
/// use lodt::{ops::{merge, split}, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1, 2]])?;
/// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4, 5], vec![5], lod)?;
/// assert_eq!(merge(split(&t, 2)?)?, t);
/// let other = LodTensor::from_vec(vec![1i8], vec![1], Lod::empty())?;
/// assert!(merge([&t, &other]).is_err());
/// // An empty part of another dtype and shape [0] is skipped, as in Paddle.
/// let empty = LodTensor::from_vec(Vec::<f32>::new(), vec![0], Lod::try_from_lengths(&[vec![0]])?)?;
/// assert_eq!(merge([&empty, &t])?.as_slice::<u8>()?, &[1, 2, 3, 4, 5]);
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn merge<I>(parts: I) -> Result<LodTensor>
where
    I: IntoIterator,
    I::Item: Borrow<LodTensor>,
{
    let parts: Vec<I::Item> = parts.into_iter().collect();
    let parts: Vec<&LodTensor> = parts.iter().map(Borrow::borrow).collect();
    let Some(&first) = parts.first() else {
        return Err(Error::InvalidArgument(
            "cannot merge 0 parts: expected at least one".into(),
        ));
    };
    if parts.len() == 1 {
        return Ok(first.clone());
    }
    let levels = first.lod().num_levels();
    // Paddle's MergeLoDTensor takes dtype and dims from the first part that
    // holds data and checks only such parts against it.
    let reference = parts
        .iter()
        .copied()
        .find(|p| p.rows() > 0)
        .unwrap_or(first);
    for part in &parts {
        if part.shape().is_empty() {
            return Err(Error::ShapeMismatch {
                what: "merged part (0-D tensors have no batch dimension to merge along)",
                expected: vec![1],
                found: Vec::new(),
            });
        }
        if part.lod().num_levels() != levels {
            return Err(Error::Mismatch {
                what: "LoD levels of a merged part",
                expected: levels as u64,
                found: part.lod().num_levels() as u64,
            });
        }
        if part.rows() == 0 {
            continue;
        }
        if part.dtype() != reference.dtype() {
            return Err(Error::DTypeMismatch {
                expected: reference.dtype(),
                found: part.dtype(),
            });
        }
        if part.element_shape() != reference.element_shape() {
            return Err(Error::ShapeMismatch {
                what: "element shape of a merged part",
                expected: reference
                    .element_shape()
                    .iter()
                    .map(|&d| d as u64)
                    .collect(),
                found: part.element_shape().iter().map(|&d| d as u64).collect(),
            });
        }
    }
    // One pass over the bytes; the LoD by `Lod::concat` (parts of 0 rows add
    // their levels' empty sequences, whatever their dtype).
    super::concat::join(
        &parts,
        reference.dtype(),
        reference.element_shape(),
        levels,
        crate::buffer::Pages::Prefaulted,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::lod::Lod;

    fn seed() -> LodTensor {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod).unwrap()
    }

    #[test]
    fn ranges_follow_paddle() {
        assert_eq!(part_ranges(3, 2).unwrap(), vec![0..2, 2..3]);
        assert_eq!(part_ranges(5, 4).unwrap(), vec![0..2, 2..4, 4..5]);
        assert_eq!(part_ranges(4, 4).unwrap(), vec![0..1, 1..2, 2..3, 3..4]);
        assert_eq!(part_ranges(2, 8).unwrap(), vec![0..1, 1..2]);
    }

    #[test]
    fn split_seed_in_two() {
        let t = seed();
        let parts = split(&t, 2).unwrap();
        assert_eq!(parts[0].rows(), 10);
        assert_eq!(
            parts[0].lod().to_offsets(),
            [vec![0, 3, 4], vec![0, 3, 5, 9, 10]]
        );
        assert_eq!(merge(&parts).unwrap(), t);
        assert_eq!(parts[1].as_slice::<i64>().unwrap(), &[10, 11, 12, 13, 14]);
        assert!(parts[1].buffer().shares_storage(t.buffer()));
        assert_eq!(merge(&parts).unwrap(), t);
    }

    #[test]
    fn plain_tensors_split_by_rows() {
        let t = LodTensor::from_vec((0..10u16).collect(), vec![5, 2], Lod::empty()).unwrap();
        let parts = split(&t, 3).unwrap();
        let rows: Vec<usize> = parts.iter().map(|p| p.rows()).collect();
        assert_eq!(rows, vec![2, 2, 1]);
        assert_eq!(parts[2].as_slice::<u16>().unwrap(), &[8, 9]);
        assert_eq!(merge(parts).unwrap(), t);
    }

    #[test]
    fn empty_and_scalar_batches() {
        let empty = LodTensor::from_vec(Vec::<f32>::new(), vec![0, 3], Lod::empty()).unwrap();
        let parts = split(&empty, 3).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(merge(parts).unwrap(), empty);
        let scalar = LodTensor::from_vec(vec![1.5f64], vec![], Lod::empty()).unwrap();
        let parts = split(&scalar, 4).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(merge(parts).unwrap(), scalar);
        assert!(matches!(
            merge([&scalar, &scalar]),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(split(&scalar, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(
            merge(Vec::<LodTensor>::new()),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn empty_parts_skip_dtype_and_shape_checks_like_paddle() {
        let one = |n| Lod::try_from_lengths(&[vec![0; n]]).unwrap();
        let x = LodTensor::from_vec(
            (0..6).map(|i| i as f32 * 0.5).collect(),
            vec![2, 3],
            Lod::try_from_lengths(&[vec![1, 1]]).unwrap(),
        )
        .unwrap();
        // Empty parts as Paddle makes them: shape [0], any dtype, with a LoD.
        let e_i8 = LodTensor::from_vec(Vec::<i8>::new(), vec![0], one(1)).unwrap();
        let e_u8 = LodTensor::from_vec(Vec::<u8>::new(), vec![0, 7], one(2)).unwrap();
        let merged = merge([&e_i8, &x, &e_u8]).unwrap();
        assert_eq!(merged.dtype(), DType::Float32);
        assert_eq!(merged.shape(), &[2, 3]);
        assert_eq!(merged.lod().to_offsets(), [vec![0, 0, 1, 2, 2, 2]]);
        assert_eq!(
            merged.as_slice::<f32>().unwrap(),
            x.as_slice::<f32>().unwrap()
        );

        // Parts holding rows are still checked against the first of them.
        let y = LodTensor::from_vec(
            vec![1i8; 3],
            vec![1, 3],
            Lod::try_from_lengths(&[vec![1]]).unwrap(),
        )
        .unwrap();
        assert!(matches!(
            merge([&e_i8, &x, &y]),
            Err(Error::DTypeMismatch {
                expected: DType::Float32,
                found: DType::Int8
            })
        ));
        let z = LodTensor::from_vec(
            vec![0f32; 4],
            vec![1, 4],
            Lod::try_from_lengths(&[vec![1]]).unwrap(),
        )
        .unwrap();
        assert!(matches!(
            merge([&e_u8, &x, &z]),
            Err(Error::ShapeMismatch { .. })
        ));

        // The level count is checked on every part, empty or not.
        let flat_empty = LodTensor::from_vec(Vec::<f32>::new(), vec![0], Lod::empty()).unwrap();
        assert!(matches!(
            merge([&x, &flat_empty]),
            Err(Error::Mismatch {
                expected: 1,
                found: 0,
                ..
            })
        ));
        assert!(matches!(
            merge([&flat_empty, &x]),
            Err(Error::Mismatch {
                expected: 0,
                found: 1,
                ..
            })
        ));

        // No part holds rows: the first part's dtype and element shape.
        let all_empty = merge([&e_i8, &e_u8]).unwrap();
        assert_eq!(all_empty.dtype(), DType::Int8);
        assert_eq!(all_empty.shape(), &[0]);
        assert_eq!(all_empty.lod().to_offsets(), [vec![0, 0, 0, 0]]);
    }
}
