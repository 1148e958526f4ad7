//! Length-sorted time-step batching for RNNs (the variable-length RNN design:
//! `SortBySeqLen`, `SegmentInputs`, `ConcatOutputs`).
//!
//! The sequences of one level are sorted by length, longest first (stable:
//! equal lengths keep their order). Time step `t` then holds item `t` of every
//! sorted sequence longer than `t`, so the batch shrinks as steps go on and
//! needs no padding:
//!
//! ```text
//!  origin      sorted       SegmentInputs: steps (read down)
//!  0: xxxx     0: xxxx       t=0  t=1  t=2  t=3
//!  1: xx       2: xxx         x    x    x    x     <- sequence 0
//!  2: xxx      1: xx          x    x    x          <- sequence 2
//!                             x    x               <- sequence 1
//!                  batch:     3    3    2    1
//! ```
//!
//! `ConcatOutputs` takes one output per step, in that sorted layout, and puts
//! the rows back in the original order and layout, with the original LoD.
//!
//! When the level is the last one, items are rows and each step is a dense
//! tensor of `batch` rows. At a higher level, items are the sub-sequences of
//! the next level, and each step is a LoD tensor whose top level holds one
//! sub-sequence per sorted sequence.

use super::{batch_size, merge, slice_top, to_usize, try_vec};
use crate::error::{Error, Result};
use crate::lod::Lod;
use crate::tensor::LodTensor;
use std::borrow::Borrow;

/// The sequences of one level sorted by length, descending and stable
/// (Paddle's `SortBySeqLen`), with what is needed to cut inputs into time
/// steps and to restore outputs. See the [module docs](self).
///
/// ```
/// use lodt::{ops::SortedSequences, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![4, 2, 3]])?;
/// let x = LodTensor::from_vec((0..9i32).collect(), vec![9, 1], lod)?;
/// let sorted = SortedSequences::try_new(x.lod(), 0)?;
/// assert_eq!(sorted.order(), &[0, 2, 1]);
/// assert_eq!(sorted.sorted_lengths(), &[4, 3, 2]);
/// assert_eq!(sorted.batch_sizes().collect::<Vec<_>>(), vec![3, 3, 2, 1]);
///
/// let steps = sorted.segment_inputs(&x)?;
/// assert_eq!(steps[0].as_slice::<i32>()?, &[0, 6, 4]);  // first row of 0, 2, 1
/// assert_eq!(steps[3].as_slice::<i32>()?, &[3]);
/// assert_eq!(sorted.concat_outputs(&steps)?, x);
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortedSequences {
    /// Levels `0..=level` of the input's LoD, rebased.
    lod: Lod,
    /// `order[k]`: the original index of the `k`-th sequence after sorting.
    order: Vec<usize>,
    /// `lengths[k]`: the length of sequence `order[k]` (non-increasing).
    lengths: Vec<u64>,
}

