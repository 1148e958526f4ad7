//! Padding: a LoD tensor to a dense tensor plus lengths, and back (Paddle's
//! `sequence_pad` / `sequence_unpad`, TensorFlow's `RaggedTensor.to_tensor` /
//! `from_tensor`).
//!
//! A tensor with `k` LoD levels pads to the dense shape
//! `[n_top, max_0, ..., max_(k-1), element_shape...]`, where `n_top` is the
//! number of top-level sequences and `max_l` the longest length at level `l`.
//! Index `[i, j_0, ..., j_(k-1)]` is row `j_(k-1)` of sub-sequence
//! `j_(k-2)` ... of top-level sequence `i`; cells past a sequence's end hold
//! the pad value. The lengths (`recursive_sequence_lengths`) are what unpads:
//!
//! ```text
//!  lengths [[3, 1, 2]], rows a..f      padded [3, 3] (+ element shape), pad 0
//!  a b c | d | e f                     a b c
//!                                      d 0 0
//!                                      e f 0
//! ```
//!
//! A tensor with no LoD is its own padded form, with no lengths.

use crate::buffer::ByteStorage;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::lod::Lod;
use crate::ops::alloc_rows;
use crate::tensor::LodTensor;
use std::ops::Range;

/// A dense, padded tensor and the lengths that unpad it. Made by [`pad`].
///
/// ```
/// use lodt::{ops::pad::pad, Lod, LodTensor};
/// let t = LodTensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], vec![6],
///                             Lod::try_from_lengths(&[vec![3, 1, 2]])?)?;
/// let padded = pad(&t, -1)?;
/// assert_eq!(padded.tensor().shape(), &[3, 3]);
/// assert_eq!(padded.tensor().as_slice::<i32>()?, &[1, 2, 3, 4, -1, -1, 5, 6, -1]);
/// assert_eq!(padded.lengths(), &[vec![3, 1, 2]]);
/// assert_eq!(padded.unpad()?, t);
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Padded {
    tensor: LodTensor,
    lengths: Vec<Vec<u64>>,
    /// The LoD the lengths come from (may hold levels of zero sequences, which
    /// only slices of empty ranges have).
    lod: Lod,
}

impl Padded {
    /// The dense tensor, `[n_top, max_0, ..., max_(k-1), element_shape...]`, with no LoD.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![7u8, 8, 9], vec![3],
    ///     lodt::Lod::try_from_lengths(&[vec![1, 2]]).unwrap()).unwrap();
    /// assert_eq!(lodt::ops::pad::pad(&t, 0u8).unwrap().tensor().as_slice::<u8>().unwrap(), &[7, 0, 8, 9]);
    /// ```
    pub fn tensor(&self) -> &LodTensor {
        &self.tensor
    }

    /// The lengths of every level (`recursive_sequence_lengths`), top level first.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![7u8, 8, 9], vec![3],
    ///     lodt::Lod::try_from_lengths(&[vec![1, 2]]).unwrap()).unwrap();
    /// assert_eq!(lodt::ops::pad::pad(&t, 0u8).unwrap().lengths(), &[vec![1, 2]]);
    /// ```
    pub fn lengths(&self) -> &[Vec<u64>] {
        &self.lengths
    }

    /// The dense tensor and the lengths.
    ///
    /// ```
    /// let t = lodt::LodTensor::from_vec(vec![7u8], vec![1], lodt::Lod::empty()).unwrap();
    /// let (dense, lengths) = lodt::ops::pad::pad(&t, 0u8).unwrap().into_parts();
    /// assert_eq!((dense, lengths.len()), (t, 0));
    /// ```
    pub fn into_parts(self) -> (LodTensor, Vec<Vec<u64>>) {
        (self.tensor, self.lengths)
    }

    /// The LoD tensor back ([`unpad`] with these lengths).
    ///
    /// See the [type-level example](Padded).
    pub fn unpad(&self) -> Result<LodTensor> {
        unpad_with(&self.tensor, &self.lod)
    }
}

