"""lodt datasets in Ray Data: :func:`read_lodt`, :func:`write_lodt` and
:func:`collate_fn` (``pip install 'lodt[ray]'``).

* :func:`read_lodt` is a ``ray.data.Datasource``: its read tasks split the
  dataset by shard and batch range (contiguous, balanced by sequences, as
  many as Ray's requested parallelism allows), each yielding one
  ``pyarrow.Table`` per lodt batch, built from the tensors with the mapping
  of ``spec/ARROW.md`` (one row per top-level sequence; the LoD as nested
  lists). Row counts, sizes and the schema come from the manifest: planning
  reads no data.
* :func:`write_lodt` is a ``ray.data.Datasink``: every write task writes its
  blocks as a *part* of the dataset (``DatasetWriter(mode="part")``, a writer
  id unique per task attempt, and a commit id per task,
  ``ray-JOB-TASK``, the same for every attempt: an attempt finds a part an
  earlier attempt committed, even one whose answer was lost, and writes
  nothing), and the driver merges the parts of the successful tasks with
  :func:`lodt.commit_parts` once (commit id ``ray-JOB``, or the one given),
  when every task has succeeded; the parts of failed or retried attempts
  are deleted first. A failed job leaves the previous manifest in force and
  deletes its parts (never a shard the manifest lists).
* :func:`collate_fn` makes ``iter_torch_batches`` give LoD batches back
  (jagged nested tensors, padded tensors + lengths, or :class:`lodt.Batch`);
  :func:`iter_lod_batches` does the same from Arrow batches, without the
  detour through numpy.

This module is imported only when used (``import lodt.ray``); without Ray it
raises ImportError naming the extra ``lodt[ray]``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

try:
    import pyarrow as pa
    import ray
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasink, Datasource, ReadTask
except ImportError as e:  # pragma: no cover - exercised only without Ray
    raise ImportError(
        f"lodt.ray needs Ray Data and pyarrow ({e}): pip install 'lodt[ray]'"
    ) from e

from . import _lodt
from ._lodt import DEFAULT_SHARD_BYTES, Batch, DatasetReader, DatasetWriter, LodTensor, commit_parts

__all__ = [
    "LodtDatasink",
    "LodtDatasource",
    "collate_fn",
    "iter_lod_batches",
    "read_lodt",
    "to_lod_batch",
    "write_lodt",
]

def _options(storage_options: Mapping[str, str] | None) -> dict[str, str] | None:
    return {str(k): str(v) for k, v in storage_options.items()} if storage_options else None


# -- reading ----------------------------------------------------------------


def _empty_tensor(t: Mapping[str, Any]) -> LodTensor:
    """An empty-valued tensor of schema tensor ``t`` (for its Arrow type)."""
    levels = int(t["lod_levels"])
    data = np.zeros([0, *t["element_shape"]], dtype=_numpy_dtype(t["dtype"]))
    tensor = LodTensor()
    tensor.set(data)
    if levels:
        # One top-level sequence (a level needs two offsets), empty at the bottom.
        tensor.set_recursive_sequence_lengths([[1]] * (levels - 1) + [[0]])
    return tensor


def _ray_table(batch: Batch) -> pa.Table:
    """A lodt batch as a table Ray can move between processes: element
    shapes as nested ``fixed_size_list``s (``tensor_type="nested_lists"``,
    ``spec/ARROW.md``), never the ``arrow.fixed_shape_tensor`` extension,
    which Ray 2.40 cannot serialize."""
    return pa.Table.from_batches([batch.to_arrow(tensor_type="nested_lists")])


def _numpy_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def _schema(tensors: Sequence[Mapping[str, Any]]) -> pa.Schema | None:
    """The Arrow schema of the read blocks, from the manifest's schema;
    None when it cannot be built here (bfloat16 without ml_dtypes)."""
    try:
        batch = Batch([(t["name"], _empty_tensor(t)) for t in tensors])
        return _ray_table(batch).schema
    except (ImportError, ValueError, TypeError):
        return None


class LodtDatasource(Datasource):
    """A lodt dataset (local directory or URI) as a Ray ``Datasource``.

    ``tensors``: the names to read (default: all, in schema order).
    Use through :func:`read_lodt`.
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        tensors: Sequence[str] | None = None,
        *,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.uri = os.fspath(uri)
        self.storage_options = _options(storage_options)
        reader = DatasetReader(self.uri, storage_options=self.storage_options)
        # The manifest's text: the crate plans the read tasks from it.
        self._manifest_json = reader.manifest_json()
        manifest = json.loads(self._manifest_json)
        schema = manifest["schema"]["tensors"]
        names = [t["name"] for t in schema]
        if tensors is None:
            tensors = names
        tensors = list(tensors)
        unknown = [n for n in tensors if n not in names]
        if unknown:
            raise ValueError(f"no tensor named {unknown} in the dataset; it has {names}")
        if not tensors:
            raise ValueError(f"give at least one tensor to read; the dataset has {names}")
        self.tensors = tensors
        self._all = len(tensors) == len(names) and tensors == names
        chosen = [next(t for t in schema if t["name"] == n) for n in tensors]
        self._schema = _schema(chosen)
        self._bytes = int(reader.num_bytes)

    def get_name(self) -> str:
        """The name of the read tasks (``ReadLodt``)."""
        return "Lodt"

    def estimate_inmemory_data_size(self) -> int | None:
        """The shards' bytes (tensors are stored uncompressed)."""
        return self._bytes

    def get_read_tasks(self, parallelism: int) -> list[ReadTask]:
        """At most ``parallelism`` read tasks over contiguous batch ranges
        of about equal sequence counts, with rows, bytes and schema from the
        manifest."""
        tasks = []
        for plan, rows, size in _lodt.plan_reads(self._manifest_json, max(1, int(parallelism))):
            files = [_lodt.join_location(self.uri, name) for name, _ in plan]
            meta = BlockMetadata(
                num_rows=rows,
                size_bytes=size,
                schema=self._schema,
                input_files=files,
                exec_stats=None,
            )
            read = _reader(self.uri, plan, None if self._all else self.tensors, self.storage_options)
            tasks.append(ReadTask(read, meta))
        return tasks


