//! Every pair of formats in `convert::Format::ALL`: a small multi-batch
//! input, cut down to what both formats can hold (their `Capabilities`),
//! is written in the first format, converted to the second, and read back
//! equal. Data-driven: a new format in the list is covered with no change
//! here.

use lodt::batch::{BatchReader, BatchWriter, write_all};
use lodt::convert::{Capabilities, ConvertError, ConvertOptions, Format, MetadataScope, convert};
use lodt::{Batch, Lod, LodTensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn available() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.is_available())
        .collect()
}

/// What both formats hold.
fn meet(a: Capabilities, b: Capabilities) -> Capabilities {
    let min = |x: Option<usize>, y: Option<usize>| match (x, y) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    };
    let scope = |s: MetadataScope| match s {
        MetadataScope::Dropped => 0,
        MetadataScope::PerFile => 1,
        _ => 2,
    };
    let mut both = a;
    both.max_batches = min(a.max_batches, b.max_batches);
    both.tensors_per_batch = min(a.tensors_per_batch, b.tensors_per_batch);
    both.tensor_names = a.tensor_names && b.tensor_names;
    if scope(b.batch_metadata) < scope(a.batch_metadata) {
        both.batch_metadata = b.batch_metadata;
    }
    both.file_metadata = a.file_metadata && b.file_metadata;
    both.empty_batches = a.empty_batches && b.empty_batches;
    both.all_dtypes = a.all_dtypes && b.all_dtypes;
    both.ragged_batches = a.ragged_batches && b.ragged_batches;
    both.mixed_schemas = a.mixed_schemas && b.mixed_schemas;
    both.element_shapes = a.element_shapes && b.element_shapes;
    both.keeps_batches = a.keeps_batches && b.keeps_batches;
    both
}

/// Batch `k` of the full input: `words` (int64, element shape [2], a
/// 2-level LoD; scalar rows where element shapes are not held) and `labels` (float32, one per article), with `rows`
/// articles; `ids` (uint32) where every dtype is held; a `bias` of another
/// row count where batches may be ragged; an `extra` tensor in odd batches
/// where schemas may change between batches.
fn batch(k: usize, rows: usize, can: &Capabilities) -> Batch {
    let articles: Vec<u64> = (0..rows as u64).map(|i| 1 + (i + k as u64) % 2).collect();
    let sentences: Vec<u64> = (0..articles.iter().sum::<u64>())
        .map(|i| 1 + (i * 3 + k as u64) % 4)
        .collect();
    let words = sentences.iter().sum::<u64>() as usize;
    let lod = if rows == 0 {
        Lod::try_from_stored(vec![vec![0], vec![0]]).unwrap()
    } else {
        Lod::try_from_lengths(&[articles, sentences]).unwrap()
    };
    let first = (k * 1000) as i64;
    let (width, shape) = match can.element_shapes {
        true => (2, vec![words, 2]),
        false => (1, vec![words]),
    };
    let mut tensors = vec![
        LodTensor::from_vec((first..first + width * words as i64).collect(), shape, lod).unwrap(),
        LodTensor::from_vec(
            (0..rows).map(|i| i as f32 + k as f32 / 4.0).collect(),
            vec![rows],
            Lod::empty(),
        )
        .unwrap(),
    ];
    let mut names = vec!["words", "labels"];
    if can.all_dtypes {
        let ids = (0..rows as u32).map(|i| u32::MAX - i).collect();
        tensors.push(LodTensor::from_vec(ids, vec![rows], Lod::empty()).unwrap());
        names.push("ids");
    }
    if can.ragged_batches {
        let bias = LodTensor::from_vec(vec![0.5f64; rows + 3], vec![rows + 3], Lod::empty());
        tensors.push(bias.unwrap());
        names.push("bias");
    }
    if can.mixed_schemas && k % 2 == 1 {
        tensors.push(LodTensor::from_vec(vec![k as i16], vec![1], Lod::empty()).unwrap());
        names.push("extra");
    }
    if let Some(n) = can.tensors_per_batch {
        tensors.truncate(n);
    }
    let mut out = Batch::new();
    for (i, tensor) in tensors.into_iter().enumerate() {
        let name = if can.tensor_names {
            names[i].to_string()
        } else {
            format!("tensor{i}")
        };
        out.push(name, tensor).unwrap();
    }
    let metadata = out.metadata_mut();
    match can.batch_metadata {
        MetadataScope::PerBatch => {
            metadata.insert("step".into(), k.to_string());
        }
        MetadataScope::PerFile => {
            metadata.insert("split".into(), "train".into());
        }
        _ => {}
    }
    out
}

