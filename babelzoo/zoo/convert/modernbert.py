"""ModernBERT (and mmBERT): ``ModernBertModel`` and ``ModernBertForMaskedLM``.

The masked-LM class prefixes the encoder with ``model.`` and keeps its head as ``head`` (dense
and norm, no biases) plus ``decoder`` (tied weight, own bias). The first layer has no attention
norm (``{j}``: layers 1 and up). Configs written by transformers 5 give the attention kind of
each layer (``layer_types``) and the rotary bases (``rope_parameters``); older ones give
``global_attn_every_n_layers``, ``global_rope_theta`` and ``local_rope_theta``. Export writes
both forms.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...errors import CheckpointError
from ..families.modernbert.config import ModernBertConfig
from .hf_family import ACTIVATIONS_FROM_HF, ACTIVATIONS_TO_HF, HFFamily, hf_value
from .keymap import KeyMap

KEYS = KeyMap(
    base={
        "embeddings.tok_embeddings.weight": "embeddings.word.weight",
        "embeddings.norm.weight": "embeddings.norm.weight",
        "layers.{j}.attn_norm.weight": "encoder.layers.{j}.attention_norm.weight",
        "layers.{i}.attn.Wqkv.weight": "encoder.layers.{i}.attention.qkv.weight",
        "layers.{i}.attn.Wo.weight": "encoder.layers.{i}.attention.out.weight",
        "layers.{i}.mlp_norm.weight": "encoder.layers.{i}.ffn_norm.weight",
        "layers.{i}.mlp.Wi.weight": "encoder.layers.{i}.ffn.up.weight",
        "layers.{i}.mlp.Wo.weight": "encoder.layers.{i}.ffn.down.weight",
        "final_norm.weight": "encoder.final_norm.weight",
    },
    mlm={
        "head.dense.weight": "lm_head.dense.weight",
        "head.norm.weight": "lm_head.norm.weight",
        "decoder.bias": "lm_head.bias",
    },
    decoder={"decoder.weight": "lm_head.decoder.weight"},
)

# ModernBertConfig's defaults (transformers), used where a config.json leaves a field out.
DEFAULTS = dict(vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
                num_attention_heads=12, hidden_activation="gelu", max_position_embeddings=8192,
                initializer_range=0.02, norm_eps=1e-5, pad_token_id=50283, attention_dropout=0.0,
                mlp_dropout=0.0, embedding_dropout=0.0, local_attention=128, global_attn_every_n_layers=3,
                global_rope_theta=160000.0, local_rope_theta=10000.0, classifier_activation="gelu")

# What babelzoo's ModernBERT is: a Hugging Face config with another value is an error naming it.
FIXED = dict(attention_bias=False, mlp_bias=False, norm_bias=False, classifier_bias=False, decoder_bias=True)


def _activation(hf: Mapping[str, Any], name: str, where: str) -> str:
    act = hf_value(hf, DEFAULTS, name, where)
    if act not in ACTIVATIONS_FROM_HF:
        raise CheckpointError(f"{where}: {name}={act!r} is not supported; supported: {', '.join(ACTIVATIONS_FROM_HF)}")
    return ACTIVATIONS_FROM_HF[act]


def _global_every(hf: Mapping[str, Any], layers: int, where: str) -> int:
    """The period of global layers, from ``layer_types`` when the config lists them."""
    kinds = hf.get("layer_types")
    if kinds is None:
        return int(hf_value(hf, DEFAULTS, "global_attn_every_n_layers", where))
    if len(kinds) != layers or set(kinds) - {"full_attention", "sliding_attention"}:
        raise CheckpointError(f"{where}: layer_types must list 'full_attention' or 'sliding_attention' for each of "
                              f"the {layers} layers, got {kinds!r}")
    for every in range(1, layers + 1):
        if all((kind == "full_attention") == (i % every == 0) for i, kind in enumerate(kinds)):
            return every
    raise CheckpointError(f"{where}: layer_types {kinds!r} is not a global layer every n layers from the first "
                          f"(the alternation babelzoo's ModernBERT builds)")


def _rope_theta(hf: Mapping[str, Any], kind: str, old_name: str, where: str) -> float:
    params = (hf.get("rope_parameters") or {}).get(kind)
    if params is None:
        return float(hf_value(hf, DEFAULTS, old_name, where))
    if params.get("rope_type", "default") != "default":
        raise CheckpointError(f"{where}: rope_parameters[{kind!r}].rope_type={params['rope_type']!r} is not "
                              f"supported (only 'default' rotary embeddings)")
    return float(params["rope_theta"])


def text_from_hf(hf: Mapping[str, Any], where: str) -> dict:
    def get(name: str) -> Any:
        return hf_value(hf, DEFAULTS, name, where)

    unmet = [f"{name}={hf.get(name)!r} (needs {value!r})" for name, value in FIXED.items()
             if hf.get(name, value) != value]
    if unmet:
        raise CheckpointError(f"{where}: babelzoo's ModernBERT has no biases but the decoder's: {', '.join(unmet)}")
    layers = get("num_hidden_layers")
    return dict(vocab_size=get("vocab_size"), hidden_size=get("hidden_size"), num_layers=layers,
                num_heads=get("num_attention_heads"), intermediate_size=get("intermediate_size"),
                max_positions=get("max_position_embeddings"), activation=_activation(hf, "hidden_activation", where),
                head_activation=_activation(hf, "classifier_activation", where),
                dropout=float(get("mlp_dropout")), attention_dropout=float(get("attention_dropout")),
                embedding_dropout=float(get("embedding_dropout")), layer_norm_eps=float(get("norm_eps")),
                pad_token_id=get("pad_token_id"), init_std=float(get("initializer_range")),
                global_every=_global_every(hf, layers, where), local_window=get("local_attention"),
                global_rope_theta=_rope_theta(hf, "full_attention", "global_rope_theta", where),
                local_rope_theta=_rope_theta(hf, "sliding_attention", "local_rope_theta", where))


def text_to_hf(text: ModernBertConfig) -> dict:
    kinds = ["full_attention" if text.is_global(i) else "sliding_attention" for i in range(text.num_layers)]
    return {"vocab_size": text.vocab_size, "hidden_size": text.hidden_size, "num_hidden_layers": text.num_layers,
            "num_attention_heads": text.num_heads, "intermediate_size": text.intermediate_size,
            "hidden_activation": ACTIVATIONS_TO_HF[text.activation],
            "classifier_activation": ACTIVATIONS_TO_HF[text.head_activation],
            "max_position_embeddings": text.max_positions, "initializer_range": text.init_std,
            "norm_eps": text.layer_norm_eps, "pad_token_id": text.pad_token_id,
            "attention_dropout": text.attention_dropout, "mlp_dropout": text.dropout,
            "embedding_dropout": text.embedding_dropout, "local_attention": text.local_window,
            "global_attn_every_n_layers": text.global_every, "layer_types": kinds,
            "global_rope_theta": text.global_rope_theta, "local_rope_theta": text.local_rope_theta,
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": text.global_rope_theta},
                                "sliding_attention": {"rope_type": "default", "rope_theta": text.local_rope_theta}},
            "tie_word_embeddings": text.tie_word_embeddings, **FIXED}


FAMILY = HFFamily(
    name="modernbert", model_type="modernbert", keys=KEYS, prefix="model.",
    base_class="ModernBertModel", mlm_class="ModernBertForMaskedLM",
    classes=("ModernBertModel", "ModernBertForMaskedLM"),
    patterns=("modernbert", "modernbert_*", "mmbert", "mmbert_*"),
    defaults=DEFAULTS, text_from_hf=text_from_hf, text_to_hf=text_to_hf,
    required={"segment_vocab_size == 0": lambda t: t.segment_vocab_size == 0,
              "num_languages == 0": lambda t: t.num_languages == 0,
              "pooler is False": lambda t: not t.pooler},
    text_config=ModernBertConfig,
)
