"""Weighted mixtures of datasets (``spec/DATASET.md`` section 10):
:class:`Mixture`, several :class:`lodt.Dataset` read as one stream, each
sequence drawn from a source in given proportions.

A :class:`Mixture` is iterated, partitioned between ranks and workers,
checkpointed (:meth:`~lodt.Dataset.state_dict`) and resumed exactly like a
:class:`lodt.Dataset` (it is one: a subclass), with the same batch options;
the mixing itself is the Rust crate's ``lodt::dataset::Mixture``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from ._lodt import Batch, MixtureReader
from .dataset import Dataset, _checkpoint_text

__all__ = ["Mixture"]


class Mixture(Dataset):
    """Several datasets with one schema as one stream of LoD mini-batches:
    each position of an epoch is drawn from source ``k`` with probability
    ``weights[k] / sum(weights)`` and holds that source's next sequence
    (each source in its own order, shuffled per epoch when ``shuffle``).

    ``Mixture([ds_a, ds_b], weights=[0.7, 0.3], seed=0, stop="first_exhausted")``:

    * ``sources``: :class:`lodt.Dataset` objects (local or on an object
      store; their own batch options are not used).
    * ``weights``: one per source, finite, ``>= 0``, not all 0.
    * ``seed``: the draws (and, with ``shuffle``, each source's order) are
      a deterministic function of the seed and the epoch.
    * ``stop``: ``"first_exhausted"`` (the epoch ends at the first draw of
      a source that has delivered all its sequences: nothing twice),
      ``"all_exhausted"`` (it ends once every source of positive weight was
      delivered whole; sources that run out first start over, in a new
      order), or an int: that many sequences per epoch (sources repeat).
    * every other option is :class:`lodt.Dataset`'s: ``batch_size`` or
      ``max_rows``/``rows_of``, ``drop_last``, ``shuffle``,
      ``shuffle_buffer``, ``rank``/``world_size``, ``remainder``,
      ``prefetch``, ``return_ids``, and ``packing`` (a :class:`lodt.Packing`:
      the mixed stream packed, ``spec/DATASET.md`` 10.5).

    Ranks and ``DataLoader`` workers split the mixed stream as they split a
    dataset: round robin, disjoint, together the whole stream.
    :meth:`state_dict` / :meth:`load_state_dict` / :meth:`merge_states`
    resume exactly, also on another world size; a state of another mixture
    (sources, weights, seed, stop) or of a single dataset is a ValueError,
    unless ``load_state_dict(state, allow_changes=True)`` is asked to
    continue the epoch under this mixture's parameters.
    With ``return_ids``, ids number the sources one after the other
    (:meth:`source_of` splits one).
    """

    def __init__(
        self,
        sources: Sequence[Dataset],
        weights: Sequence[float],
        *,
        seed: int = 0,
        stop: str | int = "first_exhausted",
        **options: Any,
    ) -> None:
        for name in ("mmap", "storage_options", "check_bodies"):
            if name in options:
                raise TypeError(f"Mixture: {name} is an option of each source (lodt.Dataset), not of the mixture")
        self.sources = list(sources)
        for i, s in enumerate(self.sources):
            if not isinstance(s, Dataset) or isinstance(s, Mixture):
                raise TypeError(f"source {i} must be a lodt.Dataset, found {type(s).__name__}")
        self.weights = [float(w) for w in weights]
        self.stop = stop
        # lodt.Dataset's options and checks; its native reader is this
        # mixture's (_native below).
        super().__init__(f"<mixture of {len(self.sources)}>", seed=seed, **options)

    def _native(self) -> Any:
        pid = os.getpid()
        if self._reader is None or self._pid != pid:
            # A MixtureReader in place of lodt.Dataset's DatasetReader: the
            # same _lodt.loader() reads it, and the same manifest_json().
            self._reader = MixtureReader(  # type: ignore[assignment]
                [s._native() for s in self.sources], self.weights, seed=self.seed, stop=self.stop
            )
            self._pid = pid
        return self._reader

    def _native_totals(self, native: Any) -> dict[str, int]:
        """The sources' shards, batches, bytes and sequences, summed by the
        crate (``sequences`` is the id space; :func:`len` is the epoch's
        stream)."""
        return dict(native.totals())

    def __len__(self) -> int:
        """The number of sequences of the current epoch's stream (all ranks
        together; under ``"first_exhausted"``/``"all_exhausted"`` it
        depends on the epoch's draws; in an epoch continued under changed
        parameters, that stream's)."""
        resume = self._resume
        state = None if resume is None else json.dumps(resume["loader"])
        return int(self._native().num_sequences(self._epoch, state))

    def load_state_dict(
        self, state: dict[str, Any], *, appended: str = "next_epoch", allow_changes: bool = False
    ) -> None:
        """Makes the next pass continue from ``state``, as
        :meth:`lodt.Dataset.load_state_dict`. A state saved on another
        mixture (other weights, sources added or removed, another ``stop``
        or ``seed``) is a ValueError, unless ``allow_changes``: then the
        rest of its epoch is drawn under this mixture's parameters, each
        source continuing its own draws where they were (nothing of a
        source's epoch twice, nothing skipped), a removed source drawing
        nothing (its progress kept in the state, so adding it back
        continues it) and a new one starting at its first sequence
        (``spec/DATASET.md`` 10.6). Sources are matched by their
        sequences and fingerprint. The state must be complete: one rank's
        own with one rank, else :meth:`merge_states` of every rank's.
        ``appended`` is :class:`lodt.Dataset`'s: a mixture's state resumes
        only on the sources it was saved on, so only ``"next_epoch"``."""
        if appended != "next_epoch":
            raise ValueError('a mixture\'s state resumes on the sources it was saved on: appended="now" reads one dataset')
        if allow_changes:
            evolved = self._native().evolve_checkpoint(
                _checkpoint_text(state),
                seed=self.seed if self.shuffle else None,
                shuffle_buffer=self.shuffle_buffer,
                remainder=self.remainder,
                packing=self.packing,
                rows_of=self.rows_of,
            )
            state = json.loads(evolved)
        super().load_state_dict(state)

    @property
    def num_sequences(self) -> int:
        """:func:`len`: the positions of the current epoch's stream."""
        return len(self)

    def source_of(self, id: int) -> tuple[int, int]:
        """The source of mixture id ``id`` (of ``return_ids``) and the
        sequence's id in that source."""
        found = self._native().source_of(int(id))
        if found is None:
            raise IndexError(f"id {id} is past the sources' {self._totals['sequences']} sequences")
        return found

    def sequence(self, index: int) -> Batch:
        """The sequence of mixture id ``index`` (see :meth:`source_of`)."""
        k, local = self.source_of(index)
        return self.sources[k].sequence(local)

    def take(self, indices: Sequence[int]) -> Batch:
        """The sequences of mixture ids ``indices`` (of ``return_ids``, see
        :meth:`source_of`; negative from the end of the sources' ids), in
        that order, gathered into one batch (a copy; each source's batches
        read once). IndexError for an id past the sources' sequences."""
        n = self._totals["sequences"]
        return self._native().take([int(i) + n if int(i) < 0 else int(i) for i in indices])

    def verify(self) -> dict[str, int]:
        """Verifies every source completely; ValueError names the first
        damaged shard. Returns ``{"shards", "bytes", "batches",
        "sequences"}`` summed over the sources."""
        return dict(self._native().verify())

    def __repr__(self) -> str:
        return (
            f"lodt.Mixture(sources={len(self.sources)}, weights={self.weights}, "
            f"stop={self.stop!r}, epoch={self._epoch})"
        )
