//! `lodt state check` (Python's `lodt.check_state`): a dry run of the rest
//! of an epoch from a saved loader state, ids only, that proves every
//! remaining sequence is delivered exactly once and none delivered before the
//! state is delivered again ([`ResumeCheck`]).
//!
//! Two sides that share no dealing code. What was delivered before the state
//! is read from the state as `spec/DATASET.md` 7.1–7.3 and 7.6 say (the
//! positions before the frontier, the skip list, each consumer's first
//! `consumed` tail indices; or the positions outside the locality ranges and
//! each block's first `consumed`), over one walk of the epoch's order. What a
//! resumed run delivers comes from the loader itself: each new consumer's
//! stream, built from the state as [`Loader::resume`](super::Loader::resume)
//! builds it, drained of its walk into ids without reading a batch. Both are
//! kept as bitmaps of the dataset's `N` sequences.

use super::checkpoint::Checkpoint;
use super::error::{DatasetError, Result};
use super::feed::Feed;
use super::locality::MAX_BLOCKS;
use super::options::{LoaderOptions, Partition, Remainder};
use super::shuffle::Shuffle;
use super::state::{LoaderState, Subject};
use super::stream::Stream;
use serde::Serialize;
use std::time::Instant;

/// The most consumers a check deals to (as many as the locality partition's
/// blocks): each is a stream walked in turn.
const MAX_CONSUMERS: u64 = MAX_BLOCKS;

/// What is wrong with one sequence of a resumed epoch.
///
/// ```
/// use lodt::dataset::Fault;
/// assert_eq!(serde_json::to_value(Fault::Skipped)?, "skipped");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Delivered before the state, and by the resumed run again.
    Again,
    /// Delivered twice by the resumed run.
    Twice,
    /// Delivered neither before the state nor by the resumed run (beyond
    /// what `drop` drops).
    Skipped,
}

/// The first sequence a check found wrong.
///
/// ```
/// use lodt::dataset::{Fault, Offence};
/// let o = Offence { id: 7, fault: Fault::Twice, consumer: Some(2) };
/// assert_eq!(o.to_string(), "sequence 7 is delivered twice by the resumed run (the second time by consumer 2)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Offence {
    /// The sequence's id.
    pub id: u64,
    /// What is wrong with it.
    pub fault: Fault,
    /// The consumer of the resumed run that delivered it again (`None` for a
    /// skipped one).
    pub consumer: Option<u64>,
}

impl std::fmt::Display for Offence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let by = self
            .consumer
            .map(|c| format!(" (the second time by consumer {c})"))
            .unwrap_or_default();
        match self.fault {
            Fault::Again => write!(
                f,
                "sequence {} was delivered before the state and is delivered again{by}",
                self.id
            ),
            Fault::Twice => write!(
                f,
                "sequence {} is delivered twice by the resumed run{by}",
                self.id
            ),
            Fault::Skipped => write!(
                f,
                "sequence {} was not delivered before the state and the resumed run never delivers it",
                self.id
            ),
        }
    }
}

