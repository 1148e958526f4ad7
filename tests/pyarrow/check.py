"""Reads the Parquet and Arrow IPC files lodt wrote with pyarrow and checks
every column against the manifest lodt wrote beside them.

Usage: python check.py DIR   (DIR holds manifest.json and the files it names)

For each column the manifest gives the dtype, the LoD (offsets, top level
first), the element shape and the flat values (bfloat16 as raw uint16 bits).
The check walks the pyarrow array the way spec/ARROW.md maps it: list levels
are LoD levels (their type must be the manifest's list type), the element
shape is nested fixed-size lists (tensor type nested_lists) or an
arrow.fixed_shape_tensor extension (fixed_shape), the leaf holds the values. Exit status 0 when everything matches, 1 otherwise.
"""
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

NUMPY = {
    "bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32,
    "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
    "uint64": np.uint64, "float16": np.float16, "float32": np.float32,
    "float64": np.float64, "bfloat16": np.uint16,
}
ARROW = {
    "bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(),
    "int64": pa.int64(), "uint8": pa.uint8(), "uint16": pa.uint16(),
    "uint32": pa.uint32(), "uint64": pa.uint64(), "float16": pa.float16(),
    "float32": pa.float32(), "float64": pa.float64(), "bfloat16": pa.uint16(),
}


class Mismatch(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Mismatch(what)


def check_column(where, array, field, col, list_type, tensor_type):
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    meta = field.metadata or {}
    expect(not field.nullable, f"{where}: the column field should be non-nullable")
    if col["dtype"] == "bfloat16":
        expect(meta.get(b"lodt.dtype") == b"bfloat16", f"{where}: missing lodt.dtype marker: {meta}")
    if col.get("scalar"):
        expect(meta.get(b"lodt.scalar") == b"true", f"{where}: missing lodt.scalar marker: {meta}")
        expect(len(array) == 1, f"{where}: a 0-D tensor is one row")
    lod = []
    while pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        is_large = pa.types.is_large_list(array.type)
        expect(is_large == (list_type == "large_list"), f"{where}: level {len(lod)} is {array.type}, expected {list_type}")
        expect(array.null_count == 0, f"{where}: null lists")
        offsets = array.offsets.to_numpy()
        base = int(offsets[0])
        lod.append([int(o) - base for o in offsets])
        array = array.values.slice(base, int(offsets[-1]) - base)
    expect(lod == col["lod"], f"{where}: lod {lod} != {col['lod']}")
    element_shape = []
    if isinstance(array.type, pa.FixedShapeTensorType):
        expect(tensor_type == "fixed_shape", f"{where}: the tensor extension, expected {tensor_type}")
        element_shape = list(array.type.shape)
        array = array.storage.flatten()
    elif pa.types.is_fixed_size_list(array.type):
        expect(tensor_type == "nested_lists", f"{where}: nested fixed-size lists, expected {tensor_type}")
        while pa.types.is_fixed_size_list(array.type):
            element_shape.append(array.type.list_size)
            array = array.flatten()
    expect(element_shape == col["element_shape"], f"{where}: element shape {element_shape} != {col['element_shape']}")
    expect(array.type == ARROW[col["dtype"]], f"{where}: leaf type {array.type}, expected {ARROW[col['dtype']]}")
    expect(array.null_count == 0, f"{where}: null values")
    got = array.to_numpy(zero_copy_only=False)
    want = np.array(col["values"], dtype=np.float64 if col["dtype"] in ("float16", "float32", "float64") else NUMPY[col["dtype"]])
    if col["dtype"] in ("float16", "float32", "float64"):
        got = got.astype(np.float64)
    expect(got.shape == want.shape, f"{where}: {got.shape[0]} values, expected {want.shape[0]}")
    expect(np.array_equal(got, want), f"{where}: values differ: {got[:8]} vs {want[:8]}")


def read_batches(path, fmt):
    if fmt == "parquet":
        f = pq.ParquetFile(path)
        return f.schema_arrow, [f.read_row_group(i) for i in range(f.num_row_groups)]
    if fmt == "ipc_file":
        r = ipc.open_file(path)
        return r.schema, [r.get_batch(i) for i in range(r.num_record_batches)]
    if fmt == "ipc_stream":
        r = ipc.open_stream(path)
        return r.schema, list(r)
    raise Mismatch(f"unknown format {fmt}")


def main(directory):
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    columns = 0
    for spec in manifest["files"]:
        path = os.path.join(directory, spec["path"])
        schema, batches = read_batches(path, spec["format"])
        where = spec["path"]
        expect(len(batches) == len(spec["batches"]), f"{where}: {len(batches)} batches, expected {len(spec['batches'])}")
        metadata = schema.metadata or {}
        for key, value in spec["metadata"].items():
            expect(metadata.get(key.encode()) == value.encode(), f"{where}: schema metadata {key!r}: {metadata}")
        for i, (batch, bspec) in enumerate(zip(batches, spec["batches"])):
            names = [c["name"] for c in bspec["columns"]]
            expect(batch.schema.names == names, f"{where} batch {i}: columns {batch.schema.names} != {names}")
            expect(batch.num_rows == bspec["rows"], f"{where} batch {i}: {batch.num_rows} rows, expected {bspec['rows']}")
            for col in bspec["columns"]:
                check_column(f"{where} batch {i} column {col['name']}", batch.column(col["name"]), schema.field(col["name"]), col, spec["list_type"], spec["tensor_type"])
                columns += 1
    print(f"pyarrow {pa.__version__}: {len(manifest['files'])} files, {columns} columns match")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Mismatch as e:
        print(f"MISMATCH: {e}", file=sys.stderr)
        sys.exit(1)
