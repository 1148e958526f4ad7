//! Re-batching: regroups the top-level rows of consecutive mini-batches into
//! batches of exactly `N` top-level rows (the last one may be shorter), as
//! `lodt convert --batch-rows N` does.
//!
//! A batch's *top-level rows* are the top-level sequences of its LoD tensors
//! and the rows of its 0-level tensors; every tensor of a batch must have the
//! same number. Rows keep their order; a sequence is never split.
//!
//! ```text
//!  in:   [ a0 a1 a2 ] [ b0 ] [ c0 c1 c2 c3 ]          (3 batches, 8 rows)
//!  N=3:  [ a0 a1 a2 ] [ b0 c0 c1 ] [ c2 c3 ]
//! ```
//!
//! ```
//! use lodt::{batch::rebatch::rebatch, Batch, Lod, LodTensor};
//! let batch = |lengths: Vec<u64>, first: i64| -> Result<Batch, lodt::Error> {
//!     let rows = lengths.iter().sum::<u64>() as usize;
//!     let lod = Lod::try_from_lengths(&[lengths])?;
//!     let words = LodTensor::from_vec((first..first + rows as i64).collect(), vec![rows], lod)?;
//!     Batch::try_from_tensors([("words", words)])
//! };
//! let input = vec![batch(vec![2, 1], 0), batch(vec![1], 3), batch(vec![3, 1], 4)];
//! let out: Vec<Batch> = rebatch(input, 2)?.collect::<Result<_, _>>()?;
//! let lengths: Vec<_> = out.iter().map(|b| b.get("words").unwrap().lod().to_lengths()).collect();
//! assert_eq!(lengths, vec![vec![vec![2, 1]], vec![vec![1, 3]], vec![vec![1]]]);
//! assert_eq!(out[1].get("words").unwrap().as_slice::<i64>()?, &[3, 4, 5, 6]);
//! # Ok::<(), lodt::Error>(())
//! ```
//!
//! Each output batch takes the metadata of the input batch its first row comes
//! from. 0-D tensors cannot be regrouped (an error). Memory holds one input
//! batch and one output batch.

use super::{Batch, BatchReader};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::lod::Lod;
use crate::tensor::LodTensor;
use std::collections::BTreeMap;

