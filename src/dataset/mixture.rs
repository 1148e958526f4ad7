//! [`Mixture`]: several datasets read as one stream, each sequence drawn
//! from a source chosen at random in given proportions (`spec/DATASET.md`,
//! "Mixtures"). A mixture is a source of sequences: a
//! [`Loader`](super::Loader) reads it like a dataset, with the same
//! batching, gather, partitions, packing and resume state.

use super::error::{DatasetError, Result};
use super::manifest::Schema;
use super::mixture_draws::{DrawRule, Draws, check_progress};
use super::options::{MixtureOptions, Stop};
use super::reader::{Dataset, SequenceLocation};
use super::shuffle::{EpochOrder, Shuffle, stream_seed};
use super::state::{
    Evolved, MIXTURE_EVOLVED_VERSION, MIXTURE_STATE_VERSION, MixtureState, SourceState,
};
use std::sync::{Arc, Mutex};

/// The stream of the per-source order seeds (`spec/DATASET.md`, "Mixtures").
const PURPOSE_SOURCE: u64 = 4;

/// Several datasets with the same schema read as one stream: each position
/// of an epoch is drawn from source `k` with probability
/// `weights[k] / sum(weights)`, and takes that source's next sequence in
/// its own shuffled order (the order a [`Loader`](super::Loader) of that source would
/// use, from a seed derived per source and epoch). Deterministic per seed
/// and epoch; [`Stop`] says when an epoch ends.
///
/// A [`Loader`](super::Loader) reads it like a dataset
/// (`Loader::new(mixture, options)`): mini-batches, ranks and workers,
/// packing, prefetch and resume ([`Loader::state`](super::Loader::state), also on another world
/// size) work as for one dataset, on the positions of the mixed stream. A
/// mini-batch's `ids` number the sources one after the other (source `k`'s
/// sequence `i` is `i` plus the sequences of sources `0..k`);
/// [`Mixture::source_of`] splits one.
///
/// ```
/// use lodt::dataset::{Batching, Dataset, DatasetWriter, Loader, LoaderOptions, Mixture, MixtureOptions, Stop};
/// use lodt::{Batch, Lod, LodTensor};
/// use std::sync::Arc;
/// let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
/// let write = |dir: &std::path::Path, n: usize| -> Result<Arc<Dataset>, Box<dyn std::error::Error>> {
///     let mut w = DatasetWriter::create(dir, Default::default())?;
///     let x = LodTensor::from_vec(vec![0i32; n], vec![n], Lod::try_from_lengths(&[vec![1; n]])?)?;
///     w.write(&Batch::try_from_tensors([("x", x)])?)?;
///     w.finish()?;
///     Ok(Arc::new(Dataset::open(dir)?))
/// };
/// let (a, b) = (write(dir_a.path(), 30)?, write(dir_b.path(), 10)?);
/// let options = MixtureOptions { seed: 1, stop: Stop::AllExhausted };
/// let mixture = Arc::new(Mixture::try_new(vec![a, b], &[0.5, 0.5], options)?);
/// let loader = Loader::new(mixture.clone(), LoaderOptions { batching: Batching::Sequences(8), ..Default::default() })?;
/// let ids: Vec<u64> = loader.flat_map(|b| b.unwrap().ids).collect();
/// // All of a (ids 0..30) once; b (ids 30..40) repeated as often as it ran out.
/// assert!((0..30).all(|i| ids.iter().filter(|&&x| x == i).count() == 1));
/// assert!(ids.iter().filter(|&&x| x >= 30).count() >= 10);
/// assert_eq!(mixture.source_of(31), Some((1, 1)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Mixture {
    sources: Vec<Arc<Dataset>>,
    counts: Vec<Arc<super::counts::ShardCounts>>,
    /// The id of each source's sequence 0.
    offsets: Vec<u64>,
    weights: Vec<f64>,
    /// What the draws use: the weights scaled by the power of two that
    /// brings the largest into `[1, 2)` ([`scale_weights`]), their running
    /// sums, the sources' sizes, the seed and the rule.
    rule: Arc<DrawRule>,
    /// The epoch it continues under changed parameters (10.6), if any.
    evolved: Option<Arc<Evolved>>,
    /// The source whose schema is the mixture's: the first one that holds
    /// sequences (an empty source of weight 0 may have no schema).
    schema_source: usize,
    options: MixtureOptions,
    /// The length of the last epoch asked for: `(epoch, N)` (finding it
    /// takes a pass over the draws, and every loader start asks).
    last_len: Mutex<Option<(u64, u64)>>,
}

