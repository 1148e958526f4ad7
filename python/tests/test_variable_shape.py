"""Per-row tensors of different shapes from Arrow (spec/ARROW.md, section 9):
Arrow's canonical ``arrow.variable_shape_tensor`` (built here as its struct
storage with the canonical field metadata: pyarrow 26 has no Python class for
it, though its C++ core restores the type from IPC files), in memory and in
Parquet and IPC files written by pyarrow, and Ray Data's own variable-shaped
tensor type, from a real Ray Dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.ipc as ipc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import lodt  # noqa: E402
from conftest import in_span  # noqa: E402

NAME = "ARROW:extension:name"
META = "ARROW:extension:metadata"
KEY = "lodt.variable_shape_tensor."


def column(name, rows, metadata=None, dtype=np.float32):
    """The canonical column of ``rows`` (numpy arrays of one rank): its field
    and its struct storage array."""
    ndim = rows[0].ndim if rows else 2
    value_type = pa.from_numpy_dtype(np.dtype(dtype))
    storage = pa.struct(
        [
            pa.field("data", pa.list_(pa.field("item", value_type, False)), False),
            pa.field("shape", pa.list_(pa.field("item", pa.int32(), False), ndim), False),
        ]
    )
    array = pa.array(
        [{"data": r.ravel().tolist(), "shape": list(r.shape)} for r in rows], type=storage
    )
    field_meta = {NAME: "arrow.variable_shape_tensor"}
    if metadata is not None:
        field_meta[META] = json.dumps(metadata)
    return pa.field(name, storage, nullable=False, metadata=field_meta), array


def table(name, rows, metadata=None, **schema_meta):
    field, array = column(name, rows, metadata)
    return pa.Table.from_arrays([array], schema=pa.schema([field], metadata=schema_meta or None))


def frames(lengths, width=3, start=0):
    """Rows of shape ``[n, width]`` holding consecutive values."""
    out, v = [], start
    for n in lengths:
        out.append(np.arange(v, v + n * width, dtype=np.float32).reshape(n, width))
        v += n * width
    return out


def images():
    rng = np.random.default_rng(7)
    return [rng.random(s, dtype=np.float32) for s in [(2, 3), (4, 1), (1, 1), (3, 5)]]


def check_frames(t, rows):
    assert t.element_shape == list(rows[0].shape[1:])
    assert t.lod() == [list(np.cumsum([0] + [r.shape[0] for r in rows]))]
    np.testing.assert_array_equal(t.numpy(), np.concatenate(rows))


def check_pair(batch, name, rows):
    values, shape = batch[name], batch[name + ".shape"]
    sizes = [r.size for r in rows]
    assert values.lod() == [list(np.cumsum([0] + sizes))]
    np.testing.assert_array_equal(values.numpy(), np.concatenate([r.ravel() for r in rows]))
    assert shape.dtype == "int32" and shape.num_levels == 0
    np.testing.assert_array_equal(shape.numpy(), np.array([r.shape for r in rows]))
    # Row r is the values of sequence r in the shape of row r.
    for i, r in enumerate(rows):
        np.testing.assert_array_equal(values.sequence(0, i).numpy().reshape(shape.numpy()[i]), r)


def test_rows_varying_in_their_first_dimension_read_as_one_tensor():
    rows = frames([2, 1, 0, 4])
    meta = {"dim_names": ["time", "feature"], "permutation": [0, 1]}
    t = table("x", rows, meta, split="train")
    batch = lodt.Batch.from_arrow(t)
    assert list(batch) == ["x"]
    check_frames(batch["x"], rows)
    # The values are Arrow's, not a copy.
    values = t.column("x").chunk(0).field("data").values.buffers()[1]
    assert in_span(batch["x"].numpy(), (values.address, values.size))
    assert batch["x"].shape() == [7, 3]
    assert batch.metadata["split"] == "train"
    assert json.loads(batch.metadata[KEY + "x"]) == meta


def test_uniform_shape_decides_the_element_shape_even_without_rows():
    meta = {"uniform_shape": [None, 4, 2]}
    field, _ = column("x", [np.zeros((1, 4, 2), np.float32)], meta)
    empty = pa.Table.from_arrays([pa.array([], type=field.type)], schema=pa.schema([field]))
    t = lodt.Batch.from_arrow(empty)["x"]
    assert (t.shape(), t.lod()) == ([0, 4, 2], [[0]])


def test_images_of_different_sizes_read_as_values_and_shapes():
    rows = images()
    batch = lodt.Batch.from_arrow(table("img", rows, {"dim_names": ["H", "W"]}))
    assert list(batch) == ["img", "img.shape"]
    check_pair(batch, "img", rows)
    assert json.loads(batch.metadata[KEY + "img"]) == {"dim_names": ["H", "W"]}


def test_a_column_of_images_alone_is_pointed_to_a_batch():
    # A one-column table: LodTensor.from_arrow reads its column.
    with pytest.raises(ValueError, match='reads as two tensors, "img" and "img.shape"'):
        lodt.LodTensor.from_arrow(table("img", images(), {}))


def test_a_shape_that_does_not_hold_its_values_is_a_clear_error():
    field, array = column("x", frames([2, 1]))
    bad = pa.StructArray.from_arrays(
        [array.field("data"), pa.array([[2, 3], [2, 3]], type=array.type.field("shape").type)],
        fields=list(array.type),
    )
    with pytest.raises(ValueError, match=r"row 1 has shape \[2, 3\], its data holds 3 values"):
        lodt.Batch.from_arrow(pa.Table.from_arrays([bad], schema=pa.schema([field])))


def write_ipc(path, tables):
    with ipc.new_file(str(path), tables[0].schema) as w:
        for t in tables:
            w.write_table(t)


@pytest.mark.parametrize("kind", ["ipc", "parquet"])
def test_files_written_by_pyarrow_convert_to_lodt_with_their_metadata(tmp_path, kind):
    meta = {"dim_names": ["time", "feature"], "permutation": [1, 0]}
    parts = [frames([2, 3]), frames([1, 5, 2], start=100)]
    tables = [table("x", rows, meta) for rows in parts]
    src = tmp_path / ("in.arrow" if kind == "ipc" else "in.parquet")
    if kind == "ipc":
        write_ipc(src, tables)
    else:
        pq.write_table(pa.concat_tables(tables), str(src), row_group_size=2)

    dst = tmp_path / "out.lodt"
    lodt.convert(src, dst, batch_rows=None)
    all_rows = parts[0] + parts[1]
    with lodt.File(dst) as f:
        got = [f[k] for k in range(len(f))]
    assert sum(b["x"].num_sequences() for b in got) == len(all_rows)
    for b in got:
        assert json.loads(b.metadata[KEY + "x"]) == meta
    merged = np.concatenate([b["x"].numpy() for b in got])
    np.testing.assert_array_equal(merged, np.concatenate(all_rows))
    if kind == "ipc":
        # pyarrow's C++ core knows the type: the IPC file reads back as the
        # extension type, which converts the same way. (Its Parquet reader
        # returns the bare struct, without the field metadata.)
        reread = ipc.open_file(str(src)).read_all()
        assert reread.schema.field("x").type.extension_name == "arrow.variable_shape_tensor"
        check_frames(lodt.Batch.from_arrow(reread)["x"], all_rows)
        # One column alone reads as its one tensor.
        check_frames(lodt.LodTensor.from_arrow(reread.column("x")), all_rows)


def test_images_in_an_ipc_stream_and_a_parquet_file(tmp_path):
    rows = images()
    # `{}`: pyarrow's IPC reader wants JSON metadata (lodt reads none as `{}`).
    t = table("img", rows, {})
    src = tmp_path / "img.parquet"
    pq.write_table(t, str(src))
    dst = tmp_path / "img.lodt"
    lodt.convert(src, dst)
    with lodt.File(dst) as f:
        check_pair(f[0], "img", rows)
        assert not any(k.startswith(KEY) for k in f[0].metadata)
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    check_pair(lodt.Batch.from_arrow(ipc.open_stream(sink.getvalue()).read_all()), "img", rows)


# ---------------------------------------------------------------------------
# Ray Data's variable-shaped tensors
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'lodt[ray]')")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


def ray_table(ray, rows):
    ds = ray.data.from_items([{"t": r} for r in rows], override_num_blocks=1)
    tables = ray.get(ds.to_arrow_refs())
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def test_a_ray_dataset_of_variable_shaped_tensors_reads(local_ray, tmp_path):
    rows = images()
    t = ray_table(local_ray, rows)
    field = t.schema.field("t")
    assert field.type.extension_name == "ray.data.arrow_variable_shaped_tensor"
    assert str(field.type.storage_type) == (
        "struct<data: large_list<item: float>, shape: list<item: int64>>"
    )
    batch = lodt.Batch.from_arrow(t)
    check_pair(batch, "t", rows)
    assert not any(k.startswith(KEY) for k in batch.metadata)
    # Ray's Parquet output reads too.
    out = tmp_path / "ray"
    local_ray.data.from_items([{"t": r} for r in rows], override_num_blocks=1).write_parquet(str(out))
    (src,) = sorted(out.glob("*.parquet"))
    lodt.convert(src, tmp_path / "ray.lodt")
    with lodt.File(tmp_path / "ray.lodt") as f:
        check_pair(f[0], "t", rows)


def test_a_ray_column_varying_in_its_first_dimension_reads_as_one_tensor(local_ray):
    rows = frames([2, 5, 1])
    t = ray_table(local_ray, rows)
    assert t.schema.field("t").type.extension_name == "ray.data.arrow_variable_shaped_tensor"
    check_frames(lodt.Batch.from_arrow(t)["t"], rows)


def test_the_variable_shape_export_option_writes_the_canonical_extension(tmp_path):
    rows = frames([2, 1, 3])
    clips = lodt.create_lod_tensor(np.concatenate(rows), [[r.shape[0] for r in rows]])
    labels = lodt.LodTensor(np.array([4, 5, 6], dtype=np.int64))
    batch = lodt.Batch({"clips": clips, "labels": labels})
    # In memory: a tensor and a batch.
    arr = clips.to_arrow(tensor_type="variable_shape")
    assert arr.type.extension_name == "arrow.variable_shape_tensor"
    assert arr.storage.field("shape").to_pylist() == [[2, 3], [1, 3], [3, 3]]
    rb = batch.to_arrow(tensor_type="variable_shape")
    field = rb.schema.field("clips")
    # pyarrow's C++ core knows the canonical type: the field comes as it.
    assert field.type.extension_name == "arrow.variable_shape_tensor"
    assert rb.column("labels").to_pylist() == [4, 5, 6]
    assert lodt.Batch.from_arrow(rb) == batch
    # A file: lodt convert to IPC, read by pyarrow as the extension type.
    src = tmp_path / "clips.lodt"
    with lodt.Writer(src) as w:
        w.write(batch)
    dst = tmp_path / "clips.arrow"
    lodt.convert(src, dst, tensor_type="variable_shape")
    table = ipc.open_file(str(dst)).read_all()
    assert table.schema.field("clips").type.extension_name == "arrow.variable_shape_tensor"
    storage = table.column("clips").combine_chunks().storage
    assert storage.field("shape").to_pylist() == [[2, 3], [1, 3], [3, 3]]
    np.testing.assert_array_equal(
        np.concatenate(storage.field("data").to_pylist()), np.concatenate(rows).ravel()
    )
    check_frames(lodt.Batch.from_arrow(table)["clips"], rows)
