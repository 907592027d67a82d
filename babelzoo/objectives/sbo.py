"""SpanBERT: span masking with the span-boundary objective (SBO).

Joshi et al. 2020, "SpanBERT: Improving Pre-training by Representing and Predicting Spans",
§3.2. Contiguous spans of whole words are masked (:class:`~babelzoo.objectives.masking.Masker`
with ``unit="span"``: lengths ℓ ~ Geo(0.2) clipped to 10, 15% of the tokens), and each token
x_i of a masked span (x_s, ..., x_e) is predicted twice: by masked LM from its own output, and
by SBO from the outputs of the span's boundary tokens and the target's position in the span::

    h0 = [x_{s−1}; x_{e+1}; p_{i−s+1}]
    h1 = LayerNorm(GeLU(W1 h0))
    y_i = LayerNorm(GeLU(W2 h1))
    L = L_MLM(x_i) + L_SBO(x_i),   L_SBO = −log P(x_i | y_i)

where p is a learned relative-position embedding (1 for the span's first token) and y_i is
scored against the tied output word embeddings, as the MLM head scores its states. A span here
is a maximal run of consecutive masked tokens: two drawn spans that touch are one span for SBO
(their inner boundaries are masked tokens, which carry no information about the span). Offsets
past ``max_span_positions − 1`` share the last position embedding.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, register_objective
from .batching import IGNORE, encoder_inputs, unwrap
from .masking import MaskingConfig
from .mlm import MLM, token_prediction_loss


def span_boundaries(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every labelled position, in row-major order (the order of ``labels[labels != -100]``):
    the index of the unlabelled token just before its run of labelled tokens (x_{s−1}), the one
    just after it (x_{e+1}), and its 1-based offset in the run (i − s + 1). Labelled positions
    never touch the ends of a row: [CLS] and [SEP] are never masked."""
    masked = labels.ne(IGNORE)
    rows, cols = masked.nonzero(as_tuple=True)
    length = labels.shape[1]
    index = torch.arange(length).expand_as(labels)
    # the nearest unmasked position at or before / at or after each position
    before = torch.where(masked, torch.full_like(index, -1), index).cummax(dim=1).values
    after = torch.where(masked, torch.full_like(index, length), index).flip(1).cummin(dim=1).values.flip(1)
    left, right = before[rows, cols], after[rows, cols]
    return left, right, cols - left


@register_objective
class SpanBoundary(MLM):
    """SpanBERT's span masking with MLM + SBO over single sentences ``[CLS] X [SEP]``.

    Owns ``position`` (the span-offset embedding) and ``head`` (the 2-layer GeLU + LayerNorm
    network f). ``masking`` defaults to SpanBERT's span masking; ``sbo_weight`` scales L_SBO."""

    name = "sbo"
    consumes = "sentence"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *,
                 masking: MaskingConfig | Mapping | None = None, word_starts: Optional[torch.Tensor] = None,
                 max_length: int = 128, use_language_ids: bool = True, max_span_positions: int = 32,
                 sbo_weight: float = 1.0):
        super().__init__(specials, masking=masking if masking is not None else {"unit": "span"},
                         word_starts=word_starts, max_length=max_length, use_language_ids=use_language_ids)
        text = config.text if isinstance(config, ModelConfig) else config
        hidden, width = text.hidden_size, text.embedding_dim
        self.sbo_weight = sbo_weight
        self.position = nn.Embedding(max_span_positions, hidden)
        self.head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.GELU(), nn.LayerNorm(hidden, eps=text.layer_norm_eps),
                                  nn.Linear(hidden, width), nn.GELU(), nn.LayerNorm(width, eps=text.layer_norm_eps))

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        batch = super().prepare(examples)
        batch["sbo_left"], batch["sbo_right"], batch["sbo_offset"] = span_boundaries(batch["labels"])
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        out = model(**encoder_inputs(model, batch, self.use_language_ids))
        hidden, labels = out.last_hidden, batch["labels"]
        mlm, metrics = token_prediction_loss(model, hidden, labels)
        rows = labels.ne(IGNORE).nonzero(as_tuple=True)[0]
        offsets = batch["sbo_offset"].clamp(max=self.position.num_embeddings - 1)
        h0 = torch.cat([hidden[rows, batch["sbo_left"]], hidden[rows, batch["sbo_right"]], self.position(offsets)], -1)
        head = unwrap(model).lm_head
        logits = head.decoder(self.head(h0)) + head.bias
        targets = labels[labels.ne(IGNORE)]
        sbo = F.cross_entropy(logits.float(), targets)
        with torch.no_grad():
            metrics["sbo_loss"] = sbo.detach()
            metrics["sbo_accuracy"] = (logits.argmax(-1) == targets).float().mean()
        metrics["mlm_loss"] = metrics.pop("loss")
        total = mlm + self.sbo_weight * sbo
        metrics["loss"] = total.detach()
        if "truncated" in batch:
            metrics["truncated"] = batch["truncated"]
        return Loss(total, metrics, batch["attention_mask"].sum())
