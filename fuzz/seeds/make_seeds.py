"""Writes small seed files for the foreign-format fuzz targets with pyarrow.

Usage: python make_seeds.py OUTDIR  (writes OUTDIR/{ipc_file,ipc_stream,parquet_reader,convert}/)
Each seed covers one thing lodt reads: nested lists and large lists, fixed-size
lists, every primitive type, nulls (null lists, which lodt maps by policy),
sliced arrays, several batches / row groups, dictionary and plain Parquet
encodings, data page v1 and v2, and a few types lodt refuses.
"""
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

out = sys.argv[1]
dirs = {k: os.path.join(out, k) for k in ["ipc_file", "ipc_stream", "parquet_reader", "convert"]}
for d in dirs.values():
    os.makedirs(d, exist_ok=True)


def tables():
    words = pa.array([[[1, 2], [3]], [[4, 5, 6]], []], pa.list_(pa.list_(pa.int64())))
    frames = pa.array(
        [[[0.5, 1.5], [2.5, 3.5]], [[4.0, 5.0]], [[6.0, 7.0]]],
        pa.list_(pa.list_(pa.float32(), 2)),
    )
    labels = pa.array([True, False, True])
    yield "basic", pa.table({"words": words, "frames": frames, "labels": labels})
    prims = {}
    for t in [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
              pa.uint32(), pa.uint64(), pa.float32(), pa.float64()]:
        prims[str(t)] = pa.array([[1, 2], [3]], pa.list_(t))
    prims["float16"] = pa.array([np.array([1, 2], np.float16), np.array([3], np.float16)],
                                pa.list_(pa.float16()))
    prims["bool"] = pa.array([[True], [False, True]], pa.list_(pa.bool_()))
    yield "prims", pa.table(prims)
    yield "large", pa.table({
        "x": pa.array([[[1], [2, 3]], [[4]]], pa.large_list(pa.large_list(pa.int32()))),
    })
    yield "nulls", pa.table({
        "x": pa.array([[1, 2], None, [3]], pa.list_(pa.int64())),
        "y": pa.array([[1.0], [None], [2.0]], pa.list_(pa.float64())),
    })
    yield "sliced", pa.table({
        "x": pa.array([[1], [2, 3], [4, 5, 6], [7]], pa.list_(pa.int16())).slice(1, 2),
    })
    yield "flat", pa.table({"x": pa.array(np.arange(12, dtype=np.float32)),
                            "y": pa.array(np.arange(12, dtype=np.int64))})
    yield "deep", pa.table({
        "x": pa.array([[[[[1]]]], [[[[2, 3]], [[4]]]]],
                      pa.list_(pa.list_(pa.list_(pa.list_(pa.int8()))))),
    })
    yield "fsl_nested", pa.table({
        "x": pa.array([[[[1, 2], [3, 4]]], [[[5, 6], [7, 8]]]],
                      pa.list_(pa.list_(pa.list_(pa.uint8(), 2), 2))),
    })
    yield "empty", pa.table({"x": pa.array([], pa.list_(pa.int64()))})
    yield "strings", pa.table({"s": pa.array(["a", "bc"]), "x": pa.array([[1], [2]], pa.list_(pa.int32()))})
    yield "meta", pa.table({"x": pa.array([[1]], pa.list_(pa.int64()))}).replace_schema_metadata(
        {"lodt.k": "v", "other": "w"})


def write_ipc(name, table, batches, options=None):
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema, options=options) as w:
        for b in batches:
            w.write_batch(b)
    data = sink.getvalue().to_pybytes()
    open(os.path.join(dirs["ipc_file"], name + ".arrow"), "wb").write(data)
    open(os.path.join(dirs["convert"], name + ".arrow.in"), "wb").write(b"\x00" + data)
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema, options=options) as w:
        for b in batches:
            w.write_batch(b)
    data = sink.getvalue().to_pybytes()
    open(os.path.join(dirs["ipc_stream"], name + ".arrows"), "wb").write(data)
    open(os.path.join(dirs["convert"], name + ".arrows.in"), "wb").write(b"\x01" + data)


