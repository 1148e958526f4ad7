//! The cursor of a shuffled epoch order (`spec/DATASET.md` 7.3): a
//! snapshot of the order's generator at a position, saved in a loader state
//! so that a resume starts the order there instead of walking every
//! position before it. [`OrderCursor`] is its JSON form; [`Snapshots`] the
//! recent snapshots a consumer's walk keeps for its state.

use super::counts::ShardCounts;
use super::error::{DatasetError, Result};
use super::options::ShuffleOptions;
use super::reader::{Dataset, SequenceLocation};
use super::shuffle::{EpochOrder, OrderSnapshot, Shuffle};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A walk snapshots its order every this many positions.
pub(crate) const SNAPSHOT_EVERY: u64 = 1 << 16;

/// At most this many snapshots are held ahead of what a consumer delivered.
const MAX_HELD: usize = 8;

/// Where a shuffled epoch order's generator was at a position
/// ([`LoaderState::cursor`](super::LoaderState::cursor), `spec/DATASET.md`
/// 7.3): the positions emitted, the ids the source stream gave, the shuffle
/// buffer's random stream and the ids in the buffer, slot by slot.
///
/// ```
/// let json = serde_json::json!({"epoch": 0, "position": 2, "drawn": 6, "rng": ["0000000000000001",
///     "0000000000000002", "0000000000000003", "0000000000000004"], "buffer": [5, 0, 3, 4]});
/// let cursor: lodt::dataset::OrderCursor = serde_json::from_value(json.clone())?;
/// assert_eq!((cursor.position, cursor.buffer.len()), (2, 4));
/// assert_eq!(serde_json::to_value(&cursor)?, json);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderCursor {
    /// The epoch whose order it is in.
    pub epoch: u64,
    /// The positions of the epoch's order before it.
    pub position: u64,
    /// How many ids the source stream (shard and batch orders) gave.
    pub drawn: u64,
    /// The buffer stream's xoshiro256++ state `s[0..4]`, each as 16
    /// lowercase hex digits.
    pub rng: [String; 4],
    /// The ids in the shuffle buffer, slot by slot.
    pub buffer: Vec<u64>,
}

impl OrderCursor {
    /// Checks what a cursor of epoch `epoch`'s order of `n` positions
    /// through a buffer of `capacity` sequences must satisfy, before
    /// anything is read.
    pub(crate) fn check(&self, epoch: u64, n: u64, capacity: usize) -> Result<()> {
        let bad = |reason: String| {
            Err(DatasetError::BadState {
                reason: format!("its cursor {reason}"),
            })
        };
        if self.epoch != epoch {
            return bad(format!(
                "is of epoch {}, the state of epoch {epoch}",
                self.epoch
            ));
        }
        let len = self.buffer.len() as u64;
        if self.drawn > n || self.position.checked_add(len) != Some(self.drawn) {
            return bad(format!(
                "is inconsistent: position {} + {len} buffered must equal the {} drawn, at most the epoch's {n}",
                self.position, self.drawn
            ));
        }
        if self.buffer.len() > capacity || (self.buffer.len() < capacity && self.drawn < n) {
            return bad(format!(
                "holds {len} ids; a buffer of {capacity} holds {capacity} until the source is drawn (drawn {} of {n})",
                self.drawn
            ));
        }
        if self
            .rng
            .iter()
            .any(|w| w.len() != 16 || parse_word(w).is_none())
        {
            return bad(format!(
                "rng must be 4 words of 16 hex digits, found {:?}",
                self.rng
            ));
        }
        let mut ids = self.buffer.clone();
        ids.sort_unstable();
        if let Some(&last) = ids.last().filter(|&&id| id >= n) {
            return bad(format!("buffers id {last}; the epoch has {n} sequences"));
        }
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return bad(format!("buffers id {} twice", w[0]));
        }
        Ok(())
    }

    /// The cursor of `snapshot` of epoch `epoch`'s order, its locations as
    /// ids of `counts`.
    pub(crate) fn of_snapshot(snapshot: &OrderSnapshot, counts: &ShardCounts, epoch: u64) -> Self {
        OrderCursor {
            epoch,
            position: snapshot.position,
            drawn: snapshot.drawn,
            rng: snapshot.rng.map(|w| format!("{w:016x}")),
            buffer: snapshot.buffer.iter().map(|&at| counts.id_of(at)).collect(),
        }
    }

    /// The snapshot it describes, its ids located in `counts` (checked:
    /// [`OrderCursor::check`]).
    pub(crate) fn to_snapshot(&self, counts: &ShardCounts) -> Result<OrderSnapshot> {
        let mut rng = [0u64; 4];
        for (w, text) in rng.iter_mut().zip(&self.rng) {
            *w = parse_word(text).ok_or_else(|| DatasetError::BadState {
                reason: format!("its cursor's rng word {text:?} is not 16 hex digits"),
            })?;
        }
        let buffer = self
            .buffer
            .iter()
            .map(|&id| {
                counts.locate(id).ok_or_else(|| DatasetError::BadState {
                    reason: format!("its cursor buffers id {id}, which the dataset does not have"),
                })
            })
            .collect::<Result<Vec<SequenceLocation>>>()?;
        Ok(OrderSnapshot {
            position: self.position,
            drawn: self.drawn,
            rng,
            buffer,
        })
    }

    /// The cursor of `states`' merge: the one at the lowest position, which
    /// is at or before every consumer's next position; none if a state has
    /// none (the merge then walks from its frontier).
    pub(crate) fn merged<'a>(
        mut cursors: impl Iterator<Item = Option<&'a OrderCursor>>,
    ) -> Option<OrderCursor> {
        let mut best: Option<&OrderCursor> = None;
        for c in cursors.by_ref() {
            let c = c?;
            if best.is_none_or(|b| c.position < b.position) {
                best = Some(c);
            }
        }
        best.cloned()
    }
}

