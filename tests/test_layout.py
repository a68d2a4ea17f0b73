"""The layout: the ODE-ViT layer (odevit/*.py) never imports the lab (odevit/repro/), and no odevit module imports
itself back through a circle. The import graph is read from the AST, function-level imports included (a lazy
import is still a dependency). The module map (docs/pipeline.md) lists every module (odevit.repro.pages.module_map)."""
from __future__ import annotations

import ast
import graphlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Set

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CORE = {"__init__", "layers", "model", "solvers", "schedule", "losses", "teacher", "hub"}


def import_graph(pkg_dir: Path) -> Dict[str, Set[str]]:
    """Module -> the modules of the same package it imports anywhere in its source (relative or absolute)."""
    pkg = pkg_dir.name
    mods = {}
    for path in pkg_dir.rglob("*.py"):
        parts = list(path.relative_to(pkg_dir.parent).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_init else parts)
        mods[name] = (path, name if is_init else name.rpartition(".")[0])
    graph: Dict[str, Set[str]] = {}
    for name, (path, own) in mods.items():
        deps = set()
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _type_checking(block.test)
                       for stmt in block.body for n in ast.walk(stmt)}  # `if TYPE_CHECKING:` imports never run
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = own.split(".")[: len(own.split(".")) - node.level + 1]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t not in (name, pkg):  # `from . import x` reaches x, not the package's __init__
                    deps.add(t)
        graph[name] = deps
    return graph


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def reach(graph: Dict[str, Set[str]], module: str) -> Set[str]:
    """Every module `module` imports, directly or through others."""
    seen: Set[str] = set()
    todo = [module]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def cycle(graph: Dict[str, Set[str]]):
    """One import circle as a list of modules, or None."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return e.args[1]
    return None


def test_graph_and_cycle_on_a_known_package(tmp_path):
    """Hand-built package: a lazy import inside a function and a two-level relative import close a circle."""
    p = tmp_path / "pkg"
    (p / "sub").mkdir(parents=True)
    (p / "__init__.py").write_text("from . import a\n")
    (p / "a.py").write_text("import os\n\ndef f():\n    from .sub import b\n    return b\n")
    (p / "sub" / "__init__.py").write_text("")
    (p / "sub" / "b.py").write_text("from ..c import x\n")
    (p / "c.py").write_text("import pkg.a\nx = 1\n")
    (p / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nelse:\n    from . import c\n")
    g = import_graph(p)
    assert g == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.sub.b"}, "pkg.sub": set(), "pkg.sub.b": {"pkg.c"},
                 "pkg.c": {"pkg.a"}, "pkg.d": {"pkg.c"}}  # d's typing-only import of a is no dependency
    assert set(cycle(g)) == {"pkg.a", "pkg.sub.b", "pkg.c"}
    assert reach(g, "pkg.d") == {"pkg.c", "pkg.a", "pkg.sub.b"}
    (p / "c.py").write_text("x = 1\n")
    assert cycle(import_graph(p)) is None


def test_the_layer_is_exactly_the_core_files():
    top = {f.stem for f in (ROOT / "odevit").glob("*.py")}
    assert top == CORE, (f"odevit/ holds the ODE-ViT layer only ({sorted(CORE)}); lab modules go to odevit/repro/: "
                         f"extra {sorted(top - CORE)}, missing {sorted(CORE - top)}")
    assert (ROOT / "odevit" / "repro" / "__init__.py").is_file()


def test_the_layer_never_imports_the_lab():
    g = import_graph(ROOT / "odevit")
    bad = {m: sorted(d for d in deps if d.startswith("odevit.repro")) for m, deps in g.items()
           if not m.startswith("odevit.repro")}
    assert {m: d for m, d in bad.items() if d} == {}


def test_import_odevit_loads_no_lab_module():
    code = ("import sys, timm, odevit; timm.create_model('odevit_small_patch7_28'); "
            "print(sorted(m for m in sys.modules if m.startswith('odevit.repro')))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_no_import_circle():
    assert cycle(import_graph(ROOT / "odevit")) is None


def test_the_house_keeps_its_size():
    """The package's shape as the one-pipeline issue fixed it: the whole package <= 25 files on <= 6 levels of its
    import graph (a module's level: 1 + the highest level it imports), odevit/repro/ <= 20 files and <= 6,000 lines."""
    from functools import lru_cache

    graph = import_graph(ROOT / "odevit")

    @lru_cache(maxsize=None)
    def level(m: str) -> int:
        return 1 + max((level(d) for d in graph.get(m, ()) if d != m), default=0)

    lab = sorted((ROOT / "odevit/repro").glob("*.py"))
    assert len(list((ROOT / "odevit").rglob("*.py"))) <= 25 and max(map(level, graph)) <= 6, \
        {m: level(m) for m in graph if level(m) > 5}
    assert len(lab) <= 20 and sum(len(f.read_text().splitlines()) for f in lab) <= 6000


def test_hub_data_table_agrees_with_the_lab():
    """The layer keeps its own copy of the rows of data.INFO it needs (it must not import the lab)."""
    from odevit import hub
    from odevit.repro import data

    assert hub.DATA_INFO
    for name, row in hub.DATA_INFO.items():
        assert data.INFO[name] == row, name


def test_fingerprint_covers_the_training_source(tmp_path, monkeypatch):
    """train.fingerprint hashes the layer and the lab's training files: an edit to either, or a new module of the
    layer, changes it; an edit to the report side (verdicts, pages) does not, so an interrupted run stays resumable."""
    from odevit.repro import train

    copy = tmp_path / "odevit"
    shutil.copytree(ROOT / "odevit", copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(train, "__file__", str(copy / "repro" / "train.py"))
    seen = [train.fingerprint("cfg")]
    for path in (copy / "layers.py", copy / "repro" / "train.py", copy / "repro" / "pipeline.py"):
        path.write_text(path.read_text() + "\n# edited\n")
        seen.append(train.fingerprint("cfg"))
    (copy / "new_layer_module.py").write_text("")
    seen.append(train.fingerprint("cfg"))
    assert len(set(seen)) == 5
    for path in (copy / "repro" / "verdicts.py", copy / "repro" / "pages.py"):
        path.write_text(path.read_text() + "\n# edited\n")
    assert train.fingerprint("cfg") == seen[-1]  # untouched by the report side, and deterministic


def test_fingerprint_sources_are_the_training_notebooks_dependencies():
    """The files a checkpoint's resume is keyed on are among what every training notebook's DVC stage depends on:
    those stages depend on the whole package (odevit/), which holds the layer and every training source."""
    from odevit.repro import train

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name in ("02_teacher", "03_budget", "04_steps", "05_design"):
        assert "odevit" in stages[name]["deps"], name
    assert all((ROOT / "odevit" / rel).is_file() for rel in train.TRAINING_SOURCES)


@pytest.mark.parametrize("cmd", [["-m", "odevit.repro.config", "01_data"], ["-m", "odevit.repro.weights", "--list"]])
def test_stage_commands_run_from_the_new_paths(cmd):
    p = subprocess.run([sys.executable, *cmd], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


# Reading results apart from training (issue 53): the modules that read, judge and narrate results, and the two
# below them (files: atomic JSON/CSV/text/figures; results: collecting runs), never import the code that trains.
READERS = ("files", "plan", "verdicts", "pages", "figures")
TRAINING = ("train", "pipeline", "fast", "weights", "dynamics", "notebook")  # runtime (processes, precision) sits below config
LAYER = ("model", "layers", "losses", "teacher", "hub", "schedule", "solvers")
# figures takes chdir_root from config.py, which checks dataset and solver names against data.INFO and
# solvers.SOLVERS (data and solvers import torch). The other readers import neither torch nor the layer when imported.
THROUGH_CONFIG = {"figures"}
DRAWS_TENSORS: set = set()  # a reader that draws tensors (torch, never the layer): none since dynamics holds its figures


def test_readers_and_training_modules_are_all_the_lab():
    lab = {f.stem for f in (ROOT / "odevit" / "repro").glob("*.py")}
    assert set(READERS) <= lab and set(TRAINING) <= lab and not set(READERS) & set(TRAINING)


@pytest.mark.parametrize("module", READERS)
def test_a_reader_never_imports_the_training_code(module):
    """Read from the source, lazy imports inside functions included, through every module in between."""
    reached = reach(import_graph(ROOT / "odevit"), f"odevit.repro.{module}")
    assert sorted(reached & {f"odevit.repro.{m}" for m in TRAINING}) == []


# The packages' own __init__ files are skipped (`import odevit` itself loads the layer, torch and timm: it registers
# the models with timm), so what a reader loads is what the reader imports.
READER_IMPORT = """
import importlib, json, sys, types
for name, path in (("odevit", "odevit"), ("odevit.repro", "odevit/repro")):
    pkg = types.ModuleType(name)
    pkg.__path__ = [path]
    sys.modules[name] = pkg
importlib.import_module("odevit.repro." + sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m == "torch" or m.startswith("odevit."))))
"""


@pytest.fixture(scope="module")
def reader_imports():
    """Every reader imported in a fresh interpreter of its own, all at once (each is one single-threaded import,
    5-9 s on 2 cores; one after another they took 90 s of the suite): module -> (return code, stdout, stderr)."""
    procs = {m: subprocess.Popen([sys.executable, "-c", READER_IMPORT, m], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for m in READERS}
    out = {m: p.communicate(timeout=300) for m, p in procs.items()}
    return {m: (procs[m].returncode, *out[m]) for m in procs}


@pytest.mark.parametrize("module", READERS)
def test_importing_a_reader_loads_no_training_code(module, reader_imports):
    """In a fresh interpreter: none of the training modules, no ODE-ViT layer module, and no torch (except through
    config for the plan's readers, see THROUGH_CONFIG) is loaded by importing the reader."""
    rc, out, err = reader_imports[module]
    assert rc == 0, err
    loaded = set(json.loads(out))
    assert f"odevit.repro.{module}" in loaded  # the stub packages did load the module itself
    bad = {f"odevit.repro.{m}" for m in TRAINING} | {f"odevit.{m}" for m in LAYER if m != "solvers"}
    if module not in THROUGH_CONFIG:
        bad |= {"odevit.solvers"} | (set() if module in DRAWS_TENSORS else {"torch"})
    assert sorted(loaded & bad) == []
