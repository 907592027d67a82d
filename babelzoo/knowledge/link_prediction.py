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

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Callable, Optional

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn
from torch.utils.data import Dataset

from ..objectives.base import Loss, Objective
from ..objectives.batching import unwrap
from ..train.run import Run
from ..typed import Range, Seed, check_fields
from .base import KBError
from .kge import KGEModel, LinkPredictionData

LOSSES = ("self_adversarial", "uniform", "softmax", "1vsall")


@dataclass
class KGETrainConfig:
    epochs: int = 100
    batch_size: int = 512
    lr: Annotated[float, Range(0, low_open=True)] = 1e-3  # Adam's (AdamW without decay), constant
    loss: str = "self_adversarial"
    negatives: int = 128
    adversarial_temperature: Annotated[float, Range(0)] = 1.0
    label_smoothing: Annotated[float, Range(0, 1, high_open=True)] = 0.0
    regularizer: Optional[str] = None
    regularization_weight: Annotated[float, Range(0)] = 0.0
    eval_every: int = 5
    patience: Annotated[int, Range(0)] = 4  # evaluations without improvement of validation MRR before stopping
    max_seconds: Optional[Annotated[float, Range(0, low_open=True)]] = None  # training budget, on ``clock``
    clock: str = "wall"  # "wall", or "cpu": process CPU time summed over threads
    seed: Seed = 0

    def __post_init__(self) -> None:
        check_fields(self)
        if self.loss not in LOSSES:
            raise KBError(f"KGETrainConfig.loss={self.loss!r} must be one of {', '.join(LOSSES)}")
        if self.clock not in ("wall", "cpu"):
            raise KBError(f"KGETrainConfig.clock={self.clock!r} must be 'wall' or 'cpu'")
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


def _batch_loss(model: KGEModel, batch: torch.Tensor, config: KGETrainConfig) -> torch.Tensor:
    h, r, t = batch.unbind(1)
    if model.reciprocal and config.loss == "1vsall":  # both directions as tail questions, one scoring pass
        loss = model.one_vs_all_loss(torch.cat([h, t]), torch.cat([r, model.inverse(r)]), torch.cat([t, h]),
                                     config.label_smoothing)
        if config.regularizer and config.regularization_weight:
            loss = loss + config.regularization_weight * model.regularizer(batch, config.regularizer)
        return loss
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
        negatives = torch.randint(model.num_entities, (len(batch), config.negatives), device=batch.device)
        positive = model.score(hh, rr, tt)
        negative = (model.score_tails(hh, rr, negatives) if side == "tail" else model.score_heads(rr, tt, negatives))
        total = total + negative_sampling_loss(positive, negative, config.loss, config.adversarial_temperature)
    loss = total / len(directions)
    if config.regularizer and config.regularization_weight:
        loss = loss + config.regularization_weight * model.regularizer(batch, config.regularizer)
    return loss


class TripleObjective(Objective):
    """The KGE training loss of ``config`` (negative sampling or 1-vs-all, plus the
    regularizer) as an objective of the shared :class:`~babelzoo.train.Trainer`: examples are
    (h, r, t) id triples."""

    name = "kge"

    def __init__(self, config: KGETrainConfig):
        super().__init__()
        self.config = config
        self.batches = 0  # training batches seen, for the epoch count of the log
        self.loss_sum: Optional[torch.Tensor] = None  # their summed loss since the last read, on the device
        self.loss_batches = 0

    def read_loss(self) -> float:
        """The mean training loss since the last read (one device read)."""
        mean = float(self.loss_sum) / self.loss_batches if self.loss_batches else float("nan")
        self.loss_sum, self.loss_batches = None, 0
        return mean

    def prepare(self, examples) -> dict[str, torch.Tensor]:
        return {"triples": torch.stack([torch.as_tensor(e, dtype=torch.long) for e in examples])}

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        triples = batch["triples"]
        loss = _batch_loss(unwrap(model), triples, self.config)
        if self.training:
            self.batches += 1
            self.loss_batches += 1
            self.loss_sum = loss.detach() if self.loss_sum is None else self.loss_sum + loss.detach()
        return Loss(loss, {"loss": loss.detach()}, tokens=torch.tensor(len(triples)))


class Triples(Dataset):
    """The rows of an [N, 3] id tensor as a map-style dataset."""

    def __init__(self, triples: torch.Tensor):
        self.triples = triples

    def __len__(self) -> int:
        return len(self.triples)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.triples[index]


class ValidationRanking:
    """The trainer's evaluator: filtered ranking on the valid split (selection metric: MRR).
    ``log`` gets each evaluation's metrics with the epoch reached (``objective``'s batches over
    ``steps_per_epoch``) and the seconds spent so far."""

    metric = "mrr"

    def __init__(self, data: LinkPredictionData, objective: TripleObjective, steps_per_epoch: int,
                 clock: Callable[[], float], log: Optional[Callable[[dict], None]] = None):
        self.data, self.objective, self.steps_per_epoch = data, objective, steps_per_epoch
        self.clock, self.log = clock, log
        self.filters = KnownTriples(data)
        self.start = clock()

    def __call__(self, model: nn.Module) -> dict[str, float]:
        metrics = evaluate(model, self.data, "valid", filters=self.filters)
        if self.log is not None:
            epoch = self.objective.batches / self.steps_per_epoch
            self.log({"epoch": int(epoch) if epoch == int(epoch) else round(epoch, 2),
                      "loss": self.objective.read_loss(), "seconds": self.clock() - self.start, **metrics})
        return metrics


