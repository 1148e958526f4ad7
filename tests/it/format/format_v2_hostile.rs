//! Hostile 2.0 files (`spec/FORMAT.md` §12), built byte by byte with valid
//! checksums (the heads, records, index and trailer are sealed here, so the
//! check reached is the one intended), and files of lodt's writer with a
//! field changed and resealed. Every reader (`LodtFile`, `verify`,
//! `StreamReader`, `recover`) must agree on each, and none may allocate more
//! than about the bytes it was given before a checksum vouches for a length.

use crate::tracking::{largest, reset_largest};
use lodt::format::{
    self, Compression, FormatError, LodtFile, RecoverOptions, StreamReader, WriteOptions,
};
use lodt::{Batch, LodTensor};
use std::io::Read;

// ---------------------------------------------------------------------------
// A raw 2.0 writer that follows §12 and lets a test put anything anywhere.

fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

fn pad64(n: usize) -> usize {
    n.div_ceil(64) * 64
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// One buffer of a raw batch: its codec byte and its stored bytes.
#[derive(Clone)]
struct RawBuf {
    codec: u8,
    stored: Vec<u8>,
}

fn raw(bytes: &[u8]) -> RawBuf {
    RawBuf {
        codec: 0,
        stored: bytes.to_vec(),
    }
}

fn zstd_buf(stored: Vec<u8>) -> RawBuf {
    RawBuf { codec: 2, stored }
}

fn lz4_buf(stored: Vec<u8>) -> RawBuf {
    RawBuf { codec: 1, stored }
}

/// One batch of one-dimensional tensors with no LoD (a schema of `uint8`
/// tensors of element shape `[]`): its head's `schema_back`, the schema's
/// tensor names if it holds one, each tensor's rows, and its buffers.
#[derive(Clone)]
struct RawBatch {
    back: u64,
    schema: Option<Vec<&'static str>>,
    rows: Vec<u64>,
    buffers: Vec<RawBuf>,
}

fn schema_json(names: &[&str]) -> String {
    let tensors: Vec<String> = names
        .iter()
        .map(|n| format!(r#"{{"name":"{n}","dtype":"uint8","shape":[]}}"#))
        .collect();
    format!(r#"{{"tensors":[{}]}}"#, tensors.join(","))
}

/// A batch holding schema `names` (each tensor `rows` raw bytes).
fn holder(names: &[&'static str], rows: u64) -> RawBatch {
    RawBatch {
        back: 0,
        schema: Some(names.to_vec()),
        rows: vec![rows; names.len()],
        buffers: (0..names.len())
            .map(|i| raw(&vec![i as u8 + 1; rows as usize]))
            .collect(),
    }
}

/// A batch of `tensors` tensors of `rows` raw bytes, its schema `back`
/// batches back.
fn pointing(back: u64, tensors: usize, rows: u64) -> RawBatch {
    RawBatch {
        back,
        schema: None,
        rows: vec![rows; tensors],
        buffers: (0..tensors)
            .map(|i| raw(&vec![i as u8 + 7; rows as usize]))
            .collect(),
    }
}

/// Batch `k`'s section, its head crc and its table crc.
fn section(b: &RawBatch, k: u64) -> (Vec<u8>, u32, u32) {
    let mut rec = Vec::new();
    put_varint(&mut rec, k);
    put_varint(&mut rec, b.back);
    if let Some(names) = &b.schema {
        let json = schema_json(names);
        put_varint(&mut rec, json.len() as u64);
        rec.extend_from_slice(json.as_bytes());
    }
    put_varint(&mut rec, 0); // no batch metadata
    for &r in &b.rows {
        put_varint(&mut rec, r);
    }
    let mut table = Vec::new();
    for buf in &b.buffers {
        rec.push(buf.codec);
        if buf.codec != 0 {
            put_varint(&mut rec, buf.stored.len() as u64);
        }
        let c = crc(&buf.stored);
        rec.extend_from_slice(&c.to_le_bytes());
        table.extend_from_slice(&c.to_le_bytes());
    }
    let head_len = 20 + rec.len() + 4;
    let mut cursor = pad64(head_len);
    let mut offsets = Vec::new();
    for buf in &b.buffers {
        if buf.codec == 0 {
            cursor = pad64(cursor);
        }
        offsets.push(cursor);
        cursor += buf.stored.len();
    }
    let section_len = pad64(cursor).max(64);
    let mut s = vec![0u8; section_len];
    s[..8].copy_from_slice(b"LODTBTCH");
    s[8..16].copy_from_slice(&(section_len as u64).to_le_bytes());
    s[16..20].copy_from_slice(&(head_len as u32).to_le_bytes());
    s[20..20 + rec.len()].copy_from_slice(&rec);
    let head_crc = crc(&s[..head_len - 4]);
    s[head_len - 4..head_len].copy_from_slice(&head_crc.to_le_bytes());
    for (buf, &at) in b.buffers.iter().zip(&offsets) {
        s[at..at + buf.stored.len()].copy_from_slice(&buf.stored);
    }
    (s, head_crc, crc(&table))
}

/// A whole 2.0 file: header, file metadata, batches, footer, trailer.
fn build(batches: &[RawBatch]) -> Vec<u8> {
    let meta = b"{}";
    let mut f = vec![0u8; 64];
    f[..9].copy_from_slice(b"\x89LODT\r\n\x1a\n");
    f[12..14].copy_from_slice(&2u16.to_le_bytes());
    f[16..24].copy_from_slice(&(meta.len() as u64).to_le_bytes());
    f[24..28].copy_from_slice(&crc(meta).to_le_bytes());
    let c = crc(&f[..60]);
    f[60..64].copy_from_slice(&c.to_le_bytes());
    f.extend_from_slice(meta);
    f.resize(pad64(f.len()), 0);
    let mut index = Vec::new();
    for (k, b) in batches.iter().enumerate() {
        let (s, head_crc, table_crc) = section(b, k as u64);
        index.extend_from_slice(&(f.len() as u64).to_le_bytes());
        index.extend_from_slice(&(s.len() as u64).to_le_bytes());
        index.extend_from_slice(&head_crc.to_le_bytes());
        index.extend_from_slice(&table_crc.to_le_bytes());
        f.extend_from_slice(&s);
    }
    let footer_offset = f.len();
    let mut footer = vec![0u8; 64];
    footer[..8].copy_from_slice(b"LODTFOOT");
    footer[8..16].copy_from_slice(&(batches.len() as u64).to_le_bytes());
    footer[16..24].copy_from_slice(&(index.len() as u64).to_le_bytes());
    footer[24..28].copy_from_slice(&crc(&index).to_le_bytes());
    let footer_crc = crc(&footer[..60]);
    footer[60..64].copy_from_slice(&footer_crc.to_le_bytes());
    f.extend_from_slice(&footer);
    f.extend_from_slice(&index);
    f.resize(pad64(f.len()), 0);
    let mut trailer = vec![0u8; 64];
    trailer[..8].copy_from_slice(b"LODTTAIL");
    trailer[8..16].copy_from_slice(&(footer_offset as u64).to_le_bytes());
    trailer[16..24].copy_from_slice(&(batches.len() as u64).to_le_bytes());
    trailer[24..28].copy_from_slice(&footer_crc.to_le_bytes());
    let c = crc(&trailer[..60]);
    trailer[60..64].copy_from_slice(&c.to_le_bytes());
    f.extend_from_slice(&trailer);
    f
}

/// What each reader makes of `bytes`: (random access with every batch read,
/// verify, the stream reader), each `Ok(batches)` or the error.
fn readers(bytes: &[u8]) -> [Result<usize, String>; 3] {
    let random = (|| {
        let file = LodtFile::from_bytes(bytes)?;
        for k in 0..file.num_batches() {
            file.read_batch(k)?;
        }
        Ok::<_, FormatError>(file.num_batches())
    })()
    .map_err(|e| e.to_string());
    let verify = LodtFile::from_bytes(bytes)
        .and_then(|f| f.verify())
        .map(|r| r.batches)
        .map_err(|e| e.to_string());
    let stream = StreamReader::try_new(bytes)
        .and_then(|r| r.collect::<Result<Vec<_>, _>>())
        .map(|b| b.len())
        .map_err(|e| e.to_string());
    [random, verify, stream]
}

/// `bytes` written to a file in a new directory, its footer cut off (as a
/// crash during an append leaves it), then recovered: the batches kept.
fn recover_cut(bytes: &[u8]) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.lodt");
    std::fs::write(&path, &bytes[..bytes.len() - 70]).unwrap();
    let report = format::recover(&path).unwrap();
    assert!(report.rewritten);
    LodtFile::open(&path).unwrap().verify().unwrap();
    report.batches
}

fn tensor(rows: usize, k: u8) -> LodTensor {
    LodTensor::from_vec(
        (0..rows).map(|i| (i as u8).wrapping_mul(k)).collect(),
        vec![rows],
        Default::default(),
    )
    .unwrap()
}

fn written(batches: usize, rows: usize, compression: Compression) -> Vec<u8> {
    let batches: Vec<Batch> = (0..batches)
        .map(|k| Batch::try_from_tensors([("x", tensor(rows, k as u8 + 1))]).unwrap())
        .collect();
    let mut w = format::Writer::try_new_with(
        Vec::new(),
        Default::default(),
        WriteOptions {
            compression,
            ..Default::default()
        },
    )
    .unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn the_raw_builder_makes_files_every_reader_reads() {
    let bytes = build(&[holder(&["a", "b"], 100), pointing(1, 2, 50)]);
    for r in readers(&bytes) {
        assert_eq!(r, Ok(2));
    }
    let z = zstd::bulk::compress(&[5u8; 1000], 3).unwrap();
    let l = lz4_flex::block::compress(&[6u8; 1000]);
    let mut b = holder(&["a", "b"], 1000);
    b.buffers = vec![zstd_buf(z), lz4_buf(l)];
    for r in readers(&build(&[b])) {
        assert_eq!(r, Ok(1));
    }
}

// ---------------------------------------------------------------------------
// 1. A flipped bit in a 2.0 section_len: an error before any allocation it
// sizes, however long the stream goes on.

/// `bytes`, then `zeros` zero bytes, made as they are read.
fn long_stream(bytes: &[u8], zeros: u64) -> impl Read + '_ {
    bytes.chain(std::io::repeat(0).take(zeros))
}

#[test]
fn a_flipped_bit_in_a_2_0_section_length_is_an_error_before_it_sizes_an_allocation() {
    for compression in [Compression::None, Compression::Zstd { level: 3 }] {
        let bytes = written(3, 3000, compression);
        let file = LodtFile::from_bytes(&bytes).unwrap();
        let at = file.batch_range(1).unwrap().start as usize + 8;
        for bit in 0..64 {
            let mut bad = bytes.clone();
            bad[at + bit / 8] ^= 1 << (bit % 8);
            reset_largest();
            let results: Vec<_> = StreamReader::try_new(long_stream(&bad, 1 << 30))
                .unwrap()
                .collect();
            assert_eq!(results.len(), 2, "bit {bit}");
            assert!(results[0].is_ok(), "bit {bit}");
            let err = results[1].as_ref().unwrap_err().to_string();
            assert!(err.contains("batch 1"), "bit {bit}: {err}");
            assert!(
                largest() < 4 << 20,
                "bit {bit}: an allocation of {} bytes",
                largest()
            );
        }
    }
}

#[test]
fn recovery_of_a_long_file_with_a_flipped_section_length_keeps_the_batches_before_it() {
    let bytes = written(3, 3000, Compression::None);
    let file = LodtFile::from_bytes(&bytes).unwrap();
    let at = file.batch_range(2).unwrap().start as usize + 8;
    let dir = tempfile::tempdir().unwrap();
    for bit in [20, 31, 40, 62] {
        let mut bad = bytes.clone();
        bad[at + bit / 8] ^= 1 << (bit % 8);
        let path = dir.path().join(format!("long{bit}.lodt"));
        std::fs::write(&path, &bad).unwrap();
        // 256 MiB more (a sparse tail): the section length now reaches into it.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(bad.len() as u64 + (256 << 20)).unwrap();
        drop(f);
        reset_largest();
        let report = format::recover(&path).unwrap();
        assert!(largest() < 4 << 20, "bit {bit}: {} bytes", largest());
        assert_eq!((report.batches, report.rewritten), (2, true), "bit {bit}");
        assert!(report.reason.unwrap().contains("batch 2"));
    }
}

// ---------------------------------------------------------------------------
// 4. Recovery decodes what verify decodes.

/// Batch 0 good, batch 1 a CRC-valid compressed buffer that decodes to
/// another length than its record says (lz4: 1001 bytes for 1000; zstd: a
/// frame of 1001 bytes).
fn file_with_a_batch_that_does_not_decode(codec: u8) -> Vec<u8> {
    let stored = |n: usize| match codec {
        1 => lz4_buf(lz4_flex::block::compress(&vec![3u8; n])),
        _ => zstd_buf(zstd::bulk::compress(&vec![3u8; n], 3).unwrap()),
    };
    let mut good = holder(&["x"], 1000);
    good.buffers = vec![stored(1000)];
    let mut bad = pointing(1, 1, 1000);
    bad.buffers = vec![stored(1001)];
    let mut after = pointing(2, 1, 1000);
    after.buffers = vec![stored(1000)];
    build(&[good, bad, after])
}

#[test]
fn recovery_checks_compressed_batches_as_verify_does() {
    for codec in [1u8, 2] {
        let bytes = file_with_a_batch_that_does_not_decode(codec);
        let [random, verify, stream] = readers(&bytes);
        for r in [&random, &verify, &stream] {
            let err = r.as_ref().unwrap_err();
            assert!(err.contains("batch 1"), "codec {codec}: {err}");
        }
        // Under a valid footer: refused (it says three batches were written).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.lodt");
        std::fs::write(&path, &bytes).unwrap();
        let err = format::recover(&path).unwrap_err();
        assert!(matches!(err, FormatError::Refused(_)), "{err}");
        assert!(err.to_string().contains("stops at batch 1"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        let options = RecoverOptions {
            drop_damaged: true,
            ..Default::default()
        };
        let report = format::recover_with_options(&path, options, &mut |_, _| {}).unwrap();
        assert_eq!(report.batches, 1);
        LodtFile::open(&path).unwrap().verify().unwrap();
        // Cut: the batch that does not decode goes, and all after it.
        assert_eq!(recover_cut(&bytes), 1, "codec {codec}");
    }
}

// ---------------------------------------------------------------------------
// 5. `schema_back` may name any earlier head that holds a schema.

#[test]
fn a_schema_back_to_an_earlier_holder_reads_everywhere() {
    // Batch 0 holds schema (a), batch 1 schema (p, q), batch 2 points back at
    // batch 0, batch 3 at batch 1, batch 4 at batch 0 again.
    let batches = [
        holder(&["a"], 10),
        holder(&["p", "q"], 20),
        pointing(2, 1, 30),
        pointing(2, 2, 40),
        pointing(4, 1, 50),
    ];
    let bytes = build(&batches);
    for r in readers(&bytes) {
        assert_eq!(r, Ok(5));
    }
    let streamed: Vec<Batch> = StreamReader::try_new(&bytes[..])
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let file = LodtFile::from_bytes(&bytes).unwrap();
    for (k, b) in streamed.iter().enumerate() {
        assert_eq!(*b, file.read_batch(k).unwrap(), "batch {k}");
    }
    assert_eq!(streamed[4].names().collect::<Vec<_>>(), ["a"]);
    assert_eq!(streamed[3].names().collect::<Vec<_>>(), ["p", "q"]);
    // After an interrupted append, recovery keeps every committed batch.
    assert_eq!(recover_cut(&bytes), 5);
    // A head that holds no schema is no target, for any reader.
    let bad = build(&[holder(&["a"], 10), pointing(1, 1, 10), pointing(1, 1, 10)]);
    for r in readers(&bad) {
        let err = r.unwrap_err();
        assert!(err.contains("batch 1") && err.contains("schema"), "{err}");
    }
}

// ---------------------------------------------------------------------------
// 6. A zstd buffer is one frame.

/// `frame` (one zstd frame, single-segment or not) rewritten with a window
/// descriptor of `window_byte` and no content size.
fn with_window(frame: &[u8], window_byte: u8) -> Vec<u8> {
    let descriptor = frame[4];
    let single = descriptor & 0x20 != 0;
    let fcs = match (descriptor >> 6, single) {
        (0, false) => 0,
        (0, true) => 1,
        (1, _) => 2,
        (2, _) => 4,
        _ => 8,
    };
    let header = 5 + usize::from(!single) + fcs;
    let mut out = frame[..4].to_vec();
    out.push(descriptor & 0x04); // checksum flag kept; no FCS, not single-segment
    out.push(window_byte);
    out.extend_from_slice(&frame[header..]);
    out
}

/// The zstd stored bytes of a buffer that decodes to 1000 bytes, every way
/// but one frame, with what the error must say.
fn zstd_variants() -> Vec<(&'static str, Vec<u8>)> {
    let data: Vec<u8> = (0..1000u32).map(|i| (i % 7) as u8).collect();
    let whole = zstd::bulk::compress(&data, 3).unwrap();
    let first = zstd::bulk::compress(&data[..500], 3).unwrap();
    let second = zstd::bulk::compress(&data[500..], 3).unwrap();
    let skippable = [0x50u8, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
    vec![
        (
            "after the zstd frame",
            [with_window(&first, 0), with_window(&second, 0)].concat(),
        ),
        ("content size 500", [first.clone(), second].concat()),
        ("skippable", [&skippable[..], &whole].concat()),
        (
            "after the zstd frame",
            [whole.clone(), skippable.to_vec()].concat(),
        ),
        ("after the zstd frame", [whole.clone(), vec![0]].concat()),
        ("window of 2147483648", with_window(&whole, (31 - 10) << 3)),
        ("window of 268435456", with_window(&whole, (28 - 10) << 3)),
        ("content size 500", first),
        ("dictionary", {
            let mut d = whole.clone();
            d[4] |= 1;
            d
        }),
        ("reserved bit", {
            let mut d = whole.clone();
            d[4] |= 0x08;
            d
        }),
        ("magic", whole[1..].to_vec()),
        ("cut short", whole[..4].to_vec()),
    ]
}

#[test]
fn a_zstd_buffer_is_exactly_one_frame_with_a_bounded_window() {
    let data: Vec<u8> = (0..1000u32).map(|i| (i % 7) as u8).collect();
    let whole = zstd::bulk::compress(&data, 3).unwrap();
    // The accepted forms: one frame, with or without a content size, with a
    // window up to 2^27.
    for stored in [
        whole.clone(),
        with_window(&whole, 0),
        with_window(&whole, (27 - 10) << 3),
    ] {
        let mut b = holder(&["x"], 1000);
        b.buffers = vec![zstd_buf(stored)];
        for r in readers(&build(&[b])) {
            assert_eq!(r, Ok(1));
        }
    }
    for (needle, stored) in zstd_variants() {
        let mut b = holder(&["x"], 1000);
        b.buffers = vec![zstd_buf(stored)];
        for r in readers(&build(&[b])) {
            let err = r.unwrap_err();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}

#[test]
fn zstd_files_of_lodt_s_writer_read_at_every_level() {
    for level in [1, 3, 9, 19, 22] {
        let bytes = written(2, 300_000, Compression::Zstd { level });
        for r in readers(&bytes) {
            assert_eq!(r, Ok(2), "level {level}");
        }
    }
}

// ---------------------------------------------------------------------------
// The adversarial pass: many variants of each class above, every reader
// compared. Each prints its counts (`cargo test -- --nocapture`).

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn adversarial_length_fields_of_every_batch_and_codec() {
    let mut trials = 0;
    for compression in [
        Compression::None,
        Compression::Lz4,
        Compression::Zstd { level: 3 },
    ] {
        let bytes = written(3, 2000, compression);
        let file = LodtFile::from_bytes(&bytes).unwrap();
        for k in 0..3 {
            let start = file.batch_range(k).unwrap().start as usize;
            // section_len (64 bits) and head_len (32 bits).
            for bit in 0..96 {
                let mut bad = bytes.clone();
                bad[start + 8 + bit / 8] ^= 1 << (bit % 8);
                reset_largest();
                let results: Vec<_> = StreamReader::try_new(long_stream(&bad, 1 << 28))
                    .unwrap()
                    .collect();
                assert!(largest() < 4 << 20, "batch {k} bit {bit}: {}", largest());
                assert_eq!(results.len(), k + 1, "batch {k} bit {bit}");
                assert!(results[k].is_err(), "batch {k} bit {bit}");
                trials += 1;
            }
        }
    }
    // 1.0 files: the header's section_len is under the header's crc.
    let v1 = {
        let b = Batch::try_from_tensors([("x", tensor(2000, 1))]).unwrap();
        let mut w = format::Writer::try_new_with(
            Vec::new(),
            Default::default(),
            WriteOptions {
                format_version: Some(format::Version { major: 1, minor: 0 }),
                ..Default::default()
            },
        )
        .unwrap();
        w.write(&b).unwrap();
        w.finish().unwrap()
    };
    let start = LodtFile::from_bytes(&v1)
        .unwrap()
        .batch_range(0)
        .unwrap()
        .start as usize;
    for bit in 0..64 {
        let mut bad = v1.clone();
        bad[start + 8 + bit / 8] ^= 1 << (bit % 8);
        reset_largest();
        let results: Vec<_> = StreamReader::try_new(long_stream(&bad, 1 << 28))
            .unwrap()
            .collect();
        assert!(largest() < 4 << 20, "1.0 bit {bit}: {}", largest());
        assert!(results[0].is_err(), "1.0 bit {bit}");
        trials += 1;
    }
    eprintln!(
        "ADVERSARIAL length fields: {trials} trials, {trials} errors at the damaged batch, none allocating 4 MiB"
    );
}

#[test]
fn adversarial_zstd_frames() {
    let data: Vec<u8> = (0..4000u32).map(|i| (i * i % 251) as u8).collect();
    let mut rng = Rng(0x5eed);
    let (mut refused, mut accepted) = (0, 0);
    let check = |stored: Vec<u8>, ok: bool, what: &str| {
        let mut b = holder(&["x"], data.len() as u64);
        b.buffers = vec![zstd_buf(stored)];
        for r in readers(&build(&[b])) {
            assert_eq!(r.is_ok(), ok, "{what}: {r:?}");
        }
    };
    for level in 1..=22 {
        check(
            zstd::bulk::compress(&data, level).unwrap(),
            true,
            "one frame",
        );
        accepted += 1;
    }
    let whole = zstd::bulk::compress(&data, 3).unwrap();
    // Windows from 4 KiB (the data's 4,000 bytes fit) to 2^41 and more.
    for log in 12..=41u8 {
        for mantissa in [0u8, rng.below(8) as u8] {
            let window = (1u64 << log) + ((1u64 << log) / 8) * u64::from(mantissa);
            let ok = window <= 1 << 27;
            let stored = with_window(&whole, ((log - 10) << 3) | mantissa);
            check(stored, ok, &format!("window log {log} mantissa {mantissa}"));
            if ok { accepted += 1 } else { refused += 1 }
        }
    }
    for _ in 0..40 {
        // Split into 2 to 5 frames at random points.
        let parts = 2 + rng.below(4) as usize;
        let mut cuts: Vec<usize> = (0..parts - 1)
            .map(|_| 1 + rng.below(data.len() as u64 - 1) as usize)
            .collect();
        cuts.sort();
        cuts.dedup();
        let mut stored = Vec::new();
        let mut from = 0;
        for &c in cuts.iter().chain(std::iter::once(&data.len())) {
            let frame = zstd::bulk::compress(&data[from..c], 3).unwrap();
            stored.extend(if rng.below(2) == 0 {
                frame
            } else {
                with_window(&frame, 0x40)
            });
            from = c;
        }
        check(stored, false, "several frames");
        refused += 1;
    }
    for nibble in 0..16u8 {
        let skippable = [0x50 | nibble, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9];
        let before = rng.below(2) == 0;
        let stored = if before {
            [&skippable[..], &whole].concat()
        } else {
            [&whole[..], &skippable].concat()
        };
        check(stored, false, "skippable");
        refused += 1;
    }
    for extra in 1..=32usize {
        let mut stored = whole.clone();
        stored.extend((0..extra).map(|_| rng.next() as u8));
        check(stored, false, "trailing bytes");
        refused += 1;
    }
    for n in [1usize, 2, 3, 4, 5, 6, 8, 13] {
        check(whole[..n.min(whole.len())].to_vec(), false, "cut header");
        refused += 1;
    }
    eprintln!(
        "ADVERSARIAL zstd frames: {} trials: {accepted} accepted (one frame, window <= 2^27), {refused} refused, by every reader alike",
        accepted + refused
    );
}

#[test]
fn adversarial_schema_back_chains() {
    let mut rng = Rng(42);
    let (mut valid, mut invalid) = (0, 0);
    for trial in 0..120 {
        let n = 2 + rng.below(7) as usize;
        let mut batches = vec![holder(&["a"], 3)];
        // Tensor counts of each holder, by batch.
        let mut holders: Vec<(usize, usize)> = vec![(0, 1)];
        let mut broken = false;
        for k in 1..n {
            match rng.below(3) {
                0 => {
                    let names: &[&'static str] = match rng.below(3) {
                        0 => &["a"],
                        1 => &["p", "q"],
                        _ => &["u", "v", "w"],
                    };
                    batches.push(holder(names, 1 + rng.below(9)));
                    holders.push((k, names.len()));
                }
                1 if trial % 4 == 3 && !broken => {
                    // A back reference to a batch that holds no schema.
                    let j = (0..k).find(|j| !holders.iter().any(|h| h.0 == *j));
                    match j {
                        Some(j) => {
                            batches.push(pointing((k - j) as u64, 1, 2));
                            broken = true;
                        }
                        None => batches.push(pointing(k as u64, 1, 2)),
                    }
                }
                _ => {
                    let (j, tensors) = holders[rng.below(holders.len() as u64) as usize];
                    batches.push(pointing((k - j) as u64, tensors, 1 + rng.below(9)));
                }
            }
        }
        let bytes = build(&batches);
        let results = readers(&bytes);
        if broken {
            for r in &results {
                assert!(r.is_err(), "trial {trial}: {r:?}");
            }
            invalid += 1;
        } else {
            for r in &results {
                assert_eq!(*r, Ok(n), "trial {trial}");
            }
            assert_eq!(recover_cut(&bytes), n, "trial {trial}");
            valid += 1;
        }
    }
    eprintln!(
        "ADVERSARIAL schema_back: {} files: {valid} valid (read by every reader, every batch kept by recover after a cut), {invalid} pointing at a head with no schema (refused by every reader)",
        valid + invalid
    );
}

#[test]
fn adversarial_compressed_batches_that_do_not_decode() {
    let mut trials = 0;
    for codec in [1u8, 2] {
        for delta in [-15i64, -8, -3, -2, -1, 1, 2, 3, 8, 15, 100] {
            for at in 0..3usize {
                let n = 1000usize;
                let stored = |len: usize| match codec {
                    1 => lz4_buf(lz4_flex::block::compress(&vec![9u8; len])),
                    _ => zstd_buf(zstd::bulk::compress(&vec![9u8; len], 3).unwrap()),
                };
                let mut batches = vec![
                    holder(&["x"], n as u64),
                    pointing(1, 1, n as u64),
                    pointing(2, 1, n as u64),
                ];
                for b in &mut batches {
                    b.buffers = vec![stored(n)];
                }
                batches[at].buffers = vec![stored((n as i64 + delta) as usize)];
                let bytes = build(&batches);
                for r in readers(&bytes) {
                    let err = r.unwrap_err();
                    assert!(err.contains(&format!("batch {at}")), "{err}");
                }
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("bad.lodt");
                std::fs::write(&path, &bytes).unwrap();
                assert!(matches!(
                    format::recover(&path),
                    Err(FormatError::Refused(_))
                ));
                assert_eq!(
                    recover_cut(&bytes),
                    at,
                    "codec {codec} delta {delta} at {at}"
                );
                trials += 1;
            }
        }
    }
    eprintln!(
        "ADVERSARIAL undecodable batches: {trials} files: every reader refuses the batch; recover refuses under a valid footer and keeps exactly the batches before it after a cut"
    );
}
