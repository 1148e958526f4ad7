//! Sharded datasets: many `.lodt` shards and one manifest in a directory,
//! written by one or many writers, read by a shuffling, partitioned,
//! resumable loader. `spec/DATASET.md` is the normative layout.
//!
//! ```text
//!  train/
//!    lodt-dataset.json        manifest: schema, metadata, per shard its name, size,
//!                             footer CRC, batches, sequences per batch, counts
//!    shard-000000.lodt        .lodt files of about 256 MiB each
//!    shard-000001.lodt
//!    w7-shard-000000.lodt     a shard of writer "w7" (parallel writers)
//!    lodt-dataset.part.w7.json  its partial manifest, until Dataset::commit_parts
//! ```
//!
//! - Write: [`DatasetWriter`] (create, append, or one part of a parallel
//!   write; [`Dataset::commit_parts`] / [`merge_manifests`] join the parts).
//!   Shards are written atomically, the manifest last: a crash leaves the
//!   previous manifest valid and never lists a shard half-written.
//! - Read: [`Dataset`] (opening reads the manifest only; shards are opened
//!   and checked when touched; random access by sequence id).
//! - Load: [`Loader`] (mini-batches by sequence count or row budget;
//!   deterministic shuffle from `(seed, epoch)`; disjoint partitions per
//!   rank and worker; prefetch thread; resumable, also on another world
//!   size).
//! - Parts of a parallel write: [`Dataset::list_parts`],
//!   [`Dataset::remove_parts`] (stale parts), [`Dataset::commit_parts_with`];
//!   [`PartJob`] names the writers and commits of a job of retried tasks
//!   (Ray's `write_lodt`) and cleans up after it.
//! - Plumbing, in submodules of their own: [`names`] (every object name of
//!   a dataset: [`MANIFEST_NAME`], [`names::part_manifest_name`],
//!   [`names::part_shard_prefix`], …), [`store`] (the [`DatasetStore`] seam
//!   and what it hands out: [`store::ShardSink`], [`store::StoreLock`],
//!   [`store::ObjectVersion`]) and [`manifest`] (the manifest's types and
//!   limits, e.g. [`manifest::COMMIT_HISTORY`]).
//! - Mix: [`Mixture`] (several datasets as one stream, each position drawn
//!   from a source in given proportions; stopping rules; read by the same
//!   [`Loader`], with the same partitions and resume).
//! - Storage: the [`DatasetStore`] seam; [`LocalStore`] is a directory.
//! - Commits: every write (create, append, part, [`Dataset::commit_parts`])
//!   has a commit id, given or generated, that the manifest lists once the
//!   write is in. A failed manifest write is an unknown outcome: the writer
//!   reads the manifest again and reports success if its id is there; a
//!   write retried with the id of a committed write writes nothing
//!   ([`DatasetWriter::already_committed`]).
//!
//! ```
//! use lodt::dataset::{Batching, Dataset, DatasetWriter, Loader, LoaderOptions, ShuffleOptions, DatasetWriterOptions};
//! use lodt::{Batch, Lod, LodTensor};
//! use std::sync::Arc;
//! let dir = tempfile::tempdir()?;
//!
//! // Write 8 batches of 4 sentences into shards of about 4 KiB.
//! let mut writer = DatasetWriter::create(dir.path(), DatasetWriterOptions { shard_bytes: 4096, ..Default::default() })?;
//! for k in 0..8i64 {
//!     let lod = Lod::try_from_lengths(&[vec![2, 3, 1, 4]])?;
//!     let words = LodTensor::from_vec((0..10).map(|i| k * 100 + i).collect(), vec![10], lod)?;
//!     let labels = LodTensor::from_vec(vec![k; 4], vec![4], Lod::empty())?;
//!     writer.write(&Batch::try_from_tensors([("words", words), ("labels", labels)])?)?;
//! }
//! writer.finish()?;
//!
//! // Two ranks read a shuffled epoch, 5 sentences per step.
//! let dataset = Arc::new(Dataset::open(dir.path())?);
//! assert_eq!(dataset.num_sequences(), 32);
//! let mut seen = Vec::new();
//! for rank in 0..2 {
//!     let options = LoaderOptions {
//!         batching: Batching::Sequences(5),
//!         shuffle: Some(ShuffleOptions { seed: 1, buffer: 64 }),
//!         rank,
//!         world_size: 2,
//!         ..Default::default()
//!     };
//!     for batch in Loader::new(dataset.clone(), options)? {
//!         let batch = batch?;
//!         assert_eq!(batch.batch.get("labels").unwrap().rows(), batch.ids.len());
//!         seen.extend(batch.ids);
//!     }
//! }
//! seen.sort();
//! assert_eq!(seen, (0..32).collect::<Vec<u64>>()); // every sentence exactly once
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch_cache;
mod checkpoint;
mod commit;
mod commit_record;
mod compat;
mod counts;
mod cursor;
mod error;
mod feed;
mod grown;
mod index;
mod inspect;
mod job;
mod loader;
mod locality;
pub mod manifest;
mod mixture;
mod mixture_draws;
mod mixture_evolve;
mod mixture_totals;
mod moved;
pub mod names;
mod options;
mod pack;
mod parts;
mod plan;
mod random;
mod read_ahead;
mod reader;
mod resume_check;
mod shuffle;
mod state;
pub mod store;
mod stream;
mod take;
mod versions;
mod writer;

