"""What every pre-training objective is: an ``nn.Module`` that owns its heads, prepares its
batches from raw examples (in DataLoader workers) and computes a :class:`Loss`."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import torch
from torch import nn

from ..errors import InputError
from ..registry import Registry


@dataclass
class Loss:
    """``value``: the scalar to minimise; ``metrics``: values to log (accuracy, counts), as
    detached 0-dim tensors or numbers; ``tokens``: how many input tokens the step processed (for
    throughput), a tensor or an int. The trainer reads tensors back only at its logging interval,
    so an objective should not call ``.item()`` or ``float()`` on device values."""

    value: torch.Tensor
    metrics: dict[str, torch.Tensor | float] = field(default_factory=dict)
    tokens: torch.Tensor | int = 0


class Objective(nn.Module, abc.ABC):
    """Base class. Subclasses set ``name`` and implement :meth:`prepare` and :meth:`forward`.

    ``prepare(examples)`` turns a list of raw examples (token-id lists, translation pairs...)
    into a dict of tensors; it runs in DataLoader workers and must be deterministic given the
    torch RNG state. ``forward(model, batch)`` runs the encoder and the objective's heads.
    ``consumes`` names the example type of :data:`babelzoo.datasets.sources.EXAMPLE_TYPES` it
    prepares, so a recipe's data sources are checked against it before training.
    """

    name: ClassVar[str] = ""
    consumes: ClassVar[str] = ""

    @abc.abstractmethod
    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        """Collate raw examples into a batch of tensors."""

    @abc.abstractmethod
    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        """Compute the loss of ``model`` on ``batch``."""


# objectives of the layers above (the knowledge objectives) and of installed packages register
# through the entry-point group
OBJECTIVES: Registry[type[Objective]] = Registry("objective", group="babelzoo.objectives")


def register_objective(cls: type[Objective]) -> type[Objective]:
    """Class decorator: register under ``cls.name``."""
    if not cls.name:
        raise InputError(f"{cls.__name__} must set a non-empty `name` to be registered")
    if not cls.consumes:
        raise InputError(f"{cls.__name__} must set `consumes`, the example type it prepares, to be registered")
    OBJECTIVES.register(cls, name=cls.name)
    return cls
