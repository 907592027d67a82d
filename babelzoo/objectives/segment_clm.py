"""Causal LM over the consecutive segments of long documents, with Transformer-XL's memory.

The language model of Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a
Fixed-Length Context" (§3.2): a document's stream x_1 … x_T is cut into segments; each token
predicts the next one, attending causally within its segment and to the stop-gradient memory
of the segments before it (:mod:`babelzoo.objectives.segments`); the last token of a segment
predicts the first of the next::

    L = −(1/(T − 1)) Σ_{t=1}^{T−1} log p(x_{t+1} | x_{τ(t),≤t}, SG(m_{τ(t)}))

with τ(t) the segment of position t. ``mem_len=0`` is the same model without memory: each
segment's first tokens are predicted from that segment alone (the paper's vanilla baseline).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from .base import Loss, register_objective
from .batching import IGNORE
from .mlm import token_prediction_loss
from .segments import SegmentObjective


@register_objective
class SegmentCLM(SegmentObjective):
    """Next-token prediction over document segments with memory. Examples: documents
    (sequences of sentences, token-id lists or ``(ids, lang)``); options as for
    :class:`~babelzoo.objectives.segments.SegmentObjective`."""

    name = "segment_clm"
    consumes = "document"

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        # a window of S·L inputs needs S·L + 1 stream tokens (the last input's target)
        streams, langs, truncated = self.read(examples, self.max_segments * self.segment_length + 1)
        ids, mask = self.cut([s[:-1] for s in streams])
        targets, _ = self.cut([s[1:] for s in streams])
        labels = torch.where(mask.bool(), targets, torch.full_like(targets, IGNORE))
        return self.finish({"input_ids": ids, "attention_mask": mask, "labels": labels}, langs, truncated)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        hidden = torch.stack(self.encode(model, batch, causal=True), dim=1)  # [B, S, L, H]
        loss, metrics = token_prediction_loss(model, hidden.flatten(1, 2), batch["labels"].flatten(1))
        metrics["truncated"] = batch["truncated"]
        return Loss(loss, metrics, batch["attention_mask"].sum())
