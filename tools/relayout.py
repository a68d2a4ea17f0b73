#!/usr/bin/env python3
"""Split the flat `odevit/` package into the ODE-ViT layer (`odevit/`) and the reproduction lab (`odevit/repro/`).

    python tools/relayout.py            # in the repository root; --root DIR for another checkout
    python tools/relayout.py --check    # change nothing: print what is left to do, exit 1 if anything is

Idempotent (a second run changes nothing) and tolerant of edits to the functions it moves: definitions move by
name, with their line ranges taken from `ast`, never by line numbers. Standard library only. Steps:

1. every `odevit/*.py` not in CORE (the layer) moves to `odevit/repro/` (new modules included);
2. relative imports in the moved modules are re-levelled (`from .model` -> `from ..model`, `from . import a, b`
   split into lab and core parts); `from odevit import a, b` is split the same way everywhere;
3. import circles are broken by moving whole definitions: config <-> study (cell_config, preset_overrides,
   SWITCH_KEYS, CELL_KEYS, EPOCH_KEYS -> repro/config.py, re-exported by study), objectives <-> train
   (PRECISION, set_precision, autocast -> repro/precision.py, re-exported by train);
4. the layer stops importing the lab: hub.evaluate_tag -> repro/evaluate.py; hub's use of data.INFO becomes its
   own DATA_INFO (values copied from data.INFO; tests/test_layout.py checks they agree);
5. train.fingerprint hashes every .py under the whole package (recursive, sorted relative paths);
6. text references: `odevit.<lab>` -> `odevit.repro.<lab>` and `odevit/<lab>.py` -> `odevit/repro/<lab>.py` in
   *.py, *.md, *.ipynb (raw JSON lines, so nbformat's formatting is kept), *.yaml, *.toml, Makefile, .ci/run;
   dvc.yaml stages that depend on train.py / publish.py also depend on precision.py / evaluate.py;
7. prints the module map (first docstring line of each module) and writes it to docs/layout.md;
8. checks: the layer imports nothing of the lab, no import circle among odevit modules (exit 1 otherwise).

After running: `git add -A odevit tests notebooks docs dvc.yaml` (git sees the moves as renames).
"""
from __future__ import annotations

import argparse
import ast
import graphlib
import json
import os
import re
import sys
from typing import Dict, Iterable, List, Optional, Set, Tuple

PKG, LAB = "odevit", "repro"
CORE = ("__init__", "layers", "model", "solvers", "schedule", "losses", "teacher", "hub")
LAB_DOC = ('"""The reproduction lab: configs, data, training, DVC stages, study, statistics, reports, README, '
           'benchmark.\n\nEverything here may import the ODE-ViT layer (`odevit`); the layer never imports '
           'this package\n(tests/test_layout.py). Module map: docs/layout.md.\n"""\n')
PRECISION_DOC = ('"""Process-wide numeric precision policy (fp32 / bf16 autocast), shared by training, evaluation '
                 'and\nthe teacher caches; its own module so that objectives need not import train.\n"""\n'
                 "from __future__ import annotations\n")
