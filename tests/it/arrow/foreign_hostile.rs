//! Corrupt Arrow IPC and Parquet input: every reader returns batches or
//! errors, and no panic of arrow-rs or parquet reaches the caller (issue 9).
//!
//! The sweeps flip bytes of small files and read each result through lodt's
//! readers inside `catch_unwind`: a panic that escapes lodt's API fails the
//! test. A panic that lodt contains (an `Error::Decode` whose message says the
//! decoder panicked) is counted too, and must not happen on these files: the
//! checks lodt runs before decoding should stop every flip first.
#![cfg(feature = "parquet")]

use lodt::arrow::ipc::{IpcFileReader, IpcStreamReader, write_ipc_stream};
use lodt::arrow::parquet::{ParquetReader, write_parquet};
use lodt::arrow::{ArrowError as Error, ArrowOptions, ArrowWriteOptions as WriteOptions};
use lodt::{Batch, Lod, LodTensor};
use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

fn data(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// What reading one input gave.
#[derive(Debug, Default)]
struct Outcome {
    batches: usize,
    errors: usize,
    /// Errors reporting a panic that lodt's boundary caught.
    contained: Vec<String>,
}

impl Outcome {
    fn add(&mut self, result: Result<Batch, Error>) {
        match result {
            Ok(batch) => {
                // Whatever decodes is a valid batch: every tensor's LoD and
                // storage agree (LodTensor's invariants), so slicing works.
                for (_, tensor) in batch.iter() {
                    let _ = tensor.as_bytes().len();
                    if tensor.lod().num_levels() > 0 {
                        assert!(tensor.branch(&[0]).is_ok() || tensor.top_level_rows() == 0);
                    }
                }
                self.batches += 1;
            }
            Err(e) => {
                if let Error::Decode { message, .. } = &e
                    && message.contains("panicked")
                {
                    self.contained.push(e.to_string());
                }
                self.errors += 1;
            }
        }
    }

    fn open_failed(e: Error) -> Self {
        let mut outcome = Outcome::default();
        outcome.add(Err(e));
        outcome
    }
}

fn read_ipc_file(bytes: &[u8]) -> Outcome {
    match IpcFileReader::try_new_named(Cursor::new(bytes), "x.arrow", &ArrowOptions::default()) {
        Ok(reader) => {
            let mut outcome = Outcome::default();
            reader.for_each(|b| outcome.add(b));
            outcome
        }
        Err(e) => Outcome::open_failed(e),
    }
}

fn read_ipc_stream(bytes: &[u8]) -> Outcome {
    match IpcStreamReader::try_new_named(bytes, "x.arrows", &ArrowOptions::default()) {
        Ok(reader) => {
            let mut outcome = Outcome::default();
            reader.for_each(|b| outcome.add(b));
            outcome
        }
        Err(e) => Outcome::open_failed(e),
    }
}

fn read_parquet(bytes: &[u8]) -> Outcome {
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    match ParquetReader::try_new_named(file, "x.parquet", &ArrowOptions::default()) {
        Ok(reader) => {
            let mut outcome = Outcome::default();
            reader.for_each(|b| outcome.add(b));
            outcome
        }
        Err(e) => Outcome::open_failed(e),
    }
}

/// Flips bytes of `good` (every `stride`-th byte, each with every mask) and
/// reads each result with `read` inside `catch_unwind`. Returns the outcomes
/// summed, and fails on the first panic that escapes.
fn sweep(what: &str, good: &[u8], stride: usize, read: fn(&[u8]) -> Outcome) -> Outcome {
    let clean = read(good);
    assert!(clean.batches > 0 && clean.errors == 0, "{what}: {clean:?}");
    let mut total = Outcome::default();
    for at in (0..good.len()).step_by(stride) {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut bad = good.to_vec();
            bad[at] ^= mask;
            let outcome = catch_unwind(AssertUnwindSafe(|| read(&bad)))
                .unwrap_or_else(|_| panic!("{what}: flipping byte {at} with {mask:#04x} panics"));
            total.batches += outcome.batches;
            total.errors += outcome.errors;
            total.contained.extend(
                outcome
                    .contained
                    .into_iter()
                    .map(|m| format!("byte {at} ^ {mask:#04x}: {m}")),
            );
        }
    }
    total
}

/// A batch of the shapes lodt writes: a 2-level int64 tensor, a 1-level
/// float32 tensor with an element shape, and a 0-level bool tensor.
fn sample_batch() -> Batch {
    let words = LodTensor::from_vec(
        (0..15i64).collect(),
        vec![15],
        Lod::try_from_lengths(&[vec![2, 1], vec![3, 2, 10]]).unwrap(),
    )
    .unwrap();
    let frames = LodTensor::from_vec(
        (0..12).map(|i| i as f32).collect(),
        vec![6, 2],
        Lod::try_from_lengths(&[vec![4, 2]]).unwrap(),
    )
    .unwrap();
    let labels = LodTensor::from_vec(vec![true, false], vec![2], Lod::empty()).unwrap();
    Batch::try_from_tensors([("words", words), ("frames", frames), ("labels", labels)]).unwrap()
}

#[test]
fn byte_flips_of_an_ipc_file_never_panic() {
    let good = std::fs::read(data("tests/data/arrow/batch0.arrow")).unwrap();
    let total = sweep("batch0.arrow", &good, 1, read_ipc_file);
    assert!(total.errors > 0 && total.batches > 0, "{total:?}");
    assert!(total.contained.is_empty(), "{:#?}", total.contained);
}

