"""The paper's numbers and claims, each with a source a reader can check (arXiv 2511.16501, github.com/Bycarkos/ODE-ViT).

The paper's body is not available: what can be verified is its abstract and Fig. 1 caption, the summaries' TL;DR
(sciencestack.ai), and the authors' repository (README results table, code, the Lyapunov data files it ships).
No section number is cited. `TABLE` is the authors' README results table; `CLAIMS` the registry of claims the
report tests (report.claims reads the `paper` column from here); docs/paper.md mirrors both for a human reader.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import pandas as pd

README_TABLE = "authors' README table"
ABSTRACT = "abstract"
TLDR = "summary (sciencestack TL;DR)"
LYAPUNOV_FILES = "authors' Lyapunov data files (lyapunov_results/, per-class lists)"
CODE = "authors' code"

# the authors' README results table (github.com/Bycarkos/ODE-ViT, README.md at b41824d); accuracies as fractions
TABLE = pd.DataFrame(
    [
        ("Teacher – DINO-base + Training Only Head", "cifar10", 85, "CE", 0.923, 0.993, 0.997),
        ("Teacher – DINO-base + Training Only Head", "cifar100", 85, "CE", 0.881, 0.968, 0.982),
        ("Teacher – DINO-base + Training Only Head", "imagenet100", 85, "CE", 0.923, 0.981, 0.990),
        ("ODE (Zhong et al., 2022)", "cifar100", 0.7, "CE", 0.533, None, None),
        ("ODE (free, from scratch)", "cifar10", 0.5, "CE", 0.809, 0.980, 0.990),
        ("ODE (free, from scratch)", "cifar100", 4.2, "CE", 0.579, 0.728, 0.794),
        ("ODE (free, from scratch)", "imagenet100", 7, "CE", 0.513, 0.701, 0.754),
        ("ODE Teacher–Student Base", "cifar10", 7, "MSE+JasMin", 0.885, 0.980, 0.992),
        ("ODE Teacher–Student Base", "cifar100", 7, "MSE+JasMin+CE", 0.721, 0.872, 0.914),
        ("ODE Teacher–Student Base", "imagenet100", 7, "MSE+JasMin", 0.684, 0.817, 0.865),
        ("ODE Teacher–Student Small", "cifar10", 3.8, "MSE+JasMin", 0.867, 0.973, 0.991),
        ("ODE Teacher–Student Small", "cifar100", 3.8, "MSE+JasMin", 0.657, 0.819, 0.914),
    ],
    columns=["Model", "Dataset", "Params (M)", "Losses", "Acc@1", "Acc@3", "Acc@5"],
)

# mean CLS exponent of the two CIFAR-100 files the authors ship (with JaSMin: "1-Attention_L1"; without:
# "NO_JASMIN_add_supervision_at_the_end"; 10,000 test images each; the two runs also differ in CE supervision)
LYAPUNOV_C100 = {"jasmin": 0.2379, "no_jasmin": 0.4045}


def acc1(model: str, dataset: str) -> float:
    """Acc@1 of one row of the authors' README table (KeyError naming the row if absent)."""
    r = TABLE[(TABLE.Model == model) & (TABLE.Dataset == dataset)]
    if r.empty:
        raise KeyError(f"no README row ({model!r}, {dataset!r})")
    return float(r["Acc@1"].iloc[0])


def params_m(model: str, dataset: str = "cifar10") -> float:
    r = TABLE[(TABLE.Model == model) & (TABLE.Dataset == dataset)]
    return float(r["Params (M)"].iloc[0])


TEACHER, FREE = "Teacher – DINO-base + Training Only Head", "ODE (free, from scratch)"
SMALL, BASE = "ODE Teacher–Student Small", "ODE Teacher–Student Base"


