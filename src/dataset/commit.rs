//! Committing a manifest when the store's answer may be lost: commit ids,
//! deciding the outcome of a failed conditional write by reading the
//! manifest again (`spec/DATASET.md` section 5.3), and
//! [`Dataset::commit_parts`].
//!
//! A failed write of a manifest is an *unknown outcome*: the store may have
//! carried it out and lost its answer (a dropped connection, a timeout), and
//! a request the client retried then fails its own condition (HTTP 412).
//! So the writer reads the manifest again and decides:
//!
//! | read again | the write was | reported |
//! |------------|---------------|----------|
//! | lists this write (its commit id, or a checkpoint's shards) | committed | success |
//! | another writer's manifest, not this write | not committed | [`DatasetError::ManifestChanged`] |
//! | the manifest this writer replaced, unchanged | not committed | [`DatasetError::NotCommitted`] |
//! | cannot be read | unknown | [`DatasetError::CommitUnknown`] |

use super::error::{DatasetError, Result};
use super::index::{HEAD_BYTES, IndexPointer, manifest_with_index};
use super::manifest::{Manifest, merge_manifests};
use super::names::{MANIFEST_NAME, part_writer_id, valid_commit_id};
use super::reader::{Dataset, read_manifest_versioned};
use super::store::{DatasetStore, LocalStore, ObjectVersion};
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::sync::Arc;

