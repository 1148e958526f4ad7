//! A local disk cache of ranges read from object stores.

use crate::buffer::{AlignedBytes, Buffer};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How old a claim (another process fetching a range) may be before it is
/// taken to belong to a process that died, and fetched again.
const CLAIM_STALE: Duration = Duration::from_secs(30);

/// How often a reader waiting for another process's fetch looks again.
const CLAIM_POLL: Duration = Duration::from_millis(5);

/// A directory of cached byte ranges with a size limit.
///
/// Each entry is keyed by the object's URI, its ETag (or version) and the
/// range, so an object rewritten under the same name (a new ETag) is never
/// served from the cache. An entry's file starts with its key, checked on
/// every hit (a hash collision or a foreign file is a miss). Writes go to a
/// temporary file renamed into place; beyond the limit, the least recently
/// used entries (by modification time, refreshed on each hit) are deleted.
/// Several processes may share a cache directory: a process fetching a
/// range claims it first (a `.claim` file made exclusively), and the others
/// wait for its entry instead of fetching the same bytes (the workers and
/// ranks of one machine fetch each range once). A claim older than 30 s is
/// taken to belong to a process that died.
///
/// ```
/// use lodt::remote::DiskCache;
/// let dir = tempfile::tempdir()?;
/// let cache = DiskCache::new(dir.path(), 1 << 20)?;
/// cache.put("s3://b/a.lodt", "\"etag1\"", 0..4, b"abcd");
/// assert_eq!(cache.get("s3://b/a.lodt", "\"etag1\"", 0..4).as_deref(), Some(&b"abcd"[..]));
/// assert_eq!(cache.get("s3://b/a.lodt", "\"etag2\"", 0..4), None); // rewritten: a miss
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
    limit: u64,
    /// Serializes this process's evictions.
    evicting: Mutex<()>,
    /// Bytes this process stored since it last looked for entries to evict
    /// (looking lists the directory: it is done once per 1/64 of the limit).
    since_evict: AtomicU64,
}

/// A process's claim on fetching one range ([`DiskCache::claim`]): others
/// wait for the entry while it stands. Dropped (the claim file deleted)
/// once the entry is stored, or the fetch failed.
#[derive(Debug)]
pub(crate) struct Claim {
    path: Option<PathBuf>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = fs::remove_file(path);
        }
    }
}

impl DiskCache {
    /// A cache in `dir` (created if missing) of at most `limit` bytes.
    pub fn new(dir: impl AsRef<Path>, limit: u64) -> io::Result<Self> {
        fs::create_dir_all(dir.as_ref())?;
        Ok(DiskCache {
            dir: dir.as_ref().to_path_buf(),
            limit,
            evicting: Mutex::new(()),
            since_evict: AtomicU64::new(u64::MAX / 2),
        })
    }

