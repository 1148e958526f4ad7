//! Packing (`spec/DATASET.md` section 7.4): a consumer's sequences grouped
//! best-fit into bins of a row (token) budget, optionally `R` bins of `L`
//! rows per mini-batch, and the variable-length views training kernels take
//! (`cu_seqlens`, `max_seqlen`, `position_ids`).
//!
//! Packing is a stage over any stream of sequences that can say where it is
//! ([`Loader`] with [`Batching::Sequences`]): it reads a window of `buffer`
//! sequences as one mini-batch, packs it, and keeps the state of the stream
//! at the window's start, so that resuming reads that window again.
//!
//! Why a loader of its own and not a third [`Batching`] variant (or an
//! option of [`Batching::Rows`]): `Rows` groups sequences *in order* and
//! its state is a count of sequences, which packing cannot keep (it reorders
//! within a window, and its position is a window, a carry and a count of
//! mini-batches: a version-2 state). As a stage over a stream of windows it
//! leaves the loader's order, partitions and prefetch thread untouched, and
//! any source that yields windows of whole sequences with ids, a state at
//! each window's start that resumes there, and random access by id (for the
//! carry) can be packed the same way.

use super::error::{DatasetError, Result};
use super::feed::Feed;
use super::loader::{Batching, Loader, LoaderOptions, LoaderState, MiniBatch, STATE_VERSION};
use super::reader::Dataset;
use crate::batch::Batch;
use crate::tensor::LodTensor;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// The loader state version of a packing consumer.
const PACK_VERSION: u32 = 2;
/// The loader state version of a packing consumer with equal counts.
const PACK_EQUAL_VERSION: u32 = 3;

/// How a [`PackedLoader`] packs (see `spec/DATASET.md` section 7.4).
///
/// ```
/// let o = lodt::dataset::PackOptions::tokens(16384);
/// assert_eq!((o.capacity, o.rows, o.buffer, o.equal_batches, o.truncate), (16384, None, 1000, None, false));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackOptions {
    /// The bin's capacity in rows of `tensor`: the token budget of a
    /// mini-batch, or with `rows` the row length `L`.
    pub capacity: usize,
    /// `Some(R)`: `R` bins per mini-batch (a fixed `[R, L]` shape).
    pub rows: Option<usize>,
    /// The window, in sequences, packed at once (best-fit decreasing).
    pub buffer: usize,
    /// The tensor whose rows count (default: the schema's first).
    pub tensor: Option<String>,
    /// Every consumer delivers the same number of mini-batches per epoch
    /// (section 7.4, "Equal counts"): `None` means on when
    /// [`LoaderOptions::world_size`] is above 1 (data-parallel training
    /// needs equal steps per rank).
    pub equal_batches: Option<bool>,
    /// Cut a sequence longer than `capacity` to its first `capacity` rows
    /// (section 7.4, "Truncation"; reported in
    /// [`PackedBatch::truncated`]) instead of delivering it alone.
    pub truncate: bool,
}

impl PackOptions {
    /// A token budget of `capacity` rows per mini-batch, a window of 1,000
    /// sequences, counting the schema's first tensor.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::PackOptions::tokens(8).rows, None);
    /// ```
    pub fn tokens(capacity: usize) -> Self {
        PackOptions {
            capacity,
            rows: None,
            buffer: 1000,
            tensor: None,
            equal_batches: None,
            truncate: false,
        }
    }

    /// The length a sequence of `rows` rows packs as.
    pub(super) fn bin_length(&self, rows: usize) -> usize {
        if self.truncate {
            rows.min(self.capacity)
        } else {
            rows
        }
    }

    /// Whether the loader of `options` equalises counts.
    fn equal(&self, options: &LoaderOptions) -> bool {
        self.equal_batches.unwrap_or(options.world_size > 1)
    }
}

/// The packing part of a version-2 [`LoaderState`]: the options and, per
/// consumer, its current window.
///
/// ```
/// let s = lodt::dataset::PackState { capacity: 8, rows: None, buffer: 4, tensor: "x".into(), equal: false,
///     truncate: false, windows: [(0, lodt::dataset::PackWindow { carry: vec![3], delivered: 1 })].into() };
/// assert_eq!(serde_json::to_value(&s)?["windows"]["0"]["carry"], serde_json::json!([3]));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackState {
    /// [`PackOptions::capacity`].
    pub capacity: usize,
    /// [`PackOptions::rows`].
    pub rows: Option<usize>,
    /// [`PackOptions::buffer`].
    pub buffer: usize,
    /// The name of the tensor whose rows count.
    pub tensor: String,
    /// Equal counts per consumer (version 3; absent: false).
    #[serde(default)]
    pub equal: bool,
    /// [`PackOptions::truncate`] (version 3; absent: false).
    #[serde(default)]
    pub truncate: bool,
    /// Per consumer (by index), its current window.
    pub windows: BTreeMap<u64, PackWindow>,
}

