"""Image–text (and speech–text) contrastive learning: the symmetric InfoNCE loss of CLIP
(Radford et al. 2021) and ALBEF's ITC (Li et al. 2021).

For L2-normalised embeddings v_i (image or speech) and t_j (text) and a learned temperature
τ = 1/exp(s) with s clamped to [0, ln 100] (CLIP caps the logit scale at 100)::

    L = ½ [ CE(exp(s)·V Tᵀ, Y) + CE(exp(s)·T Vᵀ, Y) ]

Negatives are the whole global batch: embeddings are gathered from every rank with their
gradient (:func:`~babelzoo.objectives.gather.gather_with_grad`). Y is the identity, or, when the
batch has ``group_ids``, the row-normalised indicator of equal groups (one emoji named in two
languages is a positive of both names), as in ALBEF's retrieval fine-tuning.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.multimodal import collate_multimodal
from ..datasets.multimodal_media import SpecAugment
from ..datasets.specials import SpecialIds
from ..errors import InputError
from .base import Loss, Objective, register_objective
from .batching import encoder_inputs, unwrap
from .examples import ExampleError
from .gather import gather_with_grad

MAX_LOGIT_SCALE = math.log(100.0)


def modality_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The image or speech keyword arguments of a prepared batch."""
    if "pixel_values" in batch:
        return {"pixel_values": batch["pixel_values"]}
    if "audio_features" in batch:
        return {"audio_features": batch["audio_features"], "audio_mask": batch.get("audio_mask")}
    raise ExampleError("batch has neither pixel_values nor audio_features")


def fusion_model(model: nn.Module, objective: str) -> nn.Module:
    """The fusion model (unwrapped) that an image–text or speech–text ``objective`` trains. A
    text model takes no ``pixel_values`` or ``audio_features``: it is refused here by name,
    with the fix, rather than by its forward's unknown keyword."""
    core = unwrap(model)
    if core.config.fusion is None:
        raise InputError(f"{objective} reads images or speech with their text, but model "
                         f"{core.config.architecture!r} is a text model (no vision or audio part); train a fusion "
                         f"model such as 'vl_fusion_tiny' or 'speech_text_tiny'")
    return core


def positives(groups: Optional[torch.Tensor], all_groups: Optional[torch.Tensor], batch: int, total: int,
              offset: int, device) -> torch.Tensor:
    """[B, N] bool: which gathered items are positives of each local item."""
    if groups is not None and all_groups is not None:
        return groups[:, None] == all_groups[None, :]
    return torch.arange(total, device=device)[None, :] == (torch.arange(batch, device=device) + offset)[:, None]


def contrastive_loss(modality: torch.Tensor, text: torch.Tensor, logit_scale: torch.Tensor,
                     groups: Optional[torch.Tensor] = None,
                     gather: Callable[[torch.Tensor], tuple[torch.Tensor, int]] = gather_with_grad
                     ) -> tuple[torch.Tensor, dict]:
    """Symmetric InfoNCE over normalised ``modality`` [B, D] and ``text`` [B, D] embeddings.

    ``logit_scale`` is s (logits are exp(s)·cosine); ``groups`` [B] int ids of equal content;
    ``gather`` returns a tensor concatenated over ranks and this rank's row offset in it.
    """
    all_modality, rank_offset = gather(modality)
    all_text, _ = gather(text)
    all_groups = gather(groups)[0] if groups is not None else None
    scale = logit_scale.exp()
    m2t = scale * modality @ all_text.t()  # [B, N]
    t2m = scale * text @ all_modality.t()
    pos = positives(groups, all_groups, modality.shape[0], all_text.shape[0], rank_offset, modality.device)
    targets = pos.to(m2t.dtype) / pos.sum(dim=1, keepdim=True)
    loss_m2t = -(targets * F.log_softmax(m2t, dim=1)).sum(dim=1).mean()
    loss_t2m = -(targets * F.log_softmax(t2m, dim=1)).sum(dim=1).mean()
    with torch.no_grad():
        hit_m2t = pos.gather(1, m2t.argmax(dim=1, keepdim=True)).float().mean()
        hit_t2m = pos.gather(1, t2m.argmax(dim=1, keepdim=True)).float().mean()
    metrics = {"itc_acc_m2t": hit_m2t, "itc_acc_t2m": hit_t2m, "temperature": 1 / scale.detach()}
    return (loss_m2t + loss_t2m) / 2, metrics


@register_objective
class ITC(Objective):
    """Image/speech–text contrastive loss; the temperature is the model's ``logit_scale``.

    Examples: dicts from :class:`~babelzoo.datasets.multimodal.MultimodalDataset`.
    ``spec_augment``: SpecAugment (or its fields as a dict) applied to speech at collation.
    """

    name = "itc"
    consumes = "media_text"

    def __init__(self, specials: SpecialIds, *, max_length: int = 128,
                 spec_augment: Optional[SpecAugment | dict] = None, max_logit_scale: float = MAX_LOGIT_SCALE):
        super().__init__()
        self.specials, self.max_length = specials, max_length
        self.spec_augment = SpecAugment(**spec_augment) if isinstance(spec_augment, dict) else spec_augment
        self.max_logit_scale = max_logit_scale

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        return collate_multimodal(examples, self.specials, self.max_length, self.spec_augment)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        core = fusion_model(model, self.name)
        # Through the (possibly DDP-wrapped) model's forward, so gradient synchronisation sees it.
        out = model(**encoder_inputs(model, batch), unimodal=True, **modality_inputs(batch))
        scale = core.logit_scale.clamp(0.0, self.max_logit_scale)
        loss, metrics = contrastive_loss(out.modality_embeds, out.text_embeds, scale, batch.get("group_ids"))
        metrics["skipped_media"] = batch.get("skipped", 0)
        return Loss(loss, metrics, batch["attention_mask"].sum())

