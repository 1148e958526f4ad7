//! # lodt: LoD (Level-of-Detail) tensors
//!
//! A LoD tensor is a dense tensor whose first dimension is cut into
//! variable-length sequences, recursively, by a multi-level offset index (the
//! LoD). It is how PaddlePaddle feeds mini-batches of sentences, articles or
//! videos without padding:
//!
//! ```text
//!  3           1  2            <- level 0: articles of 3, 1 and 2 sentences
//!  3   2  4    1  2  3         <- level 1: sentences of 3, 2, 4, 1, 2, 3 words
//!  ||| || |||| |  || |||       <- 15 rows (words), each a D-dimensional vector
//!
//!  LoD (offsets): {{0, 3, 4, 6}{0, 3, 5, 9, 10, 12, 15}}
//! ```
//!
//! ```
//! use lodt::{Lod, LodTensor};
//! let lod = Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]])?;
//! let words = LodTensor::from_vec((0..15i64).collect(), vec![15, 1], lod)?;
//! let sentence = words.branch(&[0, 2])?;           // the <0,2>-slice: no copy
//! assert_eq!(sentence.as_slice::<i64>()?, &[5, 6, 7, 8]);
//! # Ok::<(), lodt::Error>(())
//! ```
//!
//! ## Paddle names
//!
//! | PaddlePaddle                                  | lodt                                                   |
//! |-----------------------------------------------|--------------------------------------------------------|
//! | `LoD` (offsets)                               | [`Lod`]                                                |
//! | `recursive_sequence_lengths()`                | [`Lod::to_lengths`]                                    |
//! | `set_recursive_sequence_lengths`, `create_lod_tensor` | [`Lod::try_from_lengths`] + [`LodTensor::from_vec`] / [`LodTensor::set_lod`] |
//! | `CheckLoD`, `CheckAbsLoD`                     | [`Lod::try_from_offsets`], [`Lod::check_rows`], [`lod::check_levels`] |
//! | `NumLevels`, `NumElements(level)`             | [`Lod::num_levels`], [`Lod::num_sequences`]            |
//! | `lod_element(level, elem)`                    | [`Lod::sequence_range`] ([`Lod::row_range`] in rows)   |
//! | `ToAbsOffset`                                 | [`Lod::to_absolute`]                                   |
//! | `GetSubLoDAndAbsoluteOffset`                  | [`Lod::sub_lod_and_absolute_range`]                    |
//! | `SliceInLevel`                                | [`Lod::slice_in_level`], [`Lod::slice_level`]          |
//! | `AppendLoD`                                   | [`Lod::append_lengths`]                                |
//! | `operator<<(LoD)`                             | `Display` for [`Lod`]                                  |
//! | `LoDTensor`                                   | [`LodTensor`] (owned; slices are owned too, zero-copy) |
//! | `<i,j,...>`-slice                             | [`LodTensor::branch`], [`Lod::branch`]                 |
//! | `Slice(level, sequence)`, top-level `Slice`   | [`LodTensor::sequence`]                                |
//! | `LODSlice` / `LODSliceShared(level, b, e)`    | [`LodTensor::slice_level`] (+ [`LodTensor::compact`] to copy) |
//! | `ShareConstLODFrom`                           | [`LodTensor::set_lod`] with a clone of [`LodTensor::lod`] |
//! | `ShareMutableLODFrom`                         | [`LodTensor::update_lod`] (copy-on-write)              |
//! | `Tensor::Slice(begin, end)` (rows, no LoD)    | [`LodTensor::slice_rows`]                              |
//! | `sequence_expand` (op)                        | [`ops::sequence_expand()`]                             |
//! | `SplitLoDTensor`                              | [`ops::split()`] (zero-copy parts)                     |
//! | `MergeLoDTensor`                              | [`ops::merge()`]                                       |
//! | `SortBySeqLen`, `sorted_seqs` / `SortedSeqItem` | [`ops::SortedSequences::try_new`], [`ops::SortedSequences::order`] |
//! | `SegmentInputs`                               | [`ops::SortedSequences::segment_inputs`]               |
//! | `ConcatOutputs`                               | [`ops::SortedSequences::concat_outputs`]               |
//! | `create_lod_tensor` from nested lists         | [`LodTensor::from_nested`] ([`Nested`])                |
//! | `LodTensor_to_Tensor` (user guide), `np.array` per sequence | [`LodTensor::to_nested`]                  |
//! | `sequence_pad` / `sequence_unpad` (ops)       | [`ops::pad::pad`] / [`ops::pad::unpad`], [`ops::pad::Padded`]         |
//!
//! ## Files
//!
//! Every file format lodt reads and writes ([`format`](mod@format) for
//! `.lodt`, `arrow` for Arrow IPC and Parquet, [`paddle`] for Paddle's tensor
//! files) has a [`BatchReader`] and a [`BatchWriter`], the contract of
//! [`batch::stream`]; [`convert::Format`] is the list of formats, and
//! `lodt convert` is: open a reader, create a writer, [`batch::copy`].
//!
//! ```
//! use lodt::{convert::Format, BatchReader};
//! let path = "tests/data/paddle/seed_1level_float32.pdtensor";
//! let reader = Format::from_path(path)?.open_reader(path, &Default::default())?;
//! assert_eq!(reader.num_batches(), Some(1));
//! # Ok::<(), lodt::convert::ConvertError>(())
//! ```
//!
//! ## Where things are
//!
//! Modules are layered: each uses only those in the rows above it (the crate
//! root re-exports what a newcomer needs: [`LodTensor`], [`Lod`], [`Batch`],
//! [`LodtFile`], [`Writer`], the readers' and writers' traits, the errors).
//!
//! | layer | module | what it holds |
//! |-------|--------|---------------|
//! | 0 | [`error`], [`dtype`], [`buffer`] | the core error enum; the 13 element types and the one dispatch over them ([`with_element!`]); shared byte storage ([`buffer::Buffer`], the `unsafe trait` [`buffer::ByteStorage`]) |
//! | 1 | [`lod`] | [`Lod`] (its levels are windows of one shared block, one reference count per LoD) and its borrowed levels ([`lod::Offsets`]), the one home of Paddle's `CheckLoD` ([`lod::check_levels`]) |
//! | 2 | [`tensor`] | [`LodTensor`]: owned, zero-copy slices; the rules between its parts; nested lists ([`Nested`]); the JSON printer |
//! | 3 | [`ops`] | `sequence_expand`, split/merge, concatenation and gathers along the top level ([`ops::concat()`], [`ops::take()`]: every copy of whole sequences goes through them), sort by length, pad/unpad |
//! | 3 | [`batch`] | [`Batch`]; the reader/writer contract ([`BatchReader`], [`BatchWriter`]); re-batching |
//! | 4 | [`atomic`] | temp-file-and-rename writes, the writer lock |
//! | 5 | [`format`](mod@format) | the `.lodt` format: [`LodtFile`] over a [`format::RangeSource`], [`Writer`], stream reader, verify, recover |
//! | 5 | [`paddle`] | Paddle's tensor and `save_combine` files |
//! | 5 | `arrow` (feature `arrow`) | Arrow arrays, IPC files and streams, Parquet (feature `parquet`) |
//! | 6 | [`convert`] | the one list of formats ([`convert::Format`]) and `convert` |
//! | 6 | [`dataset`] | sharded datasets: manifest, writer, shuffling resumable loader |
//! | 7 | `remote` (feature `remote`) | files and datasets in object stores (S3, Azure, GCS, HTTP) through `object_store`: ranged reads, a disk cache, conditional commits |
//! | 8 | [`location`] | the one place that tells a local path from a URI, and the one open-options type ([`location::OpenOptions`]): every entry point opens through it |
//!
//! ## Sharded datasets
//!
//! [`dataset`]: a directory of `.lodt` shards and a manifest
//! ([`dataset::DatasetWriter`], [`dataset::Dataset`]), read by a shuffling,
//! partitioned, resumable [`dataset::Loader`] (`spec/DATASET.md`), alone or
//! as a weighted [`dataset::Mixture`] of several datasets.
//!
//! ## Platform
//!
//! lodt reads tensor data in place, as little-endian bytes; it builds only for
//! little-endian targets.

