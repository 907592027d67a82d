"""A training run's grouped settings: how parameters move (:class:`OptimConfig`), when
checkpoints are written and whether a run resumes from them (:class:`CheckpointConfig`), and what
it reports (:class:`LoggingConfig`); :class:`~babelzoo.train.config.TrainConfig` holds one of
each (``optim``, ``checkpoints``, ``logging``). The flat names of earlier versions (``lr``,
``checkpoint_every``, ...) are moved into their groups wherever a config is read
(:func:`nest_flat_keys`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping, Optional, Sequence

from ..errors import ConfigError
from ..typed import check_fields

OPTIMIZERS = ("lamb", "adamw")
SCHEDULES = ("linear", "cosine", "inverse_sqrt", "constant")
CHECKPOINT_FORMATS = ("full", "sharded")


@dataclass
class OptimConfig:
    """How parameters move: the optimizer, its learning-rate schedule, clipping and layer-wise
    decay (a recipe's ``optim:`` group, ``--set optim.lr=5e-4``)."""

    optimizer: str = "lamb"
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, ...] = (0.9, 0.999)
    eps: float = 1e-6
    schedule: str = "linear"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    max_grad_norm: float = 1.0  # 0: no clipping
    # layer-wise learning-rate decay (ELECTRA, Clark et al. 2020): layer l of L gets
    # lr · decay^(L + 1 − l), the embeddings (l = 0) the smallest, the heads (l = L + 1) lr itself
    layer_lr_decay: float = 1.0

    def __post_init__(self) -> None:
        check_fields(self, "TrainConfig.optim")
        one_of(self, "TrainConfig.optim", optimizer=OPTIMIZERS, schedule=SCHEDULES)
        for name in ("lr", "eps"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"TrainConfig.optim.{name}={getattr(self, name)!r} must be positive")
        for name in ("weight_decay", "max_grad_norm", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ConfigError(f"TrainConfig.optim.{name}={getattr(self, name)!r} must be non-negative"
                                  + (" (0 disables clipping)" if name == "max_grad_norm" else ""))
        if not 0.0 < self.layer_lr_decay <= 1.0:
            raise ConfigError(f"TrainConfig.optim.layer_lr_decay={self.layer_lr_decay!r} must be in (0, 1] (1: no decay)")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"TrainConfig.optim.min_lr_ratio={self.min_lr_ratio!r} must be in [0, 1]")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"TrainConfig.optim.betas={self.betas!r} must be two numbers in [0, 1)")


@dataclass
class CheckpointConfig:
    """When and how a run writes checkpoints, and whether it resumes from them (a recipe's
    ``checkpoints:`` group, ``--set checkpoints.every=1000``).

    ``resume``: continue from the newest valid checkpoint in ``output_dir`` (a fresh directory
    simply starts); with ``resume: false`` a directory that already holds checkpoints is an
    error rather than silently mixed with a new run. ``format``: ``full``, rank 0 gathers the
    model and optimizer into one safetensors file each; ``sharded``, every rank writes its own
    slices through torch.distributed.checkpoint (no gathering, no pickle), and a run of any
    number of processes resumes from them (:mod:`babelzoo.train.checkpoint`)."""

    every: int = 500
    keep: int = 3
    resume: bool = True
    format: str = "full"

    def __post_init__(self) -> None:
        check_fields(self, "TrainConfig.checkpoints")
        one_of(self, "TrainConfig.checkpoints", format=CHECKPOINT_FORMATS)
        at_least_one(self, "TrainConfig.checkpoints", "every", "keep")


@dataclass
class LoggingConfig:
    """What a run reports and where (a recipe's ``logging:`` group, ``--set logging.progress=false``):
    a line every ``every`` steps, a progress bar, TensorBoard, or the experiment trackers
    ``loggers`` names (:mod:`babelzoo.train.trackers`: tensorboard, mlflow, wandb; when given,
    they replace the ``tensorboard`` switch, and a tracker whose package is missing is an
    error); model FLOPs utilisation against ``peak_flops`` (FLOP/s; null: the device's, where known)."""

    every: int = 10
    progress: bool = True
    tensorboard: bool = True
    loggers: Optional[list[str]] = None
    measure_mfu: bool = True
    peak_flops: Optional[float] = None

    def __post_init__(self) -> None:
        check_fields(self, "TrainConfig.logging")
        at_least_one(self, "TrainConfig.logging", "every")
        if self.loggers is not None:
            from .trackers import check_loggers

            check_loggers(self.loggers)
        if self.peak_flops is not None and not self.peak_flops > 0:
            raise ConfigError(f"TrainConfig.logging.peak_flops={self.peak_flops!r} must be positive (FLOP/s) or null")


def one_of(obj: Any, label: str, **choices: Sequence[str]) -> None:
    """An error naming ``label.name`` when a setting of ``obj`` is not one of its choices."""
    for name, options in choices.items():
        if getattr(obj, name) not in options:
            raise ConfigError(f"{label}.{name}={getattr(obj, name)!r} must be one of {', '.join(map(repr, options))}")


def at_least_one(obj: Any, label: str, *names: str) -> None:
    """An error naming ``label.name`` when a count of ``obj`` is below 1."""
    for name in names:
        if getattr(obj, name) < 1:
            raise ConfigError(f"{label}.{name}={getattr(obj, name)!r} must be at least 1")


# where each setting of the flat layout of earlier versions now lives: recipes, ``--set`` and the
# configs saved in run folders and checkpoints may still spell them flat (``lr=5e-4``)
MOVED = {
    **{name: f"optim.{name}" for name in (f.name for f in fields(OptimConfig))},
    "checkpoint_every": "checkpoints.every", "keep_checkpoints": "checkpoints.keep", "resume": "checkpoints.resume",
    "checkpoint_format": "checkpoints.format",
    "log_every": "logging.every", "progress": "logging.progress", "tensorboard": "logging.tensorboard",
    "loggers": "logging.loggers", "measure_mfu": "logging.measure_mfu", "peak_flops": "logging.peak_flops",
}


def nest_flat_keys(data: Mapping[str, Any], lines: Optional[Mapping[str, int]] = None, path: str = ""
                   ) -> tuple[dict[str, Any], Optional[dict[str, int]]]:
    """A TrainConfig mapping with the flat keys of earlier versions (:data:`MOVED`) moved into
    their groups, and ``lines`` (the line of each key path, the mapping read at ``path``) moved
    with them; a key given both ways is an error, since one of the two would be lost."""
    prefix = f"{path}." if path else ""
    out = dict(data)
    lines = dict(lines) if lines is not None else None
    for old, new in MOVED.items():
        if old not in out:
            continue
        group, name = new.split(".")
        section = out.get(group)
        section = dict(section) if isinstance(section, Mapping) else {} if section is None else section
        if not isinstance(section, dict):
            break  # a malformed group: its own error names it
        if name in section:
            raise ConfigError(f"TrainConfig: {prefix}{old!r} and {prefix}{new!r} both set; {old!r} is the earlier "
                              f"spelling of {new!r}, keep one")
        section[name] = out.pop(old)
        out[group] = section
        if lines is not None and prefix + old in lines:
            lines[prefix + new] = lines.pop(prefix + old)
    return out, lines
