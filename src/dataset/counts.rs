//! [`ShardCounts`]: where each shard's and each batch's sequences start, the
//! numbers the epoch order, the partitions and random access are computed
//! from. They come from the JSON manifest (owned arrays) or are views of the
//! shard index (section 3.2), used in place.

use crate::buffer::Buffer;

/// Where a sequence is: shard, batch within the shard, top-level sequence
/// within the batch.
///
/// ```
/// let at = lodt::dataset::SequenceLocation { shard: 1, batch: 0, index: 4 };
/// assert_eq!(at.shard, 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SequenceLocation {
    /// The shard (its position in the manifest).
    pub shard: usize,
    /// The batch within the shard.
    pub batch: usize,
    /// The top-level sequence within the batch.
    pub index: usize,
}

/// An array of `u64`: owned, or a view of an index's bytes (8-aligned, its
/// length a multiple of 8: checked when made).
enum Words {
    Owned(Vec<u64>),
    Mapped(Buffer),
}

impl Words {
    fn as_slice(&self) -> &[u64] {
        match self {
            Words::Owned(v) => v,
            Words::Mapped(b) => {
                <[u64] as zerocopy::FromBytes>::ref_from_bytes(b.as_slice()).unwrap_or(&[])
            }
        }
    }

    fn mapped(buffer: Buffer) -> Option<Words> {
        <[u64] as zerocopy::FromBytes>::ref_from_bytes(buffer.as_slice()).ok()?;
        Some(Words::Mapped(buffer))
    }
}

/// Where the sequences of each shard and batch start.
///
/// Three arrays: `shard_starts` (`S + 1`: the first sequence of each shard,
/// then the total), `batch_offsets` (`S + 1`: where shard `s`'s entries of
/// `batch_starts` begin), and `batch_starts` (per shard, `batches + 1`
/// entries: the first sequence of each batch within the shard, then the
/// shard's total). Their rules (starting at 0, never decreasing, each shard's
/// batch starts ending at its count) are checked where they are made: the
/// manifest's validation, or the index's.
pub(crate) struct ShardCounts {
    shard_starts: Words,
    batch_offsets: Words,
    batch_starts: Words,
}

impl std::fmt::Debug for ShardCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardCounts")
            .field("shards", &self.num_shards())
            .field("sequences", &self.num_sequences())
            .finish()
    }
}

