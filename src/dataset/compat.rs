//! The loader constructors of earlier releases, kept for one release:
//! [`PackedLoader`] and the loader builders of [`Mixture`]. Each is a thin
//! call of the one [`Loader`]; new code uses [`Loader`] with
//! [`LoaderOptions::packing`] and a [`Feed`] (a dataset or a mixture).
#![allow(deprecated)]

use super::error::Result;
use super::feed::Feed;
use super::loader::Loader;
use super::mixture::Mixture;
use super::options::{LoaderOptions, PackOptions};
use super::pack::PackedBatch;
use super::reader::Dataset;
use super::state::LoaderState;
use std::sync::Arc;

/// A [`Loader`] that packs, yielding [`PackedBatch`]es.
///
/// Deprecated: a [`Loader`] with [`LoaderOptions::packing`] is the same
/// loader; [`Loader::next_packed`] gives the bins.
///
/// ```
/// #![allow(deprecated)]
/// use lodt::dataset::{Dataset, DatasetWriter, Loader, LoaderOptions, PackOptions, PackedLoader};
/// use lodt::{Batch, Lod, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// let lod = Lod::try_from_lengths(&[vec![5, 3, 4, 2]])?;
/// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec((0..14i32).collect(), vec![14], lod)?)])?)?;
/// w.finish()?;
/// let dataset = std::sync::Arc::new(Dataset::open(dir.path())?);
/// let old = PackedLoader::new(dataset.clone(), LoaderOptions::default(), PackOptions::tokens(8))?;
/// let old: Vec<Vec<u64>> = old.map(|b| b.unwrap().batch.ids).collect();
/// // The same, as one loader type:
/// let options = LoaderOptions { packing: Some(PackOptions::tokens(8)), ..Default::default() };
/// let new: Vec<Vec<u64>> = Loader::new(dataset, options)?.map(|b| b.unwrap().ids).collect();
/// assert_eq!((old, new.clone()), (new, vec![vec![0, 1], vec![2, 3]]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[deprecated(note = "use Loader with LoaderOptions::packing (Loader::next_packed gives the bins)")]
#[derive(Debug)]
pub struct PackedLoader {
    inner: Loader,
}

fn packing(options: LoaderOptions, pack: PackOptions) -> LoaderOptions {
    LoaderOptions {
        packing: Some(pack),
        ..options
    }
}

impl PackedLoader {
    /// [`Loader::new`] with `pack` as [`LoaderOptions::packing`].
    #[deprecated(note = "use Loader::new with LoaderOptions::packing")]
    pub fn new(dataset: Arc<Dataset>, options: LoaderOptions, pack: PackOptions) -> Result<Self> {
        Ok(PackedLoader {
            inner: Loader::new(dataset, packing(options, pack))?,
        })
    }

    /// [`Loader::resume`] with `pack` as [`LoaderOptions::packing`].
    #[deprecated(note = "use Loader::resume with LoaderOptions::packing")]
    pub fn resume(
        dataset: Arc<Dataset>,
        options: LoaderOptions,
        pack: PackOptions,
        state: &LoaderState,
    ) -> Result<Self> {
        Ok(PackedLoader {
            inner: Loader::resume(dataset, packing(options, pack), state)?,
        })
    }

    /// [`Loader::at_epoch`] with `pack` as [`LoaderOptions::packing`].
    #[deprecated(note = "use Loader::at_epoch with LoaderOptions::packing")]
    pub fn at_epoch(
        dataset: Arc<Dataset>,
        options: LoaderOptions,
        pack: PackOptions,
        epoch: u64,
    ) -> Result<Self> {
        Ok(PackedLoader {
            inner: Loader::at_epoch(dataset, packing(options, pack), epoch)?,
        })
    }

    /// The dataset (`None` for a mixture's loader): [`Feed::dataset`].
    pub fn dataset(&self) -> Option<&Arc<Dataset>> {
        self.inner.feed().dataset()
    }

    /// [`Loader::epoch`].
    pub fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    /// [`Loader::set_epoch`].
    pub fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        self.inner.set_epoch(epoch)
    }

    /// [`Loader::remaining`].
    pub fn remaining(&self) -> u64 {
        self.inner.remaining()
    }

    /// [`Loader::state`].
    pub fn state(&self) -> LoaderState {
        self.inner.state()
    }
}

impl Iterator for PackedLoader {
    type Item = Result<PackedBatch>;

    fn next(&mut self) -> Option<Result<PackedBatch>> {
        self.inner.next_packed()
    }
}

impl Mixture {
    /// [`Loader::new`] of the mixture.
    ///
    /// ```
    /// #![allow(deprecated)]
    /// # use lodt::dataset::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&lodt::Batch::try_from_tensors([("x", lodt::LodTensor::from_vec(vec![1u8; 4], vec![4], Default::default())?)])?)?;
    /// # w.finish()?;
    /// # let a = std::sync::Arc::new(Dataset::open(dir.path())?);
    /// let m = std::sync::Arc::new(Mixture::try_new(vec![a], &[1.0], Default::default())?);
    /// let ids: Vec<u64> = m.loader(Default::default())?.flat_map(|b| b.unwrap().ids).collect();
    /// let again: Vec<u64> = Loader::new(m, Default::default())?.flat_map(|b| b.unwrap().ids).collect();
    /// assert_eq!((ids, again), (vec![0, 1, 2, 3], vec![0, 1, 2, 3]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[deprecated(note = "use Loader::new(mixture, options)")]
    pub fn loader(self: &Arc<Self>, options: LoaderOptions) -> Result<Loader> {
        Loader::new(Feed::from(self.clone()), options)
    }

    /// [`Loader::resume`] of the mixture.
    #[deprecated(note = "use Loader::resume(mixture, options, state)")]
    pub fn resume(self: &Arc<Self>, options: LoaderOptions, state: &LoaderState) -> Result<Loader> {
        Loader::resume(Feed::from(self.clone()), options, state)
    }

    /// [`Loader::new`] of the mixture with `pack` as
    /// [`LoaderOptions::packing`].
    #[deprecated(note = "use Loader::new(mixture, options) with LoaderOptions::packing")]
    pub fn packed_loader(
        self: &Arc<Self>,
        options: LoaderOptions,
        pack: PackOptions,
    ) -> Result<PackedLoader> {
        Ok(PackedLoader {
            inner: Loader::new(Feed::from(self.clone()), packing(options, pack))?,
        })
    }

    /// [`Loader::resume`] of the mixture with `pack` as
    /// [`LoaderOptions::packing`].
    #[deprecated(note = "use Loader::resume(mixture, options, state) with LoaderOptions::packing")]
    pub fn resume_packed(
        self: &Arc<Self>,
        options: LoaderOptions,
        pack: PackOptions,
        state: &LoaderState,
    ) -> Result<PackedLoader> {
        Ok(PackedLoader {
            inner: Loader::resume(Feed::from(self.clone()), packing(options, pack), state)?,
        })
    }
}
