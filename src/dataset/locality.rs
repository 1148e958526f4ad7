//! The locality partition (`spec/DATASET.md` section 7.6): the epoch's
//! order shuffled in windows of twice the buffer's size, so that any position is
//! found without walking the positions before it, and dealt to consumers
//! in contiguous blocks, so that a consumer (and a node of consecutive
//! consumers) needs only the file batches of its own part of the dataset.
//!
//! Three parts: [`Ranges`], the positions still to deliver and the deal of
//! them; [`WindowOrder`], position → sequence; [`LocalityWalk`], one
//! consumer's walk of its block.

use super::counts::ShardCounts;
use super::error::{DatasetError, Result};
use super::options::Remainder;
use super::reader::SequenceLocation;
use super::shuffle::{PURPOSE_BATCHES, PURPOSE_SHARDS, Rng, Shuffle};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The streams of the window permutations (section 6.1's purposes).
pub(crate) const PURPOSE_WINDOWS: u64 = 6;

/// Without a shuffle, the order is the dataset order: read in windows of
/// this many sequences (the size changes nothing but memory).
const PLAIN_WINDOW: u64 = 65_536;

/// The most blocks an epoch's order is cut into (the consumers of its first
/// deal): a state with more is refused.
pub(crate) const MAX_BLOCKS: u64 = 1 << 24;

/// The positions of an epoch still to deliver: disjoint, increasing,
/// non-empty ranges `[start, end)`. Tail index `t` is the `t`-th of their
/// positions; `L` is their number. With them, the number of **blocks** the
/// epoch's order was cut into (the consumers of its first deal, section
/// 7.6): it fixes where the order's windows are, for the whole epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ranges {
    ranges: Vec<(u64, u64)>,
    /// The tail index of each range's first position.
    starts: Vec<u64>,
    len: u64,
    blocks: u64,
}

impl Ranges {
    /// Every position of an epoch of `n`, its order cut into `blocks`
    /// blocks (the consumers that deal it).
    pub(crate) fn whole(n: u64, blocks: u64) -> Self {
        Self::from_sorted(
            if n == 0 { Vec::new() } else { vec![(0, n)] },
            blocks.clamp(1, MAX_BLOCKS),
        )
    }

    /// The blocks the epoch's order was cut into.
    pub(crate) fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The ranges of a state, checked against the epoch's `n` positions,
    /// and its order's `blocks`.
    pub(crate) fn try_new(ranges: &[[u64; 2]], n: u64, blocks: u64) -> Result<Self> {
        if !(1..=MAX_BLOCKS).contains(&blocks) {
            return Err(DatasetError::BadState {
                reason: format!(
                    "`blocks` is {blocks}: the order of an epoch is cut into 1 to {MAX_BLOCKS} blocks"
                ),
            });
        }
        let mut last_end = 0u64;
        for (k, &[a, b]) in ranges.iter().enumerate() {
            if a >= b || b > n || (k > 0 && a <= last_end) {
                return Err(DatasetError::BadState {
                    reason: format!(
                        "range {k} of `ranges` is [{a}, {b}): ranges must be non-empty, lie in 0..{n}, \
                         increase and neither overlap nor touch the one before (which ends at {last_end})"
                    ),
                });
            }
            last_end = b;
        }
        Ok(Self::from_sorted(
            ranges.iter().map(|r| (r[0], r[1])).collect(),
            blocks,
        ))
    }

    fn from_sorted(ranges: Vec<(u64, u64)>, blocks: u64) -> Self {
        let mut starts = Vec::with_capacity(ranges.len());
        let mut len = 0u64;
        for &(a, b) in &ranges {
            starts.push(len);
            len += b - a;
        }
        Ranges {
            ranges,
            starts,
            len,
            blocks,
        }
    }

    /// The ranges as a state records them.
    pub(crate) fn to_state(&self) -> Vec<[u64; 2]> {
        self.ranges.iter().map(|&(a, b)| [a, b]).collect()
    }

    /// `L`, the number of positions left.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The first position left (`n` if none): the state's `frontier`.
    pub(crate) fn first(&self, n: u64) -> u64 {
        self.ranges.first().map_or(n, |r| r.0)
    }

    /// The position of tail index `t`.
    pub(crate) fn position(&self, t: u64) -> Option<u64> {
        if t >= self.len {
            return None;
        }
        let k = self.starts.partition_point(|&s| s <= t) - 1;
        Some(self.ranges[k].0 + (t - self.starts[k]))
    }

