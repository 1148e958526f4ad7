//! Dataset versions and tags (`spec/DATASET.md` section 3.3).
//!
//! Every final commit of the main manifest (a create, an append, a merge of
//! parts) makes a new **version**, numbered from 1: the manifest records it
//! in its `commit` field ([`CommitRecord`]), and a copy of the manifest is
//! kept as `lodt-dataset.version.N.json` ([`version_manifest_name`]). The
//! copy is written only once the commit is confirmed, and every commit first
//! makes sure the copy of the version it builds on exists (written if absent
//! from the manifest it read), so a crash between the two writes loses no
//! version. A **tag** names a version, once: `lodt-dataset.tag.NAME.json`.

use super::commit_record::{CommitRecord, UNRECORDED, utc_now};
use super::error::{DatasetError, Result};
use super::manifest::Manifest;
use super::names::{
    MANIFEST_NAME, tag_object_name, tag_of_name, valid_tag_name, version_manifest_name,
    version_of_name,
};
use super::reader::{Dataset, read_manifest};
use super::store::{DatasetStore, LocalStore};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

impl CommitRecord {
    /// The record of a version whose manifest records none (`content`, the
    /// manifest of version `version`): [`UNRECORDED`], its totals, the last
    /// commit id it lists.
    fn unrecorded(version: u64, content: &Manifest) -> CommitRecord {
        CommitRecord {
            version,
            time: None,
            commit_id: content.commits.last().cloned(),
            operation: UNRECORDED.to_owned(),
            sequences: content.num_sequences(),
            bytes: content.num_bytes(),
            sequences_added: 0,
            sequences_removed: 0,
            bytes_added: 0,
            bytes_removed: 0,
        }
    }
}

/// A tag: a name given to one version, for good (`spec/DATASET.md`
/// section 3.3).
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
/// let tag = lodt::dataset::Dataset::tag(dir.path(), "run-1", None)?;
/// assert_eq!((tag.name.as_str(), tag.version), ("run-1", 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    /// The tag's name.
    pub name: String,
    /// The version it names.
    pub version: u64,
    /// When it was made (UTC, `YYYY-MM-DDTHH:MM:SSZ`).
    pub time: String,
}

/// The JSON object of a tag.
#[derive(Serialize, Deserialize)]
struct TagObject {
    format: String,
    #[serde(flatten)]
    tag: Tag,
}

/// The `format` of a tag object.
const TAG_FORMAT: &str = "lodt-dataset-tag";

