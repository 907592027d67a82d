"""What a Hugging Face model family is to the converter: its key table, checkpoint layout and
config translation. One :class:`Family` per module (``bert.py``, ``xlmr.py``, ``albert.py``)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..config import TextConfig
from ..pretrained import CheckpointError
from .keymap import KeyMap

# HF ``hidden_act`` → our activation. The tanh approximations are one function written three ways.
ACTIVATIONS_FROM_HF = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                       "gelu_fast": "gelu_tanh", "relu": "relu"}
ACTIVATIONS_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}

# Non-weight buffers that older transformers versions wrote into checkpoints (index tables that
# every model rebuilds itself): dropped by name, never by a loose filter.
BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


@dataclass(frozen=True)
class Family:
    """``name`` is the babelzoo architecture an import gets; ``patterns`` are the architecture
    names (wildcards) export recognises. ``heads_not_kept`` are key prefixes of pre-training
    heads that a babelzoo encoder does not hold (BERT's next-sentence classifier, ALBERT's
    sentence-order classifier): an objective owns such heads, so import drops them with a
    warning that names them. ``tied`` maps HF alias keys to the key they must equal."""

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
    text_to_hf: Callable[[TextConfig], dict]
    required: Mapping[str, Callable[[TextConfig], bool]]
    tied: Mapping[str, str] = field(default_factory=dict)
    heads_not_kept: tuple[str, ...] = ()
    buffers: tuple[str, ...] = BUFFERS

    def matches(self, architecture: str) -> bool:
        return any(fnmatch.fnmatchcase(architecture, p) for p in self.patterns)

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
    """TextConfig fields shared by BERT-like families."""

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


def common_text_to_hf(text: TextConfig) -> dict:
    return {"vocab_size": text.vocab_size, "hidden_size": text.hidden_size, "num_hidden_layers": text.num_layers,
            "num_attention_heads": text.num_heads, "intermediate_size": text.intermediate_size,
            "hidden_act": ACTIVATIONS_TO_HF[text.activation], "hidden_dropout_prob": text.dropout,
            "attention_probs_dropout_prob": text.attention_dropout,
            "max_position_embeddings": text.max_positions + text.position_offset,
            "type_vocab_size": text.segment_vocab_size, "initializer_range": text.init_std,
            "layer_norm_eps": text.layer_norm_eps, "pad_token_id": text.pad_token_id,
            "position_embedding_type": "absolute", "tie_word_embeddings": text.tie_word_embeddings}


# What every BERT-like family needs of a babelzoo text config to be exportable: field -> test.
COMMON_REQUIRED: dict[str, Callable[[TextConfig], bool]] = {
    "encoder == 'transformer'": lambda t: t.encoder == "transformer",
    "position_embedding == 'learned'": lambda t: t.position_embedding == "learned",
    "relative_attention == 'none'": lambda t: t.relative_attention == "none",
    "norm_position == 'post'": lambda t: t.norm_position == "post",
    "num_languages == 0": lambda t: t.num_languages == 0,
    "segment_vocab_size >= 1": lambda t: t.segment_vocab_size >= 1,
    "embedding_layer_norm": lambda t: t.embedding_layer_norm,
    "not causal": lambda t: not t.causal,
}
