//! What a [`Loader`](super::Loader) reads: one dataset, or a weighted
//! [`Mixture`] of several. The loader's partitions, batching, gather and
//! resume work on positions of a stream; the feed says how long an epoch's
//! stream is and which sequence (source, location) each position holds,
//! and [`Tail`] is the one walk of an epoch's order from a state's base
//! (its frontier and skip list) that the loader and packing share.

use super::cursor::{OrderCursor, SNAPSHOT_EVERY, Snapshots};
use super::error::{DatasetError, Result};
use super::locality::WindowOrder;
use super::manifest::Schema;
use super::mixture::{MixedOrder, Mixture};
use super::options::{LoaderOptions, Partition, ShuffleOptions};
use super::reader::{Dataset, SequenceLocation};
use super::shuffle::{EpochOrder, OrderSnapshot, Shuffle};
use super::state::{Base, LoaderState, MixtureState, Subject};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a [`Loader`](super::Loader) reads: one [`Dataset`] or a
/// [`Mixture`]. Made from either with `From` (`Arc<Dataset>`, `Dataset`,
/// `Arc<Mixture>`, `Mixture`), so the loader's constructors take both.
///
/// ```
/// # use lodt::dataset::*;
/// # let dir = tempfile::tempdir()?;
/// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
/// # w.finish()?;
/// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
/// let feed = Feed::from(dataset.clone());
/// assert!(feed.dataset().is_some() && feed.mixture().is_none());
/// let mixture = Mixture::try_new(vec![dataset], &[1.0], Default::default())?;
/// assert!(Feed::from(mixture).mixture().is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Feed {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// One dataset (`spec/DATASET.md` section 6).
    Dataset {
        dataset: Arc<Dataset>,
        counts: Arc<super::counts::ShardCounts>,
        /// The fingerprint of the shard list `counts` covers: the dataset's,
        /// or a prefix's (a dataset that grew, 7.3).
        fingerprint: u32,
        /// An epoch that took in appended shards (7.3, "Joining now"): its
        /// order is the first shards' then the rest's.
        joined: Option<Arc<JoinedOrder>>,
    },
    /// A weighted mixture (`spec/DATASET.md`, "Mixtures").
    Mixture(Arc<Mixture>),
}

impl From<Arc<Dataset>> for Feed {
    fn from(dataset: Arc<Dataset>) -> Self {
        let counts = dataset.batch_counts();
        let fingerprint = dataset.fingerprint();
        Feed {
            kind: Kind::Dataset {
                dataset,
                counts,
                fingerprint,
                joined: None,
            },
        }
    }
}

impl From<Dataset> for Feed {
    fn from(dataset: Dataset) -> Self {
        Arc::new(dataset).into()
    }
}

impl From<Arc<Mixture>> for Feed {
    fn from(mixture: Arc<Mixture>) -> Self {
        Feed {
            kind: Kind::Mixture(mixture),
        }
    }
}

impl From<Mixture> for Feed {
    fn from(mixture: Mixture) -> Self {
        Arc::new(mixture).into()
    }
}

impl Feed {
    /// The dataset, for a feed of one dataset.
    ///
    /// See [`Feed`].
    pub fn dataset(&self) -> Option<&Arc<Dataset>> {
        match &self.kind {
            Kind::Dataset { dataset, .. } => Some(dataset),
            Kind::Mixture(_) => None,
        }
    }

    /// The mixture, for a feed of a mixture.
    ///
    /// See [`Feed`].
    pub fn mixture(&self) -> Option<&Arc<Mixture>> {
        match &self.kind {
            Kind::Dataset { .. } => None,
            Kind::Mixture(m) => Some(m),
        }
    }

