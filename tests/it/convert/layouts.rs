//! Directories other tools write, read as one input by their layout:
//! Hugging Face's `save_to_disk` (Arrow IPC streams listed by `state.json`)
//! and a directory of Parquet files.

use lodt::batch::write_all;
use lodt::convert::{ConvertError, ConvertOptions, Endpoint, Format, Layout, convert};
use lodt::{Batch, Lod, LodTensor};
use std::path::Path;

fn batch(first: i64, rows: usize) -> Batch {
    let lengths: Vec<u64> = (0..rows as u64).map(|i| 1 + i % 3).collect();
    let n = lengths.iter().sum::<u64>() as usize;
    let ids = LodTensor::from_vec(
        (first..first + n as i64).collect(),
        vec![n],
        Lod::try_from_lengths(&[lengths]).unwrap(),
    )
    .unwrap();
    let label = LodTensor::from_vec(vec![first as f32; rows], vec![rows], Lod::empty()).unwrap();
    Batch::try_from_tensors([("input_ids", ids), ("label", label)]).unwrap()
}

fn write(format: Format, path: &Path, batches: &[Batch]) {
    let writer = format
        .create_writer(path, Default::default(), &ConvertOptions::default())
        .unwrap();
    write_all(writer, batches.iter().cloned().map(Ok::<_, ConvertError>)).unwrap();
}

fn read_lodt(path: &Path) -> Vec<Batch> {
    let f = lodt::LodtFile::open(path).unwrap();
    (0..f.num_batches())
        .map(|k| f.read_batch(k).unwrap())
        .collect()
}

#[test]
fn a_save_to_disk_directory_reads_its_files_in_the_order_state_json_lists() {
    let dir = tempfile::tempdir().unwrap();
    let hf = dir.path().join("hf");
    std::fs::create_dir(&hf).unwrap();
    let (a, b) = ([batch(0, 3), batch(100, 2)], [batch(200, 4)]);
    write(
        Format::ArrowStream,
        &hf.join("data-00001-of-00002.arrow"),
        &a,
    );
    write(
        Format::ArrowStream,
        &hf.join("data-00000-of-00002.arrow"),
        &b,
    );
    std::fs::write(
        hf.join("state.json"),
        r#"{"_data_files": [{"filename": "data-00000-of-00002.arrow"}, {"filename": "data-00001-of-00002.arrow"}], "_split": null}"#,
    )
    .unwrap();
    std::fs::write(hf.join("dataset_info.json"), r#"{"features": {}}"#).unwrap();
    assert_eq!(
        Endpoint::input(&hf).unwrap(),
        Endpoint::Layout(Layout::HuggingFace)
    );
    let out = dir.path().join("out.lodt");
    let done = convert(&hf, &out, &ConvertOptions::default(), |_| {}).unwrap();
    assert_eq!(done.batches, 3);
    let back = read_lodt(&out);
    let expected: Vec<&Batch> = b.iter().chain(&a).collect();
    for (got, want) in back.iter().zip(expected) {
        assert_eq!(got.get("input_ids"), want.get("input_ids"));
        assert_eq!(got.get("label"), want.get("label"));
    }
    // Columns and re-batching apply to the whole.
    let options = ConvertOptions {
        columns: Some(vec!["input_ids".into()]),
        batch_rows: Some(9),
        ..Default::default()
    };
    let out = dir.path().join("ids.lodt");
    convert(&hf, &out, &options, |_| {}).unwrap();
    let back = read_lodt(&out);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].len(), 1);
    assert_eq!(
        back[0]
            .get("input_ids")
            .unwrap()
            .lod()
            .num_sequences(0)
            .unwrap(),
        9
    );
}

#[test]
fn a_directory_of_parquet_files_is_one_input_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("pq");
    std::fs::create_dir(&pq).unwrap();
    write(Format::Parquet, &pq.join("part-1.parquet"), &[batch(50, 2)]);
    write(
        Format::Parquet,
        &pq.join("part-0.parquet"),
        &[batch(0, 3), batch(10, 1)],
    );
    std::fs::write(pq.join("_SUCCESS"), b"").unwrap();
    assert_eq!(Layout::detect(&pq), Some(Layout::ParquetFiles));
    let train = dir.path().join("train");
    convert(&pq, &train, &ConvertOptions::default(), |_| {}).unwrap();
    let ds = lodt::dataset::Dataset::open(&train).unwrap();
    assert_eq!(ds.num_sequences(), 6);
    let first = ds.sequence(0).unwrap();
    assert_eq!(
        first.get("label").unwrap().as_slice::<f32>().unwrap(),
        &[0.0]
    );
    let last = ds.sequence(5).unwrap();
    assert_eq!(
        last.get("label").unwrap().as_slice::<f32>().unwrap(),
        &[50.0]
    );
}

#[test]
fn a_bad_state_json_or_a_missing_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let hf = dir.path();
    std::fs::write(hf.join("dataset_info.json"), "{}").unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("x.lodt");
    for (state, needle) in [
        (
            r#"{"_data_files": [{"filename": "../etc/passwd"}]}"#,
            "not a path",
        ),
        (
            r#"{"_data_files": [{"filename": "/abs.arrow"}]}"#,
            "not a path",
        ),
        (r#"{"files": []}"#, "no _data_files list"),
        (r#"{"_data_files": [{"name": 3}]}"#, "the entry"),
        ("not json", "no JSON"),
        (
            r#"{"_data_files": [{"filename": "gone.arrow"}]}"#,
            "gone.arrow",
        ),
    ] {
        std::fs::write(hf.join("state.json"), state).unwrap();
        let err = convert(hf, &target, &ConvertOptions::default(), |_| {})
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(needle), "{state}: {err}");
        assert!(!target.exists());
    }
}

#[test]
fn layouts_but_a_parquet_directory_are_inputs_only() {
    let dir = tempfile::tempdir().unwrap();
    for layout in [Layout::HuggingFace, Layout::Mds] {
        let err = Endpoint::Layout(layout)
            .create_writer(
                dir.path().join("o"),
                Default::default(),
                &ConvertOptions::default(),
            )
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("is read, not written") && err.contains("parquet-dir"),
            "{err}"
        );
        assert!(!dir.path().join("o").exists());
    }
    // A directory of Parquet files is written (tests/it/convert/parquet_dir.rs).
    assert!(
        Endpoint::Layout(Layout::ParquetFiles)
            .create_writer(
                dir.path().join("o"),
                Default::default(),
                &ConvertOptions::default()
            )
            .is_ok()
    );
    // A lodt dataset's directory is never taken for a layout.
    let mut w =
        lodt::dataset::DatasetWriter::create(dir.path().join("ds"), Default::default()).unwrap();
    w.write(&batch(0, 1)).unwrap();
    w.finish().unwrap();
    std::fs::write(dir.path().join("ds/extra.parquet"), b"").unwrap();
    assert_eq!(
        Endpoint::input(dir.path().join("ds")).unwrap(),
        Endpoint::Dataset
    );
}
