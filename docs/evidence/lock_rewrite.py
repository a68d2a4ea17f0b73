"""dvc.lock after a change of source files that alters no stage's output (the commit names the record that shows
it): in every entry that recorded one of PATHS at its content in commit OLD, that dependency's md5 and size become
today's file's — the record `dvc commit` would write, without re-running stages whose outputs cannot change.

    python docs/evidence/lock_rewrite.py OLD PATH [PATH ...]     # from the repository root; prints what it rewrote

Entries that recorded another content of a path (stale before the change) are left as they are, so a stage that
was out of date stays out of date. The file is rewritten line by line (DVC's own layout kept) and atomically."""
import hashlib
import os
import re
import subprocess
import sys
from collections import Counter
from typing import Dict, List, Tuple


def md5_size(data: bytes) -> Tuple[str, int]:
    return hashlib.md5(data).hexdigest(), len(data)


def rewrite(text: str, swaps: Dict[str, Tuple[str, str, int]]) -> Tuple[str, Dict[str, Counter]]:
    """`swaps` {path: (old md5, new md5, new size)} applied to dvc.lock's text; returns it and, per path, the
    stages (foreach items counted) rewritten."""
    out: List[str] = []
    done: Dict[str, Counter] = {p: Counter() for p in swaps}
    stage, dep, hit = None, None, False
    for line in text.split("\n"):
        m = re.match(r"^  (\S[^:]*):\s*$", line)
        if m:
            stage = m.group(1)
        if line.startswith("    - path: "):
            dep, hit = line[len("    - path: "):], False
        elif not line.startswith("      "):
            dep = None
        if dep in swaps and line == f"      md5: {swaps[dep][0]}":
            line, hit = f"      md5: {swaps[dep][1]}", True
            done[dep][stage.split("@")[0]] += 1
        elif dep in swaps and hit and line.startswith("      size: "):
            line = f"      size: {swaps[dep][2]}"
        out.append(line)
    return "\n".join(out), done


def main(old: str, paths: List[str]) -> int:
    swaps = {}
    for p in paths:
        before = subprocess.run(["git", "show", f"{old}:{p}"], capture_output=True, check=True).stdout
        with open(p, "rb") as f:
            swaps[p] = (md5_size(before)[0], *md5_size(f.read()))
    with open("dvc.lock") as f:
        text, done = rewrite(f.read(), swaps)
    with open("dvc.lock.tmp", "w") as f:
        f.write(text)
    os.replace("dvc.lock.tmp", "dvc.lock")
    for p, c in done.items():
        print(f"{p}: md5 {swaps[p][0]} -> {swaps[p][1]} in {sum(c.values())} entries: {dict(sorted(c.items()))}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
