//! [`MegatronError`]: what can go wrong reading or writing Megatron's
//! indexed datasets.

use std::io;

/// An error reading or writing a Megatron `.bin`/`.idx` pair. Every error
/// from the files' bytes names the file and what was expected and found.
///
/// ```
/// let err = lodt::megatron::MegatronReader::open("/no/such/prefix").err().unwrap();
/// assert!(err.to_string().contains("/no/such/prefix.idx"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MegatronError {
    /// The index or data file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The index does not describe a valid dataset, or does not fit its
    /// data file.
    #[error("{path} is not a valid Megatron index: {what}: expected {expected}, found {found}")]
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
    /// What a Megatron dataset cannot hold (a dtype, a tensor with no LoD),
    /// or what this reader does not read (a multimodal index).
    #[error("{0}")]
    Unsupported(String),
    /// An error of the LoD model (building a tensor).
    #[error(transparent)]
    Core(#[from] crate::Error),
    /// Placing the written files (temp file and rename).
    #[error(transparent)]
    Atomic(#[from] crate::atomic::AtomicError),
}

/// The result type of this module.
pub type Result<T, E = MegatronError> = std::result::Result<T, E>;

pub(super) fn io(path: &std::path::Path) -> impl FnOnce(io::Error) -> MegatronError + '_ {
    move |source| MegatronError::Io {
        path: path.display().to_string(),
        source,
    }
}
