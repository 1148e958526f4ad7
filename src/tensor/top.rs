//! The top level of a tensor: its top-level sequences when it has a LoD, its
//! rows otherwise ([`LodTensor::slice_top`]).

use super::LodTensor;
use crate::error::Result;

impl LodTensor {
    /// Items `begin..end` of the top level, with no copy: top-level sequences
    /// (keeping every level below) when the tensor has a LoD, rows otherwise.
    /// [`LodTensor::top_level_rows`] counts the items.
    ///
    /// ```
    /// use lodt::{Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]])?;
    /// let t = LodTensor::from_vec((0..6i32).collect(), vec![6], lod)?;
    /// let second = t.slice_top(1, 2)?;
    /// assert_eq!(second.as_slice::<i32>()?, &[3, 4, 5]);
    /// assert_eq!(second.lod().to_lengths(), vec![vec![1], vec![3]]);
    /// let plain = LodTensor::from_vec((0..6i32).collect(), vec![3, 2], Lod::empty())?;
    /// assert_eq!(plain.slice_top(2, 3)?.as_slice::<i32>()?, &[4, 5]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn slice_top(&self, begin: usize, end: usize) -> Result<LodTensor> {
        if self.lod().is_empty() {
            self.slice_rows(begin, end)
        } else {
            self.slice_level(0, begin, end)
        }
    }
}
