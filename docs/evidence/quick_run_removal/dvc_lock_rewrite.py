"""dvc.lock for the quick run's removed notebooks (2026-11-28): the entries of 03_ode_scratch, 04_distill,
05_ablations and 07_report go (their stages left dvc.yaml), and the md5/size of odevit/repro/notebook.py is set to
today's file in the entries of the stages whose outputs this machine cannot record again (02_teacher and
06_dynamics: their checkpoints are in no DVC cache here). Run from the repository root:

    python docs/evidence/quick_run_removal/dvc_lock_rewrite.py 02_teacher 06_dynamics

Why that is the same record `dvc commit` would write: README.md beside this file."""
import hashlib
import re
import sys

REMOVED = ("03_ode_scratch", "04_distill", "05_ablations", "07_report")
PATH = "odevit/repro/notebook.py"
stages = sys.argv[1:]
data = open(PATH, "rb").read()
md5, size = hashlib.md5(data).hexdigest(), len(data)
out, stage, dep, done = [], None, None, []
for line in open("dvc.lock").read().split("\n"):
    m = re.match(r"^  (\S[^:]*):\s*$", line)
    if m:
        stage = m.group(1)
    if stage in REMOVED:
        continue
    if line.startswith("    - path: "):
        dep = line[len("    - path: "):]
    elif not line.startswith("      "):
        dep = None
    if stage in stages and dep == PATH:
        if line.startswith("      md5: "):
            line = f"      md5: {md5}"
            done.append(stage)
        elif line.startswith("      size: "):
            line = f"      size: {size}"
    out.append(line)
assert sorted(done) == sorted(stages), done
open("dvc.lock", "w").write("\n".join(out))
print(f"{PATH}: md5 {md5}, size {size} in {', '.join(done)}; entries of {', '.join(REMOVED)} removed")
