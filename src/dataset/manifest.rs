//! The dataset manifest (`lodt-dataset.json`): the schema, the metadata and
//! one entry per shard, as `spec/DATASET.md` specifies; checking batches
//! against the schema; merging partial manifests.

use super::error::{DatasetError, Result};
use crate::batch::Batch;
use crate::dtype::DType;
use crate::format::LodtFile;
use crate::tensor::LodTensor;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, HashSet};

use super::names::{MAX_COMMIT_ID, valid_commit_id, valid_shard_name};

/// The value of a manifest's `format` field.
///
/// ```
/// assert_eq!(lodt::dataset::FORMAT_NAME, "lodt-dataset");
/// ```
pub const FORMAT_NAME: &str = "lodt-dataset";

/// The major version of the manifest this crate writes and reads.
///
/// ```
/// assert_eq!(lodt::dataset::MANIFEST_MAJOR, 1);
/// ```
pub const MANIFEST_MAJOR: u16 = 1;

/// The minor version of the manifest this crate writes.
///
/// ```
/// assert_eq!(lodt::dataset::MANIFEST_MINOR, 5);
/// ```
pub const MANIFEST_MINOR: u16 = 5;

/// How many commit ids a manifest keeps (`spec/DATASET.md` section 3.1): the
/// ids of the last 1024 commits, oldest first. A write retried with the id
/// of one of them is recognized as committed and writes nothing.
///
/// ```
/// assert_eq!(lodt::dataset::manifest::COMMIT_HISTORY, 1024);
/// ```
pub const COMMIT_HISTORY: usize = 1024;

/// The largest manifest read, in bytes (1 GiB: about four million shard
/// entries of a typical size). A larger object (or a symlink to an endless
/// device) is refused with an error instead of being read whole.
///
/// ```
/// assert_eq!(lodt::dataset::MAX_MANIFEST_BYTES, 1 << 30);
/// ```
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// A manifest's format version: `major.minor`. Readers refuse another major
/// and accept a newer minor, ignoring the fields it adds.
///
/// ```
/// let v = lodt::dataset::ManifestVersion::CURRENT;
/// assert_eq!((v.major, v.minor), (1, 5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestVersion {
    /// Incompatible changes.
    pub major: u16,
    /// Compatible additions.
    pub minor: u16,
}

impl ManifestVersion {
    /// The version this crate writes.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::ManifestVersion::CURRENT.major, lodt::dataset::MANIFEST_MAJOR);
    /// ```
    pub const CURRENT: ManifestVersion = ManifestVersion {
        major: MANIFEST_MAJOR,
        minor: MANIFEST_MINOR,
    };
}

/// One tensor of the schema: every batch of every shard holds a tensor of
/// this name, dtype, element shape and number of LoD levels.
///
/// ```
/// use lodt::{dataset::TensorSchema, DType};
/// let t = TensorSchema { name: "words".into(), dtype: DType::Int64, element_shape: vec![1], lod_levels: 2 };
/// assert_eq!(serde_json::to_string(&t)?, r#"{"name":"words","dtype":"int64","element_shape":[1],"lod_levels":2}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSchema {
    /// The tensor's name.
    pub name: String,
    /// Its element type (numpy's names: `float32`, `int64`, ...).
    #[serde(serialize_with = "ser_dtype", deserialize_with = "de_dtype")]
    pub dtype: DType,
    /// The shape of one row (`shape[1..]`).
    pub element_shape: Vec<usize>,
    /// The number of LoD levels (0: one top-level sequence per row).
    pub lod_levels: usize,
}

fn ser_dtype<S: Serializer>(dtype: &DType, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(dtype.name())
}

fn de_dtype<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<DType, D::Error> {
    let name = String::deserialize(d)?;
    DType::ALL
        .into_iter()
        .find(|t| t.name() == name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown dtype {name:?}")))
}

impl TensorSchema {
    /// The schema entry describing `tensor` under `name`.
    ///
    /// ```
    /// use lodt::{dataset::TensorSchema, Lod, LodTensor};
    /// let t = LodTensor::from_vec(vec![0f32; 6], vec![3, 2], Lod::try_from_lengths(&[vec![1, 2]])?)?;
    /// let s = TensorSchema::of("x", &t);
    /// assert_eq!((s.element_shape, s.lod_levels), (vec![2], 1));
    /// # Ok::<(), lodt::Error>(())
    /// ```
    pub fn of(name: &str, tensor: &LodTensor) -> Self {
        TensorSchema {
            name: name.to_owned(),
            dtype: tensor.dtype(),
            element_shape: tensor.element_shape().to_vec(),
            lod_levels: tensor.lod().num_levels(),
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} {:?} with {} LoD levels",
            self.dtype, self.element_shape, self.lod_levels
        )
    }
}

