//! Truncation (`spec/DATASET.md` 7.4, "Truncation"): with
//! [`PackOptions::truncate`](super::PackOptions::truncate), a sequence
//! longer than the capacity `K` is cut to its first `K` rows, in the counted
//! tensor and in every tensor whose rows align with it.

use super::super::error::{DatasetError, Result};
use crate::batch::Batch;
use crate::lod::Lod;
use crate::tensor::LodTensor;

/// The metadata key of a packed batch's truncated sequences: `id:rows`
/// (the sequence's rows of the counted tensor before the cut),
/// comma-separated, in batch order.
///
/// ```
/// assert_eq!(lodt::dataset::TRUNCATED_KEY, "lodt.pack.truncated");
/// ```
pub const TRUNCATED_KEY: &str = "lodt.pack.truncated";

/// `batch` (top-level sequences `ids`, whose rows of tensor `tensor` are
/// `rows`) with every sequence of more than `k` rows cut to its first `k`
/// rows: in tensor `tensor` and in every tensor with LoD whose rows of that
/// sequence are as many; a tensor without LoD (one row per sequence) is
/// kept whole; a tensor with LoD and another row count is an error. Returns
/// the cuts, `(id, rows before)`, in batch order.
pub(crate) fn truncate(
    batch: Batch,
    ids: &[u64],
    rows: &[usize],
    tensor: usize,
    k: usize,
) -> Result<(Batch, Vec<(u64, usize)>)> {
    let cut: Vec<usize> = (0..rows.len()).filter(|&i| rows[i] > k).collect();
    if cut.is_empty() {
        return Ok((batch, Vec::new()));
    }
    let counted = batch
        .iter()
        .nth(tensor)
        .map(|(name, _)| name.to_string())
        .unwrap_or_default();
    let mut out = Batch::new();
    *out.metadata_mut() = batch.metadata().clone();
    for (name, t) in batch.iter() {
        let err = |e| DatasetError::tensor(format!("truncating tensor {name:?}"), e);
        if t.lod().num_levels() == 0 {
            out.push(name.to_string(), t.clone())
                .map_err(|e| DatasetError::tensor("building a truncated batch", e))?;
            continue;
        }
        let mut pieces = Vec::with_capacity(2 * cut.len() + 1);
        let mut from = 0;
        for &i in &cut {
            let seq = t.slice_top(i, i + 1).map_err(err)?;
            if seq.rows() != rows[i] {
                return Err(DatasetError::InvalidArgument(format!(
                    "truncating sequence {} to {k} rows: tensor {name:?} has {} rows in it, the counted tensor {counted:?} {}; truncation cuts only tensors whose rows align with the counted one (or have no LoD)",
                    ids.get(i).copied().unwrap_or(u64::MAX),
                    seq.rows(),
                    rows[i]
                )));
            }
            if from < i {
                pieces.push(t.slice_top(from, i).map_err(err)?);
            }
            pieces.push(head(&seq, k).map_err(err)?);
            from = i + 1;
        }
        if from < rows.len() {
            pieces.push(t.slice_top(from, rows.len()).map_err(err)?);
        }
        let merged = crate::ops::concat(&pieces).map_err(err)?;
        out.push(name.to_string(), merged)
            .map_err(|e| DatasetError::tensor("building a truncated batch", e))?;
    }
    let report = cut
        .iter()
        .map(|&i| (ids.get(i).copied().unwrap_or(u64::MAX), rows[i]))
        .collect();
    Ok((out, report))
}

/// The first `k` rows of `seq` (one top-level sequence, with LoD): every
/// level keeps the sequences that start before the cut, the last of each
/// ending at it.
///
/// ```text
/// lengths [[2], [3, 4]], k = 5  ->  [[2], [3, 2]]
/// lengths [[2], [3, 4]], k = 2  ->  [[1], [2]]
/// ```
fn head(seq: &LodTensor, k: usize) -> crate::error::Result<LodTensor> {
    let levels = seq.lod().to_offsets();
    let mut out: Vec<Vec<u64>> = vec![Vec::new(); levels.len()];
    // Items of the level below that are kept (rows for the innermost).
    let mut kept = k as u64;
    for (l, offsets) in levels.iter().enumerate().rev() {
        let base = offsets.first().copied().unwrap_or(0);
        let mut level: Vec<u64> = offsets
            .iter()
            .map(|&o| o - base)
            .take_while(|&o| o < kept)
            .collect();
        level.push(kept);
        kept = (level.len() - 1) as u64;
        out[l] = level;
    }
    let mut t = seq.slice_rows(0, k)?;
    t.set_lod(Lod::try_from_stored(out)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_keeps_the_sequences_that_start_before_the_cut() {
        let lod = Lod::try_from_lengths(&[vec![1, 2], vec![4, 3, 4]]).unwrap();
        let t = LodTensor::from_vec((0..11i32).collect(), vec![11], lod).unwrap();
        let seq = t.slice_top(1, 2).unwrap();
        let h = head(&seq, 5).unwrap();
        assert_eq!(h.lod().to_lengths(), vec![vec![2], vec![3, 2]]);
        assert_eq!(h.as_slice::<i32>().unwrap(), &[4, 5, 6, 7, 8]);
        let h = head(&seq, 2).unwrap();
        assert_eq!(h.lod().to_lengths(), vec![vec![1], vec![2]]);
        assert_eq!(h.as_slice::<i32>().unwrap(), &[4, 5]);
    }

    #[test]
    fn truncate_cuts_aligned_tensors_keeps_per_sequence_ones_and_refuses_others() {
        let x = |lengths: Vec<u64>| {
            let n = lengths.iter().sum::<u64>() as usize;
            let lod = Lod::try_from_lengths(&[lengths]).unwrap();
            LodTensor::from_vec((0..n as i64).collect(), vec![n], lod).unwrap()
        };
        let label = LodTensor::from_vec(vec![7i64, 8, 9], vec![3], Lod::empty()).unwrap();
        let b = Batch::try_from_tensors([
            ("tokens", x(vec![2, 5, 1])),
            ("mask", x(vec![2, 5, 1])),
            ("label", label.clone()),
        ])
        .unwrap();
        let (t, cuts) = truncate(b, &[10, 11, 12], &[2, 5, 1], 0, 3).unwrap();
        assert_eq!(cuts, vec![(11, 5)]);
        for name in ["tokens", "mask"] {
            let v = t.get(name).unwrap();
            assert_eq!(v.lod().to_lengths(), vec![vec![2, 3, 1]]);
            assert_eq!(v.as_slice::<i64>().unwrap(), &[0, 1, 2, 3, 4, 7]);
        }
        assert_eq!(t.get("label").unwrap(), &label);
        let b = Batch::try_from_tensors([("tokens", x(vec![2, 5])), ("chars", x(vec![9, 20]))])
            .unwrap();
        let err = truncate(b, &[0, 1], &[2, 5], 0, 3).unwrap_err().to_string();
        assert!(err.contains("tensor \"chars\" has 20 rows"), "{err}");
    }
}
