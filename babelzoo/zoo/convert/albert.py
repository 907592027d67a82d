"""ALBERT (Lan et al. 2020): ``AlbertModel``, ``AlbertForMaskedLM``, ``AlbertForPreTraining``.

Embeddings live in the small width E and are projected to H by the encoder's
``embedding_hidden_mapping_in`` (our ``embeddings.project``); all layers share the single block
``albert_layer_groups.0.albert_layers.0``; the MLM head maps H → E before the tied decoder.
"""

from __future__ import annotations

from ...errors import CheckpointError
from ..families.transformer.config import TransformerConfig
from .hf_family import COMMON_REQUIRED, HFFamily, common_text_from_hf, common_text_to_hf, hf_value
from .keymap import KeyMap

_BLOCK = "encoder.albert_layer_groups.0.albert_layers.0."

KEYS = KeyMap(
    base={
        "embeddings.word_embeddings.weight": "embeddings.word.weight",
        "embeddings.position_embeddings.weight": "embeddings.position.weight",
        "embeddings.token_type_embeddings.weight": "embeddings.segment.weight",
        "embeddings.LayerNorm.{p}": "embeddings.norm.{p}",
        "encoder.embedding_hidden_mapping_in.{p}": "embeddings.project.{p}",
        (_BLOCK + "attention.query.{p}", _BLOCK + "attention.key.{p}",
         _BLOCK + "attention.value.{p}"): "encoder.layers.0.attention.qkv.{p}",
        _BLOCK + "attention.dense.{p}": "encoder.layers.0.attention.out.{p}",
        _BLOCK + "attention.LayerNorm.{p}": "encoder.layers.0.attention_norm.{p}",
        _BLOCK + "ffn.{p}": "encoder.layers.0.ffn.up.{p}",
        _BLOCK + "ffn_output.{p}": "encoder.layers.0.ffn.down.{p}",
        _BLOCK + "full_layer_layer_norm.{p}": "encoder.layers.0.ffn_norm.{p}",
    },
    pooler={"pooler.{p}": "pooler.dense.{p}"},
    mlm={
        "predictions.dense.{p}": "lm_head.dense.{p}",
        "predictions.LayerNorm.{p}": "lm_head.norm.{p}",
        "predictions.bias": "lm_head.bias",
    },
    decoder={"predictions.decoder.weight": "lm_head.decoder.weight"},
)

DEFAULTS = dict(vocab_size=30000, embedding_size=128, hidden_size=4096, num_hidden_layers=12,
                num_hidden_groups=1, num_attention_heads=64, intermediate_size=16384, inner_group_num=1,
                hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
                layer_norm_eps=1e-12, pad_token_id=0)


def text_from_hf(hf, where: str) -> dict:
    for name in ("num_hidden_groups", "inner_group_num"):
        value = hf_value(hf, DEFAULTS, name, where)
        if value != 1:
            raise CheckpointError(f"{where}: {name}={value} is not supported: babelzoo shares one block "
                                  f"across all layers (num_hidden_groups=1, inner_group_num=1)")
    embedding = hf_value(hf, DEFAULTS, "embedding_size", where)
    text = common_text_from_hf(hf, DEFAULTS, where)
    if embedding == text["hidden_size"]:
        raise CheckpointError(f"{where}: embedding_size == hidden_size == {embedding} is not supported: "
                              f"babelzoo projects embeddings only when E differs from H")
    return {**text, "embedding_size": embedding, "share_layers": True}


def text_to_hf(text: TransformerConfig) -> dict:
    return {**common_text_to_hf(text), "embedding_size": text.embedding_dim, "num_hidden_groups": 1,
            "inner_group_num": 1, "bos_token_id": 2, "eos_token_id": 3}


FAMILY = HFFamily(
    name="albert", model_type="albert", keys=KEYS, prefix="albert.",
    base_class="AlbertModel", mlm_class="AlbertForMaskedLM",
    classes=("AlbertModel", "AlbertForMaskedLM", "AlbertForPreTraining"),
    patterns=("albert", "albert_*"),
    defaults=DEFAULTS, text_from_hf=text_from_hf, text_to_hf=text_to_hf,
    required={**COMMON_REQUIRED,
              "embedding_size set and different from hidden_size": lambda t: t.embedding_dim != t.hidden_size,
              "share_layers is True": lambda t: t.share_layers,
              "position_offset == 0": lambda t: t.position_offset == 0},
    tied={"predictions.decoder.bias": "predictions.bias"},
    heads_not_kept=("sop_classifier.",),
    tokenizer=("sentencepiece", "spiece.model"),
)
