"""ERNIE's denoising entity auto-encoder (dEA; Zhang et al., ACL 2019, section 3.4).

Token–entity alignments are corrupted — 5% of aligned entities are replaced by a random entity,
15% are dropped (the token loses its entity), 80% are kept — and the model must predict, from
each aligned token's output w_i, the original entity among the entities of the batch:

    p(e_j | w_i) = exp(linear(w_i) · e_j) / Σ_k exp(linear(w_i) · e_k)

Use it on a model with knowledge attached (:func:`babelzoo.knowledge.attach.attach_knowledge`),
usually mixed with masked language modelling as in ERNIE.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..objectives.base import Loss, Objective, register_objective
from .base import KBError


def corrupt_entities(entities: torch.Tensor, vocab_size: int, replace: float = 0.05, drop: float = 0.15,
                     generator: Optional[torch.Generator] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(corrupted input entities, targets): targets are the original entity indices where one is
    aligned and 0 elsewhere; inputs have ``replace`` of them swapped for a random entity
    (1..vocab_size-1) and ``drop`` of them set to 0."""
    aligned = entities > 0
    draw = torch.rand(entities.shape, generator=generator)
    random_entities = torch.randint(1, vocab_size, entities.shape, generator=generator)
    inputs = torch.where(aligned & (draw < replace), random_entities, entities)
    inputs = torch.where(aligned & (draw >= replace) & (draw < replace + drop), torch.zeros_like(entities), inputs)
    return inputs, entities.clone()


class DEAHead(nn.Module):
    """linear(w) = LN(gelu(W w + b)) into the entity space, scored against candidate entities."""

    def __init__(self, hidden_size: int, entity_dim: int, eps: float = 1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden_size, entity_dim)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(entity_dim, eps=eps)

    def forward(self, hidden: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``hidden`` [N, H], ``candidates`` [C, E] → logits [N, C]."""
        return self.norm(self.act(self.dense(hidden))) @ candidates.T


def dea_loss(head: DEAHead, hidden: torch.Tensor, targets: torch.Tensor,
             entity_table: nn.Embedding) -> tuple[torch.Tensor, float, int]:
    """Cross-entropy of the aligned entity among the batch's distinct entities. ``hidden`` [B, L, H],
    ``targets`` [B, L] (0 = no entity). Returns (loss, accuracy, number of predictions)."""
    positions = targets > 0
    if not bool(positions.any()):
        return hidden.sum() * 0.0, 0.0, 0
    gold = targets[positions]
    candidates = torch.unique(gold)  # sorted
    logits = head(hidden[positions], entity_table(candidates))
    labels = torch.searchsorted(candidates, gold)
    loss = F.cross_entropy(logits, labels)
    accuracy = (logits.argmax(-1) == labels).float().mean()
    return loss, accuracy, int(gold.numel())


@register_objective
class DEAObjective(Objective):
    """dEA as a pre-training objective. Examples are dicts with ``input_ids`` and ``entities``
    (token-aligned entity indices, 0 = none; see ``KnowledgeFusion.entity_ids``). ``config`` is
    the model's config, with its knowledge part (entity table size and width)."""

    name = "dea"
    consumes = "entity_alignment"

    def __init__(self, specials: SpecialIds, config, *, replace: float = 0.05, drop: float = 0.15):
        super().__init__()
        knowledge = getattr(config, "knowledge", None)
        if knowledge is None:
            raise KBError("the dEA objective needs a model config with a knowledge part; attach knowledge first")
        self.head = DEAHead(config.text.hidden_size, knowledge.entity_dim, config.text.layer_norm_eps)
        self.entity_vocab_size, self.pad_id = knowledge.entity_vocab_size, specials.pad
        self.replace, self.drop = replace, drop

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        length = max(len(e["input_ids"]) for e in examples)
        ids = torch.full((len(examples), length), self.pad_id, dtype=torch.long)
        entities = torch.zeros((len(examples), length), dtype=torch.long)
        for i, example in enumerate(examples):
            if len(example["entities"]) != len(example["input_ids"]):
                raise KBError(f"example {i}: {len(example['entities'])} entity slots for "
                              f"{len(example['input_ids'])} tokens")
            ids[i, :len(example["input_ids"])] = torch.as_tensor(example["input_ids"])
            entities[i, :len(example["entities"])] = torch.as_tensor(example["entities"])
        inputs, targets = corrupt_entities(entities, self.entity_vocab_size, self.replace, self.drop)
        return {"input_ids": ids, "attention_mask": ids.ne(self.pad_id).long(), "entities": inputs,
                "entity_targets": targets}

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        inner = getattr(model, "module", model)  # inside DistributedDataParallel
        fusion = getattr(inner, "knowledge", None)
        if fusion is None:
            raise KBError("the dEA objective needs a model with knowledge attached (attach_knowledge)")
        with fusion.bind(batch["entities"]):
            out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
        loss, accuracy, count = dea_loss(self.head, out.last_hidden, batch["entity_targets"],
                                         fusion.entity_embeddings)
        return Loss(loss, {"loss": loss.detach(), "dea_accuracy": accuracy, "dea_predictions": float(count)},
                    tokens=batch["attention_mask"].sum())
