//! What a saved loader state says, without a loader: [`StateReport`]
//! (`lodt state show`, Python's `lodt.inspect_state`). The counts follow the
//! deal rules of `spec/DATASET.md` 7.1 and 7.6, in one place with the
//! loader's ([`Deal::share`]).

use super::checkpoint::Checkpoint;
use super::error::{DatasetError, Result};
use super::locality::Ranges;
use super::options::{Partition, Remainder, ShuffleOptions};
use super::reader::Dataset;
use super::state::{Base, Deal, LoaderState, SourceState};
use serde::Serialize;

/// One consumer's progress through its share of the epoch.
///
/// ```
/// let c = lodt::dataset::ConsumerProgress { consumer: 1, share: 5, delivered: 2, remaining: 3 };
/// assert_eq!(c.share, c.delivered + c.remaining);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerProgress {
    /// The consumer (`rank × workers + worker`).
    pub consumer: u64,
    /// How many sequences it delivers from the state's base in all.
    pub share: u64,
    /// How many of them it delivered (for a packing consumer: read before
    /// its current window).
    pub delivered: u64,
    /// `share − delivered`.
    pub remaining: u64,
}

/// The facts of a saved loader state (or a rank's checkpoint, 7.5).
///
/// ```
/// let state = serde_json::json!({"version": 1, "sequences": 10, "fingerprint": 0, "shuffle": null,
///     "remainder": "keep", "epoch": 3, "frontier": 4, "skip": [6], "consumers": 2,
///     "consumed": {"0": 2, "1": 1}});
/// let r = lodt::dataset::StateReport::of_json(&state)?;
/// assert_eq!((r.epoch, r.partition.as_str(), r.consumers, r.complete), (3, "round_robin", 2, true));
/// // 4 before the frontier, 1 skipped, 3 counted; the 5 left of the tail of 5 are dealt 3 and 2.
/// assert_eq!((r.delivered, r.remaining), (8, 2));
/// assert_eq!(r.per_consumer[0].remaining, 1);
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateReport {
    /// The loader state's version (7.2).
    pub state_version: u32,
    /// `"round_robin"` or `"locality"`.
    pub partition: String,
    /// The epoch.
    pub epoch: u64,
    /// The epoch's positions (the dataset's sequences, or a mixture's stream).
    pub sequences: u64,
    /// The consumers the state was saved with (`world_size × workers`).
    pub consumers: u64,
    /// Whether it holds every consumer's count (a merged state: it resumes
    /// on any world size).
    pub complete: bool,
    /// Sequences of the epoch delivered: the positions before the base's
    /// tail and every count the state holds.
    pub delivered: u64,
    /// What the counted consumers still deliver (with `repeat`, repeats
    /// included).
    pub remaining: u64,
    /// Per consumer the state holds a count for.
    pub per_consumer: Vec<ConsumerProgress>,
    /// The shuffle.
    pub shuffle: Option<ShuffleOptions>,
    /// The remainder rule.
    pub remainder: Remainder,
    /// The dataset's fingerprint (7.2).
    pub fingerprint: u32,
    /// For a packing loader's state: its consumers' current windows.
    pub packing_windows: Option<usize>,
    /// For a mixture's state: its sources, weights and seed.
    pub mixture: Option<MixtureFacts>,
    /// For a rank's checkpoint: the local worker that delivers next.
    pub next_worker: Option<u64>,
}

/// What a mixture's state records of the mixture.
///
/// ```
/// let m = lodt::dataset::MixtureFacts { seed: 1, weights: vec![0.5, 0.5], stop: "first_exhausted".into(),
///     sources: vec![], delivered: None, evolved: None };
/// assert_eq!(m.weights.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixtureFacts {
    /// The seed of the draws.
    pub seed: u64,
    /// One weight per source.
    pub weights: Vec<f64>,
    /// The stopping rule, as its JSON text.
    pub stop: String,
    /// Per source, its sequences and fingerprint.
    pub sources: Vec<SourceState>,
    /// For a complete state without packing: per source, how many of its
    /// draws of the epoch were delivered (a source that ran out and started
    /// over counts each pass).
    pub delivered: Option<Vec<u64>>,
    /// For a state that continues a change of parameters
    /// (`spec/DATASET.md` 10.6): each source's progress at the change, and
    /// the sources removed.
    pub evolved: Option<super::state::Evolved>,
}

