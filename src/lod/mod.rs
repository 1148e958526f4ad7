//! [`Lod`]: the multi-level offset index of a LoD tensor, owned.
//!
//! A LoD cuts the first dimension of a tensor into sequences, recursively.
//! Level 0 is the top level; each level holds offsets into the level below it,
//! and the last level holds offsets into the tensor's rows:
//!
//! ```text
//!  lengths (recursive_sequence_lengths)      offsets (the LoD)
//!  3           1  2                          level 0: [0, 3, 4, 6]
//!  3   2  4    1  2  3                       level 1: [0, 3, 5, 9, 10, 12, 15]
//!  ||| || |||| |  || |||                     rows:    0 .. 15
//! ```
//!
//! `level 0[i]..level 0[i+1]` are the sequences of level 1 that article `i`
//! holds; `level 1[j]..level 1[j+1]` are the rows of sentence `j`.
//!
//! Validation is Paddle's `CheckLoD`, in one place ([`check_levels`]):
//! every level has at least 2 offsets, starts at 0 and never decreases (empty
//! sequences are legal); the last offset of level `l` equals the number of
//! sequences of level `l + 1`; against a tensor, the last offset of the last
//! level equals the number of rows.

mod bytes;
mod concat;
mod offsets;
mod row_offsets;
mod segments;

pub use offsets::{Offsets, OffsetsIter};

use crate::buffer::{Buffer, ByteStorage};
use crate::error::{Error, LodRule, Result};
use smallvec::SmallVec;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;
use zerocopy::FromBytes;

/// The most LoD levels lodt's files hold: `.lodt` files (FORMAT.md) and
/// Paddle files, whose format sets no limit but whose users never come near
/// it. (Arrow and Parquet hold fewer: `lodt::arrow::MAX_LOD_LEVELS`.)
///
/// ```
/// assert_eq!(lodt::lod::MAX_LOD_LEVELS, 64);
/// assert_eq!(lodt::format::MAX_LOD_LEVELS, lodt::lod::MAX_LOD_LEVELS);
/// ```
pub const MAX_LOD_LEVELS: usize = 64;

/// An owned, validated LoD: offsets, top level first (Paddle's `LoD`).
///
/// The levels are windows of one shared block of `u64`s (a `Vec`, or the
/// bytes of a memory-mapped file), held by one reference count for the whole
/// LoD: cloning a LoD, slicing it ([`Lod::branch`], [`Lod::slice_level`]) or
/// sharing it between tensors (Paddle's `ShareConstLODFrom`) costs O(levels),
/// one reference count, and copies no offset. Each level is read as
/// [`Offsets`] ([`Lod::level`], [`Lod::levels`]). A LoD with no levels is the
/// LoD of a plain tensor (a model parameter) and holds no block.
///
/// ```
/// use lodt::Lod;
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
/// assert_eq!(lod.level(1).unwrap(), &[0, 3, 5, 9, 10, 12, 15]);
/// assert_eq!(lod.to_string(), "{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}");
/// assert_eq!(lod.num_rows(), Some(15));
/// ```
#[derive(Clone, Default)]
pub struct Lod {
    /// The block every level is a window of; `None` when there are no levels.
    block: Option<Arc<dyn ByteStorage>>,
    /// Each level's raw window of `block`'s bytes (aligned `u64`s, at least
    /// one per level of a valid LoD). Up to [`INLINE_LEVELS`] levels live
    /// inline: a slice allocates nothing.
    levels: Windows,
}

// SAFETY: the windows point into `block`, which the LoD keeps alive and which
// is `Send + Sync`; the LoD only reads through them (`&self`), as reading
// `block.bytes()` would, and never asks the block for mutable access.
unsafe impl Send for Lod {}
// SAFETY: as for `Send`: shared access only reads the block's bytes.
unsafe impl Sync for Lod {}

/// How many levels a [`Lod`] holds without a heap allocation (Paddle's
/// models rarely use more than two).
const INLINE_LEVELS: usize = 2;

/// A LoD's level windows: inline up to [`INLINE_LEVELS`], on the heap beyond.
type Windows = SmallVec<[NonNull<[u64]>; INLINE_LEVELS]>;

/// The raw window `range` (bytes) of `bytes`, as `u64` offsets: inside the
/// bytes, 8-aligned, a non-zero multiple of 8 bytes.
#[inline]
fn offsets_window(bytes: &[u8], range: Range<usize>) -> Result<NonNull<[u64]>> {
    crate::buffer::check_range(&range, bytes.len())?;
    let window = &bytes[range];
    match <[u64]>::ref_from_bytes(window) {
        Ok(raw) if !raw.is_empty() => Ok(NonNull::from(raw)),
        _ => Err(Error::Mismatch {
            what: "LoD offsets buffer (bytes; a non-zero multiple of 8, 8-aligned)",
            expected: window.len().next_multiple_of(8).max(8) as u64,
            found: window.len() as u64,
        }),
    }
}

fn out_of_range(what: &'static str, index: usize, len: usize) -> Error {
    Error::OutOfRange {
        what,
        index: index as u64,
        len: len as u64,
    }
}

/// Checks `levels` against Paddle's `CheckLoD` rules and, when `rows` is given,
/// against a tensor with that many rows. This is the one place the rules live.
///
/// ```
/// use lodt::lod::check_levels;
/// assert!(check_levels(&[&[0, 2, 2, 5][..]], Some(5)).is_ok());
/// assert!(check_levels(&[&[0, 2, 4][..]], Some(5)).is_err());
/// ```
pub fn check_levels<L: AsRef<[u64]>>(levels: &[L], rows: Option<u64>) -> Result<()> {
    check_levels_with(levels, rows, true)
}

