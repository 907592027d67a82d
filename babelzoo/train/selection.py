"""Model selection during training: evaluate on a held-out set, keep the best model, stop early.

An *evaluator* is any callable ``evaluator(model) -> {name: value}`` with an attribute
``metric`` naming the value to maximise (``"dev/accuracy"``). The trainer calls it every
``eval_every`` steps and at the end; :class:`Selection` keeps the best value and its step, counts
evaluations without improvement, and says when ``patience`` of them have passed. Its state goes
into every checkpoint, so a resumed run selects exactly as an uninterrupted one.

Zero-shot cross-lingual transfer selects on the source language's dev set only: the evaluator
is built from that set alone, and nothing else reaches the trainer.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol

from .._files import owned_entries
from ..zoo.checkpoint_io import WEIGHTS_NAME, replace_directory
from .identity import ResumeMismatch

BEST_DIR = "best"


class Evaluator(Protocol):
    metric: str

    def __call__(self, model: Any) -> Mapping[str, float]: ...


@dataclass
class Selection:
    """The best ``metric`` so far, its step, and how many evaluations since it improved."""

    metric: str
    patience: int = 0
    best: Optional[float] = None
    best_step: Optional[int] = None
    since_best: int = 0
    history: list = field(default_factory=list)

    def update(self, step: int, metrics: Mapping[str, float]) -> bool:
        """Record an evaluation; True when it is a new best (strictly greater)."""
        if self.metric not in metrics:
            raise KeyError(f"evaluator returned {sorted(metrics)}, not the selection metric {self.metric!r}")
        value = float(metrics[self.metric])
        self.history.append({"step": step, **{k: float(v) for k, v in metrics.items()}})
        if math.isfinite(value) and (self.best is None or value > self.best):
            self.best, self.best_step, self.since_best = value, step, 0
            return True
        self.since_best += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience > 0 and self.since_best >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("metric") != self.metric:
            raise ResumeMismatch(f"the checkpoint selected on {state.get('metric')!r}, this run on {self.metric!r}")
        self.best, self.best_step = state["best"], state["best_step"]
        self.since_best, self.history = int(state["since_best"]), list(state["history"])


def save_best(directory: Path, write: Callable[[Path], None]) -> Path:
    """Write the best model with ``write(tmp_dir)`` into a fresh directory beside ``directory``,
    then swap it in, so that ``directory`` always holds one whole model. Every best model has
    its weights file (a model without a ``ModelConfig``, e.g. a KG embedding, has no config.json)."""
    return replace_directory(directory, write, what="best model")


def best_saved(directory: Path) -> bool:
    """True when ``directory`` holds a best model :func:`save_best` wrote whole (its weights)."""
    return (directory / WEIGHTS_NAME).is_file() and WEIGHTS_NAME in (owned_entries(directory) or ())
