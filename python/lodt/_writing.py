"""Writing sharded datasets: :func:`write_dataset` (torch-free, imported
with the package)."""

from __future__ import annotations

import collections.abc as _abc
import os
from typing import Any, Iterable, Mapping

from ._lodt import DEFAULT_SHARD_BYTES, Batch, DatasetWriter, commit_parts, list_parts, remove_parts, write_index

__all__ = ["DatasetWriter", "commit_parts", "list_parts", "remove_parts", "write_dataset", "write_index"]


def write_dataset(
    path: str | os.PathLike[str],
    batches: Iterable[Batch | Mapping[str, Any]] | Batch | Mapping[str, Any],
    *,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    mode: str = "create",
    metadata: Mapping[str, str] | None = None,
    writer_id: str | None = None,
    fsync: bool = True,
    storage_options: Mapping[str, str] | None = None,
    commit_id: str | None = None,
    format_version: str | None = None,
    compression: str = "none",
) -> dict[str, Any]:
    """Writes ``batches`` as a sharded dataset in directory ``path``
    (``spec/DATASET.md``) and returns its totals
    ``{"shards", "batches", "sequences", "bytes"}``.

    ``batches`` is an iterable of :class:`lodt.Batch` or of mappings of
    names to :class:`lodt.LodTensor` (or arrays), all with the same tensors
    (the schema: names, dtypes, element shapes, LoD levels); a single batch
    or mapping is one batch. Shards are ``.lodt`` files of about
    ``shard_bytes`` each (a batch is never split); the manifest is written
    last and atomically, so an interrupted write leaves the previous
    manifest valid.

    ``mode``: ``"create"`` (a new dataset; FileExistsError if one is there),
    ``"append"`` (adds shards to an existing dataset, whose schema they must
    match; the writer lock makes a second appender fail with
    BlockingIOError), or ``"part"`` with a ``writer_id`` (one of several
    parallel writers; :func:`commit_parts` joins the parts). ``metadata``
    (str to str) is added to the dataset's. A batch that does not match the
    schema raises ValueError, and the manifest is left as it was. For
    ``mode="part"`` the totals are the part's.

    ``path`` may be a URI (``s3://``, ``az://``, ``gs://``): shards are
    uploaded, then the manifest is committed with a conditional put, so a
    concurrent writer's commit makes this one raise (its shards stay
    unlisted). ``storage_options`` configure the store (object_store's keys,
    such as ``aws_endpoint``); credentials also come from the environment.

    ``commit_id`` is the write's idempotency key (1 to 128 of
    ``A-Z a-z 0-9 . _ -``; default: a new random one, returned as
    ``"commit_id"``), listed in the manifest once the write is committed. If
    the answer to the manifest's write is lost (a dropped connection, a
    timeout), the manifest is read again: listed means committed, and the
    call succeeds. If the store cannot be read to check, OSError is raised
    with ``outcome == "unknown"`` and ``commit_id``: call again with that
    ``commit_id``; a write whose id is listed writes nothing, so the data is
    never written twice.

    ``format_version`` (``"2.0"``, the default, or ``"1.0"``) and
    ``compression`` (``"none"``, ``"lz4"``, ``"zstd"``, ``"zstd:LEVEL"``,
    format 2.0 only) are the shards' (``spec/FORMAT.md``), also with
    ``mode="append"``: each shard is a file of its own, the manifest
    records each shard's version, and a dataset may mix them.
    """
    if isinstance(batches, (Batch, _abc.Mapping)):
        batches = [batches]
    writer = DatasetWriter(
        path,
        mode=mode,
        shard_bytes=shard_bytes,
        metadata=metadata,
        writer_id=writer_id,
        fsync=fsync,
        storage_options=storage_options,
        commit_id=commit_id,
        format_version=format_version,
        compression=compression,
    )
    try:
        # A write committed before (same commit_id) writes nothing.
        for batch in () if writer.already_committed else batches:
            writer.write(batch)
    except BaseException:
        writer.abort()
        raise
    totals = writer.close()
    assert totals is not None  # the writer was open
    return dict(totals)