impl SortedSequences {
    /// Sorts the sequences of level `level` of `lod` by length, longest first;
    /// equal lengths keep their order. Lengths count the items of the next
    /// level (rows for the last level).
    ///
    /// ```
    /// use lodt::{ops::SortedSequences, Lod};
    /// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 3, 3]])?;
    /// let s = SortedSequences::try_new(&lod, 1)?;
    /// assert_eq!(s.order(), &[1, 2, 0]);
    /// assert!(SortedSequences::try_new(&lod, 2).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_new(lod: &Lod, level: usize) -> Result<Self> {
        let lengths: Vec<u64> = lod.lengths(level)?.collect();
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by(|&a, &b| lengths[b].cmp(&lengths[a]));
        let sorted = order.iter().map(|&o| lengths[o]).collect();
        let levels = (0..=level)
            .map(|l| Ok(lod.offsets(l)?.collect()))
            .collect::<Result<Vec<Vec<u64>>>>()?;
        Ok(SortedSequences {
            lod: Lod::from_validated(levels),
            order,
            lengths: sorted,
        })
    }

    /// The level that was sorted.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![2, 1], vec![1, 3, 3]]).unwrap();
    /// assert_eq!(lodt::ops::SortedSequences::try_new(&lod, 1).unwrap().level(), 1);
    /// ```
    pub fn level(&self) -> usize {
        self.lod.num_levels().saturating_sub(1)
    }

    /// Levels `0..=level` of the sorted LoD, rebased: the layout
    /// [`SortedSequences::concat_outputs`] restores.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![2, 1], vec![1, 3, 3]]).unwrap();
    /// let s = lodt::ops::SortedSequences::try_new(&lod, 0).unwrap();
    /// assert_eq!(s.lod().to_offsets(), [vec![0, 2, 3]]);
    /// ```
    pub fn lod(&self) -> &Lod {
        &self.lod
    }

    /// `order()[k]` is the original index of the `k`-th sequence after sorting
    /// (Paddle's `sorted_seqs`).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![1, 3, 3]]).unwrap();
    /// assert_eq!(lodt::ops::SortedSequences::try_new(&lod, 0).unwrap().order(), &[1, 2, 0]);
    /// ```
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The lengths in sorted order (non-increasing).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![1, 3, 0, 3]]).unwrap();
    /// let s = lodt::ops::SortedSequences::try_new(&lod, 0).unwrap();
    /// assert_eq!(s.sorted_lengths(), &[3, 3, 1, 0]);
    /// ```
    pub fn sorted_lengths(&self) -> &[u64] {
        &self.lengths
    }

    /// The number of sequences sorted.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![1, 3, 0]]).unwrap();
    /// assert_eq!(lodt::ops::SortedSequences::try_new(&lod, 0).unwrap().num_sequences(), 3);
    /// ```
    pub fn num_sequences(&self) -> usize {
        self.order.len()
    }

    /// The number of time steps: the longest length (0 if there is no item).
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![4, 2, 3]]).unwrap();
    /// assert_eq!(lodt::ops::SortedSequences::try_new(&lod, 0).unwrap().num_steps(), 4);
    /// ```
    pub fn num_steps(&self) -> u64 {
        self.lengths.first().copied().unwrap_or(0)
    }

    /// The batch size of time step `step`: how many sequences are longer than `step`.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![4, 2, 3]]).unwrap();
    /// let s = lodt::ops::SortedSequences::try_new(&lod, 0).unwrap();
    /// assert_eq!((s.batch_size(2), s.batch_size(4)), (2, 0));
    /// ```
    pub fn batch_size(&self, step: u64) -> usize {
        self.lengths.partition_point(|&len| len > step)
    }

    /// The batch size of every time step, in order.
    ///
    /// ```
    /// let lod = lodt::Lod::try_from_lengths(&[vec![4, 2, 3]]).unwrap();
    /// let s = lodt::ops::SortedSequences::try_new(&lod, 0).unwrap();
    /// assert_eq!(s.batch_sizes().collect::<Vec<_>>(), vec![3, 3, 2, 1]);
    /// ```
    pub fn batch_sizes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.num_steps()).map(|t| self.batch_size(t))
    }

    /// The start, in items of the next level (rows for the last level), of
    /// original sequence `o`.
    fn start(&self, o: usize) -> u64 {
        self.lod
            .levels()
            .last()
            .and_then(|level| level.get(o))
            .unwrap_or(0)
    }

    /// Cuts `x` into one tensor per time step (Paddle's `SegmentInputs`): step
    /// `t` holds item `t` of each sorted sequence longer than `t`, in sorted
    /// order. For the last level, items are rows and each step is a dense
    /// tensor of `batch_size(t)` rows; for a higher level, each step's top
    /// level holds one sub-sequence per sorted sequence, with the levels below.
    ///
    /// `x`'s LoD must start with the sorted levels (an error otherwise).
    ///
    /// ```
    /// use lodt::{ops::SortedSequences, Lod, LodTensor};
    /// // Two articles of 1 and 2 sentences; sort the articles.
    /// let lod = Lod::try_from_lengths(&[vec![1, 2], vec![2, 1, 3]])?;
    /// let x = LodTensor::from_vec((0..6u8).collect(), vec![6], lod)?;
    /// let sorted = SortedSequences::try_new(x.lod(), 0)?;
    /// let steps = sorted.segment_inputs(&x)?;
    /// assert_eq!(steps[0].lod().to_lengths(), vec![vec![1, 2]]); // sentence 0 of articles 1, 0
    /// assert_eq!(steps[0].as_slice::<u8>()?, &[2, 0, 1]);
    /// assert_eq!(steps[1].as_slice::<u8>()?, &[3, 4, 5]);
    /// assert_eq!(sorted.concat_outputs(&steps)?, x);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn segment_inputs(&self, x: &LodTensor) -> Result<Vec<LodTensor>> {
        self.check_input(x)?;
        let steps = to_usize(self.num_steps(), "number of time steps")?;
        x.check_rows_without_bytes(steps, "segment_inputs (one tensor per time step)")?;
        let last_level = x.lod().num_levels() == self.lod.num_levels();
        let mut out = try_vec(steps, "time steps")?;
        for t in 0..steps as u64 {
            let batch = self.batch_size(t);
            let items = self.order[..batch].iter().map(|&o| {
                let item = to_usize(self.start(o) + t, "item index")?;
                if last_level {
                    x.slice_rows(item, item + 1)
                } else {
                    x.slice_level(self.lod.num_levels(), item, item + 1)
                }
            });
            out.push(merge(items.collect::<Result<Vec<_>>>()?)?);
        }
        Ok(out)
    }

    /// Checks that `x`'s LoD starts with the sorted levels.
    fn check_input(&self, x: &LodTensor) -> Result<()> {
        let levels = self.lod.num_levels();
        if x.lod().num_levels() < levels {
            return Err(Error::Mismatch {
                what: "LoD levels of the input to segment (at least)",
                expected: levels as u64,
                found: x.lod().num_levels() as u64,
            });
        }
        for (l, level) in self.lod.levels().enumerate() {
            if !x.lod().offsets(l)?.eq(level.iter()) {
                return Err(Error::InvalidArgument(format!(
                    "the input's LoD level {l} differs from the sorted LoD {}",
                    self.lod
                )));
            }
        }
        Ok(())
    }

    /// Restores step outputs to the original order and layout (Paddle's
    /// `ConcatOutputs`): `steps[t]` must hold `batch_size(t)` items (rows, or
    /// top-level sequences) in sorted order, as [`SortedSequences::segment_inputs`]
    /// makes them; the result holds, for each original sequence in order, its
    /// items from step 0 on, under the sorted LoD levels.
    ///
    /// Steps may have another element shape than the input (an RNN's hidden
    /// size) but must agree with each other. With no step at all (every
    /// sequence empty) there is nothing to take a dtype from: an error.
    ///
    /// ```
    /// use lodt::{ops::SortedSequences, Lod, LodTensor};
    /// let lod = Lod::try_from_lengths(&[vec![1, 2]])?;
    /// let sorted = SortedSequences::try_new(&lod, 0)?;
    /// // Step outputs of width 2 in sorted order (sequence 1 first).
    /// let s0 = LodTensor::from_vec(vec![10f32, 11., 20., 21.], vec![2, 2], Lod::empty())?;
    /// let s1 = LodTensor::from_vec(vec![12f32, 13.], vec![1, 2], Lod::empty())?;
    /// let out = sorted.concat_outputs([&s0, &s1])?;
    /// assert_eq!(out.as_slice::<f32>()?, &[20., 21., 10., 11., 12., 13.]);
    /// assert_eq!(out.lod(), &lod);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn concat_outputs<I>(&self, steps: I) -> Result<LodTensor>
    where
        I: IntoIterator,
        I::Item: Borrow<LodTensor>,
    {
        let steps: Vec<I::Item> = steps.into_iter().collect();
        let steps: Vec<&LodTensor> = steps.iter().map(Borrow::borrow).collect();
        if steps.len() as u64 != self.num_steps() {
            return Err(Error::Mismatch {
                what: "number of step outputs",
                expected: self.num_steps(),
                found: steps.len() as u64,
            });
        }
        if steps.is_empty() {
            return Err(Error::InvalidArgument(
                "no step outputs (every sequence is empty): no dtype or element shape to restore"
                    .into(),
            ));
        }
        for (t, step) in steps.iter().enumerate() {
            let expected = self.batch_size(t as u64);
            let found = batch_size(step);
            if found != Some(expected) {
                return Err(Error::Mismatch {
                    what: "batch size of a step output (its top-level sequences, or rows)",
                    expected: expected as u64,
                    found: found.map_or(0, |n| n as u64),
                });
            }
        }
        let mut rank = vec![0usize; self.order.len()];
        for (k, &o) in self.order.iter().enumerate() {
            rank[o] = k;
        }
        let lengths = self.lod.lengths(self.level())?;
        let mut items = Vec::new();
        for (o, len) in lengths.enumerate() {
            let k = rank[o];
            for step in &steps[..to_usize(len, "sequence length")?] {
                items.push(slice_top(step, k, k + 1)?);
            }
        }
        let merged = merge(items)?;
        let mut levels = self.lod.to_offsets();
        levels.extend(merged.lod().to_offsets());
        // The sorted levels index exactly the merged items (each step's batch
        // was checked above), and the merged levels are valid below them:
        // copied into one block (O(offsets), next to the merge's copy of
        // the items).
        LodTensor::try_from_parts(
            merged.dtype(),
            merged.shape().to_vec(),
            merged.buffer().clone(),
            Lod::from_validated(levels),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_004_values() {
        let lod = Lod::try_from_lengths(&[vec![4, 2, 3]]).unwrap();
        let x = LodTensor::from_vec((0..9i64).collect(), vec![9, 1], lod).unwrap();
        let sorted = SortedSequences::try_new(x.lod(), 0).unwrap();
        assert_eq!(sorted.sorted_lengths(), &[4, 3, 2]);
        let steps = sorted.segment_inputs(&x).unwrap();
        let got: Vec<Vec<i64>> = steps
            .iter()
            .map(|s| s.as_slice::<i64>().unwrap().to_vec())
            .collect();
        assert_eq!(got, vec![vec![0, 6, 4], vec![1, 7, 5], vec![2, 8], vec![3]]);
        assert_eq!(sorted.concat_outputs(&steps).unwrap(), x);
    }

    #[test]
    fn stable_with_empty_sequences() {
        let lod = Lod::try_from_lengths(&[vec![0, 2, 2, 0, 1]]).unwrap();
        let s = SortedSequences::try_new(&lod, 0).unwrap();
        assert_eq!(s.order(), &[1, 2, 4, 0, 3]);
        assert_eq!(s.batch_sizes().collect::<Vec<_>>(), vec![3, 2]);
    }

    #[test]
    fn wrong_steps_are_rejected() {
        let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
        let x = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], lod).unwrap();
        let s = SortedSequences::try_new(x.lod(), 0).unwrap();
        let steps = s.segment_inputs(&x).unwrap();
        assert!(matches!(
            s.concat_outputs(&steps[..1]),
            Err(Error::Mismatch {
                what: "number of step outputs",
                ..
            })
        ));
        assert!(matches!(
            s.concat_outputs([&steps[1], &steps[0]]),
            Err(Error::Mismatch {
                expected: 2,
                found: 1,
                ..
            })
        ));
        let other = LodTensor::from_vec(
            vec![1u8, 9, 3],
            vec![3],
            Lod::try_from_lengths(&[vec![1, 2]]).unwrap(),
        )
        .unwrap();
        assert!(matches!(
            s.segment_inputs(&other),
            Err(Error::InvalidArgument(_))
        ));
        let plain = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Lod::empty()).unwrap();
        assert!(matches!(
            s.segment_inputs(&plain),
            Err(Error::Mismatch { .. })
        ));
    }
}
