//! [`Dataset::take`]: sequences gathered by global id into one batch.

use super::error::{DatasetError, Result};
use super::reader::Dataset;
use crate::buffer::Pages;
use crate::ops::concat::join;
use crate::{Batch, LodTensor};

impl Dataset {
    /// Sequences `ids` (global ids, in any order, repeats allowed) gathered
    /// into one batch of the schema's tensors, in schema order: each tensor's
    /// sequences follow one another as `ids` lists them (a copy, one pass
    /// over the bytes). No id gives tensors of no sequences.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// let batch = dataset.take(&[2, 0])?;
    /// let x = batch.get("x").unwrap();
    /// assert_eq!(x.as_slice::<i32>()?, &[3, 4, 5, 0]);
    /// assert_eq!(x.lod().to_lengths(), vec![vec![3, 1]]);
    /// assert_eq!(dataset.take(&[])?.get("x").unwrap().top_level_rows(), 0);
    /// assert!(dataset.take(&[3]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take(&self, ids: &[u64]) -> Result<Batch> {
        let tensors = &self.schema().tensors;
        let mut columns: Vec<Vec<LodTensor>> = Vec::new();
        for _ in tensors {
            let mut column = Vec::new();
            column
                .try_reserve_exact(ids.len())
                .map_err(|_| DatasetError::tensor("take", overflow()))?;
            columns.push(column);
        }
        for &id in ids {
            let sequence = self.sequence(id)?;
            for (column, (_, t)) in columns.iter_mut().zip(sequence.iter()) {
                column.push(t.clone());
            }
        }
        let mut out = Batch::new();
        for (schema, column) in tensors.iter().zip(columns) {
            let parts: Vec<&LodTensor> = column.iter().collect();
            // Every sequence has the schema's dtype, element shape and levels
            // (the dataset checks each batch it reads against the schema).
            let joined = join(
                &parts,
                schema.dtype,
                &schema.element_shape,
                schema.lod_levels,
                // Mini-batches of a training loop come one after another:
                // pages faulted in at once, never a huge-page compaction stall.
                Pages::Prefaulted,
            )
            .map_err(|e| DatasetError::tensor(format!("gathering tensor {:?}", schema.name), e))?;
            out.push(schema.name.clone(), joined)
                .map_err(|e| DatasetError::tensor("building the gathered batch", e))?;
        }
        Ok(out)
    }
}

fn overflow() -> crate::Error {
    crate::Error::Overflow {
        what: "gathered sequences",
    }
}
