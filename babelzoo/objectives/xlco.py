"""Cross-lingual contrast (XLCo), InfoXLM's sentence-level objective.

Chi et al. 2021, "InfoXLM: An Information-Theoretic Framework for Cross-Lingual Language Model
Pre-Training": maximise a lower bound (InfoNCE, van den Oord et al. 2018) of the mutual
information between a sentence c_1 and its translation c_2 by telling c_2 apart from
negatives N:

    L = −log [ exp(f(c_1)ᵀ f(c_2) / τ) / Σ_{c ∈ N ∪ {c_2}} exp(f(c_1)ᵀ f(c) / τ) ]

f(c) is the [CLS] vector of a chosen layer (InfoXLM uses layer 8 of 12, τ = 0.25, dot product
without normalisation). InfoXLM draws N from a momentum encoder's queue; here N is the other
targets of the global batch, gathered across DDP ranks with gradients (SimCLR-style in-batch
negatives), so every negative is encoded by the current model.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError
from .base import Loss, register_objective
from .contrastive import DualEncoderObjective
from .gather import gather_with_grad


def info_nce(queries: torch.Tensor, keys: torch.Tensor, temperature: float, offset: int = 0,
             normalize: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """InfoNCE of queries [N, H] against keys [M, H], query i's positive being key ``offset + i``.

    L = −(1/N) Σ_i log softmax_j(q_i·k_j / τ)[offset + i]; returns (loss, accuracy@1).
    """
    if normalize:
        queries, keys = F.normalize(queries, dim=-1), F.normalize(keys, dim=-1)
    logits = queries.float() @ keys.float().T / temperature
    labels = torch.arange(queries.shape[0], device=queries.device) + offset
    loss = F.cross_entropy(logits, labels)
    accuracy = (logits.detach().argmax(-1) == labels).float().mean()
    return loss, accuracy


@register_objective
class XLCo(DualEncoderObjective):
    """InfoXLM's cross-lingual contrast over translation pairs with in-batch negatives gathered
    across ranks. ``symmetric=True`` adds the target → source direction (mean of the two)."""

    name = "xlco"
    consumes = "pair"

    def __init__(self, specials: SpecialIds, *, temperature: float = 0.25, layer: Optional[int] = None,
                 pooling: Optional[str] = None, normalize: bool = False, symmetric: bool = False, max_length: int = 128,
                 use_language_ids: bool = True):
        super().__init__(specials, pooling=pooling, layer=layer, max_length=max_length,
                         use_language_ids=use_language_ids)
        if temperature <= 0:
            raise ConfigError(f"XLCo temperature={temperature!r} must be positive")
        self.temperature = temperature
        self.normalize = normalize
        self.symmetric = symmetric

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        src, tgt = self.embed(model, batch)
        keys, offset = gather_with_grad(tgt)
        loss, accuracy = info_nce(src, keys, self.temperature, offset, self.normalize)
        if self.symmetric:
            queries, offset = gather_with_grad(src)
            back, back_accuracy = info_nce(tgt, queries, self.temperature, offset, self.normalize)
            loss, accuracy = (loss + back) / 2, (accuracy + back_accuracy) / 2
        metrics = {"loss": loss.detach(), "accuracy": accuracy, "truncated": batch["truncated"]}
        return Loss(loss, metrics, batch["attention_mask"].sum())
