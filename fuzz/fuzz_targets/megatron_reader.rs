//! Fuzzes the Megatron indexed dataset reader (`MegatronReader`): the input
//! is split into a `.idx` and a `.bin` file, written to a scratch directory,
//! opened through the public reader and read to the end. Hostile pairs (a
//! truncated index, sequences past the data file, documents out of order)
//! must be errors with a message, never a panic, an abort, a hang or a huge
//! allocation. A pair that opens must read as its index says: every token
//! of every sequence is the data file's bytes at the sequence's pointer,
//! the documents are the tensors' top-level sequences, the index written
//! back is the index file byte for byte, and the batches write to a
//! Megatron pair and an IPC stream and read back unchanged.
//!
//! Input framing: byte 0 holds flags (bits 0-1: the path opened, the prefix,
//! `x.idx` or `x.bin`; bit 2: no `.bin` written; bits 3-5: the batch budget;
//! bit 6: write the batches back to a Megatron pair), bytes 1..5 the index
//! file's length (u32 LE, taken modulo what is left, plus one), the rest the
//! two files: the index, then the data.
//!
//! Seeds: `python3 seeds/make_seeds_megatron_mds.py seeds`. Run:
//! `python3 campaign.py megatron_reader --flat 600 --cap 1800`.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use lodt::megatron::{MegatronIndex, MegatronReader, MegatronWriter};
use lodt::{Batch, BatchWriter};

fuzz_target!(init: common::install_hook(), |data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some((len, files)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let split = (u32::from_le_bytes(*len) as usize) % (files.len() + 1);
    let (idx, bin) = files.split_at(split);
    let dir = common::scratch_dir();
    let prefix = dir.join("x");
    let (idx_path, bin_path) = (dir.join("x.idx"), dir.join("x.bin"));
    std::fs::write(&idx_path, idx).expect("scratch write");
    let _ = std::fs::remove_file(&bin_path);
    let no_bin = flags & 4 != 0;
    if !no_bin {
        std::fs::write(&bin_path, bin).expect("scratch write");
    }
    let path = [&prefix, &idx_path, &bin_path, &prefix][usize::from(flags & 3)];
    let budget = [lodt::megatron::BATCH_BYTES, 1, 2, 7, 16, 64, 1000, 1 << 16][usize::from(flags >> 3 & 7)];

    let reader = match MegatronReader::open(path) {
        Ok(reader) => reader,
        Err(err) => {
            assert!(!err.to_string().is_empty(), "an error without a message");
            if common::verbose() {
                eprintln!("megatron_reader: {err}");
            }
            return;
        }
    };
    assert!(!no_bin, "a dataset without its data file opened");
    let index = reader.index().clone();
    // The same bytes parse to the same index, which writes back as the file.
    let again = MegatronIndex::parse(idx, "x.idx", bin.len() as u64).expect("the index parses again");
    assert_eq!(again, index);
    assert_eq!(index.to_bytes(), idx, "the index does not write back as it was read");
    let (lengths, pointers, documents) = (index.lengths(), index.pointers(), index.documents());
    assert_eq!(lengths.len(), pointers.len());
    assert_eq!(documents.len(), index.num_documents() + 1);
    let size = index.dtype().size();
    let two_levels = !index.one_sequence_per_document();

    let mut batches = Vec::new();
    let (mut doc, mut seq, mut count) = (0usize, 0usize, 0usize);
    for batch in reader.with_batch_bytes(budget) {
        let batch = match batch {
            Ok(batch) => batch,
            Err(err) => {
                assert!(!err.to_string().is_empty(), "an error without a message");
                if common::verbose() {
                    eprintln!("megatron_reader: {err}");
                }
                return;
            }
        };
        assert_eq!(batch.len(), 1, "one tensor a batch");
        let tensor = batch.get("tokens").expect("the tensor is named tokens");
        assert_eq!(tensor.dtype(), index.dtype());
        assert_eq!(tensor.shape().len(), 1, "tokens are scalars");
        let lod = tensor.lod();
        assert_eq!(lod.num_levels(), if two_levels { 2 } else { 1 });
        let docs = lod.num_sequences(0).expect("a top level");
        assert!(docs >= 1, "a batch holds at least one document");
        let tokens = lod.to_offsets();
        let tokens = tokens.last().expect("a token level");
        let bytes = tensor.as_bytes();
        for (k, w) in tokens.windows(2).enumerate() {
            let i = seq + k;
            assert_eq!(w[1] - w[0], u64::from(lengths[i]), "the length of sequence {i}");
            let (at, n) = (pointers[i] as usize, lengths[i] as usize * size);
            assert_eq!(
                &bytes[w[0] as usize * size..w[1] as usize * size],
                &bin[at..at + n],
                "the tokens of sequence {i}"
            );
        }
        if two_levels {
            let offsets = &lod.to_offsets()[0];
            for (k, w) in offsets.windows(2).enumerate() {
                assert_eq!(w[1] - w[0], documents[doc + k + 1] - documents[doc + k]);
            }
        }
        doc += docs;
        seq += tokens.len() - 1;
        common::check_batch(&batch);
        count += 1;
        if batches.len() < 64 {
            batches.push(batch);
        }
    }
    assert_eq!(doc, index.num_documents(), "every document read");
    assert_eq!(seq, documents[documents.len() - 1] as usize, "every sequence read");
    if common::verbose() {
        eprintln!("megatron_reader: {doc} documents, {seq} sequences in {count} batches");
    }

    // The batches written back as a Megatron pair read back the same.
    if flags & 0x40 == 0 || batches.is_empty() || count > batches.len() {
        return;
    }
    let out = dir.join("out");
    let Ok(mut writer) = MegatronWriter::create(&out) else {
        return;
    };
    for batch in &batches {
        if writer.write(batch).is_err() {
            return;
        }
    }
    if writer.finish().is_err() {
        return;
    }
    let back: Vec<Batch> = MegatronReader::open(&out)
        .expect("lodt reads the pair it wrote")
        .with_batch_bytes(budget)
        .collect::<Result<_, _>>()
        .expect("lodt reads the batches it wrote");
    assert_eq!(back.len(), batches.len());
    for (b, a) in back.iter().zip(&batches) {
        assert_eq!(b.get("tokens"), a.get("tokens"), "a batch changed through a Megatron pair");
    }
});
