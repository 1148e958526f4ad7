//! [`Dataset`]: an open sharded dataset. Opening reads the manifest only; a
//! shard is opened (its footer checked against the manifest) when first
//! touched, and a batch checked against the schema when first read.

use super::batch_cache::BatchCache;
use super::counts::ShardCounts;
use super::error::{DatasetError, Result};
use super::index::{HEAD_BYTES, IndexPointer, ShardIndex};
use super::manifest::{Manifest, Schema, ShardEntry, TensorCounts, footer_crc};
use super::names::MANIFEST_NAME;
use super::store::{DatasetStore, LocalStore};
use crate::batch::Batch;
use crate::format::LodtFile;
use crate::tensor::LodTensor;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The dataset's manifest in `store`, or `None` if it has none.
pub(crate) fn read_manifest(store: &dyn DatasetStore) -> Result<Option<Manifest>> {
    match store.read(MANIFEST_NAME)? {
        None => Ok(None),
        Some(bytes) => {
            Manifest::from_json_bytes(&bytes, &store.object_location(MANIFEST_NAME)).map(Some)
        }
    }
}

/// What opening a dataset reads its shard list from.
enum Listed {
    /// The shard index the manifest names, checked against it.
    Index(Box<ShardIndex>),
    /// The manifest's JSON: all of it (its first bytes were all of it), or
    /// `None`: to be read.
    Json(Option<Vec<u8>>),
}

/// The shard index the manifest of `store` names on its first line, read
/// and checked against it (`spec/DATASET.md` section 3.2); else the JSON
/// (the manifest names no index, or one that is missing, damaged or another
/// manifest's: the JSON is the record). `Err` only if the store cannot be
/// read at all; `NotADataset` if there is no manifest.
fn read_listing(store: &dyn DatasetStore) -> Result<Listed> {
    let Some((head, manifest_bytes)) = store.read_head(MANIFEST_NAME, HEAD_BYTES)? else {
        return Err(DatasetError::NotADataset {
            path: store.location(),
        });
    };
    let whole = || Listed::Json((head.len() as u64 == manifest_bytes).then(|| head.clone()));
    let Some(pointer) = IndexPointer::from_head(&head) else {
        return Ok(whole());
    };
    let location = store.object_location(&pointer.name);
    let (storage, mapped): (Arc<dyn crate::buffer::ByteStorage>, _) = match store.map(&pointer.name)
    {
        Ok(Some(map)) => (map.clone(), Some(map)),
        Ok(None) => match store.read(&pointer.name) {
            Ok(Some(bytes)) => (super::index::aligned(&bytes), None),
            Ok(None) | Err(_) => return Ok(whole()),
        },
        Err(_) => return Ok(whole()),
    };
    let index = ShardIndex::open(storage, &location, &pointer, manifest_bytes);
    // Checking touched every page; the process keeps only those it uses.
    if let Some(map) = mapped {
        map.release_pages();
    }
    Ok(index.map_or_else(|_| whole(), |i| Listed::Index(Box::new(i))))
}

/// Manifest `name` of `store` and its version (for a conditional replace),
/// or `None` if it does not exist.
pub(crate) fn read_manifest_versioned(
    store: &dyn DatasetStore,
    name: &str,
) -> Result<Option<(Manifest, super::store::ObjectVersion)>> {
    match store.read_versioned(name)? {
        None => Ok(None),
        Some((bytes, version)) => {
            let manifest = Manifest::from_json_bytes(&bytes, &store.object_location(name))?;
            Ok(Some((manifest, version)))
        }
    }
}

pub use super::counts::SequenceLocation;

/// What [`Dataset::verify_shard`] checked in one shard.
///
/// ```
/// let r = lodt::dataset::ShardReport::default();
/// assert_eq!(r.sequences, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardReport {
    /// The shard's name.
    pub name: String,
    /// Its size.
    pub bytes: u64,
    /// Its batches.
    pub batches: u64,
    /// Its top-level sequences.
    pub sequences: u64,
}

/// What [`Dataset::verify`] checked.
///
/// ```
/// let r = lodt::dataset::DatasetReport::default();
/// assert_eq!(r.shards, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetReport {
    /// Shards checked.
    pub shards: usize,
    /// Bytes checked.
    pub bytes: u64,
    /// Batches checked.
    pub batches: u64,
    /// Top-level sequences.
    pub sequences: u64,
}

