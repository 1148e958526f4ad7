//! [`MegatronWriter`]: batches of a 1- or 2-level token tensor written as
//! a Megatron `.bin`/`.idx` pair, byte for byte as megatron-core's
//! `IndexedDatasetBuilder` writes the same tokens.

use super::error::{MegatronError, Result, io};
use super::index::{MegatronIndex, dtype_code};
use super::prefix;
use crate::atomic::AtomicFile;
use crate::batch::{Batch, BatchWriter, WriteStats};
use crate::dtype::DType;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes batches holding one token tensor as a Megatron indexed dataset
/// (`PREFIX.bin`, `PREFIX.idx`): a 1-level tensor's sequences are
/// documents of one sequence each (`add_item` + `end_document` in
/// megatron-core's terms), a 2-level tensor's level 0 groups its sequences
/// into documents (`add_document`). Rows are scalars (shape `[N]` or
/// `[N, 1]`); every batch has the dtype of the first, one of Megatron's
/// (see [`dtype_code`]).
///
/// Both files are written to temporary files and put in place by
/// [`BatchWriter::finish`]: the old index (if any) is removed first, then
/// the data file and the index are renamed, so no reader ever sees a new
/// data file with an old index. A writer dropped unfinished leaves what
/// was there.
///
/// ```
/// use lodt::{BatchWriter, megatron::MegatronWriter, Batch, Lod, LodTensor};
/// let dir = tempfile::tempdir()?;
/// let prefix = dir.path().join("corpus");
/// let docs = LodTensor::from_vec(vec![1u16, 2, 3], vec![3], Lod::try_from_lengths(&[vec![2], vec![1, 2]])?)?;
/// let mut w = MegatronWriter::create(&prefix)?;
/// w.write(&Batch::try_from_tensors([("tokens", docs)])?)?;
/// let index = w.finish()?;
/// assert_eq!((index.num_documents(), index.lengths()), (1, &[1u32, 2][..]));
/// assert_eq!(std::fs::read(dir.path().join("corpus.bin"))?, [1, 0, 2, 0, 3, 0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MegatronWriter {
    idx: PathBuf,
    bin: Option<BufWriter<AtomicFile>>,
    bin_path: PathBuf,
    dtype: Option<DType>,
    lengths: Vec<u32>,
    document_ends: Vec<u64>,
    stats: WriteStats,
}

impl MegatronWriter {
    /// A writer of the dataset at `path`: its prefix, or either of its
    /// files (`PREFIX.idx`, `PREFIX.bin`).
    ///
    /// See the [type-level example](MegatronWriter).
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let (idx, bin_path) = prefix::files(path.as_ref());
        let bin = BufWriter::with_capacity(1 << 20, AtomicFile::create(&bin_path)?);
        Ok(MegatronWriter {
            idx,
            bin: Some(bin),
            bin_path,
            dtype: None,
            lengths: Vec::new(),
            document_ends: Vec::new(),
            stats: WriteStats::default(),
        })
    }

    fn push_lengths(
        &mut self,
        tensor_name: &str,
        offsets: &[u64],
        ends: impl Iterator<Item = u64>,
    ) -> Result<()> {
        let n = offsets.len().saturating_sub(1);
        self.lengths
            .try_reserve(n)
            .map_err(|_| crate::Error::OutOfMemory {
                needed: (n as u64).saturating_mul(4),
                what: "a Megatron index's lengths",
            })?;
        for w in offsets.windows(2) {
            let len = u32::try_from(w[1] - w[0])
                .ok()
                .filter(|&l| l <= i32::MAX as u32)
                .ok_or_else(|| {
                    MegatronError::Unsupported(format!(
                        "{tensor_name}: a sequence of {} tokens; a Megatron index holds lengths up to {}",
                        w[1] - w[0],
                        i32::MAX
                    ))
                })?;
            self.lengths.push(len);
        }
        let ends: Vec<u64> = ends.collect();
        self.document_ends
            .try_reserve(ends.len())
            .map_err(|_| crate::Error::OutOfMemory {
                needed: (ends.len() as u64).saturating_mul(8),
                what: "a Megatron index's documents",
            })?;
        self.document_ends.extend(ends);
        Ok(())
    }
}

