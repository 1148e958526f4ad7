//! Summaries of the tensors of many batches, as `lodt stats` prints them:
//! per tensor, its rows and, per LoD level, how many sequences there are and
//! how long they are (min, percentiles, max, mean, a histogram).
//!
//! ```
//! use lodt::{batch::stats::Stats, Batch, Lod, LodTensor};
//! let words = |lengths: Vec<u64>| -> Result<Batch, lodt::Error> {
//!     let rows = lengths.iter().sum::<u64>() as usize;
//!     let t = LodTensor::from_vec(vec![0i64; rows], vec![rows], Lod::try_from_lengths(&[lengths])?)?;
//!     Batch::try_from_tensors([("words", t)])
//! };
//! let mut stats = Stats::new();
//! stats.add(&words(vec![3, 1, 2])?);
//! stats.add(&words(vec![4])?);
//! let w = &stats.tensors()[0];
//! assert_eq!((w.name.as_str(), w.rows, w.batches), ("words", 10, 2));
//! let level = &w.levels[0];
//! assert_eq!((level.sequences(), level.min(), level.max()), (4, Some(1), Some(4)));
//! assert_eq!((level.quantile(0.5), level.mean()), (Some(2), Some(2.5)));
//! # Ok::<(), lodt::Error>(())
//! ```
//!
//! Lengths are kept as a count per distinct length, so percentiles are exact
//! and memory grows with the number of distinct lengths, not of sequences.

use super::Batch;
use crate::dtype::DType;
use std::collections::BTreeMap;
use std::ops::Range;

/// The summary of the tensors of the batches [added](Stats::add) so far, in
/// the order their names first appeared.
///
/// See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    tensors: Vec<TensorStats>,
    batches: u64,
}

/// One tensor's summary over every batch that holds it.
///
/// See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct TensorStats {
    /// The tensor's name.
    pub name: String,
    /// Its dtype (in the first batch that holds it).
    pub dtype: DType,
    /// The shape of one row (in the first batch that holds it).
    pub element_shape: Vec<usize>,
    /// The batches that hold it.
    pub batches: u64,
    /// Its rows (the first dimension), summed over batches.
    pub rows: u64,
    /// Its body bytes, summed over batches.
    pub bytes: u64,
    /// One summary per LoD level, from the top.
    pub levels: Vec<LevelStats>,
}

/// The sequences of one LoD level: how many, and how long (in sequences of
/// the next level, or rows for the last one).
///
/// See the [module docs](self).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// How many sequences have each length.
    counts: BTreeMap<u64, u64>,
    sequences: u64,
    total: u128,
}

impl Stats {
    /// No batches yet.
    ///
    /// ```
    /// assert!(lodt::batch::stats::Stats::new().tensors().is_empty());
    /// ```
    pub fn new() -> Self {
        Stats::default()
    }

    /// Adds every tensor of `batch`.
    ///
    /// See the [module docs](self).
    pub fn add(&mut self, batch: &Batch) {
        self.batches += 1;
        for (name, tensor) in batch.iter() {
            let index = match self.tensors.iter().position(|t| t.name == name) {
                Some(i) => i,
                None => {
                    self.tensors.push(TensorStats {
                        name: name.to_owned(),
                        dtype: tensor.dtype(),
                        element_shape: tensor.element_shape().to_vec(),
                        batches: 0,
                        rows: 0,
                        bytes: 0,
                        levels: Vec::new(),
                    });
                    self.tensors.len() - 1
                }
            };
            let stats = &mut self.tensors[index];
            stats.batches += 1;
            stats.rows += tensor.rows() as u64;
            stats.bytes += tensor.as_bytes().len() as u64;
            let lod = tensor.lod();
            if stats.levels.len() < lod.num_levels() {
                stats
                    .levels
                    .resize_with(lod.num_levels(), LevelStats::default);
            }
            for (level, summary) in lod.levels().zip(stats.levels.iter_mut()) {
                for length in level.lengths() {
                    summary.push(length);
                }
            }
        }
    }

