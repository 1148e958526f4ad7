//! [`Loader`]: a streaming, shuffling, partitioned and resumable iterator
//! over a dataset's top-level sequences, re-batched into mini-batches.

use super::batch_cache::BatchCache;
use super::error::{DatasetError, Result};
use super::feed::{Feed, Order};
use super::mixture::MixtureState;
use super::reader::{Dataset, SequenceLocation};
use super::shuffle::Shuffle;
use crate::batch::Batch;
use crate::tensor::LodTensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

/// The version of [`LoaderState`] this crate writes and reads.
pub(super) const STATE_VERSION: u32 = 1;

/// The default of [`LoaderOptions::cache_bytes`]: 256 MiB.
///
/// ```
/// assert_eq!(lodt::dataset::DEFAULT_CACHE_BYTES, 256 << 20);
/// ```
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// How sequences are grouped into mini-batches.
///
/// ```
/// use lodt::dataset::Batching;
/// assert_eq!(Batching::default(), Batching::Sequences(32));
/// let tokens = Batching::Rows { max_rows: 4096, tensor: Some("words".into()) };
/// # let _ = tokens;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Batching {
    /// This many top-level sequences per mini-batch (the last one of an
    /// epoch may have fewer: see [`LoaderOptions::drop_last`]).
    Sequences(usize),
    /// As many sequences as fit in `max_rows` rows (tokens) of `tensor`
    /// (default: the schema's first tensor). A sequence longer than the
    /// budget is a mini-batch by itself.
    Rows {
        /// The row budget.
        max_rows: usize,
        /// The tensor whose rows count.
        tensor: Option<String>,
    },
}

impl Default for Batching {
    fn default() -> Self {
        Batching::Sequences(32)
    }
}

/// The shuffle: a seed and the size of the shuffle buffer (in sequences;
/// the larger, the closer to a uniform permutation, at 24 bytes per
/// sequence of memory and no data).
///
/// ```
/// let s = lodt::dataset::ShuffleOptions::default();
/// assert_eq!((s.seed, s.buffer), (0, 16384));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleOptions {
    /// The seed; with the epoch, it fixes the order.
    pub seed: u64,
    /// The shuffle buffer's size, in sequences (at least 1).
    pub buffer: usize,
}

impl Default for ShuffleOptions {
    fn default() -> Self {
        ShuffleOptions {
            seed: 0,
            buffer: 16384,
        }
    }
}

/// What to do with the `N mod C` positions of an epoch that cannot be dealt
/// evenly to the `C` consumers. See [`Loader`].
///
/// ```
/// assert_eq!(lodt::dataset::Remainder::default(), lodt::dataset::Remainder::Keep);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Remainder {
    /// Deliver them: every sequence exactly once, some consumers one more.
    #[default]
    Keep,
    /// Drop them: every consumer gets `floor(N / C)`.
    Drop,
    /// Give the consumers that would be one short a repeat of the epoch's
    /// first positions: every consumer gets `ceil(N / C)`.
    Repeat,
}

/// How a [`Loader`] reads.
///
/// ```
/// let o = lodt::dataset::LoaderOptions { rank: 1, world_size: 4, ..Default::default() };
/// assert_eq!((o.num_workers, o.prefetch), (1, 2));
/// assert_eq!(o.cache_bytes, lodt::dataset::DEFAULT_CACHE_BYTES);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderOptions {
    /// How sequences are grouped.
    pub batching: Batching,
    /// With [`Batching::Sequences`]: drop a consumer's last mini-batch of an
    /// epoch if it is short.
    pub drop_last: bool,
    /// The shuffle (`None`: dataset order, every epoch).
    pub shuffle: Option<ShuffleOptions>,
    /// This process's rank, below `world_size`.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// This loader's worker index within its rank, below `num_workers`.
    pub worker: usize,
    /// The number of loaders (workers) per rank.
    pub num_workers: usize,
    /// What to do with the positions that cannot be dealt evenly.
    pub remainder: Remainder,
    /// Mini-batches read ahead by a background thread (0: no thread; each
    /// mini-batch is read when asked for). Memory holds at most this many
    /// mini-batches, plus one being built. At most [`MAX_PREFETCH`]: more is
    /// a [`DatasetError::InvalidArgument`] from [`Loader::new`].
    pub prefetch: usize,
    /// The most bytes the loader's cache of recently read batches holds
    /// (default [`DEFAULT_CACHE_BYTES`], 256 MiB). A batch of a compressed
    /// (2.0) shard, or one read by positional reads or from an object store,
    /// counts its decoded (read) bytes; a batch of a mapped shard counts
    /// only its views (a few hundred bytes per tensor), its bytes being the
    /// map's. The cache also holds at most 4,096 batches, and always the
    /// one being read. A batch that is evicted and needed again is read (and
    /// decoded) again: a shuffle buffer spanning more decoded batches than
    /// fit decodes some batches more than once per epoch, trading time for
    /// the bound. A sequence taken from a decoded batch is copied out of
    /// it, so mini-batches never keep a decoded batch alive.
    pub cache_bytes: usize,
}

