//! [`Loader`]: a streaming, shuffling, partitioned and resumable iterator
//! over the top-level sequences of a dataset or a mixture (a [`Feed`]),
//! re-batched into mini-batches or packed. One type, whatever it reads and
//! however it groups: the options say plain or packed
//! ([`LoaderOptions::packing`]); the work is done by the stream
//! (`stream.rs`) and the packing stage (`pack/`), and the state by
//! `state.rs`.

use super::error::{DatasetError, Result};
use super::feed::Feed;
use super::options::LoaderOptions;
use super::pack::{PackedBatch, Packer};
use super::state::LoaderState;
use super::stream::{MiniBatch, Stream};
#[cfg(doc)]
use super::{Batching, Dataset, Mixture, PackOptions, Remainder, ShuffleOptions};

/// A streaming loader over a [`Dataset`]'s (or a [`Mixture`]'s) top-level sequences: shuffled
/// (deterministically from `(seed, epoch)`), partitioned between ranks and
/// workers, re-batched into mini-batches, read ahead by a background thread,
/// and resumable; with [`LoaderOptions::packing`], packed into bins of a
/// row (token) budget. It iterates one epoch; [`Loader::set_epoch`] starts
/// another. Each item is a [`MiniBatch`] or the first error (then the
/// iteration ends); [`Loader::next_packed`] gives a packed mini-batch's
/// bins too.
///
/// What it reads is a [`Feed`]: a dataset or a mixture, given to
/// [`Loader::new`], [`Loader::at_epoch`] or [`Loader::resume`] as an
/// `Arc<Dataset>`, `Dataset`, `Arc<Mixture>` or `Mixture`.
///
/// # The order of an epoch
///
/// Every epoch has one global order of all `N` sequences, a deterministic
/// function of `(seed, epoch)` and the manifest alone (`spec/DATASET.md`
/// section 6): the shards in a seeded random order, each shard's batches in
/// a seeded random order, each batch's sequences in order, all through a
/// shuffle buffer of [`ShuffleOptions::buffer`] sequences. Without a shuffle
/// it is the dataset order. It does not depend on the world size.
///
/// # Partitions
///
/// The `C = world_size × num_workers` consumers are numbered
/// `c = rank × num_workers + worker`. Consumer `c` takes positions `c`,
/// `c + C`, `c + 2C`, ... of the order (round robin), so the partitions are
/// disjoint and together hold every sequence exactly once per epoch. With
/// [`Remainder::Keep`] (the default) the first `N mod C` consumers get one
/// sequence more than the others; [`Remainder::Drop`] drops the last
/// `N mod C` positions of the epoch, [`Remainder::Repeat`] gives the
/// consumers short of one a repeat of the epoch's first positions, so that
/// every consumer gets the same number of sequences (and, with
/// [`Batching::Sequences`], the same number of steps). Those two give up
/// "exactly once" for the sequences concerned.
///
/// That is [`Partition::RoundRobin`](super::Partition::RoundRobin). In
/// [`Partition::Locality`](super::Partition::Locality)
/// (section 7.6; the default for one dataset on an object store read
/// without packing, see [`LoaderOptions::partition`]) the order is instead
/// the source stream shuffled in windows of twice the buffer, and consumer
/// `c` takes one contiguous block of it, `[⌊cN/C⌋, ⌊(c+1)N/C⌋)`: the
/// consumers of a machine, being consecutive, need the file batches of one
/// contiguous part of the dataset, so machines fetch a remote dataset about
/// once in all; any position is found without walking the ones before it.
/// The remainders behave as above; the state (version 4) records the
/// positions left as ranges.
///
/// ```
/// # use lodt::dataset::{Dataset, DatasetWriter, Loader, LoaderOptions, Partition, ShuffleOptions};
/// # use lodt::{Batch, Lod, LodTensor};
/// # let dir = tempfile::tempdir()?;
/// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// # for k in 0..4i64 {
/// #     let lod = Lod::try_from_lengths(&[vec![1; 10]])?;
/// #     let x = LodTensor::from_vec((0..10).map(|i| k * 10 + i).collect(), vec![10], lod)?;
/// #     w.write(&Batch::try_from_tensors([("x", x)])?)?;
/// # }
/// # w.finish()?;
/// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
/// let mut all = Vec::new();
/// for rank in 0..3 {
///     let options = LoaderOptions {
///         shuffle: Some(ShuffleOptions { seed: 1, buffer: 4 }),
///         rank,
///         world_size: 3,
///         partition: Some(Partition::Locality),
///         ..Default::default()
///     };
///     for batch in Loader::new(dataset.clone(), options)? {
///         all.extend(batch?.ids);
///     }
/// }
/// all.sort();
/// assert_eq!(all, (0..40).collect::<Vec<u64>>());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Packing
///
/// With [`LoaderOptions::packing`] the consumer's share of the order is
/// read in windows of [`PackOptions::buffer`] sequences, and each window is
/// packed best-fit into bins of [`PackOptions::capacity`] rows
/// (`spec/DATASET.md` section 7.4): a mini-batch is one bin, or `R` bins
/// with [`PackOptions::rows`]. Every sequence of the share is delivered
/// exactly once (whole, or cut with [`PackOptions::truncate`]); the
/// state (version 2 or 3) names the window, its carry and the mini-batches
/// of it delivered.
///
/// # Resuming
///
/// [`Loader::state`] is a small JSON-serializable [`LoaderState`]: the
/// epoch, the base of the epoch's remaining order (a *frontier* position
/// before which every position was consumed, and a list of consumed
/// positions after it), the number of consumers, and how many positions of
/// the remaining order each consumer consumed. It counts only what was
/// delivered, never what was prefetched.
///
/// - Same number of consumers: [`Loader::resume`] with a consumer's own
///   state continues with exactly the mini-batch that would have come next.
/// - Another number of consumers (a world size change): merge the states of
///   every consumer ([`LoaderState::merge`]) and resume each new consumer
///   from the merged state. The consumed positions are then known exactly:
///   the new frontier is the first unconsumed position, and the consumed
///   positions after it (ranks that were ahead) are listed. The positions
///   left are dealt round robin to the new consumers, so no sequence of the
///   epoch is delivered twice or skipped; their order differs from what the
///   old world would have delivered.
///
/// ```
/// use lodt::dataset::{Batching, Dataset, DatasetWriter, Loader, LoaderOptions, LoaderState, ShuffleOptions};
/// use lodt::{Batch, Lod, LodTensor};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// for k in 0..4i64 {
///     let lod = Lod::try_from_lengths(&[vec![1; 5]])?;
///     let x = LodTensor::from_vec((0..5).map(|i| k * 5 + i).collect(), vec![5], lod)?;
///     w.write(&Batch::try_from_tensors([("x", x)])?)?;
/// }
/// w.finish()?;
/// let dataset = Arc::new(Dataset::open(dir.path())?);
///
/// let options = LoaderOptions {
///     batching: Batching::Sequences(3),
///     shuffle: Some(ShuffleOptions { seed: 7, buffer: 8 }),
///     ..Default::default()
/// };
/// let mut loader = Loader::new(dataset.clone(), options.clone())?;
/// let first = loader.next().unwrap()?;
/// assert_eq!(first.ids.len(), 3);
/// let state = loader.state().to_json();          // save with the checkpoint
/// let rest: Vec<u64> = loader.map(|b| b.unwrap().ids).flatten().collect();
///
/// let state = LoaderState::from_json(&state)?;   // after a restart
/// let resumed = Loader::resume(dataset, options, &state)?;
/// let again: Vec<u64> = resumed.map(|b| b.unwrap().ids).flatten().collect();
/// assert_eq!(again, rest);
/// assert_eq!(first.ids.len() + rest.len(), 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Loader {
    /// The options as given (the packing stage reads its stream with
    /// batching of its own).
    options: LoaderOptions,
    stage: Stage,
}

