//! [`ObjectDatasetStore`]: a dataset's objects under a prefix of an object
//! store.

use super::RemoteOptions;
use super::runtime::{block_on, io_error};
use super::source::{ObjectSource, Shared};
use crate::dataset::store::{ObjectVersion, ShardSink, StoreLock};
use crate::dataset::{DatasetError, DatasetStore};
use crate::format::LodtFile;
use object_store::path::Path as ObjectPath;
use object_store::{
    MultipartUpload, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
};
use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;

/// The size of the parts a shard is uploaded in (S3's minimum part is
/// 5 MiB). A shard smaller than one part is uploaded with a single put.
pub const PART_BYTES: usize = 8 << 20;

type Result<T> = std::result::Result<T, DatasetError>;

/// A dataset stored under a prefix of an object store (S3, Azure, GCS; HTTP
/// for reading). Made by [`location::open_store`](crate::location::open_store) from a URI.
///
/// - Opening a dataset reads the manifest (one GET); a shard is opened
///   with [`ObjectSource`] when first touched.
/// - Shards are uploaded in [`PART_BYTES`] parts, completed on
///   [`ShardSink::commit`] (aborted if the writer is dropped first).
/// - Manifests are replaced by conditional puts
///   ([`DatasetStore::write_if`]); object stores have no locks, so
///   [`DatasetStore::lock`] holds nothing, and a partial manifest is not
///   protected against its writer finishing during a merge.
pub struct ObjectDatasetStore {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    uri: String,
    options: RemoteOptions,
    /// The throttle and disk cache its shards share (made on first open).
    shared: std::sync::OnceLock<Arc<Shared>>,
}

impl fmt::Debug for ObjectDatasetStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectDatasetStore")
            .field("uri", &self.uri)
            .finish()
    }
}

impl ObjectDatasetStore {
    /// The dataset under `prefix` of `store` (`uri` names it in messages).
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: ObjectPath,
        uri: String,
        options: RemoteOptions,
    ) -> Self {
        ObjectDatasetStore {
            store,
            prefix,
            uri,
            options,
            shared: std::sync::OnceLock::new(),
        }
    }

    /// What this dataset's shards share: one throttle for the store's
    /// requests, one disk cache.
    fn shared(&self) -> io::Result<Arc<Shared>> {
        if let Some(shared) = self.shared.get() {
            return Ok(shared.clone());
        }
        let made = Shared::new(&self.options, true)?;
        Ok(self.shared.get_or_init(|| made).clone())
    }

    /// How many times the store's answers (throttling, dropped connections)
    /// halved the concurrency of its reads so far.
    ///
    /// ```
    /// # let store = std::sync::Arc::new(object_store::memory::InMemory::new());
    /// let d = lodt::remote::ObjectDatasetStore::new(store, "d".into(), "memory:///d".into(), Default::default());
    /// assert_eq!(d.times_throttled(), 0);
    /// ```
    pub fn times_throttled(&self) -> u64 {
        self.shared.get().map_or(0, |s| s.times_throttled())
    }

    fn path(&self, name: &str) -> Result<ObjectPath> {
        let plain =
            !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0']);
        if !plain {
            return Err(DatasetError::InvalidArgument(format!(
                "{name:?} is not a plain object name in the dataset {}",
                self.uri
            )));
        }
        Ok(self.prefix.clone().join(name))
    }

    fn io(&self, action: &'static str, name: &str, e: object_store::Error) -> DatasetError {
        let location = self.object_location(name);
        DatasetError::io(action, location.clone(), io_error(&location, e))
    }

    fn run<T>(
        &self,
        action: &'static str,
        name: &str,
        f: impl Future<Output = object_store::Result<T>>,
    ) -> Result<T> {
        block_on(f)
            .map_err(|e| DatasetError::io(action, self.object_location(name), e))?
            .map_err(|e| self.io(action, name, e))
    }
}

