"""Train the same quick cells with two source trees (before / after a refactor) and compare what they write.

    python check.py run TREE OUT          # train with the odevit of TREE (a `git archive` of one commit); OUT: results
    python check.py compare OLD_OUT NEW_OUT   # one line per file: its digest before and after, and whether equal

`run` trains on the CPU, one thread (the same arithmetic in both runs):
  * study cells (`study.run` / `study.run_many`, the plain path) of a tiny synthetic study in OUT/study: `ce`
    (distilled, MSE + JaSMin + CE, the teacher's cached states), `drawn` (+ N drawn per batch from train_steps [4, 8]),
    `all_l1` (mse_tokens 'all' + attention-map L1: no cache, the teacher per batch), `free` seed 0 alone and seeds 1
    and 2 trained together (`train.fit_many`, batched); 256 training images, 2 epochs; and, since the record of the
    loss-term registry (2026-11-29), `curriculum` (CE from epoch 1 at weight 0.5, the published JaSMin: detached,
    over int(0.85 (N + 1)) maps);
  * the fast path (`fast.train_cell`) of plan_v2.yaml's v2_1k cells `ce` and `free`, seed 2100, 1 epoch
    (max_epochs=1: stops after it with best.pt and last.pt written), Fashion-MNIST (TREE/data), the kept v2 teacher.
`compare` digests: weights (every tensor of best.pt / last.pt: model, optimizer, RNG states, fast's stacked params)
and metrics.json / history.csv / fast's histories, leaving out only what cannot be equal between two checkouts or
two processes: wall-clock seconds (epoch_time_s, eval_time_s, img_per_s, timing.json), `provenance` (machine load,
process ids), `source` and `run_id` (hashes of the training code: they change with the code by design)."""
import hashlib
import json
import os
import sys

SKIP = ("timing.json", "processes.json")  # seconds; the process ids and load samples (`provenance.Monitor`)
VARYING = {"epoch_time_s", "eval_time_s", "img_per_s", "provenance", "source", "run_id"}


def run(tree: str, out: str) -> None:
    sys.path.insert(0, tree)
    import pandas as pd
    import torch
    import yaml

    torch.set_num_threads(1)
    import odevit
    from odevit.repro import config, fast, pipeline, study, train

    assert odevit.__file__.startswith(tree), odevit.__file__
    proj = os.path.join(out, "study")
    os.makedirs(proj)
    os.chdir(proj)
    p = yaml.safe_load(open(os.path.join(tree, "params.yaml")))
    p["base"].update(dataset="synthetic", synthetic_size=384, val_size=64, batch_size=32, eval_batch_size=64,
                     device="cpu")
    p["teacher"].update(name=None, patch_size=7, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0)
    p["distill"].update(num_steps=4, epochs=2)
    p["study"].update(train_limit=256, robustness_steps=[1, 8], robustness_test_limit=64, cells={
        "ref": {}, "ce": {"ce_weight": 1.0}, "drawn": {"train_steps": [4, 8], "ce_weight": 1.0},
        "all_l1": {"mse_tokens": "all", "attn_l1_weight": 0.5}, "free": {"free": True},
        "curriculum": {"ce_weight": 0.5, "ce_from_epoch": 1, "jasmin_detach": True, "jasmin_maps_from": "grid_points"}})
    open("params.yaml", "w").write(yaml.safe_dump(p))
    cfg = config.check_stage("cell")
    torch.manual_seed(0)
    train.save_atomic({"model": pipeline.build_teacher(cfg["base"], cfg["teacher"]).state_dict()},
                      "checkpoints/02_teacher/best.pt")
    os.makedirs("results/02_teacher")
    pd.DataFrame({"layer": [1, 2], "distance": [1.0, 2.0]}).to_csv("results/02_teacher/distances.csv", index=False)
    for cell in ("ce", "drawn", "all_l1", "free", "curriculum"):
        study.run(cell, 0)
    study.run_many("free", [1, 2])
    os.chdir(tree)  # fast: plan_v2.yaml, results/v2/teacher, weights/v2_teacher of the tree; checkpoints/fast there
    plan = fast.Plan("plan_v2.yaml")
    dev = fast._device_setup(plan.base.precision, "cpu")
    cache = {}
    for cell in ("ce", "free"):
        fast.train_cell(plan, "v2_1k", cell, dev, False, None, cache, into=os.path.join(out, "fast"),
                        only_seeds=[2100], max_epochs=1)
    for cell in ("ce", "free"):  # out of the tree, beside the rest
        for rel in ("last.pt", "s2100/best.pt"):
            dst = os.path.join(out, "fast_ckpt", cell, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(os.path.join(tree, "checkpoints/fast/v2_1k", cell, rel), dst)


def digest(obj, h=None) -> str:
    """sha256 of a checkpoint / JSON / table: tensors by their bytes, dtype and shape, the rest by value; keys in
    VARYING left out."""
    import torch

    top = h is None
    h = h or hashlib.sha256()
    if isinstance(obj, torch.Tensor):
        h.update(f"{obj.dtype}{tuple(obj.shape)}".encode())
        h.update(obj.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes() if obj.numel() else b"")
    elif isinstance(obj, dict):
        for k in obj:  # insertion order: the order the code wrote
            if k not in VARYING:
                h.update(repr(k).encode())
                digest(obj[k], h)
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for v in obj:
            digest(v, h)
        h.update(b"]")
    else:
        h.update(repr(obj).encode())
    return h.hexdigest() if top else ""


def load(path: str):
    import pandas as pd
    import torch

    if path.endswith(".pt"):
        return torch.load(path, map_location="cpu", weights_only=True)  # as train.load_checkpoint reads them
    if path.endswith(".json"):
        return json.load(open(path))
    if path.endswith(".csv"):
        return pd.read_csv(path, dtype=str).drop(columns=[c for c in VARYING], errors="ignore").to_dict("list")
    raise ValueError(path)


def compare(old: str, new: str) -> bool:
    files = sorted(os.path.relpath(os.path.join(d, f), old) for d, _, fs in os.walk(old) for f in fs
                   if f.endswith((".pt", ".json", ".csv")) and f not in SKIP)
    new_files = sorted(os.path.relpath(os.path.join(d, f), new) for d, _, fs in os.walk(new) for f in fs
                       if f.endswith((".pt", ".json", ".csv")) and f not in SKIP)
    ok = files == new_files and len(files) > 0
    if files != new_files:
        print("different file lists:", sorted(set(files) ^ set(new_files)))
    for rel in files:
        a = digest(load(os.path.join(old, rel)))
        b = digest(load(os.path.join(new, rel))) if rel in new_files else "(missing)"
        ok &= a == b
        print(f"{'same' if a == b else 'DIFFERENT'}  {a[:16]}  {b[:16]}  {rel}")
    print("all identical:", ok)
    return ok


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3]))
    else:
        sys.exit(0 if compare(sys.argv[2], sys.argv[3]) else 1)
