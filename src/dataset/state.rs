//! Where a loader is: [`LoaderState`] and its parts ([`PackState`],
//! [`MixtureState`]), their versions, JSON, checks and merge
//! (`spec/DATASET.md` sections 7 and 10). The one module that knows the
//! state's layout; loaders make and read states through it.

use super::error::{DatasetError, Result};
use super::locality::Ranges;
use super::options::{LoaderOptions, Partition, Remainder, ShuffleOptions, Stop};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of [`LoaderState`] this crate writes and reads.
pub(crate) const STATE_VERSION: u32 = 1;
/// The loader state version of a packing consumer.
const PACK_VERSION: u32 = 2;
/// The loader state version of a packing consumer with equal counts.
const PACK_EQUAL_VERSION: u32 = 3;
/// The loader state version of the locality partition (`ranges`) whose
/// order is cut into one block.
pub(crate) const LOCALITY_VERSION: u32 = 4;
/// The loader state version of the locality partition whose order is cut
/// into several blocks (`blocks`, `spec/DATASET.md` 7.6).
pub(crate) const LOCALITY_BLOCKS_VERSION: u32 = 5;

/// The loader state version of a round-robin epoch whose order takes in
/// shards appended since (`joined`, `spec/DATASET.md` 7.3, "Joining now").
pub(crate) const JOINED_VERSION: u32 = 6;

/// The state version of the locality partition with an order of `blocks`
/// blocks: 4 for one (what a 1.4 reader reads the same), 5 for more.
pub(crate) fn locality_version(blocks: u64) -> u32 {
    if blocks > 1 {
        LOCALITY_BLOCKS_VERSION
    } else {
        LOCALITY_VERSION
    }
}

/// Where a loader is in an epoch: see [`Loader`](super::Loader) and
/// `spec/DATASET.md` section 7. Serialize it with [`LoaderState::to_json`]
/// (or serde).
///
/// ```
/// let json = serde_json::json!({"version": 1, "sequences": 10, "fingerprint": 0,
///     "shuffle": null, "remainder": "keep", "epoch": 0, "frontier": 4, "skip": [5],
///     "consumers": 2, "consumed": {"0": 1, "1": 0}});
/// let state = lodt::dataset::LoaderState::from_json(&json)?;
/// assert_eq!(state.to_json(), json);
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The state's format version (1).
    pub version: u32,
    /// The dataset's number of sequences.
    pub sequences: u64,
    /// The dataset's [`Dataset::fingerprint`](super::Dataset::fingerprint).
    pub fingerprint: u32,
    /// The shuffle of the order.
    pub shuffle: Option<ShuffleOptions>,
    /// The remainder rule.
    pub remainder: Remainder,
    /// The epoch.
    pub epoch: u64,
    /// Every position of the epoch's order before this one was consumed.
    pub frontier: u64,
    /// Positions at or after the frontier that were consumed, increasing.
    pub skip: Vec<u64>,
    /// The number of consumers dealing the rest (the positions from the
    /// frontier on, less `skip`) round robin.
    pub consumers: u64,
    /// Per consumer (by index), how many of the rest it consumed.
    pub consumed: BTreeMap<u64, u64>,
    /// For a [`Mixture`](super::Mixture)'s loader: the mixture it reads
    /// (`spec/DATASET.md`, "Mixtures"); absent for a single dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixture: Option<MixtureState>,
    /// A packing consumer's window (version 2, `spec/DATASET.md` 7.4): see
    /// [`LoaderOptions::packing`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packing: Option<PackState>,
    /// The locality partition's positions still to deliver (version 4,
    /// `spec/DATASET.md` 7.6): `[start, end)` ranges, increasing, dealt in
    /// contiguous blocks; absent in the round-robin partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Vec<[u64; 2]>>,
    /// The number of blocks the locality partition's order was cut into
    /// (version 5, `spec/DATASET.md` 7.6: the consumers of the epoch's
    /// first deal); absent: one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u64>,
    /// Where the shuffled order's generator was at a position at or before
    /// every counted consumer's next one (`spec/DATASET.md` 7.3): a resume
    /// starts the order there instead of walking to it. Absent: the resume
    /// walks from the frontier (what a state without one always meant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<super::cursor::OrderCursor>,
    /// Set (version 6) in an epoch that took in shards appended since it
    /// started (`spec/DATASET.md` 7.3, "Joining now", [`Dataset::join_appended`](super::Dataset::join_appended)):
    /// the shard list whose order comes first; the rest of the state's shard
    /// list follows it in the order. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined: Option<Joined>,
}