# (source module, destination module, names, the names the source re-exports (its public API stays), docstring if
# the destination is new). Importers inside the package are pointed at the destination.
MOVES = [
    ("study", "config", ["CELL_KEYS", "EPOCH_KEYS", "preset_overrides", "SWITCH_KEYS", "cell_config"],
     ["CELL_KEYS", "EPOCH_KEYS", "SWITCH_KEYS", "cell_config", "preset_overrides"], None),
    ("train", "precision", ["PRECISION", "set_precision", "autocast"], ["autocast", "set_precision"], PRECISION_DOC),
    ("hub", "evaluate", ["evaluate_tag"], [], None),  # the layer must not import the lab: no re-export
]
# dvc.yaml: a stage depending on the first file also depends on the second (where the moved code now lives)
DVC_DEPS = [("train", "precision"), ("publish", "evaluate")]
TEXT_EXT = (".py", ".md", ".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".txt")
TEXT_NAMES = ("Makefile", "run")
SKIP_DIRS = {".git", ".dvc", ".venv", "outputs", "results", "checkpoints", "data", "weights", "__pycache__",
             "node_modules", ".ipynb_checkpoints", ".pytest_cache"}
WIDTH = 120

notes: List[str] = []  # what could not be done automatically


# ---------------------------------------------------------------- paths and module names

def pkg_dir(root: str) -> str:
    return os.path.join(root, PKG)


def lab_dir(root: str) -> str:
    return os.path.join(root, PKG, LAB)


def lab_modules(root: str) -> Set[str]:
    """Short names of the lab modules: odevit/*.py not in CORE, odevit/repro/*.py, and the destinations of MOVES."""
    names = {f[:-3] for f in os.listdir(pkg_dir(root)) if f.endswith(".py") and f[:-3] not in CORE}
    if os.path.isdir(lab_dir(root)):
        names |= {f[:-3] for f in os.listdir(lab_dir(root)) if f.endswith(".py") and f != "__init__.py"}
    return names | {m[1] for m in MOVES if m[1] not in CORE}


def full(mod: str, lab: Set[str]) -> str:
    """'train' -> 'odevit.repro.train', 'hub' -> 'odevit.hub'."""
    return f"{PKG}.{LAB}.{mod}" if mod in lab else f"{PKG}.{mod}"


def path_of(root: str, fullname: str) -> str:
    return os.path.join(root, *fullname.split(".")) + ".py"


def module_name(root: str, path: str) -> Tuple[str, str]:
    """(module, package it lives in) of a file under odevit/; ('', '') elsewhere."""
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    if not rel.startswith(PKG + "/"):
        return "", ""
    mod = rel[:-3].replace("/", ".")
    if mod.endswith(".__init__"):
        mod = mod[: -len(".__init__")]
        return mod, mod
    return mod, mod.rpartition(".")[0]


def resolve(node: ast.ImportFrom, pkg: str) -> str:
    """The absolute module of a `from X import ...` written in package `pkg`."""
    if not node.level:
        return node.module or ""
    parts = pkg.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def relativize(absmod: str, pkg: str) -> str:
    """The relative spelling of `absmod` from package `pkg` ('odevit.hub' from 'odevit.repro' -> '..hub')."""
    if absmod != PKG and not absmod.startswith(PKG + "."):
        return absmod
    cur, tgt = pkg.split("."), absmod.split(".")
    k = 0
    while k < min(len(cur), len(tgt)) and cur[k] == tgt[k]:
        k += 1
    return "." * (len(cur) - k + 1) + ".".join(tgt[k:])


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def write(path: str, text: str) -> bool:
    if os.path.exists(path) and read(path) == text:
        return False
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return True


# ---------------------------------------------------------------- editing import statements

def fmt_from(indent: str, mod: str, names: List[Tuple[str, Optional[str]]]) -> str:
    items = [n if a is None else f"{n} as {a}" for n, a in names]
    line = f"{indent}from {mod} import {', '.join(items)}"
    if len(line) <= WIDTH:
        return line
    head = f"{indent}from {mod} import ("
    out, cur = [], head
    for i, it in enumerate(items):
        piece = it + (", " if i < len(items) - 1 else ")")
        if len(cur) + len(piece.rstrip()) > WIDTH and cur.strip() not in ("", head.strip()):
            out.append(cur.rstrip())
            cur = " " * len(head) + piece
        else:
            cur += piece
    out.append(cur)
    return "\n".join(out)


def _isort(item: Tuple[str, Optional[str]]) -> Tuple[int, str]:
    """isort's order within one `from` import: CONSTANTS, then Classes, then functions and modules."""
    n = item[0]
    return (0 if n.isupper() and len(n) > 1 else 1 if n[:1].isupper() else 2, n.lower())


def _internal(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] == PKG)


def _stdlib(node: ast.stmt) -> bool:
    mod = node.names[0].name if isinstance(node, ast.Import) else (node.module or "")
    return mod.split(".")[0] in sys.stdlib_module_names


def edit_nodes(text: str, edits: List[Tuple[ast.stmt, Optional[List[str]]]]) -> str:
    """Replace each statement by the given lines (None: delete it), keeping a trailing comment on its last line."""
    lines = text.splitlines(keepends=True)
    for node, new in sorted(edits, key=lambda e: -e[0].lineno):
        first, last = node.lineno - 1, node.end_lineno - 1
        rest = lines[last][node.end_col_offset:].rstrip("\n")
        comment = rest if rest.strip().startswith("#") else ""
        if new is None:
            repl: List[str] = []
        else:
            block = "\n".join(new)
            blines = block.split("\n")
            blines[0] += comment
            repl = [b + "\n" for b in blines]
        lines[first:last + 1] = repl
        if new is None and first < len(lines) and not lines[first].strip() and first > 0 \
                and lines[first - 1].rstrip().endswith(":"):
            del lines[first]  # a deleted first statement of a block leaves no blank line behind
    return "".join(lines)