/// The dataset's schema: its tensors, in order. Empty only in a dataset that
/// has no shards yet (the first batch written then sets it).
///
/// ```
/// use lodt::{dataset::Schema, Batch, Lod, LodTensor};
/// let words = LodTensor::from_vec(vec![1i64, 2, 3], vec![3], Lod::try_from_lengths(&[vec![2, 1]])?)?;
/// let labels = LodTensor::from_vec(vec![0i64, 1], vec![2], Lod::empty())?;
/// let batch = Batch::try_from_tensors([("words", words), ("labels", labels)])?;
/// let schema = Schema::of_batch(&batch)?;
/// assert_eq!(schema.tensors.len(), 2);
/// assert_eq!(schema.check_batch(&batch, "batch 0")?, 2); // two top-level sequences
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// The tensors, in the order mini-batches list them.
    pub tensors: Vec<TensorSchema>,
}

impl Schema {
    /// The schema of `batch` (its tensors in its order), after checking that
    /// it can be one: at least one tensor, none 0-D, all with the same number
    /// of top-level sequences.
    ///
    /// ```
    /// let scalar = lodt::LodTensor::from_vec(vec![1f32], vec![], Default::default())?;
    /// let batch = lodt::Batch::try_from_tensors([("s", scalar)])?;
    /// assert!(lodt::dataset::Schema::of_batch(&batch).is_err()); // a 0-D tensor has no rows
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn of_batch(batch: &Batch) -> Result<Schema> {
        let schema = Schema {
            tensors: batch
                .iter()
                .map(|(name, t)| TensorSchema::of(name, t))
                .collect(),
        };
        schema.check_self("the first batch")?;
        schema.check_batch(batch, "the first batch")?;
        Ok(schema)
    }

    /// Whether the schema is still unknown (a dataset with no shards).
    ///
    /// ```
    /// assert!(lodt::dataset::Schema::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// The position of tensor `name`.
    ///
    /// ```
    /// # use lodt::{dataset::{Schema, TensorSchema}, DType};
    /// let s = Schema { tensors: vec![TensorSchema { name: "x".into(), dtype: DType::Float32, element_shape: vec![], lod_levels: 1 }] };
    /// assert_eq!(s.position("x"), Some(0));
    /// assert_eq!(s.position("y"), None);
    /// ```
    pub fn position(&self, name: &str) -> Option<usize> {
        self.tensors.iter().position(|t| t.name == name)
    }

    /// Checks the schema's own rules: at least one tensor, unique names,
    /// element shapes and levels within the `.lodt` limits.
    pub(crate) fn check_self(&self, context: &str) -> Result<()> {
        if self.tensors.is_empty() {
            return Err(DatasetError::schema(
                context,
                "tensor count",
                "at least one tensor",
                "none",
            ));
        }
        let mut seen = HashSet::new();
        for t in &self.tensors {
            if !seen.insert(t.name.as_str()) {
                return Err(DatasetError::schema(
                    context,
                    "tensor names",
                    "unique names",
                    format!("{:?} twice", t.name),
                ));
            }
            if t.element_shape.len() >= crate::format::MAX_DIMS {
                return Err(DatasetError::schema(
                    context,
                    format!("tensor {:?} element shape", t.name),
                    format!("fewer than {} dimensions", crate::format::MAX_DIMS),
                    t.element_shape.len(),
                ));
            }
            if t.lod_levels > crate::format::MAX_LOD_LEVELS {
                return Err(DatasetError::schema(
                    context,
                    format!("tensor {:?} LoD levels", t.name),
                    format!("at most {}", crate::format::MAX_LOD_LEVELS),
                    t.lod_levels,
                ));
            }
        }
        Ok(())
    }

