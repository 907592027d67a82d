"""Masked language modelling (MLM) and its multilingual form (MMLM).

MLM — Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding": predict the tokens chosen by :class:`~babelzoo.objectives.masking.Masker` (15%,
80/10/10, re-masked every time) from the corrupted sequence ``[CLS] X [SEP]``.

MMLM — the same objective over sentences of many languages in one batch (multilingual BERT;
XLM's MLM, Lample & Conneau 2019, "Cross-lingual Language Model Pretraining", §3.3), with
XLM's language embeddings added when the model has them.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError
from ..zoo.model import BabelModel
from .base import Loss, Objective, register_objective
from .batching import (
    IGNORE,
    encoder_inputs,
    frame_sentences,
    language_index,
    languages_known,
    unwrap,
)
from .examples import ExampleError, as_sentence, require_nonempty
from .masking import Masker, MaskingConfig


def token_prediction_loss(model: nn.Module, hidden: torch.Tensor, labels: torch.Tensor,
                          selected: bool = False) -> tuple[torch.Tensor, dict]:
    """Cross-entropy of the model's tied LM head at the labelled positions only.

    L = −(1/|M|) Σ_{i∈M} log p(x_i | x̂)  over the set M of labelled positions.

    ``hidden`` is [B, L, H], or with ``selected`` the [N, H] states of the labelled positions
    already (a model called with ``output_positions``).
    """
    positions = labels.ne(IGNORE)
    logits = unwrap(model).mlm_logits(hidden, None if selected else positions)
    targets = labels[positions]
    loss = F.cross_entropy(logits.float(), targets)
    with torch.no_grad():
        accuracy = (logits.argmax(-1) == targets).float().mean() if len(targets) else torch.zeros(())
    return loss, {"loss": loss.detach(), "accuracy": accuracy, "predicted": float(len(targets))}


class MaskingObjective(Objective):
    """Common ground of the masked-LM family (MLM, MMLM, TLM, CLMLM, RTD).

    ``masking``: a :class:`MaskingConfig` or a dict of its fields (rate, 80/10/10 shares, unit
    ``token``/``word``/``span``); ``word_starts``: the [vocab] bool table whole-word and span
    masking use; ``max_length``: longer inputs are cut and the cut tokens counted as the
    ``truncated`` metric; ``use_language_ids``: pass XLM language ids to models that have
    language embeddings.
    """

    from_run = ("word_starts",)

    def __init__(self, specials: SpecialIds, *, masking: MaskingConfig | Mapping | None = None,
                 word_starts: Optional[torch.Tensor] = None, max_length: int = 128, use_language_ids: bool = True):
        super().__init__()
        if max_length < 3:
            raise ConfigError(f"{type(self).__name__}: max_length={max_length} leaves no room for tokens")
        self.specials = specials
        self.masker = Masker(specials, masking, word_starts)
        self.max_length = max_length
        self.use_language_ids = use_language_ids

    def masked_lm(self, model: nn.Module, batch: dict[str, torch.Tensor], **forward_kwargs: Any) -> Loss:
        inputs = encoder_inputs(model, batch, self.use_language_ids)
        if not forward_kwargs and isinstance(unwrap(model), BabelModel):
            # The last layer runs at the masked positions only: its projections and feed-forward
            # skip the ~85 % of tokens no loss reads (the same loss, less work).
            out = model(**inputs, output_positions=batch["labels"].ne(IGNORE))
            loss, metrics = token_prediction_loss(model, out.last_hidden, batch["labels"], selected=True)
        else:  # models with other inputs (fusion encoders) return every position
            out = model(**inputs, **forward_kwargs)
            loss, metrics = token_prediction_loss(model, out.last_hidden, batch["labels"])
        if "truncated" in batch:
            metrics["truncated"] = batch["truncated"]
        return Loss(loss, metrics, batch["attention_mask"].sum())


@register_objective
class MLM(MaskingObjective):
    """BERT's masked LM over single sentences ``[CLS] X [SEP]``.

    Examples: token-id lists or ``(ids, lang)`` tuples (no special tokens). Language ids are
    added when every example names its language, ``use_language_ids`` is on and the model has
    language embeddings.

    >>> mlm = MLM(specials)                               # doctest: +SKIP
    >>> loss = mlm(model, mlm.prepare([[17, 52, 9], [40, 41]]))
    """

    name = "mlm"
    consumes = "sentence"

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        sentences = [as_sentence(x, i) for i, x in enumerate(examples)]
        return self.prepare_sentences(sentences)

    def prepare_sentences(self, sentences) -> dict[str, torch.Tensor]:
        s = self.specials
        input_ids, attention_mask, truncated = frame_sentences(sentences, s, self.max_length)
        masked = self.masker(input_ids)
        batch = {"input_ids": masked.input_ids, "attention_mask": attention_mask.long(), "labels": masked.labels,
                 "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known([x.lang for x in sentences], self.name):
            lang = torch.tensor([language_index(s, x.lang, f"example {i}") for i, x in enumerate(sentences)])
            batch["language_ids"] = lang[:, None].expand_as(input_ids) * attention_mask
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        return self.masked_lm(model, batch)


@register_objective
class MMLM(MLM):
    """Multilingual masked LM: MLM over batches that mix languages (mBERT, XLM's MLM). Every
    example must carry its language code; language ids reach the model when it has language
    embeddings and ``use_language_ids`` is on (XLM), and are left out otherwise (mBERT, XLM-R)."""

    name = "mmlm"
    consumes = "sentence"

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        sentences = [as_sentence(x, i) for i, x in enumerate(examples)]
        for i, sentence in enumerate(sentences):
            if sentence.lang is None:
                raise ExampleError(f"{self.name}: example {i} has no language code; MMLM examples are "
                                   "(ids, lang) pairs")
        return self.prepare_sentences(sentences)