/// A packing consumer's current window, in its [`PackState`].
///
/// ```
/// let w = lodt::dataset::PackWindow { carry: vec![], delivered: 0 };
/// assert_eq!(w.delivered, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackWindow {
    /// The ids of the window's carry, in window order.
    pub carry: Vec<u64>,
    /// The mini-batches of the window already delivered.
    pub delivered: u64,
}

impl PackState {
    /// The options part, for comparisons.
    fn options(&self) -> (usize, Option<usize>, usize, &str, bool) {
        (
            self.capacity,
            self.rows,
            self.buffer,
            self.tensor.as_str(),
            self.truncate,
        )
    }

    /// The state version this packing needs.
    fn version(&self) -> u32 {
        if self.equal || self.truncate {
            PACK_EQUAL_VERSION
        } else {
            PACK_VERSION
        }
    }
}

/// Checks a state's version against its `packing` field.
pub(super) fn check_version(state: &LoaderState) -> Result<()> {
    match (state.version, &state.packing) {
        (STATE_VERSION, None) => Ok(()),
        (v, Some(p)) if v == p.version() => Ok(()),
        (v, p) => Err(DatasetError::BadState {
            reason: format!(
                "state version {v} {}: this lodt reads version {STATE_VERSION} without `packing`, {PACK_VERSION} with it and {PACK_EQUAL_VERSION} with it and `equal` or `truncate` true",
                match p {
                    None => "without `packing`".to_string(),
                    Some(p) => format!(
                        "with `packing`, `equal` {} and `truncate` {}",
                        p.equal, p.truncate
                    ),
                }
            ),
        }),
    }
}

/// The `packing` of merged states: none, or the same options in every
/// state and the union of their windows.
pub(super) fn merge_packing(states: &[LoaderState]) -> Result<Option<PackState>> {
    let Some(first) = states.first().and_then(|s| s.packing.as_ref()) else {
        if states.iter().any(|s| s.packing.is_some()) {
            return Err(mixed());
        }
        return Ok(None);
    };
    let mut out = first.clone();
    for s in states.iter().skip(1) {
        let Some(p) = &s.packing else {
            return Err(mixed());
        };
        if (p.options(), p.equal) != (first.options(), first.equal) {
            return Err(DatasetError::BadState {
                reason: format!(
                    "the states differ in packing (capacity, rows, buffer, tensor, truncate, equal): {:?} vs {:?}",
                    (first.options(), first.equal),
                    (p.options(), p.equal)
                ),
            });
        }
        for (&c, w) in &p.windows {
            match out.windows.get(&c) {
                Some(v) if v != w => {
                    return Err(DatasetError::BadState {
                        reason: format!("consumer {c} has two packing windows: {v:?} and {w:?}"),
                    });
                }
                _ => {
                    out.windows.insert(c, w.clone());
                }
            }
        }
    }
    Ok(Some(out))
}

