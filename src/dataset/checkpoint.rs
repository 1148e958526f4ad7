//! The checkpoint of one rank (`spec/DATASET.md` 7.5): a [`LoaderState`]
//! holding the count of each of the rank's consumers, and the worker
//! rotation that lets a `DataLoader`'s round robin over its workers continue
//! exactly where it stopped. Python's `Dataset.state_dict()` is this object.
//!
//! ```text
//!  {"version": 1, "loader": { ...a loader state, 7.2... }, "next_worker": 1}
//! ```
//!
//! A rank reads through `W` workers: worker process `w` serves local consumer
//! `(w + first) mod W` (consumer `rank × W + local`, [`consumer`]), where
//! `first` is the worker that delivers next in the checkpoint it resumed
//! from ([`Checkpoint::first_worker`]), so that the first mini-batch of a
//! resumed pass is the one the uninterrupted run would have delivered next.

use crate::dataset::{DatasetError, LoaderOptions, LoaderState, Result};
use serde_json::{Map, Value};

/// The version of the checkpoint object (its loader state has its own,
/// `spec/DATASET.md` 7.2).
///
/// ```
/// assert_eq!(lodt::dataset::CHECKPOINT_VERSION, 1);
/// ```
pub const CHECKPOINT_VERSION: u64 = 1;

/// One rank's checkpoint: its loader state and the worker that delivers
/// next (`spec/DATASET.md` 7.5).
///
/// ```
/// use lodt::dataset::{Checkpoint, LoaderState};
/// let loader = serde_json::json!({"version": 1, "sequences": 10, "fingerprint": 0,
///     "shuffle": null, "remainder": "keep", "epoch": 0, "frontier": 0, "skip": [],
///     "consumers": 2, "consumed": {"0": 2, "1": 1}});
/// let checkpoint = Checkpoint::new(LoaderState::from_json(&loader)?, 0);
/// let json = checkpoint.to_json();
/// assert_eq!(json["version"], 1);
/// assert_eq!(json["loader"], loader);
/// assert_eq!(Checkpoint::from_json(&json)?, checkpoint);
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The loader state: the counts of the rank's consumers (or of every
    /// consumer, merged).
    pub loader: LoaderState,
    /// The local worker whose consumer delivers next (0 for a merged state).
    pub next_worker: u64,
}

fn bad(reason: String) -> DatasetError {
    DatasetError::BadState { reason }
}

impl Checkpoint {
    /// A checkpoint of `loader` whose next mini-batch comes from local worker
    /// `next_worker`.
    ///
    /// ```
    /// # use lodt::dataset::{Checkpoint, LoaderState};
    /// # let loader = LoaderState::from_json(&serde_json::json!({"version": 1, "sequences": 4,
    /// #     "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 3, "frontier": 0,
    /// #     "skip": [], "consumers": 1, "consumed": {"0": 0}}))?;
    /// let checkpoint = Checkpoint::new(loader, 0);
    /// assert_eq!(checkpoint.loader.epoch, 3);
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn new(loader: LoaderState, next_worker: u64) -> Self {
        Checkpoint {
            loader,
            next_worker,
        }
    }