impl Mixture {
    /// A mixture of `sources` with `weights` (one per source, finite,
    /// `>= 0`, not all 0). The sources must have the same schema, and a
    /// source of positive weight at least one sequence. Under an exhaustion
    /// rule, an epoch expected to be longer than [`MAX_MIXTURE_EPOCH`](super::MAX_MIXTURE_EPOCH)
    /// draws is refused.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let sources = vec![a.clone(), a.clone()];
    /// assert!(Mixture::try_new(sources.clone(), &[1.0, 3.0], Default::default()).is_ok());
    /// let err = Mixture::try_new(sources.clone(), &[1.0], Default::default()).unwrap_err();
    /// assert!(err.to_string().contains("2 sources and 1 weights"));
    /// assert!(Mixture::try_new(sources.clone(), &[0.0, 0.0], Default::default()).is_err());
    /// assert!(Mixture::try_new(sources, &[f64::NAN, 1.0], Default::default()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_new(
        sources: Vec<Arc<Dataset>>,
        weights: &[f64],
        options: MixtureOptions,
    ) -> Result<Self> {
        let bad = |m: String| Err(DatasetError::InvalidArgument(m));
        if sources.is_empty() {
            return bad("a mixture needs at least one source".into());
        }
        if weights.len() != sources.len() {
            return bad(format!(
                "a mixture needs one weight per source: {} sources and {} weights",
                sources.len(),
                weights.len()
            ));
        }
        if let Some((k, w)) = weights
            .iter()
            .enumerate()
            .find(|(_, w)| !w.is_finite() || **w < 0.0)
        {
            return bad(format!(
                "weight {k} is {w}: weights must be finite and at least 0"
            ));
        }
        if weights.iter().all(|&w| w == 0.0) {
            return bad("the weights are all 0: at least one must be positive".into());
        }
        // The schema: that of the first source with sequences (every source
        // of positive weight has some); an empty source of weight 0 draws
        // nothing, and its schema (none, for a dataset with no shards) is
        // not compared.
        let schema_source = sources
            .iter()
            .position(|s| s.num_sequences() > 0)
            .unwrap_or(0);
        let schema = sources[schema_source].schema();
        let mut offsets = Vec::with_capacity(sources.len());
        let mut next = 0u64;
        for (k, s) in sources.iter().enumerate() {
            if weights[k] > 0.0 && s.num_sequences() == 0 {
                return bad(format!(
                    "source {k} has weight {} and no sequences: give it weight 0 or leave it out",
                    weights[k]
                ));
            }
            let draws_nothing = weights[k] == 0.0 && s.num_sequences() == 0;
            if s.schema() != schema && !draws_nothing {
                return bad(format!(
                    "source {k} has another schema than source {schema_source}: {:?} vs {:?}",
                    s.schema().tensors,
                    schema.tensors
                ));
            }
            offsets.push(next);
            next = next.checked_add(s.num_sequences()).ok_or_else(|| {
                DatasetError::InvalidArgument("the sources hold more than 2^64 sequences".into())
            })?;
        }
        let sizes = sources.iter().map(|s| s.num_sequences()).collect();
        let mixture = Mixture {
            counts: sources.iter().map(|s| s.batch_counts()).collect(),
            sources,
            offsets,
            weights: weights.to_vec(),
            rule: Arc::new(DrawRule::new(weights, sizes, options.seed, options.stop)),
            evolved: None,
            schema_source,
            options,
            last_len: Mutex::new(None),
        };
        mixture.check_length()?;
        Ok(mixture)
    }

    /// Refuses an exhaustion rule whose epochs would be too long to find.
    fn check_length(&self) -> Result<()> {
        self.rule
            .check_length()
            .map_err(DatasetError::InvalidArgument)
    }

    /// The sources, in order.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone(), a], &[1.0, 1.0], Default::default())?;
    /// assert_eq!(m.sources().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sources(&self) -> &[Arc<Dataset>] {
        &self.sources
    }

    /// The weights, one per source.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone(), a], &[2.0, 1.0], Default::default())?;
    /// assert_eq!(m.weights(), &[2.0, 1.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The seed and stopping rule.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let o = MixtureOptions { seed: 4, stop: Stop::Sequences(100) };
    /// let m = Mixture::try_new(vec![a], &[1.0], o)?;
    /// assert_eq!(m.options(), &o);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(&self) -> &MixtureOptions {
        &self.options
    }

    /// The schema (every source's).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a], &[1.0], Default::default())?;
    /// assert_eq!(m.schema().tensors[0].name, "x");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn schema(&self) -> &Schema {
        self.sources[self.schema_source].schema()
    }

    /// The number of positions (sequences delivered, all consumers
    /// together) of epoch `epoch`. Under an exhaustion rule it depends on
    /// the draws, and finding it takes one draw per position (a few
    /// nanoseconds each).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone(), a], &[1.0, 1.0], MixtureOptions { seed: 0, stop: Stop::AllExhausted })?;
    /// assert!(m.num_sequences(0) >= 8); // both sources whole
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_sequences(&self, epoch: u64) -> u64 {
        if let Stop::Sequences(n) = self.options.stop {
            return n.saturating_sub(self.evolved_in(epoch).map_or(0, |e| e.delivered));
        }
        let cached = self.last_len.lock().ok().and_then(|c| *c);
        if let Some((e, n)) = cached
            && e == epoch
        {
            return n;
        }
        let n = self.stream_len(epoch);
        if let Ok(mut c) = self.last_len.lock() {
            *c = Some((epoch, n));
        }
        n
    }

    /// The length of epoch `epoch` under an exhaustion rule: the draws
    /// until the rule stops them.
    fn stream_len(&self, epoch: u64) -> u64 {
        self.draws(epoch).count() as u64
    }

    /// The draws of epoch `epoch` (continuing the change of parameters of
    /// 10.6 in its epoch).
    pub(crate) fn draws(&self, epoch: u64) -> Draws {
        self.rule.draws(epoch, self.evolved.as_deref())
    }

    /// The change of parameters its epoch `epoch` continues, if any.
    pub(crate) fn evolved_in(&self, epoch: u64) -> Option<&Evolved> {
        self.evolved.as_deref().filter(|e| e.epoch == epoch)
    }

    /// This mixture continuing the epoch of `evolved` (10.6), checked
    /// against its sources.
    pub(crate) fn with_evolved(&self, evolved: Evolved) -> Result<Mixture> {
        check_progress(&evolved.sources, &self.state().sources, &evolved.removed)?;
        Ok(Mixture {
            sources: self.sources.clone(),
            counts: self.counts.clone(),
            offsets: self.offsets.clone(),
            weights: self.weights.clone(),
            rule: self.rule.clone(),
            evolved: Some(Arc::new(evolved)),
            schema_source: self.schema_source,
            options: self.options,
            last_len: Mutex::new(None),
        })
    }

    /// One draw (10.2).
    #[cfg(test)]
    pub(crate) fn pick(&self, rng: &mut super::shuffle::Rng) -> usize {
        self.rule.pick(rng)
    }

    /// The source of mixture id `id` and its id in that source (`None`
    /// past the last source's sequences).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone(), a], &[1.0, 1.0], Default::default())?;
    /// assert_eq!(m.source_of(5), Some((1, 1))); // 4 sequences each
    /// assert_eq!(m.source_of(8), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn source_of(&self, id: u64) -> Option<(usize, u64)> {
        let k = self.offsets.partition_point(|&o| o <= id).checked_sub(1)?;
        let local = id - self.offsets[k];
        (local < self.sources[k].num_sequences()).then_some((k, local))
    }

    /// The sequences `ids` (mixture ids, as [`Mixture::source_of`] splits
    /// them), in order, as one batch: one [`Dataset::take`] per source (so
    /// each batch is read, and decoded, once per call), joined in the order
    /// of `ids`.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![0u8, 1, 2, 3], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone(), a], &[1.0, 1.0], Default::default())?;
    /// let b = m.take(&[5, 1, 6])?; // source 1's 1, source 0's 1, source 1's 2
    /// assert_eq!(b.get("x").unwrap().as_slice::<u8>()?, &[1, 1, 2]);
    /// assert!(m.take(&[8]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take(&self, ids: &[u64]) -> Result<crate::batch::Batch> {
        // Per source, its ids in the order given: one take per source, so
        // each batch is read (and decoded) once per call however the ids of
        // the sources alternate.
        let mut local: Vec<Vec<u64>> = vec![Vec::new(); self.sources.len()];
        let mut rows: Vec<(usize, usize)> = Vec::with_capacity(ids.len());
        for &id in ids {
            let (k, i) = self.source_of(id).ok_or(DatasetError::OutOfRange {
                what: "mixture sequence id",
                index: id,
                len: self.offsets.last().copied().unwrap_or(0)
                    + self.sources.last().map_or(0, |s| s.num_sequences()),
            })?;
            rows.push((k, local[k].len()));
            local[k].push(i);
        }
        let used: Vec<usize> = (0..self.sources.len())
            .filter(|&k| !local[k].is_empty())
            .collect();
        if used.len() <= 1 {
            let k = used.first().copied().unwrap_or(self.schema_source);
            return self.sources[k].take(&local[k]);
        }
        // Each source's part starts where the parts before it end.
        let mut start = vec![0usize; self.sources.len()];
        let mut parts = Vec::with_capacity(used.len());
        let mut next = 0usize;
        for &k in &used {
            start[k] = next;
            next += local[k].len();
            parts.push(self.sources[k].take(&local[k])?);
        }
        let mut joined = crate::batch::Batch::new();
        for t in &self.schema().tensors {
            let err = |e| DatasetError::tensor(format!("joining tensor {:?}", t.name), e);
            let pieces: Vec<crate::tensor::LodTensor> = parts
                .iter()
                .map(|p| {
                    p.get(&t.name).cloned().ok_or_else(|| {
                        DatasetError::Loader(format!("a source's batch lacks tensor {:?}", t.name))
                    })
                })
                .collect::<Result<_>>()?;
            let merged = crate::ops::concat(&pieces).map_err(err)?;
            joined
                .push(t.name.clone(), merged)
                .map_err(|e| DatasetError::tensor("joining a mixture's sequences", e))?;
        }
        drop(parts);
        // Back in the order of `ids`.
        let order: Vec<usize> = rows.iter().map(|&(k, i)| start[k] + i).collect();
        joined
            .take(&order)
            .map_err(|e| DatasetError::tensor("ordering a mixture's sequences", e))
    }

    /// The mixture id of the sequence at `at` of source `k`.
    pub(crate) fn id_of(&self, k: usize, at: SequenceLocation) -> u64 {
        self.offsets.get(k).copied().unwrap_or(0) + self.sources[k].id_of(at)
    }

    /// The fingerprint a state records: the CRC32 of the sources'
    /// fingerprints (`u32` LE each, in order).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// # let mut w = DatasetWriter::append(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a.clone()], &[1.0], Default::default())?;
    /// assert_eq!(m.fingerprint(), crc32fast::hash(&a.fingerprint().to_le_bytes()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fingerprint(&self) -> u32 {
        let mut h = crc32fast::Hasher::new();
        for s in &self.sources {
            h.update(&s.fingerprint().to_le_bytes());
        }
        h.finalize()
    }

    /// The mixture part of a state of its loaders.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = Mixture::try_new(vec![a], &[1.0], Default::default())?;
    /// assert_eq!(m.state().sources[0].sequences, 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn state(&self) -> MixtureState {
        MixtureState {
            version: MIXTURE_STATE_VERSION,
            evolved: None,
            seed: self.options.seed,
            weights: self.weights.clone(),
            stop: self.options.stop,
            sources: self
                .sources
                .iter()
                .map(|s| SourceState {
                    sequences: s.num_sequences(),
                    fingerprint: s.fingerprint(),
                })
                .collect(),
        }
    }

    /// The mixture part of a state of its loaders in epoch `epoch`: with
    /// the change of parameters it continues there (version 2), if any.
    pub(crate) fn state_in(&self, epoch: u64) -> MixtureState {
        match self.evolved_in(epoch) {
            None => self.state(),
            Some(e) => MixtureState {
                version: MIXTURE_EVOLVED_VERSION,
                evolved: Some(e.clone()),
                ..self.state()
            },
        }
    }
}