/// The report of a dry run of the rest of an epoch from a saved state
/// ([`ResumeCheck::run`]): the epoch's sequences, those delivered before the
/// state, what each consumer of the resumed run delivers, and what is wrong.
///
/// ```
/// # use lodt::dataset::*;
/// # use lodt::{Batch, Lod, LodTensor};
/// # let dir = tempfile::tempdir()?;
/// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// # let x = LodTensor::from_vec((0..10i32).collect(), vec![10], Lod::try_from_lengths(&[vec![1; 10]])?)?;
/// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
/// # w.finish()?;
/// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
/// let options = LoaderOptions { batching: Batching::Sequences(3), ..Default::default() };
/// let mut loader = Loader::new(dataset.clone(), options)?;
/// loader.next().unwrap()?;
/// let check = ResumeCheck::run(dataset, &loader.state(), None, None)?;
/// assert!(check.holds);
/// assert_eq!((check.sequences, check.delivered_before, check.per_consumer), (10, 3, vec![7]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeCheck {
    /// The state's epoch.
    pub epoch: u64,
    /// `"round_robin"` or `"locality"`.
    pub partition: String,
    /// The epoch's sequences (`N`).
    pub sequences: u64,
    /// The consumers the state was saved with.
    pub state_consumers: u64,
    /// The world the check resumes on: ranks, and workers per rank.
    pub world_size: u64,
    /// Workers (consumers) per rank.
    pub workers: u64,
    /// Sequences delivered before the state, as the state says.
    pub delivered_before: u64,
    /// `sequences − delivered_before`.
    pub remaining: u64,
    /// Per consumer of the resumed run (`rank × workers + worker`), the
    /// sequences it delivers (repeats included).
    pub per_consumer: Vec<u64>,
    /// Their sum.
    pub delivered: u64,
    /// Sequences delivered again beyond what `repeat` allows (failures).
    pub repeated: u64,
    /// Remaining sequences never delivered, beyond what `drop` drops
    /// (failures).
    pub skipped: u64,
    /// Remaining sequences that `drop` drops (expected).
    pub dropped: u64,
    /// Deliveries that `repeat` adds (expected).
    pub repeats: u64,
    /// The first sequence found wrong: delivered again (in dry-run order,
    /// consumer by consumer) or, if none is, the lowest id skipped.
    pub first_offence: Option<Offence>,
    /// Whether every remaining sequence is delivered exactly once (less the
    /// drops, plus the repeats) and none delivered before again.
    pub holds: bool,
    /// The time the check took, in seconds.
    pub seconds: f64,
}

impl ResumeCheck {
    /// Checks a resume from `value` (a loader state, 7.2, or a rank's
    /// checkpoint, 7.5, as [`StateReport::of_json`](super::StateReport::of_json)
    /// reads it) on `feed`: see [`ResumeCheck::run`].
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = Dataset::open(dir.path())?;
    /// let state = serde_json::json!({"version": 1, "loader": {"version": 1, "sequences": 0,
    ///     "fingerprint": dataset.fingerprint(), "shuffle": null, "remainder": "keep", "epoch": 0,
    ///     "frontier": 0, "skip": [], "consumers": 1, "consumed": {"0": 0}}});
    /// assert!(ResumeCheck::of_json(dataset, &state, None, None)?.holds);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn of_json(
        feed: impl Into<Feed>,
        value: &serde_json::Value,
        world_size: Option<u64>,
        workers: Option<u64>,
    ) -> Result<ResumeCheck> {
        let checkpoint = Checkpoint::from_json(value)?;
        Self::run(feed, &checkpoint.loader, world_size, workers)
    }

    /// Dry-runs the rest of `state`'s epoch on `feed`, resumed on
    /// `world_size` ranks of `workers` consumers each (both `None`: the
    /// world the state was saved at; only `workers`: the state's consumers
    /// split into ranks of that many; only `world_size`: one worker each).
    /// The state must be complete (every consumer's count, merged). No
    /// tensor byte is read.
    ///
    /// Errors: a state the loader would refuse (another dataset, a bad base
    /// or count), one that is not complete, a packing loader's or a
    /// mixture's state (not supported), or a world of 0 or more than 2^24
    /// consumers. A resume that does not hold is not an error: see
    /// [`ResumeCheck::holds`] and [`ResumeCheck::first_offence`].
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..10i32).collect(), vec![10], Lod::try_from_lengths(&[vec![1; 10]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// // Two consumers deliver 4 and 2 (drop: 5 each at most), then the job restarts on three.
    /// let state = LoaderState::from_json(&serde_json::json!({"version": 1, "sequences": 10,
    ///     "fingerprint": dataset.fingerprint(), "shuffle": null, "remainder": "drop", "epoch": 0,
    ///     "frontier": 0, "skip": [], "consumers": 2, "consumed": {"0": 4, "1": 2}}))?;
    /// let check = ResumeCheck::run(dataset, &state, Some(3), None)?;
    /// assert!(check.holds);
    /// // 4 left, 3 consumers: 1 each, the last one dropped.
    /// assert_eq!((check.remaining, check.per_consumer, check.dropped), (4, vec![1, 1, 1], 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run(
        feed: impl Into<Feed>,
        state: &LoaderState,
        world_size: Option<u64>,
        workers: Option<u64>,
    ) -> Result<ResumeCheck> {
        let started = Instant::now();
        let feed = feed.into();
        // A dataset appended to since: the state's epoch is its first shards'.
        let feed = feed.for_state(state)?.unwrap_or(feed);
        let world = world(state, world_size, workers)?;
        let streams = streams(&feed, state, world)?;
        let before = Before::of(&feed, state)?;
        let mut check = dry_run(&feed, state, world, before, streams)?;
        check.seconds = started.elapsed().as_secs_f64();
        Ok(check)
    }
}

