"""The plan's study stages of dvc.yaml, generated from plan.yaml: a study is one plan entry, never a copied block.

    python -m odevit.repro.stages           # rewrite dvc.yaml's study stages from plan.yaml (atomic)
    python -m odevit.repro.stages --check   # exit 1 with one line naming what is stale; writes nothing

Every study of plan.yaml (`studies:`, in plan order) gets one matrix stage named after it, one run per (cell, seed):
`STUDY@CELL-SEED`, running `python -m odevit.repro.study CELL SEED --study STUDY`, its matrix and the plan keys it
reads interpolated by DVC from plan.yaml (dvc.yaml's `vars`). A study with its own teacher (plan.yaml
`studies.STUDY.teacher`) also gets the stage STUDY_teacher (`python -m odevit.repro.study_teacher STUDY`), and its
cells depend on that stage's folder and read the teacher block. The text goes between the two marker lines (BEGIN,
END) inside dvc.yaml's `stages:`; everything else in dvc.yaml is written by hand. The runs' dependencies are the quick
run's `cell` stage's list (its `&run_deps` anchor, referred to as `*run_deps`; a study with a teacher adds its
teacher's folder to a copy of it, as YAML cannot extend an alias); a teacher stage's are TEACHER_DEPS (anchored once,
`&teacher_deps`). Only the study names, their order and which have a teacher shape the text: cells, seeds and budgets
are read by DVC from plan.yaml itself, so editing them needs no regeneration. tests/test_stages.py keeps dvc.yaml
current. Why generated rather than one `foreach` stage: docs/pipeline.md, "Study stages".
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

from .files import write_text

DVC_FILE = "dvc.yaml"
PLAN_FILE = "plan.yaml"
BEGIN = "  # >>> study stages: generated from plan.yaml by `python -m odevit.repro.stages`; do not edit (docs/plan.md)"
END = "  # <<< study stages"
RUN_DEPS_STAGE = "cell"  # the quick run's stage whose deps (`&run_deps`) every study run depends on
# a study teacher's dependencies (its stage's; the order is the one dvc.lock records)
TEACHER_DEPS = [
    "odevit/repro/study_teacher.py", "odevit/repro/study.py", "odevit/repro/results.py", "odevit/repro/config.py",
    "odevit/repro/pipeline.py", "odevit/repro/files.py", "odevit/repro/data.py", "odevit/repro/distributed.py",
    "odevit/model.py", "odevit/solvers.py", "odevit/layers.py", "odevit/losses.py", "odevit/teacher.py",
    "odevit/schedule.py", "odevit/repro/train.py", "odevit/repro/precision.py", "odevit/repro/objectives.py",
    "odevit/repro/plan.py", "odevit/repro/provenance.py", "results/01_data/metrics.json",
]
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")  # a DVC stage name and a folder name; no '@', '-', ':' or '/'
WIDTH = 120  # the flow lists' line width


class StagesError(ValueError):
    """dvc.yaml or plan.yaml cannot give the study stages; the message is one line naming the file and the key."""


def teacher_folder(study: str) -> str:
    """The study teacher's results folder, a dependency of its cells' stage: in git with a .gitkeep, so that
    `dvc repro --dry` on a fresh clone can hash it before the teacher exists."""
    return f"results/studies/{study}/teacher"


def studies(plan: Mapping[str, Any], path: str = PLAN_FILE) -> Dict[str, bool]:
    """study -> whether it trains its own teacher, in plan order; StagesError on what its stages cannot be made from
    (the keys the stages read: cells, seeds, budget, base)."""
    found = plan.get("studies") if isinstance(plan, Mapping) else None
    if not isinstance(found, Mapping) or not found:
        raise StagesError(f"{path}: 'studies' must map study names to their plans")
    out: Dict[str, bool] = {}
    for name, s in found.items():
        where = f"{path}: studies.{name}"
        if not isinstance(name, str) or not NAME.match(name):
            raise StagesError(f"{where}: a study name is a stage name: a letter, then letters, digits or '_'")
        if not isinstance(s, Mapping):
            raise StagesError(f"{where}: expected a mapping")
        if not isinstance(s.get("cells"), Mapping) or not s["cells"]:
            raise StagesError(f"{where}.cells is missing or empty: its stage's matrix runs over it")
        if not isinstance(s.get("seeds"), list) or not s["seeds"]:
            raise StagesError(f"{where}.seeds is missing or empty: its stage's matrix runs over it")
        for key in ("budget", "base"):
            if key not in s:
                raise StagesError(f"{where}.{key} is missing: its stage reads it (e.g. `base: {{precision: fp32}}` "
                                  "as the other studies have); `dvc commit` would fail after the training")
        out[name] = bool(s.get("teacher"))
    return out


def _item(x: str) -> str:
    return x if re.fullmatch(r"[A-Za-z0-9_./-]+", x) else json.dumps(x)


def flow(items: List[str], lead: str, indent: int, anchor: str = "") -> List[str]:
    """`lead[a, b, ...]` as a YAML flow list wrapped at WIDTH, continuation lines indented by `indent`."""
    lines, line = [], lead + (f"&{anchor} " if anchor else "") + "["
    for i, x in enumerate(items):
        piece = _item(x) + (", " if i < len(items) - 1 else "]")
        if len(line) + len(piece.rstrip()) > WIDTH and not line.endswith("["):
            lines.append(line.rstrip())
            line = " " * indent
        line += piece
    return lines + [line]


def render_teacher(study: str, anchor: bool) -> List[str]:
    """The stage that trains a study's own teacher (`anchor`: the first such stage, which holds &teacher_deps)."""
    c, r = f"checkpoints/studies/{study}/teacher", teacher_folder(study)
    deps = flow(TEACHER_DEPS, "    deps: ", 11, "teacher_deps") if anchor else ["    deps: *teacher_deps"]
    return [
        f"  {study}_teacher:  # a study's own teacher (plan.yaml: studies.{study}.teacher)",
        f"    cmd: python -m odevit.repro.study_teacher {study}",
        *deps,
        "    params:",
        "      - base",
        "      - teacher",
        "      - distill.distance_batches",
        "      - distill.distance_tokens",
        f"      - plan.yaml: [studies.{study}.teacher, studies.{study}.base]",
        "    outs:",
        f"      - {c}: {{persist: true}}  # last.pt: resume",
        f"      - {r}/history.csv: {{cache: false}}",
        f"      - {r}/distances.csv: {{cache: false}}",
        f"      - {r}/timing.json: {{cache: false}}",
        "    metrics:",
        f"      - {r}/metrics.json: {{cache: false}}",
    ]


