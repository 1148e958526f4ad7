//! [`recover`]: rebuilds the footer of a file whose writer was interrupted.

use super::LodtFile;
use super::error::{FormatError, Result};
use super::layout::IndexEntry;
use super::storage::MappedFile;
use super::stream::StreamReader;
use super::writer::{WriteOptions, footer_bytes};
use crate::atomic::{self, AtomicFile, WriterLock};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use zerocopy::little_endian::{U32, U64};

/// What [`recover`] did.
///
/// ```
/// let r = lodt::format::RecoverReport::default();
/// assert_eq!((r.batches, r.rewritten, r.in_place), (0, false, false));
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
    /// Whether it was repaired in place, because there was no room for a copy.
    pub in_place: bool,
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

/// How [`recover_with_options`] works.
///
/// ```
/// let options = lodt::format::RecoverOptions { drop_damaged: true, ..Default::default() };
/// assert!(options.write.fsync);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RecoverOptions {
    /// How the repaired file is written: whether to fsync it. Recovery keeps
    /// the file's format version and copies the kept batches as they are, so
    /// an explicit [`WriteOptions::format_version`] must be the file's (other
    /// versions are refused before anything is written), and the
    /// compression is not used.
    pub write: WriteOptions,
    /// Also repair a file whose footer is valid but one of whose batches is
    /// damaged, by keeping the batches before the damage and dropping the
    /// damaged one and every one after it. Off by default: the footer says
    /// those batches were committed, so dropping them loses data.
    pub drop_damaged: bool,
}

/// Rebuilds the footer of the file at `path` from its batches.
///
/// Reads the file in order, checking every checksum, and keeps the longest
/// run of complete, valid batches from the start. If the file already ends
/// with a valid footer over valid batches, nothing is written. Otherwise a
/// new file is written next to it (the kept bytes, copied, and a new footer),
/// synced and renamed over it: atomic, and readers that mapped the old file
/// keep it. It gets the old file's permissions and owner; a symbolic link is
/// followed (its target is repaired).
///
/// If there is no room for the copy (a full disk or quota, a file size
/// limit), the file is repaired in place instead: the new footer is written
/// at the end of the last complete batch and what followed is cut off
/// ([`RecoverReport::in_place`]).
///
/// Recovery holds the file's [`WriterLock`] throughout: it fails with
/// [`AtomicError::Locked`](crate::atomic::AtomicError::Locked) while an
/// append (or another recovery) is running, and it first deletes the file's
/// stale temporary files ([`atomic::clean_stale_temps`]).
///
/// A file whose footer is valid but one of whose batches is damaged is left
/// alone with [`FormatError::Refused`]: recovering would drop the damaged
/// batch and every batch after it, which the footer says were committed.
/// [`RecoverOptions::drop_damaged`] does that explicitly.
///
/// ```
/// use lodt::{Batch, LodTensor, format};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("cut.lodt");
/// let b = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u64; 100], vec![100], Default::default())?)])?;
/// format::save_batch(&path, &b)?;
/// let mut w = format::Writer::append(&path)?;
/// w.write(&b)?;
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
    let options = RecoverOptions {
        write: options,
        drop_damaged: false,
    };
    recover_with_options(path, options, progress)
}

/// [`recover`] with [`RecoverOptions`], calling `progress(bytes_done,
/// bytes_total)` as it reads.
///
/// ```
/// use lodt::{Batch, LodTensor, format::{self, FormatError, LodtFile, RecoverOptions}};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("damaged.lodt");
/// let b = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![7u8; 64], vec![64], Default::default())?)])?;
/// std::fs::write(&path, format::to_bytes([&b, &b], Default::default())?)?;
/// // Damage the body of batch 1 under the valid footer.
/// let body = LodtFile::open(&path)?.tensor_buffers(1, "x")?.body;
/// let mut bytes = std::fs::read(&path)?;
/// bytes[body.start] ^= 1;
/// std::fs::write(&path, &bytes)?;
/// assert!(matches!(format::recover(&path), Err(FormatError::Refused(_))));
/// let options = RecoverOptions { drop_damaged: true, ..Default::default() };
/// let report = format::recover_with_options(&path, options, &mut |_, _| {})?;
/// assert_eq!((report.batches, report.rewritten), (1, true));
/// assert_eq!(LodtFile::open(&path)?.num_batches(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn recover_with_options(
    path: impl AsRef<Path>,
    options: RecoverOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RecoverReport> {
    // The lock keeps appenders (and other recoveries) out from the scan to
    // the rename. Writing the file is not needed for a rewrite by renaming.
    let lock = WriterLock::acquire_with(path.as_ref(), false)?;
    let path = lock.path();
    atomic::clean_stale_temps(path);
    let ctx = || format!("reading {}", path.display());
    let mut file = lock
        .file()
        .try_clone()
        .map_err(|e| FormatError::io(ctx(), e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| FormatError::io(ctx(), e))?;
    let total = file
        .metadata()
        .map_err(|e| FormatError::io(ctx(), e))?
        .len();
    let footer = MappedFile::from_file(&file, path)
        .and_then(|map| LodtFile::from_storage(Arc::new(map)))
        .ok()
        .map(|f| f.num_batches());
    let reader = Counting {
        inner: BufReader::with_capacity(1 << 20, &file),
        count: 0,
        total,
        progress,
    };
    let mut stream = StreamReader::try_new(reader)?;
    let found = stream.version();
    if let Some(asked) = options.write.format_version
        && asked != found
    {
        return Err(FormatError::Unwritable(format!(
            "{} is format {found}; asked to recover it as format {asked} (recovery keeps a \
             file's version: recover with no format version, then convert the file)",
            path.display()
        )));
    }
    let mut kept = stream.position();
    let mut entries = Vec::new();
    let reason = loop {
        let offset = stream.position();
        match stream.next_section() {
            // Checked whole, as `verify` checks it (compressed batches
            // decoded): a batch kept here is one `verify` accepts.
            Ok(Some(section)) => {
                let meta = section.meta;
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
                    in_place: false,
                    reason: None,
                });
            }
            Err(e) => break e,
        }
    };
    drop(stream);
    if let Some(count) = footer
        && !options.drop_damaged
    {
        return Err(damaged_refusal(path, count, entries.len(), &reason));
    }
    let new_footer = footer_bytes(&entries, kept);
    let fsync = options.write.fsync;
    let in_place = match rewrite(&lock, &file, kept, &new_footer, fsync) {
        Ok(()) => false,
        // No room for a copy: repair in place, unless a reader may have
        // mapped the file through its valid footer (then cutting it under
        // them is not ours to do).
        Err(e) if no_room(&e) && footer.is_none() => {
            repair_in_place(path, kept, &new_footer, fsync).map_err(|undo| {
                FormatError::io(
                    format!(
                        "repairing {} in place (there was no room for a copy: {e})",
                        path.display()
                    ),
                    undo,
                )
            })?;
            true
        }
        Err(e) => return Err(e),
    };
    Ok(RecoverReport {
        batches: entries.len(),
        kept_bytes: kept,
        dropped_bytes: total.saturating_sub(kept),
        rewritten: true,
        in_place,
        reason: Some(reason.to_string()),
    })
}