/// The rows of a batch, checking that its tensors agree.
fn batch_rows(batch: &Batch, index: u64) -> Result<usize> {
    let mut rows = None;
    for (name, tensor) in batch.iter() {
        if tensor.shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "rebatch: batch {index}: tensor {name:?} is 0-D; a scalar has no rows to regroup"
            )));
        }
        let r = tensor.top_level_rows();
        match rows {
            None => rows = Some(r),
            Some(expected) if expected != r => {
                return Err(Error::InvalidArgument(format!(
                    "rebatch: batch {index}: tensor {name:?} has {r} top-level rows, the batch's first tensor has {expected}"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(rows.unwrap_or(0))
}

/// What every batch must agree on for one tensor.
#[derive(Clone, PartialEq, Eq)]
struct Layout {
    name: String,
    dtype: DType,
    element_shape: Vec<usize>,
    levels: usize,
}

impl Layout {
    fn of(name: &str, tensor: &LodTensor) -> Self {
        Layout {
            name: name.to_owned(),
            dtype: tensor.dtype(),
            element_shape: tensor.element_shape().to_vec(),
            levels: tensor.lod().num_levels(),
        }
    }

    fn describe(&self) -> String {
        format!(
            "{:?} ({}, element shape {:?}, {} LoD levels)",
            self.name, self.dtype, self.element_shape, self.levels
        )
    }
}

/// One output tensor being assembled.
struct Column {
    layout: Layout,
    levels: Vec<Vec<u64>>,
    data: Vec<u8>,
    rows: usize,
}

impl Column {
    fn new(layout: Layout) -> Self {
        Column {
            levels: vec![vec![0]; layout.levels],
            layout,
            data: Vec::new(),
            rows: 0,
        }
    }

    /// Appends top-level rows `begin..end` of `tensor`.
    fn append(&mut self, tensor: &LodTensor, begin: usize, end: usize) -> Result<()> {
        if self.layout.levels == 0 {
            let row_bytes = tensor.row_bytes();
            let bytes = tensor
                .as_bytes()
                .get(begin * row_bytes..end * row_bytes)
                .ok_or(Error::OutOfRange {
                    what: "row range",
                    index: end as u64,
                    len: tensor.rows() as u64 + 1,
                })?;
            self.data.extend_from_slice(bytes);
            self.rows += end - begin;
            return Ok(());
        }
        let view = tensor.slice_level(0, begin, end)?;
        for (l, level) in self.levels.iter_mut().enumerate() {
            let base = level.last().copied().unwrap_or(0);
            for offset in view.lod().offsets(l)?.skip(1) {
                level.push(base.checked_add(offset).ok_or(Error::Overflow {
                    what: "rebatched LoD offset",
                })?);
            }
        }
        self.data.extend_from_slice(view.as_bytes());
        self.rows += view.rows();
        Ok(())
    }

    fn finish(self) -> Result<(String, LodTensor)> {
        let mut shape = Vec::with_capacity(1 + self.layout.element_shape.len());
        shape.push(self.rows);
        shape.extend_from_slice(&self.layout.element_shape);
        let lod = Lod::try_from_stored(self.levels)?;
        let tensor = LodTensor::try_new(self.layout.dtype, shape, self.data, lod)?;
        Ok((self.layout.name, tensor))
    }
}

/// An output batch being assembled.
struct Accumulator {
    columns: Vec<Column>,
    metadata: BTreeMap<String, String>,
    rows: usize,
}

/// The iterator returned by [`rebatch`].
///
/// See the [module docs](self).
pub struct Rebatch<I> {
    source: I,
    rows: usize,
    /// The current input batch and how many of its rows were taken.
    pending: Option<(Batch, usize, usize)>,
    layout: Option<Vec<Layout>>,
    index: u64,
    failed: bool,
}

/// Regroups the top-level rows of `batches` into batches of `rows` rows. See
/// the [module docs](self). An error if `rows` is 0.
///
/// ```
/// assert!(lodt::batch::rebatch::rebatch(Vec::<Result<lodt::Batch, lodt::Error>>::new(), 0).is_err());
/// ```
pub fn rebatch<I, E>(batches: I, rows: usize) -> Result<Rebatch<I::IntoIter>>
where
    I: IntoIterator<Item = std::result::Result<Batch, E>>,
    E: From<Error>,
{
    if rows == 0 {
        return Err(Error::InvalidArgument(
            "rebatch: the number of rows per batch must be at least 1".into(),
        ));
    }
    Ok(Rebatch {
        source: batches.into_iter(),
        rows,
        pending: None,
        layout: None,
        index: 0,
        failed: false,
    })
}

impl<I> Rebatch<I> {
    /// Checks a new input batch against the first one and returns its rows.
    fn admit(&mut self, batch: &Batch) -> Result<usize> {
        let index = self.index;
        self.index += 1;
        let rows = batch_rows(batch, index)?;
        if batch.is_empty() {
            return Ok(0);
        }
        let layout: Vec<Layout> = batch.iter().map(|(n, t)| Layout::of(n, t)).collect();
        match &self.layout {
            None => self.layout = Some(layout),
            Some(first) if *first != layout => {
                let describe = |l: &[Layout]| {
                    l.iter()
                        .map(Layout::describe)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(Error::InvalidArgument(format!(
                    "rebatch: batch {index} holds [{}], the first batch holds [{}]",
                    describe(&layout),
                    describe(first)
                )));
            }
            Some(_) => {}
        }
        Ok(rows)
    }

    fn fill<E>(&mut self) -> Option<std::result::Result<Batch, E>>
    where
        I: Iterator<Item = std::result::Result<Batch, E>>,
        E: From<Error>,
    {
        let mut acc: Option<Accumulator> = None;
        loop {
            let exhausted = self
                .pending
                .as_ref()
                .is_none_or(|(_, taken, total)| taken >= total);
            if exhausted {
                match self.source.next() {
                    None => break,
                    Some(Err(e)) => return Some(Err(e)),
                    Some(Ok(batch)) => {
                        let rows = match self.admit(&batch) {
                            Ok(rows) => rows,
                            Err(e) => return Some(Err(e.into())),
                        };
                        self.pending = Some((batch, 0, rows));
                        continue;
                    }
                }
            }
            let (batch, taken, total) = self.pending.as_mut()?;
            let acc = acc.get_or_insert_with(|| Accumulator {
                columns: batch
                    .iter()
                    .map(|(n, t)| Column::new(Layout::of(n, t)))
                    .collect(),
                metadata: batch.metadata().clone(),
                rows: 0,
            });
            let take = (self.rows - acc.rows).min(*total - *taken);
            for (column, (_, tensor)) in acc.columns.iter_mut().zip(batch.iter()) {
                if let Err(e) = column.append(tensor, *taken, *taken + take) {
                    return Some(Err(e.into()));
                }
            }
            *taken += take;
            acc.rows += take;
            if acc.rows == self.rows {
                break;
            }
        }
        let acc = acc?;
        let mut out = Batch::new();
        for column in acc.columns {
            let pushed = column
                .finish()
                .and_then(|(name, tensor)| out.push(name, tensor));
            if let Err(e) = pushed {
                return Some(Err(e.into()));
            }
        }
        *out.metadata_mut() = acc.metadata;
        Some(Ok(out))
    }
}

impl<I, E> Iterator for Rebatch<I>
where
    I: Iterator<Item = std::result::Result<Batch, E>>,
    E: From<Error>,
{
    type Item = std::result::Result<Batch, E>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.fill();
        if matches!(item, Some(Err(_))) {
            self.failed = true;
        }
        item
    }
}

/// A re-batched reader is a reader: the source's file metadata, and no batch
/// count up front (it depends on the rows).
///
/// ```
/// use lodt::batch::{rebatch::rebatch, BatchReader};
/// use lodt::{format, Batch, LodTensor};
/// let t = LodTensor::from_vec(vec![1u8, 2, 3], vec![3], Default::default())?;
/// let batch = Batch::try_from_tensors([("x", t)])?;
/// let bytes = format::to_bytes([&batch, &batch], [("k".into(), "v".into())].into())?;
/// let reader = rebatch(format::StreamReader::try_new(&bytes[..])?, 4)?;
/// assert_eq!((reader.metadata()["k"].as_str(), reader.num_batches()), ("v", None));
/// assert_eq!(reader.map(|b| b.map(|b| b.get("x").unwrap().rows())).collect::<Result<Vec<_>, _>>()?, vec![4, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<R> BatchReader for Rebatch<R>
where
    R: BatchReader,
    R::Error: From<Error>,
{
    type Error = R::Error;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.source.metadata()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(lengths: Vec<u64>, first: i64) -> Batch {
        let rows = lengths.iter().sum::<u64>() as usize;
        let lod = Lod::try_from_lengths(std::slice::from_ref(&lengths)).unwrap();
        let words = LodTensor::from_vec((first..first + rows as i64).collect(), vec![rows, 1], lod)
            .unwrap();
        let labels = LodTensor::from_vec(
            (0..lengths.len() as i32)
                .map(|i| i + first as i32)
                .collect(),
            vec![lengths.len()],
            Lod::empty(),
        )
        .unwrap();
        let mut b = Batch::try_from_tensors([("words", words), ("labels", labels)]).unwrap();
        b.metadata_mut().insert("first".into(), first.to_string());
        b
    }

    fn run(input: Vec<Batch>, rows: usize) -> Vec<Batch> {
        rebatch(input.into_iter().map(Ok::<_, Error>), rows)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap()
    }

    #[test]
    fn regroups_rows_across_batches() {
        let out = run(
            vec![
                words(vec![2, 1], 0),
                words(vec![1], 3),
                words(vec![3, 0, 1], 4),
            ],
            2,
        );
        assert_eq!(out.len(), 3);
        let w: Vec<_> = out.iter().map(|b| b.get("words").unwrap()).collect();
        assert_eq!(w[0].lod().to_lengths(), vec![vec![2, 1]]);
        assert_eq!(w[1].lod().to_lengths(), vec![vec![1, 3]]);
        assert_eq!(w[2].lod().to_lengths(), vec![vec![0, 1]]);
        assert_eq!(w[1].as_slice::<i64>().unwrap(), &[3, 4, 5, 6]);
        assert_eq!(w[1].shape(), &[4, 1]);
        assert_eq!(w[2].as_slice::<i64>().unwrap(), &[7]);
        let labels: Vec<_> = out
            .iter()
            .map(|b| b.get("labels").unwrap().as_slice::<i32>().unwrap().to_vec())
            .collect();
        assert_eq!(labels, vec![vec![0, 1], vec![3, 4], vec![5, 6]]);
        let firsts: Vec<_> = out.iter().map(|b| b.metadata()["first"].clone()).collect();
        assert_eq!(firsts, vec!["0", "3", "4"]);
    }

    #[test]
    fn multi_level_rows_keep_their_sub_sequences() {
        let lod = Lod::try_from_lengths(&[vec![2, 1, 1], vec![1, 2, 3, 0]]).unwrap();
        let t = LodTensor::from_vec((0..6u8).collect(), vec![6], lod).unwrap();
        let b = Batch::try_from_tensors([("t", t)]).unwrap();
        let out = run(vec![b.clone(), b], 2);
        let lod: Vec<_> = out
            .iter()
            .map(|b| b.get("t").unwrap().lod().to_lengths())
            .collect();
        assert_eq!(
            lod,
            vec![
                vec![vec![2, 1], vec![1, 2, 3]],
                vec![vec![1, 2], vec![0, 1, 2]],
                vec![vec![1, 1], vec![3, 0]],
            ]
        );
        let data: Vec<_> = out
            .iter()
            .map(|b| b.get("t").unwrap().as_slice::<u8>().unwrap().to_vec())
            .collect();
        assert_eq!(
            data,
            vec![vec![0, 1, 2, 3, 4, 5], vec![0, 1, 2], vec![3, 4, 5]]
        );
    }

    #[test]
    fn mismatched_batches_are_errors() {
        let a = words(vec![1], 0);
        let t = LodTensor::from_vec(vec![1f32], vec![1], Lod::empty()).unwrap();
        let b = Batch::try_from_tensors([("words", t)]).unwrap();
        let mut it = rebatch(vec![Ok::<_, Error>(a), Ok(b)], 5).unwrap();
        let err = it.next().unwrap().unwrap_err();
        assert!(err.to_string().contains("batch 1 holds"), "{err}");
        assert!(it.next().is_none());
        let scalar = LodTensor::from_vec(vec![1f32], vec![], Lod::empty()).unwrap();
        let s = Batch::try_from_tensors([("s", scalar)]).unwrap();
        let err = rebatch(vec![Ok::<_, Error>(s)], 1)
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("0-D"), "{err}");
    }

    #[test]
    fn empty_input_gives_no_batch_and_source_errors_pass_through() {
        assert!(run(vec![], 3).is_empty());
        let items = vec![
            Ok(words(vec![1], 0)),
            Err(Error::InvalidArgument("boom".into())),
        ];
        let out: Vec<_> = rebatch(items, 4).unwrap().collect();
        assert_eq!(out.len(), 1);
        assert!(out[0].is_err());
    }
}
