//! [`MegatronReader`]: a Megatron `.bin`/`.idx` pair as a [`BatchReader`]
//! of whole documents, the tokens viewed in the data file's map.

use super::error::{MegatronError, Result, io};
use super::index::MegatronIndex;
use super::prefix;
use crate::batch::{Batch, BatchReader};
use crate::buffer::{AlignedBytes, Buffer};
use crate::format::MappedFile;
use crate::lod::Lod;
use crate::tensor::LodTensor;
use std::path::Path;
use std::sync::Arc;

/// The token bytes a batch holds at most (whole documents; a larger
/// document is a batch of its own): 16 MiB.
pub const BATCH_BYTES: u64 = 16 << 20;

/// Reads a Megatron indexed dataset (`PREFIX.idx` and `PREFIX.bin`, as
/// megatron-core's `IndexedDataset(PREFIX)` does) as batches of whole
/// documents, one tensor each (named `tokens`, or as given): a 1-level
/// tensor (documents → tokens) when every document is one sequence, else
/// 2-level (documents → sequences → tokens). The index is read and checked
/// whole when opened (every sequence inside the data file); the tokens are
/// views of the data file's map (copied only when the index puts a batch's
/// sequences apart). Batches hold whole documents up to [`BATCH_BYTES`].
///
/// ```
/// use lodt::{megatron::{MegatronReader, MegatronWriter}, Batch, BatchWriter, Lod, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let prefix = dir.path().join("corpus");
/// let docs = LodTensor::from_vec(vec![5i32, 6, 7, 8, 9], vec![5], Lod::try_from_lengths(&[vec![2, 3]])?)?;
/// let mut w = MegatronWriter::create(&prefix)?;
/// w.write(&Batch::try_from_tensors([("tokens", docs.clone())])?)?;
/// w.finish()?;
/// let mut r = MegatronReader::open(&prefix)?;
/// assert_eq!(r.index().num_documents(), 2);
/// let batch = r.next().transpose()?.unwrap();
/// assert_eq!(batch.get("tokens"), Some(&docs));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MegatronReader {
    index: MegatronIndex,
    data: Buffer,
    name: String,
    next_document: usize,
    batch_bytes: u64,
}