impl BatchWriter for MegatronWriter {
    type Error = MegatronError;
    type Output = MegatronIndex;

    fn write(&mut self, batch: &Batch) -> Result<()> {
        let mut tensors = batch.iter();
        let (name, tensor) = match (tensors.next(), tensors.next()) {
            (Some(one), None) => one,
            (None, _) => return Ok(()),
            (Some(_), Some(_)) => {
                return Err(MegatronError::Unsupported(format!(
                    "a Megatron dataset holds one token tensor; the batch holds {} ({}): choose one with --columns",
                    batch.len(),
                    batch.iter().map(|(n, _)| n).collect::<Vec<_>>().join(", ")
                )));
            }
        };
        let dtype = tensor.dtype();
        if dtype_code(dtype).is_none() {
            return Err(MegatronError::Unsupported(format!(
                "{name}: a Megatron dataset holds uint8, int8, int16, int32, int64, float32, float64 or uint16 tokens, not {dtype}"
            )));
        }
        match self.dtype {
            Some(first) if first != dtype => {
                return Err(MegatronError::Unsupported(format!(
                    "{name}: every batch of a Megatron dataset has one dtype: expected {first}, found {dtype}"
                )));
            }
            _ => self.dtype = Some(dtype),
        }
        if !matches!(tensor.shape(), [_] | [_, 1]) {
            return Err(MegatronError::Unsupported(format!(
                "{name}: a Megatron dataset holds scalar tokens: expected a shape [N] or [N, 1], found {:?}",
                tensor.shape()
            )));
        }
        let lod = tensor.lod();
        let base = self.lengths.len() as u64;
        match lod.num_levels() {
            1 => {
                let offsets = lod.level(0).map(AsRef::as_ref).unwrap_or(&[0u64][..]);
                let n = offsets.len().saturating_sub(1) as u64;
                self.push_lengths(name, offsets, (1..=n).map(|i| base + i))?;
            }
            2 => {
                let docs: &[u64] = lod.level(0).map(AsRef::as_ref).unwrap_or(&[0u64][..]);
                let offsets = lod.level(1).map(AsRef::as_ref).unwrap_or(&[0u64][..]);
                self.push_lengths(name, offsets, docs.iter().skip(1).map(|&d| base + d))?;
            }
            levels => {
                return Err(MegatronError::Unsupported(format!(
                    "{name}: a Megatron dataset is documents of token sequences: expected a LoD of 1 level (documents) or 2 (documents of sequences), found {levels}"
                )));
            }
        }
        let bin = self
            .bin
            .as_mut()
            .ok_or_else(|| MegatronError::Unsupported("the Megatron writer is finished".into()))?;
        bin.write_all(tensor.as_bytes())
            .map_err(io(&self.bin_path))?;
        self.stats.add(batch);
        Ok(())
    }

    fn stats(&self) -> WriteStats {
        self.stats
    }

    fn finish(&mut self) -> Result<MegatronIndex> {
        let bin = self
            .bin
            .take()
            .ok_or_else(|| MegatronError::Unsupported("the Megatron writer is finished".into()))?;
        let index = MegatronIndex::try_new(
            self.dtype.unwrap_or(DType::Int32),
            std::mem::take(&mut self.lengths),
            std::mem::take(&mut self.document_ends),
        )?;
        let mut idx = AtomicFile::create(&self.idx)?;
        idx.write_all(&index.to_bytes()).map_err(io(&self.idx))?;
        let bin = bin.into_inner().map_err(|e| MegatronError::Io {
            path: self.bin_path.display().to_string(),
            source: e.into_error(),
        })?;
        // The old index goes first: a crash between the renames leaves no
        // index (no dataset), never a new data file under an old index.
        match std::fs::remove_file(&self.idx) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&self.idx)(e)),
        }
        bin.commit()?;
        idx.commit()?;
        Ok(index)
    }
}
