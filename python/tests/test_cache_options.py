"""The disk-cache options of ``lodt.Dataset``: checked, and harmless on a
local dataset (the object-store tests use them for real)."""

import numpy as np
import pytest

import lodt


def test_cache_dir_is_checked(tmp_path):
    with lodt.DatasetWriter(tmp_path / "d") as w:
        w.write({"x": lodt.create_lod_tensor(np.arange(3, dtype=np.int32), [[3]])})
    with pytest.raises(ValueError, match="cache_dir"):
        lodt.Dataset(tmp_path / "d", cache_dir=True)
    with pytest.raises(ValueError, match="disk_cache_bytes"):
        lodt.Dataset(tmp_path / "d", disk_cache_bytes=-1)
    # A local dataset has no use for a disk cache: accepted, unused.
    assert len(lodt.Dataset(tmp_path / "d", cache_dir=False)) == 1
    assert len(lodt.Dataset(tmp_path / "d", cache_dir=tmp_path / "c", disk_cache_bytes=1 << 20)) == 1
