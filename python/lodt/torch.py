"""PyTorch interop for lodt (needs ``pip install 'lodt[torch]'``).

* :func:`to_torch`: a 1-level tensor as a ``torch.nested`` jagged tensor
  sharing its values; any tensor padded, as ``(padded, lengths)``.
* :func:`from_torch`: back from a jagged nested tensor or a dense tensor.
* :class:`FileDataset`: a map-style ``Dataset`` over the top-level sequences
  of a ``.lodt`` file, with :func:`collate` building a LoD :class:`lodt.Batch`;
  works with ``DataLoader(num_workers=N)`` (each worker maps the file itself).
* :func:`varlen`: a (packed) batch as the flat values, ``cu_seqlens``,
  ``max_seqlen`` and ``position_ids`` that varlen attention kernels take.
* :func:`to_jagged` / :func:`from_jagged`: any LoD tensor as a jagged nested
  tensor of its innermost level (values shared) plus its outer levels as
  offset tensors in rows, and back; :class:`JaggedCollate` and
  :class:`VarlenCollate` yield them from a ``DataLoader``.
* :class:`DataLoader`: a ``torch.utils.data.DataLoader`` for a sharded
  :class:`lodt.Dataset` that keeps track of what its workers delivered, so
  that ``dataset.state_dict()`` is exact with ``num_workers > 0``.

Tensors handed to torch share lodt's memory, which is read-only (a file's
memory map, or data other tensors share): do not write to them in place
(``.clone()`` first). torch has no read-only tensors, so this is not checked.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, NamedTuple, Sequence

import numpy as np

try:
    import torch as _torch
    from torch.utils.data import DataLoader as _DataLoader
    from torch.utils.data import Dataset as _Dataset
except ImportError as _e:  # pragma: no cover - exercised when torch is absent
    raise ImportError(
        "lodt's PyTorch interop needs torch: pip install 'lodt[torch]' (or pip install torch)"
    ) from _e

from . import _lodt
from .dataset import Dataset as _LodtDataset
from .dataset import _Delivered, _as_torch
from ._lodt import Batch, LodTensor

__all__ = [
    "DataLoader",
    "FileDataset",
    "JaggedCollate",
    "Varlen",
    "VarlenCollate",
    "collate",
    "from_jagged",
    "from_torch",
    "to_jagged",
    "to_torch",
    "varlen",
]


def _shared(array: np.ndarray) -> "_torch.Tensor":
    """A torch tensor sharing a (read-only) numpy array's memory."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return _torch.from_numpy(array)


def _values(t: LodTensor) -> "_torch.Tensor":
    if t.dtype == "bfloat16":
        return _shared(t.numpy(bfloat16_as_uint16=True)).view(_torch.bfloat16)
    return _shared(t.numpy())


def to_torch(t: Any, padded: bool = False, pad_value: Any = None) -> Any:
    """A lodt tensor as torch tensors, sharing memory where torch allows.

    * ``padded=False``: a 1-level tensor becomes
      ``torch.nested.nested_tensor_from_jagged(values, offsets)`` (jagged
      layout), whose values share the tensor's memory; a tensor with no LoD
      becomes a dense tensor sharing its memory. More levels: use
      ``padded=True``.
    * ``padded=True``: ``(padded, lengths)``: the dense padded tensor of
      :func:`lodt.pad` (``[n, max_0, ..., *element_shape]``) and one int64
      tensor of lengths per LoD level.

    A :class:`lodt.Batch` gives a dict of the results, by name.
    """
    if isinstance(t, Batch):
        return {name: to_torch(x, padded, pad_value) for name, x in t.items()}
    if padded:
        array, lengths = _lodt.pad(t, pad_value)
        dense = _shared(array) if t.dtype != "bfloat16" else _shared(array.view(np.uint16)).view(_torch.bfloat16)
        return dense, [_torch.tensor(level, dtype=_torch.int64) for level in lengths]
    levels = t.num_levels
    if levels == 0:
        return _values(t)
    if levels != 1:
        raise ValueError(
            f"to_torch() makes a jagged nested tensor of a 1-level tensor; this one has "
            f"{levels} levels: use to_torch(padded=True)"
        )
    offsets = _torch.tensor(t.lod()[0], dtype=_torch.int64)
    return _torch.nested.nested_tensor_from_jagged(_values(t), offsets)


