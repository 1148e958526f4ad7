//! Equal packed counts (`spec/DATASET.md` 7.4, "Equal counts"): every
//! consumer packs every consumer's share of the epoch from the sequences'
//! lengths alone (the LoD offsets of the counted tensor), and a consumer
//! below the largest count splits mini-batches of its last windows until
//! the counts are equal.

use super::super::error::{DatasetError, Result};
use super::super::feed::Feed;
use super::super::options::{PackOptions, Remainder};
use super::super::state::{LoaderState, Subject};
use super::plan::plan_window;
use std::collections::BTreeMap;

/// Per sequence id of `feed` (sources one after the other, as a mixture
/// numbers them), its rows of tensor `tensor`: read from the top-level LoD
/// offsets of each batch (1 per sequence for a tensor without LoD).
pub(crate) fn lengths(feed: &Feed, tensor: usize) -> Result<Vec<u32>> {
    let mut out: Vec<u32> = Vec::new();
    let mut k = 0;
    while let Some(source) = feed.source(k) {
        k += 1;
        let n = usize::try_from(source.num_sequences()).unwrap_or(usize::MAX);
        out.try_reserve(n)
            .map_err(|e| DatasetError::Loader(format!("the lengths of {n} sequences: {e}")))?;
        let counts = source.batch_counts();
        for shard in 0..counts.num_shards() {
            for batch in 0..counts.batches(shard) {
                let sequences = counts.batch_sequences(shard, batch);
                if sequences == 0 {
                    continue;
                }
                let columns = source.batch_columns(shard, batch)?;
                let t = columns.get(tensor).ok_or_else(|| {
                    DatasetError::Loader(format!(
                        "batch {batch} of shard {shard} lacks tensor {tensor}"
                    ))
                })?;
                let before = out.len();
                if t.lod().num_levels() == 0 {
                    out.extend(std::iter::repeat_n(1, sequences as usize));
                } else {
                    let top = t.lod().to_absolute().swap_remove(0);
                    for w in top.windows(2) {
                        let len = u32::try_from(w[1] - w[0]).map_err(|_| {
                            DatasetError::InvalidArgument(format!(
                                "a sequence of {} rows in batch {batch} of shard {shard}: equal packed counts count lengths up to {} rows",
                                w[1] - w[0],
                                u32::MAX
                            ))
                        })?;
                        out.push(len);
                    }
                }
                if (out.len() - before) as u64 != sequences {
                    return Err(DatasetError::Loader(format!(
                        "batch {batch} of shard {shard}: the manifest says {sequences} sequences, tensor {tensor} has {}",
                        out.len() - before
                    )));
                }
            }
        }
    }
    Ok(out)
}

/// What one consumer's packing of its share gives, per window: the
/// mini-batches and the sequences delivered.
struct Windows {
    batches: Vec<usize>,
    sequences: Vec<usize>,
}

/// Packs one consumer's sequences (their lengths, in its order) window by
/// window, as the packing stage does, counting only.
fn pack_counts(lengths: &[usize], pack: &PackOptions) -> Windows {
    let mut out = Windows {
        batches: Vec::new(),
        sequences: Vec::new(),
    };
    let mut carry: Vec<usize> = Vec::new();
    let mut pos = 0;
    loop {
        let end = (pos + pack.buffer).min(lengths.len());
        let mut window = carry;
        window.extend_from_slice(&lengths[pos..end]);
        pos = end;
        if window.is_empty() {
            return out;
        }
        let (batches, kept) = plan_window(&window, pack, pos >= lengths.len());
        out.batches.push(batches.len());
        out.sequences.push(window.len() - kept.len());
        carry = kept.iter().map(|&i| window[i]).collect();
    }
}

