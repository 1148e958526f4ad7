//! A packed mini-batch and the variable-length views training kernels take
//! (`cu_seqlens`, `max_seqlen`, `position_ids`).

use super::super::error::{DatasetError, Result};
use super::super::stream::MiniBatch;
use crate::batch::Batch;
use crate::tensor::LodTensor;

/// A packed mini-batch: the sequences of its bins, in order, as one
/// [`MiniBatch`], and where each bin (row of an `[R, L]` batch) starts.
///
/// ```
/// let b = lodt::dataset::PackedBatch { batch: lodt::dataset::MiniBatch { epoch: 0, ids: vec![2, 0], batch: lodt::Batch::new() },
///     bins: vec![0, 1, 2], truncated: vec![] };
/// assert_eq!(b.bins.len() - 1, 2); // two bins of one sequence each
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PackedBatch {
    /// The sequences.
    pub batch: MiniBatch,
    /// Bin `b` holds sequences `bins[b]..bins[b + 1]` (one bin without
    /// [`PackOptions::rows`](super::super::PackOptions::rows)).
    pub bins: Vec<usize>,
    /// With [`PackOptions::truncate`](super::super::PackOptions::truncate): the sequences cut, `(id, rows
    /// before the cut)`, in batch order (also in the batch's metadata under
    /// [`TRUNCATED_KEY`](super::TRUNCATED_KEY)).
    pub truncated: Vec<(u64, usize)>,
}

impl PackedBatch {
    /// Per bin (row), the `cu_seqlens` of level `level` of `tensor`
    /// relative to the row's first row, concatenated, and where each row's
    /// list starts in it (`rows + 1` entries).
    ///
    /// ```
    /// use lodt::{Batch, Lod, LodTensor};
    /// let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![2, 1, 3]])?)?;
    /// let b = lodt::dataset::PackedBatch { batch: lodt::dataset::MiniBatch { epoch: 0, ids: vec![0, 1, 2],
    ///     batch: Batch::try_from_tensors([("x", x)])? }, bins: vec![0, 2, 3], truncated: vec![] };
    /// let (cu, starts) = b.row_cu_seqlens("x", 0)?;
    /// assert_eq!((cu, starts), (vec![0, 2, 3, 0, 3], vec![0, 3, 5]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn row_cu_seqlens(&self, tensor: &str, level: usize) -> Result<(Vec<i32>, Vec<usize>)> {
        let t = self.batch.batch.get(tensor).ok_or_else(|| {
            DatasetError::InvalidArgument(format!("the packed batch has no tensor {tensor:?}"))
        })?;
        row_cu_seqlens(t, level, &self.bins)
    }
}

/// The metadata key of a packed `[R, L]` batch's bins: the top-level
/// sequence where each bin (row) starts, and the end, comma-separated.
///
/// ```
/// assert_eq!(lodt::dataset::BINS_KEY, "lodt.pack.bins");
/// ```
pub const BINS_KEY: &str = "lodt.pack.bins";

/// Per bin (row) of `t`, bin `b` holding top-level sequences
/// `bins[b]..bins[b + 1]`: the `cu_seqlens` of level `level` relative to
/// the row's first row, concatenated, and where each row's list starts in
/// it (`bins.len()` entries).
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![2, 1, 3]])?)?;
/// let (cu, starts) = lodt::dataset::row_cu_seqlens(&x, 0, &[0, 2, 3])?;
/// assert_eq!((cu, starts), (vec![0, 2, 3, 0, 3], vec![0, 3, 5]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn row_cu_seqlens(
    t: &LodTensor,
    level: usize,
    bins: &[usize],
) -> Result<(Vec<i32>, Vec<usize>)> {
    let abs = absolute(t, level)?;
    let top = absolute(t, 0)?;
    if bins.windows(2).any(|w| w[0] > w[1]) || bins.last().is_some_and(|&b| b >= top.len()) {
        return Err(DatasetError::InvalidArgument(format!(
            "bins {bins:?}: expected increasing sequence indices up to {}",
            top.len().saturating_sub(1)
        )));
    }
    let mut cu = Vec::new();
    cu.try_reserve(abs.len() + bins.len())
        .map_err(|e| DatasetError::Loader(format!("row cu_seqlens: {e}")))?;
    let mut starts = Vec::new();
    starts
        .try_reserve(bins.len())
        .map_err(|e| DatasetError::Loader(format!("row cu_seqlens: {e}")))?;
    let mut k = 0usize;
    for w in bins.windows(2) {
        let (lo, hi) = (top[w[0]], top[w[1]]);
        starts.push(cu.len());
        while k < abs.len() && abs[k] < lo {
            k += 1;
        }
        while k < abs.len() && abs[k] <= hi {
            cu.push(to_i32(abs[k] - lo)?);
            if abs[k] == hi {
                break;
            }
            k += 1;
        }
    }
    starts.push(cu.len());
    Ok((cu, starts))
}