def render_study(study: str, run_deps: Optional[List[str]]) -> List[str]:
    """A study's matrix stage: one run per (cell, seed). `run_deps`: None = `*run_deps`; a list (a study with its own
    teacher) = those and the teacher's folder, written out."""
    keys = [f"studies.{study}.budget", f"studies.{study}.base"]
    head, deps = f"  {study}:", ["    deps: *run_deps"]
    if run_deps is not None:
        keys.append(f"studies.{study}.teacher")
        head += "  # its cells with `teacher: study` distil from the stage above"
        deps = ["    # the runs' deps (cell's &run_deps) and the teacher stage's folder: its outputs (the folder",
                "    # is in git, with a .gitkeep, so that `dvc repro --dry` on a fresh clone can hash it before the",
                "    # teacher exists)",
                *flow(run_deps + [teacher_folder(study)], "    deps: ", 11)]
    keys.append(f"studies.{study}.cells.${{item.cell}}")
    run = f"{study}/${{item.cell}}/s${{item.seed}}"
    return [
        head,
        f'    matrix: {{cell: "${{studies.{study}.cells}}", seed: "${{studies.{study}.seeds}}"}}',
        f"    cmd: python -m odevit.repro.study ${{item.cell}} ${{item.seed}} --study {study}",
        *deps,
        "    params:",
        "      - base",
        "      - teacher",
        "      - distill",
        "      - study.robustness_steps",
        "      - study.robustness_test_limit",
        *flow(keys, "      - plan.yaml: ", 20),
        "    outs:",
        f"      - checkpoints/studies/{run}: {{persist: true}}  # last.pt: resume",
        f"      - results/studies/{run}/history.csv: {{cache: false}}",
        f"      - results/studies/{run}/timing.json: {{cache: false}}",
        "    metrics:",
        f"      - results/studies/{run}/metrics.json: {{cache: false}}",
    ]


def render(plan: Mapping[str, Any], run_deps: List[str], path: str = PLAN_FILE) -> str:
    """The text between the markers: every study's stages in plan order, a study's teacher stage before its cells."""
    blocks, anchored = [], False
    for study, has_teacher in studies(plan, path).items():
        if has_teacher:
            blocks.append(render_teacher(study, anchor=not anchored))
            anchored = True
        blocks.append(render_study(study, list(run_deps) if has_teacher else None))
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"


def split(text: str, path: str = DVC_FILE) -> Tuple[str, str, str]:
    """(before, generated, after) of dvc.yaml's text: `before` ends with the BEGIN line, `after` starts with END."""
    lines = text.splitlines(keepends=True)
    found = {m: [i for i, ln in enumerate(lines) if ln.strip() == m.strip()] for m in (BEGIN, END)}
    for m, at in found.items():
        if len(at) != 1:
            count = "no line" if not at else f"{len(at)} lines"
            raise StagesError(f"{path}: {count} '{m.strip()}' (expected one, inside 'stages:'): put the two marker "
                              "lines where the study stages go, then run `python -m odevit.repro.stages`")
    b, e = found[BEGIN][0], found[END][0]
    if e < b:
        raise StagesError(f"{path}: the line '{END.strip()}' comes before '{BEGIN.strip()}'")
    return "".join(lines[:b + 1]), "".join(lines[b + 1:e]), "".join(lines[e:])