fn mixed() -> DatasetError {
    DatasetError::BadState {
        reason: "some states are a packing loader's (version 2) and some not".into(),
    }
}

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
fn check_window(window: &PackWindow, consumer: u64, pack: &PackOptions, n: u64) -> Result<()> {
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
pub(super) fn plan_window(
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

/// Sequences held as one batch: a window's carry, or its new sequences.
struct Part {
    ids: Vec<u64>,
    batch: Batch,
}

/// A packed mini-batch: the sequences of its bins, in order, as one
/// [`MiniBatch`], and where each bin (row of an `[R, L]` batch) starts.
///
/// ```
/// let b = lodt::dataset::PackedBatch { batch: lodt::dataset::MiniBatch { epoch: 0, ids: vec![2, 0], batch: lodt::Batch::new() },
///     bins: vec![0, 1, 2], truncated: vec![] };
/// assert_eq!(b.bins.len() - 1, 2); // two bins of one sequence each
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PackedBatch {
    /// The sequences.
    pub batch: MiniBatch,
    /// Bin `b` holds sequences `bins[b]..bins[b + 1]` (one bin without
    /// [`PackOptions::rows`]).
    pub bins: Vec<usize>,
    /// With [`PackOptions::truncate`]: the sequences cut, `(id, rows
    /// before the cut)`, in batch order (also in the batch's metadata under
    /// [`TRUNCATED_KEY`](super::TRUNCATED_KEY)).
    pub truncated: Vec<(u64, usize)>,
}

impl PackedBatch {
    /// Per bin (row), the `cu_seqlens` of level `level` of `tensor`
    /// relative to the row's first row, concatenated, and where each row's
    /// list starts in it (`rows + 1` entries).
    ///
    /// ```
    /// use lodt::{Batch, Lod, LodTensor};
    /// let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![2, 1, 3]])?)?;
    /// let b = lodt::dataset::PackedBatch { batch: lodt::dataset::MiniBatch { epoch: 0, ids: vec![0, 1, 2],
    ///     batch: Batch::try_from_tensors([("x", x)])? }, bins: vec![0, 2, 3], truncated: vec![] };
    /// let (cu, starts) = b.row_cu_seqlens("x", 0)?;
    /// assert_eq!((cu, starts), (vec![0, 2, 3, 0, 3], vec![0, 3, 5]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn row_cu_seqlens(&self, tensor: &str, level: usize) -> Result<(Vec<i32>, Vec<usize>)> {
        let t = self.batch.batch.get(tensor).ok_or_else(|| {
            DatasetError::InvalidArgument(format!("the packed batch has no tensor {tensor:?}"))
        })?;
        row_cu_seqlens(t, level, &self.bins)
    }
}

/// The metadata key of a packed `[R, L]` batch's bins: the top-level
/// sequence where each bin (row) starts, and the end, comma-separated.
///
/// ```
/// assert_eq!(lodt::dataset::BINS_KEY, "lodt.pack.bins");
/// ```
pub const BINS_KEY: &str = "lodt.pack.bins";

/// Per bin (row) of `t`, bin `b` holding top-level sequences
/// `bins[b]..bins[b + 1]`: the `cu_seqlens` of level `level` relative to
/// the row's first row, concatenated, and where each row's list starts in
/// it (`bins.len()` entries).
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![2, 1, 3]])?)?;
/// let (cu, starts) = lodt::dataset::row_cu_seqlens(&x, 0, &[0, 2, 3])?;
/// assert_eq!((cu, starts), (vec![0, 2, 3, 0, 3], vec![0, 3, 5]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn row_cu_seqlens(
    t: &LodTensor,
    level: usize,
    bins: &[usize],
) -> Result<(Vec<i32>, Vec<usize>)> {
    let abs = absolute(t, level)?;
    let top = absolute(t, 0)?;
    if bins.windows(2).any(|w| w[0] > w[1]) || bins.last().is_some_and(|&b| b >= top.len()) {
        return Err(DatasetError::InvalidArgument(format!(
            "bins {bins:?}: expected increasing sequence indices up to {}",
            top.len().saturating_sub(1)
        )));
    }
    let mut cu = Vec::new();
    cu.try_reserve(abs.len() + bins.len())
        .map_err(|e| DatasetError::Loader(format!("row cu_seqlens: {e}")))?;
    let mut starts = Vec::new();
    starts
        .try_reserve(bins.len())
        .map_err(|e| DatasetError::Loader(format!("row cu_seqlens: {e}")))?;
    let mut k = 0usize;
    for w in bins.windows(2) {
        let (lo, hi) = (top[w[0]], top[w[1]]);
        starts.push(cu.len());
        while k < abs.len() && abs[k] < lo {
            k += 1;
        }
        while k < abs.len() && abs[k] <= hi {
            cu.push(to_i32(abs[k] - lo)?);
            if abs[k] == hi {
                break;
            }
            k += 1;
        }
    }
    starts.push(cu.len());
    Ok((cu, starts))
}

/// The variable-length view of one LoD level of a tensor, as
/// FlashAttention's varlen functions and PyTorch's jagged tensors take it.
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let x = LodTensor::from_vec((0..5i64).collect(), vec![5], Lod::try_from_lengths(&[vec![2, 3]])?)?;
/// let v = lodt::dataset::varlen(&x, 0)?;
/// assert_eq!(v.cu_seqlens, vec![0, 2, 5]);
/// assert_eq!(v.max_seqlen, 3);
/// assert_eq!(v.position_ids, vec![0, 1, 0, 1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Varlen {
    /// The level's sequences as row offsets relative to the tensor's first
    /// row, first 0.
    pub cu_seqlens: Vec<i32>,
    /// The longest sequence, in rows.
    pub max_seqlen: usize,
    /// Per row, its position in its sequence (restarting at 0).
    pub position_ids: Vec<i64>,
}