def imports_at_top(tree: ast.Module) -> List[ast.stmt]:
    return [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def add_imports(text: str, pkg: str, specs: List[Tuple[str, str, Optional[str]]], plain: List[str]) -> str:
    """Add `from ABS import name [as a]` (spelt relative to `pkg`) and plain `import x` lines to a module's top
    imports, extending an existing `from` statement of the same module where there is one."""
    if not specs and not plain:
        return text
    tree = ast.parse(text)
    top = imports_at_top(tree)
    by_mod: Dict[str, List[Tuple[str, Optional[str]]]] = {}
    for absmod, name, asname in specs:
        if (name, asname) not in by_mod.setdefault(absmod, []):
            by_mod[absmod].append((name, asname))
    edits, new_lines, new_pkg = [], list(plain), []
    for absmod, names in by_mod.items():
        existing = [n for n in top if isinstance(n, ast.ImportFrom) and resolve(n, pkg) == absmod
                    and not any(a.name == "*" for a in n.names)]
        if existing:
            node = existing[0]
            have = [(a.name, a.asname) for a in node.names]
            merged = have + [x for x in names if x not in have]
            if absmod == "__future__":
                continue
            edits.append((node, [fmt_from(" " * node.col_offset, relativize(absmod, pkg) if node.level else absmod,
                                          sorted(merged, key=_isort))]))
        else:
            internal = absmod == PKG or absmod.startswith(PKG + ".")
            (new_pkg if internal else new_lines).append(fmt_from("", relativize(absmod, pkg), sorted(names, key=_isort)))
    text = edit_nodes(text, edits)
    # third-party after the last third-party import, package imports after the last import, blank lines between
    for group, internal in ((new_lines, False), (new_pkg, True)):
        if not group:
            continue
        tree = ast.parse(text)
        top = imports_at_top(tree)
        lines = text.splitlines(keepends=True)
        future = [n for n in top if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
        ext = [n for n in top if not _internal(n) and n not in future]
        third = [n for n in ext if not _stdlib(n)]
        anchor = (top[-1] if top else None) if internal else \
            (third or ext or future or [None])[-1]
        if anchor is None:
            doc = tree.body[0] if tree.body and isinstance(tree.body[0], ast.Expr) else None
            at, sep = (doc.end_lineno if doc else 0), False
        else:
            at = anchor.end_lineno
            sep = anchor in future or (internal and not _internal(anchor)) or (not internal and not third)
        block = (["\n"] if sep else []) + [ln + "\n" for ln in group]
        if not internal and ext == [] and any(_internal(n) for n in top):
            block.append("\n")
        lines[at:at] = block
        text = "".join(lines)
    return text


# ---------------------------------------------------------------- step 1-2: move files, re-level imports

def move_files(root: str, lab: Set[str]) -> List[str]:
    moved = []
    os.makedirs(lab_dir(root), exist_ok=True)
    init = os.path.join(lab_dir(root), "__init__.py")
    if not os.path.exists(init):
        write(init, LAB_DOC)
    for mod in sorted(lab):
        src, dst = os.path.join(pkg_dir(root), mod + ".py"), os.path.join(lab_dir(root), mod + ".py")
        if os.path.exists(src):
            if os.path.exists(dst):
                notes.append(f"{src}: both it and {dst} exist; merge by hand")
                continue
            os.rename(src, dst)
            moved.append(mod)
    return moved


def split_names(names: List[Tuple[str, Optional[str]]], lab: Set[str]):
    return [x for x in names if x[0] in lab], [x for x in names if x[0] not in lab]


def relevel_imports(path: str, root: str, lab: Set[str]) -> bool:
    """In a module under odevit/: point every package-internal `from` import at where its target now lives."""
    text = read(path)
    mod, pkg = module_name(root, path)
    tree = ast.parse(text)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not (node.level or (node.module or "").split(".")[0] == PKG):
            continue
        absmod = resolve(node, pkg)
        indent = " " * node.col_offset
        names = [(a.name, a.asname) for a in node.names]
        keep_abs = node.level == 0
        spell = (lambda m: m) if keep_abs else (lambda m: relativize(m, pkg))
        if absmod in (PKG, f"{PKG}.{LAB}"):  # from . import a, b  /  from odevit import a, b
            labn, coren = split_names(names, lab)
            parts = []
            if coren:
                parts.append(fmt_from(indent, spell(PKG), coren))
            if labn:
                parts.append(fmt_from(indent, spell(f"{PKG}.{LAB}"), labn))
            new = "\n".join(parts)
        else:
            short = absmod.split(".")[-1]
            parent = absmod.rpartition(".")[0]
            if parent not in (PKG, f"{PKG}.{LAB}"):
                continue
            target = full(short, lab) if short in lab or short in CORE else absmod
            new = fmt_from(indent, spell(target), names)
        if not _same_stmt(node, new):
            edits.append((node, [new]))
    if not edits:
        return False
    return write(path, edit_nodes(text, edits))


def _same_stmt(node: ast.ImportFrom, new: str) -> bool:
    """True where `new` is the same single import (same level, module and names) as `node`."""
    try:
        body = ast.parse(new.strip()).body
    except SyntaxError:
        return False
    if len(body) != 1 or not isinstance(body[0], ast.ImportFrom):
        return False
    b = body[0]
    return (b.level, b.module, [(a.name, a.asname) for a in b.names]) == \
        (node.level, node.module, [(a.name, a.asname) for a in node.names])


# ---------------------------------------------------------------- step 3-4: move definitions between modules

def top_bindings(tree: ast.Module) -> Dict[str, ast.stmt]:
    out: Dict[str, ast.stmt] = {}
    for node in tree.body:
        for name in bound(node):
            out.setdefault(name, node)
    return out


def bound(node: ast.stmt) -> Set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.Import):
        return {(a.asname or a.name.split(".")[0]) for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {(a.asname or a.name) for a in node.names}
    return set()


def used_names(nodes: Iterable[ast.AST]) -> Set[str]:
    out = set()
    for n in nodes:
        for x in ast.walk(n):
            if isinstance(x, ast.Name):
                out.add(x.id)
    return out


def node_span(lines: List[str], node: ast.stmt) -> Tuple[int, int]:
    """0-based [start, end) lines of a top-level definition, with its decorators and the comment lines above it."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#") and not lines[start - 1].startswith(" "):
        start -= 1
    return start, node.end_lineno


def move_defs(root: str, lab: Set[str], src: str, dst: str, names: List[str], reexport: List[str],
              new_doc: Optional[str]) -> bool:
    src_full, dst_full = full(src, lab), full(dst, lab)
    src_path, dst_path = path_of(root, src_full), path_of(root, dst_full)
    src_text = read(src_path)
    tree = ast.parse(src_text)
    nodes = [n for n in tree.body if bound(n) & set(names) and not isinstance(n, (ast.Import, ast.ImportFrom))]
    if not nodes:
        return False
    extra = set().union(*(bound(n) for n in nodes)) - set(names)
    if extra:
        notes.append(f"{src_path}: {sorted(extra)} share a statement with a moved name; moved along")
    moved_names = set(names) | extra
    src_pkg = src_full.rpartition(".")[0]
    dst_pkg = dst_full.rpartition(".")[0]
    if not os.path.exists(dst_path):
        write(dst_path, new_doc or f'"""{dst}."""\n')
    dst_text = read(dst_path)
    dst_tree = ast.parse(dst_text)
    dst_bound = set(top_bindings(dst_tree))
    src_bound = top_bindings(tree)

    lines = src_text.splitlines(keepends=True)
    spans = [node_span(lines, n) for n in nodes]
    chunk = ""
    for i, (a, b) in enumerate(spans):  # neighbours in the source keep their spacing; others get two blank lines
        gap = "".join(lines[spans[i - 1][1]:a]) if i else ""
        chunk += ("" if not i else "\n" + gap if gap.strip() == "" and gap.count("\n") <= 2 else "\n\n\n")
        chunk += "".join(lines[a:b]).rstrip("\n")
    chunk += "\n"

    specs: List[Tuple[str, str, Optional[str]]] = []
    plain: List[str] = []
    self_aliases: List[str] = []
    needed = sorted((used_names(nodes) & set(src_bound)) - moved_names)
    for name in needed:
        st = src_bound[name]
        if isinstance(st, ast.ImportFrom):
            a = next(a for a in st.names if (a.asname or a.name) == name)
            absmod = resolve(st, src_pkg)
            if f"{absmod}.{a.name}" == dst_full:
                self_aliases.append(name)
                continue
            if name not in dst_bound:
                specs.append((absmod, a.name, a.asname))
        elif isinstance(st, ast.Import):
            a = next(a for a in st.names if (a.asname or a.name.split(".")[0]) == name)
            if name not in dst_bound:
                plain.append(f"import {a.name}" + (f" as {a.asname}" if a.asname else ""))
        elif name not in dst_bound:
            specs.append((src_full, name, None))
    for alias in self_aliases:
        chunk = re.sub(rf"\b{alias}\.", "", chunk)
    # the destination's own references through its import of the source (hub.evaluate_tag -> evaluate_tag)
    for name, st in top_bindings(dst_tree).items():
        if isinstance(st, ast.ImportFrom):
            a = next(a for a in st.names if (a.asname or a.name) == name)
            if f"{resolve(st, dst_pkg)}.{a.name}" == src_full:
                for m in moved_names:
                    dst_text = re.sub(rf"\b{name}\.{m}\b", m, dst_text)
    # local imports of the moved names from the destination itself (config's `from .study import cell_config`)
    dst_text = _drop_self_imports(dst_text, dst_pkg, src_full, moved_names)

    dst_text = add_imports(dst_text, dst_pkg, specs, plain)
    dst_text = _append_before_main(dst_text, chunk)
    write(dst_path, dst_text)

    # remove from the source
    for a, b in sorted(spans, reverse=True):
        del lines[a:b]
    src_text = re.sub(r"\n{4,}", "\n\n\n", "".join(lines))
    if reexport:
        src_text = add_imports(src_text, src_pkg, [(dst_full, n, None) for n in reexport], [])
    src_text = _prune_imports(src_text, set(needed))
    write(src_path, src_text)
    _redirect_importers(root, lab, src_full, dst_full, moved_names, note=not reexport)
    return True


def _drop_self_imports(text: str, pkg: str, src_full: str, names: Set[str]) -> str:
    tree = ast.parse(text)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and resolve(node, pkg) == src_full:
            keep = [(a.name, a.asname) for a in node.names if a.name not in names]
            if len(keep) != len(node.names):
                edits.append((node, [fmt_from(" " * node.col_offset, "." * node.level + (node.module or ""), keep)]
                              if keep else None))
    text = edit_nodes(text, edits)
    return re.sub(r"(\n[ \t]*\n)(?:[ \t]*\n)+(?=[ \t]+\S)", r"\1", text)


def _append_before_main(text: str, chunk: str) -> str:
    tree = ast.parse(text)
    main = [n for n in tree.body if isinstance(n, ast.If) and "__name__" in ast.unparse(n.test)]
    lines = text.splitlines(keepends=True)
    if main:
        at = main[0].lineno - 1
        while at > 0 and lines[at - 1].lstrip().startswith("#"):
            at -= 1
        head = "".join(lines[:at]).rstrip("\n")
        return head + "\n\n\n" + chunk + "\n\n" + "".join(lines[at:])
    return text.rstrip("\n") + "\n\n\n" + chunk


def _prune_imports(text: str, candidates: Set[str]) -> str:
    """Drop the names among `candidates` that a module's top-level imports bind and that it no longer uses."""
    tree = ast.parse(text)
    used = used_names(n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom)))
    allnames = set()
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
            allnames |= {e.value for e in ast.walk(n.value) if isinstance(e, ast.Constant)}
    edits = []
    for node in imports_at_top(tree):
        drop = [a for a in node.names if (a.asname or a.name.split(".")[0]) in candidates
                and (a.asname or a.name.split(".")[0]) not in used | allnames]
        if not drop:
            continue
        keep = [a for a in node.names if a not in drop]
        if not keep:
            edits.append((node, None))
        elif isinstance(node, ast.ImportFrom):
            edits.append((node, [fmt_from(" " * node.col_offset, "." * node.level + (node.module or ""),
                                          [(a.name, a.asname) for a in keep])]))
        else:
            edits.append((node, ["import " + ", ".join(a.name + (f" as {a.asname}" if a.asname else "")
                                                       for a in keep)]))
    return edit_nodes(text, edits)