/// The world a check resumes on, `(ranks, workers)`, from the options given.
fn world(state: &LoaderState, world_size: Option<u64>, workers: Option<u64>) -> Result<(u64, u64)> {
    let bad = |m: String| Err(DatasetError::InvalidArgument(m));
    let (w, k) = match (world_size, workers) {
        (None, None) => (state.consumers, 1),
        (Some(w), None) => (w, 1),
        (Some(w), Some(k)) => (w, k),
        (None, Some(k)) if k > 0 && state.consumers.is_multiple_of(k) => (state.consumers / k, k),
        (None, Some(k)) => {
            return bad(format!(
                "{k} workers per rank: the state's {} consumers are not ranks of {k} workers (give the world size too)",
                state.consumers
            ));
        }
    };
    match w.checked_mul(k) {
        Some(c) if (1..=MAX_CONSUMERS).contains(&c) => Ok((w, k)),
        _ => bad(format!(
            "world size {w} with {k} workers per rank: a check deals to 1 to {MAX_CONSUMERS} consumers"
        )),
    }
}

/// Refuses what a check does not cover, saying so.
fn refuse_unsupported(feed: &Feed, state: &LoaderState) -> Result<()> {
    let unsupported = |m: &str| Err(DatasetError::InvalidArgument(m.to_string()));
    if state.packing.is_some() {
        return unsupported(
            "it is a packing loader's state (version 2 or 3): state check dry-runs loaders of whole sequences, not packing's windows",
        );
    }
    if state.mixture.is_some() || feed.mixture().is_some() {
        return unsupported(
            "a mixture's state: a mixture's stream may hold a source's sequence more than once, so state check (whose ids name positions) reads a single dataset's state",
        );
    }
    if let Some(missing) = (0..state.consumers).find(|c| !state.consumed.contains_key(c)) {
        return Err(DatasetError::BadState {
            reason: format!(
                "it holds no count for consumer {missing} of its {}: state check needs every consumer's count (merge the ranks' states: LoaderState::merge, lodt.merge_checkpoints)",
                state.consumers
            ),
        });
    }
    Ok(())
}

/// The streams of the resumed run, one per consumer, as the loader builds
/// them (which checks the state against the feed).
fn streams(feed: &Feed, state: &LoaderState, (w, k): (u64, u64)) -> Result<Vec<Stream>> {
    refuse_unsupported(feed, state)?;
    let too_big = |_| {
        DatasetError::InvalidArgument(format!(
            "world size {w} × {k} workers: each must fit this machine's usize"
        ))
    };
    let (world_size, num_workers) = (
        usize::try_from(w).map_err(too_big)?,
        usize::try_from(k).map_err(too_big)?,
    );
    let mut out = Vec::new();
    for c in 0..world_size.saturating_mul(num_workers) {
        let options = LoaderOptions {
            shuffle: state.shuffle,
            remainder: state.remainder,
            rank: c / num_workers,
            world_size,
            worker: c % num_workers,
            num_workers,
            prefetch: 0,
            read_ahead_bytes: 0,
            cache_bytes: 0,
            ..Default::default()
        };
        out.push(Stream::build(
            feed.clone(),
            options,
            state.epoch,
            Some(state),
        )?);
    }
    Ok(out)
}

/// A set of sequence ids below `N`.
struct Bitmap {
    words: Vec<u64>,
    len: u64,
}

