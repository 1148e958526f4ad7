//! [`ObjectSource`]: a [`RangeSource`] over one object in an object store.

use super::RemoteOptions;
use super::cache::DiskCache;
use super::runtime::{block_on, io_error, spawn};
use crate::buffer::{AlignedBytes, Buffer};
use crate::format::{OpenHint, RangeSource};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes the first read of a file asks for from its start (the 64-byte
/// header and the file metadata of most files).
const HEAD_BYTES: u64 = 4 << 10;

/// One object of an object store, read by ranges.
///
/// Made by [`ObjectSource::open`], which reads the object's last
/// [`RemoteOptions::suffix_bytes`] bytes (learning its size and ETag on the
/// way) and keeps them: the reader's open then costs one more request (the
/// file's start) when the footer fits in that suffix. Later reads are ranged
/// GETs carrying the ETag (`If-Match`), several at once up to
/// [`RemoteOptions::max_concurrency`], served from the disk cache when one
/// is configured ([`RemoteOptions::cache_dir`]). Bytes are copied into
/// 64-byte-aligned buffers, and the reader checks every batch read against
/// its checksum table (bodies included); a cache entry that fails is dropped
/// ([`RangeSource::discard`]) and the batch fetched again, once.
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
    max_concurrency: usize,
    cache: Option<DiskCache>,
    requests: AtomicU64,
}

impl ObjectSource {
    /// Opens object `path` of `store` (`uri` names it in messages): one
    /// request, a suffix read. An error if the object does not exist.
    pub fn open(
        store: Arc<dyn ObjectStore>,
        path: ObjectPath,
        uri: String,
        options: &RemoteOptions,
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
        let cache = match &options.cache_dir {
            Some(dir) => Some(DiskCache::new(dir, options.cache_bytes)?),
            None => None,
        };
        Ok(ObjectSource {
            store,
            path,
            uri,
            len: meta.size,
            version: meta.e_tag.or(meta.version),
            tail: Buffer::from_storage(Arc::new(AlignedBytes::from_slice(&bytes))),
            tail_start: range.start,
            tail_discarded: std::sync::atomic::AtomicBool::new(false),
            max_concurrency: options.max_concurrency.max(1),
            cache,
            requests: AtomicU64::new(1),
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

    /// The cached bytes of `r`, or `None`.
    fn cached(&self, r: &Range<u64>) -> Option<Buffer> {
        if r.start >= self.tail_start
            && r.end <= self.len
            && !self.tail_discarded.load(Ordering::Relaxed)
        {
            let at = (r.start - self.tail_start) as usize..(r.end - self.tail_start) as usize;
            return self.tail.slice(at).ok();
        }
        let (cache, version) = (self.cache.as_ref()?, self.version.as_ref()?);
        cache.get_buffer(&self.uri, version, r.clone())
    }

    /// Fetches `ranges` (none cached), at most `max_concurrency` at a time.
    fn fetch(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Buffer>> {
        let mut out = Vec::with_capacity(ranges.len());
        for group in ranges.chunks(self.max_concurrency) {
            let mut handles = Vec::with_capacity(group.len());
            for r in group {
                let (store, path) = (self.store.clone(), self.path.clone());
                let opts = GetOptions {
                    range: Some(GetRange::Bounded(r.clone())),
                    if_match: self.version.clone(),
                    ..Default::default()
                };
                handles.push(spawn(async move {
                    let result = store.get_opts(&path, opts).await?;
                    result.bytes().await
                })?);
                self.requests.fetch_add(1, Ordering::Relaxed);
            }
            let results = block_on(async move {
                let mut results = Vec::with_capacity(handles.len());
                for h in handles {
                    results.push(h.await);
                }
                results
            })?;
            for (r, result) in group.iter().zip(results) {
                let bytes = result
                    .map_err(|e| io::Error::other(format!("{}: request failed: {e}", self.uri)))?
                    .map_err(|e| io_error(&self.uri, e))?;
                if bytes.len() as u64 != r.end - r.start {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "{}: asked for bytes {}..{} and got {} bytes (truncated?)",
                            self.uri,
                            r.start,
                            r.end,
                            bytes.len()
                        ),
                    ));
                }
                if let (Some(cache), Some(version)) = (&self.cache, &self.version) {
                    cache.put(&self.uri, version, r.clone(), &bytes);
                }
                out.push(Buffer::from_storage(Arc::new(AlignedBytes::from_slice(
                    &bytes,
                ))));
            }
        }
        Ok(out)
    }
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
        let mut out: Vec<Option<Buffer>> = ranges.iter().map(|r| self.cached(r)).collect();
        let missing: Vec<Range<u64>> = ranges
            .iter()
            .zip(&out)
            .filter(|(r, got)| got.is_none() && r.start < r.end)
            .map(|(r, _)| r.clone())
            .collect();
        let mut fetched = self.fetch(&missing)?.into_iter();
        for (r, slot) in ranges.iter().zip(out.iter_mut()) {
            if slot.is_none() {
                *slot = if r.start == r.end {
                    Some(Buffer::from_vec(Vec::<u64>::new()))
                } else {
                    fetched.next()
                };
            }
        }
        out.into_iter()
            .map(|b| b.ok_or_else(|| io::Error::other("a fetched range went missing")))
            .collect()
    }

    fn open_hint(&self) -> OpenHint {
        OpenHint {
            head: HEAD_BYTES,
            tail: self.len - self.tail_start,
        }
    }

    /// Drops the disk cache's entry of `range`, if it has one, and the
    /// object's last bytes kept from the open if `range` reaches into them
    /// (they are fetched again from then on).
    fn discard(&self, range: &Range<u64>) -> bool {
        let tail =
            range.end > self.tail_start && !self.tail_discarded.swap(true, Ordering::Relaxed);
        let cached = range.start < self.tail_start
            && match (&self.cache, &self.version) {
                (Some(cache), Some(version)) => cache.remove(&self.uri, version, range.clone()),
                _ => false,
            };
        tail || cached
    }

    fn describe(&self) -> String {
        self.uri.clone()
    }
}