def build_kge_run(model: KGEModel, data: LinkPredictionData, config: KGETrainConfig, output_dir: str | Path,
                  log: Optional[Callable[[dict], None]] = None) -> Run:
    """The :class:`~babelzoo.train.run.Run` of a KG embedding: ``config`` in the shared
    trainer's terms (an epoch is one pass over ``data.train``; evaluation every ``eval_every``
    epochs), the triple objective, and filtered MRR on the valid split as the evaluator."""
    from ..train import CheckpointConfig, LoggingConfig, OptimConfig, TrainConfig

    batch_size = min(config.batch_size, len(data.train))  # a graph smaller than a batch: one batch of it all
    steps_per_epoch = -(-len(data.train) // batch_size)
    train = TrainConfig(output_dir=str(output_dir), seed=config.seed, max_steps=config.epochs * steps_per_epoch,
                        max_seconds=config.max_seconds, budget_clock=config.clock, device="cpu", batch_size=batch_size,
                        optim=OptimConfig(optimizer="adamw", lr=config.lr, weight_decay=0.0, betas=(0.9, 0.999),
                                          eps=1e-8, schedule="constant", max_grad_norm=0.0),
                        checkpoints=CheckpointConfig(every=config.epochs * steps_per_epoch, keep=1, resume=False),
                        logging=LoggingConfig(every=steps_per_epoch, progress=False, tensorboard=False,
                                              measure_mfu=False),
                        eval_every=config.eval_every * steps_per_epoch, patience=config.patience, distributed="none")
    clock = time.process_time if config.clock == "cpu" else time.perf_counter
    objective = TripleObjective(config)
    evaluator = ValidationRanking(data, objective, steps_per_epoch, clock, log)
    return Run(train, model, objective, Triples(data.train), evaluator=evaluator)


def train_kge(model: KGEModel, data: LinkPredictionData, config: KGETrainConfig = KGETrainConfig(),
              log: Optional[Callable[[dict], None]] = None, output_dir: Optional[str | Path] = None) -> dict:
    """Train on ``data.train`` (:func:`build_kge_run`), validating filtered MRR every
    ``eval_every`` epochs and at the end; keeps the best validation state (early stopping after
    ``patience`` evaluations without improvement, a time budget of ``max_seconds`` on
    ``clock``). The run (metrics, checkpoints, the best weights) goes to ``output_dir``, a
    temporary directory when None. Returns a summary: the best epoch, the best validation
    metrics, the epochs run and the seconds spent. A run stopped by SIGTERM or SIGINT raises
    :class:`~babelzoo.knowledge.base.KBError`, so that no caller saves the half-trained model as
    a trained one."""
    with tempfile.TemporaryDirectory(prefix="kge-") as scratch:
        run = build_kge_run(model, data, config, output_dir if output_dir is not None else scratch, log)
        summary = run.trainer().fit()
        if summary.get("stopped_by_signal"):  # a half-trained model is not handed on as a trained one
            raise KBError(f"training stopped by {summary['stopped_by_signal']} at step {summary['steps']} of "
                          f"{run.config.max_steps}: nothing is written (a KG embedding run does not resume; run "
                          f"the command again)")
        best = Path(run.config.output_dir) / "best" / "model.safetensors"
        if summary["best_step"] is not None:
            model.load_state_dict(load_file(best), strict=True)
    history = {e["step"]: e for e in summary["evaluations"]}
    valid = {k: v for k, v in history.get(summary["best_step"], {}).items() if k != "step"}
    steps_per_epoch = run.evaluator.steps_per_epoch

    def epochs(steps: Optional[int]) -> float:
        value = (steps or 0) / steps_per_epoch
        return int(value) if value == int(value) else round(value, 2)

    return {"best_epoch": epochs(summary["best_step"]), "epochs": epochs(summary["steps"]),
            "seconds": summary["budget_seconds_used"], "valid": valid or {"mrr": -1.0}}


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
    # counted as int32 (exact below 2³¹ candidates): summing bools to int64 is several times slower
    higher = ((scores > target_scores) & keep).sum(1, dtype=torch.int32)
    ties = ((scores == target_scores) & keep).sum(1, dtype=torch.int32) - 1  # minus the target itself
    return 1.0 + higher.float() + ties.float() / 2


def rank_metrics(ranks: torch.Tensor, prefix: str = "") -> dict[str, float]:
    out = {f"{prefix}mrr": float((1.0 / ranks).mean())}
    for k in (1, 3, 10):
        out[f"{prefix}hits@{k}"] = float((ranks <= k).float().mean())
    return out


def evaluate(model, data: LinkPredictionData, split: str = "test", batch_size: int = 256,
             filters: Optional[KnownTriples] = None) -> dict[str, float]:
    """Filtered MRR and Hits@1/3/10 on ``split`` for tail and head prediction (keys
    ``tail_mrr``, ``head_hits@10``...) and their mean (``mrr``, ``hits@10``...). ``model`` needs
    ``score_tails(h, r)`` and ``score_heads(r, t)`` returning [B, N]."""
    return split_metrics(*split_ranks(model, data, split, batch_size, filters))


def split_metrics(tails: torch.Tensor, heads: torch.Tensor) -> dict[str, float]:
    """:func:`evaluate`'s metrics from the ranks of :func:`split_ranks`."""
    return {**rank_metrics(torch.cat([tails, heads])), **rank_metrics(tails, "tail_"), **rank_metrics(heads, "head_")}


@torch.no_grad()
def split_ranks(model, data: LinkPredictionData, split: str = "test", batch_size: int = 256,
                filters: Optional[KnownTriples] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The filtered rank of every triple of ``split``'s answer, (tail ranks, head ranks), in the
    split's order: 1 + the candidates scored higher + half those tied, every other true answer
    left out (:func:`filtered_ranks`)."""
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
    return torch.cat(tail_ranks), torch.cat(head_ranks)
