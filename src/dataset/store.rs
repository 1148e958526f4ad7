//! Where a dataset's objects live: the [`DatasetStore`] seam, and
//! [`LocalStore`], a directory on a local (or mounted) file system.
//!
//! A dataset is a set of named objects: one manifest, `.lodt` shards, and
//! partial manifests of writers not merged yet. Everything the dataset code
//! reads or writes goes through a store, so a backend for object stores (S3,
//! HTTP) can plug in: opening a dataset is one [`DatasetStore::read`] of the
//! manifest; a shard is opened when first touched
//! ([`DatasetStore::open_shard`], ranged reads of its footer and then of the
//! batches used); writers stream shards ([`DatasetStore::create_shard`]) and
//! replace manifests whole ([`DatasetStore::write_atomic`]).
//!
//! ```
//! use lodt::dataset::{DatasetStore, LocalStore};
//! let dir = tempfile::tempdir()?;
//! let store = LocalStore::new(dir.path());
//! assert_eq!(store.read("lodt-dataset.json")?, None);
//! store.write_atomic("lodt-dataset.json", b"{}")?;
//! assert_eq!(store.read("lodt-dataset.json")?.as_deref(), Some(&b"{}"[..]));
//! assert_eq!(store.list()?, vec!["lodt-dataset.json".to_string()]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::error::{DatasetError, Result};
use crate::atomic::{AtomicFile, WriterLock};
use crate::format::LodtFile;
use std::fmt;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A shard being written: bytes go in with [`Write`], and the shard appears
/// under its name only when [`ShardSink::commit`] succeeds (dropped before,
/// nothing appears).
///
/// ```
/// use std::io::Write;
/// use lodt::dataset::{DatasetStore, LocalStore};
/// let dir = tempfile::tempdir()?;
/// let store = LocalStore::new(dir.path());
/// let mut sink = store.create_shard("a.lodt")?;
/// sink.write_all(b"bytes")?;
/// assert!(!dir.path().join("a.lodt").exists());
/// sink.commit()?;
/// assert!(dir.path().join("a.lodt").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ShardSink: Write + Send {
    /// Makes the shard visible under its name, whole.
    fn commit(self: Box<Self>) -> Result<()>;
}

/// The version of an object as a store reports it (its ETag and/or version
/// id), for conditional writes ([`DatasetStore::write_if`]). Empty for
/// stores that serialize writers with locks instead ([`LocalStore`]).
///
/// ```
/// let v = lodt::dataset::store::ObjectVersion { e_tag: Some("\"abc\"".into()), version: None };
/// assert_ne!(v, lodt::dataset::store::ObjectVersion::default());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The object's ETag.
    pub e_tag: Option<String>,
    /// The object's version id (stores with versioning).
    pub version: Option<String>,
}

/// A lock held while it lives (see [`DatasetStore::lock`]).
///
/// ```
/// let lock = lodt::dataset::store::StoreLock::new(());
/// drop(lock); // released
/// ```
pub struct StoreLock {
    _guard: Box<dyn Send + Sync>,
}

impl StoreLock {
    /// A lock released when `guard` is dropped.
    ///
    /// ```
    /// let _lock = lodt::dataset::store::StoreLock::new(std::sync::Arc::new(1u8));
    /// ```
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        StoreLock {
            _guard: Box::new(guard),
        }
    }
}

impl fmt::Debug for StoreLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StoreLock")
    }
}

