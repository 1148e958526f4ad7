//! [`FileSink`]: the file a [`Writer`](super::Writer) writes, and what
//! `finish` does with it (rename a new file into place; keep or roll back an
//! append).

use super::super::error::{FormatError, Result};
#[cfg(doc)]
use super::Writer;
use crate::atomic::{AtomicFile, WriterLock};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

/// The output of a file [`Writer`]: a buffered file and what `finish` does
/// with it.
///
/// - For a new file ([`Writer::create`]): an [`AtomicFile`], renamed over
///   the destination by `finish`. Dropped uncommitted, the temporary file is
///   deleted and the destination is untouched.
/// - For an append ([`Writer::append`]): the file itself, under its
///   [`WriterLock`](crate::atomic::WriterLock). If a write fails, or if the
///   sink is dropped before `finish` committed the new footer, the append is
///   rolled back: the file is cut back to its length before the append and
///   its old footer is written back, so it is byte for byte what it was.
///
/// ```
/// use lodt::format::{FileSink, Writer};
/// let dir = tempfile::tempdir()?;
/// let mut w: Writer<FileSink> = Writer::create(dir.path().join("x.lodt"), Default::default())?;
/// let _sink: FileSink = w.finish()?; // committed: renamed into place
/// assert!(dir.path().join("x.lodt").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct FileSink {
    pub(super) out: Out,
    pub(super) fsync: bool,
}

#[derive(Debug)]
pub(super) enum Out {
    /// A new file; `None` once committed.
    New(Option<AtomicFile>),
    /// Appending in place.
    Append(Append),
}

/// An append in progress, and what rolling it back needs.
#[derive(Debug)]
pub(super) struct Append {
    /// The file, a duplicate of the lock's descriptor; `None` once committed
    /// or rolled back.
    pub(super) file: Option<File>,
    /// The file's writer lock, held until the append is committed or rolled back.
    pub(super) lock: Option<WriterLock>,
    pub(super) path: PathBuf,
    /// Where the old footer starts (and the new batches).
    pub(super) footer_offset: u64,
    /// The old footer and trailer: the bytes from `footer_offset` to the old end.
    pub(super) old_footer: Vec<u8>,
    pub(super) fsync: bool,
}

impl Append {
    /// Undoes the append: drops unwritten bytes, cuts the file back to its
    /// old length and writes the old footer back. A no-op once committed or
    /// rolled back.
    fn roll_back(&mut self) -> std::io::Result<()> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        let old_len = self.footer_offset + self.old_footer.len() as u64;
        // Cut first: it frees space, which a full disk needs.
        file.set_len(old_len)?;
        file.seek(SeekFrom::Start(self.footer_offset))?;
        file.write_all(&self.old_footer)?;
        if self.fsync {
            file.sync_all()?;
        }
        self.lock = None;
        Ok(())
    }

    /// Rolls back after `e` and says so in the error.
    fn fail(&mut self, e: std::io::Error) -> std::io::Error {
        let kind = e.kind();
        let path = self.path.display().to_string();
        match self.roll_back() {
            Ok(()) => std::io::Error::new(
                kind,
                format!("{e}; the append to {path} was rolled back: the file is as it was before"),
            ),
            Err(undo) => std::io::Error::new(
                kind,
                format!(
                    "{e}; rolling back the append to {path} failed too ({undo}): run `lodt recover` on it"
                ),
            ),
        }
    }

    fn out(&mut self) -> std::io::Result<&mut File> {
        self.file.as_mut().ok_or_else(|| {
            std::io::Error::other(format!(
                "the append to {} is over (committed or rolled back)",
                self.path.display()
            ))
        })
    }
}

impl Drop for Append {
    fn drop(&mut self) {
        // Not committed: undo (best effort; `recover` repairs what this cannot).
        let _ = self.roll_back();
    }
}

/// The error of a finished (committed) new-file sink.
fn finished() -> std::io::Error {
    std::io::Error::other("the file is finished")
}

impl Write for FileSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match &mut self.out {
            Out::New(w) => w.as_mut().ok_or_else(finished)?.write_all(buf),
            Out::Append(a) => match a.out()?.write_all(buf) {
                Ok(()) => Ok(()),
                Err(e) => Err(a.fail(e)),
            },
        }
    }
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        match &mut self.out {
            Out::New(w) => w.as_mut().ok_or_else(finished)?.write_vectored(bufs),
            Out::Append(a) => match a.out()?.write_vectored(bufs) {
                // A file that takes nothing of a non-empty write is full (or
                // broken): roll back now, as for any other failed write.
                Ok(0) if bufs.iter().any(|b| !b.is_empty()) => Err(a.fail(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "the file took no bytes",
                ))),
                Ok(n) => Ok(n),
                // One system call, which a signal may interrupt: the caller
                // retries it, and the append goes on.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(e),
                Err(e) => Err(a.fail(e)),
            },
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.out {
            Out::New(w) => w.as_mut().ok_or_else(finished)?.flush(),
            Out::Append(a) => match a.out()?.flush() {
                Ok(()) => Ok(()),
                Err(e) => Err(a.fail(e)),
            },
        }
    }
}

impl FileSink {
    fn path(&self) -> PathBuf {
        match &self.out {
            Out::New(Some(w)) => w.path().to_path_buf(),
            Out::New(None) => PathBuf::new(),
            Out::Append(a) => a.path.clone(),
        }
    }

    /// Flushes and, with `fsync`, syncs the data to disk (appending only).
    pub(super) fn sync(&mut self) -> Result<()> {
        let ctx = format!("writing {}", self.path().display());
        self.flush().map_err(|e| FormatError::io(ctx.clone(), e))?;
        let fsync = self.fsync;
        if let Out::Append(a) = &mut self.out
            && fsync
        {
            let r = a.out().and_then(|w| w.sync_all());
            if let Err(e) = r {
                return Err(FormatError::io(ctx, a.fail(e)));
            }
        }
        Ok(())
    }

    /// Makes the written file the destination: renames a new file into
    /// place, or ends an append (the file is `end` bytes long).
    pub(super) fn commit(&mut self, end: u64) -> Result<()> {
        match &mut self.out {
            Out::New(w) => {
                let atomic = w
                    .take()
                    .ok_or_else(|| FormatError::io("committing", finished()))?;
                atomic.commit()?;
            }
            Out::Append(_) => {
                self.sync()?;
                let Out::Append(a) = &mut self.out else {
                    return Ok(());
                };
                // An append never makes the file shorter; drop stale bytes if
                // it somehow would have.
                let r = a.out().and_then(|file| {
                    if file.metadata()?.len() > end {
                        file.set_len(end)?;
                    }
                    Ok(())
                });
                if let Err(e) = r {
                    let e = a.fail(e);
                    return Err(FormatError::io(
                        format!("appending to {}", a.path.display()),
                        e,
                    ));
                }
                // Committed: nothing to roll back, and the lock is released.
                a.file = None;
                a.lock = None;
            }
        }
        Ok(())
    }
}
