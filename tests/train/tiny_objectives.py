"""Small but real objectives and data for the trainer tests (the package's own objectives are
tested on their own; the trainer must not depend on them).

``RandomMaskMLM``: BERT-style dynamic masking (15%, every batch re-masked from the torch RNG)
and cross-entropy over the masked positions through the model's tied MLM head.
``FixedMaskMLM``: every third real token masked (no randomness) and the loss averaged per
example, so k micro-batches average to exactly the loss of one k-times-larger batch.
``contrastive=True`` adds an InfoNCE term whose negatives are gathered across ranks;
``poison_calls`` makes the loss of chosen forward calls infinite (an overflow to survive).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from babelzoo.objectives.base import Loss, Objective
from babelzoo.train.distributed import all_gather_with_grad, rank_and_world

HERE = Path(__file__).resolve().parent
PAD, MASK, FIRST = 1, 4, 5  # xlmr_tiny: pad id 1; ids below 5 are special


def corpus(n: int = 96, vocab: int = 60, seed: int = 0) -> list[list[int]]:
    """Sentences with learnable structure: each is an arithmetic progression (mod vocab) of
    random start and step, of length 6..16."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        length = int(torch.randint(6, 17, (1,), generator=g))
        start, step = int(torch.randint(0, vocab, (1,), generator=g)), int(torch.randint(1, 4, (1,), generator=g))
        rows.append([FIRST + (start + step * i) % vocab for i in range(length)])
    return rows


def zipf_corpus(n: int = 128, vocab: int = 60, exponent: float = 1.5, seed: int = 0) -> tuple[list[list[int]], float]:
    """Sentences of i.i.d. tokens with p(rank k) ∝ k^-exponent, and that distribution's
    entropy in nats: the loss a model reaches by learning the unigram statistics."""
    g = torch.Generator().manual_seed(seed)
    p = 1 / torch.arange(1, vocab + 1).double() ** exponent
    p = p / p.sum()
    rows = []
    for _ in range(n):
        length = int(torch.randint(6, 17, (1,), generator=g))
        rows.append((FIRST + torch.multinomial(p, length, replacement=True, generator=g)).tolist())
    return rows, float(-(p * p.log()).sum())


def pad_rows(rows: list[list[int]]) -> torch.Tensor:
    longest = max(len(r) for r in rows)
    out = torch.full((len(rows), longest), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


class RandomMaskMLM(Objective):
    name = "test_mlm"

    def __init__(self, rate: float = 0.15):
        super().__init__()
        self.rate = rate

    def prepare(self, examples):
        ids = pad_rows(list(examples))
        real = ids.ne(PAD)
        chosen = (torch.rand(ids.shape) < self.rate) & real
        chosen[0, 0] = True  # at least one target per batch
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        return {"input_ids": ids.masked_fill(chosen, MASK), "labels": labels}

    def forward(self, model, batch):
        out = model(batch["input_ids"], attention_mask=batch["input_ids"].ne(PAD).long())
        where = batch["labels"].ne(-100)
        logits = model.mlm_logits(out.last_hidden, where)
        target = batch["labels"][where]
        loss = F.cross_entropy(logits.float(), target)
        accuracy = (logits.argmax(-1) == target).double().mean().item()
        return Loss(loss, {"test_mlm/accuracy": accuracy}, int(batch["input_ids"].ne(PAD).sum()))


class FixedMaskMLM(Objective):
    name = "test_fixed_mlm"

    def __init__(self, hidden: int = 32, contrastive: bool = False, poison_calls: tuple[int, ...] = ()):
        super().__init__()
        self.contrastive = contrastive
        self.poison_calls = set(poison_calls)  # forward calls (0-based) whose loss is made infinite
        self.calls = 0
        self.key = nn.Linear(hidden, hidden) if contrastive else None

    def prepare(self, examples):
        ids = pad_rows([list(e) for e in examples])
        real = ids.ne(PAD)
        position = torch.arange(ids.shape[1]).expand_as(ids)
        chosen = (position % 3 == 1) & real
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        return {"input_ids": ids.masked_fill(chosen, MASK), "labels": labels}

    def forward(self, model, batch):
        ids = batch["input_ids"]
        mask = ids.ne(PAD)
        out = model(ids, attention_mask=mask.long())
        labels = batch["labels"]
        logits = model.mlm_logits(out.last_hidden)  # [B, L, V]
        token = F.cross_entropy(logits.transpose(1, 2), labels.clamp(min=0), reduction="none")
        where = labels.ne(-100)
        per_example = (token * where).sum(1) / where.sum(1)
        loss = per_example.mean()
        metrics = {"test_fixed_mlm/loss": float(loss.detach())}
        if self.contrastive:
            pooled = (out.last_hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            queries = F.normalize(pooled, dim=-1)
            keys = F.normalize(self.key(pooled), dim=-1)
            all_keys = all_gather_with_grad(keys)
            rank, _ = rank_and_world()
            targets = torch.arange(len(queries)) + rank * len(queries)
            nce = F.cross_entropy(queries @ all_keys.T / 0.1, targets)
            metrics["test_fixed_mlm/nce"] = float(nce.detach())
            loss = loss + nce
        if self.calls in self.poison_calls:
            loss = loss * float("inf")
        self.calls += 1
        return Loss(loss, metrics, int(mask.sum()))


@pytest.fixture
def one_thread():
    """Tiny models train fastest on one thread on a shared 2-core machine; restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_model(dtype: torch.dtype = torch.float32, dropout: float = 0.1, seed: int = 0):
    import babelzoo

    torch.manual_seed(seed)
    model = babelzoo.create_model("xlmr_tiny", vocab_size=72, hidden_size=32, num_heads=2, intermediate_size=64,
                                  num_layers=2, max_positions=32, dropout=dropout, attention_dropout=dropout)
    return model.to(dtype)


def fit_fixed(output_dir, contrastive: bool = True, n: int = 64, model_seed: int = 0, **config) -> dict:
    """Train FixedMaskMLM (float64, no dropout) on ``corpus(n)``, in the process group the
    caller joined, if any; ``model_seed`` seeds the initial weights."""
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.trainer import Trainer

    model = tiny_model(torch.float64, dropout=0.0, seed=model_seed)
    objective = FixedMaskMLM(contrastive=contrastive).double()
    settings = dict(output_dir=str(output_dir), max_steps=4, batch_size=8, lr=1e-2, progress=False,
                    tensorboard=False, measure_mfu=False, checkpoint_every=100, warmup_steps=0, schedule="constant")
    settings.update(config)
    return Trainer(model, objective, corpus(n), TrainConfig.from_dict(settings)).fit()


def fit_random(output_dir, max_steps: int = 40, checkpoint_every: int = 5, **config) -> dict:
    """Train RandomMaskMLM (dynamic masks, dropout 0.1, float32) on ``corpus(96)``."""
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.trainer import Trainer

    settings = dict(output_dir=str(output_dir), max_steps=max_steps, batch_size=8, lr=3e-3, warmup_steps=4,
                    checkpoint_every=checkpoint_every, keep_checkpoints=2, progress=False, tensorboard=False,
                    measure_mfu=False)
    settings.update(config)
    return Trainer(tiny_model(), RandomMaskMLM(), corpus(96), TrainConfig.from_dict(settings)).fit()


if __name__ == "__main__":  # python tiny_objectives.py OUTPUT_DIR MAX_STEPS CHECKPOINT_EVERY
    torch.set_num_threads(1)
    fit_random(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