def _redirect_importers(root: str, lab: Set[str], src_full: str, dst_full: str, names: Set[str],
                        note: bool) -> None:
    """`from <src> import name` of a moved name, anywhere in the package or tests, now imports it from <dst>."""
    for path in py_files(root):
        text = read(path)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        mod, pkg = module_name(root, path)
        if path_of(root, dst_full) == path:
            continue
        edits, add = [], []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and resolve(node, pkg) == src_full:
                hit = [a for a in node.names if a.name in names]
                if not hit:
                    continue
                keep = [(a.name, a.asname) for a in node.names if a.name not in names]
                spell = "." * node.level + (node.module or "")
                new = [fmt_from(" " * node.col_offset, spell, keep)] if keep else []
                target = relativize(dst_full, pkg) if node.level else dst_full
                new.append(fmt_from(" " * node.col_offset, target, [(a.name, a.asname) for a in hit]))
                edits.append((node, ["\n".join(new)]))
        if edits:
            write(path, edit_nodes(text, edits))
        short = src_full.split(".")[-1]
        for m in names if note else ():
            if re.search(rf"\b{short}\.{m}\b", read(path)):
                notes.append(f"{os.path.relpath(path, root)}: uses {short}.{m}, now {dst_full}.{m}: edit by hand")


# ---------------------------------------------------------------- step 4b-5: hub's data table, fingerprint

