"""Type stubs of the native module ``lodt._lodt`` (the lodt Rust crate)."""

import os
import pathlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, final, overload

import numpy as np
import numpy.typing as npt
from typing_extensions import Self

__version__: str
__all__ = [
    "__version__",
    "LodTensor",
    "Batch",
    "File",
    "Writer",
    "BatchIter",
    "SortedSequences",
    "_StorageOwner",
    "DatasetReader",
    "DatasetLoader",
    "Packing",
    "loader",
    "MixtureReader",
    "DatasetWriter",
    "merge_loader_states",
    "CHECKPOINT_VERSION",
    "checkpoint_from_json",
    "checkpoint_to_json",
    "merge_checkpoints",
    "inspect_state",
    "check_state",
    "checkpoint_workers",
    "checkpoint_first_worker",
    "served_worker",
    "next_worker",
    "consumer",
    "plan_reads",
    "from_nested",
    "lod_from_row_offsets",
    "_panic_for_test",
    "_panic_for_tests",
    "_PanicProbe",
    "commit_parts",
    "dataset_log",
    "dataset_tags",
    "tag_dataset",
    "write_index",
    "PartJob",
    "list_parts",
    "remove_parts",
    "is_uri",
    "join_location",
    "MANIFEST_NAME",
    "PART_PREFIX",
    "SHARD_SUFFIX",
    "DEFAULT_SHARD_BYTES",
    "_tensor_from_state",
    "open",
    "save",
    "verify",
    "recover",
    "convert",
    "read_paddle",
    "read_paddle_combined",
    "write_paddle",
    "sequence_expand",
    "split",
    "merge",
    "pad",
    "unpad",
    "varlen",
    "row_cu_seqlens",
]

_PathLike = str | os.PathLike[str]

#: The name of a dataset's manifest (``lodt-dataset.json``).
MANIFEST_NAME: str
#: The start of a partial manifest's name (``lodt-dataset.part.``).
PART_PREFIX: str
#: The end of every shard's name (``.lodt``).
SHARD_SUFFIX: str
#: The default target size of a shard, in bytes (256 MiB).
DEFAULT_SHARD_BYTES: int
_Lod = Sequence[Sequence[int]]
_TensorLike = LodTensor | npt.ArrayLike
_BatchLike = Batch | Mapping[str, _TensorLike]