/// A new commit id: 32 lowercase hex digits (128 bits seeded by the
/// operating system's randomness, the time, the process and a counter), as
/// writers draw when none is given.
///
/// ```
/// let id = lodt::dataset::new_commit_id();
/// assert!(lodt::dataset::names::valid_commit_id(&id) && id.len() == 32);
/// assert_ne!(id, lodt::dataset::new_commit_id());
/// ```
pub fn new_commit_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let half = |salt: u64| {
        // Each RandomState has fresh random keys (std seeds them from the OS).
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_u64(count);
        h.write_u64(salt);
        h.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// The commit id `given`, checked, or a new one.
pub(crate) fn commit_id_or_new(given: Option<&str>) -> Result<String> {
    match given {
        None => Ok(new_commit_id()),
        Some(id) if valid_commit_id(id) => Ok(id.to_owned()),
        Some(id) => Err(DatasetError::InvalidArgument(format!(
            "commit id {id:?}: expected 1 to 128 ASCII letters, digits, '.', '_' or '-'"
        ))),
    }
}

/// What shows, in a manifest read again, that a write is in it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Evidence<'a> {
    /// The write's commit id is listed (a write's final commit, which
    /// records it).
    Id,
    /// Every one of these shards is listed (a checkpoint, which records no
    /// id: the shard names are this writer's own); with none, the manifest
    /// read again is the one written.
    Shards(&'a [String]),
}

/// Where a commit left the manifest.
#[derive(Debug)]
pub(crate) enum Committed {
    /// The manifest as written, now at this version.
    AsWritten(ObjectVersion),
    /// The write was found committed in the manifest read again (the
    /// answer to it was lost): that manifest (which may hold later commits
    /// of others too) and its version.
    Found(Manifest, ObjectVersion),
}

/// Writes `manifest` as object `target` if it is still at version `base`
/// (`None`: if there is none). If that fails, reads `target` again and
/// decides (module docs): success if `evidence` shows the write is in it,
/// [`DatasetError::ManifestChanged`] if another writer's manifest replaced
/// `base`, [`DatasetError::NotCommitted`] if `base` is still there,
/// [`DatasetError::CommitUnknown`] if it cannot be read. A part's final
/// commit also counts as committed when the main manifest lists its id (a
/// merge took the part in meanwhile).
///
/// The main manifest is written with its shard index (`spec/DATASET.md`
/// section 3.2): the index first, under a name of this commit's, then the
/// manifest naming it; once the manifest is in, the index the replaced
/// manifest named is deleted; if the manifest was not written, the new
/// index is.
pub(crate) fn commit_manifest(
    store: &dyn DatasetStore,
    target: &str,
    manifest: &Manifest,
    base: Option<&ObjectVersion>,
    commit_id: &str,
    evidence: Evidence<'_>,
) -> Result<Committed> {
    let mut index = None;
    let json = if target == MANIFEST_NAME {
        let (json, written, bytes) = manifest_with_index(manifest, commit_id);
        let previous = named_index(store);
        store.write_atomic(&written.name, &bytes)?;
        index = Some(IndexSwap { previous, written });
        json
    } else {
        manifest.to_json_bytes()
    };
    let outcome = decide(store, target, manifest, &json, base, commit_id, evidence);
    // A final commit of the main manifest, confirmed: keep its version's copy.
    if target == MANIFEST_NAME
        && matches!(evidence, Evidence::Id)
        && outcome.is_ok()
        && let Some(record) = &manifest.commit
    {
        super::versions::keep_version(store, record.version, &json);
    }
    if let Some(index) = index {
        index.finish(store, &outcome);
    }
    outcome
}

/// The index a commit wrote, and the one the manifest it replaces named.
struct IndexSwap {
    previous: Option<String>,
    written: IndexPointer,
}

impl IndexSwap {
    /// Deletes the index no manifest names any more (best effort: a left-over
    /// index is never read, for no manifest names it): the replaced one if
    /// the commit landed, the new one if it surely did not; neither if the
    /// outcome is unknown.
    fn finish(self, store: &dyn DatasetStore, outcome: &Result<Committed>) {
        // A checkpoint's later manifest: the same commit, the same index name.
        if self.previous.as_deref() == Some(self.written.name.as_str()) {
            return;
        }
        let stale = match outcome {
            Ok(_) => self.previous,
            Err(DatasetError::NotCommitted { .. } | DatasetError::ManifestChanged { .. }) => {
                Some(self.written.name.clone())
            }
            Err(_) => None,
        };
        if let Some(name) = stale {
            let _ = store.remove(&name);
        }
    }
}

/// The name of the index the main manifest of `store` names now, if any.
fn named_index(store: &dyn DatasetStore) -> Option<String> {
    let (head, _) = store.read_head(MANIFEST_NAME, HEAD_BYTES).ok()??;
    IndexPointer::from_head(&head).map(|p| p.name)
}

/// Writes `json` (the text of `manifest`) as `target` if still at `base`,
/// and decides a failure's outcome (see [`commit_manifest`]).
fn decide(
    store: &dyn DatasetStore,
    target: &str,
    manifest: &Manifest,
    json: &[u8],
    base: Option<&ObjectVersion>,
    commit_id: &str,
    evidence: Evidence<'_>,
) -> Result<Committed> {
    let failure = match store.write_if(target, json, base) {
        Ok(version) => return Ok(Committed::AsWritten(version)),
        // Refused before anything was sent.
        Err(e @ DatasetError::InvalidArgument(_)) => return Err(e),
        Err(e) => e,
    };
    let path = store.object_location(target);
    let cause = failure.to_string();
    let unknown = |check: DatasetError| DatasetError::CommitUnknown {
        path: path.clone(),
        commit_id: commit_id.to_owned(),
        cause: cause.clone(),
        check: check.to_string(),
    };
    let found = read_manifest_versioned(store, target).map_err(unknown)?;
    let shows = |m: &Manifest| match evidence {
        Evidence::Id => m.has_commit(commit_id),
        // A checkpoint that adds no shard shows only as the manifest itself.
        Evidence::Shards([]) => m == manifest,
        Evidence::Shards(names) => {
            let listed: HashSet<&str> = m.shards.iter().map(|s| s.name.as_str()).collect();
            names.iter().all(|n| listed.contains(n.as_str()))
        }
    };
    let unchanged = match (&found, base) {
        (None, None) => true,
        (Some((_, version)), Some(base)) => version == base,
        _ => false,
    };
    if let Some((m, version)) = found
        && shows(&m)
    {
        return Ok(Committed::Found(m, version));
    }
    if target != MANIFEST_NAME
        && matches!(evidence, Evidence::Id)
        && let Some((main, version)) =
            read_manifest_versioned(store, MANIFEST_NAME).map_err(unknown)?
        && main.has_commit(commit_id)
    {
        return Ok(Committed::Found(main, version));
    }
    if unchanged {
        return Err(DatasetError::NotCommitted {
            path,
            commit_id: commit_id.to_owned(),
            cause,
        });
    }
    Err(DatasetError::ManifestChanged {
        path,
        commit_id: commit_id.to_owned(),
    })
}

impl Dataset {
    /// Merges the partial manifests of the dataset in directory `dir` into
    /// its manifest (creating it if there is none), then deletes them. See
    /// [`Dataset::commit_parts_in`].
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let mut w = lodt::dataset::DatasetWriter::create_part(dir.path(), "host1", Default::default())?;
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// w.finish()?;
    /// let manifest = lodt::dataset::Dataset::commit_parts(dir.path())?;
    /// assert_eq!(manifest.shards[0].name, "host1-shard-000000.lodt");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn commit_parts(dir: impl AsRef<Path>) -> Result<Manifest> {
        Self::commit_parts_in(Arc::new(LocalStore::new(dir)))
    }

    /// Merges every partial manifest of `store` (`lodt-dataset.part.ID.json`,
    /// in the order of their names) into the manifest with
    /// [`merge_manifests`](super::merge_manifests), refusing conflicts;
    /// checks that each new shard is there with the size, batch count and
    /// footer CRC its part records; writes the manifest atomically; then
    /// deletes the partial manifests. With a new commit id: see
    /// [`Dataset::commit_parts_with`].
    ///
    /// It holds the dataset's writer lock, and each partial manifest's lock
    /// while it works, so a part writer finishing meanwhile fails (rather
    /// than losing its shards) and can finish again. Merging is idempotent:
    /// if it stops between writing the manifest and deleting the parts, the
    /// next merge finds their shards already listed, identical, and keeps
    /// them once.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// let manifest = lodt::dataset::Dataset::commit_parts_in(store)?; // no parts: an empty dataset
    /// assert_eq!(manifest.num_shards(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn commit_parts_in(store: Arc<dyn DatasetStore>) -> Result<Manifest> {
        Self::commit_parts_with(store, None)
    }

    /// [`Dataset::commit_parts_in`] as the write of commit id `commit_id`
    /// (`None`: a new one), which the new manifest lists last
    /// (`manifest.commits.last()`) together with the parts' own ids. If
    /// the manifest already lists `commit_id`, this merge was committed
    /// before (its answer lost): the manifest is returned and nothing is
    /// written. Parts that add nothing to the manifest (merged before, by
    /// a merge stopped before deleting them) are deleted, and nothing is
    /// written either. A failed write of the manifest is decided as the writer's
    /// (module [`crate::dataset`]: success if the manifest, read again,
    /// lists the id).
    ///
    /// ```
    /// use lodt::dataset::{Dataset, DatasetWriter, LocalStore};
    /// use lodt::{Batch, LodTensor};
    /// # let dir = tempfile::tempdir()?;
    /// let store = std::sync::Arc::new(LocalStore::new(dir.path()));
    /// let mut w = DatasetWriter::create_part_in(store.clone(), "w1", Default::default())?;
    /// w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// w.finish()?;
    /// let merged = Dataset::commit_parts_with(store.clone(), Some("merge-1"))?;
    /// assert_eq!(merged.commits.last().map(String::as_str), Some("merge-1"));
    /// // Retried with the same id: committed already, nothing is written.
    /// assert_eq!(Dataset::commit_parts_with(store, Some("merge-1"))?.num_sequences(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn commit_parts_with(
        store: Arc<dyn DatasetStore>,
        commit_id: Option<&str>,
    ) -> Result<Manifest> {
        let commit_id = commit_id_or_new(commit_id)?;
        let _lock = store.lock()?;
        let (base, base_version) = match read_manifest_versioned(&*store, MANIFEST_NAME)? {
            Some((m, v)) => (Some(m), Some(v)),
            None => (None, None),
        };
        if let Some(base) = &base
            && base.has_commit(&commit_id)
        {
            return Ok(base.clone());
        }
        let mut locks = Vec::new();
        let mut names = Vec::new();
        let mut parts = Vec::new();
        for name in store.list()? {
            if part_writer_id(&name).is_none() {
                continue;
            }
            let Some(lock) = store.lock_object(&name)? else {
                continue;
            };
            let Some(bytes) = store.read(&name)? else {
                continue;
            };
            parts.push(Manifest::from_json_bytes(
                &bytes,
                &store.object_location(&name),
            )?);
            locks.push(lock);
            names.push(name);
        }
        if parts.is_empty()
            && let Some(base) = base
        {
            return Ok(base);
        }
        let mut merged = merge_manifests(base.as_ref(), &parts)?;
        if let Some(base) = &base
            && merged == *base
        {
            // The parts were merged before (a merge stopped before deleting
            // them): nothing to write.
            for name in &names {
                store.remove(name)?;
            }
            return Ok(merged);
        }
        super::versions::prepare_commit(
            &*store,
            &mut merged,
            base.is_some(),
            Some(("merge", &commit_id)),
            None,
        )?;
        merged.record_commit(&commit_id);
        let old: HashSet<&str> = base
            .iter()
            .flat_map(|m| m.shards.iter().map(|s| s.name.as_str()))
            .collect();
        let check = Dataset::from_manifest(store.clone(), merged);
        for (s, entry) in check.manifest().shards.iter().enumerate() {
            if !old.contains(entry.name.as_str()) {
                check.check_shard(s)?;
            }
        }
        let merged = check.into_manifest();
        let merged = match commit_manifest(
            &*store,
            MANIFEST_NAME,
            &merged,
            base_version.as_ref(),
            &commit_id,
            Evidence::Id,
        )? {
            Committed::AsWritten(_) => merged,
            Committed::Found(found, _) => found,
        };
        for name in &names {
            store.remove(name)?;
        }
        drop(locks);
        Ok(merged)
    }
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;

