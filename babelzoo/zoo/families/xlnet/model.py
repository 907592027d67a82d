"""The XLNet family's modules: token embeddings without positions, a stack of post-LN layers
with XLNet's relative positional attention and relative segment encoding, the two-stream pass
of permutation language modelling, and the tied LM head. Config and entries:
:mod:`babelzoo.zoo.families.xlnet.config`.

Attention of query i on key j (Yang et al. 2019, §2.3 and App. A.2; Dai et al. 2019, §3.3)::

    A_ij = [(q_i + u)·k_j + (q_i + v)·W_r r_{i−j} + (q_i + b)·s_ij] / √d

The position term is computed against the encodings of every distance L, L−1, ..., −L+1 once
and lined up with the keys by the relative shift (:func:`relative_shift`). Two-stream attention
(:meth:`XLNetEncoder.two_stream`) runs the same layers on a content stream h and a query stream
g that shares every weight::

    h_{z_t} ← Attention(Q = h_{z_t}, KV = h_{z≤t})     (sees its own content)
    g_{z_t} ← Attention(Q = g_{z_t}, KV = h_{z<t})     (sees only what precedes it in z)

with g initialised from a learned vector w (``mask_embedding``) and h from the embeddings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ....errors import InputError
from ...family import TextParts
from ...layers import (
    Dropout,
    FeedForward,
    LayerStack,
    Packing,
    TokenEmbeddings,
    attend,
    build_attention_mask,
    sinusoids,
)
from .config import XLNetConfig


def relative_encodings(length: int, dim: int, clamp_len: int = -1, device=None) -> torch.Tensor:
    """[2L, dim]: the sinusoids of the distances L, L−1, ..., −L+1 (row c ↔ distance L − c),
    clipped to ±clamp_len when it is positive."""
    distances = torch.arange(length, -length, -1, device=device)
    if clamp_len > 0:
        distances = distances.clamp(-clamp_len, clamp_len)
    return sinusoids(distances, dim)


def relative_shift(scores: torch.Tensor, length: int) -> torch.Tensor:
    """Transformer-XL's shift: ``scores`` [..., L, 2L] of L queries against the distances L, L−1,
    ..., −L+1 → [..., L, length] whose (i, j) entry is the score at distance i − j (column
    L − i + j). Reading the [L, 2L] block as [2L, L], dropping its first row and reading the rest
    as [L, 2L − 1] moves row i left by L − i, with no index tensor."""
    *lead, queries, distances = scores.shape
    shifted = scores.reshape(*lead, distances, queries)[..., 1:, :].reshape(*lead, queries, distances - 1)
    return shifted[..., :length]


@dataclass
class QueryStream:
    """The query stream's SDPA mask ([B, 1, L, L]) and its targets ([B, P, L], one-hot rows)."""

    mask: Optional[torch.Tensor]
    targets: torch.Tensor


@dataclass
class StackState:
    """One forward pass's inputs to every layer: the content stream's SDPA mask, the relative
    encodings r ([2L, H], dropout applied), with segment ids whether i and j share a segment
    ([B, L, L] bool), and in the two-stream pass the query stream (the layers then take and
    return the pair (h, g))."""

    mask: Optional[torch.Tensor]
    relative: torch.Tensor
    same: Optional[torch.Tensor] = None
    query: Optional[QueryStream] = None