@final
class LodTensor:
    """A LoD tensor: a dense array whose first dimension is cut into
    sequences, recursively, by a multi-level offset index (the LoD).

    Data is immutable and shared: slices and ``numpy.asarray(t)`` are
    read-only views of the same bytes (a file's memory map for tensors read
    from a file). ``set``, ``set_lod`` and ``set_recursive_sequence_lengths``
    replace what this object holds and never change other tensors or arrays.
    """

    def __new__(
        cls,
        data: npt.ArrayLike | LodTensor | None = None,
        recursive_seq_lens: _Lod | None = None,
        *,
        lod: _Lod | None = None,
    ) -> Self:
        """A tensor holding a copy of ``data`` with a LoD given as lengths
        (``recursive_seq_lens``) or offsets (``lod``); with no argument, an
        empty tensor to ``set`` later (Paddle's ``LoDTensor()``)."""
    def set(self, array: npt.ArrayLike | LodTensor, place: Any = None) -> None:
        """Replaces the data with a copy of ``array``; keeps the LoD. ``place`` is ignored."""
    def set_lod(self, lod: _Lod) -> None:
        """Sets the LoD from offsets; ValueError if invalid or not fitting the rows."""
    def lod(self) -> list[list[int]]:
        """The LoD as offsets, top level first."""
    def recursive_sequence_lengths(self) -> list[list[int]]:
        """The LoD as lengths, top level first."""
    def set_recursive_sequence_lengths(self, lengths: _Lod) -> None:
        """Sets the LoD from lengths (levels checked, rows not: see
        ``has_valid_recursive_sequence_lengths``)."""
    def has_valid_recursive_sequence_lengths(self) -> bool:
        """Whether the LoD fits the data."""
    def validate(self) -> None:
        """Raises ValueError unless the tensor has data and a LoD that fits it."""
    def shape(self) -> list[int]:
        """The shape of the data, ``[rows, ...]``."""
    @property
    def dtype(self) -> str:
        """The numpy name of the element type (``"float32"``, ``"bfloat16"``, ...)."""
    @property
    def ndim(self) -> int:
        """The number of dimensions of the data."""
    @property
    def num_levels(self) -> int:
        """The number of LoD levels."""
    @property
    def rows(self) -> int:
        """The number of rows (``shape[0]``; 1 for a 0-D tensor)."""
    @property
    def element_shape(self) -> list[int]:
        """The shape of one row."""
    @property
    def nbytes(self) -> int:
        """The number of bytes of the data."""
    def num_sequences(self, level: int = 0) -> int:
        """The number of sequences of LoD level ``level``."""
    def segment_ids(self, level: int = 0) -> np.ndarray:
        """The int64 index of the sequence of level ``level`` holding each item below it."""
    def numpy(self, *, bfloat16_as_uint16: bool = False) -> np.ndarray:
        """The data as a read-only numpy array sharing the tensor's memory."""
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """``numpy.asarray(t)``: a read-only view; ``numpy.array(t)``: a copy."""
    def branch(self, *path: int) -> LodTensor:
        """The ``<i, j, ...>``-slice (no copy, O(levels))."""
    def sequence(self, level: int, index: int) -> LodTensor:
        """Sequence ``index`` of level ``level`` with the levels below (no copy)."""
    def slice_level(self, level: int, begin: int, end: int) -> LodTensor:
        """Sequences ``begin..end`` of level ``level``, which becomes the top level (no copy)."""
    def slice_rows(self, begin: int, end: int) -> LodTensor:
        """Rows ``begin..end`` with no LoD (no copy)."""
    def take(self, indices: Sequence[int]) -> LodTensor:
        """Top-level sequences (or rows) ``indices`` gathered into a new tensor."""
    def sequences(self, level: int = 0) -> list[LodTensor]:
        """Every sequence of level ``level`` (no copy)."""
    def tolist(self) -> list[Any]:
        """The data as nested lists, one nesting per LoD level."""
    def copy(self) -> LodTensor:
        """A copy in fresh memory."""
    def __len__(self) -> int:
        """The number of top-level sequences (rows, with no LoD)."""
    @overload
    def __getitem__(self, key: int, /) -> LodTensor: ...
    @overload
    def __getitem__(self, key: slice, /) -> LodTensor: ...
    @overload
    def __getitem__(self, key: tuple[int, ...], /) -> LodTensor: ...
    def __iter__(self) -> Iterator[LodTensor]:
        """Iterates over the top-level sequences (rows, with no LoD)."""
    def __eq__(self, other: object, /) -> bool: ...
    def __copy__(self) -> LodTensor:
        """The same tensor (data is immutable and shared)."""
    def __deepcopy__(self, memo: Any = None) -> LodTensor:
        """The same tensor (data is immutable: sharing it is as good as copying it)."""
    def __arrow_c_schema__(self) -> object:
        """The Arrow field of the tensor (a PyCapsule)."""
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        """The tensor as an Arrow array (PyCapsules), sharing its buffers; in
        ``requested_schema`` when it is one of lodt's mappings or a cast."""
    def to_arrow(self, tensor_type: Literal["nested_lists", "fixed_shape", "variable_shape"] = "nested_lists") -> Any:
        """The tensor as a ``pyarrow.Array``; element shapes as nested
        fixed-size lists, the ``arrow.fixed_shape_tensor`` extension, or
        (``"variable_shape"``, 1-level tensors) ``arrow.variable_shape_tensor``."""
    @staticmethod
    def from_arrow(obj: Any) -> LodTensor:
        """A tensor from an object exporting the Arrow PyCapsule interface."""
    def to_torch(self, padded: bool = False, pad_value: Any = None) -> Any:
        """A torch jagged nested tensor (1 level), or ``(padded, lengths)``."""
    @staticmethod
    def from_torch(obj: Any) -> LodTensor:
        """A tensor from a torch nested (jagged) or dense tensor."""
    def to_tf(self) -> Any:
        """A ``tf.RaggedTensor`` over every LoD level (a dense ``tf.Tensor`` with none)."""
    @staticmethod
    def from_tf(obj: Any) -> LodTensor:
        """A tensor from a ``tf.RaggedTensor`` or a dense ``tf.Tensor`` (a copy)."""
    def to_jax(self) -> Any:
        """Values, offsets and segment ids as JAX arrays (``lodt.jax.JaxLod``)."""
    @staticmethod
    def from_jax(values: Any, offsets: Any | None = None) -> LodTensor:
        """A tensor from JAX values and per-level offsets, or a ``JaxLod`` (a copy)."""

