"""A dataset's versions and tags (``spec/DATASET.md`` section 3.3): every
commit (a create, an append, a merge of parts) makes a new version whose
manifest stays readable; ``lodt.Dataset(path, version=N)`` or
``version="TAG"`` opens one. The work is the native module's."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from ._lodt import dataset_log, dataset_tags, tag_dataset

__all__ = ["log", "tag", "tags"]


def log(path: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The dataset's versions, oldest first: one dict per version with
    ``version``, ``time`` (UTC), ``commit_id``, ``operation`` (``"create"``,
    ``"append"``, ``"merge"``; ``"unrecorded"`` for a dataset written before
    versions, its version 0), the version's ``sequences`` and ``bytes``, and
    ``sequences_added``, ``sequences_removed``, ``bytes_added`` and
    ``bytes_removed`` since the version before."""
    return list(json.loads(dataset_log(os.fspath(path), storage_options)))


def tag(
    path: str | os.PathLike[str],
    name: str,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Names version ``version`` (default: the current one) ``name``, for
    good, and returns the tag (``name``, ``version``, ``time``). Tagging the
    version a tag already names does nothing; another version raises
    ``FileExistsError`` (a tag never moves); a version that does not exist,
    ``KeyError``; a bad name (1 to 64 ASCII letters, digits, ``.``, ``_``,
    ``-``, not all digits), ``ValueError``."""
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise TypeError(f"version is a version number (an int >= 0) or None, found {version!r}")
    return dict(json.loads(tag_dataset(os.fspath(path), name, version, storage_options)))


def tags(path: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The dataset's tags, sorted by name: ``name``, ``version``, ``time``."""
    return list(json.loads(dataset_tags(os.fspath(path), storage_options)))