    /// Checks that `batch` holds exactly the schema's tensors (names, dtypes,
    /// element shapes, LoD levels; any order) and that they agree on the
    /// number of top-level sequences, which it returns. `context` names the
    /// batch in the error.
    ///
    /// ```
    /// use lodt::{dataset::Schema, Batch, LodTensor};
    /// let x = |v: Vec<f32>| LodTensor::from_vec(v.clone(), vec![v.len()], Default::default());
    /// let schema = Schema::of_batch(&Batch::try_from_tensors([("x", x(vec![1.0])?)])?)?;
    /// let other = Batch::try_from_tensors([("y", x(vec![1.0])?)])?;
    /// let err = schema.check_batch(&other, "batch 1").unwrap_err();
    /// assert!(err.to_string().contains("batch 1 does not match the dataset schema"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_batch(&self, batch: &Batch, context: &str) -> Result<u64> {
        if batch.len() != self.tensors.len()
            || self.tensors.iter().any(|t| batch.get(&t.name).is_none())
        {
            return Err(DatasetError::schema(
                context,
                "tensor names",
                crate::error::name_list(self.tensors.iter().map(|t| t.name.as_str())),
                crate::error::name_list(batch.names()),
            ));
        }
        let mut rows: Option<(usize, &str)> = None;
        for t in &self.tensors {
            let Some(tensor) = batch.get(&t.name) else {
                continue;
            };
            let found = TensorSchema::of(&t.name, tensor);
            if tensor.shape().is_empty() {
                return Err(DatasetError::schema(
                    context,
                    format!("tensor {:?} shape", t.name),
                    "a tensor with rows (rank >= 1)",
                    "a 0-D tensor",
                ));
            }
            if found != *t {
                return Err(DatasetError::schema(
                    context,
                    format!("tensor {:?}", t.name),
                    t.describe(),
                    found.describe(),
                ));
            }
            let r = tensor.top_level_rows();
            match rows {
                None => rows = Some((r, t.name.as_str())),
                Some((first, name)) if first != r => {
                    return Err(DatasetError::schema(
                        context,
                        format!("top-level sequences of tensor {:?}", t.name),
                        format!("{first} (as tensor {name:?})"),
                        r,
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(rows.map_or(0, |(r, _)| r as u64))
    }
}

/// Per tensor of the schema, what a shard holds: the number of sequences of
/// each LoD level (summed over its batches) and the number of rows.
///
/// ```
/// let c = lodt::dataset::TensorCounts { levels: vec![3, 6], rows: 15 };
/// assert_eq!(serde_json::to_string(&c)?, r#"{"levels":[3,6],"rows":15}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorCounts {
    /// Sequences per LoD level, top level first (empty for a 0-level tensor).
    pub levels: Vec<u64>,
    /// Rows (the first dimension, summed over batches).
    pub rows: u64,
}

impl TensorCounts {
    /// Adds the counts of `tensor` (one batch's tensor).
    pub(crate) fn add(&mut self, tensor: &LodTensor) {
        let lod = tensor.lod();
        self.levels.resize(lod.num_levels(), 0);
        for (l, count) in self.levels.iter_mut().enumerate() {
            *count += lod.num_sequences(l).unwrap_or(0) as u64;
        }
        self.rows += tensor.rows() as u64;
    }
}

/// One shard of the manifest: a `.lodt` file in the dataset's directory and
/// what it holds.
///
/// ```
/// let e: lodt::dataset::ShardEntry = serde_json::from_str(r#"{"name":"shard-000000.lodt",
///     "bytes":1024,"footer_crc":305419896,"batches":2,"sequences":5,
///     "batch_sequences":[3,2],"tensors":[{"levels":[5],"rows":12}]}"#)?;
/// assert_eq!(e.batch_sequences.iter().sum::<u64>(), e.sequences);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// The file name, in the dataset's directory.
    pub name: String,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The `footer_crc` of the file's trailer: the CRC of its footer header,
    /// which covers the index, which covers every batch header and checksum
    /// table. It pins the whole file.
    pub footer_crc: u32,
    /// The number of batches.
    pub batches: u64,
    /// The number of top-level sequences (summed over batches): the unit the
    /// loader iterates.
    pub sequences: u64,
    /// The top-level sequences of each batch, in order.
    pub batch_sequences: Vec<u64>,
    /// Per schema tensor (in schema order): sequences per level and rows.
    pub tensors: Vec<TensorCounts>,
    /// The shard's `.lodt` format version (`spec/DATASET.md` section 3,
    /// since manifest 1.3; `None`: absent, which means the version of the
    /// shard's own header: a manifest of a writer before 1.3, or one an
    /// older writer rewrote, dropping the field). A dataset may mix
    /// versions; a reader checks each shard's against its entry when the
    /// entry records one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<crate::format::Version>,
}

impl ShardEntry {
    /// The format version the shard must have: the entry's, or `None` when
    /// it records none (manifests of writers before 1.3, or rewritten by
    /// one): then the shard's header says, and any version this reader reads
    /// is accepted.
    ///
    /// ```
    /// let e: lodt::dataset::ShardEntry = serde_json::from_str(r#"{"name":"shard-000000.lodt",
    ///     "bytes":1024,"footer_crc":1,"batches":1,"sequences":1,"batch_sequences":[1],
    ///     "tensors":[{"levels":[],"rows":1}]}"#)?;
    /// assert_eq!(e.expected_format_version(), None);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn expected_format_version(&self) -> Option<crate::format::Version> {
        self.format_version
    }
}

/// A dataset manifest: `spec/DATASET.md`, section 3.
///
/// ```
/// use lodt::dataset::{Manifest, Schema};
/// let m = Manifest::new(Schema::default(), Default::default());
/// let bytes = m.to_json_bytes();
/// assert_eq!(Manifest::from_json_bytes(&bytes, "mem")?, m);
/// assert_eq!((m.num_shards(), m.num_sequences()), (0, 0));
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// The manifest's version.
    pub version: ManifestVersion,
    /// The dataset's schema.
    pub schema: Schema,
    /// The dataset's key/value metadata.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The ids of the last [`COMMIT_HISTORY`] commits that wrote this
    /// manifest, oldest first (`spec/DATASET.md` section 3.1; absent in a
    /// 1.0 manifest). A write whose id is listed is committed.
    #[serde(default)]
    pub commits: Vec<String>,
    /// Since 1.7: the record of the commit that made this manifest's
    /// version (`spec/DATASET.md` section 3.3): its number, time, commit
    /// id, operation and what it added and removed. Absent in a manifest
    /// written before versions (or rewritten by an older writer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<Box<super::commit_record::CommitRecord>>,
    /// The shards, in dataset order.
    pub shards: Vec<ShardEntry>,
}

