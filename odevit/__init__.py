"""odevit: ODE-ViT (arXiv 2511.16501) — the ViT encoder as one shared, Lipschitz-constrained vector field.

Importing the package registers the `odevit_*` models with timm (`timm.create_model("odevit_tiny_patch4_32")`),
including the default run's published weights (`timm.create_model("odevit_small_patch7_28.fmnist_distill",
pretrained=True)`, offline, from weights/: see odevit.hub).
"""
import warnings

from tqdm import TqdmWarning

# timm imports huggingface_hub, which imports tqdm.auto: in a notebook kernel without ipywidgets that warns "IProgress
# not found" once per notebook. odevit's progress output is text (one line per epoch), so the notice says nothing.
warnings.filterwarnings("ignore", message="IProgress not found", category=TqdmWarning)

from .layers import Attention, CenterNorm, spectral_init_  # noqa: E402  (after the warning filter)
from .losses import attention_l1, jasmin, jasmin_rows, topk_correct, trajectory_mse
from .model import ODEViT, ViTField
from . import hub  # noqa: E402  registers the published architectures and tags with timm
from .schedule import checkpoint_indices, layer_distances
from .solvers import SOLVERS, Solver, get_solver
from .teacher import create_teacher, hidden_states, last_attention, load_block_, student_from_teacher

__all__ = [
    "Attention", "CenterNorm", "spectral_init_", "attention_l1", "jasmin", "jasmin_rows", "topk_correct",
    "trajectory_mse", "ODEViT", "ViTField", "checkpoint_indices", "layer_distances", "SOLVERS", "Solver",
    "get_solver", "create_teacher", "hidden_states", "last_attention", "load_block_", "student_from_teacher",
]
__version__ = "0.1.0"
