//! Safe writes: every file lodt writes replaces its destination atomically,
//! and one writer at a time changes a file.
//!
//! - [`AtomicFile`]: a temporary file beside the (symlink-resolved)
//!   destination, locked while it is written, given the old file's
//!   permissions and owner, synced, then renamed over the destination (and
//!   the directory synced). Until [`AtomicFile::commit`], the destination is
//!   untouched; dropped uncommitted, the temporary file is deleted.
//! - [`AtomicDir`]: the same for a directory of files (shards written
//!   together): a temporary directory beside the destination, renamed to it
//!   when every file is in it.
//! - [`WriterLock`]: the advisory lock a writer holds on the file it changes
//!   (an append, a recovery, the rename of a replacement), so that a second
//!   writer is refused with [`AtomicError::Locked`] instead of losing data.
//! - [`ensure_distinct`]: refuses to write a file over the one being read
//!   (same device and inode: through a symlink or a hard link too).
//! - [`clean_stale_temps`]: deletes the temporary files of a destination
//!   whose writer is gone (killed before it could delete them).
//!
//! The lock is `flock`-style ([`File::try_lock`]) on the data file's inode.
//! A writer opens the file, locks it without waiting, then checks that the
//! path still names the inode it locked (a recovery or a replacement may have
//! renamed a new file over it meanwhile; then it starts again with the new
//! one). Whoever renames a new file over a path holds the lock of the inode
//! the path named, so a locked inode is never replaced under its writer.
//! Readers take no lock. `spec/FORMAT.md` (section 9) states the protocol.
//!
//! ```
//! use std::io::Write;
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("out.bin");
//! std::fs::write(&path, b"old")?;
//! let mut file = lodt::atomic::AtomicFile::create(&path)?;
//! file.write_all(b"new")?;
//! assert_eq!(std::fs::read(&path)?, b"old"); // untouched until the commit
//! file.commit()?;
//! assert_eq!(std::fs::read(&path)?, b"new");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::{self, File, Metadata, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The longest part of a destination's name kept in its temporary files'
/// names (in bytes), so they stay under the usual 255-byte name limit.
const NAME_KEEP: usize = 200;

/// The most symbolic links followed when resolving a destination.
const MAX_LINKS: usize = 40;

/// An error of a safe write.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("a.lodt");
/// std::fs::write(&path, b"x")?;
/// let err = lodt::atomic::ensure_distinct(&path, &path).unwrap_err();
/// assert!(matches!(err, lodt::atomic::AtomicError::SameFile { .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AtomicError {
    /// An operating-system error, with what was being done to which path.
    #[error("I/O error {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`"creating a temporary file for"`, ...).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Another process holds the file's writer lock: it is appending to the
    /// file, recovering it, or renaming a new version over it.
    #[error(
        "{} is being written by another process (it holds the file's writer lock); try again when that writer has finished",
        path.display()
    )]
    Locked {
        /// The file (symlinks resolved).
        path: PathBuf,
    },
    /// The output is the input (the same device and inode), so writing it
    /// would destroy what is being read.
    #[error(
        "refusing to write {}: it is the same file as the input {} (same device and inode); write to another path",
        output.display(),
        input.display()
    )]
    SameFile {
        /// The input path, as given.
        input: PathBuf,
        /// The output path, as given.
        output: PathBuf,
    },
    /// A directory's destination exists and is not an empty directory, so
    /// a directory written beside it cannot take its place
    /// ([`AtomicDir`]).
    #[error(
        "refusing to write the directory {}: it exists, and is {found}; remove it or write to a new path",
        path.display()
    )]
    Occupied {
        /// The destination (symlinks resolved).
        path: PathBuf,
        /// What is there.
        found: &'static str,
    },
    /// The destination exists and is not a regular file (a directory, a
    /// device, a pipe), so it cannot be replaced by one.
    #[error("refusing to replace {}: expected a regular file, found {found}", path.display())]
    NotAFile {
        /// The destination (symlinks resolved).
        path: PathBuf,
        /// What it is.
        found: &'static str,
    },
}

