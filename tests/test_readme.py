"""Every result number in the generated sections of the README and the docs pages equals what the committed results
files give."""
import re
import shutil
from pathlib import Path

import yaml

from odevit.repro import plan1_pages, readme, report, results_pages, stats
from test_study import _results

ROOT = Path(__file__).resolve().parents[1]


def test_readme_result_sections_match_the_results_files():
    assert readme.stale(str(ROOT / "README.md"), str(ROOT)) == [], "python -m odevit.repro.readme, then commit"


def test_every_section_is_on_exactly_one_page():
    where = readme.placement(str(ROOT))
    assert set(where) == set(readme.SECTIONS)
    assert where["v2-claims"] == "README.md" and where["v2-verdicts"] == "docs/v2.md"  # plan v2 leads the README
    assert where["key-findings"] == where["plan-verdicts"] == where["machine-shift"] == "docs/plan1.md"
    assert where["run-time"] == where["dynamics-summary"] == "docs/results.md"  # the quick run
    assert where["converged-study"] == where["budget-curve"] == where["float-noise"] == "docs/exploratory.md"


def test_the_first_screen_is_the_answer():
    """The README (a page people read: <= 150 lines, <= 2,000 words, no line over 300 characters) opens with what
    this is in one paragraph, then plan v2's findings in words and its claims table (claim, the paper's number, ours,
    verdict, the notebook that shows it), then install, loading a model, the layer in timm code and distilling from
    one's own teacher, all within the first 60 lines; then the two commands, plan 1 and the quick run in a paragraph
    each, and where to read on; plan 1 in full, every v2 row, the quick run and the exploratory studies are pages it
    links, their links rewritten for the page they are on."""
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 150 and len(text.split()) <= 2000 and max(map(len, lines)) <= 300
    order = ["## What we found", "<!-- v2-claims -->", "| claim (the paper's) | paper | ours", "## Install",
             "```python", "## Distil from your own teacher", "loss.backward()", "## Two commands", "## Plan 1",
             "](docs/plan1.md)", "## Read on"]
    at = [text.index(o) for o in order]
    assert at == sorted(at) and at[0] < 2000
    assert text[:text.index("loss.backward()")].count("\n") < 60  # the snippets within the first 60 lines
    table = text[text.index("| claim (the paper's)"):text.index("<!-- /v2-claims -->")]
    for nb in ("04_v2_budget", "05_v2_steps", "07_v2_design"):
        assert f"](outputs/{nb}.ipynb)" in table and (ROOT / f"outputs/{nb}.ipynb").is_file()
    for page in ("usage", "results", "exploratory", "pipeline", "paper", "published_code", "performance",
                 "reproducibility", "plan", "plan1", "v2"):
        assert f"(docs/{page}.md)" in text and (ROOT / f"docs/{page}.md").is_file()
    res = (ROOT / "docs/results.md").read_text()
    end = res.index("<!-- /dynamics-summary -->")
    assert end < res.index("](../results/06_dynamics/lyapunov.png)") < end + 400  # the dynamics' figures under it
    exp = (ROOT / "docs/exploratory.md").read_text()
    assert exp.index("<!-- converged-study -->") < exp.index("](evidence/converged_fmnist/results/07_report/claims.png)")
    p1 = (ROOT / "docs/plan1.md").read_text()
    assert p1.index("<!-- key-findings -->") < p1.index("](../results/evidence/teacher_by_images.png)")
    assert "](docs/" not in res + exp + p1 and "](results/" not in res + exp + p1  # links from docs/, not the root


def test_section_links_are_rewritten_for_the_page():
    body = "[a](docs/evidence/x.png) [b](results/y.csv) [c](https://h/z) [d](#t) [e](../up)"
    assert readme.relative_links(body, "README.md") == body
    assert readme.relative_links(body, "docs/results.md") == "[a](evidence/x.png) [b](../results/y.csv) [c](https://h/z) [d](#t) [e](../up)"


