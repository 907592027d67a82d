"""The shared mixed-precision trainer.

    from babelzoo.train import Trainer, TrainConfig, load_recipe

    summary = Trainer(model, objective, dataset, TrainConfig(max_steps=1000, precision="bf16")).fit()

``babelzoo pretrain --config RECIPE.yaml [--set key=value ...]`` does the same from a YAML recipe.
"""

from .checkpoint import CheckpointCorrupted, CheckpointManager
from .config import TrainConfig, load_recipe
from .distributed import all_gather_with_grad
from .flops import measure_matmul_peak, mfu, model_flops_per_token
from .optim import LAMB, Schedule, build_optimizer, param_groups
from .precision import Precision
from .trainer import Trainer

__all__ = [
    "CheckpointCorrupted", "CheckpointManager", "LAMB", "Precision", "Schedule", "TrainConfig", "Trainer",
    "all_gather_with_grad", "build_optimizer", "load_recipe", "measure_matmul_peak", "mfu", "model_flops_per_token",
    "param_groups",
]
