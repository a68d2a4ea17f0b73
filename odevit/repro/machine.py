"""The machine and software a result came from: what decides whether a rerun can be bit-identical.

    python -m odevit.repro.machine                          # this machine's record (JSON), as run.json and the bench store it
    python -m odevit.repro.machine --stamp-lock requirements.lock   # write pyproject's dependency hash into the lock

CPU float results are bit-identical only for the same kernels: the same CPU type (model and the instruction set
torch dispatches to, `torch.backends.cpu.get_cpu_capability()`), the same thread count and the same locked
library versions (docs/reproducibility.md). `machine_info()` records each of these.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]  # the repository root (odevit/repro/machine.py)
LOCK = ROOT / "requirements.lock"
PYPROJECT = ROOT / "pyproject.toml"
PACKAGES = ("torch", "torchvision", "timm", "numpy", "scipy", "pandas", "dvc", "odevit")
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")  # what changes torch's CPU kernels
STAMP = "# pyproject-deps-sha256:"


def _cpuinfo(path: str = "/proc/cpuinfo") -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def cpu_model(cpuinfo: Optional[str] = None) -> str:
    """The CPU's model name (/proc/cpuinfo; platform.processor() where there is none)."""
    m = re.search(r"^model name\s*:\s*(.+)$", _cpuinfo() if cpuinfo is None else cpuinfo, re.M)
    return m.group(1).strip() if m else (platform.processor() or platform.machine())


def cpu_flags(cpuinfo: Optional[str] = None) -> List[str]:
    """The instruction-set flags of FLAGS this CPU has (sorted; empty where /proc/cpuinfo is missing)."""
    m = re.search(r"^flags\s*:\s*(.+)$", _cpuinfo() if cpuinfo is None else cpuinfo, re.M)
    have = set(m.group(1).split()) if m else set()
    return sorted(f for f in FLAGS if f in have)


def versions() -> Dict[str, Optional[str]]:
    """Installed versions of the packages that make the numbers (None: not installed)."""
    out: Dict[str, Optional[str]] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def file_sha256(path: os.PathLike | str) -> Optional[str]:
    """sha256 of a file's bytes (None when it does not exist)."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


def _toml_load(f) -> Dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.load(f)


def pyproject_deps(path: os.PathLike | str = PYPROJECT) -> Dict[str, List[str]]:
    """pyproject.toml's requirements: {"": dependencies, EXTRA: optional-dependencies[EXTRA], ...}."""
    with open(path, "rb") as f:
        project = _toml_load(f)["project"]
    return {"": list(project.get("dependencies", [])), **project.get("optional-dependencies", {})}


def pyproject_deps_sha256(path: os.PathLike | str = PYPROJECT) -> str:
    """sha256 of pyproject.toml's dependency section (canonical JSON): the lock records which one it was made from."""
    blob = json.dumps(pyproject_deps(path), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def lock_stamp(lock: os.PathLike | str = LOCK) -> Optional[str]:
    """The pyproject dependency hash written in the lock's header (None when absent)."""
    with open(lock) as f:
        for line in f:
            if line.startswith(STAMP):
                return line[len(STAMP):].split()[0]
    return None


def stamp_lock(lock: os.PathLike | str = LOCK, pyproject: os.PathLike | str = PYPROJECT) -> str:
    """Write (or replace) the header line `# pyproject-deps-sha256: HEX` after pip-compile's own header."""
    digest = pyproject_deps_sha256(pyproject)
    with open(lock) as f:
        lines = [ln for ln in f.readlines() if not ln.startswith(STAMP)]
    head = 0
    while head < len(lines) and lines[head].startswith("#"):
        head += 1
    lines.insert(head, f"{STAMP} {digest} (pyproject.toml's [project] dependencies + optional-dependencies; "
                       "make lock; tests/test_lock.py)\n")
    with open(lock, "w") as f:
        f.writelines(lines)
    return digest


def read_lock(lock: os.PathLike | str = LOCK) -> Dict[str, Dict[str, Any]]:
    """The lock's pins: {canonical name: {"version": V, "hashes": [sha256, ...]}}."""
    from packaging.utils import canonicalize_name

    pins: Dict[str, Dict[str, Any]] = {}
    current = None
    with open(lock) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", line)  # name[extras]==V
            if m:
                current = canonicalize_name(m.group(1))
                pins[current] = {"version": m.group(3), "hashes": []}
            elif current and line.strip().startswith("--hash=sha256:"):
                pins[current]["hashes"].append(line.split("sha256:")[1].split()[0])
    return pins


def lock_problems(lock: os.PathLike | str = LOCK, pyproject: os.PathLike | str = PYPROJECT) -> List[str]:
    """Where the lock and pyproject.toml disagree (empty: they agree): a requirement of pyproject (its dependencies
    and every extra) missing from the lock or pinned outside its specifier, a pin without a hash, or a lock stamped
    from another dependency section."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    with open(pyproject, "rb") as f:
        name = canonicalize_name(_toml_load(f)["project"]["name"])
    pins, out = read_lock(lock), []
    for extra, reqs in pyproject_deps(pyproject).items():
        for text in reqs:
            req = Requirement(text)
            key = canonicalize_name(req.name)
            if key == name:  # an extra naming the project's own extras (dev = ["odevit[pipeline]"])
                continue
            where = f"pyproject {'dependencies' if not extra else 'extra ' + extra}: '{text}'"
            if key not in pins:
                out.append(f"{where} is not in the lock (make lock)")
            elif not req.specifier.contains(pins[key]["version"], prereleases=True):
                out.append(f"{where}: the lock pins {pins[key]['version']} (make lock)")
    out += [f"lock: {k}=={v['version']} has no --hash" for k, v in pins.items() if not v["hashes"]]
    stamp, digest = lock_stamp(lock), pyproject_deps_sha256(pyproject)
    if stamp != digest:
        out.append(f"lock: made from another pyproject dependency section (stamp {stamp}, pyproject now {digest}; "
                   "make lock)")
    return out


def machine_info() -> Dict[str, Any]:
    """The machine and software of this process: CPU model, torch's CPU instruction set, its flags of interest,
    threads, OS, Python, library versions, the lock file's sha256 and the CUDA device (None without one)."""
    import torch

    return {
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": versions(),
        "torch_build": torch.__version__,  # with its local tag (e.g. +cu130, +cpu): which wheel of that version
        "lock_sha256": file_sha256(LOCK),
        "cuda_device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stamp-lock", metavar="LOCK", help="write pyproject.toml's dependency hash into LOCK's header")
    args = ap.parse_args(argv)
    if args.stamp_lock:
        print(f"{args.stamp_lock}: pyproject-deps-sha256 {stamp_lock(args.stamp_lock)}")
        return 0
    print(json.dumps(machine_info(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
