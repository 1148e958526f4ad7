//! Hostile files, built byte by byte from `spec/FORMAT.md` with valid
//! checksums so that the check reached is the one intended: each gets a clear
//! error, and no allocation while reading is larger than the file.

use crate::tracking;
use lodt::format::{FilePart, FormatError, LodtFile, StreamReader};
use serde_json::{Value, json};

/// Opens `bytes` and touches every batch and tensor, then runs `verify` and
/// the sequential reader; returns the first error. Asserts that no single
/// allocation exceeded the file's size (plus the reader's own copy of it).
fn read_all(bytes: &[u8]) -> Result<(), FormatError> {
    tracking::reset_largest();
    let result = (|| {
        let file = LodtFile::from_bytes(bytes)?;
        for k in 0..file.num_batches() {
            let b = file.batch(k)?;
            for t in b.tensors() {
                t?;
            }
        }
        file.verify()?;
        StreamReader::try_new(bytes)?.collect::<Result<Vec<_>, _>>()?;
        Ok(())
    })();
    let largest = tracking::largest();
    // The sequential reader's first buffer step is 1 MiB; everything else is
    // bounded by the file.
    assert!(
        largest <= bytes.len().max(1 << 20) + 64,
        "an allocation of {largest} bytes for a file of {}",
        bytes.len()
    );
    result
}

// ---------------------------------------------------------------------------
// A raw writer that follows the spec and lets a test put anything anywhere.

const META_LEN: usize = 960; // metadata JSON padded with spaces: data_start = 1024
const DATA_START: u64 = 1024;

fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn seal(b: &mut [u8]) {
    let c = crc(&b[..60]);
    put_u32(b, 60, c);
}
fn pad64(n: usize) -> usize {
    n.div_ceil(64) * 64
}

/// One batch: metadata JSON and a data area that starts at section offset
/// 1024 (buffer offsets in the JSON are section-relative).
struct RawBatch {
    json: Value,
    data: Vec<u8>,
    /// Overrides of header fields.
    buffer_count: Option<u32>,
    meta_len: Option<u64>,
    index: Option<u64>,
}

impl RawBatch {
    fn new(json: Value, data: Vec<u8>) -> Self {
        RawBatch {
            json,
            data,
            buffer_count: None,
            meta_len: None,
            index: None,
        }
    }

    /// The section bytes, with a correct checksum table for the buffers the
    /// JSON lists (0 for a buffer outside the section).
    fn section(&self, k: u64) -> Vec<u8> {
        let mut meta = serde_json::to_vec(&self.json).unwrap();
        assert!(meta.len() <= META_LEN);
        meta.resize(META_LEN, b' ');
        let buffers = self.json["buffers"].as_array().cloned().unwrap_or_default();
        let n = buffers.len();
        let data_end = DATA_START as usize + pad64(self.data.len());
        let table_len = pad64(4 * (n + 1));
        let section_len = data_end + table_len;
        let mut s = vec![0u8; section_len];
        s[64..64 + META_LEN].copy_from_slice(&meta);
        s[DATA_START as usize..DATA_START as usize + self.data.len()].copy_from_slice(&self.data);
        let mut table = Vec::new();
        for b in &buffers {
            let off = b["offset"].as_u64().unwrap_or(0) as usize;
            let len = b["length"].as_u64().unwrap_or(0) as usize;
            let c = off
                .checked_add(len)
                .and_then(|end| s.get(off..end))
                .map_or(0, crc);
            table.extend_from_slice(&c.to_le_bytes());
        }
        let table_crc = crc(&table);
        table.extend_from_slice(&table_crc.to_le_bytes());
        s[data_end..data_end + table.len()].copy_from_slice(&table);
        let h = &mut s[..64];
        h[..8].copy_from_slice(b"LODTBTCH");
        put_u64(h, 8, section_len as u64);
        put_u64(h, 16, self.index.unwrap_or(k));
        put_u64(h, 24, self.meta_len.unwrap_or(META_LEN as u64));
        put_u32(h, 32, crc(&meta));
        put_u32(h, 36, self.buffer_count.unwrap_or(n as u32));
        seal(h);
        s
    }
}

