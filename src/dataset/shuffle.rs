//! The deterministic epoch order of `spec/DATASET.md` section 6: a seeded
//! PRNG (SplitMix64 to seed xoshiro256++), bounded draws without bias,
//! Fisher–Yates permutations, and the order itself (shard order, batch
//! order, then a shuffle buffer over sequence locations).

use super::counts::ShardCounts;
use super::reader::SequenceLocation;
use std::sync::Arc;

/// SplitMix64's increment (the golden ratio in 64-bit fixed point).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The stream of the shard permutation.
pub(crate) const PURPOSE_SHARDS: u64 = 1;
/// The streams of the batch permutations (one per shard).
pub(crate) const PURPOSE_BATCHES: u64 = 2;
/// The stream of the shuffle buffer.
pub(crate) const PURPOSE_BUFFER: u64 = 3;

/// One SplitMix64 step from state `x`: the output for state `x + GOLDEN`.
pub(crate) fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of one random stream: `mix64(mix64(mix64(mix64(seed) ^ epoch)
/// ^ purpose) ^ index)`.
pub(crate) fn stream_seed(seed: u64, epoch: u64, purpose: u64, index: u64) -> u64 {
    mix64(mix64(mix64(mix64(seed) ^ epoch) ^ purpose) ^ index)
}

/// xoshiro256++ (Blackman and Vigna), seeded with four SplitMix64 outputs.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The generator seeded from `seed`: its state is the first four
    /// outputs of SplitMix64 started at `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            let out = mix64(x);
            x = x.wrapping_add(GOLDEN);
            out
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// The generator of stream `(seed, epoch, purpose, index)`.
    pub(crate) fn stream(seed: u64, epoch: u64, purpose: u64, index: u64) -> Self {
        Rng::new(stream_seed(seed, epoch, purpose, index))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let [s0, s1, s2, s3] = self.s;
        let result = s0.wrapping_add(s3).rotate_left(23).wrapping_add(s0);
        let t = s1 << 17;
        let mut s = [s0, s1, s2 ^ s0, s3 ^ s1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        self.s = s;
        result
    }

    /// A uniform draw from `0..n` (0 when `n` is 0), by Lemire's
    /// multiply-and-reject method: no bias.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Shuffles `items` in place (Fisher–Yates, from the last position down:
    /// for `i` from `len - 1` down to 1, swap `i` with `below(i + 1)`).
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// The shuffle of an epoch order: a seed, and the shuffle buffer's size in
/// sequences.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shuffle {
    pub seed: u64,
    pub buffer: usize,
}

/// The global order of one epoch (position 0, 1, ... of every sequence of
/// the dataset): shards in a seeded random order, each shard's batches in a
/// seeded random order, each batch's sequences in order, through a shuffle
/// buffer. Without a shuffle, the dataset order. Independent of how the
/// order is later split between consumers.
#[derive(Debug)]
pub(crate) struct EpochOrder {
    /// Per shard, the top-level sequences of each batch.
    counts: Arc<ShardCounts>,
    shuffle: Option<Shuffle>,
    epoch: u64,
    shard_order: Vec<usize>,
    next_shard: usize,
    shard: Option<usize>,
    batch_order: Vec<usize>,
    next_batch: usize,
    /// The batch being read: shard, batch, sequences.
    batch: Option<(usize, usize, u64)>,
    next_index: u64,
    buffer: Vec<SequenceLocation>,
    rng: Rng,
    source_done: bool,
    /// How many ids the source stream gave so far.
    drawn: u64,
}

/// An [`EpochOrder`]'s generator between two positions: what it drew from
/// the source, its buffer's random stream and the buffer's contents (slot
/// order). Restoring it continues the order exactly (`spec/DATASET.md` 7.3,
/// the cursor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OrderSnapshot {
    /// The positions the order emitted before it.
    pub(crate) position: u64,
    /// The ids the source stream gave.
    pub(crate) drawn: u64,
    /// The buffer stream's xoshiro256++ state.
    pub(crate) rng: [u64; 4],
    /// The buffer, slot by slot.
    pub(crate) buffer: Vec<SequenceLocation>,
}

