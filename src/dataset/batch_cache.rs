//! The loader's cache of recently read batches' tensors: a shuffled epoch
//! takes its sequences from batches all over the dataset, so the cache holds
//! many batches (a few hundred bytes each: the tensors share the shard's
//! map), and a batch's tensors are built once rather than once per sequence.

use super::error::Result;
use crate::tensor::LodTensor;
use std::collections::{HashMap, VecDeque};

/// Batches, by `(source, shard, batch)`, with their tensors in schema order; the
/// oldest entry goes when a new one would pass the capacity.
pub(super) struct BatchCache {
    entries: HashMap<(usize, usize, usize), Vec<LodTensor>>,
    order: VecDeque<(usize, usize, usize)>,
    capacity: usize,
}

impl BatchCache {
    /// An empty cache of at most `capacity` batches (at least 1).
    pub(super) fn new(capacity: usize) -> Self {
        BatchCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// The tensors of batch `key`, from the cache or from `load` (then
    /// cached).
    pub(super) fn get_or_load(
        &mut self,
        key: (usize, usize, usize),
        load: impl FnOnce() -> Result<Vec<LodTensor>>,
    ) -> Result<&[LodTensor]> {
        if !self.entries.contains_key(&key) {
            let columns = load()?;
            if self.order.len() >= self.capacity
                && let Some(old) = self.order.pop_front()
            {
                self.entries.remove(&old);
            }
            self.order.push_back(key);
            self.entries.insert(key, columns);
        }
        Ok(self.entries.get(&key).map_or(&[], Vec::as_slice))
    }

    /// The number of batches cached.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(v: i32) -> Vec<LodTensor> {
        vec![LodTensor::from_vec(vec![v], vec![1], Default::default()).unwrap()]
    }

    #[test]
    fn loads_once_and_drops_the_oldest_past_capacity() {
        let mut cache = BatchCache::new(2);
        let mut loads = 0;
        for key in [(0, 0), (0, 1), (0, 0), (1, 0), (0, 0), (0, 1)] {
            let got = cache
                .get_or_load((0, key.0, key.1), || {
                    loads += 1;
                    Ok(column(key.0 as i32 * 10 + key.1 as i32))
                })
                .unwrap();
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
        let mut cache = BatchCache::new(2);
        let err = cache.get_or_load((0, 0, 0), || {
            Err(crate::dataset::DatasetError::Loader("no such batch".into()))
        });
        assert!(err.is_err());
        assert_eq!(cache.len(), 0);
        assert_eq!(
            cache
                .get_or_load((0, 0, 0), || Ok(column(1)))
                .unwrap()
                .len(),
            1
        );
    }
}
