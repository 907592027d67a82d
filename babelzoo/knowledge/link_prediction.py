"""Training KG embedding models and filtered link-prediction evaluation.

Losses (``KGETrainConfig.loss``), with f the model's plausibility score:

- ``self_adversarial`` (Sun et al., 2019, eq. 5): L = −log σ(f(h,r,t)) − Σ_i p_i log σ(−f(h'_i,r,t'_i)),
  p = softmax(α f(negatives)) treated as a constant; ``uniform``: the same with p_i = 1/k.
- ``softmax``: cross-entropy of the positive against its k negatives.
- ``1vsall``: cross-entropy of the true entity against all entities (Lacroix et al., 2018;
  Ruffinelli et al., 2020), for tail and head queries.

Negatives replace the tail (and, without reciprocal relations, the head) with entities drawn
uniformly. Evaluation follows Bordes et al. (2013), filtered setting: the true entity is ranked
against all entities after removing every other entity that makes a known triple (train, valid or
test); ties count half (the mean of the optimistic and pessimistic ranks). MRR and Hits@1/3/10 are
reported for head and tail prediction and their mean.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from .base import KBError
from .kge import KGEModel, LinkPredictionData

LOSSES = ("self_adversarial", "uniform", "softmax", "1vsall")


@dataclass
class KGETrainConfig:
    epochs: int = 100
    batch_size: int = 512
    lr: float = 1e-3
    optimizer: str = "adam"
    loss: str = "self_adversarial"
    negatives: int = 128
    adversarial_temperature: float = 1.0
    label_smoothing: float = 0.0
    regularizer: Optional[str] = None
    regularization_weight: float = 0.0
    eval_every: int = 5
    patience: int = 4  # evaluations without improvement of validation MRR before stopping
    max_seconds: Optional[float] = None  # training budget, on ``clock``
    clock: str = "wall"  # "wall", or "cpu": process CPU time summed over threads
    seed: int = 0

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise KBError(f"KGETrainConfig.loss={self.loss!r} must be one of {', '.join(LOSSES)}")
        if self.clock not in ("wall", "cpu"):
            raise KBError(f"KGETrainConfig.clock={self.clock!r} must be 'wall' or 'cpu'")
        if self.optimizer not in ("adam", "adagrad"):
            raise KBError(f"KGETrainConfig.optimizer={self.optimizer!r} must be 'adam' or 'adagrad'")
        for name in ("epochs", "batch_size", "negatives", "eval_every"):
            if getattr(self, name) <= 0:
                raise KBError(f"KGETrainConfig.{name}={getattr(self, name)} must be positive")


def negative_sampling_loss(positive: torch.Tensor, negative: torch.Tensor, loss: str,
                           temperature: float = 1.0) -> torch.Tensor:
    """``positive`` [B], ``negative`` [B, K] scores → the mean loss (formulas in the module doc)."""
    if loss == "softmax":
        logits = torch.cat([positive[:, None], negative], 1)
        return F.cross_entropy(logits, torch.zeros(len(positive), dtype=torch.long, device=positive.device))
    if loss == "self_adversarial":
        weights = torch.softmax(temperature * negative.detach(), dim=1)
    else:
        weights = torch.full_like(negative, 1.0 / negative.shape[1])
    return (-F.logsigmoid(positive) - (weights * F.logsigmoid(-negative)).sum(1)).mean()


def _batch_loss(model: KGEModel, batch: torch.Tensor, config: KGETrainConfig, generator: torch.Generator) -> torch.Tensor:
    h, r, t = batch.unbind(1)
    directions = [("tail", h, r, t)]
    if model.reciprocal:
        directions.append(("tail", t, model.inverse(r), h))
    else:
        directions.append(("head", h, r, t))
    total = 0.0
    for side, hh, rr, tt in directions:
        target = tt if side == "tail" else hh
        if config.loss == "1vsall":
            scores = model.score_tails(hh, rr) if side == "tail" else model.score_heads(rr, tt)
            total = total + F.cross_entropy(scores, target, label_smoothing=config.label_smoothing)
            continue
        negatives = torch.randint(model.num_entities, (len(batch), config.negatives), generator=generator)
        positive = model._score(model.entity(hh), model.relation(rr), model.entity(tt))
        negative = (model.score_tails(hh, rr, negatives) if side == "tail" else
                    model._score(model.entity(negatives), model.relation(rr)[:, None], model.entity(tt)[:, None]))
        total = total + negative_sampling_loss(positive, negative, config.loss, config.adversarial_temperature)
    loss = total / len(directions)
    if config.regularizer and config.regularization_weight:
        loss = loss + config.regularization_weight * model.regularizer(batch, config.regularizer)
    return loss


def train_kge(model: KGEModel, data: LinkPredictionData, config: KGETrainConfig = KGETrainConfig(),
              log: Optional[Callable[[dict], None]] = None) -> dict:
    """Train on ``data.train``, validating filtered MRR every ``eval_every`` epochs; keeps the best
    validation state (early stopping after ``patience`` evaluations without improvement).
    Returns a summary: best epoch, best validation metrics, epochs run, seconds."""
    generator = torch.Generator().manual_seed(config.seed)
    opt_cls = torch.optim.Adam if config.optimizer == "adam" else torch.optim.Adagrad
    optimizer = opt_cls(model.parameters(), lr=config.lr)
    filters = KnownTriples(data)
    best = {"mrr": -1.0}
    clock = time.process_time if config.clock == "cpu" else time.perf_counter
    best_state, best_epoch, stale, start, epoch = None, 0, 0, clock(), 0
    for epoch in range(1, config.epochs + 1):
        model.train()
        order = torch.randperm(len(data.train), generator=generator)
        total, steps = 0.0, 0
        for i in range(0, len(order), config.batch_size):
            loss = _batch_loss(model, data.train[order[i:i + config.batch_size]], config, generator)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, steps = total + float(loss.detach()), steps + 1
        elapsed = clock() - start
        out_of_time = config.max_seconds is not None and elapsed > config.max_seconds
        if epoch % config.eval_every == 0 or epoch == config.epochs or out_of_time:
            metrics = evaluate(model, data, "valid", filters=filters)
            if log is not None:
                log({"epoch": epoch, "loss": total / max(steps, 1), "seconds": elapsed, **metrics})
            if metrics["mrr"] > best["mrr"]:
                best, best_epoch, stale = metrics, epoch, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                stale += 1
                if stale >= config.patience:
                    break
        if out_of_time:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    return {"best_epoch": best_epoch, "epochs": epoch, "seconds": clock() - start,
            "valid": best}


class KnownTriples:
    """Every known (h, r, t) of the data, for filtering: tails of (h, r) and heads of (r, t)."""

    def __init__(self, data: LinkPredictionData):
        self.tails: dict[tuple[int, int], list[int]] = {}
        self.heads: dict[tuple[int, int], list[int]] = {}
        for split in (data.train, data.valid, data.test):
            for h, r, t in split.tolist():
                self.tails.setdefault((h, r), []).append(t)
                self.heads.setdefault((r, t), []).append(h)

    def mask(self, keys: list[tuple[int, int]], side: str, num_entities: int) -> torch.Tensor:
        table = self.tails if side == "tail" else self.heads
        rows, cols = [], []
        for i, key in enumerate(keys):
            known = table.get(key, ())
            rows.extend([i] * len(known))
            cols.extend(known)
        mask = torch.zeros(len(keys), num_entities, dtype=torch.bool)
        mask[rows, cols] = True
        return mask


def filtered_ranks(scores: torch.Tensor, targets: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """Rank of each target among all entities, ignoring the other known answers ``known`` [B, N];
    ties count half. ``scores`` [B, N] (higher = better) → float ranks [B]."""
    target_scores = scores.gather(1, targets[:, None])
    others = known.clone()
    others[torch.arange(len(targets)), targets] = False
    keep = ~others
    higher = ((scores > target_scores) & keep).sum(1)
    ties = ((scores == target_scores) & keep).sum(1) - 1  # minus the target itself
    return 1.0 + higher.float() + ties.float() / 2


def rank_metrics(ranks: torch.Tensor, prefix: str = "") -> dict[str, float]:
    out = {f"{prefix}mrr": float((1.0 / ranks).mean())}
    for k in (1, 3, 10):
        out[f"{prefix}hits@{k}"] = float((ranks <= k).float().mean())
    return out


@torch.no_grad()
def evaluate(model, data: LinkPredictionData, split: str = "test", batch_size: int = 256,
             filters: Optional[KnownTriples] = None) -> dict[str, float]:
    """Filtered MRR and Hits@1/3/10 on ``split`` for tail and head prediction (keys
    ``tail_mrr``, ``head_hits@10``...) and their mean (``mrr``, ``hits@10``...). ``model`` needs
    ``score_tails(h, r)`` and ``score_heads(r, t)`` returning [B, N]."""
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    filters = filters or KnownTriples(data)
    triples = data.split(split)
    if len(triples) == 0:
        raise KBError(f"the {split!r} split is empty: nothing to evaluate")
    tail_ranks, head_ranks = [], []
    for i in range(0, len(triples), batch_size):
        h, r, t = triples[i:i + batch_size].unbind(1)
        scores = model.score_tails(h, r).float()
        known = filters.mask(list(zip(h.tolist(), r.tolist())), "tail", scores.shape[1])
        tail_ranks.append(filtered_ranks(scores, t, known))
        scores = model.score_heads(r, t).float()
        known = filters.mask(list(zip(r.tolist(), t.tolist())), "head", scores.shape[1])
        head_ranks.append(filtered_ranks(scores, h, known))
    if was_training:
        model.train()
    tails, heads = torch.cat(tail_ranks), torch.cat(head_ranks)
    return {**rank_metrics(torch.cat([tails, heads])), **rank_metrics(tails, "tail_"), **rank_metrics(heads, "head_")}