/// A whole file: header, file metadata, batches, footer, trailer.
fn build(batches: &[RawBatch]) -> Vec<u8> {
    build_with(batches, 1, 0, |_| {})
}

fn build_with(
    batches: &[RawBatch],
    major: u16,
    minor: u16,
    patch_trailer: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    let meta = br#"{"metadata":{}}"#;
    let mut f = vec![0u8; 64];
    f[..9].copy_from_slice(b"\x89LODT\r\n\x1a\n");
    put_u16(&mut f, 12, major);
    put_u16(&mut f, 14, minor);
    put_u64(&mut f, 16, meta.len() as u64);
    put_u32(&mut f, 24, crc(meta));
    seal(&mut f);
    f.extend_from_slice(meta);
    f.resize(pad64(f.len()), 0);
    let mut index = Vec::new();
    for (k, b) in batches.iter().enumerate() {
        let s = b.section(k as u64);
        index.extend_from_slice(&(f.len() as u64).to_le_bytes());
        index.extend_from_slice(&(s.len() as u64).to_le_bytes());
        index.extend_from_slice(&s[60..64]);
        let table_crc_at = s.len()
            - pad64(4 * (b.json["buffers"].as_array().map_or(0, |a| a.len()) + 1))
            + 4 * b.json["buffers"].as_array().map_or(0, |a| a.len());
        index.extend_from_slice(&s[table_crc_at..table_crc_at + 4]);
        f.extend_from_slice(&s);
    }
    let footer_offset = f.len();
    let mut footer = vec![0u8; 64];
    footer[..8].copy_from_slice(b"LODTFOOT");
    put_u64(&mut footer, 8, batches.len() as u64);
    put_u64(&mut footer, 16, index.len() as u64);
    put_u32(&mut footer, 24, crc(&index));
    seal(&mut footer);
    let footer_crc = u32::from_le_bytes(footer[60..64].try_into().unwrap());
    f.extend_from_slice(&footer);
    f.extend_from_slice(&index);
    f.resize(pad64(f.len()), 0);
    let mut trailer = vec![0u8; 64];
    trailer[..8].copy_from_slice(b"LODTTAIL");
    put_u64(&mut trailer, 8, footer_offset as u64);
    put_u64(&mut trailer, 16, batches.len() as u64);
    put_u32(&mut trailer, 24, footer_crc);
    patch_trailer(&mut trailer);
    seal(&mut trailer);
    f.extend_from_slice(&trailer);
    f
}

fn tensor(name: &str, dtype: &str, shape: Value, lod: Value, body: u64) -> Value {
    json!({"name": name, "dtype": dtype, "shape": shape, "lod": lod, "body": body})
}

