//! [`ConvertError`]: what can go wrong converting.

use super::*;

/// An error converting a dataset.
///
/// ```
/// let err = lodt::convert::Format::from_path("x.txt").unwrap_err();
/// assert!(err.to_string().contains("x.txt"));
/// assert!(err.to_string().contains(".pdiparams, .idx or .bin, or a dataset directory"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The extension names no supported format, and the path is no dataset
    /// directory (see [`Endpoint::output`]).
    #[error(
        "cannot tell the format of {path}: expected {}, or a dataset directory (an existing directory, a path ending in /, or a new path with no extension)",
        known_extensions()
    )]
    UnknownExtension {
        /// The path.
        path: String,
    },
    /// The format needs a cargo feature this build lacks.
    #[error("{format} needs lodt built with the `{feature}` feature")]
    FeatureMissing {
        /// The format.
        format: &'static str,
        /// The feature.
        feature: &'static str,
    },
    /// The conversion cannot be expressed in the output format.
    #[error("{0}")]
    Unsupported(String),
    /// An error of the `.lodt` format.
    #[error(transparent)]
    Format(#[from] format::FormatError),
    /// An error of the Paddle format.
    #[error(transparent)]
    Paddle(#[from] paddle::PaddleError),
    /// An error of Arrow, Parquet or their mapping.
    #[cfg(feature = "arrow")]
    #[error(transparent)]
    Arrow(#[from] crate::arrow::ArrowError),
    /// An error of an MDS dataset.
    #[error(transparent)]
    Mds(#[from] crate::mds::MdsError),
    /// An error of a Megatron indexed dataset.
    #[error(transparent)]
    Megatron(#[from] crate::megatron::MegatronError),
    /// An error of a dataset input or output.
    #[error(transparent)]
    Dataset(#[from] crate::dataset::DatasetError),
    /// An error of the LoD model.
    #[error(transparent)]
    Core(#[from] crate::Error),
    /// An I/O error.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// An error of a safe write (see [`crate::atomic`]): among them
    /// [`AtomicError::SameFile`], an output that is the input, and
    /// [`AtomicError::Locked`], an output another process is writing.
    #[error(transparent)]
    Atomic(#[from] AtomicError),
}

/// The error for a format this build lacks.
pub(super) fn missing(format: Format) -> ConvertError {
    ConvertError::FeatureMissing {
        format: format.name(),
        feature: format.feature().unwrap_or_default(),
    }
}
