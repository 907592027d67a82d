"""Position-wise feed-forward networks: the two-layer MLP (BERT) and gated linear units
(GeGLU, SwiGLU; Shazeer 2020, "GLU Variants Improve Transformer")."""

from __future__ import annotations

import torch
from torch import nn

from .dropout import Dropout
from .linear import Linear

ACTIVATIONS = {
    "gelu": nn.GELU,
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "relu": nn.ReLU,
    "silu": nn.SiLU,
}


def activation(name: str) -> nn.Module:
    return ACTIVATIONS[name]()


class FeedForward(nn.Module):
    """down(σ(up(x))): BERT's two-layer MLP; ``dropout`` applies to σ(up(x)) (XLNet's inner
    dropout)."""

    def __init__(self, hidden_size: int, intermediate_size: int, act: str, bias: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        self.up = Linear(hidden_size, intermediate_size, bias=bias)
        self.act = activation(act)
        self.dropout = Dropout(dropout)
        self.down = Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if isinstance(self.act, nn.GELU) and not torch.is_grad_enabled():
            # Without autograd nothing else reads up(x): GELU in place spares a [N, 4H]
            # buffer and a third of the activation's time on the CPU. Same values.
            h = torch.ops.aten.gelu_(h, approximate=self.act.approximate)
        else:
            h = self.act(h)
        return self.down(self.dropout(h))


class GatedFeedForward(nn.Module):
    """down(σ(a) ⊙ g) with [a; g] = up(x): a gated linear unit, GeGLU with σ = GELU, SwiGLU with
    σ = SiLU. ``up`` is one [2·I, H] projection (the value half first, as ModernBERT stores
    it); ``dropout`` applies to the gated product."""

    def __init__(self, hidden_size: int, intermediate_size: int, act: str, bias: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        self.up = Linear(hidden_size, 2 * intermediate_size, bias=bias)
        self.act = activation(act)
        self.dropout = Dropout(dropout)
        self.down = Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = self.up(x).chunk(2, dim=-1)
        return self.down(self.dropout(self.act(value) * gate))