impl Dataset {
    /// The cursor (`spec/DATASET.md` 7.3) of epoch `epoch`'s order under
    /// `shuffle` after `position` positions: what a loader state saved
    /// there carries. Computing it walks the order to `position`.
    ///
    /// ```
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 10], vec![10], lodt::Lod::try_from_lengths(&[vec![1; 10]])?)?)])?)?;
    /// # w.finish()?;
    /// let dataset = Dataset::open(dir.path())?;
    /// let shuffle = ShuffleOptions { seed: 1, buffer: 4 };
    /// let cursor = dataset.order_cursor(shuffle, 0, 3)?;
    /// assert_eq!((cursor.position, cursor.drawn, cursor.buffer.len()), (3, 7, 4));
    /// assert!(dataset.order_cursor(shuffle, 0, 11).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn order_cursor(
        &self,
        shuffle: ShuffleOptions,
        epoch: u64,
        position: u64,
    ) -> Result<OrderCursor> {
        let n = self.num_sequences();
        if position > n || shuffle.buffer == 0 {
            return Err(DatasetError::InvalidArgument(format!(
                "a cursor at position {position} with a buffer of {}: the epoch has {n} positions and the buffer holds at least 1",
                shuffle.buffer
            )));
        }
        let counts = self.batch_counts();
        let shuffle = Shuffle {
            seed: shuffle.seed,
            buffer: shuffle.buffer,
        };
        let mut order = EpochOrder::new(counts.clone(), Some(shuffle), epoch);
        for _ in 0..position {
            order.next();
        }
        Ok(OrderCursor::of_snapshot(
            &order.snapshot(position),
            &counts,
            epoch,
        ))
    }
}

