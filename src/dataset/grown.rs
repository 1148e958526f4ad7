//! A dataset that grew since a loader state was saved on it
//! (`spec/DATASET.md` 7.3, "A dataset that grew"): its leading shards are
//! the state's shard list, the rest were appended. The state's epoch
//! continues over the sequences the state knew; the appended ones join from
//! the next epoch, or, asked for ([`Dataset::join_appended`]), after the
//! rest of the state's epoch.

use super::counts::ShardCounts;
use super::error::{DatasetError, Result};
use super::reader::Dataset;
use super::state::{JOINED_VERSION, Joined, LoaderState};

impl Dataset {
    /// How many of its leading shards form the shard list a loader state
    /// of `sequences` sequences and `fingerprint`
    /// ([`LoaderState::sequences`](super::LoaderState::sequences),
    /// [`LoaderState::fingerprint`](super::LoaderState::fingerprint)) was
    /// saved on: all of them for the same dataset, fewer for one appended
    /// to since, and none if the state is of another dataset or of shards
    /// that changed.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let batch = || Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8; 3], vec![3], Lod::try_from_lengths(&[vec![1, 2]])?)?)]);
    /// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// w.write(&batch()?)?;
    /// w.finish()?;
    /// let before = Dataset::open(dir.path())?;
    /// let mut w = DatasetWriter::append(dir.path(), Default::default())?;
    /// w.write(&batch()?)?;
    /// w.finish()?;
    /// let after = Dataset::open(dir.path())?;
    /// assert_eq!(after.num_shards(), 2);
    /// assert_eq!(after.shards_of(before.num_sequences(), before.fingerprint())?, Some(1));
    /// assert_eq!(after.shards_of(after.num_sequences(), after.fingerprint())?, Some(2));
    /// assert_eq!(after.shards_of(2, 0)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shards_of(&self, sequences: u64, fingerprint: u32) -> Result<Option<usize>> {
        if (sequences, fingerprint) == (self.num_sequences(), self.fingerprint()) {
            return Ok(Some(self.num_shards()));
        }
        // The prefixes holding exactly `sequences` (several when shards
        // without sequences follow the last one of them).
        let starts = self.shard_starts();
        let first = starts.partition_point(|&s| s < sequences);
        let last = starts.partition_point(|&s| s <= sequences);
        for k in first..last {
            if self.prefix_fingerprint(k)? == fingerprint {
                return Ok(Some(k));
            }
        }
        Ok(None)
    }

    /// `state` (of a loader of this dataset before shards were appended to
    /// it) as a state whose epoch takes in the appended sequences now
    /// (`spec/DATASET.md` 7.3, "Joining now"): its order is the order it had,
    /// then the appended shards' own order (section 6 over them alone, with
    /// the same shuffle and epoch), so that the positions the state counts
    /// keep their sequences and the appended ones follow the rest. Every
    /// sequence, old and appended, is delivered once in the epoch (with
    /// `keep`); with the same consumers each continues exactly, and then
    /// takes its share of the appended ones. Without it (a plain resume) the
    /// appended sequences join from the next epoch.
    ///
    /// A state of this very dataset comes back as it is. Refused: a
    /// mixture's, a packing loader's or a locality partition's state, one
    /// of shards that changed, and one that already took in appended
    /// shards in its epoch (those appended since join at the next epoch).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let batch = |n: usize| Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8; n], vec![n], Lod::try_from_lengths(&[vec![1; n]])?)?)]);
    /// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// w.write(&batch(6)?)?;
    /// w.finish()?;
    /// let options = LoaderOptions { batching: Batching::Sequences(2), partition: Some(Partition::RoundRobin), ..Default::default() };
    /// let mut loader = Loader::new(Dataset::open(dir.path())?, options.clone())?;
    /// let mut seen = loader.next().unwrap()?.ids;
    /// let state = loader.state();
    /// let mut w = DatasetWriter::append(dir.path(), Default::default())?;
    /// w.write(&batch(3)?)?;
    /// w.finish()?;
    /// let grown = Dataset::open(dir.path())?;
    /// let joined = grown.join_appended(&state)?;
    /// for b in Loader::resume(grown, options, &joined)? {
    ///     seen.extend(b?.ids);
    /// }
    /// assert_eq!(seen, (0..9).collect::<Vec<u64>>()); // the old ones, then the appended ones
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_appended(&self, state: &LoaderState) -> Result<LoaderState> {
        let refuse = |why: &str| {
            Err(DatasetError::BadState {
                reason: format!("{why}: its epoch cannot take in appended shards"),
            })
        };
        if state.mixture.is_some() {
            return refuse("it is a mixture's state");
        }
        if state.packing.is_some() {
            return refuse("it is a packing loader's state");
        }
        if state.ranges.is_some() {
            return refuse(
                "it is a state of the locality partition (resume it round robin, or let the appended shards join at the next epoch)",
            );
        }
        let Some(k) = self.shards_of(state.sequences, state.fingerprint)? else {
            return Err(self.not_grown_from(state.sequences, state.fingerprint));
        };
        if k == self.num_shards() {
            return Ok(state.clone());
        }
        if state.joined.is_some() {
            return refuse(
                "it already took in appended shards in this epoch (the ones appended since join at the next epoch)",
            );
        }
        Ok(LoaderState {
            version: JOINED_VERSION,
            sequences: self.num_sequences(),
            fingerprint: self.fingerprint(),
            joined: Some(Joined {
                sequences: state.sequences,
                fingerprint: state.fingerprint,
            }),
            cursor: None,
            ..state.clone()
        })
    }

    /// Why a state of `sequences` sequences and `fingerprint` does not
    /// resume on this dataset, saying which of its shards would have had to
    /// be the state's.
    pub(crate) fn not_grown_from(&self, sequences: u64, fingerprint: u32) -> DatasetError {
        let starts = self.shard_starts();
        let k = starts.partition_point(|&s| s < sequences);
        let reason = if starts.get(k) == Some(&sequences) && k > 0 {
            let last = self
                .shard_entry(k - 1)
                .map_or_else(|_| format!("shard {}", k - 1), |e| e.name);
            format!(
                "it was saved on {sequences} sequences with fingerprint {fingerprint:#010x}; this dataset's first {k} shards (through {last}) hold {sequences} sequences with another fingerprint: one of them changed since (a rewritten, replaced or reordered shard), which a resume does not follow"
            )
        } else {
            format!(
                "it was saved on another dataset ({sequences} sequences, fingerprint {fingerprint:#010x}); this one has {} sequences, fingerprint {:#010x}, and no prefix of its shards holds {sequences} sequences",
                self.num_sequences(),
                self.fingerprint()
            )
        };
        DatasetError::BadState { reason }
    }
}

impl ShardCounts {
    /// The counts of the first `shards` shards.
    pub(crate) fn prefix(&self, shards: usize) -> ShardCounts {
        self.range(0, shards)
    }

    /// The counts of shards `start..end`, numbered from 0.
    pub(crate) fn range(&self, start: usize, end: usize) -> ShardCounts {
        let end = end.min(self.num_shards());
        let per_shard: Vec<Vec<u64>> = (start.min(end)..end)
            .map(|s| {
                self.batch_starts(s)
                    .windows(2)
                    .map(|w| w[1].saturating_sub(w[0]))
                    .collect()
            })
            .collect();
        ShardCounts::from_batches(per_shard.iter().map(Vec::as_slice))
    }
}
