"""Atomic files of the results: JSON, CSV, text and figures, written whole or not at all, read with a clear error.

Below both the training side (pipeline, the stages) and the narrating side (verdicts, figures, pages): no
torch, no model, no training code, so reading or rewriting a result never imports the training loop."""
from __future__ import annotations

import glob
import json
import os
from typing import Any, Dict, List

import pandas as pd


def write_json(obj: Any, path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def write_csv(df: pd.DataFrame, path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def write_text(text: str, path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text + "\n")
    os.replace(path + ".tmp", path)


def save_figure(fig: Any, path: str) -> None:
    """The figure as a PNG at path (written beside, then moved: a reader never sees half a file), closed, and shown
    as those very bytes: the notebook's copy is the file's (an inline re-render can differ between CPUs)."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path + ".tmp.png", dpi=120, bbox_inches="tight", metadata={"Software": None})
    os.replace(path + ".tmp.png", path)
    plt.close(fig)
    display(Image(filename=path))


def read_json(path: str) -> Dict[str, Any]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: missing (run the stage that writes it: dvc repro)")
    with open(path) as f:
        return json.load(f)


def study_machines(study_dir: str) -> List[str]:
    """The machine types a study's finished runs were made on (each metrics.json's provenance.device), sorted."""
    return sorted({read_json(f).get("provenance", {}).get("device") for f in glob.glob(f"{study_dir}/*/s*/metrics.json")}
                  - {None})


def read_yaml(path: str, missing: type = FileNotFoundError, invalid: type = ValueError,
              hint: str = "run from the repository root") -> Dict[str, Any]:
    """A YAML file as a dict (empty file: {}); one line naming the file where it is missing (`missing`) or not valid
    YAML (`invalid`). config.read_yaml raises ConfigError for both (params.yaml)."""
    import yaml

    if not os.path.isfile(path):
        raise missing(f"{path}: not found ({hint})")
    with open(path) as f:
        try:
            return yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            raise invalid(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
