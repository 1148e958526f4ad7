//! [`Batch`]: a mini-batch of named LoD tensors plus key/value metadata.
//!
//! A batch is what one training step consumes: for example `words` (a 2-level
//! LoD tensor) next to `labels` (a 0-level tensor). Files hold many batches;
//! Arrow maps one batch to one `RecordBatch`.
//!
//! ```text
//!  Batch
//!  ├── "words"   int64  [15, 1]  lod {{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}
//!  ├── "labels"  int64  [3]      lod {}
//!  └── metadata  {"split": "train"}
//! ```
//!
//! Below the file formats, this module also holds what they share: the
//! [`BatchReader`] / [`BatchWriter`] contract every format implements
//! ([`stream`]), [`rebatch`], which regroups rows into batches of a fixed
//! size, and [`stats`], which summarises the sequences of many batches.

pub mod rebatch;
pub mod stats;
pub mod stream;
mod take;

pub use stream::{
    BatchReader, BatchWriter, BoxBatchReader, BoxBatchWriter, ErrInto, WriteStats, copy, write_all,
};

use crate::error::{Error, Result};
use crate::tensor::LodTensor;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// A mini-batch: named tensors in insertion order, and string metadata.
///
/// ```
/// use lodt::{Batch, Lod, LodTensor};
/// let lod = Lod::try_from_lengths(&[vec![2, 1]])?;
/// let mut batch = Batch::new();
/// batch.push("words", LodTensor::from_vec(vec![1i64, 2, 3], vec![3], lod)?)?;
/// batch.push("labels", LodTensor::from_vec(vec![0i64, 1], vec![2], Default::default())?)?;
/// batch.metadata_mut().insert("split".into(), "train".into());
/// assert_eq!(batch.names().collect::<Vec<_>>(), vec!["words", "labels"]);
/// assert_eq!(batch.get("labels").unwrap().rows(), 2);
/// # Ok::<(), lodt::Error>(())
/// ```
///
/// Adding a tensor and finding one by name take constant time on average
/// (a hash index beside the ordered list), so a batch of `n` tensors is
/// built in O(n).
#[derive(Clone, Default)]
pub struct Batch {
    tensors: Vec<(String, LodTensor)>,
    /// The position of each name in `tensors`.
    index: HashMap<String, usize>,
    metadata: BTreeMap<String, String>,
}

/// Two batches are equal when they hold equal tensors under the same names,
/// in the same order, and the same metadata.
impl PartialEq for Batch {
    fn eq(&self, other: &Self) -> bool {
        self.tensors == other.tensors && self.metadata == other.metadata
    }
}

/// The tensors, in order, and the metadata (the name index is left out).
impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("tensors", &self.tensors)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl Batch {
    /// An empty batch.
    ///
    /// ```
    /// assert!(lodt::Batch::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// A batch of `tensors`, checked as [`Batch::push`] checks each one.
    ///
    /// ```
    /// use lodt::{Batch, LodTensor};
    /// let t = LodTensor::from_vec(vec![1u8], vec![1], Default::default())?;
    /// let batch = Batch::try_from_tensors([("a", t.clone()), ("b", t)])?;
    /// assert_eq!(batch.len(), 2);
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn try_from_tensors<N: Into<String>>(
        tensors: impl IntoIterator<Item = (N, LodTensor)>,
    ) -> Result<Self> {
        let mut batch = Batch::new();
        for (name, tensor) in tensors {
            batch.push(name, tensor)?;
        }
        Ok(batch)
    }

    /// Adds a tensor. Names must be non-empty and unique within the batch.
    ///
    /// ```
    /// use lodt::{Batch, LodTensor};
    /// let t = LodTensor::from_vec(vec![1u8], vec![1], Default::default())?;
    /// let mut batch = Batch::new();
    /// batch.push("x", t.clone())?;
    /// assert!(batch.push("x", t.clone()).is_err());
    /// assert!(batch.push("", t).is_err());
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn push(&mut self, name: impl Into<String>, tensor: LodTensor) -> Result<()> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "a tensor name must not be empty".into(),
            ));
        }
        match self.index.entry(name) {
            Entry::Occupied(e) => Err(Error::InvalidArgument(format!(
                "the batch already has a tensor named {:?}",
                e.key()
            ))),
            Entry::Vacant(e) => {
                self.tensors.push((e.key().clone(), tensor));
                e.insert(self.tensors.len() - 1);
                Ok(())
            }
        }
    }

    /// The tensor named `name`.
    ///
    /// ```
    /// assert!(lodt::Batch::new().get("x").is_none());
    /// ```
    pub fn get(&self, name: &str) -> Option<&LodTensor> {
        let &i = self.index.get(name)?;
        self.tensors.get(i).map(|(_, t)| t)
    }

    /// The tensor names, in order.
    ///
    /// ```
    /// assert_eq!(lodt::Batch::new().names().count(), 0);
    /// ```
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.tensors.iter().map(|(n, _)| n.as_str())
    }

    /// The named tensors, in order.
    ///
    /// ```
    /// assert_eq!(lodt::Batch::new().iter().count(), 0);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &LodTensor)> {
        self.tensors.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// Takes the named tensors out of the batch.
    ///
    /// ```
    /// assert!(lodt::Batch::new().into_tensors().is_empty());
    /// ```
    pub fn into_tensors(self) -> Vec<(String, LodTensor)> {
        self.tensors
    }

    /// The number of tensors.
    ///
    /// ```
    /// assert_eq!(lodt::Batch::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether the batch holds no tensor.
    ///
    /// ```
    /// assert!(lodt::Batch::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// The batch's key/value metadata.
    ///
    /// ```
    /// assert!(lodt::Batch::new().metadata().is_empty());
    /// ```
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The batch's key/value metadata, mutably.
    ///
    /// ```
    /// let mut b = lodt::Batch::new();
    /// b.metadata_mut().insert("k".into(), "v".into());
    /// assert_eq!(b.metadata()["k"], "v");
    /// ```
    pub fn metadata_mut(&mut self) -> &mut BTreeMap<String, String> {
        &mut self.metadata
    }
}
