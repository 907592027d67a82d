"""Typed model configuration: frozen dataclasses validated at construction.

A :class:`ModelConfig` holds one sub-config per part (text, vision, audio, knowledge, fusion).
It round-trips through JSON exactly, and every mistake is reported with the field it concerns::

    >>> TextConfig(hidden_size=100, num_heads=12)
    ConfigError: TextConfig.hidden_size=100 must be divisible by num_heads=12

The text part's class depends on its family (:mod:`babelzoo.zoo.family`): ``TextConfig`` for
the Transformer family, one class per other family, all derived from :class:`EncoderConfig`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Mapping, Optional

from ..errors import ConfigError, InputError
from ..typed import check_fields
from .family import load_family_module

__all__ = ["AudioConfig", "ConfigError", "EncoderConfig", "EncoderDecoderConfig", "FusionConfig", "HeadConfig", "KnowledgeConfig",
           "ModelConfig", "VisionConfig", "text_config_class"]


def _check(cond: bool, cls: str, name: str, value: Any, why: str) -> None:
    if not cond:
        raise ConfigError(f"{cls}.{name}={value!r} {why}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


class _Config:
    """Shared behaviour of every sub-config: validation helpers, dict/JSON round trip, replace."""

    _choices: ClassVar[dict[str, tuple]] = {}
    _positive: ClassVar[tuple[str, ...]] = ()
    _non_negative: ClassVar[tuple[str, ...]] = ()
    _probabilities: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        cls = type(self).__name__
        check_fields(self, cls, strict=True)
        for name, options in self._choices.items():
            value = getattr(self, name)
            _check(value in options, cls, name, value, f"must be one of {', '.join(map(repr, options))}")
        for name in self._positive:
            value = getattr(self, name)
            _check(isinstance(value, int) and not isinstance(value, bool) and value > 0, cls, name, value,
                   "must be a positive integer")
        for name in self._non_negative:
            value = getattr(self, name)
            _check(isinstance(value, int) and not isinstance(value, bool) and value >= 0, cls, name, value,
                   "must be a non-negative integer")
        for name in self._probabilities:
            value = getattr(self, name)
            _check(isinstance(value, (int, float)) and 0.0 <= value < 1.0, cls, name, value, "must be in [0, 1)")
        self.validate()

    def validate(self) -> None:
        """Cross-field checks; subclasses extend."""

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = ""):
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where or cls.__name__}: expected a mapping of {cls.__name__} fields, "
                              f"got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.field_names()))
        if unknown:
            raise ConfigError(f"unknown {cls.__name__} key(s) {unknown}{' in ' + where if where else ''}; "
                              f"valid keys: {', '.join(cls.field_names())}")
        try:
            return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}" if where else str(err)) from None

    def replace(self, **changes):
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise ConfigError(f"unknown {type(self).__name__} key(s) {unknown}; "
                              f"valid keys: {', '.join(self.field_names())}")
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class EncoderConfig(_Config, metaclass=ABCMeta):
    """What every text encoder has, whatever its family: the vocabulary, the widths, the
    inputs it takes (segments, XLM language ids), dropout and the output heads.

    A family subclasses it with its own fields and a ``family`` name (``TextConfig`` is the
    ``transformer`` family: BERT, XLM, ALBERT, NEZHA...; see :mod:`babelzoo.zoo.family`);
    ``to_dict`` writes the name beside the fields, so a config file says which class reads it.
    """

    family: ClassVar[str] = ""
    is_encoder_decoder: ClassVar[bool] = False  # True for :class:`EncoderDecoderConfig` families

    vocab_size: int = 32000
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_positions: int = 512
    segment_vocab_size: int = 2
    num_languages: int = 0
    activation: str = "gelu"
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    pooler: bool = True
    mlm_head: bool = True
    tie_word_embeddings: bool = True
    pad_token_id: int = 0
    init_std: float = 0.02

    _choices: ClassVar = {"activation": ("gelu", "gelu_tanh", "relu", "silu")}
    _positive: ClassVar = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                           "max_positions")
    _non_negative: ClassVar = ("segment_vocab_size", "num_languages", "pad_token_id")
    _probabilities: ClassVar = ("dropout", "attention_dropout")

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("family"):
            TEXT_CONFIGS[cls.family] = cls

    @property
    def embedding_dim(self) -> int:
        """The width of the word embeddings (the MLM decoder's input)."""
        return self.hidden_size

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def sentence_pooling(self) -> Optional[str]:
        """How this architecture reads a sentence vector off its last layer (``"max"`` for
        InferSent), or None when it fixes none and each objective, head or evaluation picks its
        own (:meth:`~babelzoo.zoo.model.BabelModel.sentence_embedding`)."""
        return None

    @property
    def output_directions(self) -> int:
        """How many directions the encoder's output concatenates (2 for a bidirectional RNN:
        forward states, then backward states), for ``final`` pooling."""
        return 1

    @property
    def positions_from_pad(self) -> bool:
        """Whether position ids are counted from ``pad_token_id`` (RoBERTa's offset); otherwise
        the pad id only picks the default attention mask and the embedding's padding row."""
        return False

    def validate(self) -> None:
        name = type(self).__name__
        _check(self.hidden_size % self.num_heads == 0, name, "hidden_size", self.hidden_size,
               f"must be divisible by num_heads={self.num_heads}")
        _check(self.pad_token_id < self.vocab_size, name, "pad_token_id", self.pad_token_id,
               f"must be smaller than vocab_size={self.vocab_size}")
        _check(self.layer_norm_eps > 0, name, "layer_norm_eps", self.layer_norm_eps, "must be positive")
        _check(self.init_std > 0, name, "init_std", self.init_std, "must be positive")

    def check_knowledge(self, knowledge: "KnowledgeConfig") -> None:
        """Refuse a knowledge part this family cannot build (checked by :class:`ModelConfig`)."""
        if knowledge.fusion == "ernie":
            raise ConfigError(f"ModelConfig.knowledge: ERNIE fusion layers need a 'transformer' family text encoder; "
                              f"family {self.family!r} has none (use fusion='none')")

    @abstractmethod
    def encoder_flops_per_token(self, seq_len: int) -> float:
        """Forward FLOPs per token of the encoder's layers (multiply-add = 2), for
        :mod:`babelzoo.train.flops`; each family counts its own layers."""

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = ""):
        """The config of the family ``data["family"]`` names (a file written before families
        had names is migrated: see :meth:`migrate`)."""
        if not isinstance(data, Mapping):
            return super().from_dict(data, where)
        data = dict(data)
        family = data.pop("family", None)
        if family is None:
            family, data = migrate_legacy_text(data, where)
        target = text_config_class(family, where)
        if cls.family and target is not cls:
            raise ConfigError(f"{where or cls.__name__}: family {family!r} is not {cls.__name__}'s ({cls.family!r})")
        return _Config.from_dict.__func__(target, data, where)

    @classmethod
    def migrate(cls, data: dict[str, Any], where: str) -> dict[str, Any]:
        """Fields of a config written before families had names, in this family's layout."""
        return data


