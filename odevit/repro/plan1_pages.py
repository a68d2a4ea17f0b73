"""Plan 1's generated sections (docs/plan1.md): the key findings, the plan's verdicts, the machine shift and where
the runs' time went, read from results/evidence/ into their templates (docs/templates/NAME.md.j2)."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Tuple

import pandas as pd

from . import plan as plan_mod
from .wording import WORDS, fill, interval, read_json, read_yaml


def plan_verdicts(root: str = ".") -> str:
    """The plan's questions (plan.yaml, fixed before the runs) with their computed verdicts, confirmatory beside
    exploratory (results/evidence/claims.csv), and how many of the planned runs exist (results/evidence/runs.csv)."""
    c = pd.read_csv(os.path.join(root, "results/evidence/claims.csv"))
    runs = pd.read_csv(os.path.join(root, "results/evidence/runs.csv"))
    plan = plan_mod.load(os.path.join(root, plan_mod.PLAN_FILE))
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
    from . import config, study_teacher
    from .runner import kept_path
    from .verdicts import devices

    parts, total = [], 0
    for name, st in plan["studies"].items():
        done = runs[runs.study == name]
        have = set(zip(done.cell, done.seed.astype(int)))
        todo = [(c, s) for c in st["cells"] for s in st["seeds"] if (c, s) not in have]
        if not todo:
            continue
        total += len(todo)
        cells = list(dict.fromkeys(c for c, _ in todo))
        devs = sorted({d for m in done.machine.dropna() for d in devices(m)})
        where = f"only on {' or '.join(devs)}, the device of its other runs" if devs else "on any machine"
        trained = os.path.isfile(os.path.join(root, study_teacher.dirs(name)[1], "metrics.json"))  # recorded
        lost = [c for c in cells if trained and config.uses_study_teacher(st["cells"][c])
                and not os.path.isfile(os.path.join(root, kept_path(name)))]
        n = f"{len(todo)} run{'s' if len(todo) > 1 else ''}"
        parts.append(f"{name}, cell{'s' if len(cells) > 1 else ''} {', '.join(cells)}: {n}, {where}"
                     + (f"; {' and '.join(lost)} also need the study's own teacher, trained before the runner kept "
                        f"study teachers in git (no `{kept_path(name)}`): only the machine whose DVC cache holds it "
                        "can make them; without them their rows stay incomplete" if lost else ""))
    if not parts:
        return ""
    planned = sum(_planned(st) for st in plan["studies"].values())
    return (f"Runs not made yet ({total} of {planned}; `make evidence` lists and leaves out those its machine must "
            "not make, plan.yaml `rules.machine`): " + "; ".join(parts) + ".")


def key_findings(root: str = ".") -> str:
    """The README's opening: docs/findings.yaml's questions, each answered by its plan rows (confirmatory rows of
    results/evidence/claims.csv: number, interval at α each, verdict), grouped by the study's training images."""
    plan = plan_mod.load(os.path.join(root, plan_mod.PLAN_FILE))
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
    rows = ["| study | machine | runs (processes; most seeds in one) | training images | busy wall | "
            "process-seconds | images/s over the busy wall |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in pd.concat([t[t.study == "all"], t[t.study != "all"]]).itertuples():
        gone = f", {r.unrecorded} unrecorded" if r.unrecorded else ""
        rows.append(f"| {'**every study**' if r.study == 'all' else r.study} | {r.machine} | {r.runs} "
                    f"({r.processes}{gone}; {r.together_max}) | {r.train_images / 1e6:.2f} M | {r.busy_wall_s / 60:.1f} min "
                    f"| {r.process_s / 60:.1f} min | {r.img_per_s:,.0f}{' (at most)' if r.unrecorded else ''} |")
    return ("Every finished run of the plan, from the provenance each run records (`results/evidence/run_time.csv`, "
            "written by `dvc repro -s evidence`). *runs (processes; most seeds in one)*: a process trains one run, or "
            "with `--together K` up to K seeds of a cell; a resumed run adds a process. *busy wall*: the seconds at "
            "least one of the processes was running (each from its start-up to its end), so time between separate "
            "commands or sessions is left out and processes running at once count once. *process-seconds*: the "
            "processes' wall times summed. *unrecorded*: processes stopped before their first progress record, whose "
            "seconds no file holds; they are left out of the busy wall, so images/s is then an upper bound. "
            "*images/s*: training images over the busy wall, the machine's rate under that study's concurrency and "
            "budget (evaluation and start-up included), not one run's speed: rows run with other concurrency or "
            "budgets do not compare. The **every study** rows pool all runs on that machine type, from different "
            "days and machines of the kind; studies that shared a machine at once count the shared seconds once "
            "there.\n\n" + "\n".join(rows) + "\n\n" + _plan_time(root, t))


def _plan_time(root: str, t: pd.DataFrame) -> str:
    """The whole plan's training images (cells x seeds x images x epochs of every study, its teachers aside) and
    how long they take at each machine type's pooled rate of the table (its **every study** row): an extrapolation
    from measured rates, said as one."""
    from . import plan as plan_mod

    plan = plan_mod.load(os.path.join(root, plan_mod.PLAN_FILE))
    every = read_json(os.path.join(root, "results/02_teacher/metrics.json"))["train_images"]  # train_limit 0: all
    runs = images = 0
    for st in plan["studies"].values():
        n = _planned(st)
        runs += n
        images += n * (st["budget"]["train_limit"] or every) * st["budget"]["epochs"]
    done = t[t.study != "all"].train_images.sum()
    mins = {r.machine: (images / r.img_per_s / 60, r.unrecorded) for r in t[t.study == "all"].itertuples()}
    at = "; ".join(f"{m} {'≥' if gone else '≈'} " + (f"{v:,.0f} min" if v < 120 else f"{v / 60:,.0f} h")
                   for m, (v, gone) in mins.items())  # an upper-bound rate ("at most"): a lower-bound time
    return (f"The whole plan is {runs} runs and {images / 1e6:.2f} M training images (its teachers aside), "
            f"{done / 1e6:.2f} M of them trained (the table). At each machine type's pooled rate above, all of it "
            f"would take: {at} — an extrapolation from the measured rates, not a measured run of the whole plan.")


def _short_machine(m: str) -> str:
    """A machine_shift.csv machine ('CPU / GPU (torch v)', several joined by '; ') as its GPUs, or 'CPU (no GPU)'
    where there is none, with its torch version."""
    name, _, torch_v = m.partition(" (torch ")
    parts = []
    for one in name.split("; "):
        cpu, _, gpu = one.partition(" / ")
        parts.append(f"{cpu} (no GPU)" if gpu in ("", "no GPU") else gpu)
    return "; ".join(parts) + (f", torch {torch_v.rstrip(')')}" if torch_v else "")


def _num_or_dash(x: float, fmt: str) -> str:
    return "–" if pd.isna(x) else format(x, fmt)


def machine_shift_summary(root: str = ".") -> str:
    """One line for the findings: per replicate how far each cell's runs moved (machine_shift.csv's cell rows)."""
    t = pd.read_csv(os.path.join(root, "results/evidence/machine_shift.csv"))
    t = t[t.kind == "cell"]
    parts = []
    for (_, study), g in t.groupby(["replicate", "study"], sort=False):
        there, here = _short_machine(g.machine_replicate.iloc[0]), _short_machine(g.machine_here.iloc[0])
        if there == here:  # the same GPU model with other host CPUs: the full records tell them apart
            there, here = g.machine_replicate.iloc[0], g.machine_here.iloc[0]
        n = int(g.n.sum())
        moved = (f"all {n} runs the same test Acc@1" if int(g.identical.sum()) == n else
                 "each run's test Acc@1 moved at most " + ", ".join(
                     f"{r.shift_max_abs:.2f} pt in cell {r.name} (its seed SD {_num_or_dash(r.sd_here, '.2f')})"
                     for r in g.itertuples()) + f" ({g.n.max()} seeds)")
        parts.append(f"{study} on {there} against {here}: {moved}")
    return ("Trained again on another machine type (the same cells and seeds, by code recorded as giving bit-identical "
            "runs; \"Does the machine move the results?\" below), one line each:\n"
            + "\n".join(f"- {p}." for p in parts)) if parts else ""


def machine_shift(root: str = ".") -> str:
    """The machine as a measured variance component (results/evidence/machine_shift.csv, written by the evidence
    stage from plan.yaml's `replicates`): per replicated cell and question, the shift of its runs against the seed
    spread."""
    t = pd.read_csv(os.path.join(root, "results/evidence/machine_shift.csv"))
    head = ("The plan has no machine gate; the machine is measured beside the verdicts: a study's runs trained again "
            "on another machine type with the same cells and seeds (plan.yaml `replicates`), compared seed by seed "
            "(`results/evidence/machine_shift.csv`, written by `dvc repro -s evidence`). Each side is named with its "
            "torch and the training sources its runs record (*source*: a hash of the training code; different "
            "sources are ones `docs/evidence/source_equivalence.json` shows to give bit-identical runs on one "
            "machine). `acc1_half_n` / `acc1_sub_n`: a run's test Acc@1 at N/2 / at N solver steps, both on the "
            "step-count rows' test images. *shift*: the "
            "replicate's test Acc@1 − the committed run's, in points, with its 95 % interval over the seeds; a "
            "*question* row shifts the per-seed statistic its verdict rests on (a shift common to both cells cancels "
            "there). *SD here*: the same quantity's SD over all of the study's seeds in the committed runs. If the "
            "other machine changed each run as much as a new seed does, the shift's SD would be about √2 × that "
            "(ratio ≈ 1.41; 0 = the same numbers); the ratio's top, from the top of the shift SD's 95 % interval, is "
            "what the seeds cannot rule out. A mean shift whose interval excludes 0 is a systematic machine effect, "
            "which no seed interval sees.")
    if t.empty:
        return head + "\n\nNo replicate measured yet."
    out = [head]
    for (rep, study), g in t.groupby(["replicate", "study"], sort=False):
        r0 = g.iloc[0]
        rows = [f"{study}, committed on {r0.machine_here}, source {r0.source_here} → replicate on "
                f"{r0.machine_replicate}, source {r0.source_replicate} (`{rep}`):", "",
                "| cell or question | seeds | shift: mean [95 % interval] | shift SD (95 % top) | largest \\|shift\\| "
                "| seeds identical | SD here | shift SD / SD here (top) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in g.itertuples():
            ok = r.sd_here > 0 and not pd.isna(r.shift_sd)
            ratio = f"{r.shift_sd / r.sd_here:.2f} ({r.shift_sd_upper / r.sd_here:.2f})" if ok else "–"
            rows.append(f"| {r.name} | {r.seeds} | {r.shift_mean:+.2f}{interval(r.ci_low, r.ci_high)} pt | "
                        f"{_num_or_dash(r.shift_sd, '.2f')} ({_num_or_dash(r.shift_sd_upper, '.2f')}) pt | "
                        f"{r.shift_max_abs:.2f} pt | {r.identical} of {r.n} | {_num_or_dash(r.sd_here, '.2f')} pt | "
                        f"{ratio} |")
        out.append("\n".join(rows))
    return "\n\n".join(out)


V2_LABELS = {"ts_minus_free": "label-free − free ODE", "ce_minus_free": "+CE − free ODE",
             "retention": "label-free − its teacher", "half_n": "N/2 − N", "double_n": "2N − N",
             "unseen": "worst never-trained N − N", "unseen_inside": "worst never-trained N inside its range − N",
             "unseen_below": "worst N below its range − N", "centernorm_minus_layernorm": "CenterNorm − LayerNorm",
             "jasmin_on_minus_off": "JaSMin on − off", "strong_minus_weak_teacher": "v2 teacher − plan-1 teacher"}


SECTIONS: Dict[str, Callable[[str], str]] = {
    "key-findings": key_findings, "plan-verdicts": plan_verdicts, "machine-shift": machine_shift,
    "evidence-time": evidence_time}