impl EpochOrder {
    pub(crate) fn new(counts: Arc<ShardCounts>, shuffle: Option<Shuffle>, epoch: u64) -> Self {
        let mut shard_order: Vec<usize> = (0..counts.num_shards()).collect();
        let seed = shuffle.map_or(0, |s| s.seed);
        if shuffle.is_some() {
            Rng::stream(seed, epoch, PURPOSE_SHARDS, 0).shuffle(&mut shard_order);
        }
        EpochOrder {
            counts,
            shuffle,
            epoch,
            shard_order,
            next_shard: 0,
            shard: None,
            batch_order: Vec::new(),
            next_batch: 0,
            batch: None,
            next_index: 0,
            buffer: Vec::new(),
            rng: Rng::stream(seed, epoch, PURPOSE_BUFFER, 0),
            source_done: false,
            drawn: 0,
        }
    }

    /// The order from position `position` on without a shuffle (the
    /// dataset order): O(shards), not O(position).
    pub(crate) fn unshuffled_from(counts: Arc<ShardCounts>, epoch: u64, position: u64) -> Self {
        let mut order = EpochOrder::new(counts, None, epoch);
        order.seek_source(position);
        order
    }

    /// The shuffled order continued from `snapshot` (taken of the order of
    /// the same counts, shuffle and epoch, and checked by the caller:
    /// `drawn <= N`, a buffer of at most `shuffle.buffer` valid locations).
    pub(crate) fn resume(
        counts: Arc<ShardCounts>,
        shuffle: Shuffle,
        epoch: u64,
        snapshot: OrderSnapshot,
    ) -> Self {
        let mut order = EpochOrder::new(counts, Some(shuffle), epoch);
        order.seek_source(snapshot.drawn);
        order.rng = Rng { s: snapshot.rng };
        order.buffer = snapshot.buffer;
        order
    }

    /// The generator now, as the snapshot of position `position` (the
    /// positions emitted so far, which the caller counts).
    pub(crate) fn snapshot(&self, position: u64) -> OrderSnapshot {
        OrderSnapshot {
            position,
            drawn: self.drawn,
            rng: self.rng.s,
            buffer: self.buffer.clone(),
        }
    }

    /// Whether the order goes through a shuffle buffer.
    pub(crate) fn is_shuffled(&self) -> bool {
        self.shuffle.is_some()
    }

    /// Moves the source stream (shard order, batch order, sequences) to its
    /// `drawn`-th id, without drawing from the buffer's stream: the shards
    /// before it are counted, not walked.
    fn seek_source(&mut self, drawn: u64) {
        let mut left = drawn;
        while let Some(&shard) = self.shard_order.get(self.next_shard) {
            let n = self.counts.shard_sequences(shard);
            if left < n {
                break;
            }
            left -= n;
            self.next_shard += 1;
        }
        self.drawn = drawn - left;
        let Some(shard) = self.open_next_shard() else {
            return;
        };
        while let Some(&batch) = self.batch_order.get(self.next_batch) {
            self.next_batch += 1;
            let n = self.counts.batch_sequences(shard, batch);
            if left < n {
                self.batch = Some((shard, batch, n));
                self.next_index = left;
                self.drawn += left;
                return;
            }
            left -= n;
            self.drawn += n;
        }
    }

    /// Starts the next shard of the shard order: its batches in their
    /// order. None after the last shard.
    fn open_next_shard(&mut self) -> Option<usize> {
        let shard = *self.shard_order.get(self.next_shard)?;
        self.next_shard += 1;
        let batches = self.counts.batches(shard);
        self.batch_order.clear();
        self.batch_order.extend(0..batches);
        if let Some(s) = self.shuffle {
            Rng::stream(s.seed, self.epoch, PURPOSE_BATCHES, shard as u64)
                .shuffle(&mut self.batch_order);
        }
        self.next_batch = 0;
        self.shard = Some(shard);
        Some(shard)
    }

    /// The next sequence before the shuffle buffer.
    fn next_natural(&mut self) -> Option<SequenceLocation> {
        loop {
            if let Some((shard, batch, count)) = self.batch {
                if self.next_index < count {
                    let index = self.next_index as usize;
                    self.next_index += 1;
                    self.drawn += 1;
                    return Some(SequenceLocation {
                        shard,
                        batch,
                        index,
                    });
                }
                self.batch = None;
            }
            if let Some(shard) = self.shard {
                if let Some(&batch) = self.batch_order.get(self.next_batch) {
                    self.next_batch += 1;
                    let count = self.counts.batch_sequences(shard, batch);
                    self.batch = Some((shard, batch, count));
                    self.next_index = 0;
                    continue;
                }
                self.shard = None;
            }
            self.open_next_shard()?;
        }
    }
}

