//! The shard index (`spec/DATASET.md` section 3.2): a binary, checksummed
//! copy of the manifest, written beside it by every commit, that a reader
//! maps instead of parsing the JSON. Its numbers are arrays of
//! little-endian integers the reader uses in place, so opening a dataset of
//! a million shards costs a check of each byte once, not a million parsed
//! JSON objects; and the processes of a node share its pages.
//!
//! The manifest names its index on its first line (`"index":{"name":...,
//! "crc":...}`); the index records the manifest's length. A reader uses the
//! index only when both agree; otherwise it reads the JSON, which stays the
//! readable record.

use super::error::{DatasetError, Result};
use super::manifest::{Manifest, ManifestVersion, Schema, TensorCounts};
use super::names::INDEX_PREFIX;
use crate::buffer::{AlignedBytes, Buffer, ByteStorage};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// The first 8 bytes of an index.
const MAGIC: [u8; 8] = *b"LODT-IDX";
/// The index's major version (another is not read: the JSON is).
const MAJOR: u16 = 1;
/// The index's minor version.
const MINOR: u16 = 0;
/// The number of sections.
const SECTIONS: usize = 10;
/// Where the section table starts.
const TABLE: usize = 64;
/// Where the header's CRC is: after the table.
const HEADER_CRC_AT: usize = TABLE + SECTIONS * 24;
/// Where the first section starts (8-aligned).
const FIRST_SECTION: usize = HEADER_CRC_AT + 8;
/// The most bytes of the manifest a reader reads to find the index's name.
pub(crate) const HEAD_BYTES: usize = 4096;

/// The sections, in file order.
#[derive(Clone, Copy)]
enum Sec {
    /// The manifest without its shards, as JSON.
    Head,
    /// `S + 1` u64: the first sequence of each shard, then the total.
    ShardStarts,
    /// `S + 1` u64: where each shard's entries in `BatchStarts` begin, then
    /// their count.
    BatchOffsets,
    /// Per shard, `batches + 1` u64: the first sequence of each batch within
    /// the shard, then the shard's total.
    BatchStarts,
    /// `S` u64: each shard's size in bytes.
    Bytes,
    /// `S` u32: each shard's `footer_crc`.
    FooterCrcs,
    /// `S` u16: each shard's format version, `major · 256 + minor`; 0: none recorded.
    Versions,
    /// `S + 1` u64: where each shard's name begins in `Names`, then its length.
    NameOffsets,
    /// The shard names, one after another.
    Names,
    /// Per shard, per schema tensor: its level counts, then its rows (u64).
    Tensors,
}

/// Where a manifest's index is, as its first line names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexPointer {
    /// The index's object name: [`INDEX_PREFIX`] and a commit id.
    pub name: String,
    /// The index's header CRC, 8 lowercase hex digits.
    pub crc: String,
}

impl IndexPointer {
    /// A pointer to a new index object for the commit `commit_id`, with a
    /// placeholder CRC of the final length.
    pub(crate) fn new(commit_id: &str) -> IndexPointer {
        IndexPointer {
            name: format!("{INDEX_PREFIX}{commit_id}"),
            crc: "00000000".to_owned(),
        }
    }

    /// The pointer a manifest's first bytes hold, if they hold one: the
    /// first line must read `{"format":"lodt-dataset","version":{...},"index":{...},`
    /// (what this crate's writer writes); any other layout has none.
    pub(crate) fn from_head(head: &[u8]) -> Option<IndexPointer> {
        #[derive(Deserialize)]
        struct Line {
            format: String,
            version: ManifestVersion,
            index: IndexPointer,
        }
        let end = head.iter().position(|&b| b == b'\n')?;
        let line = head[..end].strip_suffix(b",")?;
        let mut text = line.to_vec();
        text.push(b'}');
        let parsed: Line = serde_json::from_slice(&text).ok()?;
        let valid = parsed.format == super::manifest::FORMAT_NAME
            && parsed.version.major == super::manifest::MANIFEST_MAJOR
            && super::names::valid_index_name(&parsed.index.name)
            && parsed.index.crc.len() == 8
            && u32::from_str_radix(&parsed.index.crc, 16).is_ok();
        valid.then_some(parsed.index)
    }

