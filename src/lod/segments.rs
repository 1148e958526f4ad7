//! Segment ids: the offsets of one LoD level turned inside out, one entry per
//! item of the level below (or per row, for the last level) naming the
//! sequence that holds it. JAX's `segment_sum`, TensorFlow's
//! `math.segment_sum` and `value_rowids` take this form of a LoD.

use super::Offsets;
use crate::error::{Error, Result};

impl Offsets {
    /// The segment id of every item this level covers: item `j` (counted from
    /// the level's first offset) belongs to sequence `i` when
    /// `offsets[i] <= j < offsets[i + 1]`. Empty sequences own no item; the
    /// ids never decrease, and there are `offsets[last] - offsets[0]` of them.
    ///
    /// The result's size comes from the offsets, not from bytes in memory (a
    /// tensor of zero-sized elements can claim many rows): a size that cannot
    /// be allocated is [`Error::Overflow`], not an abort.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![2, 0, 1], vec![3, 1, 2]])?;
    /// assert_eq!(lod.level(0).unwrap().segment_ids()?, vec![0, 0, 2]);
    /// assert_eq!(lod.level(1).unwrap().segment_ids()?, vec![0, 0, 0, 1, 2, 2]);
    /// // A slice's level is rebased: article 2 holds sentence 2 only.
    /// let (article2, _) = lod.branch(&[2])?;
    /// assert_eq!(article2.level(0).unwrap().segment_ids()?, vec![0, 0]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn segment_ids(&self) -> Result<Vec<u64>> {
        const WHAT: &str = "segment ids (one per item of a LoD level)";
        let raw = self.raw();
        let total = match (raw.first(), raw.last()) {
            (Some(&first), Some(&last)) => last.checked_sub(first),
            _ => Some(0),
        };
        let total = total
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(Error::Overflow { what: WHAT })?;
        let mut ids = Vec::new();
        ids.try_reserve_exact(total)
            .map_err(|_| Error::Overflow { what: WHAT })?;
        for (i, length) in self.lengths().enumerate() {
            // Lengths of a validated level sum to `total`: no reallocation.
            let length = usize::try_from(length).map_err(|_| Error::Overflow { what: WHAT })?;
            ids.resize(ids.len() + length, i as u64);
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Error, Lod};

    #[test]
    fn segment_ids_of_every_level_with_empty_sequences() {
        let lod = Lod::try_from_offsets(vec![vec![0, 0, 2, 2, 3], vec![0, 2, 2, 5]]).unwrap();
        assert_eq!(lod.level(0).unwrap().segment_ids().unwrap(), vec![1, 1, 3]);
        assert_eq!(
            lod.level(1).unwrap().segment_ids().unwrap(),
            vec![0, 0, 2, 2, 2]
        );
    }

    #[test]
    fn segment_ids_of_a_level_with_no_items() {
        let lod = Lod::try_from_offsets(vec![vec![0, 0, 0]]).unwrap();
        assert_eq!(
            lod.level(0).unwrap().segment_ids().unwrap(),
            Vec::<u64>::new()
        );
        let lod = Lod::try_from_offsets(vec![vec![0]]).unwrap_err();
        assert!(matches!(lod, Error::InvalidLod { .. }), "{lod}");
    }

    #[test]
    fn segment_ids_of_a_slice_are_rebased() {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        let (tail, rows) = lod.slice_level(0, 1, 3).unwrap();
        assert_eq!(rows, 9..15);
        assert_eq!(tail.level(0).unwrap().segment_ids().unwrap(), vec![0, 1, 1]);
        assert_eq!(
            tail.level(1).unwrap().segment_ids().unwrap(),
            vec![0, 1, 1, 2, 2, 2]
        );
    }

    #[test]
    fn segment_ids_too_many_to_allocate_is_an_error_not_an_abort() {
        // A LoD of zero-sized rows may claim more items than memory holds.
        let lod = Lod::try_from_offsets(vec![vec![0, u64::MAX / 2]]).unwrap();
        let err = lod.level(0).unwrap().segment_ids().unwrap_err();
        assert!(matches!(err, Error::Overflow { .. }), "{err}");
    }
}
