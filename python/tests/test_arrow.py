"""The Arrow PyCapsule interface with pyarrow: tensors, batches and files
export with no copy of tensor bytes, and come back equal."""

import numpy as np
import pytest

import lodt
from conftest import in_span, pyarrow_or_skip

pa = pyarrow_or_skip()


def _leaf(array):
    """The values array under every list level and the tensor extension."""
    while pa.types.is_large_list(array.type) or pa.types.is_list(array.type):
        array = array.values
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    while pa.types.is_fixed_size_list(array.type):
        array = array.values
    return array


def test_tensor_to_pyarrow_shares_buffers(words):
    arr = pa.array(words)
    assert arr.type == pa.large_list(
        pa.field("item", pa.large_list(pa.field("item", arr.type.value_type.value_type, False)), False)
    )
    assert arr.to_pylist()[1] == [[[9]]]
    values = _leaf(arr)
    assert values.buffers()[1].address == np.asarray(words).ctypes.data
    assert arr.offsets.to_pylist() == [0, 3, 4, 6]
    assert lodt.LodTensor.from_arrow(arr) == words


def test_mapped_file_tensor_exports_without_copy(sample_file):
    f = lodt.open(sample_file)
    t = f[0]["frames"]
    arr = pa.array(t)
    span = f._map_span()
    values = _leaf(arr)
    start, length = span
    assert start <= values.buffers()[1].address < start + length
    # The default: element shape [2, 3] as nested fixed-size lists.
    assert arr.type.value_type == pa.list_(pa.list_(pa.float32(), 3), 2)
    assert lodt.LodTensor.from_arrow(arr) == t
    # The tensor extension, on request: also over the map, read back the same.
    ext = t.to_arrow(tensor_type="fixed_shape")
    assert ext.type.value_type.extension_name == "arrow.fixed_shape_tensor"
    assert ext.type.value_type.shape == [2, 3]
    assert start <= _leaf(ext).buffers()[1].address < start + length
    assert lodt.LodTensor.from_arrow(ext) == t


def test_batch_to_table_and_back(sample_file):
    f = lodt.open(sample_file)
    b = f[1]
    table = pa.table(b)
    assert table.column_names == ["words", "frames", "labels"]
    assert table.schema.metadata == {b"step": b"1"}
    rb = pa.record_batch(b)
    assert rb.num_rows == 4
    assert lodt.Batch.from_arrow(table) == b
    assert lodt.Batch.from_arrow(rb) == b
    assert in_span(np.asarray(lodt.Batch.from_arrow(rb)["labels"]), f._map_span())


def test_file_as_a_stream(sample_file):
    f = lodt.open(sample_file)
    reader = pa.RecordBatchReader.from_stream(f)
    assert reader.schema.metadata == {b"source": b"tests", b"step": b"0"}
    batches = list(reader)
    assert [b.num_rows for b in batches] == [4, 4, 4]
    span = f._map_span()
    for k, rb in enumerate(batches):
        values = _leaf(rb.column("frames"))
        assert span[0] <= values.buffers()[1].address < span[0] + span[1]
        back = lodt.Batch.from_arrow(rb)
        for name in ["words", "frames", "labels"]:
            assert back[name] == f[k][name]
    table = pa.table(lodt.open(sample_file))
    assert table.num_rows == 12


def test_stream_and_chunked_inputs(words):
    chunked = pa.chunked_array([pa.array(words), pa.array(words)])
    t = lodt.LodTensor.from_arrow(chunked)
    assert t == lodt.merge([words, words])
    table = pa.concat_tables([pa.table(lodt.Batch({"w": words})), pa.table(lodt.Batch({"w": words}))])
    assert lodt.Batch.from_arrow(table)["w"] == lodt.merge([words, words])


def test_dtypes_and_pyarrow_made_arrays():
    for dtype in ["int8", "uint16", "int32", "uint64", "float16", "float32", "float64"]:
        t = lodt.LodTensor(np.arange(6).astype(dtype).reshape(3, 2), [[1, 2]])
        assert lodt.LodTensor.from_arrow(pa.array(t)) == t
    flags = lodt.LodTensor(np.array([True, False, True]), [[2, 1]])
    assert lodt.LodTensor.from_arrow(pa.array(flags)) == flags
    made = pa.array([[1, 2], [], [3]], type=pa.list_(pa.int64()))
    t = lodt.LodTensor.from_arrow(made)
    assert t.lod() == [[0, 2, 2, 3]] and t.tolist() == [[1, 2], [], [3]]
    sliced = pa.array([[1, 2], [3], [4, 5, 6]], type=pa.large_list(pa.int32()))[1:]
    assert lodt.LodTensor.from_arrow(sliced).lod() == [[0, 1, 4]]


def test_bfloat16_column_keeps_its_marker():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install 'lodt[bfloat16]')")
    t = lodt.LodTensor(np.array([1.5, 2.0, -3.0], dtype=ml_dtypes.bfloat16), [[1, 2]])
    b = lodt.Batch({"x": t})
    table = pa.table(b)
    assert table.schema.field("x").metadata == {b"lodt.dtype": b"bfloat16"}
    assert lodt.Batch.from_arrow(table)["x"] == t


def test_arrow_errors_are_exceptions():
    with pytest.raises(ValueError, match="null"):
        lodt.LodTensor.from_arrow(pa.array([[1], None], type=pa.list_(pa.int64())))
    with pytest.raises(TypeError, match="Utf8|String|string"):
        lodt.LodTensor.from_arrow(pa.array(["a", "b"]))
    with pytest.raises(TypeError, match="PyCapsule"):
        lodt.LodTensor.from_arrow(42)
    with pytest.raises(TypeError, match="struct"):
        lodt.Batch.from_arrow(pa.array([1, 2]))
    rows = lodt.Batch({"a": lodt.LodTensor(np.zeros(2)), "b": lodt.LodTensor(np.zeros(3))})
    with pytest.raises(ValueError, match="rows"):
        pa.table(rows)
