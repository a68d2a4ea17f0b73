"""dvc.lock's 02_teacher entry after the notebooks were numbered in reading order (2026-11-28): 02_teacher's opening
markdown cell was rewritten (the same edit in notebooks/ and outputs/) and odevit/repro/notebook.py changed
(NOTEBOOKS sorted, record_time drops entries of stages that are no longer notebooks, docstrings). Neither changes
what the stage computes, and its checkpoint (checkpoints/02_teacher, a DVC output) is in no cache here, so `dvc
commit 02_teacher` cannot run; this writes the record it would write. Run from the repository root:

    python docs/evidence/notebook_numbers/lock_rewrite.py

It first checks, and stops without writing if it does not hold, that both copies of the notebook differ from
their versions at BEFORE in the first markdown cell only, and that this cell is the same in both copies: every code
cell, every output and the metadata are as the stage last wrote them. README.md beside this file says why the
notebook.py change alters no output of the stage."""
import hashlib
import json
import re
import subprocess

BEFORE = "4609371"  # main before the renumbering
STAGE = "02_teacher"
PATHS = ("notebooks/02_teacher.ipynb", "outputs/02_teacher.ipynb", "odevit/repro/notebook.py")


def cells_but_first_markdown(nb):
    first = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown")
    return first, [c for i, c in enumerate(nb["cells"]) if i != first], {k: v for k, v in nb.items() if k != "cells"}


heads = []
for path in PATHS[:2]:
    old = json.loads(subprocess.run(["git", "show", f"{BEFORE}:{path}"], capture_output=True, check=True).stdout)
    new = json.load(open(path))
    i_old, rest_old, meta_old = cells_but_first_markdown(old)
    i_new, rest_new, meta_new = cells_but_first_markdown(new)
    assert (i_old, rest_old, meta_old) == (i_new, rest_new, meta_new), f"{path}: more than the first markdown cell changed"
    heads.append(new["cells"][i_new]["source"])
assert heads[0] == heads[1], "the first markdown cell differs between notebooks/ and outputs/"

lines, stage, dep, done = open("dvc.lock").read().split("\n"), None, None, []
for k, line in enumerate(lines):
    m = re.match(r"^  (\S[^:]*):\s*$", line)
    if m:
        stage = m.group(1)
    if line.startswith("    - path: "):
        dep = line[len("    - path: "):]
    elif not line.startswith("      "):
        dep = None
    if stage == STAGE and dep in PATHS and line.startswith(("      md5: ", "      size: ")):
        data = open(dep, "rb").read()
        key = line.split(":")[0]
        lines[k] = f"{key}: {hashlib.md5(data).hexdigest()}" if "md5" in key else f"{key}: {len(data)}"
        done.append((dep, key.strip()))
assert len(done) == 2 * len(PATHS), f"expected md5 and size of {PATHS} in {STAGE}, rewrote {done}"
open("dvc.lock", "w").write("\n".join(lines))
print(f"{STAGE}: md5 and size of {', '.join(PATHS)} set to today's files")
