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
//! Batches whose metadata differ are never merged: an input batch whose
//! metadata differs from the rows gathered so far starts a new output batch
//! (which may then be shorter than `N`). 0-D tensors cannot be regrouped (an
//! error). Memory holds one input batch and one output batch.
//!
//! [`rebatch_bytes`] regroups by size instead ([`BatchBytes`]): batches of a
//! sensible size pass unchanged, larger ones are split and runs of smaller
//! ones merged, as `lodt convert` does by default; [`Rebatch::report`] says
//! what it did.

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

/// Appends `bytes` to `data`; running out of memory is an error, not an abort
/// (a rebatched tensor's size is set by the input and the batch options).
fn try_extend(data: &mut Vec<u8>, bytes: &[u8]) -> Result<()> {
    data.try_reserve(bytes.len())
        .map_err(|_| out_of_memory("tensor bytes", data.len() + bytes.len()))?;
    data.extend_from_slice(bytes);
    Ok(())
}

fn out_of_memory(what: &str, bytes: usize) -> Error {
    Error::InvalidArgument(format!(
        "cannot allocate {bytes} bytes of {what} for a rebatched batch (out of memory); \
         ask for smaller batches (batch_rows, batch_bytes)"
    ))
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
            try_extend(&mut self.data, bytes)?;
            self.rows += end - begin;
            return Ok(());
        }
        let view = tensor.slice_level(0, begin, end)?;
        for (l, level) in self.levels.iter_mut().enumerate() {
            let base = level.last().copied().unwrap_or(0);
            let offsets = view.lod().offsets(l)?;
            level
                .try_reserve(offsets.len().saturating_sub(1))
                .map_err(|_| out_of_memory("LoD offsets", level.len() * 8))?;
            for offset in offsets.skip(1) {
                level.push(base.checked_add(offset).ok_or(Error::Overflow {
                    what: "rebatched LoD offset",
                })?);
            }
        }
        try_extend(&mut self.data, view.as_bytes())?;
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
    /// The bytes of the whole input batches merged into it.
    bytes: u64,
    /// Input batches it takes rows from.
    sources: u64,
    /// Whether its last input batch was taken whole.
    whole: bool,
}

impl Accumulator {
    /// Whether rows of `batch` may join it: the same metadata and the same
    /// tensors (names and layouts). Rows of other batches are never merged.
    fn accepts(&self, batch: &Batch) -> bool {
        self.metadata == *batch.metadata()
            && self.columns.len() == batch.len()
            && self
                .columns
                .iter()
                .zip(batch.iter())
                .all(|(c, (n, t))| c.layout == Layout::of(n, t))
    }
}

/// The bytes a batch holds: tensor bodies and LoD offsets (8 bytes each), as
/// [`rebatch_bytes`] measures batches.
///
/// ```
/// use lodt::{batch::rebatch::batch_bytes, Batch, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
/// let batch = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1i64, 2, 3], vec![3], lod)?)])?;
/// assert_eq!(batch_bytes(&batch), 3 * 8 + 3 * 8); // 3 values, 3 offsets
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn batch_bytes(batch: &Batch) -> u64 {
    batch
        .iter()
        .map(|(_, t)| (t.as_bytes().len() as u64).saturating_add(t.lod().offsets_bytes()))
        .fold(0u64, u64::saturating_add)
}

/// How [`rebatch_bytes`] sizes batches, in bytes ([`batch_bytes`]).
///
/// A batch of `min..=max` bytes passes unchanged (unless rows gathered
/// before it are pending). A larger one is split into `ceil(bytes / target)`
/// batches of equal rows. A run of smaller ones is merged while the merged
/// batch stays at most `target` bytes and the metadata agree.
///
/// ```
/// use lodt::batch::rebatch::BatchBytes;
/// assert_eq!(BatchBytes::DEFAULT.min, 1 << 20);
/// assert_eq!(BatchBytes::DEFAULT.max, 64 << 20);
/// assert_eq!(BatchBytes::DEFAULT.target, 16 << 20);
/// let exact = BatchBytes::about(4096)?;
/// assert_eq!((exact.min, exact.max, exact.target), (4096, 4096, 4096));
/// assert!(BatchBytes::about(0).is_err());
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchBytes {
    /// Smaller batches are merged.
    pub min: u64,
    /// Larger batches are split.
    pub max: u64,
    /// The size batches are split and merged to.
    pub target: u64,
}