def test_a_changed_number_is_caught(tmp_path):
    text = (ROOT / "README.md").read_text()
    found = text.split("<!-- v2-claims -->")[1].split("<!-- /v2-claims -->")[0]
    line = next(l for l in found.splitlines() if l.startswith("| Distillation with CE") and " [" in l)
    edited = line.replace(" [", "1 [", 1)  # a hand edit of one number
    assert edited != line
    (tmp_path / "README.md").write_text(text.replace(line, edited))
    assert readme.stale(str(tmp_path / "README.md"), str(ROOT)) == ["v2-claims"]


def test_claims_section_shows_verdicts_and_follows_them(tmp_path):
    for name, teacher in [("a", 0.852), ("b", 0.95)]:  # b: retention 0.84, below 0.939 - 1 pt / teacher
        root = tmp_path / name
        _results(root / "results", teacher=teacher)
        c = report.claims(str(root / "results"))
        (root / "results/07_report").mkdir()
        c.to_csv(root / "results/07_report/claims.csv", index=False)
        (root / "params.yaml").write_text("study: {reference: ref}\n")
        text = results_pages.claims_table(str(root))
        row = next(line for line in text.splitlines() if line.startswith("| `retention`"))
        want = stats.SUPPORTS if name == 'a' else stats.CONTRADICTS
        assert row.endswith(f"**{want}** (replicates {c.set_index('claim').replication['retention']:.2f}) |")
        assert f"> {0.867 / 0.923 - 0.01 / teacher:.3g} (the paper's − margin)" in row and "authors' README table" in row
        assert f"Verdicts of this run: **{report.summary_line(c)}**" in text
        assert "(Holm p " in next(line for line in text.splitlines() if line.startswith("| `centernorm"))


def test_machine_shift_line_and_table_follow_the_csv(tmp_path):
    """The findings' machine line and the machine-shift table read results/evidence/machine_shift.csv: a replicate
    whose runs all gave the same Acc@1 says so; one that moved gives each cell's largest shift beside its seed SD; the
    table's ratio is shift SD / SD here (0.08 / 0.2 = 0.40; top 0.5 / 0.2 = 2.50); a row of one seed has no SD (–);
    machines are shortened to their GPUs (several joined), or kept whole where the short names are the same."""
    import pandas as pd

    (tmp_path / "results/evidence").mkdir(parents=True)
    gpu, cpu = "Xeon / NVIDIA H100 (torch 2.11)", "AMD EPYC / no GPU (torch 2.14)"
    row = dict(replicate="r", study="s", kind="cell", name="ref", n=3, seeds="1 2 3", shift_mean=0.0, shift_sd=0.0,
               ci_low=0.0, ci_high=0.0, shift_sd_upper=0.0, shift_max_abs=0.0, identical=3, sd_here=0.2,
               machine_here=gpu, machine_replicate=cpu, source_here="a", source_replicate="b")
    path = tmp_path / "results/evidence/machine_shift.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    line = plan1_pages.machine_shift_summary(str(tmp_path))
    assert "s on AMD EPYC (no GPU), torch 2.14 against NVIDIA H100, torch 2.11: all 3 runs the same test Acc@1." in line
    moved = dict(row, shift_mean=0.05, shift_sd=0.08, ci_low=-0.15, ci_high=0.25, shift_sd_upper=0.5,
                 shift_max_abs=0.1, identical=0)
    one = dict(row, name="free", n=1, seeds="1", shift_mean=0.3, shift_sd=float("nan"), ci_low=float("nan"),
               ci_high=float("nan"), shift_sd_upper=float("nan"), shift_max_abs=0.3, identical=0, sd_here=0.4)
    pd.DataFrame([moved, one]).to_csv(path, index=False)
    line = plan1_pages.machine_shift_summary(str(tmp_path))
    assert ("moved at most 0.10 pt in cell ref (its seed SD 0.20), 0.30 pt in cell free (its seed SD 0.40) "
            "(3 seeds).") in line
    table = plan1_pages.machine_shift(str(tmp_path))
    assert "| ref | 1 2 3 | +0.05 [-0.15, +0.25] pt | 0.08 (0.50) pt | 0.10 pt | 0 of 3 | 0.20 pt | 0.40 (2.50) |" in table
    assert "| free | 1 | +0.30 pt | – (–) pt | 0.30 pt | 0 of 1 | 0.40 pt | – |" in table
    assert f"s, committed on {gpu}, source a → replicate on {cpu}, source b (`r`):" in table
    assert plan1_pages._short_machine("A / H100; B / H200 (torch 2.1)") == "H100; H200, torch 2.1"
    two = pd.DataFrame([row, dict(row, replicate="r2", study="t")])
    two.to_csv(path, index=False)
    lines = plan1_pages.machine_shift_summary(str(tmp_path)).splitlines()  # a replicate a line: the first screen stays short
    assert [ln[:7] for ln in lines[1:]] == ["- s on ", "- t on "] and len(lines) == 3
    twin = dict(row, machine_here="Xeon / NVIDIA H100 (torch 2.11)", machine_replicate="EPYC / NVIDIA H100 (torch 2.11)")
    pd.DataFrame([twin]).to_csv(path, index=False)
    assert "s on EPYC / NVIDIA H100 (torch 2.11) against Xeon / NVIDIA H100 (torch 2.11):" in \
        plan1_pages.machine_shift_summary(str(tmp_path))


