"""Transformer-XL's relative positional attention over a segment and a memory of earlier states.

Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
§3.3. The score of query i and key j replaces the absolute position embeddings with a fixed
sinusoid R_{i−j} of their distance and two learned global biases u and v::

    A^rel_{i,j} = E_{x_i}ᵀ W_qᵀ W_{k,E} E_{x_j}     (a) content
                + E_{x_i}ᵀ W_qᵀ W_{k,R} R_{i−j}     (b) content-dependent positional bias
                + uᵀ W_{k,E} E_{x_j}                (c) global content bias
                + vᵀ W_{k,R} R_{i−j}                (d) global positional bias

Computed as (a) + (c) = (q_i + u)·k_j and (b) + (d) = (q_i + v)·r_{i−j}, with q = W_q E,
k = W_{k,E} E and r = W_{k,R} R per head; the keys and values are those of the memory followed
by the segment's own positions. (b) + (d) is computed once per distance, not per (i, j) pair, and
moved into place by :func:`relative_shift` (the paper's appendix B). The distances cover
keys on both sides of a query, so the same layer serves bidirectional and causal attention.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .attention import attend
from .masks import build_attention_mask


def sinusoids(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """R_p = [sin(p·f_0), …, sin(p·f_{d/2−1}), cos(p·f_0), …, cos(p·f_{d/2−1})] for every
    (possibly negative) position p, f_k = 10000^(−2k/d): Transformer-XL's layout of the
    sinusoid, sines then cosines. ``positions`` [P] → [P, dim] (fp32); ``dim`` must be even."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim))
    angles = positions.float()[:, None] * inv_freq[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def relative_distances(queries: int, keys: int, device=None) -> torch.Tensor:
    """The distances i − j that :func:`relative_shift` expects, largest first: keys − 1, …,
    −(queries − 1), for ``queries`` queries that are the last positions of ``keys`` keys (the
    memory comes first). Row p of a table over them is the distance (keys − 1) − p."""
    return torch.arange(keys - 1, -queries, -1, device=device)


def relative_shift(x: torch.Tensor, keys: int) -> torch.Tensor:
    """``x`` [..., Lq, P] whose column p holds distance (K − 1) − p (K = ``keys``, the Lq
    queries being the last Lq of the K positions) → [..., Lq, K] with entry (i, j) for the
    distance of query i to key j: ``out[..., i, j] = x[..., i, j + Lq − 1 − i]``.

    The shift of appendix B: prepend a zero column, read the [Lq, P + 1] rows as P + 1 rows of
    Lq, drop the first, and read the rest back as Lq rows of P; every row then starts Lq − 1 − i
    columns later. P ≥ K is needed for every key (P = K + Lq − 1 covers keys on both sides;
    P = K only keys at or before the query, the causal case, whose other entries are filler)."""
    *lead, queries, width = x.shape
    padded = F.pad(x, (1, 0))
    shifted = padded.reshape(*lead, width + 1, queries)[..., 1:, :]
    return shifted.reshape(*lead, queries, width)[..., :keys]


def memory_attention_mask(attention_mask: Optional[torch.Tensor], memory_mask: Optional[torch.Tensor],
                          visible: Optional[torch.Tensor], causal: bool, length: int,
                          device: Optional[torch.device] = None) -> Optional[torch.Tensor]:
    """The bool SDPA mask [B, 1, L or 1, M + L] of a segment of ``length`` positions after a
    memory of M positions: every query sees the memory's real positions (``memory_mask`` [B, M],
    1 = real) and the segment's own keys as :func:`~babelzoo.zoo.layers.build_attention_mask`
    allows them (padding, ``visible`` within the segment, causal). None when nothing is masked."""
    own = build_attention_mask(attention_mask, visible, causal, length, device)
    if memory_mask is None or memory_mask.shape[1] == 0:
        return own
    memory = memory_mask.bool()[:, None, None, :]
    if own is None:
        if bool(memory.all()):
            return None
        own = torch.ones(1, 1, 1, length, dtype=torch.bool, device=memory.device)
    batch, rows = max(own.shape[0], memory.shape[0]), own.shape[2]
    return torch.cat([memory.expand(batch, 1, rows, -1), own.expand(batch, 1, rows, -1)], dim=-1)


class XLRelativeAttention(nn.Module):
    """Multi-head attention with Transformer-XL's relative scores (module docstring) over
    [memory; segment]. Parameters: ``query`` (W_q), ``key_value`` (W_{k,E} and W_v), ``position``
    (W_{k,R}), ``out`` (W_o), all without biases as in the paper's code, and the global biases
    ``content_bias`` (u) and ``position_bias`` (v), one [heads, head_dim] pair per layer (the
    released models' ``untie_r``)."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.dropout = dropout
        self.query = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key_value = nn.Linear(hidden_size, 2 * hidden_size, bias=False)
        self.position = nn.Linear(hidden_size, hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, hidden_size, bias=False)
        self.content_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        self.position_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor, mask: Optional[torch.Tensor] = None,
                memory: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``x`` [B, L, H] the segment, ``memory`` [B, M, H] the states before it (None: none),
        ``positions`` [P, H] the sinusoids R of :func:`relative_distances` (L, M + L), ``mask``
        [B, 1, L or 1, M + L] bool (True = attend). Returns [B, L, H]."""
        b, length, width = x.shape
        context = x if memory is None else torch.cat([memory.to(x.dtype), x], dim=1)
        keys = context.shape[1]
        heads, dim = self.num_heads, self.head_dim
        q = self.query(x).view(b, length, heads, dim).transpose(1, 2)
        k, v = self.key_value(context).view(b, keys, 2, heads, dim).permute(2, 0, 3, 1, 4)
        r = self.position(positions.to(x.dtype)).view(-1, heads, dim).transpose(0, 1)
        # (b) + (d): (q_i + v)·r_δ for every distance δ, then moved to (i, j) by the shift.
        by_distance = torch.einsum("bhid,hpd->bhip", q + self.position_bias[None, :, None], r)
        positional = relative_shift(by_distance, keys) / math.sqrt(dim)
        # (a) + (c): (q_i + u)·k_j/√d on the one attention path, (b) + (d) as its additive bias.
        context = attend(q + self.content_bias[None, :, None], k, v, mask=mask, bias=positional,
                         dropout=self.dropout if self.training else 0.0)
        return self.out(context.transpose(1, 2).reshape(b, length, width))