fn parse_word(text: &str) -> Option<u64> {
    if text.len() != 16 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

/// The recent snapshots of one consumer's walk, shared between the walk
/// (on the prefetch thread) and the loader's state: every
/// [`SNAPSHOT_EVERY`] positions the walk adds one, tagged with the tail
/// index it stands before; a state takes the newest at or before the tail
/// index the consumer delivers next (never one only prefetched past).
#[derive(Debug)]
pub(crate) struct Snapshots {
    /// The tail index the consumer delivers next.
    needed: AtomicU64,
    held: Mutex<VecDeque<(u64, Arc<OrderSnapshot>)>>,
}

impl Snapshots {
    /// No snapshots yet; the consumer delivers tail index `needed` next.
    pub(crate) fn new(needed: u64) -> Self {
        Snapshots {
            needed: AtomicU64::new(needed),
            held: Mutex::new(VecDeque::new()),
        }
    }

    /// The consumer delivers tail index `needed` next.
    pub(crate) fn set_needed(&self, needed: u64) {
        self.needed.store(needed, Ordering::Release);
    }

    fn held(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, Arc<OrderSnapshot>)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the snapshot standing before tail index `index`, dropping those
    /// a newer one at or before the needed index replaces (and skipping it
    /// while [`MAX_HELD`] are ahead of the consumer).
    pub(crate) fn push(&self, index: u64, snapshot: OrderSnapshot) {
        let needed = self.needed.load(Ordering::Acquire);
        let mut held = self.held();
        while held.len() >= 2 && held.get(1).is_some_and(|(i, _)| *i <= needed) {
            held.pop_front();
        }
        if held.len() < MAX_HELD {
            held.push_back((index, Arc::new(snapshot)));
        }
    }

    /// The newest snapshot at or before the needed tail index (shared, not
    /// copied).
    pub(crate) fn best(&self) -> Option<Arc<OrderSnapshot>> {
        let needed = self.needed.load(Ordering::Acquire);
        let held = self.held();
        held.iter()
            .rev()
            .find(|(i, _)| *i <= needed)
            .map(|(_, s)| s.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(position: u64) -> OrderSnapshot {
        OrderSnapshot {
            position,
            drawn: position,
            rng: [1, 2, 3, 4],
            buffer: Vec::new(),
        }
    }

    #[test]
    fn a_state_takes_the_newest_snapshot_not_past_what_was_delivered() {
        let s = Snapshots::new(0);
        assert_eq!(s.best(), None);
        s.push(0, snapshot(10));
        s.push(100, snapshot(110));
        s.push(200, snapshot(210));
        assert_eq!(s.best().map(|x| x.position), Some(10));
        s.set_needed(150);
        assert_eq!(s.best().map(|x| x.position), Some(110));
        // Pushing drops what the newest usable one replaces.
        s.push(300, snapshot(310));
        assert_eq!(s.held().len(), 3);
        s.set_needed(1000);
        assert_eq!(s.best().map(|x| x.position), Some(310));
        for i in 0..20 {
            s.set_needed(0);
            s.push(400 + i, snapshot(410 + i));
        }
        assert!(s.held().len() <= MAX_HELD);
    }

    #[test]
    fn bad_cursors_are_refused_with_what_is_wrong() {
        let good = OrderCursor {
            epoch: 3,
            position: 2,
            drawn: 6,
            rng: [
                "00000000000000ff".into(),
                "1".repeat(16),
                "2".repeat(16),
                "3".repeat(16),
            ],
            buffer: vec![5, 0, 3, 4],
        };
        assert!(good.check(3, 10, 4).is_ok());
        assert!(
            good.check(2, 10, 4)
                .unwrap_err()
                .to_string()
                .contains("epoch 3")
        );
        let fails = |c: OrderCursor, n: u64, cap: usize, what: &str| {
            let e = c.check(3, n, cap).unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        };
        fails(
            OrderCursor {
                drawn: 7,
                ..good.clone()
            },
            10,
            4,
            "inconsistent",
        );
        fails(good.clone(), 5, 4, "inconsistent");
        fails(good.clone(), 10, 3, "holds 4 ids");
        fails(good.clone(), 10, 5, "holds 4 ids");
        assert!(good.check(3, 6, 5).is_ok()); // drawn to the end: the buffer drains
        fails(
            OrderCursor {
                buffer: vec![5, 0, 3, 3],
                ..good.clone()
            },
            10,
            4,
            "twice",
        );
        fails(
            OrderCursor {
                buffer: vec![5, 0, 3, 40],
                ..good.clone()
            },
            10,
            4,
            "id 40",
        );
        let mut rng = good.rng.clone();
        rng[1] = "xyz".into();
        fails(
            OrderCursor {
                rng,
                ..good.clone()
            },
            10,
            4,
            "hex",
        );
        let m = OrderCursor::merged(
            [
                Some(&good),
                Some(&OrderCursor {
                    position: 1,
                    drawn: 5,
                    ..good.clone()
                }),
            ]
            .into_iter(),
        );
        assert_eq!(m.map(|c| c.position), Some(1));
        assert_eq!(OrderCursor::merged([Some(&good), None].into_iter()), None);
    }
}
