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
# Plan v2 (plan_v2.yaml; `odevit.repro.fast`): its own generated region, between BEGIN_V2 and END_V2
PLAN_V2_FILE = "plan_v2.yaml"
BEGIN_V2 = ("  # >>> plan v2 stages: generated from plan_v2.yaml by `python -m odevit.repro.stages`; do not edit "
            "(docs/plan.md)")
END_V2 = "  # <<< plan v2 stages"
# what a plan-v2 run is made from (its run key: the training source `train.fingerprint` hashes, odevit/*.py and
# train.TRAINING_SOURCES, and the trainer fast.py), the plan's loader, and the data's record (tests/test_stages.py
# checks the list against train.TRAINING_SOURCES)
V2_RUN_DEPS = [
    "odevit/repro/fast.py", "odevit/repro/plan2.py", "odevit/__init__.py", "odevit/hub.py", "odevit/layers.py",
    "odevit/losses.py", "odevit/model.py", "odevit/schedule.py", "odevit/solvers.py", "odevit/teacher.py",
    "odevit/repro/config.py", "odevit/repro/data.py", "odevit/repro/distributed.py", "odevit/repro/objectives.py",
    "odevit/repro/plan.py", "odevit/repro/provenance.py", "odevit/repro/files.py", "odevit/repro/results.py",
    "odevit/repro/pipeline.py", "odevit/repro/precision.py", "odevit/repro/study.py", "odevit/repro/study_teacher.py",
    "odevit/repro/train.py", "results/01_data/metrics.json",
]
# plan_v2.yaml's rules that change what a run computes or records (precision, the LR floor, the convergence rule,
# the tau rule); the others (alpha, families, wording) are the verdicts'
V2_RULES = ["rules.precision", "rules.schedule", "rules.convergence", "rules.tau_rule"]
# the verdicts' code (odevit.repro.verdicts2 and what it imports from the package)
V2_VERDICT_DEPS = [
    "odevit/repro/verdicts2.py", "odevit/repro/verdicts.py", "odevit/repro/plan2.py", "odevit/repro/plan.py",
    "odevit/repro/stats.py", "odevit/repro/paper.py", "odevit/repro/report.py", "odevit/repro/results.py",
    "odevit/repro/files.py", "odevit/repro/config.py", "odevit/repro/data.py", "odevit/repro/v2_pages.py",
    "odevit/repro/wording.py", "odevit/repro/distributed.py", "plan_v2.yaml",
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


def studies_v2(plan: Mapping[str, Any], path: str = PLAN_V2_FILE) -> Dict[str, List[str]]:
    """Plan v2's study -> its cells, in plan order; StagesError on what its stages cannot be made from."""
    found = plan.get("studies") if isinstance(plan, Mapping) else None
    if not isinstance(found, Mapping) or not found:
        raise StagesError(f"{path}: 'studies' must map study names to their plans")
    out: Dict[str, List[str]] = {}
    for name, s in found.items():
        where = f"{path}: studies.{name}"
        if not isinstance(name, str) or not NAME.match(name) or name in ("teacher", "verdicts"):
            raise StagesError(f"{where}: a study name is a stage name v2_... without '@', '-', ':' or '/' (and not "
                              "'teacher' or 'verdicts')")
        if not isinstance(s, Mapping) or not isinstance(s.get("cells"), Mapping) or not s["cells"]:
            raise StagesError(f"{where}.cells is missing or empty: its stage's matrix runs over it")
        bad = [c for c in s["cells"] if not isinstance(c, str) or not NAME.match(c)]
        if bad:
            raise StagesError(f"{where}.cells.{bad[0]}: a cell name is a letter, then letters, digits or '_'")
        for key in ("budget", "seeds"):
            if key not in s:
                raise StagesError(f"{where}.{key} is missing: its stage reads it")
        out[name] = list(s["cells"])
    return out


def _v2_stage(study: str) -> str:
    return study if study.startswith("v2_") else f"v2_{study}"


def v2_run_stages(plan: Mapping[str, Any], path: str = PLAN_V2_FILE) -> List[str]:
    """The stages that make plan v2's runs (its teacher's, then each study's), as `dvc commit` or `dvc repro` name them."""
    return ["v2_teacher"] + [_v2_stage(s) for s in studies_v2(plan, path)]


def render_v2(plan: Mapping[str, Any], path: str = PLAN_V2_FILE) -> str:
    """Plan v2's stages: its teacher, one matrix stage per study (a run per cell: the cell's seeds train together),
    and its verdicts (results/v2/claims.csv, which its notebooks' stages read)."""
    found = studies_v2(plan, path)
    teacher = [
        "  v2_teacher:  # plan v2's teacher seeds, the one selected on validation, its distances and tau",
        f"    cmd: python -m odevit.repro.fast {PLAN_V2_FILE} --teacher-only",
        *flow(V2_RUN_DEPS, "    deps: ", 11),
        "    params:",
        "      - base",
        "      - teacher",
        "      - distill.distance_batches",
        "      - distill.distance_tokens",
        *flow(["teacher"] + V2_RULES, f"      - {PLAN_V2_FILE}: ", 20),
        "    outs:",
        "      - results/v2/teacher: {cache: false}  # its checkpoints (checkpoints/v2/teacher): fast.py's resume files",
    ]
    blocks = [teacher]
    folders = ["results/v2/teacher"]
    for k, (study, cells) in enumerate(found.items()):
        keys = ["teacher"] + V2_RULES + [f"studies.{study}.budget", f"studies.{study}.seeds"]
        if "robustness" in plan["studies"][study]:
            keys.append(f"studies.{study}.robustness")
        keys.append(f"studies.{study}.cells.${{item.cell}}")
        # the run's sources, the v2 teacher's folder and plan 1's teacher (the `weak` cells'), written once
        deps = (flow(V2_RUN_DEPS + ["results/v2/teacher", "results/02_teacher/metrics.json",
                                    "results/02_teacher/distances.csv"], "    deps: ", 11, "v2_cell_deps")
                if k == 0 else ["    deps: *v2_cell_deps"])
        blocks.append([
            f"  {_v2_stage(study)}:",
            f"    matrix: {{cell: [{', '.join(cells)}]}}",
            f"    cmd: python -m odevit.repro.fast {PLAN_V2_FILE} --studies {study} --cells ${{item.cell}}",
            *deps,
            "    params:",
            "      - base",
            "      - teacher",
            "      - distill",
            *flow(keys, f"      - {PLAN_V2_FILE}: ", 20),
            "    outs:",
            f"      - results/v2/{study}/${{item.cell}}: {{cache: false}}  # its resume file: checkpoints/v2/{study}/"
            "${item.cell}/last.pt",
        ])
        folders.append(f"results/v2/{study}")
    blocks.append([
        "  v2_verdicts:  # plan v2's verdicts from its runs (and the machine-shift reruns, results/v2_cpu)",
        "    cmd: python -m odevit.repro.verdicts2",
        *flow(V2_VERDICT_DEPS + folders + ["results/v2_cpu"], "    deps: ", 11),
        "    outs:",
        "      - results/v2/claims.csv: {cache: false}",
        "      - results/v2/power.csv: {cache: false}",
    ])
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"


def split(text: str, path: str = DVC_FILE, markers: Tuple[str, str] = (BEGIN, END)) -> Tuple[str, str, str]:
    """(before, generated, after) of dvc.yaml's text: `before` ends with the BEGIN line, `after` starts with END
    (`markers`: plan v2's region is (BEGIN_V2, END_V2))."""
    begin, end = markers
    lines = text.splitlines(keepends=True)
    found = {m: [i for i, ln in enumerate(lines) if ln.strip() == m.strip()] for m in (begin, end)}
    for m, at in found.items():
        if len(at) != 1:
            count = "no line" if not at else f"{len(at)} lines"
            raise StagesError(f"{path}: {count} '{m.strip()}' (expected one, inside 'stages:'): put the two marker "
                              "lines where the study stages go, then run `python -m odevit.repro.stages`")
    b, e = found[begin][0], found[end][0]
    if e < b:
        raise StagesError(f"{path}: the line '{end.strip()}' comes before '{begin.strip()}'")
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
    clash = _clash(before, after, region)
    if clash:
        raise StagesError(f"{plan_path}: study stage '{clash}' is also a stage written by hand in {path}: rename "
                          "the study")
    return before + region + after


def _names(region: str) -> List[str]:
    """The stage names a generated region defines (its two-space-indented keys)."""
    return [ln[2:].split(":")[0] for ln in region.splitlines() if re.match(r"  [A-Za-z]", ln)]


def _clash(before: str, after: str, region: str) -> Optional[str]:
    """The first stage name of `region` that dvc.yaml's text around it defines too (None: no clash)."""
    others = set((yaml.safe_load(before + after) or {}).get("stages") or {})
    clash = sorted(others & set(_names(region)))
    return clash[0] if clash else None


def _region_diff(text: str, new: str, path: str, plan_path: str, markers: Tuple[str, str]) -> str:
    """What a stale generated region lacks and has beyond the plan's, in words ('their text differs' if neither)."""
    have, want = (_names(split(t, path, markers)[1]) for t in (text, new))
    extra, lacking = [s for s in have if s not in want], [s for s in want if s not in have]
    parts = ([f"lacks {', '.join(lacking)}"] if lacking else []) + \
        ([f"has {', '.join(extra)} (not in {plan_path})"] if extra else [])
    return "; ".join(parts) or "their text differs"


def generate_v2(plan: Mapping[str, Any], text: str, path: str = DVC_FILE, plan_path: str = PLAN_V2_FILE) -> str:
    """dvc.yaml's text with plan v2's stages rendered from `plan` (plan_v2.yaml); StagesError where a stage name
    collides with another stage of dvc.yaml."""
    before, _, after = split(text, path, (BEGIN_V2, END_V2))
    region = render_v2(plan, plan_path)
    clash = _clash(before, after, region)
    if clash:
        raise StagesError(f"{plan_path}: plan v2 stage '{clash}' is also another stage of {path}: rename the study")
    return before + region + after


def stale_v2(plan: Mapping[str, Any], path: str = DVC_FILE, plan_path: str = PLAN_V2_FILE) -> Optional[str]:
    """None where dvc.yaml's plan v2 stages are plan_v2.yaml's; else one line naming what is stale and the fix."""
    with open(path) as f:
        text = f.read()
    new = generate_v2(plan, text, path, plan_path)
    if new == text:
        return None
    return (f"{path}: its plan v2 stages are not {plan_path}'s "
            f"({_region_diff(text, new, path, plan_path, (BEGIN_V2, END_V2))}): run `python -m odevit.repro.stages`")


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
        return (f"{path}: its study stages are not {plan_path}'s "
                f"({_region_diff(text, new, path, plan_path, (BEGIN, END))}): run `python -m odevit.repro.stages`")
    missing = missing_folders(plan, os.path.dirname(os.path.abspath(path)), plan_path)
    if missing:
        return f"{missing[0]}: missing (its study's cells depend on the folder): run `python -m odevit.repro.stages`"
    return None


def _read_plan(path: str) -> Dict[str, Any]:
    """A plan file's YAML ({} if empty); StagesError naming the file where it is not valid YAML."""
    with open(path) as f:
        try:
            return yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            raise StagesError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Generate dvc.yaml's study stages from plan.yaml")
    ap.add_argument("--check", action="store_true", help="exit 1 naming what is stale; write nothing")
    ap.add_argument("--plan", default=PLAN_FILE)
    ap.add_argument("--plan-v2", default=PLAN_V2_FILE, help="plan v2's file (its stages: left as they are if absent)")
    ap.add_argument("--dvc", default=DVC_FILE)
    args = ap.parse_args(argv)
    try:
        if not os.path.isfile(args.plan) or not os.path.isfile(args.dvc):
            raise StagesError(f"{args.plan if not os.path.isfile(args.plan) else args.dvc}: not found (run from the "
                              "repository root)")
        plan = _read_plan(args.plan)
        plan_v2 = None
        if os.path.isfile(args.plan_v2):
            plan_v2 = _read_plan(args.plan_v2)
        else:
            print(f"{args.plan_v2}: not found; dvc.yaml's plan v2 stages left as they are")
        if args.check:
            problem = stale(plan, args.dvc, args.plan) or (stale_v2(plan_v2, args.dvc, args.plan_v2)
                                                           if plan_v2 is not None else None)
            if problem:
                print(problem, file=sys.stderr)
                return 1
            print(f"{args.dvc}: its study stages are {args.plan}'s"
                  + (f" and {args.plan_v2}'s" if plan_v2 is not None else ""))
            return 0
        with open(args.dvc) as f:
            text = f.read()
        new = generate(plan, text, args.dvc, args.plan)
        if plan_v2 is not None:
            new = generate_v2(plan_v2, new, args.dvc, args.plan_v2)
        if new != text:
            write_text(new[:-1] if new.endswith("\n") else new, args.dvc)  # write_text adds the final newline
        root = os.path.dirname(os.path.abspath(args.dvc))
        for p in missing_folders(plan, root, args.plan):
            os.makedirs(os.path.dirname(os.path.join(root, p)), exist_ok=True)
            open(os.path.join(root, p), "w").close()
            print(f"{p}: created (git add it: its study's cells depend on the folder)")
        n = len(studies(plan, args.plan))
        v2 = f" and {len(studies_v2(plan_v2, args.plan_v2))} plan v2 studies" if plan_v2 is not None else ""
        print(f"{args.dvc}: {'rewritten' if new != text else 'unchanged'}: the stages of {n} plan studies{v2}")
        return 0
    except (StagesError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