impl Bitmap {
    /// An empty set of ids below `len` (the dataset's sequences).
    fn new(len: u64) -> Result<Self> {
        let n = usize::try_from(len.div_ceil(64)).unwrap_or(usize::MAX);
        let mut words = Vec::new();
        words.try_reserve_exact(n).map_err(|_| {
            DatasetError::InvalidArgument(format!("cannot allocate a bitmap of {len} sequences"))
        })?;
        words.resize(n, 0);
        Ok(Bitmap { words, len })
    }

    fn contains(&self, id: u64) -> bool {
        self.words
            .get((id / 64) as usize)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// Adds `id`: false if it was there already.
    fn insert(&mut self, id: u64) -> Result<bool> {
        let len = self.len;
        let Some(w) = self.words.get_mut((id / 64) as usize).filter(|_| id < len) else {
            return Err(DatasetError::Loader(format!(
                "the epoch order names sequence {id}, past the dataset's {len}"
            )));
        };
        let bit = 1 << (id % 64);
        let fresh = *w & bit == 0;
        *w |= bit;
        Ok(fresh)
    }
}

/// What the state says was delivered before it.
struct Before {
    ids: Bitmap,
    count: u64,
    /// The length of the tail the state's own deal deals (7.1, 7.6).
    tail: u64,
    /// The repeats the state's consumers delivered (`repeat`).
    repeats: u64,
}

/// The state's counts, one per consumer (a complete state: as many as its
/// `consumed` holds).
fn counts(state: &LoaderState) -> Vec<u64> {
    state.consumed.values().copied().collect()
}

impl Before {
    /// The sequences `state` says were delivered: 7.3's consumed positions
    /// (round robin) or 7.6's (locality), over one walk of the epoch order.
    fn of(feed: &Feed, state: &LoaderState) -> Result<Before> {
        let n = feed.len(state.epoch);
        let mut before = Before {
            ids: Bitmap::new(n)?,
            count: 0,
            tail: 0,
            repeats: 0,
        };
        let mut seen = Bitmap::new(n)?;
        let mut mark = |id: u64, delivered: bool| -> Result<()> {
            if !seen.insert(id)? {
                return Err(DatasetError::Loader(format!(
                    "the epoch order holds sequence {id} twice"
                )));
            }
            if delivered {
                before.ids.insert(id)?;
                before.count += 1;
            }
            Ok(())
        };
        let (tail, repeats) = match &state.ranges {
            None => round_robin_before(feed, state, &mut mark)?,
            Some(ranges) => locality_before(feed, state, ranges, &mut mark)?,
        };
        before.tail = tail;
        before.repeats = repeats;
        Ok(before)
    }
}

/// Round robin (7.1, 7.3): `mark(id, delivered)` for each position of the
/// order; returns the tail's length and the repeats delivered.
fn round_robin_before(
    feed: &Feed,
    state: &LoaderState,
    mark: &mut impl FnMut(u64, bool) -> Result<()>,
) -> Result<(u64, u64)> {
    let c_old = state.consumers;
    let counts = counts(state);
    let whole = LoaderState {
        frontier: 0,
        skip: Vec::new(),
        ..state.clone()
    };
    let (mut skip, mut tail) = (state.skip.iter().peekable(), 0u64);
    feed.walk(&whole, |_, p, id| {
        let delivered = p < state.frontier || skip.next_if_eq(&&p).is_some() || {
            let (c, j) = (tail % c_old, tail / c_old);
            tail += 1;
            counts.get(c as usize).is_some_and(|&k| j < k)
        };
        mark(id, delivered)?;
        Ok(true)
    })?;
    // Consumer c's tail indices below L: c, c + C, …
    let repeats = counts
        .iter()
        .zip(0u64..)
        .map(|(&k, c)| k.saturating_sub(tail.saturating_sub(c).div_ceil(c_old)))
        .sum();
    Ok((tail, repeats))
}

/// The locality partition (7.6): `mark(id, delivered)` for each position of
/// the order; returns the ranges' length and the repeats delivered.
fn locality_before(
    feed: &Feed,
    state: &LoaderState,
    ranges: &[[u64; 2]],
    mark: &mut impl FnMut(u64, bool) -> Result<()>,
) -> Result<(u64, u64)> {
    let n = feed.len(state.epoch);
    let len: u64 = ranges.iter().map(|r| r[1].saturating_sub(r[0])).sum();
    let blocks = Blocks::new(len, counts(state));
    let shuffle = state.shuffle.map(|s| Shuffle {
        seed: s.seed,
        buffer: s.buffer,
    });
    let mut order = feed.window_order(state.epoch, shuffle, state.blocks.unwrap_or(1))?;
    let (mut next, mut tail) = (ranges.iter().peekable(), 0u64);
    let mut blocks = blocks;
    for p in 0..n {
        while next.next_if(|r| r[1] <= p).is_some() {}
        let in_ranges = next.peek().is_some_and(|r| r[0] <= p);
        let delivered = !in_ranges || {
            tail += 1;
            blocks.consumed(tail - 1)
        };
        mark(feed.id_of(0, order.at(p)?), delivered)?;
    }
    Ok((len, blocks.repeats()))
}

/// The locality partition's blocks of tail indices (7.6), walked in order.
struct Blocks {
    len: u64,
    counts: Vec<u64>,
    /// The consumer whose block holds the last index asked about.
    c: usize,
}

impl Blocks {
    fn new(len: u64, counts: Vec<u64>) -> Self {
        Blocks { len, counts, c: 0 }
    }

