//! [`Lod::concat`]: LoDs joined along their top level, the one place where
//! offsets are shifted to continue one another.

use super::Lod;
use crate::error::{Error, Result};
use smallvec::SmallVec;
use std::ops::Range;

impl Lod {
    /// The LoD of `parts` concatenated along their top level: at every level,
    /// each part's sequences follow the previous part's, its offsets shifted
    /// by where the previous part ended. Every part must have as many levels;
    /// the result has that many (and no level for parts with no LoD). One
    /// allocation for all levels; slices (windows of a shared block) go in as
    /// they are.
    ///
    /// ```
    /// use lodt::Lod;
    /// let a = Lod::try_from_lengths(&[vec![2, 1], vec![3, 2, 4]])?;
    /// let b = Lod::try_from_lengths(&[vec![1], vec![5]])?;
    /// let ab = Lod::concat(&[&a, &b])?;
    /// assert_eq!(ab.to_lengths(), vec![vec![2, 1, 1], vec![3, 2, 4, 5]]);
    /// assert_eq!(ab.to_offsets(), vec![vec![0, 2, 3, 4], vec![0, 3, 5, 9, 14]]);
    /// assert!(Lod::concat(&[&a, &Lod::empty()]).is_err()); // 2 levels and 0
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn concat(parts: &[&Lod]) -> Result<Lod> {
        let Some(first) = parts.first() else {
            return Ok(Lod::empty());
        };
        let levels = first.num_levels();
        if levels == 0 {
            if let Some(other) = parts.iter().find(|p| p.num_levels() != 0) {
                return Err(level_mismatch(0, other.num_levels()));
            }
            return Ok(Lod::empty());
        }
        // Each level holds one offset per sequence of every part, plus the 0.
        let mut total = 0usize;
        for part in parts {
            if part.num_levels() != levels {
                return Err(level_mismatch(levels, part.num_levels()));
            }
            for level in part.levels() {
                total = total
                    .checked_add(level.num_sequences())
                    .ok_or(Error::Overflow {
                        what: "concatenated LoD",
                    })?;
            }
        }
        let total = total.checked_add(levels).ok_or(Error::Overflow {
            what: "concatenated LoD",
        })?;
        let mut block: Vec<u64> = Vec::new();
        block
            .try_reserve_exact(total)
            .map_err(|_| Error::Overflow {
                what: "concatenated LoD",
            })?;
        let mut bounds: SmallVec<[Range<usize>; 4]> = SmallVec::new();
        for l in 0..levels {
            let start = block.len();
            block.push(0);
            let mut end = 0u64;
            for part in parts {
                // Present: every part has `levels` levels (checked above).
                let Some(level) = part.level(l) else {
                    return Err(level_mismatch(levels, part.num_levels()));
                };
                let base = level.base();
                let last = level.raw().last().copied().unwrap_or(base);
                // The part's last offset, shifted: every offset before it is
                // smaller, so one check covers the part.
                let shifted_end = (last - base).checked_add(end).ok_or(Error::Overflow {
                    what: "concatenated LoD offset",
                })?;
                block.extend(level.raw().iter().skip(1).map(|&o| o - base + end));
                end = shifted_end;
            }
            bounds.push(start..block.len());
        }
        // Each level continues valid levels with the previous part's end, and
        // the next level's shift is the previous parts' sequence count there:
        // the rules of every part hold for the whole.
        Ok(Lod::from_block(block, &bounds))
    }
}

fn level_mismatch(expected: usize, found: usize) -> Error {
    Error::Mismatch {
        what: "LoD levels of a concatenated part",
        expected: expected as u64,
        found: found as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_concatenate_like_their_copies() {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        let (tail, _) = lod.slice_level(0, 1, 3).unwrap();
        let (head, _) = lod.slice_level(0, 0, 1).unwrap();
        let joined = Lod::concat(&[&tail, &head]).unwrap();
        assert_eq!(
            joined.to_lengths(),
            vec![vec![1, 2, 3], vec![1, 2, 3, 3, 2, 4]]
        );
        assert_eq!(Lod::concat(&[&head, &tail]).unwrap(), lod);
    }

    #[test]
    fn empty_parts_and_no_parts() {
        let lod = Lod::try_from_lengths(&[vec![2]]).unwrap();
        let (none, _) = lod.slice_level(0, 0, 0).unwrap();
        assert_eq!(Lod::concat(&[&none, &lod, &none]).unwrap(), lod);
        assert_eq!(Lod::concat(&[]).unwrap(), Lod::empty());
        assert_eq!(
            Lod::concat(&[&Lod::empty(), &Lod::empty()]).unwrap(),
            Lod::empty()
        );
    }
}
