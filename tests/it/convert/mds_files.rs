//! MDS datasets written here as MosaicML Streaming's `MDSWriter` lays them
//! out (checked against the real `streaming` package in
//! `python/tests/test_layouts.py`), read as lodt batches: raw and zstd
//! shards, every encoding lodt maps, and hostile offsets.

use lodt::convert::{ConvertOptions, Endpoint, Layout, convert};
use lodt::mds::MdsReader;
use std::path::Path;

/// One encoded value per column, per sample.
type Sample = Vec<Vec<u8>>;

/// Writes a shard of `samples` (`encodings[c]` with fixed size `sizes[c]`)
/// and returns its bytes.
fn shard(config: &str, sizes: &[Option<usize>], samples: &[Sample]) -> Vec<u8> {
    let encoded: Vec<Vec<u8>> = samples
        .iter()
        .map(|s| {
            let mut head = Vec::new();
            let mut body = Vec::new();
            for (value, size) in s.iter().zip(sizes) {
                if size.is_none() {
                    head.extend_from_slice(&(value.len() as u32).to_le_bytes());
                }
                body.extend_from_slice(value);
            }
            head.extend(body);
            head
        })
        .collect();
    let mut out = (samples.len() as u32).to_le_bytes().to_vec();
    let mut at = (4 + 4 * (samples.len() + 1) + config.len()) as u32;
    out.extend_from_slice(&at.to_le_bytes());
    for e in &encoded {
        at += e.len() as u32;
        out.extend_from_slice(&at.to_le_bytes());
    }
    out.extend_from_slice(config.as_bytes());
    for e in encoded {
        out.extend(e);
    }
    out
}