@final
class Batch(Mapping[str, LodTensor]):
    """A mini-batch: named tensors in order and string metadata."""

    def __new__(
        cls,
        tensors: _BatchLike | Iterable[tuple[str, _TensorLike]] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Self:
        """A batch of ``tensors`` with ``metadata``."""
    def __len__(self) -> int: ...
    def __getitem__(self, name: str, /) -> LodTensor: ...
    def __iter__(self) -> Iterator[str]: ...
    def __contains__(self, name: object, /) -> bool: ...
    def keys(self) -> list[str]:  # type: ignore[override]
        """The tensor names, in order."""
    def values(self) -> list[LodTensor]:  # type: ignore[override]
        """The tensors, in order."""
    def items(self) -> list[tuple[str, LodTensor]]:  # type: ignore[override]
        """``(name, tensor)`` pairs, in order."""
    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The tensor named ``name``, or ``default``."""
    @property
    def metadata(self) -> dict[str, str]:
        """The batch's metadata."""
    @property
    def num_rows(self) -> int:
        """The number of top-level rows of the first tensor."""
    def take(self, indices: Sequence[int]) -> Batch:
        """Top-level rows ``indices`` of every tensor, gathered into a new batch."""
    def __arrow_c_schema__(self) -> object:
        """The batch's Arrow schema (a PyCapsule)."""
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        """The batch as an Arrow record batch (PyCapsules), in
        ``requested_schema`` when each column's type is one of lodt's
        mappings or a cast."""
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The batch as an Arrow stream of one record batch."""
    def to_arrow(self, tensor_type: Literal["nested_lists", "fixed_shape", "variable_shape"] = "nested_lists") -> Any:
        """The batch as a ``pyarrow.RecordBatch``; element shapes as nested
        fixed-size lists, the ``arrow.fixed_shape_tensor`` extension, or
        (``"variable_shape"``, 1-level tensors) ``arrow.variable_shape_tensor``."""
    @staticmethod
    def from_arrow(obj: Any) -> Batch:
        """A batch from an Arrow record batch, table or stream."""

@final
class File:
    """A ``.lodt`` file, memory-mapped: ``len(f)`` batches, ``f[k]`` read in place."""

    def __new__(
        cls,
        path: _PathLike,
        *,
        mmap: bool = True,
        storage_options: Mapping[str, str] | None = None,
        check_bodies: bool = False,
    ) -> Self:
        """Opens a ``.lodt`` file (see :func:`open`)."""
    def __len__(self) -> int: ...
    def __getitem__(self, k: int, /) -> Batch: ...
    def __iter__(self) -> BatchIter: ...
    def __enter__(self) -> File: ...
    def __exit__(self, *args: object) -> bool: ...
    @property
    def path(self) -> pathlib.Path:
        """The file's path."""
    @property
    def mmap(self) -> bool:
        """Whether the file is memory-mapped."""
    @property
    def metadata(self) -> dict[str, str]:
        """The file-level metadata."""
    @property
    def version(self) -> tuple[int, int]:
        """The format version."""
    @property
    def size(self) -> int:
        """The file's size in bytes."""
    @property
    def num_rows(self) -> int:
        """The total number of top-level rows over every batch."""
    def batch_rows(self, k: int) -> int:
        """The number of top-level rows of batch ``k``."""
    def row(self, i: int) -> Batch:
        """Global top-level row ``i`` of every tensor, read in place."""
    def take(self, indices: Sequence[int]) -> Batch:
        """Global top-level rows ``indices`` gathered into one new batch."""
    def verify(self) -> dict[str, int]:
        """Checks every checksum and rule; ValueError at the first damage."""
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The file as an Arrow stream of record batches, over the map."""

@final
class BatchIter:
    """An iterator over the batches of a :class:`File`."""

    def __iter__(self) -> BatchIter: ...
    def __next__(self) -> Batch: ...

@final
class _StorageOwner:
    """The ``base`` of a numpy array over a tensor's bytes: keeps them alive."""

    def span(self) -> tuple[int, int]:
        """The address and length of the bytes kept alive."""

@final
class Writer:
    """Writes a ``.lodt`` file batch by batch (atomically, or appending)."""

    def __new__(
        cls,
        path: _PathLike,
        metadata: Mapping[str, str] | None = None,
        *,
        append: bool = False,
        fsync: bool = True,
        format_version: Literal["1.0", "2.0"] | None = None,
        compression: str = "none",
    ) -> Self:
        """Starts a new file (or appends to one, in the file's version), in
        format 2.0 (the schema once, a smaller batch; or
        ``format_version="1.0"`` for readers that predate 2.0), its buffers
        compressed by ``compression`` ("none", "lz4", "zstd", "zstd:LEVEL":
        format 2.0 only). An append with an explicit ``format_version``
        other than the file's raises ValueError (the file is left as it
        was)."""
    def write(self, batch: _BatchLike, metadata: Mapping[str, str] | None = None) -> None:
        """Writes one batch."""
    @property
    def batches_written(self) -> int:
        """The number of batches written by this writer."""
    @property
    def path(self) -> pathlib.Path:
        """The destination path."""
    def close(self) -> None:
        """Writes the footer and commits the file."""
    def abort(self) -> None:
        """Stops writing; a new file is discarded."""
    def __enter__(self) -> Writer: ...
    def __exit__(self, exc_type: object, exc_value: object = None, traceback: object = None) -> bool: ...

@final
class DatasetReader:
    """An open sharded dataset (its manifest; shards opened when touched).
    ``lodt.Dataset`` wraps it."""

    def __new__(
        cls,
        path: _PathLike,
        *,
        mmap: bool = True,
        storage_options: Mapping[str, str] | None = None,
        check_bodies: bool = False,
        cache_bytes: int | None = None,
        cache_dir: _PathLike | Literal[False] | None = None,
        disk_cache_bytes: int | None = None,
        version: int | str | None = None,
    ) -> Self:
        """Opens the dataset in directory ``path`` (FileNotFoundError if it has no manifest),
        or its version ``version`` (a number, or a tag's name; KeyError if there is none);
        ``cache_bytes``: the random-access cache's budget (default 256 MiB, 0: off);
        ``cache_dir``: a URI's disk cache (None: the node cache, False: none), of at most
        ``disk_cache_bytes`` (default 1 GiB)."""
    @property
    def path(self) -> pathlib.Path:
        """The dataset's directory."""
    def manifest_json(self) -> str:
        """The manifest's JSON text."""
    @property
    def version(self) -> int | None:
        """The number of the version opened (None: written before versions)."""
    def commit_json(self) -> str | None:
        """The version's commit record as JSON text (None: written before versions)."""
    @property
    def num_sequences(self) -> int:
        """The number of top-level sequences."""
    @property
    def num_shards(self) -> int:
        """The number of shards (from the manifest)."""
    @property
    def num_batches(self) -> int:
        """The number of stored batches, over every shard (from the manifest)."""
    @property
    def num_bytes(self) -> int:
        """The size of every shard, in bytes (from the manifest)."""
    @property
    def fingerprint(self) -> int:
        """The fingerprint a loader state is checked against."""
    @property
    def cache_bytes(self) -> int:
        """The random-access cache's budget, in bytes."""
    def sequence(self, id: int) -> Batch:
        """Sequence ``id``, read in place."""
    def sequence_arrays(self, id: int) -> dict[str, npt.NDArray[Any]]:
        """Sequence ``id`` as numpy arrays, no Batch built: per tensor its rows, and
        ``"name.lod1"`` ... the inner offsets of a tensor of 2 or more LoD levels."""
    def take(self, ids: Sequence[int]) -> Batch:
        """Sequences ``ids`` gathered into one batch (a copy)."""
    def join_appended(self, text: str) -> str:
        """A checkpoint (JSON text) saved before shards were appended, as one whose epoch takes in the appended sequences after the rest (spec/DATASET.md 7.3)."""
    def verify(self) -> dict[str, int]:
        """Checks every shard completely: ``{"shards", "bytes", "batches", "sequences"}``."""

@final
class Packing:
    """Packed mini-batches (``spec/DATASET.md`` 7.4): bins of at most ``tokens`` rows, ``rows`` bins per
    mini-batch, best-fit from windows of ``buffer`` sequences; ``equal``: as many mini-batches on every
    consumer (``None``: when ``world_size > 1``); ``truncate``: cut longer sequences to ``tokens`` rows
    (metadata ``lodt.pack.truncated``)."""

    def __new__(
        cls,
        tokens: int,
        *,
        rows: int | None = None,
        buffer: int = 1000,
        equal: bool | None = None,
        truncate: bool = False,
    ) -> Packing: ...
    @property
    def tokens(self) -> int:
        """The bin's capacity in rows."""
    @property
    def rows(self) -> int | None:
        """Bins per mini-batch (``None``: one)."""
    @property
    def buffer(self) -> int:
        """The window, in sequences."""
    @property
    def equal(self) -> bool | None:
        """Equal mini-batch counts per consumer."""
    @property
    def truncate(self) -> bool:
        """Cut sequences longer than ``tokens``."""
    def __getnewargs_ex__(self) -> tuple[tuple[int], dict[str, Any]]: ...

def loader(
    source: DatasetReader | MixtureReader,
    *,
    batch_size: int = 32,
    max_rows: int | None = None,
    rows_of: str | None = None,
    drop_last: bool = False,
    seed: int | None = None,
    shuffle_buffer: int = 16384,
    rank: int = 0,
    world_size: int = 1,
    worker: int = 0,
    num_workers: int = 1,
    remainder: str = "keep",
    prefetch: int = 2,
    epoch: int = 0,
    state: str | None = None,
    packing: Packing | None = None,
    partition: Literal["round_robin", "locality"] | None = None,
) -> DatasetLoader:
    """The Rust loader of consumer ``(rank, worker)`` of a dataset or a mixture, at ``epoch`` or resumed
    from ``state`` (JSON); packed when ``packing`` is given (counting ``rows_of``'s rows); dealt by
    ``partition`` (``None``: the state's, else locality for one remote dataset without packing)."""

@final
class DatasetLoader:
    """The Rust loader: shuffled, partitioned, resumable mini-batches."""

    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def next_with_ids(self) -> tuple[list[int], Batch] | None:
        """The next mini-batch with its sequence ids; None at the end of the epoch."""
    def state(self) -> str:
        """Where the loader is (what it delivered), as JSON text (spec/DATASET.md 7.2)."""
    def progress(self) -> tuple[str, int | None]:
        """The state without its cursor (JSON text) and the cursor's position: cheap enough for
        every mini-batch."""
    def cursor(self) -> str | None:
        """The cursor of the loader's state (JSON text; spec/DATASET.md 7.3), if it has one."""
    @property
    def epoch(self) -> int:
        """The epoch."""
    @property
    def remaining(self) -> int:
        """The sequences still to deliver in this epoch."""
    def set_epoch(self, epoch: int) -> None:
        """Starts epoch ``epoch`` from its beginning."""
    def close(self) -> None:
        """Stops the prefetch thread."""

@final
class MixtureReader:
    """Open datasets read as one stream in given proportions (spec/DATASET.md 10).
    ``lodt.Mixture`` wraps it."""

    def __new__(
        cls,
        sources: Sequence[DatasetReader],
        weights: Sequence[float],
        *,
        seed: int = 0,
        stop: str | int | None = None,
    ) -> Self:
        """``stop``: ``"first_exhausted"`` (default), ``"all_exhausted"`` or a number of sequences."""
    def manifest_json(self) -> str:
        """The schema and every source's shards, as manifest JSON text."""
    def num_sequences(self, epoch: int = 0, state: str | None = None) -> int:
        """The positions of epoch ``epoch``'s stream (the one loader state ``state``, JSON text, resumes)."""
    def evolve_checkpoint(
        self,
        text: str,
        *,
        seed: int | None = None,
        shuffle_buffer: int = 16384,
        remainder: str = "keep",
        packing: Packing | None = None,
        rows_of: str | None = None,
    ) -> str:
        """A complete checkpoint (JSON text) of another mixture as one of this mixture that continues its epoch (spec/DATASET.md 10.6)."""
    def source_of(self, id: int) -> tuple[int, int] | None:
        """The source of mixture id ``id`` and its id there (None past the end)."""
    def totals(self) -> dict[str, int]:
        """The sources' ``{"shards", "bytes", "batches", "sequences"}``, summed."""
    def take(self, ids: Sequence[int]) -> Batch:
        """The sequences of mixture ids ``ids``, in that order, as one batch (a copy)."""
    def verify(self) -> dict[str, int]:
        """Verifies every source; the summed ``{"shards", "bytes", "batches", "sequences"}``."""
    @property
    def offsets(self) -> list[int]:
        """Source ``k``'s sequence ``i`` is id ``offsets[k] + i``."""

@final
class DatasetWriter:
    """Writes a sharded dataset batch by batch; the manifest last and atomically."""

    def __new__(
        cls,
        path: _PathLike,
        *,
        mode: str = "create",
        shard_bytes: int = ...,
        metadata: Mapping[str, str] | None = None,
        writer_id: str | None = None,
        fsync: bool = True,
        storage_options: Mapping[str, str] | None = None,
        commit_id: str | None = None,
        format_version: Literal["1.0", "2.0"] | None = None,
        compression: str = "none",
    ) -> Self:
        """``mode``: ``"create"``, ``"append"`` or ``"part"`` (with ``writer_id``);
        ``commit_id``: the write's idempotency key (default: a new one);
        ``format_version``/``compression``: the new shards' (2.0 by default,
        also when appending; "1.0" takes no codec)."""
    def write(self, batch: _BatchLike) -> None:
        """Writes one batch (ValueError if it does not match the schema)."""
    def flush(self) -> None:
        """Closes the current shard and replaces the manifest."""
    @property
    def batches_written(self) -> int:
        """The number of batches written by this writer."""
    @property
    def path(self) -> pathlib.Path:
        """The dataset's directory."""
    @property
    def commit_id(self) -> str:
        """This write's commit id (given or new): retry with it after an error."""
    @property
    def already_committed(self) -> bool:
        """The dataset listed this commit id already: nothing is written."""
    def close(self) -> dict[str, Any] | None:
        """Writes the manifest; ``{"shards", "batches", "sequences", "bytes", "commit_id"}``."""
    def abort(self) -> None:
        """Stops without replacing the manifest."""
    def __enter__(self) -> DatasetWriter: ...
    def __exit__(self, exc_type: object, exc_value: object = None, traceback: object = None) -> bool: ...

def dataset_log(path: _PathLike, storage_options: Mapping[str, str] | None = None) -> str:
    """Every version's commit record, oldest first, as a JSON array."""

def dataset_tags(path: _PathLike, storage_options: Mapping[str, str] | None = None) -> str:
    """The dataset's tags, by name, as a JSON array."""

def tag_dataset(
    path: _PathLike, name: str, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> str:
    """Names a version (default: the current one), for good; the tag as a JSON object."""

def commit_parts(
    path: _PathLike, storage_options: Mapping[str, str] | None = None, commit_id: str | None = None
) -> dict[str, Any]:
    """Merges the partial manifests of parallel writers; the dataset's totals and ``"commit_id"``."""

def write_index(path: _PathLike, storage_options: Mapping[str, str] | None = None) -> bool:
    """Writes the dataset's shard index if its manifest names none that agrees with it; whether
    it wrote one."""

def list_parts(path: _PathLike, storage_options: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The parts waiting for ``commit_parts``, in merge order: per part ``{"writer_id", "name",
    "shards", "batches", "sequences", "bytes", "commit_id", "commits"}``."""

def remove_parts(
    path: _PathLike, writer_ids: Sequence[str], storage_options: Mapping[str, str] | None = None
) -> list[str]:
    """Deletes the partial manifests of ``writer_ids`` and their shards the manifest does not
    list (never a listed one); the names deleted."""

def is_uri(location: _PathLike) -> bool:
    """Whether ``location`` is a URI of an object store lodt reads, rather than a local path."""

def join_location(location: _PathLike, name: str) -> str:
    """The location of object ``name`` of the dataset at ``location``."""

@final
class PartJob:
    """The ids and clean-up of a parallel write run as a job of retried tasks
    (``lodt.ray.write_lodt``). Picklable."""

    def __new__(cls, family: str = "ray", id: str | None = None) -> Self: ...
    @property
    def id(self) -> str:
        """The job's id (the default commit id of its merge)."""
    @property
    def family(self) -> str:
        """The job's family (the start of its id)."""
    def task_commit_id(self, task: int) -> str:
        """The commit id of task ``task``'s part, the same for every attempt."""
    def new_writer_id(self, task: int) -> str:
        """A new writer id for an attempt of task ``task``."""
    def task_of(self, writer_id: str) -> int | None:
        """The task of ``writer_id`` if it is an attempt's of this job."""
    def committed_attempt(
        self, path: _PathLike, task: int, storage_options: Mapping[str, str] | None = None
    ) -> str | None:
        """The writer id of an attempt of ``task`` whose part is committed, if any."""
    def clean(
        self, path: _PathLike, keep: bool = True, storage_options: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Keeps one part per task of this job (``keep``) and deletes every other object of this
        family's writers: ``{"kept", "removed", "sequences"}``."""
    def __reduce__(self) -> tuple[type[PartJob], tuple[str, str]]: ...

def merge_loader_states(states: Sequence[str], cursors: Sequence[str | None] | None = None) -> str:
    """Merges every consumer's loader state (JSON texts) into one complete state; ``cursors``, one
    per state, replaces each state's cursor where given."""

#: The version of a rank's checkpoint object (``spec/DATASET.md`` 7.5).
CHECKPOINT_VERSION: int

def checkpoint_from_json(text: str) -> str:
    """A checkpoint (JSON of ``Dataset.state_dict()`` or of a bare loader
    state) checked and given back as a checkpoint object (JSON)."""

def checkpoint_to_json(loader: str, next_worker: int) -> str:
    """The checkpoint (JSON) of a loader state (JSON) whose next mini-batch
    comes from local worker ``next_worker``."""

def inspect_state(
    text: str, dataset: _PathLike | None = None, storage_options: Mapping[str, str] | None = None
) -> str:
    """The facts of a checkpoint or loader state (JSON text) as JSON text, with
    ``dataset_mismatch`` when ``dataset`` is given."""

def check_state(
    text: str,
    dataset: _PathLike,
    world_size: int | None = None,
    workers: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> str:
    """A dry run of the rest of a checkpoint's or loader state's (JSON text)
    epoch on ``dataset``, ids only: the report as JSON text."""

def merge_checkpoints(texts: Sequence[str]) -> str:
    """Every rank's checkpoint (JSON texts) merged into one complete checkpoint
    (JSON) that resumes with worker 0."""

def checkpoint_workers(text: str, world_size: int) -> int:
    """The workers per rank a checkpoint was taken with; ValueError when its
    ``next_worker`` is not one of them."""

def checkpoint_first_worker(text: str, world_size: int, workers: int) -> int:
    """The local consumer worker 0 serves when resuming from the checkpoint."""

def served_worker(worker: int, first: int, workers: int) -> int:
    """The local consumer worker process ``worker`` serves when worker 0 serves ``first``."""

def next_worker(last: int | None, first: int, workers: int) -> int:
    """A checkpoint's ``next_worker``: the local consumer after ``last``, or ``first``."""

def consumer(rank: int, world_size: int, worker: int, num_workers: int) -> tuple[int, int]:
    """``(world_size * num_workers, rank * num_workers + worker)``."""

def from_nested(data: Any, levels: int = 1) -> LodTensor:
    """A LoD tensor of ``levels`` LoD levels from nested sequences (lists,
    tuples, numpy arrays, object arrays of arrays): the items of each
    last-level sequence are its rows, converted together by numpy.
    ``levels=0``: ``data`` is the rows of a tensor without LoD."""

def lod_from_row_offsets(levels: Sequence[Sequence[int]]) -> list[list[int]]:
    """The LoD offsets of levels given as offsets in rows (top level first;
    each outer level's entries boundaries of the level below)."""

def plan_reads(manifest_json: str, parallelism: int) -> list[tuple[list[tuple[str, list[int]]], int, int]]:
    """A dataset's batches (its manifest's JSON) cut into at most ``parallelism``
    contiguous read tasks of about equal sequence counts: per task
    ``([(shard name, batches), ...], sequences, bytes)``."""

def _panic_for_test() -> None:
    """Panics inside the panic guard (raises RuntimeError)."""

def _panic_for_tests() -> None:
    """Internal, for tests: panics in a module function (raises RuntimeError)."""

@final
class _PanicProbe:
    """Internal, for tests: panics through each entry-point family (raises RuntimeError)."""

    def __new__(cls, where: str = "") -> Self: ...
    def panic(self) -> None: ...
    @property
    def panicking(self) -> bool: ...
    def __iter__(self) -> _PanicProbe: ...
    def __next__(self) -> int: ...
    def __getitem__(self, key: int, /) -> int: ...

@final
class SortedSequences:
    """The sequences of one LoD level sorted by length, for RNN time steps."""

    def __new__(
cls, lod: LodTensor | _Lod, level: int = 0) -> Self:
        """Sorts the sequences of level ``level`` by length, longest first."""
    @property
    def level(self) -> int:
        """The sorted level."""
    @property
    def order(self) -> list[int]:
        """The original index of each sorted sequence."""
    @property
    def sorted_lengths(self) -> list[int]:
        """The lengths in sorted order."""
    @property
    def num_steps(self) -> int:
        """The number of time steps."""
    @property
    def batch_sizes(self) -> list[int]:
        """The number of sequences running at each step (``ValueError`` past 2**24 steps)."""
    def batch_size(self, step: int) -> int:
        """The number of sequences running at time step ``step``."""
    def __len__(self) -> int: ...
    def segment_inputs(self, x: _TensorLike) -> list[LodTensor]:
        """``x`` cut into one tensor per time step."""
    def concat_outputs(self, steps: Iterable[_TensorLike]) -> LodTensor:
        """Step outputs restored to the original order and LoD."""

def open(
    path: _PathLike,
    *,
    mmap: bool = True,
    storage_options: Mapping[str, str] | None = None,
    check_bodies: bool = False,
) -> File:
    """Opens a ``.lodt`` file (memory-mapped by default), or one at a URI
    (``s3://``, ``az://``, ``gs://``, ``http(s)://``) read by ranged requests.
    Batches read from a URI or into memory are checked, bodies included,
    before use; a mapped batch's bodies only with ``check_bodies=True`` (on
    its first read)."""

def save(
    path: _PathLike,
    batches: _BatchLike | Iterable[_BatchLike],
    metadata: Mapping[str, str] | None = None,
    *,
    format_version: Literal["1.0", "2.0"] | None = None,
    compression: str = "none",
) -> None:
    """Writes a ``.lodt`` file atomically, in format 2.0 (or
    ``format_version="1.0"``), its buffers compressed by ``compression``
    as in :class:`Writer`."""

def verify(path: _PathLike) -> dict[str, int]:
    """Checks every byte of a ``.lodt`` file."""

def recover(path: _PathLike) -> dict[str, Any]:
    """Rebuilds the footer of an interrupted ``.lodt`` file."""

def convert(
    src: _PathLike,
    dst: _PathLike,
    *,
    names: Sequence[str] | None = None,
    batch_rows: int | None = None,
    small_lists: bool = False,
    batch_bytes: int | str | None = None,
    columns: Sequence[str] | None = None,
    compression: str | None = None,
    null_lists: Literal["error", "empty"] = "error",
    metadata: Literal["error", "first"] = "error",
    decode_budget: int | None = None,
    tensor_type: Literal["nested_lists", "fixed_shape", "variable_shape"] = "nested_lists",
    format_version: Literal["1.0", "2.0"] | None = None,
    shard_bytes: int | None = None,
    to: str | None = None,
) -> dict[str, int]:
    """Converts between .lodt, Parquet, Arrow IPC and Paddle files (by
    extension) and dataset directories, as ``lodt convert`` does.

    A dataset is an existing directory, a path ending in ``/``, or a new path
    with no extension; ``shard_bytes`` (default 256 MiB) sizes its shards.
    ``to`` names the output's format whatever ``dst`` looks like (as
    ``--to``): an extension ("parquet", "lodt", ...), "dataset", or
    "parquet-dir": a new directory of Parquet files ``part-00000.parquet``,
    ... of about ``shard_bytes`` each (a shard ends at a batch boundary),
    renamed into place when every shard is written, and read back as one
    input by ``convert`` and by ``pyarrow.dataset.dataset(dst)``.
    Every batch is kept as it is unless ``batch_rows`` or ``batch_bytes``
    regroup them.

    ``decode_budget`` (bytes, default 256 MiB) bounds what one batch of a
    Parquet input decodes to: larger row groups are read in several batches.

    ``batch_rows``/``batch_bytes`` regroup rows (never across a metadata
    change; ``batch_bytes`` is a byte count, a size such as ``"16M"``, or
    ``"auto"``: batches of 1 to 64 MiB pass, others are split or merged to
    about 16 MiB); ``columns`` reads only those tensors, in that order;
    ``compression`` is the output's: Parquet's page codec ("none",
    "snappy": the default, "zstd", "lz4") or a ``.lodt`` file's buffer
    codec ("none": the default, "lz4", "zstd", "zstd:LEVEL");
    ``format_version`` is a ``.lodt`` output's ("2.0", the default, or
    "1.0", which takes no codec);
    ``null_lists="empty"`` reads null lists as empty sequences;
    ``metadata="first"`` keeps the first batch's metadata in an Arrow or
    Parquet output; ``tensor_type="fixed_shape"`` writes element shapes as
    the ``arrow.fixed_shape_tensor`` extension instead of nested
    fixed-size lists, ``"variable_shape"`` 1-level tensors as
    ``arrow.variable_shape_tensor`` columns.
    """

def read_paddle(path: _PathLike) -> LodTensor:
    """Reads a Paddle tensor file."""

def read_paddle_combined(path: _PathLike, names: Sequence[str] | None = None) -> Batch:
    """Reads a Paddle ``save_combine`` file."""

def write_paddle(path: _PathLike, obj: LodTensor | _BatchLike | Sequence[LodTensor]) -> None:
    """Writes Paddle's format (one tensor, or a combined file)."""

def sequence_expand(x: _TensorLike, y: LodTensor | _Lod, ref_level: int = -1) -> LodTensor:
    """Paddle's ``sequence_expand``."""

def split(x: _TensorLike, n: int) -> list[LodTensor]:
    """Paddle's ``SplitLoDTensor`` (parts share ``x``'s data)."""

def merge(parts: Iterable[_TensorLike]) -> LodTensor:
    """Paddle's ``MergeLoDTensor``."""

def pad(x: _TensorLike, pad_value: Any = None) -> tuple[np.ndarray, list[list[int]]]:
    """Pads ``x`` into a dense array; returns it with the lengths."""

def unpad(padded: npt.ArrayLike | LodTensor, lengths: _Lod) -> LodTensor:
    """The inverse of :func:`pad`."""

def varlen(x: _TensorLike, level: int) -> tuple[npt.NDArray[np.int32], int, npt.NDArray[np.int64]]:
    """Level ``level`` of ``x`` as ``(cu_seqlens, max_seqlen, position_ids)`` (rows)."""

def row_cu_seqlens(
    x: _TensorLike, level: int, bins: Sequence[int]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """Per bin (row) of a packed batch, level ``level``'s ``cu_seqlens``, concatenated, and where each starts."""

def _tensor_from_state(
    dtype: str | None, shape: Sequence[int], lod: _Lod, data: bytes | None, lod_fits: bool
) -> LodTensor: ...
