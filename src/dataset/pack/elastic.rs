//! Resuming packing on another number of consumers (`spec/DATASET.md` 7.4):
//! a complete packing state becomes the base (frontier and skip list) of a
//! plain state that holds exactly the sequences not delivered.

use super::super::error::{DatasetError, Result};
use super::super::feed::Feed;
use super::super::options::{PackOptions, Remainder};
use super::super::state::{LoaderState, PackState, STATE_VERSION, Subject};
use super::batch::row_counts;
use super::plan::plan_window;
use std::collections::{BTreeMap, BTreeSet};

/// One old consumer's current window: its carry (by id), its new
/// sequences (by tail index) and how many of its mini-batches it delivered.
struct Window<'a> {
    consumer: u64,
    start: u64,
    carry: &'a [u64],
    delivered: u64,
}

/// A version-1 state of one consumer with nothing consumed, whose base
/// leaves exactly the sequences the consumers of `state` (a complete
/// packing state) did not deliver.
pub(crate) fn unpack_state(
    feed: &Feed,
    state: &LoaderState,
    packing: &PackState,
    pack: &PackOptions,
    tensor: usize,
) -> Result<LoaderState> {
    let n = feed.len(state.epoch);
    let windows = windows_of(n, state, packing)?;
    let old = Old {
        feed,
        state,
        windows,
        c_old: state.consumers,
        w: pack.buffer as u64,
        n,
        tail_len: n - state.frontier - state.skip.len() as u64,
    };
    // With equal counts, the old consumers' splits per window.
    let splits = if packing.equal {
        let lengths = super::equal::lengths(feed, tensor)?;
        super::equal::equal_splits(feed, state, &lengths, pack)?
    } else {
        Vec::new()
    };
    let (wanted, mut carry_index) = old.locate()?;
    let (unconsumed, ends) = old.repack(&wanted, &mut carry_index, &splits, pack, tensor)?;
    let (frontier, skip) = old.base(&unconsumed, &ends)?;
    Ok(LoaderState {
        version: STATE_VERSION,
        frontier,
        skip,
        consumers: 1,
        consumed: [(0, 0)].into(),
        packing: None,
        ..state.clone()
    })
}

/// The old world as the steps of [`unpack_state`] read it.
struct Old<'a> {
    feed: &'a Feed,
    state: &'a LoaderState,
    windows: Vec<Window<'a>>,
    c_old: u64,
    /// The window, in sequences.
    w: u64,
    /// The epoch's positions and its tail's length.
    n: u64,
    tail_len: u64,
}

impl Window<'_> {
    /// The tail index of this window's `k`-th new sequence.
    fn new_index(&self, c_old: u64, k: u64) -> u64 {
        self.consumer + (self.start + k) * c_old
    }
}

/// The windows of the old consumers of `state` (a complete packing state),
/// after checking that it can resume on another number of consumers.
fn windows_of<'a>(n: u64, state: &LoaderState, packing: &'a PackState) -> Result<Vec<Window<'a>>> {
    let bad = |reason: String| DatasetError::BadState { reason };
    let c_old = state.consumers;
    if state.remainder != Remainder::Keep {
        return Err(bad(format!(
            "resuming packing on another number of consumers needs remainder \"keep\" (the state has {:?})",
            state.remainder
        )));
    }
    if state.frontier > n
        || state.skip.windows(2).any(|w| w[0] >= w[1])
        || state.skip.iter().any(|&p| p < state.frontier || p >= n)
    {
        return Err(bad(format!(
            "frontier {} and skip list: expected increasing positions within {}..{n}",
            state.frontier, state.frontier
        )));
    }
    let mut windows = Vec::new();
    for c in 0..c_old {
        match (state.consumed.get(&c), packing.windows.get(&c)) {
            (Some(&start), Some(w)) => windows.push(Window {
                consumer: c,
                start,
                carry: &w.carry,
                delivered: w.delivered,
            }),
            _ => {
                return Err(bad(format!(
                    "it was saved by {c_old} consumers and this loader has another number: that needs the states of all {c_old} merged (LoaderState::merge); consumer {c} is missing"
                )));
            }
        }
    }
    Ok(windows)
}

