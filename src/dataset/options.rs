//! How a [`Loader`](super::Loader) reads: batching, shuffle, partitions,
//! remainder, prefetch, cache and packing options. Plain data and checks of
//! the options alone; nothing here reads a dataset.

use super::error::{DatasetError, Result};
use serde::{Deserialize, Serialize};

/// The default of [`LoaderOptions::cache_bytes`]: 256 MiB. A shuffle
/// buffer spanning more decoded batches than the budget reads some of them
/// again: measured over an object store, a 64 MiB budget made one epoch of
/// a 100 MB dataset of 8 MiB batches take 26–31 s against 0.4 s to fetch
/// it once, so the default stays at 256 MiB.
///
/// ```
/// assert_eq!(lodt::dataset::DEFAULT_CACHE_BYTES, 256 << 20);
/// ```
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// The default of [`Dataset::with_cache_bytes`](super::Dataset::with_cache_bytes),
/// the random-access cache of `sequence`/`take`: 256 MiB, one per process,
/// so that random reads into a compressed dataset decode each batch about once.
///
/// ```
/// assert_eq!(lodt::dataset::DEFAULT_RANDOM_ACCESS_CACHE_BYTES, 256 << 20);
/// ```
pub const DEFAULT_RANDOM_ACCESS_CACHE_BYTES: usize = 256 << 20;

/// The default of [`LoaderOptions::read_ahead_bytes`]: 32 MiB.
///
/// ```
/// assert_eq!(lodt::dataset::DEFAULT_READ_AHEAD_BYTES, 32 << 20);
/// ```
pub const DEFAULT_READ_AHEAD_BYTES: usize = 32 << 20;

/// How sequences are grouped into mini-batches.
///
/// ```
/// use lodt::dataset::Batching;
/// assert_eq!(Batching::default(), Batching::Sequences(32));
/// let tokens = Batching::Rows { max_rows: 4096, tensor: Some("words".into()) };
/// # let _ = tokens;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Batching {
    /// This many top-level sequences per mini-batch (the last one of an
    /// epoch may have fewer: see [`LoaderOptions::drop_last`]).
    Sequences(usize),
    /// As many sequences as fit in `max_rows` rows (tokens) of `tensor`
    /// (default: the schema's first tensor). A sequence longer than the
    /// budget is a mini-batch by itself.
    Rows {
        /// The row budget.
        max_rows: usize,
        /// The tensor whose rows count.
        tensor: Option<String>,
    },
}

impl Default for Batching {
    fn default() -> Self {
        Batching::Sequences(32)
    }
}

/// The shuffle: a seed and the size of the shuffle buffer (in sequences;
/// the larger, the closer to a uniform permutation, at 24 bytes per
/// sequence of memory and no data).
///
/// ```
/// let s = lodt::dataset::ShuffleOptions::default();
/// assert_eq!((s.seed, s.buffer), (0, 16384));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleOptions {
    /// The seed; with the epoch, it fixes the order.
    pub seed: u64,
    /// The shuffle buffer's size, in sequences (at least 1).
    pub buffer: usize,
}

impl Default for ShuffleOptions {
    fn default() -> Self {
        ShuffleOptions {
            seed: 0,
            buffer: 16384,
        }
    }
}

/// What to do with the `N mod C` positions of an epoch that cannot be dealt
/// evenly to the `C` consumers. See [`Loader`](super::Loader).
///
/// ```
/// assert_eq!(lodt::dataset::Remainder::default(), lodt::dataset::Remainder::Keep);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Remainder {
    /// Deliver them: every sequence exactly once, some consumers one more.
    #[default]
    Keep,
    /// Drop them: every consumer gets `floor(N / C)`.
    Drop,
    /// Give the consumers that would be one short a repeat of the epoch's
    /// first positions: every consumer gets `ceil(N / C)`.
    Repeat,
}

impl std::str::FromStr for Remainder {
    type Err = DatasetError;

    /// `"keep"`, `"drop"` or `"repeat"` (the names the state's JSON uses).
    ///
    /// ```
    /// use lodt::dataset::Remainder;
    /// assert_eq!("drop".parse::<Remainder>()?, Remainder::Drop);
    /// assert!("all".parse::<Remainder>().is_err());
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "keep" => Ok(Remainder::Keep),
            "drop" => Ok(Remainder::Drop),
            "repeat" => Ok(Remainder::Repeat),
            other => Err(DatasetError::InvalidArgument(format!(
                "remainder must be \"keep\", \"drop\" or \"repeat\", found {other:?}"
            ))),
        }
    }
}

/// How an epoch is dealt to its consumers (`spec/DATASET.md` section 7).
///
/// ```
/// use lodt::dataset::Partition;
/// assert_eq!("locality".parse::<Partition>()?, Partition::Locality);
/// assert_eq!(serde_json::to_value(Partition::RoundRobin)?, "round_robin");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Partition {
    /// Positions `c, c + C, c + 2C, ...` of the order (section 7.1): every
    /// consumer reads from the whole dataset at once, so every node needs
    /// nearly every file batch.
    RoundRobin,
    /// A contiguous block of positions per consumer, of an order shuffled
    /// in windows of twice the buffer (section 7.6): consecutive consumers (the
    /// workers of a node) read one contiguous part of the dataset, so
    /// nodes fetch disjoint file batches, and a consumer starts or resumes
    /// anywhere without walking the positions before it. A single
    /// dataset's loader only, without packing.
    Locality,
}