impl Dataset {
    /// Writes the shard index of the dataset in `store` (`spec/DATASET.md`
    /// section 3.2) if its manifest names none that agrees with it (a
    /// dataset written before lodt wrote indexes, or whose index is
    /// missing or damaged): the index, then the manifest naming it (a
    /// conditional replace under the writer lock, which changes nothing
    /// else and records no commit id). Returns whether it wrote one. Every
    /// commit writes its index anyway; this is for datasets that lack one.
    ///
    /// ```
    /// # use lodt::{Batch, LodTensor};
    /// use lodt::dataset::{Dataset, LocalStore};
    /// # let dir = tempfile::tempdir()?;
    /// # let mut w = lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?;
    /// # w.write(&Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8], vec![1], Default::default())?)])?)?;
    /// # w.finish()?;
    /// let store = std::sync::Arc::new(LocalStore::new(dir.path()));
    /// assert!(!Dataset::write_index_in(store.clone())?); // the writer wrote one
    /// for e in std::fs::read_dir(dir.path())? {
    ///     let path = e?.path();
    ///     if path.file_name().unwrap().to_string_lossy().starts_with("lodt-dataset.index.") {
    ///         std::fs::remove_file(path)?;
    ///     }
    /// }
    /// assert!(!Dataset::open(dir.path())?.is_indexed());
    /// assert!(Dataset::write_index_in(store)?);
    /// assert!(Dataset::open(dir.path())?.is_indexed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_index_in(store: Arc<dyn DatasetStore>) -> Result<bool> {
        // No manifest: not a dataset (before the lock, which would make a
        // lock file where there is nothing).
        if Dataset::open_in(store.clone())?.is_indexed() {
            return Ok(false);
        }
        let _lock = store.lock()?;
        let Some((mut manifest, version)) = read_manifest_versioned(&*store, MANIFEST_NAME)? else {
            return Err(DatasetError::NotADataset {
                path: store.location(),
            });
        };
        manifest.version = super::manifest::ManifestVersion::CURRENT;
        super::versions::prepare_commit(&*store, &mut manifest, true, None, None)?;
        let id = new_commit_id();
        commit_manifest(
            &*store,
            MANIFEST_NAME,
            &manifest,
            Some(&version),
            &id,
            Evidence::Shards(&[]),
        )?;
        Ok(true)
    }
}
