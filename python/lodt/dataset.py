"""Sharded datasets (``spec/DATASET.md``): :class:`Dataset`, a shuffling,
partitioned, resumable stream of LoD mini-batches over a directory of
``.lodt`` shards, and :func:`write_dataset` (in :mod:`lodt._writing`).

:class:`Dataset` is a ``torch.utils.data.IterableDataset`` when torch was
imported before it was made (``import torch`` first; :class:`lodt.torch.DataLoader`
takes either) and a plain iterable otherwise. Nothing here imports torch:
opening a dataset costs no framework import.

Who reads what: an epoch's order (a permutation of every sequence, fixed by
``seed`` and the epoch) is dealt round robin to ``world_size × num_workers``
consumers: consumer ``rank × num_workers + worker``. Their union is every
sequence exactly once per epoch (``remainder="keep"``).

Resuming: :meth:`Dataset.state_dict` is this rank's position (what was
*delivered*, never what was only prefetched), a small JSON-compatible dict;
:meth:`Dataset.load_state_dict` makes the next pass continue with exactly the
mini-batch that would have come next. The dataset knows what was delivered
when it is iterated in this process (``DataLoader(num_workers=0)``, or a
plain loop), or through :class:`lodt.torch.DataLoader` with worker processes
(each mini-batch carries its worker's position to the main process). With a
plain ``torch.utils.data.DataLoader`` and ``num_workers > 0`` the main
process cannot know it: use :class:`lodt.torch.DataLoader` (or torchdata's
``StatefulDataLoader``, which calls ``state_dict`` in each worker).
"""

from __future__ import annotations

import sys
import json
import os
import threading
import warnings
from typing import TYPE_CHECKING, Any, Iterator, Literal, Mapping, Sequence

import numpy as np

from . import _lodt
from ._lodt import Batch, DatasetReader, Packing
from ._lodt import loader as _native_loader

def _torch_data() -> Any:
    """``torch.utils.data`` if torch is already imported, else None: looked
    up in ``sys.modules``, never imported (importing torch costs seconds and
    hundreds of MB in every process that opens a dataset)."""
    if "torch" not in sys.modules:
        return None
    try:
        import torch.utils.data as data
    except ImportError:  # pragma: no cover - a broken torch install
        return None
    return data


def _worker_info() -> Any:
    """torch's ``get_worker_info()`` (None outside a DataLoader worker)."""
    data = _torch_data()
    return None if data is None else data.get_worker_info()


_WITH_TORCH: dict[type, type] = {}


def _with_torch(cls: type) -> type:
    """``cls`` (a lodt dataset class), or, once torch is imported, the
    subclass of ``cls`` and torch's ``IterableDataset`` that stands for it."""
    data = _torch_data()
    if data is None or issubclass(cls, data.IterableDataset):
        return cls
    made = _WITH_TORCH.get(cls)
    if made is None:

        class made(cls, data.IterableDataset):  # type: ignore[valid-type,misc,no-redef]
            pass

        made.__name__, made.__qualname__, made.__module__ = cls.__name__, cls.__qualname__, cls.__module__
        made.__doc__ = cls.__doc__
        _WITH_TORCH[cls] = made
    return made


def _plain(cls: type) -> type:
    """The lodt class a torch-made subclass stands for (pickled by name)."""
    for plain, made in _WITH_TORCH.items():
        if made is cls:
            return plain
    return cls


def _rebuild(cls: type, state: dict[str, Any]) -> Any:
    """Unpickles a dataset: as torch's kind when torch is imported here."""
    obj = object.__new__(_with_torch(cls))
    obj.__setstate__(state)
    return obj


def _as_torch(dataset: Any) -> Any:
    """``dataset`` made a ``torch.utils.data.IterableDataset`` in place if
    it was made before torch was imported (torch must be imported now)."""
    if isinstance(dataset, Dataset):
        dataset.__class__ = _with_torch(type(dataset))
    return dataset


__all__ = ["Dataset"]

