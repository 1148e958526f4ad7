//! [`ObjectSource`]: a [`RangeSource`] over one object in an object store.

use super::RemoteOptions;
use super::cache::{Claim, DiskCache};
use super::pending::{Pending, Slot, WAIT};
use super::runtime::{block_on, io_error, spawn};
use super::throttle::{Throttle, backoff, is_transient};
use crate::buffer::{AlignedBytes, Buffer};
use crate::format::{OpenHint, RangeSource};
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes the first read of a file asks for from its start (the 64-byte
/// header and the file metadata of most files).
const HEAD_BYTES: u64 = 4 << 10;

/// What the objects of one store share: the throttle of its ranged reads
/// and the node's disk cache.
#[derive(Debug)]
pub(crate) struct Shared {
    throttle: Arc<Throttle>,
    cache: Option<Arc<DiskCache>>,
    max_retries: usize,
    coalesce_bytes: u64,
}

impl Shared {
    /// The throttle and disk cache `options` ask for: the cache in
    /// [`RemoteOptions::cache_dir`] (an error if it cannot be made), else,
    /// for a dataset's shards (`dataset`), the node cache under the system's
    /// temporary directory when [`RemoteOptions::node_cache`] is on (none if
    /// that cannot be made).
    pub(crate) fn new(options: &RemoteOptions, dataset: bool) -> io::Result<Arc<Self>> {
        let cache = match &options.cache_dir {
            Some(dir) => Some(Arc::new(DiskCache::new(dir, options.cache_bytes)?)),
            None if options.node_cache && dataset => {
                DiskCache::new(default_cache_dir(), options.cache_bytes)
                    .ok()
                    .map(Arc::new)
            }
            None => None,
        };
        Ok(Arc::new(Shared {
            throttle: Throttle::new(options.max_concurrency),
            cache,
            max_retries: options.max_retries,
            coalesce_bytes: options.coalesce_bytes.max(1),
        }))
    }

    /// How many congestion events have lowered the store's concurrency.
    pub(crate) fn times_throttled(&self) -> u64 {
        self.throttle.times_lowered()
    }
}

/// One object of an object store, read by ranges.
///
/// Made by [`ObjectSource::open`], which reads the object's last
/// [`RemoteOptions::suffix_bytes`] bytes (learning its size and ETag on the
/// way) and keeps them: the reader's open then costs one more request (the
/// file's start) when the footer fits in that suffix. Later reads are ranged
/// GETs carrying the ETag (`If-Match`), up to
/// [`RemoteOptions::max_concurrency`] of one store at once (fewer while the
/// store answers `503 SlowDown` or drops connections: see
/// [`RemoteOptions::max_retries`]), served from the disk cache when there is
/// one ([`RemoteOptions::cache_dir`], [`RemoteOptions::node_cache`]).
/// Ranges announced ahead ([`RangeSource::will_gather`]: the loader
/// announces the batches its next sequences need) are fetched in the
/// background, adjacent ones merged into requests of up to
/// [`RemoteOptions::coalesce_bytes`], and their reads wait for them. Bytes
/// are copied into 64-byte-aligned buffers, and the reader checks every
/// batch read against its checksum table (bodies included); a cache entry
/// that fails is dropped ([`RangeSource::discard`]) and the batch fetched
/// again, once.
///
/// See [`lodt::remote`](super) for an example.
#[derive(Debug)]
pub struct ObjectSource {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    uri: String,
    len: u64,
    /// The ETag (or version) seen at open; `None` if the store gave neither.
    version: Option<String>,
    /// The object's last bytes, read at open, and where they start.
    tail: Buffer,
    tail_start: u64,
    /// Set once the reader found the kept tail damaged
    /// ([`RangeSource::discard`]): it is then fetched again, not served.
    tail_discarded: std::sync::atomic::AtomicBool,
    shared: Arc<Shared>,
    pending: Pending,
    requests: Arc<AtomicU64>,
}

/// Ranges at most this far apart are fetched ahead in one request (the gap's
/// bytes are fetched and not used).
const COALESCE_GAP: u64 = 64 << 10;

/// The node cache's directory when none is given: `$LODT_CACHE_DIR`, else
/// `lodt-cache-$USER` in the system's temporary directory.
///
/// ```
/// let dir = lodt::remote::default_cache_dir();
/// assert!(!dir.as_os_str().is_empty());
/// ```
pub fn default_cache_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("LODT_CACHE_DIR").filter(|d| !d.is_empty()) {
        return dir.into();
    }
    let user: String = std::env::var("USER")
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    let name = if user.is_empty() {
        "lodt-cache".to_owned()
    } else {
        format!("lodt-cache-{user}")
    };
    std::env::temp_dir().join(name)
}