def test_findings_name_epochs_only_where_two_schedules_share_the_images():
    b = lambda n, e: {"budget": {"train_limit": n, "epochs": e}}  # noqa: E731
    plan = {"studies": {"s20": b(0, 20), "s40": b(0, 40), "k1": b(1000, 150), "k3": b(3000, 60), "k3b": b(3000, 60)}}
    assert plan1_pages._schedules_differ(plan, ["s20", "s40"])
    assert not plan1_pages._schedules_differ(plan, ["k1", "k3"])  # other images: the images tell them apart
    assert not plan1_pages._schedules_differ(plan, ["k3", "k3b"])  # the same schedule twice: nothing to tell apart
    assert plan1_pages._images(plan, "s40", 55_000, True) == "55,000 images × 40 epochs"
    assert plan1_pages._images(plan, "k3", 55_000) == "3,000 images"


def test_plan_time_extrapolates_each_machines_pooled_rate(tmp_path, monkeypatch):
    """7 runs: 2 cells x 3 seeds x 50,000 images x 10 epochs + 1 x 2,000 x 5 = 3,010,000 images; at 3,010,000 images
    per 10 min a machine takes 10 min, at a rate 5 h would give '5 h'; a rate that is an upper bound (unrecorded
    processes) gives a lower-bound time (≥)."""
    import pandas as pd
    from odevit.repro import plan as plan_mod

    plan = {"studies": {"x": {"cells": {"a": {}, "b": {}}, "seeds": [1, 2, 3], "budget": {"train_limit": 0, "epochs": 10}},
                        "y": {"cells": {"a": {}}, "seeds": [1], "budget": {"train_limit": 2000, "epochs": 5}}}}
    monkeypatch.setattr(plan_mod, "load", lambda path: plan)
    (tmp_path / "results/02_teacher").mkdir(parents=True)
    (tmp_path / "results/02_teacher/metrics.json").write_text('{"train_images": 50000}')
    img = 3_010_000
    t = pd.DataFrame([dict(study="all", machine="G", unrecorded=0, img_per_s=img / 600, train_images=1),
                      dict(study="all", machine="C", unrecorded=0, img_per_s=img / 18_000, train_images=1),
                      dict(study="all", machine="U", unrecorded=2, img_per_s=img / 1800, train_images=1),
                      dict(study="x", machine="G", unrecorded=0, img_per_s=1, train_images=1_000_000),
                      dict(study="y", machine="C", unrecorded=0, img_per_s=1, train_images=500_000)])
    line = plan1_pages._plan_time(str(tmp_path), t)
    assert line.startswith("The whole plan is 7 runs and 3.01 M training images (its teachers aside), 1.50 M of them")
    assert "G ≈ 10 min; C ≈ 5 h; U ≥ 30 min" in line


