"""JAX interop for lodt (needs ``pip install 'lodt[jax]'``).

JAX has no ragged array type; segment-style code (``jax.ops.segment_sum``,
``jax.numpy.take``) works on dense values plus an index. :func:`to_jax` gives
a :class:`JaxLod`: the values with their element shape, and per LoD level
(top level first) the offsets and the segment ids (the sequence each item of
the level below, or each row, belongs to). :func:`from_jax` builds a lodt
tensor back from values and offsets.

Memory: the values are copied into JAX (one copy). lodt's memory is
read-only (a file's memory map, or data other tensors share), and DLPack
before 1.0, which JAX's importer takes, cannot mark a buffer read-only, so
numpy refuses to export it; the offsets and segment ids are new arrays.
Integer index arrays are int64 with
``jax_enable_x64``, else int32 (JAX's default): a LoD whose offsets exceed
int32 raises ``ValueError`` naming ``jax_enable_x64``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

try:
    import jax as _jax
    import jax.numpy as _jnp
except ImportError as _e:  # pragma: no cover - exercised when JAX is absent
    raise ImportError(
        "lodt's JAX interop needs JAX: pip install 'lodt[jax]' (or pip install 'jax[cpu]')"
    ) from _e

from ._lodt import Batch, LodTensor

__all__ = ["JaxLod", "from_jax", "to_jax"]


class JaxLod(NamedTuple):
    """A LoD tensor as JAX arrays."""

    #: The values, ``[rows, *element_shape]``.
    values: Any
    #: One offsets array per LoD level, top level first (``len = n + 1``).
    offsets: tuple[Any, ...]
    #: One segment-id array per LoD level: entry ``j`` of level ``l`` is the
    #: sequence of level ``l`` holding item ``j`` of level ``l + 1`` (row
    #: ``j`` for the last level).
    segment_ids: tuple[Any, ...]


def _index_dtype() -> Any:
    return np.int64 if _jax.config.jax_enable_x64 else np.int32


def _index(values: Sequence[int] | np.ndarray, what: str) -> Any:
    array = np.asarray(values, dtype=np.int64)
    dtype = _index_dtype()
    if dtype == np.int32 and array.size and int(array.max()) > np.iinfo(np.int32).max:
        raise ValueError(
            f"to_jax(): the {what} exceed int32 (largest {int(array.max())}); "
            "enable 64-bit integers: jax.config.update('jax_enable_x64', True)"
        )
    return _jnp.asarray(array.astype(dtype, copy=False))


def _values(t: LodTensor) -> Any:
    # A copy: see the module's docstring.
    return _jnp.asarray(t.numpy())


def to_jax(t: Any) -> Any:
    """A lodt tensor as a :class:`JaxLod` of JAX arrays (see the module's
    docstring). A :class:`lodt.Batch` gives a dict of them, by name."""
    if isinstance(t, Batch):
        return {name: to_jax(x) for name, x in t.items()}
    if not isinstance(t, LodTensor):
        raise TypeError(f"to_jax() takes a lodt.LodTensor or lodt.Batch, found {type(t).__name__}")
    offsets = tuple(_index(level, "offsets") for level in t.lod())
    segment_ids = tuple(
        _index(t.segment_ids(level), "segment ids") for level in range(t.num_levels)
    )
    return JaxLod(_values(t), offsets, segment_ids)


def from_jax(values: Any, offsets: Sequence[Any] | None = None) -> LodTensor:
    """A lodt tensor (a copy) from JAX arrays: ``values`` (``[rows,
    *element_shape]``) and one offsets array per LoD level, top level first;
    or a :class:`JaxLod` alone (its segment ids are not needed). Raises
    ``ValueError`` naming the broken rule when the offsets are not a LoD of
    the values."""
    if isinstance(values, JaxLod):
        if offsets is not None:
            raise TypeError("from_jax(): give a JaxLod alone, or values and offsets")
        values, offsets = values.values, values.offsets
    array = np.asarray(values)
    if array.ndim == 0:
        raise ValueError("from_jax(): expected values of at least one dimension, found a scalar")
    lod = []
    for level in offsets or ():
        level = np.asarray(level)
        if level.ndim != 1 or not np.issubdtype(level.dtype, np.integer):
            raise TypeError(
                f"from_jax(): expected 1-d integer offsets per level, found {level.dtype} "
                f"of shape {list(level.shape)}"
            )
        lod.append(level.astype(np.int64).tolist())
    return LodTensor(array, lod=lod or None)
