//! A dataset as a convert endpoint: its batches as a [`BatchReader`]
//! ([`DatasetBatches`]) and a [`DatasetWriter`] as a [`BatchWriter`]
//! ([`DatasetSink`]).

use super::*;
use crate::dataset::{Dataset, DatasetWriter};

/// Every batch of a dataset, in dataset order (shard by shard).
pub(super) struct DatasetBatches {
    dataset: Dataset,
    shard: usize,
    batch: usize,
}

impl DatasetBatches {
    pub(super) fn new(dataset: Dataset) -> Self {
        DatasetBatches {
            dataset,
            shard: 0,
            batch: 0,
        }
    }
}

impl Iterator for DatasetBatches {
    type Item = Result<Batch, ConvertError>;

    fn next(&mut self) -> Option<Self::Item> {
        let shards = &self.dataset.manifest().shards;
        while self.batch as u64 >= shards.get(self.shard)?.batches {
            self.shard += 1;
            self.batch = 0;
        }
        let read = self.dataset.read_batch(self.shard, self.batch);
        self.batch += 1;
        Some(read.map_err(ConvertError::from))
    }
}

impl BatchReader for DatasetBatches {
    type Error = ConvertError;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.dataset.metadata().clone()
    }

    fn num_batches(&self) -> Option<usize> {
        usize::try_from(self.dataset.num_batches()).ok()
    }
}

/// A dataset being written, committed when the writer finishes.
pub(super) struct DatasetSink {
    pub(super) writer: Option<DatasetWriter>,
    pub(super) stats: WriteStats,
}

impl BatchWriter for DatasetSink {
    type Error = ConvertError;
    type Output = ();

    fn write(&mut self, batch: &Batch) -> Result<(), ConvertError> {
        let writer = self.writer.as_mut().ok_or_else(finished)?;
        writer.write(batch)?;
        self.stats.add(batch);
        Ok(())
    }

    fn stats(&self) -> WriteStats {
        self.stats
    }

    fn finish(&mut self) -> Result<(), ConvertError> {
        self.writer.take().ok_or_else(finished)?.finish()?;
        Ok(())
    }
}

/// The error for a write after `finish`.
fn finished() -> ConvertError {
    ConvertError::Unsupported("the dataset writer is finished: it takes no more batches".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LodTensor;

    fn batch(values: Vec<i32>) -> Batch {
        let rows = values.len();
        let t = LodTensor::from_vec(values, vec![rows], Default::default()).unwrap();
        Batch::try_from_tensors([("x", t)]).unwrap()
    }

    #[test]
    fn a_dataset_reads_back_every_batch_in_order_across_shards() {
        let dir = tempfile::tempdir().unwrap();
        // Shards of one batch each: three shards.
        let options = ConvertOptions {
            shard_bytes: Some(1),
            ..Default::default()
        };
        let mut sink = Endpoint::Dataset
            .create_writer(dir.path().join("d"), BTreeMap::new(), &options)
            .unwrap();
        for k in 0..3 {
            sink.write(&batch(vec![k; (k + 1) as usize])).unwrap();
        }
        assert_eq!(sink.stats().batches, 3);
        sink.finish().unwrap();
        assert!(sink.write(&batch(vec![9])).is_err());
        let dataset = Dataset::open(dir.path().join("d")).unwrap();
        assert_eq!(dataset.num_shards(), 3);
        let reader = DatasetBatches::new(dataset);
        assert_eq!(reader.num_batches(), Some(3));
        let values: Vec<Vec<i32>> = reader
            .map(|b| {
                b.unwrap()
                    .get("x")
                    .unwrap()
                    .as_slice::<i32>()
                    .unwrap()
                    .to_vec()
            })
            .collect();
        assert_eq!(values, [vec![0], vec![1, 1], vec![2, 2, 2]]);
    }
}
