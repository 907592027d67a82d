"""Predictions and accuracy of a model's task head, and the evaluator the trainer selects with.

Examples are sorted by length and batched, so that batches carry little padding; predictions
come back in input order. A word that does not fit the evaluation length counts as wrong and is
reported (``truncated``), never silently left out of the denominator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..objectives.batching import IGNORE
from ..objectives.classification import Tagged


@torch.no_grad()
def predict(model, objective, examples: Sequence[Any], batch_size: int = 64) -> list:
    """The argmax label of every example (classification), or of every word (tagging: one list
    per sentence; ``-1`` for a word cut by the objective's ``max_length``)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    tagging = bool(examples) and isinstance(examples[0], Tagged)
    size = (lambda e: sum(len(p) or 1 for p in e.pieces)) if tagging else (lambda e: len(e.ids))
    order = sorted(range(len(examples)), key=lambda i: size(examples[i]))
    out: list = [None] * len(examples)
    try:
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            batch = objective.prepare([examples[i] for i in index])
            batch = {k: v.to(device) for k, v in batch.items()}
            best = objective.logits(model, batch).argmax(-1).cpu()
            if not tagging:
                for r, i in enumerate(index):
                    out[i] = int(best[r])
                continue
            labelled = batch["labels"].ne(IGNORE).cpu()
            per_row = labelled.sum(1).tolist()
            chunks = best.split(per_row)
            for r, i in enumerate(index):
                words = len(examples[i].labels)
                got = chunks[r].tolist()
                out[i] = got + [-1] * (words - len(got))
    finally:
        model.train(was_training)
    return out


def accuracy(predictions: Sequence[Any], examples: Sequence[Any]) -> dict[str, float]:
    """``accuracy`` over texts or words, ``n`` (texts or words) and ``truncated`` (words not
    predicted, counted wrong)."""
    if examples and isinstance(examples[0], Tagged):
        gold = [label for e in examples for label in e.labels]
        guess = [p for row in predictions for p in row]
        truncated = sum(1 for p in guess if p == -1)
    else:
        gold = [e.label for e in examples]
        guess, truncated = list(predictions), 0
    correct = sum(int(g == p) for g, p in zip(gold, guess))
    return {"accuracy": correct / max(len(gold), 1), "n": len(gold), "truncated": truncated}


@dataclass
class HeadEvaluator:
    """The trainer's evaluator: accuracy of the head on one labelled split (``name/accuracy``).
    Built from the source language's dev examples only."""

    objective: Any
    examples: Sequence[Any]
    name: str = "dev"
    batch_size: int = 64

    @property
    def metric(self) -> str:
        return f"{self.name}/accuracy"

    def __call__(self, model) -> dict[str, float]:
        result = accuracy(predict(model, self.objective, self.examples, self.batch_size), self.examples)
        return {self.metric: result["accuracy"]}