fn buf(offset: u64, length: u64) -> Value {
    json!({"offset": offset, "length": length})
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A valid batch: x, int64 [3], LoD {{0, 1, 3}} (buffer 0), body (buffer 1).
fn good_batch() -> RawBatch {
    let mut data = u64s(&[0, 1, 3]);
    data.resize(64, 0);
    data.extend_from_slice(&u64s(&[10, 20, 30]));
    RawBatch::new(
        json!({
            "tensors": [tensor("x", "int64", json!([3]), json!([0]), 1)],
            "buffers": [buf(1024, 24), buf(1088, 24)],
            "metadata": {"k": "v"}
        }),
        data,
    )
}

fn expect_corrupt(bytes: &[u8], part: FilePart, needle: &str) {
    let err = read_all(bytes).unwrap_err();
    assert!(err.to_string().contains(needle), "{err:?} lacks {needle:?}");
    assert_eq!(err.location().map(|l| l.part), Some(part), "{err}");
}

// ---------------------------------------------------------------------------

#[test]
fn the_raw_builder_makes_valid_files() {
    let bytes = build(&[good_batch(), good_batch()]);
    read_all(&bytes).unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let x = file.batch(1).unwrap().tensor("x").unwrap();
    assert_eq!(
        x.branch(&[1]).unwrap().as_slice::<i64>().unwrap(),
        &[20, 30]
    );
    assert_eq!(file.batch(0).unwrap().metadata()["k"], "v");
}

#[test]
fn huge_batch_count_in_the_trailer() {
    let bytes = build_with(&[good_batch()], 1, 0, |t| put_u64(t, 16, 1 << 60));
    let err = read_all(&bytes).unwrap_err();
    assert!(
        err.to_string()
            .contains("an index of 1152921504606846976 batches does not fit"),
        "{err}"
    );
    // Counts that fit in the file but disagree with the footer.
    let bytes = build_with(&[good_batch()], 1, 0, |t| put_u64(t, 16, 4));
    expect_corrupt(&bytes, FilePart::Trailer, "expected 1280 for 4 batches");
    let bytes = build_with(&[good_batch()], 1, 0, |t| put_u64(t, 16, 2));
    expect_corrupt(
        &bytes,
        FilePart::FooterHeader,
        "the trailer 2 batches in 48 bytes",
    );
}

#[test]
fn huge_counts_and_lengths_in_a_batch_header() {
    let mut b = good_batch();
    b.buffer_count = Some(u32::MAX);
    expect_corrupt(
        &build(&[b]),
        FilePart::ChecksumTable,
        "the header counts 4294967295 buffers",
    );
    let mut b = good_batch();
    b.meta_len = Some(1 << 60);
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(
        matches!(err, FormatError::TooLarge { found, .. } if found == 1 << 60),
        "{err}"
    );
    let mut b = good_batch();
    b.index = Some(7);
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchHeader,
        "expected batch number 0, found 7",
    );
}

#[test]
fn huge_file_metadata_length() {
    let mut bytes = build(&[good_batch()]);
    put_u64(&mut bytes, 16, 1 << 62);
    seal(&mut bytes[..64]);
    let err = read_all(&bytes).unwrap_err();
    assert!(matches!(err, FormatError::TooLarge { .. }), "{err}");
    assert_eq!(err.location().unwrap().part, FilePart::FileMetadata);
}

#[test]
fn shapes_whose_size_overflows() {
    let mut b = good_batch();
    b.json["tensors"][0] = tensor(
        "x",
        "float64",
        json!([1u64 << 60, 1u64 << 60]),
        json!([]),
        1,
    );
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::Tensor {
                source: lodt::Error::Overflow { .. },
                ..
            }
        ),
        "{err}"
    );
    let mut b = good_batch();
    b.json["tensors"][0] = tensor("x", "int8", json!([1u64 << 60]), json!([]), 1);
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(
        matches!(&err, FormatError::Tensor { source: lodt::Error::DataLength { expected, found: 24, .. }, .. } if *expected == 1 << 60),
        "{err}"
    );
    let mut b = good_batch();
    b.json["tensors"][0]["shape"] = json!(vec![1; 65]);
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(err.to_string().contains("more than 64 entries"), "{err}");
}

#[test]
fn buffers_past_the_end_overlapping_or_misaligned() {
    let mut b = good_batch();
    b.json["buffers"][1] = buf(1 << 40, 24);
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchMetadata,
        "runs past the checksum table",
    );
    let mut b = good_batch();
    b.json["buffers"][1] = buf(1088, u64::MAX);
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchMetadata,
        "runs past the checksum table",
    );
    let mut b = good_batch();
    b.json["buffers"][1] = buf(1024, 24);
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchMetadata,
        "before the end (1048)",
    );
    let mut b = good_batch();
    b.json["buffers"][1] = buf(1032, 24);
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchMetadata,
        "not a multiple of 64",
    );
    let mut b = good_batch();
    b.json["buffers"][0] = buf(960, 24); // inside the metadata
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchMetadata,
        "before the end (1024)",
    );
}