def hub_data_info(root: str, lab: Set[str]) -> bool:
    """hub reads Fashion-MNIST's mean/std from data.INFO: give it its own DATA_INFO (values copied from data.INFO)."""
    hub = path_of(root, f"{PKG}.hub")
    text = read(hub)
    keys = sorted(set(re.findall(r"\bdata\.INFO\[(['\"])(\w+)\1\]", text)), key=str)
    if not keys:
        return False
    data_tree = ast.parse(read(path_of(root, full("data", lab))))
    info = ast.literal_eval(top_bindings(data_tree)["INFO"].value)
    table = {k: info[k] for _, k in keys}
    text = re.sub(r"\bdata\.INFO\[", "DATA_INFO[", text)
    block = ("# (channels, image size, classes, mean, std) of the datasets the published weights were trained on; a copy of\n"
             f"# odevit.{LAB}.data.INFO's rows (the layer never imports the lab; tests/test_layout.py checks they agree)\n"
             f"DATA_INFO = {table!r}\n")
    tree = ast.parse(text)
    first = next(n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr)))
    lines = text.splitlines(keepends=True)
    at = node_span(lines, first)[0]
    lines[at:at] = [block, "\n"]
    text = _prune_imports("".join(lines), {"data"})
    return write(hub, text)


FINGERPRINT_LOOP = re.compile(
    r"(?P<i>[ \t]+)(?P<var>\w+) = os\.path\.dirname\(os\.path\.abspath\(__file__\)\)\n"
    r"[ \t]+for (?P<n>\w+) in sorted\(os\.listdir\((?P=var)\)\):\n"
    r"[ \t]+if (?P=n)\.endswith\(\"\.py\"\):\n"
    r"[ \t]+with open\(os\.path\.join\((?P=var), (?P=n)\), \"rb\"\) as f:\n"
    r"[ \t]+h\.update\(f\.read\(\)\)\n")


