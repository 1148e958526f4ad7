//! One consumer's stream of mini-batches of whole sequences: the walk of an
//! epoch's order from a state's base, the fetch through the batch cache,
//! grouping and merging, and the prefetch thread. The public
//! [`Loader`](super::Loader) is this stream, or packing over it.

use super::batch_cache::BatchCache;
use super::cursor::{OrderCursor, Snapshots};
use super::error::{DatasetError, Result};
use super::feed::{Feed, Tail};
use super::locality::LocalityWalk;
use super::options::{Batching, LoaderOptions, MAX_PREFETCH};
use super::read_ahead::ReadAhead;
use super::reader::SequenceLocation;
use super::shuffle::Shuffle;
use super::state::{
    Base, Deal, JOINED_VERSION, LoaderState, STATE_VERSION, Subject, locality_version, resume_point,
};
use crate::batch::Batch;
use crate::tensor::LodTensor;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

/// A mini-batch: the sequences' ids (dataset order numbers, as
/// [`Dataset::sequence`](super::Dataset::sequence) takes) and their tensors, merged in schema order.
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
    walk: Walk,
    group: Group,
    drop_last: bool,
    cache: BatchCache,
    ahead: ReadAhead,
    carry: Option<Fetched>,
    done: bool,
    stop: Arc<AtomicBool>,
}

/// How a consumer finds its next sequence: round robin's walk of the
/// whole order, or its block in the locality partition.
enum Walk {
    RoundRobin(Box<RoundRobinWalk>),
    Locality(Box<LocalityWalk>),
}

/// One consumer's walk of the round-robin deal (section 7.1).
struct RoundRobinWalk {
    feed: Feed,
    epoch: u64,
    base: Base,
    consumers: u64,
    /// The next tail index to take, and the end of this consumer's indices.
    next_index: u64,
    end: u64,
    tail_len: u64,
    /// The walk of the epoch's order from the base.
    tail: Tail,
    shuffle: Option<Shuffle>,
    stop: Arc<AtomicBool>,
}

impl Producer {
    /// The next sequence of the consumer's share.
    fn next_location(&mut self) -> Option<Result<(usize, SequenceLocation)>> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        match &mut self.walk {
            Walk::RoundRobin(w) => w.next_location(),
            Walk::Locality(w) => w.next_location().map(|r| r.map(|at| (0, at))),
        }
    }
}

impl RoundRobinWalk {
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
            let Some(item) = self.tail.next() else {
                // Walking to a far frontier takes a while: the walk ends
                // early when the loader stops.
                if self.stop.load(Ordering::Relaxed) {
                    return None;
                }
                return Some(Err(DatasetError::Loader(format!(
                    "the epoch order ended at position {} before tail index {target}",
                    self.tail.position()
                ))));
            };
            if item.index == target {
                return Some(Ok((item.source, item.at)));
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
}

impl Producer {
    /// The next location, in order, after looking ahead in the order and
    /// asking for the batches there ([`ReadAhead`]).
    fn next_ahead(&mut self) -> Option<Result<(usize, SequenceLocation)>> {
        if !self.ahead.enabled() {
            return self.next_location();
        }
        let mut taken = false;
        while self.ahead.wants_more() {
            match self.next_location() {
                None => self.ahead.end(),
                Some(item) => {
                    let cache = &self.cache;
                    self.ahead.push(&self.feed, item, |key| cache.contains(key));
                    taken = true;
                }
            }
        }
        if taken {
            self.ahead.ask(&self.feed);
        }
        self.ahead.pop()
    }