def run_deps(text: str, path: str = DVC_FILE) -> List[str]:
    """The `cell` stage's deps (its `&run_deps` list), read from dvc.yaml without its generated part."""
    before, _, after = split(text, path)
    if "&run_deps" not in before + after:
        raise StagesError(f"{path}: no '&run_deps' anchor: stage {RUN_DEPS_STAGE}'s deps must be `deps: &run_deps "
                          "[...]` (the study stages refer to it)")
    try:
        stages = (yaml.safe_load(before + after) or {}).get("stages") or {}
    except yaml.YAMLError as e:
        raise StagesError(f"{path}: not valid YAML outside the study stages ({str(e).splitlines()[0]})") from None
    deps = (stages.get(RUN_DEPS_STAGE) or {}).get("deps")
    if not isinstance(deps, list) or not deps:
        raise StagesError(f"{path}: stage {RUN_DEPS_STAGE} has no deps list (&run_deps): the study stages use it")
    return deps


def generate(plan: Mapping[str, Any], text: str, path: str = DVC_FILE, plan_path: str = PLAN_FILE) -> str:
    """dvc.yaml's text with its study stages rendered from `plan`; StagesError where a study's stage names collide
    with a stage written by hand."""
    before, _, after = split(text, path)
    region = render(plan, run_deps(text, path), plan_path)
    hand = set((yaml.safe_load(before + after) or {}).get("stages") or {})
    ours = [ln[2:].split(":")[0] for ln in region.splitlines() if re.match(r"  [A-Za-z]", ln)]
    clash = sorted(hand & set(ours))
    if clash:
        raise StagesError(f"{plan_path}: study stage '{clash[0]}' is also a stage written by hand in {path}: rename "
                          "the study")
    return before + region + after


def missing_folders(plan: Mapping[str, Any], root: str = ".", plan_path: str = PLAN_FILE) -> List[str]:
    """The .gitkeep files of study teachers' folders (their cells' dependency) that are not there."""
    return [p for s, t in studies(plan, plan_path).items() if t
            for p in [f"{teacher_folder(s)}/.gitkeep"] if not os.path.isfile(os.path.join(root, p))]


def stale(plan: Mapping[str, Any], path: str = DVC_FILE, plan_path: str = PLAN_FILE) -> Optional[str]:
    """None where dvc.yaml's study stages are the plan's; else one line naming what is stale and the fix."""
    with open(path) as f:
        text = f.read()
    new = generate(plan, text, path, plan_path)
    if new != text:
        have = [ln[2:].split(":")[0] for ln in split(text, path)[1].splitlines() if re.match(r"  [A-Za-z]", ln)]
        want = [ln[2:].split(":")[0] for ln in split(new, path)[1].splitlines() if re.match(r"  [A-Za-z]", ln)]
        extra, lacking = [s for s in have if s not in want], [s for s in want if s not in have]
        what = "; ".join(x for x in (f"lacks {', '.join(lacking)}" if lacking else "",
                                     f"has {', '.join(extra)} (not in {plan_path})" if extra else "") if x)
        return (f"{path}: its study stages are not {plan_path}'s ({what or 'their text differs'}): run "
                "`python -m odevit.repro.stages`")
    missing = missing_folders(plan, os.path.dirname(os.path.abspath(path)), plan_path)
    if missing:
        return f"{missing[0]}: missing (its study's cells depend on the folder): run `python -m odevit.repro.stages`"
    return None


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Generate dvc.yaml's study stages from plan.yaml")
    ap.add_argument("--check", action="store_true", help="exit 1 naming what is stale; write nothing")
    ap.add_argument("--plan", default=PLAN_FILE)
    ap.add_argument("--dvc", default=DVC_FILE)
    args = ap.parse_args(argv)
    try:
        if not os.path.isfile(args.plan) or not os.path.isfile(args.dvc):
            raise StagesError(f"{args.plan if not os.path.isfile(args.plan) else args.dvc}: not found (run from the "
                              "repository root)")
        with open(args.plan) as f:
            try:
                plan = yaml.safe_load(f) or {}
            except yaml.YAMLError as e:
                raise StagesError(f"{args.plan}: not valid YAML ({str(e).splitlines()[0]})") from None
        if args.check:
            problem = stale(plan, args.dvc, args.plan)
            if problem:
                print(problem, file=sys.stderr)
                return 1
            print(f"{args.dvc}: its study stages are {args.plan}'s")
            return 0
        with open(args.dvc) as f:
            text = f.read()
        new = generate(plan, text, args.dvc, args.plan)
        if new != text:
            write_text(new[:-1] if new.endswith("\n") else new, args.dvc)  # write_text adds the final newline
        root = os.path.dirname(os.path.abspath(args.dvc))
        for p in missing_folders(plan, root, args.plan):
            os.makedirs(os.path.dirname(os.path.join(root, p)), exist_ok=True)
            open(os.path.join(root, p), "w").close()
            print(f"{p}: created (git add it: its study's cells depend on the folder)")
        n = len(studies(plan, args.plan))
        print(f"{args.dvc}: {'rewritten' if new != text else 'unchanged'}: the stages of {n} plan studies")
        return 0
    except (StagesError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
