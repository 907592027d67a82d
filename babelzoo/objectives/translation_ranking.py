"""Translation ranking with additive margin softmax, LaBSE's objective.

Feng et al. 2022, "Language-agnostic BERT Sentence Embedding" (LaBSE), after Yang et
al. 2019 ("Improving Multilingual Sentence Embedding using Bi-directional Dual Encoder with
Additive Margin Softmax"): a dual encoder ranks the true translation y_i of x_i above every
other y_n of the batch, with a margin m subtracted from the positive's score,

    L = −(1/N) Σ_i log [ e^{φ(x_i, y_i) − m} / (e^{φ(x_i, y_i) − m} + Σ_{n≠i} e^{φ(x_i, y_n)}) ]

where φ is the cosine similarity of l2-normalised [CLS] vectors of the last layer and m = 0.3;
the loss is bidirectional, L̄ = L(x → y) + L(y → x). Negatives come from the global batch,
gathered across DDP ranks ("cross-accelerator negative sampling").

``scale`` multiplies every score, s·(φ − m) and s·φ, as AM-Softmax (Wang et al. 2018) does;
the paper's formula is s = 1 (the default). A larger s (e.g. 10–30) sharpens the softmax over
cosines, which matters for small models trained briefly.
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


def additive_margin_loss(x: torch.Tensor, y: torch.Tensor, margin: float = 0.3, scale: float = 1.0,
                         offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """One direction of LaBSE's loss: x [N, H] ranked against y [M, H] (x_i's translation is
    y_{offset+i}) by cosine with an additive margin on the positive. Returns (loss, accuracy@1)."""
    cos = F.normalize(x.float(), dim=-1) @ F.normalize(y.float(), dim=-1).T
    labels = torch.arange(x.shape[0], device=x.device) + offset
    positive = F.one_hot(labels, cos.shape[1]).to(cos.dtype)
    logits = scale * (cos - margin * positive)  # φ(x_i, y_i) − m on the diagonal only
    loss = F.cross_entropy(logits, labels)
    accuracy = (cos.detach().argmax(-1) == labels).float().mean()
    return loss, accuracy


@register_objective
class TranslationRanking(DualEncoderObjective):
    """LaBSE's bidirectional translation ranking with additive margin softmax."""

    name = "translation_ranking"
    consumes = "pair"

    def __init__(self, specials: SpecialIds, *, margin: float = 0.3, scale: float = 1.0,
                 bidirectional: bool = True, pooling: Optional[str] = None, layer: Optional[int] = None,
                 max_length: int = 128, use_language_ids: bool = True):
        super().__init__(specials, pooling=pooling, layer=layer, max_length=max_length,
                         use_language_ids=use_language_ids)
        if scale <= 0:
            raise ConfigError(f"TranslationRanking scale={scale!r} must be positive")
        self.margin = margin
        self.scale = scale
        self.bidirectional = bidirectional

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        src, tgt = self.embed(model, batch)
        all_tgt, offset = gather_with_grad(tgt)
        loss, accuracy = additive_margin_loss(src, all_tgt, self.margin, self.scale, offset)
        metrics = {"accuracy_forward": accuracy}
        if self.bidirectional:
            all_src, offset = gather_with_grad(src)
            back, back_accuracy = additive_margin_loss(tgt, all_src, self.margin, self.scale, offset)
            loss = loss + back  # L̄ = L + L′
            metrics["accuracy_backward"] = back_accuracy
            accuracy = (accuracy + back_accuracy) / 2
        metrics.update(loss=loss.detach(), accuracy=accuracy, truncated=batch["truncated"])
        return Loss(loss, metrics, batch["attention_mask"].sum())
