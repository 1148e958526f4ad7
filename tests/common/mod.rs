//! Helpers shared by the integration tests: the design doc's seed LoD and
//! tensor, and the paths of the test data. Each test file that needs them
//! says `mod common;` (not every file uses every helper).
#![allow(dead_code)]

use lodt::{Lod, LodTensor};
use std::path::PathBuf;

/// The design doc's two-level LoD: articles of 3, 1 and 2 sentences of 3, 2,
/// 4, 1, 2 and 3 words.
pub fn seed_lod() -> Lod {
    Lod::try_from_lengths(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]).unwrap()
}

/// The seed LoD over 15 rows of one i64 each: row `i` holds `i`.
pub fn seed_tensor() -> LodTensor {
    LodTensor::from_vec((0..15i64).collect(), vec![15, 1], seed_lod()).unwrap()
}

/// The seed LoD over 15 rows of `[2, 2]` f32s, counting from 0.
pub fn seed_frames() -> LodTensor {
    LodTensor::from_vec(
        (0..15 * 4).map(|i| i as f32).collect(),
        vec![15, 2, 2],
        seed_lod(),
    )
    .unwrap()
}

/// `tests/data/<sub>`.
pub fn data_dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(sub)
}

/// `spec/vectors`.
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec/vectors")
}