#[test]
fn byte_flips_of_an_ipc_stream_never_panic() {
    let (good, _) = write_ipc_stream(
        Vec::new(),
        [Ok::<_, lodt::Error>(sample_batch())],
        &WriteOptions::default(),
    )
    .unwrap();
    let total = sweep("sample.arrows", &good, 1, read_ipc_stream);
    assert!(total.errors > 0 && total.batches > 0, "{total:?}");
    assert!(total.contained.is_empty(), "{:#?}", total.contained);
}

#[test]
fn byte_flips_of_parquet_files_never_panic() {
    let pyarrow = std::fs::read(data("tests/data/arrow/batch0.parquet")).unwrap();
    let (ours, _) = write_parquet(
        Vec::new(),
        [Ok::<_, lodt::Error>(sample_batch())],
        &WriteOptions::default(),
    )
    .unwrap();
    // Flips that turn a data page's encoding into RLE_DICTIONARY in a column
    // chunk with no dictionary page, which parquet 60 meets with a panic
    // (`Decoder for dict should have been set`), and flips that turn a footer
    // field into a Thrift list of booleans, are refused from the page headers
    // and the footer before parquet reads them: no panic is left to contain.
    for (what, good) in [("batch0.parquet", pyarrow), ("sample.parquet", ours)] {
        let total = sweep(what, &good, 1, read_parquet);
        assert!(total.errors > 0 && total.batches > 0, "{what}: {total:?}");
        assert!(total.contained.is_empty(), "{what}: {:#?}", total.contained);
    }
}

// ---------------------------------------------------------------------------
// The files of the issue, through the library and the CLI
// ---------------------------------------------------------------------------

