"""TensorFlow interop: LoD tensors to tf.RaggedTensor (from_nested_row_splits
over every level) and back, with the real TensorFlow."""

import numpy as np
import pytest

import lodt
from conftest import tensorflow_or_skip
from frameworks import cases, make

tf = tensorflow_or_skip()
import lodt.tf as ltf  # noqa: E402

CASES = cases(["float32", "int64", "float16", "bool"])


@pytest.mark.parametrize("dtype,lengths,shape", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_round_trip(dtype, lengths, shape):
    t = make(dtype, lengths, shape)
    r = t.to_tf()
    values = np.asarray(t)
    if not lengths:
        assert isinstance(r, tf.Tensor) and not isinstance(r, tf.RaggedTensor)
        np.testing.assert_array_equal(r.numpy(), values)
    else:
        assert isinstance(r, tf.RaggedTensor)
        assert r.ragged_rank == len(lengths)
        assert r.flat_values.dtype == tf.as_dtype(np.dtype(dtype))
        assert r.flat_values.shape.as_list() == [values.shape[0], *shape]
        np.testing.assert_array_equal(r.flat_values.numpy(), values)
        assert [s.numpy().tolist() for s in r.nested_row_splits] == t.lod()
        assert [s.dtype for s in r.nested_row_splits] == [tf.int64] * len(lengths)
        assert r.shape.as_list() == [len(lengths[0]), *[None] * len(lengths), *shape]
        assert r.to_list() == t.tolist()
    back = lodt.LodTensor.from_tf(r)
    assert back == t
    assert back.dtype == dtype and back.element_shape == shape


def test_ragged_tensor_built_by_tensorflow():
    # Sentences of words of characters, as TensorFlow users build them.
    r = tf.ragged.constant([[[1, 2], [3]], [], [[4, 5, 6], [], [7]]], dtype=tf.int32)
    t = lodt.LodTensor.from_tf(r)
    assert t.dtype == "int32" and t.lod() == [[0, 2, 2, 5], [0, 2, 3, 6, 6, 7]]
    assert np.asarray(t).tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert t.to_tf().to_list() == r.to_list()


def test_int32_row_splits_and_uniform_inner_dims():
    values = tf.reshape(tf.range(24, dtype=tf.float32), [6, 2, 2])
    r = tf.RaggedTensor.from_row_splits(values, tf.constant([0, 4, 4, 6], dtype=tf.int32))
    assert r.row_splits.dtype == tf.int32
    t = lodt.LodTensor.from_tf(r)
    assert t.lod() == [[0, 4, 4, 6]] and t.element_shape == [2, 2]
    np.testing.assert_array_equal(np.asarray(t), values.numpy())


def test_uniform_row_length_becomes_a_level_of_equal_lengths():
    inner = tf.RaggedTensor.from_row_lengths(tf.range(6, dtype=tf.int64), [1, 2, 0, 3])
    r = tf.RaggedTensor.from_uniform_row_length(inner, 2)
    t = lodt.LodTensor.from_tf(r)
    assert t.recursive_sequence_lengths() == [[2, 2], [1, 2, 0, 3]]
    assert np.asarray(t).tolist() == list(range(6))


def test_a_slice_of_a_tensor_is_rebased():
    t = make("float32", [[1, 2], [2, 0, 1], [1, 3, 0]], [2])
    tail = t.slice_level(0, 1, 2)
    r = tail.to_tf()
    assert [s.numpy().tolist() for s in r.nested_row_splits] == tail.lod()
    assert r.nested_row_splits[-1].numpy()[0] == 0
    assert lodt.LodTensor.from_tf(r) == tail


def test_a_batch_gives_a_dict():
    b = lodt.Batch({"x": make("int64", [[2, 1]], []), "y": make("float32", [], [2, 4])})
    out = ltf.to_tf(b)
    assert set(out) == {"x", "y"}
    assert isinstance(out["x"], tf.RaggedTensor) and out["x"].to_list() == [[-7, -4], [-1]]
    assert not isinstance(out["y"], tf.RaggedTensor)


def test_errors_name_what_was_expected():
    with pytest.raises(TypeError, match="tf.RaggedTensor or a dense tf.Tensor, found list"):
        lodt.LodTensor.from_tf([1, 2])
    with pytest.raises(TypeError, match="found dtype string"):
        lodt.LodTensor.from_tf(tf.ragged.constant([["a"], ["b", "c"]]))
    with pytest.raises(TypeError, match="found dtype complex64"):
        lodt.LodTensor.from_tf(tf.constant([1j, 2j], dtype=tf.complex64))
    with pytest.raises(ValueError, match="scalar"):
        lodt.LodTensor.from_tf(tf.constant(1.0))
    with pytest.raises(TypeError, match="LodTensor or lodt.Batch, found int"):
        ltf.to_tf(3)