#![warn(missing_docs)]
#![forbid(unsafe_op_in_unsafe_fn)]

#[cfg(not(target_endian = "little"))]
compile_error!("lodt reads little-endian data in place and supports only little-endian targets");

#[cfg(feature = "arrow")]
pub mod arrow;
pub mod atomic;
pub mod batch;
pub mod buffer;
pub mod convert;
pub mod dataset;
pub mod dtype;
pub mod error;
pub mod format;
pub mod location;
pub mod lod;
pub mod mds;
pub mod megatron;
pub mod ops;
pub mod paddle;
#[cfg(feature = "remote")]
pub mod remote;
pub mod tensor;

#[cfg(feature = "arrow")]
pub use arrow::ArrowError;
#[doc(no_inline)]
// `lodt::rebatch` moved to `lodt::batch::rebatch`; the old path still works.
pub use batch::rebatch;
pub use batch::{Batch, BatchReader, BatchWriter};
pub use convert::ConvertError;
pub use dtype::{DType, Element};
pub use error::{Error, LodRule, Result};
pub use format::{FormatError, LodtFile, Writer};
pub use lod::Lod;
pub use paddle::PaddleError;
pub use tensor::LodTensor;
pub use tensor::nested::Nested;

/// The README's Rust examples, run as doctests so they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
