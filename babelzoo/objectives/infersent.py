"""InferSent's pair classifier, on translation pairs.

Conneau et al. 2017, "Supervised Learning of Universal Sentence Representations from Natural
Language Inference Data", §3: a shared encoder turns premise and hypothesis into u and v, and
a classifier reads their combination

    features(u, v) = [u; v; |u − v|; u ∗ v]
    p(class | u, v) = softmax(W_2 · tanh(W_1 · features(u, v) + b_1) + b_2)

(an MLP with one hidden layer of 512 units, ``hidden_size``); the loss is the cross-entropy of
the true class. Here the pairs are the cross-lingual analogue of entailment: a sentence and its
translation (class 1, ``translation``) against the sentence and another pair's target drawn
from the batch (class 0, ``mismatched``; one per pair, so the classes are balanced). A drawn
target whose tokens equal the true one is labelled a translation.

u and v are the model's sentence vectors (:meth:`~babelzoo.zoo.model.BabelModel.sentence_embedding`):
InferSent's BiLSTM with max pooling over time (``infersent_tiny``/``infersent_base``) fixes
``max``; another model pools by ``pooling`` (None: ``cls``). Both sides are encoded separately
as ``[CLS] X [SEP]`` in one encoder call.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, register_objective
from .contrastive import DualEncoderObjective
from .examples import ExampleError, as_pair

CLASSES = ("mismatched", "translation")


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """InferSent's [u; v; |u − v|; u ∗ v], [B, 4H]."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


@register_objective
class InferSent(DualEncoderObjective):
    """InferSent's [u; v; |u−v|; u∗v] → MLP classifier over translation pairs and in-batch
    mismatched pairs. Owns ``classifier``."""

    name = "infersent"
    consumes = "pair"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, hidden_size: int = 512,
                 pooling: Optional[str] = None, max_length: int = 128, use_language_ids: bool = True):
        super().__init__(specials, pooling=pooling, max_length=max_length, use_language_ids=use_language_ids)
        text = config.text if isinstance(config, ModelConfig) else config
        self.classifier = nn.Sequential(nn.Linear(4 * text.hidden_size, hidden_size), nn.Tanh(),
                                        nn.Linear(hidden_size, len(CLASSES)))
        for layer in (self.classifier[0], self.classifier[2]):
            nn.init.normal_(layer.weight, std=text.init_std)
            nn.init.zeros_(layer.bias)

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        batch = super().prepare(examples)
        size = len(examples)
        if size < 2:
            raise ExampleError(f"{self.name}: a mismatched pair takes its target from another pair of the batch, "
                               "and this batch has one pair")
        # Each pair's mismatched target: any other pair's, uniformly (an offset of 1 … B−1).
        mismatch = (torch.arange(size) + torch.randint(1, size, (size,))) % size
        targets = [as_pair(x, i).tgt for i, x in enumerate(examples)]
        same = torch.tensor([targets[i] == targets[int(j)] for i, j in enumerate(mismatch)])
        batch["mismatch"] = mismatch
        batch["labels"] = torch.cat([torch.ones(size, dtype=torch.long), same.long()])
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        u, v = self.embed(model, batch)
        mismatch = batch["mismatch"]
        features = torch.cat([pair_features(u, v), pair_features(u, v[mismatch])])
        logits = self.classifier(features)
        labels = batch["labels"]
        loss = F.cross_entropy(logits.float(), labels)
        accuracy = (logits.detach().argmax(-1) == labels).float().mean()
        metrics = {"loss": loss.detach(), "accuracy": accuracy, "truncated": batch["truncated"]}
        return Loss(loss, metrics, batch["attention_mask"].sum())