/// The first shards of an epoch's order that took in appended shards
/// ([`LoaderState::joined`]): their sequences and fingerprint (as a
/// state's `sequences` and `fingerprint` name a shard list).
///
/// ```
/// let j = lodt::dataset::Joined { sequences: 40, fingerprint: 7 };
/// assert_eq!(serde_json::to_value(j)?, serde_json::json!({"sequences": 40, "fingerprint": 7}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    /// The sequences of those shards.
    pub sequences: u64,
    /// The fingerprint of their list (7.2).
    pub fingerprint: u32,
}

impl LoaderState {
    /// The state as JSON.
    ///
    /// ```
    /// # let json = serde_json::json!({"version": 1, "sequences": 3, "fingerprint": 0, "shuffle": null,
    /// #     "remainder": "keep", "epoch": 2, "frontier": 0, "skip": [], "consumers": 1, "consumed": {"0": 1}});
    /// let state = lodt::dataset::LoaderState::from_json(&json)?;
    /// assert_eq!(state.to_json()["epoch"], 2);
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// A state from JSON.
    ///
    /// ```
    /// assert!(lodt::dataset::LoaderState::from_json(&serde_json::json!({})).is_err());
    /// ```
    pub fn from_json(value: &serde_json::Value) -> Result<Self> {
        let state: LoaderState =
            serde_json::from_value(value.clone()).map_err(|e| DatasetError::BadState {
                reason: format!("not a loader state: {e}"),
            })?;
        check_version(&state)?;
        Ok(state)
    }

    /// Whether it holds the count of every consumer (a merged state).
    ///
    /// ```
    /// # let json = serde_json::json!({"version": 1, "sequences": 10, "fingerprint": 0, "shuffle": null,
    /// #     "remainder": "keep", "epoch": 0, "frontier": 0, "skip": [], "consumers": 2, "consumed": {"1": 3}});
    /// let state = lodt::dataset::LoaderState::from_json(&json)?;
    /// assert!(!state.is_complete()); // consumer 0 is missing
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn is_complete(&self) -> bool {
        (0..self.consumers).all(|c| self.consumed.contains_key(&c))
    }

