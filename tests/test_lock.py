"""requirements.lock agrees with pyproject.toml (fast, offline): every requirement pinned inside its specifier, every
pin hashed, the lock stamped with the dependency section it was made from; and the key packages installed here are
the lock's versions."""
import glob
import hashlib
import os
import re
from importlib import metadata
from typing import Any, Dict, List

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from odevit.repro import machine


def read_lock(lock: os.PathLike | str = machine.LOCK) -> Dict[str, Dict[str, Any]]:
    """The lock's pins: {canonical name: {"version": V, "hashes": [sha256, ...]}}."""
    pins: Dict[str, Dict[str, Any]] = {}
    current = None
    with open(lock) as f:
        for line in f:
            if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", line):  # name[x]==V
                current = canonicalize_name(m.group(1))
                pins[current] = {"version": m.group(3), "hashes": []}
            elif current and line.strip().startswith("--hash=sha256:"):
                pins[current]["hashes"].append(line.split("sha256:")[1].split()[0])
    return pins


def lock_problems(lock: os.PathLike | str = machine.LOCK, pyproject: os.PathLike | str = machine.PYPROJECT) -> List[str]:
    """Where the lock and pyproject.toml disagree, one line each: missing or off-specifier pins, hashes, stamp."""
    name, pins, out = canonicalize_name(machine._project(pyproject)["name"]), read_lock(lock), []
    for extra, reqs in machine.pyproject_deps(pyproject).items():
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
    stamp, digest = machine.lock_stamp(lock), machine.pyproject_deps_sha256(pyproject)
    if stamp != digest:
        out.append(f"lock: made from another pyproject dependency section (stamp {stamp}, pyproject now {digest}; "
                   "make lock)")
    return out


PYPROJECT = """[project]
name = "odevit"
dependencies = ["torch>=2.5", "numpy>=1.24"]
[project.optional-dependencies]
pipeline = ["dvc>=3.50"]
dev = ["odevit[pipeline]", "pytest>=8"]
"""
LOCK = """# pip-compile header
#
torch==2.14.1 \\
    --hash=sha256:aa \\
    --hash=sha256:bb
    # via odevit (pyproject.toml)
numpy==2.4.6 \\
    --hash=sha256:cc
dvc==3.67.1 \\
    --hash=sha256:dd
pytest==9.0.1 \\
    --hash=sha256:ee
"""


@pytest.fixture
def pair(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "requirements.lock").write_text(LOCK)
    machine.stamp_lock(tmp_path / "requirements.lock", tmp_path / "pyproject.toml")
    return tmp_path / "requirements.lock", tmp_path / "pyproject.toml"


def test_fabricated_pair_agrees_then_each_disagreement_is_named(pair):
    lock, pyproject = pair
    assert read_lock(lock)["torch"] == {"version": "2.14.1", "hashes": ["aa", "bb"]}
    assert lock_problems(lock, pyproject) == []
    # a specifier the pin does not satisfy, in an extra
    pyproject.write_text(PYPROJECT.replace("pytest>=8", "pytest>=10"))
    machine.stamp_lock(lock, pyproject)
    assert lock_problems(lock, pyproject) == [
        "pyproject extra dev: 'pytest>=10': the lock pins 9.0.1 (make lock)"]
    # a new dependency the lock lacks
    pyproject.write_text(PYPROJECT.replace('"numpy>=1.24"', '"numpy>=1.24", "scipy>=1.10"'))
    machine.stamp_lock(lock, pyproject)
    assert lock_problems(lock, pyproject) == [
        "pyproject dependencies: 'scipy>=1.10' is not in the lock (make lock)"]
    # pyproject edited after the lock was made, even where the pins still satisfy it
    pyproject.write_text(PYPROJECT.replace("torch>=2.5", "torch>=2.6"))
    problems = lock_problems(lock, pyproject)
    assert len(problems) == 1 and problems[0].startswith("lock: made from another pyproject dependency section")
    # a pin without a hash
    machine.stamp_lock(lock, pyproject)
    lock.write_text(lock.read_text().replace("numpy==2.4.6 \\\n    --hash=sha256:cc\n", "numpy==2.4.6\n"))
    assert lock_problems(lock, pyproject) == ["lock: numpy==2.4.6 has no --hash"]


def test_repository_lock_agrees_with_pyproject():
    assert lock_problems() == []


def test_installed_packages_are_the_locked_versions():
    pins = read_lock()
    for name in ("torch", "torchvision", "timm", "numpy", "scipy", "pandas", "dvc"):
        assert metadata.version(name) == pins[name]["version"], f"{name}: installed {metadata.version(name)}, " \
            f"lock {pins[name]['version']} (make install)"


def test_local_torch_wheel_is_in_the_lock():
    """The torch wheel this machine's pip installs from disk is one whose sha256 the lock accepts."""
    version = read_lock()["torch"]["version"]
    wheels = [w for d in ("/opt/pypi-more/files", "/opt/wheels")
              for w in glob.glob(os.path.join(d, f"torch-{version}-*.whl"))]
    if not wheels:
        pytest.skip(f"no local torch {version} wheel on this machine")
    digest = hashlib.sha256(open(wheels[0], "rb").read()).hexdigest()
    assert digest in read_lock()["torch"]["hashes"], wheels[0]
