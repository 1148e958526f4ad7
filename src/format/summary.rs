//! [`LodtFile::summarize`]: a file's schema and totals in one pass over its
//! batches, what `lodt info` prints.

use super::{LodtFile, Result};
use crate::dtype::DType;
use crate::tensor::LodTensor;
use std::collections::BTreeMap;
use std::ops::Range;

/// One tensor layout of a file (a name, dtype, element shape and number of
/// LoD levels), with its totals over every batch that holds it.
///
/// See [`LodtFile::summarize`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorTotals {
    /// The tensor's name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// The shape of one row.
    pub element_shape: Vec<usize>,
    /// Its number of LoD levels.
    pub lod_levels: usize,
    /// Sequences per LoD level, summed over the batches.
    pub sequences: Vec<u64>,
    /// Rows, summed over the batches.
    pub rows: u64,
    /// Body bytes (decoded), summed over the batches.
    pub body_bytes: u64,
    /// LoD offset bytes ([`Lod::offsets_bytes`](crate::Lod::offsets_bytes)),
    /// summed over the batches.
    pub lod_bytes: u64,
}

/// One tensor of one batch, as [`LodtFile::summarize`] reports it.
///
/// See [`LodtFile::summarize`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchTensor {
    /// The tensor's name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Sequences per LoD level.
    pub sequences: Vec<u64>,
    /// Its rows.
    pub rows: u64,
    /// Its body bytes (decoded).
    pub body_bytes: u64,
    /// Its LoD offset bytes.
    pub lod_bytes: u64,
}

/// One batch of a file, as [`LodtFile::summarize`] reports it.
///
/// See [`LodtFile::summarize`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchSummary {
    /// The batch's index.
    pub index: usize,
    /// Its bytes in the file.
    pub byte_range: Range<u64>,
    /// Its body bytes as stored ([`BatchView::body_bytes`](super::BatchView::body_bytes)).
    pub body_bytes: u64,
    /// The top-level rows of its first tensor (0 for a batch of none).
    pub top_level_rows: usize,
    /// Its metadata.
    pub metadata: BTreeMap<String, String>,
    /// Its tensors, in file order.
    pub tensors: Vec<BatchTensor>,
}

/// A file's schema and totals: every tensor layout in the order first seen,
/// with its totals, and the body and LoD bytes of the whole file.
///
/// See [`LodtFile::summarize`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileSummary {
    /// Every tensor layout, in the order first seen.
    pub tensors: Vec<TensorTotals>,
    /// Body bytes (decoded) of every tensor of every batch.
    pub body_bytes: u64,
    /// LoD offset bytes of every tensor of every batch.
    pub lod_bytes: u64,
}

impl LodtFile {
    /// Reads every batch once and sums, per tensor layout, its sequences
    /// per level, rows, body bytes and LoD bytes; `each_batch` sees every
    /// batch's own summary in order (a caller that lists batches keeps what
    /// it needs, so a file of many batches is summarized in constant memory).
    ///
    /// ```
    /// use lodt::{Batch, Lod, LodTensor, LodtFile, format};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("b.lodt");
    /// let words = LodTensor::from_vec((0..9i64).collect(), vec![9, 1], Lod::try_from_lengths(&[vec![2, 1], vec![3, 2, 4]])?)?;
    /// let labels = LodTensor::from_vec(vec![1i64, 0], vec![2], Lod::empty())?;
    /// format::save_batch(&path, &Batch::try_from_tensors([("words", words), ("labels", labels)])?)?;
    /// let mut rows = Vec::new();
    /// let summary = LodtFile::open(&path)?.summarize(|b| rows.push(b.top_level_rows))?;
    /// assert_eq!(rows, [2]);
    /// let words = &summary.tensors[0];
    /// assert_eq!((words.name.as_str(), words.sequences.clone(), words.rows), ("words", vec![2, 3], 9));
    /// assert_eq!((words.body_bytes, words.lod_bytes), (9 * 8, (3 + 4) * 8));
    /// assert_eq!((summary.body_bytes, summary.lod_bytes), (9 * 8 + 2 * 8, 7 * 8));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn summarize(&self, mut each_batch: impl FnMut(&BatchSummary)) -> Result<FileSummary> {
        let mut summary = FileSummary::default();
        for index in 0..self.num_batches() {
            let view = self.batch(index)?;
            let mut tensors = Vec::with_capacity(view.len());
            let mut top_level_rows = None;
            for t in view.tensors() {
                let (name, tensor) = t?;
                top_level_rows.get_or_insert(tensor.top_level_rows());
                tensors.push(summary.add(name, &tensor));
            }
            let top_level_rows = top_level_rows.unwrap_or(0);
            each_batch(&BatchSummary {
                index,
                byte_range: view.byte_range(),
                body_bytes: view.body_bytes(),
                top_level_rows,
                metadata: view.metadata().clone(),
                tensors,
            });
        }
        Ok(summary)
    }
}