    /// `floor(c·L / C)`.
    fn start(&self, c: usize) -> u64 {
        let consumers = self.counts.len().max(1) as u128;
        (c as u128 * u128::from(self.len) / consumers) as u64
    }

    /// Whether tail index `t` (asked in increasing order) is among the
    /// first `consumed` of its block.
    fn consumed(&mut self, t: u64) -> bool {
        while self.c + 1 < self.counts.len() && self.start(self.c + 1) <= t {
            self.c += 1;
        }
        let lo = self.start(self.c);
        self.counts.get(self.c).is_some_and(|&k| t - lo < k)
    }

    /// The deliveries beyond each block's length (repeats).
    fn repeats(&self) -> u64 {
        (0..self.counts.len())
            .map(|c| {
                let block = self.start(c + 1) - self.start(c);
                self.counts[c].saturating_sub(block)
            })
            .sum()
    }
}

/// The deal's expected drops and repeats of a tail of `tail` sequences
/// dealt to `consumers` under `remainder` (7.1, 7.6: the same counts in
/// both partitions).
fn allowance(remainder: Remainder, tail: u64, consumers: u64) -> (u64, u64) {
    match remainder {
        Remainder::Keep => (0, 0),
        Remainder::Drop => (tail % consumers, 0),
        Remainder::Repeat => (0, tail.div_ceil(consumers) * consumers - tail),
    }
}

/// The tally of the resumed run's deliveries.
struct Tally {
    delivered: Bitmap,
    per_consumer: Vec<u64>,
    repeated: u64,
    repeats: u64,
    repeats_allowed: u64,
    first: Option<Offence>,
}

impl Tally {
    fn deliver(&mut self, before: &Before, consumer: u64, id: u64) -> Result<()> {
        if let Some(n) = self.per_consumer.last_mut() {
            *n += 1;
        }
        let fault = if before.ids.contains(id) {
            Fault::Again
        } else if !self.delivered.insert(id)? {
            Fault::Twice
        } else {
            return Ok(());
        };
        if self.repeats < self.repeats_allowed {
            self.repeats += 1;
            return Ok(());
        }
        self.repeated += 1;
        self.first.get_or_insert(Offence {
            id,
            fault,
            consumer: Some(consumer),
        });
        Ok(())
    }

