//! [`recover`]: rebuilds the footer of a file whose writer was interrupted.

use super::LodtFile;
use super::error::{FormatError, Result};
use super::layout::IndexEntry;
use super::stream::StreamReader;
use super::writer::{FileSink, WriteOptions, Writer};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use zerocopy::little_endian::{U32, U64};

/// What [`recover`] did.
///
/// ```
/// let r = lodt::format::RecoverReport::default();
/// assert_eq!((r.batches, r.rewritten), (0, false));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoverReport {
    /// The number of batches the file has now.
    pub batches: usize,
    /// The bytes of those batches and the file header (everything before the footer).
    pub kept_bytes: u64,
    /// The bytes after the last complete batch that were dropped (a cut batch,
    /// a broken footer).
    pub dropped_bytes: u64,
    /// Whether the file was rewritten (false when its footer was already valid).
    pub rewritten: bool,
    /// Why the scan stopped before a valid footer, if it did.
    pub reason: Option<String>,
}

/// Counts bytes read and reports them.
struct Counting<'p, R> {
    inner: R,
    count: u64,
    total: u64,
    progress: &'p mut dyn FnMut(u64, u64),
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        (self.progress)(self.count, self.total);
        Ok(n)
    }
}

/// Rebuilds the footer of the file at `path` from its batches.
///
/// Reads the file in order, checking every checksum, and keeps the longest
/// run of complete, valid batches from the start. If the file already ends
/// with a valid footer over valid batches, nothing is written. Otherwise a
/// new file is written next to it (the kept bytes, copied, and a new footer),
/// synced and renamed over it: atomic, and readers that mapped the old file
/// keep it.
///
/// A file whose footer is valid but one of whose batches is damaged is left
/// alone with an error: recovering would drop the batches after the damage.
///
/// ```
/// use lodt::{Batch, LodTensor, format};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("cut.lodt");
/// let b = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u64; 100], vec![100], Default::default())?)])?;
/// format::save_batch(&path, &b)?;
/// let mut w = format::Writer::append(&path)?;
/// w.write_batch(&b)?;
/// w.finish()?;
/// let bytes = std::fs::read(&path)?;
/// std::fs::write(&path, &bytes[..bytes.len() - 100])?;   // a crash cut the footer
/// assert!(format::LodtFile::open(&path).is_err());
/// let report = format::recover(&path)?;
/// assert_eq!((report.batches, report.rewritten), (2, true));
/// assert_eq!(format::LodtFile::open(&path)?.num_batches(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn recover(path: impl AsRef<Path>) -> Result<RecoverReport> {
    recover_with(path, WriteOptions::default(), &mut |_, _| {})
}

/// [`recover`] with write options (whether to fsync the rewritten file),
/// calling `progress(bytes_done, bytes_total)` as it reads.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("ok.lodt");
/// lodt::format::save_batch(&path, &lodt::Batch::new())?;
/// let mut calls = 0;
/// let opts = lodt::format::WriteOptions::default();
/// let report = lodt::format::recover_with(&path, opts, &mut |_, _| calls += 1)?;
/// assert!(!report.rewritten && calls > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn recover_with(
    path: impl AsRef<Path>,
    options: WriteOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RecoverReport> {
    let path = path.as_ref();
    let ctx = || format!("reading {}", path.display());
    let file = File::open(path).map_err(|e| FormatError::io(ctx(), e))?;
    let total = file
        .metadata()
        .map_err(|e| FormatError::io(ctx(), e))?
        .len();
    let footer_ok = LodtFile::open(path).is_ok();
    let reader = Counting {
        inner: BufReader::with_capacity(1 << 20, file),
        count: 0,
        total,
        progress,
    };
    let mut stream = StreamReader::new(reader)?;
    let mut kept = stream.position();
    let mut entries = Vec::new();
    let reason = loop {
        let offset = stream.position();
        match stream.next_section() {
            Ok(Some((_, meta))) => {
                entries.push(IndexEntry {
                    offset: U64::new(offset),
                    length: U64::new(meta.section_len),
                    header_crc: U32::new(meta.header_crc),
                    table_crc: U32::new(meta.table_crc),
                });
                kept = stream.position();
            }
            Ok(None) => {
                return Ok(RecoverReport {
                    batches: entries.len(),
                    kept_bytes: kept,
                    dropped_bytes: 0,
                    rewritten: false,
                    reason: None,
                });
            }
            Err(e) => break e,
        }
    };
    if footer_ok {
        return Err(FormatError::Refused(format!(
            "the file has a valid footer, but reading it in order stops at batch {}: {reason}; \
             recovering would drop every batch after that one (run `lodt verify` for details)",
            entries.len()
        )));
    }
    drop(stream);
    let source = File::open(path).map_err(|e| FormatError::io(ctx(), e))?;
    let writer = Writer::<FileSink>::resume(path, source.take(kept), kept, entries, options)?;
    let batches = writer.batches_written();
    writer.finish()?;
    Ok(RecoverReport {
        batches,
        kept_bytes: kept,
        dropped_bytes: total.saturating_sub(kept),
        rewritten: true,
        reason: Some(reason.to_string()),
    })
}