impl BatchBytes {
    /// `lodt convert`'s default: batches of 1 MiB to 64 MiB pass, the others
    /// are split or merged to about 16 MiB.
    pub const DEFAULT: BatchBytes = BatchBytes {
        min: 1 << 20,
        max: 64 << 20,
        target: 16 << 20,
    };

    /// Every batch split or merged to about `bytes` (`--batch-bytes`). An
    /// error if `bytes` is 0.
    ///
    /// See [`BatchBytes`].
    pub fn about(bytes: u64) -> Result<Self> {
        if bytes == 0 {
            return Err(Error::InvalidArgument(
                "rebatch: the bytes per batch must be at least 1".into(),
            ));
        }
        Ok(BatchBytes {
            min: bytes,
            max: bytes,
            target: bytes,
        })
    }
}

impl std::str::FromStr for BatchBytes {
    type Err = Error;

    /// `auto` ([`BatchBytes::DEFAULT`]) or a byte count as
    /// [`parse_byte_count`] reads it ([`BatchBytes::about`] that many bytes):
    /// `--batch-bytes` of `lodt convert`, `batch_bytes=` of `lodt.convert`.
    ///
    /// ```
    /// use lodt::batch::rebatch::BatchBytes;
    /// assert_eq!("auto".parse::<BatchBytes>()?, BatchBytes::DEFAULT);
    /// assert_eq!("4K".parse::<BatchBytes>()?, BatchBytes::about(4096)?);
    /// assert!("0".parse::<BatchBytes>().is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    fn from_str(text: &str) -> Result<Self> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(BatchBytes::DEFAULT);
        }
        BatchBytes::about(parse_byte_count(text)?)
    }
}

/// A byte count: a number with an optional suffix `K`, `M`, `G`, `T`
/// (powers of 1024; `KiB`, `MB` and the like too, case-insensitive), at
/// least 1 byte. What every size option of the CLI and `batch_bytes="16M"`
/// in Python read.
///
/// ```
/// use lodt::batch::rebatch::parse_byte_count;
/// assert_eq!(parse_byte_count("268435456")?, 256 << 20);
/// assert_eq!(parse_byte_count("256M")?, 256 << 20);
/// assert_eq!(parse_byte_count("1GiB")?, 1 << 30);
/// assert!(parse_byte_count("0").is_err());
/// assert!(parse_byte_count("3 parsecs").is_err());
/// assert!(parse_byte_count("99999999999T").is_err()); // past 16 EiB
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn parse_byte_count(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| {
        Error::InvalidArgument(format!(
            "{text:?} is not a byte count (like 268435456, 256M or 1GiB)"
        ))
    })?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(Error::InvalidArgument(format!(
                "{text:?}: unknown unit {unit:?} (use K, M, G or T)"
            )));
        }
    };
    n.checked_mul(1u64 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("{text:?}: expected a size from 1 byte to 16 EiB"))
        })
}

/// How [`Rebatch`] groups rows.
#[derive(Clone, Copy, Debug)]
enum Target {
    Rows(usize),
    Bytes(BatchBytes),
}

/// What a [`Rebatch`] did so far: input batches passed unchanged, split,
/// merged (with others), and batches written.
///
/// ```
/// use lodt::{batch::rebatch::{rebatch_bytes, BatchBytes}, Batch, LodTensor};
/// let small = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8; 10], vec![10], Default::default())?)])?;
/// let mut rebatched = rebatch_bytes(vec![Ok::<_, lodt::Error>(small.clone()); 5], BatchBytes::about(25)?)?;
/// let out: Vec<Batch> = rebatched.by_ref().collect::<Result<_, _>>()?;
/// assert_eq!(out.len(), 3); // 20 + 20 + 10 bytes
/// let report = rebatched.report();
/// assert_eq!((report.input, report.merged, report.output), (5, 4, 3)); // the last one is alone
/// # Ok::<(), lodt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RebatchReport {
    /// Input batches read.
    pub input: u64,
    /// Input batches written unchanged.
    pub passed: u64,
    /// Input batches split into several.
    pub split: u64,
    /// Input batches merged with others.
    pub merged: u64,
    /// Batches written.
    pub output: u64,
}

