//! A LoD from each level's offsets measured in rows: the form of
//! FlashAttention's `cu_seqlens` of an outer level and of torch's jagged
//! tensors' outer offsets (`lodt::dataset::varlen` gives it per level).

use super::Lod;
use crate::error::{Error, Result};

impl Lod {
    /// Builds a LoD from the offsets of every level measured in rows, top
    /// level first: the last level's are its ordinary offsets; each outer
    /// level's entries must each be an offset of the level below it (a
    /// boundary between its sequences), and become the index of that
    /// boundary (the first, where empty sequences repeat one). The result
    /// is validated as [`Lod::try_from_offsets`].
    ///
    /// An error ([`Error::InvalidArgument`]) names the outer level and the
    /// row offset that is not a boundary of the level below.
    ///
    /// ```
    /// use lodt::Lod;
    /// // Two articles of 2 and 1 sentences; sentences of 3, 2 and 4 rows.
    /// let lod = Lod::try_from_row_offsets(&[vec![0, 5, 9], vec![0, 3, 5, 9]])?;
    /// assert_eq!(lod.to_offsets(), [vec![0, 2, 3], vec![0, 3, 5, 9]]);
    /// let err = Lod::try_from_row_offsets(&[vec![0, 4, 9], vec![0, 3, 5, 9]]).unwrap_err();
    /// assert!(err.to_string().contains("outer level 0: row offset 4 is not a boundary"), "{err}");
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_from_row_offsets(levels: &[Vec<u64>]) -> Result<Lod> {
        let Some((last, outer)) = levels.split_last() else {
            return Ok(Lod::empty());
        };
        let mut out: Vec<Vec<u64>> = Vec::new();
        out.try_reserve_exact(levels.len())
            .map_err(|_| Error::Overflow { what: "LoD levels" })?;
        out.resize(levels.len(), Vec::new());
        let mut below: &[u64] = last;
        for (k, level) in outer.iter().enumerate().rev() {
            let mut indices = Vec::new();
            indices
                .try_reserve_exact(level.len())
                .map_err(|_| Error::Overflow {
                    what: "LoD offsets",
                })?;
            for &row in level {
                let at = below.partition_point(|&b| b < row);
                if below.get(at) != Some(&row) {
                    return Err(Error::InvalidArgument(format!(
                        "outer level {k}: row offset {row} is not a boundary of the level below it \
                         (its row offsets must be boundaries of the level below it)"
                    )));
                }
                indices.push(at as u64);
            }
            out[k] = indices;
            below = level;
        }
        out[levels.len() - 1] = last.clone();
        Lod::try_from_offsets(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverts_the_offsets_in_rows_of_every_level() {
        let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap();
        // Level 0 in rows: articles end at rows 9, 10 and 15.
        let rows = [vec![0, 9, 10, 15], vec![0, 3, 5, 9, 10, 12, 15]];
        assert_eq!(Lod::try_from_row_offsets(&rows).unwrap(), lod);
        // One level: its offsets as they are; none: no LoD.
        let one = Lod::try_from_row_offsets(&[vec![0, 2, 2, 5]]).unwrap();
        assert_eq!(one.to_offsets(), [vec![0, 2, 2, 5]]);
        assert_eq!(Lod::try_from_row_offsets(&[]).unwrap(), Lod::empty());
    }

    #[test]
    fn an_empty_sequence_below_takes_the_first_boundary() {
        // Below: sequences of 2, 0 and 3 rows; above, one sequence ending at row 2.
        let lod = Lod::try_from_row_offsets(&[vec![0, 2, 5], vec![0, 2, 2, 5]]).unwrap();
        assert_eq!(lod.to_offsets(), [vec![0, 1, 3], vec![0, 2, 2, 5]]);
    }

    #[test]
    fn refuses_what_is_not_a_boundary_or_not_a_lod() {
        let err = Lod::try_from_row_offsets(&[vec![0, 3], vec![0, 2, 4]]).unwrap_err();
        assert!(
            err.to_string()
                .contains("outer level 0: row offset 3 is not a boundary"),
            "{err}"
        );
        let err = Lod::try_from_row_offsets(&[vec![0, 9], vec![0, 2, 4]]).unwrap_err();
        assert!(err.to_string().contains("row offset 9"), "{err}");
        // Boundaries, but the outer level does not end where the level below does.
        assert!(Lod::try_from_row_offsets(&[vec![0, 2], vec![0, 2, 4]]).is_err());
        // Decreasing offsets are no LoD.
        assert!(Lod::try_from_row_offsets(&[vec![0, 3, 1]]).is_err());
    }
}