impl FileSummary {
    /// Adds one tensor of a batch to the totals of its layout; returns its
    /// own summary.
    fn add(&mut self, name: &str, tensor: &LodTensor) -> BatchTensor {
        let lod = tensor.lod();
        let sequences: Vec<u64> = (0..lod.num_levels())
            .map(|l| lod.num_sequences(l).unwrap_or(0) as u64)
            .collect();
        let part = BatchTensor {
            name: name.to_owned(),
            dtype: tensor.dtype(),
            shape: tensor.shape().to_vec(),
            sequences,
            rows: tensor.rows() as u64,
            body_bytes: tensor.as_bytes().len() as u64,
            lod_bytes: lod.offsets_bytes(),
        };
        let same = |t: &TensorTotals| {
            t.name == name
                && t.dtype == part.dtype
                && t.element_shape == tensor.element_shape()
                && t.lod_levels == lod.num_levels()
        };
        let index = match self.tensors.iter().position(same) {
            Some(i) => i,
            None => {
                self.tensors.push(TensorTotals {
                    name: name.to_owned(),
                    dtype: part.dtype,
                    element_shape: tensor.element_shape().to_vec(),
                    lod_levels: lod.num_levels(),
                    sequences: vec![0; lod.num_levels()],
                    rows: 0,
                    body_bytes: 0,
                    lod_bytes: 0,
                });
                self.tensors.len() - 1
            }
        };
        let totals = &mut self.tensors[index];
        for (sum, n) in totals.sequences.iter_mut().zip(&part.sequences) {
            *sum = sum.saturating_add(*n);
        }
        totals.rows = totals.rows.saturating_add(part.rows);
        totals.body_bytes = totals.body_bytes.saturating_add(part.body_bytes);
        totals.lod_bytes = totals.lod_bytes.saturating_add(part.lod_bytes);
        self.body_bytes = self.body_bytes.saturating_add(part.body_bytes);
        self.lod_bytes = self.lod_bytes.saturating_add(part.lod_bytes);
        part
    }
}

#[cfg(test)]
mod tests {
    use crate::{Batch, Lod, LodTensor, LodtFile, Writer};

    #[test]
    fn layouts_are_summed_over_batches_and_a_changed_layout_is_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.lodt");
        let mut w = Writer::create(&path, Default::default()).unwrap();
        for k in 1..=3usize {
            let lod = Lod::try_from_lengths(&[vec![k as u64]]).unwrap();
            let x = LodTensor::from_vec(vec![0f32; k * 2], vec![k, 2], lod).unwrap();
            w.write(&Batch::try_from_tensors([("x", x)]).unwrap())
                .unwrap();
        }
        // The same name with another dtype: a second layout.
        let y = LodTensor::from_vec(vec![0u8; 4], vec![4], Lod::empty()).unwrap();
        w.write(&Batch::try_from_tensors([("x", y)]).unwrap())
            .unwrap();
        w.finish().unwrap();
        let mut seen = Vec::new();
        let s = LodtFile::open(&path)
            .unwrap()
            .summarize(|b| seen.push((b.index, b.top_level_rows, b.tensors[0].shape.clone())))
            .unwrap();
        assert_eq!(
            seen,
            [
                (0, 1, vec![1, 2]),
                (1, 1, vec![2, 2]),
                (2, 1, vec![3, 2]),
                (3, 4, vec![4])
            ]
        );
        assert_eq!(s.tensors.len(), 2);
        let (f, u) = (&s.tensors[0], &s.tensors[1]);
        assert_eq!(
            (f.sequences.clone(), f.rows, f.body_bytes, f.lod_bytes),
            (vec![3], 6, 6 * 2 * 4, 3 * 2 * 8)
        );
        assert_eq!(
            (u.lod_levels, u.rows, u.body_bytes, u.lod_bytes),
            (0, 4, 4, 0)
        );
        assert_eq!((s.body_bytes, s.lod_bytes), (48 + 4, 48));
    }
}