impl std::fmt::Display for Partition {
    /// The name the state's JSON and the Python option use.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::Partition::RoundRobin.to_string(), "round_robin");
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Partition::RoundRobin => "round_robin",
            Partition::Locality => "locality",
        })
    }
}

impl std::str::FromStr for Partition {
    type Err = DatasetError;

    /// `"round_robin"` or `"locality"` (the names the state's JSON uses).
    ///
    /// ```
    /// assert!("blocks".parse::<lodt::dataset::Partition>().is_err());
    /// ```
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "round_robin" => Ok(Partition::RoundRobin),
            "locality" => Ok(Partition::Locality),
            other => Err(DatasetError::InvalidArgument(format!(
                "partition must be \"round_robin\" or \"locality\", found {other:?}"
            ))),
        }
    }
}

/// How a [`Loader`](super::Loader) reads.
///
/// ```
/// let o = lodt::dataset::LoaderOptions { rank: 1, world_size: 4, ..Default::default() };
/// assert_eq!((o.num_workers, o.prefetch), (1, 2));
/// assert_eq!(o.cache_bytes, lodt::dataset::DEFAULT_CACHE_BYTES);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderOptions {
    /// How sequences are grouped.
    pub batching: Batching,
    /// With [`Batching::Sequences`]: drop a consumer's last mini-batch of an
    /// epoch if it is short.
    pub drop_last: bool,
    /// The shuffle (`None`: dataset order, every epoch).
    pub shuffle: Option<ShuffleOptions>,
    /// This process's rank, below `world_size`.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// This loader's worker index within its rank, below `num_workers`.
    pub worker: usize,
    /// The number of loaders (workers) per rank.
    pub num_workers: usize,
    /// What to do with the positions that cannot be dealt evenly.
    pub remainder: Remainder,
    /// Mini-batches read ahead by a background thread (0: no thread; each
    /// mini-batch is read when asked for). Memory holds at most this many
    /// mini-batches, plus one being built. At most [`MAX_PREFETCH`]: more is
    /// a [`DatasetError::InvalidArgument`] from [`Loader::new`](super::Loader::new).
    pub prefetch: usize,
    /// The most bytes the loader's cache of recently read batches holds
    /// (default [`DEFAULT_CACHE_BYTES`], 256 MiB). A batch of a compressed
    /// (2.0) shard, or one read by positional reads or from an object store,
    /// counts its decoded (read) bytes; a batch of a mapped shard counts
    /// only its views (a few hundred bytes per tensor), its bytes being the
    /// map's. The cache also holds at most 4,096 batches, and always the
    /// one being read. A batch that is evicted and needed again is read (and
    /// decoded) again: a shuffle buffer spanning more decoded batches than
    /// fit decodes some batches more than once per epoch, trading time for
    /// the bound. A sequence taken from a decoded batch is copied out of
    /// it, so mini-batches never keep a decoded batch alive.
    pub cache_bytes: usize,
    /// How many bytes of file batches the loader asks for ahead of their
    /// sequences, from shards not in memory (object stores, positional
    /// reads): the epoch order says which batches the next sequences need,
    /// and their bytes are fetched concurrently while earlier ones are
    /// handed out (default [`DEFAULT_READ_AHEAD_BYTES`], 32 MiB; 0: none).
    /// Memory-mapped shards are not read ahead (the map serves them). The
    /// bytes fetched ahead are held until read, so the loader holds at most
    /// this plus [`LoaderOptions::cache_bytes`].
    ///
    /// ```
    /// use lodt::dataset::LoaderOptions;
    /// let o = LoaderOptions { read_ahead_bytes: 64 << 20, ..Default::default() };
    /// assert_eq!(o.read_ahead_bytes, 64 << 20);
    /// ```
    pub read_ahead_bytes: usize,
    /// Pack the consumer's sequences into bins of a row (token) budget
    /// (`spec/DATASET.md` section 7.4) instead of grouping them by
    /// [`LoaderOptions::batching`] (`None`, the default: no packing). A
    /// packing loader reads its stream in windows of
    /// [`PackOptions::buffer`] sequences, so `batching` and `drop_last` do
    /// not apply; its states are version 2 or 3.
    ///
    /// ```
    /// use lodt::dataset::{LoaderOptions, PackOptions};
    /// let o = LoaderOptions { packing: Some(PackOptions::tokens(4096)), ..Default::default() };
    /// assert_eq!(o.packing.unwrap().capacity, 4096);
    /// ```
    pub packing: Option<PackOptions>,
    /// How the epoch is dealt to the consumers ([`Partition`]); `None`, the
    /// default, chooses: the state's partition when resuming, otherwise
    /// [`Partition::Locality`] for a single dataset on an object store read
    /// without packing, and [`Partition::RoundRobin`] for everything else.
    ///
    /// ```
    /// use lodt::dataset::{LoaderOptions, Partition};
    /// let o = LoaderOptions { partition: Some(Partition::Locality), ..Default::default() };
    /// assert_eq!(o.partition, Some(Partition::Locality));
    /// ```
    pub partition: Option<Partition>,
}

