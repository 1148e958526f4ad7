//! What a [`Loader`](super::Loader) reads: one dataset, or a weighted
//! [`Mixture`] of several. The loader's partitions, batching, gather and
//! resume work on positions of a stream; the feed says how long an epoch's
//! stream is and which sequence (source, location) each position holds.

use super::manifest::Schema;
use super::mixture::{MixedOrder, Mixture, MixtureState};
use super::reader::{Dataset, SequenceLocation};
use super::shuffle::{EpochOrder, Shuffle};
use std::sync::Arc;

/// A loader's input.
#[derive(Debug, Clone)]
pub(crate) enum Feed {
    /// One dataset (`spec/DATASET.md` section 6).
    Dataset {
        dataset: Arc<Dataset>,
        counts: Arc<Vec<Vec<u64>>>,
    },
    /// A weighted mixture (`spec/DATASET.md`, "Mixtures").
    Mixture(Arc<Mixture>),
}

impl Feed {
    /// The feed of one dataset.
    pub(crate) fn dataset(dataset: Arc<Dataset>) -> Self {
        let counts = dataset.batch_counts();
        Feed::Dataset { dataset, counts }
    }

    /// The schema every mini-batch has.
    pub(crate) fn schema(&self) -> &Schema {
        match self {
            Feed::Dataset { dataset, .. } => dataset.schema(),
            Feed::Mixture(m) => m.schema(),
        }
    }

    /// The pool the loader gathers mini-batches into: the dataset's, or the
    /// first source's for a mixture (one pool per loader either way).
    pub(crate) fn buffers(&self) -> &crate::buffer::BufferPool {
        match self {
            Feed::Dataset { dataset, .. } => dataset.buffers(),
            Feed::Mixture(m) => m.sources()[0].buffers(),
        }
    }

    /// Source `k` (0 for a single dataset).
    pub(crate) fn source(&self, k: usize) -> Option<&Arc<Dataset>> {
        match self {
            Feed::Dataset { dataset, .. } => (k == 0).then_some(dataset),
            Feed::Mixture(m) => m.sources().get(k),
        }
    }

    /// The id a mini-batch reports for the sequence at `at` of source `k`.
    pub(crate) fn id_of(&self, k: usize, at: SequenceLocation) -> u64 {
        match self {
            Feed::Dataset { dataset, .. } => dataset.id_of(at),
            Feed::Mixture(m) => m.id_of(k, at),
        }
    }

    /// The number of positions of epoch `epoch`'s stream.
    pub(crate) fn len(&self, epoch: u64) -> u64 {
        match self {
            Feed::Dataset { dataset, .. } => dataset.num_sequences(),
            Feed::Mixture(m) => m.num_sequences(epoch),
        }
    }

    /// The sequences `ids` (as a mini-batch reports them), in order, as one
    /// batch.
    pub(crate) fn take(&self, ids: &[u64]) -> super::error::Result<crate::batch::Batch> {
        match self {
            Feed::Dataset { dataset, .. } => dataset.take(ids),
            Feed::Mixture(m) => m.take(ids),
        }
    }

    /// The fingerprint a state records.
    pub(crate) fn fingerprint(&self) -> u32 {
        match self {
            Feed::Dataset { dataset, .. } => dataset.fingerprint(),
            Feed::Mixture(m) => m.fingerprint(),
        }
    }

    /// The mixture part of a state (`None` for a single dataset).
    pub(crate) fn mixture_state(&self) -> Option<MixtureState> {
        match self {
            Feed::Dataset { .. } => None,
            Feed::Mixture(m) => Some(m.state()),
        }
    }

    /// The stream of epoch `epoch`, from its first position.
    pub(crate) fn order(&self, epoch: u64, shuffle: Option<Shuffle>) -> Order {
        match self {
            Feed::Dataset { counts, .. } => {
                Order::Single(EpochOrder::new(counts.clone(), shuffle, epoch))
            }
            Feed::Mixture(m) => Order::Mixed(MixedOrder::new(m.clone(), shuffle, epoch)),
        }
    }
}

/// The stream of an epoch: per position, the source and the sequence's
/// location in it.
#[derive(Debug)]
pub(crate) enum Order {
    Single(EpochOrder),
    Mixed(MixedOrder),
}

impl Iterator for Order {
    type Item = (usize, SequenceLocation);

    fn next(&mut self) -> Option<(usize, SequenceLocation)> {
        match self {
            Order::Single(o) => o.next().map(|at| (0, at)),
            Order::Mixed(o) => o.next(),
        }
    }
}