/// The input both formats can hold: 4 batches (one of them empty where
/// empty batches are kept), fewer where a format holds fewer.
fn input(can: &Capabilities) -> Vec<Batch> {
    let mut rows = vec![3, 2, 0, 4];
    if !can.empty_batches {
        rows.retain(|&r| r > 0);
    }
    if let Some(max) = can.max_batches {
        rows.truncate(max);
    }
    // Batches regrouped on reading: one batch reads back as itself.
    if !can.keeps_batches {
        rows.truncate(1);
    }
    rows.iter()
        .enumerate()
        .map(|(k, &r)| batch(k, r, can))
        .collect()
}

fn file_metadata() -> BTreeMap<String, String> {
    [("source".to_string(), "matrix".to_string())].into()
}

/// `batch` with its tensors named as `format` names unnamed tensors.
fn unnamed(format: Format, batch: &Batch) -> Batch {
    let mut out = Batch::new();
    for (i, (_, t)) in batch.iter().enumerate() {
        out.push(format.unnamed_tensor(i), t.clone()).unwrap();
    }
    *out.metadata_mut() = batch.metadata().clone();
    out
}

fn path(dir: &Path, name: &str, format: Format) -> PathBuf {
    dir.join(format!("{name}.{}", format.extensions()[0]))
}

fn write(format: Format, path: &Path, batches: &[Batch]) {
    let writer = format
        .create_writer(path, file_metadata(), &ConvertOptions::default())
        .unwrap();
    let (_, stats) = write_all(writer, batches.iter().cloned().map(Ok::<_, ConvertError>))
        .unwrap_or_else(|e| panic!("writing {}: {e}", format.name()));
    assert_eq!(stats.batches, batches.len() as u64);
}

/// Reads `path` back and checks it against `expected`, through iteration,
/// the up-front batch count and, where the reader has it, random access.
fn check(format: Format, path: &Path, expected: &[Batch], what: &str) {
    // A format without names names its tensors its own way.
    let renamed: Vec<Batch>;
    let expected = if format.capabilities().tensor_names {
        expected
    } else {
        renamed = expected.iter().map(|b| unnamed(format, b)).collect();
        &renamed[..]
    };
    let mut reader = format
        .open_reader(path, &ConvertOptions::default())
        .unwrap();
    if let Some(n) = reader.num_batches() {
        assert_eq!(n, expected.len(), "{what}: num_batches");
    }
    if reader.random_access() {
        for (k, batch) in expected.iter().enumerate().rev() {
            let read = reader.read_batch(k).unwrap().unwrap();
            assert_eq!(&read, batch, "{what}: batch {k} at random");
        }
        assert!(reader.read_batch(expected.len()).unwrap().is_err());
    }
    let back: Vec<Batch> = reader
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(back.len(), expected.len(), "{what}");
    for (k, (a, b)) in back.iter().zip(expected).enumerate() {
        assert_eq!(a, b, "{what}: batch {k}");
    }
}