def write_pq(name, table, **kw):
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kw)
    data = sink.getvalue().to_pybytes()
    open(os.path.join(dirs["parquet_reader"], name + ".parquet"), "wb").write(data)
    open(os.path.join(dirs["convert"], name + ".parquet.in"), "wb").write(b"\x02" + data)


def leaf_encodings(table):
    """A non-dictionary encoding for each column: delta for integers, byte
    stream split for floats, RLE for booleans."""
    enc = {}
    for field in table.schema:
        t = field.type
        while hasattr(t, "value_type"):
            t = t.value_type
        if pa.types.is_integer(t):
            enc[field.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(t) and not pa.types.is_float16(t):
            enc[field.name] = "BYTE_STREAM_SPLIT"
        elif pa.types.is_boolean(t):
            enc[field.name] = "RLE"
    return enc


def write_variants(name, table):
    """The codecs, encodings and page layouts parquet reads (and a few it is
    built without: gzip, brotli), so the fuzzer starts from valid pages of each."""
    variants = {
        "lz4": dict(compression="lz4"),
        "zstd": dict(compression="zstd", data_page_version="2.0"),
        "gzip": dict(compression="gzip"),
        "brotli": dict(compression="brotli"),
        "delta": dict(use_dictionary=False, column_encoding=leaf_encodings(table)),
        "pages": dict(data_page_size=32, write_batch_size=1, row_group_size=2),
        "index": dict(write_page_index=True, write_statistics=True),
        "bare": dict(store_schema=False, write_statistics=False, use_dictionary=False),
        "crc": dict(write_page_checksum=True),
    }
    for suffix, kw in variants.items():
        try:
            write_pq(f"{name}_{suffix}", table, **kw)
        except (pa.ArrowException, ValueError, TypeError) as e:
            print(f"skipped {name}_{suffix}: {e}")


def write_ipc_compressed(name, table, batches):
    for codec in ("lz4", "zstd"):
        write_ipc(f"{name}_{codec}", table, batches, ipc.IpcWriteOptions(compression=codec))


for name, table in tables():
    batches = table.to_batches()
    if table.num_rows >= 2:
        batches = table.slice(0, 1).to_batches() + table.slice(1).to_batches()
    write_ipc(name, table, batches)
    write_pq(name, table, row_group_size=2)
    if name in ("basic", "prims", "nulls"):
        write_pq(name + "_plain_v2", table, use_dictionary=False, data_page_version="2.0",
                 compression="none", write_statistics=False)
        write_pq(name + "_v1_snappy", table, data_page_version="1.0", compression="snappy")
    if name in ("basic", "prims", "nulls", "deep", "fsl_nested", "flat"):
        write_variants(name, table)
    if name in ("basic", "nulls"):
        write_ipc_compressed(name, table, batches)

# Larger inputs: many pages per column chunk, dictionary fallback, long runs.
rng = np.random.default_rng(7)
lengths = rng.integers(0, 6, 300)
values = rng.integers(-1000, 1000, int(lengths.sum()))
offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
big = pa.table({
    "ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int64())),
    "runs": pa.array([[i // 60] * 3 for i in range(300)], pa.list_(pa.int32())),
    "w": pa.array(rng.standard_normal((300, 2)).astype(np.float32).tolist(),
                  pa.list_(pa.float32(), 2)),
})
write_pq("big_pages", big, row_group_size=120, data_page_size=256, write_batch_size=16)
write_pq("big_dict_fallback", big, dictionary_pagesize_limit=64, data_page_size=512)
write_pq("big_delta_zstd", big, use_dictionary=False, data_page_version="2.0",
         compression="zstd", column_encoding={"ids": "DELTA_BINARY_PACKED",
                                              "runs": "DELTA_BINARY_PACKED",
                                              "w": "BYTE_STREAM_SPLIT"})
write_ipc("big", big, big.to_batches(max_chunksize=100))
