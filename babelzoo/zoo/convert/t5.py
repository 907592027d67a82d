"""T5 (``T5ForConditionalGeneration``): pre-norm blocks with RMSNorm and no biases, a relative
bias table in the first self-attention layer of each stack, ``shared`` word embeddings
(``embed_tokens`` of both stacks and a tied ``lm_head`` are aliases of it). Each block is a list
of sublayers: ``layer.0`` self-attention, ``layer.1`` cross-attention (decoder) and the last one
the feed-forward (``wi``/``wo``; ``wi_0``/``wi_1`` for the gated T5 v1.1 form)."""

from __future__ import annotations

from typing import Any, Mapping

from ...errors import CheckpointError
from ..families.seq2seq.config import Seq2SeqConfig
from .hf_family import ACTIVATIONS_FROM_HF, ACTIVATIONS_TO_HF, hf_value
from .seq2seq_family import Seq2SeqFamily


def _self_attention() -> dict:
    return {
        ("block.{i}.layer.0.SelfAttention.q.weight", "block.{i}.layer.0.SelfAttention.k.weight",
         "block.{i}.layer.0.SelfAttention.v.weight"): "layers.{i}.attention.qkv.weight",
        "block.{i}.layer.0.SelfAttention.o.weight": "layers.{i}.attention.out.weight",
        "block.{i}.layer.0.layer_norm.weight": "layers.{i}.attention_norm.weight",
        "block.0.layer.0.SelfAttention.relative_attention_bias.weight": "relative_bias.embedding.weight",
        "final_layer_norm.weight": "final_norm.weight",
    }


def _ffn(index: int, gated: bool) -> dict:
    ffn = f"block.{{i}}.layer.{index}"
    up = ((f"{ffn}.DenseReluDense.wi_0.weight", f"{ffn}.DenseReluDense.wi_1.weight") if gated
          else f"{ffn}.DenseReluDense.wi.weight")
    return {up: "layers.{i}.ffn.up.weight", f"{ffn}.DenseReluDense.wo.weight": "layers.{i}.ffn.down.weight",
            f"{ffn}.layer_norm.weight": "layers.{i}.ffn_norm.weight"}


CROSS = {
    "block.{i}.layer.1.EncDecAttention.q.weight": "layers.{i}.cross_attention.query.weight",
    ("block.{i}.layer.1.EncDecAttention.k.weight",
     "block.{i}.layer.1.EncDecAttention.v.weight"): "layers.{i}.cross_attention.kv.weight",
    "block.{i}.layer.1.EncDecAttention.o.weight": "layers.{i}.cross_attention.out.weight",
    "block.{i}.layer.1.layer_norm.weight": "layers.{i}.cross_norm.weight",
}


def encoder_keys(text: Seq2SeqConfig) -> dict:
    return {**_self_attention(), **_ffn(1, text.gated)}


def decoder_keys(text: Seq2SeqConfig) -> dict:
    return {**_self_attention(), **CROSS, **_ffn(2, text.gated)}


# T5Config's defaults, used where a config.json leaves a field out.
DEFAULTS = dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
                relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.1,
                layer_norm_epsilon=1e-6, initializer_factor=1.0, feed_forward_proj="relu", pad_token_id=0,
                eos_token_id=1, decoder_start_token_id=0, n_positions=512)


def text_from_hf(hf: Mapping[str, Any], where: str) -> dict:
    def get(name: str) -> Any:
        return hf_value(hf, DEFAULTS, name, where)

    d_model, heads = get("d_model"), get("num_heads")
    if get("d_kv") * heads != d_model:
        raise CheckpointError(f"{where}: d_kv={get('d_kv')} × num_heads={heads} != d_model={d_model}; babelzoo's "
                              f"heads split d_model evenly")
    proj = get("feed_forward_proj")
    gated = proj.startswith("gated-")
    act = "gelu_new" if proj == "gated-gelu" else proj.removeprefix("gated-")
    if act not in ACTIVATIONS_FROM_HF:
        raise CheckpointError(f"{where}: feed_forward_proj={proj!r} is not supported; supported: relu, gelu, "
                              f"gated-gelu, gated-silu")
    scaled_output = hf.get("tie_word_embeddings", True) is not False  # transformers' rule for T5
    decoder_layers = hf.get("num_decoder_layers")
    dropout = float(get("dropout_rate"))
    return dict(vocab_size=get("vocab_size"), hidden_size=d_model, num_layers=get("num_layers"),
                decoder_layers=get("num_layers") if decoder_layers is None else decoder_layers, num_heads=heads,
                intermediate_size=get("d_ff"), max_positions=get("n_positions"), activation=ACTIVATIONS_FROM_HF[act],
                gated=gated, dropout=dropout, attention_dropout=dropout,
                layer_norm_eps=float(get("layer_norm_epsilon")),
                relative_buckets=get("relative_attention_num_buckets"),
                relative_max_distance=get("relative_attention_max_distance"), pad_token_id=get("pad_token_id"),
                eos_token_id=get("eos_token_id"), decoder_start_token_id=get("decoder_start_token_id"),
                scale_decoder_output=scaled_output, tie_word_embeddings=True)


def text_to_hf(text: Seq2SeqConfig) -> dict:
    act = ACTIVATIONS_TO_HF[text.activation]
    proj = ("gated-gelu" if act == "gelu_new" else f"gated-{act}") if text.gated else act
    return {"vocab_size": text.vocab_size, "d_model": text.hidden_size, "d_kv": text.head_dim,
            "d_ff": text.intermediate_size, "num_layers": text.num_layers,
            "num_decoder_layers": text.num_decoder_layers, "num_heads": text.num_heads,
            "relative_attention_num_buckets": text.relative_buckets,
            "relative_attention_max_distance": text.relative_max_distance, "dropout_rate": text.dropout,
            "layer_norm_epsilon": text.layer_norm_eps, "feed_forward_proj": proj, "n_positions": text.max_positions,
            "pad_token_id": text.pad_token_id, "eos_token_id": text.eos_token_id,
            "decoder_start_token_id": text.decoder_start_token_id, "tie_word_embeddings": text.scale_decoder_output,
            "is_encoder_decoder": True}


T5 = Seq2SeqFamily(
    name="t5", model_type="t5", hf_class="T5ForConditionalGeneration",
    encoder=encoder_keys, decoder=decoder_keys, top={"shared.weight": "word.weight"}, final_norm={},
    stack_prefix="", aliases=("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"),
    untied_head={"lm_head.weight": "lm_head.weight"},
    text_from_hf=text_from_hf, text_to_hf=text_to_hf,
    fixed=dict(norm_position="pre", norm="rms", bias=False, position_embedding="none", position_offset=0,
               relative_attention="t5", embedding_layer_norm=False, final_layer_norm=True, scaled_attention=False,
               logits_bias=False, scale_embedding=False, bos_token_id=None, tie_word_embeddings=True),
)
