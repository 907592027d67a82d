"""Transformer blocks: the encoder block (attention and feed-forward sublayers with residuals, post-LN
or pre-LN) and the decoder block (causal self-attention, cross-attention, feed-forward)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ...errors import InputError
from .attention import Packing, SelfAttention, take_rows
from .cache import LayerCache
from .cross_attention import CrossAttention
from .dropout import Dropout
from .ffn import FeedForward, GatedFeedForward
from .norms import make_norm


@dataclass(kw_only=True)
class LayerState:
    """What one encoder block reads besides its input: the SDPA ``mask``, an additive score
    ``bias`` (T5 buckets), NEZHA's ``relative`` table, the ``rows`` whose output alone is wanted
    ([B, K] positions), the ``packing`` of a pass on real tokens only and ``rotary`` (cos, sin)
    angles. A :class:`~babelzoo.zoo.layers.LayerStack` makes one per layer; its fields are
    given by name."""

    mask: Optional[torch.Tensor] = None
    bias: Optional[torch.Tensor] = None
    relative: Optional[torch.Tensor] = None
    rows: Optional[torch.Tensor] = None
    packing: Optional[Packing] = None
    rotary: Optional[tuple[torch.Tensor, torch.Tensor]] = None


@dataclass(kw_only=True)
class DecoderLayerState:
    """What one decoder block reads: self-attention's bool ``mask`` and additive ``bias`` over
    every key position, ``memory`` (:meth:`CrossAttention.memory` of the encoder's output for
    this layer), ``memory_mask`` its [B, 1, 1, S] key mask, and this layer's ``cache``."""

    mask: Optional[torch.Tensor]
    bias: Optional[torch.Tensor]
    memory: tuple[torch.Tensor, torch.Tensor]
    memory_mask: Optional[torch.Tensor] = None
    cache: Optional[LayerCache] = None


class TransformerBlock(nn.Module):
    """Post-LN (BERT: x = LN(x + f(x))) or pre-LN (GPT-2: x = x + f(LN(x))) block.

    The parts are switches: ``bias=False`` drops the biases of every projection, ``norm``
    picks LayerNorm or RMSNorm (``norm_bias`` its β), ``gated`` a GLU feed-forward (GeGLU with
    GELU), ``attention_norm=False`` leaves a pre-LN block's input unnormalised (ModernBERT's
    first layer, which reads already normalised embeddings). ``dropout`` applies to each
    sublayer's output, ``ffn_dropout`` inside a gated feed-forward. ``ffn`` builds the block with
    another feed-forward (ERNIE's entity fusion, :mod:`babelzoo.zoo.layers.entities`),
    ``attention`` with another attention (kNN-augmented, :mod:`babelzoo.zoo.layers.knn_attention`);
    ``head_dim`` fixes the width of a head when ``num_heads`` is fewer than the width holds
    (heads pruned away).
    """

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, act: str = "gelu",
                 dropout: float = 0.1, attention_dropout: float = 0.1, eps: float = 1e-12,
                 pre_norm: bool = False, *, bias: bool = True, norm: str = "layer", norm_bias: bool = True,
                 gated: bool = False, attention_norm: bool = True, ffn_dropout: float = 0.0,
                 ffn: Optional[nn.Module] = None, attention: Optional[SelfAttention] = None,
                 head_dim: Optional[int] = None):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = attention if attention is not None else SelfAttention(hidden_size, num_heads,
                                                                               attention_dropout, bias=bias,
                                                                               head_dim=head_dim)
        self.attention_norm = make_norm(norm, hidden_size, eps, norm_bias) if attention_norm else nn.Identity()
        if ffn is None:
            ffn = (GatedFeedForward(hidden_size, intermediate_size, act, bias, ffn_dropout) if gated
                   else FeedForward(hidden_size, intermediate_size, act, bias))
        self.ffn = ffn
        self.ffn_norm = make_norm(norm, hidden_size, eps, norm_bias)
        self.dropout = Dropout(dropout)

    @property
    def row_wise(self) -> bool:
        """True when the feed-forward treats every position alone and the attention is the plain
        one (so rows may be packed or pruned); a knowledge-fusion feed-forward mixes tokens with
        their entities, a memory attention reads every position's keys into its memory."""
        return isinstance(self.ffn, (FeedForward, GatedFeedForward)) and type(self.attention) is SelfAttention

    def forward(self, x: torch.Tensor, state: LayerState) -> torch.Tensor:
        """``state.rows`` ([B, K] positions): the block's output [B, K, H] at those positions
        only (every position still serves as a key and value). ``state.packing``: ``x`` and the
        output are the real tokens only, [N, H]."""
        residual = x if state.rows is None else take_rows(x, state.rows)
        if self.pre_norm:
            x = residual + self.dropout(self._attend(self.attention_norm(x), state))
            return x + self.dropout(self.ffn(self.ffn_norm(x)))
        x = self.attention_norm(residual + self.dropout(self._attend(x, state)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))

    def _attend(self, x: torch.Tensor, state: LayerState) -> torch.Tensor:
        """The attention mode ``state`` asks for: on packed tokens, at selected rows, or at every
        position."""
        if state.packing is not None:
            if state.rows is not None:
                raise InputError("query rows and packed tokens cannot be combined")
            return self.attention.packed(x, state.packing, mask=state.mask, bias=state.bias,
                                         relative=state.relative, rotary=state.rotary)
        if state.rows is not None:
            if state.relative is not None or state.rotary is not None:
                raise InputError("query rows cannot be combined with NEZHA relative or rotary positions")
            return self.attention.at_rows(x, state.rows, mask=state.mask, bias=state.bias)
        return self.attention(x, mask=state.mask, bias=state.bias, relative=state.relative, rotary=state.rotary)


