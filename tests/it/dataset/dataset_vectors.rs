//! The dataset test vector in `spec/vectors/dataset/` (spec/DATASET.md
//! section 9): regenerates the dataset directory and the recorded epoch
//! orders and compares them byte for byte with the committed files, so they
//! never drift; then has the independent Python reader
//! (`spec/vectors/check_dataset.py`) check them from the spec alone.
//!
//! After an intended change, rewrite them with
//! `LODT_BLESS=1 cargo test -p lodt --test it dataset_vectors`.
// These tests pin the behaviour of the deprecated packing constructors
// (`PackedLoader`, `Mixture::packed_loader`/`resume_packed`): thin calls of
// the one `Loader` with `LoaderOptions::packing` (dataset/loader_one_type.rs
// checks the two give the same stream).
#![allow(deprecated)]

use lodt::dataset::{
    Batching, Dataset, DatasetWriter, DatasetWriterOptions, Loader, LoaderOptions, LoaderState,
    LocalStore, PackOptions, PackedLoader, Partition, Remainder, ShuffleOptions,
};
use lodt::{Batch, Lod, LodTensor};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors/dataset")
}

/// Batch sizes (top-level sequences) of the vector: 13 sequences.
const SIZES: [u64; 6] = [3, 0, 2, 4, 1, 3];
const SHUFFLE: ShuffleOptions = ShuffleOptions { seed: 7, buffer: 4 };

/// Batch `k`: sequences `first..first + n`, sequence `i` of `i % 3 + 1`
/// tokens `10 * i + j` (int32, one LoD level), and a `label` `i` (uint8).
fn batch(first: u64, n: u64) -> Batch {
    let ids: Vec<u64> = (first..first + n).collect();
    let lengths: Vec<u64> = ids.iter().map(|i| i % 3 + 1).collect();
    let tokens: Vec<i32> = ids
        .iter()
        .flat_map(|&i| (0..i % 3 + 1).map(move |j| (10 * i + j) as i32))
        .collect();
    let lod = if n == 0 {
        Lod::try_from_stored(vec![vec![0]]).unwrap()
    } else {
        Lod::try_from_lengths(&[lengths]).unwrap()
    };
    let rows = tokens.len();
    let tokens = LodTensor::from_vec(tokens, vec![rows], lod).unwrap();
    let label = LodTensor::from_vec(
        ids.iter().map(|&i| i as u8).collect(),
        vec![ids.len()],
        Lod::empty(),
    )
    .unwrap();
    Batch::try_from_tensors([("tokens", tokens), ("label", label)]).unwrap()
}

fn ids(loader: Loader) -> Vec<u64> {
    loader.flat_map(|b| b.unwrap().ids).collect()
}