def _reader(
    uri: str,
    plan: list[tuple[str, list[int]]],
    tensors: list[str] | None,
    storage_options: dict[str, str] | None,
) -> Callable[[], Iterator[pa.Table]]:
    def read() -> Iterator[pa.Table]:
        for name, batches in plan:
            with _lodt.File(_lodt.join_location(uri, name), storage_options=storage_options) as f:
                for k in batches:
                    batch = f[k]
                    if tensors is not None:
                        batch = Batch([(n, batch[n]) for n in tensors])
                    yield _ray_table(batch)

    return read


def read_lodt(
    uri: str | os.PathLike[str],
    tensors: Sequence[str] | None = None,
    *,
    override_num_blocks: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    concurrency: int | None = None,
    ray_remote_args: Mapping[str, Any] | None = None,
) -> "ray.data.Dataset":
    """A lodt dataset as a ``ray.data.Dataset``, one row per top-level
    sequence, one column per tensor (``spec/ARROW.md``: a LoD of ``k``
    levels is ``k`` nested ``large_list`` levels; an element shape
    ``[n1, n2, ...]`` is nested ``fixed_size_list``s of ``n1``, ``n2``, ...,
    the form of section 4 that Ray 2.40 can move between processes, which
    ``arrow.fixed_shape_tensor`` columns it cannot).

    ``uri``: a dataset directory or URI (``s3://``, ``az://``, ``gs://``,
    ``http(s)://``, configured by ``storage_options`` as in
    :class:`lodt.Dataset`). ``tensors``: the names to read (default all).
    ``override_num_blocks``: the number of read tasks wanted (Ray's
    parallelism; at most one per lodt batch); ``concurrency`` and
    ``ray_remote_args`` are passed to ``ray.data.read_datasource``. The
    dataset order is kept when ``DataContext.execution_options.preserve_order``
    is set.

    Raises FileNotFoundError without a manifest and ValueError for an
    unknown tensor name.
    """
    source = LodtDatasource(uri, tensors, storage_options=storage_options)
    return ray.data.read_datasource(
        source,
        override_num_blocks=override_num_blocks,
        concurrency=concurrency,
        ray_remote_args=dict(ray_remote_args) if ray_remote_args else None,
    )