/// The most mini-batches [`LoaderOptions::prefetch`] reads ahead: 1,024 (the
/// queue's slots are allocated when the loader starts, so the count is capped
/// rather than trusted).
///
/// ```
/// assert_eq!(lodt::dataset::MAX_PREFETCH, 1024);
/// ```
pub const MAX_PREFETCH: usize = 1024;

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            batching: Batching::default(),
            drop_last: false,
            shuffle: None,
            rank: 0,
            world_size: 1,
            worker: 0,
            num_workers: 1,
            remainder: Remainder::Keep,
            prefetch: 2,
            cache_bytes: DEFAULT_CACHE_BYTES,
            read_ahead_bytes: DEFAULT_READ_AHEAD_BYTES,
            packing: None,
            partition: None,
        }
    }
}

impl LoaderOptions {
    /// The number of consumers, `world_size × num_workers`, and this
    /// loader's index `rank × num_workers + worker`.
    ///
    /// ```
    /// let o = lodt::dataset::LoaderOptions { rank: 1, world_size: 2, worker: 1, num_workers: 3, ..Default::default() };
    /// assert_eq!(o.consumer()?, (6, 4));
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    pub fn consumer(&self) -> Result<(u64, u64)> {
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(DatasetError::InvalidArgument(format!(
                "rank {} of world size {}: the rank must be below the world size, which must be at least 1",
                self.rank, self.world_size
            )));
        }
        if self.num_workers == 0 || self.worker >= self.num_workers {
            return Err(DatasetError::InvalidArgument(format!(
                "worker {} of {}: the worker must be below the number of workers, which must be at least 1",
                self.worker, self.num_workers
            )));
        }
        let consumers = (self.world_size as u64)
            .checked_mul(self.num_workers as u64)
            .ok_or_else(|| DatasetError::InvalidArgument("too many consumers".into()))?;
        let consumer = self.rank as u64 * self.num_workers as u64 + self.worker as u64;
        Ok((consumers, consumer))
    }
}

/// How a packing [`Loader`](super::Loader) packs ([`LoaderOptions::packing`];
/// `spec/DATASET.md` section 7.4).
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
    /// [`PackedBatch::truncated`](super::PackedBatch::truncated)) instead of delivering it alone.
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
    pub(crate) fn bin_length(&self, rows: usize) -> usize {
        if self.truncate {
            rows.min(self.capacity)
        } else {
            rows
        }
    }

    /// Whether the loader of `options` equalises counts.
    pub(crate) fn equal(&self, options: &LoaderOptions) -> bool {
        self.equal_batches.unwrap_or(options.world_size > 1)
    }
}

/// When a mixture's epoch ends.
///
/// ```
/// use lodt::dataset::Stop;
/// assert_eq!(serde_json::to_value(Stop::AllExhausted)?, "all_exhausted");
/// assert_eq!(serde_json::to_value(Stop::Sequences(9))?, serde_json::json!({"sequences": 9}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// At the first draw of a source that has delivered all its sequences:
    /// no sequence twice, the other sources partly read.
    #[default]
    FirstExhausted,
    /// Once every source of positive weight has delivered all its
    /// sequences; a source that runs out first starts over (its next pass,
    /// in a new order).
    AllExhausted,
    /// After this many sequences; sources that run out start over.
    Sequences(u64),
}

/// A mixture's seed (of its draws) and stopping rule.
///
/// ```
/// let o = lodt::dataset::MixtureOptions::default();
/// assert_eq!((o.seed, o.stop), (0, lodt::dataset::Stop::FirstExhausted));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MixtureOptions {
    /// The seed of the draws (which source each position comes from).
    pub seed: u64,
    /// When an epoch ends.
    pub stop: Stop,
}

impl std::str::FromStr for Stop {
    type Err = DatasetError;

    /// `"first_exhausted"`, `"all_exhausted"`, or a number of sequences.
    ///
    /// ```
    /// use lodt::dataset::Stop;
    /// assert_eq!("all_exhausted".parse::<Stop>()?, Stop::AllExhausted);
    /// assert_eq!("9".parse::<Stop>()?, Stop::Sequences(9));
    /// assert!("never".parse::<Stop>().is_err());
    /// # Ok::<(), lodt::dataset::DatasetError>(())
    /// ```
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "first_exhausted" => Ok(Stop::FirstExhausted),
            "all_exhausted" => Ok(Stop::AllExhausted),
            other => other.parse::<u64>().map(Stop::Sequences).map_err(|_| {
                DatasetError::InvalidArgument(format!(
                    "stop must be \"first_exhausted\", \"all_exhausted\" or a number of sequences, found {other:?}"
                ))
            }),
        }
    }
}