def test_runs_not_made_yet_name_their_device_and_a_teacher_not_kept(tmp_path):
    """The first screen's 'Runs not made yet' line, by hand: per study the missing cells and count, the one device its
    finished runs used, and the cells of a study teacher that is not kept in git; gone when every run is in."""
    import pandas as pd

    plan = {"studies": {
        "a": {"cells": {"ref": {}, "ce": {}}, "seeds": [1, 2]},
        "b": {"cells": {"ref": {}, "ref_strong": {"teacher": "study"}}, "seeds": [7]}}}
    runs = pd.DataFrame([dict(study="a", cell="ref", seed=s, machine="Xeon / NVIDIA H200") for s in (1, 2)]
                        + [dict(study="b", cell="ref", seed=7, machine="AMD EPYC / no GPU")])
    assert "also need" not in plan1_pages.missing_runs(plan, runs, str(tmp_path))  # its teacher not trained yet
    (tmp_path / "results/studies/b/teacher").mkdir(parents=True)
    (tmp_path / "results/studies/b/teacher/metrics.json").write_text("{}")  # trained: recorded in results
    line = plan1_pages.missing_runs(plan, runs, str(tmp_path))
    assert line.startswith("Runs not made yet (3 of 6;")
    assert "a, cell ce: 2 runs, only on NVIDIA H200, the device of its other runs" in line
    assert "b, cell ref_strong: 1 run, only on AMD EPYC" in line and "ref_strong also need the study's own" in line
    kept = tmp_path / "weights/study_teachers/b/best.pt"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"t")
    assert "also need" not in plan1_pages.missing_runs(plan, runs, str(tmp_path))  # kept in git: any clone has it
    full = pd.concat([runs, pd.DataFrame([dict(study="a", cell="ce", seed=s, machine="x / NVIDIA H200") for s in (1, 2)]
                                         + [dict(study="b", cell="ref_strong", seed=7, machine="AMD EPYC / no GPU")])])
    assert plan1_pages.missing_runs(plan, full, str(tmp_path)) == ""


def test_a_studys_line_counts_its_converged_runs_where_some_did_not():
    """The per-study list: a study described as 'the converged budget' whose runs did not all converge says how many
    did, beside the description the plan fixed; a study whose runs all converged adds nothing."""
    import pandas as pd

    plan = {"studies": {"a": {"description": "all images (the converged budget)"}, "b": {"description": "few images"}}}
    c = pd.DataFrame([dict(study=s, status="confirmatory", n=2, mean=1.0, unit="pt", ci_low=0.5, ci_high=1.5,
                           claim="x beats y", verdict="supports") for s in ("a", "b")])
    runs = pd.DataFrame([dict(study="a", cell="free", seed=s, converged=s == 0, gain_last_pts=0.5, threshold_pts=0.4)
                         for s in (0, 1, 2)] + [dict(study="b", cell="free", seed=0, converged=True, gain_last_pts=0.0,
                                                     threshold_pts=0.4)])
    out = plan1_pages.findings(c, plan, runs)
    assert "- **a** — all images (the converged budget) [1 of 3 runs converged by the plan's rule]:" in out
    assert "- **b** — few images:" in out
    runs.loc[runs.study == "a", "converged"] = True
    assert "runs converged by the plan's rule" not in plan1_pages.findings(c, plan, runs)