class DecoderBlock(nn.Module):
    """A Transformer decoder block (Vaswani et al. 2017): causal self-attention, cross-attention
    over the encoder's output, feed-forward, each sublayer with a residual, post-LN (BART:
    x = LN(x + f(x))) or pre-LN (mBART, T5: x = x + f(LN(x))).

    The switches are :class:`TransformerBlock`'s: ``bias``, ``norm``, ``gated``, ``ffn_dropout``;
    ``scale`` multiplies q·kᵀ in both attentions (None: 1/√d; T5: 1)."""

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, act: str = "gelu",
                 dropout: float = 0.1, attention_dropout: float = 0.0, eps: float = 1e-5,
                 pre_norm: bool = False, *, bias: bool = True, norm: str = "layer", gated: bool = False,
                 ffn_dropout: float = 0.0, scale: Optional[float] = None):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = SelfAttention(hidden_size, num_heads, attention_dropout, bias=bias, scale=scale)
        self.attention_norm = make_norm(norm, hidden_size, eps)
        self.cross_attention = CrossAttention(hidden_size, num_heads, attention_dropout, bias=bias, scale=scale)
        self.cross_norm = make_norm(norm, hidden_size, eps)
        self.ffn = (GatedFeedForward(hidden_size, intermediate_size, act, bias, ffn_dropout) if gated
                    else FeedForward(hidden_size, intermediate_size, act, bias, ffn_dropout))
        self.ffn_norm = make_norm(norm, hidden_size, eps)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, state: DecoderLayerState) -> torch.Tensor:
        """``x`` [B, L, H]: the decoder's states (the new positions only, with a cache)."""
        x = self._sublayer(x, self.attention_norm, lambda h: self._self_attend(h, state))
        x = self._sublayer(x, self.cross_norm,
                           lambda h: self.cross_attention(h, memory=state.memory, mask=state.memory_mask))
        return self._sublayer(x, self.ffn_norm, self.ffn)

    def _self_attend(self, x: torch.Tensor, state: DecoderLayerState) -> torch.Tensor:
        """Causal self-attention: over the cache and the new positions when decoding step by step."""
        if state.cache is None:
            return self.attention(x, mask=state.mask, bias=state.bias)
        return self.attention.cached(x, state.cache, mask=state.mask, bias=state.bias)

    def _sublayer(self, x: torch.Tensor, norm: nn.Module, f) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(f(norm(x)))
        return norm(x + self.dropout(f(x)))