def fingerprint_recursive(root: str, lab: Set[str]) -> bool:
    path = path_of(root, full("train", lab))
    text = read(path)
    if "os.walk(" in text and "def fingerprint" in text:
        return False
    m = FINGERPRINT_LOOP.search(text)
    if not m:
        notes.append(f"{path}: fingerprint's source loop not recognised; make it hash every .py under odevit/ by hand")
        return False
    i = m.group("i")
    new = (f"{i}pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # odevit/: the layer and the lab\n"
           f"{i}files = sorted(os.path.relpath(os.path.join(d, n), pkg).replace(os.sep, \"/\")\n"
           f"{i}               for d, _, names in os.walk(pkg) for n in names if n.endswith(\".py\"))\n"
           f"{i}for rel in files:\n"
           f"{i}    h.update(rel.encode())\n"
           f"{i}    with open(os.path.join(pkg, rel), \"rb\") as f:\n"
           f"{i}        h.update(f.read())\n")
    return write(path, text[:m.start()] + new + text[m.end():])


# ---------------------------------------------------------------- step 6: text references

def walk_files(root: str) -> Iterable[str]:
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.endswith(".egg-info"))
        for f in sorted(files):
            yield os.path.join(d, f)


def py_files(root: str) -> List[str]:
    return [p for p in walk_files(root) if p.endswith(".py")
            and os.path.relpath(p, root).replace(os.sep, "/") != "tools/relayout.py"]


def text_files(root: str) -> List[str]:
    out = []
    for p in walk_files(root):
        rel = os.path.relpath(p, root).replace(os.sep, "/")
        if rel == "tools/relayout.py" or rel == "dvc.lock":
            continue
        if p.endswith(TEXT_EXT) or os.path.basename(p) in TEXT_NAMES and rel in ("Makefile", ".ci/run"):
            out.append(p)
    return out