def test_the_readme_writer_is_small_and_its_wording_is_data():
    """Issue 55: the code that writes README.md stays within 300 lines; the words are templates
    (docs/templates/NAME.md.j2), each one filled by some section's code or included by another template."""
    import re

    assert len((ROOT / "odevit/repro/readme.py").read_text().splitlines()) <= 300
    code = "".join(p.read_text() for p in (ROOT / "odevit/repro").glob("*.py"))
    templates = sorted((ROOT / "docs/templates").glob("*.md.j2"))
    used = set(re.findall(r'fill\("([\w-]+)"', code)) | {
        m[:-len(".md.j2")] for t in templates for m in re.findall(r'include "([\w.-]+)"', t.read_text())}
    assert {t.name[:-len(".md.j2")] for t in templates} == used


def test_the_key_names_the_machine_shift_case_only_while_a_row_is_in_it(tmp_path):
    """The full key (README, section v2-key) defines "(machine shift)" while some row of results/v2/claims.csv awaits
    its measured shift, and leaves it out once none does (a reader would look for such a row)."""
    from odevit.repro import v2_pages

    import pandas as pd

    (tmp_path / "results/v2/teacher").mkdir(parents=True)
    shutil.copy(ROOT / "results/v2/teacher/selected.json", tmp_path / "results/v2/teacher/selected.json")
    shutil.copy(ROOT / "results/v2/claims.csv", tmp_path / "results/v2/claims.csv")

    c = pd.read_csv(tmp_path / "results/v2/claims.csv")
    waiting = any(v2_pages.awaits_shift(v) for v in c.verdict)  # the committed rows
    assert ("(*machine shift*)" in v2_pages.v2_key(str(tmp_path))) == waiting
    c.loc[0, "verdict"] = "not measured yet (machine shift between CPU: a and GPU: b)"
    c.to_csv(tmp_path / "results/v2/claims.csv", index=False)
    assert "(*machine shift*)" in v2_pages.v2_key(str(tmp_path))
    c.loc[0, "verdict"] = "not measured yet (0 of 4 seeds)"
    c.to_csv(tmp_path / "results/v2/claims.csv", index=False)
    assert "(*machine shift*)" not in v2_pages.v2_key(str(tmp_path))


def _claims_text(tmp_path, c) -> str:
    """The README's claims section (v2_pages.v2_claims) rendered from claims.csv `c`, written under tmp_path, with
    its whitespace collapsed (the template wraps lines)."""
    from odevit.repro import v2_pages

    c.to_csv(tmp_path / "results/v2/claims.csv", index=False)
    return " ".join(v2_pages.v2_claims(str(tmp_path)).split())


def test_the_short_key_under_the_table_gives_the_margins_and_levels_of_claims_csv(tmp_path):
    """The short key under the README's claims table (section v2-claims) states the margins and interval levels a
    verdict reads against, from results/v2/claims.csv: a changed margin or alpha changes it, and a test kind with no
    row leaves its clause out (the full key below the snippets says the same at length)."""
    import pandas as pd

    (tmp_path / "results/v2").mkdir(parents=True)
    c = pd.read_csv(ROOT / "results/v2/claims.csv")

    def short():
        text = _claims_text(tmp_path, c)
        return text[text.index("*supports* / *contradicts*"):]

    eq, ni = c.margin[c.test == "equivalence"].iloc[0], c.margin[c.test == "non_inferiority"].iloc[0]
    text = short()
    assert f"inside / outside ±{float(eq)} pt for \"robust\"" in text
    assert (f"above / below −{round(float(ni), 2)} pt (the teacher's own seed-and-test spread) for \"competitive\""
            in text)
    assert f"{100 * (1 - c.alpha_each.max()):.4g} %–{100 * (1 - c.alpha_each.min()):.4g} %" in text
    c.loc[c.test == "equivalence", "margin"] = 2.5
    c.loc[c.test == "non_inferiority", "margin"] = 1.25
    c.loc[:, "alpha_each"] = [0.02 if i % 2 else 0.1 for i in range(len(c))]
    text = short()
    assert "±2.5 pt for \"robust\"" in text and "seeds, 90 %–98 %)" in text
    assert "−1.25 pt (the teacher's own seed-and-test spread) for \"competitive\"" in text
    c.loc[:, "alpha_each"] = 0.01
    c.loc[c.test.isin(["equivalence", "non_inferiority"]), "test"] = "superiority"
    text = short()
    assert "seeds, 99 %)" in text and "robust" not in text and "competitive" not in text and "− pt" not in text