    /// The checkpoint as JSON: `{"version": 1, "loader": ..., "next_worker": k}`.
    ///
    /// ```
    /// # use lodt::dataset::{Checkpoint, LoaderState};
    /// # let loader = LoaderState::from_json(&serde_json::json!({"version": 1, "sequences": 4,
    /// #     "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 0, "frontier": 0,
    /// #     "skip": [], "consumers": 2, "consumed": {"0": 1, "1": 0}}))?;
    /// assert_eq!(Checkpoint::new(loader, 1).to_json()["next_worker"], 1);
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("version".into(), CHECKPOINT_VERSION.into());
        map.insert("loader".into(), self.loader.to_json());
        map.insert("next_worker".into(), self.next_worker.into());
        Value::Object(map)
    }

    /// A checkpoint from JSON: the object of [`Checkpoint::to_json`]
    /// (`next_worker` may be absent: 0), or a bare loader state (an object
    /// with `frontier` and `consumers`, e.g. [`LoaderState::merge`] of every
    /// rank's), which resumes with worker 0.
    ///
    /// Errors ([`DatasetError::BadState`]): another `version`, a
    /// `next_worker` that is not an integer `>= 0`, a `loader` that is not a
    /// loader state, or an object that is neither.
    ///
    /// ```
    /// use lodt::dataset::Checkpoint;
    /// let loader = serde_json::json!({"version": 1, "sequences": 4, "fingerprint": 0,
    ///     "shuffle": null, "remainder": "keep", "epoch": 0, "frontier": 0, "skip": [],
    ///     "consumers": 1, "consumed": {"0": 2}});
    /// let bare = Checkpoint::from_json(&loader)?;
    /// assert_eq!(bare.next_worker, 0);
    /// let bad = serde_json::json!({"version": 1, "loader": loader, "next_worker": -1});
    /// let err = Checkpoint::from_json(&bad).unwrap_err().to_string();
    /// assert!(err.contains("next_worker must be an integer >= 0, found -1"), "{err}");
    /// assert!(Checkpoint::from_json(&serde_json::json!({"epoch": 3})).is_err());
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn from_json(value: &Value) -> Result<Self> {
        let Some(object) = value.as_object() else {
            return Err(bad(format!(
                "a dataset state is a JSON object, found {}",
                kind(value)
            )));
        };
        if let Some(loader) = object.get("loader") {
            let version = object.get("version").unwrap_or(&Value::Null);
            if version.as_u64() != Some(CHECKPOINT_VERSION) {
                return Err(bad(format!(
                    "dataset state version {version}; this lodt reads version {CHECKPOINT_VERSION}"
                )));
            }
            let next_worker = match object.get("next_worker") {
                None => 0,
                Some(n) => n.as_u64().ok_or_else(|| {
                    bad(format!(
                        "dataset state: next_worker must be an integer >= 0, found {n}"
                    ))
                })?,
            };
            if !loader.is_object() {
                return Err(bad(format!(
                    "dataset state: loader must be a loader state (an object), found {}",
                    kind(loader)
                )));
            }
            return Ok(Checkpoint::new(
                LoaderState::from_json(loader)?,
                next_worker,
            ));
        }
        if object.contains_key("frontier") && object.contains_key("consumers") {
            return Ok(Checkpoint::new(LoaderState::from_json(value)?, 0));
        }
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        Err(bad(format!(
            "not a dataset state: expected the object of Dataset.state_dict() (keys version, \
             loader, next_worker) or a loader state, found keys {keys:?}"
        )))
    }

    /// Merges the checkpoints of every rank of one checkpoint (their loader
    /// states, [`LoaderState::merge`]) into one complete checkpoint, to
    /// resume on another world size or number of workers: it resumes with
    /// worker 0.
    ///
    /// ```
    /// use lodt::dataset::{Checkpoint, LoaderState};
    /// let rank = |c: u64, n: u64| LoaderState::from_json(&serde_json::json!({"version": 1,
    ///     "sequences": 10, "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 0,
    ///     "frontier": 0, "skip": [], "consumers": 2, "consumed": {c.to_string(): n}}));
    /// let merged = Checkpoint::merge(&[Checkpoint::new(rank(0, 3)?, 0), Checkpoint::new(rank(1, 2)?, 0)])?;
    /// assert!(merged.loader.is_complete());
    /// assert_eq!(merged.next_worker, 0);
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn merge(checkpoints: &[Checkpoint]) -> Result<Self> {
        let loaders: Vec<LoaderState> = checkpoints.iter().map(|c| c.loader.clone()).collect();
        Ok(Checkpoint::new(LoaderState::merge(&loaders)?, 0))
    }

    /// The number of workers of each of `world_size` ranks this checkpoint
    /// was taken with: `consumers / world_size` when that divides, else 1
    /// (a state of another world size resumes through 7.3, from worker 0).
    /// An error if `next_worker` is not one of them, or `world_size` is 0.
    ///
    /// ```
    /// # use lodt::dataset::{Checkpoint, LoaderState};
    /// # let loader = LoaderState::from_json(&serde_json::json!({"version": 1, "sequences": 12,
    /// #     "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 0, "frontier": 0,
    /// #     "skip": [], "consumers": 6, "consumed": {"0": 1, "1": 1, "2": 0}}))?;
    /// let checkpoint = Checkpoint::new(loader, 2); // 6 consumers: 2 ranks of 3 workers
    /// assert_eq!(checkpoint.workers(2)?, 3);
    /// // 6 is not a multiple of 4: 1 worker, and next_worker 2 is not below 1.
    /// assert!(checkpoint.workers(4).is_err());
    /// assert_eq!(Checkpoint { next_worker: 0, ..checkpoint }.workers(4)?, 1);
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn workers(&self, world_size: u64) -> Result<u64> {
        if world_size == 0 {
            return Err(DatasetError::InvalidArgument(
                "a world size of 0: it must be at least 1".into(),
            ));
        }
        let consumers = self.loader.consumers;
        let workers = if consumers.is_multiple_of(world_size) {
            (consumers / world_size).max(1)
        } else {
            1
        };
        if self.next_worker >= workers {
            return Err(bad(format!(
                "dataset state: next_worker {} is not one of this rank's {workers} workers",
                self.next_worker
            )));
        }
        Ok(workers)
    }

    /// The local consumer that worker process 0 serves when a rank of
    /// `world_size` resumes from this checkpoint with `workers` workers:
    /// `next_worker mod workers` when the consumers are the same
    /// (`consumers == world_size × workers`), else 0 (a new deal, 7.3).
    ///
    /// ```
    /// # use lodt::dataset::{Checkpoint, LoaderState};
    /// # let loader = LoaderState::from_json(&serde_json::json!({"version": 1, "sequences": 12,
    /// #     "fingerprint": 0, "shuffle": null, "remainder": "keep", "epoch": 0, "frontier": 0,
    /// #     "skip": [], "consumers": 3, "consumed": {"0": 1, "1": 1, "2": 0}}))?;
    /// let checkpoint = Checkpoint::new(loader, 2);
    /// assert_eq!(checkpoint.first_worker(1, 3), 2);
    /// assert_eq!(checkpoint.first_worker(1, 2), 0); // other consumers: a new deal
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn first_worker(&self, world_size: u64, workers: u64) -> u64 {
        match world_size.checked_mul(workers) {
            Some(c) if c == self.loader.consumers && workers > 0 => self.next_worker % workers,
            _ => 0,
        }
    }
}