/// The objects of one dataset: a manifest, shards, partial manifests.
/// [`LocalStore`] is the local implementation.
///
/// Everything the dataset code reads or writes goes through a store, so a
/// backend for object stores (S3, HTTP) can plug in: opening a dataset is
/// one [`DatasetStore::read`] of the manifest; a shard is opened when first
/// touched ([`DatasetStore::open_shard`]: ranged reads of its footer, then
/// of the batches used); writers stream shards
/// ([`DatasetStore::create_shard`]) and replace manifests whole
/// ([`DatasetStore::write_atomic`]); [`DatasetStore::lock`] serializes the
/// writers of the manifest (an object store would use a conditional write).
///
/// Object names are single path components (`lodt-dataset.json`,
/// `shard-000003.lodt`); stores refuse others.
///
/// ```
/// use lodt::dataset::{Dataset, DatasetStore, DatasetWriter, LocalStore, DatasetWriterOptions};
/// use std::sync::Arc;
/// # let dir = tempfile::tempdir()?;
/// let store: Arc<dyn DatasetStore> = Arc::new(LocalStore::new(dir.path()));
/// DatasetWriter::create_in(store.clone(), DatasetWriterOptions::default())?.finish()?;
/// let dataset = Dataset::open_in(store)?;
/// assert_eq!(dataset.num_sequences(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait DatasetStore: Send + Sync + fmt::Debug {
    /// The dataset's location (a directory, a URL prefix), for messages.
    fn location(&self) -> String;

    /// The location of object `name`, for messages.
    fn object_location(&self, name: &str) -> String;

    /// Makes sure the dataset's location exists (creates the directory);
    /// called before writing. The default does nothing.
    fn prepare(&self) -> Result<()> {
        Ok(())
    }

    /// The whole content of a small object (a manifest), or `None` if there
    /// is no such object. An object larger than
    /// [`MAX_MANIFEST_BYTES`](super::MAX_MANIFEST_BYTES), or (in a local
    /// directory) one that is not a regular file (a FIFO, a device, a
    /// symlink to one), is an error, never read whole or waited on.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>>;

    /// The first `limit` bytes of object `name` (fewer if it is shorter)
    /// and its whole size, or `None` if there is no such object: how a
    /// reader finds the shard index a manifest names on its first line
    /// without reading the rest. By default, [`DatasetStore::read`], cut.
    fn read_head(&self, name: &str, limit: usize) -> Result<Option<(Vec<u8>, u64)>> {
        Ok(self.read(name)?.map(|mut bytes| {
            let size = bytes.len() as u64;
            bytes.truncate(limit);
            (bytes, size)
        }))
    }

    /// Object `name` mapped read-only into memory, where the store can (a
    /// local file); `None` if it cannot, and the object is then
    /// [read](DatasetStore::read) instead (the shard index). By default
    /// `None`.
    fn map(&self, name: &str) -> Result<Option<std::sync::Arc<crate::format::MappedFile>>> {
        let _ = name;
        Ok(None)
    }

    /// Replaces object `name` by `bytes`, whole or not at all.
    fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<()>;

    /// The content of a small object and its version (see
    /// [`DatasetStore::write_if`]), or `None` if there is no such object.
    /// By default, [`DatasetStore::read`] with no version.
    fn read_versioned(&self, name: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>> {
        Ok(self.read(name)?.map(|b| (b, ObjectVersion::default())))
    }

    /// Replaces object `name` by `bytes` only if it is still at version
    /// `expected` (`None`: only if it does not exist), and returns the new
    /// version; [`DatasetError::PreconditionFailed`] otherwise. This is how
    /// writers commit a manifest to a store without locks (an object
    /// store's conditional put). By default (stores whose writers are
    /// serialized by [`DatasetStore::lock`]), [`DatasetStore::write_atomic`].
    ///
    /// Any error leaves the outcome unknown to the caller (the answer of a
    /// write the store carried out may be lost, and a retried request then
    /// fails its own condition): writers read the object again to decide
    /// (spec/DATASET.md section 5.3).
    fn write_if(
        &self,
        name: &str,
        bytes: &[u8],
        expected: Option<&ObjectVersion>,
    ) -> Result<ObjectVersion> {
        let _ = expected;
        self.write_atomic(name, bytes)?;
        Ok(ObjectVersion::default())
    }

    /// Opens shard `name` for random access (its header and footer are
    /// checked; batches are read when touched).
    fn open_shard(&self, name: &str) -> Result<LodtFile>;

    /// Starts writing shard `name` (see [`ShardSink`]).
    fn create_shard(&self, name: &str) -> Result<Box<dyn ShardSink>>;

    /// The names of the dataset's objects, sorted.
    fn list(&self) -> Result<Vec<String>>;

    /// Deletes object `name` (no error if there is none).
    fn remove(&self, name: &str) -> Result<()>;

    /// Whether writers must name their shards with a token of their own
    /// (`shard-TOKEN-NNNNNN.lodt`, spec/DATASET.md section 5.3): true for
    /// stores whose [`DatasetStore::lock`] holds nothing, where two writers
    /// could otherwise pick the same next name. False by default.
    fn unique_shard_names(&self) -> bool {
        false
    }

    /// Whether its objects are read over a network (an object store): the
    /// loader then deals epochs by locality unless told otherwise
    /// ([`LoaderOptions::partition`](super::LoaderOptions::partition)).
    /// False by default.
    fn is_remote(&self) -> bool {
        false
    }

    /// Takes the dataset's writer lock, or fails with
    /// [`DatasetError::Locked`] if another writer holds it (for longer than
    /// [`LOCK_GRACE`](crate::atomic::LOCK_GRACE), for [`LocalStore`]). Writers of the main manifest (appends,
    /// merges) hold it from reading the manifest to replacing it.
    fn lock(&self) -> Result<StoreLock>;

    /// Takes the writer lock of object `name` (`None` if there is no such
    /// object), so that it is not replaced while held.
    fn lock_object(&self, name: &str) -> Result<Option<StoreLock>>;
}