impl AtomicError {
    fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        AtomicError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    /// The kind of the underlying I/O error, if the error is one.
    ///
    /// ```
    /// let err = lodt::atomic::WriterLock::acquire("/no/such/file.lodt").unwrap_err();
    /// assert_eq!(err.io_kind(), Some(std::io::ErrorKind::NotFound));
    /// ```
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            AtomicError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// A `Result` whose error is [`AtomicError`].
pub type Result<T, E = AtomicError> = std::result::Result<T, E>;

/// The path `path` leads to after following symbolic links (the link's
/// target, even when that does not exist yet). Other paths are returned as
/// they are.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let target = dir.path().join("data.lodt");
/// let link = dir.path().join("link.lodt");
/// std::os::unix::fs::symlink("data.lodt", &link)?;
/// assert_eq!(lodt::atomic::resolve(&link)?, target);
/// assert_eq!(lodt::atomic::resolve(&target)?, target);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn resolve(path: impl AsRef<Path>) -> Result<PathBuf> {
    let original = path.as_ref();
    let mut path = original.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&path)
                    .map_err(|e| AtomicError::io("reading the symbolic link", &path, e))?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(path),
            Err(e) => return Err(AtomicError::io("inspecting", &path, e)),
        }
    }
    Err(AtomicError::io(
        "resolving",
        original,
        io::Error::other(format!("more than {MAX_LINKS} levels of symbolic links")),
    ))
}

/// Whether two metadata describe the same file (device and inode).
#[cfg(unix)]
fn same_inode(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Whether `path` still names the file open as `file` (on Unix; elsewhere
/// there is no inode to compare, and the answer is whether it exists).
fn names(path: &Path, file: &File) -> bool {
    #[cfg(unix)]
    {
        match (fs::metadata(path), file.metadata()) {
            (Ok(a), Ok(b)) => same_inode(&a, &b),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        path.exists()
    }
}

/// Whether `a` and `b` are the same existing file (the same device and
/// inode, so a symlink to a file or a hard link of it is the file). A path
/// that does not exist is no file.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let a = dir.path().join("a");
/// std::fs::write(&a, b"x")?;
/// std::fs::hard_link(&a, dir.path().join("b"))?;
/// assert!(lodt::atomic::same_file(&a, dir.path().join("b"))?);
/// assert!(!lodt::atomic::same_file(&a, dir.path().join("c"))?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn same_file(a: impl AsRef<Path>, b: impl AsRef<Path>) -> Result<bool> {
    let stat = |p: &Path| match fs::metadata(p) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(AtomicError::io("inspecting", p, e)),
    };
    let (a, b) = (a.as_ref(), b.as_ref());
    Ok(match (stat(a)?, stat(b)?) {
        (Some(ma), Some(mb)) => {
            #[cfg(unix)]
            {
                same_inode(&ma, &mb)
            }
            #[cfg(not(unix))]
            {
                let _ = (ma, mb);
                fs::canonicalize(a).ok() == fs::canonicalize(b).ok()
            }
        }
        _ => false,
    })
}

/// Refuses (with [`AtomicError::SameFile`]) to write `output` when it is
/// the file `input` (see [`same_file`]). Call it before opening anything for
/// writing.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let input = dir.path().join("in.parquet");
/// std::fs::write(&input, b"x")?;
/// lodt::atomic::ensure_distinct(&input, dir.path().join("out.parquet"))?;
/// std::os::unix::fs::symlink(&input, dir.path().join("link.parquet"))?;
/// assert!(lodt::atomic::ensure_distinct(&input, dir.path().join("link.parquet")).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn ensure_distinct(input: impl AsRef<Path>, output: impl AsRef<Path>) -> Result<()> {
    let (input, output) = (input.as_ref(), output.as_ref());
    if same_file(input, output)? {
        return Err(AtomicError::SameFile {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
        });
    }
    Ok(())
}

/// What a file that is not a regular one is, for messages.
fn kind_name(m: &Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a special file (a device, a pipe or a socket)"
    }
}

