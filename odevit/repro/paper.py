"""The paper's numbers and claims, each with a source a reader can check (arXiv 2511.16501, github.com/Bycarkos/ODE-ViT).

The paper's body is not available: what can be verified is its abstract and Fig. 1 caption, the summaries' TL;DR
(sciencestack.ai), and the authors' repository (README results table, code, the Lyapunov data files it ships).
No section number is cited. The numbers and claims are data, in odevit/repro/paper.yaml: `TABLE` is the authors'
README results table; `CLAIMS` the registry of claims the report tests (report.claims reads the `paper` column from
here), each paper's number computed from the table by one of `OPS`; docs/paper.md mirrors both for a human reader.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import pandas as pd
import yaml

PAPER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paper.yaml")


def _load(path: str = PAPER_FILE) -> Dict[str, Any]:
    with open(path) as f:
        return yaml.safe_load(f)


_DATA = _load()
SOURCES: Dict[str, str] = _DATA["sources"]
README_TABLE, ABSTRACT, TLDR = SOURCES["readme_table"], SOURCES["abstract"], SOURCES["tldr"]
LYAPUNOV_FILES, CODE = SOURCES["lyapunov_files"], SOURCES["code"]

# the authors' README results table (github.com/Bycarkos/ODE-ViT, README.md at b41824d); accuracies as fractions
TABLE = pd.DataFrame(_DATA["table"], columns=["Model", "Dataset", "Params (M)", "Losses", "Acc@1", "Acc@3", "Acc@5"])

# mean CLS exponent of the two CIFAR-100 files the authors ship (with JaSMin: "1-Attention_L1"; without:
# "NO_JASMIN_add_supervision_at_the_end"; 10,000 test images each; the two runs also differ in CE supervision)
LYAPUNOV_C100: Dict[str, float] = _DATA["lyapunov_c100"]
ROWS: Dict[str, str] = _DATA["rows"]
TEACHER, FREE, SMALL, BASE = ROWS["teacher"], ROWS["free"], ROWS["small"], ROWS["base"]


def acc1(model: str, dataset: str) -> float:
    """Acc@1 of one row of the authors' README table (KeyError naming the row if absent)."""
    r = TABLE[(TABLE.Model == model) & (TABLE.Dataset == dataset)]
    if r.empty:
        raise KeyError(f"no README row ({model!r}, {dataset!r})")
    return float(r["Acc@1"].iloc[0])


def params_m(model: str, dataset: str = "cifar10") -> float:
    r = TABLE[(TABLE.Model == model) & (TABLE.Dataset == dataset)]
    return float(r["Params (M)"].iloc[0])


def _pair(t: List[str]) -> Tuple[Tuple[str, str], Tuple[str, str]]:
    return (ROWS[t[0]], t[1]), (ROWS[t[2]], t[3])


