import sys, torch
sys.path.insert(0, ".")
from odevit.repro import fast
torch.set_num_threads(2)
p = fast.Plan("plan_v2.yaml", "params.yaml")
dev = fast._device_setup(p.base.precision, "cpu")
fast.train_cell(p, "v2_1k", "ref", dev, False, None, {}, into="results/eqcheck", only_seeds=[2100, 2101], max_epochs=3)
