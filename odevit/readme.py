"""The README's result sections, generated from the committed results files (no hand-copied number can drift).

    python -m odevit.readme            # rewrite every <!-- NAME --> ... <!-- /NAME --> section of README.md
    python -m odevit.readme --check    # exit 1 and name the sections that differ from the results files

`make repro` runs it after `dvc repro`; tests/test_readme.py fails when a section is stale.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Callable, Dict, List

import pandas as pd
import yaml

from .report import to_markdown
from .study import collect


def _json(path: str) -> Dict:
    with open(path) as f:
        return json.load(f)


def _reference(root: str) -> str:
    """study.reference of the run's params.yaml (the cell every comparison is made against)."""
    with open(os.path.join(root, "params.yaml")) as f:
        return yaml.safe_load(f)["study"]["reference"]


def _num(x: float, signed: bool = False) -> str:
    return f"{x:+.3g}" if signed else f"{x:.3g}"


RATIOS = ("retention", "compression", "prop1_bound", "lyapunov_vs_correctness")


def claims_table(root: str = ".") -> str:
    c = pd.read_csv(os.path.join(root, "results/07_report/claims.csv"))
    rows = ["| claim | paper | ours (mean ± std) | seeds | 95 % CI | resolved |", "|---|---|---|---|---|---|"]
    for r in c.itertuples():
        signed = r.claim not in RATIOS
        res = "**yes**" if r.resolved else "not resolved at this budget"
        rows.append(f"| `{r.claim}` | {r.paper} | {_num(r.ours_mean, signed)} ± {r.ours_std:.2g} | {r.seeds} | "
                    f"[{_num(r.diff_ci_low)}, {_num(r.diff_ci_high)}] | {res} |")
    resolved = ", ".join(f"`{x}`" for x in c[c.resolved].claim)
    cells = collect(os.path.join(root, "results"))
    cells = cells[cells.cell == _reference(root)]
    return ("\n".join(rows) + f"\n\nAt this CPU budget the default resolves: {resolved}. The reference's seed spread "
            f"here is {100 * cells.acc1.std(ddof=1):.2f} pt (std of Acc@1 over its {len(cells)} seeds).")


def main_table(root: str = ".") -> str:
    with open(os.path.join(root, "results/07_report/main_table.md")) as f:
        return f.read().strip()


def weights_table(root: str = ".") -> str:
    m = _json(os.path.join(root, "weights/manifest.json"))["weights"]
    df = pd.DataFrame([{"tag": f"`{t}`", "what": e["description"], "parameters": f"{e['parameters']:,}",
                        "file": f"{e['bytes'] / 2**20:.2f} MiB", "Acc@1": f"{e['metrics']['acc1']:.4f}",
                        "source": f"`{e['metrics_file']}`"} for t, e in sorted(m.items())])
    return to_markdown(df)


def dynamics_summary(root: str = ".") -> str:
    m = _json(os.path.join(root, "results/06_dynamics/metrics.json"))
    ref = _reference(root)
    ly = m["lyapunov"][ref]
    p1, fid = m["prop1"], m["fidelity"]
    join = lambda vals, fmt: ", ".join(format(v, fmt) for v in vals)  # noqa: E731
    return (f"Per test image (every seed of `{ref}`): CLS exponent vs correctness point-biserial r = "
            + ", ".join(f"{v['r']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]" for v in ly.values())
            + f"; AUC (exponent predicting an error) = {join([v['auc'] for v in ly.values()], '.3f')}. "
            f"Proposition 1 with the **measured** L (max L = {join([v['L_max'] for v in p1.values()], '.2f')} per "
            f"seed; the MLP part alone has a weight bound of "
            f"{join([v['mlp_lipschitz_upper'] for v in p1.values()], '.1f')}; attention has none) holds at a fraction "
            f"{join([v['fraction_within'] for v in p1.values()], '.3f')} of the (image, step) pairs; with the "
            f"published L = {next(iter(p1.values()))['paper_L']}: "
            f"{join([v['fraction_within_paper_L'] for v in p1.values()], '.3f')}. Fidelity: the student's CLS sits "
            f"at {fid['student_rel_mean']:.3f} of ‖h_l‖ from the teacher's states at the checkpoints (mean over "
            f"layers and seeds), against the teacher's own relative step ‖h_l − h_(l−1)‖/‖h_l‖ of "
            f"{fid['teacher_step_rel_mean']:.3f} (`results/06_dynamics/fidelity.csv`): at this budget the student "
            + ("passes closer to the teacher's states than" if fid["student_rel_mean"] < fid["teacher_step_rel_mean"]
               else "does **not** pass through the teacher's states more closely than")
            + " one teacher layer's own step. The per-image correlation is "
            + ("**positive** in every seed (a larger exponent goes with a *correct* prediction, the opposite "
               "direction of the paper's per-class reading of Fig. 4)" if all(v["r"] > 0 for v in ly.values())
               else "negative in every seed (the direction of the paper's Fig. 4)" if all(v["r"] < 0 for v in ly.values())
               else "of mixed sign across the seeds") + ".")


SECTIONS: Dict[str, Callable[[str], str]] = {
    "claims-table": claims_table, "main-table": main_table, "weights-table": weights_table,
    "dynamics-summary": dynamics_summary,
}


def _pattern(name: str) -> "re.Pattern[str]":
    return re.compile(rf"(<!-- {name} -->\n)(.*?)(<!-- /{name} -->)", re.S)


def render(text: str, root: str = ".") -> str:
    for name, fn in SECTIONS.items():
        pat = _pattern(name)
        if not pat.search(text):
            raise ValueError(f"README.md: no <!-- {name} --> ... <!-- /{name} --> section")
        body = fn(root)
        text = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)
    return text


def stale(readme: str = "README.md", root: str = ".") -> List[str]:
    """Names of the sections whose text differs from what the results files give."""
    with open(readme) as f:
        text = f.read()
    new = render(text, root)
    return [n for n in SECTIONS if _pattern(n).search(text).group(2) != _pattern(n).search(new).group(2)]


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the README's result sections from the results files")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--readme", default="README.md")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale(args.readme)
        if bad:
            print(f"{args.readme}: stale sections {bad} (python -m odevit.readme)", file=sys.stderr)
        return 1 if bad else 0
    with open(args.readme) as f:
        text = f.read()
    out = render(text)
    if out != text:
        tmp = args.readme + ".tmp"
        with open(tmp, "w") as f:
            f.write(out)
        os.replace(tmp, args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
