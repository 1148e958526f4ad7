"""Looking into a saved loader state or checkpoint without a loader."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from . import _lodt

__all__ = ["inspect_state"]


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