# -- writing ----------------------------------------------------------------


class LodtDatasink(Datasink):
    """Writes a Ray dataset as a sharded lodt dataset (see :func:`write_lodt`).

    The ids, the search for a task's committed part and the clean-up are
    lodt's (``lodt._lodt.PartJob``); the parts are written by
    :class:`lodt.DatasetWriter` and merged by :func:`lodt.commit_parts`, so
    the sink writes wherever lodt does (local directories, ``s3://``,
    ``az://``, ``gs://``)."""

    def __init__(
        self,
        uri: str | os.PathLike[str],
        *,
        shard_bytes: int = DEFAULT_SHARD_BYTES,
        mode: str = "create",
        storage_options: Mapping[str, str] | None = None,
        commit_id: str | None = None,
        format_version: str | None = None,
        compression: str = "none",
    ) -> None:
        if mode not in ("create", "append"):
            raise ValueError(f"mode must be 'create' or 'append', found {mode!r}")
        if shard_bytes <= 0:
            raise ValueError(f"shard_bytes must be positive, found {shard_bytes}")
        self.uri = os.fspath(uri)
        self.shard_bytes = int(shard_bytes)
        self.mode = mode
        self.storage_options = _options(storage_options)
        #: The shards' format version (``None``: lodt's default, 2.0) and codec.
        self.format_version = format_version
        self.compression = compression
        #: This job's ids: writer ids ``ray-JOB-TASK-ATTEMPT``, task commit
        #: ids ``ray-JOB-TASK``.
        self.job = _lodt.PartJob("ray")
        #: The commit id of the job's merge: given, or ``ray-JOB``.
        self.commit_id = commit_id or self.job.id
        #: The dataset listed ``commit_id`` when the job started: nothing is written.
        self.already_committed = False
        #: The totals of the committed dataset, after a successful write.
        self.totals: dict[str, int] | None = None

    def get_name(self) -> str:
        """The name of the write tasks (``Write``: ``Lodt``)."""
        return "Lodt"

    def on_write_start(self) -> None:
        """Nothing to do if the dataset lists the job's commit id (the same
        job was committed before); else with ``mode="create"``:
        FileExistsError if a dataset is there."""
        try:
            reader = DatasetReader(self.uri, storage_options=self.storage_options)
        except FileNotFoundError:
            return
        if self.commit_id in json.loads(reader.manifest_json()).get("commits", []):
            self.already_committed = True
            return
        if self.mode == "create":
            raise FileExistsError(
                f"a lodt dataset already exists at {self.uri}: use mode='append' to add to it"
            )

    def write(self, blocks: Iterable[Any], ctx: Any) -> None:
        """One write task: its blocks as a part of writer id
        ``ray-JOB-TASK-ATTEMPT`` and commit id ``ray-JOB-TASK`` (aborted, its
        partial manifest unwritten, if anything fails); nothing if an
        earlier attempt of the task committed its part."""
        task = int(ctx.task_idx)
        if self.already_committed:
            return
        if self.job.committed_attempt(self.uri, task, self.storage_options) is not None:
            return  # an earlier attempt of this task committed its part
        writer: DatasetWriter | None = None
        try:
            for block in blocks:
                table = BlockAccessor.for_block(block).to_arrow()
                if table.num_rows == 0:
                    continue
                if writer is None:
                    writer = DatasetWriter(
                        self.uri,
                        mode="part",
                        writer_id=self.job.new_writer_id(task),
                        shard_bytes=self.shard_bytes,
                        storage_options=self.storage_options,
                        commit_id=self.job.task_commit_id(task),
                        format_version=self.format_version,
                        compression=self.compression,
                    )
                for rb in table.combine_chunks().to_batches():
                    if rb.num_rows:
                        writer.write(Batch.from_arrow(rb))
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if writer is not None:
            writer.close()

    def _commit(self) -> None:
        self.totals = dict(
            commit_parts(self.uri, storage_options=self.storage_options, commit_id=self.commit_id)
        )

    def on_write_complete(self, write_result_blocks: list[Any]) -> Any:
        """Keeps one part per write task, deletes the others (failed or
        retried attempts, parts other jobs left), checks the sequence count,
        and merges the parts (``commit_parts``)."""
        result = super().on_write_complete(write_result_blocks)
        if self.already_committed:
            self.job.clean(self.uri, keep=False, storage_options=self.storage_options)
            self._commit()
            return result
        rows = getattr(result, "num_rows", None)
        cleanup = self.job.clean(self.uri, keep=True, storage_options=self.storage_options)
        if rows is not None and cleanup["sequences"] != rows:
            raise RuntimeError(
                f"write_lodt: the parts hold {cleanup['sequences']} sequences, the write tasks "
                f"wrote {rows}; not committing"
            )
        self._commit()
        return result

    def on_write_failed(self, error: Exception) -> None:
        """Deletes every part of this job that the manifest does not list
        (nothing if the manifest cannot be read: the merge's outcome may be
        unknown)."""
        self.job.clean(self.uri, keep=False, storage_options=self.storage_options)