/// Level `level`'s offsets in rows, rebased to 0.
fn absolute(t: &LodTensor, level: usize) -> Result<Vec<u64>> {
    let levels = t.lod().num_levels();
    if level >= levels {
        return Err(DatasetError::InvalidArgument(format!(
            "level {level}: the tensor has {levels} LoD level(s) (0 is the outermost)"
        )));
    }
    let mut abs = t.lod().to_absolute().swap_remove(level);
    let base = abs.first().copied().unwrap_or(0);
    for o in &mut abs {
        *o -= base;
    }
    Ok(abs)
}

fn to_i32(x: u64) -> Result<i32> {
    i32::try_from(x).map_err(|_| {
        DatasetError::InvalidArgument(format!(
            "offset {x} does not fit cu_seqlens' int32 (at most {})",
            i32::MAX
        ))
    })
}

/// The [`Varlen`] view of level `level` (0: outermost) of `t`: an outer
/// level's sequences are measured in rows.
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 3]])?;
/// let x = LodTensor::from_vec((0..6i64).collect(), vec![6], lod)?;
/// assert_eq!(lodt::dataset::varlen(&x, 0)?.cu_seqlens, vec![0, 3, 6]);
/// assert_eq!(lodt::dataset::varlen(&x, 1)?.cu_seqlens, vec![0, 1, 3, 6]);
/// assert!(lodt::dataset::varlen(&x, 2).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn varlen(t: &LodTensor, level: usize) -> Result<Varlen> {
    let abs = absolute(t, level)?;
    let mut cu_seqlens = Vec::new();
    cu_seqlens
        .try_reserve(abs.len())
        .map_err(|e| DatasetError::Loader(format!("cu_seqlens of {} sequences: {e}", abs.len())))?;
    let total = abs.last().copied().unwrap_or(0);
    let mut position_ids = Vec::new();
    position_ids
        .try_reserve(usize::try_from(total).unwrap_or(usize::MAX))
        .map_err(|e| DatasetError::Loader(format!("position_ids of {total} rows: {e}")))?;
    let mut max_seqlen = 0u64;
    for (i, &o) in abs.iter().enumerate() {
        cu_seqlens.push(to_i32(o)?);
        if let Some(&next) = abs.get(i + 1) {
            let len = next - o;
            max_seqlen = max_seqlen.max(len);
            position_ids.extend(0..len as i64);
        }
    }
    Ok(Varlen {
        cu_seqlens,
        max_seqlen: max_seqlen as usize,
        position_ids,
    })
}

/// A [`Loader`] that packs (`spec/DATASET.md` section 7.4): each item is a
/// [`PackedBatch`] of whole sequences, at most
/// [`PackOptions::capacity`] rows per bin (a longer sequence alone), chosen
/// best-fit from a window of [`PackOptions::buffer`] sequences. Every
/// sequence of the consumer's share of the epoch is delivered exactly once;
/// [`PackedLoader::state`] resumes exactly with the same consumers.
///
/// ```
/// use lodt::dataset::{Dataset, DatasetWriter, LoaderOptions, PackOptions, PackedLoader};
/// use lodt::{Batch, Lod, LodTensor};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// let lod = Lod::try_from_lengths(&[vec![5, 3, 4, 2]])?;
/// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec((0..14i32).collect(), vec![14], lod)?)])?)?;
/// w.finish()?;
/// let dataset = Arc::new(Dataset::open(dir.path())?);
/// let loader = PackedLoader::new(dataset, LoaderOptions::default(), PackOptions::tokens(8))?;
/// let ids: Vec<Vec<u64>> = loader.map(|b| b.map(|b| b.batch.ids)).collect::<Result<_, _>>()?;
/// assert_eq!(ids, vec![vec![0, 1], vec![2, 3]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PackedLoader {
    feed: Feed,
    inner: Loader,
    options: PackOptions,
    tensor: usize,
    tensor_name: String,
    /// Equal counts (section 7.4), resolved from the options.
    equal: bool,
    /// This consumer's index.
    consumer: u64,
    /// With `equal`: every sequence's length (by id), read once.
    lengths: Option<Arc<Vec<u32>>>,
    /// With `equal`: this consumer's splits per window of the epoch.
    splits: Option<BTreeMap<u64, usize>>,
    /// The stream's state before the current window's new sequences.
    window_state: LoaderState,
    carry_ids: Vec<u64>,
    delivered: u64,
    /// Mini-batches of the current window to skip (after a resume).
    skip: u64,
    ready: VecDeque<PackedBatch>,
    next_carry: Option<Part>,
    done: bool,
}

impl std::fmt::Debug for PackedLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedLoader")
            .field("options", &self.options)
            .field("inner", &self.inner)
            .field("delivered", &self.delivered)
            .finish()
    }
}