@dataclass(frozen=True)
class EncoderDecoderConfig(EncoderConfig):
    """What every encoder–decoder family has beyond :class:`EncoderConfig`: ``decoder_layers``
    (default: as many as ``num_layers``) and the ids that generation starts, forces and stops
    with. The decoder starts with ``decoder_start_token_id``, its first generated token is forced
    to ``forced_bos_token_id`` when set, and ``eos_token_id`` ends a sequence. ``languages`` are
    mBART-style language codes whose tags are the ids just before the last one (``<mask>``), in
    this order: ``language_id(code) = vocab_size - 1 - len(languages) + i``. An encoder–decoder
    has no pooler, MLM head or segment embeddings."""

    is_encoder_decoder: ClassVar[bool] = True

    segment_vocab_size: int = 0
    pooler: bool = False
    mlm_head: bool = False
    decoder_layers: Optional[int] = None
    bos_token_id: Optional[int] = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    forced_bos_token_id: Optional[int] = None
    languages: tuple = ()

    _non_negative: ClassVar = EncoderConfig._non_negative + ("eos_token_id", "decoder_start_token_id")

    @property
    def num_decoder_layers(self) -> int:
        return self.num_layers if self.decoder_layers is None else self.decoder_layers

    def language_id(self, code: str) -> int:
        """The id of language ``code``'s tag; an unknown code is an :class:`InputError` naming it."""
        if code not in self.languages:
            known = ", ".join(self.languages) or "none: this model has no language tags"
            raise InputError(f"unknown language tag {code!r}; the model knows: {known}")
        return self.vocab_size - 1 - len(self.languages) + self.languages.index(code)

    def validate(self) -> None:
        super().validate()
        name = type(self).__name__
        if self.decoder_layers is not None:
            _check(isinstance(self.decoder_layers, int) and self.decoder_layers > 0, name, "decoder_layers",
                   self.decoder_layers, "must be a positive integer or None (as many as num_layers)")
        for flag in ("pooler", "mlm_head"):
            _check(not getattr(self, flag), name, flag, getattr(self, flag),
                   "must be false: an encoder–decoder has its LM head always and no pooler")
        _check(self.segment_vocab_size == 0, name, "segment_vocab_size", self.segment_vocab_size,
               "must be 0: an encoder–decoder has no segment embeddings")
        _check(self.num_languages == 0, name, "num_languages", self.num_languages,
               "must be 0: an encoder–decoder marks languages with tags (languages=...)")
        for field_name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                           "forced_bos_token_id"):
            value = getattr(self, field_name)
            if value is not None:
                _check(isinstance(value, int) and 0 <= value < self.vocab_size, name, field_name, value,
                       f"must be a token id below vocab_size={self.vocab_size}")
        if self.languages:
            _check(all(isinstance(c, str) and c for c in self.languages) and len(set(self.languages)) ==
                   len(self.languages), name, "languages", self.languages, "must list distinct language codes")
            tags = self.vocab_size - 1 - len(self.languages)
            _check(tags > max(self.pad_token_id, self.eos_token_id, self.bos_token_id or 0), name, "vocab_size",
                   self.vocab_size, f"leaves no room for {len(self.languages)} language tags and <mask> after the "
                   f"special tokens")


# family name -> its config class; filled by EncoderConfig subclasses as they are defined.
TEXT_CONFIGS: dict[str, type[EncoderConfig]] = {}


def text_config_class(family: Any, where: str = "") -> type[EncoderConfig]:
    """The config class of a text family, importing a built-in family's module on first use."""
    if isinstance(family, str) and family not in TEXT_CONFIGS:
        load_family_module(family)
    if family not in TEXT_CONFIGS:
        raise ConfigError(f"{where + ': ' if where else ''}unknown text family {family!r}; known families: "
                          f"{', '.join(sorted(TEXT_CONFIGS))}")
    return TEXT_CONFIGS[family]


def migrate_legacy_text(data: dict[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    """A text config from before families had names: one flat set of fields, the encoder kind
    in ``encoder`` ('transformer', 'lstm' or 'gru'). Returns its family and its fields in that
    family's layout."""
    family = "rnn" if data.get("encoder") in ("lstm", "gru") else "transformer"
    return family, text_config_class(family, where).migrate(data, where)


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
                   "needs a model with a pooler (TextConfig.pooler=true)")
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


def __getattr__(name: str):
    # TextConfig belongs to the transformer family's module; it is importable from here too.
    if name == "TextConfig":
        return text_config_class("transformer")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
