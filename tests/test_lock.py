"""requirements.lock agrees with pyproject.toml (fast, offline): every requirement pinned inside its specifier, every
pin hashed, the lock stamped with the dependency section it was made from; and the key packages installed here are
the lock's versions."""
import glob
import hashlib
import os
from importlib import metadata

import pytest

from odevit.repro import machine

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
    assert machine.read_lock(lock)["torch"] == {"version": "2.14.1", "hashes": ["aa", "bb"]}
    assert machine.lock_problems(lock, pyproject) == []
    # a specifier the pin does not satisfy, in an extra
    pyproject.write_text(PYPROJECT.replace("pytest>=8", "pytest>=10"))
    machine.stamp_lock(lock, pyproject)
    assert machine.lock_problems(lock, pyproject) == [
        "pyproject extra dev: 'pytest>=10': the lock pins 9.0.1 (make lock)"]
    # a new dependency the lock lacks
    pyproject.write_text(PYPROJECT.replace('"numpy>=1.24"', '"numpy>=1.24", "scipy>=1.10"'))
    machine.stamp_lock(lock, pyproject)
    assert machine.lock_problems(lock, pyproject) == [
        "pyproject dependencies: 'scipy>=1.10' is not in the lock (make lock)"]
    # pyproject edited after the lock was made, even where the pins still satisfy it
    pyproject.write_text(PYPROJECT.replace("torch>=2.5", "torch>=2.6"))
    problems = machine.lock_problems(lock, pyproject)
    assert len(problems) == 1 and problems[0].startswith("lock: made from another pyproject dependency section")
    # a pin without a hash
    machine.stamp_lock(lock, pyproject)
    lock.write_text(lock.read_text().replace("numpy==2.4.6 \\\n    --hash=sha256:cc\n", "numpy==2.4.6\n"))
    assert machine.lock_problems(lock, pyproject) == ["lock: numpy==2.4.6 has no --hash"]


def test_repository_lock_agrees_with_pyproject():
    assert machine.lock_problems() == []


def test_installed_packages_are_the_locked_versions():
    pins = machine.read_lock()
    for name in ("torch", "torchvision", "timm", "numpy", "scipy", "pandas", "dvc"):
        assert metadata.version(name) == pins[name]["version"], f"{name}: installed {metadata.version(name)}, " \
            f"lock {pins[name]['version']} (make install)"


def test_local_torch_wheel_is_in_the_lock():
    """The torch wheel this machine's pip installs from disk is one whose sha256 the lock accepts."""
    version = machine.read_lock()["torch"]["version"]
    wheels = [w for d in ("/opt/pypi-more/files", "/opt/wheels")
              for w in glob.glob(os.path.join(d, f"torch-{version}-*.whl"))]
    if not wheels:
        pytest.skip(f"no local torch {version} wheel on this machine")
    digest = hashlib.sha256(open(wheels[0], "rb").read()).hexdigest()
    assert digest in machine.read_lock()["torch"]["hashes"], wheels[0]