    fn fetch(&mut self, (source, at): (usize, SequenceLocation)) -> Result<Fetched> {
        let Some(dataset) = self.feed.source(source) else {
            return Err(DatasetError::Loader(format!(
                "the order names source {source}, which the loader does not have"
            )));
        };
        let id = self.feed.id_of(source, at);
        let key = (source, at.shard, at.batch);
        let (columns, held) = self
            .cache
            .get_or_load(key, || dataset.batch_columns_held(at.shard, at.batch))?;
        self.ahead.read(key);
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
            let at = match self.next_ahead() {
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

/// One consumer's stream of mini-batches (see the module docs): what a
/// [`Loader`](super::Loader) without packing is, and what packing reads
/// its windows from.
pub(crate) struct Stream {
    feed: Feed,
    /// The number of positions of the epoch's stream (`N`).
    n: u64,
    options: LoaderOptions,
    group: Group,
    epoch: u64,
    /// The deal of the epoch's positions (the base of round robin's tail,
    /// or the locality partition's ranges).
    deal: Deal,
    consumers: u64,
    consumer: u64,
    /// The positions of the tail this consumer had consumed when the epoch
    /// (or the resume) started, and those delivered since.
    start: u64,
    delivered: u64,
    source: Source,
    /// The cursor of the state it resumed from (7.3), for the walk's start.
    cursor: Option<OrderCursor>,
    /// The snapshots of round robin's walk of a shuffled order, for
    /// [`Stream::state`]'s cursor.
    snapshots: Option<Arc<Snapshots>>,
    /// What the epochs after this one read, when it differs from `feed`
    /// (a dataset that grew since the state this epoch resumed, 7.3).
    later: Option<Feed>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("epoch", &self.epoch)
            .field("consumer", &self.consumer)
            .field("consumers", &self.consumers)
            .field("delivered", &(self.start + self.delivered))
            .finish()
    }
}

impl Stream {
    /// The stream of `feed` for `options`' consumer, at the start of epoch
    /// `epoch`, or resumed from `state` (then `epoch` is the state's).
    pub(crate) fn build(
        feed: Feed,
        options: LoaderOptions,
        epoch: u64,
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
        let (epoch, deal, start) = match state {
            None => (
                epoch,
                Deal::start(feed.partition(&options)?, feed.len(epoch), consumers),
                0,
            ),
            Some(state) => resume_point(
                &feed,
                &options,
                (consumers, consumer),
                options.partition,
                state,
            )?,
        };
        feed.check_partition(deal.partition(), &options)?;
        let n = feed.len(epoch);
        let mut loader = Stream {
            feed,
            n,
            options,
            group,
            epoch,
            deal,
            consumers,
            consumer,
            start,
            delivered: 0,
            source: Source::Done,
            cursor: state.and_then(|s| s.cursor.clone()),
            snapshots: None,
            later: None,
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
        self.snapshots = None;
        let walk = match &self.deal {
            Deal::RoundRobin(base) => {
                let next_index = self.next_tail_index();
                let snapshots = Arc::new(Snapshots::new(next_index));
                let tail = self
                    .feed
                    .tail_from(
                        self.epoch,
                        self.options.shuffle,
                        base.clone(),
                        self.cursor.as_ref(),
                        next_index,
                    )?
                    .with_stop(stop.clone())
                    .with_snapshots(snapshots.clone());
                self.snapshots = Some(snapshots);
                Walk::RoundRobin(Box::new(RoundRobinWalk {
                    feed: self.feed.clone(),
                    epoch: self.epoch,
                    base: base.clone(),
                    consumers: self.consumers,
                    next_index,
                    end: base.end(n, self.consumers, self.options.remainder),
                    tail_len: base.tail_len(n),
                    tail,
                    shuffle,
                    stop: stop.clone(),
                }))
            }
            Deal::Locality(ranges) => Walk::Locality(Box::new(LocalityWalk::new(
                ranges.clone(),
                self.feed
                    .window_order(self.epoch, shuffle, ranges.blocks())?,
                (self.consumers, self.consumer),
                self.options.remainder,
                self.start,
            ))),
        };
        let producer = Producer {
            feed: self.feed.clone(),
            epoch: self.epoch,
            walk,
            group: self.group,
            drop_last: self.options.drop_last,
            cache: BatchCache::new(self.options.cache_bytes),
            ahead: ReadAhead::new(self.options.read_ahead_bytes),
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

    /// The tail index this consumer delivers next (round robin, 7.1).
    fn next_tail_index(&self) -> u64 {
        let counted = self.start.saturating_add(self.delivered);
        self.consumer
            .saturating_add(counted.saturating_mul(self.consumers))
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

    /// What the stream reads.
    pub(crate) fn feed(&self) -> &Feed {
        &self.feed
    }

    /// The current epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The epochs after this one read `later` (when given).
    pub(crate) fn then_read(&mut self, later: Option<Feed>) {
        self.later = later;
    }

    /// Starts epoch `epoch` from its beginning (a new order when shuffling).
    pub(crate) fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        self.stop_source();
        if let Some(feed) = self.later.take() {
            self.feed = feed;
        }
        self.epoch = epoch;
        self.n = self.feed.len(epoch);
        self.deal = Deal::start(self.deal.partition(), self.n, self.consumers);
        self.start = 0;
        self.delivered = 0;
        self.cursor = None;
        self.start_source()
    }

    /// The number of sequences this loader will still deliver in this epoch
    /// (before [`LoaderOptions::drop_last`] drops a short last mini-batch).
    pub(crate) fn remaining(&self) -> u64 {
        self.deal
            .share(
                self.n,
                self.consumers,
                self.consumer,
                self.options.remainder,
            )
            .saturating_sub(self.start + self.delivered)
    }

    /// Where the stream is: what it has delivered (never what it has only
    /// prefetched), with the cursor of its order (7.3).
    pub(crate) fn state(&self) -> LoaderState {
        LoaderState {
            cursor: self.cursor(),
            ..self.state_without_cursor()
        }
    }

    /// [`Stream::state`] without its cursor (cheap: no buffer copied).
    pub(crate) fn state_without_cursor(&self) -> LoaderState {
        let (version, frontier, skip, ranges) = match &self.deal {
            Deal::RoundRobin(base) if self.feed.joined().is_some() => {
                (JOINED_VERSION, base.frontier, base.skip.clone(), None)
            }
            Deal::RoundRobin(base) => (STATE_VERSION, base.frontier, base.skip.clone(), None),
            Deal::Locality(r) => (
                locality_version(r.blocks()),
                r.first(self.n),
                Vec::new(),
                Some(r.to_state()),
            ),
        };
        let blocks = match &self.deal {
            Deal::Locality(r) if r.blocks() > 1 => Some(r.blocks()),
            _ => None,
        };
        LoaderState {
            version,
            sequences: self.n,
            fingerprint: self.feed.fingerprint(),
            shuffle: self.options.shuffle,
            remainder: self.options.remainder,
            epoch: self.epoch,
            frontier,
            skip,
            consumers: self.consumers,
            consumed: [(self.consumer, self.start + self.delivered)].into(),
            mixture: self.feed.mixture_state(self.epoch),
            packing: None,
            ranges,
            blocks,
            cursor: None,
            joined: self.feed.joined(),
        }
    }

    /// The cursor [`Stream::state`] holds (7.3): converted to ids on each
    /// call, so a caller that saves a state after every mini-batch asks
    /// for it only when [`Stream::cursor_position`] changes.
    pub(crate) fn cursor(&self) -> Option<OrderCursor> {
        let snapshot = self.snapshots.as_ref()?.best()?;
        self.feed.cursor_of(&snapshot, self.epoch)
    }

    /// The position of the cursor [`Stream::state`] holds (cheap).
    pub(crate) fn cursor_position(&self) -> Option<u64> {
        Some(self.snapshots.as_ref()?.best()?.position)
    }

    /// The ids of the sequences this consumer still delivers in the epoch,
    /// in order (`f(id)` each), from its walk alone: no batch is read. For
    /// a stream without a prefetch thread (`prefetch: 0`); the dry run of
    /// `lodt state check` (`resume_check.rs`).
    pub(crate) fn walk_ids(&mut self, mut f: impl FnMut(u64)) -> Result<()> {
        let Source::Inline(producer) = &mut self.source else {
            return Err(DatasetError::InvalidArgument(
                "walking a consumer's ids needs a stream without a prefetch thread (prefetch 0)"
                    .into(),
            ));
        };
        while let Some(item) = producer.next_location() {
            let (source, at) = item?;
            f(producer.feed.id_of(source, at));
        }
        Ok(())
    }
}

impl Iterator for Stream {
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
            Some(Ok(batch)) => {
                self.delivered += batch.ids.len() as u64;
                if let Some(s) = &self.snapshots {
                    s.set_needed(self.next_tail_index());
                }
            }
            Some(Err(_)) | None => self.stop_source(),
        }
        item
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.stop_source();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Lod;
    use crate::dataset::Dataset;

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
        let mut loader = Stream::build(Feed::from(dataset(dir.path())), options, 0, None).unwrap();
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
        let mut loader = Stream::build(Feed::from(dataset(dir.path())), options, 0, None).unwrap();
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
        for b in Stream::build(Feed::from(dataset.clone()), options.clone(), 0, None).unwrap() {
            let b = b.unwrap();
            first.push(b.batch.get("x").unwrap().as_bytes().as_ptr() as usize);
        }
        // Each mini-batch was dropped before the next was gathered: one
        // region served both.
        assert_eq!(first, vec![first[0]; 2]);
        assert_eq!(dataset.buffers().free_regions(), 1);
        assert!(dataset.buffers().keep() >= 3);
        let mut second = Stream::build(Feed::from(dataset.clone()), options, 0, None).unwrap();
        let b = second.next().unwrap().unwrap();
        assert_eq!(
            b.batch.get("x").unwrap().as_bytes().as_ptr() as usize,
            first[0]
        );
        assert_eq!(dataset.buffers().free_regions(), 0);
        assert_eq!(b.batch, dataset.take(&b.ids).unwrap());
    }
}