/// Every file of the vector, by name.
fn expected_files() -> BTreeMap<String, Vec<u8>> {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStore::new(tmp.path()).with_fsync(false));
    let options = DatasetWriterOptions {
        shard_bytes: 2048,
        metadata: [("source".to_string(), "lodt test vector".to_string())].into(),
        commit_id: Some("test-vector".to_string()),
        // The vector's shards are 1.0 files (its bytes are pinned).
        format_version: Some(lodt::format::Version { major: 1, minor: 0 }),
        // The version's record (section 3.3) is pinned too.
        commit_time: Some("2026-12-01T00:00:00Z".to_string()),
        ..Default::default()
    };
    let mut w = DatasetWriter::create_in(store.clone(), options).unwrap();
    let mut next = 0;
    for n in SIZES {
        w.write(&batch(next, n)).unwrap();
        next += n;
    }
    w.finish().unwrap();
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(tmp.path()).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        files.insert(name, std::fs::read(e.path()).unwrap());
    }

    let dataset = Arc::new(Dataset::open_in(store).unwrap());
    let options = |shuffle, rank, world_size| LoaderOptions {
        batching: Batching::Sequences(2),
        shuffle,
        rank,
        world_size,
        prefetch: 0,
        ..Default::default()
    };
    let epoch = |e: u64| {
        let mut l = Loader::new(dataset.clone(), options(Some(SHUFFLE), 0, 1)).unwrap();
        l.set_epoch(e).unwrap();
        ids(l)
    };
    // A world-size change in epoch 1: two ranks, rank 0 two steps ahead of
    // rank 1, then three ranks.
    let mut states = Vec::new();
    for (rank, steps) in [(0, 2), (1, 1)] {
        let mut l = Loader::new(dataset.clone(), options(Some(SHUFFLE), rank, 2)).unwrap();
        l.set_epoch(1).unwrap();
        l.by_ref().take(steps).for_each(|b| drop(b.unwrap()));
        states.push(l.state());
    }
    let merged = LoaderState::merge(&states).unwrap();
    let mut advanced = None;
    let resumed: Vec<Vec<u64>> = (0..3)
        .map(|rank| {
            let l =
                Loader::resume(dataset.clone(), options(Some(SHUFFLE), rank, 3), &merged).unwrap();
            let s = l.state();
            advanced = Some(serde_json::json!({"frontier": s.frontier, "skip": s.skip}));
            ids(l)
        })
        .collect();
    // The cursor of epoch 1's order at position 5 (section 7.3).
    let cursor = serde_json::to_value(dataset.order_cursor(SHUFFLE, 1, 5).unwrap()).unwrap();
    // Epoch 1 as an epoch that took in its last shard as appended (7.3,
    // "Joining now"): the state names the first two shards in `joined`.
    let mut prefix = Vec::new();
    let mut first_two = 0;
    for k in 0..2 {
        let e = dataset.shard_entry(k).unwrap();
        prefix.extend((e.name.len() as u64).to_le_bytes());
        prefix.extend(e.name.as_bytes());
        prefix.extend(e.bytes.to_le_bytes());
        prefix.extend(e.footer_crc.to_le_bytes());
        prefix.extend(e.sequences.to_le_bytes());
        first_two += e.sequences;
    }
    let joined_state = LoaderState::from_json(&serde_json::json!({"version": 6,
        "sequences": dataset.num_sequences(), "fingerprint": dataset.fingerprint(),
        "shuffle": SHUFFLE, "remainder": "keep", "epoch": 1, "frontier": 0, "skip": [],
        "consumers": 1, "consumed": {"0": 0},
        "joined": {"sequences": first_two, "fingerprint": crc32fast::hash(&prefix)}}))
    .unwrap();
    let joined_ids =
        ids(Loader::resume(dataset.clone(), options(Some(SHUFFLE), 0, 1), &joined_state).unwrap());
    let joined = serde_json::json!({"state": joined_state.to_json(), "ids": joined_ids});
    let line = |v: serde_json::Value| v.to_string();
    let orders = [
        format!(
            "{{\"shuffle\": {},",
            line(serde_json::to_value(SHUFFLE).unwrap())
        ),
        format!(
            "\"unshuffled\": {},",
            line(ids(Loader::new(dataset.clone(), options(None, 0, 1)).unwrap()).into())
        ),
        format!("\"epoch0\": {},", line(epoch(0).into())),
        format!("\"epoch1\": {},", line(epoch(1).into())),
        format!("\"resume_state\": {},", line(merged.to_json())),
        "\"resume_consumers\": 3,".to_string(),
        format!("\"resume_base\": {},", line(advanced.unwrap_or_default())),
        format!("\"resume_ids\": {},", line(resumed.into())),
        format!("\"cursor\": {},", line(cursor)),
        format!("\"joined\": {}}}\n", line(joined)),
    ];
    files.insert("orders.json".into(), orders.join("\n").into_bytes());
    files.insert("packing.json".into(), packing(&dataset));
    files.insert("locality.json".into(), locality(&dataset));
    files
}