/// The variable-length view of one LoD level of a tensor, as
/// FlashAttention's varlen functions and PyTorch's jagged tensors take it.
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let x = LodTensor::from_vec((0..5i64).collect(), vec![5], Lod::try_from_lengths(&[vec![2, 3]])?)?;
/// let v = lodt::dataset::varlen(&x, 0)?;
/// assert_eq!(v.cu_seqlens, vec![0, 2, 5]);
/// assert_eq!(v.max_seqlen, 3);
/// assert_eq!(v.position_ids, vec![0, 1, 0, 1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Varlen {
    /// The level's sequences as row offsets relative to the tensor's first
    /// row, first 0.
    pub cu_seqlens: Vec<i32>,
    /// The longest sequence, in rows.
    pub max_seqlen: usize,
    /// Per row, its position in its sequence (restarting at 0).
    pub position_ids: Vec<i64>,
}

/// Level `level`'s offsets in rows, rebased to 0.
pub(crate) fn absolute(t: &LodTensor, level: usize) -> Result<Vec<u64>> {
    let levels = t.lod().num_levels();
    if level >= levels {
        return Err(DatasetError::InvalidArgument(format!(
            "level {level}: the tensor has {levels} LoD level(s) (0 is the outermost)"
        )));
    }
    let mut abs = t.lod().to_absolute().swap_remove(level);
    let base = abs.first().copied().unwrap_or(0);
    for o in &mut abs {
        *o -= base;
    }
    Ok(abs)
}

fn to_i32(x: u64) -> Result<i32> {
    i32::try_from(x).map_err(|_| {
        DatasetError::InvalidArgument(format!(
            "offset {x} does not fit cu_seqlens' int32 (at most {})",
            i32::MAX
        ))
    })
}

/// The [`Varlen`] view of level `level` (0: outermost) of `t`: an outer
/// level's sequences are measured in rows.
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]])?;
/// let x = LodTensor::from_vec((0..6i64).collect(), vec![6], lod)?;
/// assert_eq!(lodt::dataset::varlen(&x, 0)?.cu_seqlens, vec![0, 3, 6]);
/// assert_eq!(lodt::dataset::varlen(&x, 1)?.cu_seqlens, vec![0, 1, 3, 6]);
/// assert!(lodt::dataset::varlen(&x, 2).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn varlen(t: &LodTensor, level: usize) -> Result<Varlen> {
    let abs = absolute(t, level)?;
    let mut cu_seqlens = Vec::new();
    cu_seqlens
        .try_reserve(abs.len())
        .map_err(|e| DatasetError::Loader(format!("cu_seqlens of {} sequences: {e}", abs.len())))?;
    let total = abs.last().copied().unwrap_or(0);
    let mut position_ids = Vec::new();
    position_ids
        .try_reserve(usize::try_from(total).unwrap_or(usize::MAX))
        .map_err(|e| DatasetError::Loader(format!("position_ids of {total} rows: {e}")))?;
    let mut max_seqlen = 0u64;
    for (i, &o) in abs.iter().enumerate() {
        cu_seqlens.push(to_i32(o)?);
        if let Some(&next) = abs.get(i + 1) {
            let len = next - o;
            max_seqlen = max_seqlen.max(len);
            position_ids.extend(0..len as i64);
        }
    }
    Ok(Varlen {
        cu_seqlens,
        max_seqlen: max_seqlen as usize,
        position_ids,
    })
}

/// The rows of tensor `tensor` of each of the `n` top-level sequences of
/// `batch` (1 each for a tensor without LoD).
pub(crate) fn row_counts(batch: &Batch, n: usize, tensor: usize) -> Result<Vec<usize>> {
    let Some((_, t)) = batch.iter().nth(tensor) else {
        return Err(DatasetError::Loader(format!(
            "a window lacks tensor {tensor}"
        )));
    };
    let mut out = Vec::new();
    out.try_reserve(n)
        .map_err(|e| DatasetError::Loader(format!("a window of {n} sequences: {e}")))?;
    if t.lod().num_levels() == 0 {
        out.resize(n, 1);
    } else {
        let abs = absolute(t, 0)?;
        out.extend(abs.windows(2).map(|w| (w[1] - w[0]) as usize));
    }
    if out.len() != n {
        return Err(DatasetError::Loader(format!(
            "a window of {n} sequences has {} in tensor {tensor}",
            out.len()
        )));
    }
    Ok(out)
}
