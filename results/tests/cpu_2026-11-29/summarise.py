"""Summarise the suite runs of 2026-11-29 kept here (README.md): for each runN/, the cores' busy and idle
core-seconds over pytest's wall (vmstat's idle column, every 2 s, from the session's start t0 to its last test's
end) and the same for the time after the tiny pipeline's processes ended. Writes summary.json; prints it.

    python results/tests/cpu_2026-11-29/summarise.py
"""
import gzip
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(folder: Path) -> dict:
    t0 = int((folder / "t0").read_text())
    rows = [l.split() for l in gzip.open(folder / "vmstat.txt.gz", "rt") if l.split() and l.split()[0].isdigit()]
    busy = [100 - int(r[14]) for r in rows[1:]]  # the first row averages since boot; then one row per 2 s from t0
    starts, ends = {}, {}
    for line in gzip.open(folder / "timeline.txt.gz", "rt"):
        t, kind, node = line.rstrip("\n").split(" ", 2)
        (starts if kind == "start" else ends)[node] = float(t) - t0
    end = max(ends.values())
    summary = (folder / "pytest_summary.txt").read_text()
    wall = float(re.search(r" in ([0-9.]+)s", summary).group(1))
    cores = 2
    b = busy[: int(end // 2)]
    out = {"pytest_wall_s": wall, "tests": len(ends),
           "busy_core_s": round(sum(b) / 100 * 2 * cores, 1), "idle_core_s": round(sum(100 - x for x in b) / 100 * 2 * cores, 1)}
    m = re.search(r"tiny pipeline ([0-9]+)-([0-9]+)", summary)
    hub = sorted((starts[n], e - starts[n]) for n, e in ends.items() if "test_published_tag_reproduces_committed_acc1" in n)
    out["test_hub_published_tags_s"] = round(sum(d for _, d in hub), 1)  # 11 full-test-set evaluations
    out["test_hub_each_s"] = [round(d, 1) for _, d in hub]  # in the order they ran
    if m:
        after = busy[int(m.group(2)) // 2: int(end // 2)]
        out["tiny_pipeline_s"] = [int(m.group(1)), int(m.group(2))]
        out["idle_core_s_after_pipeline"] = round(sum(100 - x for x in after) / 100 * 2 * cores, 1)
    return out


if __name__ == "__main__":
    res = {f.name: run(f) for f in sorted(HERE.glob("run*"))}
    (HERE / "summary.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