pub use checkpoint::{CHECKPOINT_VERSION, Checkpoint, consumer, next_worker, served_worker};
pub use commit::new_commit_id;
#[allow(deprecated)]
pub use compat::PackedLoader;
pub use cursor::OrderCursor;
pub use error::{DatasetError, Result};
pub use feed::Feed;
pub use inspect::{ConsumerProgress, MixtureFacts, StateReport};
pub use job::{JobCleanup, PartJob};
pub use loader::Loader;
pub use manifest::{
    FORMAT_NAME, MANIFEST_MAJOR, MANIFEST_MINOR, MAX_MANIFEST_BYTES, Manifest, ManifestVersion,
    Schema, ShardEntry, TensorCounts, TensorSchema, merge_manifests,
};
pub use mixture::Mixture;
pub use mixture_draws::MAX_MIXTURE_EPOCH;
#[allow(deprecated)]
pub use moved::{
    COMMIT_HISTORY, ObjectVersion, PART_PREFIX, SHARD_SUFFIX, StoreLock, WriterOptions,
    part_manifest_name, part_shard_prefix, part_writer_id, shard_writer_id, valid_commit_id,
    valid_shard_name, valid_writer_id,
};
pub use names::MANIFEST_NAME;
pub use options::{
    Batching, DEFAULT_CACHE_BYTES, DEFAULT_RANDOM_ACCESS_CACHE_BYTES, DEFAULT_READ_AHEAD_BYTES,
    LoaderOptions, MAX_PREFETCH, MixtureOptions, PackOptions, Partition, Remainder, ShuffleOptions,
    Stop,
};
pub use pack::{BINS_KEY, PackedBatch, TRUNCATED_KEY, Varlen, best_fit, row_cu_seqlens, varlen};
pub use parts::Part;
pub use plan::{ReadTask, plan_reads};
pub use random::SequenceArray;
pub use reader::{Dataset, DatasetReport, SequenceLocation, ShardReport};
pub use resume_check::{Fault, Offence, ResumeCheck};
pub use state::{
    Evolved, Joined, LoaderState, MIXTURE_EVOLVED_VERSION, MIXTURE_STATE_VERSION, MixtureState,
    PackState, PackWindow, SourceProgress, SourceState,
};
pub use store::{DatasetStore, LocalStore};
// Moved to store::ShardSink; kept here for one release, hidden (a trait has
// no deprecated alias).
pub use commit_record::{CommitRecord, UNRECORDED};
#[doc(hidden)]
pub use store::ShardSink;
pub use stream::MiniBatch;
pub use versions::Tag;
pub use writer::{DEFAULT_SHARD_BYTES, DatasetWriter, DatasetWriterOptions};
