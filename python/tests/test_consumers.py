"""Arrow consumers read lodt's tensor columns through the default export,
with no cast: awkward, Hugging Face datasets, DuckDB and Polars, from the
PyCapsule interface (``pa.table(batch)`` where a consumer takes pyarrow
tables only) and from a Parquet file written by ``lodt.convert``. Element
shapes [3] and [2, 4], under 1- and 2-level LoDs; values equal.

Also: the PyCapsule ``requested_schema``, honoured (lodt's other mapping,
or a cast) or refused with an error."""

import os

import numpy as np
import pytest

import lodt
from conftest import pyarrow_or_skip

pa = pyarrow_or_skip()
# Hugging Face datasets: no network (everything here is local), read when it is imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

LODS = {
    "lod1": [[2, 0, 3]],
    "lod2": [[2, 1], [1, 2, 2]],
}
SHAPES = {"s3": [3], "s2x4": [2, 4]}
CASES = [(s, l) for s in SHAPES for l in LODS]


def _tensor(shape, lod):
    rows = sum(lod[-1])
    values = (np.arange(rows * int(np.prod(shape))) * 0.5).astype(np.float32)
    return lodt.create_lod_tensor(values.reshape([rows, *shape]), lod)


def _expected(shape, lod):
    """The column as nested Python lists: a list per LoD level, then the
    element shape's nested lists of floats."""
    rows = sum(lod[-1])
    values = (np.arange(rows * int(np.prod(shape))) * 0.5).astype(np.float32)
    items = values.reshape([rows, *shape]).tolist()
    for lengths in reversed(lod):
        grouped, at = [], 0
        for n in lengths:
            grouped.append(items[at : at + n])
            at += n
        items = grouped
    return items


