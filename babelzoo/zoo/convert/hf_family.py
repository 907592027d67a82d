"""What a Hugging Face model family is to the converter: its key table, checkpoint layout and
config translation. One :class:`HFFamily` per module (``bert.py``, ``xlmr.py``, ``albert.py``)."""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Optional

from ...errors import CheckpointError
from ..config import ConfigError, EncoderConfig
from ..model_config import HeadConfig, ModelConfig
from ..families.transformer.config import TransformerConfig
from .keymap import KeyMap

# HF ``hidden_act`` → our activation. The tanh approximations are one function written three ways.
ACTIVATIONS_FROM_HF = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                       "gelu_fast": "gelu_tanh", "relu": "relu", "silu": "silu"}
ACTIVATIONS_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}

# Non-weight buffers that older transformers versions wrote into checkpoints (index tables that
# every model rebuilds itself): dropped by name, never by a loose filter.
BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


# What transformers' classification heads compute with ``problem_type`` unset or set to this: a
# softmax over the labels, which is what a babelzoo head is.
SINGLE_LABEL = "single_label_classification"


@dataclass(frozen=True)
class TaskClass:
    """A Hugging Face class with a task head (``BertForSequenceClassification``...) and the
    babelzoo head ``kind`` it holds. ``keys`` is its ``head`` key group (HF → ours, unprefixed);
    ``pooler`` says whether its encoder keeps the pooler; ``head`` lists the
    :class:`HeadConfig` fields the class fixes: import sets them, export requires them."""

    name: str
    kind: str
    keys: Mapping[object, str]
    pooler: bool
    head: Mapping[str, Any] = field(default_factory=dict)

    def unmet(self, config: ModelConfig) -> list[str]:
        """What ``config`` (a model with a head of ``kind``) lacks to be written as this class."""
        text, head = config.text, config.head
        needs = {
            "mlm_head=False (a task class holds no MLM head)": not text.mlm_head,
            f"pooler={self.pooler} ({self.name} {'reads the' if self.pooler else 'has no'} pooler)":
                text.pooler == self.pooler,
            f"head layer == -1, the last layer (is {head.layer})": head.layer in (-1, text.num_layers),
        }
        for name, value in self.head.items():
            needs[f"head {name} == {value!r} (is {getattr(head, name)!r})"] = getattr(head, name) == value
        return [need for need, ok in needs.items() if not ok]


@dataclass(frozen=True)
class HFFamily:
    """``name`` is the babelzoo architecture an import gets; ``patterns`` are the architecture
    names (wildcards) export recognises. ``heads_not_kept`` are key prefixes of pre-training
    heads that a babelzoo encoder does not hold (BERT's next-sentence classifier, ALBERT's
    sentence-order classifier): an objective owns such heads, so import drops them with a
    warning that names them. ``tied`` maps HF alias keys to the key they must equal.
    ``tasks`` are the fine-tuned classes that hold a babelzoo task head, one per head kind.
    ``text_config`` is the babelzoo text config class (family) the HF family maps to;
    ``tokenizer`` the kind of tokenizer babelzoo reads from its directories and the file that
    holds it (None: the model is imported without its tokenizer)."""

    #: an encoder checkpoint (the encoder–decoders' conversions set this True)
    encoder_decoder: ClassVar[bool] = False

    name: str
    model_type: str
    keys: KeyMap
    prefix: str
    base_class: str
    mlm_class: str
    classes: tuple[str, ...]
    patterns: tuple[str, ...]
    defaults: Mapping[str, Any]
    text_from_hf: Callable[[Mapping[str, Any], str], dict]
    text_to_hf: Callable[[EncoderConfig], dict]
    required: Mapping[str, Callable[[EncoderConfig], bool]]
    tied: Mapping[str, str] = field(default_factory=dict)
    heads_not_kept: tuple[str, ...] = ()
    buffers: tuple[str, ...] = BUFFERS
    tasks: tuple[TaskClass, ...] = ()
    text_config: type[EncoderConfig] = TransformerConfig
    tokenizer: Optional[tuple[str, str]] = None

    def matches(self, architecture: str) -> bool:
        return any(fnmatch.fnmatchcase(architecture, p) for p in self.patterns)

    def task_named(self, hf_class: str) -> Optional[TaskClass]:
        return next((t for t in self.tasks if t.name == hf_class), None)

    def task_for(self, kind: str) -> TaskClass:
        """The class that holds a head of ``kind``; none is an error listing those there are."""
        task = next((t for t in self.tasks if t.kind == kind), None)
        if task is None:
            known = ", ".join(f"{t.kind} ({t.name})" for t in self.tasks) or "none"
            raise CheckpointError(f"a {kind!r} head has no Hugging Face {self.model_type} class; heads it "
                                  f"can hold: {known}")
        return task

    def key_map(self, task: Optional[TaskClass]) -> KeyMap:
        """The family's table, with ``task``'s head group filled in."""
        return self.keys if task is None else dataclasses.replace(self.keys, head=task.keys)

    def hf_class(self, config: ModelConfig) -> str:
        """The class a model of ``config`` exports as."""
        if config.head is not None:
            return self.task_for(config.head.kind).name
        return self.mlm_class if config.text.mlm_head else self.base_class

    def word_key(self) -> str:
        return next(hf for hf, ours in self.keys.base.items() if ours == "embeddings.word.weight")


def hf_value(hf: Mapping[str, Any], defaults: Mapping[str, Any], name: str, where: str) -> Any:
    """A field of an HF config, falling back to the HF config class's default as transformers
    does; a field with neither is an error naming it."""
    if hf.get(name) is not None:
        return hf[name]
    if name in defaults:
        return defaults[name]
    raise CheckpointError(f"{where}: missing field {name!r}")


