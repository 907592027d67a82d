"""The Transformer-XL family's config and zoo entries (:mod:`babelzoo.zoo.families.transformer_xl.model` holds
the modules and the recurrence API).

Transformer-XL (Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a
Fixed-Length Context"): post-LN blocks whose attention scores use relative positions (a fixed
sinusoid of the query–key distance, W_{k,R}, and the global biases u and v) and, across the
segments of a long text, a memory: each layer also attends over the cached, stop-gradient states
its input had on the previous segment(s), up to ``mem_len`` positions. Through
``BabelModel.forward`` (no memory) the model is an ordinary encoder, bidirectional unless
``causal``; :func:`babelzoo.zoo.families.transformer_xl.model.encode_segment` runs it with a memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...config import EncoderConfig, _check
from ...model_config import ModelConfig
from ...entries import TINY, register_model
from ...family import TextFamily, register_family


@dataclass(frozen=True)
class TransformerXLConfig(EncoderConfig):
    """:class:`EncoderConfig`'s fields plus ``mem_len``, how many positions of earlier
    segments the memory keeps when a caller does not say (``encode_segment(mem_len=...)``
    overrides it; 0: no memory), and ``causal`` (every forward left-to-right, the paper's
    language model). Positions are relative and computed for any length, so ``max_positions``
    sizes nothing; it records the segment length the entry was meant for. ``dropout`` applies
    to the embeddings and to each sublayer's output, ``attention_dropout`` to the attention
    probabilities. No segment embeddings or pooler unless asked for."""

    family: ClassVar[str] = "transformer_xl"

    segment_vocab_size: int = 0
    pooler: bool = False
    layer_norm_eps: float = 1e-5
    mem_len: int = 128
    causal: bool = False

    _non_negative: ClassVar = EncoderConfig._non_negative + ("mem_len",)

    def validate(self) -> None:
        super().validate()
        _check(self.hidden_size % 2 == 0, type(self).__name__, "hidden_size", self.hidden_size,
               "must be even for the sinusoids of relative positions")

    def encoder_flops_per_token(self, seq_len: int) -> float:
        """Per layer, for a segment of L = ``seq_len`` after a memory of M = ``mem_len``:
        2·H² for the queries, 2·2H²·(M + L)/L for keys and values (the memory's too), 2·H² for
        the output, 2·H²·P/L for W_{k,R} over the P = M + 2L − 1 distances, 2·2HI for the
        feed-forward, 2·2·(M + L)·H for the content scores and the weighted sum, and 2·P·H for
        the positional scores."""
        h, length, memory = self.hidden_size, max(seq_len, 1), self.mem_len
        keys, distances = memory + length, memory + 2 * length - 1
        per_layer = (2 * h * h + 4 * h * h * keys / length + 2 * h * h + 2 * h * h * distances / length
                     + 4 * h * self.intermediate_size + 4 * keys * h + 2 * distances * h)
        return float(self.num_layers * per_layer)


FAMILY = register_family(TextFamily("transformer_xl", TransformerXLConfig, build="babelzoo.zoo.families.transformer_xl.model:build",
                                    encoder="babelzoo.zoo.families.transformer_xl.model:TransformerXLEncoder", segment_memory=True))


@register_model
def transformer_xl_base() -> ModelConfig:
    """Transformer-XL (Dai et al. 2019) at the size of its WikiText-103 base model: 16 post-LN
    layers, hidden 410, 10 heads of 41, feed-forward 2100, relative positional attention with
    per-layer biases u and v, a memory of 150 positions. Bidirectional by default (a masked-LM
    encoder; ``causal=True`` gives the paper's left-to-right language model), over a
    32,000-piece sub-word vocabulary scored by the tied MLM head (the paper's adaptive softmax
    over 267k words is not part of it). No pretrained weights."""
    return ModelConfig(text=TransformerXLConfig(num_layers=16, hidden_size=410, num_heads=10, intermediate_size=2100,
                                                attention_dropout=0.0, max_positions=150, mem_len=150))


@register_model
def transformer_xl_tiny() -> ModelConfig:
    """Transformer-XL's layout (relative positional attention, segment-level memory) at tiny
    size: 2 layers, width 128, 4 heads, a 64-position memory, for tests and demos."""
    return transformer_xl_base().override(**{**TINY, "max_positions": 64}, mem_len=64)