def _numpy(x: "_torch.Tensor") -> tuple[str, np.ndarray]:
    x = x.detach().cpu().contiguous()
    if x.dtype == _torch.bfloat16:
        return "bfloat16", x.view(_torch.int16).numpy().view(np.uint16)
    array = x.numpy()
    return str(array.dtype), array


def _tensor(x: "_torch.Tensor", lod: list[list[int]]) -> LodTensor:
    dtype, array = _numpy(x)
    if dtype == "bfloat16":
        return _lodt._tensor_from_state(dtype, list(array.shape), lod, array.tobytes(), True)
    return LodTensor(array, lod=lod or None)


def from_torch(x: "_torch.Tensor") -> LodTensor:
    """A lodt tensor from torch (a copy): a ``torch.nested`` tensor (jagged
    or strided layout, ragged in dimension 1) gets one LoD level; a dense
    tensor none."""
    if not isinstance(x, _torch.Tensor):
        raise TypeError(f"from_torch() takes a torch.Tensor, found {type(x).__name__}")
    if not x.is_nested:
        return _tensor(x, [])
    if x.layout != _torch.jagged or x.lengths() is not None:
        parts = list(x.unbind())
        lengths = [int(p.shape[0]) for p in parts]
        values = _torch.cat(parts) if parts else x.values()[:0]
    else:
        offsets = x.offsets().detach().cpu().tolist()
        values = x.values()[offsets[0] : offsets[-1]] if offsets else x.values()[:0]
        lengths = [b - a for a, b in zip(offsets, offsets[1:])]
    lod = [list(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).tolist())]
    return _tensor(values, lod)


class Varlen(NamedTuple):
    """A packed batch's tensor as varlen attention kernels (FlashAttention's
    ``flash_attn_varlen_func``) take it."""

    values: "_torch.Tensor"
    """``[total_rows, *element_shape]``, sharing lodt's memory."""
    cu_seqlens: "_torch.Tensor"
    """int32, first 0: the level's sequences as row offsets."""
    max_seqlen: int
    """The longest sequence, in rows."""
    position_ids: "_torch.Tensor"
    """int64, per row its position in its sequence (restarting at 0)."""
    row_cu_seqlens: "_torch.Tensor | None"
    """For an ``[R, L]`` packed batch: per row, its ``cu_seqlens`` relative to
    the row's start, concatenated (else None)."""
    row_starts: "_torch.Tensor | None"
    """For an ``[R, L]`` packed batch: where each row's list starts in
    ``row_cu_seqlens`` (``R + 1`` entries; else None)."""


def _pick(batch: Any, tensor: str | None) -> LodTensor:
    if isinstance(batch, Batch):
        names = list(batch.keys())
        if not names:
            raise ValueError("the batch has no tensor")
        name = names[0] if tensor is None else tensor
        if name not in names:
            raise ValueError(f"the batch has no tensor {name!r} (it has {names})")
        return batch[name]
    if tensor is not None:
        raise ValueError("tensor names a tensor of a Batch; this is a single tensor")
    return batch


def _level(t: LodTensor, level: int) -> int:
    levels = t.num_levels
    if not -levels <= level < levels:
        raise ValueError(f"level {level}: the tensor has {levels} LoD level(s)")
    return level % levels


def varlen(batch: Any, level: int = -1, tensor: str | None = None) -> Varlen:
    """The varlen view of level ``level`` (0: outermost; -1: innermost) of
    tensor ``tensor`` (default: the first) of a :class:`lodt.Batch` (or of a
    :class:`lodt.LodTensor`): an outer level's sequences are measured in
    rows. The values share lodt's memory; the offsets are computed (int32,
    moved into torch without a further copy). For a batch packed with
    ``Packing(rows=R)`` it also gives each row's ``cu_seqlens``."""
    t = _pick(batch, tensor)
    lvl = _level(t, level)
    cu, max_seqlen, positions = _lodt.varlen(t, lvl)
    row_cu = row_starts = None
    bins = batch.metadata.get("lodt.pack.bins") if isinstance(batch, Batch) else None
    if bins:
        rc, rs = _lodt.row_cu_seqlens(t, lvl, [int(b) for b in bins.split(",")])
        row_cu, row_starts = _torch.from_numpy(rc), _torch.from_numpy(rs)
    return Varlen(
        _values(t), _torch.from_numpy(cu), int(max_seqlen), _torch.from_numpy(positions), row_cu, row_starts
    )