impl Manifest {
    /// An empty manifest (no shards) of the current version.
    ///
    /// ```
    /// let m = lodt::dataset::Manifest::new(Default::default(), [("source".into(), "x".into())].into());
    /// assert_eq!(m.metadata["source"], "x");
    /// ```
    pub fn new(schema: Schema, metadata: BTreeMap<String, String>) -> Self {
        Manifest {
            format: FORMAT_NAME.to_owned(),
            version: ManifestVersion::CURRENT,
            schema,
            metadata,
            commits: Vec::new(),
            commit: None,
            shards: Vec::new(),
        }
    }

    /// Whether commit `id` is listed (the write of that id is committed).
    ///
    /// ```
    /// let mut m = lodt::dataset::Manifest::new(Default::default(), Default::default());
    /// assert!(!m.has_commit("a"));
    /// m.record_commit("a");
    /// assert!(m.has_commit("a"));
    /// ```
    pub fn has_commit(&self, id: &str) -> bool {
        self.commits.iter().any(|c| c == id)
    }

    /// Lists commit `id` last (moving it there if it was listed), keeping the
    /// last [`COMMIT_HISTORY`] ids.
    ///
    /// ```
    /// let mut m = lodt::dataset::Manifest::new(Default::default(), Default::default());
    /// for i in 0..1100 {
    ///     m.record_commit(&format!("c{i}"));
    /// }
    /// assert_eq!(m.commits.len(), lodt::dataset::manifest::COMMIT_HISTORY);
    /// assert_eq!(m.commits.last().map(String::as_str), Some("c1099"));
    /// assert!(!m.has_commit("c0") && m.has_commit("c76"));
    /// ```
    pub fn record_commit(&mut self, id: &str) {
        self.commits.retain(|c| c != id);
        self.commits.push(id.to_owned());
        let excess = self.commits.len().saturating_sub(COMMIT_HISTORY);
        self.commits.drain(..excess);
    }

