//! [`MdsReader`]: an MDS dataset as a [`BatchReader`] of one batch per
//! shard.

use super::column::Column;
use super::error::{MdsError, Result, corrupt};
use super::index::{MdsIndex, MdsShard};
use crate::batch::{Batch, BatchReader};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes one shard decodes to (4 GiB): a compressed shard that
/// would decode to more is refused.
pub const MAX_SHARD_BYTES: u64 = 4 << 30;

/// Reads an MDS dataset (a directory of `index.json` and its shards, as
/// MosaicML Streaming's `MDSWriter` writes it): one batch per shard, one
/// tensor per column (see [the module](super) for the mapping). A shard
/// whose raw file is absent is read from its compressed file (`zstd`).
/// Every offset and size is checked against the bytes that are there.
///
/// See the [module-level example](super).
pub struct MdsReader {
    dir: PathBuf,
    index: MdsIndex,
    next: usize,
}

impl MdsReader {
    /// Opens the MDS dataset in `dir` (its `index.json` is read and
    /// checked; shards are read as batches are).
    ///
    /// See the [module-level example](super).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let index = MdsIndex::read(&dir)?;
        Ok(MdsReader {
            dir,
            index,
            next: 0,
        })
    }

    /// The dataset's index.
    ///
    /// See the [module-level example](super).
    pub fn index(&self) -> &MdsIndex {
        &self.index
    }

    /// The bytes of shard `shard`, decoded if it is stored compressed.
    fn shard_bytes(&self, shard: &MdsShard) -> Result<(Vec<u8>, String)> {
        let raw = self.dir.join(&shard.raw);
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| MdsError::Io { path, source }
        };
        let zip = match &shard.zip {
            Some(zip) if !raw.exists() => self.dir.join(zip),
            _ => {
                return Ok((
                    std::fs::read(&raw).map_err(io(&raw))?,
                    raw.display().to_string(),
                ));
            }
        };
        let codec = shard.compression.as_deref().unwrap_or("");
        if codec != "zstd" && !codec.starts_with("zstd:") {
            return Err(MdsError::Unsupported(format!(
                "{}: an MDS shard compressed with {codec:?}; lodt reads raw and zstd shards",
                zip.display()
            )));
        }
        let compressed = std::fs::read(&zip).map_err(io(&zip))?;
        let limit = shard
            .raw_bytes
            .unwrap_or(MAX_SHARD_BYTES)
            .min(MAX_SHARD_BYTES);
        let mut out = Vec::new();
        zstd::stream::read::Decoder::new(&compressed[..])
            .and_then(|d| d.take(limit + 1).read_to_end(&mut out))
            .map_err(io(&zip))?;
        let name = zip.display().to_string();
        if out.len() as u64 > limit {
            return Err(corrupt(
                &name,
                "shard",
                format!("at most {limit} bytes decoded"),
                "more",
            ));
        }
        Ok((out, name))
    }

    /// Shard `k` as a batch.
    fn read_shard(&self, k: usize) -> Result<Batch> {
        let shard = &self.index.shards()[k];
        let (bytes, name) = self.shard_bytes(shard)?;
        let u32_at = |at: usize| -> Option<usize> {
            bytes
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let n =
            u32_at(0).ok_or_else(|| corrupt(&name, "shard", "at least 4 bytes", bytes.len()))?;
        if n as u64 != shard.samples {
            return Err(corrupt(
                &name,
                "shard's sample count",
                format!("{} (the index's)", shard.samples),
                n,
            ));
        }
        let need = 4 + 4 * (n + 1); // n < 2^32: no overflow on 64-bit
        if bytes.len() < need {
            return Err(corrupt(
                &name,
                "shard",
                format!("{need} bytes of offsets"),
                bytes.len(),
            ));
        }
        let offsets: Vec<usize> = (0..=n).filter_map(|i| u32_at(4 + 4 * i)).collect();
        let encodings = self.index.encodings();
        let variable = encodings
            .iter()
            .filter(|e| e.fixed_size().is_none())
            .count();
        let mut columns: Vec<Column> = encodings.iter().cloned().map(Column::new).collect();
        for i in 0..n {
            let (start, end) = (offsets[i], offsets[i + 1]);
            if start < need || start > end || end > bytes.len() {
                return Err(corrupt(
                    &name,
                    &format!("offset of sample {i}"),
                    format!("{need} <= {start} <= {end} <= {} (the file)", bytes.len()),
                    format!("{start}..{end}"),
                ));
            }
            let sample = &bytes[start..end];
            let head = 4 * variable;
            if sample.len() < head {
                return Err(corrupt(
                    &name,
                    &format!("sample {i}"),
                    format!("{head} bytes of sizes"),
                    sample.len(),
                ));
            }
            let mut sizes = sample[..head]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize);
            let mut at = head;
            for (c, (column, encoding)) in columns.iter_mut().zip(encodings).enumerate() {
                let size = match encoding.fixed_size() {
                    Some(s) => s as usize,
                    None => sizes.next().unwrap_or(0),
                };
                let value = at
                    .checked_add(size)
                    .and_then(|e| sample.get(at..e))
                    .ok_or_else(|| {
                        corrupt(
                            &name,
                            &format!("sample {i}, column {}", self.index.names()[c]),
                            format!("{size} bytes"),
                            sample.len() - at,
                        )
                    })?;
                column.push(value).map_err(|m| {
                    corrupt(
                        &name,
                        &format!(
                            "sample {i}, column {} ({encoding:?})",
                            self.index.names()[c]
                        ),
                        m,
                        "other bytes",
                    )
                })?;
                at += size;
            }
        }
        let mut batch = Batch::new();
        for (column, name) in columns.into_iter().zip(self.index.names()) {
            batch.push(name.clone(), column.finish()?)?;
        }
        Ok(batch)
    }
}

impl Iterator for MdsReader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        let k = self.next;
        if k >= self.index.shards().len() {
            return None;
        }
        self.next += 1;
        Some(self.read_shard(k))
    }
}

impl BatchReader for MdsReader {
    type Error = MdsError;

    fn num_batches(&self) -> Option<usize> {
        Some(self.index.shards().len())
    }
}