/// [`check_levels`], with the non-decreasing scan optional: offsets made by a
/// checked prefix sum of lengths cannot decrease, so [`Lod::try_from_lengths`]
/// skips that pass (same result, one pass over the offsets fewer).
fn check_levels_with<L: AsRef<[u64]>>(
    levels: &[L],
    rows: Option<u64>,
    check_order: bool,
) -> Result<()> {
    for (l, level) in levels.iter().enumerate() {
        let level = level.as_ref();
        if level.len() < 2 {
            return Err(Error::InvalidLod {
                level: l,
                index: 0,
                rule: LodRule::TooShort,
                expected: 2,
                found: level.len() as u64,
            });
        }
        if level[0] != 0 {
            return Err(Error::InvalidLod {
                level: l,
                index: 0,
                rule: LodRule::DoesNotStartAtZero,
                expected: 0,
                found: level[0],
            });
        }
        let decreasing = if check_order {
            level.windows(2).position(|w| w[1] < w[0])
        } else {
            None
        };
        if let Some(i) = decreasing {
            return Err(Error::InvalidLod {
                level: l,
                index: i + 1,
                rule: LodRule::Decreasing,
                expected: level[i],
                found: level[i + 1],
            });
        }
        let last = level[level.len() - 1];
        if let Some(next) = levels.get(l + 1) {
            let sequences = (next.as_ref().len() as u64).saturating_sub(1);
            if last != sequences {
                return Err(Error::InvalidLod {
                    level: l,
                    index: level.len() - 1,
                    rule: LodRule::LevelMismatch,
                    expected: sequences,
                    found: last,
                });
            }
        } else if let Some(rows) = rows
            && last != rows
        {
            return Err(Error::InvalidLod {
                level: l,
                index: level.len() - 1,
                rule: LodRule::RowMismatch,
                expected: rows,
                found: last,
            });
        }
    }
    Ok(())
}

