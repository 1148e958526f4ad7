//! A [`Mixture`]'s totals and verification, over its sources: what a
//! front end reports for a mixture as for one dataset.

use crate::dataset::{DatasetReport, Mixture, Result};

fn add(total: &mut DatasetReport, part: &DatasetReport) {
    total.shards = total.shards.saturating_add(part.shards);
    total.bytes = total.bytes.saturating_add(part.bytes);
    total.batches = total.batches.saturating_add(part.batches);
    total.sequences = total.sequences.saturating_add(part.sequences);
}

impl Mixture {
    /// The sources' shards, stored batches, bytes and sequences, summed over
    /// the sources (from their manifests; a source given twice counts
    /// twice). `sequences` is the id space of [`Mixture::take`], not an
    /// epoch's stream ([`Mixture::num_sequences`]).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone(), a.clone()], &[1.0, 1.0], Default::default())?;
    /// let totals = m.totals();
    /// assert_eq!((totals.shards, totals.batches, totals.sequences), (2, 2, 8));
    /// assert_eq!(totals.bytes, 2 * a.manifest().num_bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn totals(&self) -> DatasetReport {
        let mut total = DatasetReport::default();
        for source in self.sources() {
            let manifest = source.manifest();
            let part = DatasetReport {
                shards: manifest.num_shards(),
                bytes: manifest.num_bytes(),
                batches: manifest.num_batches(),
                sequences: manifest.num_sequences(),
            };
            add(&mut total, &part);
        }
        total
    }

    /// Verifies every source ([`Dataset::verify`](crate::dataset::Dataset::verify)),
    /// in order; the reports summed. The first damaged shard's error (it
    /// names the shard's location) stops it.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone(), a], &[1.0, 3.0], Default::default())?;
    /// assert_eq!(m.verify()?, m.totals());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify(&self) -> Result<DatasetReport> {
        let mut total = DatasetReport::default();
        for source in self.sources() {
            add(&mut total, &source.verify()?);
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use crate::dataset::{Dataset, DatasetWriter, Mixture};
    use crate::{Batch, Lod, LodTensor};
    use std::sync::Arc;

    fn dataset(dir: &std::path::Path, batches: u64) -> Arc<Dataset> {
        let mut w = DatasetWriter::create(dir, Default::default()).unwrap();
        for k in 0..batches {
            let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
            let x = LodTensor::from_vec(vec![k as u8; 3], vec![3], lod).unwrap();
            w.write(&Batch::try_from_tensors([("x", x)]).unwrap())
                .unwrap();
        }
        w.finish().unwrap();
        Arc::new(Dataset::open(dir).unwrap())
    }

    #[test]
    fn totals_and_verify_sum_the_sources_and_a_damaged_source_fails() {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (dataset(da.path(), 2), dataset(db.path(), 3));
        let m =
            Mixture::try_new(vec![a.clone(), b.clone()], &[1.0, 1.0], Default::default()).unwrap();
        let totals = m.totals();
        assert_eq!(
            (totals.shards, totals.batches, totals.sequences),
            (2, 5, 10)
        );
        assert_eq!(
            totals.bytes,
            a.manifest().num_bytes() + b.manifest().num_bytes()
        );
        assert_eq!(m.verify().unwrap(), totals);
        // One byte of source b's shard flipped: verify names that shard.
        let shard = db.path().join(&b.manifest().shards[0].name);
        let mut bytes = std::fs::read(&shard).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        std::fs::write(&shard, &bytes).unwrap();
        let fresh = Arc::new(Dataset::open(db.path()).unwrap());
        let m = Mixture::try_new(vec![a, fresh], &[1.0, 1.0], Default::default()).unwrap();
        let err = m.verify().unwrap_err().to_string();
        assert!(err.contains(&b.manifest().shards[0].name), "{err}");
    }
}
