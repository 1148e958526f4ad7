//! Arrow bridge benchmarks, each against its arrow-rs peer in the same run.
//!
//! 1. `mmap_to_large_list`: a memory-mapped file -> `LargeListArray`, zero
//!    copy. lodt converts a tensor of a mapped `.lodt` file
//!    (`lodt_tensor_to_arrow`: O(levels), the LoD was validated when the batch
//!    was first read; `lodt_checked`: validating every offset again);
//!    arrow-ipc's `FileDecoder` decodes the same column from a mapped IPC file.
//!    Two sizes (x10 rows) show that the file path is O(levels).
//! 2. `parquet_write` / `parquet_read`: lodt's Parquet writer and reader vs
//!    arrow-rs `ArrowWriter` / `ParquetRecordBatchReader` on the same
//!    `RecordBatch` with the same properties.
//!
//! Run: `cargo bench --bench arrow`

use arrow_array::{Array, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::FileDecoder;
use arrow_ipc::writer::FileWriter;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lodt::arrow::parquet::{ParquetReader, ParquetWriter};
use lodt::arrow::{
    ArrowOptions, ArrowWriteOptions, batch_to_record_batch, lodt_tensor_to_arrow,
    tensor_buffers_to_arrow,
};
use lodt::{Batch, Lod, LodTensor, LodtFile};
use memmap2::Mmap;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use std::hint::black_box;
use std::io::Write;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

/// A deterministic 2-level tensor: `top` articles of 1-7 sentences of 1-15
/// words, each word an `f32` row of `dim` values.
fn words(top: usize, dim: usize) -> LodTensor {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: u64| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
        1 + (state >> 33) % n
    };
    let sentences: Vec<u64> = (0..top).map(|_| next(7)).collect();
    let n: u64 = sentences.iter().sum();
    let lengths: Vec<u64> = (0..n).map(|_| next(15)).collect();
    let rows: u64 = lengths.iter().sum();
    let lod = Lod::try_from_lengths(&[sentences, lengths]).unwrap();
    let values: Vec<f32> = (0..rows as usize * dim).map(|i| i as f32).collect();
    LodTensor::from_vec(values, vec![rows as usize, dim], lod).unwrap()
}

fn map_file(bytes: &[u8]) -> Mmap {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(bytes).unwrap();
    // SAFETY: the temporary file is private to this process and not modified.
    unsafe { Mmap::map(&file).unwrap() }
}

/// The tensor saved as a `.lodt` file and opened (memory-mapped).
fn lodt_file(t: &LodTensor, dir: &std::path::Path) -> LodtFile {
    let path = dir.join(format!("words{}.lodt", t.rows()));
    lodt::format::save_tensor(&path, "words", t).unwrap();
    LodtFile::open(&path).unwrap()
}

/// The same column in a mapped Arrow IPC file, ready for `FileDecoder`.
struct IpcMap {
    buffer: Buffer,
    schema: arrow_schema::SchemaRef,
    version: arrow_ipc::MetadataVersion,
    block: arrow_ipc::Block,
}

impl IpcMap {
    fn new(rb: &RecordBatch) -> Self {
        let mut writer = FileWriter::try_new(Vec::new(), &rb.schema()).unwrap();
        writer.write(rb).unwrap();
        let map = Arc::new(map_file(&writer.into_inner().unwrap()));
        let ptr = NonNull::new(map.as_ptr() as *mut u8).unwrap();
        // SAFETY: the map is read-only and the Buffer keeps it alive.
        let buffer = unsafe { Buffer::from_custom_allocation(ptr, map.len(), map.clone()) };
        let trailer: [u8; 10] = buffer[buffer.len() - 10..].try_into().unwrap();
        let footer_len = arrow_ipc::reader::read_footer_length(trailer).unwrap();
        let footer_start = buffer.len() - 10 - footer_len;
        let footer = arrow_ipc::root_as_footer(&buffer[footer_start..buffer.len() - 10]).unwrap();
        let schema =
            Arc::new(arrow_ipc::convert::try_fb_to_schema(footer.schema().unwrap()).unwrap());
        let block = *footer.recordBatches().unwrap().get(0);
        IpcMap {
            schema,
            version: footer.version(),
            block,
            buffer: buffer.clone(),
        }
    }

    fn decode(&self, decoder: &FileDecoder) -> RecordBatch {
        let len = self.block.metaDataLength() as usize + self.block.bodyLength() as usize;
        let data = self
            .buffer
            .slice_with_length(self.block.offset() as usize, len);
        decoder
            .read_record_batch(&self.block, &data)
            .unwrap()
            .unwrap()
    }
}

