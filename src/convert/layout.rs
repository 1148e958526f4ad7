//! [`Layout`]: a directory of files in another tool's layout (Hugging
//! Face's `save_to_disk`, a directory of Parquet shards), recognised by its
//! index file and read as one input, its files in order.

use super::*;
use std::collections::VecDeque;
use std::path::PathBuf;

/// A directory that another tool wrote, read as one input: its files, in
/// the order its index gives (or by name), as one stream of batches.
///
/// ```
/// use lodt::convert::Layout;
/// let dir = tempfile::tempdir()?;
/// assert_eq!(Layout::detect(dir.path()), None);
/// std::fs::write(dir.path().join("part-1.parquet"), b"")?;
/// assert_eq!(Layout::detect(dir.path()), Some(Layout::ParquetFiles));
/// std::fs::write(dir.path().join("state.json"), br#"{"_data_files": []}"#)?;
/// std::fs::write(dir.path().join("dataset_info.json"), b"{}")?;
/// assert_eq!(Layout::detect(dir.path()), Some(Layout::HuggingFace));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// Hugging Face `datasets`' `save_to_disk` directory: `state.json`
    /// (whose `_data_files` lists the `data-*.arrow` files in order) and
    /// `dataset_info.json` beside Arrow IPC stream files. Columns map as
    /// any Arrow schema does (`spec/ARROW.md`).
    HuggingFace,
    /// A directory of Parquet files (`*.parquet`), read in name order, as
    /// one input of one schema; the one layout also written, as
    /// `part-00000.parquet`, `part-00001.parquet`, … (see
    /// [`Endpoint::create_writer`]).
    ParquetFiles,
    /// MosaicML Streaming's MDS directory: `index.json` and its shards
    /// (raw or zstd), one batch per shard ([`crate::mds`], `spec/MDS.md`).
    Mds,
}

impl Layout {
    /// The layout of the local directory `dir`, by its index file:
    /// `state.json` and `dataset_info.json` for Hugging Face, `index.json`
    /// for MDS; else, with no
    /// lodt manifest, Parquet files only (at least one). `None` for
    /// anything else (a lodt dataset among them).
    ///
    /// See the [type-level example](Layout).
    pub fn detect(dir: impl AsRef<Path>) -> Option<Layout> {
        let dir = dir.as_ref();
        if !dir.is_dir() || dir.join(crate::dataset::MANIFEST_NAME).exists() {
            return None;
        }
        if dir.join("state.json").is_file() && dir.join("dataset_info.json").is_file() {
            return Some(Layout::HuggingFace);
        }
        if dir.join("index.json").is_file() {
            return Some(Layout::Mds);
        }
        match parquet_files(dir) {
            Ok(files) if !files.is_empty() => Some(Layout::ParquetFiles),
            _ => None,
        }
    }

