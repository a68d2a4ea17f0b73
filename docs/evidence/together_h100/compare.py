"""Seeds trained together on a GPU against the same seeds trained alone: ablations_3k's ref cell, seeds 600-603.

The committed runs (results/studies/ablations_3k/ref/s60*) were trained 16 seeds in one process (`--together 16`,
train.fit_many: one batched model under torch.func.vmap, explicit softmax attention). The same four seeds were then
trained one per process (`--together 1`, the plain `train.fit`, the fused attention kernel), 4 processes at once under
MPS, on the same kind of machine (one NVIDIA H100, 2026-11-26), same code (source in each metrics.json), and kept here:
docs/evidence/together_h100/results/studies/ablations_3k/ref/s60*.

    python docs/evidence/together_h100/compare.py    # -> docs/evidence/together_h100/summary.csv

Per seed: test Acc@1 at N, N/2 and 2N both ways and their difference (points), the best epochs, each way's process wall
and its training loop's median images/s (a together-16 process: its 16 seeds counted together; the alone runs shared
the GPU 4 at a time, the together-16 processes 4 then 3 at a time); then the ref cell's seed SD over its 16 seeds and
the smallest SD of a paired difference among ablations_3k's rows, for scale. The two ways differ in two things: the
batching (vmap over 16 models) and the attention kernel (explicit softmax under vmap, the fused kernel alone).
"""
import glob
import json
import os

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def _m(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def main() -> None:
    rows = []
    for alone in sorted(glob.glob(f"{HERE}/results/studies/ablations_3k/ref/s*/metrics.json")):
        seed = os.path.basename(os.path.dirname(alone))
        a, t = _m(alone), _m(f"{ROOT}/results/studies/ablations_3k/ref/{seed}/metrics.json")
        assert a["source"] == t["source"] and not a.get("trained_together") and len(t["trained_together"]) == 16
        row = {"seed": a["seed"], "source": a["source"], "device": a["provenance"]["machines"][0]}
        for k in ("acc1", "acc1_half_n", "acc1_double_n"):
            row[f"{k}_alone"], row[f"{k}_together16"] = round(100 * a[k], 2), round(100 * t[k], 2)
            row[f"{k}_diff_pts"] = round(100 * (a[k] - t[k]), 2)
        row["best_epoch_alone"], row["best_epoch_together16"] = a["best_epoch"], t["best_epoch"]
        for way, m, d in (("alone", a, os.path.dirname(alone)),
                          ("together16", t, f"{ROOT}/results/studies/ablations_3k/ref/{seed}")):
            # the process's wall (start-up and evaluation included) and its training loop's median images/s over
            # epochs (history img_per_s: all the seeds of the process counted together)
            row[f"{way}_process_wall_s"] = m["provenance"]["processes"][0]["wall_s"]
            row[f"{way}_loop_img_per_s_median"] = round(float(pd.read_csv(f"{d}/history.csv").img_per_s.median()))
        rows.append(row)
    df = pd.DataFrame(rows)
    ref = [100 * _m(p)["acc1"] for p in glob.glob(f"{ROOT}/results/studies/ablations_3k/ref/s*/metrics.json")]
    claims = pd.read_csv(f"{ROOT}/results/evidence/claims.csv")
    abl = claims[(claims.study == "ablations_3k") & (claims.status == "confirmatory")]
    df["ref_seed_sd_pts"] = round(pd.Series(ref).std(), 3)
    df["smallest_paired_sd_pts"] = round(abl["sd"].min(), 3)
    df.to_csv(f"{HERE}/summary.csv", index=False)
    print(df.to_string(index=False))
    print(f"largest |Acc@1 alone - together| {df.acc1_diff_pts.abs().max():.2f} pt; ref's seed SD "
          f"{df.ref_seed_sd_pts.iloc[0]:.3f} pt")


if __name__ == "__main__":
    main()
