"""kNN-augmented attention (Memorizing Transformers; Wu et al., ICLR 2022) as a block part.

Each head attends over the local context and, separately, over the top-k (key, value) pairs
retrieved from its external memory by its query; a learned per-head gate mixes the two::

    V = g ⊙ V_mem + (1 − g) ⊙ V_local,   g = σ(b_g)

The keys and values of each forward pass's real tokens are added to the memory afterwards (no
gradient flows into it); beyond ``capacity`` entries the oldest go first, as in the paper. The
search is exact (the k largest q·k over the whole memory), on the model's device. The memory is
state of a run, not a weight: it is not saved with the model; :meth:`KNNAttention.reset_memory`
empties it between independent streams.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from ...errors import InputError
from .attention import SelfAttention, attend


class KNNAttention(SelfAttention):
    """:class:`SelfAttention` (the same ``qkv``/``out`` weights) plus one memory per head and
    the gate ``gate`` [H] (b_g, 0 at the start: σ(0) = ½). ``memorize=False`` reads the memory
    without adding to it."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 top_k: int = 32, capacity: Optional[int] = 65536, memorize: bool = True):
        super().__init__(hidden_size, num_heads, dropout, bias)
        self.top_k, self.capacity, self.memorize = top_k, capacity, memorize
        self.gate = nn.Parameter(torch.zeros(num_heads))
        self.memory_keys: Optional[torch.Tensor] = None  # [H, N, D]
        self.memory_values: Optional[torch.Tensor] = None

    def reset_memory(self) -> None:
        self.memory_keys = self.memory_values = None

    def memory_size(self) -> int:
        return 0 if self.memory_keys is None else self.memory_keys.shape[1]

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, *,
                bias: Optional[torch.Tensor] = None, relative: Optional[torch.Tensor] = None,
                rotary: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        if relative is not None or rotary is not None:
            raise InputError("kNN attention takes no NEZHA or rotary positions")
        b, length, width = x.shape
        q, k, v = self.qkv(x).view(b, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        context = attend(q, k, v, mask=mask, bias=bias, dropout=self.dropout if self.training else 0.0)
        if self.memory_size() > 0:
            gate = torch.sigmoid(self.gate).to(q.dtype)[None, :, None, None]
            context = gate * self.retrieve(q) + (1 - gate) * context
        if self.memorize:
            self.remember(k, v, mask)
        return self.out(context.transpose(1, 2).reshape(b, length, width))

    # SelfAttention's other modes would run without the memory: refused, not inherited.
    def at_rows(self, x, rows, **kwargs):
        raise InputError("kNN attention computes every position (it memorises every key): no query rows")

    def packed(self, x, packing, **kwargs):
        raise InputError("kNN attention runs on the padded batch (its memory reads the mask): no packed tokens")

    def cached(self, x, cache, **kwargs):
        raise InputError("kNN attention is an encoder's: it takes no decoder cache")

    def retrieve(self, q: torch.Tensor) -> torch.Tensor:
        """Each query's attention over its head's k best memory entries (by q·k) → [B, H, L, D]."""
        keys, values = self.memory_keys.to(q.dtype), self.memory_values.to(q.dtype)
        k = min(self.top_k, keys.shape[1])
        scores = torch.einsum("bhld,hnd->bhln", q, keys) / math.sqrt(self.head_dim)
        best, index = scores.topk(k, dim=-1)  # [B, H, L, k]
        weights = best.softmax(dim=-1)
        heads = torch.arange(self.num_heads, device=q.device)[None, :, None, None]
        return torch.einsum("bhlk,bhlkd->bhld", weights, values[heads, index])

    @torch.no_grad()
    def remember(self, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Append this pass's (key, value) pairs of real tokens, keeping the newest ``capacity``."""
        real = _real_tokens(mask, k.shape[0], k.shape[2], k.device).reshape(-1)
        keys = k.detach().transpose(0, 1).reshape(self.num_heads, -1, self.head_dim)[:, real]
        values = v.detach().transpose(0, 1).reshape(self.num_heads, -1, self.head_dim)[:, real]
        if self.memory_keys is not None:
            keys = torch.cat([self.memory_keys.to(keys.device), keys], dim=1)
            values = torch.cat([self.memory_values.to(values.device), values], dim=1)
        if self.capacity is not None:
            keys, values = keys[:, -self.capacity:], values[:, -self.capacity:]
        self.memory_keys, self.memory_values = keys, values


def _real_tokens(mask: Optional[torch.Tensor], batch: int, length: int, device) -> torch.Tensor:
    """[B, L] bool of the positions that are real tokens, from an SDPA bool mask [B, 1, Lq|1, Lk]."""
    if mask is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    return mask.expand(batch, 1, mask.shape[2], length)[:, 0].any(dim=1)