fn mmap_to_large_list(c: &mut Criterion) {
    let mut group = c.benchmark_group("mmap_to_large_list");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let options = ArrowOptions::default();
    let dir = tempfile::tempdir().unwrap();
    for top in [10_000usize, 100_000] {
        let t = words(top, 4);
        let file = lodt_file(&t, dir.path());
        let parts = file.tensor_buffers(0, "words").unwrap();
        let rows = t.rows();
        group.throughput(Throughput::Elements(rows as u64));
        let batch = Batch::try_from_tensors([("words", t)]).unwrap();
        let ipc = IpcMap::new(&batch_to_record_batch(&batch, &options).unwrap());
        let label = format!("{top}seq_{rows}rows");
        group.bench_with_input(BenchmarkId::new("lodt_checked", &label), &parts, |b, p| {
            b.iter(|| black_box(tensor_buffers_to_arrow("words", p, &options).unwrap()))
        });
        group.bench_with_input(BenchmarkId::new("lodt_file", &label), &file, |b, f| {
            b.iter(|| black_box(lodt_tensor_to_arrow(f, 0, "words", &options).unwrap()))
        });
        let decoder = FileDecoder::new(ipc.schema.clone(), ipc.version);
        group.bench_with_input(
            BenchmarkId::new("ipc_file_decoder", &label),
            &ipc,
            |b, m| b.iter(|| black_box(m.decode(&decoder))),
        );
        // SAFETY: the file was just written by arrow-ipc from a valid batch.
        let unchecked =
            unsafe { FileDecoder::new(ipc.schema.clone(), ipc.version).with_skip_validation(true) };
        group.bench_with_input(
            BenchmarkId::new("ipc_file_decoder_skip_validation", &label),
            &ipc,
            |b, m| b.iter(|| black_box(m.decode(&unchecked))),
        );
        // Both produce the same column, with no copy.
        let (_, ours) = tensor_buffers_to_arrow("words", &parts, &options).unwrap();
        let theirs = ipc.decode(&decoder);
        assert_eq!(ours.to_data(), theirs.column(0).to_data());
    }
    group.finish();
}

fn training_batch(top: usize) -> Batch {
    let mut batch = Batch::new();
    batch.push("words", words(top, 1)).unwrap();
    let frames = words(top, 16);
    batch.push("frames", frames).unwrap();
    let labels: Vec<i64> = (0..top as i64).collect();
    batch
        .push(
            "labels",
            LodTensor::from_vec(labels, vec![top], Lod::empty()).unwrap(),
        )
        .unwrap();
    batch
}

fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_max_row_group_row_count(None)
        .build()
}

fn parquet(c: &mut Criterion) {
    let batch = training_batch(5_000);
    let rb = batch_to_record_batch(&batch, &ArrowOptions::default()).unwrap();
    let bytes: usize = batch.iter().map(|(_, t)| t.as_bytes().len()).sum();
    let mut group = c.benchmark_group("parquet");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("write/lodt", |b| {
        b.iter(|| {
            let mut w = ParquetWriter::try_with_properties(
                Vec::new(),
                &ArrowWriteOptions::default(),
                properties(),
            )
            .unwrap();
            w.write(&batch).unwrap();
            black_box(w.finish().unwrap())
        })
    });
    group.bench_function("write/arrow_rs", |b| {
        b.iter(|| {
            let mut w = ArrowWriter::try_new(Vec::new(), rb.schema(), Some(properties())).unwrap();
            w.write(&rb).unwrap();
            black_box(w.into_inner().unwrap())
        })
    });
    let mut file = tempfile::tempfile().unwrap();
    let mut w = ParquetWriter::try_with_properties(
        file.try_clone().unwrap(),
        &ArrowWriteOptions::default(),
        properties(),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    file.flush().unwrap();
    group.bench_function("read/lodt", |b| {
        b.iter(|| {
            let reader =
                ParquetReader::try_new(file.try_clone().unwrap(), &ArrowOptions::default())
                    .unwrap();
            let batches: Vec<Batch> = reader.map(Result::unwrap).collect();
            black_box(batches)
        })
    });
    group.bench_function("read/arrow_rs", |b| {
        b.iter(|| {
            let reader = ParquetRecordBatchReaderBuilder::try_new(file.try_clone().unwrap())
                .unwrap()
                .with_batch_size(rb.num_rows())
                .build()
                .unwrap();
            let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
            black_box(batches)
        })
    });
    group.finish();
}

criterion_group!(benches, mmap_to_large_list, parquet);
criterion_main!(benches);
