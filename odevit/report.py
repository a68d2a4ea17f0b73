"""The report: the paper's main-table format filled from the stages' metrics files, the paper's numbers beside."""
from __future__ import annotations

import glob
import os
from typing import List, Optional

import pandas as pd

from .pipeline import read_json

# paper-spec.md §8.1 (the official README table); accuracies as fractions
PAPER = pd.DataFrame(
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


def paper_table() -> pd.DataFrame:
    return PAPER.copy()


def _paper_acc1(model: str, dataset: str) -> tuple:
    rows = PAPER[PAPER.Model == model]
    if rows.empty:
        return None, None
    same = rows[rows.Dataset == dataset]
    r = (same if not same.empty else rows[rows.Dataset == "cifar10"]).iloc[0]
    return float(r["Acc@1"]), r["Dataset"]


def main_table(dataset: str, results: str = "results") -> pd.DataFrame:
    """Our rows in the paper's format (Model, Dataset, Params (M), Losses, Acc@1/3/5) + the paper's Acc@1 for the
    same kind of row (same dataset where the paper has it, else its CIFAR-10 row, named in 'Paper dataset')."""
    t = read_json(f"{results}/02_teacher/metrics.json")
    s = read_json(f"{results}/03_ode_scratch/metrics.json")
    d = read_json(f"{results}/04_distill/metrics.json")
    size = {1.0: "Small", 4.0: "Base"}.get(float(d["mlp_ratio"]), f"mlp_ratio {d['mlp_ratio']:g}")
    rows = [
        (f"Teacher – ViT depth {t['depth']}, D {t['embed_dim']} (trained here)", "Teacher – DINO-base + Training Only Head",
         t, "CE", t["encoder_params"]),
        ("ODE (free, from scratch)", "ODE (free, from scratch)", s, s["losses"], s["encoder_params"]),
        (f"ODE Teacher–Student {size}", f"ODE Teacher–Student {'Small' if size == 'Small' else 'Base'}", d, d["losses"],
         d["encoder_params"]),
    ]
    out = []
    for name, paper_name, m, losses, enc in rows:
        p_acc, p_ds = _paper_acc1(paper_name, dataset)
        out.append({"Model": name, "Dataset": dataset, "Params (M)": round(m["params_m"], 3), "Losses": losses,
                    "Acc@1": round(m["acc1"], 4), "Acc@3": round(m["acc3"], 4), "Acc@5": round(m["acc5"], 4),
                    "Encoder params (M)": round(enc / 1e6, 3), "Paper Acc@1": p_acc, "Paper dataset": p_ds})
    return pd.DataFrame(out)


def dynamics_summary(dyn: dict) -> pd.DataFrame:
    """One row per measured quantity of 06_dynamics (its metrics.json)."""
    rows = []
    for model, v in dyn["lyapunov"].items():
        rows.append((f"Lyapunov (CLS) vs class accuracy, {model}", f"r = {v['pearson_r']:.3f}, p = {v['p_value']:.3g}; "
                     f"mean exponent {v['mean']:.4f} ± {v['std']:.4f}"))
    e = dyn["euler"]
    rows.append(("Observed convergence order (Euler / model's solver)",
                 f"{abs(e['order_parallel']):.2f} / {abs(e['order_model_solver']):.2f}; "
                 f"Prop. 1 bound holds (L = {e['lipschitz']}): {e['bound_holds']}"))
    h = dyn["halting"]
    b = h["best_within_0.3pt"]
    rows.append(("Adaptive halting (best within 0.3 pt Acc@1)",
                 f"{b['saving'] * 100:.1f}% fewer ψ evaluations ({b['mean_evals']:.2f} of {h['N']}), "
                 f"Acc@1 {b['acc1']:.4f} vs {h['full_acc1']:.4f}; target ≥ 30%: {h['target_met']}"))
    return pd.DataFrame(rows, columns=["Analysis", "Result"])


def to_markdown(df: pd.DataFrame) -> str:
    return df.to_markdown(index=False)


def write_text(text: str, path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text + "\n")
    os.replace(path + ".tmp", path)


def figures(results: str = "results") -> List[str]:
    """Every PNG the stages wrote, in stage order (the report's own excluded)."""
    return sorted(p for p in glob.glob(f"{results}/*/*.png") if "/07_report/" not in p)


def export_html(out_dir: str, executed: str = "outputs", skip: Optional[str] = "07_report") -> List[str]:
    """HTML export (nbconvert) of every executed notebook in `executed/`."""
    from nbconvert import HTMLExporter

    os.makedirs(out_dir, exist_ok=True)
    done = []
    for nb in sorted(glob.glob(f"{executed}/*.ipynb")):
        name = os.path.splitext(os.path.basename(nb))[0]
        if skip and name == skip:
            continue
        body, _ = HTMLExporter().from_filename(nb)
        write_text(body, os.path.join(out_dir, name + ".html"))
        done.append(os.path.join(out_dir, name + ".html"))
    return done
