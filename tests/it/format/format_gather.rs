//! Gathers of many items of a file (`LodtFile::take`, `take_level`,
//! `prefetch`): the items come back in the caller's order, duplicates
//! included, byte-identical whichever source reads them (a map whose bytes
//! are asked for all at once, cold or warm, positional reads, bytes in
//! memory), and a row out of range is an error naming it.

use lodt::format::{self, LodtFile, ReadOptions, RowLocation};
use lodt::{Batch, Lod, LodTensor, ops};
use std::path::Path;

/// `batches` batches of documents of sentences of tokens: `tokens` int64
/// [rows] and `emb` float32 [rows, 4], the same LoD, values that tell every
/// row apart.
fn write_file(path: &Path, batches: usize) -> Vec<Batch> {
    let mut w = format::Writer::create(path, Default::default()).unwrap();
    let mut out = Vec::new();
    let mut next = 0i64;
    for k in 0..batches {
        let docs: Vec<u64> = (0..3 + k % 4).map(|d| 1 + (d + k) as u64 % 3).collect();
        let sentences: u64 = docs.iter().sum();
        let tokens: Vec<u64> = (0..sentences)
            .map(|s| 1 + (s * 7 + k as u64) % 40)
            .collect();
        let rows = tokens.iter().sum::<u64>() as usize;
        let lod = Lod::try_from_lengths(&[docs, tokens]).unwrap();
        let ids: Vec<i64> = (next..next + rows as i64).collect();
        let emb: Vec<f32> = ids
            .iter()
            .flat_map(|&i| (0..4).map(move |j| (i * 4 + j) as f32))
            .collect();
        next += rows as i64;
        let mut b = Batch::try_from_tensors([
            (
                "tokens",
                LodTensor::from_vec(ids, vec![rows], lod.clone()).unwrap(),
            ),
            ("emb", LodTensor::from_vec(emb, vec![rows, 4], lod).unwrap()),
        ])
        .unwrap();
        b.metadata_mut().insert("batch".into(), k.to_string());
        w.write(&b).unwrap();
        out.push(b);
    }
    w.finish().unwrap();
    out
}

/// The items, copied one by one from the batches in memory (the expected
/// result, computed without the file reader).
fn expected(batches: &[Batch], level: usize, items: &[RowLocation], name: &str) -> LodTensor {
    let parts: Vec<LodTensor> = items
        .iter()
        .map(|at| {
            let t = batches[at.batch].get(name).unwrap();
            if level == 0 {
                t.slice_top(at.row, at.row + 1).unwrap()
            } else {
                t.slice_level(level, at.row, at.row + 1).unwrap()
            }
        })
        .collect();
    ops::concat(&parts).unwrap()
}

/// Items spread over every batch, in a scrambled order, with duplicates.
fn scrambled(batches: &[Batch], level: usize) -> Vec<RowLocation> {
    let mut all = Vec::new();
    for (k, b) in batches.iter().enumerate() {
        let n = b.get("tokens").unwrap().lod().num_sequences(level).unwrap();
        all.extend((0..n).map(|row| RowLocation { batch: k, row }));
    }
    let mut items: Vec<RowLocation> = (0..all.len())
        .map(|i| all[(i * 7919 + 13) % all.len()])
        .filter(|at| (at.batch + at.row) % 3 != 0)
        .collect();
    items.push(items[0]);
    items.insert(1, items[2]);
    items
}

/// Opens the file one way.
type Opener<'a> = Box<dyn Fn() -> LodtFile + 'a>;

fn evict(path: &Path) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).unwrap();
        // SAFETY: a plain system call on a descriptor `file` keeps open; it
        // reads and writes no memory of this process.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

