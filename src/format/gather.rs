//! Many items of a file read at once ([`LodtFile::take_level`],
//! [`LodtFile::prefetch`]): the bytes they need are asked of the source all
//! together, sorted by file offset and merged where they nearly touch, before
//! any is read ([`RangeSource::will_gather`](super::RangeSource::will_gather)),
//! so that on a file not in the page cache the reads run concurrently
//! instead of one page fault at a time; the items are then handed out in the
//! caller's order.
//!
//! Two rounds: the heads of the batches not touched yet (header, metadata,
//! checksum table and, in most files, the LoD), which parsing the batches
//! needs; then the items' body bytes, which the batches' LoD locate.

use super::error::Result;
use super::reader::{BatchView, LodtFile};
use super::row_index::RowLocation;
use crate::error::out_of_memory;
use crate::{Error, LodTensor};
use std::ops::Range;

/// Ranges less than this apart are fetched as one. 0: only ranges that
/// touch or overlap are merged (the OS reads whole pages anyway). Measured on
/// the peers benchmark's cold random sentences (`bench/RESULTS.md`): gaps of
/// 0, 4 KiB and 32 KiB were within the noise of one another, 256 KiB was
/// about 1.7 times slower (it reads more than the items).
pub(crate) const GATHER_GAP: u64 = 0;

/// The first bytes of a batch fetched before it is parsed: the header, the
/// metadata, the checksum table and the LoD of most batches.
pub(crate) const GATHER_HEAD: u64 = 64 << 10;

/// `ranges` sorted by start, with those less than `gap` bytes apart (or
/// overlapping) merged into one; empty ranges dropped.
pub(crate) fn coalesce(mut ranges: Vec<Range<u64>>, gap: u64) -> Vec<Range<u64>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_unstable_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// The items of one gather: for each tensor name of the template batch, the
/// item of that tensor in each requested row, in the caller's order.
pub(crate) struct Gathered<'a> {
    /// The batch the first item is in (its metadata, names and dtypes make
    /// the result).
    pub(crate) template: BatchView<'a>,
    /// Per tensor of the template: its name and the items (zero-copy slices).
    pub(crate) parts: Vec<(&'a str, Vec<LodTensor>)>,
}

impl LodtFile {
    /// Asks the source for the bytes of items `items` at LoD level `level`
    /// (see [`LodtFile::take_level`]) of every tensor, all at once, sorted by
    /// file offset, and returns without waiting for them: on a file not in the
    /// page cache, reading the items afterwards (in any order, zero-copy
    /// through [`LodtFile::batch`], or with [`LodtFile::take_level`]) waits for
    /// reads that ran concurrently instead of faulting them in one at a time.
    /// The batches touched are parsed and checked (an error for a row out of
    /// range, as [`LodtFile::take_level`] gives). Bytes already in memory cost
    /// a check of each range.
    ///
    /// ```
    /// use lodt::{format, Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]])?;
    /// let x = LodTensor::from_vec((0..6i32).collect(), vec![6], lod)?;
    /// format::save_batch(&path, &Batch::try_from_tensors([("x", x)])?)?;
    /// let file = format::LodtFile::open(&path)?;
    /// let at = [format::RowLocation { batch: 0, row: 2 }];
    /// file.prefetch(1, &at)?; // the third sentence, fetched
    /// let x = file.batch(0)?.tensor("x")?;
    /// assert_eq!(x.sequence(1, 2)?.as_slice::<i32>()?, &[3, 4, 5]);
    /// assert!(file.prefetch(1, &[format::RowLocation { batch: 0, row: 3 }]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prefetch(&self, level: usize, items: &[RowLocation]) -> Result<()> {
        self.gather(level, items, false).map(drop)
    }

    /// The items of a gather, their bytes asked of the source (see the
    /// module's documentation); `None` when `items` is empty and the file
    /// has no batch.
    /// `copy`: the items are wanted as tensors (else `parts` holds no item).
    pub(crate) fn gather(
        &self,
        level: usize,
        items: &[RowLocation],
        copy: bool,
    ) -> Result<Option<Gathered<'_>>> {
        let mut touched: Vec<usize> = Vec::new();
        touched
            .try_reserve_exact(items.len().max(1))
            .map_err(|_| out_of_memory::<usize>(items.len().max(1), "rows taken"))?;
        touched.extend(items.iter().map(|at| at.batch));
        touched.sort_unstable();
        touched.dedup();
        let first = match items.first() {
            Some(at) => at.batch,
            None if self.num_batches() > 0 => {
                touched.push(0);
                0
            }
            None => return Ok(None),
        };
        // Round 1: the heads of the batches not parsed yet (the whole
        // sections for a source that copies them: it reads them whole).
        let heads: Vec<Range<u64>> = touched
            .iter()
            .filter(|&&k| !self.batch_parsed(k))
            .filter_map(|&k| self.batch_range(k).ok())
            .map(|r| match self.has_whole() {
                true => r.start..r.end.min(r.start.saturating_add(GATHER_HEAD)),
                false => r,
            })
            .collect();
        if !heads.is_empty() {
            self.source().will_gather(&coalesce(heads, GATHER_GAP));
        }
        let views = touched
            .iter()
            .map(|&k| self.batch_unhinted(k))
            .collect::<Result<Vec<_>>>()?;
        let counts = views
            .iter()
            .map(|v| items_of_batch(v, level))
            .collect::<Result<Vec<_>>>()?;
        let Some(template) = views.iter().find(|b| b.index() == first).cloned() else {
            return Ok(None);
        };
        // The items' file ranges (for a source whose batches are windows of
        // the whole file, a buffer's range is its file offsets; a copying
        // source read each section whole in round 1), and the items
        // themselves when the caller copies them.
        let whole = self.has_whole();
        let mut ranges: Vec<Range<u64>> = Vec::new();
        if whole {
            let n = template.len().saturating_mul(items.len());
            ranges
                .try_reserve_exact(n)
                .map_err(|_| out_of_memory::<Range<u64>>(n, "rows taken"))?;
        }
        let mut parts = Vec::with_capacity(template.len());
        for name in template.names() {
            let like = template.tensor(name)?;
            let mut tensors: Vec<LodTensor> = Vec::with_capacity(views.len());
            for (view, &count) in views.iter().zip(&counts) {
                let t = view.tensor(name)?;
                check_items(view.index(), name, level, items_in(&t, level)?, count)?;
                crate::ops::concat::check_part(&like, &t)?;
                tensors.push(t);
            }
            let mut items_of: Vec<LodTensor> = Vec::new();
            if copy {
                items_of
                    .try_reserve_exact(items.len())
                    .map_err(|_| out_of_memory::<LodTensor>(items.len(), "rows taken"))?;
            }
            for at in items {
                // Present: `touched` holds every batch of `items`.
                let p = touched.binary_search(&at.batch).unwrap_or(usize::MAX);
                let (Some(source), Some(&count)) = (tensors.get(p), counts.get(p)) else {
                    return Err(self.no_such_batch(at.batch));
                };
                if at.row >= count {
                    return Err(Error::InvalidArgument(format!(
                        "row {} of batch {}: the batch has {count} {}",
                        at.row,
                        at.batch,
                        level_items(level)
                    ))
                    .into());
                }
                if whole {
                    let rows = item_rows(source, level, at.row)?;
                    let (body, row) = (source.buffer().range(), source.row_bytes() as u64);
                    let at = body.start as u64;
                    ranges.push(at + rows.start * row..at + rows.end * row);
                }
                if copy {
                    items_of.push(item(source, level, at.row)?);
                }
            }
            parts.push((name, items_of));
        }
        // Round 2: every item's bytes at once.
        if whole {
            self.source().will_gather(&coalesce(ranges, GATHER_GAP));
        }
        Ok(Some(Gathered { template, parts }))
    }
}

