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


def write_ipc(name, table, batches):
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as w:
        for b in batches:
            w.write_batch(b)
    data = sink.getvalue().to_pybytes()
    open(os.path.join(dirs["ipc_file"], name + ".arrow"), "wb").write(data)
    open(os.path.join(dirs["convert"], name + ".arrow.in"), "wb").write(b"\x00" + data)
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
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