impl PackedLoader {
    /// A packing loader at the start of epoch 0. `options.batching` and
    /// `options.drop_last` are replaced (the stream is read in windows).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// assert!(PackedLoader::new(dataset, LoaderOptions::default(), PackOptions::tokens(0)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(dataset: Arc<Dataset>, options: LoaderOptions, pack: PackOptions) -> Result<Self> {
        Self::build(Feed::dataset(dataset), options, pack, None)
    }

    /// A packing loader that continues from `state` (a state this consumer
    /// saved with [`PackedLoader::state`], same options).
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, LoaderOptions, PackOptions, PackedLoader};
    /// use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # let lod = Lod::try_from_lengths(&[vec![5, 3, 4, 2, 7, 1]])?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec((0..22i32).collect(), vec![22], lod)?)])?)?;
    /// # w.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let pack = PackOptions { buffer: 3, ..PackOptions::tokens(8) };
    /// let mut a = PackedLoader::new(dataset.clone(), LoaderOptions::default(), pack.clone())?;
    /// a.next().unwrap()?;
    /// let state = a.state();
    /// let rest: Vec<_> = a.map(|b| b.unwrap().batch.ids).collect();
    /// let b = PackedLoader::resume(dataset, LoaderOptions::default(), pack, &state)?;
    /// assert_eq!(b.map(|b| b.unwrap().batch.ids).collect::<Vec<_>>(), rest);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(
        dataset: Arc<Dataset>,
        options: LoaderOptions,
        pack: PackOptions,
        state: &LoaderState,
    ) -> Result<Self> {
        Self::build(Feed::dataset(dataset), options, pack, Some(state))
    }

    /// A packing loader at the start of epoch `epoch` (reading nothing of
    /// the epochs before).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// # let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let l = PackedLoader::at_epoch(dataset, LoaderOptions::default(), PackOptions::tokens(4), 3)?;
    /// assert_eq!(l.epoch(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn at_epoch(
        dataset: Arc<Dataset>,
        options: LoaderOptions,
        pack: PackOptions,
        epoch: u64,
    ) -> Result<Self> {
        Self::feed_at_epoch(Feed::dataset(dataset), options, pack, epoch)
    }

    /// [`PackedLoader::at_epoch`] of any feed.
    pub(super) fn feed_at_epoch(
        feed: Feed,
        options: LoaderOptions,
        pack: PackOptions,
        epoch: u64,
    ) -> Result<Self> {
        let probe = Loader::build(
            feed.clone(),
            LoaderOptions {
                prefetch: 0,
                batching: Batching::Sequences(1),
                ..options.clone()
            },
            None,
        )?;
        let mut start = probe.state();
        start.epoch = epoch;
        // A mixture's epochs differ in length.
        start.sequences = feed.len(epoch);
        let tensor = resolve(&feed, &pack)?.1;
        let packing = PackState {
            capacity: pack.capacity,
            rows: pack.rows,
            buffer: pack.buffer,
            tensor,
            equal: pack.equal(&options),
            truncate: pack.truncate,
            windows: start
                .consumed
                .keys()
                .map(|&c| {
                    let w = PackWindow {
                        carry: Vec::new(),
                        delivered: 0,
                    };
                    (c, w)
                })
                .collect(),
        };
        start.version = packing.version();
        start.packing = Some(packing);
        Self::build(feed, options, pack, Some(&start))
    }

    /// A packing loader of `feed`, new or resumed from `state`.
    pub(super) fn build(
        feed: Feed,
        mut options: LoaderOptions,
        pack: PackOptions,
        state: Option<&LoaderState>,
    ) -> Result<Self> {
        if pack.capacity == 0 || pack.buffer == 0 || pack.rows == Some(0) {
            return Err(DatasetError::InvalidArgument(format!(
                "packing capacity {}, buffer {}, rows {:?}: each must be at least 1",
                pack.capacity, pack.buffer, pack.rows
            )));
        }
        let (tensor, tensor_name) = resolve(&feed, &pack)?;
        let equal = pack.equal(&options);
        let (_, consumer) = options.consumer()?;
        let shape = Shape {
            tensor,
            tensor_name,
            equal,
            consumer,
        };
        options.batching = Batching::Sequences(pack.buffer);
        options.drop_last = false;
        let (inner, carry_ids, skip) = match state {
            None => (Loader::build(feed.clone(), options, None)?, Vec::new(), 0),
            Some(state) => {
                let Some(p) = &state.packing else {
                    return Err(DatasetError::BadState {
                        reason: "the state is not a packing loader's (it has no `packing`)".into(),
                    });
                };
                let mine = (
                    pack.capacity,
                    pack.rows,
                    pack.buffer,
                    shape.tensor_name.as_str(),
                    pack.truncate,
                );
                let saved = p.options();
                if mine != saved {
                    return Err(DatasetError::BadState {
                        reason: format!(
                            "it was saved with packing (capacity, rows, buffer, tensor, truncate) {saved:?}, the options say {mine:?}"
                        ),
                    });
                }
                let (consumers, consumer) = options.consumer()?;
                check_version(state)?;
                super::loader::check_state(&feed, &options, state)?;
                if state.consumers != consumers {
                    let plain =
                        super::pack_elastic::unpack_state(&feed, state, p, &pack, shape.tensor)?;
                    let inner = Loader::build(feed.clone(), options, Some(&plain))?;
                    return Self::assemble(feed, inner, pack, shape, Vec::new(), 0);
                }
                if p.equal != equal {
                    return Err(DatasetError::BadState {
                        reason: format!(
                            "it was saved with equal packed counts {}, the options say {equal}",
                            p.equal
                        ),
                    });
                }
                let Some(window) = p.windows.get(&consumer) else {
                    return Err(DatasetError::BadState {
                        reason: format!(
                            "it has no packing window for consumer {consumer} (rank {}, worker {})",
                            options.rank, options.worker
                        ),
                    });
                };
                check_window(window, consumer, &pack, feed.len(state.epoch))?;
                let mut plain = state.clone();
                plain.version = STATE_VERSION;
                plain.packing = None;
                (
                    Loader::build(feed.clone(), options, Some(&plain))?,
                    window.carry.clone(),
                    window.delivered,
                )
            }
        };
        Self::assemble(feed, inner, pack, shape, carry_ids, skip)
    }

    /// The loader around `inner`, its first window read (the carry
    /// `carry_ids`, then new sequences) with `skip` mini-batches skipped.
    fn assemble(
        feed: Feed,
        inner: Loader,
        pack: PackOptions,
        shape: Shape,
        carry_ids: Vec<u64>,
        skip: u64,
    ) -> Result<Self> {
        let carry = if carry_ids.is_empty() {
            None
        } else {
            let batch = feed.take(&carry_ids)?;
            Some(Part {
                ids: carry_ids,
                batch,
            })
        };
        // The first window is read by the first `next()`; until then the
        // state is the one resumed from.
        let window_state = inner.state();
        Ok(PackedLoader {
            feed,
            inner,
            options: pack,
            tensor: shape.tensor,
            tensor_name: shape.tensor_name,
            equal: shape.equal,
            consumer: shape.consumer,
            lengths: None,
            splits: None,
            window_state,
            carry_ids: carry.as_ref().map(|c| c.ids.clone()).unwrap_or_default(),
            delivered: skip,
            skip,
            ready: VecDeque::new(),
            next_carry: carry,
            done: false,
        })
    }

    /// The dataset (`None` for a [`Mixture`](super::Mixture)'s loader).
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let l = PackedLoader::new(dataset, LoaderOptions::default(), PackOptions::tokens(4))?;
    /// assert_eq!(l.dataset().unwrap().num_sequences(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dataset(&self) -> Option<&Arc<Dataset>> {
        match &self.feed {
            Feed::Dataset { dataset, .. } => Some(dataset),
            Feed::Mixture(_) => None,
        }
    }

    /// The current epoch.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// # let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let mut l = PackedLoader::new(dataset, LoaderOptions::default(), PackOptions::tokens(4))?;
    /// l.set_epoch(2)?;
    /// assert_eq!(l.epoch(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    /// Starts epoch `epoch` from its beginning.
    ///
    /// See [`PackedLoader::epoch`].
    pub fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        self.inner.set_epoch(epoch)?;
        self.ready.clear();
        self.next_carry = None;
        self.skip = 0;
        self.done = false;
        self.window_state = self.inner.state();
        self.carry_ids.clear();
        self.delivered = 0;
        self.splits = None;
        Ok(())
    }

    /// The sequences this loader will still deliver in this epoch.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![0u8; 5], vec![5], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let mut l = PackedLoader::new(dataset, LoaderOptions::default(), PackOptions::tokens(2))?;
    /// assert_eq!(l.remaining(), 5);
    /// assert_eq!(l.next().unwrap()?.batch.ids.len(), 2);
    /// assert_eq!(l.remaining(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remaining(&self) -> u64 {
        let ready: usize = self.ready.iter().map(|b| b.batch.ids.len()).sum();
        let carry = self.next_carry.as_ref().map_or(0, |c| c.ids.len());
        self.inner.remaining() + (ready + carry) as u64
    }

    /// Where the loader is (what it delivered): a version-2
    /// [`LoaderState`]. See [`PackedLoader::resume`].
    pub fn state(&self) -> LoaderState {
        let mut state = self.window_state.clone();
        let packing = PackState {
            capacity: self.options.capacity,
            rows: self.options.rows,
            buffer: self.options.buffer,
            tensor: self.tensor_name.clone(),
            equal: self.equal,
            truncate: self.options.truncate,
            windows: state
                .consumed
                .keys()
                .map(|&c| {
                    let w = PackWindow {
                        carry: self.carry_ids.clone(),
                        delivered: self.delivered,
                    };
                    (c, w)
                })
                .collect(),
        };
        state.version = packing.version();
        state.packing = Some(packing);
        state
    }

    /// Reads the next window (the carry and up to `buffer` new sequences)
    /// and packs it.
    fn load_window(&mut self) -> Result<()> {
        let carry = self.next_carry.take();
        self.window_state = self.inner.state();
        self.carry_ids = carry.as_ref().map(|c| c.ids.clone()).unwrap_or_default();
        self.delivered = 0;
        let new = match self.inner.next() {
            None => None,
            Some(Err(e)) => return Err(e),
            Some(Ok(mb)) => Some(Part {
                ids: mb.ids,
                batch: mb.batch,
            }),
        };
        let parts: Vec<Part> = carry.into_iter().chain(new).collect();
        let mut lengths = Vec::new();
        for part in &parts {
            lengths.extend(row_counts(&part.batch, part.ids.len(), self.tensor)?);
        }
        let rows = lengths.clone();
        for l in &mut lengths {
            *l = self.options.bin_length(*l);
        }
        if lengths.is_empty() {
            self.done = true;
            return Ok(());
        }
        let last = self.inner.remaining() == 0;
        let (mut batches, carry) = plan_window(&lengths, &self.options, last);
        if self.equal {
            let splits = self.window_splits()?;
            super::pack_equal::split(&mut batches, &lengths, splits);
        }
        // Window index -> (part, index in it).
        let first_len = parts.first().map_or(0, |p| p.ids.len());
        let locate = |k: usize| {
            if k < first_len {
                (0, k)
            } else {
                (1, k - first_len)
            }
        };
        if !carry.is_empty() {
            let picks: Vec<(usize, usize)> = carry.iter().map(|&k| locate(k)).collect();
            let (ids, batch) = self.gather(&parts, &picks)?;
            self.next_carry = Some(Part { ids, batch });
        }
        let epoch = self.inner.epoch();
        for bins in batches {
            let mut picks: Vec<(usize, usize)> = Vec::new();
            let mut starts = vec![0usize];
            let mut picked_rows = Vec::new();
            for bin in bins {
                picks.extend(bin.iter().map(|&k| locate(k)));
                picked_rows.extend(bin.iter().map(|&k| rows[k]));
                starts.push(picks.len());
            }
            let (ids, batch) = self.gather(&parts, &picks)?;
            let (mut batch, truncated) = if self.options.truncate {
                super::pack_truncate::truncate(
                    batch,
                    &ids,
                    &picked_rows,
                    self.tensor,
                    self.options.capacity,
                )?
            } else {
                (batch, Vec::new())
            };
            if !truncated.is_empty() {
                let text: Vec<String> = truncated.iter().map(|(i, r)| format!("{i}:{r}")).collect();
                batch
                    .metadata_mut()
                    .insert(super::pack_truncate::TRUNCATED_KEY.into(), text.join(","));
            }
            if self.options.rows.is_some() {
                let text: Vec<String> = starts.iter().map(usize::to_string).collect();
                batch.metadata_mut().insert(BINS_KEY.into(), text.join(","));
            }
            self.ready.push_back(PackedBatch {
                batch: MiniBatch { epoch, ids, batch },
                bins: starts,
                truncated,
            });
        }
        while self.skip > 0 {
            if self.ready.pop_front().is_none() {
                return Err(DatasetError::BadState {
                    reason: format!(
                        "the state says {} mini-batches of its window were delivered; the window has fewer",
                        self.skip
                    ),
                });
            }
            self.skip -= 1;
            self.delivered += 1;
        }
        Ok(())
    }

    /// With equal counts: the splits of the current window (section 7.4),
    /// the epoch's splits computed at its first window.
    fn window_splits(&mut self) -> Result<usize> {
        if self.splits.is_none() {
            let lengths = match &self.lengths {
                Some(l) => l.clone(),
                None => {
                    let l = Arc::new(super::pack_equal::lengths(&self.feed, self.tensor)?);
                    self.lengths = Some(l.clone());
                    l
                }
            };
            let all = super::pack_equal::equal_splits(
                &self.feed,
                &self.window_state,
                &lengths,
                &self.options,
            )?;
            let mine = usize::try_from(self.consumer)
                .ok()
                .and_then(|c| all.into_iter().nth(c))
                .unwrap_or_default();
            self.splits = Some(mine);
        }
        let read = self
            .window_state
            .consumed
            .get(&self.consumer)
            .copied()
            .unwrap_or(0);
        let window = read / self.options.buffer as u64;
        Ok(self
            .splits
            .as_ref()
            .and_then(|s| s.get(&window).copied())
            .unwrap_or(0))
    }

    /// The sequences `picks` (part, index), in order, gathered into one
    /// batch: one copy of their bytes per run of picks from one part (and
    /// one more to join the runs when there are several).
    fn gather(&self, parts: &[Part], picks: &[(usize, usize)]) -> Result<(Vec<u64>, Batch)> {
        let mut ids = Vec::with_capacity(picks.len());
        let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
        for &(p, i) in picks {
            let part = parts
                .get(p)
                .ok_or_else(|| DatasetError::Loader("a window part is missing".into()))?;
            ids.push(part.ids.get(i).copied().unwrap_or(u64::MAX));
            match runs.last_mut() {
                Some((q, run)) if *q == p => run.push(i),
                _ => runs.push((p, vec![i])),
            }
        }
        let mut batch = Batch::new();
        for t in &self.feed.schema().tensors {
            let err = |e| DatasetError::tensor(format!("packing tensor {:?}", t.name), e);
            let mut pieces = Vec::with_capacity(runs.len());
            for (p, run) in &runs {
                let source = parts[*p].batch.get(&t.name).ok_or_else(|| {
                    DatasetError::Loader(format!("a window lacks tensor {:?}", t.name))
                })?;
                pieces.push(crate::ops::take(source, run).map_err(err)?);
            }
            let merged = match pieces.len() {
                1 => pieces
                    .pop()
                    .ok_or_else(|| DatasetError::Loader("no piece".into()))?,
                _ => crate::ops::concat(&pieces).map_err(err)?,
            };
            batch
                .push(t.name.clone(), merged)
                .map_err(|e| DatasetError::tensor("building a packed mini-batch", e))?;
        }
        Ok((ids, batch))
    }
}

