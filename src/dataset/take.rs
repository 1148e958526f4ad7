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
    /// over the bytes). No id gives tensors of no sequences. The ids are
    /// grouped by batch, and each batch is taken from the dataset's cache
    /// (read, and decoded when compressed, on a miss): once per call at
    /// most.
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
        let mut at = Vec::new();
        at.try_reserve_exact(ids.len())
            .map_err(|_| DatasetError::tensor("take", overflow()))?;
        for &id in ids {
            at.push(self.locate(id)?);
        }
        // The ids by batch (stable: each batch's in the order given): each
        // batch is read, and decoded when compressed, once per call (and not
        // at all when the dataset's cache has it).
        let mut by_batch: Vec<usize> = (0..ids.len()).collect();
        by_batch.sort_by_key(|&i| (at[i].shard, at[i].batch));
        // Per id, its sequence of each tensor.
        let mut sequences: Vec<Option<Vec<LodTensor>>> = Vec::new();
        sequences
            .try_reserve_exact(ids.len())
            .map_err(|_| DatasetError::tensor("take", overflow()))?;
        sequences.resize_with(ids.len(), || None);
        for run in
            by_batch.chunk_by(|&a, &b| (at[a].shard, at[a].batch) == (at[b].shard, at[b].batch))
        {
            let first = at[run[0]];
            let (columns, held) = self.cached_columns(first.shard, first.batch)?;
            // A decoded batch (which only the cache keeps) is not kept by the
            // result: its sequences taken are copied out of it (one copy of
            // just those sequences); a mapped shard's are views.
            let (columns, gathered) = if held > 0 {
                let indices: Vec<usize> = run.iter().map(|&i| at[i].index).collect();
                let gathered = columns
                    .iter()
                    .map(|c| crate::ops::take(c, &indices))
                    .collect::<crate::Result<Vec<_>>>()
                    .map_err(|e| DatasetError::tensor("gathering sequences", e))?;
                drop(columns);
                (gathered, true)
            } else {
                (columns, false)
            };
            for (k, &i) in run.iter().enumerate() {
                let row = if gathered { k } else { at[i].index };
                let seq = columns
                    .iter()
                    .map(|c| c.slice_top(row, row.saturating_add(1)))
                    .collect::<crate::Result<Vec<_>>>()
                    .map_err(|e| DatasetError::tensor(format!("slicing sequence {}", ids[i]), e))?;
                sequences[i] = Some(seq);
            }
        }
        let mut out = Batch::new();
        for (k, schema) in tensors.iter().enumerate() {
            let parts: Vec<&LodTensor> = sequences
                .iter()
                .filter_map(|s| s.as_ref().and_then(|s| s.get(k)))
                .collect();
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