def to_jagged(t: LodTensor) -> tuple["_torch.Tensor", list["_torch.Tensor"]]:
    """Any LoD tensor in torch's one ragged dimension: ``(jagged, outer)``.

    ``jagged`` is ``torch.nested.nested_tensor_from_jagged`` of the innermost
    level (its values share the tensor's memory, no copy); ``outer[k]`` is
    level ``k``'s offsets measured in rows (int64, first 0), for each outer
    level ``k`` (empty for a 1-level tensor). :func:`from_jagged` takes them
    back."""
    levels = t.num_levels
    if levels == 0:
        raise ValueError("to_jagged() needs a tensor with LoD (this one has none: use to_torch)")
    inner, _, _ = _lodt.varlen(t, levels - 1)
    jagged = _torch.nested.nested_tensor_from_jagged(_values(t), _torch.from_numpy(inner.astype(np.int64)))
    outer = [_torch.from_numpy(_lodt.varlen(t, k)[0].astype(np.int64)) for k in range(levels - 1)]
    return jagged, outer


def from_jagged(jagged: "_torch.Tensor", outer: Sequence["_torch.Tensor"] = ()) -> LodTensor:
    """The inverse of :func:`to_jagged` (a copy): a jagged nested tensor and
    its outer levels' offsets in rows back to a :class:`lodt.LodTensor`."""
    if not (isinstance(jagged, _torch.Tensor) and jagged.is_nested and jagged.layout == _torch.jagged):
        raise TypeError("from_jagged() takes a jagged nested tensor (torch.nested, layout=torch.jagged)")
    offsets = jagged.offsets().detach().cpu().to(_torch.int64)
    values = jagged.values()[int(offsets[0]) : int(offsets[-1])]
    rows = (offsets - offsets[0]).tolist()
    levels = [np.asarray(o.detach().cpu(), dtype=np.int64).tolist() for o in outer]
    # Each outer level's row offsets become indices into the level below (the crate's).
    return _tensor(values, _lodt.lod_from_row_offsets([*levels, rows]))


class JaggedCollate:
    """A ``collate_fn`` (for :class:`DataLoader`): each tensor of a
    :class:`lodt.Batch` with LoD as :func:`to_jagged`'s ``(jagged, outer)``,
    each without LoD as a dense tensor; a dict by name."""

    def __call__(self, batch: Batch) -> dict[str, Any]:
        return {
            name: (to_jagged(t) if t.num_levels else _values(t)) for name, t in batch.items()
        }


class VarlenCollate:
    """A ``collate_fn`` (for :class:`DataLoader`): :func:`varlen` of tensor
    ``tensor`` at level ``level`` of each (packed) mini-batch."""

    def __init__(self, level: int = -1, tensor: str | None = None) -> None:
        self.level = level
        self.tensor = tensor

    def __call__(self, batch: Batch) -> Varlen:
        return varlen(batch, self.level, self.tensor)


def collate(batches: Sequence[Batch]) -> Batch:
    """Merges batches (e.g. one per dataset item) into one LoD batch: each
    tensor's parts concatenated along the top level (:func:`lodt.merge`),
    with the first batch's metadata."""
    if not batches:
        return Batch()
    names = list(batches[0].keys())
    merged = [(name, _lodt.merge([b[name] for b in batches])) for name in names]
    return Batch(merged, batches[0].metadata)


