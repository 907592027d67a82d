"""KG embedding recipes: YAML files (``babelzoo/recipes/kge/*.yaml``, the settings for CoDEx-S
chosen on its validation split under a CPU budget; ``benchmarks/codex_link_prediction.py``
gives the resulting test numbers) read by the loader every recipe goes through
(:func:`babelzoo.config_files.load_config`) into a typed :class:`KGERecipe`, and one function that
trains a model by recipe::

    # babelzoo/recipes/kge/transe.yaml
    model: transe
    dim: 256
    options: {reciprocal: true, p: 2, gamma: 0.0}
    train: {loss: 1vsall, lr: 0.003, batch_size: 512, label_smoothing: 0.1, epochs: 200}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import torch

from .._files import expand_path
from ..config_files import load_config
from ..options import read_options
from ..typed import Range, check_fields
from ..zoo.config import ConfigError
from .kge import KGE_MODELS, KGEModel, LinkPredictionData, create_kge
from .link_prediction import KGETrainConfig, train_kge

SHIPPED = Path(__file__).resolve().parents[1] / "recipes" / "kge"


@dataclass(frozen=True)
class KGERecipe:
    """``model``: a registered KG embedding model (``transe``, ``distmult``, ``complex``,
    ``rotate``); ``dim``: its width; ``options``: the model's own hyper-parameters, each read
    against its constructor's annotation (``reciprocal``, ``p``, ``gamma``, ...); ``train``: the
    :class:`~babelzoo.knowledge.link_prediction.KGETrainConfig` settings."""

    model: str
    dim: Annotated[int, Range(1)]
    options: dict[str, Any] = field(default_factory=dict)
    train: KGETrainConfig = field(default_factory=KGETrainConfig)

    def __post_init__(self) -> None:
        check_fields(self, "KGERecipe")
        if self.model not in KGE_MODELS.list():
            raise ConfigError(f"KGERecipe.model={self.model!r} must be one of {', '.join(KGE_MODELS.list())}")


def kge_recipes() -> list[str]:
    """The names of the shipped KG embedding recipes."""
    return sorted(path.stem for path in SHIPPED.glob("*.yaml"))


def kge_recipe(name: str) -> KGERecipe:
    """The shipped recipe ``name`` or the recipe file ``name`` (``${VAR}`` and ``~`` expanded),
    with errors naming the file, the line and the key."""
    if name in kge_recipes():
        path = SHIPPED / f"{name}.yaml"
    elif name.endswith((".yaml", ".yml")):
        path = Path(expand_path(name, "KG embedding recipe"))
    else:
        raise ConfigError(f"no KG embedding recipe {name!r}; known: {', '.join(kge_recipes())} (or a .yaml file)")
    recipe, where = load_config(KGERecipe, path, kind="KG embedding recipe")
    options = read_options(KGE_MODELS.get(recipe.model).__init__, recipe.options, where.key("options"), recipe.model,
                           skip=("num_entities", "num_relations", "dim"))
    return dataclasses.replace(recipe, options=options)


def train_by_recipe(name: str, data: LinkPredictionData, max_minutes: float = 14.0, epochs: Optional[int] = None,
                    eval_every: int = 5, log: Optional[Callable[[dict], None]] = None, seed: int = 0
                    ) -> tuple[KGEModel, dict, KGETrainConfig]:
    """Train the recipe ``name`` (:func:`kge_recipe`) on ``data`` (model selection on its valid
    split, early stopping, a CPU-time budget): ``(model, training summary, config)``."""
    recipe = kge_recipe(name)
    with torch.random.fork_rng(devices=[]):  # seeded initial weights; the caller's RNG is left alone
        torch.manual_seed(seed)
        model = create_kge(recipe.model, data.num_entities, data.num_relations, recipe.dim, **recipe.options)
    config = dataclasses.replace(recipe.train, epochs=recipe.train.epochs if epochs is None else epochs,
                                 eval_every=eval_every, patience=4, max_seconds=max_minutes * 60, clock="cpu",
                                 seed=seed)
    return model, train_kge(model, data, config, log=log), config