/// How long [`WriterLock::acquire`] keeps trying a held lock before it reports
/// [`AtomicError::Locked`]: long enough to outlast a lock that a child process
/// inherited for the instant between its fork and its exec, short enough that
/// a second writer learns at once, as people count, that the file is busy.
pub const LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The exclusive advisory lock of a file's writer (see the [module
/// docs](self)): held while appending to the file, recovering it, or
/// renaming a new version over it; released when dropped (or when the
/// process dies). Readers take no lock.
///
/// ```
/// use lodt::atomic::{AtomicError, WriterLock};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("log.lodt");
/// std::fs::write(&path, b"x")?;
/// let lock = WriterLock::acquire(&path)?;
/// assert!(lodt::atomic::is_locked(&path));
/// assert!(matches!(WriterLock::acquire(&path), Err(AtomicError::Locked { .. })));
/// drop(lock);
/// assert!(!lodt::atomic::is_locked(&path));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct WriterLock {
    file: File,
    path: PathBuf,
}

impl WriterLock {
    /// Locks the existing regular file at `path` (symlinks resolved), opened
    /// for reading and writing: [`AtomicError::Locked`] if another writer
    /// holds its lock for longer than [`LOCK_GRACE`].
    ///
    /// See the [type-level example](WriterLock).
    pub fn acquire(path: impl AsRef<Path>) -> Result<Self> {
        Self::acquire_with(path.as_ref(), true)
    }

    /// [`WriterLock::acquire`], with the file opened for reading only when
    /// `write` is false (or when writing it is not permitted).
    pub(crate) fn acquire_with(path: &Path, write: bool) -> Result<Self> {
        let path = resolve(path)?;
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(1);
        // A writer that renames a new file over `path` holds the lock of the
        // inode `path` named; retry a few times if that happens meanwhile.
        let mut renamed = 0;
        while renamed < 16 {
            // Read-write when permitted even if only reading: some file
            // systems (NFS) grant exclusive locks to writers only.
            let file = match OpenOptions::new().read(true).write(true).open(&path) {
                Err(e) if !write && e.kind() == io::ErrorKind::PermissionDenied => {
                    File::open(&path)
                }
                r => r,
            }
            .map_err(|e| AtomicError::io("opening", &path, e))?;
            let meta = file
                .metadata()
                .map_err(|e| AtomicError::io("inspecting", &path, e))?;
            if !meta.is_file() {
                return Err(AtomicError::NotAFile {
                    found: kind_name(&meta),
                    path,
                });
            }
            match file.try_lock() {
                Ok(()) => {}
                // A lock can also be held for an instant by a child process
                // that another thread of this process is starting: it
                // inherits every descriptor (and so the lock of their open
                // file) until it execs. Wait that out, briefly.
                Err(TryLockError::WouldBlock) if start.elapsed() < LOCK_GRACE => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(50));
                    continue;
                }
                Err(TryLockError::WouldBlock) => return Err(AtomicError::Locked { path }),
                Err(TryLockError::Error(e)) => return Err(AtomicError::io("locking", &path, e)),
            }
            if names(&path, &file) {
                return Ok(WriterLock { file, path });
            }
            renamed += 1;
        }
        Err(AtomicError::Locked { path })
    }

    /// The locked file's path (symlinks resolved).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("x");
    /// # std::fs::write(&path, b"x")?;
    /// let lock = lodt::atomic::WriterLock::acquire(&path)?;
    /// assert_eq!(lock.path(), path);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The locked file, open for reading (and for writing when acquired
    /// with [`WriterLock::acquire`]). Duplicates of it
    /// ([`File::try_clone`]) share the lock.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("x");
    /// # std::fs::write(&path, b"abc")?;
    /// let lock = lodt::atomic::WriterLock::acquire(&path)?;
    /// assert_eq!(lock.file().metadata()?.len(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Locks the file at `dest` if there is a regular file there that can be
    /// opened; `None` if there is none (nothing to protect).
    fn of_existing(dest: &Path) -> Result<Option<Self>> {
        match fs::symlink_metadata(dest) {
            Ok(m) if m.is_file() => {}
            _ => return Ok(None),
        }
        match Self::acquire_with(dest, false) {
            Ok(lock) => Ok(Some(lock)),
            Err(AtomicError::Io { source, .. })
                if matches!(
                    source.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// Whether a writer holds the lock of the file at `path` (a probe: it takes
/// and releases a shared lock; false when the file cannot be opened).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("x.lodt");
/// lodt::format::save_batch(&path, &lodt::Batch::new())?;
/// assert!(!lodt::atomic::is_locked(&path));
/// let mut appending = lodt::format::Writer::append(&path)?;
/// assert!(lodt::atomic::is_locked(&path));
/// appending.finish()?;
/// assert!(!lodt::atomic::is_locked(&path));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn is_locked(path: impl AsRef<Path>) -> bool {
    let Ok(path) = resolve(path) else {
        return false;
    };
    let Ok(file) = File::open(&path) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(_)) => false,
    }
}

