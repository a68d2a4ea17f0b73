"""Epoch by epoch: teacher_strength_3k's own teacher as committed (results/studies/teacher_strength_3k/teacher/
history.csv: 2-core AMD EPYC) against the same command re-run on a 2-core Intel Xeon (log.txt) -> summary.csv.
Run from the repository root: python docs/evidence/teacher_retrain_xeon/compare.py"""
import re
import pandas as pd

HERE = "docs/evidence/teacher_retrain_xeon"
amd = pd.read_csv("results/studies/teacher_strength_3k/teacher/history.csv")
rows = [tuple(map(float, m)) for m in re.findall(r"epoch (\d+)/\d+\s+loss ([\d.]+)\s+val acc@1 ([\d.]+)", open(f"{HERE}/log.txt").read())]
xeon = pd.DataFrame(rows, columns=["epoch", "train_loss_xeon", "val_acc1_xeon"]).astype({"epoch": int})
out = amd[["epoch", "train_loss", "val_acc1"]].rename(columns={"train_loss": "train_loss_amd", "val_acc1": "val_acc1_amd"})
out = out.merge(xeon, on="epoch").round(4)
out["val_acc1_diff_pts"] = ((out.val_acc1_xeon - out.val_acc1_amd) * 100).round(2)
out.to_csv(f"{HERE}/summary.csv", index=False)
print(out.to_string(index=False))