#[test]
fn bad_buffer_references() {
    let mut b = good_batch();
    b.json["tensors"][0]["body"] = json!(99);
    expect_corrupt(
        &build(&[b]),
        FilePart::Body,
        "buffer index 99 is not below the 2 buffers",
    );
    let mut b = good_batch();
    b.json["tensors"][0]["body"] = json!(0);
    expect_corrupt(&build(&[b]), FilePart::Body, "buffer 0 is used twice");
    let mut b = good_batch();
    b.json["tensors"][0]["lod"] = json!([1u64 << 62]);
    expect_corrupt(&build(&[b]), FilePart::Lod(0), "is not below the 2 buffers");
}

#[test]
fn bad_lods() {
    // Non-monotonic.
    let mut b = good_batch();
    b.data[..24].copy_from_slice(&u64s(&[0, 2, 1]));
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::Tensor {
                source: lodt::Error::InvalidLod {
                    rule: lodt::LodRule::Decreasing,
                    ..
                },
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("offsets must be non-decreasing: expected >= 2, found 1"),
        "{err}"
    );
    // Last offset is not the number of rows.
    let mut b = good_batch();
    b.data[..24].copy_from_slice(&u64s(&[0, 1, 2]));
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(
        err.to_string()
            .contains("the tensor's number of rows: expected 3, found 2"),
        "{err}"
    );
    // Huge offsets.
    let mut b = good_batch();
    b.data[..24].copy_from_slice(&u64s(&[0, u64::MAX, 3]));
    assert!(read_all(&build(&[b])).is_err());
    // Not a whole number of u64.
    let mut b = good_batch();
    b.json["buffers"][0] = buf(1024, 20);
    expect_corrupt(
        &build(&[b]),
        FilePart::Lod(0),
        "20 bytes is not a whole number of u64 offsets",
    );
    // A LoD on a 0-D tensor.
    let mut b = good_batch();
    b.json["tensors"][0]["shape"] = json!([]);
    b.json["buffers"][1] = buf(1088, 8);
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(err.to_string().contains("needs rank >= 1"), "{err}");
}

