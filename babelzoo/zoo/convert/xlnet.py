"""XLNet: ``XLNetModel`` and ``XLNetLMHeadModel``.

The LM-head class prefixes the encoder with ``transformer.`` and keeps its head as ``lm_loss``
(the decoder, tied to ``word_embedding``, with its bias). Each layer's attention projections
are [d_model, n_head, d_head] tensors, babelzoo's layout too, so every key maps one to one.
babelzoo's XLNet is the fine-tuning configuration of Hugging Face's: bidirectional attention
(``attn_type='bi'``), no memory fed back, one relative encoding direction (``bi_data=false``).
``mem_len``/``reuse_len`` only say what Hugging Face caches; they change no output and are not
kept. Tokenizers are not converted: XLNet's sentencepiece tokenizer frames as ``X <sep> <cls>``
and pads on the left, which babelzoo's tokenizers do not, so a model is imported without it.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...errors import CheckpointError
from ..families.xlnet.config import XLNetConfig
from .hf_family import ACTIVATIONS_FROM_HF, ACTIVATIONS_TO_HF, HFFamily, hf_value
from .keymap import KeyMap

_ATTENTION = {"q": "query", "k": "key", "v": "value", "o": "output", "r": "position",
              "r_w_bias": "content_bias", "r_r_bias": "position_bias", "r_s_bias": "segment_bias",
              "seg_embed": "segment_embed"}

KEYS = KeyMap(
    base={
        "word_embedding.weight": "embeddings.word.weight",
        "mask_emb": "encoder.mask_embedding",
        **{f"layer.{{i}}.rel_attn.{hf}": f"encoder.layers.{{i}}.attention.{ours}" for hf, ours in _ATTENTION.items()},
        "layer.{i}.rel_attn.layer_norm.{p}": "encoder.layers.{i}.attention_norm.{p}",
        "layer.{i}.ff.layer_1.{p}": "encoder.layers.{i}.ffn.up.{p}",
        "layer.{i}.ff.layer_2.{p}": "encoder.layers.{i}.ffn.down.{p}",
        "layer.{i}.ff.layer_norm.{p}": "encoder.layers.{i}.ffn_norm.{p}",
    },
    mlm={"lm_loss.bias": "lm_head.bias"},
    decoder={"lm_loss.weight": "lm_head.decoder.weight"},
)

# XLNetConfig's defaults (transformers), used where a config.json leaves a field out.
DEFAULTS = dict(vocab_size=32000, d_model=1024, n_layer=24, n_head=16, d_inner=4096, ff_activation="gelu",
                attn_type="bi", initializer_range=0.02, layer_norm_eps=1e-12, dropout=0.1, bi_data=False,
                clamp_len=-1, pad_token_id=5)

# What babelzoo's XLNet is: a Hugging Face config with another value is an error naming it.
FIXED = dict(attn_type="bi", bi_data=False)


def text_from_hf(hf: Mapping[str, Any], where: str) -> dict:
    def get(name: str) -> Any:
        return hf_value(hf, DEFAULTS, name, where)

    unmet = [f"{name}={get(name)!r} (needs {value!r})" for name, value in FIXED.items() if get(name) != value]
    if hf.get("untie_r") is False:
        unmet.append("untie_r=False (needs True: one set of relative biases per layer)")
    if unmet:
        raise CheckpointError(f"{where}: babelzoo's XLNet is the bidirectional encoder: {', '.join(unmet)}")
    hidden, heads = get("d_model"), get("n_head")
    if hf.get("d_head") not in (None, hidden // heads):
        raise CheckpointError(f"{where}: d_head={hf['d_head']} must be d_model // n_head = {hidden // heads}")
    act = get("ff_activation")
    if act not in ACTIVATIONS_FROM_HF:
        raise CheckpointError(f"{where}: ff_activation={act!r} is not supported; supported: "
                              f"{', '.join(ACTIVATIONS_FROM_HF)}")
    dropout = float(get("dropout"))
    return dict(vocab_size=get("vocab_size"), hidden_size=hidden, num_layers=get("n_layer"), num_heads=heads,
                intermediate_size=get("d_inner"), activation=ACTIVATIONS_FROM_HF[act], dropout=dropout,
                attention_dropout=dropout, layer_norm_eps=float(get("layer_norm_eps")),
                pad_token_id=get("pad_token_id"), init_std=float(get("initializer_range")),
                clamp_len=int(get("clamp_len")))


def text_to_hf(text: XLNetConfig) -> dict:
    return {"vocab_size": text.vocab_size, "d_model": text.hidden_size, "n_layer": text.num_layers,
            "n_head": text.num_heads, "d_head": text.head_dim, "d_inner": text.intermediate_size,
            "ff_activation": ACTIVATIONS_TO_HF[text.activation], "dropout": text.dropout,
            "layer_norm_eps": text.layer_norm_eps, "initializer_range": text.init_std,
            "pad_token_id": text.pad_token_id, "clamp_len": text.clamp_len, "untie_r": True,
            "mem_len": None, "tie_word_embeddings": text.tie_word_embeddings, **FIXED}


FAMILY = HFFamily(
    name="xlnet", model_type="xlnet", keys=KEYS, prefix="transformer.",
    base_class="XLNetModel", mlm_class="XLNetLMHeadModel",
    classes=("XLNetModel", "XLNetLMHeadModel"),
    patterns=("xlnet", "xlnet_*"),
    defaults=DEFAULTS, text_from_hf=text_from_hf, text_to_hf=text_to_hf,
    required={"num_languages == 0": lambda t: t.num_languages == 0,
              "pooler is False": lambda t: not t.pooler},
    text_config=XLNetConfig,
)
