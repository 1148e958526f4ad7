"""lodt: LoD (Level-of-Detail) tensors for Python.

A LoD tensor is a dense array whose first dimension is cut into
variable-length sequences, recursively, by a multi-level offset index (the
LoD): PaddlePaddle's way to batch sentences, articles or videos without
padding. This package is a thin layer over the lodt Rust crate:

* Paddle's Python API (``fluid.create_lod_tensor``, ``fluid.LoDTensor``,
  ``set``, ``set_lod``, ``recursive_sequence_lengths``, ...) with ``fluid``
  replaced by ``lodt``; ``place`` arguments are accepted and ignored.
* Zero-copy slicing (``t.branch(i, j)``, ``t.sequence(level, i)``,
  ``t.slice_level(level, b, e)``, iteration) and ``numpy.asarray(t)``.
* ``.lodt`` files read in place from a memory map (``lodt.open``), written
  atomically (``lodt.save``, ``lodt.Writer``); Paddle's own tensor files.
* Sequence ops: ``sequence_expand``, ``split``, ``merge``, ``pad``,
  ``unpad``, ``SortedSequences``.
* Sharded datasets: ``lodt.write_dataset(dir, batches)`` and
  ``lodt.Dataset(dir, batch_size=..., shuffle=True)``, a shuffling,
  partitioned, resumable ``torch.utils.data.IterableDataset`` (a plain
  iterable without torch; imported on first use, so ``import lodt`` does
  not import torch).
* Arrow (the PyCapsule interface: ``pa.array(t)``, ``pa.table(batch)``,
  ``pa.RecordBatchReader.from_stream(file)``) and PyTorch (``t.to_torch()``,
  ``lodt.torch.FileDataset``).

Optional dependencies, imported only when used: ``pyarrow``
(``pip install 'lodt[arrow]'``), ``torch`` (``lodt[torch]``) and
``ml_dtypes`` for bfloat16 arrays (``lodt[bfloat16]``); Ray Data for
``lodt.ray`` (``read_lodt``, ``write_lodt``; ``lodt[ray]``).
"""

from __future__ import annotations

import collections.abc as _abc
from typing import TYPE_CHECKING, Any, Sequence

import numpy as _np

from ._lodt import (
    Batch,
    File,
    LodTensor,
    Packing,
    SortedSequences,
    Writer,
    __version__,
    convert,
    from_nested,
    merge,
    open,
    pad,
    read_paddle,
    read_paddle_combined,
    recover,
    save,
    sequence_expand,
    split,
    unpad,
    verify,
    write_paddle,
)

from ._state import check_state, inspect_state
from ._writing import DatasetWriter, commit_parts, list_parts, remove_parts, write_dataset, write_index
from ._versions import log, tag, tags

if TYPE_CHECKING:  # pragma: no cover
    from .dataset import Dataset
    from .mixture import Mixture


def __getattr__(name: str) -> Any:
    # lodt.Dataset imports lodt.dataset, which imports torch when installed:
    # only on first use.
    if name == "Dataset":
        from .dataset import Dataset

        return Dataset
    if name == "Mixture":
        from .mixture import Mixture

        return Mixture
    raise AttributeError(f"module 'lodt' has no attribute {name!r}")


#: Paddle's name for :class:`LodTensor`.
LoDTensor = LodTensor

_abc.Mapping.register(Batch)

__all__ = [
    "Batch",
    "CPUPlace",
    "Dataset",
    "DatasetWriter",
    "File",
    "LoDTensor",
    "LodTensor",
    "Mixture",
    "Packing",
    "SortedSequences",
    "Writer",
    "__version__",
    "commit_parts",
    "write_index",
    "log",
    "tag",
    "tags",
    "inspect_state",
    "check_state",
    "list_parts",
    "convert",
    "from_nested",
    "create_lod_tensor",
    "create_random_int_lodtensor",
    "merge",
    "open",
    "pad",
    "read_paddle",
    "read_paddle_combined",
    "recover",
    "remove_parts",
    "save",
    "sequence_expand",
    "split",
    "unpad",
    "verify",
    "write_dataset",
    "write_paddle",
]


class CPUPlace:
    """Paddle's ``CPUPlace``: accepted wherever Paddle takes a ``place``, and
    ignored (lodt tensors live in host memory)."""

    def __repr__(self) -> str:
        return "CPUPlace"


def create_lod_tensor(
    data: Any, recursive_seq_lens: Sequence[Sequence[int]] | None, place: Any = None
) -> LodTensor:
    """Creates a LoD tensor, as Paddle's ``fluid.create_lod_tensor``.

    ``data`` is a numpy array (copied) with ``recursive_seq_lens`` its
    lengths, top level first (e.g. ``[[3, 1, 2], [3, 2, 4, 1, 2, 3]]``); a
    ``LodTensor`` (its data, with the new lengths); or nested Python lists of
    sequences, as in Paddle: ``[[1, 2], [3]]`` with lengths ``[[2, 1]]``
    becomes an int64 tensor of shape ``[3, 1]``. Lists nested deeper than
    one level give one LoD level per nesting. ``place`` is ignored.

    Raises ``ValueError`` (naming the broken rule) when the lengths are not a
    valid LoD for the data.
    """
    del place
    if isinstance(data, LodTensor):
        data = _np.asarray(data)
    elif isinstance(data, list):
        levels = 1 if recursive_seq_lens is None else len(recursive_seq_lens)
        nested = from_nested(data, levels)
        lengths = nested.recursive_sequence_lengths()
        if recursive_seq_lens is not None and [list(l) for l in recursive_seq_lens] != lengths:
            raise ValueError(
                f"data and recursive_seq_lens do not match: the lists have lengths "
                f"{lengths}, recursive_seq_lens is {[list(l) for l in recursive_seq_lens]}"
            )
        if nested.ndim != 1:
            return nested
        # Paddle's rows of one element: shape [N, 1].
        recursive_seq_lens = lengths
        data = _np.asarray(nested).reshape([nested.shape()[0], 1])
    elif not isinstance(data, _np.ndarray):
        raise TypeError("data should be either a LodTensor, a numpy array or a list")
    tensor = LodTensor()
    tensor.set(data)
    tensor.set_recursive_sequence_lengths(recursive_seq_lens or [])
    tensor.validate()
    return tensor


def create_random_int_lodtensor(
    recursive_seq_lens: Sequence[Sequence[int]],
    base_shape: Sequence[int],
    place: Any = None,
    low: int = 0,
    high: int = 1,
) -> LodTensor:
    """A LoD tensor of random int64 values in ``[low, high]`` (Paddle's
    ``fluid.create_random_int_lodtensor``): shape
    ``[sum(recursive_seq_lens[-1])] + base_shape``."""
    rows = sum(recursive_seq_lens[-1]) if recursive_seq_lens else 1
    data = _np.random.randint(low, high + 1, [rows, *base_shape]).astype("int64")
    return create_lod_tensor(data, recursive_seq_lens, place)
