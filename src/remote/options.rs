//! [`RemoteOptions`]: how remote objects are reached and read.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// How remote objects are reached and read.
///
/// ```
/// let options = lodt::remote::RemoteOptions::default()
///     .with_option("aws_endpoint", "http://127.0.0.1:9000")
///     .with_option("allow_http", "true");
/// assert_eq!(options.suffix_bytes, 256 << 10);
/// assert_eq!(options.max_concurrency, 32);
/// assert!(options.node_cache);
/// assert_eq!(options.options["allow_http"], "true");
/// ```
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Configuration keys passed to the `object_store` builder of the URI's
    /// scheme, on top of those it reads from the environment.
    pub options: BTreeMap<String, String>,
    /// How many bytes the first read of a file takes from its end (see the
    /// module docs). Default 256 KiB.
    pub suffix_bytes: u64,
    /// How many ranged reads of one store are in flight at most (the
    /// loader's read-ahead keeps them busy). Default 32: a WAN object store
    /// answers each request after tens of milliseconds and paces each
    /// connection, so throughput comes from concurrency. Lowered while the
    /// store throttles (see `max_retries`).
    pub max_concurrency: usize,
    /// How many times a transient failure is retried. Each request is
    /// retried this many times with a backoff inside `object_store`; a
    /// request that still fails halves the store's concurrency (once per
    /// congestion event; successes grow it back by about one per round of
    /// requests) and is tried again, and a read fails only after this many
    /// further failures at a concurrency of one request. Default 5.
    pub max_retries: usize,
    /// A local directory caching the ranges read (keyed by URI, ETag and
    /// range, so a rewritten object is never served stale), shared by the
    /// processes that name it, or `None` for the node cache (below).
    pub cache_dir: Option<PathBuf>,
    /// With no `cache_dir`: whether a dataset's shards use the node cache, a cache in
    /// [`default_cache_dir`](super::default_cache_dir) (under the system's
    /// temporary directory) shared by every process of the machine, so that
    /// the workers and ranks of one node fetch each range once. Default
    /// `true`; a node cache that cannot be made is no cache.
    pub node_cache: bool,
    /// The cache's size limit in bytes (least recently used ranges are
    /// deleted beyond it). Default 1 GiB.
    pub cache_bytes: u64,
    /// Adjacent ranges fetched ahead are merged into requests of up to this
    /// many bytes. Default 4 MiB (a request of a few MB costs about its
    /// transfer; a smaller one mostly its time to the first byte).
    pub coalesce_bytes: u64,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            options: BTreeMap::new(),
            suffix_bytes: 256 << 10,
            max_concurrency: 32,
            max_retries: 5,
            cache_dir: None,
            node_cache: true,
            cache_bytes: 1 << 30,
            coalesce_bytes: 4 << 20,
        }
    }
}

impl RemoteOptions {
    /// These options with configuration key `key` set to `value`.
    ///
    /// ```
    /// let o = lodt::remote::RemoteOptions::default().with_option("allow_http", "true");
    /// assert_eq!(o.options.len(), 1);
    /// ```
    pub fn with_option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }

    /// These options with a disk cache in `dir` of at most `bytes` bytes.
    ///
    /// ```
    /// let o = lodt::remote::RemoteOptions::default().with_cache("/tmp/lodt-cache", 1 << 20);
    /// assert_eq!(o.cache_bytes, 1 << 20);
    /// ```
    pub fn with_cache(mut self, dir: impl Into<PathBuf>, bytes: u64) -> Self {
        self.cache_dir = Some(dir.into());
        self.cache_bytes = bytes;
        self
    }

    /// These options with no disk cache at all (not even the node cache).
    ///
    /// ```
    /// let o = lodt::remote::RemoteOptions::default().without_cache();
    /// assert!(o.cache_dir.is_none() && !o.node_cache);
    /// ```
    pub fn without_cache(mut self) -> Self {
        self.cache_dir = None;
        self.node_cache = false;
        self
    }
}