    /// The number of positions of epoch `epoch`'s stream: the dataset's
    /// sequences, or a mixture's epoch length.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let feed = Feed::from(Dataset::open(dir.path())?);
    /// assert_eq!(feed.num_sequences(0), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_sequences(&self, epoch: u64) -> u64 {
        Subject::len(self, epoch)
    }

    /// What a loader resuming `state` reads in the state's epoch: the shards
    /// the state was saved on, for a dataset that grew since (7.3); the
    /// mixture continuing a change of parameters (10.6); else this feed.
    /// A state of shards that changed is an error.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let feed = Feed::from(Dataset::open(dir.path())?);
    /// let state = Loader::new(feed.clone(), LoaderOptions::default())?.state();
    /// assert_eq!(feed.resumed(&state)?.num_sequences(0), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resumed(&self, state: &LoaderState) -> Result<Feed> {
        Ok(self.for_state(state)?.unwrap_or_else(|| self.clone()))
    }

    /// The schema every mini-batch has.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let feed = Feed::from(Dataset::open(dir.path())?);
    /// assert!(feed.schema().tensors.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn schema(&self) -> &Schema {
        match &self.kind {
            Kind::Dataset { dataset, .. } => dataset.schema(),
            Kind::Mixture(m) => m.schema(),
        }
    }

    /// The pool the loader gathers mini-batches into: the dataset's, or the
    /// first source's for a mixture (one pool per loader either way).
    pub(crate) fn buffers(&self) -> &crate::buffer::BufferPool {
        match &self.kind {
            Kind::Dataset { dataset, .. } => dataset.buffers(),
            Kind::Mixture(m) => m.sources()[0].buffers(),
        }
    }

    /// Source `k` (0 for a single dataset).
    pub(crate) fn source(&self, k: usize) -> Option<&Arc<Dataset>> {
        match &self.kind {
            Kind::Dataset { dataset, .. } => (k == 0).then_some(dataset),
            Kind::Mixture(m) => m.sources().get(k),
        }
    }

    /// The id a mini-batch reports for the sequence at `at` of source `k`.
    pub(crate) fn id_of(&self, k: usize, at: SequenceLocation) -> u64 {
        match &self.kind {
            Kind::Dataset { dataset, .. } => dataset.id_of(at),
            Kind::Mixture(m) => m.id_of(k, at),
        }
    }

    /// The sequences `ids` (as a mini-batch reports them), in order, as one
    /// batch.
    pub(crate) fn take(&self, ids: &[u64]) -> Result<crate::batch::Batch> {
        match &self.kind {
            Kind::Dataset { dataset, .. } => dataset.take(ids),
            Kind::Mixture(m) => m.take(ids),
        }
    }

    /// The partition a loader of `options` starts an epoch in: the one the
    /// options name, or by default [`Partition::Locality`] for one dataset
    /// on an object store read without packing (where fetching each byte
    /// once per node matters) and [`Partition::RoundRobin`] otherwise.
    /// The locality partition reads one dataset, whole sequences.
    pub(crate) fn partition(&self, options: &LoaderOptions) -> Result<Partition> {
        let remote =
            matches!(&self.kind, Kind::Dataset { dataset, .. } if dataset.store().is_remote());
        match options.partition {
            None if remote && options.packing.is_none() => Ok(Partition::Locality),
            None => Ok(Partition::RoundRobin),
            Some(p) => {
                self.check_partition(p, options)?;
                Ok(p)
            }
        }
    }

    /// Refuses the locality partition where it does not apply: a mixture,
    /// or packing.
    pub(crate) fn check_partition(
        &self,
        partition: Partition,
        options: &LoaderOptions,
    ) -> Result<()> {
        if partition == Partition::RoundRobin {
            return Ok(());
        }
        let why = match (&self.kind, &options.packing) {
            (Kind::Mixture(_), _) => "a mixture's loader",
            (_, Some(_)) => "a packing loader",
            _ => return Ok(()),
        };
        Err(DatasetError::InvalidArgument(format!(
            "the locality partition reads one dataset's whole sequences; {why} deals round robin (partition \"round_robin\", or the default)"
        )))
    }

    /// What a loader resuming `state` reads for the rest of the state's
    /// epoch when the dataset grew since (7.3): the first shards, those the
    /// state was saved on (None when the state is of this very feed, which
    /// the state's checks then judge). A state of shards that changed is
    /// refused here. For a mixture whose state continues a change of
    /// parameters (10.6): the mixture continuing it, in every epoch.
    pub(crate) fn for_state(&self, state: &LoaderState) -> Result<Option<Feed>> {
        let (dataset, fingerprint, counts) = match &self.kind {
            Kind::Dataset {
                dataset,
                fingerprint,
                counts,
                ..
            } => (dataset, fingerprint, counts),
            Kind::Mixture(m) => {
                let Some(saved) = &state.mixture else {
                    return Ok(None);
                };
                let same = MixtureState {
                    version: m.state().version,
                    evolved: None,
                    ..saved.clone()
                } == m.state();
                return match &saved.evolved {
                    Some(e)
                        if same
                            && m.evolved_in(state.epoch).is_none()
                            && e.epoch == state.epoch =>
                    {
                        Ok(Some(Feed::from(m.with_evolved(e.clone())?)))
                    }
                    _ => Ok(None),
                };
            }
        };
        if state.mixture.is_some()
            || (state.joined.is_none()
                && (state.sequences, state.fingerprint) == (counts.num_sequences(), *fingerprint))
        {
            return Ok(None);
        }
        let Some(k) = dataset.shards_of(state.sequences, state.fingerprint)? else {
            return Err(dataset.not_grown_from(state.sequences, state.fingerprint));
        };
        let joined = match state.joined {
            None => None,
            Some(j) => match dataset.shards_of(j.sequences, j.fingerprint)? {
                Some(first) if first <= k => Some(Arc::new(JoinedOrder {
                    first: Arc::new(counts.prefix(first)),
                    rest: Arc::new(counts.range(first, k)),
                    shards: first,
                    state: j,
                })),
                _ => {
                    return Err(DatasetError::BadState {
                        reason: format!(
                            "its `joined` names {} sequences with fingerprint {:#010x}, which are not the first shards of its shard list",
                            j.sequences, j.fingerprint
                        ),
                    });
                }
            },
        };
        Ok(Some(Feed {
            kind: Kind::Dataset {
                dataset: dataset.clone(),
                counts: if k == counts.num_shards() {
                    counts.clone()
                } else {
                    Arc::new(counts.prefix(k))
                },
                fingerprint: state.fingerprint,
                joined,
            },
        }))
    }

    /// The first shards of an epoch that took in appended ones, as its
    /// state records them (7.3, "Joining now").
    pub(crate) fn joined(&self) -> Option<super::state::Joined> {
        match &self.kind {
            Kind::Dataset {
                joined: Some(j), ..
            } => Some(j.state),
            _ => None,
        }
    }

    /// The cursor (7.3) of a snapshot of epoch `epoch`'s order: one
    /// dataset's.
    pub(crate) fn cursor_of(&self, snapshot: &OrderSnapshot, epoch: u64) -> Option<OrderCursor> {
        match &self.kind {
            Kind::Dataset {
                counts,
                joined: None,
                ..
            } => Some(OrderCursor::of_snapshot(snapshot, counts, epoch)),
            Kind::Dataset { .. } => None,
            Kind::Mixture(_) => None,
        }
    }

    /// The order of epoch `epoch` in the locality partition (one dataset).
    /// Its windows lie within `blocks` blocks (section 7.6).
    pub(crate) fn window_order(
        &self,
        epoch: u64,
        shuffle: Option<Shuffle>,
        blocks: u64,
    ) -> Result<WindowOrder> {
        match &self.kind {
            Kind::Dataset {
                counts,
                joined: None,
                ..
            } => Ok(WindowOrder::new(counts.clone(), shuffle, epoch, blocks)),
            Kind::Dataset { .. } => Err(DatasetError::InvalidArgument(
                "an epoch that took in appended shards (`joined`) is dealt round robin, not in the locality partition".into(),
            )),
            Kind::Mixture(_) => Err(DatasetError::InvalidArgument(
                "the locality partition reads one dataset, not a mixture".into(),
            )),
        }
    }

    /// The stream of epoch `epoch`, from its first position.
    pub(crate) fn order(&self, epoch: u64, shuffle: Option<Shuffle>) -> Order {
        match &self.kind {
            Kind::Dataset {
                joined: Some(j), ..
            } => Order::Joined {
                first: Box::new(EpochOrder::new(j.first.clone(), shuffle, epoch)),
                rest: Box::new(EpochOrder::new(j.rest.clone(), shuffle, epoch)),
                shards: j.shards,
            },
            Kind::Dataset { counts, .. } => {
                Order::Single(EpochOrder::new(counts.clone(), shuffle, epoch))
            }
            Kind::Mixture(m) => Order::Mixed(MixedOrder::new(m.clone(), shuffle, epoch)),
        }
    }

    /// The tail of epoch `epoch`'s order after `base`: the positions from
    /// the frontier on that are not in the skip list, numbered by tail
    /// index (`spec/DATASET.md` 7.2).
    pub(crate) fn tail(&self, epoch: u64, shuffle: Option<ShuffleOptions>, base: Base) -> Tail {
        let shuffle = shuffle.map(|s| Shuffle {
            seed: s.seed,
            buffer: s.buffer,
        });
        Tail {
            order: self.order(epoch, shuffle),
            base,
            pos: 0,
            skip_at: 0,
            index: 0,
            stop: None,
            snapshots: None,
        }
    }

    /// [`Feed::tail`], started where it can be without walking the
    /// positions before: one dataset's unshuffled order at the frontier,
    /// its shuffled order at `cursor` (7.3) when the cursor stands at or
    /// before tail index `first` (the first one the walk's consumer takes;
    /// otherwise, or for a mixture, from the order's start).
    pub(crate) fn tail_from(
        &self,
        epoch: u64,
        shuffle: Option<ShuffleOptions>,
        base: Base,
        cursor: Option<&OrderCursor>,
        first: u64,
    ) -> Result<Tail> {
        let Kind::Dataset {
            counts,
            joined: None,
            ..
        } = &self.kind
        else {
            return Ok(self.tail(epoch, shuffle, base));
        };
        let (order, pos) = match (shuffle, cursor) {
            (None, _) => (
                EpochOrder::unshuffled_from(counts.clone(), epoch, base.frontier),
                base.frontier,
            ),
            (Some(s), Some(c)) if tail_index_at(&base, c.position) <= first => {
                let shuffle = Shuffle {
                    seed: s.seed,
                    buffer: s.buffer,
                };
                let snapshot = c.to_snapshot(counts)?;
                let order = EpochOrder::resume(counts.clone(), shuffle, epoch, snapshot);
                (order, c.position)
            }
            _ => return Ok(self.tail(epoch, shuffle, base)),
        };
        let skip_at = base.skip.partition_point(|&p| p < pos);
        Ok(Tail {
            order: Order::Single(order),
            index: tail_index_at(&base, pos),
            base,
            pos,
            skip_at,
            stop: None,
            snapshots: None,
        })
    }
}

