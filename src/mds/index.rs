//! `index.json`: the shards of an MDS dataset, their columns and files.

use super::column::Encoding;
use super::error::{MdsError, Result, corrupt};
use serde_json::Value;
use std::path::Path;

/// The most bytes of `index.json` read (64 MiB: millions of shards).
const MAX_INDEX_BYTES: u64 = 64 << 20;

/// One shard of an MDS dataset, as `index.json` describes it.
///
/// See [`MdsIndex`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdsShard {
    /// The raw shard's file name.
    pub raw: String,
    /// The raw shard's size in bytes, when the index gives it.
    pub raw_bytes: Option<u64>,
    /// The compressed shard's file name, if the shard is compressed.
    pub zip: Option<String>,
    /// The codec of the compressed shard (`zstd` or `zstd:LEVEL`).
    pub compression: Option<String>,
    /// The number of samples.
    pub samples: u64,
}

/// A parsed `index.json`: the columns (names, encodings, fixed sizes), the
/// same for every shard, and the shards in order.
///
/// ```
/// use lodt::mds::MdsIndex;
/// let json = br#"{"version": 2, "shards": [{"format": "mds", "column_names": ["x"], "column_encodings": ["int"],
///   "column_sizes": [8], "samples": 3, "compression": null, "raw_data": {"basename": "shard.00000.mds", "bytes": 60}, "zip_data": null}]}"#;
/// let index = MdsIndex::parse(json, "index.json")?;
/// assert_eq!(index.names(), ["x"]);
/// assert_eq!(index.shards()[0].samples, 3);
/// assert!(MdsIndex::parse(br#"{"shards": [{"format": "jsonl"}]}"#, "index.json").is_err());
/// # Ok::<(), lodt::mds::MdsError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MdsIndex {
    names: Vec<String>,
    encodings: Vec<Encoding>,
    shards: Vec<MdsShard>,
}

impl MdsIndex {
    /// Reads `dir/index.json`.
    pub(crate) fn read(dir: &Path) -> Result<MdsIndex> {
        let path = dir.join("index.json");
        let name = path.display().to_string();
        let io = |source| MdsError::Io {
            path: name.clone(),
            source,
        };
        let len = std::fs::metadata(&path).map_err(io)?.len();
        if len > MAX_INDEX_BYTES {
            return Err(corrupt(
                &name,
                "index",
                format!("at most {MAX_INDEX_BYTES} bytes"),
                format!("{len} bytes"),
            ));
        }
        let bytes = std::fs::read(&path).map_err(io)?;
        MdsIndex::parse(&bytes, &name)
    }

    /// Parses the bytes of an `index.json` (`path` names it in errors).
    ///
    /// See the [type-level example](MdsIndex).
    pub fn parse(bytes: &[u8], path: &str) -> Result<MdsIndex> {
        let bad = |what: &str, expected: &str, found: String| corrupt(path, what, expected, found);
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| bad("index", "JSON", e.to_string()))?;
        let shards = value
            .get("shards")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("index", "a \"shards\" list", "none".into()))?;
        let mut index = MdsIndex {
            names: Vec::new(),
            encodings: Vec::new(),
            shards: Vec::new(),
        };
        for (k, shard) in shards.iter().enumerate() {
            let what = format!("shard {k}");
            let format = shard.get("format").and_then(Value::as_str).unwrap_or("");
            if format != "mds" {
                return Err(MdsError::Unsupported(format!(
                    "{path}: {what} is in format {format:?}; lodt reads MDS shards (\"mds\") only"
                )));
            }
            let strings = |key: &str| -> Result<Vec<String>> {
                shard
                    .get(key)
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect())
                    .ok_or_else(|| {
                        bad(
                            &what,
                            &format!("a {key} list of strings"),
                            format!("{:?}", shard.get(key)),
                        )
                    })
            };
            let names = strings("column_names")?;
            let encodings = strings("column_encodings")?
                .iter()
                .map(|e| {
                    Encoding::parse(e)
                        .map_err(|m| MdsError::Unsupported(format!("{path}: {what}: {m}")))
                })
                .collect::<Result<Vec<_>>>()?;
            let sizes = shard
                .get("column_sizes")
                .and_then(Value::as_array)
                .ok_or_else(|| bad(&what, "a column_sizes list", "none".into()))?;
            if names.len() != encodings.len() || sizes.len() != names.len() {
                return Err(bad(
                    &what,
                    "as many column names, encodings and sizes",
                    format!("{}, {} and {}", names.len(), encodings.len(), sizes.len()),
                ));
            }
            for ((name, enc), size) in names.iter().zip(&encodings).zip(sizes) {
                if enc.fixed_size() != size.as_u64() {
                    return Err(bad(
                        &format!("{what}, column {name}"),
                        &format!("the size {:?} of its encoding", enc.fixed_size()),
                        size.to_string(),
                    ));
                }
            }
            if k == 0 {
                index.names = names;
                index.encodings = encodings;
            } else if names != index.names || encodings != index.encodings {
                return Err(bad(
                    &what,
                    "the columns of shard 0 (one schema)",
                    format!("{names:?}"),
                ));
            }
            let file = |key: &str| -> Result<Option<(String, Option<u64>)>> {
                match shard.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => {
                        let base = v.get("basename").and_then(Value::as_str).unwrap_or("");
                        let plain = !base.is_empty()
                            && base != "."
                            && base != ".."
                            && !base.contains(['/', '\\', '\0']);
                        if !plain {
                            return Err(bad(
                                &what,
                                &format!("a file name as {key}.basename"),
                                format!("{base:?}"),
                            ));
                        }
                        Ok(Some((
                            base.to_owned(),
                            v.get("bytes").and_then(Value::as_u64),
                        )))
                    }
                }
            };
            let (raw, raw_bytes) =
                file("raw_data")?.ok_or_else(|| bad(&what, "raw_data", "none".into()))?;
            let samples = shard
                .get("samples")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(&what, "a sample count", "none".into()))?;
            index.shards.push(MdsShard {
                raw,
                raw_bytes,
                zip: file("zip_data")?.map(|(name, _)| name),
                compression: shard
                    .get("compression")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                samples,
            });
        }
        Ok(index)
    }

    /// The column names.
    ///
    /// See the [type-level example](MdsIndex).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The shards, in order.
    ///
    /// See the [type-level example](MdsIndex).
    pub fn shards(&self) -> &[MdsShard] {
        &self.shards
    }

    /// The columns' encodings.
    pub(super) fn encodings(&self) -> &[Encoding] {
        &self.encodings
    }
}