impl StateReport {
    /// The report of `value`: a loader state (7.2) or a rank's checkpoint
    /// (7.5), checked as a loader reading it would check its form.
    pub fn of_json(value: &serde_json::Value) -> Result<StateReport> {
        let is_checkpoint = value.get("loader").is_some();
        let checkpoint = Checkpoint::from_json(value)?;
        let mut report = Self::of(&checkpoint.loader)?;
        report.next_worker = is_checkpoint.then_some(checkpoint.next_worker);
        Ok(report)
    }

    /// The report of `state`.
    ///
    /// ```
    /// let state = lodt::dataset::LoaderState::from_json(&serde_json::json!({"version": 4,
    ///     "sequences": 10, "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 0,
    ///     "frontier": 0, "skip": [], "consumers": 2, "consumed": {"1": 4}, "ranges": [[0, 10]]}))?;
    /// let r = lodt::dataset::StateReport::of(&state)?;
    /// assert_eq!((r.partition.as_str(), r.complete, r.delivered, r.remaining), ("locality", false, 4, 1));
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn of(state: &LoaderState) -> Result<StateReport> {
        if state.consumers == 0 {
            return Err(DatasetError::BadState {
                reason: "it has 0 consumers (a state's `consumers` is at least 1)".into(),
            });
        }
        let n = state.sequences;
        let (partition, deal) = match &state.ranges {
            Some(ranges) => {
                let ranges = Ranges::try_new(ranges, n, state.blocks.unwrap_or(1))?;
                (Partition::Locality, Deal::Locality(ranges))
            }
            None => {
                let base = Base {
                    frontier: state.frontier.min(n),
                    skip: state.skip.clone(),
                };
                (Partition::RoundRobin, Deal::RoundRobin(base))
            }
        };
        let tail = match &deal {
            Deal::RoundRobin(base) => base.tail_len(n),
            Deal::Locality(ranges) => ranges.len(),
        };
        let per_consumer: Vec<ConsumerProgress> = state
            .consumed
            .iter()
            .map(|(&consumer, &count)| {
                let share = deal.share(n, state.consumers, consumer, state.remainder);
                let delivered = count.min(share);
                ConsumerProgress {
                    consumer,
                    share,
                    delivered,
                    remaining: share - delivered,
                }
            })
            .collect();
        let counted: u64 = per_consumer.iter().map(|c| c.delivered).sum();
        Ok(StateReport {
            state_version: state.version,
            partition: partition.to_string(),
            epoch: state.epoch,
            sequences: n,
            consumers: state.consumers,
            complete: (0..state.consumers).all(|c| state.consumed.contains_key(&c)),
            delivered: (n - tail).saturating_add(counted).min(n),
            remaining: per_consumer.iter().map(|c| c.remaining).sum(),
            per_consumer,
            shuffle: state.shuffle,
            remainder: state.remainder,
            fingerprint: state.fingerprint,
            packing_windows: state.packing.as_ref().map(|p| p.windows.len()),
            mixture: match &state.mixture {
                None => None,
                Some(m) => Some(MixtureFacts {
                    seed: m.seed,
                    weights: m.weights.clone(),
                    stop: serde_json::to_string(&m.stop).unwrap_or_default(),
                    sources: m.sources.clone(),
                    delivered: super::mixture_evolve::delivered_draws(state)?,
                    evolved: m.evolved.clone(),
                }),
            },
            next_worker: None,
        })
    }

    /// Why `dataset` is not the one the state was saved on (its sequence
    /// count or fingerprint differ), or `None` if it is. A mixture's state
    /// is checked against its sources by the mixture.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// let state = serde_json::json!({"version": 1, "sequences": 0, "fingerprint": 0, "shuffle": null,
    ///     "remainder": "keep", "epoch": 0, "frontier": 0, "skip": [], "consumers": 1, "consumed": {}});
    /// assert_eq!(lodt::dataset::StateReport::of_json(&state)?.mismatch(&dataset), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn mismatch(&self, dataset: &Dataset) -> Option<String> {
        if self.mixture.is_some() {
            return Some(
                "it is a mixture's state: it resumes on the mixture of its sources, not on one dataset"
                    .into(),
            );
        }
        let (n, f) = (dataset.num_sequences(), dataset.fingerprint());
        (self.sequences != n || self.fingerprint != f).then(|| {
            format!(
                "saved on a dataset of {} sequences and fingerprint {:#010x}, found {n} sequences and {f:#010x}",
                self.sequences, self.fingerprint
            )
        })
    }
}
