//! Every call into lodt's tensor core that slices, gathers or reads files:
//! the one module to adapt when the core's API changes.
//!
//! The bindings hold owned [`LodTensor`]s only. Slices are owned tensors that
//! share the parent's data and LoD offsets (lodt's Core 2.0: O(levels), no
//! copy), so a slice of a file-backed tensor keeps the file's map alive.

use crate::ffi::HugeBuffer;
use lodt::buffer::{Buffer, ByteStorage};
use lodt::format::{FormatError, LodtFile};
use lodt::ops::SortedSequences;
use lodt::{Batch, Lod, LodTensor};
use std::sync::Arc;

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
    if t.lod().is_empty() {
        slice_rows(t, begin, end)
    } else {
        slice_level(t, 0, begin, end)
    }
}

/// Concatenates top-level slices into one new tensor (a copy); `empty` gives
/// the dtype, element shape and levels when there is none. Like
/// `lodt::ops::merge`, with one pass over the bytes (no zeroing first) into a
/// huge-page-backed buffer when large.
fn gather(
    parts: impl Iterator<Item = lodt::Result<LodTensor>>,
    empty: &LodTensor,
) -> lodt::Result<LodTensor> {
    gather_into(parts, empty, true)
}

/// [`gather`]; a large result goes to a huge-page-backed map when `huge`,
/// else to a map of small pages faulted in at once (a huge-page map can
/// stall in the kernel's compaction when memory is fragmented, e.g. by a
/// large page cache).
fn gather_into(
    parts: impl Iterator<Item = lodt::Result<LodTensor>>,
    empty: &LodTensor,
    huge: bool,
) -> lodt::Result<LodTensor> {
    let parts = parts.collect::<lodt::Result<Vec<_>>>()?;
    let Some(first) = parts.first() else {
        return Ok(slice_top(empty, 0, 0)?.compact());
    };
    let levels = first.lod().num_levels();
    let mut bytes = 0usize;
    let mut rows = 0usize;
    for part in &parts {
        if part.dtype() != first.dtype()
            || part.element_shape() != first.element_shape()
            || part.lod().num_levels() != levels
            || part.is_scalar()
        {
            // Let merge name the difference.
            return lodt::ops::merge(&parts);
        }
        bytes = bytes.saturating_add(part.as_bytes().len());
        rows = rows.saturating_add(part.rows());
    }
    let overflow = lodt::Error::Overflow {
        what: "gathered tensor size",
    };
    let storage: Arc<dyn ByteStorage> = if bytes >= HugeBuffer::MIN {
        let data = if huge {
            HugeBuffer::new(bytes)
        } else {
            HugeBuffer::new_prefaulted(bytes)
        };
        let mut data = data.map_err(|_| overflow)?;
        let mut at = 0;
        for part in &parts {
            let src = part.as_bytes();
            if let Some(dst) = data.as_mut_slice().get_mut(at..at + src.len()) {
                dst.copy_from_slice(src);
            }
            at += src.len();
        }
        Arc::new(data)
    } else {
        let mut data: Vec<u8> = Vec::new();
        data.try_reserve_exact(bytes).map_err(|_| overflow)?;
        for part in &parts {
            data.extend_from_slice(part.as_bytes());
        }
        Arc::new(data)
    };
    let mut offsets: Vec<Vec<u64>> = Vec::with_capacity(levels);
    for l in 0..levels {
        let mut level = vec![0u64];
        for part in &parts {
            let shift = level.last().copied().unwrap_or(0);
            level.extend(part.lod().offsets(l)?.skip(1).map(|o| o + shift));
        }
        offsets.push(level);
    }
    let mut shape = first.shape().to_vec();
    if let Some(r) = shape.first_mut() {
        *r = rows;
    }
    // Maps are page-aligned; allocations are 16-byte aligned (glibc, and
    // Rust's allocator on every supported target), enough for every dtype:
    // the tensor would copy misaligned bytes to an aligned buffer.
    LodTensor::try_from_parts(
        first.dtype(),
        shape,
        Buffer::from_storage(storage),
        Lod::try_from_stored(offsets)?,
    )
}

