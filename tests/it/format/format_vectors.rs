//! The test vectors in `spec/vectors/`: regenerates every file and compares
//! it byte for byte with the committed one, so they never drift from the
//! writer or from `lodt show --json`.
//!
//! After an intended format change, rewrite them with
//! `LODT_BLESS=1 cargo test -p lodt --test it format_vectors`.

use half::{bf16, f16};
use lodt::format::{Compression, LodtFile, Version, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors")
}

/// One vector: a file name, its file metadata and its batches.
struct Vector {
    name: &'static str,
    metadata: BTreeMap<String, String>,
    batches: Vec<Batch>,
    /// Extra `--branch` slices recorded as JSON: (batch, tensor, path).
    slices: Vec<(usize, &'static str, Vec<usize>)>,
    /// Format 2.0 with this compression (`None`: format 1.0).
    v2: Option<Compression>,
}

impl Vector {
    /// The file's bytes, as the writer writes them.
    fn bytes(&self) -> Vec<u8> {
        let options = match self.v2 {
            None => WriteOptions {
                format_version: Some(Version { major: 1, minor: 0 }),
                ..Default::default()
            },
            Some(compression) => WriteOptions {
                format_version: Some(Version { major: 2, minor: 0 }),
                compression,
                ..Default::default()
            },
        };
        let mut w = Writer::try_new_with(Vec::new(), self.metadata.clone(), options).unwrap();
        for b in &self.batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap()
    }
}

fn lod(lengths: &[Vec<u64>]) -> Lod {
    Lod::try_from_lengths(lengths).unwrap()
}

fn vectors() -> Vec<Vector> {
    // 1. One float32 tensor with a 1-level LoD.
    let x = LodTensor::from_vec(
        vec![0.0f32, 0.5, 1.0, 1.5, -2.0, 0.1, 3.25, -0.0, 1e-7, 65504.0],
        vec![5, 2],
        lod(&[vec![2, 3]]),
    )
    .unwrap();
    let f32_1level = Vector {
        name: "f32_1level",
        metadata: BTreeMap::new(),
        batches: vec![Batch::try_from_tensors([("x", x)]).unwrap()],
        slices: vec![(0, "x", vec![1])],
        v2: None,
    };

    // 2. Paddle's example: words with a 2-level LoD next to 0-level labels.
    let words = LodTensor::from_vec(
        (0..15i64).collect(),
        vec![15, 1],
        lod(&[vec![3, 1, 2], vec![3, 2, 4, 1, 2, 3]]),
    )
    .unwrap();
    let labels = LodTensor::from_vec(vec![1i64, 0, 1], vec![3], Lod::empty()).unwrap();
    let mut b = Batch::try_from_tensors([("words", words), ("labels", labels)]).unwrap();
    b.metadata_mut().insert("split".into(), "train".into());
    let words_labels = Vector {
        name: "words_labels",
        metadata: BTreeMap::new(),
        batches: vec![b.clone()],
        slices: vec![(0, "words", vec![2]), (0, "words", vec![0, 2])],
        v2: None,
    };
    let v2_words_labels = Vector {
        name: "v2_words_labels",
        metadata: BTreeMap::new(),
        batches: vec![b],
        slices: vec![(0, "words", vec![2])],
        v2: Some(Compression::None),
    };

    // 3. A 0-D tensor, bools, float16 and bfloat16 (with non-finite values).
    let scale = LodTensor::from_vec(vec![2.5f64], vec![], Lod::empty()).unwrap();
    let mask =
        LodTensor::from_vec(vec![true, false, false, true], vec![4], lod(&[vec![1, 3]])).unwrap();
    let half = LodTensor::from_vec(
        vec![
            f16::from_f32(1.0),
            f16::from_f32(-0.1),
            f16::INFINITY,
            f16::NAN,
            f16::NEG_INFINITY,
            f16::from_f32(6.1e-5),
        ],
        vec![3, 2],
        lod(&[vec![2, 1]]),
    )
    .unwrap();
    let brain = LodTensor::from_vec(
        vec![
            bf16::from_f32(1.5),
            bf16::from_f32(-2.0),
            bf16::from_f32(0.1),
            bf16::from_f32(1e30),
        ],
        vec![2, 2],
        Lod::empty(),
    )
    .unwrap();
    let scalars = Vector {
        name: "scalar_bool_half",
        metadata: BTreeMap::new(),
        batches: vec![
            Batch::try_from_tensors([
                ("scale", scale),
                ("mask", mask),
                ("half", half),
                ("brain", brain),
            ])
            .unwrap(),
        ],
        slices: vec![],
        v2: None,
    };

    // 4. Several batches, file metadata, uint32 ids and float64 weights.
    let mut batches = Vec::new();
    for (k, lengths) in [vec![2u64, 3], vec![1], vec![0, 4, 1]]
        .into_iter()
        .enumerate()
    {
        let rows = lengths.iter().sum::<u64>() as usize;
        let seqs = lengths.len();
        let ids = LodTensor::from_vec(
            (0..rows as u32).map(|i| i * 10 + k as u32).collect(),
            vec![rows],
            lod(&[lengths]),
        )
        .unwrap();
        let weights = LodTensor::from_vec(
            (0..seqs).map(|i| i as f64 / 4.0).collect(),
            vec![seqs],
            Lod::empty(),
        )
        .unwrap();
        let mut b = Batch::try_from_tensors([("ids", ids), ("weights", weights)]).unwrap();
        b.metadata_mut().insert("step".into(), k.to_string());
        batches.push(b);
    }
    let multi = Vector {
        name: "multi_batch",
        metadata: [("source".to_string(), "lodt test vectors".to_string())].into(),
        batches,
        slices: vec![(2, "ids", vec![1])],
        v2: None,
    };

    // 5. No batches at all.
    let empty = Vector {
        name: "empty",
        metadata: BTreeMap::new(),
        batches: vec![],
        slices: vec![],
        v2: None,
    };
    vec![
        f32_1level,
        words_labels,
        scalars.clone_as("v2_schemas_zstd", Some(Compression::Zstd { level: 3 })),
        scalars,
        multi,
        empty,
        v2_words_labels,
        v2_shared_lz4(),
    ]
}

impl Vector {
    /// This vector's batches after two batches of a compressible schema of
    /// their own, and one more of it after (four schema records), as `name`.
    fn clone_as(&self, name: &'static str, v2: Option<Compression>) -> Vector {
        let tokens = |k: i64| {
            let t = LodTensor::from_vec(
                (0..64i64).map(|i| (i % 8) * 1000 + k).collect(),
                vec![64, 1],
                lod(&[vec![2, 1], vec![20, 20, 24]]),
            )
            .unwrap();
            Batch::try_from_tensors([("tokens", t)]).unwrap()
        };
        let mut first = tokens(0);
        first.metadata_mut().insert("part".into(), "a".into());
        let mut batches = vec![first, tokens(1)];
        batches.extend(self.batches.iter().cloned());
        batches.push(tokens(2));
        Vector {
            name,
            metadata: [("codec".to_string(), "zstd".to_string())].into(),
            batches,
            slices: vec![(1, "tokens", vec![1])],
            v2,
        }
    }
}

/// 2.0, lz4: a LoD shared by two tensors (stored once), two batches of one
/// schema (written once).
fn v2_shared_lz4() -> Vector {
    let batch = |k: u32| {
        let l = lod(&[vec![30, 0, 70]]);
        let ids = LodTensor::from_vec(
            (0..100u32).map(|i| i / 10 + k).collect(),
            vec![100],
            l.clone(),
        )
        .unwrap();
        let emb = LodTensor::from_vec(
            (0..400).map(|i| (i % 4) as f32 * 0.5).collect(),
            vec![100, 4],
            l,
        )
        .unwrap();
        let label = LodTensor::from_vec(vec![k as u8; 2], vec![2], Lod::empty()).unwrap();
        Batch::try_from_tensors([("ids", ids), ("emb", emb), ("label", label)]).unwrap()
    };
    Vector {
        name: "v2_shared_lz4",
        metadata: BTreeMap::new(),
        batches: vec![batch(0), batch(5)],
        slices: vec![(1, "emb", vec![2])],
        v2: Some(Compression::Lz4),
    }
}

/// The name of the JSON recording `lodt show` of one tensor or slice.
fn json_name(vector: &str, batch: usize, tensor: &str, branch: &[usize]) -> String {
    let mut name = format!("{vector}.b{batch}.{tensor}");
    if !branch.is_empty() {
        let path: Vec<String> = branch.iter().map(|i| i.to_string()).collect();
        name.push_str(&format!(".branch-{}", path.join("-")));
    }
    name + ".json"
}

/// Every file of the vectors directory, with the bytes it must hold.
fn expected_files() -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for v in vectors() {
        let bytes = v.bytes();
        let file = LodtFile::from_bytes(&bytes).unwrap();
        file.verify().unwrap();
        for k in 0..file.num_batches() {
            let batch = file.batch(k).unwrap();
            for t in batch.tensors() {
                let (name, view) = t.unwrap();
                let json = lodt::tensor::tensor_json(name, &view).unwrap() + "\n";
                files.insert(json_name(v.name, k, name, &[]), json.into_bytes());
            }
        }
        for (k, tensor, path) in &v.slices {
            let view = file.batch(*k).unwrap().tensor(tensor).unwrap();
            let slice = view.branch(path).unwrap();
            let json = lodt::tensor::tensor_json(tensor, &slice).unwrap() + "\n";
            files.insert(json_name(v.name, *k, tensor, path), json.into_bytes());
        }
        files.insert(format!("{}.lodt", v.name), bytes);
    }
    files
}

