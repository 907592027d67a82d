"""KG embedding settings for CoDEx-S, chosen on its validation split (CPU budget, see
``benchmarks/codex_link_prediction.py`` for the resulting test numbers), and one function that
trains a model by recipe name."""

from __future__ import annotations

from typing import Callable, Optional

import torch

from ..zoo.config import ConfigError
from .kge import KGEModel, LinkPredictionData, create_kge
from .link_prediction import KGETrainConfig, train_kge

# name -> (model keyword arguments, training settings)
CODEX_S = {
    "transe": ({"dim": 256, "reciprocal": True, "p": 2, "gamma": 0.0},
               dict(loss="1vsall", lr=0.003, batch_size=512, label_smoothing=0.1, epochs=200)),
    "distmult": ({"dim": 256, "reciprocal": True},
                 dict(loss="1vsall", lr=0.003, batch_size=512, regularizer="n3", regularization_weight=0.005,
                      epochs=200)),
    "complex": ({"dim": 256, "reciprocal": True},
                dict(loss="1vsall", lr=0.003, batch_size=512, regularizer="n3", regularization_weight=0.005,
                     epochs=200)),
    "rotate": ({"dim": 128, "gamma": 6.0},
               dict(loss="self_adversarial", lr=0.003, batch_size=512, negatives=64, adversarial_temperature=1.0,
                    epochs=400)),
}


def train_by_recipe(name: str, data: LinkPredictionData, max_minutes: float = 14.0, epochs: Optional[int] = None,
                    eval_every: int = 5, log: Optional[Callable[[dict], None]] = None, seed: int = 0
                    ) -> tuple[KGEModel, dict, KGETrainConfig]:
    """Train the :data:`CODEX_S` recipe ``name`` on ``data`` (model selection on its valid split,
    early stopping, a CPU-time budget): ``(model, training summary, config)``."""
    if name not in CODEX_S:
        raise ConfigError(f"no KG embedding recipe {name!r}; known: {', '.join(CODEX_S)}")
    model_kwargs, train_kwargs = CODEX_S[name]
    model_kwargs = dict(model_kwargs)
    dim = model_kwargs.pop("dim")
    with torch.random.fork_rng(devices=[]):  # seeded initial weights; the caller's RNG is left alone
        torch.manual_seed(seed)
        model = create_kge(name, data.num_entities, data.num_relations, dim, **model_kwargs)
    if epochs is not None:
        train_kwargs = {**train_kwargs, "epochs": epochs}
    config = KGETrainConfig(eval_every=eval_every, patience=4, max_seconds=max_minutes * 60, clock="cpu", seed=seed,
                            **train_kwargs)
    return model, train_kge(model, data, config, log=log), config
