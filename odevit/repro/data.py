"""Datasets by name, with no silent substitution of one for another.

    fashion_mnist  Debian's dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist), else torchvision download
    cifar10/100    torchvision (download into root)
    imagenet100    an ImageFolder root with train/ and val/ (the 100-class subset must be supplied)
    synthetic      class templates + noise, generated from the seed (tests)

Small datasets are held in memory as uint8 tensors and batched by indexing (fast on a 2-core CPU); ImageFolder data
goes through a torch DataLoader. Either way a batch comes out as float (B, C, H, W), resized and normalised.
"""
from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

import torch
from torchvision.transforms import v2

DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

# name -> (channels, native size, classes, mean, std)
INFO = {
    "fashion_mnist": (1, 28, 10, (0.2860,), (0.3530,)),
    "cifar10": (3, 32, 10, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": (3, 32, 100, (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "imagenet100": (3, 224, 100, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "synthetic": (1, 28, 10, (0.5,), (0.25,))}
NORMALIZE = {"imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)), "half": ((0.5,) * 3, (0.5,) * 3)}


class DatasetError(RuntimeError):
    """A dataset is missing or unreadable; the message says how to provide it."""


@dataclass
class Split:
    """One split: uint8 images (N, C, H, W) and labels (N,) in memory, or an ImageFolder-style dataset."""

    images: Optional[torch.Tensor]
    labels: torch.Tensor
    folder: Optional[torch.utils.data.Dataset] = None

    def __len__(self) -> int:
        return len(self.labels)


def prepare_fashion_mnist(root: str, download: bool = True) -> str:
    """Make ROOT/FashionMNIST/raw hold the four unzipped IDX files torchvision reads; return ROOT."""
    raw = os.path.join(root, "FashionMNIST", "raw")
    if all(os.path.isfile(os.path.join(raw, f)) for f in FASHION_FILES):
        return root
    os.makedirs(raw, exist_ok=True)
    if all(os.path.isfile(os.path.join(DEBIAN_FASHION_MNIST, f + ".gz")) for f in FASHION_FILES):
        for f in FASHION_FILES:
            # a temporary file of this process's own (several processes may extract onto one fresh root at once:
            # `dvc repro -j 2`, parallel study cells), then an atomic rename: never a half-written IDX file, and
            # the last of identical copies wins
            fd, tmp = tempfile.mkstemp(prefix=f".{f}.", suffix=".tmp", dir=raw)
            try:
                with gzip.open(os.path.join(DEBIAN_FASHION_MNIST, f + ".gz"), "rb") as src, os.fdopen(fd, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                os.replace(tmp, os.path.join(raw, f))
            except BaseException:
                if os.path.exists(tmp):
                    os.remove(tmp)
                raise
        return root
    if download:
        from torchvision.datasets import FashionMNIST

        import socket

        old_timeout = socket.getdefaulttimeout()
        socket.setdefaulttimeout(20)  # offline behind a silent firewall: fail, don't hang
        try:
            FashionMNIST(root, train=True, download=True)
            FashionMNIST(root, train=False, download=True)
            return root
        except Exception as e:  # offline, blocked, ...
            reason = f"{type(e).__name__}: {e}"
        finally:
            socket.setdefaulttimeout(old_timeout)
    else:
        reason = "download disabled"
    raise DatasetError(
        f"fashion_mnist: not found in {raw} nor {DEBIAN_FASHION_MNIST}, and the torchvision download failed ({reason}). "
        "Install it with `apt-get install dataset-fashion-mnist`, or put the four *-ubyte files in " + raw
    )


def check_idx(path: str) -> None:
    """An IDX file's header must describe exactly its size (catches truncated or corrupt dataset files)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(4)
        ok = len(head) == 4 and head[:2] == b"\x00\x00" and head[2] == 0x08 and 1 <= head[3] <= 4
        dims = [int.from_bytes(f.read(4), "big") for _ in range(head[3])] if ok else []
    if not ok or size != 4 + 4 * len(dims) + int(torch.tensor(dims).prod()):
        raise DatasetError(f"{path}: corrupt or truncated IDX file ({size} bytes); delete it to re-extract it")


def _synthetic(n: int, size: int, channels: int, classes: int, seed: int, split: str) -> Split:
    g = torch.Generator().manual_seed(seed)
    templates = torch.rand(classes, channels, size, size, generator=g)  # shared by both splits
    g.manual_seed(seed + (1 if split == "train" else 2))
    labels = torch.randint(0, classes, (n,), generator=g)
    x = 0.6 * templates[labels] + 0.4 * torch.rand(n, channels, size, size, generator=g)
    return Split((x * 255).to(torch.uint8), labels)


def load_split(
    name: str, split: str, root: str = "data", download: bool = True, synthetic_size: int = 512, seed: int = 0
) -> Split:
    """Load a split ('train' or 'test') of a named dataset."""
    if name not in INFO:
        raise ValueError(f"dataset: '{name}' is not one of {sorted(INFO)}")
    if split not in ("train", "test"):
        raise ValueError(f"split: '{split}' is not one of ['train', 'test']")
    train = split == "train"
    if name == "synthetic":
        c, s, k = INFO[name][:3]
        return _synthetic(synthetic_size if train else max(synthetic_size // 4, 16), s, c, k, seed, split)
    if name == "fashion_mnist":
        from torchvision.datasets import FashionMNIST

        root = prepare_fashion_mnist(root, download)
        for f in FASHION_FILES[:2] if train else FASHION_FILES[2:]:
            check_idx(os.path.join(root, "FashionMNIST", "raw", f))
        ds = FashionMNIST(root, train=train, download=False)
        return Split(ds.data[:, None].contiguous(), ds.targets.long())
    if name in ("cifar10", "cifar100"):
        from torchvision import datasets

        cls = datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100
        try:
            ds = cls(root, train=train, download=download)
        except Exception as e:
            raise DatasetError(
                f"{name}: not found in {root} and the torchvision download failed ({type(e).__name__}: {e}). "
                f"Put the extracted cifar-*-python folder in {root}."
            ) from e
        return Split(torch.as_tensor(ds.data).permute(0, 3, 1, 2).contiguous(), torch.as_tensor(ds.targets).long())
    # imagenet100
    from torchvision.datasets import ImageFolder

    path = os.path.join(root, "train" if train else "val")
    if not os.path.isdir(path):
        raise DatasetError(f"imagenet100: no folder {path}; give data.root an ImageFolder root with train/ and val/")
    folder = ImageFolder(path, transform=v2.Compose([v2.PILToTensor(), v2.Resize(256), v2.CenterCrop(224)]))
    return Split(None, torch.as_tensor(folder.targets).long(), folder)


def holdout(split: Split, n: int) -> Tuple[Split, Optional[Split]]:
    """(training part, validation part) of a training split: validation = its LAST n images (None when n is 0),
    training = the images before them, so a train limit counts from the start of the rest and never reaches them."""
    if not 0 <= n < len(split):
        raise ValueError(f"base.val_size = {n}: must be in [0, {len(split)}) for a training split of {len(split)} "
                         "images (0 = no validation split)")
    if n == 0:
        return split, None
    k = len(split) - n
    if split.folder is not None:
        sub = torch.utils.data.Subset
        return (Split(None, split.labels[:k], sub(split.folder, range(k))),
                Split(None, split.labels[k:], sub(split.folder, range(k, len(split)))))
    return Split(split.images[:k], split.labels[:k]), Split(split.images[k:], split.labels[k:])


def batch_transform(
    name: str, image_size: Optional[int] = None, channels: Optional[int] = None, normalize: str = "dataset"
) -> v2.Transform:
    """uint8 batch (B, C, H, W) -> float, resized to image_size, grey repeated to `channels`, normalised."""
    c, native, _, mean, std = INFO[name]
    steps: list = [v2.ToDtype(torch.float32, scale=True)]
    if image_size and image_size != native:
        steps.append(v2.Resize((image_size, image_size), antialias=True))
    if channels and channels != c:
        if not (c == 1 and channels == 3):
            raise ValueError(f"channels: cannot turn {c}-channel {name} into {channels} channels")
        steps.append(v2.Lambda(lambda x: x.expand(-1, 3, -1, -1) if x.ndim == 4 else x.expand(3, -1, -1)))
        mean, std = mean * 3, std * 3
    if normalize in NORMALIZE:
        mean, std = NORMALIZE[normalize]
    elif normalize != "dataset":
        raise ValueError(f"normalize: '{normalize}' is not one of ['dataset', 'imagenet', 'half']")
    steps.append(v2.Normalize(mean[: channels or c], std[: channels or c]))
    return v2.Compose(steps)


def augment(x: torch.Tensor, generator: torch.Generator, pad: int = 2, flip: bool = True,
            rows_of: Optional[Tuple[int, int]] = None) -> torch.Tensor:
    """Per-sample random crop (zero padding `pad`) and horizontal flip of a uint8 batch (B, C, H, W).

    `rows_of=(offset, total)`: x is rows offset..offset+B of a batch of `total`; the draws are those of the whole
    batch (a torchrun process augments its slice exactly as one process would)."""
    B, _, H, W = x.shape
    off, total = rows_of or (0, B)
    draw = lambda f, *a: f(*a, (total,), generator=generator)[off : off + B]  # noqa: E731
    if pad:
        xp = torch.nn.functional.pad(x, (pad, pad, pad, pad))
        dy = draw(torch.randint, 0, 2 * pad + 1)
        dx = draw(torch.randint, 0, 2 * pad + 1)
        rows = (dy[:, None] + torch.arange(H))[:, None, :, None]  # (B, 1, H, 1)
        cols = (dx[:, None] + torch.arange(W))[:, None, None, :]  # (B, 1, 1, W)
        x = xp[torch.arange(B)[:, None, None, None], torch.arange(x.shape[1])[None, :, None, None], rows, cols]
    if flip:
        m = draw(torch.rand) < 0.5
        x = torch.where(m[:, None, None, None], x.flip(-1), x)
    return x


class Loader:
    """Batches of (float images, labels) from a Split; reshuffled every epoch from `seed + epoch`.

    Under torchrun (`rank`, `world` from `runtime.rank_world()` unless given) every process walks the same
    global batches and keeps its 1/world slice of each: `batch_size` is the global batch."""

    def __init__(
        self, split: Split, batch_size: int, transform: v2.Transform, shuffle: bool = False, drop_last: bool = False,
        seed: int = 0, augment: bool = False, num_workers: int = 0, limit: Optional[int] = None,
        rank: Optional[int] = None, world: Optional[int] = None,
    ):
        from .runtime import rank_world

        self.split, self.batch_size, self.transform = split, batch_size, transform
        self.shuffle, self.drop_last, self.seed, self.aug = shuffle, drop_last, seed, augment
        self.num_workers = num_workers
        self.n = min(len(split), limit) if limit else len(split)
        self.epoch = 0
        self.rank, self.world = rank_world() if world is None else (rank or 0, world)
        if drop_last and batch_size % self.world:
            raise ValueError(f"batch_size {batch_size} is the global batch: it must be a multiple of the "
                             f"{self.world} processes")

    def __len__(self) -> int:
        """Global batches (optimiser steps) per epoch: the same on every process."""
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def indices(self, epoch: int, ordered: bool = False, local: bool = True,
                generator: Optional[torch.Generator] = None) -> List[Tuple[torch.Tensor, int, int]]:
        """(sample indices, offset, global size) of each batch of one epoch: this process's slice of the global
        batch (`local`, under torchrun) or the whole of it."""
        g = generator or torch.Generator().manual_seed(self.seed * 100003 + epoch)
        idx = torch.randperm(self.n, generator=g) if self.shuffle and not ordered else torch.arange(self.n)
        n_batches = -(-self.n // self.batch_size) if ordered else len(self)
        out = []
        for i in range(n_batches):
            b = idx[i * self.batch_size : (i + 1) * self.batch_size]
            if local and self.world > 1:
                parts = b.tensor_split(self.world)
                off = sum(len(p) for p in parts[: self.rank])
                out.append((parts[self.rank], off, len(b)))
            else:
                out.append((b, 0, len(b)))
        return [o for o in out if len(o[0])]

    def batches(self, epoch: int, with_index: bool = False, ordered: bool = False,
                local: bool = True) -> Iterator[Tuple[torch.Tensor, ...]]:
        """(x, y) batches of one epoch, or (x, y, sample indices) with `with_index`; `ordered` = no shuffle/drop;
        `local=False` = the global batches even under torchrun."""
        g = torch.Generator().manual_seed(self.seed * 100003 + epoch)  # the order, then the augmentation draws
        idx = self.indices(epoch, ordered, local, generator=g)
        if self.split.folder is not None:
            dl = torch.utils.data.DataLoader(self.split.folder, batch_sampler=[b.tolist() for b, _, _ in idx],
                                             num_workers=self.num_workers)
            pairs = zip(idx, dl)
        else:
            pairs = ((i, (self.split.images[i[0]], self.split.labels[i[0]])) for i in idx)
        for (b, off, total), (x, y) in pairs:
            x = self.transform(augment(x, g, rows_of=(off, total)) if self.aug and not ordered else x)
            yield (x, y, b) if with_index else (x, y)

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        return self.batches(self.epoch)


def num_classes(name: str) -> int:
    return INFO[name][2]


def class_counts(split: Split, classes: int) -> Sequence[int]:
    return torch.bincount(split.labels, minlength=classes).tolist()