/// Pads `x` to a dense tensor, filling the cells past each sequence's end with
/// `pad_value` (Paddle's `sequence_pad` with the longest lengths, generalised
/// to every level). See the [module docs](self) for the layout.
///
/// An error if `T` is not `x`'s dtype, or if the padded size overflows or
/// cannot be allocated.
///
/// ```
/// use lodt::{ops::pad::pad, Lod, LodTensor};
/// // Two levels: articles of sentences of words.
/// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]])?;
/// let t = LodTensor::from_vec(vec![1u8, 2, 3, 4, 5, 6], vec![6], lod)?;
/// let p = pad(&t, 0u8)?;
/// assert_eq!(p.tensor().shape(), &[2, 2, 3]);
/// assert_eq!(p.tensor().as_slice::<u8>()?, &[1, 0, 0,  2, 3, 0,    4, 5, 6,  0, 0, 0]);
/// assert_eq!(p.unpad()?, t);
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn pad<T: Element>(x: &LodTensor, pad_value: T) -> Result<Padded>
where
    Vec<T>: ByteStorage,
{
    let values = x.as_slice::<T>()?;
    let lod = x.lod();
    if lod.is_empty() {
        return Ok(Padded {
            tensor: x.clone(),
            lengths: Vec::new(),
            lod: Lod::empty(),
        });
    }
    let overflow = "padded tensor size";
    let mut dims = vec![lod.num_sequences(0)?];
    for l in 0..lod.num_levels() {
        dims.push(lod.lengths(l)?.max().unwrap_or(0) as usize);
    }
    let numel = x.row_numel();
    let total = dims
        .iter()
        .try_fold(numel, |acc, &d| acc.checked_mul(d))
        .ok_or(Error::Overflow { what: overflow })?;
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|_| Error::Overflow { what: overflow })?;
    out.resize(total, pad_value);
    for_each_sequence(lod, &dims[1..], |rows, cell| {
        // In range: rows index x's rows; cells were sized for every sequence.
        let src = &values[rows.start * numel..rows.end * numel];
        out[cell * numel..cell * numel + src.len()].copy_from_slice(src);
        Ok(())
    })?;
    dims.extend_from_slice(x.element_shape());
    let lod = lod.clone();
    Ok(Padded {
        tensor: LodTensor::from_vec(out, dims, Lod::empty())?,
        lengths: lod.to_lengths(),
        lod,
    })
}

/// Calls `f(rows, first_cell)` for each last-level sequence of `lod`: its rows,
/// and the index of its first cell in the padded grid
/// `[n_top, dims[0], ..., dims[k-1]]` (counted in rows of the element shape).
fn for_each_sequence(
    lod: &Lod,
    dims: &[usize],
    mut f: impl FnMut(Range<usize>, usize) -> Result<()>,
) -> Result<()> {
    let overflow = "padded cell index";
    let levels = lod.num_levels();
    // cells[s]: the grid index of sequence s of the current level, in units
    // of that level's rows of the grid (so its items start at cells[s] * dims[l]).
    let mut cells: Vec<usize> = (0..lod.num_sequences(0)?).collect();
    for (l, &dim) in dims.iter().enumerate().take(levels) {
        let offsets: Vec<u64> = lod.offsets(l)?.collect();
        let last = l + 1 == levels;
        let mut next = Vec::with_capacity(if last {
            0
        } else {
            offsets[offsets.len() - 1] as usize
        });
        for (w, &cell) in offsets.windows(2).zip(&cells) {
            let first = cell
                .checked_mul(dim)
                .ok_or(Error::Overflow { what: overflow })?;
            let (b, e) = (w[0] as usize, w[1] as usize);
            if last {
                f(b..e, first)?;
            } else {
                next.extend(first..first + (e - b));
            }
        }
        cells = next;
    }
    Ok(())
}

/// Rebuilds a LoD tensor from a dense, padded tensor and the lengths of every
/// level (Paddle's `sequence_unpad`, TensorFlow's `RaggedTensor.from_tensor`).
///
/// `padded` has no LoD and shape `[n_top, d_0, ..., d_(k-1), element_shape...]`
/// with `n_top` the number of top-level sequences and each `d_l` at least the
/// longest length of level `l` (cells past it are ignored). The lengths must
/// form a valid LoD (`CheckLoD`). With no lengths, `padded` is returned as is.
///
/// ```
/// use lodt::{ops::pad::unpad, LodTensor, Lod};
/// let dense = LodTensor::from_vec(vec![1i64, 2, 0, 0, 3, 4, 5, 0], vec![2, 4], Lod::empty())?;
/// let t = unpad(&dense, &[vec![2, 3]])?;
/// assert_eq!(t.as_slice::<i64>()?, &[1, 2, 3, 4, 5]);
/// assert_eq!(t.lod().to_lengths(), vec![vec![2, 3]]);
/// assert!(unpad(&dense, &[vec![2, 5]]).is_err()); // longer than the padded width
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn unpad<L: AsRef<[u64]>>(padded: &LodTensor, lengths: &[L]) -> Result<LodTensor> {
    unpad_with(padded, &Lod::try_from_lengths(lengths)?)
}

