"""Image–text (and speech–text) matching with hard negatives, as in ALBEF (Li et al. 2021, §3.2)
and ViLT (Kim et al. 2021).

A binary head on the fused [CLS] state says whether text and image belong together. Each text
gets a negative image and each image a negative text, sampled in proportion to their
contrastive similarity (softmax over exp(s)·cos), so the negatives are the confusable ones;
positives (the pair itself and any item of the same group) are never sampled::

    L = CE(head(fuse(T, V)), 1) over the B positive pairs + CE(·, 0) over the 2B negative pairs
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.multimodal import collate_multimodal
from ..datasets.multimodal_media import SpecAugment
from ..datasets.specials import SpecialIds
from ..errors import InputError
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, Objective, register_objective
from .batching import encoder_inputs
from .itc import MAX_LOGIT_SCALE, fusion_model, modality_inputs


def sample_hard_negatives(similarity: torch.Tensor, positive: torch.Tensor,
                          generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """For each row of ``similarity`` [B, N], one column index drawn with probability ∝
    softmax(similarity) among the non-positive columns (``positive`` [B, N] bool), or -1 for a
    row whose every column is positive. ALBEF's +1e-5 keeps every negative reachable."""
    weights = F.softmax(similarity.float(), dim=1) + 1e-5
    weights = weights.masked_fill(positive, 0.0)
    out = torch.full((similarity.shape[0],), -1, dtype=torch.long, device=similarity.device)
    rows = weights.sum(dim=1) > 0
    if bool(rows.any()):
        out[rows] = torch.multinomial(weights[rows], 1, generator=generator).squeeze(1)
    return out


def _select(inputs: dict[str, Optional[torch.Tensor]], index: torch.Tensor) -> dict[str, torch.Tensor]:
    return {k: v[index] for k, v in inputs.items() if v is not None}


@register_objective
class ITM(Objective):
    """Binary matching head over the fused first-token state of a single-stream or
    cross-attention model (``dual`` models have no joint encoder); ``config`` sizes the head."""

    name = "itm"
    consumes = "media_text"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, max_length: int = 128,
                 spec_augment: Optional[SpecAugment | dict] = None):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        self.specials, self.max_length = specials, max_length
        self.spec_augment = SpecAugment(**spec_augment) if isinstance(spec_augment, dict) else spec_augment
        self.head = nn.Linear(text.hidden_size, 2)

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        return collate_multimodal(examples, self.specials, self.max_length, self.spec_augment)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        core = fusion_model(model, self.name)
        if not core.has_joint_encoder:
            raise InputError(f"ITM needs a joint encoder; model {core.config.architecture!r} is a dual encoder "
                             f"(fusion.mode='dual'): train it with ITC")
        text = encoder_inputs(model, batch)
        ids, mask = text["input_ids"], text["attention_mask"]
        other = modality_inputs(batch)
        size = ids.shape[0]
        groups = batch.get("group_ids")
        positive = (groups[:, None] == groups[None, :]) if groups is not None else torch.eye(
            size, dtype=torch.bool, device=ids.device)
        with torch.no_grad():
            emb = model(**text, unimodal=True, **other)
            scale = core.logit_scale.clamp(0.0, MAX_LOGIT_SCALE).exp()
            sim = scale * emb.modality_embeds @ emb.text_embeds.t()  # [images, texts]
        neg_image = sample_hard_negatives(sim.t(), positive)  # for each text, an image
        neg_text = sample_hard_negatives(sim, positive)  # for each image, a text
        has_image, has_text = neg_image >= 0, neg_text >= 0
        texts = torch.arange(size, device=ids.device)
        # Rows: B positives, then (text i, image neg_image[i]), then (text neg_text[j], image j).
        text_rows = torch.cat([texts, texts[has_image], neg_text[has_text]])
        image_rows = torch.cat([texts, neg_image[has_image], texts[has_text]])
        fused = model(**_select(text, text_rows), **_select(other, image_rows))
        logits = self.head(fused.last_hidden[:, 0])
        labels = torch.zeros(len(text_rows), dtype=torch.long, device=ids.device)
        labels[:size] = 1
        loss = F.cross_entropy(logits, labels)
        with torch.no_grad():
            accuracy = (logits.argmax(dim=1) == labels).float().mean()
        metrics = {"itm_acc": accuracy, "itm_negatives": float(len(text_rows) - size),
                   "skipped_media": batch.get("skipped", 0)}
        return Loss(loss, metrics, mask.sum())