/// A shard opened and checked against the manifest.
struct OpenedShard {
    file: LodtFile,
    /// Whether each batch was checked against the schema and the manifest.
    checked: Vec<AtomicBool>,
}

/// An open sharded dataset (`spec/DATASET.md`).
///
/// [`Dataset::open`] reads the manifest and nothing else. A shard is opened
/// when first touched, and its size, batch count and footer CRC are checked
/// against the manifest then; each batch is checked against the schema and
/// its manifest sequence count when first read. [`Dataset::verify`] checks
/// everything, every body checksum included. A shard that disagrees with the
/// manifest is a [`DatasetError::ShardMismatch`] naming it.
///
/// Sequences are numbered 0, 1, ... in dataset order (shards in manifest
/// order, batches in order, sequences in order). `Dataset` is `Send +
/// Sync`; share it with an `Arc` (the [`Loader`](super::Loader) does).
///
/// Random access ([`Dataset::sequence`], [`Dataset::take`],
/// [`Dataset::sequence_arrays`]) goes through one cache of recently read
/// batches, shared by every thread using this `Dataset`: a run of reads into
/// one batch of a compressed shard decodes it once. It is bounded by bytes
/// ([`Dataset::with_cache_bytes`], default
/// [`DEFAULT_RANDOM_ACCESS_CACHE_BYTES`](super::DEFAULT_RANDOM_ACCESS_CACHE_BYTES), 256 MiB), counted as
/// the loader's cache counts them ([`LoaderOptions::cache_bytes`](super::LoaderOptions::cache_bytes)).
///
/// ```
/// use lodt::dataset::{Dataset, DatasetWriter};
/// use lodt::{Batch, Lod, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
/// let lod = Lod::try_from_lengths(&[vec![2, 1, 3]])?;
/// let x = LodTensor::from_vec((0..6i32).collect(), vec![6], lod)?;
/// w.write(&Batch::try_from_tensors([("x", x)])?)?;
/// w.finish()?;
///
/// let dataset = Dataset::open(dir.path())?;
/// assert_eq!(dataset.num_sequences(), 3);
/// let seq = dataset.sequence(2)?;                  // zero-copy slices of the map
/// assert_eq!(seq.get("x").unwrap().as_slice::<i32>()?, &[3, 4, 5]);
/// assert_eq!(dataset.verify()?.sequences, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Dataset {
    store: Arc<dyn DatasetStore>,
    listing: Listing,
    /// Where each shard's and batch's sequences start.
    counts: Arc<ShardCounts>,
    /// [`Dataset::fingerprint`], computed once.
    fingerprint: u32,
    shards: Vec<OnceLock<Box<OpenedShard>>>,
    /// The buffers its loaders gather mini-batches into, recycled.
    buffers: crate::buffer::BufferPool,
    /// Random access's cache of batches, keyed by `(0, shard, batch)`.
    pub(super) cache: Mutex<BatchCache>,
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("store", &self.store)
            .field("shards", &self.num_shards())
            .field("sequences", &self.num_sequences())
            .finish()
    }
}

/// Where a dataset's shard list comes from: the JSON manifest, parsed, or
/// the shard index, used in place (the manifest built from it on demand).
enum Listing {
    Manifest(Manifest),
    Index {
        index: Box<ShardIndex>,
        manifest: OnceLock<Manifest>,
    },
}

/// What the manifest says of one shard (borrowed from the listing).
struct Facts<'a> {
    name: &'a str,
    bytes: u64,
    footer_crc: u32,
    format_version: Option<crate::format::Version>,
}

impl Dataset {
    /// Opens the dataset in directory `dir` (reads its manifest only).
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.num_shards(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_in(Arc::new(LocalStore::new(dir)))
    }