/// Fetches `range` of `path` (a ranged GET carrying `version` as
/// `If-Match`) through the throttle, trying again after transient failures
/// (see [`Throttle`]).
async fn get_range(
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    range: Range<u64>,
    version: Option<String>,
    shared: Arc<Shared>,
    requests: Arc<AtomicU64>,
    uri: String,
) -> io::Result<Bytes> {
    let mut alone = 0usize;
    let mut failures = 0u32;
    loop {
        let permit = shared.throttle.acquire().await;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: version.clone(),
            ..Default::default()
        };
        requests.fetch_add(1, Ordering::Relaxed);
        let result = async { store.get_opts(&path, opts).await?.bytes().await }.await;
        drop(permit);
        match result {
            Ok(bytes) => {
                shared.throttle.success();
                if bytes.len() as u64 != range.end - range.start {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "{uri}: asked for bytes {}..{} and got {} bytes (truncated?)",
                            range.start,
                            range.end,
                            bytes.len()
                        ),
                    ));
                }
                return Ok(bytes);
            }
            Err(e) if is_transient(&e) => {
                // Failed with the store's concurrency already at one request:
                // more patience, up to max_retries times.
                if shared.throttle.congested() <= 1 {
                    alone += 1;
                    if alone > shared.max_retries {
                        return Err(io_error(&uri, e));
                    }
                }
                failures = failures.saturating_add(1);
                tokio::time::sleep(backoff(failures)).await;
            }
            Err(e) => return Err(io_error(&uri, e)),
        }
    }
}

/// `bytes[r - start]` copied into an aligned buffer.
fn window(bytes: &Bytes, start: u64, r: &Range<u64>) -> Option<Buffer> {
    let at = usize::try_from(r.start.checked_sub(start)?).ok()?;
    let end = usize::try_from(r.end.checked_sub(start)?).ok()?;
    let slice = bytes.get(at..end)?;
    Some(Buffer::from_storage(Arc::new(AlignedBytes::from_slice(
        slice,
    ))))
}

impl ObjectSource {
    /// Opens object `path` of `store` (`uri` names it in messages): one
    /// request, a suffix read. An error if the object does not exist. A
    /// single object uses a disk cache only if
    /// [`RemoteOptions::cache_dir`] names one (the node cache is for
    /// datasets' shards).
    pub fn open(
        store: Arc<dyn ObjectStore>,
        path: ObjectPath,
        uri: String,
        options: &RemoteOptions,
    ) -> io::Result<Self> {
        let shared = Shared::new(options, false)?;
        Self::open_shared(store, path, uri, options, shared)
    }