/// The stream of one epoch of a mixture: per position, the drawn source and
/// its next sequence: draw `j` of source `k` is position `j mod N_k` of its
/// pass `r = j / N_k`, the order of section 6 with seed
/// `stream_seed(shuffle seed, epoch, 4, o_k)` and epoch `r` (`o_k = k`, or
/// the source's `order` in an epoch of 10.6).
#[derive(Debug)]
pub(crate) struct MixedOrder {
    mixture: Arc<Mixture>,
    shuffle: Option<Shuffle>,
    epoch: u64,
    draws: Draws,
    /// Per source: its current pass, that pass's order and the position
    /// the order's next item has.
    passes: Vec<Option<(u64, EpochOrder, u64)>>,
    /// Per source, the index its pass orders are seeded with.
    order_index: Vec<u64>,
}

impl MixedOrder {
    pub(crate) fn new(mixture: Arc<Mixture>, shuffle: Option<Shuffle>, epoch: u64) -> Self {
        let k = mixture.sources.len();
        let order_index = match mixture.evolved_in(epoch) {
            Some(e) => e.sources.iter().map(|s| s.order).collect(),
            None => (0..k as u64).collect(),
        };
        MixedOrder {
            draws: mixture.draws(epoch),
            shuffle,
            epoch,
            passes: (0..k).map(|_| None).collect(),
            order_index,
            mixture,
        }
    }