    /// Opens the dataset in `store`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// assert_eq!(lodt::dataset::Dataset::open_in(store)?.num_shards(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// When the manifest names a shard index (`spec/DATASET.md` section 3.2)
    /// that agrees with it, the index is read instead of the JSON (mapped,
    /// for a local dataset): opening then costs one check of the index's
    /// bytes, whatever the number of shards.
    pub fn open_in(store: Arc<dyn DatasetStore>) -> Result<Self> {
        let json = match read_listing(&*store)? {
            Listed::Index(index) => match ShardCounts::mapped(index.count_buffers()) {
                Some(counts) => {
                    let fingerprint = index.fingerprint();
                    let listing = Listing::Index {
                        index,
                        manifest: OnceLock::new(),
                    };
                    return Ok(Self::from_listing(store, listing, counts, fingerprint));
                }
                None => None,
            },
            Listed::Json(json) => json,
        };
        let manifest = match json {
            Some(bytes) => {
                Manifest::from_json_bytes(&bytes, &store.object_location(MANIFEST_NAME))?
            }
            None => read_manifest(&*store)?.ok_or_else(|| DatasetError::NotADataset {
                path: store.location(),
            })?,
        };
        Ok(Self::from_manifest(store, manifest))
    }

    pub(super) fn from_manifest(store: Arc<dyn DatasetStore>, manifest: Manifest) -> Self {
        let counts =
            ShardCounts::from_batches(manifest.shards.iter().map(|s| s.batch_sequences.as_slice()));
        let fingerprint = super::manifest::fingerprint_of(
            manifest
                .shards
                .iter()
                .map(|s| (s.name.as_str(), s.bytes, s.footer_crc, s.sequences)),
        );
        Self::from_listing(store, Listing::Manifest(manifest), counts, fingerprint)
    }

    fn from_listing(
        store: Arc<dyn DatasetStore>,
        listing: Listing,
        counts: ShardCounts,
        fingerprint: u32,
    ) -> Self {
        let shards = (0..counts.num_shards()).map(|_| OnceLock::new()).collect();
        Dataset {
            store,
            listing,
            counts: Arc::new(counts),
            fingerprint,
            shards,
            buffers: crate::buffer::BufferPool::new(0),
            cache: Mutex::new(BatchCache::new(
                super::options::DEFAULT_RANDOM_ACCESS_CACHE_BYTES,
            )),
        }
    }

    /// The pool the dataset's loaders gather mini-batches into (shared by
    /// every loader of this `Dataset`, so a new epoch's loader reuses the
    /// last one's buffers).
    pub(crate) fn buffers(&self) -> &crate::buffer::BufferPool {
        &self.buffers
    }