/// `locality.json` (section 7.6): epoch 1 in the locality partition, dealt
/// to 2 consumers; their merged state after 3 and 1 sequences resumed on 3;
/// and 5 consumers with `repeat`.
fn locality(dataset: &Arc<Dataset>) -> Vec<u8> {
    let options = |rank, world_size, remainder| LoaderOptions {
        batching: Batching::Sequences(1),
        shuffle: Some(SHUFFLE),
        rank,
        world_size,
        remainder,
        prefetch: 0,
        partition: Some(Partition::Locality),
        ..Default::default()
    };
    let epoch1 = |world: usize, remainder| -> Vec<Vec<u64>> {
        (0..world)
            .map(|rank| {
                let mut l = Loader::new(dataset.clone(), options(rank, world, remainder)).unwrap();
                l.set_epoch(1).unwrap();
                ids(l)
            })
            .collect()
    };
    let mut states = Vec::new();
    for (rank, steps) in [(0, 3), (1, 1)] {
        let mut l = Loader::new(dataset.clone(), options(rank, 2, Remainder::Keep)).unwrap();
        l.set_epoch(1).unwrap();
        l.by_ref().take(steps).for_each(|b| drop(b.unwrap()));
        states.push(l.state());
    }
    let merged = LoaderState::merge(&states).unwrap();
    let mut ranges = None;
    let resumed: Vec<Vec<u64>> = (0..3)
        .map(|rank| {
            let l = Loader::resume(dataset.clone(), options(rank, 3, Remainder::Keep), &merged)
                .unwrap();
            ranges = l.state().ranges;
            ids(l)
        })
        .collect();
    let mut order = Loader::new(dataset.clone(), options(0, 1, Remainder::Keep)).unwrap();
    order.set_epoch(1).unwrap();
    let line = |v: serde_json::Value| v.to_string();
    let lines = [
        "{\"epoch\": 1, \"consumers\": 2,".to_string(),
        format!("\"order\": {},", line(ids(order).into())),
        format!("\"ids\": {},", line(epoch1(2, Remainder::Keep).into())),
        format!("\"resume_state\": {},", line(merged.to_json())),
        "\"resume_consumers\": 3,".to_string(),
        format!("\"resume_ranges\": {},", line(serde_json::json!(ranges))),
        format!("\"resume_ids\": {},", line(resumed.into())),
        "\"repeat_consumers\": 5,".to_string(),
        format!(
            "\"repeat_ids\": {}}}\n",
            line(epoch1(5, Remainder::Repeat).into())
        ),
    ];
    lines.join("\n").into_bytes()
}

