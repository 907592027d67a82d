"""Causal language modelling (CLM).

Radford et al. 2018 (GPT) and XLM's CLM (Lample & Conneau 2019, "Cross-lingual Language Model
Pretraining", §3.2): each token predicts the next one, attending only to the tokens before it.

    L = −(1/T) Σ_t log p(x_{t+1} | x_1..x_t)

The encoder runs with ``causal=True`` (a lower-triangular mask on the same attention path) and
the tied LM head scores the next token; the input is ``[CLS] X [SEP]``, so the model also
learns to predict the first word from the start token and the end of the sentence.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from .base import Loss, Objective, register_objective
from .batching import IGNORE, encoder_inputs, frame_sentences, language_index, languages_known
from .examples import as_sentence, require_nonempty
from .mlm import token_prediction_loss


@register_objective
class CLM(Objective):
    """Next-token prediction over sentences (token-id lists or ``(ids, lang)`` tuples)."""

    name = "clm"
    consumes = "sentence"

    def __init__(self, specials: SpecialIds, *, max_length: int = 128, use_language_ids: bool = True):
        super().__init__()
        self.specials = specials
        self.max_length = max_length
        self.use_language_ids = use_language_ids

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        sentences = [as_sentence(x, i) for i, x in enumerate(examples)]
        s = self.specials
        input_ids, real, truncated = frame_sentences(sentences, s, self.max_length)
        lengths = real.sum(dim=1, keepdim=True)
        p = torch.arange(input_ids.shape[1])[None]
        attention_mask = real.long()
        # labels[t] = x[t+1] while t+1 is a real token.
        shifted = torch.cat([input_ids[:, 1:], torch.full_like(input_ids[:, :1], s.pad)], dim=1)
        labels = torch.where(p + 1 < lengths, shifted, torch.full_like(input_ids, IGNORE))
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels,
                 "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known([x.lang for x in sentences], self.name):
            lang = torch.tensor([language_index(s, x.lang, f"example {i}") for i, x in enumerate(sentences)])
            batch["language_ids"] = lang[:, None] * attention_mask
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        out = model(**encoder_inputs(model, batch, self.use_language_ids), causal=True)
        loss, metrics = token_prediction_loss(model, out.last_hidden, batch["labels"])
        metrics["truncated"] = batch["truncated"]
        return Loss(loss, metrics, batch["attention_mask"].sum())
