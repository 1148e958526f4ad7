//! Concatenation and gathers along the top level: the bytes copied in one
//! pass into fresh memory (no zero-fill first; large results on huge or
//! prefaulted pages), the LoD joined by [`Lod::concat`]. [`merge()`](super::merge),
//! the dataset loader, [`Dataset::take`](crate::dataset::Dataset::take) and
//! [`LodtFile::take`](crate::LodtFile::take) all copy through here.
//! (Re-batching copies each input batch as it arrives, so that an input is
//! freed once copied and running out of memory is an error.)

use super::try_vec;
use crate::buffer::{Buffer, Pages};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::lod::Lod;
use crate::tensor::LodTensor;
use std::borrow::Borrow;

/// `parts` concatenated along their top level into one new tensor (a copy,
/// one pass over the bytes): rows follow one another, and each LoD level
/// continues the previous part's. Every part must have the dtype, element
/// shape and number of LoD levels of the first; 0-D tensors have no top
/// level to join. At least one part.
///
/// ```
/// use lodt::{ops, Lod, LodTensor};
/// let a = LodTensor::from_vec(vec![1i64, 2, 3], vec![3], Lod::try_from_lengths(&[vec![2, 1]])?)?;
/// let b = LodTensor::from_vec(vec![4i64], vec![1], Lod::try_from_lengths(&[vec![1]])?)?;
/// let ab = ops::concat([&a, &b])?;
/// assert_eq!(ab.as_slice::<i64>()?, &[1, 2, 3, 4]);
/// assert_eq!(ab.lod().to_lengths(), vec![vec![2, 1, 1]]);
/// assert!(ops::concat([&a, &LodTensor::from_vec(vec![4i32], vec![1], Lod::empty())?]).is_err());
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn concat<I>(parts: I) -> Result<LodTensor>
where
    I: IntoIterator,
    I::Item: Borrow<LodTensor>,
{
    let parts: Vec<I::Item> = parts.into_iter().collect();
    let parts: Vec<&LodTensor> = parts.iter().map(Borrow::borrow).collect();
    let Some(&first) = parts.first() else {
        return Err(Error::InvalidArgument(
            "cannot concatenate 0 parts: expected at least one".into(),
        ));
    };
    for part in &parts {
        check_part(first, part)?;
    }
    join(
        &parts,
        first.dtype(),
        first.element_shape(),
        first.lod().num_levels(),
        Pages::Prefaulted,
    )
}

/// Top-level items `indices` of `t` (sequences with every level below, or
/// rows when `t` has no LoD) gathered in that order into one new tensor (a
/// copy, one pass over the bytes). An index may repeat; no index gives a
/// tensor of no items with `t`'s dtype, element shape and levels.
///
/// ```
/// use lodt::{ops, Lod, LodTensor};
/// let t = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
/// let g = ops::take(&t, &[2, 0, 2])?;
/// assert_eq!(g.as_slice::<i32>()?, &[3, 4, 5, 0, 3, 4, 5]);
/// assert_eq!(g.lod().to_lengths(), vec![vec![3, 1, 3]]);
/// assert_eq!(ops::take(&t, &[])?.top_level_rows(), 0);
/// assert!(ops::take(&t, &[3]).is_err());
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn take(t: &LodTensor, indices: &[usize]) -> Result<LodTensor> {
    if t.is_scalar() {
        return Err(scalar_error());
    }
    if indices.is_empty() {
        return Ok(t.slice_top(0, 0)?.compact());
    }
    let mut parts = try_vec(indices.len(), "gathered items")?;
    for &i in indices {
        parts.push(t.slice_top(i, i.saturating_add(1))?);
    }
    let refs: Vec<&LodTensor> = parts.iter().collect();
    join(
        &refs,
        t.dtype(),
        t.element_shape(),
        t.lod().num_levels(),
        Pages::Huge,
    )
}

/// The parts joined, unchecked but for sizes: the caller checked that every
/// part holding rows has `dtype` and `element_shape`, and that every part has
/// `levels` LoD levels (and a top level). No part gives a tensor of no items.
pub(crate) fn join(
    parts: &[&LodTensor],
    dtype: DType,
    element_shape: &[usize],
    levels: usize,
    pages: Pages,
) -> Result<LodTensor> {
    join_into(parts, dtype, element_shape, levels, |bytes| {
        Buffer::try_concat(bytes, pages)
    })
}