class RelativeAttention(nn.Module):
    """XLNet's attention. The projections are [H, heads, d] tensors, as in the paper's code:
    ``query``/``key``/``value``/``output``, ``position`` (W_r, the relative encodings'
    projection), the per-head biases ``content_bias`` (u), ``position_bias`` (v) and
    ``segment_bias`` (b), and ``segment_embed`` (s₊ for the same segment, s₋ for another).
    One method per mode: :meth:`forward` for the content stream, :meth:`two_stream` for the
    pre-training pass; each returns the output projections (the block adds the residual and the
    norm)."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float, init_std: float):
        super().__init__()
        head_dim = hidden_size // num_heads
        self.dropout = dropout

        def weight(*shape: int) -> nn.Parameter:
            return nn.Parameter(nn.init.normal_(torch.empty(*shape), std=init_std))

        self.query, self.key, self.value, self.output, self.position = (
            weight(hidden_size, num_heads, head_dim) for _ in range(5))
        self.content_bias, self.position_bias, self.segment_bias = (weight(num_heads, head_dim) for _ in range(3))
        self.segment_embed = weight(2, num_heads, head_dim)

    @staticmethod
    def heads(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.einsum("blh,hnd->bnld", x, weight)

    def scores_and_values(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kr: torch.Tensor,
                          mask: Optional[torch.Tensor], same: Optional[torch.Tensor]) -> torch.Tensor:
        """softmax(A)·V for queries ``q`` [B, n, L, d] at positions 0..L-1; ``kr`` [n, 2L, d] is
        W_r r for every distance."""
        # (q_i + v)·W_r r_{i−j}: one score per distance, lined up with the keys by the shift
        bias = relative_shift(torch.einsum("bnid,nkd->bnik", q + self.position_bias[:, None], kr), k.shape[2])
        if same is not None:  # (q_i + b)·s_ij, s_ij = s₊ within a segment, s₋ across
            segment = torch.einsum("bnid,snd->bnis", q + self.segment_bias[:, None], self.segment_embed)
            bias = bias + torch.where(same[:, None], segment[..., :1], segment[..., 1:])
        # SDPA adds (q_i + u)·k_j / √d to the bias, which is on that scale already
        return attend(q + self.content_bias[:, None], k, v, mask=mask, bias=bias / math.sqrt(q.shape[-1]),
                      dropout=self.dropout if self.training else 0.0)

    def forward(self, h: torch.Tensor, state: StackState) -> torch.Tensor:
        """The content stream alone: the output projection of ``h``'s attention [B, L, H]."""
        k, v, kr = self.keys_values(h, state)
        return self.project(self.scores_and_values(self.heads(h, self.query), k, v, kr, state.mask, state.same))

    def two_stream(self, h: torch.Tensor, g: torch.Tensor, state: StackState) -> tuple[torch.Tensor, torch.Tensor]:
        """Both streams of the pre-training pass (``state.query`` set): the content stream's
        output and the query stream's, whose keys and values are the content stream's."""
        k, v, kr = self.keys_values(h, state)
        out_h = self.project(self.scores_and_values(self.heads(h, self.query), k, v, kr, state.mask, state.same))
        # Each target's query stands at its position (rows without a target are zeros, and are
        # dropped again after attention).
        query = state.query
        placed = torch.einsum("bnpd,bpl->bnld", self.heads(g, self.query), query.targets)
        attended = torch.einsum("bnld,bpl->bnpd", self.scores_and_values(placed, k, v, kr, query.mask, state.same),
                                query.targets)
        return out_h, torch.einsum("bnpd,hnd->bph", attended, self.output)

    def keys_values(self, h: torch.Tensor, state: StackState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The keys and values of the content stream and W_r r for every distance."""
        return (self.heads(h, self.key), self.heads(h, self.value),
                torch.einsum("kh,hnd->nkd", state.relative, self.position))

    def project(self, attended: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bnld,hnd->blh", attended, self.output)


class XLNetLayer(nn.Module):
    """x = LN(x + Attention(x)); x = LN(x + FFN(x)), applied to each stream with the same weights."""

    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.attention = RelativeAttention(config.hidden_size, config.num_heads, config.attention_dropout,
                                           config.init_std)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config.hidden_size, config.intermediate_size, config.activation, dropout=config.dropout)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.dropout)

    def sublayers(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(attended))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))

    def forward(self, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor], state: StackState):
        """``x``: the content stream h [B, L, H], or with ``state.query`` the pair (h, g) of
        content and query streams; returns the same."""
        if state.query is None:
            return self.sublayers(x, self.attention(x, state))
        h, g = x
        out_h, out_g = self.attention.two_stream(h, g, state)
        return self.sublayers(h, out_h), self.sublayers(g, out_g)


class XLNetEncoder(LayerStack):
    """The layer stack. Through :meth:`forward` (what :class:`~babelzoo.zoo.model.BabelModel`
    and fine-tuning heads call) it is a bidirectional encoder on the content stream alone,
    honouring padding, ``visible`` and ``causal``; :meth:`two_stream` is the pre-training pass."""

    reads_segments = True

    def __init__(self, config: XLNetConfig):
        super().__init__()
        self.config = config
        self.num_layers = config.num_layers
        self.layers = nn.ModuleList(XLNetLayer(config) for _ in range(config.num_layers))
        self.mask_embedding = nn.Parameter(nn.init.normal_(torch.empty(1, 1, config.hidden_size), std=config.init_std))
        self.dropout = Dropout(config.dropout)

    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                position_ids: Optional[torch.Tensor] = None,
                segment_ids: Optional[torch.Tensor] = None) -> StackState:
        """``position_ids`` are not read: positions are the relative distances of the sequence
        order (a model without absolute positions ignores them, as
        :func:`~babelzoo.objectives.batching.encoder_inputs` says)."""
        weight = self.mask_embedding
        relative = relative_encodings(length, self.config.hidden_size, self.config.clamp_len, weight.device)
        same = None if segment_ids is None else segment_ids[:, :, None] == segment_ids[:, None, :]
        return StackState(build_attention_mask(attention_mask, visible, causal, length, weight.device),
                          self.dropout(relative.to(weight.dtype)), same)

    def run(self, x: torch.Tensor, state: StackState, start: int = 0, end: Optional[int] = None,
            rows: Optional[torch.Tensor] = None, packing: Optional[Packing] = None,
            states: Optional[list[torch.Tensor]] = None) -> torch.Tensor:
        if rows is not None or packing is not None:
            raise InputError("XLNet layers compute every position (no row selection, no packing)")
        return super().run(x, state, start=start, end=end, states=states)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x)

    def can_pack(self) -> bool:
        return False

    def can_select_rows(self) -> bool:
        # The position scores line queries up with every distance: the last layer runs in full.
        return False

    def two_stream(self, x: torch.Tensor, visible: torch.Tensor, target_mapping: torch.Tensor,
                   attention_mask: Optional[torch.Tensor] = None,
                   segment_ids: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Two-stream self-attention over embedded inputs ``x`` [B, L, H] (§2.3).

        ``visible`` [B, L, L] (bool): True where position i may read the content of position j,
        i.e. z⁻¹(j) < z⁻¹(i) in the factorisation order z. It is the query stream's mask; the
        content stream's adds the diagonal (h_i reads x_i, g_i never does). Hugging Face's
        ``perm_mask`` is its negation. ``target_mapping`` [B, P, L]: row p is one-hot on the
        position of the p-th target (all zeros: no target, a padding row). Every target's row of
        ``visible`` must hold a True (the ``plm`` objective puts a token before every target):
        a query that sees nothing reads itself, as every empty mask row does in
        :func:`~babelzoo.zoo.layers.build_attention_mask`.

        Returns the content stream h [B, L, H] and the query stream g [B, P, H] at the targets,
        both after the last layer; g scored by the LM head gives p(x_{z_t} | x_{z<t}, z_t).
        """
        length = x.shape[1]
        visible = visible.bool()
        eye = torch.eye(length, dtype=torch.bool, device=x.device)
        state = self.prepare(attention_mask, length, visible=visible | eye, segment_ids=segment_ids)
        state.query = QueryStream(build_attention_mask(attention_mask, visible, False, length),
                                  target_mapping.to(x.dtype))
        g = self.dropout(self.mask_embedding.expand(x.shape[0], target_mapping.shape[1], -1))
        h, g = self.run((x, g), state)
        return self.finish(h), self.finish(g)


class XLNetLMHead(nn.Module):
    """XLNet's LM head: logits = E·h + b, the decoder tied to the word embeddings E and a free
    bias (no dense layer or norm before it, unlike BERT's)."""

    def __init__(self, hidden_size: int, vocab_size: int):
        super().__init__()
        self.decoder = nn.Linear(hidden_size, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor, positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits for every position, or only where the bool ``positions`` mask is True."""
        if positions is not None:
            hidden = hidden[positions]
        return self.decoder(hidden) + self.bias


def build(config: XLNetConfig, knowledge=None) -> TextParts:
    # ``knowledge`` asks for nothing here: the config's check_knowledge refuses fusion layers.
    embeddings = TokenEmbeddings(config.vocab_size, config.hidden_size, config.hidden_size, config.pad_token_id,
                                 positions="none", num_languages=config.num_languages, norm=None,
                                 dropout=config.dropout)
    lm_head = XLNetLMHead(config.hidden_size, config.vocab_size) if config.mlm_head else None
    return TextParts(embeddings, XLNetEncoder(config), lm_head)
