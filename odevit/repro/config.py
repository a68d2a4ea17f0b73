"""Typed configs from params.yaml (a bad key or value stops a stage at once, with one line); the plan's cells as configs.

Each notebook does `cfg = config.load("distill", distill)`, where papermill injected the block as a dict
(or None when run by hand: then the block is read from params.yaml).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union, get_args, get_origin, get_type_hints

import yaml

from . import files, plan as plan_mod
from .data import INFO
from ..solvers import SOLVERS


class ConfigError(ValueError):
    """params.yaml holds an unknown key or a value that is not allowed."""


@dataclass
class Base:
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"  # auto = bf16 autocast on CUDA, fp32 on CPU | fp32 | bf16
    dataset: str = "fashion_mnist"
    data_root: str = "data"
    image_size: int = 28
    channels: int = 1
    normalize: str = "dataset"
    train_limit: int = 0  # first n of the training images left after val_size (0 = all of them)
    val_size: int = 5000  # the LAST n images of the training split, held out for selection (0 = none)
    select_on: str = "val"  # val: best.pt and early stopping on validation Acc@1 | test: the authors' test selection
    converge_window: int = 2  # plan 1's retired convergence window: read by nothing, kept as the run keys hash it
    test_limit: int = 0
    synthetic_size: int = 512
    batch_size: int = 128
    eval_batch_size: int = 512


@dataclass
class Optim:
    epochs: int = 3
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup: float = 0.05
    cycles: int = 1
    clip: float = 1.0
    label_smoothing: float = 0.1
    augment: bool = False
    patience: int = 0  # stop after this many epochs without a gain >= min_delta_pts (0 = run all epochs)
    min_delta_pts: float = 0.2  # validation Acc@1 gain (percentage points) that counts as progress


@dataclass
class Arch:
    """Tokens and width of a model trained from scratch (a distilled student takes them from its teacher)."""
    patch_size: int = 7
    embed_dim: int = 128
    num_heads: int = 4


@dataclass
class Teacher(Optim):
    """teacher.name builds that timm architecture, with or without weights. The shape keys restate it: None takes
    the name's value, any other value must equal it (`resolve_teacher`), so a name and a shape never mix.
    name None: a timm VisionTransformer of exactly the shape keys (all must be set; no hub weights)."""
    name: Optional[str] = "odevit_teacher_patch7_28"  # any timm VisionTransformer
    pretrained: bool = False
    weights_file: Optional[str] = None
    linear_probe: bool = False  # train only the head (for pretrained teachers)
    patch_size: Optional[int] = 7
    embed_dim: Optional[int] = 128
    depth: Optional[int] = 6
    num_heads: Optional[int] = 4
    mlp_ratio: Optional[float] = 4.0
    epochs: int = 40  # the plan's teacher recipe (params.yaml teacher: 40 epochs with augmentation)
    augment: bool = True


TEACHER_SHAPE = ("patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio")


def resolve_teacher(cfg: Teacher) -> Teacher:
    """The teacher block with every shape key set to teacher.name's architecture; ConfigError where a key the user
    set disagrees with the name (pick a name of that shape, e.g. a timm ViT or one registered like
    odevit.hub's odevit_teacher_patch7_28, or set the key to null)."""
    from ..teacher import architecture

    if cfg.name is None:
        missing = [k for k in TEACHER_SHAPE if getattr(cfg, k) is None]
        if missing:
            raise ConfigError(f"params.yaml: teacher.name = null builds the ViT the shape keys describe: set "
                              f"teacher.{', teacher.'.join(missing)}")
        if cfg.pretrained:
            raise ConfigError("params.yaml: teacher.pretrained = true needs a teacher.name (whose weights to fetch)")
        return cfg
    try:
        arch = architecture(cfg.name)
    except ValueError as e:
        raise ConfigError(f"params.yaml: {e}") from None
    for k in TEACHER_SHAPE:
        v = getattr(cfg, k)
        if v is not None and v != arch[k]:
            raise ConfigError(f"params.yaml: teacher.{k} = {v!r} disagrees with teacher.name '{cfg.name}' ({k} "
                              f"{arch[k]!r}): set it to {arch[k]!r} or null, or pick a name with {k} {v!r}")
    return dataclasses.replace(cfg, **arch)


@dataclass
class ODE:
    num_steps: int = 12
    solver: str = "lie_trotter"
    norm: str = "centernorm"
    mlp_ratio: float = 2.0
    reg_tokens: int = 0
    pos_embed_reg: bool = False
    spectral_init_qkv: bool = True
    dropout: float = 0.0
    jasmin_weight: float = 1.0
    jasmin_k: int = 2
    jasmin_detach: bool = False


@dataclass
class Scratch(Optim, ODE, Arch):
    horizon: float = 6.0


@dataclass
class Distill(Optim, ODE):
    epochs: int = 2
    mlp_ratio: float = 1.0  # the paper's Small student (4 = Base)
    tau: float = 3.0  # the paper's 30 is for DINO distances (span 49); 3 keeps its span/tau ratio here (presets: 30)
    schedule: str = "softmax"  # paper | 'softmax_min1' (every layer >= 1 step) | 'uniform'
    schedule_points: str = "steps"  # softmax multiplier: N steps (ours) | 'grid_points' N + 1 (published code)
    distance_tokens: str = "cls"  # or 'all'
    distance_batches: int = 8
    mse_tokens: str = "cls"
    mse_weight: float = 1.0
    ce_weight: float = 0.0  # 0 = label-free MSE + JaSMin (authors' Small rows); 1 = + CE (their CIFAR-100 Base row)
    ce_from_epoch: int = 0  # CE curriculum: CE joins (and the head unfreezes, if frozen) at this epoch
    attn_l1_weight: float = 0.0  # the published attention-map L1 term
    head_norm: bool = True  # paper: teacher's final norm (frozen) before the head; False = published raw CLS
    freeze: List[str] = field(default_factory=lambda: ["patch_embed", "cls_token", "norm", "head"])
    unfreeze_head_at: int = -1  # epoch at which the head becomes trainable (-1 = never)
    jasmin_maps_from: str = "steps"  # JaSMin over the last floor(.85 N) maps | 'grid_points': int(.85 (N+1)) (published)
    attn_maps_after_dropout: bool = False  # True = JaSMin / attention-L1 see the maps after dropout (published)
    train_steps: List[int] = field(default_factory=list)  # ours, beyond the paper: N drawn per batch from this list
    # (each >= the teacher's depth), the checkpoint schedule recomputed for that N; [] = always num_steps


@dataclass
class Dynamics:
    weights: str = "published"  # published = weights/v2, plan v2's models (one seed per cell) | trained = this run's cells
    cells: List[str] = field(default_factory=lambda: ["ref", "free"])  # cells analysed
    test_limit: int = 2000  # test images for the per-sample CLS exponent vs correctness
    bound_samples: int = 16  # images for Prop. 1 (dopri5 reference, Jacobian power iteration)
    bound_steps: List[int] = field(default_factory=lambda: [2, 4, 8, 16, 32, 64])  # N of the convergence-order fit
    lipschitz: float = 0.5  # the L the published code puts in the bound (compared with the measured one)
    power_iters: int = 20  # power iterations per state for sigma_max of the Jacobian of psi
    attention_images: int = 4
    pca_samples: int = 200
    halting_rel_eps: List[float] = field(default_factory=lambda: [0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0])  # x median increment
    halting_stable: int = 3  # also halt once the prediction is unchanged for this many steps (0 = off)


SCHEMAS = {"base": Base, "teacher": Teacher, "scratch": Scratch, "distill": Distill,
           "dynamics": Dynamics}
CHOICES = {
    "dataset": sorted(INFO), "device": ["auto", "cpu", "cuda"], "precision": ["auto", "fp32", "bf16"], "solver": sorted(SOLVERS),
    "norm": ["centernorm", "layernorm"], "normalize": ["dataset", "imagenet", "half"],
    "schedule": ["softmax", "softmax_min1", "uniform"], "schedule_points": ["steps", "grid_points"], "select_on": ["val", "test"],
    "jasmin_maps_from": ["steps", "grid_points"], "weights": ["published"], "distance_tokens": ["cls", "all"], "mse_tokens": ["cls", "all"],
}
POSITIVE = {"lipschitz", "power_iters", "bound_samples", "num_steps", "epochs", "lr", "tau", "mlp_ratio", "batch_size", "eval_batch_size", "image_size", "patch_size",
            "embed_dim", "num_heads", "depth", "channels", "distance_batches", "horizon", "jasmin_k", "cycles",
            "equivalence_margin_pts", "converge_window"}
NON_NEGATIVE = {"val_size", "train_limit", "test_limit", "patience", "min_delta_pts"}


def _non_negative() -> set:
    """NON_NEGATIVE and the weight of every registered distillation term (odevit.losses.TERMS; imported when a block
    is parsed: importing config loads no layer module, tests/test_layout.py)."""
    from ..losses import TERMS

    return NON_NEGATIVE | {t.weight for t in TERMS.values()}


def _check_type(block: str, key: str, value: Any, tp: Any) -> Any:
    where = f"params.yaml: {block}.{key} = {value!r}"
    origin = get_origin(tp)
    if origin is Union:  # Optional[X]
        if value is None:
            return None
        tp = [a for a in get_args(tp) if a is not type(None)][0]
        origin = get_origin(tp)
    if origin in (list, dict):
        if not isinstance(value, origin):
            raise ConfigError(f"{where}: expected a {origin.__name__}")
        return value
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        try:
            return float(value)  # YAML reads 1e-3 as a string
        except ValueError:
            pass
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {tp.__name__}")
    return value


def parse(block: str, values: Optional[Dict[str, Any]]) -> Any:
    """A params.yaml block (dict) -> its typed dataclass, or ConfigError naming key, value and what is allowed."""
    schema = SCHEMAS[block]
    hints = get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    out, non_negative = {}, _non_negative()
    for key, value in (values or {}).items():
        if key not in hints:
            raise ConfigError(f"params.yaml: {block}.{key} is not a known key (allowed: {', '.join(names)})")
        value = _check_type(block, key, value, hints[key])
        if key in CHOICES and value not in CHOICES[key]:
            raise ConfigError(f"params.yaml: {block}.{key} = {value!r} is not one of {CHOICES[key]}")
        if key in POSITIVE and value is not None and value <= 0:
            raise ConfigError(f"params.yaml: {block}.{key} = {value!r} must be > 0")
        if key in non_negative and value is not None and value < 0:
            raise ConfigError(f"params.yaml: {block}.{key} = {value!r} must be >= 0")
        out[key] = value
    cfg = schema(**out)
    if isinstance(cfg, Base) and cfg.val_size == 0 and cfg.select_on != "test":
        raise ConfigError("params.yaml: base.val_size = 0 leaves no validation split: set base.select_on: test "
                          "(the authors' test-set selection) or val_size > 0")
    if hasattr(cfg, "embed_dim") and hasattr(cfg, "num_heads") and None not in (cfg.embed_dim, cfg.num_heads) \
            and cfg.embed_dim % cfg.num_heads:
        raise ConfigError(f"params.yaml: {block}.num_heads = {cfg.num_heads} must divide embed_dim {cfg.embed_dim}")
    if isinstance(cfg, Distill):
        from ..teacher import COPYABLE

        bad = [k for k in cfg.freeze if k not in COPYABLE]
        if bad:
            raise ConfigError(f"params.yaml: distill.freeze = {bad} not in {list(COPYABLE)}")
        if cfg.schedule_points == "grid_points" and cfg.schedule != "softmax":
            raise ConfigError(f"params.yaml: distill.schedule_points = 'grid_points' needs distill.schedule = "
                              f"'softmax' (got {cfg.schedule!r}); use 'steps'")
    return cfg


def chdir_root(markers: tuple = ("params.yaml", "dvc.yaml")) -> str:
    """Move to the repository root (the nearest directory up from here holding params.yaml and dvc.yaml): a
    notebook opened in Jupyter from notebooks/ then reads params.yaml and writes results/ as `dvc repro` does."""
    d = os.path.abspath(os.getcwd())
    while not all(os.path.isfile(os.path.join(d, m)) for m in markers):
        if os.path.dirname(d) == d:
            raise ConfigError(f"no {' and '.join(markers)} in {os.getcwd()} or above: open the notebook inside the "
                              "repository")
        d = os.path.dirname(d)
    os.chdir(d)
    return d


def read_yaml(path: str, error: Optional[type] = None, hint: str = "run from the repository root") -> Dict[str, Any]:
    """A YAML file as a dict; `error` (default ConfigError) with one line naming the file when it is missing or is
    not valid YAML (params.yaml): files.read_yaml with that error."""
    return files.read_yaml(path, error or ConfigError, error or ConfigError, hint)


def load(block: str, values: Optional[Dict[str, Any]] = None, params_file: str = "params.yaml") -> Any:
    """Parse a block injected by papermill, or read it from params.yaml when run by hand."""
    if values is None:
        values = read_yaml(params_file).get(block, {})
    return parse(block, _knobs(block, values))


def merged(base: Any, **overrides: Any) -> Any:
    """A copy of a config with some fields replaced (validated like params.yaml)."""
    block = next(k for k, v in SCHEMAS.items() if v.__name__ == type(base).__name__)
    return parse(block, {**dataclasses.asdict(base), **overrides})


RUN = ["base", "teacher", "distill"]
# The params.yaml blocks each entry point reads. A dvc.yaml stage's entry lists the blocks of its `params` there
# (tests/test_reliability.py checks they agree); the first stage checks every block.
STAGE_BLOCKS = {
    "01_data": ["base", "teacher", "distill", "dynamics"],  # notebooks 01_data: checks every block and the plan
    "02_teacher": ["base", "teacher", "distill"],  # notebooks 02_teacher (distill.distance_batches, distance_tokens)
    "06_dynamics": RUN + ["dynamics"],  # notebooks 06_dynamics
    "cell": RUN,  # the trainer (odevit.repro.fast: notebooks 02-05), odevit.repro.weights
}


def _knobs(block: str, values: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A block's knobs: the teacher block also holds the plan's own keys (plan.PLAN_TEACHER beyond the recipe the
    teacher config has: its seeds, the weak teacher), which plan.py reads."""
    if block == "teacher" and values:
        return {k: v for k, v in values.items() if k not in plan_mod.PLAN_TEACHER - plan_mod.TEACHER_KEYS}
    return values


def check_stage(stage: str, params_file: str = "params.yaml") -> Dict[str, Any]:
    """Parse the blocks a stage reads and check what spans blocks; ConfigError (one line) on the first problem."""
    if stage not in STAGE_BLOCKS:
        raise ConfigError(f"stage '{stage}' is not one of {list(STAGE_BLOCKS)}")
    params = read_yaml(params_file)
    blocks = list(dict.fromkeys([*SCHEMAS, *plan_mod.PLAN_KEYS]))  # the knobs' blocks and the plan's
    unknown = [k for k in params if k not in blocks]
    if unknown:
        raise ConfigError(f"params.yaml: top-level block '{unknown[0]}' is not one of {blocks}")
    if stage == "01_data" and "studies" in params:  # the first stage checks the plan with the knobs, before any work
        try:
            plan_mod.load(params_file)
        except plan_mod.PlanError as e:
            raise ConfigError(str(e)) from None
    cfg = {b: parse(b, _knobs(b, params.get(b))) for b in STAGE_BLOCKS[stage]}
    base: Base = cfg["base"]
    native_c = INFO[base.dataset][0]
    if base.channels != native_c and not (native_c == 1 and base.channels == 3):
        raise ConfigError(f"params.yaml: base.channels = {base.channels} for {native_c}-channel {base.dataset} "
                          f"(allowed: {native_c}, or 3 to repeat a grey image)")
    if "teacher" in cfg:
        cfg["teacher"] = resolve_teacher(cfg["teacher"])
        t = cfg["teacher"]
        if t.pretrained and not t.weights_file:  # fail here, in seconds, not after the hub client's retries
            from ..teacher import TeacherWeightsError, check_hub_reachable

            try:
                check_hub_reachable(t.name)
            except TeacherWeightsError as e:
                raise ConfigError(str(e)) from None
    for b, c in ((b, cfg[b]) for b in ("teacher", "scratch") if b in cfg):
        if base.image_size < c.patch_size:
            raise ConfigError(f"params.yaml: base.image_size = {base.image_size} is smaller than {b}.patch_size "
                              f"{c.patch_size}")
    t = cfg.get("teacher")
    if t is not None and t.weights_file and not os.path.isfile(t.weights_file):
        raise ConfigError(f"params.yaml: teacher.weights_file = {t.weights_file!r} does not exist")
    if "distill" in cfg:
        check_steps(cfg["distill"], t.depth, "distill")
    if stage == "01_data" and "studies" in params:  # every plan cell's overrides, as the trainer will merge them
        for study, body in params["studies"].items():
            for name, ov in (body.get("cells") or {}).items():
                try:
                    d_cell = cell_distill(cfg["distill"], ov, body["budget"]["epochs"])
                except ConfigError as e:
                    raise ConfigError(f"{e} (in studies.{study}.cells.{name})") from None
                check_steps(d_cell, t.depth, f"studies.{study}.cells.{name}")
    return cfg


def check_steps(d: Distill, depth: int, where: str) -> None:
    """The step counts of a distill config (the block, `where` = 'distill', or a cell's) against the teacher's
    `depth` checkpoints: every N of train_steps, then num_steps, must be >= depth; ConfigError naming the key."""
    if any(n < depth for n in d.train_steps):
        raise ConfigError(f"params.yaml: {where}.train_steps = {d.train_steps}: each N must be >= the {depth} "
                          "teacher checkpoints (teacher.depth)")
    if d.num_steps < depth:
        raise ConfigError(f"params.yaml: {where}.num_steps = {d.num_steps} is fewer than the {depth} teacher "
                          "checkpoints (teacher.depth); need num_steps >= depth")


CELL_KEYS = ("free", "preset", "teacher")  # cell keys that are not distill keys


def cell_distill(distill: Distill, cell: Optional[Dict[str, Any]], budget_epochs: int, **fixed: Any) -> Distill:
    """A plan cell's distill config: the block with the cell's overrides (a preset's switches, its curriculum
    rescaled to the study's `budget_epochs`, then the cell's own keys, CELL_KEYS aside) and the study's `fixed`
    keys, which they never change (its budget, tau by the plan's rule)."""
    ov = dict(cell or {})
    preset = ov.pop("preset", None)
    return merged(distill, **{**(preset_overrides(preset, budget_epochs) if preset else {}),
                              **{k: v for k, v in ov.items() if k not in CELL_KEYS}, **fixed})


EPOCH_KEYS = ("ce_from_epoch", "unfreeze_head_at")  # epoch-valued keys a preset's curriculum is given in


def preset_overrides(path: str, epochs: int) -> Dict[str, Any]:
    """The distill block of a preset file as overrides, without its scale keys (epochs, lr, N, ...: a preset's
    switches only, see SWITCH_KEYS) and with its epoch-valued curriculum rescaled from the preset's epochs to
    `epochs` (the published CE/head curriculum at epoch 200 of 300 becomes round(200 / 300 * epochs))."""
    if not os.path.isfile(path):
        raise ConfigError(f"study: preset file '{path}' does not exist")
    with open(path) as f:
        block = dict((yaml.safe_load(f) or {}).get("distill") or {})
    if not block:
        raise ConfigError(f"{path}: has no distill block")
    src_epochs = block.get("epochs")
    out = {k: v for k, v in block.items() if k in SWITCH_KEYS}
    for k in EPOCH_KEYS:
        if k in out and out[k] >= 0:
            if not src_epochs:
                raise ConfigError(f"{path}: distill.{k} needs distill.epochs to be rescaled")
            out[k] = int(round(out[k] / src_epochs * epochs))
    return out


# what a recipe preset may switch; scale keys (epochs, lr, num_steps, mlp_ratio, reg_tokens, ...) stay the run's
SWITCH_KEYS = ("solver", "norm", "spectral_init_qkv", "dropout", "jasmin_weight", "jasmin_k", "jasmin_detach",
               "mse_weight", "mse_tokens", "ce_weight", "ce_from_epoch", "unfreeze_head_at", "attn_l1_weight",
               "head_norm", "freeze", "label_smoothing", "cycles", "warmup", "tau", "schedule", "distance_tokens",
               "schedule_points", "jasmin_maps_from", "attn_maps_after_dropout")


# --- the plan's cells as configs, read from params.yaml and the teacher's committed files -----------------------------

RESULTS, CKPTS = "results/v2", "checkpoints/v2"
KEPT_TEACHER = "weights/v2_teacher/best.pt"  # the selected v2 teacher's best.pt, in git (selected.json: its sha256)
WEAK = f"{RESULTS}/teacher_weak"  # the weak teacher (params.yaml teacher.weak): selected.json, distances.csv


def tau_by_rule(distances: Sequence[float], ratio: float) -> float:
    """Plan v2's tau: ratio x the span of the teacher's distances (the paper's 30 / 49)."""
    span = max(distances) - min(distances)
    if span <= 0:
        raise ValueError(f"tau rule: the teacher's distances {list(distances)} have no span")
    return ratio * span


class Plan:
    """One plan of params.yaml (v2, or v3 with v2's teacher) as the driver needs it: configs per study and cell, seeds, budgets, the teacher recipe, hashes."""

    def __init__(self, path: str = "params.yaml", version: int = 2):
        self.path, self.version, self.plan = path, version, plan_mod.load(path, version)
        self.results = plan_mod.RESULTS_OF[version]  # the plan's runs; the teacher's stay in RESULTS (plan v2's)
        self.ckpts = f"checkpoints/v{version}"
        cfg = check_stage("cell", path)
        r = self.plan["rules"]
        self.base = merged(cfg["base"], precision=r["precision"])
        self.teacher_cfg = merged(cfg["teacher"], **{k: v for k, v in self.plan["teacher"].items()
                                                              if k in plan_mod.TEACHER_KEYS})
        self.distill = cfg["distill"]
        self.optim = dict(floor=float(r["schedule"]["lr_floor"]), floor_frac=float(r["schedule"]["floor_frac"]))

    def hash(self, study: Optional[str]) -> str:
        return plan_mod.study_hash(self.plan, study)


@dataclass
class Cell:
    """One plan cell as the trainer builds it: its distill config (the study's budget and the cell's overrides, tau by
    the rule from its teacher's distances), whether it is the free ODE, its teacher (committed files only), and, once
    built (pipeline.build), per seed the teacher loaded and the cell's model as initialised under that seed."""
    distill: Any
    free: bool
    teacher: str  # 'strong' (the plan's teacher) | 'weak' (plan 1's 3-epoch teacher); free cells too ('strong')
    checkpoint: str  # the teacher's checkpoint folder (its best.pt: `teacher_weights`)
    distances: List[float]
    sha256: str
    teachers: List[Any] = field(default_factory=list)  # nn.Module per seed
    models: List[Any] = field(default_factory=list)  # ODEViT per seed


def cell_of(p: Plan, study: str, cell: str) -> Cell:
    """The cell's configuration, read from the plan and the committed teacher files; nothing is built or trained."""
    s = p.plan["studies"][study]
    ov = s["cells"][cell] or {}
    free, which = bool(ov.get("free", False)), ov.get("teacher", "strong")
    folder = WEAK if which == "weak" else f"{RESULTS}/teacher"
    import json

    import pandas as pd

    sel = json.load(open(f"{folder}/selected.json"))
    dist = pd.read_csv(f"{folder}/distances.csv")["distance"].tolist()
    ck = "checkpoints/v2/teacher_weak" if which == "weak" else f"{CKPTS}/teacher/s{sel['seed']}"
    d = cell_distill(p.distill, ov, s["budget"]["epochs"], epochs=s["budget"]["epochs"], patience=0,
                            tau=tau_by_rule(dist, float(p.plan["rules"]["tau_rule"]["ratio"])))
    return Cell(d, free, which, ck, dist, sel["sha256"])


if __name__ == "__main__":  # python -m odevit.repro.config STAGE: validate before any work (the notebook runner does it)
    import sys

    from odevit.repro import config as _imported  # other modules raise odevit.repro.config.ConfigError, not __main__'s

    try:
        _imported.check_stage(sys.argv[1] if len(sys.argv) > 1 else "")
    except _imported.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
