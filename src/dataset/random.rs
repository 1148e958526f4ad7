//! Random access through the dataset's cache of batches: the cache itself
//! ([`Dataset::with_cache_bytes`], [`Dataset::cache_bytes`]) and the
//! per-item fast path [`Dataset::sequence_arrays`] (one sequence's tensors
//! as plain arrays, no [`Batch`](crate::Batch) built).

use super::batch_cache::BatchCache;
use super::error::{DatasetError, Result};
use super::reader::Dataset;
use crate::tensor::LodTensor;
use std::sync::PoisonError;

/// One tensor of one sequence, as [`Dataset::sequence_arrays`] gives it.
///
/// ```
/// # use lodt::{Batch, Lod, LodTensor};
/// # let dir = tempfile::tempdir()?;
/// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
/// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]])?)?;
/// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
/// # w.finish()?;
/// let dataset = lodt::dataset::Dataset::open(dir.path())?;
/// let x = &dataset.sequence_arrays(0)?[0];
/// assert_eq!(x.values.as_slice::<i32>()?, &[0, 1, 2]);
/// assert_eq!(x.inner_offsets, vec![vec![0, 1, 3]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SequenceArray {
    /// The sequence's rows, as a tensor with no LoD (shape `[rows,
    /// *element_shape]`): a zero-copy view of the shard's map when the shard
    /// is mapped and uncompressed, a copy of just these rows otherwise (so
    /// it never keeps a decoded batch alive). A tensor without LoD gives its
    /// one row (shape `[1, *element_shape]`).
    pub values: LodTensor,
    /// The sequence's LoD levels below the top, rebased to 0: for a tensor
    /// of `L` levels, `L - 1` offset vectors (level 1's indexes level 2's
    /// sequences, ..., the last one indexes `values`' rows). Empty for a
    /// tensor of 0 or 1 levels.
    pub inner_offsets: Vec<Vec<u64>>,
}

