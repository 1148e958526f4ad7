"""Writes the empty Parquet tables of tests/data/empty/ with pyarrow (each
one row group of 0 rows, as pyarrow writes any empty table): lodt reads
each as zero batches. Run from the repository root:
    python tests/data/empty/make_empty.py
"""

import pyarrow as pa
import pyarrow.parquet as pq

DIR = "tests/data/empty"

TABLES = {
    # One int64 column.
    "int64": pa.table({"x": pa.array([], pa.int64())}),
    # A list column (a 1-level LoD) and a float column.
    "list_and_float": pa.table(
        {"ids": pa.array([], pa.list_(pa.int32())), "w": pa.array([], pa.float32())}
    ),
    # A fixed-size list (an element shape), zstd-compressed, with metadata.
    "fixed_zstd": pa.table(
        {"v": pa.array([], pa.list_(pa.float64(), 3))}
    ).replace_schema_metadata({"source": "empty"}),
}


if __name__ == "__main__":
    for name, table in TABLES.items():
        compression = "zstd" if "zstd" in name else "snappy"
        pq.write_table(table, f"{DIR}/{name}.parquet", compression=compression)
        meta = pq.ParquetFile(f"{DIR}/{name}.parquet").metadata
        print(name, meta.num_row_groups, [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