FROM_LINE = re.compile(r"^(?P<pre>\s*\"?)(?P<ind>[ \t]*)from odevit import (?P<names>[\w ,]+?)(?P<post>(\\n)?\",?|\s*#.*)?$")


def split_from_line(line: str, lab: Set[str], json_line: bool) -> str:
    """One `from odevit import a, b` line (plain, or a notebook's JSON source string) split into layer and lab."""
    m = FROM_LINE.match(line.rstrip("\n"))
    if not m:
        return line
    names = []
    for item in m.group("names").split(","):
        parts = item.split()
        if not parts:
            return line
        names.append((parts[0], parts[2] if len(parts) == 3 and parts[1] == "as" else None))
    labn, coren = split_names(names, lab)
    if not labn:
        return line
    post = m.group("post") or ""
    nl = "\n" if line.endswith("\n") else ""
    if json_line:  # "    \"from odevit import a, b\\n\"," -> one JSON element per statement
        pre, ind = m.group("pre"), m.group("ind")
        stmts = ([f"{ind}from odevit import {', '.join(_n(x) for x in coren)}"] if coren else []) + \
                [f"{ind}from {PKG}.{LAB} import {', '.join(_n(x) for x in labn)}"]
        eol = "\\n" if "\\n" in post else ""
        out = [f'{pre}{s}\\n",' for s in stmts[:-1]] + [f"{pre}{stmts[-1]}{eol}{post.replace(chr(92) + 'n', '')}"]
        return "\n".join(out) + nl
    ind = m.group("pre") + m.group("ind")
    stmts = ([fmt_from(ind, PKG, coren)] if coren else []) + [fmt_from(ind, f"{PKG}.{LAB}", labn)]
    stmts[0] += post
    return "\n".join(stmts) + nl


def _n(x: Tuple[str, Optional[str]]) -> str:
    return x[0] if x[1] is None else f"{x[0]} as {x[1]}"


def rewrite_text(path: str, lab: Set[str]) -> bool:
    text = read(path)
    alt = "|".join(sorted(lab, key=len, reverse=True))
    new = re.sub(rf"(?<![\w.]){PKG}\.({alt})\b(?!\.py\b)", rf"{PKG}.{LAB}.\1", text)
    new = re.sub(rf"(?<![\w/]){PKG}/({alt})\.py\b", rf"{PKG}/{LAB}/\1.py", new)
    if path.endswith((".py", ".md", ".ipynb")):
        json_line = path.endswith(".ipynb")
        new = "".join(split_from_line(ln, lab, json_line) for ln in new.splitlines(keepends=True))
    if path.endswith(".py") and new != text:
        try:
            ast.parse(new)
        except SyntaxError as e:
            notes.append(f"{path}: rewrite would not parse ({e}); left unchanged")
            return False
    if path.endswith(".ipynb") and new != text:
        json.loads(new)
    return write(path, new) if new != text else False


def dvc_deps(root: str, lab: Set[str]) -> bool:
    path = os.path.join(root, "dvc.yaml")
    if not os.path.exists(path):
        return False
    text = read(path)
    for a, b in DVC_DEPS:
        fa, fb = f"{PKG}/{LAB}/{a}.py", f"{PKG}/{LAB}/{b}.py"
        stages = re.split(r"(?m)^(?=  \S)", text)
        text = "".join(s if fb in s else re.sub(rf"{re.escape(fa)}(?=[,\]])", f"{fa}, {fb}", s, count=1)
                       for s in stages)
    return write(path, text)


# ---------------------------------------------------------------- step 7-8: module map, checks

def first_doc_line(path: str) -> str:
    """The first sentence of a module's docstring's first paragraph, on one line."""
    doc = (ast.get_docstring(ast.parse(read(path))) or "").strip()
    para = " ".join(doc.split("\n\n")[0].split())
    m = re.search(r"^.*?\.(?=\s+[A-Z`(]|$)", para)
    return (m.group(0) if m else para) or "(no docstring)"


def module_map(root: str) -> str:
    rows = []
    for where, d in (("the ODE-ViT layer: `import odevit`", pkg_dir(root)), ("the reproduction lab", lab_dir(root))):
        rows.append(f"\n**`{os.path.relpath(d, root)}/`** — {where}\n")
        for f in sorted(x for x in os.listdir(d) if x.endswith(".py")):
            rows.append(f"- `{os.path.relpath(os.path.join(d, f), root)}` — {first_doc_line(os.path.join(d, f))}")
    return "\n".join(rows).strip("\n") + "\n"