/// The directory holding `path` (`.` for a bare name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The part of `dest`'s name that its temporary files' names start with.
fn temp_stem(dest: &Path) -> String {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "lodt".into());
    let mut end = name.len().min(NAME_KEEP);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_owned()
}

/// The name of a temporary file for `dest`: `.NAME.PID.N.tmp`.
fn temp_name(dest: &Path, pid: u32, n: u64) -> String {
    format!(".{}.{pid}.{n}.tmp", temp_stem(dest))
}

/// Whether `entry` is a name [`temp_name`] gives for `dest`.
fn is_temp_of(entry: &str, dest: &Path) -> bool {
    let prefix = format!(".{}.", temp_stem(dest));
    let Some(rest) = entry
        .strip_prefix(&prefix)
        .and_then(|r| r.strip_suffix(".tmp"))
    else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    matches!(rest.split_once('.'), Some((pid, n)) if digits(pid) && digits(n))
}

/// Deletes the temporary files of `dest` (named as [`AtomicFile`] names
/// them, beside the symlink-resolved `dest`), and the temporary directories
/// of an [`AtomicDir`] with what is in them, whose writer is gone: those
/// whose lock can be taken. A live writer holds the lock of its temporary
/// file (or directory) from the moment it exists, so it is never deleted.
/// Returns how many were deleted; errors are ignored (it is a best-effort
/// cleanup).
///
/// [`AtomicFile::create`], [`AtomicDir::create`],
/// [`Writer::append`](crate::format::Writer::append)
/// and [`recover`](crate::format::recover) call it for their destination.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let dest = dir.path().join("data.lodt");
/// // What a writer killed with SIGKILL leaves behind:
/// std::fs::write(dir.path().join(".data.lodt.4242.0.tmp"), b"partial")?;
/// std::fs::write(dir.path().join("unrelated.tmp"), b"keep")?;
/// std::fs::create_dir(dir.path().join(".data.lodt.4242.1.tmp"))?; // an AtomicDir's
/// std::fs::write(dir.path().join(".data.lodt.4242.1.tmp/part-0"), b"partial")?;
/// let live = lodt::atomic::AtomicDir::create(&dest)?; // cleans first, then holds its lock
/// assert_eq!(lodt::atomic::clean_stale_temps(&dest), 0); // the live one is kept
/// assert!(live.temp_path().is_dir());
/// assert_eq!(std::fs::read_dir(dir.path())?.count(), 2); // unrelated.tmp and the live one
/// drop(live);
/// std::fs::write(dir.path().join(".data.lodt.4242.2.tmp"), b"partial")?;
/// assert_eq!(lodt::atomic::clean_stale_temps(&dest), 1);
/// assert!(dir.path().join("unrelated.tmp").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn clean_stale_temps(dest: impl AsRef<Path>) -> usize {
    let Ok(dest) = resolve(dest) else {
        return 0;
    };
    let Ok(entries) = fs::read_dir(parent_dir(&dest)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| is_temp_of(n, &dest)) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() && !meta.is_dir() {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        // A live writer holds this lock; a dead one's was released by the
        // kernel. Check that the name still is the file (or directory)
        // locked before deleting it.
        if file.try_lock().is_ok() && names(&path, &file) {
            let gone = if meta.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            removed += usize::from(gone.is_ok());
        }
    }
    removed
}

