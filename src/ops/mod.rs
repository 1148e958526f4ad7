//! Sequence operations on LoD tensors, with PaddlePaddle's semantics.
//!
//! | Concept                                   | Here                                               |
//! |-------------------------------------------|----------------------------------------------------|
//! | `sequence_expand` (repeat x along y's LoD)| [`sequence_expand()`]                              |
//! | `SplitLoDTensor` / `MergeLoDTensor`       | [`split()`], [`merge()`]                           |
//! | concatenate, gather along the top level   | [`concat()`], [`take()`] (one pass, no zero-fill)  |
//! | `SortBySeqLen`, `SegmentInputs`, `ConcatOutputs` | [`SortedSequences`]                         |
//!
//! Every operation takes its tensors as `&LodTensor` (slices are tensors too,
//! so a branch or a split part goes in as it is) and its LoD arguments as
//! `&Lod`:
//!
//! ```
//! use lodt::{ops, Lod, LodTensor};
//! let x = LodTensor::from_vec(vec![1i32, 2, 3], vec![3, 1], Lod::empty())?;
//! let y = Lod::try_from_lengths(&[vec![2, 1, 3]])?;
//! let out = ops::sequence_expand(&x, &y, -1)?;
//! assert_eq!(out.as_slice::<i32>()?, &[1, 1, 2, 3, 3, 3]);
//! # Ok::<(), lodt::Error>(())
//! ```

use crate::buffer::AlignedBytes;
use crate::error::{Error, Result};
use crate::tensor::LodTensor;

pub(crate) mod concat;
pub mod pad;
pub mod seq_sort;
pub mod sequence_expand;
pub mod split_merge;

pub use concat::{concat, take};
pub use seq_sort::SortedSequences;
pub use sequence_expand::sequence_expand;
pub use split_merge::{merge, split};

/// The top-level batch of a tensor: its number of top-level sequences, or of
/// rows when it has no LoD (`None` for a 0-D tensor, which has no batch dimension).
pub(crate) fn batch_size(x: &LodTensor) -> Option<usize> {
    if x.is_scalar() {
        None
    } else if x.lod().is_empty() {
        Some(x.rows())
    } else {
        x.lod().num_sequences(0).ok()
    }
}

/// Items `begin..end` of the top of a tensor ([`LodTensor::slice_top`]).
pub(crate) fn slice_top(x: &LodTensor, begin: usize, end: usize) -> Result<LodTensor> {
    x.slice_top(begin, end)
}

/// A zeroed, 64-aligned buffer of `rows × row_bytes` bytes, the size checked.
pub(crate) fn alloc_rows(
    rows: usize,
    row_bytes: usize,
    what: &'static str,
) -> Result<AlignedBytes> {
    let len = rows
        .checked_mul(row_bytes)
        .ok_or(Error::Overflow { what })?;
    AlignedBytes::try_zeroed(len)
}

/// An empty `Vec` with room for `n` items, or an overflow error instead of an
/// abort when `n` (which may come from a LoD, not from bytes in memory) is too
/// large to allocate.
pub(crate) fn try_vec<T>(n: usize, what: &'static str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| crate::error::out_of_memory::<T>(n, what))?;
    Ok(v)
}

/// `usize::try_from` for LoD values, as an overflow error.
pub(crate) fn to_usize(value: u64, what: &'static str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::Overflow { what })
}
