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

use crate::buffer::Buffer;
use crate::error::{Error, LodRule, Result};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Range;
use zerocopy::FromBytes;

/// One level of a LoD: a window of `u64` offsets in a shared [`Buffer`].
///
/// The window holds the raw offsets as stored; the level's offsets are those
/// values minus the first one ("rebased on read"), so a slice of a LoD is a
/// narrower window of the same buffer, made in O(1) with no offset copied:
///
/// ```text
///  buffer:  [0, 3, 5, 9, 10, 12, 15]      window [10, 12, 15] reads as [0, 2, 5]
/// ```
///
/// Equality, hashing and [`Offsets::to_vec`] see the rebased values.
///
/// ```
/// use lodt::Lod;
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
/// let (article2, rows) = lod.branch(&[2])?;
/// assert_eq!(rows, 10..15);
/// let level = &article2.levels()[0];
/// assert_eq!(level.raw(), &[10, 12, 15]);
/// assert_eq!(level.to_vec(), vec![0, 2, 5]);
/// assert_eq!(*level, vec![0, 2, 5]);
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone)]
pub struct Offsets {
    /// Invariant: 8-aligned, a whole number of `u64`s, at least one of them.
    buf: Buffer,
}

impl Offsets {
    /// Offsets over `buf`, which must hold at least one little-endian `u64`,
    /// 8-byte aligned. The values are not checked against the LoD rules here;
    /// [`Lod::try_from_offset_buffers`] does that.
    ///
    /// ```
    /// use lodt::{buffer::Buffer, lod::Offsets};
    /// let o = Offsets::try_new(Buffer::from_vec(vec![0u64, 2, 5]))?;
    /// assert_eq!(o.len(), 3);
    /// assert!(Offsets::try_new(Buffer::from_vec(vec![0u8; 12])).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_new(buf: Buffer) -> Result<Self> {
        let bytes = buf.as_slice();
        if <[u64]>::ref_from_bytes(bytes).is_err() || bytes.is_empty() {
            return Err(Error::Mismatch {
                what: "LoD offsets buffer (bytes; a non-zero multiple of 8, 8-aligned)",
                expected: bytes.len().next_multiple_of(8).max(8) as u64,
                found: bytes.len() as u64,
            });
        }
        Ok(Offsets { buf })
    }

    fn from_vec(values: Vec<u64>) -> Self {
        Offsets {
            buf: Buffer::from_vec(values),
        }
    }

    /// The raw offsets of the window, not rebased. The first is the level's base.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.levels()[0].raw(), &[0, 2, 5]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn raw(&self) -> &[u64] {
        // Aligned and sized: checked when the offsets were made.
        <[u64]>::ref_from_bytes(self.buf.as_slice()).unwrap_or(&[])
    }

    /// The first raw offset, which the level's offsets are relative to.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
    /// assert_eq!(lod.branch(&[2])?.0.levels()[0].base(), 10);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn base(&self) -> u64 {
        self.raw().first().copied().unwrap_or(0)
    }

    /// The number of offsets (one more than the number of sequences).
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?.levels()[0].len(), 3);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.buf.len() / 8
    }

    /// Always false: a level holds at least one offset.
    ///
    /// ```
    /// assert!(!lodt::Lod::try_from_offsets(vec![vec![0, 2]])?.levels()[0].is_empty());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of sequences (`len() - 1`).
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?.levels()[0].num_sequences(), 2);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn num_sequences(&self) -> usize {
        self.len().saturating_sub(1)
    }

    /// Offset `i`, rebased.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
    /// let (b, _) = lod.branch(&[2])?;
    /// assert_eq!((b.levels()[0].get(1), b.levels()[0].get(3)), (Some(2), None));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn get(&self, i: usize) -> Option<u64> {
        let raw = self.raw();
        raw.get(i).map(|&o| o - raw[0])
    }

    /// The offsets, rebased.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.levels()[0].iter().collect::<Vec<_>>(), vec![0, 2, 5]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        let raw = self.raw();
        let base = self.base();
        raw.iter().map(move |&o| o - base)
    }

    /// The lengths of the sequences.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.levels()[0].lengths().collect::<Vec<_>>(), vec![2, 3]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn lengths(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.raw().windows(2).map(|w| w[1] - w[0])
    }

    /// The offsets, rebased, copied into a `Vec`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.levels()[0].to_vec(), vec![0, 2, 5]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn to_vec(&self) -> Vec<u64> {
        self.iter().collect()
    }

    /// The rebased offsets as little-endian bytes, as files store them:
    /// borrowed from the buffer when the level is not a slice (its first
    /// offset is 0), a rebased copy otherwise.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// let lod = lodt::Lod::try_from_lengths(&[vec![1, 2]])?;
    /// assert!(matches!(lod.levels()[0].rebased_bytes(), Cow::Borrowed(_)));
    /// let (tail, _) = lod.slice_level(0, 1, 2)?;
    /// let bytes = tail.levels()[0].rebased_bytes();
    /// assert_eq!((bytes.len(), &bytes[..8], bytes[8]), (16, &[0u8; 8][..], 2));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn rebased_bytes(&self) -> Cow<'_, [u8]> {
        if self.base() == 0 {
            Cow::Borrowed(self.buf.as_slice())
        } else {
            Cow::Owned(self.iter().flat_map(u64::to_le_bytes).collect())
        }
    }

    /// The buffer holding the raw offsets (a window of a shared storage).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]])?;
    /// assert_eq!(lod.levels()[0].buffer().len(), 24);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn buffer(&self) -> &Buffer {
        &self.buf
    }

    /// Offsets `begin..=end_inclusive` of the window: a narrower window of
    /// the same buffer. Callers pass indices in range (the LoD's own walks).
    fn window(&self, begin: usize, end_inclusive: usize) -> Offsets {
        match self.buf.slice(begin * 8..(end_inclusive + 1) * 8) {
            Ok(buf) => Offsets { buf },
            // Unreachable for a valid LoD; a one-offset level keeps the
            // invariant rather than panic.
            Err(_) => Offsets::from_vec(vec![0]),
        }
    }

    fn same_window(&self, other: &Offsets) -> bool {
        self.buf.shares_storage(&other.buf) && self.buf.range() == other.buf.range()
    }
}