/// Syncs the directory holding `path`, so a rename in it is durable.
fn sync_dir(path: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(parent_dir(path)) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Gives `file` the owner (where permitted) and permissions of `old`.
fn copy_access(file: &File, old: &Metadata, tmp: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // Changing the owner needs privileges: without them, keep at least
        // the group if ours may set it, else leave both (as documented).
        if std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid())).is_err() {
            let _ = std::os::unix::fs::fchown(file, None, Some(old.gid()));
        }
        // After the owner: chown clears set-user-ID and set-group-ID bits.
        file.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))
            .map_err(|e| AtomicError::io("setting the permissions of", tmp, e))
    }
    #[cfg(not(unix))]
    {
        file.set_permissions(old.permissions())
            .map_err(|e| AtomicError::io("setting the permissions of", tmp, e))
    }
}

/// A file written beside its destination and renamed over it by
/// [`AtomicFile::commit`]: the destination is replaced whole or not at all.
///
/// [`AtomicFile::create`] follows symbolic links (the link's target is
/// replaced and the link kept), gives the temporary file the permissions
/// and owner (where permitted) of the file it replaces, deletes stale
/// temporary files of the destination ([`clean_stale_temps`]), and holds the
/// temporary file's lock while it is written. [`AtomicFile::commit`] syncs
/// it, takes the destination's [`WriterLock`] (refusing to replace a file
/// that another writer is changing), renames it over the destination and
/// syncs the directory. Dropped without a commit, it deletes the temporary
/// file.
///
/// See the [module example](self).
#[derive(Debug)]
pub struct AtomicFile {
    file: File,
    tmp: PathBuf,
    dest: PathBuf,
    fsync: bool,
    committed: bool,
}