/// What a packing loader resolved from its options.
struct Shape {
    tensor: usize,
    tensor_name: String,
    equal: bool,
    consumer: u64,
}

/// The index and name of the tensor whose rows count.
fn resolve(feed: &Feed, pack: &PackOptions) -> Result<(usize, String)> {
    let schema = feed.schema();
    let tensor = match &pack.tensor {
        None => 0,
        Some(name) => schema.position(name).ok_or_else(|| {
            DatasetError::InvalidArgument(format!(
                "packing counts the rows of tensor {name:?}, which the dataset does not have (it has {})",
                crate::error::name_list(schema.tensors.iter().map(|t| t.name.as_str()))
            ))
        })?,
    };
    let name = schema
        .tensors
        .get(tensor)
        .map(|t| t.name.clone())
        .unwrap_or_default();
    Ok((tensor, name))
}

/// The rows of tensor `tensor` of each of the `n` top-level sequences of
/// `batch` (1 each for a tensor without LoD).
pub(super) fn row_counts(batch: &Batch, n: usize, tensor: usize) -> Result<Vec<usize>> {
    let Some((_, t)) = batch.iter().nth(tensor) else {
        return Err(DatasetError::Loader(format!(
            "a window lacks tensor {tensor}"
        )));
    };
    let mut out = Vec::new();
    out.try_reserve(n)
        .map_err(|e| DatasetError::Loader(format!("a window of {n} sequences: {e}")))?;
    if t.lod().num_levels() == 0 {
        out.resize(n, 1);
    } else {
        let abs = absolute(t, 0)?;
        out.extend(abs.windows(2).map(|w| (w[1] - w[0]) as usize));
    }
    if out.len() != n {
        return Err(DatasetError::Loader(format!(
            "a window of {n} sequences has {} in tensor {tensor}",
            out.len()
        )));
    }
    Ok(out)
}

impl Iterator for PackedLoader {
    type Item = Result<PackedBatch>;

    fn next(&mut self) -> Option<Result<PackedBatch>> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                self.delivered += 1;
                return Some(Ok(b));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.load_window() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