/// The local consumer worker process `worker` of `workers` serves in a pass
/// whose worker 0 serves `first` ([`Checkpoint::first_worker`]; 0 when the
/// pass does not resume): `(worker + first) mod workers`. 0 when `workers`
/// is 0.
///
/// ```
/// assert_eq!(lodt::dataset::served_worker(0, 2, 3), 2);
/// assert_eq!(lodt::dataset::served_worker(1, 2, 3), 0);
/// ```
pub fn served_worker(worker: u64, first: u64, workers: u64) -> u64 {
    if workers == 0 {
        return 0;
    }
    ((worker % workers) + (first % workers)) % workers
}

/// The `next_worker` of a checkpoint: the local consumer after `last`, the
/// one that delivered the last mini-batch, round robin over `workers`; or
/// `first` when nothing was delivered in this pass. 0 when `workers` is 0.
///
/// ```
/// use lodt::dataset::next_worker;
/// assert_eq!(next_worker(Some(1), 0, 2), 0);
/// assert_eq!(next_worker(Some(0), 0, 2), 1);
/// assert_eq!(next_worker(None, 1, 2), 1);
/// ```
pub fn next_worker(last: Option<u64>, first: u64, workers: u64) -> u64 {
    if workers == 0 {
        return 0;
    }
    match last {
        Some(last) => (last % workers + 1) % workers,
        None => first % workers,
    }
}