fn expect_decode(err: Error, file: &str, section: &str, message: &str) {
    match &err {
        Error::Decode {
            file: f,
            section: s,
            message: m,
        } => {
            assert_eq!((f.as_str(), s.as_str()), (file, section), "{err}");
            assert_eq!(m, message, "{err}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn the_repro_files_give_errors_naming_file_and_section() {
    // A flipped byte moves a buffer of the record batch out of its body:
    // arrow-ipc 60 slices it anyway and panics; lodt checks it first.
    let path = "tests/data/repro/panic_ipc.arrow";
    let file = std::fs::File::open(data(path)).unwrap();
    let mut reader = IpcFileReader::try_new_named(file, path, &ArrowOptions::default()).unwrap();
    let err = reader.next().unwrap().unwrap_err();
    expect_decode(
        err,
        path,
        "record batch 0",
        "buffer 0 (offset 65536, 0 bytes) lies outside the 320-byte body",
    );
    assert!(reader.next().is_none());

    // A flipped byte makes a column chunk's size negative: parquet 60 asserts
    // it is not; lodt checks the footer first.
    let path = "tests/data/repro/panic_pq.parquet";
    let err = ParquetReader::open(data(path), &ArrowOptions::default())
        .err()
        .unwrap();
    expect_decode(
        err,
        &data(path).display().to_string(),
        "row group 0 column \"words.list.element.list.element\"",
        "the column chunk (offset 4, data pages at 93, -180 bytes) lies outside the 1818-byte file",
    );

    // A panic lodt cannot foresee is contained and reported the same way.
    // A data page encoded RLE_DICTIONARY in a chunk with no dictionary page:
    // parquet panics (`Decoder for dict should have been set`); lodt finds it
    // in the page headers first.
    let path = "tests/data/repro/dict_page_missing.parquet";
    let reader = ParquetReader::open(data(path), &ArrowOptions::default()).unwrap();
    let results: Vec<_> = reader.collect();
    assert_eq!(results.len(), 1);
    let err = results.into_iter().next().unwrap().unwrap_err();
    expect_decode(
        err,
        &data(path).display().to_string(),
        "row group 0 column \"words.list.element.list.element\"",
        "the page header at byte 93: a data page encoded RLE_DICTIONARY, and no dictionary page before it in the column chunk",
    );
    // The same, with the field header of the page's `type` saying boolean
    // (which has no bytes) and that of its `compressed_page_size` saying i16:
    // parquet reads a field it knows by its id, whatever type its header
    // gives, and so must lodt's walk (a case found by the parquet_reader fuzz
    // target, where parquet still panicked).
    let path = "tests/data/repro/dict_page_missing_field_types.parquet";
    let reader = ParquetReader::open(data(path), &ArrowOptions::default()).unwrap();
    let err = reader.into_iter().next().unwrap().unwrap_err();
    expect_decode(
        err,
        &data(path).display().to_string(),
        "row group 0 column \"words.list.element.list.element\"",
        "the page header at byte 93: a data page encoded RLE_DICTIONARY, and no dictionary page before it in the column chunk",
    );
}

/// A Parquet file with no rows whose schema nests `groups` groups (the root
/// included) over one int32 column, its footer written by hand in Thrift's
/// compact protocol.
/// Found by the `parquet_reader` fuzz target (a timeout): parquet skips the
/// fields of a footer or page header it does not know, and skips a boolean
/// in a Thrift list without reading it, so a list of 2^31 - 1 booleans cost
/// it 2^31 steps on no input (seconds per header, for a 4 KiB file of many
/// headers more than the fuzzer's 10 s). The files are `batch0.parquet` with
/// one field replaced by such a list: in the dictionary page header of the
/// first column chunk, and in the footer (in place of `created_by`).
#[test]
fn thrift_lists_of_booleans_in_parquet_headers_are_refused() {
    const MESSAGE: &str = "a Thrift list, set or map of 2147483647 booleans (no field of a valid file is one; parquet would skip it without reading it)";
    let path = data("tests/data/repro/bool_list_page_header.parquet");
    let reader = ParquetReader::open(&path, &ArrowOptions::default()).unwrap();
    let results: Vec<_> = reader.collect();
    assert_eq!(results.len(), 1);
    let err = results.into_iter().next().unwrap().unwrap_err();
    expect_decode(
        err,
        &path.display().to_string(),
        "row group 0 column \"words.list.element.list.element\"",
        &format!("the page header at byte 4: {MESSAGE}"),
    );

    let path = data("tests/data/repro/bool_list_footer.parquet");
    let err = open_err(&path);
    expect_decode(err, &path.display().to_string(), "Parquet footer", MESSAGE);

    // A list of booleans where only a walk by field ids finds one: `version`
    // (field 1) claims to be 7 bytes of binary, which a walk by header types
    // skips, but parquet reads the 7 as a varint and then skips field 16, a
    // list of 2^31 - 1 booleans.
    let footer = [0x18, 0x07, 0xF9, 0xF1, 0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0x00];
    let file = parquet_of_footer(&footer);
    let err = match read_parquet_file(&file) {
        Err(e) => e,
        Ok(_) => panic!("a footer of a hidden boolean list opened"),
    };
    expect_decode(err, "x.parquet", "Parquet footer", MESSAGE);

    // The file they were made from reads.
    let good = ParquetReader::open(
        data("tests/data/arrow/batch0.parquet"),
        &ArrowOptions::default(),
    )
    .unwrap();
    assert_eq!(good.map(|b| b.unwrap().len()).collect::<Vec<_>>(), vec![3]);
}

/// Found by the `parquet_reader` fuzz target (a timeout): parquet skips the
/// Thrift bytes of a page header with `io::copy`, which stops quietly at the
/// end of the file, so a header field holding a list of 2^31 - 1 doubles
/// (here in the first page header of `batch0.parquet`) cost it 2^31 empty
/// reads once the file had ended. lodt gives parquet a file whose end is an
/// error, so the first read past it fails the header.
#[test]
fn a_page_header_running_past_the_end_of_the_file_is_an_error() {
    let path = data("tests/data/repro/double_list_past_eof.parquet");
    let reader = ParquetReader::open(&path, &ArrowOptions::default()).unwrap();
    let results: Vec<_> = reader.collect();
    assert_eq!(results.len(), 1);
    match results.into_iter().next().unwrap() {
        Err(Error::Decode {
            file,
            section,
            message,
        }) => {
            assert_eq!(
                (file, section.as_str()),
                (path.display().to_string(), "row group 0")
            );
            assert!(
                message.contains("a page header runs past the end of the file"),
                "{message}"
            );
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

/// Found by the `parquet_reader` fuzz target (a contained panic): parquet
/// unwraps the header a data page's type names (`PageMetadata::try_from`).
/// The file is `dict_page_missing.parquet` with the field header of its data
/// page's `data_page_header` (5) changed, so the page claims type
/// `DATA_PAGE` and has no such header: to field 15, which parquet does not
/// know, and to field 6 with a map's type. parquet reads field 6,
/// `index_page_header`, as a struct by its id whatever type its header
/// gives; the walk had skimmed it as a map and stopped where parquet went on
/// (how the sixth campaign's two `*_past_the_checks.parquet` got past it).
#[test]
fn a_data_page_without_its_header_is_refused() {
    // The page header at byte 93: type 0, two sizes, then field 5 (a struct
    // two ids on: 0x2c). 0xcc is a struct twelve ids on (field 15); 0x3b a
    // map three ids on (field 6).
    for (field_header, name) in [(0xcc, "field_15"), (0x3b, "index_page_header_as_a_map")] {
        let mut bytes = std::fs::read(data("tests/data/repro/dict_page_missing.parquet")).unwrap();
        assert_eq!(&bytes[93..100], &[0x15, 0x00, 0x15, 0x32, 0x15, 0x36, 0x2c]);
        bytes[99] = field_header;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{name}.parquet"));
        std::fs::write(&path, &bytes).unwrap();
        let err = ParquetReader::open(&path, &ArrowOptions::default())
            .unwrap()
            .next()
            .expect("a first batch")
            .unwrap_err();
        expect_decode(
            err,
            &path.display().to_string(),
            "row group 0 column \"words.list.element.list.element\"",
            "the page header at byte 93: a data page without its data_page_header",
        );
    }
}

/// Found by the `convert` fuzz target (an OOM): parquet sizes a vector by a
/// schema element's `num_children` before reading them, so a count of about
/// 425 million asked for 3.4 GB. lodt checks each count against the schema
/// elements that follow before parquet decodes the footer.
#[test]
fn a_schema_group_with_more_children_than_the_schema_holds_is_refused() {
    let path = data("tests/data/repro/huge_num_children.parquet");
    let err = open_err(&path);
    match &err {
        Error::Decode {
            file,
            section,
            message,
        } => {
            assert_eq!(
                (file.as_str(), section.as_str()),
                (path.display().to_string().as_str(), "Parquet footer")
            );
            assert!(message.starts_with("schema element "), "{err}");
            assert!(message.contains(" children, and "), "{err}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

/// Found by the `parquet_reader` fuzz target (an OOM: 5.4 GB asked for by
/// parquet's `schema_from_array_helper`). parquet reads a field of the
/// footer it knows by its id, whatever type the field header gives it, so a
/// walk by the header types found no schema where parquet read one. lodt
/// reads the footer as parquet does.
#[test]
fn a_schema_behind_a_mistyped_field_is_checked_as_parquet_reads_it() {
    let path = data("tests/data/repro/schema_behind_mistyped_field.parquet");
    let err = open_err(&path);
    expect_decode(
        err,
        &path.display().to_string(),
        "Parquet footer",
        "schema element 12 has 675454979 children, and 1 elements follow it",
    );

    // The same trick, made by hand: `version` (field 1) claims to be a
    // string of 2 bytes, which a walk by types skips (the schema's list
    // header), but parquet reads it as the varint 0x02, then the schema,
    // whose group claims 2^28 children (2 GiB of pointers).
    let mut footer = vec![0x18, 0x02, 0x19, 0x3C]; // 1: "binary" 2; 2: 3 structs
    footer.extend([0x48, 0x01, b'r', 0x15, 0x02, 0x00]); // root "r", 1 child
    footer.extend([
        0x35, 0x00, 0x18, 0x01, b'g', 0x15, 0x80, 0x80, 0x80, 0x80, 0x02, 0x00,
    ]);
    footer.extend([0x15, 0x02, 0x25, 0x00, 0x18, 0x01, b'x', 0x00]); // INT32 "x"
    footer.extend([0x16, 0x00, 0x19, 0x0C, 0x00]); // 3: num_rows 0, 4: no row groups
    let file = parquet_of_footer(&footer);
    let err = match read_parquet_file(&file) {
        Err(e) => e,
        Ok(_) => panic!("a group of 2^28 children opened"),
    };
    expect_decode(
        err,
        "x.parquet",
        "Parquet footer",
        "schema element 1 has 268435456 children, and 1 elements follow it",
    );
}

/// A Parquet file of no data pages: the magic, `footer`, its length, the magic.
fn parquet_of_footer(footer: &[u8]) -> Vec<u8> {
    let mut file = b"PAR1".to_vec();
    file.extend(footer);
    file.extend((footer.len() as u32).to_le_bytes());
    file.extend(b"PAR1");
    file
}

/// The error opening the Parquet file at `path` gives.
fn open_err(path: &std::path::Path) -> Error {
    match ParquetReader::open(path, &ArrowOptions::default()) {
        Err(e) => e,
        Ok(_) => panic!("{} opened", path.display()),
    }
}

fn nested_schema_parquet(groups: usize) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8 & 0x7F) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut footer = vec![0x15, 0x02]; // 1: version = 1
    footer.extend([0x19, 0xFC]); // 2: schema, a list of structs
    varint(&mut footer, groups as u64 + 1);
    footer.extend([0x48, 0x01, b'r', 0x15, 0x02, 0x00]); // the root: name "r", 1 child
    for _ in 1..groups {
        // REQUIRED, name "g", num_children 1
        footer.extend([0x35, 0x00, 0x18, 0x01, b'g', 0x15, 0x02, 0x00]);
    }
    footer.extend([0x15, 0x02, 0x25, 0x00, 0x18, 0x01, b'x', 0x00]); // INT32, REQUIRED, "x"
    footer.extend([0x16, 0x00, 0x19, 0x0C, 0x00]); // 3: num_rows 0, 4: no row groups
    parquet_of_footer(&footer)
}

#[test]
fn parquet_schemas_nested_too_deep_for_the_stack_are_refused() {
    // parquet 60 builds the schema tree by recursion: 5,000 nested groups
    // (a 30 KiB footer) overflow the stack, an abort nothing can catch.
    let err = match read_parquet_file(&nested_schema_parquet(5000)) {
        Err(e) => e,
        Ok(_) => panic!("a 5000-deep schema opened"),
    };
    expect_decode(
        err,
        "x.parquet",
        "Parquet footer",
        "the schema nests groups more than 128 deep (lodt's limit; pyarrow reads at most 100 levels)",
    );
    assert!(read_parquet_file(&nested_schema_parquet(129)).is_err());
    // Up to the limit, parquet decodes the schema (lodt then refuses the
    // struct column it finds, before decoding any data).
    let reader = read_parquet_file(&nested_schema_parquet(128)).unwrap();
    assert_eq!(reader.num_row_groups(), 0);
    assert_eq!(reader.count(), 0);
}

fn read_parquet_file(bytes: &[u8]) -> Result<ParquetReader, Error> {
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    ParquetReader::try_new_named(file, "x.parquet", &ArrowOptions::default())
}

// ---------------------------------------------------------------------------
// LoD depth: what cannot be read back is not written
// ---------------------------------------------------------------------------

/// A one-row int64 tensor (element shape `[2]` when `shaped`) with `levels`
/// LoD levels, each holding one sequence of one entry.
fn deep_tensor(levels: usize, shaped: bool) -> LodTensor {
    let lod = Lod::try_from_lengths(&vec![vec![1]; levels]).unwrap();
    if shaped {
        LodTensor::from_vec(vec![7i64, 8], vec![1, 2], lod).unwrap()
    } else {
        LodTensor::from_vec(vec![7i64], vec![1], lod).unwrap()
    }
}

#[test]
fn the_deepest_tensors_written_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let batch = Batch::try_from_tensors([
        ("deep", deep_tensor(lodt::arrow::MAX_LOD_LEVELS, false)),
        (
            "deep_shaped",
            deep_tensor(lodt::arrow::MAX_LOD_LEVELS, true),
        ),
    ])
    .unwrap();
    let input = dir.path().join("deep.lodt");
    lodt::format::save_batch(&input, &batch).unwrap();
    for ext in ["arrow", "arrows", "parquet"] {
        let out = dir.path().join(format!("deep.{ext}"));
        lodt::convert::convert(&input, &out, &Default::default(), |_| {}).unwrap();
        let back: Vec<Batch> = lodt::convert::Format::from_path(&out)
            .unwrap()
            .open_reader(&out, &Default::default())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, vec![batch.clone()], "{ext}");
    }
}

#[test]
fn lodt_files_of_61_to_64_levels_are_not_converted_to_arrow_or_parquet() {
    let dir = tempfile::tempdir().unwrap();
    for levels in [lodt::arrow::MAX_LOD_LEVELS + 1, 61, 62, 63, 64] {
        let input = dir.path().join(format!("deep{levels}.lodt"));
        lodt::format::save_tensor(&input, "deep", &deep_tensor(levels, levels % 2 == 0)).unwrap();
        lodt::format::verify(&input).unwrap(); // a valid .lodt file
        for ext in ["arrow", "arrows", "parquet"] {
            let out = dir.path().join(format!("deep{levels}.{ext}"));
            let err =
                lodt::convert::convert(&input, &out, &Default::default(), |_| {}).unwrap_err();
            match &err {
                lodt::convert::ConvertError::Arrow(Error::TooManyLevels {
                    column,
                    levels: found,
                    limit,
                }) => {
                    assert_eq!((column.as_str(), *found, *limit), ("deep", levels, 32));
                }
                other => panic!("{levels} levels to .{ext}: {other:?}"),
            }
            assert!(
                err.to_string().contains(&format!(
                    "{levels} LoD levels exceed the limit of 32 for Arrow IPC and Parquet files"
                )),
                "{err}"
            );
        }
        let out = dir.path().join(format!("deep{levels}.parquet"));
        let err = lodt::convert::convert(&input, &out, &Default::default(), |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("exceed the limit of 32"), "{err}");
        assert!(!out.exists());
    }
}

/// A Paddle single-tensor file: one int64 row under `levels` LoD levels.
fn paddle_bytes(levels: usize) -> Vec<u8> {
    let mut out = 0u32.to_le_bytes().to_vec();
    out.extend((levels as u64).to_le_bytes());
    for _ in 0..levels {
        out.extend(16u64.to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend(1u64.to_le_bytes());
    }
    out.extend(0u32.to_le_bytes());
    // TensorDesc { data_type: INT64 (3), dims: [1] }
    let desc = [0x08, 0x03, 0x10, 0x01];
    out.extend((desc.len() as i32).to_le_bytes());
    out.extend(desc);
    out.extend(7i64.to_le_bytes());
    out
}

#[test]
fn paddle_files_of_100_levels_are_refused_and_64_levels_stay_out_of_arrow() {
    use lodt::paddle::{self, PaddleError};
    let dir = tempfile::tempdir().unwrap();

    let path = dir.path().join("deep100.pdtensor");
    std::fs::write(&path, paddle_bytes(100)).unwrap();
    let err = paddle::read_tensor_file(&path).unwrap_err();
    assert!(
        matches!(
            err,
            PaddleError::TooManyLevels {
                offset: 4,
                found: 100,
                max: 64
            }
        ),
        "{err}"
    );
    let out = dir.path().join("deep100.arrow");
    let err = lodt::convert::convert(&path, &out, &Default::default(), |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("100 levels exceed lodt's limit of 64"),
        "{err}"
    );

    // 64 levels read (and convert to .lodt); Arrow and Parquet refuse them.
    let path = dir.path().join("deep64.pdtensor");
    std::fs::write(&path, paddle_bytes(64)).unwrap();
    assert_eq!(
        paddle::read_tensor_file(&path).unwrap().lod().num_levels(),
        64
    );
    let out = dir.path().join("deep64.lodt");
    lodt::convert::convert(&path, &out, &Default::default(), |_| {}).unwrap();
    for ext in ["arrow", "arrows", "parquet"] {
        let out = dir.path().join(format!("deep64.{ext}"));
        let err = lodt::convert::convert(&path, &out, &Default::default(), |_| {}).unwrap_err();
        assert!(
            matches!(
                err,
                lodt::convert::ConvertError::Arrow(Error::TooManyLevels { levels: 64, .. })
            ),
            "{err}"
        );
    }
    // And lodt writes no Paddle file it would refuse to read.
    let tensor = deep_tensor(65, false);
    let err = paddle::to_bytes(&tensor).unwrap_err();
    assert!(
        matches!(
            err,
            PaddleError::TooLarge {
                found: 65,
                max: 64,
                ..
            }
        ),
        "{err}"
    );
}

/// Found by the `convert` fuzz target (an OOM): parquet allocates a page's
/// `uncompressed_page_size` before it decompresses the page. Here the one
/// page of a Zstandard column chunk (4,138 bytes, 128 MiB of zeros when
/// written by pyarrow) claims 2^31 - 1 bytes, more than Zstandard can expand
/// 4,138 bytes to; lodt refuses the header before parquet reads the page.
#[test]
fn a_page_claiming_more_than_its_codec_can_expand_to_is_refused() {
    let path = data("tests/data/repro/huge_uncompressed_page.parquet");
    let reader = ParquetReader::open(&path, &ArrowOptions::default()).unwrap();
    let results: Vec<_> = reader.collect();
    assert_eq!(results.len(), 1);
    match results.into_iter().next().unwrap() {
        Err(Error::Decode {
            file,
            section,
            message,
        }) => {
            assert_eq!(
                (file, section.as_str()),
                (
                    path.display().to_string(),
                    "row group 0 column \"x.list.element\""
                )
            );
            assert!(
                message.starts_with("the page header at byte 4: uncompressed_page_size 2147483647"),
                "{message}"
            );
            assert!(message.contains("4138 compressed bytes"), "{message}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

/// Pages of zeros compressed as far as each codec goes (written by pyarrow,
/// one page per file: Zstandard 30,728 : 1, Snappy 21.3 : 1, LZ4 251.7 : 1)
/// stay inside lodt's bound on a page's expansion and read back whole.
#[test]
fn pages_at_their_codecs_highest_ratio_read_back() {
    for (codec, rows) in [
        ("zstd", 4usize << 20),
        ("snappy", 128 << 10),
        ("lz4", 128 << 10),
    ] {
        let path = data(&format!("tests/data/max_ratio_{codec}.parquet"));
        let reader = ParquetReader::open(&path, &ArrowOptions::default()).unwrap();
        let batches: Vec<Batch> = reader.map(|b| b.unwrap()).collect();
        assert_eq!(batches.len(), 1, "{codec}");
        let tensor = batches[0].get("x").unwrap();
        assert_eq!(tensor.shape()[0], rows, "{codec}");
        assert_eq!(
            tensor.lod().to_offsets(),
            vec![vec![0, rows as u64]],
            "{codec}"
        );
        let values = tensor.as_slice::<i64>().unwrap();
        assert!(values.iter().all(|&v| v == 0), "{codec}");
    }
}

/// Found by the `parquet_reader` fuzz target (an OOM): parquet sizes a
/// column's dictionary by its dictionary page's `num_values` before decoding
/// them; here 402,653,182 INT64 values (3.2 GB) in a page of a few bytes.
/// lodt refuses a dictionary page claiming more plain-encoded values than
/// its bytes hold.
#[test]
fn a_dictionary_page_claiming_more_values_than_it_holds_is_refused() {
    let path = data("tests/data/repro/huge_dictionary.parquet");
    let results: Vec<_> = ParquetReader::open(&path, &ArrowOptions::default())
        .unwrap()
        .collect();
    let message = results
        .into_iter()
        .find_map(|r| match r {
            Err(Error::Decode { message, .. }) => Some(message),
            _ => None,
        })
        .expect("a decode error");
    assert!(
        message.contains("a dictionary page of 402653182 values"),
        "{message}"
    );
    assert!(message.contains("plain-encoded INT64 values"), "{message}");
}

/// Found by the `parquet_reader` fuzz target (an OOM): a dictionary page's
/// `num_values` written as a 14-byte varint. parquet reads a varint of any
/// length, shifting modulo 64, and truncates it to an `i32`: 1,073,741,829
/// INT64 values (8.6 GB). lodt reads the varint the same way, so the
/// dictionary check sees the count parquet will use.
#[test]
fn a_dictionary_count_in_an_overlong_varint_is_read_as_parquet_reads_it() {
    let path = data("tests/data/repro/long_varint_dictionary.parquet");
    let first = ParquetReader::open(&path, &ArrowOptions::default())
        .unwrap()
        .next()
        .expect("a first batch");
    match first {
        Err(Error::Decode {
            section, message, ..
        }) => {
            assert_eq!(
                section,
                "row group 0 column \"words.list.element.list.element\""
            );
            assert!(
                message.starts_with(
                    "the page header at byte 4: a dictionary page of 1073741829 values"
                ),
                "{message}"
            );
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

/// Found by the `parquet_reader` fuzz target (an OOM: a 29 GB allocation):
/// column `y` claims (in the file's Arrow schema) fixed-size lists of
/// 1,835,365,481 doubles, and its rows are null; parquet's fixed-size list
/// reader fills each null slot with that many nulls. lodt has parquet decode
/// such a column as a plain list and checks every slot itself.
#[test]
fn null_fixed_size_lists_claiming_a_huge_size_are_refused_without_allocating_it() {
    let path = data("tests/data/repro/null_fixed_size_lists_claiming_a_huge_size.parquet");
    let mut reader = ParquetReader::open(&path, &ArrowOptions::default()).unwrap();
    assert_eq!(
        reader.schema().field_with_name("y").unwrap().data_type(),
        &arrow_schema::DataType::FixedSizeList(
            std::sync::Arc::new(arrow_schema::Field::new(
                "element",
                arrow_schema::DataType::Float64,
                true
            )),
            1_835_365_481
        )
    );
    let err = reader.next().expect("a first batch").unwrap_err();
    assert!(
        matches!(&err, Error::NullValue { column, row: 0 } if column == "y"),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "column \"y\": null value at tensor row 0 (a LoD tensor has no nulls)"
    );
    // The rest of the row group is refused too (more null rows, then levels
    // that run out), without allocating more than the file holds.
    let rest: Vec<_> = reader.collect();
    assert!(!rest.is_empty());
    assert!(
        rest.iter().all(|r| r
            .as_ref()
            .is_err_and(|e| matches!(e, Error::NullValue { .. })
                || e.to_string().contains("Insufficient repetition levels"))),
        "{rest:?}"
    );
}

/// A Parquet list column whose Arrow schema (`ARROW:schema`) says
/// `FixedSizeList` of 2 while a row holds 3 values: the reader refuses the
/// row group, naming the tensor row, instead of trusting the size.
#[test]
fn a_fixed_size_list_slot_of_another_length_is_a_decode_error() {
    use arrow_array::{Array, ArrayRef, Int8Array, ListArray, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::{ArrowWriter, arrow_writer::ArrowWriterOptions, encode_arrow_schema};
    use parquet::file::{metadata::KeyValue, properties::WriterProperties};
    use std::sync::Arc;
    let item = Arc::new(Field::new("item", DataType::Int8, true));
    let lists = ListArray::try_new(
        item.clone(),
        arrow_buffer::OffsetBuffer::new(vec![0i32, 2, 5].into()),
        Arc::new(Int8Array::from(vec![1i8, 2, 3, 4, 5])),
        None,
    )
    .unwrap();
    let written = Arc::new(Schema::new(vec![Field::new(
        "x",
        lists.data_type().clone(),
        true,
    )]));
    let claimed = Schema::new(vec![Field::new(
        "x",
        DataType::FixedSizeList(item, 2),
        true,
    )]);
    let properties = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "ARROW:schema".into(),
            encode_arrow_schema(&claimed),
        )]))
        .build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short_fixed_size_list.parquet");
    let file = std::fs::File::create(&path).unwrap();
    let options = ArrowWriterOptions::new()
        .with_properties(properties)
        .with_skip_arrow_metadata(true);
    let mut writer = ArrowWriter::try_new_with_options(file, written.clone(), options).unwrap();
    let column: ArrayRef = Arc::new(lists);
    writer
        .write(&RecordBatch::try_new(written, vec![column]).unwrap())
        .unwrap();
    writer.close().unwrap();
    let mut reader = ParquetReader::open(&path, &ArrowOptions::default()).unwrap();
    assert!(matches!(
        reader.schema().field(0).data_type(),
        DataType::FixedSizeList(_, 2)
    ));
    let err = reader.next().expect("a first batch").unwrap_err();
    expect_decode(
        err,
        &path.display().to_string(),
        "row group 0",
        "column \"x\": a fixed-size list of tensor row 1 holds 3 values, not the 2 of its type FixedSizeList(2 x Int8)",
    );
}

/// A Thrift compact `i32` field header and value: field `delta` ids on, zigzag varint.
fn thrift_i32(out: &mut Vec<u8>, delta: u8, value: i32) {
    out.push(delta << 4 | 5);
    let mut v = ((value << 1) ^ (value >> 31)) as u32;
    while v >= 0x80 {
        out.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// When parquet peeks at the page after a list column's data page
/// (`at_record_boundary`) and finds an index page, it reads the next header
/// right after the index page's header instead of after its bytes. A file
/// whose second page is an index page with a dictionary-encoded data page
/// header as its bytes (and no dictionary page in the chunk) made parquet
/// panic (`Decoder for dict should have been set`) while the walk, which
/// skipped the index page's bytes, saw nothing wrong. The walk now follows
/// both ways past an index page.
#[test]
fn a_header_hidden_in_an_index_page_is_checked_as_parquet_peeks_at_it() {
    use arrow_array::{Array, ArrayRef, Int64Array, ListArray, RecordBatch};
    use arrow_schema::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let item = Arc::new(Field::new("item", arrow_schema::DataType::Int64, false));
    let lists = ListArray::try_new(
        item,
        arrow_buffer::OffsetBuffer::new((0..=6).map(|i| i * 2).collect::<Vec<i32>>().into()),
        Arc::new(Int64Array::from_iter_values(100..112)),
        None,
    )
    .unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new(
        "x",
        lists.data_type().clone(),
        false,
    )]));
    let properties = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_write_batch_size(2)
        .set_data_page_row_count_limit(2)
        .build();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, schema.clone(), Some(properties)).unwrap();
    let column: ArrayRef = Arc::new(lists);
    writer
        .write(&RecordBatch::try_new(schema, vec![column]).unwrap())
        .unwrap();
    writer.close().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    std::fs::write(&path, &bytes).unwrap();
    // The written file reads back: three pages of two rows each.
    let mut values = Vec::new();
    for batch in ParquetReader::open(&path, &ArrowOptions::default()).unwrap() {
        let batch = batch.unwrap();
        values.extend_from_slice(batch.get("x").unwrap().as_slice::<i64>().unwrap());
    }
    assert_eq!(values, (100..112).collect::<Vec<i64>>());
    let metadata = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Required)
        .parse_and_finish(&bytes::Bytes::from(bytes.clone()))
        .unwrap();
    let pages = metadata
        .page_index_for_row_group(0)
        .page_locations(0)
        .unwrap()
        .clone();
    assert_eq!(pages.len(), 3, "{pages:?}");
    let (at, len) = (
        pages[1].offset as usize,
        pages[1].compressed_page_size as usize,
    );

    // The hidden page: two values encoded RLE_DICTIONARY (8), after their
    // levels (repetition, then definition: each a 4-byte length and one
    // RLE run of two) and the indices' bit width and run; padded so that it
    // ends where the third page starts (a 17-byte header after the index
    // page's 7), and parquet's peek after it finds that page.
    let mut page = vec![2, 0, 0, 0, 4, 0, 2, 0, 0, 0, 4, 1, 1, 4, 0];
    page.resize(len - 7 - 17, 0);
    let mut hidden = Vec::new();
    thrift_i32(&mut hidden, 1, 0); // type DATA_PAGE
    thrift_i32(&mut hidden, 1, page.len() as i32); // uncompressed_page_size
    thrift_i32(&mut hidden, 1, page.len() as i32); // compressed_page_size
    hidden.push(0x2c); // field 5, data_page_header
    thrift_i32(&mut hidden, 1, 2); // num_values
    thrift_i32(&mut hidden, 1, 8); // encoding RLE_DICTIONARY
    thrift_i32(&mut hidden, 1, 3); // definition_level_encoding RLE
    thrift_i32(&mut hidden, 1, 3); // repetition_level_encoding RLE
    hidden.extend([0, 0]);
    hidden.extend(page);
    assert_eq!(hidden.len(), len - 7);
    // The index page in the second page's place, its bytes the hidden header.
    let mut index = Vec::new();
    let body = (len - 7) as i32; // sizes of one varint byte: a header of 7 bytes
    thrift_i32(&mut index, 1, 1); // type INDEX_PAGE
    thrift_i32(&mut index, 1, body);
    thrift_i32(&mut index, 1, body);
    index.push(0);
    assert_eq!(index.len(), 7, "a body of {body} bytes");
    index.extend(&hidden);
    index.resize(len, 0);
    bytes[at..at + len].copy_from_slice(&index);
    let path = dir.path().join("hidden.parquet");
    std::fs::write(&path, &bytes).unwrap();

    let results: Vec<_> = ParquetReader::open(&path, &ArrowOptions::default())
        .unwrap()
        .collect();
    let err = results
        .into_iter()
        .find_map(Result::err)
        .expect("the file is refused");
    expect_decode(
        err,
        &path.display().to_string(),
        "row group 0 column \"x.list.item\"",
        &format!(
            "the page header at byte {}: a data page encoded RLE_DICTIONARY, and no dictionary page before it in the column chunk",
            at + 7
        ),
    );
}

/// Inputs of the sixth fuzz campaign that reached parquet panics. Two got
/// past lodt's page checks (`PageMetadata::try_from`'s `unwrap`, `Decoder
/// for dict should have been set`): a flipped byte made a page header's
/// `data_page_header` field 6, `index_page_header`, with a map's type, which
/// parquet reads as a struct by its id and the walk had skipped as a map, so
/// it stopped where parquet went on. Now the page checks refuse both files
/// before parquet runs (no panic to contain). The third panics in
/// `DeltaBitPackDecoder::get`, which no header check foresees: the boundary
/// contains it. Each is read as the fuzz target read it (options and batch
/// rows chosen from its length); every error is `Error::Decode` naming the file.
#[test]
fn parquet_inputs_past_the_old_page_checks_are_refused_or_contained() {
    let cases = [
        (
            "data_page_without_its_header_past_the_checks.parquet",
            ArrowOptions::default(),
            1 << 20,
            Some("a data page without its data_page_header"),
        ),
        (
            "dict_page_missing_past_the_checks.parquet",
            ArrowOptions::default().with_null_lists(lodt::arrow::NullLists::Empty),
            1 << 20,
            Some("and no dictionary page before it in the column chunk"),
        ),
        (
            "delta_bit_pack_overrun.parquet",
            ArrowOptions::default(),
            2,
            None,
        ),
    ];
    for (name, options, rows, refused) in cases {
        let path = data(&format!("tests/data/repro/{name}"));
        let results = catch_unwind(AssertUnwindSafe(|| {
            match ParquetReader::open(&path, &options) {
                Ok(reader) => reader
                    .with_max_batch_rows(rows)
                    .map(|b| b.map(|_| ()))
                    .collect::<Vec<_>>(),
                Err(e) => vec![Err(e)],
            }
        }))
        .unwrap_or_else(|_| panic!("{name}: a panic escaped lodt"));
        let mut contained = 0;
        let mut messages = Vec::new();
        for err in results.into_iter().filter_map(Result::err) {
            match err {
                Error::Decode { file, message, .. } => {
                    assert_eq!(file, path.display().to_string(), "{name}");
                    contained += usize::from(message.contains("panicked"));
                    messages.push(message);
                }
                other => panic!("{name}: expected Error::Decode, got {other:?}"),
            }
        }
        match refused {
            Some(expected) => {
                assert_eq!(
                    contained, 0,
                    "{name}: refused before parquet panics: {messages:?}"
                );
                assert!(
                    messages.iter().any(|m| m.contains(expected)),
                    "{name}: {expected:?} in {messages:?}"
                );
            }
            None => assert_eq!(contained, 1, "{name}: one contained panic"),
        }
    }
}

/// Found by the `parquet_reader` fuzz target (a contained panic, seventh
/// campaign): parquet's Arrow schema conversion reads a schema root whose
/// `converted_type` is `LIST` as a list and asserts on its repetition, which
/// a root has not (`BasicTypeInfo::repetition`). lodt refuses such a root
/// from the footer before parquet builds the schema.
#[test]
fn a_schema_root_annotated_as_a_list_is_refused() {
    let path = data("tests/data/repro/root_annotated_list.parquet");
    let err = catch_unwind(AssertUnwindSafe(|| open_err(&path)))
        .unwrap_or_else(|_| panic!("a panic escaped lodt"));
    expect_decode(
        err,
        &path.display().to_string(),
        "Parquet footer",
        "the schema's root is annotated LIST; the root is the message, never a list",
    );
}
