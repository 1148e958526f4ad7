//! A batch of 100 000 tensors: built, looked up by name, saved to `.lodt`,
//! read back (memory-mapped, and streamed as `lodt convert` reads it), and
//! written to an Arrow IPC file and read back, with every value checked.
//! Name checks and lookups were once a scan per name, which made all of this
//! quadratic in the number of tensors (issue 9, part 7); now each is a hash
//! lookup. No timing assertion: the test only has to finish.

use lodt::format::{self, LodtFile, StreamReader};
use lodt::{Batch, Lod, LodTensor};

const N: usize = 100_000;

fn name(i: usize) -> String {
    format!("t{i}")
}

/// Tensor `i`: even ones plain `int32 [2]`, odd ones `int64 [3]` with one
/// LoD level of two sequences (so every tensor has 2 top-level rows, as an
/// Arrow record batch needs).
fn tensor(i: usize) -> LodTensor {
    if i.is_multiple_of(2) {
        LodTensor::from_vec(vec![i as i32, -(i as i32)], vec![2], Lod::empty()).unwrap()
    } else {
        let lod = Lod::try_from_lengths(&[vec![2, 1]]).unwrap();
        let v = i as i64;
        LodTensor::from_vec(vec![v, v + 1, -v], vec![3], lod).unwrap()
    }
}

fn many() -> Batch {
    let mut batch = Batch::try_from_tensors((0..N).map(|i| (name(i), tensor(i)))).unwrap();
    batch.metadata_mut().insert("tensors".into(), N.to_string());
    batch
}

/// Every tensor of `batch`, found by name and in order, equals the original.
fn check(batch: &Batch) {
    assert_eq!(batch.len(), N);
    assert_eq!(batch.metadata()["tensors"], N.to_string());
    for (i, (n, t)) in batch.iter().enumerate() {
        assert_eq!(n, name(i));
        assert_eq!(*t, tensor(i), "tensor {n}");
    }
    // Lookups by name, in another order.
    for i in (0..N).rev().step_by(7) {
        assert_eq!(batch.get(&name(i)), Some(&tensor(i)));
    }
    assert!(batch.get("t100000").is_none());
}

#[test]
#[ignore = "full tier (scripts/test): 100,000 tensors, minutes in a debug build"]
fn a_batch_of_100k_tensors_round_trips() {
    let batch = many();
    check(&batch);
    // The duplicate check still holds at this size.
    let mut dup = batch.clone();
    assert!(dup.push("t99999", tensor(0)).is_err());
    assert!(dup.push("t100000", tensor(0)).is_ok());

    let dir = tempfile::tempdir().unwrap();
    let lodt = dir.path().join("many.lodt");
    format::save_batch(&lodt, &batch).unwrap();

    // Memory-mapped: every tensor by name, then the whole batch.
    let file = LodtFile::open(&lodt).unwrap();
    let view = file.batch(0).unwrap();
    assert_eq!(view.len(), N);
    for i in (0..N).step_by(3) {
        let t = view.tensor(&name(i)).unwrap();
        if i.is_multiple_of(2) {
            assert_eq!(t.as_slice::<i32>().unwrap(), &[i as i32, -(i as i32)]);
        } else {
            assert_eq!(
                t.as_slice::<i64>().unwrap(),
                &[i as i64, i as i64 + 1, -(i as i64)]
            );
            assert_eq!(t.lod().to_lengths(), vec![vec![2, 1]]);
        }
    }
    assert!(view.tensor("t100000").is_err());
    check(&view.to_batch().unwrap());

    // Streamed, as `lodt convert` reads a .lodt file.
    let reader =
        StreamReader::try_new(std::io::BufReader::new(std::fs::File::open(&lodt).unwrap()))
            .unwrap();
    let streamed: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(streamed.len(), 1);
    check(&streamed[0]);
}

/// Through an Arrow IPC file (one column per tensor) and back.
#[cfg(feature = "arrow")]
#[test]
fn a_batch_of_100k_tensors_round_trips_through_arrow_ipc() {
    use lodt::arrow::ipc::{IpcFileReader, IpcFileWriter};
    let batch = many();
    let mut writer = IpcFileWriter::new(Vec::new(), &Default::default());
    writer.write(&batch).unwrap();
    let bytes = writer.finish().unwrap();
    let reader = IpcFileReader::try_new(std::io::Cursor::new(bytes), &Default::default()).unwrap();
    let back: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(back.len(), 1);
    check(&back[0]);
    assert_eq!(back[0], batch);
}
