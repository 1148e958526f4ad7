//! The old flat names of items that moved into [`names`](super::names),
//! [`store`](super::store) and [`manifest`](super::manifest), or were
//! renamed: deprecated, kept for one release, each the same item under its
//! old name.

use super::names;

/// Moved to [`names::PART_PREFIX`].
#[deprecated(note = "moved to lodt::dataset::names::PART_PREFIX")]
pub const PART_PREFIX: &str = names::PART_PREFIX;

/// Moved to [`names::SHARD_SUFFIX`].
#[deprecated(note = "moved to lodt::dataset::names::SHARD_SUFFIX")]
pub const SHARD_SUFFIX: &str = names::SHARD_SUFFIX;

/// Moved to [`manifest::COMMIT_HISTORY`](super::manifest::COMMIT_HISTORY).
#[deprecated(note = "moved to lodt::dataset::manifest::COMMIT_HISTORY")]
pub const COMMIT_HISTORY: usize = super::manifest::COMMIT_HISTORY;

/// Moved to [`store::ObjectVersion`](super::store::ObjectVersion).
#[deprecated(note = "moved to lodt::dataset::store::ObjectVersion")]
pub type ObjectVersion = super::store::ObjectVersion;

/// Moved to [`store::StoreLock`](super::store::StoreLock).
#[deprecated(note = "moved to lodt::dataset::store::StoreLock")]
pub type StoreLock = super::store::StoreLock;

/// Renamed [`DatasetWriterOptions`](super::DatasetWriterOptions) (it collided
/// with [`format::WriteOptions`](crate::format::WriteOptions), a file's).
///
/// ```
/// #![allow(deprecated)]
/// let o = lodt::dataset::WriterOptions { shard_bytes: 4096, ..Default::default() };
/// assert_eq!(o.shard_bytes, 4096);
/// ```
#[deprecated(note = "renamed lodt::dataset::DatasetWriterOptions")]
pub type WriterOptions = super::writer::DatasetWriterOptions;

/// Moved to [`names::part_manifest_name`].
#[deprecated(note = "moved to lodt::dataset::names::part_manifest_name")]
pub fn part_manifest_name(id: &str) -> String {
    names::part_manifest_name(id)
}

/// Moved to [`names::part_writer_id`].
#[deprecated(note = "moved to lodt::dataset::names::part_writer_id")]
pub fn part_writer_id(name: &str) -> Option<&str> {
    names::part_writer_id(name)
}

/// Moved to [`names::part_shard_prefix`].
#[deprecated(note = "moved to lodt::dataset::names::part_shard_prefix")]
pub fn part_shard_prefix(id: &str) -> String {
    names::part_shard_prefix(id)
}

/// Moved to [`names::shard_writer_id`].
#[deprecated(note = "moved to lodt::dataset::names::shard_writer_id")]
pub fn shard_writer_id(name: &str) -> Option<&str> {
    names::shard_writer_id(name)
}

/// Moved to [`names::valid_shard_name`].
#[deprecated(note = "moved to lodt::dataset::names::valid_shard_name")]
pub fn valid_shard_name(name: &str) -> bool {
    names::valid_shard_name(name)
}

/// Moved to [`names::valid_writer_id`].
#[deprecated(note = "moved to lodt::dataset::names::valid_writer_id")]
pub fn valid_writer_id(id: &str) -> bool {
    names::valid_writer_id(id)
}

/// Moved to [`names::valid_commit_id`].
#[deprecated(note = "moved to lodt::dataset::names::valid_commit_id")]
pub fn valid_commit_id(id: &str) -> bool {
    names::valid_commit_id(id)
}
