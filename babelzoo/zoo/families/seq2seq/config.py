"""The encoder–decoder family's config and zoo entries: BART, mBART and T5 as switches of one
Transformer encoder–decoder (:mod:`babelzoo.zoo.families.seq2seq.model` holds the modules).

Post-LN (BART) or pre-LN (mBART, T5) blocks, LayerNorm or RMSNorm, with or without biases,
learned positions with BART's offset of 2 or T5's bucketed relative bias, a word embedding shared
by the encoder, the decoder and the LM head, and mBART's language tags at the end of the
vocabulary. ``*_base`` entries follow the published sizes; ``*_tiny`` entries keep every switch
of their model at a size that trains in seconds on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from ...config import EncoderDecoderConfig
from ...model_config import ModelConfig
from ...entries import TINY, register_model
from ...family import TextFamily, register_family

# mBART-50's language codes (Tang et al. 2020), in vocabulary order.
MBART50_LANGUAGES = (
    "ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN", "hi_IN", "it_IT", "ja_XX",
    "kk_KZ", "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP", "nl_XX", "ro_RO", "ru_RU", "si_LK", "tr_TR", "vi_VN",
    "zh_CN", "af_ZA", "az_AZ", "bn_IN", "fa_IR", "he_IL", "hr_HR", "id_ID", "ka_GE", "km_KH", "mk_MK", "ml_IN",
    "mn_MN", "mr_IN", "pl_PL", "ps_AF", "pt_XX", "sv_SE", "sw_KE", "ta_IN", "te_IN", "th_TH", "tl_XX", "uk_UA",
    "ur_PK", "xh_ZA", "gl_ES", "sl_SI")


@dataclass(frozen=True)
class Seq2SeqConfig(EncoderDecoderConfig):
    """A Transformer encoder–decoder: :class:`EncoderDecoderConfig`'s widths (both stacks) and
    generation ids plus its switches.

    ``norm_position`` post (BART) or pre (mBART, T5); ``norm`` LayerNorm or RMSNorm (T5);
    ``bias=False`` drops every projection's bias (T5); ``gated`` a GLU feed-forward (T5 v1.1);
    ``position_embedding`` learned absolute positions, looked up at ``position + position_offset``
    (BART's offset of 2), or none; ``relative_attention='t5'`` adds T5's bucketed bias
    (bidirectional in the encoder, causal in the decoder); ``embedding_layer_norm`` normalises the
    embeddings (BART), ``final_layer_norm`` each stack's output (mBART, T5);
    ``scale_embedding`` multiplies the word embeddings by √H (mBART); ``scaled_attention=False``
    leaves q·kᵀ unscaled (T5); ``logits_bias`` adds BART's final logits bias;
    ``scale_decoder_output`` multiplies the decoder's output by H^-1/2 before the tied LM head
    (T5). ``max_positions`` bounds the source and the target length alike.
    """

    family: ClassVar[str] = "seq2seq"

    vocab_size: int = 50265
    max_positions: int = 1024
    attention_dropout: float = 0.0
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1

    norm_position: str = "post"
    norm: str = "layer"
    bias: bool = True
    gated: bool = False
    position_embedding: str = "learned"
    position_offset: int = 2
    relative_attention: str = "none"
    relative_buckets: int = 32
    relative_max_distance: int = 128
    embedding_layer_norm: bool = True
    final_layer_norm: bool = False
    scale_embedding: bool = False
    scaled_attention: bool = True
    logits_bias: bool = True
    scale_decoder_output: bool = False

    _choices: ClassVar = {
        **EncoderDecoderConfig._choices,
        "norm_position": ("post", "pre"),
        "norm": ("layer", "rms"),
        "position_embedding": ("learned", "none"),
        "relative_attention": ("none", "t5"),
    }
    _positive: ClassVar = EncoderDecoderConfig._positive + ("relative_buckets", "relative_max_distance")
    _non_negative: ClassVar = EncoderDecoderConfig._non_negative + ("position_offset",)

    @property
    def attention_scale(self) -> Optional[float]:
        """What multiplies q·kᵀ: None for 1/√d, 1.0 for T5."""
        return None if self.scaled_attention else 1.0

    def encoder_flops_per_token(self, seq_len: int) -> float:
        """Per encoder layer: 2·4H² for the QKV and output projections, 2·2HI for the
        feed-forward (2·3HI gated) and 2·2·L·H for the scores and the weighted sum."""
        h, inner = self.hidden_size, self.intermediate_size
        ffn = (6 if self.gated else 4) * h * inner
        return float(self.num_layers * (8 * h * h + ffn + 4 * seq_len * h))


FAMILY = register_family(TextFamily("seq2seq", Seq2SeqConfig, build="babelzoo.zoo.families.seq2seq.model:build",
                                    encoder="babelzoo.zoo.families.seq2seq.model:build_encoder",
                                    model="babelzoo.zoo.families.seq2seq.model:Seq2SeqModel",
                                    hf=("babelzoo.zoo.convert.bart:BART", "babelzoo.zoo.convert.bart:MBART",
                                        "babelzoo.zoo.convert.t5:T5")))


def _tiny(config: ModelConfig, **extra) -> ModelConfig:
    return config.override(**{**TINY, **extra})


# --- BART --------------------------------------------------------------------------------------

@register_model
def bart_base() -> ModelConfig:
    """BART (Lewis et al. 2020, "BART: Denoising Sequence-to-Sequence Pre-training for Natural
    Language Generation, Translation, and Comprehension"): a post-LN Transformer encoder–decoder,
    6+6 layers, hidden 768, learned positions offset by 2, LayerNorm on the embeddings, one word
    embedding shared by encoder, decoder and LM head plus a final logits bias, GELU; byte-level
    BPE vocabulary of 50,265. Generation starts with </s> and forces <s> next, as the released
    checkpoints do."""
    return ModelConfig(text=Seq2SeqConfig(hidden_size=768, num_layers=6, num_heads=12, intermediate_size=3072,
                                          forced_bos_token_id=0))


@register_model
def bart_tiny() -> ModelConfig:
    """BART's layout (post-LN, offset learned positions, shared embeddings, logits bias) at tiny
    size (2+2 layers, width 128)."""
    return _tiny(bart_base())


# --- mBART -------------------------------------------------------------------------------------

@register_model
def mbart_base() -> ModelConfig:
    """mBART (Liu et al. 2020, "Multilingual Denoising Pre-training for Neural Machine
    Translation"; mBART-50: Tang et al. 2020, "Multilingual Translation with Extensible
    Multilingual Pretraining and Finetuning"): BART pre-LN, with a final LayerNorm on each stack
    and word embeddings scaled by √H, 12+12 layers, hidden 1024 (the one published size), a
    250,054-piece sentencepiece vocabulary ending in 52 language tags and <mask>. A source is
    ``[src_lang] X </s>``; the decoder starts with </s> and its first token is forced to the
    target language's tag (``generate(..., target_language="de_DE")``)."""
    return ModelConfig(text=Seq2SeqConfig(vocab_size=250054, hidden_size=1024, num_layers=12, num_heads=16,
                                          intermediate_size=4096, norm_position="pre", final_layer_norm=True,
                                          scale_embedding=True, languages=MBART50_LANGUAGES))


@register_model
def mbart_tiny() -> ModelConfig:
    """mBART's layout (pre-LN, final norms, scaled embeddings, language tags before <mask>) at
    tiny size, with four language tags (en_XX, de_DE, fr_XX, ro_RO)."""
    return _tiny(mbart_base(), languages=("en_XX", "de_DE", "fr_XX", "ro_RO"))


# --- T5 ----------------------------------------------------------------------------------------

@register_model
def t5_base() -> ModelConfig:
    """T5 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
    Text-to-Text Transformer"): pre-norm blocks with RMSNorm (eps 1e-6) and no biases, no
    absolute positions but a bucketed relative bias (32 buckets up to distance 128, computed by
    the first layer and shared by all), unscaled attention, ReLU feed-forward, 12+12 layers,
    hidden 768, 32,128-piece sentencepiece vocabulary; the tied LM head reads the decoder's
    output scaled by H^-1/2. The decoder starts with <pad> (id 0); </s> is id 1."""
    return ModelConfig(text=Seq2SeqConfig(vocab_size=32128, hidden_size=768, num_layers=12, num_heads=12,
                                          intermediate_size=3072, max_positions=512, activation="relu",
                                          attention_dropout=0.1, layer_norm_eps=1e-6, pad_token_id=0,
                                          norm_position="pre", norm="rms", bias=False, position_embedding="none",
                                          position_offset=0, relative_attention="t5", embedding_layer_norm=False,
                                          final_layer_norm=True, scaled_attention=False, logits_bias=False,
                                          scale_decoder_output=True, bos_token_id=None, eos_token_id=1,
                                          decoder_start_token_id=0))


@register_model
def t5_tiny() -> ModelConfig:
    """T5's layout (RMSNorm, no biases, relative buckets, unscaled attention) at tiny size."""
    return _tiny(t5_base())