/// A loader's stages: a consumer's stream, or packing over it.
enum Stage {
    Plain(Box<Stream>),
    Packed(Box<Packer>),
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("Loader");
        match &self.stage {
            Stage::Plain(stream) => s.field("stream", stream),
            Stage::Packed(packer) => s.field("packing", packer),
        };
        s.finish()
    }
}

impl Loader {
    /// A loader at the start of epoch 0.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let dataset = std::sync::Arc::new(lodt::dataset::Dataset::open(dir.path())?);
    /// let loader = lodt::dataset::Loader::new(dataset, Default::default())?;
    /// let ids: Vec<u64> = loader.flat_map(|b| b.unwrap().ids).collect();
    /// assert_eq!(ids, vec![0, 1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(source: impl Into<Feed>, options: LoaderOptions) -> Result<Self> {
        Self::start(source.into(), options, 0, None)
    }

    /// A loader at the start of epoch `epoch` (reading nothing of the
    /// epochs before): the same as [`Loader::new`] then
    /// [`Loader::set_epoch`], without starting epoch 0.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// use lodt::dataset::{Dataset, Loader, LoaderOptions, ShuffleOptions};
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let options = LoaderOptions { shuffle: Some(ShuffleOptions { seed: 5, buffer: 16 }), ..Default::default() };
    /// let at = Loader::at_epoch(dataset.clone(), options.clone(), 3)?;
    /// let mut set = Loader::new(dataset, options)?;
    /// set.set_epoch(3)?;
    /// assert_eq!(at.epoch(), 3);
    /// assert_eq!(at.state(), set.state());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn at_epoch(source: impl Into<Feed>, options: LoaderOptions, epoch: u64) -> Result<Self> {
        Self::start(source.into(), options, epoch, None)
    }

    /// A loader that continues from `state` (see [`Loader`]):
    /// the same consumer count continues exactly; another one needs a
    /// complete (merged) state, and deals the rest of the epoch anew.
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, Loader, LoaderOptions, LoaderState};
    /// use lodt::{Batch, Lod, LodTensor};
    /// use std::sync::Arc;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..10i32).collect(), vec![10], Lod::try_from_lengths(&[vec![1; 10]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let dataset = Arc::new(Dataset::open(dir.path())?);
    /// let opts = |rank, world_size| LoaderOptions { rank, world_size, batching: lodt::dataset::Batching::Sequences(2), ..Default::default() };
    /// // Two ranks take one step each, then the job restarts on three.
    /// let mut states = Vec::new();
    /// let mut seen = Vec::new();
    /// for rank in 0..2 {
    ///     let mut l = Loader::new(dataset.clone(), opts(rank, 2))?;
    ///     seen.extend(l.next().unwrap()?.ids);
    ///     states.push(l.state());
    /// }
    /// let merged = LoaderState::merge(&states)?;
    /// for rank in 0..3 {
    ///     for b in Loader::resume(dataset.clone(), opts(rank, 3), &merged)? {
    ///         seen.extend(b?.ids);
    ///     }
    /// }
    /// seen.sort();
    /// assert_eq!(seen, (0..10).collect::<Vec<u64>>()); // each exactly once
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(
        source: impl Into<Feed>,
        options: LoaderOptions,
        state: &LoaderState,
    ) -> Result<Self> {
        Self::start(source.into(), options, 0, Some(state))
    }

    /// The one constructor: a plain or a packing loader of `feed`, at the
    /// start of `epoch` or resumed from `state`.
    fn start(
        feed: Feed,
        options: LoaderOptions,
        epoch: u64,
        state: Option<&LoaderState>,
    ) -> Result<Self> {
        // A dataset appended to since the state: the state's epoch reads the
        // shards it knew, the next epochs all of them (7.3).
        let grown = match state {
            Some(s) => feed.for_state(s)?,
            None => None,
        };
        // A mixture continuing a change of parameters (10.6) reads the
        // changed epoch, and the next ones, as that mixture.
        let (feed, grown) = match grown {
            Some(evolved) if evolved.mixture().is_some() => (evolved, None),
            other => (feed, other),
        };
        if let (Some(_), Some(_)) = (&grown, &options.packing) {
            return Err(DatasetError::BadState {
                reason: "the dataset grew since the state was saved, and a packing loader resumes only on the shards it was saved on: resume without packing, or start the next epoch".into(),
            });
        }
        let stage = match &options.packing {
            None => {
                let (now, later) = match grown {
                    Some(prefix) => (prefix, Some(feed)),
                    None => (feed, None),
                };
                let mut stream = Stream::build(now, options.clone(), epoch, state)?;
                stream.then_read(later);
                Stage::Plain(Box::new(stream))
            }
            Some(pack) => Stage::Packed(Box::new(Packer::build(
                feed,
                options.clone(),
                pack.clone(),
                epoch,
                state,
            )?)),
        };
        Ok(Loader { options, stage })
    }

    /// What the loader reads: a dataset or a mixture.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let loader = Loader::new(dataset, LoaderOptions::default())?;
    /// assert_eq!(loader.feed().dataset().unwrap().num_sequences(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn feed(&self) -> &Feed {
        match &self.stage {
            Stage::Plain(s) => s.feed(),
            Stage::Packed(p) => p.feed(),
        }
    }

    /// The current epoch.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let mut loader = Loader::new(dataset, LoaderOptions::default())?;
    /// assert_eq!(loader.epoch(), 0);
    /// loader.set_epoch(3)?;
    /// assert_eq!(loader.epoch(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn epoch(&self) -> u64 {
        match &self.stage {
            Stage::Plain(s) => s.epoch(),
            Stage::Packed(p) => p.epoch(),
        }
    }

    /// Starts epoch `epoch` from its beginning (a new order when shuffling).
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// use lodt::dataset::{Dataset, Loader, LoaderOptions, ShuffleOptions};
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let options = LoaderOptions { shuffle: Some(ShuffleOptions { seed: 5, buffer: 16 }), ..Default::default() };
    /// let mut loader = Loader::new(dataset, options)?;
    /// for epoch in 0..3 {
    ///     loader.set_epoch(epoch)?;
    ///     let mut ids: Vec<u64> = loader.by_ref().flat_map(|b| b.unwrap().ids).collect();
    ///     ids.sort();
    ///     assert_eq!(ids, vec![0, 1, 2]); // every epoch, every sequence once
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        match &mut self.stage {
            Stage::Plain(s) => s.set_epoch(epoch),
            Stage::Packed(p) => p.set_epoch(epoch),
        }
    }

    /// The options.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// # let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let loader = Loader::new(dataset, LoaderOptions { prefetch: 0, ..Default::default() })?;
    /// assert_eq!(loader.options().prefetch, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(&self) -> &LoaderOptions {
        &self.options
    }

    /// The number of sequences this loader will still deliver in this epoch
    /// (before [`LoaderOptions::drop_last`] drops a short last mini-batch).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![0u8; 5], vec![5], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let loader = Loader::new(dataset, LoaderOptions { rank: 0, world_size: 2, ..Default::default() })?;
    /// assert_eq!(loader.remaining(), 3); // positions 0, 2, 4 of 5
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remaining(&self) -> u64 {
        match &self.stage {
            Stage::Plain(s) => s.remaining(),
            Stage::Packed(p) => p.remaining(),
        }
    }

    /// Where the loader is: what it has delivered (never what it has only
    /// prefetched). Save it with a checkpoint; [`Loader::resume`] continues
    /// from it.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// use lodt::dataset::{Batching, Dataset, Loader, LoaderOptions};
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let options = LoaderOptions { batching: Batching::Sequences(2), ..Default::default() };
    /// let mut loader = Loader::new(dataset, options)?;
    /// assert_eq!(loader.next().unwrap()?.ids, vec![0, 1]);
    /// assert_eq!(loader.state().consumed[&0], 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn state(&self) -> LoaderState {
        match &self.stage {
            Stage::Plain(s) => s.state(),
            Stage::Packed(p) => p.state(),
        }
    }

    /// [`Loader::state`] without its cursor (`spec/DATASET.md` 7.3), and
    /// the cursor's position: cheap enough to save after every mini-batch.
    /// The cursor changes every 65,536 positions of the order; take it with
    /// [`Loader::cursor`] when its position changes and put it back in the
    /// state to save ([`LoaderState::cursor`]): a state whose cursor is
    /// older than its counts resumes the same (the cursor only saves the
    /// walk to it).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8; 6], vec![6], Lod::try_from_lengths(&[vec![1; 6]])?)?)])?)?;
    /// # w.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let options = LoaderOptions { shuffle: Some(ShuffleOptions { seed: 1, buffer: 4 }), ..Default::default() };
    /// let mut loader = Loader::new(dataset, options)?;
    /// loader.next();
    /// let (state, at) = loader.progress();
    /// assert_eq!((state.cursor, at), (None, None)); // none before 65,536 positions
    /// assert_eq!(loader.cursor(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn progress(&self) -> (LoaderState, Option<u64>) {
        match &self.stage {
            Stage::Plain(s) => (s.state_without_cursor(), s.cursor_position()),
            Stage::Packed(p) => {
                let mut state = p.state();
                let at = state.cursor.take().map(|c| c.position);
                (state, at)
            }
        }
    }

    /// The cursor [`Loader::state`] holds (`spec/DATASET.md` 7.3), if any:
    /// see [`Loader::progress`].
    ///
    /// See [`Loader::progress`].
    pub fn cursor(&self) -> Option<super::OrderCursor> {
        match &self.stage {
            Stage::Plain(s) => s.cursor(),
            Stage::Packed(p) => p.state().cursor,
        }
    }

    /// The next mini-batch with its bins: for a packing loader, where each
    /// bin starts and what was cut; for a plain one, one bin of all its
    /// sequences. The same stream as [`Iterator::next`] (either call takes
    /// the next mini-batch).
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, Loader, LoaderOptions, PackOptions};
    /// use lodt::{Batch, Lod, LodTensor};
    /// let dir = tempfile::tempdir()?;
    /// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// let lod = Lod::try_from_lengths(&[vec![5, 3, 4, 2]])?;
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec((0..14i32).collect(), vec![14], lod)?)])?)?;
    /// w.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let pack = PackOptions { rows: Some(2), ..PackOptions::tokens(8) };
    /// let mut loader = Loader::new(dataset, LoaderOptions { packing: Some(pack), ..Default::default() })?;
    /// let b = loader.next_packed().unwrap()?;
    /// assert_eq!(b.batch.ids, vec![0, 1, 2, 3]); // bins [5, 3] and [4, 2]
    /// assert_eq!(b.bins, vec![0, 2, 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_packed(&mut self) -> Option<Result<PackedBatch>> {
        match &mut self.stage {
            Stage::Plain(s) => s.next().map(|b| {
                b.map(|batch| PackedBatch {
                    bins: vec![0, batch.ids.len()],
                    batch,
                    truncated: Vec::new(),
                })
            }),
            Stage::Packed(p) => p.next(),
        }
    }
}

impl Iterator for Loader {
    type Item = Result<MiniBatch>;

    fn next(&mut self) -> Option<Result<MiniBatch>> {
        match &mut self.stage {
            Stage::Plain(s) => s.next(),
            Stage::Packed(p) => p.next().map(|b| b.map(|b| b.batch)),
        }
    }
}