/// A dataset in a directory of a local (or mounted) file system.
///
/// - Shards are memory-mapped ([`LodtFile::open`]), or read with
///   positional reads ([`LocalStore::with_mmap`]), as
///   [`LocalStore::with_read_options`] says.
/// - Manifests and shards are written atomically ([`AtomicFile`]: a
///   temporary file, synced, renamed over the destination).
/// - The dataset's writer lock is an advisory `flock` on the directory
///   itself (on Unix; elsewhere there is no dataset lock), and an object's
///   lock is its [`WriterLock`].
///
/// ```
/// use lodt::dataset::{DatasetStore, LocalStore};
/// let dir = tempfile::tempdir()?;
/// let store = LocalStore::new(dir.path());
/// assert_eq!(store.read("lodt-dataset.json")?, None);
/// store.write_atomic("lodt-dataset.json", b"{}")?;
/// assert_eq!(store.list()?, vec!["lodt-dataset.json".to_string()]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
    fsync: bool,
    read: crate::format::ReadOptions,
}

impl LocalStore {
    /// The dataset in directory `dir` (nothing is touched yet).
    ///
    /// ```
    /// let store = lodt::dataset::LocalStore::new("data/train");
    /// assert_eq!(store.dir(), std::path::Path::new("data/train"));
    /// ```
    pub fn new(dir: impl AsRef<Path>) -> Self {
        LocalStore {
            dir: dir.as_ref().to_path_buf(),
            fsync: true,
            read: Default::default(),
        }
    }

    /// Whether writes are synced to disk before they are renamed into place
    /// (on by default; off is faster, and safe against a crash of the
    /// process but not of the machine).
    ///
    /// ```
    /// let store = lodt::dataset::LocalStore::new("d").with_fsync(false);
    /// # let _ = store;
    /// ```
    pub fn with_fsync(mut self, fsync: bool) -> Self {
        self.fsync = fsync;
        self
    }

    /// Whether shards are read through a memory map (on by default: batches
    /// are windows of the map, no copy) or with positional reads (each batch
    /// copied into memory when touched; a shard truncated by another process
    /// gives an error instead of `SIGBUS`). See
    /// [`ReadOptions`](crate::format::ReadOptions).
    ///
    /// ```
    /// let store = lodt::dataset::LocalStore::new("d").with_mmap(false);
    /// # let _ = store;
    /// ```
    pub fn with_mmap(mut self, mmap: bool) -> Self {
        self.read.mmap = mmap;
        self
    }