/// A dynamic-shape `ndarray` value (dtype byte, then shape, then values).
fn ndarray_i32(values: &[i32], dynamic_dtype: bool) -> Vec<u8> {
    let mut v = Vec::new();
    if dynamic_dtype {
        v.push(33); // int32
    }
    v.push((1 << 2) | 1); // ndim 1, uint16 shape
    v.extend_from_slice(&(values.len() as u16).to_le_bytes());
    for x in values {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

const NAMES: &str = r#"["ids", "any", "text", "n", "f", "grid"]"#;
const ENCODINGS: &str =
    r#"["ndarray:int32", "ndarray", "str", "int", "float32", "ndarray:uint8:2,2"]"#;
const SIZES: &str = "[null, null, null, 8, 4, 4]";

fn sample(k: i32) -> Sample {
    let ids: Vec<i32> = (0..=k).map(|i| 10 * k + i).collect();
    vec![
        ndarray_i32(&ids, false),
        ndarray_i32(&[k], true),
        format!("doc {k}").into_bytes(),
        (k as i64 * 100).to_le_bytes().to_vec(),
        (k as f32 / 2.0).to_le_bytes().to_vec(),
        vec![k as u8; 4],
    ]
}

/// Writes an MDS dataset of `shards` shards of 3 samples each, the odd
/// ones stored as zstd only.
fn dataset(dir: &Path, shards: usize) {
    let config = format!(
        r#"{{"column_encodings": {ENCODINGS}, "column_names": {NAMES}, "column_sizes": {SIZES}}}"#
    );
    let sizes = [None, None, None, Some(8), Some(4), Some(4)];
    let mut entries = Vec::new();
    for s in 0..shards {
        let samples: Vec<Sample> = (0..3).map(|i| sample((3 * s + i) as i32)).collect();
        let bytes = shard(&config, &sizes, &samples);
        let raw = format!("shard.{s:05}.mds");
        let zip = if s % 2 == 1 {
            let z = format!("{raw}.zstd");
            std::fs::write(dir.join(&z), zstd::bulk::compress(&bytes, 3).unwrap()).unwrap();
            format!(r#"{{"basename": "{z}", "bytes": 1}}"#)
        } else {
            std::fs::write(dir.join(&raw), &bytes).unwrap();
            "null".into()
        };
        let compression = if s % 2 == 1 { r#""zstd""# } else { "null" };
        entries.push(format!(
            r#"{{"format": "mds", "version": 2, "column_encodings": {ENCODINGS}, "column_names": {NAMES},
              "column_sizes": {SIZES}, "compression": {compression}, "hashes": [], "samples": 3, "size_limit": 67108864,
              "raw_data": {{"basename": "{raw}", "bytes": {}, "hashes": {{}}}}, "zip_data": {zip}}}"#,
            bytes.len()
        ));
    }
    std::fs::write(
        dir.join("index.json"),
        format!(r#"{{"version": 2, "shards": [{}]}}"#, entries.join(",")),
    )
    .unwrap();
}

#[test]
fn every_encoding_maps_to_its_tensor_from_raw_and_zstd_shards() {
    let dir = tempfile::tempdir().unwrap();
    dataset(dir.path(), 2);
    let batches: Vec<_> = MdsReader::open(dir.path())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(batches.len(), 2);
    let b = &batches[1]; // samples 3, 4, 5, from the zstd shard
    let ids = b.get("ids").unwrap();
    assert_eq!(ids.lod().level(0).unwrap().as_ref(), &[0, 4, 9, 15]);
    assert_eq!(&ids.as_slice::<i32>().unwrap()[..4], &[30, 31, 32, 33]);
    assert_eq!(b.get("any").unwrap().as_slice::<i32>().unwrap(), &[3, 4, 5]);
    let text = b.get("text").unwrap();
    assert_eq!(text.as_slice::<u8>().unwrap(), b"doc 3doc 4doc 5");
    assert_eq!(text.lod().level(0).unwrap().as_ref(), &[0, 5, 10, 15]);
    assert_eq!(
        b.get("n").unwrap().as_slice::<i64>().unwrap(),
        &[300, 400, 500]
    );
    assert_eq!(
        b.get("f").unwrap().as_slice::<f32>().unwrap(),
        &[1.5, 2.0, 2.5]
    );
    let grid = b.get("grid").unwrap();
    assert_eq!(grid.shape(), &[3, 2, 2]);
    assert_eq!(grid.as_slice::<u8>().unwrap()[4..8], [4; 4]);
}

#[test]
fn convert_recognises_an_mds_directory_by_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let mds = dir.path().join("mds");
    std::fs::create_dir(&mds).unwrap();
    dataset(&mds, 3);
    assert_eq!(
        Endpoint::input(&mds).unwrap(),
        Endpoint::Layout(Layout::Mds)
    );
    let options = ConvertOptions {
        columns: Some(vec!["ids".into(), "n".into()]),
        ..Default::default()
    };
    convert(&mds, dir.path().join("train"), &options, |_| {}).unwrap();
    let ds = lodt::dataset::Dataset::open(dir.path().join("train")).unwrap();
    assert_eq!(ds.num_sequences(), 9);
    let s7 = ds.sequence(7).unwrap();
    assert_eq!(
        s7.get("ids").unwrap().as_slice::<i32>().unwrap(),
        &(70..78).collect::<Vec<i32>>()[..]
    );
    assert_eq!(s7.get("n").unwrap().as_slice::<i64>().unwrap(), &[700]);
}

#[test]
fn hostile_shards_and_indexes_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    dataset(d, 1);
    let good = std::fs::read(d.join("shard.00000.mds")).unwrap();
    let read = || match MdsReader::open(d) {
        Err(e) => e.to_string(),
        Ok(r) => r
            .collect::<Result<Vec<_>, _>>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default(),
    };
    assert_eq!(read(), "");
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (0, 9u32.to_le_bytes().to_vec(), "sample count"),
        (4, 1u32.to_le_bytes().to_vec(), "offset of sample 0"),
        (8, u32::MAX.to_le_bytes().to_vec(), "offset of sample"),
        (16, 0u32.to_le_bytes().to_vec(), "offset of sample 2"),
    ];
    for (at, bytes, needle) in cases {
        let mut bad = good.clone();
        bad[at..at + bytes.len()].copy_from_slice(&bytes);
        std::fs::write(d.join("shard.00000.mds"), &bad).unwrap();
        let err = read();
        assert!(
            err.contains(needle) && err.contains("shard.00000.mds"),
            "{needle}: {err}"
        );
    }
    // Every byte flipped: an error or a batch, never a panic.
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0xa5;
        std::fs::write(d.join("shard.00000.mds"), &bad).unwrap();
        let _ = read();
    }
    std::fs::write(d.join("shard.00000.mds"), &good).unwrap();
    let index = std::fs::read_to_string(d.join("index.json")).unwrap();
    for (from, to, needle) in [
        (r#""ndarray:int32""#, r#""pkl""#, "choose the other columns"),
        ("shard.00000.mds\"", "../x.mds\"", "a file name"),
        (r#""format": "mds""#, r#""format": "xsv""#, "MDS shards"),
        (
            "[null, null, null, 8, 4, 4]",
            "[null, null, null, 4, 4, 4]",
            "column n",
        ),
    ] {
        std::fs::write(d.join("index.json"), index.replacen(from, to, 1)).unwrap();
        let err = read();
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// The datasets MosaicML Streaming's own `MDSWriter` wrote
/// (`tests/data/mds/make.py`), raw and zstd: every sample's values equal
/// what was written (`tests/data/mds/expected.json`).
#[test]
fn directories_written_by_mosaicml_streaming_read_as_written() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mds");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("expected.json")).unwrap()).unwrap();
    let expected = expected.as_array().unwrap();
    for layout in ["raw", "zstd"] {
        let batches: Vec<_> = MdsReader::open(data.join(layout))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(batches.len() > 1, "{layout}: {} shards", batches.len());
        let mut i = 0;
        for b in &batches {
            let ids = b.get("ids").unwrap();
            let any = b.get("any").unwrap();
            let text = b.get("text").unwrap();
            let n = b.get("n").unwrap().as_slice::<i64>().unwrap();
            let f = b.get("f").unwrap().as_slice::<f32>().unwrap();
            let grid = b.get("grid").unwrap();
            assert_eq!(any.shape()[1..], [3]);
            assert_eq!(grid.shape()[1..], [2, 2]);
            for k in 0..n.len() {
                let want = &expected[i];
                let range = |t: &lodt::LodTensor| {
                    let o = t.lod().level(0).unwrap().as_ref();
                    o[k] as usize..o[k + 1] as usize
                };
                let ids_want: Vec<i32> = want["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap() as i32)
                    .collect();
                assert_eq!(
                    &ids.as_slice::<i32>().unwrap()[range(ids)],
                    &ids_want[..],
                    "{layout} {i}"
                );
                let any_want: Vec<f64> = want["any"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
                    .collect();
                let rows = range(any);
                assert_eq!(
                    &any.as_slice::<f64>().unwrap()[3 * rows.start..3 * rows.end],
                    &any_want[..],
                    "{layout} {i}"
                );
                assert_eq!(
                    &text.as_slice::<u8>().unwrap()[range(text)],
                    want["text"].as_str().unwrap().as_bytes()
                );
                assert_eq!(n[k], want["n"].as_i64().unwrap());
                assert_eq!(f[k] as f64, want["f"].as_f64().unwrap());
                assert_eq!(
                    grid.as_slice::<u8>().unwrap()[4 * k],
                    want["grid"][0][0].as_u64().unwrap() as u8
                );
                i += 1;
            }
        }
        assert_eq!(i, expected.len(), "{layout}");
    }
}

/// An `ndarray` value whose rows would take more bytes than a `usize`
/// holds is an error naming the shape, also when the array has no rows
/// (its first dimension 0 makes its byte count 0 whatever the others are;
/// the reader once multiplied the row's dimensions unchecked, a panic in a
/// debug build and a tensor of impossible rows in a release build), and
/// one whose byte count overflows says so instead of `None bytes`.
#[test]
fn ndarray_shapes_whose_bytes_overflow_are_named_errors() {
    let config =
        r#"{"column_encodings": ["ndarray:int32"], "column_names": ["x"], "column_sizes": [null]}"#;
    for (dims, needle) in [
        (vec![0u64, 1 << 62, 1 << 62], "ndarray rows of at most"),
        (vec![0, 1 << 62], "ndarray rows of at most"),
        (vec![1 << 62, 1], "an ndarray of at most"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // ndim dims of 8 bytes each, no values.
        let mut value = vec![((dims.len() as u8) << 2) | 3];
        for x in &dims {
            value.extend_from_slice(&x.to_le_bytes());
        }
        let bytes = shard(config, &[None], &[vec![value]]);
        std::fs::write(d.join("shard.00000.mds"), &bytes).unwrap();
        std::fs::write(
            d.join("index.json"),
            format!(
                r#"{{"version": 2, "shards": [{{"format": "mds", "version": 2, "column_encodings": ["ndarray:int32"],
                  "column_names": ["x"], "column_sizes": [null], "compression": null, "samples": 1,
                  "raw_data": {{"basename": "shard.00000.mds", "bytes": {}}}, "zip_data": null}}]}}"#,
                bytes.len()
            ),
        )
        .unwrap();
        let err = MdsReader::open(d)
            .unwrap()
            .next()
            .unwrap()
            .err()
            .unwrap_or_else(|| panic!("{dims:?} read"))
            .to_string();
        assert!(
            err.contains(needle) && err.contains("shard.00000.mds") && err.contains("sample 0"),
            "{dims:?}: {err}"
        );
    }
}
