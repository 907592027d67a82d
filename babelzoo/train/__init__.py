"""The shared mixed-precision trainer.

    from babelzoo.train import Trainer, TrainConfig, load_recipe

    summary = Trainer(model, objective, dataset, TrainConfig(max_steps=1000, precision="bf16")).fit()

``babelzoo pretrain --config RECIPE.yaml [--set key=value ...]`` does the same from a YAML recipe.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

# names load on first use, so that a command's --help does not import torch
_API = {
    "CheckpointCorrupted": "checkpoint",
    "CheckpointManager": "checkpoint",
    "TrainConfig": "config",
    "load_recipe": "config",
    "all_gather_with_grad": "distributed",
    "measure_matmul_peak": "flops",
    "mfu": "flops",
    "model_flops_per_token": "flops",
    "LAMB": "optim",
    "Schedule": "optim",
    "build_optimizer": "optim",
    "param_groups": "optim",
    "Precision": "precision",
    "Trainer": "trainer",
}

__all__ = sorted(_API)

__getattr__ = lazy_getattr(__name__, _API)
