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
    /// How many ranges are fetched at once. Default 8.
    pub max_concurrency: usize,
    /// How many times a transient failure is retried. Default 5.
    pub max_retries: usize,
    /// A local directory caching the ranges read (keyed by URI, ETag and
    /// range, so a rewritten object is never served stale), or `None`.
    pub cache_dir: Option<PathBuf>,
    /// The cache's size limit in bytes (least recently used ranges are
    /// deleted beyond it). Default 1 GiB.
    pub cache_bytes: u64,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            options: BTreeMap::new(),
            suffix_bytes: 256 << 10,
            max_concurrency: 8,
            max_retries: 5,
            cache_dir: None,
            cache_bytes: 1 << 30,
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
}
