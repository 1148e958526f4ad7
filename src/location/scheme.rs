//! Telling a URI of an object store from a local path: the schemes lodt
//! reads and writes ([`SCHEMES`]) and [`is_uri`]. Below both
//! [`location`](crate::location) and [`remote`](crate::remote), which use it.

/// The URI schemes of the object stores lodt reads and writes.
pub const SCHEMES: [&str; 9] = [
    "s3", "s3a", "gs", "az", "abfs", "abfss", "azure", "http", "https",
];

/// Whether `location` is a URI of a supported object store (one of
/// [`SCHEMES`], followed by `://`), rather than a local path.
///
/// ```
/// use lodt::location::is_uri;
/// assert!(is_uri("s3://bucket/a.lodt"));
/// assert!(is_uri("HTTPS://host/data/a.lodt"));
/// assert!(!is_uri("data/a.lodt"));
/// assert!(!is_uri("C:/data/a.lodt"));
/// assert!(!is_uri("ftp://host/a.lodt"));
/// ```
pub fn is_uri(location: &str) -> bool {
    match location.split_once("://") {
        Some((scheme, _)) => SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()),
        None => false,
    }
}