/// The refusal to recover a file whose footer is valid but whose batches,
/// read in order, stop at batch `damaged` (of the footer's `count`) with
/// `reason`: recovering would drop batches the footer says were written.
fn damaged_refusal(path: &Path, count: usize, damaged: usize, reason: &FormatError) -> FormatError {
    let keep = match damaged {
        0 => "keep no batch".to_string(),
        1 => "keep batch 0".to_string(),
        n => format!("keep batches 0 to {}", n - 1),
    };
    let after = match count.saturating_sub(damaged + 1) {
        0 => String::new(),
        n => format!(" and the {n} after it"),
    };
    FormatError::Refused(format!(
        "{} has a valid footer (of {count} batches), but reading it in order stops at \
         batch {damaged}: {reason}; recovering would {keep} and drop batch {damaged}{after}, \
         which the footer says were written (`lodt verify` tells more; \
         `lodt recover --drop-damaged` does it)",
        path.display(),
    ))
}

/// Replaces the file with a copy of its first `kept` bytes and `footer`,
/// atomically, under `lock`.
fn rewrite(lock: &WriterLock, src: &File, kept: u64, footer: &[u8], fsync: bool) -> Result<()> {
    let path = lock.path();
    let mut src = src;
    src.seek(SeekFrom::Start(0))
        .map_err(|e| FormatError::io(format!("reading {}", path.display()), e))?;
    let tmp = AtomicFile::create_with(path, fsync)?;
    let ctx = format!("writing a repaired copy of {}", path.display());
    let mut out = BufWriter::with_capacity(1 << 20, tmp);
    let copied = std::io::copy(&mut src.take(kept), &mut out)
        .map_err(|e| FormatError::io(ctx.clone(), e))?;
    if copied != kept {
        return Err(FormatError::io(
            format!("copying {}", path.display()),
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("copied {copied} of {kept} bytes"),
            ),
        ));
    }
    out.write_all(footer)
        .map_err(|e| FormatError::io(ctx.clone(), e))?;
    let tmp = out
        .into_inner()
        .map_err(|e| FormatError::io(ctx, e.into_error()))?;
    tmp.commit_locked(lock)?;
    Ok(())
}

/// Whether `e` says the disk, the quota or the file size limit is full.
fn no_room(e: &FormatError) -> bool {
    use std::io::ErrorKind::{FileTooLarge, QuotaExceeded, StorageFull};
    let kind = match e {
        FormatError::Io { source, .. } => source.kind(),
        FormatError::Atomic(a) => match a.io_kind() {
            Some(kind) => kind,
            None => return false,
        },
        _ => return false,
    };
    matches!(kind, StorageFull | QuotaExceeded | FileTooLarge)
}

/// Writes `footer` at `kept` and cuts the file there (the caller holds its lock).
fn repair_in_place(path: &Path, kept: u64, footer: &[u8], fsync: bool) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(path)?;
    // Over the garbage first (its blocks are already allocated), then cut:
    // a crash in between leaves a file `recover` still repairs.
    file.seek(SeekFrom::Start(kept))?;
    file.write_all(footer)?;
    file.set_len(kept + footer.len() as u64)?;
    if fsync {
        file.sync_all()?;
    }
    Ok(())
}
