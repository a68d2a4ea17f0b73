"""Plan 1's generated sections (docs/plan1.md): the key findings, the plan's verdicts, the machine shift and where
the runs' time went, read from results/evidence/ into their templates (docs/templates/NAME.md.j2)."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Tuple

import pandas as pd

from .wording import WORDS, fill, read_json, read_yaml


def _plan(root: str) -> Dict[str, Any]:
    """plan.yaml, checked (odevit.repro.plan: it checks cell keys against config, which imports torch: so only here)."""
    from . import plan as plan_mod

    return plan_mod.load(os.path.join(root, plan_mod.PLAN_FILE))


def plan_verdicts(root: str = ".") -> str:
    """The plan's questions (plan.yaml, fixed before the runs) with their computed verdicts, confirmatory beside
    exploratory (results/evidence/claims.csv), and how many of the planned runs exist (results/evidence/runs.csv)."""
    c = pd.read_csv(os.path.join(root, "results/evidence/claims.csv"))
    runs = pd.read_csv(os.path.join(root, "results/evidence/runs.csv"))
    plan = _plan(root)
    first = lambda g: g.iloc[0] if len(g) else None  # noqa: E731
    return fill("plan-verdicts", t=read_json(os.path.join(root, "results/02_teacher/metrics.json")), runs=runs,
                test_images=read_json(os.path.join(root, "results/01_data/metrics.json"))["test_size"],
                prm=read_yaml(os.path.join(root, "params.yaml")), plan=plan, reps=replications(c),
                mixed=int(c.verdict.astype(str).str.startswith(("mixed machines", "mixed teachers")).sum()),
                post=int(c.post_hoc.sum()), planned=sum(_planned(st) for st in plan["studies"].values()),
                machines=", ".join(sorted(runs.machine.dropna().unique())), findings=findings(c, plan, runs),
                questions=[(k, first(g[g.status != "exploratory"]), first(g[g.status == "exploratory"]), g.iloc[0])
                           for k, g in c.groupby(["study", "question"], sort=False)])


DECIDED = ("supports", "contradicts")


def replication(confirmatory: str, exploratory: str) -> str:
    """Whether a confirmatory verdict replicates the exploratory one of the same question (both judged by the plan):
    replicated (the same decided verdict), reversed (the other one), decided only now (exploratory inconclusive),
    not replicated (exploratory decided, confirmatory inconclusive), neither decided, or not judged yet
    (confirmatory not measured, incomplete or not converged: numbers without a verdict)."""
    c, e = (str(v).replace(" (post hoc)", "") for v in (confirmatory, exploratory))
    if c not in DECIDED + ("inconclusive",):
        return "not judged yet"
    if c in DECIDED:
        return "replicated" if e == c else "reversed" if e in DECIDED else "decided only now"
    return "not replicated" if e in DECIDED else "neither decided"


def replications(c: pd.DataFrame) -> Dict[Tuple[str, str], str]:
    """`replication` of every (study, question) of claims.csv that has both a confirmatory and an exploratory row."""
    out = {}
    for (study, q), g in c.groupby(["study", "question"], sort=False):
        conf, expl = g[g.status != "exploratory"], g[g.status == "exploratory"]
        if len(conf) and len(expl):
            out[(study, q)] = replication(conf.iloc[0].verdict, expl.iloc[0].verdict)
    return out


def replication_summary(c: pd.DataFrame) -> str:
    """One sentence: how the confirmatory rows answered the exploratory verdicts they re-asked."""
    out: Dict[str, List[str]] = {}
    for (study, q), rep in replications(c).items():
        out.setdefault(rep, []).append(f"{study} `{q}`")
    if not out:
        return ""
    order = ["replicated", "decided only now", "reversed", "not replicated", "neither decided", "not judged yet"]
    return ("Against the exploratory runs (seeds 0-2, judged by the same plan): " + "; ".join(
        f"{k} {len(out[k])} ({', '.join(out[k])})" for k in order if k in out) + ".")


def _images(plan: Dict[str, Any], study: str, all_images: int, with_epochs: bool = False) -> str:
    budget = plan["studies"][study]["budget"]
    return f"{budget['train_limit'] or all_images:,} images" + (f" × {budget['epochs']} epochs" if with_epochs else "")


def _schedules_differ(plan: Dict[str, Any], studies: Iterable[str]) -> bool:
    """Whether two of these studies train on the same images for different epochs (a finding then names each
    study's epochs beside its images, so the two schedules read apart)."""
    budgets = {(plan["studies"][s]["budget"]["train_limit"], plan["studies"][s]["budget"]["epochs"])
               for s in studies if s in plan["studies"]}
    return len(budgets) != len({n for n, _ in budgets})


def _planned(study: Dict[str, Any]) -> int:
    """A plan study's runs: its cells x its seeds."""
    return len(study["cells"]) * len(study["seeds"])


def missing_runs(plan: Dict[str, Any], runs: pd.DataFrame, root: str = ".") -> str:
    """The plan's runs not made yet, per study: their cells and number, the one device they may be made on (that of
    the study's finished runs: plan.yaml rules.machine; `runner` leaves them out elsewhere), and the cells that also
    need the study's own teacher where its training is recorded but it is not kept in git (`runner.kept_path`: then
    only the machine whose DVC cache holds it can make them). '' when every run is in."""
    from . import config
    from .results import kept_path, teacher_dirs
    from .verdicts import devices

    studies = []
    for name, st in plan["studies"].items():
        done = runs[runs.study == name]
        have = set(zip(done.cell, done.seed.astype(int)))
        todo = [(c, s) for c in st["cells"] for s in st["seeds"] if (c, s) not in have]
        cells = list(dict.fromkeys(c for c, _ in todo))
        trained = os.path.isfile(os.path.join(root, teacher_dirs(name)[1], "metrics.json"))  # recorded
        lost = [c for c in cells if trained and config.uses_study_teacher(st["cells"][c])
                and not os.path.isfile(os.path.join(root, kept_path(name)))]
        if todo:
            studies.append((name, cells, len(todo), sorted({d for m in done.machine.dropna() for d in devices(m)}),
                            lost, kept_path(name)))
    return fill("missing-runs", studies=studies, total=sum(s[2] for s in studies),
                planned=sum(_planned(st) for st in plan["studies"].values())) if studies else ""


def key_findings(root: str = ".") -> str:
    """The README's opening: docs/findings.yaml's questions, each answered by its plan rows (confirmatory rows of
    results/evidence/claims.csv: number, interval at α each, verdict), grouped by the study's training images."""
    plan = _plan(root)
    claims = pd.read_csv(os.path.join(root, "results/evidence/claims.csv"))
    c = claims[claims.status == "confirmatory"].set_index(["study", "question"])
    t = read_json(os.path.join(root, "results/02_teacher/metrics.json"))  # its training images: a study's "all"
    answers = []
    for f in read_yaml(os.path.join(root, "docs/findings.yaml"))["findings"]:
        parts, last = [], None
        epochs = _schedules_differ(plan, {ref.split(".", 1)[0] for _, ref in f["rows"]})
        for label, ref in f["rows"]:
            study, q = ref.split(".", 1)
            if (study, q) not in c.index:
                raise ValueError(f"docs/findings.yaml: {ref} is not a confirmatory row of results/evidence/claims.csv")
            where = _images(plan, study, t["train_images"], epochs)
            parts.append((None if where == last else where, label, c.loc[(study, q)]))
            last = where
        answers.append((f, parts))
    runs = pd.read_csv(os.path.join(root, "results/evidence/runs.csv"))
    params, cells = read_yaml(os.path.join(root, "params.yaml")), WORDS["cells"]
    scale = []  # the studies on all their images: each cell's mean Acc@1 at N and N/2
    for name in [n for n, st in plan["studies"].items() if not st["budget"]["train_limit"]]:
        big = runs[runs.study == name]
        if len(big):
            scale.append((name, plan["studies"][name]["budget"]["epochs"], big.groupby("cell")[
                ["acc1", "acc1_half_n", "acc1_sub_n"]].mean().reindex([k for k in cells if k in set(big.cell)])))
    limit = {k: v["budget"]["train_limit"] for k, v in plan["studies"].items()}
    pending = sorted({(st, q) for st, q in c.index for st2, q2 in c.index  # same question, same images, no runs yet
                      if q == q2 and st2 != st and limit[st] == limit[st2] and c.loc[(st, q)].n == 0
                      and c.loc[(st2, q2)].verdict == "not converged"})
    return fill("key-findings", answers=answers, scale=scale, cells=cells, teacher=100 * t["acc1"], plan=plan,
                n_steps=params["distill"]["num_steps"], sub=params["study"]["robustness_test_limit"],
                weak=any("free" in g.index and 100 * t["acc1"] < g.acc1["free"] for _, _, g in scale),
                pending=pending, missing=missing_runs(plan, runs, root), replicated=replication_summary(claims),
                shift=machine_shift_summary(root))


def findings(c: pd.DataFrame, plan: Dict[str, Any], runs: pd.DataFrame) -> str:
    """One bullet per study of the plan: its description, then each question's claim, our number and its verdict
    (confirmatory rows only), in words a reader can quote; a study with runs that missed the convergence rule names
    them with their tail gain and threshold."""
    studies = []
    for name, st in plan["studies"].items():
        g = c[(c.study == name) & (c.status != "exploratory")]
        mine = runs[runs.study == name]
        studies.append((name, st, None if g.empty or not g.n.any() else g, mine,
                        list(mine[~mine.converged.astype(bool)].itertuples()), st.get("convergence") == "cell_mean"))
    return fill("findings", studies=studies)


def evidence_time(root: str = ".") -> str:
    """Where each study's runs trained and how fast, from their recorded provenance (results/evidence/run_time.csv,
    written by the evidence stage): per machine over every study, then per study."""
    t = pd.read_csv(os.path.join(root, "results/evidence/run_time.csv"))
    return fill("evidence-time", rows=list(pd.concat([t[t.study == "all"], t[t.study != "all"]]).itertuples()),
                plan_time=_plan_time(root, t))


def _plan_time(root: str, t: pd.DataFrame) -> str:
    """The whole plan's training images (cells x seeds x images x epochs of every study, its teachers aside) and
    how long they take at each machine type's pooled rate of the table (its **every study** row): an extrapolation
    from measured rates, said as one (a rate that is an upper bound, with unrecorded processes: a lower-bound time)."""
    plan = _plan(root)
    every = read_json(os.path.join(root, "results/02_teacher/metrics.json"))["train_images"]  # train_limit 0: all
    studies = plan["studies"].values()
    images = sum(_planned(st) * (st["budget"]["train_limit"] or every) * st["budget"]["epochs"] for st in studies)
    return fill("plan-time", runs=sum(_planned(st) for st in studies), images=images,
                done=t[t.study != "all"].train_images.sum(),
                at=[(r.machine, images / r.img_per_s / 60, r.unrecorded) for r in t[t.study == "all"].itertuples()])


def _short_machine(m: str) -> str:
    """A machine_shift.csv machine ('CPU / GPU (torch v)', several joined by '; ') as its GPUs, or 'CPU (no GPU)'
    where there is none, with its torch version."""
    name, _, torch_v = m.partition(" (torch ")
    parts = []
    for one in name.split("; "):
        cpu, _, gpu = one.partition(" / ")
        parts.append(f"{cpu} (no GPU)" if gpu in ("", "no GPU") else gpu)
    return "; ".join(parts) + (f", torch {torch_v.rstrip(')')}" if torch_v else "")


def machine_shift_summary(root: str = ".") -> str:
    """One line for the findings: per replicate how far each cell's runs moved (machine_shift.csv's cell rows); the
    machines by their GPUs, or whole where those are the same (other host CPUs: the full records tell them apart)."""
    t = pd.read_csv(os.path.join(root, "results/evidence/machine_shift.csv"))
    groups = []
    for (_, study), g in t[t.kind == "cell"].groupby(["replicate", "study"], sort=False):
        whole = g.machine_replicate.iloc[0], g.machine_here.iloc[0]
        short = tuple(_short_machine(m) for m in whole)
        groups.append((study, *(short if short[0] != short[1] else whole), g))
    return fill("machine-shift-summary", groups=groups) if groups else ""


def machine_shift(root: str = ".") -> str:
    """The machine as a measured variance component (results/evidence/machine_shift.csv, written by the evidence
    stage from plan.yaml's `replicates`): per replicated cell and question, the shift of its runs against the seed
    spread."""
    t = pd.read_csv(os.path.join(root, "results/evidence/machine_shift.csv"))
    return fill("machine-shift", groups=list(t.groupby(["replicate", "study"], sort=False)))

SECTIONS: Dict[str, Callable[[str], str]] = {
    "key-findings": key_findings, "plan-verdicts": plan_verdicts, "machine-shift": machine_shift,
    "evidence-time": evidence_time}
