"""Train the plain path with the objectives.py of 4d04fa9 and with today's; print both weight hashes.
Run from tests/: `git show 4d04fa9:odevit/repro/objectives.py > /tmp/objectives_old.py; python ../docs/evidence/objectives_equivalence/check.py`."""
import hashlib
import importlib.util
import sys

import torch

sys.path.insert(0, ".")
from odevit.model import ODEViT  # noqa: E402
from odevit.repro import objectives as new, train  # noqa: E402
from test_fit_many import _loaders, _model  # noqa: E402

spec = importlib.util.spec_from_file_location("odevit.repro.objectives_old", "/tmp/objectives_old.py")
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)


def run(mod):
    torch.manual_seed(0)
    teacher = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=4, embed_dim=16, num_heads=2, num_steps=2,
                     horizon=2.0)
    tr, va = _loaders(0)
    cache = torch.stack([teacher.forward_trajectory(tr.transform(tr.split.images[:tr.n].float()))["states"][i][:, 0]
                         for i in (1, 2)], 1).detach()
    obj = mod.distill(teacher, [2, 4], jasmin_weight=1.0, ce_weight=0.5, cache=cache)
    m = _model(1)
    train.fit(m, tr, va, obj, train.TrainConfig(epochs=2, lr=3e-3, device="cpu"), None, run_id="r")
    return hashlib.sha256(b"".join(t.numpy().tobytes() for t in m.state_dict().values())).hexdigest()


a, b = run(old), run(new)
print("old", a)
print("new", b)
print("bit-identical:", a == b)
