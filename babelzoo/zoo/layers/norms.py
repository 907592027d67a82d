"""Normalisation layers by name: LayerNorm (with or without its bias) and RMSNorm."""

from __future__ import annotations

from torch import nn

from ..config import ConfigError

NORMS = ("layer", "rms")


def make_norm(kind: str, dim: int, eps: float, bias: bool = True) -> nn.Module:
    """``layer``: LayerNorm, (x − μ)/σ·γ + β (no β with ``bias=False``); ``rms``: RMSNorm,
    x/rms(x)·γ (Zhang & Sennrich 2019), which has no bias."""
    if kind == "layer":
        return nn.LayerNorm(dim, eps=eps, bias=bias)
    if kind == "rms":
        return nn.RMSNorm(dim, eps=eps)
    raise ConfigError(f"unknown norm {kind!r}; choose one of {', '.join(NORMS)}")