    /// Consumer `c`'s block of tail indices, `[floor(c·L/C), floor((c+1)·L/C))`.
    pub(crate) fn block(&self, consumers: u64, c: u64) -> (u64, u64) {
        let at =
            |c: u64| (u128::from(c) * u128::from(self.len) / u128::from(consumers.max(1))) as u64;
        (at(c), at(c + 1))
    }

    /// How many sequences consumer `c` delivers under `remainder`: its
    /// block's length (`keep`), `floor(L/C)` (`drop`) or `ceil(L/C)`
    /// (`repeat`).
    pub(crate) fn share(&self, consumers: u64, c: u64, remainder: Remainder) -> u64 {
        let (lo, hi) = self.block(consumers, c);
        let consumers = consumers.max(1);
        match remainder {
            Remainder::Keep => hi - lo,
            Remainder::Drop => self.len / consumers,
            Remainder::Repeat => self.len.div_ceil(consumers),
        }
    }

    /// The tail index of consumer `c`'s `j`-th sequence (`j` below its
    /// share): `lo + j` within its block; past it (a repeat), the block's
    /// first index, or `c mod L` for an empty block.
    pub(crate) fn index_of(&self, consumers: u64, c: u64, j: u64) -> u64 {
        let (lo, hi) = self.block(consumers, c);
        if lo + j < hi {
            lo + j
        } else if hi > lo {
            lo
        } else {
            c % self.len.max(1)
        }
    }

    /// The positions left after each consumer `c` of `consumers` delivered
    /// the first `consumed[c]` sequences of its block (repeats count for
    /// nothing).
    pub(crate) fn advance(&self, consumers: u64, consumed: &BTreeMap<u64, u64>) -> Ranges {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for c in 0..consumers {
            let (lo, hi) = self.block(consumers, c);
            let done = consumed.get(&c).copied().unwrap_or(0).min(hi - lo);
            self.positions_of(lo + done, hi, &mut out);
        }
        // Blocks are in tail order, so `out` is increasing: join neighbours.
        let mut joined: Vec<(u64, u64)> = Vec::with_capacity(out.len());
        for (a, b) in out {
            match joined.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => joined.push((a, b)),
            }
        }
        Self::from_sorted(joined, self.blocks)
    }

    /// Appends the positions of tail indices `[a, b)` as ranges.
    fn positions_of(&self, a: u64, b: u64, out: &mut Vec<(u64, u64)>) {
        if a >= b {
            return;
        }
        let mut k = self.starts.partition_point(|&s| s <= a) - 1;
        let mut t = a;
        while t < b && k < self.ranges.len() {
            let (start, end) = self.ranges[k];
            let from = start + (t - self.starts[k]);
            let to = end.min(from + (b - t));
            out.push((from, to));
            t += to - from;
            k += 1;
        }
    }
}

/// The order of an epoch in the locality partition: the source stream of
/// section 6.2 (steps 1 and 2), cut into windows of twice the buffer's size
/// `B` (which mixes neighbours as much as round robin's buffer of `B`),
/// each window permuted by its own stream `(seed, epoch, 6, w)`: position
/// `2wB + i` is source position `2wB + perm_w[i]`. Without a shuffle, the
/// dataset order. Any position is found in O(shards + B).
#[derive(Debug)]
pub(crate) struct WindowOrder {
    counts: Arc<ShardCounts>,
    shuffle: Option<Shuffle>,
    epoch: u64,
    /// Shards in the epoch's order, and the source position each starts
    /// at (one more: the total).
    shard_order: Vec<usize>,
    starts: Vec<u64>,
    window: u64,
    /// The blocks the order is cut into before its windows.
    blocks: u64,
    /// The window last read: its first position and its sequences in order.
    current: Option<(u64, Vec<SequenceLocation>)>,
}

impl WindowOrder {
    /// The order of epoch `epoch`, cut into `blocks` blocks (the consumers
    /// of the epoch's first deal) and each block into windows.
    pub(crate) fn new(
        counts: Arc<ShardCounts>,
        shuffle: Option<Shuffle>,
        epoch: u64,
        blocks: u64,
    ) -> Self {
        let mut shard_order: Vec<usize> = (0..counts.num_shards()).collect();
        if let Some(s) = shuffle {
            Rng::stream(s.seed, epoch, PURPOSE_SHARDS, 0).shuffle(&mut shard_order);
        }
        let mut starts = Vec::with_capacity(shard_order.len() + 1);
        let mut at = 0u64;
        for &s in &shard_order {
            starts.push(at);
            at = at.saturating_add(counts.shard_sequences(s));
        }
        starts.push(at);
        let window = shuffle.map_or(PLAIN_WINDOW, |s| (s.buffer.max(1) as u64).saturating_mul(2));
        WindowOrder {
            counts,
            shuffle,
            epoch,
            shard_order,
            starts,
            window,
            blocks: blocks.clamp(1, MAX_BLOCKS),
            current: None,
        }
    }

