"""Writes the seeds of the `megatron_reader` and `mds_reader` fuzz targets,
packed in each target's input framing (see the targets' doc comments).
Standard library only.

Usage (from fuzz/): python3 seeds/make_seeds_megatron_mds.py seeds
  (writes seeds/megatron_reader/ and seeds/mds_reader/)

- megatron_reader: small `.idx`/`.bin` pairs laid out as megatron-core's
  `_IndexWriter` and `IndexedDatasetBuilder` lay them out (spec/MEGATRON.md;
  lodt's writer is checked byte for byte against megatron-core in
  python/tests/test_megatron.py): one sequence per document and several,
  every token dtype, empty documents and sequences, an empty dataset.
- mds_reader: the datasets of tests/data/mds/ (written by MosaicML
  Streaming's MDSWriter, raw and zstd), their index.json cut to the one or
  two shards the seed carries, and once whole (naming three shards that are
  not there).
"""
import json
import os
import struct
import sys

out = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "..", "tests", "data", "mds")
dirs = {k: os.path.join(out, k) for k in ["megatron_reader", "mds_reader"]}
for d in dirs.values():
    os.makedirs(d, exist_ok=True)

# --- Megatron -------------------------------------------------------------

# megatron-core's DType codes, the struct format and size of each.
CODES = {"uint8": (1, "B"), "int8": (2, "b"), "int16": (3, "h"), "int32": (4, "i"),
         "int64": (5, "q"), "float64": (6, "d"), "float32": (7, "f"), "uint16": (8, "H")}


def megatron(name, dtype, documents, flags=0):
    """documents: a list of documents, each a list of sequences (token lists)."""
    code, fmt = CODES[dtype]
    size = struct.calcsize("<" + fmt)
    lengths, pointers, doc_index, bin_ = [], [], [0], b""
    for doc in documents:
        for seq in doc:
            pointers.append(len(bin_))
            lengths.append(len(seq))
            bin_ += struct.pack(f"<{len(seq)}{fmt}", *seq)
        doc_index.append(len(lengths))
    idx = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + bytes([code])
    idx += struct.pack("<QQ", len(lengths), len(doc_index))
    idx += struct.pack(f"<{len(lengths)}i", *lengths)
    idx += struct.pack(f"<{len(pointers)}q", *pointers)
    idx += struct.pack(f"<{len(doc_index)}q", *doc_index)
    assert len(idx) == 34 + 12 * len(lengths) + 8 * len(doc_index) and len(bin_) == size * sum(lengths)
    frame = bytes([flags]) + struct.pack("<I", len(idx)) + idx + bin_
    open(os.path.join(dirs["megatron_reader"], name), "wb").write(frame)


# Flags: bits 0-1 the path opened, bits 3-5 the batch budget, bit 6 write back.
megatron("int32_one_seq_per_doc", "int32", [[[1, 2, 3]], [[4]], [[5, 6]]], flags=0x40)
megatron("uint16_docs_of_sequences", "uint16", [[[1, 2], [3]], [[4, 5, 6], [7], [8, 9]], [[10]]],
         flags=0x40 | 0x08 | 1)
megatron("int64_small_batches", "int64", [[[i, i + 1]] for i in range(6)], flags=0x40 | 0x18 | 2)
megatron("uint8_empty_docs_and_seqs", "uint8", [[[1, 2]], [], [[]], [[3], [], [4, 5]]], flags=0x40 | 0x20)
megatron("float32", "float32", [[[0.5, 1.5]], [[2.5]]], flags=0x28)
megatron("float64", "float64", [[[1.0], [2.0, 3.0]]], flags=0x30)
megatron("int16", "int16", [[[-1, 2, -3]], [[4]]], flags=0x38 | 0x40)
megatron("int8", "int8", [[[-1]], [[2, 3]]], flags=0x10)
megatron("empty", "int32", [], flags=0)

# --- MDS ------------------------------------------------------------------


def shard_file(kind, k):
    name = f"shard.{k:05d}.mds" + (".zstd" if kind == "zstd" else "")
    return open(os.path.join(data, kind, name), "rb").read()


def index(kind):
    return json.load(open(os.path.join(data, kind, "index.json")))["shards"]


def mds(name, shards, files, whole=None):
    """shards: the index.json entries; files: (kind, k) of the one or two
    shard files carried (the first is shard 0's, the second shard 1's)."""
    doc = whole if whole is not None else {"shards": shards, "version": 2}
    js = json.dumps(doc, sort_keys=True).encode()
    flags = 0
    if files[0][0] == "zstd":
        flags |= 1
    if len(files) > 1 and files[1][0] == "zstd":
        flags |= 2
    if len(files) < 2:
        flags |= 4
    first = shard_file(*files[0])
    second = shard_file(*files[1]) if len(files) > 1 else b""
    frame = bytes([flags]) + struct.pack("<HH", len(js), len(first)) + js + first + second
    assert len(frame) <= 65536
    open(os.path.join(dirs["mds_reader"], name), "wb").write(frame)


raw, zstd = index("raw"), index("zstd")
mds("raw_one_shard", raw[:1], [("raw", 0)])
mds("raw_two_shards", raw[:2], [("raw", 0), ("raw", 1)])
mds("zstd_one_shard", zstd[:1], [("zstd", 0)])
mds("zstd_two_shards", zstd[:2], [("zstd", 0), ("zstd", 1)])
mds("raw_then_zstd", [raw[0], zstd[1]], [("raw", 0), ("zstd", 1)])
mds("raw_index_missing_shards", None, [("raw", 0), ("raw", 1)],
    whole=json.load(open(os.path.join(data, "raw", "index.json"))))
mds("zstd_index_missing_shards", None, [("zstd", 0), ("zstd", 1)],
    whole=json.load(open(os.path.join(data, "zstd", "index.json"))))
print("seeds written to", out)