    /// The batches added.
    ///
    /// ```
    /// let mut stats = lodt::batch::stats::Stats::new();
    /// stats.add(&lodt::Batch::new());
    /// assert_eq!(stats.batches(), 1);
    /// ```
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Each tensor's summary, in the order the names first appeared.
    ///
    /// See the [module docs](self).
    pub fn tensors(&self) -> &[TensorStats] {
        &self.tensors
    }
}

impl LevelStats {
    /// Counts one sequence of `length`.
    ///
    /// ```
    /// let mut level = lodt::batch::stats::LevelStats::default();
    /// level.push(3);
    /// assert_eq!(level.max(), Some(3));
    /// ```
    pub fn push(&mut self, length: u64) {
        *self.counts.entry(length).or_default() += 1;
        self.sequences += 1;
        self.total += u128::from(length);
    }

    /// How many sequences.
    ///
    /// See the [module docs](self).
    pub fn sequences(&self) -> u64 {
        self.sequences
    }

    /// The sum of the lengths (the sequences or rows of the next level).
    ///
    /// ```
    /// let mut level = lodt::batch::stats::LevelStats::default();
    /// level.push(3);
    /// level.push(4);
    /// assert_eq!(level.total(), 7);
    /// ```
    pub fn total(&self) -> u128 {
        self.total
    }

    /// The shortest length (`None` with no sequences).
    ///
    /// See the [module docs](self).
    pub fn min(&self) -> Option<u64> {
        self.counts.keys().next().copied()
    }

    /// The longest length.
    ///
    /// See the [module docs](self).
    pub fn max(&self) -> Option<u64> {
        self.counts.keys().next_back().copied()
    }

    /// The mean length.
    ///
    /// See the [module docs](self).
    pub fn mean(&self) -> Option<f64> {
        (self.sequences > 0).then(|| self.total as f64 / self.sequences as f64)
    }

    /// The length at quantile `q` (0 to 1; nearest rank: the smallest length
    /// such that at least `q` of the sequences are no longer).
    ///
    /// ```
    /// let mut level = lodt::batch::stats::LevelStats::default();
    /// for n in 1..=100 { level.push(n); }
    /// assert_eq!((level.quantile(0.5), level.quantile(0.99), level.quantile(1.0)), (Some(50), Some(99), Some(100)));
    /// assert_eq!(level.quantile(0.0), Some(1));
    /// ```
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.sequences == 0 {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.sequences as f64).ceil() as u64).clamp(1, self.sequences);
        let mut seen = 0;
        for (&length, &count) in &self.counts {
            seen += count;
            if seen >= rank {
                return Some(length);
            }
        }
        self.max()
    }

    /// How many sequences fall in each of at most `buckets` equal ranges of
    /// lengths from [`min`](LevelStats::min) to [`max`](LevelStats::max)
    /// (each range `start..end`, the last one including `max`).
    ///
    /// ```
    /// let mut level = lodt::batch::stats::LevelStats::default();
    /// for n in [1, 2, 2, 3, 9, 10] { level.push(n); }
    /// assert_eq!(level.histogram(2), vec![(1..6, 4), (6..11, 2)]);
    /// assert_eq!(level.histogram(100).len(), 10); // no wider than the lengths
    /// ```
    pub fn histogram(&self, buckets: usize) -> Vec<(Range<u64>, u64)> {
        let (Some(min), Some(max)) = (self.min(), self.max()) else {
            return Vec::new();
        };
        let span = max - min + 1;
        let buckets = (buckets.max(1) as u64).min(span);
        let width = span.div_ceil(buckets);
        let mut out: Vec<(Range<u64>, u64)> = (0..buckets)
            .map(|b| {
                let start = min + b * width;
                (start..(start + width).min(max + 1), 0)
            })
            .filter(|(r, _)| !r.is_empty())
            .collect();
        for (&length, &count) in &self.counts {
            let b = ((length - min) / width) as usize;
            if let Some((_, n)) = out.get_mut(b) {
                *n += count;
            }
        }
        out
    }
}