    /// The number of shards.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::Manifest::new(Default::default(), Default::default()).num_shards(), 0);
    /// ```
    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    /// The number of top-level sequences over all shards.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::Manifest::new(Default::default(), Default::default()).num_sequences(), 0);
    /// ```
    pub fn num_sequences(&self) -> u64 {
        self.shards.iter().map(|s| s.sequences).sum()
    }

    /// The number of batches over all shards.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::Manifest::new(Default::default(), Default::default()).num_batches(), 0);
    /// ```
    pub fn num_batches(&self) -> u64 {
        self.shards.iter().map(|s| s.batches).sum()
    }

    /// The bytes of all shards.
    ///
    /// ```
    /// assert_eq!(lodt::dataset::Manifest::new(Default::default(), Default::default()).num_bytes(), 0);
    /// ```
    pub fn num_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.bytes).sum()
    }

    /// Per schema tensor, the counts summed over all shards.
    ///
    /// ```
    /// assert!(lodt::dataset::Manifest::new(Default::default(), Default::default()).totals().is_empty());
    /// ```
    pub fn totals(&self) -> Vec<TensorCounts> {
        let mut totals: Vec<TensorCounts> = self
            .schema
            .tensors
            .iter()
            .map(|t| TensorCounts {
                levels: vec![0; t.lod_levels],
                rows: 0,
            })
            .collect();
        for shard in &self.shards {
            for (total, counts) in totals.iter_mut().zip(&shard.tensors) {
                for (a, b) in total.levels.iter_mut().zip(&counts.levels) {
                    *a = a.saturating_add(*b);
                }
                total.rows = total.rows.saturating_add(counts.rows);
            }
        }
        totals
    }

    /// The manifest's JSON: one line per shard, so a large manifest stays
    /// compact and still reads well. Ends with a newline.
    ///
    /// ```
    /// let m = lodt::dataset::Manifest::new(Default::default(), Default::default());
    /// let text = String::from_utf8(m.to_json_bytes()).unwrap();
    /// assert!(text.starts_with(r#"{"format":"lodt-dataset","version":{"major":1,"minor":5}"#));
    /// ```
    pub fn to_json_bytes(&self) -> Vec<u8> {
        self.to_json_bytes_pointing(None)
    }

    /// The JSON text, naming the shard index on its first line (section
    /// 3.2) when given `index`: the JSON of the `index` field's value.
    pub(crate) fn to_json_bytes_pointing(&self, index: Option<&str>) -> Vec<u8> {
        // Serializing these plain structs and string maps cannot fail.
        let json = |v: &dyn erased::Ser| v.json();
        let mut out = String::new();
        out.push_str("{\"format\":");
        out.push_str(&json(&self.format));
        out.push_str(",\"version\":");
        out.push_str(&json(&self.version));
        if let Some(index) = index {
            out.push_str(",\"index\":");
            out.push_str(index);
        }
        out.push_str(",\n\"schema\":");
        out.push_str(&json(&self.schema));
        out.push_str(",\n\"metadata\":");
        out.push_str(&json(&self.metadata));
        out.push_str(",\n\"commits\":");
        out.push_str(&json(&self.commits));
        if let Some(commit) = &self.commit {
            out.push_str(",\n\"commit\":");
            out.push_str(&json(commit));
        }
        out.push_str(",\n\"shards\":[");
        for (i, shard) in self.shards.iter().enumerate() {
            out.push_str(if i == 0 { "\n" } else { ",\n" });
            out.push_str(&json(shard));
        }
        out.push_str("\n]}\n");
        out.into_bytes()
    }

    /// Parses and checks a manifest (`path` names it in errors): valid JSON,
    /// format [`FORMAT_NAME`], major version [`MANIFEST_MAJOR`], and every
    /// rule of [`Manifest::validate`].
    ///
    /// ```
    /// let err = lodt::dataset::Manifest::from_json_bytes(b"{}", "x/lodt-dataset.json").unwrap_err();
    /// assert!(err.to_string().contains("x/lodt-dataset.json"));
    /// ```
    pub fn from_json_bytes(bytes: &[u8], path: &str) -> Result<Manifest> {
        #[derive(Deserialize)]
        struct Head {
            format: Option<String>,
            version: Option<ManifestVersion>,
        }
        let head: Head = serde_json::from_slice(bytes)
            .map_err(|e| DatasetError::bad_manifest(path, format!("not a JSON object: {e}")))?;
        if head.format.as_deref() != Some(FORMAT_NAME) {
            return Err(DatasetError::bad_manifest(
                path,
                format!(
                    "the \"format\" field must be {FORMAT_NAME:?}, found {:?}",
                    head.format.unwrap_or_default()
                ),
            ));
        }
        match head.version {
            Some(v) if v.major == MANIFEST_MAJOR => {}
            Some(v) => {
                return Err(DatasetError::UnsupportedVersion {
                    path: path.to_owned(),
                    found: format!("{}.{}", v.major, v.minor),
                    supported: MANIFEST_MAJOR,
                });
            }
            None => {
                return Err(DatasetError::bad_manifest(
                    path,
                    "no \"version\" field {\"major\":1,\"minor\":0}",
                ));
            }
        }
        let manifest: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| DatasetError::bad_manifest(path, e.to_string()))?;
        manifest.validate(path)?;
        Ok(manifest)
    }

    /// Checks the rules of `spec/DATASET.md` section 3 that need no shard:
    /// the schema's own rules (if it has shards), valid and unique shard
    /// names, and each entry's counts agreeing with each other and with the
    /// schema. `path` names the manifest in errors.
    ///
    /// ```
    /// let mut m = lodt::dataset::Manifest::new(Default::default(), Default::default());
    /// m.shards.push(lodt::dataset::ShardEntry { name: "../x.lodt".into(), bytes: 0, footer_crc: 0,
    ///     batches: 0, sequences: 0, batch_sequences: vec![], tensors: vec![], format_version: None });
    /// assert!(m.validate("m").is_err());
    /// ```
    pub fn validate(&self, path: &str) -> Result<()> {
        let bad = |reason: String| DatasetError::bad_manifest(path, reason);
        self.validate_head(path, !self.shards.is_empty())?;
        let mut names = HashSet::new();
        let mut total: u64 = 0;
        for (i, s) in self.shards.iter().enumerate() {
            let at = format!("shard {i} ({:?})", s.name);
            if !names.insert(s.name.as_str()) {
                return Err(bad(format!("{at}: the name is listed twice")));
            }
            if s.batch_sequences.len() as u64 != s.batches {
                return Err(bad(format!(
                    "{at}: batch_sequences has {} entries, expected one per batch ({})",
                    s.batch_sequences.len(),
                    s.batches
                )));
            }
            let sum = s
                .batch_sequences
                .iter()
                .try_fold(0u64, |a, &b| a.checked_add(b))
                .ok_or_else(|| bad(format!("{at}: batch_sequences overflow")))?;
            total = total
                .checked_add(s.sequences)
                .ok_or_else(|| bad(format!("{at}: the dataset's sequence count overflows")))?;
            let tops = s
                .tensors
                .iter()
                .map(|c| (c.levels.len(), c.levels.first().copied().unwrap_or(c.rows)));
            check_shard(
                &self.schema,
                i,
                &s.name,
                (sum, s.sequences),
                s.tensors.len(),
                tops,
            )
            .map_err(bad)?;
        }
        Ok(())
    }

    /// The rules of section 3 on everything but the shard list: the schema
    /// (when there are shards or it is not empty) and the commit ids. The
    /// JSON manifest and the shard index (section 3.2) are both held to them.
    pub(crate) fn validate_head(&self, path: &str, has_shards: bool) -> Result<()> {
        let bad = |reason: String| DatasetError::bad_manifest(path, reason);
        if has_shards || !self.schema.is_empty() {
            self.schema
                .check_self(&format!("the schema of {path}"))
                .map_err(|e| bad(e.to_string()))?;
        }
        if let Some(record) = &self.commit {
            record
                .check()
                .map_err(|e| bad(format!("\"commit\": {e}")))?;
        }
        if self.commits.len() > COMMIT_HISTORY {
            return Err(bad(format!(
                "\"commits\" lists {} ids, expected at most {COMMIT_HISTORY}",
                self.commits.len()
            )));
        }
        let mut ids = HashSet::new();
        for id in &self.commits {
            if !valid_commit_id(id) {
                return Err(bad(format!(
                    "commit id {id:?}: a commit id must be 1 to {MAX_COMMIT_ID} ASCII letters, digits, '.', '_' or '-'"
                )));
            }
            if !ids.insert(id.as_str()) {
                return Err(bad(format!("commit id {id:?} is listed twice")));
            }
        }
        Ok(())
    }
}

