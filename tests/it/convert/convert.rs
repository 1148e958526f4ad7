//! `lodt::convert`: every pair of formats, through the library, against the
//! PaddlePaddle and pyarrow fixtures.

use lodt::convert::{ConvertError, ConvertOptions, Format, convert};
use lodt::{Batch, LodtFile};
use std::path::Path;

fn read_all(path: &Path, options: &ConvertOptions) -> Vec<Batch> {
    Format::from_path(path)
        .unwrap()
        .open_reader(path, options)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn names(list: &str) -> ConvertOptions {
    ConvertOptions {
        names: Some(list.split(',').map(String::from).collect()),
        ..Default::default()
    }
}

const PARAMS: &str = "tests/data/paddle/combined.pdparams";
const PARAM_NAMES: &str = "a,b,c,d,e,f,g,h";

#[test]
fn paddle_params_survive_every_format_and_come_back_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let original = read_all(Path::new(PARAMS), &names(PARAM_NAMES));
    assert_eq!(original.len(), 1);
    assert_eq!(original[0].len(), 8);

    let lodt = dir.path().join("params.lodt");
    let stats = convert(PARAMS, &lodt, &names(PARAM_NAMES), |_| {}).unwrap();
    assert_eq!((stats.batches, stats.tensors), (1, 8));
    assert_eq!(
        LodtFile::open(&lodt).unwrap().read_batch(0).unwrap(),
        original[0]
    );

    let back = dir.path().join("params.pdparams");
    convert(&lodt, &back, &ConvertOptions::default(), |_| {}).unwrap();
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(PARAMS).unwrap(),
        "lodt -> Paddle must give Paddle's exact bytes"
    );
}

#[test]
fn single_paddle_tensor_round_trips_through_lodt() {
    let dir = tempfile::tempdir().unwrap();
    let src = "tests/data/paddle/seed_2level_int64.pdtensor";
    let lodt = dir.path().join("x.lodt");
    convert(src, &lodt, &ConvertOptions::default(), |_| {}).unwrap();
    let batch = LodtFile::open(&lodt).unwrap().read_batch(0).unwrap();
    let t = batch.get("tensor0").unwrap();
    assert_eq!(
        t.lod().to_offsets(),
        [vec![0, 3, 4, 6], vec![0, 3, 5, 9, 10, 12, 15]]
    );
    let back = dir.path().join("x.pdtensor");
    convert(&lodt, &back, &ConvertOptions::default(), |_| {}).unwrap();
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(src).unwrap());
}

#[test]
fn a_pdtensor_output_needs_exactly_one_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let err = convert(
        PARAMS,
        dir.path().join("x.pdtensor"),
        &names(PARAM_NAMES),
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, ConvertError::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("exactly one tensor"), "{err}");
}

#[test]
fn names_are_only_for_paddle_inputs_and_must_match_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let err = convert(PARAMS, dir.path().join("x.lodt"), &names("a,b"), |_| {}).unwrap_err();
    assert!(matches!(err, ConvertError::Paddle(_)), "{err}");
    let lodt = dir.path().join("ok.lodt");
    convert(PARAMS, &lodt, &ConvertOptions::default(), |_| {}).unwrap();
    let err = convert(&lodt, dir.path().join("y.lodt"), &names("a"), |_| {}).unwrap_err();
    assert!(matches!(err, ConvertError::Unsupported(_)), "{err}");
}

#[test]
fn unknown_extensions_are_refused() {
    let err = Format::from_path("data.csv").unwrap_err();
    assert!(matches!(err, ConvertError::UnknownExtension { .. }));
    assert!(convert("a.csv", "b.lodt", &Default::default(), |_| {}).is_err());
}

#[cfg(feature = "parquet")]
mod arrow_formats {
    use super::*;

