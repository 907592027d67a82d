"""Multi-head self-attention on one attention path, :func:`attend`.

Every kind of attention mask goes through :func:`attend`, which calls
``torch.nn.functional.scaled_dot_product_attention`` (or writes the same softmax out where SDPA
has no kernel for the case): padding masks, causal and prefix masks, per-example [B, L, L]
visibility matrices (K-BERT) and additive relative-position biases are all expressed as one
``attn_mask``; rotary positions rotate the queries and keys first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import dropout as drop
from .linear import Linear
from .positions import apply_rotary

if TYPE_CHECKING:
    from .cache import LayerCache


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
           mask: Optional[torch.Tensor] = None,
           bias: Optional[torch.Tensor] = None,
           value_bias: Optional[torch.Tensor] = None,
           dropout: float = 0.0,
           scale: Optional[float] = None) -> torch.Tensor:
    """Scaled dot-product attention over [B, H, L, D] tensors.

    ``scale`` multiplies q·kᵀ (default 1/√d; T5 uses 1, its weights absorb the scale).

    ``mask`` is a bool mask broadcastable to [B, H, Lq, Lk] (True = attend); ``bias`` is an
    additive float bias (relative positions), already on the scale of q·k/√d. ``value_bias``
    ([Lq, Lk, D], NEZHA) adds Σ_j p_ij a_ij to each output.

    ``torch.nn.functional.scaled_dot_product_attention`` serves every case it has a kernel for.
    Two cases compute softmax(q·kᵀ/√d + bias) explicitly: NEZHA's value term (SDPA does not
    expose the probabilities p) and dropout on the CPU, where SDPA has no fused kernel and
    falls back to its reference math, which upcasts bf16/fp16 to fp32 and draws its mask with
    ``bernoulli_``. The explicit form runs the two matrix products at the autocast precision
    and drops out with :func:`~babelzoo.zoo.dropout.dropout`; without dropout it equals SDPA.
    """
    attn_mask = mask
    if bias is not None:
        bias = bias.to(q.dtype)
        attn_mask = bias if mask is None else torch.where(mask, bias, torch.tensor(float("-inf"), dtype=q.dtype,
                                                                                    device=q.device))
    if value_bias is None and not (dropout > 0 and q.device.type == "cpu"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout, scale=scale)
    scores = (q * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)) @ k.transpose(-1, -2)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    # bf16/fp16 scores: softmax accumulated in fp32, as SDPA's kernels do.
    accumulate = torch.promote_types(scores.dtype, torch.float32)
    probs = drop(scores.softmax(dim=-1, dtype=accumulate).to(scores.dtype), dropout)
    out = probs @ v
    if value_bias is not None:
        out = out + torch.einsum("bhij,ijd->bhid", probs, value_bias.to(probs.dtype))
    return out


def select_rows(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For a bool [B, L] selection, ``index`` [B, K] (each row's selected positions in order,
    then filler) and ``valid`` [B, K] (False on filler), K the largest count in a row: taking
    rows by ``index`` and then ``[valid]`` gives ``x[positions]``, in the same order."""
    counts = positions.sum(dim=1)
    k = int(counts.max()) if positions.numel() else 0
    index = torch.sort((~positions.bool()).to(torch.int8), dim=1, stable=True).indices[:, :k]
    valid = torch.arange(k, device=positions.device)[None, :] < counts[:, None]
    return index, valid


def take_rows(x: Optional[torch.Tensor], index: torch.Tensor, dim: int = 1) -> Optional[torch.Tensor]:
    """``x`` [B, ..., L (at ``dim``), ...] → [B, ..., K, ...]: the rows ``index`` [B, K] picks.
    A size-1 ``dim`` (a mask that is the same for every query) is returned unchanged."""
    if x is None or x.shape[dim] == 1:
        return x
    x = x.expand(index.shape[0], *x.shape[1:])
    shape = [index.shape[0]] + [1] * (x.dim() - 1)
    shape[dim] = index.shape[1]
    expanded = list(x.shape)
    expanded[dim] = index.shape[1]
    return x.gather(dim, index.view(shape).expand(expanded))