def test_no_verdict_line_names_the_cells_whose_runs_hold_rows_back(tmp_path):
    """The findings' "No verdict" line says which cells' runs still learning hold the not-converged rows back, and
    how many rows each (claims.csv `still_learning`, counted here apart from the page's code); with no row left
    learning it says only the counts."""
    from odevit.repro import wording

    import pandas as pd

    (tmp_path / "results/v2").mkdir(parents=True)
    c = pd.read_csv(ROOT / "results/v2/claims.csv")

    def line():
        text = _claims_text(tmp_path, c)
        return text[text.index("**No verdict**"):text.index("| claim")]

    nc = c[c.verdict.str.startswith("not converged")]
    words = {**wording.WORDS["v2_who"], **wording.WORDS["cells"]}
    held = nc.assign(part=nc.still_learning.str.split(", ")).explode("part")
    held["name"] = [f"{int(b.split()[0]) // 1000}k {words[p.split()[0]]} {p.split()[1].replace('/', ' of ')}"
                    for b, p in zip(held.budget, held.part)]
    counts = held.name.value_counts()
    text = line()
    assert f"{len(nc)} not converged (runs still learning:" in text
    for name, n in counts.items():
        assert (f"{name}, {n} rows;" if n > 1 else name) in text, (name, n)
    c.loc[nc.index, "still_learning"] = "free 3/6"  # every such row now waits on one cell
    c.loc[nc.index, "budget"] = "2000 images x 10 epochs"
    assert f"runs still learning: 2k free ODE 3 of 6, {len(nc)} rows;" in line()
    c.loc[nc.index, "verdict"] = "inconclusive"
    text = line()
    assert f"rows: {len(c[c.verdict == 'inconclusive'])} inconclusive." in text  # no zero counts named
    assert "not converged" not in text and "runs still learning" not in text and "read anyway" not in text


def test_a_study_still_training_names_its_resume_files_only_while_git_holds_them(tmp_path):
    """docs/v2.md's "Not measured yet" line names the resume files (checkpoints/v2/STUDY/CELL/last.pt) a study not
    made yet continues from, as git holds them: none, or a local file git does not track (a run in progress on this
    machine), leaves them unnamed; once added, each is named."""
    import subprocess

    from odevit.repro import v2_pages

    import pandas as pd

    (tmp_path / "results/v2/teacher").mkdir(parents=True)
    shutil.copy(ROOT / "results/v2/teacher/selected.json", tmp_path / "results/v2/teacher/selected.json")
    c = pd.read_csv(ROOT / "results/v2/claims.csv")

    def text():
        c.to_csv(tmp_path / "results/v2/claims.csv", index=False)
        return " ".join(v2_pages.v2_verdicts(str(tmp_path)).split())

    if not c.verdict.str.startswith("not measured").any():  # every row measured (the committed file, once plan v2
        assert "Not measured yet" not in text()             # is made): no such line; then a study made unmade again
        i = c.index[c.study == c.study.iloc[-1]]
        c.loc[i, "verdict"], c.loc[i, "n"] = f"not measured yet (0 of {int(c.n[i].max())} seeds)", 0
        c.loc[i, ["mean", "ci_low", "ci_high"]] = float("nan")
    waiting = sorted(set(c.study[c.verdict.str.startswith("not measured")]))
    assert waiting
    assert "resume files" not in text()
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for cell in ("ce", "ref"):
        (tmp_path / f"checkpoints/v2/{waiting[0]}/{cell}").mkdir(parents=True)
        (tmp_path / f"checkpoints/v2/{waiting[0]}/{cell}/last.pt").write_bytes(b"x")
    assert "resume files" not in text()  # on disk, not in git
    subprocess.run(["git", "-C", str(tmp_path), "add", "-f", f"checkpoints/v2/{waiting[0]}/ref/last.pt"], check=True)
    assert f"resume files, checkpoints/v2/{waiting[0]}/ref/last.pt, on the machine kind" in text()
    assert f"checkpoints/v2/{waiting[0]}/ce/" not in text()


