"""The model registry: ``@register_model`` and its entries, each a function named after the
model that returns its :class:`ModelConfig` (its docstring is the model card), and where the
weights of an entry with pretrained weights come from (:class:`PretrainedWeights`).

The families' config modules register their entries here, imported when the registry is first
asked; the factory (:mod:`babelzoo.zoo.factory`), which lists and builds them, lies above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..registry import Registry
from .model_config import ModelConfig
from .family import BUILTIN_FAMILIES, ENTRY_POINT_GROUP

# Functions that build a model from weights an installed package ships, by name: the offline
# sources (a layer above the zoo) and plug-ins register them through the entry-point group.
WEIGHT_LOADERS: Registry[Callable[..., Any]] = Registry("weight loader", group="babelzoo.weight_loaders")


@dataclass(frozen=True)
class PretrainedWeights:
    """Where an entry's weights come from: ``url`` + ``sha256`` (downloaded once, verified,
    cached), ``loader``, a function that builds the model itself (for weights shipped inside
    an installed package in a format of their own; or its name in :data:`WEIGHT_LOADERS`, found
    through the ``babelzoo.weight_loaders`` entry points when the weights are asked for), or
    ``hf_hub_id``, the Hugging Face Hub
    repository of the original checkpoint (``org/name``, converted on load). ``pretrained=True``
    uses the loader or the URL when there is one, the Hub id otherwise."""

    url: Optional[str] = None
    sha256: Optional[str] = None
    loader: Optional[Callable[..., Any] | str] = None
    hf_hub_id: Optional[str] = None
    description: str = ""

    def load(self, **overrides: Any):
        """The model the loader builds."""
        loader = WEIGHT_LOADERS.get(self.loader) if isinstance(self.loader, str) else self.loader
        return loader(**overrides)

    @property
    def source(self) -> str:
        """Where ``pretrained=True`` reads the weights from, in words."""
        return self.description or self.url or f"Hugging Face Hub {self.hf_hub_id}"


@dataclass(frozen=True)
class ModelEntry:
    name: str
    config_fn: Callable[[], ModelConfig]
    pretrained: Optional[PretrainedWeights] = None

    @property
    def doc(self) -> str:
        return (self.config_fn.__doc__ or "").strip()

    def config(self) -> ModelConfig:
        return self.config_fn().override(architecture=self.name)


# The entries come with the families' config modules (a family installed through the
# ``babelzoo.families`` group brings its own) and with the fusion architectures' module.
MODELS: Registry[ModelEntry] = Registry(
    "model", group=ENTRY_POINT_GROUP, builtin={**BUILTIN_FAMILIES, "fusion": "babelzoo.zoo.multimodal_architectures"},
    by_name=False, listed_by="babelzoo list models")

# The sizes of every ``*_tiny`` entry: each family's switches at a size that trains in seconds
# on a CPU (tests, demos).
TINY = dict(vocab_size=8000, hidden_size=128, num_layers=2, num_heads=4, intermediate_size=256, max_positions=256)


def register_model(fn: Callable[[], ModelConfig] | None = None, *, pretrained: PretrainedWeights | None = None):
    """Register a function returning a :class:`ModelConfig` under its name::

        @register_model
        def my_tiny():
            \"\"\"Model card: what it is, the paper.\"\"\"
            return ModelConfig(text=TransformerConfig(hidden_size=64, num_heads=2, num_layers=2))
    """

    def add(f: Callable[[], ModelConfig]) -> Callable[[], ModelConfig]:
        MODELS.register(ModelEntry(f.__name__, f, pretrained), name=f.__name__)
        return f

    return add if fn is None else add(fn)