impl ShardCounts {
    /// The counts of shards whose batches hold `batch_sequences` top-level
    /// sequences each (per shard, in order).
    pub(crate) fn from_batches<'a>(shards: impl ExactSizeIterator<Item = &'a [u64]>) -> Self {
        let n = shards.len();
        let mut shard_starts = Vec::with_capacity(n + 1);
        let mut batch_offsets = Vec::with_capacity(n + 1);
        let mut batch_starts = Vec::new();
        let mut total = 0u64;
        for batches in shards {
            shard_starts.push(total);
            batch_offsets.push(batch_starts.len() as u64);
            let mut local = 0u64;
            for &k in batches {
                batch_starts.push(local);
                local = local.saturating_add(k);
            }
            batch_starts.push(local);
            total = total.saturating_add(local);
        }
        shard_starts.push(total);
        batch_offsets.push(batch_starts.len() as u64);
        ShardCounts {
            shard_starts: Words::Owned(shard_starts),
            batch_offsets: Words::Owned(batch_offsets),
            batch_starts: Words::Owned(batch_starts),
        }
    }

    /// The counts as views of an index's three sections (already checked
    /// by the index), or `None` if a section is not 8-aligned.
    pub(crate) fn mapped([starts, offsets, batches]: [Buffer; 3]) -> Option<Self> {
        Some(ShardCounts {
            shard_starts: Words::mapped(starts)?,
            batch_offsets: Words::mapped(offsets)?,
            batch_starts: Words::mapped(batches)?,
        })
    }

    /// The number of shards.
    pub(crate) fn num_shards(&self) -> usize {
        self.shard_starts.as_slice().len().saturating_sub(1)
    }

    /// The number of top-level sequences.
    pub(crate) fn num_sequences(&self) -> u64 {
        self.shard_starts.as_slice().last().copied().unwrap_or(0)
    }

    /// The number of batches, over every shard.
    pub(crate) fn num_batches(&self) -> u64 {
        (self.batch_starts.as_slice().len()
            - self.num_shards().min(self.batch_starts.as_slice().len())) as u64
    }

    /// The first sequence of each shard, then the total.
    pub(crate) fn shard_starts(&self) -> &[u64] {
        self.shard_starts.as_slice()
    }

    /// The first sequence of each batch of shard `shard` within the shard,
    /// then the shard's total (empty past the last shard).
    pub(crate) fn batch_starts(&self, shard: usize) -> &[u64] {
        let offsets = self.batch_offsets.as_slice();
        let (Some(&a), Some(&b)) = (offsets.get(shard), offsets.get(shard + 1)) else {
            return &[];
        };
        let (a, b) = (
            usize::try_from(a).unwrap_or(0),
            usize::try_from(b).unwrap_or(0),
        );
        self.batch_starts.as_slice().get(a..b).unwrap_or(&[])
    }

    /// The number of batches of shard `shard`.
    pub(crate) fn batches(&self, shard: usize) -> usize {
        self.batch_starts(shard).len().saturating_sub(1)
    }

    /// The top-level sequences of batch `batch` of shard `shard` (0 past the
    /// end).
    pub(crate) fn batch_sequences(&self, shard: usize, batch: usize) -> u64 {
        let starts = self.batch_starts(shard);
        match (starts.get(batch), starts.get(batch + 1)) {
            (Some(&a), Some(&b)) => b.saturating_sub(a),
            _ => 0,
        }
    }

    /// The top-level sequences of shard `shard`.
    pub(crate) fn shard_sequences(&self, shard: usize) -> u64 {
        self.batch_starts(shard).last().copied().unwrap_or(0)
    }

    /// The location of sequence `id` (its dataset order number); None past
    /// the last.
    pub(crate) fn locate(&self, id: u64) -> Option<SequenceLocation> {
        if id >= self.num_sequences() {
            return None;
        }
        let starts = self.shard_starts();
        let shard = starts.partition_point(|&s| s <= id).saturating_sub(1);
        let local = id - starts.get(shard).copied().unwrap_or(0);
        let starts = self.batch_starts(shard);
        let batch = starts.partition_point(|&s| s <= local).saturating_sub(1);
        let index = local - starts.get(batch).copied().unwrap_or(0);
        Some(SequenceLocation {
            shard,
            batch,
            index: usize::try_from(index).ok()?,
        })
    }

    /// The id (dataset order number) of the sequence at `at`.
    pub(crate) fn id_of(&self, at: SequenceLocation) -> u64 {
        let shard = self.shard_starts().get(at.shard).copied().unwrap_or(0);
        let batch = self
            .batch_starts(at.shard)
            .get(at.batch)
            .copied()
            .unwrap_or(0);
        shard + batch + at.index as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_of_batches() {
        let shards: Vec<Vec<u64>> = vec![vec![3, 0, 4], vec![], vec![5, 1]];
        let c = ShardCounts::from_batches(shards.iter().map(Vec::as_slice));
        assert_eq!(c.num_shards(), 3);
        assert_eq!(c.num_sequences(), 13);
        assert_eq!(c.num_batches(), 5);
        assert_eq!(c.shard_starts(), &[0, 7, 7, 13]);
        assert_eq!(c.batch_starts(0), &[0, 3, 3, 7]);
        assert_eq!(c.batch_starts(1), &[0]);
        assert_eq!(c.batch_starts(3), &[] as &[u64]);
        assert_eq!((c.batches(0), c.batches(1), c.batches(2)), (3, 0, 2));
        assert_eq!(c.batch_sequences(0, 2), 4);
        assert_eq!(c.batch_sequences(2, 1), 1);
        assert_eq!(c.batch_sequences(2, 2), 0);
        assert_eq!(c.shard_sequences(2), 6);
        for id in 0..13 {
            let at = c.locate(id).unwrap();
            assert_eq!(c.id_of(at), id);
        }
        let at = c.locate(7).unwrap();
        assert_eq!((at.shard, at.batch, at.index), (2, 0, 0));
        assert_eq!(c.locate(13), None);
    }
}