def test_readme_and_docs_v2_head_the_decided_rows_alike(tmp_path):
    """A decided row is "Supports / Contradicts the paper" or, for a claim that is ours (our extension, our remedy),
    "... our extension of it", in the README's findings and in docs/v2.md alike; flipping the free ODE's
    never-trained row to supports moves it under the same new heading in both."""
    from odevit.repro import v2_pages

    import pandas as pd

    (tmp_path / "results/v2/teacher").mkdir(parents=True)
    shutil.copy(ROOT / "results/v2/teacher/selected.json", tmp_path / "results/v2/teacher/selected.json")
    c = pd.read_csv(ROOT / "results/v2/claims.csv")

    def headings():
        c.to_csv(tmp_path / "results/v2/claims.csv", index=False)
        return [re.findall(r"- \*\*((?:Supports|Contradicts)[^*]*)\*\*", f(str(tmp_path)))
                for f in (v2_pages.v2_claims, v2_pages.v2_verdicts)]

    readme, docs = headings()
    assert readme == docs and readme
    c.loc[c.question == "unseen_free", ["verdict", "mean", "ci_low", "ci_high"]] = ["supports", 0.1, -0.5, 0.6]
    c.loc[c.verdict == "contradicts", "verdict"] = "inconclusive"
    readme, docs = headings()
    assert readme == docs and "Supports our extension of it" in readme and not any("Contradicts" in h for h in readme)


def test_every_readme_figure_is_drawn_by_an_executed_notebook():
    """Each image the README shows is an output of a notebook stage in dvc.yaml (papermill executes it; its executed
    copy is committed in outputs/) and is in git; the notebook is linked beside it."""
    text = (ROOT / "README.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images  # the README shows at least the budget curve
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    drawn_by = {next(iter(o)): name for name, st in stages.items() if st.get("cmd", "").startswith(
        "python -m odevit.repro.notebook ") for o in st.get("outs", []) if isinstance(o, dict)}
    for img in images:
        assert img in drawn_by, f"README shows {img}, which no notebook stage draws"
        assert (ROOT / img).is_file() and (ROOT / f"outputs/{drawn_by[img]}.ipynb").is_file()
        near = text[text.index(img):text.index(img) + 400]
        assert f"](outputs/{drawn_by[img]}.ipynb)" in near, f"{img}: its notebook is not linked beside it"


def test_a_decided_finding_says_when_it_fails_across_families_or_overturns_plan_1(tmp_path):
    """A supports/contradicts bullet of the findings carries its caveats from claims.csv: a verdict that would not
    survive alpha / (families) says so, and one that differs from plan 1's decided verdict names plan 1's; with the
    data flipped (holds across families, plan 1 agreeing) the bullet has neither."""
    import pandas as pd

    (tmp_path / "results/v2").mkdir(parents=True)
    c = pd.read_csv(ROOT / "results/v2/claims.csv")
    i = c.index[c.verdict == "contradicts"]  # every contradicting row: a bullet joins those of one heading
    k = c.family.nunique()

    def bullet():
        text = _claims_text(tmp_path, c)
        start = text.index("**Contradicts")
        return text[start:text.index("- **", start + 3)]

    c.loc[i, "holds_across_families"], c.loc[i, "plan1_verdict"] = False, "supports"
    text = bullet()
    assert f"not at α / {k} across the plan's {k} families" in text and "said *supports*" in text
    c.loc[i, "holds_across_families"], c.loc[i, "plan1_verdict"] = True, "contradicts"
    text = bullet()
    assert "across the plan's" not in text and "plan 1" not in text