    /// The remaining ids never delivered: how many, and the lowest.
    fn missing(&self, before: &Before) -> (u64, Option<u64>) {
        let (mut count, mut first) = (0u64, None);
        for (k, (&b, &d)) in before
            .ids
            .words
            .iter()
            .zip(&self.delivered.words)
            .enumerate()
        {
            let mut gap = !(b | d);
            let base = k as u64 * 64;
            if base + 64 > before.ids.len {
                gap &= (1u64 << (before.ids.len - base)).wrapping_sub(1);
            }
            if gap != 0 {
                first.get_or_insert(base + u64::from(gap.trailing_zeros()));
                count += u64::from(gap.count_ones());
            }
        }
        (count, first)
    }
}

/// Drains each consumer's stream into the tally, and reports.
fn dry_run(
    feed: &Feed,
    state: &LoaderState,
    (w, k): (u64, u64),
    before: Before,
    streams: Vec<Stream>,
) -> Result<ResumeCheck> {
    let n = feed.len(state.epoch);
    let consumers = w * k;
    let same = consumers == state.consumers;
    let tail = if same { before.tail } else { n - before.count };
    let (dropped_allowed, repeats_all) = allowance(state.remainder, tail, consumers);
    let mut tally = Tally {
        delivered: Bitmap::new(n)?,
        per_consumer: Vec::with_capacity(streams.len()),
        repeated: 0,
        repeats: 0,
        repeats_allowed: repeats_all.saturating_sub(if same { before.repeats } else { 0 }),
        first: None,
    };
    for (c, mut stream) in (0u64..).zip(streams) {
        tally.per_consumer.push(0);
        let mut failed = Ok(());
        stream.walk_ids(|id| {
            if failed.is_ok() {
                failed = tally.deliver(&before, c, id);
            }
        })?;
        failed?;
    }
    let (missing, lowest) = tally.missing(&before);
    let dropped = missing.min(dropped_allowed);
    let skipped = missing - dropped;
    if skipped > 0 && tally.first.is_none() {
        tally.first = lowest.map(|id| Offence {
            id,
            fault: Fault::Skipped,
            consumer: None,
        });
    }
    Ok(ResumeCheck {
        epoch: state.epoch,
        partition: match state.ranges {
            Some(_) => Partition::Locality,
            None => Partition::RoundRobin,
        }
        .to_string(),
        sequences: n,
        state_consumers: state.consumers,
        world_size: w,
        workers: k,
        delivered_before: before.count,
        remaining: n - before.count,
        delivered: tally.per_consumer.iter().sum(),
        per_consumer: tally.per_consumer,
        repeated: tally.repeated,
        skipped,
        dropped,
        repeats: tally.repeats,
        holds: tally.first.is_none(),
        first_offence: tally.first,
        seconds: 0.0,
    })
}

#[cfg(test)]
mod tests {
    //! The failures: a state's "delivered before" read from a tampered copy
    //! of the state the streams resume from (any state a loader accepts is
    //! one whose two sides agree, unless the loader's dealing is wrong).
    use super::*;
    use crate::dataset::{Batching, Dataset, DatasetWriter, Loader, ShuffleOptions};
    use crate::{Batch, Lod, LodTensor};
    use std::sync::Arc;

    /// 100 sequences of one row, in batches of 10.
    fn dataset(dir: &std::path::Path) -> Arc<Dataset> {
        let mut w = DatasetWriter::create(dir, Default::default()).unwrap();
        for k in 0..10i64 {
            let lod = Lod::try_from_lengths(&[vec![1; 10]]).unwrap();
            let x =
                LodTensor::from_vec((0..10).map(|i| k * 10 + i).collect(), vec![10], lod).unwrap();
            w.write(&Batch::try_from_tensors([("x", x)]).unwrap())
                .unwrap();
        }
        w.finish().unwrap();
        Arc::new(Dataset::open(dir).unwrap())
    }

    fn options(consumer: usize, consumers: usize, shuffle: bool) -> LoaderOptions {
        LoaderOptions {
            batching: Batching::Sequences(4),
            shuffle: shuffle.then_some(ShuffleOptions { seed: 9, buffer: 8 }),
            rank: consumer,
            world_size: consumers,
            prefetch: 0,
            ..Default::default()
        }
    }

    /// The merged state of `consumers` consumers after `steps[c]` mini-batches each.
    fn saved(dataset: &Arc<Dataset>, steps: &[usize], shuffle: bool) -> LoaderState {
        let states: Vec<LoaderState> = (0..steps.len())
            .map(|c| {
                let mut l = Loader::new(dataset.clone(), options(c, steps.len(), shuffle)).unwrap();
                l.by_ref().take(steps[c]).for_each(|b| drop(b.unwrap()));
                l.state()
            })
            .collect();
        LoaderState::merge(&states).unwrap()
    }

