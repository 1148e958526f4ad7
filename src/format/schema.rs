//! The schema of a 2.0 file (`spec/FORMAT.md` §12): the tensors every batch
//! holds until the next schema (names, dtypes, element shapes, LoD levels),
//! stored once as JSON in the head of the batch that starts it.

use super::error::{ErrorSite, FilePart, FormatError, Result};
use super::layout::{MAX_DIMS, MAX_LOD_LEVELS, bounded_dims, parse_json};
use crate::Batch;
use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The tensors every batch of a 2.0 file holds until the next schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Schema {
    pub tensors: Vec<SchemaTensor>,
}

impl Schema {
    /// About the bytes this schema holds in memory (its names and shapes,
    /// and a fixed cost per tensor): what bounds the schemas a stream
    /// reader keeps.
    pub(crate) fn cost(&self) -> usize {
        self.tensors.iter().fold(64, |acc, t| {
            acc.saturating_add(64 + t.name.len() + 8 * t.shape.len())
        })
    }
}

/// One tensor of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaTensor {
    /// Shared by the parsed batches' [`TensorMeta`](super::batch_meta::TensorMeta)s.
    pub name: Arc<str>,
    pub dtype: DType,
    /// The element shape (the dimensions after the first).
    pub shape: Vec<usize>,
    /// The number of LoD levels.
    pub lod: usize,
    /// A 0-D tensor.
    pub scalar: bool,
}

#[derive(Serialize, Deserialize)]
struct SchemaJson {
    tensors: Vec<SchemaTensorJson>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

#[derive(Serialize, Deserialize)]
struct SchemaTensorJson {
    name: String,
    dtype: String,
    #[serde(deserialize_with = "bounded_dims")]
    shape: Vec<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    lod: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    scalar: bool,
}

impl Schema {
    /// The schema of `batch`.
    pub(crate) fn of(batch: &Batch) -> Schema {
        Schema {
            tensors: batch
                .iter()
                .map(|(name, t)| SchemaTensor {
                    name: name.into(),
                    dtype: t.dtype(),
                    shape: t.shape().get(1..).unwrap_or(&[]).to_vec(),
                    lod: t.lod().num_levels(),
                    scalar: t.shape().is_empty(),
                })
                .collect(),
        }
    }

    /// The schema as the JSON a 2.0 head stores.
    pub(super) fn to_json(&self) -> Result<Vec<u8>> {
        let json = SchemaJson {
            tensors: self
                .tensors
                .iter()
                .map(|t| SchemaTensorJson {
                    name: t.name.to_string(),
                    dtype: t.dtype.name().to_owned(),
                    shape: t.shape.iter().map(|&d| d as u64).collect(),
                    lod: t.lod as u64,
                    scalar: t.scalar,
                })
                .collect(),
        };
        serde_json::to_vec(&json).map_err(|e| FormatError::Unwritable(format!("schema: {e}")))
    }

    /// Parses and checks the schema JSON held by batch `k`'s head.
    pub(super) fn parse(bytes: &[u8], k: u64) -> Result<Schema> {
        let at = || ErrorSite::batch(k, FilePart::BatchMetadata);
        let json: SchemaJson = parse_json(bytes, at())?;
        let mut names = HashMap::with_capacity(json.tensors.len());
        let mut tensors = Vec::with_capacity(json.tensors.len());
        for t in json.tensors {
            let bad = |reason: String| Err(FormatError::corrupt(at(), reason));
            if t.name.is_empty() {
                return bad("a tensor of the schema has an empty name".into());
            }
            if names.insert(t.name.clone(), ()).is_some() {
                return bad(format!("two tensors of the schema are named {:?}", t.name));
            }
            let Ok(dtype) = t.dtype.parse::<DType>() else {
                return bad(format!("tensor {:?}: unknown dtype {:?}", t.name, t.dtype));
            };
            if t.shape.len() >= MAX_DIMS {
                return bad(format!(
                    "tensor {:?}: expected at most {} element dimensions, found {}",
                    t.name,
                    MAX_DIMS - 1,
                    t.shape.len()
                ));
            }
            if t.lod > MAX_LOD_LEVELS as u64 {
                return bad(format!(
                    "tensor {:?}: expected at most {MAX_LOD_LEVELS} LoD levels, found {}",
                    t.name, t.lod
                ));
            }
            if t.scalar && (!t.shape.is_empty() || t.lod != 0) {
                return bad(format!(
                    "tensor {:?}: a scalar has shape [] and no LoD, found shape {:?} and {} levels",
                    t.name, t.shape, t.lod
                ));
            }
            let shape = t
                .shape
                .iter()
                .map(|&d| {
                    usize::try_from(d).map_err(|_| {
                        FormatError::corrupt(at(), format!("dimension {d} does not fit in memory"))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            tensors.push(SchemaTensor {
                name: t.name.into(),
                dtype,
                shape,
                lod: t.lod as usize,
                scalar: t.scalar,
            });
        }
        Ok(Schema { tensors })
    }
}