def _diff_pt(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(100 * (x - y), 6), f"{x:.3f} − {y:.3f} = {100 * (x - y):+.1f} pt"


def _rel(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(100 * (x / y - 1), 6), f"{x:.3f} / {y:.3f} − 1 = {100 * (x / y - 1):+.1f} %"


def _ratio(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(x / y, 6), f"{x:.3f} / {y:.3f} = {x / y:.3f}"


def _params_ratio(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = params_m(*a), params_m(*b)
    return round(x / y, 6), f"{x:g}M / {y:g}M = {x / y:.1f}x"


OPS: Dict[str, Callable[[Tuple[str, str], Tuple[str, str]], Tuple[float, str]]] = {
    "diff_pt": _diff_pt, "rel": _rel, "ratio": _ratio, "params_ratio": _params_ratio}


def paper_value(spec: Optional[Dict[str, Any]]) -> Tuple[Optional[float], str]:
    """(the paper's number, its arithmetic) of a claim's `value` block of paper.yaml: the first term's result, every
    term shown ("LABEL: TAG arithmetic; TAG arithmetic"); (None, "") for a claim the paper gives no number for."""
    if not spec:
        return None, ""
    if spec["op"] == "lyapunov":
        a, b = LYAPUNOV_C100["jasmin"], LYAPUNOV_C100["no_jasmin"]
        return round(a - b, 6), f"{spec['label']}: {a:.4f} − {b:.4f} = {a - b:+.3f} {spec['note']}"
    if spec["op"] not in OPS:
        raise ValueError(f"{PAPER_FILE}: value.op '{spec['op']}' is not one of {sorted(OPS) + ['lyapunov']}")
    parts = [(t[4] if len(t) > 4 else "", OPS[spec["op"]](*_pair(t))) for t in spec["terms"]]
    text = "; ".join(f"{tag} {arith}".strip() for tag, (_, arith) in parts)
    return parts[0][1][0], (f"{spec['label']}: {text}" if spec.get("label") else text)


@dataclass(frozen=True)
class Claim:
    """One claim the report tests: what the paper says, where a reader can check it, which way the paper predicts our
    statistic to fall (greater / less than `null`, equivalent within the margin, fact, none = not a claim), the
    statistic and its unit, and the paper's own number with the arithmetic that gives it (None if it gives none)."""
    id: str
    statement: str
    source: str
    direction: str  # greater | less | equivalent | bound | fact | none
    statistic: str
    unit: str
    value: Optional[float] = None
    arithmetic: str = ""
    family: bool = False  # member of the ablation family (Holm-adjusted)
    per_unit: bool = False  # a per-seed correlation over a handful of units: each seed's test over them gates it

    @property
    def paper(self) -> str:
        """The `paper` column of claims.csv: the paper's number with its arithmetic (its source is the `source`
        column), or "no number"."""
        return self.arithmetic or "no number"


DIRECTIONS = ("greater", "less", "equivalent", "bound", "fact", "none")


def _claim(c: Dict[str, Any]) -> Claim:
    if c.get("direction") not in DIRECTIONS:
        raise ValueError(f"{PAPER_FILE}: claim {c.get('id')}: direction '{c.get('direction')}' is not one of "
                         f"{DIRECTIONS}")
    value, arithmetic = paper_value(c.get("value"))
    return Claim(c["id"], c["statement"], c["source"].format(**SOURCES), c["direction"], c["statistic"], c["unit"],
                 value, arithmetic, bool(c.get("family", False)), bool(c.get("per_unit", False)))


CLAIMS: Dict[str, Claim] = {c.id: c for c in map(_claim, _DATA["claims"])}


def claim(cid: str) -> Claim:
    if cid not in CLAIMS:
        raise KeyError(f"paper.CLAIMS has no claim {cid!r}: one of {sorted(CLAIMS)}")
    return CLAIMS[cid]


def registry() -> pd.DataFrame:
    """The registry as a table (docs/paper.md mirrors it)."""
    return pd.DataFrame([{"claim": c.id, "statement": c.statement, "source": c.source, "direction": c.direction,
                          "statistic": c.statistic, "unit": c.unit, "paper_value": c.value, "arithmetic": c.arithmetic}
                         for c in CLAIMS.values()])


HEADER = """# The paper's numbers and claims, with verifiable sources

ODE-ViT (Boned Riera, Romero Sánchez, Ramos Terrades; arXiv 2511.16501v1, Nov 2025); official code
github.com/Bycarkos/ODE-ViT (README and code read at b41824d). Generated from `odevit/repro/paper.yaml`
(`python -m odevit.repro.paper`; tests/test_stats.py checks this file equals it). A study's claims table
(`odevit.repro.report.claims`) reads its `paper` column from the same registry.

**What can be checked.** The paper's body (its sections, tables, equations) was not available to us. A reader can
check: the **abstract** and the **Fig. 1 caption** (arxiv.org/abs/2511.16501), the **summary (sciencestack TL;DR)**
(sciencestack.ai/paper/2511.16501, AI-written), and the authors' repository: the **authors' README table**, the
**authors' code** (file named where it matters) and the **authors' Lyapunov data files** (`lyapunov_results/`).
No section number is cited, because none can be checked.

Quoted from the abstract: the ODE system "satisfies the conditions for well-posed and stable dynamics"; ODE-ViT is
"stable, interpretable, and competitive … with up to one order of magnitude fewer parameters"; the teacher–student
framework "improves performance by more than 10% compared to training a free ODE-ViT from scratch". Quoted from the
summary (sciencestack TL;DR): "enforce local Lipschitz continuity and use center normalization", "Lie–Trotter based
decomposition splits the attention block into learnable subflows", "MSE and JaSMin losses", "robustness to step
count". Proposition 1 (an Euler error bound) is named by the summaries; its statement is reconstructed from the
authors' code (`compute_upper_bound_by_fininte_difference`, L = 1/2): ||X_N − X(1)|| <= (e^L − 1)/(2 L N) ·
sup ||X''||.
"""

TABLE_NOTE = """
Acc@k: top-k accuracy on the test split (the authors' code selects the checkpoint on it). "Small" = MLP ratio 1
(3.8M), "Base" = MLP ratio 4 (7M), both counted as total trainable parameters. The Small rows and the CIFAR-10 /
ImageNet-100 Base rows are label-free (MSE + JaSMin); only the CIFAR-100 Base row adds CE.
"""

LYAPUNOV_NOTE = f"""
## Authors' Lyapunov data files

Mean CLS finite-time Lyapunov exponent over the 10,000 CIFAR-100 test images of the two files the authors ship:
with JaSMin ("…1-Attention_L1") {LYAPUNOV_C100['jasmin']}, without ("…NO_JASMIN_add_supervision_at_the_end")
{LYAPUNOV_C100['no_jasmin']}. The two runs also differ in CE supervision: not a clean ablation.
"""


def markdown() -> str:
    """docs/paper.md: the README table, the claim registry (source, predicted direction, the paper's number and its
    arithmetic), the Lyapunov files' numbers."""
    t = TABLE.astype(object).where(TABLE.notna(), "–")
    reg = pd.DataFrame([{"claim": f"`{c.id}`", "the claim": c.statement, "source": c.source,
                         "paper predicts": c.direction, "statistic (unit)": f"{c.statistic} ({c.unit})",
                         "paper's value": "–" if c.value is None else f"{c.value:.4g}",
                         "arithmetic": c.arithmetic or "–"} for c in CLAIMS.values()])
    return (HEADER + "\n## Authors' README table\n\n" + t.to_markdown(index=False) + "\n" + TABLE_NOTE
            + "\n## The claims the report tests\n\n"
            "Direction: greater / less = the paper predicts our statistic above / below the null (0 for a "
            "difference; for retention, non-inferiority: above the paper's ratio minus the margin, "
            "`study.equivalence_margin_pts` divided by the teacher's Acc@1, so a student that keeps more of its "
            "teacher than the paper's did supports \"competitive\"); equivalent = inside ± "
            "`study.equivalence_margin_pts` Acc@1 points of the null; fact = a fixed quantity "
            "(no test); bound = Proposition 1 (can fail: any error above the bound contradicts it; a bound whose median "
            "tightness, bound / error over the (image, step) pairs, is >= 10 in some seed holds, vacuous); none = not a claim of the paper.\n\n"
            + reg.to_markdown(index=False) + "\n" + LYAPUNOV_NOTE)


if __name__ == "__main__":
    import os

    os.makedirs("docs", exist_ok=True)
    with open("docs/paper.md", "w") as f:
        f.write(markdown())
