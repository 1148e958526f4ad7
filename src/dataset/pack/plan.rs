//! The window planner of packing (`spec/DATASET.md` 7.4): best-fit
//! decreasing into bins, which bins a window keeps back as the next
//! window's carry, and the check of a saved window.

use super::super::error::{DatasetError, Result};
use super::super::options::PackOptions;
use super::super::state::PackWindow;
use std::collections::BTreeSet;

/// Best-fit decreasing of `lengths` into bins of `capacity`: the bins in
/// creation order, each the indices of its members, increasing. An item
/// longer than `capacity` is a bin by itself.
///
/// ```
/// let bins = lodt::dataset::best_fit(&[5, 3, 4, 2, 9], 8);
/// assert_eq!(bins, vec![vec![4], vec![0, 1], vec![2, 3]]);
/// ```
pub fn best_fit(lengths: &[usize], capacity: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    let mut bins: Vec<Vec<usize>> = Vec::new();
    // (free rows, bin index): the least free that fits, ties the earliest.
    let mut free: BTreeSet<(usize, usize)> = BTreeSet::new();
    for i in order {
        let len = lengths[i];
        let fit = if len > capacity {
            None
        } else {
            free.range((len, 0)..).next().copied()
        };
        match fit {
            Some((f, b)) => {
                free.remove(&(f, b));
                free.insert((f - len, b));
                bins[b].push(i);
            }
            None => {
                free.insert((capacity.saturating_sub(len), bins.len()));
                bins.push(vec![i]);
            }
        }
    }
    for b in &mut bins {
        b.sort_unstable();
    }
    bins
}

/// Refuses a packing window no loader could have saved: a carry of ids
/// outside the epoch or of one id twice (it would be delivered twice), or
/// more mini-batches delivered than its window has sequences (each has at
/// least one).
pub(crate) fn check_window(
    window: &PackWindow,
    consumer: u64,
    pack: &PackOptions,
    n: u64,
) -> Result<()> {
    let bad = |reason: String| Err(DatasetError::BadState { reason });
    let mut ids = window.carry.clone();
    ids.sort_unstable();
    if let Some(&id) = ids.iter().find(|&&id| id >= n) {
        return bad(format!(
            "consumer {consumer}'s packing carry holds sequence {id}, past the epoch's {n} sequences"
        ));
    }
    if let Some(pair) = ids.windows(2).find(|p| p[0] == p[1]) {
        return bad(format!(
            "consumer {consumer}'s packing carry holds sequence {} twice",
            pair[0]
        ));
    }
    let most = (window.carry.len() as u64).saturating_add(pack.buffer as u64);
    if window.delivered > most {
        return bad(format!(
            "consumer {consumer} delivered {} mini-batches of a window of at most {most} sequences",
            window.delivered
        ));
    }
    Ok(())
}

/// The bins a window keeps back as the next window's carry (indices into
/// `bins`), per section 7.4.
fn kept_back(
    bins: &[Vec<usize>],
    lengths: &[usize],
    capacity: usize,
    rows: Option<usize>,
) -> Vec<usize> {
    match rows {
        None => {
            let mut best: Option<(usize, usize)> = None;
            for (b, members) in bins.iter().enumerate() {
                let used: usize = members.iter().map(|&i| lengths[i]).sum();
                let f = capacity.saturating_sub(used);
                if best.is_none_or(|(bf, _)| f >= bf) {
                    best = Some((f, b));
                }
            }
            best.map(|(_, b)| vec![b]).unwrap_or_default()
        }
        Some(r) => {
            let n = bins.len();
            let keep = match n % r {
                0 => r.min(n),
                k => k,
            };
            (n - keep..n).collect()
        }
    }
}

/// A window of sequences of `lengths` packed (section 7.4): its mini-batches
/// (each its bins, each the window indices of its members) and the window
/// indices it keeps back as the next window's carry (none when `last`).
pub(crate) fn plan_window(
    lengths: &[usize],
    pack: &PackOptions,
    last: bool,
) -> (Vec<Vec<Vec<usize>>>, Vec<usize>) {
    let mut bins = best_fit(lengths, pack.capacity);
    let kept = if last {
        Vec::new()
    } else {
        kept_back(&bins, lengths, pack.capacity, pack.rows)
    };
    let mut carry: Vec<usize> = kept
        .iter()
        .flat_map(|&b| std::mem::take(&mut bins[b]))
        .collect();
    carry.sort_unstable();
    let delivered: Vec<Vec<usize>> = bins
        .into_iter()
        .enumerate()
        .filter(|(b, _)| !kept.contains(b))
        .map(|(_, m)| m)
        .collect();
    let per = pack.rows.unwrap_or(1);
    let batches = delivered.chunks(per).map(<[Vec<usize>]>::to_vec).collect();
    (batches, carry)
}
