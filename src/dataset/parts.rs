//! The parts of a parallel write (`spec/DATASET.md` section 5.4): listing
//! the partial manifests waiting for their merge ([`Dataset::list_parts`])
//! and deleting the parts of writers whose work is abandoned
//! ([`Dataset::remove_parts`]), and the objects no manifest lists
//! ([`Dataset::unlisted`]). Merging them is
//! [`Dataset::commit_parts_with`]; the names are those of module `names`
//! ([`part_manifest_name`](super::part_manifest_name),
//! [`part_shard_prefix`](super::part_shard_prefix)).

use super::error::Result;
use super::manifest::Manifest;
use super::names::{SHARD_SUFFIX, part_writer_id, shard_writer_id};
use super::reader::{Dataset, read_manifest};
use super::store::DatasetStore;
use std::collections::HashSet;

/// One part of a parallel write: the partial manifest of writer
/// `writer_id`, waiting to be merged into the dataset's manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The writer's id.
    pub writer_id: String,
    /// The partial manifest's object name (`lodt-dataset.part.ID.json`).
    pub name: String,
    /// The partial manifest: the part's shards, and the commit ids of the
    /// writes that finished it.
    pub manifest: Manifest,
}

impl Dataset {
    /// The parts waiting in `store` for [`Dataset::commit_parts_with`], in
    /// the order of their names (the order a merge takes them in), each
    /// partial manifest read and checked. One deleted between the listing
    /// and its read (merged meanwhile) is left out; one that cannot be read
    /// or parsed is an error.
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, LocalStore};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let store = LocalStore::new(dir.path());
    /// for id in ["w2", "w1"] {
    ///     let mut w = DatasetWriter::create_part(dir.path(), id, Default::default())?;
    ///     w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)])?)?;
    ///     w.finish()?;
    /// }
    /// let parts = Dataset::list_parts(&store)?;
    /// let ids: Vec<&str> = parts.iter().map(|p| p.writer_id.as_str()).collect();
    /// assert_eq!(ids, ["w1", "w2"]);
    /// assert_eq!(parts[0].manifest.shards[0].name, "w1-shard-000000.lodt");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn list_parts(store: &dyn DatasetStore) -> Result<Vec<Part>> {
        let mut parts = Vec::new();
        for name in names(store)?.unwrap_or_default() {
            parts.extend(read_part(store, &name)?);
        }
        Ok(parts)
    }

    /// Deletes what the part writers for which `stale(writer_id)` holds
    /// left in `store`: their partial manifests first (so that no merge
    /// takes them in), then their shards (`ID-shard-NNNNNN.lodt`, also those
    /// of a writer that stopped before writing its partial manifest) that
    /// the dataset's manifest does not list. A shard the manifest lists is
    /// never deleted. Returns the names deleted, in that order.
    ///
    /// It holds the dataset's writer lock, so no merge or append changes the
    /// manifest meanwhile (in a store with locks; object stores have none:
    /// one cleaner or merger at a time there). If the manifest cannot be
    /// read, nothing is deleted.
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetStore, DatasetWriter, LocalStore};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let store = LocalStore::new(dir.path());
    /// for id in ["keep", "gone"] {
    ///     let mut w = DatasetWriter::create_part(dir.path(), id, Default::default())?;
    ///     w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    ///     w.finish()?;
    /// }
    /// let removed = Dataset::remove_parts(&store, &|id: &str| id == "gone")?;
    /// assert_eq!(removed, ["lodt-dataset.part.gone.json", "gone-shard-000000.lodt"]);
    /// assert_eq!(store.list()?, ["keep-shard-000000.lodt", "lodt-dataset.part.keep.json"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_parts(
        store: &dyn DatasetStore,
        stale: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>> {
        if names(store)?.is_none() {
            return Ok(Vec::new()); // nothing there, not even the directory
        }
        let _lock = store.lock()?;
        remove_parts_locked(store, stale)
    }

    /// Objects of the dataset's location that the manifest does not list:
    /// `.lodt` files (shards of an interrupted writer, or of parts not yet
    /// merged) and partial manifests waiting for
    /// [`Dataset::commit_parts`]. Hidden files (temporary files of live
    /// writers) are left out.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// std::fs::write(dir.path().join("stray.lodt"), b"")?;
    /// let dataset = lodt::dataset::Dataset::open(dir.path())?;
    /// assert_eq!(dataset.unlisted()?, vec!["stray.lodt".to_string()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unlisted(&self) -> Result<Vec<String>> {
        let listed: HashSet<&str> = self
            .manifest()
            .shards
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        Ok(self
            .store()
            .list()?
            .into_iter()
            .filter(|n| !n.starts_with('.'))
            .filter(|n| {
                (n.ends_with(SHARD_SUFFIX) && !listed.contains(n.as_str()))
                    || part_writer_id(n).is_some()
            })
            .collect())
    }
}

/// The names of the objects of `store`, sorted; `None` if its location does
/// not exist (a local directory not yet made: no objects).
pub(crate) fn names(store: &dyn DatasetStore) -> Result<Option<Vec<String>>> {
    match store.list() {
        Ok(names) => Ok(Some(names)),
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The part whose partial manifest is object `name`: `None` if `name` is
/// not a partial manifest's, or there is no such object (any more).
pub(crate) fn read_part(store: &dyn DatasetStore, name: &str) -> Result<Option<Part>> {
    let Some(id) = part_writer_id(name) else {
        return Ok(None);
    };
    let Some(bytes) = store.read(name)? else {
        return Ok(None);
    };
    Ok(Some(Part {
        writer_id: id.to_owned(),
        name: name.to_owned(),
        manifest: Manifest::from_json_bytes(&bytes, &store.object_location(name))?,
    }))
}

/// [`Dataset::remove_parts`], the caller holding the dataset's writer lock.
pub(crate) fn remove_parts_locked(
    store: &dyn DatasetStore,
    stale: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>> {
    let listed: HashSet<String> = read_manifest(store)?
        .map(|m| m.shards.into_iter().map(|s| s.name).collect())
        .unwrap_or_default();
    let names = names(store)?.unwrap_or_default();
    let manifests = names
        .iter()
        .filter(|n| part_writer_id(n).is_some_and(stale));
    let shards = names
        .iter()
        .filter(|n| !listed.contains(n.as_str()) && shard_writer_id(n).is_some_and(stale));
    let doomed: Vec<String> = manifests.chain(shards).cloned().collect();
    for name in &doomed {
        store.remove(name)?;
    }
    Ok(doomed)
}

#[cfg(test)]
#[path = "parts_tests.rs"]
mod tests;
