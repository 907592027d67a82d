"""The model factory: ``list_models``, ``create_model``, ``load_model`` over the registry of
:mod:`babelzoo.zoo.entries` (``@register_model``).

An entry is a function, named after the model, that returns its :class:`ModelConfig`; its
docstring is the model card. Pretrained weights, when an entry has them, are described by a
:class:`PretrainedWeights` (a URL with its sha256, a loader that reads an installed package, or a
Hugging Face Hub id). The model classes, the checkpoint loader and the architectures lie below
this module; they are imported when a model is built, so that listing the zoo needs no torch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

from ..errors import CheckpointError, InputTypeError
from .config import ConfigError
from .model_config import ModelConfig
from ._default_tokenizer import default_tokenizer_for
from .entries import MODELS, ModelEntry
from ._hub_ids import looks_like_hub_id


def build_model(config: ModelConfig):
    """The module for a config (:func:`babelzoo.zoo.build.build_model`): a fusion model when the
    config has a fusion part, otherwise the model class of the text config's family."""
    from .build import build_model as build  # imports torch: not when the zoo is only listed

    return build(config)


def list_models(pattern: str | None = None, pretrained: bool = False) -> list[str]:
    """Registered model names, optionally filtered by a wildcard (``"xlm*"``) and to those
    with pretrained weights (the entries of installed families included)."""
    names = MODELS.list(pattern)
    return [n for n in names if MODELS.get(n).pretrained] if pretrained else names


def model_entry(name: str) -> ModelEntry:
    return MODELS.get(name)


def load_model(source: str | Path):
    """A trained model from what a command line names: a folder or Hub id (anything
    :func:`~babelzoo.zoo.pretrained.from_pretrained` reads), else a registered entry: its
    published weights, or fresh weights when it has none. An unknown name is an error that lists
    the names it may have meant."""
    from .pretrained import from_pretrained

    name = str(source)
    if Path(name).exists() or looks_like_hub_id(name) or any(c in name for c in "/\\") or name.startswith((".", "~")):
        return from_pretrained(source)  # a path (a missing one is an error that names it) or a Hub id
    entry = model_entry(name)
    return create_model(entry.name, pretrained=entry.pretrained is not None)


def model_config(name: str, **overrides: Any) -> ModelConfig:
    return model_entry(name).config().override(**overrides)


def create_model(name: str, pretrained: bool | str = False, weights: str | Path | None = None,
                 text_tower: Any = None, *, revision: Optional[str] = None, cache_dir: str | Path | None = None,
                 **overrides: Any):
    """Build a registered model.

    ``overrides`` change its config (``hidden_size=128``; other parts as dicts:
    ``vision={"image_size": 64}``). ``pretrained=True`` loads the entry's published weights;
    ``weights`` loads a checkpoint directory, file or URL instead. Loading is strict. A model
    with fresh weights has no tokenizer until one is attached, or until
    ``model.use_default_tokenizer()`` builds the one its config implies
    (:mod:`babelzoo.zoo._default_tokenizer`); loaded weights come with their checkpoint's.

    ``pretrained`` may also be a Hugging Face Hub id (``org/name``, at ``revision``, through the
    cache at ``cache_dir``; see :func:`~babelzoo.zoo.pretrained.from_pretrained`) or a checkpoint
    directory (babelzoo's or Hugging Face's): the checkpoint is converted, its config must match
    the entry's (with ``overrides``) in every field that shapes the weights or the outputs, and
    its weights load strictly. The pooler and MLM head follow the checkpoint unless overridden::

        model = create_model("xlmr_base", pretrained="FacebookAI/xlm-roberta-base")

    ``head={"kind": ..., "labels": [...]}`` adds a freshly initialised task head
    (:mod:`babelzoo.zoo.heads`) on top of the loaded encoder.

    ``text_tower`` starts a fusion model's text encoder from a text model: a zoo name (built
    with its pretrained weights) or a :class:`BabelModel`. The fusion config takes the tower's
    text config; its other parts (image/speech tower, fusion layers, projections) start fresh and
    are sized to the tower's width. The tower's tokenizer, when it has one, comes along::

        model = create_model("vl_dual_tiny", text_tower="multilingual_e5_small")
    """
    from .checkpoint_io import load_weights_into, resolve_pretrained

    entry = model_entry(name)
    if "head" in overrides and (pretrained or weights is not None):
        # Weights are for the encoder: load them, then add the fresh head.
        from .build import with_head

        head = overrides.pop("head")
        model = create_model(name, pretrained=pretrained, weights=weights, text_tower=text_tower, revision=revision,
                             cache_dir=cache_dir, **overrides)
        return model if head is None else with_head(model, head)
    if text_tower is not None:
        if pretrained or weights is not None:
            raise ConfigError("text_tower starts the text encoder from a text model; pretrained/weights load a "
                              "whole checkpoint: pass one or the other")
        return _with_text_tower(entry, text_tower, overrides)
    if isinstance(pretrained, (str, Path)) and weights is not None:
        raise ConfigError("pretrained= names a checkpoint and so does weights=: pass one of them")
    source = _checkpoint_source(entry, pretrained) if weights is None else None
    if source is not None:
        return _from_checkpoint(entry, source, overrides, revision, cache_dir)
    if revision is not None or cache_dir is not None:
        raise ConfigError("revision= and cache_dir= go with a Hugging Face Hub id: pretrained='org/name', or "
                          "pretrained=True for an entry whose weights are on the Hub")
    if pretrained and weights is None:
        if entry.pretrained is None:
            with_weights = list_models(pretrained=True)
            raise ConfigError(f"model {name!r} has no pretrained weights; models with weights: "
                              f"{', '.join(with_weights) or 'none'}; or pass weights=PATH_OR_URL")
        if entry.pretrained.loader is not None:
            return entry.pretrained.load(**overrides)
        weights = resolve_pretrained(entry.pretrained)
    model = build_model(entry.config().override(**overrides))
    if weights is not None:
        load_weights_into(model, weights)
    else:
        _give_default_tokenizer(model)
    return model