/// The iterator returned by [`rebatch`] and [`rebatch_bytes`].
///
/// See the [module docs](self).
pub struct Rebatch<I> {
    source: I,
    target: Target,
    /// The current input batch, how many of its rows were taken, its rows
    /// and its bytes.
    pending: Option<(Batch, usize, usize, u64)>,
    layout: Option<Vec<Layout>>,
    index: u64,
    failed: bool,
    report: RebatchReport,
    /// By size: the pending batch cannot be regrouped and passes as it is.
    opaque: bool,
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
    Ok(Rebatch::new(batches.into_iter(), Target::Rows(rows)))
}

/// Regroups the top-level rows of `batches` by size (see [`BatchBytes`]),
/// never splitting a sequence nor merging batches whose metadata or tensors
/// (names, dtypes, element shapes, levels) differ. A batch that cannot be
/// regrouped (tensors with different numbers of top-level rows, a 0-D
/// tensor, no rows) passes as it is. An error if a bound is 0 or
/// `min > max`.
///
/// ```
/// use lodt::{batch::rebatch::{rebatch_bytes, BatchBytes}, Batch, LodTensor};
/// let big = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![7u32; 100], vec![100], Default::default())?)])?;
/// let out: Vec<Batch> = rebatch_bytes([Ok::<_, lodt::Error>(big)], BatchBytes::about(100)?)?.collect::<Result<_, _>>()?;
/// let rows: Vec<usize> = out.iter().map(|b| b.get("x").unwrap().rows()).collect();
/// assert_eq!(rows, vec![25, 25, 25, 25]); // 400 bytes in 4 batches of 100
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn rebatch_bytes<I, E>(batches: I, bytes: BatchBytes) -> Result<Rebatch<I::IntoIter>>
where
    I: IntoIterator<Item = std::result::Result<Batch, E>>,
    E: From<Error>,
{
    if bytes.min == 0 || bytes.target == 0 || bytes.min > bytes.max {
        return Err(Error::InvalidArgument(format!(
            "rebatch: expected 0 < min <= max and target > 0, found min {}, max {}, target {}",
            bytes.min, bytes.max, bytes.target
        )));
    }
    Ok(Rebatch::new(batches.into_iter(), Target::Bytes(bytes)))
}

/// What to take from the pending input batch.
enum Step {
    /// Emit what was gathered; the pending batch starts the next output.
    Emit,
    /// Take this many rows, then emit.
    TakeAndEmit(usize),
    /// Take this many rows and go on gathering.
    Take(usize),
}

impl<I> Rebatch<I> {
    fn new(source: I, target: Target) -> Self {
        Rebatch {
            source,
            target,
            pending: None,
            layout: None,
            index: 0,
            failed: false,
            report: RebatchReport::default(),
            opaque: false,
        }
    }

    /// What was done so far.
    ///
    /// See [`RebatchReport`].
    pub fn report(&self) -> RebatchReport {
        self.report
    }