def _packing(
    packing: Packing | None,
    tokens: int | None,
    rows: int | None,
    buffer: int | None,
    equal: bool | None,
    truncate: bool | None,
) -> Packing | None:
    """The packing options: ``packing``, or the deprecated ``pack_*``
    keywords made into one (with a ``DeprecationWarning``)."""
    given = {
        k: v
        for k, v in (("pack_tokens", tokens), ("pack_rows", rows), ("pack_buffer", buffer),
                     ("pack_equal", equal), ("pack_truncate", truncate))
        if v is not None
    }
    if packing is not None and not isinstance(packing, Packing):
        raise TypeError(f"packing must be a lodt.Packing, found {type(packing).__name__}")
    if not given:
        return packing
    if packing is not None:
        raise ValueError(f"give packing=lodt.Packing(...) or the deprecated {', '.join(given)}, not both")
    warnings.warn(
        f"{', '.join(given)}: use packing=lodt.Packing(tokens=..., rows=..., buffer=..., equal=..., truncate=...)",
        DeprecationWarning,
        stacklevel=3,
    )
    if tokens is None:
        what = "pack_truncate" if truncate else "pack_rows" if rows is not None else next(iter(given))
        raise ValueError(f"{what} needs pack_tokens (the bin's rows)")
    return Packing(
        tokens,
        rows=rows,
        buffer=1000 if buffer is None else buffer,
        equal=equal,
        truncate=bool(truncate),
    )


#: The version of :meth:`Dataset.state_dict`'s checkpoint object
#: (``spec/DATASET.md`` 7.5; the loader state inside has its own, 7.2).
STATE_VERSION = _lodt.CHECKPOINT_VERSION