def common_text_from_hf(hf: Mapping[str, Any], defaults: Mapping[str, Any], where: str,
                        position_offset: int = 0) -> dict:
    """TransformerConfig fields shared by BERT-like families."""

    def get(name: str) -> Any:
        return hf_value(hf, defaults, name, where)

    act = get("hidden_act")
    if act not in ACTIVATIONS_FROM_HF:
        raise CheckpointError(f"{where}: hidden_act={act!r} is not supported; supported: "
                              f"{', '.join(ACTIVATIONS_FROM_HF)}")
    kind = hf.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise CheckpointError(f"{where}: position_embedding_type={kind!r} is not supported (only 'absolute')")
    for flag in ("is_decoder", "add_cross_attention"):
        if hf.get(flag):
            raise CheckpointError(f"{where}: {flag}=true is not supported: babelzoo imports encoders")
    max_positions = get("max_position_embeddings") - position_offset
    if max_positions <= 0:
        raise CheckpointError(f"{where}: max_position_embeddings={get('max_position_embeddings')} leaves no "
                              f"positions after the offset {position_offset}")
    return dict(vocab_size=get("vocab_size"), hidden_size=get("hidden_size"), num_layers=get("num_hidden_layers"),
                num_heads=get("num_attention_heads"), intermediate_size=get("intermediate_size"),
                max_positions=max_positions, position_offset=position_offset,
                segment_vocab_size=get("type_vocab_size"), activation=ACTIVATIONS_FROM_HF[act],
                dropout=float(get("hidden_dropout_prob")), attention_dropout=float(get("attention_probs_dropout_prob")),
                layer_norm_eps=float(get("layer_norm_eps")), pad_token_id=get("pad_token_id"),
                init_std=float(get("initializer_range")))


def common_text_to_hf(text: TransformerConfig) -> dict:
    return {"vocab_size": text.vocab_size, "hidden_size": text.hidden_size, "num_hidden_layers": text.num_layers,
            "num_attention_heads": text.num_heads, "intermediate_size": text.intermediate_size,
            "hidden_act": ACTIVATIONS_TO_HF[text.activation], "hidden_dropout_prob": text.dropout,
            "attention_probs_dropout_prob": text.attention_dropout,
            "max_position_embeddings": text.max_positions + text.position_offset,
            "type_vocab_size": text.segment_vocab_size, "initializer_range": text.init_std,
            "layer_norm_eps": text.layer_norm_eps, "pad_token_id": text.pad_token_id,
            "position_embedding_type": "absolute", "tie_word_embeddings": text.tie_word_embeddings}


# What every BERT-like family needs of a babelzoo text config to be exportable: field -> test.
COMMON_REQUIRED: dict[str, Callable[[TransformerConfig], bool]] = {
    "position_embedding == 'learned'": lambda t: t.position_embedding == "learned",
    "relative_attention == 'none'": lambda t: t.relative_attention == "none",
    "norm_position == 'post'": lambda t: t.norm_position == "post",
    "num_languages == 0": lambda t: t.num_languages == 0,
    "segment_vocab_size >= 1": lambda t: t.segment_vocab_size >= 1,
    "embedding_layer_norm": lambda t: t.embedding_layer_norm,
    "not causal": lambda t: not t.causal,
    "no pruned heads (layer_heads empty)": lambda t: not t.layer_heads,
}


def head_from_hf(hf: Mapping[str, Any], task: TaskClass, where: str) -> HeadConfig:
    """The :class:`HeadConfig` of a ``task`` checkpoint: labels from ``id2label`` in id order,
    ``classifier_dropout`` as the head's dropout, the fields ``task`` fixes."""
    problem = hf.get("problem_type")
    if problem not in (None, SINGLE_LABEL):
        raise CheckpointError(f"{where}: problem_type={problem!r} is not supported: babelzoo heads are "
                              f"single-label classifiers (problem_type null or {SINGLE_LABEL!r})")
    labels = _labels_from_hf(hf, where)
    if len(labels) < 2:
        raise CheckpointError(f"{where}: num_labels={len(labels)} is a regression head in transformers; "
                              f"babelzoo heads classify into two or more labels")
    dropout = hf.get("classifier_dropout")
    try:
        return HeadConfig(kind=task.kind, labels=labels, dropout=None if dropout is None else float(dropout),
                          **task.head)
    except ConfigError as err:
        raise CheckpointError(f"{where}: {err}") from None


def _labels_from_hf(hf: Mapping[str, Any], where: str) -> tuple[str, ...]:
    id2label = hf.get("id2label")
    if id2label is None:  # transformers' default: num_labels (2 unless set) labels named LABEL_i
        return tuple(f"LABEL_{i}" for i in range(int(hf.get("num_labels") or 2)))
    try:
        by_id = {int(k): v for k, v in id2label.items()}
    except (AttributeError, TypeError, ValueError):
        raise CheckpointError(f"{where}: id2label must map label ids 0, 1, ... to names, got {id2label!r}") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise CheckpointError(f"{where}: id2label ids {sorted(by_id)} must be 0 .. {len(by_id) - 1}")
    if hf.get("num_labels") is not None and hf["num_labels"] != len(by_id):
        raise CheckpointError(f"{where}: num_labels={hf['num_labels']} but id2label names {len(by_id)} labels")
    return tuple(by_id[i] for i in range(len(by_id)))


def head_to_hf(head: HeadConfig) -> dict:
    """The HF config fields of a task head (``freeze_encoder`` has no HF meaning and is dropped)."""
    return {"id2label": {str(i): label for i, label in enumerate(head.labels)},
            "label2id": {label: i for i, label in enumerate(head.labels)},
            "num_labels": head.num_labels, "classifier_dropout": head.dropout, "problem_type": SINGLE_LABEL}
