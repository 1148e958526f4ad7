"""Looking into a saved loader state or checkpoint without a loader."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from . import _lodt

__all__ = ["check_state", "inspect_state"]


def inspect_state(
    state: Mapping[str, Any],
    dataset: str | os.PathLike[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The facts of ``state`` (a :meth:`lodt.Dataset.state_dict`, a merged
    one, or a bare loader state; ``spec/DATASET.md`` 7.2, 7.5): its
    ``state_version``, ``partition``, ``epoch``, ``sequences``,
    ``consumers``, whether it is ``complete`` (every consumer's count: it
    resumes on any world size), the ``delivered`` and ``remaining``
    sequences of the epoch in total and ``per_consumer`` (``consumer``,
    ``share``, ``delivered``, ``remaining``), ``shuffle``, ``remainder``,
    ``fingerprint``, ``packing_windows``, ``mixture`` (seed, weights, stop,
    sources) and ``next_worker`` (a checkpoint's). With ``dataset``, also
    ``dataset_mismatch``: why that dataset is not the one the state was
    saved on, or ``None``. A malformed state raises ValueError."""
    if not isinstance(state, Mapping):
        raise TypeError(f"a dataset state is a dict, found {type(state).__name__}")
    text = json.dumps(dict(state))
    path = None if dataset is None else os.fspath(dataset)
    options = dict(storage_options) if storage_options else None
    return dict(json.loads(_lodt.inspect_state(text, path, options)))


def check_state(
    state: Mapping[str, Any],
    dataset: str | os.PathLike[str],
    world_size: int | None = None,
    workers: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A dry run of the rest of ``state``'s epoch on ``dataset`` (ids only, no
    tensor bytes read; the GIL is released): it proves every remaining
    sequence is delivered exactly once and none delivered before the state is
    delivered again, resumed on ``world_size`` ranks of ``workers`` workers
    each (both ``None``: the world the state was saved at; only ``workers``:
    the state's consumers in ranks of that many; only ``world_size``: one
    worker each). ``state`` is a merged :meth:`lodt.Dataset.state_dict` (or
    a complete loader state: every consumer's count).

    Returns ``holds`` and the counts: ``sequences`` of the epoch,
    ``delivered_before``, ``remaining``, ``per_consumer`` (what each
    consumer of the resumed run delivers), ``delivered``, ``repeated`` and
    ``skipped`` (failures), ``dropped`` (by ``remainder="drop"``) and
    ``repeats`` (by ``"repeat"``), ``first_offence`` (``None``, or the
    first sequence wrong: ``id``, ``fault`` ``"again"``, ``"twice"`` or
    ``"skipped"``, and the ``consumer`` that delivered it again), with
    ``epoch``, ``partition``, ``state_consumers``, ``world_size``,
    ``workers`` and the ``seconds`` it took. A malformed or incomplete state,
    another dataset's, a packing loader's or a mixture's raises ValueError."""
    if not isinstance(state, Mapping):
        raise TypeError(f"a dataset state is a dict, found {type(state).__name__}")
    text = json.dumps(dict(state))
    options = dict(storage_options) if storage_options else None
    return dict(json.loads(_lodt.check_state(text, os.fspath(dataset), world_size, workers, options)))