#[test]
fn bad_names_dtypes_and_bools() {
    let mut b = good_batch();
    b.json["tensors"][0]["dtype"] = json!("complex64");
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchMetadata,
        "unknown dtype \"complex64\"",
    );
    let mut b = good_batch();
    b.json["tensors"][0]["name"] = json!("");
    expect_corrupt(&build(&[b]), FilePart::BatchMetadata, "empty name");
    let mut b = good_batch();
    let t = b.json["tensors"][0].clone();
    b.json["tensors"].as_array_mut().unwrap().push(t);
    b.json["tensors"][1]["lod"] = json!([]);
    b.json["buffers"]
        .as_array_mut()
        .unwrap()
        .push(buf(1152, 24));
    b.data.resize(152, 0);
    expect_corrupt(
        &build(&[b]),
        FilePart::BatchMetadata,
        "two tensors are named \"x\"",
    );
    let mut b = good_batch();
    b.json["tensors"][0]["dtype"] = json!("bool");
    b.json["tensors"][0]["shape"] = json!([3]);
    b.json["buffers"][1] = buf(1088, 3);
    b.data.truncate(64);
    b.data.extend_from_slice(&[1, 0, 2]);
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(
        matches!(
            &err,
            FormatError::Tensor {
                source: lodt::Error::InvalidBool { index: 2, found: 2 },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn json_that_is_not_the_metadata() {
    let mut b = good_batch();
    b.json = json!({"tensors": 5, "buffers": []});
    let err = read_all(&build(&[b])).unwrap_err();
    assert!(matches!(err, FormatError::Json { .. }), "{err}");
    // Deep nesting hits the parser's recursion limit, not the stack.
    let mut b = good_batch();
    let deep = format!("{}{}", "[".repeat(400), "]".repeat(400));
    b.json["extra"] = Value::String(String::new());
    let text = serde_json::to_string(&b.json)
        .unwrap()
        .replace("\"\"", &deep);
    let mut bytes = build(&[RawBatch::new(json!({"buffers": []}), vec![])]);
    // Put the raw text where the metadata goes and fix the checksums.
    let start = 128;
    let mut meta = text.into_bytes();
    meta.resize(META_LEN, b' ');
    bytes[start + 64..start + 64 + META_LEN].copy_from_slice(&meta);
    put_u32(&mut bytes[start..start + 64], 32, crc(&meta));
    seal(&mut bytes[start..start + 64]);
    let err = read_all(&bytes).unwrap_err();
    assert!(err.to_string().contains("batch 0"), "{err}");
}

#[test]
fn versions() {
    // A newer minor, with fields, reserved bytes and a buffer this reader does
    // not know, is read.
    let mut b = good_batch();
    b.json["tensors"][0]["statistics"] = json!({"min": 10});
    b.json["compression"] = json!("none");
    b.json["buffers"].as_array_mut().unwrap().push(buf(1152, 5));
    b.data.resize(128, 0);
    b.data.extend_from_slice(b"extra");
    let mut bytes = build_with(&[b], 1, 7, |t| t[40] = 0xab);
    bytes[40] = 0xcd; // a reserved byte of the file header
    seal(&mut bytes[..64]);
    read_all(&bytes).unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    assert_eq!(file.version().to_string(), "1.7");
    assert_eq!(
        file.batch(0)
            .unwrap()
            .tensor("x")
            .unwrap()
            .as_slice::<i64>()
            .unwrap(),
        &[10, 20, 30]
    );
    // An unused buffer is still checksummed.
    let mut bad = bytes.clone();
    let n = bad.len();
    let pos = n - 64 - 64 - 64 - 128 + 2; // inside b"extra" (last batch's data)
    assert_eq!(&bad[pos - 2..pos + 3], b"extra");
    bad[pos] ^= 1;
    let err = LodtFile::from_bytes(&bad).unwrap().verify().unwrap_err();
    assert_eq!(err.location().unwrap().part, FilePart::Buffer(2));
    // A newer major is refused, before its header CRC is looked at.
    let mut bytes = build_with(&[good_batch()], 3, 0, |_| {});
    bytes[63] ^= 0xff;
    let err = read_all(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::UnsupportedVersion {
                major: 3,
                minor: 0,
                supported: 2
            }
        ),
        "{err}"
    );
}

#[test]
fn non_zero_padding_and_index_mismatch() {
    let mut bytes = build(&[good_batch()]);
    // The gap between the LoD buffer (ends at 1048) and the body (1088).
    let gap = 128 + 1050;
    bytes[gap] = 1;
    let err = read_all(&bytes).unwrap_err();
    assert!(
        matches!(err, FormatError::NonZeroPadding { offset, found: 1, .. } if offset == gap as u64),
        "{err}"
    );
    // An index entry pointing one batch off.
    let mut bytes = build(&[good_batch(), good_batch()]);
    let n = bytes.len();
    let footer = u64::from_le_bytes(bytes[n - 56..n - 48].try_into().unwrap()) as usize;
    let entry1 = footer + 64 + 24;
    put_u64(&mut bytes, entry1, 128);
    let index_crc = crc(&bytes[footer + 64..footer + 64 + 48]);
    put_u32(&mut bytes, footer + 24, index_crc);
    seal(&mut bytes[footer..footer + 64]);
    let footer_crc = u32::from_le_bytes(bytes[footer + 60..footer + 64].try_into().unwrap());
    put_u32(&mut bytes, n - 64 + 24, footer_crc);
    seal(&mut bytes[n - 64..]);
    expect_corrupt(
        &bytes,
        FilePart::Index,
        "expected a multiple of 64 of at least 128 at",
    );
}

#[test]
fn not_lodt_files() {
    for junk in [&b""[..], b"\x89LOD", b"PK\x03\x04 a zip", &[0u8; 4096]] {
        let err = read_all(junk).unwrap_err();
        assert!(matches!(err, FormatError::NotLodt { .. }), "{err}");
    }
    let mut bytes = build(&[good_batch()]);
    bytes.splice(6..7, [b'\r', b'\n']); // "\n" became "\r\n"
    let err = read_all(&bytes).unwrap_err();
    assert!(err.to_string().contains("text-mode (LF to CRLF)"), "{err}");
}
