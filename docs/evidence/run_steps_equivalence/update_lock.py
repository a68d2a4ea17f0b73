"""Rewrite dvc.lock's md5 and size for dependency files whose change alters no output (check.py: bit-identical runs).

    python docs/evidence/run_steps_equivalence/update_lock.py BASE FILE...    # from the repository root

For each FILE, every dvc.lock entry `- path: FILE` whose md5 is FILE's md5 at commit BASE gets the md5 and size of
FILE as it is now (what `dvc commit` writes for a dependency); an entry with any other md5 stops the script (a stage
that was already out of date before the change is not this change's to vouch for). Nothing else in dvc.lock changes."""
import hashlib
import os
import re
import subprocess
import sys

base, files = sys.argv[1], sys.argv[2:]
text = open("dvc.lock").read()
for f in files:
    old = hashlib.md5(subprocess.run(["git", "show", f"{base}:{f}"], check=True, capture_output=True).stdout).hexdigest()
    new_bytes = open(f, "rb").read()
    new, size = hashlib.md5(new_bytes).hexdigest(), len(new_bytes)
    entry = re.compile(r"(- path: " + re.escape(f) + r"\n(\s+)hash: md5\n\s+md5: )([0-9a-f]{32})(\n\s+size: )(\d+)")
    found = entry.findall(text)
    stale = {m[2] for m in found} - {old}
    if stale:
        sys.exit(f"{f}: dvc.lock entries with md5 {sorted(stale)}, not {old} (its md5 at {base}): left alone")
    text, n = entry.subn(lambda m: f"{m.group(1)}{new}{m.group(4)}{size}", text)
    print(f"{f}: {n} entries {old} -> {new} (size {size})")
tmp = "dvc.lock.tmp"
open(tmp, "w").write(text)
os.replace(tmp, "dvc.lock")
