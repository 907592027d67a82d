"""What the trainer trains: the model and the objectives' heads as one module, whose state-dict
keys (``model.*``, ``objectives.*``) are those of every checkpoint."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class TrainModule(nn.Module):
    """The model and the objectives' heads as one module, so that DDP/FSDP, the optimizer and
    checkpoints see every trained parameter (a head tied to the word embeddings counts once)."""

    def __init__(self, model: nn.Module, objectives: nn.Module):
        super().__init__()
        self.model = model
        self.objectives = objectives
        self.last = None  # the last Loss (metrics, token count) for logging
        # What the objectives call: the model, or a compiled wrapper of it. Kept in a tuple so
        # that it is not a submodule (the state-dict keys stay the model's own).
        self._runner: tuple[nn.Module] = (model,)

    def compile_model(self) -> None:
        """Route the objectives' calls of the model through ``torch.compile``; the model
        itself is wrapped, not changed, so the caller's module stays eager."""
        self._runner = (torch.compile(self.model),)

    def forward(self, batch: Any) -> torch.Tensor:
        self.last = self.objectives(self._runner[0], batch)
        return self.last.value

    def tied_keys(self) -> dict[str, str]:
        """State-dict keys whose tensor is the same object as an earlier key's (tied weights),
        each mapped to that earlier key: a checkpoint holds such a tensor once."""
        first: dict[int, str] = {}
        alias: dict[str, str] = {}
        for key, tensor in self.state_dict(keep_vars=True).items():
            if id(tensor) in first:
                alias[key] = first[id(tensor)]
            else:
                first[id(tensor)] = key
        return alias