def import_graph(pkg_root: str, pkg: str = PKG) -> Dict[str, Set[str]]:
    """Module -> the package modules it imports (at any depth: function-level imports count), from the AST."""
    mods = {}
    for d, dirs, files in os.walk(pkg_root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), os.path.dirname(pkg_root))[:-3].replace(os.sep, ".")
                mods[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(d, f)
    graph: Dict[str, Set[str]] = {}
    for mod, path in mods.items():
        own = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(read(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(node, own)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod and t != pkg:
                    deps.add(t)
        graph[mod] = deps
    return graph


def check(root: str) -> List[str]:
    problems = []
    graph = import_graph(pkg_dir(root))
    for mod, deps in sorted(graph.items()):
        if not mod.startswith(f"{PKG}.{LAB}"):
            bad = sorted(d for d in deps if d.startswith(f"{PKG}.{LAB}"))
            if bad:
                problems.append(f"the layer imports the lab: {mod} -> {bad}")
    lab = lab_modules(root)
    for path in py_files(root):  # a `from odevit import <lab module>` the line-based rewrite could not split
        try:
            tree = ast.parse(read(path))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == PKG:
                stale = [a.name for a in node.names if a.name in lab]
                if stale:
                    problems.append(f"{os.path.relpath(path, root)}:{node.lineno}: from {PKG} import {stale} "
                                    f"(now {PKG}.{LAB})")
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        problems.append(f"import circle: {' -> '.join(e.args[1])}")
    return problems


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=".", help="repository root (default: the current directory)")
    ap.add_argument("--check", action="store_true", help="change nothing; report the layer/lab imports and circles")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isfile(os.path.join(pkg_dir(root), "__init__.py")):
        print(f"error: {root}: no {PKG}/__init__.py (--root must be the repository root)", file=sys.stderr)
        return 2
    if args.check:
        problems = check(root) if os.path.isdir(lab_dir(root)) else [f"no {PKG}/{LAB}/ yet"]
        print("\n".join(problems) or "layout ok")
        return 1 if problems else 0
    lab = lab_modules(root)
    done = []
    moved = move_files(root, lab)
    if moved:
        done.append(f"moved to {PKG}/{LAB}/: {', '.join(moved)}")
    for path in py_files(root):
        if module_name(root, path)[0] and relevel_imports(path, root, lab):
            done.append(f"imports re-levelled: {os.path.relpath(path, root)}")
    for src, dst, names, reexport, doc in MOVES:
        if move_defs(root, lab, src, dst, names, reexport, doc):
            done.append(f"moved {', '.join(names)}: {src} -> {dst}" + (f" (re-exported by {src})" if reexport else ""))
    if hub_data_info(root, lab):
        done.append("hub: DATA_INFO instead of data.INFO")
    if fingerprint_recursive(root, lab):
        done.append("train.fingerprint: every .py under odevit/, recursively")
    for path in text_files(root):
        if rewrite_text(path, lab):
            done.append(f"references: {os.path.relpath(path, root)}")
    if dvc_deps(root, lab):
        done.append("dvc.yaml: precision.py / evaluate.py deps")
    pyproject = os.path.join(root, "pyproject.toml")
    if os.path.exists(pyproject) and not re.search(r'include = \[[^\]]*"odevit\*"', read(pyproject)):
        notes.append('pyproject.toml: [tool.setuptools.packages.find] include must cover odevit.repro ("odevit*")')
    mm = module_map(root)
    header = ("# Layout\n\nTwo layers: the ODE-ViT layer researchers import (`import odevit`, "
              "`timm.create_model(\"odevit_...\")`), and the lab that reproduces the paper's claims with it "
              "(DVC stages, study, statistics, reports). The layer never imports the lab and no module imports "
              "itself in a circle (tests/test_layout.py). Generated by `python tools/relayout.py` from each "
              "module's docstring.\n\n")
    if write(os.path.join(root, "docs", "layout.md"), header + mm):
        done.append("docs/layout.md")
    print("\n".join(done) or "nothing to do (already laid out)")
    print("\nmodule map (docs/layout.md):\n" + mm)
    problems = check(root)
    for n in notes:
        print(f"by hand: {n}")
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