/// The rules every LoD view obeys: Paddle's `CheckLoD` ([`check_levels`]),
/// plus the one state that slicing an empty range produces and `CheckLoD`
/// rejects: once a level is the single offset `[0]` (zero sequences), every
/// level below it is `[0]` too and there are no rows. Readers of stored
/// tensors (which may be such slices) check with this; constructors from user
/// data use the strict [`check_levels`].
///
/// ```
/// use lodt::lod::{check_levels, check_view_levels};
/// let empty: [&[u64]; 2] = [&[0], &[0]];
/// assert!(check_view_levels(&empty, Some(0)).is_ok());
/// assert!(check_levels(&empty, Some(0)).is_err());
/// assert!(check_view_levels(&[&[0u64][..], &[0, 1][..]], Some(1)).is_err());
/// ```
pub fn check_view_levels<L: AsRef<[u64]>>(levels: &[L], rows: Option<u64>) -> Result<()> {
    match check_levels(levels, rows) {
        Err(Error::InvalidLod {
            level,
            rule: LodRule::TooShort,
            found: 1,
            ..
        }) if levels
            .get(level..)
            .is_some_and(|rest| rest.iter().all(|l| l.as_ref() == [0]))
            && rows.unwrap_or(0) == 0 =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Appends to `out` the offsets of `lengths`, starting at 0, with checked sums.
fn append_offsets(out: &mut Vec<u64>, lengths: &[u64]) -> Result<()> {
    out.reserve(lengths.len() + 1);
    out.push(0u64);
    let mut total = 0u64;
    let mut overflow = false;
    // `extend` from a slice iterator writes without a capacity check per
    // element; overflow is recorded and reported after the loop.
    out.extend(lengths.iter().map(|&len| {
        let (sum, wrapped) = total.overflowing_add(len);
        overflow |= wrapped;
        total = sum;
        sum
    }));
    if overflow {
        return Err(Error::Overflow {
            what: "LoD offsets from lengths",
        });
    }
    Ok(())
}

impl Lod {
    /// The LoD with no levels (a plain tensor).
    ///
    /// ```
    /// assert_eq!(lodt::Lod::empty().num_levels(), 0);
    /// ```
    pub fn empty() -> Self {
        Lod {
            block: None,
            levels: Windows::new(),
        }
    }

    /// Builds a LoD from offsets, top level first, and validates it
    /// (structure only; [`Lod::check_rows`] checks it against a tensor).
    ///
    /// ```
    /// use lodt::Lod;
    /// assert!(Lod::try_from_offsets(vec![vec![0, 2, 2, 5]]).is_ok());
    /// assert!(Lod::try_from_offsets(vec![vec![0, 3, 2, 5]]).is_err());
    /// ```
    pub fn try_from_offsets(levels: Vec<Vec<u64>>) -> Result<Self> {
        check_levels(&levels, None)?;
        Ok(Lod::from_validated(levels))
    }

    /// Builds a LoD from stored or computed offsets that may be the result of
    /// slicing: checked with [`check_view_levels`] (`CheckLoD`, plus levels of
    /// zero sequences below an empty slice). Readers of stored tensors and
    /// re-batching use this; user input goes through [`Lod::try_from_offsets`].
    ///
    /// ```
    /// use lodt::Lod;
    /// assert!(Lod::try_from_stored(vec![vec![0], vec![0]]).is_ok());
    /// assert!(Lod::try_from_offsets(vec![vec![0], vec![0]]).is_err());
    /// assert!(Lod::try_from_stored(vec![vec![0], vec![0, 1]]).is_err());
    /// ```
    pub fn try_from_stored(levels: Vec<Vec<u64>>) -> Result<Self> {
        check_view_levels(&levels, None)?;
        Ok(Lod::from_validated(levels))
    }

    /// Builds a LoD whose levels are windows of one buffer, with no copy (for
    /// example the offsets of a tensor in a memory-mapped file): `levels`
    /// gives each level's byte range within `block`, top level first. Each
    /// range must lie inside the buffer and hold 8-aligned little-endian
    /// `u64`s, at least one; the levels are checked like
    /// [`Lod::try_from_stored`]: each level's raw offsets start at 0 and obey
    /// `CheckLoD`, or are the zero-sequence levels below an empty slice. The
    /// LoD holds one reference to the buffer's storage.
    ///
    /// ```
    /// use lodt::{buffer::Buffer, Lod};
    /// let block = Buffer::from_vec(vec![0u64, 2, 0, 1, 3]);
    /// let lod = Lod::try_from_buffer(&block, &[0..16, 16..40])?;
    /// assert_eq!(lod.to_offsets(), vec![vec![0, 2], vec![0, 1, 3]]);
    /// assert!(lod.level_buffer(1).unwrap().shares_storage(&block));
    /// assert!(Lod::try_from_buffer(&block, &[8..24]).is_err()); // [2, 0]: not a LoD
    /// assert!(Lod::try_from_buffer(&block, &[0..12]).is_err()); // not whole u64s
    /// assert!(Lod::try_from_buffer(&block, &[0..48]).is_err()); // past the end
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_from_buffer(block: &Buffer, levels: &[Range<usize>]) -> Result<Self> {
        let lod = Lod::from_buffer_windows(block, levels.iter().cloned())?;
        {
            let raw: SmallVec<[&[u64]; 4]> = lod.levels.iter().map(|w| lod.raw(w)).collect();
            check_view_levels(&raw, None)?;
        }
        Ok(lod)
    }

    /// A LoD over windows `ranges` (bytes, relative to `block`) of `block`,
    /// checked for range and alignment only: the caller checked the levels
    /// with [`check_view_levels`] (a reader's batch check). O(levels), one
    /// reference count.
    #[inline]
    pub(crate) fn from_buffer_windows(
        block: &Buffer,
        ranges: impl IntoIterator<Item = Range<usize>>,
    ) -> Result<Self> {
        let bytes = block.as_slice();
        let mut levels = Windows::new();
        for r in ranges {
            levels.push(offsets_window(bytes, r)?);
        }
        let block = (!levels.is_empty()).then(|| block.storage().clone());
        Ok(Lod { block, levels })
    }

    /// Builds a LoD from lengths (Paddle's `recursive_sequence_lengths`).
    ///
    /// ```
    /// use lodt::Lod;
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.to_offsets(), [vec![0, 3, 4, 6], vec![0, 3, 5, 9, 10, 12, 15]]);
    /// ```
    pub fn try_from_lengths<L: AsRef<[u64]>>(lengths: &[L]) -> Result<Self> {
        let total = lengths
            .iter()
            .fold(0usize, |n, l| n.saturating_add(l.as_ref().len() + 1));
        let mut block = Vec::with_capacity(total);
        let mut bounds: SmallVec<[Range<usize>; 4]> = SmallVec::new();
        for l in lengths {
            let start = block.len();
            append_offsets(&mut block, l.as_ref())?;
            bounds.push(start..block.len());
        }
        // Prefix sums start at 0 and never decrease: only the length and the
        // level-to-level rules can fail.
        {
            let levels: SmallVec<[&[u64]; 4]> = bounds.iter().map(|r| &block[r.clone()]).collect();
            check_levels_with(&levels, None, false)?;
        }
        Ok(Lod::from_block(block, &bounds))
    }

    /// Wraps levels cut from a validated LoD. They obey every rule but one: a
    /// slice of an empty range keeps, at each level below it, a single offset
    /// `[0]` (zero sequences), which user input may not have. The levels go
    /// into one block (a single level is kept as it is, with no copy).
    pub(crate) fn from_validated(mut levels: Vec<Vec<u64>>) -> Self {
        if levels.len() == 1 {
            let block = levels.pop().unwrap_or_default();
            let len = block.len();
            return Lod::from_block(block, std::slice::from_ref(&(0..len)));
        }
        let total = levels.iter().map(Vec::len).sum();
        let mut block = Vec::with_capacity(total);
        let mut bounds: SmallVec<[Range<usize>; 4]> = SmallVec::new();
        for level in &levels {
            let start = block.len();
            block.extend_from_slice(level);
            bounds.push(start..block.len());
        }
        Lod::from_block(block, &bounds)
    }

    /// A LoD whose level `l` is `block[bounds[l]]` (indices in `u64`s, inside
    /// the block).
    fn from_block(block: Vec<u64>, bounds: &[Range<usize>]) -> Self {
        if bounds.is_empty() {
            return Lod::empty();
        }
        let block = Arc::new(block);
        let levels = bounds
            .iter()
            .map(|r| NonNull::from(block.get(r.clone()).unwrap_or(&[])))
            .collect();
        // Moving the `Arc` does not move the `Vec`'s heap buffer the windows
        // point into.
        let block: Arc<dyn ByteStorage> = block;
        Lod {
            block: Some(block),
            levels,
        }
    }

    /// The raw offsets of window `w` (one of `self.levels`).
    #[inline]
    fn raw(&self, w: &NonNull<[u64]>) -> &[u64] {
        // SAFETY: every window was made from a shared borrow of the bytes of
        // `self.block` (checked in range and aligned for `u64`), which the LoD
        // keeps alive; the `ByteStorage` contract keeps those bytes at the
        // same address and unchanged while the storage is shared, and the
        // LoD never takes mutable access to it. The borrow returned is tied
        // to `&self`, so it cannot outlive the block.
        unsafe { w.as_ref() }
    }

    /// The lengths form (Paddle's `recursive_sequence_lengths`).
    ///
    /// ```
    /// use lodt::Lod;
    /// let lod = Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.to_lengths(), vec![vec![3, 1, 2]]);
    /// ```
    pub fn to_lengths(&self) -> Vec<Vec<u64>> {
        self.levels().map(|l| l.lengths().collect()).collect()
    }

    /// The levels, top level first, each borrowed as [`Offsets`] (which
    /// compare equal to their rebased offsets); [`Lod::to_offsets`] copies
    /// them out.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![2], vec![1, 3]]).unwrap();
    /// let levels: Vec<_> = lod.levels().collect();
    /// assert_eq!(levels, [&vec![0, 2], &vec![0, 1, 4]]);
    /// assert_eq!(lod.levels().map(|l| l.num_sequences()).sum::<usize>(), 3);
    /// ```
    pub fn levels(
        &self,
    ) -> impl ExactSizeIterator<Item = &Offsets> + DoubleEndedIterator + Clone + '_ {
        self.levels.iter().map(|w| Offsets::from_raw(self.raw(w)))
    }

    /// The offsets of every level, rebased, copied out.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 1]]).unwrap();
    /// assert_eq!(lod.to_offsets(), vec![vec![0, 1]]);
    /// ```
    pub fn to_offsets(&self) -> Vec<Vec<u64>> {
        self.levels().map(Offsets::to_vec).collect()
    }

    /// Level `level`, if it exists.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 3]]).unwrap();
    /// assert_eq!(lod.level(0).unwrap(), &[0, 2, 3]);
    /// assert!(lod.level(1).is_none());
    /// ```
    pub fn level(&self, level: usize) -> Option<&Offsets> {
        self.levels
            .get(level)
            .map(|w| Offsets::from_raw(self.raw(w)))
    }

    fn window(&self, level: usize) -> Result<&Offsets> {
        self.level(level)
            .ok_or_else(|| out_of_range("level", level, self.levels.len()))
    }

    /// The storage of the block the levels are windows of (`None` for a LoD
    /// with no levels): a `Vec`, or the storage of the buffer the LoD was
    /// read from, such as a memory map. Every level's [`Offsets::raw`] lies
    /// in its bytes, so a consumer may keep a level's bytes alive by keeping
    /// this storage (what [`Lod::level_buffer`] does).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
    /// let (b, _) = lod.branch(&[2])?;
    /// assert!(Arc::ptr_eq(b.storage().unwrap(), lod.storage().unwrap()));
    /// assert!(lodt::Lod::empty().storage().is_none());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn storage(&self) -> Option<&Arc<dyn ByteStorage>> {
        self.block.as_ref()
    }

    /// The raw window of level `level` as a [`Buffer`] of the block's storage
    /// (no copy; one more reference to the storage), for consumers that keep
    /// the offsets' bytes (a zero-copy Arrow array, a writer).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
    /// let (b, _) = lod.branch(&[2])?;
    /// let buf = b.level_buffer(0).unwrap();
    /// assert_eq!(buf.len(), 24); // raw offsets [10, 12, 15]
    /// assert!(buf.shares_storage(&lod.level_buffer(1).unwrap()));
    /// assert!(b.level_buffer(1).is_none());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn level_buffer(&self, level: usize) -> Option<Buffer> {
        let block = self.block.as_ref()?;
        let raw = self.raw(self.levels.get(level)?);
        let start = (raw.as_ptr() as usize).checked_sub(block.bytes().as_ptr() as usize)?;
        Buffer::try_new(block.clone(), start..start + std::mem::size_of_val(raw)).ok()
    }

    /// The number of levels (`LoD.size()`).
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_lengths(&[vec![2], vec![1, 1]]).unwrap().num_levels(), 2);
    /// ```
    #[inline]
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Whether the LoD has no levels.
    ///
    /// ```
    /// assert!(lodt::Lod::empty().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The number of sequences in level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.num_sequences(0).unwrap(), 3);
    /// assert_eq!(lod.num_sequences(1).unwrap(), 6);
    /// assert!(lod.num_sequences(2).is_err());
    /// ```
    pub fn num_sequences(&self, level: usize) -> Result<usize> {
        Ok(self.window(level)?.num_sequences())
    }

    /// The rebased offsets of level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (branch, _) = lod.branch(&[2]).unwrap();
    /// assert_eq!(branch.offsets(0).unwrap().collect::<Vec<_>>(), vec![0, 2, 5]);
    /// ```
    pub fn offsets(&self, level: usize) -> Result<OffsetsIter<'_>> {
        Ok(self.window(level)?.iter())
    }

    /// The lengths of the sequences of level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.lengths(0).unwrap().collect::<Vec<_>>(), vec![3, 1, 2]);
    /// ```
    pub fn lengths(
        &self,
        level: usize,
    ) -> Result<impl ExactSizeIterator<Item = u64> + DoubleEndedIterator + '_> {
        Ok(self.window(level)?.lengths())
    }

    /// The raw window of level `level`: offsets as stored, not rebased. Its
    /// first value is the level's base.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (branch, _) = lod.branch(&[2]).unwrap();
    /// assert_eq!(branch.raw_level(0), Some(&[10, 12, 15][..]));
    /// ```
    pub fn raw_level(&self, level: usize) -> Option<&[u64]> {
        self.levels.get(level).map(|w| self.raw(w))
    }

    /// The number of rows the LoD indexes (the span of the last level), or
    /// `None` for a LoD with no levels.
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]]).unwrap().num_rows(), Some(5));
    /// ```
    pub fn num_rows(&self) -> Option<u64> {
        self.levels.last().map(|w| {
            let raw = self.raw(w);
            match (raw.first(), raw.last()) {
                (Some(first), Some(last)) => last - first,
                _ => 0,
            }
        })
    }

    /// The first row of this LoD within the rows of the LoD it was cut from
    /// (0 for an unsliced LoD).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.branch(&[2]).unwrap().0.base_row(), Some(10));
    /// ```
    pub fn base_row(&self) -> Option<u64> {
        self.levels
            .last()
            .map(|w| self.raw(w).first().copied().unwrap_or(0))
    }

    /// Whether both LoDs are the same windows of the same block (shared, as
    /// after a clone or Paddle's `ShareConstLODFrom`), not merely equal.
    ///
    /// ```
    /// let a = lodt::Lod::try_from_offsets(vec![vec![0, 2]]).unwrap();
    /// let b = lodt::Lod::try_from_offsets(vec![vec![0, 2]]).unwrap();
    /// assert!(a.ptr_eq(&a.clone()));
    /// assert!(a == b && !a.ptr_eq(&b));
    /// ```
    pub fn ptr_eq(&self, other: &Lod) -> bool {
        let same_block = match (&self.block, &other.block) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same_block && self.levels == other.levels
    }

    /// Checks the LoD against a tensor with `rows` rows (the last rule of `CheckLoD`).
    ///
    /// ```
    /// use lodt::Lod;
    /// let lod = Lod::try_from_offsets(vec![vec![0, 2, 2, 5]]).unwrap();
    /// assert!(lod.check_rows(5).is_ok());
    /// assert!(lod.check_rows(4).is_err());
    /// assert!(Lod::empty().check_rows(4).is_ok());
    /// ```
    pub fn check_rows(&self, rows: u64) -> Result<()> {
        match self.num_rows() {
            Some(found) if found != rows => {
                let last = self.levels.len() - 1;
                Err(Error::InvalidLod {
                    level: last,
                    index: self.raw(&self.levels[last]).len() - 1,
                    rule: LodRule::RowMismatch,
                    expected: rows,
                    found,
                })
            }
            _ => Ok(()),
        }
    }

    /// The range, in units of the next level (rows for the last level), of
    /// sequence `index` of level `level`, rebased (Paddle's `lod_element`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.sequence_range(0, 2).unwrap(), 4..6);
    /// assert_eq!(lod.sequence_range(1, 2).unwrap(), 5..9);
    /// ```
    pub fn sequence_range(&self, level: usize, index: usize) -> Result<Range<u64>> {
        let w = self.window(level)?;
        match (w.get(index), w.get(index + 1)) {
            (Some(b), Some(e)) => Ok(b..e),
            _ => Err(out_of_range("sequence", index, w.num_sequences())),
        }
    }

    /// The rows, relative to this LoD's first row, of sequence `index` of
    /// level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.row_range(0, 2).unwrap(), 10..15);
    /// ```
    pub fn row_range(&self, level: usize, index: usize) -> Result<Range<u64>> {
        let (lo, hi) = self.sequence_positions(level, index)?;
        let (mut lo, mut hi) = (lo as u64, hi as u64);
        // Down the levels below, no window kept (nothing allocated or shared).
        for w in &self.levels[level + 1..] {
            let raw = self.raw(w);
            let base = raw[0];
            (lo, hi) = (raw[lo as usize] - base, raw[hi as usize] - base);
        }
        Ok(lo..hi)
    }

    /// Sequence `index` of level `level`: the levels below `level`, narrowed
    /// to it and rebased, and its rows relative to this LoD's first row (what
    /// `slice_level(level, index, index + 1)` then `branch(&[0])` give, in
    /// one pass). O(levels below); copies no offsets.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (sub, rows) = lod.sequence(0, 2).unwrap();
    /// assert_eq!((sub.to_lengths(), rows), (vec![vec![2, 3]], 10..15));
    /// assert_eq!(lod.sequence(1, 2).unwrap().1, 5..9);
    /// assert!(lod.sequence(1, 6).is_err());
    /// ```
    pub fn sequence(&self, level: usize, index: usize) -> Result<(Lod, Range<u64>)> {
        let (lo, hi) = self.sequence_positions(level, index)?;
        Ok(self.keep_below(level + 1, lo, hi))
    }

    /// Where sequence `index` of level `level` starts and ends in the level
    /// below (positions in its window; rows past the last level).
    #[inline]
    fn sequence_positions(&self, level: usize, index: usize) -> Result<(usize, usize)> {
        let w = self
            .levels
            .get(level)
            .ok_or_else(|| out_of_range("level", level, self.levels.len()))?;
        let raw = self.raw(w);
        let sequences = raw.len().saturating_sub(1);
        if index >= sequences {
            return Err(out_of_range("sequence", index, sequences));
        }
        let base = raw[0];
        Ok((
            (raw[index] - base) as usize,
            (raw[index + 1] - base) as usize,
        ))
    }

    /// The windows of levels `from..` that positions `lo..=hi` of level
    /// `from` select (each window's last offset selects the next level's
    /// end), and the rows they span.
    #[inline]
    fn keep_below(&self, from: usize, mut lo: usize, mut hi: usize) -> (Lod, Range<u64>) {
        // (Collected, not pushed: one capacity check, not one per level.)
        let kept: Windows = self.levels[from..]
            .iter()
            .map(|w| {
                let raw = self.raw(w);
                let base = raw[0];
                let window = &raw[lo..=hi];
                (lo, hi) = (
                    (window[0] - base) as usize,
                    (window[window.len() - 1] - base) as usize,
                );
                NonNull::from(window)
            })
            .collect();
        (self.with_windows(kept), lo as u64..hi as u64)
    }

    /// Every level expressed in rows (Paddle's `ToAbsOffset`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.to_absolute(), vec![vec![0, 9, 10, 15], vec![0, 3, 5, 9, 10, 12, 15]]);
    /// ```
    pub fn to_absolute(&self) -> Vec<Vec<u64>> {
        let mut result = self.to_offsets();
        for l in (0..result.len().saturating_sub(1)).rev() {
            let (upper, lower) = result.split_at_mut(l + 1);
            let below = &lower[0];
            for offset in upper[l].iter_mut() {
                // Valid LoD: every offset of level l indexes level l + 1.
                *offset = below.get(*offset as usize).copied().unwrap_or(0);
            }
        }
        result
    }

    /// Sequences `begin..end` of level `level`: the LoD with the levels above
    /// `level` dropped (Paddle's `SliceInLevel`, with no copy: O(levels)), and
    /// their rows relative to this LoD's first row
    /// (`GetSubLoDAndAbsoluteOffset`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (sub, rows) = lod.slice_level(0, 1, 3).unwrap();
    /// assert_eq!(sub.to_lengths(), vec![vec![1, 2], vec![1, 2, 3]]);
    /// assert_eq!(rows, 9..15);
    /// ```
    pub fn slice_level(&self, level: usize, begin: usize, end: usize) -> Result<(Lod, Range<u64>)> {
        let window = self.window(level)?.raw();
        let sequences = window.len().saturating_sub(1);
        if end > sequences {
            return Err(out_of_range("sequence range end", end, sequences + 1));
        }
        if begin > end {
            return Err(out_of_range("sequence range start", begin, end + 1));
        }
        let mut levels = Windows::new();
        levels.push(NonNull::from(&window[begin..=end]));
        self.narrow_below(level, &mut levels);
        let rows = self.rows_of(&levels);
        Ok((self.with_windows(levels), rows))
    }

    /// A LoD over `levels`, windows of this LoD's block (one more reference
    /// to it, none when there are no levels).
    #[inline]
    fn with_windows(&self, levels: Windows) -> Lod {
        let block = if levels.is_empty() {
            None
        } else {
            self.block.clone()
        };
        Lod { block, levels }
    }

    /// Pushes, for each level below `level`, the window its parent (the last
    /// window in `levels`) selects.
    fn narrow_below(&self, level: usize, levels: &mut Windows) {
        for l in level + 1..self.levels.len() {
            let parent_base = self.raw(&self.levels[l - 1])[0];
            let (start, end) = match levels.last() {
                Some(parent) => {
                    let raw = self.raw(parent);
                    (
                        raw.first().copied().unwrap_or(0),
                        raw.last().copied().unwrap_or(0),
                    )
                }
                None => (parent_base, parent_base),
            };
            let below = self.raw(&self.levels[l]);
            levels.push(NonNull::from(
                &below[(start - parent_base) as usize..=(end - parent_base) as usize],
            ));
        }
    }

    /// The rows, relative to this LoD, that narrowed windows span.
    fn rows_of(&self, narrowed: &[NonNull<[u64]>]) -> Range<u64> {
        match (self.levels.last(), narrowed.last()) {
            (Some(full), Some(w)) => {
                let raw = self.raw(w);
                let base = self.raw(full)[0];
                raw.first().copied().unwrap_or(0) - base..raw.last().copied().unwrap_or(0) - base
            }
            _ => 0..0,
        }
    }

    /// The `<i, j, ...>`-slice: follows one index per level from the top and
    /// returns the remaining levels and the rows, relative to this LoD, of the
    /// sequence reached. Costs O(levels); copies no offsets.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (rest, rows) = lod.branch(&[2, 0]).unwrap();
    /// assert_eq!((rest.num_levels(), rows), (0, 10..12));
    /// assert_eq!(lod.branch(&[0, 2]).unwrap().1, 5..9);
    /// ```
    #[inline]
    pub fn branch(&self, path: &[usize]) -> Result<(Lod, Range<u64>)> {
        let levels = self.levels.len();
        if path.len() > levels {
            return Err(out_of_range("branch depth", path.len(), levels + 1));
        }
        if path.is_empty() {
            let rows = 0..self.num_rows().unwrap_or(0);
            return Ok((self.clone(), rows));
        }
        // Walk positions in each level's raw window (no block touched but
        // to read): `lo..=hi` is the window at the current level.
        let (mut lo, mut hi) = (0usize, self.raw(&self.levels[0]).len().saturating_sub(1));
        for (w, &index) in self.levels.iter().zip(path) {
            let raw = self.raw(w);
            if index >= hi - lo {
                return Err(out_of_range("branch index", index, hi - lo));
            }
            let a = lo + index;
            let base = raw[0];
            (lo, hi) = ((raw[a] - base) as usize, (raw[a + 1] - base) as usize);
        }
        // `lo..=hi` now indexes level `path.len()` (or, past the last
        // level, the rows of this LoD). Windows only for the levels kept.
        Ok(self.keep_below(path.len(), lo, hi))
    }

    /// The LoD of sequences `begin..end` of level `level`, rebased, with the
    /// levels above `level` dropped (Paddle's `SliceInLevel`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let sliced = lod.slice_in_level(0, 1, 3).unwrap();
    /// assert_eq!(sliced.to_offsets(), [vec![0, 1, 3], vec![0, 1, 3, 6]]);
    /// ```
    pub fn slice_in_level(&self, level: usize, begin: usize, end: usize) -> Result<Lod> {
        Ok(self.slice_level(level, begin, end)?.0)
    }

    /// The sub-LoD of sequences `begin..end` of level `level` and their absolute
    /// row range (Paddle's `GetSubLoDAndAbsoluteOffset`; Paddle returns the
    /// sub-LoD as lengths, call [`Lod::to_lengths`] for that form).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![
    ///     vec![0, 3, 4, 8],
    ///     vec![0, 9, 10, 11, 13, 17, 19, 22, 24],
    /// ]).unwrap();
    /// let (sub, rows) = lod.sub_lod_and_absolute_range(0, 1, 3).unwrap();
    /// assert_eq!(sub.to_lengths(), vec![vec![1, 4], vec![2, 4, 2, 3, 2]]);
    /// assert_eq!(rows, 11..24);
    /// ```
    pub fn sub_lod_and_absolute_range(
        &self,
        level: usize,
        begin: usize,
        end: usize,
    ) -> Result<(Lod, Range<u64>)> {
        self.slice_level(level, begin, end)
    }

    /// A copy of the LoD into fresh, rebased buffers of its own: what to keep
    /// when a small slice should not hold a large file or buffer alive.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2]]).unwrap();
    /// let (tail, _) = lod.slice_level(0, 1, 3).unwrap();
    /// let own = tail.compact();
    /// assert_eq!(own, tail);
    /// assert_eq!(own.raw_level(0), Some(&[0, 1, 3][..]));
    /// ```
    pub fn compact(&self) -> Lod {
        Lod::from_validated(self.to_offsets())
    }

    /// Appends sequences given as lengths, one list per level (Paddle's
    /// `AppendLoD`). An empty LoD takes the number of levels given. On error the
    /// LoD is left unchanged.
    ///
    /// ```
    /// let mut lod = lodt::Lod::try_from_lengths(&[vec![2], vec![1, 2]]).unwrap();
    /// lod.append_lengths(&[vec![1], vec![4]]).unwrap();
    /// assert_eq!(lod.to_lengths(), vec![vec![2, 1], vec![1, 2, 4]]);
    /// ```
    pub fn append_lengths<L: AsRef<[u64]>>(&mut self, lengths: &[L]) -> Result<()> {
        if !self.levels.is_empty() && self.levels.len() != lengths.len() {
            return Err(Error::Mismatch {
                what: "number of LoD levels to append",
                expected: self.levels.len() as u64,
                found: lengths.len() as u64,
            });
        }
        let mut levels = if self.levels.is_empty() {
            vec![vec![0u64]; lengths.len()]
        } else {
            self.to_offsets()
        };
        for (level, lens) in levels.iter_mut().zip(lengths) {
            let mut total = level.last().copied().unwrap_or(0);
            for &len in lens.as_ref() {
                total = total.checked_add(len).ok_or(Error::Overflow {
                    what: "appended LoD offsets",
                })?;
                level.push(total);
            }
        }
        check_levels(&levels, None)?;
        *self = Lod::from_validated(levels);
        Ok(())
    }
}

