"""The machine and software a result came from: what decides whether a rerun can be bit-identical.

    python -m odevit.repro.machine                    # this machine's record (JSON), as run.json and the bench store it
    python -m odevit.repro.machine --stamp-lock requirements.lock   # write pyproject's dependency hash into the lock

CPU floats are bit-identical only on the same kernels: same CPU type and torch instruction set, thread count and
locked library versions (docs/reproducibility.md).
"""
from __future__ import annotations

import argparse
import contextlib
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
LOCK, PYPROJECT = ROOT / "requirements.lock", ROOT / "pyproject.toml"
PACKAGES = ("torch", "torchvision", "timm", "numpy", "scipy", "pandas", "dvc", "odevit")
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")  # what changes torch's CPU kernels
STAMP = "# pyproject-deps-sha256:"


def _cpuinfo_field(name: str, cpuinfo: Optional[str]) -> Optional[str]:
    """Field `name` of the text `cpuinfo` (None: of /proc/cpuinfo, empty where unreadable); None where absent."""
    if cpuinfo is None:
        with contextlib.suppress(OSError):
            cpuinfo = Path("/proc/cpuinfo").read_text()
    m = re.search(rf"^{name}\s*:\s*(.+)$", cpuinfo or "", re.M)
    return m.group(1) if m else None


def cpu_model(cpuinfo: Optional[str] = None) -> str:
    """The CPU's model name (/proc/cpuinfo; platform.processor() where there is none)."""
    name = _cpuinfo_field("model name", cpuinfo)
    return name.strip() if name else (platform.processor() or platform.machine())


def cpu_flags(cpuinfo: Optional[str] = None) -> List[str]:
    """The instruction-set flags of FLAGS this CPU has (sorted; empty where /proc/cpuinfo is missing)."""
    have = set((_cpuinfo_field("flags", cpuinfo) or "").split())
    return sorted(f for f in FLAGS if f in have)


def versions() -> Dict[str, Optional[str]]:
    """Installed versions of the packages that make the numbers (None: not installed)."""
    out: Dict[str, Optional[str]] = dict.fromkeys(PACKAGES)
    for name in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def file_sha256(path: os.PathLike | str) -> Optional[str]:
    """sha256 of a file's bytes (None when it does not exist)."""
    with contextlib.suppress(FileNotFoundError):
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return None


def _project(path: os.PathLike | str) -> Dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)["project"]


def pyproject_deps(path: os.PathLike | str = PYPROJECT) -> Dict[str, List[str]]:
    """pyproject.toml's requirements: {"": dependencies, EXTRA: optional-dependencies[EXTRA], ...}."""
    project = _project(path)
    return {"": list(project.get("dependencies", [])), **project.get("optional-dependencies", {})}


def pyproject_deps_sha256(path: os.PathLike | str = PYPROJECT) -> str:
    """sha256 of pyproject.toml's dependency section (canonical JSON): the lock records which one it was made from."""
    return hashlib.sha256(json.dumps(pyproject_deps(path), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def lock_stamp(lock: os.PathLike | str = LOCK) -> Optional[str]:
    """The pyproject dependency hash written in the lock's header (None when absent)."""
    with open(lock) as f:
        return next((line[len(STAMP):].split()[0] for line in f if line.startswith(STAMP)), None)


def stamp_lock(lock: os.PathLike | str = LOCK, pyproject: os.PathLike | str = PYPROJECT) -> str:
    """Write (or replace) the header line `# pyproject-deps-sha256: HEX` after pip-compile's own header."""
    digest = pyproject_deps_sha256(pyproject)
    with open(lock) as f:
        lines = [ln for ln in f.readlines() if not ln.startswith(STAMP)]
    head = next((i for i, ln in enumerate(lines) if not ln.startswith("#")), len(lines))
    lines.insert(head, f"{STAMP} {digest} (pyproject.toml's [project] dependencies + optional-dependencies; "
                       "make lock; tests/test_lock.py)\n")
    Path(lock).write_text("".join(lines))
    return digest


def machine_info() -> Dict[str, Any]:
    """The machine and software of this process (cuda_device: None without one)."""
    import torch

    return dict(cpu_model=cpu_model(), cpu_capability=torch.backends.cpu.get_cpu_capability(), cpu_flags=cpu_flags(),
                cpu_count=os.cpu_count(), threads=torch.get_num_threads(), os=platform.platform(),
                python=platform.python_version(), versions=versions(),
                torch_build=torch.__version__,  # with its local tag (e.g. +cu130, +cpu): which wheel of that version
                lock_sha256=file_sha256(LOCK),
                cuda_device=torch.cuda.get_device_name() if torch.cuda.is_available() else None)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stamp-lock", metavar="LOCK", help="write pyproject.toml's dependency hash into LOCK's header")
    args = ap.parse_args(argv)
    print(f"{args.stamp_lock}: pyproject-deps-sha256 {stamp_lock(args.stamp_lock)}" if args.stamp_lock
          else json.dumps(machine_info(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