/// The most mini-batches [`LoaderOptions::prefetch`] reads ahead: 1,024 (the
/// queue's slots are allocated when the loader starts, so the count is capped
/// rather than trusted).
///
/// ```
/// assert_eq!(lodt::dataset::MAX_PREFETCH, 1024);
/// ```
pub const MAX_PREFETCH: usize = 1024;

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            batching: Batching::default(),
            drop_last: false,
            shuffle: None,
            rank: 0,
            world_size: 1,
            worker: 0,
            num_workers: 1,
            remainder: Remainder::Keep,
            prefetch: 2,
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

impl LoaderOptions {
    /// The number of consumers, `world_size × num_workers`, and this
    /// loader's index `rank × num_workers + worker`.
    ///
    /// ```
    /// let o = lodt::dataset::LoaderOptions { rank: 1, world_size: 2, worker: 1, num_workers: 3, ..Default::default() };
    /// assert_eq!(o.consumer()?, (6, 4));
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn consumer(&self) -> Result<(u64, u64)> {
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(DatasetError::InvalidArgument(format!(
                "rank {} of world size {}: the rank must be below the world size, which must be at least 1",
                self.rank, self.world_size
            )));
        }
        if self.num_workers == 0 || self.worker >= self.num_workers {
            return Err(DatasetError::InvalidArgument(format!(
                "worker {} of {}: the worker must be below the number of workers, which must be at least 1",
                self.worker, self.num_workers
            )));
        }
        let consumers = (self.world_size as u64)
            .checked_mul(self.num_workers as u64)
            .ok_or_else(|| DatasetError::InvalidArgument("too many consumers".into()))?;
        let consumer = self.rank as u64 * self.num_workers as u64 + self.worker as u64;
        Ok((consumers, consumer))
    }
}

/// A mini-batch: the sequences' ids (dataset order numbers, as
/// [`Dataset::sequence`] takes) and their tensors, merged in schema order.
///
/// ```
/// # use lodt::{Batch, LodTensor};
/// let b = lodt::dataset::MiniBatch { epoch: 0, ids: vec![4, 1], batch: Batch::new() };
/// assert_eq!(b.ids.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MiniBatch {
    /// The epoch it belongs to.
    pub epoch: u64,
    /// The ids of its sequences, in order.
    pub ids: Vec<u64>,
    /// The tensors: one top-level sequence per id.
    pub batch: Batch,
}

/// Where a loader is in an epoch: see [`Loader`] and
/// `spec/DATASET.md` section 7. Serialize it with [`LoaderState::to_json`]
/// (or serde).
///
/// ```
/// let json = serde_json::json!({"version": 1, "sequences": 10, "fingerprint": 0,
///     "shuffle": null, "remainder": "keep", "epoch": 0, "frontier": 4, "skip": [5],
///     "consumers": 2, "consumed": {"0": 1, "1": 0}});
/// let state = lodt::dataset::LoaderState::from_json(&json)?;
/// assert_eq!(state.to_json(), json);
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The state's format version (1).
    pub version: u32,
    /// The dataset's number of sequences.
    pub sequences: u64,
    /// The dataset's [`Dataset::fingerprint`].
    pub fingerprint: u32,
    /// The shuffle of the order.
    pub shuffle: Option<ShuffleOptions>,
    /// The remainder rule.
    pub remainder: Remainder,
    /// The epoch.
    pub epoch: u64,
    /// Every position of the epoch's order before this one was consumed.
    pub frontier: u64,
    /// Positions at or after the frontier that were consumed, increasing.
    pub skip: Vec<u64>,
    /// The number of consumers dealing the rest (the positions from the
    /// frontier on, less `skip`) round robin.
    pub consumers: u64,
    /// Per consumer (by index), how many of the rest it consumed.
    pub consumed: BTreeMap<u64, u64>,
    /// For a [`Mixture`](super::Mixture)'s loader: the mixture it reads
    /// (`spec/DATASET.md`, "Mixtures"); absent for a single dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixture: Option<MixtureState>,
    /// A packing consumer's window (version 2, `spec/DATASET.md` 7.4): see
    /// [`PackedLoader`](super::PackedLoader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packing: Option<super::pack::PackState>,
}

impl LoaderState {
    /// The state as JSON.
    ///
    /// ```
    /// # let json = serde_json::json!({"version": 1, "sequences": 3, "fingerprint": 0, "shuffle": null,
    /// #     "remainder": "keep", "epoch": 2, "frontier": 0, "skip": [], "consumers": 1, "consumed": {"0": 1}});
    /// let state = lodt::dataset::LoaderState::from_json(&json)?;
    /// assert_eq!(state.to_json()["epoch"], 2);
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// A state from JSON.
    ///
    /// ```
    /// assert!(lodt::dataset::LoaderState::from_json(&serde_json::json!({})).is_err());
    /// ```
    pub fn from_json(value: &serde_json::Value) -> Result<Self> {
        let state: LoaderState =
            serde_json::from_value(value.clone()).map_err(|e| DatasetError::BadState {
                reason: format!("not a loader state: {e}"),
            })?;
        super::pack::check_version(&state)?;
        Ok(state)
    }

