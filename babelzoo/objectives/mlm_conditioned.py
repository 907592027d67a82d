"""Masked language modelling conditioned on an image or on speech: ViLT's and ALBEF's MLM
(Kim et al. 2021, §3.2; Li et al. 2021, §3.2).

The caption is masked as in BERT (15%, 80/10/10; :class:`~babelzoo.objectives.masking.Masker`)
and its tokens are predicted from the fused text states, so the image or the utterance has to
supply what the masked words said::

    L = −(1/|M|) Σ_{i∈M} log p(w_i | ŵ, V)
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
from torch import nn

from ..datasets.multimodal import collate_multimodal
from ..datasets.multimodal_media import SpecAugment
from ..datasets.specials import SpecialIds
from ..errors import InputError
from .base import Loss, register_objective
from .itc import fusion_model, modality_inputs
from .masking import MaskingConfig
from .mlm import MaskingObjective


@register_objective
class ConditionedMLM(MaskingObjective):
    """MLM on captions/transcripts fused with their image or speech (single-stream or
    cross-attention models). Examples: dicts from
    :class:`~babelzoo.datasets.multimodal.MultimodalDataset`."""

    name = "mlm_conditioned"
    consumes = "media_text"

    def __init__(self, specials: SpecialIds, *, masking: MaskingConfig | Mapping | None = None,
                 word_starts: Optional[torch.Tensor] = None, max_length: int = 128, use_language_ids: bool = True,
                 spec_augment: Optional[SpecAugment | dict] = None):
        super().__init__(specials, masking=masking, word_starts=word_starts, max_length=max_length,
                         use_language_ids=use_language_ids)
        self.spec_augment = SpecAugment(**spec_augment) if isinstance(spec_augment, dict) else spec_augment

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        batch = collate_multimodal(examples, self.specials, self.max_length, self.spec_augment)
        masked = self.masker(batch["input_ids"])
        batch["input_ids"], batch["labels"] = masked.input_ids, masked.labels
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        core = fusion_model(model, self.name)
        if not core.has_joint_encoder:
            raise InputError(f"conditioned MLM needs a joint encoder; model {core.config.architecture!r} is a dual "
                             f"encoder (fusion.mode='dual')")
        loss = self.masked_lm(model, batch, **modality_inputs(batch))
        loss.metrics["skipped_media"] = batch.get("skipped", 0)
        return loss

