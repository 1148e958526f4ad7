//! Every call into lodt's tensor core that slices, gathers or reads files:
//! the one module to adapt when the core's API changes.
//!
//! The bindings hold owned [`LodTensor`]s only. Slices are owned tensors that
//! share the parent's data and LoD offsets (lodt's Core 2.0: O(levels), no
//! copy), so a slice of a file-backed tensor keeps the file's map alive.

use lodt::buffer::ByteStorage;
use lodt::format::{FormatError, LodtFile};
use lodt::ops::SortedSequences;
use lodt::{Batch, Lod, LodTensor};

/// The `<i, j, ...>`-slice, sharing `t`'s data and offsets.
pub fn branch(t: &LodTensor, path: &[usize]) -> lodt::Result<LodTensor> {
    t.branch(path)
}

/// Sequence `index` of level `level`, sharing `t`'s data and offsets.
pub fn sequence(t: &LodTensor, level: usize, index: usize) -> lodt::Result<LodTensor> {
    t.sequence(level, index)
}

/// Sequences `begin..end` of level `level` (kept as the top level), sharing
/// `t`'s data and offsets.
pub fn slice_level(
    t: &LodTensor,
    level: usize,
    begin: usize,
    end: usize,
) -> lodt::Result<LodTensor> {
    t.slice_level(level, begin, end)
}

/// Rows `begin..end` with no LoD, sharing `t`'s data.
pub fn slice_rows(t: &LodTensor, begin: usize, end: usize) -> lodt::Result<LodTensor> {
    t.slice_rows(begin, end)
}

/// Top-level items `begin..end`: top-level sequences (with every level) when
/// `t` has a LoD, rows otherwise. Shares `t`'s data.
pub fn slice_top(t: &LodTensor, begin: usize, end: usize) -> lodt::Result<LodTensor> {
    t.slice_top(begin, end)
}

/// Top-level items `indices` of `t` (sequences with their levels, or rows),
/// gathered into a new tensor in that order (a copy).
pub fn take(t: &LodTensor, indices: &[usize]) -> lodt::Result<LodTensor> {
    lodt::ops::take(t, indices)
}

/// The number of top-level items of `t` (sequences of level 0, or rows).
pub fn top_level_rows(t: &LodTensor) -> usize {
    t.top_level_rows()
}

/// The offsets of `lod`, top level first, each level starting at 0.
pub fn offsets(lod: &Lod) -> Vec<Vec<u64>> {
    lod.to_offsets()
}

/// `t` with another LoD, sharing its data (checked against its rows).
pub fn with_lod(t: &LodTensor, lod: Lod) -> lodt::Result<LodTensor> {
    LodTensor::try_from_parts(t.dtype(), t.shape().to_vec(), t.buffer().clone(), lod)
}

/// `x`'s sequences split into at most `n` parts sharing its data (Paddle's `SplitLoDTensor`).
pub fn split(x: &LodTensor, n: usize) -> lodt::Result<Vec<LodTensor>> {
    lodt::ops::split(x, n)
}

/// Parts concatenated along their top level (Paddle's `MergeLoDTensor`).
pub fn merge(parts: &[LodTensor]) -> lodt::Result<LodTensor> {
    lodt::ops::merge(parts)
}

/// Paddle's `sequence_expand`.
pub fn sequence_expand(x: &LodTensor, y: &Lod, ref_level: i64) -> lodt::Result<LodTensor> {
    lodt::ops::sequence_expand(x, y, ref_level)
}

/// The sequences of level `level` of `lod` sorted by length.
pub fn sort(lod: &Lod, level: usize) -> lodt::Result<SortedSequences> {
    SortedSequences::try_new(lod, level)
}

/// `x` cut into time steps.
pub fn segment_inputs(s: &SortedSequences, x: &LodTensor) -> lodt::Result<Vec<LodTensor>> {
    s.segment_inputs(x)
}

/// Step outputs restored to the original order and LoD.
pub fn concat_outputs(s: &SortedSequences, steps: &[LodTensor]) -> lodt::Result<LodTensor> {
    s.concat_outputs(steps)
}

/// `padded` (no LoD) cut back into sequences of `lengths`.
pub fn unpad(padded: &LodTensor, lengths: &[Vec<u64>]) -> lodt::Result<LodTensor> {
    lodt::ops::pad::unpad(padded, lengths)
}

/// Pads `x` with `value` into a dense tensor; returns it with the lengths.
pub fn pad<T: lodt::Element>(x: &LodTensor, value: T) -> lodt::Result<(LodTensor, Vec<Vec<u64>>)>
where
    Vec<T>: ByteStorage,
{
    Ok(lodt::ops::pad::pad(x, value)?.into_parts())
}

/// Batch `k` of `file`, its tensors sharing the file's storage.
pub fn file_batch(file: &LodtFile, k: usize) -> Result<Batch, FormatError> {
    file.batch(k)?.to_batch()
}

/// Row `i` of `t` as a tensor of the element shape, with no LoD, sharing `t`'s data.
pub fn row(t: &LodTensor, i: usize) -> lodt::Result<LodTensor> {
    let r = slice_rows(t, i, i.saturating_add(1))?;
    LodTensor::try_from_parts(
        r.dtype(),
        r.element_shape().to_vec(),
        r.buffer().clone(),
        Lod::empty(),
    )
}

/// A copy of `t` in fresh memory (detached from a file's map).
pub fn deep_copy(t: &LodTensor) -> LodTensor {
    t.compact()
}