impl AtomicFile {
    /// Starts replacing `path` (synced to disk before the rename).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let file = lodt::atomic::AtomicFile::create(dir.path().join("x.arrow"))?;
    /// drop(file); // not committed: nothing is left behind
    /// assert_eq!(std::fs::read_dir(dir.path())?.count(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_with(path, true)
    }

    /// [`AtomicFile::create`], syncing the file and directory to disk on
    /// commit only if `fsync` (a crash of the machine, unlike one of the
    /// process, may then leave an empty file).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use std::io::Write;
    /// let mut file = lodt::atomic::AtomicFile::create_with(dir.path().join("x"), false)?;
    /// file.write_all(b"quick")?;
    /// file.commit()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with(path: impl AsRef<Path>, fsync: bool) -> Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dest = resolve(path)?;
        let old = match fs::metadata(&dest) {
            Ok(m) if m.is_file() => Some(m),
            Ok(m) => {
                return Err(AtomicError::NotAFile {
                    found: kind_name(&m),
                    path: dest,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(AtomicError::io("inspecting", &dest, e)),
        };
        clean_stale_temps(&dest);
        let dir = parent_dir(&dest);
        let mut last = None;
        for _ in 0..64 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(temp_name(&dest, std::process::id(), n));
            let mut options = OpenOptions::new();
            options.read(true).write(true).create_new(true);
            #[cfg(unix)]
            if old.is_some() {
                // Private until it has the old file's permissions.
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            }
            let file = match options.open(&tmp) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    last = Some(e);
                    continue;
                }
                Err(e) => {
                    return Err(AtomicError::io("creating a temporary file for", &dest, e));
                }
            };
            // A cleaner may have taken the lock (and deleted the file)
            // between the creation and here: then use another name.
            if file.try_lock().is_err() || !names(&tmp, &file) {
                continue;
            }
            let atomic = AtomicFile {
                file,
                tmp,
                dest,
                fsync,
                committed: false,
            };
            if let Some(old) = &old {
                copy_access(&atomic.file, old, &atomic.tmp)?;
            }
            return Ok(atomic);
        }
        Err(AtomicError::io(
            "creating a temporary file for",
            &dest,
            last.unwrap_or_else(|| io::Error::other("no free temporary name")),
        ))
    }

    /// The destination (symlinks resolved).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let file = lodt::atomic::AtomicFile::create(dir.path().join("x"))?;
    /// assert_eq!(file.path(), dir.path().join("x"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// The temporary file being written.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let file = lodt::atomic::AtomicFile::create(dir.path().join("x"))?;
    /// assert!(file.temp_path().file_name().unwrap().to_str().unwrap().starts_with(".x."));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs the file and renames it over the destination, under the
    /// destination's [`WriterLock`] ([`AtomicError::Locked`] if another
    /// writer holds it: the destination is then untouched).
    ///
    /// See the [module example](self).
    pub fn commit(self) -> Result<()> {
        self.commit_inner(None)
    }

    /// [`AtomicFile::commit`] by the holder of the destination's lock.
    pub(crate) fn commit_locked(self, lock: &WriterLock) -> Result<()> {
        self.commit_inner(Some(lock))
    }

    fn commit_inner(mut self, held: Option<&WriterLock>) -> Result<()> {
        self.file
            .flush()
            .map_err(|e| AtomicError::io("writing", &self.tmp, e))?;
        if self.fsync {
            self.file
                .sync_all()
                .map_err(|e| AtomicError::io("syncing", &self.tmp, e))?;
        }
        let _lock = match held {
            Some(_) => None,
            None => WriterLock::of_existing(&self.dest)?,
        };
        fs::rename(&self.tmp, &self.dest)
            .map_err(|e| AtomicError::io("renaming the temporary file over", &self.dest, e))?;
        self.committed = true;
        if self.fsync {
            sync_dir(&self.dest);
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.file.write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// A directory written beside its destination and renamed into place by
/// [`AtomicDir::commit`]: the destination appears whole or not at all.
///
/// [`AtomicDir::create`] follows symbolic links as [`AtomicFile::create`]
/// does and refuses a destination that exists, unless it is an empty
/// directory ([`AtomicError::Occupied`]); the files are written into
/// [`AtomicDir::temp_path`], a new directory named as [`AtomicFile`] names
/// its temporary files, locked while it is written (so that
/// [`clean_stale_temps`] deletes it only once its writer is gone).
/// [`AtomicDir::commit`] syncs the directory, renames
/// it to the destination (over an empty directory, atomically; a
/// destination that gained files meanwhile is an error and stays as it is)
/// and syncs the parent. Dropped without a commit, it deletes the temporary
/// directory and what is in it.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let dest = dir.path().join("shards");
/// let out = lodt::atomic::AtomicDir::create(&dest)?;
/// std::fs::write(out.temp_path().join("part-0"), b"rows")?;
/// assert!(!dest.exists()); // nothing until the commit
/// out.commit()?;
/// assert_eq!(std::fs::read(dest.join("part-0"))?, b"rows");
/// let err = lodt::atomic::AtomicDir::create(&dest).unwrap_err(); // not empty now
/// assert!(matches!(err, lodt::atomic::AtomicError::Occupied { .. }), "{err}");
/// let out = lodt::atomic::AtomicDir::create(dir.path().join("other"))?;
/// std::fs::write(out.temp_path().join("part-0"), b"rows")?;
/// drop(out); // not committed: nothing is left behind
/// assert_eq!(std::fs::read_dir(dir.path())?.count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AtomicDir {
    /// The temporary directory, opened and locked while it is written.
    lock: File,
    tmp: PathBuf,
    dest: PathBuf,
    fsync: bool,
    committed: bool,
}

impl AtomicDir {
    /// Starts writing the directory `path` (synced to disk before the
    /// rename).
    ///
    /// See the [type-level example](AtomicDir).
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_with(path, true)
    }

    /// [`AtomicDir::create`], syncing the directory and its parent on
    /// commit only if `fsync` (the files in it are the caller's to sync).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let out = lodt::atomic::AtomicDir::create_with(dir.path().join("d"), false)?;
    /// out.commit()?;
    /// assert!(dir.path().join("d").is_dir());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with(path: impl AsRef<Path>, fsync: bool) -> Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dest = resolve(path)?;
        check_vacant(&dest)?;
        clean_stale_temps(&dest);
        let parent = parent_dir(&dest);
        let mut last = None;
        for _ in 0..64 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = parent.join(temp_name(&dest, std::process::id(), n));
            match fs::create_dir(&tmp) {
                Ok(()) => {
                    let lock = File::open(&tmp).map_err(|e| {
                        AtomicError::io("opening the temporary directory of", &dest, e)
                    })?;
                    // A cleaner may have taken the lock (and deleted the
                    // directory) between the creation and here: then use
                    // another name.
                    if lock.try_lock().is_err() || !names(&tmp, &lock) {
                        continue;
                    }
                    return Ok(AtomicDir {
                        lock,
                        tmp,
                        dest,
                        fsync,
                        committed: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(AtomicError::io(
                        "creating a temporary directory for",
                        &dest,
                        e,
                    ));
                }
            }
        }
        Err(AtomicError::io(
            "creating a temporary directory for",
            &dest,
            last.unwrap_or_else(|| io::Error::other("no free temporary name")),
        ))
    }

    /// The destination (symlinks resolved).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let out = lodt::atomic::AtomicDir::create(dir.path().join("d"))?;
    /// assert_eq!(out.path(), dir.path().join("d"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// The temporary directory, where the files go.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let out = lodt::atomic::AtomicDir::create(dir.path().join("d"))?;
    /// assert!(out.temp_path().is_dir() && out.temp_path().parent() == Some(dir.path()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs the temporary directory and renames it to the destination,
    /// which must still be absent or an empty directory
    /// ([`AtomicError::Occupied`] otherwise, and the destination is left as
    /// it is).
    ///
    /// See the [type-level example](AtomicDir).
    pub fn commit(mut self) -> Result<()> {
        if self.fsync {
            self.lock
                .sync_all()
                .map_err(|e| AtomicError::io("syncing", &self.tmp, e))?;
        }
        check_vacant(&self.dest)?;
        if let Err(e) = fs::rename(&self.tmp, &self.dest) {
            // Files that appeared in the destination since the check.
            return Err(match check_vacant(&self.dest) {
                Err(occupied) => occupied,
                Ok(()) => AtomicError::io("renaming the temporary directory to", &self.dest, e),
            });
        }
        self.committed = true;
        if self.fsync {
            sync_dir(&self.dest);
        }
        Ok(())
    }
}

