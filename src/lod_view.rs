//! [`LodView`]: a borrowed window onto a LoD, which is what slicing returns.
//!
//! A view holds, for every level, a window (a sub-slice) of that level's
//! original offsets. The view's logical offsets are the window's values minus
//! its first value, so a slice is rebased without rewriting a single offset:
//!
//! ```text
//!  original level 0:  [0, 3, 4, 6]             <2>-slice:  level 0 dropped
//!  original level 1:  [0, 3, 5, 9, 10, 12, 15]  window:    [10, 12, 15]
//!                                    ^^^^^^^^^^^  logical:   [ 0,  2,  5]
//!  rows:              0 .. 15                    rows:      10 .. 15
//! ```
//!
//! Slicing a view costs O(levels) and allocates only the list of windows.

use crate::error::{Error, Result};
use crate::lod::{Lod, check_levels};
use std::fmt;
use std::ops::Range;

/// A borrowed, possibly sliced LoD. See the [module docs](self).
///
/// ```
/// use lodt::Lod;
/// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
/// let (branch, rows) = lod.as_view().branch(&[2]).unwrap();
/// assert_eq!(rows, 10..15);
/// assert_eq!(branch.to_lod().levels(), &[vec![0, 2, 5]]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LodView<'a> {
    levels: Vec<&'a [u64]>,
}

fn out_of_range(what: &'static str, index: usize, len: usize) -> Error {
    Error::OutOfRange {
        what,
        index: index as u64,
        len: len as u64,
    }
}

impl<'a> LodView<'a> {
    /// A view of levels given as offsets starting at 0, validated with the
    /// `CheckLoD` rules.
    ///
    /// ```
    /// use lodt::LodView;
    /// let level = [0u64, 2, 5];
    /// let view = LodView::try_new(vec![&level[..]]).unwrap();
    /// assert_eq!(view.num_rows(), Some(5));
    /// assert!(LodView::try_new(vec![&[1u64, 2][..]]).is_err());
    /// ```
    pub fn try_new(levels: Vec<&'a [u64]>) -> Result<Self> {
        check_levels(&levels, None)?;
        Ok(LodView { levels })
    }

    /// The view with no levels.
    ///
    /// ```
    /// assert_eq!(lodt::LodView::empty().num_levels(), 0);
    /// ```
    pub fn empty() -> Self {
        LodView { levels: Vec::new() }
    }

    /// Wraps windows that are known to be consistent (from a validated LoD).
    pub(crate) fn from_trusted(levels: Vec<&'a [u64]>) -> Self {
        LodView { levels }
    }