/// Item `i` of level `level` of `t`, as a tensor whose top level is that
/// level (row `i` of a tensor with no LoD at level 0).
fn item(t: &LodTensor, level: usize, i: usize) -> crate::Result<LodTensor> {
    if level == 0 {
        t.slice_top(i, i.saturating_add(1))
    } else {
        t.slice_level(level, i, i.saturating_add(1))
    }
}

/// The rows of `t` that item `i` of level `level` holds (in range: checked
/// by the caller), with no tensor made.
fn item_rows(t: &LodTensor, level: usize, i: usize) -> crate::Result<Range<u64>> {
    let lod = t.lod();
    if level == 0 && lod.is_empty() {
        return Ok(i as u64..i as u64 + 1);
    }
    let mut r = lod.sequence_range(level, i)?;
    for l in level + 1..lod.num_levels() {
        let n = lod.num_sequences(l)? as u64;
        // Offset `x` of level `l` (`x` = n: the level's end).
        let at = |x: u64| -> crate::Result<u64> {
            match x.checked_sub(1) {
                Some(last) if x == n => Ok(lod.sequence_range(l, last as usize)?.end),
                _ if x < n => Ok(lod.sequence_range(l, x as usize)?.start),
                _ => Ok(0),
            }
        };
        r = at(r.start)?..at(r.end)?;
    }
    Ok(r)
}

/// The number of items of level `level` of `t` (its top-level rows at 0).
fn items_in(t: &LodTensor, level: usize) -> crate::Result<usize> {
    if level == 0 {
        Ok(t.top_level_rows())
    } else {
        t.lod().num_sequences(level)
    }
}

/// The number of items of level `level` of a batch: those of its first
/// tensor (0 for a batch with no tensor).
fn items_of_batch(view: &BatchView<'_>, level: usize) -> Result<usize> {
    if view.is_empty() {
        return Ok(0);
    }
    Ok(items_in(&view.tensor_at(0)?.1, level)?)
}

/// What the items of level `level` are called in messages.
fn level_items(level: usize) -> String {
    match level {
        0 => "top-level rows".to_string(),
        _ => format!("sequences at LoD level {level}"),
    }
}

/// An error unless tensor `name` of batch `k` has `expected` items of level
/// `level` (those of the batch's first tensor): it has `found`.
pub(crate) fn check_items(
    k: usize,
    name: &str,
    level: usize,
    found: usize,
    expected: usize,
) -> Result<()> {
    if found == expected {
        return Ok(());
    }
    let what = level_items(level);
    Err(Error::InvalidArgument(format!(
        "batch {k}: tensor {name:?} has {found} {what}, the batch's first tensor {expected}: \
         row access needs every tensor of a batch to have as many"
    ))
    .into())
}

#[cfg(test)]
mod tests {
    use super::coalesce;

    #[test]
    fn coalesce_sorts_merges_near_ranges_and_drops_empty_ones() {
        assert_eq!(
            coalesce(vec![10..20, 0..5, 22..30, 7..7, 40..41], 4),
            vec![0..5, 10..30, 40..41]
        );
        assert_eq!(coalesce(vec![0..10, 2..4, 11..12], 0), vec![0..10, 11..12]);
        assert_eq!(coalesce(vec![5..9, 0..3], 2), vec![0..9]);
        assert!(coalesce(Vec::new(), 1).is_empty());
    }
}