def _give_default_tokenizer(model) -> None:
    """A model with fresh weights knows the tokenizer its config implies, built when asked for
    (``model.use_default_tokenizer()``, :mod:`babelzoo.zoo._default_tokenizer`); trained weights
    come with their own."""
    from .sentences import ReadsText

    if isinstance(model, ReadsText):
        model.default_tokenizer = default_tokenizer_for(model.config.text)


# Fields a checkpoint does not fix: they change training, not the weights or the outputs.
_TRAINING_FIELDS = frozenset({"dropout", "attention_dropout", "init_std"})
# Parts a checkpoint brings or lacks: they follow the checkpoint unless overridden.
_HEAD_FIELDS = ("pooler", "mlm_head", "tie_word_embeddings")


def _checkpoint_source(entry: ModelEntry, pretrained: bool | str | Path) -> str | Path | None:
    """The checkpoint ``pretrained`` names: itself (a Hub id or a directory), or, for
    ``pretrained=True``, the entry's Hub id when it has no loader or URL."""
    if isinstance(pretrained, (str, Path)):
        return pretrained
    weights = entry.pretrained
    if pretrained and weights is not None and weights.loader is None and weights.url is None:
        return weights.hf_hub_id
    return None


def _from_checkpoint(entry: ModelEntry, source: str | Path, overrides: dict[str, Any],
                     revision: Optional[str], cache_dir: str | Path | None):
    """``entry`` (with ``overrides``) holding the weights of the checkpoint at ``source``."""
    from .pretrained import from_pretrained
    from .checkpoint_io import load_state_strict, model_state

    found = from_pretrained(source, revision=revision, cache_dir=cache_dir)
    config = checkpoint_fit(entry, found.config, overrides, str(source))
    model = build_model(config)
    load_state_strict(model, model_state(found), str(source))
    if getattr(found, "tokenizer", None) is not None:
        model.tokenizer = found.tokenizer
    return model


def checkpoint_fit(entry: ModelEntry, found: ModelConfig, overrides: dict[str, Any], source: str) -> ModelConfig:
    """The config of ``entry`` with ``overrides`` that holds a checkpoint of config ``found``:
    the checkpoint's pooler, MLM head, task head and knowledge part (ERNIE's entity table and
    fusion layers) unless overridden, and its pad id where no
    position depends on it (then the id only picks the default attention mask, and the
    checkpoint's goes with its tokenizer); every other field equal (dropout and init aside). A
    field that differs is an error naming both values."""
    if type(found.text) is not type(entry.config().text):
        raise CheckpointError(f"{source} holds a {type(found.text).__name__} encoder; {entry.name!r} is a "
                              f"{type(entry.config().text).__name__}")
    follow = [*_HEAD_FIELDS]
    if not found.text.positions_from_pad and not entry.config().override(**overrides).text.positions_from_pad:
        follow.append("pad_token_id")
    heads = {key: getattr(found.text, key) for key in follow if key not in overrides}
    config = entry.config().override(**heads).override(**overrides)
    if found.head is not None and config.head is None:
        config = dataclasses.replace(config, head=found.head)
    if found.knowledge is not None and config.knowledge is None and "knowledge" not in overrides:
        config = dataclasses.replace(config, knowledge=found.knowledge)
    ours, theirs = config.text, found.text
    differ = []
    for f in dataclasses.fields(ours):
        a, b = getattr(ours, f.name), getattr(theirs, f.name)
        if a == b or f.name in _TRAINING_FIELDS:
            continue
        differ.append(f"{f.name}: {entry.name} has {a!r}, the checkpoint {b!r}")
    for f in dataclasses.fields(config):
        if f.name not in ("architecture", "text") and getattr(config, f.name) != getattr(found, f.name):
            differ.append(f"{f.name}: {entry.name} has {getattr(config, f.name)!r}, the checkpoint "
                          f"{getattr(found, f.name)!r}")
    if differ:
        raise CheckpointError(f"{source} does not fit {entry.name!r}" + (f" with overrides {sorted(overrides)}"
                              if overrides else "") + ": " + "; ".join(differ)
                              + "; pass overrides that match it, or load it as it is with babelzoo.from_pretrained")
    return config


def _with_text_tower(entry: ModelEntry, text_tower: Any, overrides: dict[str, Any]):
    from .model import BabelModel
    from .sentences import share_tokenizer

    config = entry.config()
    if config.fusion is None:
        raise ConfigError(f"text_tower is for fusion models; {entry.name!r} is a text model "
                          f"(load weights into it with pretrained= or weights=)")
    tower = create_model(text_tower, pretrained=True) if isinstance(text_tower, str) else text_tower
    if not isinstance(tower, BabelModel):
        raise InputTypeError(f"text_tower must be a zoo name or a BabelModel, not {type(tower).__name__}")
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
    share_tokenizer(tower, model)
    return model
