"""TensorFlow interop for lodt (needs ``pip install 'lodt[tf]'``).

* :func:`to_tf`: a LoD tensor as ``tf.RaggedTensor.from_nested_row_splits``
  over every LoD level, the values keeping their element shape (uniform
  inner dimensions); a tensor with no LoD as a dense ``tf.Tensor``.
* :func:`from_tf`: back, from a ``tf.RaggedTensor`` (any ragged rank, int32
  or int64 row splits) or a dense ``tf.Tensor``.

Memory: TensorFlow's tensors own their buffers (``tf.convert_to_tensor``
copies a numpy array, and TensorFlow may reuse an input's buffer for an op's
output, which lodt's read-only memory must not be), so :func:`to_tf` copies
the values once into TensorFlow; the row splits (one int64 per sequence) are
copied too. :func:`from_tf` reads TensorFlow's CPU buffers through numpy
without a copy and copies them once into the new lodt tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import tensorflow as _tf
except ImportError as _e:  # pragma: no cover - exercised when TensorFlow is absent
    raise ImportError(
        "lodt's TensorFlow interop needs TensorFlow: pip install 'lodt[tf]' "
        "(or pip install tensorflow-cpu)"
    ) from _e

from ._lodt import Batch, LodTensor

__all__ = ["from_tf", "to_tf"]


def to_tf(t: Any) -> Any:
    """A lodt tensor as a ``tf.RaggedTensor`` with one ragged dimension per
    LoD level (``from_nested_row_splits``, int64 row splits, top level
    first), whose ``flat_values`` are the tensor's values with their element
    shape; a tensor with no LoD as a dense ``tf.Tensor``. A copy (see the
    module's docstring). bfloat16 needs ``ml_dtypes``.

    A :class:`lodt.Batch` gives a dict of the results, by name.
    """
    if isinstance(t, Batch):
        return {name: to_tf(x) for name, x in t.items()}
    if not isinstance(t, LodTensor):
        raise TypeError(f"to_tf() takes a lodt.LodTensor or lodt.Batch, found {type(t).__name__}")
    values = _tf.convert_to_tensor(t.numpy())
    if t.num_levels == 0:
        return values
    splits = [_tf.constant(np.asarray(level, dtype=np.int64)) for level in t.lod()]
    # validate=False: lodt's LoD is validated already (CheckLoD's rules are
    # the row splits' rules).
    return _tf.RaggedTensor.from_nested_row_splits(values, splits, validate=False)


def from_tf(x: Any) -> LodTensor:
    """A lodt tensor from TensorFlow (a copy).

    * A ``tf.RaggedTensor`` gets one LoD level per ragged dimension (its
      ``ragged_rank``), top level first; dimensions made with a uniform row
      length become levels of equal lengths. Its ``flat_values`` must be a
      dense tensor, whose shape past the first dimension becomes the element
      shape. Row splits may be int32 or int64.
    * A dense ``tf.Tensor`` (or ``tf.Variable``) gets no LoD.

    Raises ``TypeError`` for other objects and for dtypes lodt lacks
    (strings, complex), ``ValueError`` for row splits that break a LoD rule.
    """
    if isinstance(x, _tf.RaggedTensor):
        splits = x.nested_row_splits
        if len(splits) != x.ragged_rank:  # pragma: no cover - TensorFlow's invariant
            raise ValueError(
                f"from_tf(): expected {x.ragged_rank} row splits (the ragged rank), "
                f"found {len(splits)}"
            )
        for s in splits:
            if s.dtype not in (_tf.int32, _tf.int64):
                raise TypeError(f"from_tf(): expected int32 or int64 row splits, found {s.dtype.name}")
        flat = x.flat_values
        if isinstance(flat, _tf.RaggedTensor):  # pragma: no cover - flat_values is dense
            raise TypeError("from_tf(): expected dense flat_values (uniform inner dimensions)")
        lod = [np.asarray(s.numpy(), dtype=np.int64).tolist() for s in splits]
        return _tensor(flat, lod)
    if isinstance(x, (_tf.Tensor, _tf.Variable)):
        return _tensor(x, [])
    raise TypeError(
        f"from_tf() takes a tf.RaggedTensor or a dense tf.Tensor, found {type(x).__name__}"
    )


def _tensor(x: Any, lod: list[list[int]]) -> LodTensor:
    dtype = _tf.as_dtype(x.dtype)
    if dtype == _tf.string or dtype.is_complex or dtype.is_quantized:
        raise TypeError(f"from_tf(): lodt tensors hold numbers and bools; found dtype {dtype.name}")
    array = np.asarray(x.numpy())
    if array.ndim == 0:
        raise ValueError("from_tf(): expected a tensor of at least one dimension, found a scalar")
    return LodTensor(array, lod=lod or None)
