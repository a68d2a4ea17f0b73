"""Compare two plan-v2 resume files (fast.py's last.pt) written by the same run under two training sources: every
tensor (weights, AdamW state, best weights, RNG states) and every history value must be equal, except the timings
(epoch_time_s, eval_time_s, img_per_s) and the run key's `source` and `commit`, which name the code.

    python docs/evidence/source_equivalence/compare_last.py OLD/last.pt NEW/last.pt     # exit 0 = bit-identical
"""
import sys

import torch

from odevit.repro.train import load_checkpoint  # weights_only=True, one clear error for a bad file

SKIP = ("epoch_time_s", "eval_time_s", "img_per_s", "/key/source", "/key/commit")


def flat(x, p=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from flat(v, f"{p}/{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from flat(v, f"{p}[{i}]")
    else:
        yield p, x


def main(old: str, new: str) -> int:
    a, b = (dict(flat(load_checkpoint(f))) for f in (old, new))
    same = lambda u, v: torch.equal(u, v) if torch.is_tensor(u) and torch.is_tensor(v) else u == v  # noqa: E731
    diff = sorted(k for k in set(a) | set(b) if not k.endswith(SKIP) and (k not in a or k not in b or not same(a[k], b[k])))
    print(f"{old} vs {new}: {sum(torch.is_tensor(v) for v in a.values())} tensors, {len(a)} values; "
          f"differing (timings and the key's source/commit aside): {diff or 'none'}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
