//! Megatron-LM's indexed datasets (`PREFIX.bin` + `PREFIX.idx`, what
//! Megatron-LM and NeMo train from), read and written as megatron-core's
//! `IndexedDataset` and `IndexedDatasetBuilder` do (`spec/MEGATRON.md`
//! gives every byte and the mapping).
//!
//! - [`MegatronReader`]: a [`BatchReader`](crate::BatchReader) of whole
//!   documents, zero-copy views of the data file's map; a 1-level tensor
//!   (documents → tokens) when every document is one sequence, else 2-level
//!   (documents → sequences → tokens).
//! - [`MegatronWriter`]: a [`BatchWriter`](crate::BatchWriter) of a 1- or
//!   2-level token tensor, byte for byte megatron-core's output.
//! - [`MegatronIndex`]: the `.idx` file, parsed and checked (every sequence
//!   inside the data file) or written.
//!
//! [`crate::convert`] reaches both as [`Format::Megatron`](crate::convert::Format::Megatron):
//! `lodt convert corpus.idx train` and `lodt.convert("train", "out.idx")`.
//!
//! ```
//! use lodt::{batch::copy, megatron::{MegatronReader, MegatronWriter}, Batch, Lod, LodTensor};
//! let dir = tempfile::tempdir()?;
//! let tokens = LodTensor::from_vec(vec![7i32, 8, 9], vec![3], Lod::try_from_lengths(&[vec![1, 2]])?)?;
//! let mut w = MegatronWriter::create(dir.path().join("a"))?;
//! lodt::BatchWriter::write(&mut w, &Batch::try_from_tensors([("tokens", tokens.clone())])?)?;
//! lodt::BatchWriter::finish(&mut w)?;
//! // A copy through the reader and the writer gives the same bytes.
//! let (_, stats) = copy(MegatronReader::open(dir.path().join("a.idx"))?, MegatronWriter::create(dir.path().join("b"))?, |_| {})?;
//! assert_eq!(stats.batches, 1);
//! for ext in ["bin", "idx"] {
//!     assert_eq!(std::fs::read(dir.path().join(format!("a.{ext}")))?, std::fs::read(dir.path().join(format!("b.{ext}")))?);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod index;
mod prefix;
mod reader;
mod writer;

pub use error::{MegatronError, Result};
pub use index::{MAGIC, MegatronIndex, VERSION, dtype_code, dtype_of_code};
pub use prefix::files;
pub use reader::{BATCH_BYTES, MegatronReader};
pub use writer::MegatronWriter;
