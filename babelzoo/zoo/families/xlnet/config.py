"""The XLNet family's config and zoo entries (:mod:`babelzoo.zoo.families.xlnet.model` holds the modules).

XLNet (Yang et al. 2019, "XLNet: Generalized Autoregressive Pretraining for Language
Understanding"): Transformer-XL's layers without the memory. Positions enter only through
relative attention: the score of query i on key j is

    A_ij = (q_i + u)·k_j + (q_i + v)·W_r r_{i−j} + (q_i + b)·s_ij

with r_{i−j} the sinusoidal encoding of the distance, u, v and b learned per head (Hugging
Face's ``r_w_bias``, ``r_r_bias``, ``r_s_bias``) and s_ij one of two learned vectors for "same
segment" and "different segment" (``seg_embed``), so any number of segments is told apart.
Post-LN blocks with a feed-forward, no absolute positions, no embedding norm, no pooler. For
pre-training the same layers run two streams (content and query); see
:meth:`babelzoo.zoo.families.xlnet.model.XLNetEncoder.two_stream` and the ``plm`` objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...config import EncoderConfig, _check
from ...model_config import ModelConfig
from ...entries import TINY, register_model
from ...family import TextFamily, register_family


@dataclass(frozen=True)
class XLNetConfig(EncoderConfig):
    """:class:`EncoderConfig`'s fields (``dropout`` applies to the embeddings, the relative
    encodings, each sublayer's output, inside the feed-forward and to the last layer's output;
    ``attention_dropout`` to the attention probabilities) plus ``clamp_len``: relative distances
    are clipped to ±clamp_len (≤ 0: never). ``segment_vocab_size`` is 2, the two relative
    segment vectors (same/different): the model takes any segment ids. ``max_positions`` bounds
    nothing in the layers (relative positions have no table); it is the length recipes and
    objectives truncate to."""

    family: ClassVar[str] = "xlnet"

    vocab_size: int = 32000
    layer_norm_eps: float = 1e-12
    pooler: bool = False
    pad_token_id: int = 5
    clamp_len: int = -1

    def validate(self) -> None:
        super().validate()
        name = type(self).__name__
        _check(self.hidden_size % 2 == 0, name, "hidden_size", self.hidden_size,
               "must be even: the relative encodings are hidden_size/2 sines and as many cosines")
        _check(self.segment_vocab_size == 2, name, "segment_vocab_size", self.segment_vocab_size,
               "must be 2: XLNet's relative segment encoding has one vector for 'same segment' and one for "
               "'different segment', whatever the segment ids")
        _check(isinstance(self.clamp_len, int) and not isinstance(self.clamp_len, bool), name, "clamp_len",
               self.clamp_len, "must be an integer (<= 0: distances are not clipped)")

    def encoder_flops_per_token(self, seq_len: int) -> float:
        """Per layer 2·4H² for the query/key/value/output projections, 2·2HI for the
        feed-forward, and 2·H·(L + 2L + L) for the content scores, the position scores over 2L
        distances and the weighted values. The 2L relative encodings are projected once per
        batch (2·2L·H² per layer, whatever the batch size), so, like the embedding lookups, they
        are not counted per token."""
        h = self.hidden_size
        dense = 2 * (4 * h * h) + 2 * (2 * h * self.intermediate_size)
        return float(self.num_layers * (dense + 2 * h * 4 * seq_len))


FAMILY = register_family(TextFamily("xlnet", XLNetConfig, build="babelzoo.zoo.families.xlnet.model:build",
                                    encoder="babelzoo.zoo.families.xlnet.model:XLNetEncoder", hf=("babelzoo.zoo.convert.xlnet:FAMILY",)))


@register_model
def xlnet_base() -> ModelConfig:
    """XLNet-base (Yang et al. 2019): 12 post-LN layers, hidden 768, 12 heads, feed-forward 3072
    with GELU, relative positional attention with content/position/segment biases, relative
    segment encoding, no absolute positions, a 32,000-piece sentencepiece vocabulary (pad id 5),
    the LM head a tied decoder with a bias. Pre-trained with permutation language modelling
    (``plm``). Weights are not bundled: import a Hugging Face ``XLNetLMHeadModel`` checkpoint
    (``xlnet/xlnet-base-cased``) with ``babelzoo convert --from-hf``."""
    return ModelConfig(text=XLNetConfig())


@register_model
def xlnet_tiny() -> ModelConfig:
    """XLNet's layer (relative positional attention with the relative shift, content/position/
    segment biases, post-LN, two-stream pre-training) at tiny size, for tests and demos."""
    return xlnet_base().override(**{**TINY, "pad_token_id": 0})