def write_lodt(
    ds: "ray.data.Dataset",
    uri: str | os.PathLike[str],
    *,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    mode: str = "create",
    storage_options: Mapping[str, str] | None = None,
    concurrency: int | None = None,
    ray_remote_args: Mapping[str, Any] | None = None,
    commit_id: str | None = None,
    format_version: str | None = None,
    compression: str = "none",
) -> dict[str, Any]:
    """Writes the Ray dataset ``ds`` as a sharded lodt dataset at ``uri``
    (a directory, or a URI of any object store lodt writes: ``s3://``,
    ``az://`` (``abfs://``, ``azure://``), ``gs://``, configured by
    ``storage_options`` as in :class:`lodt.Dataset`; a shared directory or
    store every worker reaches) and returns the dataset's totals
    ``{"shards", "batches", "sequences", "bytes", "commit_id"}``.

    The rows must be Arrow-convertible to lodt tensors (``spec/ARROW.md``;
    what :func:`read_lodt` gives, and what ``map_batches(...,
    batch_format="pyarrow")`` keeps). Each write task writes its blocks as
    a part (each block one or more lodt batches; shards of about
    ``shard_bytes``); when every task has succeeded the driver deletes the
    parts of failed or retried attempts and merges the others with
    :func:`lodt.commit_parts`, in task order (the dataset's order with
    ``preserve_order``). If the job fails, the manifest stays as it was and
    the job's parts are deleted.

    ``mode``: ``"create"`` (FileExistsError if a dataset is there) or
    ``"append"`` (the batches must match its schema). Only one write_lodt
    job at a time per dataset: a job deletes the unlisted parts and shards
    other write_lodt jobs left (such as those of a task still running when
    its job failed, which Ray cancels but does not wait for).

    Retries are idempotent: a write task retried by Ray finds a part an
    earlier attempt committed (commit id ``ray-JOB-TASK``) and writes
    nothing, and a merge whose answer was lost is found in the manifest.
    ``commit_id`` names the job's merge (default ``ray-JOB``, returned as
    ``"commit_id"``): calling ``write_lodt`` again with the ``commit_id`` of
    a job that was committed (after an error saying the outcome is unknown)
    writes nothing and returns the dataset's totals.

    ``format_version`` (``"2.0"``, the default, or ``"1.0"``) and
    ``compression`` are the new shards', as in :class:`lodt.DatasetWriter`
    (with ``mode="append"`` too: a dataset may mix versions).
    """
    sink = LodtDatasink(
        uri,
        shard_bytes=shard_bytes,
        mode=mode,
        storage_options=storage_options,
        commit_id=commit_id,
        format_version=format_version,
        compression=compression,
    )
    ds.write_datasink(
        sink,
        concurrency=concurrency,
        ray_remote_args=dict(ray_remote_args) if ray_remote_args else None,
    )
    assert sink.totals is not None
    return sink.totals


# -- batches for training ------------------------------------------------------