/// The fingerprint of a shard list (`spec/DATASET.md` 7.2): the CRC32 of,
/// per shard in order, its name's length, its name, its bytes, footer CRC
/// and sequences (`name, bytes, footer_crc, sequences`).
pub(crate) fn fingerprint_of<'a>(shards: impl Iterator<Item = (&'a str, u64, u32, u64)>) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for (name, bytes, crc, sequences) in shards {
        h.update(&(name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update(&bytes.to_le_bytes());
        h.update(&crc.to_le_bytes());
        h.update(&sequences.to_le_bytes());
    }
    h.finalize()
}

/// The rules of section 3 on shard `i` (name `name`) that the JSON manifest
/// and the shard index share: a valid name; its batches' sequences summing to
/// its sequence count (`counts`: the sum, the count); one tensor count per
/// schema tensor (`tensors` of them), each with the schema's number of
/// levels (`tops`: levels, top-level count) and as many top-level sequences
/// as the shard. Uniqueness of names is the caller's to check.
pub(crate) fn check_shard(
    schema: &Schema,
    i: usize,
    name: &str,
    counts: (u64, u64),
    tensors: usize,
    tops: impl Iterator<Item = (usize, u64)>,
) -> std::result::Result<(), String> {
    let at = || format!("shard {i} ({name:?})");
    if !valid_shard_name(name) {
        return Err(format!(
            "{}: a shard name must be 1 to 200 ASCII letters, digits, '.', '_' or '-', not start with '.', and end in .lodt",
            at()
        ));
    }
    let (sum, sequences) = counts;
    if sum != sequences {
        return Err(format!(
            "{}: batch_sequences sum to {sum}, expected \"sequences\" ({sequences})",
            at()
        ));
    }
    if tensors != schema.tensors.len() {
        return Err(format!(
            "{}: \"tensors\" has {tensors} entries, expected one per schema tensor ({})",
            at(),
            schema.tensors.len()
        ));
    }
    for (t, (levels, top)) in schema.tensors.iter().zip(tops) {
        if levels != t.lod_levels {
            return Err(format!(
                "{}: tensor {:?} has counts for {levels} levels, expected {}",
                at(),
                t.name,
                t.lod_levels
            ));
        }
        if top != sequences {
            return Err(format!(
                "{}: tensor {:?} has {top} top-level sequences, expected the shard's {sequences}",
                at(),
                t.name
            ));
        }
    }
    Ok(())
}

/// Serializing a value that cannot fail to serialize (plain structs, string
/// maps) without an `unwrap`.
mod erased {
    pub(super) trait Ser {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Ser for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_else(|_| "null".to_owned())
        }
    }
}