    /// Every pyarrow fixture, through lodt, into every Arrow format and back.
    #[test]
    fn pyarrow_fixtures_round_trip_through_every_format() {
        let dir = tempfile::tempdir().unwrap();
        for src in [
            "tests/data/arrow/batch0.parquet",
            "tests/data/arrow/batch1.arrow",
        ] {
            let original = read_all(Path::new(src), &Default::default());
            let lodt = dir.path().join("a.lodt");
            convert(src, &lodt, &Default::default(), |_| {}).unwrap();
            for ext in ["parquet", "arrow", "arrows", "lodt"] {
                let out = dir.path().join(format!("b.{ext}"));
                let mut seen = 0;
                convert(&lodt, &out, &Default::default(), |s| seen = s.batches).unwrap();
                assert_eq!(seen, original.len() as u64);
                let again = read_all(&out, &Default::default());
                assert_eq!(again.len(), original.len(), "{src} -> {ext}");
                for (a, b) in again.iter().zip(&original) {
                    for (name, t) in b.iter() {
                        assert_eq!(a.get(name).unwrap(), t, "{src} -> {ext}: {name}");
                    }
                }
            }
        }
    }

    #[test]
    fn batch_rows_regroups_top_level_rows() {
        let dir = tempfile::tempdir().unwrap();
        // Two pyarrow batches of 3 and 2 rows in one lodt file.
        let lodt = dir.path().join("two.lodt");
        let mut batches = read_all(
            Path::new("tests/data/arrow/batch0.arrow"),
            &Default::default(),
        );
        batches.extend(read_all(
            Path::new("tests/data/arrow/batch1.arrow"),
            &Default::default(),
        ));
        let writer = Format::Lodt
            .create_writer(&lodt, Default::default(), &Default::default())
            .unwrap();
        lodt::batch::write_all(writer, batches.into_iter().map(Ok::<_, ConvertError>)).unwrap();
        let out = dir.path().join("regrouped.parquet");
        let options = ConvertOptions {
            batch_rows: Some(2),
            ..Default::default()
        };
        convert(&lodt, &out, &options, |_| {}).unwrap();
        let regrouped = read_all(&out, &Default::default());
        let rows: Vec<usize> = regrouped
            .iter()
            .map(|b| b.get("labels").unwrap().lod().num_sequences(0).unwrap())
            .collect();
        assert_eq!(rows, vec![2, 2, 1]);
        let words = regrouped[1].get("words").unwrap();
        // Rows 2 and 3 overall: batch0's last article and batch1's first.
        assert_eq!(words.lod().to_lengths(), vec![vec![2, 2], vec![2, 3, 1, 0]]);
        assert_eq!(words.as_slice::<i64>().unwrap(), &[-20, 85, 9, -86, 8, 94]);
    }
}

#[test]
fn empty_parquet_tables_written_by_pyarrow_convert_to_zero_batches() {
    // pyarrow writes an empty table as one row group of 0 rows
    // (tests/data/empty/make_empty.py); it once divided by zero.
    let dir = tempfile::tempdir().unwrap();
    for name in ["int64", "list_and_float", "fixed_zstd"] {
        let input = Path::new("tests/data/empty").join(format!("{name}.parquet"));
        let reader =
            lodt::arrow::parquet::ParquetReader::open(&input, &Default::default()).unwrap();
        assert_eq!(reader.num_row_groups(), 1, "{name}");
        let counted = Format::from_path(&input)
            .unwrap()
            .open_reader(&input, &ConvertOptions::default())
            .unwrap()
            .num_batches();
        assert_eq!(counted, Some(0), "{name}");
        assert!(
            read_all(&input, &ConvertOptions::default()).is_empty(),
            "{name}"
        );
        for ext in ["lodt", "parquet", "arrow"] {
            let out = dir.path().join(format!("{name}.{ext}"));
            let stats = convert(&input, &out, &ConvertOptions::default(), |_| {}).unwrap();
            assert_eq!(stats.batches, 0, "{name} -> {ext}");
            assert!(
                read_all(&out, &ConvertOptions::default()).is_empty(),
                "{name}.{ext}"
            );
        }
        // With one-row batches too (the row count is the divisor).
        let small = ConvertOptions {
            batch_rows: Some(1),
            ..Default::default()
        };
        let out = dir.path().join(format!("{name}.small.lodt"));
        convert(&input, &out, &small, |_| {}).unwrap();
        assert_eq!(LodtFile::open(&out).unwrap().num_batches(), 0);
    }
}