fn unpad_with(padded: &LodTensor, lod: &Lod) -> Result<LodTensor> {
    let levels = lod.num_levels();
    if levels == 0 {
        return Ok(padded.clone());
    }
    if !padded.lod().is_empty() {
        return Err(Error::Mismatch {
            what: "LoD levels of a padded tensor",
            expected: 0,
            found: padded.lod().num_levels() as u64,
        });
    }
    let shape = padded.shape();
    let shape_u64 = || shape.iter().map(|&d| d as u64).collect::<Vec<_>>();
    if shape.len() < levels + 1 {
        return Err(Error::ShapeMismatch {
            what: "padded shape (rank at least the number of levels + 1)",
            expected: std::iter::repeat_n(0, levels + 1).collect(),
            found: shape_u64(),
        });
    }
    let mut expected = vec![lod.num_sequences(0)? as u64];
    for l in 0..levels {
        expected.push(lod.lengths(l)?.max().unwrap_or(0));
    }
    let fits = shape[0] as u64 == expected[0]
        && shape[1..=levels]
            .iter()
            .zip(&expected[1..])
            .all(|(&d, &m)| d as u64 >= m);
    if !fits {
        return Err(Error::ShapeMismatch {
            what: "padded dimensions against the lengths (batch, then at least each level's longest)",
            expected,
            found: shape[..=levels].iter().map(|&d| d as u64).collect(),
        });
    }
    let element_shape = &shape[levels + 1..];
    let cell_bytes = element_shape
        .iter()
        .try_fold(padded.dtype().size(), |acc, &d| acc.checked_mul(d))
        .ok_or(Error::Overflow {
            what: "padded cell size",
        })?;
    let rows = lod.num_rows().unwrap_or(0) as usize;
    let mut data = alloc_rows(rows, cell_bytes, "unpadded tensor size")?;
    let src = padded.as_bytes();
    let dst = data.as_mut_slice();
    for_each_sequence(lod, &shape[1..=levels], |rows, cell| {
        // In range: the padded dims hold every sequence (checked above) and
        // `dst` was sized for the LoD's rows.
        let len = (rows.end - rows.start) * cell_bytes;
        let from = cell * cell_bytes;
        dst[rows.start * cell_bytes..rows.start * cell_bytes + len]
            .copy_from_slice(&src[from..from + len]);
        Ok(())
    })?;
    let mut out_shape = Vec::with_capacity(1 + element_shape.len());
    out_shape.push(rows);
    out_shape.extend_from_slice(element_shape);
    LodTensor::try_new(padded.dtype(), out_shape, data, lod.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_pads_per_level() {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        let t = LodTensor::from_vec((1..=15i32).collect(), vec![15], lod).unwrap();
        let p = pad(&t, 0).unwrap();
        assert_eq!(p.tensor().shape(), &[3, 3, 4]);
        let v = p.tensor().as_slice::<i32>().unwrap();
        // Article 0, sentence 2 is rows 5..9 (values 6..=9).
        assert_eq!(&v[8..12], &[6, 7, 8, 9]);
        // Article 1 has one sentence: sentences 1 and 2 are all padding.
        assert_eq!(&v[16..24], &[0; 8]);
        assert_eq!(p.unpad().unwrap(), t);
        assert_eq!(unpad(p.tensor(), p.lengths()).unwrap(), t);
    }

    #[test]
    fn element_shapes_are_kept() {
        let lod = Lod::try_from_lengths(&[vec![1, 2]]).unwrap();
        let t = LodTensor::from_vec((0..6u16).collect(), vec![3, 2], lod).unwrap();
        let p = pad(&t, 9u16).unwrap();
        assert_eq!(p.tensor().shape(), &[2, 2, 2]);
        assert_eq!(
            p.tensor().as_slice::<u16>().unwrap(),
            &[0, 1, 9, 9, 2, 3, 4, 5]
        );
        assert_eq!(p.unpad().unwrap(), t);
    }

    #[test]
    fn wider_padding_unpads() {
        let dense = LodTensor::from_vec((0..12u8).collect(), vec![2, 3, 2], Lod::empty()).unwrap();
        let t = unpad(&dense, &[vec![1, 2]]).unwrap();
        assert_eq!(t.as_slice::<u8>().unwrap(), &[0, 1, 6, 7, 8, 9]);
        assert_eq!(t.shape(), &[3, 2]);
    }

    #[test]
    fn slices_of_empty_ranges_pad_and_unpad() {
        let lod = Lod::try_from_offsets(vec![vec![0, 0, 2], vec![0, 1, 3]]).unwrap();
        let t = LodTensor::from_vec(vec![1f32, 2., 3.], vec![3], lod).unwrap();
        let empty = t.branch(&[0]).unwrap();
        let p = pad(&empty, 0f32).unwrap();
        assert_eq!(p.tensor().shape(), &[0, 0]);
        assert_eq!(p.unpad().unwrap(), empty.to_owned());
        assert!(unpad(p.tensor(), p.lengths()).is_err());
    }
}
