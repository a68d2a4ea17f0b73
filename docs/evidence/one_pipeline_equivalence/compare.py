"""Compare the last.pt and best.pt files of run_old.py (a clone at 2129d9c, before the one pipeline) and run_new.py (a
clone after it): `python compare.py OLD_CLONE NEW_CLONE`. Prints whether the stacked weights, the optimiser state,
the histories (times aside) and every seed's best.pt are identical, and the two run keys."""
import sys

import torch

old, new = sys.argv[1], sys.argv[2]
ck = "checkpoints/eqcheck/v2_1k/ref"
a = torch.load(f"{old}/{ck}/last.pt", weights_only=True)
b = torch.load(f"{new}/{ck}/last.pt", weights_only=True)
same_p = all(torch.equal(a["params"][k], b["params"][k]) for k in a["params"])
same_o = all(torch.equal(x, y) for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values())
             for x, y in zip(sa.values(), sb.values()) if torch.is_tensor(x))
strip = lambda h: [[{k: v for k, v in r.items() if not k.endswith("time_s") and k != "img_per_s"} for r in hh] for hh in h]
print("params identical:", same_p, "| optimizer state identical:", same_o,
      "| histories identical:", strip(a["histories"]) == strip(b["histories"]), "| epochs", a["epoch"], b["epoch"])
print("run key config old/new:", a["key"]["config"], b["key"]["config"], "| training source old/new:",
      a["key"]["source"], b["key"]["source"])
for s in ("s2100", "s2101"):
    x = torch.load(f"{old}/{ck}/{s}/best.pt", weights_only=True)["model"]
    y = torch.load(f"{new}/{ck}/{s}/best.pt", weights_only=True)["model"]
    print(s, "best.pt identical:", all(torch.equal(x[k], y[k]) for k in x))
