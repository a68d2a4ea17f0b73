"""dvc.lock after a change of source files that alters no stage's output (the commit names the record that shows
it): in every entry that recorded one of PATHS at its content in commit OLD, that dependency's md5 and size become
today's file's — the record `dvc commit` would write, without re-running stages whose outputs cannot change.

    python docs/evidence/lock_rewrite.py OLD PATH [PATH ...]     # from the repository root; prints what it rewrote

Only dependencies change (an output with that path is left alone), and entries that recorded another content of a
path (stale before the change) are left as they are, so a stage that was out of date stays out of date. The file is
rewritten line by line (DVC's own layout: LF line ends, `md5:` before `size:`; anything else is refused, writing
nothing) and atomically."""
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
    if "\r" in text:
        raise ValueError("dvc.lock: CR line ends; DVC writes LF (nothing rewritten)")
    out: List[str] = []
    done: Dict[str, Counter] = {p: Counter() for p in swaps}
    stage, section, dep, hit, sizes = "", "", None, False, 0
    for line in text.split("\n"):
        m = re.match(r"^  (\S[^:]*):\s*$", line)
        if m:
            stage = m.group(1)
        if re.match(r"^    [a-z_]+:", line):
            section = line.strip()
        if line.startswith("    - path: "):
            if hit:
                raise ValueError(f"dvc.lock: {stage}: {dep}'s md5 rewritten but no size line follows it")
            dep, hit = (line[len("    - path: "):] if section == "deps:" else None), False
        elif not line.startswith("      "):
            if hit:
                raise ValueError(f"dvc.lock: {stage}: {dep}'s md5 rewritten but no size line follows it")
            dep = None
        if dep in swaps and line == f"      md5: {swaps[dep][0]}":
            line, hit = f"      md5: {swaps[dep][1]}", True
            done[dep][stage.split("@")[0]] += 1
        elif dep in swaps and hit and line.startswith("      size: "):
            line, hit, sizes = f"      size: {swaps[dep][2]}", False, sizes + 1
        out.append(line)
    if hit or sizes != sum(sum(c.values()) for c in done.values()):
        raise ValueError("dvc.lock: an md5 rewritten without its size line after it (nothing rewritten)")
    return "\n".join(out), done


def main(old: str, paths: List[str]) -> int:
    swaps = {}
    for p in paths:
        before = subprocess.run(["git", "show", f"{old}:{p}"], capture_output=True, check=True).stdout
        with open(p, "rb") as f:
            swaps[p] = (md5_size(before)[0], *md5_size(f.read()))
    with open("dvc.lock", newline="") as f:
        text, done = rewrite(f.read(), swaps)
    with open("dvc.lock.tmp", "w", newline="") as f:
        f.write(text)
    os.replace("dvc.lock.tmp", "dvc.lock")
    for p, c in done.items():
        print(f"{p}: md5 {swaps[p][0]} -> {swaps[p][1]} in {sum(c.values())} entries: {dict(sorted(c.items()))}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
