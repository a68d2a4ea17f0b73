"""The seeds-trained-together path on the evidence workload: confirm_55k_40ep's 15 runs as 3 processes of 5 seeds
(`python -m odevit.repro.runner confirm_55k_40ep --together 5 --jobs 3 --threads 2 --deadline 390`, MPS on, one
NVIDIA H200, 2026-11-26), stopped at the deadline after 20 of 40 epochs; each resumes from its last.pt.

    python docs/evidence/fastpath_h200/extract.py     # reads checkpoints/studies/confirm_55k_40ep/*/s*/{last.pt,
                                                      # processes.json} -> docs/evidence/fastpath_h200/runs.csv

Per run: epochs done, its process (the seeds trained with it), the process's wall and CPU seconds, the median of
its epochs' training-loop images/s (history img_per_s: the loop's rate, all 5 seeds of the process). No accuracy:
the runs are unfinished, and a confirmatory study's interim results are not looked at.
"""
import glob
import json
import os
import statistics

import pandas as pd
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    rows = []
    for d in sorted(glob.glob("checkpoints/studies/confirm_55k_40ep/*/s*")):
        ck = torch.load(f"{d}/last.pt", map_location="cpu", weights_only=True)
        procs = json.load(open(f"{d}/processes.json"))
        h = ck["history"]
        p = procs[-1]
        rows.append({"cell": d.split("/")[-2], "seed": int(d.split("/s")[-1]), "epochs_done": int(ck["epoch"]),
                     "trained_with": len(p.get("trained_with", [])) + 1, "device": p["cuda_device"],
                     "started": p["started"], "process_wall_s": p["wall_s"], "process_cpu_s": p["cpu_s"],
                     "loop_img_per_s_median": round(statistics.median(r["img_per_s"] for r in h), 1),
                     "epoch_loop_s_median": round(statistics.median(r["epoch_time_s"] for r in h) * (
                         len(p.get("trained_with", [])) + 1), 2),
                     "train_images": 55000})  # no accuracy: an unfinished confirmatory run is not looked at
    df = pd.DataFrame(rows)
    df.to_csv(os.path.join(HERE, "runs.csv"), index=False)
    procs = df.drop_duplicates(["cell"])  # one process per cell
    print(df.to_string(index=False))
    print(f"processes {len(procs)}, together {procs.loop_img_per_s_median.sum():.0f} training images/s "
          f"(sum of the processes' loop rates), wall {df.process_wall_s.max():.0f} s for "
          f"{len(df)} runs x {df.epochs_done.min()} epochs")


if __name__ == "__main__":
    main()
