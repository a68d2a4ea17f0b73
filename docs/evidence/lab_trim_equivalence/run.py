"""Train a few epochs of plan v3's cells with the code of the checkout this runs in (its root as the working
directory), into results/eqcheck*: `python run.py full` (2 epochs of v3_1k ref, ce, free at seeds 3100 and 3101;
1 epoch of each v3_10k cell that v3_1k has not, seed 3300: remedy with its own N draw, layernorm, jasmin_off,
ref_weak) or `python run.py first` (the first of those 2 epochs of v3_1k ref, into results/eqcheck_first, to be
continued by other code: `python run.py resume`)."""
import sys

import torch

sys.path.insert(0, ".")
from odevit.repro import fast  # noqa: E402

torch.set_num_threads(2)
phase = sys.argv[1]
p = fast.Plan("params.yaml", 3)
dev = fast._device_setup(p.base.precision, "cpu")
if phase == "full":
    jobs = [("v3_1k", c, [3100, 3101], 2) for c in ("ref", "ce", "free")]
    jobs += [("v3_10k", c, [3300], 1) for c in ("remedy", "layernorm", "jasmin_off", "ref_weak")]
    into = "results/eqcheck"
else:
    jobs, into = [("v3_1k", "ref", [3100, 3101], 1)], "results/eqcheck_first"
for study, cell, seeds, epochs in jobs:
    done = fast.train_cell(p, study, cell, dev, False, None, {}, into=into, only_seeds=seeds, max_epochs=epochs)
    print(study, cell, seeds, "finished" if done else f"stopped after {epochs} epoch(s) of this call", flush=True)
