"""The model registry: ``@register_model``, ``list_models``, ``create_model``.

An entry is a function, named after the model, that returns its :class:`ModelConfig`; its
docstring is the model card. Pretrained weights, when an entry has them, are described by a
:class:`PretrainedWeights` (a URL with its sha256, or a loader that reads an installed package).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..registry import Registry
from .config import ConfigError, ModelConfig


@dataclass(frozen=True)
class PretrainedWeights:
    """Where an entry's weights come from: ``url`` + ``sha256`` (downloaded once, verified,
    cached) or ``loader``, a function that builds the model itself (for weights shipped inside
    an installed package in a format of their own)."""

    url: Optional[str] = None
    sha256: Optional[str] = None
    loader: Optional[Callable[..., Any]] = None
    description: str = ""


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


MODELS: Registry[ModelEntry] = Registry("model")

# The sizes of every ``*_tiny`` entry: each family's switches at a size that trains in seconds
# on a CPU (tests, demos).
TINY = dict(vocab_size=8000, hidden_size=128, num_layers=2, num_heads=4, intermediate_size=256, max_positions=256)


def register_model(fn: Callable[[], ModelConfig] | None = None, *, pretrained: PretrainedWeights | None = None):
    """Register a function returning a :class:`ModelConfig` under its name::

        @register_model
        def my_tiny():
            \"\"\"Model card: what it is, the paper.\"\"\"
            return ModelConfig(text=TextConfig(hidden_size=64, num_heads=2, num_layers=2))
    """

    def add(f: Callable[[], ModelConfig]) -> Callable[[], ModelConfig]:
        MODELS.register(ModelEntry(f.__name__, f, pretrained), name=f.__name__)
        return f

    return add if fn is None else add(fn)


def _ensure_registered() -> None:
    from . import multimodal_architectures  # noqa: F401  (register the built-in entries)
    from .family import load_builtin_families

    load_builtin_families()


def build_model(config: ModelConfig):
    """The module for a config: a fusion model when the config has a fusion part, otherwise a
    :class:`BabelModel` whose parts come from the text config's family."""
    if config.fusion is not None:
        from .fusion import FusionModel

        return FusionModel(config)
    from .model import BabelModel

    return BabelModel(config)


def list_models(pattern: str | None = None, pretrained: bool = False) -> list[str]:
    """Registered model names, optionally filtered by a wildcard (``"xlm*"``) and to those
    with pretrained weights."""
    _ensure_registered()
    names = MODELS.list(pattern)
    return [n for n in names if MODELS.get(n).pretrained] if pretrained else names


def model_entry(name: str) -> ModelEntry:
    _ensure_registered()
    return MODELS.get(name)


def model_config(name: str, **overrides: Any) -> ModelConfig:
    return model_entry(name).config().override(**overrides)


def create_model(name: str, pretrained: bool = False, weights: str | Path | None = None,
                 text_tower: Any = None, **overrides: Any):
    """Build a registered model.

    ``overrides`` change its config (``hidden_size=128``; other parts as dicts:
    ``vision={"image_size": 64}``). ``pretrained=True`` loads the entry's published weights;
    ``weights`` loads a checkpoint directory, file or URL instead. Loading is strict.
    ``head={"kind": ..., "labels": [...]}`` adds a freshly initialised task head
    (:mod:`babelzoo.zoo.heads`) on top of the loaded encoder.

    ``text_tower`` starts a fusion model's text encoder from a text model: a zoo name (built
    with its pretrained weights) or a :class:`BabelModel`. The fusion config takes the tower's
    text config; its other parts (image/speech tower, fusion layers, projections) start fresh and
    are sized to the tower's width. The tower's tokenizer, when it has one, comes along::

        model = create_model("vl_dual_tiny", text_tower="multilingual_e5_small")
    """
    from .pretrained import load_weights_into, resolve_pretrained

    entry = model_entry(name)
    if "head" in overrides and (pretrained or weights is not None):
        # Weights are for the encoder: load them, then add the fresh head.
        from .heads import with_head

        head = overrides.pop("head")
        model = create_model(name, pretrained=pretrained, weights=weights, text_tower=text_tower, **overrides)
        return model if head is None else with_head(model, head)
    if text_tower is not None:
        if pretrained or weights is not None:
            raise ConfigError("text_tower starts the text encoder from a text model; pretrained/weights load a "
                              "whole checkpoint: pass one or the other")
        return _with_text_tower(entry, text_tower, overrides)
    if pretrained and weights is None:
        if entry.pretrained is None:
            with_weights = list_models(pretrained=True)
            raise ConfigError(f"model {name!r} has no pretrained weights; models with weights: "
                              f"{', '.join(with_weights) or 'none'}; or pass weights=PATH_OR_URL")
        if entry.pretrained.loader is not None:
            return entry.pretrained.loader(**overrides)
        weights = resolve_pretrained(entry.pretrained)
    model = build_model(entry.config().override(**overrides))
    if weights is not None:
        load_weights_into(model, weights)
    return model


def _with_text_tower(entry: ModelEntry, text_tower: Any, overrides: dict[str, Any]):
    from .model import BabelModel

    config = entry.config()
    if config.fusion is None:
        raise ConfigError(f"text_tower is for fusion models; {entry.name!r} is a text model "
                          f"(load weights into it with pretrained= or weights=)")
    tower = create_model(text_tower, pretrained=True) if isinstance(text_tower, str) else text_tower
    if not isinstance(tower, BabelModel):
        raise TypeError(f"text_tower must be a zoo name or a BabelModel, not {type(tower).__name__}")
    text = tower.config.text
    model = build_model(dataclasses.replace(config, text=text).override(**overrides))
    # Strict on the encoder; a pooler or MLM head the tower lacks stays freshly initialised.
    try:
        missing, unexpected = model.text.load_state_dict(tower.state_dict(), strict=False)
    except RuntimeError as error:  # a shape changed by an override
        raise ConfigError(f"text_tower {tower.config.architecture!r} does not fit {entry.name!r} with overrides "
                          f"{sorted(overrides)}: {error}") from None
    missing = [k for k in missing if not k.startswith(("pooler.", "lm_head."))]
    if missing or unexpected:
        raise ConfigError(f"text_tower {tower.config.architecture!r} does not fit {entry.name!r}: missing "
                          f"{missing[:10]}, unexpected {unexpected[:10]}")
    model.tie_weights()
    if getattr(tower, "tokenizer", None) is not None:
        model.tokenizer = tower.tokenizer
    return model
