"""The lr5e-4 reruns paired by seed with the committed 55k runs (NOTES.md): python docs/evidence/strong_teacher_tau15_fmnist_55k_reruns/compare.py"""
import glob
import json

from odevit.repro import stats
root = "docs/evidence/strong_teacher_tau15_fmnist_55k_reruns/lr5e-4/results/cells/ce"
def acc(path): return 100 * json.load(open(path))["acc1"]
new = {int(p.split("/s")[-1].split("/")[0]): acc(p) for p in glob.glob(f"{root}/s*/metrics.json")}
ev = "docs/evidence"
base = {"default teacher, ce (lr 1e-3, rule)": f"{ev}/converged_fmnist/results/cells/ce/s{{}}/metrics.json",
        "stronger teacher, ce (lr 1e-3, rule)": f"{ev}/strong_teacher_tau15_fmnist_55k/results/cells/ce/s{{}}/metrics.json",
        "free ODE (lr 1e-3, rule)": f"{ev}/converged_fmnist/results/cells/free/s{{}}/metrics.json"}
print("reruns:", {s: round(a, 2) for s, a in sorted(new.items())})
for name, pat in base.items():
    seeds = sorted(new)
    d = [new[s] - acc(pat.format(s)) for s in seeds]
    line = f"minus {name}: paired {', '.join(f'{x:+.2f}' for x in d)}"
    if len(seeds) >= 3:
        e = stats.estimate(d, "greater")
        line += f"; mean {e['mean']:+.2f} [{e['ci_low']:+.2f}, {e['ci_high']:+.2f}], p two-sided {e['p_vs_null']:.3f}"
    print(line)