class FileDataset(_Dataset):
    """A map-style dataset over the top-level sequences of a ``.lodt`` file,
    counted over every batch: item ``i`` is a :class:`lodt.Batch` holding
    sequence ``i`` of each tensor, read in place (no copy).

    Use :meth:`collate` (or :func:`lodt.torch.collate`) as the
    ``DataLoader``'s ``collate_fn`` to build LoD batches. The file is opened
    lazily in each process (so each ``DataLoader`` worker maps it itself,
    whether workers fork or spawn); pickling keeps only the path.
    """

    def __init__(self, path: str | os.PathLike[str], *, mmap: bool = True) -> None:
        self.path = os.fspath(path)
        self.mmap = mmap
        self._file: Any = None
        self._pid: int | None = None
        self._len = self._open().num_rows

    def _open(self) -> Any:
        pid = os.getpid()
        if self._file is None or self._pid != pid:
            self._file = _lodt.open(self.path, mmap=self.mmap)
            self._pid = pid
        return self._file

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> Batch:
        return self._open().row(index)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_file"] = None
        state["_pid"] = None
        return state

    @staticmethod
    def collate(batches: Sequence[Batch]) -> Batch:
        """See :func:`lodt.torch.collate`."""
        return collate(batches)


class _Collate:
    """The user's ``collate_fn`` (or none) applied to a mini-batch, keeping
    the worker's position attached (picklable, for spawned workers)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, item: Any) -> Any:
        if isinstance(item, _Delivered):
            if self.fn is not None:
                item.value = self.fn(item.value)
            return item
        return item if self.fn is None else self.fn(item)


class DataLoader(_DataLoader):
    """A ``torch.utils.data.DataLoader`` over a :class:`lodt.Dataset`, which
    batches itself (``batch_size`` is the Dataset's; this loader's is None).

    With ``num_workers > 0`` each worker reads its own share of the rank's
    sequences and sends, with each mini-batch, its position after it; this
    loader hands the mini-batch on and records the position in the
    dataset, so ``dataset.state_dict()`` is exactly what was delivered
    (mini-batches still in flight are not counted) and a loader resumed
    from it continues with the mini-batch that would have come next, in the
    same order. ``collate_fn`` (optional) is applied to each
    :class:`lodt.Batch` in the worker (e.g. :func:`to_torch`).

    Not supported: ``persistent_workers=True`` (workers would keep the epoch
    and position of their first pass), ``batch_size``, ``sampler``, and
    ``in_order=False`` (the resumed order relies on the round robin).
    """

    def __init__(self, dataset: _LodtDataset, *, collate_fn: Any = None, **kwargs: Any) -> None:
        if not isinstance(dataset, _LodtDataset):
            raise TypeError(
                f"lodt.torch.DataLoader loads a lodt.Dataset, found {type(dataset).__name__}"
            )
        if kwargs.get("batch_size") is not None:
            raise ValueError(
                "a lodt.Dataset makes its own mini-batches: give batch_size to lodt.Dataset, not to the DataLoader"
            )
        for option in ("persistent_workers", "sampler", "batch_sampler"):
            if kwargs.get(option):
                raise ValueError(f"lodt.torch.DataLoader does not support {option}")
        if kwargs.get("in_order") is False:
            raise ValueError("lodt.torch.DataLoader needs in_order=True (resume relies on it)")
        kwargs["batch_size"] = None
        # A dataset made before torch was imported becomes torch's kind here.
        super().__init__(_as_torch(dataset), collate_fn=_Collate(collate_fn), **kwargs)

    def __iter__(self) -> Any:
        dataset = self.dataset
        workers = self.num_workers
        dataset._begin(max(workers, 1), report=workers > 0)
        try:
            # Starts the workers (they copy the dataset with its report flag).
            iterator = super().__iter__()
        finally:
            dataset._report = False
        return _Tracked(iterator, dataset)


class _Tracked:
    """The loader's iterator: records each worker's position as its
    mini-batch is handed on."""

    def __init__(self, iterator: Any, dataset: _LodtDataset) -> None:
        self._iterator = iterator
        self._dataset = dataset

    def __iter__(self) -> "_Tracked":
        return self

    def __next__(self) -> Any:
        item = next(self._iterator)
        if isinstance(item, _Delivered):
            self._dataset._record(item)
            return item.value
        return item

    def __len__(self) -> int:
        return len(self._iterator)
