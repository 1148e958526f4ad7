//! MosaicML Streaming's MDS datasets (a directory of `index.json` and
//! `shard.NNNNN.mds` files, raw or zstd), read as lodt batches: one batch
//! per shard, one tensor per column (`spec/MDS.md` gives the layout lodt
//! reads and the mapping).
//!
//! | MDS encoding | lodt tensor |
//! |---|---|
//! | `int` | `int64`, one row per sample |
//! | `uint8` … `float64` (numpy scalars) | that dtype, one row per sample |
//! | `ndarray:DTYPE:SHAPE` (static) | that dtype, rows of that shape |
//! | `ndarray`, `ndarray:DTYPE` (dynamic) | a 1-level tensor: one sequence per sample, rows of the array's trailing shape |
//! | `str`, `bytes` | `uint8`, a 1-level tensor: one sequence of bytes per sample |
//!
//! Other encodings (`pkl`, `json`, images, …) are refused by name: choose
//! the other columns with `--columns`.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lodt::mds::MdsReader;
//! let dir = tempfile::tempdir()?;
//! // One shard of two samples: a dynamic int32 array and an int.
//! let config = br#"{"column_encodings":["ndarray:int32","int"],"column_names":["ids","n"],"column_sizes":[null,8]}"#;
//! let samples: Vec<Vec<u8>> = [vec![1i32, 2, 3], vec![4]].iter().enumerate().map(|(k, ids)| {
//!     let mut s = Vec::new();
//!     s.extend_from_slice(&(2 + 4 * ids.len() as u32).to_le_bytes()); // the size of the array
//!     s.push((1 << 2) | 0); // ndim 1, uint8 shape
//!     s.push(ids.len() as u8);
//!     for v in ids { s.extend_from_slice(&v.to_le_bytes()); }
//!     s.extend_from_slice(&(k as i64).to_le_bytes());
//!     s
//! }).collect();
//! let mut shard = Vec::new();
//! shard.extend_from_slice(&2u32.to_le_bytes());
//! let mut at = 4 + 12 + config.len() as u32;
//! shard.extend_from_slice(&at.to_le_bytes());
//! for s in &samples { at += s.len() as u32; shard.extend_from_slice(&at.to_le_bytes()); }
//! shard.extend_from_slice(config);
//! for s in &samples { shard.extend_from_slice(s); }
//! std::fs::write(dir.path().join("shard.00000.mds"), &shard)?;
//! std::fs::write(dir.path().join("index.json"), format!(r#"{{"version": 2, "shards": [{{"format": "mds", "version": 2,
//!     "column_encodings": ["ndarray:int32", "int"], "column_names": ["ids", "n"], "column_sizes": [null, 8],
//!     "compression": null, "samples": 2, "raw_data": {{"basename": "shard.00000.mds", "bytes": {}}}, "zip_data": null}}]}}"#, shard.len()))?;
//! let batch = MdsReader::open(dir.path())?.next().unwrap()?;
//! assert_eq!(batch.get("ids").unwrap().as_slice::<i32>()?, &[1, 2, 3, 4]);
//! assert_eq!(batch.get("ids").unwrap().lod().level(0).unwrap().as_ref(), &[0, 3, 4]);
//! assert_eq!(batch.get("n").unwrap().as_slice::<i64>()?, &[0, 1]);
//! # Ok(()) }
//! ```

mod column;
mod error;
mod index;
mod reader;

pub use error::{MdsError, Result};
pub use index::{MdsIndex, MdsShard};
pub use reader::MdsReader;