    /// [`ObjectSource::open`], sharing the throttle and disk cache of the
    /// other objects of its store.
    pub(crate) fn open_shared(
        store: Arc<dyn ObjectStore>,
        path: ObjectPath,
        uri: String,
        options: &RemoteOptions,
        shared: Arc<Shared>,
    ) -> io::Result<Self> {
        let suffix = options.suffix_bytes.max(64);
        let get = {
            let (store, path) = (store.clone(), path.clone());
            async move {
                let suffix_read = |range| GetOptions {
                    range: Some(range),
                    ..Default::default()
                };
                let result = match store
                    .get_opts(&path, suffix_read(GetRange::Suffix(suffix)))
                    .await
                {
                    // Azure has no suffix reads: the size first, then the tail.
                    Err(object_store::Error::NotSupported { .. }) => {
                        let size = store.head(&path).await?.size;
                        let tail = GetRange::Bounded(size.saturating_sub(suffix)..size);
                        if size == 0 {
                            store.get_opts(&path, GetOptions::default()).await?
                        } else {
                            store.get_opts(&path, suffix_read(tail)).await?
                        }
                    }
                    other => other?,
                };
                let meta = result.meta.clone();
                let range = result.range.clone();
                let bytes = result.bytes().await?;
                Ok::<_, object_store::Error>((meta, range, bytes))
            }
        };
        let (meta, range, bytes) = block_on(get)?.map_err(|e| io_error(&uri, e))?;
        if bytes.len() as u64 != range.end - range.start || range.end != meta.size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{uri}: asked for the last {suffix} bytes of {} and got bytes {}..{} ({} bytes)",
                    meta.size,
                    range.start,
                    range.end,
                    bytes.len()
                ),
            ));
        }
        Ok(ObjectSource {
            store,
            path,
            uri,
            len: meta.size,
            version: meta.e_tag.or(meta.version),
            tail: Buffer::from_storage(Arc::new(AlignedBytes::from_slice(&bytes))),
            tail_start: range.start,
            tail_discarded: std::sync::atomic::AtomicBool::new(false),
            shared,
            pending: Pending::default(),
            requests: Arc::new(AtomicU64::new(1)),
        })
    }

    /// The object's ETag (or version id) when it was opened.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// How many requests this source has made (the open's included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The cached bytes of `r` (the kept tail, the disk cache), or `None`.
    fn cached(&self, r: &Range<u64>) -> Option<Buffer> {
        if let Some(tail) = self.in_tail(r) {
            return Some(tail);
        }
        let (cache, version) = (self.shared.cache.as_ref()?, self.version.as_ref()?);
        cache.get_buffer(&self.uri, version, r.clone())
    }

    /// The bytes of `r` from the object's last bytes kept from the open.
    fn in_tail(&self, r: &Range<u64>) -> Option<Buffer> {
        if r.start >= self.tail_start
            && r.end <= self.len
            && !self.tail_discarded.load(Ordering::Relaxed)
        {
            let at = (r.start - self.tail_start) as usize..(r.end - self.tail_start) as usize;
            return self.tail.slice(at).ok();
        }
        None
    }

    /// The bytes of `r` from a request fetched ahead, waiting for it; `None`
    /// if there is none, or it failed (then `r` is asked for again).
    fn fetched_ahead(&self, r: &Range<u64>) -> Option<Buffer> {
        let (slot, start) = self.pending.take(r)?;
        match slot.wait(WAIT) {
            Some(Ok(bytes)) => window(&bytes, start, r),
            _ => {
                self.pending.forget(r);
                None
            }
        }
    }

    /// The bytes of `r` from the disk cache once another process that is
    /// fetching them (its claim) has stored them.
    fn fetched_by_another(&self, r: &Range<u64>) -> Option<Buffer> {
        let (cache, version) = (self.shared.cache.as_ref()?, self.version.as_ref()?);
        cache.wait_for(&self.uri, version, r.clone(), WAIT)
    }

    /// A task fetching `range`, handing its answer to `slot` (a request
    /// fetched ahead), and storing `parts` of it in the disk cache, then
    /// releasing their claims: before the task ends when `slot` is `None`
    /// (a read waits for it), else after (the bytes are in the slot).
    fn start_get(
        &self,
        range: Range<u64>,
        parts: Vec<(Range<u64>, Option<Claim>)>,
        slot: Option<Arc<Slot>>,
    ) -> io::Result<tokio::task::JoinHandle<io::Result<Bytes>>> {
        let get = get_range(
            self.store.clone(),
            self.path.clone(),
            range.clone(),
            self.version.clone(),
            self.shared.clone(),
            self.requests.clone(),
            self.uri.clone(),
        );
        let (shared, uri, version) = (self.shared.clone(), self.uri.clone(), self.version.clone());
        spawn(async move {
            let bytes = match get.await {
                Ok(bytes) => bytes,
                Err(e) => {
                    if let Some(slot) = &slot {
                        slot.set(Err(e.to_string()));
                    }
                    return Err(e);
                }
            };
            if let Some(slot) = &slot {
                slot.set(Ok(bytes.clone()));
            }
            if let (Some(cache), Some(version)) = (shared.cache.clone(), version) {
                let stored = bytes.clone();
                let start = range.start;
                let store = move || {
                    for (part, claim) in parts {
                        let (a, b) = ((part.start - start) as usize, (part.end - start) as usize);
                        if let Some(slice) = stored.get(a..b) {
                            cache.put(&uri, &version, part, slice);
                        }
                        drop(claim);
                    }
                };
                let stored = tokio::task::spawn_blocking(store);
                if slot.is_none() {
                    let _ = stored.await;
                }
            }
            Ok(bytes)
        })
    }

    /// Fetches `ranges` (none cached), concurrently through the throttle,
    /// each claimed in the disk cache while it is fetched.
    fn fetch(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Buffer>> {
        let mut handles = Vec::with_capacity(ranges.len());
        for r in ranges {
            let claim = match (&self.shared.cache, &self.version) {
                (Some(cache), Some(version)) => cache.claim(&self.uri, version, r),
                _ => None,
            };
            handles.push(self.start_get(r.clone(), vec![(r.clone(), claim)], None)?);
        }
        let results = block_on(async move {
            let mut results = Vec::with_capacity(handles.len());
            for h in handles {
                results.push(h.await);
            }
            results
        })?;
        let mut out = Vec::with_capacity(ranges.len());
        for (r, result) in ranges.iter().zip(results) {
            let bytes = result
                .map_err(|e| io::Error::other(format!("{}: request failed: {e}", self.uri)))??;
            out.push(window(&bytes, r.start, r).ok_or_else(short_answer)?);
        }
        Ok(out)
    }

    /// Starts fetching `ranges` (sorted by offset, disjoint) that are not in
    /// the kept tail, the disk cache, a request already fetching ahead, or
    /// another process's claim: adjacent ones merged into requests of up to
    /// `coalesce_bytes`. Returns at once.
    fn fetch_ahead(&self, ranges: &[Range<u64>]) {
        let mut wanted: Vec<(Range<u64>, Option<Claim>)> = Vec::new();
        for r in ranges {
            if r.start >= r.end
                || r.end > self.len
                || self.in_tail(r).is_some()
                || self.pending.overlaps(r)
            {
                continue;
            }
            let claim = match (&self.shared.cache, &self.version) {
                (Some(cache), Some(version)) => {
                    if cache.contains(&self.uri, version, r) {
                        continue;
                    }
                    match cache.claim(&self.uri, version, r) {
                        Some(claim) => Some(claim),
                        None => continue, // another process is fetching it
                    }
                }
                _ => None,
            };
            wanted.push((r.clone(), claim));
        }
        wanted.sort_by_key(|(r, _)| r.start);
        let mut groups: Vec<Vec<(Range<u64>, Option<Claim>)>> = Vec::new();
        for part in wanted {
            let joins = groups.last().is_some_and(|g| {
                let (first, last) = (
                    g.first().map_or(0, |p| p.0.start),
                    g.last().map_or(0, |p| p.0.end),
                );
                part.0.start >= last
                    && part.0.start <= last.saturating_add(COALESCE_GAP)
                    && part.0.end - first <= self.shared.coalesce_bytes
            });
            match (joins, groups.last_mut()) {
                (true, Some(g)) => g.push(part),
                _ => groups.push(vec![part]),
            }
        }
        for parts in groups {
            let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
                continue;
            };
            let range = first.0.start..last.0.end;
            let wanted: u64 = parts.iter().map(|p| p.0.end - p.0.start).sum();
            let slot = Arc::new(Slot::default());
            if !self.pending.insert(range.clone(), wanted, slot.clone()) {
                return; // the process holds all it may fetch ahead
            }
            if let Err(e) = self.start_get(range, parts, Some(slot.clone())) {
                slot.set(Err(e.to_string()));
            }
        }
    }
}

