//! [`Lod::offsets_bytes`]: the bytes a LoD's offsets take.

use super::Lod;

impl Lod {
    /// The bytes of the LoD's offsets, 8 per offset (`sequences + 1` per
    /// level): what a `.lodt` file stores for it uncompressed, what `lodt
    /// info` reports as LoD bytes, and what re-batching by size counts
    /// ([`batch_bytes`](crate::batch::rebatch::batch_bytes)).
    ///
    /// ```
    /// use lodt::Lod;
    /// let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
    /// assert_eq!(lod.offsets_bytes(), (4 + 7) * 8);
    /// assert_eq!(Lod::empty().offsets_bytes(), 0);
    /// assert_eq!(lod.slice_level(0, 1, 2)?.0.offsets_bytes(), (2 + 2) * 8); // one article of one sentence
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn offsets_bytes(&self) -> u64 {
        (0..self.num_levels())
            .map(|l| self.num_sequences(l).map_or(0, |n| n as u64 + 1))
            .fold(0u64, u64::saturating_add)
            .saturating_mul(8)
    }
}
