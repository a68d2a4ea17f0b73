"""Turn a preset file (a few params.yaml overrides) into `dvc exp run -S` flags, validated first.

A dict value replaces params.yaml's (e.g. `study.cells`: the preset's cells and no others), as validated.

    dvc exp run $(python -m odevit.repro.preset presets/cifar10_dino_small.yaml)
"""
from __future__ import annotations

import json
import sys
from typing import Dict, List

import yaml

from .config import ConfigError, parse, resolve_teacher


def hydra(value) -> str:
    """A value in DVC's -S (Hydra override) grammar: JSON, but with bare dict keys (Hydra rejects quoted ones)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(hydra(v) for v in value) + "]"
    return json.dumps(value)


def flags(path: str, params_file: str = "params.yaml") -> List[str]:
    with open(path) as f:
        preset: Dict[str, Dict] = yaml.safe_load(f) or {}
    with open(params_file) as f:
        params = yaml.safe_load(f)
    out = []
    for block, values in preset.items():
        if block not in params:
            raise ConfigError(f"{path}: '{block}' is not a params.yaml block ({', '.join(params)})")
        cfg = parse(block, {**params[block], **values})  # validate the merged block before any work
        if block == "teacher":
            resolve_teacher(cfg)  # teacher.name and the shape keys agree
        for key, value in values.items():
            text = value if isinstance(value, str) else hydra(value)
            out += ["-S", f"{block}.{key}={text}"]
            if isinstance(value, dict):  # DVC merges a dict into params.yaml's: delete what the preset leaves out
                out += [f for sub in params[block].get(key) or {} if sub not in value for f in ("-S", f"~{block}.{key}.{sub}")]
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m odevit.repro.preset PRESET.yaml")
    try:
        print(" ".join(flags(sys.argv[1])))  # no spaces inside a flag: safe in $(...)
    except (ConfigError, OSError) as e:
        sys.exit(str(e))
