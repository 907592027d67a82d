"""The ModernBERT family's config and zoo entries (:mod:`babelzoo.zoo.families.modernbert.model` holds the
modules).

ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer: A Modern Bidirectional
Encoder for Fast, Memory Efficient, and Long Context Finetuning and Inference"): pre-LN blocks
without biases, rotary positions instead of position embeddings, GeGLU feed-forwards, and
attention that alternates between global layers (every ``global_every``-th, from the first) and
local layers that see ``local_window // 2`` tokens either side, each kind with its own rotary
base. mmBERT (Marone et al. 2025, "mmBERT: A Modern Multilingual Encoder with Annealed Language
Learning") is the same architecture over Gemma 2's 256k-piece vocabulary, trained on 1,800+
languages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...config import EncoderConfig, _check
from ...model_config import ModelConfig
from ...entries import TINY, register_model
from ...family import TextFamily, register_family


@dataclass(frozen=True)
class ModernBertConfig(EncoderConfig):
    """:class:`EncoderConfig`'s fields (``dropout`` is the feed-forward's, ``attention_dropout``
    applies to the attention probabilities and output) plus ModernBERT's own: the alternation
    of global and local attention, the local window (its full span, Hugging Face's
    ``local_attention``), the rotary bases, the embedding dropout and the MLM head's
    activation. ModernBERT has no segment embeddings and no pooler."""

    family: ClassVar[str] = "modernbert"

    vocab_size: int = 50368
    num_layers: int = 22
    intermediate_size: int = 1152
    max_positions: int = 8192
    segment_vocab_size: int = 0
    dropout: float = 0.0
    attention_dropout: float = 0.0
    layer_norm_eps: float = 1e-5
    pooler: bool = False
    pad_token_id: int = 50283

    global_every: int = 3
    local_window: int = 128
    global_rope_theta: float = 160000.0
    local_rope_theta: float = 10000.0
    embedding_dropout: float = 0.0
    head_activation: str = "gelu"

    _choices: ClassVar = {**EncoderConfig._choices, "head_activation": EncoderConfig._choices["activation"]}
    _positive: ClassVar = EncoderConfig._positive + ("global_every", "local_window")
    _probabilities: ClassVar = EncoderConfig._probabilities + ("embedding_dropout",)

    def validate(self) -> None:
        super().validate()
        name = type(self).__name__
        _check(self.head_dim % 2 == 0, name, "hidden_size", self.hidden_size,
               f"must give an even head dimension for rotary positions (num_heads={self.num_heads})")
        for field in ("global_rope_theta", "local_rope_theta"):
            _check(getattr(self, field) > 1, name, field, getattr(self, field), "must be greater than 1")

    def is_global(self, layer: int) -> bool:
        """Does ``layer`` attend globally? (Layers 0, g, 2g, ...; the others locally.)"""
        return layer % self.global_every == 0

    def encoder_flops_per_token(self, seq_len: int) -> float:
        """Per layer 2·(3H² + H²) for the projections, 2·3HI for the GeGLU (its up projection is
        2I wide) and 2·2·K·H for attention over K keys: K = L in global layers,
        min(L, local_window + 1) in local ones."""
        h = self.hidden_size
        dense = 2 * (4 * h * h) + 2 * (3 * h * self.intermediate_size)
        keys = [seq_len if self.is_global(i) else min(seq_len, self.local_window + 1) for i in range(self.num_layers)]
        return float(self.num_layers * dense + sum(4 * k * h for k in keys))


FAMILY = register_family(TextFamily("modernbert", ModernBertConfig, build="babelzoo.zoo.families.modernbert.model:build",
                                    encoder="babelzoo.zoo.families.modernbert.model:ModernBertEncoder",
                                    hf=("babelzoo.zoo.convert.modernbert:FAMILY",)))


@register_model
def modernbert_base() -> ModelConfig:
    """ModernBERT-base (Warner et al. 2024): 22 pre-LN layers, hidden 768, 12 heads, GeGLU
    feed-forward 1152, no biases, rotary positions (base 160,000 in the global layers, 10,000 in
    the local ones), global attention every third layer and a 128-token local window
    elsewhere, 8,192 positions, a 50,368-piece English/code BPE vocabulary. Weights are not
    bundled: import a Hugging Face checkpoint with ``babelzoo convert --from-hf``."""
    return ModelConfig(text=ModernBertConfig())


@register_model
def modernbert_tiny() -> ModelConfig:
    """ModernBERT's layout (rotary, GeGLU, no biases, global/local alternation) at tiny size:
    3 layers so that one global layer is followed by two local ones, a 32-token window."""
    return modernbert_base().override(**{**TINY, "num_layers": 3, "pad_token_id": 0}, local_window=32)


@register_model
def mmbert_small() -> ModelConfig:
    """mmBERT-small (Marone et al. 2025): the multilingual ModernBERT, 22 layers, hidden 384,
    6 heads, GeGLU 1152, rotary base 160,000 in both global and local layers, a 256,000-piece
    Gemma 2 tokenizer (pad id 0), trained on 1,800+ languages. Weights are not bundled: import
    the Hugging Face checkpoint with ``babelzoo convert --from-hf``."""
    return ModelConfig(text=ModernBertConfig(vocab_size=256000, hidden_size=384, num_heads=6, pad_token_id=0,
                                             local_rope_theta=160000.0))