impl Old<'_> {
    /// Per tail index of a window's new sequences, its id; per (consumer,
    /// carry id), the tail indices it may have come from (the latest last).
    #[allow(clippy::type_complexity)]
    fn locate(&self) -> Result<(BTreeMap<u64, u64>, BTreeMap<(u64, u64), Vec<u64>>)> {
        let (feed, state, windows, c_old, w, tail_len) = (
            self.feed,
            self.state,
            &self.windows,
            self.c_old,
            self.w,
            self.tail_len,
        );
        // The tail indices of each window's new sequences, and its carry ids.
        let mut wanted: BTreeMap<u64, u64> = BTreeMap::new(); // tail index -> id
        for win in windows.iter() {
            for k in 0..w {
                let i = win.new_index(c_old, k);
                if i >= tail_len {
                    break;
                }
                wanted.insert(i, u64::MAX);
            }
        }
        // A carry's members are the consumer's sequences before its window's
        // first new one. A mixture may hold an id twice: each carry member takes
        // the latest such tail index of its consumer not taken by another.
        let carry_ids: BTreeSet<(u64, u64)> = windows
            .iter()
            .flat_map(|w| w.carry.iter().map(|&id| (w.consumer, id)))
            .collect();
        let starts: Vec<u64> = windows.iter().map(|win| win.new_index(c_old, 0)).collect();
        let mut carry_index: BTreeMap<(u64, u64), Vec<u64>> = BTreeMap::new();
        let last = wanted
            .keys()
            .next_back()
            .copied()
            .into_iter()
            .chain(starts.iter().copied())
            .max()
            .unwrap_or(0);
        feed.walk(state, |i, _, id| {
            if let Some(slot) = wanted.get_mut(&i) {
                *slot = id;
            }
            let c = i % c_old.max(1);
            if i < starts[c as usize] && carry_ids.contains(&(c, id)) {
                carry_index.entry((c, id)).or_default().push(i);
            }
            Ok(i < last)
        })?;
        Ok((wanted, carry_index))
    }

    /// Each window packed again: the tail indices not consumed (delivered
    /// ids are; the rest of a window, its carry included, is not) and, per
    /// old consumer, the end of its window's tail indices.
    fn repack(
        &self,
        wanted: &BTreeMap<u64, u64>,
        carry_index: &mut BTreeMap<(u64, u64), Vec<u64>>,
        splits: &[BTreeMap<u64, usize>],
        pack: &PackOptions,
        tensor: usize,
    ) -> Result<(BTreeSet<u64>, Vec<u64>)> {
        let bad = |reason: String| DatasetError::BadState { reason };
        let (feed, windows, c_old, w, tail_len) =
            (self.feed, &self.windows, self.c_old, self.w, self.tail_len);
        // Re-pack each window: delivered ids are consumed; the rest of the
        // window (its carry included) is not.
        let mut unconsumed: BTreeSet<u64> = BTreeSet::new(); // tail indices
        let mut ends = Vec::new();
        for win in windows.iter() {
            let news: Vec<u64> = (0..w)
                .map(|k| win.new_index(c_old, k))
                .take_while(|&i| i < tail_len)
                .collect();
            let mut ids: Vec<u64> = win.carry.to_vec();
            ids.extend(
                news.iter()
                    .map(|i| wanted.get(i).copied().unwrap_or(u64::MAX)),
            );
            let mut index: Vec<u64> = Vec::with_capacity(ids.len());
            for (k, id) in ids.iter().enumerate() {
                let i = if k < win.carry.len() {
                    carry_index.get_mut(&(win.consumer, *id)).and_then(Vec::pop)
                } else {
                    news.get(k - win.carry.len()).copied()
                };
                index.push(i.ok_or_else(|| {
                    bad(format!(
                        "consumer {}'s window: sequence {id} is not in the rest of the epoch",
                        win.consumer
                    ))
                })?);
            }
            let end = win.new_index(c_old, news.len() as u64);
            ends.push(end);
            if ids.is_empty() {
                continue;
            }
            let batch = feed.take(&ids)?;
            let mut lengths = row_counts(&batch, ids.len(), tensor)?;
            for l in &mut lengths {
                *l = pack.bin_length(*l);
            }
            let (mut batches, _) = plan_window(&lengths, pack, end >= tail_len);
            let window = win.start / w.max(1);
            let n = splits
                .get(win.consumer as usize)
                .and_then(|s| s.get(&window))
                .copied()
                .unwrap_or(0);
            super::equal::split(&mut batches, &lengths, n);
            let delivered: BTreeSet<usize> = batches
                .iter()
                .take(usize::try_from(win.delivered).unwrap_or(usize::MAX))
                .flatten()
                .flatten()
                .copied()
                .collect();
            if (win.delivered as usize) > batches.len() {
                return Err(bad(format!(
                    "consumer {} delivered {} mini-batches of a window that has {}",
                    win.consumer,
                    win.delivered,
                    batches.len()
                )));
            }
            for (k, &i) in index.iter().enumerate() {
                if !delivered.contains(&k) {
                    unconsumed.insert(i);
                }
            }
        }
        Ok((unconsumed, ends))
    }

    /// The new base: the first tail index not consumed becomes the
    /// frontier, the consumed ones after it the skip list.
    fn base(&self, unconsumed: &BTreeSet<u64>, ends: &[u64]) -> Result<(u64, Vec<u64>)> {
        let (feed, state, c_old, n, tail_len) =
            (self.feed, self.state, self.c_old, self.n, self.tail_len);
        // The first tail index not consumed, and the consumed ones after it.
        let first = unconsumed
            .iter()
            .copied()
            .chain(ends.iter().copied())
            .min()
            .unwrap_or(tail_len)
            .min(tail_len);
        let consumed_after = |i: u64| {
            let c = i % c_old.max(1);
            i > first && i < ends[c as usize] && !unconsumed.contains(&i)
        };
        let mut frontier = n;
        let mut skip: Vec<u64> = state.skip.clone();
        if first < tail_len {
            feed.walk(state, |i, p, _| {
                if i == first {
                    frontier = p;
                } else if consumed_after(i) {
                    skip.push(p);
                }
                Ok(ends.iter().any(|&e| i < e))
            })?;
        }
        skip.retain(|&p| p > frontier && p < n);
        skip.sort_unstable();
        skip.dedup();
        Ok((frontier, skip))
    }
}