def _diff_pt(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(100 * (x - y), 6), f"{x:.3f} − {y:.3f} = {100 * (x - y):+.1f} pt"


def _rel(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(100 * (x / y - 1), 6), f"{x:.3f} / {y:.3f} − 1 = {100 * (x / y - 1):+.1f} %"


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


_ts_small_c10 = _diff_pt((SMALL, "cifar10"), (FREE, "cifar10"))
_ts_small_c100 = _diff_pt((SMALL, "cifar100"), (FREE, "cifar100"))
_ts_small_rel = _rel((SMALL, "cifar10"), (FREE, "cifar10"))
_ts_small_rel100 = _rel((SMALL, "cifar100"), (FREE, "cifar100"))
_ts_ce = _diff_pt((BASE, "cifar100"), (FREE, "cifar100"))
_ts_ce_rel = _rel((BASE, "cifar100"), (FREE, "cifar100"))
_ret = (acc1(SMALL, "cifar10") / acc1(TEACHER, "cifar10"))
_r1r4 = _diff_pt((SMALL, "cifar10"), (BASE, "cifar10"))
_comp = params_m(TEACHER) / params_m(SMALL)
_lyap = LYAPUNOV_C100["jasmin"] - LYAPUNOV_C100["no_jasmin"]

_ABL = "{} no ablation is published; the paper's choice is predicted better"

CLAIMS: Dict[str, Claim] = {c.id: c for c in [
    Claim("ts_minus_free", "The label-free teacher–student ODE-ViT (MSE + JaSMin, the authors' Small rows) beats the "
          "same architecture trained from scratch", f"{README_TABLE}; {ABSTRACT} ('more than 10%')", "greater",
          "Acc@1 ref − free, paired by seed", "pt", _ts_small_c10[0],
          f"Small − free: C10 {_ts_small_c10[1]}; C100 {_ts_small_c100[1]}"),
    Claim("ts_minus_free_rel", "The same gain relative to the free model ('more than 10%' may be relative)",
          f"{README_TABLE}; {ABSTRACT}", "greater", "(ref − free) / free, paired by seed", "%", _ts_small_rel[0],
          f"Small / free: C10 {_ts_small_rel[1]}; C100 {_ts_small_rel100[1]}"),
    Claim("ts_ce_minus_free", "The teacher–student ODE-ViT with CE (MSE + JaSMin + CE, the authors' CIFAR-100 Base "
          "row) beats the free model by more than 10%", f"{README_TABLE}; {ABSTRACT}", "greater",
          "Acc@1 ce − free, paired by seed", "pt", _ts_ce[0], f"Base C100 − free C100: {_ts_ce[1]}"),
    Claim("ts_ce_minus_free_rel", "The same gain relative to the free model", f"{README_TABLE}; {ABSTRACT}", "greater",
          "(ce − free) / free, paired by seed", "%", _ts_ce_rel[0], f"Base C100 / free C100: {_ts_ce_rel[1]}"),
    Claim("retention", "The label-free student is competitive with its teacher (retains at least the share of its "
          "teacher's accuracy that the authors' Small row does)", f"{README_TABLE}; {ABSTRACT} ('competitive')", "greater",
          "Acc@1 ref / teacher Acc@1", "ratio", round(_ret, 6),
          f"Small C10 / teacher C10: {acc1(SMALL, 'cifar10'):.3f} / {acc1(TEACHER, 'cifar10'):.3f} = {_ret:.3f}"),
    Claim("retention_ce", "The +CE student is competitive with its teacher (at least the authors' CIFAR-100 Base "
          "row's share)", f"{README_TABLE}; {ABSTRACT}", "greater", "Acc@1 ce / teacher Acc@1", "ratio", round(acc1(BASE, "cifar100") / acc1(TEACHER, "cifar100"), 6),
          f"Base C100 / teacher C100: {acc1(BASE, 'cifar100'):.3f} / {acc1(TEACHER, 'cifar100'):.3f} = "
          f"{acc1(BASE, 'cifar100') / acc1(TEACHER, 'cifar100'):.3f}"),
    Claim("compression_total", "Up to one order of magnitude fewer parameters than the teacher (total parameters, "
          "as the authors count)", f"{README_TABLE}; {ABSTRACT}", "fact", "teacher params / student params", "x",
          round(_comp, 6), f"{params_m(TEACHER):g}M / {params_m(SMALL):g}M = {_comp:.1f}x"),
    Claim("compression_encoder", "The same ratio on encoder parameters only (ours, beside the authors' count)",
          f"{README_TABLE}", "fact", "teacher encoder params / student encoder params", "x"),
    Claim("step_robustness_half", "Robust to the step count: Acc@1 at N/2 equals Acc@1 at N within the margin",
          TLDR, "equivalent", "Acc@1 at N/2 − Acc@1 at N (same images)", "pt"),
    Claim("step_robustness_double", "Robust to the step count: Acc@1 at 2N equals Acc@1 at N within the margin",
          TLDR, "equivalent", "Acc@1 at 2N − Acc@1 at N (same images)", "pt"),
    Claim("lie_trotter_minus_parallel", "Lie–Trotter splitting of the attention block into sub-flows",
          TLDR, "greater", "Acc@1 ref − parallel, paired by seed", "pt", family=True),
    Claim("jasmin_on_minus_off", "The JaSMin loss (MSE and JaSMin losses)", TLDR, "greater",
          "Acc@1 ref − jasmin_off, paired by seed", "pt", family=True),
    Claim("centernorm_minus_layernorm", "Center normalization (with local Lipschitz continuity)", TLDR, "greater",
          "Acc@1 ref − layernorm, paired by seed", "pt", family=True),
    Claim("softmax_minus_uniform_schedule", "The distance-softmax check-point schedule of the teacher's layers",
          f"{CODE} (schedule of the check-points)", "greater", "Acc@1 ref − uniform, paired by seed", "pt",
          family=True),
    Claim("qkv_spectral_minus_xavier", "Spectral initialisation of Q/K/V (local Lipschitz continuity)", TLDR,
          "greater", "Acc@1 ref − qkv_xavier, paired by seed", "pt", family=True),
    Claim("r1_minus_r4", "Small (MLP ratio 1) is below Base (MLP ratio 4)", README_TABLE, "less",
          "Acc@1 ref − mlp4, paired by seed", "pt", _r1r4[0], f"Small C10 − Base C10: {_r1r4[1]}", family=True),
    Claim("ce_from_start_minus_published_curriculum", "Not a claim of the paper: CE from epoch 0 vs the published "
          "CE / head-unfreeze curriculum, everything else equal", f"{CODE} (the curriculum)", "none",
          "Acc@1 ce − pub_curriculum, paired by seed", "pt"),
    Claim("published_curriculum_minus_published", "Not a claim of the paper: the +CE recipe with the published "
          "curriculum vs every published-code switch", f"{CODE} (every switch)", "none",
          "Acc@1 pub_curriculum − published, paired by seed", "pt"),
    Claim("lyapunov_vs_correctness", "Higher CLS Lyapunov exponent goes with lower accuracy (per image)",
          LYAPUNOV_FILES, "less", "point-biserial r(exponent, correct) per seed", "r"),
    Claim("lyapunov_class_vs_accuracy", "Classes with higher mean exponent have lower Acc@1 (the unit of the "
          "Lyapunov figure)", LYAPUNOV_FILES, "less",
          "Pearson r(class mean exponent, class Acc@1) per seed", "r", per_unit=True),
    Claim("jasmin_on_minus_off_lyapunov", "JaSMin lowers the CLS exponents", LYAPUNOV_FILES, "less",
          "mean exponent ref − jasmin_off, paired by seed", "exponent", round(_lyap, 6),
          f"C100 with − without JaSMin: {LYAPUNOV_C100['jasmin']:.4f} − {LYAPUNOV_C100['no_jasmin']:.4f} = "
          f"{_lyap:+.3f} (runs also differ in CE)"),
    Claim("prop1_bound", "The Euler trajectory stays within the Proposition 1 error bound (measured L, the model's "
          "own solver)", f"{TLDR} (Proposition 1); {CODE} (L = 1/2)", "bound",
          "fraction of (image, step) with error <= bound (min over seeds)", "fraction"),
]}


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
github.com/Bycarkos/ODE-ViT (README and code read at b41824d). Generated from `odevit/repro/paper.py`
(`python -m odevit.repro.paper`; tests/test_stats.py checks this file equals it). The report's claims table
(`results/07_report/claims.csv`) reads its `paper` column from the same registry.

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