    /// The number of positions.
    fn len(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The sequence at position `p`.
    pub(crate) fn at(&mut self, p: u64) -> Result<SequenceLocation> {
        if p >= self.len() {
            return Err(DatasetError::Loader(format!(
                "the epoch order has no position {p} (it has {})",
                self.len()
            )));
        }
        let (b, k, start, len) = self.window_of(p);
        if self.current.as_ref().map(|c| c.0) != Some(start) {
            self.current = None;
            let window = self.load(b, k, start, len)?;
            self.current = Some((start, window));
        }
        let i = (p - start) as usize;
        self.current
            .as_ref()
            .and_then(|(_, seqs)| seqs.get(i).copied())
            .ok_or_else(|| {
                DatasetError::Loader(format!("window {k} of block {b} has no position {p}"))
            })
    }

    /// Block `b`'s first position, `floor(b·N / blocks)` (`N` for `b = blocks`).
    fn block_start(&self, b: u64) -> u64 {
        (u128::from(b) * u128::from(self.len()) / u128::from(self.blocks)) as u64
    }

    /// The window holding position `p` (below the order's length): its
    /// block, its number within the block, its first position and its
    /// length.
    fn window_of(&self, p: u64) -> (u64, u64, u64, u64) {
        let n = self.len().max(1);
        let mut b = ((u128::from(p) * u128::from(self.blocks)) / u128::from(n)) as u64;
        b = b.min(self.blocks - 1);
        while b > 0 && self.block_start(b) > p {
            b -= 1;
        }
        while b + 1 < self.blocks && self.block_start(b + 1) <= p {
            b += 1;
        }
        let (lo, hi) = (self.block_start(b), self.block_start(b + 1));
        let k = (p - lo) / self.window;
        let start = lo + k * self.window;
        (b, k, start, self.window.min(hi - start))
    }

    /// The sequences of window `k` of block `b` (its first position
    /// `start`, `len` long), in order.
    fn load(&self, b: u64, k: u64, start: u64, len: u64) -> Result<Vec<SequenceLocation>> {
        let len = len as usize;
        let mut source = Vec::new();
        source.try_reserve_exact(len).map_err(|_| {
            DatasetError::Loader(format!(
                "cannot allocate a shuffle window of {len} sequences"
            ))
        })?;
        self.source_from(start, len, &mut source);
        let Some(s) = self.shuffle else {
            return Ok(source);
        };
        let mut perm: Vec<usize> = (0..source.len()).collect();
        // Stream `b·2^32 + k`: with one block, window `k`'s stream is `k`.
        let index = b.wrapping_mul(1 << 32).wrapping_add(k);
        Rng::stream(s.seed, self.epoch, PURPOSE_WINDOWS, index).shuffle(&mut perm);
        Ok(perm.into_iter().map(|i| source[i]).collect())
    }

    /// Appends `len` sequences of the source stream from source position
    /// `start`.
    fn source_from(&self, start: u64, len: usize, out: &mut Vec<SequenceLocation>) {
        let mut k = self
            .starts
            .partition_point(|&s| s <= start)
            .saturating_sub(1);
        let mut skip = start - self.starts[k];
        while out.len() < len && k < self.shard_order.len() {
            let shard = self.shard_order[k];
            let mut batches: Vec<usize> = (0..self.counts.batches(shard)).collect();
            if let Some(s) = self.shuffle {
                Rng::stream(s.seed, self.epoch, PURPOSE_BATCHES, shard as u64)
                    .shuffle(&mut batches);
            }
            for batch in batches {
                let count = self.counts.batch_sequences(shard, batch);
                if skip >= count {
                    skip -= count;
                    continue;
                }
                let take = (count - skip).min((len - out.len()) as u64);
                out.extend((skip..skip + take).map(|index| SequenceLocation {
                    shard,
                    batch,
                    index: index as usize,
                }));
                skip = 0;
                if out.len() == len {
                    return;
                }
            }
            k += 1;
        }
    }
}

/// One consumer's walk of its block in the locality partition.
#[derive(Debug)]
pub(crate) struct LocalityWalk {
    ranges: Ranges,
    order: WindowOrder,
    consumers: u64,
    consumer: u64,
    /// The next of the consumer's sequences, and its share.
    next: u64,
    share: u64,
}

impl LocalityWalk {
    /// Consumer `consumer`'s walk from its `start`-th sequence.
    pub(crate) fn new(
        ranges: Ranges,
        order: WindowOrder,
        (consumers, consumer): (u64, u64),
        remainder: Remainder,
        start: u64,
    ) -> Self {
        let share = ranges.share(consumers, consumer, remainder);
        LocalityWalk {
            ranges,
            order,
            consumers,
            consumer,
            next: start,
            share,
        }
    }

