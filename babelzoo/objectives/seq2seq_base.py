"""What the sequence-to-sequence objectives share: the model they need, their batch, language
tags and the loss.

An encoder–decoder model is called as ``model(input_ids=..., attention_mask=...,
decoder_input_ids=..., decoder_attention_mask=...)`` and returns ``.logits`` [B, T, V] over the
decoder positions. The objective builds every input itself; a batch holds

============================  =================================================================
``input_ids``                 the encoder's tokens (noised text, a source sentence), right-padded
``attention_mask``            1 on the encoder's real tokens
``decoder_input_ids``         teacher forcing: ``labels`` shifted right behind a start token
``decoder_attention_mask``    1 on the decoder's real tokens
``labels``                    the tokens to predict, −100 at padding
============================  =================================================================

and the loss is the decoder's token cross-entropy,
L = −(1/|T|) Σ_t log p(y_t | y_<t, x) over the labelled positions T.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds, language_tag
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, Objective
from .batching import IGNORE, check_vocab, pad, truncate, unwrap
from .examples import ExampleError, as_sentence, require_nonempty
from .unilm import resolve_max_length


def _core(model: nn.Module) -> nn.Module:
    """The model inside DDP and ``torch.compile`` wrappers (whose forward takes ``*args, **kwargs``)."""
    core = unwrap(model)
    return getattr(core, "_orig_mod", core)  # torch.compile's OptimizedModule


def is_seq2seq(model: nn.Module) -> bool:
    """True for an encoder–decoder (its config says so: ``config.text.is_encoder_decoder``)."""
    config = getattr(_core(model), "config", None)
    return isinstance(config, ModelConfig) and config.text.is_encoder_decoder


def require_seq2seq(model: nn.Module, objective: str) -> None:
    """Refuse an encoder-only model with a message naming it and what would fit."""
    if not is_seq2seq(model):
        core = _core(model)
        config = getattr(core, "config", None)
        name = config.architecture if isinstance(config, ModelConfig) else type(core).__name__
        raise ConfigError(f"objective {objective!r} trains an encoder–decoder, but model {name!r} takes no "
                          "decoder_input_ids; use an encoder–decoder model (bart_tiny, mbart_tiny, t5_tiny)")


def tag_id(specials: SpecialIds, lang: Optional[str], where: str) -> int:
    """The token id of ``lang``'s tag ``[lang]``; a missing language or tag is an error naming it."""
    if lang is None:
        raise ExampleError(f"{where}: no language code; this objective writes the language's tag into the sequence")
    try:
        return specials.language_tags[lang]
    except KeyError:
        known = ", ".join(language_tag(x) for x in sorted(specials.language_tags)) or "none"
        raise ExampleError(f"{where}: the vocabulary has no tag {language_tag(lang)} for language {lang!r} "
                           f"(its tags: {known}); train the tokenizer with that language") from None


def cut_sentences(examples: Sequence[Any], budget: int, objective: str) -> tuple[list[list[int]], int]:
    """Each example's token ids (a sentence: ids or ``(ids, lang)``) cut to ``budget``, and how
    many tokens were cut in all."""
    require_nonempty(examples, objective)
    rows, truncated = [], 0
    for i, example in enumerate(examples):
        ids, cut = truncate(as_sentence(example, i).ids, budget)
        rows.append(ids)
        truncated += cut
    return rows, truncated


def seq2seq_batch(sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], starts: Sequence[int],
                  specials: SpecialIds, what: str, truncated: int = 0) -> dict[str, torch.Tensor]:
    """A padded batch from each example's encoder tokens, target tokens and decoder start token:
    ``decoder_input_ids`` = [start, y_1 .. y_{n−1}], ``labels`` = [y_1 .. y_n]; ``truncated``
    counts the tokens the objective cut."""
    decoder = [[start, *target[:-1]] for start, target in zip(starts, targets)]
    input_ids, decoder_input_ids = pad(sources, specials.pad), pad(decoder, specials.pad)
    check_vocab(input_ids, specials, what)
    check_vocab(pad(targets, specials.pad), specials, f"{what} target")

    def real(rows, width):
        return (torch.arange(width)[None] < torch.tensor([len(r) for r in rows])[:, None]).long()

    return {"input_ids": input_ids, "attention_mask": real(sources, input_ids.shape[1]),
            "decoder_input_ids": decoder_input_ids,
            "decoder_attention_mask": real(decoder, decoder_input_ids.shape[1]),
            "labels": pad(targets, IGNORE, decoder_input_ids.shape[1]), "truncated": torch.tensor(truncated)}


def seq2seq_loss(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> Loss:
    """Token cross-entropy of the decoder at the labelled positions, with its accuracy."""
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                decoder_input_ids=batch["decoder_input_ids"], decoder_attention_mask=batch["decoder_attention_mask"])
    labels = batch["labels"]
    positions = labels.ne(IGNORE)
    logits, targets = out.logits[positions], labels[positions]
    loss = F.cross_entropy(logits.float(), targets)  # −(1/|T|) Σ_t log p(y_t | y_<t, x)
    with torch.no_grad():
        accuracy = (logits.argmax(-1) == targets).float().mean()
    metrics = {"loss": loss.detach(), "accuracy": accuracy, "predicted": positions.sum(),
               "truncated": batch["truncated"]}
    return Loss(loss, metrics, batch["attention_mask"].sum() + batch["decoder_attention_mask"].sum())


class Seq2SeqObjective(Objective):
    """Common ground of the encoder–decoder objectives: the specials, ``max_length`` (the
    longest encoder or decoder sequence, framing included; default 128 capped at the model's
    ``max_positions``) and the loss of :func:`seq2seq_loss` on an encoder–decoder model."""

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, max_length: Optional[int] = None):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        self.specials = specials
        self.max_length = resolve_max_length(max_length, text, self.name)
        if self.max_length < 4:
            raise ConfigError(f"{self.name}: max_length={self.max_length} leaves no room for tokens")

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        require_seq2seq(model, self.name)
        return seq2seq_loss(model, batch)
