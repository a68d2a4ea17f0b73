"""odevit.repro.machine: the record of the machine and software a result came from."""
import json
import os
import time

import pytest
import torch

from odevit.repro import machine, results_pages

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile amx_int8
processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
"""


def test_cpu_model_and_flags_from_cpuinfo():
    assert machine.cpu_model(CPUINFO) == "Intel(R) Xeon(R) Platinum 8480+"
    assert machine.cpu_flags(CPUINFO) == ["amx_bf16", "amx_int8", "amx_tile", "avx2", "avx512_bf16", "avx512f"]
    assert machine.cpu_flags("model name\t: AMD EPYC\nflags\t: fpu avx avx2\n") == ["avx2"]
    assert machine.cpu_flags("") == []


def test_machine_info_records_this_process():
    info = machine.machine_info()
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert info["threads"] == torch.get_num_threads() and info["torch_build"] == torch.__version__
    assert torch.__version__.startswith(info["versions"]["torch"])
    assert set(info["versions"]) == set(machine.PACKAGES) and info["versions"]["odevit"] is not None
    assert info["lock_sha256"] == machine.file_sha256(machine.LOCK)
    assert info["cuda_device"] == (torch.cuda.get_device_name() if torch.cuda.is_available() else None)
    json.dumps(info)  # goes into run.json and bench.json as is


def test_same_kernels():
    a = {"cpu_model": "AMD EPYC", "cpu_capability": "AVX2", "threads": 2, "lock_sha256": "x"}
    assert machine.same_kernels(a, dict(a)) is True
    assert machine.same_kernels(a, {**a, "cpu_capability": "AVX512"}) is False
    assert machine.same_kernels(a, {**a, "threads": 16}) is False
    assert machine.same_kernels(a, {}) is None


def test_stamp_lock_writes_the_dependency_hash_after_the_header(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["torch>=2.5"]\n'
                         '[project.optional-dependencies]\ndev = ["pytest>=8"]\n')
    lock = tmp_path / "requirements.lock"
    lock.write_text("# made by pip-compile\n#\ntorch==2.14.1 \\\n    --hash=sha256:00\n")
    digest = machine.stamp_lock(lock, pyproject)
    assert digest == machine.pyproject_deps_sha256(pyproject) == machine.lock_stamp(lock)
    lines = lock.read_text().splitlines()
    assert lines[2].startswith(f"{machine.STAMP} {digest}") and lines[3] == "torch==2.14.1 \\"
    machine.stamp_lock(lock, pyproject)  # a second stamp replaces the first
    assert lock.read_text().count(machine.STAMP) == 1
    pyproject.write_text(pyproject.read_text().replace("pytest>=8", "pytest>=9"))
    assert machine.pyproject_deps_sha256(pyproject) != digest


def test_record_run_writes_machine_info(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    t0 = time.time() - 5
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    os.utime(tmp_path / "dvc.lock", (t0 + 1, t0 + 1))
    assert results_pages.record_run(t0)
    run = json.loads((tmp_path / "results/run.json").read_text())
    assert run["machine_info"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert run["wall_s"] >= 5