    /// The next step, given what is gathered (`acc`) and the pending batch.
    fn step(&self, acc: Option<&Accumulator>, taken: usize, total: usize, bytes: u64) -> Step {
        let left = total - taken;
        match self.target {
            Target::Rows(rows) => {
                let have = acc.map_or(0, |a| a.rows);
                let take = (rows - have).min(left);
                if have + take == rows {
                    Step::TakeAndEmit(take)
                } else {
                    Step::Take(take)
                }
            }
            Target::Bytes(b) => match acc {
                // Nothing gathered: pass, split or start merging.
                None if bytes > b.max => {
                    let pieces = bytes.div_ceil(b.target).max(1);
                    let per = (total as u64).div_ceil(pieces).max(1) as usize;
                    Step::TakeAndEmit(per.min(left))
                }
                None if bytes >= b.min => Step::TakeAndEmit(left),
                None => Step::Take(left),
                // Merging small batches: only another small one that fits.
                Some(a) if bytes < b.min && a.bytes.saturating_add(bytes) <= b.target => {
                    Step::Take(left)
                }
                Some(_) => Step::Emit,
            },
        }
    }

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
                .is_none_or(|(_, taken, total, _)| taken >= total);
            if exhausted {
                match self.source.next() {
                    None => break,
                    Some(Err(e)) => return Some(Err(e)),
                    Some(Ok(batch)) => {
                        self.report.input += 1;
                        let bytes = batch_bytes(&batch);
                        if matches!(self.target, Target::Bytes(_)) {
                            // By size, a batch that cannot be regrouped
                            // (ragged, 0-D, empty) passes as it is.
                            self.index += 1;
                            let rows = batch_rows(&batch, self.index - 1).ok().filter(|&r| r > 0);
                            self.opaque = rows.is_none();
                            self.pending = Some((batch, 0, rows.unwrap_or(1), bytes));
                            continue;
                        }
                        let rows = match self.admit(&batch) {
                            Ok(rows) => rows,
                            Err(e) => return Some(Err(e.into())),
                        };
                        self.pending = Some((batch, 0, rows, bytes));
                        continue;
                    }
                }
            }
            if self.opaque {
                if acc.is_some() {
                    break;
                }
                self.opaque = false;
                self.report.passed += 1;
                self.report.output += 1;
                let (batch, ..) = self.pending.take()?;
                return Some(Ok(batch));
            }
            let (batch, taken, total, bytes) = self.pending.as_ref()?;
            let (taken, total, bytes) = (*taken, *total, *bytes);
            // Rows of batches whose metadata (or, by size, whose tensors)
            // differ are never merged.
            if let Some(a) = &acc
                && taken == 0
                && !a.accepts(batch)
            {
                break;
            }
            let (take, emit) = match self.step(acc.as_ref(), taken, total, bytes) {
                Step::Emit => break,
                Step::TakeAndEmit(take) => (take, true),
                Step::Take(take) => (take, false),
            };
            // A whole batch on its own passes unchanged, with no copy.
            if acc.is_none() && taken == 0 && take == total && emit {
                self.report.passed += 1;
                self.report.output += 1;
                let (batch, ..) = self.pending.take()?;
                return Some(Ok(batch));
            }
            if taken == 0 && take < total {
                self.report.split += 1;
            }
            let (batch, taken_rows, ..) = self.pending.as_mut()?;
            let acc = acc.get_or_insert_with(|| Accumulator {
                columns: batch
                    .iter()
                    .map(|(n, t)| Column::new(Layout::of(n, t)))
                    .collect(),
                metadata: batch.metadata().clone(),
                rows: 0,
                bytes: 0,
                sources: 0,
                whole: false,
            });
            for (column, (_, tensor)) in acc.columns.iter_mut().zip(batch.iter()) {
                if let Err(e) = column.append(tensor, taken, taken + take) {
                    return Some(Err(e.into()));
                }
            }
            *taken_rows += take;
            acc.rows += take;
            acc.bytes = acc.bytes.saturating_add(bytes);
            acc.sources += 1;
            acc.whole = taken == 0 && take == total;
            if emit {
                break;
            }
        }
        Some(self.emit(acc?).map_err(E::from))
    }

    /// The batch `acc` gathered, counted in the report.
    fn emit(&mut self, acc: Accumulator) -> Result<Batch> {
        self.report.output += 1;
        if acc.sources == 1 && acc.whole {
            self.report.passed += 1;
        } else if acc.sources > 1 && matches!(self.target, Target::Bytes(_)) {
            self.report.merged += acc.sources;
        }
        let mut out = Batch::new();
        for column in acc.columns {
            let (name, tensor) = column.finish()?;
            out.push(name, tensor)?;
        }
        *out.metadata_mut() = acc.metadata;
        Ok(out)
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
        b.metadata_mut().insert("split".into(), "train".into());
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
        let firsts: Vec<_> = out.iter().map(|b| b.metadata()["split"].clone()).collect();
        assert_eq!(firsts, vec!["train"; 3]);
    }

    #[test]
    fn batches_with_different_metadata_are_never_merged() {
        let mut b = words(vec![1], 3);
        b.metadata_mut().insert("split".into(), "test".into());
        // 3 rows, 1 row of other metadata, 2 rows: cut at the change.
        let out = run(vec![words(vec![2, 1, 1], 0), b, words(vec![3, 1], 4)], 2);
        let rows: Vec<_> = out
            .iter()
            .map(|b| {
                (
                    b.get("labels").unwrap().rows(),
                    b.metadata()["split"].clone(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (2, "train".to_string()),
                (1, "train".to_string()),
                (1, "test".to_string()),
                (2, "train".to_string())
            ]
        );
    }

    fn bytes_run(input: Vec<Batch>, bytes: BatchBytes) -> (Vec<Batch>, RebatchReport) {
        let mut r = rebatch_bytes(input.into_iter().map(Ok::<_, Error>), bytes).unwrap();
        let out = r.by_ref().collect::<Result<Vec<_>>>().unwrap();
        (out, r.report())
    }

    #[test]
    fn by_bytes_passes_splits_and_merges() {
        // words(vec![n; k]) holds k*n*8 + (k+1)*8 bytes of words and k*4 of labels.
        let size = |b: &Batch| batch_bytes(b);
        let big = words(vec![2; 40], 0); // 640 + 328 + 160 = 1128 bytes
        let small = words(vec![1], 0); // 8 + 16 + 4 = 28 bytes
        let normal = words(vec![2; 10], 0); // 160 + 88 + 40 = 288 bytes
        assert_eq!((size(&big), size(&small), size(&normal)), (1128, 28, 288));
        let policy = BatchBytes {
            min: 100,
            max: 500,
            target: 300,
        };
        let input = vec![
            small.clone(),
            small.clone(),
            normal.clone(),
            big,
            small.clone(),
        ];
        let (out, report) = bytes_run(input, policy);
        let rows: Vec<_> = out
            .iter()
            .map(|b| b.get("labels").unwrap().rows())
            .collect();
        // 2 smalls merged, normal passed, big split into ceil(1128/300) = 4, last small alone.
        assert_eq!(rows, vec![2, 10, 10, 10, 10, 10, 1]);
        assert_eq!(out[1], normal);
        assert_eq!(
            report,
            RebatchReport {
                input: 5,
                passed: 2,
                split: 1,
                merged: 2,
                output: 7
            }
        );
        let w: Vec<i64> = out[2..6]
            .iter()
            .flat_map(|b| b.get("words").unwrap().as_slice::<i64>().unwrap().to_vec())
            .collect();
        assert_eq!(w, (0..80).collect::<Vec<_>>());
        // Merging stops at the target and at a metadata change.
        let mut other = small.clone();
        other.metadata_mut().insert("split".into(), "test".into());
        let (out, _) = bytes_run(
            vec![small.clone(), small.clone(), other, small.clone()],
            BatchBytes::about(60).unwrap(),
        );
        let rows: Vec<_> = out
            .iter()
            .map(|b| b.get("labels").unwrap().rows())
            .collect();
        assert_eq!(rows, vec![2, 1, 1]);
        assert!(
            rebatch_bytes(
                Vec::<Result<Batch>>::new(),
                BatchBytes {
                    min: 5,
                    max: 4,
                    target: 4
                }
            )
            .is_err()
        );
        // Batches that cannot be regrouped pass as they are, between merges.
        let scalar = LodTensor::from_vec(vec![1f32], vec![], Lod::empty()).unwrap();
        let odd = Batch::try_from_tensors([("s", scalar)]).unwrap();
        let mut ragged = small.clone();
        ragged
            .push(
                "extra",
                LodTensor::from_vec(vec![1u8, 2], vec![2], Lod::empty()).unwrap(),
            )
            .unwrap();
        let (out, report) = bytes_run(
            vec![
                small.clone(),
                odd.clone(),
                small.clone(),
                ragged.clone(),
                small.clone(),
                small.clone(),
            ],
            BatchBytes::about(60).unwrap(),
        );
        assert_eq!(out.len(), 5);
        assert_eq!(out[..4], [small.clone(), odd, small.clone(), ragged]);
        assert_eq!(out[4].get("labels").unwrap().rows(), 2);
        assert_eq!((report.passed, report.merged, report.output), (4, 2, 5));
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