    /// The next sequence of the consumer's share.
    pub(crate) fn next_location(&mut self) -> Option<Result<SequenceLocation>> {
        if self.next >= self.share {
            return None;
        }
        let t = self
            .ranges
            .index_of(self.consumers, self.consumer, self.next);
        self.next += 1;
        let Some(p) = self.ranges.position(t) else {
            return Some(Err(DatasetError::Loader(format!(
                "tail index {t} is past the {} positions left",
                self.ranges.len()
            ))));
        };
        Some(self.order.at(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn counts() -> Arc<ShardCounts> {
        let shards: [&[u64]; 4] = [&[3, 0, 4], &[], &[5, 1], &[2, 2, 2]];
        Arc::new(ShardCounts::from_batches(shards.into_iter()))
    }

    fn ids(order: &mut WindowOrder, n: u64) -> Vec<(usize, usize, usize)> {
        (0..n)
            .map(|p| order.at(p).map(|l| (l.shard, l.batch, l.index)).unwrap())
            .collect()
    }

    #[test]
    fn the_window_order_is_a_permutation_local_to_its_windows() {
        // Buffer 2: windows of 4.
        let shuffle = Some(Shuffle { seed: 7, buffer: 2 });
        let mut order = WindowOrder::new(counts(), shuffle, 1, 1);
        let got = ids(&mut order, 19);
        let mut sorted = got.clone();
        sorted.sort();
        let all: Vec<_> = ids(&mut WindowOrder::new(counts(), None, 0, 1), 19);
        assert_eq!(sorted, all);
        assert!(order.at(19).is_err());
        // Random access agrees with the walk, whatever the order of access.
        let mut again = WindowOrder::new(counts(), shuffle, 1, 1);
        for p in [18u64, 0, 9, 3, 17, 4] {
            let l = again.at(p).unwrap();
            assert_eq!((l.shard, l.batch, l.index), got[p as usize]);
        }
        // Each window of 4 holds 4 consecutive source positions: those of
        // two windows of 2 of a buffer-1 order of the epoch.
        let mut source = WindowOrder::new(counts(), Some(Shuffle { seed: 7, buffer: 1 }), 1, 1);
        let source = ids(&mut source, 19);
        for w in 0..5 {
            let (a, b) = (w * 4, (w * 4 + 4).min(19));
            let mut x = got[a..b].to_vec();
            let mut y = source[a..b].to_vec();
            x.sort();
            y.sort();
            assert_eq!(x, y, "window {w}");
        }
        assert_ne!(got, source);
    }

    #[test]
    fn windows_lie_within_the_blocks_of_the_first_deal() {
        // 19 positions in 3 blocks ([0, 6), [6, 12), [12, 19)), windows of
        // 8 (buffer 4): within a block, never across one.
        let shuffle = Some(Shuffle { seed: 7, buffer: 4 });
        let source = ids(&mut WindowOrder::new(counts(), None, 1, 1), 19);
        // The source stream is the one of the shuffled shard and batch
        // order: the buffer-less order of the same epoch and seed, unshuffled
        // windows of 1.
        let plain = ids(
            &mut WindowOrder::new(counts(), Some(Shuffle { seed: 7, buffer: 1 }), 1, 19),
            19,
        );
        let mut order = WindowOrder::new(counts(), shuffle, 1, 3);
        let got = ids(&mut order, 19);
        for (a, b) in [(0, 6), (6, 12), (12, 19)] {
            let mut x = got[a..b].to_vec();
            let mut y = plain[a..b].to_vec();
            x.sort();
            y.sort();
            assert_eq!(x, y, "block [{a}, {b})");
        }
        let mut all = got.clone();
        all.sort();
        let mut expected = source.clone();
        expected.sort();
        assert_eq!(all, expected);
        // Random access agrees with the walk.
        let mut again = WindowOrder::new(counts(), shuffle, 1, 3);
        for p in [18u64, 0, 11, 6, 5, 12] {
            let l = again.at(p).unwrap();
            assert_eq!((l.shard, l.batch, l.index), got[p as usize]);
        }
        // One block: the windows of the whole order, as before blocks.
        let one = ids(&mut WindowOrder::new(counts(), shuffle, 1, 1), 19);
        assert_eq!(
            one[..8].iter().collect::<std::collections::BTreeSet<_>>(),
            plain[..8].iter().collect()
        );
        // More blocks than positions: empty blocks, every position once.
        let mut many = ids(&mut WindowOrder::new(counts(), shuffle, 1, 40), 19);
        many.sort();
        assert_eq!(many, expected);
    }

    #[test]
    fn blocks_cover_the_tail_once_with_balanced_counts() {
        for n in [0u64, 1, 5, 13, 100] {
            for consumers in 1..7u64 {
                let r = Ranges::whole(n, 1);
                let mut seen = Vec::new();
                for c in 0..consumers {
                    let share = r.share(consumers, c, Remainder::Keep);
                    assert!(share == n / consumers || share == n.div_ceil(consumers));
                    seen.extend((0..share).map(|j| r.index_of(consumers, c, j)));
                    assert_eq!(r.share(consumers, c, Remainder::Drop), n / consumers);
                    assert_eq!(
                        r.share(consumers, c, Remainder::Repeat),
                        n.div_ceil(consumers)
                    );
                }
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n {n}, C {consumers}");
            }
        }
    }

    #[test]
    fn advancing_keeps_what_no_consumer_delivered() {
        let r = Ranges::whole(20, 1);
        // 3 consumers: blocks [0,6) [6,13) [13,20); they delivered 2, 7 (all), 0.
        let consumed: BTreeMap<u64, u64> = [(0, 2), (1, 7), (2, 0)].into();
        let left = r.advance(3, &consumed);
        assert_eq!(left.to_state(), vec![[2, 6], [13, 20]]);
        assert_eq!(left.len(), 11);
        assert_eq!(left.position(4), Some(13));
        // Dealt to 2: [0,5) and [5,11) of the tail; consumer 1's first is position 14.
        assert_eq!(left.block(2, 1), (5, 11));
        assert_eq!(left.position(left.index_of(2, 1, 0)), Some(14));
        // Again, with 2 consumers that delivered 4 and 1: [6,6) is gone, [14..] less 1.
        let again = left.advance(2, &[(0, 4), (1, 1)].into());
        assert_eq!(again.to_state(), vec![[13, 14], [15, 20]]);
        let all: BTreeSet<u64> = (0..again.len()).filter_map(|t| again.position(t)).collect();
        assert_eq!(all, [13, 15, 16, 17, 18, 19].into());
    }

    #[test]
    fn a_state_s_ranges_are_checked() {
        assert!(Ranges::try_new(&[[0, 3], [5, 9]], 9, 1).is_ok());
        for bad in [
            &[[3u64, 3]][..],
            &[[0, 10]],
            &[[0, 3], [3, 5]],
            &[[4, 6], [0, 2]],
        ] {
            let err = Ranges::try_new(bad, 9, 1).unwrap_err().to_string();
            assert!(err.contains("ranges must be non-empty"), "{err}");
        }
    }

    #[test]
    fn a_walk_delivers_its_block_and_repeats_its_first() {
        let counts = Arc::new(ShardCounts::from_batches([&[5u64][..]].into_iter()));
        let walk = |c, remainder, start| {
            let order = WindowOrder::new(counts.clone(), None, 0, 1);
            let mut w = LocalityWalk::new(Ranges::whole(5, 1), order, (2, c), remainder, start);
            std::iter::from_fn(|| w.next_location())
                .map(|l| l.unwrap().index)
                .collect::<Vec<_>>()
        };
        assert_eq!(walk(0, Remainder::Keep, 0), [0, 1]);
        assert_eq!(walk(1, Remainder::Keep, 0), [2, 3, 4]);
        assert_eq!(walk(0, Remainder::Repeat, 0), [0, 1, 0]);
        assert_eq!(walk(1, Remainder::Drop, 0), [2, 3]);
        assert_eq!(walk(1, Remainder::Keep, 2), [4]);
    }
}
