//! The openers of a URI that [`location`](crate::location) calls once it has
//! decided a location is remote: a `.lodt` object ([`open_object`]) and a
//! dataset's store ([`object_store_for`]).

use super::{ObjectDatasetStore, ObjectSource, RemoteOptions, ResolvedLocation};
use crate::dataset::{DatasetStore, LocalStore};
use crate::format::{FormatError, LodtFile};
use std::sync::Arc;

/// Opens the `.lodt` object at `uri` ([`crate::location::open_file`] for a
/// URI); a local path is opened as [`LodtFile::open`] would.
pub(crate) fn open_object(uri: &str, options: &RemoteOptions) -> Result<LodtFile, FormatError> {
    match ResolvedLocation::parse(uri, options).map_err(|e| FormatError::io(uri, e))? {
        ResolvedLocation::Local(path) => LodtFile::open(path),
        ResolvedLocation::Remote { store, path, uri } => {
            let source = ObjectSource::open(store, path, uri.clone(), options)
                .map_err(|e| FormatError::io(format!("opening {uri}"), e))?;
            LodtFile::from_source(Arc::new(source))
        }
    }
}

/// The [`DatasetStore`] of the dataset at `uri`
/// ([`crate::location::open_store`] for a URI): an [`ObjectDatasetStore`]; a
/// local path gives a [`LocalStore`].
pub(crate) fn object_store_for(
    uri: &str,
    options: &RemoteOptions,
) -> Result<Arc<dyn DatasetStore>, crate::dataset::DatasetError> {
    let parsed = ResolvedLocation::parse(uri, options)
        .map_err(|e| crate::dataset::DatasetError::io("opening", uri.to_owned(), e))?;
    Ok(match parsed {
        ResolvedLocation::Local(dir) => Arc::new(LocalStore::new(dir)),
        ResolvedLocation::Remote { store, path, uri } => {
            Arc::new(ObjectDatasetStore::new(store, path, uri, options.clone()))
        }
    })
}