    /// How shards are opened ([`LodtFile::open_with`]): through a memory map
    /// or with positional reads, with which access hints, and whether a
    /// mapped batch's bodies are checked on its first touch
    /// ([`ReadOptions::check_bodies`](crate::format::ReadOptions::check_bodies)).
    ///
    /// ```
    /// use lodt::format::ReadOptions;
    /// let checked = ReadOptions { check_bodies: true, ..Default::default() };
    /// let store = lodt::dataset::LocalStore::new("d").with_read_options(checked);
    /// # let _ = store;
    /// ```
    pub fn with_read_options(mut self, options: crate::format::ReadOptions) -> Self {
        self.read = options;
        self
    }

    /// The directory.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::LocalStore::new("d").dir().to_str(), Some("d"));
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of object `name`, which must be a plain file name.
    fn path(&self, name: &str) -> Result<PathBuf> {
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\', '\0'])
            && Path::new(name).components().count() == 1;
        if !plain {
            return Err(DatasetError::InvalidArgument(format!(
                "{name:?} is not a plain file name in the dataset directory {}",
                self.dir.display()
            )));
        }
        Ok(self.dir.join(name))
    }
}

/// The content of the regular file at `path` (symlinks followed), at most
/// `limit` bytes: a FIFO, a device or a directory is refused with
/// `InvalidInput` before anything is read (opening a FIFO does not wait for
/// a writer), a larger file with `FileTooLarge`.
fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use io::Read;
    let (file, meta) = open_regular(path)?;
    let too_large = |found: String| {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("a manifest is at most {limit} bytes (MAX_MANIFEST_BYTES), found {found}"),
        )
    };
    if meta.len() > limit {
        return Err(too_large(format!("{} bytes", meta.len())));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(meta.len() as usize)
        .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large("more (the file grew while read)".into()));
    }
    Ok(bytes)
}

/// The first `limit` bytes of the regular file at `path` and its size (the
/// checks of [`read_regular`]).
fn read_head_regular(path: &Path, limit: usize) -> io::Result<(Vec<u8>, u64)> {
    use io::Read;
    let (file, meta) = open_regular(path)?;
    let mut bytes = Vec::with_capacity(limit.min(1 << 16));
    file.take(limit as u64).read_to_end(&mut bytes)?;
    Ok((bytes, meta.len()))
}

/// The regular file at `path` (symlinks followed), open for reading, and
/// its metadata: a FIFO, a device or a directory is refused with
/// `InvalidInput` before anything is read (opening a FIFO does not wait for
/// a writer).
fn open_regular(path: &Path) -> io::Result<(fs::File, fs::Metadata)> {
    let not_regular = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("expected a regular file, found {what}"),
        )
    };
    let kind = |t: fs::FileType| {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if t.is_fifo() {
                return "a FIFO (named pipe)";
            }
            if t.is_char_device() || t.is_block_device() {
                return "a device";
            }
            if t.is_socket() {
                return "a socket";
            }
        }
        if t.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        }
    };
    let meta = fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_regular(kind(meta.file_type())));
    }
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // Replaced by a FIFO since the check: opening does not block.
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(kind(meta.file_type())));
    }
    Ok((file, meta))
}

/// A shard written to a local temporary file, renamed into place on commit.
struct LocalShardSink {
    out: BufWriter<AtomicFile>,
    location: String,
}

impl Write for LocalShardSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl ShardSink for LocalShardSink {
    fn commit(self: Box<Self>) -> Result<()> {
        let location = self.location;
        let file = self
            .out
            .into_inner()
            .map_err(|e| DatasetError::io("writing", location, e.into_error()))?;
        file.commit()?;
        Ok(())
    }
}