impl fmt::Display for Lod {
    /// Formats like Paddle: `{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}`, with
    /// rebased offsets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for level in self.levels() {
            f.write_str("{")?;
            for (i, o) in level.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{o}")?;
            }
            f.write_str("}")?;
        }
        f.write_str("}")
    }
}

impl fmt::Debug for Lod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let levels: SmallVec<[&Offsets; 4]> = self.levels().collect();
        f.debug_struct("Lod").field("levels", &levels).finish()
    }
}

impl PartialEq for Lod {
    /// Equal levels (rebased offsets), wherever they are stored.
    fn eq(&self, other: &Self) -> bool {
        self.num_levels() == other.num_levels() && self.levels().eq(other.levels())
    }
}

impl Eq for Lod {}

impl Hash for Lod {
    /// Hashes the rebased offsets, consistently with `Eq`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.num_levels().hash(state);
        for level in self.levels() {
            level.hash(state);
        }
    }
}

impl TryFrom<Vec<Vec<u64>>> for Lod {
    type Error = Error;
    /// Same as [`Lod::try_from_offsets`].
    fn try_from(levels: Vec<Vec<u64>>) -> Result<Self> {
        Lod::try_from_offsets(levels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Lod {
        Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap()
    }

    #[test]
    fn lengths_and_offsets_convert_both_ways() {
        let lod = seed();
        assert_eq!(
            lod.to_offsets(),
            [vec![0, 3, 4, 6], vec![0, 3, 5, 9, 10, 12, 15]]
        );
        assert_eq!(
            lod.to_lengths(),
            vec![vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]
        );
    }

    #[test]
    fn check_lod_on_five_rows() {
        for ok in [vec![vec![0, 5]], vec![vec![0, 2, 2, 5]], vec![]] {
            Lod::try_from_offsets(ok).unwrap().check_rows(5).unwrap();
        }
        let rows = Lod::try_from_offsets(vec![vec![0, 2, 4]])
            .unwrap()
            .check_rows(5)
            .unwrap_err();
        assert_eq!(
            rows,
            Error::InvalidLod {
                level: 0,
                index: 2,
                rule: LodRule::RowMismatch,
                expected: 5,
                found: 4
            }
        );
        let start = Lod::try_from_offsets(vec![vec![1, 2, 5]]).unwrap_err();
        assert_eq!(
            start,
            Error::InvalidLod {
                level: 0,
                index: 0,
                rule: LodRule::DoesNotStartAtZero,
                expected: 0,
                found: 1
            }
        );
        let order = Lod::try_from_offsets(vec![vec![0, 3, 2, 5]]).unwrap_err();
        assert_eq!(
            order,
            Error::InvalidLod {
                level: 0,
                index: 2,
                rule: LodRule::Decreasing,
                expected: 3,
                found: 2
            }
        );
        assert_eq!(
            order.to_string(),
            "invalid LoD at level 0, index 2: offsets must be non-decreasing: expected >= 3, found 2"
        );
        let short = Lod::try_from_offsets(vec![vec![0]]).unwrap_err();
        assert_eq!(
            short,
            Error::InvalidLod {
                level: 0,
                index: 0,
                rule: LodRule::TooShort,
                expected: 2,
                found: 1
            }
        );
    }

    #[test]
    fn level_mismatch_is_rejected() {
        let err = Lod::try_from_offsets(vec![vec![0, 2, 3], vec![0, 1, 2]]).unwrap_err();
        assert_eq!(
            err,
            Error::InvalidLod {
                level: 0,
                index: 2,
                rule: LodRule::LevelMismatch,
                expected: 2,
                found: 3
            }
        );
    }

    #[test]
    fn queries() {
        let lod = seed();
        assert_eq!(lod.num_levels(), 2);
        assert_eq!(lod.num_sequences(1).unwrap(), 6);
        assert_eq!(lod.sequence_range(0, 0).unwrap(), 0..3);
        assert_eq!(lod.row_range(0, 0).unwrap(), 0..9);
        assert_eq!(lod.row_range(1, 5).unwrap(), 12..15);
        assert!(matches!(lod.row_range(1, 6), Err(Error::OutOfRange { .. })));
        assert_eq!(
            lod.to_absolute(),
            vec![vec![0, 9, 10, 15], vec![0, 3, 5, 9, 10, 12, 15]]
        );
    }

    #[test]
    fn sub_lod_and_absolute_offset() {
        let lod = Lod::try_from_offsets(vec![
            vec![0, 3, 4, 8],
            vec![0, 9, 10, 11, 13, 17, 19, 22, 24],
        ])
        .unwrap();
        let (sub, rows) = lod.sub_lod_and_absolute_range(0, 1, 3).unwrap();
        assert_eq!(sub.to_lengths(), vec![vec![1, 4], vec![2, 4, 2, 3, 2]]);
        assert_eq!(rows, 11..24);
    }

    #[test]
    fn slice_in_level_drops_levels_above() {
        let lod = seed();
        assert_eq!(
            lod.slice_in_level(1, 2, 4).unwrap().to_offsets(),
            [vec![0, 4, 5]]
        );
        assert!(lod.slice_in_level(0, 2, 4).is_err());
        assert!(lod.slice_in_level(2, 0, 0).is_err());
    }

    #[test]
    fn append_checks_levels() {
        let mut lod = Lod::empty();
        lod.append_lengths(&[vec![2], vec![1, 1]]).unwrap();
        assert_eq!(lod.to_offsets(), [vec![0, 2], vec![0, 1, 2]]);
        let before = lod.clone();
        assert!(lod.append_lengths(&[vec![1], vec![1, 1]]).is_err());
        assert_eq!(lod, before);
        assert!(lod.append_lengths(&[vec![1]]).is_err());
    }

    #[test]
    fn display_like_paddle() {
        assert_eq!(seed().to_string(), "{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}");
        assert_eq!(Lod::empty().to_string(), "{}");
    }

    #[test]
    fn lengths_overflow_is_an_error() {
        assert_eq!(
            Lod::try_from_lengths(&[vec![u64::MAX, 1]]).unwrap_err(),
            Error::Overflow {
                what: "LoD offsets from lengths"
            }
        );
    }

    #[test]
    fn branch_slices_of_the_seed() {
        let lod = seed();
        let view = &lod;
        let (b2, rows) = view.branch(&[2]).unwrap();
        assert_eq!(rows, 10..15);
        assert_eq!(b2.to_offsets(), [vec![0, 2, 5]]);
        assert_eq!(b2.to_string(), "{{0, 2, 5}}");
        let (b20, rows) = view.branch(&[2, 0]).unwrap();
        assert_eq!((b20.num_levels(), rows), (0, 10..12));
        let (b02, rows) = view.branch(&[0, 2]).unwrap();
        assert_eq!((b02.num_levels(), rows), (0, 5..9));
        // The <2,0>-slice of the <2>-slice is the <2,0>-slice, rows relative to it.
        let (inner, rows) = b2.branch(&[0]).unwrap();
        assert_eq!((inner.num_levels(), rows), (0, 0..2));
        let (inner, rows) = b2.branch(&[1]).unwrap();
        assert_eq!((inner.num_levels(), rows), (0, 2..5));
    }

    #[test]
    fn branch_errors() {
        let lod = seed();
        let view = &lod;
        assert_eq!(
            view.branch(&[3]).unwrap_err(),
            Error::OutOfRange {
                what: "branch index",
                index: 3,
                len: 3
            }
        );
        assert!(view.branch(&[1, 1]).is_err());
        assert!(view.branch(&[0, 0, 0]).is_err());
    }

    #[test]
    fn empty_sequences_slice_cleanly() {
        let lod = Lod::try_from_offsets(vec![vec![0, 0, 2], vec![0, 0, 3]]).unwrap();
        let (b, rows) = lod.branch(&[0]).unwrap();
        assert_eq!(b.to_offsets(), [vec![0u64]]);
        assert_eq!(rows, 0..0);
        let (b, rows) = lod.branch(&[1, 1]).unwrap();
        assert_eq!((b.num_levels(), rows), (0, 0..3));
    }

    #[test]
    fn slices_share_the_offset_buffers() {
        let lod = seed();
        let (b, _) = lod.branch(&[2]).unwrap();
        assert!(
            b.level_buffer(0)
                .unwrap()
                .shares_storage(&lod.level_buffer(1).unwrap())
        );
        assert_eq!(b.base_row(), Some(10));
        assert!(lod.ptr_eq(&lod.clone()));
    }
}
