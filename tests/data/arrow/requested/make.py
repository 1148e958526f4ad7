"""Writes requested_schemas.arrow: an empty Arrow IPC file whose schema is
what pyarrow passes as a `requested_schema` for `pa.fixed_shape_tensor`
columns (`tests/it/arrow/arrow_requested.rs` reads it). Run with a python that has
pyarrow: `python tests/data/arrow/requested/make.py`."""
import os
import pyarrow as pa
import pyarrow.ipc as ipc

here = os.path.dirname(os.path.abspath(__file__))
fst = pa.fixed_shape_tensor(pa.float32(), [2, 4])
schema = pa.schema([
    # A tensor with no LoD: one row per element of shape [2, 4].
    pa.field("plain", fst),
    # What `pa.array(x, type=fst)` passes as the requested schema: the
    # extension's storage type alone, no extension metadata.
    pa.field("storage", fst.storage_type),
    # One LoD level: a (large) list of such elements.
    pa.field("large", pa.large_list(fst)),
    pa.field("list", pa.list_(fst)),
    # Another value type: a cast of the values.
    pa.field("float64", pa.large_list(pa.fixed_shape_tensor(pa.float64(), [2, 4]))),
    # Another shape: refused.
    pa.field("other_shape", pa.large_list(pa.fixed_shape_tensor(pa.float32(), [4, 2]))),
])
with ipc.new_file(os.path.join(here, "requested_schemas.arrow"), schema) as w:
    pass
