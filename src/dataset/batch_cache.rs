//! The cache of recently read batches' tensors, one type for both users: a
//! loader's stream owns one (a shuffled epoch takes its sequences from
//! batches all over the dataset, so the cache holds many batches, and a
//! batch's tensors are built, and when compressed decoded, once rather than
//! once per sequence), and a [`Dataset`](super::Dataset) owns one behind a
//! lock for its random access (`sequence`, `take`, `sequence_arrays`).
//!
//! It is bounded by bytes: an entry costs the bytes its tensors keep alive
//! that are not the shard's map (a decoded batch, or a section read by
//! positional reads: all of it), plus [`ENTRY_BYTES`] per tensor for the
//! views themselves (all a mapped shard's batch costs). It also holds at
//! most [`MAX_ENTRIES`] batches.

use super::error::Result;
use crate::tensor::LodTensor;
use std::collections::{HashMap, VecDeque};

/// What an entry costs per tensor beyond the bytes it holds: about the size
/// of a tensor's view (its shape, LoD and buffer handles).
pub(super) const ENTRY_BYTES: usize = 256;

/// The most batches cached, whatever their size.
pub(super) const MAX_ENTRIES: usize = 4096;

/// A batch: `(source, shard, batch)`.
pub(super) type Key = (usize, usize, usize);

/// Batches, by `(source, shard, batch)`, with their tensors in schema order
/// and the bytes they hold; the oldest entries go when a new one would pass
/// the budget (or [`MAX_ENTRIES`]).
pub(super) struct BatchCache {
    entries: HashMap<Key, (Vec<LodTensor>, usize)>,
    order: VecDeque<Key>,
    budget: usize,
    held: usize,
}

impl BatchCache {
    /// An empty cache of at most `budget` bytes. A batch larger than the
    /// budget by itself is still held while it is the newest (the loader
    /// slices the sequences it needs from it).
    pub(super) fn new(budget: usize) -> Self {
        BatchCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            budget,
            held: 0,
        }
    }

    /// The tensors of batch `key` and the bytes they hold (not counting
    /// [`ENTRY_BYTES`]), from the cache or from `load` (then cached). `load`
    /// gives the tensors and the bytes they hold.
    pub(super) fn get_or_load(
        &mut self,
        key: Key,
        load: impl FnOnce() -> Result<(Vec<LodTensor>, usize)>,
    ) -> Result<(&[LodTensor], usize)> {
        if !self.entries.contains_key(&key) {
            let (columns, held) = load()?;
            self.insert(key, columns, held);
        }
        Ok(self
            .entries
            .get(&key)
            .map_or((&[][..], 0), |(c, held)| (c.as_slice(), *held)))
    }

    /// Whether batch `key` is cached.
    pub(super) fn contains(&self, key: Key) -> bool {
        self.entries.contains_key(&key)
    }

    /// The tensors of batch `key` (handles sharing their bytes: no copy)
    /// and the bytes they hold, if cached. For a cache behind a lock: look
    /// up, release the lock, load on a miss, then [`BatchCache::insert`].
    pub(super) fn get(&self, key: Key) -> Option<(Vec<LodTensor>, usize)> {
        self.entries
            .get(&key)
            .map(|(columns, held)| (columns.clone(), *held))
    }

    /// Caches batch `key`'s tensors holding `held` bytes, evicting the
    /// oldest entries while the new one would pass the budget (or
    /// [`MAX_ENTRIES`]); nothing if `key` is cached already (a second
    /// loader of it lost a race).
    pub(super) fn insert(&mut self, key: Key, columns: Vec<LodTensor>, held: usize) {
        if self.entries.contains_key(&key) {
            return;
        }
        let cost = cost(&columns, held);
        while !self.order.is_empty()
            && (self.held.saturating_add(cost) > self.budget || self.order.len() >= MAX_ENTRIES)
        {
            self.evict_oldest();
        }
        self.order.push_back(key);
        self.held = self.held.saturating_add(cost);
        self.entries.insert(key, (columns, held));
    }

    /// [`BatchCache::insert`], but only if the entry fits in the budget by
    /// itself (for a caller that keeps the tensors it loaded: a batch larger
    /// than the budget is not cached, and a budget of 0 caches nothing).
    pub(super) fn insert_within_budget(&mut self, key: Key, columns: Vec<LodTensor>, held: usize) {
        if cost(&columns, held) <= self.budget {
            self.insert(key, columns, held);
        }
    }

    /// The budget, in bytes.
    pub(super) fn budget(&self) -> usize {
        self.budget
    }

    fn evict_oldest(&mut self) {
        if let Some(old) = self.order.pop_front()
            && let Some((columns, held)) = self.entries.remove(&old)
        {
            self.held = self.held.saturating_sub(cost(&columns, held));
        }
    }

    /// The bytes the cache accounts for (entries' held bytes and views).
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.held
    }

    /// The number of batches cached.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// What an entry of `columns` holding `held` bytes costs.