    fn crc_value(&self) -> Option<u32> {
        u32::from_str_radix(&self.crc, 16).ok()
    }
}

/// The manifest without its shards: the index's first section.
#[derive(Serialize, Deserialize)]
struct Head {
    format: String,
    version: ManifestVersion,
    schema: Schema,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    commits: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit: Option<Box<super::commit_record::CommitRecord>>,
}

/// The index of `manifest`, whose JSON (with the pointer to this index) is
/// `manifest_bytes` long: the bytes of `spec/DATASET.md` section 3.2, and
/// the header CRC the pointer records.
pub(crate) fn encode(manifest: &Manifest, manifest_bytes: u64) -> (Vec<u8>, u32) {
    let head = Head {
        format: manifest.format.clone(),
        version: manifest.version,
        schema: manifest.schema.clone(),
        metadata: manifest.metadata.clone(),
        commits: manifest.commits.clone(),
        commit: manifest.commit.clone(),
    };
    let head = serde_json::to_vec(&head).unwrap_or_default();
    let shards = &manifest.shards;
    let mut sections: Vec<Vec<u8>> = vec![Vec::new(); SECTIONS];
    let put64 = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
    sections[Sec::Head as usize] = head;
    let (mut seq, mut entries, mut name_at) = (0u64, 0u64, 0u64);
    for s in shards {
        put64(&mut sections[Sec::ShardStarts as usize], seq);
        seq += s.sequences;
        put64(&mut sections[Sec::BatchOffsets as usize], entries);
        entries += s.batch_sequences.len() as u64 + 1;
        let mut local = 0u64;
        for &n in &s.batch_sequences {
            put64(&mut sections[Sec::BatchStarts as usize], local);
            local += n;
        }
        put64(&mut sections[Sec::BatchStarts as usize], local);
        put64(&mut sections[Sec::Bytes as usize], s.bytes);
        sections[Sec::FooterCrcs as usize].extend_from_slice(&s.footer_crc.to_le_bytes());
        let version = s
            .format_version
            .map_or(0u16, |v| (v.major.min(255) << 8) | v.minor.min(255));
        sections[Sec::Versions as usize].extend_from_slice(&version.to_le_bytes());
        put64(&mut sections[Sec::NameOffsets as usize], name_at);
        name_at += s.name.len() as u64;
        sections[Sec::Names as usize].extend_from_slice(s.name.as_bytes());
        for c in &s.tensors {
            for &l in &c.levels {
                put64(&mut sections[Sec::Tensors as usize], l);
            }
            put64(&mut sections[Sec::Tensors as usize], c.rows);
        }
    }
    put64(&mut sections[Sec::ShardStarts as usize], seq);
    put64(&mut sections[Sec::BatchOffsets as usize], entries);
    put64(&mut sections[Sec::NameOffsets as usize], name_at);

    let mut out = vec![0u8; FIRST_SECTION];
    out[..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&MAJOR.to_le_bytes());
    out[10..12].copy_from_slice(&MINOR.to_le_bytes());
    out[12..16].copy_from_slice(&(SECTIONS as u32).to_le_bytes());
    out[16..24].copy_from_slice(&(shards.len() as u64).to_le_bytes());
    out[24..32].copy_from_slice(&entries.to_le_bytes());
    out[32..40].copy_from_slice(&manifest_bytes.to_le_bytes());
    for (i, body) in sections.iter().enumerate() {
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let at = TABLE + 24 * i;
        let offset = out.len() as u64;
        out[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&(body.len() as u64).to_le_bytes());
        out[at + 16..at + 20].copy_from_slice(&crc32fast::hash(body).to_le_bytes());
        out.extend_from_slice(body);
    }
    let crc = crc32fast::hash(&out[..HEADER_CRC_AT]);
    out[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    (out, crc)
}

/// The JSON of `manifest` naming its index, and that index, for the commit
/// `commit_id`: what a commit writes (the index first).
pub(crate) fn manifest_with_index(
    manifest: &Manifest,
    commit_id: &str,
) -> (Vec<u8>, IndexPointer, Vec<u8>) {
    let mut pointer = IndexPointer::new(commit_id);
    let text = |p: &IndexPointer| serde_json::to_string(p).unwrap_or_default();
    // The CRC has a fixed width, so the manifest's length is known before it.
    let length = manifest.to_json_bytes_pointing(Some(&text(&pointer))).len() as u64;
    let (index, crc) = encode(manifest, length);
    pointer.crc = format!("{crc:08x}");
    let json = manifest.to_json_bytes_pointing(Some(&text(&pointer)));
    (json, pointer, index)
}

/// An index read and checked: every section's CRC and every rule of the
/// manifest, done once when it is opened.
pub(crate) struct ShardIndex {
    bytes: Buffer,
    shards: usize,
    /// Per shard, the words of its tensor counts.
    words: usize,
    sections: [Range<usize>; SECTIONS],
    head: Head,
    location: String,
    /// The shard list's fingerprint (section 7.2) and the shards' bytes,
    /// computed by the check.
    fingerprint: u32,
    total_bytes: u64,
}

impl std::fmt::Debug for ShardIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardIndex")
            .field("location", &self.location)
            .field("shards", &self.shards)
            .finish()
    }
}