    /// The order of pass `pass` of source `k`.
    fn pass(&self, k: usize, pass: u64) -> EpochOrder {
        let shuffle = self.shuffle.map(|s| Shuffle {
            seed: stream_seed(s.seed, self.epoch, PURPOSE_SOURCE, self.order_index[k]),
            buffer: s.buffer,
        });
        EpochOrder::new(self.mixture.counts[k].clone(), shuffle, pass)
    }
}

impl Iterator for MixedOrder {
    type Item = (usize, SequenceLocation);

    fn next(&mut self) -> Option<(usize, SequenceLocation)> {
        let (k, j) = self.draws.next()?;
        let size = self.mixture.sources[k].num_sequences().max(1);
        let (pass, at) = (j / size, j % size);
        let fresh = !matches!(&self.passes[k], Some((p, _, next)) if *p == pass && *next <= at);
        if fresh {
            self.passes[k] = Some((pass, self.pass(k, pass), 0));
        }
        let (_, order, next) = self.passes[k].as_mut()?;
        while *next < at {
            order.next()?;
            *next += 1;
        }
        *next += 1;
        Some((k, order.next()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::mixture_draws::{exponent, ldexp, pow2, running_sums, scale_weights};
    use crate::dataset::shuffle::Rng;

    fn with_weights(weights: &[f64]) -> Mixture {
        Mixture {
            sources: Vec::new(),
            counts: Vec::new(),
            offsets: Vec::new(),
            weights: weights.to_vec(),
            rule: Arc::new(DrawRule::new(
                weights,
                vec![1; weights.len()],
                0,
                Stop::FirstExhausted,
            )),
            evolved: None,
            schema_source: 0,
            options: MixtureOptions::default(),
            last_len: Mutex::new(None),
        }
    }

    #[test]
    fn a_zero_weight_is_never_picked_and_the_rest_in_proportion() {
        let m = with_weights(&[0.0, 1.0, 0.0, 3.0, 0.0]);
        let mut rng = Rng::new(1);
        let mut hist = [0u32; 5];
        for _ in 0..40_000 {
            hist[m.pick(&mut rng)] += 1;
        }
        assert_eq!((hist[0], hist[2], hist[4]), (0, 0, 0), "{hist:?}");
        // 10,000 expected for source 1: sigma about 87.
        assert!((9_500..10_500).contains(&hist[1]), "{hist:?}");
    }

    /// The draw of `spec/DATASET.md` 10.2 before weights were scaled: running
    /// sums of the weights as given.
    fn unscaled_pick(weights: &[f64], rng: &mut Rng) -> usize {
        let cumulative = running_sums(weights);
        let total = cumulative.last().copied().unwrap_or(0.0);
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let x = u * total;
        let k = cumulative.partition_point(|&c| c <= x);
        if k < cumulative.len() {
            k
        } else {
            weights.iter().rposition(|w| *w > 0.0).unwrap_or(0)
        }
    }

    #[test]
    fn scaling_by_a_power_of_two_changes_no_draw_of_normal_weights() {
        // Weight vectors whose sums stay in the normal range draw exactly as
        // before scaling (so the spec's vectors stand): 40 vectors, 2,000
        // draws each.
        let mut draw = Rng::new(99);
        for trial in 0..40 {
            let k = 1 + (draw.next_u64() % 6) as usize;
            let scale = [1e-300, 1e-9, 1.0, 3.0, 1e9, 1e300][trial % 6];
            let weights: Vec<f64> = (0..k)
                .map(|j| match (draw.next_u64() % 5, j) {
                    (0, _) => 0.0,
                    _ => scale * ((draw.next_u64() % 1000) as f64 + 0.5) / 7.0,
                })
                .chain(std::iter::once(scale))
                .collect();
            let m = with_weights(&weights);
            let (mut a, mut b) = (Rng::new(trial as u64), Rng::new(trial as u64));
            for _ in 0..2000 {
                assert_eq!(
                    m.pick(&mut a),
                    unscaled_pick(&weights, &mut b),
                    "{weights:?}"
                );
            }
        }
    }

    #[test]
    fn equal_weights_draw_equally_at_any_scale() {
        // Subnormal, tiny, ordinary and huge equal weights (whose sum may
        // overflow): about as many draws of each. 36 vectors.
        let mut trials = 0;
        for w in [
            5e-324,
            1e-323,
            2.5e-320,
            1e-310,
            2.2250738585072014e-308,
            1e-300,
            1.0,
            1e300,
            1.7e308,
        ] {
            for k in 2..=5usize {
                let m = with_weights(&vec![w; k]);
                let mut rng = Rng::new(k as u64);
                let mut hist = vec![0u32; k];
                for _ in 0..12_000 {
                    hist[m.pick(&mut rng)] += 1;
                }
                // 12,000 / k expected each: sigma below 50.
                let expected = 12_000 / k as u32;
                for &h in &hist {
                    assert!(h.abs_diff(expected) < 300, "weights {w:e} x {k}: {hist:?}");
                }
                trials += 1;
            }
        }
        assert_eq!(trials, 36);
        // And unequal subnormal weights in their ratio: 1 : 3.
        let m = with_weights(&[5e-324, 1.5e-323]);
        let mut rng = Rng::new(5);
        let ones = (0..8000).filter(|_| m.pick(&mut rng) == 0).count();
        assert!((1800..2200).contains(&ones), "{ones}");
    }

    #[test]
    fn scaled_weights_are_exact_powers_of_two_apart() {
        for (w, want) in [
            (vec![5e-324, 5e-324], vec![1.0, 1.0]),
            (vec![3.0, 1.0], vec![1.5, 0.5]),
            (vec![0.0, 1.7e308], vec![0.0, 1.7e308 / 2f64.powi(1023)]),
        ] {
            let got = scale_weights(&w);
            assert!(got.iter().all(|v| *v < 2.0), "{got:?}");
            assert!(got.iter().any(|v| *v >= 1.0), "{got:?}");
            assert_eq!(got.len(), want.len());
            // The ratios are kept exactly.
            for (g, x) in got.iter().zip(&w) {
                if *x != 0.0 {
                    assert_eq!(
                        *g / got.iter().fold(0.0f64, |a, b| a.max(*b)),
                        *x / w.iter().fold(0.0f64, |a, b| a.max(*b))
                    );
                }
            }
        }
        assert_eq!(exponent(1.0), 0);
        assert_eq!(exponent(5e-324), -1074);
        assert_eq!(exponent(f64::MAX), 1023);
        assert_eq!(exponent(2.2250738585072014e-308), -1022);
        assert_eq!(pow2(-1074), 5e-324);
        assert_eq!(ldexp(5e-324, 1074), 1.0);
    }
}