class Packing:
    """The real tokens of a padded [B, L] batch as one [N, ...] tensor, and back.

    Projections and feed-forward layers treat every position alone, so they can run on the N
    real tokens instead of the B·L padded ones; attention scatters its projections back into
    the padded layout, where the padding mask applies as usual. On a batch whose lengths vary,
    this removes the padding's share of the layer's matrix work::

        packing = Packing(attention_mask)
        x = packing.pack(hidden)          # [B, L, H] → [N, H]
        hidden = packing.unpack(x)        # [N, H] → [B, L, H], zeros at padding
    """

    def __init__(self, attention_mask: torch.Tensor):
        self.batch, self.length = attention_mask.shape
        self.index = attention_mask.reshape(-1).nonzero().squeeze(1)
        lengths = attention_mask.sum(dim=1)
        # Rows padded on the right only: the packed tokens are each row's prefix, one segment per
        # row, and attention can run segment by segment on them (:meth:`SelfAttention.packed`).
        prefix = torch.arange(self.length, device=attention_mask.device)[None, :] < lengths[:, None]
        self.lengths = lengths.tolist() if bool((prefix == attention_mask.bool()).all()) else None
        self.runs = _runs(self.lengths) if self.lengths is not None else None

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.batch * self.length, *x.shape[2:]).index_select(0, self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        full = x.new_zeros(self.batch * self.length, *x.shape[1:]).index_copy(0, self.index, x)
        return full.view(self.batch, self.length, *x.shape[1:])


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused QKV projection (``bias=False``: no biases on
    either projection, as in ModernBERT). ``head_dim`` (default ``hidden_size // num_heads``)
    lets a layer keep fewer heads than ``hidden_size`` holds (heads pruned away): queries, keys
    and values are then ``num_heads · head_dim`` wide. ``scale`` multiplies q·kᵀ (default
    1/√head_dim; T5's attention is unscaled).

    One method per mode: :meth:`forward` (every position of a padded batch), :meth:`at_rows`
    (queries at selected positions only), :meth:`packed` (the real tokens of a
    :class:`Packing`) and :meth:`cached` (a decoder's new positions after its cached ones). In
    each, ``mask`` is a bool SDPA mask (True = attend) and ``bias`` an additive score bias
    (T5 buckets), both broadcastable to [B, heads, queries, keys]."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 head_dim: Optional[int] = None, scale: Optional[float] = None):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_dim or hidden_size // num_heads
        self.inner = self.num_heads * self.head_dim
        self.dropout = dropout
        self.scale = scale
        self.qkv = Linear(hidden_size, 3 * self.inner, bias=bias)
        self.out = Linear(self.inner, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, *,
                bias: Optional[torch.Tensor] = None,
                relative: Optional[torch.Tensor] = None,
                rotary: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        """Every position of ``x`` [B, L, H] attends. ``relative`` is NEZHA's [L, L, D] table
        a_ij, added to keys and values; ``rotary`` (cos, sin) from
        :class:`~babelzoo.zoo.layers.positions.RotaryEmbedding` rotates queries and keys."""
        q, k, v = self._heads(self.qkv(x), rotary)
        return self.out(self._merge(self._context(q, k, v, mask, bias, relative)))

    def at_rows(self, x: torch.Tensor, rows: torch.Tensor, *, mask: Optional[torch.Tensor] = None,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Queries, and so outputs [B, K, H], at the positions ``rows`` [B, K] only (see
        :func:`select_rows`); keys and values still come from every position of ``x``
        [B, L, H]. ``mask`` and ``bias`` span every query position; the rows are taken here."""
        b, length = x.shape[:2]
        width = self.inner
        weight, qkv_bias = self.qkv.weight, self.qkv.bias
        q = F.linear(take_rows(x, rows), weight[:width], None if qkv_bias is None else qkv_bias[:width])
        q = q.view(b, rows.shape[1], self.num_heads, self.head_dim).transpose(1, 2)
        kv = F.linear(x, weight[width:], None if qkv_bias is None else qkv_bias[width:])
        k, v = kv.view(b, length, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        mask, bias = take_rows(mask, rows, dim=2), take_rows(bias, rows, dim=2)
        return self.out(self._merge(self._context(q, k, v, mask, bias, None)))

    def packed(self, x: torch.Tensor, packing: "Packing", *, mask: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, relative: Optional[torch.Tensor] = None,
               rotary: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        """``x`` [N, H] holds the real tokens of ``packing`` only, and so does the output: the
        projections run on them, attention on the padded layout (segment by segment where the
        rows are padded on the right and only padding is masked, see :meth:`_segments`)."""
        if packing.lengths is not None and bias is None and relative is None and (mask is None or
                                                                                  mask.shape[-2] == 1):
            return self.out(self._segments(x, packing, rotary))
        q, k, v = self._heads(packing.unpack(self.qkv(x)), rotary)
        return self.out(packing.pack(self._merge(self._context(q, k, v, mask, bias, relative))))

    def cached(self, x: torch.Tensor, cache: "LayerCache", *, mask: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``x`` [B, l, H] holds a decoder's new positions only: their keys and values are
        appended to ``cache`` (a :class:`~babelzoo.zoo.layers.cache.LayerCache`) and the queries
        attend over every cached position (``mask`` and ``bias`` span all of them)."""
        q, k, v = self._heads(self.qkv(x), None)
        k, v = cache.append(k, v)
        return self.out(self._merge(self._context(q, k, v, mask, bias, None)))

    def _heads(self, qkv: torch.Tensor, rotary: Optional[tuple[torch.Tensor, torch.Tensor]]
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[B, L, 3·inner] projections → q, k, v [B, heads, L, D], queries and keys rotated."""
        b, length = qkv.shape[:2]
        q, k, v = qkv.view(b, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if rotary is not None:
            q, k = apply_rotary(q, rotary), apply_rotary(k, rotary)
        return q, k, v

    def _context(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor],
                 bias: Optional[torch.Tensor], relative: Optional[torch.Tensor]) -> torch.Tensor:
        """The attention output [B, heads, queries, D] (NEZHA's ``relative`` table included)."""
        if relative is not None:
            # q_i·(k_j + a_ij) = q_i·k_j + q_i·a_ij: the second term is an additive score bias.
            rel_scores = torch.einsum("bhid,ijd->bhij", q, relative.to(q.dtype)) / math.sqrt(self.head_dim)
            bias = rel_scores if bias is None else bias + rel_scores
        return attend(q, k, v, mask=mask, bias=bias, value_bias=relative,
                      dropout=self.dropout if self.training else 0.0, scale=self.scale)

    def _merge(self, context: torch.Tensor) -> torch.Tensor:
        """[B, heads, queries, D] → [B, queries, inner]."""
        b, _, queries, _ = context.shape
        return context.transpose(1, 2).reshape(b, queries, self.inner)

    def _segments(self, x: torch.Tensor, packing: "Packing", rotary) -> torch.Tensor:
        """Attention over packed tokens ``x`` [N, H] one segment at a time: a key mask that only
        hides padding is then no mask at all, and no row pays for another row's length (Σ ℓ_b²
        score entries instead of B·L²). Consecutive rows of one length (a length-sorted batch
        has many) share one SDPA call."""
        qkv = self.qkv(x).view(-1, 3, self.num_heads, self.head_dim)
        context = qkv.new_empty(qkv.shape[0], self.num_heads, self.head_dim)
        dropout = self.dropout if self.training else 0.0
        for run in packing.runs:
            tokens = slice(run.start, run.start + run.rows * run.length)
            # [rows·n, 3, heads, d] → 3 × [rows, heads, n, d]
            q, k, v = qkv[tokens].view(run.rows, run.length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            if rotary is not None:
                rows = slice(run.first, run.first + run.rows)
                cos, sin = (t[rows if t.shape[0] > 1 else slice(0, 1), :, :run.length] for t in rotary)
                q, k = apply_rotary(q, (cos, sin)), apply_rotary(k, (cos, sin))
            if not dropout and q.device.type == "cpu" and q.dtype == torch.float32 and run.length <= SHORT_SEGMENT:
                out = _short_attention(q, k, v, self.scale)
            else:
                out = attend(q, k, v, dropout=dropout, scale=self.scale)
            context[tokens] = out.transpose(1, 2).reshape(-1, self.num_heads, self.head_dim)
        return context.view(-1, self.inner)


#: Segments up to this length attend through :func:`_short_attention` on the CPU (fp32, no
#: dropout): for short sequences its two batched products beat SDPA's flash kernel, whose
#: blocking is sized for long ones (on 2 cores, 8 rows × 17 tokens × 12 heads: 0.30 ms
#: against 0.36 ms; 16 × 12: 0.38 against 0.70; equal near 80 tokens).
SHORT_SEGMENT = 64


def _short_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: Optional[float]) -> torch.Tensor:
    """softmax(q·kᵀ·scale)·v over [B, H, n, D] without a mask, as two batched matrix products
    (the scale applied inside the first); equal to SDPA up to rounding."""
    rows, heads, n, d = q.shape
    q, k, v = (t.reshape(rows * heads, n, d) for t in (q, k, v))
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    scores = torch.baddbmm(q.new_empty(()), q, k.transpose(1, 2), beta=0, alpha=scale)
    return torch.bmm(scores.softmax(dim=-1), v).view(rows, heads, n, d)


@dataclass(frozen=True)
class Run:
    """Consecutive rows ``first .. first + rows - 1`` of one ``length``, whose packed tokens
    start at ``start``."""

    first: int
    rows: int
    length: int
    start: int


def _runs(lengths: list[int]) -> list[Run]:
    """The runs of equal non-zero lengths in ``lengths``, in order."""
    runs: list[Run] = []
    start = 0
    for row, n in enumerate(lengths):
        if n and runs and runs[-1].length == n and runs[-1].first + runs[-1].rows == row:
            last = runs[-1]
            runs[-1] = Run(last.first, last.rows + 1, n, last.start)
        elif n:
            runs.append(Run(row, 1, n, start))
        start += n
    return runs
