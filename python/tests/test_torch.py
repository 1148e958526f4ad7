"""PyTorch interop: jagged nested tensors sharing memory, padded tensors,
round trips, and FileDataset with a 2-worker DataLoader."""

import numpy as np
import pytest

import lodt
from conftest import torch_or_skip

torch = torch_or_skip()
import lodt.torch as lt  # noqa: E402


def test_one_level_tensor_to_jagged_shares_memory():
    x = lodt.create_lod_tensor(np.arange(12, dtype=np.float32).reshape(6, 2), [[2, 4]])
    nt = x.to_torch()
    assert nt.is_nested and nt.layout == torch.jagged
    assert nt.values().data_ptr() == np.asarray(x).ctypes.data
    assert nt.offsets().tolist() == [0, 2, 6]
    assert [u.shape[0] for u in nt.unbind()] == [2, 4]
    assert lodt.LodTensor.from_torch(nt) == x


def test_file_tensor_to_torch_stays_in_the_map(sample_file):
    f = lodt.open(sample_file)
    frames = f[0]["frames"]
    nt = frames.to_torch()
    start, length = f._map_span()
    assert start <= nt.values().data_ptr() < start + length
    assert lodt.LodTensor.from_torch(nt) == frames


def test_padded_any_levels(words):
    padded, lengths = words.to_torch(padded=True, pad_value=-1)
    assert padded.shape == (3, 3, 4, 1)
    assert [l.tolist() for l in lengths] == [[3, 1, 2], [3, 2, 4, 1, 2, 3]]
    assert padded[2, 1, :, 0].tolist() == [12, 13, 14, -1]
    back = lodt.unpad(padded.numpy(), [l.tolist() for l in lengths])
    assert back == words
    with pytest.raises(ValueError, match="padded=True"):
        words.to_torch()


def test_dense_and_dtypes():
    plain = lodt.LodTensor(np.arange(6, dtype=np.int32).reshape(3, 2))
    dense = plain.to_torch()
    assert not dense.is_nested and dense.dtype == torch.int32 and dense.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert lodt.LodTensor.from_torch(dense) == plain
    for dtype in ["int8", "uint8", "int16", "int64", "float16", "float64", "bool"]:
        t = lodt.LodTensor(np.ones(3, dtype=dtype), [[1, 2]])
        assert lodt.LodTensor.from_torch(t.to_torch()) == t
    bf = lodt.LodTensor(torch.tensor([1.5, 2.0, 3.0], dtype=torch.bfloat16).view(torch.int16).numpy(), [[1, 2]])
    # bfloat16 through torch without ml_dtypes: from_torch builds it from the bits.
    t = lodt.LodTensor.from_torch(torch.tensor([1.5, 2.0], dtype=torch.bfloat16))
    assert t.dtype == "bfloat16"
    assert torch.equal(t.to_torch(), torch.tensor([1.5, 2.0], dtype=torch.bfloat16))
    assert bf.dtype == "int16"


def test_from_torch_strided_nested_and_errors():
    with pytest.warns(UserWarning):
        nt = torch.nested.nested_tensor([torch.arange(3.0), torch.arange(2.0)], layout=torch.strided)
    t = lodt.LodTensor.from_torch(nt)
    assert t.lod() == [[0, 3, 5]] and np.asarray(t).tolist() == [0.0, 1.0, 2.0, 0.0, 1.0]
    with pytest.raises(TypeError):
        lodt.LodTensor.from_torch(np.zeros(3))


def test_batch_to_torch(words):
    b = lodt.Batch({"words": words.branch(0), "labels": lodt.LodTensor(np.arange(3))})
    out = lt.to_torch(b)
    assert out["words"].is_nested and out["labels"].tolist() == [0, 1, 2]


def test_file_dataset_and_collate(sample_file):
    f = lodt.open(sample_file)
    ds = lt.FileDataset(sample_file)
    assert len(ds) == f.num_rows == 12
    item = ds[5]
    assert item["labels"].tolist() == [11]
    assert ds.collate([ds[i] for i in (0, 5, 11)]) == f.take([0, 5, 11])
    assert lt.collate([]) == lodt.Batch()


def test_dataloader_with_two_workers(sample_file):
    from torch.utils.data import DataLoader

    f = lodt.open(sample_file)
    ds = lt.FileDataset(sample_file)
    loader = DataLoader(ds, batch_size=5, num_workers=2, collate_fn=ds.collate)
    batches = list(loader)
    assert [b.num_rows for b in batches] == [5, 5, 2]
    assert lt.collate(batches) == f.take(list(range(12)))
    words = batches[0]["words"]
    assert words.num_levels == 2 and words.to_torch(padded=True)[0].shape[0] == 5
