//! Global top-level row ↔ (batch, row): [`RowLocation`], and [`RowIndex`],
//! a file's rows counted across its batches.

use super::error::Result;
use crate::Error;

/// Where a top-level row of a file is: its batch, and its row in that batch.
///
/// ```
/// let at = lodt::format::RowLocation { batch: 1, row: 0 };
/// assert_eq!(at.batch, 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowLocation {
    /// The batch.
    pub batch: usize,
    /// The top-level row within the batch.
    pub row: usize,
}

/// The top-level rows of every batch of a file, counted once
/// ([`LodtFile::row_index`](super::LodtFile::row_index)): the number of rows, and where global row `i` is.
/// A batch's rows are those of its first tensor (every tensor of a batch
/// must have as many to be read by row).
///
/// ```
/// use lodt::{format, Batch, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("rows.lodt");
/// let x = |n: usize| LodTensor::from_vec(vec![0u8; n], vec![n], Default::default());
/// let mut w = format::Writer::create(&path, Default::default())?;
/// w.write(&Batch::try_from_tensors([("x", x(2)?)])?)?;
/// w.write(&Batch::try_from_tensors([("x", x(3)?)])?)?;
/// w.finish()?;
/// let index = format::LodtFile::open(&path)?.row_index()?;
/// assert_eq!(index.len(), 5);
/// assert_eq!(index.locate(3)?, format::RowLocation { batch: 1, row: 1 });
/// assert!(index.locate(5).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowIndex {
    /// `starts[k]`: the first global row of batch `k`; the last is the total.
    starts: Vec<usize>,
}

impl RowIndex {
    /// The index of a file whose batch `k` starts at global row `starts[k]`
    /// (the last entry is the total).
    pub(super) fn from_starts(starts: Vec<usize>) -> RowIndex {
        RowIndex { starts }
    }

    /// The number of top-level rows of the file.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// # lodt::format::save_batch(&path, &lodt::Batch::new())?;
    /// assert_eq!(lodt::format::LodtFile::open(&path)?.row_index()?.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Whether the file has no top-level row.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// # lodt::format::save_batch(&path, &lodt::Batch::new())?;
    /// assert!(lodt::format::LodtFile::open(&path)?.row_index()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of top-level rows of batch `k` (`None` past the last batch).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// # let x = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
    /// # lodt::format::save_batch(&path, &lodt::Batch::try_from_tensors([("x", x)])?)?;
    /// let index = lodt::format::LodtFile::open(&path)?.row_index()?;
    /// assert_eq!((index.batch_rows(0), index.batch_rows(1)), (Some(2), None));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn batch_rows(&self, k: usize) -> Option<usize> {
        Some(self.starts.get(k + 1)? - self.starts.get(k)?)
    }

    /// Where global top-level row `row` is.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// # let x = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
    /// # lodt::format::save_batch(&path, &lodt::Batch::try_from_tensors([("x", x)])?)?;
    /// let index = lodt::format::LodtFile::open(&path)?.row_index()?;
    /// assert_eq!(index.locate(1)?.row, 1);
    /// assert!(index.locate(2).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn locate(&self, row: usize) -> Result<RowLocation> {
        let total = self.len();
        if row >= total {
            return Err(Error::OutOfRange {
                what: "row",
                index: row as u64,
                len: total as u64,
            }
            .into());
        }
        // The last batch whose first row is <= row (batches may be empty).
        let batch = self.starts.partition_point(|&s| s <= row).saturating_sub(1);
        let start = self.starts.get(batch).copied().unwrap_or(0);
        Ok(RowLocation {
            batch,
            row: row - start,
        })
    }
}