impl Dataset {
    /// This dataset with a random-access cache of at most `bytes` bytes
    /// (default [`DEFAULT_RANDOM_ACCESS_CACHE_BYTES`](super::DEFAULT_RANDOM_ACCESS_CACHE_BYTES),
    /// 256 MiB; 0 turns it off). The cache holds the
    /// batches that [`Dataset::sequence`], [`Dataset::take`] and
    /// [`Dataset::sequence_arrays`] read, shared by every thread: a batch of
    /// a compressed (2.0) shard, or one read by positional reads or from an
    /// object store, counts its decoded (read) bytes; a batch of a mapped
    /// shard counts only its views (a few hundred bytes per tensor). It holds
    /// at most 4,096 batches, drops the oldest first, and never holds a batch
    /// larger than the budget by itself. Loaders have caches
    /// of their own ([`LoaderOptions::cache_bytes`](super::LoaderOptions::cache_bytes)),
    /// of the same kind and default.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?.with_cache_bytes(64 << 20);
    /// assert_eq!(dataset.cache_bytes(), 64 << 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_cache_bytes(mut self, bytes: usize) -> Self {
        self.cache = std::sync::Mutex::new(BatchCache::new(bytes));
        self
    }

    /// The random-access cache's budget, in bytes ([`Dataset::with_cache_bytes`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.cache_bytes(), lodt::dataset::DEFAULT_RANDOM_ACCESS_CACHE_BYTES);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cache_bytes(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .budget()
    }

    /// The bytes the random-access cache accounts for now, and the batches
    /// it holds (for tests: never more than the budget).
    #[cfg(test)]
    pub(super) fn cache_held(&self) -> (usize, usize) {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        (cache.held(), cache.len())
    }

    /// The tensors of batch `batch` of shard `shard` in schema order, and
    /// the bytes they hold that are not the shard's map, from the dataset's
    /// cache, or read (and decoded) on a miss and cached. The lock is not
    /// held while a batch is read: two threads missing one batch at once
    /// may both read it (one copy is kept).
    pub(super) fn cached_columns(
        &self,
        shard: usize,
        batch: usize,
    ) -> Result<(Vec<LodTensor>, usize)> {
        let key = (0, shard, batch);
        let lock = || self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = lock().get(key) {
            return Ok(hit);
        }
        let (columns, held) = self.batch_columns_held(shard, batch)?;
        lock().insert_within_budget(key, columns.clone(), held);
        Ok((columns, held))
    }

    /// Sequence `id`'s tensors, in schema order, as plain arrays with no
    /// [`Batch`](crate::Batch) built: each tensor's rows of the sequence
    /// (zero-copy views of a mapped, uncompressed shard; copies of just
    /// those rows otherwise) and, for a tensor of two or more LoD levels,
    /// the sequence's inner offsets rebased to 0 ([`SequenceArray`]). The
    /// batch comes from the dataset's cache, as for [`Dataset::sequence`].
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # let y = LodTensor::from_vec(vec![7i64, 8, 9], vec![3], Lod::empty())?;
    /// # w.write(&Batch::try_from_tensors([("x", x), ("y", y)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// let arrays = dataset.sequence_arrays(2)?;
    /// assert_eq!(arrays[0].values.as_slice::<i32>()?, &[3, 4, 5]);
    /// assert_eq!(arrays[1].values.as_slice::<i64>()?, &[9]); // no LoD: its row
    /// assert!(arrays[0].inner_offsets.is_empty());
    /// assert!(dataset.sequence_arrays(3).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sequence_arrays(&self, id: u64) -> Result<Vec<SequenceArray>> {
        let at = self.locate(id)?;
        let (columns, held) = self.cached_columns(at.shard, at.batch)?;
        let slicing = |e| DatasetError::tensor(format!("slicing sequence {id}"), e);
        let mut out = Vec::with_capacity(columns.len());
        for column in &columns {
            let (values, inner_offsets) = if column.lod().is_empty() {
                let row = column
                    .slice_rows(at.index, at.index.saturating_add(1))
                    .map_err(slicing)?;
                (row, Vec::new())
            } else {
                let (sub, rows) = column.lod().sequence(0, at.index).map_err(slicing)?;
                let (begin, end) = (as_index(rows.start)?, as_index(rows.end)?);
                (
                    column.slice_rows(begin, end).map_err(slicing)?,
                    sub.to_offsets(),
                )
            };
            // A view of a decoded batch would keep all of it alive past its
            // eviction from the cache: copied.
            let values = if held > 0 { values.compact() } else { values };
            out.push(SequenceArray {
                values,
                inner_offsets,
            });
        }
        Ok(out)
    }
}