/// `packing.json` (section 7.4): epoch 1 packed by 2 consumers with a token
/// budget and with `[R, L]` rows, and consumer 1 resumed after 2 mini-batches.
fn packing(dataset: &Arc<Dataset>) -> Vec<u8> {
    let options = |rank| LoaderOptions {
        shuffle: Some(SHUFFLE),
        rank,
        world_size: 2,
        prefetch: 0,
        ..Default::default()
    };
    let loader = |rank, pack: &PackOptions| {
        let mut l = PackedLoader::new(dataset.clone(), options(rank), pack.clone()).unwrap();
        l.set_epoch(1).unwrap();
        l
    };
    let batches = |pack: &PackOptions| -> serde_json::Value {
        (0..2)
            .map(|rank| {
                loader(rank, pack)
                    .map(|b| {
                        let b = b.unwrap();
                        let mut v = serde_json::json!({"ids": b.batch.ids, "bins": b.bins});
                        if pack.truncate {
                            v["truncated"] = serde_json::json!(b.truncated);
                        }
                        v
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
            .into()
    };
    let tokens = PackOptions {
        buffer: 3,
        equal_batches: Some(false),
        ..PackOptions::tokens(4)
    };
    let rows = PackOptions {
        rows: Some(2),
        buffer: 3,
        equal_batches: Some(false),
        ..PackOptions::tokens(3)
    };
    let truncate = PackOptions {
        truncate: true,
        ..PackOptions::tokens(2)
    };
    let truncate = PackOptions {
        buffer: 3,
        equal_batches: Some(false),
        ..truncate
    };
    let equal = |p: &PackOptions| PackOptions {
        equal_batches: Some(true),
        ..p.clone()
    };
    let state_after_2 = |p: &PackOptions| {
        let mut l = loader(1, p);
        l.by_ref().take(2).for_each(|b| drop(b.unwrap()));
        l.state().to_json()
    };
    let state = state_after_2(&tokens);
    let opts = |p: &PackOptions| serde_json::json!({"capacity": p.capacity, "rows": p.rows, "buffer": p.buffer});
    let lines = [
        "{\"epoch\": 1, \"consumers\": 2,".to_string(),
        format!("\"tokens\": {},", opts(&tokens)),
        format!("\"tokens_batches\": {},", batches(&tokens)),
        format!("\"rows\": {},", opts(&rows)),
        format!("\"rows_batches\": {},", batches(&rows)),
        format!("\"tokens_equal_batches\": {},", batches(&equal(&tokens))),
        format!("\"rows_equal_batches\": {},", batches(&equal(&rows))),
        "\"truncate\": {\"buffer\":3,\"capacity\":2,\"rows\":null,\"truncate\":true},".to_string(),
        format!("\"truncate_batches\": {},", batches(&truncate)),
        "\"resume_consumer\": 1, \"resume_after\": 2,".to_string(),
        format!("\"resume_state\": {},", state),
        format!(
            "\"equal_resume_state\": {}}}\n",
            state_after_2(&equal(&tokens))
        ),
    ];
    lines.join("\n").into_bytes()
}

#[test]
fn the_dataset_vector_matches_the_writer_and_the_loader() {
    let expected = expected_files();
    let dir = dir();
    if std::env::var_os("LODT_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &expected {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let wanted: BTreeSet<String> = expected.keys().cloned().collect();
    assert_eq!(
        present, wanted,
        "spec/vectors/dataset has stale or missing files (LODT_BLESS=1 rewrites them)"
    );
    for (name, bytes) in &expected {
        let committed = std::fs::read(dir.join(name)).unwrap();
        assert!(
            &committed == bytes,
            "spec/vectors/dataset/{name} differs from what the code produces (LODT_BLESS=1 rewrites it)"
        );
    }
}

#[test]
fn the_committed_vector_reads_back() {
    let dataset = Dataset::open(dir()).unwrap();
    assert!(dataset.num_shards() >= 3, "{} shards", dataset.num_shards());
    assert_eq!(dataset.num_sequences(), SIZES.iter().sum::<u64>());
    assert_eq!(dataset.verify().unwrap().batches, SIZES.len() as u64);
    for id in 0..dataset.num_sequences() {
        assert_eq!(dataset.sequence(id).unwrap(), batch(id, 1));
    }
}

#[test]
fn an_independent_python_reader_agrees() {
    // spec/vectors/check_dataset.py checks the vector from DATASET.md alone
    // (manifest against shards, the epoch orders, the world-size resume).
    let python = std::env::var("LODT_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = dir().with_file_name("check_dataset.py");
    let out = match std::process::Command::new(&python).arg(&script).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIP: cannot run {python} ({e}); the Python cross-check did not run");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        "ok: 3 shards and the manifest agree; 13 sequences; epoch orders, the cursor, the joined order, the world-size resume, packing, locality and the shard index match\n"
    );
    // Versions (section 3.3): the vector's one version, and a dataset of
    // three versions and a tag written here, checked from the spec alone.
    let run = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(&python)
            .arg(&script)
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    assert_eq!(
        run(&["--versions".as_ref()]),
        "ok: 1 versions (1 create) and 0 tags agree with their manifests\n"
    );
    let tmp = tempfile::tempdir().unwrap();
    for first in [0, 3, 7] {
        let mut w = match DatasetWriter::append(tmp.path(), Default::default()) {
            Ok(w) => w,
            Err(_) => DatasetWriter::create(tmp.path(), Default::default()).unwrap(),
        };
        w.write(&batch(first, 3)).unwrap();
        w.finish().unwrap();
    }
    Dataset::tag(tmp.path(), "first", Some(1)).unwrap();
    assert_eq!(
        run(&["--versions".as_ref(), tmp.path().as_os_str()]),
        "ok: 3 versions (1 create, 2 append, 3 append) and 1 tags agree with their manifests\n"
    );
}