def _levels(schema: Any) -> dict[str, int]:
    """Column name -> LoD levels (its outer ``list``/``large_list`` levels)
    of an Arrow schema, a Ray ``Schema`` (``ds.schema()``) or a mapping."""
    if isinstance(schema, Mapping):
        return {str(k): int(v) for k, v in schema.items()}
    base = getattr(schema, "base_schema", schema)
    if not isinstance(base, pa.Schema):
        raise TypeError(
            f"schema: expected ds.schema(), a pyarrow.Schema or a mapping of names to LoD levels, "
            f"found {type(schema).__name__}"
        )
    out = {}
    for field in base:
        t, k = field.type, 0
        while pa.types.is_list(t) or pa.types.is_large_list(t):
            t, k = t.value_type, k + 1
        out[field.name] = k
    return out


def to_lod_batch(batch: Any, schema: Any = None) -> Batch:
    """A Ray batch as a :class:`lodt.Batch`: a ``pyarrow.Table`` (exact,
    ``spec/ARROW.md``) or a dict of numpy arrays (Ray's default format,
    which needs ``schema``: ``ds.schema()``, a ``pyarrow.Schema`` or a
    mapping of column names to LoD levels)."""
    if isinstance(batch, Batch):
        return batch
    if isinstance(batch, (pa.Table, pa.RecordBatch)):
        table = batch if isinstance(batch, pa.RecordBatch) else batch.combine_chunks()
        return Batch.from_arrow(table)
    if isinstance(batch, Mapping):
        if schema is None:
            raise ValueError(
                "a numpy batch does not say which list levels are LoD levels: "
                "pass schema=ds.schema() (or use iter_lod_batches, which reads Arrow)"
            )
        levels = _levels(schema)
        missing = [k for k in batch if k not in levels]
        if missing:
            raise ValueError(f"columns {missing} are not in the schema, which has {sorted(levels)}")
        # Ray gives a list column as object arrays of arrays, nested once per
        # list level, LoD levels and element-shape levels alike: the schema's
        # levels say how many are LoD.
        return Batch([(str(k), _lodt.from_nested(np.asarray(v), levels[k])) for k, v in batch.items()])
    raise TypeError(
        f"expected a pyarrow Table or a dict of numpy arrays, found {type(batch).__name__}"
    )


def collate_fn(schema: Any, output: str = "nested", pad_value: Any = None) -> Callable[[Any], Any]:
    """A ``collate_fn`` for ``Dataset.iter_torch_batches`` giving LoD
    batches back. ``schema``: ``ds.schema()`` of the dataset iterated (or a
    ``pyarrow.Schema``, or a mapping of names to LoD levels), which says
    which of Ray's nested numpy levels are LoD levels.

    * ``output="nested"``: per tensor a torch jagged nested tensor (1 LoD
      level) or a dense tensor (no LoD), as :meth:`lodt.LodTensor.to_torch`;
    * ``output="padded"``: per tensor ``(padded, lengths)``, the padded dense
      tensor and one int64 length tensor per LoD level (any number of
      levels; ``pad_value`` fills);
    * ``output="batch"``: the :class:`lodt.Batch` itself.

    ``ds.iter_torch_batches(batch_size=32, collate_fn=lodt.ray.collate_fn(ds.schema(), "padded"))``.
    :func:`iter_lod_batches` gives the same from Arrow batches, faster.
    """
    if output not in ("nested", "padded", "batch"):
        raise ValueError(f"output must be 'nested', 'padded' or 'batch', found {output!r}")
    levels = _levels(schema) if schema is not None else None

    def collate(batch: Any) -> Any:
        lod = to_lod_batch(batch, levels)
        if output == "batch":
            return lod
        from .torch import to_torch

        return to_torch(lod, padded=output == "padded", pad_value=pad_value)

    return collate


def iter_lod_batches(
    ds: "ray.data.Dataset", *, batch_size: int = 32, output: str = "batch", pad_value: Any = None, **kwargs: Any
) -> Iterator[Any]:
    """``ds.iter_batches`` in Arrow format, each batch given as
    :func:`collate_fn` ``(schema, output, pad_value)`` makes it (default: a
    :class:`lodt.Batch`). Other keyword arguments go to ``iter_batches``."""
    collate = collate_fn(None, output, pad_value)
    for table in ds.iter_batches(batch_size=batch_size, batch_format="pyarrow", **kwargs):
        yield collate(table)
