"""Datasets by name: Fashion-MNIST from the Debian package layout, synthetic data, transforms, clear errors."""
import gzip
import os

import numpy as np
import pytest
import torch

from odevit.repro import data


def _write_idx(path, arr):
    """IDX file as in Fashion-MNIST: magic (dtype ubyte 0x08, ndim), big-endian dims, raw bytes; gzipped."""
    header = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_fashion_mnist_from_debian_layout(tmp_path, monkeypatch):
    deb = tmp_path / "debian"
    deb.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 6), ("t10k", 4)):
        _write_idx(deb / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)))
        _write_idx(deb / f"{split}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", str(deb))
    tr = data.load_split("fashion_mnist", "train", root=str(tmp_path / "root"), download=False)
    te = data.load_split("fashion_mnist", "test", root=str(tmp_path / "root"), download=False)
    assert tr.images.shape == (6, 1, 28, 28) and tr.images.dtype == torch.uint8
    assert te.labels.tolist() == [0, 1, 2, 3]
    assert os.path.isfile(tmp_path / "root" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte")


def test_missing_fashion_mnist_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", str(tmp_path / "nowhere"))
    with pytest.raises(data.DatasetError, match="apt-get install dataset-fashion-mnist"):
        data.load_split("fashion_mnist", "train", root=str(tmp_path), download=False)


def test_missing_imagenet100_and_unknown_names(tmp_path):
    with pytest.raises(data.DatasetError, match="imagenet100: no folder"):
        data.load_split("imagenet100", "train", root=str(tmp_path))
    with pytest.raises(ValueError, match="dataset: 'mnist' is not one of"):
        data.load_split("mnist", "train")


def test_synthetic_is_deterministic_and_batches_are_normalised():
    a = data.load_split("synthetic", "train", synthetic_size=64, seed=3)
    b = data.load_split("synthetic", "train", synthetic_size=64, seed=3)
    assert torch.equal(a.images, b.images) and len(a) == 64
    tf = data.batch_transform("synthetic", image_size=32, channels=3, normalize="imagenet")
    loader = data.Loader(a, batch_size=10, transform=tf, shuffle=True, seed=0, augment=True)
    xs = list(loader)
    assert len(xs) == 7 and xs[0][0].shape == (10, 3, 32, 32) and xs[0][0].dtype == torch.float32
    assert torch.equal(list(loader.batches(0))[0][1], xs[0][1])  # same epoch -> same order
    assert not torch.equal(list(loader.batches(1))[0][1], xs[0][1])


def test_augment_shapes_and_flip():
    x = torch.arange(2 * 1 * 3 * 3, dtype=torch.uint8).reshape(2, 1, 3, 3)
    g = torch.Generator().manual_seed(0)
    y = data.augment(x, g, pad=0, flip=True)
    for i in range(2):
        assert torch.equal(y[i], x[i]) or torch.equal(y[i], x[i].flip(-1))
    assert data.augment(x, g, pad=1).shape == x.shape


def _indexed_split(n):
    """A split whose label is the image's index (and whose pixels hold it too): where every image went is readable."""
    idx = torch.arange(n)
    return data.Split((idx % 256).to(torch.uint8).view(n, 1, 1, 1).expand(n, 1, 4, 4).contiguous(), idx)


def test_validation_is_the_last_images_and_never_trained_on():
    train_part, val = data.holdout(_indexed_split(100), 30)
    assert val.labels.tolist() == list(range(70, 100))  # the LAST 30 of the training split
    loader = data.Loader(train_part, 8, lambda x: x.float(), shuffle=True, drop_last=True, seed=3, limit=50)
    seen = {int(i) for e in range(3) for _, y in loader.batches(e) for i in y}
    assert seen <= set(range(50))  # a train limit counts from the start of the rest
    assert seen.isdisjoint(val.labels.tolist())
    unlimited = data.Loader(train_part, 10, lambda x: x.float(), shuffle=True)
    assert sorted(int(i) for _, y in unlimited.batches(0) for i in y) == list(range(70))
    whole, none = data.holdout(_indexed_split(10), 0)
    assert none is None and len(whole) == 10
    with pytest.raises(ValueError, match=r"base.val_size = 10: must be in \[0, 10\)"):
        data.holdout(_indexed_split(10), 10)


def _prepare_in_process(args):
    deb, root, barrier = args
    data.DEBIAN_FASHION_MNIST = deb  # this process's module (spawned: the monkeypatch does not reach it)
    barrier.wait()  # all start extracting at once onto the same fresh root
    data.prepare_fashion_mnist(root, download=False)
    raw = os.path.join(root, "FashionMNIST", "raw")
    for f in data.FASHION_FILES:  # complete when this process returns (others may still be writing their copies)
        data.check_idx(os.path.join(raw, f))
    return True


def test_processes_preparing_one_fresh_root_at_once_all_succeed(tmp_path):
    """The race of a fresh clone under `dvc repro -j 2` / parallel study cells: several processes extract the
    Debian files into one new root at once. Each must succeed and leave the four complete files and no temporary."""
    import multiprocessing as mp

    deb = tmp_path / "debian"
    deb.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 3000), ("t10k", 500)):  # ~2.4 MB of images: extraction takes long enough to overlap
        _write_idx(deb / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)))
        _write_idx(deb / f"{split}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    root = str(tmp_path / "root")
    k = 4
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(k)
        with ctx.Pool(k) as pool:
            assert pool.map(_prepare_in_process, [(str(deb), root, barrier)] * k) == [True] * k
    assert sorted(os.listdir(os.path.join(root, "FashionMNIST", "raw"))) == sorted(data.FASHION_FILES)  # no *.tmp
    tr = data.load_split("fashion_mnist", "train", root=root, download=False)
    assert tr.images.shape == (3000, 1, 28, 28)
