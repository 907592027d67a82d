"""Masked LM over the consecutive segments of long documents, with Transformer-XL's memory.

BERT's masked LM (Devlin et al. 2019, §3.1; :class:`~babelzoo.objectives.masking.Masker`, 15%,
80/10/10, drawn anew each time) on every segment τ of a document, each segment encoded after
the stop-gradient memory of the segments before it (Dai et al. 2019, "Transformer-XL", §3.2;
:mod:`babelzoo.objectives.segments`)::

    L = −(1/|M|) Σ_τ Σ_{i∈M_τ} log p(x_i | x̂_τ, SG(m_τ))

over the masked positions M_τ of every segment. The memory holds the states of the masked
input of earlier segments, so it never shows a later segment's hidden tokens. ``mem_len=0`` is
the same masked LM on the same segments without memory.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, register_objective
from .batching import IGNORE
from .masking import Masker, MaskingConfig
from .mlm import token_prediction_loss
from .segments import SegmentObjective


@register_objective
class SegmentMLM(SegmentObjective):
    """Masked LM over document segments with memory. Examples: documents (sequences of
    sentences, token-id lists or ``(ids, lang)``). ``masking`` and ``word_starts`` as for
    :class:`~babelzoo.objectives.MLM`; the segment options as for
    :class:`~babelzoo.objectives.segments.SegmentObjective`."""

    name = "segment_mlm"
    consumes = "document"
    from_run = ("word_starts",)

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, segment_length: int = 64,
                 mem_len: Optional[int] = None, max_segments: int = 8, masking: MaskingConfig | Mapping | None = None,
                 word_starts: Optional[torch.Tensor] = None, use_language_ids: bool = True):
        super().__init__(specials, config, segment_length=segment_length, mem_len=mem_len,
                         max_segments=max_segments, use_language_ids=use_language_ids)
        self.masker = Masker(specials, masking, word_starts)

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        streams, langs, truncated = self.read(examples, self.max_segments * self.segment_length)
        ids, mask = self.cut(streams)
        masked = self.masker(ids.flatten(0, 1))  # each segment gets its own 15% budget
        batch = {"input_ids": masked.input_ids.view_as(ids), "attention_mask": mask,
                 "labels": masked.labels.view_as(ids)}
        return self.finish(batch, langs, truncated)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        hidden = self.encode(model, batch, causal=False)
        labels = batch["labels"]
        selected = torch.cat([h[labels[:, s].ne(IGNORE)] for s, h in enumerate(hidden)])
        # one row of every segment's labels in segment order: the order of ``selected``
        in_order = labels.transpose(0, 1).reshape(1, -1)
        loss, metrics = token_prediction_loss(model, selected, in_order, selected=True)
        metrics["truncated"] = batch["truncated"]
        return Loss(loss, metrics, batch["attention_mask"].sum())