fn cost(columns: &[LodTensor], held: usize) -> usize {
    held.saturating_add(columns.len().saturating_mul(ENTRY_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(v: i32) -> Vec<LodTensor> {
        vec![LodTensor::from_vec(vec![v], vec![1], Default::default()).unwrap()]
    }

    #[test]
    fn loads_once_and_drops_the_oldest_past_capacity() {
        let mut cache = BatchCache::new(2 * (ENTRY_BYTES + 4));
        let mut loads = 0;
        for key in [(0, 0), (0, 1), (0, 0), (1, 0), (0, 0), (0, 1)] {
            let got = cache
                .get_or_load((0, key.0, key.1), || {
                    loads += 1;
                    Ok((column(key.0 as i32 * 10 + key.1 as i32), 4))
                })
                .unwrap()
                .0;
            assert_eq!(
                got[0].as_slice::<i32>().unwrap(),
                &[key.0 as i32 * 10 + key.1 as i32]
            );
        }
        // (0,0) (0,1) loaded; (0,0) hit; (1,0) loaded, (0,0) dropped;
        // (0,0) loaded, (0,1) dropped; (0,1) loaded.
        assert_eq!(loads, 5);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn a_failed_load_caches_nothing() {
        let mut cache = BatchCache::new(1 << 20);
        let err = cache.get_or_load((0, 0, 0), || {
            Err(crate::dataset::DatasetError::Loader("no such batch".into()))
        });
        assert!(err.is_err());
        assert_eq!(cache.len(), 0);
        assert_eq!(
            cache
                .get_or_load((0, 0, 0), || Ok((column(1), 0)))
                .unwrap()
                .0
                .len(),
            1
        );
    }

    #[test]
    fn the_bytes_held_stay_within_the_budget() {
        // Batches of 1 MiB decoded each, under budgets from below one batch
        // to several: the cache never accounts for more than the budget but
        // for the newest batch alone, and keeps as many as fit.
        let mut trials = 0;
        for budget_batches in 0..40usize {
            let budget = budget_batches * (1 << 20) + budget_batches * 1000;
            let mut cache = BatchCache::new(budget);
            for k in 0..64usize {
                let (_, held) = cache
                    .get_or_load((0, 0, k % 50), || Ok((column(k as i32), 1 << 20)))
                    .unwrap();
                assert_eq!(held, 1 << 20);
                let one = (1 << 20) + ENTRY_BYTES;
                assert!(
                    cache.held() <= budget.max(one),
                    "budget {budget}: {} held",
                    cache.held()
                );
                assert_eq!(cache.held(), cache.len() * one);
            }
            let fit = (budget / ((1 << 20) + ENTRY_BYTES)).max(1);
            assert_eq!(cache.len(), fit.min(50), "budget {budget}");
            trials += 1;
        }
        assert_eq!(trials, 40);
        // Views of a mapped shard cost their small size: thousands fit, up
        // to MAX_ENTRIES.
        let mut cache = BatchCache::new(256 << 20);
        for k in 0..5000usize {
            cache.get_or_load((0, 0, k), || Ok((column(1), 0))).unwrap();
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
    }
}