impl Iterator for EpochOrder {
    type Item = SequenceLocation;

    fn next(&mut self) -> Option<SequenceLocation> {
        let Some(shuffle) = self.shuffle else {
            return self.next_natural();
        };
        let cap = shuffle.buffer.max(1);
        if !self.source_done {
            while self.buffer.len() < cap {
                match self.next_natural() {
                    Some(x) => self.buffer.push(x),
                    None => {
                        self.source_done = true;
                        break;
                    }
                }
            }
            if !self.source_done {
                match self.next_natural() {
                    Some(x) => {
                        let j = self.rng.below(cap as u64) as usize;
                        if let Some(slot) = self.buffer.get_mut(j) {
                            return Some(std::mem::replace(slot, x));
                        }
                    }
                    None => self.source_done = true,
                }
            }
        }
        if self.buffer.is_empty() {
            return None;
        }
        let j = self.rng.below(self.buffer.len() as u64) as usize;
        Some(self.buffer.swap_remove(j))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_and_xoshiro_match_the_reference_outputs() {
        // SplitMix64 from state 0: the first output of the reference C code.
        assert_eq!(mix64(0), 0xE220_A839_7B1D_CDAF);
        // xoshiro256++ with state [1, 2, 3, 4]: the reference's first outputs.
        let mut rng = Rng { s: [1, 2, 3, 4] };
        assert_eq!(rng.next_u64(), 41_943_041);
        assert_eq!(rng.next_u64(), 58_720_359);
        assert_eq!(rng.next_u64(), 3_588_806_011_781_223);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut rng = Rng::new(7);
        let mut hist = [0u32; 6];
        for _ in 0..60_000 {
            let x = rng.below(6) as usize;
            hist[x] += 1;
        }
        for h in hist {
            assert!((9_000..11_000).contains(&h), "{hist:?}");
        }
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.below(1), 0);
    }

    #[test]
    fn the_epoch_order_is_a_permutation_that_changes_with_the_epoch() {
        let counts = Arc::new(ShardCounts::from_batches(
            [&[3u64, 0, 4][..], &[], &[5, 1]].into_iter(),
        ));
        let ids = |epoch, shuffle| -> Vec<(usize, usize, usize)> {
            EpochOrder::new(counts.clone(), shuffle, epoch)
                .map(|l| (l.shard, l.batch, l.index))
                .collect()
        };
        let natural = ids(0, None);
        assert_eq!(natural.len(), 13);
        assert_eq!(natural[0], (0, 0, 0));
        assert_eq!(natural[12], (2, 1, 0));
        let s = Some(Shuffle {
            seed: 42,
            buffer: 4,
        });
        let (e0, e1) = (ids(0, s), ids(1, s));
        let sorted = |mut v: Vec<_>| {
            v.sort();
            v
        };
        assert_eq!(sorted(e0.clone()), natural);
        assert_eq!(sorted(e1.clone()), natural);
        assert_ne!(e0, e1);
        assert_eq!(e0, ids(0, s)); // deterministic
    }

    #[test]
    fn an_order_resumed_from_a_snapshot_continues_exactly() {
        let counts = Arc::new(ShardCounts::from_batches(
            [&[3u64, 0, 4][..], &[], &[5, 1], &[0], &[2, 6, 1]].into_iter(),
        ));
        let n = counts.num_sequences() as usize;
        for buffer in [1, 3, 5, 40] {
            let s = Shuffle { seed: 9, buffer };
            let whole: Vec<_> = EpochOrder::new(counts.clone(), Some(s), 2).collect();
            for p in 0..=n {
                let mut walked = EpochOrder::new(counts.clone(), Some(s), 2);
                for _ in 0..p {
                    walked.next();
                }
                let snap = walked.snapshot(p as u64);
                assert!(snap.buffer.len() <= buffer);
                let rest: Vec<_> = EpochOrder::resume(counts.clone(), s, 2, snap).collect();
                assert_eq!(rest, whole[p..], "buffer {buffer}, position {p}");
            }
        }
        let natural: Vec<_> = EpochOrder::new(counts.clone(), None, 0).collect();
        for p in 0..=n {
            let rest: Vec<_> = EpochOrder::unshuffled_from(counts.clone(), 0, p as u64).collect();
            assert_eq!(rest, natural[p..], "position {p}");
        }
    }
}
