"""The shared mixed-precision trainer.

    from babelzoo.train import OptimConfig, Trainer, TrainConfig, load_recipe

    config = TrainConfig(max_steps=1000, precision="bf16", optim=OptimConfig(lr=5e-4))
    summary = Trainer(model, objective, dataset, config).fit()

``babelzoo pretrain --config RECIPE.yaml [--set key=value ...]`` does the same from a YAML recipe.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

# names load on first use, so that a command's --help does not import torch
_API = {
    **dict.fromkeys(["CheckpointCorrupted", "CheckpointManager"], "checkpoint"),
    **dict.fromkeys(["TrainConfig", "load_recipe"], "config"),
    **dict.fromkeys(["CheckpointConfig", "LoggingConfig", "OptimConfig"], "settings"),
    **dict.fromkeys(["all_gather_with_grad"], "distributed"),
    **dict.fromkeys(["measure_matmul_peak", "mfu", "model_flops_per_token"], "flops"),
    **dict.fromkeys(["LAMB", "Schedule", "build_optimizer", "param_groups"], "optim"),
    **dict.fromkeys(["Precision"], "precision"),
    **dict.fromkeys(["Trainer"], "trainer"),
}

__all__ = sorted(_API)

__getattr__ = lazy_getattr(__name__, _API)
