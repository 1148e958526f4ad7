//! Read planning: a dataset's stored batches cut into contiguous groups of
//! about equal sequence counts, one per parallel read task (Ray Data's
//! `read_lodt`), with each group's sequences and an estimate of its bytes,
//! from the manifest alone.

use crate::dataset::ShardEntry;

/// One read task: the batches it reads, shard by shard, in dataset order.
///
/// ```
/// let task = lodt::dataset::ReadTask { shards: vec![(0, vec![1, 2])], sequences: 7, bytes: 512 };
/// assert_eq!(task.shards[0].1.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTask {
    /// `(shard index in the manifest, its batch indices, increasing)`, shards
    /// in increasing order.
    pub shards: Vec<(usize, Vec<usize>)>,
    /// The top-level sequences of its batches (its rows).
    pub sequences: u64,
    /// Its share of the shards' bytes: per shard, `bytes × sequences read /
    /// sequences` (a shard with no sequences counts as one).
    pub bytes: u64,
}

/// Cuts the batches of `shards` (in dataset order) into at most
/// `parallelism` contiguous read tasks of about equal sequence counts (none
/// empty; `parallelism` 0 is 1). Batch `i` (counted over every shard), with
/// `before` sequences before it out of `total`, goes to task
/// `before × n / total` (or `i × n / batches` when every batch is empty),
/// with `n = min(parallelism, batches)`; tasks that receive no batch are
/// left out. No batch: no task.
///
/// ```
/// use lodt::dataset::{ShardEntry, plan_reads};
/// let shard = |name: &str, batch_sequences: Vec<u64>| -> ShardEntry {
///     serde_json::from_value(serde_json::json!({"name": name, "bytes": 1000, "footer_crc": 0,
///         "batches": batch_sequences.len(), "sequences": batch_sequences.iter().sum::<u64>(),
///         "batch_sequences": batch_sequences, "tensors": []})).unwrap()
/// };
/// let shards = [shard("a.lodt", vec![4, 4]), shard("b.lodt", vec![4, 4])];
/// let tasks = plan_reads(&shards, 2);
/// assert_eq!(tasks.len(), 2);
/// assert_eq!(tasks[0].shards, vec![(0, vec![0, 1])]);
/// assert_eq!(tasks[1].shards, vec![(1, vec![0, 1])]);
/// assert_eq!((tasks[1].sequences, tasks[1].bytes), (8, 1000));
/// ```
pub fn plan_reads(shards: &[ShardEntry], parallelism: usize) -> Vec<ReadTask> {
    let units: Vec<(usize, usize, u64)> = shards
        .iter()
        .enumerate()
        .flat_map(|(s, shard)| {
            shard
                .batch_sequences
                .iter()
                .enumerate()
                .map(move |(b, &n)| (s, b, n))
        })
        .collect();
    if units.is_empty() {
        return Vec::new();
    }
    let n = parallelism.clamp(1, units.len());
    let total: u128 = units.iter().map(|u| u128::from(u.2)).sum();
    let mut tasks: Vec<ReadTask> = Vec::new();
    let mut current = usize::MAX;
    let mut before: u128 = 0;
    for (i, &(s, b, sequences)) in units.iter().enumerate() {
        let group = (before * n as u128)
            .checked_div(total)
            .unwrap_or((i as u128) * n as u128 / units.len() as u128);
        // Below n: before < total (or i < len), so the quotient is below n.
        let group = (group as usize).min(n - 1);
        if group != current || tasks.is_empty() {
            current = group;
            tasks.push(ReadTask {
                shards: Vec::new(),
                sequences: 0,
                bytes: 0,
            });
        }
        let Some(task) = tasks.last_mut() else {
            continue;
        };
        match task.shards.last_mut() {
            Some((last, batches)) if *last == s => batches.push(b),
            _ => task.shards.push((s, vec![b])),
        }
        task.sequences = task.sequences.saturating_add(sequences);
        before += u128::from(sequences);
    }
    for task in &mut tasks {
        task.bytes = task.shards.iter().fold(0u64, |acc, (s, batches)| {
            let shard = &shards[*s];
            let part: u128 = batches
                .iter()
                .filter_map(|&b| shard.batch_sequences.get(b))
                .map(|&n| u128::from(n))
                .sum();
            let of = u128::from(shard.sequences.max(1));
            let share = u128::from(shard.bytes) * part / of;
            acc.saturating_add(u64::try_from(share).unwrap_or(u64::MAX))
        });
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(bytes: u64, batch_sequences: &[u64]) -> ShardEntry {
        serde_json::from_value(serde_json::json!({"name": "s.lodt", "bytes": bytes,
            "footer_crc": 0, "batches": batch_sequences.len(),
            "sequences": batch_sequences.iter().sum::<u64>(),
            "batch_sequences": batch_sequences, "tensors": []}))
        .unwrap()
    }

    #[test]
    fn groups_are_contiguous_and_balanced_by_sequences() {
        // Batch k goes to task (sequences before it) × 3 / 20: 0 | 10, 12 | 14, 16, 18.
        let shards = [shard(1600, &[10, 2, 2, 2]), shard(400, &[2, 2])];
        let tasks = plan_reads(&shards, 3);
        let cut: Vec<_> = tasks
            .iter()
            .map(|t| (t.shards.clone(), t.sequences))
            .collect();
        assert_eq!(
            cut,
            [
                (vec![(0, vec![0])], 10),
                (vec![(0, vec![1, 2])], 4),
                (vec![(0, vec![3]), (1, vec![0, 1])], 6)
            ]
        );
        // Shard 0: 1600 bytes for 16 sequences, 100 each; shard 1: 100 each.
        assert_eq!(
            tasks.iter().map(|t| t.bytes).collect::<Vec<_>>(),
            [1000, 400, 600]
        );
    }

    #[test]
    fn a_task_may_span_shards_and_parallelism_is_capped_by_batches() {
        let shards = [shard(100, &[1]), shard(300, &[3]), shard(0, &[])];
        let one = plan_reads(&shards, 1);
        assert_eq!(
            one,
            [ReadTask {
                shards: vec![(0, vec![0]), (1, vec![0])],
                sequences: 4,
                bytes: 400
            }]
        );
        assert_eq!(plan_reads(&shards, 0), one);
        // Two batches at most; the second starts after 1 of 4 sequences: task 1 × 2 / 4 = 0.
        assert_eq!(plan_reads(&shards, 50), one);
        let even = [shard(100, &[2]), shard(300, &[2])];
        let two = plan_reads(&even, 50);
        assert_eq!(two.len(), 2);
        assert_eq!(
            (two[1].shards.clone(), two[1].bytes),
            (vec![(1, vec![0])], 300)
        );
    }

    #[test]
    fn empty_batches_are_split_by_index_and_no_batch_is_no_task() {
        let shards = [shard(10, &[0, 0, 0, 0])];
        let tasks = plan_reads(&shards, 2);
        let cut: Vec<_> = tasks.iter().map(|t| t.shards.clone()).collect();
        assert_eq!(cut, [vec![(0, vec![0, 1])], vec![(0, vec![2, 3])]]);
        // A shard of no sequences counts as one: its bytes go to its batches' tasks, 0 each.
        assert_eq!(tasks.iter().map(|t| t.bytes).collect::<Vec<_>>(), [0, 0]);
        assert!(plan_reads(&[], 4).is_empty());
        assert!(plan_reads(&[shard(10, &[])], 4).is_empty());
    }
}