#[test]
fn vectors_match_the_writer_and_the_json() {
    let expected = expected_files();
    let dir = dir();
    if std::env::var_os("LODT_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &expected {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".lodt") || n.ends_with(".json"))
        .collect();
    let wanted: BTreeSet<String> = expected.keys().cloned().collect();
    assert_eq!(
        present, wanted,
        "spec/vectors has stale or missing files (LODT_BLESS=1 rewrites them)"
    );
    for (name, bytes) in &expected {
        let committed = std::fs::read(dir.join(name)).unwrap();
        assert!(
            &committed == bytes,
            "spec/vectors/{name} differs from what the code produces (LODT_BLESS=1 rewrites it)"
        );
    }
}

#[test]
fn committed_vectors_read_back_to_their_batches() {
    for v in vectors() {
        let path = dir().join(format!("{}.lodt", v.name));
        let file = LodtFile::open(&path).unwrap();
        assert_eq!(file.metadata(), &v.metadata);
        assert_eq!(file.num_batches(), v.batches.len());
        for (k, b) in v.batches.iter().enumerate() {
            assert_eq!(&file.read_batch(k).unwrap(), b, "{} batch {k}", v.name);
        }
        file.verify().unwrap();
    }
}

#[test]
fn json_values_read_back_exactly() {
    // Every float printed in the vectors parses back to the stored value.
    let path = dir().join("scalar_bool_half.b0.half.json");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let values = json["values"].as_array().unwrap();
    assert_eq!(values[2], "Infinity");
    assert_eq!(values[3], "NaN");
    assert_eq!(values[4], "-Infinity");
    let tenth = values[1].as_f64().unwrap() as f32;
    assert_eq!(f16::from_f32(tenth), f16::from_f32(-0.1));
    assert_eq!(f16::from_f32(tenth).to_f32(), tenth, "printed exactly");
}

#[test]
fn an_independent_python_reader_agrees() {
    // spec/vectors/check.py reads the vectors from FORMAT.md alone (Python
    // standard library only) and compares them with the JSON records.
    let python = std::env::var("LODT_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = dir().join("check.py");
    let out = match std::process::Command::new(&python).arg(&script).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIP: cannot run {python} ({e}); the Python cross-check did not run");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(3) {
        // check.py could not import zstandard or lz4 (scripts/test installs
        // them in the venv it gives as LODT_PYTHON).
        eprintln!("SKIP: {stdout}");
        return;
    }
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "ok: 8 files read, 35 JSON records match\n");
}