/// The tail index of the first tail position at or after `position`.
fn tail_index_at(base: &Base, position: u64) -> u64 {
    let skipped = base.skip.partition_point(|&p| p < position) as u64;
    position
        .saturating_sub(base.frontier)
        .saturating_sub(skipped)
}

impl Feed {
    /// Walks the tail of `state`'s epoch order (its frontier and skip
    /// list, as [`Feed::tail`]): `f(tail index, position, id)` until it
    /// returns false.
    pub(crate) fn walk(
        &self,
        state: &LoaderState,
        mut f: impl FnMut(u64, u64, u64) -> Result<bool>,
    ) -> Result<()> {
        let base = Base {
            frontier: state.frontier,
            skip: state.skip.clone(),
        };
        for item in self.tail(state.epoch, state.shuffle, base) {
            if !f(item.index, item.position, self.id_of(item.source, item.at))? {
                break;
            }
        }
        Ok(())
    }
}

impl Subject for Feed {
    fn len(&self, epoch: u64) -> u64 {
        match &self.kind {
            Kind::Dataset { counts, .. } => counts.num_sequences(),
            Kind::Mixture(m) => m.num_sequences(epoch),
        }
    }

    fn fingerprint(&self) -> u32 {
        match &self.kind {
            Kind::Dataset { fingerprint, .. } => *fingerprint,
            Kind::Mixture(m) => m.fingerprint(),
        }
    }

