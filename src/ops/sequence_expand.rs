//! `sequence_expand`: repeat the sequences (or rows) of `x` as many times as
//! the sequences of one level of `y`'s LoD have items (Paddle's
//! `sequence_expand` operator).
//!
//! ```text
//!  x      a b | c d          lod [[0, 2, 4]]
//!  y lod  level 0: [0, 2, 4]            <- ref_level 0: repeat counts 2, 2
//!         level 1: [0, 3, 6, 7, 8]
//!
//!  out    a b | a b | c d | c d   lod [[0, 2, 4, 6, 8]]
//! ```
//!
//! Only `y`'s LoD matters, never its data.

use super::{alloc_rows, to_usize};
use crate::error::{Error, Result};
use crate::lod::Lod;
use crate::tensor::LodTensor;

/// Expands `x` along level `ref_level` of `y_lod` (Paddle's `sequence_expand`).
///
/// For each sequence `i` of `y_lod`'s level `ref_level`, with `r_i` items
/// (`y_lod[ref_level][i+1] - y_lod[ref_level][i]`), sequence `i` of `x` (row
/// `i` when `x` has no LoD) is written `r_i` times, in order. When `x` has a
/// LoD, the output's LoD has one sequence per repetition, as long as the
/// sequence repeated; when it has none, neither has the output.
///
/// Rules (each broken rule is its own error):
/// - `ref_level` is -1 (the last level of `y_lod`) or a level of `y_lod`,
///   which has at least one level ([`Error::BadRefLevel`]);
/// - `x` has rank >= 2 and at most one LoD level ([`Error::Mismatch`]);
/// - `x`'s sequences (rows when it has no LoD) are as many as the sequences of
///   `y_lod`'s reference level ([`Error::Mismatch`]).
///
/// If every repeat count is 0, an `x` with a LoD gives 0 rows and a level
/// holding the single offset `[0]` (zero sequences), as in Paddle.
///
/// ```
/// use lodt::{ops::sequence_expand, Lod, LodTensor};
/// // The user guide's example.
/// let x = LodTensor::from_vec(vec![1.1f32, 2.2, 3.3, 4.4], vec![4, 1],
///                             Lod::try_from_lengths(&[vec![1, 3]])?)?;
/// let y = Lod::try_from_lengths(&[vec![1, 3], vec![1, 2, 1, 2]])?;
/// let out = sequence_expand(&x, &y, 0)?;
/// assert_eq!(out.as_slice::<f32>()?, &[1.1, 2.2, 3.3, 4.4, 2.2, 3.3, 4.4, 2.2, 3.3, 4.4]);
/// assert_eq!(out.lod().to_lengths(), vec![vec![1, 3, 3, 3]]);
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn sequence_expand(x: &LodTensor, y_lod: &Lod, ref_level: i64) -> Result<LodTensor> {
    let levels = y_lod.num_levels();
    let bad_ref = Error::BadRefLevel { ref_level, levels };
    let ref_level = match ref_level {
        -1 => levels.checked_sub(1).ok_or(bad_ref)?,
        r => match usize::try_from(r) {
            Ok(r) if r < levels => r,
            _ => return Err(bad_ref),
        },
    };
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(Error::Mismatch {
            what: "rank of sequence_expand's x (at least)",
            expected: 2,
            found: shape.len() as u64,
        });
    }
    let x_levels = x.lod().num_levels();
    if x_levels > 1 {
        return Err(Error::Mismatch {
            what: "LoD levels of sequence_expand's x (at most)",
            expected: 1,
            found: x_levels as u64,
        });
    }
    let repeats: Vec<u64> = y_lod.lengths(ref_level)?.collect();
    // Compare counts before building anything per sequence or row: a tensor
    // of zero-width rows may claim far more rows than it has bytes.
    let x_count = if x_levels == 1 {
        x.lod().num_sequences(0)?
    } else {
        x.rows()
    };
    if x_count != repeats.len() {
        return Err(Error::Mismatch {
            what: if x_levels == 1 {
                "sequences of x against sequences of y's reference level"
            } else {
                "rows of x (no LoD) against sequences of y's reference level"
            },
            expected: repeats.len() as u64,
            found: x_count as u64,
        });
    }
    // The rows of x's sequence i: x's LoD offsets, or i..i+1 without a LoD
    // (as many as y's sequences, which exist in memory).
    let x_offsets: Vec<u64> = if x_levels == 1 {
        x.lod().offsets(0)?.collect()
    } else {
        (0..=x_count as u64).collect()
    };
    let overflow = "sequence_expand output size";
    let mut out_rows = 0u64;
    let mut out_sequences = 0u64;
    for (&r, w) in repeats.iter().zip(x_offsets.windows(2)) {
        let rows = r
            .checked_mul(w[1] - w[0])
            .ok_or(Error::Overflow { what: overflow })?;
        out_rows = out_rows
            .checked_add(rows)
            .ok_or(Error::Overflow { what: overflow })?;
        out_sequences = out_sequences
            .checked_add(r)
            .ok_or(Error::Overflow { what: overflow })?;
    }
    let out_rows = to_usize(out_rows, overflow)?;
    let row_bytes = x.row_bytes();
    let mut data = alloc_rows(out_rows, row_bytes, overflow)?;
    let mut out_lod = Vec::new();
    if x_levels == 1 {
        let len = to_usize(out_sequences, overflow)?.saturating_add(1);
        out_lod
            .try_reserve_exact(len)
            .map_err(|_| Error::Overflow { what: overflow })?;
        out_lod.push(0u64);
    }
    let src = x.as_bytes();
    let dst = data.as_mut_slice();
    let mut at = 0usize;
    let mut end = 0u64;
    for (&r, w) in repeats.iter().zip(x_offsets.windows(2)) {
        // In range: x's offsets index its rows, and `dst` was sized for every
        // repetition above.
        let seq = &src[w[0] as usize * row_bytes..w[1] as usize * row_bytes];
        if !seq.is_empty() {
            for _ in 0..r {
                dst[at..at + seq.len()].copy_from_slice(seq);
                at += seq.len();
            }
        }
        if x_levels == 1 {
            let len = w[1] - w[0];
            for _ in 0..r {
                end += len;
                out_lod.push(end);
            }
        }
    }
    let lod = if x_levels == 1 {
        Lod::from_validated(vec![out_lod])
    } else {
        Lod::empty()
    };
    let mut out_shape = shape.to_vec();
    out_shape[0] = out_rows;
    LodTensor::try_new(x.dtype(), out_shape, data, lod)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(values: &[i32], lod: Lod) -> LodTensor {
        LodTensor::from_vec(values.to_vec(), vec![values.len(), 1], lod).unwrap()
    }

    #[test]
    fn zero_repeats_drop_sequences() {
        let x = rows(&[1, 2, 3], Lod::try_from_lengths(&[vec![1, 2]]).unwrap());
        let y = Lod::try_from_offsets(vec![vec![0, 0, 2]]).unwrap();
        let out = sequence_expand(&x, &y, 0).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[2, 3, 2, 3]);
        assert_eq!(out.lod().to_offsets(), [vec![0, 2, 4]]);
        let y = Lod::try_from_offsets(vec![vec![0, 0, 0]]).unwrap();
        let out = sequence_expand(&x, &y, 0).unwrap();
        assert_eq!(out.shape(), &[0, 1]);
        assert_eq!(out.lod().to_offsets(), [vec![0]]);
    }

    #[test]
    fn expands_a_slice() {
        let x = rows(
            &[1, 2, 3, 4],
            Lod::try_from_lengths(&[vec![1, 1, 2]]).unwrap(),
        );
        let tail = x.slice_level(0, 1, 3).unwrap();
        let y = Lod::try_from_lengths(&[vec![1, 2]]).unwrap();
        let out = sequence_expand(&tail, &y, -1).unwrap();
        assert_eq!(out.as_slice::<i32>().unwrap(), &[2, 3, 4, 3, 4]);
        assert_eq!(out.lod().to_lengths(), vec![vec![1, 2, 2]]);
    }
}
