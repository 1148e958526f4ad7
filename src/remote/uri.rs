//! Telling a URI from a local path, and making the object store a URI names.

use super::RemoteOptions;
use super::process::PerProcessStore;
use crate::location::is_uri;
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where a file or dataset lives: a local path, or an object in a store.
///
/// ```
/// use lodt::remote::{ResolvedLocation, RemoteOptions};
/// let local = ResolvedLocation::parse("data/train", &RemoteOptions::default())?;
/// assert!(matches!(local, ResolvedLocation::Local(_)));
/// let s3 = ResolvedLocation::parse("s3://bucket/train/a.lodt", &RemoteOptions::default().with_option("aws_region", "us-east-1"))?;
/// match s3 {
///     ResolvedLocation::Remote { path, uri, .. } => {
///         assert_eq!(path.as_ref(), "train/a.lodt");
///         assert_eq!(uri, "s3://bucket/train/a.lodt");
///     }
///     _ => unreachable!(),
/// }
/// assert!(ResolvedLocation::parse("s3://", &RemoteOptions::default()).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub enum ResolvedLocation {
    /// A local file or directory.
    Local(PathBuf),
    /// An object (or a prefix of objects) in an object store.
    Remote {
        /// The store (a bucket, a container, an HTTP server).
        store: Arc<dyn ObjectStore>,
        /// The object's path within the store.
        path: ObjectPath,
        /// The URI, for messages.
        uri: String,
    },
}

impl ResolvedLocation {
    /// Parses `location`: a URI ([`is_uri`](crate::location::is_uri)) makes the store of its scheme,
    /// configured from the environment and `options`; anything else is a
    /// local path. No request is made.
    pub fn parse(location: &str, options: &RemoteOptions) -> io::Result<ResolvedLocation> {
        if !is_uri(location) {
            return Ok(ResolvedLocation::Local(PathBuf::from(location)));
        }
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        let url = url::Url::parse(location).map_err(|e| invalid(format!("{location}: {e}")))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err(invalid(format!(
                "{location}: expected a bucket, container or host after the scheme"
            )));
        }
        let (_, path) = object_store::ObjectStoreScheme::parse(&url)
            .map_err(|e| invalid(format!("{location}: {e}")))?;
        let store = PerProcessStore::new(url, options.clone(), build_store)
            .map_err(|e| invalid(format!("{location}: {e}")))?;
        Ok(ResolvedLocation::Remote {
            store: Arc::new(store),
            path,
            uri: location.trim_end_matches('/').to_owned(),
        })
    }
}

/// The store of `url`'s scheme: its builder configured from the environment
/// (not for HTTP, which has no credentials), then from `options`, with
/// bounded retries. Called again in each process that uses it
/// ([`PerProcessStore`]).
fn build_store(
    url: &url::Url,
    options: &RemoteOptions,
) -> object_store::Result<Arc<dyn ObjectStore>> {
    use object_store::ObjectStoreScheme;
    let (scheme, _) = ObjectStoreScheme::parse(url)?;
    let retry = RetryConfig {
        max_retries: options.max_retries,
        retry_timeout: Duration::from_secs(60),
        backoff: BackoffConfig::default(),
    };
    let unknown = |key: &str| object_store::Error::Generic {
        store: "lodt",
        source: format!("unknown configuration key {key:?} for {}", url.scheme()).into(),
    };
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            let mut b = AmazonS3Builder::from_env().with_url(url.as_str());
            for (k, v) in &options.options {
                b = b.with_config(k.to_ascii_lowercase().parse().map_err(|_| unknown(k))?, v);
            }
            Arc::new(b.with_retry(retry).build()?)
        }
        ObjectStoreScheme::MicrosoftAzure => {
            let mut b = MicrosoftAzureBuilder::from_env().with_url(url.as_str());
            for (k, v) in &options.options {
                b = b.with_config(k.to_ascii_lowercase().parse().map_err(|_| unknown(k))?, v);
            }
            Arc::new(b.with_retry(retry).build()?)
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            let mut b = GoogleCloudStorageBuilder::from_env().with_url(url.as_str());
            for (k, v) in &options.options {
                b = b.with_config(k.to_ascii_lowercase().parse().map_err(|_| unknown(k))?, v);
            }
            Arc::new(b.with_retry(retry).build()?)
        }
        ObjectStoreScheme::Http => {
            // The server is the URL up to its path; plain `http://` is what
            // the URI asks for, so it is allowed.
            let base = &url[..url::Position::BeforePath];
            let mut b = HttpBuilder::new()
                .with_url(base)
                .with_config(ClientConfigKey::AllowHttp, "true");
            for (k, v) in &options.options {
                b = b.with_config(k.to_ascii_lowercase().parse().map_err(|_| unknown(k))?, v);
            }
            Arc::new(b.with_retry(retry).build()?)
        }
        other => {
            return Err(object_store::Error::Generic {
                store: "lodt",
                source: format!("{other:?} URIs are not supported (use a local path)").into(),
            });
        }
    };
    Ok(store)
}
