//! A batch's top level: its number of top-level rows and gathers of them.

use super::Batch;
use crate::error::{Error, Result};

impl Batch {
    /// The number of top-level rows of the batch: that of its first tensor
    /// (top-level sequences, or rows of a tensor with no LoD); 0 for a batch
    /// with no tensor.
    ///
    /// ```
    /// use lodt::{Batch, Lod, LodTensor};
    /// let x = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Lod::try_from_lengths(&[vec![2, 1]])?)?;
    /// assert_eq!(Batch::try_from_tensors([("x", x)])?.top_level_rows(), 2);
    /// assert_eq!(Batch::new().top_level_rows(), 0);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn top_level_rows(&self) -> usize {
        self.iter().next().map_or(0, |(_, t)| t.top_level_rows())
    }

    /// Top-level rows `indices` of every tensor gathered, in that order, into
    /// a new batch (a copy, one pass over each tensor's bytes) with the same
    /// metadata. Every tensor must have as many top-level rows as the first.
    ///
    /// ```
    /// use lodt::{Batch, Lod, LodTensor};
    /// let x = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Lod::try_from_lengths(&[vec![2, 1]])?)?;
    /// let y = LodTensor::from_vec(vec![10i32, 20], vec![2], Lod::empty())?;
    /// let b = Batch::try_from_tensors([("x", x), ("y", y)])?.take(&[1, 0])?;
    /// assert_eq!(b.get("x").unwrap().as_slice::<u8>()?, &[3, 1, 2]);
    /// assert_eq!(b.get("y").unwrap().as_slice::<i32>()?, &[20, 10]);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn take(&self, indices: &[usize]) -> Result<Batch> {
        let n = self.top_level_rows();
        let mut out = Batch::new();
        *out.metadata_mut() = self.metadata().clone();
        for (name, t) in self.iter() {
            if t.top_level_rows() != n {
                return Err(Error::Mismatch {
                    what: "top-level rows of a batch's tensor (as the first tensor's)",
                    expected: n as u64,
                    found: t.top_level_rows() as u64,
                });
            }
            out.push(name, crate::ops::take(t, indices)?)?;
        }
        Ok(out)
    }
}
