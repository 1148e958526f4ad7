"""JAX interop: LoD tensors to values, offsets and segment ids as JAX arrays
and back, with the real JAX (CPU)."""

import numpy as np
import pytest

import lodt
from conftest import jax_or_skip
from frameworks import cases, make

jax = jax_or_skip()
import jax.numpy as jnp  # noqa: E402

import lodt.jax as ljax  # noqa: E402

CASES = cases(["float32", "int64", "float16", "bool"])


def expected_segment_ids(offsets):
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)).tolist()


@pytest.mark.parametrize("dtype,lengths,shape", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_round_trip(dtype, lengths, shape):
    t = make(dtype, lengths, shape)
    j = t.to_jax()
    assert isinstance(j, ljax.JaxLod)
    assert isinstance(j.values, jax.Array)
    expected = np.asarray(t)
    if dtype == "int64" and not jax.config.jax_enable_x64:
        expected = expected.astype(np.int32)  # JAX's default: 32-bit integers
    assert j.values.dtype == expected.dtype and list(j.values.shape) == list(expected.shape)
    np.testing.assert_array_equal(np.asarray(j.values), expected)
    assert [o.tolist() for o in j.offsets] == t.lod()
    assert [s.tolist() for s in j.segment_ids] == [expected_segment_ids(o) for o in t.lod()]
    back = lodt.LodTensor.from_jax(j)
    assert back.lod() == t.lod() and back.element_shape == shape
    np.testing.assert_array_equal(np.asarray(back), expected)
    if dtype != "int64":
        assert back == t


def test_segment_ids_drive_segment_sum():
    # The sum of every sentence of every article, with JAX's own segment op.
    t = lodt.LodTensor(np.arange(5, dtype=np.float32).reshape(5, 1), [[2, 0, 1], [3, 0, 2]])
    j = t.to_jax()
    per_sentence = jax.ops.segment_sum(j.values, j.segment_ids[1], num_segments=3)
    assert per_sentence[:, 0].tolist() == [0 + 1 + 2, 0, 3 + 4]
    per_article = jax.ops.segment_sum(per_sentence, j.segment_ids[0], num_segments=3)
    assert per_article[:, 0].tolist() == [3.0, 0.0, 7.0]


def test_segment_ids_of_a_slice_are_rebased():
    t = make("float32", [[1, 2], [2, 0, 1], [1, 3, 0]], [])
    tail = t.slice_level(0, 1, 2)
    assert tail.lod() == [[0, 2], [0, 0, 1], [0, 0]]
    assert [s.tolist() for s in tail.to_jax().segment_ids] == [[0, 0], [1], []]
    assert tail.segment_ids(1).dtype == np.int64
    with pytest.raises(IndexError, match="expected a level below 3"):
        tail.segment_ids(3)


def test_values_and_offsets_given_apart():
    values = jnp.arange(10, dtype=jnp.float32).reshape(5, 2)
    t = lodt.LodTensor.from_jax(values, [jnp.array([0, 1, 1, 5], dtype=jnp.int32)])
    assert t.lod() == [[0, 1, 1, 5]] and t.element_shape == [2]
    assert np.asarray(t).tolist() == np.asarray(values).tolist()
    plain = lodt.LodTensor.from_jax(values)
    assert plain.num_levels == 0 and plain.shape() == [5, 2]


def test_int64_values_with_x64():
    t = lodt.LodTensor(np.array([2**40, -1, 5], dtype=np.int64), [[1, 2]])
    jax.config.update("jax_enable_x64", True)
    try:
        j = t.to_jax()
        assert j.values.dtype == jnp.int64 and j.offsets[0].dtype == jnp.int64
        assert lodt.LodTensor.from_jax(j) == t
    finally:
        jax.config.update("jax_enable_x64", False)


def test_a_batch_gives_a_dict():
    b = lodt.Batch({"x": make("float32", [[2, 1]], [])})
    out = ljax.to_jax(b)
    assert list(out) == ["x"] and out["x"].offsets[0].tolist() == [0, 2, 3]


def test_errors_name_what_was_expected():
    with pytest.raises(ValueError, match="LoD|offset"):
        lodt.LodTensor.from_jax(jnp.zeros(3), [jnp.array([0, 2])])
    with pytest.raises(TypeError, match="1-d integer offsets"):
        lodt.LodTensor.from_jax(jnp.zeros(3), [jnp.array([0.0, 3.0])])
    with pytest.raises(ValueError, match="scalar"):
        lodt.LodTensor.from_jax(jnp.float32(1))
    with pytest.raises(TypeError, match="JaxLod alone"):
        lodt.LodTensor.from_jax(lodt.LodTensor(np.zeros(2), [[2]]).to_jax(), [])
    with pytest.raises(TypeError, match="LodTensor or lodt.Batch, found int"):
        ljax.to_jax(3)
