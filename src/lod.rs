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

use crate::error::{Error, LodRule, Result};
use crate::lod_view::LodView;
use std::fmt;
use std::ops::Range;

/// An owned, validated LoD: offsets, top level first (Paddle's `LoD`).
///
/// A `Lod` with no levels is the LoD of a plain tensor (a model parameter).
///
/// ```
/// use lodt::Lod;
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
/// assert_eq!(lod.level(1).unwrap(), &[0, 3, 5, 9, 10, 12, 15]);
/// assert_eq!(lod.to_string(), "{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}");
/// assert_eq!(lod.num_rows(), Some(15));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lod {
    levels: Vec<Vec<u64>>,
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
        Lod { levels: Vec::new() }
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
        Ok(Lod { levels })
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
        Ok(Lod { levels })
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
        Ok(Lod { levels })
    }

    /// Wraps levels cut from a validated LoD. They obey every rule but one: a
    /// slice of an empty range keeps, at each level below it, a single offset
    /// `[0]` (zero sequences), which user input may not have.
    pub(crate) fn from_validated(levels: Vec<Vec<u64>>) -> Self {
        Lod { levels }
    }

    /// The lengths form (Paddle's `recursive_sequence_lengths`).
    ///
    /// ```
    /// use lodt::Lod;
    /// let lod = Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.to_lengths(), vec![vec![3, 1, 2]]);
    /// ```
    pub fn to_lengths(&self) -> Vec<Vec<u64>> {
        self.levels
            .iter()
            .map(|level| level.windows(2).map(|w| w[1] - w[0]).collect())
            .collect()
    }

    /// The offsets of every level, top level first.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 1]]).unwrap();
    /// assert_eq!(lod.levels(), &[vec![0, 1]]);
    /// ```
    pub fn levels(&self) -> &[Vec<u64>] {
        &self.levels
    }

    /// Takes the offsets out of the LoD.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 1]]).unwrap();
    /// assert_eq!(lod.into_levels(), vec![vec![0, 1]]);
    /// ```
    pub fn into_levels(self) -> Vec<Vec<u64>> {
        self.levels
    }

    /// The offsets of level `level`, if it exists.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 3]]).unwrap();
    /// assert_eq!(lod.level(0), Some(&[0, 2, 3][..]));
    /// assert_eq!(lod.level(1), None);
    /// ```
    pub fn level(&self, level: usize) -> Option<&[u64]> {
        self.levels.get(level).map(Vec::as_slice)
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
        self.as_view().num_sequences(level)
    }

    /// The number of rows the LoD indexes (the last offset of the last level),
    /// or `None` for a LoD with no levels.
    ///
    /// ```
    /// assert_eq!(lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]]).unwrap().num_rows(), Some(5));
    /// ```
    pub fn num_rows(&self) -> Option<u64> {
        self.levels.last().and_then(|l| l.last().copied())
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
        check_levels(&self.levels, Some(rows))
    }

    /// A borrowed view of the whole LoD, on which slicing works with no copy.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 2, 5]]).unwrap();
    /// assert_eq!(lod.as_view().to_lod(), lod);
    /// ```
    pub fn as_view(&self) -> LodView<'_> {
        LodView::from_trusted(self.levels.iter().map(Vec::as_slice).collect())
    }

    /// The range, in units of the next level (rows for the last level), of
    /// sequence `index` of level `level` (Paddle's `lod_element`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.sequence_range(0, 2).unwrap(), 4..6);
    /// assert_eq!(lod.sequence_range(1, 2).unwrap(), 5..9);
    /// ```
    pub fn sequence_range(&self, level: usize, index: usize) -> Result<Range<u64>> {
        self.as_view().sequence_range(level, index)
    }

    /// The rows of sequence `index` of level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.row_range(0, 2).unwrap(), 10..15);
    /// ```
    pub fn row_range(&self, level: usize, index: usize) -> Result<Range<u64>> {
        self.as_view().row_range(level, index)
    }

    /// Every level expressed in rows (Paddle's `ToAbsOffset`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.to_absolute(), vec![vec![0, 9, 10, 15], vec![0, 3, 5, 9, 10, 12, 15]]);
    /// ```
    pub fn to_absolute(&self) -> Vec<Vec<u64>> {
        let mut result = self.levels.clone();
        for l in (0..result.len().saturating_sub(1)).rev() {
            let (upper, lower) = result.split_at_mut(l + 1);
            let below = &lower[0];
            for offset in upper[l].iter_mut() {
                // Valid LoD: every offset of level l indexes level l + 1.
                *offset = below[*offset as usize];
            }
        }
        result
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
        Ok(self.as_view().slice_level(level, begin, end)?.0.to_lod())
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
        let (view, rows) = self.as_view().slice_level(level, begin, end)?;
        Ok((view.to_lod(), rows))
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
            self.levels.clone()
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
        self.levels = levels;
        Ok(())
    }
}

impl fmt::Display for Lod {
    /// Formats like Paddle: `{{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_view().fmt(f)
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
}
