//! lodt's errors as Python exceptions, with the Rust error's message.
//!
//! | lodt error                                   | Python exception |
//! |----------------------------------------------|------------------|
//! | invalid LoD, shape, data length, bool, argument, overflow, corrupt or damaged file | `ValueError` |
//! | dtype mismatch, unsupported Arrow type       | `TypeError`      |
//! | index out of range, no such batch            | `IndexError`     |
//! | no such tensor in a batch                    | `KeyError`       |
//! | I/O (file not found, permission, ...)        | `OSError` (its subclass by kind) |
//! | a file another process is writing (its lock) | `BlockingIOError` |
//! | refusing to overwrite the input, or a non-file | `OSError`      |
//! | a directory with no dataset manifest         | `FileNotFoundError` |
//! | a dataset that exists where a new one was asked for | `FileExistsError` |
//! | a bad manifest, shard or loader state, a schema mismatch | `ValueError` |
//! | the loader's background reader failed, a Rust panic | `RuntimeError` |

use lodt::arrow::ArrowError;
use lodt::atomic::AtomicError;
use lodt::convert::ConvertError;
use lodt::dataset::DatasetError;
use lodt::format::FormatError;
use lodt::paddle::PaddleError;
use pyo3::PyErr;
use pyo3::exceptions::{
    PyBlockingIOError, PyFileExistsError, PyFileNotFoundError, PyIndexError, PyKeyError,
    PyMemoryError, PyOSError, PyPermissionError, PyRuntimeError, PyTypeError, PyValueError,
};

/// A `PyResult` of this crate.
pub type PyResult<T> = pyo3::PyResult<T>;

fn io(err: &std::io::Error, message: String) -> PyErr {
    match err.kind() {
        std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
        std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
        std::io::ErrorKind::AlreadyExists => PyFileExistsError::new_err(message),
        _ => PyOSError::new_err(message),
    }
}

/// The exception of a safe-write error: I/O by kind, a held writer lock as
/// `BlockingIOError`, same-file and not-a-file refusals as `OSError`.
pub fn atomic(err: AtomicError) -> PyErr {
    let message = err.to_string();
    match err {
        AtomicError::Io { ref source, .. } => io(source, message),
        AtomicError::Locked { .. } => PyBlockingIOError::new_err(message),
        AtomicError::Occupied { .. } => PyFileExistsError::new_err(message),
        _ => PyOSError::new_err(message),
    }
}

/// The exception of a core (LoD model) error.
pub fn core(err: lodt::Error) -> PyErr {
    let message = err.to_string();
    match err {
        lodt::Error::DTypeMismatch { .. } => PyTypeError::new_err(message),
        lodt::Error::OutOfRange { .. } => PyIndexError::new_err(message),
        lodt::Error::OutOfMemory { .. } => PyMemoryError::new_err(message),
        _ => PyValueError::new_err(message),
    }
}

/// The exception of a `.lodt` format error.
pub fn format(err: FormatError) -> PyErr {
    let message = err.to_string();
    match err {
        FormatError::Io { ref source, .. } => io(source, message),
        FormatError::NoSuchBatch { .. } => PyIndexError::new_err(message),
        FormatError::NoSuchTensor { .. } => PyKeyError::new_err(message),
        FormatError::Core(e) => core(e),
        FormatError::Atomic(e) => atomic(e),
        _ => PyValueError::new_err(message),
    }
}

/// The exception of a Paddle format error.
pub fn paddle(err: PaddleError) -> PyErr {
    let message = err.to_string();
    if let PaddleError::Atomic(_) = err.root() {
        return match err {
            PaddleError::Atomic(e) => atomic(e),
            _ => PyOSError::new_err(message),
        };
    }
    match err.root() {
        PaddleError::Io(source) => io(source, message),
        PaddleError::Core(lodt::Error::DTypeMismatch { .. }) => PyTypeError::new_err(message),
        _ => PyValueError::new_err(message),
    }
}

/// The exception of an Arrow mapping error.
pub fn arrow(err: ArrowError) -> PyErr {
    let message = err.to_string();
    match err {
        ArrowError::Core(e) => core(e),
        ArrowError::Format(e) => format(*e),
        ArrowError::Io(ref source) => io(source, message),
        ArrowError::Unsupported { .. } => PyTypeError::new_err(message),
        _ => PyValueError::new_err(message),
    }
}

/// The exception of a conversion error.
pub fn convert(err: ConvertError) -> PyErr {
    let message = err.to_string();
    match err {
        ConvertError::Format(e) => format(e),
        ConvertError::Paddle(e) => paddle(e),
        ConvertError::Arrow(e) => arrow(e),
        ConvertError::Core(e) => core(e),
        ConvertError::Io { ref source, .. } => io(source, message),
        ConvertError::Atomic(e) => atomic(e),
        ConvertError::Dataset(e) => dataset(e),
        _ => PyValueError::new_err(message),
    }
}

/// The exception of a sharded-dataset error (the message names the dataset,
/// shard or state, and what was expected and found).
pub fn dataset(err: DatasetError) -> PyErr {
    let message = err.to_string();
    // Memory refused: MemoryError, never a ValueError (it is not damage).
    if err.io_kind() == Some(std::io::ErrorKind::OutOfMemory) {
        return PyMemoryError::new_err(message);
    }
    match err {
        DatasetError::NotADataset { .. } => PyFileNotFoundError::new_err(message),
        DatasetError::AlreadyExists { .. } => PyFileExistsError::new_err(message),
        DatasetError::Locked { .. } | DatasetError::ManifestChanged { .. } => {
            PyBlockingIOError::new_err(message)
        }
        DatasetError::Io { ref source, .. } => io(source, message),
        DatasetError::Atomic(e) => atomic(e),
        DatasetError::Shard { ref source, .. } => match source.as_ref() {
            FormatError::Io { source, .. } => io(source, message),
            _ => PyValueError::new_err(message),
        },
        DatasetError::OutOfRange { .. } => PyIndexError::new_err(message),
        DatasetError::NoSuchVersion { .. } | DatasetError::NoSuchTag { .. } => {
            pyo3::exceptions::PyKeyError::new_err(message)
        }
        DatasetError::TagExists { .. } => PyFileExistsError::new_err(message),
        DatasetError::Tensor {
            source: lodt::Error::DTypeMismatch { .. },
            ..
        } => PyTypeError::new_err(message),
        DatasetError::Loader(_) => PyRuntimeError::new_err(message),
        _ => PyValueError::new_err(message),
    }
}

/// Runs `f`, turning a Rust panic into a `RuntimeError` (pyo3 would raise
/// `PanicException`, a `BaseException` that `except Exception` misses).
pub fn guard<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let reason = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            Err(PyRuntimeError::new_err(format!(
                "lodt failed {what}: a Rust panic ({reason}); this is a bug in lodt, please report it"
            )))
        }
    }
}

/// The exception of an error of arrow-rs itself (C data interface, schemas).
pub fn arrow_rs(err: arrow_schema::ArrowError) -> PyErr {
    match err {
        arrow_schema::ArrowError::NotYetImplemented(_) => PyTypeError::new_err(err.to_string()),
        arrow_schema::ArrowError::IoError(ref message, ref source) => io(source, message.clone()),
        _ => PyValueError::new_err(err.to_string()),
    }
}

/// A `ValueError` with `message`.
pub fn value(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// A `TypeError` with `message`.
pub fn type_error(message: impl Into<String>) -> PyErr {
    PyTypeError::new_err(message.into())
}

/// An `IndexError` with `message`.
pub fn index(message: impl Into<String>) -> PyErr {
    PyIndexError::new_err(message.into())
}