impl Drop for AtomicDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Refuses a destination directory that exists, unless it is empty.
fn check_vacant(dest: &Path) -> Result<()> {
    let occupied = |found: &'static str| AtomicError::Occupied {
        path: dest.to_path_buf(),
        found,
    };
    match fs::symlink_metadata(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(AtomicError::io("inspecting", dest, e)),
        Ok(m) if !m.is_dir() => Err(occupied(if m.is_file() { "a file" } else { kind_name(&m) })),
        Ok(_) => {
            let mut entries =
                fs::read_dir(dest).map_err(|e| AtomicError::io("listing", dest, e))?;
            match entries.next() {
                None => Ok(()),
                Some(_) => Err(occupied("a directory that is not empty")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognized_and_nothing_else() {
        let dest = Path::new("/d/x.lodt");
        assert!(is_temp_of(&temp_name(dest, 12, 3), dest));
        assert!(is_temp_of(".x.lodt.1.0.tmp", dest));
        for other in [
            ".x.lodt.tmp",
            ".x.lodt.1.tmp",
            ".x.lodt.1.2.3.tmp",
            ".x.lodt.a.0.tmp",
            ".y.lodt.1.0.tmp",
            "x.lodt.1.0.tmp",
            ".x.lodt.1.0.tmpx",
            ".x.lodt.lock",
        ] {
            assert!(!is_temp_of(other, dest), "{other}");
        }
        let long = "é".repeat(200);
        let dest = PathBuf::from(format!("/d/{long}"));
        let name = temp_name(&dest, 1, 1);
        assert!(name.len() <= NAME_KEEP + 30);
        assert!(is_temp_of(&name, &dest));
    }
}