    fn mixture_state(&self, epoch: u64) -> Option<MixtureState> {
        match &self.kind {
            Kind::Dataset { .. } => None,
            Kind::Mixture(m) => Some(m.state_in(epoch)),
        }
    }
}

/// The stream of an epoch: per position, the source and the sequence's
/// location in it.
#[derive(Debug)]
pub(crate) enum Order {
    Single(EpochOrder),
    Mixed(MixedOrder),
    /// An epoch that took in appended shards (7.3, "Joining now"): the
    /// order of the first `shards` shards, then that of the rest (whose
    /// shard numbers count from `shards`).
    Joined {
        first: Box<EpochOrder>,
        rest: Box<EpochOrder>,
        shards: usize,
    },
}

impl Iterator for Order {
    type Item = (usize, SequenceLocation);

    fn next(&mut self) -> Option<(usize, SequenceLocation)> {
        match self {
            Order::Single(o) => o.next().map(|at| (0, at)),
            Order::Mixed(o) => o.next(),
            Order::Joined {
                first,
                rest,
                shards,
            } => first
                .next()
                .or_else(|| {
                    rest.next().map(|at| SequenceLocation {
                        shard: at.shard + *shards,
                        ..at
                    })
                })
                .map(|at| (0, at)),
        }
    }
}