/// For equal counts (section 7.4): per consumer of `state`'s world, the
/// splits of each of its windows (window index -> splits; windows without
/// splits absent), from the lengths of the sequences (by id) of the epoch,
/// frontier, skip list, consumers and remainder of `state`.
pub(crate) fn equal_splits(
    feed: &Feed,
    state: &LoaderState,
    lengths: &[u32],
    pack: &PackOptions,
) -> Result<Vec<BTreeMap<u64, usize>>> {
    let consumers = usize::try_from(state.consumers).unwrap_or(usize::MAX);
    let n = feed.len(state.epoch);
    // The tail's lengths, in tail order.
    let mut tail: Vec<usize> = Vec::new();
    tail.try_reserve(usize::try_from(n).unwrap_or(usize::MAX))
        .map_err(|e| DatasetError::Loader(format!("a tail of {n} sequences: {e}")))?;
    feed.walk(state, |_, _, id| {
        let len = *lengths.get(id as usize).ok_or_else(|| {
            DatasetError::Loader(format!(
                "sequence {id} has no length ({} known)",
                lengths.len()
            ))
        })? as usize;
        tail.push(pack.bin_length(len));
        Ok(true)
    })?;
    let l = tail.len();
    let end = match state.remainder {
        Remainder::Keep => l,
        Remainder::Drop => l / consumers.max(1) * consumers,
        Remainder::Repeat => l.div_ceil(consumers.max(1)) * consumers,
    };
    let mut packed = Vec::with_capacity(consumers.min(1 << 16));
    for c in 0..consumers {
        let share: Vec<usize> = (c..end)
            .step_by(consumers.max(1))
            .map(|i| tail[i % l.max(1)])
            .collect();
        packed.push((share.len(), pack_counts(&share, pack)));
    }
    let counts: Vec<usize> = packed.iter().map(|(_, w)| w.batches.iter().sum()).collect();
    let (top, most) = counts
        .iter()
        .enumerate()
        .map(|(c, &n)| (n, c))
        .max_by_key(|&(n, c)| (n, std::cmp::Reverse(c)))
        .map(|(n, c)| (c, n))
        .unwrap_or((0, 0));
    let mut out = Vec::with_capacity(packed.len());
    for (c, (sequences, windows)) in packed.iter().enumerate() {
        let mut need = most - counts[c];
        if *sequences < most {
            return Err(DatasetError::InvalidArgument(format!(
                "equal packed mini-batches per consumer: consumer {c} has {sequences} sequences in this epoch, fewer than the {most} mini-batches consumer {top} packs (fewer ranks or workers, a smaller capacity, or equal batches off would do)"
            )));
        }
        let mut splits = BTreeMap::new();
        for w in (0..windows.batches.len()).rev() {
            if need == 0 {
                break;
            }
            let s = need.min(windows.sequences[w] - windows.batches[w]);
            if s > 0 {
                splits.insert(w as u64, s);
                need -= s;
            }
        }
        out.push(splits);
    }
    Ok(out)
}

/// Splits `n` mini-batches of a packed window (each its bins, each the
/// window indices of its members) into two, one at a time: the mini-batch
/// of most rows among those of at least 2 sequences (ties: the latest); one
/// of `b >= 2` bins into its first `ceil(b / 2)` bins and the rest, one of
/// one bin into the first `ceil(m / 2)` of its `m` members and the rest;
/// the two halves in its place.
///
/// ```text
/// [[0, 1, 2]], [[3]]  --1 split-->  [[0, 1]], [[2]], [[3]]
/// ```
pub(crate) fn split(batches: &mut Vec<Vec<Vec<usize>>>, lengths: &[usize], n: usize) {
    for _ in 0..n {
        let pick = batches
            .iter()
            .enumerate()
            .filter(|(_, b)| b.iter().map(Vec::len).sum::<usize>() >= 2)
            .map(|(i, b)| {
                let rows: usize = b.iter().flatten().map(|&k| lengths[k]).sum();
                (rows, i)
            })
            .max();
        let Some((_, i)) = pick else {
            return;
        };
        let mut first = std::mem::take(&mut batches[i]);
        let second = if first.len() >= 2 {
            first.split_off(first.len().div_ceil(2))
        } else {
            let bin = &mut first[0];
            vec![bin.split_off(bin.len().div_ceil(2))]
        };
        batches[i] = first;
        batches.insert(i + 1, second);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_halves_the_fullest_mini_batch_with_two_sequences() {
        // Rows: batch 0 = 5 (one sequence), batch 1 = 4, batch 2 = 4: the
        // latest of the fullest with two sequences is batch 2.
        let lengths = [5, 2, 2, 1, 3, 4];
        let mut b = vec![vec![vec![0]], vec![vec![1, 2]], vec![vec![3, 4]]];
        split(&mut b, &lengths, 1);
        assert_eq!(
            b,
            vec![
                vec![vec![0]],
                vec![vec![1, 2]],
                vec![vec![3]],
                vec![vec![4]]
            ]
        );
        split(&mut b, &lengths, 1);
        assert_eq!(
            b,
            vec![
                vec![vec![0]],
                vec![vec![1]],
                vec![vec![2]],
                vec![vec![3]],
                vec![vec![4]]
            ]
        );
        // Nothing left to split: no change.
        split(&mut b, &lengths, 3);
        assert_eq!(b.len(), 5);
        // [R, L]: a mini-batch of 3 bins splits into 2 + 1 bins.
        let mut r = vec![vec![vec![0], vec![1, 2], vec![3]]];
        split(&mut r, &lengths, 1);
        assert_eq!(r, vec![vec![vec![0], vec![1, 2]], vec![vec![3]]]);
    }

    #[test]
    fn pack_counts_counts_windows_like_the_loader() {
        let pack = PackOptions {
            buffer: 3,
            ..PackOptions::tokens(4)
        };
        let w = pack_counts(&[2, 2, 3, 1, 4, 1], &pack);
        // The per-window sums cover every sequence.
        assert_eq!(w.sequences.iter().sum::<usize>(), 6);
        assert_eq!(w.batches.len(), w.sequences.len());
    }
}