/// The version numbers of the kept version manifests of `store`, sorted.
fn listed_versions(store: &dyn DatasetStore) -> Result<Vec<u64>> {
    let mut v: Vec<u64> = store
        .list()?
        .iter()
        .filter_map(|n| version_of_name(n))
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// The version number of `manifest`, the main manifest of `store`: its
/// record's, or, for a manifest with no record, one more than the largest
/// kept version (0 if none is kept).
fn number_of(store: &dyn DatasetStore, manifest: &Manifest) -> Result<u64> {
    match &manifest.commit {
        Some(r) => Ok(r.version),
        None => Ok(listed_versions(store)?
            .last()
            .map_or(0, |n| n.saturating_add(1))),
    }
}

/// Writes object `name` as `bytes` unless it exists (a conditional create
/// on an object store; in a local directory the caller holds the writer
/// lock). Returns whether this call created it. A failed create is decided
/// by reading the object again: there (this call's, or another writer's
/// first) is success; absent is the error.
fn write_if_absent(store: &dyn DatasetStore, name: &str, bytes: &[u8]) -> Result<bool> {
    if store.read_head(name, 0)?.is_some() {
        return Ok(false);
    }
    match store.write_if(name, bytes, None) {
        Ok(_) => Ok(true),
        Err(e @ DatasetError::InvalidArgument(_)) => Err(e),
        Err(e) => match store.read_head(name, 0) {
            Ok(Some(_)) => Ok(false),
            _ => Err(e),
        },
    }
}

/// Makes sure version `n`'s manifest is kept, backfilling it from the main
/// manifest if that is still version `n` (a commit that stopped between its
/// manifest and its copy). Called by every commit before it replaces the
/// main manifest.
fn ensure_kept(store: &dyn DatasetStore, n: u64) -> Result<()> {
    let name = version_manifest_name(n);
    if store.read_head(&name, 0)?.is_some() {
        return Ok(());
    }
    let Some(bytes) = store.read(MANIFEST_NAME)? else {
        return Ok(());
    };
    let current = Manifest::from_json_bytes(&bytes, &store.object_location(MANIFEST_NAME))?;
    // Changed meanwhile (another writer, on a store without locks): this
    // commit's conditional write fails anyway; the winner keeps its own.
    if number_of(store, &current)? == n {
        write_if_absent(store, &name, &bytes)?;
    }
    Ok(())
}

/// Before a commit of the main manifest (`manifest`, built on the one read,
/// `has_base`): keeps the copy of the version it builds on, and for a
/// writer's final commit (`last`: its operation and commit id) records the
/// new version in `manifest.commit`. Checkpoints keep the record of the
/// version they build on.
pub(crate) fn prepare_commit(
    store: &dyn DatasetStore,
    manifest: &mut Manifest,
    has_base: bool,
    last: Option<(&str, &str)>,
    time: Option<&str>,
) -> Result<()> {
    let base = if has_base {
        let record = match &manifest.commit {
            Some(r) => (**r).clone(),
            None => {
                // Written before versions (or by an older writer): its number
                // and content are the main manifest's as it is now.
                let Some(bytes) = store.read(MANIFEST_NAME)? else {
                    return Ok(());
                };
                let current =
                    Manifest::from_json_bytes(&bytes, &store.object_location(MANIFEST_NAME))?;
                let n = number_of(store, &current)?;
                if current.commit.is_none() {
                    write_if_absent(store, &version_manifest_name(n), &bytes)?;
                }
                CommitRecord::unrecorded(n, &current)
            }
        };
        ensure_kept(store, record.version)?;
        manifest.commit = Some(Box::new(record.clone()));
        Some(record)
    } else {
        None
    };
    if let Some((operation, commit_id)) = last {
        let (sequences, bytes) = (manifest.num_sequences(), manifest.num_bytes());
        let (base_n, base_seq, base_bytes) = base
            .as_ref()
            .map_or((0, 0, 0), |r| (r.version, r.sequences, r.bytes));
        manifest.commit = Some(Box::new(CommitRecord {
            version: base_n.saturating_add(1),
            time: Some(time.map_or_else(utc_now, str::to_owned)),
            commit_id: Some(commit_id.to_owned()),
            operation: operation.to_owned(),
            sequences,
            bytes,
            sequences_added: sequences.saturating_sub(base_seq),
            sequences_removed: base_seq.saturating_sub(sequences),
            bytes_added: bytes.saturating_sub(base_bytes),
            bytes_removed: base_bytes.saturating_sub(bytes),
        }));
    }
    Ok(())
}

/// After a final commit of the main manifest was confirmed: keeps its copy
/// (`json`, the bytes written) as version `n`. Best effort: if this fails,
/// the next commit writes it from the main manifest, and readers of version
/// `n` read the main manifest meanwhile.
pub(crate) fn keep_version(store: &dyn DatasetStore, n: u64, json: &[u8]) {
    let _ = write_if_absent(store, &version_manifest_name(n), json);
}

/// The manifest of version `n` of `store`.
fn version_manifest(store: &dyn DatasetStore, n: u64) -> Result<Manifest> {
    let name = version_manifest_name(n);
    if let Some(bytes) = store.read(&name)? {
        let location = store.object_location(&name);
        let manifest = Manifest::from_json_bytes(&bytes, &location)?;
        if let Some(r) = &manifest.commit
            && r.version != n
        {
            return Err(DatasetError::bad_manifest(
                &location,
                format!("it records version {}, expected {n}", r.version),
            ));
        }
        return Ok(manifest);
    }
    let current = read_manifest(store)?.ok_or_else(|| DatasetError::NotADataset {
        path: store.location(),
    })?;
    let latest = number_of(store, &current)?;
    if latest == n {
        return Ok(current);
    }
    Err(DatasetError::NoSuchVersion {
        path: store.location(),
        version: n,
        latest,
    })
}

/// Tag `name` of `store`, or `None` if there is none.
fn read_tag(store: &dyn DatasetStore, name: &str) -> Result<Option<Tag>> {
    let object = tag_object_name(name);
    let Some(bytes) = store.read(&object)? else {
        return Ok(None);
    };
    let location = store.object_location(&object);
    let parsed: TagObject = serde_json::from_slice(&bytes)
        .map_err(|e| DatasetError::bad_manifest(&location, format!("not a tag: {e}")))?;
    if parsed.format != TAG_FORMAT || parsed.tag.name != name {
        return Err(DatasetError::bad_manifest(
            &location,
            format!(
                "expected format {TAG_FORMAT:?} and name {name:?}, found {:?} and {:?}",
                parsed.format, parsed.tag.name
            ),
        ));
    }
    Ok(Some(parsed.tag))
}

fn check_tag_name(name: &str) -> Result<()> {
    if valid_tag_name(name) {
        return Ok(());
    }
    Err(DatasetError::InvalidArgument(format!(
        "tag {name:?}: expected 1 to 64 ASCII letters, digits, '.', '_' or '-', not starting with '.' and not all digits"
    )))
}

impl Dataset {
    /// Opens version `version` of the dataset in directory `dir`. See
    /// [`Dataset::open_version_in`].
    ///
    /// ```
    /// use lodt::{Batch, LodTensor};
    /// use lodt::dataset::{Dataset, DatasetWriter};
    /// # let dir = tempfile::tempdir()?;
    /// let batch = Batch::try_from_tensors([("x", LodTensor::from_vec(vec![1u8, 2], vec![2], Default::default())?)])?;
    /// let mut w = DatasetWriter::create(dir.path(), Default::default())?;
    /// w.write(&batch)?;
    /// w.finish()?;
    /// let mut w = DatasetWriter::append(dir.path(), Default::default())?;
    /// w.write(&batch)?;
    /// w.finish()?;
    /// assert_eq!(Dataset::open(dir.path())?.num_sequences(), 4);
    /// assert_eq!(Dataset::open_version(dir.path(), 1)?.num_sequences(), 2);
    /// assert!(Dataset::open_version(dir.path(), 3).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_version(dir: impl AsRef<Path>, version: u64) -> Result<Self> {
        Self::open_version_in(Arc::new(LocalStore::new(dir)), version)
    }

    /// Opens version `version` of the dataset in `store`: its kept manifest
    /// (`lodt-dataset.version.N.json`), or the main manifest if that is
    /// version `version` and its copy is not written yet
    /// ([`DatasetError::NoSuchVersion`] otherwise). Its shards are the ones
    /// that version lists, still there (appends only add shards).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// let v1 = lodt::dataset::Dataset::open_version_in(store, 1)?;
    /// assert_eq!(v1.commit_record().map(|r| r.version), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_version_in(store: Arc<dyn DatasetStore>, version: u64) -> Result<Self> {
        let manifest = version_manifest(&*store, version)?;
        Ok(Self::from_manifest(store, manifest))
    }

    /// Opens the version tag `tag` names. See [`Dataset::open_tag_in`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// lodt::dataset::Dataset::tag(dir.path(), "first", None)?;
    /// assert_eq!(lodt::dataset::Dataset::open_tag(dir.path(), "first")?.num_sequences(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_tag(dir: impl AsRef<Path>, tag: &str) -> Result<Self> {
        Self::open_tag_in(Arc::new(LocalStore::new(dir)), tag)
    }

    /// Opens the version tag `tag` of the dataset in `store` names
    /// ([`DatasetError::NoSuchTag`] if there is no such tag).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// assert!(lodt::dataset::Dataset::open_tag_in(store, "nope").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_tag_in(store: Arc<dyn DatasetStore>, tag: &str) -> Result<Self> {
        check_tag_name(tag)?;
        let found = read_tag(&*store, tag)?.ok_or_else(|| DatasetError::NoSuchTag {
            path: store.location(),
            tag: tag.to_owned(),
        })?;
        Self::open_version_in(store, found.version)
    }

    /// Opens `at` of the dataset in `store`: a version number (decimal
    /// digits) or a tag name (never all digits, so the two cannot be taken
    /// for each other). See [`Dataset::open_version_in`] and
    /// [`Dataset::open_tag_in`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store: std::sync::Arc<dyn lodt::dataset::DatasetStore> = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// lodt::dataset::Dataset::tag_in(store.clone(), "v-one", None)?;
    /// let by_number = lodt::dataset::Dataset::open_at_in(store.clone(), "1")?;
    /// let by_tag = lodt::dataset::Dataset::open_at_in(store.clone(), "v-one")?;
    /// assert_eq!(by_number.manifest(), by_tag.manifest());
    /// assert!(lodt::dataset::Dataset::open_at_in(store, "a/b").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_at_in(store: Arc<dyn DatasetStore>, at: &str) -> Result<Self> {
        let n = Self::resolve_version_in(store.clone(), at)?;
        Self::open_version_in(store, n)
    }

    /// The version number `at` names: decimal digits are a number, checked
    /// to exist; anything else is a tag's name ([`DatasetError::NoSuchTag`]
    /// if there is none).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store: std::sync::Arc<dyn lodt::dataset::DatasetStore> = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// lodt::dataset::Dataset::tag_in(store.clone(), "t", None)?;
    /// assert_eq!(lodt::dataset::Dataset::resolve_version_in(store.clone(), "t")?, 1);
    /// assert_eq!(lodt::dataset::Dataset::resolve_version_in(store.clone(), "1")?, 1);
    /// assert!(lodt::dataset::Dataset::resolve_version_in(store, "2").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve_version_in(store: Arc<dyn DatasetStore>, at: &str) -> Result<u64> {
        if !at.is_empty() && at.bytes().all(|b| b.is_ascii_digit()) {
            let n = at
                .parse::<u64>()
                .map_err(|_| DatasetError::InvalidArgument(format!("version {at:?}: too large")))?;
            // Refuses a version that does not exist.
            version_manifest(&*store, n)?;
            return Ok(n);
        }
        Self::tag_version_in(store, at)
    }

    /// The version history of the dataset in directory `dir`. See
    /// [`Dataset::versions_in`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// lodt::dataset::DatasetWriter::append(dir.path(), Default::default())?.finish()?;
    /// let log = lodt::dataset::Dataset::versions(dir.path())?;
    /// let ops: Vec<_> = log.iter().map(|r| (r.version, r.operation.as_str())).collect();
    /// assert_eq!(ops, [(1, "create"), (2, "append")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn versions(dir: impl AsRef<Path>) -> Result<Vec<CommitRecord>> {
        Self::versions_in(Arc::new(LocalStore::new(dir)))
    }

    /// The record of every version of the dataset in `store`, oldest
    /// first: each kept version manifest's, and the main manifest's if its
    /// copy is not written yet. A version whose manifest records none (one
    /// written before versions) is [`UNRECORDED`], with its totals, and
    /// added and removed counts against the version listed before it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// assert!(lodt::dataset::Dataset::versions_in(store).is_err()); // not a dataset
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn versions_in(store: Arc<dyn DatasetStore>) -> Result<Vec<CommitRecord>> {
        let current = read_manifest(&*store)?.ok_or_else(|| DatasetError::NotADataset {
            path: store.location(),
        })?;
        let latest = number_of(&*store, &current)?;
        let mut numbers = listed_versions(&*store)?;
        if !numbers.contains(&latest) {
            numbers.push(latest);
        }
        let mut out: Vec<CommitRecord> = Vec::new();
        for n in numbers {
            let manifest = if n == latest {
                match store.read(&version_manifest_name(n))? {
                    Some(_) => version_manifest(&*store, n)?,
                    None => current.clone(),
                }
            } else {
                version_manifest(&*store, n)?
            };
            let record = match manifest.commit {
                Some(r) if r.version == n => *r,
                _ => {
                    let mut r = CommitRecord::unrecorded(n, &manifest);
                    let (seq, bytes) = out.last().map_or((0, 0), |p| (p.sequences, p.bytes));
                    r.sequences_added = r.sequences.saturating_sub(seq);
                    r.sequences_removed = seq.saturating_sub(r.sequences);
                    r.bytes_added = r.bytes.saturating_sub(bytes);
                    r.bytes_removed = bytes.saturating_sub(r.bytes);
                    r
                }
            };
            out.push(record);
        }
        Ok(out)
    }

    /// Tags a version of the dataset in directory `dir`. See
    /// [`Dataset::tag_in`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// lodt::dataset::DatasetWriter::append(dir.path(), Default::default())?.finish()?;
    /// assert_eq!(lodt::dataset::Dataset::tag(dir.path(), "run-7", Some(1))?.version, 1);
    /// assert!(lodt::dataset::Dataset::tag(dir.path(), "run-7", Some(2)).is_err()); // never moves
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tag(dir: impl AsRef<Path>, name: &str, version: Option<u64>) -> Result<Tag> {
        Self::tag_in(Arc::new(LocalStore::new(dir)), name, version)
    }

    /// Names version `version` (`None`: the current one) of the dataset in
    /// `store` `name`, for good: `lodt-dataset.tag.NAME.json`, created only
    /// if absent (a conditional create on an object store, under the writer
    /// lock in a directory). Tagging the version a tag names already
    /// returns that tag and writes nothing; another version is
    /// [`DatasetError::TagExists`]; a version that does not exist,
    /// [`DatasetError::NoSuchVersion`]. A failed create is decided by
    /// reading the tag again, so a retry is safe.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// let first = lodt::dataset::Dataset::tag_in(store.clone(), "a", None)?;
    /// assert_eq!(lodt::dataset::Dataset::tag_in(store, "a", Some(1))?, first); // idempotent
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tag_in(store: Arc<dyn DatasetStore>, name: &str, version: Option<u64>) -> Result<Tag> {
        check_tag_name(name)?;
        let current = read_manifest(&*store)?.ok_or_else(|| DatasetError::NotADataset {
            path: store.location(),
        })?;
        let _lock = store.lock()?;
        let latest = number_of(&*store, &current)?;
        let version = version.unwrap_or(latest);
        let exists = |tag: &Tag| -> Result<Tag> {
            if tag.version == version {
                Ok(tag.clone())
            } else {
                Err(DatasetError::TagExists {
                    path: store.location(),
                    tag: name.to_owned(),
                    version: tag.version,
                    requested: version,
                })
            }
        };
        if let Some(tag) = read_tag(&*store, name)? {
            return exists(&tag);
        }
        if version == latest {
            ensure_kept(&*store, version)?;
        }
        // Refuses a version that does not exist.
        version_manifest(&*store, version)?;
        let tag = Tag {
            name: name.to_owned(),
            version,
            time: utc_now(),
        };
        let object = TagObject {
            format: TAG_FORMAT.to_owned(),
            tag: tag.clone(),
        };
        let mut bytes = serde_json::to_vec(&object).unwrap_or_default();
        bytes.push(b'\n');
        match store.write_if(&tag_object_name(name), &bytes, None) {
            Ok(_) => Ok(tag),
            Err(e @ DatasetError::InvalidArgument(_)) => Err(e),
            // Unknown outcome: read it again and decide.
            Err(e) => match read_tag(&*store, name) {
                Ok(Some(found)) => exists(&found),
                _ => Err(e),
            },
        }
    }

    /// The tags of the dataset in directory `dir`, by name. See
    /// [`Dataset::tags_in`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// lodt::dataset::Dataset::tag(dir.path(), "b", None)?;
    /// lodt::dataset::Dataset::tag(dir.path(), "a", None)?;
    /// let names: Vec<_> = lodt::dataset::Dataset::tags(dir.path())?.into_iter().map(|t| t.name).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tags(dir: impl AsRef<Path>) -> Result<Vec<Tag>> {
        Self::tags_in(Arc::new(LocalStore::new(dir)))
    }

    /// The tags of the dataset in `store`, sorted by name.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// assert!(lodt::dataset::Dataset::tags_in(store)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tags_in(store: Arc<dyn DatasetStore>) -> Result<Vec<Tag>> {
        let mut out = Vec::new();
        for object in store.list()? {
            if let Some(name) = tag_of_name(&object)
                && let Some(tag) = read_tag(&*store, name)?
            {
                out.push(tag);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The version tag `name` of the dataset in `store` names
    /// ([`DatasetError::NoSuchTag`] if none).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// lodt::dataset::DatasetWriter::create(dir.path(), Default::default())?.finish()?;
    /// let store = std::sync::Arc::new(lodt::dataset::LocalStore::new(dir.path()));
    /// lodt::dataset::Dataset::tag_in(store.clone(), "t", None)?;
    /// assert_eq!(lodt::dataset::Dataset::tag_version_in(store, "t")?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tag_version_in(store: Arc<dyn DatasetStore>, name: &str) -> Result<u64> {
        check_tag_name(name)?;
        read_tag(&*store, name)?
            .map(|t| t.version)
            .ok_or_else(|| DatasetError::NoSuchTag {
                path: store.location(),
                tag: name.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_now_has_the_layout() {
        let t = utc_now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(
            t.starts_with("20") && t.ends_with('Z') && &t[10..11] == "T",
            "{t}"
        );
    }
}