    /// Whether it holds the count of every consumer (a merged state).
    ///
    /// ```
    /// # let json = serde_json::json!({"version": 1, "sequences": 10, "fingerprint": 0, "shuffle": null,
    /// #     "remainder": "keep", "epoch": 0, "frontier": 0, "skip": [], "consumers": 2, "consumed": {"1": 3}});
    /// let state = lodt::dataset::LoaderState::from_json(&json)?;
    /// assert!(!state.is_complete()); // consumer 0 is missing
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn is_complete(&self) -> bool {
        (0..self.consumers).all(|c| self.consumed.contains_key(&c))
    }

    /// Merges the states of the consumers of one run (taken at the same
    /// checkpoint) into one that holds every consumer's count, to resume
    /// with another world size. The states must agree on everything but
    /// their counts, and not give one consumer two counts.
    ///
    /// ```
    /// use lodt::dataset::LoaderState;
    /// let state = |c: u64, n: u64| LoaderState::from_json(&serde_json::json!({"version": 1,
    ///     "sequences": 10, "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 0,
    ///     "frontier": 0, "skip": [], "consumers": 2, "consumed": {c.to_string(): n}}));
    /// let merged = LoaderState::merge(&[state(0, 3)?, state(1, 2)?])?;
    /// assert!(merged.is_complete());
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn merge(states: &[LoaderState]) -> Result<LoaderState> {
        let Some(first) = states.first() else {
            return Err(DatasetError::InvalidArgument(
                "LoaderState::merge needs at least one state".into(),
            ));
        };
        let packing = super::pack::merge_packing(states)?;
        let mut out = first.clone();
        out.packing = packing;
        for (i, s) in states.iter().enumerate().skip(1) {
            let differ = |what: &str, a: String, b: String| DatasetError::BadState {
                reason: format!("state {i} differs from state 0 in {what}: {b} vs {a}"),
            };
            let key = |s: &LoaderState| {
                (
                    s.version,
                    s.sequences,
                    s.fingerprint,
                    s.shuffle,
                    s.remainder,
                    s.consumers,
                    s.mixture.clone(),
                )
            };
            if key(s) != key(first) {
                return Err(differ(
                    "dataset or options",
                    format!("{:?}", key(first)),
                    format!("{:?}", key(s)),
                ));
            }
            if s.epoch != first.epoch {
                return Err(differ(
                    "epoch",
                    first.epoch.to_string(),
                    s.epoch.to_string(),
                ));
            }
            if s.frontier != first.frontier || s.skip != first.skip {
                return Err(differ(
                    "the base of the order (frontier and skip list)",
                    first.frontier.to_string(),
                    s.frontier.to_string(),
                ));
            }
            for (&c, &n) in &s.consumed {
                match out.consumed.get(&c) {
                    Some(&m) if m != n => {
                        return Err(DatasetError::BadState {
                            reason: format!("consumer {c} has two counts: {m} and {n}"),
                        });
                    }
                    _ => {
                        out.consumed.insert(c, n);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The base of an epoch's remaining order: everything before `frontier`
/// and every position in `skip` was consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Base {
    frontier: u64,
    skip: Vec<u64>,
}

impl Base {
    /// The number of positions left: the tail's length `L`.
    fn tail_len(&self, n: u64) -> u64 {
        n.saturating_sub(self.frontier)
            .saturating_sub(self.skip.len() as u64)
    }

    /// The positions of the tail indices `indices` (increasing): index `i`
    /// is the `i`-th position from the frontier that is not in `skip`.
    fn positions(&self, indices: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(indices.len());
        let mut k = 0usize;
        for &i in indices {
            let mut p = self.frontier + i + k as u64;
            while self.skip.get(k).is_some_and(|&s| s <= p) {
                k += 1;
                p += 1;
            }
            out.push(p);
        }
        out
    }

    /// The end (exclusive) of the tail indices dealt under `remainder` to
    /// `consumers` consumers.
    fn end(&self, n: u64, consumers: u64, remainder: Remainder) -> u64 {
        let len = self.tail_len(n);
        match remainder {
            Remainder::Keep => len,
            Remainder::Drop => len / consumers * consumers,
            Remainder::Repeat => len.div_ceil(consumers) * consumers,
        }
    }

    /// The base after the consumers of `state` consumed what it says.
    fn advance(&self, n: u64, state: &LoaderState) -> Base {
        let c_old = state.consumers.max(1);
        let len = self.tail_len(n);
        let count = |c: u64| state.consumed.get(&c).copied().unwrap_or(0);
        // The first unconsumed tail index.
        let first = (0..c_old)
            .map(|c| c.saturating_add(count(c).saturating_mul(c_old)))
            .min()
            .unwrap_or(0);
        if first >= len {
            return Base {
                frontier: n,
                skip: Vec::new(),
            };
        }
        // The tail indices consumed after it (by consumers that were ahead).
        let mut ahead = Vec::new();
        for c in 0..c_old {
            let mut i = if c > first {
                c
            } else {
                c + (first - c).div_ceil(c_old) * c_old
            };
            let stop = c.saturating_add(count(c).saturating_mul(c_old)).min(len);
            while i < stop {
                ahead.push(i);
                i += c_old;
            }
        }
        ahead.sort_unstable();
        let mut indices = Vec::with_capacity(ahead.len() + 1);
        indices.push(first);
        indices.extend_from_slice(&ahead);
        let positions = self.positions(&indices);
        let frontier = positions.first().copied().unwrap_or(n);
        let mut skip: Vec<u64> = self
            .skip
            .iter()
            .copied()
            .filter(|&p| p >= frontier)
            .chain(positions.iter().skip(1).copied())
            .collect();
        skip.sort_unstable();
        skip.dedup();
        Base { frontier, skip }
    }
}

/// One sequence, fetched.
struct Fetched {
    id: u64,
    tensors: Vec<LodTensor>,
    rows: usize,
}

/// The grouping, resolved against the schema.
#[derive(Debug, Clone, Copy)]
enum Group {
    Sequences(usize),
    Rows { max_rows: usize, tensor: usize },
}

/// Builds one consumer's mini-batches of one epoch (on the caller's thread
/// or the prefetch thread).
struct Producer {
    feed: Feed,
    epoch: u64,
    base: Base,
    consumers: u64,
    /// The next tail index to take, and the end of this consumer's indices.
    next_index: u64,
    end: u64,
    tail_len: u64,
    group: Group,
    drop_last: bool,
    order: Order,
    shuffle: Option<Shuffle>,
    /// The position the order's next item has, the next skip entry, and the
    /// tail index of the next position not skipped.
    pos: u64,
    skip_at: usize,
    tail_index: u64,
    cache: BatchCache,
    carry: Option<Fetched>,
    done: bool,
    stop: Arc<AtomicBool>,
}

impl Producer {
    /// The location of tail index `self.next_index`, walking the order.
    fn next_location(&mut self) -> Option<Result<(usize, SequenceLocation)>> {
        if self.next_index >= self.end || self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let target = self.next_index;
        self.next_index += self.consumers;
        if target >= self.tail_len {
            // A repeat (Remainder::Repeat): the tail's first positions again.
            return Some(self.tail_at(target % self.tail_len.max(1)));
        }
        loop {
            let Some(at) = self.order.next() else {
                return Some(Err(DatasetError::Loader(format!(
                    "the epoch order ended at position {} before tail index {target}",
                    self.pos
                ))));
            };
            let p = self.pos;
            self.pos += 1;
            // Walking to a far frontier takes a while: stop when asked.
            if p % 65_536 == 65_535 && self.stop.load(Ordering::Relaxed) {
                return None;
            }
            if p < self.base.frontier {
                continue;
            }
            if self.base.skip.get(self.skip_at) == Some(&p) {
                self.skip_at += 1;
                continue;
            }
            let index = self.tail_index;
            self.tail_index += 1;
            if index == target {
                return Some(Ok(at));
            }
        }
    }

    /// The location of tail index `target`, from a fresh walk of the order.
    fn tail_at(&self, target: u64) -> Result<(usize, SequenceLocation)> {
        let positions = self.base.positions(&[target]);
        let p = positions.first().copied().unwrap_or(u64::MAX);
        self.feed
            .order(self.epoch, self.shuffle)
            .nth(p as usize)
            .ok_or_else(|| DatasetError::Loader(format!("the epoch order has no position {p}")))
    }

    fn fetch(&mut self, (source, at): (usize, SequenceLocation)) -> Result<Fetched> {
        let Some(dataset) = self.feed.source(source) else {
            return Err(DatasetError::Loader(format!(
                "the order names source {source}, which the loader does not have"
            )));
        };
        let id = self.feed.id_of(source, at);
        let (columns, held) = self.cache.get_or_load((source, at.shard, at.batch), || {
            dataset.batch_columns_held(at.shard, at.batch)
        })?;
        let tensors = columns
            .iter()
            .map(|c| {
                let s = c.slice_top(at.index, at.index.saturating_add(1))?;
                // A slice of a decoded batch would keep all of it alive
                // (past its eviction) until the mini-batch is merged: copied.
                Ok(if held > 0 { s.compact() } else { s })
            })
            .collect::<crate::Result<Vec<_>>>()
            .map_err(|e| DatasetError::tensor(format!("slicing sequence {id}"), e))?;
        let rows = match self.group {
            Group::Rows { tensor, .. } => tensors.get(tensor).map_or(0, LodTensor::rows),
            Group::Sequences(_) => 0,
        };
        Ok(Fetched { id, tensors, rows })
    }

    fn next_batch(&mut self) -> Option<Result<MiniBatch>> {
        if self.done {
            return None;
        }
        let r = self.build();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }

    fn build(&mut self) -> Option<Result<MiniBatch>> {
        let mut seqs: Vec<Fetched> = Vec::new();
        let mut rows = 0usize;
        if let Some(s) = self.carry.take() {
            rows += s.rows;
            seqs.push(s);
        }
        loop {
            if let Group::Sequences(n) = self.group
                && seqs.len() >= n
            {
                break;
            }
            let at = match self.next_location() {
                None => break,
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(at)) => at,
            };
            let seq = match self.fetch(at) {
                Ok(s) => s,
                Err(e) => return Some(Err(e)),
            };
            if let Group::Rows { max_rows, .. } = self.group
                && !seqs.is_empty()
                && rows.saturating_add(seq.rows) > max_rows
            {
                self.carry = Some(seq);
                break;
            }
            rows = rows.saturating_add(seq.rows);
            seqs.push(seq);
        }
        if seqs.is_empty() {
            return None;
        }
        if let Group::Sequences(n) = self.group
            && self.drop_last
            && seqs.len() < n
        {
            return None;
        }
        Some(self.merge(seqs))
    }

    fn merge(&self, seqs: Vec<Fetched>) -> Result<MiniBatch> {
        let ids: Vec<u64> = seqs.iter().map(|s| s.id).collect();
        let mut batch = Batch::new();
        for (k, t) in self.feed.schema().tensors.iter().enumerate() {
            // One pass over the bytes (`ops::concat`): every sequence has the
            // schema's layout, checked as its batch was read.
            let parts: Vec<&LodTensor> = seqs.iter().filter_map(|s| s.tensors.get(k)).collect();
            let merged = crate::ops::concat::join_into(
                &parts,
                t.dtype,
                &t.element_shape,
                t.lod_levels,
                |bytes| self.feed.buffers().try_concat(bytes),
            )
            .map_err(|e| DatasetError::tensor(format!("merging tensor {:?}", t.name), e))?;
            batch
                .push(t.name.clone(), merged)
                .map_err(|e| DatasetError::tensor("building a mini-batch", e))?;
        }
        Ok(MiniBatch {
            epoch: self.epoch,
            ids,
            batch,
        })
    }
}

/// Where mini-batches come from.
enum Source {
    Inline(Box<Producer>),
    Thread {
        rx: Receiver<Result<MiniBatch>>,
        handle: Option<JoinHandle<()>>,
        stop: Arc<AtomicBool>,
        /// The process the thread runs in: a child forked from it has the
        /// loader's memory but not the thread.
        owner: u32,
        /// How many mini-batches the thread has queued (read by tests).
        #[cfg_attr(not(test), allow(dead_code))]
        sent: Arc<AtomicU64>,
    },
    Done,
}

/// A streaming loader over a [`Dataset`]'s top-level sequences: shuffled
/// (deterministically from `(seed, epoch)`), partitioned between ranks and
/// workers, re-batched into mini-batches, read ahead by a background thread,
/// and resumable. It iterates one epoch; [`Loader::set_epoch`] starts
/// another. Each item is a [`MiniBatch`] or the first error (then the
/// iteration ends).
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
    feed: Feed,
    /// The number of positions of the epoch's stream (`N`).
    n: u64,
    options: LoaderOptions,
    group: Group,
    epoch: u64,
    base: Base,
    consumers: u64,
    consumer: u64,
    /// The positions of the tail this consumer had consumed when the epoch
    /// (or the resume) started, and those delivered since.
    start: u64,
    delivered: u64,
    source: Source,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("epoch", &self.epoch)
            .field("consumer", &self.consumer)
            .field("consumers", &self.consumers)
            .field("delivered", &(self.start + self.delivered))
            .finish()
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
    pub fn new(dataset: Arc<Dataset>, options: LoaderOptions) -> Result<Self> {
        Self::build(Feed::dataset(dataset), options, None)
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
        dataset: Arc<Dataset>,
        options: LoaderOptions,
        state: &LoaderState,
    ) -> Result<Self> {
        Self::build(Feed::dataset(dataset), options, Some(state))
    }

    /// A loader of `feed`, at the start of epoch 0 or resumed from `state`.
    pub(crate) fn build(
        feed: Feed,
        options: LoaderOptions,
        state: Option<&LoaderState>,
    ) -> Result<Self> {
        let (consumers, consumer) = options.consumer()?;
        if options.prefetch > MAX_PREFETCH {
            return Err(DatasetError::InvalidArgument(format!(
                "prefetch {}: at most {MAX_PREFETCH} mini-batches are read ahead (MAX_PREFETCH; \
                 the queue is allocated up front)",
                options.prefetch
            )));
        }
        let group = match &options.batching {
            Batching::Sequences(0) => {
                return Err(DatasetError::InvalidArgument(
                    "Batching::Sequences(0): a mini-batch needs at least 1 sequence".into(),
                ));
            }
            Batching::Sequences(n) => Group::Sequences(*n),
            Batching::Rows { max_rows: 0, .. } => {
                return Err(DatasetError::InvalidArgument(
                    "Batching::Rows with max_rows 0: the budget must be at least 1 row".into(),
                ));
            }
            Batching::Rows { max_rows, tensor } => {
                let index = match tensor {
                    None => 0,
                    Some(name) => feed.schema().position(name).ok_or_else(|| {
                        DatasetError::InvalidArgument(format!(
                            "Batching::Rows counts the rows of tensor {name:?}, which the dataset does not have (it has {})",
                            crate::error::name_list(
                                feed.schema().tensors.iter().map(|t| t.name.as_str())
                            )
                        ))
                    })?,
                };
                Group::Rows {
                    max_rows: *max_rows,
                    tensor: index,
                }
            }
        };
        if options.shuffle.is_some_and(|s| s.buffer == 0) {
            return Err(DatasetError::InvalidArgument(
                "the shuffle buffer must hold at least 1 sequence".into(),
            ));
        }
        // The mini-batches in flight: the queue, one being built, the one
        // the caller holds and the one before it (dropped as the next comes).
        let in_flight = options.prefetch.saturating_add(3);
        feed.buffers()
            .keep_at_least(in_flight.saturating_mul(feed.schema().tensors.len()));
        let (epoch, base, start) = match state {
            None => (0, Base::default(), 0),
            Some(state) => plan(&feed, &options, consumers, consumer, state)?,
        };
        let n = feed.len(epoch);
        let mut loader = Loader {
            feed,
            n,
            options,
            group,
            epoch,
            base,
            consumers,
            consumer,
            start,
            delivered: 0,
            source: Source::Done,
        };
        loader.start_source()?;
        Ok(loader)
    }

    fn start_source(&mut self) -> Result<()> {
        let n = self.n;
        let stop = Arc::new(AtomicBool::new(false));
        let shuffle = self.options.shuffle.map(|s| Shuffle {
            seed: s.seed,
            buffer: s.buffer,
        });
        let producer = Producer {
            feed: self.feed.clone(),
            epoch: self.epoch,
            base: self.base.clone(),
            consumers: self.consumers,
            next_index: self
                .consumer
                .saturating_add(self.start.saturating_mul(self.consumers)),
            end: self.base.end(n, self.consumers, self.options.remainder),
            tail_len: self.base.tail_len(n),
            group: self.group,
            drop_last: self.options.drop_last,
            order: self.feed.order(self.epoch, shuffle),
            shuffle,
            pos: 0,
            skip_at: 0,
            tail_index: 0,
            cache: BatchCache::new(self.options.cache_bytes),
            carry: None,
            done: false,
            stop: stop.clone(),
        };
        if self.options.prefetch == 0 {
            self.source = Source::Inline(Box::new(producer));
            return Ok(());
        }
        let (tx, rx) = sync_channel(self.options.prefetch);
        let mut producer = producer;
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        let handle = std::thread::Builder::new()
            .name("lodt-loader".into())
            .spawn(move || {
                while let Some(item) = producer.next_batch() {
                    let failed = item.is_err();
                    if tx.send(item).is_err() || failed {
                        break;
                    }
                    counter.fetch_add(1, Ordering::Release);
                }
            })
            .map_err(|e| DatasetError::Loader(format!("cannot start the prefetch thread: {e}")))?;
        self.source = Source::Thread {
            rx,
            handle: Some(handle),
            stop,
            owner: std::process::id(),
            sent,
        };
        Ok(())
    }

    /// How many mini-batches the prefetch thread has queued so far (tests).
    #[cfg(test)]
    fn queued(&self) -> u64 {
        match &self.source {
            Source::Thread { sent, .. } => sent.load(Ordering::Acquire),
            _ => 0,
        }
    }

    fn stop_source(&mut self) {
        if let Source::Thread { owner, .. } = &self.source
            && *owner != std::process::id()
        {
            // Forked: the thread is not in this process, so it can be
            // neither joined nor told to stop; its channel and handle are
            // left as they are (dropping them could wait on it).
            std::mem::forget(std::mem::replace(&mut self.source, Source::Done));
            return;
        }
        if let Source::Thread { handle, stop, .. } = &mut self.source {
            stop.store(true, Ordering::Relaxed);
            let handle = handle.take();
            // Dropping the receiver unblocks a producer waiting to send.
            self.source = Source::Done;
            if let Some(h) = handle {
                let _ = h.join();
            }
        }
        self.source = Source::Done;
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
        self.epoch
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
        self.stop_source();
        self.epoch = epoch;
        self.n = self.feed.len(epoch);
        self.base = Base::default();
        self.start = 0;
        self.delivered = 0;
        self.start_source()
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
        let n = self.n;
        let end = self.base.end(n, self.consumers, self.options.remainder);
        let next = self
            .consumer
            .saturating_add((self.start + self.delivered).saturating_mul(self.consumers));
        if next >= end {
            0
        } else {
            (end - next).div_ceil(self.consumers)
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
        LoaderState {
            version: STATE_VERSION,
            sequences: self.n,
            fingerprint: self.feed.fingerprint(),
            shuffle: self.options.shuffle,
            remainder: self.options.remainder,
            epoch: self.epoch,
            frontier: self.base.frontier,
            skip: self.base.skip.clone(),
            consumers: self.consumers,
            consumed: [(self.consumer, self.start + self.delivered)].into(),
            mixture: self.feed.mixture_state(),
            packing: None,
        }
    }
}

/// Checks that `state` is one a loader of `feed` with `options` could have
/// saved (whatever its number of consumers and its version): its dataset
/// (or mixture), shuffle and remainder, its base, and every count within
/// its consumer's share. The one check of a state, for plain and packed
/// loaders alike; returns the state's base.
pub(crate) fn check_state(
    feed: &Feed,
    options: &LoaderOptions,
    state: &LoaderState,
) -> Result<Base> {
    let bad = |reason: String| Err(DatasetError::BadState { reason });
    let mixture = feed.mixture_state();
    if state.mixture != mixture {
        return bad(match (&state.mixture, &mixture) {
            (None, Some(_)) => {
                "it is the state of a single dataset's loader, not of a mixture's".into()
            }
            (Some(_), None) => {
                "it is the state of a mixture's loader, not of a single dataset's".into()
            }
            (saved, this) => {
                format!("it was saved on another mixture ({saved:?}); this one is {this:?}")
            }
        });
    }
    let n = feed.len(state.epoch);
    if state.sequences != n || state.fingerprint != feed.fingerprint() {
        return bad(format!(
            "it was saved on another dataset ({} sequences, fingerprint {:#010x}); this one has {n} sequences, fingerprint {:#010x}",
            state.sequences,
            state.fingerprint,
            feed.fingerprint()
        ));
    }
    if state.shuffle != options.shuffle {
        return bad(format!(
            "it was saved with shuffle {:?}, the options say {:?} (the order would differ)",
            state.shuffle, options.shuffle
        ));
    }
    if state.remainder != options.remainder {
        return bad(format!(
            "it was saved with remainder {:?}, the options say {:?}",
            state.remainder, options.remainder
        ));
    }
    if state.frontier > n {
        return bad(format!(
            "frontier {} is past the epoch's {n} positions",
            state.frontier
        ));
    }
    let mut last = None;
    for &p in &state.skip {
        if p < state.frontier || p >= n || last.is_some_and(|l| p <= l) {
            return bad(format!(
                "skip list entry {p}: entries must increase and lie in {}..{n}",
                state.frontier
            ));
        }
        last = Some(p);
    }
    if state.consumers == 0 {
        return bad("it has 0 consumers".into());
    }
    let base = Base {
        frontier: state.frontier,
        skip: state.skip.clone(),
    };
    // Each count within its consumer's share: what no loader could have
    // consumed is not a state a loader wrote.
    let end = base.end(n, state.consumers, state.remainder);
    for (&c, &count) in &state.consumed {
        if c >= state.consumers {
            return bad(format!(
                "it has a count for consumer {c}, but only {} consumers (0..{})",
                state.consumers, state.consumers
            ));
        }
        let share = if end > c {
            (end - c).div_ceil(state.consumers)
        } else {
            0
        };
        if count > share {
            return bad(format!(
                "consumer {c} consumed {count} sequences, but its share of the epoch's rest is {share} \
                 ({} positions left after the frontier {} and {} skipped, dealt to {} consumers)",
                base.tail_len(n),
                state.frontier,
                state.skip.len(),
                state.consumers
            ));
        }
    }
    Ok(base)
}

/// The epoch, base and consumed count a loader resumes with.
fn plan(
    feed: &Feed,
    options: &LoaderOptions,
    consumers: u64,
    consumer: u64,
    state: &LoaderState,
) -> Result<(u64, Base, u64)> {
    let bad = |reason: String| Err(DatasetError::BadState { reason });
    if state.version != STATE_VERSION {
        return bad(format!(
            "state version {}, this lodt reads version {STATE_VERSION}",
            state.version
        ));
    }
    let base = check_state(feed, options, state)?;
    let n = feed.len(state.epoch);
    if state.consumers == consumers {
        return match state.consumed.get(&consumer) {
            Some(&count) => Ok((state.epoch, base, count)),
            None => bad(format!(
                "it has no count for consumer {consumer} (rank {}, worker {}): resume each loader from the state it saved, or from LoaderState::merge of every loader's state",
                options.rank, options.worker
            )),
        };
    }
    if let Some(missing) = (0..state.consumers).find(|c| !state.consumed.contains_key(c)) {
        return bad(format!(
            "it was saved by {} consumers and this loader has {consumers}: resuming with another world size needs the states of all {} merged (LoaderState::merge); consumer {missing} is missing",
            state.consumers, state.consumers
        ));
    }
    Ok((state.epoch, base.advance(n, state), 0))
}

impl Iterator for Loader {
    type Item = Result<MiniBatch>;

    fn next(&mut self) -> Option<Result<MiniBatch>> {
        let item = match &mut self.source {
            Source::Inline(p) => p.next_batch(),
            Source::Thread { owner, .. } if *owner != std::process::id() => {
                Some(Err(DatasetError::Loader(format!(
                    "this loader reads ahead on a thread of process {owner}, which this process \
                     was forked from and does not have: make the loader in this process \
                     (Loader::resume from its state continues where it was)"
                ))))
            }
            Source::Thread { rx, handle, .. } => match rx.recv() {
                Ok(item) => Some(item),
                Err(_) => {
                    let panicked = handle
                        .take()
                        .map(JoinHandle::join)
                        .is_some_and(|r| r.is_err());
                    panicked
                        .then(|| Err(DatasetError::Loader("the prefetch thread panicked".into())))
                }
            },
            Source::Done => None,
        };
        match &item {
            Some(Ok(batch)) => self.delivered += batch.ids.len() as u64,
            Some(Err(_)) | None => self.stop_source(),
        }
        item
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop_source();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Lod;

    /// 8 batches of 4 sequences of 600 int64 rows (4,800 bytes each), so
    /// that a mini-batch of 16 (76,800 bytes) is a pooled buffer.
    fn dataset(dir: &std::path::Path) -> Arc<Dataset> {
        let mut w = crate::dataset::DatasetWriter::create(dir, Default::default()).unwrap();
        for k in 0..8i64 {
            let lod = Lod::try_from_lengths(&[vec![600; 4]]).unwrap();
            let x =
                LodTensor::from_vec((0..2400).map(|i| k * 10_000 + i).collect(), vec![2400], lod)
                    .unwrap();
            w.write(&Batch::try_from_tensors([("x", x)]).unwrap())
                .unwrap();
        }
        w.finish().unwrap();
        Arc::new(Dataset::open(dir).unwrap())
    }

    /// A child forked while a loader reads ahead has the loader but not its
    /// thread: the next mini-batch is an error saying so, and dropping the
    /// loader returns (it would otherwise wait for the thread forever).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_prefetching_loader_in_a_forked_child_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let options = LoaderOptions {
            batching: Batching::Sequences(2),
            prefetch: 2,
            ..Default::default()
        };
        let mut loader = Loader::new(dataset(dir.path()), options).unwrap();
        assert_eq!(loader.next().unwrap().unwrap().ids, vec![0, 1]);
        // SAFETY: the child only calls the loader, then leaves with _exit
        // (no test harness code); the parent waits for it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: alarm and _exit are async-signal-safe.
            unsafe { libc::alarm(30) };
            let said = match loader.next() {
                Some(Err(e)) => e.to_string().contains("forked from"),
                _ => false,
            };
            drop(loader);
            unsafe { libc::_exit(if said { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child made above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "wait status {status:#x}"
        );
        // The parent's loader goes on.
        assert_eq!(loader.next().unwrap().unwrap().ids, vec![2, 3]);
    }

    /// The state counts what was delivered, not what the thread read ahead:
    /// the test waits until the thread has filled its queue (a counter, not
    /// a sleep), then looks.
    #[test]
    fn the_state_counts_what_was_delivered_not_what_was_prefetched() {
        let dir = tempfile::tempdir().unwrap();
        let options = LoaderOptions {
            batching: Batching::Sequences(2),
            prefetch: 3,
            ..Default::default()
        };
        let mut loader = Loader::new(dataset(dir.path()), options).unwrap();
        assert_eq!(loader.next().unwrap().unwrap().ids, vec![0, 1]);
        // The first mini-batch and a full queue of 3 behind it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while loader.queued() < 4 {
            assert!(
                std::time::Instant::now() < deadline,
                "the queue never filled"
            );
            std::thread::yield_now();
        }
        let state = loader.state();
        assert_eq!(state.consumed.get(&0), Some(&2));
        assert_eq!((state.frontier, state.skip.len()), (0, 0));
        // What comes next is what the state says.
        assert_eq!(loader.next().unwrap().unwrap().ids, vec![2, 3]);
    }

    #[test]
    fn mini_batch_buffers_go_back_to_the_datasets_pool_and_the_next_loader_fills_them() {
        let dir = tempfile::tempdir().unwrap();
        let dataset = dataset(dir.path());
        let options = LoaderOptions {
            batching: Batching::Sequences(16),
            prefetch: 0,
            ..Default::default()
        };
        assert_eq!(dataset.buffers().free_regions(), 0);
        let mut first = Vec::new();
        for b in Loader::new(dataset.clone(), options.clone()).unwrap() {
            let b = b.unwrap();
            first.push(b.batch.get("x").unwrap().as_bytes().as_ptr() as usize);
        }
        // Each mini-batch was dropped before the next was gathered: one
        // region served both.
        assert_eq!(first, vec![first[0]; 2]);
        assert_eq!(dataset.buffers().free_regions(), 1);
        assert!(dataset.buffers().keep() >= 3);
        let mut second = Loader::new(dataset.clone(), options).unwrap();
        let b = second.next().unwrap().unwrap();
        assert_eq!(
            b.batch.get("x").unwrap().as_bytes().as_ptr() as usize,
            first[0]
        );
        assert_eq!(dataset.buffers().free_regions(), 0);
        assert_eq!(b.batch, dataset.take(&b.ids).unwrap());
    }
}