#[test]
fn every_pair_of_formats_converts_and_reads_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let formats = available();
    let mut pairs = 0;
    for &from in &formats {
        for &to in &formats {
            let can = meet(from.capabilities(), to.capabilities());
            let batches = input(&can);
            let what = format!("{} -> {}", from.name(), to.name());
            let src = path(dir.path(), &format!("in-{pairs}"), from);
            let dst = path(dir.path(), &format!("out-{pairs}"), to);
            write(from, &src, &batches);
            check(from, &src, &batches, &format!("{what} (input)"));
            let mut progress = Vec::new();
            let stats = convert(&src, &dst, &ConvertOptions::default(), |s| {
                progress.push(s.batches)
            })
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(stats.batches, batches.len() as u64, "{what}");
            let tensors: usize = batches.iter().map(Batch::len).sum();
            assert_eq!(stats.tensors, tensors as u64, "{what}");
            assert_eq!(progress, (1..=batches.len() as u64).collect::<Vec<_>>());
            // The output holds the names the input's reader gave.
            let read: Vec<Batch> = match from.capabilities().tensor_names {
                true => batches.clone(),
                false => batches.iter().map(|b| unnamed(from, b)).collect(),
            };
            check(to, &dst, &read, &what);
            // The input's file metadata is what the writer was given (where
            // the format has its own), and an output with file metadata of
            // its own keeps the input's.
            let given = from.open_reader(&src, &Default::default()).unwrap();
            if from.capabilities().file_metadata {
                assert_eq!(given.metadata(), file_metadata(), "{what}");
            }
            if to.capabilities().file_metadata {
                let kept = to.open_reader(&dst, &Default::default()).unwrap();
                assert_eq!(kept.metadata(), given.metadata(), "{what}");
            }
            pairs += 1;
        }
    }
    assert_eq!(pairs, formats.len() * formats.len());
    assert!(pairs >= 4, "at least .lodt and Paddle");
}

/// What a format cannot hold is refused as `Unsupported`, and the output is
/// left as it was (here: not created).
#[test]
fn what_a_format_cannot_hold_is_refused_before_the_output_exists() {
    let dir = tempfile::tempdir().unwrap();
    for format in available() {
        let can = format.capabilities();
        let out = path(dir.path(), "refused", format);
        if let Some(max) = can.max_batches {
            let src = dir.path().join(format!("many-{}.lodt", format.name()));
            let many: Vec<Batch> = (0..=max).map(|k| batch(k, 2, &can)).collect();
            write(Format::Lodt, &src, &many);
            let err = convert(&src, &out, &Default::default(), |_| {}).unwrap_err();
            assert!(matches!(err, ConvertError::Unsupported(_)), "{err}");
            assert!(!out.exists());
        }
        if let Some(n) = can.tensors_per_batch {
            let src = dir.path().join(format!("wide-{}.lodt", format.name()));
            let mut wider = can;
            wider.tensors_per_batch = None;
            let wide = batch(0, 2, &wider);
            assert_ne!(wide.len(), n);
            write(Format::Lodt, &src, &[wide]);
            let err = convert(&src, &out, &Default::default(), |_| {}).unwrap_err();
            assert!(matches!(err, ConvertError::Unsupported(_)), "{err}");
            assert!(err.to_string().contains("exactly"), "{err}");
            assert!(!out.exists());
        }
        let names = ConvertOptions {
            names: Some(vec!["a".into()]),
            ..Default::default()
        };
        let src = path(dir.path(), "named", format);
        write(format, &src, &input(&can)[..1]);
        let opened = format.open_reader(&src, &names);
        assert_eq!(
            matches!(opened, Err(ConvertError::Unsupported(_))),
            can.tensor_names,
            "{}: names are for formats that store none",
            format.name()
        );
    }
}

/// The writers of every format, behind the contract, refuse to go on once
/// finished.
#[test]
fn finished_writers_refuse_more() {
    let dir = tempfile::tempdir().unwrap();
    for format in available() {
        let can = format.capabilities();
        let out = path(dir.path(), "finished", format);
        let mut writer = format
            .create_writer(&out, Default::default(), &Default::default())
            .unwrap();
        let first = input(&can).remove(0);
        writer.write(&first).unwrap();
        writer.finish().unwrap();
        assert!(out.exists(), "{}", format.name());
        assert!(writer.write(&first).is_err(), "{}", format.name());
        assert!(writer.finish().is_err(), "{}", format.name());
    }
}
