//! A directory of Parquet shards as a convert output
//! ([`Layout::ParquetFiles`]): `part-00000.parquet`, `part-00001.parquet`,
//! … of about [`ConvertOptions::shard_bytes`] each, written by one
//! [`ParquetWriter`] (the single-file writer's column mapping, with one
//! schema and one metadata map checked across the shards) into a temporary
//! directory that is renamed into place when the last shard is finished
//! ([`AtomicDir`]).

use super::*;
use crate::arrow::ArrowWriteOptions;
use crate::arrow::parquet::ParquetWriter;
use crate::atomic::AtomicDir;
use std::path::PathBuf;

/// The most shards a directory takes: their names (five digits) sort in
/// the order they were written up to here, as [`Layout::ParquetFiles`]
/// reads them.
pub(super) const MAX_SHARDS: usize = 100_000;

/// The name of shard `index`: `part-00000.parquet`.
pub(super) fn shard_name(index: usize) -> String {
    format!("part-{index:05}.parquet")
}

/// The writer of a directory of Parquet shards.
pub(super) struct ParquetDirWriter {
    dir: Option<AtomicDir>,
    writer: ParquetWriter<BufWriter<File>>,
    /// The path of the shard being written.
    current: PathBuf,
    /// The shards opened so far, the current one included.
    shards: usize,
    shard_bytes: u64,
}

/// Creates the writer of a new directory of Parquet shards at `path`,
/// refused when `path` exists and is not an empty directory.
pub(super) fn create(
    path: &Path,
    options: &ConvertOptions,
) -> Result<BoxBatchWriter<'static, ConvertError>, ConvertError> {
    let shard_bytes = options
        .shard_bytes
        .unwrap_or(crate::dataset::DEFAULT_SHARD_BYTES);
    if shard_bytes == 0 {
        return Err(ConvertError::Unsupported(
            "the shard size must be at least 1 byte".into(),
        ));
    }
    let mut write = ArrowWriteOptions::default()
        .with_arrow(options.arrow_write_options())
        .with_metadata_policy(options.metadata_policy);
    write.compression = options.compression;
    let dir = AtomicDir::create(path)?;
    let current = dir.temp_path().join(shard_name(0));
    let writer = ParquetWriter::try_new(new_shard(&current)?, &write)?;
    Ok(Box::new(ParquetDirWriter {
        dir: Some(dir),
        writer,
        current,
        shards: 1,
        shard_bytes,
    }))
}

/// A new shard file, buffered.
fn new_shard(path: &Path) -> Result<BufWriter<File>, ConvertError> {
    let file = File::create_new(path).map_err(|source| ConvertError::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(BufWriter::new(file))
}

/// Flushes and syncs a finished shard.
fn close_shard(sink: BufWriter<File>, path: &Path) -> Result<(), ConvertError> {
    let io = |source| ConvertError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = sink.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)
}

impl ParquetDirWriter {
    fn dir(&self) -> Result<&AtomicDir, ConvertError> {
        self.dir.as_ref().ok_or_else(|| {
            ConvertError::Unsupported(
                "the Parquet directory writer is finished: it takes no more batches".into(),
            )
        })
    }
}

impl BatchWriter for ParquetDirWriter {
    type Error = ConvertError;
    type Output = ();

    /// Writes `batch` into the current shard, after starting a new one if
    /// the current one holds [`ConvertOptions::shard_bytes`] or more: a
    /// shard ends at a batch boundary, at most one batch past the target.
    fn write(&mut self, batch: &Batch) -> Result<(), ConvertError> {
        let tmp = self.dir()?.temp_path().to_path_buf();
        if self.writer.bytes_written() >= self.shard_bytes {
            if self.shards >= MAX_SHARDS {
                return Err(ConvertError::Unsupported(format!(
                    "a directory of Parquet files takes at most {MAX_SHARDS} shards (part-00000.parquet to part-{:05}.parquet); give a larger shard size than {} bytes",
                    MAX_SHARDS - 1,
                    self.shard_bytes
                )));
            }
            let next = tmp.join(shard_name(self.shards));
            let done = self.writer.finish_file(new_shard(&next)?)?;
            close_shard(done, &self.current)?;
            self.current = next;
            self.shards += 1;
        }
        Ok(self.writer.write(batch)?)
    }

    fn stats(&self) -> WriteStats {
        self.writer.stats()
    }

    /// Finishes the last shard and renames the directory into place.
    fn finish(&mut self) -> Result<(), ConvertError> {
        self.dir()?;
        let last = self.writer.finish()?;
        close_shard(last, &self.current)?;
        if let Some(dir) = self.dir.take() {
            dir.commit()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LodTensor;

    fn batch(first: i64, rows: usize) -> Batch {
        let values: Vec<i64> = (first..first + rows as i64).collect();
        let t = LodTensor::from_vec(values, vec![rows], Default::default()).unwrap();
        Batch::try_from_tensors([("x", t)]).unwrap()
    }

    #[test]
    fn shards_are_named_in_order_and_start_at_a_batch_boundary() {
        assert_eq!(shard_name(0), "part-00000.parquet");
        assert_eq!(shard_name(12), "part-00012.parquet");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let options = ConvertOptions {
            shard_bytes: Some(1),
            ..Default::default()
        };
        let mut writer = create(&out, &options).unwrap();
        for k in 0..3 {
            writer.write(&batch(k * 10, 4)).unwrap();
        }
        assert!(!out.exists()); // nothing in place before the finish
        writer.finish().unwrap();
        assert!(writer.write(&batch(0, 1)).is_err());
        let names: Vec<String> = Layout::ParquetFiles
            .files(&out)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "part-00000.parquet",
                "part-00001.parquet",
                "part-00002.parquet"
            ]
        );
        // Only the shards: no temporary directory is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_zero_shard_size_is_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let options = ConvertOptions {
            shard_bytes: Some(0),
            ..Default::default()
        };
        let err = create(&dir.path().join("out"), &options).err().unwrap();
        assert!(err.to_string().contains("at least 1 byte"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