/// [`join`], the bytes copied by `copy` (into fresh memory, or a
/// [`BufferPool`](crate::buffer::BufferPool)'s).
pub(crate) fn join_into(
    parts: &[&LodTensor],
    dtype: DType,
    element_shape: &[usize],
    levels: usize,
    copy: impl FnOnce(&[&[u8]]) -> Result<Buffer>,
) -> Result<LodTensor> {
    let rows = parts
        .iter()
        .try_fold(0usize, |n, p| n.checked_add(p.rows()))
        .ok_or(Error::Overflow {
            what: "concatenated tensor rows",
        })?;
    let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
    let data = copy(&bytes)?;
    let lod = if parts.is_empty() {
        Lod::try_from_stored(vec![vec![0]; levels])?
    } else {
        let lods: Vec<&Lod> = parts.iter().map(|p| p.lod()).collect();
        Lod::concat(&lods)?
    };
    let mut shape = Vec::with_capacity(1 + element_shape.len());
    shape.push(rows);
    shape.extend_from_slice(element_shape);
    LodTensor::try_from_parts(dtype, shape, data, lod)
}

/// A part must match the first: dtype, element shape, levels, a top level.
pub(crate) fn check_part(first: &LodTensor, part: &LodTensor) -> Result<()> {
    if part.is_scalar() {
        return Err(scalar_error());
    }
    if part.dtype() != first.dtype() {
        return Err(Error::DTypeMismatch {
            expected: first.dtype(),
            found: part.dtype(),
        });
    }
    if part.element_shape() != first.element_shape() {
        return Err(Error::ShapeMismatch {
            what: "element shape of a concatenated part",
            expected: first.element_shape().iter().map(|&d| d as u64).collect(),
            found: part.element_shape().iter().map(|&d| d as u64).collect(),
        });
    }
    if part.lod().num_levels() != first.lod().num_levels() {
        return Err(Error::Mismatch {
            what: "LoD levels of a concatenated part",
            expected: first.lod().num_levels() as u64,
            found: part.lod().num_levels() as u64,
        });
    }
    Ok(())
}

fn scalar_error() -> Error {
    Error::ShapeMismatch {
        what: "concatenated part (0-D tensors have no top level to join)",
        expected: vec![1],
        found: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> LodTensor {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        LodTensor::from_vec((0..30i64).collect(), vec![15, 2], lod).unwrap()
    }

    #[test]
    fn take_of_every_item_in_order_is_a_copy_of_the_whole() {
        let t = words();
        let all = take(&t, &[0, 1, 2]).unwrap();
        assert_eq!(all, t);
        assert!(!all.buffer().shares_storage(t.buffer()));
        let swapped = take(&t, &[2, 0]).unwrap();
        assert_eq!(
            swapped.lod().to_lengths(),
            vec![vec![2, 3], vec![2, 3, 3, 2, 4]]
        );
        assert_eq!(&swapped.as_slice::<i64>().unwrap()[..4], &[20, 21, 22, 23]);
    }

    #[test]
    fn concat_of_slices_equals_merge() {
        let t = words();
        let parts = [t.slice_top(1, 3).unwrap(), t.slice_top(0, 1).unwrap()];
        assert_eq!(
            concat(&parts).unwrap(),
            super::super::merge(&parts).unwrap()
        );
        assert!(concat(Vec::<LodTensor>::new()).is_err());
    }

    #[test]
    fn large_results_go_to_a_map_with_the_same_bytes() {
        let rows = (33 << 20) / 8;
        let t = LodTensor::from_vec((0..rows as u64).collect(), vec![rows], Lod::empty()).unwrap();
        let g = take(&t, &[rows - 1, 0]).unwrap();
        assert_eq!(g.as_slice::<u64>().unwrap(), &[rows as u64 - 1, 0]);
        let both = concat([&t, &t]).unwrap();
        assert_eq!(both.rows(), 2 * rows);
        assert_eq!(both.as_slice::<u64>().unwrap()[rows + 5], 5);
    }

    #[test]
    fn zero_width_rows_join_without_bytes() {
        let lod = Lod::try_from_offsets(vec![vec![0, 1 << 40]]).unwrap();
        let t = LodTensor::try_from_parts(
            DType::Float32,
            vec![1 << 40, 0],
            Buffer::from_vec(Vec::<f32>::new()),
            lod,
        )
        .unwrap();
        let g = take(&t, &[0, 0]).unwrap();
        assert_eq!(g.rows(), 1 << 41);
        assert_eq!(g.as_bytes().len(), 0);
    }
}
