//! The loader's read-ahead: the epoch order says which file batches a
//! consumer's next sequences are in, so the loader looks ahead in it and asks
//! the shards' sources for those batches' bytes
//! ([`RangeSource::will_gather`](crate::format::RangeSource::will_gather)),
//! up to a budget of bytes, before it reads them. An object store then has
//! many requests in flight (merged where batches are adjacent) while earlier
//! sequences are handed out, in order.
//!
//! Only sources that copy (object stores, positional reads) are asked; a
//! memory-mapped shard is served by its map, and the look-ahead over a
//! consumer that has met only such shards stays a few positions long.

use super::batch_cache::Key;
use super::error::Result;
use super::feed::Feed;
use super::reader::SequenceLocation;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Range;

/// The most positions looked ahead (a bound on the queue however small the
/// batches are).
const MAX_AHEAD: usize = 1 << 16;

/// The positions looked ahead while no batch needed asking for.
const SHORT_AHEAD: usize = 64;

/// The most shards opened at once to learn where their batches are.
const OPEN_AT_ONCE: usize = 16;

/// One consumer's look-ahead: the positions taken from the order and not yet
/// read, and the batches asked for and not yet read.
#[derive(Debug, Default)]
pub(super) struct ReadAhead {
    budget: u64,
    /// Locations taken from the order, in order, not yet handed out.
    queue: VecDeque<Result<(usize, SequenceLocation)>>,
    /// Batches asked for and not yet read, with their bytes.
    asked: HashMap<Key, u64>,
    bytes: u64,
    /// Whether any batch needed asking for.
    copying: bool,
    /// Whether the order has ended.
    ended: bool,
    /// Batches whose shard is not open yet (opened together, then asked).
    unopened: Vec<Key>,
    /// Batches counted and not asked for yet, with their file ranges.
    to_ask: Vec<(Key, Range<u64>)>,
}

impl ReadAhead {
    /// A look-ahead of at most `budget` bytes asked for (0: none).
    pub(super) fn new(budget: usize) -> Self {
        ReadAhead {
            budget: budget as u64,
            ..Default::default()
        }
    }

    /// Whether the look-ahead is on.
    pub(super) fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// Whether another position should be taken from the order.
    pub(super) fn wants_more(&self) -> bool {
        let limit = if self.copying { MAX_AHEAD } else { SHORT_AHEAD };
        !self.ended && self.queue.len() < limit && self.bytes < self.budget
    }

    /// The order has ended.
    pub(super) fn end(&mut self) {
        self.ended = true;
    }

    /// The next location, in order.
    pub(super) fn pop(&mut self) -> Option<Result<(usize, SequenceLocation)>> {
        self.queue.pop_front()
    }

    /// Queues location `item`; `cached`: whether its batch is in the
    /// loader's cache (nothing to ask for).
    pub(super) fn push(
        &mut self,
        feed: &Feed,
        item: Result<(usize, SequenceLocation)>,
        cached: impl Fn(Key) -> bool,
    ) {
        if let Ok((source, at)) = &item {
            let key = (*source, at.shard, at.batch);
            if !self.asked.contains_key(&key) && !cached(key) {
                match feed.source(*source) {
                    Some(d) if !d.shard_opened(at.shard) => self.unopened.push(key),
                    Some(_) => self.consider(feed, key),
                    None => {}
                }
            }
        }
        self.queue.push_back(item);
        if self.unopened.len() >= OPEN_AT_ONCE {
            self.open_unopened(feed);
        }
    }

    /// Opens the shards of the batches waiting for them, concurrently (on an
    /// object store each open is a request or two), then considers the
    /// batches. An open that fails is left to the read (which reports it).
    fn open_unopened(&mut self, feed: &Feed) {
        let keys = std::mem::take(&mut self.unopened);
        let shards: HashSet<(usize, usize)> = keys.iter().map(|k| (k.0, k.1)).collect();
        std::thread::scope(|scope| {
            for (source, shard) in &shards {
                if let Some(d) = feed.source(*source) {
                    scope.spawn(move || {
                        let _ = d.shard(*shard);
                    });
                }
            }
        });
        for key in keys {
            if !self.asked.contains_key(&key) {
                self.consider(feed, key);
            }
        }
    }

    /// Counts batch `key` as asked for if its shard is open and copies.
    fn consider(&mut self, feed: &Feed, key: Key) {
        let Some(d) = feed.source(key.0) else { return };
        let Ok(file) = d.shard(key.1) else { return };
        if file.has_whole() {
            return; // mapped, or in memory: nothing to fetch
        }
        let Ok(range) = file.batch_range(key.2) else {
            return;
        };
        self.copying = true;
        self.bytes = self.bytes.saturating_add(range.end - range.start);
        self.asked.insert(key, range.end - range.start);
        self.to_ask.push((key, range));
    }

    /// Asks the sources for the batches counted since the last call, one
    /// call per shard with its ranges in offset order.
    pub(super) fn ask(&mut self, feed: &Feed) {
        if !self.unopened.is_empty() {
            self.open_unopened(feed);
        }
        let mut by_shard: BTreeMap<(usize, usize), Vec<Range<u64>>> = BTreeMap::new();
        for (key, range) in self.to_ask.drain(..) {
            by_shard.entry((key.0, key.1)).or_default().push(range);
        }
        for ((source, shard), mut ranges) in by_shard {
            let Some(d) = feed.source(source) else {
                continue;
            };
            let Ok(file) = d.shard(shard) else { continue };
            ranges.sort_unstable_by_key(|r| r.start);
            ranges.dedup();
            file.source().will_gather(&ranges);
        }
    }

    /// Batch `key` was read (or found in the cache): its bytes are the
    /// cache's now.
    pub(super) fn read(&mut self, key: Key) {
        if let Some(n) = self.asked.remove(&key) {
            self.bytes = self.bytes.saturating_sub(n);
        }
    }
}
