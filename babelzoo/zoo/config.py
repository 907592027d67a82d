"""Typed configuration of a model's text part: the base every sub-config shares (validation at
construction, exact JSON round trip, every mistake reported with its field), and
:class:`EncoderConfig`, from which each family's config derives::

    >>> TransformerConfig(hidden_size=100, num_heads=12)
    ConfigError: TransformerConfig.hidden_size=100 must be divisible by num_heads=12

A family's config lives with the family (:mod:`babelzoo.zoo.family`,
``babelzoo/zoo/families/<name>/config.py``); the whole model's config, one sub-config per part,
is :class:`~babelzoo.zoo.model_config.ModelConfig`.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Mapping, Optional

from ..errors import ConfigError, InputError
from ..typed import check_fields
from .family import load_family_module

__all__ = ["ConfigError", "EncoderConfig", "EncoderDecoderConfig", "text_config_class"]


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

    A family subclasses it with its own fields and a ``family`` name (``TransformerConfig`` is the
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

    def check_knowledge(self, knowledge: Any) -> None:
        """Refuse a knowledge part (a :class:`~babelzoo.zoo.model_config.KnowledgeConfig`) this
        family cannot build (checked by :class:`~babelzoo.zoo.model_config.ModelConfig`)."""
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