#[test]
fn take_level_gives_the_items_in_the_callers_order_from_every_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.lodt");
    let batches = write_file(&path, 24);
    let bytes = std::fs::read(&path).unwrap();
    for level in [0, 1] {
        let items = scrambled(&batches, level);
        assert!(items.len() > 50);
        let first = items[0].batch;
        let want_tokens = expected(&batches, level, &items, "tokens");
        let want_emb = expected(&batches, level, &items, "emb");
        let sources: Vec<(&str, Opener<'_>)> = vec![
            (
                "map, cold",
                Box::new(|| {
                    evict(&path);
                    LodtFile::open(&path).unwrap()
                }),
            ),
            ("map, warm", Box::new(|| LodtFile::open(&path).unwrap())),
            (
                "positional reads, cold",
                Box::new(|| {
                    evict(&path);
                    let o = ReadOptions {
                        mmap: false,
                        ..Default::default()
                    };
                    LodtFile::open_with(&path, &o).unwrap()
                }),
            ),
            (
                "bytes in memory",
                Box::new(|| LodtFile::from_bytes(&bytes).unwrap()),
            ),
        ];
        for (what, open) in &sources {
            let got = open().take_level(level, &items).unwrap();
            let (tokens, emb) = (got.get("tokens").unwrap(), got.get("emb").unwrap());
            assert_eq!(
                tokens.as_bytes(),
                want_tokens.as_bytes(),
                "{what}, level {level}"
            );
            assert_eq!(tokens.lod(), want_tokens.lod(), "{what}, level {level}");
            assert_eq!(emb.as_bytes(), want_emb.as_bytes(), "{what}, level {level}");
            assert_eq!(emb.shape(), want_emb.shape(), "{what}, level {level}");
            assert_eq!(got.metadata()["batch"], first.to_string(), "{what}");
            // Prefetch, then read in place, one item at a time: the same.
            let file = open();
            file.prefetch(level, &items).unwrap();
            for (i, at) in items.iter().enumerate().step_by(17) {
                let t = file.batch(at.batch).unwrap().tensor("emb").unwrap();
                let one = if level == 0 {
                    t.slice_top(at.row, at.row + 1).unwrap()
                } else {
                    t.slice_level(level, at.row, at.row + 1).unwrap()
                };
                let want = expected(&batches, level, &items[i..i + 1], "emb");
                assert_eq!(one.as_bytes(), want.as_bytes(), "{what}, item {i}");
            }
        }
    }
    // `take` is `take_level(0, ..)`.
    let file = LodtFile::open(&path).unwrap();
    let items = scrambled(&batches, 0);
    assert_eq!(
        file.take(&items).unwrap(),
        file.take_level(0, &items).unwrap()
    );
}

#[test]
fn rows_out_of_range_are_errors_that_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.lodt");
    let batches = write_file(&path, 3);
    let file = LodtFile::open(&path).unwrap();
    let docs = batches[1].get("tokens").unwrap().top_level_rows();
    let sentences = batches[1]
        .get("tokens")
        .unwrap()
        .lod()
        .num_sequences(1)
        .unwrap();
    let at = |batch, row| RowLocation { batch, row };
    let ok = at(0, 0);

    let e = file.take(&[ok, at(1, docs)]).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "row {docs} of batch 1: the batch has {docs} top-level rows"
        )),
        "{e}"
    );
    let e = file
        .take_level(1, &[ok, at(1, sentences)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "row {sentences} of batch 1: the batch has {sentences} sequences at LoD level 1"
        )),
        "{e}"
    );
    let e = file.take(&[ok, at(3, 0)]).unwrap_err().to_string();
    assert!(e.contains('3'), "{e}");
    let e = file.prefetch(1, &[at(7, 0)]).unwrap_err().to_string();
    assert!(e.contains('7'), "{e}");
    // A level the tensors do not have.
    let e = file.take_level(2, &[ok]).unwrap_err().to_string();
    assert!(e.contains('2'), "{e}");
    // The last item in range is fine, and nothing taken is a batch of no rows.
    let got = file.take_level(1, &[at(1, sentences - 1)]).unwrap();
    assert_eq!(got.get("tokens").unwrap().top_level_rows(), 1);
    let none = file.take_level(1, &[]).unwrap();
    assert_eq!(none.get("emb").unwrap().top_level_rows(), 0);
    assert_eq!(none.get("emb").unwrap().shape(), &[0, 4]);
}

#[test]
fn tensors_with_other_sequence_counts_at_the_level_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.lodt");
    let a = LodTensor::from_vec(
        vec![1u8, 2, 3],
        vec![3],
        Lod::try_from_lengths(&[vec![1, 1], vec![1, 2]]).unwrap(),
    )
    .unwrap();
    let b = LodTensor::from_vec(
        vec![1u8, 2, 3],
        vec![3],
        Lod::try_from_lengths(&[vec![3], vec![1, 1, 1]]).unwrap(),
    )
    .unwrap();
    format::save_batch(
        &path,
        &Batch::try_from_tensors([("a", a), ("b", b)]).unwrap(),
    )
    .unwrap();
    let file = LodtFile::open(&path).unwrap();
    let e = file
        .take_level(1, &[RowLocation { batch: 0, row: 0 }])
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"b\" has 3 sequences at LoD level 1"), "{e}");
    // At level 0: 2 documents against 1.
    let e = file
        .take(&[RowLocation { batch: 0, row: 0 }])
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"b\" has 1 top-level rows"), "{e}");
}