/// The two orders of an epoch that took in appended shards.
#[derive(Debug)]
pub(crate) struct JoinedOrder {
    /// The counts of the first shards, and of the rest (counted from 0).
    first: Arc<super::counts::ShardCounts>,
    rest: Arc<super::counts::ShardCounts>,
    /// The number of first shards.
    shards: usize,
    /// What a state records of them.
    state: super::state::Joined,
}

/// One item of a [`Tail`]: its tail index, its position in the epoch's
/// order, and the sequence there (source, location).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TailItem {
    pub(crate) index: u64,
    pub(crate) position: u64,
    pub(crate) source: usize,
    pub(crate) at: SequenceLocation,
}

/// The walk of an epoch's order from a base: every position before the
/// frontier and every position in the skip list passed over, the rest
/// numbered 0, 1, 2, … (their tail indices). The loader deals tail indices
/// to consumers; packing's equal counts and elastic resume walk it too.
#[derive(Debug)]
pub(crate) struct Tail {
    order: Order,
    base: Base,
    /// The position the order's next item has, and the next skip entry.
    pos: u64,
    skip_at: usize,
    /// The tail index of the next position not passed over.
    index: u64,
    /// Checked every 65,536 positions: set, the walk ends.
    stop: Option<Arc<AtomicBool>>,
    /// Where the walk keeps a snapshot of a shuffled order every
    /// [`SNAPSHOT_EVERY`] positions, for its consumer's state.
    snapshots: Option<Arc<Snapshots>>,
}

impl Tail {
    /// The walk, ending early (as if the order had ended) once `stop` is
    /// set: walking to a far frontier takes a while.
    pub(crate) fn with_stop(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The position the walk has reached.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// The walk, keeping snapshots of its order in `snapshots` (one of
    /// where it starts, if it starts past position 0): the walk of one
    /// dataset's shuffled order only.
    pub(crate) fn with_snapshots(mut self, snapshots: Arc<Snapshots>) -> Self {
        if matches!(&self.order, Order::Single(o) if o.is_shuffled()) {
            self.snapshots = Some(snapshots);
            if self.pos > 0 {
                self.snapshot();
            }
        }
        self
    }

    fn snapshot(&self) {
        if let (Some(snapshots), Order::Single(order)) = (&self.snapshots, &self.order) {
            snapshots.push(self.index, order.snapshot(self.pos));
        }
    }
}

impl Iterator for Tail {
    type Item = TailItem;

    fn next(&mut self) -> Option<TailItem> {
        loop {
            if self.snapshots.is_some() && self.pos.is_multiple_of(SNAPSHOT_EVERY) && self.pos > 0 {
                self.snapshot();
            }
            let (source, at) = self.order.next()?;
            let p = self.pos;
            self.pos += 1;
            if p % 65_536 == 65_535
                && self
                    .stop
                    .as_ref()
                    .is_some_and(|s| s.load(Ordering::Relaxed))
            {
                return None;
            }
            if p < self.base.frontier {
                continue;
            }
            if self.base.skip.get(self.skip_at) == Some(&p) {
                self.skip_at += 1;
                continue;
            }
            let index = self.index;
            self.index += 1;
            return Some(TailItem {
                index,
                position: p,
                source,
                at,
            });
        }
    }
}