impl<'a> IntoIterator for &'a Offsets {
    type Item = u64;
    type IntoIter = Box<dyn ExactSizeIterator<Item = u64> + 'a>;
    /// The offsets, rebased ([`Offsets::iter`]).
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl AsRef<[u64]> for Offsets {
    /// The raw offsets ([`Offsets::raw`]).
    fn as_ref(&self) -> &[u64] {
        self.raw()
    }
}

impl PartialEq for Offsets {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Offsets {}

impl PartialEq<[u64]> for Offsets {
    fn eq(&self, other: &[u64]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().copied())
    }
}

impl PartialEq<Vec<u64>> for Offsets {
    fn eq(&self, other: &Vec<u64>) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<[u64; N]> for Offsets {
    fn eq(&self, other: &[u64; N]) -> bool {
        *self == other[..]
    }
}

impl Hash for Offsets {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.len().hash(state);
        for o in self.iter() {
            o.hash(state);
        }
    }
}

impl serde::Serialize for Offsets {
    /// A list of the rebased offsets.
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl fmt::Debug for Offsets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// An owned, validated LoD: offsets, top level first (Paddle's `LoD`).
///
/// Each level is an [`Offsets`] window of a shared buffer, so cloning a LoD,
/// slicing it ([`Lod::branch`], [`Lod::slice_level`]) or sharing it between
/// tensors (Paddle's `ShareConstLODFrom`) costs O(levels) and copies no
/// offset. A LoD with no levels is the LoD of a plain tensor (a model
/// parameter).
///
/// ```
/// use lodt::Lod;
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
/// assert_eq!(lod.level(1).unwrap(), &[0, 3, 5, 9, 10, 12, 15]);
/// assert_eq!(lod.to_string(), "{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}");
/// assert_eq!(lod.num_rows(), Some(15));
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Lod {
    /// Up to [`INLINE_LEVELS`] levels live inline: a slice allocates nothing.
    levels: Levels,
}

/// How many levels a [`Lod`] holds without a heap allocation (Paddle's
/// models rarely use more than two).
const INLINE_LEVELS: usize = 2;

/// A LoD's levels: inline up to [`INLINE_LEVELS`], on the heap beyond.
pub(crate) type Levels = SmallVec<[Offsets; INLINE_LEVELS]>;

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

/// Turns lengths into offsets starting at 0, with checked sums.
pub(crate) fn lengths_to_offsets(lengths: &[u64]) -> Result<Vec<u64>> {
    let mut offsets = Vec::with_capacity(lengths.len() + 1);
    offsets.push(0u64);
    let mut total = 0u64;
    let mut overflow = false;
    // `extend` from a slice iterator writes without a capacity check per
    // element; overflow is recorded and reported after the loop.
    offsets.extend(lengths.iter().map(|&len| {
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
    Ok(offsets)
}

impl Lod {
    /// The LoD with no levels (a plain tensor).
    ///
    /// ```
    /// assert_eq!(lodt::Lod::empty().num_levels(), 0);
    /// ```
    pub fn empty() -> Self {
        Lod {
            levels: Levels::new(),
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

    /// Builds a LoD over offset buffers with no copy (for example windows of a
    /// memory-mapped file), checked like [`Lod::try_from_stored`]: each level's
    /// raw offsets start at 0 and obey `CheckLoD`, or are the zero-sequence
    /// levels below an empty slice.
    ///
    /// ```
    /// use lodt::{buffer::Buffer, lod::Offsets, Lod};
    /// let level = Offsets::try_new(Buffer::from_vec(vec![0u64, 1, 3]))?;
    /// let lod = Lod::try_from_offset_buffers(vec![level.clone()])?;
    /// assert!(lod.levels()[0].buffer().shares_storage(level.buffer()));
    /// let bad = Offsets::try_new(Buffer::from_vec(vec![0u64, 3, 1]))?;
    /// assert!(Lod::try_from_offset_buffers(vec![bad]).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_from_offset_buffers(levels: Vec<Offsets>) -> Result<Self> {
        let levels = Levels::from_vec(levels);
        check_view_levels(&levels, None)?;
        Ok(Lod { levels })
    }

    /// Wraps offset buffers already checked with [`check_view_levels`] (a
    /// reader's batch check).
    pub(crate) fn from_checked_buffers(levels: impl Into<Levels>) -> Self {
        Lod {
            levels: levels.into(),
        }
    }

    /// Builds a LoD from lengths (Paddle's `recursive_sequence_lengths`).
    ///
    /// ```
    /// use lodt::Lod;
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.levels(), &[vec![0, 3, 4, 6], vec![0, 3, 5, 9, 10, 12, 15]]);
    /// ```
    pub fn try_from_lengths<L: AsRef<[u64]>>(lengths: &[L]) -> Result<Self> {
        let levels = lengths
            .iter()
            .map(|l| lengths_to_offsets(l.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        // Prefix sums start at 0 and never decrease: only the length and the
        // level-to-level rules can fail.
        check_levels_with(&levels, None, false)?;
        Ok(Lod::from_validated(levels))
    }

    /// Wraps levels cut from a validated LoD. They obey every rule but one: a
    /// slice of an empty range keeps, at each level below it, a single offset
    /// `[0]` (zero sequences), which user input may not have.
    pub(crate) fn from_validated(levels: Vec<Vec<u64>>) -> Self {
        Lod {
            levels: levels.into_iter().map(Offsets::from_vec).collect(),
        }
    }

    /// The lengths form (Paddle's `recursive_sequence_lengths`).
    ///
    /// ```
    /// use lodt::Lod;
    /// let lod = Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.to_lengths(), vec![vec![3, 1, 2]]);
    /// ```
    pub fn to_lengths(&self) -> Vec<Vec<u64>> {
        self.levels.iter().map(|l| l.lengths().collect()).collect()
    }

    /// The levels, top level first. Each compares equal to its rebased
    /// offsets; [`Lod::to_offsets`] copies them out.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 1]]).unwrap();
    /// assert_eq!(lod.levels(), &[vec![0, 1]]);
    /// ```
    pub fn levels(&self) -> &[Offsets] {
        &self.levels
    }

    /// The offsets of every level, rebased, copied out.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 1]]).unwrap();
    /// assert_eq!(lod.to_offsets(), vec![vec![0, 1]]);
    /// ```
    pub fn to_offsets(&self) -> Vec<Vec<u64>> {
        self.levels.iter().map(Offsets::to_vec).collect()
    }

    /// Level `level`, if it exists.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 3]]).unwrap();
    /// assert_eq!(lod.level(0).unwrap(), &[0, 2, 3]);
    /// assert!(lod.level(1).is_none());
    /// ```
    pub fn level(&self, level: usize) -> Option<&Offsets> {
        self.levels.get(level)
    }

    fn window(&self, level: usize) -> Result<&Offsets> {
        self.levels
            .get(level)
            .ok_or_else(|| out_of_range("level", level, self.levels.len()))
    }

    /// The number of levels (`LoD.size()`).
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_lengths(&[vec![2], vec![1, 1]]).unwrap().num_levels(), 2);
    /// ```
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
    pub fn offsets(&self, level: usize) -> Result<impl ExactSizeIterator<Item = u64> + '_> {
        Ok(self.window(level)?.iter())
    }

    /// The lengths of the sequences of level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.lengths(0).unwrap().collect::<Vec<_>>(), vec![3, 1, 2]);
    /// ```
    pub fn lengths(&self, level: usize) -> Result<impl ExactSizeIterator<Item = u64> + '_> {
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
        self.levels.get(level).map(Offsets::raw)
    }

    /// The number of rows the LoD indexes (the span of the last level), or
    /// `None` for a LoD with no levels.
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]]).unwrap().num_rows(), Some(5));
    /// ```
    pub fn num_rows(&self) -> Option<u64> {
        self.levels.last().map(|w| {
            let raw = w.raw();
            raw.last().copied().unwrap_or(0) - w.base()
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
        self.levels.last().map(Offsets::base)
    }

    /// Whether both LoDs are the same windows of the same buffers (shared, as
    /// after a clone or Paddle's `ShareConstLODFrom`), not merely equal.
    ///
    /// ```
    /// let a = lodt::Lod::try_from_offsets(vec![vec![0, 2]]).unwrap();
    /// let b = lodt::Lod::try_from_offsets(vec![vec![0, 2]]).unwrap();
    /// assert!(a.ptr_eq(&a.clone()));
    /// assert!(a == b && !a.ptr_eq(&b));
    /// ```
    pub fn ptr_eq(&self, other: &Lod) -> bool {
        self.levels.len() == other.levels.len()
            && self
                .levels
                .iter()
                .zip(&other.levels)
                .all(|(a, b)| a.same_window(b))
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
                    index: self.levels[last].len() - 1,
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
        Ok(self.slice_level(level, index, index + 1)?.1)
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
        let window = self.window(level)?;
        let sequences = window.num_sequences();
        if end > sequences {
            return Err(out_of_range("sequence range end", end, sequences + 1));
        }
        if begin > end {
            return Err(out_of_range("sequence range start", begin, end + 1));
        }
        let mut levels = Levels::new();
        levels.push(window.window(begin, end));
        self.narrow_below(level, &mut levels);
        let rows = self.rows_of(&levels);
        Ok((Lod { levels }, rows))
    }

    /// Pushes, for each level below `level`, the window its parent (the last
    /// window in `levels`) selects.
    fn narrow_below(&self, level: usize, levels: &mut Levels) {
        for l in level + 1..self.levels.len() {
            let parent_base = self.levels[l - 1].base();
            let (start, end) = match levels.last() {
                Some(parent) => {
                    let raw = parent.raw();
                    (
                        raw.first().copied().unwrap_or(0),
                        raw.last().copied().unwrap_or(0),
                    )
                }
                None => (parent_base, parent_base),
            };
            levels.push(
                self.levels[l].window((start - parent_base) as usize, (end - parent_base) as usize),
            );
        }
    }

    /// The rows, relative to this LoD, that narrowed windows span.
    fn rows_of(&self, narrowed: &[Offsets]) -> Range<u64> {
        match (self.levels.last(), narrowed.last()) {
            (Some(full), Some(w)) => {
                let raw = w.raw();
                let base = full.base();
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
    pub fn branch(&self, path: &[usize]) -> Result<(Lod, Range<u64>)> {
        let levels = self.levels.len();
        if path.len() > levels {
            return Err(out_of_range("branch depth", path.len(), levels + 1));
        }
        if path.is_empty() {
            let rows = 0..self.num_rows().unwrap_or(0);
            return Ok((self.clone(), rows));
        }
        // Walk positions in each level's raw window (no buffer touched but
        // to read): `lo..=hi` is the window at the current level.
        let (mut lo, mut hi) = (0usize, self.levels[0].len().saturating_sub(1));
        for (l, &index) in path.iter().enumerate() {
            let raw = self.levels[l].raw();
            if index >= hi - lo {
                return Err(out_of_range("branch index", index, hi - lo));
            }
            let a = lo + index;
            let base = raw[0];
            (lo, hi) = ((raw[a] - base) as usize, (raw[a + 1] - base) as usize);
        }
        // `lo..=hi` now indexes level `path.len()` (or, past the last
        // level, the rows of this LoD). Windows only for the levels kept.
        let mut kept = Levels::new();
        for l in path.len()..levels {
            let level = &self.levels[l];
            let raw = level.raw();
            let base = raw[0];
            let (first, last) = (raw[lo], raw[hi]);
            kept.push(level.window(lo, hi));
            (lo, hi) = ((first - base) as usize, (last - base) as usize);
        }
        Ok((Lod { levels: kept }, lo as u64..hi as u64))
    }

    /// The LoD of sequences `begin..end` of level `level`, rebased, with the
    /// levels above `level` dropped (Paddle's `SliceInLevel`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let sliced = lod.slice_in_level(0, 1, 3).unwrap();
    /// assert_eq!(sliced.levels(), &[vec![0, 1, 3], vec![0, 1, 3, 6]]);
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
        for w in &self.levels {
            f.write_str("{")?;
            for (i, o) in w.iter().enumerate() {
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
        f.debug_struct("Lod").field("levels", &self.levels).finish()
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
            lod.levels(),
            &[vec![0, 3, 4, 6], vec![0, 3, 5, 9, 10, 12, 15]]
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
            lod.slice_in_level(1, 2, 4).unwrap().levels(),
            &[vec![0, 4, 5]]
        );
        assert!(lod.slice_in_level(0, 2, 4).is_err());
        assert!(lod.slice_in_level(2, 0, 0).is_err());
    }

    #[test]
    fn append_checks_levels() {
        let mut lod = Lod::empty();
        lod.append_lengths(&[vec![2], vec![1, 1]]).unwrap();
        assert_eq!(lod.levels(), &[vec![0, 2], vec![0, 1, 2]]);
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
        assert_eq!(b2.levels(), &[vec![0, 2, 5]]);
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
        assert_eq!(b.levels(), &[vec![0u64]]);
        assert_eq!(rows, 0..0);
        let (b, rows) = lod.branch(&[1, 1]).unwrap();
        assert_eq!((b.num_levels(), rows), (0, 0..3));
    }

    #[test]
    fn slices_share_the_offset_buffers() {
        let lod = seed();
        let (b, _) = lod.branch(&[2]).unwrap();
        assert!(
            b.levels()[0]
                .buffer()
                .shares_storage(lod.levels()[1].buffer())
        );
        assert_eq!(b.base_row(), Some(10));
        assert!(lod.ptr_eq(&lod.clone()));
    }
}