fn short_answer() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "a fetched range went missing")
}

impl RangeSource for ObjectSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Buffer>> {
        for r in ranges {
            if r.start > r.end || r.end > self.len {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{}: bytes {}..{} are past the end of the object ({} bytes)",
                        self.uri, r.start, r.end, self.len
                    ),
                ));
            }
        }
        // Empty ranges, then the kept tail, requests fetched ahead (waited
        // for), the disk cache, and another process's fetch of the range.
        let mut out: Vec<Option<Buffer>> = ranges
            .iter()
            .map(|r| {
                if r.start == r.end {
                    return Some(Buffer::from_vec(Vec::<u64>::new()));
                }
                self.in_tail(r).or_else(|| self.fetched_ahead(r))
            })
            .collect();
        for (r, slot) in ranges.iter().zip(out.iter_mut()) {
            if slot.is_none() {
                *slot = self.cached(r).or_else(|| self.fetched_by_another(r));
            }
        }
        let missing: Vec<Range<u64>> = ranges
            .iter()
            .zip(&out)
            .filter(|(_, got)| got.is_none())
            .map(|(r, _)| r.clone())
            .collect();
        let mut fetched = self.fetch(&missing)?.into_iter();
        for slot in out.iter_mut() {
            if slot.is_none() {
                *slot = fetched.next();
            }
        }
        out.into_iter()
            .map(|b| b.ok_or_else(short_answer))
            .collect()
    }

    /// Starts fetching `ranges` in the background (see [`ObjectSource`]);
    /// their reads then wait for those requests.
    fn will_gather(&self, ranges: &[Range<u64>]) {
        self.fetch_ahead(ranges);
    }

    fn open_hint(&self) -> OpenHint {
        OpenHint {
            head: HEAD_BYTES,
            tail: self.len - self.tail_start,
        }
    }

    /// Drops the disk cache's entry of `range`, if it has one, and the
    /// object's last bytes kept from the open if `range` reaches into them
    /// (they are fetched again from then on); `true` too if `range` was
    /// served by a request fetched ahead (the next read asks again).
    fn discard(&self, range: &Range<u64>) -> bool {
        let tail =
            range.end > self.tail_start && !self.tail_discarded.swap(true, Ordering::Relaxed);
        let cached = range.start < self.tail_start
            && match (&self.shared.cache, &self.version) {
                (Some(cache), Some(version)) => cache.remove(&self.uri, version, range.clone()),
                _ => false,
            };
        let ahead = self.pending.served_and_forget(range);
        tail || cached || ahead
    }

    fn describe(&self) -> String {
        self.uri.clone()
    }
}
