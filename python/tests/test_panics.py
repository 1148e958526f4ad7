"""Every Rust panic reaches Python as a RuntimeError (which `except Exception`
catches), through each entry-point family; the two panics once seen in the
wild are now ordinary errors."""

import numpy as np
import pyarrow as pa
import pytest

import lodt
from lodt import _lodt

PROBE_CALLS = {
    "function": lambda: _lodt._panic_for_tests(),
    "constructor": lambda: _lodt._PanicProbe("new"),
    "method": lambda: _lodt._PanicProbe().panic(),
    "getter": lambda: _lodt._PanicProbe().panicking,
    "iterator": lambda: next(iter(_lodt._PanicProbe())),
    "for loop": lambda: [x for x in _lodt._PanicProbe()],
    "__getitem__": lambda: _lodt._PanicProbe()[0],
}


@pytest.mark.parametrize("family", sorted(PROBE_CALLS))
def test_a_panic_in_each_entry_point_family_is_a_runtime_error(family):
    with pytest.raises(RuntimeError, match="a deliberate panic"):
        PROBE_CALLS[family]()
    caught = None
    try:
        PROBE_CALLS[family]()
    except Exception as e:  # noqa: BLE001 - the point: Exception catches it
        caught = e
    assert isinstance(caught, RuntimeError)
    assert "a deliberate panic" in str(caught)


def test_the_probe_works_when_not_asked_to_panic():
    assert isinstance(_lodt._PanicProbe(), _lodt._PanicProbe)


def _reused(exporter, method):
    """An object whose `method` (an Arrow PyCapsule export) hands out the
    same capsules on every call: the second import finds them consumed."""
    capsules = getattr(exporter, method)()
    return type("Reused", (), {method: lambda self, requested_schema=None: capsules})()


def test_from_arrow_on_a_consumed_array_capsule_is_a_value_error():
    words = lodt.LodTensor(np.arange(4), [[1, 3]])
    reused = _reused(words, "__arrow_c_array__")
    assert lodt.LodTensor.from_arrow(reused) == words
    with pytest.raises(ValueError, match="already consumed"):
        lodt.LodTensor.from_arrow(reused)


def test_from_arrow_on_a_consumed_stream_capsule_is_a_value_error():
    table = pa.table({"x": [1, 2, 3]})
    reused = _reused(table, "__arrow_c_stream__")
    first = lodt.Batch.from_arrow(reused)
    assert list(first["x"].numpy()) == [1, 2, 3]
    with pytest.raises(ValueError, match="already consumed"):
        lodt.Batch.from_arrow(reused)
