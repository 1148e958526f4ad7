"""Writes tests/data/big_row_group.parquet with pyarrow: one row group of
500,000 rows, each a list of 1,000 int64 zeros (4 GB once decoded, about
130 KB on disk: the pages are run-length encoded and compressed). A reader
must stream it in bounded batches (issue 28 §3).

The table is 500 chunks that are the same 1,000-row batch, so writing it
takes 8 MB. Run from the repository root:
    python tests/data/make_big_row_group.py [PATH]
"""

import sys

import pyarrow as pa
import pyarrow.parquet as pq

ROWS, WIDTH, CHUNK = 500_000, 1_000, 1_000


def make(path):
    """Writes the file at `path`; returns its (rows, width)."""
    zeros = pa.array([0] * (CHUNK * WIDTH), pa.int64())
    offsets = pa.array(range(0, (CHUNK + 1) * WIDTH, WIDTH), pa.int32())
    chunk = pa.ListArray.from_arrays(offsets, zeros)
    column = pa.chunked_array([chunk] * (ROWS // CHUNK))
    pq.write_table(pa.table({"x": column}), path, row_group_size=ROWS)
    return ROWS, WIDTH


if __name__ == "__main__":
    make(sys.argv[1] if len(sys.argv) > 1 else "tests/data/big_row_group.parquet")