impl DatasetStore for LocalStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn object_location(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn prepare(&self) -> Result<()> {
        fs::create_dir_all(&self.dir)
            .map_err(|e| DatasetError::io("creating the directory", self.location(), e))
    }

    fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(name)?;
        match read_regular(&path, super::MAX_MANIFEST_BYTES) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(DatasetError::io("reading", path.display().to_string(), e)),
        }
    }

    fn read_head(&self, name: &str, limit: usize) -> Result<Option<(Vec<u8>, u64)>> {
        let path = self.path(name)?;
        match read_head_regular(&path, limit) {
            Ok(found) => Ok(Some(found)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(DatasetError::io("reading", path.display().to_string(), e)),
        }
    }

    fn map(&self, name: &str) -> Result<Option<std::sync::Arc<crate::format::MappedFile>>> {
        if !self.read.mmap {
            return Ok(None);
        }
        let path = self.path(name)?;
        let file = match open_regular(&path) {
            Ok((file, _)) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(DatasetError::io("opening", path.display().to_string(), e)),
        };
        let map = crate::format::MappedFile::from_file(&file, &path)
            .map_err(|source| DatasetError::shard(path.display().to_string(), source))?;
        Ok(Some(std::sync::Arc::new(map)))
    }

    fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(name)?;
        let mut file = AtomicFile::create_with(&path, self.fsync)?;
        file.write_all(bytes)
            .map_err(|e| DatasetError::io("writing", path.display().to_string(), e))?;
        file.commit()?;
        Ok(())
    }

    fn open_shard(&self, name: &str) -> Result<LodtFile> {
        let path = self.path(name)?;
        LodtFile::open_with(&path, &self.read)
            .map_err(|source| DatasetError::shard(path.display().to_string(), source))
    }

    fn create_shard(&self, name: &str) -> Result<Box<dyn ShardSink>> {
        let path = self.path(name)?;
        let file = AtomicFile::create_with(&path, self.fsync)?;
        Ok(Box::new(LocalShardSink {
            out: BufWriter::with_capacity(1 << 16, file),
            location: path.display().to_string(),
        }))
    }

    fn list(&self) -> Result<Vec<String>> {
        let entries =
            fs::read_dir(&self.dir).map_err(|e| DatasetError::io("listing", self.location(), e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| DatasetError::io("listing", self.location(), e))?;
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = self.path(name)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(DatasetError::io("deleting", path.display().to_string(), e)),
        }
    }

    fn lock(&self) -> Result<StoreLock> {
        #[cfg(unix)]
        {
            use std::fs::TryLockError;
            let dir = fs::File::open(&self.dir)
                .map_err(|e| DatasetError::io("opening the directory", self.location(), e))?;
            let start = std::time::Instant::now();
            let mut pause = std::time::Duration::from_millis(1);
            loop {
                match dir.try_lock() {
                    Ok(()) => return Ok(StoreLock::new(dir)),
                    // As WriterLock does: a child process being started by
                    // another thread holds an inherited lock until it execs.
                    Err(TryLockError::WouldBlock)
                        if start.elapsed() < crate::atomic::LOCK_GRACE =>
                    {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(std::time::Duration::from_millis(50));
                    }
                    Err(TryLockError::WouldBlock) => {
                        return Err(DatasetError::Locked {
                            path: self.location(),
                        });
                    }
                    Err(TryLockError::Error(e)) => {
                        return Err(DatasetError::io(
                            "locking the directory",
                            self.location(),
                            e,
                        ));
                    }
                }
            }
        }
        #[cfg(not(unix))]
        {
            Ok(StoreLock::new(()))
        }
    }

    fn lock_object(&self, name: &str) -> Result<Option<StoreLock>> {
        let path = self.path(name)?;
        match WriterLock::acquire(&path) {
            Ok(lock) => Ok(Some(StoreLock::new(lock))),
            Err(e) if e.io_kind() == Some(io::ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
