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
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence, Tuple

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
    "synthetic": (1, 28, 10, (0.5,), (0.25,)),
}
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
            tmp = os.path.join(raw, f + ".tmp")
            with gzip.open(os.path.join(DEBIAN_FASHION_MNIST, f + ".gz"), "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(tmp, os.path.join(raw, f))  # atomic: never a half-written IDX file
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


def augment(x: torch.Tensor, generator: torch.Generator, pad: int = 2, flip: bool = True) -> torch.Tensor:
    """Per-sample random crop (zero padding `pad`) and horizontal flip of a uint8 batch (B, C, H, W)."""
    B, _, H, W = x.shape
    if pad:
        xp = torch.nn.functional.pad(x, (pad, pad, pad, pad))
        dy = torch.randint(0, 2 * pad + 1, (B,), generator=generator)
        dx = torch.randint(0, 2 * pad + 1, (B,), generator=generator)
        rows = (dy[:, None] + torch.arange(H))[:, None, :, None]  # (B, 1, H, 1)
        cols = (dx[:, None] + torch.arange(W))[:, None, None, :]  # (B, 1, 1, W)
        x = xp[torch.arange(B)[:, None, None, None], torch.arange(x.shape[1])[None, :, None, None], rows, cols]
    if flip:
        m = torch.rand(B, generator=generator) < 0.5
        x = torch.where(m[:, None, None, None], x.flip(-1), x)
    return x


class Loader:
    """Batches of (float images, labels) from a Split; reshuffled every epoch from `seed + epoch`."""

    def __init__(
        self, split: Split, batch_size: int, transform: v2.Transform, shuffle: bool = False, drop_last: bool = False,
        seed: int = 0, augment: bool = False, num_workers: int = 0, limit: Optional[int] = None,
    ):
        self.split, self.batch_size, self.transform = split, batch_size, transform
        self.shuffle, self.drop_last, self.seed, self.aug = shuffle, drop_last, seed, augment
        self.num_workers = num_workers
        self.n = min(len(split), limit) if limit else len(split)
        self.epoch = 0

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def batches(self, epoch: int, with_index: bool = False, ordered: bool = False) -> Iterator[Tuple[torch.Tensor, ...]]:
        """(x, y) batches of one epoch, or (x, y, sample indices) with `with_index`; `ordered` = no shuffle/drop."""
        g = torch.Generator().manual_seed(self.seed * 100003 + epoch)
        idx = torch.randperm(self.n, generator=g) if self.shuffle and not ordered else torch.arange(self.n)
        n_batches = -(-self.n // self.batch_size) if ordered else len(self)
        if self.split.folder is not None:
            sub = torch.utils.data.Subset(self.split.folder, idx.tolist())
            dl = torch.utils.data.DataLoader(sub, self.batch_size, drop_last=self.drop_last and not ordered,
                                             num_workers=self.num_workers)
            for i, (x, y) in enumerate(dl):
                x = self.transform(augment(x, g) if self.aug and not ordered else x)
                yield (x, y, idx[i * self.batch_size : i * self.batch_size + len(y)]) if with_index else (x, y)
            return
        for i in range(n_batches):
            b = idx[i * self.batch_size : (i + 1) * self.batch_size]
            x = self.split.images[b]
            x = self.transform(augment(x, g) if self.aug and not ordered else x)
            yield (x, self.split.labels[b], b) if with_index else (x, self.split.labels[b])

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        return self.batches(self.epoch)


def num_classes(name: str) -> int:
    return INFO[name][2]


def class_counts(split: Split, classes: int) -> Sequence[int]:
    return torch.bincount(split.labels, minlength=classes).tolist()
