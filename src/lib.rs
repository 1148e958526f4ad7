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
//! | `SortBySeqLen`, `sorted_seqs` / `SortedSeqItem` | [`ops::SortedSequences::new`], [`ops::SortedSequences::order`] |
//! | `SegmentInputs`                               | [`ops::SortedSequences::segment_inputs`]               |
//! | `ConcatOutputs`                               | [`ops::SortedSequences::concat_outputs`]               |
//! | `create_lod_tensor` from nested lists         | [`LodTensor::from_nested`] ([`Nested`])                |
//! | `LodTensor_to_Tensor` (user guide), `np.array` per sequence | [`LodTensor::to_nested`]                  |
//! | `sequence_pad` / `sequence_unpad` (ops)       | [`ops::pad::pad`] / [`ops::pad::unpad`], [`ops::pad::Padded`]         |
//!
//! ## Sharded datasets
//!
//! [`dataset`]: a directory of `.lodt` shards and a manifest
//! ([`dataset::DatasetWriter`], [`dataset::Dataset`]), read by a shuffling,
//! partitioned, resumable [`dataset::Loader`] (`spec/DATASET.md`).
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
pub mod lod;
pub mod ops;
pub mod paddle;
pub mod rebatch;
pub mod tensor;

pub use batch::Batch;
pub use dtype::{DType, Element};
pub use error::{Error, LodRule, Result};
pub use format::LodtFile;
pub use lod::Lod;
pub use tensor::LodTensor;
pub use tensor::nested::Nested;

/// The README's Rust examples, run as doctests so they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
