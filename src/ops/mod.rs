//! Sequence operations on LoD tensors, with PaddlePaddle's semantics.
//!
//! | Concept                                   | Here                                               |
//! |-------------------------------------------|----------------------------------------------------|
//! | `sequence_expand` (repeat x along y's LoD)| [`sequence_expand()`]                              |
//! | `SplitLoDTensor` / `MergeLoDTensor`       | [`split()`], [`split_shared()`], [`merge()`]       |
//! | `SortBySeqLen`, `SegmentInputs`, `ConcatOutputs` | [`SortedSequences`]                         |
//!
//! Every operation takes its tensor arguments as anything that converts into a
//! [`LodTensorView`] (a `&LodTensor` or a view) and its LoD arguments as
//! anything that converts into a [`LodView`] (a `&Lod` or a view):
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
use crate::lod::Lod;
use crate::lod_view::LodView;
use crate::tensor::LodTensor;
use crate::view::LodTensorView;

pub mod seq_sort;
pub mod sequence_expand;
pub mod split_merge;

pub use seq_sort::SortedSequences;
pub use sequence_expand::sequence_expand;
pub use split_merge::{merge, split, split_shared};

impl<'a> From<&'a LodTensor> for LodTensorView<'a> {
    /// The view of the whole tensor ([`LodTensor::view`]).
    fn from(t: &'a LodTensor) -> Self {
        t.view()
    }
}

impl<'a> From<&LodTensorView<'a>> for LodTensorView<'a> {
    /// A copy of the view (views are cheap to clone).
    fn from(v: &LodTensorView<'a>) -> Self {
        v.clone()
    }
}

impl<'a> From<&'a Lod> for LodView<'a> {
    /// The view of the whole LoD ([`Lod::as_view`]).
    fn from(lod: &'a Lod) -> Self {
        lod.as_view()
    }
}

impl<'a> From<&LodView<'a>> for LodView<'a> {
    /// A copy of the view.
    fn from(v: &LodView<'a>) -> Self {
        v.clone()
    }
}

/// The top-level batch of a view: its number of top-level sequences, or of
/// rows when it has no LoD (`None` for a 0-D view, which has no batch dimension).
pub(crate) fn batch_size(x: &LodTensorView<'_>) -> Option<usize> {
    if x.shape().is_empty() {
        None
    } else if x.lod().is_empty() {
        Some(x.rows())
    } else {
        x.lod().num_sequences(0).ok()
    }
}

/// Items `begin..end` of the top of a view: top-level sequences (keeping every
/// level) when it has a LoD, rows otherwise. No copy.
pub(crate) fn slice_top<'a>(
    x: &LodTensorView<'a>,
    begin: usize,
    end: usize,
) -> Result<LodTensorView<'a>> {
    if x.lod().is_empty() {
        x.slice_rows(begin, end)
    } else {
        x.slice_level(0, begin, end)
    }
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
        .map_err(|_| Error::Overflow { what })?;
    Ok(v)
}

/// `usize::try_from` for LoD values, as an overflow error.
pub(crate) fn to_usize(value: u64, what: &'static str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::Overflow { what })
}