/// `parts` concatenated along the top level into one new tensor (a copy,
/// one pass over the bytes, into memory faulted in at once when large;
/// `empty` gives the
/// dtype, element shape and levels when there is no part).
pub fn concat(parts: Vec<LodTensor>, empty: &LodTensor) -> lodt::Result<LodTensor> {
    gather_into(parts.into_iter().map(Ok), empty, false)
}

/// Top-level items `indices` of `t` (sequences with their levels, or rows),
/// gathered into a new tensor in that order (a copy).
pub fn take(t: &LodTensor, indices: &[usize]) -> lodt::Result<LodTensor> {
    gather(
        indices
            .iter()
            .map(|&i| slice_top(t, i, i.saturating_add(1))),
        t,
    )
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

/// The number of top-level rows of batch `k` of `file`: that of its first
/// tensor (0 for a batch with none).
pub fn file_batch_rows(file: &LodtFile, k: usize) -> Result<usize, FormatError> {
    let batch = file.batch(k)?;
    if batch.is_empty() {
        return Ok(0);
    }
    Ok(batch.tensor_at(0)?.1.top_level_rows())
}

/// The top-level row `row` of batch `k` of `file`, in every tensor of the
/// batch: tensors of one sequence (or one row), sharing the file's storage.
/// Every tensor of the batch must have the same number of top-level rows.
pub fn file_row(file: &LodtFile, k: usize, row: usize) -> Result<Batch, FormatError> {
    let batch = file_batch(file, k)?;
    let rows = file_batch_rows(file, k)?;
    let mut out = Batch::new();
    *out.metadata_mut() = batch.metadata().clone();
    for (name, t) in batch.iter() {
        check_rows(k, name, t.top_level_rows(), rows)?;
        out.push(name, slice_top(t, row, row.saturating_add(1))?)?;
    }
    Ok(out)
}

fn check_rows(k: usize, name: &str, found: usize, expected: usize) -> Result<(), FormatError> {
    if found == expected {
        return Ok(());
    }
    Err(FormatError::Core(lodt::Error::InvalidArgument(format!(
        "batch {k}: tensor {name:?} has {found} top-level rows, the batch's first tensor {expected}: \
         row access needs every tensor of a batch to have as many"
    ))))
}

/// Gathers the global top-level rows `rows` (`(batch, row)` pairs) of `file`
/// into one batch (a copy), tensor by tensor, in the order given. The tensors
/// are those of the first batch named; every batch touched must have them,
/// with the same dtypes, element shapes and numbers of levels.
pub fn file_take(file: &LodtFile, rows: &[(usize, usize)]) -> Result<Batch, FormatError> {
    let first = rows.first().map_or(0, |&(k, _)| k);
    let mut touched: Vec<usize> = rows.iter().map(|&(k, _)| k).collect();
    touched.sort_unstable();
    touched.dedup();
    if touched.is_empty() && file.num_batches() > 0 {
        touched.push(0);
    }
    let views = touched
        .iter()
        .map(|&k| file.batch(k))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Batch::new();
    let Some(template) = views.iter().find(|b| b.index() == first) else {
        return Ok(out);
    };
    *out.metadata_mut() = template.metadata().clone();
    for name in template.names() {
        let tensors = views
            .iter()
            .map(|b| b.tensor(name))
            .collect::<Result<Vec<_>, _>>()?;
        for (b, t) in views.iter().zip(&tensors) {
            check_rows(
                b.index(),
                name,
                t.top_level_rows(),
                file_batch_rows(file, b.index())?,
            )?;
        }
        let parts = rows.iter().map(|&(k, r)| {
            let source = touched
                .binary_search(&k)
                .ok()
                .and_then(|p| tensors.get(p))
                .ok_or(lodt::Error::OutOfRange {
                    what: "batch",
                    index: k as u64,
                    len: file.num_batches() as u64,
                })?;
            slice_top(source, r, r.saturating_add(1))
        });
        let gathered = gather(parts, &template.tensor(name)?)?;
        out.push(name, gathered)?;
    }
    Ok(out)
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