impl MegatronReader {
    /// Opens the dataset at `path`: its prefix, or either of its files
    /// (`PREFIX.idx`, `PREFIX.bin`).
    ///
    /// See the [type-level example](MegatronReader).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let (idx, bin) = prefix::files(path.as_ref());
        // The index first: it is what makes the pair a dataset.
        let bytes = std::fs::read(&idx).map_err(io(&idx))?;
        let bin_len = std::fs::metadata(&bin).map_err(io(&bin))?.len();
        let index = MegatronIndex::parse(&bytes, &idx.display().to_string(), bin_len)?;
        let data = if bin_len == 0 {
            Buffer::from_storage(Arc::new(AlignedBytes::zeroed(0)))
        } else {
            let map = MappedFile::open(&bin).map_err(|e| MegatronError::Io {
                path: bin.display().to_string(),
                source: std::io::Error::other(e.to_string()),
            })?;
            Buffer::from_storage(Arc::new(map))
        };
        Ok(MegatronReader {
            index,
            data,
            name: "tokens".into(),
            next_document: 0,
            batch_bytes: BATCH_BYTES,
        })
    }

    /// Names the tensor `name` (default `tokens`).
    ///
    /// ```
    /// # use lodt::megatron::{MegatronReader, MegatronWriter};
    /// # let dir = tempfile::tempdir()?;
    /// # let prefix = dir.path().join("c");
    /// # let t = lodt::LodTensor::from_vec(vec![1u16, 2], vec![2], lodt::Lod::try_from_lengths(&[vec![2]])?)?;
    /// # let mut w = MegatronWriter::create(&prefix)?;
    /// # lodt::BatchWriter::write(&mut w, &lodt::Batch::try_from_tensors([("x", t)])?)?;
    /// # lodt::BatchWriter::finish(&mut w)?;
    /// let mut r = MegatronReader::open(&prefix)?.with_name("ids");
    /// assert!(r.next().transpose()?.unwrap().get("ids").is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the token bytes a batch holds at most (default
    /// [`BATCH_BYTES`]; at least one document per batch).
    ///
    /// ```
    /// # use lodt::megatron::{MegatronReader, MegatronWriter};
    /// # let dir = tempfile::tempdir()?;
    /// # let prefix = dir.path().join("c");
    /// # let t = lodt::LodTensor::from_vec(vec![1u16, 2, 3], vec![3], lodt::Lod::try_from_lengths(&[vec![1, 1, 1]])?)?;
    /// # let mut w = MegatronWriter::create(&prefix)?;
    /// # lodt::BatchWriter::write(&mut w, &lodt::Batch::try_from_tensors([("x", t)])?)?;
    /// # lodt::BatchWriter::finish(&mut w)?;
    /// assert_eq!(MegatronReader::open(&prefix)?.with_batch_bytes(4).count(), 2); // 2 + 1 documents
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_batch_bytes(mut self, bytes: u64) -> Self {
        self.batch_bytes = bytes.max(1);
        self
    }

    /// The dataset's index.
    ///
    /// See the [type-level example](MegatronReader).
    pub fn index(&self) -> &MegatronIndex {
        &self.index
    }

    /// The documents `first..` up to the batch budget: the end document.
    fn batch_end(&self, first: usize) -> usize {
        let (docs, lens) = (self.index.documents(), self.index.lengths());
        let size = self.index.dtype().size() as u64;
        let mut bytes = 0u64;
        let mut end = first;
        while end < self.index.num_documents() {
            let seqs = docs[end] as usize..docs[end + 1] as usize;
            let doc: u64 = lens[seqs].iter().map(|&l| l as u64 * size).sum();
            if end > first && bytes.saturating_add(doc) > self.batch_bytes {
                break;
            }
            bytes = bytes.saturating_add(doc);
            end += 1;
        }
        end
    }

    /// The batch of documents `first..end`.
    fn batch(&self, first: usize, end: usize) -> Result<Batch> {
        let docs = &self.index.documents()[first..=end];
        let seqs = docs[0] as usize..docs[docs.len() - 1] as usize;
        let lens = &self.index.lengths()[seqs.clone()];
        let dtype = self.index.dtype();
        let size = dtype.size();
        let tokens: usize = lens.iter().map(|&l| l as usize).sum();
        let data = if seqs.is_empty() || tokens == 0 {
            Buffer::from_storage(Arc::new(AlignedBytes::zeroed(0)))
        } else if self.index.contiguous(seqs.clone()) {
            let start = self.index.pointers()[seqs.start] as usize;
            self.data.slice(start..start + tokens * size)?
        } else {
            let mut bytes = Vec::new();
            bytes
                .try_reserve_exact(tokens * size)
                .map_err(|_| crate::Error::OutOfMemory {
                    needed: (tokens * size) as u64,
                    what: "a Megatron batch's tokens",
                })?;
            for (i, &len) in seqs.clone().zip(lens) {
                let at = self.index.pointers()[i] as usize;
                bytes.extend_from_slice(&self.data.as_slice()[at..at + len as usize * size]);
            }
            Buffer::from_storage(Arc::new(AlignedBytes::from_slice(&bytes)))
        };
        let mut token_offsets = Vec::with_capacity(lens.len() + 1);
        token_offsets.push(0u64);
        for &len in lens {
            token_offsets.push(token_offsets[token_offsets.len() - 1] + len as u64);
        }
        let lod = if self.index.one_sequence_per_document() {
            Lod::try_from_offsets(vec![token_offsets])?
        } else {
            let doc_offsets = docs.iter().map(|&d| d - docs[0]).collect();
            Lod::try_from_offsets(vec![doc_offsets, token_offsets])?
        };
        let tensor = LodTensor::try_from_parts(dtype, vec![tokens], data, lod)?;
        Ok(Batch::try_from_tensors([(self.name.clone(), tensor)])?)
    }
}

impl Iterator for MegatronReader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        let first = self.next_document;
        if first >= self.index.num_documents() {
            return None;
        }
        let end = self.batch_end(first);
        self.next_document = end;
        Some(self.batch(first, end))
    }
}

impl BatchReader for MegatronReader {
    type Error = MegatronError;
}
