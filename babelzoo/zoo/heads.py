"""Task heads: what a fine-tuned encoder predicts, saved and loaded with the model.

A head reads the encoder's output (:class:`~babelzoo.zoo.model.EncoderOutput`) and returns
logits over ``config.labels``. Heads are registered by name, like objectives::

    model = create_model("multilingual_e5_small", pretrained=True,
                         head={"kind": "sequence_classification", "labels": ["neg", "pos"], "pooling": "mean"})
    logits = model.head_logits(ids, attention_mask=mask)       # [B, 2]

A fresh head on a trained encoder: :func:`babelzoo.zoo.build.with_head`.

``sequence_classification``
    one label per text (or text pair): pool a layer (the pooler, the first token or the mean of
    the real tokens), optionally RoBERTa's dense + tanh, then a linear map. BERT's
    ``BertForSequenceClassification`` is ``pooling="pooler"``; XLM-R's is ``pooling="cls",
    hidden_layer=True``.
``token_classification``
    one label per token: a linear map on every position of a layer (``*ForTokenClassification``).
``probe``
    representation probing: a linear classifier on the pooled features of any layer of a frozen
    encoder (the encoder's weights never change and it runs without dropout).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ..errors import InputError
from ..registry import Registry
from .config import EncoderConfig
from .model_config import HeadConfig
from .layers import Dropout, pool

HEADS: Registry[type["TaskHead"]] = Registry("head")


def register_head(cls: type["TaskHead"]) -> type["TaskHead"]:
    """Class decorator: register a head under ``cls.name``."""
    HEADS.register(cls, name=cls.name)
    return cls


class TaskHead(nn.Module):
    """Base class: ``name`` (registry key), ``per_token`` (logits per position or per text) and
    ``freezes_encoder`` (the encoder is frozen whatever the config says)."""

    name: ClassVar[str] = ""
    per_token: ClassVar[bool] = False
    freezes_encoder: ClassVar[bool] = False

    def __init__(self, config: HeadConfig, text: EncoderConfig):
        super().__init__()
        self.config = config
        p = text.dropout if config.dropout is None else config.dropout
        self.dropout = Dropout(p)

    def features(self, out) -> torch.Tensor:
        """The hidden states of ``config.layer``."""
        if self.config.layer == -1:
            return out.last_hidden
        if out.hidden_states is None:
            raise InputError(f"head reads layer {self.config.layer}: run the encoder with output_hidden_states=True")
        return out.hidden_states[self.config.layer]

    @property
    def needs_hidden_states(self) -> bool:
        return self.config.layer != -1


@register_head
class SequenceClassificationHead(TaskHead):
    """logits = W · drop(h) + b, with h the pooled layer (or tanh(W₁ · drop(pooled) + b₁) when
    ``hidden_layer``, RoBERTa's classification head)."""

    name = "sequence_classification"

    def __init__(self, config: HeadConfig, text: EncoderConfig):
        super().__init__(config, text)
        hidden = text.hidden_size
        self.dense = nn.Linear(hidden, hidden) if config.hidden_layer else None
        self.out = nn.Linear(hidden, config.num_labels)
        self.directions = text.output_directions

    def pooled(self, out) -> torch.Tensor:
        if self.config.pooling == "pooler":
            if out.pooled is None:
                raise InputError("pooling='pooler' needs the model's pooler output")
            return out.pooled
        return pool(self.features(out), out.mask, self.config.pooling, self.directions)

    def forward(self, out) -> torch.Tensor:
        h = self.pooled(out)
        if self.dense is not None:
            h = torch.tanh(self.dense(self.dropout(h)))
        return self.out(self.dropout(h))


@register_head
class TokenClassificationHead(TaskHead):
    """logits_i = W · drop(h_i) + b at every position i of the layer."""

    name = "token_classification"
    per_token = True

    def __init__(self, config: HeadConfig, text: EncoderConfig):
        super().__init__(config, text)
        self.out = nn.Linear(text.hidden_size, config.num_labels)

    def forward(self, out) -> torch.Tensor:
        return self.logits(self.features(out))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of hidden states of any shape [..., H] (all positions, or selected ones)."""
        return self.out(self.dropout(hidden))


@register_head
class LinearProbe(SequenceClassificationHead):
    """A linear classifier on the pooled features of one layer of a frozen encoder."""

    name = "probe"
    freezes_encoder = True


def build_head(config: HeadConfig, text: EncoderConfig) -> TaskHead:
    """The registered head ``config.kind`` (an unknown name lists the known ones)."""
    return HEADS.get(config.kind)(config, text)
