//! A file's top-level rows: counted across its batches
//! ([`LodtFile::row_index`]), read in place ([`LodtFile::row`]) or gathered
//! ([`LodtFile::take`]).

use super::error::Result;
use super::gather::check_items;
use super::reader::LodtFile;
use super::row_index::{RowIndex, RowLocation};
use crate::buffer::Pages;
use crate::ops::concat::join;
use crate::{Batch, Error, LodTensor};

impl LodtFile {
    /// The number of top-level rows of batch `k`: those of its first tensor
    /// (0 for a batch with no tensor).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// # let x = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
    /// # lodt::format::save_batch(&path, &lodt::Batch::try_from_tensors([("x", x)])?)?;
    /// assert_eq!(lodt::format::LodtFile::open(&path)?.batch_rows(0)?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn batch_rows(&self, k: usize) -> Result<usize> {
        let batch = self.batch(k)?;
        if batch.is_empty() {
            return Ok(0);
        }
        Ok(batch.tensor_at(0)?.1.top_level_rows())
    }

    /// Counts the top-level rows of every batch (reads every batch's
    /// header): keep the index to locate many rows.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// # let x = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
    /// # lodt::format::save_batch(&path, &lodt::Batch::try_from_tensors([("x", x)])?)?;
    /// assert_eq!(lodt::format::LodtFile::open(&path)?.row_index()?.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn row_index(&self) -> Result<RowIndex> {
        let n = self.num_batches();
        let mut starts = Vec::new();
        starts
            .try_reserve_exact(n.saturating_add(1))
            .map_err(|_| crate::error::out_of_memory::<usize>(n.saturating_add(1), "row index"))?;
        let mut total = 0usize;
        starts.push(0);
        for k in 0..n {
            total = total
                .checked_add(self.batch_rows(k)?)
                .ok_or(Error::Overflow { what: "file rows" })?;
            starts.push(total);
        }
        Ok(RowIndex::from_starts(starts))
    }

    /// The number of top-level rows of the file ([`LodtFile::row_index`]'s
    /// length).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// # let x = lodt::LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?;
    /// # lodt::format::save_batch(&path, &lodt::Batch::try_from_tensors([("x", x)])?)?;
    /// assert_eq!(lodt::format::LodtFile::open(&path)?.num_rows()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_rows(&self) -> Result<usize> {
        Ok(self.row_index()?.len())
    }

    /// The top-level row `at` in every tensor of its batch: a batch of one
    /// sequence (or row) per tensor, read in place (no copy), with the
    /// batch's metadata. Every tensor of the batch must have as many
    /// top-level rows.
    ///
    /// ```
    /// use lodt::{format, Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// format::save_batch(&path, &Batch::try_from_tensors([("x", x)])?)?;
    /// let file = format::LodtFile::open(&path)?;
    /// let row = file.row(file.row_index()?.locate(1)?)?;
    /// assert_eq!(row.get("x").unwrap().as_slice::<i32>()?, &[1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn row(&self, at: RowLocation) -> Result<Batch> {
        let view = self.batch(at.batch)?;
        let rows = self.batch_rows(at.batch)?;
        let mut out = Batch::new();
        *out.metadata_mut() = view.metadata().clone();
        for i in 0..view.len() {
            let (name, t) = view.tensor_at(i)?;
            check_items(at.batch, name, 0, t.top_level_rows(), rows)?;
            out.push(name, t.slice_top(at.row, at.row.saturating_add(1))?)?;
        }
        Ok(out)
    }

    /// Top-level rows `rows` gathered, in that order, into one new batch (a
    /// copy, one pass over each tensor's bytes) with the tensors and metadata
    /// of the first row's batch. Every batch touched must hold those tensors
    /// with the same dtypes, element shapes and numbers of LoD levels.
    ///
    /// ```
    /// use lodt::{format, Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// let x = |v: Vec<i64>| LodTensor::from_vec(v.clone(), vec![v.len()], Default::default());
    /// let mut w = format::Writer::create(&path, Default::default())?;
    /// w.write(&Batch::try_from_tensors([("x", x(vec![10, 11])?)])?)?;
    /// w.write(&Batch::try_from_tensors([("x", x(vec![12])?)])?)?;
    /// w.finish()?;
    /// let file = format::LodtFile::open(&path)?;
    /// let index = file.row_index()?;
    /// let at = [2, 0, 2].map(|i| index.locate(i).unwrap());
    /// assert_eq!(file.take(&at)?.get("x").unwrap().as_slice::<i64>()?, &[12, 10, 12]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take(&self, rows: &[RowLocation]) -> Result<Batch> {
        self.take_level(0, rows)
    }

    /// The items `items` of LoD level `level` gathered, in that order (an
    /// item may repeat), into one new batch (a copy, one pass over each
    /// tensor's bytes) whose top level is that level, with the tensors and
    /// metadata of the first item's batch. An item is a
    /// [`RowLocation`] whose `row` counts the sequences of level `level` of
    /// its batch (level 0: [`LodtFile::take`], top-level rows). Every tensor of
    /// a batch touched must have as many sequences at that level, and the
    /// dtypes, element shapes and LoD levels of the first item's batch.
    ///
    /// The bytes of every item are asked of the source at once, sorted by
    /// file offset, before the copy ([`LodtFile::prefetch`]): on a file not in
    /// the page cache the reads run concurrently.
    ///
    /// ```
    /// use lodt::{format::{self, RowLocation}, Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a.lodt");
    /// // Two documents of 2 and 1 sentences of 1, 2 and 3 tokens.
    /// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]])?;
    /// let x = LodTensor::from_vec((0..6i64).collect(), vec![6], lod)?;
    /// format::save_batch(&path, &Batch::try_from_tensors([("x", x)])?)?;
    /// let file = format::LodtFile::open(&path)?;
    /// let at = |row| RowLocation { batch: 0, row };
    /// let got = file.take_level(1, &[at(2), at(0), at(2)])?;
    /// let x = got.get("x").unwrap();
    /// assert_eq!(x.as_slice::<i64>()?, &[3, 4, 5, 0, 3, 4, 5]);
    /// assert_eq!(x.lod().to_lengths(), vec![vec![3, 1, 3]]);
    /// assert!(file.take_level(1, &[at(3)]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_level(&self, level: usize, items: &[RowLocation]) -> Result<Batch> {
        let Some(gathered) = self.gather(level, items, true)? else {
            return Ok(Batch::new());
        };
        let mut out = Batch::new();
        *out.metadata_mut() = gathered.template.metadata().clone();
        for (name, parts) in &gathered.parts {
            let like = gathered.template.tensor(name)?;
            let levels = like.lod().num_levels().saturating_sub(level);
            let refs: Vec<&LodTensor> = parts.iter().collect();
            let joined = join(
                &refs,
                like.dtype(),
                like.element_shape(),
                levels,
                Pages::Huge,
            )?;
            out.push(*name, joined)?;
        }
        Ok(out)
    }
}