    /// The store the dataset is read from.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.store().location(), dir.path().display().to_string());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn store(&self) -> &Arc<dyn DatasetStore> {
        &self.store
    }

    /// The manifest.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.manifest().format, "lodt-dataset");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A dataset opened through its shard index builds the manifest from
    /// the index on the first call (every shard's entry: for a count, a
    /// schema or one shard, the methods of `Dataset` are cheaper).
    pub fn manifest(&self) -> &Manifest {
        match &self.listing {
            Listing::Manifest(m) => m,
            Listing::Index { index, manifest } => manifest.get_or_init(|| {
                let mut m = index.head_manifest();
                m.shards = (0..index.num_shards())
                    .map(|s| self.entry_of(index, s))
                    .collect();
                m
            }),
        }
    }

    /// Shard `shard`'s manifest entry, from the index.
    fn entry_of(&self, index: &ShardIndex, shard: usize) -> ShardEntry {
        index.entry(&self.counts, shard)
    }

    /// Shard `shard`'s manifest entry (a copy).
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.shard_entry(0)?.name, "shard-000000.lodt");
    /// assert!(dataset.shard_entry(1).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shard_entry(&self, shard: usize) -> Result<ShardEntry> {
        self.facts(shard)?;
        match &self.listing {
            Listing::Manifest(m) => m
                .shards
                .get(shard)
                .cloned()
                .ok_or(DatasetError::OutOfRange {
                    what: "shard",
                    index: shard as u64,
                    len: m.shards.len() as u64,
                }),
            Listing::Index { index, .. } => Ok(self.entry_of(index, shard)),
        }
    }

    /// Whether the dataset was opened through its shard index
    /// (`spec/DATASET.md` section 3.2) rather than by parsing its JSON manifest.
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// # w.finish()?;
    /// assert!(lodt::dataset::Dataset::open(dir.path())?.is_indexed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_indexed(&self) -> bool {
        matches!(self.listing, Listing::Index { .. })
    }

    /// The number of stored batches, over every shard.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::open(dir.path())?.num_batches(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_batches(&self) -> u64 {
        self.counts.num_batches()
    }

    /// The size of every shard, in bytes, summed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::open(dir.path())?.num_bytes(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_bytes(&self) -> u64 {
        match &self.listing {
            Listing::Manifest(m) => m.num_bytes(),
            Listing::Index { index, .. } => index.total_bytes(),
        }
    }

    /// What the listing says of shard `shard`.
    /// The fingerprint (`spec/DATASET.md` 7.2) of the list of its first
    /// `shards` shards (all of them past the last).
    pub(crate) fn prefix_fingerprint(&self, shards: usize) -> Result<u32> {
        let facts = (0..shards.min(self.num_shards()))
            .map(|s| Ok((self.facts(s)?, self.counts.shard_sequences(s))))
            .collect::<Result<Vec<_>>>()?;
        Ok(super::manifest::fingerprint_of(
            facts
                .iter()
                .map(|(f, n)| (f.name, f.bytes, f.footer_crc, *n)),
        ))
    }

    fn facts(&self, shard: usize) -> Result<Facts<'_>> {
        let out_of_range = || DatasetError::OutOfRange {
            what: "shard",
            index: shard as u64,
            len: self.num_shards() as u64,
        };
        if shard >= self.num_shards() {
            return Err(out_of_range());
        }
        Ok(match &self.listing {
            Listing::Manifest(m) => {
                let e = m.shards.get(shard).ok_or_else(out_of_range)?;
                Facts {
                    name: &e.name,
                    bytes: e.bytes,
                    footer_crc: e.footer_crc,
                    format_version: e.expected_format_version(),
                }
            }
            Listing::Index { index, .. } => Facts {
                name: index.name(shard),
                bytes: index.bytes(shard),
                footer_crc: index.footer_crc(shard),
                format_version: index.format_version(shard),
            },
        })
    }

    /// The schema.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// assert!(lodt::dataset::Dataset::open(dir.path())?.schema().is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn schema(&self) -> &Schema {
        match &self.listing {
            Listing::Manifest(m) => &m.schema,
            Listing::Index { index, .. } => index.schema(),
        }
    }

    /// The dataset's metadata.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let options = lodt::dataset::DatasetWriterOptions { metadata: [("split".into(), "train".into())].into(), ..Default::default() };
    /// lodt::dataset::DatasetWriter::create(dir.path(), options)?.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::open(dir.path())?.metadata()["split"], "train");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        match &self.listing {
            Listing::Manifest(m) => &m.metadata,
            Listing::Index { index, .. } => index.metadata(),
        }
    }

    /// The record of the commit that made the version this dataset was
    /// opened at (`spec/DATASET.md` section 3.3): its number, time, commit
    /// id, operation and what it added and removed; `None` for a manifest
    /// written before versions.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let record = lodt::dataset::Dataset::open(dir.path())?.commit_record().cloned().unwrap();
    /// assert_eq!((record.version, record.operation.as_str()), (1, "create"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn commit_record(&self) -> Option<&super::commit_record::CommitRecord> {
        match &self.listing {
            Listing::Manifest(m) => m.commit.as_deref(),
            Listing::Index { index, .. } => index.commit_record(),
        }
    }

    /// The number of shards.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::open(dir.path())?.num_shards(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_shards(&self) -> usize {
        self.counts.num_shards()
    }

    /// The number of top-level sequences.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::open(dir.path())?.num_sequences(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_sequences(&self) -> u64 {
        self.counts.num_sequences()
    }

    /// The first sequence of each shard, then the total (`num_shards() + 1`
    /// values).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::open(dir.path())?.shard_starts(), &[0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shard_starts(&self) -> &[u64] {
        self.counts.shard_starts()
    }

    /// A fingerprint of the shard list (names, sizes, footer CRCs, sequence
    /// counts): a loader state saved on one dataset is refused on another.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.fingerprint(), 0); // the CRC32 of nothing
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fingerprint(&self) -> u32 {
        self.fingerprint
    }

    /// The manifest, giving up the dataset.
    pub(super) fn into_manifest(self) -> Manifest {
        match self.listing {
            Listing::Manifest(m) => m,
            Listing::Index { .. } => self.manifest().clone(),
        }
    }

    /// Opens shard `shard` and checks it against the manifest.
    pub(super) fn check_shard(&self, shard: usize) -> Result<()> {
        self.opened(shard).map(|_| ())
    }

    fn opened(&self, shard: usize) -> Result<&OpenedShard> {
        let cell = self.shards.get(shard).ok_or(DatasetError::OutOfRange {
            what: "shard",
            index: shard as u64,
            len: self.shards.len() as u64,
        })?;
        if let Some(opened) = cell.get() {
            return Ok(opened);
        }
        let entry = self.facts(shard)?;
        let batches = self.counts.batches(shard);
        let location = self.store.object_location(entry.name);
        let file = match self.store.open_shard(entry.name) {
            Ok(file) => file,
            Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                return Err(DatasetError::mismatch(
                    location,
                    "file",
                    format!("a .lodt file of {} bytes", entry.bytes),
                    "no such file",
                ));
            }
            Err(e) => return Err(e),
        };
        if file.file_size() != entry.bytes {
            return Err(DatasetError::mismatch(
                location,
                "byte size",
                entry.bytes,
                file.file_size(),
            ));
        }
        if file.num_batches() != batches {
            return Err(DatasetError::mismatch(
                location,
                "batch count",
                batches,
                file.num_batches(),
            ));
        }
        // No version recorded (a writer before manifest 1.3, or an older
        // writer's rewrite of the manifest): the shard's header says.
        if let Some(expected) = entry.format_version
            && file.version() != expected
        {
            return Err(DatasetError::mismatch(
                location,
                "format version",
                expected,
                file.version(),
            ));
        }
        let crc = footer_crc(&file, &location)?;
        if crc != entry.footer_crc {
            return Err(DatasetError::mismatch(
                location,
                "footer CRC",
                format!("{:#010x}", entry.footer_crc),
                format!("{crc:#010x}"),
            ));
        }
        let checked = (0..file.num_batches())
            .map(|_| AtomicBool::new(false))
            .collect();
        Ok(cell.get_or_init(|| Box::new(OpenedShard { file, checked })))
    }

    /// Whether shard `shard` has been opened (the read-ahead opens the
    /// shards it needs together).
    pub(crate) fn shard_opened(&self, shard: usize) -> bool {
        self.shards.get(shard).is_some_and(|c| c.get().is_some())
    }

    /// Shard `shard` (its position in the manifest), opened and checked
    /// against the manifest on first use.
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.shard(0)?.num_batches(), 1);
    /// assert!(dataset.shard(1).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shard(&self, shard: usize) -> Result<&LodtFile> {
        Ok(&self.opened(shard)?.file)
    }

    /// Batch `batch` of shard `shard`, its tensors sharing the shard's map,
    /// checked against the schema and the manifest on first read.
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.read_batch(0, 0)?.get("x").unwrap().rows(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_batch(&self, shard: usize, batch: usize) -> Result<Batch> {
        let opened = self.opened(shard)?;
        let entry = self.facts(shard)?;
        let location = || self.store.object_location(entry.name);
        let read = opened
            .file
            .read_batch(batch)
            .map_err(|source| DatasetError::shard(location(), source))?;
        let checked = opened.checked.get(batch).ok_or(DatasetError::OutOfRange {
            what: "batch",
            index: batch as u64,
            len: opened.checked.len() as u64,
        })?;
        if !checked.load(Ordering::Acquire) {
            let context = format!("batch {batch} of shard {}", location());
            let sequences = self.schema().check_batch(&read, &context)?;
            let expected = self.counts.batch_sequences(shard, batch);
            if sequences != expected {
                return Err(DatasetError::mismatch(
                    location(),
                    format!("top-level sequences of batch {batch}"),
                    expected,
                    sequences,
                ));
            }
            checked.store(true, Ordering::Release);
        }
        Ok(read)
    }

    /// The tensors of a batch in schema order.
    pub(crate) fn batch_columns(&self, shard: usize, batch: usize) -> Result<Vec<LodTensor>> {
        let opened = self.opened(shard)?;
        if opened
            .checked
            .get(batch)
            .is_some_and(|c| c.load(Ordering::Acquire))
        {
            // Checked before: take the tensors straight from the file.
            let location = || {
                self.facts(shard)
                    .map(|e| self.store.object_location(e.name))
                    .unwrap_or_default()
            };
            let view = opened
                .file
                .batch(batch)
                .map_err(|source| DatasetError::shard(location(), source))?;
            return self
                .schema()
                .tensors
                .iter()
                .map(|t| {
                    view.tensor(&t.name)
                        .map_err(|source| DatasetError::shard(location(), source))
                })
                .collect();
        }
        let read = self.read_batch(shard, batch)?;
        self.schema()
            .tensors
            .iter()
            .map(|t| {
                read.get(&t.name).cloned().ok_or_else(|| {
                    DatasetError::schema(
                        format!("batch {batch} of shard {shard}"),
                        format!("tensor {:?}", t.name),
                        "present",
                        "missing",
                    )
                })
            })
            .collect()
    }

    /// The tensors of a batch in schema order, and the bytes they hold
    /// that are not the shard's map ([`held_bytes`]): 0 for zero-copy views
    /// of a mapped shard, the decoded batch for a compressed one, the section
    /// read for a shard read by positional reads or from an object store.
    pub(crate) fn batch_columns_held(
        &self,
        shard: usize,
        batch: usize,
    ) -> Result<(Vec<LodTensor>, usize)> {
        let columns = self.batch_columns(shard, batch)?;
        let whole = self.opened(shard)?.file.storage();
        let held = held_bytes(&columns, whole);
        Ok((columns, held))
    }

    /// Every batch, in dataset order.
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.batches().count(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn batches(&self) -> impl Iterator<Item = Result<Batch>> + '_ {
        (0..self.num_shards())
            .flat_map(move |s| (0..self.counts.batches(s)).map(move |k| (s, k)))
            .map(move |(s, k)| self.read_batch(s, k))
    }

    /// Where sequence `id` is (from the manifest alone: no I/O).
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # for _ in 0..2 { w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8; 3], vec![3], Lod::try_from_lengths(&[vec![1, 2]])?)?)])?)?; }
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// let at = dataset.locate(3)?;
    /// assert_eq!((at.shard, at.batch, at.index), (0, 1, 1));
    /// assert!(dataset.locate(4).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn locate(&self, id: u64) -> Result<SequenceLocation> {
        self.counts.locate(id).ok_or(DatasetError::OutOfRange {
            what: "sequence",
            index: id,
            len: self.num_sequences(),
        })
    }

    /// Per shard, the top-level sequences of each batch (what the epoch
    /// order is computed from).
    pub(crate) fn batch_counts(&self) -> Arc<ShardCounts> {
        self.counts.clone()
    }

    /// The global id of the sequence at `at`.
    pub(crate) fn id_of(&self, at: SequenceLocation) -> u64 {
        self.counts.id_of(at)
    }

    /// Sequence `id` as a batch of one top-level sequence per tensor, in
    /// schema order: zero-copy slices sharing the shard's map.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// let seq = dataset.sequence(1)?;
    /// assert_eq!(seq.get("x").unwrap().as_slice::<i32>()?, &[1, 2]);
    /// assert!(dataset.sequence(3).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The batch is taken from the dataset's cache (read, and decoded when
    /// compressed, on a miss): reads into one batch decode it once.
    pub fn sequence(&self, id: u64) -> Result<Batch> {
        let at = self.locate(id)?;
        let (columns, held) = self.cached_columns(at.shard, at.batch)?;
        let mut out = Batch::new();
        for (t, column) in self.schema().tensors.iter().zip(&columns) {
            let slice = column
                .slice_top(at.index, at.index.saturating_add(1))
                .map_err(|e| DatasetError::tensor(format!("slicing sequence {id}"), e))?;
            // A slice of a decoded batch would keep the whole batch alive:
            // the sequence is copied out of it (a mapped shard's is a view).
            let slice = if held > 0 { slice.compact() } else { slice };
            out.push(t.name.clone(), slice)
                .map_err(|e| DatasetError::tensor(format!("sequence {id}"), e))?;
        }
        Ok(out)
    }

    /// Checks shard `shard` completely: the manifest's size, batch count and
    /// footer CRC, every checksum, padding byte and LoD rule of the file
    /// ([`LodtFile::verify`]), every batch against the schema, and the
    /// manifest's sequence and row counts. `progress` is called with the
    /// bytes checked so far.
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// let report = dataset.verify_shard(0, &mut |_| {})?;
    /// assert_eq!((report.name.as_str(), report.sequences), ("shard-000000.lodt", 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify_shard(&self, shard: usize, progress: &mut dyn FnMut(u64)) -> Result<ShardReport> {
        let entry = self.shard_entry(shard)?;
        let location = || self.store.object_location(&entry.name);
        let file = self.shard(shard)?;
        file.verify_with_progress(&mut |done, _| progress(done))
            .map_err(|source| DatasetError::shard(location(), source))?;
        let schema = self.schema();
        let mut counts: Vec<TensorCounts> = schema
            .tensors
            .iter()
            .map(|t| TensorCounts {
                levels: vec![0; t.lod_levels],
                rows: 0,
            })
            .collect();
        for k in 0..file.num_batches() {
            let batch = self.read_batch(shard, k)?;
            for (c, t) in counts.iter_mut().zip(&schema.tensors) {
                if let Some(tensor) = batch.get(&t.name) {
                    c.add(tensor);
                }
            }
        }
        for ((found, expected), t) in counts.iter().zip(&entry.tensors).zip(&schema.tensors) {
            for (l, (f, e)) in found.levels.iter().zip(&expected.levels).enumerate() {
                if f != e {
                    return Err(DatasetError::mismatch(
                        location(),
                        format!("sequences of LoD level {l} of tensor {:?}", t.name),
                        e,
                        f,
                    ));
                }
            }
            if found.rows != expected.rows {
                return Err(DatasetError::mismatch(
                    location(),
                    format!("rows of tensor {:?}", t.name),
                    expected.rows,
                    found.rows,
                ));
            }
        }
        Ok(ShardReport {
            name: entry.name.clone(),
            bytes: entry.bytes,
            batches: entry.batches,
            sequences: entry.sequences,
        })
    }

    /// Checks every shard ([`Dataset::verify_shard`]), stopping at the first
    /// error.
    ///
    /// ```
    /// # use lodt::{Batch, Lod, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # let x = LodTensor::from_vec((0..6i32).collect(), vec![6], Lod::try_from_lengths(&[vec![1, 2, 3]])?)?;
    /// # w.write(&Batch::try_from_tensors([("x", x)])?)?;
    /// # w.finish()?;
    /// let report = lodt::dataset::Dataset::open(dir.path())?.verify()?;
    /// assert_eq!((report.shards, report.batches, report.sequences), (1, 1, 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify(&self) -> Result<DatasetReport> {
        let mut report = DatasetReport::default();
        for s in 0..self.num_shards() {
            let r = self.verify_shard(s, &mut |_| {})?;
            report.shards += 1;
            report.bytes += r.bytes;
            report.batches += r.batches;
            report.sequences += r.sequences;
        }
        Ok(report)
    }
}

/// The bytes `columns` keep alive that are not `whole` (a shard's map, or
/// its bytes in memory): each storage their bodies and LoD offsets are
/// windows of, counted once, whole (a window keeps all of its storage).
pub(crate) fn held_bytes(
    columns: &[LodTensor],
    whole: Option<&Arc<dyn crate::buffer::ByteStorage>>,
) -> usize {
    // Storages compared by address (not by `Arc::ptr_eq`, whose vtable part
    // may differ for one object).
    let address = |s: &Arc<dyn crate::buffer::ByteStorage>| Arc::as_ptr(s) as *const u8 as usize;
    let whole = whole.map(address);
    let mut seen: Vec<usize> = Vec::new();
    let mut held = 0usize;
    for t in columns {
        for storage in [Some(t.buffer().storage()), t.lod().storage()]
            .into_iter()
            .flatten()
        {
            let at = address(storage);
            if Some(at) == whole || seen.contains(&at) {
                continue;
            }
            seen.push(at);
            held = held.saturating_add(storage.bytes().len());
        }
    }
    held
}
