//! [`PerProcessStore`]: the object store client of a URI, made anew in each
//! process.
//!
//! An `object_store` client keeps pooled connections whose I/O and tasks
//! belong to the runtime that opened them. A child made by `fork` (PyTorch's
//! `DataLoader` workers, `multiprocessing`) inherits the client and the
//! runtime's memory but none of the runtime's threads: a request on an
//! inherited connection waits forever for a thread that does not exist. So
//! each process gets its own client (and its own runtime, see
//! `runtime.rs`): the first request in a new process builds the client again
//! from the URI and options it was made from. The parent's client is left
//! untouched in the child (dropping it could wait on the parent's threads,
//! or on a lock one of them held when the process forked); it is one leaked
//! client per forked process that used a store.

use super::RemoteOptions;
use async_trait::async_trait;
use futures_util::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

/// Builds a URI's client; `uri.rs`'s `build_store`.
pub(crate) type Build = fn(&url::Url, &RemoteOptions) -> Result<Arc<dyn ObjectStore>>;

/// The client of one store (a bucket, a container, a server), owned by the
/// process that made it and made again in any other process that uses it.
pub(crate) struct PerProcessStore {
    url: url::Url,
    options: RemoteOptions,
    build: Build,
    /// The process the client belongs to, and the client (always `Some`;
    /// taken only when the store is dropped).
    current: Mutex<(u32, Option<Arc<dyn ObjectStore>>)>,
}

impl PerProcessStore {
    /// Builds the client of `url` for this process.
    pub(crate) fn new(url: url::Url, options: RemoteOptions, build: Build) -> Result<Self> {
        let store = build(&url, &options)?;
        Ok(PerProcessStore {
            url,
            options,
            build,
            current: Mutex::new((std::process::id(), Some(store))),
        })
    }

    /// This process's client: the one made here, or a new one if the client
    /// was made by another process (this one is a child forked from it).
    fn store(&self) -> Result<Arc<dyn ObjectStore>> {
        let pid = std::process::id();
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.0 != pid || current.1.is_none() {
            let fresh = (self.build)(&self.url, &self.options)?;
            // Never dropped here: see the module docs.
            std::mem::forget(current.1.replace(fresh));
            current.0 = pid;
        }
        current
            .1
            .clone()
            .ok_or_else(|| object_store::Error::Generic {
                store: "lodt",
                source: "the object store client went missing".into(),
            })
    }

    /// The process the current client belongs to.
    #[cfg(test)]
    fn owner(&self) -> u32 {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }
}

impl Drop for PerProcessStore {
    /// Drops the client if this process made it; one inherited from the
    /// process this one was forked from is left as it is (module docs).
    fn drop(&mut self) {
        let current = self
            .current
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if current.0 != std::process::id() {
            std::mem::forget(current.1.take());
        }
    }
}

impl fmt::Debug for PerProcessStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerProcessStore")
            .field("url", &self.url.as_str())
            .finish()
    }
}

impl fmt::Display for PerProcessStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        match &current.1 {
            Some(store) => fmt::Display::fmt(store, f),
            None => write!(f, "{}", self.url),
        }
    }
}

/// A stream of the one error `e`.
fn failed<T: Send + 'static>(e: object_store::Error) -> BoxStream<'static, Result<T>> {
    stream::once(async move { Err(e) }).boxed()
}

#[async_trait]
impl ObjectStore for PerProcessStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.store()?.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.store()?.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.store()?.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> Result<Vec<bytes::Bytes>> {
        self.store()?.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        match self.store() {
            Ok(store) => store.delete_stream(locations),
            Err(e) => failed(e),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.store() {
            Ok(store) => store.list(prefix),
            Err(e) => failed(e),
        }
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.store() {
            Ok(store) => store.list_with_offset(prefix, offset),
            Err(e) => failed(e),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.store()?.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.store()?.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.store()?.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static BUILT: AtomicUsize = AtomicUsize::new(0);

    fn build(_: &url::Url, _: &RemoteOptions) -> Result<Arc<dyn ObjectStore>> {
        BUILT.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(InMemory::new()))
    }

    #[test]
    fn a_client_is_made_once_per_process() {
        let url = url::Url::parse("memory://bucket").unwrap();
        let store = PerProcessStore::new(url, RemoteOptions::default(), build).unwrap();
        assert_eq!(store.owner(), std::process::id());
        let before = BUILT.load(Ordering::SeqCst);
        let path = Path::from("a");
        super::super::runtime::block_on(async {
            store
                .put(&path, PutPayload::from_static(b"abc"))
                .await
                .unwrap();
            let got = store.get(&path).await.unwrap().bytes().await.unwrap();
            assert_eq!(&got[..], b"abc");
        })
        .unwrap();
        assert_eq!(
            BUILT.load(Ordering::SeqCst),
            before,
            "no new client in the same process"
        );
        // What a forked child sees: a client owned by another process id.
        store.current.lock().unwrap().0 = u32::MAX;
        let got =
            super::super::runtime::block_on(async { store.get(&path).await.map(|_| ()) }).unwrap();
        // The new client is a fresh (empty) in-memory store: the object is
        // not there, which shows the request went to the new client.
        assert!(matches!(got, Err(object_store::Error::NotFound { .. })));
        assert_eq!(BUILT.load(Ordering::SeqCst), before + 1);
        assert_eq!(store.owner(), std::process::id());
    }
}
