"""Data parallel: Loader slices, and `torchrun --nproc_per_node=2` (gloo, 2 CPU processes) training a teacher and a
distilled student for real on tiny data, ending where one process ends."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from odevit.repro import data
from tiny_pipeline import tiny_params

ROOT = Path(__file__).resolve().parents[1]


def test_loader_slices_partition_the_global_batches():
    split = data.load_split("synthetic", "train", synthetic_size=100, seed=0)
    tf = data.batch_transform("synthetic", 28, 1, "dataset")
    full = data.Loader(split, 20, tf, shuffle=True, drop_last=True, seed=3, augment=True)
    parts = [data.Loader(split, 20, tf, shuffle=True, drop_last=True, seed=3, augment=True, rank=r, world=2)
             for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == len(full) == 5  # the same number of optimiser steps everywhere
    for (x, y, i), (x0, y0, i0), (x1, y1, i1) in zip(full.batches(1, with_index=True),
                                                    *(p.batches(1, with_index=True) for p in parts)):
        assert torch.equal(i, torch.cat([i0, i1])) and torch.equal(y, torch.cat([y0, y1]))
        assert torch.equal(x, torch.cat([x0, x1]))  # augmentation draws are the global batch's
    # ordered (evaluation, cache): slices cover every sample once, uneven last batch included
    ev = [data.Loader(split, 32, tf, rank=r, world=2) for r in range(2)]
    seen = torch.cat([i for p in ev for _, _, i in p.batches(0, with_index=True, ordered=True)])
    assert sorted(seen.tolist()) == list(range(100))
    # local=False: the global batches (teacher distances are measured on these)
    assert [len(b) for b, _, _ in parts[1].indices(0, local=False)] == [20] * 5
    with pytest.raises(ValueError, match="multiple of the 3 processes"):
        data.Loader(split, 20, tf, shuffle=True, drop_last=True, rank=0, world=3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(work: Path, nproc: int) -> None:
    p = tiny_params()
    p["teacher"].update(epochs=1)
    p["distill"].update(epochs=2, unfreeze_head_at=1, ce_weight=1.0)  # DDP is rebuilt when the head joins the trainable
    # set; CE gives the head a gradient (the label-free default would leave it as the teacher's)
    work.mkdir()
    (work / "params.yaml").write_text(yaml.safe_dump(p))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    launch = ([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               f"--master_port={_free_port()}", "-m", "odevit.repro.pipeline"] if nproc > 1 else [sys.executable, "-m", "odevit.repro.pipeline"])
    for stage in ("02_teacher", "04_distill"):
        r = subprocess.run(launch + [stage], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert r.stdout.count("epoch 1/") == 1  # rank 0 alone reports


def test_torchrun_two_processes_match_one(tmp_path):
    _train(tmp_path / "ddp", 2)
    _train(tmp_path / "one", 1)
    for stage, epochs in (("02_teacher", 1), ("04_distill", 2)):
        a = torch.load(tmp_path / "ddp" / "checkpoints" / stage / "last.pt", weights_only=True)
        b = torch.load(tmp_path / "one" / "checkpoints" / stage / "last.pt", weights_only=True)
        assert a["epoch"] == b["epoch"] == epochs and a["run_id"] == b["run_id"]  # the notebook resumes either
        for k in b["model"]:
            torch.testing.assert_close(a["model"][k], b["model"][k], rtol=1e-4, atol=1e-5, msg=f"{stage} {k}")
        for ra, rb in zip(a["history"], b["history"]):
            assert ra["val_acc1"] == rb["val_acc1"]  # validation split over 2 processes, hits summed
            assert ra["train_loss"] == pytest.approx(rb["train_loss"], rel=1e-5)
    head0 = torch.load(tmp_path / "ddp" / "checkpoints" / "02_teacher" / "best.pt", weights_only=True)["model"]
    head1 = torch.load(tmp_path / "ddp" / "checkpoints" / "04_distill" / "last.pt", weights_only=True)["model"]
    assert not torch.equal(head0["head.weight"], head1["head.weight"])  # unfrozen at epoch 1 and trained under DDP
