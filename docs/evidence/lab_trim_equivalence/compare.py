"""Compare what run.py wrote in two checkouts: `python compare.py OLD NEW [SUBDIR [NEW_SUBDIR]]` (SUBDIR: eqcheck, the
default; NEW_SUBDIR: the same, or eqcheck_first for a group the new code continued from the old code's last.pt). For every group's last.pt: the stacked weights, buffers, best weights, the optimiser state, the
histories (times aside), the epoch; every seed's best.pt; and the run keys' configurations. Prints one line per group
and `all identical: True|False`."""
import glob
import os
import sys

import torch

old, new = sys.argv[1], sys.argv[2]
sub = sys.argv[3] if len(sys.argv) > 3 else "eqcheck"
new_sub = sys.argv[4] if len(sys.argv) > 4 else sub
untimed = lambda h: [[{k: v for k, v in r.items() if not k.endswith("time_s") and k != "img_per_s"} for r in hh]  # noqa: E731
                     for hh in h]


def same_tensors(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def same_optimizer(a, b):
    sa, sb = a["state"], b["state"]
    return sa.keys() == sb.keys() and all(
        torch.equal(x, y) if torch.is_tensor(x) else x == y for k in sa for x, y in zip(sa[k].values(), sb[k].values()))


ok, n, lasts = True, 0, sorted(glob.glob(f"{old}/checkpoints/{sub}/**/last.pt", recursive=True))
for f in lasts:
    rel = os.path.relpath(f, old)
    there = lambda r: f"{new}/" + r.replace(f"checkpoints/{sub}/", f"checkpoints/{new_sub}/", 1)  # noqa: E731
    if not os.path.exists(there(rel)):
        continue  # a group the other side did not train (eqcheck_first holds one)
    a, b = torch.load(f, weights_only=True), torch.load(there(rel), weights_only=True)
    checks = {"params": same_tensors(a["params"], b["params"]), "buffers": same_tensors(a["buffers"], b["buffers"]),
              "best_params": same_tensors(a["best_params"], b["best_params"]),
              "optimizer": same_optimizer(a["optimizer"], b["optimizer"]),
              "histories": untimed(a["histories"]) == untimed(b["histories"]), "epoch": a["epoch"] == b["epoch"],
              "config": a["key"]["config"] == b["key"]["config"]}
    for best in sorted(glob.glob(os.path.join(os.path.dirname(f), "**", "best.pt"), recursive=True)):
        r = os.path.relpath(best, old)
        checks[os.path.basename(os.path.dirname(r)) + " best.pt"] = same_tensors(
            torch.load(best, weights_only=True)["model"], torch.load(there(r), weights_only=True)["model"])
    ok, n = ok and all(checks.values()), n + 1
    print(f"{rel}: epoch {a['epoch']}, {len(a['histories'])} model(s); " + ", ".join(
        f"{k} {'identical' if v else 'DIFFERENT'}" for k, v in checks.items())
          + f" | source {a['key']['source']} -> {b['key']['source']}, trainer {a['key']['trainer']} -> {b['key']['trainer']}")
print(f"{n} groups compared; all identical: {ok and n > 0}")