/// A shard uploaded in parts; visible only once completed.
struct ObjectShardSink {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    location: String,
    pending: Vec<u8>,
    upload: Option<Box<dyn MultipartUpload>>,
    done: bool,
}

impl ObjectShardSink {
    /// Uploads the pending bytes as the next part.
    fn upload_part(&mut self) -> io::Result<()> {
        let location = self.location.clone();
        if self.upload.is_none() {
            let (store, path) = (self.store.clone(), self.path.clone());
            let upload = block_on(async move { store.put_multipart(&path).await })?
                .map_err(|e| io_error(&location, e))?;
            self.upload = Some(upload);
        }
        let part = PutPayload::from(std::mem::take(&mut self.pending));
        if let Some(upload) = self.upload.as_mut() {
            let fut = upload.put_part(part);
            block_on(fut)?.map_err(|e| io_error(&location, e))?;
        }
        Ok(())
    }
}

impl Write for ObjectShardSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= PART_BYTES {
            self.upload_part()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ShardSink for ObjectShardSink {
    fn commit(mut self: Box<Self>) -> Result<()> {
        let location = self.location.clone();
        let fail = |e: io::Error| DatasetError::io("uploading", location.clone(), e);
        match self.upload.take() {
            None => {
                // Small enough for one put.
                let (store, path) = (self.store.clone(), self.path.clone());
                let payload = PutPayload::from(std::mem::take(&mut self.pending));
                block_on(async move { store.put(&path, payload).await })
                    .map_err(fail)?
                    .map_err(|e| fail(io_error(&location, e)))?;
            }
            Some(upload) => {
                self.upload = Some(upload);
                if !self.pending.is_empty() {
                    self.upload_part().map_err(fail)?;
                }
                let mut upload = self
                    .upload
                    .take()
                    .ok_or_else(|| fail(io::Error::other("the multipart upload went missing")))?;
                block_on(async move { upload.complete().await })
                    .map_err(fail)?
                    .map_err(|e| fail(io_error(&location, e)))?;
            }
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for ObjectShardSink {
    fn drop(&mut self) {
        if let Some(mut upload) = self.upload.take()
            && !self.done
        {
            // Best effort: an upload never completed is never visible, and
            // stores expire abandoned parts.
            let _ = block_on(async move { upload.abort().await });
        }
    }
}

impl DatasetStore for ObjectDatasetStore {
    fn location(&self) -> String {
        self.uri.clone()
    }

    fn object_location(&self, name: &str) -> String {
        format!("{}/{name}", self.uri)
    }

    fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.read_versioned(name)?.map(|(bytes, _)| bytes))
    }

    fn read_versioned(&self, name: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>> {
        let path = self.path(name)?;
        let store = self.store.clone();
        let limit = crate::dataset::MAX_MANIFEST_BYTES;
        let got = block_on(async move {
            let result = store.get(&path).await?;
            let version = ObjectVersion {
                e_tag: result.meta.e_tag.clone(),
                version: result.meta.version.clone(),
            };
            // The size comes from the answer's headers, before the body is
            // read (the HTTP client stops a body at its announced length).
            if result.meta.size > limit {
                return Ok(Err(result.meta.size));
            }
            let bytes = result.bytes().await?.to_vec();
            Ok::<_, object_store::Error>(Ok((bytes, version)))
        })
        .map_err(|e| DatasetError::io("reading", self.object_location(name), e))?;
        match got {
            Ok(Ok(found)) => Ok(Some(found)),
            Ok(Err(size)) => Err(DatasetError::io(
                "reading",
                self.object_location(name),
                io::Error::new(
                    io::ErrorKind::FileTooLarge,
                    format!(
                        "a manifest is at most {limit} bytes (MAX_MANIFEST_BYTES), found {size} bytes"
                    ),
                ),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.io("reading", name, e)),
        }
    }

    fn read_head(&self, name: &str, limit: usize) -> Result<Option<(Vec<u8>, u64)>> {
        let path = self.path(name)?;
        let store = self.store.clone();
        let got = block_on(async move {
            let options = object_store::GetOptions {
                range: Some(object_store::GetRange::Bounded(0..limit as u64)),
                ..Default::default()
            };
            let result = store.get_opts(&path, options).await?;
            let size = result.meta.size;
            let bytes = result.bytes().await?.to_vec();
            Ok::<_, object_store::Error>((bytes, size))
        });
        match got {
            Ok(Ok((mut bytes, size))) => {
                bytes.truncate(limit);
                Ok(Some((bytes, size)))
            }
            Ok(Err(object_store::Error::NotFound { .. })) => Ok(None),
            // A store that refuses the range (an empty object, a range past
            // a short one): the whole object, cut.
            _ => Ok(self.read(name)?.map(|mut bytes| {
                let size = bytes.len() as u64;
                bytes.truncate(limit);
                (bytes, size)
            })),
        }
    }

    fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(name)?;
        let (store, payload) = (self.store.clone(), PutPayload::from(bytes.to_vec()));
        self.run(
            "writing",
            name,
            async move { store.put(&path, payload).await },
        )?;
        Ok(())
    }

    fn write_if(
        &self,
        name: &str,
        bytes: &[u8],
        expected: Option<&ObjectVersion>,
    ) -> Result<ObjectVersion> {
        let path = self.path(name)?;
        let mode = match expected {
            None => PutMode::Create,
            Some(v) if v.e_tag.is_none() && v.version.is_none() => PutMode::Overwrite,
            Some(v) => PutMode::Update(UpdateVersion {
                e_tag: v.e_tag.clone(),
                version: v.version.clone(),
            }),
        };
        let (store, payload) = (self.store.clone(), PutPayload::from(bytes.to_vec()));
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let put = block_on(async move { store.put_opts(&path, payload, opts).await })
            .map_err(|e| DatasetError::io("writing", self.object_location(name), e))?;
        match put {
            Ok(result) => Ok(ObjectVersion {
                e_tag: result.e_tag,
                version: result.version,
            }),
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Err(DatasetError::PreconditionFailed {
                path: self.object_location(name),
            }),
            Err(e) => Err(self.io("writing", name, e)),
        }
    }

    fn open_shard(&self, name: &str) -> Result<LodtFile> {
        let path = self.path(name)?;
        let location = self.object_location(name);
        let shared = self
            .shared()
            .map_err(|e| DatasetError::io("opening the cache of", location.clone(), e))?;
        let source = ObjectSource::open_shared(
            self.store.clone(),
            path,
            location.clone(),
            &self.options,
            shared,
        )
        .map_err(|e| DatasetError::io("opening", location.clone(), e))?;
        LodtFile::from_source(Arc::new(source))
            .map_err(|source| DatasetError::shard(location, source))
    }

    fn create_shard(&self, name: &str) -> Result<Box<dyn ShardSink>> {
        Ok(Box::new(ObjectShardSink {
            store: self.store.clone(),
            path: self.path(name)?,
            location: self.object_location(name),
            pending: Vec::new(),
            upload: None,
            done: false,
        }))
    }

    fn list(&self) -> Result<Vec<String>> {
        let (store, prefix) = (self.store.clone(), self.prefix.clone());
        let listed = self.run("listing", "", async move {
            store.list_with_delimiter(Some(&prefix)).await
        })?;
        let mut names: Vec<String> = listed
            .objects
            .into_iter()
            .filter_map(|o| o.location.filename().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = self.path(name)?;
        let store = self.store.clone();
        match block_on(async move { store.delete(&path).await })
            .map_err(|e| DatasetError::io("deleting", self.object_location(name), e))?
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.io("deleting", name, e)),
        }
    }

    fn unique_shard_names(&self) -> bool {
        true
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn lock(&self) -> Result<StoreLock> {
        // No locks in object stores: manifests are replaced conditionally.
        Ok(StoreLock::new(()))
    }

    fn lock_object(&self, name: &str) -> Result<Option<StoreLock>> {
        Ok(self.read(name)?.map(|_| StoreLock::new(())))
    }
}