def _plain(value):
    """Tuples (DuckDB's arrays), numpy arrays and scalars as nested lists of floats."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    return float(value)


@pytest.fixture(params=CASES, ids=[f"{s}-{l}" for s, l in CASES])
def case(request, tmp_path):
    """(batch, expected column, Parquet file written by lodt.convert)."""
    shape, lod = SHAPES[request.param[0]], LODS[request.param[1]]
    batch = lodt.Batch({"x": _tensor(shape, lod)})
    path = tmp_path / "x.lodt"
    with lodt.Writer(path) as w:
        w.write(batch)
    parquet = tmp_path / "x.parquet"
    lodt.convert(path, parquet)
    return batch, _expected(shape, lod), parquet


def test_the_default_export_is_nested_lists_without_the_extension(case):
    batch, expected, _ = case
    table = pa.table(batch)
    t = table.schema.field("x").type
    while pa.types.is_large_list(t):
        t = t.value_type
    assert pa.types.is_fixed_size_list(t) and not isinstance(t, pa.BaseExtensionType)
    assert table.column("x").to_pylist() == expected


def test_awkward_reads_the_columns(case):
    ak = pytest.importorskip("awkward", reason="awkward is not installed")
    batch, expected, parquet = case
    assert _plain(ak.from_arrow(pa.table(batch))["x"].tolist()) == expected
    assert _plain(ak.from_parquet(str(parquet))["x"].tolist()) == expected


def test_hugging_face_datasets_read_the_columns(case, tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is not installed")
    batch, expected, parquet = case
    ds = datasets.Dataset(pa.table(batch))
    assert _plain(ds.to_dict()["x"]) == expected
    ds = datasets.Dataset.from_parquet(str(parquet), cache_dir=str(tmp_path / "hf"))
    assert _plain(ds.to_dict()["x"]) == expected
    # The element shape is in the features: lists of fixed lengths.
    assert "length=" in repr(ds.features["x"])


def test_duckdb_reads_the_columns(case):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    batch, expected, parquet = case
    con = duckdb.connect()
    # The lodt batch itself, through the PyCapsule stream.
    con.register("lodt_batch", batch)
    rows = con.execute("select x from lodt_batch").fetchall()
    assert _plain([r[0] for r in rows]) == expected
    rows = con.execute(f"select x from read_parquet('{parquet}')").fetchall()
    assert _plain([r[0] for r in rows]) == expected
    # The element shape is an ARRAY type, not a flattened list.
    (types,) = [con.execute("select x from lodt_batch").description[0][1]]
    assert "[" in str(types)


def test_polars_reads_the_columns(case):
    pl = pytest.importorskip("polars", reason="polars is not installed")
    batch, expected, parquet = case
    df = pl.DataFrame(batch)  # the PyCapsule stream
    assert _plain(df["x"].to_list()) == expected
    assert _plain(pl.read_parquet(parquet)["x"].to_list()) == expected
    dtype = df.schema["x"]
    while isinstance(dtype, pl.List):
        dtype = dtype.inner
    assert isinstance(dtype, pl.Array)


# -- requested_schema ----------------------------------------------------------


def _frames():
    return _tensor([2, 4], [[2, 1]])


def test_a_requested_tensor_extension_is_produced(sample_file):
    t = _frames()
    ext = t.to_arrow(tensor_type="fixed_shape").type
    assert ext.value_type.extension_name == "arrow.fixed_shape_tensor"
    # pyarrow passes `type` as the requested schema of __arrow_c_array__.
    arr = pa.array(t, type=ext)
    assert arr.type == ext
    assert lodt.LodTensor.from_arrow(arr) == t
    # A batch stream and a file stream, with a requested schema.
    batch = lodt.Batch({"frames": t})
    schema = batch.to_arrow(tensor_type="fixed_shape").schema
    reader = pa.RecordBatchReader.from_stream(batch, schema=schema)
    assert reader.schema == schema
    assert lodt.Batch.from_arrow(reader.read_all()) == batch
    f = lodt.open(sample_file)
    wanted = f[0].to_arrow(tensor_type="fixed_shape").schema
    reader = pa.RecordBatchReader.from_stream(f, schema=wanted)
    frames = reader.schema.field("frames").type.value_type
    assert frames.extension_name == "arrow.fixed_shape_tensor"
    back = [lodt.Batch.from_arrow(rb) for rb in reader]
    assert [b["frames"] for b in back] == [f[k]["frames"] for k in range(3)]


def test_a_requested_cast_is_produced():
    t = _frames()
    # 32-bit lists, float64 values, other field names: arrow-rs casts.
    wanted = pa.list_(pa.field("element", pa.list_(pa.list_(pa.float64(), 4), 2)))
    arr = pa.array(t, type=wanted)
    assert arr.type == wanted
    assert arr.to_pylist() == _expected([2, 4], [[2, 1]])
    batch = lodt.Batch({"frames": t})
    schema = pa.schema([pa.field("frames", wanted)])
    table = pa.RecordBatchReader.from_stream(batch, schema=schema).read_all()
    assert table.schema == schema
    back = lodt.Batch.from_arrow(table)["frames"]
    assert (back.shape(), back.lod()) == ([3, 2, 4], t.lod())
    assert np.array_equal(np.asarray(back), np.asarray(t).astype(np.float64))


def test_a_pyarrow_fixed_shape_tensor_type_is_produced():
    # pyarrow requests the extension's bare storage (fixed_size_list[8]).
    t = lodt.LodTensor(np.arange(24, dtype=np.float32).reshape(3, 2, 4))
    ty = pa.fixed_shape_tensor(pa.float32(), [2, 4])
    arr = pa.array(t, type=ty)
    # pyarrow hands back what it asked for: the storage, which wraps as the
    # extension type it was asked for.
    assert arr.type in (ty, ty.storage_type)
    if arr.type == ty.storage_type:
        arr = pa.ExtensionArray.from_storage(ty, arr)
    assert np.array_equal(arr.to_numpy_ndarray(), np.asarray(t))
    with pytest.raises(ValueError, match="cannot produce"):
        pa.array(t, type=pa.fixed_shape_tensor(pa.float32(), [8, 1]).storage_type.value_type)


def test_a_lossy_requested_cast_is_an_error():
    for values, dtype, to, shown in (
        ([1.0, 1e5], np.float32, pa.float16(), "100000"),
        ([0.0, 0.5], np.float64, pa.bool_(), "0.5"),
        ([1, 2**53 + 1], np.int64, pa.float32(), "9007199254740993"),
    ):
        t = lodt.LodTensor(np.array(values, dtype=dtype))
        with pytest.raises(ValueError, match="loses value " + shown):
            pa.array(t, type=to)
    # Exact casts still work.
    assert pa.array(lodt.LodTensor(np.array([0.0, 1.0])), type=pa.bool_()).to_pylist() == [False, True]


def test_an_impossible_requested_schema_is_an_error():
    t = _frames()
    with pytest.raises(ValueError, match="cannot produce the requested Arrow type"):
        pa.array(t, type=pa.string())
    batch = lodt.Batch({"frames": t})
    with pytest.raises(ValueError, match="requested schema has columns"):
        pa.RecordBatchReader.from_stream(batch, schema=pa.schema([("other", pa.int64())]))
    with pytest.raises(ValueError, match="tensor_type"):
        t.to_arrow(tensor_type="variable")


def test_convert_writes_either_tensor_type(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    batch = lodt.Batch({"frames": _frames()})
    src = tmp_path / "f.lodt"
    with lodt.Writer(src) as w:
        w.write(batch)
    for tensor_type, extension in [("nested_lists", False), ("fixed_shape", True)]:
        dst = tmp_path / f"{tensor_type}.parquet"
        lodt.convert(src, dst, tensor_type=tensor_type)
        item = pq.read_table(dst).schema.field("frames").type.value_type
        assert isinstance(item, pa.BaseExtensionType) == extension, item
        back = tmp_path / f"{tensor_type}.lodt"
        lodt.convert(dst, back)
        assert lodt.open(back)[0]["frames"] == batch["frames"]
    with pytest.raises(ValueError, match="expected nested_lists or fixed_shape or variable_shape"):
        lodt.convert(src, tmp_path / "x.parquet", tensor_type="ragged")
