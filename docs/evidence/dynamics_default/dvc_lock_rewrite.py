"""dvc.lock after config.py's Dynamics defaults changed (2026-11-28, commit 7097b97: weights 'trained' -> 'published',
cells [ref, jasmin_off] -> [ref, free], to equal params.yaml): in every entry that recorded config.py at its previous
content (md5 OLD_MD5), its md5 and size are set to today's file. Run from the repository root:

    python docs/evidence/dynamics_default/dvc_lock_rewrite.py

Why that is the record `dvc commit` would write for these stages: README.md beside this file."""
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lock_rewrite import rewrite  # noqa: E402  (docs/evidence/lock_rewrite.py: the same walk, for any paths)

PATH = "odevit/repro/config.py"
OLD_MD5 = "73b9c283e7a8849d3786f97cbfda2dc5"  # `git show 220dde8:odevit/repro/config.py | md5sum`
data = open(PATH, "rb").read()
md5, size = hashlib.md5(data).hexdigest(), len(data)
text, done = rewrite(open("dvc.lock").read(), {PATH: (OLD_MD5, md5, size)})
open("dvc.lock", "w").write(text)
print(f"{PATH}: md5 {md5}, size {size} in {sum(done[PATH].values())} entries ({len(done[PATH])} stages)")