    /// A short name of the layout.
    ///
    /// ```
    /// assert_eq!(lodt::convert::Layout::HuggingFace.name(), "Hugging Face save_to_disk directory");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Layout::HuggingFace => "Hugging Face save_to_disk directory",
            Layout::ParquetFiles => "directory of Parquet files",
            Layout::Mds => "MDS directory",
        }
    }

    /// The format of the layout's files, when they are in one of the
    /// [`Format`]s (MDS shards are not).
    ///
    /// ```
    /// use lodt::convert::{Format, Layout};
    /// assert_eq!(Layout::HuggingFace.format(), Some(Format::ArrowStream));
    /// assert_eq!(Layout::Mds.format(), None);
    /// ```
    pub fn format(self) -> Option<Format> {
        match self {
            Layout::HuggingFace => Some(Format::ArrowStream),
            Layout::ParquetFiles => Some(Format::Parquet),
            Layout::Mds => None,
        }
    }

    /// The files of the layout at `dir`, in the order they are read.
    ///
    /// ```
    /// use lodt::convert::Layout;
    /// let dir = tempfile::tempdir()?;
    /// std::fs::write(dir.path().join("state.json"), br#"{"_data_files": [{"filename": "b.arrow"}, {"filename": "a.arrow"}]}"#)?;
    /// let files = Layout::HuggingFace.files(dir.path())?;
    /// assert_eq!(files, [dir.path().join("b.arrow"), dir.path().join("a.arrow")]);
    /// std::fs::write(dir.path().join("state.json"), br#"{"_data_files": [{"filename": "../x.arrow"}]}"#)?;
    /// assert!(Layout::HuggingFace.files(dir.path()).is_err()); // a name, not a path
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn files(self, dir: impl AsRef<Path>) -> Result<Vec<PathBuf>, ConvertError> {
        let dir = dir.as_ref();
        match self {
            Layout::HuggingFace => hugging_face_files(dir),
            Layout::ParquetFiles => parquet_files(dir),
            Layout::Mds => {
                let index = crate::mds::MdsIndex::read(dir)?;
                Ok(index.shards().iter().map(|s| dir.join(&s.raw)).collect())
            }
        }
    }

    /// Opens the layout at `dir` as one reader: each file opened in turn as
    /// [`Format::open_reader`] opens it, with the options (columns and
    /// re-batching) applied to the whole. Its metadata is the first file's.
    ///
    /// ```
    /// use lodt::convert::{ConvertOptions, Layout};
    /// let dir = tempfile::tempdir()?;
    /// std::fs::write(dir.path().join("state.json"), br#"{"_data_files": []}"#)?;
    /// let reader = Layout::HuggingFace.open_reader(dir.path(), &ConvertOptions::default())?;
    /// assert_eq!(reader.count(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_reader(
        self,
        dir: impl AsRef<Path>,
        options: &ConvertOptions,
    ) -> Result<BoxBatchReader<'static, ConvertError>, ConvertError> {
        let dir = dir.as_ref();
        let format = match self.format() {
            Some(format) => format,
            None => {
                // MDS: a reader of its own; columns and re-batching as for
                // any reader that has none (`.lodt`'s).
                Format::Lodt.check_reader(&dir.display().to_string(), options)?;
                let reader = crate::mds::MdsReader::open(dir)?;
                return Format::Lodt.finish_reader(Box::new(reader.err_into()), options);
            }
        };
        format.check_reader(&dir.display().to_string(), options)?;
        let mut chain = Chain {
            files: self.files(dir)?.into(),
            current: None,
            format,
            options: options.without_batching(),
            metadata: BTreeMap::new(),
        };
        chain.open_next()?;
        if let Some(first) = &chain.current {
            chain.metadata = first.metadata();
        }
        format.finish_reader(Box::new(chain), options)
    }
}

/// The `*.parquet` files of `dir`, by name.
fn parquet_files(dir: &Path) -> Result<Vec<PathBuf>, ConvertError> {
    let io = |source| ConvertError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let parquet = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
        if parquet && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The data files `state.json` lists, in order: plain file names in `dir`.
fn hugging_face_files(dir: &Path) -> Result<Vec<PathBuf>, ConvertError> {
    let state = dir.join("state.json");
    let bytes = std::fs::read(&state).map_err(|source| ConvertError::Io {
        path: state.display().to_string(),
        source,
    })?;
    let bad = |found: String| {
        ConvertError::Unsupported(format!(
            "{}: expected {{\"_data_files\": [{{\"filename\": NAME}}, ...]}} (save_to_disk's state), found {found}",
            state.display()
        ))
    };
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("no JSON ({e})")))?;
    let listed = value
        .get("_data_files")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("no _data_files list".into()))?;
    let mut files = Vec::new();
    for entry in listed {
        let name = entry
            .get("filename")
            .and_then(|v| v.as_str())
            .ok_or_else(|| bad(format!("the entry {entry}")))?;
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\'])
            && !name.contains('\0');
        if !plain {
            return Err(bad(format!(
                "the file name {name:?} (a name in the directory, not a path)"
            )));
        }
        files.push(dir.join(name));
    }
    Ok(files)
}

/// The batches of several files of one format, one file after the other.
struct Chain {
    files: VecDeque<PathBuf>,
    current: Option<BoxBatchReader<'static, ConvertError>>,
    format: Format,
    options: ConvertOptions,
    metadata: BTreeMap<String, String>,
}

impl Chain {
    /// Opens the next file, if there is one.
    fn open_next(&mut self) -> Result<(), ConvertError> {
        self.current = match self.files.pop_front() {
            Some(file) => Some(self.format.open_reader(file, &self.options)?),
            None => None,
        };
        Ok(())
    }
}

impl Iterator for Chain {
    type Item = Result<Batch, ConvertError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.current.as_mut()?.next() {
                Some(item) => return Some(item),
                None => {
                    if let Err(e) = self.open_next() {
                        self.files.clear();
                        self.current = None;
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}

impl BatchReader for Chain {
    type Error = ConvertError;

    fn metadata(&self) -> BTreeMap<String, String> {
        self.metadata.clone()
    }
}