    /// The check of resuming from `resume` on `world` ranks against what
    /// `told` says was delivered.
    fn split(feed: &Feed, told: &LoaderState, resume: &LoaderState, world: u64) -> ResumeCheck {
        let streams = streams(feed, resume, (world, 1)).unwrap();
        let before = Before::of(feed, told).unwrap();
        dry_run(feed, resume, (world, 1), before, streams).unwrap()
    }

    #[test]
    fn a_raised_count_is_a_sequence_delivered_again_and_the_check_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let dataset = dataset(dir.path());
        let feed = Feed::from(dataset.clone());
        let state = saved(&dataset, &[2, 1, 3], true);
        let mut raised = state.clone();
        raised.consumed.insert(1, 5);
        // What consumer 1 delivers next, resumed for real.
        let mut real = Loader::resume(dataset.clone(), options(1, 3, true), &state).unwrap();
        let next = real.next().unwrap().unwrap().ids[0];
        let check = split(&feed, &raised, &state, 3);
        assert!(!check.holds);
        assert_eq!(
            check.first_offence,
            Some(Offence {
                id: next,
                fault: Fault::Again,
                consumer: Some(1)
            })
        );
        assert_eq!(
            (check.delivered_before, check.repeated, check.skipped),
            (25, 1, 0)
        );
        // The other way: the streams resume from the raised count, so the
        // sequence it claims is never delivered.
        let check = split(&feed, &state, &raised, 3);
        assert_eq!(
            check.first_offence,
            Some(Offence {
                id: next,
                fault: Fault::Skipped,
                consumer: None
            })
        );
        assert_eq!((check.skipped, check.repeated), (1, 0));
        assert!(
            check
                .first_offence
                .unwrap()
                .to_string()
                .contains(&format!("sequence {next} was not delivered"))
        );
    }

    #[test]
    fn a_removed_skip_entry_is_a_skipped_sequence_and_the_check_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let dataset = dataset(dir.path());
        let feed = Feed::from(dataset.clone());
        // Out of step on 3, resumed on 2 with no step: a frontier and a skip list.
        let merged = saved(&dataset, &[1, 2, 1], false);
        let states: Vec<LoaderState> = (0..2)
            .map(|c| {
                Loader::resume(dataset.clone(), options(c, 2, false), &merged)
                    .unwrap()
                    .state()
            })
            .collect();
        let state = LoaderState::merge(&states).unwrap();
        // Tail indices 0, 3, 6, 9 (consumer 0); 1, 4, …, 22 (1); 2, 5, 8, 11
        // (2): the frontier is 12, and 13, 16, 19, 22 are skipped.
        assert_eq!(
            (state.frontier, state.skip.clone()),
            (12, vec![13, 16, 19, 22])
        );
        assert!(
            ResumeCheck::run(dataset.clone(), &state, None, None)
                .unwrap()
                .holds
        );
        let mut lost = state.clone();
        lost.skip.remove(1);
        // Unshuffled: ids are positions.
        let check = split(&feed, &lost, &state, 2);
        assert_eq!(
            check.first_offence,
            Some(Offence {
                id: 16,
                fault: Fault::Skipped,
                consumer: None
            })
        );
        // 84 left, dealt to 2.
        assert_eq!(
            (
                check.delivered_before,
                check.skipped,
                check.per_consumer.clone()
            ),
            (15, 1, vec![42, 42])
        );
    }

    #[test]
    fn a_bitmap_holds_its_ids_and_refuses_ids_past_its_end() {
        let mut b = Bitmap::new(70).unwrap();
        assert!(b.insert(69).unwrap() && !b.insert(69).unwrap());
        assert!(b.contains(69) && !b.contains(68));
        let e = b.insert(70).unwrap_err().to_string();
        assert!(e.contains("sequence 70, past the dataset's 70"), "{e}");
        assert!(Bitmap::new(u64::MAX).is_err());
    }
}
