"""BART (``BartForConditionalGeneration``) and mBART (``MBartForConditionalGeneration``).

The encoder and the decoder sit under ``model.encoder.`` and ``model.decoder.``; the word
embedding is ``model.shared`` (``embed_tokens`` of both stacks and ``lm_head`` are aliases of it);
``final_logits_bias`` is a [1, V] buffer added to the logits. Separate q/k/v projections become
our fused ``qkv`` (self-attention) and ``kv`` (cross-attention). mBART is BART pre-LN with a
``layer_norm`` after each stack and embeddings scaled by √d_model.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...errors import CheckpointError
from ..families.seq2seq.config import Seq2SeqConfig
from .hf_family import ACTIVATIONS_FROM_HF, ACTIVATIONS_TO_HF, hf_value
from .seq2seq_family import Seq2SeqFamily, differing_sides

_ATTENTION = {
    ("layers.{i}.self_attn.q_proj.{p}", "layers.{i}.self_attn.k_proj.{p}",
     "layers.{i}.self_attn.v_proj.{p}"): "layers.{i}.attention.qkv.{p}",
    "layers.{i}.self_attn.out_proj.{p}": "layers.{i}.attention.out.{p}",
    "layers.{i}.self_attn_layer_norm.{p}": "layers.{i}.attention_norm.{p}",
    "layers.{i}.fc1.{p}": "layers.{i}.ffn.up.{p}",
    "layers.{i}.fc2.{p}": "layers.{i}.ffn.down.{p}",
    "layers.{i}.final_layer_norm.{p}": "layers.{i}.ffn_norm.{p}",
    "embed_positions.weight": "position.weight",
    "layernorm_embedding.{p}": "embedding_norm.{p}",
}
ENCODER = dict(_ATTENTION)
DECODER = {
    **_ATTENTION,
    "layers.{i}.encoder_attn.q_proj.{p}": "layers.{i}.cross_attention.query.{p}",
    ("layers.{i}.encoder_attn.k_proj.{p}", "layers.{i}.encoder_attn.v_proj.{p}"): "layers.{i}.cross_attention.kv.{p}",
    "layers.{i}.encoder_attn.out_proj.{p}": "layers.{i}.cross_attention.out.{p}",
    "layers.{i}.encoder_attn_layer_norm.{p}": "layers.{i}.cross_norm.{p}",
}
FINAL_NORM = {"layer_norm.{p}": "final_norm.{p}"}  # mBART only
TOP = {"model.shared.weight": "word.weight", "final_logits_bias": "final_logits_bias"}

# BartConfig's defaults (MBartConfig's are the same), used where a config.json leaves a field out.
DEFAULTS = dict(vocab_size=50265, max_position_embeddings=1024, encoder_layers=12, encoder_ffn_dim=4096,
                encoder_attention_heads=16, decoder_layers=12, decoder_ffn_dim=4096, decoder_attention_heads=16,
                activation_function="gelu", d_model=1024, dropout=0.1, attention_dropout=0.0,
                activation_dropout=0.0, init_std=0.02, scale_embedding=False, pad_token_id=1, bos_token_id=0,
                eos_token_id=2, decoder_start_token_id=2)


def text_from_hf(hf: Mapping[str, Any], where: str, pre_norm: bool) -> dict:
    def get(name: str) -> Any:
        return hf_value(hf, DEFAULTS, name, where)

    differing_sides(hf, DEFAULTS, where, ("encoder_attention_heads", "decoder_attention_heads"),
                    ("encoder_ffn_dim", "decoder_ffn_dim"))
    act = get("activation_function")
    if act not in ACTIVATIONS_FROM_HF:
        raise CheckpointError(f"{where}: activation_function={act!r} is not supported; supported: "
                              f"{', '.join(ACTIVATIONS_FROM_HF)}")
    start = hf.get("decoder_start_token_id")
    return dict(vocab_size=get("vocab_size"), hidden_size=get("d_model"), num_layers=get("encoder_layers"),
                decoder_layers=get("decoder_layers"), num_heads=get("encoder_attention_heads"),
                intermediate_size=get("encoder_ffn_dim"), max_positions=get("max_position_embeddings"),
                activation=ACTIVATIONS_FROM_HF[act], dropout=float(get("dropout")),
                attention_dropout=float(get("attention_dropout")), init_std=float(get("init_std")),
                scale_embedding=bool(get("scale_embedding")), pad_token_id=get("pad_token_id"),
                bos_token_id=hf.get("bos_token_id", DEFAULTS["bos_token_id"]), eos_token_id=get("eos_token_id"),
                decoder_start_token_id=get("eos_token_id") if start is None else start,
                forced_bos_token_id=hf.get("forced_bos_token_id"),
                norm_position="pre" if pre_norm else "post", final_layer_norm=pre_norm,
                tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)))


def text_to_hf(text: Seq2SeqConfig) -> dict:
    return {"vocab_size": text.vocab_size, "d_model": text.hidden_size, "encoder_layers": text.num_layers,
            "decoder_layers": text.num_decoder_layers, "encoder_attention_heads": text.num_heads,
            "decoder_attention_heads": text.num_heads, "encoder_ffn_dim": text.intermediate_size,
            "decoder_ffn_dim": text.intermediate_size, "max_position_embeddings": text.max_positions,
            "activation_function": ACTIVATIONS_TO_HF[text.activation], "dropout": text.dropout,
            "attention_dropout": text.attention_dropout, "activation_dropout": 0.0, "init_std": text.init_std,
            "scale_embedding": text.scale_embedding, "pad_token_id": text.pad_token_id,
            "bos_token_id": text.bos_token_id, "eos_token_id": text.eos_token_id,
            "decoder_start_token_id": text.decoder_start_token_id, "forced_bos_token_id": text.forced_bos_token_id,
            "forced_eos_token_id": None, "tie_word_embeddings": text.tie_word_embeddings,
            "is_encoder_decoder": True}


# What babelzoo's config must be for each layout: field -> value.
_SHARED = dict(norm="layer", bias=True, gated=False, position_embedding="learned", position_offset=2,
               relative_attention="none", embedding_layer_norm=True, scaled_attention=True, logits_bias=True,
               scale_decoder_output=False, layer_norm_eps=1e-5)

def _family(name: str, hf_class: str, pre_norm: bool) -> Seq2SeqFamily:
    return Seq2SeqFamily(
        name=name, model_type=name, hf_class=hf_class,
        encoder=ENCODER, decoder=DECODER, top=TOP, final_norm=FINAL_NORM, stack_prefix="model.",
        aliases=("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"),
        untied_head={"lm_head.weight": "lm_head.weight"},
        text_from_hf=lambda hf, where: text_from_hf(hf, where, pre_norm), text_to_hf=text_to_hf,
        fixed={**_SHARED, "norm_position": "pre" if pre_norm else "post", "final_layer_norm": pre_norm},
    )


BART = _family("bart", "BartForConditionalGeneration", pre_norm=False)
MBART = _family("mbart", "MBartForConditionalGeneration", pre_norm=True)