    /// The cache's directory.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let cache = lodt::remote::DiskCache::new(dir.path(), 1 << 20)?;
    /// assert_eq!(cache.dir(), dir.path());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn key(uri: &str, version: &str, range: &std::ops::Range<u64>) -> String {
        format!("{uri}\n{version}\n{}..{}\n", range.start, range.end)
    }

    fn file_name(key: &str) -> String {
        // Two independent 32-bit hashes of the key: a 64-bit name.
        let a = crc32fast::hash(key.as_bytes());
        let mut h = crc32fast::Hasher::new_with_initial(0x9e37_79b9);
        h.update(key.as_bytes());
        format!("{a:08x}{:08x}.range", h.finalize())
    }

    /// Whether an entry of the right size for `range` exists (not read: a
    /// hit is still checked when it is read).
    pub(crate) fn contains(&self, uri: &str, version: &str, range: &std::ops::Range<u64>) -> bool {
        let key = Self::key(uri, version, range);
        let want = (key.len() as u64).saturating_add(range.end.saturating_sub(range.start));
        fs::metadata(self.dir.join(Self::file_name(&key))).is_ok_and(|m| m.len() == want)
    }

    /// Claims the fetching of `range`: `None` if another process claimed it
    /// less than 30 s ago (its entry is coming: [`DiskCache::wait_for`]). A
    /// claim that cannot be written is granted (the fetch goes ahead; only
    /// the sharing is lost).
    pub(crate) fn claim(
        &self,
        uri: &str,
        version: &str,
        range: &std::ops::Range<u64>,
    ) -> Option<Claim> {
        let key = Self::key(uri, version, range);
        let path = self.dir.join(format!("{}.claim", Self::file_name(&key)));
        for _ in 0..2 {
            match fs::File::options().write(true).create_new(true).open(&path) {
                Ok(_) => return Some(Claim { path: Some(path) }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let age = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok());
                    match age {
                        Some(age) if age < CLAIM_STALE => return None,
                        // Stale (or gone meanwhile): taken over.
                        _ => {
                            let _ = fs::remove_file(&path);
                        }
                    }
                }
                Err(_) => return Some(Claim { path: None }),
            }
        }
        Some(Claim { path: None })
    }

    /// Whether another process has a live claim on `range`.
    fn claimed(&self, key: &str) -> bool {
        let path = self.dir.join(format!("{}.claim", Self::file_name(key)));
        fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age < CLAIM_STALE)
    }

    /// The entry of `range`, waiting up to `timeout` while another process
    /// claims it (is fetching it); `None` if there is none then.
    pub(crate) fn wait_for(
        &self,
        uri: &str,
        version: &str,
        range: std::ops::Range<u64>,
        timeout: Duration,
    ) -> Option<Buffer> {
        let key = Self::key(uri, version, &range);
        let start = Instant::now();
        while self.claimed(&key) && start.elapsed() < timeout {
            std::thread::sleep(CLAIM_POLL);
        }
        self.get_buffer(uri, version, range)
    }

    /// The cached bytes of `range` of version `version` of `uri`, if any.
    pub fn get(&self, uri: &str, version: &str, range: std::ops::Range<u64>) -> Option<Vec<u8>> {
        self.get_buffer(uri, version, range)
            .map(|b| b.as_slice().to_vec())
    }

    /// [`DiskCache::get`], read straight into a 64-aligned buffer (one
    /// copy, from the file).
    pub(crate) fn get_buffer(
        &self,
        uri: &str,
        version: &str,
        range: std::ops::Range<u64>,
    ) -> Option<Buffer> {
        let key = Self::key(uri, version, &range);
        let path = self.dir.join(Self::file_name(&key));
        let n = usize::try_from(range.end.checked_sub(range.start)?).ok()?;
        let mut file = fs::File::open(&path).ok()?;
        if file.metadata().ok()?.len() != key.len() as u64 + n as u64 {
            return None;
        }
        let mut head = vec![0u8; key.len()];
        file.read_exact(&mut head).ok()?;
        if head != key.as_bytes() {
            return None;
        }
        let mut bytes = AlignedBytes::try_zeroed(n).ok()?;
        file.read_exact(bytes.as_mut_slice()).ok()?;
        // Refresh the entry's age (least recently used goes first).
        if let Ok(f) = fs::File::options().append(true).open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(Buffer::from_storage(Arc::new(bytes)))
    }

    /// Deletes the entry of `range` of version `version` of `uri` (found
    /// damaged by its reader); whether there was one.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let cache = lodt::remote::DiskCache::new(dir.path(), 1 << 20)?;
    /// cache.put("s3://b/a.lodt", "e", 0..4, b"abcd");
    /// assert!(cache.remove("s3://b/a.lodt", "e", 0..4));
    /// assert_eq!(cache.get("s3://b/a.lodt", "e", 0..4), None);
    /// assert!(!cache.remove("s3://b/a.lodt", "e", 0..4));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn remove(&self, uri: &str, version: &str, range: std::ops::Range<u64>) -> bool {
        let key = Self::key(uri, version, &range);
        fs::remove_file(self.dir.join(Self::file_name(&key))).is_ok()
    }

    /// Stores `bytes` as `range` of version `version` of `uri`. Failures are
    /// ignored (a cache that cannot be written is a cache that misses).
    pub fn put(&self, uri: &str, version: &str, range: std::ops::Range<u64>, bytes: &[u8]) {
        let key = Self::key(uri, version, &range);
        let path = self.dir.join(Self::file_name(&key));
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            Self::file_name(&key),
            std::process::id()
        ));
        let written = fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(key.as_bytes())?;
            f.write_all(bytes)
        });
        if written.and_then(|_| fs::rename(&tmp, &path)).is_err() {
            let _ = fs::remove_file(&tmp);
            return;
        }
        let stored = (key.len() + bytes.len()) as u64;
        let since = self.since_evict.fetch_add(stored, Ordering::Relaxed) + stored;
        if since >= (self.limit / 64).max(1) {
            self.since_evict.store(0, Ordering::Relaxed);
            self.evict();
        }
    }

    /// The total size of the entries, in bytes.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let cache = lodt::remote::DiskCache::new(dir.path(), 1 << 20)?;
    /// cache.put("http://h/a", "e", 0..3, b"abc");
    /// assert!(cache.size() > 3); // the bytes and their key
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn size(&self) -> u64 {
        self.entries().iter().map(|e| e.1).sum()
    }

    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name();
            if !name.to_str()?.ends_with(".range") {
                return None;
            }
            let meta = e.metadata().ok()?;
            Some((e.path(), meta.len(), meta.modified().ok()?))
        })
        .collect()
    }

    /// Deletes the least recently used entries while over the limit.
    fn evict(&self) {
        let Ok(_guard) = self.evicting.lock() else {
            return;
        };
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= self.limit {
            return;
        }
        entries.sort_by_key(|e| e.2);
        for (path, len, _) in entries {
            if total <= self.limit {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}