    /// The number of levels.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![1]]).unwrap();
    /// assert_eq!(lod.as_view().num_levels(), 1);
    /// ```
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Whether the view has no levels.
    ///
    /// ```
    /// assert!(lodt::LodView::empty().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The raw window of level `level`: a sub-slice of the original offsets,
    /// not rebased. Its first value is the level's base.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (branch, _) = lod.as_view().branch(&[2]).unwrap();
    /// assert_eq!(branch.raw_level(0), Some(&[10, 12, 15][..]));
    /// ```
    pub fn raw_level(&self, level: usize) -> Option<&'a [u64]> {
        self.levels.get(level).copied()
    }

    /// The rebased offsets of level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (branch, _) = lod.as_view().branch(&[2]).unwrap();
    /// assert_eq!(branch.offsets(0).unwrap().collect::<Vec<_>>(), vec![0, 2, 5]);
    /// ```
    pub fn offsets(&self, level: usize) -> Result<impl ExactSizeIterator<Item = u64> + 'a> {
        let window = self.window(level)?;
        let base = window[0];
        Ok(window.iter().map(move |&o| o - base))
    }

    /// The lengths of the sequences of level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.as_view().lengths(0).unwrap().collect::<Vec<_>>(), vec![3, 1, 2]);
    /// ```
    pub fn lengths(&self, level: usize) -> Result<impl ExactSizeIterator<Item = u64> + 'a> {
        let window = self.window(level)?;
        Ok(window.windows(2).map(|w| w[1] - w[0]))
    }

    fn window(&self, level: usize) -> Result<&'a [u64]> {
        self.levels
            .get(level)
            .copied()
            .ok_or_else(|| out_of_range("level", level, self.levels.len()))
    }

    /// The number of sequences in level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.as_view().num_sequences(0).unwrap(), 3);
    /// ```
    pub fn num_sequences(&self, level: usize) -> Result<usize> {
        Ok(self.window(level)?.len() - 1)
    }

    /// The number of rows the view spans, or `None` when it has no levels.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.as_view().num_rows(), Some(6));
    /// ```
    pub fn num_rows(&self) -> Option<u64> {
        self.levels.last().map(|w| w[w.len() - 1] - w[0])
    }

    /// The first row of the view within the rows of the LoD it was cut from
    /// (0 for an unsliced view).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.as_view().branch(&[2]).unwrap().0.base_row(), Some(10));
    /// ```
    pub fn base_row(&self) -> Option<u64> {
        self.levels.last().map(|w| w[0])
    }

    /// The range of sequence `index` of level `level`, in units of the next
    /// level (rows for the last level), rebased (Paddle's `lod_element`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 3, 4, 6]]).unwrap();
    /// assert_eq!(lod.as_view().sequence_range(0, 1).unwrap(), 3..4);
    /// ```
    pub fn sequence_range(&self, level: usize, index: usize) -> Result<Range<u64>> {
        let window = self.window(level)?;
        if index + 1 >= window.len() {
            return Err(out_of_range("sequence", index, window.len() - 1));
        }
        Ok(window[index] - window[0]..window[index + 1] - window[0])
    }

    /// The rows, relative to the view's first row, of sequence `index` of level `level`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// assert_eq!(lod.as_view().row_range(0, 1).unwrap(), 9..10);
    /// ```
    pub fn row_range(&self, level: usize, index: usize) -> Result<Range<u64>> {
        Ok(self.slice_level(level, index, index + 1)?.1)
    }

    /// Sequences `begin..end` of level `level`: the view with levels above
    /// `level` dropped (Paddle's `SliceInLevel`, with no copy), and their rows
    /// relative to this view's first row (`GetSubLoDAndAbsoluteOffset`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (sub, rows) = lod.as_view().slice_level(0, 1, 3).unwrap();
    /// assert_eq!(sub.to_lod().to_lengths(), vec![vec![1, 2], vec![1, 2, 3]]);
    /// assert_eq!(rows, 9..15);
    /// ```
    pub fn slice_level(
        &self,
        level: usize,
        begin: usize,
        end: usize,
    ) -> Result<(LodView<'a>, Range<u64>)> {
        let window = self.window(level)?;
        let sequences = window.len() - 1;
        if end > sequences {
            return Err(out_of_range("sequence range end", end, sequences + 1));
        }
        if begin > end {
            return Err(out_of_range("sequence range start", begin, end + 1));
        }
        let mut levels = Vec::with_capacity(self.levels.len() - level);
        levels.push(&window[begin..=end]);
        self.narrow_below(level, &mut levels);
        let rows = self.rows_of(&levels);
        Ok((LodView { levels }, rows))
    }

    /// Pushes, for each level below `level`, the window its parent (the last
    /// window in `levels`) selects.
    fn narrow_below(&self, level: usize, levels: &mut Vec<&'a [u64]>) {
        for l in level + 1..self.levels.len() {
            let parent_full = self.levels[l - 1];
            let parent = levels[levels.len() - 1];
            let start = (parent[0] - parent_full[0]) as usize;
            let end = (parent[parent.len() - 1] - parent_full[0]) as usize;
            levels.push(&self.levels[l][start..=end]);
        }
    }

    /// The rows, relative to this view, that narrowed windows span.
    fn rows_of(&self, narrowed: &[&'a [u64]]) -> Range<u64> {
        match (self.levels.last(), narrowed.last()) {
            (Some(full), Some(w)) => w[0] - full[0]..w[w.len() - 1] - full[0],
            _ => 0..0,
        }
    }

    /// The `<i, j, ...>`-slice: follows one index per level from the top and
    /// returns the remaining levels and the rows, relative to this view, of the
    /// sequence reached. Costs O(levels); copies no offsets.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
    /// let (rest, rows) = lod.as_view().branch(&[2, 0]).unwrap();
    /// assert_eq!((rest.num_levels(), rows), (0, 10..12));
    /// assert_eq!(lod.as_view().branch(&[0, 2]).unwrap().1, 5..9);
    /// ```
    pub fn branch(&self, path: &[usize]) -> Result<(LodView<'a>, Range<u64>)> {
        if path.len() > self.levels.len() {
            return Err(out_of_range(
                "branch depth",
                path.len(),
                self.levels.len() + 1,
            ));
        }
        if path.is_empty() {
            let rows = 0..self.num_rows().unwrap_or(0);
            return Ok((self.clone(), rows));
        }
        let mut levels: Vec<&'a [u64]> = Vec::with_capacity(self.levels.len());
        let mut current = self.levels[0];
        for (l, &index) in path.iter().enumerate() {
            if l > 0 {
                let parent_full = self.levels[l - 1];
                let parent = levels[l - 1];
                let start = (parent[0] - parent_full[0]) as usize;
                let end = (parent[1] - parent_full[0]) as usize;
                current = &self.levels[l][start..=end];
            }
            if index + 1 >= current.len() {
                return Err(out_of_range("branch index", index, current.len() - 1));
            }
            levels.push(&current[index..=index + 1]);
        }
        self.narrow_below(path.len() - 1, &mut levels);
        let rows = self.rows_of(&levels);
        levels.drain(..path.len());
        Ok((LodView { levels }, rows))
    }

    /// Copies the view into an owned, rebased [`Lod`].
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_offsets(vec![vec![0, 1, 3]]).unwrap();
    /// assert_eq!(lod.as_view().to_lod(), lod);
    /// ```
    pub fn to_lod(&self) -> Lod {
        Lod::from_validated(
            self.levels
                .iter()
                .map(|w| w.iter().map(|&o| o - w[0]).collect())
                .collect(),
        )
    }
}

impl fmt::Display for LodView<'_> {
    /// Formats like Paddle: `{{0, 2, 5}}`, with rebased offsets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for w in &self.levels {
            f.write_str("{")?;
            for (i, o) in w.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{}", o - w[0])?;
            }
            f.write_str("}")?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Lod {
        Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap()
    }

    #[test]
    fn branch_slices_of_the_seed() {
        let lod = seed();
        let view = lod.as_view();
        let (b2, rows) = view.branch(&[2]).unwrap();
        assert_eq!(rows, 10..15);
        assert_eq!(b2.to_lod().levels(), &[vec![0, 2, 5]]);
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
        let view = lod.as_view();
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
        let (b, rows) = lod.as_view().branch(&[0]).unwrap();
        assert_eq!(b.to_lod().levels(), &[vec![0u64]]);
        assert_eq!(rows, 0..0);
        let (b, rows) = lod.as_view().branch(&[1, 1]).unwrap();
        assert_eq!((b.num_levels(), rows), (0, 0..3));
    }
}