fn as_index(row: u64) -> Result<usize> {
    usize::try_from(row).map_err(|_| {
        DatasetError::tensor(
            "slicing a sequence",
            crate::Error::Overflow {
                what: "a row index",
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{DatasetWriter, DatasetWriterOptions};
    use crate::format::{Compression, ReadOptions};
    use crate::{Batch, Lod};

    /// A dataset of `batches` batches of 40 sequences of 1..=8 i64 tokens
    /// (each token `batch * 1000 + position`), compressed with zstd or not.
    fn dataset(dir: &std::path::Path, batches: i64, zstd: bool) -> Dataset {
        let options = DatasetWriterOptions {
            compression: if zstd {
                Compression::Zstd { level: 1 }
            } else {
                Compression::None
            },
            ..Default::default()
        };
        let mut w = DatasetWriter::create(dir, options).unwrap();
        for b in 0..batches {
            let lengths: Vec<u64> = (0..40).map(|i| 1 + (i % 8)).collect();
            let rows: u64 = lengths.iter().sum();
            let lod = Lod::try_from_lengths(&[lengths]).unwrap();
            let words = LodTensor::from_vec(
                (0..rows as i64).map(|i| b * 1000 + i).collect(),
                vec![rows as usize],
                lod,
            )
            .unwrap();
            let labels = LodTensor::from_vec(
                (0..40).map(|i| b * 100 + i).collect(),
                vec![40],
                Lod::empty(),
            )
            .unwrap();
            w.write(&Batch::try_from_tensors([("words", words), ("labels", labels)]).unwrap())
                .unwrap();
        }
        w.finish().unwrap();
        Dataset::open(dir).unwrap()
    }

    #[test]
    fn a_run_of_reads_into_a_batch_decodes_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path(), 3, true);
        // 100 ids in 3 batches (0..40, 40..80, 80..120), in a scattered order.
        let ids: Vec<u64> = (0..100u64).map(|k| (k * 37) % 120).collect();
        let before = crate::format::hooks::decodes();
        for &id in &ids {
            let seq = ds.sequence(id).unwrap();
            let (b, i) = ((id / 40) as i64, (id % 40) as i64);
            assert_eq!(
                seq.get("labels").unwrap().as_slice::<i64>().unwrap(),
                &[b * 100 + i]
            );
        }
        assert_eq!(crate::format::hooks::decodes() - before, 3);
        // Hot: no decode at all, for sequence, sequence_arrays and take.
        let before = crate::format::hooks::decodes();
        let arrays = ds.sequence_arrays(41).unwrap();
        assert_eq!(arrays[0].values.as_slice::<i64>().unwrap(), &[1001, 1002]);
        let taken = ds.take(&ids).unwrap();
        assert_eq!(taken.get("labels").unwrap().rows(), 100);
        assert_eq!(crate::format::hooks::decodes() - before, 0);
    }

    #[test]
    fn take_decodes_each_batch_once_without_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        // A budget of 0: no cache.
        let ds = dataset(dir.path(), 3, true).with_cache_bytes(0);
        let ids: Vec<u64> = (0..100u64).map(|k| (k * 37) % 120).collect();
        let before = crate::format::hooks::decodes();
        let taken = ds.take(&ids).unwrap();
        assert_eq!(crate::format::hooks::decodes() - before, 3);
        let labels = taken.get("labels").unwrap().as_slice::<i64>().unwrap();
        let expected: Vec<i64> = ids
            .iter()
            .map(|&id| (id / 40) as i64 * 100 + (id % 40) as i64)
            .collect();
        assert_eq!(labels, &expected[..]);
        // Alternating between two batches: each read decodes again.
        let before = crate::format::hooks::decodes();
        for id in [0, 40, 1, 41] {
            ds.sequence(id).unwrap();
        }
        assert_eq!(crate::format::hooks::decodes() - before, 4);
    }

    #[test]
    fn the_cache_holds_no_more_than_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path(), 12, true);
        // One decoded batch: its bytes (what a budget is counted in).
        let (_, one) = ds.batch_columns_held(0, 0).unwrap();
        assert!(one > 0);
        for fit in [1usize, 2, 5] {
            // Room for `fit` batches and their views, not one more.
            let budget = fit * (one + 2 * super::super::batch_cache::ENTRY_BYTES) + one / 2;
            let ds = Dataset::open(dir.path()).unwrap().with_cache_bytes(budget);
            for k in 0..480u64 {
                let id = (k * 7919) % 480;
                let arrays = ds.sequence_arrays(id).unwrap();
                assert_eq!(
                    arrays[1].values.as_slice::<i64>().unwrap(),
                    &[(id / 40) as i64 * 100 + (id % 40) as i64]
                );
                let (held, batches) = ds.cache_held();
                assert!(held <= budget, "budget {budget}: {held} held");
                assert!(batches <= fit, "budget of {fit} batches: {batches} held");
            }
            assert_eq!(ds.cache_held().1, fit);
        }
        // A mapped, uncompressed dataset: every batch fits (views only).
        let raw = tempfile::tempdir().unwrap();
        let ds = dataset(raw.path(), 12, false);
        for id in 0..480 {
            ds.sequence(id).unwrap();
        }
        let (held, batches) = ds.cache_held();
        assert_eq!(batches, 12);
        assert_eq!(held, 12 * 2 * super::super::batch_cache::ENTRY_BYTES);
    }

    #[test]
    fn threads_share_one_cache_and_read_the_right_sequences() {
        let dir = tempfile::tempdir().unwrap();
        let ds = std::sync::Arc::new(dataset(dir.path(), 3, true));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let ds = ds.clone();
                std::thread::spawn(move || {
                    let before = crate::format::hooks::decodes();
                    for k in 0..300u64 {
                        let id = (k * 13 + t * 7) % 120;
                        let arrays = ds.sequence_arrays(id).unwrap();
                        let (b, i) = ((id / 40) as i64, (id % 40) as i64);
                        assert_eq!(arrays[1].values.as_slice::<i64>().unwrap(), &[b * 100 + i]);
                        let words = arrays[0].values.as_slice::<i64>().unwrap();
                        assert_eq!(words.len() as i64, 1 + i % 8);
                    }
                    crate::format::hooks::decodes() - before
                })
            })
            .collect();
        let decodes: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        // Each batch decoded once, or by each thread that missed it at the
        // same moment: never once per read (1,200 reads).
        assert!((3..=12).contains(&decodes), "{decodes} decodes");
        assert_eq!(ds.cache_held().1, 3);
    }

    #[test]
    fn a_batch_larger_than_the_budget_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let (_, one) = dataset(dir.path(), 2, true)
            .batch_columns_held(0, 0)
            .unwrap();
        let ds = Dataset::open(dir.path()).unwrap().with_cache_bytes(one / 2);
        let before = crate::format::hooks::decodes();
        for id in [0, 1, 2, 41, 42] {
            ds.sequence(id).unwrap();
        }
        assert_eq!(crate::format::hooks::decodes() - before, 5);
        assert_eq!(ds.cache_held(), (0, 0));
    }

    #[test]
    fn sequence_arrays_of_nested_and_plain_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DatasetWriter::create(dir.path(), Default::default()).unwrap();
        // Two documents of sentences of words: [[0 1] [2]] and [[3 4 5] [6] [7 8]].
        let lod = Lod::try_from_lengths(&[vec![2, 3], vec![2, 1, 3, 1, 2]]).unwrap();
        let words = LodTensor::from_vec((0..9i32).collect(), vec![9], lod).unwrap();
        let emb = LodTensor::from_vec(
            (0..10).map(|v| v as f32).collect(),
            vec![5, 2],
            Lod::try_from_lengths(&[vec![2, 3]]).unwrap(),
        )
        .unwrap();
        w.write(&Batch::try_from_tensors([("words", words), ("emb", emb)]).unwrap())
            .unwrap();
        w.finish().unwrap();
        for ds in [
            Dataset::open(dir.path()).unwrap(),
            Dataset::open_in(std::sync::Arc::new(
                crate::dataset::LocalStore::new(dir.path()).with_read_options(ReadOptions {
                    mmap: false,
                    ..Default::default()
                }),
            ))
            .unwrap(),
        ] {
            let second = ds.sequence_arrays(1).unwrap();
            assert_eq!(
                second[0].values.as_slice::<i32>().unwrap(),
                &[3, 4, 5, 6, 7, 8]
            );
            assert_eq!(second[0].values.shape(), &[6]);
            assert_eq!(second[0].inner_offsets, vec![vec![0, 3, 4, 6]]);
            assert_eq!(
                second[1].values.as_slice::<f32>().unwrap(),
                &[4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
            );
            assert_eq!(second[1].values.shape(), &[3, 2]);
            assert!(second[1].inner_offsets.is_empty());
            let first = ds.sequence_arrays(0).unwrap();
            assert_eq!(first[0].inner_offsets, vec![vec![0, 2, 3]]);
            assert_eq!(first[0].values.as_slice::<i32>().unwrap(), &[0, 1, 2]);
            assert!(matches!(
                ds.sequence_arrays(2),
                Err(DatasetError::OutOfRange {
                    index: 2,
                    len: 2,
                    ..
                })
            ));
        }
    }
}