/// The number of consumers of `world_size` ranks of `num_workers` workers,
/// and the index of local worker `worker` of rank `rank`:
/// `(world_size × num_workers, rank × num_workers + worker)`
/// ([`LoaderOptions::consumer`], spec 7.1).
///
/// ```
/// assert_eq!(lodt::dataset::consumer(1, 2, 1, 3)?, (6, 4));
/// assert!(lodt::dataset::consumer(2, 2, 0, 3).is_err()); // rank 2 of 2
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
pub fn consumer(
    rank: usize,
    world_size: usize,
    worker: usize,
    num_workers: usize,
) -> Result<(u64, u64)> {
    LoaderOptions {
        rank,
        world_size,
        worker,
        num_workers,
        ..Default::default()
    }
    .consumer()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn loader(consumers: u64) -> Value {
        let consumed: Map<String, Value> =
            (0..consumers).map(|c| (c.to_string(), json!(1))).collect();
        json!({"version": 1, "sequences": 20, "fingerprint": 7, "shuffle": {"seed": 1, "buffer": 4},
               "remainder": "keep", "epoch": 2, "frontier": 0, "skip": [], "consumers": consumers,
               "consumed": consumed})
    }

    fn message(value: Value) -> String {
        Checkpoint::from_json(&value).unwrap_err().to_string()
    }

    #[test]
    fn round_trips_and_reads_a_bare_loader_state() {
        let wrapped = json!({"version": 1, "loader": loader(4), "next_worker": 3});
        let checkpoint = Checkpoint::from_json(&wrapped).unwrap();
        assert_eq!(checkpoint.next_worker, 3);
        assert_eq!(checkpoint.loader.epoch, 2);
        assert_eq!(checkpoint.to_json(), wrapped);
        let bare = Checkpoint::from_json(&loader(4)).unwrap();
        assert_eq!(
            bare.to_json(),
            json!({"version": 1, "loader": loader(4), "next_worker": 0})
        );
        let absent = Checkpoint::from_json(&json!({"version": 1, "loader": loader(4)})).unwrap();
        assert_eq!(absent.next_worker, 0);
    }

    #[test]
    fn refuses_what_is_not_a_checkpoint_with_what_was_found() {
        let l = loader(1);
        assert_eq!(
            message(json!({"version": 2, "loader": l})),
            "cannot resume from this loader state: dataset state version 2; this lodt reads version 1"
        );
        assert!(message(json!({"loader": l})).contains("dataset state version null"));
        for bad in [json!("x"), json!(-1), json!(1.5), json!(true)] {
            let m = message(json!({"version": 1, "loader": l, "next_worker": bad}));
            assert!(
                m.contains(&format!("next_worker must be an integer >= 0, found {bad}")),
                "{m}"
            );
        }
        assert!(
            message(json!({"version": 1, "loader": [1]}))
                .ends_with("loader must be a loader state (an object), found an array")
        );
        assert!(message(json!({"epoch": 3, "b": 1})).ends_with(
            "not a dataset state: expected the object of Dataset.state_dict() (keys version, \
             loader, next_worker) or a loader state, found keys [\"b\", \"epoch\"]"
        ));
        assert!(
            message(json!("state")).ends_with("a dataset state is a JSON object, found a string")
        );
        // The loader state's own checks apply.
        assert!(
            message(json!({"version": 1, "loader": {"frontier": 0}}))
                .contains("not a loader state")
        );
    }

    #[test]
    fn workers_and_rotation_follow_the_consumers() {
        let checkpoint =
            Checkpoint::from_json(&json!({"version": 1, "loader": loader(6), "next_worker": 2}))
                .unwrap();
        assert_eq!(checkpoint.workers(2).unwrap(), 3);
        assert_eq!(checkpoint.first_worker(2, 3), 2);
        // Another world size: a new deal from worker 0.
        assert_eq!(checkpoint.first_worker(3, 3), 0);
        assert_eq!(checkpoint.workers(1).unwrap(), 6);
        let err = checkpoint.workers(4).unwrap_err().to_string();
        assert!(
            err.ends_with("next_worker 2 is not one of this rank's 1 workers"),
            "{err}"
        );
        assert!(checkpoint.workers(0).is_err());
        // Worker processes of a resumed pass serve the rotated consumers, and
        // the next checkpoint continues the round robin.
        let served: Vec<u64> = (0..3).map(|w| served_worker(w, 2, 3)).collect();
        assert_eq!(served, [2, 0, 1]);
        assert_eq!(next_worker(None, 2, 3), 2);
        assert_eq!(next_worker(Some(2), 2, 3), 0);
        assert_eq!(next_worker(Some(0), 2, 0), 0);
        assert_eq!(consumer(1, 2, 2, 3).unwrap(), (6, 5));
        assert!(consumer(0, 1, 1, 1).is_err());
    }
}