/// Merges partial manifests into `base` (the dataset's manifest, if it has
/// one): the first non-empty schema is the schema and every other non-empty
/// one must equal it; metadata is the union and a key may not have two
/// values; the parts' commit ids are added to `base`'s (so a part writer
/// retried after its part was merged finds its id in the manifest); shards are `base`'s, then each part's in the order given. A shard
/// listed in two manifests must be described identically in both (it was
/// merged before: it is kept once); otherwise that is a conflict.
///
/// ```
/// use lodt::dataset::{merge_manifests, Manifest, Schema, ShardEntry, TensorCounts, TensorSchema};
/// use lodt::DType;
/// let x = TensorSchema { name: "x".into(), dtype: DType::Float32, element_shape: vec![], lod_levels: 1 };
/// let schema = Schema { tensors: vec![x] };
/// let shard = |name: &str| ShardEntry { name: name.into(), bytes: 256, footer_crc: 1, batches: 1,
///     sequences: 2, batch_sequences: vec![2], tensors: vec![TensorCounts { levels: vec![2], rows: 5 }],
///     format_version: None };
/// let mut a = Manifest::new(schema.clone(), [("k".into(), "v".into())].into());
/// a.shards.push(shard("a-shard-000000.lodt"));
/// let mut b = Manifest::new(schema, Default::default());
/// b.shards.push(shard("b-shard-000000.lodt"));
/// let merged = merge_manifests(None, &[a.clone(), b.clone()])?;
/// assert_eq!((merged.num_shards(), merged.num_sequences()), (2, 4));
/// // Merging again changes nothing: identical entries are kept once.
/// assert_eq!(merge_manifests(Some(&merged), &[a.clone(), b])?, merged);
/// // A metadata key with two values is a conflict.
/// let c = Manifest::new(Schema::default(), [("k".into(), "w".into())].into());
/// assert!(merge_manifests(None, &[a, c]).is_err());
/// # Ok::<(), lodt::dataset::DatasetError>(())
/// ```
pub fn merge_manifests(base: Option<&Manifest>, parts: &[Manifest]) -> Result<Manifest> {
    let mut out = base
        .cloned()
        .unwrap_or_else(|| Manifest::new(Schema::default(), BTreeMap::new()));
    out.format = FORMAT_NAME.to_owned();
    out.version = ManifestVersion::CURRENT;
    let mut index: BTreeMap<String, usize> = out
        .shards
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i))
        .collect();
    for (p, part) in parts.iter().enumerate() {
        if !part.schema.is_empty() {
            if out.schema.is_empty() {
                out.schema = part.schema.clone();
            } else if out.schema != part.schema {
                return Err(DatasetError::Conflict {
                    what: "schema".into(),
                    detail: format!(
                        "part {p} has {}, the dataset has {}",
                        describe_schema(&part.schema),
                        describe_schema(&out.schema)
                    ),
                });
            }
        }
        for id in &part.commits {
            if !out.has_commit(id) {
                out.record_commit(id);
            }
        }
        for (k, v) in &part.metadata {
            match out.metadata.get(k) {
                Some(old) if old != v => {
                    return Err(DatasetError::Conflict {
                        what: format!("metadata key {k:?}"),
                        detail: format!("part {p} says {v:?}, the dataset has {old:?}"),
                    });
                }
                Some(_) => {}
                None => {
                    out.metadata.insert(k.clone(), v.clone());
                }
            }
        }
        for shard in &part.shards {
            match index.get(&shard.name) {
                Some(&i) => {
                    if out.shards.get(i) != Some(shard) {
                        return Err(DatasetError::Conflict {
                            what: format!("shard {:?}", shard.name),
                            detail: format!(
                                "part {p} describes it differently from an earlier manifest (two writers with one writer id?)"
                            ),
                        });
                    }
                }
                None => {
                    index.insert(shard.name.clone(), out.shards.len());
                    out.shards.push(shard.clone());
                }
            }
        }
    }
    out.validate("the merged manifest")?;
    Ok(out)
}

/// A short description of a schema for messages.
pub(crate) fn describe_schema(schema: &Schema) -> String {
    let parts: Vec<String> = schema
        .tensors
        .iter()
        .map(|t| format!("{:?}: {}", t.name, t.describe()))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The `footer_crc` field of the trailer of an open file (its last 64 bytes;
/// spec/FORMAT.md section 6.3), which `LodtFile` checked when opening it:
/// one 64-byte read through the file's source. `location` names the file
/// in errors.
pub(crate) fn footer_crc(file: &LodtFile, location: &str) -> Result<u32> {
    let len = file.file_size();
    let range = len.saturating_sub(64)..len;
    let read = file
        .source()
        .read_ranges(std::slice::from_ref(&range))
        .map_err(|e| DatasetError::io("reading the trailer of", location, e))?;
    read.first()
        .and_then(|b| b.as_slice().get(24..28))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| {
            DatasetError::io(
                "reading the trailer of",
                location,
                std::io::Error::other("a short read"),
            )
        })
}
