//! [`MdsError`]: what can go wrong reading an MDS dataset.

/// An error reading an MDS dataset: every error from the files' bytes
/// names the file and what was expected and found.
///
/// ```
/// let err = lodt::mds::MdsReader::open("/no/such/dir").err().unwrap();
/// assert!(err.to_string().contains("index.json"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MdsError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The index or a shard does not follow the layout.
    #[error("{path} is not a valid MDS {what}: expected {expected}, found {found}")]
    Corrupt {
        /// The file.
        path: String,
        /// The part that is wrong.
        what: String,
        /// What the layout requires.
        expected: String,
        /// What the file holds.
        found: String,
    },
    /// What lodt does not read (an encoding, a codec).
    #[error("{0}")]
    Unsupported(String),
    /// An error of the LoD model (building a tensor).
    #[error(transparent)]
    Core(#[from] crate::Error),
}

/// The result type of this module.
pub type Result<T, E = MdsError> = std::result::Result<T, E>;

/// The [`MdsError::Corrupt`] of `what` in `path`.
pub(super) fn corrupt(
    path: &str,
    what: &str,
    expected: impl ToString,
    found: impl ToString,
) -> MdsError {
    MdsError::Corrupt {
        path: path.to_owned(),
        what: what.to_owned(),
        expected: expected.to_string(),
        found: found.to_string(),
    }
}
