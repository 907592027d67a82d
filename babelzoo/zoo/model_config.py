"""A model's whole configuration: :class:`ModelConfig`, one sub-config per part (text, vision,
audio, knowledge, fusion, head), round-tripping through JSON exactly and reporting every mistake
with the field it concerns.

The text part's config is its family's (:mod:`babelzoo.zoo.config`); the other parts' configs are
here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Optional

from ..errors import ConfigError
from .config import EncoderConfig, _check, _Config, text_config_class

__all__ = ["AudioConfig", "FusionConfig", "HeadConfig", "KnowledgeConfig", "ModelConfig", "VisionConfig"]


@dataclass(frozen=True)
class VisionConfig(_Config):
    """Image tower: ``backbone='patch'`` is a ViLT raw patch embedding; any other name is a timm
    model whose features are projected to the text width."""

    backbone: str = "patch"
    image_size: int = 224
    patch_size: int = 16
    num_channels: int = 3
    pretrained: bool = False
    features: str = "tokens"

    _choices: ClassVar = {"features": ("tokens", "pooled")}
    _positive: ClassVar = ("image_size", "patch_size", "num_channels")

    def validate(self) -> None:
        if self.backbone == "patch":
            _check(self.image_size % self.patch_size == 0, "VisionConfig", "image_size", self.image_size,
                   f"must be divisible by patch_size={self.patch_size}")


@dataclass(frozen=True)
class AudioConfig(_Config):
    """Speech tower: log-mel filterbank frames subsampled by strided convolutions."""

    num_mel_bins: int = 80
    sample_rate: int = 16000
    conv_channels: int = 256
    conv_layers: int = 2
    conv_kernel: int = 3
    conv_stride: int = 2
    max_frames: int = 3000

    _positive: ClassVar = ("num_mel_bins", "sample_rate", "conv_channels", "conv_layers", "conv_kernel",
                           "conv_stride", "max_frames")


@dataclass(frozen=True)
class KnowledgeConfig(_Config):
    """Entity stream for knowledge fusion (ERNIE) and K-BERT injection."""

    entity_vocab_size: int = 1
    entity_dim: int = 100
    fusion_layers: tuple = ()
    fusion: str = "ernie"

    _choices: ClassVar = {"fusion": ("ernie", "none")}
    _positive: ClassVar = ("entity_vocab_size", "entity_dim")

    def validate(self) -> None:
        for layer in self.fusion_layers:
            _check(isinstance(layer, int) and layer >= 0, "KnowledgeConfig", "fusion_layers", self.fusion_layers,
                   "must hold non-negative layer indices")


@dataclass(frozen=True)
class FusionConfig(_Config):
    """How the text tower meets another modality: one stream (ViLT), cross-attention layers
    (ALBEF) or two towers compared by similarity (CLIP)."""

    mode: str = "single_stream"
    num_layers: int = 2
    projection_dim: int = 256

    _choices: ClassVar = {"mode": ("single_stream", "cross_attention", "dual")}
    _positive: ClassVar = ("num_layers", "projection_dim")


@dataclass(frozen=True)
class HeadConfig(_Config):
    """A task head on the encoder (:mod:`babelzoo.zoo.heads`), saved and loaded with the model.

    ``kind`` names a registered head: ``sequence_classification`` (one label per text or text
    pair), ``token_classification`` (one label per token; fine-tuning labels each word's first
    sub-word) or ``probe`` (a linear classifier on frozen features of any layer). ``labels`` are
    the class names in logit order. Sequence heads pool ``layer`` (-1: the last; 0: the
    embeddings) by ``pooling``: ``pooler`` (the model's pooler, BERT), ``cls`` (the first token),
    ``mean`` (the mean of the real tokens), ``max`` (their element-wise maximum, InferSent) or
    ``final`` (the states a recurrent encoder ends in); a model whose architecture fixes its
    sentence pooling (``EncoderConfig.sentence_pooling``) takes that one only. ``hidden_layer`` adds RoBERTa's dense + tanh
    before the output. ``dropout`` (None: the text config's) is applied before each linear map.
    ``freeze_encoder`` trains the head alone (a probe always does).
    """

    kind: str = "sequence_classification"
    labels: tuple = ()
    pooling: str = "cls"
    hidden_layer: bool = False
    layer: int = -1
    dropout: Optional[float] = None
    freeze_encoder: bool = False

    _choices: ClassVar = {"pooling": ("pooler", "cls", "mean", "max", "final")}

    def validate(self) -> None:
        name = type(self).__name__
        _check(isinstance(self.kind, str) and bool(self.kind), name, "kind", self.kind, "must name a registered head")
        _check(isinstance(self.labels, tuple) and len(self.labels) >= 2
               and all(isinstance(x, str) and x for x in self.labels), name, "labels", self.labels,
               "must list at least two non-empty label names")
        _check(len(set(self.labels)) == len(self.labels), name, "labels", self.labels, "must not repeat a label")
        _check(isinstance(self.layer, int) and not isinstance(self.layer, bool), name, "layer", self.layer,
               "must be an integer hidden-state index")
        if self.dropout is not None:
            _check(isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0, name, "dropout",
                   self.dropout, "must be in [0, 1) or None")
        for flag in ("hidden_layer", "freeze_encoder"):
            _check(isinstance(getattr(self, flag), bool), name, flag, getattr(self, flag), "must be true or false")

    @property
    def num_labels(self) -> int:
        return len(self.labels)


_SUBCONFIGS: dict[str, type[_Config]] = {
    "text": EncoderConfig,
    "vision": VisionConfig,
    "audio": AudioConfig,
    "knowledge": KnowledgeConfig,
    "fusion": FusionConfig,
    "head": HeadConfig,
}


@dataclass(frozen=True)
class ModelConfig:
    """The whole model: an architecture name plus one sub-config per part present."""

    architecture: str = "custom"
    text: EncoderConfig = field(default_factory=lambda: text_config_class("transformer")())
    vision: Optional[VisionConfig] = None
    audio: Optional[AudioConfig] = None
    knowledge: Optional[KnowledgeConfig] = None
    fusion: Optional[FusionConfig] = None
    head: Optional[HeadConfig] = None

    def __post_init__(self) -> None:
        for name, cls in _SUBCONFIGS.items():
            value = getattr(self, name)
            if value is not None and not isinstance(value, cls):
                raise ConfigError(f"ModelConfig.{name} must be a {cls.__name__}, got {type(value).__name__}")
        knowledge = self.knowledge
        if knowledge is not None and knowledge.fusion == "ernie" and not knowledge.fusion_layers:
            # No layers named: the upper half of the encoder, ERNIE's K-encoder, recorded as such.
            layers = self.text.num_layers
            object.__setattr__(self, "knowledge", knowledge.replace(fusion_layers=tuple(range(layers // 2, layers))))
        if self.knowledge is not None:
            self.text.check_knowledge(self.knowledge)
        if self.head is not None:
            self._check_head(self.head)

    def _check_head(self, head: HeadConfig) -> None:
        text = self.text
        layers = text.num_layers + 1  # hidden states: the embeddings, then every layer
        _check(-layers <= head.layer < layers, "HeadConfig", "layer", head.layer,
               f"must index the model's {layers} hidden states (0 = embeddings, -1 = last)")
        if head.pooling == "pooler" and head.kind != "token_classification":
            _check(text.pooler, "HeadConfig", "pooling", head.pooling,
                   "needs a model with a pooler (TransformerConfig.pooler=true)")
            _check(head.layer in (-1, text.num_layers), "HeadConfig", "layer", head.layer,
                   "must be the last layer with pooling='pooler' (the pooler reads the last layer)")
        fixed = text.sentence_pooling
        if fixed is not None and head.kind != "token_classification":
            _check(head.pooling == fixed, "HeadConfig", "pooling", head.pooling,
                   f"differs from the pooling {fixed!r} this model's architecture fixes for its sentence vectors "
                   f"({type(text).__name__}.sentence_pooling); set the head's pooling to {fixed!r}")
        if self.fusion is not None:
            raise ConfigError("ModelConfig.head: task heads sit on text encoders; this model has a fusion part")

    def check_towers(self) -> None:
        """Refuse a vision or audio part without a fusion part: only a fusion model reads images
        or speech, and a text model built from such a config would drop them. Checked when a
        model is built (not on construction: an override may add the tower and the fusion part
        one after the other)."""
        if self.fusion is not None:
            return
        for part, inputs in (("vision", "pixel_values"), ("audio", "audio_features")):
            if getattr(self, part) is not None:
                raise ConfigError(f"ModelConfig.{part}: model {self.architecture!r} has a {part} part but no fusion "
                                  f"part, so nothing would read its {inputs}; add a fusion part (e.g. "
                                  f"fusion={{'mode': 'single_stream'}}; modes: single_stream, cross_attention, "
                                  f"dual) or remove {part}")

    # --- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"architecture": self.architecture}
        for name in _SUBCONFIGS:
            sub = getattr(self, name)
            out[name] = None if sub is None else sub.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> "ModelConfig":
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where or 'ModelConfig'}: expected a mapping, got {type(data).__name__}")
        valid = ["architecture", *_SUBCONFIGS]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ConfigError(f"unknown ModelConfig key(s) {unknown}{' in ' + where if where else ''}; "
                              f"valid keys: {', '.join(valid)}")
        if data.get("text") is None:  # a text part is never implied: a default would be a 12-layer model
            raise ConfigError(f"{where + ': ' if where else ''}ModelConfig.text is required (a mapping of "
                              f"text encoder fields), got {data.get('text')!r}" if "text" in data else
                              f"{where + ': ' if where else ''}ModelConfig.text is missing")
        architecture = data.get("architecture", "custom")
        _check(isinstance(architecture, str) and bool(architecture), "ModelConfig", "architecture", architecture,
               "must be a non-empty string")
        kwargs: dict[str, Any] = {"architecture": architecture}
        for name, sub_cls in _SUBCONFIGS.items():
            sub = data.get(name)
            if sub is not None:
                kwargs[name] = sub_cls.from_dict(sub, where=f"{where}[{name}]" if where else name)
        return cls(**kwargs)

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_json(cls, source: str | Path) -> "ModelConfig":
        path = Path(source) if not str(source).lstrip().startswith("{") else None
        try:
            text = path.read_text(encoding="utf-8") if path else str(source)
        except UnicodeDecodeError as err:
            raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path or 'config'}:{err.lineno}: invalid JSON ({err.msg})") from None
        return cls.from_dict(data, where=str(path) if path else "")

    # --- overrides -----------------------------------------------------------------------------
    def override(self, **overrides: Any) -> "ModelConfig":
        """Return a copy with ``overrides`` applied.

        Plain keys go to the text config (``hidden_size=64``); other parts take a dict
        (``vision={"image_size": 64}``) or a dotted key (``**{"vision.image_size": 64}``).
        """
        changes: dict[str, dict[str, Any]] = {}
        top: dict[str, Any] = {}
        for key, value in overrides.items():
            if key == "architecture":
                top[key] = value
            elif key in _SUBCONFIGS and isinstance(value, Mapping):
                changes.setdefault(key, {}).update(value)
            elif key in _SUBCONFIGS and (value is None or isinstance(value, _SUBCONFIGS[key])):
                top[key] = value
            elif "." in key:
                part, sub_key = key.split(".", 1)
                if part not in _SUBCONFIGS:
                    raise ConfigError(f"unknown config part {part!r} in {key!r}; valid parts: "
                                      f"{', '.join(_SUBCONFIGS)}")
                changes.setdefault(part, {})[sub_key] = value
            elif key in type(self.text).field_names():
                changes.setdefault("text", {})[key] = value
            else:
                raise ConfigError(f"unknown config key {key!r}; valid keys: architecture, "
                                  f"{', '.join(type(self.text).field_names())}, or a part "
                                  f"({', '.join(_SUBCONFIGS)}) given as a dict or a dotted key")
        config = dataclasses.replace(self, **top) if top else self
        for part, values in changes.items():
            current = getattr(config, part)
            values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
            new = _SUBCONFIGS[part].from_dict(values) if current is None else current.replace(**values)
            config = dataclasses.replace(config, **{part: new})
        return config
