"""Seed spread and accuracy study on a GPU (fp32), run by hand on the lent H100 (not part of the pipeline):
    python docs/evidence/gpu_study.py 20000x2 ref,free,parallel,... 0,1,2   (data in .gpu/data/FashionMNIST/raw)
It calls the pipeline's own `odevit.repro.study.run` per (cell, seed) after training the teacher as 02_teacher does."""
import os, sys, time
import yaml
import pandas as pd

root = os.getcwd()
sys.path.insert(0, root)
from odevit.repro import config, pipeline, study  # noqa: E402

P = yaml.safe_load(open("params.yaml"))
P["base"].update(device="cuda", precision="fp32", data_root=f"{root}/.gpu/data")
out = os.environ.get("OUT", "/tmp/out")
os.makedirs(out, exist_ok=True)
if os.environ.get("TINY"):
    P["base"].update(device="cpu", dataset="synthetic", synthetic_size=128, batch_size=32)
    P["teacher"].update(embed_dim=16, depth=2, num_heads=2, epochs=1)
    P["distill"].update(num_steps=4)
    P["study"].update(robustness_steps=[1, 2, 8], robustness_test_limit=32)
work = "/tmp/spread"
os.makedirs(work, exist_ok=True)
os.chdir(work)
if not os.path.exists("presets"):
    os.symlink(f"{root}/presets", "presets")
yaml.safe_dump(P, open("params.yaml", "w"))
cfg = config.check_stage("02_teacher")
b, t = cfg["base"], cfg["teacher"]
dev = pipeline.setup(b)
tr, te = pipeline.loaders(b)
t0 = time.time()
if not os.path.exists("checkpoints/02_teacher/best.pt"):
    pipeline.fit_teacher(pipeline.build_teacher(b, t), b, t, tr, te)
teacher = study.load_teacher(b, t, dev)
d = pipeline.teacher_distances(teacher, tr, 8, "cls", dev)
pipeline.write_csv(pd.DataFrame({"layer": range(1, len(d) + 1), "distance": d}), "results/02_teacher/distances.csv")
print("teacher", time.time() - t0, d, flush=True)
rows = []
budgets = [(int(a), int(e)) for a, e in (x.split("x") for x in sys.argv[1].split(","))]
cells = sys.argv[2].split(",")
seeds = [int(s) for s in sys.argv[3].split(",")]
for lim, ep in budgets:
    P["study"]["train_limit"] = lim
    P["distill"]["epochs"] = ep
    yaml.safe_dump(P, open("params.yaml", "w"))
    for cell in cells:
        for s in seeds:
            os.system("rm -rf checkpoints/cells results/cells")
            t0 = time.time()
            m = study.run(cell, s)
            rob = m.pop("robustness")
            rows.append(dict(limit=lim, **{k: (str(v) if isinstance(v, list) else v) for k, v in m.items()},
                             **{f"acc1_n{k}": v for k, v in rob.items()}, time=time.time() - t0))
            print(rows[-1], flush=True)
            pd.DataFrame(rows).to_csv(f"{out}/spread.csv", index=False)