/// A little-endian u64 at `i` of `bytes` (0 past the end: callers index
/// within lengths checked when the index was opened).
fn u64_at(bytes: &[u8], i: usize) -> u64 {
    bytes
        .get(i * 8..i * 8 + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

impl ShardIndex {
    /// Checks `storage`, the index object at `location`, against the
    /// manifest's pointer (`expected_crc`) and length (`manifest_bytes`).
    /// Every section's CRC, the header's, every length against the counts,
    /// and every rule a JSON manifest is held to (section 3) are checked
    /// here, once.
    pub(crate) fn open(
        storage: Arc<dyn ByteStorage>,
        location: &str,
        pointer: &IndexPointer,
        manifest_bytes: u64,
    ) -> Result<ShardIndex> {
        let bad = |reason: String| DatasetError::bad_manifest(location, reason);
        if cfg!(target_endian = "big") {
            return Err(bad(
                "the index is read in place on little-endian machines only".into(),
            ));
        }
        let bytes = Buffer::from_storage(storage);
        let all = bytes.as_slice();
        if all.len() < FIRST_SECTION {
            return Err(bad(format!(
                "expected at least {FIRST_SECTION} bytes, found {}",
                all.len()
            )));
        }
        if all[..8] != MAGIC {
            return Err(bad(format!(
                "expected the magic {MAGIC:?}, found {:?}",
                &all[..8]
            )));
        }
        let u16_at = |at: usize| u16::from_le_bytes([all[at], all[at + 1]]);
        let u32_at =
            |at: usize| u32::from_le_bytes([all[at], all[at + 1], all[at + 2], all[at + 3]]);
        if u16_at(8) != MAJOR {
            return Err(bad(format!(
                "expected index major version {MAJOR}, found {}",
                u16_at(8)
            )));
        }
        let crc = crc32fast::hash(&all[..HEADER_CRC_AT]);
        if crc != u32_at(HEADER_CRC_AT) || Some(crc) != pointer.crc_value() {
            return Err(bad(format!(
                "header CRC {crc:08x}: expected the recorded {:08x} and the manifest's {}",
                u32_at(HEADER_CRC_AT),
                pointer.crc
            )));
        }
        if u32_at(12) as usize != SECTIONS {
            return Err(bad(format!(
                "expected {SECTIONS} sections, found {}",
                u32_at(12)
            )));
        }
        let recorded = u64_at(&all[32..40], 0);
        if recorded != manifest_bytes {
            return Err(bad(format!(
                "written with a manifest of {recorded} bytes, found one of {manifest_bytes}"
            )));
        }
        let sections = Self::sections(all, &bad)?;
        let section = |s: Sec| &all[sections[s as usize].clone()];
        let head: Head = serde_json::from_slice(section(Sec::Head))
            .map_err(|e| bad(format!("the head section is not the manifest's JSON: {e}")))?;
        let shards = usize::try_from(u64_at(&all[16..24], 0))
            .map_err(|_| bad("the shard count does not fit in memory".into()))?;
        let entries = u64_at(&all[24..32], 0);
        let words: usize = head.schema.tensors.iter().map(|t| t.lod_levels + 1).sum();
        let mut index = ShardIndex {
            bytes,
            shards,
            words,
            sections,
            head,
            location: location.to_owned(),
            fingerprint: 0,
            total_bytes: 0,
        };
        (index.fingerprint, index.total_bytes) = index.check(entries)?;
        Ok(index)
    }

    /// The section table: each section 8-aligned, after the previous one,
    /// inside the file, its CRC right.
    fn sections(
        all: &[u8],
        bad: &dyn Fn(String) -> DatasetError,
    ) -> Result<[Range<usize>; SECTIONS]> {
        let mut out: [Range<usize>; SECTIONS] = Default::default();
        let mut end = FIRST_SECTION;
        for (i, range) in out.iter_mut().enumerate() {
            let at = TABLE + 24 * i;
            let offset = u64_at(&all[at..at + 8], 0);
            let length = u64_at(&all[at + 8..at + 16], 0);
            let crc = u32::from_le_bytes([all[at + 16], all[at + 17], all[at + 18], all[at + 19]]);
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            let stop = usize::try_from(length)
                .ok()
                .and_then(|l| start.checked_add(l))
                .unwrap_or(usize::MAX);
            if !start.is_multiple_of(8) || start < end || stop > all.len() {
                return Err(bad(format!(
                    "section {i}: expected an 8-aligned range after byte {end} within the file's {} bytes, found {offset}..+{length}",
                    all.len()
                )));
            }
            let found = crc32fast::hash(&all[start..stop]);
            if found != crc {
                return Err(bad(format!(
                    "section {i}: CRC {found:08x}, expected the recorded {crc:08x}"
                )));
            }
            *range = start..stop;
            end = stop;
        }
        Ok(out)
    }

    fn section(&self, s: Sec) -> &[u8] {
        self.bytes
            .as_slice()
            .get(self.sections[s as usize].clone())
            .unwrap_or(&[])
    }

    /// Section `s` as a view of the index's bytes (for the counts).
    fn section_buffer(&self, s: Sec) -> Buffer {
        self.bytes
            .slice(self.sections[s as usize].clone())
            .unwrap_or_else(|_| Buffer::from_vec(Vec::<u64>::new()))
    }

    /// Every rule: the lengths the counts give, the counts' own order, and
    /// the manifest's rules (section 3) on each shard. Returns the
    /// fingerprint of the shard list and the shards' bytes (one pass over it).
    fn check(&self, entries: u64) -> Result<(u32, u64)> {
        let bad = |reason: String| DatasetError::bad_manifest(&self.location, reason);
        let s = self.shards as u64;
        let expect = |sec: Sec, what: &str, n: Option<u64>| -> Result<()> {
            let found = self.section(sec).len() as u64;
            match n {
                Some(n) if n == found => Ok(()),
                _ => Err(bad(format!(
                    "the {what} section: expected {} bytes for {s} shards, found {found}",
                    n.map_or("a representable number of".to_owned(), |n| n.to_string())
                ))),
            }
        };
        let words = self.words as u64;
        expect(
            Sec::ShardStarts,
            "shard starts",
            s.checked_add(1).and_then(|n| n.checked_mul(8)),
        )?;
        expect(
            Sec::BatchOffsets,
            "batch offsets",
            s.checked_add(1).and_then(|n| n.checked_mul(8)),
        )?;
        expect(Sec::BatchStarts, "batch starts", entries.checked_mul(8))?;
        expect(Sec::Bytes, "shard sizes", s.checked_mul(8))?;
        expect(Sec::FooterCrcs, "footer CRCs", s.checked_mul(4))?;
        expect(Sec::Versions, "format versions", s.checked_mul(2))?;
        expect(
            Sec::NameOffsets,
            "name offsets",
            s.checked_add(1).and_then(|n| n.checked_mul(8)),
        )?;
        expect(
            Sec::Tensors,
            "tensor counts",
            s.checked_mul(words).and_then(|n| n.checked_mul(8)),
        )?;
        let head = &self.head;
        let manifest = Manifest {
            format: head.format.clone(),
            version: head.version,
            schema: head.schema.clone(),
            metadata: BTreeMap::new(),
            commits: head.commits.clone(),
            commit: head.commit.clone(),
            shards: Vec::new(),
        };
        manifest.validate_head(&self.location, self.shards > 0)?;
        let starts = self.section(Sec::ShardStarts);
        let offsets = self.section(Sec::BatchOffsets);
        let names = self.section(Sec::Names);
        let name_at = self.section(Sec::NameOffsets);
        if u64_at(starts, 0) != 0 || u64_at(offsets, 0) != 0 || u64_at(name_at, 0) != 0 {
            return Err(bad(
                "the shard starts, batch offsets and name offsets must begin at 0".into(),
            ));
        }
        if u64_at(offsets, self.shards) != entries
            || u64_at(name_at, self.shards) != names.len() as u64
        {
            return Err(bad(
                "the batch offsets and name offsets must end at their sections' lengths".into(),
            ));
        }
        self.check_shards(entries)
    }

    /// The per-shard rules of [`ShardIndex::check`], the names' uniqueness,
    /// and the fingerprint and total bytes (one pass).
    fn check_shards(&self, entries: u64) -> Result<(u32, u64)> {
        let bad = |reason: String| DatasetError::bad_manifest(&self.location, reason);
        let starts = self.section(Sec::ShardStarts);
        let offsets = self.section(Sec::BatchOffsets);
        let batch = self.section(Sec::BatchStarts);
        let tensors = self.section(Sec::Tensors);
        let mut total_bytes = 0u64;
        let mut hashes = Vec::new();
        hashes
            .try_reserve_exact(self.shards)
            .map_err(|_| bad(format!("no memory to check {} shard names", self.shards)))?;
        for i in 0..self.shards {
            let (first, next) = (u64_at(offsets, i), u64_at(offsets, i + 1));
            let sequences = u64_at(starts, i + 1).checked_sub(u64_at(starts, i));
            let name = self.name_bytes(i).and_then(|n| std::str::from_utf8(n).ok());
            let (Some(sequences), Some(name)) = (sequences, name) else {
                return Err(bad(format!(
                    "shard {i}: its shard starts must not decrease and its name must lie in the names section"
                )));
            };
            if next <= first || next > entries {
                return Err(bad(format!(
                    "shard {i}: its batch offsets {first}..{next}: expected at least one batch-start entry, within the {entries} there are"
                )));
            }
            let mut previous = 0u64;
            for e in first..next {
                let v = u64_at(batch, e as usize);
                if v < previous || (e == first && v != 0) {
                    return Err(bad(format!(
                        "shard {i}: its batch starts must begin at 0 and not decrease"
                    )));
                }
                previous = v;
            }
            let counts = &tensors[i * self.words * 8..(i + 1) * self.words * 8];
            let mut w = 0;
            let tops = self.head.schema.tensors.iter().map(|t| {
                // The top level's count, or the rows of a tensor without LoD.
                let top = u64_at(counts, w);
                w += t.lod_levels + 1;
                (t.lod_levels, top)
            });
            super::manifest::check_shard(
                &self.head.schema,
                i,
                name,
                (previous, sequences),
                self.head.schema.tensors.len(),
                tops,
            )
            .map_err(bad)?;
            hashes.push((fxhash(name.as_bytes()), i));
            total_bytes = total_bytes.saturating_add(self.bytes(i));
        }
        hashes.sort_unstable();
        for pair in hashes.windows(2) {
            if pair[0].0 == pair[1].0 && self.name_bytes(pair[0].1) == self.name_bytes(pair[1].1) {
                let name = String::from_utf8_lossy(self.name_bytes(pair[1].1).unwrap_or(&[]));
                return Err(bad(format!(
                    "shard {} ({name:?}): the name is listed twice",
                    pair[1].1
                )));
            }
        }
        let fingerprint = super::manifest::fingerprint_of((0..self.shards).map(|i| {
            // Starts do not decrease: checked above.
            let sequences = u64_at(starts, i + 1).saturating_sub(u64_at(starts, i));
            (self.name(i), self.bytes(i), self.footer_crc(i), sequences)
        }));
        Ok((fingerprint, total_bytes))
    }

    /// The shards' sizes, summed.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The fingerprint of the shard list (`spec/DATASET.md` 7.2).
    pub(crate) fn fingerprint(&self) -> u32 {
        self.fingerprint
    }

    fn name_bytes(&self, shard: usize) -> Option<&[u8]> {
        let at = self.section(Sec::NameOffsets);
        let (start, end) = (u64_at(at, shard), u64_at(at, shard + 1));
        self.section(Sec::Names)
            .get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }

    /// The number of shards.
    pub(crate) fn num_shards(&self) -> usize {
        self.shards
    }

    /// The counts' three arrays, as views of the index.
    pub(crate) fn count_buffers(&self) -> [Buffer; 3] {
        [
            self.section_buffer(Sec::ShardStarts),
            self.section_buffer(Sec::BatchOffsets),
            self.section_buffer(Sec::BatchStarts),
        ]
    }

    /// Shard `shard`'s name (checked when the index was opened).
    pub(crate) fn name(&self, shard: usize) -> &str {
        self.name_bytes(shard)
            .and_then(|n| std::str::from_utf8(n).ok())
            .unwrap_or("")
    }

    /// Shard `shard`'s size in bytes.
    pub(crate) fn bytes(&self, shard: usize) -> u64 {
        u64_at(self.section(Sec::Bytes), shard)
    }

    /// Shard `shard`'s footer CRC.
    pub(crate) fn footer_crc(&self, shard: usize) -> u32 {
        let s = self.section(Sec::FooterCrcs);
        s.get(shard * 4..shard * 4 + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    }

    /// Shard `shard`'s format version, if recorded.
    pub(crate) fn format_version(&self, shard: usize) -> Option<crate::format::Version> {
        let s = self.section(Sec::Versions);
        let v = s
            .get(shard * 2..shard * 2 + 2)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
        (v != 0).then_some(crate::format::Version {
            major: v >> 8,
            minor: v & 0xff,
        })
    }

    /// Shard `shard`'s tensor counts, in schema order.
    pub(crate) fn tensors(&self, shard: usize) -> Vec<TensorCounts> {
        let s = self.section(Sec::Tensors);
        let mut w = shard * self.words;
        self.head
            .schema
            .tensors
            .iter()
            .map(|t| {
                let levels = (0..t.lod_levels).map(|l| u64_at(s, w + l)).collect();
                let rows = u64_at(s, w + t.lod_levels);
                w += t.lod_levels + 1;
                TensorCounts { levels, rows }
            })
            .collect()
    }

    /// Shard `shard`'s manifest entry (`counts`: the index's own).
    pub(crate) fn entry(
        &self,
        counts: &super::counts::ShardCounts,
        shard: usize,
    ) -> super::manifest::ShardEntry {
        let batch_sequences: Vec<u64> = (0..counts.batches(shard))
            .map(|b| counts.batch_sequences(shard, b))
            .collect();
        super::manifest::ShardEntry {
            name: self.name(shard).to_owned(),
            bytes: self.bytes(shard),
            footer_crc: self.footer_crc(shard),
            batches: batch_sequences.len() as u64,
            sequences: counts.shard_sequences(shard),
            batch_sequences,
            tensors: self.tensors(shard),
            format_version: self.format_version(shard),
        }
    }

    /// The schema.
    pub(crate) fn schema(&self) -> &Schema {
        &self.head.schema
    }

    /// The metadata.
    pub(crate) fn metadata(&self) -> &BTreeMap<String, String> {
        &self.head.metadata
    }

    /// The record of the commit that made the manifest's version.
    pub(crate) fn commit_record(&self) -> Option<&super::commit_record::CommitRecord> {
        self.head.commit.as_deref()
    }

    /// The manifest without its shards (format, version, schema, metadata,
    /// commits).
    pub(crate) fn head_manifest(&self) -> Manifest {
        Manifest {
            format: self.head.format.clone(),
            version: self.head.version,
            schema: self.head.schema.clone(),
            metadata: self.head.metadata.clone(),
            commits: self.head.commits.clone(),
            commit: self.head.commit.clone(),
            shards: Vec::new(),
        }
    }
}

/// A fixed 64-bit hash of a name (FNV-1a), for finding duplicates by sorting.
fn fxhash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Bytes read from a store that cannot map them, 64-aligned (so the counts
/// can be used in place).
pub(crate) fn aligned(bytes: &[u8]) -> Arc<dyn ByteStorage> {
    Arc::new(AlignedBytes::from_slice(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::manifest::{ShardEntry, TensorSchema};

    fn manifest() -> Manifest {
        let schema = Schema {
            tensors: vec![
                TensorSchema {
                    name: "tokens".into(),
                    dtype: crate::DType::Int32,
                    element_shape: vec![],
                    lod_levels: 2,
                },
                TensorSchema {
                    name: "label".into(),
                    dtype: crate::DType::UInt8,
                    element_shape: vec![],
                    lod_levels: 0,
                },
            ],
        };
        let mut m = Manifest::new(schema, [("k".to_string(), "v".to_string())].into());
        m.commits = vec!["c1".into(), "c2".into()];
        let shard = |name: &str, batches: Vec<u64>, v: Option<(u16, u16)>| {
            let n: u64 = batches.iter().sum();
            ShardEntry {
                name: name.into(),
                bytes: 1000 + n,
                footer_crc: 0xdead_0000 + n as u32,
                batches: batches.len() as u64,
                sequences: n,
                batch_sequences: batches,
                tensors: vec![
                    TensorCounts {
                        levels: vec![n, 2 * n],
                        rows: 5 * n,
                    },
                    TensorCounts {
                        levels: vec![],
                        rows: n,
                    },
                ],
                format_version: v.map(|(major, minor)| crate::format::Version { major, minor }),
            }
        };
        m.shards = vec![
            shard("shard-000000.lodt", vec![3, 0, 4], Some((2, 0))),
            shard("shard-000001.lodt", vec![], None),
            shard("w-shard-000000.lodt", vec![5], Some((1, 0))),
        ];
        m
    }

    fn open(bytes: &[u8], json: &[u8]) -> Result<ShardIndex> {
        let pointer = IndexPointer::from_head(json).expect("a pointer");
        ShardIndex::open(aligned(bytes), "mem", &pointer, json.len() as u64)
    }

    fn entries(index: &ShardIndex) -> Vec<ShardEntry> {
        let counts = crate::dataset::counts::ShardCounts::mapped(index.count_buffers()).unwrap();
        (0..index.num_shards())
            .map(|s| index.entry(&counts, s))
            .collect()
    }

    #[test]
    fn round_trip() {
        let m = manifest();
        let (json, pointer, bytes) = manifest_with_index(&m, "c2");
        assert_eq!(pointer.name, "lodt-dataset.index.c2");
        assert!(json.starts_with(
            br#"{"format":"lodt-dataset","version":{"major":1,"minor":5},"index":{"name":"lodt-dataset.index.c2","crc":""#
        ));
        // The JSON with the pointer is still the manifest.
        assert_eq!(Manifest::from_json_bytes(&json, "m").unwrap(), m);
        let index = open(&bytes, &json).unwrap();
        assert_eq!(entries(&index), m.shards);
        let mut head = index.head_manifest();
        head.shards = m.shards.clone();
        assert_eq!(head, m);
        let counts = crate::dataset::counts::ShardCounts::mapped(index.count_buffers()).unwrap();
        assert_eq!(counts.shard_starts(), &[0, 7, 7, 12]);
        assert_eq!(counts.num_batches(), 4);
    }

    #[test]
    fn the_pointer_is_found_only_on_the_writers_first_line() {
        let m = manifest();
        let (json, pointer, _) = manifest_with_index(&m, "c2");
        assert_eq!(IndexPointer::from_head(&json[..200]), Some(pointer));
        assert_eq!(IndexPointer::from_head(&m.to_json_bytes()), None);
        let unended = String::from_utf8(json.clone())
            .unwrap()
            .replacen(",\n", "\n", 1);
        assert_eq!(IndexPointer::from_head(unended.as_bytes()), None);
        let bad_name = String::from_utf8(json)
            .unwrap()
            .replace("index.c2", "index./x");
        assert_eq!(IndexPointer::from_head(bad_name.as_bytes()), None);
    }

    #[test]
    fn every_damaged_byte_is_refused_without_a_panic() {
        let (json, _, bytes) = manifest_with_index(&manifest(), "c2");
        assert!(open(&bytes, &json).is_ok());
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x80] {
                let mut damaged = bytes.clone();
                damaged[at] ^= flip;
                // Padding bytes are covered by no CRC: the index reads the same.
                if let Ok(index) = open(&damaged, &json) {
                    assert_eq!(entries(&index), manifest().shards, "byte {at}");
                }
            }
        }
        for len in 0..bytes.len() {
            assert!(open(&bytes[..len], &json).is_err(), "truncated to {len}");
        }
    }

    /// `bytes` with every CRC made right again (a hostile writer's index).
    fn recrc(mut bytes: Vec<u8>) -> (Vec<u8>, u32) {
        for i in 0..SECTIONS {
            let at = TABLE + 24 * i;
            let off = u64_at(&bytes[at..at + 8], 0) as usize;
            let len = u64_at(&bytes[at + 8..at + 16], 0) as usize;
            if let Some(body) = bytes.get(off..off.saturating_add(len)) {
                let crc = crc32fast::hash(body);
                bytes[at + 16..at + 20].copy_from_slice(&crc.to_le_bytes());
            }
        }
        let crc = crc32fast::hash(&bytes[..HEADER_CRC_AT]);
        bytes[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        (bytes, crc)
    }

    #[test]
    fn hostile_counts_with_right_crcs_are_refused_without_a_panic_or_a_hang() {
        let m = manifest();
        let (json, _, bytes) = manifest_with_index(&m, "c2");
        let section = |i: usize| {
            let at = TABLE + 24 * i;
            u64_at(&bytes[at..at + 8], 0) as usize
        };
        let put =
            |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        type Damage<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
        let cases: Vec<(&str, Damage)> = vec![
            ("a huge shard count", Box::new(|b| put(b, 16, u64::MAX))),
            ("a huge entry count", Box::new(|b| put(b, 24, u64::MAX / 4))),
            (
                "a batch offset past the entries",
                Box::new(move |b| put(b, section(2) + 8, 1 << 60)),
            ),
            (
                "decreasing shard starts",
                Box::new(move |b| put(b, section(1) + 8, 1 << 40)),
            ),
            (
                "a name offset past the names",
                Box::new(move |b| put(b, section(7) + 8, 1 << 50)),
            ),
            (
                "a section offset past the file",
                Box::new(|b| put(b, TABLE + 24 * 3, 1 << 40)),
            ),
            (
                "an unaligned section",
                Box::new(|b| {
                    let at = TABLE + 24 * 9;
                    let v = u64_at(&b[at..at + 8], 0) + 1;
                    put(b, at, v);
                }),
            ),
        ];
        for (what, damage) in cases {
            let mut b = bytes.clone();
            damage(&mut b);
            let (b, crc) = recrc(b);
            let pointer = IndexPointer {
                name: "lodt-dataset.index.c2".into(),
                crc: format!("{crc:08x}"),
            };
            let got = ShardIndex::open(aligned(&b), "mem", &pointer, json.len() as u64);
            assert!(got.is_err(), "{what}: accepted");
        }
    }

    #[test]
    fn another_manifest_size_is_refused() {
        let (json, _, bytes) = manifest_with_index(&manifest(), "c2");
        let pointer = IndexPointer::from_head(&json).unwrap();
        let err = ShardIndex::open(aligned(&bytes), "mem", &pointer, json.len() as u64 + 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("written with a manifest of"), "{err}");
    }

    #[test]
    fn the_manifests_rules_hold_for_the_index() {
        let mut m = manifest();
        m.shards[2].name = m.shards[0].name.clone();
        let (json, _, bytes) = manifest_with_index(&m, "c2");
        let err = open(&bytes, &json).unwrap_err().to_string();
        assert!(err.contains("listed twice"), "{err}");
        let mut m = manifest();
        m.shards[1].tensors[0].levels = vec![1, 0];
        let (json, _, bytes) = manifest_with_index(&m, "c2");
        let err = open(&bytes, &json).unwrap_err().to_string();
        assert!(err.contains("top-level sequences"), "{err}");
    }
}