def _distributed() -> tuple[int, int] | None:
    """``(rank, world_size)`` of an initialised ``torch.distributed``, else None.

    Only a ``torch.distributed`` already imported can be initialised: it is
    looked up in ``sys.modules``, never imported (importing torch costs
    seconds and hundreds of MB in every process that opens a dataset).
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


class _Delivered:
    """A mini-batch sent by a ``DataLoader`` worker with its consumer's
    position after it (unwrapped by :class:`lodt.torch.DataLoader`)."""

    __slots__ = ("value", "consumer", "local", "state", "cursor")

    def __init__(self, value: Any, consumer: int, local: int, state: str, cursor: str | None) -> None:
        self.value = value
        self.consumer = consumer
        self.local = local
        self.state = state
        # The consumer's new cursor (spec/DATASET.md 7.3), sent only when it
        # changed (every 65,536 positions); None otherwise.
        self.cursor = cursor

    def __getstate__(self) -> tuple[Any, int, int, str, str | None]:
        return (self.value, self.consumer, self.local, self.state, self.cursor)

    def __setstate__(self, s: tuple[Any, int, int, str, str | None]) -> None:
        self.value, self.consumer, self.local, self.state, self.cursor = s


class Dataset:
    """A sharded lodt dataset as a stream of LoD mini-batches
    (:class:`lodt.Batch`, one top-level sequence per dataset sequence, the
    schema's tensors in order), and random access to its sequences.

    ``Dataset(path, batch_size=32, shuffle=True, seed=0)``:

    * ``batch_size`` sequences per mini-batch, or ``max_rows``: as many
      sequences as fit in that many rows (tokens) of tensor ``rows_of``
      (default: the first). ``drop_last`` drops a short last mini-batch.
    * ``shuffle``/``seed``/``shuffle_buffer``: a deterministic order per
      ``(seed, epoch)``: shards, batches, and a buffer of ``shuffle_buffer``
      sequence ids (``spec/DATASET.md`` 6). Without shuffle, dataset order.
    * ``rank``/``world_size``: explicit, or ``torch.distributed``'s when it
      is initialised (when the Dataset is made), else 0 and 1. DataLoader
      workers (``torch.utils.data.get_worker_info``) split a rank's share.
    * ``packing=lodt.Packing(tokens=K, rows=None, buffer=1000, equal=None,
      truncate=False)``: packed mini-batches (``spec/DATASET.md`` 7.4)
      instead: whole sequences best-fit into bins of at most ``tokens`` rows
      of ``rows_of`` (a longer sequence alone, never split or dropped),
      chosen from windows of ``buffer`` sequences; with ``rows=R``, ``R``
      bins of ``tokens`` rows per mini-batch (an ``[R, L]`` shape; the bins
      are in the batch's metadata, see :func:`lodt.torch.varlen`). Exactly
      resumable; on another world size via :meth:`merge_states`. ``equal``:
      every consumer (rank and worker) yields the same number of packed
      mini-batches per epoch, as data-parallel training needs (the smaller
      counts are raised by splitting mini-batches of their last windows; a
      ValueError if a consumer has fewer sequences than the largest count).
      Default (``None``): on when ``world_size > 1``. ``truncate=True``: a
      sequence longer than ``tokens`` is cut to its first ``tokens`` rows
      (with every tensor whose rows align with ``rows_of``; a tensor without
      LoD is kept) instead of coming alone; the cuts are in the batch's
      metadata ``"lodt.pack.truncated"`` (``id:rows``, comma-separated,
      ``rows`` before the cut). The keywords ``pack_tokens``, ``pack_rows``,
      ``pack_buffer``, ``pack_equal`` and ``pack_truncate`` of earlier
      releases still work, with a ``DeprecationWarning``.
    * ``remainder``: ``"keep"`` (every sequence once; consumers differ by at
      most one sequence), ``"drop"`` or ``"repeat"`` (equal counts).
    * ``partition``: how an epoch is dealt to the consumers (ranks ×
      workers). ``"round_robin"``: consumer ``c`` of ``C`` takes positions
      ``c, c + C, ...`` of the shuffled order, so every consumer reads from
      the whole dataset. ``"locality"``: the order is shuffled in windows of
      ``2 × shuffle_buffer`` sequences (mixing neighbours as much as round
      robin's buffer) and each consumer takes one contiguous
      block of it, so the ranks of a cluster fetch disjoint parts of a
      remote dataset (each byte about once in all) and the workers of a
      node neighbouring parts; one dataset without packing only. ``None``
      (the default): a resumed state's partition, else ``"locality"`` for a
      dataset at a URI without packing and ``"round_robin"`` otherwise.
    * ``prefetch``: mini-batches read ahead by a background thread.
    * ``storage_options``: for a dataset at a URI (``s3://``, ``az://``,
      ``gs://``, ``http(s)://``), the store's configuration (object_store's
      keys); credentials also come from the environment.
    * ``version``: a dataset version to read instead of the current one
      (``spec/DATASET.md`` 3.3): its number, or a tag's name
      (:func:`lodt.tag`); :func:`lodt.log` lists them. ``KeyError`` if
      there is no such version or tag.
    * ``return_ids``: yield ``(ids, batch)``, ``ids`` an int64 array of the
      sequences' ids (dataset order numbers, as :meth:`sequence` takes).
    * ``mmap``/``check_bodies``: local shards are memory-mapped (``mmap=False``:
      positional reads). Every batch read from an object store or with
      positional reads is checked against its checksums, bodies included,
      before it is used (a damaged byte is a ValueError naming the shard and
      batch); a mapped batch's bodies only with ``check_bodies=True``, on the
      batch's first read (one pass over its bodies).
    * ``cache_bytes``: the budget of the random-access cache (default
      ``None``: 256 MiB; 0 turns it off). :meth:`sequence`, ``ds[i]``,
      :meth:`sequence_arrays` and :meth:`take` take a batch from it, or read
      it (and decode it, when compressed) and keep it there: a run of reads
      into one compressed batch decodes it once. A decoded batch counts its
      decoded bytes, a mapped one a few hundred bytes per tensor; the oldest
      batches go first. Each process (each DataLoader worker) has its own.
    * ``cache_dir``/``disk_cache_bytes``: for a dataset at a URI, the disk
      cache of the ranges read (checked against their checksums on every
      hit). ``None`` (the default) is the node cache, shared by every process
      of the machine so that its workers and ranks fetch each range once: a
      directory under the system's temporary directory
      (``$LODT_CACHE_DIR`` if set). A directory uses that one; ``False``
      none. ``disk_cache_bytes`` bounds it (default 1 GiB; the least
      recently used ranges go first). The loader reads ahead in its epoch
      order, with many ranged requests in flight, merging adjacent batches.

    Call :meth:`set_epoch` before each epoch (as with ``DistributedSampler``):
    every pass over the dataset begins where :meth:`set_epoch` or
    :meth:`load_state_dict` put it. The dataset is opened lazily in each
    process, so ``DataLoader`` workers (fork or spawn) open it themselves.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # torch's IterableDataset only if torch is already imported.
        return object.__new__(_with_torch(cls))

    def __reduce__(self) -> tuple[Any, ...]:
        # By the lodt class's name: torch's kind again where torch is imported.
        return (_rebuild, (_plain(type(self)), self.__getstate__()))

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch_size: int = 32,
        max_rows: int | None = None,
        rows_of: str | None = None,
        drop_last: bool = False,
        shuffle: bool = False,
        seed: int = 0,
        shuffle_buffer: int = 16384,
        rank: int | None = None,
        world_size: int | None = None,
        remainder: str = "keep",
        partition: Literal["round_robin", "locality"] | None = None,
        prefetch: int = 2,
        mmap: bool = True,
        return_ids: bool = False,
        storage_options: Mapping[str, str] | None = None,
        check_bodies: bool = False,
        packing: Packing | None = None,
        cache_bytes: int | None = None,
        cache_dir: str | os.PathLike[str] | Literal[False] | None = None,
        disk_cache_bytes: int | None = None,
        pack_tokens: int | None = None,
        pack_rows: int | None = None,
        pack_buffer: int | None = None,
        pack_equal: bool | None = None,
        pack_truncate: bool | None = None,
        version: int | str | None = None,
    ) -> None:
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither (torch.distributed's, or 0 of 1)")
        self.path = os.fspath(path)
        self.batch_size = batch_size
        self.max_rows = max_rows
        self.rows_of = rows_of
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer
        self.remainder = remainder
        if partition not in (None, "round_robin", "locality"):
            raise ValueError(f'partition is "round_robin", "locality" or None (the default), found {partition!r}')
        self.partition = partition
        self.prefetch = prefetch
        self.mmap = mmap
        self.check_bodies = check_bodies
        if cache_bytes is not None and (isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0):
            raise ValueError(f"cache_bytes is a number of bytes >= 0 (or None for the default), found {cache_bytes!r}")
        self.cache_bytes = cache_bytes
        if cache_dir is True:
            raise ValueError("cache_dir is a directory, None (the node cache) or False (no disk cache), found True")
        self.cache_dir = cache_dir if cache_dir is False or cache_dir is None else os.fspath(cache_dir)
        if disk_cache_bytes is not None and (isinstance(disk_cache_bytes, bool) or not isinstance(disk_cache_bytes, int) or disk_cache_bytes < 0):
            raise ValueError(f"disk_cache_bytes is a number of bytes >= 0 (or None for 1 GiB), found {disk_cache_bytes!r}")
        self.disk_cache_bytes = disk_cache_bytes
        self.return_ids = return_ids
        self.packing = _packing(packing, pack_tokens, pack_rows, pack_buffer, pack_equal, pack_truncate)
        self.storage_options = dict(storage_options) if storage_options else None
        if version is not None and (isinstance(version, bool) or not isinstance(version, (int, str))):
            raise TypeError(f"version is a version number (int) or a tag name (str), found {version!r}")
        # Pinned to its number once opened, so that every process (a
        # DataLoader's workers) reads the same version.
        self._version: int | str | None = version
        self._explicit = None if rank is None else (int(rank), int(world_size))  # type: ignore[arg-type]
        self._rank_world: tuple[int, int] | None = None
        self._reader: DatasetReader | None = None
        self._pid: int | None = None
        self._epoch = 0
        self._resume: dict[str, Any] | None = None
        self._workers = 1
        self._report = False
        # Guards the progress (_states, _live, _last): one thread iterates
        # while another may call state_dict().
        self._progress_lock = threading.RLock()
        self._reset_progress()
        native = self._native()
        # The manifest as Python objects only when asked for (schema, shards,
        # ...): a manifest of a million shards is hundreds of MB of them.
        self._manifest_cache: dict[str, Any] | None = None
        self._totals = self._native_totals(native)
        # Checks the options now (a bad batch size, remainder, rank, ...).
        rank_, world = self._ranks()
        self._probe(rank_, world, 0, 1).close()

    @property
    def _manifest(self) -> dict[str, Any]:
        """The manifest's JSON as Python objects, parsed on first use."""
        if self._manifest_cache is None:
            self._manifest_cache = json.loads(self._native().manifest_json())
        return self._manifest_cache

    def _native_totals(self, native: Any) -> dict[str, int]:
        """The totals as the native module counts them (never re-summed
        from the manifest's JSON)."""
        return {
            "sequences": native.num_sequences,
            "batches": native.num_batches,
            "bytes": native.num_bytes,
            "shards": native.num_shards,
        }

    # -- the native dataset, per process -----------------------------------

    def _native(self) -> DatasetReader:
        pid = os.getpid()
        if self._reader is None or self._pid != pid:
            self._reader = DatasetReader(
                self.path,
                mmap=self.mmap,
                storage_options=self.storage_options,
                check_bodies=self.check_bodies,
                cache_bytes=self.cache_bytes,
                cache_dir=self.cache_dir,
                disk_cache_bytes=self.disk_cache_bytes,
                version=self._version,
            )
            if self._version is not None and self._reader.version is not None:
                self._version = self._reader.version
            self._pid = pid
        return self._reader

    @property
    def version(self) -> int | None:
        """The number of the dataset version this reads (``spec/DATASET.md``
        3.3): the one given as ``version=`` (a number, or a tag's), or the
        current one; ``None`` for a dataset written before versions."""
        return self._native().version

    @property
    def commit(self) -> dict[str, Any] | None:
        """The record of the commit that made this version: ``version``,
        ``time``, ``commit_id``, ``operation``, ``sequences``, ``bytes`` and
        what it added and removed (as :func:`lodt.log` lists them)."""
        text = self._native().commit_json()
        return None if text is None else dict(json.loads(text))

    def _ranks(self) -> tuple[int, int]:
        """This process's ``(rank, world_size)``."""
        if self._explicit is not None:
            return self._explicit
        if self._rank_world is None:
            self._rank_world = _distributed() or (0, 1)
        return self._rank_world

    def _loader(self, rank: int, world: int, local: int, workers: int, prefetch: int) -> Any:
        resume = self._resume
        return _native_loader(
            self._native(),
            batch_size=self.batch_size,
            max_rows=self.max_rows,
            rows_of=self.rows_of,
            drop_last=self.drop_last,
            seed=self.seed if self.shuffle else None,
            shuffle_buffer=self.shuffle_buffer,
            rank=rank,
            world_size=world,
            worker=local,
            num_workers=workers,
            remainder=self.remainder,
            prefetch=prefetch,
            epoch=self._epoch,
            state=None if resume is None else json.dumps(resume["loader"]),
            packing=self.packing,
            partition=self.partition,
        )

    def _probe(self, rank: int, world: int, local: int, workers: int) -> Any:
        """A loader that reads nothing (no prefetch): for positions."""
        return self._loader(rank, world, local, workers, 0)

    def _rotation(self, workers: int) -> int:
        """Which consumer worker 0 serves in this pass: a resumed pass starts
        with the consumer that would have delivered next, so the
        ``DataLoader``'s round robin continues exactly."""
        resume = self._resume
        if resume is None:
            return 0
        _, world = self._ranks()
        return _lodt.checkpoint_first_worker(json.dumps(resume), world, workers)

    def _reset_progress(self) -> None:
        with self._progress_lock:
            # Per consumer, the state of what it has delivered: set before
            # each mini-batch is handed out, read by state_dict() (from any
            # thread) without touching a live loader.
            self._states: dict[int, str] = {}
            # Per consumer, the latest cursor of its order (JSON text): the
            # states above are saved without it (it changes rarely and is
            # large), and state_dict() puts it back.
            self._cursors: dict[int, str] = {}
            self._live: dict[int, Any] = {}
            self._last: int | None = None

    # -- lodt.torch.DataLoader's hooks -------------------------------------

    def _begin(self, workers: int, report: bool) -> None:
        """A ``DataLoader`` pass with ``workers`` worker processes starts."""
        self._ranks()
        self._workers = workers
        self._report = report
        self._reset_progress()

    def _record(self, item: _Delivered) -> None:
        """The main process received a worker's mini-batch."""
        with self._progress_lock:
            self._states[item.consumer] = item.state
            if item.cursor is not None:
                self._cursors[item.consumer] = item.cursor
            self._last = item.local

    # -- iteration -------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        info = _worker_info()
        if info is None:
            worker, workers = 0, 1
            self._workers = 1
            self._reset_progress()
        else:
            worker, workers = info.id, info.num_workers
        rank, world = self._ranks()
        local = _lodt.served_worker(worker, self._rotation(workers), workers)
        _, consumer = _lodt.consumer(rank, world, local, workers)
        report = self._report and info is not None
        loader = self._loader(rank, world, local, workers, self.prefetch)
        state, _ = loader.progress()
        cursor = loader.cursor()
        # The cursor position last sent with a mini-batch (-1: none sent yet,
        # so the first one carries the cursor a resumed loader starts from).
        at = -1
        with self._progress_lock:
            self._live[consumer] = loader
            self._states[consumer] = state
            self._cursors.pop(consumer, None)
            if cursor is not None:
                self._cursors[consumer] = cursor
        try:
            while True:
                item = loader.next_with_ids()
                if item is None:
                    break
                ids, batch = item
                out = (np.asarray(ids, dtype=np.int64), batch) if self.return_ids else batch
                # The state without its cursor, and the cursor only when it
                # moved: the cursor holds the shuffle buffer's ids.
                state, now = loader.progress()
                cursor = loader.cursor() if now != at else None
                at = now
                with self._progress_lock:
                    # Handed out from here on: a state_dict() of any thread
                    # now counts this mini-batch (and only it) as delivered.
                    if self._live.get(consumer) is loader:
                        self._states[consumer] = state
                        if cursor is not None:
                            self._cursors[consumer] = cursor
                    self._last = local
                yield _Delivered(out, consumer, local, state, cursor) if report else out
                # Not held while the next one is gathered: its buffers go back
                # to the dataset's pool once the caller drops it too.
                del item, batch, out
        finally:
            with self._progress_lock:
                if self._live.get(consumer) is loader:
                    del self._live[consumer]
            loader.close()

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass epoch ``epoch`` (its own order when
        shuffling), from its start; or, when a state of that epoch was just
        loaded (:meth:`load_state_dict`), from the loaded position."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, found {epoch}")
        if self._resume is not None and int(self._resume["loader"]["epoch"]) == epoch:
            self._epoch = epoch
            return
        self._resume = None
        self._epoch = epoch
        self._reset_progress()

    @property
    def epoch(self) -> int:
        """The epoch of the next (or current) pass."""
        return self._epoch

    # -- resume -----------------------------------------------------------

    def _consumer_state(self, consumer: int, rank: int, world: int, local: int, workers: int) -> str:
        if consumer in self._states:
            return self._states[consumer]
        probe = self._probe(rank, world, local, workers)
        try:
            return str(probe.state())
        finally:
            probe.close()

    def state_dict(self) -> dict[str, Any]:
        """This rank's position: ``{"version": 1, "loader": S, "next_worker": k}``
        where ``S`` is the loader state of ``spec/DATASET.md`` 7.2 holding
        the count of every consumer of this rank (its DataLoader workers),
        and ``k`` the worker that delivers next. JSON-compatible; save it
        with the checkpoint (one per rank).

        Inside a ``DataLoader`` worker (torchdata's ``StatefulDataLoader``
        calls it there) it is that worker's own position.

        Thread-safe: called from another thread while one thread iterates,
        it is the position after the mini-batches handed out so far (a
        mini-batch counts from the moment the iterator hands it out).
        """
        info = _worker_info()
        rank, world = self._ranks()
        with self._progress_lock:
            untouched = self._resume is not None and not self._states and self._last is None
        if info is None and untouched:
            # Loaded and nothing delivered since: the loaded state itself
            # (its consumers and next worker), not a re-dealt one.
            return json.loads(json.dumps(self._resume))
        if info is not None:
            workers = info.num_workers
            locals_ = [_lodt.served_worker(info.id, self._rotation(workers), workers)]
        else:
            workers = self._workers
            locals_ = list(range(workers))
        pairs = [(_lodt.consumer(rank, world, w, workers)[1], w) for w in locals_]
        with self._progress_lock:
            states = [self._consumer_state(c, rank, world, local, workers) for c, local in pairs]
            cursors = [self._cursors.get(c) for c, _ in pairs]
            last = self._last
        merged = _lodt.merge_loader_states(states, cursors)
        next_worker = _lodt.next_worker(last, self._rotation(workers), workers)
        return dict(json.loads(_lodt.checkpoint_to_json(merged, next_worker)))

    def load_state_dict(self, state: dict[str, Any], *, appended: str = "next_epoch") -> None:
        """Makes the next pass continue from ``state`` (of
        :meth:`state_dict`, or a bare loader state of ``spec/DATASET.md``
        7.2, e.g. :meth:`merge_states` of every rank's): with the same
        world size and workers, exactly with the mini-batch that would have
        come next; with others (a merged, complete state), with the rest of
        the epoch, no sequence twice or skipped. Raises ValueError for a
        state of another dataset or other shuffle/remainder options.

        On a dataset appended to since the state was saved, the rest of the
        state's epoch delivers the sequences it knew; the appended ones
        join from the next epoch (``appended="next_epoch"``), or after the
        rest of this one (``appended="now"``: every sequence, old and
        appended, once in the epoch; round robin, not packing)."""
        if appended not in ("next_epoch", "now"):
            raise ValueError(f'appended must be "next_epoch" or "now", found {appended!r}')
        # The checkpoint object (spec/DATASET.md 7.5), checked by the crate.
        text = _checkpoint_text(state)
        if appended == "now":
            text = self._native().join_appended(text)
        rank, world = self._ranks()
        workers = _lodt.checkpoint_workers(text, world)
        wrapped: dict[str, Any] = json.loads(text)
        self._resume = wrapped
        self._epoch = int(wrapped["loader"]["epoch"])
        self._reset_progress()
        # Check it now: a state of another dataset, shuffle or remainder, or
        # one that cannot place this rank, raises here.
        try:
            # Every consumer of this rank: a state that cannot resume one of
            # its workers fails here, not when that worker starts.
            for local in range(workers):
                self._probe(rank, world, local, workers).close()
        except Exception:
            self._resume = None
            raise

    @staticmethod
    def merge_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Merges the :meth:`state_dict` of every rank of one checkpoint into
        one complete state, to resume on another world size (or number of
        workers)."""
        merged = _lodt.merge_checkpoints([_checkpoint_text(s) for s in states])
        return dict(json.loads(merged))

    # -- metadata and random access ---------------------------------------

    def __len__(self) -> int:
        """The number of sequences in the dataset (all ranks together)."""
        return self._totals["sequences"]

    @property
    def num_sequences(self) -> int:
        """The number of top-level sequences."""
        return len(self)

    @property
    def num_shards(self) -> int:
        """The number of shards."""
        return self._totals["shards"]

    @property
    def num_batches(self) -> int:
        """The number of stored batches, over every shard."""
        return self._totals["batches"]

    @property
    def num_bytes(self) -> int:
        """The size of every shard, in bytes."""
        return self._totals["bytes"]

    @property
    def schema(self) -> list[dict[str, Any]]:
        """The tensors: ``[{"name", "dtype", "element_shape", "lod_levels"}, ...]``."""
        return json.loads(json.dumps(self._manifest["schema"]["tensors"]))

    @property
    def metadata(self) -> dict[str, str]:
        """The dataset's metadata (str to str)."""
        return dict(self._manifest.get("metadata", {}))

    @property
    def shards(self) -> list[dict[str, Any]]:
        """Per shard: ``{"name", "bytes", "batches", "sequences"}``."""
        keys = ("name", "bytes", "batches", "sequences")
        return [{k: s[k] for k in keys} for s in self._manifest["shards"]]

    @property
    def manifest(self) -> dict[str, Any]:
        """The whole manifest (``spec/DATASET.md`` 3), as parsed JSON."""
        return json.loads(json.dumps(self._manifest))

    def sequence(self, index: int) -> Batch:
        """Sequence ``index`` (dataset order; negative from the end): a
        batch of one top-level sequence per tensor, read in place."""
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"sequence {index} out of range: the dataset has {n}")
        return self._native().sequence(i)

    def __getitem__(self, index: int) -> Batch:
        """``ds[i]``: :meth:`sequence`."""
        return self.sequence(index)

    def sequence_arrays(self, index: int) -> dict[str, np.ndarray]:
        """Sequence ``index`` (dataset order; negative from the end) as
        numpy arrays, with no :class:`lodt.Batch` built (the cheaper path
        for one item at a time): per tensor, ``name`` is its rows of the
        sequence (shape ``[rows, *element_shape]``; one row for a tensor
        without LoD), a read-only zero-copy view of a mapped, uncompressed
        shard, a copy of just those rows otherwise. A tensor of ``L >= 2``
        LoD levels also gives ``"name.lod1"`` ... ``"name.lod{L-1}"``: the
        sequence's inner offsets, rebased to 0 (int64; the last one indexes
        the rows of ``name``)."""
        # The per-item path: no more Python than needed (an index past the
        # end is the native IndexError).
        reader = self._reader
        if reader is None or self._pid != os.getpid():
            reader = self._native()
        i = index
        if i < 0:
            n = self._totals["sequences"]
            i += n
            if i < 0:
                raise IndexError(f"sequence {index} out of range: the dataset has {n}")
        return reader.sequence_arrays(i)  # type: ignore[no-any-return]

    def take(self, indices: Sequence[int]) -> Batch:
        """Sequences ``indices`` (dataset order numbers), in that order,
        gathered into one batch (a copy)."""
        n = len(self)
        ids = [int(i) + n if int(i) < 0 else int(i) for i in indices]
        return self._native().take(ids)

    def verify(self) -> dict[str, int]:
        """Checks every shard against the manifest and every checksum;
        ValueError names the first damaged shard. Returns
        ``{"shards", "bytes", "batches", "sequences"}``."""
        return self._native().verify()

    def __getstate__(self) -> dict[str, Any]:
        self._ranks()
        state = self.__dict__.copy()
        state["_reader"] = None
        state["_pid"] = None
        state["_states"] = {}
        state["_live"] = {}
        state["_manifest_cache"] = None
        del state["_progress_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._progress_lock = threading.RLock()

    def __repr__(self) -> str:
        return (
            f"lodt.Dataset({self.path!r}, shards={self.num_shards}, "
            f"sequences={self.num_sequences}, epoch={self._epoch})"
        )


def _checkpoint_text(state: dict[str, Any]) -> str:
    """A :meth:`Dataset.state_dict` (or a bare loader state) as the
    crate's checkpoint object, JSON text; ValueError says what is wrong."""
    if not isinstance(state, dict):
        raise TypeError(f"a dataset state is a dict, found {type(state).__name__}")
    return _lodt.checkpoint_from_json(json.dumps(state))