    /// Merges the states of the consumers of one run (taken at the same
    /// checkpoint) into one that holds every consumer's count, to resume
    /// with another world size. The states must agree on everything but
    /// their counts, and not give one consumer two counts.
    ///
    /// ```
    /// use lodt::dataset::LoaderState;
    /// let state = |c: u64, n: u64| LoaderState::from_json(&serde_json::json!({"version": 1,
    ///     "sequences": 10, "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 0,
    ///     "frontier": 0, "skip": [], "consumers": 2, "consumed": {c.to_string(): n}}));
    /// let merged = LoaderState::merge(&[state(0, 3)?, state(1, 2)?])?;
    /// assert!(merged.is_complete());
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn merge(states: &[LoaderState]) -> Result<LoaderState> {
        let Some(first) = states.first() else {
            return Err(DatasetError::InvalidArgument(
                "LoaderState::merge needs at least one state".into(),
            ));
        };
        let packing = merge_packing(states)?;
        let mut out = first.clone();
        out.packing = packing;
        out.cursor = super::cursor::OrderCursor::merged(states.iter().map(|s| s.cursor.as_ref()));
        for (i, s) in states.iter().enumerate().skip(1) {
            let differ = |what: &str, a: String, b: String| DatasetError::BadState {
                reason: format!("state {i} differs from state 0 in {what}: {b} vs {a}"),
            };
            let key = |s: &LoaderState| {
                (
                    s.version,
                    s.sequences,
                    s.fingerprint,
                    s.shuffle,
                    s.remainder,
                    s.consumers,
                    s.mixture.clone(),
                    s.joined,
                )
            };
            if key(s) != key(first) {
                return Err(differ(
                    "dataset or options",
                    format!("{:?}", key(first)),
                    format!("{:?}", key(s)),
                ));
            }
            if s.epoch != first.epoch {
                return Err(differ(
                    "epoch",
                    first.epoch.to_string(),
                    s.epoch.to_string(),
                ));
            }
            if s.frontier != first.frontier
                || s.skip != first.skip
                || s.ranges != first.ranges
                || s.blocks != first.blocks
            {
                return Err(differ(
                    "the base of the order (frontier, skip list, ranges and blocks)",
                    first.frontier.to_string(),
                    s.frontier.to_string(),
                ));
            }
            for (&c, &n) in &s.consumed {
                match out.consumed.get(&c) {
                    Some(&m) if m != n => {
                        return Err(DatasetError::BadState {
                            reason: format!("consumer {c} has two counts: {m} and {n}"),
                        });
                    }
                    _ => {
                        out.consumed.insert(c, n);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The base of an epoch's remaining order: everything before `frontier`
/// and every position in `skip` was consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Base {
    pub(crate) frontier: u64,
    pub(crate) skip: Vec<u64>,
}

impl Base {
    /// The number of positions left: the tail's length `L`.
    pub(crate) fn tail_len(&self, n: u64) -> u64 {
        n.saturating_sub(self.frontier)
            .saturating_sub(self.skip.len() as u64)
    }

    /// The positions of the tail indices `indices` (increasing): index `i`
    /// is the `i`-th position from the frontier that is not in `skip`.
    pub(crate) fn positions(&self, indices: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(indices.len());
        let mut k = 0usize;
        for &i in indices {
            let mut p = self.frontier + i + k as u64;
            while self.skip.get(k).is_some_and(|&s| s <= p) {
                k += 1;
                p += 1;
            }
            out.push(p);
        }
        out
    }

    /// The end (exclusive) of the tail indices dealt under `remainder` to
    /// `consumers` consumers.
    pub(crate) fn end(&self, n: u64, consumers: u64, remainder: Remainder) -> u64 {
        let len = self.tail_len(n);
        match remainder {
            Remainder::Keep => len,
            Remainder::Drop => len / consumers * consumers,
            Remainder::Repeat => len.div_ceil(consumers) * consumers,
        }
    }

    /// The base after the consumers of `state` consumed what it says.
    pub(crate) fn advance(&self, n: u64, state: &LoaderState) -> Base {
        let c_old = state.consumers.max(1);
        let len = self.tail_len(n);
        let count = |c: u64| state.consumed.get(&c).copied().unwrap_or(0);
        // The first unconsumed tail index.
        let first = (0..c_old)
            .map(|c| c.saturating_add(count(c).saturating_mul(c_old)))
            .min()
            .unwrap_or(0);
        if first >= len {
            return Base {
                frontier: n,
                skip: Vec::new(),
            };
        }
        // The tail indices consumed after it (by consumers that were ahead).
        let mut ahead = Vec::new();
        for c in 0..c_old {
            let mut i = if c > first {
                c
            } else {
                c + (first - c).div_ceil(c_old) * c_old
            };
            let stop = c.saturating_add(count(c).saturating_mul(c_old)).min(len);
            while i < stop {
                ahead.push(i);
                i += c_old;
            }
        }
        ahead.sort_unstable();
        let mut indices = Vec::with_capacity(ahead.len() + 1);
        indices.push(first);
        indices.extend_from_slice(&ahead);
        let positions = self.positions(&indices);
        let frontier = positions.first().copied().unwrap_or(n);
        let mut skip: Vec<u64> = self
            .skip
            .iter()
            .copied()
            .filter(|&p| p >= frontier)
            .chain(positions.iter().skip(1).copied())
            .collect();
        skip.sort_unstable();
        skip.dedup();
        Base { frontier, skip }
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
    /// [`PackOptions::capacity`](super::PackOptions::capacity).
    pub capacity: usize,
    /// [`PackOptions::rows`](super::PackOptions::rows).
    pub rows: Option<usize>,
    /// [`PackOptions::buffer`](super::PackOptions::buffer).
    pub buffer: usize,
    /// The name of the tensor whose rows count.
    pub tensor: String,
    /// Equal counts per consumer (version 3; absent: false).
    #[serde(default)]
    pub equal: bool,
    /// [`PackOptions::truncate`](super::PackOptions::truncate) (version 3; absent: false).
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
    pub(crate) fn options(&self) -> (usize, Option<usize>, usize, &str, bool) {
        (
            self.capacity,
            self.rows,
            self.buffer,
            self.tensor.as_str(),
            self.truncate,
        )
    }

    /// The state version this packing needs.
    pub(crate) fn version(&self) -> u32 {
        if self.equal || self.truncate {
            PACK_EQUAL_VERSION
        } else {
            PACK_VERSION
        }
    }
}

/// Checks a state's version against its `packing` field.
pub(crate) fn check_version(state: &LoaderState) -> Result<()> {
    let blocks = state.blocks.unwrap_or(1);
    match (state.version, &state.packing) {
        (v, None) if state.ranges.is_some() && v == locality_version(blocks) => return Ok(()),
        _ if state.ranges.is_some()
            || state.blocks.is_some()
            || state.version == LOCALITY_VERSION
            || state.version == LOCALITY_BLOCKS_VERSION =>
        {
            return Err(DatasetError::BadState {
                reason: format!(
                    "state version {} {} `ranges` and {} `packing`: this lodt reads the locality partition's `ranges` in version {LOCALITY_VERSION} states without `packing`, and in version {LOCALITY_BLOCKS_VERSION} ones with `blocks` above 1",
                    state.version,
                    if state.ranges.is_some() {
                        "with"
                    } else {
                        "without"
                    },
                    if state.packing.is_some() {
                        "with"
                    } else {
                        "without"
                    },
                ),
            });
        }
        _ => {}
    }
    match (state.version, &state.joined) {
        (JOINED_VERSION, Some(_)) if state.packing.is_none() && state.mixture.is_none() => {
            return Ok(());
        }
        (JOINED_VERSION, _) | (_, Some(_)) => {
            return Err(DatasetError::BadState {
                reason: format!(
                    "state version {} {} `joined`: this lodt reads `joined` in version {JOINED_VERSION} states of one dataset without `packing`",
                    state.version,
                    if state.joined.is_some() {
                        "with"
                    } else {
                        "without"
                    }
                ),
            });
        }
        _ => {}
    }
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
fn merge_packing(states: &[LoaderState]) -> Result<Option<PackState>> {
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

/// What a state is checked against: the stream a loader reads (a
/// dataset's, or a mixture's), as far as a state records it.
pub(crate) trait Subject {
    /// The number of positions of epoch `epoch`'s stream.
    fn len(&self, epoch: u64) -> u64;
    /// The fingerprint a state records.
    fn fingerprint(&self) -> u32;
    /// The mixture part of a state of epoch `epoch` (`None` for a single
    /// dataset).
    fn mixture_state(&self, epoch: u64) -> Option<MixtureState>;
}

/// Checks that `state` is one a loader of `feed` with `options` could have
/// saved (whatever its number of consumers and its version): its dataset
/// (or mixture), shuffle and remainder, its base, and every count within
/// its consumer's share. The one check of a state, for plain and packed
/// loaders alike; returns the state's base.
pub(crate) fn check_state(
    feed: &impl Subject,
    options: &LoaderOptions,
    state: &LoaderState,
) -> Result<Base> {
    let bad = |reason: String| Err(DatasetError::BadState { reason });
    check_common(feed, options, state)?;
    if state.ranges.is_some() {
        return bad(
            "it is a state of the locality partition (`ranges`), read as round robin's".into(),
        );
    }
    let n = feed.len(state.epoch);
    if state.frontier > n {
        return bad(format!(
            "frontier {} is past the epoch's {n} positions",
            state.frontier
        ));
    }
    let mut last = None;
    for &p in &state.skip {
        if p < state.frontier || p >= n || last.is_some_and(|l| p <= l) {
            return bad(format!(
                "skip list entry {p}: entries must increase and lie in {}..{n}",
                state.frontier
            ));
        }
        last = Some(p);
    }
    if let Some(cursor) = &state.cursor {
        let Some(shuffle) = state
            .shuffle
            .filter(|_| state.mixture.is_none() && state.joined.is_none())
        else {
            return bad(
                "it has a cursor, which only a shuffled order of one dataset's shard list has (7.3)".into(),
            );
        };
        cursor.check(state.epoch, n, shuffle.buffer)?;
    }
    let base = Base {
        frontier: state.frontier,
        skip: state.skip.clone(),
    };
    // Each count within its consumer's share: what no loader could have
    // consumed is not a state a loader wrote.
    let end = base.end(n, state.consumers, state.remainder);
    for (&c, &count) in &state.consumed {
        if c >= state.consumers {
            return bad(format!(
                "it has a count for consumer {c}, but only {} consumers (0..{})",
                state.consumers, state.consumers
            ));
        }
        let share = if end > c {
            (end - c).div_ceil(state.consumers)
        } else {
            0
        };
        if count > share {
            return bad(format!(
                "consumer {c} consumed {count} sequences, but its share of the epoch's rest is {share} \
                 ({} positions left after the frontier {} and {} skipped, dealt to {} consumers)",
                base.tail_len(n),
                state.frontier,
                state.skip.len(),
                state.consumers
            ));
        }
    }
    Ok(base)
}

/// The checks of a state common to both partitions: its dataset (or
/// mixture), shuffle, remainder and consumers.
fn check_common(feed: &impl Subject, options: &LoaderOptions, state: &LoaderState) -> Result<()> {
    let bad = |reason: String| Err(DatasetError::BadState { reason });
    let mixture = feed.mixture_state(state.epoch);
    if state.mixture != mixture {
        return bad(match (&state.mixture, &mixture) {
            (None, Some(_)) => {
                "it is the state of a single dataset's loader, not of a mixture's".into()
            }
            (Some(_), None) => {
                "it is the state of a mixture's loader, not of a single dataset's".into()
            }
            (saved, this) => {
                format!("it was saved on another mixture ({saved:?}); this one is {this:?}")
            }
        });
    }
    let n = feed.len(state.epoch);
    if state.sequences != n || state.fingerprint != feed.fingerprint() {
        return bad(format!(
            "it was saved on another dataset ({} sequences, fingerprint {:#010x}); this one has {n} sequences, fingerprint {:#010x}",
            state.sequences,
            state.fingerprint,
            feed.fingerprint()
        ));
    }
    if state.shuffle != options.shuffle {
        return bad(format!(
            "it was saved with shuffle {:?}, the options say {:?} (the order would differ)",
            state.shuffle, options.shuffle
        ));
    }
    if state.remainder != options.remainder {
        return bad(format!(
            "it was saved with remainder {:?}, the options say {:?}",
            state.remainder, options.remainder
        ));
    }
    if state.consumers == 0 {
        return bad("it has 0 consumers".into());
    }
    Ok(())
}

/// Checks a state of the locality partition (as [`check_state`] does one
/// of round robin's): its ranges, and every count within its consumer's
/// share. Returns its ranges.
fn check_locality(
    feed: &impl Subject,
    options: &LoaderOptions,
    state: &LoaderState,
) -> Result<Ranges> {
    check_common(feed, options, state)?;
    let n = feed.len(state.epoch);
    let ranges = Ranges::try_new(
        state.ranges.as_deref().unwrap_or(&[]),
        n,
        state.blocks.unwrap_or(1),
    )?;
    if state.frontier != ranges.first(n) || !state.skip.is_empty() {
        return Err(DatasetError::BadState {
            reason: format!(
                "frontier {} and {} skip list entries: a locality state's frontier is its first range's start ({}) and its skip list is empty",
                state.frontier,
                state.skip.len(),
                ranges.first(n)
            ),
        });
    }
    for (&c, &count) in &state.consumed {
        let share = ranges.share(state.consumers, c, state.remainder);
        if c >= state.consumers || count > share {
            return Err(DatasetError::BadState {
                reason: format!(
                    "consumer {c} consumed {count} sequences: there are {} consumers, and consumer {c}'s block of the {} positions left holds {share}",
                    state.consumers,
                    ranges.len()
                ),
            });
        }
    }
    Ok(ranges)
}

/// Where a consumer's share of an epoch comes from: the round-robin deal
/// of the tail after a base (section 7.1), or the locality partition's
/// blocks of ranges (section 7.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deal {
    RoundRobin(Base),
    Locality(Ranges),
}

impl Deal {
    /// The start of an epoch of `n` positions in `partition`, dealt to
    /// `consumers` (whose blocks cut the locality partition's order).
    pub(crate) fn start(partition: Partition, n: u64, consumers: u64) -> Deal {
        match partition {
            Partition::RoundRobin => Deal::RoundRobin(Base::default()),
            Partition::Locality => Deal::Locality(Ranges::whole(n, consumers)),
        }
    }

    /// Its partition.
    pub(crate) fn partition(&self) -> Partition {
        match self {
            Deal::RoundRobin(_) => Partition::RoundRobin,
            Deal::Locality(_) => Partition::Locality,
        }
    }

    /// How many sequences consumer `c` of `consumers` delivers in all.
    pub(crate) fn share(&self, n: u64, consumers: u64, c: u64, remainder: Remainder) -> u64 {
        match self {
            Deal::RoundRobin(base) => {
                let end = base.end(n, consumers, remainder);
                if end > c {
                    (end - c).div_ceil(consumers)
                } else {
                    0
                }
            }
            Deal::Locality(ranges) => ranges.share(consumers, c, remainder),
        }
    }
}

/// The epoch, deal and consumed count a loader resumes with. `partition`
/// is the one the options ask for (`None`: the state's).
pub(crate) fn resume_point(
    feed: &impl Subject,
    options: &LoaderOptions,
    (consumers, consumer): (u64, u64),
    partition: Option<Partition>,
    state: &LoaderState,
) -> Result<(u64, Deal, u64)> {
    let bad = |reason: String| Err(DatasetError::BadState { reason });
    let saved = if state.ranges.is_some() {
        Partition::Locality
    } else {
        Partition::RoundRobin
    };
    if let Some(asked) = partition.filter(|&p| p != saved) {
        return bad(format!(
            "it was saved in the {saved} partition, the options say {asked} (the order would differ)"
        ));
    }
    let expected = match saved {
        Partition::RoundRobin if state.joined.is_some() => JOINED_VERSION,
        Partition::RoundRobin => STATE_VERSION,
        Partition::Locality => locality_version(state.blocks.unwrap_or(1)),
    };
    if state.version != expected {
        return bad(format!(
            "state version {}, this lodt reads version {STATE_VERSION} (round robin), {JOINED_VERSION} (round robin with `joined`), {LOCALITY_VERSION} (locality) and {LOCALITY_BLOCKS_VERSION} (locality with `blocks`) here",
            state.version
        ));
    }
    check_version(state)?;
    let deal = match saved {
        Partition::RoundRobin => Deal::RoundRobin(check_state(feed, options, state)?),
        Partition::Locality => Deal::Locality(check_locality(feed, options, state)?),
    };
    let n = feed.len(state.epoch);
    if state.consumers == consumers {
        return match state.consumed.get(&consumer) {
            Some(&count) => Ok((state.epoch, deal, count)),
            None => bad(format!(
                "it has no count for consumer {consumer} (rank {}, worker {}): resume each loader from the state it saved, or from LoaderState::merge of every loader's state",
                options.rank, options.worker
            )),
        };
    }
    if let Some(missing) = (0..state.consumers).find(|c| !state.consumed.contains_key(c)) {
        return bad(format!(
            "it was saved by {} consumers and this loader has {consumers}: resuming with another world size needs the states of all {} merged (LoaderState::merge); consumer {missing} is missing",
            state.consumers, state.consumers
        ));
    }
    let deal = match deal {
        Deal::RoundRobin(base) => Deal::RoundRobin(base.advance(n, state)),
        Deal::Locality(ranges) => Deal::Locality(ranges.advance(state.consumers, &state.consumed)),
    };
    Ok((state.epoch, deal, 0))
}

/// The version of a mixture's part of a loader state ([`MixtureState`]).
pub const MIXTURE_STATE_VERSION: u32 = 1;

/// One source as a state records it.
///
/// ```
/// let s = lodt::dataset::SourceState { sequences: 10, fingerprint: 7 };
/// assert_eq!(serde_json::to_value(s)?, serde_json::json!({"sequences": 10, "fingerprint": 7}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceState {
    /// Its number of sequences.
    pub sequences: u64,
    /// Its [`Dataset::fingerprint`](super::Dataset::fingerprint).
    pub fingerprint: u32,
}

/// The mixture a loader state belongs to: [`LoaderState::mixture`].
/// A state resumes only on an equal mixture (same sources, weights, seed
/// and stopping rule).
///
/// ```
/// let json = serde_json::json!({"version": 1, "seed": 3, "weights": [0.75, 0.25],
///     "stop": "first_exhausted", "sources": [{"sequences": 8, "fingerprint": 1},
///     {"sequences": 4, "fingerprint": 2}]});
/// let m: lodt::dataset::MixtureState = serde_json::from_value(json.clone())?;
/// assert_eq!(serde_json::to_value(&m)?, json);
/// assert!(m.evolved.is_none());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixtureState {
    /// Its format version ([`MIXTURE_STATE_VERSION`]).
    pub version: u32,
    /// The seed of the draws.
    pub seed: u64,
    /// The weights, one per source.
    pub weights: Vec<f64>,
    /// The stopping rule.
    pub stop: Stop,
    /// The sources, in order.
    pub sources: Vec<SourceState>,
    /// Set (and `version` [`MIXTURE_EVOLVED_VERSION`]) in the epoch of a
    /// resume on changed parameters ([`Mixture::evolve_state`](super::Mixture::evolve_state),
    /// `spec/DATASET.md` 10.6): where each source was when the parameters
    /// changed. Absent otherwise (every state of version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evolved: Option<Evolved>,
}

/// The version of a [`MixtureState`] with [`MixtureState::evolved`]: a
/// reader that knows only version 1 refuses it (as another mixture).
///
/// ```
/// assert_eq!(lodt::dataset::MIXTURE_EVOLVED_VERSION, 2);
/// ```
pub const MIXTURE_EVOLVED_VERSION: u32 = 2;

/// The epoch of a mixture that continues under changed parameters
/// (`spec/DATASET.md` 10.6): how many positions of the epoch were
/// delivered before the change, and each source's progress through its
/// draws then.
///
/// ```
/// let json = serde_json::json!({"epoch": 0, "delivered": 5, "sources": [
///     {"sequences": 8, "fingerprint": 1, "order": 0, "frontier": 3, "skip": [5]}],
///     "removed": []});
/// let e: lodt::dataset::Evolved = serde_json::from_value(json.clone())?;
/// assert_eq!(e.sources[0].frontier, 3);
/// assert_eq!(serde_json::to_value(&e)?, json);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evolved {
    /// The epoch it continues (the state's).
    pub epoch: u64,
    /// The positions of the epoch delivered before the change (the stream
    /// of the draws after it is `(seed, epoch, 7, delivered)`).
    pub delivered: u64,
    /// Per source of the mixture, in order: its progress.
    pub sources: Vec<SourceProgress>,
    /// The sources of earlier parameters that the mixture no longer has,
    /// with their progress (a source added back continues from it).
    #[serde(default)]
    pub removed: Vec<SourceProgress>,
}

/// One source's progress through its draws in an epoch (`spec/DATASET.md`
/// 10.6): the draws `j < frontier` and those in `skip` were delivered.
///
/// ```
/// let p = lodt::dataset::SourceProgress { sequences: 4, fingerprint: 9, order: 1, frontier: 2, skip: vec![3] };
/// assert_eq!(serde_json::to_value(&p)?["order"], 1);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceProgress {
    /// The source's number of sequences.
    pub sequences: u64,
    /// Its [`Dataset::fingerprint`](super::Dataset::fingerprint).
    pub fingerprint: u32,
    /// The index its pass orders are seeded with: `stream_seed(S, e, 4, order)`.
    pub order: u64,
    /// Every draw index below it was delivered.
    pub frontier: u64,
    /// Draw indices above the frontier that were delivered, increasing.
    pub skip: Vec<u64>,
}

// JSON has no NaN: every weight read or written is a finite number, so the
// comparison is reflexive.
impl Eq for MixtureState {}
